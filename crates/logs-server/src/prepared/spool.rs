//! The spool: prepared exports at rest, in a local folder or below a prefix of an object
//! store, through one `object_store::ObjectStore` either way.
//!
//! A prepared export `<key>` (64 hex digits, see [`super::key`]) is three objects:
//!
//! ```text
//! <key>.csv            the export's bytes (or <key>.json)
//! <key>.csv.gz         the same, gzip-compressed once
//! <key>.manifest.json  sizes, SHA-256s, rows, time of creation: written last
//! ```
//!
//! The manifest is written only after both copies are complete (a local store renames a
//! finished temporary file into place; S3 completes a multipart upload), so an export is
//! complete exactly when its manifest exists: opening the spool keeps the exports with a
//! manifest younger than the time to keep them, and deletes everything else — expired
//! exports, copies without a manifest (a job cut short by a crash) and, in a local folder,
//! the temporary files of unfinished writes. The index of complete exports is then kept in
//! memory; expired entries are deleted as they are found and by a sweep every minute.
//!
//! The spool's size is bounded: a job reserves room for each chunk it writes (both copies)
//! before writing it; when the bound is reached the oldest complete exports are deleted, and
//! when nothing is left to delete the job fails with 503 `spool_full`.

use std::collections::HashMap;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use logs_core::object_store::buffered::BufWriter;
use logs_core::object_store::local::LocalFileSystem;
use logs_core::object_store::path::Path as ObjectPath;
use logs_core::object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload};
use logs_core::{DatasetLocation, S3Options};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::config::ConfigError;
use crate::error::ApiError;

/// The manifest's format version: a manifest of another version is not trusted.
const MANIFEST_VERSION: u32 = 1;

/// Bytes each copy buffers before its upload starts (and the size of an upload's parts).
const WRITE_BUFFER: usize = 8 * 1024 * 1024;

/// What a complete prepared export is: written last, as `<key>.manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub key: String,
    /// `csv` or `json`.
    pub extension: String,
    /// When it was completed, in Unix seconds.
    pub created: u64,
    pub rows: u64,
    /// Unreadable files that `skip_unavailable_shards=true` left out.
    pub skipped_shards: u64,
    pub plain: Representation,
    pub gzip: Representation,
}

/// One copy of a prepared export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Representation {
    pub bytes: u64,
    /// Of the copy's bytes, as hex: the copy's strong `ETag`.
    pub sha256: String,
}

impl Manifest {
    /// Both copies' bytes: what the export takes in the spool.
    pub fn size(&self) -> u64 {
        self.plain.bytes + self.gzip.bytes
    }
}

/// The spool (see the module documentation).
#[derive(Debug)]
pub struct Spool {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    ttl: Duration,
    max_bytes: u64,
    index: Mutex<Index>,
}

#[derive(Debug, Default)]
struct Index {
    complete: HashMap<String, Arc<Manifest>>,
    /// Bytes of the complete exports.
    stored: u64,
    /// Bytes that running jobs have written so far.
    reserved: u64,
}

/// Why an object of the spool could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// It is gone (deleted by another sweep, or by hand).
    Gone,
    Failed(ApiError),
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
        let (store, prefix): (Arc<dyn ObjectStore>, ObjectPath) = match location {
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
                remove_unfinished_writes(&root);
                let store = LocalFileSystem::new_with_prefix(&root).map_err(|e| invalid(e.to_string()))?;
                (Arc::new(store), ObjectPath::default())
            }
            DatasetLocation::S3 { .. } => location
                .object_store(s3)
                .map_err(|e| invalid(e.to_string()))?
                .ok_or_else(|| invalid("not an object store".into()))?,
        };
        let spool = Spool { store, prefix, ttl, max_bytes, index: Mutex::default() };
        spool
            .sweep_at_start()
            .await
            .map_err(|e| ConfigError::Invalid(format!("cannot read the spool: {e}")))?;
        Ok(spool)
    }

    /// The complete export `key`, unless it has expired.
    pub fn lookup(&self, key: &str) -> Option<Arc<Manifest>> {
        let index = self.lock();
        index.complete.get(key).filter(|m| !self.expired(m)).cloned()
    }

    /// Forgets `key` and deletes its objects.
    pub async fn remove(&self, key: &str) {
        let removed = {
            let mut index = self.lock();
            let removed = index.complete.remove(key);
            if let Some(manifest) = &removed {
                index.stored -= manifest.size();
            }
            removed
        };
        if let Some(manifest) = removed {
            self.delete(&manifest).await;
        }
    }

    /// Deletes the exports that have expired.
    pub async fn expire(&self) {
        let expired: Vec<Arc<Manifest>> = {
            let mut index = self.lock();
            let keys: Vec<String> =
                index.complete.iter().filter(|(_, m)| self.expired(m)).map(|(k, _)| k.clone()).collect();
            let mut expired = Vec::new();
            for key in keys {
                if let Some(manifest) = index.complete.remove(&key) {
                    index.stored -= manifest.size();
                    expired.push(manifest);
                }
            }
            expired
        };
        for manifest in expired {
            tracing::debug!(key = %manifest.key, "a prepared export expired");
            self.delete(&manifest).await;
        }
    }

    /// Room for `bytes` more: the oldest complete exports are deleted to make it; 503
    /// `spool_full` if even an empty spool would not hold it.
    pub async fn reserve(&self, bytes: u64, retry_after: Duration) -> Result<(), ApiError> {
        let evicted = {
            let mut index = self.lock();
            let mut evicted = Vec::new();
            while index.stored + index.reserved + bytes > self.max_bytes {
                let oldest = index.complete.values().min_by_key(|m| (m.created, m.key.clone())).cloned();
                let Some(oldest) = oldest else { break };
                index.complete.remove(&oldest.key);
                index.stored -= oldest.size();
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
        if fits { Ok(()) } else { Err(ApiError::SpoolFull { retry_after }) }
    }

    /// Gives back room reserved with [`Spool::reserve`].
    pub fn release(&self, bytes: u64) {
        let mut index = self.lock();
        index.reserved = index.reserved.saturating_sub(bytes);
    }

    /// Starts writing the copies of export `key`.
    pub fn writer(&self, key: &str, extension: &str, gzip_level: u32) -> SpoolWriter {
        let plain = self.path(&format!("{key}.{extension}"));
        let gzip = self.path(&format!("{key}.{extension}.gz"));
        SpoolWriter {
            plain: BufWriter::with_capacity(Arc::clone(&self.store), plain, WRITE_BUFFER),
            gzip: BufWriter::with_capacity(Arc::clone(&self.store), gzip, WRITE_BUFFER),
            encoder: GzEncoder::new(Vec::new(), Compression::new(gzip_level)),
            plain_sha: Sha256::new(),
            gzip_sha: Sha256::new(),
            plain_bytes: 0,
            gzip_bytes: 0,
        }
    }

    /// Makes the export complete: writes its manifest and adds it to the index.
    pub async fn commit(&self, manifest: Manifest) -> Result<(), ApiError> {
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| ApiError::Internal(format!("cannot write a manifest: {e}")))?;
        let path = self.path(&format!("{}.manifest.json", manifest.key));
        self.store.put(&path, PutPayload::from(json)).await.map_err(|e| spool_error("write", &e))?;
        let mut index = self.lock();
        let size = manifest.size();
        if let Some(old) = index.complete.insert(manifest.key.clone(), Arc::new(manifest)) {
            index.stored -= old.size();
        }
        index.stored += size;
        Ok(())
    }

    /// The bytes `range` of one copy of `manifest`'s export.
    pub async fn read(
        &self,
        manifest: &Manifest,
        gzip: bool,
        range: Range<u64>,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, ReadError> {
        let name = if gzip {
            format!("{}.{}.gz", manifest.key, manifest.extension)
        } else {
            format!("{}.{}", manifest.key, manifest.extension)
        };
        let options = GetOptions { range: Some(GetRange::Bounded(range)), ..GetOptions::default() };
        match self.store.get_opts(&self.path(&name), options).await {
            Ok(result) => Ok(result.into_stream().map_err(std::io::Error::other).boxed()),
            Err(logs_core::object_store::Error::NotFound { .. }) => Err(ReadError::Gone),
            Err(e) => Err(ReadError::Failed(spool_error("read", &e))),
        }
    }

    /// Bytes of complete exports, and bytes running jobs have written.
    pub fn usage(&self) -> (u64, u64) {
        let index = self.lock();
        (index.stored, index.reserved)
    }

    fn expired(&self, manifest: &Manifest) -> bool {
        now().saturating_sub(manifest.created) >= self.ttl.as_secs().max(1)
    }

    fn path(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Deletes whatever a job that could not complete wrote of export `key`.
    pub async fn discard(&self, key: &str, extension: &str) {
        self.delete_objects(key, extension).await;
    }

    async fn delete(&self, manifest: &Manifest) {
        self.delete_objects(&manifest.key, &manifest.extension).await;
    }

    async fn delete_objects(&self, key: &str, extension: &str) {
        // The manifest first: from then on the export is incomplete, whatever else remains.
        let names =
            [format!("{key}.manifest.json"), format!("{key}.{extension}"), format!("{key}.{extension}.gz")];
        for name in names {
            self.delete_object(&self.path(&name)).await;
        }
    }

    async fn delete_object(&self, path: &ObjectPath) {
        match self.store.delete(path).await {
            Ok(()) | Err(logs_core::object_store::Error::NotFound { .. }) => {}
            Err(e) => tracing::warn!(object = %path, error = %e, "cannot delete an object of the spool"),
        }
    }

    /// Lists the spool: keeps complete exports that have not expired, deletes the rest.
    async fn sweep_at_start(&self) -> logs_core::object_store::Result<()> {
        let objects: Vec<_> = self.store.list(Some(&self.prefix)).try_collect().await?;
        let mut kept: HashMap<String, Arc<Manifest>> = HashMap::new();
        for object in &objects {
            let Some(name) = object.location.filename() else { continue };
            let Some(key) = name.strip_suffix(".manifest.json") else { continue };
            let manifest = match self.store.get(&object.location).await {
                Ok(got) => got.bytes().await.ok().and_then(|b| serde_json::from_slice::<Manifest>(&b).ok()),
                Err(_) => None,
            };
            match manifest {
                Some(m) if m.version == MANIFEST_VERSION && m.key == key && !self.expired(&m) => {
                    kept.insert(key.to_owned(), Arc::new(m));
                }
                _ => self.delete_object(&object.location).await,
            }
        }
        for object in &objects {
            let Some(name) = object.location.filename() else { continue };
            if name.ends_with(".manifest.json") {
                continue;
            }
            let key = name.split('.').next().unwrap_or_default();
            if !kept.contains_key(key) {
                self.delete_object(&object.location).await;
            }
        }
        let mut index = self.lock();
        index.stored = kept.values().map(|m| m.size()).sum();
        index.complete = kept;
        tracing::info!(exports = index.complete.len(), bytes = index.stored, "spool opened");
        Ok(())
    }
}

/// Writes the two copies of one export, hashing both.
#[derive(Debug)]
pub struct SpoolWriter {
    plain: BufWriter,
    gzip: BufWriter,
    encoder: GzEncoder<Vec<u8>>,
    plain_sha: Sha256,
    gzip_sha: Sha256,
    plain_bytes: u64,
    gzip_bytes: u64,
}

impl SpoolWriter {
    /// Writes `chunk` to both copies, after reserving room for them in `spool`; the bytes
    /// reserved.
    pub async fn write(
        &mut self,
        spool: &Spool,
        chunk: Bytes,
        retry_after: Duration,
    ) -> Result<u64, ApiError> {
        self.encoder.write_all(&chunk).map_err(|e| ApiError::Internal(format!("gzip: {e}")))?;
        let compressed = std::mem::take(self.encoder.get_mut());
        let added = chunk.len() as u64 + compressed.len() as u64;
        spool.reserve(added, retry_after).await?;
        self.plain_sha.update(&chunk);
        self.plain_bytes += chunk.len() as u64;
        self.plain.put(chunk).await.map_err(|e| spool_error("write", &e))?;
        self.put_gzip(compressed).await?;
        Ok(added)
    }

    /// Bytes of the plain copy so far.
    pub fn plain_bytes(&self) -> u64 {
        self.plain_bytes
    }

    /// Completes both copies; their sizes and hashes, and the bytes the gzip trailer added.
    pub async fn finish(mut self) -> Result<(Representation, Representation, u64), ApiError> {
        let encoder = std::mem::replace(&mut self.encoder, GzEncoder::new(Vec::new(), Compression::fast()));
        let tail = encoder.finish().map_err(|e| ApiError::Internal(format!("gzip: {e}")))?;
        let added = tail.len() as u64;
        self.put_gzip(tail).await?;
        self.plain.shutdown().await.map_err(|e| spool_error("write", &e))?;
        self.gzip.shutdown().await.map_err(|e| spool_error("write", &e))?;
        let plain =
            Representation { bytes: self.plain_bytes, sha256: hex::encode(self.plain_sha.finalize_reset()) };
        let gzip =
            Representation { bytes: self.gzip_bytes, sha256: hex::encode(self.gzip_sha.finalize_reset()) };
        Ok((plain, gzip, added))
    }

    /// Abandons both copies: nothing of them stays.
    pub async fn abort(mut self) {
        let _ = self.plain.abort().await;
        let _ = self.gzip.abort().await;
    }

    async fn put_gzip(&mut self, compressed: Vec<u8>) -> Result<(), ApiError> {
        if compressed.is_empty() {
            return Ok(());
        }
        self.gzip_sha.update(&compressed);
        self.gzip_bytes += compressed.len() as u64;
        self.gzip.put(Bytes::from(compressed)).await.map_err(|e| spool_error("write", &e))
    }
}

/// The spool's storage failed (503; the detail, which names the object, goes to the log).
fn spool_error(what: &str, error: &dyn std::fmt::Display) -> ApiError {
    ApiError::SpoolUnavailable {
        detail: format!("cannot {what} the spool: {error}"),
        retry_after: Duration::from_secs(5),
    }
}

/// A local store's unfinished writes are files named `<object>#<n>`, which its listing hides.
fn remove_unfinished_writes(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let unfinished = name
            .rsplit_once('#')
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if unfinished {
            let path: PathBuf = entry.path();
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot delete an unfinished spool file");
            }
        }
    }
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(key: &str, created: u64, bytes: u64) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            key: key.into(),
            extension: "csv".into(),
            created,
            rows: 1,
            skipped_shards: 0,
            plain: Representation { bytes, sha256: "00".into() },
            gzip: Representation { bytes: 0, sha256: "00".into() },
        }
    }

    async fn spool(dir: &Path, ttl: Duration, max_bytes: u64) -> Spool {
        Spool::open(&DatasetLocation::Local(dir.to_owned()), &S3Options::default(), ttl, max_bytes)
            .await
            .unwrap()
    }

    async fn write(spool: &Spool, key: &str, text: &str) -> Manifest {
        let mut writer = spool.writer(key, "csv", 1);
        let reserved =
            writer.write(spool, Bytes::from(text.to_owned()), Duration::from_secs(1)).await.unwrap();
        let (plain, gzip, _) = writer.finish().await.unwrap();
        let manifest = Manifest { plain, gzip, ..manifest(key, now(), 0) };
        spool.commit(manifest.clone()).await.unwrap();
        spool.release(reserved);
        manifest
    }

    async fn read_all(spool: &Spool, manifest: &Manifest, gzip: bool, range: Range<u64>) -> Vec<u8> {
        let Ok(stream) = spool.read(manifest, gzip, range).await else { panic!("cannot read") };
        let chunks: Vec<Bytes> = stream.try_collect().await.unwrap();
        chunks.concat()
    }

    #[tokio::test]
    async fn a_written_export_reads_back_whole_in_ranges_and_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
        let text = "a,b\n1,2\n".repeat(1000);
        let manifest = write(&spool, "k1", &text).await;
        assert_eq!(manifest.plain.bytes, text.len() as u64);
        assert_eq!(manifest.plain.sha256, hex::encode(Sha256::digest(text.as_bytes())));
        assert_eq!(read_all(&spool, &manifest, false, 0..manifest.plain.bytes).await, text.as_bytes());
        assert_eq!(read_all(&spool, &manifest, false, 4..12).await, &text.as_bytes()[4..12]);
        let gz = read_all(&spool, &manifest, true, 0..manifest.gzip.bytes).await;
        assert_eq!(hex::encode(Sha256::digest(&gz)), manifest.gzip.sha256);
        let mut plain = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut plain).unwrap();
        assert_eq!(plain, text);
        assert_eq!(spool.lookup("k1").as_deref(), Some(&manifest));
    }

    #[tokio::test]
    async fn reopening_keeps_complete_exports_and_deletes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
        let kept = write(&spool, "kept", "x\n").await;
        // A job cut short: its copies, no manifest; and a local store's unfinished write.
        std::fs::write(dir.path().join("cut.csv"), "partial").unwrap();
        std::fs::write(dir.path().join("cut.csv.gz#1"), "partial").unwrap();
        // An expired export, and a manifest that is not one.
        let old = Manifest { created: now() - 120, ..kept.clone() };
        std::fs::write(
            dir.path().join("old.manifest.json"),
            serde_json::to_vec(&Manifest { key: "old".into(), ..old }).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.path().join("old.csv"), "x\n").unwrap();
        std::fs::write(dir.path().join("junk.manifest.json"), "{").unwrap();
        drop(spool);

        let spool = super::tests::spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
        assert_eq!(spool.lookup("kept").as_deref(), Some(&kept));
        assert!(spool.lookup("old").is_none());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["kept.csv", "kept.csv.gz", "kept.manifest.json"]);
        assert_eq!(spool.usage(), (kept.size(), 0));
    }

    #[tokio::test]
    async fn the_bound_deletes_the_oldest_exports_then_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool(dir.path(), Duration::from_secs(60), 1000).await;
        for (key, created) in [("a", 10), ("b", 20)] {
            spool.commit(manifest(key, now() - 50 + created, 300)).await.unwrap();
        }
        spool.reserve(500, Duration::from_secs(1)).await.unwrap();
        assert!(spool.lookup("a").is_none(), "the oldest export makes room");
        assert!(spool.lookup("b").is_some());
        assert!(!dir.path().join("a.manifest.json").exists());
        let full = spool.reserve(600, Duration::from_secs(1)).await.unwrap_err();
        assert!(matches!(full, ApiError::SpoolFull { .. }), "{full:?}");
        assert!(spool.lookup("b").is_none(), "everything complete was deleted first");
        assert_eq!(spool.usage(), (0, 500));
        spool.release(500);
        spool.reserve(1000, Duration::from_secs(1)).await.unwrap();
    }

    #[tokio::test]
    async fn expired_exports_are_not_found_and_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let spool = spool(dir.path(), Duration::from_secs(60), 1 << 20).await;
        spool.commit(manifest("old", now() - 61, 10)).await.unwrap();
        spool.commit(manifest("new", now(), 10)).await.unwrap();
        assert!(spool.lookup("old").is_none());
        spool.expire().await;
        assert!(!dir.path().join("old.manifest.json").exists());
        assert!(spool.lookup("new").is_some());
        assert_eq!(spool.usage(), (10, 0));
    }
}
