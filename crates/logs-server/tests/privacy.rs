//! Field policies over a real socket: a denied field refused in `fields`, in filters and by
//! alias; a pseudonym filter finding exactly the device's records; the same export under two
//! tokens with different policies, streamed and prepared, never crossing; the header naming
//! the changed columns; policies chosen by scope and by default; `/openapi.json` describing
//! the caller's own fields; no raw identifier in the log.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use http::StatusCode;
use logs_core::{DatasetLocation, EngineConfig, FieldAliases, Policies, PseudonymKey, S3Options};
use logs_server::auth::{Authenticator, TokenSet, TokenStore};
use logs_server::prepared::{Prepared, PreparedConfig};
use logs_server::{AppState, ServeOptions, Settings};

/// Pseudonymised ids, truncated addresses, scrubbed texts, no advertising id.
const CONTRACTOR: &str = "tok-contractor-1c8e5b0d2a7f4e93";
/// Every field (as the reader of `common`).
const FULL: &str = "tok-full-7a31c0e2b9d84f15";
/// A policy from its scope.
const SCOPED: &str = "tok-scoped-5d2e8a1f0b3c4e77";
/// No policy of its own and no mapped scope: the file's default.
const DEFAULTED: &str = "tok-default-0e9b7c3a5f1d2e88";

const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";

const CONTRACTOR_FIELDS: &str = r#"{ service_device_id = "pseudonymise", device_ipv6 = "truncate", google_aid = "deny", error = "scrub" }"#;

fn tokens() -> String {
    format!(
        "[[tokens]]\nname = \"contractor\"\ntoken = \"{CONTRACTOR}\"\nscopes = [\"service:read\"]\n\
         fields = {CONTRACTOR_FIELDS}\n\n\
         [[tokens]]\nname = \"full\"\ntoken = \"{FULL}\"\nscopes = [\"service:read\", \"logs:full\"]\n\n\
         [[tokens]]\nname = \"scoped\"\ntoken = \"{SCOPED}\"\nscopes = [\"service:read\", \"logs:analytics\"]\n\n\
         [[tokens]]\nname = \"defaulted\"\ntoken = \"{DEFAULTED}\"\nscopes = [\"service:read\"]\n"
    )
}

const POLICIES: &str = r#"
default = "minimal"
[policies.minimal]
fields = { service_device_id = "deny", error = "scrub", error_json = "scrub", device_ipv6 = "deny" }
[policies.analytics]
fields = { service_device_id = "pseudonymise", error_timestamp = "coarsen", error_datetime = "coarsen" }
coarsen = "hour"
[policies.everything]
[scopes]
"logs:analytics" = "analytics"
"logs:full" = "everything"
"#;

async fn privacy_state(prepared: Option<&std::path::Path>) -> AppState {
    let set = TokenSet::parse(&tokens()).expect("valid tokens");
    let auth = Authenticator::new(Some(Arc::new(TokenStore::fixed(set))), None);
    let aliases = FieldAliases::from_toml(
        "[aliases]\nappmetrica_device_id = \"service_device_id\"\nadvertising_id = \"google_aid\"\n",
    )
    .unwrap();
    let config = EngineConfig { target_partitions: 2, aliases, ..EngineConfig::default() };
    let key = Arc::new(PseudonymKey::new(KEY).unwrap());
    let policies = Arc::new(Policies::parse(POLICIES, Some(key)).unwrap());
    let state = AppState::new(engine(small_dataset(), config), auth, Settings::default())
        .await
        .unwrap()
        .with_policies(policies);
    match prepared {
        None => state,
        Some(spool) => {
            let config = PreparedConfig {
                retry_after: Duration::from_secs(1),
                wait: Duration::ZERO,
                ..PreparedConfig::new(DatasetLocation::Local(spool.into()))
            };
            state.with_prepared(Prepared::open(config, &S3Options::default()).await.unwrap())
        }
    }
}

const RANGE: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07";

async fn fetch(server: &TestServer, query: &str, token: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client()
        .get(server.url(&format!("/logs/v1/export/errors.csv?{query}")))
        .header("authorization", format!("OAuth {token}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

/// The CSV rows of an export as maps of column to value.
fn rows(body: &str) -> Vec<BTreeMap<String, String>> {
    let mut reader = csv::Reader::from_reader(body.as_bytes());
    let header = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| header.iter().zip(r.unwrap().iter()).map(|(h, v)| (h.to_owned(), v.to_owned())).collect())
        .collect()
}

/// A record's identity in these tests: its error group and both its times (`error_id` alone
/// names a group of records).
fn key(row: &BTreeMap<String, String>) -> String {
    format!("{} {} {}", row["error_id"], row["error_timestamp"], row["error_receive_timestamp"])
}

/// The rows of `rows` by [`key`], keeping only the keys of a single row.
fn by_key(rows: &[BTreeMap<String, String>]) -> BTreeMap<String, &BTreeMap<String, String>> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows {
        *counts.entry(key(row)).or_default() += 1;
    }
    rows.iter().filter(|r| counts[&key(r)] == 1).map(|r| (key(r), r)).collect()
}

async fn export_rows(
    server: &TestServer,
    query: &str,
    token: &str,
) -> (reqwest::header::HeaderMap, Vec<BTreeMap<String, String>>) {
    let response = fetch(server, query, token, &[]).await;
    assert_eq!(response.status(), StatusCode::OK, "{query}");
    let headers = response.headers().clone();
    (headers, rows(&response.text().await.unwrap()))
}

#[tokio::test]
async fn a_contractor_gets_pseudonyms_truncated_addresses_and_scrubbed_texts_and_says_so() {
    let _ = logged();
    let server =
        TestServer::start(privacy_state(None).await, ServeOptions::for_settings(&Settings::default())).await;
    let query = format!(
        "{RANGE}&fields=error_id,error_timestamp,error_receive_timestamp,service_device_id,device_ipv6,error,os_name"
    );
    let (_, full) = export_rows(&server, &query, FULL).await;
    let (headers, contractor) = export_rows(&server, &query, CONTRACTOR).await;
    assert_eq!(
        headers["logs-field-policy"],
        "service_device_id=pseudonymise, device_ipv6=truncate, error=scrub"
    );
    assert_eq!(full.len(), contractor.len());
    assert!(full.len() > 1000, "{}", full.len());
    let by_id = by_key(&full);
    assert!(by_id.len() * 10 > full.len() * 9, "keys name most records");
    let raw_ids: BTreeSet<&str> =
        full.iter().map(|r| r["service_device_id"].as_str()).filter(|v| !v.is_empty()).collect();
    for row in &contractor {
        let Some(raw) = by_id.get(&key(row)) else { continue };
        assert_eq!(row["os_name"], raw["os_name"]);
        let pseudonym = &row["service_device_id"];
        if raw["service_device_id"].is_empty() {
            assert!(pseudonym.is_empty());
        } else {
            assert_eq!(pseudonym.len(), 32, "{pseudonym}");
            assert!(pseudonym.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert!(!raw_ids.contains(pseudonym.as_str()));
        }
        let address = &row["device_ipv6"];
        if !address.is_empty() {
            let ip: std::net::IpAddr = address.parse().unwrap();
            match ip {
                std::net::IpAddr::V4(v4) => assert_eq!(v4.octets()[3], 0, "{address}"),
                std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                    Some(v4) => assert_eq!(v4.octets()[3], 0, "{address}"),
                    None => assert_eq!(u128::from(v6) & ((1u128 << 80) - 1), 0, "{address}"),
                },
            }
        }
    }
    // The same device, the same pseudonym; different devices, different pseudonyms.
    let mut pseudonym_of: BTreeMap<&str, &str> = BTreeMap::new();
    for row in &contractor {
        let Some(raw) = by_id.get(&key(row)) else { continue };
        let raw = raw["service_device_id"].as_str();
        if !raw.is_empty() {
            let previous = pseudonym_of.insert(raw, row["service_device_id"].as_str());
            assert!(previous.is_none_or(|p| p == row["service_device_id"]), "{raw}");
        }
    }
    let distinct: BTreeSet<&&str> = pseudonym_of.values().collect();
    assert_eq!(distinct.len(), pseudonym_of.len());
    // Nothing the contractor may not see reached the log.
    let log = logged();
    for raw in raw_ids.iter().filter(|id| id.len() > 6).take(50) {
        assert!(!log.contains(*raw), "{raw} in the log");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_denied_field_is_refused_in_fields_in_filters_and_by_alias() {
    let server =
        TestServer::start(privacy_state(None).await, ServeOptions::for_settings(&Settings::default())).await;
    for (query, location) in [
        (format!("{RANGE}&fields=error_id,google_aid"), "fields"),
        (format!("{RANGE}&fields=error_id,advertising_id"), "fields"),
        (format!("{RANGE}&fields=error_id&google_aid=x"), "google_aid"),
        (format!("{RANGE}&fields=error_id&advertising_id=x"), "advertising_id"),
    ] {
        let response = fetch(&server, &query, CONTRACTOR, &[]).await;
        let status = response.status();
        let body = error_body(status, &response.bytes().await.unwrap(), "invalid_parameter");
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        assert_eq!(body["errors"][0]["location"], location, "{body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains("google_aid") && message.contains("denies"), "{message}");
        // The same request under a token that may see the field.
        assert_eq!(fetch(&server, &query, FULL, &[]).await.status(), StatusCode::OK, "{query}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_pseudonym_filter_finds_exactly_the_device_s_records_also_by_alias() {
    let server =
        TestServer::start(privacy_state(None).await, ServeOptions::for_settings(&Settings::default())).await;
    let fields = "error_id,error_timestamp,error_receive_timestamp";
    let (_, full) = export_rows(&server, &format!("{RANGE}&fields={fields},service_device_id"), FULL).await;
    let (_, contractor) =
        export_rows(&server, &format!("{RANGE}&fields={fields},service_device_id"), CONTRACTOR).await;
    // The device with the most records.
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for row in full.iter().filter(|r| !r["service_device_id"].is_empty()) {
        *counts.entry(row["service_device_id"].as_str()).or_default() += 1;
    }
    let (device, _) = counts.iter().max_by_key(|(_, n)| **n).unwrap();
    let sorted_keys = |rows: &mut dyn Iterator<Item = &BTreeMap<String, String>>| {
        let mut keys: Vec<String> = rows.map(key).collect();
        keys.sort();
        keys
    };
    let expected = sorted_keys(&mut full.iter().filter(|r| r["service_device_id"] == *device));
    assert!(expected.len() >= 2, "{expected:?}");
    let unique = by_key(&contractor);
    let pseudonym = &expected.iter().find_map(|k| unique.get(k)).expect("a record of the device named once")
        ["service_device_id"];
    for name in ["service_device_id", "appmetrica_device_id"] {
        let (_, found) =
            export_rows(&server, &format!("{RANGE}&fields={fields},{name}&{name}={pseudonym}"), CONTRACTOR)
                .await;
        assert_eq!(sorted_keys(&mut found.iter()), expected, "{name}");
        assert!(found.iter().all(|r| r[name] == *pseudonym));
    }
    // The raw id is not a pseudonym: refused, never a silent empty export.
    let response =
        fetch(&server, &format!("{RANGE}&fields=error_id&service_device_id={device}"), CONTRACTOR, &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    server.stop().await;
}

#[tokio::test]
async fn scopes_and_the_default_choose_the_policy_and_a_coarse_time_takes_whole_hours() {
    let server =
        TestServer::start(privacy_state(None).await, ServeOptions::for_settings(&Settings::default())).await;
    // The default denies the device id.
    let response = fetch(&server, &format!("{RANGE}&fields=service_device_id"), DEFAULTED, &[]).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let (headers, scrubbed) =
        export_rows(&server, &format!("{RANGE}&fields=error_id,error"), DEFAULTED).await;
    assert_eq!(headers["logs-field-policy"], "error=scrub");
    assert!(!scrubbed.is_empty());
    // The scope's policy: hours.
    let fields = "error_id,error_timestamp,error_datetime,error_receive_timestamp,service_device_id";
    let (headers, coarse) = export_rows(&server, &format!("{RANGE}&fields={fields}"), SCOPED).await;
    assert_eq!(
        headers["logs-field-policy"],
        "error_timestamp=coarsen, error_datetime=coarsen, service_device_id=pseudonymise"
    );
    let (_, full) = export_rows(&server, &format!("{RANGE}&fields={fields}"), FULL).await;
    assert_eq!(coarse.len(), full.len());
    // By group, receive time and device, which the policy does not change.
    let identity = |r: &BTreeMap<String, String>, device: &str| {
        format!("{} {} {device}", r["error_id"], r["error_receive_timestamp"])
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &full {
        *counts.entry(identity(r, &r["service_device_id"])).or_default() += 1;
    }
    let raw: BTreeMap<String, &BTreeMap<String, String>> = full
        .iter()
        .map(|r| (identity(r, &r["service_device_id"]), r))
        .filter(|(k, _)| counts[k] == 1)
        .collect();
    // The raw device id each pseudonym stands for, from the full export's ids.
    let key = PseudonymKey::new(KEY).unwrap();
    let devices: BTreeSet<&str> =
        full.iter().map(|r| r["service_device_id"].as_str()).filter(|d| !d.is_empty()).collect();
    let device_of: BTreeMap<String, &str> =
        devices.into_iter().map(|d| (key.pseudonym(d.as_bytes()), d)).collect();
    let mut checked = 0;
    for row in &coarse {
        let Some(device) = device_of.get(&row["service_device_id"]) else { continue };
        let Some(r) = raw.get(&identity(row, device)) else { continue };
        checked += 1;
        let t: i64 = r["error_timestamp"].parse().unwrap();
        assert_eq!(row["error_timestamp"], (t - t.rem_euclid(3600)).to_string());
        assert_eq!(row["error_datetime"], format!("{}:00:00", &r["error_datetime"][..13]));
    }
    assert!(checked * 2 > coarse.len(), "{checked} of {}", coarse.len());
    let response = fetch(
        &server,
        "application_id=1001&date_since=2026-10-01 10:30:00&date_until=2026-10-02&fields=error_id",
        SCOPED,
        &[],
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body = json(&response.bytes().await.unwrap());
    assert_eq!(body["errors"][0]["location"], "date_since", "{body}");
    // Whole hours are fine.
    let response = fetch(
        &server,
        "application_id=1001&date_since=2026-10-01 10:00:00&date_until=2026-10-02&fields=error_id",
        SCOPED,
        &[],
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    // A token whose scope maps to the open policy has no header.
    let response = fetch(&server, &format!("{RANGE}&fields=error_id,service_device_id"), FULL, &[]).await;
    assert!(response.headers().get("logs-field-policy").is_none());
    server.stop().await;
}

/// Repeats a `Prefer: respond-async` request until it is not 202.
async fn prepared(server: &TestServer, query: &str, token: &str) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let response = fetch(server, query, token, &[("prefer", "respond-async")]).await;
        if response.status() != StatusCode::ACCEPTED {
            return response;
        }
        assert!(Instant::now() < deadline, "still preparing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_same_export_under_two_policies_never_crosses_streamed_or_prepared() {
    let spool = tempfile::tempdir().unwrap();
    let server = TestServer::start(
        privacy_state(Some(spool.path())).await,
        ServeOptions::for_settings(&Settings::default()),
    )
    .await;
    let query = format!("{RANGE}&fields=error_id,service_device_id,error");
    let streamed_full = fetch(&server, &query, FULL, &[]).await.text().await.unwrap();
    let streamed_contractor = fetch(&server, &query, CONTRACTOR, &[]).await.text().await.unwrap();
    assert_ne!(streamed_full, streamed_contractor);
    // The full export is prepared first: the contractor must not be served it.
    let full = prepared(&server, &query, FULL).await;
    assert_eq!(full.status(), StatusCode::OK);
    assert!(full.headers().get("logs-field-policy").is_none());
    let full = full.text().await.unwrap();
    let contractor = prepared(&server, &query, CONTRACTOR).await;
    assert_eq!(contractor.status(), StatusCode::OK);
    assert_eq!(contractor.headers()["logs-field-policy"], "service_device_id=pseudonymise, error=scrub");
    let contractor = contractor.text().await.unwrap();
    let sorted = |text: &str| {
        let mut lines: Vec<String> = rows(text).into_iter().map(|r| format!("{r:?}")).collect();
        lines.sort();
        lines
    };
    assert_eq!(sorted(&full), sorted(&streamed_full));
    assert_eq!(sorted(&contractor), sorted(&streamed_contractor));
    // And the other way round: asked again, each gets its own.
    assert_eq!(sorted(&prepared(&server, &query, FULL).await.text().await.unwrap()), sorted(&streamed_full));
    assert_eq!(
        sorted(&prepared(&server, &query, CONTRACTOR).await.text().await.unwrap()),
        sorted(&streamed_contractor)
    );
    server.stop().await;
}

#[tokio::test]
async fn the_openapi_document_describes_the_caller_s_own_fields() {
    let server =
        TestServer::start(privacy_state(None).await, ServeOptions::for_settings(&Settings::default())).await;
    let document = |token: &'static str| {
        let url = server.url("/openapi.json");
        async move {
            let response =
                client().get(url).header("authorization", format!("OAuth {token}")).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            json(&response.bytes().await.unwrap())
        }
    };
    let full = document(FULL).await;
    let contractor = document(CONTRACTOR).await;
    let fields = |doc: &serde_json::Value| -> Vec<String> {
        let parameters = doc["paths"]["/logs/v1/export/errors.csv"]["get"]["parameters"].as_array().unwrap();
        let fields = parameters.iter().find(|p| p["name"] == "fields").unwrap();
        fields["schema"]["items"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    };
    let filters = |doc: &serde_json::Value| -> Vec<String> {
        let parameters = doc["paths"]["/logs/v1/export/errors.csv"]["get"]["parameters"].as_array().unwrap();
        parameters.iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
    };
    for name in ["google_aid", "advertising_id"] {
        assert!(fields(&full).contains(&name.to_owned()), "{name}");
        assert!(!fields(&contractor).contains(&name.to_owned()), "{name}");
        assert!(filters(&full).contains(&name.to_owned()), "{name}");
        assert!(!filters(&contractor).contains(&name.to_owned()), "{name}");
    }
    // JSON writes integers as digit strings (this service's default); a pseudonym is hex.
    let record = |doc: &serde_json::Value| {
        doc["components"]["schemas"]["ErrorRecord"]["properties"]["service_device_id"].clone()
    };
    assert_eq!(record(&full)["pattern"], "^-?[0-9]+$", "{}", record(&full));
    assert!(record(&contractor).get("pattern").is_none(), "{}", record(&contractor));
    assert!(record(&contractor)["description"].as_str().unwrap().contains("pseudonymises"));
    let typed = |doc: &serde_json::Value| {
        doc["components"]["schemas"]["TypedRecord"]["properties"]["service_device_id"].clone()
    };
    assert!(typed(&full)["description"].as_str().unwrap().starts_with("Arrow `UInt64`"), "{}", typed(&full));
    assert!(
        typed(&contractor)["description"].as_str().unwrap().starts_with("Arrow `Utf8`"),
        "{}",
        typed(&contractor)
    );
    server.stop().await;
}

/// Under a policy that hides a field of the part hash, the parts are still disjoint and make
/// the whole export, but by a keyed hash: a part tells nothing about the raw device id.
#[tokio::test]
async fn parts_under_a_hidden_device_id_are_keyed_and_still_split_the_export() {
    let server =
        TestServer::start(privacy_state(None).await, ServeOptions::for_settings(&Settings::default())).await;
    let fields = "error_id,error_timestamp,error_receive_timestamp";
    let (_, whole) =
        export_rows(&server, &format!("{RANGE}&fields={fields},service_device_id"), CONTRACTOR).await;
    let (_, raw) = export_rows(&server, &format!("{RANGE}&fields={fields},service_device_id"), FULL).await;
    let raw = by_key(&raw);
    let mut union = Vec::new();
    let (mut checked, mut unkeyed) = (0, 0);
    for part in 0..3u32 {
        let query = format!("{RANGE}&fields={fields},service_device_id&parts_count=3&part_number={part}");
        let (_, rows) = export_rows(&server, &query, CONTRACTOR).await;
        for row in &rows {
            if let Some(r) = raw.get(&key(row)) {
                let device = r["service_device_id"].parse::<u64>().ok();
                let plain = logs_core::part::record_part(
                    r["error_timestamp"].parse().ok(),
                    r["error_receive_timestamp"].parse().ok(),
                    device,
                    Some(r["error_id"].as_str()),
                    3,
                );
                checked += 1;
                unkeyed += usize::from(plain == part);
            }
        }
        union.extend(rows);
    }
    let sorted = |rows: &[BTreeMap<String, String>]| {
        let mut lines: Vec<String> = rows.iter().map(|r| format!("{r:?}")).collect();
        lines.sort();
        lines
    };
    assert_eq!(sorted(&union), sorted(&whole));
    assert!(checked > 1000, "{checked}");
    // A keyed hash agrees with the plain one on about a third of the records, not all.
    assert!(unkeyed * 2 < checked, "{unkeyed} of {checked} in their unkeyed part");
    server.stop().await;
}
