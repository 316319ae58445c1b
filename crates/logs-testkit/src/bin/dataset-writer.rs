//! `dataset-writer`: adds the Parquet files of a staging folder to a dataset (a local folder
//! or `s3://bucket/prefix`) one at a time, at random short intervals, printing each file it
//! added (see `logs_testkit::writer`).
//!
//! ```text
//! dataset-writer --staging DIR --target LOCATION [--rounds 20] [--files-per-round 3]
//!     [--max-pause-ms 150] [--seed 1]
//! ```

use std::process::ExitCode;

use clap::Parser;
use logs_testkit::writer::{WriterOptions, run};

fn main() -> ExitCode {
    let options = WriterOptions::parse();
    match run(&options, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dataset-writer: {e}");
            ExitCode::FAILURE
        }
    }
}
