//! The load test, small: about 10 s of 8 clients against the service in-process over a
//! generated dataset. It must pass its own checks (exit 0) and print its figures; and it
//! refuses to send load beyond loopback.

use std::process::Command;

fn loadtest() -> Command {
    Command::new(env!("CARGO_BIN_EXE_logs-loadtest"))
}

#[test]
fn a_small_run_passes_its_checks() {
    let output = loadtest()
        .args(["--rows", "20000", "--days", "3", "--clients", "8", "--duration", "8", "--requests", "2000"])
        .args(["--request-timeout", "120", "--seed", "7"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "the load test failed ({:?}):\n{stdout}\n{stderr}", output.status);
    for line in [
        "requests/s",
        "p50",
        "p99",
        "2xx",
        "4xx",
        "5xx",
        "peak RSS",
        "exports running after the run 0",
        "peak buffered",
        "checks          passed",
    ] {
        assert!(stdout.contains(line), "`{line}` is missing from:\n{stdout}");
    }
}

#[test]
fn refuses_targets_beyond_loopback() {
    for url in ["http://192.168.1.10:8080", "http://example.com:8080", "http://10.0.0.1"] {
        let output = loadtest().args(["--url", url, "--token", "t", "--data", "."]).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{url}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("loopback"), "{url}");
    }
}
