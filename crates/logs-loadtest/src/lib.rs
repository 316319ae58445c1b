//! `logs-loadtest`: many concurrent clients against the logs-export HTTP service, on loopback
//! only, bounded in requests and in time; every answer is checked. The binary parses [`Args`]
//! and calls [`main`]; the replica tests call it the same way, pointed at a load balancer.
//!
//! By default it generates a dataset, starts the service in this process on 127.0.0.1:0 and
//! loads it; `--url` loads a running `logs serve` instead (a loopback address only; `--data`
//! must be the dataset it serves, `--token` its tokens). The clients mix small and large
//! exports, gzip, slow readers, clients that go away mid-export, bad tokens, bad parameters and
//! the applications list. It prints requests/s, latency, statuses, bytes, the server's peak
//! memory and counters, and exits 1 if a check failed:
//!
//! - no 5xx but `503 server_busy` (the global limit), and every 429 and 503 with `Retry-After`;
//! - every answer is the one expected for its request (its `x-request-id` echoed, its status
//!   and error), and every 200 export body complete and equal to the export encoded directly
//!   from the engine (compared as a multiset of records, so any row order passes);
//! - the server's peak resident memory within its memory before the load, plus the engine's
//!   pool, plus `--rss-overhead`;
//! - peak encoded bytes waiting for connections within `max_exports × (chunk_queue + 2) × 1 MiB`
//!   (slow readers do not grow memory), and no export running or failed after the run.

mod client;
mod digest;
mod report;
mod target;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use logs_core::{Engine, EngineConfig};
use logs_server::Settings;

use crate::client::{Plan, run_client};
use crate::report::{Bounds, Run, mib};
use crate::target::{InProcess, Remote, Target};

/// The command line of `logs-loadtest`.
#[derive(Debug, Parser)]
#[command(
    name = "logs-loadtest",
    version,
    about = "Load test of the logs-export HTTP service (loopback only)"
)]
pub struct Args {
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// The most requests in all.
    #[arg(long, default_value_t = 5000)]
    requests: u64,
    /// The longest the clients go on issuing requests, in seconds (requests under way finish).
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// The longest one request may take, body included, in seconds.
    #[arg(long, default_value_t = 60)]
    request_timeout: u64,
    /// Seed of the clients' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// The dataset: served by the in-process server, and the source of the expected bodies.
    /// Without it a dataset of --rows rows over --days days is generated in a temporary folder.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Rows of the generated dataset (50 000: the large exports are about 70 MB).
    #[arg(long, default_value_t = 50_000)]
    rows: u64,
    /// Days of the generated dataset (from 2026-10-01).
    #[arg(long, default_value_t = 7)]
    days: u32,

    /// Load a running server at this URL (loopback only) instead of one in this process.
    #[arg(long, requires_all = ["token", "data"])]
    url: Option<String>,
    /// With --url: a token with service:read on applications 1001–1003 (repeat for more).
    #[arg(long)]
    token: Vec<String>,
    /// With --url: the server's admin listener, for its counters (`http://127.0.0.1:9090`);
    /// repeated for replicas behind a balancer, whose counters are added up.
    #[arg(long)]
    admin_url: Vec<String>,
    /// With --url: the server's process id, for its memory; repeated for replicas, the largest
    /// peak of them is held to the bound (from the largest memory before the load).
    #[arg(long)]
    pid: Vec<u32>,

    /// Tokens of the in-process server; client i uses token i mod N. With more clients per
    /// token than --max-exports-per-token some get 429; with more exports than --max-exports, 503.
    #[arg(long, default_value_t = 6)]
    tokens: usize,
    /// The server's --max-exports (in-process: set; with --url: the server's, for the bound).
    #[arg(long, default_value_t = 8)]
    max_exports: usize,
    /// The server's --max-exports-per-token.
    #[arg(long, default_value_t = 2)]
    max_exports_per_token: usize,
    /// The server's --chunk-queue.
    #[arg(long, default_value_t = 4)]
    chunk_queue: usize,
    /// The server's --memory-limit in MiB (the engine's pool).
    #[arg(long, default_value_t = 512)]
    memory_limit_mib: u64,
    /// The server's --target-partitions (0: one per core).
    #[arg(long, default_value_t = 0)]
    target_partitions: usize,
    /// What the server's peak memory may exceed its memory before the load plus the pool by,
    /// in MiB.
    #[arg(long, default_value_t = 256)]
    rss_overhead_mib: u64,
}

/// Runs the load test; the exit status: 0 every check passed, 1 a check failed, 2 bad
/// arguments or a failure to run.
pub fn main(args: Args) -> ExitCode {
    if args.clients == 0 || args.requests == 0 || args.duration == 0 {
        eprintln!("logs-loadtest: --clients, --requests and --duration must be above 0");
        return ExitCode::from(2);
    }
    match run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("logs-loadtest: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs the load test and prints its report; true if every check passed.
pub fn run(args: Args) -> anyhow::Result<bool> {
    let clients_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client")
        .enable_all()
        .build()?;

    let generated;
    let data = match &args.data {
        Some(data) => data.clone(),
        None => {
            generated = tempfile::tempdir()?;
            let started = Instant::now();
            let mut options = logs_generate::GenerateOptions::new(generated.path());
            options.rows = args.rows;
            options.days = args.days;
            options.threads = 2;
            logs_generate::generate(&options).context("generating the dataset")?;
            println!(
                "dataset         {} rows over {} days generated in {:.1} s",
                args.rows,
                args.days,
                started.elapsed().as_secs_f64()
            );
            generated.path().to_path_buf()
        }
    };

    let memory_limit = args.memory_limit_mib << 20;
    let config = EngineConfig {
        target_partitions: args.target_partitions,
        memory_limit: memory_limit as usize,
        batch_size: logs_server::SERVICE_BATCH_SIZE,
        ..EngineConfig::default()
    };
    let (target, tokens) = match &args.url {
        Some(url) => {
            let base = target::loopback_base(url)?;
            let admins =
                args.admin_url.iter().map(|url| target::loopback_base(url)).collect::<Result<_, _>>()?;
            (Target::Remote(Remote { base, admins, pids: args.pid.clone() }), args.token.clone())
        }
        None => {
            let tokens: Vec<String> =
                (0..args.tokens.max(1)).map(|i| format!("load-token-{i}-{:016x}", args.seed)).collect();
            let settings = Settings {
                max_exports: args.max_exports,
                max_exports_per_token: args.max_exports_per_token,
                chunk_queue: args.chunk_queue,
                // The load's bad tokens all come from one address.
                auth_failure_limit: 0,
                ..Settings::default()
            };
            let server = InProcess::start(&data, config.clone(), settings, &tokens)?;
            (Target::InProcess(server), tokens)
        }
    };
    if tokens.is_empty() {
        bail!("--url needs at least one --token");
    }

    let started = Instant::now();
    let exports = clients_runtime.block_on(async {
        let engine = Engine::open(&data, EngineConfig { memory_limit: 1 << 30, ..config.clone() })?;
        workload::exports(&engine).await
    })?;
    let sizes: Vec<String> =
        exports.iter().map(|e| format!("{} {}", e.name, mib(e.expected.bytes))).collect();
    println!("expected bodies {} in {:.1} s", sizes.join(", "), started.elapsed().as_secs_f64());

    logs_server::install_tls_provider();
    let http = reqwest::Client::builder().pool_max_idle_per_host(args.clients).build()?;
    let peak_reset = target.reset_peak_memory();
    let rss_before = target.memory().map_or(0, |(rss, _)| rss);
    println!(
        "target          {} ({}); {} clients, at most {} requests or {} s (a dev build unless built with --release)",
        target.base(),
        if args.url.is_some() { "running server" } else { "in this process" },
        args.clients,
        args.requests,
        args.duration
    );

    let plan = Arc::new(Plan {
        base: target.base(),
        tokens,
        exports,
        bad_parameters: workload::bad_parameters(),
        bad_tokens: workload::bad_tokens(),
        max_requests: args.requests,
        deadline: Instant::now() + Duration::from_secs(args.duration),
        request_timeout: Duration::from_secs(args.request_timeout),
        issued: AtomicU64::new(0),
    });
    let (outcomes, elapsed, counts) = clients_runtime.block_on(async {
        let load_started = Instant::now();
        let tasks: Vec<_> = (0..args.clients)
            .map(|i| tokio::spawn(run_client(plan.clone(), http.clone(), i, args.seed)))
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.extend(task.await?);
        }
        let elapsed = load_started.elapsed();
        // Give the server a moment to notice the last dropped connections.
        let counts = target::wait_until_idle(&target, &http, Duration::from_secs(30)).await;
        anyhow::Ok((outcomes, elapsed, counts))
    })?;

    let run = Run { outcomes, elapsed, memory: target.memory(), peak_reset, counts };
    let bounds = Bounds {
        rss_before,
        pool: memory_limit,
        overhead: args.rss_overhead_mib << 20,
        buffered: (args.max_exports * (args.chunk_queue + 2)) as u64 * (1 << 20),
        max_exports: args.max_exports,
        chunk_queue: args.chunk_queue,
    };
    let (text, violations) = report::report(&run, &bounds);
    print!("{text}");
    target.stop()?;
    if violations.is_empty() {
        println!(
            "checks          passed: no 5xx but 503 server_busy, every 429/503 with Retry-After, every answer \
             the expected one, every body complete and equal, memory and buffers within bounds"
        );
        return Ok(true);
    }
    println!("checks          FAILED: {} violations", violations.len());
    for v in violations.iter().take(20) {
        println!("  - {v}");
    }
    if violations.len() > 20 {
        println!("  … and {} more", violations.len() - 20);
    }
    Ok(false)
}
