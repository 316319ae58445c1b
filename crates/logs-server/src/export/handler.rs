//! `GET /logs/v1/export/errors.{csv|json}`: the export, streamed by the pipeline
//! ([`super::pipeline`]) — or, with a spool and a request that asks for it, prepared
//! ([`crate::prepared`]).
//!
//! The handler validates the query with the engine's parser, checks the caller's
//! applications, takes an export permit and starts the export; the response's body is the
//! export's chunks as they come (a `HEAD` gets the headers and the export is stopped).

use std::io;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri, header};
use logs_core::{ExportRequest, QueryPairs};
use logs_format::Format;

use super::headers::{FIELD_POLICY, LOGS_CURSOR, SKIPPED_SHARDS, content_disposition};
use crate::auth::ReadAccess;
use crate::error::ApiError;
use crate::log::RequestLog;
use crate::prepared::PrepareRequest;
use crate::server::WriteStall;
use crate::state::AppState;

/// The export's path prefix.
pub(crate) const EXPORT_PATH: &str = "/logs/v1/export/";

/// The handler.
pub(crate) async fn export_errors(
    State(state): State<AppState>,
    ReadAccess(caller): ReadAccess,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    log: Option<axum::Extension<Arc<RequestLog>>>,
    stall: Option<axum::Extension<WriteStall>>,
) -> Result<Response, ApiError> {
    // The router only sends `errors.<format>` here; anything else under the prefix is 404.
    let format = uri.path().strip_prefix(EXPORT_PATH).and_then(|name| name.strip_prefix("errors."));
    let Some(format) = format.and_then(|extension| extension.parse::<Format>().ok()) else {
        return Err(ApiError::NotFound);
    };
    let pairs = QueryPairs::parse(uri.query().unwrap_or(""))?;
    let privacy = state.privacy_of(&caller.principal)?;
    let request = ExportRequest::from_pairs_under(&pairs, state.engine().policy(), &privacy)?;
    let changed = request.changed_columns();
    let policy_header = (!changed.is_empty())
        .then(|| HeaderValue::from_str(&changed.join(", ")))
        .transpose()
        .map_err(|e| ApiError::Internal(format!("cannot write the field policy header: {e}")))?;
    if !caller.principal.may_access(request.application_id()) {
        return Err(ApiError::ApplicationDenied { application_id: request.application_id() });
    }
    if let Some(prepared) = state.prepared() {
        let asked = PrepareRequest {
            format,
            request: &request,
            token: &caller.token,
            headers: &headers,
            stall: stall.as_ref().map(|s| &s.0),
        };
        if let Some(mut response) =
            prepared.respond(state.runner(), state.settings().gzip_level, asked).await?
        {
            if let Some(value) = policy_header {
                response.headers_mut().insert(FIELD_POLICY, value);
            }
            return Ok(response);
        }
    }
    let permit = state.runner().acquire(caller.token)?;
    let started = state.runner().start(format, &request, permit, log.map(|l| l.0)).await?;
    let skipped = started.skipped;
    let cursor = started.cursor.clone();
    if method != Method::HEAD
        && let Some(stall) = &stall
    {
        // A reader that stops reading is waited for this long (the export spills meanwhile).
        stall.0.allow(state.settings().reader_idle_timeout);
    }
    let body = if method == Method::HEAD {
        // The headers only: the query is dropped, and its permit given back, before they go
        // (a body of unknown length, as the GET's, so that they are the GET's headers).
        started.stop().await;
        Body::from_stream(futures::stream::empty::<io::Result<Bytes>>())
    } else {
        Body::from_stream(started.chunks)
    };
    let mut response = Response::builder()
        .header(header::CONTENT_TYPE, format.content_type())
        .header(header::CONTENT_DISPOSITION, content_disposition(format))
        .header(SKIPPED_SHARDS, skipped);
    if let Some(cursor) = cursor {
        response = response.header(LOGS_CURSOR, cursor);
    }
    if let Some(value) = policy_header {
        response = response.header(FIELD_POLICY, value);
    }
    let response =
        response.body(body).map_err(|e| ApiError::Internal(format!("cannot build the response: {e}")))?;
    Ok(response)
}
