//! Hostile HTTP against the real server on 127.0.0.1, written byte for byte over TCP: oversized
//! targets and heads, missing and odd `Host`s, every other method on every route,
//! `Authorization` values with CR, LF, NUL or line folding, invalid UTF-8 in the path and the
//! query, NUL in a filter, and protocol garbage. Each answer is the documented status (or, for
//! what hyper refuses before the service sees it, hyper's own 400/414/431 without a body, or a
//! closed connection), never a 5xx; and the server keeps answering afterwards.

mod common;
mod raw_http;

use std::time::{Duration, Instant};

use common::*;
use logs_server::{ServeOptions, Settings};
use raw_http::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const EXPORT: &str = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&\
                      date_until=2026-10-07&fields=error_id,city&limit=3";

/// The routes of the API, and a path that is none of them.
const ROUTES: [&str; 5] =
    [EXPORT, "/logs/v1/export/errors.json", "/management/v1/applications", "/healthz", "/logs/v1/nope"];

struct Fixture {
    server: TestServer,
    host: String,
    auth: String,
}

impl Fixture {
    async fn start() -> Fixture {
        Fixture::start_with(|_| {}).await
    }

    async fn start_with(adjust: impl FnOnce(&mut ServeOptions)) -> Fixture {
        // Many requests here are 401s from one address: the failed-authentication limit is
        // off (tests/failed_auth.rs tests it).
        let settings = Settings { auth_failure_limit: 0, ..Settings::default() };
        let state = state(small_dataset(), settings).await;
        let mut options = ServeOptions::for_settings(state.settings());
        adjust(&mut options);
        let server = TestServer::start(state.clone(), options).await;
        let host = server.addr.to_string();
        Fixture { server, host, auth: format!("Authorization: OAuth {READER}") }
    }

    async fn send(&self, request: &[u8]) -> Option<Answer> {
        exchange_one(self.server.addr, request).await
    }

    async fn get(&self, target: &str, headers: &[&str]) -> Answer {
        self.send(&get_request(target, &self.host, headers)).await.expect("an answer")
    }

    /// The server still answers, and no request so far got a 5xx from the service.
    async fn stop(self) {
        let answer = self.get("/healthz", &[]).await;
        assert_eq!(answer.status, 200);
        let metrics = self.server.state.metrics();
        let server_errors: u64 = (500..600).map(|s| metrics.requests_with_status(s)).sum();
        assert_eq!(server_errors, 0, "{}", self.server.state.metrics_text());
        self.server.stop().await;
    }
}

/// `request`'s answer: `expected` as status, and for the service's own answers (`error_type`
/// given) a JSON error body; hyper's refusals have none.
#[track_caller]
fn expect(answer: Option<&Answer>, what: &str, expected: u16, error_type: Option<&str>) {
    let answer = answer.unwrap_or_else(|| panic!("{what}: the connection closed without an answer"));
    assert_eq!(answer.status, expected, "{what}: {answer:?}");
    match error_type {
        Some(error_type) => {
            assert_eq!(answer.error_type(), error_type, "{what}");
            assert_eq!(answer.json()["code"], expected, "{what}");
        }
        None => assert!(answer.body.is_empty(), "{what}: hyper's own answer has no body: {answer:?}"),
    }
}

fn bytes(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_targets_and_heads_are_refused_first() {
    let f = Fixture::start().await;
    // Above --max-url-bytes (8 KiB): the service's 414, before authorization.
    let long = format!("{EXPORT}&city={}", "x".repeat(9 * 1024));
    for headers in [vec![], vec![f.auth.as_str()]] {
        expect(Some(&f.get(&long, &headers).await), "9 KiB target", 414, Some("uri_too_long"));
    }
    // Beyond what a URI can hold (64 KiB): hyper's 414. Beyond the hard head limit: hyper's 431.
    let answer = f.send(&get_request(&format!("/healthz?x={}", "a".repeat(70_000)), &f.host, &[])).await;
    expect(answer.as_ref(), "70 KiB target", 414, None);
    let answer = f.send(&get_request(&format!("/healthz?x={}", "a".repeat(200_000)), &f.host, &[])).await;
    expect(answer.as_ref(), "200 KiB target", 431, None);

    // Above --max-header-bytes (16 KiB): the service's 431, before authorization.
    let big = format!("x-big: {}", "b".repeat(17 * 1024));
    for headers in [vec![big.as_str()], vec![big.as_str(), f.auth.as_str()]] {
        expect(Some(&f.get(EXPORT, &headers).await), "17 KiB header", 431, Some("headers_too_large"));
    }
    // More than 100 headers, or far beyond the limit: hyper's 431.
    let many: Vec<String> = (0..101).map(|i| format!("x-h{i}: v")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    expect(f.send(&get_request("/healthz", &f.host, &many)).await.as_ref(), "101 headers", 431, None);
    let huge = format!("x-big: {}", "b".repeat(200_000));
    expect(f.send(&get_request("/healthz", &f.host, &[&huge])).await.as_ref(), "200 KiB header", 431, None);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_duplicate_or_odd_hosts_change_nothing() {
    let f = Fixture::start().await;
    let auth = f.auth.as_bytes();
    let long_host = "h".repeat(4096);
    // Each is a request head up to (not including) `Connection: close` and the empty line,
    // with `{target}` for the request target, and whether RFC 9112 §3.2 refuses it (400).
    let heads: Vec<(Vec<u8>, bool)> = vec![
        (b"GET {target} HTTP/1.1\r\n".to_vec(), true),
        (b"GET {target} HTTP/1.0\r\n".to_vec(), false),
        (b"GET {target} HTTP/1.1\r\nHost: \r\n".to_vec(), false),
        (b"GET {target} HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n".to_vec(), true),
        (b"GET {target} HTTP/1.1\r\nHost: a b\r\n".to_vec(), true),
        (b"GET {target} HTTP/1.1\r\nHost: \xff\xfe\r\n".to_vec(), true),
        (b"GET {target} HTTP/1.1\r\nHost: evil.example:99999\r\n".to_vec(), false),
        (format!("GET {{target}} HTTP/1.1\r\nHost: {long_host}\r\n").into_bytes(), true),
        // The absolute form names another host than the Host header.
        (b"GET http://evil.example{target} HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_vec(), false),
    ];
    for (head, refused) in heads {
        for (target, token, expected) in [("/healthz", false, 200), (EXPORT, false, 401), (EXPORT, true, 200)]
        {
            let expected = if refused { 400 } else { expected };
            let at = head.windows(8).position(|w| w == b"{target}").unwrap();
            let mut request = bytes(&[&head[..at], target.as_bytes(), &head[at + 8..]]);
            if token {
                request.extend_from_slice(auth);
                request.extend_from_slice(b"\r\n");
            }
            request.extend_from_slice(b"Connection: close\r\n\r\n");
            let answer = f.send(&request).await;
            let what = String::from_utf8_lossy(&request[..request.len().min(120)]).into_owned();
            let answer = answer.unwrap_or_else(|| panic!("{what}: no answer"));
            assert_eq!(answer.status, expected, "{what}");
            if expected == 401 {
                assert_eq!(answer.error_type(), "unauthorized");
            }
            if expected == 400 {
                assert_eq!(answer.error_type(), "bad_request");
            }
            // Nothing is built from the Host: no redirect, no echo.
            assert!(answer.header("location").is_none(), "{what}");
            for host in ["evil.example", "a.example", "b.example", long_host.as_str()] {
                assert!(!String::from_utf8_lossy(&answer.body).contains(host), "{what}");
                assert!(!String::from_utf8_lossy(&answer.head).contains(host), "{what}");
            }
        }
    }
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_are_405_with_allow_or_401_without_a_token() {
    let f = Fixture::start().await;
    let methods = ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "PROPFIND", "get"];
    for route in ROUTES {
        for method in methods {
            for token in [true, false] {
                let mut request = format!("{method} {route} HTTP/1.1\r\nHost: {}\r\n", f.host);
                if token {
                    request.push_str(&f.auth);
                    request.push_str("\r\n");
                }
                request.push_str("Content-Length: 5\r\nConnection: close\r\n\r\nhello");
                let answer = f.send(request.as_bytes()).await;
                let what = format!("{method} {route} with token: {token}");
                // The order of checks: the token (401), then routing (404, 405); /healthz
                // needs no token.
                let expected = match (route, token) {
                    ("/logs/v1/nope", true) => (404, "not_found"),
                    ("/healthz", _) | (_, true) => (405, "method_not_allowed"),
                    (_, false) => (401, "unauthorized"),
                };
                expect(answer.as_ref(), &what, expected.0, Some(expected.1));
                if expected.0 == 405 {
                    assert_eq!(answer.unwrap().header("allow"), Some("GET,HEAD"), "{what}");
                }
            }
        }
    }

    // The refused request's body is drained: the next request on the connection is answered.
    let pipelined = format!(
        "POST {EXPORT} HTTP/1.1\r\nHost: {}\r\n{}\r\nContent-Length: 5\r\n\r\nhello\
         GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        f.host, f.auth
    );
    let answers = exchange(f.server.addr, pipelined.as_bytes()).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [405, 200]);
    // A body announced but never sent is not waited for.
    let expecting = format!(
        "PUT {EXPORT} HTTP/1.1\r\nHost: {}\r\n{}\r\nExpect: 100-continue\r\nContent-Length: 100000000\r\n\
         Connection: close\r\n\r\n",
        f.host, f.auth
    );
    expect(
        f.send(expecting.as_bytes()).await.as_ref(),
        "Expect: 100-continue",
        405,
        Some("method_not_allowed"),
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_with_cr_lf_nul_or_folding_never_authenticates() {
    let f = Fixture::start().await;
    let line = |value: &[u8]| bytes(&[b"Authorization: ", value, b"\r\n"]);
    let token = READER.as_bytes();
    let (first_half, second_half) = token.split_at(token.len() / 2);
    let cases: Vec<(&str, Vec<u8>, u16, Option<&str>)> = vec![
        ("a bare CR", line(&bytes(&[b"OAuth ", token, b"\rX-Evil: 1"])), 400, None),
        ("obs-fold before the token", bytes(&[b"Authorization: OAuth\r\n ", token, b"\r\n"]), 400, None),
        (
            "obs-fold inside the token",
            bytes(&[b"Authorization: OAuth ", first_half, b"\r\n ", second_half, b"\r\n"]),
            400,
            None,
        ),
        ("obs-fold with a tab", bytes(&[b"Authorization: OAuth\r\n\t", token, b"\r\n"]), 400, None),
        ("NUL", line(&bytes(&[b"OAuth ", token, b"\0"])), 400, None),
        ("DEL", line(&bytes(&[b"OAuth ", token, b"\x7f"])), 400, None),
        ("a space before the colon", bytes(&[b"Authorization : OAuth ", token, b"\r\n"]), 400, None),
        ("obs-text", line(&bytes(&[b"OAuth ", token, b"\xff"])), 401, Some("invalid_token")),
        (
            "CR LF percent-encoded",
            line(&bytes(&[b"OAuth ", token, b"%0D%0AX-Evil:%201"])),
            401,
            Some("invalid_token"),
        ),
        (
            "the token twice",
            bytes(&[&line(&bytes(&[b"OAuth ", token])), &line(b"OAuth x")]),
            401,
            Some("invalid_token"),
        ),
        ("a token of 5000 bytes", line(&bytes(&[b"OAuth ", &[b'a'; 5000]])), 401, Some("invalid_token")),
        // hyper, as RFC 9112 §2.2 allows, ends a header line at a bare LF: these are two header
        // lines, and the token itself holds no LF.
        ("a bare LF", line(&bytes(&[b"OAuth ", token, b"\nX-Evil: 1"])), 200, None),
        ("a CR LF-separated extra header", line(&bytes(&[b"OAuth ", token, b"\r\nX-Evil: 1"])), 200, None),
    ];
    for (what, header, expected, error_type) in cases {
        let request = bytes(&[
            format!("GET {EXPORT} HTTP/1.1\r\nHost: {}\r\n", f.host).as_bytes(),
            &header,
            b"Connection: close\r\n\r\n",
        ]);
        let answer = f.send(&request).await;
        if expected == 200 {
            let answer = answer.expect(what);
            assert_eq!(answer.status, 200, "{what}");
            assert!(answer.header("x-evil").is_none(), "{what}");
        } else {
            expect(answer.as_ref(), what, expected, error_type);
        }
    }
    // CR or LF in another header cannot reach a response header either.
    let request = bytes(&[
        format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n", f.host).as_bytes(),
        b"x-request-id: abc\rSet-Cookie: a=b\r\nConnection: close\r\n\r\n",
    ]);
    expect(f.send(&request).await.as_ref(), "CR in x-request-id", 400, None);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_and_nul_in_the_path_and_query() {
    let f = Fixture::start().await;
    let auth = [f.auth.as_str()];
    // Percent-escapes that decode to invalid UTF-8: 400 naming the parameter.
    for (query, location) in
        [("city=%FF", "city"), ("fields=error_id%C3%28", "fields"), ("os_name=%ED%A0%80", "os_name")]
    {
        let target = format!("{EXPORT}&{query}").replace("fields=error_id,city&", "");
        let answer = f.get(&target, &auth).await;
        expect(Some(&answer), query, 400, Some("invalid_parameter"));
        assert_eq!(answer.json()["errors"][0]["location"], location, "{query}");
    }
    // In a name: 400 naming it as it was sent.
    let answer = f.get(&format!("{EXPORT}&os%FFname=ios"), &auth).await;
    expect(Some(&answer), "%FF in a name", 400, Some("invalid_parameter"));
    assert_eq!(answer.json()["errors"][0]["location"], "os%FFname");
    // A name with control characters, short or long: `location` is escaped and cut to 64
    // characters like the values quoted in `message`.
    let answer = f.get(&format!("{EXPORT}&a%0D%0AInjected%1B%5B31m=1"), &auth).await;
    expect(Some(&answer), "control characters in a name", 400, Some("invalid_parameter"));
    assert_eq!(answer.json()["errors"][0]["location"], "a\\r\\nInjected\\u{1b}[31m");
    let answer = f.get(&format!("{EXPORT}&{}%0D%0AInjected%1B%5B31m=1", "x".repeat(3000)), &auth).await;
    expect(Some(&answer), "a long name", 400, Some("invalid_parameter"));
    let location = answer.json()["errors"][0]["location"].as_str().unwrap().to_owned();
    assert_eq!(location, format!("{}…", "x".repeat(64)));
    // Raw bytes that are not UTF-8, or NUL, in the request target: hyper refuses the request
    // line with 400 before the service sees it.
    let request_line = |target: &[u8]| {
        bytes(&[
            b"GET ",
            target,
            b" HTTP/1.1\r\nHost: x\r\n",
            f.auth.as_bytes(),
            b"\r\nConnection: close\r\n\r\n",
        ])
    };
    for target in [
        bytes(&[EXPORT.as_bytes(), b"&city=\xff"]),
        b"/logs/v1/export/\xff.csv".to_vec(),
        bytes(&[EXPORT.as_bytes(), b"&city=a\0b"]),
        bytes(&[EXPORT.as_bytes(), b"&city=\xc3\x28"]),
    ] {
        let what = String::from_utf8_lossy(&target).into_owned();
        expect(f.send(&request_line(&target)).await.as_ref(), &what, 400, None);
    }
    // Raw UTF-8 in the query is read as itself.
    let answer = f.send(&request_line(format!("{EXPORT}&city=S\u{e3}o").as_bytes())).await.unwrap();
    assert_eq!(answer.status, 200);
    // A path that is not valid once decoded: no route (404), behind the token (401).
    expect(Some(&f.get("/logs/v1/export/errors%FF.csv", &auth).await), "%FF path", 404, Some("not_found"));
    expect(Some(&f.get("/logs/v1/export/errors%FF.csv", &[]).await), "%FF path", 401, Some("unauthorized"));

    // NUL in a filter value is a value like any other: no row has it.
    let answer = f.get(&format!("{EXPORT}&os_name=ios%00"), &auth).await;
    assert_eq!((answer.status, answer.body.as_slice()), (200, b"error_id,city\n".as_slice()));
    // Values that would matter to a query language are values: the plan is built from
    // expressions, never from text.
    for value in
        ["ios'%20OR%20'1'%3D'1", "ios%22%20OR%201%3D1%20--", "%25", "*", "ios%3B%20DROP%20TABLE%20errors"]
    {
        let answer = f.get(&format!("{EXPORT}&os_name={value}"), &auth).await;
        assert_eq!((answer.status, answer.body.as_slice()), (200, b"error_id,city\n".as_slice()), "{value}");
    }
    // Quoted back in an error, NUL and CR LF are escaped.
    let answer = f.get(&EXPORT.replace("limit=3", "limit=1%00%0D%0A2"), &auth).await;
    expect(Some(&answer), "NUL in limit", 400, Some("invalid_parameter"));
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(message.contains(r"1\u{0}\r\n2") && !message.chars().any(char::is_control), "{message}");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_garbage_is_400_or_a_closed_connection() {
    let f = Fixture::start().await;
    let garbage: [&[u8]; 7] = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 a TLS client hello",
        b"GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n",
        b"GET /healthz\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    ];
    for request in garbage {
        let what = String::from_utf8_lossy(request).into_owned();
        expect(f.send(request).await.as_ref(), &what, 400, None);
    }
    // The HTTP/2 preface: the connection is closed (the service speaks HTTP/1.1 only).
    assert!(f.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await.is_none());
    // Transfer-Encoding with Content-Length: answered once, then closed, so that bytes a
    // proxy might have counted differently are never read as a second request.
    let smuggled =
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n\
                     0\r\n\r\nGET /logs/v1/nope HTTP/1.1\r\nHost: x\r\n\r\n";
    let answers = exchange(f.server.addr, smuggled).await;
    assert_eq!(answers.iter().map(|a| a.status).collect::<Vec<_>>(), [200], "{answers:?}");
    assert_eq!(answers[0].header("connection"), Some("close"));
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_sent_slowly_or_never_is_cut_off() {
    let f = Fixture::start_with(|o| o.header_read_timeout = Duration::from_millis(300)).await;
    let started = Instant::now();
    // Half a request head, then nothing: the connection ends after the header read timeout.
    let mut stream = TcpStream::connect(f.server.addr).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.unwrap();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "still open after 5 s");
    assert!(parse_answers(&rest).iter().all(|a| a.status < 500), "{:?}", String::from_utf8_lossy(&rest));
    // An idle keep-alive connection, after one answer, is closed as well.
    let mut stream = TcpStream::connect(f.server.addr).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut received)).await;
    assert!(read.is_ok(), "an idle connection still open after 5 s");
    assert_eq!(parse_answers(&received).iter().map(|a| a.status).collect::<Vec<_>>(), [200]);
    assert!(started.elapsed() < Duration::from_secs(8));
    f.stop().await;
}

/// RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any HTTP/1.1
/// request message that lacks a Host header field and to any request message that contains
/// more than one Host header field line or a Host header field with an invalid field value."
/// The service answers them as if the Host were right (see
/// `missing_duplicate_or_odd_hosts_change_nothing`: nothing depends on it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bug_rfc_9112_host_rules() {
    let f = Fixture::start().await;
    for request in [
        b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n".as_slice(),
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: a b\r\nConnection: close\r\n\r\n",
    ] {
        let what = String::from_utf8_lossy(request).into_owned();
        assert_eq!(f.send(request).await.map(|a| a.status), Some(400), "{what}");
    }
    f.stop().await;
}
