//! A TCP proxy for faults and latency between a client and a server (the engine and its S3
//! server), switched while it runs:
//!
//! - [`Mode::Pass`]: bytes go through unchanged;
//! - [`Mode::Delay`]: each request waits first (its first chunk; an upload's body follows
//!   without more delay) — the same latency for every client, unlike a delay inside one of
//!   them;
//! - [`Mode::Status`]: every new request is answered with that HTTP status and closed;
//! - [`Mode::FailFirst`]: the next `n` requests get a 503, the ones after pass;
//! - [`Mode::Drop`]: connections are closed as soon as they arrive.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Delay(Duration),
    Status(u16),
    FailFirst(u32),
    Drop,
}

/// A running proxy; it stops accepting when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    mode: Mutex<Mode>,
    requests: AtomicU64,
    stopped: std::sync::atomic::AtomicBool,
    /// Bytes sent from the server to the clients.
    bytes_served: AtomicU64,
    /// Connections the proxy opened to the server.
    connections: AtomicU64,
    /// Requests sent and not yet answered (a connection's request counts from its first chunk
    /// to the first chunk of its answer), and the most there were at once.
    waiting: AtomicU64,
    most_waiting: AtomicU64,
    /// `TCP_NODELAY` on both sockets of every connection.
    nodelay: bool,
}

impl FaultProxy {
    /// A proxy on a free port of `127.0.0.1` in front of `upstream`.
    pub fn start(upstream: SocketAddr, mode: Mode) -> FaultProxy {
        FaultProxy::start_with(upstream, mode, false)
    }

    /// [`FaultProxy::start`] with `TCP_NODELAY` on both sides of every connection, so that the
    /// proxy adds no Nagle wait of its own to a response's last segment (for measurements).
    pub fn start_nodelay(upstream: SocketAddr, mode: Mode) -> FaultProxy {
        FaultProxy::start_with(upstream, mode, true)
    }

    fn start_with(upstream: SocketAddr, mode: Mode, nodelay: bool) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            mode: Mutex::new(mode),
            requests: AtomicU64::new(0),
            stopped: Default::default(),
            bytes_served: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            most_waiting: AtomicU64::new(0),
            nodelay,
        });
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let shared = Arc::clone(&accepting);
                std::thread::spawn(move || connection(client, upstream, &shared));
            }
        });
        FaultProxy { addr, shared }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = mode;
    }

    /// Requests the clients sent so far: the chunks a client sent after the previous answer
    /// began.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Bytes the server sent to the clients so far (counted as they are read from the server,
    /// before they are passed on).
    pub fn bytes_served(&self) -> u64 {
        self.shared.bytes_served.load(Ordering::Relaxed)
    }

    /// Connections opened to the server so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// The most requests that waited for their answers at once so far: requests sent one after
    /// the other's answer count 1.
    pub fn most_at_once(&self) -> u64 {
        self.shared.most_waiting.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Relaxed);
        // Wake the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// What to do with the next request of a connection.
fn next_action(shared: &Shared) -> Mode {
    let mut mode = shared.mode.lock().unwrap();
    match *mode {
        Mode::FailFirst(0) => {
            *mode = Mode::Pass;
            Mode::Pass
        }
        Mode::FailFirst(n) => {
            *mode = Mode::FailFirst(n - 1);
            Mode::Status(503)
        }
        other => other,
    }
}

fn connection(mut client: TcpStream, upstream: SocketAddr, shared: &Arc<Shared>) {
    if shared.stopped.load(Ordering::Relaxed) || next_mode_is_drop(shared) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let Ok(mut server) = TcpStream::connect(upstream) else { return };
    shared.connections.fetch_add(1, Ordering::Relaxed);
    if shared.nodelay {
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
    }
    let (Ok(mut client_reader), Ok(mut server_writer)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    // Whether this connection's request waits for its answer.
    let waiting = Arc::new(AtomicBool::new(false));
    let answered = Arc::clone(&waiting);
    // Server to client: unchanged, counted.
    let served = Arc::clone(shared);
    let back = std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let n = match server.read(&mut buffer) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            served.bytes_served.fetch_add(n as u64, Ordering::Relaxed);
            if answered.swap(false, Ordering::SeqCst) {
                served.waiting.fetch_sub(1, Ordering::SeqCst);
            }
            if client.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = client.shutdown(Shutdown::Write);
    });
    // Client to server: each request after the mode's action.
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match client_reader.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // A request starts with the first chunk the client sends after the previous answer
        // began (HTTP/1.1 clients do not pipeline); the rest of its head and its body (an
        // upload) follow without another action or delay.
        if waiting.swap(true, Ordering::SeqCst) {
            if server_writer.write_all(&buffer[..n]).is_err() {
                break;
            }
            continue;
        }
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let now = shared.waiting.fetch_add(1, Ordering::SeqCst) + 1;
        shared.most_waiting.fetch_max(now, Ordering::SeqCst);
        match next_action(shared) {
            Mode::Pass | Mode::FailFirst(_) => {}
            Mode::Delay(delay) => std::thread::sleep(delay),
            Mode::Status(status) => {
                let reason = if status >= 500 { "Server Error" } else { "Error" };
                let response =
                    format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = client_reader.write_all(response.as_bytes());
                let _ = client_reader.shutdown(Shutdown::Both);
                let _ = server_writer.shutdown(Shutdown::Both);
                break;
            }
            Mode::Drop => {
                let _ = client_reader.shutdown(Shutdown::Both);
                let _ = server_writer.shutdown(Shutdown::Both);
                break;
            }
        }
        if server_writer.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = server_writer.shutdown(Shutdown::Write);
    let _ = back.join();
}

fn next_mode_is_drop(shared: &Shared) -> bool {
    *shared.mode.lock().unwrap() == Mode::Drop
}
