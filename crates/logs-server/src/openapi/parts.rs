//! What the parts of the document share: the operator settings it describes, and small
//! schema and header builders.

use logs_core::FieldAliases;
use logs_format::JsonIntegers;
use utoipa::openapi::RefOr;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// The operator settings the document describes. `Default` gives the document of a service
/// without aliases that writes JSON integers as strings: the checked-in `docs/openapi.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentSettings {
    pub aliases: FieldAliases,
    pub json_integers: JsonIntegers,
}

pub(super) fn integer<N: Into<utoipa::Number>>(minimum: Option<N>, maximum: Option<N>) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Integer).minimum(minimum).maximum(maximum)
}

pub(super) fn header_of(schema: impl Into<RefOr<Schema>>, description: &str) -> Header {
    HeaderBuilder::new().schema(schema).description(Some(description)).build()
}

pub(super) fn request_id_header() -> Header {
    header_of(
        ObjectBuilder::new().schema_type(Type::String).pattern(Some("^[A-Za-z0-9._-]{1,64}$")),
        "The request's id: the client's `x-request-id` if it is 1 to 64 letters, digits, `.`, `_` or \
         `-`, else a new random one. The server's log lines of the request carry it.",
    )
}
