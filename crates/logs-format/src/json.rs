//! JSON output: `{"data":[` records, one per line, `]}`; and NDJSON, the same records one per
//! line without the enclosing object (RFC 8259 string escaping; NEL, U+2028 and U+2029 escaped
//! too, so that no line break but the separators' splits a record).

use std::io::Write;
use std::ops::Range;

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;

use crate::column::{Cell, Columns};
use crate::output::Output;
use crate::scan::{JsonCandidate, Special, find_special, line_break_at, write_i64, write_u64};
use crate::{EncoderOptions, Format, FormatError, JsonIntegers};

/// Streams record batches as one JSON object `{"data":[…]}` with one record object per line,
/// or as NDJSON ([`JsonEncoder::lines`]). See the [crate documentation](crate) for the exact
/// rules.
pub struct JsonEncoder<W: Write> {
    output: Output<W>,
    framing: &'static Framing,
    columns: Columns,
    /// `"name":` for the first column and `,"name":` for the others, escaped once.
    key_bytes: Vec<u8>,
    keys: Vec<Range<usize>>,
    /// Integers as quoted strings ([`JsonIntegers::Strings`]).
    quote_integers: bool,
    rows: u64,
}

/// What surrounds the records.
struct Framing {
    format: Format,
    opening: &'static [u8],
    /// Before the first record's first key, and before each following one's.
    first: &'static [u8],
    next: &'static [u8],
    /// After each record.
    close: &'static [u8],
    /// After the last record, or at once if there is none.
    trailer: &'static [u8],
    empty_trailer: &'static [u8],
}

const JSON: Framing = Framing {
    format: Format::Json,
    opening: br#"{"data":["#,
    first: b"\n{",
    next: b",\n{",
    close: b"}",
    trailer: b"\n]}\n",
    empty_trailer: b"]}\n",
};

const NDJSON: Framing = Framing {
    format: Format::Ndjson,
    opening: b"",
    first: b"{",
    next: b"{",
    close: b"}\n",
    trailer: b"",
    empty_trailer: b"",
};

impl<W: Write> JsonEncoder<W> {
    /// Prepares to write batches of `schema` to `writer` as one JSON object. Nothing is
    /// written yet.
    pub fn new(writer: W, schema: &Schema, options: EncoderOptions) -> Result<Self, FormatError> {
        Self::framed(writer, schema, options, &JSON)
    }

    /// Prepares to write batches of `schema` to `writer` as NDJSON: the same records, each
    /// followed by `\n`, nothing around them. Nothing is written yet.
    pub fn lines(writer: W, schema: &Schema, options: EncoderOptions) -> Result<Self, FormatError> {
        Self::framed(writer, schema, options, &NDJSON)
    }

    fn framed(
        writer: W,
        schema: &Schema,
        options: EncoderOptions,
        framing: &'static Framing,
    ) -> Result<Self, FormatError> {
        let columns = Columns::new(schema)?;
        let mut key_bytes = Vec::new();
        let mut keys = Vec::new();
        for (index, name) in columns.names().enumerate() {
            let start = key_bytes.len();
            if index > 0 {
                key_bytes.push(b',');
            }
            write_string(&mut key_bytes, name.as_bytes());
            key_bytes.push(b':');
            keys.push(start..key_bytes.len());
        }
        // No byte order mark, whatever `options.bom` says: a JSON text must not begin with one
        // (RFC 8259 §8.1), and standard parsers refuse it.
        let quote_integers = options.json_integers == JsonIntegers::Strings;
        Ok(JsonEncoder {
            output: Output::new(writer, framing.opening.to_vec()),
            framing,
            columns,
            key_bytes,
            keys,
            quote_integers,
            rows: 0,
        })
    }

    /// Encodes the rows of `batch`, writing the opening `{"data":[` (JSON) first if this is the
    /// first batch. If the batch does not fit the schema, an error is returned and nothing is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        if self.quote_integers { self.write_rows::<true>(batch) } else { self.write_rows::<false>(batch) }
    }

    fn write_rows<const QUOTE_INTEGERS: bool>(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        let columns = self.columns.prepare(batch, write_value::<QUOTE_INTEGERS>)?;
        let output = &mut self.output;
        output.start();
        let framing = self.framing;
        let mut separator = if self.rows == 0 { framing.first } else { framing.next };
        for row in 0..batch.num_rows() {
            output.buf.extend_from_slice(separator);
            separator = framing.next;
            for (column, key) in columns.iter().zip(&self.keys) {
                output.buf.extend_from_slice(&self.key_bytes[key.clone()]);
                write_value::<QUOTE_INTEGERS>(&mut output.buf, column.cell(row));
            }
            output.buf.extend_from_slice(framing.close);
            output.flush_if_full()?;
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Closes the array and the object (JSON), flushes everything and returns the writer.
    pub fn finish(self) -> Result<W, FormatError> {
        let trailer = if self.rows == 0 { self.framing.empty_trailer } else { self.framing.trailer };
        Ok(self.output.finish(trailer)?)
    }

    /// Ends a failed output: see [`crate::Encoder::abandon`].
    pub fn abandon(mut self) -> Result<(), FormatError> {
        Ok(self.output.abandon(self.framing.format.broken_ending())?)
    }

    /// Hands the rows encoded so far to the writer now instead of when the buffer fills, and
    /// flushes the writer (for streaming a slow or small export as it goes).
    pub fn flush(&mut self) -> Result<(), FormatError> {
        Ok(self.output.flush()?)
    }

    /// See [`crate::Encoder::take_buffered`].
    pub fn take_buffered(&mut self, next: Vec<u8>) -> Vec<u8> {
        self.output.take(next)
    }

    /// Bytes encoded so far, including those still buffered.
    pub fn bytes_written(&self) -> u64 {
        self.output.bytes_written()
    }

    /// Records encoded so far.
    pub fn rows_written(&self) -> u64 {
        self.rows
    }
}

impl<W: Write> std::fmt::Debug for JsonEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonEncoder")
            .field("output", &self.output)
            .field("columns", &self.columns)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

/// Appends one JSON value; integers as quoted strings when `QUOTE_INTEGERS`.
pub(crate) fn write_value<const QUOTE_INTEGERS: bool>(out: &mut Vec<u8>, cell: Cell<'_>) {
    match cell {
        Cell::Null => out.extend_from_slice(b"null"),
        Cell::Text(text) => write_string(out, text),
        Cell::Signed(value) if QUOTE_INTEGERS => {
            out.push(b'"');
            write_i64(out, value);
            out.push(b'"');
        }
        Cell::Unsigned(value) if QUOTE_INTEGERS => {
            out.push(b'"');
            write_u64(out, value);
            out.push(b'"');
        }
        Cell::Signed(value) => write_i64(out, value),
        Cell::Unsigned(value) => write_u64(out, value),
        Cell::Boolean(value) => out.extend_from_slice(if value { b"true" } else { b"false" }),
        Cell::Float32(value) if value.is_finite() => crate::write_float(out, value),
        Cell::Float64(value) if value.is_finite() => crate::write_float(out, value),
        Cell::Float32(_) | Cell::Float64(_) => out.extend_from_slice(b"null"),
        Cell::Rendered(bytes) => out.extend_from_slice(bytes),
    }
}

/// Appends `text` (valid UTF-8) as a JSON string. `"`, `\`, U+0000..U+001F and the line
/// breaks NEL, U+2028 and U+2029 are escaped; every other character is copied as is.
fn write_string(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut copied = 0;
    while let Some(special) = find_special::<JsonCandidate>(text, copied) {
        out.extend_from_slice(&text[copied..special]);
        let byte = text[special];
        copied = special + 1;
        if byte < 0x80 {
            write_escape(out, byte);
            // Escapes come in runs (`\n\t` in a stack trace): the next ones are taken here.
            while let Some(&next) = text.get(copied).filter(|&&next| next < 0x80 && JsonCandidate::byte(next))
            {
                write_escape(out, next);
                copied += 1;
            }
            continue;
        }
        // C2 or E2: NEL, U+2028 or U+2029, or the first byte of another character, which is
        // copied as it is (its other bytes follow with the next slice).
        let length = line_break_at(text, special);
        match length {
            2 => out.extend_from_slice(br"\u0085"),
            3 if text[special + 2] == 0xA8 => out.extend_from_slice(br"\u2028"),
            3 => out.extend_from_slice(br"\u2029"),
            _ => {
                out.push(byte);
                continue;
            }
        }
        copied = special + length;
    }
    out.extend_from_slice(&text[copied..]);
    out.push(b'"');
}

/// The letter of the two-character escape of each byte (`n` for LF: `\n`), or 0 where the
/// byte takes the six-character form `\u00XX`. Only consulted for special bytes.
const SHORT_ESCAPES: [u8; 256] = {
    let mut table = [0; 256];
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[0x08] = b'b';
    table[0x0C] = b'f';
    table
};

#[inline]
fn write_escape(out: &mut Vec<u8>, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match SHORT_ESCAPES[usize::from(byte)] {
        0 => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xF)],
        ]),
        letter => out.extend_from_slice(&[b'\\', letter]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(value: &str) -> String {
        let mut out = Vec::new();
        write_string(&mut out, value.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_per_rfc_8259() {
        assert_eq!(string(""), r#""""#);
        assert_eq!(string("plain"), r#""plain""#);
        assert_eq!(string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(string("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(string("\u{0}\u{1}\u{1f}\u{1b}"), r#""\u0000\u0001\u001f\u001b""#);
        assert_eq!(string("/\u{7f}é✓£—…\u{2027}\u{202a}"), "\"/\u{7f}é✓£—…\u{2027}\u{202a}\"");
        assert_eq!(string("a\u{85}b\u{2028}c\u{2029}\u{b}\u{1e}"), r#""a\u0085b\u2028c\u2029\u000b\u001e""#);
        // Runs of escapes, one ending on a multi-byte break and one on another character.
        assert_eq!(string("\n\t\u{2028}\"\\é\n\u{85}"), r#""\n\t\u2028\"\\é\n\u0085""#);
        let long = format!("{}\n{}\"", "x".repeat(30), "y".repeat(9));
        assert_eq!(string(&long), format!("\"{}\\n{}\\\"\"", "x".repeat(30), "y".repeat(9)));
    }
}
