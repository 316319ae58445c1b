//! The dataset's storage: where it lives, which files an export reads, and how they are read.
//!
//! One seam. [`Storage::select`] takes a [`Scope`] — the application, the time range, the date
//! dimension and the skip policy, nothing else of the request — and answers a
//! [`FileSelection`]; [`Storage::table`] hands that selection to DataFusion as a table whose
//! scan reads exactly those files. Inside:
//!
//! - `location.rs`: a local path, `file://` or `s3://bucket/prefix`, and the store built for it;
//! - `catalog.rs`: the `Catalog`: listing (`listing.rs`), pruning by folders and footers,
//!   `skip_unavailable_shards`;
//! - `footer.rs` and `footer_checks.rs`: footers read, completed with page indexes, cached by
//!   object identity, and checked against the dataset contract and the range;
//! - `object.rs`: conditional, coalesced, concurrent and counted reads of one object;
//! - `spool.rs`: what an export read with its footers and keeps for its scan on local disk;
//! - `reader.rs` and `table.rs`: the scan's reader and table;
//! - `budget.rs`: a bound on the pages the readers of one export hold fetched at once;
//! - `pages/`: the page machinery, everything that goes below the parquet crate's public
//!   surface, behind one entry point and one switch ([`PageMachinery`]);
//! - `local.rs`: the local fast path, one bounded piece: a strict `std::fs` listing, positioned
//!   reads on the calling thread, and the settings of those reads, chosen when a file is
//!   opened (`object::Reads`); no other module asks which kind of store it reads.
//!
//! Every path works over any `object_store::ObjectStore`; an S3 bucket is one, and an embedder
//! may hand in another ([`Storage::from_store`]). Modules import downwards only: `mod.rs` and
//! the `Catalog` above the reader, footers and objects; `listing.rs` and `pages/thrift.rs` are
//! leaves.

mod budget;
mod catalog;
mod footer;
mod footer_checks;
pub(crate) mod listing;
mod local;
mod location;
mod object;
mod pages;
mod reader;
mod spool;
mod table;

use std::sync::Arc;

use bytes::Bytes;
use chrono::NaiveDate;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::TableParquetOptions;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::execution::object_store::ObjectStoreUrl;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

pub(crate) use catalog::Candidates;
pub use catalog::{FileSelection, KeptForScan, Scope, SelectedFile, SkippedFile};
pub use location::{Addressing, DatasetLocation, S3Credentials, S3Options};
pub use object::{RequestCounts, Requests};
pub use pages::PageMachinery;
pub use reader::ScanProgress;
pub(crate) use reader::ScanSettings;

use crate::error::{Error, Result};
use catalog::Catalog;
use object::Backend;
use reader::ScanReaders;
use table::SelectedFiles;

/// A dataset's storage (see the module documentation). Cheap to clone.
#[derive(Clone)]
pub struct Storage {
    location: String,
    url: ObjectStoreUrl,
    catalog: Catalog,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("location", &self.location).finish_non_exhaustive()
    }
}

impl Storage {
    /// The storage of `location`. A local folder is checked now (it must be a folder that can
    /// be listed); a bucket is not contacted until [`Storage::check`] or the first export.
    pub fn open(
        location: &DatasetLocation,
        s3: &S3Options,
        metadata_cache: Arc<FileMetadataCache>,
    ) -> Result<Storage> {
        match location {
            DatasetLocation::Local(path) => {
                // Canonical: the scan names files by object-store paths, which may hold no `..`.
                let root = std::fs::canonicalize(path).map_err(|e| local::storage(path, e))?;
                let meta = std::fs::metadata(&root).map_err(|e| local::storage(&root, e))?;
                if !meta.is_dir() {
                    return Err(Error::Storage {
                        path: Some(root.display().to_string()),
                        message: "not a folder".into(),
                    });
                }
                // A root that cannot be listed would look like an empty dataset: refuse it now.
                local::list(&root)?;
                Ok(Storage {
                    location: root.display().to_string(),
                    url: ObjectStoreUrl::local_filesystem(),
                    catalog: Catalog::new(Backend::Local { root }, metadata_cache),
                })
            }
            DatasetLocation::S3 { bucket, .. } => {
                let (store, prefix) = location.object_store(s3)?.expect("an S3 location has a store");
                let url = ObjectStoreUrl::parse(format!("s3://{bucket}"))?;
                // S3 lists keys in UTF-8 binary order.
                let backend =
                    Backend::Store { store, prefix, url: format!("s3://{bucket}"), sorted_listing: true };
                let catalog = Catalog::new(backend, metadata_cache);
                Ok(Storage { location: location.to_string(), url, catalog })
            }
        }
    }

    /// This storage, its exports keeping `kept` of what they read with their footers.
    pub fn keeping(self, kept: KeptForScan) -> Storage {
        Storage { catalog: self.catalog.keeping(kept), ..self }
    }

    /// The storage of the dataset below `prefix` in `store`, registered with DataFusion as
    /// `url`; `location` is how errors and `--explain` name it.
    pub fn from_store(
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
        url: ObjectStoreUrl,
        location: String,
        metadata_cache: Arc<FileMetadataCache>,
    ) -> Storage {
        let name = url.as_str().trim_end_matches('/').to_owned();
        let backend = Backend::Store { store, prefix, url: name, sorted_listing: false };
        Storage { location, url, catalog: Catalog::new(backend, metadata_cache) }
    }

    /// The location, as given (a local folder canonical).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The URL the store is registered under with DataFusion's runtime.
    pub fn url(&self) -> &ObjectStoreUrl {
        &self.url
    }

    /// The object store, for a dataset in one (`None` for a local folder).
    pub fn object_store(&self) -> Option<Arc<dyn ObjectStore>> {
        match self.catalog.backend() {
            Backend::Local { .. } => None,
            Backend::Store { store, .. } => Some(Arc::clone(store)),
        }
    }

    /// Lists the root once: a missing bucket, refused credentials or an unreachable server
    /// fail here.
    pub async fn check(&self) -> Result<()> {
        let listing = self.catalog.list(&[], &RequestCounts::default()).await?;
        // A bucket's prefix without keys is an empty dataset; a local root that is gone is not.
        if listing.is_none() && self.is_local() {
            return Err(Error::Storage {
                path: Some(self.location.clone()),
                message: "the dataset folder no longer exists".into(),
            });
        }
        Ok(())
    }

    /// The object `name` directly below the root, or `None` if there is none (such as
    /// `applications.toml`).
    pub async fn read_optional(&self, name: &str) -> Result<Option<Bytes>> {
        match self.catalog.backend() {
            Backend::Local { root } => {
                let path = root.join(name);
                let read = tokio::task::spawn_blocking(move || (std::fs::read(&path), path)).await;
                let (read, path) = read.map_err(|e| {
                    Error::Internal(datafusion::error::DataFusionError::External(Box::new(e)))
                })?;
                match read {
                    Ok(bytes) => Ok(Some(Bytes::from(bytes))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(local::storage(&path, e)),
                }
            }
            Backend::Store { store, prefix, url, .. } => {
                let location = prefix.clone().join(name);
                let error = |e: object_store::Error| Error::Storage {
                    path: Some(format!("{url}/{location}")),
                    message: e.to_string(),
                };
                match store.get_opts(&location, Default::default()).await {
                    Ok(result) => Ok(Some(result.bytes().await.map_err(error)?)),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(error(e)),
                }
            }
        }
    }

    /// The table an export of `files` scans, with `schema`; its reads are counted in `counts`
    /// and `progress`, and read as `settings` say.
    pub(crate) fn table(
        &self,
        schema: SchemaRef,
        files: &[SelectedFile],
        options: TableParquetOptions,
        counts: Arc<RequestCounts>,
        progress: Arc<ScanProgress>,
        settings: ScanSettings,
    ) -> Arc<SelectedFiles> {
        let cache = Arc::clone(self.catalog.metadata_cache());
        let backend = self.catalog.backend().clone();
        let readers = ScanReaders::new(backend, files, cache, counts, progress, settings);
        Arc::new(SelectedFiles::new(schema, files.to_vec(), options, self.url.clone(), readers))
    }

    /// Whether the dataset is a local folder (its requests are file reads, not HTTP).
    pub fn is_local(&self) -> bool {
        matches!(self.catalog.backend(), Backend::Local { .. })
    }

    /// The ids of the applications that have a folder, ascending.
    pub async fn applications(&self) -> Result<Vec<i64>> {
        self.catalog.applications().await
    }

    /// The dates of application `id` that have a folder, ascending.
    pub async fn dates(&self, id: i64) -> Result<Vec<NaiveDate>> {
        self.catalog.dates(id).await
    }

    /// Selects the files an export of `scope` must read (`catalog.rs`), counting the requests
    /// made in `counts`.
    pub async fn select(&self, scope: &Scope, counts: &Arc<RequestCounts>) -> Result<FileSelection> {
        self.catalog.select(scope, counts).await
    }

    /// [`Storage::select`]'s first half: the data files listed, before their footers are read.
    pub(crate) async fn list_candidates(
        &self,
        scope: &Scope,
        counts: &Arc<RequestCounts>,
    ) -> Result<Candidates> {
        self.catalog.list_candidates(scope, counts).await
    }

    /// [`Storage::select`]'s second half: the footers of `candidates` read and checked.
    pub(crate) async fn read_footers(
        &self,
        scope: &Scope,
        candidates: Candidates,
        counts: &Arc<RequestCounts>,
    ) -> Result<FileSelection> {
        self.catalog.read_footers(scope, candidates, counts).await
    }
}
