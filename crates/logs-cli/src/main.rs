//! `logs`: export error records from a Parquet dataset, or generate one.

mod export;
mod generate;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    // Before any other thread exists. One export (or generation) per process needs one arena;
    // the service runs exports side by side, one arena per core.
    let arenas = match cli.command {
        Command::Serve(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        Command::Export(_) | Command::Generate(_) => 1,
    };
    limit_malloc_arenas(arenas);
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

/// Caps glibc's malloc at `arenas` arenas (its default is eight per core), unless
/// `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` says otherwise. With the default, the batches that
/// DataFusion's threads allocate and the encoder frees spread over many arenas, and peak RSS
/// grew with the export's size (measured on the benchmark's wide export and the same export
/// ten times as long: 167 and 268 MiB; with one arena 126 and 146–150 MiB, and no slower on
/// 2 cores). The library crates leave the host process's allocator alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn limit_malloc_arenas(arenas: usize) {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() || std::env::var_os("GLIBC_TUNABLES").is_some() {
        return;
    }
    let arenas = libc::c_int::try_from(arenas.max(1)).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` only sets a parameter of the allocator, and it is called before any
    // other thread exists. A refusal (return value 0) leaves glibc's default in place.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas(_arenas: usize) {}
