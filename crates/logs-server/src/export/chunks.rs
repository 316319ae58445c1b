//! The way from the producer to the response body: the chunks of encoded rows, the queue
//! between the two, the buffers they reuse, the spill that takes over when the client stops
//! reading ([`crate::spill`]), and the body that reads them in order (see [`super::pipeline`]).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Future, Stream};
use tokio::sync::mpsc;

use crate::error::{ApiError, Problem};
use crate::limits::ExportPermit;
use crate::log::RequestLog;
use crate::metrics::{Metrics, Outcome, RunningExport};
use crate::spill::{Appended, Spill, SpillQuota};

/// Rows are encoded in slices of about this many bytes, so that a batch of long rows never
/// sits encoded in memory whole.
pub(super) const SLICE_BYTES: u64 = 512 * 1024;

/// Encoded bytes on their way to the connection, counted in the metrics until taken.
#[derive(Debug)]
pub(super) struct Chunk {
    bytes: Bytes,
    /// The whole rows it holds.
    rows: u64,
    metrics: Arc<Metrics>,
}

impl Chunk {
    /// The bytes, no longer counted as buffered, and the rows they hold.
    fn take(mut self) -> (Bytes, u64) {
        let bytes = std::mem::take(&mut self.bytes);
        self.metrics.unbuffer(bytes.len() as u64);
        (bytes, self.rows)
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.metrics.unbuffer(self.bytes.len() as u64);
    }
}

/// What the producer sends to the body.
#[derive(Debug)]
pub(super) enum Message {
    Data(Chunk),
    /// Every byte has been sent; dropping it releases the export's permit and ends its count
    /// among the running exports.
    End(Finished),
    /// The export failed after the first byte (why: in the producer's `failure`).
    Failed,
}

/// What a completed export holds until the body takes its `End` (the permit: unless it
/// spilled).
#[derive(Debug)]
pub(super) struct Finished {
    pub(super) _permit: Option<ExportPermit>,
    pub(super) running: RunningExport,
}

/// The chunks waiting for the body's channel, in order. The encoder writes here (what it
/// writes outside a slice, such as the BOM or the header, is copied into a chunk), and the
/// producer queues each slice's buffer here; both share one queue.
#[derive(Clone)]
pub(super) struct ChunkWriter {
    pending: Arc<Mutex<VecDeque<Chunk>>>,
    /// Rows queued without bytes (Parquet holds a row group's rows until it is full): the next
    /// chunk's.
    carried: Arc<AtomicU64>,
    metrics: Arc<Metrics>,
}

impl ChunkWriter {
    pub(super) fn new(metrics: Arc<Metrics>) -> ChunkWriter {
        ChunkWriter { pending: Arc::default(), carried: Arc::default(), metrics }
    }

    fn chunks(&self) -> std::sync::MutexGuard<'_, VecDeque<Chunk>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `bytes`, which complete `rows` rows, as the body's next chunk (no bytes: the
    /// rows count with the next chunk).
    pub(super) fn queue(&self, bytes: Bytes, rows: u64) {
        if bytes.is_empty() {
            self.carried.fetch_add(rows, Ordering::Relaxed);
        } else {
            let rows = rows + self.carried.swap(0, Ordering::Relaxed);
            self.metrics.buffer(bytes.len() as u64);
            let chunk = Chunk { bytes, rows, metrics: self.metrics.clone() };
            self.chunks().push_back(chunk);
        }
    }

    /// The oldest chunk not yet sent.
    pub(super) fn next(&self) -> Option<Chunk> {
        self.chunks().pop_front()
    }

    /// Drops every chunk not yet sent.
    pub(super) fn clear(&self) {
        self.chunks().clear();
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.queue(Bytes::copy_from_slice(buf), 0);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The buffers the encoder fills, each back from the body once its chunk is sent, so that an
/// export reuses a few buffers rather than allocating one per chunk. At most
/// [`Buffers::LIMIT`] wait here, for the next slices; more are freed, so that what an export
/// holds is still about its chunks in flight.
#[derive(Clone, Default)]
pub(super) struct Buffers {
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Buffers {
    const LIMIT: usize = 2;

    /// A buffer to encode into: one given back, or a new one with room for a slice and then
    /// some (it grows if a slice needs more).
    pub(super) fn get(&self) -> Vec<u8> {
        let given_back = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        given_back.unwrap_or_else(|| Vec::with_capacity((SLICE_BYTES + SLICE_BYTES / 8) as usize))
    }

    /// `buffer` as a chunk's bytes, given back here when the chunk is dropped.
    pub(super) fn chunk(&self, buffer: Vec<u8>) -> Bytes {
        Bytes::from_owner(Recycled { buffer, to: self.clone() })
    }
}

/// A chunk's bytes, and where their buffer goes when the chunk is dropped.
struct Recycled {
    buffer: Vec<u8>,
    to: Buffers,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        let mut free = self.to.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < Buffers::LIMIT {
            free.push(std::mem::take(&mut self.buffer));
        }
    }
}

/// Why the producer stopped early.
pub(super) enum Stop {
    ClientGone,
    Failed(ApiError),
}

impl Stop {
    /// A failure of the encoder or of this module, as opposed to the engine.
    pub(super) fn internal(detail: impl std::fmt::Display) -> Stop {
        Stop::Failed(ApiError::Internal(detail.to_string()))
    }
}

/// Where the producer sends its chunks: the body's queue, or the export's spill once the
/// queue has stayed full for `after` (see [`crate::spill`]).
pub(super) struct Spilling {
    pub(super) quota: Arc<SpillQuota>,
    pub(super) after: Duration,
    /// The export's spill, once it has one; the body reads it after the queue.
    pub(super) spill: Arc<OnceLock<Spill>>,
}

impl Spilling {
    pub(super) async fn send(&self, tx: &mpsc::Sender<Message>, chunk: Chunk) -> Result<(), Stop> {
        // Once bytes wait in the spill, the next go there too, so that they keep their order.
        if let Some(spill) = self.spill.get()
            && spill.unread() > 0
        {
            return self.append(tx, spill, chunk).await;
        }
        let room = match tx.try_reserve() {
            Ok(room) => room,
            Err(mpsc::error::TrySendError::Closed(())) => return Err(Stop::ClientGone),
            Err(mpsc::error::TrySendError::Full(())) => {
                match tokio::time::timeout(self.after, tx.reserve()).await {
                    Ok(room) => room.map_err(|_| Stop::ClientGone)?,
                    // The reader has stopped reading: spill, if there is room for it.
                    Err(_) => match self.spill() {
                        Some(spill) => return self.append(tx, spill, chunk).await,
                        None => tx.reserve().await.map_err(|_| Stop::ClientGone)?,
                    },
                }
            }
        };
        room.send(Message::Data(chunk));
        Ok(())
    }

    /// The export's spill, opened on first use (`None`: spilling is off or has no room).
    fn spill(&self) -> Option<&Spill> {
        if self.spill.get().is_none()
            && let Some(spill) = self.quota.open()
        {
            tracing::info!("the reader stopped reading: the rest of the export goes to a spill file");
            let _ = self.spill.set(spill);
        }
        self.spill.get()
    }

    async fn append(&self, tx: &mpsc::Sender<Message>, spill: &Spill, chunk: Chunk) -> Result<(), Stop> {
        match spill.append(chunk.bytes.clone(), chunk.rows).await {
            // Dropping the chunk counts its bytes out of memory.
            Ok(Appended::Yes) => Ok(()),
            Ok(Appended::NoRoom) => {
                // Wait for the reader to take what the spill holds, then go on through the queue.
                tokio::select! {
                    () = tx.closed() => return Err(Stop::ClientGone),
                    () = spill.drained() => {}
                }
                let room = tx.reserve().await.map_err(|_| Stop::ClientGone)?;
                room.send(Message::Data(chunk));
                Ok(())
            }
            Err(e) => Err(Stop::internal(format!("cannot write the spill file: {e}"))),
        }
    }
}

/// The export's bytes, from the producer: a response body (a [`Stream`] that ends with an
/// error if the producer stops without `End`), or read chunk by chunk with
/// [`Chunks::next_chunk`]. The queue's chunks come first, then the spill's bytes (the producer
/// sends nothing through the queue while the spill holds bytes not yet read), then the end.
pub(crate) struct Chunks {
    rx: mpsc::Receiver<Message>,
    finished: bool,
    failure: Arc<OnceLock<Problem>>,
    spill: Arc<OnceLock<Spill>>,
    /// `End` or `Failed`, taken from the queue while the spill may still hold bytes.
    terminal: Option<Message>,
    /// A read of the spill under way.
    reading: Option<tokio::task::JoinHandle<io::Result<(Bytes, u64)>>>,
    /// Where the rows sent are counted.
    log: Option<Arc<RequestLog>>,
    /// What a failed export's bytes end with ([`logs_format::Format::broken_ending`]), sent
    /// before the failure.
    broken_ending: &'static [u8],
    /// The broken ending has been sent: the failure comes next, once the connection has had
    /// [`FLUSH_GRACE`] to write it out (hyper drops what it has not written when a body fails).
    failing: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// How long a failed export's broken ending is given to reach the connection before the
/// response is aborted.
const FLUSH_GRACE: Duration = Duration::from_millis(100);

/// What the body takes next.
enum Next {
    Data(Bytes),
    End,
    Failed,
}

impl Chunks {
    pub(super) fn new(
        rx: mpsc::Receiver<Message>,
        failure: Arc<OnceLock<Problem>>,
        spill: Arc<OnceLock<Spill>>,
        log: Option<Arc<RequestLog>>,
        broken_ending: &'static [u8],
    ) -> Chunks {
        Chunks {
            rx,
            finished: false,
            failure,
            spill,
            terminal: None,
            reading: None,
            log,
            broken_ending,
            failing: None,
        }
    }

    /// The next chunk; `None` after the last; the failure if the export failed. Dropping
    /// `Chunks` before the end cancels the export.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Bytes>, Problem> {
        match std::future::poll_fn(|cx| self.poll_next_part(cx)).await {
            Next::Data(bytes) => Ok(Some(bytes)),
            Next::End => Ok(None),
            Next::Failed => {
                let failure = self.failure.get().cloned();
                Err(failure.unwrap_or_else(|| {
                    ApiError::Internal("the export stopped before its end".into()).problem()
                }))
            }
        }
    }

    fn poll_next_part(&mut self, cx: &mut Context<'_>) -> Poll<Next> {
        if self.finished {
            return Poll::Ready(Next::End);
        }
        if let Some(grace) = &mut self.failing {
            std::task::ready!(grace.as_mut().poll(cx));
            return Poll::Ready(self.failed());
        }
        loop {
            if let Some(reading) = &mut self.reading {
                let read = std::task::ready!(Pin::new(reading).poll(cx));
                self.reading = None;
                return Poll::Ready(match read {
                    Ok(Ok((bytes, rows))) => self.sent(bytes, rows),
                    Ok(Err(e)) => self.fail(format!("cannot read the spill file: {e}")),
                    Err(e) => self.fail(format!("cannot read the spill file: {e}")),
                });
            }
            if self.terminal.is_none() {
                match self.rx.poll_recv(cx) {
                    Poll::Ready(Some(Message::Data(chunk))) => {
                        let (bytes, rows) = chunk.take();
                        return Poll::Ready(self.sent(bytes, rows));
                    }
                    Poll::Ready(Some(Message::Failed) | None) => return Poll::Ready(self.failed()),
                    Poll::Ready(Some(end)) => self.terminal = Some(end),
                    Poll::Pending => {}
                }
            }
            if let Some(spill) = self.spill.get()
                && let Some(reading) = spill.read_next(cx.waker())
            {
                self.reading = Some(reading);
                continue;
            }
            return match self.terminal.take() {
                Some(end) => {
                    // Dropping `End` gives the permit back.
                    if let Message::End(mut finished) = end {
                        finished.running.set_outcome(Outcome::Completed);
                    }
                    self.finished = true;
                    Poll::Ready(Next::End)
                }
                None => Poll::Pending,
            };
        }
    }

    fn sent(&self, bytes: Bytes, rows: u64) -> Next {
        if let Some(log) = &self.log {
            log.add_rows(rows);
        }
        Next::Data(bytes)
    }

    fn fail(&mut self, detail: String) -> Next {
        tracing::error!(%detail, "export failed after the first byte; aborting the response");
        let _ = self.failure.set(ApiError::Internal(detail).problem());
        self.failed()
    }

    /// The export has failed: its broken ending first, if the format has one, then the
    /// failure.
    fn failed(&mut self) -> Next {
        if self.failing.is_some() || self.broken_ending.is_empty() {
            self.finished = true;
            return Next::Failed;
        }
        self.failing = Some(Box::pin(tokio::time::sleep(FLUSH_GRACE)));
        Next::Data(Bytes::from_static(self.broken_ending))
    }
}

impl Stream for Chunks {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        Poll::Ready(match std::task::ready!(self.poll_next_part(cx)) {
            Next::Data(bytes) => Some(Ok(bytes)),
            Next::End => None,
            Next::Failed => Some(Err(io::Error::other("the export failed; the response is incomplete"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunks_buffer_comes_back_once_the_chunk_is_dropped_and_two_wait_at_most() {
        let buffers = Buffers::default();
        let mut buffer = buffers.get();
        assert!(buffer.capacity() >= SLICE_BYTES as usize, "a new buffer has room for a slice");
        buffer.extend_from_slice(b"slice");
        let address = buffer.as_ptr();
        let chunk = buffers.chunk(buffer);
        assert_eq!(&chunk[..], b"slice");
        let copy = chunk.clone();
        drop(chunk);
        assert!(buffers.free.lock().unwrap().is_empty(), "not while a clone still holds the bytes");
        drop(copy);
        let again = buffers.get();
        assert_eq!(again.as_ptr(), address, "the same buffer comes back");
        assert!(buffers.free.lock().unwrap().is_empty());

        let chunks: Vec<Bytes> = (0..5).map(|_| buffers.chunk(vec![1; 10])).collect();
        drop(chunks);
        assert_eq!(buffers.free.lock().unwrap().len(), Buffers::LIMIT, "the others are freed");
    }
}
