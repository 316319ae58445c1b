//! haproxy, the load balancer of the replica tests and of `logs-cluster`, run with the
//! repository's configuration (`deploy/haproxy.cfg`) on loopback.
//!
//! It is Debian's package: the `haproxy` on the `PATH` (or `$LOGS_HAPROXY`) when there is one;
//! otherwise the package and the three libraries a base system lacks are fetched once with
//! `apt-get download` (Debian's package registry, no root needed) and unpacked under
//! `~/.cache/logs-export/`, as the Python tools are. No test skips when it cannot be had: the
//! test fails, saying why.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::python::checked;

/// The repository's configuration of the balancer.
pub const CONFIG: &str = include_str!("../../../deploy/haproxy.cfg");

/// Debian's packages of haproxy and of the libraries it links that a base system lacks.
const PACKAGES: [&str; 4] = ["haproxy", "liblua5.3-0", "libopentracing-c-wrapper0", "libopentracing1"];

/// How to run haproxy: the program and the library folder it needs, if unpacked.
#[derive(Debug, Clone)]
struct Program {
    path: PathBuf,
    libraries: Option<PathBuf>,
}

impl Program {
    fn command(&self) -> Command {
        let mut command = Command::new(&self.path);
        if let Some(libraries) = &self.libraries {
            command.env("LD_LIBRARY_PATH", libraries);
        }
        command
    }
}

/// haproxy, found or fetched on first use; later calls in the process reuse it.
fn program() -> Program {
    static FOUND: OnceLock<Mutex<Option<Program>>> = OnceLock::new();
    let mut found = FOUND.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    found.get_or_insert_with(find_or_fetch).clone()
}

fn find_or_fetch() -> Program {
    if let Some(path) = std::env::var_os("LOGS_HAPROXY") {
        return Program { path: path.into(), libraries: None };
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|folder| folder.join("haproxy"))
        .find(|path| path.is_file());
    if let Some(path) = on_path {
        return Program { path, libraries: None };
    }
    fetch()
}

/// Unpacks Debian's packages into the cache (made beside its final place and renamed when
/// complete, so that a process stopped half-way leaves nothing that looks ready).
fn fetch() -> Program {
    let base = std::env::var_os("LOGS_TEST_VENV_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/logs-export")
    });
    let root = base.join("haproxy-deb");
    let program = Program {
        path: root.join("usr/sbin/haproxy"),
        libraries: Some(root.join("usr/lib/x86_64-linux-gnu")),
    };
    if program.path.exists() {
        return program;
    }
    let partial = base.join(format!(".haproxy-deb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).unwrap();
    let what =
        "apt-get download haproxy (needs Debian's package registry; or install haproxy, or set LOGS_HAPROXY)";
    checked(Command::new("apt-get").arg("download").args(PACKAGES).current_dir(&partial).output(), what);
    for entry in std::fs::read_dir(&partial).unwrap() {
        let deb = entry.unwrap().path();
        if deb.extension().is_some_and(|e| e == "deb") {
            checked(
                Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&partial).output(),
                &format!("dpkg-deb -x {}", deb.display()),
            );
            std::fs::remove_file(&deb).unwrap();
        }
    }
    if std::fs::rename(&partial, &root).is_err() {
        // Another process finished first: use its copy.
        let _ = std::fs::remove_dir_all(&partial);
    }
    checked(program.command().arg("-v").output(), "the unpacked haproxy -v");
    program
}

/// haproxy's version line (`HAProxy version 2.6.12-1+deb12u3 …`).
pub fn version() -> String {
    let output = checked(program().command().arg("-v").output(), "haproxy -v");
    String::from_utf8_lossy(&output.stdout).lines().next().unwrap_or_default().to_owned()
}

/// One replica as the balancer knows it.
#[derive(Debug, Clone, Copy)]
pub struct Backend {
    /// The replica's API listener.
    pub api: SocketAddr,
    /// The port of its admin listener (same host), where `/readyz` is asked.
    pub admin_port: u16,
}

/// A running haproxy, stopped when dropped.
#[derive(Debug)]
pub struct Haproxy {
    child: Child,
    listen: SocketAddr,
    admin: SocketAddr,
    log: PathBuf,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A replica's state in the balancer's statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerState {
    /// `replica1`, `replica2`, … (the order of the backends given).
    pub name: String,
    /// `UP`, `DOWN`, `UP 1/2` (going down), `DOWN 1/2` (coming up), `MAINT`, …
    pub status: String,
    /// Requests the balancer sent it.
    pub requests: u64,
}

impl Haproxy {
    /// Starts haproxy with the repository's configuration in front of `backends`, listening on
    /// `listen` (a free loopback port when `None`; its statistics always on one), asking each replica's `/readyz` every `check_interval` (`500ms`, `2s`);
    /// its log goes to `folder/haproxy.log`. Returns once its listener answers.
    pub fn start(
        backends: &[Backend],
        listen: Option<SocketAddr>,
        check_interval: &str,
        folder: &Path,
    ) -> Haproxy {
        assert!((1..=8).contains(&backends.len()), "deploy/haproxy.cfg has room for 1 to 8 replicas");
        let config = folder.join("haproxy.cfg");
        std::fs::write(&config, CONFIG).unwrap();
        let listen = listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = folder.join("haproxy.log");
        let mut command = program().command();
        command
            .arg("-f")
            .arg(&config)
            // Foreground, no daemon.
            .arg("-db")
            .env("LOGS_BALANCER_LISTEN", listen.to_string())
            .env("LOGS_BALANCER_ADMIN", admin.to_string())
            .env("LOGS_BALANCER_CHECK_INTERVAL", check_interval)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (i, backend) in backends.iter().enumerate() {
            command.env(format!("LOGS_REPLICA_{}", i + 1), backend.api.to_string());
            command.env(format!("LOGS_REPLICA_{}_ADMIN_PORT", i + 1), backend.admin_port.to_string());
        }
        let child = command.spawn().expect("start haproxy");
        let mut haproxy = Haproxy { child, listen, admin, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(haproxy.listen).is_err() || TcpStream::connect(haproxy.admin).is_err() {
            if let Ok(Some(status)) = haproxy.child.try_wait() {
                panic!("haproxy stopped ({status}):\n{}", haproxy.log());
            }
            assert!(Instant::now() < deadline, "haproxy did not listen within 20 s:\n{}", haproxy.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        haproxy
    }

    /// `http://127.0.0.1:<port>`: where clients connect.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// `http://127.0.0.1:<port>`: haproxy's `/stats` and `/metrics`.
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
    }

    /// What haproxy logged: a line per request, and each replica going down or up.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The replicas' states, from the statistics page's CSV.
    pub fn servers(&self) -> Vec<ServerState> {
        let (_, csv) = crate::http::request(self.admin, "GET", "/stats;csv").unwrap_or_default();
        let mut lines = csv.lines();
        let header: Vec<&str> =
            lines.next().unwrap_or_default().trim_start_matches("# ").split(',').collect();
        let column = |name: &str| header.iter().position(|h| *h == name);
        let (Some(proxy), Some(server), Some(status), Some(total)) =
            (column("pxname"), column("svname"), column("status"), column("stot"))
        else {
            return Vec::new();
        };
        lines
            .map(|line| line.split(',').collect::<Vec<_>>())
            .filter(|row| {
                row.get(proxy) == Some(&"replicas")
                    && row.get(server).is_some_and(|s| s.starts_with("replica"))
            })
            .map(|row| ServerState {
                name: row[server].to_owned(),
                status: row[status].to_owned(),
                requests: row[total].parse().unwrap_or(0),
            })
            .collect()
    }

    /// Waits until replica `index` (from 0) has `status` (`UP`, `DOWN`) at the balancer.
    pub fn wait_for(&self, index: usize, status: &str, within: Duration) {
        let name = format!("replica{}", index + 1);
        let deadline = Instant::now() + within;
        loop {
            let servers = self.servers();
            if servers.iter().any(|s| s.name == name && s.status == status) {
                return;
            }
            assert!(Instant::now() < deadline, "{name} not {status} within {within:?}: {servers:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
