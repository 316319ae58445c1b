//! Which rows of a row group an export's equality filters select, found before its other
//! columns' pages are decoded, so that those pages can be decompressed only as far as the
//! selected rows (`partial_page.rs`).
//!
//! The Parquet reader evaluates the filters itself and then asks for the pages that hold the
//! rows they kept, but it does not say which rows those are. The scan reads the filter columns'
//! chunks of the row group once more and evaluates the same equalities on them: every row the
//! reader keeps is among the rows found here, since it keeps only rows that pass every filter.
//! [`PartialPages`] does this for the scan's reader of one file, for the row groups whose text
//! pages outweigh their filter columns, and rewrites those pages.

use std::collections::HashMap;
use std::io::Cursor;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::arrow::array::{Array, AsArray, BooleanArray, StringViewArray};
use datafusion::arrow::compute::kernels::cmp::eq;
use datafusion::arrow::compute::{and, cast};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::basic::{Compression, Type as PhysicalType};
use datafusion::parquet::errors::{ParquetError, Result as ParquetResult};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::reader::{ChunkReader, Length};
use datafusion::parquet::schema::types::ColumnPath;
use datafusion::physical_plan::metrics::Count;

use super::partial_page::PageRewriter;
use crate::storage::object::ObjectFile;

/// An export's equality filters on text columns: column name and value.
pub(crate) type TextFilters = Arc<[(String, String)]>;

/// Whether one of `filters` tests the column at `path` (a top-level column of that name).
fn tested(filters: &[(String, String)], path: &ColumnPath) -> bool {
    filters.iter().any(|(name, _)| path.parts() == std::slice::from_ref(name))
}

/// The leaf columns of `footer`'s schema that `filters` test, by index, or `None` if one of
/// them is not a flat text column of the file (the rows are then not worked out here).
fn filter_columns(footer: &ParquetMetaData, filters: &[(String, String)]) -> Option<Vec<usize>> {
    let schema = footer.file_metadata().schema_descr();
    filters
        .iter()
        .map(|(name, _)| {
            schema.columns().iter().position(|c| {
                c.path().parts() == std::slice::from_ref(name)
                    && c.physical_type() == PhysicalType::BYTE_ARRAY
                    && c.max_rep_level() == 0
            })
        })
        .collect()
}

/// The rows of `row_group` (indices within it, ascending) where every column of `filters`
/// equals its value, reading the filter columns' chunks from `object`; `None` if they cannot
/// be read or decoded as text here (the pages are then read as they are).
pub(crate) async fn matching_rows(
    object: &ObjectFile,
    footer: &Arc<ParquetMetaData>,
    row_group: usize,
    filters: &[(String, String)],
) -> Option<Vec<u32>> {
    let columns = filter_columns(footer, filters)?;
    let chunks: Vec<Range<u64>> = columns
        .iter()
        .map(|&c| {
            let (start, length) = footer.row_group(row_group).column(c).byte_range();
            start..start.saturating_add(length)
        })
        .collect();
    let bytes = object.get_ranges(&chunks).await.ok()?;
    let chunks = Chunks { size: object.size(), chunks: chunks.iter().map(|r| r.start).zip(bytes).collect() };
    evaluate(chunks, footer, row_group, &columns, filters).ok()
}

/// The equalities evaluated over the filter columns of one row group, held in `chunks`.
fn evaluate(
    chunks: Chunks,
    footer: &Arc<ParquetMetaData>,
    row_group: usize,
    columns: &[usize],
    filters: &[(String, String)],
) -> ParquetResult<Vec<u32>> {
    let inferred = ArrowReaderMetadata::try_new(Arc::clone(footer), ArrowReaderOptions::new())?;
    // Texts read as views of the decoded pages: no string is copied.
    let fields: Vec<Field> = inferred
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 if filters.iter().any(|(name, _)| name == f.name()) => {
                f.as_ref().clone().with_data_type(DataType::Utf8View)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    let options = ArrowReaderOptions::new().with_schema(Arc::new(Schema::new(fields)));
    let metadata = ArrowReaderMetadata::try_new(Arc::clone(footer), options)?;
    let rows = footer.row_group(row_group).num_rows();
    let mask = ProjectionMask::leaves(footer.file_metadata().schema_descr(), columns.iter().copied());
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, metadata)
        .with_row_groups(vec![row_group])
        .with_projection(mask)
        .with_batch_size(usize::try_from(rows).unwrap_or(usize::MAX).clamp(1, 1 << 16))
        .build()?;
    let mut matching = Vec::new();
    let mut first = 0u64;
    for batch in reader {
        let batch = batch?;
        let mut all: Option<BooleanArray> = None;
        for (name, value) in filters {
            let column = batch.column_by_name(name).ok_or_else(|| missing(name))?;
            let column = cast(column, &DataType::Utf8View)?;
            let equal = eq(&column.as_string_view(), &StringViewArray::new_scalar(value))?;
            all = Some(match all {
                Some(all) => and(&all, &equal)?,
                None => equal,
            });
        }
        let all = all.ok_or_else(|| missing("any filter"))?;
        // A null (a null value compared) selects no row.
        let selected = match all.nulls() {
            Some(nulls) => all.values() & nulls.inner(),
            None => all.values().clone(),
        };
        for i in selected.set_indices() {
            let row = u32::try_from(first + i as u64).map_err(|_| missing("a row group under 2^32 rows"))?;
            matching.push(row);
        }
        first += batch.num_rows() as u64;
    }
    Ok(matching)
}

fn missing(what: &str) -> ParquetError {
    ParquetError::General(format!("{what} was not read"))
}

/// Column chunks of a file held in memory, as the Parquet reader reads a file.
struct Chunks {
    size: u64,
    /// Each chunk's bytes, by its offset in the file.
    chunks: Vec<(u64, Bytes)>,
}

impl Chunks {
    fn slice(&self, start: u64, length: Option<usize>) -> ParquetResult<Bytes> {
        // The chunk that starts last at or before `start` (chunks may be adjacent).
        self.chunks
            .iter()
            .filter(|(offset, _)| *offset <= start)
            .max_by_key(|(offset, _)| *offset)
            .and_then(|(offset, bytes)| {
                let from = usize::try_from(start.checked_sub(*offset)?).ok()?;
                let to = match length {
                    Some(length) => from.checked_add(length)?,
                    None => bytes.len(),
                };
                (from <= bytes.len() && to <= bytes.len()).then(|| bytes.slice(from..to))
            })
            .ok_or_else(|| ParquetError::General(format!("bytes at {start} are not held")))
    }
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for Chunks {
    type T = Cursor<Bytes>;

    fn get_read(&self, start: u64) -> ParquetResult<Cursor<Bytes>> {
        Ok(Cursor::new(self.slice(start, None)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> ParquetResult<Bytes> {
        self.slice(start, Some(length))
    }
}

/// How many times the bytes of the filter columns' chunks of a row group the pages to rewrite
/// must weigh for the rows to be worked out (`selection.rs` reads those chunks whole).
const WORTH_FILTER_BYTES: u64 = 4;

/// The compressed bytes of the chunks of `row_group` that `filters` test.
fn filter_bytes(footer: &ParquetMetaData, row_group: usize, filters: &[(String, String)]) -> u64 {
    let columns = footer.row_group(row_group).columns().iter();
    columns.filter(|c| tested(filters, c.column_path())).map(|c| c.compressed_size().max(0) as u64).sum()
}

/// The pages of one file rewritten to be decompressed only as far as the rows the filters
/// select: the filters, the pages it applies to, and the rows the filters select in each row
/// group read so far.
#[derive(Debug)]
pub(crate) struct PartialPages {
    filters: TextFilters,
    /// Built from the footer on the first read of several ranges.
    pages: Option<HashMap<u64, RewritablePage>>,
    /// By row group: the rows the filters select, or `None` if they could not be worked out.
    matching: HashMap<usize, Option<Arc<[u32]>>>,
    rewriter: PageRewriter,
    rewritten: Count,
}

/// A data page of a text column that `PageRewriter` may rewrite.
#[derive(Debug, Clone, Copy)]
struct RewritablePage {
    row_group: usize,
    /// Its first row, within the row group, and how many rows it holds.
    first_row: u64,
    rows: u64,
    /// Its length in bytes, header included.
    size: u64,
    /// Whether the column has nulls (a definition level).
    optional: bool,
}

/// By offset: the data pages `footer`'s offset index places in the zstd-compressed chunks of
/// flat text columns other than those `filters` test (their pages are left whole, so that the
/// filters are evaluated on their values).
fn rewritable_pages(footer: &ParquetMetaData, filters: &[(String, String)]) -> HashMap<u64, RewritablePage> {
    let mut out = HashMap::new();
    let Some(offset_index) = footer.offset_index() else { return out };
    for (row_group, (meta, indexes)) in footer.row_groups().iter().zip(offset_index).enumerate() {
        for (column, index) in meta.columns().iter().zip(indexes) {
            let descr = column.column_descr();
            if tested(filters, descr.path())
                || descr.physical_type() != PhysicalType::BYTE_ARRAY
                || descr.max_rep_level() != 0
                || descr.max_def_level() > 1
                || !matches!(column.compression(), Compression::ZSTD(_))
            {
                continue;
            }
            let locations = index.page_locations();
            for (i, page) in locations.iter().enumerate() {
                let end = locations.get(i + 1).map_or(meta.num_rows(), |next| next.first_row_index);
                let (Ok(first_row), Ok(end), Ok(size)) = (
                    u64::try_from(page.first_row_index),
                    u64::try_from(end),
                    u64::try_from(page.compressed_page_size),
                ) else {
                    continue;
                };
                if end <= first_row || end - first_row > u64::from(u32::MAX) {
                    continue;
                }
                let at = RewritablePage {
                    row_group,
                    first_row,
                    rows: end - first_row,
                    size,
                    optional: descr.max_def_level() == 1,
                };
                out.insert(page.offset as u64, at);
            }
        }
    }
    out
}

/// The page of `pages` that `range` is: one that starts and ends where the offset index says
/// (the bytes read for a range are always as long as it).
fn page_at(pages: &HashMap<u64, RewritablePage>, range: &Range<u64>) -> Option<RewritablePage> {
    let at = pages.get(&range.start)?;
    (range.end - range.start == at.size).then_some(*at)
}

impl PartialPages {
    pub(crate) fn new(filters: TextFilters, rewritten: Count) -> PartialPages {
        PartialPages {
            filters,
            pages: None,
            matching: HashMap::new(),
            rewriter: PageRewriter::new(),
            rewritten,
        }
    }

    /// Whether `range` (of the file `footer` describes) is a page that [`PartialPages::rewrite`]
    /// may rewrite.
    pub(crate) fn may_rewrite(&mut self, footer: &ParquetMetaData, range: &Range<u64>) -> bool {
        let rewritable = self.pages.get_or_insert_with(|| rewritable_pages(footer, &self.filters));
        page_at(rewritable, range).is_some()
    }

    /// Replaces each page of `pages` (read for `ranges` from `object`) that holds a text
    /// column's values with one that holds only the values of the rows the filters select, its
    /// other values left empty (`partial_page.rs`). A page that cannot be rewritten, or whose
    /// rows cannot be worked out, is left as it is. Returns the bytes read for the filter
    /// columns.
    pub(crate) async fn rewrite(
        &mut self,
        object: &ObjectFile,
        footer: &Arc<ParquetMetaData>,
        ranges: &[Range<u64>],
        pages: &mut [Bytes],
    ) -> u64 {
        let rewritable = self.pages.get_or_insert_with(|| rewritable_pages(footer, &self.filters));
        let wanted = |range: &Range<u64>| page_at(rewritable, range);
        // The rows of a row group are worked out only if the pages to rewrite in one read
        // outweigh the filter columns read for them: a scan that already found its rows through
        // a page index reads few pages (and those of the filter columns only in part). A later
        // read of the row group's pages may still outweigh them.
        let mut weight: HashMap<usize, u64> = HashMap::new();
        let mut read = 0;
        for at in ranges.iter().filter_map(wanted) {
            *weight.entry(at.row_group).or_default() += at.size;
        }
        for (row_group, pages_bytes) in weight {
            if self.matching.contains_key(&row_group) {
                continue;
            }
            if pages_bytes < WORTH_FILTER_BYTES * filter_bytes(footer, row_group, &self.filters) {
                continue;
            }
            let before = object.bytes_read();
            let found = matching_rows(object, footer, row_group, &self.filters).await;
            read += object.bytes_read() - before;
            self.matching.insert(row_group, found.map(Arc::<[u32]>::from));
        }
        for (range, page) in ranges.iter().zip(pages.iter_mut()) {
            let Some(at) = wanted(range) else { continue };
            let Some(Some(matching)) = self.matching.get(&at.row_group) else { continue };
            let from = matching.partition_point(|&row| u64::from(row) < at.first_row);
            let to = matching.partition_point(|&row| u64::from(row) < at.first_row + at.rows);
            let rows: Vec<u32> = matching[from..to].iter().map(|&row| row - at.first_row as u32).collect();
            if rows.is_empty() {
                continue;
            }
            if self.rewriter.rewrite_sparse(page, at.optional, &rows) {
                self.rewritten.add(1);
            }
        }
        read
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::metadata::ParquetMetaDataReader;
    use datafusion::parquet::file::properties::WriterProperties;

    use super::*;
    use crate::storage::object::testing;

    /// 250 rows in row groups of 100: `os` cycles through ios, android and null, `city` is
    /// Rome on every fifth row, `n` is the row number. Dictionary encoding falls back to plain
    /// after 8 pages of 10 rows, so that both encodings are read.
    fn write(dir: &std::path::Path) -> std::path::PathBuf {
        let os: StringArray = (0..250).map(|i| [Some("ios"), Some("android"), None][i % 3]).collect();
        let city: StringArray =
            (0..250).map(|i| Some(if i % 5 == 0 { "Rome".to_owned() } else { format!("c{i}") })).collect();
        let n = Int64Array::from_iter_values(0..250);
        let batch = RecordBatch::try_from_iter([
            ("os", Arc::new(os) as ArrayRef),
            ("city", Arc::new(city) as ArrayRef),
            ("n", Arc::new(n) as ArrayRef),
        ])
        .unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .set_data_page_row_count_limit(10)
            .set_write_batch_size(10)
            .set_dictionary_page_size_limit(64)
            .build();
        let path = dir.join("f.parquet");
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), Some(properties))
                .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        path
    }

    async fn rows(path: &std::path::Path, row_group: usize, filters: &[(&str, &str)]) -> Option<Vec<u32>> {
        let (object, _) = testing::local_file(path);
        let footer = Arc::new(
            ParquetMetaDataReader::new()
                .parse_and_finish(&Bytes::from(std::fs::read(path).unwrap()))
                .unwrap(),
        );
        let filters: Vec<(String, String)> =
            filters.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        matching_rows(&object, &footer, row_group, &filters).await
    }

    /// The rows of `row_group` (of 100) where `keep` holds for the row's number in the file.
    fn expected(row_group: u32, keep: impl Fn(u32) -> bool) -> Vec<u32> {
        let first = row_group * 100;
        (first..(first + 100).min(250)).filter(|&i| keep(i)).map(|i| i - first).collect()
    }

    #[tokio::test]
    async fn the_rows_where_every_filter_holds_are_found_in_each_row_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path());
        for row_group in 0..3u32 {
            let g = row_group as usize;
            let android = rows(&path, g, &[("os", "android")]).await.unwrap();
            assert_eq!(android, expected(row_group, |i| i % 3 == 1), "{row_group}");
            let both = rows(&path, g, &[("os", "android"), ("city", "Rome")]).await.unwrap();
            assert_eq!(both, expected(row_group, |i| i % 3 == 1 && i % 5 == 0), "{row_group}");
            assert!(!both.is_empty());
            // A null never equals a value, not even an empty one.
            assert_eq!(rows(&path, g, &[("os", "")]).await.unwrap(), Vec::<u32>::new());
            assert_eq!(rows(&path, g, &[("city", "c7")]).await.unwrap(), expected(row_group, |i| i == 7));
        }
    }

    #[tokio::test]
    async fn filters_on_columns_that_are_not_flat_texts_of_the_file_find_nothing_to_work_with() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path());
        assert_eq!(rows(&path, 0, &[("n", "7")]).await, None, "not a text column");
        assert_eq!(rows(&path, 0, &[("os", "ios"), ("town", "Rome")]).await, None, "not in the file");
    }
}

#[cfg(test)]
mod pages_tests {
    use datafusion::arrow::array::{
        ArrayRef, Int64Array, ListBuilder, RecordBatch, StringArray, StringBuilder,
    };
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::basic::ZstdLevel;
    use datafusion::parquet::file::metadata::PageIndexPolicy;
    use datafusion::parquet::file::properties::WriterProperties;
    use datafusion::parquet::schema::types::ColumnPath;

    use datafusion::parquet::file::metadata::ParquetMetaDataReader;

    use super::*;

    /// Only the pages of flat, zstd-compressed text columns that no filter tests are rewritten,
    /// each placed by its row group, first row and rows.
    #[test]
    fn the_pages_rewritten_are_those_of_flat_zstd_texts_no_filter_tests() {
        let texts = || Arc::new(StringArray::from_iter((0..25).map(|i| Some(format!("v{i}"))))) as ArrayRef;
        let mut list = ListBuilder::new(StringBuilder::new());
        for i in 0..25 {
            list.values().append_value(format!("l{i}"));
            list.append(true);
        }
        let columns: [(&str, ArrayRef); 6] = [
            ("text", texts()),
            ("number", Arc::new(Int64Array::from_iter_values(0..25))),
            ("snappy", texts()),
            ("filtered", texts()),
            ("list", Arc::new(list.finish())),
            ("required", Arc::new(StringArray::from_iter_values((0..25).map(|i| format!("r{i}"))))),
        ];
        let batch = RecordBatch::try_from_iter_with_nullable(
            columns.into_iter().map(|(name, array)| (name, array, name != "required")),
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_column_compression(ColumnPath::from("snappy"), Compression::SNAPPY)
            .set_dictionary_enabled(false)
            .set_max_row_group_row_count(Some(15))
            .set_data_page_row_count_limit(10)
            .set_write_batch_size(5)
            .build();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let footer = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .parse_and_finish(&Bytes::from(bytes))
            .unwrap();
        let filters = [("filtered".to_owned(), "v1".to_owned())];
        let pages = rewritable_pages(&footer, &filters);
        let mut found: Vec<(usize, usize, u64, u64, bool)> = pages
            .iter()
            .map(|(offset, p)| {
                let column = footer.row_group(p.row_group).columns().iter().position(|c| {
                    let (start, length) = c.byte_range();
                    (start..start + length).contains(offset)
                });
                (p.row_group, column.unwrap(), p.first_row, p.rows, p.optional)
            })
            .collect();
        found.sort();
        // Row groups of 15 and 10 rows, pages of at most 10 rows.
        let expected = vec![
            (0, 0, 0, 10, true),
            (0, 0, 10, 5, true),
            (0, 5, 0, 10, false),
            (0, 5, 10, 5, false),
            (1, 0, 0, 10, true),
            (1, 5, 0, 10, false),
        ];
        assert_eq!(found, expected);
        for (offset, page) in &pages {
            let index = &footer.offset_index().unwrap()[page.row_group];
            assert!(index.iter().any(|c| {
                c.page_locations()
                    .iter()
                    .any(|l| l.offset as u64 == *offset && l.compressed_page_size as u64 == page.size)
            }));
        }
    }
}
