//! `logs-core`: the export engine of logs-export.
//!
//! A raw query string is parsed into [`QueryPairs`], validated into an [`ExportRequest`],
//! mapped by [`plan::build_plan`] onto a DataFusion logical plan over the application's
//! Parquet files (chosen and pruned by the [`Storage`], in a local folder or an S3-compatible
//! bucket), and executed by the [`Engine`] as an [`ExportStream`] of Arrow record batches. The
//! engine knows nothing of HTTP or of output formats.

pub mod aliases;
pub mod cursor;
pub mod engine;
pub mod error;
pub mod part;
pub mod plan;
pub mod privacy;
pub mod query;
pub mod request;
pub mod schema;
pub mod storage;

pub use aliases::{ColumnSource, FieldAliases};
pub use cursor::{ChainCursor, ChainPosition, CursorKeys, CursorSettings, StepSummary};
pub use engine::{Engine, EngineConfig, ExportStream, Pruning};
pub use error::{Error, RequestError, Result};
pub use privacy::policies::Policies;
pub use privacy::{FieldPolicy, Privacy, PseudonymKey, Scrubber, Treatment};
pub use query::QueryPairs;
pub use request::{
    Column, DateDimension, ExportRequest, Filter, FilterValue, Parts, RequestPolicy, TimeRange,
};
pub use schema::{Field, FieldType};
pub use storage::{
    Addressing, DatasetLocation, FileSelection, KeptForScan, PageMachinery, Requests, S3Credentials,
    S3Options, Scope, SelectedFile, SkippedFile, Storage,
};

/// Arrow, as used by the engine (re-exported so embedders use the same version).
pub use datafusion::arrow;
/// object_store, as used by the engine (to hand an embedder's own store to [`Storage::from_store`]).
pub use object_store;
