//! Leases: which process prepares an export now (see the module documentation of
//! [`super`]). A lease is created only if absent (`If-None-Match: *`), renewed by its job's
//! process, and taken over with `If-Match` on its ETag once it has expired.

use std::time::Duration;

use logs_core::object_store::path::Path as ObjectPath;
use logs_core::object_store::{
    Error as ObjectStoreError, ObjectStoreExt, PutMode, PutPayload, UpdateVersion,
};
use serde::{Deserialize, Serialize};

use super::error::SpoolError;
use super::manifest::now_ms;
use super::store::Spool;

/// What a lease object holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct LeaseBody {
    owner: String,
    /// The job's id (absent in leases of earlier versions).
    #[serde(default)]
    job: Option<String>,
    /// When the job started, and until when the lease lasts: Unix milliseconds.
    started: u64,
    pub(super) expires: u64,
    #[serde(flatten)]
    progress: JobProgress,
}

/// How far a job has got, as its lease tells the other processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    /// Rows and bytes (of the plain copy) written.
    pub rows: u64,
    pub bytes: u64,
    /// Bytes of the selected files the scan has covered, and their total.
    #[serde(default)]
    pub covered: u64,
    #[serde(default)]
    pub total: u64,
}

/// The right to prepare one export, held in the spool until released or expired.
#[derive(Debug)]
pub struct Lease {
    key: String,
    owner: String,
    job: String,
    started: u64,
    /// The lease object's ETag, for renewing it only if it is still ours.
    e_tag: Option<String>,
}

/// The outcome of [`Spool::claim`].
#[derive(Debug)]
pub enum Claim {
    Owned(Lease),
    /// Another process prepares it: its job (if the lease says), how far its last renewal
    /// said it had got, and for how long it has run.
    Held {
        job: Option<String>,
        progress: JobProgress,
        seconds: f64,
    },
}

impl Spool {
    /// Claims the right to prepare `key` with job `job` for `owner` until `ttl` from now:
    /// creates its lease if there is none, takes it over if it has expired; or says how far its
    /// holder has got.
    pub async fn claim(&self, key: &str, owner: &str, job: &str, ttl: Duration) -> Result<Claim, SpoolError> {
        let path = self.path(&format!("{key}.lease"));
        let started = now_ms();
        let body = LeaseBody {
            owner: owner.to_owned(),
            job: Some(job.to_owned()),
            started,
            expires: started + ttl.as_millis() as u64,
            progress: JobProgress::default(),
        };
        let payload = || PutPayload::from(serde_json::to_vec(&body).unwrap_or_default());
        let owned = |e_tag: Option<String>| {
            Claim::Owned(Lease {
                key: key.to_owned(),
                owner: owner.to_owned(),
                job: job.to_owned(),
                started,
                e_tag,
            })
        };
        let unknown = Claim::Held { job: None, progress: JobProgress::default(), seconds: 0.0 };
        for _ in 0..3 {
            match self.store.put_opts(&path, payload(), PutMode::Create.into()).await {
                Ok(put) => return Ok(owned(put.e_tag)),
                Err(ObjectStoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(SpoolError::store("write")(e)),
            }
            let (held, e_tag) = match self.read_lease(&path).await {
                Ok(lease) => lease,
                // Released in between: try again.
                Err(ObjectStoreError::NotFound { .. }) => continue,
                Err(e) => return Err(SpoolError::store("read")(e)),
            };
            if let Some(held) = &held
                && held.expires > now_ms()
            {
                let seconds = now_ms().saturating_sub(held.started) as f64 / 1000.0;
                return Ok(Claim::Held { job: held.job.clone(), progress: held.progress, seconds });
            }
            // Expired (or not a lease): take it over, unless another process just did. A local
            // store cannot replace an object conditionally: the expired lease is deleted and
            // created again.
            if self.local_root.is_some() {
                self.delete_object(&path).await;
                continue;
            }
            let update = UpdateVersion { e_tag, version: None };
            match self.store.put_opts(&path, payload(), PutMode::Update(update).into()).await {
                Ok(put) => return Ok(owned(put.e_tag)),
                Err(ObjectStoreError::Precondition { .. } | ObjectStoreError::AlreadyExists { .. }) => {
                    return Ok(unknown);
                }
                Err(e) => return Err(SpoolError::store("write")(e)),
            }
        }
        Ok(unknown)
    }

    /// Extends `lease` to `ttl` from now, with the job's progress; `false` if it is no longer
    /// this process's (it expired and another took it over).
    pub async fn renew(&self, lease: &mut Lease, ttl: Duration, progress: JobProgress) -> bool {
        let path = self.path(&format!("{}.lease", lease.key));
        let expires = now_ms() + ttl.as_millis() as u64;
        let body = LeaseBody {
            owner: lease.owner.clone(),
            job: Some(lease.job.clone()),
            started: lease.started,
            expires,
            progress,
        };
        let payload = PutPayload::from(serde_json::to_vec(&body).unwrap_or_default());
        let mode = match (&self.local_root, &lease.e_tag) {
            (None, Some(e_tag)) => {
                PutMode::Update(UpdateVersion { e_tag: Some(e_tag.clone()), version: None })
            }
            _ => PutMode::Overwrite,
        };
        match self.store.put_opts(&path, payload, mode.into()).await {
            Ok(put) => {
                lease.e_tag = put.e_tag;
                true
            }
            Err(e) => {
                tracing::warn!(key = %lease.key, error = %e, "cannot renew a lease of the spool");
                false
            }
        }
    }

    /// Gives `lease` up, unless another process has taken it over meanwhile.
    pub async fn give_up(&self, lease: Lease) {
        let path = self.path(&format!("{}.lease", lease.key));
        let Ok((body, _)) = self.read_lease(&path).await else { return };
        if body.is_none_or(|body| body.owner == lease.owner) {
            self.delete_object(&path).await;
        }
    }

    /// The lease at `path` (`None` if its content is not one: an expired lease) and its ETag.
    pub(super) async fn read_lease(
        &self,
        path: &ObjectPath,
    ) -> Result<(Option<LeaseBody>, Option<String>), ObjectStoreError> {
        let got = self.store.get(path).await?;
        let e_tag = got.meta.e_tag.clone();
        let body = got.bytes().await.ok().and_then(|b| serde_json::from_slice::<LeaseBody>(&b).ok());
        Ok((body, e_tag))
    }
}
