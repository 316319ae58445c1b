//! Permission denied, as an unprivileged user.
//!
//! The tests run as root here and in CI, and root reads a `chmod 000` file anyway
//! (CAP_DAC_OVERRIDE). The nearest real alternative: run the `logs` binary as the user
//! `nobody` (uid/gid 65534) with `setpriv --reuid=65534 --regid=65534 --clear-groups`, from a
//! hard link in a folder `nobody` may enter (the build folder is below root's 0700 home). When
//! the tests already run unprivileged, the binary runs as it is. Skipped, saying so, when
//! running as root without `setpriv`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{DAY2, DAY2_FOLDER, assert_fails_in_one_line, entries, export, generate, logs_at, ok, run};

pub struct Unprivileged {
    _dir: tempfile::TempDir,
    exe: PathBuf,
    setpriv: bool,
}

pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

impl Unprivileged {
    pub fn new() -> Option<Unprivileged> {
        let setpriv = running_as_root();
        if setpriv && Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!("SKIPPED: running as root without `setpriv`: no way to be denied a permission here");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        set_mode(dir.path(), 0o755);
        let exe = dir.path().join("logs");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_logs"), &exe).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_logs"), &exe).unwrap();
        }
        let unprivileged = Unprivileged { _dir: dir, exe, setpriv };
        // Can the unprivileged user run the binary at all (a `noexec` temporary folder, say)?
        let probe = unprivileged.logs().arg("--version").output().unwrap();
        if !probe.status.success() {
            eprintln!(
                "SKIPPED: `logs` cannot be run as an unprivileged user here: {}",
                String::from_utf8_lossy(&probe.stderr).trim()
            );
            return None;
        }
        Some(unprivileged)
    }

    pub fn logs(&self) -> Command {
        if !self.setpriv {
            return logs_at(&self.exe);
        }
        let mut command = logs_at(Path::new("setpriv"));
        command.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(&self.exe);
        command
    }

    fn export(&self, data: &Path, args: &[&str]) -> Output {
        let mut command = self.logs();
        command.args(["export", "--data"]).arg(data).args(args);
        run(command)
    }
}

/// A generated dataset that `nobody` may read, and its twin without `without` (relative).
pub fn readable_twins(without: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let data = generate(2000, 2, 1 << 20);
    set_mode(data.path(), 0o755);
    let twin = generate(2000, 2, 1 << 20);
    std::fs::remove_file(twin.path().join(without)).unwrap();
    (data, twin)
}

#[test]
fn permission_denied_exits_1_naming_the_file_or_folder_or_is_skipped_with_a_warning() {
    let Some(nobody) = Unprivileged::new() else { return };
    let file = format!("{DAY2_FOLDER}/part-00000.parquet");
    let (data, twin) = readable_twins(&file);
    let forbidden = data.path().join(&file);
    set_mode(&forbidden, 0o000);
    let target = format!("errors.csv?{DAY2}&fields=error_id,error,os_name");

    let output = nobody.export(data.path(), &[&target]);
    assert_fails_in_one_line(&output, &[&forbidden.display().to_string(), "Permission denied"]);
    let output = nobody.export(data.path(), &[&format!("{target}&skip_unavailable_shards=true")]);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(ok(output) == ok(export(twin.path(), &[&target])), "not the export of the readable files");
    assert!(
        stderr.contains(&format!(
            "warning: skipped unreadable file {}: Permission denied",
            forbidden.display()
        )),
        "{stderr}"
    );

    // A date folder that cannot be listed: its files are unknown, so both modes fail.
    set_mode(&forbidden, 0o644);
    let folder = data.path().join(DAY2_FOLDER);
    set_mode(&folder, 0o000);
    for target in [target.clone(), format!("{target}&skip_unavailable_shards=true")] {
        let output = nobody.export(data.path(), &[&target]);
        assert_fails_in_one_line(&output, &[&folder.display().to_string(), "Permission denied"]);
    }
    set_mode(&folder, 0o755);

    // An output folder it may not write to.
    let out = tempfile::tempdir().unwrap();
    set_mode(out.path(), 0o755);
    let file = out.path().join("out.csv");
    let output = nobody.export(data.path(), &["--output", file.to_str().unwrap(), &target]);
    assert_fails_in_one_line(&output, &["cannot create a temporary file", &out.path().display().to_string()]);
    assert!(entries(out.path()).is_empty());
}
