//! `logs-cluster`: the one command that brings up replicas behind a balancer on loopback, as
//! the replica tests do — an S3 server (moto) with a generated dataset, N `logs serve`
//! replicas over that bucket sharing one spool, and haproxy in front with
//! `deploy/haproxy.cfg`. It prints a token and curl commands through the balancer, and stops
//! everything on Ctrl-C. Run it with `deploy/cluster` (which builds `logs` first).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::Parser;
use logs_testkit::cluster::{Cluster, ClusterOptions, DATASET, SPOOL};
use logs_testkit::oidc::{Client, OidcProvider, ProviderConfig};

/// The audience of the provider's tokens for the replicas (`--oidc-audience`).
const AUDIENCE: &str = "https://logs.example/api";
/// The provider's one client: client credentials, both scopes, every application.
const CLIENT_ID: &str = "cluster-client";

#[derive(Debug, Parser)]
#[command(
    name = "logs-cluster",
    about = "Replicas of `logs serve` over one bucket behind haproxy, on loopback"
)]
struct Args {
    /// How many replicas (1 to 8).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=8))]
    replicas: u16,
    /// Rows of the generated dataset.
    #[arg(long, default_value_t = 200_000)]
    rows: u64,
    /// Days of the generated dataset, from 2026-10-01.
    #[arg(long, default_value_t = 14)]
    days: u32,
    /// Where the balancer listens.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: std::net::SocketAddr,
    /// How often the balancer asks each replica's /readyz (a stopping replica drains for 4 of these).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    check_interval: Duration,
    /// Also start a real OpenID provider (npm's oidc-provider, installed on first use) and
    /// have the replicas accept its JWT access tokens (`--oidc-issuer`, `--oidc-audience`).
    #[arg(long)]
    oidc: bool,
    /// The `logs` binary (default: the one beside this program).
    #[arg(long)]
    logs: Option<PathBuf>,
    /// More flags for every replica's `logs serve` (after `--`), e.g. `-- --prepare always`.
    #[arg(last = true)]
    serve_flags: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let logs = match &args.logs {
        Some(logs) => logs.clone(),
        None => std::env::current_exe().expect("this program's path").with_file_name("logs"),
    };
    if !logs.is_file() {
        eprintln!("logs-cluster: no `logs` binary at {} (build it: cargo build -p logs-cli)", logs.display());
        return ExitCode::from(2);
    }
    let folder = tempfile::Builder::new().prefix("logs-cluster-").tempdir().expect("a temporary folder");
    let dataset = folder.path().join("dataset");
    println!("generating {} rows over {} days…", args.rows, args.days);
    let generated = Command::new(&logs)
        .args(["generate", "--rows", &args.rows.to_string(), "--days", &args.days.to_string(), "--out"])
        .arg(&dataset)
        .status()
        .expect("run logs generate");
    if !generated.success() {
        eprintln!("logs-cluster: logs generate failed ({generated})");
        return ExitCode::from(1);
    }

    let token = random_token();
    let mut options = ClusterOptions::new(&logs, &dataset, folder.path());
    options.replicas = usize::from(args.replicas);
    options.tokens = vec![("cluster".to_owned(), token.clone())];
    options.flags = args.serve_flags.clone();
    let provider = args.oidc.then(|| {
        println!("starting the OpenID provider (npm's oidc-provider; installed on first use)…");
        let provider = OidcProvider::start(provider_config());
        // Opaque tokens (asked for without `resource`) are introspected at the provider, with
        // the same client's credentials.
        let client = &provider.config().clients[0];
        let credentials = folder.path().join("introspection.toml");
        let toml =
            format!("client_id = \"{}\"\nclient_secret = \"{}\"\n", client.client_id, client.client_secret);
        std::fs::write(&credentials, toml).expect("write the introspection credentials");
        let credentials = credentials.display().to_string();
        options.flags.extend(
            ["--oidc-issuer", &provider.issuer(), "--oidc-audience", AUDIENCE]
                .into_iter()
                .chain(["--introspection-credentials", &credentials])
                .map(str::to_owned),
        );
        provider
    });
    options.check_interval = args.check_interval;
    options.listen = Some(args.listen);
    options.max_keys = 1000;
    println!("starting moto, {} replicas and haproxy…", options.replicas);
    let cluster = Cluster::start(options);

    let s3 = cluster.s3();
    println!();
    println!("S3 server (moto)   {}   dataset {DATASET}, spool {SPOOL}", s3.endpoint());
    for (i, replica) in cluster.replicas().iter().enumerate() {
        println!(
            "replica {}          {}   admin {}/readyz   pid {}   log {}",
            i + 1,
            replica.url(),
            replica.admin_url(),
            replica.pid().unwrap_or(0),
            replica.log_path().display()
        );
    }
    println!(
        "balancer           {}   stats {}/stats   ({})",
        cluster.url(),
        cluster.balancer().admin_url(),
        logs_testkit::haproxy::version()
    );
    println!();
    println!("Token (service:read and service:write on every application):");
    println!();
    println!("    {token}");
    println!();
    println!("Try it through the balancer:");
    println!();
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07\
                 &fields=error_datetime,error_name,os_name,app_version_name&limit=10";
    println!(
        "    curl -H 'Authorization: OAuth {token}' '{}/logs/v1/export/errors.csv?{query}'",
        cluster.url()
    );
    println!();
    println!("A prepared export (202 until it is ready, then the file; any replica serves it):");
    println!();
    println!(
        "    curl -i -H 'Prefer: respond-async' -H 'Authorization: OAuth {token}' \
         '{}/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&date_until=2026-10-14&fields=error_id,error'",
        cluster.url()
    );
    println!();
    if let Some(provider) = &provider {
        print_oidc(provider, &cluster.url(), query);
    }
    println!("Stop a replica (kill -TERM <pid>) or kill it (kill -9 <pid>) and watch the stats page.");
    println!("Ctrl-C stops everything and deletes {}.", folder.path().display());

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    });
    println!("stopping…");
    drop(cluster);
    drop(provider);
    ExitCode::SUCCESS
}

/// 32 random hex digits from the kernel.
fn random_token() -> String {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("read /dev/urandom");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One ES256 key and one client, [`CLIENT_ID`], with a random secret.
fn provider_config() -> ProviderConfig {
    let client = Client {
        client_id: CLIENT_ID.into(),
        client_secret: random_token(),
        scope: "service:read service:write".into(),
        applications: serde_json::json!("*"),
        alg: "ES256".into(),
    };
    let keys = vec![OidcProvider::genkey("ES256", "cluster-1")];
    ProviderConfig::new(keys, vec![client], AUDIENCE, "https://other.example/api")
}

/// How to get a token from the provider and export with it.
fn print_oidc(provider: &OidcProvider, balancer: &str, query: &str) {
    let secret = &provider.config().clients[0].client_secret;
    println!("OpenID provider    {}   (oidc-provider; client {CLIENT_ID})", provider.issuer());
    println!();
    println!("Get a JWT access token from it, as a client does, and export with it:");
    println!();
    println!(
        "    TOKEN=$(curl -s -u '{CLIENT_ID}:{secret}' -d grant_type=client_credentials \\\n                 -d 'scope=service:read service:write' -d 'resource={AUDIENCE}' {}/token \\\n                 | python3 -c 'import json, sys; print(json.load(sys.stdin)[\"access_token\"])')",
        provider.issuer()
    );
    println!("    curl -H \"Authorization: Bearer $TOKEN\" '{balancer}/logs/v1/export/errors.csv?{query}'");
    println!();
    println!("Without `-d resource=…` the provider issues an opaque token; the replicas introspect it.");
    println!();
}
