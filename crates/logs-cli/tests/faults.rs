//! Faults through the `logs` binary as a user runs it (issue 5): unreadable, vanished and
//! replaced files, permission denied (as an unprivileged user), a full disk, schema drift,
//! empty datasets.
//!
//! The documented outcomes (the README's CLI tour and docs/dataset.md, "Unreadable files"): exit 1 with a one-line
//! message that names the file; with `skip_unavailable_shards` the complete export of the
//! readable files, exit 0 and a warning per skipped file on stderr; a failure after the first
//! row says the output is incomplete and `--output` leaves no file (on stdout, an NDJSON,
//! Parquet or Arrow output ends with bytes readers refuse). Never a panic, a hang
//! (every run is bounded) or exit 0 with a short output.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use logs_testkit::machine::{SmallDisk, dev_full};
use logs_testkit::process::{finish, run_bounded};

#[path = "faults/permissions.rs"]
mod permissions;
#[path = "faults/served.rs"]
mod served;

const DAY2: &str = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02";
const DAY2_FOLDER: &str = "application_id=1001/date=2026-10-02";

/// Something done to a file while an export reads it: (what, how).
type FileAction = (&'static str, fn(&Path));

/// `command` (a `logs`) without the caller's `LOGS_…` settings, on one partition.
fn logs_with(mut command: Command) -> Command {
    for (name, _) in std::env::vars() {
        if name.starts_with("LOGS_") {
            command.env_remove(name);
        }
    }
    // One partition: rows come in file order, so outputs compare byte for byte.
    command.env("LOGS_TARGET_PARTITIONS", "1").stdin(Stdio::null());
    command
}

fn logs() -> Command {
    logs_with(Command::new(env!("CARGO_BIN_EXE_logs")))
}

/// A generated dataset; the same arguments give byte-identical files.
fn generate(rows: u64, days: u32, max_file_rows: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(dir.path());
    options.rows = rows;
    options.days = days;
    options.threads = 2;
    options.max_file_rows = max_file_rows;
    logs_generate::generate(&options).unwrap();
    dir
}

/// Runs `command` to its end (killed, and the test failed, after 60 s).
fn run(mut command: Command) -> Output {
    run_bounded(&mut command, Duration::from_secs(60))
}

fn export(data: &Path, args: &[&str]) -> Output {
    let mut command = logs();
    command.args(["export", "--data"]).arg(data).args(args);
    run(command)
}

#[track_caller]
fn ok(output: Output) -> Vec<u8> {
    assert!(output.status.success(), "{:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    output.stdout
}

/// Exit 1, and one line on stderr: `error: …` containing every `needle`.
#[track_caller]
fn assert_fails_in_one_line(output: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "one line: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "`{needle}` missing: {stderr}");
    }
}

/// The files of `folder`, sorted.
fn entries(folder: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(folder).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
}

/// Unreadable files, made from a valid one: (name, bytes).
fn unreadable_files(valid: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let n = valid.len();
    let footer = u32::from_le_bytes(valid[n - 8..n - 4].try_into().unwrap()) as usize;
    vec![
        ("zz-zero-bytes.parquet", Vec::new()),
        ("zz-cut-in-the-footer.parquet", valid[..n - 8 - footer / 2].to_vec()),
        ("zz-cut-in-the-data.parquet", valid[..(n - 8 - footer) / 2].to_vec()),
        ("zz-not-parquet.parquet", b"error_id,os_name\n1,ios\n".to_vec()),
    ]
}

fn a_valid_file(data: &Path) -> Vec<u8> {
    std::fs::read(data.join(DAY2_FOLDER).join("part-00000.parquet")).unwrap()
}

#[test]
fn an_unreadable_file_exits_1_with_one_line_naming_it_and_writes_nothing() {
    let data = generate(2000, 2, 1 << 20);
    let out = tempfile::tempdir().unwrap();
    let target = format!("errors.csv?{DAY2}&fields=error_id,os_name");
    for (name, bytes) in unreadable_files(&a_valid_file(data.path())) {
        let bad = data.path().join(DAY2_FOLDER).join(name);
        std::fs::write(&bad, bytes).unwrap();
        let output = export(data.path(), &[&target]);
        assert_fails_in_one_line(&output, &["cannot read", &bad.display().to_string()]);
        assert!(output.stdout.is_empty(), "{name}: nothing may be written before the footers are read");
        let file = out.path().join("out.csv");
        let output = export(data.path(), &["--output", file.to_str().unwrap(), &target]);
        assert_fails_in_one_line(&output, &[&bad.display().to_string()]);
        assert!(entries(out.path()).is_empty(), "{name}: no output file, no temporary file");
        std::fs::remove_file(&bad).unwrap();
    }
}

#[test]
fn skipping_exports_every_readable_row_and_warns_once_per_skipped_file() {
    // Two identical datasets; the second gets unreadable files besides its own.
    let pristine = generate(2000, 2, 1 << 20);
    let damaged = generate(2000, 2, 1 << 20);
    let bad: Vec<PathBuf> = unreadable_files(&a_valid_file(damaged.path()))
        .into_iter()
        .map(|(name, bytes)| {
            let path = damaged.path().join(DAY2_FOLDER).join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    let query = format!("{DAY2}&fields=error_datetime,error_id,error,os_name,service_device_id");
    let expected_csv = ok(export(pristine.path(), &[&format!("errors.csv?{query}")]));
    let expected_json = ok(export(pristine.path(), &[&format!("errors.json?{query}")]));
    assert!(expected_csv.len() > 10_000);

    let flags = [
        "--app",
        "1001",
        "--since",
        "2026-10-02",
        "--until",
        "2026-10-02",
        "--fields",
        "error_datetime,error_id,error,os_name,service_device_id",
        "--format",
        "json",
        "--skip-unavailable-shards",
    ];
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("out.csv");
    let target = format!("errors.csv?{query}&skip_unavailable_shards=true");
    for (args, expected) in [
        (vec![target.as_str()], &expected_csv),
        (flags.to_vec(), &expected_json),
        (vec!["--output", file.to_str().unwrap(), target.as_str()], &expected_csv),
    ] {
        let output = export(damaged.path(), &args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let stdout = ok(output);
        let written = if args[0] == "--output" { std::fs::read(&file).unwrap() } else { stdout };
        assert!(written == *expected, "{args:?}: not the complete export of the readable files");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), bad.len() + 1, "{stderr}");
        for path in &bad {
            let warning = format!("warning: skipped unreadable file {}: ", path.display());
            assert_eq!(lines.iter().filter(|l| l.starts_with(&warning)).count(), 1, "{stderr}");
        }
        assert_eq!(
            lines.last().unwrap(),
            &format!("warning: the export left out {} unreadable files", bad.len())
        );
    }
}

/// Starts `logs export` on `data` and, once it has written its first bytes, runs `act`; then
/// lets it finish. With `output`, "written" means the temporary file has grown.
fn export_and_meanwhile(data: &Path, target: &str, output: Option<&Path>, act: impl FnOnce()) -> Output {
    let mut command = logs();
    command.args(["export", "--data"]).arg(data);
    if let Some(file) = output {
        command.arg("--output").arg(file);
    }
    let mut child = command.arg(target).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    match output {
        None => {
            let mut stdout = child.stdout.take().unwrap();
            let mut byte = [0u8; 1];
            stdout.read_exact(&mut byte).unwrap();
            first.push(byte[0]);
            child.stdout = Some(stdout);
        }
        Some(file) => loop {
            let growing = entries(file.parent().unwrap())
                .iter()
                .any(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0));
            if growing {
                break;
            }
            assert!(Instant::now() < deadline, "no output within 60 s");
            std::thread::sleep(Duration::from_millis(5));
        },
    }
    act();
    let mut output = finish(child, Duration::from_secs(60));
    first.append(&mut output.stdout);
    output.stdout = first;
    output
}

#[test]
fn a_file_deleted_or_replaced_during_an_export_never_ends_in_a_clean_short_output() {
    // About ten files of 1 000 rows for the day: the export writes its first megabyte long
    // before it reaches the last file.
    let data = generate(12_000, 1, 1_000);
    let folder = data.path().join("application_id=1001/date=2026-10-01");
    let last = entries(&folder).pop().unwrap();
    let original = std::fs::read(&last).unwrap();
    let target =
        "errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error";
    let expected = ok(export(data.path(), &[target]));
    assert!(expected.len() > 4 << 20, "{} bytes", expected.len());
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("out.csv");

    let actions: [FileAction; 2] = [
        ("deleted", |path| std::fs::remove_file(path).unwrap()),
        ("replaced by garbage", |path| std::fs::write(path, vec![0xA5; 300_000]).unwrap()),
    ];
    for (what, action) in actions {
        for output_file in [None, Some(file.as_path())] {
            let output = export_and_meanwhile(data.path(), target, output_file, || action(&last));
            let stderr = String::from_utf8_lossy(&output.stderr);
            let written = match output_file {
                Some(file) if output.status.success() => std::fs::read(file).unwrap(),
                Some(_) => {
                    assert!(entries(out.path()).is_empty(), "{what}: a failed export must leave no file");
                    Vec::new()
                }
                None => output.stdout.clone(),
            };
            eprintln!(
                "{what}, {output_file:?}: {:?} after {} of {} bytes",
                output.status,
                written.len(),
                expected.len()
            );
            if output.status.success() {
                assert!(
                    written == expected,
                    "{what}, {output_file:?}: exit 0 with {} of {} bytes",
                    written.len(),
                    expected.len()
                );
            } else {
                assert_fails_in_one_line(&output, &["the output is incomplete"]);
                assert!(written.len() < expected.len(), "{what}: {stderr}");
            }
            std::fs::write(&last, &original).unwrap();
            let _ = std::fs::remove_file(&file);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A full disk.

#[test]
fn stdout_on_a_full_device_exits_1_with_one_line_and_no_panic() {
    let Some(full) = dev_full() else { return };
    let data = generate(2000, 2, 1 << 20);
    for target in [
        format!("errors.csv?{DAY2}&fields=error_id,error"),
        format!("errors.json?{DAY2}&fields=error_id,error"),
        // No rows: the header alone must still reach the device, and fails.
        format!("errors.csv?{DAY2}&fields=error_id&os_name=none"),
        format!("errors.json?{DAY2}&fields=error_id&os_name=none"),
    ] {
        let mut command = logs();
        command.args(["export", "--data"]).arg(data.path()).arg(&target);
        let child = command.stdout(full.try_clone().unwrap()).stderr(Stdio::piped()).spawn().unwrap();
        let output = finish(child, Duration::from_secs(60));
        assert_fails_in_one_line(&output, &["No space left on device"]);
    }
}

#[test]
fn output_on_a_full_disk_exits_1_and_leaves_no_file() {
    let Some(disk) = SmallDisk::mount("64k") else { return };
    let data = generate(2000, 2, 1 << 20);
    for format in ["csv", "json"] {
        let file = disk.path().join(format!("out.{format}"));
        let target = format!("errors.{format}?{DAY2}&fields=error_id,error");
        let output = export(data.path(), &["--output", file.to_str().unwrap(), &target]);
        assert_fails_in_one_line(&output, &["No space left on device"]);
        assert!(entries(disk.path()).is_empty(), "no output file and no temporary file on the full disk");

        // The same disk takes a small export: it was the space that ran out.
        let small = format!("{target}&limit=3");
        ok(export(data.path(), &["--output", file.to_str().unwrap(), &small]));
        assert_eq!(std::fs::read(&file).unwrap(), ok(export(data.path(), &[&small])));
        std::fs::remove_file(&file).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Schema drift and empty datasets: the CLI's side of what `logs-core/tests/faults.rs` checks.

/// Adds to the second day of application 1001 a file `name` whose `mcc` holds bytes, a type
/// that no conversion makes into an integer.
fn write_drifted_file(data: &Path, name: &str) -> PathBuf {
    use datafusion::arrow::array::{ArrayRef, BinaryArray, Int64Array, StringArray};
    use std::sync::Arc;
    let batch = datafusion::arrow::record_batch::RecordBatch::try_from_iter([
        ("error_timestamp", Arc::new(Int64Array::from(vec![1_790_899_200 + 60])) as ArrayRef),
        ("error_id", Arc::new(StringArray::from(vec!["drifted"]))),
        ("mcc", Arc::new(BinaryArray::from(vec![&b"\x01"[..]]))),
    ])
    .unwrap();
    let path = data.join(DAY2_FOLDER).join(name);
    let mut writer = datafusion::parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    path
}

#[test]
fn a_column_that_cannot_be_converted_exits_1_with_one_line() {
    let data = generate(2000, 2, 1 << 20);
    write_drifted_file(data.path(), "zz-drifted.parquet");
    for target in [
        format!("errors.csv?{DAY2}&fields=error_id,mcc"),
        format!("errors.json?{DAY2}&fields=error_id&mcc=250"),
    ] {
        let output = export(data.path(), &[&target]);
        assert_fails_in_one_line(&output, &["mcc"]);
    }
}

#[test]
fn empty_datasets_and_application_folders_give_complete_empty_documents() {
    let data = tempfile::tempdir().unwrap();
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name";
    for layout in
        ["an empty dataset root", "an application folder without date folders", "empty date folders"]
    {
        match layout {
            "an application folder without date folders" => {
                std::fs::create_dir_all(data.path().join("application_id=1001")).unwrap()
            }
            "empty date folders" => {
                for day in 1..=7 {
                    std::fs::create_dir_all(
                        data.path().join(format!("application_id=1001/date=2026-10-0{day}")),
                    )
                    .unwrap();
                }
                std::fs::write(data.path().join("application_id=1001/date=2026-10-03/_SUCCESS"), b"")
                    .unwrap();
            }
            _ => {}
        }
        assert_eq!(
            ok(export(data.path(), &[&format!("errors.csv?{query}")])),
            b"error_id,os_name\n",
            "{layout}"
        );
        assert_eq!(
            ok(export(data.path(), &[&format!("errors.json?{query}")])),
            b"{\"data\":[]}\n",
            "{layout}"
        );
    }
}

/// A failure after the first rows leaves on stdout (a pipe, a file behind `>`) an NDJSON,
/// Parquet or Arrow output that ends with bytes no reader takes for complete.
#[test]
fn a_typed_export_that_fails_on_stdout_ends_broken() {
    let dir = generate(12_000, 1, 1_000);
    let folder = dir.path().join("application_id=1001/date=2026-10-01");
    let mut files = entries(&folder);
    files.sort();
    // The export fails once the other files' rows are out.
    logs_testkit::damage_pages(files.last().unwrap());
    for format in [logs_format::Format::Ndjson, logs_format::Format::Parquet, logs_format::Format::Arrow] {
        let target = format!(
            "errors.{format}?application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error"
        );
        let output = export(dir.path(), &["--batch-size", "1024", &target]);
        assert_fails_in_one_line(&output, &["the output is incomplete"]);
        assert!(output.stdout.ends_with(format.broken_ending()), "{format}: {} bytes", output.stdout.len());
        if format == logs_format::Format::Arrow {
            let reader =
                logs_core::arrow::ipc::reader::StreamReader::try_new(output.stdout.as_slice(), None).unwrap();
            let read: Result<Vec<_>, _> = reader.collect();
            assert!(read.is_err(), "the Arrow reader takes the output for complete");
        }
    }
}
