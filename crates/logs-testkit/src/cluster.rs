//! Replicas behind a load balancer, on loopback: an S3 server (moto) holding a dataset and the
//! spool in one bucket, N `logs serve` processes over it, and haproxy in front of them with
//! the repository's `deploy/haproxy.cfg`. `logs-cluster` starts one for a user; the replica
//! tests start the same, and stop, kill and start its replicas again.
//!
//! Every replica is given the same dataset (`s3://logs/dataset`), spool (`s3://logs/spool`),
//! tokens file and flags (and trusts the balancer's `X-Forwarded-For`); its API and admin listeners keep their ports across restarts, which
//! is where the balancer looks for it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::free_port;
use crate::haproxy::{Backend, Haproxy, ServerState};
use crate::s3::S3Server;

/// The bucket of the dataset and the spool.
pub const BUCKET: &str = "logs";
/// The dataset's location, as the replicas are given it.
pub const DATASET: &str = "s3://logs/dataset";
/// The spool's location, shared by the replicas.
pub const SPOOL: &str = "s3://logs/spool";

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The `logs` binary.
    pub logs: PathBuf,
    /// How many replicas (1 to 8).
    pub replicas: usize,
    /// A dataset folder, uploaded to the bucket as it is.
    pub dataset: PathBuf,
    /// Where the tokens file, haproxy's configuration and every process's log go.
    pub folder: PathBuf,
    /// Tokens with `service:read` and `service:write` on every application: (name, token).
    pub tokens: Vec<(String, String)>,
    /// More flags for every replica's `logs serve`.
    pub flags: Vec<String>,
    /// More environment variables for every replica.
    pub env: Vec<(String, String)>,
    /// Where the balancer listens (a free loopback port when `None`).
    pub listen: Option<SocketAddr>,
    /// Keys per listing page of the S3 server (the tests' [`crate::s3::MAX_KEYS`] by default,
    /// so that every listing paginates).
    pub max_keys: usize,
    /// How often the balancer asks each replica's `/readyz`. A replica stopping keeps serving
    /// for four of these (`--drain-delay`): the balancer takes it out after two failed checks.
    pub check_interval: Duration,
}

impl ClusterOptions {
    pub fn new(logs: impl Into<PathBuf>, dataset: impl Into<PathBuf>, folder: impl Into<PathBuf>) -> Self {
        ClusterOptions {
            logs: logs.into(),
            replicas: 3,
            dataset: dataset.into(),
            folder: folder.into(),
            tokens: Vec::new(),
            flags: Vec::new(),
            env: Vec::new(),
            listen: None,
            max_keys: crate::s3::MAX_KEYS,
            check_interval: Duration::from_secs(2),
        }
    }
}

/// One `logs serve` process of the cluster (not running between a stop and a start).
#[derive(Debug)]
pub struct Replica {
    command: Vec<String>,
    env: Vec<(String, String)>,
    api: SocketAddr,
    admin: SocketAddr,
    log: PathBuf,
    child: Option<Child>,
}

impl Replica {
    /// `http://127.0.0.1:<port>`: the replica's API, bypassing the balancer.
    pub fn url(&self) -> String {
        format!("http://{}", self.api)
    }

    /// `http://127.0.0.1:<port>`: its admin listener (`/readyz`, `/metrics`).
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
    }

    /// Everything it has logged, over all its starts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn start(&mut self) {
        assert!(self.child.is_none(), "{} is running", self.url());
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .env_clear()
            .envs(
                std::env::vars().filter(|(name, _)| !name.starts_with("LOGS_") && !name.starts_with("AWS_")),
            )
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.command[0]));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, _)) = crate::http::request(self.admin, "GET", "/readyz") {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the replica on {} stopped ({status}):\n{}", self.api, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the replica on {} not ready within 60 s:\n{}",
                self.api,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM; the replica drains, finishes what it serves and exits.
    fn terminate(&self) {
        let pid = self.pid().expect("a running replica").to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success(), "kill -TERM {pid}");
    }

    /// Waits for the process to end (after [`Replica::terminate`]).
    fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let child = self.child.as_mut().expect("a running replica");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "the replica on {} did not stop within {within:?}", self.api);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The running cluster; everything is stopped when it is dropped (the balancer first).
#[derive(Debug)]
pub struct Cluster {
    balancer: Haproxy,
    replicas: Vec<Replica>,
    s3: S3Server,
    tokens: Vec<(String, String)>,
    check_interval: Duration,
}

impl Cluster {
    /// Starts moto, uploads the dataset, starts the replicas (each ready: its `/readyz` answers
    /// 200) and the balancer, and returns once the balancer sees every replica up.
    pub fn start(options: ClusterOptions) -> Cluster {
        assert!((1..=8).contains(&options.replicas), "1 to 8 replicas");
        std::fs::create_dir_all(&options.folder).unwrap();
        let s3 = S3Server::start_with_max_keys(options.max_keys);
        s3.create_bucket(BUCKET);
        s3.upload_folder(&options.dataset, BUCKET, "dataset");
        let tokens_file = options.folder.join("tokens.toml");
        std::fs::write(&tokens_file, tokens_file_text(&options.tokens)).unwrap();

        let drain_delay = options.check_interval * 4;
        let mut env: Vec<(String, String)> = s3.env().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        env.extend(options.env.iter().cloned());
        let mut replicas: Vec<Replica> = (1..=options.replicas)
            .map(|n| {
                let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
                let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
                let mut command: Vec<String> = vec![options.logs.display().to_string(), "serve".into()];
                command.extend(
                    [
                        "--listen",
                        &api.to_string(),
                        "--admin-listen",
                        &admin.to_string(),
                        "--data",
                        DATASET,
                        "--spool",
                        SPOOL,
                        "--tokens",
                        &tokens_file.display().to_string(),
                        "--drain-delay",
                        &format!("{}ms", drain_delay.as_millis()),
                        // The balancer, whose X-Forwarded-For names the client.
                        "--trusted-proxies",
                        "127.0.0.1",
                    ]
                    .map(str::to_owned),
                );
                command.extend(options.flags.iter().cloned());
                let log = options.folder.join(format!("replica{n}.log"));
                Replica { command, env: env.clone(), api, admin, log, child: None }
            })
            .collect();
        for replica in &mut replicas {
            replica.start();
        }
        let backends: Vec<Backend> =
            replicas.iter().map(|r| Backend { api: r.api, admin_port: r.admin.port() }).collect();
        let interval = format!("{}ms", options.check_interval.as_millis());
        let cluster = Cluster {
            balancer: Haproxy::start(&backends, options.listen, &interval, &options.folder),
            replicas,
            s3,
            tokens: options.tokens,
            check_interval: options.check_interval,
        };
        for i in 0..cluster.replicas.len() {
            cluster.wait_until_balancer_sees(i, "UP");
        }
        cluster
    }

    /// `http://127.0.0.1:<port>`: the balancer, where clients connect.
    pub fn url(&self) -> String {
        self.balancer.url()
    }

    pub fn balancer(&self) -> &Haproxy {
        &self.balancer
    }

    pub fn s3(&self) -> &S3Server {
        &self.s3
    }

    pub fn replicas(&self) -> &[Replica] {
        &self.replicas
    }

    pub fn replica(&self, index: usize) -> &Replica {
        &self.replicas[index]
    }

    /// The tokens every replica knows: (name, token).
    pub fn tokens(&self) -> &[(String, String)] {
        &self.tokens
    }

    /// The replicas' states at the balancer.
    pub fn servers(&self) -> Vec<ServerState> {
        self.balancer.servers()
    }

    /// Waits until the balancer marks replica `index` (from 0) `UP` or `DOWN`.
    pub fn wait_until_balancer_sees(&self, index: usize, status: &str) {
        // Two checks decide (fall 2, rise 2), each within the interval; the rest is margin.
        self.balancer.wait_for(index, status, self.check_interval * 4 + Duration::from_secs(10));
    }

    /// SIGKILL: the replica dies at once, in the middle of whatever it serves.
    pub fn kill(&mut self, index: usize) {
        let replica = &mut self.replicas[index];
        let mut child = replica.child.take().expect("a running replica");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM: the replica answers "draining" to the balancer, keeps serving for its drain
    /// delay, then finishes the exports it serves and exits. Returns at once.
    pub fn terminate(&self, index: usize) {
        self.replicas[index].terminate();
    }

    /// Waits for a terminated replica to exit; its exit status.
    pub fn wait(&mut self, index: usize, within: Duration) -> std::process::ExitStatus {
        self.replicas[index].wait(within)
    }

    /// Starts a stopped replica again on the same ports, and waits until the balancer sends it
    /// requests again.
    pub fn restart(&mut self, index: usize) {
        self.replicas[index].start();
        self.wait_until_balancer_sees(index, "UP");
    }
}

/// A tokens file granting each token `service:read` and `service:write` on every application,
/// by SHA-256.
fn tokens_file_text(tokens: &[(String, String)]) -> String {
    tokens
        .iter()
        .map(|(name, token)| {
            let hash: String = Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            format!(
                "[[tokens]]\nname = \"{name}\"\nsha256 = \"{hash}\"\nscopes = [\"service:read\", \"service:write\"]\n\n"
            )
        })
        .collect()
}
