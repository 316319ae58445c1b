//! The service's errors and their HTTP answers.
//!
//! Every way a request can fail is an [`ApiError`], and [`ApiError::problem`] holds the one
//! `match` that maps each kind to a status, an `error_type`, a message for the client and the
//! headers that go with it. 5xx answers say little; their detail goes to the log.
//!
//! The body of every error answer:
//!
//! ```json
//! {"errors":[{"error_type":"invalid_parameter","message":"…","location":"date_since"}],
//!  "code":400,"message":"…"}
//! ```

use std::time::Duration;

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use logs_core::RequestError;
use serde::Serialize;

use crate::json::JSON_CONTENT_TYPE;
use crate::prepared::spool::error::SpoolError;

/// The realm named in `WWW-Authenticate` challenges.
pub const REALM: &str = "logs-export";

/// Why a request was not authenticated (401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthProblem {
    /// No `Authorization` header.
    Missing,
    /// An `Authorization` header that is not `OAuth <token>` or `Bearer <token>`.
    Malformed,
    /// A token that no token source knows, or that the identity provider calls inactive.
    Invalid,
    /// A token whose `exp` has passed.
    Expired,
    /// A token in the query string, in the parameter named here.
    InQuery(String),
    /// A token refused for the reason named (for the metrics only: the answer is the same as
    /// for [`AuthProblem::Invalid`], so that it tells an attacker nothing).
    Refused(&'static str),
}

/// Everything that can go wrong with a request, as categories.
#[derive(Debug)]
pub enum ApiError {
    /// A query parameter is missing or wrong.
    InvalidParameter(RequestError),
    /// The request itself is malformed (400), e.g. no Host in HTTP/1.1.
    BadRequest(&'static str),
    /// No valid access token (401).
    Unauthenticated(AuthProblem),
    /// The token lacks a scope the route needs (403).
    InsufficientScope { required: &'static str },
    /// The token may not read this application; the same answer whether it exists or not (403).
    ApplicationDenied { application_id: i64 },
    /// The caller's field policy cannot be had (a claim names a policy the service does not
    /// define, or it pseudonymises without the service's key): nothing is exported (403).
    FieldPolicyUnavailable(String),
    /// No such route, or an export extension other than `csv` and `json` (404).
    NotFound,
    /// No application with this id, for a token that may read every application (404); a
    /// token that may not read it gets [`ApiError::ApplicationDenied`] instead.
    ApplicationNotFound { application_id: i64 },
    /// The route exists but not for this method (405; axum adds the `Allow` header).
    MethodNotAllowed,
    /// The request target is longer than allowed (414).
    UriTooLong { max: usize },
    /// The request headers are larger than allowed (431).
    HeadersTooLarge { max: usize },
    /// This token already runs as many exports as it may (429).
    TooManyExports { max: usize, retry_after: Duration },
    /// The client's address got too many 401s lately (429); its tokens are not checked.
    TooManyFailedAuthentications { retry_after: Duration },
    /// The server already runs as many exports as it may (503).
    ServerBusy { retry_after: Duration },
    /// The identity provider could not be asked (503); the detail is for the log.
    IdentityProviderUnavailable { detail: String, retry_after: Duration },
    /// The export produced nothing before the time-to-first-byte limit (503).
    FirstByteTimeout { limit: Duration },
    /// The engine failed before any byte was sent.
    Engine(logs_core::Error),
    /// A prepared export grew beyond the operator's maximum (400, "Try to use more parts.").
    TooLargeToPrepare { max_bytes: u64 },
    /// The spool of prepared exports failed: full (503), its store failing (503, the detail
    /// for the log), or a bug (500).
    Spool(SpoolError),
    /// A `Range` that the prepared export's length cannot satisfy (416).
    RangeNotSatisfiable { length: u64 },
    /// A bug in the server; the detail is for the log (500).
    Internal(String),
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        ApiError::InvalidParameter(e)
    }
}

impl From<SpoolError> for ApiError {
    fn from(e: SpoolError) -> ApiError {
        ApiError::Spool(e)
    }
}

impl From<logs_core::Error> for ApiError {
    fn from(e: logs_core::Error) -> ApiError {
        ApiError::Engine(e)
    }
}

/// What an [`ApiError`] answers: the status, the body's fields and the extra headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: StatusCode,
    pub error_type: &'static str,
    pub message: String,
    pub location: Option<String>,
    pub www_authenticate: Option<String>,
    pub retry_after: Option<Duration>,
    /// `Content-Range` of a 416: the representation's length.
    pub content_range: Option<String>,
    /// What goes to the log and never to the client.
    pub detail: Option<String>,
}

impl Problem {
    fn new(status: StatusCode, error_type: &'static str, message: impl Into<String>) -> Problem {
        Problem {
            status,
            error_type,
            message: message.into(),
            location: None,
            www_authenticate: None,
            retry_after: None,
            content_range: None,
            detail: None,
        }
    }

    /// Names the parameter at fault, cut and escaped as messages quote values (a name is
    /// client input too).
    fn at(mut self, location: &str) -> Problem {
        if !location.is_empty() {
            self.location = Some(logs_core::error::quote(location));
        }
        self
    }

    fn challenge(mut self, error: Option<&str>, extra: &str) -> Problem {
        let mut value = format!("OAuth realm=\"{REALM}\"");
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\""));
        }
        value.push_str(extra);
        self.www_authenticate = Some(value);
        self
    }

    fn retry_after(mut self, after: Duration) -> Problem {
        self.retry_after = Some(after);
        self
    }

    fn detail(mut self, detail: String) -> Problem {
        self.detail = Some(detail);
        self
    }
}

impl ApiError {
    /// The one place where error kinds become statuses.
    pub(crate) fn problem(&self) -> Problem {
        use logs_core::Error as Engine;
        match self {
            ApiError::InvalidParameter(e) | ApiError::Engine(Engine::InvalidRequest(e)) => {
                Problem::new(StatusCode::BAD_REQUEST, "invalid_parameter", e.to_string()).at(e.parameter())
            }
            ApiError::BadRequest(message) => Problem::new(StatusCode::BAD_REQUEST, "bad_request", *message),
            ApiError::Unauthenticated(AuthProblem::Missing) => Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "an access token is required: send it as `Authorization: OAuth <token>`",
            )
            .challenge(None, ""),
            ApiError::Unauthenticated(AuthProblem::Malformed) => Problem::new(
                StatusCode::UNAUTHORIZED,
                "invalid_token",
                "the Authorization header must be `OAuth <token>` (or `Bearer <token>`)",
            )
            .challenge(Some("invalid_token"), ""),
            ApiError::Unauthenticated(AuthProblem::Invalid | AuthProblem::Refused(_)) => Problem::new(
                StatusCode::UNAUTHORIZED,
                "invalid_token",
                "the access token is not valid (unknown, revoked or expired)",
            )
            .challenge(Some("invalid_token"), ""),
            ApiError::Unauthenticated(AuthProblem::Expired) => {
                Problem::new(StatusCode::UNAUTHORIZED, "invalid_token", "the access token has expired")
                    .challenge(Some("invalid_token"), "")
            }
            ApiError::Unauthenticated(AuthProblem::InQuery(parameter)) => Problem::new(
                StatusCode::UNAUTHORIZED,
                "invalid_request",
                format!(
                    "access tokens are not accepted in the URL (parameter `{parameter}`); send the token \
                     in the Authorization header: `Authorization: OAuth <token>`, and consider this token \
                     exposed"
                ),
            )
            .at(parameter)
            .challenge(Some("invalid_request"), ""),
            ApiError::InsufficientScope { required } => Problem::new(
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                format!("the access token lacks the scope `{required}` that this call needs"),
            )
            .challenge(Some("insufficient_scope"), &format!(", scope=\"{required}\"")),
            ApiError::ApplicationDenied { application_id } => Problem::new(
                StatusCode::FORBIDDEN,
                "access_denied",
                format!("the access token does not grant access to application {application_id}"),
            )
            .at("application_id"),
            ApiError::FieldPolicyUnavailable(why) => Problem::new(
                StatusCode::FORBIDDEN,
                "field_policy_unavailable",
                format!("no export under this token: {why}"),
            ),
            ApiError::NotFound => Problem::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such resource; the export is GET /logs/v1/export/errors.csv or errors.json, the \
                 applications list GET /management/v1/applications, an application GET \
                 /management/v1/application/{id}",
            ),
            ApiError::ApplicationNotFound { application_id } => Problem::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("there is no application {application_id}"),
            )
            .at("id"),
            ApiError::MethodNotAllowed => Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this method is not allowed here; the Allow header lists those that are",
            ),
            ApiError::UriTooLong { max } => Problem::new(
                StatusCode::URI_TOO_LONG,
                "uri_too_long",
                format!("the request target is longer than {max} bytes"),
            ),
            ApiError::HeadersTooLarge { max } => Problem::new(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
                format!("the request headers are larger than {max} bytes"),
            ),
            ApiError::TooManyExports { max, retry_after } => Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_requests",
                format!("this access token already runs {max} exports at once; retry when one has finished"),
            )
            .retry_after(*retry_after),
            ApiError::TooManyFailedAuthentications { retry_after } => Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_failed_authentications",
                "too many requests from this address failed authentication; retry later",
            )
            .retry_after(*retry_after),
            ApiError::ServerBusy { retry_after } => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_busy",
                "the server runs as many exports as it may at once; retry later",
            )
            .retry_after(*retry_after),
            ApiError::IdentityProviderUnavailable { detail, retry_after } => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "identity_provider_unavailable",
                "the access token cannot be checked now: the identity provider is unavailable; retry later",
            )
            .retry_after(*retry_after)
            .detail(detail.clone()),
            ApiError::FirstByteTimeout { limit } => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout",
                format!(
                    "the export produced no data within {} s; narrow the date range or add filters, or \
                     retry later",
                    limit.as_secs_f64()
                ),
            ),
            ApiError::Engine(e @ Engine::Storage { .. }) => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "storage_unavailable",
                "part of the dataset cannot be read; retry later, or (except in a cursor chain) pass \
                 skip_unavailable_shards=true to export what can be read",
            )
            .detail(e.to_string()),
            ApiError::Engine(e @ Engine::CursorConflict { .. }) => {
                Problem::new(StatusCode::CONFLICT, "cursor_conflict", e.to_string()).at("cursor")
            }
            ApiError::Engine(e @ Engine::ResourcesExhausted(_)) => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "resources_exhausted",
                "the server has no memory left for this export now; retry later or narrow the request",
            )
            .retry_after(Duration::from_secs(5))
            .detail(e.to_string()),
            ApiError::Engine(e @ (Engine::Config { .. } | Engine::Internal(_))) => {
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", INTERNAL_MESSAGE)
                    .detail(e.to_string())
            }
            ApiError::Internal(detail) => {
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", INTERNAL_MESSAGE)
                    .detail(detail.clone())
            }
            ApiError::TooLargeToPrepare { max_bytes } => Problem::new(
                StatusCode::BAD_REQUEST,
                "too_large",
                format!(
                    "the export is larger than the {max_bytes} bytes a prepared export may hold; split it \
                     with parts_count and part_number. Try to use more parts."
                ),
            )
            .at("parts_count"),
            ApiError::Spool(SpoolError::Full { retry_after, .. }) => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "spool_full",
                "the server has no room to prepare another export now; retry later",
            )
            .retry_after(*retry_after),
            ApiError::Spool(e @ (SpoolError::Store { .. } | SpoolError::Io { .. })) => Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "spool_unavailable",
                "prepared exports cannot be stored or read now; retry later",
            )
            .retry_after(SPOOL_RETRY_AFTER)
            .detail(e.to_string()),
            ApiError::Spool(e @ (SpoolError::Gzip(_) | SpoolError::Manifest(_))) => {
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", INTERNAL_MESSAGE)
                    .detail(e.to_string())
            }
            ApiError::RangeNotSatisfiable { length } => {
                let mut problem = Problem::new(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "range_not_satisfiable",
                    format!("the Range asks for no byte of this {length}-byte export"),
                );
                problem.content_range = Some(format!("bytes */{length}"));
                problem
            }
        }
    }
}

/// The `Retry-After` of a spool whose store fails.
const SPOOL_RETRY_AFTER: Duration = Duration::from_secs(5);

const INTERNAL_MESSAGE: &str =
    "internal error; the details are in the server's log under this response's x-request-id";

#[derive(Serialize)]
struct Body<'a> {
    errors: [Item<'a>; 1],
    code: u16,
    message: &'a str,
}

#[derive(Serialize)]
struct Item<'a> {
    error_type: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<&'a str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        if let Some(detail) = &problem.detail {
            if problem.status.is_server_error() {
                tracing::error!(status = problem.status.as_u16(), error_type = problem.error_type, %detail, "request failed");
            } else {
                tracing::warn!(status = problem.status.as_u16(), error_type = problem.error_type, %detail, "request failed");
            }
        }
        problem.into_response()
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = Body {
            errors: [Item {
                error_type: self.error_type,
                message: &self.message,
                location: self.location.as_deref(),
            }],
            code: self.status.as_u16(),
            message: &self.message,
        };
        let mut response = (self.status, Json(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_CONTENT_TYPE));
        if let Some(challenge) = self.www_authenticate.and_then(|v| HeaderValue::try_from(v).ok()) {
            headers.insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(after) = self.retry_after {
            let seconds = after.as_secs_f64().ceil().max(1.0) as u64;
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(range) = self.content_range.and_then(|v| HeaderValue::try_from(v).ok()) {
            headers.insert(header::CONTENT_RANGE, range);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_parameter_names_its_location() {
        let p = ApiError::InvalidParameter(RequestError::new("date_since", "is required")).problem();
        assert_eq!(p.status, StatusCode::BAD_REQUEST);
        assert_eq!(p.location.as_deref(), Some("date_since"));
        let p = ApiError::InvalidParameter(RequestError::new("", "bad")).problem();
        assert_eq!(p.location, None);
    }

    #[test]
    fn server_errors_keep_details_out_of_the_message() {
        let storage = logs_core::Error::Storage {
            path: Some("/secret/place/file.parquet".into()),
            message: "boom".into(),
        };
        let p = ApiError::Engine(storage).problem();
        assert_eq!(p.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!p.message.contains("/secret"), "{}", p.message);
        assert!(p.detail.unwrap().contains("/secret/place"));
        let p = ApiError::Internal("index out of bounds".into()).problem();
        assert_eq!(p.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!p.message.contains("index"));
    }

    #[test]
    fn challenges() {
        let p = ApiError::Unauthenticated(AuthProblem::Missing).problem();
        assert_eq!(p.www_authenticate.as_deref(), Some("OAuth realm=\"logs-export\""));
        let p = ApiError::InsufficientScope { required: "service:read" }.problem();
        assert_eq!(
            p.www_authenticate.as_deref(),
            Some("OAuth realm=\"logs-export\", error=\"insufficient_scope\", scope=\"service:read\"")
        );
    }

    #[test]
    fn spool_errors_are_a_moment_s_state_or_the_server_s_fault_never_the_client_s() {
        let full =
            ApiError::from(SpoolError::Full { needed: 10, retry_after: Duration::from_secs(7) }).problem();
        assert_eq!((full.status, full.error_type), (StatusCode::SERVICE_UNAVAILABLE, "spool_full"));
        assert_eq!(full.retry_after, Some(Duration::from_secs(7)));
        let disk = std::io::Error::new(std::io::ErrorKind::StorageFull, "/spool/abc.csv: no space");
        let io = ApiError::from(SpoolError::Io { action: "write", source: disk }).problem();
        assert_eq!((io.status, io.error_type), (StatusCode::SERVICE_UNAVAILABLE, "spool_unavailable"));
        assert_eq!(io.retry_after, Some(SPOOL_RETRY_AFTER));
        assert!(!io.message.contains("/spool"), "{}", io.message);
        assert_eq!(io.detail.as_deref(), Some("cannot write the spool: /spool/abc.csv: no space"));
        let gzip = std::io::Error::other("broken");
        let bug = ApiError::from(SpoolError::Gzip(gzip)).problem();
        assert_eq!((bug.status, bug.error_type), (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"));
    }
}
