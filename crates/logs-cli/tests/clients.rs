//! Clients written for the original API, run unchanged against `logs serve` over a real socket:
//! standard readers (Python's `csv`, pandas, DuckDB, a line-splitting reader, `json`) keep
//! every record of exports whose records could look like empty or broken lines; a reader that
//! parses numbers as doubles gets every id exactly; a loader-style client downloads 14 days
//! with the original API's field names, exactly the rows DuckDB computes from the files, both
//! streamed and through prepared exports (repeating on 202, splitting a day into parts), and
//! gets every row of a day although it stops reading for longer than the write timeout; and the
//! PyPI client `appmetrica-logs-api` downloads days streamed and prepared, polling with
//! `Cache-Control: no-cache`, each day one job.
//!
//! The readers run in a Python environment the tests make on first use (`common::python`).

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::python::{run_script, spawn_script};
use common::*;
use serde_json::Value;

/// One JSON report per line, as the scripts print them.
fn reports(output: &str) -> Vec<Value> {
    output.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The records of `target` as `logs export` writes them in JSON (same aliases).
fn records(data: &Path, target: &str) -> Vec<serde_json::Map<String, Value>> {
    let json_target = target.replacen("errors.csv", "errors.json", 1);
    let body = export_with(data, &["--field-aliases", &original_api_aliases()], &json_target);
    let document: Value = serde_json::from_slice(&body).unwrap();
    document["data"].as_array().unwrap().iter().map(|r| r.as_object().unwrap().clone()).collect()
}

fn requested_fields(target: &str) -> Vec<&str> {
    let fields = target.split("fields=").nth(1).unwrap().split('&').next().unwrap();
    fields.split(',').collect()
}

const DAYS: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02";

#[test]
fn standard_readers_keep_every_record() {
    let data = testdata();
    let served = serve_with(&data, &["--field-aliases", &original_api_aliases()], Stdio::null());
    let one_field = format!("errors.csv?{DAYS}&fields=profile_id");
    let absent = format!("errors.csv?{DAYS}&fields=oaid");
    let two_absent = format!("errors.csv?{DAYS}&fields=oaid,android_id");
    // The edge cases: values holding CR, LF, VT, FF, U+001C..U+001E, NEL, U+2028, U+2029.
    let line_breaks = "errors.csv?application_id=9001&date_since=2026-10-01&date_until=2026-10-07\
                       &fields=error,error_name,error_id,city,appmetrica_device_id"
        .to_owned();
    let targets = [&one_field, &absent, &two_absent, &line_breaks];

    // The test means something only if these exports hold what loses records.
    let nulls = records(&data, &one_field).iter().filter(|r| r["profile_id"].is_null()).count();
    assert!(nulls > 100, "{nulls} null profile ids");
    assert!(records(&data, &absent).iter().all(|r| r["oaid"].is_null()));
    let breaks = ['\u{b}', '\u{c}', '\u{1c}', '\u{1d}', '\u{1e}', '\u{85}', '\u{2028}', '\u{2029}'];
    let with_breaks = records(&data, &line_breaks)
        .iter()
        .filter(|r| r.values().any(|v| v.as_str().is_some_and(|s| s.contains(breaks))))
        .count();
    assert!(with_breaks > 0, "no value with a Unicode line break in the edge cases");

    let targets: Vec<&str> = targets.iter().map(|t| t.as_str()).collect();
    let mut args = vec![served.base.as_str(), served.token.as_str()];
    args.extend(&targets);
    let reports = reports(&run_script("readers.py", &args));
    assert_eq!(reports.len(), targets.len());
    for (report, target) in reports.iter().zip(&targets) {
        let expected = records(&data, target).len() as u64;
        assert!(expected > 0, "{target}");
        for reader in ["csv", "csv_lines", "pandas", "duckdb"] {
            assert_eq!(report[reader].as_u64(), Some(expected), "{reader} on {target}: {report}");
        }
        assert_eq!(report["csv_lines_equal"], true, "{target}: {report}");
        let fields = requested_fields(target);
        for header in ["header", "pandas_header", "duckdb_header"] {
            assert_eq!(report[header], serde_json::json!(fields), "{header} of {target}");
        }
        assert_eq!(report["content_encoding"], "gzip", "{target}");
    }
}

#[test]
fn json_parsers_read_bom_requests_and_doubles_get_exact_ids() {
    let data = testdata();
    let target =
        format!("errors.json?{DAYS}&fields=error_id,appmetrica_device_id,mcc,oaid&use_utf8_bom=true");
    let expected = records(&data, &target);
    assert!(expected.len() > 100);
    // Device ids beyond 2^53, which a double cannot hold.
    assert!(
        expected
            .iter()
            .any(|r| r["appmetrica_device_id"].as_str().unwrap().parse::<u64>().unwrap() > 1 << 53)
    );

    for (json_integers, double_exact) in [("string", true), ("number", false)] {
        let flags = ["--field-aliases", &original_api_aliases(), "--json-integers", json_integers];
        let served = serve_with(&data, &flags, Stdio::null());
        let report = &reports(&run_script("readers.py", &[&served.base, &served.token, &target]))[0];
        assert_eq!(report["json"].as_u64(), Some(expected.len() as u64), "{report}");
        assert_eq!(report["starts_with_bom"], false, "{report}");
        // With numbers, the double-based reader rounds the ids: the test can fail.
        assert_eq!(report["double_exact"], double_exact, "--json-integers {json_integers}: {report}");
    }
}

/// The 14 days the loader tests copy: 12,000 records, about 690 a day of application 1001
/// (two pandas chunks a day), each day's CSV 0.86 to 1.08 MB.
fn fourteen_days() -> tempfile::TempDir {
    generated(12_000, 14)
}

/// The records of application 1001 in the first `days` days from 2026-10-01 (at most 31), as
/// `logs export` counts them.
fn days_records(data: &Path, days: u32) -> u64 {
    let target = format!(
        "errors.csv?application_id=1001&date_since=2026-10-01%2000:00:00\
         &date_until=2026-10-{days:02}%2023:59:59&fields=error_id"
    );
    records(data, &target).len() as u64
}

#[test]
fn a_loader_of_the_original_api_downloads_14_days_exactly_as_duckdb_computes() {
    let data = fourteen_days();
    let served = serve_with(data.path(), &["--field-aliases", &original_api_aliases()], Stdio::null());
    let root = data.path().display().to_string();
    let output = run_script("loader.py", &[&served.base, &served.token, &root, "1001", "2026-10-01", "14"]);
    let report = &reports(&output)[0];
    assert_eq!(report["days"], 14, "{report}");
    // Streamed: one request a day, never a 202, never split.
    assert_eq!(report["requests"], 14, "{report}");
    assert_eq!(report["accepted"], 0, "{report}");
    assert_eq!(report["parts"], 1, "{report}");
    assert_eq!(report["prepared"], false, "{report}");
    assert_eq!(report["gzip"], true, "{report}");
    let rows = report["rows"].as_u64().unwrap();
    assert!(rows > 5_000, "{report}");
    assert_eq!(rows, days_records(data.path(), 14), "{report}");
}

/// The same loader against prepared exports (`--prepare always`, with `--prepared-wait 0s` so
/// that every first request is answered 202): it repeats each request on 202 after
/// `Retry-After`, and splits the one day larger than `--prepared-max-size` 1040KiB
/// (1,064,960 bytes: the 1st, 1,076,480 bytes of CSV; the next largest day has 1,055,063) into
/// two parts of about 540 KB. It pauses 0.5 s after each chunk of 500 rows, as a loader that
/// inserts each chunk before reading the next. (With these days, each gzipped body of 110 to
/// 210 KB is read whole before pandas yields its first chunk, so the pauses do not stop the
/// server's writes here: a download paused beyond the write timeout is tested with a 60 MB
/// export in `crates/logs-server/tests/prepared.rs`.) About 30 s: 16 waits of 1 s and 28
/// pauses of 0.5 s.
#[test]
fn a_loader_downloads_14_days_through_prepared_exports_with_pauses_and_parts() {
    let data = fourteen_days();
    let spool = tempfile::tempdir().unwrap();
    let spool_path = spool.path().display().to_string();
    let flags = [
        "--field-aliases",
        &original_api_aliases(),
        "--spool",
        &spool_path,
        "--prepared-max-size",
        "1040KiB",
        "--write-timeout",
        "1s",
        "--download-write-timeout",
        "60s",
    ];
    let flags = [&flags[..], &PREPARE_ALWAYS_AT_ONCE].concat();
    let served = serve_with(data.path(), &flags, Stdio::null());
    let root = data.path().display().to_string();
    let args = [served.base.as_str(), &served.token, &root, "1001", "2026-10-01", "14", "0.5"];
    let report = &reports(&run_script("loader.py", &args))[0];
    assert_eq!(report["days"], 14, "{report}");
    assert!(report["accepted"].as_u64().unwrap() >= 14, "{report}");
    assert!(report["parts"].as_u64().unwrap() >= 2, "{report}");
    assert!(report["requests"].as_u64().unwrap() > report["accepted"].as_u64().unwrap(), "{report}");
    assert_eq!(report["prepared"], true, "{report}");
    assert_eq!(report["gzip"], true, "{report}");
    assert_eq!(report["rows"].as_u64(), Some(days_records(data.path(), 14)), "{report}");

    // One manifest per export prepared: the 13 whole days and at least two parts.
    let manifests = std::fs::read_dir(spool.path())
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name().to_string_lossy().ends_with(".manifest.json"))
        .count();
    assert!(manifests >= 15, "{manifests} manifests in the spool");
}

/// The 3 days the PyPI client copies: about 690 records a day of application 1001.
fn three_days() -> tempfile::TempDir {
    generated(2_600, 3)
}

/// `logs serve` with more flags, its log written to the file `log`.
fn serve_logged(data: &Path, flags: &[&str], log: &Path) -> Served {
    serve_with(data, flags, Stdio::from(std::fs::File::create(log).unwrap()))
}

/// The prepared jobs a server started, from its log: one line each.
fn jobs_started(log: &str) -> usize {
    log.matches("preparing an export").count()
}

#[test]
fn the_pypi_client_downloads_3_days_streamed_exactly_as_duckdb_computes() {
    let data = three_days();
    let served = serve_with(data.path(), &["--field-aliases", &original_api_aliases()], Stdio::null());
    let root = data.path().display().to_string();
    let args = [served.base.as_str(), &served.token, &root, "1001", "2026-10-01", "3"];
    let report = &reports(&run_script("pypi_client.py", &args))[0];
    assert_eq!(report["days"], 3, "{report}");
    // Streamed: one request a day (each with `Cache-Control: no-cache`), never a 202.
    assert_eq!(report["requests"], 3, "{report}");
    assert_eq!(report["accepted"], 0, "{report}");
    assert_eq!(report["rows"].as_u64(), Some(days_records(data.path(), 3)), "{report}");
}

/// The PyPI client against `--prepare always`: it repeats each request answered 202 with
/// `Cache-Control: no-cache` (what it always sends), so each poll must join the day's job and
/// get its export, never throw the job away and start another. The script gives up after 120 s
/// (a server whose every poll starts a fresh job answers 202 forever), saying what each of its
/// requests was answered.
#[test]
fn the_pypi_client_polling_with_no_cache_downloads_3_prepared_days_one_job_each() {
    let data = three_days();
    let spool = tempfile::tempdir().unwrap();
    let spool_path = spool.path().display().to_string();
    // Not in the spool: the server deletes what it does not know there.
    let logs = tempfile::tempdir().unwrap();
    let log_path = logs.path().join("serve.log");
    let flags = ["--field-aliases", &original_api_aliases(), "--spool", &spool_path, "--prepare", "always"];
    let served = serve_logged(data.path(), &flags, &log_path);
    let root = data.path().display().to_string();
    let args = [served.base.as_str(), &served.token, &root, "1001", "2026-10-01", "3", "120"];
    let report = &reports(&run_script("pypi_client.py", &args))[0];
    assert_eq!(report["days"], 3, "{report}");
    assert_eq!(report["rows"].as_u64(), Some(days_records(data.path(), 3)), "{report}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(jobs_started(&log), 3, "one job a day ({report}):\n{log}");
}

/// The repro: the same export polled with `Cache-Control: no-cache` 3 s apart, as the
/// PyPI client does, is answered 200 within three polls, from one job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_with_no_cache_converge_on_one_job_and_get_its_export() {
    let data = generated(900, 1);
    let spool = tempfile::tempdir().unwrap();
    let spool_path = spool.path().display().to_string();
    // Not in the spool: the server deletes what it does not know there.
    let logs = tempfile::tempdir().unwrap();
    let log_path = logs.path().join("serve.log");
    let served = serve_logged(data.path(), &["--spool", &spool_path, "--prepare", "always"], &log_path);
    let target =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let url = format!("{}/logs/v1/export/{target}", served.base);
    logs_server::install_tls_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();

    let mut statuses = Vec::new();
    let mut body = None;
    for poll in 0..3 {
        if poll > 0 {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let response = client
            .get(&url)
            .header("Authorization", format!("OAuth {}", served.token))
            .header("Cache-Control", "no-cache")
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
        let bytes = response.bytes().await.unwrap();
        if statuses.last() == Some(&200) {
            body = Some(bytes);
            break;
        }
    }
    let log = std::fs::read_to_string(&log_path).unwrap();
    let jobs = jobs_started(&log);
    let body = body.unwrap_or_else(|| {
        panic!("three polls with Cache-Control: no-cache 3 s apart were answered {statuses:?}, {jobs} jobs started:\n{log}")
    });
    assert_eq!(jobs, 1, "polls answered {statuses:?}:\n{log}");
    assert!(body == export(data.path(), target), "the export differs from what logs export writes");
}

/// The most bytes the kernel holds for one loopback connection, sent but not yet read: the
/// largest send buffer (TCP's autotuning limit, or twice the limit of one set by the program)
/// and a margin of 1 MiB for the receiver's small buffer.
fn socket_buffers_max() -> u64 {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let tcp_wmem: u64 =
        read("/proc/sys/net/ipv4/tcp_wmem").split_whitespace().last().unwrap().parse().unwrap();
    let wmem_max: u64 = read("/proc/sys/net/core/wmem_max").trim().parse().unwrap();
    tcp_wmem.max(2 * wmem_max) + (1 << 20)
}

/// A loader inserting into a slow database: it reads the first chunk of a 34 MB day, then
/// spends 5 s on it, longer than the write timeout (`--write-timeout 2s`), before reading on.
/// The default server (streamed, no spool) must keep the rest of the export for it: every row
/// arrives, without downloading the day again. The day is asked uncompressed, so that the bytes
/// left after the first chunk are far more than the sockets can hold: the pause really stopped
/// the server's writes.
#[test]
fn a_loader_pausing_longer_than_the_write_timeout_still_gets_every_row() {
    let data = generated(30_000, 1);
    let flags = ["--field-aliases", &original_api_aliases(), "--write-timeout", "2s"];
    let served = serve_with(data.path(), &flags, Stdio::null());
    let root = data.path().display().to_string();
    let args =
        [&served.base, &served.token, &root, "1001", "2026-10-01", "1", "--first-pause", "5", "--identity"]
            .map(|arg| arg.to_string());
    let output = spawn_script("loader.py", &args).wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the loader did not get the day (a server that closes the connection once the client has \
         read nothing for --write-timeout 2s breaks each of its 4 downloads, the loader spending 5 s \
         on its first chunk each time):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = &reports(&String::from_utf8(output.stdout).unwrap())[0];
    assert_eq!(report["retries"], 0, "{report}");
    assert_eq!(report["requests"], 1, "{report}");
    assert_eq!(report["rows"].as_u64(), Some(days_records(data.path(), 1)), "{report}");
    let left = report["largest_body"].as_u64().unwrap() - report["read_before_pause"].as_u64().unwrap();
    let buffers = socket_buffers_max();
    assert!(
        left > 2 * buffers,
        "{left} bytes left to send at the pause, the sockets hold {buffers}: {report}"
    );
}
