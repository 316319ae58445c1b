//! Faults at the engine level (issue 5): damaged, vanished, replaced and forbidden files,
//! folders that cannot be listed, empty folders, schema drift (in `faults/drift.rs`).
//!
//! Each ends in the documented outcome (docs/dataset.md, "Unreadable files"): an error naming the file,
//! or with `skip_unavailable_shards=true` a complete export of the readable files (checked
//! against the row-by-row oracle of `support`) that lists what it skipped. Never a panic, a
//! hang (every export is bounded in time) or an export that ends cleanly but short.

mod support;

#[path = "faults/damage.rs"]
mod damage;
#[path = "faults/drift.rs"]
mod drift;
#[path = "faults/unprivileged.rs"]
mod unprivileged;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use damage::{Outcome, assert_names, run};
use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use logs_core::{Engine, EngineConfig, Error};
use logs_testkit::machine::{running_as_root, set_mode};
use support::*;

/// The second day of a generated dataset, application 1001 (two files: `late-00000.parquet`
/// and `part-00000.parquet`).
const DAY2: &str = "application_id=1001&date_since=2026-10-02&date_until=2026-10-02";
const DAY2_FOLDER: &str = "application_id=1001/date=2026-10-02";

fn skipping(query: &str) -> logs_core::ExportRequest {
    request(&format!("{query}&skip_unavailable_shards=true"))
}

#[tokio::test]
async fn every_unreadable_footer_fails_the_export_naming_the_file_or_is_skipped_and_counted() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let original = std::fs::read(&victim).unwrap();
    let engine = engine(&root);
    let query = format!("{DAY2}&fields=error_id,os_name,service_device_id,error");
    for (what, bytes) in damage::unreadable_variants(&original) {
        std::fs::write(&victim, &bytes).unwrap();
        match run(&engine, &request(&query), |_, _| {}).await {
            Outcome::Refused(e) => {
                assert_names(&e, &victim);
                assert!(
                    matches!(&e, Error::Storage { path: Some(p), .. } if Path::new(p) == victim),
                    "{what}: {e:?}"
                );
            }
            other => panic!("{what}: the export must be refused before any row, got {other:?}"),
        }
        let request = skipping(&query);
        let expected = sorted(read_all(&root).answer(&request));
        assert!(!expected.is_empty(), "the other file of the day has rows");
        match run(&engine, &request, |_, _| {}).await {
            Outcome::Completed { rows, skipped, .. } => {
                assert_eq!(skipped, std::slice::from_ref(&victim), "{what}");
                assert!(sorted(rows) == expected, "{what}: not the complete export of the readable files");
            }
            other => panic!("{what}: expected the readable files, got {other:?}"),
        }
    }
}

/// Copies of the file at `path` with one byte flipped: at 40 places in the data and 40 in
/// the footer. (Byte offset, bytes.)
fn flipped_copies(path: &Path) -> Vec<(usize, Vec<u8>)> {
    let original = std::fs::read(path).unwrap();
    let (footer_start, _) = damage::footer(&original);
    let n = original.len();
    let data = (0..40).map(|i| 4 + (footer_start - 4) * i / 40);
    let footer = (0..40).map(|i| footer_start + (n - 8 - footer_start) * i / 40);
    data.chain(footer)
        .map(|at| {
            let mut bytes = original.clone();
            bytes[at] ^= 0xFF;
            (at, bytes)
        })
        .collect()
}

/// Parquet has no checksums (the generated files carry no page CRCs), so a flipped byte in a
/// value or a statistic can change an export undetectably; that limitation is the README's (Limitations).
/// What must hold for any damage: no panic, no hang, and an error or an export that ends.
#[tokio::test]
async fn flipped_bytes_anywhere_in_a_file_never_panic_or_hang() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let engine = engine(&root);
    let request = request(&format!("{DAY2}&fields=error_id,error,mcc,service_device_id,os_name,city"));
    let mut failures = 0;
    for (_, bytes) in flipped_copies(&victim) {
        std::fs::write(&victim, &bytes).unwrap();
        if run(&engine, &request, |_, _| {}).await.error().is_some() {
            failures += 1;
        }
    }
    assert!(failures > 0, "some damage must be noticed");
}

/// Rewrites `path` as other writers' files often are: no page index (the catalog then rebuilds
/// the offset index from the page headers, whatever they hold).
fn without_page_index(path: &Path) {
    let properties = WriterProperties::builder()
        .set_statistics_enabled(datafusion::parquet::file::properties::EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .set_data_page_row_count_limit(100)
        .build();
    rewrite(path, properties);
}

#[tokio::test]
async fn flipped_bytes_in_a_file_without_page_index_never_panic_or_hang_and_fail_as_storage_errors() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    without_page_index(&victim);
    let request =
        request(&format!("{DAY2}&fields=error_id,error,mcc,service_device_id,os_name,city&os_name=ios"));
    let expected = sorted(read_all(&root).answer(&request));
    assert!(!expected.is_empty());
    // Intact, the file reads right through the rebuilt index.
    assert_eq!(sorted(engine_rows(&engine(&root), &request).await), expected);
    let mut failures = 0;
    for (at, bytes) in flipped_copies(&victim) {
        std::fs::write(&victim, &bytes).unwrap();
        // A new engine each time: no footer cached from an earlier copy.
        if let Some(error) = run(&engine(&root), &request, |_, _| {}).await.error() {
            assert!(matches!(error, Error::Storage { .. }), "byte {at} flipped: {error:?}");
            failures += 1;
        }
    }
    assert!(failures > 0, "some damage must be noticed");
}

#[tokio::test]
async fn damage_found_while_rows_are_decoded_is_a_storage_error() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let engine = engine(&root);
    let request = request(&format!("{DAY2}&fields=error_id,error,mcc,service_device_id,os_name,city"));
    for (at, bytes) in flipped_copies(&victim) {
        std::fs::write(&victim, &bytes).unwrap();
        if let Some(error) = run(&engine, &request, |_, _| {}).await.error() {
            assert!(matches!(error, Error::Storage { .. }), "byte {at} flipped: {error:?}");
        }
    }
}

/// Files written without compression keep their values' lengths in the clear. A flipped byte
/// there makes a length point past its page or leaves bytes after its last value, which
/// parquet's plain decoder does not check (it panics on some). Neither may panic the export:
/// it fails with a storage error, or ends.
#[tokio::test]
async fn flipped_bytes_in_an_uncompressed_file_never_panic_and_fail_as_storage_errors() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let properties = WriterProperties::builder()
        .set_compression(datafusion::parquet::basic::Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_data_page_row_count_limit(100)
        .build();
    rewrite(&victim, properties);
    let original = std::fs::read(&victim).unwrap();
    let (footer_start, _) = damage::footer(&original);
    // All rows (every value decoded), and a few (rows skipped by the filter's selection).
    let fields = "fields=error_id,error,os_name,city,service_device_id,device_ipv6";
    let requests = [request(&format!("{DAY2}&{fields}")), request(&format!("{DAY2}&{fields}&os_name=ios"))];
    let mut failures = [0, 0];
    for i in 0..400 {
        let at = 4 + (footer_start - 4) * i / 400;
        let mut bytes = original.clone();
        bytes[at] ^= 0xFF;
        std::fs::write(&victim, &bytes).unwrap();
        for (request, failures) in requests.iter().zip(&mut failures) {
            if let Some(error) = run(&engine(&root), request, |_, _| {}).await.error() {
                assert!(matches!(error, Error::Storage { .. }), "byte {at} flipped: {error:?}");
                *failures += 1;
            }
        }
    }
    assert!(failures.iter().all(|&n| n > 0), "some damage must be noticed: {failures:?}");
}

#[tokio::test]
async fn a_footer_whose_embedded_arrow_schema_is_corrupt_is_an_unreadable_file() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    std::fs::write(&victim, damage::with_corrupt_arrow_schema(&std::fs::read(&victim).unwrap())).unwrap();
    let engine = engine(&root);
    let query = format!("{DAY2}&fields=error_id,os_name");
    match run(&engine, &request(&query), |_, _| {}).await {
        Outcome::Refused(e) => assert_names(&e, &victim),
        other => panic!("expected a refusal naming the file, got {other:?}"),
    }
    let request = skipping(&query);
    let expected = sorted(read_all(&root).answer(&request));
    match run(&engine, &request, |_, _| {}).await {
        Outcome::Completed { rows, skipped, .. } => {
            assert_eq!(skipped, [victim]);
            assert!(sorted(rows) == expected);
        }
        other => panic!("expected the readable files, got {other:?}"),
    }
}

#[tokio::test]
async fn a_file_deleted_after_its_footer_was_read_fails_the_export_naming_it() {
    let dir = generate(20_000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let original = std::fs::read(&victim).unwrap();
    // Larger than a small file, which is read whole with its footer (and then read already).
    assert!(original.len() > 256 * 1024, "{} bytes", original.len());
    let engine = engine(&root);
    let query = format!("{DAY2}&fields=error_id,error");
    // Skipping or not: the file was found readable and selected, so its loss is damage found
    // while rows are read, which fails the export in both modes.
    for request in [request(&query), skipping(&query)] {
        std::fs::write(&victim, &original).unwrap();
        let outcome = run(&engine, &request, |export, batches| {
            if batches == 0 {
                assert!(export.selection().files.iter().any(|f| Path::new(&f.name) == victim));
                std::fs::remove_file(&victim).unwrap();
            }
        })
        .await;
        let error = outcome.error().unwrap_or_else(|| panic!("a silently short export: {outcome:?}"));
        assert_names(error, &victim);
    }
}

#[tokio::test]
async fn a_file_deleted_in_the_middle_of_an_export_fails_it_unless_it_was_read_already() {
    let dir = generate(6000, 1);
    let root = data_root(&dir);
    let folder = root.join("application_id=1001/date=2026-10-01");
    // One partition and small batches: files are read one after the other, in path order.
    let engine =
        Engine::open(&root, EngineConfig { target_partitions: 1, batch_size: 64, ..Default::default() })
            .unwrap();
    let request =
        request("application_id=1001&date_since=2026-10-01&date_until=2026-10-01&fields=error_id,error");
    let expected = sorted(read_all(&root).answer(&request));
    let last = folder.join("part-00000.parquet");
    let outcome = run(&engine, &request, |_, batches| {
        if batches == 1 {
            std::fs::remove_file(&last).unwrap();
        }
    })
    .await;
    match outcome {
        Outcome::Failed { rows, error } => {
            assert!(rows.len() < expected.len());
            assert!(matches!(error, Error::Storage { .. } | Error::Internal(_)), "{error:?}");
        }
        Outcome::Completed { rows, .. } => {
            assert!(sorted(rows) == expected, "the export ended cleanly, so it must be complete")
        }
        Outcome::Refused(e) => panic!("the file vanished after the export started: {e:?}"),
    }
}

#[tokio::test]
async fn a_file_replaced_after_its_footer_was_read_fails_the_export_naming_it() {
    let dir = generate(3000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let original = std::fs::read(&victim).unwrap();
    let other_valid =
        std::fs::read(root.join("application_id=1002/date=2026-10-01/part-00000.parquet")).unwrap();
    let engine = engine(&root);
    let request = request(&format!("{DAY2}&fields=error_id,os_name,error_timestamp"));

    let garbage = |len: usize| vec![0xA5u8; len];
    let replacements: [(&str, Vec<u8>); 5] = [
        ("another valid file", other_valid.clone()),
        ("the same bytes, written again", original.clone()),
        ("garbage of the same size", garbage(original.len())),
        ("a shorter garbage file", garbage(100)),
        ("a longer garbage file", garbage(original.len() * 2)),
    ];
    for (what, replacement) in replacements {
        std::fs::write(&victim, &original).unwrap();
        let outcome = run(&engine, &request, |_, batches| {
            if batches == 0 {
                // Renamed over the old one, as a writer that replaces files atomically does.
                let temporary = victim.with_extension("tmp");
                std::fs::write(&temporary, &replacement).unwrap();
                std::fs::rename(&temporary, &victim).unwrap();
            }
        })
        .await;
        // The scan opens the file only now, sees another size or modification time than the
        // selection did, and fails naming it, rather than read rows the selection never saw.
        match outcome {
            Outcome::Refused(e) => panic!("{what}: the file was replaced after the export started: {e:?}"),
            Outcome::Failed { error, .. } => assert_names(&error, &victim),
            Outcome::Completed { .. } => panic!("{what}: a file replaced after selection was read"),
        }
    }
}

#[tokio::test]
async fn a_file_replaced_between_two_exports_of_one_engine_is_read_afresh() {
    // A server keeps one engine for days: its caches (footers, listings) must not serve a
    // replaced file's old metadata.
    let dir = generate(3000, 2);
    let root = data_root(&dir);
    let victim = root.join(DAY2_FOLDER).join("part-00000.parquet");
    let original = std::fs::read(&victim).unwrap();
    let other_valid =
        std::fs::read(root.join("application_id=1002/date=2026-10-01/part-00000.parquet")).unwrap();
    let engine = engine(&root);
    let query = format!("{DAY2}&fields=error_id,os_name,error_timestamp");
    let request = request(&query);
    let oracle = || sorted(read_all(&root).answer(&request));

    assert!(run(&engine, &request, |_, _| {}).await.completed() == oracle());
    std::fs::write(&victim, &other_valid).unwrap();
    // The catalog first, before any scan has looked at the new file: the new footer's
    // statistics (another day) prune it; the cached old footer's would keep it.
    let selection = engine.export(&request).await.unwrap().selection().clone();
    assert!(
        !selection.files.iter().any(|f| Path::new(&f.name) == victim),
        "selected by the old footer's statistics"
    );
    assert!(run(&engine, &request, |_, _| {}).await.completed() == oracle(), "the new file, not the old");
    std::fs::write(&victim, b"PAR1 garbage now").unwrap();
    match run(&engine, &request, |_, _| {}).await {
        Outcome::Refused(e) => assert_names(&e, &victim),
        other => panic!("expected a refusal naming the file, got {other:?}"),
    }
    assert!(run(&engine, &skipping(&query), |_, _| {}).await.completed() == oracle());
    std::fs::write(&victim, &original).unwrap();
    assert!(run(&engine, &request, |_, _| {}).await.completed() == oracle(), "the original again");
}

/// A Parquet file whose footer takes a while to parse (thousands of one-row row groups), so
/// that a test can act while the engine's footer check holds it open.
fn write_slow_footer_file(path: &Path, first_timestamp: i64, rows: usize) {
    let batch = RecordBatch::try_from_iter([
        (
            "error_timestamp",
            Arc::new(Int64Array::from_iter_values((0..rows as i64).map(|i| first_timestamp + i))) as ArrayRef,
        ),
        (
            "error_id",
            Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("slow-{i}")))) as ArrayRef,
        ),
    ])
    .unwrap();
    let properties = WriterProperties::builder().set_max_row_group_row_count(Some(1)).build();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties)).unwrap();
    // One row at a time: the writer splits a larger batch by recursing once per row group.
    for i in 0..rows {
        writer.write(&batch.slice(i, 1)).unwrap();
    }
    writer.close().unwrap();
}

/// Deletes `path` as soon as this process has it open (Linux: `/proc/self/fd`); true if it did.
fn delete_once_opened(path: PathBuf) -> std::thread::JoinHandle<bool> {
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
                if std::fs::read_link(entry.path()).is_ok_and(|target| target == path) {
                    std::fs::remove_file(&path).unwrap();
                    return true;
                }
            }
        }
        false
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_vanishes_while_the_export_starts_is_never_silently_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("application_id=5/date=2026-10-01");
    std::fs::create_dir_all(&folder).unwrap();
    // As the engine names it (the tempdir may be below a symbolic link).
    let victim = std::fs::canonicalize(&folder).unwrap().join("slow-footer.parquet");
    let engine = Engine::open(dir.path(), EngineConfig::default()).unwrap();
    let query = "application_id=5&date_since=2026-10-01&date_until=2026-10-01&fields=error_id";
    for request in [request(query), skipping(query)] {
        write_slow_footer_file(&victim, 1_790_812_800, 6000);
        // Deleted while the footer check reads it: the check succeeds (the file is open), the
        // file is gone by the time DataFusion plans the scan.
        let racer = delete_once_opened(victim.clone());
        let outcome = run(&engine, &request, |_, _| {}).await;
        assert!(racer.join().unwrap(), "the file was never seen open");
        match outcome {
            // Deleted only once the scan had it open (the racer was late): every row was read.
            Outcome::Completed { rows, skipped, .. } if skipped.is_empty() => {
                assert_eq!(rows.len(), 6000, "a file deleted while the scan read it must give all its rows")
            }
            Outcome::Completed { rows, skipped, selected } => {
                assert!(
                    skipped == [victim.clone()] && !selected.contains(&victim),
                    "the export ended with {} rows although it selected the vanished file and did \
                     not skip it (selected {selected:?}, skipped {skipped:?})",
                    rows.len()
                );
                assert!(request.skip_unavailable_shards());
            }
            other => assert_names(other.error().unwrap(), &victim),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Permissions, as an unprivileged user (see `faults/unprivileged.rs` for why and how).

/// Sets up a generated dataset with `target` (relative to the root) at `mode` and runs
/// `scenario` in the child as `nobody`.
fn run_unprivileged(scenario: &str, target: &str, mode: u32) {
    let Some(exe) = unprivileged::this_test() else { return };
    let dir = generate(2000, 2);
    set_mode(dir.path(), 0o755);
    let root = data_root(&dir);
    let target = root.join(target);
    set_mode(&target, mode);
    let envs = [("LOGS_FAULTS_ROOT", root.as_os_str()), ("LOGS_FAULTS_TARGET", target.as_os_str())];
    unprivileged::run_child(&exe, "unprivileged_child", scenario, &envs);
    set_mode(&target, 0o755);
}

#[test]
fn permission_denied_on_a_file_fails_the_export_naming_it_or_is_skipped_and_counted() {
    run_unprivileged("file", &format!("{DAY2_FOLDER}/part-00000.parquet"), 0o000);
}

#[test]
fn a_folder_that_cannot_be_listed_fails_the_export_naming_it() {
    // The files of a folder that cannot be listed are unknown, so they cannot be counted as
    // skipped: the export fails in both modes. A folder outside the range does not matter.
    run_unprivileged("folder", DAY2_FOLDER, 0o000);
    run_unprivileged("folder", "application_id=1001", 0o000);
    run_unprivileged("folder-outside-range", "application_id=1001/date=2026-10-01", 0o000);
}

#[test]
fn a_folder_that_can_be_listed_but_not_entered_is_never_silently_left_out() {
    run_unprivileged("unsearchable", DAY2_FOLDER, 0o644);
    run_unprivileged("unsearchable", "application_id=1001", 0o644);
}

#[test]
fn an_unreadable_dataset_root_is_an_error_not_an_empty_export() {
    run_unprivileged("root", "", 0o000);
    run_unprivileged("root", "", 0o644);
}

/// The scenarios, run by the tests above in a child process as an unprivileged user.
#[tokio::test]
#[ignore = "runs only as the child of the permission tests above, as an unprivileged user"]
async fn unprivileged_child() {
    let Ok(scenario) = std::env::var(unprivileged::SCENARIO) else { return };
    assert!(!running_as_root(), "the child must not run as root");
    let root = PathBuf::from(std::env::var_os("LOGS_FAULTS_ROOT").unwrap());
    let target = PathBuf::from(std::env::var_os("LOGS_FAULTS_TARGET").unwrap());
    let query = match scenario.as_str() {
        "folder-outside-range" => format!("{DAY2}&fields=error_id,os_name"),
        _ => "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id,os_name".into(),
    };
    let engine = match Engine::open(&root, EngineConfig { target_partitions: 2, ..Default::default() }) {
        Ok(engine) => engine,
        Err(e) => {
            assert_eq!(scenario, "root", "{e}");
            return assert_names(&e, &root);
        }
    };
    for request in [request(&query), skipping(&query)] {
        let skip = request.skip_unavailable_shards();
        // The oracle passes over files it cannot open, as a skipping export must.
        let readable = || sorted(read_all(&root).answer(&request));
        match (scenario.as_str(), run(&engine, &request, |_, _| {}).await) {
            ("file", Outcome::Refused(e)) if !skip => {
                assert_names(&e, &target);
                assert!(e.to_string().contains("Permission denied"), "{e}");
            }
            ("file", Outcome::Completed { rows, skipped, .. }) if skip => {
                assert_eq!(skipped, std::slice::from_ref(&target));
                assert!(sorted(rows) == readable(), "not the complete export of the readable files");
            }
            ("folder" | "root", Outcome::Refused(e)) => assert_names(&e, &target),
            ("folder-outside-range", Outcome::Completed { rows, .. }) => {
                let expected = sorted(read_all(&root.join(DAY2_FOLDER)).answer(&request));
                assert!(!expected.is_empty() && sorted(rows) == expected);
            }
            ("unsearchable", Outcome::Refused(e)) => {
                assert!(matches!(e, Error::Storage { .. }), "{e:?}");
                assert!(e.to_string().contains(&target.display().to_string()), "{e}");
            }
            ("unsearchable", Outcome::Completed { rows, skipped, .. }) if skip => {
                assert!(!skipped.is_empty() && skipped.iter().all(|p| p.starts_with(&target)), "{skipped:?}");
                assert!(sorted(rows) == readable(), "not the complete export of the readable files");
            }
            (scenario, outcome) => panic!("scenario `{scenario}`, skip={skip}: {outcome:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Empty layouts.

#[tokio::test]
async fn an_application_folder_without_files_exports_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("application_id=7");
    std::fs::create_dir_all(&app).unwrap();
    let engine = engine(dir.path());
    let query = "application_id=7&date_since=2026-10-01&date_until=2026-10-31&fields=error_id,os_name";
    for layout in ["an empty application folder", "empty date folders", "folders that are not dates"] {
        match layout {
            "empty date folders" => {
                for day in 1..=3 {
                    std::fs::create_dir_all(app.join(format!("date=2026-10-0{day}"))).unwrap();
                }
            }
            "folders that are not dates" => {
                std::fs::create_dir_all(app.join("date=latest")).unwrap();
                std::fs::create_dir_all(app.join("2026-10-04")).unwrap();
                std::fs::write(app.join("date=2026-10-05"), b"a file, not a folder").unwrap();
            }
            _ => {}
        }
        for request in [request(query), skipping(query)] {
            match run(&engine, &request, |_, _| {}).await {
                Outcome::Completed { rows, skipped, selected } => {
                    assert!(rows.is_empty() && skipped.is_empty() && selected.is_empty(), "{layout}");
                }
                other => panic!("{layout}: {other:?}"),
            }
        }
    }
    assert_eq!(engine.storage().applications().await.unwrap(), [7]);
}

#[tokio::test]
async fn a_date_folder_with_only_files_that_are_not_parquet_data_contributes_nothing() {
    let dir = generate(2000, 2);
    let root = data_root(&dir);
    let day = root.join(DAY2_FOLDER);
    std::fs::remove_dir_all(&day).unwrap();
    std::fs::create_dir_all(day.join("nested.parquet")).unwrap();
    for (name, content) in [
        ("_SUCCESS", &b""[..]),
        ("_committed_123", b"{}"),
        ("part-00000.parquet.tmp", b"PAR1 half-written"),
        (".part-00000.parquet.crc", b"crc"),
        ("errors.csv", b"error_id\n1\n"),
        ("part-00000.PARQUET", b"not ours"),
    ] {
        std::fs::write(day.join(name), content).unwrap();
    }
    let engine = engine(&root);
    let query =
        "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=error_id,error_datetime";
    let request = request(query);
    let expected = sorted(read_all(&root).answer(&request));
    assert!(!expected.is_empty());
    let selection = damage::bounded(engine.export(&request)).await.unwrap().selection().clone();
    assert_eq!(selection.date_folders, 2);
    assert!(selection.skipped.is_empty());
    assert!(selection.files.iter().all(|f| !Path::new(&f.name).starts_with(&day)), "{selection:?}");
    assert!(run(&engine, &request, |_, _| {}).await.completed() == expected);
    // The same day alone: a complete, empty export.
    let day_alone = support::request(&format!("{DAY2}&fields=error_id"));
    assert!(run(&engine, &day_alone, |_, _| {}).await.completed().is_empty());
}

#[tokio::test]
async fn an_empty_dataset_root_exports_nothing_and_a_root_that_is_a_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    assert!(engine.storage().applications().await.unwrap().is_empty());
    let request = request("application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id");
    assert!(run(&engine, &request, |_, _| {}).await.completed().is_empty());

    let file = dir.path().join("dataset.parquet");
    std::fs::write(&file, b"").unwrap();
    match Engine::open(&file, EngineConfig::default()) {
        Err(e @ Error::Storage { .. }) => assert!(
            e.to_string().contains("dataset.parquet") && e.to_string().contains("not a folder"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
}
