//! Parquet output: the rows in row groups written as the batches come, the footer last.

use std::io::Write;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{
    ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;

use crate::output::{FLUSH_AT, Output};
use crate::typed::{conform, output_schema};
use crate::{EncoderOptions, Format, FormatError};

/// The most rows in a row group.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// A row group is closed once its encoded size reaches about this many bytes, whatever its
/// rows: what an export holds in memory while it writes Parquet is about one row group.
pub const ROW_GROUP_BYTES: usize = 32 << 20;

/// Streams record batches as one Parquet file: zstd (level 1), statistics per page, the page
/// index, row groups of at most [`ROW_GROUP_ROWS`] rows and about [`ROW_GROUP_BYTES`] bytes,
/// each written once full. The footer comes at [`ParquetEncoder::finish`]: an encoder dropped
/// before it leaves no valid file. See the [crate documentation](crate) for the columns.
///
/// The columns of a batch are encoded on two threads (the calling one and a scoped one), split
/// by bytes: a wide export's encoding and compression take more time than reading it.
pub struct ParquetEncoder<W: Write> {
    /// Parquet's writer needs a writer it can send between threads, which `W` need not be: it
    /// writes into a buffer of its own, whose bytes go on to `output` after each row group.
    file: SerializedFileWriter<Sink>,
    factory: ArrowRowGroupWriterFactory,
    /// The column writers of the row group in progress, one per column.
    columns: Vec<ArrowColumnWriter>,
    /// Rows in the row group in progress.
    group_rows: usize,
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

/// A column's dictionary is given up for plain values once it holds this many bytes: a column
/// of nearly unique values (ids, times) stops being interned early in each row group.
const DICTIONARY_BYTES: usize = 256 << 10;

/// Below this many rows a batch's columns are encoded on the calling thread alone.
const PARALLEL_ROWS: usize = 1024;

impl<W: Write> ParquetEncoder<W> {
    /// Prepares to write batches of `schema` to `writer`. Nothing is written yet (the magic
    /// bytes wait for the first batch or `finish`); `options` do not apply to Parquet.
    pub fn new(writer: W, schema: &Schema, _options: EncoderOptions) -> Result<Self, FormatError> {
        // Texts as the engine gives them (no copy), without the Arrow schema in the footer:
        // readers then take the Parquet `STRING` columns as their usual text type.
        let schema = output_schema(schema, DataType::Utf8View)?;
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_page_size_limit(DICTIONARY_BYTES)
            .build();
        let descriptor = ArrowSchemaConverter::new().convert(&schema).map_err(parquet_error)?;
        let file =
            SerializedFileWriter::new(Sink::default(), descriptor.root_schema_ptr(), Arc::new(properties))
                .map_err(parquet_error)?;
        let factory = ArrowRowGroupWriterFactory::new(&file, Arc::clone(&schema));
        let columns = factory.create_column_writers(0).map_err(parquet_error)?;
        let output = Output::new(writer, Vec::new());
        Ok(ParquetEncoder { file, factory, columns, group_rows: 0, output, schema, rows: 0 })
    }

    /// Encodes the rows of `batch` into the row group in progress, writing each row group out
    /// once it is full. If the batch does not fit the schema, an error is returned and nothing
    /// is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        let batch = conform(batch, &self.schema)?;
        let mut offset = 0;
        while offset < batch.num_rows() {
            let rows = (batch.num_rows() - offset).min(ROW_GROUP_ROWS - self.group_rows);
            self.encode(&batch.slice(offset, rows))?;
            self.group_rows += rows;
            self.rows += rows as u64;
            offset += rows;
            let bytes: usize = self.columns.iter().map(ArrowColumnWriter::get_estimated_total_bytes).sum();
            if self.group_rows == ROW_GROUP_ROWS || bytes >= ROW_GROUP_BYTES {
                self.close_row_group()?;
            }
        }
        self.pass_on()
    }

    /// Encodes `batch` into the column writers, on two threads when it is large enough.
    fn encode(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        let mut work = Vec::with_capacity(batch.num_columns());
        for ((writer, field), column) in
            self.columns.iter_mut().zip(self.schema.fields()).zip(batch.columns())
        {
            let leaves = compute_leaves(field, column).map_err(parquet_error)?;
            work.push((column.get_buffer_memory_size(), (writer, leaves)));
        }
        let encode_all = |part: Weighed<(&mut ArrowColumnWriter, Vec<ArrowLeafColumn>)>| {
            for (_, (writer, leaves)) in part {
                for leaf in &leaves {
                    writer.write(leaf)?;
                }
            }
            Ok::<(), ParquetError>(())
        };
        if batch.num_rows() < PARALLEL_ROWS || work.len() < 2 {
            return encode_all(work).map_err(parquet_error);
        }
        let (mine, theirs) = split_by_bytes(work);
        let (mine, theirs) = std::thread::scope(|scope| {
            let theirs = scope.spawn(|| encode_all(theirs));
            (encode_all(mine), theirs.join())
        });
        let theirs =
            theirs.map_err(|_| FormatError::Encoding("a Parquet encoding thread panicked".into()))?;
        mine.and(theirs).map_err(parquet_error)
    }

    /// Closes the row group in progress and writes it, then starts the next one.
    fn close_row_group(&mut self) -> Result<(), FormatError> {
        let next = self.factory.create_column_writers(self.file.flushed_row_groups().len() + 1);
        let writers = std::mem::replace(&mut self.columns, next.map_err(parquet_error)?);
        let chunks = writers.into_iter().map(ArrowColumnWriter::close).collect::<Result<Vec<_>, _>>();
        let mut group = self.file.next_row_group().map_err(parquet_error)?;
        for chunk in chunks.map_err(parquet_error)? {
            chunk.append_to_row_group(&mut group).map_err(parquet_error)?;
        }
        group.close().map_err(parquet_error)?;
        self.group_rows = 0;
        Ok(())
    }

    /// Moves what Parquet's writer wrote to the output, handing it to the writer a chunk of
    /// 1 MiB at a time (the rest waits in the output's buffer).
    fn pass_on(&mut self) -> Result<(), FormatError> {
        let written = &mut self.file.inner_mut().0;
        for piece in written.chunks(FLUSH_AT) {
            self.output.write_all(piece)?;
        }
        written.clear();
        Ok(())
    }

    /// Writes the last row group and the footer, flushes everything and returns the writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        if self.group_rows > 0 {
            self.close_row_group()?;
        }
        self.file.finish().map_err(parquet_error)?;
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
        let in_progress: usize = self.columns.iter().map(ArrowColumnWriter::get_estimated_total_bytes).sum();
        (self.file.bytes_written() + in_progress) as u64
    }

    /// Records encoded so far.
    pub fn rows_written(&self) -> u64 {
        self.rows
    }
}

/// Items of work, each with its bytes.
type Weighed<T> = Vec<(usize, T)>;

/// Splits `work` into two parts of about the same bytes, the largest items first.
fn split_by_bytes<T>(mut work: Weighed<T>) -> (Weighed<T>, Weighed<T>) {
    work.sort_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
    let (mut one, mut two) = (Vec::new(), Vec::new());
    let (mut one_bytes, mut two_bytes) = (0, 0);
    for item in work {
        if one_bytes <= two_bytes {
            one_bytes += item.0;
            one.push(item);
        } else {
            two_bytes += item.0;
            two.push(item);
        }
    }
    (one, two)
}

impl<W: Write> std::fmt::Debug for ParquetEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field("schema", &self.schema)
            .field("group_rows", &self.group_rows)
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
