//! What a file's footer must show before the file is exported: columns of the types the
//! dataset contract gives (docs/dataset.md), read exactly; and where its rows fall against an
//! export's range, from statistics only where they prove it.

use datafusion::arrow::datatypes::DataType;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::basic::{ConvertedType, LogicalType};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::statistics::Statistics;

use crate::error::{Error, Result};
use crate::request::TimeRange;
use crate::schema::{Field, FieldType};

/// The error of a file the engine cannot export exactly; the catalog names the file.
fn unreadable(message: String) -> Error {
    Error::Storage { path: None, message }
}

/// Checks that every column of the dataset contract the file holds has a type the engine reads
/// exactly (see the dataset contract, docs/dataset.md); anything else would be converted lossily or
/// fail in the middle of an export. Other columns are ignored.
pub(crate) fn check_types(footer: &ParquetMetaData) -> Result<()> {
    let file_meta = footer.file_metadata();
    let schema = parquet_to_arrow_schema(file_meta.schema_descr(), file_meta.key_value_metadata())
        .map_err(|e| unreadable(format!("its schema cannot be read ({e})")))?;
    for field in schema.fields() {
        let Some(expected) = Field::from_name(field.name()) else { continue };
        if expected.is_partition() {
            continue;
        }
        let found = field.data_type();
        let accepted = match expected.field_type() {
            FieldType::String => is_string(found),
            FieldType::Int64 => matches!(
                found,
                DataType::Int8
                    | DataType::Int16
                    | DataType::Int32
                    | DataType::Int64
                    | DataType::UInt8
                    | DataType::UInt16
                    | DataType::UInt32
            ),
            FieldType::UInt64 => match found {
                DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => true,
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                    if !signed_column_is_non_negative(footer, field.name()) {
                        return Err(unreadable(format!(
                            "column `{}` is a signed integer that may hold negative values; \
                             expected unsigned 64-bit integers (values above 2^63 written as signed?)",
                            field.name()
                        )));
                    }
                    true
                }
                _ => false,
            },
        };
        if !accepted {
            let expected = match expected.field_type() {
                FieldType::String => "text",
                FieldType::Int64 => "a signed integer of at most 64 bits",
                FieldType::UInt64 => "an unsigned integer of at most 64 bits",
            };
            let message = format!("column `{}` has type {found}; expected {expected}", field.name());
            return Err(unreadable(message));
        }
    }
    Ok(())
}

fn is_string(data_type: &DataType) -> bool {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, value) => is_string(value),
        _ => false,
    }
}

/// True when the statistics of every row group show a minimum of at least 0 (or only nulls).
fn signed_column_is_non_negative(footer: &ParquetMetaData, column: &str) -> bool {
    let columns = footer.file_metadata().schema_descr().columns();
    let Some(index) = columns.iter().position(|c| c.path().string() == column) else { return true };
    footer.row_groups().iter().all(|rg| {
        let chunk = rg.column(index);
        match chunk.statistics() {
            Some(Statistics::Int64(s)) => {
                s.min_opt().map_or(s.null_count_opt() == Some(rg.num_rows() as u64), |m| *m >= 0)
            }
            Some(Statistics::Int32(s)) => {
                s.min_opt().map_or(s.null_count_opt() == Some(rg.num_rows() as u64), |m| *m >= 0)
            }
            _ => false,
        }
    })
}

/// How the rows of a file lie relative to an export's time range, as far as its footer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeOverlap {
    /// The statistics of every row group prove that no row is in the range.
    None,
    /// Some rows may be in the range, some may not.
    Some,
    /// The statistics of every row group prove that every row is in the range: no nulls, and
    /// minimum and maximum inside it.
    All,
}

/// Where the rows of the file with footer `meta` lie relative to `range` in `column`. Missing
/// statistics, or a type whose statistics cannot be compared as signed integers, give `Some`.
pub(crate) fn range_overlap(meta: &ParquetMetaData, column: &str, range: TimeRange) -> RangeOverlap {
    let columns = meta.file_metadata().schema_descr().columns();
    let Some(index) = columns.iter().position(|c| c.path().string() == column) else {
        // A file without the column holds nulls there, and nulls are never in a range.
        return RangeOverlap::None;
    };
    // Statistics of unsigned 32-bit columns are stored as i32 but ordered as unsigned.
    let signed = !matches!(columns[index].logical_type_ref(), Some(LogicalType::Integer(int)) if !int.is_signed)
        && !matches!(columns[index].converted_type(), ConvertedType::UINT_32 | ConvertedType::UINT_64);
    let mut overlap = RangeOverlap::None;
    let mut all_inside = true;
    for rg in meta.row_groups() {
        let statistics = rg.column(index).statistics();
        let bounds = match statistics {
            Some(Statistics::Int64(s)) if signed => s.min_opt().copied().zip(s.max_opt().copied()),
            Some(Statistics::Int32(s)) if signed => {
                s.min_opt().map(|&v| i64::from(v)).zip(s.max_opt().map(|&v| i64::from(v)))
            }
            _ => return RangeOverlap::Some,
        };
        let nulls = statistics.and_then(|s| s.null_count_opt());
        match bounds {
            Some((min, max)) => {
                if max >= range.since && min <= range.until {
                    overlap = RangeOverlap::Some;
                }
                all_inside &= min >= range.since && max <= range.until && nulls == Some(0);
            }
            // No min/max: either statistics were not written, or the column is all null.
            None if nulls == Some(rg.num_rows() as u64) => all_inside &= rg.num_rows() == 0,
            None => return RangeOverlap::Some,
        }
    }
    match overlap {
        RangeOverlap::Some if all_inside => RangeOverlap::All,
        overlap => overlap,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, UInt32Array, UInt64Array};
    use datafusion::arrow::datatypes::{Field as ArrowField, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::data_type::Int32Type;
    use datafusion::parquet::file::metadata::ParquetMetaDataReader;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    use datafusion::parquet::file::writer::SerializedFileWriter;
    use datafusion::parquet::schema::parser::parse_message_type;

    use super::*;

    fn footer(row_groups: &[ArrayRef], statistics: EnabledStatistics) -> ParquetMetaData {
        let schema =
            Arc::new(Schema::new(vec![ArrowField::new("t", row_groups[0].data_type().clone(), true)]));
        let properties = WriterProperties::builder().set_statistics_enabled(statistics).build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, Arc::clone(&schema), Some(properties)).unwrap();
        for array in row_groups {
            writer
                .write(&RecordBatch::try_new(Arc::clone(&schema), vec![Arc::clone(array)]).unwrap())
                .unwrap();
            writer.flush().unwrap();
        }
        writer.close().unwrap();
        let footer = ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(out)).unwrap();
        assert_eq!(footer.num_row_groups(), row_groups.len());
        footer
    }

    /// `footer` with the statistics of every column chunk replaced by `statistics`.
    fn with_statistics(footer: ParquetMetaData, statistics: Statistics) -> ParquetMetaData {
        let mut builder = footer.into_builder();
        let row_groups = builder
            .take_row_groups()
            .into_iter()
            .map(|row_group| {
                let columns = row_group
                    .columns()
                    .iter()
                    .map(|c| c.clone().into_builder().set_statistics(statistics.clone()).build().unwrap())
                    .collect();
                row_group.into_builder().set_column_metadata(columns).build().unwrap()
            })
            .collect();
        builder.set_row_groups(row_groups).build()
    }

    fn int64(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn int32(values: &[Option<i32>]) -> ParquetMetaData {
        footer(&[Arc::new(Int32Array::from(values.to_vec()))], EnabledStatistics::Chunk)
    }

    /// Pruning by footer statistics: a file is passed over only when every row group proves that
    /// no row is in the range, and its rows skip the row-by-row range test only when every row
    /// group proves that all are in it. Bounds are inclusive; a null is never in the range.
    #[test]
    fn footer_statistics_place_a_file_against_the_range_only_when_they_prove_it() {
        use RangeOverlap::{All, None as Outside, Some as Partly};
        let range = TimeRange { since: 100, until: 200 };
        let overlap = |row_groups: &[&[Option<i64>]]| {
            let arrays: Vec<ArrayRef> = row_groups.iter().map(|values| int64(values)).collect();
            range_overlap(&footer(&arrays, EnabledStatistics::Chunk), "t", range)
        };
        let cases: [(&[&[Option<i64>]], RangeOverlap); 14] = [
            (&[&[Some(100), Some(200)]], All),
            (&[&[Some(150)], &[Some(100)], &[Some(200)]], All),
            (&[&[Some(99), Some(150)]], Partly),
            (&[&[Some(150), Some(201)]], Partly),
            (&[&[Some(50), Some(100)]], Partly),
            (&[&[Some(200), Some(250)]], Partly),
            (&[&[Some(0), Some(99)]], Outside),
            (&[&[Some(201), Some(300)]], Outside),
            (&[&[Some(0), Some(99)], &[Some(201)]], Outside),
            (&[&[Some(100), Some(200)], &[Some(300), Some(400)]], Partly),
            (&[&[Some(0), Some(50)], &[Some(150)], &[Some(300)]], Partly),
            (&[&[Some(150), None]], Partly),
            (&[&[Some(150)], &[None, None]], Partly),
            (&[&[None, None], &[None]], Outside),
        ];
        for (row_groups, expected) in cases {
            assert_eq!(overlap(row_groups), expected, "{row_groups:?}");
        }

        // 32-bit signed timestamps are compared as well.
        assert_eq!(range_overlap(&int32(&[Some(100), Some(200)]), "t", range), All);
        assert_eq!(range_overlap(&int32(&[Some(201), Some(300)]), "t", range), Outside);
        // Unsigned statistics are stored as signed: they prove nothing here.
        let unsigned = footer(&[Arc::new(UInt32Array::from(vec![150]))], EnabledStatistics::Chunk);
        assert_eq!(range_overlap(&unsigned, "t", range), Partly);
        let unsigned = footer(&[Arc::new(UInt64Array::from(vec![u64::MAX]))], EnabledStatistics::Chunk);
        assert_eq!(range_overlap(&unsigned, "t", range), Partly);
        // Older writers mark an unsigned column with its converted type only.
        let converted_only = {
            let schema = Arc::new(parse_message_type("message m { required int32 t (UINT_32); }").unwrap());
            let mut out = Vec::new();
            let mut writer = SerializedFileWriter::new(&mut out, schema, Arc::default()).unwrap();
            let mut row_group = writer.next_row_group().unwrap();
            let mut column = row_group.next_column().unwrap().unwrap();
            column.typed::<Int32Type>().write_batch(&[150], None, None).unwrap();
            column.close().unwrap();
            row_group.close().unwrap();
            writer.close().unwrap();
            ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(out)).unwrap()
        };
        assert_eq!(converted_only.file_metadata().schema_descr().column(0).logical_type_ref(), None);
        assert_eq!(range_overlap(&converted_only, "t", range), Partly);
        // Statistics with a null count but no minimum and maximum prove nothing, unless every
        // row is null.
        let rows_and_nulls = |nulls| {
            let written = footer(&[int64(&[Some(150), None])], EnabledStatistics::Chunk);
            with_statistics(written, Statistics::int64(None, None, None, Some(nulls), false))
        };
        assert_eq!(range_overlap(&rows_and_nulls(1), "t", range), Partly);
        assert_eq!(range_overlap(&rows_and_nulls(2), "t", range), Outside);
        // Without statistics nothing is proved; without the column every row is null there.
        let unknown = footer(&[int64(&[Some(0)])], EnabledStatistics::None);
        assert_eq!(range_overlap(&unknown, "t", range), Partly);
        let known = footer(&[int64(&[Some(0)])], EnabledStatistics::Chunk);
        assert_eq!(range_overlap(&known, "other", range), Outside);
    }

    /// A signed column stands for an unsigned field only when every row group's minimum is at
    /// least 0 or the row group holds only nulls.
    #[test]
    fn a_signed_column_is_non_negative_only_when_every_row_group_shows_it() {
        let non_negative = |row_groups: &[&[Option<i64>]]| {
            let arrays: Vec<ArrayRef> = row_groups.iter().map(|values| int64(values)).collect();
            signed_column_is_non_negative(&footer(&arrays, EnabledStatistics::Chunk), "t")
        };
        assert!(non_negative(&[&[Some(0), Some(5)]]));
        assert!(non_negative(&[&[Some(3), None], &[None, None]]));
        assert!(!non_negative(&[&[Some(-1), Some(5)]]));
        assert!(!non_negative(&[&[Some(0)], &[Some(i64::MIN)]]));
        assert!(signed_column_is_non_negative(&int32(&[Some(0), Some(1)]), "t"));
        assert!(!signed_column_is_non_negative(&int32(&[Some(-1), Some(1)]), "t"));
        assert!(signed_column_is_non_negative(&int32(&[None, None]), "t"));
        let unknown = footer(&[int64(&[Some(1)])], EnabledStatistics::None);
        assert!(!signed_column_is_non_negative(&unknown, "t"), "no statistics prove nothing");
        assert!(signed_column_is_non_negative(&unknown, "other"), "an absent column holds no value");
    }
}
