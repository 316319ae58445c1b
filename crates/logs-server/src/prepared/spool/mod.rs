//! The spool: prepared exports at rest, in a local folder or below a prefix of an object
//! store, through one `object_store::ObjectStore` either way.
//!
//! A prepared export `<key>` (64 hex digits, see [`super::key`]), written by job `<job>` (16
//! hex digits, one per job), is three objects, and a job in progress holds a fourth:
//!
//! ```text
//! <key>.<job>.csv      the export's bytes (or .json)
//! <key>.<job>.csv.gz   the same, gzip-compressed once
//! <key>.manifest.json  the job, sizes, SHA-256s, rows, time of creation: written last
//! <key>.lease          who prepares <key> now, until when, and how far it has got
//! <key>.wait.<waiter>  the job a client was answered 202 for (see `waiting`)
//! ```
//!
//! The manifest is written only after both copies are complete (a local store renames a
//! finished temporary file into place; S3 completes a multipart upload), so an export is
//! complete exactly when its manifest exists, and it names the copies of its own job: two
//! processes that prepared the same export never mix their bytes. The manifest is created
//! only if absent: of two jobs of one export (a replica lost its lease while its job ran), the
//! first to complete stands and the second deletes its copies.
//!
//! The lease makes the processes sharing a spool (replicas over one bucket) prepare each
//! export once: it is created only if absent (`If-None-Match: *`), renewed by its job, and
//! taken over (`If-Match` on the expired lease's ETag) when its owner stopped renewing it.
//!
//! A sweep, when the spool is opened and then periodically, lists the spool: it keeps the
//! exports whose manifest is younger than the time to keep them and the objects of exports
//! whose lease is live, and deletes everything else — expired exports and leases, copies no
//! manifest names (a job cut short by a crash) and, in a local folder, the temporary files of
//! unfinished writes. Complete exports are indexed in memory; one prepared by another process
//! is found in the store when asked for. A known manifest is trusted only while the listing
//! shows the `ETag` it had when it was written or read: another process may have deleted the
//! export and prepared it again.
//!
//! The spool's size is bounded: a job reserves room for each chunk it writes (both copies)
//! before writing it; when the bound is reached the oldest complete exports are deleted, and
//! when nothing is left to delete the job fails with [`SpoolError::Full`].

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use logs_core::object_store::local::LocalFileSystem;
use logs_core::object_store::path::Path as ObjectPath;
use logs_core::object_store::{
    Error as ObjectStoreError, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutPayload,
};
use logs_core::{DatasetLocation, S3Options};

use crate::config::ConfigError;

pub(crate) mod error;
mod lease;
mod manifest;
mod store;
mod waiting;
mod writer;

pub use error::SpoolError;
pub use lease::{Claim, JobProgress, Lease};
pub use manifest::{MANIFEST_VERSION, Manifest, now, random_hex};
use manifest::{copy_name, now_ms};
use store::Indexed;
pub use store::Spool;
pub use waiting::waiter;
pub use writer::SpoolWriter;

/// Why an object of the spool could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// It is gone (deleted by another sweep, or by hand).
    Gone,
    Failed(SpoolError),
}

impl Spool {
    /// Opens the spool at `location` (a local folder is created if needed) and sweeps it: see
    /// the module documentation.
    pub async fn open(
        location: &DatasetLocation,
        s3: &S3Options,
        ttl: Duration,
        max_bytes: u64,
    ) -> Result<Spool, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid(format!("--spool: {message}"));
        let (store, prefix, local_root): (Arc<dyn ObjectStore>, ObjectPath, _) = match location {
            DatasetLocation::Local(folder) => {
                std::fs::create_dir_all(folder).map_err(|source| ConfigError::Unreadable {
                    what: "spool folder",
                    path: folder.clone(),
                    source,
                })?;
                let root = std::fs::canonicalize(folder).map_err(|source| ConfigError::Unreadable {
                    what: "spool folder",
                    path: folder.clone(),
                    source,
                })?;
                let store = LocalFileSystem::new_with_prefix(&root).map_err(|e| invalid(e.to_string()))?;
                (Arc::new(store), ObjectPath::default(), Some(root))
            }
            DatasetLocation::S3 { .. } => {
                let (store, prefix) = location
                    .object_store(s3)
                    .map_err(|e| invalid(e.to_string()))?
                    .ok_or_else(|| invalid("not an object store".into()))?;
                (store, prefix, None)
            }
        };
        let spool = Spool { store, prefix, local_root, ttl, max_bytes, index: Mutex::default() };
        spool.check_conditional_writes().await?;
        spool.sweep().await.map_err(|e| ConfigError::Invalid(format!("cannot read the spool: {e}")))?;
        Ok(spool)
    }

    /// Leases need a store that refuses to create an object that exists (`If-None-Match: *`):
    /// one that does not would let every replica prepare every export. Checked once, with an
    /// object of its own, so that such a store stops the start instead.
    async fn check_conditional_writes(&self) -> Result<(), ConfigError> {
        let path = self.path(&format!("{}.probe", random_hex(8)));
        let create = || self.store.put_opts(&path, PutPayload::from_static(b"probe"), PutMode::Create.into());
        let unreadable = |e: &dyn std::fmt::Display| {
            ConfigError::Invalid(format!("--spool: cannot write to the spool: {e}"))
        };
        create().await.map_err(|e| unreadable(&e))?;
        let second = create().await;
        self.delete_object(&path).await;
        match second {
            Err(ObjectStoreError::AlreadyExists { .. } | ObjectStoreError::Precondition { .. }) => Ok(()),
            Err(e) => Err(unreadable(&e)),
            Ok(_) => Err(ConfigError::Invalid(
                "--spool: the store wrote over an object that a conditional write (If-None-Match: *) \
                 should have refused; prepared exports need a store that honours it"
                    .into(),
            )),
        }
    }

    /// The complete export `key` this process knows, unless it has expired.
    pub fn lookup(&self, key: &str) -> Option<Arc<Manifest>> {
        let index = self.lock();
        index.complete.get(key).map(|known| &known.manifest).filter(|m| !self.expired(m)).cloned()
    }

    /// The complete export `key`, unless it has expired: known here, or completed by another
    /// process sharing the spool (its manifest is then read and indexed).
    pub async fn find(&self, key: &str) -> Option<Arc<Manifest>> {
        if let Some(manifest) = self.lookup(key) {
            return Some(manifest);
        }
        let stored = self.read_manifest(key).await?;
        let mut index = self.lock();
        if !index.complete.contains_key(key) {
            index.add(stored.clone());
        }
        Some(stored.manifest)
    }

    /// The manifest of `key` in the store, if it is one of `key`, of this version, and not
    /// expired.
    async fn read_manifest(&self, key: &str) -> Option<Indexed> {
        let read = self.store.get(&self.manifest_path(key)).await.ok()?;
        let etag = read.meta.e_tag.clone();
        let manifest: Manifest = serde_json::from_slice(&read.bytes().await.ok()?).ok()?;
        (manifest.version == MANIFEST_VERSION && manifest.key == key && !self.expired(&manifest))
            .then(|| Indexed { manifest: Arc::new(manifest), etag })
    }

    /// Forgets `key` and deletes its objects: the manifest in the store, and the copies it
    /// names and those this process knew.
    pub async fn remove(&self, key: &str) {
        let known = self.lock().forget(key, None);
        let stored = self.read_manifest(key).await;
        self.delete_object(&self.manifest_path(key)).await;
        for manifest in known.iter().chain(stored.as_ref().map(|s| &s.manifest)) {
            self.delete_copies(manifest).await;
        }
    }

    /// Forgets `gone`, one of whose copies was found missing, and deletes its manifest — unless
    /// the store's manifest of its key is now another job's, which is then indexed instead.
    pub async fn forget_gone(&self, gone: &Manifest) {
        self.lock().forget(&gone.key, Some(&gone.job));
        match self.read_manifest(&gone.key).await {
            Some(stored) if stored.manifest.job != gone.job => {
                let mut index = self.lock();
                if !index.complete.contains_key(&gone.key) {
                    index.add(stored);
                }
            }
            _ => self.delete(gone).await,
        }
    }

    /// Room for `bytes` more: the oldest complete exports are deleted to make it; 503
    /// [`SpoolError::Full`] if even an empty spool would not hold it.
    pub async fn reserve(&self, bytes: u64, retry_after: Duration) -> Result<(), SpoolError> {
        let evicted = {
            let mut index = self.lock();
            let mut evicted = Vec::new();
            while index.stored + index.reserved + bytes > self.max_bytes {
                let oldest = index.complete.values().map(|known| &known.manifest);
                let oldest = oldest.min_by_key(|m| (m.created, m.key.clone())).cloned();
                let Some(oldest) = oldest else { break };
                index.forget(&oldest.key, None);
                evicted.push(oldest);
            }
            let fits = index.stored + index.reserved + bytes <= self.max_bytes;
            if fits {
                index.reserved += bytes;
            }
            (evicted, fits)
        };
        let (evicted, fits) = evicted;
        for manifest in evicted {
            tracing::info!(key = %manifest.key, "a prepared export was deleted to make room in the spool");
            self.delete(&manifest).await;
        }
        if fits { Ok(()) } else { Err(SpoolError::Full { needed: bytes, retry_after }) }
    }

    /// Gives back room reserved with [`Spool::reserve`].
    pub fn release(&self, bytes: u64) {
        let mut index = self.lock();
        index.reserved = index.reserved.saturating_sub(bytes);
    }

    /// Makes the export complete: writes its manifest, unless another job's of the same
    /// export is there already, and indexes the one that stands, which it answers.
    ///
    /// Two jobs of one export both reach here only when a replica lost its lease while its job
    /// ran (it stalled past the lease's time, and another took the job over). The manifest is
    /// created only if absent, so the first job to complete stands and the second deletes its
    /// own copies: every process then knows the same copies, and no sweep deletes those that
    /// another process serves.
    pub async fn commit(&self, manifest: Manifest) -> Result<Arc<Manifest>, SpoolError> {
        let json = serde_json::to_vec_pretty(&manifest).map_err(SpoolError::Manifest)?;
        let path = self.manifest_path(&manifest.key);
        let written = |mode: PutMode| self.store.put_opts(&path, PutPayload::from(json.clone()), mode.into());
        let standing = match written(PutMode::Create).await {
            Ok(put) => Indexed { manifest: Arc::new(manifest), etag: put.e_tag },
            Err(ObjectStoreError::AlreadyExists { .. } | ObjectStoreError::Precondition { .. }) => {
                match self.read_manifest(&manifest.key).await {
                    Some(other) => {
                        self.delete_copies(&manifest).await;
                        other
                    }
                    // Expired, or not a manifest: what the sweep would delete.
                    None => {
                        let put = written(PutMode::Overwrite).await.map_err(SpoolError::store("write"))?;
                        Indexed { manifest: Arc::new(manifest), etag: put.e_tag }
                    }
                }
            }
            Err(e) => return Err(SpoolError::store("write")(e)),
        };
        let manifest = Arc::clone(&standing.manifest);
        self.lock().add(standing);
        Ok(manifest)
    }

    /// The bytes `range` of one copy of `manifest`'s export.
    pub async fn read(
        &self,
        manifest: &Manifest,
        gzip: bool,
        range: Range<u64>,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, ReadError> {
        let name = manifest.copy_name(gzip);
        let options = GetOptions { range: Some(GetRange::Bounded(range)), ..GetOptions::default() };
        match self.store.get_opts(&self.path(&name), options).await {
            Ok(result) => Ok(result.into_stream().map_err(std::io::Error::other).boxed()),
            Err(ObjectStoreError::NotFound { .. }) => Err(ReadError::Gone),
            Err(e) => Err(ReadError::Failed(SpoolError::store("read")(e))),
        }
    }

    /// Bytes of complete exports, and bytes running jobs have written.
    pub fn usage(&self) -> (u64, u64) {
        let index = self.lock();
        (index.stored, index.reserved)
    }

    /// Deletes the copies that `job`, which could not complete, wrote of export `key`.
    pub async fn discard(&self, key: &str, job: &str, extension: &str) {
        for gzip in [false, true] {
            self.delete_object(&self.path(&copy_name(key, job, extension, gzip))).await;
        }
    }

    async fn delete(&self, manifest: &Manifest) {
        // The manifest first: from then on the export is incomplete, whatever else remains.
        self.delete_object(&self.manifest_path(&manifest.key)).await;
        self.delete_copies(manifest).await;
    }

    async fn delete_copies(&self, manifest: &Manifest) {
        for gzip in [false, true] {
            self.delete_object(&self.path(&manifest.copy_name(gzip))).await;
        }
    }

    /// Lists the spool and deletes what is neither a complete export that has not expired nor
    /// part of a live lease's export (see the module documentation); the index becomes what
    /// was kept.
    pub async fn sweep(&self) -> logs_core::object_store::Result<()> {
        let objects: Vec<_> = self.store.list(Some(&self.prefix)).try_collect().await?;
        let mut live = HashSet::new();
        let mut kept: HashMap<String, Indexed> = HashMap::new();
        for object in &objects {
            let Some(name) = object.location.filename() else { continue };
            if let Some(key) = name.strip_suffix(".lease") {
                let body = self.read_lease(&object.location).await.ok().and_then(|(body, _)| body);
                if body.is_some_and(|b| b.expires > now_ms()) {
                    live.insert(key.to_owned());
                } else {
                    self.delete_object(&object.location).await;
                }
            } else if let Some(key) = name.strip_suffix(".manifest.json") {
                // What this process knows is used only if the manifest is the one it saw.
                let known = self.lock().complete.get(key).cloned();
                let unchanged = |known: &Indexed| known.etag.is_some() && known.etag == object.e_tag;
                let manifest = match known.filter(|known| unchanged(known) && !self.expired(&known.manifest))
                {
                    Some(known) => Some(known),
                    None => self.read_manifest(key).await,
                };
                match manifest {
                    Some(manifest) => {
                        kept.insert(key.to_owned(), manifest);
                    }
                    None => self.delete_object(&object.location).await,
                }
            }
        }
        for object in &objects {
            let Some(name) = object.location.filename() else { continue };
            if name.ends_with(".lease") || name.ends_with(".manifest.json") {
                continue;
            }
            let key = name.split('.').next().unwrap_or_default();
            if live.contains(key) {
                continue;
            }

            // A job that completed since the listing wrote its manifest, then gave its lease
            // up: ask for the manifest before deleting what may be its copies.
            if !kept.contains_key(key)
                && let Some(manifest) = self.read_manifest(key).await
            {
                kept.insert(key.to_owned(), manifest);
            }
            // Who waits for an export is kept as long as the export.
            if name.contains(".wait.") && kept.contains_key(key) {
                continue;
            }
            let named = kept
                .get(key)
                .is_some_and(|m| m.manifest.copy_name(false) == name || m.manifest.copy_name(true) == name);
            if !named {
                self.delete_object(&object.location).await;
            }
        }
        if let Some(root) = &self.local_root {
            remove_unfinished_writes(root, &live);
        }
        let mut index = self.lock();
        index.stored = kept.values().map(|m| m.manifest.size()).sum();
        index.complete = kept;
        tracing::debug!(exports = index.complete.len(), bytes = index.stored, "spool swept");
        Ok(())
    }
}

/// A local store's unfinished writes are files named `<object>#<n>`, which its listing hides:
/// those of exports without a live lease are deleted.
fn remove_unfinished_writes(root: &Path, live: &HashSet<String>) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let unfinished = name
            .rsplit_once('#')
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let key = name.split('.').next().unwrap_or_default();
        if unfinished && !live.contains(key) {
            let path: PathBuf = entry.path();
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot delete an unfinished spool file");
            }
        }
    }
}

#[cfg(test)]
mod tests;
