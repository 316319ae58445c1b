//! `logs-core`: the export engine of logs-export.
//!
//! A raw query string (spec §4.1) is parsed into [`QueryPairs`], validated into an
//! [`ExportRequest`], mapped by [`plan::build_plan`] onto a DataFusion logical plan over the
//! application's Parquet files (chosen and pruned by the [`Catalog`]), and executed by the
//! [`Engine`] as an [`ExportStream`] of Arrow record batches. The engine knows nothing of
//! HTTP or of output formats.

pub mod aliases;
pub mod catalog;
pub mod engine;
pub mod error;
mod page_headers;
pub mod part;
pub mod plan;
pub mod query;
mod reader;
pub mod request;
pub mod schema;
pub mod table;

pub use aliases::{ColumnSource, FieldAliases};
pub use catalog::{Catalog, FileSelection, SelectedFile, SkippedFile};
pub use engine::{Engine, EngineConfig, ExportStream, Pruning};
pub use error::{Error, RequestError, Result};
pub use query::QueryPairs;
pub use request::{
    Column, DateDimension, ExportRequest, Filter, FilterValue, Parts, RequestPolicy, TimeRange,
};
pub use schema::{Field, FieldType};

/// Arrow, as used by the engine (re-exported so embedders use the same version).
pub use datafusion::arrow;
