//! The API through `app().await` without a socket: every status, the bodies and the headers.

mod common;

use std::time::Duration;

use common::*;
use http::{Method, StatusCode, header};
use logs_core::EngineConfig;
use logs_format::Format;
use logs_server::auth::TokenHash;
use logs_server::{AppState, Settings};

async fn app() -> axum::Router {
    logs_server::app(state(small_dataset(), Settings::default()).await)
}

#[tokio::test]
async fn csv_export_is_the_engine_stream_encoded() {
    let app = app().await;
    let (status, headers, body) = get(&app, EXPORT_CSV, Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");
    assert_eq!(headers[header::CONTENT_DISPOSITION], "attachment; filename=\"errors.csv\"");
    assert_eq!(headers["x-skipped-shards"], "0");
    assert!(headers.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(headers["x-request-id"].len(), 24);
    let query = EXPORT_CSV.split_once('?').unwrap().1;
    let engine = engine(small_dataset(), EngineConfig::default());
    let expected = encode_directly(&engine, Format::Csv, query).await;
    assert!(expected.len() > 10_000);
    assert_eq!(sorted_lines(&body), sorted_lines(&expected));
    assert!(body.starts_with(b"error_datetime,error_name,os_name,error_id\n"));
}

/// Row order is not guaranteed (spec §8), so with several partitions the bodies are compared
/// as sorted lines; `server.rs` compares bytes with one partition.
fn sorted_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn json_export_and_bom() {
    let app = app().await;
    let uri = "/logs/v1/export/errors.json?application_id=1002&date_since=2026-10-02%2000:00:00&\
               date_until=2026-10-03+12:00:00&fields=error_id,mcc,os_name&os_name=android&limit=5";
    let (status, headers, body) = get(&app, uri, Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json; charset=utf-8");
    assert_eq!(headers[header::CONTENT_DISPOSITION], "attachment; filename=\"errors.json\"");
    let data = json(&body)["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 5);
    assert!(data.iter().all(|r| r["os_name"] == "android" && r.as_object().unwrap().len() == 3));

    let (_, _, body) = get(&app, &format!("{EXPORT_CSV}&use_utf8_bom=true&limit=1"), Some(READER)).await;
    assert!(body.starts_with(b"\xEF\xBB\xBFerror_datetime,"));
    // JSON accepts the parameter and never starts with a byte order mark.
    let (status, _, body) = get(&app, &format!("{uri}&use_utf8_bom=true"), Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.starts_with(b"{\"data\":["));
    assert_eq!(json(&body)["data"].as_array().unwrap().len(), 5);
}

#[tokio::test]
async fn aliases_work_wherever_field_names_do() {
    let aliases = logs_core::FieldAliases::from_toml(
        "[aliases]\nappmetrica_device_id = \"service_device_id\"\ntown = \"city\"\n[absent]\noaid = \"string\"\n",
    )
    .unwrap();
    let config = EngineConfig { target_partitions: 1, aliases, ..EngineConfig::default() };
    let app = logs_server::app(
        AppState::new(engine(small_dataset(), config), token_auth(), Settings::default()).await.unwrap(),
    );
    let base = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-03";

    // The header says what was asked; the values are the field's; an absent field is empty.
    let (status, _, by_alias) =
        get(&app, &format!("{base}&fields=appmetrica_device_id,oaid,town&town=Berlin"), Some(READER)).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&by_alias));
    let (status, _, by_name) =
        get(&app, &format!("{base}&fields=service_device_id,city&city=Berlin"), Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    let by_alias = String::from_utf8(by_alias.to_vec()).unwrap();
    let by_name = String::from_utf8(by_name.to_vec()).unwrap();
    assert!(by_alias.starts_with("appmetrica_device_id,oaid,town\n"), "{by_alias}");
    let rows: Vec<String> = by_name.lines().skip(1).map(|l| l.replacen(',', ",,", 1)).collect();
    assert!(rows.len() > 5);
    assert_eq!(by_alias.lines().skip(1).collect::<Vec<_>>(), rows);

    // Filtering by an alias is filtering by its field; by an absent field, refused.
    let (_, _, by_alias_filter) = get(&app, &format!("{base}&fields=city&town=Berlin"), Some(READER)).await;
    let (_, _, by_field_filter) = get(&app, &format!("{base}&fields=city&city=Berlin"), Some(READER)).await;
    assert_eq!(by_alias_filter, by_field_filter);
    let (status, _, body) = get(&app, &format!("{base}&fields=city&oaid=x"), Some(READER)).await;
    let error = error_body(status, &body, "invalid_parameter");
    assert_eq!(error["errors"][0]["location"], "oaid");

    // A name neither known nor declared is still refused, with a suggestion.
    let (status, _, body) = get(&app, &format!("{base}&fields=city&twon=Berlin"), Some(READER)).await;
    let error = error_body(status, &body, "invalid_parameter");
    assert!(error["message"].as_str().unwrap().contains("did you mean `town`?"), "{error}");
    let (status, _, body) = get(&app, &format!("{base}&fields=android_id"), Some(READER)).await;
    let error = error_body(status, &body, "invalid_parameter");
    assert_eq!(error["errors"][0]["location"], "fields");
}

#[tokio::test]
async fn bad_parameters_are_400_naming_the_parameter() {
    let app = app().await;
    let cases = [
        ("application_id=1001&date_until=2026-10-07&fields=error_id", "date_since"),
        ("application_id=1001&date_since=2026-13-01&date_until=2026-10-07&fields=error_id", "date_since"),
        ("application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=nope", "fields"),
        ("application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id&limt=3", "limt"),
        ("application_id=x&date_since=2026-10-01&date_until=2026-10-07&fields=error_id", "application_id"),
        ("application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id&mcc=abc", "mcc"),
    ];
    for (query, location) in cases {
        let (status, headers, body) =
            get(&app, &format!("/logs/v1/export/errors.csv?{query}"), Some(READER)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(headers[header::CONTENT_TYPE], "application/json; charset=utf-8");
        let v = error_body(status, &body, "invalid_parameter");
        assert_eq!(v["errors"][0]["location"], location, "{v}");
        assert!(v["message"].as_str().unwrap().contains(location), "{v}");
    }
}

#[tokio::test]
async fn the_exact_error_body() {
    let (_, _, body) =
        get(&app().await, "/logs/v1/export/errors.csv?application_id=1001", Some(READER)).await;
    assert_eq!(
        json(&body),
        serde_json::json!({
            "errors": [{"error_type": "invalid_parameter", "message": "parameter `date_since` is required",
                        "location": "date_since"}],
            "code": 400,
            "message": "parameter `date_since` is required"
        })
    );
}

#[tokio::test]
async fn missing_malformed_and_unknown_tokens_are_401() {
    let app = app().await;
    let (status, headers, body) = get(&app, EXPORT_CSV, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::WWW_AUTHENTICATE], "OAuth realm=\"logs-export\"");
    error_body(status, &body, "unauthorized");

    for value in ["Basic dXNlcjpwYXNz", "OAuth", "OAuth a b", format!("Token {READER}").as_str()] {
        let (status, headers, body) = call(&app, Method::GET, EXPORT_CSV, &[("authorization", value)]).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{value}");
        assert_eq!(headers[header::WWW_AUTHENTICATE], "OAuth realm=\"logs-export\", error=\"invalid_token\"");
        error_body(status, &body, "invalid_token");
    }
    let (status, _, body) = get(&app, EXPORT_CSV, Some("tok-nobody-knows-me")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    error_body(status, &body, "invalid_token");
}

#[tokio::test]
async fn scheme_is_case_insensitive_and_bearer_works() {
    let app = app().await;
    for scheme in ["OAuth", "oauth", "BEARER", "Bearer"] {
        let value = format!("{scheme} {READER}");
        let (status, ..) = call(&app, Method::GET, EXPORT_CSV, &[("authorization", &value)]).await;
        assert_eq!(status, StatusCode::OK, "{scheme}");
    }
}

#[tokio::test]
async fn a_token_in_the_query_string_is_refused() {
    let app = app().await;
    for parameter in ["oauth_token", "access_token", "token"] {
        let uri = format!("{EXPORT_CSV}&{parameter}={READER}");
        // Even with a valid header, and even for /healthz.
        for path in [uri.as_str(), &format!("/healthz?{parameter}=x")] {
            let (status, headers, body) = get(&app, path, Some(READER)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
            assert!(headers[header::WWW_AUTHENTICATE].to_str().unwrap().contains("invalid_request"));
            let v = error_body(status, &body, "invalid_request");
            assert!(v["message"].as_str().unwrap().contains("Authorization header"), "{v}");
            assert_eq!(v["errors"][0]["location"], parameter);
            assert!(!String::from_utf8_lossy(&body).contains(READER));
        }
    }
}

#[tokio::test]
async fn scopes_and_applications_are_403() {
    let app = app().await;
    let (status, headers, body) = get(&app, EXPORT_CSV, Some(WRITER)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        headers[header::WWW_AUTHENTICATE],
        "OAuth realm=\"logs-export\", error=\"insufficient_scope\", scope=\"service:read\""
    );
    error_body(status, &body, "insufficient_scope");
    let (status, ..) = get(&app, "/management/v1/applications", Some(WRITER)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, ..) = get(&app, EXPORT_CSV, Some(APP1001)).await;
    assert_eq!(status, StatusCode::OK);
    let answer = |app_id: i64| {
        let app = app.clone();
        async move {
            let uri = EXPORT_CSV.replace("application_id=1001", &format!("application_id={app_id}"));
            get(&app, &uri, Some(APP1001)).await
        }
    };
    // 1002 exists, 999999 does not: the same answer, apart from the id the client gave.
    let (existing_status, _, existing) = answer(1002).await;
    let (missing_status, _, missing) = answer(999_999).await;
    assert_eq!(existing_status, StatusCode::FORBIDDEN);
    assert_eq!(missing_status, StatusCode::FORBIDDEN);
    error_body(existing_status, &existing, "access_denied");
    assert_eq!(
        String::from_utf8_lossy(&existing).replace("1002", "N"),
        String::from_utf8_lossy(&missing).replace("999999", "N")
    );
}

#[tokio::test]
async fn unknown_routes_and_extensions_are_404_behind_authorization() {
    let app = app().await;
    for path in [
        "/logs/v1/export/errors.xml?application_id=1",
        "/logs/v1/export/errors",
        "/nope",
        "/logs/v2/export/errors.csv",
    ] {
        let (status, _, body) = get(&app, path, Some(READER)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        error_body(status, &body, "not_found");
        let (status, ..) = get(&app, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} without a token");
    }
}

#[tokio::test]
async fn wrong_methods_are_405_with_allow() {
    let app = app().await;
    for method in [Method::POST, Method::PUT, Method::DELETE] {
        let auth = format!("OAuth {READER}");
        let (status, headers, body) =
            call(&app, method.clone(), EXPORT_CSV, &[("authorization", &auth)]).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        let allow = headers[header::ALLOW].to_str().unwrap();
        assert!(allow.contains("GET"), "{allow}");
        error_body(status, &body, "method_not_allowed");
    }
}

#[tokio::test]
async fn long_targets_are_414_and_large_headers_431() {
    let app = app().await;
    let long = format!("{EXPORT_CSV}&error_name={}", "x".repeat(9000));
    let (status, _, body) = get(&app, &long, Some(READER)).await;
    assert_eq!(status, StatusCode::URI_TOO_LONG);
    error_body(status, &body, "uri_too_long");
    // Before authorization: a huge request gets 414 even without a token.
    let (status, ..) = get(&app, &long, None).await;
    assert_eq!(status, StatusCode::URI_TOO_LONG);

    let big = "y".repeat(17 * 1024);
    let auth = format!("OAuth {READER}");
    let (status, _, body) =
        call(&app, Method::GET, EXPORT_CSV, &[("authorization", &auth), ("x-big", &big)]).await;
    assert_eq!(status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    error_body(status, &body, "headers_too_large");
}

#[tokio::test]
async fn size_limits_allow_exactly_their_size() {
    let settings = Settings { max_url_bytes: 512, max_header_bytes: 1024, ..Settings::default() };
    let app = logs_server::app(state(small_dataset(), settings).await);
    // A target of 512 bytes is let through (to authorization: 401), one of 513 is not.
    let target = |len: usize| {
        let path = "/management/v1/applications?pad=";
        format!("{path}{}", "x".repeat(len - path.len()))
    };
    let (status, _, body) = get(&app, &target(512), None).await;
    error_body(status, &body, "unauthorized");
    let (status, _, body) = get(&app, &target(513), None).await;
    error_body(status, &body, "uri_too_long");
    // Headers count as `name: value\r\n`: `x-pad: ` and the line end are 9 bytes of 1024.
    for (pad, expected) in [(1015, "unauthorized"), (1016, "headers_too_large")] {
        let value = "p".repeat(pad);
        let (status, _, body) =
            call(&app, Method::GET, "/management/v1/applications", &[("x-pad", &value)]).await;
        error_body(status, &body, expected);
    }
}

#[tokio::test]
async fn concurrency_limits_are_429_per_token_and_503_in_all() {
    let settings = Settings { max_exports: 2, max_exports_per_token: 1, ..Settings::default() };
    let state = state(small_dataset(), settings).await;
    let app = logs_server::app(state.clone());
    let held = state.limiter().acquire(TokenHash::of(READER)).unwrap();
    let (status, headers, body) = get(&app, EXPORT_CSV, Some(READER)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers[header::RETRY_AFTER], "5");
    error_body(status, &body, "too_many_requests");
    // Another token may still export, until the server's limit.
    let (status, ..) = get(&app, EXPORT_CSV, Some(APP1001)).await;
    assert_eq!(status, StatusCode::OK);
    let _other = state.limiter().acquire(TokenHash::of("someone else")).unwrap();
    let (status, headers, body) = get(&app, EXPORT_CSV, Some(APP1001)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers[header::RETRY_AFTER], "5");
    error_body(status, &body, "server_busy");
    drop(held);
    let (status, ..) = get(&app, EXPORT_CSV, Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    // The management call is not an export and is never limited.
    let (status, ..) = get(&app, "/management/v1/applications", Some(APP1001)).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn unreadable_files_are_503_without_paths_or_skipped_on_request() {
    let dir = tempfile::tempdir().unwrap();
    generate(dir.path(), 3_000, 2);
    let broken = dir.path().join("application_id=1002/date=2026-10-01/part-00000.parquet");
    std::fs::write(&broken, b"PAR1 not really").unwrap();
    let app = logs_server::app(state(dir.path(), Settings::default()).await);
    let uri = "/logs/v1/export/errors.csv?application_id=1002&date_since=2026-10-01&date_until=2026-10-02&fields=error_id";
    let (status, headers, body) = get(&app, uri, Some(READER)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(headers.get(header::RETRY_AFTER).is_none());
    let v = error_body(status, &body, "storage_unavailable");
    let text = v.to_string();
    assert!(!text.contains("parquet") && !text.contains(dir.path().to_str().unwrap()), "{text}");
    assert!(text.contains("skip_unavailable_shards"), "{text}");

    let (status, headers, body) =
        get(&app, &format!("{uri}&skip_unavailable_shards=true"), Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-skipped-shards"], "1");
    assert!(body.len() > "error_id\n".len());
}

#[tokio::test]
async fn the_first_byte_timeout_is_503() {
    let settings = Settings { first_byte_timeout: Duration::from_nanos(1), ..Settings::default() };
    let state = state(small_dataset(), settings).await;
    let app = logs_server::app(state.clone());
    let (status, _, body) = get(&app, EXPORT_CSV, Some(READER)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    error_body(status, &body, "timeout");
    let counts = state.metrics().exports();
    assert_eq!((counts.running, counts.failed), (0, 1));
}

#[tokio::test]
async fn healthz_needs_no_token() {
    let (status, _, body) = get(&app().await, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json(&body)["status"], "ok");
}

#[tokio::test]
async fn applications_are_listed_as_the_token_may_see_them() {
    let app = app().await;
    let (status, headers, body) = get(&app, "/management/v1/applications", Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json; charset=utf-8");
    // The shapes in detail are tests/management.rs's.
    let listed: Vec<(i64, String, String)> = json(&body)["applications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_i64().unwrap(), a["name"].to_string(), a["create_date"].to_string()))
        .collect();
    let first = "\"2026-10-01\"".to_owned();
    assert_eq!(
        listed,
        [
            (1001, "\"Shop\"".to_owned(), first.clone()),
            (1002, "\"1002\"".to_owned(), first.clone()),
            (1003, "\"1003\"".to_owned(), first),
        ]
    );
    let (_, _, body) = get(&app, "/management/v1/applications", Some(APP1001)).await;
    let ids: Vec<i64> =
        json(&body)["applications"].as_array().unwrap().iter().map(|a| a["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [1001]);
    let (status, ..) = get(&app, "/management/v1/applications", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_broken_applications_file_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("applications.toml"), "[[applications]]\nid = \"x\"").unwrap();
    let e = AppState::new(engine(dir.path(), EngineConfig::default()), token_auth(), Settings::default())
        .await
        .unwrap_err();
    assert!(matches!(e, logs_server::ConfigError::InvalidFile { .. }), "{e:?}");
    assert!(e.to_string().contains("applications.toml"), "{e}");
    // A folder in its place cannot be read: that is not the content's fault.
    std::fs::remove_file(dir.path().join("applications.toml")).unwrap();
    std::fs::create_dir(dir.path().join("applications.toml")).unwrap();
    let e = AppState::new(engine(dir.path(), EngineConfig::default()), token_auth(), Settings::default())
        .await
        .unwrap_err();
    assert!(matches!(e, logs_server::ConfigError::UnreadableObject { .. }), "{e:?}");
}

#[tokio::test]
async fn metrics_count_requests_and_exports_without_tokens() {
    let state = state(small_dataset(), Settings::default()).await;
    let app = logs_server::app(state.clone());
    get(&app, EXPORT_CSV, Some(READER)).await;
    get(&app, EXPORT_CSV, Some("tok-unknown-secret")).await;
    get(&app, &format!("{EXPORT_CSV}&access_token={READER}"), None).await;
    get(&app, EXPORT_CSV, None).await;
    call(&app, Method::GET, EXPORT_CSV, &[("authorization", "Basic dXNlcjpwYXNz")]).await;
    let admin = logs_server::admin_app(state.clone());
    let (status, headers, body) = get(&admin, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/plain"));
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains("logs_http_requests_total{route=\"/logs/v1/export/errors.csv\",status=\"200\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("logs_http_requests_total{route=\"/logs/v1/export/errors.csv\",status=\"401\"} 4"),
        "{text}"
    );
    assert!(text.contains("logs_exports_total{outcome=\"completed\"} 1"), "{text}");
    // One failure of each kind, each under its own reason.
    for reason in ["invalid", "token_in_query", "missing", "malformed"] {
        assert!(
            text.contains(&format!("logs_auth_failures_total{{reason=\"{reason}\"}} 1")),
            "{reason}: {text}"
        );
    }
    assert!(text.contains("logs_tokens_loaded 3"), "{text}");
    assert!(!text.contains("tok-") && !text.contains("reader"), "{text}");
    let (status, ..) = get(&admin, "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn head_answers_the_headers_and_cancels_the_query() {
    let state = state(small_dataset(), Settings::default()).await;
    let app = logs_server::app(state.clone());
    let auth = format!("OAuth {READER}");
    let (status, headers, body) = call(&app, Method::HEAD, EXPORT_CSV, &[("authorization", &auth)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/csv; charset=utf-8");
    assert!(body.is_empty());
    // Released before the headers were sent: the next request of the token may start at once.
    assert_eq!(state.metrics().exports().running, 0);
    assert_eq!(state.limiter().running(), 0);
}

#[tokio::test]
async fn a_client_that_refuses_every_coding_gets_the_answer_unencoded_never_406() {
    let app = app().await;
    let auth = format!("OAuth {READER}");
    let (_, _, plain) = call(&app, Method::GET, EXPORT_CSV, &[("authorization", &auth)]).await;
    for refusing in ["identity;q=0", "*;q=0", "gzip;q=0, identity;q=0", "br;q=1, *;q=0"] {
        let headers = [("authorization", auth.as_str()), ("accept-encoding", refusing)];
        let (status, response_headers, body) = call(&app, Method::GET, EXPORT_CSV, &headers).await;
        assert_eq!(status, StatusCode::OK, "{refusing}");
        assert!(response_headers.get(header::CONTENT_ENCODING).is_none(), "{refusing}");
        assert_eq!(sorted_lines(&body), sorted_lines(&plain), "{refusing}");
        let (status, _, body) = call(&app, Method::GET, EXPORT_CSV, &[("accept-encoding", refusing)]).await;
        error_body(status, &body, "unauthorized");
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{refusing}");
        let (status, _, body) = call(&app, Method::GET, "/healthz", &[("accept-encoding", refusing)]).await;
        assert_eq!(
            (status, body.as_ref()),
            (StatusCode::OK, b"{\"status\":\"ok\"}".as_slice()),
            "{refusing}"
        );
    }
    // gzip where it is accepted, as before.
    let headers = [("authorization", auth.as_str()), ("accept-encoding", "gzip;q=0.5, identity;q=0")];
    let (status, response_headers, _) = call(&app, Method::GET, EXPORT_CSV, &headers).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response_headers[header::CONTENT_ENCODING], "gzip");
}
