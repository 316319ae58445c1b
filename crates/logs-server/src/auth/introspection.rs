//! OAuth 2.0 token introspection (RFC 7662) at the external identity provider.
//!
//! For a token the tokens file does not know, the server POSTs `token=<token>` (form-encoded,
//! with HTTP Basic client credentials) to the provider's introspection endpoint and reads
//! `active`, `scope` (space-separated), `exp` and the applications claim of the answer.
//! Answers are cached by the token's SHA-256: active ones until `exp` (at most `cache_ttl`),
//! inactive ones for `negative_ttl`; the cache holds at most `cache_entries` tokens. A
//! provider that is down, slow (beyond `timeout`) or answers nonsense makes the request fail
//! with 503: a token is never accepted unchecked.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Deserialize;
use serde_json::Value;

use super::principal::{Applications, Principal, TokenHash};
use crate::config::{ConfigError, describe_toml_error};
use crate::error::{ApiError, AuthProblem};

/// How long a client should wait before retrying when the provider is unavailable (or, for
/// JWTs, none of its keys was ever fetched).
pub(crate) const PROVIDER_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The largest introspection answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// A secret string whose `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// The client credentials file: `client_id = "…"` and `client_secret = "…"` (TOML).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    pub client_id: String,
    pub client_secret: Secret,
}

impl ClientCredentials {
    pub fn from_file(path: &Path) -> Result<ClientCredentials, ConfigError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            client_id: String,
            client_secret: String,
        }
        const WHAT: &str = "client credentials file";
        let text = ConfigError::read(WHAT, path)?;
        let file: File = toml::from_str(&text).map_err(|e| ConfigError::InvalidFile {
            what: WHAT,
            path: path.to_owned(),
            message: describe_toml_error(&text, &e),
        })?;
        Ok(ClientCredentials { client_id: file.client_id, client_secret: Secret(file.client_secret) })
    }
}

/// Which applications a client (or subject) of the identity provider may read, for
/// providers whose answers carry no applications claim:
///
/// ```toml
/// [[grants]]
/// client_id = "reporting"     # or: sub = "user-42"
/// applications = [1001, 1002] # or "*" for all
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplicationGrants {
    grants: Vec<Grant>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Grant {
    client_id: Option<String>,
    sub: Option<String>,
    applications: GrantedApplications,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
enum GrantedApplications {
    Ids(Vec<i64>),
    Wildcard(String),
}

impl ApplicationGrants {
    pub fn parse(text: &str) -> Result<ApplicationGrants, ConfigError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            grants: Vec<Grant>,
        }
        let file: File = toml::from_str(text).map_err(|e| describe_toml_error(text, &e))?;
        for (i, grant) in file.grants.iter().enumerate() {
            if grant.client_id.is_none() && grant.sub.is_none() {
                return Err(format!("grant {}: give `client_id` or `sub`", i + 1).into());
            }
            if matches!(&grant.applications, GrantedApplications::Wildcard(w) if w != "*") {
                return Err(format!("grant {}: `applications` must be a list of ids or \"*\"", i + 1).into());
            }
        }
        Ok(ApplicationGrants { grants: file.grants })
    }

    pub fn from_file(path: &Path) -> Result<ApplicationGrants, ConfigError> {
        const WHAT: &str = "application grants file";
        let text = ConfigError::read(WHAT, path)?;
        ApplicationGrants::parse(&text).map_err(ConfigError::in_file(WHAT, path))
    }

    /// The union of the grants that match the answer's `client_id` or `sub`.
    pub(crate) fn applications(&self, client_id: Option<&str>, sub: Option<&str>) -> Applications {
        let mut ids = BTreeSet::new();
        for grant in &self.grants {
            let matches = (grant.client_id.is_some() && grant.client_id.as_deref() == client_id)
                || (grant.sub.is_some() && grant.sub.as_deref() == sub);
            if matches {
                match &grant.applications {
                    GrantedApplications::Wildcard(_) => return Applications::All,
                    GrantedApplications::Ids(list) => ids.extend(list),
                }
            }
        }
        Applications::Only(ids)
    }
}

/// Settings of the introspection client.
#[derive(Debug, Clone)]
pub struct IntrospectionConfig {
    /// The introspection endpoint; `https`, or `http` on a loopback address only.
    pub url: url::Url,
    pub credentials: ClientCredentials,
    /// The longest wait for an answer, connecting included.
    pub timeout: Duration,
    /// The most tokens cached.
    pub cache_entries: usize,
    /// The longest an active answer is cached (even when `exp` is later).
    pub cache_ttl: Duration,
    /// How long an inactive answer is cached.
    pub negative_ttl: Duration,
    /// The answer's member listing the applications the token may read: a JSON array of
    /// integers (or of numeric strings), a string of ids separated by spaces or commas, or
    /// `"*"` for all.
    pub applications_claim: String,
    /// Used when the answer has no applications claim.
    pub grants: Option<ApplicationGrants>,
}

impl IntrospectionConfig {
    /// The defaults: 2 s timeout, 10 000 cached tokens, positive answers cached at most 5
    /// minutes, negative ones 10 seconds, claim `applications`, no grants file.
    pub fn new(url: url::Url, credentials: ClientCredentials) -> IntrospectionConfig {
        IntrospectionConfig {
            url,
            credentials,
            timeout: Duration::from_secs(2),
            cache_entries: 10_000,
            cache_ttl: Duration::from_secs(300),
            negative_ttl: Duration::from_secs(10),
            applications_claim: "applications".into(),
            grants: None,
        }
    }
}

/// The introspection client and its cache.
#[derive(Debug)]
pub struct Introspector {
    config: IntrospectionConfig,
    client: reqwest::Client,
    cache: Mutex<Cache>,
    counters: Counters,
}

/// Counts for the metrics.
#[derive(Debug, Default)]
pub struct Counters {
    pub active: AtomicU64,
    pub inactive: AtomicU64,
    pub errors: AtomicU64,
    pub cache_hits: AtomicU64,
}

impl Introspector {
    pub fn new(config: IntrospectionConfig) -> Result<Introspector, ConfigError> {
        check_provider_url("introspection URL", &config.url)?;
        let client = provider_client(config.timeout, "introspection")?;
        let cache = Mutex::new(Cache { entries: HashMap::new(), max: config.cache_entries });
        Ok(Introspector { config, client, cache, counters: Counters::default() })
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Tokens in the cache now.
    pub fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).entries.len()
    }

    pub(crate) async fn authenticate(
        &self,
        token: &str,
        hash: TokenHash,
    ) -> Result<Arc<Principal>, ApiError> {
        let cached = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&hash, Instant::now());
        if let Some(verdict) = cached {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return verdict.into_result();
        }
        let verdict = match self.ask(token).await {
            Ok(verdict) => verdict,
            Err(detail) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                return Err(ApiError::IdentityProviderUnavailable {
                    detail: format!("token introspection at {} failed: {detail}", self.config.url),
                    retry_after: PROVIDER_RETRY_AFTER,
                });
            }
        };
        let now = Instant::now();
        let until = match &verdict {
            Verdict::Active { until, .. } => *until,
            Verdict::Inactive(_) => now + self.config.negative_ttl,
        };
        if until > now {
            self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(hash, verdict.clone(), until, now);
        }
        verdict.into_result()
    }

    /// One introspection call; `Err` means the provider could not give a usable answer.
    async fn ask(&self, token: &str) -> Result<Verdict, String> {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let credentials = &self.config.credentials;
        let exchange = async {
            let mut response = self
                .client
                .post(self.config.url.clone())
                .basic_auth(&credentials.client_id, Some(&credentials.client_secret.0))
                .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(http::header::ACCEPT, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| describe_reqwest_error(&e))?;
            let status = response.status();
            if !status.is_success() {
                return Err(format!("the provider answered HTTP {status}"));
            }
            read_body(&mut response, MAX_ANSWER_BYTES).await
        };
        let answer = tokio::time::timeout(self.config.timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {} ms", self.config.timeout.as_millis()))??;
        let answer: Value =
            serde_json::from_slice(&answer).map_err(|e| format!("the answer is not JSON: {e}"))?;
        let verdict = self.read_answer(&answer, SystemTime::now())?;
        let counter = match verdict {
            Verdict::Active { .. } => &self.counters.active,
            Verdict::Inactive(_) => &self.counters.inactive,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(verdict)
    }

    fn read_answer(&self, answer: &Value, now: SystemTime) -> Result<Verdict, String> {
        let active = answer
            .get("active")
            .and_then(Value::as_bool)
            .ok_or_else(|| "the answer has no boolean `active` member".to_owned())?;
        if !active {
            return Ok(Verdict::Inactive(AuthProblem::Invalid));
        }
        let now_unix = now.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let mut ttl = self.config.cache_ttl;
        if let Some(exp) = answer.get("exp") {
            let exp = exp.as_f64().ok_or_else(|| "`exp` is not a number".to_owned())?;
            if exp <= now_unix {
                return Ok(Verdict::Inactive(AuthProblem::Expired));
            }
            ttl = ttl.min(Duration::from_secs_f64((exp - now_unix).min(1e9)));
        }
        let text = |name: &str| answer.get(name).and_then(Value::as_str);
        let scopes = text("scope").unwrap_or("").split_whitespace().map(str::to_owned).collect();
        let client_id = text("client_id");
        let sub = text("sub");
        let name = client_id.or(text("username")).or(sub).map_or("introspected token".into(), clean_name);
        let applications = match answer.get(&self.config.applications_claim) {
            Some(claim) => read_claim(claim).unwrap_or_else(|| {
                tracing::warn!(
                    claim = %self.config.applications_claim,
                    client = %name,
                    "the applications claim is not a list of ids; the token may read no application"
                );
                Applications::Only(BTreeSet::new())
            }),
            None => match &self.config.grants {
                Some(grants) => grants.applications(client_id, sub),
                None => Applications::Only(BTreeSet::new()),
            },
        };
        let principal = Arc::new(Principal { name, scopes, applications, ..Principal::default() });
        Ok(Verdict::Active { principal, until: Instant::now() + ttl })
    }
}

/// Refuses a URL of the identity provider that is neither https nor http on a loopback address.
pub(crate) fn check_provider_url(what: &str, url: &url::Url) -> Result<(), ConfigError> {
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(ConfigError::Invalid(format!(
            "the {what} must be https (http only on a loopback address), not `{url}`"
        ))),
    }
}

/// An HTTP client for the identity provider: `timeout` for connecting and for the whole
/// exchange, no redirects followed.
pub(crate) fn provider_client(timeout: Duration, what: &str) -> Result<reqwest::Client, ConfigError> {
    install_tls_provider();
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| ConfigError::Invalid(format!("cannot build the {what} client: {e}")))
}

/// A claim as a JSON array of integers or numeric strings, a string of ids separated by
/// spaces or commas, or `"*"`.
pub(crate) fn read_claim(claim: &Value) -> Option<Applications> {
    let id = |v: &Value| match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match claim {
        Value::String(s) if s.trim() == "*" => Some(Applications::All),
        Value::String(s) => s
            .split([' ', ','])
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()
            .map(Applications::Only),
        Value::Array(items) => items.iter().map(id).collect::<Option<_>>().map(Applications::Only),
        _ => None,
    }
}

pub(crate) fn clean_name(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// An answer's body, refused beyond `max` bytes.
pub(crate) async fn read_body(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| describe_reqwest_error(&e))? {
        if body.len() + chunk.len() > max {
            return Err(format!("the answer is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The error and its causes (reqwest's own message is terse), without the request body.
pub(crate) fn describe_reqwest_error(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[derive(Debug, Clone)]
enum Verdict {
    Active { principal: Arc<Principal>, until: Instant },
    Inactive(AuthProblem),
}

impl Verdict {
    fn into_result(self) -> Result<Arc<Principal>, ApiError> {
        match self {
            Verdict::Active { principal, .. } => Ok(principal),
            Verdict::Inactive(problem) => Err(ApiError::Unauthenticated(problem)),
        }
    }
}

/// Introspection answers by token hash, each until its own expiry.
#[derive(Debug)]
struct Cache {
    entries: HashMap<TokenHash, (Verdict, Instant)>,
    max: usize,
}

impl Cache {
    fn get(&mut self, hash: &TokenHash, now: Instant) -> Option<Verdict> {
        match self.entries.get(hash) {
            Some((verdict, until)) if *until > now => Some(verdict.clone()),
            Some(_) => {
                self.entries.remove(hash);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, hash: TokenHash, verdict: Verdict, until: Instant, now: Instant) {
        if self.max == 0 {
            return;
        }
        if self.entries.len() >= self.max && !self.entries.contains_key(&hash) {
            self.entries.retain(|_, (_, until)| *until > now);
            if self.entries.len() >= self.max
                && let Some(soonest) =
                    self.entries.iter().min_by_key(|(_, (_, until))| *until).map(|(h, _)| *h)
            {
                self.entries.remove(&soonest);
            }
        }
        self.entries.insert(hash, (verdict, until));
    }
}

/// Makes rustls use the ring crypto provider, unless the process chose one already. Called
/// by the introspection client; an embedder or test that builds its own reqwest client
/// before that must call it first.
pub fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn introspector(grants: Option<&str>) -> Introspector {
        let credentials = ClientCredentials { client_id: "logs".into(), client_secret: Secret("s".into()) };
        let mut config =
            IntrospectionConfig::new("http://127.0.0.1:1/introspect".parse().unwrap(), credentials);
        config.grants = grants.map(|g| ApplicationGrants::parse(g).unwrap());
        Introspector::new(config).unwrap()
    }

    fn read(i: &Introspector, answer: Value) -> Verdict {
        i.read_answer(&answer, SystemTime::now()).unwrap()
    }

    #[test]
    fn reads_active_answers() {
        let i = introspector(None);
        let exp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 60;
        let answer = json!({"active": true, "scope": "service:read other", "exp": exp,
                            "client_id": "reporting", "applications": [1001, "1002"]});
        let Verdict::Active { principal, until } = read(&i, answer) else { panic!() };
        assert_eq!(principal.name, "reporting");
        assert!(principal.has_scope("service:read") && principal.has_scope("other"));
        assert_eq!(principal.applications, Applications::Only([1001, 1002].into()));
        // Cached until `exp` (60 s away, before the 5 minutes of `cache_ttl`), not longer or shorter.
        assert!(until <= Instant::now() + Duration::from_secs(61));
        assert!(until >= Instant::now() + Duration::from_secs(58));
    }

    #[test]
    fn an_answer_is_cached_to_the_instant_of_exp_not_to_the_next_second() {
        let i = introspector(None);
        // 0.9 s into second 1 000 000 000, a token that expires at the next second.
        let now = UNIX_EPOCH + Duration::from_millis(1_000_000_000_900);
        let answer = json!({"active": true, "exp": 1_000_000_001});
        let Verdict::Active { until, .. } = i.read_answer(&answer, now).unwrap() else { panic!() };
        assert!(until <= Instant::now() + Duration::from_millis(150), "{:?}", until - Instant::now());
    }

    #[test]
    fn inactive_and_expired() {
        let i = introspector(None);
        assert!(matches!(read(&i, json!({"active": false})), Verdict::Inactive(AuthProblem::Invalid)));
        let expired = json!({"active": true, "exp": 1_000_000_000});
        assert!(matches!(read(&i, expired), Verdict::Inactive(AuthProblem::Expired)));
        assert!(i.read_answer(&json!({"scope": "x"}), SystemTime::now()).is_err());
    }

    #[test]
    fn applications_from_grants_or_nothing() {
        let grants = "[[grants]]\nclient_id = \"a\"\napplications = [1]\n\
                      [[grants]]\nsub = \"u\"\napplications = \"*\"";
        let i = introspector(Some(grants));
        let apps = |answer| match read(&i, answer) {
            Verdict::Active { principal, .. } => principal.applications.clone(),
            Verdict::Inactive(_) => panic!(),
        };
        assert_eq!(apps(json!({"active": true, "client_id": "a"})), Applications::Only([1].into()));
        assert_eq!(apps(json!({"active": true, "client_id": "b", "sub": "u"})), Applications::All);
        assert_eq!(apps(json!({"active": true, "client_id": "b"})), Applications::Only([].into()));
        assert_eq!(apps(json!({"active": true, "applications": "7, 8"})), Applications::Only([7, 8].into()));
        assert_eq!(apps(json!({"active": true, "applications": {"x": 1}})), Applications::Only([].into()));
    }

    #[test]
    fn refuses_plain_http_beyond_loopback() {
        let credentials = ClientCredentials { client_id: "c".into(), client_secret: Secret("s".into()) };
        let config = IntrospectionConfig::new("http://idp.example/introspect".parse().unwrap(), credentials);
        assert!(Introspector::new(config).unwrap_err().to_string().contains("https"));
        assert_eq!(format!("{:?}", Secret("hunter2".into())), "Secret(…)");
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut cache = Cache { entries: HashMap::new(), max: 2 };
        let now = Instant::now();
        let verdict = Verdict::Inactive(AuthProblem::Invalid);
        for (i, secs) in [(1u8, 30), (2, 10), (3, 20)] {
            cache.insert(TokenHash([i; 32]), verdict.clone(), now + Duration::from_secs(secs), now);
        }
        assert_eq!(cache.entries.len(), 2);
        assert!(cache.get(&TokenHash([2; 32]), now).is_none(), "the soonest to expire was evicted");
        assert!(cache.get(&TokenHash([1; 32]), now).is_some());
        assert!(cache.get(&TokenHash([1; 32]), now + Duration::from_secs(29)).is_some());
        assert!(
            cache.get(&TokenHash([1; 32]), now + Duration::from_secs(30)).is_none(),
            "gone at its expiry"
        );
    }
}
