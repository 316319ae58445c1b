//! NDJSON, Parquet and Arrow outputs, read back by the Arrow and Parquet libraries' readers.

mod common;

use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, NullArray, StringArray, StringViewArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::ipc::reader::StreamReader;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use common::{batch, encode, encode_with, strings};
use logs_format::{Encoder, EncoderOptions, Format, ROW_GROUP_ROWS};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};

/// Texts of every Arrow form, integers at their extremes, nulls in every column, line breaks.
fn sample() -> RecordBatch {
    batch(vec![
        (
            "error",
            Arc::new(StringViewArray::from(vec![Some("line one\nline two\u{2028}three"), None, Some("")])),
        ),
        ("city", strings(&[None, Some("Zürich"), Some("a,\"b\"")])),
        ("service_device_id", Arc::new(UInt64Array::from(vec![Some(u64::MAX), Some((1 << 63) + 1), None]))),
        ("error_timestamp", Arc::new(Int64Array::from(vec![Some(i64::MIN), None, Some(1_767_225_600)]))),
        ("oaid", Arc::new(NullArray::new(3))),
    ])
}

fn read_parquet(bytes: Vec<u8>) -> Vec<RecordBatch> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).unwrap().build().unwrap();
    reader.collect::<Result<_, _>>().unwrap()
}

fn read_arrow(bytes: Vec<u8>) -> Vec<RecordBatch> {
    StreamReader::try_new(Cursor::new(bytes), None).unwrap().collect::<Result<_, _>>().unwrap()
}

/// The values of `column` of `batches` as text, `None` for null.
fn texts(batches: &[RecordBatch], column: usize) -> Vec<Option<String>> {
    let mut values = Vec::new();
    for batch in batches {
        let array = arrow::compute::cast(batch.column(column), &DataType::Utf8).unwrap();
        let array = array.as_any().downcast_ref::<StringArray>().unwrap();
        values.extend((0..array.len()).map(|i| array.is_valid(i).then(|| array.value(i).to_owned())));
    }
    values
}

fn expected_types() -> Vec<DataType> {
    vec![DataType::Utf8, DataType::Utf8, DataType::UInt64, DataType::Int64, DataType::Utf8]
}

fn assert_same_values(batches: &[RecordBatch], original: &RecordBatch) {
    let schema = batches[0].schema();
    let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["error", "city", "service_device_id", "error_timestamp", "oaid"]);
    let types: Vec<_> = schema.fields().iter().map(|f| f.data_type().clone()).collect();
    assert_eq!(types, expected_types());
    for column in 0..original.num_columns() {
        assert_eq!(texts(batches, column), texts(std::slice::from_ref(original), column), "column {column}");
    }
}

#[test]
fn parquet_keeps_every_value_and_type() {
    let sample = sample();
    let output = encode_with(
        Format::Parquet,
        &sample.schema(),
        &[sample.clone(), sample.slice(1, 1)],
        EncoderOptions::default(),
    );
    assert_eq!(&output[..4], b"PAR1");
    assert_eq!(&output[output.len() - 4..], b"PAR1");
    let batches = read_parquet(output.clone());
    let both = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(both.num_rows(), 4);
    assert_same_values(&[both.slice(0, 3)], &sample);
    assert_eq!(texts(&[both.slice(3, 1)], 2), [Some(((1u64 << 63) + 1).to_string())]);

    // zstd, statistics and the page index.
    let reader = SerializedFileReader::new(Bytes::from(output.clone())).unwrap();
    let metadata = reader.metadata();
    let column = metadata.row_group(0).column(2);
    assert!(matches!(column.compression(), Compression::ZSTD(_)), "{:?}", column.compression());
    let statistics = column.statistics().expect("statistics");
    assert_eq!(statistics.null_count_opt(), Some(1));
    assert!(
        column.offset_index_offset().is_some() && column.column_index_offset().is_some(),
        "the page index"
    );
}

#[test]
fn parquet_writes_row_groups_as_it_goes() {
    let rows = ROW_GROUP_ROWS + 10;
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows as i64));
    let big = batch(vec![("id", ids)]);
    let mut shared = SharedWriter::default();
    let mut encoder =
        Encoder::new(Format::Parquet, shared.clone(), &big.schema(), EncoderOptions::default()).unwrap();
    encoder.write_batch(&big).unwrap();
    encoder.flush().unwrap();
    let before_finish = shared.take();
    assert!(
        before_finish.starts_with(b"PAR1") && before_finish.len() > 100_000,
        "the first row group is out"
    );
    encoder.finish().unwrap();
    let whole = [before_finish, shared.take()].concat();
    let reader = SerializedFileReader::new(Bytes::from(whole)).unwrap();
    let groups: Vec<i64> = reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(groups, [ROW_GROUP_ROWS as i64, 10]);
}

/// Row groups smaller than the output's 1 MiB chunk (a narrow export's) reach the writer once
/// they fill a chunk, not at the end: the encoder never holds more than a chunk and a row group.
#[test]
fn parquet_hands_small_row_groups_on_as_they_fill_a_chunk() {
    // Values that do not compress: each row group is about 512 KiB.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut shared = SharedWriter::default();
    let schema = Schema::new(vec![Field::new("id", DataType::UInt64, true)]);
    let mut encoder =
        Encoder::new(Format::Parquet, shared.clone(), &schema, EncoderOptions::default()).unwrap();
    let mut handed_on = 0;
    for round in 0..12 {
        let values: ArrayRef = Arc::new(UInt64Array::from_iter_values((0..ROW_GROUP_ROWS).map(|_| next())));
        encoder.write_batch(&batch(vec![("id", values)])).unwrap();
        handed_on += shared.take().len() as u64;
        let held = encoder.bytes_written() - handed_on;
        assert!(held < (2 << 20), "after row group {round}: {held} bytes held, {handed_on} handed on");
    }
    assert!(handed_on > 4 << 20, "{handed_on} bytes handed on before the end");
    let rest = encoder.finish().unwrap();
    assert!(rest.0.lock().unwrap().len() < 2 << 20);
}

#[test]
fn arrow_keeps_every_value_and_type() {
    let sample = sample();
    let output = encode_with(
        Format::Arrow,
        &sample.schema(),
        std::slice::from_ref(&sample),
        EncoderOptions::default(),
    );
    assert_eq!(&output[output.len() - 8..], b"\xFF\xFF\xFF\xFF\0\0\0\0", "the end-of-stream marker");
    let batches = read_arrow(output);
    assert_eq!(batches.len(), 1);
    assert_same_values(&batches, &sample);
}

#[test]
fn zero_rows_give_the_typed_schema() {
    let sample = sample();
    let options = EncoderOptions::default();
    let parquet = encode_with(Format::Parquet, &sample.schema(), &[], options);
    let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(parquet)).unwrap();
    let types: Vec<_> = reader.schema().fields().iter().map(|f| f.data_type().clone()).collect();
    assert_eq!(types, expected_types());
    assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
    let arrow = encode_with(Format::Arrow, &sample.schema(), &[], options);
    let reader = StreamReader::try_new(Cursor::new(arrow), None).unwrap();
    let types: Vec<_> = reader.schema().fields().iter().map(|f| f.data_type().clone()).collect();
    assert_eq!(types, expected_types());
    assert_eq!(reader.count(), 0);
    assert_eq!(encode_with(Format::Ndjson, &sample.schema(), &[], options), b"");
}

#[test]
fn nothing_is_written_before_the_first_batch_and_the_bom_is_ignored() {
    let sample = sample();
    for format in [Format::Ndjson, Format::Parquet, Format::Arrow] {
        let options = EncoderOptions::default().with_bom(true);
        let mut encoder = Encoder::new(format, Vec::new(), &sample.schema(), options).unwrap();
        encoder.flush().unwrap();
        assert!(encoder.take_buffered(Vec::new()).is_empty(), "{format}");
        encoder.write_batch(&sample).unwrap();
        let output = encoder.finish().unwrap();
        assert!(!output.starts_with(b"\xEF\xBB\xBF"), "{format}");
    }
}

#[test]
fn ndjson_is_the_json_records_one_per_line() {
    let sample = sample();
    let json = encode(Format::Json, std::slice::from_ref(&sample));
    let ndjson = encode(Format::Ndjson, &[sample.slice(0, 2), sample.slice(2, 1)]);
    let records: Vec<&str> =
        json.lines().filter(|line| line.starts_with('{') && !line.starts_with("{\"data\"")).collect();
    let records: Vec<String> = records.iter().map(|r| r.trim_end_matches(',').to_owned()).collect();
    assert_eq!(ndjson, records.iter().map(|r| format!("{r}\n")).collect::<String>());
    assert_eq!(ndjson.lines().count(), 3, "U+2028 and LF inside values are escaped");
    for line in ndjson.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(record.is_object());
    }
    assert!(ndjson.starts_with("{\"error\":\"line one\\nline two\\u2028three\",\"city\":null,\"service_device_id\":\"18446744073709551615\""));
}

#[test]
fn a_broken_output_is_refused_by_the_readers() {
    let sample = sample();
    let schema = sample.schema();
    for format in [Format::Ndjson, Format::Parquet, Format::Arrow] {
        // What went out before the failure: whole batches (for Arrow, whole messages).
        let mut encoder = Encoder::new(format, Vec::new(), &schema, EncoderOptions::default()).unwrap();
        encoder.write_batch(&sample).unwrap();
        let mut sent = encoder.take_buffered(Vec::new());
        encoder.write_batch(&sample).unwrap();
        sent.extend(encoder.take_buffered(Vec::new()));
        drop(encoder);
        // Without the ending, a stream cut between two messages reads as complete.
        if format == Format::Arrow {
            assert_eq!(read_arrow(sent.clone()).len(), 2, "a cut Arrow stream looks complete");
        }
        sent.extend_from_slice(format.broken_ending());
        match format {
            Format::Ndjson => {
                let last = String::from_utf8(sent).unwrap().lines().last().unwrap().to_owned();
                assert!(serde_json::from_str::<serde_json::Value>(&last).is_err(), "{last}");
            }
            Format::Parquet => {
                assert!(ParquetRecordBatchReaderBuilder::try_new(Bytes::from(sent)).is_err());
            }
            _ => {
                let read: Result<Vec<RecordBatch>, _> =
                    StreamReader::try_new(Cursor::new(sent), None).unwrap().collect();
                assert!(read.is_err(), "the Arrow reader takes the broken stream for complete");
            }
        }
    }
    assert!(Format::Csv.broken_ending().is_empty() && Format::Json.broken_ending().is_empty());
}

#[test]
fn a_column_of_another_kind_fails_before_anything_is_written() {
    let schema = Arc::new(Schema::new(vec![Field::new("mcc", DataType::Int64, true)]));
    let wrong = batch(vec![("mcc", strings(&[Some("250")]))]);
    for format in [Format::Parquet, Format::Arrow] {
        let mut encoder = Encoder::new(format, Vec::new(), &schema, EncoderOptions::default()).unwrap();
        let error = encoder.write_batch(&wrong).unwrap_err().to_string();
        assert!(error.contains("`mcc`"), "{error}");
        assert!(encoder.take_buffered(Vec::new()).is_empty());
    }
}

#[test]
fn an_abandoned_output_ends_broken_and_keeps_what_was_encoded() {
    let sample = sample();
    for format in Format::ALL {
        let mut encoder =
            Encoder::new(format, Vec::new(), &sample.schema(), EncoderOptions::default()).unwrap();
        encoder.write_batch(&sample).unwrap();
        let mut shared = SharedWriter::default();
        let mut encoder_to_shared =
            Encoder::new(format, shared.clone(), &sample.schema(), EncoderOptions::default()).unwrap();
        encoder_to_shared.write_batch(&sample).unwrap();
        let encoded = encoder.take_buffered(Vec::new());
        encoder_to_shared.abandon().unwrap();
        let written = shared.take();
        assert_eq!(written, [encoded, format.broken_ending().to_vec()].concat(), "{format}");
    }
}

/// A writer whose bytes the test can read after the encoder has taken it.
#[derive(Clone, Default)]
struct SharedWriter(Arc<std::sync::Mutex<Vec<u8>>>);

impl SharedWriter {
    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

impl std::io::Write for SharedWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A wide batch's columns go to two threads: the rows come back in order, each value in its
/// place.
#[test]
fn parquet_wide_rows_keep_their_order_and_values() {
    let rows = 5000;
    let texts: Vec<Option<String>> =
        (0..rows).map(|i| (i % 7 != 0).then(|| format!("line {i}\n{}", "x".repeat(300 + i % 300)))).collect();
    let wide = mixed(&texts);
    let output = encode_with(
        Format::Parquet,
        &wide.schema(),
        &[wide.slice(0, 4000), wide.slice(4000, 1000)],
        EncoderOptions::default(),
    );
    assert_same_rows(output, &wide);
}

/// Narrow rows' row groups are encoded on two lanes in turn: five row groups (the last of a
/// few rows), from batches that cross their ends, come back in order, each value in its place.
#[test]
fn parquet_narrow_row_groups_encoded_on_two_lanes_keep_their_order() {
    let rows = 4 * ROW_GROUP_ROWS + 7;
    let texts: Vec<Option<String>> =
        (0..rows).map(|i| (i % 7 != 0).then(|| format!("line {i}\n{}", "x".repeat(i % 100)))).collect();
    let narrow = mixed(&texts);
    let cuts = [0, 5000, 70_000, 70_001, 200_000, rows];
    let pieces: Vec<RecordBatch> = cuts.windows(2).map(|w| narrow.slice(w[0], w[1] - w[0])).collect();
    let output = encode_with(Format::Parquet, &narrow.schema(), &pieces, EncoderOptions::default());
    let full = ROW_GROUP_ROWS as i64;
    assert_eq!(row_groups(&output), [full, full, full, full, 7]);
    assert_same_rows(output, &narrow);
}

/// On lanes, a row group also ends at 16 MiB of plain values (rows that grow wider after a
/// narrow start), and where it ends depends on the rows only: the same rows, the same bytes.
#[test]
fn parquet_row_groups_on_lanes_end_at_their_values_bytes_and_the_same_rows_give_the_same_file() {
    let short = (0..1000).map(|i| format!("{i:08}"));
    let long = (1000..13_000).map(|i| format!("{i:08}{}", "z".repeat(2000)));
    let texts: ArrayRef = Arc::new(StringViewArray::from_iter_values(short.chain(long)));
    let rows = batch(vec![("error", texts)]);
    let pieces: Vec<RecordBatch> = (0..13_000).step_by(1000).map(|at| rows.slice(at, 1000)).collect();
    let once = encode_with(Format::Parquet, &rows.schema(), &pieces, EncoderOptions::default());
    let again = encode_with(Format::Parquet, &rows.schema(), &pieces, EncoderOptions::default());
    assert!(once == again, "the same rows gave different files");
    // 1 000 rows of 12 bytes, then rows of 2 012: 16 MiB is passed with the ninth batch of
    // long rows, the tenth batch.
    assert_eq!(row_groups(&once), [10_000, 3000]);
    let read = read_parquet(once);
    assert_eq!(read.iter().map(RecordBatch::num_rows).sum::<usize>(), 13_000);
}

/// A batch of texts, unsigned ids, a repeated city and integers with nulls.
fn mixed(texts: &[Option<String>]) -> RecordBatch {
    let rows = texts.len();
    batch(vec![
        ("error", Arc::new(StringViewArray::from_iter(texts.iter().map(|t| t.as_deref()))) as ArrayRef),
        ("id", Arc::new(UInt64Array::from_iter_values((0..rows as u64).map(|i| u64::MAX - i)))),
        ("city", strings(&vec![Some("Zürich"); rows])),
        ("mcc", Arc::new(Int64Array::from_iter((0..rows as i64).map(|i| (i % 3 != 0).then_some(i))))),
    ])
}

fn row_groups(parquet: &[u8]) -> Vec<i64> {
    let reader = SerializedFileReader::new(Bytes::from(parquet.to_vec())).unwrap();
    reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect()
}

fn assert_same_rows(parquet: Vec<u8>, original: &RecordBatch) {
    let batches = read_parquet(parquet);
    let read = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(read.num_rows(), original.num_rows());
    for column in 0..original.num_columns() {
        assert_eq!(texts_of(&read, column), texts_of(original, column), "column {column}");
    }
}

fn texts_of(batch: &RecordBatch, column: usize) -> Vec<Option<String>> {
    texts(std::slice::from_ref(batch), column)
}

#[test]
fn arrow_writes_a_large_batch_as_messages_of_a_few_mib() {
    let rows = 10_000;
    let texts: Vec<String> = (0..rows).map(|i| format!("{i}:{}", "y".repeat(1000))).collect();
    let large = batch(vec![
        ("error", Arc::new(StringViewArray::from_iter_values(texts.iter())) as ArrayRef),
        ("id", Arc::new(UInt64Array::from_iter_values(0..rows as u64))),
    ]);
    let output =
        encode_with(Format::Arrow, &large.schema(), std::slice::from_ref(&large), EncoderOptions::default());
    let batches = read_arrow(output);
    assert!(batches.len() >= 4, "about 10 MB in messages of about 2 MiB: {} messages", batches.len());
    let read = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(texts_of(&read, 0), texts_of(&large, 0));
    assert_eq!(texts_of(&read, 1), texts_of(&large, 1));
}
