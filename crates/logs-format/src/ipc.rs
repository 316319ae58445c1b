//! Arrow IPC stream output: the schema message, one record batch message per batch, the
//! end-of-stream marker last.

use std::io::Write;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;

use crate::output::Output;
use crate::typed::{conform, output_schema, plain_bytes};
use crate::{EncoderOptions, Format, FormatError};

/// Streams record batches in the Arrow IPC stream format (uncompressed buffers, metadata
/// version 5, each batch as messages of about [`MESSAGE_BYTES`]). The end-of-stream marker comes at [`ArrowEncoder::finish`]; the writer gets
/// whole messages only, so that an encoder dropped before `finish` leaves a stream cut
/// between two messages (see [`crate::Format::broken_ending`]). See the
/// [crate documentation](crate) for the columns.
pub struct ArrowEncoder<W: Write> {
    state: State<W>,
    schema: SchemaRef,
    rows: u64,
}

/// A batch is written as messages of about this many bytes: larger ones would make the cast
/// to `Utf8` and the message's body allocations of several MiB per batch, which the allocator
/// maps afresh each time (jemalloc serves requests above 8 MiB from pages it gives back at
/// once: zeroing them took more time than the encoding).
pub const MESSAGE_BYTES: usize = 2 << 20;

enum State<W: Write> {
    /// Nothing written yet (the schema message waits for the first batch or `finish`).
    Waiting(W),
    Writing(Box<StreamWriter<Output<W>>>),
    /// After a failure to start.
    Broken,
}

impl<W: Write> ArrowEncoder<W> {
    /// Prepares to write batches of `schema` to `writer`. Nothing is written yet; `options`
    /// do not apply to Arrow.
    pub fn new(writer: W, schema: &Schema, _options: EncoderOptions) -> Result<Self, FormatError> {
        let schema = output_schema(schema, DataType::Utf8)?;
        Ok(ArrowEncoder { state: State::Waiting(writer), schema, rows: 0 })
    }

    fn writer(&mut self) -> Result<&mut StreamWriter<Output<W>>, FormatError> {
        if let State::Waiting(_) = self.state {
            let State::Waiting(writer) = std::mem::replace(&mut self.state, State::Broken) else {
                unreachable!("checked above")
            };
            let writer =
                StreamWriter::try_new(Output::new(writer, Vec::new()), &self.schema).map_err(arrow_error)?;
            self.state = State::Writing(Box::new(writer));
        }
        match &mut self.state {
            State::Writing(writer) => Ok(writer),
            _ => Err(FormatError::Encoding("the Arrow writer failed to start".into())),
        }
    }

    /// Encodes `batch` as record batch messages of about [`MESSAGE_BYTES`] each. If the batch
    /// does not fit the schema, an error is returned and nothing is encoded.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<(), FormatError> {
        // Checked whole first, so that a batch that does not fit writes nothing.
        conform(&batch.slice(0, 0), &self.schema)?;
        let rows = batch.num_rows();
        let per_message = (rows * MESSAGE_BYTES / plain_bytes(batch).max(1)).clamp(1, rows.max(1));
        let mut offset = 0;
        while offset < rows {
            let length = per_message.min(rows - offset);
            let slice = conform(&batch.slice(offset, length), &self.schema)?;
            let writer = self.writer()?;
            writer.write(&slice).map_err(arrow_error)?;
            writer.get_mut().flush_if_full()?;
            self.rows += length as u64;
            offset += length;
        }
        Ok(())
    }

    /// Writes the end-of-stream marker, flushes everything and returns the writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        self.writer()?.finish().map_err(arrow_error)?;
        let State::Writing(writer) = self.state else { unreachable!("started above") };
        let output = writer.into_inner().map_err(arrow_error)?;
        Ok(output.finish(&[])?)
    }

    /// Ends a failed output: see [`crate::Encoder::abandon`]. The stream is never finished.
    pub fn abandon(self) -> Result<(), FormatError> {
        match self.state {
            State::Waiting(mut writer) => {
                writer.write_all(Format::Arrow.broken_ending())?;
                Ok(writer.flush()?)
            }
            State::Writing(mut writer) => Ok(writer.get_mut().abandon(Format::Arrow.broken_ending())?),
            State::Broken => Ok(()),
        }
    }

    /// Hands the messages written so far to the writer and flushes it.
    pub fn flush(&mut self) -> Result<(), FormatError> {
        match &mut self.state {
            State::Writing(writer) => Ok(writer.get_mut().flush()?),
            _ => Ok(()),
        }
    }

    /// See [`crate::Encoder::take_buffered`]: whole messages only.
    pub fn take_buffered(&mut self, next: Vec<u8>) -> Vec<u8> {
        match &mut self.state {
            State::Writing(writer) => writer.get_mut().take(next),
            _ => next,
        }
    }

    /// Bytes encoded so far, including those still buffered.
    pub fn bytes_written(&self) -> u64 {
        match &self.state {
            State::Writing(writer) => writer.get_ref().bytes_written(),
            _ => 0,
        }
    }

    /// Records encoded so far.
    pub fn rows_written(&self) -> u64 {
        self.rows
    }
}

impl<W: Write> std::fmt::Debug for ArrowEncoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrowEncoder")
            .field("schema", &self.schema)
            .field("started", &matches!(self.state, State::Writing(_)))
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

fn arrow_error(e: ArrowError) -> FormatError {
    match e {
        ArrowError::IoError(_, e) => FormatError::Io(e),
        e => FormatError::Encoding(format!("Arrow IPC: {e}")),
    }
}
