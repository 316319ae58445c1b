//! Field policies against the independent Python oracle (`tests/clients/privacy.py`: Python's
//! `hmac`, `ipaddress` and its own regexes over DuckDB's rows): random requests, in random
//! formats, under random policies given to `logs serve` through its policies file; the Rust
//! scrubber against the oracle's on random texts; and the handover of `logs export --policy`
//! read by pandas with every record present and no identifier left.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use common::python::{Readers, clients_dir, run_script_with};
use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const FORMATS: [&str; 5] = ["csv", "json", "ndjson", "parquet", "arrow"];

/// The treatments a random policy may give each field (time twins get one choice for both).
fn choices(field: &str) -> &'static [&'static str] {
    match field {
        "error_timestamp" | "error_datetime" | "error_receive_timestamp" | "error_receive_datetime" => {
            &["allow", "allow", "coarsen", "deny"]
        }
        "service_device_id" | "mcc" | "mnc" | "application_id" => &["allow", "pseudonymise", "deny"],
        "device_ipv6" => &["allow", "truncate", "truncate", "pseudonymise", "deny"],
        "error" | "error_json" | "city" | "operator_name" => {
            &["allow", "scrub", "scrub", "pseudonymise", "deny"]
        }
        _ => &["allow", "allow", "pseudonymise", "scrub", "deny"],
    }
}

/// Every field of the record, in the order of the data contract.
fn all_fields() -> Vec<&'static str> {
    logs_core::Field::all().map(logs_core::Field::name).collect()
}

/// A random policy, as the policies file writes it and as the oracle reads it (JSON).
fn random_policy(rng: &mut StdRng) -> Value {
    let mut fields = BTreeMap::new();
    // A time and its text twin get one treatment.
    let twin = |field: &'static str| -> &'static str {
        match field {
            "error_datetime" => "error_timestamp",
            "error_receive_datetime" => "error_receive_timestamp",
            other => other,
        }
    };
    let mut chosen: BTreeMap<&str, String> = BTreeMap::new();
    for field in all_fields() {
        let treatment = chosen
            .entry(twin(field))
            .or_insert_with(|| choices(field).choose(rng).unwrap().to_string())
            .clone();
        if treatment != "allow" {
            fields.insert(field.to_owned(), treatment);
        }
    }
    let patterns: Vec<&str> =
        if rng.random_bool(0.5) { vec!["Activity[A-Z][a-z]+", "0x[0-9a-f]{6,}"] } else { vec![] };
    let ipv4_prefix = *[8, 16, 24, 31].choose(rng).unwrap();
    let ipv6_prefix = *[16, 32, 48, 64, 127].choose(rng).unwrap();
    json!({
        "fields": fields,
        "ipv4_prefix": ipv4_prefix,
        "ipv6_prefix": ipv6_prefix,
        "coarsen": if rng.random_bool(0.5) { "hour" } else { "day" },
        "scrub_patterns": patterns,
    })
}

/// The policies file of one policy per scope `p<i>` (the scrub patterns are the service's:
/// all the policies of one run share them).
fn policies_file(policies: &[Value], patterns: &Value) -> String {
    let mut text = format!("scrub_patterns = {patterns}\n");
    for (i, p) in policies.iter().enumerate() {
        let fields: Vec<String> =
            p["fields"].as_object().unwrap().iter().map(|(f, t)| format!("{f} = {t}")).collect();
        text.push_str(&format!(
            "[policies.p{i}]\nfields = {{ {} }}\nipv4_prefix = {}\nipv6_prefix = {}\ncoarsen = {}\n",
            fields.join(", "),
            p["ipv4_prefix"],
            p["ipv6_prefix"],
            p["coarsen"]
        ));
    }
    text.push_str("[scopes]\n");
    for i in 0..policies.len() {
        text.push_str(&format!("\"p{i}\" = \"p{i}\"\n"));
    }
    text
}

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, flags: &[&str]) -> Server {
    let log = dir.join("serve.log");
    let mut child = logs_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(testdata())
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let line = lines
        .find(|l| l.starts_with("logs serve: serving"))
        .unwrap_or_else(|| panic!("logs serve did not start:\n{}", std::fs::read_to_string(&log).unwrap()));
    Server { child, base: line.rsplit(' ').next().unwrap().to_owned() }
}

fn get(base: &str, target: &str, token: &str) -> (u16, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        logs_server::install_tls_provider();
        let response = reqwest::Client::new()
            .get(format!("{base}/logs/v1/export/{target}"))
            .header("authorization", format!("OAuth {token}"))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.bytes().await.unwrap().to_vec())
    })
}

fn key_file(dir: &Path, rng: &mut StdRng) -> PathBuf {
    let path = dir.join("pseudonym.key");
    let key: [u8; 48] = rng.random();
    std::fs::write(&path, key).unwrap();
    path
}

/// A random request under `policy`: an application with edge cases or generated records,
/// whole days, fields the policy does not deny, sometimes a filter on a field it treats
/// (with a value seen in an export under the policy), sometimes a limit.
fn random_query(rng: &mut StdRng, policy: &Value, base: &str, token: &str) -> String {
    let denied = |f: &str| policy["fields"][f] == "deny";
    let app = *[9001, 1001].choose(rng).unwrap();
    let (first, last) = if app == 9001 { (1, 7) } else { (rng.random_range(1..=6), 7) };
    let dimension = if rng.random_bool(0.3) { "&date_dimension=receive" } else { "" };
    let allowed: Vec<&str> = all_fields().into_iter().filter(|f| !denied(f)).collect();
    let count = rng.random_range(1..=allowed.len().min(8));
    let fields: Vec<&str> = allowed.choose_multiple(rng, count).copied().collect();
    let mut query = format!(
        "application_id={app}&date_since=2026-10-{first:02}&date_until=2026-10-{last:02}{dimension}&fields={}",
        fields.join(",")
    );
    let treated: Vec<&str> = fields
        .iter()
        .copied()
        .filter(|f| policy["fields"][*f].as_str().is_some_and(|t| t != "deny") && *f != "application_id")
        .collect();
    if rng.random_bool(0.5)
        && let Some(field) = treated.choose(rng)
    {
        // A value as the caller sees it, from an export under the policy.
        let (status, body) = get(base, &format!("errors.ndjson?{query}&limit=50"), token);
        assert_eq!(status, 200, "{query}: {}", String::from_utf8_lossy(&body));
        let values: Vec<String> = String::from_utf8(body)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).unwrap()[*field].as_str().map(str::to_owned))
            .filter(|v| !v.is_empty() && v.len() < 200)
            .collect();
        if let Some(value) = values.choose(rng) {
            let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
            query.push_str(&format!("&{field}={encoded}"));
        }
    }
    if rng.random_bool(0.2) {
        query.push_str(&format!("&limit={}", rng.random_range(1..20)));
    }
    query
}

#[test]
fn random_requests_under_random_policies_match_the_python_oracle_in_every_format() {
    let seed: u64 =
        std::env::var("PRIVACY_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("PRIVACY_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), &mut rng);
    let patterns = json!(["Activity[A-Z][a-z]+", "0x[0-9a-f]{6,}"]);
    let mut policies: Vec<Value> = (0..4).map(|_| random_policy(&mut rng)).collect();
    for p in &mut policies {
        p["scrub_patterns"] = patterns.clone();
    }
    let policies_path = dir.path().join("policies.toml");
    std::fs::write(&policies_path, policies_file(&policies, &patterns)).unwrap();
    let mut tokens = String::new();
    for i in 0..policies.len() {
        tokens.push_str(&format!("[[tokens]]\nname = \"t{i}\"\ntoken = \"token-{i}-abcdefgh\"\nscopes = [\"service:read\", \"p{i}\"]\n"));
    }
    let tokens_path = dir.path().join("tokens.toml");
    std::fs::write(&tokens_path, tokens).unwrap();
    let server = start(
        dir.path(),
        &[
            "--tokens",
            tokens_path.to_str().unwrap(),
            "--field-policies",
            policies_path.to_str().unwrap(),
            "--pseudonym-key-file",
            key.to_str().unwrap(),
        ],
    );
    let mut checked = 0;
    for round in 0..16 {
        let i = rng.random_range(0..policies.len());
        let token = format!("token-{i}-abcdefgh");
        let query = random_query(&mut rng, &policies[i], &server.base, &token);
        let format = *FORMATS.choose(&mut rng).unwrap();
        let (status, body) = get(&server.base, &format!("errors.{format}?{query}"), &token);
        assert_eq!(status, 200, "round {round}, policy {i}: {query}: {}", String::from_utf8_lossy(&body));
        let export = dir.path().join(format!("export-{round}.{format}"));
        std::fs::write(&export, &body).unwrap();
        let policy = dir.path().join(format!("policy-{round}.json"));
        std::fs::write(&policy, policies[i].to_string()).unwrap();
        let output = run_script_with(
            Readers::Formats,
            "privacy.py",
            &[
                "compare",
                "--dataset",
                testdata().to_str().unwrap(),
                "--query",
                &query,
                "--policy",
                policy.to_str().unwrap(),
                "--key-file",
                key.to_str().unwrap(),
                "--format",
                format,
                "--export",
                export.to_str().unwrap(),
            ],
        );
        let report: Value = serde_json::from_str(output.lines().last().unwrap()).unwrap();
        assert_eq!(report["ok"], true, "round {round} (seed {seed}): {query} as {format}: {output}");
        checked += report["rows"].as_u64().unwrap();
    }
    assert!(checked > 100, "{checked} rows compared");
}

/// Random texts built from secrets, near misses and crash-text noise: the Rust scrubber and
/// the oracle's agree on every one.
#[test]
fn the_scrubber_agrees_with_the_oracle_on_random_texts() {
    let seed: u64 = rand::random();
    let mut rng = StdRng::seed_from_u64(seed);
    let pieces = [
        "jane.doe@example.com",
        "a@b.io",
        "user@localhost",
        "+49 30 1234567",
        "(555) 123-4567",
        "555.123.4567",
        "4111 1111 1111 1111",
        "4111-1111-1111-1112",
        "5500005555555559",
        "192.168.0.1",
        "256.1.1.1",
        "1.2.3.4.5",
        "10.0.1",
        "::1",
        "fe80::1%eth0",
        "2001:db8::1",
        "::ffff:10.0.0.1",
        "std::vector",
        "12:34:56",
        "Bearer abcdefgh12345678",
        "OAuth tok_1234567890",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
        "0x7fff5fbff8c0",
        "ActivityMain",
        "at com.app.Main.run(Main.java:42)",
        "\n",
        "\t",
        " ",
        ",",
        ".",
        "\"",
        "\\\"",
        ":",
        "-",
        "é",
        "2026-10-01",
        "line 1234567890123",
        "é@x.com",
        "café",
    ];
    let texts: Vec<String> = (0..2000)
        .map(|_| {
            (0..rng.random_range(1..12))
                .map(|_| *pieces.choose(&mut rng).unwrap())
                .collect::<Vec<_>>()
                .join("")
        })
        .collect();
    let patterns = vec!["Activity[A-Z][a-z]+".to_owned()];
    let scrubber = logs_core::Scrubber::new(&patterns).unwrap();
    let python = logs_testkit::python::python(
        Readers::Formats.name(),
        include_str!("clients/formats-requirements.txt"),
    );
    let mut child = std::process::Command::new(python)
        .arg(clients_dir().join("privacy.py"))
        .arg("scrub")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input: String =
        texts.iter().map(|t| format!("{}\n", json!({"text": t, "patterns": patterns}))).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(output.status.success());
    let answers: Vec<Value> =
        String::from_utf8(output.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), texts.len());
    for (text, answer) in texts.iter().zip(&answers) {
        assert_eq!(scrubber.scrub(text), answer["scrubbed"].as_str().unwrap(), "seed {seed}: {text:?}");
    }
}

/// The handover of docs/operations.md: `logs export --policy contractor` writes a CSV that
/// pandas reads with every record of the full export and no identifier of it; `--explain`
/// names the treatments and never the key.
#[test]
fn a_dataset_prepared_for_a_contractor_keeps_every_record_and_no_identifier() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("pseudonym.key");
    std::fs::write(&key, b"a key of thirty-two bytes or more, for the handover").unwrap();
    let policies = dir.path().join("policies.toml");
    std::fs::write(
        &policies,
        "[policies.contractor]\nfields = { service_device_id = \"pseudonymise\", ios_ifa = \"pseudonymise\", \
         ios_ifv = \"pseudonymise\", windows_aid = \"pseudonymise\", profile_id = \"pseudonymise\", \
         google_aid = \"deny\", device_ipv6 = \"truncate\", error = \"scrub\", error_json = \"scrub\" }\n",
    )
    .unwrap();
    let fields: Vec<&str> = all_fields().into_iter().filter(|f| *f != "google_aid").collect();
    let target = format!(
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields={}",
        fields.join(",")
    );
    let flags = [
        "--field-policies",
        policies.to_str().unwrap(),
        "--policy",
        "contractor",
        "--pseudonym-key-file",
        key.to_str().unwrap(),
    ];
    let handed = dir.path().join("contractor.csv");
    std::fs::write(&handed, export_with(&testdata(), &flags, &target)).unwrap();
    let full = dir.path().join("full.csv");
    let all = format!("{target},google_aid");
    std::fs::write(&full, export(&testdata(), &all)).unwrap();
    let output = run_script_with(
        Readers::Formats,
        "privacy.py",
        &[
            "handover",
            "--export",
            handed.to_str().unwrap(),
            "--full",
            full.to_str().unwrap(),
            "--identifiers",
            "service_device_id,ios_ifa,ios_ifv,windows_aid,profile_id,google_aid,device_ipv6",
        ],
    );
    let report: Value = serde_json::from_str(output.lines().last().unwrap()).unwrap();
    assert!(report["rows"].as_u64().unwrap() > 1000, "{report}");
    assert_eq!(report["rows"], report["full_rows"], "{report}");
    assert_eq!(report["leaks"], json!([]), "{report}");

    let explain =
        String::from_utf8(export_with(&testdata(), &[&flags[..], &["--explain"]].concat(), &target)).unwrap();
    assert!(explain.contains("logs_pseudonymise(") && explain.contains("logs_scrub("), "{explain}");
    assert!(!explain.contains("thirty-two"), "{explain}");
    // A denied field is bad usage naming it; an unknown policy names those there are.
    let refused = logs_command()
        .args(["export", "--data"])
        .arg(testdata())
        .args(flags)
        .arg("errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=google_aid")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("google_aid"));
    let unknown = logs_command()
        .args(["export", "--data"])
        .arg(testdata())
        .args(&flags[..2])
        .args(["--policy", "nobody", "--pseudonym-key-file", key.to_str().unwrap()])
        .arg(&target)
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("contractor"),
        "{}",
        String::from_utf8_lossy(&unknown.stderr)
    );
}
