//! The access log tells the truth for every kind of answer: one line per request, with the
//! rows and bytes that went out and whether the whole answer did — streamed, gzip, a prepared
//! download, a range, `HEAD`, `304`, `202` and an export cut short.

mod common;

use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use logs_core::{DatasetLocation, EngineConfig, S3Options};
use logs_server::prepared::{Prepared, PreparedConfig};
use logs_server::{AppState, ServeOptions, Settings};
use serde_json::Value;

/// The access line of the request whose target ends with `marker`, once it is written.
async fn access_line(marker: &str) -> serde_json::Map<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = logged()
            .lines()
            .filter(|line| line.starts_with('{'))
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|line| line["target"] == "logs_server::access")
            .map(|line| line["fields"].as_object().unwrap().clone())
            .find(|fields| fields["path"].as_str().is_some_and(|path| path.ends_with(marker)));
        if let Some(fields) = found {
            return fields;
        }
        assert!(Instant::now() < deadline, "no access line for {marker}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn summary(line: &serde_json::Map<String, Value>) -> (u64, u64, u64, bool) {
    (
        line["status"].as_u64().unwrap(),
        line["rows"].as_u64().unwrap(),
        line["bytes"].as_u64().unwrap(),
        line["complete"].as_bool().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_answer_logs_its_rows_bytes_and_completeness() {
    logged(); // installs the capture
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig {
        wait: Duration::from_secs(30),
        ..PreparedConfig::new(DatasetLocation::Local(spool.path().into()))
    };
    let prepared = Prepared::open(config, &S3Options::default()).await.unwrap();
    let engine = engine(large_dataset(), EngineConfig { target_partitions: 1, ..EngineConfig::default() });
    let state =
        AppState::new(engine, token_auth(), Settings::default()).await.unwrap().with_prepared(prepared);
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let client = client();
    let export = format!("/logs/v1/export/errors.csv?{LARGE_QUERY}");
    let send = |target: String, headers: Vec<(&'static str, String)>, method: http::Method| {
        let mut request =
            client.request(method, server.url(&target)).header("authorization", format!("OAuth {READER}"));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move {
            let response = request.send().await.unwrap();
            let (status, headers) = (response.status(), response.headers().clone());
            (status, headers, response.bytes().await.unwrap())
        }
    };
    let get = http::Method::GET;

    // Streamed: the rows and bytes of the body.
    let (status, _, body) = send(format!("{export}&limit=7"), vec![], get.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(summary(&access_line("&limit=7").await), (200, 7, body.len() as u64, true));

    // Streamed with gzip: the bytes on the wire, compressed.
    let gzip = vec![("accept-encoding", "gzip".to_owned())];
    let (status, headers, body) = send(format!("{export}&limit=8"), gzip.clone(), get.clone()).await;
    assert_eq!((status, &headers["content-encoding"]), (StatusCode::OK, &"gzip".parse().unwrap()));
    assert_eq!(summary(&access_line("&limit=8").await), (200, 8, body.len() as u64, true));

    // A HEAD: no body, complete once the headers are out.
    send(format!("{export}&limit=10"), vec![], http::Method::HEAD).await;
    assert_eq!(summary(&access_line("&limit=10").await), (200, 0, 0, true));

    // A prepared export, done within the wait: served whole, with its rows.
    let prefer = ("prefer", "respond-async".to_owned());
    let (status, headers, body) = send(format!("{export}&limit=9"), vec![prefer.clone()], get.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-length"], body.len().to_string().as_str());
    assert_eq!(summary(&access_line("&limit=9").await), (200, 9, body.len() as u64, true));
    let etag = headers["etag"].to_str().unwrap().to_owned();

    // The same, compressed: the gzip copy's bytes, the same rows.
    let (status, _, body) =
        send(format!("{export}&limit=9&"), vec![prefer.clone(), gzip[0].clone()], get.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(summary(&access_line("&limit=9&").await), (200, 9, body.len() as u64, true));

    // A range of it: complete, but no rows counted in part of a file.
    let range = ("range", "bytes=0-9".to_owned());
    let (status, _, body) =
        send(format!("{export}&limit=9&&"), vec![prefer.clone(), range], get.clone()).await;
    assert_eq!((status, body.len()), (StatusCode::PARTIAL_CONTENT, 10));
    assert_eq!(summary(&access_line("&limit=9&&").await), (206, 0, 10, true));

    // Not modified.
    let none_match = ("if-none-match", etag);
    let (status, ..) =
        send(format!("{export}&limit=9&&&"), vec![prefer.clone(), none_match], get.clone()).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert_eq!(summary(&access_line("&limit=9&&&").await), (304, 0, 0, true));

    // Accepted: a job that cannot finish within a wait of 0 s.
    let (status, _, body) = send(
        format!("{export}&limit=500000"),
        vec![("prefer", "respond-async, wait=0".to_owned())],
        get.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(summary(&access_line("&limit=500000").await), (202, 0, body.len() as u64, true));

    // A streamed export whose client goes away: not complete, and only the rows sent.
    let total_rows = {
        let ids = LARGE_QUERY.replace("fields=error_id,error", "fields=error_id");
        let (_, _, body) = send(format!("/logs/v1/export/errors.csv?{ids}"), vec![], get.clone()).await;
        body.iter().filter(|&&b| b == b'\n').count() as u64 - 1
    };
    let mut raw = RawClient::get(server.addr, &format!("{export}&limit=900000"), READER).await;
    raw.read_at_least(200_000).await;
    drop(raw);
    let (status, rows, bytes, complete) = summary(&access_line("&limit=900000").await);
    assert_eq!((status, complete), (200, false));
    assert!(rows > 0 && rows < total_rows, "{rows} of {total_rows} rows");
    assert!(bytes >= 200_000, "{bytes}");
    server.stop().await;
}
