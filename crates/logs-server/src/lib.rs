//! `logs-server`: the HTTP service of logs-export.
//!
//! [`app`] builds the public API as an axum [`Router`](axum::Router) that tests and embedders
//! can mount; [`admin_app`] the admin one (Prometheus metrics); [`serve`] runs a router on a
//! listener with the connection limits and graceful shutdown that `logs serve` uses.
//!
//! ```text
//! GET /logs/v1/export/errors.csv?…   the export as CSV    (scope service:read)
//! GET /logs/v1/export/errors.json?…  the export as JSON   (scope service:read)
//! GET /management/v1/applications    applications the token may read (scope service:read)
//! GET /management/v1/application/{id} one of them                   (scope service:read)
//! GET /healthz                       liveness, without a token
//! GET /openapi.json                  the OpenAPI document (any valid token)
//! ```
//!
//! Layers, outermost first: the client's address ([`auth::client`]), the access log and request
//! id, the request size limits, gzip, authorization ([`auth`]: the failed-authentication limit,
//! then the token), then the routes. The handlers only extract, call the engine and
//! turn its stream into a body; errors become answers ([`ApiError`]) in one `match`.
//!
//! The public surface: the service's builder ([`service`]), its configuration ([`Settings`],
//! [`auth`]'s token sources, [`prepared::PreparedConfig`]), and the routers with their state
//! ([`app`], [`admin_app`], [`AppState`], [`serve`]), with what those hand out: the error
//! answers ([`ApiError`] and its parts), the handles of the state ([`Metrics`],
//! [`ExportLimiter`]) and the OpenAPI [`document`]. The handlers, the export pipeline and the
//! spool are private.
//!
//! The whole service, as `logs serve` runs it, is built from a configuration by
//! [`service::Service::build`]. To mount the API in a service of your own:
//!
//! ```no_run
//! use std::sync::Arc;
//! use logs_core::{Engine, EngineConfig};
//! use logs_server::auth::{Applications, Authenticator, Principal, TokenSet, TokenStore};
//! use logs_server::{AppState, SERVICE_BATCH_SIZE, ServeOptions, Settings};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // Smaller batches than the engine's default: several exports run at once.
//! let config = EngineConfig { batch_size: SERVICE_BATCH_SIZE, ..EngineConfig::default() };
//! let engine = Arc::new(Engine::open("testdata/dataset", config)?);
//! let principal = Principal {
//!     name: "me".into(),
//!     scopes: ["service:read".to_owned()].into(),
//!     applications: Applications::All,
//!     ..Principal::default()
//! };
//! let tokens = TokenStore::fixed(TokenSet::single("my-secret-token", principal));
//! let auth = Authenticator::new(Some(Arc::new(tokens)), None);
//! let settings = Settings::default();
//! let options = ServeOptions::for_settings(&settings);
//! let state = AppState::new(engine, auth, settings).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! logs_server::serve(listener, logs_server::app(state), options, std::future::pending()).await?;
//! # Ok(())
//! # }
//! ```

mod applications;
pub mod auth;
mod config;
mod encoding;
mod error;
mod export;
mod json;
mod limits;
mod log;
mod management;
mod metrics;
mod openapi;
pub mod prepared;
mod ready;
mod router;
mod server;
pub mod service;
mod settings;
mod spill;
mod state;

pub use auth::introspection::install_tls_provider;
pub use config::ConfigError;
pub use error::{ApiError, AuthProblem};
pub use limits::{ExportLimiter, ExportPermit};
pub use metrics::{ExportCounts, Metrics};
pub use openapi::{DocumentSettings, OPENAPI_PATH, document, document_json};
pub use prepared::spool::error::SpoolError;
pub use router::{admin_app, app};
pub use server::{ServeOptions, serve};
pub use settings::{SERVICE_BATCH_SIZE, Settings};
pub use state::AppState;
