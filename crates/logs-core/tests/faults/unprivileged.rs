//! Running part of a test as an unprivileged user, so that file permissions apply.
//!
//! The nearest real alternative to a service account: run this test binary again as the user
//! `nobody` ([`logs_testkit::machine::Unprivileged`] says how), with only the one test that
//! holds the scenario (`#[ignore]`d, so that it never runs on its own). The kernel then checks
//! permissions as it would for a service account. Where no unprivileged user can run it, the
//! test fails saying what is missing (unless `LOGS_TEST_ALLOW_SKIP=1`).

use std::ffi::OsStr;
use std::process::Stdio;
use std::time::Duration;

use logs_testkit::machine::Unprivileged;

/// The environment variable that tells the child test which scenario to run.
pub const SCENARIO: &str = "LOGS_FAULTS_SCENARIO";

/// This test binary, as `nobody` may run it; `None` where the skip is allowed and it cannot.
pub fn this_test() -> Option<Unprivileged> {
    Unprivileged::new(&std::env::current_exe().unwrap(), &["--list"])
}

/// Runs the `#[ignore]`d test `child` of this binary with `SCENARIO=scenario` and `envs` as an
/// unprivileged user, and checks that it passed.
pub fn run_child(exe: &Unprivileged, child: &str, scenario: &str, envs: &[(&str, &OsStr)]) {
    let mut command = exe.command();
    command
        .args(["--exact", child, "--ignored", "--nocapture", "--test-threads", "1"])
        .env(SCENARIO, scenario)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::null());
    let output = logs_testkit::process::run_bounded(&mut command, Duration::from_secs(60));
    assert!(
        output.status.success(),
        "scenario `{scenario}` failed as an unprivileged user ({:?}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "the child test did not run: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}
