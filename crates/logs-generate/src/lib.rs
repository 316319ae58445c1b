//! Deterministic synthetic error-record datasets in the logs-export layout.
//!
//! [`generate`] writes a hive-partitioned Parquet dataset:
//!
//! ```text
//! <out>/application_id=<id>/date=<YYYY-MM-DD>/part-00000.parquet
//!                                             late-00000.parquet   (rows received hours or days late)
//!                                             part-00001.parquet   (days with more than max_file_rows)
//! ```
//!
//! `date` is the UTC date of `error_timestamp`. The files hold the 29 fields of the error
//! record other than `application_id` ([`record_batch_schema`]), sorted by
//! [`GenerateOptions::sort_by`], with page statistics (column and offset indexes) and Bloom
//! filters on the high-cardinality equality columns.
//!
//! The content imitates real crash reports: Java/Kotlin, Swift/Objective-C and .NET stack
//! traces grouped under a few thousand `error_id`s per app with a Zipf-like popularity, a
//! population of devices per app with consistent models, OS versions, countries, cities,
//! operators and advertising ids, and IPv4-mapped or native IPv6 addresses.
//!
//! The same options and seed always give byte-identical files, however many threads run:
//! each file (app, day, file number) has its own seed, and only exactly rounded
//! floating-point operations are used.
//!
//! This crate does not depend on `logs-core`: it is an independent writer of the format.

mod app;
mod crash;
mod options;
mod plan;
mod templates;
mod values;
// Data tables, laid out by hand.
#[rustfmt::skip]
mod vocab;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef};
use logs_schema::{Field, FieldType};

pub use options::{AppSpec, Codec, GenerateOptions, SortKey, parse_apps};

use app::AppModel;
use writer::{Job, Written};

/// Why a dataset could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// An option has a value that is not allowed; `name` is the option.
    #[error("invalid option `{name}`: {message}")]
    InvalidOption { name: &'static str, message: String },
    #[error("I/O error on {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("Parquet error: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("Arrow error: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenerateSummary {
    pub rows: u64,
    pub files: usize,
    /// Total size of the Parquet files.
    pub bytes: u64,
}

/// The names and types of the 29 columns stored in the files: the fields of the data contract
/// (`logs-schema`) but `application_id`, which is in the folder names, in the contract's
/// order. Strings as `Utf8`, integers as `Int64` or `UInt64`. All nullable.
pub fn record_batch_schema() -> SchemaRef {
    static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
        let fields = Field::all().filter(|f| !f.is_partition()).map(|f| {
            let data_type = match f.field_type() {
                FieldType::String => DataType::Utf8,
                FieldType::Int64 => DataType::Int64,
                FieldType::UInt64 => DataType::UInt64,
            };
            ArrowField::new(f.name(), data_type, true)
        });
        Arc::new(Schema::new(fields.collect::<Vec<_>>()))
    });
    SCHEMA.clone()
}

/// Generates the dataset described by `options` into `options.out`.
pub fn generate(options: &GenerateOptions) -> Result<GenerateSummary, GenerateError> {
    generate_with_progress(options, |_| {})
}

/// Like [`generate`], calling `progress` with the total number of rows written so far after
/// each batch of a few thousand rows (from the worker threads).
pub fn generate_with_progress(
    options: &GenerateOptions,
    progress: impl Fn(u64) + Sync,
) -> Result<GenerateSummary, GenerateError> {
    options.validate()?;
    prepare_out_dir(&options.out)?;

    let app_rows = plan::rows_per_app(options);
    let parts = plan::plan_parts(options, &app_rows);
    let apps: Vec<AppModel> = options
        .apps
        .iter()
        .zip(&app_rows)
        .enumerate()
        .map(|(index, (spec, &rows))| AppModel::new(options.seed, index, spec, rows))
        .collect();
    let done = AtomicU64::new(0);
    let on_rows = |rows: u64| progress(done.fetch_add(rows, Ordering::Relaxed) + rows);
    let job = Job { options, apps: &apps, schema: record_batch_schema(), on_rows: &on_rows };

    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let work = || -> Result<Written, GenerateError> {
        let mut total = Written::default();
        while !failed.load(Ordering::Relaxed) {
            let Some(part) = parts.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
            match writer::write_part(&job, part) {
                Ok(w) => {
                    total.rows += w.rows;
                    total.files += w.files;
                    total.bytes += w.bytes;
                }
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(total)
    };
    let threads = options.threads.min(parts.len()).max(1);
    let results: Vec<Result<Written, GenerateError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });

    let mut summary = GenerateSummary::default();
    for result in results {
        let written = result?;
        summary.rows += written.rows;
        summary.files += written.files;
        summary.bytes += written.bytes;
    }
    Ok(summary)
}

/// Creates `out`, or checks that it is an empty directory: never mix datasets.
fn prepare_out_dir(out: &Path) -> Result<(), GenerateError> {
    let io = |source| GenerateError::Io { path: out.to_owned(), source };
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(GenerateError::InvalidOption {
                    name: "out",
                    message: format!(
                        "directory {} is not empty (choose a new or empty directory)",
                        out.display()
                    ),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(out).map_err(io),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(GenerateError::InvalidOption {
            name: "out",
            message: format!("{} is not a directory", out.display()),
        }),
        Err(e) => Err(io(e)),
    }
}
