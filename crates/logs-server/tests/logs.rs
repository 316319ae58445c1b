//! Everything logged (at TRACE, by every crate in the process, as text and as JSON) while
//! tokens are used in every way, right and wrong, is captured: no token appears in it, and
//! the access lines say what they should.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use http::StatusCode;
use logs_core::EngineConfig;
use logs_server::auth::introspection::{ClientCredentials, Secret};
use logs_server::auth::{Authenticator, IntrospectionConfig, Introspector, TokenStore};
use logs_server::{AppState, ServeOptions, Settings};

const FILE_TOKEN: &str = "tok-log-file-7d1a54127b222502f5b7";
const UNKNOWN: &str = "tok-log-unknown-1f40fc92da241694750979";
const IDP_TOKEN: &str = "tok-log-idp-b2e98ad6f6eb8508dd6a14cf";
const CLIENT_SECRET: &str = "idp-secret-8d969eef6ecad3c29a3a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_is_ever_logged() {
    logged(); // installs the capture

    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    let file_entry =
        format!("[[tokens]]\nname = \"from-file\"\ntoken = \"{FILE_TOKEN}\"\nscopes = [\"service:read\"]\n");
    std::fs::write(&tokens, format!("{}\n{file_entry}", tokens_toml())).unwrap();
    let store = Arc::new(TokenStore::open(&tokens).unwrap());
    // The identity provider is down, so its error path is logged too.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let credentials =
        ClientCredentials { client_id: "logs".into(), client_secret: Secret(CLIENT_SECRET.into()) };
    let mut config =
        IntrospectionConfig::new(format!("http://{closed}/introspect").parse().unwrap(), credentials);
    config.timeout = Duration::from_millis(300);
    let introspector = Arc::new(Introspector::new(config).unwrap());
    let auth = Authenticator::new(Some(store.clone()), Some(introspector));
    let engine = engine(small_dataset(), EngineConfig::default());
    let state = AppState::new(engine, auth, Settings::default()).await.unwrap();
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    let client = client();
    let send = |path: String, authorization: Option<String>| {
        let mut request = client.get(server.url(&path)).header("x-request-id", "req-under-test");
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            response.bytes().await.unwrap();
            status
        }
    };

    let filtered = format!("{EXPORT_CSV}&os_name=android");
    assert_eq!(send(filtered.clone(), Some(format!("OAuth {READER}"))).await, StatusCode::OK);
    assert_eq!(send(EXPORT_CSV.into(), Some(format!("Bearer {FILE_TOKEN}"))).await, StatusCode::OK);
    assert_eq!(
        send(format!("{EXPORT_CSV}&access_token={READER}"), Some(format!("OAuth {READER}"))).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(send(format!("/healthz?oauth_token={FILE_TOKEN}"), None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(send(format!("{EXPORT_CSV}&token={UNKNOWN}"), None).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        send(EXPORT_CSV.into(), Some(format!("OAuth {UNKNOWN}"))).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(
        send(EXPORT_CSV.into(), Some(format!("OAuth {IDP_TOKEN}"))).await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(send(EXPORT_CSV.into(), Some(format!("Basic {READER}"))).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        send(EXPORT_CSV.into(), Some(format!("OAuth {READER} {FILE_TOKEN}"))).await,
        StatusCode::UNAUTHORIZED
    );
    // A broken tokens file with a token in it is reported without the token.
    std::fs::write(
        &tokens,
        format!("[[tokens]]\nname = \"x\"\ntoken = \"{FILE_TOKEN}\"\nscopes = \"{FILE_TOKEN}\"\n"),
    )
    .unwrap();
    assert!(matches!(store.reload(false), logs_server::auth::tokens_file::Reload::Failed(_)));
    server.stop().await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let logged = logged();
    for secret in [READER, FILE_TOKEN, UNKNOWN, IDP_TOKEN, CLIENT_SECRET, WRITER, APP1001] {
        assert!(!logged.contains(secret), "{secret} was logged");
        // Nor its hash, which would allow an offline guess of weak tokens.
        assert!(!logged.contains(&sha256_hex(secret)), "the hash of {secret} was logged");
    }
    let access: Vec<&str> = logged.lines().filter(|l| l.contains("logs_server::access")).collect();
    assert!(access.len() >= 2 * 9, "text and JSON access lines: {access:#?}");
    let first = access.iter().find(|l| l.contains("os_name=android") && !l.starts_with('{')).unwrap();
    for expected in [
        "method=GET",
        "status=200",
        "token=\"reader\"",
        "complete=true",
        "id=req-under-test",
        "/logs/v1/export/errors.csv?application_id=1001",
    ] {
        assert!(first.contains(expected), "{expected} in {first}");
    }
    assert!(first.contains("rows=") && !first.contains("rows=0 "), "{first}");
    let json_line = access.iter().find(|l| l.starts_with('{') && l.contains("from-file")).unwrap();
    let v: serde_json::Value = serde_json::from_str(json_line).unwrap();
    assert_eq!(v["fields"]["status"], 200);
    assert!(v["fields"]["bytes"].as_u64().unwrap() > 1000);
    assert!(access.iter().any(|l| l.contains("access_token=REDACTED")), "{access:#?}");
    assert!(access.iter().any(|l| l.contains("oauth_token=REDACTED")));
    assert!(logged.contains("the tokens file is invalid"));
    assert!(logged.contains("token introspection"), "the provider failure is logged");
}
