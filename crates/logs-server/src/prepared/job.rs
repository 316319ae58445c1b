//! A job: one export computed into the spool while its lease is renewed (see [`super`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use logs_core::ExportRequest;
use logs_format::Format;
use tokio::sync::watch;

use super::jobs::{Job, Jobs, Progress};
use super::spool::{self, Lease, Manifest, Spool};
use crate::error::{ApiError, Problem};
use crate::export::pipeline::ExportRunner;
use crate::limits::ExportPermit;

/// One job: the export written into the spool.
pub(super) struct JobRun {
    pub(super) spool: Arc<Spool>,
    pub(super) jobs: Arc<Jobs>,
    /// The largest export a job may write (its plain bytes).
    pub(super) max_export_bytes: Option<u64>,
    /// The `Retry-After` of a full spool.
    pub(super) retry_after: Duration,
    pub(super) lease_ttl: Duration,
    pub(super) runner: ExportRunner,
    /// The gzip level of the compressed copy (of a format worth compressing).
    pub(super) gzip_level: u32,
    pub(super) format: Format,
    pub(super) request: ExportRequest,
    pub(super) key: String,
    /// This job's id, in the names of its copies.
    pub(super) job: String,
    pub(super) progress: Arc<Progress>,
}

impl JobRun {
    /// Prepares the export while renewing its lease; gives the lease up at the end (after the
    /// manifest, when it succeeded).
    pub(super) async fn run(self, permit: ExportPermit, lease: Lease) {
        // The renewals run in a task of their own, so that a busy job does not delay them.
        let (stop, stopped) = watch::channel(false);
        let renewing = tokio::spawn(renew_lease(
            Arc::clone(&self.spool),
            self.lease_ttl,
            lease,
            Arc::clone(&self.progress),
            stopped,
        ));
        let result = self.prepare(permit).await;
        stop.send_replace(true);
        // The lease goes before the job leaves the table: a request here meanwhile joins the
        // job (and then finds the export), one elsewhere finds the export or the failure's end.
        match renewing.await {
            Ok(lease) => self.spool.give_up(lease).await,
            Err(e) => {
                tracing::warn!(key = %self.key, error = %e, "the lease's renewal failed; it will expire")
            }
        }
        self.finish(result);
    }

    fn finish(&self, result: Result<u64, Problem>) {
        let mut jobs = self.jobs.lock();
        match result {
            Ok(rows) => {
                tracing::info!(key = %self.key, rows, "export prepared");
                jobs.remove(&self.key);
            }
            Err(problem) => {
                let detail = problem.detail.clone().unwrap_or_else(|| problem.message.clone());
                tracing::warn!(key = %self.key, status = problem.status.as_u16(), %detail, "preparing an export failed");
                jobs.insert(self.key.clone(), Job::Failed(problem));
            }
        }
        drop(jobs);
        self.progress.ended.send_replace(true);
    }

    /// Runs the export into the spool; the rows written.
    async fn prepare(&self, permit: ExportPermit) -> Result<u64, Problem> {
        let mut started =
            self.runner.start(self.format, &self.request, permit, None).await.map_err(|e| e.problem())?;
        let extension = self.format.extension();
        let gzip_level = self.format.compressible().then_some(self.gzip_level);
        let mut writer = self.spool.writer(&self.key, &self.job, extension, gzip_level);
        let mut reserved = 0;
        let written: Result<(), Problem> = async {
            while let Some(chunk) = started.chunks.next_chunk().await? {
                let length = chunk.len() as u64;
                if let Some(max) = self.max_export_bytes
                    && writer.plain_bytes() + length > max
                {
                    return Err(ApiError::TooLargeToPrepare { max_bytes: max }.problem());
                }
                let write = writer.write(&self.spool, chunk, self.retry_after);
                reserved += write.await.map_err(|e| ApiError::from(e).problem())?;
                self.progress.bytes.store(writer.plain_bytes(), Ordering::Relaxed);
                self.progress.rows.store(started.rows.load(Ordering::Relaxed), Ordering::Relaxed);
                let (covered, total) = started.scan.get();
                self.progress.total.store(total, Ordering::Relaxed);
                self.progress.covered.store(covered, Ordering::Relaxed);
            }
            Ok(())
        }
        .await;
        let result = match written {
            Ok(()) => {
                self.progress.rows.store(started.rows.load(Ordering::Relaxed), Ordering::Relaxed);
                self.commit(writer, started.skipped, started.cursor.clone()).await
            }
            Err(problem) => {
                // The export is dropped first (which cancels it), then its copies.
                drop(started);
                writer.abort().await;
                Err(problem)
            }
        };
        self.spool.release(reserved);
        result
    }

    /// Completes the copies and writes the manifest; on failure, deletes whatever was written.
    async fn commit(
        &self,
        writer: spool::SpoolWriter,
        skipped: usize,
        cursor: Option<String>,
    ) -> Result<u64, Problem> {
        let committed = self.try_commit(writer, skipped, cursor).await;
        if committed.is_err() {
            self.spool.discard(&self.key, &self.job, self.format.extension()).await;
        }
        committed
    }

    async fn try_commit(
        &self,
        writer: spool::SpoolWriter,
        skipped: usize,
        cursor: Option<String>,
    ) -> Result<u64, Problem> {
        let (plain, gzip) = writer.finish().await.map_err(|e| ApiError::from(e).problem())?;
        let rows = self.progress.rows.load(Ordering::Relaxed);
        let manifest = Manifest {
            version: spool::MANIFEST_VERSION,
            key: self.key.clone(),
            job: self.job.clone(),
            extension: self.format.extension().into(),
            created: spool::now(),
            rows,
            skipped_shards: skipped as u64,
            cursor,
            plain,
            gzip,
        };
        let standing = self.spool.commit(manifest).await.map_err(|e| ApiError::from(e).problem())?;
        if standing.job != self.job {
            tracing::info!(
                key = %self.key,
                job = %self.job,
                standing = %standing.job,
                "another job completed this export first; its copies stand and this job's were deleted"
            );
        }
        Ok(standing.rows)
    }
}

/// Renews `lease` every third of its time, with the job's progress, until `stop`; then hands
/// it back.
async fn renew_lease(
    spool: Arc<Spool>,
    ttl: Duration,
    mut lease: Lease,
    progress: Arc<Progress>,
    mut stop: watch::Receiver<bool>,
) -> Lease {
    loop {
        tokio::select! {
            _ = stop.changed() => return lease,
            () = tokio::time::sleep(ttl / 3) => {
                if !spool.renew(&mut lease, ttl, progress.snapshot()).await {
                    tracing::warn!("the lease of a running job was lost; the job goes on");
                }
            }
        }
    }
}
