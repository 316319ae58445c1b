//! A TCP proxy that delays every request by a fixed latency, for the peer benchmark's bucket
//! mode (`benches/peers/run --store s3`): every tool reads the S3 server through it, so every
//! tool sees the same latency, and its counters tell how many requests each one made and how
//! many bytes it was served.
//!
//! ```text
//! delay-proxy --upstream 127.0.0.1:PORT [--delay-ms 10]
//! ```
//!
//! The first line on stdout is `http://127.0.0.1:PORT`, the proxy's address. Then, for every
//! line read on stdin, one line `requests=N bytes=N connections=N`: the requests clients sent so
//! far (each delayed once, however many chunks its body takes), the bytes the server sent back and the connections opened,
//! since the start. It stops at the end of stdin.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::time::Duration;

use logs_testkit::proxy::{FaultProxy, Mode};

fn main() {
    let mut upstream: Option<SocketAddr> = None;
    let mut delay_ms: u64 = 10;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        match (arg.as_str(), value) {
            ("--upstream", Some(v)) => {
                upstream = Some(v.parse().unwrap_or_else(|_| usage(&format!("bad address {v}"))))
            }
            ("--delay-ms", Some(v)) => {
                delay_ms = v.parse().unwrap_or_else(|_| usage(&format!("bad delay {v}")))
            }
            (other, _) => usage(&format!("unknown or incomplete argument {other}")),
        }
    }
    let upstream = upstream.unwrap_or_else(|| usage("--upstream is required"));
    let mode = if delay_ms == 0 { Mode::Pass } else { Mode::Delay(Duration::from_millis(delay_ms)) };
    let proxy = FaultProxy::start_nodelay(upstream, mode);
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", proxy.endpoint());
    let _ = stdout.flush();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        let _ = writeln!(
            stdout,
            "requests={} bytes={} connections={}",
            proxy.requests(),
            proxy.bytes_served(),
            proxy.connections()
        );
        let _ = stdout.flush();
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("delay-proxy: {problem}\nusage: delay-proxy --upstream HOST:PORT [--delay-ms MS]");
    std::process::exit(2)
}
