//! A real OpenID provider on `127.0.0.1`: npm's `oidc-provider` (panva's, OpenID-certified),
//! run with the machine's Node.js by `oidc/provider.mjs` — client credentials, JWT access
//! tokens (`typ: at+jwt`) for resource indicators, opaque tokens without one, introspection,
//! and the JWKS of the keys it is given, so that a test can rotate them by restarting it.
//!
//! The package is installed on first use with `npm ci` from the npm registry, pinned by
//! `oidc/package-lock.json`, into `~/.cache/logs-export/npm-oidc-<hash>` (or under
//! `$LOGS_TEST_VENV_DIR`), made beside its final place and renamed when complete, as the
//! Python environments are. No test skips when Node.js or the package cannot be had: the test
//! fails, saying how to install them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::free_port;
use crate::python::checked;

const PACKAGE_JSON: &str = include_str!("../oidc/package.json");
const PACKAGE_LOCK: &str = include_str!("../oidc/package-lock.json");
const PROVIDER_MJS: &str = include_str!("../oidc/provider.mjs");
const INSTALL_NODE: &str = "install Node.js 20.12 or newer, with npm";

/// A signing key pair made by Node's `crypto`.
#[derive(Debug, Clone)]
pub struct KeyPair {
    pub kid: String,
    /// `RS256`, `PS256`, `ES256` or `EdDSA`.
    pub alg: String,
    /// The private key as a JWK (what the provider signs with).
    pub private_jwk: Value,
    /// The private key as PKCS#8 PEM (for a test to sign tokens of its own).
    pub private_pem: String,
    /// The public key as a JWK, as the provider publishes it.
    pub public_jwk: String,
}

/// A client of the provider (client credentials, HTTP Basic).
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    pub client_secret: String,
    /// The scopes it may ask for, space-separated.
    pub scope: String,
    /// Its tokens' applications claim: a list of ids or `"*"`.
    pub applications: Value,
    /// The algorithm of its JWT access tokens (a key of it must be in the set).
    pub alg: String,
}

/// What the provider serves.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// All are published; a client's tokens are signed with the first key of its algorithm.
    pub keys: Vec<KeyPair>,
    pub clients: Vec<Client>,
    /// The resource indicators that get JWT access tokens, the service's first.
    pub resources: Vec<String>,
    pub access_token_ttl: Duration,
    pub applications_claim: String,
    /// A `Cache-Control` header for the JWKS answer; `None` (the default): the provider sends
    /// none of its own.
    pub jwks_cache_control: Option<String>,
}

impl ProviderConfig {
    /// `keys` and `clients`, JWTs for `audience` and `other_audience`, 5-minute tokens, the
    /// claim `applications`.
    pub fn new(keys: Vec<KeyPair>, clients: Vec<Client>, audience: &str, other_audience: &str) -> Self {
        ProviderConfig {
            keys,
            clients,
            resources: vec![audience.to_owned(), other_audience.to_owned()],
            access_token_ttl: Duration::from_secs(300),
            applications_claim: "applications".into(),
            jwks_cache_control: None,
        }
    }

    fn to_json(&self, port: u16) -> Value {
        let clients: Vec<Value> = self
            .clients
            .iter()
            .map(|c| {
                json!({"client_id": c.client_id, "client_secret": c.client_secret, "scope": c.scope,
                       "applications": c.applications, "alg": c.alg})
            })
            .collect();
        json!({
            "port": port,
            "keys": self.keys.iter().map(|k| k.private_jwk.clone()).collect::<Vec<_>>(),
            "clients": clients,
            "resources": self.resources,
            "access_token_ttl": self.access_token_ttl.as_secs(),
            "applications_claim": self.applications_claim,
            "jwks_cache_control": self.jwks_cache_control,
        })
    }
}

/// The provider process; killed when dropped.
#[derive(Debug)]
pub struct OidcProvider {
    port: u16,
    child: Option<Child>,
    folder: tempfile::TempDir,
    config: ProviderConfig,
}

impl OidcProvider {
    /// Starts the provider on a free port and waits until its discovery document answers.
    pub fn start(config: ProviderConfig) -> OidcProvider {
        let folder = tempfile::Builder::new().prefix("oidc-provider-").tempdir().unwrap();
        let mut provider = OidcProvider { port: free_port(), child: None, folder, config };
        provider.spawn();
        provider
    }

    /// The issuer: `http://127.0.0.1:<port>`.
    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The token endpoint's answer for `client_id` (client credentials): its access token,
    /// a JWT for `resource`, an opaque token without one. `Err`: the provider's error answer.
    pub fn token(&self, client_id: &str, resource: Option<&str>, scope: &str) -> Result<String, String> {
        let client =
            self.config.clients.iter().find(|c| c.client_id == client_id).expect("a configured client");
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials").append_pair("scope", scope);
        if let Some(resource) = resource {
            form.append_pair("resource", resource);
        }
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", client.client_id, client.client_secret));
        let (status, body) = post(self.address(), "/token", &format!("Basic {basic}"), &form.finish())
            .map_err(|e| format!("POST /token: {e}"))?;
        let answer: Value = serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
        match answer["access_token"].as_str() {
            Some(token) if status == 200 => Ok(token.to_owned()),
            _ => Err(format!("{status}: {body}")),
        }
    }

    /// The introspection endpoint's answer (RFC 7662) about `token`, asked with `client_id`'s
    /// credentials. `Err`: no answer, or not a 200 with JSON.
    pub fn introspect(&self, client_id: &str, token: &str) -> Result<Value, String> {
        let client =
            self.config.clients.iter().find(|c| c.client_id == client_id).expect("a configured client");
        let basic = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", client.client_id, client.client_secret));
        let form = form_urlencoded::Serializer::new(String::new()).append_pair("token", token).finish();
        let (status, body) = post(self.address(), "/token/introspection", &format!("Basic {basic}"), &form)
            .map_err(|e| format!("POST /token/introspection: {e}"))?;
        match serde_json::from_str(&body) {
            Ok(answer) if status == 200 => Ok(answer),
            _ => Err(format!("POST /token/introspection: {status}")),
        }
    }

    /// The JWKS the provider publishes, and its answer's `Cache-Control` header.
    pub fn jwks(&self) -> (Value, Option<String>) {
        let response = crate::http::exchange(self.address(), "GET", "/jwks", &[], b"").expect("GET /jwks");
        assert_eq!(response.status, 200, "GET /jwks: {}", response.body);
        (
            serde_json::from_str(&response.body).expect("a JWKS"),
            response.header("cache-control").map(str::to_owned),
        )
    }

    /// Stops the provider: its port is closed when this returns.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the provider and starts it again on the same port with `config` (new keys: a
    /// rotation). Tokens it issued before stay valid wherever its keys are accepted.
    pub fn restart(&mut self, config: ProviderConfig) {
        self.stop();
        self.config = config;
        self.spawn();
    }

    /// A new key pair for `alg` (`RS256`, `PS256`, `ES256`, `EdDSA`) named `kid`.
    ///
    /// Node.js 20 once hung in a CI run before printing anything (every thread waiting on a
    /// futex, for eight minutes): each try gets [`GENKEY_DEADLINE`], and a hung one is killed
    /// and run again, three times at most.
    pub fn genkey(alg: &str, kid: &str) -> KeyPair {
        let stdout = (0..3).find_map(|_| genkey_once(alg, kid)).unwrap_or_else(|| {
            panic!("node provider.mjs genkey {alg} did not finish within {GENKEY_DEADLINE:?}, three times")
        });
        let v: Value = serde_json::from_slice(&stdout).expect("genkey prints JSON");
        KeyPair {
            kid: kid.to_owned(),
            alg: alg.to_owned(),
            private_jwk: v["private_jwk"].clone(),
            private_pem: v["private_pem"].as_str().expect("a PEM").to_owned(),
            public_jwk: v["public_jwk"].to_string(),
        }
    }

    fn spawn(&mut self) {
        let config_file = self.folder.path().join("config.json");
        std::fs::write(&config_file, self.config.to_json(self.port).to_string()).unwrap();
        let log = std::fs::File::create(self.folder.path().join("provider.log")).unwrap();
        let mut child = Command::new(node())
            .arg(script())
            .arg("serve")
            .arg(&config_file)
            .current_dir(install())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run node ({e}): {INSTALL_NODE}"));
        let stdout = child.stdout.take().unwrap();
        self.child = Some(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let ready = BufReader::new(stdout).lines().map_while(Result::ok).any(|line| line == "ready");
            let _ = tx.send(ready);
        });
        let ready = rx.recv_timeout(Duration::from_secs(30)).unwrap_or(false);
        let log = std::fs::read_to_string(self.folder.path().join("provider.log")).unwrap_or_default();
        assert!(ready, "the OpenID provider did not start:\n{log}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::http::request(self.address(), "GET", "/.well-known/openid-configuration")
            .map(|(status, _)| status)
            .unwrap_or(0)
            != 200
        {
            assert!(Instant::now() < deadline, "the provider's discovery document does not answer:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `node` program: `$LOGS_NODE`, else `node` on the `PATH`.
fn node() -> PathBuf {
    std::env::var_os("LOGS_NODE").map(PathBuf::from).unwrap_or_else(|| "node".into())
}

/// `provider.mjs` inside the installed folder.
fn script() -> PathBuf {
    install().join("provider.mjs")
}

/// The folder with `node_modules/oidc-provider` and `provider.mjs`, installed on first use.
fn install() -> PathBuf {
    static DONE: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();
    let mut done = DONE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    done.get_or_insert_with(npm_install).clone()
}

fn npm_install() -> PathBuf {
    let base = std::env::var_os("LOGS_TEST_VENV_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/logs-export")
    });
    let hash = fnv1a(format!("{PACKAGE_LOCK}{PROVIDER_MJS}").as_bytes());
    let folder = base.join(format!("npm-oidc-{hash:016x}"));
    if folder.join("node_modules/oidc-provider/package.json").exists() {
        return folder;
    }
    // oidc-provider 9 calls `crypto.hash`, which Node.js has from 20.12 on.
    let version = Command::new(node()).arg("--version").output();
    let version = match version {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        _ => panic!("this test needs Node.js to run the OpenID provider: {INSTALL_NODE}"),
    };
    let numbers: Vec<u32> =
        version.trim_start_matches('v').split('.').take(2).filter_map(|n| n.parse().ok()).collect();
    assert!(
        numbers.as_slice() >= [20, 12].as_slice(),
        "the OpenID provider needs Node.js 20.12 or newer, not {version}: {INSTALL_NODE}"
    );
    std::fs::create_dir_all(&base).unwrap();
    let partial = base.join(format!(".npm-oidc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial).unwrap();
    for (name, text) in
        [("package.json", PACKAGE_JSON), ("package-lock.json", PACKAGE_LOCK), ("provider.mjs", PROVIDER_MJS)]
    {
        std::fs::write(partial.join(name), text).unwrap();
    }
    checked(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&partial)
            .output(),
        &format!("npm ci (oidc-provider from the npm registry; needs npm: {INSTALL_NODE})"),
    );
    if std::fs::rename(&partial, &folder).is_err() {
        // Another process finished first: use its copy.
        let _ = std::fs::remove_dir_all(&partial);
    }
    folder
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// A form POST with an `Authorization` header; the status and body.
fn post(addr: SocketAddr, target: &str, authorization: &str, form: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "POST {target} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {authorization}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// The path of the npm folder, for messages.
pub fn installed_at() -> PathBuf {
    install()
}

/// How long one `genkey` may take: it takes well under a second.
const GENKEY_DEADLINE: Duration = Duration::from_secs(30);

/// What one run of `provider.mjs genkey` printed, or `None` if it did not finish within
/// [`GENKEY_DEADLINE`] (it is killed then); a run that fails panics with its output.
fn genkey_once(alg: &str, kid: &str) -> Option<Vec<u8>> {
    let folder = tempfile::tempdir().unwrap();
    let (out, err) = (folder.path().join("stdout"), folder.path().join("stderr"));
    let mut child = Command::new(node())
        .arg(script())
        .args(["genkey", alg, kid])
        .current_dir(install())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run node ({e}): {INSTALL_NODE}"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > GENKEY_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read(&out).unwrap();
    assert!(
        status.success(),
        "node provider.mjs genkey failed ({status}):\n{}\n{}",
        String::from_utf8_lossy(&stdout),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    Some(stdout)
}
