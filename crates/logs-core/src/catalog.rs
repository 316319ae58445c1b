//! The dataset on disk: which applications it holds, and which files an export must read.
//!
//! Layout: `<root>/application_id=<integer>/date=<YYYY-MM-DD>/<name>.parquet`, where `date` is
//! the UTC date of `error_timestamp`. Selection prunes in three steps, cheapest first:
//! the application's folder only; for the `default` dimension only the date folders inside
//! the range; then each file's footer statistics for the range's timestamp column. Each
//! selected file's footer is read here, so an unreadable file is found before any row is
//! exported: it fails the export, or, with `skip_unavailable_shards`, is left out and counted.

use std::fs::File;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use datafusion::parquet::file::statistics::Statistics;
use futures::{StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::request::{DateDimension, ExportRequest, TimeRange};

/// How many footers are read at once.
const FOOTER_READS_IN_FLIGHT: usize = 16;

/// The dataset below one root folder.
#[derive(Debug, Clone)]
pub struct Catalog {
    root: PathBuf,
}

/// A file an export reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectedFile {
    pub path: PathBuf,
    pub size: u64,
    pub rows: u64,
    pub row_groups: usize,
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
        Ok(Catalog { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The ids of the applications that have a folder, ascending.
    pub fn applications(&self) -> Result<Vec<i64>> {
        let mut ids: Vec<i64> = list_folder(&self.root)?
            .into_iter()
            .filter_map(|(name, path)| {
                let id = name.strip_prefix("application_id=")?.parse().ok()?;
                path.is_dir().then_some(id)
            })
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
        if !app_folder.is_dir() {
            return Ok(selection);
        }
        let range = request.range();
        let date_range = match request.date_dimension() {
            DateDimension::Default => Some((utc_date(range.since), utc_date(range.until))),
            DateDimension::Receive => None,
        };
        let mut date_folders: Vec<(NaiveDate, PathBuf)> = list_folder(&app_folder)?
            .into_iter()
            .filter_map(|(name, path)| {
                let date = NaiveDate::parse_from_str(name.strip_prefix("date=")?, "%Y-%m-%d").ok()?;
                path.is_dir().then_some((date, path))
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
                    .filter(|(name, path)| is_data_file(name) && path.is_file())
                    .map(|(_, path)| path),
            );
        }
        selection.candidate_files = paths.len();

        let column = request.date_dimension().timestamp_field().name();
        let checks: Vec<FooterCheck> = futures::stream::iter(paths)
            .map(|path| tokio::task::spawn_blocking(move || check_footer(path, column, range)))
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

/// The entries of `folder` as (UTF-8 name, path), in no particular order. Names that are not
/// UTF-8 cannot be part of the layout and are passed over.
fn list_folder(folder: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(folder).map_err(|e| storage(folder, e))? {
        let entry = entry.map_err(|e| storage(folder, e))?;
        if let Ok(name) = entry.file_name().into_string() {
            out.push((name, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn check_footer(path: PathBuf, column: &str, range: TimeRange) -> FooterCheck {
    let read = File::open(&path).map_err(|e| e.to_string()).and_then(|file| {
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        let meta = ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .map_err(|e| format!("not a readable Parquet file ({e})"))?;
        Ok((size, meta))
    });
    match read {
        Err(reason) => FooterCheck::Unreadable(SkippedFile { path, reason }),
        Ok((size, meta)) => {
            let rows = meta.file_metadata().num_rows().max(0) as u64;
            if rows == 0 || !may_hold_range(&meta, column, range) {
                FooterCheck::Pruned
            } else {
                FooterCheck::Keep(SelectedFile { path, size, rows, row_groups: meta.num_row_groups() })
            }
        }
    }
}

/// False only when the statistics of every row group prove that `column` has no value in
/// `range`. Missing statistics or an unexpected type keep the file.
fn may_hold_range(meta: &ParquetMetaData, column: &str, range: TimeRange) -> bool {
    let Some(index) =
        meta.file_metadata().schema_descr().columns().iter().position(|c| c.path().string() == column)
    else {
        // A file without the column holds nulls there, and nulls are never in a range.
        return false;
    };
    meta.row_groups().iter().any(|rg| {
        let bounds = match rg.column(index).statistics() {
            Some(Statistics::Int64(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
            Some(Statistics::Int32(s)) => {
                s.min_opt().map(|&v| i64::from(v)).zip(s.max_opt().map(|&v| i64::from(v)))
            }
            _ => return true,
        };
        match bounds {
            Some((min, max)) => max >= range.since && min <= range.until,
            // No min/max: either statistics were not written, or the column is all null.
            None => {
                rg.column(index).statistics().and_then(|s| s.null_count_opt()) != Some(rg.num_rows() as u64)
            }
        }
    })
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
