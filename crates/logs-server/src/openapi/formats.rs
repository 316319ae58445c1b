//! What each export format's body is, and the typed formats' columns (`TypedRecord`).

use logs_core::{ColumnSource, FieldType};
use logs_format::Format;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::openapi::{KnownFormat, Ref, RefOr};

use super::export::{describe_alias, field_meaning};
use super::parts::DocumentSettings;

/// The operation id, summary, media type and body schema of the export in `format`.
pub(super) fn export_body(format: Format) -> (&'static str, &'static str, &'static str, RefOr<Schema>) {
    let text =
        |description: &str| ObjectBuilder::new().schema_type(Type::String).description(Some(description));
    let binary =
        |description: &str| text(description).format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)));
    match format {
        Format::Csv => (
            "exportErrorsCsv",
            "Export error records as CSV",
            "text/csv",
            text(
                "A header row of the requested names, then one line per record; every line ends with LF. \
                 RFC 4180 quoting, extended to every line break: a value containing a comma, a double \
                 quote or a line break (CR, LF, VT, FF, U+001C to U+001E, NEL, U+2028, U+2029) is \
                 enclosed in double quotes with inner quotes doubled; nothing else is quoted. A null is \
                 an empty cell, an empty string `\"\"`; in a one-column export a null is written as \
                 `\"\"` too, so that no record is an empty line. Zero rows give the header alone.",
            )
            .into(),
        ),
        Format::Json => (
            "exportErrorsJson",
            "Export error records as JSON",
            "application/json",
            Ref::from_schema_name("ErrorExport").into(),
        ),
        Format::Ndjson => (
            "exportErrorsNdjson",
            "Export error records as NDJSON (one JSON object per line)",
            "application/x-ndjson",
            text(
                "One `ErrorRecord` per line, each followed by LF, nothing around them: the records of \
                 the JSON format, with the same values and escaping (no line break inside a record). \
                 Zero rows give an empty body. After a failure the connection is aborted and the last \
                 line received is not JSON.",
            )
            .into(),
        ),
        Format::Parquet => (
            "exportErrorsParquet",
            "Export error records as one Parquet file",
            "application/vnd.apache.parquet",
            binary(
                "One Parquet file: the columns of `TypedRecord` for the requested fields, in request \
                 order and named as requested; zstd, statistics, the page index, row groups of at most \
                 65 536 rows written as the export goes, the footer last. Never gzipped (its pages are \
                 compressed). A failed export never ends with a valid footer.",
            )
            .into(),
        ),
        Format::Arrow => (
            "exportErrorsArrow",
            "Export error records as an Arrow IPC stream",
            "application/vnd.apache.arrow.stream",
            binary(
                "The Arrow IPC stream format: the schema (the columns of `TypedRecord` for the requested \
                 fields, in request order and named as requested), record batches of uncompressed \
                 buffers, the end-of-stream marker last. A failed export never ends with the marker: it \
                 ends with a cut message that readers refuse.",
            )
            .into(),
        ),
    }
}

/// The columns of the Parquet and Arrow exports: one per field (and alias), with its type.
pub(super) fn typed_record_schema(settings: &DocumentSettings) -> ObjectBuilder {
    let mut record = ObjectBuilder::new().schema_type(Type::Object).description(Some(
        "The columns of the Parquet and Arrow exports, with their types. Every column is nullable. A \
         string is Arrow `Utf8` (Parquet `BYTE_ARRAY` annotated `STRING`); a signed integer Arrow \
         `Int64` (Parquet `INT64`); `service_device_id` Arrow `UInt64` (Parquet `INT64` annotated \
         unsigned): pyarrow and Polars read `uint64`, DuckDB `UBIGINT`, pandas `uint64` where the \
         column has no null (pyarrow's `to_pandas` turns an integer column with nulls into \
         `float64`, rounding ids above 2^53: read with `types_mapper=pandas.ArrowDtype` to keep it \
         exact). Timestamps are Unix seconds (`Int64`) and date-times \
         strings, as in the other formats. A field the dataset does not hold is a column of nulls of \
         its declared type.",
    ));
    let column = |kind: FieldType, description: &str| {
        let (json_type, format, arrow) = match kind {
            FieldType::String => (Type::String, None, "Utf8"),
            FieldType::Int64 => (Type::Integer, Some(SchemaFormat::KnownFormat(KnownFormat::Int64)), "Int64"),
            FieldType::UInt64 => (Type::Integer, Some(SchemaFormat::Custom("uint64".into())), "UInt64"),
        };
        ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([json_type, Type::Null]))
            .format(format)
            .description(Some(format!("Arrow `{arrow}`. {description}")))
    };
    for field in settings.fields() {
        let description = format!("{}{}", field_meaning(field), settings.treatment_note(field));
        record = record
            .property(field.name(), column(settings.output_type(ColumnSource::Field(field)), &description));
    }
    for (alias, source) in settings.aliases() {
        record = record.property(alias, column(settings.output_type(source), &describe_alias(alias, source)));
    }
    record.additional_properties(Some(AdditionalProperties::FreeForm(false)))
}
