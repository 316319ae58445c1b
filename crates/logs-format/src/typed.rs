//! The typed formats' columns (Parquet and Arrow IPC): each field's published Arrow type, and
//! each batch brought to those types before it is written.
//!
//! Texts of any Arrow form (`Utf8View`, `LargeUtf8`, dictionaries of them) become one form:
//! `Utf8` for Arrow IPC, the form every widely used reader takes (pandas 1.5's pyarrow reads no
//! `Utf8View` from an Arrow stream); `Utf8View`, the engine's, for Parquet, whose writer stores
//! any form as the same `BYTE_ARRAY` `STRING` column (so the engine's batches are written
//! without a copy). Integers, booleans and floats keep their type; a field of type `Null` (a
//! column no record holds) becomes a nullable text column of nulls. A batch column of type
//! `Null` stands for a column of nulls of its field's type.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, new_null_array};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::FormatError;

/// About how many bytes the values of `batch` take plainly encoded (what Parquet's plain pages
/// and Arrow's buffers hold): a text its length and 4, a fixed-width value its width, anything
/// else the memory its column holds.
pub(crate) fn plain_bytes(batch: &RecordBatch) -> usize {
    let column_bytes = |column: &ArrayRef| {
        if let Some(texts) = column.as_string_view_opt() {
            return texts.total_bytes_len() + 4 * texts.len();
        }
        if let Some(texts) = column.as_string_opt::<i32>() {
            let offsets = texts.value_offsets();
            return (offsets[offsets.len() - 1] - offsets[0]) as usize + 4 * texts.len();
        }
        match column.data_type().primitive_width() {
            Some(width) => width * column.len(),
            None => column.get_array_memory_size(),
        }
    };
    batch.columns().iter().map(column_bytes).sum()
}

/// The type a field of `data_type` is written as, texts as `text`, or `None` if it cannot be
/// exported.
fn published(data_type: &DataType, text: &DataType) -> Option<DataType> {
    Some(match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => text.clone(),
        DataType::Dictionary(_, values) => {
            return published(values, text).filter(|_| **values != DataType::Null);
        }
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Boolean
        | DataType::Float32
        | DataType::Float64 => data_type.clone(),
        _ => return None,
    })
}

/// The schema the typed formats write for `schema`: the same names and order, every column
/// nullable, each of its published type, texts as `text` (`Utf8` or `Utf8View`).
pub(crate) fn output_schema(schema: &Schema, text: DataType) -> Result<SchemaRef, FormatError> {
    let fields = schema.fields().iter().map(|field| {
        let data_type = published(field.data_type(), &text).ok_or_else(|| FormatError::UnsupportedType {
            column: field.name().clone(),
            data_type: field.data_type().clone(),
        })?;
        Ok(Field::new(field.name(), data_type, true))
    });
    Ok(Arc::new(Schema::new(fields.collect::<Result<Vec<_>, FormatError>>()?)))
}

/// `batch` with the columns of `schema` (from [`output_schema`]): each cast to its published
/// type where it differs. Fails, naming the column, where a column is of another kind than its
/// field (text for an integer field, say).
pub(crate) fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, FormatError> {
    if batch.num_columns() != schema.fields().len() {
        return Err(FormatError::SchemaMismatch {
            expected: schema.fields().len(),
            found: batch.num_columns(),
        });
    }
    let columns = batch.columns().iter().zip(schema.fields()).map(|(column, field)| {
        let wanted = field.data_type();
        let found = column.data_type();
        if found == wanted {
            return Ok(Arc::clone(column));
        }
        if *found == DataType::Null {
            return Ok(new_null_array(wanted, column.len()));
        }
        let mismatch = || FormatError::ColumnTypeMismatch {
            column: field.name().clone(),
            expected: wanted.clone(),
            found: found.clone(),
        };
        // Texts may become the field's text type; nothing else changes its kind.
        let text =
            if matches!(wanted, DataType::Utf8 | DataType::Utf8View) { wanted } else { &DataType::Null };
        if published(found, text).as_ref() != Some(wanted) {
            return Err(mismatch());
        }
        cast(column, wanted).map_err(|_| mismatch())
    });
    let columns = columns.collect::<Result<Vec<ArrayRef>, FormatError>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(Arc::clone(schema), columns, &options)
        .map_err(|e| FormatError::Encoding(e.to_string()))
}

#[cfg(test)]
mod tests {
    use arrow::array::{
        Array, DictionaryArray, Int64Array, NullArray, StringArray, StringViewArray, UInt64Array,
    };
    use arrow::datatypes::Int32Type;

    use super::*;

    #[test]
    fn texts_become_utf8_and_nulls_take_their_fields_type() {
        let schema = Schema::new(vec![
            Field::new("city", DataType::Utf8View, true),
            Field::new(
                "os_name",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                false,
            ),
            Field::new("service_device_id", DataType::UInt64, true),
            Field::new("oaid", DataType::Null, true),
            Field::new("level", DataType::Int64, true),
        ]);
        let views = output_schema(&schema, DataType::Utf8View).unwrap();
        let types: Vec<_> = views.fields().iter().map(|f| f.data_type().clone()).collect();
        use DataType::{Int64, UInt64, Utf8, Utf8View};
        assert_eq!(types, [Utf8View, Utf8View, UInt64, Utf8View, Int64]);
        let output = output_schema(&schema, Utf8).unwrap();
        let types: Vec<_> = output.fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(types, [Utf8, Utf8, UInt64, Utf8, Int64]);
        assert!(output.fields().iter().all(|f| f.is_nullable()));

        let os: DictionaryArray<Int32Type> = vec![Some("ios"), None].into_iter().collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("city", DataType::Utf8View, true),
                Field::new("os_name", os.data_type().clone(), true),
                Field::new("service_device_id", DataType::UInt64, true),
                Field::new("oaid", DataType::Null, true),
                Field::new("level", DataType::Null, true),
            ])),
            vec![
                Arc::new(StringViewArray::from(vec![Some("Berlin"), None])),
                Arc::new(os),
                Arc::new(UInt64Array::from(vec![Some(u64::MAX), None])),
                Arc::new(NullArray::new(2)),
                Arc::new(NullArray::new(2)),
            ],
        )
        .unwrap();
        let conformed = conform(&batch, &output).unwrap();
        assert_eq!(conformed.schema(), output);
        let city = conformed.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!((city.value(0), city.is_null(1)), ("Berlin", true));
        let os = conformed.column(1).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!((os.value(0), os.is_null(1)), ("ios", true));
        let as_views = conform(&batch, &views).unwrap();
        assert!(
            Arc::ptr_eq(as_views.column(0), batch.column(0)),
            "a column of the wanted type is not copied"
        );
        let os = as_views.column(1).as_any().downcast_ref::<StringViewArray>().unwrap();
        assert_eq!((os.value(0), os.is_null(1)), ("ios", true));
        assert_eq!(conformed.column(3).null_count(), 2);
        assert!(conformed.column(4).as_any().downcast_ref::<Int64Array>().is_some());
        assert_eq!(conformed.column(4).null_count(), 2);
    }

    #[test]
    fn a_column_of_another_kind_is_refused_by_name() {
        let output =
            output_schema(&Schema::new(vec![Field::new("mcc", DataType::Int64, true)]), DataType::Utf8)
                .unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("mcc", DataType::Utf8, true)])),
            vec![Arc::new(StringArray::from(vec!["250"]))],
        )
        .unwrap();
        let error = conform(&batch, &output).unwrap_err();
        assert!(
            matches!(&error, FormatError::ColumnTypeMismatch { column, .. } if column == "mcc"),
            "{error}"
        );
        let unsupported = Schema::new(vec![Field::new("when", DataType::Date32, true)]);
        assert!(matches!(
            output_schema(&unsupported, DataType::Utf8),
            Err(FormatError::UnsupportedType { .. })
        ));
    }
}
