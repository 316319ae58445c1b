//! The service built from a configuration value (`logs_server::service`), as `logs serve`,
//! `logs-loadtest` and embedders build it: it serves over a real socket and stops when told,
//! and each kind of bad configuration is reported as what it is.

mod common;

use std::time::Duration;

use common::*;
use logs_core::DatasetLocation;
use logs_server::auth::TokenSet;
use logs_server::service::{Service, ServiceConfig, ServiceError, Tokens};

fn config(data: DatasetLocation, tokens: Tokens) -> ServiceConfig {
    ServiceConfig { listen: "127.0.0.1:0".parse().unwrap(), tokens, ..ServiceConfig::new(data) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_service_serves_on_its_port_and_stops_when_told() {
    let set = TokenSet::parse(&tokens_toml()).unwrap();
    let mut config = config(DatasetLocation::from(small_dataset()), Tokens::Fixed(set));
    config.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    let service = Service::build(config).await.unwrap();
    assert!(service.generated_token().is_none(), "a fixed token set: nothing generated");
    let (address, admin) = (service.address(), service.admin_address().unwrap());
    assert_ne!(address.port(), 0);
    let target = service.example_target().await;
    assert!(
        target.starts_with("/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01"),
        "{target}"
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(service.run_until_stopped(async {
        let _ = stopped.await;
    }));

    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let response = client.get(format!("http://{address}{target}")).send().await.unwrap();
    assert_eq!(response.status(), 401, "every route checks the token");
    let response = client
        .get(format!("http://{address}{target}"))
        .header("Authorization", format!("OAuth {READER}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(body.starts_with("error_datetime,error_name,os_name\n") && body.lines().count() == 11, "{body}");
    let metrics = client.get(format!("http://{admin}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("logs_"), "{metrics}");

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert!(reqwest::get(format!("http://{address}/healthz")).await.is_err(), "stopped listening");
}

#[tokio::test]
async fn a_generated_token_is_made_only_without_other_sources() {
    let service =
        Service::build(config(DatasetLocation::from(small_dataset()), Tokens::Generated)).await.unwrap();
    let token = service.generated_token().expect("a generated token");
    assert!(logs_server::auth::is_token_syntax(token) && token.len() == 64);
}

#[tokio::test]
async fn bad_configuration_is_told_from_what_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let data = || DatasetLocation::from(small_dataset());
    // Invalid: no token source at all; a tokens file whose content is wrong.
    let e = Service::build(config(data(), Tokens::None)).await.unwrap_err();
    assert!(e.is_invalid_configuration(), "{e}");
    let broken = dir.path().join("tokens.toml");
    std::fs::write(&broken, "[[tokens]]\nname = 3\n").unwrap();
    let tokens = Tokens::File { path: broken, reload_interval: Duration::from_secs(2) };
    let e = Service::build(config(data(), tokens)).await.unwrap_err();
    assert!(e.is_invalid_configuration(), "{e}");
    // Cannot be read: a missing tokens file, a missing dataset, a port taken.
    let missing =
        Tokens::File { path: dir.path().join("nope.toml"), reload_interval: Duration::from_secs(2) };
    let e = Service::build(config(data(), missing)).await.unwrap_err();
    assert!(!e.is_invalid_configuration(), "{e}");
    let e = Service::build(config(DatasetLocation::from(dir.path().join("no-data")), Tokens::Generated))
        .await
        .unwrap_err();
    assert!(matches!(e, ServiceError::Dataset { .. }) && !e.is_invalid_configuration(), "{e}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = ServiceConfig { listen: taken.local_addr().unwrap(), ..config(data(), Tokens::Generated) };
    let e = Service::build(busy).await.unwrap_err();
    assert!(matches!(e, ServiceError::Listen { what: "API", .. }) && !e.is_invalid_configuration(), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_answers_not_ready_while_requests_are_still_served() {
    let set = TokenSet::parse(&tokens_toml()).unwrap();
    let mut config = config(DatasetLocation::from(small_dataset()), Tokens::Fixed(set));
    config.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    // Long enough for a cold export of a debug build on a loaded machine to fit inside it.
    let drain = Duration::from_secs(8);
    config.drain_delay = drain;
    let service = Service::build(config).await.unwrap();
    let (address, admin) = (service.address(), service.admin_address().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(service.run_until_stopped(async {
        let _ = stopped.await;
    }));
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let readyz = || client.get(format!("http://{admin}/readyz")).send();
    let ready = readyz().await.unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.text().await.unwrap(), r#"{"status":"ready"}"#);

    let asked = std::time::Instant::now();
    stop.send(()).unwrap();
    // The drain begins when the service's task sees the stop: ask until it answers so.
    let deadline = asked + drain;
    let draining = loop {
        let answer = readyz().await.unwrap();
        if answer.status() == 503 {
            break answer;
        }
        assert_eq!(answer.status(), 200);
        assert!(std::time::Instant::now() < deadline, "still ready after the drain delay");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(draining.text().await.unwrap(), r#"{"status":"draining"}"#);
    // Requests are still served while a balancer notices.
    let export = client
        .get(format!("http://{address}{EXPORT_CSV}"))
        .header("Authorization", format!("OAuth {READER}"))
        .send()
        .await
        .unwrap();
    assert_eq!(export.status(), 200);
    assert!(!export.bytes().await.unwrap().is_empty());
    assert!(!running.is_finished(), "the export came within the drain delay");
    running.await.unwrap().unwrap();
    assert!(asked.elapsed() >= drain, "stopped before the drain delay");
    assert!(reqwest::get(format!("http://{address}/healthz")).await.is_err(), "stopped listening");
}

#[tokio::test]
async fn readyz_names_a_dataset_or_an_identity_provider_that_does_not_answer() {
    use http::{Method, StatusCode};
    use logs_server::auth::introspection::{ClientCredentials, Secret};
    use logs_server::auth::{Authenticator, IntrospectionConfig, Introspector};

    // The dataset: ready, then its folder is gone.
    let data = tempfile::tempdir().unwrap();
    generate(data.path(), 500, 1);
    let admin = logs_server::admin_app(state(data.path(), logs_server::Settings::default()).await);
    let (status, _, body) = call(&admin, Method::GET, "/readyz", &[]).await;
    assert_eq!((status, body.as_ref()), (StatusCode::OK, br#"{"status":"ready"}"#.as_slice()));
    std::fs::remove_dir_all(data.path()).unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, _, body) = call(&admin, Method::GET, "/readyz", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body.as_ref(), br#"{"status":"not_ready","reason":"dataset"}"#);

    // The identity provider: one that answers (inactive, for the probe) and one that does not.
    let provider = async |url: String| {
        let credentials = ClientCredentials { client_id: "logs".into(), client_secret: Secret("s".into()) };
        let introspector =
            Introspector::new(IntrospectionConfig::new(url.parse().unwrap(), credentials)).unwrap();
        let auth = Authenticator::new(None, Some(std::sync::Arc::new(introspector)));
        let config = logs_core::EngineConfig { target_partitions: 2, ..logs_core::EngineConfig::default() };
        let state = logs_server::AppState::new(
            engine(small_dataset(), config),
            auth,
            logs_server::Settings::default(),
        );
        let admin = logs_server::admin_app(state.await.unwrap());
        call(&admin, Method::GET, "/readyz", &[]).await
    };
    let answering = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/introspect", answering.local_addr().unwrap());
    let inactive = axum::Router::new().route(
        "/introspect",
        axum::routing::post(|| async { axum::Json(serde_json::json!({"active": false})) }),
    );
    tokio::spawn(async move { axum::serve(answering, inactive).await });
    let (status, _, body) = provider(url).await;
    assert_eq!((status, body.as_ref()), (StatusCode::OK, br#"{"status":"ready"}"#.as_slice()));
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (status, _, body) = provider(format!("http://{closed}/introspect")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body.as_ref(), br#"{"status":"not_ready","reason":"identity_provider"}"#);
}
