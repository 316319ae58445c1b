//! Which rows of a row group an export's equality filters select, found before its other
//! columns' pages are decoded, so that those pages can be decompressed only as far as the
//! selected rows (`partial_page.rs`).
//!
//! The Parquet reader evaluates the filters itself and then asks for the pages that hold the
//! rows they kept, but it does not say which rows those are. The scan reads the filter columns'
//! chunks of the row group once more and evaluates the same equalities on them: every row the
//! reader keeps is among the rows found here, since it keeps only rows that pass every filter.

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
use datafusion::parquet::basic::Type as PhysicalType;
use datafusion::parquet::errors::{ParquetError, Result as ParquetResult};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::reader::{ChunkReader, Length};

use crate::storage::object::ObjectFile;

/// An export's equality filters on text columns: column name and value.
pub(crate) type TextFilters = Arc<[(String, String)]>;

/// The leaf columns of `footer`'s schema that `filters` test, by index, or `None` if one of
/// them is not a flat text column of the file (the rows are then not worked out here).
pub(crate) fn filter_columns(footer: &ParquetMetaData, filters: &[(String, String)]) -> Option<Vec<usize>> {
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
