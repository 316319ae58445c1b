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
//! up to [`KEPT_FOR_SCAN`] per export.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use chrono::NaiveDate;
use datafusion::arrow::datatypes::DataType;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::basic::{ConvertedType, LogicalType};
use datafusion::parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use datafusion::parquet::file::statistics::Statistics;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore};

use crate::error::{Error, Result};
use crate::request::{DateDimension, TimeRange};
use crate::schema::{Field, FieldType};
use crate::storage::footer;
use crate::storage::object::{self, Backend, ObjectFile, Prefetched, RequestCounts};
use crate::storage::{Scope, Storage, local};

/// How many footers are read at once.
const FOOTER_READS_IN_FLIGHT: usize = 16;
/// How many date folders are listed at once.
const LISTINGS_IN_FLIGHT: usize = 8;
/// Bytes read with the footers that one export keeps for its scan, at most: beyond, the scan
/// fetches them again.
const KEPT_FOR_SCAN: u64 = 32 * 1024 * 1024;

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

    /// True when the footers prove every row of every selected file inside the time range, so
    /// that the export need not test the range row by row.
    pub fn all_in_range(&self) -> bool {
        self.files.iter().all(|f| f.all_in_range)
    }
}

/// The entries of one folder (or prefix), by name.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) folders: Vec<String>,
    pub(crate) objects: Vec<Listed>,
}

/// An object as listed.
#[derive(Debug)]
pub(crate) struct Listed {
    /// The last part of its key or path.
    pub(crate) file_name: String,
    /// As errors name it.
    pub(crate) name: Arc<str>,
    pub(crate) meta: ObjectMeta,
}

impl Listing {
    pub(crate) fn sort(&mut self) {
        self.folders.sort();
        self.objects.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    }
}

enum FooterCheck {
    Keep(SelectedFile),
    Pruned,
    Unreadable(SkippedFile),
}

impl Storage {
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
    pub async fn applications(&self) -> Result<Vec<i64>> {
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
    pub async fn dates(&self, id: i64) -> Result<Vec<NaiveDate>> {
        let app = format!("application_id={id}");
        let listing = self.list(&[&app], &RequestCounts::default()).await?.unwrap_or_default();
        Ok(date_folders(&listing).into_iter().map(|(date, _)| date).collect())
    }

    /// Selects the files an export of `scope` must read (see the module documentation),
    /// counting the requests made in `counts`.
    pub async fn select(&self, scope: &Scope, counts: &Arc<RequestCounts>) -> Result<FileSelection> {
        let mut selection = FileSelection::default();
        let app = format!("application_id={}", scope.application_id);
        let in_range = (scope.dimension == DateDimension::Default)
            .then(|| (utc_date(scope.range.since), utc_date(scope.range.until)));
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
        let Some(listing) = listing else { return Ok(selection) };
        let mut dates = date_folders(&listing);
        selection.date_folders = dates.len();
        if let Some((first, last)) = in_range {
            dates.retain(|(date, _)| (first..=last).contains(date));
        }
        selection.date_folders_pruned = selection.date_folders - dates.len();

        let folders = self.list_date_folders(&app, &dates, keys, counts).await?;
        let objects: Vec<Listed> = folders
            .into_iter()
            .flatten()
            .flat_map(|listing| listing.objects)
            .filter(|object| is_data_file(&object.file_name))
            .collect();
        selection.candidate_files = objects.len();

        let checks: Vec<_> = objects
            .into_iter()
            .map(|object| {
                let file = ObjectFile::new(self.backend(), object.name, object.meta, Arc::clone(counts));
                self.check_footer_off_the_worker(file, *scope)
            })
            .collect();
        let mut checks = futures::stream::iter(checks).buffered(FOOTER_READS_IN_FLIGHT);
        // Applied as the footers come in, so that what is held stays within it.
        let mut budget = ScanBudget { left: KEPT_FOR_SCAN };
        while let Some(check) = checks.next().await {
            match check? {
                FooterCheck::Keep(mut file) => {
                    file.prefetched = budget.keep(std::mem::take(&mut file.prefetched));
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

    /// [`Storage::check_footer`], for a local file on the blocking pool: its reads are
    /// synchronous, and several footers are read at once.
    async fn check_footer_off_the_worker(&self, file: ObjectFile, scope: Scope) -> Result<FooterCheck> {
        match self.backend() {
            Backend::Local { .. } => {
                let storage = self.clone();
                let runtime = tokio::runtime::Handle::current();
                tokio::task::spawn_blocking(move || runtime.block_on(storage.check_footer(file, scope)))
                    .await
                    .map_err(|e| Error::Internal(datafusion::error::DataFusionError::External(Box::new(e))))
            }
            Backend::Store { .. } => Ok(self.check_footer(file, scope).await),
        }
    }

    async fn check_footer(&self, mut file: ObjectFile, scope: Scope) -> FooterCheck {
        let cache = self.metadata_cache();
        let cached = footer::cached(cache, file.meta());
        let read = async {
            let footer = match &cached {
                Some(footer) => Arc::clone(footer),
                None => Arc::new(footer::read(&mut file).await?),
            };
            // Checked on every export, cached footer or not: the checks are cheap.
            check_types(&footer)?;
            let rows = footer.file_metadata().num_rows().max(0) as u64;
            let overlap = range_overlap(&footer, scope.dimension.timestamp_field().name(), scope.range);
            if rows == 0 || overlap == RangeOverlap::None {
                return Ok(None);
            }
            let mut prefetched = Prefetched::default();
            if cached.is_none() {
                // Pages are skipped only where rows are picked within the file.
                let selects_rows = scope.selects_rows || overlap != RangeOverlap::All;
                let selects_rows = selects_rows && scope.rebuild_offset_index;
                let completed = footer::complete(&file, &footer, selects_rows).await?;
                prefetched = footer::kept_for_scan(&file);
                footer::remember(cache, file.meta(), completed);
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
            Err(reason) => FooterCheck::Unreadable(SkippedFile { name: file.name().to_owned(), reason }),
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
struct ScanBudget {
    left: u64,
}

impl ScanBudget {
    /// `prefetched` if it fits in what is left (which it then uses up), or else nothing.
    fn keep(&mut self, prefetched: Prefetched) -> Prefetched {
        match self.left.checked_sub(prefetched.len()) {
            Some(left) => {
                self.left = left;
                prefetched
            }
            None => Prefetched::default(),
        }
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

/// Checks that every column of the dataset contract the file holds has a type the engine reads
/// exactly (see the dataset contract, docs/dataset.md); anything else would be converted lossily or
/// fail in the middle of an export. Other columns are ignored.
fn check_types(footer: &ParquetMetaData) -> std::result::Result<(), String> {
    let file_meta = footer.file_metadata();
    let schema = parquet_to_arrow_schema(file_meta.schema_descr(), file_meta.key_value_metadata())
        .map_err(|e| format!("its schema cannot be read ({e})"))?;
    for field in schema.fields() {
        let Some(expected) = Field::from_name(field.name()) else { continue };
        if expected.is_partition() {
            continue;
        }
        let found = field.data_type();
        let accepted = match expected.field_type() {
            FieldType::String => is_string(found),
            FieldType::Int64 => matches!(
                found,
                DataType::Int8
                    | DataType::Int16
                    | DataType::Int32
                    | DataType::Int64
                    | DataType::UInt8
                    | DataType::UInt16
                    | DataType::UInt32
            ),
            FieldType::UInt64 => match found {
                DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => true,
                DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                    if !signed_column_is_non_negative(footer, field.name()) {
                        return Err(format!(
                            "column `{}` is a signed integer that may hold negative values; \
                             expected unsigned 64-bit integers (values above 2^63 written as signed?)",
                            field.name()
                        ));
                    }
                    true
                }
                _ => false,
            },
        };
        if !accepted {
            let expected = match expected.field_type() {
                FieldType::String => "text",
                FieldType::Int64 => "a signed integer of at most 64 bits",
                FieldType::UInt64 => "an unsigned integer of at most 64 bits",
            };
            return Err(format!("column `{}` has type {found}; expected {expected}", field.name()));
        }
    }
    Ok(())
}

fn is_string(data_type: &DataType) -> bool {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, value) => is_string(value),
        _ => false,
    }
}

/// True when the statistics of every row group show a minimum of at least 0 (or only nulls).
fn signed_column_is_non_negative(footer: &ParquetMetaData, column: &str) -> bool {
    let columns = footer.file_metadata().schema_descr().columns();
    let Some(index) = columns.iter().position(|c| c.path().string() == column) else { return true };
    footer.row_groups().iter().all(|rg| {
        let chunk = rg.column(index);
        match chunk.statistics() {
            Some(Statistics::Int64(s)) => {
                s.min_opt().map_or(s.null_count_opt() == Some(rg.num_rows() as u64), |m| *m >= 0)
            }
            Some(Statistics::Int32(s)) => {
                s.min_opt().map_or(s.null_count_opt() == Some(rg.num_rows() as u64), |m| *m >= 0)
            }
            _ => false,
        }
    })
}

/// How the rows of a file lie relative to an export's time range, as far as its footer shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeOverlap {
    /// The statistics of every row group prove that no row is in the range.
    None,
    /// Some rows may be in the range, some may not.
    Some,
    /// The statistics of every row group prove that every row is in the range: no nulls, and
    /// minimum and maximum inside it.
    All,
}

/// Where the rows of the file with footer `meta` lie relative to `range` in `column`. Missing
/// statistics, or a type whose statistics cannot be compared as signed integers, give `Some`.
fn range_overlap(meta: &ParquetMetaData, column: &str, range: TimeRange) -> RangeOverlap {
    let columns = meta.file_metadata().schema_descr().columns();
    let Some(index) = columns.iter().position(|c| c.path().string() == column) else {
        // A file without the column holds nulls there, and nulls are never in a range.
        return RangeOverlap::None;
    };
    // Statistics of unsigned 32-bit columns are stored as i32 but ordered as unsigned.
    let signed = !matches!(columns[index].logical_type_ref(), Some(LogicalType::Integer(int)) if !int.is_signed)
        && !matches!(columns[index].converted_type(), ConvertedType::UINT_32 | ConvertedType::UINT_64);
    let mut overlap = RangeOverlap::None;
    let mut all_inside = true;
    for rg in meta.row_groups() {
        let statistics = rg.column(index).statistics();
        let bounds = match statistics {
            Some(Statistics::Int64(s)) if signed => s.min_opt().copied().zip(s.max_opt().copied()),
            Some(Statistics::Int32(s)) if signed => {
                s.min_opt().map(|&v| i64::from(v)).zip(s.max_opt().map(|&v| i64::from(v)))
            }
            _ => return RangeOverlap::Some,
        };
        let nulls = statistics.and_then(|s| s.null_count_opt());
        match bounds {
            Some((min, max)) => {
                if max >= range.since && min <= range.until {
                    overlap = RangeOverlap::Some;
                }
                all_inside &= min >= range.since && max <= range.until && nulls == Some(0);
            }
            // No min/max: either statistics were not written, or the column is all null.
            None if nulls == Some(rg.num_rows() as u64) => all_inside &= rg.num_rows() == 0,
            None => return RangeOverlap::Some,
        }
    }
    match overlap {
        RangeOverlap::Some if all_inside => RangeOverlap::All,
        overlap => overlap,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, UInt32Array, UInt64Array};
    use datafusion::arrow::datatypes::{Field as ArrowField, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::data_type::Int32Type;
    use datafusion::parquet::file::metadata::ParquetMetaDataReader;
    use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
    use datafusion::parquet::file::writer::SerializedFileWriter;
    use datafusion::parquet::schema::parser::parse_message_type;

    use super::*;

    #[test]
    fn the_bytes_kept_for_the_scan_stay_within_the_budget() {
        let kept = |sizes: &[usize]| -> Vec<u64> {
            let mut budget = ScanBudget { left: 1000 };
            sizes
                .iter()
                .map(|&n| budget.keep(Prefetched::new(0, bytes::Bytes::from(vec![0u8; n]))).len())
                .collect()
        };
        assert_eq!(kept(&[400, 500, 100, 50]), [400, 500, 100, 0]);
        assert_eq!(kept(&[400, 700, 100]), [400, 0, 100]);
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
    fn footer(row_groups: &[ArrayRef], statistics: EnabledStatistics) -> ParquetMetaData {
        let schema =
            Arc::new(Schema::new(vec![ArrowField::new("t", row_groups[0].data_type().clone(), true)]));
        let properties = WriterProperties::builder().set_statistics_enabled(statistics).build();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, Arc::clone(&schema), Some(properties)).unwrap();
        for array in row_groups {
            writer
                .write(&RecordBatch::try_new(Arc::clone(&schema), vec![Arc::clone(array)]).unwrap())
                .unwrap();
            writer.flush().unwrap();
        }
        writer.close().unwrap();
        let footer = ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(out)).unwrap();
        assert_eq!(footer.num_row_groups(), row_groups.len());
        footer
    }

    /// `footer` with the statistics of every column chunk replaced by `statistics`.
    fn with_statistics(footer: ParquetMetaData, statistics: Statistics) -> ParquetMetaData {
        let mut builder = footer.into_builder();
        let row_groups = builder
            .take_row_groups()
            .into_iter()
            .map(|row_group| {
                let columns = row_group
                    .columns()
                    .iter()
                    .map(|c| c.clone().into_builder().set_statistics(statistics.clone()).build().unwrap())
                    .collect();
                row_group.into_builder().set_column_metadata(columns).build().unwrap()
            })
            .collect();
        builder.set_row_groups(row_groups).build()
    }

    fn int64(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn int32(values: &[Option<i32>]) -> ParquetMetaData {
        footer(&[Arc::new(Int32Array::from(values.to_vec()))], EnabledStatistics::Chunk)
    }

    /// Pruning by footer statistics: a file is passed over only when every row group proves that
    /// no row is in the range, and its rows skip the row-by-row range test only when every row
    /// group proves that all are in it. Bounds are inclusive; a null is never in the range.
    #[test]
    fn footer_statistics_place_a_file_against_the_range_only_when_they_prove_it() {
        use RangeOverlap::{All, None as Outside, Some as Partly};
        let range = TimeRange { since: 100, until: 200 };
        let overlap = |row_groups: &[&[Option<i64>]]| {
            let arrays: Vec<ArrayRef> = row_groups.iter().map(|values| int64(values)).collect();
            range_overlap(&footer(&arrays, EnabledStatistics::Chunk), "t", range)
        };
        let cases: [(&[&[Option<i64>]], RangeOverlap); 14] = [
            (&[&[Some(100), Some(200)]], All),
            (&[&[Some(150)], &[Some(100)], &[Some(200)]], All),
            (&[&[Some(99), Some(150)]], Partly),
            (&[&[Some(150), Some(201)]], Partly),
            (&[&[Some(50), Some(100)]], Partly),
            (&[&[Some(200), Some(250)]], Partly),
            (&[&[Some(0), Some(99)]], Outside),
            (&[&[Some(201), Some(300)]], Outside),
            (&[&[Some(0), Some(99)], &[Some(201)]], Outside),
            (&[&[Some(100), Some(200)], &[Some(300), Some(400)]], Partly),
            (&[&[Some(0), Some(50)], &[Some(150)], &[Some(300)]], Partly),
            (&[&[Some(150), None]], Partly),
            (&[&[Some(150)], &[None, None]], Partly),
            (&[&[None, None], &[None]], Outside),
        ];
        for (row_groups, expected) in cases {
            assert_eq!(overlap(row_groups), expected, "{row_groups:?}");
        }

        // 32-bit signed timestamps are compared as well.
        assert_eq!(range_overlap(&int32(&[Some(100), Some(200)]), "t", range), All);
        assert_eq!(range_overlap(&int32(&[Some(201), Some(300)]), "t", range), Outside);
        // Unsigned statistics are stored as signed: they prove nothing here.
        let unsigned = footer(&[Arc::new(UInt32Array::from(vec![150]))], EnabledStatistics::Chunk);
        assert_eq!(range_overlap(&unsigned, "t", range), Partly);
        let unsigned = footer(&[Arc::new(UInt64Array::from(vec![u64::MAX]))], EnabledStatistics::Chunk);
        assert_eq!(range_overlap(&unsigned, "t", range), Partly);
        // Older writers mark an unsigned column with its converted type only.
        let converted_only = {
            let schema = Arc::new(parse_message_type("message m { required int32 t (UINT_32); }").unwrap());
            let mut out = Vec::new();
            let mut writer = SerializedFileWriter::new(&mut out, schema, Arc::default()).unwrap();
            let mut row_group = writer.next_row_group().unwrap();
            let mut column = row_group.next_column().unwrap().unwrap();
            column.typed::<Int32Type>().write_batch(&[150], None, None).unwrap();
            column.close().unwrap();
            row_group.close().unwrap();
            writer.close().unwrap();
            ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(out)).unwrap()
        };
        assert_eq!(converted_only.file_metadata().schema_descr().column(0).logical_type_ref(), None);
        assert_eq!(range_overlap(&converted_only, "t", range), Partly);
        // Statistics with a null count but no minimum and maximum prove nothing, unless every
        // row is null.
        let rows_and_nulls = |nulls| {
            let written = footer(&[int64(&[Some(150), None])], EnabledStatistics::Chunk);
            with_statistics(written, Statistics::int64(None, None, None, Some(nulls), false))
        };
        assert_eq!(range_overlap(&rows_and_nulls(1), "t", range), Partly);
        assert_eq!(range_overlap(&rows_and_nulls(2), "t", range), Outside);
        // Without statistics nothing is proved; without the column every row is null there.
        let unknown = footer(&[int64(&[Some(0)])], EnabledStatistics::None);
        assert_eq!(range_overlap(&unknown, "t", range), Partly);
        let known = footer(&[int64(&[Some(0)])], EnabledStatistics::Chunk);
        assert_eq!(range_overlap(&known, "other", range), Outside);
    }

    /// A signed column stands for an unsigned field only when every row group's minimum is at
    /// least 0 or the row group holds only nulls.
    #[test]
    fn a_signed_column_is_non_negative_only_when_every_row_group_shows_it() {
        let non_negative = |row_groups: &[&[Option<i64>]]| {
            let arrays: Vec<ArrayRef> = row_groups.iter().map(|values| int64(values)).collect();
            signed_column_is_non_negative(&footer(&arrays, EnabledStatistics::Chunk), "t")
        };
        assert!(non_negative(&[&[Some(0), Some(5)]]));
        assert!(non_negative(&[&[Some(3), None], &[None, None]]));
        assert!(!non_negative(&[&[Some(-1), Some(5)]]));
        assert!(!non_negative(&[&[Some(0)], &[Some(i64::MIN)]]));
        assert!(signed_column_is_non_negative(&int32(&[Some(0), Some(1)]), "t"));
        assert!(!signed_column_is_non_negative(&int32(&[Some(-1), Some(1)]), "t"));
        assert!(signed_column_is_non_negative(&int32(&[None, None]), "t"));
        let unknown = footer(&[int64(&[Some(1)])], EnabledStatistics::None);
        assert!(!signed_column_is_non_negative(&unknown, "t"), "no statistics prove nothing");
        assert!(signed_column_is_non_negative(&unknown, "other"), "an absent column holds no value");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(0), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        assert_eq!(utc_date(86_399), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        assert_eq!(utc_date(86_400), NaiveDate::from_ymd_opt(1970, 1, 2).unwrap());
        assert_eq!(utc_date(i64::MIN), NaiveDate::MIN);
    }
}
