//! Exact JSON output.

mod common;

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float32Array, Float64Array, Int8Array, Int32Array, Int64Array, LargeStringArray,
    NullArray, StringViewArray, UInt8Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use common::{batch, dictionary, encode, encode_with, int8_keys, strings};
use logs_format::{Encoder, EncoderOptions, Format, FormatError, JsonEncoder};

#[test]
fn zero_rows() {
    let batch = batch(vec![("a", strings(&[]))]);
    assert_eq!(
        encode_with(Format::Json, &batch.schema(), &[], EncoderOptions::default()),
        b"{\"data\":[]}\n"
    );
    assert_eq!(encode(Format::Json, &[batch.clone(), batch]), "{\"data\":[]}\n");
}

#[test]
fn one_record_per_line() {
    let first =
        batch(vec![("a", strings(&[Some("1"), Some("2")])), ("b", Arc::new(Int64Array::from(vec![1, 2])))]);
    let second = batch(vec![("a", strings(&[None])), ("b", Arc::new(Int64Array::from(vec![3])))]);
    assert_eq!(
        encode(Format::Json, std::slice::from_ref(&first)),
        "{\"data\":[\n{\"a\":\"1\",\"b\":\"1\"},\n{\"a\":\"2\",\"b\":\"2\"}\n]}\n"
    );
    assert_eq!(
        encode(Format::Json, &[first.slice(0, 0), first.slice(1, 1), second, first.slice(0, 1)]),
        "{\"data\":[\n{\"a\":\"2\",\"b\":\"2\"},\n{\"a\":null,\"b\":\"3\"},\n{\"a\":\"1\",\"b\":\"1\"}\n]}\n"
    );
}

#[test]
fn json_never_starts_with_a_bom() {
    let batch = batch(vec![("a", strings(&[Some("x")]))]);
    let options = EncoderOptions::default().with_bom(true);
    let output = encode_with(Format::Json, &batch.schema(), std::slice::from_ref(&batch), options);
    assert_eq!(output, b"{\"data\":[\n{\"a\":\"x\"}\n]}\n");
    let parsed: serde_json::Value = serde_json::from_slice(&output).unwrap();
    assert_eq!(parsed["data"][0]["a"], "x");
    let empty = encode_with(Format::Json, &batch.schema(), &[], options);
    assert_eq!(empty, b"{\"data\":[]}\n");
}

#[test]
fn strings_are_escaped_per_rfc_8259() {
    let values = strings(&[
        Some(r#"quote " and backslash \"#),
        Some("\n\r\t\u{8}\u{c}"),
        Some("\u{0}\u{1}\u{1f}\u{1b}\u{7f}"),
        Some("/ é ✓ 😀 \u{2028}\u{2029}\u{85} £ —"),
        Some(""),
        None,
        Some("comma, \"quoted\""),
    ]);
    let output = encode(Format::Json, &[batch(vec![("s", values)])]);
    assert_eq!(
        output,
        "{\"data\":[\n\
         {\"s\":\"quote \\\" and backslash \\\\\"},\n\
         {\"s\":\"\\n\\r\\t\\b\\f\"},\n\
         {\"s\":\"\\u0000\\u0001\\u001f\\u001b\u{7f}\"},\n\
         {\"s\":\"/ é ✓ 😀 \\u2028\\u2029\\u0085 £ —\"},\n\
         {\"s\":\"\"},\n\
         {\"s\":null},\n\
         {\"s\":\"comma, \\\"quoted\\\"\"}\n\
         ]}\n"
    );
}

#[test]
fn keys_are_escaped_and_in_schema_order() {
    let columns = vec![
        ("z", strings(&[Some("1")])),
        ("a \"quoted\" key", strings(&[Some("2")])),
        ("line\nbreak\\", strings(&[Some("3")])),
        ("", strings(&[Some("4")])),
    ];
    assert_eq!(
        encode(Format::Json, &[batch(columns)]),
        "{\"data\":[\n{\"z\":\"1\",\"a \\\"quoted\\\" key\":\"2\",\"line\\nbreak\\\\\":\"3\",\"\":\"4\"}\n]}\n"
    );
}

fn integer_batch() -> arrow::record_batch::RecordBatch {
    batch(vec![
        ("i8", Arc::new(Int8Array::from(vec![Some(i8::MIN), None]))),
        ("i32", Arc::new(Int32Array::from(vec![Some(-1), Some(i32::MAX)]))),
        ("i64", Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(i64::MAX)]))),
        ("u8", Arc::new(UInt8Array::from(vec![Some(0), Some(255)]))),
        ("u64", Arc::new(UInt64Array::from(vec![Some(u64::MAX), Some((1 << 63) + 1)]))),
    ])
}

#[test]
fn integers_are_exact_strings_by_default() {
    let output = encode(Format::Json, &[integer_batch()]);
    assert_eq!(
        output,
        "{\"data\":[\n\
         {\"i8\":\"-128\",\"i32\":\"-1\",\"i64\":\"-9223372036854775808\",\"u8\":\"0\",\"u64\":\"18446744073709551615\"},\n\
         {\"i8\":null,\"i32\":\"2147483647\",\"i64\":\"9223372036854775807\",\"u8\":\"255\",\"u64\":\"9223372036854775809\"}\n\
         ]}\n"
    );
    // A reader that parses numbers as doubles (as JavaScript does) still gets every digit.
    let document: serde_json::Value = serde_json::from_str(&output).unwrap();
    let as_double = |value: &serde_json::Value| match value {
        serde_json::Value::Number(n) => n.as_f64().map(|f| format!("{f:.0}")),
        serde_json::Value::String(s) => Some(s.clone()),
        _ => None,
    };
    assert_eq!(as_double(&document["data"][0]["u64"]).as_deref(), Some("18446744073709551615"));
    assert_eq!(as_double(&document["data"][1]["u64"]).as_deref(), Some("9223372036854775809"));
}

#[test]
fn integers_are_exact_numbers_when_asked() {
    let batch = integer_batch();
    let options = EncoderOptions::default().with_json_integers(logs_format::JsonIntegers::Numbers);
    let output = String::from_utf8(encode_with(Format::Json, &batch.schema(), &[batch], options)).unwrap();
    assert_eq!(
        output,
        "{\"data\":[\n\
         {\"i8\":-128,\"i32\":-1,\"i64\":-9223372036854775808,\"u8\":0,\"u64\":18446744073709551615},\n\
         {\"i8\":null,\"i32\":2147483647,\"i64\":9223372036854775807,\"u8\":255,\"u64\":9223372036854775809}\n\
         ]}\n"
    );
}

#[test]
fn utf8_view_large_utf8_and_dictionaries() {
    let long = "a \"long\" value\nthat is stored out of line";
    let whole = batch(vec![
        ("v", Arc::new(StringViewArray::from(vec![Some("short"), Some(long), None, Some("")])) as ArrayRef),
        ("l", Arc::new(LargeStringArray::from(vec![Some("large"), None, Some("x\ty"), Some("")]))),
        (
            "d",
            dictionary(
                int8_keys(&[Some(3), None, Some(1), Some(2)]),
                &[Some("unused"), Some("ios"), None, Some("with \"quote\"")],
            ),
        ),
        ("wide", dictionary::<Int32Type>(vec![Some(0), Some(0), None, Some(0)].into(), &[Some("é")])),
    ]);
    let output = encode(Format::Json, &[whole.slice(1, 3), whole.slice(0, 1)]);
    assert_eq!(
        output,
        "{\"data\":[\n\
         {\"v\":\"a \\\"long\\\" value\\nthat is stored out of line\",\"l\":null,\"d\":null,\"wide\":\"é\"},\n\
         {\"v\":null,\"l\":\"x\\ty\",\"d\":\"ios\",\"wide\":null},\n\
         {\"v\":\"\",\"l\":\"\",\"d\":null,\"wide\":\"é\"},\n\
         {\"v\":\"short\",\"l\":\"large\",\"d\":\"with \\\"quote\\\"\",\"wide\":\"é\"}\n\
         ]}\n"
    );
}

#[test]
fn null_booleans_and_floats() {
    let output = encode(
        Format::Json,
        &[batch(vec![
            ("n", Arc::new(NullArray::new(2))),
            ("b", Arc::new(BooleanArray::from(vec![Some(true), None]))),
            ("f", Arc::new(Float64Array::from(vec![Some(-0.5), Some(f64::INFINITY)]))),
            ("g", Arc::new(Float32Array::from(vec![Some(f32::NAN), Some(3e-9)]))),
        ])],
    );
    assert_eq!(
        output,
        "{\"data\":[\n{\"n\":null,\"b\":true,\"f\":-0.5,\"g\":null},\n{\"n\":null,\"b\":null,\"f\":null,\"g\":3e-9}\n]}\n"
    );
}

#[test]
fn errors_match_csv() {
    let schema = Schema::new(vec![Field::new("list", DataType::new_list(DataType::Utf8, true), true)]);
    assert!(matches!(
        JsonEncoder::new(Vec::new(), &schema, EncoderOptions::default()),
        Err(FormatError::UnsupportedType { column, .. }) if column == "list"
    ));
    let schema = Schema::new(vec![Field::new("a", DataType::Utf8, true)]);
    let mut encoder = Encoder::new(Format::Json, Vec::new(), &schema, EncoderOptions::default()).unwrap();
    let two = batch(vec![("a", strings(&[Some("x")])), ("b", strings(&[Some("y")]))]);
    assert!(matches!(encoder.write_batch(&two), Err(FormatError::SchemaMismatch { expected: 1, found: 2 })));
    assert_eq!(encoder.bytes_written(), 0);
    assert_eq!(encoder.finish().unwrap(), b"{\"data\":[]}\n");
}

#[test]
fn format_names_and_media_types() {
    assert_eq!("csv".parse::<Format>().unwrap(), Format::Csv);
    assert_eq!("json".parse::<Format>().unwrap(), Format::Json);
    let error = "xml".parse::<Format>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown format `xml`: expected one of `csv`, `json`, `ndjson`, `parquet`, `arrow`"
    );
    assert!("CSV".parse::<Format>().is_err());
    for format in Format::ALL {
        assert_eq!(format.to_string().parse::<Format>().unwrap(), format);
        assert_eq!(format.extension(), format.to_string());
    }
    assert_eq!(Format::Csv.content_type(), "text/csv; charset=utf-8");
    assert_eq!(Format::Json.content_type(), "application/json; charset=utf-8");
    assert_eq!(Format::Ndjson.content_type(), "application/x-ndjson; charset=utf-8");
    assert_eq!(Format::Parquet.content_type(), "application/vnd.apache.parquet");
    assert_eq!(Format::Arrow.content_type(), "application/vnd.apache.arrow.stream");
    assert!(!Format::Parquet.compressible() && Format::Arrow.compressible() && Format::Ndjson.compressible());
    let schema = Schema::empty();
    assert_eq!(
        Encoder::new(Format::Json, Vec::new(), &schema, EncoderOptions::default()).unwrap().format(),
        Format::Json
    );
}

#[test]
fn the_json_integers_setting_is_named_string_or_number() {
    use logs_format::JsonIntegers;
    assert_eq!(
        (JsonIntegers::Strings.to_string(), JsonIntegers::Numbers.to_string()),
        ("string".into(), "number".into())
    );
    for value in JsonIntegers::ALL {
        assert_eq!(value.as_str().parse::<JsonIntegers>(), Ok(value));
    }
    let error = "numbers".parse::<JsonIntegers>().unwrap_err();
    assert_eq!(error, "`numbers` is not a way to write JSON integers: expected `string` or `number`");
}
