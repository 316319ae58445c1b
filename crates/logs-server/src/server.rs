//! Serving a router on a TCP listener: HTTP/1.1 connections with read and write timeouts,
//! size limits, and graceful shutdown with a deadline.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tower::ServiceExt;

use crate::log::PeerAddr;
use crate::settings::Settings;

/// Connection-level settings of [`serve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// The longest wait for a request's headers, and for the next request on an idle
    /// keep-alive connection.
    pub header_read_timeout: Duration,
    /// The longest a write to the client may make no progress (a client that stopped
    /// reading); then the connection is closed and its export cancelled.
    pub write_timeout: Duration,
    /// The hard limit of a request head (start line and headers) in bytes; beyond it hyper
    /// answers 431 without a body. Keep it above the [`Settings`] limits so that those answer
    /// with the JSON error.
    pub max_head_bytes: usize,
    /// How long running requests may go on after shutdown begins.
    pub shutdown_timeout: Duration,
}

impl ServeOptions {
    /// 10 s to read headers, 60 s write stall, head limit four times the settings' target and
    /// header limits (at least 64 KiB), 30 s to shut down.
    pub fn for_settings(settings: &Settings) -> ServeOptions {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(60),
            max_head_bytes: (4 * (settings.max_url_bytes + settings.max_header_bytes)).max(64 * 1024),
            shutdown_timeout: Duration::from_secs(30),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes; then stops accepting, lets
/// running requests finish for up to `shutdown_timeout`, and closes what is left.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_header_size(options.max_head_bytes)
        .max_buf_size(options.max_head_bytes.max(8192) + 400 * 1024);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let stall = WriteStall::new(options.write_timeout);
        let io = TokioIo::new(WriteTimeout::new(stream, stall.clone()));
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            // Each request starts with the server's write timeout (one request at a time: HTTP/1.1).
            stall.allow(options.write_timeout);
            request.extensions_mut().insert(PeerAddr(peer));
            request.extensions_mut().insert(stall.clone());
            router.clone().oneshot(request)
        });
        let connection = graceful.watch(builder.serve_connection(io, service));
        connections.spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(connections = connections.len(), "shutting down: no longer accepting connections");
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("every connection has finished"),
        () = tokio::time::sleep(options.shutdown_timeout) => {
            tracing::warn!(
                connections = connections.len(),
                "shutdown deadline reached; closing the connections still open"
            );
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// How long a connection's writes may make no progress: the server's write timeout, which a
/// handler may change for its own response (a request extension of every request that
/// [`serve`] reads; absent for requests made in-process).
#[derive(Debug, Clone)]
pub struct WriteStall(Arc<AtomicU64>);

impl WriteStall {
    fn new(timeout: Duration) -> WriteStall {
        WriteStall(Arc::new(AtomicU64::new(timeout.as_millis() as u64)))
    }

    /// Lets this connection's writes stall for up to `timeout` from now on.
    pub fn allow(&self, timeout: Duration) {
        self.0.store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }
}

/// A connection whose writes fail once they have made no progress for its [`WriteStall`].
struct WriteTimeout<T> {
    inner: T,
    stall: WriteStall,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteTimeout<T> {
    fn new(inner: T, stall: WriteStall) -> WriteTimeout<T> {
        WriteTimeout { inner, stall, stalled: None }
    }

    /// Watches the outcome of a write: a pending write starts the clock, or fails once it has
    /// run out; any other outcome is progress and stops the clock.
    fn watch(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.stall.timeout();
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {} s", timeout.as_secs_f64()),
            )));
        }
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::time::Instant;

    #[tokio::test]
    async fn a_stalled_write_fails_after_the_timeout() {
        // A pipe whose reader never reads: writes stall once its buffer is full.
        let (writer, _reader) = tokio::io::duplex(1024);
        let mut io = WriteTimeout::new(writer, WriteStall::new(Duration::from_millis(200)));
        io.write_all(&[0; 1024]).await.unwrap();
        let started = Instant::now();
        let e = io.write_all(&[0; 10]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn progress_resets_the_clock() {
        let (writer, mut reader) = tokio::io::duplex(64);
        // The reader waits a tenth of the timeout between reads (a wide margin for a loaded
        // machine's scheduling), for two and a half timeouts in all: only a clock that each
        // write's progress restarts lets the whole body through.
        let timeout = Duration::from_secs(1);
        let mut io = WriteTimeout::new(writer, WriteStall::new(timeout));
        let drain = tokio::spawn(async move {
            let mut sink = Vec::new();
            for _ in 0..25 {
                tokio::time::sleep(timeout / 10).await;
                let mut buf = [0u8; 64];
                let n = tokio::io::AsyncReadExt::read(&mut reader, &mut buf).await.unwrap();
                sink.extend_from_slice(&buf[..n]);
            }
            sink.len()
        });
        let started = Instant::now();
        io.write_all(&[1; 25 * 64]).await.unwrap();
        assert!(started.elapsed() > 2 * timeout, "the writes took longer than the timeout in all");
        drop(io);
        assert_eq!(drain.await.unwrap(), 25 * 64);
    }
}
