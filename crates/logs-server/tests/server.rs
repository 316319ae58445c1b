//! The real server on 127.0.0.1:0 with a real HTTP client: statuses over the wire, gzip,
//! byte-identical bodies, aborted and cancelled exports, bounded memory, shutdown.

mod common;

use std::io::Read;
use std::time::Duration;

use common::*;
use http::{StatusCode, header};
use logs_core::EngineConfig;
use logs_format::Format;
use logs_server::{AppState, ServeOptions, Settings};

async fn start(root: &std::path::Path, settings: Settings, config: EngineConfig) -> TestServer {
    let options = ServeOptions::for_settings(&settings);
    let state = AppState::new(engine(root, config), token_auth(), settings).await.unwrap();
    TestServer::start(state, options).await
}

fn one_partition() -> EngineConfig {
    EngineConfig { target_partitions: 1, ..EngineConfig::default() }
}

#[tokio::test]
async fn statuses_over_the_wire() {
    let server = start(small_dataset(), Settings::default(), one_partition()).await;
    let client = client();
    let send = |path: &str, token: Option<&str>| {
        let mut request = client.get(server.url(path));
        if let Some(token) = token {
            request = request.header("Authorization", format!("OAuth {token}"));
        }
        request.send()
    };
    let cases: [(&str, Option<&str>, StatusCode); 8] = [
        (EXPORT_CSV, Some(READER), StatusCode::OK),
        ("/healthz", None, StatusCode::OK),
        ("/management/v1/applications", Some(APP1001), StatusCode::OK),
        (EXPORT_CSV, None, StatusCode::UNAUTHORIZED),
        (EXPORT_CSV, Some(WRITER), StatusCode::FORBIDDEN),
        ("/logs/v1/export/errors.txt", Some(READER), StatusCode::NOT_FOUND),
        ("/logs/v1/export/errors.csv?application_id=1001", Some(READER), StatusCode::BAD_REQUEST),
        (&format!("{EXPORT_CSV}&error_name={}", "z".repeat(10_000)), Some(READER), StatusCode::URI_TOO_LONG),
    ];
    for (path, token, expected) in cases {
        let response = send(path, token).await.unwrap();
        assert_eq!(response.status(), expected, "{}", &path[..path.len().min(80)]);
        assert!(response.headers().contains_key("x-request-id"));
    }

    let response = client
        .post(server.url(EXPORT_CSV))
        .header("Authorization", format!("OAuth {READER}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(response.headers()[header::ALLOW].to_str().unwrap().contains("GET"));

    // Limits: another export of the same token is 429, beyond the server's limit 503.
    // (The defaults: 2 per token, 8 in all.)
    let held: Vec<_> = (0..2)
        .map(|_| server.state.limiter().acquire(logs_server::auth::TokenHash::of(READER)).unwrap())
        .collect();
    let again = send(EXPORT_CSV, Some(READER)).await.unwrap();
    assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(again.headers()[header::RETRY_AFTER], "5");
    let others: Vec<_> = (0..6)
        .map(|i| server.state.limiter().acquire(logs_server::auth::TokenHash::of(&format!("t{i}"))).unwrap())
        .collect();
    let busy = send(EXPORT_CSV, Some(APP1001)).await.unwrap();
    assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    error_body(busy.status(), &busy.bytes().await.unwrap(), "server_busy");
    drop((held, others));

    // Headers above the configured limit: the JSON 431.
    let response = client
        .get(server.url(EXPORT_CSV))
        .header("Authorization", format!("OAuth {READER}"))
        .header("x-filler", "f".repeat(20 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    error_body(response.status(), &response.bytes().await.unwrap(), "headers_too_large");
    // Beyond the connection's hard limit hyper answers 431 itself, without a body.
    let response =
        client.get(server.url("/healthz")).header("x-filler", "f".repeat(200 * 1024)).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    server.stop().await;
}

#[tokio::test]
async fn the_body_is_byte_identical_to_the_engine_stream_encoded() {
    let server = start(small_dataset(), Settings::default(), one_partition()).await;
    let engine = engine(small_dataset(), one_partition());
    let client = client();
    for (format, path) in [(Format::Csv, "errors.csv"), (Format::Json, "errors.json")] {
        let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&\
                     fields=error_datetime,error,error_json,city,mcc,service_device_id&use_utf8_bom=true";
        let expected = encode_directly(&engine, format, query).await;
        let response = client
            .get(server.url(&format!("/logs/v1/export/{path}?{query}")))
            .header("Authorization", format!("OAuth {READER}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.headers().get(header::CONTENT_LENGTH).is_none(), "streamed, not buffered");
        assert_eq!(response.headers()[header::TRANSFER_ENCODING], "chunked");
        let body = response.bytes().await.unwrap();
        assert!(body.len() > 100_000);
        assert!(body == expected, "{format}: {} bytes, expected {}", body.len(), expected.len());
    }
    server.stop().await;
}

#[tokio::test]
async fn gzip_when_asked_and_exactly_gzip() {
    let server = start(small_dataset(), Settings::default(), one_partition()).await;
    let client = client();
    let url = server.url(&EXPORT_CSV.replace("fields=", "fields=error,"));
    let auth = format!("OAuth {READER}");
    let plain = client.get(&url).header("Authorization", &auth).send().await.unwrap();
    assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
    let plain = plain.bytes().await.unwrap();

    for accept in ["gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.5", "*"] {
        let response = client
            .get(&url)
            .header("Authorization", &auth)
            .header("Accept-Encoding", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip", "{accept}");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/csv; charset=utf-8");
        let compressed = response.bytes().await.unwrap();
        assert!(compressed.len() * 3 < plain.len(), "{} vs {}", compressed.len(), plain.len());
        let mut decompressed = Vec::new();
        flate2::read::GzDecoder::new(&compressed[..]).read_to_end(&mut decompressed).unwrap();
        assert!(decompressed == plain, "{accept}");
    }
    for accept in ["br", "identity", "gzip;q=0"] {
        let response = client
            .get(&url)
            .header("Authorization", &auth)
            .header("Accept-Encoding", accept)
            .send()
            .await
            .unwrap();
        assert!(response.headers().get(header::CONTENT_ENCODING).is_none(), "{accept}");
    }
    // Error answers are compressed too when asked, and still JSON inside.
    let response = client.get(server.url(EXPORT_CSV)).header("Accept-Encoding", "gzip").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    server.stop().await;
}

#[tokio::test]
async fn a_failure_after_the_first_byte_aborts_the_connection() {
    let (dir, _victim) = dataset_with_corrupt_file();
    let config = EngineConfig { target_partitions: 1, batch_size: 512, ..EngineConfig::default() };
    let server = start(dir.path(), Settings::default(), config).await;
    // Long rows, so that several chunks of about 1 MiB go out before the corrupt file.
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let target = format!("/logs/v1/export/errors.csv?{query}");

    let response = client()
        .get(server.url(&target))
        .header("Authorization", format!("OAuth {READER}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "the first file reads, so the answer starts");
    let body = response.bytes().await;
    assert!(body.is_err(), "the body must not end cleanly: {:?}", body.map(|b| b.len()));

    // On the wire: no terminating chunk.
    let mut raw = RawClient::get(server.addr, &target, READER).await;
    raw.read_to_end().await.ok();
    assert!(raw.status_line().contains("200"), "{}", raw.status_line());
    assert!(raw.received.len() > 1 << 20, "{} bytes", raw.received.len());
    assert_eq!(dechunk(&raw.received), None, "a response that looks complete");

    // Compressed, the same: the gzip stream is cut off, not finished.
    let response = client()
        .get(server.url(&target))
        .header("Authorization", format!("OAuth {READER}"))
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
    assert!(response.bytes().await.is_err());

    let counts = server.state.metrics().exports();
    assert_eq!((counts.failed, counts.completed, counts.running), (3, 0, 0));
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_the_query() {
    let server = start(large_dataset(), Settings::default(), one_partition()).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let mut raw = RawClient::get(server.addr, &target, READER).await;
    raw.read_at_least(200_000).await;
    assert!(raw.status_line().contains("200"));
    let metrics = server.state.metrics().clone();
    assert_eq!(metrics.exports().running, 1);
    drop(raw);
    eventually("the export is cancelled", || {
        let c = metrics.exports();
        c.running == 0 && c.cancelled == 1
    })
    .await;
    assert_eq!(server.state.limiter().running(), 0, "the permit is back");
    eventually("the buffers are freed", || metrics.exports().buffered == 0).await;
    server.stop().await;
}

/// The large export as CSV, encoded without the server (more than 40 MB).
async fn large_csv() -> Vec<u8> {
    let csv = encode_directly(&engine(large_dataset(), one_partition()), Format::Csv, LARGE_QUERY).await;
    assert!(csv.len() > 40_000_000, "the export is large: {}", csv.len());
    csv
}

/// A client of the large export that has read its first 100 KB and reads no more for now.
async fn stalled_client(server: &TestServer) -> RawClient {
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let mut raw = RawClient::get(server.addr, &target, READER).await;
    raw.read_at_least(100_000).await;
    raw
}

/// With spilling off, a client that stops reading holds its query, in bounded memory.
#[tokio::test]
async fn a_stalled_client_holds_bounded_memory_and_then_gets_everything() {
    let settings = Settings { chunk_queue: 2, max_spill_bytes: 0, ..Settings::default() };
    let server = start(large_dataset(), settings, one_partition()).await;
    let metrics = server.state.metrics().clone();
    let total = large_csv().await.len() as u64;
    let mut raw = stalled_client(&server).await;
    // Stop reading; wait until the producer stops too (its byte count no longer moves).
    let mut last = 0;
    let mut steady = 0;
    while steady < 10 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = metrics.exports().bytes;
        steady = if now == last { steady + 1 } else { 0 };
        last = now;
    }
    let stalled = metrics.exports();
    eprintln!(
        "stalled after encoding {} of {total} bytes; buffered peak {}",
        stalled.bytes, stalled.buffered_peak
    );
    assert_eq!(stalled.running, 1);
    assert!(stalled.bytes < total / 3, "encoding stopped early: {} of {total} bytes", stalled.bytes);
    // The queue (2 chunks), one chunk being encoded, one in the connection's hands; a chunk is
    // the encoder's 1 MiB buffer plus at most one row.
    let bound = 4 * (1 << 20) + 4 * 64 * 1024;
    assert!(stalled.buffered_peak <= bound, "peak {} > {bound}", stalled.buffered_peak);

    raw.read_to_end().await.unwrap();
    let body = dechunk(&raw.received).expect("a complete chunked body");
    assert_eq!(body.len() as u64, total);
    eventually("the export completes", || metrics.exports().completed == 1).await;
    assert!(metrics.exports().buffered_peak <= bound);
    server.stop().await;
}

/// A client that stops reading (a loader inserting its first chunk into a slow database) has
/// the rest of its export kept in a spill file: the query runs to its end and gives its permit
/// back, memory stays bounded, the server's write timeout does not cut the connection, and the
/// client gets every byte when it reads on.
#[tokio::test]
async fn a_stalled_client_is_waited_for_with_the_rest_spilled_and_gets_everything() {
    let spill_dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        chunk_queue: 2,
        spill_after: Duration::from_millis(200),
        spill_dir: Some(spill_dir.path().to_owned()),
        ..Settings::default()
    };
    let options =
        ServeOptions { write_timeout: Duration::from_millis(300), ..ServeOptions::for_settings(&settings) };
    let state =
        AppState::new(engine(large_dataset(), one_partition()), token_auth(), settings).await.unwrap();
    let server = TestServer::start(state, options).await;
    let metrics = server.state.metrics().clone();
    let expected = large_csv().await;
    let total = expected.len() as u64;
    let mut raw = stalled_client(&server).await;
    // The client reads nothing for ten times the write timeout; meanwhile the whole export is
    // encoded, into the queue and the spill, and the permit comes back.
    eventually("the whole export is encoded", || metrics.exports().bytes >= total).await;
    eventually("the permit is back", || server.state.limiter().running() == 0).await;
    let spilled = spilled_bytes(&server.state);
    assert!(spilled > total / 2, "most of the export waits on disk: {spilled} of {total} bytes");
    assert_eq!(std::fs::read_dir(spill_dir.path()).unwrap().count(), 0, "spill files have no name");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = metrics.exports();
    assert_eq!((counts.running, counts.cancelled), (1, 0), "the export waits for its client");
    // The queue (2 chunks), one chunk being encoded, one in the connection's hands.
    let bound = 4 * (1 << 20) + 4 * 64 * 1024;
    assert!(counts.buffered_peak <= bound, "peak {} > {bound}", counts.buffered_peak);

    raw.read_to_end().await.unwrap();
    let body = dechunk(&raw.received).expect("a complete chunked body");
    assert_eq!(body.len() as u64, total);
    assert_eq!(body, expected);
    eventually("the export completes", || metrics.exports().completed == 1).await;
    eventually("the spill is given back", || spilled_bytes(&server.state) == 0).await;
    server.stop().await;
}

/// `logs_spill_bytes` of the admin API's metrics.
fn spilled_bytes(state: &AppState) -> u64 {
    let text = state.metrics_text();
    let line = text.lines().find(|l| l.starts_with("logs_spill_bytes ")).expect("logs_spill_bytes");
    line.split(' ').nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off_after_the_reader_idle_timeout() {
    let settings = Settings { reader_idle_timeout: Duration::from_millis(500), ..Settings::default() };
    let options = ServeOptions::for_settings(&settings);
    let state =
        AppState::new(engine(large_dataset(), one_partition()), token_auth(), settings).await.unwrap();
    let server = TestServer::start(state, options).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let mut raw = RawClient::get(server.addr, &target, READER).await;
    raw.read_at_least(100_000).await;
    let metrics = server.state.metrics().clone();
    eventually("the stalled export is cancelled", || {
        let c = metrics.exports();
        c.running == 0 && c.cancelled == 1
    })
    .await;
    // The connection was closed: reading on finds an end without the terminating chunk.
    raw.read_to_end().await.ok();
    assert_eq!(dechunk(&raw.received), None);
    eventually("the spill is given back", || spilled_bytes(&server.state) == 0).await;
    server.stop().await;
}

/// A client that runs one export at a time never meets a per-token limit of one: a complete
/// body, or a HEAD's headers, come after the export has given its permit back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_export_at_a_time_never_meets_the_per_token_limit() {
    let settings = Settings { max_exports_per_token: 1, ..Settings::default() };
    let server = start(small_dataset(), settings, EngineConfig::default()).await;
    let client = client();
    let json = EXPORT_CSV.replace("errors.csv", "errors.json");
    for round in 0..20 {
        for (method, target) in
            [(http::Method::GET, EXPORT_CSV), (http::Method::HEAD, EXPORT_CSV), (http::Method::GET, &json)]
        {
            let response = client
                .request(method.clone(), server.url(target))
                .header("Authorization", format!("OAuth {READER}"))
                .send()
                .await
                .unwrap();
            let status = response.status();
            let body = response.bytes().await.unwrap();
            assert_eq!(status, StatusCode::OK, "round {round}, {method} {target}: {body:?}");
            assert_eq!(body.is_empty(), method == http::Method::HEAD);
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn shutdown_lets_running_exports_finish() {
    // A deadline that a debug build on a loaded machine meets with the whole export.
    let settings = Settings::default();
    let options =
        ServeOptions { shutdown_timeout: Duration::from_secs(300), ..ServeOptions::for_settings(&settings) };
    let state =
        AppState::new(engine(large_dataset(), one_partition()), token_auth(), settings).await.unwrap();
    let mut server = TestServer::start(state, options).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let mut raw = RawClient::get(server.addr, &target, READER).await;
    raw.read_at_least(100_000).await;
    let addr = server.addr;
    server.begin_shutdown();
    // New connections are refused once the listener is closed.
    eventually("the listener is closed", || std::net::TcpStream::connect(addr).is_err()).await;
    raw.read_to_end().await.unwrap();
    let body = dechunk(&raw.received).expect("the running export finished");
    assert!(body.len() > 40_000_000);
    server.join().await;
}

#[tokio::test]
async fn shutdown_closes_what_outlives_the_deadline() {
    let settings = Settings::default();
    let options = ServeOptions {
        shutdown_timeout: Duration::from_millis(300),
        ..ServeOptions::for_settings(&settings)
    };
    let state =
        AppState::new(engine(large_dataset(), one_partition()), token_auth(), settings).await.unwrap();
    let metrics = state.metrics().clone();
    let mut server = TestServer::start(state, options).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let mut raw = RawClient::get(server.addr, &target, READER).await;
    raw.read_at_least(100_000).await;
    server.begin_shutdown();
    server.join().await;
    eventually("the export is cancelled", || metrics.exports().running == 0).await;
    assert_eq!(metrics.exports().cancelled, 1);
    raw.read_to_end().await.ok();
    assert_eq!(dechunk(&raw.received), None);
}
