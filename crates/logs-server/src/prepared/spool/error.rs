//! Why the spool failed: its own error, which `crate::error` turns into an HTTP answer.

use std::time::Duration;

use logs_core::object_store::Error as ObjectStoreError;

/// What can go wrong in the spool, as categories. The store's failures are not the client's
/// fault (503 `spool_unavailable`, the detail, which names the object, to the log); a full
/// spool is a moment's state (503 `spool_full`); the rest are bugs (500).
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// No room for another export's bytes, even after deleting every complete export.
    #[error("the spool has no room for {needed} more bytes")]
    Full { needed: u64, retry_after: Duration },
    /// The spool's object store failed.
    #[error("cannot {action} the spool: {source}")]
    Store {
        action: &'static str,
        #[source]
        source: ObjectStoreError,
    },
    /// Completing an upload to the spool failed.
    #[error("cannot {action} the spool: {source}")]
    Io {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The gzip copy could not be compressed.
    #[error("gzip: {0}")]
    Gzip(#[source] std::io::Error),
    /// A manifest could not be written as JSON.
    #[error("cannot write a manifest: {0}")]
    Manifest(#[source] serde_json::Error),
}

impl SpoolError {
    /// The store failed to `action` ("read", "write") the spool.
    pub(super) fn store(action: &'static str) -> impl FnOnce(ObjectStoreError) -> SpoolError {
        move |source| SpoolError::Store { action, source }
    }
}
