//! Shared helpers of the integration tests: generated datasets, tokens, states, a real server
//! on 127.0.0.1:0, a raw HTTP client for stalling tests.
#![allow(dead_code)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, Method, Request, StatusCode};
use logs_core::{Engine, EngineConfig, ExportRequest};
use logs_format::{Encoder, EncoderOptions, Format};
use logs_server::auth::{Authenticator, TokenSet, TokenStore};
use logs_server::{AppState, ServeOptions, Settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// A token with `service:read` on every application (stored by hash in the tokens file).
pub const READER: &str = "tok-reader-9f86d081884c7d659a2f";
/// A token with `service:write` only.
pub const WRITER: &str = "tok-writer-60303ae22b998861bce3";
/// A token with both scopes on application 1001 only.
pub const APP1001: &str = "tok-app1001-fd61a03af4f77d870fc2";

pub fn tokens_toml() -> String {
    format!(
        "[[tokens]]\nname = \"reader\"\nsha256 = \"{}\"\nscopes = [\"service:read\"]\n\n\
         [[tokens]]\nname = \"writer\"\ntoken = \"{WRITER}\"\nscopes = [\"service:write\"]\n\n\
         [[tokens]]\nname = \"app1001\"\ntoken = \"{APP1001}\"\nscopes = [\"service:read\", \"service:write\"]\n\
         applications = [1001]\n",
        sha256_hex(READER)
    )
}

pub fn sha256_hex(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

pub fn token_auth() -> Authenticator {
    let set = TokenSet::parse(&tokens_toml()).expect("valid tokens");
    Authenticator::new(Some(Arc::new(TokenStore::fixed(set))), None)
}

/// Generates a dataset into `dir` (2 threads, from 2026-10-01).
pub fn generate(dir: &Path, rows: u64, days: u32) {
    let mut options = logs_generate::GenerateOptions::new(dir);
    options.rows = rows;
    options.days = days;
    options.threads = 2;
    logs_generate::generate(&options).expect("generate a dataset");
}

/// A small dataset shared by the tests of one binary: 6 000 rows over 7 days, with an
/// `applications.toml` naming application 1001.
pub fn small_dataset() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), 6_000, 7);
        std::fs::write(
            dir.path().join("applications.toml"),
            "[[applications]]\nid = 1001\nname = \"Shop\"\ntime_zone_name = \"Europe/Berlin\"\n",
        )
        .unwrap();
        dir
    })
    .path()
}

/// A dataset whose CSV export of application 1001 with `fields=error_id,error` is about 60 MB.
pub fn large_dataset() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), 60_000, 1);
        dir
    })
    .path()
}

pub const LARGE_QUERY: &str =
    "application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";

/// A copy of a fresh small dataset (1 day) where the second file of application 1001 (in
/// path order) has its data pages overwritten: its footer still reads, its rows do not.
pub fn dataset_with_corrupt_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(dir.path());
    options.rows = 20_000;
    options.days = 1;
    options.threads = 2;
    options.row_group_rows = 1024;
    options.late_fraction = 0.2;
    logs_generate::generate(&options).unwrap();
    let day = dir.path().join("application_id=1001/date=2026-10-01");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&day).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_file()).collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    let victim = files[1].clone();
    let mut bytes = std::fs::read(&victim).unwrap();
    let end = bytes.len() / 2;
    for b in &mut bytes[4..end] {
        *b = 0xA5;
    }
    std::fs::write(&victim, bytes).unwrap();
    (dir, victim)
}

pub fn engine(root: &Path, config: EngineConfig) -> Arc<Engine> {
    Arc::new(Engine::open(root, config).expect("open the dataset"))
}

pub async fn state(root: &Path, settings: Settings) -> AppState {
    let config = EngineConfig { target_partitions: 2, ..EngineConfig::default() };
    AppState::new(engine(root, config), token_auth(), settings).await.expect("state")
}

/// The export encoded straight from the engine's stream: what the body must be.
pub async fn encode_directly(engine: &Engine, format: Format, query: &str) -> Vec<u8> {
    let request = ExportRequest::parse(query, engine.policy()).unwrap();
    let mut stream = engine.export(&request).await.unwrap();
    let options = EncoderOptions::default().with_bom(request.use_utf8_bom());
    let mut encoder = Encoder::new(format, Vec::new(), &stream.schema(), options).unwrap();
    while let Some(batch) = stream.next().await {
        encoder.write_batch(&batch.unwrap()).unwrap();
    }
    encoder.finish().unwrap()
}

/// One request through the router, without a socket.
pub async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app.clone().oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.expect("a complete body");
    (parts.status, parts.headers, body)
}

pub async fn get(app: &Router, uri: &str, token: Option<&str>) -> (StatusCode, HeaderMap, Bytes) {
    let auth = token.map(|t| format!("OAuth {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    call(app, Method::GET, uri, &headers).await
}

pub fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// Checks the error body's shape and returns it.
pub fn error_body(status: StatusCode, body: &[u8], error_type: &str) -> serde_json::Value {
    let v = json(body);
    assert_eq!(v["code"], status.as_u16(), "{v}");
    assert_eq!(v["errors"][0]["error_type"], error_type, "{v}");
    assert_eq!(v["errors"][0]["message"], v["message"], "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    v
}

pub const EXPORT_CSV: &str = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&\
                              date_until=2026-10-07&fields=error_datetime,error_name,os_name,error_id";

/// A server on 127.0.0.1:0, stopped by [`TestServer::stop`].
pub struct TestServer {
    pub addr: SocketAddr,
    pub state: AppState,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl TestServer {
    pub async fn start(state: AppState, options: ServeOptions) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let app = logs_server::app(state.clone());
        let task = tokio::spawn(logs_server::serve(listener, app, options, async {
            let _ = rx.await;
        }));
        TestServer { addr, state, shutdown: Some(tx), task }
    }

    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    /// Starts the shutdown; [`TestServer::join`] waits for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    pub async fn join(self) {
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("the server stopped")
            .unwrap()
            .unwrap();
    }

    pub async fn stop(mut self) {
        self.begin_shutdown();
        self.join().await;
    }
}

pub fn client() -> reqwest::Client {
    logs_server::install_tls_provider();
    reqwest::Client::builder().timeout(Duration::from_secs(180)).build().unwrap()
}

/// Waits (at most 20 s) until `condition` holds.
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A raw HTTP/1.1 connection with a small receive buffer, for tests that stop reading.
pub struct RawClient {
    pub stream: TcpStream,
    pub received: Vec<u8>,
}

impl RawClient {
    pub async fn get(addr: SocketAddr, target: &str, token: &str) -> RawClient {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(32 * 1024).unwrap();
        let mut stream = socket.connect(addr).await.unwrap();
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: OAuth {token}\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        RawClient { stream, received: Vec::new() }
    }

    /// Reads until at least `n` bytes have arrived in all (or the connection ends).
    pub async fn read_at_least(&mut self, n: usize) {
        let mut buf = vec![0u8; 64 * 1024];
        while self.received.len() < n {
            let read = tokio::time::timeout(Duration::from_secs(30), self.stream.read(&mut buf))
                .await
                .expect("data within 30 s")
                .unwrap();
            if read == 0 {
                return;
            }
            self.received.extend_from_slice(&buf[..read]);
        }
    }

    /// Reads to the end of the connection; `Err` if it was reset.
    pub async fn read_to_end(&mut self) -> std::io::Result<()> {
        let mut rest = Vec::new();
        let result = tokio::time::timeout(Duration::from_secs(180), self.stream.read_to_end(&mut rest))
            .await
            .expect("the end within 180 s");
        self.received.extend_from_slice(&rest);
        result.map(|_| ())
    }

    pub fn status_line(&self) -> String {
        let end = self.received.windows(2).position(|w| w == b"\r\n").unwrap_or(self.received.len());
        String::from_utf8_lossy(&self.received[..end]).into_owned()
    }
}

/// Decodes a chunked HTTP/1.1 response body; `None` if the terminating chunk is missing.
pub fn dechunk(response: &[u8]) -> Option<Vec<u8>> {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let mut rest = &response[head_end..];
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).ok()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// Where [`logged`] keeps what the test binary logged.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything this test binary has logged so far, at every level, as text and as JSON lines
/// (one subscriber for all its tests, installed by the first call).
pub fn logged() -> String {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    let capture = CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        let (text, json) = (capture.clone(), capture.clone());
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::TRACE)
            .with(tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || text.clone()))
            .with(tracing_subscriber::fmt::layer().json().with_writer(move || json.clone()))
            .init();
        capture
    });
    String::from_utf8(capture.0.lock().unwrap().clone()).expect("tracing writes UTF-8")
}
