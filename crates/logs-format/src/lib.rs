//! Streaming encoders from Arrow [`RecordBatch`]es to CSV, JSON, NDJSON, Parquet and the Arrow
//! IPC stream format.
//!
//! An [`Encoder`] (or directly a [`CsvEncoder`], [`JsonEncoder`], [`ParquetEncoder`] or
//! [`ArrowEncoder`]) writes into any
//! [`std::io::Write`]: call [`Encoder::write_batch`] for each batch as it arrives and
//! [`Encoder::finish`] at the end. Output collects in an internal buffer that is handed to the
//! writer in chunks of about 1 MiB and at `finish`; dropping an encoder without calling
//! `finish` loses what is still buffered. After an error the output is incomplete and the
//! encoder should be dropped.
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, StringArray};
//! use arrow::datatypes::{DataType, Field, Schema};
//! use arrow::record_batch::RecordBatch;
//! use logs_format::{Encoder, EncoderOptions, Format};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("error_name", DataType::Utf8, true),
//!     Field::new("error_timestamp", DataType::Int64, true),
//! ]));
//! let batch = RecordBatch::try_new(schema.clone(), vec![
//!     Arc::new(StringArray::from(vec![Some("NullPointer, again"), None])),
//!     Arc::new(Int64Array::from(vec![Some(1_700_000_000), None])),
//! ])?;
//!
//! let mut csv = Encoder::new(Format::Csv, Vec::new(), &schema, EncoderOptions::default())?;
//! csv.write_batch(&batch)?;
//! let csv = csv.finish()?;
//! assert_eq!(csv, b"error_name,error_timestamp\n\"NullPointer, again\",1700000000\n,\n");
//!
//! let mut json = Encoder::new(Format::Json, Vec::new(), &schema, EncoderOptions::default())?;
//! json.write_batch(&batch)?;
//! let json = json.finish()?;
//! assert_eq!(
//!     String::from_utf8(json)?,
//!     "{\"data\":[\n\
//!      {\"error_name\":\"NullPointer, again\",\"error_timestamp\":\"1700000000\"},\n\
//!      {\"error_name\":null,\"error_timestamp\":null}\n\
//!      ]}\n"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Columns
//!
//! The schema given to `new` fixes the columns: their names (used verbatim, escaped as the
//! format requires, in the CSV header and as JSON keys) and their order. Every batch must have
//! the same number of columns ([`FormatError::SchemaMismatch`]) and each column must be of
//! the same kind as its field — text, integer, boolean or float — though not necessarily of
//! the same Arrow type: a dictionary-encoded batch column may stand for a `Utf8View` field
//! ([`FormatError::ColumnTypeMismatch`]). A column of type `Null` fits any field.
//!
//! Supported types: `Utf8`, `LargeUtf8`, `Utf8View`; `Int8`…`Int64`, `UInt8`…`UInt64`; `Null`;
//! `Boolean`, `Float32`, `Float64`; and `Dictionary` with any integer key type whose values
//! are one of those. Any other type, in the schema or in a batch, is
//! [`FormatError::UnsupportedType`], naming the column. Sliced arrays and null bitmaps are
//! respected; a dictionary value that is null counts as a null.
//!
//! # Byte order mark
//!
//! With [`EncoderOptions::bom`], the bytes EF BB BF come first in CSV. Every other format
//! ignores the option and never starts with them: RFC 8259 §8.1 forbids it in JSON, standard
//! parsers (Python's `json`, `requests`' `.json()`) refuse such a body, and a binary format
//! must begin with its own magic bytes.
//!
//! # CSV
//!
//! - A header row of the column names, then one line per row. Every line, the header and the
//!   last row included, ends with LF (`\n`). Zero rows give the header alone.
//! - RFC 4180 quoting, extended to every line break: a value containing a comma, a double
//!   quote, or a line break of Python's `str.splitlines` (CR, LF, VT, FF, U+001C..U+001E, NEL
//!   U+0085, U+2028, U+2029) is enclosed in double quotes, with each inner double quote
//!   doubled, so that a reader that splits the body into lines before parsing it still gets
//!   whole records. Nothing else is quoted: leading and trailing spaces, tabs and all other
//!   characters are written as they are. Column names in the header follow the same rule.
//! - A null is an empty cell. An empty string is written as `""`, so that it stays
//!   distinguishable from a null (as DuckDB and PostgreSQL do).
//! - No record is an empty line, which readers skip (pandas) or read as a record without
//!   cells (Python's `csv`): in a one-column output, a null is written as `""`, like an empty
//!   string. With two or more columns a line always holds at least a comma.
//! - Integers in decimal; booleans as `true`/`false`; floats in Rust's shortest round-trip
//!   form (`0.1`, `1.0`, `1e300`), non-finite ones as `NaN`, `inf`, `-inf`.
//!
//! # JSON
//!
//! - One object: `{"data":[`, the records, `]}`, then a final `\n`. Each record sits on its own
//!   line: the first is preceded by `\n`, each following one by `,\n`, and after the last comes
//!   `\n]}\n`. Zero rows give `{"data":[]}` and `\n`.
//! - A record is an object with one key per column, in schema order, without spaces:
//!   `{"a":1,"b":"x"}`.
//! - Strings are escaped per RFC 8259: `"` as `\"`, `\` as `\\`, the control characters
//!   U+0000..U+001F as `\b` `\f` `\n` `\r` `\t` or `\u00XX` (lowercase hex). The line breaks
//!   NEL, U+2028 and U+2029 are escaped too (`\u0085`, `\u2028`, `\u2029`), so that each
//!   record stays on one line even for a reader that splits lines at them. Everything else —
//!   non-ASCII characters, `/`, U+007F — is written as UTF-8 as it is.
//! - Integers are exact over the whole range: by default as quoted strings
//!   (`"18446744073709551615"`), as the original API writes them, so that a reader that parses
//!   numbers as doubles cannot round them; with [`JsonIntegers::Numbers`] as JSON numbers.
//!   Null is `null`, booleans `true`/`false`. Finite floats are numbers in Rust's shortest
//!   round-trip form; NaN and the infinities are `null`.
//!
//! # NDJSON
//!
//! The records of the JSON format, written by the same code with the same rules, each followed
//! by `\n` and nothing else: no enclosing object, no separating comma. Zero rows give an empty
//! output.
//!
//! # Parquet and Arrow
//!
//! Typed formats: each column keeps its type, in the form widely used readers take (pyarrow,
//! pandas 1.5 and newer, Polars, DuckDB). Texts of any Arrow form are written as `Utf8` in
//! Arrow, and as `BYTE_ARRAY` annotated `STRING` in Parquet (from the batch's own form, without
//! the Arrow schema in the footer); integers, booleans and floats keep their Arrow
//! type (`UInt64` is Parquet's `INT64` annotated unsigned); every column is nullable; a column
//! of type `Null` is written as a text column of nulls, and a batch column of type `Null` as
//! nulls of its field's type. Column names are used verbatim.
//!
//! - [`ParquetEncoder`]: one Parquet file, zstd-compressed, with statistics, the page index
//!   and row groups written as they fill (at most [`ROW_GROUP_ROWS`] rows, about
//!   [`ROW_GROUP_BYTES`]), encoded on two threads; the footer is written by `finish`. Memory
//!   holds about one row group (two of narrow rows, each of at most 16 MiB of values).
//! - [`ArrowEncoder`]: the Arrow IPC stream format (the schema message, one record batch
//!   message per batch, uncompressed, then the end-of-stream marker written by `finish`).
//!
//! # A broken output
//!
//! An encoder dropped without `finish` (after a failure) leaves a Parquet output without its
//! footer and an Arrow stream without its end-of-stream marker; but a stream cut between two
//! messages reads as complete to some readers. A caller whose output has already gone out in
//! part ends it with [`Format::broken_ending`]: bytes that every reader of the format refuses
//! (and that say, to a person, that the export failed).
//!
//! The CSV header, the JSON opening, the Parquet magic and the Arrow schema are written with the
//! first batch, or by `finish` if there is none; a batch that fails the checks above writes
//! nothing.
//!
//! # Speed
//!
//! Values are appended to the buffer without any per-value allocation: integers through a
//! two-digits-at-a-time formatter, text after a word-at-a-time scan for the bytes that need
//! quoting or escaping (most values have none and are copied in one piece; the lead bytes of
//! the multi-byte line breaks are checked one by one). Dictionary values
//! are rendered once per batch; each row then copies the bytes of its key.

mod column;
mod csv;
mod ipc;
mod json;
mod output;
mod parquet;
mod scan;
mod typed;

use std::fmt;
use std::io::Write;
use std::str::FromStr;

use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;

pub use crate::csv::CsvEncoder;
pub use crate::ipc::ArrowEncoder;
pub use crate::json::JsonEncoder;
pub use crate::parquet::{ParquetEncoder, ROW_GROUP_BYTES, ROW_GROUP_ROWS};

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Comma-separated values with a header row.
    Csv,
    /// One JSON object `{"data":[…]}`.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// One Parquet file.
    Parquet,
    /// The Arrow IPC stream format.
    Arrow,
}

impl Format {
    /// Every format, in a stable order.
    pub const ALL: [Format; 5] = [Format::Csv, Format::Json, Format::Ndjson, Format::Parquet, Format::Arrow];

    /// The lowercase name, which is also the file extension: `csv`, `json`, `ndjson`,
    /// `parquet` or `arrow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Ndjson => "ndjson",
            Format::Parquet => "parquet",
            Format::Arrow => "arrow",
        }
    }

    /// The names of every format, for error messages: `csv`, `json`, ….
    pub fn names() -> String {
        Format::ALL.map(|format| format!("`{format}`")).join(", ")
    }

    /// The file extension, without a dot.
    pub fn extension(self) -> &'static str {
        self.as_str()
    }

    /// The value of the HTTP `Content-Type` header.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json; charset=utf-8",
            Format::Ndjson => "application/x-ndjson; charset=utf-8",
            Format::Parquet => "application/vnd.apache.parquet",
            Format::Arrow => "application/vnd.apache.arrow.stream",
        }
    }

    /// Whether HTTP content coding (gzip) is worth applying: not to Parquet, whose pages are
    /// compressed already.
    pub fn compressible(self) -> bool {
        self != Format::Parquet
    }

    /// What ends an output of this format that failed after some of it had gone out, so that
    /// no reader takes it for complete (empty for CSV and JSON: a JSON output without its
    /// closing `]}` is refused as it is, and CSV has no ending that readers refuse).
    ///
    /// - NDJSON: a last line that is not JSON.
    /// - Arrow: the start of a message whose metadata would be 64 KiB long, which the reader
    ///   finds cut short (the encoder hands over whole messages, so this follows one).
    /// - Parquet: any last four bytes but `PAR1` make the footer unreadable.
    pub fn broken_ending(self) -> &'static [u8] {
        match self {
            Format::Csv | Format::Json => b"",
            Format::Ndjson | Format::Parquet => BROKEN_MESSAGE,
            Format::Arrow => BROKEN_ARROW,
        }
    }
}

/// The text at the end of a broken output.
const BROKEN_MESSAGE: &[u8] = b"logs-export: the export failed; this output is incomplete\n";

/// An IPC continuation marker, a metadata length of 64 KiB, then [`BROKEN_MESSAGE`].
const BROKEN_ARROW: &[u8] =
    b"\xFF\xFF\xFF\xFF\x00\x00\x01\x00logs-export: the export failed; this output is incomplete\n";

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = ParseFormatError;

    /// Parses a format's name (lowercase, as in the export URL).
    fn from_str(s: &str) -> Result<Format, ParseFormatError> {
        Format::ALL
            .into_iter()
            .find(|format| format.as_str() == s)
            .ok_or_else(|| ParseFormatError(s.to_owned()))
    }
}

/// A name that is no format's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format `{0}`: expected one of {names}", names = Format::names())]
pub struct ParseFormatError(pub String);

/// Options of the encoders. Build with `EncoderOptions::default()` and struct update syntax
/// or the `with_` methods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderOptions {
    /// Start a CSV output with the UTF-8 byte order mark EF BB BF. The other formats never
    /// start with one (see the [crate documentation](crate#byte-order-mark)).
    pub bom: bool,
    /// How JSON and NDJSON write integers.
    pub json_integers: JsonIntegers,
}

impl EncoderOptions {
    /// These options with `bom` set.
    pub fn with_bom(mut self, bom: bool) -> EncoderOptions {
        self.bom = bom;
        self
    }

    /// These options with `json_integers` set.
    pub fn with_json_integers(mut self, json_integers: JsonIntegers) -> EncoderOptions {
        self.json_integers = json_integers;
        self
    }
}

/// How the JSON and NDJSON outputs write integer values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum JsonIntegers {
    /// As quoted decimal strings (`"18446744073709551615"`), as the original API does. Exact in
    /// every JSON reader, including those that parse numbers as doubles (JavaScript's
    /// `JSON.parse`), which would silently round a device id above 2^53 to another device's.
    #[default]
    Strings,
    /// As JSON numbers. Exact for readers with 64-bit integers (Python, Go, serde_json); a
    /// reader that parses numbers as doubles rounds values beyond 2^53.
    Numbers,
}

impl JsonIntegers {
    /// Both values, in a stable order.
    pub const ALL: [JsonIntegers; 2] = [JsonIntegers::Strings, JsonIntegers::Numbers];

    /// The setting's name: `string` or `number`.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonIntegers::Strings => "string",
            JsonIntegers::Numbers => "number",
        }
    }
}

impl fmt::Display for JsonIntegers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JsonIntegers {
    type Err = String;

    /// Parses `string` or `number`.
    fn from_str(s: &str) -> Result<JsonIntegers, String> {
        JsonIntegers::ALL.into_iter().find(|value| value.as_str() == s).ok_or_else(|| {
            format!("`{s}` is not a way to write JSON integers: expected `string` or `number`")
        })
    }
}

/// Why encoding failed.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The writer failed.
    #[error("writing the output failed: {0}")]
    Io(#[from] std::io::Error),
    /// A column's type cannot be encoded.
    #[error("column `{column}` has type {data_type}, which cannot be exported")]
    UnsupportedType { column: String, data_type: DataType },
    /// A record batch has a different number of columns than the schema.
    #[error("record batch has {found} columns but the schema has {expected}")]
    SchemaMismatch { expected: usize, found: usize },
    /// A column of a record batch holds a different kind of value than its schema field.
    #[error("column `{column}` has type {found} in the record batch but {expected} in the schema")]
    ColumnTypeMismatch { column: String, expected: DataType, found: DataType },
    /// The Parquet or Arrow writer failed for another reason than the writer's.
    #[error("encoding failed: {0}")]
    Encoding(String),
}

/// Any of the encoders, chosen at run time by [`Format`].
#[derive(Debug)]
pub struct Encoder<W: Write> {
    inner: Inner<W>,
}

#[derive(Debug)]
enum Inner<W: Write> {
    Csv(CsvEncoder<W>),
    Json(JsonEncoder<W>),
    Ndjson(JsonEncoder<W>),
    Parquet(ParquetEncoder<W>),
    Arrow(ArrowEncoder<W>),
}

/// `$call` on whichever encoder `$inner` holds.
macro_rules! each {
    ($inner:expr, $encoder:ident => $call:expr) => {
        match $inner {
            Inner::Csv($encoder) => $call,
            Inner::Json($encoder) | Inner::Ndjson($encoder) => $call,
            Inner::Parquet($encoder) => $call,
            Inner::Arrow($encoder) => $call,
        }
    };
}

impl<W: Write> Encoder<W> {
    /// Prepares to write batches of `schema` to `writer` in `format`. Nothing is written yet;
    /// fails if a field has an unsupported type.
    pub fn new(
        format: Format,
        writer: W,
        schema: &Schema,
        options: EncoderOptions,
    ) -> Result<Self, FormatError> {
        let inner = match format {
            Format::Csv => Inner::Csv(CsvEncoder::new(writer, schema, options)?),
            Format::Json => Inner::Json(JsonEncoder::new(writer, schema, options)?),
            Format::Ndjson => Inner::Ndjson(JsonEncoder::lines(writer, schema, options)?),
            Format::Parquet => Inner::Parquet(ParquetEncoder::new(writer, schema, options)?),
            Format::Arrow => Inner::Arrow(ArrowEncoder::new(writer, schema, options)?),
        };
        Ok(Encoder { inner })
    }

    /// The format being written.
    pub fn format(&self) -> Format {
        match self.inner {
            Inner::Csv(_) => Format::Csv,
            Inner::Json(_) => Format::Json,
            Inner::Ndjson(_) => Format::Ndjson,
            Inner::Parquet(_) => Format::Parquet,
            Inner::Arrow(_) => Format::Arrow,
        }
    }

    /// Encodes the rows of `batch`. If the batch does not fit the schema, an error is returned
    /// and nothing is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        each!(&mut self.inner, encoder => encoder.write_batch(batch))
    }

    /// Writes the rest of the output (header if no batch came, trailer), flushes and returns
    /// the writer.
    pub fn finish(self) -> Result<W, FormatError> {
        each!(self.inner, encoder => encoder.finish())
    }

    /// Ends the output of an export that failed: hands the writer what is encoded, then
    /// [`Format::broken_ending`], so that no reader takes the output for complete, and flushes
    /// it. Never writes a CSV header, JSON closing, Parquet footer or Arrow end-of-stream
    /// marker.
    pub fn abandon(self) -> Result<(), FormatError> {
        each!(self.inner, encoder => encoder.abandon())
    }

    /// Hands the rows encoded so far to the writer now instead of when the internal buffer
    /// (about 1 MiB) fills, and flushes the writer. Parquet hands over the row groups closed
    /// so far, once encoded: a flush never cuts a row group short.
    pub fn flush(&mut self) -> Result<(), FormatError> {
        each!(&mut self.inner, encoder => encoder.flush())
    }

    /// Takes the bytes encoded since they last reached the writer out of the encoder instead
    /// of writing them, and goes on encoding into `next` (emptied first). For a caller that
    /// passes the bytes on by value (the HTTP service sends each as a chunk of the body), this
    /// saves copying them into the writer; giving back the buffers it took once they are sent
    /// also saves allocating new ones. The bytes are those [`Encoder::flush`] would have
    /// written next, and [`Encoder::bytes_written`] counts them; before the first batch nothing
    /// is taken (the header waits, as for `flush`). The writer still gets what the encoder
    /// hands it by itself when its buffer passes about 1 MiB, and the rest of the output at
    /// [`Encoder::finish`].
    pub fn take_buffered(&mut self, next: Vec<u8>) -> Vec<u8> {
        each!(&mut self.inner, encoder => encoder.take_buffered(next))
    }

    /// Bytes encoded so far, including those still buffered; after `finish` this is the
    /// length of the output.
    pub fn bytes_written(&self) -> u64 {
        each!(&self.inner, encoder => encoder.bytes_written())
    }

    /// Rows encoded so far.
    pub fn rows_written(&self) -> u64 {
        each!(&self.inner, encoder => encoder.rows_written())
    }
}

/// Appends a float in Rust's shortest round-trip form (`Debug`: `0.1`, `1.0`, `1e300`).
fn write_float(out: &mut Vec<u8>, value: impl fmt::Debug) {
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{value:?}");
}
