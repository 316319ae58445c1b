//! CSV output (RFC 4180 quoting, extended to every Unicode line break; LF line endings; null as
//! an empty cell, `""` for empty text; no record as an empty line).

use std::io::Write;

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;

use crate::column::{Cell, Columns};
use crate::output::Output;
use crate::scan::{CsvQuote, find_csv_special, find_special, write_i64, write_u64};
use crate::{BOM, EncoderOptions, FormatError};

/// Streams record batches as CSV: a header row of the column names, then one line per row.
/// See the [crate documentation](crate) for the exact rules.
pub struct CsvEncoder<W: Write> {
    output: Output<W>,
    columns: Columns,
    rows: u64,
}

impl<W: Write> CsvEncoder<W> {
    /// Prepares to write batches of `schema` to `writer`. Nothing is written yet.
    pub fn new(writer: W, schema: &Schema, options: EncoderOptions) -> Result<Self, FormatError> {
        let columns = Columns::new(schema)?;
        let mut header = Vec::new();
        if options.bom {
            header.extend_from_slice(BOM);
        }
        for (index, name) in columns.names().enumerate() {
            if index > 0 {
                header.push(b',');
            }
            write_text(&mut header, name.as_bytes());
        }
        header.push(b'\n');
        Ok(CsvEncoder { output: Output::new(writer, header), columns, rows: 0 })
    }

    /// Encodes the rows of `batch`, writing the header first if this is the first batch.
    /// If the batch does not fit the schema, an error is returned and nothing is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        let columns = self.columns.prepare(batch, write_cell)?;
        let output = &mut self.output;
        output.start();
        for row in 0..batch.num_rows() {
            let line_start = output.buf.len();
            if let Some((first, rest)) = columns.split_first() {
                write_cell(&mut output.buf, first.cell(row));
                for column in rest {
                    output.buf.push(b',');
                    write_cell(&mut output.buf, column.cell(row));
                }
            }
            if output.buf.len() == line_start {
                // A one-column record whose value is null: an empty line would be skipped
                // by most readers, so the record is written as an empty string (`""`).
                output.buf.extend_from_slice(b"\"\"");
            }
            output.buf.push(b'\n');
            output.flush_if_full()?;
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Writes the header if no batch was written, flushes everything and returns the writer.
    pub fn finish(self) -> Result<W, FormatError> {
        Ok(self.output.finish(b"")?)
    }

    /// Ends a failed output: see [`crate::Encoder::abandon`].
    pub fn abandon(mut self) -> Result<(), FormatError> {
        Ok(self.output.abandon(b"")?)
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

    /// Data rows encoded so far (the header is not a row).
    pub fn rows_written(&self) -> u64 {
        self.rows
    }
}

impl<W: Write> std::fmt::Debug for CsvEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvEncoder")
            .field("output", &self.output)
            .field("columns", &self.columns)
            .field("rows", &self.rows)
            .finish()
    }
}

/// Appends one CSV cell.
#[inline]
pub(crate) fn write_cell(out: &mut Vec<u8>, cell: Cell<'_>) {
    match cell {
        Cell::Null => {}
        Cell::Text(text) => write_text(out, text),
        Cell::Signed(value) => write_i64(out, value),
        Cell::Unsigned(value) => write_u64(out, value),
        Cell::Boolean(value) => out.extend_from_slice(if value { b"true" } else { b"false" }),
        Cell::Float32(value) => crate::write_float(out, value),
        Cell::Float64(value) => crate::write_float(out, value),
        Cell::Rendered(bytes) => out.extend_from_slice(bytes),
    }
}

/// Appends `text` as a CSV field: quoted (with inner quotes doubled) only if it contains a
/// comma, a quote or a line break (CR, LF, VT, FF, U+001C..U+001E, NEL, U+2028, U+2029), and
/// written as `""` if it is empty.
#[inline]
fn write_text(out: &mut Vec<u8>, text: &[u8]) {
    if text.is_empty() {
        out.extend_from_slice(b"\"\"");
        return;
    }
    let Some(first_special) = find_csv_special(text, 0) else {
        out.extend_from_slice(text);
        return;
    };
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut copied = 0;
    let mut next_quote = find_special::<CsvQuote>(text, first_special);
    while let Some(quote) = next_quote {
        out.extend_from_slice(&text[copied..=quote]);
        out.push(b'"');
        copied = quote + 1;
        next_quote = find_special::<CsvQuote>(text, copied);
    }
    out.extend_from_slice(&text[copied..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> String {
        let mut out = Vec::new();
        write_text(&mut out, value.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn quotes_only_what_rfc_4180_requires() {
        assert_eq!(text("plain"), "plain");
        assert_eq!(text(""), r#""""#);
        assert_eq!(text(" padded\t"), " padded\t");
        assert_eq!(text("a,b"), r#""a,b""#);
        assert_eq!(text("a\rb"), "\"a\rb\"");
        assert_eq!(text("a\nb"), "\"a\nb\"");
        assert_eq!(text("a\r\nb"), "\"a\r\nb\"");
        assert_eq!(text("\""), r#""""""#);
        assert_eq!(text(r#"say "hi", then "bye""#), r#""say ""hi"", then ""bye""""#);
        assert_eq!(text("Ünïcödé ✓ £ — …"), "Ünïcödé ✓ £ — …");
        for line_break in ["\u{b}", "\u{c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}", "\u{2028}", "\u{2029}"] {
            assert_eq!(text(&format!("a{line_break}b")), format!("\"a{line_break}b\""));
        }
        assert_eq!(text("tab\tand\u{1f}unit"), "tab\tand\u{1f}unit");
        let long = format!("{}\"{}", "x".repeat(37), "y".repeat(20));
        assert_eq!(text(&long), format!("\"{}\"\"{}\"", "x".repeat(37), "y".repeat(20)));
    }
}
