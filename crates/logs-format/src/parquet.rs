//! Parquet output: the rows in row groups written as the batches come, the footer last.

use std::io::Write;
use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::{DataType, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowSchemaConverter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory, compute_leaves,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;

use crate::output::{FLUSH_AT, Output};
use crate::typed::{conform, output_schema, plain_bytes};
use crate::{EncoderOptions, Format, FormatError};

mod lanes;

use lanes::Lanes;

/// The most rows in a row group.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// A row group is closed once its encoded pages reach about this many bytes, whatever its
/// rows: what an export holds in memory while it writes Parquet is about one row group.
pub const ROW_GROUP_BYTES: usize = 32 << 20;

/// Rows of at most this many bytes plainly encoded (texts by their lengths) are narrow: their
/// row groups are encoded on two lanes in turn (see `lanes`), and a row group there also ends
/// at [`LANE_GROUP_BYTES`] of plain values.
const NARROW_ROW_BYTES: usize = 256;

/// The plain values a row group on a lane holds at most: a lane holds its row group's rows
/// until it has encoded them, and the rows of the next row group wait beside them.
const LANE_GROUP_BYTES: usize = ROW_GROUP_ROWS * NARROW_ROW_BYTES;

/// Streams record batches as one Parquet file: zstd (level 1), statistics per page, the page
/// index, row groups of at most [`ROW_GROUP_ROWS`] rows and about [`ROW_GROUP_BYTES`] bytes,
/// each written once full. The footer comes at [`ParquetEncoder::finish`]: an encoder dropped
/// before it leaves no valid file. See the [crate documentation](crate) for the columns.
///
/// Encoding and compression take more time than reading, so they use two threads. How is
/// decided by the first batch (the same rows always give the same bytes):
/// - narrow rows: each row group on one of two threads of its own, in turn (see `lanes`),
///   which share the work whatever the columns;
/// - wide rows: each batch's columns split by bytes between the calling thread and a scoped
///   one. Lanes would hold two row groups' rows (a wide export's peak grew by 30 MiB), or need
///   small row groups, which cost more CPU (and a wide export's long text is most of its
///   bytes, so its CPU, not the split, bounds its time).
pub struct ParquetEncoder<W: Write> {
    /// Parquet's writer needs a writer it can send between threads, which `W` need not be: it
    /// writes into a buffer of its own, whose bytes go on to `output` after each row group.
    file: SerializedFileWriter<Sink>,
    factory: ArrowRowGroupWriterFactory,
    groups: Groups,
    /// Row groups begun so far; rows and plain bytes in the one in progress.
    started: usize,
    group_rows: usize,
    group_bytes: usize,
    output: Output<W>,
    schema: SchemaRef,
    rows: u64,
}

/// Where row groups are encoded.
enum Groups {
    /// Not decided yet: no rows so far.
    Undecided,
    /// On the calling thread and a scoped one; the column writers of the row group in
    /// progress, if any.
    Here(Vec<ArrowColumnWriter>),
    /// On two lanes in turn.
    Lanes(Box<Lanes>),
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
        let output = Output::new(writer, Vec::new());
        Ok(ParquetEncoder {
            file,
            factory,
            groups: Groups::Undecided,
            started: 0,
            group_rows: 0,
            group_bytes: 0,
            output,
            schema,
            rows: 0,
        })
    }

    /// Encodes the rows of `batch` into the row group in progress, closing each row group once
    /// it is full and writing out those that are encoded. If the batch does not fit the
    /// schema, an error is returned and nothing is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        let batch = conform(batch, &self.schema)?;
        if matches!(self.groups, Groups::Undecided) && batch.num_rows() > 0 {
            let narrow = plain_bytes(&batch) <= NARROW_ROW_BYTES * batch.num_rows();
            let fields = self.schema.fields().iter().cloned().collect();
            self.groups =
                if narrow { Groups::Lanes(Box::new(Lanes::new(fields))) } else { Groups::Here(Vec::new()) };
        }
        let mut offset = 0;
        while offset < batch.num_rows() {
            if self.group_rows == 0 {
                self.start_row_group()?;
            }
            let rows = (batch.num_rows() - offset).min(ROW_GROUP_ROWS - self.group_rows);
            let piece = batch.slice(offset, rows);
            self.group_rows += rows;
            self.rows += rows as u64;
            offset += rows;
            let full = match &mut self.groups {
                Groups::Lanes(lanes) => {
                    self.group_bytes += plain_bytes(&piece);
                    lanes.write(piece).map_err(parquet_error)?;
                    self.group_bytes >= LANE_GROUP_BYTES
                }
                Groups::Here(writers) => {
                    encode_here(writers, self.schema.fields(), &piece)?;
                    let bytes: usize = writers.iter().map(ArrowColumnWriter::get_estimated_total_bytes).sum();
                    bytes >= ROW_GROUP_BYTES
                }
                Groups::Undecided => unreachable!("decided above"),
            };
            if full || self.group_rows == ROW_GROUP_ROWS {
                self.close_row_group()?;
            }
        }
        if let Groups::Lanes(lanes) = &mut self.groups {
            while let Some(closed) = lanes.take_finished() {
                append(&mut self.file, closed.map_err(parquet_error)?)?;
            }
        }
        self.pass_on()
    }

    /// Begins the next row group: its column writers, and on a lane, after writing out the
    /// row groups it must follow.
    fn start_row_group(&mut self) -> Result<(), FormatError> {
        let writers = self.factory.create_column_writers(self.started).map_err(parquet_error)?;
        match &mut self.groups {
            Groups::Lanes(lanes) => {
                while lanes.next_holds_closed() {
                    let Some(closed) = lanes.wait_oldest() else { break };
                    append(&mut self.file, closed.map_err(parquet_error)?)?;
                }
                lanes.start(writers).map_err(parquet_error)?;
            }
            Groups::Here(current) => *current = writers,
            Groups::Undecided => return Err(FormatError::Encoding("no rows to encode".into())),
        }
        self.started += 1;
        self.group_bytes = 0;
        Ok(())
    }

    /// Closes the row group in progress: here, written at once; on a lane, once encoded.
    fn close_row_group(&mut self) -> Result<(), FormatError> {
        match &mut self.groups {
            Groups::Lanes(lanes) => lanes.close().map_err(parquet_error)?,
            Groups::Here(writers) => {
                let chunks = std::mem::take(writers).into_iter().map(ArrowColumnWriter::close);
                append(&mut self.file, chunks.collect::<Result<_, _>>().map_err(parquet_error)?)?;
            }
            Groups::Undecided => {}
        }
        self.group_rows = 0;
        Ok(())
    }

    /// Writes out every row group closed on a lane, waiting for the lanes to finish them.
    fn write_out_closed(&mut self) -> Result<(), FormatError> {
        if let Groups::Lanes(lanes) = &mut self.groups {
            while let Some(closed) = lanes.wait_oldest() {
                append(&mut self.file, closed.map_err(parquet_error)?)?;
            }
        }
        Ok(())
    }

    /// Moves what Parquet's writer wrote to the output, handing it to the writer a chunk of
    /// 1 MiB at a time; less than 1 MiB waits in the output's buffer (row groups smaller than
    /// that collect there until they fill it).
    fn pass_on(&mut self) -> Result<(), FormatError> {
        let written = &mut self.file.inner_mut().0;
        for piece in written.chunks(FLUSH_AT) {
            self.output.write_all(piece)?;
        }
        written.clear();
        Ok(self.output.flush_if_full()?)
    }

    /// Writes the last row groups and the footer, flushes everything and returns the writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        if self.group_rows > 0 {
            self.close_row_group()?;
        }
        self.write_out_closed()?;
        self.file.finish().map_err(parquet_error)?;
        self.pass_on()?;
        Ok(self.output.finish(&[])?)
    }

    /// Ends a failed output: see [`crate::Encoder::abandon`].
    pub fn abandon(mut self) -> Result<(), FormatError> {
        self.pass_on()?;
        Ok(self.output.abandon(Format::Parquet.broken_ending())?)
    }

    /// Hands the bytes of the row groups closed so far to the writer (waiting for lanes to
    /// finish them) and flushes it; the row group in progress stays in progress (a
    /// flush never cuts a row group short).
    pub fn flush(&mut self) -> Result<(), FormatError> {
        self.write_out_closed()?;
        self.pass_on()?;
        Ok(self.output.flush()?)
    }

    /// See [`crate::Encoder::take_buffered`]: the bytes of the row groups written since.
    pub fn take_buffered(&mut self, next: Vec<u8>) -> Vec<u8> {
        self.output.take(next)
    }

    /// Bytes encoded so far: those of the row groups written out, and the estimated size of a
    /// row group in progress here (one on a lane counts once written out).
    pub fn bytes_written(&self) -> u64 {
        let in_progress: usize = match &self.groups {
            Groups::Here(writers) => writers.iter().map(ArrowColumnWriter::get_estimated_total_bytes).sum(),
            _ => 0,
        };
        (self.file.bytes_written() + in_progress) as u64
    }

    /// Records encoded so far.
    pub fn rows_written(&self) -> u64 {
        self.rows
    }
}

/// Encodes `batch` into `writers`, its columns split by bytes between the calling thread and a
/// scoped one when it is large enough.
fn encode_here(
    writers: &mut [ArrowColumnWriter],
    fields: &Fields,
    batch: &RecordBatch,
) -> Result<(), FormatError> {
    let mut work = Vec::with_capacity(batch.num_columns());
    for ((writer, field), column) in writers.iter_mut().zip(fields).zip(batch.columns()) {
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
    let theirs = theirs.map_err(|_| FormatError::Encoding("a Parquet encoding thread panicked".into()))?;
    mine.and(theirs).map_err(parquet_error)
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

/// Writes a closed row group's chunks to `file` as its next row group.
fn append(file: &mut SerializedFileWriter<Sink>, chunks: Vec<ArrowColumnChunk>) -> Result<(), FormatError> {
    let mut group = file.next_row_group().map_err(parquet_error)?;
    for chunk in chunks {
        chunk.append_to_row_group(&mut group).map_err(parquet_error)?;
    }
    group.close().map_err(parquet_error)?;
    Ok(())
}

impl<W: Write> std::fmt::Debug for ParquetEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetEncoder")
            .field("schema", &self.schema)
            .field("started", &self.started)
            .field("lanes", &matches!(self.groups, Groups::Lanes(_)))
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

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, StringViewArray};
    use arrow::datatypes::Field;

    use super::*;

    fn texts(length: usize) -> RecordBatch {
        let values: ArrayRef =
            Arc::new(StringViewArray::from_iter_values((0..100).map(|_| "t".repeat(length))));
        RecordBatch::try_from_iter([("error", values)]).unwrap()
    }

    /// The first batch decides: rows of at most 256 bytes of values go to the lanes, wider
    /// ones are encoded here, and later batches do not change it.
    #[test]
    fn narrow_rows_go_to_the_lanes_and_wide_ones_stay_here() {
        let schema = Schema::new(vec![Field::new("error", DataType::Utf8View, true)]);
        for (first, then, lanes) in [(252, 5000, true), (253, 10, false)] {
            let mut encoder = ParquetEncoder::new(Vec::new(), &schema, EncoderOptions::default()).unwrap();
            encoder.write_batch(&texts(first)).unwrap();
            encoder.write_batch(&texts(then)).unwrap();
            assert_eq!(matches!(encoder.groups, Groups::Lanes(_)), lanes, "rows of {first} bytes");
            assert!(encoder.finish().unwrap().starts_with(b"PAR1"));
        }
    }
}
