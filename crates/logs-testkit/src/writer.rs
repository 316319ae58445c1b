//! A writer of a live dataset, for the cursor chain tests (`dataset-writer`): it copies Parquet
//! files of a staging folder (made beforehand with `logs generate`) into a dataset one at a
//! time, at random short intervals, as the producers of a real dataset add late and fresh
//! objects while exports run.
//!
//! Each staged file `application_id=A/date=D/<name>.parquet` is added to the same date folder
//! of the target under a new, unique name, so that its records keep the dates of their folder
//! (old folders get late arrivals, new folders fresh ones); a staged file may be added more
//! than once (the same records twice, which an exact export must deliver twice).
//!
//! - A local folder gets each file written under a temporary name starting with `.` (which
//!   readers pass over) and then renamed, so that no reader ever sees half a file.
//! - An `s3://bucket/prefix` location gets one PUT per file, through `object_store` with the
//!   standard `AWS_*` variables.
//!
//! Every object gets a fresh modification time: the writer writes the bytes, it never copies
//! a file's metadata. It prints `added <key> <staged file>` for each file once it is in place
//! (the key relative to the dataset's root), `round <n>` after each round, and `done <files>`
//! at the end, each line flushed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

/// What to write, where, and how often.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "dataset-writer", about = "Adds staged Parquet files to a dataset, one at a time")]
pub struct WriterOptions {
    /// The staging folder: `application_id=A/date=D/*.parquet` files to add.
    #[arg(long)]
    pub staging: PathBuf,
    /// The dataset: a local folder or `s3://bucket/prefix`.
    #[arg(long)]
    pub target: String,
    /// How many rounds.
    #[arg(long, default_value_t = 20)]
    pub rounds: u32,
    /// Files added per round.
    #[arg(long, default_value_t = 3)]
    pub files_per_round: u32,
    /// The longest pause before each file, in milliseconds (each pause is random, from 0).
    #[arg(long, default_value_t = 150)]
    pub max_pause_ms: u64,
    /// Seed of the choices and pauses; part of every name written, so that two writers with
    /// different seeds never write the same name.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Where the files go.
enum Target {
    Folder(PathBuf),
    Bucket { store: Arc<dyn ObjectStore>, prefix: String, runtime: tokio::runtime::Runtime },
}

impl Target {
    fn open(location: &str) -> Result<Target, String> {
        let Some(rest) = location.strip_prefix("s3://") else {
            return Ok(Target::Folder(PathBuf::from(location)));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .build()
            .map_err(|e| format!("cannot use bucket `{bucket}`: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        Ok(Target::Bucket { store: Arc::new(store), prefix: prefix.trim_matches('/').to_owned(), runtime })
    }

    /// Puts `bytes` at `key` (relative to the dataset's root), all at once for readers.
    fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), String> {
        match self {
            Target::Folder(root) => {
                let path = root.join(key);
                let folder = path.parent().expect("a key has a folder");
                std::fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
                let name = path.file_name().expect("a key has a name").to_string_lossy();
                let temporary = folder.join(format!(".{name}.tmp"));
                // A new file: its modification time is now, whatever the staged file's was.
                std::fs::write(&temporary, bytes).map_err(|e| format!("{}: {e}", temporary.display()))?;
                std::fs::rename(&temporary, &path).map_err(|e| format!("{}: {e}", path.display()))
            }
            Target::Bucket { store, prefix, runtime } => {
                let full = if prefix.is_empty() { key.to_owned() } else { format!("{prefix}/{key}") };
                let location = ObjectPath::parse(&full).map_err(|e| format!("{full}: {e}"))?;
                runtime
                    .block_on(store.put(&location, bytes.into()))
                    .map(drop)
                    .map_err(|e| format!("PUT {full}: {e}"))
            }
        }
    }
}

/// The staged files, relative to `staging`, sorted: `application_id=*/date=*/*.parquet`.
pub fn staged_files(staging: &Path) -> Result<Vec<PathBuf>, String> {
    let read = |dir: &Path| -> Result<Vec<PathBuf>, String> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .map(|entry| entry.map(|e| e.path()).map_err(|e| format!("{}: {e}", dir.display())))
            .collect::<Result<_, _>>()?;
        entries.sort();
        Ok(entries)
    };
    let named = |path: &Path, prefix: &str| {
        path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix))
    };
    let mut files = Vec::new();
    for app in read(staging)?.into_iter().filter(|p| named(p, "application_id=")) {
        for date in read(&app)?.into_iter().filter(|p| named(p, "date=")) {
            for file in read(&date)? {
                let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.ends_with(".parquet") && !name.starts_with('.') {
                    files.push(file.strip_prefix(staging).expect("below staging").to_path_buf());
                }
            }
        }
    }
    Ok(files)
}

/// Runs the writer, printing its lines to `out`.
pub fn run(options: &WriterOptions, out: &mut dyn Write) -> Result<(), String> {
    let staged = staged_files(&options.staging)?;
    if staged.is_empty() {
        return Err(format!(
            "{}: no application_id=*/date=*/*.parquet file to add",
            options.staging.display()
        ));
    }
    let target = Target::open(&options.target)?;
    let mut random = SplitMix(options.seed);
    let mut added = 0u64;
    let say = |out: &mut dyn Write, line: String| -> Result<(), String> {
        writeln!(out, "{line}").and_then(|()| out.flush()).map_err(|e| format!("stdout: {e}"))
    };
    for round in 0..options.rounds {
        for file in 0..options.files_per_round {
            std::thread::sleep(Duration::from_millis(random.below(options.max_pause_ms + 1)));
            let source = &staged[random.below(staged.len() as u64) as usize];
            let folder = source.parent().expect("a staged file has a folder");
            let name = format!("w{}-{round:03}-{file:02}.parquet", options.seed);
            let key = format!("{}/{name}", folder.to_string_lossy());
            let bytes = std::fs::read(options.staging.join(source))
                .map_err(|e| format!("{}: {e}", options.staging.join(source).display()))?;
            target.put(&key, bytes)?;
            added += 1;
            say(out, format!("added {key} {}", source.display()))?;
        }
        say(out, format!("round {}", round + 1))?;
    }
    say(out, format!("done {added}"))
}

/// SplitMix64: a small, seeded generator (the choices need no more).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number from 0 to `n - 1` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staging() -> tempfile::TempDir {
        let staging = tempfile::tempdir().unwrap();
        for (app, date, name) in
            [("1001", "2026-10-01", "a"), ("1001", "2026-10-02", "b"), ("1002", "2026-10-01", "c")]
        {
            let folder = staging.path().join(format!("application_id={app}/date={date}"));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(format!("{name}.parquet")), name.repeat(100)).unwrap();
            // Neither a hidden file nor a file of another kind is staged.
            std::fs::write(folder.join(format!(".{name}.parquet")), "x").unwrap();
            std::fs::write(folder.join(format!("{name}.txt")), "x").unwrap();
        }
        staging
    }

    #[test]
    fn adds_every_file_it_prints_with_the_staged_bytes_and_a_fresh_time() {
        let staging = staging();
        // An old modification time on every staged file: none may carry over.
        let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        for file in staged_files(staging.path()).unwrap() {
            std::fs::File::options()
                .write(true)
                .open(staging.path().join(file))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        let target = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            staging: staging.path().to_owned(),
            target: target.path().display().to_string(),
            rounds: 4,
            files_per_round: 3,
            max_pause_ms: 5,
            seed: 9,
        };
        let started = std::time::SystemTime::now() - Duration::from_secs(1);
        let mut out = Vec::new();
        run(&options, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let added: Vec<(&str, &str)> = out
            .lines()
            .filter_map(|l| l.strip_prefix("added "))
            .map(|l| l.split_once(' ').unwrap())
            .collect();
        assert_eq!(added.len(), 12, "{out}");
        assert!(
            out.lines().filter(|l| l.starts_with("round ")).count() == 4 && out.ends_with("done 12\n"),
            "{out}"
        );
        for (key, source) in &added {
            let path = target.path().join(key);
            assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(staging.path().join(source)).unwrap());
            assert_eq!(Path::new(key).parent(), Path::new(source).parent(), "the staged file's folder");
            assert!(std::fs::metadata(&path).unwrap().modified().unwrap() > started, "{key}");
        }
        // Nothing else: no temporary file left, every name distinct.
        let mut written = Vec::new();
        for file in staged_files(target.path()).unwrap() {
            written.push(file.display().to_string());
        }
        let mut keys: Vec<String> = added.iter().map(|(k, _)| k.to_string()).collect();
        keys.sort();
        assert_eq!(written, keys);
        let root = target.path().display().to_string();
        let hidden: Vec<String> =
            walk(target.path()).into_iter().filter(|p| p[root.len()..].contains("/.")).collect();
        assert!(hidden.is_empty(), "{hidden:?}");
    }

    fn walk(dir: &Path) -> Vec<String> {
        let mut all = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                all.extend(walk(&path));
            } else {
                all.push(path.display().to_string());
            }
        }
        all
    }

    #[test]
    fn a_staging_folder_without_files_is_an_error() {
        let empty = tempfile::tempdir().unwrap();
        let options = WriterOptions {
            staging: empty.path().to_owned(),
            target: "unused".into(),
            rounds: 1,
            files_per_round: 1,
            max_pause_ms: 0,
            seed: 1,
        };
        let error = run(&options, &mut Vec::new()).unwrap_err();
        assert!(error.contains("no application_id=*/date=*/*.parquet"), "{error}");
    }
}
