//! The OpenAPI 3.1 document of the public API, generated from the code with `utoipa`, and
//! served at `GET /openapi.json` (behind a token, like every route but `/healthz`).
//!
//! What the document says is taken from the code wherever the code holds it:
//! - the field filters and the values of `fields` come from the engine's field table
//!   ([`logs_core::Field`]), with their types;
//! - the error answers come from [`ApiError::problem`], the one `match` that maps errors to
//!   statuses: one example of every kind of error (a `match` in `openapi/errors.rs` makes the
//!   compiler ask for a new one when a kind is added) gives each status its `error_type`s and
//!   headers (`WWW-Authenticate`, `Retry-After`);
//! - the management answers' schemas are derived from [`crate::management::ApplicationList`]
//!   and [`crate::management::ApplicationAnswer`].
//!
//! The paths are built with utoipa's builders rather than `#[utoipa::path]` on the handlers:
//! one handler serves both export routes, and the parameters and error answers are computed
//! from the tables above, which attribute macros cannot iterate.
//!
//! What the document says of the export also depends on two operator settings, given as
//! [`DocumentSettings`]: the field aliases (extra names for `fields` and the filters) and how
//! JSON writes integers. `GET /openapi.json` describes the running service's settings.
//!
//! The checked-in copy is `docs/openapi.json`, the document of the default settings; a test
//! fails when it differs from [`document_json`] (`UPDATE_OPENAPI=1 cargo test -p logs-server
//! --test openapi` rewrites it).

mod errors;
mod export;
mod formats;
mod management;
mod parts;

use errors::{component_name, error_body_schema, error_responses, error_type_schema, operation};
use export::{export_parameters, export_schema, record_schema};
use formats::{export_body, typed_record_schema};
use logs_format::Format;
use management::{application_operation, applications_operation};
pub use parts::DocumentSettings;
use parts::{header_of, integer, request_id_header};

use axum::Extension;
use axum::extract::State;
use logs_core::FieldPolicy;

use crate::auth::Caller;
use axum::response::Response;
use serde_json::Value;
use utoipa::openapi::header::Header;
use utoipa::openapi::path::{HttpMethod, Operation, PathItem};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement, SecurityScheme};
use utoipa::openapi::server::ServerBuilder;
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, LicenseBuilder, OpenApi, OpenApiBuilder, PathsBuilder,
    Ref,
};

use crate::applications::{Application, Permission};
use crate::auth::READ_SCOPE;
use crate::management::{ApplicationAnswer, ApplicationList};
use crate::state::AppState;

/// The route of the document.
pub const OPENAPI_PATH: &str = "/openapi.json";

/// The name of the security scheme in the document.
pub const SECURITY_SCHEME: &str = "OAuth";

const APPLICATIONS: &str = "/management/v1/applications";
const APPLICATION: &str = "/management/v1/application/{id}";
const HEALTHZ: &str = "/healthz";

/// Headers that a response may leave out, by response (component name or status); every
/// other documented response header is `required`.
const OPTIONAL_HEADERS: [(&str, &str); 13] = [
    ("Forbidden", "WWW-Authenticate"),
    ("ServiceUnavailable", "Retry-After"),
    ("200", "Content-Encoding"),
    // A streamed export has no length or validator; a prepared one has them.
    ("200", "Content-Length"),
    ("200", "ETag"),
    ("200", "Accept-Ranges"),
    // Only a cursor chain's call has one.
    ("200", "Logs-Cursor"),
    ("200", "Logs-Field-Policy"),
    ("206", "Logs-Field-Policy"),
    ("202", "Preference-Applied"),
    ("206", "Content-Encoding"),
    ("304", "Content-Encoding"),
    ("304", "Accept-Ranges"),
];

/// The handler of `GET /openapi.json`: the document of this service's settings.
pub async fn serve_document(State(state): State<AppState>, Extension(caller): Extension<Caller>) -> Response {
    // The caller's own document: without the fields its policy denies, the others as it sees
    // them. A policy that cannot be resolved shows every field as denied: none.
    let policy = match state.privacy_of(&caller.principal) {
        Ok(privacy) => privacy.policy().clone(),
        Err(_) => FieldPolicy::deny_all(),
    };
    let settings = DocumentSettings {
        aliases: state.engine().policy().aliases.clone(),
        json_integers: state.settings().json_integers,
        policy,
    };
    let document = document_json(&settings);
    crate::json::json_response(document)
}

/// The document as pretty JSON with a final newline, as checked in at `docs/openapi.json`
/// (with the default settings).
pub fn document_json(settings: &DocumentSettings) -> String {
    let mut text = serde_json::to_string_pretty(&document(settings)).unwrap_or_default();
    text.push('\n');
    text
}

/// The document as JSON: `api_doc`'s with `required: true` on the response headers that
/// are always sent (utoipa's header object has no `required`).
pub fn document(settings: &DocumentSettings) -> Value {
    let mut doc = serde_json::to_value(api_doc(settings)).unwrap_or(Value::Null);
    if let Some(responses) = doc.pointer_mut("/components/responses").and_then(Value::as_object_mut) {
        for (name, response) in responses {
            mark_required_headers(name, response);
        }
    }
    if let Some(paths) = doc.pointer_mut("/paths").and_then(Value::as_object_mut) {
        let operations =
            paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut());
        for operation in operations {
            let responses = operation.get_mut("responses").and_then(Value::as_object_mut);
            for (status, response) in responses.into_iter().flatten() {
                mark_required_headers(status, response);
            }
        }
    }
    doc
}

fn mark_required_headers(response_name: &str, response: &mut Value) {
    let headers = response.get_mut("headers").and_then(Value::as_object_mut);
    for (name, header) in headers.into_iter().flatten() {
        let optional = OPTIONAL_HEADERS.contains(&(response_name, name.as_str()));
        if let Some(header) = header.as_object_mut() {
            header.insert("required".into(), Value::Bool(!optional));
        }
    }
}

/// The document as utoipa's model.
pub fn api_doc(settings: &DocumentSettings) -> OpenApi {
    let security = SecurityRequirement::new(SECURITY_SCHEME, Vec::<String>::new());
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("logs-export")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(API_DESCRIPTION))
                .license(Some(LicenseBuilder::new().name("Apache-2.0").build())),
        )
        .paths(
            export_paths(settings)
                .path(APPLICATIONS, PathItem::new(HttpMethod::Get, applications_operation()))
                .path(APPLICATION, PathItem::new(HttpMethod::Get, application_operation()))
                .path(HEALTHZ, PathItem::new(HttpMethod::Get, healthz_operation()))
                .path(OPENAPI_PATH, PathItem::new(HttpMethod::Get, openapi_operation())),
        )
        .servers(Some([ServerBuilder::new()
            .url("http://127.0.0.1:8080")
            .description(Some("`logs serve` with its default `--listen`"))
            .build()]))
        .components(Some(components(settings).build()))
        .security(Some([security]))
        .tags(Some([
            TagBuilder::new().name("export").description(Some("The error-log export (spec §4.1).")).build(),
            TagBuilder::new().name("management").description(Some("Management calls (spec §4.2).")).build(),
            TagBuilder::new().name("service").description(Some("Liveness and this document.")).build(),
        ]))
        .build()
}

/// The export's paths, one per format: `/logs/v1/export/errors.<format>`.
fn export_paths(settings: &DocumentSettings) -> PathsBuilder {
    let mut paths = PathsBuilder::new();
    for format in Format::ALL {
        let path = format!("/logs/v1/export/errors.{}", format.extension());
        paths = paths.path(path, PathItem::new(HttpMethod::Get, export_operation(format, settings)));
    }
    paths
}

const API_DESCRIPTION: &str = "Exports the error records (crashes and custom errors) of mobile \
applications as CSV, JSON, NDJSON, Parquet or Arrow: for one application, a date range, a chosen set of fields, equality \
filters and a row limit.\n\n\
**Authorization.** Every route but `/healthz` needs an OAuth access token in the header \
`Authorization: OAuth <token>` (`Bearer` is accepted too). Unknown paths need one as well: without \
a valid token every path answers 401, so that the service does not reveal which paths exist. A \
token in the query string (`oauth_token`, `access_token`, `token`) is refused with 401 \
`invalid_request` on every route, `/healthz` included. The export and the management calls need \
the scope `service:read`; this document needs a valid token and no scope.\n\n\
**Errors.** Every error answer has the JSON body `ErrorBody`; `location` names the parameter at \
fault (a query parameter, or the path's `id`), when there is one. 5xx messages say little; the \
details are in the server's log under the response's `x-request-id`. The order of checks: size \
limits (414, 431) and the `Host` header (400 `bad_request`), the failed-authentication limit of \
the client's address (429 `too_many_failed_authentications`), the token (401), routing (404, 405), \
scope (403), the parameters (400), the application (403, then 404 for one that does not exist), \
the limits (429, 503), the data (503, 500). Another method than GET or HEAD on a route answers \
405 (`MethodNotAllowed`, with `Allow`); an unknown path 404 (`NotFound`). HEAD is answered like \
GET without the body.\n\n\
**Every response** has `x-request-id` (the client's, if it sent a plain one of at most 64 \
characters, else a new one), `X-Content-Type-Options: nosniff` and `Cache-Control: no-store`. \
Every JSON answer, errors included, is `application/json; charset=utf-8`. \
Responses but Parquet exports are gzipped when `Accept-Encoding` allows gzip, and sent without content coding \
otherwise, also when the header refuses that too (`identity;q=0`, `*;q=0`): the service never \
answers 406 (RFC 9110 §12.5.3).";

fn export_operation(format: Format, settings: &DocumentSettings) -> Operation {
    let (id, summary, media, body) = export_body(format);
    let extension = format.extension();
    let partial = ResponseBuilder::new()
        .description(
            "Part of a prepared export, for a `Range` of one range (`bytes=first-last`, `first-`, \
             `-suffix`): resumes a broken download byte for byte. Ranges count bytes of the copy \
             sent: the gzip copy when `Content-Encoding` is `gzip`.",
        )
        .content(media, ContentBuilder::new().schema(Some(body.clone())).build())
        .header(
            "Content-Range",
            header_of(
                ObjectBuilder::new().schema_type(Type::String).pattern(Some("^bytes [0-9]+-[0-9]+/[0-9]+$")),
                "`bytes first-last/length`.",
            ),
        )
        .header("Content-Length", header_of(integer(Some(0), None), "The bytes of the range."))
        .header("Logs-Field-Policy", field_policy_header())
        .header("ETag", etag_header())
        .header("Accept-Ranges", accept_ranges_header())
        .header("Content-Encoding", content_encoding_header())
        .header("x-request-id", request_id_header())
        .build();
    let accepted = ResponseBuilder::new()
        .description(
            "The export is being prepared (with `Prefer: respond-async`, or every export when the \
             server prepares them all): repeat the same request after `Retry-After` seconds until it \
             answers 200 with the file. Repeats by any caller allowed to read the application join the \
             same job. A job that fails answers the next repeat with its error, once.",
        )
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Preparing"))).build(),
        )
        .header("Retry-After", header_of(integer(Some(1u32), None), "Seconds to wait before repeating."))
        .header(
            "Preference-Applied",
            header_of(enum_string("respond-async"), "When the request asked `Prefer: respond-async`."),
        )
        .header("x-request-id", request_id_header())
        .build();
    let not_modified = ResponseBuilder::new()
        .description("The prepared export that `If-None-Match` names is still the current one.")
        .header("ETag", etag_header())
        .header("Accept-Ranges", accept_ranges_header())
        .header("Content-Encoding", content_encoding_header())
        .header("x-request-id", request_id_header())
        .build();
    let ok = ResponseBuilder::new()
        .description(
            "The export, streamed in chunks (no `Content-Length`). The status is sent once the query has \
             produced its first rows (or ended), so every failure before that gets an error status; a \
             failure after it aborts the connection without the final chunk, so that a short export \
             never looks complete. With `use_utf8_bom=true` a CSV body starts with EF BB BF; a JSON \
             body never does. Rows come in no guaranteed order. A prepared export (see 202) is sent \
             whole instead, with `Content-Length`, `ETag` and `Accept-Ranges`.",
        )
        .content(media, ContentBuilder::new().schema(Some(body)).build())
        .header(
            "Content-Disposition",
            header_of(
                enum_string(&format!("attachment; filename=\"errors.{extension}\"")),
                "Always `attachment` with the file name of the format.",
            ),
        )
        .header(
            "X-Skipped-Shards",
            header_of(
                integer(Some(0), None),
                "How many unreadable files `skip_unavailable_shards=true` left out (0 normally).",
            ),
        )
        .header(
            "Logs-Cursor",
            header_of(
                ObjectBuilder::new().schema_type(Type::String),
                "For a call with `cursor`: the cursor that continues the chain after these records. \
                 Keep it only once the whole body has been read.",
            ),
        )
        .header("Logs-Field-Policy", field_policy_header())
        .header("Content-Encoding", content_encoding_header())
        .header(
            "Content-Length",
            header_of(integer(Some(0), None), "A prepared export's length; a streamed one has none."),
        )
        .header("ETag", etag_header())
        .header("Accept-Ranges", accept_ranges_header())
        .header("x-request-id", request_id_header())
        .build();
    let description = format!(
        "Returns the records of one application inside the date range, with the fields named in \
         `fields`, filtered by equality on any field given as a parameter. Needs the scope \
         `{READ_SCOPE}` and the application among the token's. Each parameter may be given at most \
         once; an unknown name is refused (400, with a suggestion for a typo)."
    );
    operation(
        "export",
        id,
        summary,
        &description,
        &["400", "401", "403", "409", "414", "416", "429", "431", "500", "503"],
    )
    .parameters(Some(export_parameters(settings)))
    .response("200", ok)
    .response("202", accepted)
    .response("206", partial)
    .response("304", not_modified)
    .build()
}

fn healthz_operation() -> Operation {
    let ok = ResponseBuilder::new()
        .description("The process answers. Says nothing about the data.")
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Health"))).build(),
        )
        .header("x-request-id", request_id_header())
        .build();
    operation(
        "service",
        "healthz",
        "Liveness",
        "Needs no token. A token in the query string is still refused (401 `invalid_request`).",
        &["400", "401", "414", "431"],
    )
    .response("200", ok)
    .security(SecurityRequirement::default())
    .build()
}

fn openapi_operation() -> Operation {
    let ok = ResponseBuilder::new()
        .description("This document.")
        .content(
            "application/json",
            ContentBuilder::new().schema(Some(ObjectBuilder::new().schema_type(Type::Object))).build(),
        )
        .header("x-request-id", request_id_header())
        .build();
    operation(
        "service",
        "openapi",
        "This OpenAPI document",
        "Needs a valid token (any scope): like every route but `/healthz`, so that clients without a \
         token learn nothing about the routes. The same document is in the repository as \
         `docs/openapi.json`.",
        &["400", "401", "414", "429", "431", "503"],
    )
    .response("200", ok)
    .build()
}

fn enum_string(value: &str) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some([value]))
}

fn field_policy_header() -> Header {
    header_of(
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some("^[A-Za-z0-9_]+=[a-z]+(, [A-Za-z0-9_]+=[a-z]+)*$")),
        "The columns of this export that the caller's field policy changed, as `name=treatment` \
         (`pseudonymise`, `truncate`, `coarsen`, `scrub`), in the order of `fields`. Absent when it \
         changed none.",
    )
}

fn content_encoding_header() -> Header {
    header_of(enum_string("gzip"), "`gzip` when the request's `Accept-Encoding` allows it.")
}

fn accept_ranges_header() -> Header {
    header_of(enum_string("bytes"), "`bytes`: a prepared export's ranges can be asked for.")
}

fn etag_header() -> Header {
    header_of(
        ObjectBuilder::new().schema_type(Type::String).pattern(Some("^\"[0-9a-f]{64}\"$")),
        "A prepared export's strong validator: the SHA-256 of the bytes of the copy sent.",
    )
}

fn components(settings: &DocumentSettings) -> ComponentsBuilder {
    let scheme = ApiKeyValue::with_description(
        "Authorization",
        "An OAuth access token: the header's value is `OAuth <token>` (the scheme word `Bearer` is \
         accepted too, in any case). The token is RFC 6750's `b64token`. Tokens in the query \
         string are refused.",
    );
    let mut builder = ComponentsBuilder::new()
        .security_scheme(SECURITY_SCHEME, SecurityScheme::ApiKey(ApiKey::Header(scheme)))
        .schema("ErrorBody", error_body_schema())
        .schema("ErrorType", error_type_schema())
        .schema("ErrorExport", export_schema())
        .schema("ErrorRecord", record_schema(settings))
        .schema("TypedRecord", typed_record_schema(settings))
        .schema("Health", health_schema())
        .schema("Preparing", preparing_schema())
        .schema_from::<ApplicationList>()
        .schema_from::<ApplicationAnswer>()
        .schema_from::<Application>()
        .schema_from::<Permission>();
    for (status, response) in error_responses() {
        builder = builder.response(component_name(status), response);
    }
    builder
}

fn preparing_schema() -> ObjectBuilder {
    let number = |description: &str| integer(Some(0), None).description(Some(description));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("How far a prepared export has got."))
        .property("status", enum_string("preparing"))
        .property("rows", number("Rows written so far."))
        .property("bytes", number("Bytes written so far (without compression)."))
        .property(
            "seconds",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0))
                .description(Some("Since the job started.")),
        )
        .required("status")
        .required("rows")
        .required("bytes")
        .required("seconds")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

fn health_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("status", enum_string("ok"))
        .required("status")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn headers_are_required_unless_listed() {
        let doc = document(&DocumentSettings::default());
        let header = |pointer: &str| doc.pointer(pointer).cloned().unwrap_or(Value::Null);
        assert_eq!(header("/components/responses/TooManyRequests/headers/Retry-After/required"), json!(true));
        assert_eq!(
            header("/components/responses/ServiceUnavailable/headers/Retry-After/required"),
            json!(false)
        );
        assert_eq!(
            header("/components/responses/Unauthorized/headers/WWW-Authenticate/required"),
            json!(true)
        );
        assert_eq!(header("/components/responses/Forbidden/headers/WWW-Authenticate/required"), json!(false));
        assert_eq!(header("/components/responses/MethodNotAllowed/headers/Allow/required"), json!(true));
        let ok = "/paths/~1logs~1v1~1export~1errors.csv/get/responses/200/headers";
        assert_eq!(header(&format!("{ok}/X-Skipped-Shards/required")), json!(true));
        assert_eq!(header(&format!("{ok}/Content-Encoding/required")), json!(false));
    }
}
