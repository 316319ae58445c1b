//! The export's output file, with its disk blocks reserved ahead of the writes.
//!
//! A file written a megabyte at a time makes the filesystem reserve its blocks a page at a
//! time (ext4's delayed allocation: a reservation and an extent-tree update per 4 KiB). Asking
//! for [`CHUNK`] bytes at once with `fallocate` first lets those writes find their blocks
//! already there (docs/decisions.md, "The output file's blocks reserved ahead"). The
//! reservation is `FALLOC_FL_KEEP_SIZE`, so the file's size is always what was written, and
//! [`Preallocated::finish`] gives back the blocks reserved past the end.
//!
//! It is only ever a hint: where `fallocate` fails (a filesystem without it, a disk with less
//! than [`CHUNK`] free), the file is written as it would have been without it, and the write
//! itself says whether the disk is full.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};

/// The bytes reserved at a time: few calls for a large export, little held back for a small
/// one (and given back at the end either way).
pub(crate) const CHUNK: u64 = 16 << 20;

/// A file written from its start, reserving its blocks [`CHUNK`] bytes ahead of the writes.
#[derive(Debug)]
pub(crate) struct Preallocated<F> {
    file: F,
    written: u64,
    reserved: u64,
    /// Cleared by the first `fallocate` that fails: the file is then written as is.
    reserving: bool,
}

impl<F: AsFd + Write> Preallocated<F> {
    /// `file` must be empty and written only through this.
    pub(crate) fn new(file: F) -> Self {
        Preallocated { file, written: 0, reserved: 0, reserving: cfg!(target_os = "linux") }
    }

    /// The file, with the blocks reserved past its end given back.
    pub(crate) fn finish(mut self) -> io::Result<F> {
        self.file.flush()?;
        if self.reserved > self.written {
            // Truncating a file to its own size frees the blocks past its end.
            rustix::fs::ftruncate(self.file.as_fd(), self.written)?;
        }
        Ok(self.file)
    }

    fn reserve(&mut self, len: usize) {
        let end = self.written + len as u64;
        while self.reserving && end > self.reserved {
            match reserve(self.file.as_fd(), self.reserved, CHUNK) {
                Ok(()) => self.reserved += CHUNK,
                Err(_) => self.reserving = false,
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn reserve(file: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::{FallocateFlags, fallocate};
    Ok(fallocate(file, FallocateFlags::KEEP_SIZE, offset, len)?)
}

#[cfg(not(target_os = "linux"))]
fn reserve(_: BorrowedFd<'_>, _: u64, _: u64) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

impl<F: AsFd + Write> Write for Preallocated<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.reserve(buf.len());
        let written = self.file.write(buf)?;
        self.written += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;

    /// The bytes of disk the file holds, from `st_blocks` (512-byte units).
    fn allocated(file: &File) -> u64 {
        file.metadata().unwrap().blocks() * 512
    }

    #[test]
    fn the_file_holds_what_was_written_and_no_block_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        let mut out = Preallocated::new(File::create(&path).unwrap());
        let block: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let mut expected = Vec::new();
        for i in 0..20 {
            out.write_all(&block[i..]).unwrap();
            expected.extend_from_slice(&block[i..]);
        }
        assert!(out.written > CHUNK, "the writes cross a reserved chunk's end");
        if cfg!(target_os = "linux") {
            assert!(out.reserving, "fallocate failed on the temporary folder's filesystem");
            assert_eq!(out.reserved, 2 * CHUNK);
            assert!(allocated(&out.file) >= 2 * CHUNK, "the blocks are reserved ahead");
            assert_eq!(out.file.metadata().unwrap().len(), out.written, "the size is what was written");
        }
        let file = out.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        let size = file.metadata().unwrap().len();
        assert!(allocated(&file) < size + CHUNK / 2, "{} bytes allocated for {size}", allocated(&file));
    }

    #[test]
    fn a_file_that_cannot_be_reserved_is_written_as_is() {
        // `fallocate` on a character device fails (ENODEV); the writes must go on.
        let mut out = Preallocated::new(std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap());
        out.write_all(&[b'x'; 1000]).unwrap();
        assert!(!out.reserving);
        assert_eq!((out.written, out.reserved), (1000, 0));
        out.write_all(&[b'x'; 1000]).unwrap();
        assert_eq!(out.written, 2000);
        out.finish().unwrap();
    }

    #[test]
    fn an_empty_output_stays_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        let out = Preallocated::new(File::create(&path).unwrap());
        let file = out.finish().unwrap();
        assert_eq!(file.metadata().unwrap().len(), 0);
        assert_eq!(allocated(&file), 0);
    }
}
