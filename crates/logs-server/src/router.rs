//! The routers: the public API ([`app`]) and the admin API ([`admin_app`]).

use axum::Router;
use axum::extract::State;
use axum::middleware::{from_fn_with_state, map_request, map_response};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, header};
use logs_format::Format;
use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};
use tower_http::compression::{CompressionLayer, CompressionLevel};

use crate::encoding::request_accepts_gzip;
use crate::error::ApiError;
use crate::export::handler::export_errors;
use crate::state::AppState;
use crate::{auth, json, limits, log, management, openapi, ready};

/// The public API (see the crate's documentation). Every route, the fallback included, is
/// behind the authorization layer; only the routes in [`auth::PUBLIC_ROUTES`] opt out.
pub fn app(state: AppState) -> Router {
    let gzip = CompressionLayer::new()
        .gzip(true)
        .no_br()
        .no_deflate()
        .no_zstd()
        .quality(CompressionLevel::Precise(state.settings().gzip_level as i32))
        // Parquet's pages are compressed already.
        .compress_when(
            DefaultPredicate::new().and(NotForContentType::const_new(Format::Parquet.content_type())),
        );
    let routes = Router::new()
        .route("/logs/v1/export/errors.csv", get(export_errors))
        .route("/logs/v1/export/errors.json", get(export_errors))
        .route("/logs/v1/export/errors.ndjson", get(export_errors))
        .route("/logs/v1/export/errors.parquet", get(export_errors))
        .route("/logs/v1/export/errors.arrow", get(export_errors))
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
        .layer(from_fn_with_state(state.clone(), auth::client::resolve_client))
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

async fn allow_only_on_405(mut response: Response) -> Response {
    if response.status() != http::StatusCode::METHOD_NOT_ALLOWED {
        response.headers_mut().remove(header::ALLOW);
    }
    response
}

/// The admin API, for a separate listener that only operators (and load balancers) reach:
/// `GET /metrics` (Prometheus text format), `GET /healthz` (alive) and `GET /readyz` (whether
/// a load balancer should send this process requests). It has no authorization.
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
