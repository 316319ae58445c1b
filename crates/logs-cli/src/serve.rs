//! `logs serve`: the HTTP service (see `crates/logs-server`).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use logs_core::{DatasetLocation, EngineConfig, KeptForScan};

use crate::cursor::{CursorArgs, WithoutKeyFile};
use crate::units::{parse_duration, parse_size};
use logs_server::Settings;
use logs_server::auth::{ForwardedHeader, READ_SCOPE, TrustedProxies, WRITE_SCOPE};
use logs_server::prepared::{PreparePolicy, PreparedConfig};
use logs_server::service::{
    IntrospectionFiles, Service, ServiceConfig, ServiceError, Tokens, reload_on_sighup, stop_signal,
};

use crate::Failure;
use crate::oidc::OidcArgs;
use crate::store::S3Args;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The dataset (`<root>/application_id=<id>/date=<yyyy-mm-dd>/*.parquet`, and an optional
    /// `applications.toml`): a local folder, a file:// URL or an s3://bucket/prefix URL.
    #[arg(long, env = "LOGS_DATA", default_value = "testdata/dataset", value_name = "LOCATION")]
    data: String,
    #[command(flatten)]
    cursor: CursorArgs,
    #[command(flatten)]
    s3: S3Args,
    /// The address of the API. Only a loopback address unless you say otherwise.
    #[arg(long, env = "LOGS_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The address of the admin API (Prometheus `/metrics`, `/healthz`); off when not given.
    #[arg(long, env = "LOGS_ADMIN_LISTEN")]
    admin_listen: Option<SocketAddr>,

    /// The tokens file (TOML), reloaded when it changes and on SIGHUP. Without it, without
    /// --introspection-url and without --oidc-issuer, a token is generated for this run and printed.
    #[arg(long, env = "LOGS_TOKENS")]
    tokens: Option<PathBuf>,
    /// How often the tokens file is checked for changes.
    #[arg(long, env = "LOGS_TOKENS_RELOAD_INTERVAL", default_value = "2s", value_parser = parse_duration)]
    tokens_reload_interval: Duration,

    /// The identity provider's token introspection endpoint (RFC 7662), asked about tokens
    /// the tokens file does not know. https, or http on a loopback address.
    #[arg(long, env = "LOGS_INTROSPECTION_URL", requires = "introspection_credentials")]
    introspection_url: Option<url::Url>,
    /// A TOML file with `client_id = "…"` and `client_secret = "…"` for the introspection
    /// endpoint (HTTP Basic). With --oidc-issuer and without --introspection-url, opaque
    /// tokens are introspected at the endpoint the provider's discovery document names.
    #[arg(long, env = "LOGS_INTROSPECTION_CREDENTIALS")]
    introspection_credentials: Option<PathBuf>,
    /// The longest wait for the identity provider (then 503).
    #[arg(long, env = "LOGS_INTROSPECTION_TIMEOUT", default_value = "2s", value_parser = parse_duration)]
    introspection_timeout: Duration,
    /// The most introspected tokens cached.
    #[arg(long, env = "LOGS_INTROSPECTION_CACHE_ENTRIES", default_value_t = 10_000)]
    introspection_cache_entries: usize,
    /// The longest an active token is cached (never beyond its `exp`).
    #[arg(long, env = "LOGS_INTROSPECTION_CACHE_TTL", default_value = "5m", value_parser = parse_duration)]
    introspection_cache_ttl: Duration,
    /// How long an inactive token is cached.
    #[arg(long, env = "LOGS_INTROSPECTION_NEGATIVE_TTL", default_value = "10s", value_parser = parse_duration)]
    introspection_negative_ttl: Duration,
    /// The member of the introspection answer that lists the token's applications.
    #[arg(long, env = "LOGS_INTROSPECTION_APPLICATIONS_CLAIM", default_value = "applications")]
    introspection_applications_claim: String,
    /// A TOML file granting applications by `client_id` or `sub`, for answers without the claim.
    #[arg(long, env = "LOGS_INTROSPECTION_GRANTS", requires = "introspection_credentials")]
    introspection_grants: Option<PathBuf>,
    #[command(flatten)]
    oidc: OidcArgs,

    /// 401s from one client address within --auth-failure-window after which its requests
    /// are refused (429) until the window ends; 0 turns the limit off.
    #[arg(long, env = "LOGS_AUTH_FAILURE_LIMIT", default_value_t = 20)]
    auth_failure_limit: u32,
    /// The window of --auth-failure-limit.
    #[arg(long, env = "LOGS_AUTH_FAILURE_WINDOW", default_value = "1m", value_parser = parse_duration)]
    auth_failure_window: Duration,
    /// Proxies (addresses or CIDR blocks, separated by commas) whose --forwarded-header names
    /// the client, for the failed-authentication limit and the access log.
    #[arg(long, env = "LOGS_TRUSTED_PROXIES", default_value = "", value_name = "LIST")]
    trusted_proxies: String,
    /// The header the trusted proxies write: `x-forwarded-for` or `forwarded` (RFC 7239).
    #[arg(long, env = "LOGS_FORWARDED_HEADER", default_value = "x-forwarded-for", value_name = "NAME")]
    forwarded_header: String,

    /// Exports running at once, in all (more: 503).
    #[arg(long, env = "LOGS_MAX_EXPORTS", default_value_t = 8)]
    max_exports: usize,
    /// Exports running at once with one token (more: 429).
    #[arg(long, env = "LOGS_MAX_EXPORTS_PER_TOKEN", default_value_t = 2)]
    max_exports_per_token: usize,
    /// The query engine's memory pool, shared by all exports (`512MiB`, `2GiB`, bytes).
    #[arg(long, env = "LOGS_MEMORY_LIMIT", default_value = "512MiB", value_parser = parse_size)]
    memory_limit: usize,
    /// Refuse a `limit` above this, and apply it when none is given.
    #[arg(long, env = "LOGS_MAX_LIMIT")]
    max_limit: Option<u64>,
    /// Parallel streams per query (0: one per core).
    #[arg(long, env = "LOGS_TARGET_PARTITIONS", default_value_t = 0)]
    target_partitions: usize,
    /// Rows per Arrow batch; each running export holds a few batches in memory.
    #[arg(long, env = "LOGS_BATCH_SIZE", default_value_t = logs_server::SERVICE_BATCH_SIZE,
          value_parser = crate::export::batch_size_parser())]
    batch_size: usize,
    /// The longest request target, path and query (longer: 414).
    #[arg(long, env = "LOGS_MAX_URL_BYTES", default_value = "8KiB", value_parser = parse_size)]
    max_url_bytes: usize,
    /// The most bytes of request headers (more: 431).
    #[arg(long, env = "LOGS_MAX_HEADER_BYTES", default_value = "16KiB", value_parser = parse_size)]
    max_header_bytes: usize,
    /// The longest wait for a request's headers, and for the next request on an idle connection.
    #[arg(long, env = "LOGS_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    header_read_timeout: Duration,
    /// The longest wait for an export's first rows (longer: 503).
    #[arg(long, env = "LOGS_FIRST_BYTE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    first_byte_timeout: Duration,
    /// How long a client may read nothing of an answer other than an export before its
    /// connection is closed (exports: --reader-idle-timeout; prepared downloads:
    /// --download-write-timeout).
    #[arg(long, env = "LOGS_WRITE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    write_timeout: Duration,
    /// How long a streamed export waits for a client that reads nothing (its rest kept in a
    /// spill file meanwhile) before the connection is closed and the body ends aborted.
    #[arg(long, env = "LOGS_READER_IDLE_TIMEOUT", default_value = "10m", value_parser = parse_duration)]
    reader_idle_timeout: Duration,
    /// Where the rest of an export whose client stopped reading is kept (default: the system's
    /// temporary folder). The files have no name: a crash leaves nothing behind.
    #[arg(long, env = "LOGS_SPILL_DIR", value_name = "FOLDER")]
    spill_dir: Option<PathBuf>,
    /// The most bytes all spill files together may hold; 0 turns spilling off (a client that
    /// stops reading then holds its query until --reader-idle-timeout).
    #[arg(long, env = "LOGS_MAX_SPILL_SIZE", default_value = "4GiB", value_parser = parse_size)]
    max_spill_size: usize,
    /// The most exports holding a spill file at once (one file descriptor each).
    #[arg(long, env = "LOGS_MAX_SPILLED_EXPORTS", default_value_t = 64)]
    max_spilled_exports: usize,
    /// How long running exports may go on after SIGTERM or SIGINT.
    #[arg(long, env = "LOGS_SHUTDOWN_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    shutdown_timeout: Duration,
    /// After SIGTERM or SIGINT, how long requests are still accepted while the admin API's
    /// `/readyz` answers "draining", so that a load balancer stops sending them first.
    #[arg(long, env = "LOGS_DRAIN_DELAY", default_value = "0s", value_parser = parse_duration)]
    drain_delay: Duration,
    /// Chunks of about 512 KiB an export may encode ahead of a slow client.
    #[arg(long, env = "LOGS_CHUNK_QUEUE", default_value_t = 4)]
    chunk_queue: usize,
    /// gzip level for clients that accept gzip: 1 (fastest) to 9 (smallest).
    #[arg(long, env = "LOGS_GZIP_LEVEL", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    gzip_level: u32,

    #[command(flatten)]
    names: crate::export::NamingArgs,

    #[command(flatten)]
    prepared: PreparedArgs,

    #[command(flatten)]
    privacy: crate::privacy::PrivacyArgs,

    /// Log format on stderr.
    #[arg(long, env = "LOGS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log filter, as `info` or `warn,logs_server=debug`.
    #[arg(long, env = "LOGS_LOG", default_value = "info")]
    log: String,
}

/// Prepared exports (see docs/api.md): off unless `--spool` is given.
#[derive(Debug, Args)]
struct PreparedArgs {
    /// Where prepared exports are kept: a local folder or an s3://bucket/prefix (with the
    /// dataset's S3 settings). Turns prepared exports on.
    #[arg(long, env = "LOGS_SPOOL", value_name = "LOCATION")]
    spool: Option<String>,
    /// Which exports are prepared: `requested` (those asked with `Prefer: respond-async`) or
    /// `always` (every export: for clients of the original API, which repeat on 202).
    #[arg(long, env = "LOGS_PREPARE", value_enum, default_value_t = Prepare::Requested, requires = "spool")]
    prepare: Prepare,
    /// How long a prepared export is kept, served and reused.
    #[arg(long, env = "LOGS_SPOOL_TTL", default_value = "1h", value_parser = parse_duration)]
    spool_ttl: Duration,
    /// The most bytes the spool holds (both copies of every export); the oldest exports are
    /// deleted to make room.
    #[arg(long, env = "LOGS_SPOOL_MAX_SIZE", default_value = "10GiB", value_parser = parse_size)]
    spool_max_size: usize,
    /// The largest prepared export; a larger one answers 400 "Try to use more parts.".
    #[arg(long, env = "LOGS_PREPARED_MAX_SIZE", value_parser = parse_size)]
    prepared_max_size: Option<usize>,
    /// The `Retry-After` of a 202 answer before the job's remaining time can be estimated
    /// (then: the estimate, from 1 s to the larger of this and 60 s).
    #[arg(long, env = "LOGS_PREPARED_RETRY_AFTER", default_value = "5s", value_parser = parse_duration)]
    prepared_retry_after: Duration,
    /// How long a request that starts or joins a job waits for it before answering 202; a job
    /// done by then is answered 200 at once (`Prefer: wait=N` asks for another time).
    #[arg(long, env = "LOGS_PREPARED_WAIT", default_value = "2s", value_parser = parse_duration)]
    prepared_wait: Duration,
    /// How long a client downloading a prepared export may read nothing before it is cut off.
    #[arg(long, env = "LOGS_DOWNLOAD_WRITE_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    download_write_timeout: Duration,
    /// How long a job's lease in the spool lasts unless renewed: how soon another replica
    /// sharing the spool takes over the job of one that died.
    #[arg(long, env = "LOGS_SPOOL_LEASE_TTL", default_value = "30s", value_parser = parse_duration)]
    spool_lease_ttl: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Prepare {
    Requested,
    Always,
}

impl PreparedArgs {
    fn config(&self) -> Result<Option<PreparedConfig>, Failure> {
        let Some(spool) = &self.spool else { return Ok(None) };
        let spool = DatasetLocation::parse(spool).map_err(|e| Failure::Usage(format!("--spool: {e}")))?;
        Ok(Some(PreparedConfig {
            policy: match self.prepare {
                Prepare::Requested => PreparePolicy::Requested,
                Prepare::Always => PreparePolicy::Always,
            },
            ttl: self.spool_ttl,
            max_spool_bytes: self.spool_max_size as u64,
            max_export_bytes: self.prepared_max_size.map(|n| n as u64),
            retry_after: self.prepared_retry_after,
            wait: self.prepared_wait,
            download_write_timeout: self.download_write_timeout,
            lease_ttl: self.spool_lease_ttl,
            ..PreparedConfig::new(spool)
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

pub fn run(args: ServeArgs) -> Result<(), Failure> {
    init_logging(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(serve(args))
}

/// The log filter of `--log`. DataFusion logs its plans at DEBUG and TRACE with the filter
/// values of requests as they are, control characters included: unless `--log` names a
/// `datafusion` target itself, those targets are capped at INFO, so that `--log debug` cannot
/// let a client write lines of its choice into the log.
fn log_filter(spec: &str) -> Result<tracing_subscriber::EnvFilter, Failure> {
    let mut filter = tracing_subscriber::EnvFilter::try_new(spec)
        .map_err(|e| Failure::Usage(format!("--log `{spec}`: {e}")))?;
    if !spec.contains("datafusion") {
        filter = filter.add_directive("datafusion=info".parse().expect("a valid directive"));
    }
    Ok(filter)
}

fn init_logging(args: &ServeArgs) -> Result<(), Failure> {
    let filter = log_filter(&args.log)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<(), Failure> {
    let service = Service::build(service_config(&args)?).await.map_err(service_failure)?;
    // The signals are caught from here on, so that one sent as soon as the lines below are
    // read stops the service as it should.
    let stop = stop_signal();
    reload_on_sighup(service.tokens_file())?;
    let address = service.address();
    if args.cursor.cursor_key_file.is_none() {
        tracing::info!(
            "no --cursor-key-file: cursor chains are signed with a key made at start, so they end with \
             a restart and cannot move between replicas"
        );
    }
    println!("logs serve: serving {} on http://{address}", service.state().engine().location());
    if let Some(admin) = service.admin_address() {
        println!("metrics: http://{admin}/metrics");
    }
    if let Some(token) = service.generated_token() {
        print_try_it(token, address, &service.example_target().await);
    }
    service.run_until_stopped(stop).await.map_err(service_failure)
}

/// The flags and environment, as the service's configuration.
fn service_config(args: &ServeArgs) -> Result<ServiceConfig, Failure> {
    let data = DatasetLocation::parse(&args.data).map_err(|e| Failure::Usage(e.to_string()))?;
    let engine = EngineConfig {
        max_limit: args.max_limit,
        target_partitions: args.target_partitions,
        memory_limit: args.memory_limit,
        batch_size: args.batch_size,
        aliases: args.names.aliases()?,
        s3: args.s3.options(),
        cursor: args.cursor.settings(WithoutKeyFile::Generated)?,
        // What an export over a bucket keeps on disk for its scan goes beside the spill files.
        kept_for_scan: KeptForScan { dir: args.spill_dir.clone(), ..KeptForScan::default() },
        ..EngineConfig::default()
    };
    let settings = Settings {
        max_exports: args.max_exports,
        max_exports_per_token: args.max_exports_per_token,
        max_url_bytes: args.max_url_bytes,
        max_header_bytes: args.max_header_bytes,
        first_byte_timeout: args.first_byte_timeout,
        chunk_queue: args.chunk_queue,
        gzip_level: args.gzip_level,
        json_integers: args.names.json_integers,
        reader_idle_timeout: args.reader_idle_timeout,
        spill_dir: args.spill_dir.clone(),
        max_spill_bytes: args.max_spill_size as u64,
        max_spilled_exports: args.max_spilled_exports,
        trusted_proxies: trusted_proxies(args)?,
        auth_failure_limit: args.auth_failure_limit,
        auth_failure_window: args.auth_failure_window,
        ..Settings::default()
    };
    if args.introspection_credentials.is_some()
        && args.introspection_url.is_none()
        && args.oidc.issuer().is_none()
    {
        return Err(Failure::Usage(
            "--introspection-credentials needs --introspection-url, or --oidc-issuer to discover the endpoint".into(),
        ));
    }
    let introspection = match (&args.introspection_url, &args.introspection_credentials) {
        (url, Some(credentials)) => Some(IntrospectionFiles {
            url: url.clone(),
            credentials: credentials.clone(),
            grants: args.introspection_grants.clone(),
            timeout: args.introspection_timeout,
            cache_entries: args.introspection_cache_entries,
            cache_ttl: args.introspection_cache_ttl,
            negative_ttl: args.introspection_negative_ttl,
            applications_claim: args.introspection_applications_claim.clone(),
        }),
        _ => None,
    };
    let tokens = match &args.tokens {
        Some(path) => Tokens::File { path: path.clone(), reload_interval: args.tokens_reload_interval },
        // A token is generated only without introspection (`Service::build` decides).
        None => Tokens::Generated,
    };
    Ok(ServiceConfig {
        engine,
        listen: args.listen,
        admin_listen: args.admin_listen,
        tokens,
        introspection,
        oidc: args.oidc.files(),
        settings,
        header_read_timeout: args.header_read_timeout,
        write_timeout: args.write_timeout,
        shutdown_timeout: args.shutdown_timeout,
        drain_delay: args.drain_delay,
        prepared: args.prepared.config()?,
        privacy: args.privacy.files(),
        ..ServiceConfig::new(data)
    })
}

fn trusted_proxies(args: &ServeArgs) -> Result<TrustedProxies, Failure> {
    let usage = |e: logs_server::ConfigError| Failure::Usage(e.to_string());
    let header = args.forwarded_header.parse::<ForwardedHeader>().map_err(usage)?;
    TrustedProxies::parse(&args.trusted_proxies, header).map_err(usage)
}

/// Invalid configuration is bad usage (exit 2); anything that could not be read or done, a
/// failure (exit 1).
fn service_failure(e: ServiceError) -> Failure {
    if e.is_invalid_configuration() { Failure::Usage(e.to_string()) } else { Failure::Other(e.into()) }
}

fn print_try_it(token: &str, address: SocketAddr, target: &str) {
    let host = if address.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), address.port())
    } else {
        address
    };
    println!(
        "\nNo token source is configured (--tokens, --introspection-url, --oidc-issuer), so this run accepts one \
         generated token,\nwith scopes {READ_SCOPE} and {WRITE_SCOPE} on every application:\n\n    {token}\n\n\
         Try it:\n\n    curl -H 'Authorization: OAuth {token}' 'http://{host}{target}'\n"
    );
}
