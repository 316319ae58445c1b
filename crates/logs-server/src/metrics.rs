//! Counters of the service, rendered in the Prometheus text format on the admin listener.
//!
//! No label ever holds a token or a token's name: labels are route templates, status codes,
//! outcomes and failure reasons, a small fixed set.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How an export ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every row was sent.
    Completed,
    /// It failed: before the first byte (an error status) or after (an aborted connection).
    Failed,
    /// The client went away, or the server shut down, before the end.
    Cancelled,
}

/// The service's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    auth_failures: Mutex<BTreeMap<&'static str, u64>>,
    exports_running: AtomicU64,
    exports_completed: AtomicU64,
    exports_failed: AtomicU64,
    exports_cancelled: AtomicU64,
    export_rows: AtomicU64,
    export_bytes: AtomicU64,
    skipped_files: AtomicU64,
    buffered_bytes: AtomicU64,
    buffered_bytes_peak: AtomicU64,
}

/// A snapshot of the export counters (for tests and embedders).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportCounts {
    pub running: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Rows and bytes encoded (before compression).
    pub rows: u64,
    pub bytes: u64,
    /// Encoded bytes not yet taken by the HTTP connection, now and at most.
    pub buffered: u64,
    pub buffered_peak: u64,
}

impl Metrics {
    pub fn count_request(&self, route: &str, status: u16) {
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *requests.entry((route.to_owned(), status)).or_default() += 1;
    }

    pub fn auth_failure(&self, reason: &'static str) {
        *self.auth_failures.lock().unwrap_or_else(|e| e.into_inner()).entry(reason).or_default() += 1;
    }

    pub fn exports(&self) -> ExportCounts {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ExportCounts {
            running: get(&self.exports_running),
            completed: get(&self.exports_completed),
            failed: get(&self.exports_failed),
            cancelled: get(&self.exports_cancelled),
            rows: get(&self.export_rows),
            bytes: get(&self.export_bytes),
            buffered: get(&self.buffered_bytes),
            buffered_peak: get(&self.buffered_bytes_peak),
        }
    }

    /// Requests answered so far with `status`, on any route.
    pub fn requests_with_status(&self, status: u16) -> u64 {
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        requests.iter().filter(|((_, s), _)| *s == status).map(|(_, n)| n).sum()
    }

    pub(crate) fn add_rows(&self, rows: u64) {
        self.export_rows.fetch_add(rows, Ordering::Relaxed);
    }

    pub(crate) fn add_skipped_files(&self, files: u64) {
        self.skipped_files.fetch_add(files, Ordering::Relaxed);
    }

    /// Records `bytes` newly encoded and held until the connection takes them.
    pub(crate) fn buffer(&self, bytes: u64) {
        self.export_bytes.fetch_add(bytes, Ordering::Relaxed);
        let now = self.buffered_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.buffered_bytes_peak.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn unbuffer(&self, bytes: u64) {
        self.buffered_bytes.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Counts an export as running until the returned guard is dropped.
    pub(crate) fn export_started(self: &Arc<Self>) -> RunningExport {
        self.exports_running.fetch_add(1, Ordering::Relaxed);
        RunningExport { metrics: self.clone(), outcome: None }
    }
}

/// An export in progress; dropped without an outcome, it counts as cancelled.
#[derive(Debug)]
pub(crate) struct RunningExport {
    metrics: Arc<Metrics>,
    outcome: Option<Outcome>,
}

impl RunningExport {
    pub(crate) fn set_outcome(&mut self, outcome: Outcome) {
        self.outcome = Some(outcome);
    }
}

impl Drop for RunningExport {
    fn drop(&mut self) {
        let m = &self.metrics;
        let counter = match self.outcome.unwrap_or(Outcome::Cancelled) {
            Outcome::Completed => &m.exports_completed,
            Outcome::Failed => &m.exports_failed,
            Outcome::Cancelled => &m.exports_cancelled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        m.exports_running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the token sources report, for [`render`] (see `Authenticator::figures`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenSourceFigures {
    pub tokens_file: Option<TokensFileFigures>,
    pub introspection: Option<IntrospectionFigures>,
    pub oidc: Option<OidcFigures>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokensFileFigures {
    pub loaded: u64,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntrospectionFigures {
    pub active: u64,
    pub inactive: u64,
    pub errors: u64,
    pub cache_hits: u64,
    pub cache_entries: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OidcFigures {
    pub fetches_ok: u64,
    pub fetches_failed: u64,
    pub keys: u64,
}

/// The Prometheus text exposition of every counter.
pub fn render(m: &Metrics, sources: &TokenSourceFigures) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let plain = |value: u64| vec![(String::new(), value)];

    let requests: Vec<(String, u64)> = m
        .requests
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|((route, status), n)| (format!("{{route=\"{}\",status=\"{status}\"}}", escape(route)), *n))
        .collect();
    family("logs_http_requests_total", "counter", "HTTP requests answered, by route and status.", &requests);
    let failures: Vec<(String, u64)> = m
        .auth_failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(reason, n)| (format!("{{reason=\"{reason}\"}}"), *n))
        .collect();
    family(
        "logs_auth_failures_total",
        "counter",
        "Requests refused by authentication, by reason.",
        &failures,
    );

    let e = m.exports();
    family("logs_exports_running", "gauge", "Exports running now.", &plain(e.running));
    let outcomes = [("completed", e.completed), ("failed", e.failed), ("cancelled", e.cancelled)]
        .map(|(outcome, n)| (format!("{{outcome=\"{outcome}\"}}"), n));
    family("logs_exports_total", "counter", "Exports ended, by outcome.", &outcomes);
    family("logs_export_rows_total", "counter", "Rows exported.", &plain(e.rows));
    family(
        "logs_export_bytes_total",
        "counter",
        "Bytes encoded by exports, before compression.",
        &plain(e.bytes),
    );
    family(
        "logs_export_skipped_files_total",
        "counter",
        "Unreadable files left out by exports with skip_unavailable_shards=true.",
        &plain(m.skipped_files.load(Ordering::Relaxed)),
    );
    family(
        "logs_export_buffered_bytes",
        "gauge",
        "Encoded bytes waiting for slow connections now.",
        &plain(e.buffered),
    );
    family(
        "logs_export_buffered_bytes_peak",
        "gauge",
        "The most encoded bytes that waited for connections at once.",
        &plain(e.buffered_peak),
    );

    if let Some(t) = sources.tokens_file {
        family("logs_tokens_loaded", "gauge", "Tokens in the tokens set in use.", &plain(t.loaded));
        let reloads = [
            (String::from("{result=\"ok\"}"), t.reloads_ok),
            (String::from("{result=\"error\"}"), t.reloads_failed),
        ];
        family("logs_tokens_reloads_total", "counter", "Reloads of the tokens file, by result.", &reloads);
    }
    if let Some(i) = sources.introspection {
        let results = [("active", i.active), ("inactive", i.inactive), ("error", i.errors)]
            .map(|(result, n)| (format!("{{result=\"{result}\"}}"), n));
        family(
            "logs_introspection_requests_total",
            "counter",
            "Calls to the identity provider, by result.",
            &results,
        );
        family(
            "logs_introspection_cache_hits_total",
            "counter",
            "Tokens answered from the cache.",
            &plain(i.cache_hits),
        );
        family(
            "logs_introspection_cache_entries",
            "gauge",
            "Tokens in the cache now.",
            &plain(i.cache_entries),
        );
    }
    if let Some(o) = sources.oidc {
        let results = [("ok", o.fetches_ok), ("error", o.fetches_failed)]
            .map(|(result, n)| (format!("{{result=\"{result}\"}}"), n));
        family(
            "logs_oidc_key_fetches_total",
            "counter",
            "Fetches of the OpenID provider's keys (discovery and JWKS), by result.",
            &results,
        );
        family("logs_oidc_keys", "gauge", "Signing keys of the OpenID provider cached now.", &plain(o.keys));
    }
    out
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
