//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Int8Array, StringArray};
use arrow::datatypes::{ArrowDictionaryKeyType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use logs_format::{Encoder, EncoderOptions, Format};

/// A batch of nullable columns named as given.
pub fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> =
        columns.iter().map(|(name, array)| Field::new(*name, array.data_type().clone(), true)).collect();
    let arrays = columns.into_iter().map(|(_, array)| array).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
}

/// Encodes `batches` (all of `schema`) and returns the output.
pub fn encode_with(
    format: Format,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    options: EncoderOptions,
) -> Vec<u8> {
    let mut encoder = Encoder::new(format, Vec::new(), schema, options).unwrap();
    for batch in batches {
        encoder.write_batch(batch).unwrap();
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(encoder.rows_written(), rows as u64);
    let bytes_written = encoder.bytes_written();
    let output = encoder.finish().unwrap();
    // Every byte is counted before `finish` but JSON's closing `]}` (after a line break if
    // there were rows), and the preamble (BOM, header, JSON's opening) when no batch came.
    let trailer = match format {
        Format::Csv | Format::Ndjson => 0,
        Format::Json if rows == 0 => 3,
        Format::Json => 4,
        // Typed formats: the footer or end-of-stream marker, and (Parquet) a row group in
        // progress counted by its estimated size.
        Format::Parquet | Format::Arrow => return output,
    };
    if batches.is_empty() {
        assert_eq!(bytes_written, 0, "bytes_written before finish, no batch");
    } else {
        assert_eq!(bytes_written + trailer, output.len() as u64, "bytes_written before finish");
    }
    output
}

/// Encodes `batches` with default options and returns the output as text.
pub fn encode(format: Format, batches: &[RecordBatch]) -> String {
    let output = encode_with(format, &batches[0].schema(), batches, EncoderOptions::default());
    String::from_utf8(output).unwrap()
}

pub fn strings(values: &[Option<&str>]) -> ArrayRef {
    Arc::new(StringArray::from(values.to_vec()))
}

/// A dictionary with the given values and keys (`None` is a null key).
pub fn dictionary<K: ArrowDictionaryKeyType>(
    keys: arrow::array::PrimitiveArray<K>,
    values: &[Option<&str>],
) -> ArrayRef {
    Arc::new(DictionaryArray::<K>::try_new(keys, strings(values)).unwrap())
}

pub fn int8_keys(keys: &[Option<i8>]) -> Int8Array {
    Int8Array::from(keys.to_vec())
}
