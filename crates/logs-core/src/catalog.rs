//! The dataset on disk: which applications it holds, and which files an export must read.
//!
//! Layout: `<root>/application_id=<integer>/date=<YYYY-MM-DD>/<name>.parquet`, where `date` is
//! the UTC date of `error_timestamp`. Selection prunes in three steps, cheapest first:
//! the application's folder only; for the `default` dimension only the date folders inside
//! the range; then each file's footer statistics for the range's timestamp column. Each
//! selected file's footer is read here, so an unreadable file is found before any row is
//! exported: it fails the export, or, with `skip_unavailable_shards`, is left out and counted.
//!
//! The footers of the files kept are completed with their page index and put in DataFusion's
//! file-metadata cache (when the catalog has one), keyed by path and checked against size and
//! modification time: the scan then reads no footer a second time, and later exports of the
//! same files none at all. A file without an offset index gets one rebuilt from its page
//! headers (`page_headers.rs`).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use datafusion::arrow::datatypes::DataType;
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::execution::cache::cache_manager::{CachedFileMetadataEntry, FileMetadataCache};
use datafusion::object_store::ObjectMeta;
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::basic::{ConvertedType, LogicalType};
use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use datafusion::parquet::file::statistics::Statistics;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::page_headers;
use crate::request::{DateDimension, ExportRequest, TimeRange};
use crate::schema::{Field, FieldType};

/// How many footers are read at once.
const FOOTER_READS_IN_FLIGHT: usize = 16;

/// The dataset below one root folder.
#[derive(Clone)]
pub struct Catalog {
    root: PathBuf,
    metadata_cache: Option<Arc<FileMetadataCache>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("root", &self.root)
            .field("metadata_cache", &self.metadata_cache.is_some())
            .finish()
    }
}

/// A file an export reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedFile {
    pub path: PathBuf,
    pub size: u64,
    /// The modification time seen when the footer was read: the scan checks it again.
    pub modified: DateTime<Utc>,
    /// The file's inode number when the footer was read: the scan checks it again, so that a
    /// file replaced (renamed over) within the same clock tick is still noticed.
    pub inode: u64,
    pub rows: u64,
    pub row_groups: usize,
    /// The footer's statistics prove that every row of the file is inside the export's time
    /// range (no nulls, minimum and maximum inside it).
    pub all_in_range: bool,
}

/// A file an export could not read and, as asked by `skip_unavailable_shards`, left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    pub path: PathBuf,
    pub reason: String,
}

/// The files of one export, and what was pruned on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSelection {
    /// The files to read, in path order.
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

    pub fn row_groups(&self) -> usize {
        self.files.iter().map(|f| f.row_groups).sum()
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

impl Catalog {
    /// A catalog over `root`, which must be a readable folder.
    pub fn open(root: impl Into<PathBuf>) -> Result<Catalog> {
        let root = root.into();
        let meta = std::fs::metadata(&root).map_err(|e| storage(&root, e))?;
        if !meta.is_dir() {
            return Err(Error::Storage { path: Some(root), message: "not a folder".into() });
        }
        // A root that cannot be listed would look like an empty dataset: refuse it now.
        list_folder(&root)?;
        Ok(Catalog { root, metadata_cache: None })
    }

    /// Keeps the footers read in `cache` (DataFusion's file-metadata cache, shared with the
    /// scan), and looks them up there first.
    pub fn with_metadata_cache(mut self, cache: Arc<FileMetadataCache>) -> Catalog {
        self.metadata_cache = Some(cache);
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The ids of the applications that have a folder, ascending.
    pub fn applications(&self) -> Result<Vec<i64>> {
        let mut ids: Vec<i64> = list_folder(&self.root)?
            .into_iter()
            .filter(|entry| entry.kind == EntryKind::Folder)
            .filter_map(|entry| entry.name.strip_prefix("application_id=")?.parse().ok())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// The folder of application `id`.
    pub fn application_folder(&self, id: i64) -> PathBuf {
        self.root.join(format!("application_id={id}"))
    }

    /// Selects the files `request` must read (see the module documentation).
    pub async fn select(&self, request: &ExportRequest) -> Result<FileSelection> {
        let mut selection = FileSelection::default();
        let app_folder = self.application_folder(request.application_id());
        match entry_kind(&app_folder, None)? {
            EntryKind::Folder => {}
            EntryKind::File | EntryKind::Absent => return Ok(selection),
        }
        let range = request.range();
        let date_range = match request.date_dimension() {
            DateDimension::Default => Some((utc_date(range.since), utc_date(range.until))),
            DateDimension::Receive => None,
        };
        let mut date_folders: Vec<(NaiveDate, PathBuf)> = list_folder(&app_folder)?
            .into_iter()
            .filter(|entry| entry.kind == EntryKind::Folder)
            .filter_map(|entry| {
                let date = NaiveDate::parse_from_str(entry.name.strip_prefix("date=")?, "%Y-%m-%d").ok()?;
                Some((date, entry.path))
            })
            .collect();
        date_folders.sort();
        selection.date_folders = date_folders.len();
        if let Some((first, last)) = date_range {
            date_folders.retain(|(date, _)| (first..=last).contains(date));
        }
        selection.date_folders_pruned = selection.date_folders - date_folders.len();

        let mut paths = Vec::new();
        for (_, folder) in &date_folders {
            paths.extend(
                list_folder(folder)?
                    .into_iter()
                    .filter(|entry| entry.kind == EntryKind::File && is_data_file(&entry.name))
                    .map(|entry| entry.path),
            );
        }
        selection.candidate_files = paths.len();

        let column = request.date_dimension().timestamp_field().name();
        let checks: Vec<FooterCheck> = futures::stream::iter(paths)
            .map(|path| {
                let cache = self.metadata_cache.clone();
                tokio::task::spawn_blocking(move || check_footer(path, column, range, cache.as_deref()))
            })
            .buffered(FOOTER_READS_IN_FLIGHT)
            .map_err(|e| Error::Internal(datafusion::error::DataFusionError::External(Box::new(e))))
            .try_collect()
            .await?;
        for check in checks {
            match check {
                FooterCheck::Keep(file) => selection.files.push(file),
                FooterCheck::Pruned => selection.files_pruned_by_statistics += 1,
                FooterCheck::Unreadable(file) if request.skip_unavailable_shards() => {
                    selection.skipped.push(file)
                }
                FooterCheck::Unreadable(file) => {
                    return Err(Error::Storage { path: Some(file.path), message: file.reason });
                }
            }
        }
        Ok(selection)
    }
}

/// A file name the dataset counts: `*.parquet`, not hidden (`.x`) and not a marker (`_x`).
fn is_data_file(name: &str) -> bool {
    name.ends_with(".parquet") && !name.starts_with('.') && !name.starts_with('_')
}

fn utc_date(timestamp: i64) -> NaiveDate {
    chrono::DateTime::from_timestamp(timestamp, 0).map_or(NaiveDate::MIN, |t| t.date_naive())
}

fn storage(path: &Path, e: std::io::Error) -> Error {
    Error::Storage { path: Some(path.to_owned()), message: e.to_string() }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    File,
    Folder,
    /// Vanished since it was listed, or a dangling link.
    Absent,
}

struct Entry {
    name: String,
    path: PathBuf,
    kind: EntryKind,
}

/// What `path` is. Only "not found" counts as absent: any other failure to look (permission
/// denied, I/O error) is an error naming the path, never a silently smaller dataset.
fn entry_kind(path: &Path, listed: Option<std::fs::FileType>) -> Result<EntryKind> {
    let file_type = match listed {
        Some(t) if !t.is_symlink() => t,
        _ => match std::fs::metadata(path) {
            Ok(meta) => meta.file_type(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(EntryKind::Absent),
            Err(e) => return Err(storage(path, e)),
        },
    };
    Ok(if file_type.is_dir() {
        EntryKind::Folder
    } else if file_type.is_file() {
        EntryKind::File
    } else {
        // Sockets, devices, FIFOs: not part of a dataset.
        EntryKind::Absent
    })
}

/// The entries of `folder`, sorted by name. Names that are not UTF-8 cannot be part of the
/// layout and are passed over.
fn list_folder(folder: &Path) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(folder).map_err(|e| storage(folder, e))? {
        let entry = entry.map_err(|e| storage(folder, e))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let path = entry.path();
        let kind = entry_kind(&path, entry.file_type().ok())?;
        out.push(Entry { name, path, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn check_footer(
    path: PathBuf,
    column: &str,
    range: TimeRange,
    cache: Option<&FileMetadataCache>,
) -> FooterCheck {
    let read = File::open(&path).map_err(|e| e.to_string()).and_then(|file| {
        let meta = file.metadata().map_err(|e| e.to_string())?;
        let modified = DateTime::<Utc>::from(meta.modified().map_err(|e| e.to_string())?);
        let key = object_meta(&path, meta.len(), modified);
        let cached = cache.zip(key.as_ref()).and_then(|(cache, key)| cached_footer(cache, key));
        let footer = match &cached {
            Some(footer) => Arc::clone(footer),
            None => Arc::new(ParquetMetaDataReader::new().parse_and_finish(&file).map_err(unreadable)?),
        };
        // Checked on every export, cached footer or not: the checks are cheap.
        check_types(&footer)?;
        let rows = footer.file_metadata().num_rows().max(0) as u64;
        let overlap = range_overlap(&footer, column, range);
        if rows == 0 || overlap == RangeOverlap::None {
            return Ok(None);
        }
        if cached.is_none()
            && let Some((cache, key)) = cache.zip(key)
        {
            remember_footer(&file, &footer, cache, key)?;
        }
        let row_groups = footer.num_row_groups();
        let all_in_range = overlap == RangeOverlap::All;
        let (size, inode) = (meta.len(), meta.ino());
        Ok(Some(SelectedFile { path: path.clone(), size, modified, inode, rows, row_groups, all_in_range }))
    });
    match read {
        Err(reason) => FooterCheck::Unreadable(SkippedFile { path, reason }),
        Ok(None) => FooterCheck::Pruned,
        Ok(Some(file)) => FooterCheck::Keep(file),
    }
}

fn unreadable(e: impl std::fmt::Display) -> String {
    format!("not a readable Parquet file ({e})")
}

/// Puts the footer of a file the export reads into the cache, with its page index (read now,
/// only for the files kept), or with an offset index rebuilt from the page headers for a file
/// written without one, so that the scan fetches only the pages it needs.
fn remember_footer(
    file: &File,
    footer: &ParquetMetaData,
    cache: &FileMetadataCache,
    key: ObjectMeta,
) -> Result<(), String> {
    let mut reader = ParquetMetaDataReader::new_with_metadata(footer.clone())
        .with_page_index_policy(PageIndexPolicy::Optional);
    reader.read_page_indexes(file).map_err(unreadable)?;
    let footer = reader.finish().map_err(unreadable)?;
    let footer = page_headers::with_rebuilt_offset_index(file, &footer).unwrap_or(footer);
    // Only footers with a page index: for one without, the scan would try to load the missing
    // index again on every use (measured: 73 -> 327 ms of metadata loading for 61 files written
    // by pyarrow), so it reads those itself.
    if footer.column_index().is_some() && footer.offset_index().is_some() {
        let entry = CachedParquetMetaData::new(Arc::new(footer));
        cache.put(&key.location.clone(), CachedFileMetadataEntry::new(key, Arc::new(entry)));
    }
    Ok(())
}

/// The key DataFusion's scan looks a file up by: the same path, size and modification time
/// as the scan's `PartitionedFile` (see `table.rs`).
fn object_meta(path: &Path, size: u64, modified: DateTime<Utc>) -> Option<ObjectMeta> {
    let location = ObjectPath::from_absolute_path(path).ok()?;
    Some(ObjectMeta { location, last_modified: modified, size, e_tag: None, version: None })
}

/// The cached footer for `key`, if the cache holds one for its size and modification time.
pub(crate) fn cached_footer(cache: &FileMetadataCache, key: &ObjectMeta) -> Option<Arc<ParquetMetaData>> {
    let entry = cache.get(&key.location)?;
    if !entry.is_valid_for(key) {
        return None;
    }
    let footer = entry.file_metadata.as_any().downcast_ref::<CachedParquetMetaData>()?;
    Some(Arc::clone(footer.parquet_metadata()))
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
    use super::*;

    #[test]
    fn data_file_names() {
        assert!(is_data_file("part-0.parquet"));
        assert!(!is_data_file("part-0.parquet.tmp"));
        assert!(!is_data_file("_SUCCESS"));
        assert!(!is_data_file(".part-0.parquet"));
        assert!(!is_data_file("_tmp.parquet"));
        assert!(!is_data_file("part-0.PARQUET.crc"));
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(0), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        assert_eq!(utc_date(86_399), NaiveDate::from_ymd_opt(1970, 1, 1).unwrap());
        assert_eq!(utc_date(86_400), NaiveDate::from_ymd_opt(1970, 1, 2).unwrap());
        assert_eq!(utc_date(i64::MIN), NaiveDate::MIN);
    }
}
