//! The local folder's own piece of the storage layer: listing with `std::fs`, strictly, and
//! positioned reads on the calling thread (their settings are `object::LOCAL_READS`).
//!
//! A local read is short, the decoding that follows runs on the same thread, and a hand-off
//! to a blocking pool for each one costs more than the read. A file is checked once, when
//! first read, against the identity the listing recorded ([`etag`]).
//!
//! `object_store`'s `LocalFileSystem` passes over an entry it cannot look at (in a folder that
//! can be listed but not entered, every file is passed over), which would silently shrink an
//! export. This listing treats only "not found" as absent and reports any other failure
//! naming the path. The objects it lists carry the ETag `LocalFileSystem` would give them
//! ([`etag`]), so that reads check a file's identity the same way over either.

use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use object_store::ObjectMeta;
use object_store::path::Path as ObjectPath;

use crate::error::{Error, Result};
use crate::storage::listing::{Listed, Listing};

/// A local file of the dataset, opened on its first read.
#[derive(Debug)]
pub(crate) struct LocalFile {
    path: PathBuf,
    file: Mutex<Option<File>>,
}

impl LocalFile {
    pub(crate) fn new(path: PathBuf) -> LocalFile {
        LocalFile { path, file: Mutex::new(None) }
    }

    /// The bytes of `range`, read on the calling thread; the file must still have the ETag
    /// `listed`.
    pub(crate) fn read(&self, listed: Option<&str>, range: Range<u64>) -> Result<Bytes> {
        let io = |e: std::io::Error| storage(&self.path, e);
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if file.is_none() {
            let opened = File::open(&self.path).map_err(io)?;
            let found = etag(&opened.metadata().map_err(io)?);
            if listed != Some(found.as_str()) {
                return Err(Error::Storage {
                    path: Some(self.path.display().to_string()),
                    message: "the file changed after the export selected it (its size, modification time \
                              or inode differ)"
                        .into(),
                });
            }
            *file = Some(opened);
        }
        let mut file = file.as_ref().expect("opened above");
        let len = (range.end - range.start) as usize;
        // Read into spare capacity: a zeroed buffer would cost a memset of every byte read.
        let mut buffer = Vec::with_capacity(len);
        let read = file
            .seek(SeekFrom::Start(range.start))
            .and_then(|_| file.take(len as u64).read_to_end(&mut buffer));
        match read {
            Ok(n) if n == len => Ok(Bytes::from(buffer)),
            Ok(n) => Err(io(std::io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("{n} of {len} bytes at {} read", range.start),
            ))),
            Err(e) => Err(io(e)),
        }
    }
}

/// The identity of a local file: inode, modification time in microseconds and size, in hex,
/// as `object_store`'s `LocalFileSystem` writes its ETags.
pub(crate) fn etag(meta: &Metadata) -> String {
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).unwrap_or_default();
    format!("{:x}-{:x}-{:x}", meta.ino(), mtime.as_micros(), meta.len())
}

/// The storage error of a failed file operation on `path`.
pub(crate) fn storage(path: &Path, e: std::io::Error) -> Error {
    Error::Storage { path: Some(path.display().to_string()), message: e.to_string() }
}

/// The entries of `folder`: sub-folders and files, by name; `None` if it does not exist (or is
/// not a folder). Names that are not UTF-8 cannot be part of the layout and are passed over;
/// so are sockets, devices and dangling links.
pub(crate) fn list(folder: &Path) -> Result<Option<Listing>> {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(None),
        Err(e) => return Err(storage(folder, e)),
    };
    let mut listing = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| storage(folder, e))?;
        let Ok(file_name) = entry.file_name().into_string() else { continue };
        let path = entry.path();
        // Follows links; only "not found" (vanished since listed, or a dangling link) is absent.
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(storage(&path, e)),
        };
        if meta.is_dir() {
            listing.folders.push(file_name);
        } else if meta.is_file() {
            let location = ObjectPath::from_absolute_path(&path).map_err(|e| Error::Storage {
                path: Some(path.display().to_string()),
                message: e.to_string(),
            })?;
            let last_modified = meta.modified().map(DateTime::<Utc>::from).map_err(|e| storage(&path, e))?;
            let e_tag = Some(etag(&meta));
            let meta = ObjectMeta { location, last_modified, size: meta.len(), e_tag, version: None };
            listing.objects.push(Listed { file_name, name: Arc::from(path.display().to_string()), meta });
        }
    }
    listing.sort();
    Ok(Some(listing))
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;
    use object_store::local::LocalFileSystem;

    use super::*;

    /// The ETag written here is the one `LocalFileSystem` gives the same file.
    #[tokio::test]
    async fn etags_are_those_of_object_stores_local_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        std::fs::write(&path, b"some bytes").unwrap();
        let listing = list(dir.path()).unwrap().unwrap();
        let listed = &listing.objects[0].meta;
        let store = LocalFileSystem::new();
        let head = store.head(&ObjectPath::from_absolute_path(&path).unwrap()).await.unwrap();
        assert_eq!(listed.e_tag, head.e_tag);
        assert!(listed.e_tag.is_some());
        assert_eq!(
            (listed.size, listed.last_modified, &listed.location),
            (head.size, head.last_modified, &head.location)
        );
    }
}
