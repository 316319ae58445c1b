//! Parquet output: the rows in row groups written as the batches come, the footer last.

use std::io::Write;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::output::{FLUSH_AT, Output};
use crate::typed::{conform, output_schema};
use crate::{EncoderOptions, Format, FormatError};

/// The most rows in a row group.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// A row group is closed once its encoded size reaches about this many bytes, whatever its
/// rows: what an export holds in memory while it writes Parquet is about one row group.
pub const ROW_GROUP_BYTES: usize = 32 << 20;

/// Streams record batches as one Parquet file: zstd (level 1), statistics per page, the page
/// index, row groups of at most [`ROW_GROUP_ROWS`] rows and about [`ROW_GROUP_BYTES`] bytes,
/// each written once full. The footer comes at [`ParquetEncoder::finish`]: an encoder dropped
/// before it leaves no valid file. See the [crate documentation](crate) for the columns.
pub struct ParquetEncoder<W: Write> {
    /// Parquet's writer needs a writer it can send between threads, which `W` need not be: it
    /// writes into a buffer of its own, whose bytes go on to `output` after each call.
    writer: Box<ArrowWriter<Sink>>,
    output: Output<W>,
    schema: SchemaRef,
    rows: u64,
}

/// Where Parquet's writer writes: a row group at a time, at most.
#[derive(Default)]
struct Sink(Vec<u8>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<W: Write> ParquetEncoder<W> {
    /// Prepares to write batches of `schema` to `writer`. Nothing is written yet (the magic
    /// bytes wait for the first batch or `finish`); `options` do not apply to Parquet.
    pub fn new(writer: W, schema: &Schema, _options: EncoderOptions) -> Result<Self, FormatError> {
        let schema = output_schema(schema)?;
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
            .build();
        let parquet = ArrowWriter::try_new(Sink::default(), Arc::clone(&schema), Some(properties))
            .map_err(parquet_error)?;
        Ok(ParquetEncoder {
            writer: Box::new(parquet),
            output: Output::new(writer, Vec::new()),
            schema,
            rows: 0,
        })
    }

    /// Encodes the rows of `batch` into the row group in progress, writing the row group out
    /// once it is full. If the batch does not fit the schema, an error is returned and nothing
    /// is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        let batch = conform(batch, &self.schema)?;
        self.writer.write(&batch).map_err(parquet_error)?;
        self.rows += batch.num_rows() as u64;
        self.pass_on()
    }

    /// Moves what Parquet's writer wrote to the output, handing it to the writer a chunk of
    /// 1 MiB at a time (the rest waits in the output's buffer).
    fn pass_on(&mut self) -> Result<(), FormatError> {
        let written = &mut self.writer.inner_mut().0;
        for piece in written.chunks(FLUSH_AT) {
            self.output.write_all(piece)?;
        }
        written.clear();
        Ok(())
    }

    /// Writes the last row group and the footer, flushes everything and returns the writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        self.writer.finish().map_err(parquet_error)?;
        self.pass_on()?;
        Ok(self.output.finish(&[])?)
    }

    /// Ends a failed output: see [`crate::Encoder::abandon`].
    pub fn abandon(mut self) -> Result<(), FormatError> {
        self.pass_on()?;
        Ok(self.output.abandon(Format::Parquet.broken_ending())?)
    }

    /// Hands the bytes of the row groups written so far to the writer and flushes it; the row
    /// group in progress stays in progress (a flush never cuts a row group short).
    pub fn flush(&mut self) -> Result<(), FormatError> {
        Ok(self.output.flush()?)
    }

    /// See [`crate::Encoder::take_buffered`]: the bytes of the row groups written since.
    pub fn take_buffered(&mut self, next: Vec<u8>) -> Vec<u8> {
        self.output.take(next)
    }

    /// Bytes encoded so far: those written, and the estimated size of the row group in
    /// progress.
    pub fn bytes_written(&self) -> u64 {
        (self.writer.bytes_written() + self.writer.in_progress_size()) as u64
    }

    /// Records encoded so far.
    pub fn rows_written(&self) -> u64 {
        self.rows
    }
}

impl<W: Write> std::fmt::Debug for ParquetEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field("schema", &self.schema)
            .field("output", &self.output)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

fn parquet_error(e: ParquetError) -> FormatError {
    match e {
        ParquetError::External(e) => match e.downcast::<std::io::Error>() {
            Ok(e) => FormatError::Io(*e),
            Err(e) => FormatError::Encoding(format!("Parquet: {e}")),
        },
        e => FormatError::Encoding(format!("Parquet: {e}")),
    }
}
