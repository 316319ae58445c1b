//! The floor of a filtered export: the time to read and decompress only the pages that hold a
//! matching row, in every column, and nothing else.
//!
//! ```sh
//! match-floor [--threads N] --filter column=value [--filter ...] FILE...
//! ```
//!
//! First, untimed, the rows where every `column` equals its `value` are found in each file.
//! Then, timed, each row group of each file is read column by column with the Parquet crate's
//! page reader, on `--threads` threads (2 by default): a data page that holds a matching row is
//! read and decompressed (with its column chunk's dictionary page), every other page is passed
//! over without being decompressed. No page is decoded. Prints the pages and bytes it
//! decompressed and the time it took; `benches/peers/run` compares the point export on the
//! arrival-order files with it.
//!
//! It also prints how many of those bytes a reader would need that stopped decompressing a
//! plain-encoded text page after the zstd block holding the page's last matching row (blocks
//! of at most [`ZSTD_BLOCK`] bytes are the unit a zstd frame is decompressed in). That figure is
//! an estimate: it places a row's value in proportion to the row's position in the page, as
//! for texts of similar lengths.

use std::collections::BTreeMap;
use std::fs::File;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Encoding, Type};
use parquet::column::page::PageReader;
use parquet::file::reader::{FileReader, SerializedFileReader};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The matching rows of one row group of one file, by their index in the row group.
struct Task {
    file: String,
    row_group: usize,
    rows: Vec<u64>,
}

#[derive(Default)]
struct Totals {
    pages_read: u64,
    pages_passed: u64,
    bytes_read: u64,
    /// Of `bytes_read`, those up to the block holding each plain text page's last match.
    bytes_to_last_match: u64,
}

/// The largest block of a zstd frame, 128 KiB: a frame is decompressed a block at a time.
const ZSTD_BLOCK: u64 = 128 * 1024;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("match-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let mut threads = 2;
    let mut filters = Vec::new();
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => threads = args.next().ok_or("--threads needs a number")?.parse()?,
            "--filter" => {
                let filter = args.next().ok_or("--filter needs column=value")?;
                let (column, value) = filter.split_once('=').ok_or("--filter needs column=value")?;
                filters.push((column.to_owned(), value.to_owned()));
            }
            _ => files.push(arg),
        }
    }
    if files.is_empty() || filters.is_empty() {
        return Err("usage: match-floor [--threads N] --filter column=value [--filter ...] FILE...".into());
    }

    let mut tasks = Vec::new();
    let mut matched = 0;
    for file in &files {
        for (row_group, rows) in matching_rows(file, &filters)? {
            matched += rows.len();
            tasks.push(Task { file: file.clone(), row_group, rows });
        }
    }

    let queue = Mutex::new(tasks.iter());
    let totals = Mutex::new(Totals::default());
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), Error> {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<(), Error> {
                    loop {
                        let Some(task) = queue.lock().unwrap().next() else { return Ok(()) };
                        let done = decompress_matching_pages(task)?;
                        let mut totals = totals.lock().unwrap();
                        totals.pages_read += done.pages_read;
                        totals.pages_passed += done.pages_passed;
                        totals.bytes_read += done.bytes_read;
                        totals.bytes_to_last_match += done.bytes_to_last_match;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("a worker panicked"))
    })?;
    let elapsed = started.elapsed();
    let totals = totals.into_inner().unwrap();
    println!(
        "match floor: {matched} matching rows in {} row groups of {} files; {} pages decompressed \
         ({:.1} MB once decompressed), {} passed over; {:.3} s on {threads} threads",
        tasks.len(),
        files.len(),
        totals.pages_read,
        totals.bytes_read as f64 / 1e6,
        totals.pages_passed,
        elapsed.as_secs_f64()
    );
    println!(
        "stopping after the block holding the last match of each plain text page: about {:.1} MB \
         ({:.0} % of them)",
        totals.bytes_to_last_match as f64 / 1e6,
        100.0 * totals.bytes_to_last_match as f64 / totals.bytes_read.max(1) as f64
    );
    Ok(())
}

/// The rows of `file` where every filter holds, by row group (row groups without any left out).
fn matching_rows(file: &str, filters: &[(String, String)]) -> Result<BTreeMap<usize, Vec<u64>>, Error> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(file)?)?;
    let schema = builder.parquet_schema();
    let mut leaves = Vec::new();
    for (column, _) in filters {
        let leaf = (0..schema.num_columns())
            .find(|&i| schema.column(i).name() == column)
            .ok_or_else(|| format!("{file} has no column {column}"))?;
        leaves.push(leaf);
    }
    let row_group_rows: Vec<u64> =
        builder.metadata().row_groups().iter().map(|rg| rg.num_rows() as u64).collect();
    let mask = ProjectionMask::leaves(schema, leaves);
    let reader = builder.with_projection(mask).build()?;
    let mut matches = Vec::new();
    let mut row = 0u64;
    for batch in reader {
        let batch = batch?;
        let mut keep = vec![true; batch.num_rows()];
        for (column, value) in filters {
            let array = batch.column_by_name(column).ok_or_else(|| format!("{file}: no column {column}"))?;
            for (i, keep) in keep.iter_mut().enumerate() {
                *keep &= !array.is_null(i) && string_at(array.as_ref(), i)? == value.as_str();
            }
        }
        matches.extend(keep.iter().enumerate().filter(|(_, k)| **k).map(|(i, _)| row + i as u64));
        row += batch.num_rows() as u64;
    }
    let mut out: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    let mut start = 0;
    for (row_group, rows) in row_group_rows.iter().enumerate() {
        let end = start + rows;
        let inside: Vec<u64> =
            matches.iter().filter(|&&m| start <= m && m < end).map(|m| m - start).collect();
        if !inside.is_empty() {
            out.insert(row_group, inside);
        }
        start = end;
    }
    Ok(out)
}

fn string_at(array: &dyn Array, i: usize) -> Result<&str, Error> {
    match array.data_type() {
        DataType::Utf8 => Ok(array.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Ok(array.as_string::<i64>().value(i)),
        DataType::Utf8View => Ok(array.as_string_view().value(i)),
        other => Err(format!("filters compare strings, not {other}").into()),
    }
}

/// Reads and decompresses, in every column of the task's row group, the pages that hold one of
/// its rows (and the dictionary pages), passing over the others.
fn decompress_matching_pages(task: &Task) -> Result<Totals, Error> {
    let reader = SerializedFileReader::new(File::open(&task.file)?)?;
    let row_group = reader.get_row_group(task.row_group)?;
    let mut totals = Totals::default();
    for column in 0..row_group.num_columns() {
        let text = row_group.metadata().column(column).column_type() == Type::BYTE_ARRAY;
        let mut pages = row_group.get_column_page_reader(column)?;
        let mut row = 0u64;
        while let Some(page) = pages.peek_next_page()? {
            if page.is_dict {
                read_page(pages.as_mut(), &mut totals, None)?;
                continue;
            }
            let rows = page.num_rows.or(page.num_levels).ok_or("a data page without a row count")? as u64;
            let first = task.rows.partition_point(|&r| r < row);
            let last = task.rows.partition_point(|&r| r < row + rows);
            if first < last {
                let share = (task.rows[last - 1] - row + 1, rows);
                read_page(pages.as_mut(), &mut totals, Some(share).filter(|_| text))?;
            } else {
                pages.skip_next_page()?;
                totals.pages_passed += 1;
            }
            row += rows;
        }
    }
    Ok(totals)
}

/// Reads the next page. `rows_to_last_match`, for a text column's data page: the rows up to
/// and including its last matching row, and the rows of the page.
fn read_page(
    pages: &mut dyn PageReader,
    totals: &mut Totals,
    rows_to_last_match: Option<(u64, u64)>,
) -> Result<(), Error> {
    let page = pages.get_next_page()?.ok_or("a page announced but not read")?;
    let bytes = page.buffer().len() as u64;
    totals.pages_read += 1;
    totals.bytes_read += bytes;
    totals.bytes_to_last_match += match rows_to_last_match {
        Some((needed, rows)) if page.encoding() == Encoding::PLAIN => {
            (bytes * needed).div_ceil(rows.max(1)).div_ceil(ZSTD_BLOCK).saturating_mul(ZSTD_BLOCK).min(bytes)
        }
        _ => bytes,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::*;

    #[test]
    fn only_the_pages_holding_a_matching_row_are_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        // One row group of 1 000 rows, pages of 100 rows, no dictionary: rows 150 and 720 match.
        // Each text is 4 100 bytes with its length, so a text page is 410 000 bytes and more.
        let key = |i: usize| if i == 150 || i == 720 { "x".to_owned() } else { format!("k{i}") };
        let text = |i: usize| format!("{i:04}{}", "y".repeat(4092));
        let batch = RecordBatch::try_from_iter([
            ("key", Arc::new(StringArray::from_iter_values((0..1000).map(key))) as _),
            ("text", Arc::new(StringArray::from_iter_values((0..1000).map(text))) as _),
        ])
        .unwrap();
        let properties = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_write_batch_size(100)
            .set_data_page_row_count_limit(100)
            .build();
        let mut writer =
            ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let file = path.to_str().unwrap().to_owned();

        let matches = matching_rows(&file, &[("key".to_owned(), "x".to_owned())]).unwrap();
        assert_eq!(matches.into_iter().collect::<Vec<_>>(), [(0, vec![150, 720])]);
        let task = Task { file, row_group: 0, rows: vec![150, 720] };
        let totals = decompress_matching_pages(&task).unwrap();
        // Pages 1 and 7 of each of the two columns.
        assert_eq!((totals.pages_read, totals.pages_passed), (4, 16));
        assert!(totals.bytes_read > 2 * 410_000);
        // The key pages are shorter than a block and count whole. Of text page 1, rows up to
        // 150 (51 of 100) end in its second block; of page 7, rows up to 720 (21) in its first.
        let spared = totals.bytes_read - totals.bytes_to_last_match;
        let kept = 2 * ZSTD_BLOCK + ZSTD_BLOCK;
        assert!((2 * 410_000 - kept..2 * 410_100 - kept).contains(&spared), "{spared}");
    }
}
