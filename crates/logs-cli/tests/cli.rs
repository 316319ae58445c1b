//! The `logs` binary as a user runs it: golden outputs on the bundled testdata, exit statuses,
//! atomic `--output`, a broken pipe, and a failure in the middle of an export.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn logs() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_logs"));
    for name in [
        "LOGS_DATA",
        "LOGS_MAX_LIMIT",
        "LOGS_TARGET_PARTITIONS",
        "LOGS_BATCH_SIZE",
        "LOGS_FIELD_ALIASES",
        "LOGS_JSON_INTEGERS",
        "LOGS_PAGE_MACHINERY",
        // jemalloc's settings: the tests run the binary as it ships.
        "_RJEM_MALLOC_CONF",
    ] {
        command.env_remove(name);
    }
    command
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/dataset")
}

/// `logs export --data testdata --target-partitions 1 <args>` (one partition: a stable row order).
fn export(args: &[&str]) -> Output {
    export_with_pages("on", args)
}

/// [`export`] with the page machinery `on`, `off` (`LOGS_PAGE_MACHINERY`).
fn export_with_pages(machinery: &str, args: &[&str]) -> Output {
    logs()
        .env("LOGS_PAGE_MACHINERY", machinery)
        .arg("export")
        .arg("--data")
        .arg(testdata())
        .args(["--target-partitions", "1"])
        .args(args)
        .output()
        .unwrap()
}

#[track_caller]
fn ok(output: Output) -> Vec<u8> {
    assert!(
        output.status.success(),
        "status {:?}, stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Compares with `tests/snapshots/<name>`; `UPDATE_SNAPSHOTS=1` rewrites the file instead.
#[track_caller]
fn assert_snapshot(name: &str, actual: &[u8]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1)", path.display()));
    if expected != actual {
        let first =
            expected.iter().zip(actual).position(|(a, b)| a != b).unwrap_or(expected.len().min(actual.len()));
        panic!(
            "{name} differs from the snapshot at byte {first} (expected {} bytes, got {}):\n{}",
            expected.len(),
            actual.len(),
            String::from_utf8_lossy(&actual[first.saturating_sub(80)..(first + 80).min(actual.len())])
        );
    }
}

const IOS_DAY: &str = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02+23:59:59\
    &fields=error_datetime,error_id,error_name,error,os_name,os_version,service_device_id,mcc,city&os_name=ios&limit=25";
const EDGE: &str = "application_id=9001&date_since=2026-10-01&date_until=2026-10-07&fields=error_datetime,error,error_name,\
    error_id,error_json,city,os_name,mcc,mnc,service_device_id,device_ipv6,windows_aid,profile_id,app_version_name,application_id";

/// The same bytes with the page machinery on and off.
#[test]
fn golden_csv_and_json_on_testdata() {
    for pages in ["on", "off"] {
        let export = |args: &[&str]| ok(export_with_pages(pages, args));
        assert_snapshot("ios_day.csv", &export(&[&format!("errors.csv?{IOS_DAY}")]));
        assert_snapshot("ios_day.json", &export(&[&format!("errors.json?{IOS_DAY}")]));
    }
}

#[test]
fn golden_edge_cases_with_bom() {
    for pages in ["on", "off"] {
        let export = |args: &[&str]| ok(export_with_pages(pages, args));
        assert_snapshot(
            "edge_cases.csv",
            &export(&[&format!("/logs/v1/export/errors.csv?{EDGE}&use_utf8_bom=true")]),
        );
        assert_snapshot(
            "edge_cases.json",
            &export(&[&format!("/logs/v1/export/errors.json?{EDGE}&use_utf8_bom=1")]),
        );
    }
}

#[test]
fn csv_and_json_carry_the_same_values() {
    let csv = ok(export(&[&format!("errors.csv?{EDGE}")]));
    let json = ok(export(&[&format!("errors.json?{EDGE}")]));
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let records = json["data"].as_array().unwrap();
    let mut count = 0;
    for (row, record) in reader.records().zip(records) {
        let row = row.unwrap();
        for (name, cell) in header.iter().zip(row.iter()) {
            let text = match &record[name] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.to_string(),
                other => panic!("unexpected JSON value {other}"),
            };
            assert_eq!(cell, text, "field {name}");
        }
        count += 1;
    }
    assert_eq!(count, records.len());
    assert_eq!(count, 9, "5 pyarrow rows and 4 DuckDB rows");
}

#[test]
fn flags_build_the_same_request_as_the_target() {
    let from_flags = ok(export(&[
        "--app",
        "1001",
        "--since",
        "2026-10-02",
        "--until",
        "2026-10-02 23:59:59",
        "--fields",
        "error_datetime,error_id,error_name,error,os_name,os_version,service_device_id,mcc,city",
        "--filter",
        "os_name=ios",
        "--limit",
        "25",
        "--format",
        "json",
    ]));
    assert_eq!(from_flags, ok(export(&[&format!("errors.json?{IOS_DAY}")])));
}

/// `--batch-size` trades memory for per-batch work; where the batches end changes no byte.
#[test]
fn the_batch_size_changes_no_byte_of_the_output() {
    let wide = "application_id=1001&date_since=2026-10-01&date_until=2026-10-03&fields=error_datetime,error_id,\
        error_name,error,error_json,os_name,service_device_id,mcc,city,device_ipv6";
    for target in [format!("errors.csv?{wide}"), format!("errors.json?{wide}"), format!("errors.json?{EDGE}")]
    {
        let default = ok(export(&[&target]));
        assert!(default.len() > 1000, "{target}: {} bytes", default.len());
        for size in ["1", "7", "2048"] {
            assert!(
                ok(export(&["--batch-size", size, &target])) == default,
                "{target} with --batch-size {size}"
            );
        }
    }
    // The flag reaches the scan: 4 389 rows in batches of at most 7 rows.
    let batches = |size: &str| {
        let explain = String::from_utf8(ok(export(&[
            "--explain",
            "--batch-size",
            size,
            &format!("errors.csv?{wide}"),
        ])))
        .unwrap();
        assert!(explain.contains("Rows exported: 4389"), "{explain}");
        let value = explain.split("output_batches=").nth(1).expect("output_batches in the explain output");
        value.split([',', ']']).next().unwrap().to_owned()
    };
    assert_eq!(batches("7"), "629");
    assert_ne!(batches("8192"), "629");
    for command in ["export", "serve"] {
        let output = logs().args([command, "--batch-size", "0"]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{command}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("'--batch-size <BATCH_SIZE>': 0 is not in 1..=1048576"),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn empty_results_are_still_complete_documents() {
    let q = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02&fields=error_id,os_name&os_name=nothing";
    assert_eq!(ok(export(&[&format!("errors.csv?{q}")])), b"error_id,os_name\n");
    assert_eq!(ok(export(&[&format!("errors.json?{q}")])), b"{\"data\":[]}\n");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_the_parameter() {
    let base = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02&fields=error_id";
    for (query, needle) in [
        (
            format!("{base}&os_nmae=ios"),
            "parameter `os_nmae` is not a known parameter (did you mean `os_name`?)",
        ),
        (format!("{base}&limit=0"), "parameter `limit`"),
        (base.replace("2026-10-02&date_until", "2026-02-30&date_until"), "parameter `date_since`"),
        (base.replace("error_id", "error_id,nope"), "parameter `fields` contains `nope`"),
        (format!("{base}&mcc=abc"), "parameter `mcc`"),
        (format!("{base}&date_dimension=server"), "parameter `date_dimension`"),
    ] {
        let output = export(&[&format!("errors.csv?{query}")]);
        assert_eq!(output.status.code(), Some(2), "{query}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.starts_with("error: ") && stderr.contains(needle), "{query}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(output.stdout.is_empty());
    }
    let output = export(&["errors.xml?application_id=1"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn explain_shows_the_plans_and_the_pruning() {
    let output = ok(export(&["--explain", &format!("errors.csv?{IOS_DAY}")]));
    let text = String::from_utf8(output).unwrap();
    for needle in [
        "Logical plan:",
        "TableScan: errors",
        "DataSourceExec",
        "row_groups_pruned_statistics",
        "Files: 7 date folders of the application, 6 outside the range",
        "Rows exported: 25",
    ] {
        assert!(text.contains(needle), "`{needle}` missing from:\n{text}");
    }
}

#[test]
fn output_file_appears_only_when_the_export_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out.csv");
    ok(export(&["--output", target.to_str().unwrap(), &format!("errors.csv?{IOS_DAY}")]));
    assert_eq!(std::fs::read(&target).unwrap(), ok(export(&[&format!("errors.csv?{IOS_DAY}")])));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left behind");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "an ordinary file, not the temporary file's 0600");
    }
}

/// `--output` naming a pipe writes into it, as `>` would: a reader waiting on a FIFO gets the
/// whole export, and the FIFO is still one afterwards (renaming the finished file over it would
/// replace it, as it would replace `/dev/null`).
#[cfg(unix)]
#[test]
fn output_to_a_fifo_writes_into_it_and_leaves_it_a_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo failed");
    let (sent, received) = std::sync::mpsc::channel();
    let reader = fifo.clone();
    // Opening a FIFO to read waits for a writer: if the export never opens it, this thread
    // waits for ever and the test fails on the timeout below.
    std::thread::spawn(move || sent.send(std::fs::read(reader).unwrap()));
    let query = format!("errors.csv?{IOS_DAY}");
    ok(export(&["--output", fifo.to_str().unwrap(), &query]));
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced by a file");
    let bytes = received
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the export never wrote into the FIFO");
    assert_eq!(bytes, ok(export(&[&query])));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left behind");
}

/// A copy of one day of application 1001 in which one file's data pages are damaged while
/// its footer is intact: the damage shows only while rows are being exported.
fn dataset_with_damaged_pages() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = testdata().join("application_id=1001/date=2026-10-02");
    let to = dir.path().join("application_id=1001/date=2026-10-02");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    let victim = to.join("part-00000.parquet");
    let mut bytes = std::fs::read(&victim).unwrap();
    let len = bytes.len();
    for b in &mut bytes[len / 3..len / 2] {
        *b = 0xA5;
    }
    std::fs::write(&victim, bytes).unwrap();
    dir
}

#[test]
fn a_failure_mid_export_is_visible_and_leaves_no_output_file() {
    let dir = dataset_with_damaged_pages();
    let query = "errors.csv?application_id=1001&date_since=2026-10-02&date_until=2026-10-02&fields=error,error_id,city";
    let target = dir.path().join("out.csv");
    let output = logs()
        .args(["export", "--target-partitions", "1", "--data"])
        .arg(dir.path())
        .arg("--output")
        .arg(&target)
        .arg(query)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!target.exists(), "a failed export must not leave a file that looks complete");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left behind");

    let output = logs()
        .args(["export", "--target-partitions", "1", "--data"])
        .arg(dir.path())
        .arg(query)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("incomplete") || stderr.contains("cannot read"), "{stderr}");
}

/// Starts an export of 16 MB of long texts into a pipe and reads its first 10 bytes: the
/// export is running, and blocks once the pipe is full.
fn export_into_a_pipe() -> (std::process::Child, std::process::ChildStdout, [u8; 10]) {
    let mut child = logs()
        .args(["export", "--data"])
        .arg(testdata())
        .arg("errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error,error_json,error_id")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).unwrap();
    (child, stdout, first)
}

#[test]
fn a_closed_pipe_ends_the_export_quietly() {
    let (child, stdout, first) = export_into_a_pipe();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    assert_eq!(&first, b"error,erro");
    assert!(output.status.success(), "{:?}", output.status);
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// `logs` gets transparent huge pages for the memory its allocator maps, and nothing turns
/// them off for the process. Read while an export is blocked writing into a full pipe. Where
/// the system gives them only on request (`madvise`, the usual default), jemalloc asks for
/// them: its mappings carry the `hg` flag that `madvise(MADV_HUGEPAGE)` sets. Where it gives
/// them to every process (`always`), jemalloc asks nothing (its `thp:always` is then the
/// system's own mode). Where it gives none (`never`), the test cannot test, and fails saying so.
#[cfg(target_os = "linux")]
#[test]
fn the_export_asks_for_huge_pages() {
    let Some(mode) = logs_testkit::machine::transparent_huge_pages() else { return };
    let (mut child, mut stdout, _) = export_into_a_pipe();
    let proc = PathBuf::from(format!("/proc/{}", child.id()));
    let status = std::fs::read_to_string(proc.join("status")).unwrap();
    let smaps = std::fs::read_to_string(proc.join("smaps")).unwrap();
    std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(status.lines().any(|line| line == "THP_enabled:\t1"), "{status}");
    if mode == "madvise" {
        let advised = smaps
            .lines()
            .filter(|line| line.starts_with("VmFlags:") && line.split_whitespace().any(|flag| flag == "hg"))
            .count();
        assert!(advised > 0, "no mapping advised for huge pages:\n{smaps}");
    }
}

#[test]
fn generate_refuses_a_non_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), b"x").unwrap();
    let output = logs().args(["generate", "--rows", "10", "--out"]).arg(dir.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
}

/// jemalloc reads the settings the binary compiles in (`malloc_conf` in main.rs): its statistics,
/// printed at exit when the environment asks for them, show one arena.
#[cfg(not(target_env = "msvc"))]
#[test]
fn the_allocator_runs_with_the_compiled_in_settings() {
    let output = logs().arg("--version").env("_RJEM_MALLOC_CONF", "stats_print:true").output().unwrap();
    assert!(output.status.success());
    let stats = String::from_utf8_lossy(&output.stderr);
    assert!(stats.contains("opt.narenas: 1\n"), "{stats}");
    assert!(stats.contains("opt.thp: \"always\"\n"), "{stats}");
}
