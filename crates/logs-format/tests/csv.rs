//! Exact CSV output.

mod common;

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array,
    Int64Array, LargeStringArray, NullArray, StringViewArray, UInt8Array, UInt16Array, UInt32Array,
    UInt64Array,
};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, UInt16Type};
use common::{batch, dictionary, encode, encode_with, int8_keys, strings};
use logs_format::{CsvEncoder, Encoder, EncoderOptions, Format, FormatError};

#[test]
fn quotes_only_commas_quotes_and_line_breaks() {
    let values = strings(&[
        Some("plain"),
        Some("a,b"),
        Some(r#"say "hi""#),
        Some("cr\ronly"),
        Some("lf\nonly"),
        Some("crlf\r\n"),
        Some("\""),
        Some(""),
        None,
        Some("Ünïcödé ✓ 😀"),
        Some("\ttab and  spaces "),
        Some("semi;colon 'single'"),
    ]);
    let row = Arc::new(Int64Array::from_iter_values(0..12)) as ArrayRef;
    let output = encode(Format::Csv, &[batch(vec![("value", values), ("row", row)])]);
    assert_eq!(
        output,
        "value,row\n\
         plain,0\n\
         \"a,b\",1\n\
         \"say \"\"hi\"\"\",2\n\
         \"cr\ronly\",3\n\
         \"lf\nonly\",4\n\
         \"crlf\r\n\",5\n\
         \"\"\"\",6\n\
         \"\",7\n\
         ,8\n\
         Ünïcödé ✓ 😀,9\n\
         \ttab and  spaces ,10\n\
         semi;colon 'single',11\n"
    );
}

#[test]
fn empty_string_and_null_differ_in_every_position() {
    let a = strings(&[Some(""), None, Some("")]);
    let b = strings(&[None, Some(""), Some("")]);
    let c = strings(&[None, None, Some("")]);
    let output = encode(Format::Csv, &[batch(vec![("a", a), ("b", b), ("c", c)])]);
    assert_eq!(output, "a,b,c\n\"\",,\n,\"\",\n\"\",\"\",\"\"\n");
}

#[test]
fn a_one_column_null_is_never_an_empty_line() {
    let output = encode(Format::Csv, &[batch(vec![("a", strings(&[None, Some(""), None, Some("x")]))])]);
    assert_eq!(output, "a\n\"\"\n\"\"\n\"\"\nx\n");
    // A standard reader that skips empty lines still sees every record.
    let records = csv::Reader::from_reader(output.as_bytes()).into_records().count();
    assert_eq!(records, 4);
    // With two columns, a row of nulls is a lone comma, as before.
    let two = encode(Format::Csv, &[batch(vec![("a", strings(&[None])), ("b", strings(&[None]))])]);
    assert_eq!(two, "a,b\n,\n");
}

#[test]
fn header_names_are_quoted_by_the_same_rule() {
    let names = ["plain", "with,comma", "with \"quote\"", "", "line\nbreak", "tab\there", "é"];
    let columns = names.iter().map(|name| (*name, strings(&[Some("x")]))).collect();
    let output = encode(Format::Csv, &[batch(columns)]);
    assert_eq!(
        output,
        "plain,\"with,comma\",\"with \"\"quote\"\"\",\"\",\"line\nbreak\",tab\there,é\nx,x,x,x,x,x,x\n"
    );
}

#[test]
fn bom_comes_first() {
    let batch = batch(vec![("a", strings(&[Some("x")]))]);
    let options = EncoderOptions::default().with_bom(true);
    let output = encode_with(Format::Csv, &batch.schema(), std::slice::from_ref(&batch), options);
    assert_eq!(output, b"\xEF\xBB\xBFa\nx\n");
    let empty = encode_with(Format::Csv, &batch.schema(), &[], EncoderOptions::default().with_bom(true));
    assert_eq!(empty, b"\xEF\xBB\xBFa\n");
}

#[test]
fn zero_rows_give_the_header_alone() {
    let batch = batch(vec![("a", strings(&[])), ("b", Arc::new(Int64Array::from(Vec::<i64>::new())))]);
    assert_eq!(encode_with(Format::Csv, &batch.schema(), &[], EncoderOptions::default()), b"a,b\n");
    assert_eq!(encode(Format::Csv, &[batch.clone(), batch]), "a,b\n");
}

#[test]
fn multiple_batches_share_one_header() {
    let first = batch(vec![("a", strings(&[Some("1"), Some("2")]))]);
    let second = batch(vec![("a", strings(&[Some("3")]))]);
    let empty = first.slice(0, 0);
    assert_eq!(encode(Format::Csv, &[first, empty, second]), "a\n1\n2\n3\n");
}

#[test]
fn sliced_batches_encode_their_own_rows() {
    let whole = batch(vec![
        ("s", strings(&[Some("zero"), None, Some("two,2"), Some("three"), Some("four")])),
        (
            "v",
            Arc::new(StringViewArray::from(vec![
                Some("a long string of more than twelve bytes"),
                Some("short"),
                None,
                Some(""),
                Some("last one, long enough to be out of line"),
            ])),
        ),
        ("l", Arc::new(LargeStringArray::from(vec![Some("l0"), Some("l1"), Some("l2"), None, Some("l4")]))),
        ("i", Arc::new(Int64Array::from(vec![Some(0), Some(-1), None, Some(3), Some(4)]))),
        ("d", dictionary(int8_keys(&[Some(0), Some(1), None, Some(1), Some(0)]), &[Some("x"), Some("y")])),
    ]);
    let output = encode(Format::Csv, &[whole.slice(1, 3), whole.slice(4, 1)]);
    assert_eq!(
        output,
        "s,v,l,i,d\n,short,l1,-1,y\n\"two,2\",,l2,,\nthree,\"\",,3,y\nfour,\"last one, long enough to be out of line\",l4,4,x\n"
    );
}

#[test]
fn dictionaries_with_null_keys_null_values_and_unused_values() {
    let values = [Some("unused"), Some("android"), None, Some("needs \"quotes\""), Some("ios"), Some("")];
    let keys = int8_keys(&[Some(1), None, Some(4), Some(2), Some(3), Some(1), Some(5)]);
    let int64_keys = Int64Array::from(vec![Some(4), Some(4), None, Some(0), Some(1), Some(1), Some(5)]);
    let output = encode(
        Format::Csv,
        &[batch(vec![
            ("os", dictionary(keys, &values)),
            ("wide_keys", dictionary::<Int64Type>(int64_keys, &values)),
        ])],
    );
    assert_eq!(
        output,
        "os,wide_keys\nandroid,ios\n,ios\nios,\n,unused\n\"needs \"\"quotes\"\"\",android\nandroid,android\n\"\",\"\"\n"
    );
}

#[test]
fn dictionaries_with_every_key_type() {
    // Each of Arrow's eight key types, with a null key, in both ways of rendering a dictionary
    // (values first when there are no more of them than rows, row by row otherwise).
    fn column<K: arrow::datatypes::ArrowDictionaryKeyType>(
        keys: &[Option<usize>],
        values: &[Option<&str>],
    ) -> ArrayRef {
        use arrow::datatypes::ArrowNativeType;
        let keys = keys.iter().map(|key| key.map(|key| K::Native::from_usize(key).unwrap()));
        dictionary::<K>(arrow::array::PrimitiveArray::<K>::from_iter(keys), values)
    }
    use arrow::datatypes::{Int8Type, Int16Type, Int32Type, UInt8Type, UInt32Type, UInt64Type};
    let keys = [Some(1), None, Some(0), Some(1)];
    for values in
        [&[Some("ios"), Some("android, tv")][..], &[Some("ios"), Some("android, tv"), None, None, None]]
    {
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("i8", column::<Int8Type>(&keys, values)),
            ("i16", column::<Int16Type>(&keys, values)),
            ("i32", column::<Int32Type>(&keys, values)),
            ("i64", column::<Int64Type>(&keys, values)),
            ("u8", column::<UInt8Type>(&keys, values)),
            ("u16", column::<UInt16Type>(&keys, values)),
            ("u32", column::<UInt32Type>(&keys, values)),
            ("u64", column::<UInt64Type>(&keys, values)),
        ];
        let row = |cell: &str| [cell; 8].join(",");
        let expected = [
            "i8,i16,i32,i64,u8,u16,u32,u64",
            &row("\"android, tv\""),
            &row(""),
            &row("ios"),
            &row("\"android, tv\""),
        ]
        .join("\n")
            + "\n";
        assert_eq!(encode(Format::Csv, &[batch(columns)]), expected, "{} values", values.len());
    }
}

#[test]
fn a_dictionary_whose_keys_are_not_integers_is_refused() {
    let keys_of_floats = DataType::Dictionary(Box::new(DataType::Float64), Box::new(DataType::Utf8));
    let schema = Schema::new(vec![Field::new("d", keys_of_floats, true)]);
    assert!(matches!(
        CsvEncoder::new(Vec::new(), &schema, EncoderOptions::default()),
        Err(FormatError::UnsupportedType { column, .. }) if column == "d"
    ));
}

#[test]
fn dictionary_larger_than_the_batch() {
    // More dictionary values than rows: rows are rendered one by one instead.
    let values: Vec<String> = (0..100).map(|i| format!("value {i}, quoted")).collect();
    let values: Vec<Option<&str>> = values.iter().map(|v| Some(v.as_str())).collect();
    let keys = arrow::array::UInt16Array::from(vec![Some(99), None, Some(7), Some(99)]);
    let column = dictionary::<UInt16Type>(keys, &values);
    let whole = batch(vec![("d", column)]);
    let output = encode(Format::Csv, &[whole.clone(), whole.slice(2, 1)]);
    assert_eq!(
        output,
        "d\n\"value 99, quoted\"\n\"\"\n\"value 7, quoted\"\n\"value 99, quoted\"\n\"value 7, quoted\"\n"
    );
}

#[test]
fn utf8_view_with_short_and_long_values() {
    let long = "a value that is longer than twelve bytes";
    let view = Arc::new(StringViewArray::from(vec![
        Some("short"),
        Some(long),
        Some("twelve bytes"),
        Some("thirteen byte"),
        None,
        Some(""),
    ]));
    let output = encode(Format::Csv, &[batch(vec![("v", view)])]);
    assert_eq!(output, format!("v\nshort\n{long}\ntwelve bytes\nthirteen byte\n\"\"\n\"\"\n"));
}

#[test]
fn large_utf8() {
    let large = Arc::new(LargeStringArray::from(vec![Some("a"), None, Some("b\nc")]));
    assert_eq!(encode(Format::Csv, &[batch(vec![("l", large)])]), "l\na\n\"\"\n\"b\nc\"\n");
}

#[test]
fn integers_of_every_width_and_their_extremes() {
    let output = encode(
        Format::Csv,
        &[batch(vec![
            ("i8", Arc::new(Int8Array::from(vec![Some(i8::MIN), Some(i8::MAX), None]))),
            ("i16", Arc::new(Int16Array::from(vec![Some(i16::MIN), Some(i16::MAX), Some(0)]))),
            ("i32", Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(i32::MAX), Some(-7)]))),
            ("i64", Arc::new(Int64Array::from(vec![Some(i64::MIN), Some(i64::MAX), Some(10)]))),
            ("u8", Arc::new(UInt8Array::from(vec![Some(0), Some(u8::MAX), Some(9)]))),
            ("u16", Arc::new(UInt16Array::from(vec![Some(0), Some(u16::MAX), None]))),
            ("u32", Arc::new(UInt32Array::from(vec![Some(0), Some(u32::MAX), Some(100)]))),
            (
                "u64",
                Arc::new(UInt64Array::from(vec![
                    Some(1 << 63),
                    Some(u64::MAX),
                    Some(18_000_000_000_000_000_000),
                ])),
            ),
        ])],
    );
    assert_eq!(
        output,
        "i8,i16,i32,i64,u8,u16,u32,u64\n\
         -128,-32768,-2147483648,-9223372036854775808,0,0,0,9223372036854775808\n\
         127,32767,2147483647,9223372036854775807,255,65535,4294967295,18446744073709551615\n\
         ,0,-7,10,9,,100,18000000000000000000\n"
    );
}

#[test]
fn null_booleans_and_floats() {
    let output = encode(
        Format::Csv,
        &[batch(vec![
            ("n", Arc::new(NullArray::new(3))),
            ("b", Arc::new(BooleanArray::from(vec![Some(true), Some(false), None]))),
            ("f", Arc::new(Float64Array::from(vec![Some(0.1), Some(1e300), Some(f64::NAN)]))),
            ("g", Arc::new(Float32Array::from(vec![Some(1.0), None, Some(f32::NEG_INFINITY)]))),
        ])],
    );
    assert_eq!(output, "n,b,f,g\n,true,0.1,1.0\n,false,1e300,\n,,NaN,-inf\n");
}

#[test]
fn unsupported_types_are_named() {
    let schema =
        Schema::new(vec![Field::new("ok", DataType::Utf8, true), Field::new("day", DataType::Date32, true)]);
    let error = CsvEncoder::new(Vec::new(), &schema, EncoderOptions::default()).unwrap_err();
    assert!(
        matches!(&error, FormatError::UnsupportedType { column, data_type: DataType::Date32 } if column == "day")
    );
    assert_eq!(error.to_string(), "column `day` has type Date32, which cannot be exported");

    let nested = DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Binary));
    let schema = Schema::new(vec![Field::new("bin", nested, true)]);
    assert!(matches!(
        CsvEncoder::new(Vec::new(), &schema, EncoderOptions::default()),
        Err(FormatError::UnsupportedType { column, .. }) if column == "bin"
    ));
}

#[test]
fn a_batch_that_does_not_fit_writes_nothing() {
    let schema =
        Schema::new(vec![Field::new("a", DataType::Utf8, true), Field::new("b", DataType::Int64, true)]);
    let mut encoder = CsvEncoder::new(Vec::new(), &schema, EncoderOptions::default()).unwrap();

    let one_column = batch(vec![("a", strings(&[Some("x")]))]);
    let error = encoder.write_batch(&one_column).unwrap_err();
    assert!(matches!(error, FormatError::SchemaMismatch { expected: 2, found: 1 }), "{error}");

    let binary =
        batch(vec![("a", strings(&[Some("x")])), ("b", Arc::new(BinaryArray::from(vec![b"x".as_ref()])))]);
    let error = encoder.write_batch(&binary).unwrap_err();
    assert!(
        matches!(&error, FormatError::UnsupportedType { column, data_type: DataType::Binary } if column == "b")
    );

    let swapped =
        batch(vec![("a", Arc::new(Int64Array::from(vec![1]))), ("b", Arc::new(Int64Array::from(vec![1])))]);
    let error = encoder.write_batch(&swapped).unwrap_err();
    assert!(matches!(&error, FormatError::ColumnTypeMismatch { column, .. } if column == "a"), "{error}");
    assert_eq!(encoder.bytes_written(), 0);
    assert_eq!(encoder.rows_written(), 0);

    // Other types of the same kind, and all-null columns, fit.
    let fits = batch(vec![
        ("a", dictionary(int8_keys(&[Some(0)]), &[Some("d")])),
        ("b", Arc::new(UInt8Array::from(vec![7]))),
    ]);
    encoder.write_batch(&fits).unwrap();
    let nulls = batch(vec![("a", Arc::new(NullArray::new(1))), ("b", Arc::new(NullArray::new(1)))]);
    encoder.write_batch(&nulls).unwrap();
    assert_eq!(encoder.finish().unwrap(), b"a,b\nd,7\n,\n");
}

#[test]
fn counts_rows_and_bytes() {
    let batch = batch(vec![("a", strings(&[Some("x"), Some("yy")]))]);
    let mut encoder = CsvEncoder::new(Vec::new(), &batch.schema(), EncoderOptions::default()).unwrap();
    assert_eq!((encoder.rows_written(), encoder.bytes_written()), (0, 0));
    encoder.write_batch(&batch).unwrap();
    assert_eq!((encoder.rows_written(), encoder.bytes_written()), (2, 7));
    encoder.write_batch(&batch).unwrap();
    assert_eq!((encoder.rows_written(), encoder.bytes_written()), (4, 12));
    assert_eq!(encoder.finish().unwrap().len(), 12);
}

/// Records every `write` call, to see the output arrive in chunks.
#[derive(Debug, Default)]
struct Chunks(Vec<usize>, Vec<u8>, bool);

impl std::io::Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push(buf.len());
        self.1.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.2 = true;
        Ok(())
    }
}

#[test]
fn large_output_reaches_the_writer_in_chunks_before_finish() {
    let line = "x".repeat(999);
    let values: Vec<Option<&str>> = vec![Some(line.as_str()); 3000];
    let batch = batch(vec![("a", strings(&values))]);
    let mut encoder = CsvEncoder::new(Chunks::default(), &batch.schema(), EncoderOptions::default()).unwrap();
    encoder.write_batch(&batch).unwrap();
    assert_eq!(encoder.bytes_written(), 2 + 3000 * 1000);
    let chunks = encoder.finish().unwrap();
    assert!(chunks.2, "finish flushes the writer");
    assert!(chunks.0.len() >= 3, "{:?}", chunks.0);
    assert!(chunks.0.iter().all(|&len| len <= 1 << 21), "{:?}", chunks.0);
    let mut expected = String::from("a\n");
    for _ in 0..3000 {
        expected.push_str(&line);
        expected.push('\n');
    }
    assert_eq!(chunks.1, expected.as_bytes());
}

/// A writer that always fails.
#[derive(Debug)]
struct Broken;

impl std::io::Write for Broken {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn writer_errors_are_io_errors() {
    let batch = batch(vec![("a", strings(&[Some("x")]))]);
    let mut encoder = CsvEncoder::new(Broken, &batch.schema(), EncoderOptions::default()).unwrap();
    encoder.write_batch(&batch).unwrap();
    let error = encoder.finish().unwrap_err();
    assert!(matches!(&error, FormatError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe));
}

/// A writer whose bytes can be read while the encoder still holds it.
#[derive(Debug, Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn flush_hands_over_the_rows_so_far_but_nothing_before_the_first_batch() {
    for format in [Format::Csv, Format::Json] {
        let batch = batch(vec![("a", strings(&[Some("x"), None]))]);
        let sink = Shared::default();
        let options = EncoderOptions::default().with_bom(true);
        let mut encoder = Encoder::new(format, sink.clone(), &batch.schema(), options).unwrap();
        encoder.flush().unwrap();
        assert!(sink.0.borrow().is_empty(), "{format}: nothing before the first batch");
        encoder.write_batch(&batch).unwrap();
        assert!(sink.0.borrow().is_empty(), "{format}: small output stays buffered");
        encoder.flush().unwrap();
        let after_flush = sink.0.borrow().clone();
        encoder.write_batch(&batch).unwrap();
        encoder.finish().unwrap();
        let unflushed = encode_with(format, &batch.schema(), &[batch.clone(), batch.clone()], options);
        assert_eq!(sink.0.borrow().as_slice(), unflushed.as_slice(), "{format}: flushing changes no byte");
        assert!(after_flush.len() > 3 && unflushed.starts_with(&after_flush), "{format}");
    }
}

#[test]
fn take_buffered_takes_what_flush_would_write_and_the_writer_gets_the_rest() {
    // A batch of 1.5 MB: the encoder hands its first megabyte to the writer by itself.
    let long = "x,\"y\"\n".repeat(20_000);
    let big = batch(vec![("a", strings(&[Some(long.as_str()); 12]))]);
    let small = batch(vec![("a", strings(&[Some("x"), None]))]);
    for format in [Format::Csv, Format::Json] {
        let sink = Shared::default();
        let options = EncoderOptions::default().with_bom(true);
        let mut encoder = Encoder::new(format, sink.clone(), &big.schema(), options).unwrap();
        assert!(encoder.take_buffered(Vec::new()).is_empty(), "{format}: nothing before the first batch");
        // The output in the order a caller sends it: what the writer got, then what was taken.
        let mut sent = Vec::new();
        let send = |sent: &mut Vec<u8>, taken: Vec<u8>, sink: &Shared| {
            sent.append(&mut sink.0.borrow_mut());
            sent.extend_from_slice(&taken);
        };
        encoder.write_batch(&small).unwrap();
        let taken = encoder.take_buffered(Vec::new());
        assert!(sink.0.borrow().is_empty() && !taken.is_empty(), "{format}: the first rows are taken");
        // The buffer given back, still holding its bytes, is emptied before it is written to.
        let given_back = taken.clone();
        send(&mut sent, taken, &sink);
        encoder.write_batch(&big).unwrap();
        encoder.write_batch(&small).unwrap();
        assert!(sink.0.borrow().len() >= 1 << 20, "{format}: the writer got the first megabyte");
        let taken = encoder.take_buffered(given_back);
        assert!(!taken.is_empty(), "{format}: the rows after it are taken");
        send(&mut sent, taken, &sink);
        assert!(encoder.take_buffered(Vec::new()).is_empty(), "{format}: nothing is taken twice");
        assert_eq!(encoder.bytes_written(), sent.len() as u64, "{format}: taken bytes are counted");
        encoder.write_batch(&small).unwrap();
        encoder.finish().unwrap();
        send(&mut sent, Vec::new(), &sink);
        let batches = [small.clone(), big.clone(), small.clone(), small.clone()];
        let whole = encode_with(format, &big.schema(), &batches, options);
        assert_eq!(sent, whole, "{format}: taking changes no byte and no order");
    }
}
