//! Secrets: everything logged (TRACE, every crate, as text and as JSON) while tokens travel in
//! headers and in query strings (`oauth_token`, `access_token`, `token` in any case and
//! spelling, and other secret-looking names) across every route and every way a request can
//! end (200, 400, 401, 403, 404, 405, 414, 429, 431, 503, hyper's own 400), holds none of the
//! tokens, nor their SHA-256, nor the client secret sent to the identity provider; no response
//! (head or body) echoes one. And a CR LF in a filter value or a parameter name cannot inject
//! a response header: it only ever appears escaped.

mod common;
mod raw_http;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::IntoResponse;
use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use logs_core::EngineConfig;
use logs_server::auth::introspection::{ClientCredentials, Secret};
use logs_server::auth::{Authenticator, IntrospectionConfig, Introspector, TokenHash, TokenStore};
use logs_server::{AppState, ServeOptions, Settings};
use serde_json::json;

const CLIENT_ID: &str = "logs-secrets";
const CLIENT_SECRET: &str = "idp-client-secret-4c1b9e7a";
/// From the tokens file (in plain text, which is logged as a warning by name).
const FILE_READ: &str = "sec-file-read-0a1b2c3d4e5f";
const FILE_WRITE: &str = "sec-file-write-6a7b8c9d0e1f";
const FILE_APP1003: &str = "sec-file-app1003-2b3c4d5e6f7a";
/// Held at its export limit by the test, for 429.
const FILE_BUSY: &str = "sec-file-busy-8c9d0e1f2a3b";
/// From the identity provider.
const IDP_OK: &str = "sec-idp-ok-4d5e6f7a8b9c";
const IDP_EXPIRED: &str = "sec-idp-expired-0e1f2a3b4c5d";
const IDP_BROKEN: &str = "sec-idp-broken-6f7a8b9c0d1e";
const IDP_GARBAGE: &str = "sec-idp-garbage-2a3b4c5d6e7f";

async fn introspect(body: Bytes) -> axum::response::Response {
    let token = form_urlencoded::parse(&body).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    match token.as_deref().unwrap_or_default() {
        IDP_OK => axum::Json(json!({"active": true, "scope": "service:read", "client_id": "idp-ok",
                                    "exp": now + 600, "applications": [1001]}))
        .into_response(),
        IDP_EXPIRED => {
            axum::Json(json!({"active": true, "scope": "service:read", "exp": now - 5})).into_response()
        }
        // The provider's own errors may quote what it was sent; the service must not log them.
        IDP_BROKEN => (StatusCode::INTERNAL_SERVER_ERROR, format!("failed for {IDP_BROKEN}")).into_response(),
        IDP_GARBAGE => (StatusCode::OK, format!("<html>{IDP_GARBAGE}")).into_response(),
        _ => axum::Json(json!({"active": false})).into_response(),
    }
}

async fn provider() -> SocketAddr {
    let app = axum::Router::new().route("/introspect", axum::routing::post(introspect));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A dataset of three applications whose application 1002 has an unreadable file (503).
fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), 3_000, 2);
    let broken = dir.path().join("application_id=1002/date=2026-10-01/part-00000.parquet");
    std::fs::write(broken, b"PAR1 not really").unwrap();
    dir
}

struct Service {
    server: TestServer,
    _data: tempfile::TempDir,
    _tokens: tempfile::TempDir,
}

async fn start() -> Service {
    logged();
    let data = dataset();
    let tokens_dir = tempfile::tempdir().unwrap();
    let tokens_file = tokens_dir.path().join("tokens.toml");
    let entry = |name: &str, token: &str, scopes: &str, apps: &str| {
        format!("[[tokens]]\nname = \"{name}\"\ntoken = \"{token}\"\nscopes = [{scopes}]\n{apps}\n")
    };
    let text = [
        entry("file-read", FILE_READ, "\"service:read\"", ""),
        entry("file-write", FILE_WRITE, "\"service:write\"", ""),
        entry("file-app1003", FILE_APP1003, "\"service:read\"", "applications = [1003]"),
        entry("file-busy", FILE_BUSY, "\"service:read\"", ""),
    ]
    .concat();
    std::fs::write(&tokens_file, text).unwrap();
    let store = Arc::new(TokenStore::open(&tokens_file).unwrap());
    let credentials =
        ClientCredentials { client_id: CLIENT_ID.into(), client_secret: Secret(CLIENT_SECRET.into()) };
    let mut config = IntrospectionConfig::new(
        format!("http://{}/introspect", provider().await).parse().unwrap(),
        credentials,
    );
    config.timeout = Duration::from_secs(5);
    let auth = Authenticator::new(Some(store), Some(Arc::new(Introspector::new(config).unwrap())));
    let engine = engine(data.path(), EngineConfig { target_partitions: 2, ..EngineConfig::default() });
    // Many of its requests are 401s from one address: the failed-authentication limit is off
    // (tests/failed_auth.rs tests it).
    let settings =
        Settings { max_exports: 3, max_exports_per_token: 1, auth_failure_limit: 0, ..Settings::default() };
    let state = AppState::new(engine, auth, settings).await.unwrap();
    let server = TestServer::start(state.clone(), ServeOptions::for_settings(state.settings())).await;
    Service { server, _data: data, _tokens: tokens_dir }
}

fn export(app: i64) -> String {
    format!(
        "/logs/v1/export/errors.csv?application_id={app}&date_since=2026-10-01&date_until=2026-10-02&\
         fields=error_id,os_name&limit=5"
    )
}

/// A fresh token-shaped secret, different for every request that carries one.
fn fresh(n: &mut u32) -> String {
    *n += 1;
    format!("sec-fresh-{n:04}-{}", &sha256_hex(&n.to_string())[..16])
}

/// The standard base64 of `bytes` (for the provider's Basic credentials).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Parameter names under which a token may arrive in the query.
const REFUSED_NAMES: [&str; 8] = [
    "oauth_token",
    "access_token",
    "token",
    "OAuth_Token",
    "ACCESS_TOKEN",
    "Token",
    "to%6Ben",
    "%61ccess_token",
];
/// Names that are not refused as tokens but whose values are still redacted in the log.
const REDACTED_NAMES: [&str; 5] =
    ["refresh_token", "id_token", "client_secret", "password", "x-authorization"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_a_log_line_or_a_response() {
    let service = start().await;
    let server = &service.server;
    let client = client();
    let mut secrets: Vec<String> = [
        FILE_READ,
        FILE_WRITE,
        FILE_APP1003,
        FILE_BUSY,
        IDP_OK,
        IDP_EXPIRED,
        IDP_BROKEN,
        IDP_GARBAGE,
        CLIENT_SECRET,
    ]
    .map(str::to_owned)
    .to_vec();
    let mut n = 0;
    let mut statuses = std::collections::BTreeSet::new();
    let mut responses: Vec<String> = Vec::new();

    // (method, target, Authorization, expected status)
    let mut requests: Vec<(Method, String, Option<String>, u16)> = Vec::new();
    let oauth = |token: &str| Some(format!("OAuth {token}"));
    let bad_parameter = format!("{}&limit=0", export(1001));
    let long = format!("{}&city={}", export(1001), "x".repeat(9 * 1024));
    for (target, ok) in [
        (export(1001), 200),
        (export(1001).replace(".csv", ".json"), 200),
        ("/management/v1/applications".to_owned(), 200),
        ("/openapi.json".to_owned(), 200),
        ("/healthz".to_owned(), 200),
        ("/logs/v1/nope".to_owned(), 404),
        (bad_parameter.clone(), 400),
        (long.clone(), 414),
    ] {
        requests.push((Method::GET, target.clone(), oauth(FILE_READ), ok));
        requests.push((Method::HEAD, target.clone(), oauth(FILE_READ), ok));
        let unknown = fresh(&mut n);
        let refused = match ok {
            414 => 414,
            _ if target == "/healthz" => 200,
            _ => 401,
        };
        requests.push((Method::GET, target.clone(), oauth(&unknown), refused));
        requests.push((Method::GET, target.clone(), Some(format!("Basic {}", fresh(&mut n))), refused));
        let (a, b) = (fresh(&mut n), fresh(&mut n));
        requests.push((Method::GET, target.clone(), Some(format!("Bearer {a} {b}")), refused));
        // A wrong method with an unknown token: 401 before routing (405), but /healthz needs none.
        let wrong_method = match ok {
            414 => 414,
            _ if target == "/healthz" => 405,
            _ => 401,
        };
        requests.push((Method::POST, target.clone(), oauth(&fresh(&mut n)), wrong_method));
        secrets.push(unknown);
    }
    requests.extend([
        (Method::POST, export(1001), oauth(FILE_READ), 405),
        (Method::GET, export(1001), oauth(FILE_WRITE), 403),
        (Method::GET, export(1001), oauth(FILE_APP1003), 403),
        (Method::GET, export(1002), oauth(FILE_READ), 503),
        (Method::GET, export(1001), oauth(FILE_BUSY), 429),
        (Method::GET, export(1001), oauth(IDP_OK), 200),
        (Method::GET, export(1002), oauth(IDP_OK), 403),
        (Method::GET, export(1001), oauth(IDP_EXPIRED), 401),
        (Method::GET, export(1001), oauth(IDP_BROKEN), 503),
        (Method::GET, export(1001), oauth(IDP_GARBAGE), 503),
        (Method::GET, export(1001), Some(format!("Bearer {}", fresh(&mut n))), 401),
    ]);
    // Tokens in the query string, with and without a valid header, on every kind of path.
    for target in [export(1001), "/healthz".to_owned(), "/logs/v1/nope".to_owned(), bad_parameter.clone()] {
        let separator = if target.contains('?') { '&' } else { '?' };
        for name in REFUSED_NAMES {
            for header in [None, oauth(FILE_READ)] {
                let secret = fresh(&mut n);
                requests.push((Method::GET, format!("{target}{separator}{name}={secret}"), header, 401));
                secrets.push(secret);
            }
        }
        for name in REDACTED_NAMES {
            let secret = fresh(&mut n);
            let status = match target.as_str() {
                "/healthz" => 200,
                "/logs/v1/nope" => 404,
                _ => 400,
            };
            requests.push((
                Method::GET,
                format!("{target}{separator}{name}={secret}"),
                oauth(FILE_READ),
                status,
            ));
            secrets.push(secret);
        }
    }
    // A token in the query of a request refused for its size is redacted all the same.
    let secret = fresh(&mut n);
    requests.push((Method::GET, format!("{long}&access_token={secret}"), None, 414));
    secrets.push(secret);

    let busy = server.state.limiter().acquire(TokenHash::of(FILE_BUSY)).unwrap();
    for (method, target, authorization, expected) in requests {
        if let Some(value) = &authorization {
            for word in value.split(' ').skip(1) {
                secrets.push(word.to_owned());
            }
        }
        let mut request = client.request(method.clone(), server.url(&target));
        if let Some(value) = &authorization {
            request = request.header("Authorization", value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let head = format!("{:?}", response.headers());
        let body = String::from_utf8_lossy(&response.bytes().await.unwrap()).into_owned();
        assert_eq!(status, expected, "{method} {target} with {authorization:?}: {body}");
        statuses.insert(status);
        responses.push(format!("{head}\n{body}"));
    }
    // 431, with a token in the header and in the query.
    let secret = fresh(&mut n);
    let response = client
        .get(server.url(&format!("/healthz?token={secret}")))
        .header("Authorization", format!("OAuth {FILE_READ}"))
        .header("x-big", "y".repeat(17 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    statuses.insert(431);
    secrets.push(secret);
    // The server full: 503.
    let _others: Vec<_> =
        ["a", "b"].map(|t| server.state.limiter().acquire(TokenHash::of(t)).unwrap()).into();
    let response =
        client.get(server.url(&export(1001))).header("Authorization", format!("OAuth {FILE_READ}"));
    let response = response.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    responses.push(response.text().await.unwrap());
    drop((busy, _others));
    let secret = fresh(&mut n);
    // What hyper refuses before the service: NUL in the header, a folded header.
    for (i, request) in [
        format!("GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: OAuth {secret}\0\r\n\r\n"),
        format!("GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: OAuth\r\n {secret}\r\n\r\n"),
    ]
    .iter()
    .enumerate()
    {
        let answer = raw_http::exchange_one(server.addr, request.as_bytes()).await.unwrap();
        assert_eq!(answer.status, 400, "raw request {i}");
        statuses.insert(400);
    }
    secrets.push(secret);

    service.server.stop().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        statuses.into_iter().collect::<Vec<_>>(),
        [200, 400, 401, 403, 404, 405, 414, 429, 431, 503],
        "every way a request ends was reached"
    );

    let logged = logged();
    let basic = base64(format!("{CLIENT_ID}:{CLIENT_SECRET}").as_bytes());
    for secret in &secrets {
        assert!(!logged.contains(secret.as_str()), "`{secret}` was logged");
        assert!(!logged.contains(&sha256_hex(secret)), "the SHA-256 of `{secret}` was logged");
        for response in &responses {
            assert!(!response.contains(secret.as_str()), "`{secret}` echoed in {response}");
        }
    }
    assert!(!logged.contains(&basic), "the provider's Basic credentials were logged");
    // The query-string tokens are in the access lines, redacted, under every name.
    for name in REFUSED_NAMES.iter().chain(&REDACTED_NAMES) {
        assert!(logged.contains(&format!("{name}=REDACTED")), "{name}");
    }
    // The access lines name the tokens that authenticated, by name.
    for name in ["token=\"file-read\"", "token=\"file-write\"", "token=\"idp-ok\""] {
        assert!(logged.contains(name), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cr_lf_in_a_value_or_a_name_cannot_inject_a_header() {
    let service = start().await;
    let addr = service.server.addr;
    let injection = "%0D%0ASet-Cookie:%20injected=1%0D%0A%0D%0A%3Chtml%3E";
    let auth = format!("Authorization: OAuth {FILE_READ}");
    let cases = [
        // A valid filter: no row has that value.
        (format!("{}&os_name=ios{injection}", export(1001)), 200),
        // Quoted back in an error message.
        (export(1001).replace("date_since=2026-10-01", &format!("date_since=2026-10-01{injection}")), 400),
        // As a parameter name.
        (format!("{}&x{injection}=1", export(1001)), 400),
        // As a request id, which is not plain and so is replaced.
        (format!("/healthz?id={injection}"), 200),
    ];
    for (target, expected) in cases {
        let request = raw_http::get_request(&target, "x", &[&auth, &format!("x-request-id: a{injection}")]);
        let answer = raw_http::exchange_one(addr, &request).await.expect("an answer");
        assert_eq!(answer.status, expected, "{target}");
        let head = String::from_utf8_lossy(&answer.head).into_owned();
        assert!(!head.to_ascii_lowercase().contains("set-cookie") && !head.contains("injected"), "{head}");
        assert!(answer.headers.iter().all(|(name, _)| name != "<html>"), "{head}");
        assert_ne!(answer.header("x-request-id"), Some(format!("a{injection}").as_str()));
        // In a body the value is escaped: JSON has no raw CR or LF inside strings, and CSV
        // has no row here.
        let body = String::from_utf8_lossy(&answer.body).into_owned();
        match expected {
            200 if target.starts_with("/healthz") => {}
            200 => assert_eq!(body, "error_id,os_name\n"),
            _ => {
                assert!(!body.contains(['\r', '\n']), "{body:?}");
                // Quoted back in the message, a value or a name is escaped even inside the JSON
                // string.
                let message = answer.json()["message"].as_str().unwrap().to_owned();
                assert!(!message.contains(['\r', '\n']), "{message:?}");
            }
        }
    }
    service.server.stop().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let logged = logged();
    // The access log keeps the target as received (percent-encoded).
    assert!(logged.contains("Set-Cookie:%20injected=1"), "the access line shows the value escaped");
    // At the levels `logs serve` writes by default (info and above) the value never appears
    // decoded, so no log line can be forged with it.
    for (level, event) in events(&logged) {
        if ["INFO", "WARN", "ERROR"].contains(&level.as_str()) {
            assert!(!event.contains("Set-Cookie: injected"), "{event}");
        }
    }
}

/// The captured log as events: (level, text), a text-format event with its continuation
/// lines, a JSON event alone on its line.
fn events(logged: &str) -> Vec<(String, String)> {
    let mut events: Vec<(String, String)> = Vec::new();
    for line in logged.split('\n') {
        if line.starts_with('{') {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON log line");
            events.push((v["level"].as_str().unwrap_or_default().to_owned(), line.to_owned()));
        } else if line.len() > 20
            && line.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && line.as_bytes()[4] == b'-'
        {
            let level = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
            events.push((level, line.to_owned()));
        } else if let Some((_, text)) = events.last_mut() {
            text.push('\n');
            text.push_str(line);
        }
    }
    events
}
