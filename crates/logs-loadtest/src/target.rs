//! The server under load: started in this process on 127.0.0.1:0, or one already running on a
//! loopback address. Its counters and its memory are read from its state and
//! `/proc/self/status`, or from its admin `/metrics` and `/proc/<pid>/status`.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use logs_core::{DatasetLocation, EngineConfig};
use logs_server::ExportCounts;
use logs_server::auth::TokenSet;
use logs_server::service::{Service, ServiceConfig, ServiceError, Tokens};
use logs_server::{AppState, Settings};
use sha2::Digest;

/// A server to load.
#[derive(Debug)]
pub enum Target {
    InProcess(InProcess),
    Remote(Remote),
}

#[derive(Debug)]
pub struct InProcess {
    pub addr: SocketAddr,
    pub state: AppState,
    runtime: tokio::runtime::Runtime,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), ServiceError>>>,
}

/// A running server, or replicas behind a balancer: their admin listeners and processes.
#[derive(Debug)]
pub struct Remote {
    pub base: String,
    pub admins: Vec<String>,
    pub pids: Vec<u32>,
}

impl InProcess {
    /// Starts the service over `data` on its own runtime (two worker threads, as on a 2-core
    /// machine), with `tokens` valid for every application.
    pub fn start(
        data: &Path,
        config: EngineConfig,
        settings: Settings,
        tokens: &[String],
    ) -> anyhow::Result<InProcess> {
        let mut toml = String::new();
        for (i, token) in tokens.iter().enumerate() {
            let hash = hex::encode(sha2::Sha256::digest(token.as_bytes()));
            toml.push_str(&format!(
                "[[tokens]]\nname = \"load-{i}\"\nsha256 = \"{hash}\"\nscopes = [\"service:read\"]\n\n"
            ));
        }
        let set = TokenSet::parse(&toml).map_err(anyhow::Error::msg)?;
        let config = ServiceConfig {
            engine: config,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tokens: Tokens::Fixed(set),
            settings,
            ..ServiceConfig::new(DatasetLocation::from(data))
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("server")
            .enable_all()
            .build()?;
        let service = runtime.block_on(Service::build(config))?;
        let (addr, state) = (service.address(), service.state().clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = runtime.spawn(service.run_until_stopped(async {
            let _ = rx.await;
        }));
        Ok(InProcess { addr, state, runtime, shutdown: Some(tx), task: Some(task) })
    }

    /// Stops the server (running exports have 30 s to end).
    pub fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            self.runtime.block_on(task).context("the server task")??;
        }
        Ok(())
    }
}

impl Target {
    pub fn base(&self) -> String {
        match self {
            Target::InProcess(server) => format!("http://{}", server.addr),
            Target::Remote(remote) => remote.base.clone(),
        }
    }

    /// The server's export counters now, if they can be read.
    pub async fn exports(&self, http: &reqwest::Client) -> Option<ExportCounts> {
        match self {
            Target::InProcess(server) => Some(server.state.metrics().exports()),
            Target::Remote(remote) => {
                let mut all: Option<ExportCounts> = None;
                for admin in &remote.admins {
                    let text = http.get(format!("{admin}/metrics")).send().await.ok()?.text().await.ok()?;
                    let counts = parse_metrics(&text);
                    all = Some(all.map_or(counts, |sum| add(sum, counts)));
                }
                all
            }
        }
    }

    /// (VmRSS, VmHWM) of the server's process in bytes; of replicas, the largest of each.
    pub fn memory(&self) -> Option<(u64, u64)> {
        let paths = match self {
            Target::InProcess(_) => vec!["/proc/self/status".to_owned()],
            Target::Remote(remote) => remote.pids.iter().map(|pid| format!("/proc/{pid}/status")).collect(),
        };
        let mut largest: Option<(u64, u64)> = None;
        for path in paths {
            let status = std::fs::read_to_string(path).ok()?;
            let (rss, hwm) = (status_kib(&status, "VmRSS:")? * 1024, status_kib(&status, "VmHWM:")? * 1024);
            largest = Some(largest.map_or((rss, hwm), |(r, h)| (r.max(rss), h.max(hwm))));
        }
        largest
    }

    /// Resets the peak resident size to the current one, so that the peak measured is the
    /// load's and not the set-up's (dataset generation, expected digests). False if the
    /// kernel refused.
    pub fn reset_peak_memory(&self) -> bool {
        let paths = match self {
            Target::InProcess(_) => vec!["/proc/self/clear_refs".to_owned()],
            Target::Remote(remote) => {
                remote.pids.iter().map(|pid| format!("/proc/{pid}/clear_refs")).collect()
            }
        };
        !paths.is_empty() && paths.into_iter().all(|path| std::fs::write(path, "5").is_ok())
    }

    pub fn stop(self) -> anyhow::Result<()> {
        match self {
            Target::InProcess(server) => server.stop(),
            Target::Remote(_) => Ok(()),
        }
    }
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    let rest = status.lines().find_map(|line| line.strip_prefix(key))?;
    rest.trim().trim_end_matches("kB").trim().parse().ok()
}

/// The export counters from the Prometheus text of `/metrics`.
pub fn parse_metrics(text: &str) -> ExportCounts {
    let value = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    ExportCounts {
        running: value("logs_exports_running"),
        completed: value("logs_exports_total{outcome=\"completed\"}"),
        failed: value("logs_exports_total{outcome=\"failed\"}"),
        cancelled: value("logs_exports_total{outcome=\"cancelled\"}"),
        rows: value("logs_export_rows_total"),
        bytes: value("logs_export_bytes_total"),
        buffered: value("logs_export_buffered_bytes"),
        buffered_peak: value("logs_export_buffered_bytes_peak"),
    }
}

/// The counters of two replicas as one: sums, but the peak of buffered bytes, which is held to
/// a bound per process, is the larger one.
fn add(a: ExportCounts, b: ExportCounts) -> ExportCounts {
    ExportCounts {
        running: a.running + b.running,
        completed: a.completed + b.completed,
        failed: a.failed + b.failed,
        cancelled: a.cancelled + b.cancelled,
        rows: a.rows + b.rows,
        bytes: a.bytes + b.bytes,
        buffered: a.buffered + b.buffered,
        buffered_peak: a.buffered_peak.max(b.buffered_peak),
    }
}

/// Refuses any URL whose host is not a loopback address: load goes nowhere else.
pub fn loopback_base(url: &str) -> anyhow::Result<String> {
    let parsed = url::Url::parse(url).with_context(|| format!("`{url}` is not a URL"))?;
    if parsed.scheme() != "http" {
        bail!("`{url}`: only http:// on a loopback address is allowed");
    }
    let host = parsed.host_str().unwrap_or("");
    let port = parsed.port_or_known_default().unwrap_or(80);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<IpAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) if host == "localhost" => {
            (host, port).to_socket_addrs().map(|a| a.map(|s| s.ip()).collect()).unwrap_or_default()
        }
        Err(_) => bail!("`{url}`: the host must be a loopback address (127.0.0.0/8, ::1 or localhost)"),
    };
    if addresses.is_empty() || !addresses.iter().all(IpAddr::is_loopback) {
        bail!("`{url}`: {host} is not a loopback address; the load test only targets this machine");
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// Waits (at most `limit`) until no export runs.
pub async fn wait_until_idle(
    target: &Target,
    http: &reqwest::Client,
    limit: Duration,
) -> Option<ExportCounts> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let counts = target.exports(http).await;
        if counts.is_none_or(|c| c.running == 0 && c.buffered == 0) || tokio::time::Instant::now() >= deadline
        {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback() {
        assert!(loopback_base("http://127.0.0.1:8080").is_ok());
        assert!(loopback_base("http://127.1.2.3:8080/").is_ok());
        assert!(loopback_base("http://[::1]:8080").is_ok());
        assert!(loopback_base("http://localhost:8080").is_ok());
        for bad in
            ["http://10.0.0.1:8080", "http://192.168.1.1", "http://example.com", "https://127.0.0.1", "nope"]
        {
            assert!(loopback_base(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_metrics() {
        let text = "# HELP x\nlogs_exports_running 2\nlogs_exports_total{outcome=\"completed\"} 7\n\
                    logs_export_buffered_bytes 10\nlogs_export_buffered_bytes_peak 99\n";
        let c = parse_metrics(text);
        assert_eq!((c.running, c.completed, c.buffered, c.buffered_peak), (2, 7, 10, 99));
    }
}
