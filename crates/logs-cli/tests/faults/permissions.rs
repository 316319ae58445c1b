//! Permission denied, as an unprivileged user: the `logs` binary run as `nobody`
//! ([`logs_testkit::machine::Unprivileged`] says how and why).

use std::path::Path;
use std::process::{Command, Output};

use logs_testkit::machine::{Unprivileged, set_mode};

use super::{DAY2, DAY2_FOLDER, assert_fails_in_one_line, entries, export, generate, logs_with, ok, run};

/// `logs` as `nobody` may run it; `None` where the skip is allowed and it cannot.
pub fn unprivileged_logs() -> Option<Unprivileged> {
    Unprivileged::new(Path::new(env!("CARGO_BIN_EXE_logs")), &["--version"])
}

/// A `logs` command run as `nobody`.
pub fn logs_as(nobody: &Unprivileged) -> Command {
    logs_with(nobody.command())
}

fn export_as(nobody: &Unprivileged, data: &Path, args: &[&str]) -> Output {
    let mut command = logs_as(nobody);
    command.args(["export", "--data"]).arg(data).args(args);
    run(command)
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
    let Some(nobody) = unprivileged_logs() else { return };
    let file = format!("{DAY2_FOLDER}/part-00000.parquet");
    let (data, twin) = readable_twins(&file);
    let forbidden = data.path().join(&file);
    set_mode(&forbidden, 0o000);
    let target = format!("errors.csv?{DAY2}&fields=error_id,error,os_name");

    let output = export_as(&nobody, data.path(), &[&target]);
    assert_fails_in_one_line(&output, &[&forbidden.display().to_string(), "Permission denied"]);
    let output = export_as(&nobody, data.path(), &[&format!("{target}&skip_unavailable_shards=true")]);
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
        let output = export_as(&nobody, data.path(), &[&target]);
        assert_fails_in_one_line(&output, &[&folder.display().to_string(), "Permission denied"]);
    }
    set_mode(&folder, 0o755);

    // An output folder it may not write to.
    let out = tempfile::tempdir().unwrap();
    set_mode(out.path(), 0o755);
    let file = out.path().join("out.csv");
    let output = export_as(&nobody, data.path(), &["--output", file.to_str().unwrap(), &target]);
    assert_fails_in_one_line(&output, &["cannot create a temporary file", &out.path().display().to_string()]);
    assert!(entries(out.path()).is_empty());
}
