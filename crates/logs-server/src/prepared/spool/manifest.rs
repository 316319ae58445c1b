//! What a complete prepared export is (its manifest and copies), and the names and times the
//! spool's objects carry.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The manifest's format version: a manifest of another version is not trusted.
pub const MANIFEST_VERSION: u32 = 2;

/// What a complete prepared export is: written last, as `<key>.manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub key: String,
    /// The job that wrote the copies.
    pub job: String,
    /// The format's extension: `csv`, `json`, `ndjson`, `parquet` or `arrow`.
    pub extension: String,
    /// When it was completed, in Unix seconds.
    pub created: u64,
    pub rows: u64,
    /// Unreadable files that `skip_unavailable_shards=true` left out.
    pub skipped_shards: u64,
    /// For a cursor chain's call, the cursor after it (`Logs-Cursor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    pub plain: Representation,
    /// The gzip copy; none for a format that is not worth compressing (Parquet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gzip: Option<Representation>,
}

/// One copy of a prepared export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Representation {
    pub bytes: u64,
    /// Of the copy's bytes, as hex: the copy's strong `ETag`.
    pub sha256: String,
}

impl Manifest {
    /// Both copies' bytes: what the export takes in the spool.
    pub fn size(&self) -> u64 {
        self.plain.bytes + self.gzip.as_ref().map_or(0, |gzip| gzip.bytes)
    }

    pub(super) fn copy_name(&self, gzip: bool) -> String {
        copy_name(&self.key, &self.job, &self.extension, gzip)
    }
}

pub(super) fn copy_name(key: &str, job: &str, extension: &str, gzip: bool) -> String {
    format!("{key}.{job}.{extension}{}", if gzip { ".gz" } else { "" })
}

/// Unix seconds now.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `bytes` random bytes as hex: names that no two processes or jobs pick alike.
pub fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut buffer);
    hex::encode(buffer)
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
