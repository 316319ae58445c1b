//! Faults of a dataset in a bucket, against a real S3 server (moto on loopback): objects
//! deleted, replaced, corrupt or truncated; a missing bucket; refused credentials; a server
//! that refuses connections, answers 5xx or is slow. Every one is named, never a silently
//! smaller or mixed export.

mod support;

use std::time::Duration;

use futures::StreamExt;
use logs_core::Error;
use logs_core::object_store::path::Path as ObjectPath;
use logs_core::object_store::{ObjectStoreExt, PutPayload};
use logs_testkit::proxy::{FaultProxy, Mode};
use logs_testkit::s3::{ACCESS_KEY_ID, S3Server, SECRET_ACCESS_KEY};
use support::*;

const WEEK: &str =
    "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name,error";

/// A generated dataset, uploaded under `data/` of bucket `logs` on a fresh server.
fn bucket_with_dataset() -> (tempfile::TempDir, S3Server) {
    bucket_with_rows(3000)
}

fn bucket_with_rows(rows: u64) -> (tempfile::TempDir, S3Server) {
    let dir = generate(rows, 7);
    let server = S3Server::start();
    server.create_bucket("logs");
    server.upload_folder(&data_root(&dir), "logs", "data");
    (dir, server)
}

/// The key of the last file the export of `query` reads (read last with one partition).
async fn last_selected(engine: &logs_core::Engine, query: &str) -> (String, ObjectPath) {
    let export = engine.export(&request(query)).await.unwrap();
    let file = export.selection().files.last().unwrap().clone();
    (file.name, file.object.location)
}

/// Runs `query`, calling `between` after the first batch; the rows read, and the error, if any.
async fn run_interrupted<F: std::future::Future<Output = ()>>(
    engine: &logs_core::Engine,
    query: &str,
    between: impl FnOnce() -> F,
) -> (usize, Option<Error>) {
    let mut export = engine.export(&request(query)).await.unwrap();
    let mut rows = 0;
    let mut between = Some(between);
    while let Some(batch) = export.next().await {
        match batch {
            Ok(batch) => rows += batch.num_rows(),
            Err(e) => return (rows, Some(e)),
        }
        if let Some(between) = between.take() {
            between().await;
        }
    }
    (rows, None)
}

fn small_batches(endpoint: &str) -> logs_core::Engine {
    let config = logs_core::EngineConfig {
        target_partitions: 1,
        batch_size: 64,
        s3: s3_options(endpoint),
        ..Default::default()
    };
    logs_core::Engine::open("s3://logs/data", config).unwrap()
}

/// Objects larger than the first read of their footer (512 KiB), so that the scan reads them
/// again while the export runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_or_replaced_during_an_export_fails_it_naming_the_key() {
    let (dir, server) = bucket_with_rows(21_000);
    let endpoint = server.endpoint();
    let store = test_store(&endpoint, "logs");
    let engine = small_batches(&endpoint);
    let expected = read_all(&data_root(&dir)).answer(&request(WEEK)).len();

    let (name, key) = last_selected(&engine, WEEK).await;
    let original = store.get(&key).await.unwrap().bytes().await.unwrap();
    assert!(original.len() > 512 * 1024, "{name} is read whole with its footer ({} bytes)", original.len());
    let (rows, error) = run_interrupted(&engine, WEEK, || async { store.delete(&key).await.unwrap() }).await;
    let error =
        error.unwrap_or_else(|| panic!("deleted mid-export, yet {rows} of {expected} rows and no error"));
    assert!(matches!(&error, Error::Storage { path: Some(p), .. } if *p == name), "{error:?}");
    assert!(error.to_string().contains("deleted after the export selected it"), "{error}");

    // Put back, then overwritten mid-export with other bytes of the same length.
    store.put(&key, PutPayload::from(original.clone())).await.unwrap();
    let (name, key) = last_selected(&engine, WEEK).await;
    let mut other = original.to_vec();
    other[4] ^= 0xff;
    let (rows, error) = run_interrupted(&engine, WEEK, || async {
        store.put(&key, PutPayload::from(other)).await.map(drop).unwrap()
    })
    .await;
    let error =
        error.unwrap_or_else(|| panic!("replaced mid-export, yet {rows} of {expected} rows and no error"));
    assert!(matches!(&error, Error::Storage { path: Some(p), .. } if *p == name), "{error:?}");
    assert!(error.to_string().contains("replaced after the export selected it"), "{error}");

    // Put back as it was: the same bytes (and ETag), but a new modification time; the next
    // export reads it afresh, whole.
    store.put(&key, PutPayload::from(original)).await.unwrap();
    let (rows, error) = run_interrupted(&engine, WEEK, || async {}).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(rows, expected);
}

/// An object small enough to come whole with its footer (one conditional GET, while the
/// export selects it) is exported as it was then: deleting it afterwards changes nothing.
/// (An engine that has the footer cached reads the object during the scan, as above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_read_whole_at_selection_is_exported_as_selected() {
    let (dir, server) = bucket_with_dataset();
    let endpoint = server.endpoint();
    let store = test_store(&endpoint, "logs");
    let engine = small_batches(&endpoint);
    let expected = read_all(&data_root(&dir)).answer(&request(WEEK)).len();

    let (_, key) = last_selected(&engine, WEEK).await;
    let size = store.head(&key).await.unwrap().size;
    assert!(size < 512 * 1024, "{key} is {size} bytes");
    let fresh = small_batches(&endpoint);
    let mut export = fresh.export(&request(WEEK)).await.unwrap();
    let before = export.requests();
    store.delete(&key).await.unwrap();
    let mut rows = 0;
    while let Some(batch) = export.next().await {
        rows += batch.unwrap().num_rows();
    }
    assert_eq!(rows, expected);
    // The scan made no request: every selected object came whole with its footer.
    assert_eq!(export.requests(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_and_truncated_objects_fail_the_export_or_are_skipped_and_counted() {
    let (dir, server) = bucket_with_dataset();
    let endpoint = server.endpoint();
    let store = test_store(&endpoint, "logs");
    let engine = bucket_engine("s3://logs/data", &endpoint, 2);
    let folder = "data/application_id=1001/date=2026-10-03";
    let whole = store
        .get(&ObjectPath::from(format!("{folder}/part-00000.parquet")))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let truncated = ObjectPath::from(format!("{folder}/truncated.parquet"));
    let garbage = ObjectPath::from(format!("{folder}/garbage.parquet"));
    store.put(&truncated, PutPayload::from(whole.slice(..whole.len() / 2))).await.unwrap();
    store.put(&garbage, PutPayload::from(vec![7u8; 5000])).await.unwrap();

    match engine.export(&request(WEEK)).await {
        Err(Error::Storage { path: Some(p), message }) => {
            assert!(p.ends_with("garbage.parquet") || p.ends_with("truncated.parquet"), "{p}");
            assert!(p.starts_with("s3://logs/data/application_id=1001/date=2026-10-03/"), "{p}");
            assert!(message.contains("not a readable Parquet file"), "{message}");
        }
        other => panic!("expected a storage error naming the object, got {other:?}"),
    }
    let skipping = format!("{WEEK}&skip_unavailable_shards=true");
    let (rows, export) = export_rows(&engine, &request(&skipping)).await;
    let mut skipped: Vec<&str> = export.selection().skipped.iter().map(|s| s.name.as_str()).collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            "s3://logs/data/application_id=1001/date=2026-10-03/garbage.parquet",
            "s3://logs/data/application_id=1001/date=2026-10-03/truncated.parquet"
        ]
    );
    let expected = read_all(&data_root(&dir)).answer(&request(&skipping));
    assert_eq!(sorted(rows), sorted(expected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_is_a_storage_error_and_an_empty_prefix_an_empty_dataset() {
    let server = S3Server::start();
    server.create_bucket("logs");
    let endpoint = server.endpoint();
    let missing = bucket_engine("s3://no-such-bucket/data", &endpoint, 1);
    let error = missing.check().await.unwrap_err();
    assert!(matches!(error, Error::Storage { .. }), "{error:?}");
    assert!(error.to_string().contains("s3://no-such-bucket/data"), "{error}");
    let error = missing.export(&request(WEEK)).await.unwrap_err();
    assert!(matches!(error, Error::Storage { .. }), "{error:?}");

    let empty = bucket_engine("s3://logs/nothing-here", &endpoint, 1);
    empty.check().await.unwrap();
    assert!(empty.storage().applications().await.unwrap().is_empty());
    let (rows, _) = export_rows(&empty, &request(WEEK)).await;
    assert!(rows.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_a_storage_error_that_quotes_no_secret() {
    let server = S3Server::start_with_authentication();
    let engine = bucket_engine("s3://logs/data", &server.endpoint(), 1);
    let error = engine.check().await.unwrap_err();
    let text = format!("{error} {error:?}");
    assert!(matches!(error, Error::Storage { .. }), "{text}");
    assert!(text.contains("403") || text.contains("InvalidAccessKeyId"), "{text}");
    assert!(!text.contains(SECRET_ACCESS_KEY), "{text}");
    assert!(!text.contains(ACCESS_KEY_ID), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_retried_and_lasting_ones_fail_the_export() {
    let (dir, server) = bucket_with_dataset();
    let proxy = FaultProxy::start(server.addr(), Mode::Pass);
    let engine = bucket_engine("s3://logs/data", &proxy.endpoint(), 1);
    let expected = sorted(read_all(&data_root(&dir)).answer(&request(WEEK)));
    assert_eq!(sorted(engine_rows(&engine, &request(WEEK)).await), expected);

    // A few 503s, then the server answers: retried, the same rows.
    proxy.set_mode(Mode::FailFirst(2));
    assert_eq!(sorted(engine_rows(&engine, &request(WEEK)).await), expected);
    // Slow: every request waits; the same rows.
    proxy.set_mode(Mode::Delay(Duration::from_millis(30)));
    assert_eq!(sorted(engine_rows(&engine, &request(WEEK)).await), expected);
    // Every request answered 500: the export fails, naming what it could not read.
    proxy.set_mode(Mode::Status(500));
    let error = engine.export(&request(WEEK)).await.unwrap_err();
    assert!(matches!(error, Error::Storage { .. }), "{error:?}");
    assert!(error.to_string().contains("500"), "{error}");
    // Connections closed as they arrive.
    proxy.set_mode(Mode::Drop);
    let error = engine.export(&request(WEEK)).await.unwrap_err();
    assert!(matches!(error, Error::Storage { .. }), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_connections_is_a_storage_error() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let engine = bucket_engine("s3://logs/data", &format!("http://127.0.0.1:{port}"), 1);
    let error = engine.check().await.unwrap_err();
    assert!(matches!(error, Error::Storage { .. }), "{error:?}");
    assert!(error.to_string().contains("s3://logs/data"), "{error}");
}

/// The date folders in range come from one listing (one request per 1 000 keys, three keys
/// per page on the test server), which reads exactly what per-folder listings of a local
/// folder read: not the objects of a folder that only starts like a date, nor those below a
/// date folder's subfolders; a folder named `date=2026-10-3` still counts, listed by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_date_folders_in_range_are_listed_at_once_reading_what_a_local_folder_reads() {
    let dir = generate(3000, 7);
    let app = data_root(&dir).join("application_id=1001");
    let copy = |folder: &str| {
        std::fs::create_dir_all(app.join(folder)).unwrap();
        std::fs::copy(app.join("date=2026-10-02/part-00000.parquet"), app.join(folder).join("copy.parquet"))
            .unwrap();
    };
    copy("date=2026-10-07-extra");
    copy("date=2026-10-03/sub");
    copy("date=2026-10-3");
    let server = S3Server::start();
    server.create_bucket("logs");
    server.upload_folder(&data_root(&dir), "logs", "data");
    let local = logs_core::Engine::open(data_root(&dir).to_str().unwrap(), Default::default()).unwrap();
    let bucket = bucket_engine("s3://logs/data", &server.endpoint(), 2);

    let (mut expected, from_folder) = export_rows(&local, &request(WEEK)).await;
    let (mut rows, from_bucket) = export_rows(&bucket, &request(WEEK)).await;
    expected.sort();
    rows.sort();
    assert_eq!(rows, expected);
    let names = |export: &logs_core::ExportStream| -> Vec<String> {
        let mut names: Vec<String> = export
            .selection()
            .files
            .iter()
            .map(|f| f.name.rsplit("application_id=1001/").next().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&from_bucket), names(&from_folder));
    assert!(names(&from_bucket).contains(&"date=2026-10-3/copy.parquet".to_owned()));
    // The application's folder, the keys from date=2026-10-01 to date=2026-10-07, and
    // date=2026-10-3 by itself.
    assert_eq!(from_bucket.requests().lists, 3);
}

/// The application's folder and the keys of its date folders are listed at the same time, not
/// one after the other. The range holds no date folder, so the export makes no other request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_application_folder_and_its_date_folders_keys_are_listed_at_once() {
    let (_dir, server) = bucket_with_dataset();
    // Long enough that the second listing starts while the first waits, on a loaded machine too.
    let proxy = FaultProxy::start(server.addr(), Mode::Delay(Duration::from_secs(1)));
    let engine = bucket_engine("s3://logs/data", &proxy.endpoint(), 1);
    let query = "application_id=1001&date_since=2026-11-01&date_until=2026-11-03&fields=error_id";
    let (rows, export) = export_rows(&engine, &request(query)).await;
    assert!(rows.is_empty());
    assert_eq!(export.selection().date_folders_pruned, 7, "the generated days are all outside the range");
    assert_eq!(export.requests().lists, 2);
    assert_eq!(proxy.most_at_once(), 2);
}

/// Keys come listed in order from S3, so the one listing of the date folders' keys stops after
/// the range's last folder: an export of the first of 30 days reads one page of keys, not ten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_of_the_date_folders_keys_stops_after_the_range() {
    let dir = generate(3000, 30);
    let server = S3Server::start();
    server.create_bucket("logs");
    server.upload_folder(&data_root(&dir), "logs", "data");
    let proxy = FaultProxy::start(server.addr(), Mode::Pass);
    let engine = bucket_engine("s3://logs/data", &proxy.endpoint(), 1);
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id";
    let (rows, export) = export_rows(&engine, &request(query)).await;
    assert!(!rows.is_empty());
    // Every request but the object reads is a page of a listing: the application's folder
    // (30 date folders, three to a page) and one page of keys.
    let pages = proxy.requests() - export.requests().gets;
    assert_eq!(pages, 10 + 1, "{:?}", export.requests());
}

/// What an export's memory does not keep of its footer reads goes to its spool on local disk
/// (`KeptForScan::disk`): a small object whole, of a larger one its footer. With no memory to
/// keep anything in and no footer cache, the scan of small objects then makes no request, and
/// that of larger ones none for their footers; without the spool it makes both. The rows are the
/// same every way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_memory_does_not_keep_of_the_footer_reads_the_scan_reads_from_local_disk() {
    // 3 000 rows make objects read whole; 21 000, objects larger than their first read.
    for rows in [3000, 21_000] {
        let (dir, server) = bucket_with_rows(rows);
        let engine = |disk| {
            let config = logs_core::EngineConfig {
                target_partitions: 2,
                s3: s3_options(&server.endpoint()),
                // Every footer the scan needs is read again, from the spool or the store.
                metadata_cache_limit: 0,
                kept_for_scan: logs_core::KeptForScan { memory: 0, disk, dir: None },
                ..Default::default()
            };
            logs_core::Engine::open("s3://logs/data", config).unwrap()
        };
        let expected = read_all(&data_root(&dir)).answer(&request(WEEK));
        let (mut scans, mut files) = (Vec::new(), 0);
        for disk in [256 << 20, 0] {
            let engine = engine(disk);
            let mut export = engine.export(&request(WEEK)).await.unwrap();
            let selected = export.requests().gets;
            let selection = export.selection().clone();
            files = selection.files.len() as u64;
            assert_eq!(selection.kept_in_memory(), 0);
            let mut got = Vec::new();
            while let Some(batch) = export.next().await {
                got.extend(batch_rows(&batch.unwrap()));
            }
            assert_matches_oracle(WEEK, &request(WEEK), got, expected.clone());
            let scan = export.requests().gets - selected;
            // Objects of up to 512 KiB are read whole with their footers.
            let whole = |f: &logs_core::SelectedFile| f.object.size <= 512 * 1024;
            assert_eq!(selection.files.iter().all(whole), rows == 3000, "{rows} rows");
            let footers: u64 = selection
                .files
                .iter()
                .map(|f| if whole(f) { f.object.size } else { footer_len(&dir, f) })
                .sum();
            match disk {
                0 => assert_eq!(selection.kept_on_disk(), 0),
                _ => assert_eq!(selection.kept_on_disk(), footers, "{rows} rows"),
            }
            scans.push(scan);
        }
        let (spooled, fetched) = (scans[0], scans[1]);
        if rows == 3000 {
            assert_eq!(spooled, 0, "the scan of objects spooled whole fetches nothing");
            assert!(fetched >= files, "without the spool, {fetched} requests for {files} objects");
        } else {
            // Each footer is at least one request less.
            assert!(fetched >= spooled + files, "{spooled} requests with the spool, {fetched} without");
        }
    }
}

/// The bytes the footer of the selected `file` takes at its end, its length and magic included,
/// read from the local copy in `dir`.
fn footer_len(dir: &tempfile::TempDir, file: &logs_core::SelectedFile) -> u64 {
    let bytes = std::fs::read(dir.path().join(file.object.location.as_ref())).unwrap();
    let end = bytes.len() - 8;
    assert_eq!(&bytes[end + 4..], b"PAR1");
    u32::from_le_bytes(bytes[end..end + 4].try_into().unwrap()) as u64 + 8
}

/// Objects written without a page index and too large for an offset index to be rebuilt from
/// their first read (more than 512 KiB): a filtered export reads each row group's column chunks
/// in one request, the first step bringing the chunks of the later ones (`read_ahead.rs`), also
/// when the footer cache holds no footer and the reader of a file's pages is not the one that
/// parsed its footer. Without the read-ahead, the filter's step and the rest take a request each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_page_index_each_row_group_of_a_filtered_export_takes_one_request() {
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    // Two days of rows, uncompressed: a file of a few MiB a day, and a small one of late rows.
    let dir = generate(6_000, 2);
    for path in parquet_files(&data_root(&dir)) {
        let properties = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .build();
        rewrite(&path, properties);
    }
    let server = S3Server::start();
    server.create_bucket("logs");
    server.upload_folder(&data_root(&dir), "logs", "data");
    let query = format!("{WEEK}&os_name=android");
    let expected = read_all(&data_root(&dir)).answer(&request(&query));
    let mut scans = Vec::new();
    for read_ahead in [true, false] {
        let config = logs_core::EngineConfig {
            target_partitions: 2,
            s3: s3_options(&server.endpoint()),
            metadata_cache_limit: 0,
            kept_for_scan: logs_core::KeptForScan { memory: 0, ..Default::default() },
            page_machinery: logs_core::PageMachinery { read_ahead, ..logs_core::PageMachinery::ON },
            ..Default::default()
        };
        let engine = logs_core::Engine::open("s3://logs/data", config).unwrap();
        let mut export = engine.export(&request(&query)).await.unwrap();
        let selected = export.requests().gets;
        let selection = export.selection().clone();
        // The small objects come whole with their footers, and are read from the spool.
        let large: Vec<_> = selection.files.iter().filter(|f| f.object.size > 512 * 1024).collect();
        assert!(!large.is_empty());
        let row_groups: u64 = large.iter().map(|f| f.row_groups as u64).sum();
        let mut got = Vec::new();
        while let Some(batch) = export.next().await {
            got.extend(batch_rows(&batch.unwrap()));
        }
        assert_matches_oracle(&query, &request(&query), got, expected.clone());
        scans.push((export.requests().gets - selected, row_groups));
    }
    let ((ahead, row_groups), (stepwise, _)) = (scans[0], scans[1]);
    assert_eq!(ahead, row_groups, "one request per row group with the read-ahead");
    assert!(stepwise >= 2 * row_groups, "{stepwise} requests without it, for {row_groups} row groups");
}
