//! NDJSON, Parquet and Arrow over the wire: each served with its media type and the engine's
//! rows, gzip on all but Parquet, HEAD; a prepared Parquet export answers ranges and has no
//! gzip copy; a failed export's body ends with bytes that the Parquet and Arrow readers refuse.

mod common;

use std::io::{Cursor, Read};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{StatusCode, header};
use logs_core::arrow::array::{Array, AsArray};
use logs_core::arrow::compute::{cast, concat_batches};
use logs_core::arrow::datatypes::DataType;
use logs_core::arrow::ipc::reader::StreamReader;
use logs_core::arrow::record_batch::RecordBatch;
use logs_core::{DatasetLocation, EngineConfig, S3Options};
use logs_format::Format;
use logs_server::prepared::{Prepared, PreparedConfig};
use logs_server::{AppState, ServeOptions, Settings};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const QUERY: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07\
                     &fields=error_id,error,city,mcc,service_device_id,error_timestamp";

const TYPED: [Format; 2] = [Format::Parquet, Format::Arrow];

fn one_partition() -> EngineConfig {
    EngineConfig { target_partitions: 1, ..EngineConfig::default() }
}

/// The batches of a Parquet or Arrow body, as one.
fn read_typed(format: Format, body: Vec<u8>) -> Result<RecordBatch, String> {
    let batches: Vec<RecordBatch> = match format {
        Format::Parquet => ParquetRecordBatchReaderBuilder::try_new(Bytes::from(body))
            .and_then(|builder| builder.build())
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?,
        _ => StreamReader::try_new(Cursor::new(body), None)
            .map_err(|e| e.to_string())?
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?,
    };
    let schema = batches.first().ok_or("no batch")?.schema();
    concat_batches(&schema, &batches).map_err(|e| e.to_string())
}

/// Every row as text (`None`: null).
fn rows(batch: &RecordBatch) -> Vec<Vec<Option<String>>> {
    let columns: Vec<_> = batch.columns().iter().map(|c| cast(c, &DataType::Utf8).unwrap()).collect();
    (0..batch.num_rows())
        .map(|i| {
            columns.iter().map(|c| c.is_valid(i).then(|| c.as_string::<i32>().value(i).to_owned())).collect()
        })
        .collect()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut plain).unwrap();
    plain
}

#[tokio::test]
async fn every_format_is_served_with_its_media_type_and_the_engines_rows() {
    let settings = Settings::default();
    let state =
        AppState::new(engine(small_dataset(), one_partition()), token_auth(), settings).await.unwrap();
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let engine = engine(small_dataset(), one_partition());
    let client = client();
    for format in [Format::Ndjson, Format::Parquet, Format::Arrow] {
        let url = server.url(&format!("/logs/v1/export/errors.{format}?{QUERY}&use_utf8_bom=true"));
        let response = client
            .get(&url)
            .header("Authorization", format!("OAuth {READER}"))
            .header("Accept-Encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{format}");
        let headers = response.headers().clone();
        assert_eq!(headers[header::CONTENT_TYPE], format.content_type());
        assert_eq!(headers[header::CONTENT_DISPOSITION], format!("attachment; filename=\"errors.{format}\""));
        let gzipped = headers.get(header::CONTENT_ENCODING).is_some();
        assert_eq!(gzipped, format != Format::Parquet, "{format}: gzip on all but Parquet");
        let body = response.bytes().await.unwrap();
        let body = if gzipped { gunzip(&body) } else { body.to_vec() };
        let expected = encode_directly(&engine, format, QUERY).await;
        assert!(expected.len() > 10_000, "{format}");
        match format {
            Format::Ndjson => assert!(body == expected, "{format}: the engine's records, byte for byte"),
            _ => {
                let (got, expected) =
                    (read_typed(format, body).unwrap(), read_typed(format, expected).unwrap());
                assert_eq!(got.schema(), expected.schema(), "{format}");
                assert_eq!(rows(&got), rows(&expected), "{format}");
                let types: Vec<_> = got.schema().fields().iter().map(|f| f.data_type().clone()).collect();
                use DataType::*;
                assert_eq!(types, [Utf8, Utf8, Utf8, Int64, UInt64, Int64], "{format}");
            }
        }

        let head = client.head(&url).header("Authorization", format!("OAuth {READER}")).send().await.unwrap();
        assert_eq!(head.status(), StatusCode::OK);
        assert_eq!(head.headers()[header::CONTENT_TYPE], format.content_type());
        assert!(head.bytes().await.unwrap().is_empty());
    }
    server.stop().await;
}

#[tokio::test]
async fn a_prepared_parquet_export_answers_ranges_and_has_no_gzip_copy() {
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig {
        retry_after: Duration::from_secs(1),
        wait: Duration::ZERO,
        ..PreparedConfig::new(DatasetLocation::Local(spool.path().into()))
    };
    let prepared = Prepared::open(config, &S3Options::default()).await.unwrap();
    let state = state(small_dataset(), Settings::default()).await.with_prepared(prepared);
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let url = server.url(&format!("/logs/v1/export/errors.parquet?{QUERY}"));
    let get = |headers: Vec<(&'static str, String)>| {
        let mut request = client()
            .get(&url)
            .header("Authorization", format!("OAuth {READER}"))
            .header("Prefer", "respond-async");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let whole = loop {
        let response = get(vec![("Accept-Encoding", "gzip".into())]).await.unwrap();
        if response.status() == StatusCode::OK {
            break response;
        }
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        assert!(Instant::now() < deadline, "still preparing after 120 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(whole.headers().get(header::CONTENT_ENCODING).is_none(), "no gzip copy of Parquet");
    assert_eq!(whole.headers()[header::ACCEPT_RANGES], "bytes");
    let etag = whole.headers()[header::ETAG].to_str().unwrap().to_owned();
    let body = whole.bytes().await.unwrap().to_vec();
    let expected = encode_directly(&engine(small_dataset(), one_partition()), Format::Parquet, QUERY).await;
    let (got, expected) =
        (read_typed(Format::Parquet, body.clone()).unwrap(), read_typed(Format::Parquet, expected).unwrap());
    let (mut got_rows, mut expected_rows) = (rows(&got), rows(&expected));
    got_rows.sort();
    expected_rows.sort();
    assert_eq!(got_rows, expected_rows);

    // A reader that seeks asks for the footer's length, then the footer.
    let tail = get(vec![("Range", "bytes=-8".into()), ("Accept-Encoding", "gzip".into())]).await.unwrap();
    assert_eq!(tail.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(tail.headers()[header::ETAG].to_str().unwrap(), etag);
    let tail = tail.bytes().await.unwrap();
    assert_eq!(&tail[..], &body[body.len() - 8..]);
    assert_eq!(&tail[4..], b"PAR1");
    let footer = u32::from_le_bytes(tail[..4].try_into().unwrap()) as usize;
    let start = body.len() - 8 - footer;
    let range = format!("bytes={start}-{}", body.len() - 9);
    let metadata = get(vec![("Range", range)]).await.unwrap();
    assert_eq!(metadata.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(&metadata.bytes().await.unwrap()[..], &body[start..body.len() - 8]);

    let copies = logs_testkit::file_names(spool.path());
    assert!(copies.iter().any(|name| name.ends_with(".parquet")), "{copies:?}");
    assert!(!copies.iter().any(|name| name.ends_with(".gz")), "{copies:?}");
    server.stop().await;
}

/// A dataset of application 1001's first day in ten files, the last one with its pages
/// damaged and its footer intact: an export of the day fails after its first rows are out.
fn dataset_failing_at_its_last_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(dir.path());
    options.rows = 12_000;
    options.days = 1;
    options.threads = 2;
    options.max_file_rows = 1_000;
    logs_generate::generate(&options).unwrap();
    let folder = dir.path().join("application_id=1001/date=2026-10-01");
    let mut files: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    logs_testkit::damage_pages(files.last().unwrap());
    dir
}

/// The body of a chunked response, as far as it came.
fn received_body(response: &[u8]) -> Vec<u8> {
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut rest = &response[head_end..];
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap().trim(), 16).unwrap();
        rest = &rest[line_end + 2..];
        let Some(chunk) = rest.get(..size) else { break };
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    body
}

#[tokio::test]
async fn a_failed_export_ends_with_bytes_that_readers_refuse() {
    let dir = dataset_failing_at_its_last_file();
    let state =
        AppState::new(engine(dir.path(), one_partition()), token_auth(), Settings::default()).await.unwrap();
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error,service_device_id";
    for format in [Format::Ndjson, Format::Parquet, Format::Arrow] {
        let mut raw =
            RawClient::get(server.addr, &format!("/logs/v1/export/errors.{format}?{query}"), READER).await;
        raw.read_to_end().await.ok();
        assert!(raw.status_line().contains("200"), "{format}: {}", raw.status_line());
        assert!(
            dechunk(&raw.received).is_none(),
            "{format}: the transfer is aborted, without its last chunk"
        );
        let body = received_body(&raw.received);
        let end = String::from_utf8_lossy(&body[body.len().saturating_sub(120)..]).into_owned();
        assert!(body.ends_with(format.broken_ending()), "{format}: {} bytes, ending {end:?}", body.len());
        match format {
            Format::Ndjson => {
                let text = String::from_utf8(body).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                assert!(lines.len() > 100, "{format}: rows went out before the failure");
                assert!(serde_json::from_str::<serde_json::Value>(lines[lines.len() - 2]).is_ok());
                assert!(serde_json::from_str::<serde_json::Value>(lines[lines.len() - 1]).is_err());
            }
            _ => {
                if format == Format::Arrow {
                    assert!(body.len() > 100_000, "{format}: batches went out before the failure");
                }
                let refused = read_typed(format, body);
                assert!(refused.is_err(), "{format}: a reader took the broken body for complete");
            }
        }
    }
    assert!(TYPED.iter().all(|format| !format.broken_ending().is_empty()));
    server.stop().await;
}

#[tokio::test]
async fn a_cursor_chain_hands_over_the_same_records_in_every_format() {
    // Settled at once, and the widest window.
    let cursor = logs_core::CursorSettings {
        settle: Duration::ZERO,
        max_lateness_days: 183,
        ..logs_core::CursorSettings::default()
    };
    let config = EngineConfig { cursor, ..one_partition() };
    let state =
        AppState::new(engine(small_dataset(), config), token_auth(), Settings::default()).await.unwrap();
    let server = TestServer::start(state, ServeOptions::for_settings(&Settings::default())).await;
    // Files written within the same second as the call are not settled yet.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let chain = "application_id=1001&date_since=2026-10-01&fields=error_id,service_device_id&cursor=start";
    let mut answers = Vec::new();
    for format in [Format::Csv, Format::Parquet, Format::Arrow] {
        let response = client()
            .get(server.url(&format!("/logs/v1/export/errors.{format}?{chain}")))
            .header("Authorization", format!("OAuth {READER}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{format}");
        assert!(response.headers().contains_key("logs-cursor"), "{format}: the next cursor");
        let body = response.bytes().await.unwrap().to_vec();
        let mut records: Vec<Vec<Option<String>>> = match format {
            Format::Csv => {
                let text = String::from_utf8(body).unwrap();
                text.lines()
                    .skip(1)
                    .map(|line| line.split(',').map(|v| Some(v.to_owned())).collect())
                    .collect()
            }
            // CSV writes a null as an empty cell.
            _ => rows(&read_typed(format, body).unwrap())
                .into_iter()
                .map(|row| row.into_iter().map(|v| Some(v.unwrap_or_default())).collect())
                .collect(),
        };
        records.sort();
        assert!(records.len() > 100, "{format}: {} records", records.len());
        answers.push(records);
    }
    // The next cursors differ (each holds its call's time); the records are the same.
    assert!(answers.windows(2).all(|pair| pair[0] == pair[1]), "the same records in every format");
    server.stop().await;
}
