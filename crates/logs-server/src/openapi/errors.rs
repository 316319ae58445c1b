//! The error answers, one per status, from an example of every kind of [`ApiError`] run
//! through [`ApiError::problem`]: their `error_type`s, body schema, example and headers.

use std::time::Duration;

use http::StatusCode;
use logs_core::RequestError;
use serde_json::{Value, json};
use utoipa::openapi::path::OperationBuilder;
use utoipa::openapi::response::{Response as ApiResponse, ResponseBuilder};
use utoipa::openapi::schema::{AdditionalProperties, AllOfBuilder, ArrayBuilder, ObjectBuilder, Type};
use utoipa::openapi::{ContentBuilder, Ref};

use super::parts::{header_of, integer, request_id_header};
use crate::auth::READ_SCOPE;
use crate::error::{ApiError, AuthProblem, Problem, REALM};
use crate::prepared::spool::error::SpoolError;
use crate::settings::Settings;

/// The body of every error answer (see [`crate::error`]).
pub(super) fn error_body_schema() -> ObjectBuilder {
    let item = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("error_type", Ref::from_schema_name("ErrorType"))
        .property(
            "message",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("What is wrong; the same as the body's `message`.")),
        )
        .property(
            "location",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("The query parameter at fault; absent when there is none.")),
        )
        .required("error_type")
        .required("message")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "`{\"errors\":[{\"error_type\",\"message\",\"location\"}],\"code\",\"message\"}`: one error, \
             the HTTP status as `code`, and the message again at the top.",
        ))
        .property("errors", ArrayBuilder::new().items(item).min_items(Some(1)).max_items(Some(1)))
        .property("code", integer(Some(400u16), Some(599u16)).description(Some("The HTTP status.")))
        .property("message", ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)))
        .required("errors")
        .required("code")
        .required("message")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

pub(super) fn error_type_schema() -> ObjectBuilder {
    let mut types: Vec<&'static str> = Vec::new();
    for (error, _) in error_examples() {
        let error_type = error.problem().error_type;
        if !types.contains(&error_type) {
            types.push(error_type);
        }
    }
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some("The kind of error; each status has its own (see the responses)."))
        .enum_values(Some(types))
}

/// One error answer per status, from [`error_examples`]: the `error_type`s that answer with
/// it and when, an example body, and its headers.
pub(super) fn error_responses() -> Vec<(StatusCode, ApiResponse)> {
    let examples = error_examples();
    let mut statuses: Vec<StatusCode> = examples.iter().map(|(e, _)| e.problem().status).collect();
    statuses.sort();
    statuses.dedup();
    statuses
        .into_iter()
        .map(|status| {
            let cases: Vec<(Problem, &str)> = examples
                .iter()
                .map(|(e, when)| (e.problem(), *when))
                .filter(|(p, _)| p.status == status)
                .collect();
            (status, error_response(status, &cases))
        })
        .collect()
}

fn error_response(status: StatusCode, cases: &[(Problem, &str)]) -> ApiResponse {
    let mut types: Vec<&str> = Vec::new();
    let mut description = format!("{}.", status.canonical_reason().unwrap_or("Error"));
    for (problem, when) in cases {
        description.push_str(&format!("\n- `{}`: {when}", problem.error_type));
        if !types.contains(&problem.error_type) {
            types.push(problem.error_type);
        }
    }
    if status == StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE {
        description.push_str(
            "\n\nFar above the limit (beyond 4 × (URL + header limits), at least 64 KiB, or more than \
             100 headers) the HTTP layer answers 431 itself, without a body or other headers.",
        );
    }
    let schema = AllOfBuilder::new().item(Ref::from_schema_name("ErrorBody")).item(
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property(
                "code",
                ObjectBuilder::new().schema_type(Type::Integer).enum_values(Some([status.as_u16()])),
            )
            .property(
                "errors",
                ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::Object).property(
                    "error_type",
                    ObjectBuilder::new().schema_type(Type::String).enum_values(Some(types)),
                )),
            ),
    );
    let example = cases.first().map(|(problem, _)| example_body(problem));
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(schema)).example(example).build())
        .header("x-request-id", request_id_header());
    let challenges = cases.iter().filter(|(p, _)| p.www_authenticate.is_some()).count();
    if challenges > 0 {
        response = response.header(
            "WWW-Authenticate",
            header_of(
                ObjectBuilder::new().schema_type(Type::String).pattern(Some(format!("^OAuth realm=\"{REALM}\""))),
                if challenges == cases.len() {
                    "The OAuth challenge, with `error` (and `scope`) when known."
                } else {
                    "The OAuth challenge, for `insufficient_scope`: `error=\"insufficient_scope\"` and the `scope` needed."
                },
            ),
        );
    }
    let retries = cases.iter().filter(|(p, _)| p.retry_after.is_some()).count();
    if retries > 0 {
        let kinds: Vec<String> = cases
            .iter()
            .filter(|(p, _)| p.retry_after.is_some())
            .map(|(p, _)| format!("`{}`", p.error_type))
            .collect();
        response = response.header(
            "Retry-After",
            header_of(
                integer(Some(1u32), None),
                &format!("Seconds to wait before retrying ({}).", kinds.join(", ")),
            ),
        );
    }
    if status == StatusCode::RANGE_NOT_SATISFIABLE {
        response = response.header(
            "Content-Range",
            header_of(
                ObjectBuilder::new().schema_type(Type::String).pattern(Some(r"^bytes \*/[0-9]+$")),
                "`bytes */<length>`: the length of the prepared export.",
            ),
        );
    }
    if status == StatusCode::METHOD_NOT_ALLOWED {
        response = response.header(
            "Allow",
            header_of(
                ObjectBuilder::new().schema_type(Type::String),
                "The methods the route allows, e.g. `GET,HEAD`.",
            ),
        );
    }
    response.build()
}

/// The body that [`crate::error`] sends for `problem`.
fn example_body(problem: &Problem) -> Value {
    let mut item = json!({"error_type": problem.error_type, "message": problem.message});
    if let Some(location) = &problem.location {
        item["location"] = json!(location);
    }
    json!({"errors": [item], "code": problem.status.as_u16(), "message": problem.message})
}

/// `Unauthorized`, `ServiceUnavailable`…: the status's reason without spaces.
pub(super) fn component_name(status: StatusCode) -> String {
    status.canonical_reason().unwrap_or("Error").split([' ', '-']).collect()
}

/// One example of every kind of error, and when it happens.
fn error_examples() -> Vec<(ApiError, &'static str)> {
    use logs_core::Error as Engine;
    let settings = Settings::default();
    let retry_after = settings.retry_after;
    let examples = vec![
        (
            ApiError::InvalidParameter(RequestError::new("date_since", "is required")),
            "A parameter is missing, unknown, given twice or invalid; `location` names it and the \
             message says what would be valid.",
        ),
        (ApiError::Unauthenticated(AuthProblem::Missing), "No `Authorization` header."),
        (
            ApiError::Unauthenticated(AuthProblem::Malformed),
            "An `Authorization` header that is not `OAuth <token>` (or `Bearer <token>`).",
        ),
        (ApiError::Unauthenticated(AuthProblem::Invalid), "An unknown, inactive or revoked token."),
        (ApiError::Unauthenticated(AuthProblem::Expired), "A token whose `exp` has passed."),
        (
            ApiError::Unauthenticated(AuthProblem::InQuery("access_token".into())),
            "A token in the query string (`oauth_token`, `access_token`, `token`, any case), even with \
             a valid header and on every route; consider such a token exposed.",
        ),
        (
            ApiError::InsufficientScope { required: READ_SCOPE },
            "The token lacks the scope the route needs (`service:read` for reads).",
        ),
        (
            ApiError::ApplicationDenied { application_id: 1002 },
            "The application is not among the token's; the same answer whether it exists or not.",
        ),
        (
            ApiError::FieldPolicyUnavailable(
                "the token names field policy `x`, which this service does not define".into(),
            ),
            "The token's field policy cannot be applied (its claim names a policy the service does not \
             define, or the policy pseudonymises without the service's key): nothing is exported.",
        ),
        (ApiError::NotFound, "No such route (with a valid token; without one any path is 401)."),
        (
            ApiError::ApplicationNotFound { application_id: 1004 },
            "No application with this id (for a token that may read any application); `location` is `id`.",
        ),
        (ApiError::MethodNotAllowed, "Another method than GET or HEAD on a route."),
        (
            ApiError::UriTooLong { max: settings.max_url_bytes },
            "Path and query longer than the server's limit (`--max-url-bytes`, 8 KiB by default).",
        ),
        (
            ApiError::HeadersTooLarge { max: settings.max_header_bytes },
            "Request headers, counted as `name: value\\r\\n`, above the server's limit \
             (`--max-header-bytes`, 16 KiB by default).",
        ),
        (
            ApiError::TooManyExports { max: settings.max_exports_per_token, retry_after },
            "This token already runs as many exports as it may at once (`--max-exports-per-token`).",
        ),
        (
            ApiError::TooManyFailedAuthentications { retry_after },
            "The client's address got `--auth-failure-limit` 401s within `--auth-failure-window`; \
             its requests are refused, whatever their token, until the window ends.",
        ),
        (
            ApiError::ServerBusy { retry_after },
            "The server already runs as many exports as it may at once (`--max-exports`).",
        ),
        (
            ApiError::IdentityProviderUnavailable { detail: String::new(), retry_after },
            "The identity provider is down, slow or answers nonsense; a token is never accepted unchecked.",
        ),
        (
            ApiError::Engine(Engine::Storage { path: None, message: String::new() }),
            "A file of the requested range cannot be read; retry, or pass `skip_unavailable_shards=true`.",
        ),
        (
            ApiError::Engine(Engine::CursorConflict {
                date: chrono::NaiveDate::from_ymd_opt(2026, 11, 3).expect("a valid date"),
                restart: chrono::NaiveDate::from_ymd_opt(2026, 11, 3).expect("a valid date"),
                what: "objects the chain delivered are gone (1 deleted or replaced, as compaction or \
                       retention do)"
                    .into(),
            }),
            "A cursor chain cannot go on exactly once: an object it delivered was deleted or replaced, or \
             one appeared behind its cursor; the message names the date folder and the date to start a \
             new chain from.",
        ),
        (
            ApiError::Engine(Engine::ResourcesExhausted(String::new())),
            "The engine's memory pool (`--memory-limit`) is used up.",
        ),
        (
            ApiError::FirstByteTimeout { limit: Duration::from_secs(60) },
            "The export produced nothing within `--first-byte-timeout`.",
        ),
        (ApiError::Internal(String::new()), "A bug; the details are only in the server's log."),
        (
            ApiError::BadRequest("an HTTP/1.1 request needs exactly one valid Host header"),
            "The request itself is malformed: an HTTP/1.1 request without exactly one valid Host.",
        ),
        (
            ApiError::TooLargeToPrepare { max_bytes: 1 << 30 },
            "A prepared export grew beyond the server's maximum (`--prepared-max-size`); the message \
             ends with `Try to use more parts.`: split the export with `parts_count` and `part_number`.",
        ),
        (
            ApiError::Spool(SpoolError::Full { needed: 1 << 20, retry_after }),
            "The spool of prepared exports is full (`--spool-max-size`) with exports still being prepared.",
        ),
        (
            ApiError::Spool(SpoolError::Io {
                action: "write",
                source: std::io::ErrorKind::StorageFull.into(),
            }),
            "The spool of prepared exports cannot be written or read (a full disk, a failing bucket).",
        ),
        (
            ApiError::RangeNotSatisfiable { length: 1000 },
            "A `Range` that starts beyond the end of a prepared export; `Content-Range` gives its length.",
        ),
    ];
    // Every kind of error must have an example: a new variant fails to compile here.
    for (error, _) in &examples {
        match error {
            ApiError::InvalidParameter(_)
            | ApiError::BadRequest(_)
            | ApiError::Unauthenticated(_)
            | ApiError::InsufficientScope { .. }
            | ApiError::ApplicationDenied { .. }
            | ApiError::FieldPolicyUnavailable(_)
            | ApiError::NotFound
            | ApiError::ApplicationNotFound { .. }
            | ApiError::MethodNotAllowed
            | ApiError::UriTooLong { .. }
            | ApiError::HeadersTooLarge { .. }
            | ApiError::TooManyExports { .. }
            | ApiError::TooManyFailedAuthentications { .. }
            | ApiError::ServerBusy { .. }
            | ApiError::IdentityProviderUnavailable { .. }
            | ApiError::FirstByteTimeout { .. }
            | ApiError::TooLargeToPrepare { .. }
            | ApiError::Spool(
                SpoolError::Full { .. }
                | SpoolError::Store { .. }
                | SpoolError::Io { .. }
                | SpoolError::Gzip(_)
                | SpoolError::Manifest(_),
            )
            | ApiError::RangeNotSatisfiable { .. }
            | ApiError::Internal(_) => {}
            ApiError::Engine(
                Engine::InvalidRequest(_)
                | Engine::Storage { .. }
                | Engine::CursorConflict { .. }
                | Engine::ResourcesExhausted(_)
                | Engine::Config { .. }
                | Engine::Internal(_),
            ) => {}
        }
    }
    examples
}

/// An operation with its tag, id, texts and references to the error answers of `statuses`.
pub(super) fn operation(
    tag: &str,
    id: &str,
    summary: &str,
    description: &str,
    statuses: &[&str],
) -> OperationBuilder {
    let mut builder = OperationBuilder::new()
        .tag(tag)
        .operation_id(Some(id))
        .summary(Some(summary))
        .description(Some(description));
    for status in statuses {
        let code = status.parse::<u16>().ok().and_then(|c| StatusCode::from_u16(c).ok());
        if let Some(code) = code {
            builder = builder.response(*status, Ref::from_response_name(component_name(code)));
        }
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_status_has_an_error_answer() {
        let names: Vec<String> = error_responses().into_iter().map(|(s, _)| component_name(s)).collect();
        assert_eq!(
            names,
            [
                "BadRequest",
                "Unauthorized",
                "Forbidden",
                "NotFound",
                "MethodNotAllowed",
                "Conflict",
                "URITooLong",
                "RangeNotSatisfiable",
                "TooManyRequests",
                "RequestHeaderFieldsTooLarge",
                "InternalServerError",
                "ServiceUnavailable"
            ]
        );
    }
}
