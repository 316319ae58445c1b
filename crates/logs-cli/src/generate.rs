//! `logs generate`: a deterministic synthetic dataset.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use logs_core::DatasetLocation;
use logs_core::object_store::ObjectStore;
use logs_core::object_store::buffered::BufWriter;
use logs_core::object_store::path::Path as ObjectPath;
use tokio::io::AsyncWriteExt;

use chrono::NaiveDate;
use clap::Args;
use logs_generate::{Codec, GenerateError, GenerateOptions, SortKey, generate, parse_apps};

use crate::Failure;
use crate::store::S3Args;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Where to write the dataset: a local folder (absent or empty), a file:// URL, or an
    /// s3://bucket/prefix URL (no key may exist below the prefix yet).
    #[arg(long, value_name = "LOCATION")]
    out: String,
    #[command(flatten)]
    s3: S3Args,
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
    /// Compression: mixed (the default: zstd:1 for `error` and `error_json`, lz4 for the time
    /// columns, `device_ipv6`, `ios_ifa` and `profile_id`, none for the rest), none, snappy, lz4,
    /// zstd or zstd:LEVEL.
    #[arg(long)]
    compression: Option<Codec>,
}

pub fn run(args: GenerateArgs) -> Result<(), Failure> {
    let location = DatasetLocation::parse(&args.out).map_err(|e| Failure::Usage(e.to_string()))?;
    let bucket = location.object_store(&args.s3.options()).map_err(|e| Failure::Usage(e.to_string()))?;
    // Into a bucket: written to a temporary folder first, then uploaded.
    let staging = match &bucket {
        Some(_) => {
            Some(tempfile::tempdir().context("cannot create a temporary folder to write the dataset in")?)
        }
        None => None,
    };
    let folder = match (&location, &staging) {
        (_, Some(staging)) => staging.path().join("dataset"),
        (DatasetLocation::Local(path), None) => path.clone(),
        (DatasetLocation::S3 { .. }, None) => unreachable!("an S3 location has a store"),
    };
    let runtime = match &bucket {
        Some((store, prefix)) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(refuse_non_empty(store.as_ref(), prefix, &location))?;
            Some(runtime)
        }
        None => None,
    };
    let mut options = GenerateOptions::new(&folder);
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
    if let (Some((store, prefix)), Some(runtime)) = (&bucket, &runtime) {
        runtime
            .block_on(upload(&folder, store, prefix))
            .with_context(|| format!("cannot upload the dataset to {location}"))?;
    }
    eprintln!(
        "wrote {} rows in {} files ({:.1} MiB) to {location} in {:.1} s",
        summary.rows,
        summary.files,
        summary.bytes as f64 / (1024.0 * 1024.0),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A dataset is generated only into an empty place, in a bucket as in a folder.
async fn refuse_non_empty(
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
    location: &DatasetLocation,
) -> Result<(), Failure> {
    let first = store
        .list(Some(prefix))
        .next()
        .await
        .transpose()
        .with_context(|| format!("cannot list {location}"))?;
    match first {
        Some(_) => {
            Err(Failure::Usage(format!("--out {location}: keys exist below the prefix; choose an empty one")))
        }
        None => Ok(()),
    }
}

/// Uploads every file below `folder` to `prefix`, at the same relative key; a few at once.
async fn upload(folder: &Path, store: &Arc<dyn ObjectStore>, prefix: &ObjectPath) -> anyhow::Result<()> {
    let mut files = Vec::new();
    let mut pending = vec![folder.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() { pending.push(path) } else { files.push(path) }
        }
    }
    files.sort();
    futures::stream::iter(files)
        .map(|path| async move {
            let relative = path.strip_prefix(folder)?;
            let key = relative.iter().try_fold(prefix.clone(), |key, part| {
                part.to_str()
                    .map(|part| key.join(part))
                    .with_context(|| format!("{} is not UTF-8", path.display()))
            })?;
            let mut file = tokio::fs::File::open(&path).await?;
            let mut writer = BufWriter::new(Arc::clone(store), key.clone());
            tokio::io::copy(&mut file, &mut writer).await.with_context(|| format!("uploading {key}"))?;
            writer.shutdown().await.with_context(|| format!("uploading {key}"))?;
            anyhow::Ok(())
        })
        .buffer_unordered(4)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn invalid(e: GenerateError) -> Failure {
    match e {
        GenerateError::InvalidOption { .. } => Failure::Usage(e.to_string()),
        e => Failure::Other(e.into()),
    }
}
