//! `logs generate`: a deterministic synthetic dataset.

use std::path::PathBuf;
use std::time::Instant;

use chrono::NaiveDate;
use clap::Args;
use logs_generate::{Codec, GenerateError, GenerateOptions, SortKey, generate, parse_apps};

use crate::Failure;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The dataset folder to create (must be absent or empty).
    #[arg(long)]
    out: PathBuf,
    /// Total number of records.
    #[arg(long)]
    rows: u64,
    /// Applications and their shares of the records: `ID[:WEIGHT],…`.
    #[arg(long, default_value = "1001:80,1002:15,1003:5")]
    apps: String,
    /// Number of days.
    #[arg(long, default_value_t = 30)]
    days: u32,
    /// The first day (UTC), `yyyy-mm-dd`.
    #[arg(long, default_value = "2026-10-01")]
    start: NaiveDate,
    /// Seed of the generator: the same options and seed give byte-identical files.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Maximum rows per Parquet row group.
    #[arg(long, default_value_t = 131_072)]
    row_group_rows: usize,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// The order of the rows in each file: error_timestamp, error_receive_timestamp, error_id
    /// (then error_timestamp), service_device_id (then error_timestamp) or none.
    #[arg(long)]
    sort_by: Option<SortKey>,
    /// Compression: mixed (the default: zstd:1 for `error` and `error_json`, lz4 for the rest), none, snappy, lz4, zstd or zstd:LEVEL.
    #[arg(long)]
    compression: Option<Codec>,
}

pub fn run(args: GenerateArgs) -> Result<(), Failure> {
    let mut options = GenerateOptions::new(&args.out);
    options.rows = args.rows;
    options.apps = parse_apps(&args.apps).map_err(invalid)?;
    options.days = args.days;
    options.start = args.start;
    options.seed = args.seed;
    options.row_group_rows = args.row_group_rows;
    if args.threads > 0 {
        options.threads = args.threads;
    }
    if let Some(sort_by) = args.sort_by {
        options.sort_by = sort_by;
    }
    if let Some(compression) = args.compression {
        options.compression = compression;
    }
    let started = Instant::now();
    let summary = generate(&options).map_err(invalid)?;
    eprintln!(
        "wrote {} rows in {} files ({:.1} MiB) to {} in {:.1} s",
        summary.rows,
        summary.files,
        summary.bytes as f64 / (1024.0 * 1024.0),
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn invalid(e: GenerateError) -> Failure {
    match e {
        GenerateError::InvalidOption { .. } => Failure::Usage(e.to_string()),
        e => Failure::Other(e.into()),
    }
}
