//! What the parts of the document share: the operator settings it describes, and small
//! schema and header builders.

use logs_core::{ColumnSource, Field, FieldAliases, FieldPolicy, FieldType, Treatment};
use logs_format::JsonIntegers;
use utoipa::openapi::RefOr;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

/// The operator settings the document describes, and the caller's field policy. `Default`
/// gives the document of a service without aliases that writes JSON integers as strings, for
/// a caller without a policy: the checked-in `docs/openapi.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentSettings {
    pub aliases: FieldAliases,
    pub json_integers: JsonIntegers,
    /// Denied fields are left out; the others are described as this policy shows them.
    pub policy: FieldPolicy,
}

impl DocumentSettings {
    /// The fields the caller may request and filter on, in the order of spec §2.1.
    pub(super) fn fields(&self) -> impl Iterator<Item = Field> + '_ {
        Field::all().filter(|f| self.policy.treatment(*f) != Treatment::Deny)
    }

    /// The aliases and absent fields, without the aliases of denied fields.
    pub(super) fn aliases(&self) -> impl Iterator<Item = (&str, ColumnSource)> + '_ {
        self.aliases.iter().filter(|(_, source)| match source {
            ColumnSource::Field(field) => self.policy.treatment(*field) != Treatment::Deny,
            ColumnSource::Absent(_) => true,
        })
    }

    /// The type of a column's values as the caller gets them: a pseudonym is a string.
    pub(super) fn output_type(&self, source: ColumnSource) -> FieldType {
        match source {
            ColumnSource::Field(field) if self.policy.treatment(field) == Treatment::Pseudonymise => {
                FieldType::String
            }
            other => other.field_type(),
        }
    }

    /// What the caller's policy does to `field`, as a sentence to append to its description.
    pub(super) fn treatment_note(&self, field: Field) -> String {
        let policy = &self.policy;
        match policy.treatment(field) {
            Treatment::Allow | Treatment::Deny => String::new(),
            Treatment::Pseudonymise => {
                " Your field policy pseudonymises it: 32 lowercase hexadecimal digits (a \
                keyed HMAC-SHA-256); a filter on it takes the pseudonym."
                    .to_owned()
            }
            Treatment::Truncate => format!(
                " Your field policy truncates it to the network: IPv4 to /{}, IPv6 to /{}.",
                policy.ipv4_prefix(),
                policy.ipv6_prefix()
            ),
            Treatment::Coarsen => {
                format!(" Your field policy rounds it down to the {}.", policy.coarsening().name())
            }
            Treatment::Scrub => {
                " Your field policy scrubs it: e-mail addresses, phone numbers, IP addresses, \
                tokens and card numbers are replaced by placeholders."
                    .to_owned()
            }
        }
    }
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
