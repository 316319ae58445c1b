//! The spool's handle: its object store, where in it the spool lives, its bounds, and the index
//! of complete exports; with the few object operations every part of the spool uses.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use logs_core::object_store::path::Path as ObjectPath;
use logs_core::object_store::{Error as ObjectStoreError, ObjectStore, ObjectStoreExt};

use super::manifest::{Manifest, now};

/// The spool (see the module documentation).
#[derive(Debug)]
pub struct Spool {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) prefix: ObjectPath,
    /// The folder of a local spool (its store cannot update objects conditionally, and hides
    /// the temporary files of unfinished writes).
    pub(super) local_root: Option<PathBuf>,
    pub(super) ttl: Duration,
    pub(super) max_bytes: u64,
    pub(super) index: Mutex<Index>,
}

#[derive(Debug, Default)]
pub(super) struct Index {
    pub(super) complete: HashMap<String, Indexed>,
    /// Bytes of the complete exports.
    pub(super) stored: u64,
    /// Bytes that running jobs have written so far.
    pub(super) reserved: u64,
}

impl Index {
    /// Indexes `export`, in place of what was known of its key.
    pub(super) fn add(&mut self, export: Indexed) {
        self.stored += export.manifest.size();
        if let Some(old) = self.complete.insert(export.manifest.key.clone(), export) {
            self.stored -= old.manifest.size();
        }
    }

    /// Forgets `key` (only if it is `job`'s export, when given); what was forgotten.
    pub(super) fn forget(&mut self, key: &str, job: Option<&str>) -> Option<Arc<Manifest>> {
        let known = self.complete.get(key)?;
        if job.is_some_and(|job| known.manifest.job != job) {
            return None;
        }
        let known = self.complete.remove(key)?;
        self.stored -= known.manifest.size();
        Some(known.manifest)
    }
}

/// A complete export as this process knows it.
#[derive(Debug, Clone)]
pub(super) struct Indexed {
    pub(super) manifest: Arc<Manifest>,
    /// The manifest object's `ETag` when this process wrote or read it: a listing that shows
    /// another means that the export was deleted and prepared again since.
    pub(super) etag: Option<String>,
}

impl Spool {
    /// Kept at least the time to keep: `created` is in whole seconds, so an export is expired
    /// only once more than that many whole seconds have passed (it lives `ttl` to `ttl` + 1 s).
    pub(super) fn expired(&self, manifest: &Manifest) -> bool {
        now().saturating_sub(manifest.created) > self.ttl.as_secs().max(1)
    }

    pub(super) fn path(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }

    pub(super) fn manifest_path(&self, key: &str) -> ObjectPath {
        self.path(&format!("{key}.manifest.json"))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) async fn delete_object(&self, path: &ObjectPath) {
        match self.store.delete(path).await {
            Ok(()) | Err(ObjectStoreError::NotFound { .. }) => {}
            Err(e) => tracing::warn!(object = %path, error = %e, "cannot delete an object of the spool"),
        }
    }
}
