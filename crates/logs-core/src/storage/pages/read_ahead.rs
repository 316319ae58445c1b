//! Reading a row group's pages ahead over an object store.
//!
//! With filters, the Parquet reader reads a row group in steps, each waiting for the last: the
//! pages of the first filter column that the page index keeps, then those of the next filter
//! column for the rows still selected, then the pages of every exported column for the rows
//! that matched. Over an object store each step is a round trip. The first step's pages already
//! say which rows can match at most: [`ReadAhead`] adds, to that first request, the pages of
//! every other column the scan reads that hold those rows, and holds them for the later steps,
//! which then make no request. It does so only while those pages come to at most
//! [`READ_AHEAD_LIMIT`] bytes; past that, a selective filter could leave most of them unused,
//! and the steps fetch what they need as before.
//!
//! What a later step does not use was fetched for nothing: at most the pages of the rows the
//! first filter column's pages hold, when the other filters reject them all. A local file
//! costs no round trip per read, and is never read ahead.
//!
//! A file without an offset index (written without a page index, and over a store too large
//! for one to be rebuilt from its page headers: `footer.rs`) has no known pages: the Parquet
//! reader then asks for whole column chunks at each step, and each chunk stands for one page
//! that holds all of its row group's rows. The first step brings the other columns' chunks of
//! the row group whole, within the same limit: the streaming-ingest point export's 720 hourly
//! objects took three requests each, and take one.

use std::collections::HashSet;
use std::ops::Range;

use bytes::Bytes;
use datafusion::parquet::file::metadata::ParquetMetaData;

/// Bytes one row group's read-ahead may fetch, at most. The scan reads a few files at once
/// (its partitions), each one row group at a time, so an export holds a few times this.
pub(crate) const READ_AHEAD_LIMIT: u64 = 8 * 1024 * 1024;

/// A data page, located.
#[derive(Debug, Clone)]
struct Page {
    bytes: Range<u64>,
    row_group: usize,
    rows: Range<i64>,
}

/// One column chunk of a row group, as its offset index describes it.
#[derive(Debug)]
struct Chunk {
    /// The dictionary page, if the chunk starts with one.
    dictionary: Option<Range<u64>>,
    pages: Vec<Page>,
    /// The scan reads this column.
    read: bool,
}

/// The read-ahead state of one file's reader (see the module documentation).
#[derive(Debug)]
pub(crate) struct ReadAhead {
    /// Every data page of the file, by its start.
    pages: Vec<Page>,
    /// By row group, then column.
    chunks: Vec<Vec<Chunk>>,
    /// Row groups already planned: each is read ahead once, at its first request.
    planned: HashSet<usize>,
    /// Pages fetched ahead and not yet superseded, by their place in the file.
    held: Vec<(Range<u64>, Bytes)>,
    /// Bytes one row group's read-ahead may fetch, at most.
    limit: u64,
}

impl ReadAhead {
    /// The read-ahead of a file with `footer`, whose scan reads the columns named in `read`,
    /// fetching at most `limit` bytes ahead for a row group; without an offset index, of whole
    /// column chunks ([`ReadAhead::of_chunks`]).
    pub(crate) fn new(footer: &ParquetMetaData, read: &HashSet<String>, limit: u64) -> Option<ReadAhead> {
        let Some(offset_index) = footer.offset_index() else {
            return Some(ReadAhead::of_chunks(footer, read, limit));
        };
        let mut pages = Vec::new();
        let mut chunks = Vec::with_capacity(footer.num_row_groups());
        for (row_group, (metadata, indexes)) in footer.row_groups().iter().zip(offset_index).enumerate() {
            let mut columns = Vec::with_capacity(indexes.len());
            for (column, index) in metadata.columns().iter().zip(indexes) {
                let locations = index.page_locations();
                let (start, _) = column.byte_range();
                let dictionary = locations
                    .first()
                    .map(|first| first.offset as u64)
                    .filter(|&first| first > start)
                    .map(|first| start..first);
                let chunk_pages: Vec<Page> = locations
                    .iter()
                    .enumerate()
                    .map(|(i, page)| {
                        let end_row =
                            locations.get(i + 1).map_or(metadata.num_rows(), |next| next.first_row_index);
                        let offset = page.offset as u64;
                        Page {
                            bytes: offset..offset + page.compressed_page_size as u64,
                            row_group,
                            rows: page.first_row_index..end_row,
                        }
                    })
                    .collect();
                pages.extend(chunk_pages.iter().cloned());
                let read = read.contains(&column.column_path().string());
                columns.push(Chunk { dictionary, pages: chunk_pages, read });
            }
            chunks.push(columns);
        }
        pages.sort_by_key(|page| page.bytes.start);
        Some(ReadAhead { pages, chunks, planned: HashSet::new(), held: Vec::new(), limit })
    }

    /// The read-ahead of a file without an offset index: each column chunk is one page that
    /// holds every row of its row group (the dictionary page inside it).
    fn of_chunks(footer: &ParquetMetaData, read: &HashSet<String>, limit: u64) -> ReadAhead {
        let mut pages = Vec::new();
        let mut chunks = Vec::with_capacity(footer.num_row_groups());
        for (row_group, metadata) in footer.row_groups().iter().enumerate() {
            let columns: Vec<Chunk> = metadata
                .columns()
                .iter()
                .map(|column| {
                    let (start, len) = column.byte_range();
                    let page = Page {
                        bytes: start..start.saturating_add(len),
                        row_group,
                        rows: 0..metadata.num_rows(),
                    };
                    pages.push(page.clone());
                    Chunk {
                        dictionary: None,
                        pages: vec![page],
                        read: read.contains(&column.column_path().string()),
                    }
                })
                .collect();
            chunks.push(columns);
        }
        pages.sort_by_key(|page| page.bytes.start);
        ReadAhead { pages, chunks, planned: HashSet::new(), held: Vec::new(), limit }
    }

    /// The bytes of `range` if they were fetched ahead.
    pub(crate) fn get(&self, range: &Range<u64>) -> Option<Bytes> {
        self.held.iter().find(|(held, _)| held.start <= range.start && range.end <= held.end).map(
            |(held, bytes)| {
                bytes.slice((range.start - held.start) as usize..(range.end - held.start) as usize)
            },
        )
    }

    /// What to fetch ahead along with `requested` (ranges not held): if they are the first
    /// request for a row group, the pages of the other columns the scan reads that hold the
    /// same rows, with their dictionary pages; otherwise nothing.
    pub(crate) fn plan(&mut self, requested: &[Range<u64>]) -> Vec<Range<u64>> {
        let within =
            |page: &Page| requested.iter().any(|r| r.start <= page.bytes.start && page.bytes.end <= r.end);
        let mut row_group = None;
        let mut rows: Vec<Range<i64>> = Vec::new();
        for range in requested {
            let first = self.pages.partition_point(|page| page.bytes.start < range.start);
            for page in self.pages[first..].iter().take_while(|page| page.bytes.end <= range.end) {
                if *row_group.get_or_insert(page.row_group) != page.row_group {
                    return Vec::new();
                }
                rows.push(page.rows.clone());
            }
        }
        let Some(row_group) = row_group else { return Vec::new() };
        if !self.planned.insert(row_group) {
            return Vec::new();
        }
        // The pages held for another row group are read no more.
        self.held.clear();
        let rows = merge(rows);
        let overlaps = |page: &Page| rows.iter().any(|r| page.rows.start < r.end && r.start < page.rows.end);
        let mut ahead = Vec::new();
        for chunk in self.chunks[row_group].iter().filter(|chunk| chunk.read) {
            let before = ahead.len();
            ahead.extend(chunk.pages.iter().filter(|p| overlaps(p) && !within(p)).map(|p| p.bytes.clone()));
            if ahead.len() > before
                && let Some(dictionary) = &chunk.dictionary
                && !requested.iter().any(|r| r.start <= dictionary.start && dictionary.end <= r.end)
            {
                ahead.push(dictionary.clone());
            }
        }
        let bytes: u64 = ahead.iter().map(|r| r.end - r.start).sum();
        if bytes > self.limit {
            return Vec::new();
        }
        ahead
    }

    /// Holds the pages fetched ahead, `ranges` with their `bytes`.
    pub(crate) fn hold(&mut self, ranges: &[Range<u64>], bytes: Vec<Bytes>) {
        self.held.extend(ranges.iter().cloned().zip(bytes));
    }
}

/// `ranges` sorted and merged where they touch or overlap.
fn merge(mut ranges: Vec<Range<i64>>) -> Vec<Range<i64>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<i64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match out.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs::File;
    use std::sync::Arc;

    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
    use datafusion::parquet::file::properties::WriterProperties;

    use crate::storage::pages::read_ahead::*;

    /// Rows per row group of [`file`].
    pub(crate) const ROW_GROUP: usize = 1_000;

    /// A file of two row groups of 1 000 rows, pages of 100 rows, with an offset index:
    /// `id` (0, 1, 2, …), `name` (a few values, dictionary-encoded), `text` (long, distinct,
    /// plain) and `other`. Returns its footer.
    pub(crate) fn file(path: &std::path::Path) -> Arc<ParquetMetaData> {
        let rows = 2 * ROW_GROUP as i64;
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from_iter_values(0..rows)) as _),
            ("name", Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("n{}", i % 7)))) as _),
            (
                "text",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("{i:08} {}", "t".repeat(200))),
                )) as _,
            ),
            ("other", Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i * 3))) as _),
        ])
        .unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_write_batch_size(100)
            .set_data_page_row_count_limit(100)
            .set_column_dictionary_enabled("text".into(), false)
            .build();
        write(path, &batch, properties)
    }

    /// Writes `batch` at `path` with `properties`; returns the file's footer with its page index.
    pub(crate) fn write(
        path: &std::path::Path,
        batch: &RecordBatch,
        properties: WriterProperties,
    ) -> Arc<ParquetMetaData> {
        let mut writer =
            ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(properties)).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
        let footer = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .parse_and_finish(&File::open(path).unwrap())
            .unwrap();
        Arc::new(footer)
    }

    /// The data pages of column `column` of row group `row_group`, with the rows each holds.
    fn pages(footer: &ParquetMetaData, row_group: usize, column: usize) -> Vec<(Range<u64>, Range<i64>)> {
        let locations = footer.offset_index().unwrap()[row_group][column].page_locations();
        let rows = footer.row_group(row_group).num_rows();
        locations
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let end = locations.get(i + 1).map_or(rows, |next| next.first_row_index);
                (
                    p.offset as u64..(p.offset + i64::from(p.compressed_page_size)) as u64,
                    p.first_row_index..end,
                )
            })
            .collect()
    }

    fn dictionary(footer: &ParquetMetaData, row_group: usize, column: usize) -> Range<u64> {
        let start = footer.row_group(row_group).column(column).byte_range().0;
        start..footer.offset_index().unwrap()[row_group][column].page_locations()[0].offset as u64
    }

    fn read(columns: &[&str]) -> HashSet<String> {
        columns.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn the_first_request_of_a_row_group_brings_the_pages_of_the_same_rows_of_the_columns_read() {
        let dir = tempfile::tempdir().unwrap();
        let footer = file(&dir.path().join("f.parquet"));
        let mut ahead = ReadAhead::new(&footer, &read(&["id", "name", "text"]), u64::MAX).unwrap();
        // The filter column's pages for rows 200..300 of the second row group, as the Parquet
        // reader asks for them.
        let id_pages = pages(&footer, 1, 0);
        let asked: Vec<Range<u64>> = id_pages
            .iter()
            .filter(|(_, rows)| rows.start < 300 && 200 < rows.end)
            .map(|(b, _)| b.clone())
            .collect();
        assert!(!asked.is_empty());
        let mut planned = ahead.plan(&asked);

        let mut expected: Vec<Range<u64>> = Vec::new();
        for column in [1, 2] {
            let overlapping: Vec<Range<u64>> = pages(&footer, 1, column)
                .into_iter()
                .filter(|(_, rows)| rows.start < 300 && 200 < rows.end)
                .map(|(b, _)| b)
                .collect();
            assert!(!overlapping.is_empty());
            expected.extend(overlapping);
        }
        // `name` is dictionary-encoded: its dictionary page comes too; `text` has none.
        expected.push(dictionary(&footer, 1, 1));
        assert!(dictionary(&footer, 1, 2).is_empty());
        planned.sort_by_key(|r| r.start);
        expected.sort_by_key(|r| r.start);
        assert_eq!(planned, expected, "`other` is not read, `id` was asked for");

        // The later steps of the same row group are not planned again; the other row group is.
        assert!(ahead.plan(&[pages(&footer, 1, 1)[2].0.clone()]).is_empty());
        assert!(!ahead.plan(&[pages(&footer, 0, 0)[0].0.clone()]).is_empty());
    }

    /// A dictionary page inside the ranges asked for is not read ahead a second time.
    #[test]
    fn a_dictionary_asked_for_already_is_not_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let footer = file(&dir.path().join("f.parquet"));
        let asked = [pages(&footer, 0, 0)[3].0.clone(), dictionary(&footer, 0, 3)];
        let mut ahead = ReadAhead::new(&footer, &read(&["id", "other"]), u64::MAX).unwrap();
        assert_eq!(ahead.plan(&asked), [pages(&footer, 0, 3)[3].0.clone()]);
    }

    /// Without an offset index, the first request of a row group (the Parquet reader asks for
    /// whole column chunks then) brings the other chunks the scan reads of that row group.
    #[test]
    fn without_an_offset_index_the_first_chunk_asked_for_brings_the_row_groups_other_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        file(&path);
        let footer = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Skip)
            .parse_and_finish(&File::open(&path).unwrap())
            .unwrap();
        assert!(footer.offset_index().is_none());
        let chunk = |row_group: usize, column: usize| {
            let (start, len) = footer.row_group(row_group).column(column).byte_range();
            start..start + len
        };
        let columns = read(&["id", "name", "text"]);
        let mut ahead = ReadAhead::new(&footer, &columns, u64::MAX).unwrap();
        let mut planned = ahead.plan(&[chunk(1, 0)]);
        planned.sort_by_key(|r| r.start);
        assert_eq!(planned, [chunk(1, 1), chunk(1, 2)], "`other` is not read, `id` was asked for");
        // The later steps of the row group are not planned again; the other row group is.
        assert!(ahead.plan(&[chunk(1, 1)]).is_empty());
        assert_eq!(ahead.plan(&[chunk(0, 2)]).len(), 2);
        // Within the limit only.
        let bytes = |r: &Range<u64>| r.end - r.start;
        let needed = bytes(&chunk(0, 1)) + bytes(&chunk(0, 2));
        let mut limited = ReadAhead::new(&footer, &columns, needed - 1).unwrap();
        assert!(limited.plan(&[chunk(0, 0)]).is_empty());
        let mut at_limit = ReadAhead::new(&footer, &columns, needed).unwrap();
        assert_eq!(at_limit.plan(&[chunk(0, 0)]).len(), 2);
    }

    #[test]
    fn row_ranges_merge_where_they_touch_or_overlap() {
        assert_eq!(merge(vec![5..10, 0..3, 3..4, 20..30, 25..40, 41..41]), vec![0..4, 5..10, 20..40, 41..41]);
        assert!(merge(Vec::new()).is_empty());
    }

    #[test]
    fn pages_held_serve_the_ranges_inside_them_until_another_row_group_is_planned() {
        let dir = tempfile::tempdir().unwrap();
        let footer = file(&dir.path().join("f.parquet"));
        let mut ahead = ReadAhead::new(&footer, &read(&["id", "other"]), u64::MAX).unwrap();
        let planned = ahead.plan(&[pages(&footer, 0, 0)[3].0.clone()]);
        let page = pages(&footer, 0, 3)[3].0.clone();
        assert_eq!(planned, [page.clone(), dictionary(&footer, 0, 3)]);
        let filled = |r: &Range<u64>| Bytes::from((r.start..r.end).map(|i| i as u8).collect::<Vec<u8>>());
        ahead.hold(&planned, planned.iter().map(filled).collect());
        let bytes = filled(&page);
        assert_eq!(ahead.get(&page), Some(bytes.clone()));
        assert_eq!(ahead.get(&(page.start + 1..page.start + 3)), Some(bytes.slice(1..3)));
        assert_eq!(ahead.get(&(page.start..page.end + 1)), None, "not all of it held");
        assert!(!ahead.plan(&[pages(&footer, 1, 0)[0].0.clone()]).is_empty());
        assert_eq!(ahead.get(&page), None, "dropped once the next row group is planned");
    }

    #[test]
    fn nothing_is_read_ahead_past_the_limit_whole_row_groups_or_ranges_that_are_not_pages() {
        let dir = tempfile::tempdir().unwrap();
        let footer = file(&dir.path().join("f.parquet"));
        let columns = read(&["id", "name", "text"]);
        let text_page = pages(&footer, 0, 2)[0].0.clone();
        let one_page = text_page.end - text_page.start;
        // The `name` and `text` pages of rows 0..100 come to more than one `text` page.
        let mut limited = ReadAhead::new(&footer, &columns, one_page).unwrap();
        assert!(limited.plan(&[pages(&footer, 0, 0)[0].0.clone()]).is_empty());
        let mut unlimited = ReadAhead::new(&footer, &columns, u64::MAX).unwrap();
        let planned = unlimited.plan(&[pages(&footer, 0, 0)[0].0.clone()]);
        assert!(!planned.is_empty());
        // A limit of exactly the bytes planned still lets them come.
        let exactly: u64 = planned.iter().map(|r| r.end - r.start).sum();
        let mut at_limit = ReadAhead::new(&footer, &columns, exactly).unwrap();
        assert_eq!(at_limit.plan(&[pages(&footer, 0, 0)[0].0.clone()]), planned);

        // Whole column chunks of every column read: nothing is left to read ahead.
        let mut whole = ReadAhead::new(&footer, &columns, u64::MAX).unwrap();
        let chunks: Vec<Range<u64>> = (0..3)
            .map(|c| {
                let (start, len) = footer.row_group(0).column(c).byte_range();
                start..start + len
            })
            .collect();
        assert!(whole.plan(&chunks).is_empty());
        // A range that holds no page (a dictionary page alone, the footer) plans nothing.
        let mut other = ReadAhead::new(&footer, &columns, u64::MAX).unwrap();
        assert!(other.plan(&[dictionary(&footer, 0, 1)]).is_empty());
        assert!(
            !other.plan(&[pages(&footer, 0, 0)[0].0.clone()]).is_empty(),
            "and the row group is still planned later"
        );
    }
}
