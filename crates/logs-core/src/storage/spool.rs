//! Bytes an export read with its footers that its scan will need, kept on local disk when they
//! do not fit what the export keeps in memory (`catalog.rs`, `ScanBudget`): over a bucket, each
//! of them would otherwise be fetched again, a request each. A month of a streaming ingester's
//! files is thousands of small objects (docs/decisions.md, "Spooled for the scan").
//!
//! One unnamed temporary file per export, in the folder the engine is given or the system's
//! temporary folder (`TMPDIR`): created already unlinked (`tempfile::tempfile_in`), so nothing
//! is left behind when the export ends or the process dies, and no other process can open it
//! by name. It is written once, in order, while the footers come in, and read with positioned
//! reads from the page cache. A spool that cannot be created or read is no fault: the bytes
//! are fetched from the object again.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

/// What one export writes to its spool, at most.
#[derive(Debug)]
pub(crate) struct Spool {
    /// Where the file is made: `None`, the system's temporary folder.
    dir: Option<PathBuf>,
    file: Option<Arc<File>>,
    /// Bytes written so far, and the most that may be.
    written: u64,
    limit: u64,
    /// The file could not be created or written: keep nothing more.
    failed: bool,
}

/// Bytes of one object held in an export's spool.
#[derive(Debug, Clone)]
pub(crate) struct Spooled {
    file: Arc<File>,
    offset: u64,
    len: u64,
}

impl PartialEq for Spooled {
    fn eq(&self, other: &Spooled) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && self.offset == other.offset && self.len == other.len
    }
}

impl Eq for Spooled {}

impl Spool {
    /// A spool that holds at most `limit` bytes (0: none), in `dir` (`None`: the system's
    /// temporary folder). Its file is created by the first [`Spool::keep`].
    pub(crate) fn new(limit: u64, dir: Option<PathBuf>) -> Spool {
        Spool { dir, file: None, written: 0, limit, failed: false }
    }

    /// Writes `bytes` to the spool if they fit in what is left: the spooled copy, or `None`.
    pub(crate) fn keep(&mut self, bytes: &[u8]) -> Option<Spooled> {
        let len = bytes.len() as u64;
        if self.failed || len == 0 || self.written.saturating_add(len) > self.limit {
            return None;
        }
        let file = match &self.file {
            Some(file) => Arc::clone(file),
            None => match self.dir.as_ref().map_or_else(tempfile::tempfile, tempfile::tempfile_in) {
                Ok(file) => Arc::clone(self.file.insert(Arc::new(file))),
                Err(e) => return self.fail("create", e),
            },
        };
        // Written in order: the file's position is `written`.
        if let Err(e) = (&*file).write_all(bytes) {
            return self.fail("write", e);
        }
        let spooled = Spooled { file, offset: self.written, len };
        self.written += len;
        Some(spooled)
    }

    /// Bytes written so far.
    #[cfg(test)]
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    fn fail(&mut self, what: &str, e: std::io::Error) -> Option<Spooled> {
        tracing::warn!(error = %e, "could not {what} the scan's spool file: its bytes will be fetched again");
        self.failed = true;
        None
    }
}

impl Spooled {
    /// Bytes held.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// `len` bytes from `at` in the spooled bytes, if they are inside them and can be read.
    pub(crate) fn read(&self, at: u64, len: u64) -> Option<Bytes> {
        if at.checked_add(len)? > self.len {
            return None;
        }
        let mut buffer = vec![0; usize::try_from(len).ok()?];
        match self.file.read_exact_at(&mut buffer, self.offset + at) {
            Ok(()) => Some(Bytes::from(buffer)),
            Err(e) => {
                tracing::warn!(error = %e, "could not read the scan's spool file: the bytes will be fetched again");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spooled_bytes_read_back_exactly_and_the_limit_holds() {
        let mut spool = Spool::new(10, None);
        let a = spool.keep(b"abcd").unwrap();
        let b = spool.keep(b"efghij").unwrap();
        assert_eq!(spool.written(), 10);
        // Full: nothing more, however small.
        assert!(spool.keep(b"k").is_none());
        assert_eq!(&a.read(0, 4).unwrap()[..], b"abcd");
        assert_eq!(&a.read(1, 2).unwrap()[..], b"bc");
        assert_eq!(&b.read(0, 6).unwrap()[..], b"efghij");
        assert_eq!(&b.read(5, 1).unwrap()[..], b"j");
        // Only inside what each holds.
        assert!(a.read(2, 3).is_none());
        assert!(b.read(u64::MAX, 2).is_none());
        assert_eq!(a.len(), 4);
        assert_ne!(a, b);
        assert_eq!(a, a.clone());
    }

    #[test]
    fn a_spool_in_a_folder_leaves_no_file_there() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::new(100, Some(dir.path().to_owned()));
        let kept = spool.keep(b"abc").unwrap();
        assert_eq!(&kept.read(0, 3).unwrap()[..], b"abc");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the file has no name");
        // A folder that is not there: nothing kept, and no error.
        let mut spool = Spool::new(100, Some(dir.path().join("missing")));
        assert!(spool.keep(b"abc").is_none());
        assert!(spool.keep(b"abc").is_none());
    }

    #[test]
    fn a_spool_of_no_bytes_keeps_nothing() {
        let mut spool = Spool::new(0, None);
        assert!(spool.keep(b"a").is_none());
        assert!(spool.file.is_none(), "no file is created for nothing");
        let mut spool = Spool::new(100, None);
        assert!(spool.keep(b"").is_none());
    }
}
