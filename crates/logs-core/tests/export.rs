//! Engine behaviour on real files: pruning, unreadable files, schema drift, parts.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, DictionaryArray, Int32Array, Int64Array, LargeStringArray, StringArray, UInt32Array,
    UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Int8Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use futures::StreamExt;
use logs_core::{Engine, EngineConfig, Error};
use support::*;

const DAY1: &str = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02";

fn corrupt(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b"PAR1 this is not a parquet file").unwrap();
}

#[tokio::test]
async fn a_one_day_export_reads_only_that_days_folder_of_that_application() {
    let dir = generate(3000, 5);
    let root = data_root(&dir);
    // Unreadable files everywhere else: reading any of them would fail the export.
    corrupt(&root.join("application_id=1002/date=2026-10-02/bad.parquet"));
    corrupt(&root.join("application_id=1001/date=2026-10-03/bad.parquet"));
    corrupt(&root.join("application_id=1001/date=2026-10-01/bad.parquet"));
    let engine = engine(&root);
    let request = request(&format!("{DAY1}&fields=error_id"));
    let mut export = engine.export(&request).await.unwrap();
    let selection = export.selection().clone();
    assert!(!selection.files.is_empty());
    for file in &selection.files {
        assert!(
            Path::new(&file.name).starts_with(root.join("application_id=1001/date=2026-10-02")),
            "{}",
            file.name
        );
    }
    assert_eq!(selection.date_folders, 5);
    assert_eq!(selection.date_folders_pruned, 4);
    assert!(selection.skipped.is_empty());
    let mut rows = 0;
    while let Some(batch) = export.next().await {
        rows += batch.unwrap().num_rows();
    }
    let records = read_all(&root);
    assert_eq!(rows, records.answer(&request).len());
    assert!(rows > 0);
}

#[tokio::test]
async fn row_groups_are_pruned_by_statistics_and_bloom_filters() {
    let dir = generate(20_000, 2);
    let root = data_root(&dir);
    let engine = engine(&root);
    // Files are sorted by error_timestamp with 512-row groups: one hour skips most groups.
    let hour = request(
        "application_id=1001&date_since=2026-10-01+10:00:00&date_until=2026-10-01+10:59:59&fields=error_id",
    );
    let mut export = engine.export(&hour).await.unwrap();
    while let Some(batch) = export.next().await {
        batch.unwrap();
    }
    let by_statistics = export.pruning("row_groups_pruned_statistics").unwrap();
    assert!(by_statistics.pruned >= by_statistics.matched * 4, "{by_statistics:?}\n{}", export.explain());
    assert!(by_statistics.matched >= 1, "{by_statistics:?}");
    let explain = export.explain();
    assert!(explain.contains("row_groups_pruned_statistics"), "{explain}");

    // An error id that exists nowhere but sorts among the real ones: the bloom filters rule
    // out the row groups that min/max statistics cannot.
    let ids = sorted(
        engine_rows(
            &engine,
            &request("application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id"),
        )
        .await,
    );
    let middle = ids[ids.len() / 2][0].clone().unwrap();
    let missing = request(&format!(
        "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id&error_id={middle}0"
    ));
    let mut export = engine.export(&missing).await.unwrap();
    assert!(export.next().await.is_none());
    let bloom = export.pruning("row_groups_pruned_bloom_filter").unwrap();
    assert!(bloom.pruned > 0 && bloom.matched == 0, "{bloom:?}\n{}", export.explain());
}

#[tokio::test]
async fn receive_dimension_prunes_files_by_footer_statistics() {
    let dir = generate(3000, 5);
    let root = data_root(&dir);
    let engine = engine(&root);
    let request = request(
        "application_id=1001&date_since=2026-10-02&date_until=2026-10-02&fields=error_id&date_dimension=receive",
    );
    let rows = engine_rows(&engine, &request).await;
    let export = engine.export(&request).await.unwrap();
    let s = export.selection();
    assert_eq!(s.date_folders_pruned, 0, "receive times do not follow the date folders");
    assert!(s.files_pruned_by_statistics > 0, "{s:?}");
    assert_eq!(sorted(rows), sorted(read_all(&root).answer(&request)));
}

#[tokio::test]
async fn an_unreadable_file_fails_the_export_naming_it_unless_skipping_is_asked_for() {
    let dir = generate(2000, 3);
    let root = data_root(&dir);
    let bad = root.join("application_id=1001/date=2026-10-02/zz-corrupt.parquet");
    corrupt(&bad);
    let empty = root.join("application_id=1001/date=2026-10-02/zz-empty.parquet");
    std::fs::write(&empty, b"").unwrap();
    let engine = engine(&root);

    let query = format!("{DAY1}&fields=error_id,os_name");
    match engine.export(&request(&query)).await {
        Err(Error::Storage { path: Some(path), .. }) => {
            assert!(Path::new(&path) == bad || Path::new(&path) == empty, "{path}")
        }
        other => panic!("expected a storage error naming the file, got {other:?}"),
    }

    let request = request(&format!("{query}&skip_unavailable_shards=true"));
    let rows = engine_rows(&engine, &request).await;
    let export = engine.export(&request).await.unwrap();
    let mut skipped: Vec<_> = export.selection().skipped.iter().map(|s| PathBuf::from(&s.name)).collect();
    skipped.sort();
    assert_eq!(skipped, [bad, empty]);
    assert_eq!(sorted(rows), sorted(read_all(&root).answer(&request)));
}

#[tokio::test]
async fn files_that_are_not_parquet_data_are_ignored() {
    let dir = generate(1000, 2);
    let root = data_root(&dir);
    let day = root.join("application_id=1001/date=2026-10-02");
    std::fs::write(day.join("_SUCCESS"), b"").unwrap();
    std::fs::write(day.join("part-9.parquet.tmp"), b"garbage").unwrap();
    std::fs::write(day.join(".part-9.parquet"), b"garbage").unwrap();
    std::fs::create_dir_all(root.join("application_id=1001/date=not-a-date")).unwrap();
    std::fs::write(root.join("README.txt"), b"hello").unwrap();
    let engine = engine(&root);
    let request = request(&format!("{DAY1}&fields=error_id"));
    assert_eq!(sorted(engine_rows(&engine, &request).await), sorted(read_all(&root).answer(&request)));
    assert_eq!(engine.storage().applications().await.unwrap(), [1001, 1002, 1003]);
}

#[tokio::test]
async fn other_writers_types_and_missing_columns_are_read() {
    // A file as another tool might write it: Int32 mcc, LargeUtf8 and dictionary strings,
    // an extra column, and most columns missing.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("application_id=5/date=2026-10-01");
    std::fs::create_dir_all(&folder).unwrap();
    let ts = 1_790_812_800i64 + 3600;
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("error_timestamp", Arc::new(datafusion::arrow::array::Int64Array::from(vec![ts, ts + 1, ts + 2]))),
        ("mcc", Arc::new(Int32Array::from(vec![Some(250), None, Some(-1)]))),
        ("os_name", Arc::new(DictionaryArray::<Int8Type>::from_iter([Some("ios"), Some("android"), None]))),
        ("city", Arc::new(LargeStringArray::from(vec![Some("Zürich"), Some(""), None]))),
        ("service_device_id", Arc::new(UInt64Array::from(vec![u64::MAX, 1, 2]))),
        ("something_else", Arc::new(StringArray::from(vec!["x", "y", "z"]))),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let file = std::fs::File::create(folder.join("other.parquet")).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();

    let engine =
        Engine::open(dir.path(), EngineConfig { target_partitions: 1, ..Default::default() }).unwrap();
    let request = request(
        "application_id=5&date_since=2026-10-01&date_until=2026-10-01\
         &fields=mcc,os_name,city,service_device_id,error_id,application_id",
    );
    let rows = engine_rows(&engine, &request).await;
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        rows,
        [
            vec![s("250"), s("ios"), s("Zürich"), s("18446744073709551615"), None, s("5")],
            vec![None, s("android"), s(""), s("1"), None, s("5")],
            vec![s("-1"), None, None, s("2"), None, s("5")],
        ]
    );
    let filtered = engine_rows(
        &engine,
        &support::request(
            "application_id=5&date_since=2026-10-01&date_until=2026-10-01&fields=city&mcc=250&os_name=ios",
        ),
    )
    .await;
    assert_eq!(filtered, [vec![s("Zürich")]]);
}

#[tokio::test]
async fn parts_are_disjoint_and_make_the_whole_export() {
    let dir = generate(3000, 3);
    let root = data_root(&dir);
    let engine = engine(&root);
    let base = "application_id=1001&date_since=2026-10-01&date_until=2026-10-03\
                &fields=error_timestamp,error_receive_timestamp,service_device_id,error_id,os_name";
    let whole = sorted(engine_rows(&engine, &request(base)).await);
    assert!(whole.len() > 100);
    for count in [1u32, 2, 3, 7] {
        let mut union = Vec::new();
        for number in 0..count {
            let part =
                engine_rows(&engine, &request(&format!("{base}&parts_count={count}&part_number={number}")))
                    .await;
            if count > 1 {
                assert!(part.len() < whole.len(), "part {number} of {count} is the whole export");
            }
            union.extend(part);
        }
        assert_eq!(sorted(union), whole, "the {count} parts must add up to the export exactly once");
    }
}

#[tokio::test]
async fn unknown_application_exports_nothing_and_a_missing_root_is_a_storage_error() {
    let dir = generate(500, 2);
    let engine = engine(&data_root(&dir));
    let rows = engine_rows(
        &engine,
        &request("application_id=77&date_since=2026-10-01&date_until=2026-10-02&fields=error"),
    )
    .await;
    assert!(rows.is_empty());
    match Engine::open(dir.path().join("nope"), EngineConfig::default()) {
        Err(Error::Storage { path: Some(p), .. }) => assert!(p.ends_with("nope")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_operator_maximum_limits_an_export_without_limit() {
    let dir = generate(2000, 2);
    let engine =
        Engine::open(data_root(&dir), EngineConfig { max_limit: Some(7), ..Default::default() }).unwrap();
    let request = engine
        .parse_request("application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id")
        .unwrap();
    assert_eq!(request.limit(), Some(7));
    assert_eq!(engine_rows(&engine, &request).await.len(), 7);
    let err = engine
        .parse_request(
            "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id&limit=8",
        )
        .unwrap_err();
    assert!(err.to_string().contains("maximum of 7"), "{err}");
}

#[tokio::test]
async fn the_largest_limits_export_every_row() {
    let dir = generate(1000, 2);
    let engine = engine(&data_root(&dir));
    let base = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id";
    let all = engine_rows(&engine, &request(base)).await.len();
    assert!(all > 0);
    for limit in [i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
        let rows = engine_rows(&engine, &request(&format!("{base}&limit={limit}"))).await;
        assert_eq!(rows.len(), all, "limit={limit}");
    }
}

#[tokio::test]
async fn a_range_the_footers_prove_is_not_tested_row_by_row_and_gives_the_same_rows() {
    let dir = generate(3000, 5);
    let root = data_root(&dir);
    let engine = engine(&root);
    let records = read_all(&root);
    for (range, proven) in [
        // Whole days: every file holds only rows of its day.
        ("date_since=2026-10-02&date_until=2026-10-03", true),
        // From noon: the first day's files are partly outside, so every row is tested.
        ("date_since=2026-10-02+12:00:00&date_until=2026-10-03", false),
        ("date_since=2026-10-02&date_until=2026-10-03&date_dimension=receive", false),
    ] {
        let query =
            format!("application_id=1001&{range}&fields=error_id,error_timestamp,os_name&os_name=ios");
        let request = request(&query);
        let (rows, export) = export_rows(&engine, &request).await;
        assert_eq!(export.selection().all_in_range(), proven, "{query}");
        let plan = export.explain();
        assert_eq!(
            plan.contains("error_timestamp >= Int64"),
            !proven && !range.contains("receive"),
            "{query}\n{plan}"
        );
        assert!(!rows.is_empty(), "{query}");
        assert_matches_oracle(&query, &request, rows, records.answer(&request));
    }
}

/// One file in the folder of 2026-10-01 (or `date`) of application 5, with `error_timestamp`
/// as given.
fn write_timestamps(root: &Path, date: &str, timestamps: ArrayRef) {
    let folder = root.join(format!("application_id=5/date={date}"));
    std::fs::create_dir_all(&folder).unwrap();
    let ids: Vec<String> = (0..timestamps.len()).map(|i| format!("id{i}")).collect();
    let batch = RecordBatch::try_from_iter([
        ("error_timestamp", timestamps),
        ("error_id", Arc::new(StringArray::from(ids)) as ArrayRef),
    ])
    .unwrap();
    let file = std::fs::File::create(folder.join("other.parquet")).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[tokio::test]
async fn a_null_timestamp_keeps_the_range_test_and_is_never_exported() {
    let dir = tempfile::tempdir().unwrap();
    let ts = 1_790_812_800i64 + 3600;
    write_timestamps(
        dir.path(),
        "2026-10-01",
        Arc::new(Int64Array::from(vec![Some(ts), None, Some(ts + 1)])),
    );
    let engine = engine(dir.path());
    let request = request("application_id=5&date_since=2026-10-01&date_until=2026-10-01&fields=error_id");
    let (rows, export) = export_rows(&engine, &request).await;
    assert!(!export.selection().all_in_range());
    assert_eq!(sorted(rows), [vec![Some("id0".to_owned())], vec![Some("id2".to_owned())]]);
}

#[tokio::test]
async fn unsigned_32_bit_timestamps_past_2038_are_selected_and_filtered_exactly() {
    // Stored as INT32 with unsigned order: read as signed, their statistics would be negative
    // and the file would be pruned from an export of its own day.
    let dir = tempfile::tempdir().unwrap();
    let day = 2_208_988_800u32; // 2040-01-01T00:00:00Z, above i32::MAX
    write_timestamps(
        dir.path(),
        "2040-01-01",
        Arc::new(UInt32Array::from(vec![day, day + 10, day + 86_400])),
    );
    let engine = engine(dir.path());
    let request =
        request("application_id=5&date_since=2040-01-01&date_until=2040-01-01&fields=error_timestamp");
    let (rows, export) = export_rows(&engine, &request).await;
    assert_eq!(export.selection().files.len(), 1, "{}", export.explain());
    assert!(!export.selection().all_in_range(), "unsigned statistics prove nothing here");
    let s = |v: u32| vec![Some(v.to_string())];
    assert_eq!(sorted(rows), [s(day), s(day + 10)]);
}

#[tokio::test]
async fn a_filtered_export_copies_the_long_texts_and_keeps_the_output_types() {
    let dir = generate(3000, 2);
    let root = data_root(&dir);
    let engine = engine(&root);
    let records = read_all(&root);
    for (filter, copied) in [("&os_name=ios", true), ("&parts_count=3&part_number=1", true), ("", false)] {
        let query = format!(
            "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error,error_json,os_name{filter}"
        );
        let request = request(&query);
        let (rows, export) = export_rows(&engine, &request).await;
        let types: Vec<_> = export.schema().fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(types, vec![DataType::Utf8View; 3], "{query}");
        let plan = export.explain();
        assert_eq!(plan.contains("CAST(errors.error AS Utf8View)"), copied, "{query}\n{plan}");
        assert!(!rows.is_empty(), "{query}");
        assert_matches_oracle(&query, &request, rows, records.answer(&request));
    }
}

/// Rewrites `path` as pyarrow and DuckDB write files: every column dictionary-encoded until its
/// dictionary page is full and plain after that, Snappy, no page index.
fn with_dictionary_fallback(path: &Path) {
    use datafusion::parquet::basic::Compression;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .set_dictionary_page_size_limit(512)
        .set_write_batch_size(20)
        .set_data_page_row_count_limit(20)
        .build();
    rewrite(path, properties);
}

#[tokio::test]
async fn dictionary_pages_only_plain_pages_follow_are_not_read_and_the_rows_are_the_same() {
    let dir = generate(3000, 2);
    let root = data_root(&dir);
    for path in parquet_files(&root) {
        with_dictionary_fallback(&path);
    }
    let records = read_all(&root);
    let engine = engine(&root);
    let all: Vec<&str> = logs_core::Field::all().map(|f| f.name()).collect();
    let all = all.join(",");
    let range = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02";
    // Application 1001's first rows sit in dictionary-encoded pages of every column with many
    // values, its last row in plain pages.
    let ids: Vec<String> = records
        .rows
        .iter()
        .filter(|(app, _)| *app == 1001)
        .map(|(_, row)| row.iter().find(|(name, _)| name == "error_id").unwrap().1.clone().unwrap())
        .collect();
    let (first_id, last_id) = (ids.first().unwrap(), ids.last().unwrap());
    let mut skipped = 0;
    for filter in [format!("&error_id={last_id}"), format!("&error_id={first_id}"), String::new()] {
        let query = format!("{range}&fields={all}{filter}");
        let request = request(&query);
        let (rows, export) = export_rows(&engine, &request).await;
        assert!(!rows.is_empty(), "{query}");
        assert_matches_oracle(&query, &request, rows, records.answer(&request));
        let count = export.metric("dictionary_pages_not_read").map_or(0, |m| m.as_usize());
        if filter.is_empty() {
            assert_eq!(count, 0, "every page is read, dictionary-encoded ones too");
        }
        skipped += count;
    }
    assert!(skipped > 0, "some dictionary pages are not read");
}

/// Two days of 3 000 rows written without offset indexes (`with_dictionary_fallback`), and
/// their records.
fn without_offset_indexes() -> (tempfile::TempDir, Records) {
    let dir = generate(3000, 2);
    let root = data_root(&dir);
    for path in parquet_files(&root) {
        with_dictionary_fallback(&path);
    }
    let records = read_all(&root);
    (dir, records)
}

/// Every row of the two days of [`without_offset_indexes`], three of their fields.
const WHOLE_TWO_DAYS: &str =
    "application_id=1001&date_since=2026-10-01&date_until=2026-10-02+23:59:59&fields=error_id,error,city";

/// A file written without an offset index gets one rebuilt from its page headers (a read per
/// page or so) only for an export that picks rows within it: one that reads every row of its
/// files skips no page and walks no header.
#[tokio::test]
async fn the_offset_index_is_rebuilt_only_for_exports_that_pick_rows_within_files() {
    let (dir, records) = without_offset_indexes();
    let root = data_root(&dir);
    let whole = WHOLE_TWO_DAYS;
    let mut reads = Vec::new();
    for query in [whole.to_owned(), format!("{whole}&os_name=ios")] {
        let request = request(&query);
        // A new engine each time: no footer cached by the other export.
        let (rows, export) = export_rows(&engine(&root), &request).await;
        assert!(!rows.is_empty(), "{query}");
        assert_matches_oracle(&query, &request, rows, records.answer(&request));
        reads.push(export.requests().gets);
    }
    let (whole_reads, filtered_reads) = (reads[0], reads[1]);
    // 20-row pages: walking the headers of every chunk takes hundreds of reads.
    assert!(
        filtered_reads > 10 * whole_reads,
        "{whole_reads} reads for every row, {filtered_reads} filtered"
    );
}

/// Footers of files without a page index are cached too: one engine's later exports read
/// none of them again, and an export that picks rows after one that did not gets the offset
/// index rebuilt once, then cached.
#[tokio::test]
async fn footers_without_a_page_index_are_cached_and_completed_when_an_export_needs_it() {
    let (dir, records) = without_offset_indexes();
    let root = data_root(&dir);
    let whole = WHOLE_TWO_DAYS;
    let filtered = format!("{whole}&os_name=ios");
    let engine = engine(&root);
    let mut reads = Vec::new();
    for query in [whole, &filtered, whole, &filtered] {
        let request = request(query);
        let (rows, export) = export_rows(&engine, &request).await;
        assert!(!rows.is_empty(), "{query}");
        assert_matches_oracle(query, &request, rows, records.answer(&request));
        reads.push(export.requests().gets);
    }
    // The first export reads each (small) file whole with its footer; the third, its
    // footers cached, only the pages of the files' row groups, which some files' lack.
    assert!(reads[2] < reads[0], "the footers are read once: {reads:?}");
    assert!(reads[1] > 10 * reads[0], "the filtered export rebuilds the offset index: {reads:?}");
    assert!(reads[3] * 10 < reads[1], "and only once: {reads:?}");
}

#[tokio::test]
async fn aliases_and_absent_fields_are_named_and_typed_as_declared() {
    let engine = engine(&testdata());
    let records = read_all(&testdata());
    let base = "application_id=1001&date_since=2026-10-01&date_until=2026-10-03";
    let query = format!("{base}&fields=appmetrica_device_id,oaid,level,town,service_device_id&os_name=ios");
    let aliased = request(&query);
    let (rows, export) = export_rows(&engine, &aliased).await;
    let schema = export.schema();
    let columns: Vec<_> =
        schema.fields().iter().map(|f| (f.name().as_str(), f.data_type().clone())).collect();
    assert_eq!(
        columns,
        [
            ("appmetrica_device_id", DataType::UInt64),
            ("oaid", DataType::Utf8View),
            ("level", DataType::Int64),
            ("town", DataType::Utf8View),
            ("service_device_id", DataType::UInt64),
        ]
    );
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!((&row[1], &row[2]), (&None, &None), "absent fields are null");
        assert_eq!(row[0], row[4], "an alias holds its field's values");
    }
    assert_matches_oracle(&query, &aliased, rows, records.answer(&aliased));

    // Only absent fields: one null row per record, none lost.
    let only_absent = request(&format!("{base}&fields=oaid"));
    let counted = request(&format!("{base}&fields=error_id"));
    let (absent_rows, _) = export_rows(&engine, &only_absent).await;
    assert_eq!(absent_rows.len(), records.answer(&counted).len());
    assert!(absent_rows.iter().all(|row| row == &vec![None]));
}

/// The scan's progress starts below the selected files' total, moves while rows arrive (never
/// backwards, never past the total) and ends exactly at it, for a full scan and for a
/// filtered one that reads only a few pages.
#[tokio::test]
async fn progress_ends_at_the_selected_files_total() {
    let dir = generate(6000, 7);
    let engine = engine(&data_root(&dir));
    for query in [
        "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,error",
        "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,error&os_name=ios&mcc=250",
    ] {
        let mut export = engine.export(&request(query)).await.unwrap();
        let (covered, total) = export.progress();
        let sizes: u64 = export.selection().files.iter().map(|f| f.object.size).sum();
        assert_eq!(total, sizes, "{query}");
        assert!(total > 0 && covered < total, "{query}: {covered} of {total} before any row");
        let mut last = covered;
        while let Some(batch) = export.next().await {
            batch.unwrap();
            let (now, _) = export.progress();
            assert!(last <= now && now <= total, "{query}: {last}, then {now} of {total}");
            last = now;
        }
        assert!(last > covered, "{query}: no progress while the rows came ({last} of {total})");
        assert_eq!(export.progress(), (total, total), "{query}");
    }
}

/// The rows an export selects in a row group are worked out again (to decompress its text
/// pages only that far) only when the pages to rewrite outweigh the filter columns four times:
/// over files other tools wrote, an export of one `error_id` rewrites pages, one of one
/// `error_json` (a filter column as long as the texts it would save) does not.
#[tokio::test]
async fn only_exports_whose_text_pages_outweigh_their_filter_columns_work_their_rows_out_again() {
    use datafusion::parquet::basic::{Compression, Encoding, ZstdLevel};
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    let dir = generate(6000, 7);
    let root = data_root(&dir);
    for path in parquet_files(&root) {
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_encoding(Encoding::PLAIN)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_data_page_row_count_limit(20)
            .set_write_batch_size(20)
            .build();
        rewrite(&path, properties);
    }
    let records = read_all(&root);
    let row = &records.rows.iter().find(|(app, _)| *app == 1001).unwrap().1;
    let value = |field: &str| row.iter().find(|(name, _)| name == field).unwrap().1.clone().unwrap();
    let encoded = |v: String| -> String { v.bytes().map(|b| format!("%{b:02X}")).collect() };
    let mut rewritten = Vec::new();
    for filter in ["error_id", "error_json"] {
        let query = format!(
            "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error,error_id,os_name&{filter}={}",
            encoded(value(filter))
        );
        let request = request(&query);
        let (rows, export) = export_rows(&engine(&root), &request).await;
        assert!(!rows.is_empty(), "{query}");
        assert_matches_oracle(&query, &request, rows, records.answer(&request));
        rewritten.push(export.metric("pages_decompressed_partially").map_or(0, |m| m.as_usize()));
    }
    assert!(rewritten[0] > 0, "one error_id: {rewritten:?}");
    assert_eq!(rewritten[1], 0, "one error_json: {rewritten:?}");
}
