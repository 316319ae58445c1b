//! Running part of a test as an unprivileged user, so that file permissions apply.
//!
//! The tests run as root here and in CI, and root reads a `chmod 000` file anyway
//! (CAP_DAC_OVERRIDE). The nearest real alternative: run this test binary again, as the user
//! `nobody` (uid/gid 65534) through `setpriv --reuid=65534 --regid=65534 --clear-groups`,
//! with only the one test that holds the scenario (`#[ignore]`d, so that it never runs on
//! its own). The kernel then checks permissions as it would for a service account. When the
//! tests already run unprivileged, the child runs without `setpriv`. Without `setpriv` as
//! root, the test is skipped and says so.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment variable that tells the child test which scenario to run.
pub const SCENARIO: &str = "LOGS_FAULTS_SCENARIO";

/// True when this process runs as root (Linux: `/proc/self/status`).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Makes `path` and everything below it readable by others (tempdirs are 0700).
pub fn open_up(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A copy of this test binary that `nobody` can execute (the build folder is below root's
/// 0700 home): a hard link when possible.
pub struct Executable {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Executable {
    pub fn of_this_test() -> Executable {
        let dir = tempfile::tempdir().unwrap();
        open_up(dir.path());
        let path = dir.path().join("faults-child");
        let exe = std::env::current_exe().unwrap();
        if std::fs::hard_link(&exe, &path).is_err() {
            std::fs::copy(&exe, &path).unwrap();
        }
        Executable { _dir: dir, path }
    }
}

/// Runs the `#[ignore]`d test `child` of this binary with `SCENARIO=scenario` and `envs` as an
/// unprivileged user, and checks that it passed. `None` (after saying why on stderr) when no
/// way to drop privileges exists here.
pub fn run_child(exe: &Executable, child: &str, scenario: &str, envs: &[(&str, &OsStr)]) -> Option<()> {
    let mut command = if running_as_root() {
        if Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!(
                "SKIPPED: running as root and `setpriv` (util-linux) is not installed, so no test can be \
                 denied a permission here"
            );
            return None;
        }
        let mut command = Command::new("setpriv");
        command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&exe.path);
        command
    } else {
        Command::new(&exe.path)
    };
    // Can the unprivileged user run the binary at all (a `noexec` temporary folder, say)?
    let probe = Command::new(command.get_program()).args(command.get_args()).arg("--list").output().unwrap();
    if !probe.status.success() {
        eprintln!(
            "SKIPPED: this test binary cannot be run as an unprivileged user here: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        );
        return None;
    }
    command
        .args(["--exact", child, "--ignored", "--nocapture", "--test-threads", "1"])
        .env(SCENARIO, scenario)
        .envs(envs.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::null());
    let output = wait_bounded(command, Duration::from_secs(60));
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
    Some(())
}

/// Runs `command` to its end, killing it after `limit`.
pub fn wait_bounded(mut command: Command, limit: Duration) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + limit;
    // Read the pipes on threads so that a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).ok();
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut buf).ok();
        buf
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("the child process did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out.join().unwrap(), stderr: err.join().unwrap() }
}
