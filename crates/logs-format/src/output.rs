//! The output buffer shared by the encoders.

use std::io::{self, Write};

/// The buffer is handed to the writer once it holds this many bytes (and at the end).
pub(crate) const FLUSH_AT: usize = 1 << 20;

/// Encoded bytes collect in `buf` and reach the writer in chunks of about [`FLUSH_AT`] bytes.
/// The preamble (BOM, CSV header or JSON opening) waits until the first batch or the end.
pub(crate) struct Output<W> {
    /// The encoders append to this directly.
    pub(crate) buf: Vec<u8>,
    writer: W,
    flushed: u64,
    preamble: Option<Vec<u8>>,
}

impl<W: Write> Output<W> {
    pub(crate) fn new(writer: W, preamble: Vec<u8>) -> Output<W> {
        // Room for a full chunk plus the row that crosses the threshold, in most cases.
        let buf = Vec::with_capacity(FLUSH_AT + FLUSH_AT / 8);
        Output { buf, writer, flushed: 0, preamble: Some(preamble) }
    }

    /// Appends the preamble unless it has been appended already.
    pub(crate) fn start(&mut self) {
        if let Some(preamble) = self.preamble.take() {
            self.buf.extend_from_slice(&preamble);
        }
    }

    /// Hands the buffer to the writer if it is full enough.
    #[inline]
    pub(crate) fn flush_if_full(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT { self.flush_buffer() } else { Ok(()) }
    }

    /// Hands whatever is buffered to the writer and flushes it. Before the first batch this
    /// writes nothing: the preamble still waits, so an early error leaves the writer untouched.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.flush_buffer()?;
        }
        self.writer.flush()
    }

    /// Takes whatever is buffered out, as [`Output::flush`] would have written it, and goes on
    /// in `next`, emptied first. Before the first batch this is empty.
    pub(crate) fn take(&mut self, mut next: Vec<u8>) -> Vec<u8> {
        next.clear();
        let taken = std::mem::replace(&mut self.buf, next);
        self.flushed += taken.len() as u64;
        taken
    }

    fn flush_buffer(&mut self) -> io::Result<()> {
        self.writer.write_all(&self.buf)?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Appends `trailer`, writes out everything, flushes the writer and returns it.
    pub(crate) fn finish(mut self, trailer: &[u8]) -> io::Result<W> {
        self.start();
        self.buf.extend_from_slice(trailer);
        self.flush_buffer()?;
        self.writer.flush()?;
        Ok(self.writer)
    }

    /// Hands whatever is buffered to the writer, then `ending` (see
    /// [`crate::Format::broken_ending`]), and flushes it: the output of a failed export.
    pub(crate) fn abandon(&mut self, ending: &[u8]) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.flush_buffer()?;
        }
        self.writer.write_all(ending)?;
        self.writer.flush()
    }

    /// Bytes encoded so far, whether or not they have reached the writer yet.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }
}

/// The typed formats' writers write here, in order: a write of at least [`FLUSH_AT`] bytes
/// goes to the writer at once, after what is buffered (saving a copy of the largest pieces); a
/// smaller one waits in the buffer until the encoder says so ([`Output::flush_if_full`] after
/// a batch, `take`, `finish`). Either way, the writer's bytes after a batch end where an Arrow
/// IPC message ends.
impl<W: Write> Write for Output<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if bytes.len() < FLUSH_AT {
            self.buf.extend_from_slice(bytes);
            return Ok(bytes.len());
        }
        if !self.buf.is_empty() {
            self.flush_buffer()?;
        }
        self.writer.write_all(bytes)?;
        self.flushed += bytes.len() as u64;
        Ok(bytes.len())
    }

    /// Nothing to do: the encoder decides when the bytes go on.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W> std::fmt::Debug for Output<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("buffered", &self.buf.len())
            .field("flushed", &self.flushed)
            .field("started", &self.preamble.is_none())
            .finish_non_exhaustive()
    }
}
