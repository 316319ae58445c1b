//! An export encoded in each format and read back into rows, for the oracle.

use std::io::Cursor;

use bytes::Bytes;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use futures::StreamExt;
use logs_core::{Engine, ExportRequest, ExportStream};
use logs_format::{Encoder, EncoderOptions, Format, JsonIntegers};
use serde_json::Value;

use crate::support::{Row, batch_rows};

/// Runs the export, encodes it in `format` and reads the output back: its rows as text (CSV:
/// a null reads as an empty string, as in every CSV reader), and the finished stream.
pub async fn encoded_rows(
    engine: &Engine,
    request: &ExportRequest,
    format: Format,
    integers: JsonIntegers,
) -> (Vec<Row>, ExportStream) {
    let mut export = engine.export(request).await.unwrap();
    let options = EncoderOptions::default().with_json_integers(integers);
    let mut encoder = Encoder::new(format, Vec::new(), &export.schema(), options).unwrap();
    while let Some(batch) = export.next().await {
        encoder.write_batch(&batch.unwrap()).unwrap();
    }
    let output = encoder.finish().unwrap();
    let names: Vec<String> = export.schema().fields().iter().map(|f| f.name().clone()).collect();
    (decode(format, output, &names), export)
}

fn decode(format: Format, output: Vec<u8>, names: &[String]) -> Vec<Row> {
    match format {
        Format::Csv => {
            let mut reader = csv::ReaderBuilder::new().from_reader(output.as_slice());
            assert_eq!(reader.headers().unwrap().iter().collect::<Vec<_>>(), names);
            let records = reader.records().map(|record| record.unwrap());
            records.map(|record| record.iter().map(|cell| Some(cell.to_owned())).collect()).collect()
        }
        Format::Json => {
            let document: Value = serde_json::from_slice(&output).unwrap();
            document["data"].as_array().unwrap().iter().map(|record| json_row(record, names)).collect()
        }
        Format::Ndjson => {
            let text = String::from_utf8(output).unwrap();
            assert!(text.is_empty() || text.ends_with('\n'));
            text.lines().map(|line| json_row(&serde_json::from_str(line).unwrap(), names)).collect()
        }
        Format::Parquet => {
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(Bytes::from(output)).unwrap().build().unwrap();
            batches_rows(reader.map(|batch| batch.unwrap()), names)
        }
        Format::Arrow => {
            let reader = StreamReader::try_new(Cursor::new(output), None).unwrap();
            batches_rows(reader.map(|batch| batch.unwrap()), names)
        }
    }
}

fn json_row(record: &Value, names: &[String]) -> Row {
    let record = record.as_object().unwrap();
    assert_eq!(record.len(), names.len(), "{record:?}");
    names
        .iter()
        .map(|name| match record.get(name).unwrap_or_else(|| panic!("no `{name}` in {record:?}")) {
            Value::Null => None,
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            other => panic!("unexpected JSON value {other}"),
        })
        .collect()
}

fn batches_rows(batches: impl Iterator<Item = RecordBatch>, names: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for batch in batches {
        let schema = batch.schema();
        assert_eq!(
            schema.fields().iter().map(|f| f.name()).collect::<Vec<_>>(),
            names.iter().collect::<Vec<_>>()
        );
        rows.extend(batch_rows(&batch));
    }
    rows
}
