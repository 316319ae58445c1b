//! The cursor chains' flags, shared by `export` and `serve`, and `export`'s cursor file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use logs_core::{CursorKeys, CursorSettings};

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct CursorArgs {
    /// The keys that sign and check cursors (`cursor=`): one per line, at least 32
    /// characters each (`openssl rand -hex 32`); the first signs, every one is accepted.
    /// Replicas share it. Without it `serve` makes a key at start (chains then end with a
    /// restart) and `export` uses a public key (cursors checked for damage only).
    #[arg(long, env = "LOGS_CURSOR_KEY_FILE", value_name = "FILE")]
    pub(crate) cursor_key_file: Option<PathBuf>,
    /// How old an object's modification time must be before a chain delivers it: longer than
    /// an upload takes, plus the clock differences between writers, store and service.
    #[arg(long, env = "LOGS_CURSOR_SETTLE", default_value = "5m", value_parser = crate::units::parse_duration)]
    pub(crate) cursor_settle: Duration,
    /// After a chain's first call, only date folders at most this many days before today
    /// (UTC) are listed: the latest a record may arrive (at most 183, half a year).
    #[arg(long, env = "LOGS_CURSOR_MAX_LATENESS_DAYS", default_value_t = 31,
          value_parser = clap::value_parser!(u16).range(1..=183))]
    pub(crate) cursor_max_lateness_days: u16,
}

/// Which key a process uses when no key file is given.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WithoutKeyFile {
    /// A random key made now (`serve`).
    Generated,
    /// The public key (`export`).
    Public,
}

impl CursorArgs {
    /// The settings of these flags. A key file that cannot be read is a failure (exit 1); one
    /// that does not hold keys as it should, bad usage (exit 2). No error quotes a key.
    pub(crate) fn settings(&self, without: WithoutKeyFile) -> Result<CursorSettings, Failure> {
        let keys = match &self.cursor_key_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("cannot read the cursor keys (--cursor-key-file {})", path.display())
                })?;
                CursorKeys::from_text(&text)
                    .map_err(|e| Failure::Usage(format!("--cursor-key-file {}: {e}", path.display())))?
            }
            None => match without {
                WithoutKeyFile::Generated => CursorKeys::generated(),
                WithoutKeyFile::Public => CursorKeys::public(),
            },
        };
        Ok(CursorSettings {
            keys,
            settle: self.cursor_settle,
            max_lateness_days: self.cursor_max_lateness_days,
        })
    }
}

/// The cursor in `path`, or `start` when there is no such file.
pub(crate) fn read_cursor_file(path: &Path) -> Result<String, Failure> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let cursor = text.trim();
            if cursor.is_empty() {
                return Err(Failure::Usage(format!(
                    "--cursor-file {}: the file is empty; delete it to start a new chain",
                    path.display()
                )));
            }
            Ok(cursor.to_owned())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok("start".to_owned()),
        Err(e) => Err(Failure::Other(
            anyhow::Error::new(e).context(format!("cannot read --cursor-file {}", path.display())),
        )),
    }
}

/// Replaces `path` with `cursor` atomically: written to a temporary file beside it, flushed
/// to disk, then renamed over it.
pub(crate) fn write_cursor_file(path: &Path, cursor: &str) -> Result<(), Failure> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let write = || -> std::io::Result<()> {
        let mut file = tempfile::Builder::new().prefix(".logs-cursor-").tempfile_in(folder)?;
        file.write_all(cursor.as_bytes())?;
        file.write_all(b"\n")?;
        file.as_file().sync_all()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    write().with_context(|| format!("cannot write --cursor-file {}", path.display()))?;
    Ok(())
}
