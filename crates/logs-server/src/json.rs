//! JSON answers. Every JSON answer of the service, errors included, says
//! `Content-Type: application/json; charset=utf-8`; axum's `Json` leaves the charset out.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use serde::Serialize;

use crate::error::ApiError;

/// The `Content-Type` of every JSON answer.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// `value` as a JSON answer with [`JSON_CONTENT_TYPE`] (a value that cannot be written as JSON
/// is a bug: 500).
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<T: Serialize> IntoResponse for JsonBody<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(bytes) => json_response(bytes),
            Err(e) => ApiError::Internal(format!("cannot write the answer as JSON: {e}")).into_response(),
        }
    }
}

/// `body`, JSON text already, with [`JSON_CONTENT_TYPE`].
pub fn json_response(body: impl Into<axum::body::Body>) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_CONTENT_TYPE));
    response
}
