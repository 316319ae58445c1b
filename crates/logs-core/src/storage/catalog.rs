//! Which files an export reads.
//!
//! Layout: `<root>/application_id=<integer>/date=<YYYY-MM-DD>/<name>.parquet`, where `date` is
//! the UTC date of `error_timestamp` and the root is a folder or a prefix in a bucket.
//! Selection prunes in three steps, cheapest first: the application's folder only; for the
//! `default` dimension only the date folders inside the range; then each file's footer
//! statistics for the range's timestamp column. Each selected file's footer is read here, so
//! an unreadable file is found before any row is exported: it fails the export, or, with
//! `skip_unavailable_shards`, is left out and counted. Over a bucket, listing touches only
//! the application's prefix and the date prefixes listed; keys that are not `*.parquet`, or
//! start with `.` or `_`, are passed over.
//!
//! The footers of the files kept are completed with their page index (or an offset index
//! rebuilt from their page headers, `pages/offset_index.rs`) and cached (`footer.rs`): the scan
//! then reads no footer a second time, and later exports of the same files none at all. Over
//! a store, the bytes a footer was read with (the object's last 512 KiB) go to the scan too,
//! and so does a small local file, read whole with its footer (`footer::kept_for_scan`), up to
//! [`KeptForScan::memory`] per export. Over a store, what does not fit goes to the export's
//! spool on local disk (`spool.rs`), up to [`KeptForScan::disk`]: a small object whole, of a
//! larger one its footer, so that the scan fetches neither again.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use chrono::NaiveDate;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::parquet::file::metadata::RowGroupMetaData;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore};

use crate::error::{Error, Result};
use crate::request::{DateDimension, TimeRange};
use crate::storage::footer;
use crate::storage::footer_checks::{self, RangeOverlap};
use crate::storage::listing::{Listed, Listing};
use crate::storage::local;
use crate::storage::object::{self, Backend, ObjectFile, Prefetched, RequestCounts};
use crate::storage::spool::Spool;

/// The last date a listing reaches when a range leaves it open.
const LAST_DATE: NaiveDate = NaiveDate::from_ymd_opt(9999, 12, 31).expect("a valid date");
/// How many footers are read at once.
const FOOTER_READS_IN_FLIGHT: usize = 16;
/// Local footers checked by one task of the blocking pool, and such tasks at once.
const LOCAL_FOOTER_BATCH: usize = 8;
const LOCAL_BATCHES_IN_FLIGHT: usize = 4;
/// How many date folders are listed at once.
const LISTINGS_IN_FLIGHT: usize = 8;

/// What one export keeps, at most, of the bytes read with its footers, for its scan: beyond,
/// the scan fetches them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptForScan {
    /// Bytes in memory.
    pub memory: u64,
    /// Bytes beyond those, over a bucket, in an unnamed temporary file on local disk, gone with
    /// the export: a small object whole, of a larger one its footer. 0: none.
    pub disk: u64,
    /// The folder of that file; `None`: the system's temporary folder (`TMPDIR`).
    pub dir: Option<PathBuf>,
}

impl Default for KeptForScan {
    fn default() -> KeptForScan {
        KeptForScan { memory: 32 * 1024 * 1024, disk: 256 * 1024 * 1024, dir: None }
    }
}

/// What storage needs to know of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    pub application_id: i64,
    pub range: TimeRange,
    pub dimension: DateDimension,
    /// Leave unreadable files out (and count them) instead of failing.
    pub skip_unavailable: bool,
    /// Rows are picked within files by more than the time range (filters, parts), so that the
    /// scan can skip pages that hold none of them. A file without an offset index then gets one
    /// rebuilt from its page headers; otherwise only a file the range cuts through does.
    pub selects_rows: bool,
    /// Rebuild the offset index of a file written without one from its page headers, when
    /// the scan selects rows within it (`PageMachinery::offset_index`).
    pub rebuild_offset_index: bool,
    /// List no date folder before this date (a cursor chain's window), whatever the range.
    pub first_folder: Option<NaiveDate>,
}

/// The data files of the date folders an export lists, before their footers are read.
#[derive(Debug, Default)]
pub(crate) struct Candidates {
    /// Each with the date of its folder, in folder then name order.
    pub(crate) objects: Vec<(NaiveDate, Listed)>,
    date_folders: usize,
    date_folders_pruned: usize,
}

/// A file an export reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedFile {
    /// As errors and `--explain` name it: its local path, or `s3://bucket/key`.
    pub name: String,
    /// Location, size, modification time and ETag as listed: every read of the file checks
    /// that it is still this object.
    pub object: ObjectMeta,
    pub rows: u64,
    pub row_groups: usize,
    /// The footer's statistics prove that every row of the file is inside the export's time
    /// range (no nulls, minimum and maximum inside it).
    pub all_in_range: bool,
    /// Bytes of the file read with its footer that the scan will need (`footer::kept_for_scan`).
    pub(crate) prefetched: Prefetched,
    /// The bytes of each row group's column chunks, from the first chunk's start to the last
    /// one's end (`budget.rs` counts a reader's fetches by row group).
    pub(crate) row_group_spans: Arc<[Range<u64>]>,
}

/// A file an export could not read and, as asked by `skip_unavailable_shards`, left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub name: String,
    pub reason: String,
}

/// The files of one export, and what was pruned on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSelection {
    /// The files to read, in name order.
    pub files: Vec<SelectedFile>,
    /// Unreadable files left out (only with `skip_unavailable_shards=true`).
    pub skipped: Vec<SkippedFile>,
    /// Date folders of the application, and how many of them were outside the range.
    pub date_folders: usize,
    pub date_folders_pruned: usize,
    /// Files in the date folders read, and how many of them the footer statistics (or an
    /// empty file) showed to hold no row in the range.
    pub candidate_files: usize,
    pub files_pruned_by_statistics: usize,
}

impl FileSelection {
    pub fn rows(&self) -> u64 {
        self.files.iter().map(|f| f.rows).sum()
    }

    /// The selected files' size, in all.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.object.size).sum()
    }

    pub fn row_groups(&self) -> usize {
        self.files.iter().map(|f| f.row_groups).sum()
    }

    /// Bytes read with the footers that the scan reads from memory instead of fetching them
    /// again.
    pub fn kept_in_memory(&self) -> u64 {
        self.files.iter().map(|f| f.prefetched.in_memory()).sum()
    }

    /// Bytes read with the footers that the scan reads from the export's spool on local disk
    /// (`KeptForScan::disk`) instead of fetching them again.
    pub fn kept_on_disk(&self) -> u64 {
        self.files.iter().map(|f| f.prefetched.len() - f.prefetched.in_memory()).sum()
    }

    /// True when the footers prove every row of every selected file inside the time range, so
    /// that the export need not test the range row by row.
    pub fn all_in_range(&self) -> bool {
        self.files.iter().all(|f| f.all_in_range)
    }
}

enum FooterCheck {
    Keep(SelectedFile),
    Pruned,
    Unreadable(SkippedFile),
}

/// The catalog of a dataset: its listings, and the files an export reads. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Catalog {
    backend: Backend,
    metadata_cache: Arc<FileMetadataCache>,
    kept: KeptForScan,
}

impl Catalog {
    /// The catalog of the dataset `backend` reads; footers are cached in `metadata_cache`.
    pub(crate) fn new(backend: Backend, metadata_cache: Arc<FileMetadataCache>) -> Catalog {
        Catalog { backend, metadata_cache, kept: KeptForScan::default() }
    }

    /// This catalog, its exports keeping `kept` for their scans.
    pub(crate) fn keeping(self, kept: KeptForScan) -> Catalog {
        Catalog { kept, ..self }
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    pub(crate) fn metadata_cache(&self) -> &Arc<FileMetadataCache> {
        &self.metadata_cache
    }

    /// The entries below `segments` (folder names from the root); `None` if there is no such
    /// folder. Over a bucket, a prefix with no keys is absent.
    pub(crate) async fn list(&self, segments: &[&str], counts: &RequestCounts) -> Result<Option<Listing>> {
        counts.listed();
        match self.backend() {
            Backend::Local { root } => {
                let folder = segments.iter().fold(root.clone(), |path, s| path.join(s));
                tokio::task::spawn_blocking(move || local::list(&folder))
                    .await
                    .map_err(|e| Error::Internal(datafusion::error::DataFusionError::External(Box::new(e))))?
            }
            Backend::Store { store, prefix, url, .. } => {
                let prefix = segments.iter().fold(prefix.clone(), |path, s| path.join(*s));
                let result = store.list_with_delimiter(Some(&prefix)).await.map_err(|e| Error::Storage {
                    path: Some(format!("{url}/{prefix}")),
                    message: object::describe(&e),
                })?;
                let folders =
                    result.common_prefixes.iter().filter_map(|p| Some(p.filename()?.to_owned())).collect();
                let mut listing = Listing { folders, objects: Vec::new() };
                for meta in result.objects {
                    let Some(file_name) = meta.location.filename().map(str::to_owned) else { continue };
                    let name = Arc::from(format!("{url}/{}", meta.location));
                    listing.objects.push(Listed { file_name, name, meta });
                }
                listing.sort();
                Ok((!listing.folders.is_empty() || !listing.objects.is_empty()).then_some(listing))
            }
        }
    }

    /// The ids of the applications that have a folder, ascending.
    pub(crate) async fn applications(&self) -> Result<Vec<i64>> {
        let listing = self.list(&[], &RequestCounts::default()).await?.unwrap_or_default();
        let mut ids: Vec<i64> = listing
            .folders
            .iter()
            .filter_map(|name| name.strip_prefix("application_id=")?.parse().ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// The dates of application `id` that have a folder, ascending.
    pub(crate) async fn dates(&self, id: i64) -> Result<Vec<NaiveDate>> {
        let app = format!("application_id={id}");
        let listing = self.list(&[&app], &RequestCounts::default()).await?.unwrap_or_default();
        Ok(date_folders(&listing).into_iter().map(|(date, _)| date).collect())
    }

    /// Selects the files an export of `scope` must read (see the module documentation),
    /// counting the requests made in `counts`.
    pub(crate) async fn select(&self, scope: &Scope, counts: &Arc<RequestCounts>) -> Result<FileSelection> {
        let candidates = self.list_candidates(scope, counts).await?;
        self.read_footers(scope, candidates, counts).await
    }

    /// The data files of the application's date folders that `scope` may need.
    pub(crate) async fn list_candidates(
        &self,
        scope: &Scope,
        counts: &Arc<RequestCounts>,
    ) -> Result<Candidates> {
        let mut candidates = Candidates::default();
        let app = format!("application_id={}", scope.application_id);
        let mut in_range = (scope.dimension == DateDimension::Default)
            .then(|| (utc_date(scope.range.since), utc_date(scope.range.until)));
        if let Some(first) = scope.first_folder {
            in_range = Some(match in_range {
                Some((since, until)) => (since.max(first), until),
                None => (first, LAST_DATE),
            });
        }
        // Over a store, the keys of the date folders are listed while the application's
        // folder is: neither waits for the other.
        let (listing, keys) = match self.backend() {
            Backend::Store { store, prefix, url, sorted_listing } => {
                let app_prefix = prefix.clone().join(app.as_str());
                counts.listed();
                let keys =
                    list_keys_of_date_folders(store.as_ref(), &app_prefix, in_range, *sorted_listing, url);
                let segments = [app.as_str()];
                let (listing, keys) = futures::join!(self.list(&segments, counts), keys);
                (listing?, Some(keys?))
            }
            Backend::Local { .. } => (self.list(&[&app], counts).await?, None),
        };
        let Some(listing) = listing else { return Ok(candidates) };
        let mut dates = date_folders(&listing);
        candidates.date_folders = dates.len();
        if let Some((first, last)) = in_range {
            dates.retain(|(date, _)| (first..=last).contains(date));
        }
        candidates.date_folders_pruned = candidates.date_folders - dates.len();

        let folders = self.list_date_folders(&app, &dates, keys, counts).await?;
        candidates.objects = dates
            .iter()
            .zip(folders)
            .flat_map(|((date, _), folder)| {
                folder.into_iter().flat_map(|listing| listing.objects).map(move |object| (*date, object))
            })
            .filter(|(_, object)| is_data_file(&object.file_name))
            .collect();
        Ok(candidates)
    }

    /// Reads and checks the footers of `candidates`: the files an export of `scope` reads.
    pub(crate) async fn read_footers(
        &self,
        scope: &Scope,
        candidates: Candidates,
        counts: &Arc<RequestCounts>,
    ) -> Result<FileSelection> {
        let mut selection = FileSelection {
            date_folders: candidates.date_folders,
            date_folders_pruned: candidates.date_folders_pruned,
            candidate_files: candidates.objects.len(),
            ..FileSelection::default()
        };
        let files: Vec<_> = candidates
            .objects
            .into_iter()
            .map(|(_, object)| ObjectFile::new(self.backend(), object.name, object.meta, Arc::clone(counts)))
            .collect();
        let small: u64 = files.iter().filter(|f| f.size() <= f.reads().small_file).map(|f| f.size()).sum();
        // Reading a local file again costs what reading a spool would.
        let disk = if self.backend.reads().round_trips { self.kept.disk } else { 0 };
        let mut checks = self.check_footers(files, *scope);
        // Applied as the footers come in, so that what is held stays within it.
        let mut budget = ScanBudget::new(self.kept.memory, small, Spool::new(disk, self.kept.dir.clone()));
        while let Some(check) = checks.next().await {
            match check? {
                FooterCheck::Keep(mut file) => {
                    let prefetched = std::mem::take(&mut file.prefetched);
                    file.prefetched = budget.keep(prefetched, file.object.size);
                    selection.files.push(file)
                }
                FooterCheck::Pruned => selection.files_pruned_by_statistics += 1,
                FooterCheck::Unreadable(file) if scope.skip_unavailable => selection.skipped.push(file),
                FooterCheck::Unreadable(file) => {
                    return Err(Error::Storage { path: Some(file.name), message: file.reason });
                }
            }
        }
        Ok(selection)
    }

    /// The listings of the date folders `dates` (ascending) of the folder `app`: from `keys`
    /// (over a store, the keys of every `date=YYYY-MM-DD` folder), or, from a local folder and
    /// for folders named otherwise, one listing per folder.
    async fn list_date_folders(
        &self,
        app: &str,
        dates: &[(NaiveDate, String)],
        keys: Option<HashMap<String, Listing>>,
        counts: &Arc<RequestCounts>,
    ) -> Result<Vec<Option<Listing>>> {
        let from_keys = keys.is_some();
        let mut keys = keys.unwrap_or_default();
        let listings: Vec<_> = dates
            .iter()
            .map(|(date, folder)| {
                let canonical = *folder == canonical_name(*date);
                let found =
                    (from_keys && canonical).then(|| keys.remove(folder.as_str()).unwrap_or_default());
                async move {
                    match found {
                        Some(listing) => Ok((!listing.objects.is_empty()).then_some(listing)),
                        None => self.list(&[app, folder], counts).await,
                    }
                }
            })
            .collect();
        futures::stream::iter(listings)
            .buffered(LISTINGS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    /// [`Catalog::check_footer`] of each of `files`, in their order: over a store,
    /// [`FOOTER_READS_IN_FLIGHT`] requests at once; from a local folder, whose reads are
    /// synchronous, on the blocking pool, a batch of [`LOCAL_FOOTER_BATCH`] files per task and
    /// [`LOCAL_BATCHES_IN_FLIGHT`] tasks at once. A task per file would make the pool start a
    /// thread for most of a few thousand small files, each keeping its stack and allocator
    /// cache: tens of MiB.
    fn check_footers(
        &self,
        files: Vec<ObjectFile>,
        scope: Scope,
    ) -> futures::stream::BoxStream<'_, Result<FooterCheck>> {
        if let Backend::Store { .. } = self.backend() {
            let checks =
                files.into_iter().map(move |file| async move { Ok(self.check_footer(file, scope).await) });
            return futures::stream::iter(checks).buffered(FOOTER_READS_IN_FLIGHT).boxed();
        }
        let mut batches = Vec::new();
        let mut files = files.into_iter().peekable();
        while files.peek().is_some() {
            batches.push(files.by_ref().take(LOCAL_FOOTER_BATCH).collect::<Vec<_>>());
        }
        let batches = batches.into_iter().map(move |batch| {
            let catalog = self.clone();
            let runtime = tokio::runtime::Handle::current();
            async move {
                let checks = tokio::task::spawn_blocking(move || {
                    batch
                        .into_iter()
                        .map(|file| runtime.block_on(catalog.check_footer(file, scope)))
                        .collect()
                })
                .await;
                let checks: Vec<FooterCheck> = checks.map_err(|e| {
                    Error::Internal(datafusion::error::DataFusionError::External(Box::new(e)))
                })?;
                Ok::<_, Error>(futures::stream::iter(checks.into_iter().map(Ok::<_, Error>)))
            }
        });
        futures::stream::iter(batches).buffered(LOCAL_BATCHES_IN_FLIGHT).try_flatten().boxed()
    }

    async fn check_footer(&self, mut file: ObjectFile, scope: Scope) -> FooterCheck {
        let cache = self.metadata_cache.as_ref();
        let cached = footer::cached(cache, file.meta());
        let read = async {
            let footer = match &cached {
                Some(footer) => Arc::clone(footer),
                None => Arc::new(footer::read(&mut file).await?),
            };
            // Checked on every export, cached footer or not: the checks are cheap.
            footer_checks::check_types(&footer)?;
            let rows = footer.file_metadata().num_rows().max(0) as u64;
            let overlap =
                footer_checks::range_overlap(&footer, scope.dimension.timestamp_field().name(), scope.range);
            if rows == 0 || overlap == RangeOverlap::None {
                return Ok(None);
            }
            let mut prefetched = Prefetched::default();
            // Pages are skipped only where rows are picked within the file.
            let selects_rows = scope.selects_rows || overlap != RangeOverlap::All;
            let selects_rows = selects_rows && scope.rebuild_offset_index;
            if cached.is_none() {
                let completed = footer::complete(&file, &footer, selects_rows).await?;
                prefetched = footer::kept_for_scan(&file);
                footer::remember(cache, file.meta(), completed);
            } else if footer::lacks_offset_index(&file, &footer, selects_rows) {
                footer::remember(cache, file.meta(), footer::complete(&file, &footer, true).await?);
            }
            let row_groups = footer.num_row_groups();
            let all_in_range = overlap == RangeOverlap::All;
            let row_group_spans = footer.row_groups().iter().filter_map(row_group_span).collect();
            Ok(Some(SelectedFile {
                name: file.name().to_owned(),
                object: file.meta().clone(),
                rows,
                row_groups,
                all_in_range,
                prefetched,
                row_group_spans,
            }))
        };
        match read.await {
            Err(error) => {
                // The file is named beside the reason.
                let reason = match error {
                    Error::Storage { message, .. } => message,
                    other => other.to_string(),
                };
                FooterCheck::Unreadable(SkippedFile { name: file.name().to_owned(), reason })
            }
            Ok(None) => FooterCheck::Pruned,
            Ok(Some(selected)) => FooterCheck::Keep(selected),
        }
    }
}

/// The bytes of `row_group`'s column chunks, from the first one's start to the last one's end.
fn row_group_span(row_group: &RowGroupMetaData) -> Option<Range<u64>> {
    let chunks = row_group.columns().iter().map(|column| {
        let (start, length) = column.byte_range();
        start..start.saturating_add(length)
    });
    chunks.reduce(|a, b| a.start.min(b.start)..a.end.max(b.end))
}

/// What one export's scan may keep, in all, of the bytes read with its footers.
///
/// A small file read whole saves the scan a request for a few KiB; the end of a large one, a
/// request for 512 KiB at most, and perhaps none. Over a store, where each saved request is a
/// round trip, the ends of large files may not take what the export's small files need (up to
/// half of the budget), so that a date folder's large files, listed first, do not leave
/// nothing for its hundred late arrivals. What memory does not take goes to the spool: a small
/// file whole, of a large one its footer (which the scan reads again when the footer cache no
/// longer holds it, as with a month of small files).
struct ScanBudget {
    left: u64,
    /// What the ends of large files may not take.
    reserved: u64,
    spool: Spool,
}

impl ScanBudget {
    /// `bytes` to keep in memory, and beyond them what fits in `spool`, for an export whose
    /// small files hold `small` bytes.
    fn new(bytes: u64, small: u64, spool: Spool) -> ScanBudget {
        ScanBudget { left: bytes, reserved: small.min(bytes / 2), spool }
    }

    /// `prefetched` (of an object of `size` bytes) if it fits in the memory that is left
    /// (which it then uses up); or else what of it fits in the spool; or else nothing.
    fn keep(&mut self, prefetched: Prefetched, size: u64) -> Prefetched {
        let whole = prefetched.len() == size;
        let floor = if whole { 0 } else { self.reserved };
        if let Some(left) = self.left.checked_sub(prefetched.in_memory()).filter(|&left| left >= floor) {
            self.left = left;
            return prefetched;
        }
        let spooled = match whole {
            true => Some(size),
            false => footer::footer_len(prefetched.memory_tail(size)),
        };
        spooled.map_or_else(Prefetched::default, |len| prefetched.spooled(len, &mut self.spool))
    }
}

/// The objects directly inside each `date=YYYY-MM-DD` folder of the application's prefix
/// `app_prefix` (with `in_range`, only the folders of those dates), by folder name: one listing
/// of the keys from the range's first date on (all of them without `in_range`), which takes
/// one request per 1 000 keys instead of one per folder. With `sorted_listing` (S3 lists keys
/// in order) it stops after the range's last date's keys.
async fn list_keys_of_date_folders(
    store: &dyn ObjectStore,
    app_prefix: &ObjectPath,
    in_range: Option<(NaiveDate, NaiveDate)>,
    sorted_listing: bool,
    url: &str,
) -> Result<HashMap<String, Listing>> {
    let error = |e: object_store::Error| Error::Storage {
        path: Some(format!("{url}/{app_prefix}")),
        message: object::describe(&e),
    };
    let mut keys = match in_range {
        Some((first, _)) => {
            store.list_with_offset(Some(app_prefix), &app_prefix.clone().join(canonical_name(first)))
        }
        None => store.list(Some(app_prefix)),
    };
    // Every key of the last folder starts with this; in key order, none after them does.
    let last_keys = in_range.map(|(_, last)| format!("{}/", app_prefix.clone().join(canonical_name(last))));
    let mut listings: HashMap<String, Listing> = HashMap::new();
    while let Some(meta) = keys.next().await {
        let meta = meta.map_err(error)?;
        let key = meta.location.as_ref();
        if let Some(last_keys) = &last_keys
            && sorted_listing
            && key > last_keys.as_str()
            && !key.starts_with(last_keys.as_str())
        {
            break;
        }
        let Some(parts) = meta.location.prefix_match(app_prefix) else { continue };
        let parts: Vec<_> = parts.collect();
        // Only objects directly inside a date folder, of a date in range.
        let [folder, file_name] = parts.as_slice() else { continue };
        let wanted = folder_date(folder.as_ref()).is_some_and(|date| {
            folder.as_ref() == canonical_name(date)
                && in_range.is_none_or(|(first, last)| (first..=last).contains(&date))
        });
        if !wanted {
            continue;
        }
        let (folder, file_name) = (folder.as_ref().to_owned(), file_name.as_ref().to_owned());
        let name = Arc::from(format!("{url}/{}", meta.location));
        listings.entry(folder).or_default().objects.push(Listed { file_name, name, meta });
    }
    for listing in listings.values_mut() {
        listing.sort();
    }
    Ok(listings)
}

/// The date a folder named `date=<date>` holds, if its name parses as one (`date=2026-10-3`
/// does, though it is not the canonical name).
fn folder_date(name: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(name.strip_prefix("date=")?, "%Y-%m-%d").ok()
}

/// The canonical name of the folder of `date`: `date=YYYY-MM-DD`.
fn canonical_name(date: NaiveDate) -> String {
    format!("date={}", date.format("%Y-%m-%d"))
}

/// The `date=YYYY-MM-DD` folders of an application's listing, ascending, with their names.
fn date_folders(listing: &Listing) -> Vec<(NaiveDate, String)> {
    let mut dates: Vec<(NaiveDate, String)> =
        listing.folders.iter().filter_map(|name| Some((folder_date(name)?, name.clone()))).collect();
    dates.sort();
    dates
}

/// A file name the dataset counts: `*.parquet`, not hidden (`.x`) and not a marker (`_x`).
fn is_data_file(name: &str) -> bool {
    name.ends_with(".parquet") && !name.starts_with('.') && !name.starts_with('_')
}

fn utc_date(timestamp: i64) -> NaiveDate {
    chrono::DateTime::from_timestamp(timestamp, 0).map_or(NaiveDate::MIN, |t| t.date_naive())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes held of an object of `size`, at its end.
    fn tail(n: usize, size: u64) -> Prefetched {
        Prefetched::new(size - n as u64, bytes::Bytes::from(vec![0u8; n]))
    }

    #[test]
    fn the_bytes_kept_for_the_scan_stay_within_the_budget() {
        // (bytes, whole file)
        let kept = |sizes: &[(usize, bool)]| -> Vec<u64> {
            let mut budget = ScanBudget::new(1000, 600, Spool::new(0, None));
            sizes
                .iter()
                .map(|&(n, whole)| {
                    let size = if whole { n as u64 } else { 10_000 };
                    budget.keep(tail(n, size), size).len()
                })
                .collect()
        };
        let whole = |sizes: &[usize]| sizes.iter().map(|&n| (n, true)).collect::<Vec<_>>();
        assert_eq!(kept(&whole(&[400, 500, 100, 50])), [400, 500, 100, 0]);
        assert_eq!(kept(&whole(&[400, 700, 100])), [400, 0, 100]);
        // The ends of large files take half of the budget at most; whole files the rest.
        assert_eq!(
            kept(&[(300, false), (300, false), (200, false), (300, true), (250, true)]),
            [300, 0, 200, 300, 0]
        );
        // Without small files nothing is reserved.
        let mut budget = ScanBudget::new(1000, 0, Spool::new(0, None));
        let tails: Vec<u64> =
            [400, 500, 200].iter().map(|&n| budget.keep(tail(n, 10_000), 10_000).len()).collect();
        assert_eq!(tails, [400, 500, 0]);
    }

    #[test]
    fn what_memory_does_not_take_goes_to_the_spool_a_small_file_whole_of_a_large_one_its_footer() {
        let mut budget = ScanBudget::new(100, 0, Spool::new(1000, None));
        // A large object's end, its footer 40 bytes long (the length, then `PAR1`).
        let mut end = vec![7u8; 300];
        end[292..296].copy_from_slice(&40u32.to_le_bytes());
        end[296..].copy_from_slice(b"PAR1");
        let large = Prefetched::new(9_700, bytes::Bytes::from(end.clone()));
        let kept = budget.keep(large, 10_000);
        assert_eq!((kept.len(), kept.in_memory()), (48, 0));
        // Held: the footer, its length and magic, where they are in the object.
        assert!(kept.covers(&(9_952..10_000)));
        assert!(!kept.covers(&(9_951..10_000)));
        // A small object whole, in memory while it fits, then on disk.
        let kept = budget.keep(tail(60, 60), 60);
        assert_eq!((kept.len(), kept.in_memory()), (60, 60));
        let kept = budget.keep(tail(60, 60), 60);
        assert_eq!((kept.len(), kept.in_memory()), (60, 0));
        // A tail that does not end in a footer is not spooled.
        assert_eq!(budget.keep(tail(300, 10_000), 10_000).len(), 0);
        // Nor what no longer fits in the spool.
        assert_eq!(budget.keep(tail(900, 900), 900).len(), 0);
        assert_eq!(budget.spool.written(), 48 + 60);
    }

    #[test]
    fn data_file_names() {
        assert!(is_data_file("part-0.parquet"));
        assert!(!is_data_file("part-0.parquet.tmp"));
        assert!(!is_data_file("_SUCCESS"));
        assert!(!is_data_file(".part-0.parquet"));
        assert!(!is_data_file("_tmp.parquet"));
        assert!(!is_data_file("part-0.PARQUET.crc"));
    }

    /// The footer of a file of one column `t`, a row group for each array of `row_groups`.
    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(0), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        assert_eq!(utc_date(86_399), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        assert_eq!(utc_date(86_400), NaiveDate::from_ymd_opt(1970, 1, 2).unwrap());
        assert_eq!(utc_date(i64::MIN), NaiveDate::MIN);
    }
}
