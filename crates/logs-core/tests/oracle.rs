//! The engine agrees with an independent row-by-row oracle on many random requests; half of the
//! random ones are read back from the export encoded in a format drawn at random.

#[path = "oracle/formats.rs"]
mod formats;
mod support;

use datafusion::parquet::basic::{Compression, Encoding, ZstdLevel};
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use logs_core::PageMachinery;
use logs_format::{Format, JsonIntegers};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::*;

const APPS: [i64; 4] = [1001, 1002, 1003, 4242];
/// Every field, then the names of [`support::test_aliases`].
const FIELDS: [&str; 34] = [
    "error",
    "error_datetime",
    "error_id",
    "error_json",
    "error_name",
    "error_receive_datetime",
    "error_receive_timestamp",
    "error_timestamp",
    "service_device_id",
    "city",
    "connection_type",
    "country_iso_code",
    "device_ipv6",
    "device_locale",
    "device_manufacturer",
    "device_model",
    "device_type",
    "google_aid",
    "ios_ifa",
    "ios_ifv",
    "mcc",
    "mnc",
    "operator_name",
    "os_name",
    "os_version",
    "profile_id",
    "windows_aid",
    "app_package_name",
    "app_version_name",
    "application_id",
    "appmetrica_device_id",
    "town",
    "oaid",
    "level",
];
const FILTERABLE: [&str; 12] = [
    "os_name",
    "error_id",
    "mcc",
    "service_device_id",
    "city",
    "device_type",
    "connection_type",
    "app_version_name",
    "error_name",
    "error_timestamp",
    "appmetrica_device_id",
    "town",
];

/// The field an alias of [`support::test_aliases`] stands for.
fn field_of(name: &str) -> &str {
    match name {
        "appmetrica_device_id" => "service_device_id",
        "town" => "city",
        name => name,
    }
}

/// The `yyyy-mm-dd hh:mm:ss` of a random record of `app`, in the chosen dimension.
fn exact_time(rng: &mut StdRng, records: &Records, app: i64, receive: bool) -> Option<String> {
    let name = if receive { "error_receive_datetime" } else { "error_datetime" };
    let times: Vec<&String> = records
        .rows
        .iter()
        .filter(|(a, _)| *a == app)
        .filter_map(|(_, row)| row.iter().find(|(n, _)| n == name)?.1.as_ref())
        .collect();
    (!times.is_empty()).then(|| times[rng.random_range(0..times.len())].replace(' ', "+"))
}

fn random_query(rng: &mut StdRng, records: &Records) -> String {
    let app = APPS[rng.random_range(0..APPS.len())];
    let receive = rng.random_bool(0.4);
    let day = |rng: &mut StdRng| rng.random_range(0..7u32);
    let (a, b) = (day(rng), day(rng));
    let (first, last) = (a.min(b), a.max(b));
    let date = |d: u32| format!("2026-10-{:02}", d + 1);
    let (since, until) = if rng.random_bool(0.5) {
        (date(first), date(last))
    } else {
        let h1 = rng.random_range(0..24);
        let h2 = if first == last { rng.random_range(h1..24) } else { rng.random_range(0..24) };
        (
            format!("{}+{h1:02}:{:02}:00", date(first), rng.random_range(0..60)),
            format!("{}+{h2:02}:59:59", date(last)),
        )
    };
    // Often, a bound falls exactly on a record's time: both ends are inclusive.
    let (since, until) = match exact_time(rng, records, app, receive) {
        Some(t) if rng.random_bool(0.5) => match rng.random_range(0..3) {
            0 => (t.clone(), t),
            1 => (t, "2026-10-09".to_owned()),
            _ => ("2026-09-29".to_owned(), t),
        },
        _ => (since, until),
    };
    let mut fields: Vec<&str> = Vec::new();
    for _ in 0..rng.random_range(1..7) {
        let f = FIELDS[rng.random_range(0..FIELDS.len())];
        if !fields.contains(&f) {
            fields.push(f);
        }
    }
    let mut query =
        format!("application_id={app}&date_since={since}&date_until={until}&fields={}", fields.join(","));
    if rng.random_bool(0.4) {
        query.push_str("&date_dimension=receive");
    }
    // Filters take their values from a real record of the application, so they match something.
    let candidates: Vec<_> = records.rows.iter().filter(|(a, _)| *a == app).collect();
    if !candidates.is_empty() {
        let (_, row) = candidates[rng.random_range(0..candidates.len())];
        for _ in 0..rng.random_range(0..3) {
            let name = FILTERABLE[rng.random_range(0..FILTERABLE.len())];
            if query.contains(&format!("&{name}=")) {
                continue;
            }
            if let Some(Some(value)) = row.iter().find(|(n, _)| n == field_of(name)).map(|(_, v)| v) {
                let encoded: String = value.bytes().map(|b| format!("%{b:02X}")).collect();
                query.push_str(&format!("&{name}={encoded}"));
            }
        }
    }
    if rng.random_bool(0.3) {
        query.push_str(&format!("&limit={}", rng.random_range(1..200)));
    }
    if rng.random_bool(0.15) {
        let count = rng.random_range(1..5);
        query.push_str(&format!("&parts_count={count}&part_number={}", rng.random_range(0..count)));
    }
    query
}

/// Runs `query` and checks its rows against the oracle's. Returns whether any row matched, and
/// the pages the scan decompressed only partially.
async fn check_query(
    engine: &logs_core::Engine,
    records: &Records,
    query: &str,
    encoded: Option<(Format, JsonIntegers)>,
) -> (bool, usize) {
    let request = request(query);
    let mut expected = records.answer(&request);
    let matched = !expected.is_empty();
    let (rows, export) = match encoded {
        None => export_rows(engine, &request).await,
        Some((format, integers)) => formats::encoded_rows(engine, &request, format, integers).await,
    };
    if let Some((Format::Csv, _)) = encoded {
        // CSV reads a null back as an empty string.
        expected.iter_mut().flatten().for_each(|cell| *cell = Some(cell.take().unwrap_or_default()));
    }
    let query = match encoded {
        Some((format, integers)) => format!("{query} as {format} (JSON integers as {integers})"),
        None => query.to_owned(),
    };
    assert_matches_oracle(&query, &request, rows, expected);
    (matched, export.metric("pages_decompressed_partially").map_or(0, |m| m.as_usize()))
}

/// The page machinery on, then off: every oracle test runs with both.
const MACHINERY: [PageMachinery; 2] = [PageMachinery::ON, PageMachinery::OFF];

/// Runs `requests` random requests over `root` with the page machinery as given, and checks
/// each against the oracle. Returns the pages the scans decompressed only partially.
async fn check_random_requests(
    root: &std::path::Path,
    seed: u64,
    requests: usize,
    pages: PageMachinery,
) -> usize {
    let engine = engine_with_pages(root, 2, pages);
    let records = read_all(root);
    assert!(!records.rows.is_empty());
    let mut rng = StdRng::seed_from_u64(seed);
    let mut non_empty = 0;
    let mut partially = 0;
    for _ in 0..requests {
        let query = random_query(&mut rng, &records);
        // Every other request is read back from an encoded export, in a format drawn at random.
        let encoded = rng.random_bool(0.5).then(|| {
            let integers = JsonIntegers::ALL[rng.random_range(0..JsonIntegers::ALL.len())];
            (Format::ALL[rng.random_range(0..Format::ALL.len())], integers)
        });
        let (matched, rewritten) = check_query(&engine, &records, &query, encoded).await;
        non_empty += usize::from(matched);
        partially += rewritten;
    }
    assert!(
        non_empty >= requests / 3,
        "only {non_empty} of {requests} requests matched rows: the test is too weak"
    );
    partially
}

/// How other tools write files with zstd: columns dictionary-encoded until the dictionary is
/// full and plain after that, small pages, data pages of `version` (the values still plain
/// after the dictionary, as pyarrow writes version 2 pages), with or without an offset index.
fn zstd_properties(version: WriterVersion, offset_index: bool) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_writer_version(version)
        .set_encoding(Encoding::PLAIN)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(!offset_index)
        .set_dictionary_page_size_limit(2048)
        .set_write_batch_size(37)
        .set_data_page_row_count_limit(37)
        .build()
}

/// Rewrites every file below `root` with [`zstd_properties`].
fn rewrite_with_zstd(root: &std::path::Path, version: WriterVersion, offset_index: bool) {
    for path in parquet_files(root) {
        rewrite(&path, zstd_properties(version, offset_index));
    }
}

/// Over zstd files other tools wrote, the pages of text columns are decompressed only as far
/// as the rows equality filters select (`partial_page.rs`): the rows are the oracle's, from a
/// folder and from a bucket alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_agrees_with_the_oracle_on_zstd_files_whose_pages_it_decompresses_partially() {
    let server = logs_testkit::s3::S3Server::start();
    server.create_bucket("logs");
    for (seed, version, offset_index) in
        [(4, WriterVersion::PARQUET_1_0, false), (5, WriterVersion::PARQUET_2_0, true)]
    {
        let dir = generate(6000, 7);
        let root = data_root(&dir);
        rewrite_with_zstd(&root, version, offset_index);
        let prefix = format!("{version:?}");
        server.upload_folder(&root, "logs", &prefix);
        let bucket = format!("s3://logs/{prefix}/");
        for pages in MACHINERY {
            let partially = check_random_requests(&root, seed, 150, pages).await;
            assert_eq!(
                partially > 0,
                pages.partial_pages,
                "{version:?}, {pages:?}: pages decompressed partially"
            );
            let over_bucket =
                bucket_engine_with_pages(&format!("s3://logs/{prefix}"), &server.endpoint(), 1, pages);
            let (_, partially) = bucket_agrees_with_folder(&root, &over_bucket, &bucket, 30, pages).await;
            assert_eq!(partially > 0, pages.partial_pages, "{version:?}, {pages:?}: over the bucket");
        }
    }
}

/// Over a bucket (moto on loopback, every listing paginated, a prefix with a space and
/// non-ASCII characters, keys that are not data beside the files): the same rows, in the same
/// order, as over the folder, and the same pruning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_bucket_the_engine_exports_what_it_exports_over_the_folder() {
    let dir = generate(6000, 7);
    let root = data_root(&dir);
    let day = root.join("application_id=1001/date=2026-10-02");
    std::fs::write(day.join("_SUCCESS"), b"").unwrap();
    std::fs::write(day.join("notes.txt"), b"not data").unwrap();
    std::fs::copy(day.join("part-00000.parquet"), day.join(".part-00000.parquet")).unwrap();
    std::fs::copy(day.join("part-00000.parquet"), day.join("_tmp.parquet")).unwrap();
    let server = logs_testkit::s3::S3Server::start();
    server.create_bucket("logs");
    server.upload_folder(&root, "logs", "exports 2026/données");
    let endpoint = server.endpoint();
    for pages in MACHINERY {
        let over_bucket =
            bucket_engine_with_pages("s3://logs/exports%202026/donn%C3%A9es", &endpoint, 1, pages);
        assert_eq!(over_bucket.storage().applications().await.unwrap(), [1001, 1002, 1003]);
        bucket_agrees_with_folder(&root, &over_bucket, "s3://logs/exports 2026/données/", 60, pages).await;
    }
}

/// Over a bucket with objects larger than the first read of their footers (512 KiB), so that
/// the scan reads their pages, ahead where filters allow: the same rows as over the folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_bucket_the_scan_reads_pages_ahead_and_exports_what_it_exports_over_the_folder() {
    let dir = generate(21_000, 7);
    let root = data_root(&dir);
    let part = root.join("application_id=1001/date=2026-10-02/part-00000.parquet");
    assert!(std::fs::metadata(&part).unwrap().len() > 512 * 1024, "larger than a footer's first read");
    let server = logs_testkit::s3::S3Server::start();
    server.create_bucket("logs");
    server.upload_folder(&root, "logs", "data");
    for pages in MACHINERY {
        let over_bucket = bucket_engine_with_pages("s3://logs/data", &server.endpoint(), 1, pages);
        let (read_ahead, _) =
            bucket_agrees_with_folder(&root, &over_bucket, "s3://logs/data/", 30, pages).await;
        assert_eq!(read_ahead > 0, pages.read_ahead, "{pages:?}: filtered exports read pages ahead");
    }
}

/// Runs `queries` random requests over the folder `root` and over `over_bucket` (a copy of it
/// below `prefix`; both scans in one partition; both with the page machinery `pages`): the
/// same rows in the same order, the
/// oracle's rows, the same pruning, and no credential in `--explain`. Returns the pages the
/// bucket's scans read ahead, and those they decompressed only partially.
async fn bucket_agrees_with_folder(
    root: &std::path::Path,
    over_bucket: &logs_core::Engine,
    prefix: &str,
    queries: usize,
    pages: PageMachinery,
) -> (usize, usize) {
    let over_folder = engine_with_pages(root, 1, pages);
    let records = read_all(root);
    let mut rng = StdRng::seed_from_u64(3);
    let (mut read_ahead, mut partially) = (0, 0);
    for _ in 0..queries {
        let query = random_query(&mut rng, &records);
        let request = request(&query);
        let (from_folder, folder_export) = export_rows(&over_folder, &request).await;
        let (from_bucket, bucket_export) = export_rows(over_bucket, &request).await;
        assert_eq!(from_bucket, from_folder, "{query}");
        assert_matches_oracle(&query, &request, from_bucket, records.answer(&request));
        let (a, b) = (folder_export.selection(), bucket_export.selection());
        assert_eq!(
            (
                a.date_folders,
                a.date_folders_pruned,
                a.candidate_files,
                a.files_pruned_by_statistics,
                a.files.len()
            ),
            (
                b.date_folders,
                b.date_folders_pruned,
                b.candidate_files,
                b.files_pruned_by_statistics,
                b.files.len()
            ),
            "{query}"
        );
        assert!(b.files.iter().all(|f| f.name.starts_with(&format!("{prefix}application_id="))));
        let explain = bucket_export.explain();
        assert!(explain.contains(" LIST, 0 HEAD, "), "{explain}");
        assert!(
            !explain.contains(logs_testkit::s3::SECRET_ACCESS_KEY)
                && !explain.contains(logs_testkit::s3::ACCESS_KEY_ID)
        );
        read_ahead += bucket_export.metric("pages_read_ahead").map_or(0, |m| m.as_usize());
        partially += bucket_export.metric("pages_decompressed_partially").map_or(0, |m| m.as_usize());
    }
    (read_ahead, partially)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_agrees_with_the_oracle_on_a_generated_dataset() {
    let dir = generate(6000, 7);
    for pages in MACHINERY {
        check_random_requests(&data_root(&dir), 1, 150, pages).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_agrees_with_the_oracle_on_the_bundled_testdata() {
    for pages in MACHINERY {
        check_random_requests(&testdata(), 2, 150, pages).await;
    }
}

/// An empty value is a filter value too, and the empty value a rewritten page holds for a row
/// the filters do not select (`partial_page.rs`) must never be taken for it. `city` empty on
/// every fifth row, with `os_name` in the same request, over zstd files other tools wrote: the
/// oracle's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_filter_values_select_only_rows_whose_value_is_empty() {
    use datafusion::arrow::array::{Array, AsArray, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = generate(6000, 7);
    let root = data_root(&dir);
    for path in parquet_files(&root) {
        let file = std::fs::File::open(&path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
        let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
        let properties = zstd_properties(WriterVersion::PARQUET_1_0, false);
        let file = std::fs::File::create(&path).unwrap();
        let mut writer = ArrowWriter::try_new(file, batches[0].schema(), Some(properties)).unwrap();
        for batch in batches {
            let index = batch.schema().index_of("city").unwrap();
            let city = batch.column(index).as_string::<i32>();
            let emptied: StringArray = (0..city.len())
                .map(|i| if i % 5 == 0 { Some("") } else { city.is_valid(i).then(|| city.value(i)) })
                .collect();
            let mut columns = batch.columns().to_vec();
            columns[index] = std::sync::Arc::new(emptied);
            writer.write(&RecordBatch::try_new(batch.schema(), columns).unwrap()).unwrap();
        }
        writer.close().unwrap();
    }
    let records = read_all(&root);
    let (mut non_empty, mut partially) = (0, 0);
    for (os, pages) in ["android", "ios", "windows"].into_iter().flat_map(|os| MACHINERY.map(|p| (os, p))) {
        let engine = engine_with_pages(&root, 2, pages);
        for first in [true, false] {
            let filters = if first { format!("city=&os_name={os}") } else { format!("os_name={os}&city=") };
            let query = format!(
                "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error,error_json,city,os_name&{filters}"
            );
            let (matched, rewritten) = check_query(&engine, &records, &query, None).await;
            non_empty += usize::from(matched);
            partially += rewritten;
        }
    }
    assert!(non_empty > 0 && partially > 0, "{non_empty} requests matched rows, {partially} pages rewritten");
}
