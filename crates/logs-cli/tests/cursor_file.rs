//! `logs export --cursor-file`: a chain started when the file is absent, continued from it,
//! the file replaced only after a complete export (never with `--explain` or a failure), and
//! its keys and refusals.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIELDS: &str = "error_id,error_datetime,os_name";

/// A dataset of application 1001 whose three date folders are today and the two days before
/// (so that every chain's window reaches them, whatever the date), each holding the files of
/// one day of the bundled testdata, written now.
fn recent_dataset() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/dataset/application_id=1001");
    let today = chrono::Utc::now().date_naive();
    let mut folders = Vec::new();
    for k in 0..3 {
        let date = today - chrono::TimeDelta::days(k);
        let folder = dir.path().join(format!("application_id=1001/date={date}"));
        std::fs::create_dir_all(&folder).unwrap();
        let source = testdata.join(format!("date=2026-10-0{}", k + 1));
        for file in std::fs::read_dir(source).unwrap() {
            let file = file.unwrap().path();
            std::fs::copy(&file, folder.join(file.file_name().unwrap())).unwrap();
        }
        folders.push(folder);
    }
    (dir, folders)
}

fn logs(data: &Path, cursor_file: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_logs"));
    for name in ["LOGS_CURSOR_KEY_FILE", "LOGS_CURSOR_SETTLE", "LOGS_CURSOR_MAX_LATENESS_DAYS", "LOGS_DATA"] {
        command.env_remove(name);
    }
    command
        .arg("export")
        .arg("--data")
        .arg(data)
        .arg("--cursor-file")
        .arg(cursor_file)
        .args(["--app", "1001", "--fields", FIELDS, "--cursor-settle", "0s"])
        .args(args)
        .output()
        .unwrap()
}

/// The CSV's data lines (the header left out).
#[track_caller]
fn rows(output: Output) -> Vec<String> {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "status {:?}: {stderr}", output.status);
    let text = String::from_utf8(output.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(FIELDS));
    lines.map(str::to_owned).collect()
}

#[test]
fn a_chain_in_a_cursor_file_delivers_each_file_once_and_moves_only_after_success() {
    let (dir, folders) = recent_dataset();
    let cursor = dir.path().join("chain/cursor");
    std::fs::create_dir(dir.path().join("chain")).unwrap();
    let data = dir.path();

    let all = rows(logs(data, &cursor, &["--since", "2026-10-01"]));
    assert!(all.len() > 1000, "{}", all.len());
    let first = std::fs::read_to_string(&cursor).unwrap();
    assert!(rows(logs(data, &cursor, &[])).is_empty(), "nothing new");

    // A late file: another copy of a file of the oldest folder, written under a hidden name.
    let original = std::fs::read_dir(&folders[2]).unwrap().map(|e| e.unwrap().path()).next().unwrap();
    let late = folders[2].join("late-copy.parquet");
    std::fs::copy(&original, folders[2].join(".late-copy.tmp")).unwrap();
    std::fs::rename(folders[2].join(".late-copy.tmp"), &late).unwrap();
    // `--explain` reads it but keeps the cursor where it was.
    let before = std::fs::read_to_string(&cursor).unwrap();
    let explained = logs(data, &cursor, &["--explain"]);
    assert!(String::from_utf8_lossy(&explained.stdout).contains("Cursor: 1 new objects delivered"));
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), before);
    let mut delivered = rows(logs(data, &cursor, &[]));
    let mut expected = original_rows(&original);
    delivered.sort();
    expected.sort();
    assert!(!expected.is_empty());
    assert_eq!(delivered, expected, "the late file's rows, once");
    assert!(rows(logs(data, &cursor, &[])).is_empty());
    assert_ne!(std::fs::read_to_string(&cursor).unwrap(), first);

    // The late file deleted: exit 1 naming the folder, and the cursor file unchanged.
    let before = std::fs::read_to_string(&cursor).unwrap();
    std::fs::remove_file(&late).unwrap();
    let failed = logs(data, &cursor, &[]);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    let folder = folders[2].file_name().unwrap().to_str().unwrap().trim_start_matches("date=");
    assert!(stderr.contains(&format!("date folder {folder}")), "{stderr}");
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), before);
}

/// The rows of one Parquet file, as the chain's CSV writes them.
fn original_rows(file: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join(format!("application_id=1001/date={}", chrono::Utc::now().date_naive()));
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(file, folder.join("only.parquet")).unwrap();
    rows(logs(dir.path(), &dir.path().join("cursor"), &["--since", "2026-10-01"]))
}

#[test]
fn cursor_keys_and_refusals_are_usage_errors_that_quote_no_key() {
    let (dir, _) = recent_dataset();
    let data = dir.path();
    let cursor = dir.path().join("cursor");
    let short = dir.path().join("short.key");
    std::fs::write(&short, "secret-but-short\n").unwrap();
    let refused =
        logs(data, &cursor, &["--since", "2026-10-01", "--cursor-key-file", short.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--cursor-key-file") && stderr.contains("line 1"), "{stderr}");
    assert!(!stderr.contains("secret-but-short"), "{stderr}");
    assert!(!cursor.exists());

    // A chain started with one key cannot be continued with another.
    let key = dir.path().join("a.key");
    std::fs::write(&key, format!("{}\n", "a".repeat(64))).unwrap();
    rows(logs(data, &cursor, &["--since", "2026-10-01", "--cursor-key-file", key.to_str().unwrap()]));
    let other = logs(data, &cursor, &[]);
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("no longer holds"));
    // Other fields than the chain's.
    let fields = Command::new(env!("CARGO_BIN_EXE_logs"))
        .args(["export", "--data"])
        .arg(data)
        .arg("--cursor-file")
        .arg(&cursor)
        .args(["--app", "1001", "--fields", "error_id", "--cursor-key-file", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(fields.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&fields.stderr).contains("belongs to a chain of other fields"));
    // A limit, and a cursor given twice.
    let limited = logs(data, &cursor, &["--limit", "5", "--cursor-key-file", key.to_str().unwrap()]);
    assert_eq!(limited.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&limited.stderr)
            .contains("parameter `limit` cannot be combined with `cursor`")
    );
    let mut twice = Command::new(env!("CARGO_BIN_EXE_logs"));
    let target = format!("errors.csv?application_id=1001&fields={FIELDS}&cursor=start&date_since=2026-10-01");
    let twice =
        twice.args(["export", "--data"]).arg(data).arg("--cursor-file").arg(&cursor).arg(target).output();
    assert_eq!(twice.unwrap().status.code(), Some(2));
}
