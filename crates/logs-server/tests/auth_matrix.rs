//! The authorization matrix: every route × every kind of credential → the expected status and
//! `error_type`, asserted cell by cell for GET and HEAD against the real server (tokens from a
//! tokens file and from an identity provider served by the test on loopback; then again with
//! JWT access tokens of a real OpenID provider). Then: no route
//! can skip the check — `PUBLIC_ROUTES` is exactly `/healthz`, every other path (real, made up,
//! or disguised) answers 401 without a token for every method, and a handler that names its
//! scope fails closed when it is mounted outside the authorization layer.
//!
//! To add a route: add a row to `MATRIX` (and its path to `PROTECTED` if it needs a token).

mod common;
#[path = "common/oidc.rs"]
mod oidc_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::response::IntoResponse;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode, header};
use jsonwebtoken::Algorithm;
use logs_core::EngineConfig;
use logs_server::auth::introspection::{ClientCredentials, Secret};
use logs_server::auth::{
    Authenticator, IntrospectionConfig, Introspector, JwtVerifier, OidcConfig, PUBLIC_ROUTES, ProviderKeys,
    ReadAccess, TokenSet, TokenStore,
};
use logs_server::{AppState, ServeOptions, Settings};
use logs_testkit::oidc::OidcProvider;
use serde_json::json;

/// Read and write on every application, from the tokens file.
const VALID: &str = "tok-mx-valid-5c1f0e2b9d7a4b3c";
/// Read and write on application 1002 only (the matrix exports 1001).
const OTHER_APP: &str = "tok-mx-app1002-8e4d2a6f1b3c";
/// Read and write on every application, from the identity provider.
const IDP_VALID: &str = "tok-mx-idp-valid-3a9e7c1d";
const IDP_EXPIRED: &str = "tok-mx-idp-expired-6b2f8d4e";
const IDP_REVOKED: &str = "tok-mx-idp-revoked-1c7a5e9b";
const UNKNOWN: &str = "tok-mx-nobody-issued-this-0f3e";

/// The kinds of credential, in the order of the matrix's columns.
#[derive(Debug, Clone, Copy)]
enum Credential {
    None,
    WrongScheme,
    Malformed,
    Unknown,
    Expired,
    Inactive,
    ReadOnly,
    WriteOnly,
    OtherApplication,
    Valid,
    ValidFromProvider,
}

const CREDENTIALS: [Credential; 11] = [
    Credential::None,
    Credential::WrongScheme,
    Credential::Malformed,
    Credential::Unknown,
    Credential::Expired,
    Credential::Inactive,
    Credential::ReadOnly,
    Credential::WriteOnly,
    Credential::OtherApplication,
    Credential::Valid,
    Credential::ValidFromProvider,
];

impl Credential {
    /// The `Authorization` header, if any.
    fn header(self) -> Option<String> {
        let oauth = |token: &str| Some(format!("OAuth {token}"));
        match self {
            Credential::None => None,
            Credential::WrongScheme => Some(format!("Basic {VALID}")),
            Credential::Malformed => Some(format!("OAuth {VALID} {VALID}")),
            Credential::Unknown => oauth(UNKNOWN),
            Credential::Expired => oauth(IDP_EXPIRED),
            Credential::Inactive => oauth(IDP_REVOKED),
            Credential::ReadOnly => oauth(READER),
            Credential::WriteOnly => oauth(WRITER),
            Credential::OtherApplication => oauth(OTHER_APP),
            Credential::Valid => oauth(VALID),
            Credential::ValidFromProvider => Some(format!("Bearer {IDP_VALID}")),
        }
    }
}

/// An expected answer: status and `error_type` (empty for a success).
type Outcome = (u16, &'static str);

const OK: Outcome = (200, "");
const NO_TOKEN: Outcome = (401, "unauthorized");
const BAD_TOKEN: Outcome = (401, "invalid_token");
const SCOPE: Outcome = (403, "insufficient_scope");
const DENIED: Outcome = (403, "access_denied");
const NOT_FOUND: Outcome = (404, "not_found");

const EXPORT_JSON: &str = "/logs/v1/export/errors.json?application_id=1001&date_since=2026-10-01&\
                           date_until=2026-10-07&fields=error_id,os_name&limit=5";

/// Route × credential (columns in the order of `CREDENTIALS`) → outcome.
const MATRIX: [(&str, [Outcome; 11]); 7] = [
    //              none      basic      malformed  unknown    expired    inactive   read  write  other-app valid idp-valid
    (
        "export.csv",
        [NO_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, OK, SCOPE, DENIED, OK, OK],
    ),
    (
        "export.json",
        [NO_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, OK, SCOPE, DENIED, OK, OK],
    ),
    (
        "/management/v1/applications",
        [NO_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, OK, SCOPE, OK, OK, OK],
    ),
    // One application: 1001, outside the other-application token's list.
    (
        "/management/v1/application/1001",
        [NO_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, OK, SCOPE, DENIED, OK, OK],
    ),
    // The OpenAPI document: any valid token, whatever its scopes and applications.
    ("/openapi.json", [NO_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, OK, OK, OK, OK, OK]),
    ("/healthz", [OK, OK, OK, OK, OK, OK, OK, OK, OK, OK, OK]),
    (
        "/logs/v1/no/such/route",
        [
            NO_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, BAD_TOKEN, NOT_FOUND, NOT_FOUND, NOT_FOUND,
            NOT_FOUND, NOT_FOUND,
        ],
    ),
];

fn target(route: &str) -> String {
    match route {
        "export.csv" => format!("{EXPORT_CSV}&limit=5"),
        "export.json" => EXPORT_JSON.to_owned(),
        path => path.to_owned(),
    }
}

// ---------------------------------------------------------------------------------------
// The identity provider and the server
// ---------------------------------------------------------------------------------------

async fn introspect(body: Bytes) -> axum::response::Response {
    let token = form_urlencoded::parse(&body).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let answer = match token.as_deref().unwrap_or_default() {
        IDP_VALID => json!({"active": true, "scope": "service:read service:write", "client_id": "mx",
                            "exp": now + 3600, "applications": "*"}),
        IDP_EXPIRED => json!({"active": true, "scope": "service:read service:write", "client_id": "mx",
                              "exp": now - 60, "applications": "*"}),
        // Revoked, and everything the provider never issued (RFC 7662 §2.2).
        _ => json!({"active": false}),
    };
    axum::Json(answer).into_response()
}

async fn provider() -> SocketAddr {
    let app = Router::new().route("/introspect", axum::routing::post(introspect));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn tokens() -> TokenStore {
    let extra = format!(
        "[[tokens]]\nname = \"mx-valid\"\ntoken = \"{VALID}\"\nscopes = [\"service:read\", \"service:write\"]\n\n\
         [[tokens]]\nname = \"mx-app1002\"\ntoken = \"{OTHER_APP}\"\nscopes = [\"service:read\", \"service:write\"]\n\
         applications = [1002]\n"
    );
    TokenStore::fixed(TokenSet::parse(&format!("{}\n{extra}", tokens_toml())).unwrap())
}

async fn matrix_state() -> AppState {
    let credentials = ClientCredentials { client_id: "logs".into(), client_secret: Secret("s".into()) };
    let url = format!("http://{}/introspect", provider().await).parse().unwrap();
    let mut config = IntrospectionConfig::new(url, credentials);
    config.timeout = Duration::from_secs(5);
    let introspector = Arc::new(Introspector::new(config).unwrap());
    let auth = Authenticator::new(Some(Arc::new(tokens())), Some(introspector));
    let engine = engine(small_dataset(), EngineConfig { target_partitions: 2, ..EngineConfig::default() });
    AppState::new(engine, auth, matrix_settings()).await.unwrap()
}

/// The matrix asks for far more 401s from one address than the failed-authentication limit
/// allows; that limit has tests of its own (tests/failed_auth.rs).
fn matrix_settings() -> Settings {
    Settings { auth_failure_limit: 0, ..Settings::default() }
}

// ---------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------

/// Every cell of [`MATRIX`], with the `Authorization` header that `header` gives each
/// credential; the cells that differ.
async fn cells_that_differ(
    server: &TestServer,
    header: impl Fn(Credential) -> Option<String>,
) -> Vec<String> {
    let client = client();
    let mut failures = Vec::new();
    for (route, row) in MATRIX {
        for (credential, (status, error_type)) in CREDENTIALS.into_iter().zip(row) {
            for method in [Method::GET, Method::HEAD] {
                let mut request = client.request(method.clone(), server.url(&target(route)));
                if let Some(value) = header(credential) {
                    request = request.header(header::AUTHORIZATION, value);
                }
                let response = request.send().await.unwrap();
                let got = response.status().as_u16();
                let headers = response.headers().clone();
                let challenge = headers.get(header::WWW_AUTHENTICATE).cloned();
                let body = response.bytes().await.unwrap();
                let cell = format!("{method} {route} × {credential:?}");
                if got != status {
                    failures.push(format!("{cell}: {got} instead of {status}"));
                    continue;
                }
                // Nothing is kept by a cache on the way, nor sniffed into another type.
                assert_eq!(headers[header::CACHE_CONTROL], "no-store", "{cell}");
                assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{cell}");
                // Every JSON answer, an error or not, says its charset.
                let content_type = headers[header::CONTENT_TYPE].to_str().unwrap();
                if status != 200 || content_type.starts_with("application/json") {
                    assert_eq!(content_type, "application/json; charset=utf-8", "{cell}");
                }
                if method == Method::HEAD {
                    assert!(body.is_empty(), "{cell}");
                    continue;
                }
                if status == 200 {
                    assert!(!body.is_empty(), "{cell}");
                    continue;
                }
                let v = error_body(StatusCode::from_u16(status).unwrap(), &body, error_type);
                assert!(!String::from_utf8_lossy(&body).contains("tok-"), "{cell}: {v}");
                // 401 and a missing scope say how to authenticate (RFC 6750 §3).
                if status == 401 || error_type == "insufficient_scope" {
                    let challenge = challenge.unwrap_or_else(|| panic!("{cell}: no WWW-Authenticate"));
                    let challenge = challenge.to_str().unwrap();
                    assert!(challenge.starts_with("OAuth realm=\"logs-export\""), "{cell}: {challenge}");
                    if error_type != "unauthorized" {
                        assert!(
                            challenge.contains(&format!("error=\"{error_type}\"")),
                            "{cell}: {challenge}"
                        );
                    }
                }
            }
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_and_credential_gets_its_status() {
    let state = matrix_state().await;
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let failures = cells_that_differ(&server, Credential::header).await;
    assert!(failures.is_empty(), "cells that differ:\n{}", failures.join("\n"));
    // The provider's answers were asked for, and none of them let anything through.
    let counters = state.auth().introspection().unwrap().counters();
    assert_eq!(counters.errors.load(std::sync::atomic::Ordering::SeqCst), 0);
    server.stop().await;
}

/// The same matrix with JWT access tokens of a real OpenID provider (`logs_testkit::oidc`):
/// each valid kind from its token endpoint; unknown, expired and "inactive" (a signature by
/// another key under the set's `kid`) crafted, the expired one with the provider's own key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_and_jwt_credential_gets_its_status() {
    let keys = oidc_support::keys();
    let provider = OidcProvider::start(oidc_support::provider_config(&keys));
    let issuer = provider.issuer();
    let mut config = OidcConfig::new(&issuer, oidc_support::AUDIENCE);
    config.timeout = Duration::from_secs(5);
    let provider_keys = Arc::new(ProviderKeys::new(config).unwrap());
    provider_keys.refresh().await;
    let auth = Authenticator::default().with_jwt(Arc::new(JwtVerifier::new(provider_keys)));
    let engine = engine(small_dataset(), EngineConfig { target_partitions: 2, ..EngineConfig::default() });
    let state = AppState::new(engine, auth, matrix_settings()).await.unwrap();
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;

    let audience = Some(oidc_support::AUDIENCE);
    let read_write = oidc_support::READ_WRITE;
    let valid = oidc_support::token(&provider, "rs256", audience, read_write).await;
    let from_provider = oidc_support::token(&provider, "es256", audience, read_write).await;
    let read_only = oidc_support::token(&provider, "reader", audience, "service:read").await;
    let write_only = oidc_support::token(&provider, "writer", audience, "service:write").await;
    let other_app = oidc_support::token(&provider, "app1002", audience, read_write).await;
    let now = oidc_support::now();
    let claims = json!({"iss": issuer, "aud": oidc_support::AUDIENCE, "exp": now + 300, "iat": now,
                        "scope": read_write, "applications": "*", "client_id": "crafted"});
    let real_key = (oidc_support::encoding_key(&keys[0]), Algorithm::RS256);
    let attacker = oidc_support::encoding_key(&OidcProvider::genkey("RS256", "rsa-1"));
    let header = |kid: &str| json!({"alg": "RS256", "typ": "at+jwt", "kid": kid});
    let mut expired_claims = claims.clone();
    expired_claims["exp"] = json!(now - 3600);
    let expired = oidc_support::craft(&header("rsa-1"), &expired_claims, Some((&real_key.0, real_key.1)));
    let unknown = oidc_support::craft(&header("nobody-1"), &claims, Some((&attacker, Algorithm::RS256)));
    let forged = oidc_support::craft(&header("rsa-1"), &claims, Some((&attacker, Algorithm::RS256)));

    let failures = cells_that_differ(&server, |credential| {
        let token = match credential {
            Credential::None => return None,
            Credential::WrongScheme => return Some(format!("Basic {valid}")),
            Credential::Malformed => return Some(format!("OAuth {valid} {valid}")),
            Credential::Unknown => &unknown,
            Credential::Expired => &expired,
            Credential::Inactive => &forged,
            Credential::ReadOnly => &read_only,
            Credential::WriteOnly => &write_only,
            Credential::OtherApplication => &other_app,
            Credential::Valid => &valid,
            Credential::ValidFromProvider => &from_provider,
        };
        Some(format!("Bearer {token}"))
    })
    .await;
    assert!(failures.is_empty(), "cells that differ:\n{}", failures.join("\n"));
    let text = state.metrics_text();
    for reason in ["unknown_key", "expired", "signature"] {
        assert!(
            text.contains(&format!("logs_auth_failures_total{{reason=\"{reason}\"}}")),
            "{reason}: {text}"
        );
    }
    server.stop().await;
}

#[test]
fn the_matrix_covers_every_credential_and_the_health_route_alone_is_public() {
    assert_eq!(PUBLIC_ROUTES, ["/healthz"]);
    // Every row that needs no token is a public route.
    for (route, row) in MATRIX {
        if row[0] != NO_TOKEN {
            assert!(PUBLIC_ROUTES.contains(&route), "{route}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// No route can skip the check
// ---------------------------------------------------------------------------------------

/// Every route the service has that needs a token, written as in the router (with an id in
/// place of `{id}`).
const PROTECTED: [&str; 5] = [
    "/logs/v1/export/errors.csv",
    "/logs/v1/export/errors.json",
    "/management/v1/applications",
    "/management/v1/application/1001",
    "/openapi.json",
];

/// Paths that are not routes, some disguised as the public one.
const MADE_UP: [&str; 38] = [
    "/",
    "/logs",
    "/logs/",
    "/logs/v1",
    "/logs/v1/export",
    "/logs/v1/export/",
    "/logs/v1/export/errors",
    "/logs/v1/export/errors.xml",
    "/logs/v1/export/errors.csv/",
    "/logs/v1/export/errors.CSV",
    "/logs/v1/export/errors%2Ecsv",
    "/logs/v1/export/./errors.csv",
    "/logs/v1/export/../export/errors.csv",
    "/logs/v2/export/errors.csv",
    "/management",
    "/management/v1",
    "/management/v1/applications/",
    "/management/v1/applications/1001",
    "/management/v1/application",
    "/management/v1/application/",
    "/management/v1/application/1001/",
    "/management/v1/application/x",
    "/management/v2/applications",
    "/metrics",
    "/admin",
    "/openapi",
    "/openapi.json/",
    "/healthz/",
    "/healthz/x",
    "/HEALTHZ",
    "/Healthz",
    "//healthz",
    "/healthz%2F",
    "/%68ealthz",
    "/./healthz",
    "/healthz/../logs/v1/export/errors.csv",
    "/healthz;x",
    "/healthz.json",
];

/// Deterministic pseudo-random paths under the API's prefixes.
fn generated_paths(count: usize) -> Vec<String> {
    let prefixes = ["/logs/v1/export/", "/logs/v1/", "/management/v1/", "/management/", "/logs/", "/"];
    let pieces = [
        "errors",
        ".csv",
        ".json",
        "healthz",
        "applications",
        "v1",
        "..",
        ".",
        "%2F",
        "%2e",
        "%00",
        "%FF",
        "~",
        "-",
        "_",
        "a",
        "Z",
        "9",
        "%C3%A9",
        ";",
        "@",
        ":",
        "!",
        "$",
        "*",
        "'",
        "(",
        ")",
        ",",
        "+",
        "=",
    ];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    (0..count)
        .map(|_| {
            let mut path = prefixes[next(prefixes.len())].to_owned();
            for _ in 0..1 + next(6) {
                path.push_str(pieces[next(pieces.len())]);
                if next(3) == 0 {
                    path.push('/');
                }
            }
            path
        })
        .filter(|path| path != "/healthz")
        .collect()
}

#[tokio::test]
async fn every_path_but_the_health_route_needs_a_token_for_every_method() {
    let app = logs_server::app(state(small_dataset(), Settings::default()).await);
    let mut paths: Vec<String> = PROTECTED.iter().chain(&MADE_UP).map(|p| (*p).to_owned()).collect();
    paths.extend(generated_paths(300));
    let methods = [Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS];
    for path in &paths {
        for method in &methods {
            for authorization in [None, Some(format!("Basic {READER}")), Some("OAuth tok-nobody".to_owned())]
            {
                let headers: Vec<(&str, &str)> =
                    authorization.iter().map(|a| ("authorization", a.as_str())).collect();
                let (status, headers, _) = call(&app, method.clone(), path, &headers).await;
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path} with {authorization:?}");
                assert!(headers.contains_key(header::WWW_AUTHENTICATE), "{method} {path}");
            }
        }
    }
    // The public route is public for every method (a wrong one is 405, not a token question),
    // and its query string cannot carry a token either.
    for method in methods {
        let (status, ..) = call(&app, method.clone(), "/healthz?x=1", &[]).await;
        let expected = if method == Method::GET || method == Method::HEAD { 200 } else { 405 };
        assert_eq!(status.as_u16(), expected, "{method}");
    }
    assert_eq!(get(&app, "/healthz?access_token=x", None).await.0, StatusCode::UNAUTHORIZED);
}

/// The router applies authorization to what `app()` holds; what an embedder mounts around it
/// keeps it (nested under a prefix, only the health route stays public), and a handler
/// mounted outside the layer that names its scope cannot run without a caller.
#[tokio::test]
async fn routes_around_the_router_fail_closed() {
    let state = state(small_dataset(), Settings::default()).await;
    let nested = Router::new().nest("/v2", logs_server::app(state.clone()));
    assert_eq!(get(&nested, "/v2/healthz", None).await.0, StatusCode::OK);
    for path in [
        "/v2/logs/v1/export/errors.csv",
        "/v2/management/v1/applications",
        "/v2/management/v1/application/1001",
        "/v2/nope",
    ] {
        assert_eq!(get(&nested, path, None).await.0, StatusCode::UNAUTHORIZED, "{path}");
    }
    assert_eq!(get(&nested, &format!("/v2{EXPORT_CSV}&limit=1"), Some(READER)).await.0, StatusCode::OK);

    async fn added_later(ReadAccess(caller): ReadAccess) -> String {
        caller.principal.name.clone()
    }
    let extended = logs_server::app(state).route("/added-later", axum::routing::get(added_later));
    for token in [None, Some(READER)] {
        let (status, _, body) = get(&extended, "/added-later", token).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{token:?}");
        error_body(status, &body, "internal_error");
    }
}

/// Without a token, a route and a path that is none answer alike, so that a client without a
/// token learns nothing about which paths exist (docs/decisions.md, "Unknown paths need a token"). Today the 401 for a
/// wrong method on a real route carries `Allow: GET,HEAD` (axum's method router adds it to
/// whatever its fallback answers, outside the authorization layer), which an unknown path's
/// 401 lacks.
#[tokio::test]
async fn bug_unauthenticated_answers_do_not_reveal_which_routes_exist() {
    let app = logs_server::app(state(small_dataset(), Settings::default()).await);
    for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH, Method::OPTIONS] {
        let (_, unknown, _) = call(&app, method.clone(), "/logs/v1/export/errors.xml", &[]).await;
        for path in PROTECTED {
            let (status, headers, _) = call(&app, method.clone(), path, &[]).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            let names = |h: &http::HeaderMap| {
                let mut names: Vec<String> =
                    h.keys().map(|k| k.as_str().to_owned()).filter(|k| k != "x-request-id").collect();
                names.sort();
                names
            };
            assert_eq!(names(&headers), names(&unknown), "{method} {path}");
        }
    }
}
