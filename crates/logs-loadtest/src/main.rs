//! `logs-loadtest`: see the library's documentation (`crates/logs-loadtest/src/lib.rs`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    logs_loadtest::main(logs_loadtest::Args::parse())
}
