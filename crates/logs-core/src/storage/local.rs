//! The local folder's own piece of the storage layer: listing with `std::fs`, strictly.
//!
//! `object_store`'s `LocalFileSystem` passes over an entry it cannot look at (in a folder that
//! can be listed but not entered, every file is passed over), which would silently shrink an
//! export. This listing treats only "not found" as absent and reports any other failure
//! naming the path. The objects it lists carry the ETag `LocalFileSystem` would give them
//! ([`etag`]), so that reads check a file's identity the same way over either.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use chrono::{DateTime, Utc};
use object_store::ObjectMeta;
use object_store::path::Path as ObjectPath;

use crate::error::{Error, Result};
use crate::storage::catalog::{Listed, Listing};

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
