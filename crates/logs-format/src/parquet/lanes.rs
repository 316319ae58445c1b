//! The two lanes a narrow Parquet export's row groups are encoded on: row group 0 on one
//! thread, row group 1 on the other, row group 2 on the first again, and so on. Each lane
//! encodes every column of its row group, so that the two threads share the work whatever the
//! columns, and the encoder waits for a lane only when a row group begins.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;

use arrow::datatypes::FieldRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter, compute_leaves};
use parquet::errors::ParquetError;

/// The row group a lane hands back once closed: its column chunks, in column order.
pub(super) type Closed = Result<Vec<ArrowColumnChunk>, ParquetError>;

/// What a lane is asked to do, in order.
enum Job {
    /// Begin a row group with these column writers.
    Start(Vec<ArrowColumnWriter>),
    /// Encode these rows into the row group in progress.
    Write(RecordBatch),
    /// Close the row group in progress and hand its chunks back.
    Close,
}

/// One encoding thread and its channels. Its queue is not bounded: what a lane holds is
/// bounded by the row groups, as the next row group on a lane waits for its last one.
struct Lane {
    jobs: Option<Sender<Job>>,
    closed: Receiver<Closed>,
    /// Set when the encoder lets go: the thread leaves the jobs still queued.
    dropped: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Lane {
    fn start(fields: Vec<FieldRef>) -> Lane {
        let (jobs, queue) = mpsc::channel();
        let (done, closed) = mpsc::channel();
        let dropped = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&dropped);
        let thread = std::thread::Builder::new()
            .name("parquet-lane".into())
            .spawn(move || work(&queue, &done, &fields, &seen))
            .ok();
        Lane { jobs: Some(jobs), closed, dropped, thread }
    }

    fn send(&self, job: Job) -> Result<(), ParquetError> {
        let sent = self.jobs.as_ref().map(|jobs| jobs.send(job).is_ok());
        if sent == Some(true) { Ok(()) } else { Err(stopped()) }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // The thread ends after the job at hand.
        self.dropped.store(true, Ordering::Relaxed);
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stopped() -> ParquetError {
    ParquetError::General("a Parquet encoding thread stopped".into())
}

/// A lane's loop: the jobs in order until the encoder lets go of the lane. After a failure the
/// row group's other writes are skipped and its `Close` answers with the failure.
fn work(queue: &Receiver<Job>, done: &Sender<Closed>, fields: &[FieldRef], dropped: &AtomicBool) {
    let mut writers = Vec::new();
    let mut failed = None;
    for job in queue {
        if dropped.load(Ordering::Relaxed) {
            return;
        }
        match job {
            Job::Start(next) => {
                writers = next;
                failed = None;
            }
            Job::Write(batch) if failed.is_none() => failed = encode(&mut writers, fields, &batch).err(),
            Job::Write(_) => {}
            Job::Close => {
                let writers = std::mem::take(&mut writers);
                let closed = match failed.take() {
                    Some(e) => Err(e),
                    None => writers.into_iter().map(ArrowColumnWriter::close).collect(),
                };
                if done.send(closed).is_err() {
                    return;
                }
            }
        }
    }
}

/// Encodes every column of `batch` into its writer.
fn encode(
    writers: &mut [ArrowColumnWriter],
    fields: &[FieldRef],
    batch: &RecordBatch,
) -> Result<(), ParquetError> {
    for ((writer, field), column) in writers.iter_mut().zip(fields).zip(batch.columns()) {
        for leaf in compute_leaves(field, column)? {
            writer.write(&leaf)?;
        }
    }
    Ok(())
}

/// The two lanes, started when first needed, and the row groups closed on them that the file
/// has not taken yet, oldest first.
pub(super) struct Lanes {
    fields: Vec<FieldRef>,
    lanes: Vec<Lane>,
    /// The lane of the row group in progress.
    current: usize,
    /// Whether a row group is in progress on `current`.
    open: bool,
    /// The lanes of the closed row groups not yet taken, oldest first.
    closing: VecDeque<usize>,
}

impl Lanes {
    pub(super) fn new(fields: Vec<FieldRef>) -> Lanes {
        Lanes { fields, lanes: Vec::new(), current: 0, open: false, closing: VecDeque::new() }
    }

    /// The lane the next row group goes to.
    fn next(&self) -> usize {
        if self.lanes.len() < 2 { self.lanes.len() } else { (self.current + 1) % 2 }
    }

    /// Whether the next row group's lane still holds a closed row group, which the file must
    /// take (with those closed before it) before the next row group begins.
    pub(super) fn next_holds_closed(&self) -> bool {
        self.closing.contains(&self.next())
    }

    /// Begins the next row group with `writers`, on the lane after the last one's (see
    /// [`Lanes::next_holds_closed`]).
    pub(super) fn start(&mut self, writers: Vec<ArrowColumnWriter>) -> Result<(), ParquetError> {
        debug_assert!(!self.open && !self.next_holds_closed(), "the next lane is not free");
        self.current = self.next();
        if self.current == self.lanes.len() {
            self.lanes.push(Lane::start(self.fields.clone()));
        }
        self.lanes[self.current].send(Job::Start(writers))?;
        self.open = true;
        Ok(())
    }

    /// Queues `batch` for the row group in progress.
    pub(super) fn write(&mut self, batch: RecordBatch) -> Result<(), ParquetError> {
        debug_assert!(self.open, "no row group in progress");
        self.lanes[self.current].send(Job::Write(batch))
    }

    /// Closes the row group in progress; it goes to the file once taken.
    pub(super) fn close(&mut self) -> Result<(), ParquetError> {
        debug_assert!(self.open, "no row group in progress");
        self.lanes[self.current].send(Job::Close)?;
        self.closing.push_back(self.current);
        self.open = false;
        Ok(())
    }

    /// The oldest closed row group, once its lane has finished it; `None` when no row group
    /// is closed and not yet taken.
    pub(super) fn wait_oldest(&mut self) -> Option<Closed> {
        let lane = self.closing.pop_front()?;
        Some(self.lanes[lane].closed.recv().map_err(|_| stopped()).and_then(|closed| closed))
    }

    /// The oldest closed row group if its lane has finished it, without waiting.
    pub(super) fn take_finished(&mut self) -> Option<Closed> {
        let lane = *self.closing.front()?;
        match self.lanes[lane].closed.try_recv() {
            Ok(closed) => {
                self.closing.pop_front();
                Some(closed)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.closing.pop_front();
                Some(Err(stopped()))
            }
        }
    }
}
