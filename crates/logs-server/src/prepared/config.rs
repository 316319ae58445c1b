//! The operator's settings of prepared exports.

use std::time::Duration;

use logs_core::DatasetLocation;

/// When exports are prepared rather than streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreparePolicy {
    /// When the request says `Prefer: respond-async`.
    #[default]
    Requested,
    /// Always: for clients written for the original API, which repeat a request on `202`
    /// without asking for it.
    Always,
}

/// The operator's settings of prepared exports.
#[derive(Debug, Clone)]
pub struct PreparedConfig {
    pub policy: PreparePolicy,
    /// A local folder or an `s3://bucket/prefix` (with the dataset's S3 settings).
    pub spool: DatasetLocation,
    /// How long a complete export is served (and reused) after it was prepared.
    pub ttl: Duration,
    /// The most bytes the spool holds, both copies of every export counted.
    pub max_spool_bytes: u64,
    /// The largest prepared export (its plain bytes); larger: 400 "Try to use more parts.".
    pub max_export_bytes: Option<u64>,
    /// The `Retry-After` of `202` when the job's remaining time cannot be estimated yet (else
    /// the estimate, from 1 s to the larger of this and 60 s).
    pub retry_after: Duration,
    /// How long a request waits for a job it started or joined before it answers `202`
    /// (`Prefer: wait=N` asks for another time); a job done by then is answered `200`.
    pub wait: Duration,
    /// How long a client downloading a complete export may read nothing before its connection
    /// is closed (streamed exports keep the server's write timeout).
    pub download_write_timeout: Duration,
    /// How long a job's lease lasts unless renewed (a third of it apart): how soon another
    /// process sharing the spool takes over the job of one that died.
    pub lease_ttl: Duration,
}

impl PreparedConfig {
    /// How often the spool is swept: every half of the time to keep exports or every lease
    /// time, whichever is shorter, from 1 s to 1 min.
    pub(super) fn sweep_period(&self) -> Duration {
        (self.ttl / 2).min(self.lease_ttl).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Policy `requested`, kept 1 hour, 10 GiB in all, no size limit per export, `Retry-After: 5`
    /// before an estimate, 2 seconds of wait, 15 minutes of download stall, leases of 30 seconds.
    pub fn new(spool: DatasetLocation) -> PreparedConfig {
        PreparedConfig {
            policy: PreparePolicy::Requested,
            spool,
            ttl: Duration::from_secs(3600),
            max_spool_bytes: 10 << 30,
            max_export_bytes: None,
            retry_after: Duration::from_secs(5),
            wait: Duration::from_secs(2),
            download_write_timeout: Duration::from_secs(15 * 60),
            lease_ttl: Duration::from_secs(30),
        }
    }
}
