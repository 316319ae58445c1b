//! `GET /logs/v1/export/errors.{csv|json}`: the export, streamed — or, with a spool and a
//! request that asks for it, prepared ([`crate::prepared`], which runs jobs through [`start`]
//! too).
//!
//! The handler validates the query with the engine's parser, checks the caller's
//! applications, takes an export permit, starts the query and waits for its first batch (at
//! most `first_byte_timeout`), so that every failure up to then gets a status and a JSON body.
//! Then a producer task encodes the batches in slices of about 512 KiB, flushes each slice as
//! one chunk, and hands the chunks to the response body through a channel of `chunk_queue`
//! chunks:
//!
//! - backpressure: a client that reads slowly makes `send` wait, which stops the query from
//!   being polled; memory stays bounded by the queue;
//! - a client that goes away drops the body and with it the receiver: the producer sees the
//!   channel closed (even while waiting for the engine) and drops the query, which cancels it
//!   and releases its memory and files at once;
//! - a failure after the first byte ends the body with an error, which makes hyper abort the
//!   connection (no final chunk): the client sees an incomplete transfer, never a short
//!   response that looks complete;
//! - at the end the producer releases the query, then sends `End` carrying the export's permit:
//!   the permit is released when the body takes `End`, before the final chunk goes out, so a
//!   client that has the whole body can start its next export at once (one at a time never
//!   meets the per-token limit), and until then the queued chunks still count against it.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use http::{HeaderMap, HeaderValue, Method, Uri, header};
use logs_core::arrow::record_batch::RecordBatch;
use logs_core::{Engine, ExportRequest, ExportStream, QueryPairs};
use logs_format::{Encoder, EncoderOptions, Format};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::auth::ReadAccess;
use crate::error::{ApiError, Problem};
use crate::limits::ExportPermit;
use crate::log::RequestLog;
use crate::metrics::{Metrics, Outcome, RunningExport};
use crate::server::WriteStall;
use crate::state::AppState;

/// The export's path prefix.
pub const EXPORT_PATH: &str = "/logs/v1/export/";

/// The header that tells how many unreadable files `skip_unavailable_shards=true` left out.
pub const SKIPPED_SHARDS: &str = "x-skipped-shards";

/// Rows are encoded in slices of about this many bytes, so that a batch of long rows never
/// sits encoded in memory whole.
const SLICE_BYTES: u64 = 512 * 1024;

/// The handler.
pub async fn export_errors(
    State(state): State<AppState>,
    ReadAccess(caller): ReadAccess,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    log: Option<axum::Extension<Arc<RequestLog>>>,
    stall: Option<axum::Extension<WriteStall>>,
) -> Result<Response, ApiError> {
    // The router only sends these two paths here; anything else under the prefix is 404.
    let format = match uri.path().strip_prefix(EXPORT_PATH) {
        Some("errors.csv") => Format::Csv,
        Some("errors.json") => Format::Json,
        _ => return Err(ApiError::NotFound),
    };
    let pairs = QueryPairs::parse(uri.query().unwrap_or(""))?;
    let request = ExportRequest::from_pairs(&pairs, state.engine().policy())?;
    if !caller.principal.may_access(request.application_id()) {
        return Err(ApiError::ApplicationDenied { application_id: request.application_id() });
    }
    if let Some(prepared) = state.prepared() {
        let stall = stall.as_ref().map(|s| &s.0);
        if let Some(response) = prepared.respond(&state, format, &request, &caller, &headers, stall).await? {
            return Ok(response);
        }
    }
    let permit = state.limiter().acquire(caller.token)?;
    let started = start(&state, format, &request, permit, log.map(|l| l.0)).await?;
    let skipped = started.skipped;
    let body = if method == Method::HEAD {
        // The headers only: the query is dropped, and its permit given back, before they go
        // (a body of unknown length, as the GET's, so that they are the GET's headers).
        started.stop().await;
        Body::from_stream(futures::stream::empty::<io::Result<Bytes>>())
    } else {
        Body::from_stream(started.chunks)
    };
    let response = Response::builder()
        .header(header::CONTENT_TYPE, format.content_type())
        .header(header::CONTENT_DISPOSITION, content_disposition(format))
        .header(SKIPPED_SHARDS, skipped)
        .body(body)
        .map_err(|e| ApiError::Internal(format!("cannot build the response: {e}")))?;
    Ok(response)
}

/// `Content-Disposition` of an export in `format`.
pub(crate) fn content_disposition(format: Format) -> HeaderValue {
    HeaderValue::from_static(match format {
        Format::Csv => "attachment; filename=\"errors.csv\"",
        Format::Json => "attachment; filename=\"errors.json\"",
    })
}

/// An export running in a producer task.
pub(crate) struct Started {
    /// Its encoded bytes, as they come.
    pub chunks: Chunks,
    /// Unreadable files that `skip_unavailable_shards=true` left out.
    pub skipped: usize,
    /// Rows encoded so far.
    pub rows: Arc<AtomicU64>,
    /// The producer task, which ends once it has released the query and the permit.
    producer: tokio::task::JoinHandle<()>,
}

impl Started {
    /// Cancels the export and waits until its query and permit are released.
    pub async fn stop(self) {
        drop(self.chunks);
        let _ = self.producer.await;
    }
}

/// Starts `request` under `permit`: runs the query to its first batch (at most
/// `first_byte_timeout`), so that every failure up to then is an error to answer, then hands
/// the rest to a producer task (see the module documentation).
pub(crate) async fn start(
    state: &AppState,
    format: Format,
    request: &ExportRequest,
    permit: ExportPermit,
    log: Option<Arc<RequestLog>>,
) -> Result<Started, ApiError> {
    let mut running = state.metrics().export_started();
    let limit = state.settings().first_byte_timeout;
    let started = match tokio::time::timeout(limit, start_export(state.engine(), request)).await {
        Ok(Ok(started)) => started,
        Ok(Err(e)) => {
            running.set_outcome(Outcome::Failed);
            return Err(e.into());
        }
        Err(_) => {
            running.set_outcome(Outcome::Failed);
            return Err(ApiError::FirstByteTimeout { limit });
        }
    };
    let (stream, first) = started;
    let skipped = stream.selection().skipped.len();
    for file in &stream.selection().skipped {
        tracing::warn!(path = %file.name, reason = %file.reason, "skipped an unreadable file");
    }
    state.metrics().add_skipped_files(skipped as u64);

    let options = EncoderOptions::default()
        .with_bom(request.use_utf8_bom())
        .with_json_integers(state.settings().json_integers);
    let pending = ChunkWriter::new(state.metrics().clone());
    let writer = pending.clone();
    let encoder = match Encoder::new(format, writer, &stream.schema(), options) {
        Ok(encoder) => encoder,
        Err(e) => {
            running.set_outcome(Outcome::Failed);
            return Err(ApiError::Internal(format!("cannot encode the export's schema: {e}")));
        }
    };
    let (tx, rx) = mpsc::channel(state.settings().chunk_queue);
    let rows = Arc::new(AtomicU64::new(0));
    let failure = Arc::new(OnceLock::new());
    let producer = Producer {
        rows: Arc::clone(&rows),
        failure: Arc::clone(&failure),
        stream,
        encoder: Some(encoder),
        buffers: Buffers::default(),
        pending,
        tx,
        metrics: state.metrics().clone(),
        log,
        running,
        permit,
    };
    let producer = tokio::spawn(producer.run(first).instrument(tracing::Span::current()));
    Ok(Started { chunks: Chunks { rx, finished: false, failure }, skipped, rows, producer })
}

/// Starts the query and waits for its first batch (`None`: it has no rows at all).
async fn start_export(
    engine: &Engine,
    request: &ExportRequest,
) -> Result<(ExportStream, Option<RecordBatch>), logs_core::Error> {
    let mut stream = engine.export(request).await?;
    let first = stream.next().await.transpose()?;
    Ok((stream, first))
}

/// Encoded bytes on their way to the connection, counted in the metrics until taken.
#[derive(Debug)]
struct Chunk {
    bytes: Bytes,
    metrics: Arc<Metrics>,
}

impl Chunk {
    /// The bytes, no longer counted as buffered.
    fn take(mut self) -> Bytes {
        let bytes = std::mem::take(&mut self.bytes);
        self.metrics.unbuffer(bytes.len() as u64);
        bytes
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        self.metrics.unbuffer(self.bytes.len() as u64);
    }
}

/// What the producer sends to the body.
#[derive(Debug)]
enum Message {
    Data(Chunk),
    /// Every byte has been sent; dropping it releases the export's permit and ends its count
    /// among the running exports.
    End(Finished),
    /// The export failed after the first byte (why: in the producer's `failure`).
    Failed,
}

/// What a completed export holds until the body takes its `End`.
#[derive(Debug)]
struct Finished {
    _permit: ExportPermit,
    running: RunningExport,
}

/// The chunks waiting for the body's channel, in order. The encoder writes here (what it
/// writes outside a slice, such as the BOM or the header, is copied into a chunk), and the
/// producer queues each slice's buffer here; both share one queue.
#[derive(Clone)]
struct ChunkWriter {
    pending: Arc<Mutex<VecDeque<Chunk>>>,
    metrics: Arc<Metrics>,
}

impl ChunkWriter {
    fn new(metrics: Arc<Metrics>) -> ChunkWriter {
        ChunkWriter { pending: Arc::default(), metrics }
    }

    fn chunks(&self) -> std::sync::MutexGuard<'_, VecDeque<Chunk>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `bytes` as the body's next chunk.
    fn queue(&self, bytes: Bytes) {
        if !bytes.is_empty() {
            self.metrics.buffer(bytes.len() as u64);
            let chunk = Chunk { bytes, metrics: self.metrics.clone() };
            self.chunks().push_back(chunk);
        }
    }

    /// The oldest chunk not yet sent.
    fn next(&self) -> Option<Chunk> {
        self.chunks().pop_front()
    }

    /// Drops every chunk not yet sent.
    fn clear(&self) {
        self.chunks().clear();
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.queue(Bytes::copy_from_slice(buf));
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
struct Buffers {
    free: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Buffers {
    const LIMIT: usize = 2;

    /// A buffer to encode into: one given back, or a new one with room for a slice and then
    /// some (it grows if a slice needs more).
    fn get(&self) -> Vec<u8> {
        let given_back = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        given_back.unwrap_or_else(|| Vec::with_capacity((SLICE_BYTES + SLICE_BYTES / 8) as usize))
    }

    /// `buffer` as a chunk's bytes, given back here when the chunk is dropped.
    fn chunk(&self, buffer: Vec<u8>) -> Bytes {
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
enum Stop {
    ClientGone,
    Failed(ApiError),
}

impl Stop {
    /// A failure of the encoder or of this module, as opposed to the engine.
    fn internal(detail: impl std::fmt::Display) -> Stop {
        Stop::Failed(ApiError::Internal(detail.to_string()))
    }
}

/// Encodes one export into the body's channel.
struct Producer {
    stream: ExportStream,
    encoder: Option<Encoder<ChunkWriter>>,
    buffers: Buffers,
    pending: ChunkWriter,
    tx: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
    log: Option<Arc<RequestLog>>,
    running: RunningExport,
    permit: ExportPermit,
    /// Rows encoded so far.
    rows: Arc<AtomicU64>,
    /// Why the export failed, for [`Chunks::next_chunk`].
    failure: Arc<OnceLock<Problem>>,
}

impl Producer {
    async fn run(mut self, first: Option<RecordBatch>) {
        let result = self.pump(first).await;
        let Producer { stream, encoder, pending, tx, mut running, permit, failure, .. } = self;
        // Release the query (memory, files) before anything else.
        drop(stream);
        drop(encoder);
        pending.clear();
        let stop = match result {
            Ok(rows) => {
                running.set_outcome(Outcome::Completed);
                let end = Message::End(Finished { _permit: permit, running });
                match tx.send(end).await {
                    Ok(()) => tracing::debug!(rows, "export sent"),
                    Err(mpsc::error::SendError(end)) => {
                        tracing::info!("export cancelled: the connection closed before the end");
                        if let Message::End(mut finished) = end {
                            finished.running.set_outcome(Outcome::Cancelled);
                        }
                    }
                }
                return;
            }
            Err(stop) => stop,
        };
        match stop {
            Stop::ClientGone => {
                tracing::info!("export cancelled: the connection closed before the end");
                running.set_outcome(Outcome::Cancelled);
            }
            Stop::Failed(error) => {
                let problem = error.problem();
                let detail = problem.detail.as_deref().unwrap_or(&problem.message);
                tracing::error!(%detail, "export failed after the first byte; aborting the response");
                running.set_outcome(Outcome::Failed);
                let _ = failure.set(problem);
                // If the queue is full, dropping `tx` without `End` aborts the response too.
                let _ = tx.try_send(Message::Failed);
            }
        }
        drop(tx);
        drop(permit);
        drop(running);
    }

    /// Sends every batch; the number of rows sent.
    async fn pump(&mut self, first: Option<RecordBatch>) -> Result<u64, Stop> {
        if let Some(batch) = first {
            self.write(&batch).await?;
        }
        loop {
            let next = tokio::select! {
                biased;
                () = self.tx.closed() => return Err(Stop::ClientGone),
                next = self.stream.next() => next,
            };
            match next {
                None => break,
                Some(Ok(batch)) => self.write(&batch).await?,
                Some(Err(e)) => return Err(Stop::Failed(e.into())),
            }
        }
        let encoder = self.encoder.take().ok_or_else(|| Stop::internal("the encoder is gone"))?;
        let rows = encoder.rows_written();
        encoder.finish().map_err(Stop::internal)?;
        self.send_pending().await?;
        Ok(rows)
    }

    /// Encodes `batch` in slices, sending each slice's chunks before encoding the next.
    async fn write(&mut self, batch: &RecordBatch) -> Result<(), Stop> {
        let rows = batch.num_rows();
        let mut offset = 0;
        while offset < rows {
            let encoder = self.encoder.as_mut().ok_or_else(|| Stop::internal("the encoder is gone"))?;
            let per_row = encoder.bytes_written().checked_div(encoder.rows_written()).unwrap_or(512).max(1);
            let slice = (SLICE_BYTES / per_row).clamp(16, 8192) as usize;
            let len = slice.min(rows - offset);
            encoder.write_batch(&batch.slice(offset, len)).map_err(Stop::internal)?;
            // Hand the slice to the body now: a small or slow export streams as it goes. The
            // encoder's buffer becomes the chunk, rather than being copied into one, and comes
            // back to `buffers` once the chunk is sent.
            let bytes = encoder.take_buffered(self.buffers.get());
            self.pending.queue(self.buffers.chunk(bytes));
            offset += len;
            self.send_pending().await?;
        }
        self.metrics.add_rows(rows as u64);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        if let Some(log) = &self.log {
            log.add_rows(rows as u64);
        }
        Ok(())
    }

    async fn send_pending(&mut self) -> Result<(), Stop> {
        loop {
            let Some(chunk) = self.pending.next() else { return Ok(()) };
            self.tx.send(Message::Data(chunk)).await.map_err(|_| Stop::ClientGone)?;
        }
    }
}

/// The export's bytes, from the producer: a response body (a [`Stream`] that ends with an
/// error if the producer stops without `End`), or read chunk by chunk with
/// [`Chunks::next_chunk`].
pub(crate) struct Chunks {
    rx: mpsc::Receiver<Message>,
    finished: bool,
    failure: Arc<OnceLock<Problem>>,
}

impl Chunks {
    /// The next chunk; `None` after the last; the failure if the export failed. Dropping
    /// `Chunks` before the end cancels the export.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Bytes>, Problem> {
        if self.finished {
            return Ok(None);
        }
        match self.rx.recv().await {
            Some(Message::Data(chunk)) => Ok(Some(chunk.take())),
            Some(Message::End(finished)) => {
                drop(finished);
                self.finished = true;
                Ok(None)
            }
            Some(Message::Failed) | None => {
                self.finished = true;
                let failure = self.failure.get().cloned();
                Err(failure.unwrap_or_else(|| {
                    ApiError::Internal("the export stopped before its end".into()).problem()
                }))
            }
        }
    }
}

impl Stream for Chunks {
    type Item = io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Bytes>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Message::Data(chunk))) => Poll::Ready(Some(Ok(chunk.take()))),
            Poll::Ready(Some(Message::End(finished))) => {
                drop(finished);
                self.finished = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Message::Failed) | None) => {
                self.finished = true;
                Poll::Ready(Some(Err(io::Error::other("the export failed; the response is incomplete"))))
            }
        }
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
