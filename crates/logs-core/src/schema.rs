//! The error record's Arrow schemas, derived from the data contract (`logs-schema`: its 30
//! fields, spec §2.1).

use std::sync::{Arc, LazyLock};

use datafusion::arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef};
pub use logs_schema::{Field, FieldType, field_names};

/// The fields whose values decide a record's part (`parts_count`), in hashing order.
pub const PART_KEY: [Field; 4] =
    [Field::ERROR_TIMESTAMP, Field::ERROR_RECEIVE_TIMESTAMP, Field::SERVICE_DEVICE_ID, Field::ERROR_ID];

/// Which time the date range applies to (`date_dimension`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DateDimension {
    /// When the error occurred on the device (`error_timestamp`).
    #[default]
    Default,
    /// When the server received it (`error_receive_timestamp`).
    Receive,
}

impl DateDimension {
    /// The integer field that holds this kind of time.
    pub fn timestamp_field(self) -> Field {
        match self {
            DateDimension::Default => Field::ERROR_TIMESTAMP,
            DateDimension::Receive => Field::ERROR_RECEIVE_TIMESTAMP,
        }
    }
}

/// The Arrow type the engine uses for a field of type `field_type` in its output.
pub fn arrow_type(field_type: FieldType) -> DataType {
    match field_type {
        FieldType::String => DataType::Utf8View,
        FieldType::Int64 => DataType::Int64,
        FieldType::UInt64 => DataType::UInt64,
    }
}

/// The schema of the records as stored in the Parquet files: the 29 fields other than
/// `application_id`, which comes from the folder names.
pub fn file_schema() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        Arc::new(Schema::new(
            Field::all()
                .filter(|f| !f.is_partition())
                .map(|f| ArrowField::new(f.name(), arrow_type(f.field_type()), true))
                .collect::<Vec<_>>(),
        ))
    });
    SCHEMA.clone()
}

/// The long texts, which hold most of a file's bytes.
const LONG_TEXTS: [&str; 2] = ["error", "error_json"];

/// [`file_schema`], but with the long texts as `Utf8`: the scan then copies their selected
/// values out of each page. Read as `Utf8View`, a value points into the decompressed page it
/// comes from, so a batch keeps every page that holds one of its rows. When a filter selects
/// rows all over a row group (`city=Berlin`), that was the whole decompressed `error` column
/// of the row group (165 MB, measured with valgrind's massif); without a filter the rows of a
/// batch fill its pages, and views avoid the copy. The engine picks one of the two per export.
pub fn file_schema_copying_texts() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        let schema = file_schema();
        let fields = schema.fields().iter().map(|f| {
            let data_type =
                if LONG_TEXTS.contains(&f.name().as_str()) { DataType::Utf8 } else { f.data_type().clone() };
            ArrowField::new(f.name(), data_type, true)
        });
        Arc::new(Schema::new(fields.collect::<Vec<_>>()))
    });
    SCHEMA.clone()
}

/// The schema of a whole record, all 30 fields in the order of spec §2.1.
pub fn record_schema() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        Arc::new(Schema::new(
            Field::all()
                .map(|f| ArrowField::new(f.name(), arrow_type(f.field_type()), true))
                .collect::<Vec<_>>(),
        ))
    });
    SCHEMA.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_hold_the_contracts_fields() {
        assert_eq!(file_schema().fields().len(), 29);
        assert_eq!(record_schema().fields().len(), 30);
        assert!(file_schema().field_with_name("application_id").is_err());
        assert_eq!(
            record_schema().field_with_name("service_device_id").unwrap().data_type(),
            &DataType::UInt64
        );
        assert_eq!(
            file_schema_copying_texts().field_with_name("error").unwrap().data_type(),
            &DataType::Utf8
        );
    }
}
