//! Generates a dataset and reports its size and the time taken.
//!
//! `cargo run -p logs-generate --example gen -- <out> [key=value ...]` with keys rows, apps,
//! days, seed, threads, compression, sort_by, row_group_rows, max_file_rows, late_fraction.

use std::time::Instant;

use logs_generate::{GenerateOptions, generate, parse_apps};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut options = GenerateOptions::new(args.next().ok_or("usage: gen <out> [key=value ...]")?);
    for arg in args {
        let (key, value) = arg.split_once('=').ok_or_else(|| format!("`{arg}` is not key=value"))?;
        match key {
            "rows" => options.rows = value.parse()?,
            "apps" => options.apps = parse_apps(value)?,
            "days" => options.days = value.parse()?,
            "seed" => options.seed = value.parse()?,
            "threads" => options.threads = value.parse()?,
            "compression" => options.compression = value.parse()?,
            "sort_by" => options.sort_by = value.parse()?,
            "row_group_rows" => options.row_group_rows = value.parse()?,
            "max_file_rows" => options.max_file_rows = value.parse()?,
            "late_fraction" => options.late_fraction = value.parse()?,
            _ => return Err(format!("unknown key `{key}`").into()),
        }
    }
    let started = Instant::now();
    let summary = generate(&options)?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{} rows, {} files, {} bytes ({:.1} MiB per 100k rows) in {seconds:.2} s: {:.0} rows/s, {} threads, {}",
        summary.rows,
        summary.files,
        summary.bytes,
        summary.bytes as f64 / summary.rows.max(1) as f64 * 100_000.0 / 1_048_576.0,
        summary.rows as f64 / seconds,
        options.threads,
        options.compression,
    );
    Ok(())
}
