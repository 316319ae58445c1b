//! Spills: the rest of a streamed export whose reader has stopped reading, kept in a temporary
//! file so that the query can run to its end and give back its memory, files and permit while
//! the reader takes its time (a loader inserting a chunk into a slow database).
//!
//! The producer of [`crate::export`] hands chunks to the body through a queue of
//! `chunk_queue` chunks. When the queue stays full for `spill_after`, it appends every later
//! chunk to the export's [`Spill`] instead: an unnamed temporary file in `spill_dir` (the
//! system deletes it when it is closed; a crash leaves nothing behind). The body reads the
//! queue first, then the file, so the bytes go out in order.
//!
//! The files' bytes count against one [`SpillQuota`] for the whole process
//! (`max_spill_bytes`), and at most `max_spilled_exports` exports hold a file at once (one file
//! descriptor each). When either bound is reached, the producer waits for its reader instead,
//! as without spilling (the query stays open), and goes back to the queue once the reader has
//! read the whole file.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use bytes::Bytes;
use futures::task::AtomicWaker;
use tokio::sync::Notify;

/// The most bytes the body reads from a spill at once.
const READ_BYTES: u64 = 512 * 1024;

/// The bounds of every export's spill together, and where the files go.
#[derive(Debug)]
pub struct SpillQuota {
    dir: PathBuf,
    max_bytes: u64,
    max_exports: usize,
    bytes: AtomicU64,
    exports: AtomicUsize,
}

impl SpillQuota {
    /// Files in `dir` (the system's temporary folder if `None`), `max_bytes` in all, at most
    /// `max_exports` files at once. `max_bytes` 0 turns spilling off.
    pub fn new(dir: Option<PathBuf>, max_bytes: u64, max_exports: usize) -> SpillQuota {
        let dir = dir.unwrap_or_else(std::env::temp_dir);
        SpillQuota { dir, max_bytes, max_exports, bytes: AtomicU64::new(0), exports: AtomicUsize::new(0) }
    }

    /// Bytes spilled and exports holding a spill, now.
    pub fn usage(&self) -> (u64, usize) {
        (self.bytes.load(Ordering::Relaxed), self.exports.load(Ordering::Relaxed))
    }

    /// A new spill, unless spilling is off, `max_spilled_exports` exports hold one, or the file
    /// cannot be made (logged: the export goes on without it).
    pub fn open(self: &Arc<Self>) -> Option<Spill> {
        if self.max_bytes == 0 {
            return None;
        }
        let counted = self
            .exports
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max_exports).then_some(n + 1));
        if counted.is_err() {
            tracing::debug!("not spilling: max_spilled_exports exports hold a spill");
            return None;
        }
        match tempfile::tempfile_in(&self.dir) {
            Ok(file) => Some(Spill(Arc::new(Shared {
                file,
                quota: Arc::clone(self),
                state: Mutex::default(),
                reader: AtomicWaker::new(),
                drained: Notify::new(),
            }))),
            Err(e) => {
                self.exports.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!(dir = %self.dir.display(), error = %e, "cannot make a spill file");
                None
            }
        }
    }

    fn reserve(&self, bytes: u64) -> bool {
        self.bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.max_bytes)
            })
            .is_ok()
    }
}

/// One export's spill; the producer and the body each hold a clone.
#[derive(Debug, Clone)]
pub struct Spill(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    file: File,
    quota: Arc<SpillQuota>,
    state: Mutex<State>,
    /// The body, woken when bytes are appended.
    reader: AtomicWaker,
    /// The producer, woken when the body has read every byte written.
    drained: Notify,
}

#[derive(Debug, Default)]
struct State {
    written: u64,
    /// Read by the body, or being read.
    read: u64,
    /// The end offset and rows of each chunk appended and not yet wholly read.
    chunks: VecDeque<(u64, u64)>,
}

/// What [`Spill::append`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Appended {
    Yes,
    /// The quota has no room: wait for the reader to drain the spill.
    NoRoom,
}

impl Spill {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes written and not yet taken by the body.
    pub fn unread(&self) -> u64 {
        let state = self.state();
        state.written - state.read
    }

    /// Appends `bytes` (which hold `rows` whole rows) at the end of the file.
    pub async fn append(&self, bytes: Bytes, rows: u64) -> io::Result<Appended> {
        let len = bytes.len() as u64;
        if !self.0.quota.reserve(len) {
            return Ok(Appended::NoRoom);
        }
        let offset = self.state().written;
        let shared = Arc::clone(&self.0);
        let written = tokio::task::spawn_blocking(move || shared.file.write_all_at(&bytes, offset)).await;
        let written = written.map_err(io::Error::other).and_then(|r| r);
        if let Err(e) = written {
            self.0.quota.bytes.fetch_sub(len, Ordering::AcqRel);
            return Err(e);
        }
        {
            let mut state = self.state();
            state.written += len;
            let end = state.written;
            state.chunks.push_back((end, rows));
        }
        self.0.reader.wake();
        Ok(Appended::Yes)
    }

    /// Waits until the body has read every byte written.
    pub async fn drained(&self) {
        loop {
            let notified = self.0.drained.notified();
            if self.unread() == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Starts reading the next bytes for the body, if any were written (else registers
    /// `waker` for the next append): the bytes and the rows that they complete.
    pub fn read_next(&self, waker: &Waker) -> Option<tokio::task::JoinHandle<io::Result<(Bytes, u64)>>> {
        self.0.reader.register(waker);
        let (offset, len) = {
            let mut state = self.state();
            if state.read == state.written {
                return None;
            }
            let offset = state.read;
            let len = (state.written - offset).min(READ_BYTES);
            state.read += len;
            (offset, len)
        };
        let spill = self.clone();
        Some(tokio::task::spawn_blocking(move || {
            let mut buffer = vec![0; len as usize];
            spill.0.file.read_exact_at(&mut buffer, offset)?;
            let end = offset + len;
            let mut state = spill.state();
            let mut rows = 0;
            while let Some(&(chunk_end, chunk_rows)) = state.chunks.front()
                && chunk_end <= end
            {
                rows += chunk_rows;
                state.chunks.pop_front();
            }
            let drained = state.read == state.written;
            drop(state);
            if drained {
                spill.0.drained.notify_waiters();
            }
            Ok((Bytes::from(buffer), rows))
        }))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let written = self.state.get_mut().map(|s| s.written).unwrap_or_else(|e| e.into_inner().written);
        self.quota.bytes.fetch_sub(written, Ordering::AcqRel);
        self.quota.exports.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop_waker() -> Waker {
        futures::task::noop_waker()
    }

    async fn read_all(spill: &Spill) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let mut rows = 0;
        while let Some(read) = spill.read_next(&noop_waker()) {
            let (bytes, r) = read.await.unwrap().unwrap();
            out.extend_from_slice(&bytes);
            rows += r;
        }
        (out, rows)
    }

    #[tokio::test]
    async fn appended_bytes_read_back_in_order_with_their_rows_and_free_the_quota_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let quota = Arc::new(SpillQuota::new(Some(dir.path().to_owned()), 2 << 20, 4));
        let spill = quota.open().unwrap();
        let big = vec![7u8; 700 * 1024];
        assert_eq!(spill.append(Bytes::from_static(b"head,"), 0).await.unwrap(), Appended::Yes);
        assert_eq!(spill.append(Bytes::from(big.clone()), 3).await.unwrap(), Appended::Yes);
        assert_eq!(spill.unread(), 5 + big.len() as u64);
        assert_eq!(quota.usage(), (5 + big.len() as u64, 1));
        // The file has no name: nothing is left in the folder.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

        let (bytes, rows) = read_all(&spill).await;
        assert_eq!(&bytes[..5], b"head,");
        assert_eq!(&bytes[5..], &big[..]);
        assert_eq!(rows, 3, "the rows of a chunk count once it is read whole");
        assert_eq!(spill.unread(), 0);
        spill.drained().await;
        drop(spill);
        assert_eq!(quota.usage(), (0, 0));
    }

    #[tokio::test]
    async fn the_quota_bounds_bytes_and_spills_and_zero_bytes_turns_spilling_off() {
        let dir = tempfile::tempdir().unwrap();
        let quota = Arc::new(SpillQuota::new(Some(dir.path().to_owned()), 10, 1));
        let spill = quota.open().unwrap();
        assert!(quota.open().is_none(), "one spill at most");
        assert_eq!(spill.append(Bytes::from_static(b"123456"), 1).await.unwrap(), Appended::Yes);
        assert_eq!(spill.append(Bytes::from_static(b"78901"), 1).await.unwrap(), Appended::NoRoom);
        assert_eq!(spill.append(Bytes::from_static(b"7890"), 1).await.unwrap(), Appended::Yes);
        drop(spill);
        assert!(quota.open().is_some(), "a spill dropped makes room for another");
        let off = Arc::new(SpillQuota::new(Some(dir.path().to_owned()), 0, 8));
        assert!(off.open().is_none());
    }

    #[tokio::test]
    async fn a_spill_that_cannot_be_made_is_not_counted() {
        let quota = Arc::new(SpillQuota::new(Some("/nonexistent/spill".into()), 1 << 20, 1));
        assert!(quota.open().is_none());
        assert_eq!(quota.usage(), (0, 0));
    }
}
