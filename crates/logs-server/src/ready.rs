//! `GET /readyz` on the admin listener: whether a load balancer should send this process
//! requests.
//!
//! ```text
//! 200 {"status":"ready"}
//! 503 {"status":"draining"}                              a stop was asked for; running exports finish
//! 503 {"status":"not_ready","reason":"dataset"}          the dataset's store cannot be listed
//! 503 {"status":"not_ready","reason":"identity_provider"} the introspection endpoint does not answer
//! ```
//!
//! The dataset is checked by listing its root, the identity provider by introspecting a token
//! that no one holds (its answer, inactive, is cached as any other: see
//! `--introspection-negative-ttl`); each check has 2 s. A verdict is kept for 2 s, so that
//! health checks of several balancers cost the store and the provider one request each per
//! 2 s. `/healthz` (alive) stays 200 throughout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use logs_core::Engine;

use crate::auth::Authenticator;

/// How long a check may take, and how long its verdict is kept.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
const VERDICT_KEPT: Duration = Duration::from_secs(2);

/// What `/readyz` answers from (one per process, in the service's state).
#[derive(Debug, Default)]
pub struct Readiness {
    draining: AtomicBool,
    verdict: Mutex<Option<(Instant, Verdict)>>,
}

/// Why the process is not ready, as `/readyz` names it.
pub type Verdict = Result<(), &'static str>;

impl Readiness {
    /// From now on `/readyz` answers `draining` (a stop was asked for).
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    fn kept(&self) -> Option<Verdict> {
        let verdict = self.verdict.lock().unwrap_or_else(|e| e.into_inner());
        verdict.filter(|(at, _)| at.elapsed() < VERDICT_KEPT).map(|(_, verdict)| verdict)
    }

    fn keep(&self, verdict: Verdict) {
        *self.verdict.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), verdict));
    }
}

/// What the handler takes from the service's state: the readiness and what it checks.
#[derive(Debug, Clone)]
pub(crate) struct ReadyCheck {
    pub readiness: Arc<Readiness>,
    pub engine: Arc<Engine>,
    pub auth: Authenticator,
}

/// The handler.
pub(crate) async fn readyz(State(check): State<ReadyCheck>) -> Response {
    let readiness = &check.readiness;
    if readiness.draining() {
        return answer(StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"draining"}"#.to_owned());
    }
    let verdict = match readiness.kept() {
        Some(verdict) => verdict,
        None => {
            let verdict = check_now(&check).await;
            readiness.keep(verdict);
            verdict
        }
    };
    match verdict {
        Ok(()) => answer(StatusCode::OK, r#"{"status":"ready"}"#.to_owned()),
        Err(reason) => answer(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(r#"{{"status":"not_ready","reason":"{reason}"}}"#),
        ),
    }
}

async fn check_now(check: &ReadyCheck) -> Verdict {
    match tokio::time::timeout(CHECK_TIMEOUT, check.engine.check()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "not ready: the dataset cannot be listed");
            return Err("dataset");
        }
        Err(_) => {
            tracing::warn!("not ready: listing the dataset took more than 2 s");
            return Err("dataset");
        }
    }
    match tokio::time::timeout(CHECK_TIMEOUT, check.auth.identity_provider_answers()).await {
        Ok(None | Some(true)) => Ok(()),
        Ok(Some(false)) | Err(_) => {
            tracing::warn!("not ready: the identity provider does not answer");
            Err("identity_provider")
        }
    }
}

fn answer(status: StatusCode, body: String) -> Response {
    let mut response = crate::json::json_response(body);
    *response.status_mut() = status;
    response
}
