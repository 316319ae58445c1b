//! The floor of a filtered export: the time to read and decompress only the pages that hold a
//! matching row, in every column, and nothing else.
//!
//! ```sh
//! match-floor [--threads N] [--partial] --filter column=value [--filter ...] FILE...
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
//!
//! With `--partial` (zstd files, data pages v1), it then measures that reader instead of
//! estimating it. First, untimed, it finds the zstd frame of each of those pages in the file
//! (checked against the page the Parquet crate decompressed) and, for each plain-encoded text
//! page, the end of its last matching value (from the lengths of its values, checked against
//! the page's length). Then, timed, on `--threads` threads, it decompresses the frames with
//! zstd's streaming decoder twice: whole, and each plain text page only up to that end.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray};
use arrow::datatypes::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, Type};
use parquet::column::page::{Page, PageReader};
use parquet::file::reader::{FileReader, SerializedFileReader};
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The matching rows of one row group of one file, by their index in the row group.
struct Task {
    file: String,
    row_group: usize,
    rows: Vec<u64>,
}

impl Task {
    /// The last matching row in `rows` (a page's rows), if any: the floor reads the page then.
    fn last_match_in(&self, rows: std::ops::Range<u64>) -> Option<u64> {
        let first = self.rows.partition_point(|&r| r < rows.start);
        let end = self.rows.partition_point(|&r| r < rows.end);
        (first < end).then(|| self.rows[end - 1])
    }
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
    let mut partial = false;
    let mut filters = Vec::new();
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => threads = args.next().ok_or("--threads needs a number")?.parse()?,
            "--partial" => partial = true,
            "--filter" => {
                let filter = args.next().ok_or("--filter needs column=value")?;
                let (column, value) = filter.split_once('=').ok_or("--filter needs column=value")?;
                filters.push((column.to_owned(), value.to_owned()));
            }
            _ => files.push(arg),
        }
    }
    if files.is_empty() || filters.is_empty() {
        return Err(
            "usage: match-floor [--threads N] [--partial] --filter column=value [--filter ...] FILE..."
                .into(),
        );
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
    if partial {
        let mut pages = Vec::new();
        for task in &tasks {
            pages.extend(raw_pages(task)?);
        }
        let (whole, whole_bytes) = decompress_frames(&pages, threads, false)?;
        let (part, part_bytes) = decompress_frames(&pages, threads, true)?;
        println!(
            "zstd alone, streaming, on {threads} threads: the {} frames whole {:.3} s ({:.1} MB); \
             each plain text page only up to its last match {:.3} s ({:.1} MB, {:.0} % of the time)",
            pages.len(),
            whole.as_secs_f64(),
            whole_bytes as f64 / 1e6,
            part.as_secs_f64(),
            part_bytes as f64 / 1e6,
            100.0 * part.as_secs_f64() / whole.as_secs_f64().max(f64::MIN_POSITIVE)
        );
    }
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
            if let Some(last_match) = task.last_match_in(row..row + rows) {
                let share = (last_match - row + 1, rows);
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

/// A page the floor decompresses: its zstd frame, its decompressed length, and how much of it
/// a reader stopping after the last matching value needs (all of it but for plain text pages).
struct RawPage {
    frame: Vec<u8>,
    whole: usize,
    needed: usize,
}

/// The pages of `task` that [`decompress_matching_pages`] decompresses, as [`RawPage`]s.
fn raw_pages(task: &Task) -> Result<Vec<RawPage>, Error> {
    let file = File::open(&task.file)?;
    let reader = SerializedFileReader::new(file.try_clone()?)?;
    let row_group = reader.get_row_group(task.row_group)?;
    let mut out = Vec::new();
    for column in 0..row_group.num_columns() {
        let meta = row_group.metadata().column(column);
        if !matches!(meta.compression(), Compression::ZSTD(_)) {
            return Err(format!("{}: --partial needs zstd, not {}", task.file, meta.compression()).into());
        }
        let (start, len) = meta.byte_range();
        let mut chunk = vec![0; usize::try_from(len)?];
        file.read_exact_at(&mut chunk, start)?;
        let optional = meta.column_descr().max_def_level() > 0;
        let mut lengths: Option<Vec<Option<usize>>> = None;
        let mut pages = row_group.get_column_page_reader(column)?;
        let (mut cursor, mut row) = (0, 0u64);
        while let Some(page) = pages.get_next_page()? {
            let frame = next_frame(&chunk, &mut cursor, page.buffer())?;
            let whole = page.buffer().len();
            let (rows, last_match) = match &page {
                Page::DictionaryPage { .. } => {
                    out.push(RawPage { frame, whole, needed: whole });
                    continue;
                }
                Page::DataPage { num_values, .. } => {
                    let rows = u64::from(*num_values);
                    (rows, task.last_match_in(row..row + rows))
                }
                Page::DataPageV2 { .. } => {
                    return Err(format!("{}: --partial reads data pages v1 only", task.file).into());
                }
            };
            if let Some(last_match) = last_match {
                let needed = if meta.column_type() == Type::BYTE_ARRAY && page.encoding() == Encoding::PLAIN {
                    let lengths = match &mut lengths {
                        Some(lengths) => lengths,
                        None => lengths.insert(value_lengths(&task.file, task.row_group, column)?),
                    };
                    let values = &lengths[row as usize..(row + rows) as usize];
                    end_of_value(page.buffer(), optional, values, (last_match - row) as usize).ok_or_else(
                        || format!("{}: a text page of column {column} is not as its values say", task.file),
                    )?
                } else {
                    whole
                };
                out.push(RawPage { frame, whole, needed });
            }
            row += rows;
        }
    }
    Ok(out)
}

/// The zstd frame at or after `chunk[*cursor..]` that decompresses to `page` (a page header
/// comes first, and may hold the frame's magic number by chance), moving `cursor` past it.
fn next_frame(chunk: &[u8], cursor: &mut usize, page: &[u8]) -> Result<Vec<u8>, Error> {
    const MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();
    let mut at = *cursor;
    while let Some(i) = chunk[at..].windows(4).position(|w| w == MAGIC) {
        let start = at + i;
        if let Ok(len) = zstd::zstd_safe::find_frame_compressed_size(&chunk[start..]) {
            let frame = &chunk[start..start + len];
            if zstd::bulk::decompress(frame, page.len()).is_ok_and(|d| d == page) {
                *cursor = start + len;
                return Ok(frame.to_vec());
            }
        }
        at = start + 1;
    }
    Err("a page's zstd frame was not found in its column chunk".into())
}

/// The length of each value of a text column chunk's rows (`None` for a null).
fn value_lengths(file: &str, row_group: usize, column: usize) -> Result<Vec<Option<usize>>, Error> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(file)?)?;
    let mask = ProjectionMask::leaves(builder.parquet_schema(), [column]);
    let reader = builder.with_row_groups(vec![row_group]).with_projection(mask).build()?;
    let mut out = Vec::new();
    for batch in reader {
        let array = batch?.column(0).clone();
        for i in 0..array.len() {
            out.push((!array.is_null(i)).then(|| bytes_at(array.as_ref(), i)).transpose()?);
        }
    }
    Ok(out)
}

fn bytes_at(array: &dyn Array, i: usize) -> Result<usize, Error> {
    match array.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(string_at(array, i)?.len()),
        DataType::Binary => Ok(array.as_binary::<i32>().value(i).len()),
        DataType::BinaryView => Ok(array.as_binary_view().value(i).len()),
        other => Err(format!("a text column read as {other}").into()),
    }
}

/// Where the value of row `last` ends in a decompressed plain page of a flat text column whose
/// rows have `values` (lengths, `None` for nulls): its definition levels (with their 4-byte
/// length, if `optional`), then each value after its 4-byte length. `None` unless the values
/// end exactly where the page does and the length before row `last`'s value is its own.
fn end_of_value(page: &[u8], optional: bool, values: &[Option<usize>], last: usize) -> Option<usize> {
    let levels = if optional { 4 + u32::from_le_bytes(page.get(..4)?.try_into().ok()?) as usize } else { 0 };
    let size = |rows: &[Option<usize>]| rows.iter().flatten().map(|len| 4 + len).sum::<usize>();
    if levels + size(values) != page.len() {
        return None;
    }
    let end = levels + size(&values[..=last]);
    if let Some(len) = values[last] {
        let prefix = page.get(end - len - 4..end - len)?;
        if u32::from_le_bytes(prefix.try_into().ok()?) as usize != len {
            return None;
        }
    }
    Some(end)
}

/// Decompresses `pages` on `threads` threads with zstd's streaming decoder, each page whole or,
/// with `partial`, up to what it needs: the time taken and the bytes produced.
fn decompress_frames(pages: &[RawPage], threads: usize, partial: bool) -> Result<(Duration, u64), Error> {
    let queue = Mutex::new(pages.chunks(16));
    let produced = Mutex::new(0u64);
    let largest = pages.iter().map(|p| p.whole).max().unwrap_or(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> Result<(), Error> {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<(), Error> {
                    let mut decoder = Decoder::new()?;
                    let mut buffer = vec![0u8; largest];
                    let mut bytes = 0u64;
                    loop {
                        let Some(batch) = queue.lock().unwrap().next() else { break };
                        for page in batch {
                            let target = if partial { page.needed } else { page.whole };
                            decompress_prefix(&mut decoder, &page.frame, &mut buffer[..target])?;
                            bytes += target as u64;
                        }
                    }
                    *produced.lock().unwrap() += bytes;
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("a worker panicked"))
    })?;
    Ok((started.elapsed(), produced.into_inner().unwrap()))
}

/// Fills `out` with the start of what `frame` decompresses to, decompressing no further than
/// the block that ends it.
fn decompress_prefix(decoder: &mut Decoder, frame: &[u8], out: &mut [u8]) -> Result<(), Error> {
    decoder.reinit()?;
    let mut input = InBuffer::around(frame);
    let mut output = OutBuffer::around(out);
    while output.pos() < output.capacity() {
        let before = (input.pos(), output.pos());
        decoder.run(&mut input, &mut output)?;
        if (input.pos(), output.pos()) == before {
            return Err("a zstd frame ended before the bytes a page needs".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BinaryArray, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};

    use super::*;

    /// Test files' properties: no dictionary, pages of 100 rows.
    fn pages_of_100() -> WriterPropertiesBuilder {
        WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_write_batch_size(100)
            .set_data_page_row_count_limit(100)
    }

    fn write(path: &std::path::Path, batch: &RecordBatch, properties: WriterPropertiesBuilder) {
        let file = File::create(path).unwrap();
        let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties.build())).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
    }

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
        write(&path, &batch, pages_of_100());
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

    #[test]
    fn partial_decompression_stops_after_the_last_matching_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        // As above, with zstd and a column that has nulls: rows 150 and 720 match.
        let key = |i: usize| if i == 150 || i == 720 { "x".to_owned() } else { format!("k{i}") };
        let text = |i: usize| (i % 7 != 3).then(|| format!("{i:04}{}", "y".repeat(4092)));
        let batch = RecordBatch::try_from_iter([
            ("key", Arc::new(StringArray::from_iter_values((0..1000).map(key))) as _),
            ("text", Arc::new(StringArray::from_iter((0..1000).map(text))) as _),
        ])
        .unwrap();
        write(&path, &batch, pages_of_100().set_compression(Compression::ZSTD(Default::default())));
        let task = Task { file: path.to_str().unwrap().to_owned(), row_group: 0, rows: vec![150, 720] };

        let pages = raw_pages(&task).unwrap();
        // Pages 1 and 7 of each column, as the floor reads them.
        assert_eq!(pages.len(), 4);
        // The key pages end with 49 and 79 values of 4 bytes (and their lengths) after "x".
        assert_eq!(pages[0].whole - pages[0].needed, 49 * 8);
        assert_eq!(pages[1].whole - pages[1].needed, 79 * 8);
        // Text rows 101, 108, 115, … are null, 150 among them. Of the 85 values of rows
        // 100..200, 43 are in rows 100..=150; of the 86 of rows 700..800, 18 in rows 700..=720.
        let value = 4 + 4096;
        for (page, (before, all)) in pages[2..].iter().zip([(43, 85), (18, 86)]) {
            assert_eq!(page.whole - page.needed, (all - before) * value, "{} {}", page.whole, page.needed);
        }

        // Decompressing only up to `needed` gives the start of the whole page.
        let mut decoder = Decoder::new().unwrap();
        for page in &pages {
            let whole = zstd::bulk::decompress(&page.frame, page.whole).unwrap();
            let mut start = vec![0; page.needed];
            decompress_prefix(&mut decoder, &page.frame, &mut start).unwrap();
            assert_eq!(start, whole[..page.needed]);
        }
        let (_, whole) = decompress_frames(&pages, 2, false).unwrap();
        let (_, partial) = decompress_frames(&pages, 2, true).unwrap();
        assert_eq!(whole, pages.iter().map(|p| p.whole as u64).sum::<u64>());
        assert_eq!(partial, pages.iter().map(|p| p.needed as u64).sum::<u64>());
        assert!(partial < whole);
    }

    #[test]
    fn a_frame_inside_a_page_header_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        // Every value of `blob` is a whole zstd frame, which the page headers' statistics
        // repeat before each page's own frame.
        let decoy = zstd::bulk::compress(b"decoy", 1).unwrap();
        let batch = RecordBatch::try_from_iter([
            ("key", Arc::new(StringArray::from_iter_values((0..300).map(|i| format!("k{}", i % 150)))) as _),
            ("blob", Arc::new(BinaryArray::from_iter_values((0..300).map(|_| decoy.as_slice()))) as _),
        ])
        .unwrap();
        let properties = pages_of_100()
            .set_compression(Compression::ZSTD(Default::default()))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_write_page_header_statistics(true);
        write(&path, &batch, properties);
        let file = std::fs::read(&path).unwrap();
        let decoys = file.windows(decoy.len()).filter(|w| *w == decoy.as_slice()).count();
        assert!(decoys >= 6, "{decoys} decoys: the three page headers should hold two each");

        // Row 7 (key k7) and row 157 (also k7) are in pages 0 and 1.
        let task = Task { file: path.to_str().unwrap().to_owned(), row_group: 0, rows: vec![7, 157] };
        let pages = raw_pages(&task).unwrap();
        assert_eq!(pages.len(), 4);
        for page in &pages {
            assert_eq!(zstd::bulk::decompress(&page.frame, page.whole).unwrap().len(), page.whole);
        }
        // The blob pages: rows 0..=7 and 100..=157 of 100 values of 4 + the decoy's length.
        let value = 4 + decoy.len();
        assert_eq!(pages[2].whole - pages[2].needed, 92 * value);
        assert_eq!(pages[3].whole - pages[3].needed, 42 * value);
    }

    #[test]
    fn a_page_that_does_not_add_up_is_refused() {
        // Levels of 2 bytes (after their length), then values of 3 and 1 bytes.
        let mut page = vec![2, 0, 0, 0, 0xAA, 0xBB];
        page.extend([3, 0, 0, 0, b'a', b'b', b'c', 1, 0, 0, 0, b'd']);
        assert_eq!(end_of_value(&page, true, &[Some(3), None, Some(1)], 0), Some(6 + 7));
        assert_eq!(end_of_value(&page, true, &[Some(3), None, Some(1)], 1), Some(6 + 7));
        assert_eq!(end_of_value(&page, true, &[Some(3), None, Some(1)], 2), Some(page.len()));
        // Lengths that do not fill the page, or that put a value's length elsewhere.
        assert_eq!(end_of_value(&page, true, &[Some(3), Some(1)], 1), Some(page.len()));
        assert_eq!(end_of_value(&page, true, &[Some(2), Some(2)], 0), None);
        assert_eq!(end_of_value(&page, true, &[Some(3)], 0), None);
        assert_eq!(end_of_value(&page[4..], false, &[Some(3), Some(1)], 0), None);
    }
}
