//! JWT access tokens (RFC 9068) checked here, with the OpenID provider's keys
//! ([`ProviderKeys`]): no call to the provider per token.
//!
//! The checks, in order; the first that fails refuses the token (401 `invalid_token`, the
//! reason only in the metrics):
//! 1. at most [`MAX_TOKEN_BYTES`](super::MAX_TOKEN_BYTES) (checked with the `Authorization` header);
//! 2. the header: base64url JSON; `alg` one of [`ALGORITHMS`] (never `none`, never HMAC: a
//!    token "signed" with the public key as an HMAC secret is refused here); no `jwk`, `jku`,
//!    `x5u` or `x5c` (a token cannot bring its own key), no `crit`; `typ` one of the configured
//!    types;
//! 3. a key of the provider's set with the header's `kid` (fetched again once when unknown),
//!    of the algorithm's family and, if the set says, for that algorithm;
//! 4. the signature;
//! 5. `iss` equal to the issuer, `aud` containing the audience, `exp` not passed and `nbf`
//!    and `iat` not in the future (each with the leeway);
//! 6. then what the token grants: scopes from `scope` (space-separated) or `scp` (a string or a
//!    list), applications from the configured claim or the grants file.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

use super::introspection::{PROVIDER_RETRY_AFTER, clean_name, read_claim};
use super::oidc::ProviderKeys;
use super::principal::{Applications, Principal};
use crate::error::{ApiError, AuthProblem};

/// The signature algorithms accepted: RSA, RSA-PSS, ECDSA and EdDSA.
pub const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Header members that would let a token name its own key.
const KEY_HEADERS: [&str; 4] = ["jwk", "jku", "x5u", "x5c"];

/// Whether `token` has the shape of a JWS in compact form: three base64url parts, the first
/// a JSON object (`eyJ` is the start of `{"`).
pub fn looks_like_jwt(token: &str) -> bool {
    let mut parts = token.split('.');
    let shaped = parts.next().is_some_and(|header| header.starts_with("eyJ"))
        && parts.next().is_some()
        && parts.next().is_some()
        && parts.next().is_none();
    shaped && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// JWT access tokens of one provider.
#[derive(Debug)]
pub struct JwtVerifier {
    keys: Arc<ProviderKeys>,
}

impl JwtVerifier {
    pub fn new(keys: Arc<ProviderKeys>) -> JwtVerifier {
        // The one backend this crate enables; explicit, in case another crate enables a second.
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
        JwtVerifier { keys }
    }

    pub fn keys(&self) -> &Arc<ProviderKeys> {
        &self.keys
    }

    /// What the token grants, or why it grants nothing.
    pub async fn authenticate(&self, token: &str) -> Result<Arc<Principal>, ApiError> {
        let config = self.keys.config();
        let (alg, kid) = read_header(token, &config.token_types).map_err(refused)?;
        let Some(set) = self.keys.keys_for(kid.as_deref(), alg).await else {
            return Err(ApiError::IdentityProviderUnavailable {
                detail: format!("no signing key of the OpenID provider {} was ever fetched", config.issuer),
                retry_after: PROVIDER_RETRY_AFTER,
            });
        };
        let mut validation = Validation::new(alg);
        validation.leeway = config.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_audience(&[&config.audience]);
        validation.set_issuer(&[&config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let mut outcome = Err("unknown_key");
        for key in set.candidates(kid.as_deref(), alg) {
            outcome = match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => Ok(data.claims),
                Err(e) if *e.kind() == ErrorKind::ExpiredSignature => {
                    return Err(ApiError::Unauthenticated(AuthProblem::Expired));
                }
                Err(e) => Err(reason(e.kind())),
            };
            if !matches!(outcome, Err("signature")) {
                break;
            }
        }
        let claims = outcome.map_err(refused)?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if claims.get("iat").and_then(Value::as_f64).is_some_and(|iat| iat > (now + validation.leeway) as f64)
        {
            return Err(refused("not_yet_valid"));
        }
        Ok(Arc::new(self.principal(&claims)))
    }

    fn principal(&self, claims: &Map<String, Value>) -> Principal {
        let config = self.keys.config();
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let scopes: BTreeSet<String> = match claims.get("scope").or_else(|| claims.get("scp")) {
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            _ => BTreeSet::new(),
        };
        let client_id = text("client_id").or(text("azp"));
        let sub = text("sub");
        let name = client_id.or(sub).map_or("JWT access token".into(), clean_name);
        let applications = match claims.get(&config.applications_claim) {
            Some(claim) => read_claim(claim).unwrap_or_else(|| {
                tracing::warn!(claim = %config.applications_claim, client = %name,
                    "the applications claim is not a list of ids; the token may read no application");
                Applications::Only(BTreeSet::new())
            }),
            None => match &config.grants {
                Some(grants) => grants.applications(client_id, sub),
                None => Applications::Only(BTreeSet::new()),
            },
        };
        // A policy claim that is there but not a name names no policy: the export is refused.
        let policy = config
            .policy_claim
            .as_ref()
            .and_then(|claim| claims.get(claim))
            .map(|value| value.as_str().map_or_else(String::new, str::to_owned));
        Principal { name, scopes, applications, fields: None, policy }
    }
}

fn refused(reason: &'static str) -> ApiError {
    ApiError::Unauthenticated(AuthProblem::Refused(reason))
}

/// The reason, for the metrics, of a failed `decode`.
fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidSignature => "signature",
        ErrorKind::InvalidIssuer => "issuer",
        ErrorKind::InvalidAudience => "audience",
        ErrorKind::ImmatureSignature => "not_yet_valid",
        ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => "claims",
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => "algorithm",
        ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidEddsaKey | ErrorKind::InvalidRsaKey(_) => {
            "unknown_key"
        }
        _ => "malformed",
    }
}

/// The header's algorithm and key id, once the header passes the checks of step 2.
fn read_header(token: &str, types: &[String]) -> Result<(Algorithm, Option<String>), &'static str> {
    let encoded = token.split('.').next().unwrap_or("");
    let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| "malformed")?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|_| "malformed")?;
    let alg = header.get("alg").and_then(Value::as_str).ok_or("malformed")?;
    let alg = alg.parse::<Algorithm>().ok().filter(|a| ALGORITHMS.contains(a)).ok_or("algorithm")?;
    if KEY_HEADERS.iter().any(|name| header.contains_key(*name)) {
        return Err("embedded_key");
    }
    if header.contains_key("crit") {
        return Err("critical_header");
    }
    let media_type = |t: &str| {
        let t = t.trim();
        let lower = t.to_ascii_lowercase();
        lower.strip_prefix("application/").map(str::to_owned).unwrap_or(lower)
    };
    let typ = header.get("typ").and_then(Value::as_str).map(media_type);
    if !typ.is_some_and(|typ| types.iter().any(|t| media_type(t) == typ)) {
        return Err("type");
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err("malformed"),
    };
    Ok((alg, kid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encode(header: Value) -> String {
        format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode(header.to_string()))
    }

    fn header(value: Value) -> Result<(Algorithm, Option<String>), &'static str> {
        read_header(&encode(value), &["at+jwt".to_owned()])
    }

    #[test]
    fn recognises_jwts() {
        assert!(looks_like_jwt(&encode(json!({"alg": "RS256"}))));
        assert!(!looks_like_jwt("abc.def.ghi"));
        assert!(!looks_like_jwt("eyJhbGc.def"));
        assert!(!looks_like_jwt("eyJhbGc.d.e.f"));
        assert!(!looks_like_jwt("eyJhbGc.d+/.e"));
    }

    #[test]
    fn reads_acceptable_headers() {
        let ok = header(json!({"alg": "ES256", "typ": "at+jwt", "kid": "k1"}));
        assert_eq!(ok, Ok((Algorithm::ES256, Some("k1".into()))));
        assert_eq!(
            header(json!({"alg": "EdDSA", "typ": "application/AT+JWT"})),
            Ok((Algorithm::EdDSA, None))
        );
        let jwt =
            read_header(&encode(json!({"alg": "PS256", "typ": "JWT"})), &["at+jwt".into(), "JWT".into()]);
        assert_eq!(jwt, Ok((Algorithm::PS256, None)));
    }

    #[test]
    fn refuses_hostile_headers() {
        for alg in ["none", "None", "HS256", "HS512", "RS1", ""] {
            assert_eq!(header(json!({"alg": alg, "typ": "at+jwt"})), Err("algorithm"), "{alg}");
        }
        for member in KEY_HEADERS {
            let mut h = json!({"alg": "RS256", "typ": "at+jwt"});
            h[member] = json!("https://attacker.example/key");
            assert_eq!(header(h), Err("embedded_key"), "{member}");
        }
        assert_eq!(header(json!({"alg": "RS256", "typ": "at+jwt", "crit": ["exp"]})), Err("critical_header"));
        assert_eq!(header(json!({"alg": "RS256", "typ": "JWT"})), Err("type"));
        assert_eq!(header(json!({"alg": "RS256"})), Err("type"));
        assert_eq!(header(json!({"alg": "RS256", "typ": "at+jwt", "kid": 7})), Err("malformed"));
        assert_eq!(header(json!({"typ": "at+jwt"})), Err("malformed"));
        assert_eq!(read_header("!!!.e30.c2ln", &["at+jwt".into()]), Err("malformed"));
        assert_eq!(read_header("WzFd.e30.c2ln", &["at+jwt".into()]), Err("malformed"), "a JSON array");
    }
}
