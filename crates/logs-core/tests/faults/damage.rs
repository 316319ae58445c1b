//! Damaged copies of a Parquet file, made from its bytes, and a way to tell how an export
//! ended.
//!
//! A Parquet file is `PAR1`, the column chunks, the footer (Thrift metadata), the footer's
//! length (4 bytes, little-endian) and `PAR1` again. The engine reads every selected file's
//! footer before it exports a row, so any damage that makes the footer unreadable must fail
//! the export naming the file, or be skipped and counted with `skip_unavailable_shards=true`.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use logs_core::{Engine, Error, ExportRequest, ExportStream};

use crate::support::{Row, batch_rows};

/// Where the footer starts, and its length.
pub fn footer(bytes: &[u8]) -> (usize, usize) {
    let n = bytes.len();
    assert!(n >= 12 && &bytes[n - 4..] == b"PAR1", "not a Parquet file");
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    (n - 8 - len, len)
}

/// Copies of `original` (a valid Parquet file) whose footer cannot be read: truncated at
/// several points, inside the data and inside the footer, and files that only look like
/// Parquet. (A zero-byte file and one holding `PAR1` and text are covered by
/// `tests/export.rs`.)
pub fn unreadable_variants(original: &[u8]) -> Vec<(String, Vec<u8>)> {
    let n = original.len();
    let (start, len) = footer(original);
    let cut = |at: usize, what: &str| (format!("cut at byte {at} of {n} ({what})"), original[..at].to_vec());
    let mut variants = vec![
        cut(1, "inside the leading magic"),
        cut(4, "right after the leading magic"),
        cut(100, "inside the first column chunk"),
        cut(start / 2, "in the middle of the data"),
        cut(start, "right before the footer"),
        cut(start + len / 2, "in the middle of the footer"),
        cut(n - 8, "right after the footer"),
        cut(n - 6, "inside the footer length"),
        cut(n - 4, "before the trailing magic"),
        cut(n - 2, "inside the trailing magic"),
    ];
    let mut longer_footer = original.to_vec();
    longer_footer[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
    variants.push(("a footer length beyond the file".into(), longer_footer));
    let mut shorter_footer = original.to_vec();
    shorter_footer[n - 8..n - 4].copy_from_slice(&((len / 2) as u32).to_le_bytes());
    variants.push(("a footer length half the real one".into(), shorter_footer));
    let mut no_magic = original.to_vec();
    no_magic[n - 4..].copy_from_slice(b"PAR0");
    variants.push(("the trailing magic overwritten".into(), no_magic));
    let mut zeroed = original.to_vec();
    zeroed[start..n - 8].fill(0);
    variants.push(("the footer zeroed".into(), zeroed));
    variants.push(("CSV text named .parquet".into(), b"error_id,os_name\n1,ios\n2,android\n".to_vec()));
    variants.push(("only the magic".into(), b"PAR1".to_vec()));
    variants.push(("the magic at both ends and a zero-length footer".into(), b"PAR1\0\0\0\0PAR1".to_vec()));
    let mut gzip_like = vec![0x1f, 0x8b, 0x08, 0x00];
    gzip_like.extend(std::iter::repeat_n(0xA5, 4096));
    variants.push(("binary noise named .parquet".into(), gzip_like));
    variants
}

/// A copy of `original` whose footer still parses but whose embedded Arrow schema (the
/// `ARROW:schema` key-value entry that arrow-rs writers add) is not valid base64.
pub fn with_corrupt_arrow_schema(original: &[u8]) -> Vec<u8> {
    let (start, _) = footer(original);
    let key = b"ARROW:schema";
    let at =
        original[start..].windows(key.len()).position(|w| w == key).expect("an ARROW:schema entry") + start;
    // The value follows the key: a Thrift field header, a varint length, then base64 text.
    let value = (at + key.len()..original.len())
        .find(|&i| original[i..i + 8].iter().all(|b| b.is_ascii_alphanumeric() || *b == b'/' || *b == b'+'))
        .expect("the base64 value");
    let mut bytes = original.to_vec();
    bytes[value + 16] = 0x1b;
    bytes
}

/// How an export ended.
#[derive(Debug)]
pub enum Outcome {
    /// `Engine::export` refused it: nothing was exported.
    Refused(Error),
    /// The stream failed after `rows` rows.
    Failed { rows: Vec<Row>, error: Error },
    /// The stream ended; every row is here.
    Completed { rows: Vec<Row>, skipped: Vec<std::path::PathBuf>, selected: Vec<std::path::PathBuf> },
}

impl Outcome {
    /// The error, if the export did not complete.
    pub fn error(&self) -> Option<&Error> {
        match self {
            Outcome::Refused(e) | Outcome::Failed { error: e, .. } => Some(e),
            Outcome::Completed { .. } => None,
        }
    }

    /// The rows of a completed export, sorted; panics with the error otherwise.
    #[track_caller]
    pub fn completed(self) -> Vec<Row> {
        match self {
            Outcome::Completed { mut rows, .. } => {
                rows.sort();
                rows
            }
            other => panic!("expected a complete export, got {other:?}"),
        }
    }
}

/// Runs `request` to its end, calling `meanwhile` once the export has started (its footers
/// read and its plan made) and again after each batch with the number of batches so far.
/// Bounded in time: a hang fails the test.
pub async fn run(
    engine: &Engine,
    request: &ExportRequest,
    mut meanwhile: impl FnMut(&ExportStream, usize),
) -> Outcome {
    bounded(async {
        let mut export = match engine.export(request).await {
            Ok(export) => export,
            Err(e) => return Outcome::Refused(e),
        };
        meanwhile(&export, 0);
        let mut rows = Vec::new();
        let mut batches = 0;
        while let Some(batch) = export.next().await {
            match batch {
                Ok(batch) => rows.extend(batch_rows(&batch)),
                Err(error) => return Outcome::Failed { rows, error },
            }
            batches += 1;
            meanwhile(&export, batches);
        }
        let selection = export.selection();
        Outcome::Completed {
            rows,
            skipped: selection.skipped.iter().map(|s| PathBuf::from(&s.name)).collect(),
            selected: selection.files.iter().map(|f| PathBuf::from(&f.name)).collect(),
        }
    })
    .await
}

/// `future`, or a test failure after 20 s: no fault may make an export hang.
pub async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("the export neither ended nor failed in 20 s")
}

/// Checks that `error` is a storage error that names `path` (in `path` or in its message).
#[track_caller]
pub fn assert_names(error: &Error, path: &std::path::Path) {
    assert!(matches!(error, Error::Storage { .. }), "a storage error, not {error:?}");
    let text = error.to_string();
    assert!(text.contains(&path.display().to_string()), "the error must name {}: {text}", path.display());
}
