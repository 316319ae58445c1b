//! `logs-server`: the HTTP service of logs-export.
//!
//! [`app`] builds the public API as an axum [`Router`] that tests and embedders can mount;
//! [`admin_app`] the admin one (Prometheus metrics); [`serve`] runs a router on a listener with
//! the connection limits and graceful shutdown that `logs serve` uses.
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
//! Layers, outermost first: the access log and request id ([`log`]), the request size limits
//! ([`limits`]), gzip, authorization ([`auth`]), then the routes. The handlers only extract,
//! call the engine and turn its stream into a body; errors become answers in [`error`].
//!
//! The whole service, as `logs serve` runs it, is built from a configuration by
//! [`service::Service::build`] (see [`service`]). To mount the API in a service of your own:
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

pub mod applications;
pub mod auth;
pub mod config;
pub mod error;
pub mod export;
pub mod json;
pub mod limits;
pub mod log;
pub mod management;
pub mod metrics;
pub mod openapi;
pub mod prepared;
pub mod ready;
mod server;
pub mod service;
pub mod settings;
mod spill;
pub mod state;

use axum::Router;
use axum::extract::State;
use axum::middleware::{from_fn_with_state, map_request, map_response};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, header};
use tower_http::compression::{CompressionLayer, CompressionLevel};

pub use auth::introspection::install_tls_provider;
pub use config::ConfigError;
pub use error::ApiError;
pub use server::{ServeOptions, WriteStall, serve};
pub use settings::{SERVICE_BATCH_SIZE, Settings};
pub use state::AppState;

/// The public API (see the crate documentation). Every route, the fallback included, is
/// behind the authorization layer; only the routes in [`auth::PUBLIC_ROUTES`] opt out.
pub fn app(state: AppState) -> Router {
    let gzip = CompressionLayer::new()
        .gzip(true)
        .no_br()
        .no_deflate()
        .no_zstd()
        .quality(CompressionLevel::Precise(state.settings().gzip_level as i32));
    let routes = Router::new()
        .route("/logs/v1/export/errors.csv", get(export::export_errors))
        .route("/logs/v1/export/errors.json", get(export::export_errors))
        .route("/management/v1/applications", get(management::list_applications))
        .route("/management/v1/application/{id}", get(management::get_application))
        .route("/healthz", get(healthz))
        .route(openapi::OPENAPI_PATH, get(openapi::serve_document))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(state.clone(), auth::require_token))
        .layer(gzip)
        .layer(map_request(identity_unless_gzip_accepted))
        .layer(from_fn_with_state(state.clone(), limits::check_request_size))
        .layer(from_fn_with_state(state.clone(), log::access_log))
        .with_state(state);
    // axum adds `Allow` to whatever a route answers for a method it lacks, outside the route's
    // layers, the 401 included: strip it from everything but a 405, so that a client without a
    // token cannot tell a real route from a made-up one.
    Router::new().fallback_service(routes).layer(map_response(allow_only_on_405))
}

/// tower-http's compression answers `406` when `Accept-Encoding` accepts neither gzip nor
/// identity (`identity;q=0`, `*;q=0`), yet keeps the status line's body and headers as they
/// were: a whole export, or a 401's body, under `406`. RFC 9110 §12.5.3 lets a server answer
/// such a request without content coding instead, which this service does: the header is
/// dropped before compression sees it whenever it does not accept gzip. Every answer is then
/// the one the request would get without the header; none is `406`.
async fn identity_unless_gzip_accepted(mut request: axum::extract::Request) -> axum::extract::Request {
    let headers = request.headers();
    if headers.contains_key(header::ACCEPT_ENCODING) && !request_accepts_gzip(headers) {
        request.headers_mut().remove(header::ACCEPT_ENCODING);
    }
    request
}

/// Whether the request's `Accept-Encoding` headers, all of them, accept gzip (none: no).
pub(crate) fn request_accepts_gzip(headers: &http::HeaderMap) -> bool {
    let values: Vec<&str> =
        headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).collect();
    !values.is_empty() && accepts_gzip(&values.join(","))
}

/// Whether an `Accept-Encoding` value accepts gzip: `gzip` (or `x-gzip`) with a weight above
/// zero, or else `*` with one.
fn accepts_gzip(value: &str) -> bool {
    let mut wildcard = None;
    for item in value.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let weight = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match coding.as_str() {
            "gzip" | "x-gzip" => return weight > 0.0,
            "*" => wildcard = Some(weight > 0.0),
            _ => {}
        }
    }
    wildcard.unwrap_or(false)
}

async fn allow_only_on_405(mut response: Response) -> Response {
    if response.status() != http::StatusCode::METHOD_NOT_ALLOWED {
        response.headers_mut().remove(header::ALLOW);
    }
    response
}

/// The admin API, for a separate listener that only operators (and load balancers) reach:
/// `GET /metrics` (Prometheus text format), `GET /healthz` (alive) and `GET /readyz` (see
/// [`ready`]). It has no authorization.
pub fn admin_app(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .route("/readyz", get(ready::readyz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// Liveness: the process answers. Says nothing about the data.
async fn healthz() -> Response {
    json::json_response("{\"status\":\"ok\"}")
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"))],
        state.metrics_text(),
    )
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_is_accepted_by_name_or_wildcard_with_a_weight() {
        for yes in [
            "gzip",
            "gzip, deflate, br",
            "GZIP;q=0.5",
            "x-gzip",
            "*",
            "identity;q=0, *;q=0.1",
            "br, gzip;q=1.0",
        ] {
            assert!(accepts_gzip(yes), "{yes}");
        }
        for no in
            ["", "identity", "identity;q=0", "*;q=0", "gzip;q=0", "gzip;q=0, *", "br", "deflate;q=1, *;q=0"]
        {
            assert!(!accepts_gzip(no), "{no}");
        }
    }
}
