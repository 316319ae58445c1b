//! A Python with the standard readers of `tests/clients/requirements.txt` (pandas, DuckDB,
//! requests), in a virtual environment the tests make on first use (see
//! `logs_testkit::python`). No test skips when it cannot be made: the test fails, saying why.

use std::path::{Path, PathBuf};

const REQUIREMENTS: &str = include_str!("../clients/requirements.txt");

/// The folder of the client scripts.
pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs `tests/clients/<script>` with `args`; panics with its output unless it succeeds.
pub fn run_script(script: &str, args: &[&str]) -> String {
    let python = logs_testkit::python::python("readers", REQUIREMENTS);
    logs_testkit::python::run_script(&python, &clients_dir().join(script), args)
}

/// Starts `tests/clients/<script>` with `args`, its output piped; the caller waits for it.
pub fn spawn_script(script: &str, args: &[String]) -> std::process::Child {
    let python = logs_testkit::python::python("readers", REQUIREMENTS);
    logs_testkit::python::spawn_script(&python, &clients_dir().join(script), args)
}

/// Starts `examples/<script>` of the repository with `args`, its output piped; the caller
/// waits for it (or kills it).
pub fn spawn_example(script: &str, args: &[String]) -> std::process::Child {
    let python = logs_testkit::python::python("readers", REQUIREMENTS);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(script);
    logs_testkit::python::spawn_script(&python, &path, args)
}
