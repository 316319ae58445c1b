//! Who a token is: its hash, and what it grants (scopes, applications).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use logs_core::FieldPolicy;

use sha2::{Digest, Sha256};

/// The SHA-256 of an access token: the only form in which tokens are kept or compared.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

impl TokenHash {
    pub fn of(token: &str) -> TokenHash {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }
}

impl fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenHash(…)")
    }
}

/// Which applications a token may read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Applications {
    #[default]
    All,
    Only(BTreeSet<i64>),
}

/// What a token grants: a name for logs, scopes, applications, and what it may see of each
/// field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Principal {
    /// Shown in logs instead of the token.
    pub name: String,
    pub scopes: BTreeSet<String>,
    pub applications: Applications,
    /// The token's own field policy (a tokens-file entry's `fields`).
    pub fields: Option<Arc<FieldPolicy>>,
    /// The field policy a claim of the token names (`--oidc-policy-claim`).
    pub policy: Option<String>,
}

impl Principal {
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }

    pub fn may_access(&self, application_id: i64) -> bool {
        match &self.applications {
            Applications::All => true,
            Applications::Only(ids) => ids.contains(&application_id),
        }
    }
}

/// The longest token accepted, JWT or not (the `Authorization` header's limit is larger).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// RFC 6750's `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
pub fn is_token_syntax(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && token.len() <= MAX_TOKEN_BYTES
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}
