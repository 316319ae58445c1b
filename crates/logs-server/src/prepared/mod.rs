//! Prepared exports: an export computed in the background into the spool, then served as a
//! file — with its length, a strong `ETag`, ranges to resume a broken download, `304`, and a
//! gzip copy made once — for clients that read slowly, lose connections or repeat requests.
//!
//! Off unless the operator gives a spool ([`PreparedConfig`]); then, per request:
//!
//! ```text
//! policy `requested` (default): Prefer: respond-async  → prepared
//!                               Range / If-None-Match / If-Range, complete export in the spool → served from it
//!                               anything else          → streamed, as without a spool
//! policy `always`:              every export           → prepared
//! ```
//!
//! A prepared request, by its key (everything that changes the bytes, see `key`):
//! - complete in the spool and not expired → the file (`download`);
//! - being prepared → `202 Accepted`, `Retry-After` and how far the job has got: a repeated
//!   request joins the job, whoever sends it (each caller's rights are checked before);
//! - its job failed → that failure's status and JSON body, once; the next request starts again;
//! - otherwise → a new job (counted against the per-token and global export limits: 429 or
//!   503 when they are reached) and `202`.
//!
//! `Cache-Control: no-cache` skips a complete export and starts a fresh job. `Prefer: wait=N`
//! waits up to N seconds (at most the first-byte timeout) for the job before answering `202`.
//! A job whose export grows beyond `max_export_bytes` fails with 400 "… Try to use more
//! parts." so that a client splits it with `parts_count` and `part_number`.
//!
//! Jobs run to their end whether or not anyone asks again; only complete exports are ever
//! served (see `spool` for what a crash leaves and how it is swept).
//!
//! Processes sharing a spool (replicas over one bucket) share its exports: one prepared by
//! any is served by all, and a job takes the export's lease in the spool first, so that a
//! request that reaches another replica meanwhile is answered 202 with the job's progress
//! instead of preparing it again. A replica that dies stops renewing its lease; once it has
//! expired (`lease_ttl`), the next request takes the job over.

mod config;
mod download;
mod job;
mod jobs;
pub(crate) mod spool;

use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use logs_core::{ChainCursor, ExportRequest, S3Options};
use logs_format::{Format, JsonIntegers};
use sha2::{Digest, Sha256};

use crate::auth::TokenHash;
use crate::config::ConfigError;
use crate::error::{ApiError, Problem};
use crate::export::pipeline::ExportRunner;
use crate::server::WriteStall;
pub use config::{PreparePolicy, PreparedConfig};
use job::JobRun;
use jobs::{Job, Jobs, Preparing, Progress};
use spool::{Claim, Spool, random_hex, waiter};

/// How often a request waiting for another process's job looks for its export in the spool.
const ELSEWHERE_POLL: Duration = Duration::from_millis(250);

/// An export request as prepared exports see it: the caller's rights on its application have
/// been checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrepareRequest<'a> {
    pub format: Format,
    pub request: &'a ExportRequest,
    /// The caller's token: jobs count against its export limit, and no-cache waits are its.
    pub token: &'a TokenHash,
    pub headers: &'a HeaderMap,
    /// The connection's write stall, which a download of a complete export extends.
    pub stall: Option<&'a WriteStall>,
}

/// Prepared exports: the spool and the jobs running (see the module documentation).
#[derive(Debug)]
pub struct Prepared {
    config: PreparedConfig,
    spool: Arc<Spool>,
    /// This process, as leases name it.
    owner: String,
    jobs: Arc<Jobs>,
}

/// What starting a job takes (see [`Prepared::join_or_start`]).
struct JobStart<'a> {
    runner: &'a ExportRunner,
    gzip_level: u32,
    format: Format,
    request: &'a ExportRequest,
    token: &'a TokenHash,
    key: &'a str,
    fresh: bool,
}

/// What a prepared request finds in the table of jobs.
enum Joined {
    Running(Arc<Progress>),
    Failed(Problem),
    Complete,
    /// Another process sharing the spool prepares it (with this job, if its lease says).
    Elsewhere(Preparing, Option<String>),
}

impl Prepared {
    /// Opens (and sweeps) the spool; starts its periodic sweep, every half of the time to keep
    /// exports or every lease time, whichever is shorter, from 1 s to 1 min.
    pub async fn open(config: PreparedConfig, s3: &S3Options) -> Result<Arc<Prepared>, ConfigError> {
        if config.ttl.is_zero() {
            return Err(ConfigError::Invalid("--spool-ttl: must be above zero".into()));
        }
        if config.lease_ttl < Duration::from_secs(1) {
            return Err(ConfigError::Invalid(format!(
                "--spool-lease-ttl: must be at least 1s, not {:?}",
                config.lease_ttl
            )));
        }
        let spool = Spool::open(&config.spool, s3, config.ttl, config.max_spool_bytes).await?;
        let owner = random_hex(8);
        let prepared = Arc::new(Prepared { config, spool: Arc::new(spool), owner, jobs: Arc::default() });
        let period = prepared.config.sweep_period();
        let weak = Arc::downgrade(&prepared);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(prepared) = weak.upgrade() else { break };
                if let Err(e) = prepared.spool.sweep().await {
                    tracing::warn!(error = %e, "cannot sweep the spool");
                }
            }
        });
        Ok(prepared)
    }

    pub fn config(&self) -> &PreparedConfig {
        &self.config
    }

    /// The answer to an export request that the policy prepares, or `None` for one to stream.
    /// Jobs run their exports with `runner` and compress their gzip copy at `gzip_level`.
    ///
    /// `Cache-Control: no-cache` (RFC 9111 §5.2.1.4: no stored answer without validation) is
    /// kept from looping: a client answered `202` for a job is recorded as waiting for it, and
    /// its next no-cache request is answered with that job's export — the answer to its own
    /// request, not a stored one. Any other complete export is set aside and a new job
    /// started; a running job is joined, never restarted.
    pub(crate) async fn respond(
        self: &Arc<Self>,
        runner: &ExportRunner,
        gzip_level: u32,
        asked: PrepareRequest<'_>,
    ) -> Result<Option<Response>, ApiError> {
        let PrepareRequest { format, request, token, headers, stall } = asked;
        let preferences = Preferences::of(headers);
        let asked = self.config.policy == PreparePolicy::Always || preferences.respond_async;
        let conditional = [header::RANGE, header::IF_NONE_MATCH, header::IF_RANGE]
            .iter()
            .any(|name| headers.contains_key(name));
        if !asked && !conditional {
            return Ok(None);
        }
        let key = key(format, request, runner.json_integers());
        // Only no-cache requests need to know whom a job is for.
        let waiter = no_cache(headers).then(|| waiter(&key, token));
        let fresh = match &waiter {
            Some(waiter) => !self.waits_for_stored(&key, waiter).await,
            None => false,
        };
        if !fresh && let Some(response) = self.serve(&key, format, headers, stall).await? {
            self.stop_waiting(&key, waiter.as_deref()).await;
            return Ok(Some(response));
        }
        if !asked {
            return Ok(None);
        }
        let wait = preferences.wait.unwrap_or(self.config.wait).min(runner.first_byte_timeout());
        let mut attempts = 0;
        let progress = loop {
            attempts += 1;
            let job = JobStart { runner, gzip_level, format, request, token, key: &key, fresh };
            match self.join_or_start(job).await? {
                Joined::Running(progress) => break progress,
                Joined::Failed(failure) => return Ok(Some(failure.into_response())),
                Joined::Elsewhere(preparing, job) => {
                    // The job's export appears in the spool when it completes: look for it
                    // during the wait, as for a job of this process.
                    let deadline = tokio::time::Instant::now() + wait;
                    while tokio::time::Instant::now() < deadline {
                        tokio::time::sleep(ELSEWHERE_POLL.min(wait)).await;
                        if let Some(response) = self.serve(&key, format, headers, stall).await? {
                            self.stop_waiting(&key, waiter.as_deref()).await;
                            return Ok(Some(response));
                        }
                    }
                    if let (Some(waiter), Some(job)) = (&waiter, job) {
                        self.spool.wait_for(&key, waiter, &job).await;
                    }
                    return Ok(Some(self.accepted(preparing, preferences.respond_async)));
                }
                // Completed since the spool was looked at.
                Joined::Complete => {
                    if let Some(response) = self.serve(&key, format, headers, stall).await? {
                        return Ok(Some(response));
                    }
                    if attempts > 1 {
                        return Err(ApiError::Internal(format!("prepared export {key} vanished twice")));
                    }
                }
            }
        };
        if !wait.is_zero() {
            let mut ended = progress.ended.subscribe();
            let _ = tokio::time::timeout(wait, ended.wait_for(|ended| *ended)).await;
            if *ended.borrow() {
                if let Some(response) = self.serve(&key, format, headers, stall).await? {
                    self.stop_waiting(&key, waiter.as_deref()).await;
                    return Ok(Some(response));
                }
                let failed = self.take_failure(&key);
                if let Some(failure) = failed {
                    return Ok(Some(failure.into_response()));
                }
            }
        }
        if let Some(waiter) = &waiter {
            self.spool.wait_for(&key, waiter, &progress.job).await;
        }
        Ok(Some(self.accepted(progress.preparing(), preferences.respond_async)))
    }

    /// `waiter` (a no-cache client) has its export: its next no-cache request wants a new one.
    async fn stop_waiting(&self, key: &str, waiter: Option<&str>) {
        if let Some(waiter) = waiter {
            self.spool.stop_waiting(key, waiter).await;
        }
    }

    /// Whether the complete export of `key` is the one `waiter` was answered `202` for.
    async fn waits_for_stored(&self, key: &str, waiter: &str) -> bool {
        let Some(job) = self.spool.waited_job(key, waiter).await else { return false };
        self.spool.find(key).await.is_some_and(|manifest| manifest.job == job)
    }

    /// The complete export `key`, if the spool has it.
    async fn serve(
        &self,
        key: &str,
        format: Format,
        headers: &HeaderMap,
        stall: Option<&WriteStall>,
    ) -> Result<Option<Response>, ApiError> {
        let Some(manifest) = self.spool.find(key).await else { return Ok(None) };
        match download::respond(&self.spool, &manifest, format, headers).await? {
            Some(response) => {
                if let Some(stall) = stall {
                    stall.allow(self.config.download_write_timeout);
                }
                Ok(Some(response))
            }
            None => {
                self.spool.forget_gone(&manifest).await;
                Ok(None)
            }
        }
    }

    /// The running job of `key`, or a new one; or the failure of its last job, once; or
    /// `Complete` if its job has completed since the spool was looked at.
    async fn join_or_start(self: &Arc<Self>, start: JobStart<'_>) -> Result<Joined, ApiError> {
        let JobStart { runner, gzip_level, format, request, token, key, fresh } = start;
        {
            let mut jobs = self.jobs.lock();
            match jobs.remove(key) {
                Some(Job::Running(progress)) => {
                    jobs.insert(key.to_owned(), Job::Running(Arc::clone(&progress)));
                    return Ok(Joined::Running(progress));
                }
                Some(Job::Failed(problem)) => return Ok(Joined::Failed(problem)),
                None => {}
            }
        }
        if fresh {
            self.spool.remove(key).await;
        } else if self.spool.find(key).await.is_some() {
            return Ok(Joined::Complete);
        }
        let permit = runner.acquire(*token)?;
        let job = random_hex(8);
        let lease = match self.spool.claim(key, &self.owner, &job, self.config.lease_ttl).await? {
            Claim::Owned(lease) => lease,
            Claim::Held { job, progress, seconds } => {
                return Ok(Joined::Elsewhere(Preparing::new(progress, seconds), job));
            }
        };
        // A job commits its export before it gives its lease up: completed just now?
        if !fresh && self.spool.find(key).await.is_some() {
            self.spool.give_up(lease).await;
            return Ok(Joined::Complete);
        }
        let progress = Arc::new(Progress::new(job.clone()));
        let job = JobRun {
            spool: Arc::clone(&self.spool),
            jobs: Arc::clone(&self.jobs),
            max_export_bytes: self.config.max_export_bytes,
            retry_after: self.config.retry_after,
            lease_ttl: self.config.lease_ttl,
            runner: runner.clone(),
            gzip_level,
            format,
            request: request.clone(),
            key: key.to_owned(),
            job,
            progress: Arc::clone(&progress),
        };
        // Logged before it counts as running (`logs_prepared_jobs_running`): a job that the
        // metric shows is in the log.
        tracing::info!(key, job = %job.job, application_id = request.application_id(), "preparing an export");
        {
            let mut jobs = self.jobs.lock();
            jobs.insert(key.to_owned(), Job::Running(Arc::clone(&progress)));
        }
        tokio::spawn(job.run(permit, lease));
        Ok(Joined::Running(progress))
    }

    fn take_failure(&self, key: &str) -> Option<Problem> {
        let mut jobs = self.jobs.lock();
        match jobs.remove(key) {
            Some(Job::Failed(problem)) => Some(problem),
            Some(running) => {
                jobs.insert(key.to_owned(), running);
                None
            }
            None => None,
        }
    }

    /// The seconds of `Retry-After` for a job that has got as far as `preparing`: its estimated
    /// remaining time, from 1 s to the larger of the configured value and 60 s; the configured
    /// value when there is no estimate yet.
    fn retry_after(&self, preparing: &Preparing) -> u64 {
        let configured = self.config.retry_after.as_secs().max(1);
        match preparing.remaining() {
            Some(seconds) => (seconds.ceil() as u64).clamp(1, configured.max(60)),
            None => configured,
        }
    }

    fn accepted(&self, body: Preparing, preference_applied: bool) -> Response {
        let retry_after = self.retry_after(&body);
        let mut response = (StatusCode::ACCEPTED, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
        headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
        if preference_applied {
            headers.insert("preference-applied", HeaderValue::from_static("respond-async"));
        }
        response
    }

    /// Bytes of complete exports in the spool, bytes running jobs have written, and jobs running.
    pub fn usage(&self) -> (u64, u64, usize) {
        let (stored, reserved) = self.spool.usage();
        let running = self.jobs.lock().values().filter(|job| matches!(job, Job::Running(_))).count();
        (stored, reserved, running)
    }

    /// The Prometheus families of the spool and the jobs, for the admin API's `/metrics`.
    pub fn metrics_text(&self) -> String {
        let (stored, reserved, running) = self.usage();
        format!(
            "# HELP logs_spool_bytes Bytes of complete prepared exports in the spool (both copies).\n\
             # TYPE logs_spool_bytes gauge\nlogs_spool_bytes {stored}\n\
             # HELP logs_spool_reserved_bytes Bytes that running jobs have written to the spool so far.\n\
             # TYPE logs_spool_reserved_bytes gauge\nlogs_spool_reserved_bytes {reserved}\n\
             # HELP logs_prepared_jobs_running Exports being prepared now.\n\
             # TYPE logs_prepared_jobs_running gauge\nlogs_prepared_jobs_running {running}\n"
        )
    }
}

/// The key of an export in the spool: the SHA-256 (hex) of everything that changes its bytes —
/// the format, the application, range and dimension, the columns (names as requested, and
/// what each is made of), the filters (in a fixed order), the limit, the BOM, the skip policy,
/// the parts, the cursor (a chain's call is prepared once: asked again with the same cursor, it
/// is served the same records and the same next cursor), the field policy (its fingerprint:
/// an export made under one policy is never served under another), how JSON writes integers,
/// and this program's version.
pub(crate) fn key(format: Format, request: &ExportRequest, json_integers: JsonIntegers) -> String {
    let mut filters: Vec<String> =
        request.filters().iter().map(|f| format!("{:?}={:?}", f.field, f.value)).collect();
    filters.sort();
    let text = format!(
        "logs-export {}\nformat {format:?}\njson integers {json_integers:?}\napplication {}\nrange {:?}\n\
         dimension {:?}\ncolumns {:?}\nfilters {filters:?}\nlimit {:?}\nbom {}\nskip {}\nparts {:?}\ncursor {:?}{}",
        env!("CARGO_PKG_VERSION"),
        request.application_id(),
        request.range(),
        request.date_dimension(),
        request.columns(),
        request.limit(),
        request.use_utf8_bom(),
        request.skip_unavailable_shards(),
        request.parts(),
        request.cursor().map(|c| match c {
            ChainCursor::Start => "start",
            ChainCursor::Continue { text, .. } => text.as_str(),
        }),
        // Nothing for an export without a policy, so that its key stays what it was.
        match request.privacy().fingerprint() {
            "" => String::new(),
            fingerprint => format!("\nfield policy {fingerprint}"),
        },
    );
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The preferences of RFC 7240 that prepared exports honour.
#[derive(Debug, Default, PartialEq, Eq)]
struct Preferences {
    respond_async: bool,
    wait: Option<Duration>,
}

impl Preferences {
    fn of(headers: &HeaderMap) -> Preferences {
        let mut preferences = Preferences::default();
        for value in headers.get_all("prefer").iter().filter_map(|v| v.to_str().ok()) {
            for preference in value.split(',') {
                let token = preference.split(';').next().unwrap_or("").trim();
                let (name, value) = match token.split_once('=') {
                    Some((name, value)) => (name.trim(), Some(value.trim().trim_matches('"'))),
                    None => (token, None),
                };
                if name.eq_ignore_ascii_case("respond-async") {
                    preferences.respond_async = true;
                } else if name.eq_ignore_ascii_case("wait")
                    && let Some(seconds) = value.and_then(|v| v.parse::<u64>().ok())
                {
                    preferences.wait = Some(Duration::from_secs(seconds));
                }
            }
        }
        preferences
    }
}

/// `Cache-Control: no-cache` (or `Pragma: no-cache`): a fresh export.
fn no_cache(headers: &HeaderMap) -> bool {
    [header::CACHE_CONTROL, header::PRAGMA].iter().any(|name| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|value| value.split(',').any(|directive| directive.trim().eq_ignore_ascii_case("no-cache")))
    })
}

#[cfg(test)]
mod tests {
    use super::spool::JobProgress;
    use super::*;
    use logs_core::{DatasetLocation, RequestPolicy};

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn preferences_are_read_as_rfc_7240_writes_them() {
        assert_eq!(Preferences::of(&headers(&[])), Preferences::default());
        let p = Preferences::of(&headers(&[("prefer", "respond-async, wait=10")]));
        assert_eq!(p, Preferences { respond_async: true, wait: Some(Duration::from_secs(10)) });
        let p = Preferences::of(&headers(&[("prefer", "return=minimal"), ("prefer", "Respond-Async; x=1")]));
        assert_eq!(p, Preferences { respond_async: true, wait: None });
        let p = Preferences::of(&headers(&[("prefer", "wait=\"3\", respond-asynchronously")]));
        assert_eq!(p, Preferences { respond_async: false, wait: Some(Duration::from_secs(3)) });
        assert!(no_cache(&headers(&[("cache-control", "max-age=0, No-Cache")])));
        assert!(no_cache(&headers(&[("pragma", "no-cache")])));
        assert!(!no_cache(&headers(&[("cache-control", "no-store")])));
    }

    #[tokio::test]
    async fn retry_after_is_the_estimated_remaining_time_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let config = PreparedConfig::new(DatasetLocation::Local(dir.path().to_owned()));
        let prepared = Prepared::open(config, &S3Options::default()).await.unwrap();
        let at = |covered, total, seconds| {
            let progress = JobProgress { rows: 0, bytes: 0, covered, total };
            prepared.retry_after(&Preparing::new(progress, seconds))
        };
        assert_eq!(at(0, 1000, 3.0), 5, "no estimate yet: the configured value");
        assert_eq!(at(500, 1000, 0.0), 5, "no time yet: the configured value");
        assert_eq!(at(250, 1000, 3.0), 9, "a quarter in 3 s: 9 s more");
        assert_eq!(at(900, 1000, 3.0), 1, "a third of a second, rounded up to the least");
        assert_eq!(at(1, 1000, 10.0), 60, "at most 60 s");
        assert_eq!(at(1000, 1000, 10.0), 1, "done: at least 1 s");
    }

    #[test]
    fn the_key_changes_with_what_changes_the_bytes_and_not_with_the_filters_order() {
        let policy = RequestPolicy::default();
        let base = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id,os_name";
        let key_of = |query: &str, format| {
            key(format, &ExportRequest::parse(query, &policy).unwrap(), JsonIntegers::default())
        };
        let one = key_of(&format!("{base}&os_name=android&app_version_name=1.0"), Format::Csv);
        assert_eq!(one, key_of(&format!("{base}&app_version_name=1.0&os_name=android"), Format::Csv));
        assert_eq!(one.len(), 64);
        assert!(one.bytes().all(|b| b.is_ascii_hexdigit()));
        let others = [
            key_of(&format!("{base}&os_name=android&app_version_name=1.0"), Format::Json),
            key_of(&format!("{base}&os_name=ios&app_version_name=1.0"), Format::Csv),
            key_of(&format!("{base},error_name&os_name=android&app_version_name=1.0"), Format::Csv),
            key_of(&format!("{base}&os_name=android&app_version_name=1.0&limit=5"), Format::Csv),
            key_of(&format!("{base}&os_name=android&app_version_name=1.0&use_utf8_bom=true"), Format::Csv),
            key_of(
                &format!("{base}&os_name=android&app_version_name=1.0&parts_count=2&part_number=0"),
                Format::Csv,
            ),
            key_of(
                &format!("{base}&os_name=android&app_version_name=1.0&date_dimension=receive"),
                Format::Csv,
            ),
        ];
        for (i, other) in others.iter().enumerate() {
            assert_ne!(&one, other, "case {i}");
        }
    }

    #[tokio::test]
    async fn the_times_to_keep_exports_and_leases_are_checked_naming_their_flags() {
        let dir = tempfile::tempdir().unwrap();
        let config = PreparedConfig::new(DatasetLocation::Local(dir.path().to_owned()));
        let s3 = S3Options::default();
        let open = |config: PreparedConfig| Prepared::open(config, &s3);
        let error = |result: Result<Arc<Prepared>, ConfigError>| match result {
            Err(ConfigError::Invalid(message)) => message,
            other => panic!("{:?}", other.map(|_| ())),
        };
        let zero = PreparedConfig { ttl: Duration::ZERO, ..config.clone() };
        assert_eq!(error(open(zero).await), "--spool-ttl: must be above zero");
        let short = PreparedConfig { lease_ttl: Duration::from_millis(999), ..config.clone() };
        assert_eq!(error(open(short).await), "--spool-lease-ttl: must be at least 1s, not 999ms");
        let shortest =
            PreparedConfig { ttl: Duration::from_millis(1), lease_ttl: Duration::from_secs(1), ..config };
        assert!(open(shortest).await.is_ok());
    }

    #[test]
    fn the_spool_is_swept_every_half_time_to_keep_or_lease_time_within_a_second_and_a_minute() {
        let config = PreparedConfig::new(DatasetLocation::Local("spool".into()));
        let period = |ttl: u64, lease: u64| {
            let config = PreparedConfig {
                ttl: Duration::from_secs(ttl),
                lease_ttl: Duration::from_secs(lease),
                ..config.clone()
            };
            config.sweep_period().as_secs()
        };
        assert_eq!(period(3600, 30), 30);
        assert_eq!(period(8, 30), 4);
        assert_eq!(period(3600, 600), 60);
        assert_eq!(period(1, 30), 1);
        assert_eq!(period(8, 3), 3);
    }
}
