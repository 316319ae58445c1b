//! A dataset in a bucket, tried as a new user would, against a real S3 server (moto on
//! loopback): `logs generate --out s3://…`, then `logs export --data s3://…` and
//! `logs serve --data s3://…` answer the same bytes as over the folder the same generator
//! wrote; what they print and log holds no credential; a store that fails after the first
//! byte aborts the transfer.

use std::ffi::OsStr;
use std::process::{Output, Stdio};
use std::time::Duration;

mod common;

use common::*;
use logs_testkit::proxy::{FaultProxy, Mode};
use logs_testkit::s3::{ACCESS_KEY_ID, S3Server, SECRET_ACCESS_KEY};

const TARGETS: [&str; 3] = [
    "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,error,error_json,city,device_ipv6,mcc,service_device_id",
    "errors.json?application_id=1002&date_since=2026-10-02&date_until=2026-10-05+12:00:00&fields=error_datetime,error,operator_name&os_name=android&use_utf8_bom=true",
    "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name&date_dimension=receive",
];

fn run(args: &[&OsStr], env: &[(&str, String)]) -> Output {
    logs_command().args(args).envs(env.iter().map(|(k, v)| (k, v))).output().unwrap()
}

#[track_caller]
fn ok(output: Output) -> Output {
    assert!(output.status.success(), "{:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    output
}

fn no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET_ACCESS_KEY), "{what} holds the secret key:\n{text}");
    assert!(!text.contains(ACCESS_KEY_ID), "{what} holds the access key id:\n{text}");
}

fn generate(out: &OsStr, env: &[(&str, String)]) {
    generate_rows(out, "6000", env);
}

fn generate_rows(out: &OsStr, rows: &str, env: &[(&str, String)]) {
    let args = ["generate", "--rows", rows, "--days", "7", "--threads", "2", "--out"];
    let mut all: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    all.push(out);
    ok(run(&all, env));
}

fn export(data: &OsStr, target: &str, flags: &[&str], env: &[(&str, String)]) -> Output {
    let mut args: Vec<&OsStr> = vec![OsStr::new("export"), OsStr::new("--data"), data];
    args.extend(flags.iter().map(OsStr::new));
    args.push(OsStr::new(target));
    run(&args, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_export_and_serve_over_a_bucket_answer_the_bytes_of_the_folder() {
    let server = S3Server::start();
    server.create_bucket("logs");
    let env = server.env();
    let folder = tempfile::tempdir().unwrap();
    let local = folder.path().join("data");
    generate(local.as_os_str(), &[]);
    let bucket = OsStr::new("s3://logs/generated/v1");
    generate(bucket, &env);
    // Into a prefix that holds keys already: refused.
    let again = run(
        &[OsStr::new("generate"), OsStr::new("--rows"), OsStr::new("10"), OsStr::new("--out"), bucket],
        &env,
    );
    assert_eq!(again.status.code(), Some(2), "{}", String::from_utf8_lossy(&again.stderr));

    for target in TARGETS {
        let expected = ok(export(local.as_os_str(), target, &[], &[])).stdout;
        assert!(expected.len() > 200, "{target}");
        let got = ok(export(bucket, target, &[], &env)).stdout;
        assert!(
            got == expected,
            "{target}: {} bytes from the bucket, {} from the folder",
            got.len(),
            expected.len()
        );
    }

    let explained = ok(export(bucket, TARGETS[0], &["--explain"], &env));
    let text =
        String::from_utf8_lossy(&explained.stderr).into_owned() + &String::from_utf8_lossy(&explained.stdout);
    assert!(text.contains(" LIST, 0 HEAD, ") && text.contains("bytes fetched"), "{text}");
    no_secret("--explain", &text);

    // The service over the bucket, its log captured.
    let log = tempfile::NamedTempFile::new().unwrap();
    let served = serve_env(bucket, &["--log", "debug"], Stdio::from(log.reopen().unwrap()), &env);
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    for target in TARGETS {
        let expected = ok(export(local.as_os_str(), target, &["--target-partitions", "1"], &[])).stdout;
        let url = format!("{}/logs/v1/export/{target}", served.base);
        let response =
            client.get(&url).header("Authorization", format!("OAuth {}", served.token)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{target}");
        let body = response.bytes().await.unwrap();
        assert!(
            body == expected,
            "{target}: {} bytes over HTTP, {} from the folder",
            body.len(),
            expected.len()
        );
    }
    let apps = client
        .get(format!("{}/management/v1/applications", served.base))
        .header("Authorization", format!("OAuth {}", served.token))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(apps.contains("1001") && apps.contains("1003"), "{apps}");
    // The creation date is the first date folder's, listed in the bucket.
    assert!(apps.contains(r#""create_date":"2026-10-01""#), "{apps}");
    drop(served);
    no_secret("the service's log", &std::fs::read_to_string(log.path()).unwrap());
}

/// The golden outputs of `tests/cli.rs`, exported from the bundled testdata in a bucket.
#[test]
fn the_golden_outputs_on_testdata_in_a_bucket() {
    let server = S3Server::start();
    server.create_bucket("testdata");
    let dataset = testdata();
    server.upload_folder(&dataset, "testdata", "dataset");
    let ios_day = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02+23:59:59\
        &fields=error_datetime,error_id,error_name,error,os_name,os_version,service_device_id,mcc,city&os_name=ios&limit=25";
    let edge = "application_id=9001&date_since=2026-10-01&date_until=2026-10-07&fields=error_datetime,error,error_name,\
        error_id,error_json,city,os_name,mcc,mnc,service_device_id,device_ipv6,windows_aid,profile_id,app_version_name,application_id";
    let snapshots = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    for (snapshot, target) in [
        ("ios_day.csv", format!("errors.csv?{ios_day}")),
        ("ios_day.json", format!("errors.json?{ios_day}")),
        ("edge_cases.csv", format!("/logs/v1/export/errors.csv?{edge}&use_utf8_bom=true")),
        ("edge_cases.json", format!("/logs/v1/export/errors.json?{edge}&use_utf8_bom=1")),
    ] {
        let got = ok(export(
            OsStr::new("s3://testdata/dataset"),
            &target,
            &["--target-partitions", "1"],
            &server.env(),
        ))
        .stdout;
        let expected = std::fs::read(snapshots.join(snapshot)).unwrap();
        assert!(
            got == expected,
            "{snapshot}: {} bytes from the bucket, {} in the snapshot",
            got.len(),
            expected.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fails_is_a_clear_error_before_the_first_byte_and_an_abort_after_it() {
    let server = S3Server::start();
    server.create_bucket("logs");
    let folder = tempfile::tempdir().unwrap();
    generate_rows(folder.path().join("data").as_os_str(), "40000", &[]);
    server.upload_folder(&folder.path().join("data"), "logs", "data");
    let proxy = FaultProxy::start(server.addr(), Mode::Pass);
    let mut env = server.env();
    env.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    env.push(("AWS_ENDPOINT_URL", proxy.endpoint()));
    let bucket = OsStr::new("s3://logs/data");

    // The CLI: a missing bucket (a store failing for good takes the same path: exit 1, named).
    let missing = export(OsStr::new("s3://no-such-bucket/data"), TARGETS[0], &[], &env);
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("s3://no-such-bucket/data"), "{stderr}");
    no_secret("the error", &stderr);

    // The service: a 503 JSON error before the first byte.
    let served = serve_env(bucket, &[], Stdio::null(), &env);
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let url = format!("{}/logs/v1/export/{}", served.base, TARGETS[0]);
    proxy.set_mode(Mode::Status(503));
    let response =
        client.get(&url).header("Authorization", format!("OAuth {}", served.token)).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let body = response.text().await.unwrap();
    assert!(body.contains("storage_unavailable"), "{body}");
    no_secret("the error body", &body);

    // After the first byte: streaming starts, then every request to the store fails: the
    // transfer aborts.
    proxy.set_mode(Mode::Pass);
    let big = "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error,error_json,error_id";
    let mut response = client
        .get(format!("{}/logs/v1/export/{big}", served.base))
        .header("Authorization", format!("OAuth {}", served.token))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = response.chunk().await.unwrap().expect("a first chunk");
    assert!(!first.is_empty());
    proxy.set_mode(Mode::Status(500));
    let mut aborted = false;
    loop {
        match response.chunk().await {
            Ok(Some(_)) => continue,
            Ok(None) => break,
            Err(_) => {
                aborted = true;
                break;
            }
        }
    }
    assert!(aborted, "a transfer whose store failed after the first byte must abort, never end cleanly");
}
