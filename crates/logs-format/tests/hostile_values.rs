//! Hostile text through both encoders, beyond what `roundtrip.rs` generates:
//!
//! - every byte that forces CSV quoting or JSON escaping (NUL, lone CR, LF, `"`, `,`, `\`,
//!   U+001F), and multi-byte characters, at every position of values up to 40 bytes, alone
//!   and in pairs, so that each lands on every lane and both halves of the word-at-a-time scan;
//! - arbitrary bytes cut to their longest valid UTF-8 prefix, as values and as column names;
//! - values of a megabyte and more that cross the 1 MiB flush threshold, written through
//!   writers that take a few bytes at a time, that are interrupted, and that fail;
//! - column types that cannot be exported.
//!
//! The expected bytes come from a naive encoder written from the documented rules (crate
//! documentation, "CSV" and "JSON"), and the `csv` crate and `serde_json` must read back the
//! same values.

use std::io::{self, Write};
use std::sync::Arc;

use arrow::array::{ArrayRef, BinaryArray, LargeStringArray, StringArray, StringViewArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use logs_format::{Encoder, EncoderOptions, Format, FormatError};
use proptest::prelude::*;

/// The documented flush threshold: output reaches the writer in chunks of about this size.
const FLUSH_AT: usize = 1 << 20;

/// The formats whose output is text, compared here with a reference written by the test.
const TEXT_FORMATS: [Format; 3] = [Format::Csv, Format::Json, Format::Ndjson];

/// The line breaks of Python's `str.splitlines`.
const LINE_BREAKS: [char; 10] =
    ['\n', '\r', '\u{b}', '\u{c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}'];

// ---------------------------------------------------------------------------------------
// The reference: the documented rules, one value at a time
// ---------------------------------------------------------------------------------------

fn csv_field(value: &str) -> String {
    if value.is_empty() {
        "\"\"".to_owned()
    } else if value.contains([',', '"']) || value.contains(is_line_break) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_owned()
    }
}

/// The line breaks of Python's `str.splitlines`, which the CSV output quotes.
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}'..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn json_string(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || is_line_break(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text columns: their names and their rows (`None` is a null).
#[derive(Debug, Clone)]
struct Table {
    names: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

impl Table {
    fn reference(&self, format: Format) -> String {
        match format {
            Format::Csv => {
                let mut out = self.names.iter().map(|n| csv_field(n)).collect::<Vec<_>>().join(",") + "\n";
                for row in &self.rows {
                    let cells: Vec<String> =
                        row.iter().map(|cell| cell.as_deref().map(csv_field).unwrap_or_default()).collect();
                    let line = cells.join(",");
                    // A record is never an empty line: a lone null is written as `""`.
                    out += if line.is_empty() { "\"\"" } else { &line };
                    out += "\n";
                }
                out
            }
            Format::Json | Format::Ndjson => {
                let records: Vec<String> = self
                    .rows
                    .iter()
                    .map(|row| {
                        let members: Vec<String> = self
                            .names
                            .iter()
                            .zip(row)
                            .map(|(name, cell)| {
                                let value = cell.as_deref().map_or("null".to_owned(), json_string);
                                format!("{}:{value}", json_string(name))
                            })
                            .collect();
                        format!("{{{}}}", members.join(","))
                    })
                    .collect();
                match format {
                    Format::Ndjson => records.iter().map(|record| format!("{record}\n")).collect(),
                    _ if records.is_empty() => "{\"data\":[]}\n".to_owned(),
                    _ => format!("{{\"data\":[\n{}\n]}}\n", records.join(",\n")),
                }
            }
            Format::Parquet | Format::Arrow => unreachable!("text formats only"),
        }
    }

    /// The table as one batch, column `i` as Utf8, Utf8View or LargeUtf8 by `i % 3`.
    fn batch(&self) -> RecordBatch {
        let columns: Vec<ArrayRef> = (0..self.names.len())
            .map(|i| {
                let values = self.rows.iter().map(|row| row[i].as_deref());
                let array: ArrayRef = match i % 3 {
                    0 => Arc::new(StringArray::from_iter(values)),
                    1 => Arc::new(StringViewArray::from_iter(values)),
                    _ => Arc::new(LargeStringArray::from_iter(values)),
                };
                array
            })
            .collect();
        let fields: Vec<Field> = self
            .names
            .iter()
            .zip(&columns)
            .map(|(name, column)| Field::new(name, column.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// Encodes the table cut into batches at `cuts` and writes it through `writer`.
    fn encode<W: Write>(&self, format: Format, cuts: &[usize], writer: W) -> Result<W, FormatError> {
        let whole = self.batch();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (self.rows.len() + 1)).collect();
        bounds.extend([0, self.rows.len()]);
        bounds.sort_unstable();
        let mut encoder = Encoder::new(format, writer, &whole.schema(), EncoderOptions::default())?;
        for window in bounds.windows(2) {
            encoder.write_batch(&whole.slice(window[0], window[1] - window[0]))?;
        }
        assert_eq!(encoder.rows_written(), self.rows.len() as u64);
        encoder.finish()
    }

    /// Checks the output of both formats against the reference and the standard parsers.
    fn check(&self, cuts: &[usize]) {
        for format in TEXT_FORMATS {
            let output = self.encode(format, cuts, Vec::new()).unwrap();
            let text = String::from_utf8(output).expect("the output is UTF-8");
            if text != self.reference(format) {
                let at = text.bytes().zip(self.reference(format).bytes()).position(|(a, b)| a != b);
                panic!("{format} differs from the reference at byte {at:?} for {:?}", self.rows);
            }
            match format {
                Format::Csv => self.read_back_csv(&text),
                Format::Json => self.read_back_json(&text),
                _ => self.read_back_ndjson(&text),
            }
        }
    }

    fn read_back_csv(&self, text: &str) {
        let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
        assert_eq!(reader.headers().unwrap().iter().collect::<Vec<_>>(), self.names);
        let records: Vec<csv::StringRecord> = reader.records().collect::<Result<_, _>>().unwrap();
        assert_eq!(records.len(), self.rows.len(), "every record is read back");
        for (record, row) in records.iter().zip(&self.rows) {
            // The csv crate reads both a null and an empty string as "".
            let expected: Vec<&str> = row.iter().map(|cell| cell.as_deref().unwrap_or("")).collect();
            assert_eq!(record.iter().collect::<Vec<_>>(), expected);
        }
    }

    fn read_back_json(&self, text: &str) {
        let document: serde_json::Value = serde_json::from_str(text).unwrap();
        self.check_records(document["data"].as_array().unwrap());
    }

    /// Each line, as Python's `str.splitlines` would split it, is one record.
    fn read_back_ndjson(&self, text: &str) {
        let lines: Vec<&str> =
            text.split(|c: char| LINE_BREAKS.contains(&c)).filter(|l| !l.is_empty()).collect();
        let records: Vec<serde_json::Value> =
            lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        self.check_records(&records);
    }

    fn check_records(&self, data: &[serde_json::Value]) {
        assert_eq!(data.len(), self.rows.len());
        for (record, row) in data.iter().zip(&self.rows) {
            let record = record.as_object().unwrap();
            // Names may repeat after generation; the last one wins in a map.
            for (name, cell) in self.names.iter().zip(row).rev() {
                if self.names.iter().filter(|n| *n == name).count() > 1 {
                    continue;
                }
                assert_eq!(record[name].as_str(), cell.as_deref(), "{name}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Special bytes at every position
// ---------------------------------------------------------------------------------------

/// Characters that force quoting or escaping, or that a byte-level scan could get wrong.
const SPECIALS: [char; 24] = [
    '\0', '\r', '\n', '"', ',', '\\', '\t', '\u{1f}', '\u{7f}', '\u{8}', 'é', '✓', '😀', '\u{2028}', '\u{b}',
    '\u{c}', '\u{1c}', '\u{1e}', '\u{85}', '\u{2029}', '£', '—', '\u{2027}', '\u{84}',
];

fn filler(len: usize) -> String {
    (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

fn with_at(base: &str, inserts: &[(usize, char)]) -> String {
    let mut out = base.to_owned();
    // From the back, so earlier positions stay valid.
    for &(at, c) in inserts.iter().rev() {
        out.insert(at, c);
    }
    out
}

#[test]
fn one_special_character_at_every_position() {
    for len in 0..=40 {
        let base = filler(len);
        let mut rows = Vec::new();
        for special in SPECIALS {
            for at in 0..=len {
                let value = with_at(&base, &[(at, special)]);
                // The same value in three columns of three string types, and a null beside it.
                rows.push(vec![Some(value.clone()), Some(value.clone()), Some(value), None]);
            }
        }
        let table = Table { names: vec!["a".into(), "b".into(), "c".into(), "d".into()], rows };
        table.check(&[]);
        table.check(&[1, 7, 64]);
    }
}

#[test]
fn two_special_characters_at_every_pair_of_positions() {
    let base = filler(20);
    let specials = ['\0', '\r', '"', ',', '\n', 'é'];
    let mut rows = Vec::new();
    for (i, &first) in specials.iter().enumerate() {
        for &second in &specials[i..] {
            for a in 0..=20 {
                for b in a..=20 {
                    rows.push(vec![Some(with_at(&base, &[(a, first), (b, second)]))]);
                }
            }
        }
    }
    let table = Table { names: vec!["v".into()], rows };
    table.check(&[]);
}

#[test]
fn only_special_characters_and_empty_strings() {
    let mut rows: Vec<Vec<Option<String>>> = vec![vec![Some(String::new()), None, Some(String::new())]];
    for c in SPECIALS {
        for n in [1, 2, 7, 8, 9, 15, 16, 17, 33] {
            let value: String = std::iter::repeat_n(c, n).collect();
            rows.push(vec![Some(value.clone()), Some(String::new()), Some(value)]);
        }
    }
    let table = Table { names: vec![String::new(), "\0".into(), "\r\"".into()], rows };
    table.check(&[3]);
}

// ---------------------------------------------------------------------------------------
// Arbitrary bytes that are valid UTF-8
// ---------------------------------------------------------------------------------------

/// Arbitrary bytes, biased to the ones that matter, cut to their longest valid UTF-8 prefix.
fn utf8_from_bytes(max: usize) -> impl Strategy<Value = String> {
    let byte = prop_oneof![
        3 => prop::sample::select(vec![0u8, b'\r', b'\n', b'"', b',', b'\\', b'\t', 0x1f, 0x7f, b'a']),
        3 => 0u8..0x80,
        2 => any::<u8>(),
    ];
    prop::collection::vec(byte, 0..max).prop_map(|bytes| match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            String::from_utf8(e.into_bytes()[..valid].to_vec()).unwrap()
        }
    })
}

/// Like [`utf8_from_bytes`], with multi-byte characters mixed in so that values stay long.
fn hostile_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![3 => utf8_from_bytes(6), 1 => any::<char>().prop_map(String::from)],
        0..max / 4,
    )
    .prop_map(|parts| parts.concat())
}

fn table() -> impl Strategy<Value = Table> {
    (prop::collection::vec(hostile_text(12), 1..6), 0..24usize).prop_flat_map(|(mut names, len)| {
        // The csv crate drops a byte order mark that starts its input: a reader's quirk, and
        // the engine's column names are field names anyway.
        names[0] = names[0].trim_start_matches('\u{feff}').to_owned();
        let width = names.len();
        let row = prop::collection::vec(prop::option::weighted(0.85, hostile_text(64)), width);
        (Just(names), prop::collection::vec(row, len)).prop_map(|(names, rows)| Table { names, rows })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_utf8_reads_back_exactly(table in table(), cuts in prop::collection::vec(any::<usize>(), 0..4)) {
        table.check(&cuts);
    }
}

// ---------------------------------------------------------------------------------------
// Values beyond the flush threshold, and writers that misbehave
// ---------------------------------------------------------------------------------------

/// Records the size of every write; takes at most `max_write` bytes per call and answers
/// `Interrupted` to every `interrupt_every`th call when set.
#[derive(Debug, Default)]
struct Recorder {
    bytes: Vec<u8>,
    writes: Vec<usize>,
    max_write: Option<usize>,
    interrupt_every: Option<usize>,
    calls: usize,
}

impl Write for Recorder {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.interrupt_every.is_some_and(|n| self.calls.is_multiple_of(n)) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.max_write.unwrap_or(usize::MAX));
        self.bytes.extend_from_slice(&buf[..n]);
        self.writes.push(n);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Values of about a megabyte, each with special characters at its start, at the flush
/// threshold and at its end.
fn megabyte_table() -> Table {
    let value = |len: usize, special: char| {
        let mut text = filler(len);
        for at in [0, len / 2, FLUSH_AT.min(len), len] {
            text.insert(at.min(text.len()), special);
        }
        text
    };
    let rows = vec![
        vec![Some(value(FLUSH_AT - 1, '\r')), Some("x".into())],
        vec![Some(value(FLUSH_AT, '\0')), None],
        vec![Some(value(FLUSH_AT + 1, '"')), Some(value(17, '\n'))],
        vec![Some("small".into()), Some(value(3 * FLUSH_AT, ','))],
        vec![Some(String::new()), Some("é".repeat(FLUSH_AT / 2 + 1))],
    ];
    Table { names: vec!["error".into(), "error_json".into()], rows }
}

#[test]
fn megabyte_values_cross_the_flush_threshold_intact() {
    let table = megabyte_table();
    let longest_row =
        table.rows.iter().map(|row| row.iter().flatten().map(|v| 2 * v.len() + 40).sum::<usize>());
    let longest_row = longest_row.max().unwrap();
    for format in TEXT_FORMATS {
        let expected = table.reference(format);
        for cuts in [vec![], vec![1, 3], vec![2, 2, 4]] {
            let recorder = table.encode(format, &cuts, Recorder::default()).unwrap();
            assert!(recorder.bytes == expected.as_bytes(), "{format} with cuts {cuts:?}");
            // Chunks of at least the threshold, except the last; none beyond it by more than
            // one row (the buffer never holds a whole export).
            let (last, rest) = recorder.writes.split_last().unwrap();
            assert!(rest.iter().all(|&n| n >= FLUSH_AT), "{:?}", recorder.writes);
            assert!(*last > 0 && recorder.writes.iter().all(|&n| n <= FLUSH_AT + longest_row));
        }
        match format {
            Format::Csv => table.read_back_csv(&expected),
            Format::Json => table.read_back_json(&expected),
            _ => table.read_back_ndjson(&expected),
        }
    }
}

#[test]
fn short_and_interrupted_writes_change_nothing() {
    let table = megabyte_table();
    for format in TEXT_FORMATS {
        let expected = table.reference(format);
        let writer = Recorder { max_write: Some(4093), interrupt_every: Some(5), ..Recorder::default() };
        let recorder = table.encode(format, &[2], writer).unwrap();
        assert!(recorder.bytes == expected.as_bytes(), "{format}");
        assert!(recorder.writes.iter().all(|&n| n <= 4093));
    }
}

/// A writer that fails once it has taken `budget` bytes, as a full disk does.
#[derive(Debug)]
struct FullDisk {
    budget: usize,
}

impl Write for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.budget == 0 {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device"));
        }
        let n = buf.len().min(self.budget);
        self.budget -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_writer_is_an_error_not_a_panic() {
    let table = megabyte_table();
    for format in TEXT_FORMATS {
        for budget in [0, 1, FLUSH_AT - 1, FLUSH_AT, 2 * FLUSH_AT + 3] {
            match table.encode(format, &[1], FullDisk { budget }) {
                Err(FormatError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::StorageFull),
                other => panic!("{format} with {budget} bytes of room: {other:?}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Types that cannot be exported
// ---------------------------------------------------------------------------------------

#[test]
fn binary_columns_are_refused_by_name() {
    let bytes: Vec<&[u8]> = vec![b"\xff\xfe\0", b"", b"\xc3"];
    let binary: ArrayRef = Arc::new(BinaryArray::from(bytes));
    let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new("blob\n", DataType::Binary, true)]));
    for format in Format::ALL {
        match Encoder::new(format, Vec::new(), &schema, EncoderOptions::default()) {
            Err(FormatError::UnsupportedType { column, data_type }) => {
                assert_eq!((column.as_str(), data_type), ("blob\n", DataType::Binary));
            }
            other => panic!("{format}: {other:?}"),
        }
        // A text field fed a binary column: refused, and nothing written.
        let text: SchemaRef = Arc::new(Schema::new(vec![Field::new("t", DataType::Utf8, true)]));
        let mut encoder = Encoder::new(format, Vec::new(), &text, EncoderOptions::default()).unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("t", DataType::Binary, true)])),
            vec![binary.clone()],
        )
        .unwrap();
        assert!(encoder.write_batch(&batch).is_err(), "{format}");
        assert_eq!(encoder.rows_written(), 0);
    }
}
