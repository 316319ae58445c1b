//! A Python with the standard readers of `tests/clients/requirements.txt` (pandas, DuckDB,
//! requests), and two with the typed formats' readers ([`Readers`]), each in a virtual
//! environment the tests make on first use (see `logs_testkit::python`). No test skips when
//! one cannot be made: the test fails, saying why.

use std::path::{Path, PathBuf};

const REQUIREMENTS: &str = include_str!("../clients/requirements.txt");

/// The Python environments of the typed formats' readers: current pyarrow, Polars, DuckDB and
/// pandas (`formats`), and pandas 1.5 with pyarrow 14 (`pandas15`).
#[derive(Clone, Copy, Debug)]
pub enum Readers {
    Formats,
    Pandas15,
}

impl Readers {
    /// The name the scripts take.
    pub fn name(self) -> &'static str {
        match self {
            Readers::Formats => "formats",
            Readers::Pandas15 => "pandas15",
        }
    }

    fn requirements(self) -> &'static str {
        match self {
            Readers::Formats => include_str!("../clients/formats-requirements.txt"),
            Readers::Pandas15 => include_str!("../clients/pandas15-requirements.txt"),
        }
    }
}

/// Runs `tests/clients/<script>` with `args` in the environment of `readers`; panics with its
/// output unless it succeeds.
pub fn run_script_with(readers: Readers, script: &str, args: &[&str]) -> String {
    let python = logs_testkit::python::python(readers.name(), readers.requirements());
    logs_testkit::python::run_script(&python, &clients_dir().join(script), args)
}

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
