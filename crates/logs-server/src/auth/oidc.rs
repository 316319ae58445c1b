//! The OpenID provider's signing keys: found through discovery
//! (`<issuer>/.well-known/openid-configuration`), fetched from its `jwks_uri` and cached.
//!
//! When keys are fetched:
//! - once when the service starts (a provider that is down then is not fatal);
//! - in the background, after the answer's `Cache-Control: max-age` (at least
//!   `jwks_min_interval`, at most `jwks_max_age`) has passed, when a token needs the keys;
//! - at once when a token names a `kid` the set lacks, so that a rotation at the provider works
//!   without a restart.
//!
//! Fetches are one at a time and at most one per `jwks_min_interval`, so a flood of tokens
//! with random `kid`s cannot hammer the provider. A fetch that fails keeps the cached keys: the
//! provider's outage does not stop exports. Without any key ever fetched, a JWT is answered
//! 503, never accepted. A successful fetch replaces the whole set: a key the provider no longer
//! publishes is no longer accepted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use super::introspection::{
    ApplicationGrants, check_provider_url, describe_reqwest_error, provider_client, read_body,
};
use crate::config::ConfigError;

/// The largest discovery document or key set read.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// Settings of JWT access tokens from an OpenID provider (`logs serve --oidc-*`).
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The issuer, exactly as the provider writes it in `iss` (Auth0's ends with `/`,
    /// Keycloak's does not); https, or http on a loopback address.
    pub issuer: String,
    /// What `aud` must contain: this service's resource indicator or client id at the provider.
    pub audience: String,
    /// The claim listing the applications the token may read (as for introspection).
    pub applications_claim: String,
    /// Used when a token has no applications claim: by `client_id` (or `azp`) and `sub`.
    pub grants: Option<ApplicationGrants>,
    /// The claim naming the token's field policy in the field-policies file, if any.
    pub policy_claim: Option<String>,
    /// The accepted `typ` headers, compared without case and without an `application/`
    /// prefix. RFC 9068 says `at+jwt`; some providers write `JWT`.
    pub token_types: Vec<String>,
    /// Clock skew allowed on `exp`, `nbf` and `iat`.
    pub leeway: Duration,
    /// The longest the keys are used before they are fetched again.
    pub jwks_max_age: Duration,
    /// The shortest time between two fetches of the keys.
    pub jwks_min_interval: Duration,
    /// The longest wait for the provider, connecting included.
    pub timeout: Duration,
}

impl OidcConfig {
    /// The defaults: claim `applications`, no grants, `typ` `at+jwt`, 30 s leeway, keys
    /// fetched again after at most 5 minutes and at most every 10 seconds, 2 s timeout.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> OidcConfig {
        OidcConfig {
            issuer: issuer.into(),
            audience: audience.into(),
            applications_claim: "applications".into(),
            grants: None,
            policy_claim: None,
            token_types: vec!["at+jwt".into()],
            leeway: Duration::from_secs(30),
            jwks_max_age: Duration::from_secs(300),
            jwks_min_interval: Duration::from_secs(10),
            timeout: Duration::from_secs(2),
        }
    }

    /// The discovery document's URL.
    fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer.trim_end_matches('/'))
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let issuer: url::Url = self.issuer.parse().map_err(|e| {
            ConfigError::Invalid(format!("--oidc-issuer must be a URL, not `{}`: {e}", self.issuer))
        })?;
        check_provider_url("OpenID issuer (--oidc-issuer)", &issuer)?;
        let checks = [
            (!self.audience.trim().is_empty(), "--oidc-audience must not be empty"),
            (!self.token_types.is_empty(), "--oidc-token-types must name at least one type"),
            (!self.jwks_min_interval.is_zero(), "--oidc-jwks-min-interval must be above zero"),
            (
                self.jwks_max_age >= self.jwks_min_interval,
                "--oidc-jwks-max-age must be at least --oidc-jwks-min-interval",
            ),
        ];
        match checks.into_iter().find(|(ok, _)| !ok) {
            Some((_, message)) => Err(ConfigError::Invalid(message.to_owned())),
            None => Ok(()),
        }
    }
}

/// What discovery tells.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub jwks_uri: url::Url,
    /// The RFC 7662 endpoint, if the provider has one.
    pub introspection_endpoint: Option<url::Url>,
}

/// One public key of the set.
#[derive(Clone)]
pub(crate) struct Key {
    pub kid: Option<String>,
    /// The `alg` the key is restricted to, if the set says.
    pub alg: Option<Algorithm>,
    pub key: DecodingKey,
}

/// The keys of one fetch.
pub(crate) struct KeySet {
    pub keys: Vec<Key>,
    /// When the set should be fetched again.
    fresh_until: Instant,
}

impl KeySet {
    /// The keys that may have signed a token with this header.
    pub fn candidates(&self, kid: Option<&str>, alg: Algorithm) -> impl Iterator<Item = &Key> {
        self.keys.iter().filter(move |key| {
            let kid_matches = kid.is_none() || key.kid.as_deref() == kid;
            kid_matches && key.alg.is_none_or(|a| a == alg) && key.key.family() == alg.family()
        })
    }
}

/// Counts for the metrics.
#[derive(Debug, Default)]
pub struct KeyCounters {
    pub fetches_ok: AtomicU64,
    pub fetches_failed: AtomicU64,
}

/// The provider's keys, cached (see the module documentation).
pub struct ProviderKeys {
    config: OidcConfig,
    client: reqwest::Client,
    endpoints: Mutex<Option<Endpoints>>,
    keys: RwLock<Option<Arc<KeySet>>>,
    /// Held while fetching; holds when the last fetch began.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    /// A background fetch is under way.
    background: AtomicBool,
    counters: KeyCounters,
}

impl std::fmt::Debug for ProviderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderKeys").field("issuer", &self.config.issuer).finish_non_exhaustive()
    }
}

impl ProviderKeys {
    pub fn new(config: OidcConfig) -> Result<ProviderKeys, ConfigError> {
        config.validate()?;
        let client = provider_client(config.timeout, "OpenID provider")?;
        Ok(ProviderKeys {
            config,
            client,
            endpoints: Mutex::new(None),
            keys: RwLock::new(None),
            fetching: tokio::sync::Mutex::new(None),
            background: AtomicBool::new(false),
            counters: KeyCounters::default(),
        })
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    pub fn counters(&self) -> &KeyCounters {
        &self.counters
    }

    /// Keys in the cache now.
    pub fn cached_keys(&self) -> usize {
        self.current().map_or(0, |set| set.keys.len())
    }

    pub(crate) fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The endpoints of the discovery document, fetching it if not yet known.
    pub async fn endpoints(&self) -> Result<Endpoints, String> {
        if let Some(known) = self.endpoints.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(known);
        }
        let document = self.get_json(&self.config.discovery_url()).await?;
        let text = |name: &str| document.get(name).and_then(Value::as_str);
        // OpenID Connect Discovery §4.3: the document's issuer is the one asked about.
        if text("issuer") != Some(self.config.issuer.as_str()) {
            return Err(format!(
                "the discovery document names the issuer {:?}, not {:?} (--oidc-issuer must be written as the provider writes it)",
                text("issuer").unwrap_or(""),
                self.config.issuer
            ));
        }
        let url = |name: &str| -> Result<Option<url::Url>, String> {
            let Some(value) = text(name) else { return Ok(None) };
            let url: url::Url = value.parse().map_err(|e| format!("`{name}` is not a URL: {e}"))?;
            check_provider_url(name, &url).map_err(|e| e.to_string())?;
            Ok(Some(url))
        };
        let jwks_uri = url("jwks_uri")?.ok_or("the discovery document has no `jwks_uri`")?;
        let endpoints = Endpoints { jwks_uri, introspection_endpoint: url("introspection_endpoint")? };
        *self.endpoints.lock().unwrap_or_else(|e| e.into_inner()) = Some(endpoints.clone());
        Ok(endpoints)
    }

    /// The cached keys if they hold a candidate for the token; otherwise the keys after a
    /// fetch (when one is allowed now). `None`: no key was ever fetched.
    pub(crate) async fn keys_for(self: &Arc<Self>, kid: Option<&str>, alg: Algorithm) -> Option<Arc<KeySet>> {
        if let Some(set) = self.current() {
            if Instant::now() >= set.fresh_until && !self.background.swap(true, Ordering::AcqRel) {
                let keys = Arc::clone(self);
                tokio::spawn(async move {
                    keys.refresh().await;
                    keys.background.store(false, Ordering::Release);
                });
            }
            if set.candidates(kid, alg).next().is_some() {
                return Some(set);
            }
        }
        self.refresh().await;
        self.current()
    }

    /// Fetches the keys unless a fetch began less than `jwks_min_interval` ago (then the
    /// set is whatever that fetch left). A failure is logged and counted; the cached keys stay.
    pub async fn refresh(&self) {
        let mut last = self.fetching.lock().await;
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < self.config.jwks_min_interval) {
            return;
        }
        *last = Some(now);
        match self.fetch().await {
            Ok(set) => {
                self.counters.fetches_ok.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(keys = set.keys.len(), "fetched the OpenID provider's keys");
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(set));
            }
            Err(detail) => {
                self.counters.fetches_failed.fetch_add(1, Ordering::Relaxed);
                let cached = self.cached_keys();
                tracing::warn!(issuer = %self.config.issuer, cached_keys = cached, error = %detail,
                    "cannot fetch the OpenID provider's keys; the cached keys stay in use");
            }
        }
    }

    /// The key set at the discovered `jwks_uri`. A failure forgets the discovery document, so
    /// that the next fetch reads it again (a provider that moved its keys needs no restart).
    async fn fetch(&self) -> Result<KeySet, String> {
        let endpoints = self.endpoints().await?;
        let fetched = self.get(endpoints.jwks_uri.as_str()).await;
        let keys = fetched.as_ref().map_err(Clone::clone).and_then(|(document, _)| read_key_set(document));
        if keys.is_err() {
            *self.endpoints.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        let (keys, max_age) = (keys?, fetched?.1);
        let fresh_for = max_age
            .unwrap_or(self.config.jwks_max_age)
            .clamp(self.config.jwks_min_interval, self.config.jwks_max_age);
        Ok(KeySet { keys, fresh_until: Instant::now() + fresh_for })
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        Ok(self.get(url).await?.0)
    }

    /// A JSON document and its `Cache-Control: max-age`.
    async fn get(&self, url: &str) -> Result<(Value, Option<Duration>), String> {
        let exchange = async {
            let mut response = self
                .client
                .get(url)
                .header(http::header::ACCEPT, "application/json")
                .send()
                .await
                .map_err(|e| describe_reqwest_error(&e))?;
            let status = response.status();
            if !status.is_success() {
                return Err(format!("{url} answered HTTP {status}"));
            }
            let max_age = response
                .headers()
                .get(http::header::CACHE_CONTROL)
                .and_then(|v| v.to_str().ok())
                .and_then(max_age);
            let body = read_body(&mut response, MAX_ANSWER_BYTES).await.map_err(|e| format!("{url}: {e}"))?;
            let document =
                serde_json::from_slice(&body).map_err(|e| format!("{url} answered no JSON: {e}"))?;
            Ok((document, max_age))
        };
        tokio::time::timeout(self.config.timeout, exchange)
            .await
            .map_err(|_| format!("{url}: no answer within {} ms", self.config.timeout.as_millis()))?
    }
}

/// `max-age` of a `Cache-Control` value; `no-cache` and `no-store` count as 0.
fn max_age(value: &str) -> Option<Duration> {
    value.split(',').map(str::trim).find_map(|directive| {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-cache" || lower == "no-store" {
            return Some(Duration::ZERO);
        }
        let seconds = lower.strip_prefix("max-age=")?.trim_matches('"');
        seconds.parse().ok().map(Duration::from_secs)
    })
}

/// The signature keys of a JWK set. Keys for encryption, symmetric keys and keys of types this
/// service does not verify with are left out; a set with no usable key is an error.
fn read_key_set(document: &Value) -> Result<Vec<Key>, String> {
    let entries = document.get("keys").and_then(Value::as_array).ok_or("the key set has no `keys` array")?;
    let keys: Vec<Key> = entries
        .iter()
        .filter_map(|entry| serde_json::from_value::<Jwk>(entry.clone()).ok())
        .filter(|jwk| !matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature))
        .filter_map(|jwk| {
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            if key.family() == jsonwebtoken::AlgorithmFamily::Hmac {
                return None;
            }
            let alg = match jwk.common.key_algorithm {
                Some(alg) => Some(alg.to_string().parse::<Algorithm>().ok()?),
                None => None,
            };
            Some(Key { kid: jwk.common.key_id.clone(), alg, key })
        })
        .collect();
    if keys.is_empty() {
        return Err(format!(
            "the key set's {} keys hold no signature key this service can use",
            entries.len()
        ));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_max_age() {
        assert_eq!(max_age("public, max-age=600"), Some(Duration::from_secs(600)));
        assert_eq!(max_age("Max-Age=\"5\""), Some(Duration::from_secs(5)));
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=soon"), None);
    }

    #[test]
    fn keeps_only_signature_keys() {
        // An RSA signature key, an EC key for encryption, a symmetric key, an unknown type.
        let n = "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw";
        let set = json!({"keys": [
            {"kty": "RSA", "kid": "r", "alg": "RS256", "use": "sig", "n": n, "e": "AQAB"},
            {"kty": "EC", "kid": "e", "use": "enc", "crv": "P-256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
            {"kty": "XYZ", "kid": "x"},
        ]});
        let keys = read_key_set(&set).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].kid.as_deref(), Some("r"));
        assert_eq!(keys[0].alg, Some(Algorithm::RS256));
        let set = KeySet { keys, fresh_until: Instant::now() };
        assert_eq!(set.candidates(Some("r"), Algorithm::RS256).count(), 1);
        assert_eq!(set.candidates(None, Algorithm::RS256).count(), 1);
        assert_eq!(set.candidates(Some("r"), Algorithm::PS256).count(), 0, "the key is for RS256 only");
        assert_eq!(set.candidates(Some("r"), Algorithm::ES256).count(), 0);
        assert_eq!(set.candidates(Some("other"), Algorithm::RS256).count(), 0);
        assert!(read_key_set(&json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})).is_err());
        assert!(read_key_set(&json!({"no": []})).is_err());
    }

    #[test]
    fn validates_the_settings() {
        let ok = OidcConfig::new("https://idp.example/realms/r", "logs");
        assert!(ProviderKeys::new(ok.clone()).is_ok());
        let plain = OidcConfig::new("http://idp.example", "logs");
        assert!(ProviderKeys::new(plain).unwrap_err().to_string().contains("https"));
        assert!(ProviderKeys::new(OidcConfig::new("http://127.0.0.1:3000", "logs")).is_ok());
        assert!(ProviderKeys::new(OidcConfig { audience: " ".into(), ..ok.clone() }).is_err());
        assert!(ProviderKeys::new(OidcConfig { token_types: vec![], ..ok.clone() }).is_err());
        assert!(ProviderKeys::new(OidcConfig::new("not a url", "logs")).is_err());
        assert_eq!(ok.discovery_url(), "https://idp.example/realms/r/.well-known/openid-configuration");
        let auth0 = OidcConfig::new("https://tenant.auth0.com/", "logs");
        assert_eq!(auth0.discovery_url(), "https://tenant.auth0.com/.well-known/openid-configuration");
    }
}
