//! Who waits for which job: a client answered `202` for a job of an export is recorded as
//! waiting for that job, so that its next request with `Cache-Control: no-cache` is answered
//! with that job's export rather than a new job (see [`crate::prepared`]). One small object per
//! export and client, `<key>.wait.<waiter>`, holding the job's id: replicas sharing the spool
//! share it, and the sweep deletes it with its export.

use logs_core::object_store::{ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

use super::store::Spool;
use crate::auth::TokenHash;

/// Names a client (by its token) for one export, without anything that gives the token away.
pub fn waiter(key: &str, token: &TokenHash) -> String {
    let mut digest = Sha256::new();
    digest.update(key.as_bytes());
    digest.update(token.0);
    hex::encode(&digest.finalize()[..16])
}

impl Spool {
    /// Records that `waiter` was told that job `job` of `key` is being prepared for it. A
    /// failure is logged: the client then may get a new job on its next no-cache request.
    pub async fn wait_for(&self, key: &str, waiter: &str, job: &str) {
        let path = self.path(&format!("{key}.wait.{waiter}"));
        if let Err(e) = self.store.put(&path, PutPayload::from(job.as_bytes().to_vec())).await {
            tracing::warn!(key, error = %e, "cannot record a client waiting for a prepared export");
        }
    }

    /// The job `waiter` was last told it waits for, if any.
    pub async fn waited_job(&self, key: &str, waiter: &str) -> Option<String> {
        let path = self.path(&format!("{key}.wait.{waiter}"));
        let got = self.store.get(&path).await.ok()?;
        let bytes = got.bytes().await.ok()?;
        String::from_utf8(bytes.to_vec()).ok()
    }

    /// Forgets that `waiter` waits for a job of `key` (it has its export).
    pub async fn stop_waiting(&self, key: &str, waiter: &str) {
        self.delete_object(&self.path(&format!("{key}.wait.{waiter}"))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_differs_by_export_and_token_and_holds_neither() {
        let token = TokenHash::of("secret-token");
        let one = waiter("k1", &token);
        assert_eq!(one.len(), 32);
        assert_eq!(one, waiter("k1", &TokenHash::of("secret-token")));
        assert_ne!(one, waiter("k2", &token));
        assert_ne!(one, waiter("k1", &TokenHash::of("other-token")));
        assert!(!one.contains(&hex::encode(&token.0[..4])));
    }
}
