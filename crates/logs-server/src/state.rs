//! What every handler shares: a struct of handles, built once. It is a leaf of the module
//! graph: the services below it (the export runner, prepared exports, readiness) take narrow
//! values, never the state.

use std::sync::Arc;

use axum::extract::FromRef;
use logs_core::privacy::policies::Claims;
use logs_core::{Engine, Policies, Privacy};

use crate::applications::ApplicationDirectory;
use crate::auth::{Authenticator, ClientGate, FailureLimit, Principal};
use crate::config::ConfigError;
use crate::error::ApiError;
use crate::export::pipeline::ExportRunner;
use crate::limits::ExportLimiter;
use crate::metrics::Metrics;
use crate::prepared::Prepared;
use crate::ready::{Readiness, ReadyCheck};
use crate::settings::Settings;
use crate::spill::SpillQuota;

/// The shared state of [`crate::app`]. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug, Clone)]
struct Inner {
    engine: Arc<Engine>,
    auth: Authenticator,
    settings: Settings,
    applications: ApplicationDirectory,
    limiter: Arc<ExportLimiter>,
    runner: ExportRunner,
    metrics: Arc<Metrics>,
    prepared: Option<Arc<Prepared>>,
    policies: Arc<Policies>,
    readiness: Arc<Readiness>,
    spill: Arc<SpillQuota>,
    clients: Arc<ClientGate>,
}

impl AppState {
    /// Checks the settings and reads the dataset's `applications.toml`, if any.
    pub async fn new(
        engine: Arc<Engine>,
        auth: Authenticator,
        settings: Settings,
    ) -> Result<AppState, ConfigError> {
        settings.validate()?;
        let applications = ApplicationDirectory::load(engine.storage()).await?;
        let spill = Arc::new(SpillQuota::new(
            settings.spill_dir.clone(),
            settings.max_spill_bytes,
            settings.max_spilled_exports,
        ));
        if let Some(dir) = &settings.spill_dir
            && !dir.is_dir()
        {
            return Err(ConfigError::Invalid(format!("--spill-dir: {} is not a folder", dir.display())));
        }
        let limiter = Arc::new(ExportLimiter::new(
            settings.max_exports,
            settings.max_exports_per_token,
            settings.retry_after,
        ));
        let metrics = Arc::<Metrics>::default();
        let clients = Arc::new(ClientGate::new(
            settings.trusted_proxies.clone(),
            FailureLimit::new(settings.auth_failure_limit, settings.auth_failure_window),
        ));
        let runner = ExportRunner::new(
            Arc::clone(&engine),
            Arc::clone(&metrics),
            Arc::clone(&limiter),
            Arc::clone(&spill),
            &settings,
        );
        Ok(AppState {
            inner: Arc::new(Inner {
                spill,
                engine,
                auth,
                settings,
                applications,
                limiter,
                runner,
                metrics,
                prepared: None,
                policies: Arc::default(),
                readiness: Arc::default(),
                clients,
            }),
        })
    }

    /// The same state, with prepared exports (see [`crate::prepared`]). Call it before the
    /// state is cloned into a router.
    pub fn with_prepared(self, prepared: Arc<Prepared>) -> AppState {
        let inner = Arc::unwrap_or_clone(self.inner);
        AppState { inner: Arc::new(Inner { prepared: Some(prepared), ..inner }) }
    }

    /// The same state, with the operator's field policies (see [`logs_core::privacy`]). Call it
    /// before the state is cloned into a router.
    pub fn with_policies(self, policies: Arc<Policies>) -> AppState {
        let inner = Arc::unwrap_or_clone(self.inner);
        AppState { inner: Arc::new(Inner { policies, ..inner }) }
    }

    /// The field policy `principal` exports under: its own, else the one its claim names,
    /// else its scopes', else the default. One that cannot be had is a refusal, never a wider
    /// policy.
    pub fn privacy_of(&self, principal: &Principal) -> Result<Arc<Privacy>, ApiError> {
        let scopes: Vec<&str> = principal.scopes.iter().map(String::as_str).collect();
        let claims =
            Claims { own: principal.fields.as_deref(), named: principal.policy.as_deref(), scopes: &scopes };
        self.inner.policies.resolve(claims).map_err(ApiError::FieldPolicyUnavailable)
    }

    /// Prepared exports, if the operator configured a spool.
    pub fn prepared(&self) -> Option<&Arc<Prepared>> {
        self.inner.prepared.as_ref()
    }

    /// What the admin API's `/readyz` answers from.
    pub(crate) fn readiness(&self) -> &Arc<Readiness> {
        &self.inner.readiness
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.inner.engine
    }

    pub fn auth(&self) -> &Authenticator {
        &self.inner.auth
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    pub(crate) fn applications(&self) -> &ApplicationDirectory {
        &self.inner.applications
    }

    /// The limits on exports running at once (shared with the runner).
    pub fn limiter(&self) -> &Arc<ExportLimiter> {
        &self.inner.limiter
    }

    /// What runs exports (see [`crate::export::pipeline`]).
    pub(crate) fn runner(&self) -> &ExportRunner {
        &self.inner.runner
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The Prometheus text of the admin API's `/metrics`.
    pub fn metrics_text(&self) -> String {
        let mut text = crate::metrics::render(&self.inner.metrics, &self.inner.auth.figures());
        let (bytes, exports) = self.inner.spill.usage();
        text.push_str(&format!(
            "# HELP logs_spill_bytes Bytes of streamed exports kept in spill files for clients that stopped taking them.\n\
             # TYPE logs_spill_bytes gauge\nlogs_spill_bytes {bytes}\n\
             # HELP logs_spilled_exports Streamed exports holding a spill file.\n\
             # TYPE logs_spilled_exports gauge\nlogs_spilled_exports {exports}\n"
        ));
        if let Some(prepared) = &self.inner.prepared {
            text.push_str(&prepared.metrics_text());
        }
        text
    }
}

// The parts of the state that the middlewares take (`State<Authenticator>`, …): they need not
// know the whole state, and the state's module stays the only one that knows them all.

impl FromRef<AppState> for Authenticator {
    fn from_ref(state: &AppState) -> Authenticator {
        state.inner.auth.clone()
    }
}

impl FromRef<AppState> for Arc<Metrics> {
    fn from_ref(state: &AppState) -> Arc<Metrics> {
        Arc::clone(&state.inner.metrics)
    }
}

impl FromRef<AppState> for ReadyCheck {
    fn from_ref(state: &AppState) -> ReadyCheck {
        ReadyCheck {
            readiness: Arc::clone(&state.inner.readiness),
            engine: Arc::clone(&state.inner.engine),
            auth: state.inner.auth.clone(),
        }
    }
}

impl FromRef<AppState> for Arc<ClientGate> {
    fn from_ref(state: &AppState) -> Arc<ClientGate> {
        Arc::clone(&state.inner.clients)
    }
}

impl FromRef<AppState> for Settings {
    fn from_ref(state: &AppState) -> Settings {
        state.inner.settings.clone()
    }
}
