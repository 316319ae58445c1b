//! The reference loader, `examples/incremental_loader.py`, against `logs serve` over a real
//! socket (issue 42): killed with SIGKILL at random points, ten times, while a writer process
//! adds files to old and new date folders, then run to the end, it holds in SQLite exactly the
//! records DuckDB reads from the final Parquet files — none lost, none twice. Then a broken
//! chain (a delivered file deleted) stops it with the server's 409 message, and a refused call
//! stops it too, both leaving the database as it was. Against a server that prepares every
//! export, it waits out each 202 and stays exact.
//!
//! The kills come from a seeded generator (`LOGS_TEST_SEED` to repeat its choices; the seed is
//! printed). The first is aimed inside the first body (about 90,000 records), the second at
//! the start of its second body (so after a commit); the others fall at random: some just
//! after the loader starts reading a body, the rest at a random delay after its start (before
//! its first call, inside a body, after a commit, in `--follow`'s sleep). The test counts where
//! each landed, from the loader's lines, and fails unless at least one landed inside a body.

mod common;
#[allow(dead_code)]
#[path = "cursor_chain/support.rs"]
mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Served;
use rand::{Rng, SeedableRng};
use support::*;

/// The writer's process (see `support::Writer`).
#[test]
#[ignore = "runs only as the writer process of the loader test"]
fn dataset_writer_child() {
    run_writer_child();
}

/// The loader's line when it starts reading a body, and the start of its line after a commit.
const READING: &str = "reading new records";
const COMMITTED: &str = "committed ";

/// A running loader, its stdout lines coming through a channel.
struct Loader {
    child: Child,
    lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl Loader {
    fn start(served: &Served, db: &Path, token: &str, more: &[&str]) -> Loader {
        let mut args = vec![served.base.clone(), token.to_owned(), APP.to_owned(), since().to_string()];
        args.extend([db.display().to_string(), "--fields".to_owned(), FIELDS.to_owned()]);
        args.extend(more.iter().map(|a| a.to_string()));
        let mut child = common::python::spawn_example("incremental_loader.py", &args);
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Loader { child, lines, reader }
    }

    /// Its lines until it starts reading its `body`-th body. Fails if it stops first.
    fn until_body(&mut self, body: usize) -> Vec<String> {
        let mut lines = Vec::new();
        while lines.iter().filter(|l| *l == READING).count() < body {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => lines.push(line),
                Err(_) => {
                    let _ = self.child.kill();
                    let mut stderr = String::new();
                    let _ = self.child.stderr.take().unwrap().read_to_string(&mut stderr);
                    panic!("the loader never started body {body}: {lines:?}\n{stderr}");
                }
            }
        }
        lines
    }

    /// Waits for its end: its exit status, stdout lines and stderr.
    fn finish(mut self) -> (std::process::ExitStatus, Vec<String>, String) {
        let status = self.child.wait().unwrap();
        self.reader.join().unwrap();
        let mut stderr = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        (status, self.lines.try_iter().collect(), stderr)
    }

    /// SIGKILL now; its stdout lines. Fails if it had already stopped by itself.
    fn kill(mut self) -> Vec<String> {
        if let Some(status) = self.child.try_wait().unwrap() {
            let (_, lines, stderr) = self.finish();
            panic!("the loader stopped by itself ({status}) before its kill: {lines:?}\n{stderr}");
        }
        self.child.kill().unwrap();
        let (status, lines, _) = self.finish();
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status}");
        lines
    }
}

/// Runs the loader once (no `--follow`) to its end: its exit status, stdout and stderr.
fn load_once(served: &Served, db: &Path, token: &str) -> (i32, Vec<String>, String) {
    let (status, lines, stderr) = Loader::start(served, db, token, &[]).finish();
    (status.code().expect("the loader exited"), lines, stderr)
}

/// The records the loader stored, and its cursor.
fn stored(db: &Path) -> (Vec<Vec<String>>, Option<String>) {
    let output = common::python::run_script("sqlite_rows.py", &[&db.display().to_string()]);
    let mut lines: Vec<serde_json::Value> =
        output.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let cursor = lines.pop().unwrap()["cursor"].as_str().map(str::to_owned);
    let records = lines.iter().map(|r| serde_json::from_value(r.clone()).unwrap()).collect();
    (records, cursor)
}

/// Where the kills landed, from each killed loader's lines.
#[derive(Debug, Default)]
struct Kills {
    /// Before the run read anything.
    before_first_body: usize,
    /// Once the run had started reading a body, before its commit.
    mid_body: usize,
    /// After a commit (in `--follow`'s sleep or its next call).
    after_commit: usize,
    /// Runs that committed at least once before their kill.
    committing_runs: usize,
}

impl Kills {
    fn count(&mut self, lines: &[String]) {
        self.committing_runs += usize::from(lines.iter().any(|l| l.starts_with(COMMITTED)));
        match lines.last() {
            None => self.before_first_body += 1,
            Some(line) if line == READING => self.mid_body += 1,
            Some(line) if line.starts_with(COMMITTED) => self.after_commit += 1,
            Some(line) => panic!("an unknown line of the loader: {line}"),
        }
    }
}

#[test]
fn the_loader_killed_at_random_points_ends_with_exactly_duckdbs_records() {
    let seed = std::env::var("LOGS_TEST_SEED")
        .map(|s| s.parse().expect("LOGS_TEST_SEED: a number"))
        .unwrap_or_else(|_| rand::rng().random());
    println!("seed {seed} (LOGS_TEST_SEED={seed} repeats the kill delays)");
    let mut random = rand::rngs::StdRng::seed_from_u64(seed);

    // About 90,000 records of the application from `since()` on: the first body.
    let ChainFolder { dir: folder, root, keys } = ChainFolder::new(150_000, 1);
    let staging = staging();
    let served = serve_chain(root.as_os_str(), &keys, "1s", &[]);
    let db = folder.path().join("errors.sqlite");
    let token = served.token.clone();

    let mut writer = Writer::spawn(staging.path(), &root.display().to_string(), 50, seed, &[]);
    let mut kills = Kills::default();
    let mut during_writes = 0;
    for run in 0..10 {
        let started = Instant::now();
        let mut loader = Loader::start(&served, &db, &token, &["--follow", "0.1"]);
        // Run 0 is killed inside the first body (about 90,000 records, read for half a second or
        // more), a moment after it starts reading; run 1 as it starts its second body (after a
        // commit); the others at random: a few at the start of a body, the rest after a random
        // delay.
        let aimed = match run {
            0 => Some((1, 100)),
            1 => Some((2, 3)),
            _ => random.random_bool(0.4).then_some((random.random_range(1..=4), 3)),
        };
        let lines = match aimed {
            Some((body, pause_ms)) => {
                let mut lines = loader.until_body(body);
                std::thread::sleep(Duration::from_millis(random.random_range(0..pause_ms)));
                lines.extend(loader.kill());
                lines
            }
            None => {
                std::thread::sleep(Duration::from_millis(random.random_range(50..2000)));
                loader.kill()
            }
        };
        kills.count(&lines);
        during_writes += usize::from(writer.running() && writer.added_between(started, Instant::now()) > 0);
    }
    let added = writer.finish();
    assert_eq!(added.len(), 150);
    // Every file is older than the settle time (1 s) now: a run gets the rest, the next nothing.
    std::thread::sleep(Duration::from_secs(2));
    for run in ["last", "after the last"] {
        let (code, lines, stderr) = load_once(&served, &db, &token);
        assert_eq!(code, 0, "the {run} run: {lines:?}\n{stderr}");
        assert!(lines.last().is_some_and(|l| l.starts_with(COMMITTED)), "the {run} run: {lines:?}");
        if run == "after the last" {
            assert_eq!(lines.last().unwrap(), "committed 0 records", "nothing new is left");
        }
    }

    let (records, cursor) = stored(&db);
    let expected = expected_records(&root);
    assert!(expected.len() > 90_000, "{} records", expected.len());
    assert_same_records(&records, &expected, "the loader's SQLite against DuckDB over the files");
    println!(
        "10 kills ({} before the first body, {} inside a body before its commit, {} after a commit; \
         {} runs committed before their kill), {during_writes} while the writer added files; {} records",
        kills.before_first_body,
        kills.mid_body,
        kills.after_commit,
        kills.committing_runs,
        expected.len()
    );
    assert!(kills.mid_body >= 1 && kills.committing_runs >= 1, "{kills:?}");
    assert!(during_writes >= 1, "no run while the writer added files");

    // A refused call (an unknown token) and a broken chain (a delivered file deleted): the
    // loader stops, says why, and leaves the database as it was.
    let (code, _, stderr) = load_once(&served, &db, "not-a-token");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("HTTP 401") || stderr.contains("HTTP 403"), "{stderr}");
    let deleted = delivered_file(&root, 0);
    std::fs::remove_file(&deleted).unwrap();
    let (code, _, stderr) = load_once(&served, &db, &token);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("HTTP 409") && stderr.contains("cursor=start&date_since="), "{stderr}");
    assert!(!stderr.contains(&token), "the token in the loader's message: {stderr}");
    assert_eq!(stored(&db), (records, cursor), "the database changed on a failed call");
}

/// The loader against a server that prepares every export (`--prepare always`, each first
/// request answered 202 with `Retry-After`): it asks again until the export is ready, and its
/// runs between a writer's rounds hold exactly DuckDB's records.
#[test]
fn the_loader_waits_for_prepared_exports_and_stays_exact() {
    let ChainFolder { dir: folder, root, keys } = ChainFolder::new(900, 7);
    let staging = staging();
    let (spool, log) = (folder.path().join("spool"), folder.path().join("serve.log"));
    let (keys_flag, spool_flag) = (keys.display().to_string(), spool.display().to_string());
    let flags = ["--cursor-key-file", &keys_flag, "--cursor-settle", "1s", "--spool", &spool_flag];
    let flags = [&flags[..], &common::PREPARE_ALWAYS_AT_ONCE].concat();
    let served =
        common::serve_with(&root, &flags, std::process::Stdio::from(std::fs::File::create(&log).unwrap()));
    let db = folder.path().join("errors.sqlite");
    for seed in 61..64 {
        let (code, lines, stderr) = load_once(&served, &db, &served.token);
        assert_eq!(code, 0, "{lines:?}\n{stderr}");
        Writer::spawn(staging.path(), &root.display().to_string(), 1, seed, &[]).finish();
        std::thread::sleep(Duration::from_secs(2));
    }
    let (code, lines, stderr) = load_once(&served, &db, &served.token);
    assert_eq!(code, 0, "{lines:?}\n{stderr}");
    assert_same_records(&stored(&db).0, &expected_records(&root), "the loader over prepared exports");
    let jobs = std::fs::read_to_string(&log).unwrap().matches("preparing an export").count();
    assert_eq!(jobs, 4, "one prepared job per run");
}
