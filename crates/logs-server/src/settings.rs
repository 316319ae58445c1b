//! The limits and tunables of the HTTP API.

use std::path::PathBuf;
use std::time::Duration;

use logs_format::JsonIntegers;

use crate::auth::TrustedProxies;
use crate::config::ConfigError;

/// Rows per Arrow batch for an engine that serves several exports at once (`logs serve`'s
/// `--batch-size`): set [`logs_core::EngineConfig::batch_size`] to it. Every running export
/// holds a few batches of its wide texts, so the batch size multiplies with `max_exports`.
/// Measured on 2 cores with 8 wide CSV exports at once (1.34 GB each): the server peaked at
/// 375–386 MiB instead of 783–792 MiB with the engine's default 8 192, in the same time; one
/// export alone, 87–97 instead of 136–152 MiB, also in the same time (docs/decisions.md).
pub const SERVICE_BATCH_SIZE: usize = 2048;

/// Limits and tunables of the HTTP API. `Default` gives safe values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Exports running at once, in all (more: 503 with `Retry-After`).
    pub max_exports: usize,
    /// Exports running at once with one token (more: 429 with `Retry-After`).
    pub max_exports_per_token: usize,
    /// The longest request target (path and query) in bytes (longer: 414).
    pub max_url_bytes: usize,
    /// The most bytes of request headers, counted as `name: value\r\n` (more: 431).
    pub max_header_bytes: usize,
    /// The longest wait for an export's first rows (longer: 503 `timeout`).
    pub first_byte_timeout: Duration,
    /// Chunks of about 512 KiB (one encoded slice each) that an export may encode ahead of its
    /// connection.
    pub chunk_queue: usize,
    /// The `Retry-After` of 429 and 503 answers about limits.
    pub retry_after: Duration,
    /// gzip level, 1 (fastest) to 9 (smallest).
    pub gzip_level: u32,
    /// How JSON exports write integers: quoted strings (the default, as the original API does:
    /// exact for readers that parse numbers as doubles) or numbers.
    pub json_integers: JsonIntegers,
    /// How long a streamed export waits for a reader that reads nothing before its connection
    /// is closed (the body then ends aborted). Replaces the server's write timeout for exports.
    pub reader_idle_timeout: Duration,
    /// How long an export's queue may stay full before the rest goes to a spill file.
    pub spill_after: Duration,
    /// Where spill files are made (`None`: the system's temporary folder).
    pub spill_dir: Option<PathBuf>,
    /// The most bytes of all spill files together; 0 turns spilling off.
    pub max_spill_bytes: u64,
    /// The most exports holding a spill file at once.
    pub max_spilled_exports: usize,
    /// The proxies whose forwarding header names the client (none: the peer is the client).
    pub trusted_proxies: TrustedProxies,
    /// 401s from one client address within `auth_failure_window` after which its requests
    /// are refused (429) until the window ends; 0 turns the limit off.
    pub auth_failure_limit: u32,
    pub auth_failure_window: Duration,
}

impl Default for Settings {
    /// 8 exports at once, 2 per token; 8 KiB target, 16 KiB headers; 60 s to the first byte;
    /// 4 chunks queued; `Retry-After: 5`; gzip level 1; JSON integers as strings; readers
    /// waited for 10 minutes; spilling after 5 s of a full queue, to the temporary folder, 4 GiB
    /// and 64 exports at most; no trusted proxy; 20 failed authentications per address and minute.
    fn default() -> Settings {
        Settings {
            max_exports: 8,
            max_exports_per_token: 2,
            max_url_bytes: 8 * 1024,
            max_header_bytes: 16 * 1024,
            first_byte_timeout: Duration::from_secs(60),
            chunk_queue: 4,
            retry_after: Duration::from_secs(5),
            gzip_level: 1,
            json_integers: JsonIntegers::default(),
            reader_idle_timeout: Duration::from_secs(600),
            spill_after: Duration::from_secs(5),
            spill_dir: None,
            max_spill_bytes: 4 << 30,
            max_spilled_exports: 64,
            trusted_proxies: TrustedProxies::default(),
            auth_failure_limit: 20,
            auth_failure_window: Duration::from_secs(60),
        }
    }
}

impl Settings {
    /// Names the first setting that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let checks = [
            (self.max_exports >= 1, "max_exports must be at least 1"),
            (self.max_exports_per_token >= 1, "max_exports_per_token must be at least 1"),
            (self.max_url_bytes >= 256, "max_url_bytes must be at least 256"),
            (self.max_header_bytes >= 1024, "max_header_bytes must be at least 1024"),
            (!self.first_byte_timeout.is_zero(), "first_byte_timeout must be above zero"),
            (self.chunk_queue >= 1, "chunk_queue must be at least 1"),
            ((1..=9).contains(&self.gzip_level), "gzip_level must be from 1 to 9"),
            (!self.reader_idle_timeout.is_zero(), "reader_idle_timeout must be above zero"),
            (self.max_spilled_exports >= 1, "max_spilled_exports must be at least 1"),
            (!self.auth_failure_window.is_zero(), "auth_failure_window must be above zero"),
        ];
        match checks.into_iter().find(|(ok, _)| !ok) {
            Some((_, message)) => Err(ConfigError::Invalid(message.to_owned())),
            None => Ok(()),
        }
    }
}
