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
