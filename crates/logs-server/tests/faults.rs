//! Faults over HTTP (issue 5): unreadable files, files that vanish or change during a
//! transfer, damaged pages, and an identity provider that answers garbage.
//!
//! The documented outcomes (docs/api.md, "Errors" and "The export's response"): a storage fault
//! before the first byte is 503 `storage_unavailable` with a JSON body that names no path;
//! with `skip_unavailable_shards=true` the complete export of the readable files and the
//! count in `X-Skipped-Shards`; a failure after the first byte aborts the transfer (no final
//! chunk), never a response that ends cleanly but short; a provider in trouble is 503 and a
//! token is never accepted unchecked. Permission denied over HTTP runs `logs serve` as an
//! unprivileged user: `crates/logs-cli/tests/faults.rs`, as does schema drift over HTTP (its
//! Parquet writer is a dev-dependency of that crate).

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use logs_core::EngineConfig;
use logs_format::Format;
use logs_server::auth::introspection::{ClientCredentials, Secret};
use logs_server::auth::{Authenticator, IntrospectionConfig, Introspector};
use logs_server::{AppState, ServeOptions, Settings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DAY2: &str = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02";
const DAY2_FOLDER: &str = "application_id=1001/date=2026-10-02";

/// Something done to a file while an export reads it: (what, how).
type FileAction = (&'static str, fn(&Path));

fn one_partition() -> EngineConfig {
    EngineConfig { target_partitions: 1, batch_size: 512, ..EngineConfig::default() }
}

async fn app_over(root: &Path) -> (axum::Router, AppState) {
    let state =
        AppState::new(engine(root, one_partition()), token_auth(), Settings::default()).await.unwrap();
    (logs_server::app(state.clone()), state)
}

/// Unreadable files made from a valid one: zero bytes, cut in the footer, cut in the data,
/// not Parquet at all.
fn add_unreadable_files(folder: &Path) -> Vec<PathBuf> {
    let valid = std::fs::read(folder.join("part-00000.parquet")).unwrap();
    let n = valid.len();
    let footer = u32::from_le_bytes(valid[n - 8..n - 4].try_into().unwrap()) as usize;
    [
        ("zz-zero-bytes.parquet", Vec::new()),
        ("zz-cut-in-the-footer.parquet", valid[..n - 8 - footer / 2].to_vec()),
        ("zz-cut-in-the-data.parquet", valid[..(n - 8 - footer) / 2].to_vec()),
        ("zz-not-parquet.parquet", b"error_id,os_name\n1,ios\n".to_vec()),
    ]
    .into_iter()
    .map(|(name, bytes)| {
        let path = folder.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    })
    .collect()
}

#[tokio::test]
async fn unreadable_files_are_503_before_the_first_byte_or_skipped_and_counted() {
    // Two identical datasets; the second gets unreadable files besides its own.
    let pristine = tempfile::tempdir().unwrap();
    generate(pristine.path(), 2000, 2);
    let damaged = tempfile::tempdir().unwrap();
    generate(damaged.path(), 2000, 2);
    let bad = add_unreadable_files(&damaged.path().join(DAY2_FOLDER));
    let (app, state) = app_over(damaged.path()).await;
    let reference = engine(pristine.path(), one_partition());

    for (format, name) in [(Format::Csv, "errors.csv"), (Format::Json, "errors.json")] {
        let query = format!("{DAY2}&fields=error_datetime,error_id,error,os_name,service_device_id");
        let (status, headers, body) =
            get(&app, &format!("/logs/v1/export/{name}?{query}"), Some(READER)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(headers.get("x-skipped-shards").is_none());
        let v = error_body(status, &body, "storage_unavailable");
        assert!(v["message"].as_str().unwrap().contains("skip_unavailable_shards=true"), "{v}");
        assert!(!String::from_utf8_lossy(&body).contains("zz-"), "the answer names no file: {v}");

        let query = format!("{query}&skip_unavailable_shards=true");
        let (status, headers, body) =
            get(&app, &format!("/logs/v1/export/{name}?{query}"), Some(READER)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["x-skipped-shards"], bad.len().to_string().as_str());
        let expected = encode_directly(&reference, format, &query).await;
        assert!(expected.len() > 10_000);
        assert!(body == expected, "{format}: not the complete export of the readable files");
    }
    let metrics = state.metrics_text();
    assert!(metrics.contains(&format!("logs_export_skipped_files_total {}", 2 * bad.len())), "{metrics}");
}

/// A dataset whose day of application 1001 has about ten files of 1 000 rows with long rows:
/// the transfer is well under way before the last file is read.
fn dataset_of_many_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(dir.path());
    options.rows = 12_000;
    options.days = 1;
    options.threads = 2;
    options.max_file_rows = 1_000;
    logs_generate::generate(&options).unwrap();
    dir
}

#[tokio::test]
async fn a_file_deleted_or_replaced_during_the_transfer_aborts_it_or_it_completes() {
    let dir = dataset_of_many_files();
    let folder = dir.path().join("application_id=1001/date=2026-10-01");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let last = files.pop().unwrap();
    let original = std::fs::read(&last).unwrap();
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let expected = encode_directly(&engine(dir.path(), one_partition()), Format::Csv, query).await;
    let state =
        AppState::new(engine(dir.path(), one_partition()), token_auth(), Settings::default()).await.unwrap();
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let target = format!("/logs/v1/export/errors.csv?{query}");

    let actions: [FileAction; 3] = [
        ("deleted", |path| std::fs::remove_file(path).unwrap()),
        ("replaced by garbage", |path| std::fs::write(path, vec![0xA5; 300_000]).unwrap()),
        ("cut in half", |path| {
            let bytes = std::fs::read(path).unwrap();
            std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap()
        }),
    ];
    let mut aborted = 0;
    for (what, action) in actions {
        let mut raw = RawClient::get(server.addr, &target, READER).await;
        raw.read_at_least(200_000).await;
        assert!(raw.status_line().contains("200"), "{what}: {}", raw.status_line());
        action(&last);
        raw.read_to_end().await.ok();
        match dechunk(&raw.received) {
            None => aborted += 1,
            Some(body) => assert!(
                body == expected,
                "{what}: a clean end after {} of {} bytes",
                body.len(),
                expected.len()
            ),
        }
        std::fs::write(&last, &original).unwrap();
    }
    eventually("the exports end", || server.state.metrics().exports().running == 0).await;
    assert_eq!(
        server.state.metrics().exports().failed as usize,
        aborted,
        "each aborted transfer is a failed export"
    );
    server.stop().await;
}

/// A dataset whose day 2026-10-02 of application 1001 is one file, read as one batch: any
/// damage to its pages shows before the status is sent. Also its bytes.
fn dataset_with_one_file_for_the_day() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), 2000, 2);
    std::fs::remove_file(dir.path().join(DAY2_FOLDER).join("part-00000.parquet")).unwrap();
    let victim = dir.path().join(DAY2_FOLDER).join("late-00000.parquet");
    let bytes = std::fs::read(&victim).unwrap();
    (dir, victim, bytes)
}

/// Copies of `valid` with damaged data pages and an intact footer: one byte flipped at 24
/// places, and the first half overwritten.
fn damaged_pages(valid: &[u8]) -> Vec<Vec<u8>> {
    let n = valid.len();
    let data_end = n - 8 - u32::from_le_bytes(valid[n - 8..n - 4].try_into().unwrap()) as usize;
    let mut copies: Vec<Vec<u8>> = (0..24)
        .map(|i| {
            let mut bytes = valid.to_vec();
            bytes[4 + (data_end - 4) * i / 24] ^= 0xFF;
            bytes
        })
        .collect();
    let mut overwritten = valid.to_vec();
    overwritten[4..n / 2].fill(0xA5);
    copies.push(overwritten);
    copies
}

async fn whole_file_batches(root: &Path) -> axum::Router {
    let config = EngineConfig { target_partitions: 1, batch_size: 1 << 16, ..EngineConfig::default() };
    logs_server::app(AppState::new(engine(root, config), token_auth(), Settings::default()).await.unwrap())
}

#[tokio::test]
async fn damaged_pages_before_the_first_byte_are_an_error_status_never_a_short_200() {
    let (dir, victim, valid) = dataset_with_one_file_for_the_day();
    let app = whole_file_batches(dir.path()).await;
    let uri = format!("/logs/v1/export/errors.csv?{DAY2}&fields=error_id,error,mcc,os_name");
    let mut errors = 0;
    for bytes in damaged_pages(&valid) {
        std::fs::write(&victim, bytes).unwrap();
        let (status, _, body) = get(&app, &uri, Some(READER)).await;
        if status == StatusCode::OK {
            // Damage in a value can go unnoticed (Parquet has no checksums here); the body is whole.
            assert!(body.ends_with(b"\n") && body.starts_with(b"error_id,error,mcc,os_name\n"));
        } else {
            assert!(status.is_server_error(), "{status}");
            assert_eq!(json(&body)["code"], status.as_u16());
            errors += 1;
        }
    }
    assert!(errors > 0);
}

#[tokio::test]
async fn damaged_pages_before_the_first_byte_are_503_storage_unavailable() {
    let (dir, victim, valid) = dataset_with_one_file_for_the_day();
    let app = whole_file_batches(dir.path()).await;
    let uri = format!("/logs/v1/export/errors.csv?{DAY2}&fields=error_id,error,mcc,os_name");
    for (i, bytes) in damaged_pages(&valid).into_iter().enumerate() {
        std::fs::write(&victim, bytes).unwrap();
        let (status, _, body) = get(&app, &uri, Some(READER)).await;
        if status != StatusCode::OK {
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "damage {i}");
            error_body(status, &body, "storage_unavailable");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The identity provider answering garbage. `tests/introspection.rs` covers a provider that is
// down (connection refused), slow (beyond the timeout), answers HTTP 500, answers `<html>`,
// or refuses our client credentials. Here: the rest of what a broken provider can send.

/// What the provider sends back.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// `200 OK` with this JSON text.
    Json(&'static str),
    /// These exact bytes, then the connection is closed.
    Raw(&'static [u8]),
    /// `200 OK` and a JSON document larger than the 64 KiB the service reads.
    Huge,
    /// `200 OK`, chunked, one small chunk every 100 ms, never ending.
    Trickle,
    /// The connection closed right after the request.
    Close,
}

/// A provider on loopback that answers every request with `answer`, counting requests.
async fn provider(answer: Answer) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let counter = counter.clone();
            tokio::spawn(async move {
                if read_request(&mut socket).await.is_none() {
                    return;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = respond(&mut socket, answer).await;
            });
        }
    });
    (addr, calls)
}

/// Reads one request (head and `Content-Length` body).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(())
}

async fn respond(socket: &mut tokio::net::TcpStream, answer: Answer) -> std::io::Result<()> {
    let ok = |body: &str| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    match answer {
        Answer::Json(body) => socket.write_all(ok(body).as_bytes()).await,
        Answer::Raw(bytes) => socket.write_all(bytes).await,
        Answer::Huge => {
            let padding = "x".repeat(1 << 20);
            let body = format!(
                "{{\"active\":true,\"scope\":\"service:read\",\"applications\":[1001],\"padding\":\"{padding}\"}}"
            );
            socket.write_all(ok(&body).as_bytes()).await
        }
        Answer::Trickle => {
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
                .await?;
            socket.write_all(b"1\r\n{\r\n").await?;
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                socket.write_all(b"1\r\n \r\n").await?;
            }
        }
        Answer::Close => Ok(()),
    }
}

async fn app_with_provider(addr: SocketAddr) -> axum::Router {
    let credentials =
        ClientCredentials { client_id: "logs-client".into(), client_secret: Secret("s".into()) };
    let mut config =
        IntrospectionConfig::new(format!("http://{addr}/introspect").parse().unwrap(), credentials);
    config.timeout = Duration::from_secs(2);
    let auth = Authenticator::new(None, Some(Arc::new(Introspector::new(config).unwrap())));
    let state = AppState::new(engine(small_dataset(), EngineConfig::default()), auth, Settings::default())
        .await
        .unwrap();
    logs_server::app(state)
}

#[tokio::test]
async fn a_provider_answering_garbage_is_503_never_a_pass_and_not_cached() {
    let cases: [(&str, Answer); 13] = [
        ("no `active` member", Answer::Json(r#"{"scope":"service:read","applications":[1001]}"#)),
        (
            "`active` as a string",
            Answer::Json(r#"{"active":"true","scope":"service:read","applications":[1001]}"#),
        ),
        (
            "`active` as a number",
            Answer::Json(r#"{"active":1,"scope":"service:read","applications":[1001]}"#),
        ),
        ("`active` null", Answer::Json(r#"{"active":null,"scope":"service:read","applications":[1001]}"#)),
        (
            "`exp` as text",
            Answer::Json(r#"{"active":true,"exp":"tomorrow","scope":"service:read","applications":[1001]}"#),
        ),
        ("a JSON array", Answer::Json(r#"[{"active":true,"scope":"service:read","applications":[1001]}]"#)),
        ("JSON null", Answer::Json("null")),
        ("an empty body", Answer::Json("")),
        (
            "truncated JSON",
            Answer::Raw(b"HTTP/1.1 200 OK\r\ncontent-length: 80\r\n\r\n{\"active\":true,\"sco"),
        ),
        ("a body above 64 KiB", Answer::Huge),
        ("a body that never ends", Answer::Trickle),
        ("a connection closed without an answer", Answer::Close),
        (
            "a redirect to a provider that would say yes",
            Answer::Raw(
                b"HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:9/introspect\r\ncontent-length: 0\r\n\r\n",
            ),
        ),
    ];
    for (what, answer) in cases {
        let (addr, calls) = provider(answer).await;
        let app = app_with_provider(addr).await;
        for attempt in 1..=2 {
            let started = Instant::now();
            let (status, headers, body) = get(&app, EXPORT_CSV, Some("tok-garbage")).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{what}");
            assert_eq!(headers[http::header::RETRY_AFTER], "5", "{what}");
            error_body(status, &body, "identity_provider_unavailable");
            // The timeout (2 s) bounds every wait, with room for a loaded machine.
            assert!(started.elapsed() < Duration::from_secs(8), "{what}: {:?}", started.elapsed());
            assert_eq!(calls.load(Ordering::SeqCst), attempt, "{what}: a failed answer must not be cached");
        }
    }
}

#[tokio::test]
async fn members_of_the_wrong_type_never_grant_access() {
    let cases: [(&str, &str, &str); 6] = [
        ("`scope` as a number", r#"{"active":true,"scope":42,"applications":[1001]}"#, "insufficient_scope"),
        (
            "`scope` as a list",
            r#"{"active":true,"scope":["service:read"],"applications":[1001]}"#,
            "insufficient_scope",
        ),
        ("nothing but `active`", r#"{"active":true}"#, "insufficient_scope"),
        (
            "applications as an object",
            r#"{"active":true,"scope":"service:read","applications":{"1001":true}}"#,
            "access_denied",
        ),
        (
            "applications as a number",
            r#"{"active":true,"scope":"service:read","applications":1001}"#,
            "access_denied",
        ),
        (
            "an application id that is not a number",
            r#"{"active":true,"scope":"service:read","applications":["1001x"]}"#,
            "access_denied",
        ),
    ];
    for (what, answer, error_type) in cases {
        let (addr, _) = provider(Answer::Json(answer)).await;
        let app = app_with_provider(addr).await;
        let (status, _, body) = get(&app, EXPORT_CSV, Some("tok-odd")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{what}");
        error_body(status, &body, error_type);
    }
}
