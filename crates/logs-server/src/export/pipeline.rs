//! The export pipeline: [`ExportRunner::start`] runs a validated request under its permit,
//! for the handler ([`super::handler`]) and for the jobs of prepared exports alike.
//!
//! It starts the query and waits for its first batch (at most `first_byte_timeout`), so that
//! every failure up to then gets a status and a JSON body. Then a producer task encodes the
//! batches in slices of about 512 KiB, flushes each slice as one chunk, and hands the chunks to
//! the response body ([`super::chunks`]) through a channel of `chunk_queue` chunks:
//!
//! - backpressure: a client that reads slowly makes `send` wait, which stops the query from
//!   being polled; memory stays bounded by the queue;
//! - a client that stops reading: once the queue has stayed full for `spill_after`, the rest
//!   of the export goes to a temporary file ([`crate::spill`]), so that the query runs to its
//!   end and gives back its memory, files and permit; the body sends the file after the queue.
//!   The connection then waits for the reader for `reader_idle_timeout` (not the server's
//!   write timeout) before it is closed, which aborts the body;
//! - a client that goes away drops the body and with it the receiver: the producer sees the
//!   channel closed (even while waiting for the engine) and drops the query, which cancels it
//!   and releases its memory and files at once;
//! - a failure after the first byte ends the body with an error, which makes hyper abort the
//!   connection (no final chunk): the client sees an incomplete transfer, never a short
//!   response that looks complete;
//! - at the end the producer releases the query, then sends `End` carrying the export's permit:
//!   the permit is released when the body takes `End`, before the final chunk goes out, so a
//!   client that has the whole body can start its next export at once (one at a time never
//!   meets the per-token limit), and until then the queued chunks still count against it. An
//!   export that spilled gives its permit back as soon as its query has ended: what is left
//!   is only bytes on disk for a reader that is not reading.
//!
//! The access log's `rows` are the rows of the chunks the body has handed to the connection
//! (each chunk holds whole rows), not those encoded: an export cut short logs what was sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use logs_core::arrow::record_batch::RecordBatch;
use logs_core::{Engine, ExportRequest, ExportStream};
use logs_format::{Encoder, EncoderOptions, Format, JsonIntegers};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::chunks::{Buffers, ChunkWriter, Chunks, Finished, Message, SLICE_BYTES, Spilling, Stop};
use crate::auth::TokenHash;
use crate::error::{ApiError, Problem};
use crate::limits::{ExportLimiter, ExportPermit};
use crate::log::RequestLog;
use crate::metrics::{Metrics, Outcome, RunningExport};
use crate::settings::Settings;
use crate::spill::SpillQuota;

/// What running an export takes: the engine, the metrics, the limits on exports running at
/// once, the spill files' bounds and the four settings the pipeline reads. Cheap to clone;
/// the service keeps one.
#[derive(Debug, Clone)]
pub(crate) struct ExportRunner {
    engine: Arc<Engine>,
    metrics: Arc<Metrics>,
    limiter: Arc<ExportLimiter>,
    spill: Arc<SpillQuota>,
    first_byte_timeout: Duration,
    chunk_queue: usize,
    json_integers: JsonIntegers,
    spill_after: Duration,
}

/// An export running in a producer task.
pub(crate) struct Started {
    /// Its encoded bytes, as they come.
    pub chunks: Chunks,
    /// Unreadable files that `skip_unavailable_shards=true` left out.
    pub skipped: usize,
    /// The cursor continuing the chain after this export, for a chain's call.
    pub cursor: Option<String>,
    /// Rows encoded so far.
    pub rows: Arc<AtomicU64>,
    /// How far the scan has got.
    pub scan: Arc<ScanShare>,
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

/// How far an export's scan has got: bytes of the selected files covered, and their total
/// (see [`ExportStream::progress`]), as of the last batch.
#[derive(Debug, Default)]
pub(crate) struct ScanShare {
    covered: AtomicU64,
    total: AtomicU64,
}

impl ScanShare {
    fn record(&self, (covered, total): (u64, u64)) {
        self.total.store(total, Ordering::Relaxed);
        self.covered.store(covered, Ordering::Relaxed);
    }

    /// Bytes covered and the total.
    pub(crate) fn get(&self) -> (u64, u64) {
        (self.covered.load(Ordering::Relaxed), self.total.load(Ordering::Relaxed))
    }
}

impl ExportRunner {
    /// The runner of `engine`'s exports, under `limiter`, with `settings`' pipeline settings.
    pub(crate) fn new(
        engine: Arc<Engine>,
        metrics: Arc<Metrics>,
        limiter: Arc<ExportLimiter>,
        spill: Arc<SpillQuota>,
        settings: &Settings,
    ) -> ExportRunner {
        ExportRunner {
            engine,
            metrics,
            limiter,
            spill,
            first_byte_timeout: settings.first_byte_timeout,
            chunk_queue: settings.chunk_queue,
            json_integers: settings.json_integers,
            spill_after: settings.spill_after,
        }
    }

    /// A permit to run one more export for `token` (429 or 503 when a limit is reached).
    pub(crate) fn acquire(&self, token: TokenHash) -> Result<ExportPermit, ApiError> {
        self.limiter.acquire(token)
    }

    /// How JSON exports write integers (it changes the bytes of an export).
    pub(crate) fn json_integers(&self) -> JsonIntegers {
        self.json_integers
    }

    /// The longest wait for an export's first rows.
    pub(crate) fn first_byte_timeout(&self) -> Duration {
        self.first_byte_timeout
    }

    /// Starts `request` under `permit`: runs the query to its first batch (at most
    /// `first_byte_timeout`), so that every failure up to then is an error to answer, then
    /// hands the rest to a producer task (see the module documentation).
    pub(crate) async fn start(
        &self,
        format: Format,
        request: &ExportRequest,
        permit: ExportPermit,
        log: Option<Arc<RequestLog>>,
    ) -> Result<Started, ApiError> {
        let mut running = self.metrics.export_started();
        let limit = self.first_byte_timeout;
        let started = match tokio::time::timeout(limit, start_export(&self.engine, request)).await {
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
        let cursor = stream.next_cursor().map(str::to_owned);
        for file in &stream.selection().skipped {
            tracing::warn!(path = %file.name, reason = %file.reason, "skipped an unreadable file");
        }
        self.metrics.add_skipped_files(skipped as u64);

        let options =
            EncoderOptions::default().with_bom(request.use_utf8_bom()).with_json_integers(self.json_integers);
        let pending = ChunkWriter::new(Arc::clone(&self.metrics));
        let writer = pending.clone();
        let encoder = match Encoder::new(format, writer, &stream.schema(), options) {
            Ok(encoder) => encoder,
            Err(e) => {
                running.set_outcome(Outcome::Failed);
                return Err(ApiError::Internal(format!("cannot encode the export's schema: {e}")));
            }
        };
        let (tx, rx) = mpsc::channel(self.chunk_queue);
        let rows = Arc::new(AtomicU64::new(0));
        let scan = Arc::new(ScanShare::default());
        scan.record(stream.progress());
        let failure = Arc::new(OnceLock::new());
        let spill = Arc::new(OnceLock::new());
        let producer = Producer {
            rows: Arc::clone(&rows),
            scan: Arc::clone(&scan),
            failure: Arc::clone(&failure),
            stream,
            encoder: Some(encoder),
            buffers: Buffers::default(),
            pending,
            tx,
            metrics: Arc::clone(&self.metrics),
            running,
            permit,
            spilling: Spilling {
                quota: Arc::clone(&self.spill),
                after: self.spill_after,
                spill: Arc::clone(&spill),
            },
        };
        let producer = tokio::spawn(producer.run(first).instrument(tracing::Span::current()));
        let chunks = Chunks::new(rx, failure, spill, log, format.broken_ending());
        Ok(Started { chunks, skipped, cursor, rows, scan, producer })
    }
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

/// Encodes one export into the body's channel.
struct Producer {
    stream: ExportStream,
    encoder: Option<Encoder<ChunkWriter>>,
    buffers: Buffers,
    pending: ChunkWriter,
    tx: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
    running: RunningExport,
    permit: ExportPermit,
    spilling: Spilling,
    /// Rows encoded so far.
    rows: Arc<AtomicU64>,
    scan: Arc<ScanShare>,
    /// Why the export failed, for [`Chunks::next_chunk`].
    failure: Arc<OnceLock<Problem>>,
}

impl Producer {
    async fn run(mut self, first: Option<RecordBatch>) {
        let result = self.pump(first).await;
        let Producer { stream, encoder, pending, tx, mut running, permit, failure, spilling, .. } = self;
        // Release the query (memory, files) before anything else.
        drop(stream);
        drop(encoder);
        pending.clear();
        let stop = match result {
            Ok(rows) => {
                // Completed once the body takes `End` (see `Chunks`); dropped before, cancelled.
                // Spilled: the rest is bytes on disk, which need no permit.
                let permit = if spilling.spill.get().is_some() {
                    drop(permit);
                    None
                } else {
                    Some(permit)
                };
                let end = Message::End(Finished { _permit: permit, running });
                match tx.send(end).await {
                    Ok(()) => tracing::debug!(rows, "export sent"),
                    Err(mpsc::error::SendError(_)) => {
                        tracing::info!("export cancelled: the connection closed before the end");
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
        self.scan.record(self.stream.progress());
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
            self.pending.queue(self.buffers.chunk(bytes), len as u64);
            offset += len;
            self.send_pending().await?;
        }
        self.metrics.add_rows(rows as u64);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.scan.record(self.stream.progress());
        Ok(())
    }

    async fn send_pending(&mut self) -> Result<(), Stop> {
        while let Some(chunk) = self.pending.next() {
            self.spilling.send(&self.tx, chunk).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runner over the repository's small dataset, without a server, state or router.
    fn runner(settings: &Settings) -> ExportRunner {
        let dataset = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/dataset");
        let engine = Arc::new(Engine::open(dataset, logs_core::EngineConfig::default()).unwrap());
        let limiter =
            ExportLimiter::new(settings.max_exports, settings.max_exports_per_token, settings.retry_after);
        let spill = SpillQuota::new(None, settings.max_spill_bytes, settings.max_spilled_exports);
        ExportRunner::new(engine, Arc::default(), Arc::new(limiter), Arc::new(spill), settings)
    }

    #[tokio::test]
    async fn a_runner_streams_an_export_and_gives_its_permit_back_without_a_server() {
        let settings = Settings { max_exports_per_token: 1, ..Settings::default() };
        let runner = runner(&settings);
        let query =
            "application_id=1001&date_since=2026-10-01&date_until=2026-10-03&fields=error_id&limit=25";
        let request = ExportRequest::parse(query, runner.engine.policy()).unwrap();
        let token = TokenHash::of("a token");
        let permit = runner.acquire(token).unwrap();
        let second = runner.acquire(token).map(|_| ());
        assert!(matches!(second, Err(ApiError::TooManyExports { max: 1, .. })), "{second:?}");

        let mut started = runner.start(Format::Csv, &request, permit, None).await.unwrap();
        let mut csv = Vec::new();
        while let Some(chunk) = started.chunks.next_chunk().await.unwrap() {
            csv.extend_from_slice(&chunk);
        }
        let text = String::from_utf8(csv).unwrap();
        assert_eq!(text.lines().next(), Some("error_id"));
        assert_eq!(text.lines().count(), 26, "the header and 25 rows");
        assert_eq!(started.rows.load(Ordering::Relaxed), 25);
        assert_eq!(runner.metrics.exports().completed, 1);
        assert_eq!(runner.limiter.running(), 0, "the permit is back once the body has taken the end");
        runner.acquire(token).unwrap();
    }
}
