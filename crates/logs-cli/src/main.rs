//! `logs`: export error records from a Parquet dataset, or generate one.

mod cursor;
mod export;
mod generate;
mod oidc;
mod preallocate;
mod privacy;
mod serve;
mod store;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The allocator of the `logs` binary: jemalloc, with one arena (see [`malloc_conf`]). The
/// library crates leave the host process's allocator alone.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts (the environment variable `_RJEM_MALLOC_CONF`
/// overrides them):
/// - one arena: each thread still caches the small and medium sizes it frees, so the scan's
///   threads do not wait for each other, and batches freed by the encoder go back to the one
///   arena they came from, so the peak does not grow with the export's length;
/// - huge pages asked for (`madvise`) on the memory it maps, where the system gives them only
///   on request (where it gives them always, they come anyway): an export faults in its
///   column chunks' buffers and decompressed pages 2 MiB at a time rather than 4 KiB.
///
/// The measures behind them are in docs/decisions.md, "Allocator" and "Huge pages".
#[cfg(not(target_env = "msvc"))]
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &[u8; MALLOC_CONF.len()] = MALLOC_CONF;

/// The settings as the C string jemalloc reads through `malloc_conf`: a reference to a sized
/// array is one pointer, as C's `const char *` is, and immutable, so the static needs no
/// `unsafe impl Sync`.
#[cfg(not(target_env = "msvc"))]
const MALLOC_CONF: &[u8; 21] = b"narenas:1,thp:always\0";

#[derive(Debug, Parser)]
#[command(
    name = "logs",
    version,
    about = "Export mobile-app error records from partitioned Parquet as CSV or JSON"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Export error records, as the HTTP API's `GET /logs/v1/export/errors.{csv|json}` would.
    Export(Box<export::ExportArgs>),
    /// Generate a deterministic synthetic dataset in the layout the engine reads.
    Generate(generate::GenerateArgs),
    /// Serve the HTTP API (`GET /logs/v1/export/errors.{csv|json}`) behind OAuth authorization.
    Serve(Box<serve::ServeArgs>),
}

/// How a command failed: the exit status says whose fault it was.
#[derive(Debug)]
pub enum Failure {
    /// Bad input (exit status 2).
    Usage(String),
    /// Anything else (exit status 1).
    Other(anyhow::Error),
    /// The reader of our output went away (`logs export … | head`): exit quietly.
    BrokenPipe,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Failure {
        let e = e.into();
        if is_broken_pipe(&e) { Failure::BrokenPipe } else { Failure::Other(e) }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Export(args) => export::run(*args),
        Command::Generate(args) => generate::run(args),
        Command::Serve(args) => serve::run(*args),
    };
    match result {
        Ok(()) | Err(Failure::BrokenPipe) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Other(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
