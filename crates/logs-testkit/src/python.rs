//! Python with pinned packages, in a virtual environment that the tests make on first use from
//! the Python package registry, under `~/.cache/logs-export/` (or `$LOGS_TEST_VENV_DIR`),
//! named after a hash of the requirements so that a changed list gets a new environment. No
//! test skips when it cannot be made: the test fails, saying why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// The `python` of the environment `name` with `requirements` (a pip requirements file's
/// text), made on first use; later calls in the process, and later processes, reuse it.
pub fn python(name: &str, requirements: &str) -> PathBuf {
    static MADE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let made = MADE.get_or_init(Default::default);
    let mut made = made.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    made.entry(name.to_owned()).or_insert_with(|| make_environment(name, requirements)).clone()
}

fn make_environment(name: &str, requirements: &str) -> PathBuf {
    let base = std::env::var_os("LOGS_TEST_VENV_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/logs-export")
    });
    let venv = base.join(format!("venv-{name}-{:016x}", fnv1a(requirements.as_bytes())));
    let python = venv.join("bin/python");
    if python.exists() {
        return python;
    }
    std::fs::create_dir_all(&base).unwrap();
    // Made beside its final place and renamed when complete, so that a test process that
    // stops half-way leaves no environment that looks ready, and two processes making it at
    // once do not share one.
    let partial = base.join(format!(".venv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let interpreter = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    checked(Command::new(&interpreter).args(["-m", "venv"]).arg(&partial).output(), "python3 -m venv");
    let file = partial.join("requirements.txt");
    std::fs::write(&file, requirements).unwrap();
    checked(
        Command::new(partial.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(&file)
            .output(),
        &format!("pip install ({name}; needs the Python package registry)"),
    );
    if std::fs::rename(&partial, &venv).is_err() {
        // Another process finished first: use its environment.
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(python.exists(), "no python in {}", venv.display());
    python
}

/// The output of a command that must have succeeded; panics with what it printed otherwise.
pub fn checked(output: std::io::Result<Output>, what: &str) -> Output {
    let output = output.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `script` with the environment's `python` and `args`; panics with its output unless it
/// succeeds, and returns what it printed.
pub fn run_script(python: &Path, script: &Path, args: &[&str]) -> String {
    let output = checked(Command::new(python).arg(script).args(args).output(), &script.display().to_string());
    String::from_utf8(output.stdout).unwrap()
}

/// Starts `script` with the environment's `python` and `args`, its stdout and stderr piped.
pub fn spawn_script(python: &Path, script: &Path, args: &[String]) -> std::process::Child {
    Command::new(python)
        .arg(script)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()))
}

/// FNV-1a, 64 bits: a stable name for a list of requirements.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
