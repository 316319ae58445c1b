//! What a test needs of the machine beyond a build: a way to run as an unprivileged user,
//! `/dev/full`, a small disk that fills up, transparent huge pages.
//!
//! A test that cannot have what it needs fails through [`missing`], saying what is missing and
//! how to get it, so that a run that tested less never looks like one that tested everything.
//! Only where the variable [`ALLOW_SKIP`] is `1` (a developer's machine that cannot give it;
//! never CI) does the test print `SKIPPED (LOGS_TEST_ALLOW_SKIP=1): …` and pass.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable that lets a test pass without testing where the machine lacks
/// what it needs (`LOGS_TEST_ALLOW_SKIP=1`).
pub const ALLOW_SKIP: &str = "LOGS_TEST_ALLOW_SKIP";

/// Called by a test that cannot test here: panics with `what` is missing and `how` to get it,
/// unless [`ALLOW_SKIP`] is `1`; then prints the same after `SKIPPED (…)` and returns, and the
/// caller returns without testing.
#[track_caller]
pub fn missing(what: &str, how: &str) {
    let allowed = std::env::var_os(ALLOW_SKIP).is_some_and(|value| value == "1");
    // Straight to the process's stderr: the test harness captures `eprintln!` of a test that
    // passes, and a skip must show in every run.
    skip_or_fail(allowed, what, how, &mut std::io::stderr());
}

#[track_caller]
fn skip_or_fail(allowed: bool, what: &str, how: &str, out: &mut dyn Write) {
    if allowed {
        let _ =
            writeln!(out, "SKIPPED ({ALLOW_SKIP}=1): this test cannot test here: {what}. To test it: {how}.");
    } else {
        panic!(
            "this test cannot test here: {what}. To test it: {how}. (Only to pass without testing, \
             on a machine that cannot give it, set {ALLOW_SKIP}=1.)"
        );
    }
}

/// True when this process runs as root (Linux: `/proc/self/status`).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Sets the permission bits of `path`.
pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `/dev/full` open for writing, where every write fails with `ENOSPC`; `None` (after
/// [`missing`] allowed it) where there is none.
#[track_caller]
pub fn dev_full() -> Option<File> {
    match std::fs::OpenOptions::new().write(true).open("/dev/full") {
        Ok(file) => Some(file),
        Err(e) => {
            missing(
                &format!("/dev/full cannot be opened for writing ({e})"),
                "run the tests on Linux with the standard devices (a container has them unless its /dev was replaced)",
            );
            None
        }
    }
}

/// The mode of transparent huge pages (`madvise` or `always`); `None` (after [`missing`]
/// allowed it) where the kernel gives none.
#[track_caller]
pub fn transparent_huge_pages() -> Option<String> {
    const ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
    let how = format!("as root, `echo madvise > {ENABLED}` (a kernel with CONFIG_TRANSPARENT_HUGEPAGE)");
    let Ok(modes) = std::fs::read_to_string(ENABLED) else {
        missing("this kernel has no transparent huge pages", &how);
        return None;
    };
    let mode = modes.split_whitespace().find(|m| m.starts_with('[')).unwrap_or_default();
    let mode = mode.trim_matches(['[', ']']).to_owned();
    if mode == "always" || mode == "madvise" {
        return Some(mode);
    }
    missing(&format!("transparent huge pages are off on this system ({})", modes.trim()), &how);
    None
}

/// A tmpfs of a given size mounted on a temporary folder, for tests of a full disk; unmounted
/// when dropped.
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`64k`, `4m`: mount's `size=` option); `None` (after [`missing`]
    /// allowed it) where mounting is not permitted.
    #[track_caller]
    pub fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .output();
        let why = match mounted {
            Ok(output) if output.status.success() => return Some(SmallDisk { dir }),
            Ok(output) => {
                String::from_utf8_lossy(&output.stderr).split_whitespace().collect::<Vec<_>>().join(" ")
            }
            Err(e) => format!("mount: {e}"),
        };
        missing(
            &format!("a small disk to fill up: `mount -t tmpfs` failed ({why})"),
            "run the tests as root (in a container: with CAP_SYS_ADMIN, e.g. `docker run --privileged`), \
             with `mount` (util-linux or busybox) on the PATH",
        );
        None
    }

    /// The folder the tmpfs is mounted on.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A program that the user `nobody` (uid and gid 65534) may run, so that file permissions apply
/// to it: the tests run as root here and in CI, and root reads a `chmod 000` file anyway
/// (CAP_DAC_OVERRIDE). As root it runs through `setpriv --reuid=65534 --regid=65534
/// --clear-groups`, from a hard link (or copy) in a folder of its own that `nobody` may enter
/// (a build folder is often below root's 0700 home); when the tests already run unprivileged, it
/// runs as it is.
#[derive(Debug)]
pub struct Unprivileged {
    _dir: tempfile::TempDir,
    exe: PathBuf,
    setpriv: bool,
}

impl Unprivileged {
    /// Prepares `exe` and checks that it runs unprivileged with the arguments `probe` (which
    /// must succeed: `--version`, `--list`); `None` (after [`missing`] allowed it) where no
    /// unprivileged user can run it here.
    #[track_caller]
    pub fn new(exe: &Path, probe: &[&str]) -> Option<Unprivileged> {
        let setpriv = running_as_root();
        if setpriv && Command::new("setpriv").arg("--version").output().is_err() {
            missing(
                "the tests run as root and `setpriv` (util-linux) is not on the PATH, so no permission can be denied",
                "install util-linux (`apt-get install util-linux`), or run the tests as a user other than root",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        set_mode(dir.path(), 0o755);
        let copy = dir.path().join(exe.file_name().unwrap());
        if std::fs::hard_link(exe, &copy).is_err() {
            std::fs::copy(exe, &copy).unwrap();
        }
        let unprivileged = Unprivileged { _dir: dir, exe: copy, setpriv };
        // Can the unprivileged user run the program at all (a `noexec` temporary folder, say)?
        let probe = unprivileged.command().args(probe).stdin(Stdio::null()).output().unwrap();
        if !probe.status.success() {
            missing(
                &format!(
                    "{} cannot be run as the user nobody here: {}",
                    unprivileged.exe.display(),
                    String::from_utf8_lossy(&probe.stderr).trim()
                ),
                "point TMPDIR at a folder that others may enter and that is not mounted `noexec` (e.g. /tmp)",
            );
            return None;
        }
        Some(unprivileged)
    }

    /// A command that runs the program as `nobody`.
    pub fn command(&self) -> Command {
        if !self.setpriv {
            return Command::new(&self.exe);
        }
        let mut command = Command::new("setpriv");
        command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&self.exe);
        command
    }
}

#[cfg(test)]
mod tests {
    use super::skip_or_fail;

    #[test]
    #[should_panic(expected = "this test cannot test here: no widget. To test it: install one")]
    fn a_missing_environment_fails_the_test_saying_how_to_get_it() {
        skip_or_fail(false, "no widget", "install one", &mut Vec::new());
    }

    #[test]
    fn with_the_skip_allowed_it_says_so_and_returns() {
        let mut out = Vec::new();
        skip_or_fail(true, "no widget", "install one", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SKIPPED (LOGS_TEST_ALLOW_SKIP=1): this test cannot test here: no widget. To test it: install one.\n"
        );
    }
}
