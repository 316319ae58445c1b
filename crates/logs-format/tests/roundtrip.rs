//! Property tests: what the encoders write, standard parsers (the `csv` crate, `serde_json`)
//! read back to the same values, also after the output was split into lines the way Python's
//! `str.splitlines` does; the exact bytes equal those of a naive reference encoder written
//! from the documented rules; and the CSV equals `arrow::csv::Writer`'s output when no value is
//! an empty string or holds a line break other than CR and LF (where the two rules differ).

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, Int16Array, Int64Array, LargeStringArray, StringArray, StringViewArray,
    UInt64Array,
};
use arrow::datatypes::{Field, Int16Type, Schema};
use arrow::record_batch::RecordBatch;
use logs_format::{Encoder, EncoderOptions, Format, JsonIntegers};
use proptest::prelude::*;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

const NAMES: [&str; 7] = ["text", "view \"v\"", "large,l", "dict\nd", "ts", "device_id", "small"];

/// The value of one cell as a test expects it.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    Null,
    Text(String),
    Integer(i128),
}

#[derive(Debug, Clone)]
struct Row {
    text: Option<String>,
    view: Option<String>,
    large: Option<String>,
    dict: Option<usize>,
    ts: Option<i64>,
    device_id: Option<u64>,
    small: Option<i16>,
}

#[derive(Debug, Clone)]
struct Table {
    pool: Vec<String>,
    rows: Vec<Row>,
    cuts: Vec<usize>,
    bom: bool,
    integers: JsonIntegers,
}

/// The line breaks of Python's `str.splitlines`.
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}'..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `text.splitlines(keepends=True)`: CR LF stays one break.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if is_line_break(c) {
            let mut end = at + c.len_utf8();
            if c == '\r' && chars.peek().map(|&(_, next)| next) == Some('\n') {
                chars.next();
                end += 1;
            }
            lines.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// CSV records as a reader over split lines sees them (Python's `csv.reader` over
/// `splitlines(keepends=True)`): a line ends a record unless it ends inside quotes.
fn records_of_lines(text: &str) -> Vec<String> {
    let mut records = Vec::new();
    let mut record = String::new();
    for line in split_lines(text) {
        record.push_str(line);
        if record.matches('"').count().is_multiple_of(2) {
            records.push(std::mem::take(&mut record));
        }
    }
    assert!(record.is_empty(), "the output ends inside quotes");
    records
}

fn text() -> impl Strategy<Value = String> {
    let interesting = prop::sample::select(vec![
        'a', 'Z', '0', ' ', ',', ';', '"', '\'', '\r', '\n', '\t', '\\', '/', '\u{0}', '\u{1}', '\u{1f}',
        '\u{7f}', 'é', '✓', '😀', '\u{2028}', '\u{2029}', '\u{85}', '\u{b}', '\u{c}', '\u{1c}', '\u{1d}',
        '\u{1e}', '£', '—',
    ]);
    prop::collection::vec(prop_oneof![4 => interesting, 1 => any::<char>()], 0..40)
        .prop_map(|chars| chars.into_iter().collect())
}

fn table() -> impl Strategy<Value = Table> {
    let int64 = prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0), Just(-1), any::<i64>()];
    let uint64 = prop_oneof![Just(u64::MAX), Just(1 << 63), Just(0), any::<u64>()];
    let small = prop_oneof![Just(i16::MIN), Just(i16::MAX), any::<i16>()];
    (prop::collection::vec(text(), 1..6), 0..60usize).prop_flat_map(move |(pool, len)| {
        let pool_len = pool.len();
        let row = (
            prop::option::weighted(0.8, text()),
            prop::option::weighted(0.8, text()),
            prop::option::weighted(0.8, text()),
            prop::option::weighted(0.8, 0..pool_len),
            prop::option::weighted(0.8, int64.clone()),
            prop::option::weighted(0.8, uint64.clone()),
            prop::option::weighted(0.8, small.clone()),
        )
            .prop_map(|(text, view, large, dict, ts, device_id, small)| Row {
                text,
                view,
                large,
                dict,
                ts,
                device_id,
                small,
            });
        let integers = prop::sample::select(JsonIntegers::ALL.to_vec());
        (
            Just(pool),
            prop::collection::vec(row, len),
            prop::collection::vec(0..=len, 0..6),
            any::<bool>(),
            integers,
        )
            .prop_map(|(pool, rows, cuts, bom, integers)| Table { pool, rows, cuts, bom, integers })
    })
}

impl Table {
    fn expected(&self) -> Vec<Vec<Expected>> {
        let text = |value: &Option<String>| value.clone().map_or(Expected::Null, Expected::Text);
        let int = |value: Option<i128>| value.map_or(Expected::Null, Expected::Integer);
        self.rows
            .iter()
            .map(|row| {
                vec![
                    text(&row.text),
                    text(&row.view),
                    text(&row.large),
                    text(&row.dict.map(|key| self.pool[key].clone())),
                    int(row.ts.map(i128::from)),
                    int(row.device_id.map(i128::from)),
                    int(row.small.map(i128::from)),
                ]
            })
            .collect()
    }

    /// The rows as one batch, cut into slices at `cuts`.
    fn batches(&self) -> Vec<RecordBatch> {
        let strings = |get: fn(&Row) -> &Option<String>| self.rows.iter().map(get).map(Option::as_deref);
        let dictionary = DictionaryArray::<Int16Type>::try_new(
            Int16Array::from_iter(self.rows.iter().map(|row| row.dict.map(|key| key as i16))),
            Arc::new(StringArray::from_iter_values(&self.pool)),
        )
        .unwrap();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter(strings(|row| &row.text))),
            Arc::new(StringViewArray::from_iter(strings(|row| &row.view))),
            Arc::new(LargeStringArray::from_iter(strings(|row| &row.large))),
            Arc::new(dictionary),
            Arc::new(Int64Array::from_iter(self.rows.iter().map(|row| row.ts))),
            Arc::new(UInt64Array::from_iter(self.rows.iter().map(|row| row.device_id))),
            Arc::new(Int16Array::from_iter(self.rows.iter().map(|row| row.small))),
        ];
        let fields: Vec<Field> = NAMES
            .iter()
            .zip(&columns)
            .map(|(name, column)| Field::new(*name, column.data_type().clone(), true))
            .collect();
        let whole = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let mut cuts = self.cuts.clone();
        cuts.extend([0, self.rows.len()]);
        cuts.sort_unstable();
        cuts.windows(2).map(|cut| whole.slice(cut[0], cut[1] - cut[0])).collect()
    }

    fn encode(&self, format: Format) -> Vec<u8> {
        let batches = self.batches();
        let options = EncoderOptions::default().with_bom(self.bom).with_json_integers(self.integers);
        let mut encoder = Encoder::new(format, Vec::new(), &batches[0].schema(), options).unwrap();
        for batch in &batches {
            encoder.write_batch(batch).unwrap();
        }
        assert_eq!(encoder.rows_written(), self.rows.len() as u64);
        let output = encoder.finish().unwrap();
        // Only CSV starts with the byte order mark; JSON never does.
        if self.bom && format == Format::Csv {
            assert!(output.starts_with(b"\xEF\xBB\xBF"));
            output[3..].to_vec()
        } else {
            assert!(!output.starts_with(b"\xEF"));
            output
        }
    }
}

/// CSV by the documented rules, one `format!` at a time.
fn reference_csv(rows: &[Vec<Expected>]) -> String {
    fn field(value: &str) -> String {
        if value.is_empty() {
            "\"\"".to_owned()
        } else if value.contains([',', '"']) || value.contains(is_line_break) {
            format!("\"{}\"", value.replace('"', "\"\""))
        } else {
            value.to_owned()
        }
    }
    let mut out = NAMES.map(field).join(",") + "\n";
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .map(|cell| match cell {
                Expected::Null => String::new(),
                Expected::Text(text) => field(text),
                Expected::Integer(value) => value.to_string(),
            })
            .collect();
        out += &(cells.join(",") + "\n");
    }
    out
}

/// JSON by the documented rules, one character at a time.
fn reference_json(rows: &[Vec<Expected>], integers: JsonIntegers) -> String {
    fn string(value: &str) -> String {
        let mut out = String::from("\"");
        for c in value.chars() {
            match c {
                '"' => out += "\\\"",
                '\\' => out += "\\\\",
                '\n' => out += "\\n",
                '\r' => out += "\\r",
                '\t' => out += "\\t",
                '\u{8}' => out += "\\b",
                '\u{c}' => out += "\\f",
                c if (c as u32) < 0x20 || is_line_break(c) => out += &format!("\\u{:04x}", c as u32),
                c => out.push(c),
            }
        }
        out + "\""
    }
    let records: Vec<String> = rows
        .iter()
        .map(|row| {
            let members: Vec<String> = NAMES
                .iter()
                .zip(row)
                .map(|(name, cell)| {
                    let value = match cell {
                        Expected::Null => "null".to_owned(),
                        Expected::Text(text) => string(text),
                        Expected::Integer(value) if integers == JsonIntegers::Strings => {
                            format!("\"{value}\"")
                        }
                        Expected::Integer(value) => value.to_string(),
                    };
                    format!("{}:{value}", string(name))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        })
        .collect();
    if records.is_empty() {
        "{\"data\":[]}\n".to_owned()
    } else {
        format!("{{\"data\":[\n{}\n]}}\n", records.join(",\n"))
    }
}

/// A JSON object with its members in the order they were written.
#[derive(Debug)]
struct Record(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Record, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Record;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Record(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    data: Vec<Record>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn csv_reads_back_to_the_same_values(table in table()) {
        let output = table.encode(Format::Csv);
        let expected = table.expected();
        prop_assert_eq!(String::from_utf8(output.clone()).unwrap(), reference_csv(&expected));

        let mut reader = csv::ReaderBuilder::new().from_reader(output.as_slice());
        prop_assert_eq!(reader.headers().unwrap().iter().collect::<Vec<_>>(), NAMES.to_vec());
        let records: Vec<csv::StringRecord> = reader.records().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(records.len(), expected.len());

        // Split into lines first, then parsed record by record: the same records, each line
        // break outside quotes being the LF that ends a record.
        let text = String::from_utf8(output.clone()).unwrap();
        let by_lines = records_of_lines(&text);
        prop_assert_eq!(by_lines.len(), expected.len() + 1);
        for (line, record) in by_lines[1..].iter().zip(&records) {
            prop_assert!(line.ends_with('\n'), "a record ends with LF: {:?}", line);
            // A first cell of our own, as the csv crate drops a BOM at the start of its input.
            let line = format!("_,{line}");
            let mut one = csv::ReaderBuilder::new().has_headers(false).from_reader(line.as_bytes());
            let parsed: Vec<csv::StringRecord> = one.records().collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(parsed.len(), 1);
            prop_assert_eq!(parsed[0].iter().skip(1).collect::<Vec<_>>(), record.iter().collect::<Vec<_>>());
        }
        for (record, row) in records.iter().zip(&expected) {
            for (field, cell) in record.iter().zip(row) {
                match cell {
                    // The csv crate reads both a null and an empty string as "".
                    Expected::Null => prop_assert_eq!(field, ""),
                    Expected::Text(text) => prop_assert_eq!(field, text),
                    Expected::Integer(value) => prop_assert_eq!(field.parse::<i128>().unwrap(), *value),
                }
            }
        }
    }

    #[test]
    fn json_reads_back_to_the_same_values(table in table()) {
        let output = table.encode(Format::Json);
        let expected = table.expected();
        let text = String::from_utf8(output.clone()).unwrap();
        prop_assert_eq!(&text, &reference_json(&expected, table.integers));
        // One record per line, whatever line breaks the values hold.
        let lines = split_lines(&text);
        prop_assert_eq!(lines.len(), if expected.is_empty() { 1 } else { expected.len() + 2 });

        let document: Document = serde_json::from_slice(&output).unwrap();
        prop_assert_eq!(document.data.len(), expected.len());
        for (record, row) in document.data.iter().zip(&expected) {
            let keys: Vec<&str> = record.0.iter().map(|(key, _)| key.as_str()).collect();
            prop_assert_eq!(keys, NAMES.to_vec());
            for ((_, value), cell) in record.0.iter().zip(row) {
                match cell {
                    Expected::Null => prop_assert_eq!(value, &Value::Null),
                    Expected::Text(text) => prop_assert_eq!(value.as_str(), Some(text.as_str())),
                    Expected::Integer(value_i128) => {
                        let parsed = match table.integers {
                            JsonIntegers::Strings => value.as_str().and_then(|s| s.parse::<i128>().ok()),
                            JsonIntegers::Numbers => value.as_i64().map(i128::from).or(value.as_u64().map(i128::from)),
                        };
                        prop_assert_eq!(parsed, Some(*value_i128));
                    }
                }
            }
        }
    }

    #[test]
    fn csv_matches_arrow_writer_without_empty_strings(mut table in table()) {
        // arrow's writer quotes only comma, quote, CR and LF.
        let arrow_rules = |value: &mut Option<String>| {
            if let Some(text) = value {
                *text = text.replace(|c: char| is_line_break(c) && c != '\r' && c != '\n', "-");
            }
            if value.as_deref() == Some("") {
                *value = Some("-".to_owned());
            }
        };
        for row in &mut table.rows {
            arrow_rules(&mut row.text);
            arrow_rules(&mut row.view);
            arrow_rules(&mut row.large);
        }
        for value in &mut table.pool {
            let mut cell = Some(std::mem::take(value));
            arrow_rules(&mut cell);
            *value = cell.unwrap_or_default();
        }
        table.bom = false;
        let ours = table.encode(Format::Csv);

        let batches = table.batches();
        let mut theirs = Vec::new();
        let mut writer = arrow::csv::WriterBuilder::new().with_header(true).build(&mut theirs);
        for batch in &batches {
            writer.write(batch).unwrap();
        }
        drop(writer);
        prop_assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(theirs).unwrap());
    }
}
