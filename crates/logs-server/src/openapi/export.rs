//! The export's parameters (spec §4.1, with the engine's field table for `fields` and the
//! field filters) and the schema of its JSON body.

use logs_core::request::MAX_PARTS;
use logs_core::{ColumnSource, Field, FieldType};
use logs_format::JsonIntegers;
use serde_json::{Value, json};
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn, ParameterStyle};
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{KnownFormat, Ref, RefOr, Required};

use super::parts::{DocumentSettings, integer};

/// The query parameters of the export (spec §4.1), the field filters last (those of the
/// aliases after the fields').
pub(super) fn export_parameters(settings: &DocumentSettings) -> Vec<Parameter> {
    let datetime = |end: &str| {
        ObjectBuilder::new().schema_type(Type::String).pattern(Some(DATETIME_PATTERN)).description(Some(
            format!("`yyyy-mm-dd hh:mm:ss` or `yyyy-mm-dd` (UTC); a date alone means {end} of the day"),
        ))
    };
    let mut parameters = vec![
        query_parameter(
            "application_id",
            true,
            integer(Some(i64::MIN), Some(i64::MAX))
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))),
            "The numeric id of the application whose records are exported.",
            Some(json!(1001)),
        ),
        query_parameter(
            "date_since",
            false,
            datetime("00:00:00"),
            "Start of the date range, inclusive, UTC: `yyyy-mm-dd hh:mm:ss` or `yyyy-mm-dd` (then \
             00:00:00). Impossible dates and times (`2026-02-30`, `24:00:00`) and a `T` separator are \
             refused. The kind of time is set by `date_dimension`. Required, except when continuing a \
             cursor chain (`cursor`), whose cursor carries it.",
            Some(json!("2026-10-01")),
        ),
        query_parameter(
            "date_until",
            false,
            datetime("23:59:59"),
            "End of the date range, inclusive, same format as `date_since` (a date alone means \
             23:59:59). May not be before `date_since`. Required, except with `cursor`, which refuses it.",
            Some(json!("2026-10-07 23:59:59")),
        ),
        fields_parameter(settings),
        query_parameter(
            "date_dimension",
            false,
            ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["default", "receive"])),
            "Which time the range applies to: `default` (absent too) when the error occurred on the \
             device (`error_timestamp`), `receive` when the server received it \
             (`error_receive_timestamp`).",
            None,
        ),
        query_parameter(
            "limit",
            false,
            integer(Some(1u64), Some(u64::MAX)),
            "The most records to return: a whole number from 1 (the spec declares it a string of \
             digits). Absent: all records, unless the operator set a maximum (`--max-limit`); then \
             absent means that maximum and a larger value is refused with a message that states it. \
             Which records are returned is not guaranteed to be the same between requests.",
            None,
        ),
        query_parameter(
            "use_utf8_bom",
            false,
            boolean(),
            "Start a CSV output with a UTF-8 byte order mark (EF BB BF). Accepted for JSON too, \
             where it has no effect: a JSON text must not begin with one (RFC 8259 §8.1). `true`, \
             `false`, `1` or `0`; default `false`.",
            None,
        ),
        query_parameter(
            "skip_unavailable_shards",
            false,
            boolean(),
            "`false` (default): a file of the requested range that cannot be read fails the export \
             (503 `storage_unavailable`). `true`: such files are left out and counted in the \
             `X-Skipped-Shards` header. `true`, `false`, `1` or `0`.",
            None,
        ),
        query_parameter(
            "parts_count",
            false,
            integer(Some(1u32), Some(MAX_PARTS)),
            "Split the export into this many disjoint parts (1 to 1024) and return part \
             `part_number`; give both or neither. A stable hash of `error_timestamp`, \
             `error_receive_timestamp`, `service_device_id` and `error_id` assigns each record to \
             one part, so together the parts equal the export.",
            None,
        ),
        query_parameter(
            "part_number",
            false,
            integer(Some(0u32), Some(MAX_PARTS - 1)),
            "Which part to return, from 0 to `parts_count` − 1; give both or neither.",
            None,
        ),
        query_parameter(
            "cursor",
            false,
            ObjectBuilder::new().schema_type(Type::String).max_length(Some(4_096)),
            "A cursor chain, which hands over each record once, late arrivals included: `start` (with \
             `date_since`, without `date_until`) starts one; the `Logs-Cursor` header of each answer \
             continues it, with the same `application_id`, `date_dimension`, `fields` and filters. \
             Each call returns the records that became visible since the previous one. Refused with \
             `limit`, `parts_count`, `part_number` and `skip_unavailable_shards=true`; a damaged or \
             foreign cursor is 400, a chain broken by deleted or replaced files 409.",
            Some(json!("start")),
        ),
    ];
    parameters.extend(
        settings
            .fields()
            .filter(|f| *f != Field::APPLICATION_ID)
            .map(|f| filter_parameter(f.name(), f, settings)),
    );
    for (alias, source) in settings.aliases() {
        if let ColumnSource::Field(field) = source {
            parameters.push(filter_parameter(alias, field, settings));
        }
    }
    parameters.extend(prepared_export_headers());
    parameters
}

/// The request headers of prepared exports (see `crate::prepared`); a server without a spool
/// ignores them.
fn prepared_export_headers() -> Vec<Parameter> {
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let header = |name: &str, description: &str, example: &str| {
        ParameterBuilder::new()
            .name(name)
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(description))
            .schema(Some(text()))
            .example(Some(json!(example)))
            .build()
    };
    vec![
        header(
            "Prefer",
            "`respond-async` (RFC 7240) asks for a prepared export: 202 while it is being prepared, \
             then 200 with the file. `wait=N` waits up to N seconds before answering 202.",
            "respond-async",
        ),
        header(
            "Range",
            "One byte range of a prepared export (206), to resume a broken download; several ranges, or \
             one that does not parse, are ignored.",
            "bytes=1048576-",
        ),
        header(
            "If-Range",
            "The `ETag` the `Range` is valid for; another gives the whole export.",
            "\"0123\"",
        ),
        header(
            "If-None-Match",
            "`ETag`s already held: 304 when the prepared export is one of them.",
            "\"0123\"",
        ),
        header(
            "Cache-Control",
            "`no-cache` prepares a fresh export instead of serving one prepared earlier.",
            "no-cache",
        ),
    ]
}

/// The shape of a date or date and time; impossible dates (`2026-02-30`) are refused too.
const DATETIME_PATTERN: &str =
    "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])( ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9])?$";

fn fields_parameter(settings: &DocumentSettings) -> Parameter {
    let mut names: Vec<&str> = settings.fields().map(Field::name).collect();
    names.extend(settings.aliases().map(|(alias, _)| alias));
    let list: Vec<String> = settings
        .fields()
        .map(|f| format!("`{}` ({})", f.name(), type_name(settings.output_type(ColumnSource::Field(f)))))
        .collect();
    let schema = ArrayBuilder::new()
        .items(ObjectBuilder::new().schema_type(Type::String).enum_values(Some(names)))
        .min_items(Some(1))
        .unique_items(true);
    let mut description = format!(
        "The fields to return, comma-separated (`fields=error_id,os_name`), in the order of the \
         output's columns. Any subset of the {} fields, each at most once; spaces around names are \
         ignored. Allowed: {}.",
        list.len(),
        list.join(", ")
    );
    if settings.aliases().next().is_some() {
        let described: Vec<String> =
            settings.aliases().map(|(alias, source)| describe_alias(alias, source)).collect();
        description.push_str(&format!(
            " This service also accepts these names, set by its operator; the output names each \
             column as requested: {}.",
            described.join(", ")
        ));
    }
    let mut parameter = query_parameter(
        "fields",
        true,
        schema,
        &description,
        Some(json!(["error_datetime", "error_name", "os_name"])),
    );
    parameter.style = Some(ParameterStyle::Form);
    parameter.explode = Some(false);
    parameter
}

/// How the document lists an alias or an absent field.
pub(super) fn describe_alias(alias: &str, source: ColumnSource) -> String {
    match source {
        ColumnSource::Field(field) => format!("`{alias}` (another name of `{field}`)"),
        ColumnSource::Absent(kind) => {
            format!("`{alias}` ({}, not held by this dataset: always null, not a filter)", type_name(kind))
        }
    }
}

/// An equality filter on `field`, named `name` (the field's name or an alias), with the
/// field's type.
fn filter_parameter(name: &str, field: Field, settings: &DocumentSettings) -> Parameter {
    let kind = settings.output_type(ColumnSource::Field(field));
    let schema: RefOr<Schema> = match kind {
        FieldType::String => ObjectBuilder::new().schema_type(Type::String).into(),
        FieldType::Int64 => integer(Some(i64::MIN), Some(i64::MAX))
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .into(),
        FieldType::UInt64 => {
            integer(Some(0u64), Some(u64::MAX)).format(Some(SchemaFormat::Custom("uint64".into()))).into()
        }
    };
    let alias =
        if name == field.name() { String::new() } else { format!(" `{name}` is another name of `{field}`.") };
    let description = format!(
        "Equality filter on `{field}` ({kind}): only records whose `{field}` equals this value exactly \
         (case-sensitive; a null never matches). {meaning}{note}{alias}",
        kind = type_name(kind),
        meaning = field_meaning(field),
        note = settings.treatment_note(field),
    );
    query_parameter(name, false, schema, &description, None)
}

fn query_parameter(
    name: &str,
    required: bool,
    schema: impl Into<RefOr<Schema>>,
    description: &str,
    example: Option<Value>,
) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Query)
        .required(if required { Required::True } else { Required::False })
        .description(Some(description))
        .schema(Some(schema))
        .example(example)
        .build()
}

fn type_name(kind: FieldType) -> &'static str {
    match kind {
        FieldType::String => "string",
        FieldType::Int64 => "integer",
        FieldType::UInt64 => "integer, unsigned 64-bit",
    }
}

/// What each field holds (spec §2.1).
pub(super) fn field_meaning(field: Field) -> &'static str {
    match field.name() {
        "error" => "Error text (may be multi-line, e.g. a crash report).",
        "error_datetime" => "Date and time of the error, `yyyy-mm-dd hh:mm:ss`, UTC.",
        "error_id" => "Error ID.",
        "error_json" => "JSON (serialized into a string) with the error parameters.",
        "error_name" => "Error name.",
        "error_receive_datetime" => "When the server received the error, `yyyy-mm-dd hh:mm:ss`, UTC.",
        "error_receive_timestamp" => "When the server received the error, Unix time.",
        "error_timestamp" => "Time of the error, Unix time.",
        "service_device_id" => "Unique device identifier detected by the service.",
        "city" => "City name in English.",
        "connection_type" => "One of `wifi`, `cell`, `unknown`.",
        "country_iso_code" => "ISO country code.",
        "device_ipv6" => "IP address at the time of the event, in IPv6 notation (`::ffff:<ipv4>` possible).",
        "device_locale" => "Language (locale) on the device.",
        "device_manufacturer" => "Device manufacturer.",
        "device_model" => "Device model.",
        "device_type" => "One of `phone`, `tablet`, `unknown`.",
        "google_aid" => "Advertising ID (the service's platform), as received from the device.",
        "ios_ifa" => "Advertising ID (iOS), as received from the device.",
        "ios_ifv" => "Identifier-for-vendor of the app, as received from the device.",
        "mcc" => "Mobile country code.",
        "mnc" => "Mobile network code.",
        "operator_name" => "Mobile operator name.",
        "os_name" => "One of `ios`, `android`, `windows`.",
        "os_version" => "Operating system version.",
        "profile_id" => "User profile ID.",
        "windows_aid" => "Advertising ID (Windows), as received from the device.",
        "app_package_name" => "Package name or bundle ID.",
        "app_version_name" => "App version, in the developer's format.",
        "application_id" => "Numeric id of the application.",
        _ => "",
    }
}

fn boolean() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Boolean)
}

/// `{"data":[…]}`: the JSON export.
pub(super) fn export_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "The JSON export: `{\"data\":[` then one record per line, `]}` and a final newline; zero \
             records give `{\"data\":[]}`.",
        ))
        .property("data", ArrayBuilder::new().items(Ref::from_schema_name("ErrorRecord")))
        .required("data")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

/// One record: any of the fields (and aliases), with the types of spec §2.1, null when absent.
pub(super) fn record_schema(settings: &DocumentSettings) -> ObjectBuilder {
    let integers = match settings.json_integers {
        JsonIntegers::Strings => {
            "Integer fields are quoted decimal strings (`\"18446744073709551615\"`), \
             as the original API writes them, so that no reader can round them"
        }
        JsonIntegers::Numbers => "Integer fields are JSON numbers (exact up to 2^64 − 1)",
    };
    let mut record = ObjectBuilder::new().schema_type(Type::Object).description(Some(format!(
        "One error record: exactly the fields named in `fields`, in that order, each under the name \
         requested. {integers}; strings are escaped per RFC 8259 (and NEL, U+2028, U+2029 as `\\u` \
         escapes); a missing value is `null`."
    )));
    let property = |kind: FieldType, description: &str| {
        let integer = kind.is_integer();
        let (kind, format) = match (kind, settings.json_integers) {
            (FieldType::String, _) => (Type::String, None),
            (_, JsonIntegers::Strings) => (Type::String, None),
            (FieldType::Int64, JsonIntegers::Numbers) => {
                (Type::Integer, Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            }
            (FieldType::UInt64, JsonIntegers::Numbers) => {
                (Type::Integer, Some(SchemaFormat::Custom("uint64".into())))
            }
        };
        let pattern = (kind == Type::String && integer).then_some("^-?[0-9]+$");
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([kind, Type::Null]))
            .format(format)
            .pattern(pattern)
            .description(Some(description))
    };
    for field in settings.fields() {
        let description = format!("{}{}", field_meaning(field), settings.treatment_note(field));
        record = record
            .property(field.name(), property(settings.output_type(ColumnSource::Field(field)), &description));
    }
    for (alias, source) in settings.aliases() {
        record =
            record.property(alias, property(settings.output_type(source), &describe_alias(alias, source)));
    }
    record.additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_described() {
        for field in Field::all() {
            assert!(!field_meaning(field).is_empty(), "{field}");
        }
    }
}
