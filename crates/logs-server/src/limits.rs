//! Request size limits and the number of exports that may run at once.
//!
//! [`check_request_size`] answers 414 or 431 (with the JSON error body) for a request target or
//! headers above the configured sizes, and 400 for an HTTP/1.1 request without exactly one
//! valid Host. The HTTP connection has a larger hard limit behind it
//! (see [`crate::ServeOptions`]) where hyper answers 431 without a body.
//!
//! [`ExportLimiter`] counts running exports in all and per token: the per-token limit answers
//! 429, the global one 503, both with `Retry-After`. A permit is held until the export's last
//! byte has been handed over (or the export was cancelled), not just until the headers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Version, header};

use crate::auth::TokenHash;
use crate::error::ApiError;
use crate::log::PeerAddr;
use crate::settings::Settings;

/// The request-head middleware: size limits (414, 431) and the Host rules of HTTP/1.1 (400).
pub async fn check_request_size(State(settings): State<Settings>, request: Request, next: Next) -> Response {
    let target = request.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > settings.max_url_bytes {
        return ApiError::UriTooLong { max: settings.max_url_bytes }.into_response();
    }
    // As on the wire: `name: value\r\n`.
    let headers: usize = request.headers().iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum();
    if headers > settings.max_header_bytes {
        return ApiError::HeadersTooLarge { max: settings.max_header_bytes }.into_response();
    }
    // Only for requests read from a connection (`serve` marks them with the peer's address):
    // an embedder's in-process request has no Host to check.
    let from_wire = request.extensions().get::<PeerAddr>().is_some();
    if from_wire && request.version() == Version::HTTP_11 && !has_one_valid_host(request.headers()) {
        return ApiError::BadRequest("an HTTP/1.1 request needs exactly one valid Host header")
            .into_response();
    }
    next.run(request).await
}

/// RFC 9112 §3.2: exactly one Host, whose value is a host and optional port (or empty).
fn has_one_valid_host(headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else { return false };
    host.len() <= 255
        && host
            .as_bytes()
            .iter()
            .all(|&b| b.is_ascii_graphic() && !matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\'))
}

/// Counts running exports, in all and per token.
#[derive(Debug)]
pub struct ExportLimiter {
    max_total: usize,
    max_per_token: usize,
    retry_after: Duration,
    running: Mutex<Running>,
}

#[derive(Debug, Default)]
struct Running {
    total: usize,
    per_token: HashMap<TokenHash, usize>,
}

/// The right to run one export; given back when dropped.
#[derive(Debug)]
pub struct ExportPermit {
    limiter: Arc<ExportLimiter>,
    token: TokenHash,
}

impl ExportLimiter {
    pub fn new(max_total: usize, max_per_token: usize, retry_after: Duration) -> ExportLimiter {
        ExportLimiter { max_total, max_per_token, retry_after, running: Mutex::default() }
    }

    /// A permit for one more export of `token`, or the error to answer.
    pub fn acquire(self: &Arc<Self>, token: TokenHash) -> Result<ExportPermit, ApiError> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let of_token = running.per_token.get(&token).copied().unwrap_or(0);
        if of_token >= self.max_per_token {
            return Err(ApiError::TooManyExports { max: self.max_per_token, retry_after: self.retry_after });
        }
        if running.total >= self.max_total {
            return Err(ApiError::ServerBusy { retry_after: self.retry_after });
        }
        running.total += 1;
        *running.per_token.entry(token).or_default() += 1;
        Ok(ExportPermit { limiter: self.clone(), token })
    }

    /// Exports holding a permit now.
    pub fn running(&self) -> usize {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

impl Drop for ExportPermit {
    fn drop(&mut self) {
        let mut running = self.limiter.running.lock().unwrap_or_else(|e| e.into_inner());
        running.total -= 1;
        if let Some(n) = running.per_token.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                running.per_token.remove(&self.token);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_token_then_global() {
        let limiter = Arc::new(ExportLimiter::new(3, 2, Duration::from_secs(1)));
        let (a, b) = (TokenHash([1; 32]), TokenHash([2; 32]));
        let a1 = limiter.acquire(a).unwrap();
        let _a2 = limiter.acquire(a).unwrap();
        assert!(matches!(limiter.acquire(a), Err(ApiError::TooManyExports { max: 2, .. })));
        let _b1 = limiter.acquire(b).unwrap();
        assert!(matches!(limiter.acquire(b), Err(ApiError::ServerBusy { .. })));
        drop(a1);
        assert_eq!(limiter.running(), 2);
        let _b2 = limiter.acquire(b).unwrap();
        assert!(limiter.running.lock().unwrap().per_token.len() == 2);
    }
}
