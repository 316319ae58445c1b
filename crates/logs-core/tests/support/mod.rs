//! Test support: generated datasets, and an independent oracle that answers export requests
//! by reading every Parquet file with the `parquet` crate and filtering row by row.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use futures::StreamExt;
use logs_core::part::record_part;
use logs_core::{
    ColumnSource, Engine, EngineConfig, ExportRequest, ExportStream, Field, FieldAliases, FilterValue,
    PageMachinery, RequestPolicy,
};

/// A row as text: `None` for null. Integers in decimal.
pub type Row = Vec<Option<String>>;

/// A generated dataset: 3 applications, `days` days from 2026-10-01, rows in time order and
/// small row groups so that statistics can prune ranges within a day.
pub fn generate(rows: u64, days: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(dir.path().join("data"));
    options.rows = rows;
    options.days = days;
    options.seed = 7;
    options.row_group_rows = 512;
    options.sort_by = logs_generate::SortKey::ErrorTimestamp;
    options.threads = 2;
    logs_generate::generate(&options).unwrap();
    dir
}

pub fn data_root(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("data")
}

/// The bundled test dataset.
pub fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/dataset")
}

/// The aliases of the tests' engines: two aliases and two absent fields.
pub fn test_aliases() -> FieldAliases {
    FieldAliases::from_toml(
        "[aliases]\nappmetrica_device_id = \"service_device_id\"\ntown = \"city\"\n\
         [absent]\noaid = \"string\"\nlevel = \"integer\"\n",
    )
    .unwrap()
}

pub fn engine(root: &Path) -> Engine {
    engine_with_partitions(root, 2)
}

/// [`engine`] with `target_partitions` partitions (1: rows in file order).
pub fn engine_with_partitions(root: &Path, target_partitions: usize) -> Engine {
    engine_with_pages(root, target_partitions, PageMachinery::ON)
}

/// [`engine_with_partitions`] with the page machinery as given.
pub fn engine_with_pages(root: &Path, target_partitions: usize, page_machinery: PageMachinery) -> Engine {
    let config = EngineConfig {
        target_partitions,
        batch_size: 1000,
        aliases: test_aliases(),
        page_machinery,
        ..EngineConfig::default()
    };
    Engine::open(root, config).unwrap()
}

/// `query` validated as [`engine`] validates it (with [`test_aliases`]).
pub fn request(query: &str) -> ExportRequest {
    let policy = RequestPolicy { aliases: test_aliases(), ..RequestPolicy::default() };
    ExportRequest::parse(query, &policy).unwrap_or_else(|e| panic!("{query}: {e}"))
}

/// Runs the export and returns its rows as text.
pub async fn engine_rows(engine: &Engine, request: &ExportRequest) -> Vec<Row> {
    export_rows(engine, request).await.0
}

/// Runs the export to its end and returns its rows as text, and the finished stream (for its
/// selection, schema and plan).
pub async fn export_rows(engine: &Engine, request: &ExportRequest) -> (Vec<Row>, ExportStream) {
    let mut export = engine.export(request).await.unwrap();
    let names: Vec<_> = export.schema().fields().iter().map(|f| f.name().clone()).collect();
    let expected: Vec<_> = request.columns().iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, expected, "output columns must be the requested fields, in order");
    let mut rows = Vec::new();
    while let Some(batch) = export.next().await {
        rows.extend(batch_rows(&batch.unwrap()));
    }
    (rows, export)
}

/// Every row of a batch as text.
pub fn batch_rows(batch: &RecordBatch) -> Vec<Row> {
    let columns: Vec<ArrayRef> = batch.columns().iter().map(|c| cast(c, &DataType::Utf8).unwrap()).collect();
    (0..batch.num_rows())
        .map(|i| {
            columns.iter().map(|c| c.is_valid(i).then(|| c.as_string::<i32>().value(i).to_owned())).collect()
        })
        .collect()
}

/// A record as read from a file: (column name, value as text).
pub type NamedRow = Vec<(String, Option<String>)>;

/// Every record of the dataset: (application id from the path, the file's columns).
pub struct Records {
    pub rows: Vec<(i64, NamedRow)>,
}

/// Reads every readable `*.parquet` file below `root` (all applications, all dates: the oracle
/// prunes nothing).
pub fn read_all(root: &Path) -> Records {
    let mut rows = Vec::new();
    for path in parquet_files(root) {
        let app: i64 = path
            .components()
            .find_map(|c| c.as_os_str().to_str()?.strip_prefix("application_id=")?.parse().ok())
            .unwrap();
        let Ok(file) = std::fs::File::open(&path) else { continue };
        let Ok(builder) = ParquetRecordBatchReaderBuilder::try_new(file) else { continue };
        for batch in builder.build().unwrap() {
            let batch = batch.unwrap();
            let names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
            for row in batch_rows(&batch) {
                rows.push((app, names.iter().cloned().zip(row).collect()));
            }
        }
    }
    Records { rows }
}

/// Rewrites the Parquet file at `path` with the same rows, written with `properties` (as
/// another tool, or other settings, would have written it), and renames it into place.
pub fn rewrite(path: &Path, properties: datafusion::parquet::file::properties::WriterProperties) {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let staging = path.with_extension("tmp");
    let file = std::fs::File::create(&staging).unwrap();
    let mut writer =
        datafusion::parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(properties))
            .unwrap();
    for batch in &batches {
        writer.write(batch).unwrap();
    }
    writer.close().unwrap();
    std::fs::rename(&staging, path).unwrap();
}

pub fn parquet_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".parquet") && !name.starts_with('.') && !name.starts_with('_') {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

impl Records {
    fn value<'a>(row: &'a [(String, Option<String>)], name: &str) -> Option<&'a str> {
        row.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.as_deref())
    }

    /// The rows `request` should export, before its limit, as text.
    pub fn answer(&self, request: &ExportRequest) -> Vec<Row> {
        let range = request.range();
        let time_field = request.date_dimension().timestamp_field().name();
        self.rows
            .iter()
            .filter(|(app, row)| {
                if *app != request.application_id() {
                    return false;
                }
                let Some(t) = Self::value(row, time_field).map(|v| v.parse::<i64>().unwrap()) else {
                    return false;
                };
                if t < range.since || t > range.until {
                    return false;
                }
                let filters_match = request.filters().iter().all(|f| {
                    let wanted = match &f.value {
                        FilterValue::String(s) => s.clone(),
                        FilterValue::Int64(v) => v.to_string(),
                        FilterValue::UInt64(v) => v.to_string(),
                    };
                    Self::value(row, f.field.name()) == Some(wanted.as_str())
                });
                let part_matches = request.parts().is_none_or(|parts| {
                    let int = |name| Self::value(row, name).map(|v| v.parse::<i64>().unwrap());
                    let part = record_part(
                        int("error_timestamp"),
                        int("error_receive_timestamp"),
                        Self::value(row, "service_device_id").map(|v| v.parse::<u64>().unwrap()),
                        Self::value(row, "error_id"),
                        parts.count,
                    );
                    part == parts.number
                });
                filters_match && part_matches
            })
            .map(|(app, row)| {
                request
                    .columns()
                    .iter()
                    .map(|c| match c.source {
                        ColumnSource::Field(Field::APPLICATION_ID) => Some(app.to_string()),
                        ColumnSource::Field(f) => Self::value(row, f.name()).map(str::to_owned),
                        ColumnSource::Absent(_) => None,
                    })
                    .collect()
            })
            .collect()
    }
}

/// Sorts rows so that two multisets compare equal exactly when they are.
pub fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
    rows.sort();
    rows
}

/// Checks `engine_rows` against the oracle's answer: equal multisets, or with a limit, a
/// sub-multiset of the right size.
#[track_caller]
pub fn assert_matches_oracle(query: &str, request: &ExportRequest, got: Vec<Row>, expected: Vec<Row>) {
    let got = sorted(got);
    let expected = sorted(expected);
    match request.limit() {
        None => {
            assert!(got == expected, "{query}: engine {} rows, oracle {} rows", got.len(), expected.len())
        }
        Some(limit) => {
            assert_eq!(got.len() as u64, (expected.len() as u64).min(limit), "{query}");
            let mut remaining = expected;
            for row in got {
                let i = remaining
                    .binary_search(&row)
                    .unwrap_or_else(|_| panic!("{query}: row {row:?} not in the oracle"));
                remaining.remove(i);
            }
        }
    }
}

/// Settings of an engine over the moto server at `endpoint` (path-style, plain HTTP, the
/// test credentials given in code).
pub fn s3_options(endpoint: &str) -> logs_core::S3Options {
    use logs_testkit::s3;
    logs_core::S3Options {
        endpoint: Some(endpoint.to_owned()),
        region: Some(s3::REGION.to_owned()),
        addressing: Some(logs_core::Addressing::Path),
        allow_http: Some(true),
        credentials: Some(logs_core::S3Credentials {
            access_key_id: s3::ACCESS_KEY_ID.to_owned(),
            secret_access_key: s3::SECRET_ACCESS_KEY.to_owned(),
            session_token: None,
        }),
    }
}

/// An engine over `location` (an `s3://` URL) on the server at `endpoint`, as [`engine`]
/// configures its own, with `target_partitions` partitions.
pub fn bucket_engine(location: &str, endpoint: &str, target_partitions: usize) -> Engine {
    bucket_engine_with_pages(location, endpoint, target_partitions, PageMachinery::ON)
}

/// [`bucket_engine`] with the page machinery as given.
pub fn bucket_engine_with_pages(
    location: &str,
    endpoint: &str,
    target_partitions: usize,
    page_machinery: PageMachinery,
) -> Engine {
    let config = EngineConfig {
        target_partitions,
        batch_size: 1000,
        aliases: test_aliases(),
        s3: s3_options(endpoint),
        page_machinery,
        ..EngineConfig::default()
    };
    Engine::open(location, config).unwrap()
}

/// A client of `bucket` on the server at `endpoint`, for tests that change objects.
pub fn test_store(endpoint: &str, bucket: &str) -> std::sync::Arc<dyn logs_core::object_store::ObjectStore> {
    use logs_testkit::s3;
    let store = logs_core::object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_region(s3::REGION)
        .with_bucket_name(bucket)
        .with_allow_http(true)
        .with_access_key_id(s3::ACCESS_KEY_ID)
        .with_secret_access_key(s3::SECRET_ACCESS_KEY)
        .build()
        .unwrap();
    std::sync::Arc::new(store)
}
