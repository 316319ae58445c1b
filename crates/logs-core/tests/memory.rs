//! What an export holds in memory at once: the pages its readers hold fetched stay within the
//! engine's `fetched_bytes_limit`, or one row group's when a row group is larger.

mod support;

use std::path::Path;

use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use logs_core::{Engine, EngineConfig};
use support::*;

const FIELDS: [&str; 4] = ["error_datetime", "error_id", "error", "city"];

/// Bytes of the column chunks of `path`'s largest row group among `columns`.
fn largest_row_group(path: &Path, columns: &[&str]) -> u64 {
    let file = std::fs::File::open(path).unwrap();
    let metadata = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().metadata().clone();
    let sizes = metadata.row_groups().iter().map(|row_group| {
        row_group
            .columns()
            .iter()
            .filter(|c| columns.contains(&c.column_descr().name()))
            .map(|c| c.compressed_size() as u64)
            .sum::<u64>()
    });
    sizes.max().unwrap_or(0)
}

fn engine(root: &Path, fetched_bytes_limit: usize) -> Engine {
    let config = EngineConfig {
        target_partitions: 4,
        // Batches much smaller than a row group: a partition stops while holding one, and
        // another starts (the partitions' queues hold a batch or two).
        batch_size: 100,
        fetched_bytes_limit,
        aliases: test_aliases(),
        ..EngineConfig::default()
    };
    Engine::open(root, config).unwrap()
}

/// Files written as another tool writes a file per day: one row group, zstd, no offset index.
/// With a limit of one byte every row group is read alone, so the pages held at once are at
/// most the largest row group's chunks of the columns read; the rows are those of the oracle,
/// as with the default limit.
#[tokio::test]
async fn with_one_row_group_per_file_the_pages_held_at_once_are_one_row_groups() {
    let dir = generate(6000, 3);
    let root = data_root(&dir);
    let one_row_group = WriterProperties::builder()
        .set_max_row_group_row_count(Some(usize::MAX))
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .build();
    let files = parquet_files(&root);
    for path in &files {
        rewrite(path, one_row_group.clone());
    }
    let records = read_all(&root);
    let range = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02+12:00:00";
    for (dimension, time) in [("default", "error_timestamp"), ("receive", "error_receive_timestamp")] {
        let read: Vec<&str> = FIELDS.iter().copied().chain([time]).collect();
        let largest = files.iter().map(|path| largest_row_group(path, &read)).max().unwrap();
        let query = format!("{range}&fields={}&date_dimension={dimension}", FIELDS.join(","));
        let request = request(&query);
        let (rows, export) = export_rows(&engine(&root, 1), &request).await;
        assert!(export.selection().files.len() > 2, "{query}: several files, read by 4 partitions");
        assert!(export.selection().files.iter().all(|f| f.row_groups == 1));
        let peak = export.metric("fetched_bytes_held_peak").expect("the metric").as_usize() as u64;
        assert!(peak > 0 && peak <= largest, "{query}: held {peak} bytes at once, one row group {largest}");
        assert_matches_oracle(&query, &request, rows.clone(), records.answer(&request));
        let (default_rows, _) =
            export_rows(&engine(&root, EngineConfig::default().fetched_bytes_limit), &request).await;
        assert_eq!(sorted(default_rows), sorted(rows), "{query}: the same rows with the default limit");
    }
}
