//! The jobs of this process: the table of running and failed jobs, how far each has got, and
//! the body of `202 Accepted` that tells it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;
use tokio::sync::watch;

use super::spool::JobProgress;
use crate::error::Problem;

/// The jobs of this process, by export key.
#[derive(Debug, Default)]
pub(super) struct Jobs(Mutex<HashMap<String, Job>>);

impl Jobs {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, Job>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
pub(super) enum Job {
    Running(Arc<Progress>),
    /// What the next request for it is answered.
    Failed(Problem),
}

/// How far a job of this process has got.
#[derive(Debug)]
pub(super) struct Progress {
    /// The job's id.
    pub(super) job: String,
    pub(super) started: Instant,
    pub(super) rows: AtomicU64,
    pub(super) bytes: AtomicU64,
    /// Bytes of the selected files the scan has covered, and their total.
    pub(super) covered: AtomicU64,
    pub(super) total: AtomicU64,
    /// Turns true when the job has ended, either way.
    pub(super) ended: watch::Sender<bool>,
}

/// The body of `202 Accepted`, and what its `Retry-After` is estimated from.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Preparing {
    status: &'static str,
    /// Rows and bytes (of the plain copy) written so far.
    rows: u64,
    bytes: u64,
    /// Since the job started.
    seconds: f64,
    #[serde(skip)]
    covered: u64,
    #[serde(skip)]
    total: u64,
}

impl Preparing {
    pub(super) fn new(progress: JobProgress, seconds: f64) -> Preparing {
        Preparing {
            status: "preparing",
            rows: progress.rows,
            bytes: progress.bytes,
            seconds,
            covered: progress.covered,
            total: progress.total,
        }
    }

    /// The seconds the job still needs, if its scan's progress tells: the time so far, times
    /// what is left of the scan over what is done.
    pub(super) fn remaining(&self) -> Option<f64> {
        if self.covered == 0 || self.total == 0 || self.seconds <= 0.0 {
            return None;
        }
        let left = self.total.saturating_sub(self.covered) as f64;
        Some(self.seconds * left / self.covered as f64)
    }
}

impl Progress {
    pub(super) fn new(job: String) -> Progress {
        let (ended, _) = watch::channel(false);
        Progress {
            job,
            started: Instant::now(),
            rows: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            covered: AtomicU64::new(0),
            total: AtomicU64::new(0),
            ended,
        }
    }

    pub(super) fn snapshot(&self) -> JobProgress {
        JobProgress {
            rows: self.rows.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            covered: self.covered.load(Ordering::Relaxed),
            total: self.total.load(Ordering::Relaxed),
        }
    }

    pub(super) fn preparing(&self) -> Preparing {
        Preparing::new(self.snapshot(), (self.started.elapsed().as_millis() as f64) / 1000.0)
    }
}
