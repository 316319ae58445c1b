//! The service as one value: built from a [`ServiceConfig`], then run until stopped.
//!
//! `logs serve` maps its flags and environment onto a `ServiceConfig`; `logs-loadtest` and
//! embedders build the same way:
//!
//! ```no_run
//! use logs_server::service::{Service, ServiceConfig, Tokens, stop_signal};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ServiceConfig {
//!     tokens: Tokens::File { path: "tokens.toml".into(), reload_interval: std::time::Duration::from_secs(2) },
//!     ..ServiceConfig::new("s3://mobile-logs/errors/v1".parse()?)
//! };
//! let service = Service::build(config).await?; // dataset, token sources, listeners: checked here
//! let stop = stop_signal(); // SIGTERM or SIGINT from here on: running exports finish
//! println!("serving on http://{}", service.address());
//! service.run_until_stopped(stop).await?;
//! # Ok(())
//! # }
//! ```
//!
//! What `build` does, in order: opens the dataset and lists its root once (a missing bucket,
//! refused credentials or an unreadable folder stop the start); makes the token sources (a
//! tokens file, an OpenID provider's keys — fetched once, a provider down is not fatal —,
//! introspection, a fixed set, or one generated token); reads the dataset's
//! `applications.toml`; opens and sweeps the spool of prepared exports, if configured; binds the
//! listeners. `run_until_stopped` serves the API (and the admin
//! listener, if any), watches the tokens file, and on `stop` gives running exports
//! `shutdown_timeout` to finish.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use logs_core::{DatasetLocation, Engine, EngineConfig, Policies, PseudonymKey};
use rand::RngCore;
use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::auth::introspection::{ApplicationGrants, ClientCredentials};
use crate::auth::{
    Applications, Authenticator, IntrospectionConfig, Introspector, JwtVerifier, OidcConfig, Principal,
    ProviderKeys, READ_SCOPE, TokenSet, TokenStore, WRITE_SCOPE,
};
use crate::config::ConfigError;
use crate::prepared::{Prepared, PreparedConfig};
use crate::router::{admin_app, app};
use crate::server::{ServeOptions, serve};
use crate::settings::{SERVICE_BATCH_SIZE, Settings};
use crate::state::AppState;

/// Everything the service is made from.
#[derive(Debug)]
pub struct ServiceConfig {
    /// The dataset: a folder, `file://…` or `s3://bucket/prefix`.
    pub data: DatasetLocation,
    /// The engine's settings (`EngineConfig::s3` for a bucket). `new` sets the service's batch
    /// size, [`SERVICE_BATCH_SIZE`].
    pub engine: EngineConfig,
    /// The API's address; port 0 takes a free one ([`Service::address`] tells which).
    pub listen: SocketAddr,
    /// The admin API's address (`/metrics`, `/healthz`); none by default.
    pub admin_listen: Option<SocketAddr>,
    pub tokens: Tokens,
    /// Token introspection (RFC 7662), asked about tokens the tokens file does not know.
    pub introspection: Option<IntrospectionFiles>,
    /// JWT access tokens of an OpenID provider, checked with its keys.
    pub oidc: Option<OidcFiles>,
    pub settings: Settings,
    /// The longest wait for a request's headers, and for the next request on an idle connection.
    pub header_read_timeout: Duration,
    /// How long a client may read nothing before its connection is closed and its export cancelled.
    pub write_timeout: Duration,
    /// How long running exports may go on after the stop.
    pub shutdown_timeout: Duration,
    /// How long the service goes on accepting requests after the stop while the admin API's
    /// `/readyz` answers "draining", so that a load balancer stops sending it requests first.
    pub drain_delay: Duration,
    /// Prepared exports and their spool; none by default (every export is streamed).
    pub prepared: Option<PreparedConfig>,
    /// Field policies and the pseudonym key; none by default (every token sees every field).
    pub privacy: PrivacyFiles,
}

/// Where the field policies and the pseudonym key are read from (see [`logs_core::privacy`]).
#[derive(Debug, Clone, Default)]
pub struct PrivacyFiles {
    /// The field-policies file: named policies, the scopes that select them, the default.
    pub field_policies: Option<PathBuf>,
    /// At least 32 random bytes: the key of `pseudonymise`.
    pub pseudonym_key: Option<PathBuf>,
}

impl ServiceConfig {
    /// The defaults of `logs serve` over `data`: `127.0.0.1:8080`, no admin listener, one
    /// generated token, [`Settings::default`], 10 s to read headers, 60 s write stall, 30 s to
    /// shut down.
    pub fn new(data: DatasetLocation) -> ServiceConfig {
        let settings = Settings::default();
        let options = ServeOptions::for_settings(&settings);
        ServiceConfig {
            data,
            engine: EngineConfig { batch_size: SERVICE_BATCH_SIZE, ..EngineConfig::default() },
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admin_listen: None,
            tokens: Tokens::Generated,
            introspection: None,
            oidc: None,
            settings,
            header_read_timeout: options.header_read_timeout,
            write_timeout: options.write_timeout,
            shutdown_timeout: options.shutdown_timeout,
            drain_delay: Duration::ZERO,
            prepared: None,
            privacy: PrivacyFiles::default(),
        }
    }
}

/// Where tokens come from (besides introspection).
#[derive(Debug)]
pub enum Tokens {
    /// A tokens file (TOML), reloaded when it changes (looked at every `reload_interval`) and
    /// through [`Service::tokens_file`] (`logs serve` does on SIGHUP, [`reload_on_sighup`]).
    File { path: PathBuf, reload_interval: Duration },
    /// A fixed set, as built by the embedder.
    Fixed(TokenSet),
    /// One random token for this run, with every scope on every application — unless
    /// introspection is configured, in which case there is none.
    Generated,
    /// None: only introspection.
    None,
}

/// JWT access tokens of an OpenID provider: its settings, and the grants file as a path.
#[derive(Debug, Clone)]
pub struct OidcFiles {
    /// The settings; their `grants` are read from `grants`.
    pub settings: OidcConfig,
    /// A TOML file granting applications by `client_id` or `sub`, for tokens without the
    /// applications claim.
    pub grants: Option<PathBuf>,
}

/// Introspection settings whose secrets are in files.
#[derive(Debug, Clone)]
pub struct IntrospectionFiles {
    /// `https`, or `http` on a loopback address. `None`: the endpoint that the OpenID
    /// provider's discovery document names (needs [`ServiceConfig::oidc`]; the provider must
    /// answer when the service starts).
    pub url: Option<url::Url>,
    /// A TOML file with `client_id` and `client_secret`.
    pub credentials: PathBuf,
    /// A TOML file granting applications by `client_id` or `sub`.
    pub grants: Option<PathBuf>,
    pub timeout: Duration,
    pub cache_entries: usize,
    pub cache_ttl: Duration,
    pub negative_ttl: Duration,
    pub applications_claim: String,
}

/// Why the service could not be built or stopped running.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A configuration file or setting (tokens, introspection, applications).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The dataset cannot be opened or read.
    #[error("cannot read the dataset {location}: {source}")]
    Dataset {
        location: String,
        #[source]
        source: logs_core::Error,
    },
    /// A listener cannot be bound.
    #[error("cannot listen on {address} ({what}): {source}")]
    Listen {
        what: &'static str,
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("the {what} listener failed: {source}")]
    Serve {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl ServiceError {
    /// True when the configuration says something invalid (a command line maps it to bad
    /// usage), as opposed to something that could not be read or done.
    pub fn is_invalid_configuration(&self) -> bool {
        match self {
            ServiceError::Config(e) => matches!(e, ConfigError::InvalidFile { .. } | ConfigError::Invalid(_)),
            ServiceError::Dataset { source, .. } => matches!(source, logs_core::Error::Config { .. }),
            ServiceError::Listen { .. } | ServiceError::Serve { .. } => false,
        }
    }
}

/// A built service, its listeners bound (see the module documentation).
#[derive(Debug)]
pub struct Service {
    state: AppState,
    drain_delay: Duration,
    listener: TcpListener,
    admin: Option<TcpListener>,
    options: ServeOptions,
    generated_token: Option<String>,
    /// The tokens file and how often to look at it.
    tokens_file: Option<(Arc<TokenStore>, Duration)>,
}

impl Service {
    /// Builds the service (see the module documentation for the order of the checks).
    pub async fn build(config: ServiceConfig) -> Result<Service, ServiceError> {
        let location = config.data.to_string();
        let dataset = |source| ServiceError::Dataset { location: location.clone(), source };
        let s3 = config.engine.s3.clone();
        let engine = Engine::open(config.data, config.engine).map_err(dataset)?;
        engine.check().await.map_err(dataset)?;

        let jwt = match &config.oidc {
            Some(files) => Some(Arc::new(jwt_verifier(files).await?)),
            None => None,
        };
        let introspector = match &config.introspection {
            Some(files) => Some(Arc::new(introspector(files, jwt.as_deref()).await?)),
            None => None,
        };
        let (store, tokens_file, generated_token) = match config.tokens {
            Tokens::File { path, reload_interval } => {
                let store = Arc::new(TokenStore::open(path)?);
                (Some(Arc::clone(&store)), Some((store, reload_interval)), None)
            }
            Tokens::Fixed(set) => (Some(Arc::new(TokenStore::fixed(set))), None, None),
            Tokens::Generated if introspector.is_none() && jwt.is_none() => {
                let token = generate_token();
                let principal = Principal {
                    name: "generated".into(),
                    scopes: [READ_SCOPE.to_owned(), WRITE_SCOPE.to_owned()].into(),
                    applications: Applications::All,
                    ..Principal::default()
                };
                (Some(Arc::new(TokenStore::fixed(TokenSet::single(&token, principal)))), None, Some(token))
            }
            Tokens::Generated | Tokens::None => (None, None, None),
        };
        if store.is_none() && introspector.is_none() && jwt.is_none() {
            return Err(ConfigError::Invalid(
                "no token source: give a tokens file, introspection or an OpenID provider".into(),
            )
            .into());
        }
        let options = ServeOptions {
            header_read_timeout: config.header_read_timeout,
            write_timeout: config.write_timeout,
            shutdown_timeout: config.shutdown_timeout,
            ..ServeOptions::for_settings(&config.settings)
        };
        let policies = field_policies(&config.privacy, store.as_deref())?;
        let mut auth = Authenticator::new(store, introspector);
        if let Some(jwt) = jwt {
            auth = auth.with_jwt(jwt);
        }
        let mut state = AppState::new(Arc::new(engine), auth, config.settings).await?.with_policies(policies);
        if let Some(prepared) = config.prepared {
            state = state.with_prepared(Prepared::open(prepared, &s3).await?);
        }
        let listener = bind("API", config.listen).await?;
        let admin = match config.admin_listen {
            Some(address) => Some(bind("admin", address).await?),
            None => None,
        };
        let drain_delay = config.drain_delay;
        Ok(Service { state, drain_delay, listener, admin, options, generated_token, tokens_file })
    }

    /// The API's address (with the port taken, when the configuration said 0).
    pub fn address(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// The admin API's address, if it has one.
    pub fn admin_address(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|l| l.local_addr().expect("a bound listener has an address"))
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// The token generated for this run ([`Tokens::Generated`] without introspection).
    pub fn generated_token(&self) -> Option<&str> {
        self.generated_token.as_deref()
    }

    /// The tokens file's store, for reloads from elsewhere (a signal handler).
    pub fn tokens_file(&self) -> Option<Arc<TokenStore>> {
        self.tokens_file.as_ref().map(|(store, _)| Arc::clone(store))
    }

    /// An export of the dataset's first application and up to its first 7 days, as a request
    /// target (`/logs/v1/export/errors.csv?…`), for "try it" messages.
    pub async fn example_target(&self) -> String {
        let storage = self.state.engine().storage();
        let mut sample = (1001, "2026-10-01".to_owned(), "2026-10-07".to_owned());
        if let Some(app) = storage.applications().await.ok().and_then(|ids| ids.first().copied()) {
            sample.0 = app;
            let dates = storage.dates(app).await.unwrap_or_default();
            if let Some(&first) = dates.first() {
                let last =
                    dates.iter().copied().take_while(|d| (*d - first).num_days() < 7).last().unwrap_or(first);
                (sample.1, sample.2) = (first.to_string(), last.to_string());
            }
        }
        let (app, since, until) = sample;
        format!(
            "/logs/v1/export/errors.csv?application_id={app}&date_since={since}&date_until={until}\
             &fields=error_datetime,error_name,os_name&limit=10"
        )
    }

    /// Serves until `stop` resolves, then lets running exports finish within the shutdown
    /// timeout. Watches the tokens file meanwhile.
    pub async fn run_until_stopped(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServiceError> {
        let Service { state, drain_delay, listener, admin, options, tokens_file, .. } = self;
        let watcher = tokens_file.map(|(store, interval)| store.spawn_watcher(interval));
        let address = listener.local_addr().ok();
        tracing::info!(address = ?address, data = %state.engine().location(), "listening");
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let readiness = Arc::clone(state.readiness());
        tokio::spawn(async move {
            stop.await;
            readiness.drain();
            if !drain_delay.is_zero() {
                tracing::info!(
                    seconds = drain_delay.as_secs_f64(),
                    "draining: /readyz says so, requests are still served"
                );
                tokio::time::sleep(drain_delay).await;
            }
            tracing::info!("stopping: finishing running exports");
            let _ = stop_tx.send(true);
        });
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let admin_task = admin.map(|admin| {
            let app = admin_app(state.clone());
            tokio::spawn(serve(admin, app, options.clone(), stopped(stop_rx.clone())))
        });
        let served = serve(listener, app(state), options, stopped(stop_rx)).await;
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        served.map_err(|source| ServiceError::Serve { what: "API", source })?;
        if let Some(task) = admin_task {
            let joined = task.await.map_err(|e| std::io::Error::other(e.to_string()));
            joined
                .and_then(|served| served)
                .map_err(|source| ServiceError::Serve { what: "admin", source })?;
        }
        tracing::info!("stopped");
        Ok(())
    }
}

async fn bind(what: &'static str, address: SocketAddr) -> Result<TcpListener, ServiceError> {
    let listener =
        TcpListener::bind(address).await.map_err(|source| ServiceError::Listen { what, address, source })?;
    if !address.ip().is_loopback() {
        tracing::warn!(%address, what, "listening beyond loopback, as configured");
    }
    Ok(listener)
}

/// The JWT verifier, its keys fetched once now: a provider that does not answer is logged,
/// not fatal (JWTs are answered 503 until its keys are fetched).
async fn jwt_verifier(files: &OidcFiles) -> Result<JwtVerifier, ConfigError> {
    let mut settings = files.settings.clone();
    if let Some(grants) = &files.grants {
        settings.grants = Some(ApplicationGrants::from_file(grants)?);
    }
    let keys = Arc::new(ProviderKeys::new(settings)?);
    keys.refresh().await;
    if keys.cached_keys() > 0 {
        tracing::info!(issuer = %keys.config().issuer, keys = keys.cached_keys(), "fetched the OpenID provider's keys");
    }
    Ok(JwtVerifier::new(keys))
}

async fn introspector(
    files: &IntrospectionFiles,
    jwt: Option<&JwtVerifier>,
) -> Result<Introspector, ConfigError> {
    let credentials = ClientCredentials::from_file(&files.credentials)?;
    let url = match (&files.url, jwt) {
        (Some(url), _) => url.clone(),
        (None, Some(jwt)) => {
            let endpoints = jwt.keys().endpoints().await.map_err(|e| {
                ConfigError::Invalid(format!(
                    "cannot find the introspection endpoint of the OpenID provider (give --introspection-url to start without it): {e}"
                ))
            })?;
            endpoints.introspection_endpoint.ok_or_else(|| {
                ConfigError::Invalid(
                    "the OpenID provider's discovery document names no introspection_endpoint: give --introspection-url".into(),
                )
            })?
        }
        (None, None) => {
            return Err(ConfigError::Invalid(
                "introspection needs --introspection-url or --oidc-issuer".into(),
            ));
        }
    };
    let mut config = IntrospectionConfig::new(url, credentials);
    config.timeout = files.timeout;
    config.cache_entries = files.cache_entries;
    config.cache_ttl = files.cache_ttl;
    config.negative_ttl = files.negative_ttl;
    config.applications_claim = files.applications_claim.clone();
    if let Some(grants) = &files.grants {
        config.grants = Some(ApplicationGrants::from_file(grants)?);
    }
    Introspector::new(config)
}

/// The field policies of `files`, checked with the tokens file's own policies: a policy that
/// pseudonymises needs the key.
fn field_policies(files: &PrivacyFiles, tokens: Option<&TokenStore>) -> Result<Arc<Policies>, ConfigError> {
    let key = match &files.pseudonym_key {
        Some(path) => Some(Arc::new(PseudonymKey::from_file(path).map_err(ConfigError::Invalid)?)),
        None => None,
    };
    let policies = match &files.field_policies {
        Some(path) => Policies::from_file(path, key).map_err(ConfigError::Invalid)?,
        None => Policies::none(key),
    };
    if let Some(tokens) = tokens {
        for (name, policy) in tokens.current().field_policies() {
            policies
                .check_own(policy)
                .map_err(|e| ConfigError::Invalid(format!("tokens file, token `{name}`: {e}")))?;
        }
    }
    Ok(Arc::new(policies))
}

/// 32 bytes from the operating system's CSPRNG (via `rand`'s thread RNG), as hex.
fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Resolves on the first SIGTERM or SIGINT; a second one exits the process at once (status
/// 130). For [`Service::run_until_stopped`] in a binary. Called within a Tokio runtime, it
/// watches the signals from the call on, not from the future's first poll: call it before
/// announcing that the service is up, so that a signal sent as soon as the announcement is
/// read stops the service cleanly instead of killing the process. Called outside one, it
/// watches them from the first poll.
pub fn stop_signal() -> impl Future<Output = ()> + Send + 'static {
    let watched = tokio::runtime::Handle::try_current().ok().map(|_| StopSignals::watch());
    async move {
        let mut signals = match watched.unwrap_or_else(StopSignals::watch) {
            Ok(signals) => signals,
            Err(e) => {
                tracing::error!(error = %e, "cannot watch for signals; stop the process with SIGKILL");
                return std::future::pending().await;
            }
        };
        signals.next().await;
        tracing::info!("stop signal received");
        tokio::spawn(async move {
            signals.next().await;
            tracing::warn!("second stop signal: exiting at once");
            std::process::exit(130);
        });
    }
}

/// SIGTERM and SIGINT, caught from [`StopSignals::watch`] on.
struct StopSignals {
    terminate: Signal,
    interrupt: Signal,
}

impl StopSignals {
    fn watch() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// Reloads the tokens file of `store` on every SIGHUP (and, without one, logs the signal).
pub fn reload_on_sighup(store: Option<Arc<TokenStore>>) -> std::io::Result<()> {
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            let Some(store) = store.clone() else {
                tracing::info!("SIGHUP: no tokens file to reload");
                continue;
            };
            let outcome = tokio::task::spawn_blocking(move || store.reload(true)).await;
            tracing::info!(outcome = ?outcome.ok(), "SIGHUP: reloaded the tokens file");
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built outside a runtime (as `block_on(service.run_until_stopped(stop_signal()))` does),
    /// the future does not panic, and resolves on a SIGINT sent after its first poll.
    #[test]
    fn a_stop_signal_built_outside_a_runtime_watches_from_its_first_poll() {
        let stop = stop_signal();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let mut stop = Box::pin(stop);
            assert!(futures::poll!(&mut stop).is_pending());
            let pid = std::process::id().to_string();
            assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
            tokio::time::timeout(Duration::from_secs(10), stop).await.expect("SIGINT stops it");
        });
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (generate_token(), generate_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(crate::auth::is_token_syntax(&a));
    }
}
