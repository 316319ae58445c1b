//! The access log and the request id.
//!
//! [`access_log`] is the outermost layer of [`crate::app`]. It gives each request an id (the
//! client's `x-request-id` if it is short and plain, else a random one), returns it in the
//! `x-request-id` response header, runs the request inside a `request{id=…}` span (so every
//! event logged for it carries the id), and writes one line per request with target
//! `logs_server::access` when the response body has been sent or dropped:
//!
//! `method`, `path` (with the query; the values of parameters that may hold secrets are
//! replaced by `REDACTED`), `status`, `rows`, `bytes` (sent, after compression), `duration_ms`,
//! `token` (the token's name from the tokens file or the identity provider, never the token),
//! `peer`, `complete`.
//!
//! - `complete` is true when the whole answer went out: the body's end was reached, or as many
//!   bytes as its `Content-Length` were sent (hyper stops polling a body of known length once
//!   it has them all), or the request was a `HEAD` (no body is sent). It is false when the body
//!   ended early: an aborted export, a client that went away, a download cut short.
//! - `rows` are the records in the bytes sent: for a streamed export, those of the chunks
//!   handed to the connection; for a prepared export served whole, its rows once every byte has
//!   been sent; 0 for a range (`206`), a `304`, a `HEAD`, a `202` and an error.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri, header};
use http_body::Frame;
use rand::RngCore;
use tracing::Instrument;

use crate::metrics::Metrics;

/// Query parameters that carry tokens in other OAuth deployments: never logged, and never
/// accepted by `auth`.
pub const TOKEN_PARAMETERS: [&str; 3] = ["oauth_token", "access_token", "token"];

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest path logged; longer ones are cut.
const MAX_LOGGED_TARGET: usize = 2048;

/// The peer address of a connection, put into each request by [`crate::serve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The client's address: the peer, or what a trusted proxy says (`auth::client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

/// The rows of a response whose body is a whole prepared export: counted in the access log
/// once the body has been sent whole (a response extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowsWhenComplete(pub u64);

/// What the handlers tell the access log about a request.
#[derive(Debug)]
pub struct RequestLog {
    token_name: OnceLock<String>,
    rows: AtomicU64,
}

impl RequestLog {
    fn new() -> RequestLog {
        RequestLog { token_name: OnceLock::new(), rows: AtomicU64::new(0) }
    }

    pub fn set_token_name(&self, name: &str) {
        let _ = self.token_name.set(name.to_owned());
    }

    pub fn add_rows(&self, rows: u64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
    }
}

/// The access-log middleware (see the module documentation).
pub async fn access_log(State(metrics): State<Arc<Metrics>>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = client_request_id(request.headers()).unwrap_or_else(new_request_id);
    // Defense in depth: whatever prints these headers with `Debug` shows no token.
    if let header::Entry::Occupied(mut values) = request.headers_mut().entry(header::AUTHORIZATION) {
        values.iter_mut().for_each(|value| value.set_sensitive(true));
    }
    let log = Arc::new(RequestLog::new());
    request.extensions_mut().insert(log.clone());
    let route = request.extensions().get::<MatchedPath>().map(|m| m.as_str().to_owned());
    let entry = Entry {
        method: request.method().clone(),
        target: redacted_target(request.uri()),
        peer: request.extensions().get::<PeerAddr>().map(|p| p.0),
        client: request.extensions().get::<ClientAddr>().map(|c| c.0),
        started,
        log,
        status: 0,
        bytes: 0,
        expected: None,
        rows_when_complete: 0,
        complete: false,
    };
    let span = tracing::info_span!("request", id = %request_id);
    let response = next.run(request).instrument(span.clone()).await;

    let (mut parts, body) = response.into_parts();
    metrics.count_request(route.as_deref().unwrap_or("unmatched"), parts.status.as_u16());
    if let Ok(value) = HeaderValue::try_from(request_id) {
        parts.headers.insert(REQUEST_ID, value);
    }
    parts.headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    parts.headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    let expected = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let rows_when_complete = parts.extensions.get::<RowsWhenComplete>().map_or(0, |r| r.0);
    let entry = Entry { status: parts.status.as_u16(), expected, rows_when_complete, ..entry };
    Response::from_parts(parts, Body::new(LoggedBody { inner: body, entry: Some(entry), span }))
}

/// The client's request id, if it is 1 to 64 characters of letters, digits, `.`, `_`, `-`.
fn client_request_id(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(REQUEST_ID)?.to_str().ok()?;
    let plain = (1..=64).contains(&value.len())
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    plain.then(|| value.to_owned())
}

fn new_request_id() -> String {
    let mut bytes = [0u8; 12];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Whether the value of query parameter `name` may be a secret and must not be logged.
pub fn is_secret_parameter(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    TOKEN_PARAMETERS.contains(&name.as_str())
        || ["token", "secret", "pass", "auth", "credential", "key", "bearer", "session", "signature"]
            .iter()
            .any(|s| name.contains(s))
}

/// The request target for the log: path and query as received, with the values of secret
/// parameters replaced by `REDACTED`, cut at 2 KiB.
pub fn redacted_target(uri: &Uri) -> String {
    let mut out = uri.path().to_owned();
    if let Some(query) = uri.query() {
        out.push('?');
        for (i, segment) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            let name = form_urlencoded::parse(segment.as_bytes()).next().map(|(name, _)| name);
            match name {
                Some(name) if is_secret_parameter(&name) => {
                    out.push_str(segment.split('=').next().unwrap_or(""));
                    out.push_str("=REDACTED");
                }
                _ => out.push_str(segment),
            }
        }
    }
    if out.len() > MAX_LOGGED_TARGET {
        let mut cut = MAX_LOGGED_TARGET;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

struct Entry {
    method: Method,
    target: String,
    peer: Option<SocketAddr>,
    client: Option<std::net::IpAddr>,
    started: Instant,
    log: Arc<RequestLog>,
    status: u16,
    bytes: u64,
    /// The response's `Content-Length`, if it has one.
    expected: Option<u64>,
    rows_when_complete: u64,
    complete: bool,
}

impl Entry {
    /// Whether a body that was dropped (not polled to its end) went out whole.
    fn sent_whole(&self, at_end: bool) -> bool {
        at_end || self.method == Method::HEAD || self.expected == Some(self.bytes)
    }

    fn write(&self, span: &tracing::Span) {
        let token = self.log.token_name.get().map_or("-", String::as_str);
        let peer = self.peer.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
        let client = self.client.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
        let rows =
            self.log.rows.load(Ordering::Relaxed) + if self.complete { self.rows_when_complete } else { 0 };
        tracing::info!(
            target: "logs_server::access",
            parent: span,
            method = %self.method,
            path = %self.target,
            status = self.status,
            rows,
            bytes = self.bytes,
            duration_ms = self.started.elapsed().as_millis() as u64,
            token,
            client = %client,
            peer = %peer,
            complete = self.complete,
            "request"
        );
    }
}

/// The response body, counted; the access line is written when it ends or is dropped.
struct LoggedBody {
    inner: Body,
    entry: Option<Entry>,
    span: tracing::Span,
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                if let Some(entry) = &mut self.entry {
                    entry.bytes += len;
                }
            }
            Poll::Ready(None) => {
                if let Some(mut entry) = self.entry.take() {
                    entry.complete = true;
                    entry.write(&self.span);
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            // A body known to be empty (or never polled because it had nothing) is complete.
            entry.complete = entry.sent_whole(http_body::Body::is_end_stream(&self.inner));
            entry.write(&self.span);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_values_are_redacted() {
        let uri: Uri =
            "/logs/v1/export/errors.csv?os_name=ios&access_token=abc&x=1&Token=d&my_secret=e&to%6Ben=f"
                .parse()
                .unwrap();
        assert_eq!(
            redacted_target(&uri),
            "/logs/v1/export/errors.csv?os_name=ios&access_token=REDACTED&x=1&Token=REDACTED&\
             my_secret=REDACTED&to%6Ben=REDACTED"
        );
        // Names that commonly carry secrets in other APIs are redacted too.
        let uri: Uri =
            "/x?api_key=1&apikey=2&auth=3&bearer=4&X-Amz-Signature=5&passwd=6&sessionid=7&city=Berlin"
                .parse()
                .unwrap();
        assert_eq!(
            redacted_target(&uri),
            "/x?api_key=REDACTED&apikey=REDACTED&auth=REDACTED&bearer=REDACTED&X-Amz-Signature=REDACTED&\
             passwd=REDACTED&sessionid=REDACTED&city=Berlin"
        );
        // No parameter or field of the API is taken for a secret.
        let names = ["application_id", "date_since", "date_until", "fields", "date_dimension", "limit"];
        let names = names.into_iter().chain([
            "use_utf8_bom",
            "skip_unavailable_shards",
            "parts_count",
            "part_number",
        ]);
        for name in names.chain(logs_core::Field::all().map(logs_core::Field::name)) {
            assert!(!is_secret_parameter(name), "{name}");
        }
    }

    #[test]
    fn long_targets_are_cut() {
        let uri: Uri = format!("/x?a={}", "é".repeat(3000).replace('é', "%C3%A9")).parse().unwrap();
        assert!(redacted_target(&uri).len() <= MAX_LOGGED_TARGET + '…'.len_utf8());
    }

    #[test]
    fn request_ids() {
        let mut headers = HeaderMap::new();
        assert_eq!(client_request_id(&headers), None);
        headers.insert(REQUEST_ID, HeaderValue::from_static("abc-123"));
        assert_eq!(client_request_id(&headers).as_deref(), Some("abc-123"));
        headers.insert(REQUEST_ID, HeaderValue::from_static("a b"));
        assert_eq!(client_request_id(&headers), None);
        assert_eq!(new_request_id().len(), 24);
    }
}
