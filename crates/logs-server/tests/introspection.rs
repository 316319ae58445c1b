//! Token introspection (RFC 7662) against a small identity provider served by the test on
//! loopback.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use common::*;
use http::{HeaderMap, StatusCode, header};
use logs_core::EngineConfig;
use logs_server::auth::introspection::{ApplicationGrants, ClientCredentials, Secret};
use logs_server::auth::{Authenticator, IntrospectionConfig, Introspector, TokenSet, TokenStore};
use logs_server::{AppState, ServeOptions, Settings};
use serde_json::json;

/// `Basic base64("logs-client:idp-secret")`.
const CLIENT_AUTH: &str = "Basic bG9ncy1jbGllbnQ6aWRwLXNlY3JldA==";

/// The identity provider: answers by token, counts the calls.
struct Provider {
    addr: SocketAddr,
    calls: Arc<AtomicUsize>,
}

async fn introspect(State(calls): State<Arc<AtomicUsize>>, headers: HeaderMap, body: Bytes) -> Response {
    calls.fetch_add(1, Ordering::SeqCst);
    if headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) != Some(CLIENT_AUTH) {
        return (StatusCode::UNAUTHORIZED, "bad client credentials").into_response();
    }
    assert_eq!(headers[header::CONTENT_TYPE], "application/x-www-form-urlencoded");
    let token = form_urlencoded::parse(&body).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let answer = match token.as_deref().unwrap_or("") {
        "tok-idp-active" => {
            json!({"active": true, "scope": "service:read service:write", "client_id": "reporting",
                                   "exp": now + 3600, "applications": [1001]})
        }
        "tok-idp-all" => {
            json!({"active": true, "scope": "service:read", "sub": "admin", "applications": "*"})
        }
        "tok-idp-grant" => json!({"active": true, "scope": "service:read", "client_id": "granted"}),
        "tok-idp-noclaim" => json!({"active": true, "scope": "service:read", "client_id": "nobody"}),
        "tok-idp-expired" => {
            json!({"active": true, "scope": "service:read", "exp": now - 10, "applications": [1001]})
        }
        "tok-idp-noscope" => json!({"active": true, "scope": "other:read", "applications": [1001]}),
        "tok-idp-slow" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            json!({"active": true, "scope": "service:read", "applications": [1001]})
        }
        "tok-idp-broken" => return (StatusCode::INTERNAL_SERVER_ERROR, "oops").into_response(),
        "tok-idp-nonsense" => return (StatusCode::OK, "<html>").into_response(),
        _ => json!({"active": false}),
    };
    axum::Json(answer).into_response()
}

async fn provider() -> Provider {
    let calls = Arc::new(AtomicUsize::new(0));
    let app =
        axum::Router::new().route("/introspect", axum::routing::post(introspect)).with_state(calls.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Provider { addr, calls }
}

fn config(addr: SocketAddr, secret: &str) -> IntrospectionConfig {
    let credentials =
        ClientCredentials { client_id: "logs-client".into(), client_secret: Secret(secret.into()) };
    let mut config =
        IntrospectionConfig::new(format!("http://{addr}/introspect").parse().unwrap(), credentials);
    // Ample for a loopback provider on a loaded machine; the slow provider's test shortens it.
    config.timeout = Duration::from_secs(5);
    config
}

async fn app_with(config: IntrospectionConfig, tokens: Option<TokenStore>) -> (axum::Router, AppState) {
    let introspector = Arc::new(Introspector::new(config).unwrap());
    let auth = Authenticator::new(tokens.map(Arc::new), Some(introspector));
    let state = AppState::new(engine(small_dataset(), EngineConfig::default()), auth, Settings::default())
        .await
        .unwrap();
    (logs_server::app(state.clone()), state)
}

fn export_of(app_id: i64) -> String {
    EXPORT_CSV.replace("application_id=1001", &format!("application_id={app_id}"))
}

#[tokio::test]
async fn active_tokens_are_cached_and_limited_to_their_applications() {
    let idp = provider().await;
    let (app, _) = app_with(config(idp.addr, "idp-secret"), None).await;
    let (status, ..) = get(&app, EXPORT_CSV, Some("tok-idp-active")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = get(&app, &export_of(1002), Some("tok-idp-active")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    error_body(status, &body, "access_denied");
    let (_, _, body) = get(&app, "/management/v1/applications", Some("tok-idp-active")).await;
    assert_eq!(json(&body)["applications"].as_array().unwrap().len(), 1);
    assert_eq!(idp.calls.load(Ordering::SeqCst), 1, "later calls come from the cache");

    let (status, ..) = get(&app, &export_of(1003), Some("tok-idp-all")).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn inactive_and_expired_tokens_are_401_and_cached_briefly() {
    let idp = provider().await;
    let mut config = config(idp.addr, "idp-secret");
    config.negative_ttl = Duration::from_secs(2);
    let (app, state) = app_with(config, None).await;
    for _ in 0..3 {
        let (status, headers, body) = get(&app, EXPORT_CSV, Some("tok-idp-unknown")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(headers[header::WWW_AUTHENTICATE].to_str().unwrap().contains("invalid_token"));
        error_body(status, &body, "invalid_token");
    }
    assert_eq!(idp.calls.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    get(&app, EXPORT_CSV, Some("tok-idp-unknown")).await;
    assert_eq!(idp.calls.load(Ordering::SeqCst), 2, "the negative answer expired");

    let (status, _, body) = get(&app, EXPORT_CSV, Some("tok-idp-expired")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let v = error_body(status, &body, "invalid_token");
    assert!(v["message"].as_str().unwrap().contains("expired"), "{v}");

    // The metrics tell an expired token from one the provider does not know.
    let text = state.metrics_text();
    assert!(text.contains("logs_auth_failures_total{reason=\"invalid\"} 4"), "{text}");
    assert!(text.contains("logs_auth_failures_total{reason=\"expired\"} 1"), "{text}");
}

#[tokio::test]
async fn a_missing_scope_is_403() {
    let idp = provider().await;
    let (app, _) = app_with(config(idp.addr, "idp-secret"), None).await;
    let (status, _, body) = get(&app, EXPORT_CSV, Some("tok-idp-noscope")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    error_body(status, &body, "insufficient_scope");
}

#[tokio::test]
async fn applications_from_a_grants_file_or_none() {
    let idp = provider().await;
    let mut config = config(idp.addr, "idp-secret");
    config.grants =
        Some(ApplicationGrants::parse("[[grants]]\nclient_id = \"granted\"\napplications = [1002]").unwrap());
    let (app, _) = app_with(config, None).await;
    assert_eq!(get(&app, &export_of(1002), Some("tok-idp-grant")).await.0, StatusCode::OK);
    assert_eq!(get(&app, &export_of(1001), Some("tok-idp-grant")).await.0, StatusCode::FORBIDDEN);
    // No claim and no grant: no application at all.
    assert_eq!(get(&app, &export_of(1001), Some("tok-idp-noclaim")).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_provider_that_is_down_slow_or_wrong_is_503_never_a_pass() {
    // Down: a port nobody listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let (app, state) = app_with(config(closed, "idp-secret"), None).await;
    for _ in 0..2 {
        let (status, headers, body) = get(&app, EXPORT_CSV, Some("tok-idp-active")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[header::RETRY_AFTER], "5");
        let v = error_body(status, &body, "identity_provider_unavailable");
        assert!(!v.to_string().contains("127.0.0.1"), "{v}");
    }
    let text = state.metrics_text();
    assert!(text.contains("logs_auth_failures_total{reason=\"provider_unavailable\"} 2"), "{text}");
    assert!(!text.contains("reason=\"invalid\""), "the provider being down is not the token's fault: {text}");

    let idp = provider().await;
    let slow = IntrospectionConfig { timeout: Duration::from_secs(1), ..config(idp.addr, "idp-secret") };
    let (app, state) = app_with(slow, None).await;
    let started = Instant::now();
    let (status, _, body) = get(&app, EXPORT_CSV, Some("tok-idp-slow")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    error_body(status, &body, "identity_provider_unavailable");
    assert!(started.elapsed() < Duration::from_secs(10), "bounded by the timeout: {:?}", started.elapsed());
    for token in ["tok-idp-broken", "tok-idp-nonsense"] {
        assert_eq!(get(&app, EXPORT_CSV, Some(token)).await.0, StatusCode::SERVICE_UNAVAILABLE, "{token}");
    }
    assert_eq!(state.auth().introspection().unwrap().counters().errors.load(Ordering::SeqCst), 3);

    // Wrong client credentials: the provider refuses us, which is our problem, not the token's.
    let (app, _) = app_with(config(idp.addr, "wrong-secret"), None).await;
    assert_eq!(get(&app, EXPORT_CSV, Some("tok-idp-active")).await.0, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn the_tokens_file_is_asked_first() {
    let idp = provider().await;
    let store = TokenStore::fixed(TokenSet::parse(&tokens_toml()).unwrap());
    let (app, _) = app_with(config(idp.addr, "idp-secret"), Some(store)).await;
    assert_eq!(get(&app, EXPORT_CSV, Some(READER)).await.0, StatusCode::OK);
    assert_eq!(idp.calls.load(Ordering::SeqCst), 0);
    assert_eq!(get(&app, EXPORT_CSV, Some("tok-idp-active")).await.0, StatusCode::OK);
    assert_eq!(idp.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn over_the_wire() {
    let idp = provider().await;
    let (_, state) = app_with(
        IntrospectionConfig { timeout: Duration::from_secs(1), ..config(idp.addr, "idp-secret") },
        None,
    )
    .await;
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let client = client();
    let send = |token: &str| {
        client.get(server.url(EXPORT_CSV)).header("Authorization", format!("Bearer {token}")).send()
    };
    assert_eq!(send("tok-idp-active").await.unwrap().status(), StatusCode::OK);
    assert_eq!(send("tok-idp-unknown").await.unwrap().status(), StatusCode::UNAUTHORIZED);
    assert_eq!(send("tok-idp-slow").await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    server.stop().await;
}
