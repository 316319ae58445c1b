//! Generates small datasets and checks them through the public Parquet reader, independently
//! of the generator's own code.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Int64Type, UInt64Type};
use chrono::{DateTime, NaiveDate};
use logs_generate::{
    AppSpec, GenerateError, GenerateOptions, SortKey, generate, generate_with_progress, parse_apps,
    record_batch_schema,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::data_type::ByteArray;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::ReadOptionsBuilder;
use parquet::file::serialized_reader::SerializedFileReader;

fn options(out: &Path) -> GenerateOptions {
    let mut options = GenerateOptions::new(out);
    options.rows = 6_000;
    options.days = 4;
    options.start = NaiveDate::from_ymd_opt(2026, 10, 30).unwrap();
    options.late_fraction = 0.05;
    options.threads = 2;
    // Time order, which the layout checks below rely on (the default is error_id order,
    // checked in its own test).
    options.sort_by = SortKey::ErrorTimestamp;
    options
}

/// One application, one day, 2 500 rows and no late rows: a single file,
/// `application_id=42/date=2026-10-30/part-00000.parquet`.
fn one_file_options(out: &Path) -> GenerateOptions {
    let mut options = options(out);
    options.apps = parse_apps("42").unwrap();
    options.days = 1;
    options.rows = 2_500;
    options.late_fraction = 0.0;
    options
}

/// Every file under `dir`, relative to it, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().to_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap().build().unwrap();
    reader.map(Result::unwrap).collect()
}

fn strings<'a>(batch: &'a RecordBatch, name: &str) -> Vec<Option<&'a str>> {
    batch.column_by_name(name).unwrap().as_string::<i32>().iter().collect()
}

fn ints(batch: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    batch.column_by_name(name).unwrap().as_primitive::<Int64Type>().iter().collect()
}

fn datetime(ts: i64) -> String {
    DateTime::from_timestamp(ts, 0).unwrap().format("%Y-%m-%d %H:%M:%S").to_string()
}

#[test]
fn same_seed_same_bytes_whatever_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut summaries = Vec::new();
    for (name, seed, threads) in [("a", 7, 1), ("b", 7, 2), ("c", 8, 2)] {
        let mut o = options(&dir.path().join(name));
        o.rows = 2_000;
        o.seed = seed;
        o.threads = threads;
        summaries.push(generate(&o).unwrap());
    }
    assert_eq!(summaries[0], summaries[1]);
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    assert_eq!(files(&a), files(&b));
    let mut differs = false;
    for file in files(&a) {
        assert_eq!(fs::read(a.join(&file)).unwrap(), fs::read(b.join(&file)).unwrap(), "{}", file.display());
        differs |= fs::read(c.join(&file)).ok() != Some(fs::read(a.join(&file)).unwrap());
    }
    assert!(differs, "another seed gives other data");
}

#[test]
fn layout_counts_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let mut o = options(&out);
    o.max_file_rows = 1_000; // app 1001 has ~1200 rows a day: two files per day
    let summary = generate(&o).unwrap();
    assert_eq!(summary.rows, 6_000);
    let mut file_names = std::collections::BTreeSet::new();

    let mut rows_per_app: BTreeMap<i64, u64> = BTreeMap::new();
    let (mut files_seen, mut bytes, mut late_rows, mut crosses_days, mut above_2_63) = (0, 0, 0, 0, 0);
    for file in files(&out) {
        let parts: Vec<&str> = file.iter().map(|p| p.to_str().unwrap()).collect();
        let [app, date, name] = parts[..] else { panic!("unexpected path {}", file.display()) };
        let app: i64 = app.strip_prefix("application_id=").unwrap().parse().unwrap();
        let date = NaiveDate::parse_from_str(date.strip_prefix("date=").unwrap(), "%Y-%m-%d").unwrap();
        assert!(date >= o.start && date < o.start + chrono::Days::new(4), "{date}");
        file_names.insert(name.to_owned());
        let late = match name {
            "part-00000.parquet" | "part-00001.parquet" => false,
            "late-00000.parquet" | "late-00001.parquet" => true,
            other => panic!("unexpected file {other}"),
        };
        files_seen += 1;
        bytes += fs::metadata(out.join(&file)).unwrap().len();

        let mut previous_ts = i64::MIN;
        for batch in read_batches(&out.join(&file)) {
            assert_eq!(batch.schema(), record_batch_schema());
            *rows_per_app.entry(app).or_default() += batch.num_rows() as u64;
            let error_ts = ints(&batch, "error_timestamp");
            let receive_ts = ints(&batch, "error_receive_timestamp");
            let error_dt = strings(&batch, "error_datetime");
            let receive_dt = strings(&batch, "error_receive_datetime");
            let os = strings(&batch, "os_name");
            let (google, ifv, ifa) =
                (strings(&batch, "google_aid"), strings(&batch, "ios_ifv"), strings(&batch, "ios_ifa"));
            let (mcc, operator) = (ints(&batch, "mcc"), strings(&batch, "operator_name"));
            let package = strings(&batch, "app_package_name");
            let ids = batch.column_by_name("service_device_id").unwrap().as_primitive::<UInt64Type>();
            for i in 0..batch.num_rows() {
                let (e, r) = (error_ts[i].unwrap(), receive_ts[i].unwrap());
                assert_eq!(error_dt[i].unwrap(), datetime(e));
                assert_eq!(receive_dt[i].unwrap(), datetime(r));
                assert_eq!(
                    DateTime::from_timestamp(e, 0).unwrap().date_naive(),
                    date,
                    "row {i} of {}",
                    file.display()
                );
                assert!(e >= previous_ts, "sorted by error_timestamp");
                previous_ts = e;
                assert_eq!(r - e >= 3600, late, "late rows, and only they, are in late files");
                late_rows += u64::from(late);
                crosses_days += u64::from(datetime(r)[..10] != datetime(e)[..10]);
                above_2_63 += u64::from(ids.value(i) > 1 << 63);
                let os = os[i].unwrap();
                assert!(["android", "ios", "windows"].contains(&os));
                assert_eq!(google[i].is_some(), os == "android");
                assert_eq!(ifv[i].is_some(), os == "ios");
                assert_eq!(ifa[i].is_some(), os == "ios");
                assert_eq!(mcc[i].is_some(), operator[i].is_some());
                assert!(!package[i].unwrap().is_empty());
            }
        }
    }
    assert_eq!(rows_per_app, BTreeMap::from([(1001, 4_800), (1002, 900), (1003, 300)]));
    assert_eq!((files_seen, bytes), (summary.files, summary.bytes));
    assert_eq!(file_names.len(), 4, "{file_names:?}");
    assert!((150..450).contains(&late_rows), "{late_rows}");
    assert!(crosses_days > late_rows / 2, "{crosses_days}");
    assert!(above_2_63 > 1_000, "{above_2_63}");
}

#[test]
fn parquet_metadata_has_indexes_and_bloom_filters() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let mut o = one_file_options(&out);
    o.row_group_rows = 1_250;
    assert_eq!(generate(&o).unwrap().files, 1);
    let path = out.join("application_id=42").join("date=2026-10-30").join("part-00000.parquet");

    let batches = read_batches(&path);
    let first_id = strings(&batches[0], "error_id")[0].unwrap().to_owned();
    let options = ReadOptionsBuilder::new()
        .with_page_index()
        .with_reader_properties(ReaderProperties::builder().set_read_bloom_filter(true).build())
        .build();
    let reader = SerializedFileReader::new_with_options(File::open(&path).unwrap(), options).unwrap();
    let metadata = reader.metadata();
    assert_eq!(metadata.num_row_groups(), 2);
    assert!(metadata.column_index().is_some() && metadata.offset_index().is_some(), "page index written");
    let schema = record_batch_schema();
    let column = |name: &str| schema.index_of(name).unwrap();
    for (i, row_group) in metadata.row_groups().iter().enumerate() {
        assert_eq!(row_group.num_rows(), 1_250);
        assert_eq!(
            row_group.sorting_columns().map(|s| s[0].column_idx),
            Some(column("error_timestamp") as i32)
        );
        for name in ["error_id", "service_device_id", "profile_id", "google_aid", "ios_ifv", "device_ipv6"] {
            assert!(row_group.column(column(name)).bloom_filter_offset().is_some(), "bloom filter on {name}");
        }
        assert!(row_group.column(column("error")).bloom_filter_offset().is_none());
        // The default codec: ZSTD for the long texts, LZ4 where it saves a quarter or more,
        // nothing for dictionary indices and random ids.
        for name in ["error", "error_json"] {
            assert!(matches!(row_group.column(column(name)).compression(), Compression::ZSTD(_)), "{name}");
        }
        for name in ["error_timestamp", "error_receive_datetime", "device_ipv6", "ios_ifa", "profile_id"] {
            assert_eq!(row_group.column(column(name)).compression(), Compression::LZ4_RAW, "{name}");
        }
        for name in ["error_id", "os_name", "service_device_id", "city", "google_aid", "mcc"] {
            assert_eq!(row_group.column(column(name)).compression(), Compression::UNCOMPRESSED, "{name}");
        }
        // Near-unique columns have no dictionary page; repetitive ones keep theirs.
        for name in
            ["error", "error_timestamp", "error_datetime", "service_device_id", "google_aid", "device_ipv6"]
        {
            assert!(
                row_group.column(column(name)).dictionary_page_offset().is_none(),
                "no dictionary on {name}"
            );
        }
        for name in ["error_id", "os_name", "city", "app_version_name"] {
            assert!(
                row_group.column(column(name)).dictionary_page_offset().is_some(),
                "dictionary on {name}"
            );
        }
        // Page statistics (a column index) only for the time columns and the sort key (here
        // `error_timestamp`); every other column has statistics per column chunk.
        let column_index = &metadata.column_index().unwrap()[i];
        for name in [
            "error",
            "error_json",
            "service_device_id",
            "google_aid",
            "error_datetime",
            "error_id",
            "os_name",
            "city",
        ] {
            assert!(matches!(column_index[column(name)], ColumnIndexMetaData::NONE), "{name}");
            assert!(row_group.column(column(name)).statistics().is_some(), "chunk statistics on {name}");
        }
        for name in ["error_timestamp", "error_receive_timestamp"] {
            assert!(!matches!(column_index[column(name)], ColumnIndexMetaData::NONE), "{name}");
        }
        let pages = &metadata.offset_index().unwrap()[i][column("error")].page_locations();
        // The writer checks the 1 MiB page size every 1024 rows; error texts are ~1 KB.
        assert!(pages.len() > 1, "the error column has several pages per row group");
    }
    let row_group = reader.get_row_group(0).unwrap();
    let bloom = row_group.get_column_bloom_filter(column("error_id")).expect("bloom filter read");
    assert!(bloom.check(&ByteArray::from(first_id.as_str())));
    let misses = (0..1000).filter(|i| bloom.check(&ByteArray::from(format!("absent-{i}").as_str()))).count();
    assert!(misses < 50, "{misses} false positives in 1000");
}

#[test]
fn other_sort_keys() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let mut o = options(&out);
    o.apps = vec![AppSpec { id: 5, weight: 1 }];
    o.days = 1;
    o.rows = 1_500;
    o.sort_by = SortKey::ErrorId;
    generate(&o).unwrap();
    for file in files(&out) {
        let batches = read_batches(&out.join(file));
        let keys: Vec<(String, i64)> = batches
            .iter()
            .flat_map(|b| {
                let ids = strings(b, "error_id").into_iter().map(|s| s.unwrap().to_owned());
                ids.zip(ints(b, "error_timestamp").into_iter().map(Option::unwrap)).collect::<Vec<_>>()
            })
            .collect();
        assert!(keys.is_sorted());
    }
}

#[test]
fn progress_reaches_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("data"));
    o.rows = 1_000;
    let max = std::sync::atomic::AtomicU64::new(0);
    generate_with_progress(&o, |done| {
        max.fetch_max(done, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(max.into_inner(), 1_000);
}

#[test]
fn zero_rows_make_an_empty_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&dir.path().join("data"));
    o.rows = 0;
    assert_eq!(generate(&o).unwrap(), Default::default());
    assert!(files(&o.out).is_empty());
}

#[test]
fn refuses_bad_options_and_non_empty_directories() {
    let invalid = |o: &GenerateOptions| match generate(o) {
        Err(GenerateError::InvalidOption { name, message }) => (name, message),
        other => panic!("expected an invalid option, got {other:?}"),
    };
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("keep.txt"), "x").unwrap();
    let (name, message) = invalid(&options(dir.path()));
    assert_eq!(name, "out");
    assert!(message.contains(&dir.path().display().to_string()), "{message}");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "nothing written");

    assert_eq!(invalid(&options(&dir.path().join("keep.txt"))).0, "out");

    let mut o = options(&dir.path().join("new"));
    o.days = 0;
    assert_eq!(invalid(&o).0, "days");
    o.days = 1;
    o.apps = vec![AppSpec { id: 1, weight: 1 }, AppSpec { id: 1, weight: 2 }];
    assert_eq!(invalid(&o).0, "apps");
    assert!(!o.out.exists(), "validation happens before anything is written");
}

#[test]
fn tiny_row_groups_are_written_without_deep_recursion() {
    // The parquet writer splits a batch larger than a row group by recursing once per row
    // group: with one-row groups and 8 192-row batches that overflowed the stack.
    let dir = tempfile::tempdir().unwrap();
    let mut o = GenerateOptions::new(dir.path().join("d"));
    o.rows = 4_000;
    o.days = 1;
    o.apps = parse_apps("1:1").unwrap();
    o.row_group_rows = 1;
    o.threads = 1;
    let summary = generate(&o).unwrap();
    assert_eq!(summary.rows, 4_000);
}

#[test]
fn the_sort_key_has_page_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data");
    let mut o = one_file_options(&out);
    o.sort_by = SortKey::ServiceDeviceId;
    generate(&o).unwrap();
    let path = out.join("application_id=42").join("date=2026-10-30").join("part-00000.parquet");
    let options = ReadOptionsBuilder::new().with_page_index().build();
    let reader = SerializedFileReader::new_with_options(File::open(&path).unwrap(), options).unwrap();
    let column_index = &reader.metadata().column_index().unwrap()[0];
    let schema = record_batch_schema();
    for (name, indexed) in [("service_device_id", true), ("error_timestamp", true), ("error_id", false)] {
        let has = !matches!(column_index[schema.index_of(name).unwrap()], ColumnIndexMetaData::NONE);
        assert_eq!(has, indexed, "{name}");
    }
}
