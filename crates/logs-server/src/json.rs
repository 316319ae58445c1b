//! JSON answers. Every JSON answer of the service, errors included, says
//! `Content-Type: application/json; charset=utf-8`; axum's `Json` leaves the charset out.

use axum::response::Response;
use http::{HeaderValue, header};

/// The `Content-Type` of every JSON answer.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// `body`, JSON text already, with [`JSON_CONTENT_TYPE`].
pub fn json_response(body: impl Into<axum::body::Body>) -> Response {
    let mut response = Response::new(body.into());
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_CONTENT_TYPE));
    response
}
