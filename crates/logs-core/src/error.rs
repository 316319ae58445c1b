//! The engine's errors: one enum of categories, so that callers (the HTTP server, the CLI)
//! can decide once how each category is reported.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;

/// A request that cannot be served as asked: names the parameter and says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    parameter: String,
    message: String,
}

impl RequestError {
    /// `message` reads as the rest of a sentence that starts with "parameter `<name>`", for
    /// example "is required". The name is kept as given; `Display` cuts and escapes it (see
    /// [`quote`]), so that no error text can be huge or span lines.
    pub fn new(parameter: &str, message: impl Into<String>) -> RequestError {
        RequestError { parameter: parameter.to_owned(), message: message.into() }
    }

    /// The name of the offending parameter (empty when the fault is not in one parameter).
    pub fn parameter(&self) -> &str {
        &self.parameter
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Quotes a value back in an error message: at most 64 characters, control characters
/// escaped, so that a huge or hostile parameter cannot make a huge or multi-line error. The
/// HTTP service quotes the name in an error's `location` the same way.
pub fn quote(value: &str) -> String {
    const MAX: usize = 64;
    let mut out = String::new();
    for (i, c) in value.chars().enumerate() {
        if i == MAX {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.parameter.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "parameter `{}` {}", quote(&self.parameter), self.message)
        }
    }
}

impl std::error::Error for RequestError {}

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is invalid; nothing was read.
    #[error(transparent)]
    InvalidRequest(#[from] RequestError),

    /// A part of the dataset could not be read: a missing or unreadable folder, bucket or
    /// prefix, or a corrupt, truncated, vanished, replaced or forbidden file. `path` names it:
    /// a local path, or `s3://bucket/key`.
    #[error("{}", describe_storage(path.as_deref(), message))]
    Storage { path: Option<String>, message: String },

    /// A cursor chain cannot go on exactly once: the objects of the date folder `date` that
    /// the chain delivered changed (`what`). A new chain from `restart` recovers.
    #[error(
        "the chain cannot go on exactly once: in the date folder {date}, {what}; start a new chain with \
         cursor=start&date_since={restart} and replace what was loaded from that date on"
    )]
    CursorConflict { date: chrono::NaiveDate, restart: chrono::NaiveDate, what: String },

    /// A configured limit (such as the memory pool) was reached.
    #[error("resources exhausted: {0}")]
    ResourcesExhausted(String),

    /// The engine was configured wrongly (at open, never per request).
    #[error("invalid engine setting `{setting}`: {message}")]
    Config { setting: &'static str, message: String },

    /// Anything else from the query engine: a bug, not the caller's fault.
    #[error("query execution failed: {0}")]
    Internal(DataFusionError),
}

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Error {
        match e {
            DataFusionError::ResourcesExhausted(m) => Error::ResourcesExhausted(m),
            DataFusionError::Context(ctx, inner) => match Error::from(*inner) {
                Error::Storage { path, message } => {
                    Error::Storage { path, message: format!("{ctx}: {message}") }
                }
                other => other,
            },
            DataFusionError::Shared(shared) => match std::sync::Arc::try_unwrap(shared) {
                Ok(inner) => Error::from(inner),
                Err(shared) => Error::Internal(DataFusionError::Shared(shared)),
            },
            DataFusionError::ParquetError(e) => storage_error_in(e.as_ref())
                .unwrap_or_else(|| Error::Storage { path: None, message: e.to_string() }),
            e @ (DataFusionError::IoError(_) | DataFusionError::ObjectStore(_)) => {
                Error::Storage { path: None, message: e.to_string() }
            }
            // Arrow errors met while reading are the data's fault: undecodable pages, values
            // that cannot be converted to the contract's types.
            DataFusionError::ArrowError(e, _)
                if matches!(
                    *e,
                    ArrowError::ParquetError(_)
                        | ArrowError::IoError(..)
                        | ArrowError::CastError(_)
                        | ArrowError::ParseError(_)
                        | ArrowError::InvalidArgumentError(_)
                        | ArrowError::ComputeError(_)
                        | ArrowError::ExternalError(_)
                ) =>
            {
                storage_error_in(e.as_ref())
                    .unwrap_or_else(|| Error::Storage { path: None, message: e.to_string() })
            }
            DataFusionError::External(inner) => match inner.downcast::<DataFusionError>() {
                Ok(df) => Error::from(*df),
                Err(inner) => match inner.downcast::<Error>() {
                    Ok(own) => *own,
                    Err(inner) => Error::Internal(DataFusionError::External(inner)),
                },
            },
            other => Error::Internal(other),
        }
    }
}

/// The storage layer's own error (naming the object) inside a Parquet or Arrow error, if the
/// failure came from a read.
fn storage_error_in(e: &(dyn std::error::Error + 'static)) -> Option<Error> {
    let mut current = Some(e);
    while let Some(error) = current {
        if let Some(Error::Storage { path, message }) = error.downcast_ref::<Error>() {
            return Some(Error::Storage { path: path.clone(), message: message.clone() });
        }
        current = match error.downcast_ref::<ParquetError>() {
            Some(ParquetError::External(inner)) => Some(inner.as_ref()),
            _ => match error.downcast_ref::<ArrowError>() {
                Some(ArrowError::ExternalError(inner)) => Some(inner.as_ref()),
                _ => error.source(),
            },
        };
    }
    None
}

impl From<std::convert::Infallible> for Error {
    fn from(never: std::convert::Infallible) -> Error {
        match never {}
    }
}

fn describe_storage(path: Option<&str>, message: &str) -> String {
    match path {
        Some(path) => format!("cannot read {path}: {message}"),
        None => format!("cannot read the dataset: {message}"),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
