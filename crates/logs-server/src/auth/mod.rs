//! Authorization: who is calling (the access token) and what they may do (scopes and
//! applications).
//!
//! The `require_token` middleware runs for every route of [`crate::app`] except those in
//! [`PUBLIC_ROUTES`]: it refuses tokens in the URL, reads `Authorization: OAuth <token>` (or
//! `Bearer <token>`), asks the token sources and puts the [`Caller`] into the request.
//! Handlers then take [`ReadAccess`] or [`WriteAccess`], which check the scope: a handler
//! cannot learn who calls without naming the scope it needs.
//!
//! Tokens are only ever handled as their SHA-256 ([`TokenHash`]): the tokens file stores
//! hashes, lookups go by hash, the introspection cache is keyed by hash. JWT access tokens of
//! an OpenID provider ([`jwt`]) are checked here with the provider's keys ([`oidc`]).

pub mod client;
pub mod failures;
pub mod introspection;
pub mod jwt;
pub mod oidc;
mod principal;
pub mod tokens_file;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderMap, header};

use crate::error::{ApiError, AuthProblem};
use crate::log::{ClientAddr, RequestLog};
use crate::metrics::{IntrospectionFigures, Metrics, OidcFigures, TokenSourceFigures, TokensFileFigures};

pub use client::{ClientGate, ForwardedHeader, TrustedProxies};
pub use failures::FailureLimit;
pub use introspection::{IntrospectionConfig, Introspector};
pub use jwt::JwtVerifier;
pub use oidc::{OidcConfig, ProviderKeys};
pub use principal::{Applications, MAX_TOKEN_BYTES, Principal, TokenHash, is_token_syntax};
pub use tokens_file::{TokenSet, TokenStore};

/// The scope the export and the applications list need.
pub const READ_SCOPE: &str = "service:read";
/// The scope anything that changes state needs.
pub const WRITE_SCOPE: &str = "service:write";

/// Routes (as written in the router) that need no token. Everything else does, including
/// routes added later and the fallback.
pub const PUBLIC_ROUTES: [&str; 1] = ["/healthz"];

pub(crate) use crate::log::TOKEN_PARAMETERS;

/// The authenticated caller of one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Arc<Principal>,
    /// Identifies the token (for per-token limits) without holding it.
    pub token: TokenHash,
}

impl Caller {
    fn require(self, scope: &'static str) -> Result<Caller, ApiError> {
        if self.principal.has_scope(scope) {
            Ok(self)
        } else {
            Err(ApiError::InsufficientScope { required: scope })
        }
    }
}

/// A caller whose token has [`READ_SCOPE`].
#[derive(Debug, Clone)]
pub struct ReadAccess(pub Caller);

/// A caller whose token has [`WRITE_SCOPE`].
#[derive(Debug, Clone)]
pub struct WriteAccess(pub Caller);

fn caller(parts: &Parts) -> Result<Caller, ApiError> {
    parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
        ApiError::Internal("no authenticated caller: the route is outside the authorization layer".into())
    })
}

impl<S: Send + Sync> FromRequestParts<S> for ReadAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<ReadAccess, ApiError> {
        Ok(ReadAccess(caller(parts)?.require(READ_SCOPE)?))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WriteAccess {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<WriteAccess, ApiError> {
        Ok(WriteAccess(caller(parts)?.require(WRITE_SCOPE)?))
    }
}

/// The token sources, asked in order: the tokens file (or the generated token), then the
/// identity provider — its keys for a JWT (when configured), introspection for other tokens.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: Option<Arc<TokenStore>>,
    introspection: Option<Arc<Introspector>>,
    jwt: Option<Arc<JwtVerifier>>,
}

impl Authenticator {
    /// What the token sources report, for the metrics.
    pub(crate) fn figures(&self) -> TokenSourceFigures {
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        TokenSourceFigures {
            tokens_file: self.tokens.as_ref().map(|store| {
                let (reloads_ok, reloads_failed) = store.reload_counts();
                TokensFileFigures { loaded: store.current().len() as u64, reloads_ok, reloads_failed }
            }),
            introspection: self.introspection.as_ref().map(|introspector| {
                let c = introspector.counters();
                IntrospectionFigures {
                    active: get(&c.active),
                    inactive: get(&c.inactive),
                    errors: get(&c.errors),
                    cache_hits: get(&c.cache_hits),
                    cache_entries: introspector.cached() as u64,
                }
            }),
            oidc: self.jwt.as_ref().map(|jwt| {
                let c = jwt.keys().counters();
                OidcFigures {
                    fetches_ok: get(&c.fetches_ok),
                    fetches_failed: get(&c.fetches_failed),
                    keys: jwt.keys().cached_keys() as u64,
                }
            }),
        }
    }

    pub fn new(tokens: Option<Arc<TokenStore>>, introspection: Option<Arc<Introspector>>) -> Authenticator {
        Authenticator { tokens, introspection, jwt: None }
    }

    /// Also accepts the JWT access tokens that `jwt` validates.
    pub fn with_jwt(self, jwt: Arc<JwtVerifier>) -> Authenticator {
        Authenticator { jwt: Some(jwt), ..self }
    }

    pub fn jwt(&self) -> Option<&Arc<JwtVerifier>> {
        self.jwt.as_ref()
    }

    pub fn tokens(&self) -> Option<&Arc<TokenStore>> {
        self.tokens.as_ref()
    }

    pub fn introspection(&self) -> Option<&Arc<Introspector>> {
        self.introspection.as_ref()
    }

    /// What `token` grants, or why it grants nothing.
    pub async fn authenticate(&self, token: &str) -> Result<Arc<Principal>, ApiError> {
        self.authenticate_hashed(token, TokenHash::of(token)).await
    }

    /// Whether the identity provider can check tokens (`None`: there is none): with JWTs,
    /// keys are cached (fetched now if none are); with introspection, a token that no one holds
    /// is introspected, and an answer either way counts.
    pub async fn identity_provider_answers(&self) -> Option<bool> {
        const PROBE: &str = "logs-export-readiness-probe";
        if self.introspection.is_none() && self.jwt.is_none() {
            return None;
        }
        if let Some(jwt) = &self.jwt {
            if jwt.keys().cached_keys() == 0 {
                jwt.keys().refresh().await;
            }
            if jwt.keys().cached_keys() == 0 {
                return Some(false);
            }
        }
        if let Some(introspector) = &self.introspection {
            let answered = introspector.authenticate(PROBE, TokenHash::of(PROBE)).await;
            return Some(!matches!(answered, Err(ApiError::IdentityProviderUnavailable { .. })));
        }
        Some(true)
    }

    async fn authenticate_hashed(&self, token: &str, hash: TokenHash) -> Result<Arc<Principal>, ApiError> {
        if let Some(principal) = self.tokens.as_ref().and_then(|store| store.lookup(&hash)) {
            return Ok(principal);
        }
        if let Some(jwt) = &self.jwt
            && jwt::looks_like_jwt(token)
        {
            return jwt.authenticate(token).await;
        }
        match &self.introspection {
            Some(introspector) => introspector.authenticate(token, hash).await,
            None => Err(ApiError::Unauthenticated(AuthProblem::Invalid)),
        }
    }
}

/// The authorization middleware (see the module documentation). Every 401 it answers counts
/// against the client's address ([`failures`]); an address over the limit gets 429 before
/// its token is looked at.
pub(crate) async fn require_token(
    State(auth): State<Authenticator>,
    State(metrics): State<Arc<Metrics>>,
    State(gate): State<Arc<ClientGate>>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = request.extensions().get::<ClientAddr>().map(|c| c.0);
    let refuse = |reason: &'static str, error: ApiError| {
        metrics.auth_failure(reason);
        if let Some(ip) = client
            && matches!(error, ApiError::Unauthenticated(_))
        {
            gate.failures().record(ip, Instant::now());
        }
        error.into_response()
    };
    if let Some(parameter) = token_in_query(request.uri().query()) {
        return refuse("token_in_query", ApiError::Unauthenticated(AuthProblem::InQuery(parameter)));
    }
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned());
    if route.is_some_and(|route| PUBLIC_ROUTES.contains(&route.as_str())) {
        return next.run(request).await;
    }
    if let Some(ip) = client
        && let Err(retry_after) = gate.failures().check(ip, Instant::now())
    {
        return refuse("too_many_failures", ApiError::TooManyFailedAuthentications { retry_after });
    }
    let token = match token_from_headers(request.headers()) {
        Ok(token) => token,
        Err(problem) => {
            let reason = match problem {
                AuthProblem::Missing => "missing",
                AuthProblem::Refused(reason) => reason,
                _ => "malformed",
            };
            return refuse(reason, ApiError::Unauthenticated(problem));
        }
    };
    let hash = TokenHash::of(&token);
    let principal = match auth.authenticate_hashed(&token, hash).await {
        Ok(principal) => principal,
        Err(e) => {
            let reason = match &e {
                ApiError::Unauthenticated(AuthProblem::Expired) => "expired",
                ApiError::Unauthenticated(AuthProblem::Refused(reason)) => reason,
                ApiError::Unauthenticated(_) => "invalid",
                _ => "provider_unavailable",
            };
            return refuse(reason, e);
        }
    };
    if let Some(log) = request.extensions().get::<Arc<RequestLog>>() {
        log.set_token_name(&principal.name);
    }
    let caller = Caller { principal, token: hash };
    drop(token);
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The name of the first query parameter that looks like an access token.
pub(crate) fn token_in_query(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .map(|(name, _)| name)
        .find(|name| TOKEN_PARAMETERS.iter().any(|t| t.eq_ignore_ascii_case(name)))
        .map(|name| name.into_owned())
}

/// The token of `Authorization: OAuth <token>` or `Bearer <token>` (schemes in any case).
pub(crate) fn token_from_headers(headers: &HeaderMap) -> Result<String, AuthProblem> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next().ok_or(AuthProblem::Missing)?;
    if values.next().is_some() {
        return Err(AuthProblem::Malformed);
    }
    let value = value.to_str().map_err(|_| AuthProblem::Malformed)?;
    let (scheme, token) = value.trim().split_once([' ', '\t']).ok_or(AuthProblem::Malformed)?;
    let token = token.trim_start_matches([' ', '\t']);
    if token.len() > MAX_TOKEN_BYTES {
        return Err(AuthProblem::Refused("oversized"));
    }
    let scheme_ok = scheme.eq_ignore_ascii_case("oauth") || scheme.eq_ignore_ascii_case("bearer");
    if !scheme_ok || !is_token_syntax(token) {
        return Err(AuthProblem::Malformed);
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn reads_oauth_and_bearer_in_any_case() {
        for v in ["OAuth abc", "oauth abc", "OAUTH   abc", "Bearer abc", "bearer abc=="] {
            assert!(token_from_headers(&headers(&[v])).unwrap().starts_with("abc"), "{v}");
        }
    }

    #[test]
    fn refuses_malformed_headers() {
        assert_eq!(token_from_headers(&headers(&[])), Err(AuthProblem::Missing));
        for v in ["abc", "Basic abc", "OAuth", "OAuth ", "OAuth a b", "OAuth ===", "OAuth a\"b"] {
            assert_eq!(token_from_headers(&headers(&[v])), Err(AuthProblem::Malformed), "{v}");
        }
        assert_eq!(token_from_headers(&headers(&["OAuth a", "OAuth b"])), Err(AuthProblem::Malformed));
    }

    #[test]
    fn finds_tokens_in_queries() {
        assert_eq!(token_in_query(Some("a=1&access_token=x")), Some("access_token".into()));
        assert_eq!(token_in_query(Some("OAuth_Token=x")), Some("OAuth_Token".into()));
        assert_eq!(token_in_query(Some("to%6Ben=x")), Some("token".into()));
        assert_eq!(token_in_query(Some("tokens=x&error_name=token")), None);
        assert_eq!(token_in_query(None), None);
    }

    #[test]
    fn principals() {
        let p = Principal {
            name: "a".into(),
            scopes: [READ_SCOPE.to_owned()].into(),
            applications: Applications::Only([1001].into()),
            ..Principal::default()
        };
        assert!(p.may_access(1001) && !p.may_access(1002));
        assert!(p.has_scope(READ_SCOPE) && !p.has_scope(WRITE_SCOPE));
        assert_eq!(format!("{:?}", TokenHash::of("secret")), "TokenHash(…)");
    }
}
