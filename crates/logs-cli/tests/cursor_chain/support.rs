//! What the cursor chain tests share: datasets dated around today (a chain lists only date
//! folders within its maximum lateness of today), a staging folder for the writer, the writer
//! as a child process, a chain's calls over HTTP, and DuckDB's records as the oracle.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::NaiveDate;

use crate::common::{Served, logs_command, serve_env};

/// The application the chains export, and the fields they ask for.
pub const APP: &str = "1001";
pub const FIELDS: &str = "error_id,error_datetime,error_name,os_name,city,mcc,service_device_id";
/// Days of every dataset, from [`first_day`] (today is the last).
pub const DAYS: u32 = 13;
/// The variable that holds the writer's arguments in its child process, one per line.
pub const WRITER_ARGS: &str = "LOGS_TEST_DATASET_WRITER_ARGS";
/// Two cursor keys (at least 32 characters each).
pub const OLD_KEY: &str = "old-cursor-key-0123456789abcdef0123456789abcdef";
pub const NEW_KEY: &str = "new-cursor-key-fedcba9876543210fedcba9876543210";

/// Today (UTC) when the tests began: fixed for the whole run, so that a test running across
/// midnight asks for the dates it wrote (the servers' windows are far wider than the datasets).
pub fn today() -> NaiveDate {
    static TODAY: std::sync::OnceLock<NaiveDate> = std::sync::OnceLock::new();
    *TODAY.get_or_init(|| chrono::Utc::now().date_naive())
}

/// The first day of every dataset: twelve days ago.
pub fn first_day() -> NaiveDate {
    today() - chrono::Days::new(u64::from(DAYS) - 1)
}

/// The chains' `date_since`: nine days ago, so that the three oldest date folders (which the
/// writer adds to as well) are outside every chain.
pub fn since() -> NaiveDate {
    today() - chrono::Days::new(9)
}

/// `logs generate` of `rows` records over [`DAYS`] days from `start` into `out` (a folder or
/// an s3:// URL, with `env`).
pub fn generate(out: &OsStr, rows: u64, start: NaiveDate, seed: u64, env: &[(&str, String)]) {
    let output = logs_command()
        .args(["generate", "--threads", "1", "--rows", &rows.to_string(), "--days", &DAYS.to_string()])
        .args(["--start", &start.to_string(), "--seed", &seed.to_string(), "--out"])
        .arg(out)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(output.status.success(), "logs generate: {}", String::from_utf8_lossy(&output.stderr));
}

/// A staging folder for the writer: three generated datasets (other seeds and first days than
/// the chains' initial ones, the last reaching eight days past today: new date folders), their
/// files side by side in one layout.
pub fn staging() -> tempfile::TempDir {
    let staging = tempfile::tempdir().unwrap();
    for (seed, offset, rows) in [(21u64, 0u64, 1200u64), (22, 4, 900), (23, 8, 600)] {
        let set = staging.path().join(format!(".set{seed}"));
        generate(set.as_os_str(), rows, first_day() + chrono::Days::new(offset), seed, &[]);
        for file in logs_testkit::writer::staged_files(&set).unwrap() {
            let to = staging.path().join(file.parent().unwrap());
            std::fs::create_dir_all(&to).unwrap();
            let name = format!("s{seed}-{}", file.file_name().unwrap().to_string_lossy());
            std::fs::rename(set.join(&file), to.join(name)).unwrap();
        }
        std::fs::remove_dir_all(&set).unwrap();
    }
    staging
}

/// A temporary folder with a generated dataset of `rows` records in `data/` (seed `seed`, from
/// [`first_day`]) and a key file `keys` holding [`OLD_KEY`].
pub struct ChainFolder {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub keys: PathBuf,
}

impl ChainFolder {
    pub fn new(rows: u64, seed: u64) -> ChainFolder {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        generate(root.as_os_str(), rows, first_day(), seed, &[]);
        let keys = dir.path().join("keys");
        write_keys(&keys, &[OLD_KEY]);
        ChainFolder { dir, root, keys }
    }
}

/// The body of each chain test binary's `dataset_writer_child`: the writer, with the arguments
/// [`Writer::spawn`] put in [`WRITER_ARGS`] (nothing without them).
pub fn run_writer_child() {
    let Ok(args) = std::env::var(WRITER_ARGS) else { return };
    let args = std::iter::once("dataset-writer").chain(args.lines());
    let options = <logs_testkit::writer::WriterOptions as clap::Parser>::parse_from(args);
    logs_testkit::writer::run(&options, &mut std::io::stdout().lock()).unwrap();
}

/// A key file holding `keys`, one per line, the first signing.
pub fn write_keys(path: &Path, keys: &[&str]) {
    std::fs::write(path, format!("# cursor keys\n{}\n", keys.join("\n"))).unwrap();
}

/// `logs serve` over `data` with the chain flags: `--cursor-key-file keys`, `--cursor-settle
/// settle`.
pub fn serve_chain(data: &OsStr, keys: &Path, settle: &str, env: &[(&str, String)]) -> Served {
    let keys = keys.display().to_string();
    serve_env(data, &["--cursor-key-file", &keys, "--cursor-settle", settle], Stdio::null(), env)
}

/// The writer in a child process (this test binary again, running only `dataset_writer_child`,
/// which runs `logs_testkit::writer` as the `dataset-writer` binary does), each line it prints
/// kept with when it was read.
pub struct Writer {
    child: Child,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    pub fn spawn(staging: &Path, target: &str, rounds: u32, seed: u64, env: &[(&str, String)]) -> Writer {
        let args = [
            format!("--staging={}", staging.display()),
            format!("--target={target}"),
            format!("--rounds={rounds}"),
            "--files-per-round=3".to_owned(),
            "--max-pause-ms=150".to_owned(),
            format!("--seed={seed}"),
        ];
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["dataset_writer_child", "--exact", "--ignored", "--nocapture", "-q", "--test-threads=1"])
            .env(WRITER_ARGS, args.join("\n"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the writer");
        let stdout = child.stdout.take().unwrap();
        let lines: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let kept = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                kept.lock().unwrap().push((Instant::now(), line.unwrap()));
            }
        });
        Writer { child, lines, reader: Some(reader) }
    }

    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// How many files the writer reported added from `from` to `to`.
    pub fn added_between(&self, from: Instant, to: Instant) -> usize {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|(at, line)| line.starts_with("added ") && (from..=to).contains(at)).count()
    }

    /// Waits for the writer's end; the keys it added (relative to the dataset's root).
    pub fn finish(mut self) -> Vec<String> {
        let status = self.child.wait().unwrap();
        self.reader.take().unwrap().join().unwrap();
        let lines: Vec<String> = self.lines.lock().unwrap().iter().map(|(_, l)| l.clone()).collect();
        assert!(status.success(), "the writer failed: {lines:#?}");
        let added: Vec<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("added ")?.split(' ').next().map(str::to_owned))
            .collect();
        assert!(lines.contains(&format!("done {}", added.len())), "{lines:#?}");
        added
    }
}

impl Drop for Writer {
    /// A test that fails while its writer runs stops it.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A chain of calls of application [`APP`] from [`since`], its records and cursor so far.
/// Each call goes to the server it is given, with that server's token.
pub struct Chain {
    client: reqwest::Client,
    pub cursor: String,
    /// Every record every call delivered, in order.
    pub records: Vec<Vec<String>>,
    pub calls: usize,
}

impl Chain {
    pub fn new() -> Chain {
        logs_server::install_tls_provider();
        let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
        Chain { client, cursor: "start".into(), records: Vec::new(), calls: 0 }
    }

    /// The target of a call with `cursor` and `more` parameters. `date_since` is given to
    /// start the chain and on every other call after (it may be left out or be the same).
    pub fn target(&self, cursor: &str, more: &str) -> String {
        let since = if cursor == "start" || self.calls.is_multiple_of(2) {
            format!("&date_since={}", since())
        } else {
            String::new()
        };
        format!("errors.csv?application_id={APP}&fields={FIELDS}{since}&cursor={cursor}{more}")
    }

    pub async fn get(&self, served: &Served, target: &str) -> reqwest::Response {
        let url = format!("{}/logs/v1/export/{target}", served.base);
        self.client.get(url).header("Authorization", format!("OAuth {}", served.token)).send().await.unwrap()
    }

    /// A call with `cursor`, outside the chain: its records and the next cursor. Panics
    /// unless it succeeds.
    pub async fn call_with(&self, served: &Served, cursor: &str) -> (Vec<Vec<String>>, String) {
        let target = self.target(cursor, "");
        let response = self.get(served, &target).await;
        let status = response.status();
        let next = response.headers().get("logs-cursor").map(|v| v.to_str().unwrap().to_owned());
        let body = response.bytes().await.unwrap();
        assert_eq!(status, 200, "{target}: {}", String::from_utf8_lossy(&body));
        let next = next.unwrap_or_else(|| panic!("no Logs-Cursor answering {target}"));
        (records(&body), next)
    }

    /// The chain's next call, to `served`: its records, kept.
    pub async fn call(&mut self, served: &Served) -> Vec<Vec<String>> {
        let (records, next) = self.call_with(served, &self.cursor.clone()).await;
        self.keep(&records, next);
        records
    }

    /// Keeps a call's records and moves on to its next cursor.
    pub fn keep(&mut self, records: &[Vec<String>], next: String) {
        self.cursor = next;
        self.calls += 1;
        self.records.extend(records.iter().cloned());
    }
}

/// The records of a CSV body of [`FIELDS`] (every line complete), each field as text.
pub fn records(body: &[u8]) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(body);
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(header.join(","), FIELDS);
    reader.records().map(|r| r.unwrap().iter().map(str::to_owned).collect()).collect()
}

/// The records the chain must have delivered over the files in `root`, as DuckDB reads them.
pub fn expected_records(root: &Path) -> Vec<Vec<String>> {
    let root = root.display().to_string();
    let output =
        crate::common::python::run_script("chain_rows.py", &[&root, APP, &since().to_string(), FIELDS]);
    output.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// Fails unless `got` and `expected` hold the same records, each as many times.
#[track_caller]
pub fn assert_same_records(got: &[Vec<String>], expected: &[Vec<String>], what: &str) {
    fn count(records: &[Vec<String>]) -> HashMap<&Vec<String>, i64> {
        let mut counts: HashMap<&Vec<String>, i64> = HashMap::new();
        for record in records {
            *counts.entry(record).or_default() += 1;
        }
        counts
    }
    let (got_counts, expected_counts) = (count(got), count(expected));
    let mut wrong: Vec<String> = expected_counts
        .iter()
        .map(|(record, &n)| (record, got_counts.get(record).copied().unwrap_or(0) - n))
        .chain(got_counts.iter().filter(|(r, _)| !expected_counts.contains_key(*r)).map(|(r, &n)| (r, n)))
        .filter(|(_, difference)| *difference != 0)
        .map(|(record, difference)| format!("{difference:+} × {}", record.join(",")))
        .collect();
    wrong.sort();
    assert!(
        wrong.is_empty(),
        "{what}: {} records delivered, {} expected; {} records differ (delivered − expected), the first: {:#?}",
        got.len(),
        expected.len(),
        wrong.len(),
        &wrong[..wrong.len().min(8)]
    );
}

/// An error answer: its status, and the first error's type, location and message.
pub async fn refusal(response: reqwest::Response) -> (u16, String, String, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    let error = &body["errors"][0];
    let text = |name: &str| error[name].as_str().unwrap_or("").to_owned();
    (status, text("error_type"), text("location"), text("message"))
}

/// A data file of `root` (an `application_id=APP/date=…` folder from [`since`] on), at least
/// `skip` files in, in name order: one a chain delivered.
pub fn delivered_file(root: &Path, skip: usize) -> PathBuf {
    let files: Vec<PathBuf> = logs_testkit::writer::staged_files(root)
        .unwrap()
        .into_iter()
        .filter(|f| f.starts_with(format!("application_id={APP}")))
        .filter(|f| f.to_string_lossy().into_owned() >= format!("application_id={APP}/date={}", since()))
        .collect();
    root.join(&files[skip.min(files.len() - 1)])
}
