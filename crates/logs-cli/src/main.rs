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
    // Before any other thread exists. One export (or generation) per process needs one arena
    // and never hands memory back; the service runs exports side by side, one arena per core,
    // and hands back what it frees beyond 64 MiB per heap.
    tune_malloc(match cli.command {
        Command::Serve(_) => MallocTuning {
            arenas: std::thread::available_parallelism().map_or(1, |n| n.get()),
            keep_freed: Some(64 << 20),
        },
        Command::Export(_) => MallocTuning { arenas: 1, keep_freed: Some(i32::MAX) },
        Command::Generate(_) => MallocTuning { arenas: 1, keep_freed: None },
    });
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

/// How glibc's malloc is set up for a command.
struct MallocTuning {
    /// At most this many arenas (glibc's default is eight per core).
    arenas: usize,
    /// Reuse freed buffers instead of handing them back to the kernel: `None` keeps glibc's
    /// defaults, `Some(n)` serves buffers up to 32 MiB from the heap and keeps up to `n`
    /// bytes free at a heap's top.
    keep_freed: Option<i32>,
}

/// Tunes glibc's malloc before any other thread exists. The library crates leave the host
/// process's allocator alone.
///
/// - Arenas: with glibc's default, the batches that DataFusion's threads allocate and the
///   encoder frees spread over many arenas, and peak RSS grew with the export's size
///   (measured on the benchmark's wide export and the same export ten times as long: 167 and
///   268 MiB; with one arena 126 and 146–150 MiB, and no slower on 2 cores). Not changed when
///   `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` is set.
/// - Freed memory: by default glibc gives buffers of 128 KiB and more (decompressed pages)
///   their own mapping and returns it when freed, and trims the heap's top, so the next page
///   of the same size faults fresh memory in again. A one-shot export keeps all of it: a
///   quarter fewer page faults and 5–9% less time on the point export, the same peak (±4 MiB).
///   The service keeps up to 64 MiB free per heap, so that most of a burst goes back: its
///   wide export over HTTP went from 0.75 to 0.69 s. Not changed when
///   `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` or `GLIBC_TUNABLES` is set.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn tune_malloc(tuning: MallocTuning) {
    let set = |name: &str| std::env::var_os(name).is_some() || std::env::var_os("GLIBC_TUNABLES").is_some();
    let mut options = Vec::new();
    if !set("MALLOC_ARENA_MAX") {
        options.push((
            libc::M_ARENA_MAX,
            libc::c_int::try_from(tuning.arenas.max(1)).unwrap_or(libc::c_int::MAX),
        ));
    }
    if let Some(kept) = tuning.keep_freed
        && !set("MALLOC_MMAP_THRESHOLD_")
        && !set("MALLOC_TRIM_THRESHOLD_")
    {
        options.push((libc::M_MMAP_THRESHOLD, 32 << 20));
        options.push((libc::M_TRIM_THRESHOLD, kept));
    }
    for (option, value) in options {
        // SAFETY: `mallopt` only sets a parameter of the allocator, and it is called before any
        // other thread exists. A refusal (return value 0) leaves glibc's default in place.
        unsafe {
            libc::mallopt(option, value);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_malloc(_tuning: MallocTuning) {}
