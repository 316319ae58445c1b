//! The OpenAPI document: the checked-in copy is the code's, it is served behind a token, and
//! real answers of the router (every documented status) match what it says about them.
//!
//! After a change to the API: `UPDATE_OPENAPI=1 cargo test -p logs-server --test openapi`
//! rewrites `docs/openapi.json`.

mod common;

use std::path::PathBuf;

use common::*;
use http::{HeaderMap, Method, StatusCode};
use logs_server::Settings;
use logs_server::auth::TokenHash;
use logs_server::{DocumentSettings, OPENAPI_PATH, document, document_json};
use serde_json::Value;

fn checked_in_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn the_checked_in_document_is_the_codes() {
    let path = checked_in_path();
    let generated = document_json(&DocumentSettings::default());
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json differs from the document the code generates (or is missing); if the API \
         change is intended, regenerate it with\n\n    UPDATE_OPENAPI=1 cargo test -p logs-server --test openapi\n\n\
         and commit the result"
    );
}

#[test]
fn the_document_covers_the_api() {
    let doc = document(&DocumentSettings::default());
    assert_eq!(doc["openapi"], "3.1.0");
    let paths: Vec<&String> = doc["paths"].as_object().unwrap().keys().collect();
    assert_eq!(
        paths,
        [
            "/healthz",
            "/logs/v1/export/errors.arrow",
            "/logs/v1/export/errors.csv",
            "/logs/v1/export/errors.json",
            "/logs/v1/export/errors.ndjson",
            "/logs/v1/export/errors.parquet",
            "/management/v1/application/{id}",
            "/management/v1/applications",
            "/openapi.json"
        ]
    );
    let scheme = &doc["components"]["securitySchemes"]["OAuth"];
    assert_eq!(scheme["type"], "apiKey");
    assert_eq!(scheme["in"], "header");
    assert_eq!(scheme["name"], "Authorization");
    assert!(scheme["description"].as_str().unwrap().contains("OAuth <token>"));
    assert_eq!(doc["paths"]["/healthz"]["get"]["security"], serde_json::json!([{}]));

    // Every field is a filter with its type (application_id is the required parameter itself),
    // and every field is a value of `fields`.
    let parameters = doc["paths"]["/logs/v1/export/errors.csv"]["get"]["parameters"].as_array().unwrap();
    let find = |name: &str| parameters.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{name}"));
    for field in logs_core::Field::all() {
        let parameter = find(field.name());
        let expected = if field.field_type().is_integer() { "integer" } else { "string" };
        assert_eq!(parameter["schema"]["type"], expected, "{field}");
        let values = find("fields")["schema"]["items"]["enum"].as_array().unwrap().clone();
        assert!(values.contains(&Value::from(field.name())), "{field}");
        assert!(find("fields")["description"].as_str().unwrap().contains(&format!("`{field}`")));
    }
    for name in ["fields", "application_id"] {
        assert_eq!(find(name)["required"], true, "{name}");
    }
    for name in
        ["date_since", "date_until", "date_dimension", "limit", "use_utf8_bom", "skip_unavailable_shards"]
            .into_iter()
            .chain(["parts_count", "part_number", "cursor"])
    {
        assert_eq!(find(name)["required"], false, "{name}");
    }
    let ok = &doc["paths"]["/logs/v1/export/errors.csv"]["get"]["responses"]["200"];
    assert!(ok["content"]["text/csv"].is_object());
    let ok = &doc["paths"]["/logs/v1/export/errors.json"]["get"]["responses"]["200"];
    assert!(ok["content"]["application/json"].is_object());
    for header in ["X-Skipped-Shards", "Content-Disposition", "x-request-id"] {
        assert_eq!(ok["headers"][header]["required"], true, "{header}");
    }
}

#[tokio::test]
async fn served_to_any_valid_token_only() {
    let app = logs_server::app(state(small_dataset(), Settings::default()).await);
    let (status, headers, _) = get(&app, OPENAPI_PATH, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.contains_key(http::header::WWW_AUTHENTICATE));
    for token in [READER, WRITER, APP1001] {
        let (status, headers, body) = get(&app, OPENAPI_PATH, Some(token)).await;
        assert_eq!(status, StatusCode::OK);
        assert!(headers[http::header::CONTENT_TYPE].to_str().unwrap().starts_with("application/json"));
        assert_eq!(body, document_json(&DocumentSettings::default()).as_bytes());
    }
}

#[tokio::test]
async fn the_served_document_shows_the_operators_aliases_and_integers() {
    let aliases = logs_core::FieldAliases::from_toml(
        "[aliases]\nappmetrica_device_id = \"service_device_id\"\n[absent]\noaid = \"string\"\n",
    )
    .unwrap();
    let config = logs_core::EngineConfig { aliases, ..logs_core::EngineConfig::default() };
    for json_integers in logs_format::JsonIntegers::ALL {
        let settings = Settings { json_integers, ..Settings::default() };
        let state =
            logs_server::AppState::new(engine(small_dataset(), config.clone()), token_auth(), settings)
                .await
                .unwrap();
        let app = logs_server::app(state);
        let (status, _, body) = get(&app, OPENAPI_PATH, Some(READER)).await;
        assert_eq!(status, StatusCode::OK);
        let doc = json(&body);
        let parameters = doc["paths"]["/logs/v1/export/errors.csv"]["get"]["parameters"].as_array().unwrap();
        let find = |name: &str| parameters.iter().find(|p| p["name"] == name);
        // The alias is a filter with its field's type; the absent field is not a filter.
        let alias = find("appmetrica_device_id").expect("the alias is a filter");
        assert_eq!(alias["schema"]["type"], "integer");
        assert!(alias["description"].as_str().unwrap().contains("another name of `service_device_id`"));
        assert!(find("oaid").is_none());
        let fields = find("fields").unwrap();
        let values = fields["schema"]["items"]["enum"].as_array().unwrap();
        assert!(
            values.contains(&Value::from("appmetrica_device_id")) && values.contains(&Value::from("oaid"))
        );
        assert!(fields["description"].as_str().unwrap().contains("`oaid` (string, not held by this dataset"));
        let record = &doc["components"]["schemas"]["ErrorRecord"]["properties"];
        let expected = match json_integers {
            logs_format::JsonIntegers::Strings => serde_json::json!(["string", "null"]),
            logs_format::JsonIntegers::Numbers => serde_json::json!(["integer", "null"]),
        };
        assert_eq!(record["appmetrica_device_id"]["type"], expected);
        assert_eq!(record["service_device_id"]["type"], expected);
        assert_eq!(record["oaid"]["type"], serde_json::json!(["string", "null"]));
        let served =
            DocumentSettings { aliases: config.aliases.clone(), json_integers, ..Default::default() };
        assert_eq!(body, document_json(&served).as_bytes());
    }
}

/// Real answers of the router, checked against the document: the status is documented for the
/// operation (404 and 405 as components: they answer requests outside the operations), the
/// body matches the schema, the required headers are there.
#[tokio::test]
async fn real_answers_match_the_document() {
    let doc = document(&DocumentSettings::default());
    let settings = Settings { max_exports: 3, ..Settings::default() };
    let state = state(small_dataset(), settings).await;
    let app = logs_server::app(state.clone());
    let csv = "/logs/v1/export/errors.csv";
    let json = "/logs/v1/export/errors.json";
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&\
                 fields=error_datetime,error_id,mcc,service_device_id,city,error";
    let long = format!("{csv}?{query}&city={}", "x".repeat(9000));
    let bearer = format!("Bearer {READER}");
    let writer = format!("OAuth {WRITER}");
    let app1001 = format!("OAuth {APP1001}");
    let big_header = "h".repeat(17 * 1024);
    let cases: Vec<Case> = vec![
        (csv, Method::GET, format!("{csv}?{query}"), vec![("authorization", &bearer)], 200),
        (json, Method::GET, format!("{json}?{query}&use_utf8_bom=false"), vec![], 200),
        (json, Method::GET, format!("{json}?{query}&os_name=none"), vec![], 200),
        (json, Method::GET, format!("{json}?{query}&limit=0"), vec![], 400),
        (json, Method::GET, format!("{json}?{query}&os_nmae=ios"), vec![], 400),
        (csv, Method::GET, format!("{csv}?application_id=1001"), vec![], 400),
        (csv, Method::GET, format!("{csv}?{query}&access_token=x"), vec![], 401),
        (csv, Method::GET, format!("{csv}?{query}"), vec![("authorization", "Basic abc")], 401),
        (csv, Method::GET, format!("{csv}?{query}"), vec![("authorization", "OAuth unknown")], 401),
        (csv, Method::GET, format!("{csv}?{query}"), vec![("authorization", "")], 401),
        (csv, Method::GET, format!("{csv}?{query}"), vec![("authorization", &writer)], 403),
        (
            csv,
            Method::GET,
            format!("{csv}?{}", query.replace("1001", "1002")),
            vec![("authorization", &app1001)],
            403,
        ),
        (csv, Method::GET, long.clone(), vec![], 414),
        (csv, Method::GET, format!("{csv}?{query}"), vec![("x-filler", &big_header)], 431),
        ("/management/v1/applications", Method::GET, "/management/v1/applications".into(), vec![], 200),
        (
            "/management/v1/applications",
            Method::GET,
            "/management/v1/applications".into(),
            vec![("authorization", &writer)],
            403,
        ),
        (APPLICATION, Method::GET, "/management/v1/application/1001".into(), vec![], 200),
        (APPLICATION, Method::GET, "/management/v1/application/x1".into(), vec![], 400),
        (
            APPLICATION,
            Method::GET,
            "/management/v1/application/1001".into(),
            vec![("authorization", &writer)],
            403,
        ),
        (
            APPLICATION,
            Method::GET,
            "/management/v1/application/1002".into(),
            vec![("authorization", &app1001)],
            403,
        ),
        (APPLICATION, Method::GET, "/management/v1/application/4242".into(), vec![], 404),
        ("/healthz", Method::GET, "/healthz".into(), vec![("authorization", "")], 200),
        ("/healthz", Method::GET, "/healthz?token=x".into(), vec![("authorization", "")], 401),
        ("/openapi.json", Method::GET, "/openapi.json".into(), vec![], 200),
        ("NotFound", Method::GET, "/logs/v1/export/errors.txt".into(), vec![], 404),
        ("MethodNotAllowed", Method::POST, format!("{csv}?{query}"), vec![], 405),
    ];
    let reader = format!("OAuth {READER}");
    for (operation, method, uri, extra, expected) in cases {
        // The reader's token unless the case sets the header (an empty value: none at all).
        let own_token = extra.iter().any(|(n, _)| *n == "authorization");
        let mut headers: Vec<(&str, &str)> = extra.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        if !own_token {
            headers.push(("authorization", &reader));
        }
        let (status, response_headers, body) = call(&app, method, &uri, &headers).await;
        let what = format!("{operation} {}", &uri[..uri.len().min(100)]);
        assert_eq!(status.as_u16(), expected, "{what}: {}", String::from_utf8_lossy(&body));
        check_answer(&doc, operation, status, &response_headers, &body, &what);
    }

    // The limits: 429 when the token runs its exports, 503 when the server is full.
    let held: Vec<_> = (0..2).map(|_| state.limiter().acquire(TokenHash::of(READER)).unwrap()).collect();
    let (status, headers, body) = get(&app, &format!("{csv}?{query}"), Some(READER)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    check_answer(&doc, csv, status, &headers, &body, "429");
    let other = state.limiter().acquire(TokenHash::of("another")).unwrap();
    let (status, headers, body) = get(&app, &format!("{csv}?{query}"), Some(APP1001)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    check_answer(&doc, csv, status, &headers, &body, "503");
    drop((held, other));
}

#[tokio::test]
async fn prepared_answers_match_the_document() {
    use logs_server::prepared::{Prepared, PreparedConfig};
    let doc = document(&DocumentSettings::default());
    let spool = tempfile::tempdir().unwrap();
    let config = PreparedConfig {
        wait: std::time::Duration::ZERO,
        ..PreparedConfig::new(logs_core::DatasetLocation::Local(spool.path().into()))
    };
    let prepared = Prepared::open(config, &logs_core::S3Options::default()).await.unwrap();
    let state = state(small_dataset(), Settings::default()).await.with_prepared(prepared);
    let app = logs_server::app(state);
    let csv = "/logs/v1/export/errors.csv";
    let uri =
        format!("{csv}?application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id,city");
    let reader = format!("OAuth {READER}");
    let ask = |extra: Vec<(&'static str, String)>| {
        let (app, uri, reader) = (app.clone(), uri.clone(), reader.clone());
        async move {
            let mut headers: Vec<(&str, &str)> =
                vec![("authorization", &reader), ("prefer", "respond-async")];
            headers.extend(extra.iter().map(|(n, v)| (*n, v.as_str())));
            call(&app, Method::GET, &uri, &headers).await
        }
    };
    let (status, headers, body) = ask(vec![]).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    check_answer(&doc, csv, status, &headers, &body, "202");
    let (status, headers, body) = loop {
        let answer = ask(vec![]).await;
        if answer.0 != StatusCode::ACCEPTED {
            break answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(status, StatusCode::OK);
    check_answer(&doc, csv, status, &headers, &body, "200 prepared");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    let answers = [
        (vec![("range", "bytes=5-".to_owned())], StatusCode::PARTIAL_CONTENT),
        (vec![("range", format!("bytes={}-", body.len()))], StatusCode::RANGE_NOT_SATISFIABLE),
        (vec![("if-none-match", etag)], StatusCode::NOT_MODIFIED),
    ];
    for (extra, expected) in answers {
        let (status, headers, body) = ask(extra).await;
        assert_eq!(status, expected);
        check_answer(&doc, csv, status, &headers, &body, expected.as_str());
    }
}

/// The path of one application, as the document writes it.
const APPLICATION: &str = "/management/v1/application/{id}";

/// An operation (a path, or a response component), the request, and the status expected.
type Case<'a> = (&'a str, Method, String, Vec<(&'a str, &'a str)>, u16);

/// Checks one answer against the document's response for `operation` (a path, or the name of
/// a response component).
fn check_answer(
    doc: &Value,
    operation: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    what: &str,
) {
    let code = status.as_u16().to_string();
    let mut response = if operation.starts_with('/') {
        let op = &doc["paths"][operation]["get"];
        assert!(op.is_object(), "{what}: no operation");
        op["responses"][&code].clone()
    } else {
        doc["components"]["responses"][operation].clone()
    };
    assert!(response.is_object(), "{what}: status {code} is not documented");
    if let Some(target) = response.get("$ref").and_then(Value::as_str) {
        response = resolve(doc, target).clone();
    }
    for (name, header) in response["headers"].as_object().into_iter().flatten() {
        if header["required"] == true {
            assert!(headers.contains_key(name.as_str()), "{what}: no header {name}");
        }
        if let Some(value) = headers.get(name.as_str()) {
            let value = value.to_str().unwrap();
            let parsed = match header["schema"]["type"].as_str() {
                Some("integer") => {
                    Value::from(value.parse::<u64>().unwrap_or_else(|_| panic!("{what}: {name}")))
                }
                _ => Value::from(value),
            };
            validate(doc, &header["schema"], &parsed, &format!("{what}: header {name}"));
        }
    }
    if status == StatusCode::NOT_MODIFIED {
        assert!(body.is_empty() && response.get("content").is_none(), "{what}: a 304 has no content");
        return;
    }
    let content_type = headers[http::header::CONTENT_TYPE].to_str().unwrap();
    let media = content_type.split(';').next().unwrap().trim();
    let content = &response["content"][media];
    assert!(content.is_object(), "{what}: content type {content_type} is not documented");
    if media == "application/json" {
        let body: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
        validate(doc, &content["schema"], &body, what);
    }
}

fn resolve<'a>(doc: &'a Value, target: &str) -> &'a Value {
    let pointer = target.strip_prefix('#').unwrap();
    doc.pointer(pointer).unwrap_or_else(|| panic!("dangling $ref {target}"))
}

/// The subset of JSON Schema the document uses (patterns and formats aside).
fn validate(doc: &Value, schema: &Value, value: &Value, at: &str) {
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        return validate(doc, resolve(doc, target), value, at);
    }
    for part in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        validate(doc, part, value, at);
    }
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            kind => vec![kind.as_str().unwrap()],
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        assert!(kinds.contains(&actual), "{at}: {value} is not of type {kinds:?}");
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        assert!(values.contains(value), "{at}: {value} is not one of {values:?}");
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64()) {
        assert!(n >= min, "{at}: {n} < {min}");
    }
    if let (Some(max), Some(n)) = (schema.get("maximum").and_then(Value::as_f64), value.as_f64()) {
        assert!(n <= max, "{at}: {n} > {max}");
    }
    if let (Some(min), Some(s)) = (schema.get("minLength").and_then(Value::as_u64), value.as_str()) {
        assert!(s.chars().count() as u64 >= min, "{at}: {s:?} is too short");
    }
    if let Value::Object(object) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            assert!(object.contains_key(name.as_str().unwrap()), "{at}: `{name}` is missing");
        }
        for (name, v) in object {
            match properties.and_then(|p| p.get(name)) {
                Some(property) => validate(doc, property, v, &format!("{at}.{name}")),
                None => assert!(
                    schema.get("additionalProperties") != Some(&Value::Bool(false)),
                    "{at}: unexpected `{name}`"
                ),
            }
        }
    }
    if let Value::Array(items) = value {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            assert!(items.len() as u64 >= min, "{at}: fewer than {min} items");
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
            assert!(items.len() as u64 <= max, "{at}: more than {max} items");
        }
        if let Some(item) = schema.get("items") {
            for (i, v) in items.iter().enumerate() {
                validate(doc, item, v, &format!("{at}[{i}]"));
            }
        }
    }
}
