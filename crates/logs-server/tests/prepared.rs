//! Prepared exports over a real socket: 202 then 200 with the file; a broken download resumed
//! with `Range`; 304; the gzip copy; a reader pausing longer than the write timeout; "more
//! parts" and a split whose union is the export; expiry and the spool's bound; a failed job;
//! callers with different rights; the policy `always`; a spool reopened after a crash.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use logs_core::{DatasetLocation, EngineConfig, S3Options};
use logs_format::Format;
use logs_server::prepared::{PreparePolicy, Prepared, PreparedConfig};
use logs_server::{AppState, ServeOptions, Settings};
use logs_testkit::file_names;
use logs_testkit::machine::SmallDisk;
use tokio::io::AsyncReadExt;

const WIDE: &str = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07\
                    &fields=error_id,error_datetime,error_name,os_name,error,city,service_device_id";

/// Answers `202` at once (no wait for the job), as most tests here look at that answer.
fn config(spool: &Path) -> PreparedConfig {
    PreparedConfig {
        retry_after: Duration::from_secs(1),
        wait: Duration::ZERO,
        ..PreparedConfig::new(DatasetLocation::Local(spool.into()))
    }
}

async fn prepared_state(root: &Path, config: PreparedConfig) -> AppState {
    prepared_state_with(root, Settings::default(), config).await
}

async fn prepared_state_with(root: &Path, settings: Settings, config: PreparedConfig) -> AppState {
    let prepared = Prepared::open(config, &S3Options::default()).await.expect("open the spool");
    state(root, settings).await.with_prepared(prepared)
}

/// A GET with the reader's token and `headers`.
async fn get_with(url: &str, token: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client().get(url).header("authorization", format!("OAuth {token}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// Repeats the request while it answers 202 (checking each 202), at most 180 s; the first other
/// answer, and how many 202s came before it.
async fn until_done(url: &str, token: &str, headers: &[(&str, &str)]) -> (reqwest::Response, usize) {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut accepted = 0;
    // When the last 202 was asked for, and how long its job had run.
    let mut previous: Option<(Instant, f64)> = None;
    loop {
        let asked = Instant::now();
        let response = get_with(url, token, headers).await;
        if response.status() != StatusCode::ACCEPTED {
            return (response, accepted);
        }
        accepted += 1;
        // The job's estimated remaining time (the configured 1 s before there is one), at most 60 s.
        let retry_after: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
        assert_eq!(response.headers()["content-type"], "application/json; charset=utf-8");
        let body = json(&response.bytes().await.unwrap());
        assert_eq!(body["status"], "preparing", "{body}");
        assert!(body["rows"].as_u64().is_some() && body["bytes"].as_u64().is_some(), "{body}");
        // The job's time, in seconds: it cannot have grown more than the time between the
        // two requests (a millisecond allowed for rounding).
        let seconds = body["seconds"].as_f64().unwrap_or(-1.0);
        assert!(seconds >= 0.0, "{body}");
        if let Some((then, before)) = previous {
            assert!(seconds - before <= then.elapsed().as_secs_f64() + 0.001, "{before} s, then {body}");
        }
        previous = Some((asked, seconds));
        assert!(Instant::now() < deadline, "still 202 after 180 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The spool's files once the last job has given its lease up: a job's export is served from
/// its manifest, written just before the job deletes its `<key>.lease`.
async fn settled(dir: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = file_names(dir);
        if !names.iter().any(|name| name.ends_with(".lease")) {
            return names;
        }
        assert!(Instant::now() < deadline, "a lease stayed: {names:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn etag_of(response: &reqwest::Response) -> String {
    response.headers()["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_requested_export_is_accepted_then_served_whole_with_its_length_and_etag() {
    let spool = tempfile::tempdir().unwrap();
    let state = prepared_state(small_dataset(), config(spool.path())).await;
    let expected = encode_directly(state.engine(), Format::Csv, WIDE.split_once('?').unwrap().1).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let url = server.url(WIDE);

    let first = get_with(&url, READER, &[("prefer", "respond-async")]).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert_eq!(first.headers()["preference-applied"], "respond-async");
    let (done, _) = until_done(&url, READER, &[("prefer", "respond-async")]).await;
    assert_eq!(done.status(), StatusCode::OK);
    let headers = done.headers().clone();
    assert_eq!(headers["content-type"], "text/csv; charset=utf-8");
    assert_eq!(headers["accept-ranges"], "bytes");
    assert_eq!(headers["x-skipped-shards"], "0");
    assert_eq!(headers["content-length"], expected.len().to_string().as_str());
    let etag = etag_of(&done);
    let body = done.bytes().await.unwrap();
    assert_eq!(body.as_ref(), expected.as_slice());
    assert_eq!(etag, format!("\"{}\"", sha256_hex_bytes(&body)));
    // `<key>.<job>.csv`, `<key>.<job>.csv.gz` and `<key>.manifest.json`, as operations.md says.
    let names = settled(spool.path()).await;
    let shape = |name: &str| name.split('.').map(str::len).collect::<Vec<_>>();
    let kinds: Vec<_> = names.iter().map(|name| shape(name)).collect();
    assert_eq!(kinds, [vec![64, 16, 3], vec![64, 16, 3, 2], vec![64, 8, 4]], "{names:?}");
    assert!(names[0].ends_with(".csv") && names[1].ends_with(".csv.gz"), "{names:?}");
    assert!(names[2].ends_with(".manifest.json"), "{names:?}");
    let metrics = server.state.metrics_text();
    let spool_bytes: u64 = std::fs::read_dir(spool.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_name().to_string_lossy().ends_with(".manifest.json"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(metrics.contains(&format!("\nlogs_spool_bytes {spool_bytes}\n")), "{metrics}");
    assert!(metrics.contains("\nlogs_prepared_jobs_running 0\n"), "{metrics}");
    // The room the job reserved as it wrote is given back once it has ended.
    assert!(metrics.contains("\nlogs_spool_reserved_bytes 0\n"), "{metrics}");

    // Without `Prefer` or a conditional header, the same export is streamed, as without a spool.
    let streamed = get_with(&url, READER, &[]).await;
    assert_eq!(streamed.status(), StatusCode::OK);
    assert!(streamed.headers().get("etag").is_none() && streamed.headers().get("content-length").is_none());
    assert_eq!(streamed.bytes().await.unwrap().as_ref(), expected.as_slice());
    server.stop().await;
}

fn sha256_hex_bytes(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn a_broken_download_resumes_with_range_to_identical_bytes_and_304_and_gzip_answer_from_the_copies() {
    let spool = tempfile::tempdir().unwrap();
    let state = prepared_state(small_dataset(), config(spool.path())).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let url = server.url(WIDE);
    let (done, _) = until_done(&url, READER, &[("prefer", "respond-async")]).await;
    let etag = etag_of(&done);
    let whole = done.bytes().await.unwrap();
    assert!(whole.len() > 200_000, "{}", whole.len());

    // A download that breaks after some bytes: the connection is dropped mid-body.
    let mut broken = raw_get(server.addr, WIDE, &["Prefer: respond-async"]).await;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    while received.len() < 100_000 {
        let n = broken.read(&mut buf).await.unwrap();
        assert!(n > 0, "the connection ended early");
        received.extend_from_slice(&buf[..n]);
    }
    drop(broken);
    assert!(received.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let head_end = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let kept = received[head_end..].to_vec();
    assert!(kept.len() < whole.len() && whole.starts_with(&kept));

    // Resume where it broke, as curl -C and download managers do.
    let range = format!("bytes={}-", kept.len());
    let resumed = get_with(&url, READER, &[("range", &range), ("if-range", &etag)]).await;
    assert_eq!(resumed.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        resumed.headers()["content-range"],
        format!("bytes {}-{}/{}", kept.len(), whole.len() - 1, whole.len()).as_str()
    );
    assert_eq!(etag_of(&resumed), etag);
    let rest = resumed.bytes().await.unwrap();
    assert_eq!([kept.as_slice(), rest.as_ref()].concat(), whole.as_ref());

    // Ranges in the middle and at the end; past the end: 416 with the length.
    let middle = get_with(&url, READER, &[("range", "bytes=1000-1999")]).await;
    assert_eq!(middle.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(middle.bytes().await.unwrap().as_ref(), &whole[1000..2000]);
    let suffix = get_with(&url, READER, &[("range", "bytes=-10")]).await;
    assert_eq!(suffix.bytes().await.unwrap().as_ref(), &whole[whole.len() - 10..]);
    let past = get_with(&url, READER, &[("range", &format!("bytes={}-", whole.len()))]).await;
    assert_eq!(past.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(past.headers()["content-range"], format!("bytes */{}", whole.len()).as_str());
    error_body(StatusCode::RANGE_NOT_SATISFIABLE, &past.bytes().await.unwrap(), "range_not_satisfiable");
    // An If-Range of another version sends the whole export.
    let stale = get_with(&url, READER, &[("range", "bytes=10-"), ("if-range", "\"0000\"")]).await;
    assert_eq!(stale.status(), StatusCode::OK);
    assert_eq!(stale.bytes().await.unwrap(), whole);

    // 304 for the current version; 200 for another.
    let same = get_with(&url, READER, &[("if-none-match", &etag)]).await;
    assert_eq!(same.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(etag_of(&same), etag);
    assert!(same.bytes().await.unwrap().is_empty());
    let other = get_with(&url, READER, &[("if-none-match", "\"0000\""), ("prefer", "respond-async")]).await;
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(other.bytes().await.unwrap(), whole);

    // The gzip copy: its own ETag, its own length and ranges, the same export once decompressed.
    let gz = get_with(&url, READER, &[("prefer", "respond-async"), ("accept-encoding", "gzip")]).await;
    assert_eq!(gz.status(), StatusCode::OK);
    assert_eq!(gz.headers()["content-encoding"], "gzip");
    let gz_etag = etag_of(&gz);
    assert_ne!(gz_etag, etag);
    let gz_length: usize = gz.headers()["content-length"].to_str().unwrap().parse().unwrap();
    let compressed = gz.bytes().await.unwrap();
    assert_eq!(compressed.len(), gz_length);
    assert!(compressed.len() < whole.len() / 2);
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(compressed.as_ref()), &mut plain).unwrap();
    assert_eq!(plain, whole.as_ref());
    let gz_tail = get_with(
        &url,
        READER,
        &[("range", "bytes=100-"), ("accept-encoding", "gzip"), ("if-range", &gz_etag)],
    )
    .await;
    assert_eq!(gz_tail.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(gz_tail.headers()["content-encoding"], "gzip");
    assert_eq!(gz_tail.bytes().await.unwrap().as_ref(), &compressed[100..]);
    server.stop().await;
}

/// A raw HTTP/1.1 GET with the reader's token and `extra` header lines, with a small receive
/// buffer.
async fn raw_get(addr: std::net::SocketAddr, target: &str, extra: &[&str]) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(32 * 1024).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let extra: String = extra.iter().map(|line| format!("{line}\r\n")).collect();
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: OAuth {READER}\r\n{extra}Connection: close\r\n\r\n"
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    stream
}

#[tokio::test]
async fn a_reader_pausing_longer_than_the_write_timeout_still_receives_a_prepared_export_whole() {
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig { download_write_timeout: Duration::from_secs(30), ..config(spool.path()) };
    let settings = Settings::default();
    let engine_config = EngineConfig { target_partitions: 2, ..EngineConfig::default() };
    let state =
        AppState::new(engine(large_dataset(), engine_config), token_auth(), settings.clone()).await.unwrap();
    let state = state.with_prepared(Prepared::open(config, &S3Options::default()).await.unwrap());
    let options =
        ServeOptions { write_timeout: Duration::from_millis(500), ..ServeOptions::for_settings(&settings) };
    let server = TestServer::start(state, options).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let (done, _) = until_done(&server.url(&target), READER, &[("prefer", "respond-async")]).await;
    let length: usize = done.headers()["content-length"].to_str().unwrap().parse().unwrap();
    drop(done);
    assert!(length > 30_000_000, "{length}");

    // A client with a small receive buffer reads a little, then pauses for four write timeouts.
    let pausing = |extra: &'static [&'static str]| {
        let target = target.clone();
        let addr = server.addr;
        async move {
            let mut stream = raw_get(addr, &target, extra).await;
            let mut received = vec![0u8; 64 * 1024];
            let first = stream.read(&mut received).await.unwrap();
            received.truncate(first);
            tokio::time::sleep(Duration::from_secs(2)).await;
            let mut rest = Vec::new();
            let ended =
                tokio::time::timeout(Duration::from_secs(180), stream.read_to_end(&mut rest)).await.unwrap();
            received.extend_from_slice(&rest);
            (ended.is_ok(), received)
        }
    };
    let (ended, received) = pausing(&["Prefer: respond-async"]).await;
    assert!(ended, "the connection was reset");
    let head_end = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(received.starts_with(b"HTTP/1.1 200 OK"));
    assert_eq!(received.len() - head_end, length, "the whole prepared export");

    // The same pause on a streamed export exceeds the server's write timeout too, but a streamed
    // export waits for its reader (`reader_idle_timeout`): the whole body arrives.
    let (ended, received) = pausing(&[]).await;
    assert!(ended, "the connection was reset");
    let body = dechunk(&received).expect("a complete chunked body");
    assert_eq!(body.len(), length, "the whole streamed export");
    server.stop().await;
}

/// The loader's way with "more parts": try the export whole, then 2, 4, 8… parts; every part
/// fetched as a prepared export. The parts' bodies.
async fn download_in_parts(server: &TestServer, target: &str) -> (usize, Vec<Vec<u8>>) {
    let mut parts = 1;
    loop {
        let mut bodies = Vec::new();
        let mut too_large = false;
        for number in 0..parts {
            let target = if parts == 1 {
                target.to_owned()
            } else {
                format!("{target}&parts_count={parts}&part_number={number}")
            };
            let (done, accepted) =
                until_done(&server.url(&target), READER, &[("prefer", "respond-async")]).await;
            assert!(accepted >= 1, "each part is prepared first");
            if done.status() == StatusCode::BAD_REQUEST {
                let body = error_body(StatusCode::BAD_REQUEST, &done.bytes().await.unwrap(), "too_large");
                assert!(body["message"].as_str().unwrap().ends_with("Try to use more parts."), "{body}");
                assert_eq!(body["errors"][0]["location"], "parts_count");
                too_large = true;
                break;
            }
            assert_eq!(done.status(), StatusCode::OK);
            bodies.push(done.bytes().await.unwrap().to_vec());
        }
        if !too_large {
            return (parts, bodies);
        }
        parts *= 2;
        assert!(parts <= 64, "still too large in 64 parts");
    }
}

/// `max_export_bytes` is the largest export prepared: one of exactly that size is, one a byte
/// larger is refused.
#[tokio::test]
async fn an_export_of_exactly_the_largest_size_is_prepared() {
    let probe = tempfile::tempdir().unwrap();
    let state = prepared_state(small_dataset(), config(probe.path())).await;
    let whole = encode_directly(state.engine(), Format::Csv, WIDE.split_once('?').unwrap().1).await;
    let size = whole.len() as u64;
    for (max, status) in [(size, StatusCode::OK), (size - 1, StatusCode::BAD_REQUEST)] {
        let spool = tempfile::tempdir().unwrap();
        let config = PreparedConfig { max_export_bytes: Some(max), ..config(spool.path()) };
        let state = prepared_state(small_dataset(), config).await;
        let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
        let (done, _) = until_done(&server.url(WIDE), READER, &[("prefer", "respond-async")]).await;
        assert_eq!(done.status(), status, "at most {max} bytes, the export {size}");
        let body = done.bytes().await.unwrap();
        match status {
            StatusCode::OK => assert!(body == whole),
            _ => _ = error_body(status, &body, "too_large"),
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn too_large_answers_more_parts_and_the_parts_together_are_the_export() {
    let spool = tempfile::tempdir().unwrap();
    let state = prepared_state(small_dataset(), config(spool.path())).await;
    let whole = encode_directly(state.engine(), Format::Csv, WIDE.split_once('?').unwrap().1).await;
    let max = whole.len() as u64 / 3;
    let config = PreparedConfig { max_export_bytes: Some(max), ..config(spool.path()) };
    let state = prepared_state(small_dataset(), config).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;

    let (parts, bodies) = download_in_parts(&server, WIDE).await;
    assert!(parts >= 4, "{parts}");
    let lines = |body: &[u8]| -> Vec<String> {
        String::from_utf8(body.to_vec()).unwrap().lines().map(str::to_owned).collect()
    };
    let header = lines(&whole)[0].clone();
    let mut union: Vec<String> = Vec::new();
    for body in &bodies {
        assert!(body.len() as u64 <= max);
        let body = lines(body);
        assert_eq!(body[0], header);
        union.extend(body[1..].iter().cloned());
    }
    let mut expected = lines(&whole)[1..].to_vec();
    expected.sort();
    union.sort();
    assert_eq!(union.len(), expected.len());
    assert_eq!(union, expected);
    // The failed attempt left nothing in the spool: only the parts are there.
    assert_eq!(settled(spool.path()).await.len(), 3 * parts);
    server.stop().await;
}

#[tokio::test]
async fn exports_expire_and_the_spool_bound_deletes_the_oldest() {
    let spool = tempfile::tempdir().unwrap();
    let expiring = PreparedConfig { ttl: Duration::from_secs(4), ..config(spool.path()) };
    let state = prepared_state(small_dataset(), expiring).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let url = server.url(WIDE);
    let (done, _) = until_done(&url, READER, &[("prefer", "respond-async")]).await;
    assert_eq!(done.status(), StatusCode::OK);
    drop(done);
    assert_eq!(settled(spool.path()).await.len(), 3);
    // The sweep (every two seconds with this time to keep) deletes it within 4 to 7 s…
    let deadline = Instant::now() + Duration::from_secs(30);
    while !file_names(spool.path()).is_empty() {
        assert!(Instant::now() < deadline, "not swept: {:?}", file_names(spool.path()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // …and the same request is prepared again.
    assert_eq!(get_with(&url, READER, &[("prefer", "respond-async")]).await.status(), StatusCode::ACCEPTED);
    server.stop().await;

    // A bound that holds one export, not two.
    let spool = tempfile::tempdir().unwrap();
    let probe = prepared_state(small_dataset(), config(spool.path())).await;
    let probe_server = TestServer::start(probe, ServeOptions::for_settings(&Settings::default())).await;
    let (done, _) = until_done(&probe_server.url(WIDE), READER, &[("prefer", "respond-async")]).await;
    drop(done);
    probe_server.stop().await;
    let one: u64 =
        std::fs::read_dir(spool.path()).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    let bounded = PreparedConfig { max_spool_bytes: one * 3 / 2, ..config(spool.path()) };
    let state = prepared_state(small_dataset(), bounded).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    assert_eq!(
        get_with(&server.url(WIDE), READER, &[("prefer", "respond-async")]).await.status(),
        StatusCode::OK
    );
    // The same rows with two columns swapped: another export of the same size.
    let other = WIDE.replace("fields=error_id,error_datetime", "fields=error_datetime,error_id");
    let (done, _) = until_done(&server.url(&other), READER, &[("prefer", "respond-async")]).await;
    assert_eq!(done.status(), StatusCode::OK);
    drop(done);
    assert_eq!(settled(spool.path()).await.len(), 3, "the first export made room for the second");
    assert_eq!(
        get_with(&server.url(WIDE), READER, &[("prefer", "respond-async")]).await.status(),
        StatusCode::ACCEPTED
    );
    server.stop().await;
}

#[tokio::test]
async fn a_failed_job_answers_its_failure_once_and_leaves_nothing_that_could_be_served() {
    let (data, _victim) = dataset_with_corrupt_file();
    let spool = tempfile::tempdir().unwrap();
    let state = prepared_state(data.path(), config(spool.path())).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let target = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01\
                  &fields=error_id,error";
    let url = server.url(target);
    let (failed, accepted) = until_done(&url, READER, &[("prefer", "respond-async")]).await;
    assert!(accepted >= 1);
    let status = failed.status();
    let body = failed.bytes().await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&body));
    error_body(StatusCode::SERVICE_UNAVAILABLE, &body, "storage_unavailable");
    assert!(file_names(spool.path()).is_empty(), "{:?}", file_names(spool.path()));
    // Told once: the next request starts again; this one waits for its job's end, and is
    // answered that job's failure rather than 202.
    let waited = get_with(&url, READER, &[("prefer", "respond-async, wait=60")]).await;
    let status = waited.status();
    let body = waited.bytes().await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&body));
    error_body(StatusCode::SERVICE_UNAVAILABLE, &body, "storage_unavailable");
    // That failure, too, was told once.
    assert_eq!(get_with(&url, READER, &[("prefer", "respond-async")]).await.status(), StatusCode::ACCEPTED);
    server.stop().await;
}

#[tokio::test]
async fn callers_with_different_rights_share_a_job_only_where_both_may_read() {
    let spool = tempfile::tempdir().unwrap();
    let state = prepared_state(small_dataset(), config(spool.path())).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;

    // Application 1002: prepared for the reader, refused to the token of 1001 alone.
    let other = server.url(&WIDE.replace("application_id=1001", "application_id=1002"));
    let (done, _) = until_done(&other, READER, &[("prefer", "respond-async")]).await;
    assert_eq!(done.status(), StatusCode::OK);
    let etag = etag_of(&done);
    for headers in [
        vec![("prefer", "respond-async")],
        vec![("range", "bytes=0-10")],
        vec![("if-none-match", etag.as_str())],
    ] {
        let denied = get_with(&other, APP1001, &headers).await;
        assert_eq!(denied.status(), StatusCode::FORBIDDEN, "{headers:?}");
        error_body(StatusCode::FORBIDDEN, &denied.bytes().await.unwrap(), "access_denied");
    }

    // Application 1001: the second caller joins the first one's job and gets the same file.
    // Both ask at once, so that the job (of a small export) is still running when the second
    // request arrives.
    let url = server.url(WIDE);
    let (first, (theirs, accepted)) = tokio::join!(
        get_with(&url, READER, &[("prefer", "respond-async")]),
        until_done(&url, APP1001, &[("prefer", "respond-async")])
    );
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert!(accepted >= 1, "joined while running");
    let mine = get_with(&url, READER, &[("prefer", "respond-async")]).await;
    assert_eq!(etag_of(&theirs), etag_of(&mine));
    assert_eq!(theirs.bytes().await.unwrap(), mine.bytes().await.unwrap());
    // One job: one export in the spool for 1001, one for 1002.
    assert_eq!(settled(spool.path()).await.len(), 6);
    server.stop().await;
}

#[tokio::test]
async fn with_the_policy_always_a_client_that_asks_nothing_gets_202_then_the_file() {
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig { policy: PreparePolicy::Always, ..config(spool.path()) };
    let state = prepared_state(small_dataset(), config).await;
    let expected = encode_directly(state.engine(), Format::Csv, WIDE.split_once('?').unwrap().1).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let url = server.url(WIDE);
    let first = get_with(&url, READER, &[]).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert!(first.headers().get("preference-applied").is_none());
    let (done, _) = until_done(&url, READER, &[]).await;
    assert_eq!(done.bytes().await.unwrap().as_ref(), expected.as_slice());

    // `Cache-Control: no-cache` prepares it again; `Prefer: wait` waits for the job.
    let fresh = get_with(&url, READER, &[("cache-control", "no-cache")]).await;
    assert_eq!(fresh.status(), StatusCode::ACCEPTED);
    let waited = get_with(&server.url(&format!("{WIDE}&limit=10")), READER, &[("prefer", "wait=30")]).await;
    assert_eq!(waited.status(), StatusCode::OK);
    let body = waited.bytes().await.unwrap();
    assert_eq!(csv::Reader::from_reader(body.as_ref()).records().count(), 10);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_count_against_the_export_limits() {
    let spool = tempfile::tempdir().unwrap();
    let settings = Settings { max_exports_per_token: 1, ..Settings::default() };
    let state = prepared_state_with(large_dataset(), settings.clone(), config(spool.path())).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&settings)).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    assert_eq!(
        get_with(&server.url(&target), READER, &[("prefer", "respond-async")]).await.status(),
        StatusCode::ACCEPTED
    );
    // Another export of the same token while the job runs: 429; joining the job is not another.
    let prepared = server.state.prepared().unwrap().clone();
    assert_eq!(prepared.usage().2, 1, "the job (a 60 MB export) is still running");
    let busy =
        get_with(&server.url(&format!("{target}&limit=5")), READER, &[("prefer", "respond-async")]).await;
    assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(busy.headers().contains_key("retry-after"));
    let (done, _) = until_done(&server.url(&target), READER, &[("prefer", "respond-async")]).await;
    assert_eq!(done.status(), StatusCode::OK);
    drop(done);
    server.stop().await;
}

#[tokio::test]
async fn a_reopened_spool_serves_what_was_complete_and_nothing_that_was_not() {
    let spool = tempfile::tempdir().unwrap();
    let state = prepared_state(small_dataset(), config(spool.path())).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let (done, _) = until_done(&server.url(WIDE), READER, &[("prefer", "respond-async")]).await;
    let etag = etag_of(&done);
    let whole = done.bytes().await.unwrap();
    let complete = settled(spool.path()).await;
    server.stop().await;
    // What a crash in the middle of another job leaves: its copies written in part, without a
    // manifest, and a local store's temporary file.
    let key = complete[0].split('.').next().unwrap().to_owned();
    let cut = "f".repeat(64);
    std::fs::write(spool.path().join(format!("{cut}.csv")), &whole[..1000]).unwrap();
    std::fs::write(spool.path().join(format!("{cut}.csv.gz#1")), b"partial").unwrap();

    let state = prepared_state(small_dataset(), config(spool.path())).await;
    assert_eq!(file_names(spool.path()), complete, "the incomplete job's files are deleted on start");
    assert!(complete.iter().all(|name| name.starts_with(&key)));
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let served = get_with(&server.url(WIDE), READER, &[("prefer", "respond-async")]).await;
    assert_eq!(served.status(), StatusCode::OK);
    assert_eq!(etag_of(&served), etag);
    assert_eq!(served.bytes().await.unwrap(), whole);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_job_cleanly_and_the_spool_still_takes_what_fits() {
    let Some(disk) = SmallDisk::mount("4m") else { return };
    let state = prepared_state(large_dataset(), config(disk.path())).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let target = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let (failed, _) = until_done(&server.url(&target), READER, &[("prefer", "respond-async")]).await;
    let status = failed.status();
    let body = failed.bytes().await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&body));
    let body = error_body(StatusCode::SERVICE_UNAVAILABLE, &body, "spool_unavailable");
    assert!(!body.to_string().contains(&disk.path().display().to_string()), "no path reaches the client");
    assert!(file_names(disk.path()).is_empty(), "{:?}", file_names(disk.path()));

    // It was the space that ran out: a small export fits.
    let small = format!("{target}&limit=10");
    let (done, _) = until_done(&server.url(&small), READER, &[("prefer", "respond-async")]).await;
    assert_eq!(done.status(), StatusCode::OK);
    assert_eq!(csv::Reader::from_reader(done.bytes().await.unwrap().as_ref()).records().count(), 10);
    server.stop().await;
}

/// The job ids of the export copies in the spool (`<key>.<job>.csv`).
fn jobs_in(dir: &Path) -> Vec<String> {
    file_names(dir)
        .iter()
        .filter(|name| name.ends_with(".csv"))
        .map(|name| name.split('.').nth(1).unwrap().to_owned())
        .collect()
}

/// Clients written for the original API send `Cache-Control: no-cache` on every poll (the PyPI
/// client `appmetrica-logs-api` does by default). Polls converge on one job: a client answered
/// 202 for a job gets that job's export, never a new job; two clients polling the same export
/// share one job; and a no-cache request after the export was delivered starts a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cache_polls_converge_on_one_job_and_a_request_after_the_answer_gets_a_new_one() {
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig { policy: PreparePolicy::Always, ..config(spool.path()) };
    let state = prepared_state(large_dataset(), config).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let url = server.url(&format!("/logs/v1/export/errors.csv?{LARGE_QUERY}"));
    let no_cache = [("cache-control", "no-cache")];

    let first = get_with(&url, READER, &no_cache).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let prepared = server.state.prepared().unwrap().clone();
    assert_eq!(prepared.usage().2, 1, "the job (a 60 MB export) is still running");
    // A second client asks for the same export with no-cache while the job runs: it joins it.
    let second = get_with(&url, APP1001, &no_cache).await;
    assert_eq!(second.status(), StatusCode::ACCEPTED);

    let (done, _) = until_done(&url, READER, &no_cache).await;
    assert_eq!(done.status(), StatusCode::OK);
    let etag = etag_of(&done);
    let body = done.bytes().await.unwrap();
    assert!(body.len() > 40_000_000);
    let jobs = jobs_in(spool.path());
    assert_eq!(jobs.len(), 1, "one job for both clients: {jobs:?}");
    // The second client's next poll gets the job it was answered 202 for, at once.
    let (other, accepted) = until_done(&url, APP1001, &no_cache).await;
    assert_eq!((other.status(), accepted), (StatusCode::OK, 0));
    assert_eq!(etag_of(&other), etag);
    assert_eq!(other.bytes().await.unwrap(), body);
    assert_eq!(jobs_in(spool.path()), jobs, "no new job");

    // Having had its answer, a client that asks again with no-cache gets a new job.
    let again = get_with(&url, READER, &no_cache).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    let (done, _) = until_done(&url, READER, &no_cache).await;
    assert_eq!(done.status(), StatusCode::OK);
    assert_eq!(done.bytes().await.unwrap(), body);
    settled(spool.path()).await;
    let newer = jobs_in(spool.path());
    assert_eq!(newer.len(), 1);
    assert_ne!(newer, jobs, "the export was prepared again");
    server.stop().await;
}

/// A request that starts a job waits for it (`wait`, 2 s by default): a job done by then is
/// answered 200 at once, with no 202 in between.
#[tokio::test]
async fn a_job_done_within_the_wait_is_answered_at_once() {
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig {
        policy: PreparePolicy::Always,
        wait: Duration::from_secs(30),
        ..config(spool.path())
    };
    let state = prepared_state(small_dataset(), config).await;
    let expected = encode_directly(state.engine(), Format::Csv, WIDE.split_once('?').unwrap().1).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let first = get_with(&server.url(WIDE), READER, &[("cache-control", "no-cache")]).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert!(first.headers().get("etag").is_some(), "served from the spool");
    assert_eq!(first.bytes().await.unwrap().as_ref(), expected.as_slice());
    settled(spool.path()).await;
    assert_eq!(jobs_in(spool.path()).len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_cursor_chains_call_is_prepared_with_its_next_cursor_and_served_again_the_same() {
    let spool = tempfile::tempdir().unwrap();
    // Settled at once, and a window that reaches the generated dates whatever today is.
    let cursor = logs_core::CursorSettings {
        settle: Duration::ZERO,
        max_lateness_days: u16::MAX,
        ..logs_core::CursorSettings::default()
    };
    let config_engine = EngineConfig { target_partitions: 2, cursor, ..EngineConfig::default() };
    let prepared = Prepared::open(config(spool.path()), &S3Options::default()).await.unwrap();
    let state = AppState::new(engine(small_dataset(), config_engine), token_auth(), Settings::default())
        .await
        .unwrap()
        .with_prepared(prepared);
    let query = "application_id=1001&date_since=2026-10-01&fields=error_id,error_name,os_name";
    let full = encode_directly(state.engine(), Format::Csv, &format!("{query}&date_until=2026-10-07")).await;
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let start = server.url(&format!("/logs/v1/export/errors.csv?{query}&cursor=start"));
    let prefer = [("prefer", "respond-async")];

    let (first, _) = until_done(&start, READER, &prefer).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert!(first.headers().get("content-length").is_some(), "served from the spool");
    let next = first.headers()["logs-cursor"].to_str().unwrap().to_owned();
    let etag = etag_of(&first);
    let lines = |body: &[u8]| {
        let mut lines: Vec<String> =
            String::from_utf8(body.to_vec()).unwrap().lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    assert_eq!(lines(&first.bytes().await.unwrap()), lines(&full));
    // Asked again with the same cursor: the same file and the same next cursor.
    let again = get_with(&start, READER, &prefer).await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!((etag_of(&again), again.headers()["logs-cursor"].to_str().unwrap()), (etag, next.as_str()));

    // The chain goes on from the prepared cursor, streamed (GET and HEAD) or prepared: nothing new.
    let url = server.url(&format!("/logs/v1/export/errors.csv?{query}&cursor={next}"));
    let head = client().head(&url).header("authorization", format!("OAuth {READER}")).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert!(head.headers().contains_key("logs-cursor"));
    let (continued, _) = until_done(&url, READER, &prefer).await;
    assert_eq!(continued.status(), StatusCode::OK);
    assert!(continued.headers().contains_key("logs-cursor"));
    assert_eq!(continued.bytes().await.unwrap().as_ref(), b"error_id,error_name,os_name\n");
    server.stop().await;
}
