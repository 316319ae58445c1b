//! The OpenID provider of the tests that take JWT access tokens (tests/oidc.rs and
//! tests/auth_matrix.rs include this file): its clients and keys, tokens from its token
//! endpoint, and hostile tokens crafted by hand.
#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey};
use logs_testkit::oidc::{Client, KeyPair, OidcProvider, ProviderConfig};
use serde_json::{Value, json};

pub const AUDIENCE: &str = "https://logs.example/api";
pub const OTHER_AUDIENCE: &str = "https://other.example/api";
pub const READ_WRITE: &str = "service:read service:write";
pub const EXPORT_1002: &str = "/logs/v1/export/errors.csv?application_id=1002&date_since=2026-10-01&\
                           date_until=2026-10-07&fields=error_id&limit=5";

/// The clients of the provider: each signing algorithm, each kind of grant.
pub fn clients() -> Vec<Client> {
    let client = |id: &str, alg: &str, scope: &str, applications: Value| Client {
        client_id: id.into(),
        client_secret: format!("{id}-secret"),
        scope: scope.into(),
        applications,
        alg: alg.into(),
    };
    vec![
        client("rs256", "RS256", READ_WRITE, json!("*")),
        client("ps256", "PS256", READ_WRITE, json!("*")),
        client("es256", "ES256", READ_WRITE, json!("*")),
        client("eddsa", "EdDSA", READ_WRITE, json!("*")),
        client("app1001", "ES256", "service:read", json!([1001])),
        client("app1002", "ES256", READ_WRITE, json!([1002])),
        client("reader", "RS256", "service:read", json!("*")),
        client("writer", "ES256", "service:write", json!("*")),
    ]
}

pub fn keys() -> Vec<KeyPair> {
    [("RS256", "rsa-1"), ("PS256", "rsa-pss-1"), ("ES256", "ec-1"), ("EdDSA", "ed-1")]
        .map(|(alg, kid)| OidcProvider::genkey(alg, kid))
        .into()
}

pub fn provider_config(keys: &[KeyPair]) -> ProviderConfig {
    ProviderConfig::new(keys.to_vec(), clients(), AUDIENCE, OTHER_AUDIENCE)
}

/// A token from the provider's token endpoint (a blocking exchange, on a runtime thread that
/// lets the others go on).
pub async fn token(provider: &OidcProvider, client: &str, resource: Option<&str>, scope: &str) -> String {
    tokio::task::block_in_place(|| provider.token(client, resource, scope))
        .unwrap_or_else(|e| panic!("no token from the provider: {e}"))
}

/// The decoded header and claims of a JWT.
pub fn parts(token: &str) -> (Value, Value) {
    let mut parts = token.split('.').map(|p| serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()));
    (parts.next().unwrap().unwrap(), parts.next().unwrap().unwrap())
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// A token with this header and these claims, signed with `key` (`None`: unsigned).
pub fn craft(header: &Value, claims: &Value, key: Option<(&EncodingKey, Algorithm)>) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = match key {
        Some((key, alg)) => jsonwebtoken::crypto::sign(message.as_bytes(), key, alg).unwrap(),
        None => String::new(),
    };
    format!("{message}.{signature}")
}

pub fn encoding_key(pair: &KeyPair) -> EncodingKey {
    let pem = pair.private_pem.as_bytes();
    match pair.alg.as_str() {
        "RS256" | "PS256" => EncodingKey::from_rsa_pem(pem).unwrap(),
        "ES256" => EncodingKey::from_ec_pem(pem).unwrap(),
        "EdDSA" => EncodingKey::from_ed_pem(pem).unwrap(),
        other => panic!("no key type for {other}"),
    }
}

pub const EXPORT_1001: &str = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&\
                           date_until=2026-10-07&fields=error_id&limit=5";
