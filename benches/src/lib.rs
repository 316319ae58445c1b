//! Shared helpers for the benchmarks: a generated dataset that is made once and reused.

use std::path::{Path, PathBuf};

/// The folder of a generated dataset of `rows` rows (3 applications, 30 days from
/// 2026-10-01), made with `logs_generate` on first use under `benches/data/`.
pub fn dataset(rows: u64) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data").join(format!("rows-{rows}"));
    if !dir.join("application_id=1001").is_dir() {
        let staging = dir.with_extension("tmp");
        let _ = std::fs::remove_dir_all(&staging);
        let mut options = logs_generate::GenerateOptions::new(&staging);
        options.rows = rows;
        logs_generate::generate(&options).expect("generate the benchmark dataset");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&staging, &dir).expect("move the benchmark dataset into place");
    }
    dir
}
