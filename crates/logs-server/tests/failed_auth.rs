//! The failed-authentication limit over real sockets: clients on different loopback addresses
//! (Linux routes all of 127/8 to the machine), a forwarding header believed from a trusted
//! proxy only, and the address the access log shows.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::*;
use http::StatusCode;
use logs_server::auth::{ForwardedHeader, TrustedProxies};
use logs_server::{ServeOptions, Settings};

/// A client whose connections come from `address`.
fn client_from(address: &str) -> reqwest::Client {
    logs_server::install_tls_provider();
    reqwest::Client::builder().local_address(address.parse::<IpAddr>().unwrap()).build().unwrap()
}

async fn get(
    client: &reqwest::Client,
    server: &TestServer,
    token: &str,
    forwarded: Option<&str>,
) -> reqwest::Response {
    let mut request = client.get(server.url(EXPORT_CSV)).bearer_auth(token);
    if let Some(value) = forwarded {
        request = request.header("x-forwarded-for", value);
    }
    request.send().await.unwrap()
}

async fn server(limit: u32, window: Duration) -> TestServer {
    let proxies = TrustedProxies::parse("127.0.0.1", ForwardedHeader::XForwardedFor).unwrap();
    let settings = Settings {
        auth_failure_limit: limit,
        auth_failure_window: window,
        trusted_proxies: proxies,
        ..Settings::default()
    };
    let state = state(small_dataset(), settings).await;
    TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_with_too_many_401s_gets_429_whatever_its_token_and_others_do_not() {
    let server = server(3, Duration::from_secs(60)).await;
    let (a, b) = (client_from("127.0.0.2"), client_from("127.0.0.3"));
    for i in 0..3 {
        let status = get(&a, &server, &format!("tok-guess-{i}"), None).await.status();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "guess {i}");
    }
    for token in ["tok-guess-4", READER] {
        let response = get(&a, &server, token, None).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = response.headers()[http::header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&wait), "Retry-After {wait}");
        let body = response.bytes().await.unwrap();
        error_body(StatusCode::TOO_MANY_REQUESTS, &body, "too_many_failed_authentications");
    }
    // /healthz needs no token and is never refused.
    let health = a.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    // Another address is not affected, its own guesses counted apart.
    assert_eq!(get(&b, &server, "tok-guess-b", None).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(get(&b, &server, READER, None).await.status(), StatusCode::OK);
    // A forwarding header from a peer that is no trusted proxy changes nothing.
    let spoofed = get(&a, &server, READER, Some("127.0.0.9")).await;
    assert_eq!(spoofed.status(), StatusCode::TOO_MANY_REQUESTS);
    let text = server.state.metrics_text();
    assert!(text.contains("logs_auth_failures_total{reason=\"too_many_failures\"} 3"), "{text}");
    assert!(text.contains("logs_auth_failures_total{reason=\"invalid\"} 4"), "{text}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_client_is_counted_and_logged() {
    logged(); // installs the capturing subscriber
    let server = server(2, Duration::from_secs(60)).await;
    let proxy = client_from("127.0.0.1");
    // The proxy forwards two clients; the left-most value is the first client's own lie.
    for _ in 0..2 {
        let status = get(&proxy, &server, "tok-guess", Some("6.6.6.6, 198.51.100.7")).await.status();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let limited = get(&proxy, &server, READER, Some("6.6.6.7, 198.51.100.7")).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS, "198.51.100.7 is limited");
    limited.bytes().await.unwrap();
    let other = get(&proxy, &server, READER, Some("198.51.100.8")).await;
    assert_eq!(other.status(), StatusCode::OK, "another client behind the same proxy");
    other.bytes().await.unwrap();
    server.stop().await;
    let logged = logged();
    let access: Vec<&str> = logged.lines().filter(|l| l.contains("logs_server::access")).collect();
    assert!(
        access.iter().any(|l| l.contains("client=198.51.100.7") && l.contains("status=429")),
        "{access:#?}"
    );
    assert!(
        access.iter().any(|l| l.contains("client=198.51.100.8") && l.contains("status=200")),
        "{access:#?}"
    );
    assert!(!logged.contains("6.6.6.6"), "the client's own value is not logged as its address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_ends_with_its_window() {
    let server = server(1, Duration::from_millis(800)).await;
    let a = client_from("127.0.0.4");
    assert_eq!(get(&a, &server, "tok-guess", None).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(get(&a, &server, READER, None).await.status(), StatusCode::TOO_MANY_REQUESTS);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(get(&a, &server, READER, None).await.status(), StatusCode::OK);
    server.stop().await;
}
