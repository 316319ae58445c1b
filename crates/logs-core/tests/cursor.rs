//! Cursor chains over a folder that a writer fills while the chain is called: the chain's
//! exports, taken together, are the full export of the final dataset, as a multiset, row by row
//! (the row-by-row oracle of `support` decides).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use logs_core::{CursorKeys, CursorSettings, Engine, EngineConfig, Error};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::*;

const APP: i64 = 1001;
const FIELDS: &str = "error_id,error_timestamp,service_device_id,os_name,error";
const SETTLE: Duration = Duration::from_millis(300);

/// An engine whose chains settle in [`SETTLE`] and whose window reaches the generated dates
/// (2026-10-01 on) whatever today is.
fn chain_engine(root: &Path) -> Engine {
    let first = chrono::NaiveDate::from_ymd_opt(2026, 10, 1).unwrap();
    let days = (chrono::Utc::now().date_naive() - first).num_days() + 30;
    let cursor = CursorSettings {
        keys: CursorKeys::generated(),
        settle: SETTLE,
        max_lateness_days: u16::try_from(days).unwrap(),
    };
    let config = EngineConfig { target_partitions: 2, batch_size: 1000, cursor, ..EngineConfig::default() };
    Engine::open(root, config).unwrap()
}

/// One call: its rows and the next cursor.
async fn call(engine: &Engine, cursor: &str) -> Result<(Vec<Row>, String), Error> {
    let since = if cursor == "start" { "&date_since=2026-10-01" } else { "" };
    let query = format!("application_id={APP}&fields={FIELDS}&cursor={cursor}{since}");
    let request = engine.parse_request(&query)?;
    let mut export = engine.export(&request).await?;
    let mut rows = Vec::new();
    while let Some(batch) = futures::StreamExt::next(&mut export).await {
        rows.extend(batch_rows(&batch?));
    }
    Ok((rows, export.next_cursor().expect("a chain's call has a next cursor").to_owned()))
}

/// Copies `from` to `to` as a writer of the dataset must: under a hidden name, then renamed,
/// so that the object appears whole with a fresh modification time.
fn add_object(from: &Path, to: &Path) {
    let hidden = to.with_file_name(format!(".{}.tmp", to.file_name().unwrap().to_str().unwrap()));
    std::fs::copy(from, &hidden).unwrap();
    std::fs::rename(&hidden, to).unwrap();
}

fn date_folders(root: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(root.join(format!("application_id={APP}")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    folders
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_called_while_a_writer_adds_late_and_new_files_delivers_each_record_once() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let dir = generate(6000, 6);
    let root = data_root(&dir);
    // The last two dates arrive later, as new folders; copies of the older files arrive late
    // into their own folders (the same records again: a multiset counts them twice).
    let staged = tempfile::tempdir().unwrap();
    let folders = date_folders(&root);
    let mut arrivals: Vec<(PathBuf, PathBuf)> = Vec::new();
    for folder in &folders[4..] {
        let held = staged.path().join(folder.file_name().unwrap());
        std::fs::rename(folder, &held).unwrap();
        std::fs::create_dir(folder).unwrap();
        for file in std::fs::read_dir(&held).unwrap() {
            let file = file.unwrap().path();
            arrivals.push((file.clone(), folder.join(file.file_name().unwrap())));
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let old_files: Vec<PathBuf> = folders[..4]
        .iter()
        .flat_map(|f| std::fs::read_dir(f).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    for round in 0..20 {
        let file = &old_files[rng.random_range(0..old_files.len())];
        arrivals.push((file.clone(), file.with_file_name(format!("late-{round}.parquet"))));
    }
    // Interleaved: late copies and new folders' files in a random order.
    for i in (1..arrivals.len()).rev() {
        arrivals.swap(i, rng.random_range(0..=i));
    }

    let engine = chain_engine(&root);
    let (mut delivered, mut cursor) = call(&engine, "start").await.unwrap();
    let writer = std::thread::spawn(move || {
        let mut rng = StdRng::seed_from_u64(seed ^ 1);
        for (from, to) in arrivals {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..60)));
            add_object(&from, &to);
        }
    });
    let mut calls = 1;
    while !writer.is_finished() {
        let (rows, next) = call(&engine, &cursor).await.unwrap();
        delivered.extend(rows);
        cursor = next;
        calls += 1;
    }
    writer.join().unwrap();
    // Once every object has settled, one more call takes the rest.
    tokio::time::sleep(SETTLE + Duration::from_millis(200)).await;
    let (rows, cursor) = call(&engine, &cursor).await.unwrap();
    delivered.extend(rows);
    println!("{calls} calls while writing");
    assert!(calls >= 5, "the writer should have been met by several calls, not {calls}");

    let full =
        request(&format!("application_id={APP}&fields={FIELDS}&date_since=2026-10-01&date_until=9999-12-31"));
    let expected = read_all(&root).answer(&full);
    assert!(!expected.is_empty());
    assert!(sorted(delivered) == sorted(expected.clone()), "the chain's union differs from the full export");
    // Nothing new: nothing delivered.
    assert!(call(&engine, &cursor).await.unwrap().0.is_empty());
}

#[tokio::test]
async fn a_deleted_or_replaced_object_breaks_the_chain_with_a_conflict_naming_its_folder() {
    let dir = generate(2000, 3);
    let root = data_root(&dir);
    let engine = chain_engine(&root);
    // Generated files are as new as the chain: wait until they have settled.
    tokio::time::sleep(SETTLE + Duration::from_millis(100)).await;
    let (_, cursor) = call(&engine, "start").await.unwrap();
    let folder = &date_folders(&root)[1];
    let file = std::fs::read_dir(folder).unwrap().map(|e| e.unwrap().path()).next().unwrap();
    let date = folder.file_name().unwrap().to_str().unwrap().trim_start_matches("date=").to_owned();

    // Rewritten in place (compaction writes a new object under the name).
    let copy = dir.path().join("copy.parquet");
    std::fs::copy(&file, &copy).unwrap();
    add_object(&copy, &file);
    tokio::time::sleep(SETTLE + Duration::from_millis(100)).await;
    match call(&engine, &cursor).await {
        Err(e @ Error::CursorConflict { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&format!("date folder {date}")), "{text}");
            assert!(text.contains(&format!("cursor=start&date_since={date}")), "{text}");
        }
        other => panic!("expected a conflict, got {:?}", other.map(|(rows, _)| rows.len())),
    }
    // Deleted (retention inside the window).
    std::fs::remove_file(&file).unwrap();
    let error = call(&engine, &cursor).await.unwrap_err().to_string();
    assert!(error.contains("are gone"), "{error}");
}

/// A chain continues only under the field policy it started under: a cursor made for a
/// contractor's pseudonymised export is refused without the policy and under another one.
#[tokio::test]
async fn a_chain_is_bound_to_its_field_policy() {
    use std::sync::Arc;

    use logs_core::privacy::PolicySpec;
    use logs_core::{ExportRequest, FieldPolicy, Privacy, PseudonymKey, QueryPairs};

    let dir = generate(500, 2);
    let engine = chain_engine(&data_root(&dir));
    tokio::time::sleep(SETTLE + Duration::from_millis(100)).await;
    let key = Arc::new(PseudonymKey::new(&[7; 32]).unwrap());
    let privacy = |fields: &[(&str, &str)]| {
        let spec = PolicySpec {
            fields: fields.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect(),
            ..Default::default()
        };
        Arc::new(
            Privacy::new(FieldPolicy::from_spec(&spec).unwrap(), Some(Arc::clone(&key)), Arc::default())
                .unwrap(),
        )
    };
    let pseudonymised = privacy(&[("service_device_id", "pseudonymise")]);
    let scrubbed = privacy(&[("error", "scrub")]);
    let parse = |cursor: &str, privacy: &Arc<Privacy>| {
        let since = if cursor == "start" { "&date_since=2026-10-01" } else { "" };
        let query = format!("application_id={APP}&fields={FIELDS}&cursor={cursor}{since}");
        ExportRequest::from_pairs_under(&QueryPairs::parse(&query).unwrap(), engine.policy(), privacy)
    };
    let mut export = engine.export(&parse("start", &pseudonymised).unwrap()).await.unwrap();
    while futures::StreamExt::next(&mut export).await.is_some() {}
    let cursor = export.next_cursor().unwrap().to_owned();
    parse(&cursor, &pseudonymised).unwrap();
    for other in [Privacy::none(), scrubbed] {
        let refused = parse(&cursor, &other).unwrap_err();
        assert_eq!(refused.parameter(), "cursor");
        assert!(refused.message().contains("field policy"), "{refused}");
    }
}
