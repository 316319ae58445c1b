//! JWT access tokens from a real OpenID provider: npm's `oidc-provider` (panva's certified
//! provider) on loopback, run by `logs_testkit::oidc`. Tokens on the positive path come from
//! its token endpoint, as a client gets them; the hostile ones are crafted here, most of them
//! signed with the provider's own private key so that only the one thing under test is wrong.

mod common;
#[path = "common/oidc.rs"]
mod oidc_support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use http::StatusCode;
use jsonwebtoken::{Algorithm, EncodingKey};
use logs_core::EngineConfig;
use logs_server::auth::introspection::{ClientCredentials, Secret};
use logs_server::auth::{
    Authenticator, IntrospectionConfig, Introspector, JwtVerifier, OidcConfig, ProviderKeys, TokenSet,
    TokenStore,
};
use logs_server::{AppState, ServeOptions, Settings};
use logs_testkit::oidc::{KeyPair, OidcProvider, ProviderConfig};
use oidc_support::*;
use serde_json::{Value, json};

/// The service over the small dataset, accepting the provider's JWTs (and the tokens file's).
async fn service(issuer: &str, tweak: impl FnOnce(&mut OidcConfig)) -> TestServer {
    let mut config = OidcConfig::new(issuer, AUDIENCE);
    config.jwks_min_interval = Duration::from_millis(200);
    config.timeout = Duration::from_secs(5);
    tweak(&mut config);
    let keys = Arc::new(ProviderKeys::new(config).unwrap());
    keys.refresh().await;
    let auth = token_auth().with_jwt(Arc::new(JwtVerifier::new(keys)));
    let engine = engine(small_dataset(), EngineConfig { target_partitions: 2, ..EngineConfig::default() });
    // The refusals here come from one address: the failed-authentication limit is off
    // (tests/failed_auth.rs tests it).
    let settings = Settings { auth_failure_limit: 0, ..Settings::default() };
    let state = AppState::new(engine, auth, settings).await.unwrap();
    TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await
}

async fn status(server: &TestServer, target: &str, token: &str) -> (StatusCode, String, String) {
    let response = client().get(server.url(target)).bearer_auth(token).send().await.unwrap();
    let status = response.status();
    let challenge = response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, challenge, response.text().await.unwrap())
}

/// The count of `logs_auth_failures_total{reason}` (0 when absent).
fn failures(server: &TestServer, reason: &str) -> u64 {
    counter(&server.state.metrics_text(), &format!("logs_auth_failures_total{{reason=\"{reason}\"}}"))
}

fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_of_every_algorithm_scope_and_grant_are_honoured() {
    let keys = keys();
    let provider = OidcProvider::start(provider_config(&keys));
    let server = service(&provider.issuer(), |_| {}).await;
    for (client, alg, kid) in [
        ("rs256", "RS256", "rsa-1"),
        ("ps256", "PS256", "rsa-pss-1"),
        ("es256", "ES256", "ec-1"),
        ("eddsa", "EdDSA", "ed-1"),
    ] {
        let token = token(&provider, client, Some(AUDIENCE), READ_WRITE).await;
        let (header, claims) = parts(&token);
        assert_eq!((header["alg"].as_str(), header["kid"].as_str()), (Some(alg), Some(kid)), "{header}");
        assert_eq!(header["typ"], "at+jwt");
        assert_eq!(claims["aud"], AUDIENCE);
        for target in [EXPORT_1001, EXPORT_1002] {
            let (status, _, body) = status(&server, target, &token).await;
            assert_eq!(status, StatusCode::OK, "{client} {target}: {body}");
            assert!(body.starts_with("error_id\n"), "{body}");
        }
    }
    // Read on 1001 only.
    let token_1001 = token(&provider, "app1001", Some(AUDIENCE), "service:read").await;
    assert_eq!(status(&server, EXPORT_1001, &token_1001).await.0, StatusCode::OK);
    let (status_1002, _, body) = status(&server, EXPORT_1002, &token_1001).await;
    assert_eq!(status_1002, StatusCode::FORBIDDEN);
    error_body(status_1002, body.as_bytes(), "access_denied");
    let (listed, _, body) = status(&server, "/management/v1/applications", &token_1001).await;
    assert_eq!(listed, StatusCode::OK);
    let ids: Vec<i64> = json(body.as_bytes())["applications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1001]);
    // Write only: no export.
    let writer = token(&provider, "writer", Some(AUDIENCE), "service:write").await;
    let (scope, challenge, body) = status(&server, EXPORT_1001, &writer).await;
    assert_eq!(scope, StatusCode::FORBIDDEN);
    assert!(challenge.contains("insufficient_scope"), "{challenge}");
    error_body(scope, body.as_bytes(), "insufficient_scope");
    // The tokens file still works beside the provider.
    assert_eq!(status(&server, EXPORT_1001, READER).await.0, StatusCode::OK);
    assert!(!server.state.metrics_text().contains("logs_auth_failures_total{"), "no refusal so far");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tokens_are_refused_alike_and_counted_by_reason() {
    logged(); // installs the capturing subscriber before any token is sent
    let keys = keys();
    let provider = OidcProvider::start(provider_config(&keys));
    let issuer = provider.issuer();
    let server = service(&issuer, |_| {}).await;
    let (rsa, signing) = (&keys[0], encoding_key(&keys[0]));
    let attacker = OidcProvider::genkey("RS256", "rsa-1");
    let attacker_key = encoding_key(&attacker);
    let now = now();
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "exp": now + 300, "iat": now, "sub": "crafted",
                        "client_id": "crafted", "scope": READ_WRITE, "applications": "*", "jti": "j-1"});
    let merge = |base: &Value, changes: Value| {
        let mut merged = base.clone();
        for (name, value) in changes.as_object().unwrap() {
            match value {
                Value::Null => merged.as_object_mut().unwrap().remove(name),
                _ => merged.as_object_mut().unwrap().insert(name.clone(), value.clone()),
            };
        }
        merged
    };
    let header = json!({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-1"});
    let real = |header_changes: Value, claim_changes: Value| {
        craft(
            &merge(&header, header_changes),
            &merge(&claims, claim_changes),
            Some((&signing, Algorithm::RS256)),
        )
    };

    // The control: crafted with the provider's key and nothing wrong, it is accepted — so
    // each refusal below is for the one thing changed.
    assert_eq!(status(&server, EXPORT_1001, &real(json!({}), json!({}))).await.0, StatusCode::OK);

    let hmac_secret = EncodingKey::from_secret(rsa.public_jwk.as_bytes());
    let other_audience = token(&provider, "rs256", Some(OTHER_AUDIENCE), READ_WRITE).await;
    assert_eq!(parts(&other_audience).1["aud"], OTHER_AUDIENCE);
    let attacker_jwk: Value = serde_json::from_str(&attacker.public_jwk).unwrap();
    let long_claim = "x".repeat(9000);
    let cases: Vec<(&str, &str, String)> = vec![
        ("alg none", "algorithm", craft(&merge(&header, json!({"alg": "none"})), &claims, None)),
        (
            "HMAC with the public key as secret",
            "algorithm",
            craft(&merge(&header, json!({"alg": "HS256"})), &claims, Some((&hmac_secret, Algorithm::HS256))),
        ),
        (
            "a key not in the set",
            "unknown_key",
            craft(
                &merge(&header, json!({"kid": "attacker-1"})),
                &claims,
                Some((&attacker_key, Algorithm::RS256)),
            ),
        ),
        (
            "another key under the set's kid",
            "signature",
            craft(&header, &claims, Some((&attacker_key, Algorithm::RS256))),
        ),
        (
            "an embedded jwk",
            "embedded_key",
            craft(
                &merge(&header, json!({"jwk": attacker_jwk})),
                &claims,
                Some((&attacker_key, Algorithm::RS256)),
            ),
        ),
        ("a jku header", "embedded_key", real(json!({"jku": "http://127.0.0.1:9/jwks"}), json!({}))),
        ("an x5u header", "embedded_key", real(json!({"x5u": "http://127.0.0.1:9/cert.pem"}), json!({}))),
        ("another audience, from the provider", "audience", other_audience.clone()),
        ("another audience", "audience", real(json!({}), json!({"aud": ["https://evil.example"]}))),
        ("another issuer", "issuer", real(json!({}), json!({"iss": "http://127.0.0.1:9"}))),
        ("expired", "expired", real(json!({}), json!({"exp": now - 3600}))),
        ("not valid yet", "not_yet_valid", real(json!({}), json!({"nbf": now + 3600}))),
        ("issued in the future", "not_yet_valid", real(json!({}), json!({"iat": now + 3600}))),
        ("typ JWT", "type", real(json!({"typ": "JWT"}), json!({}))),
        ("no exp", "claims", real(json!({}), json!({"exp": null}))),
        ("a crit header", "critical_header", real(json!({"crit": ["exp"]}), json!({}))),
        (
            "a header that is not JSON",
            "malformed",
            format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode("{\"alg\":")),
        ),
        ("oversized", "oversized", real(json!({}), json!({"padding": long_claim}))),
    ];
    let mut expected: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut messages = std::collections::BTreeSet::new();
    for (what, reason, token) in &cases {
        let (status, challenge, body) = status(&server, EXPORT_1001, token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
        assert_eq!(challenge, r#"OAuth realm="logs-export", error="invalid_token""#, "{what}");
        let v = error_body(status, body.as_bytes(), "invalid_token");
        if *reason != "expired" {
            messages.insert(v["message"].as_str().unwrap().to_owned());
        }
        *expected.entry(reason).or_default() += 1;
        assert_eq!(failures(&server, reason), expected[reason], "{what}: counted as {reason}");
    }
    assert_eq!(messages.len(), 1, "every refusal but expiry says the same: {messages:?}");
    // No token, nor any part of one, in any log line.
    let logged = logged();
    for (what, _, token) in &cases {
        for part in token.split('.').filter(|p| p.len() >= 16) {
            assert!(!logged.contains(part), "{what}: a part of the token is in the log");
        }
    }
    server.stop().await;
}

/// A provider with one client, `es256`, signing with the first ES256 key of `keys`.
fn es256_only(keys: &[KeyPair]) -> ProviderConfig {
    let clients = clients().into_iter().filter(|c| c.client_id == "es256").collect();
    ProviderConfig::new(keys.to_vec(), clients, AUDIENCE, OTHER_AUDIENCE)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_works_without_a_restart_and_a_withdrawn_one_is_refused() {
    let old = OidcProvider::genkey("ES256", "ec-old");
    let new = OidcProvider::genkey("ES256", "ec-new");
    let mut provider = OidcProvider::start(es256_only(std::slice::from_ref(&old)));
    let server = service(&provider.issuer(), |c| c.jwks_max_age = Duration::from_secs(1)).await;
    let old_token = token(&provider, "es256", Some(AUDIENCE), READ_WRITE).await;
    assert_eq!(parts(&old_token).0["kid"], "ec-old");
    assert_eq!(status(&server, EXPORT_1001, &old_token).await.0, StatusCode::OK);

    // The provider rotates: it signs with the new key and still publishes the old one.
    provider.restart(es256_only(&[new.clone(), old.clone()]));
    let new_token = token(&provider, "es256", Some(AUDIENCE), READ_WRITE).await;
    assert_eq!(parts(&new_token).0["kid"], "ec-new");
    // The unknown kid makes the service fetch the keys again at once: no restart.
    assert_eq!(status(&server, EXPORT_1001, &new_token).await.0, StatusCode::OK);
    assert_eq!(status(&server, EXPORT_1001, &old_token).await.0, StatusCode::OK, "still published");

    // The provider withdraws the old key: once the cached set is older than its max age, the
    // next fetch drops it.
    provider.restart(es256_only(std::slice::from_ref(&new)));
    refused_within(&server, &old_token, Duration::from_secs(20)).await;
    assert!(failures(&server, "unknown_key") >= 1);
    assert_eq!(status(&server, EXPORT_1001, &new_token).await.0, StatusCode::OK);
    server.stop().await;
}

/// Asks with `token` until it is refused (401); it must be accepted (200) until then, and
/// refused within `bound`.
async fn refused_within(server: &TestServer, token: &str, bound: Duration) {
    let since = std::time::Instant::now();
    loop {
        match status(server, EXPORT_1001, token).await.0 {
            StatusCode::UNAUTHORIZED => return,
            StatusCode::OK => {}
            other => panic!("{other} for a token whose key is being withdrawn"),
        }
        assert!(since.elapsed() < bound, "the withdrawn key is still accepted after {bound:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The provider's `Cache-Control: max-age=1` on its JWKS, not `--oidc-jwks-max-age` (5
/// minutes here), decides when the keys are fetched again: a withdrawn key is refused within
/// seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_cache_control_decides_when_keys_are_fetched_again() {
    let old = OidcProvider::genkey("ES256", "ec-old");
    let new = OidcProvider::genkey("ES256", "ec-new");
    let with_max_age = |keys: &[KeyPair]| ProviderConfig {
        jwks_cache_control: Some("public, max-age=1".into()),
        ..es256_only(keys)
    };
    let mut provider = OidcProvider::start(with_max_age(std::slice::from_ref(&old)));
    assert_eq!(provider.jwks().1.as_deref(), Some("public, max-age=1"));
    let server = service(&provider.issuer(), |c| c.jwks_max_age = Duration::from_secs(300)).await;
    let old_token = token(&provider, "es256", Some(AUDIENCE), READ_WRITE).await;
    assert_eq!(status(&server, EXPORT_1001, &old_token).await.0, StatusCode::OK);
    provider.restart(with_max_age(std::slice::from_ref(&new)));
    // Far sooner than the 5 minutes of `--oidc-jwks-max-age`.
    refused_within(&server, &old_token, Duration::from_secs(60)).await;
    let new_token = token(&provider, "es256", Some(AUDIENCE), READ_WRITE).await;
    assert_eq!(status(&server, EXPORT_1001, &new_token).await.0, StatusCode::OK);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_keys_outlive_the_provider_and_no_key_ever_fetched_is_503() {
    let key = OidcProvider::genkey("ES256", "ec-1");
    let mut provider = OidcProvider::start(es256_only(std::slice::from_ref(&key)));
    let server = service(&provider.issuer(), |c| c.jwks_max_age = Duration::from_secs(1)).await;
    let jwt = token(&provider, "es256", Some(AUDIENCE), READ_WRITE).await;
    provider.stop();
    // Past the keys' max age, every request starts a fetch that fails; the cached key stays.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for _ in 0..5 {
        assert_eq!(status(&server, EXPORT_1001, &jwt).await.0, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let text = server.state.metrics_text();
    assert!(counter(&text, "logs_oidc_key_fetches_total{result=\"error\"}") >= 1, "{text}");
    assert_eq!(counter(&text, "logs_oidc_keys"), 1, "{text}");
    server.stop().await;

    // A provider never reached: JWTs are 503, never a pass; the tokens file still works.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let server = service(&format!("http://{closed}"), |_| {}).await;
    for _ in 0..2 {
        let response = client().get(server.url(EXPORT_1001)).bearer_auth(&jwt).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[http::header::RETRY_AFTER], "5");
        let body = response.bytes().await.unwrap();
        let v = error_body(StatusCode::SERVICE_UNAVAILABLE, &body, "identity_provider_unavailable");
        assert!(!v.to_string().contains(&closed.to_string()), "no address in the answer: {v}");
    }
    assert_eq!(status(&server, EXPORT_1001, READER).await.0, StatusCode::OK);
    assert_eq!(failures(&server, "provider_unavailable"), 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_kids_fetches_the_keys_at_most_once_per_interval() {
    let keys = keys();
    let provider = OidcProvider::start(provider_config(&keys));
    let issuer = provider.issuer();
    let server = service(&issuer, |c| c.jwks_min_interval = Duration::from_secs(30)).await;
    let fetched = || counter(&server.state.metrics_text(), "logs_oidc_key_fetches_total{result=\"ok\"}");
    assert_eq!(fetched(), 1, "once at start");
    let attacker = encoding_key(&OidcProvider::genkey("ES256", "x"));
    let now = now();
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "exp": now + 300, "iat": now, "scope": READ_WRITE});
    for i in 0..60 {
        let header = json!({"alg": "ES256", "typ": "at+jwt", "kid": format!("random-{i}")});
        let token = craft(&header, &claims, Some((&attacker, Algorithm::ES256)));
        assert_eq!(status(&server, EXPORT_1001, &token).await.0, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(failures(&server, "unknown_key"), 60);
    assert_eq!(fetched(), 1, "no fetch within the interval, whatever the kids");
    drop(provider);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opaque_and_jwt_tokens_side_by_side() {
    let keys = keys();
    let provider = OidcProvider::start(provider_config(&keys));
    let mut config = OidcConfig::new(provider.issuer(), AUDIENCE);
    config.timeout = Duration::from_secs(5);
    let keys_cache = Arc::new(ProviderKeys::new(config).unwrap());
    keys_cache.refresh().await;
    // Opaque tokens are introspected at the endpoint that discovery names.
    let endpoint =
        keys_cache.endpoints().await.unwrap().introspection_endpoint.expect("an introspection endpoint");
    let credentials =
        ClientCredentials { client_id: "rs256".into(), client_secret: Secret("rs256-secret".into()) };
    let mut introspection = IntrospectionConfig::new(endpoint, credentials);
    introspection.timeout = Duration::from_secs(5);
    let introspector = Arc::new(Introspector::new(introspection).unwrap());
    let tokens = Arc::new(TokenStore::fixed(TokenSet::parse(&tokens_toml()).unwrap()));
    let auth =
        Authenticator::new(Some(tokens), Some(introspector)).with_jwt(Arc::new(JwtVerifier::new(keys_cache)));
    let engine = engine(small_dataset(), EngineConfig { target_partitions: 2, ..EngineConfig::default() });
    let state = AppState::new(engine, auth, Settings::default()).await.unwrap();
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let introspected =
        || counter(&server.state.metrics_text(), "logs_introspection_requests_total{result=\"active\"}");

    // Without a resource indicator the provider issues an opaque token: introspected.
    let opaque = token(&provider, "app1001", None, "service:read").await;
    assert!(!logs_server::auth::jwt::looks_like_jwt(&opaque), "an opaque token");
    assert_eq!(status(&server, EXPORT_1001, &opaque).await.0, StatusCode::OK);
    assert_eq!(
        status(&server, EXPORT_1002, &opaque).await.0,
        StatusCode::FORBIDDEN,
        "its applications claim"
    );
    assert_eq!(introspected(), 1, "asked once, then cached");

    // A JWT of the same provider: checked here, the provider not asked.
    let jwt = token(&provider, "es256", Some(AUDIENCE), READ_WRITE).await;
    assert!(logs_server::auth::jwt::looks_like_jwt(&jwt));
    assert_eq!(status(&server, EXPORT_1002, &jwt).await.0, StatusCode::OK);
    assert_eq!(introspected(), 1);
    // And a token of the tokens file.
    assert_eq!(status(&server, EXPORT_1001, READER).await.0, StatusCode::OK);
    assert_eq!(introspected(), 1);
    server.stop().await;
}

/// A JWT's policy claim (`--oidc-policy-claim`) names its field policy: the named one applies,
/// an unknown name or a claim that is not a name exports nothing (403), and a token without
/// the claim gets the default.
#[tokio::test]
async fn the_policy_claim_names_the_field_policy_and_an_unknown_one_exports_nothing() {
    let keys = keys();
    let provider = OidcProvider::start(provider_config(&keys));
    let issuer = provider.issuer();
    let mut config = OidcConfig::new(&issuer, AUDIENCE);
    config.policy_claim = Some("logs_policy".into());
    config.timeout = Duration::from_secs(5);
    let jwt_keys = Arc::new(ProviderKeys::new(config).unwrap());
    jwt_keys.refresh().await;
    let auth = token_auth().with_jwt(Arc::new(JwtVerifier::new(jwt_keys)));
    let engine = engine(small_dataset(), EngineConfig { target_partitions: 2, ..EngineConfig::default() });
    let key = Arc::new(logs_core::PseudonymKey::new(&[9; 32]).unwrap());
    let policies = logs_core::Policies::parse(
        "default = \"minimal\"\n[policies.minimal]\nfields = { service_device_id = \"deny\" }\n\
         [policies.contractor]\nfields = { service_device_id = \"pseudonymise\", error = \"scrub\" }\n",
        Some(key),
    )
    .unwrap();
    let state =
        AppState::new(engine, auth, Settings::default()).await.unwrap().with_policies(Arc::new(policies));
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let signing = encoding_key(&keys[0]);
    let now = now();
    let token = |policy: Value| {
        let mut claims = json!({"iss": issuer, "aud": AUDIENCE, "exp": now + 300, "iat": now, "sub": "partner",
                                "client_id": "partner", "scope": READ_WRITE, "applications": "*"});
        if !policy.is_null() {
            claims["logs_policy"] = policy;
        }
        craft(
            &json!({"alg": "RS256", "typ": "at+jwt", "kid": "rsa-1"}),
            &claims,
            Some((&signing, Algorithm::RS256)),
        )
    };
    let target = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01\
                  &fields=error_id,service_device_id,error";
    let response =
        client().get(server.url(target)).bearer_auth(token(json!("contractor"))).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["logs-field-policy"], "service_device_id=pseudonymise, error=scrub");
    for claim in [json!("nobody"), json!(42)] {
        let response =
            client().get(server.url(target)).bearer_auth(token(claim.clone())).send().await.unwrap();
        let status = response.status();
        let body = error_body(status, &response.bytes().await.unwrap(), "field_policy_unavailable");
        assert_eq!(status, StatusCode::FORBIDDEN, "{claim}: {body}");
    }
    // No claim: the default, which denies the device id.
    let (status, _, body) = status(&server, target, &token(Value::Null)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("service_device_id"), "{body}");
    server.stop().await;
}
