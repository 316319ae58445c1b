//! A real OpenID provider on `127.0.0.1`: npm's `oidc-provider` 9 (panva's certified
//! implementation, pinned in `oidc/package-lock.json`), run by the machine's Node.js with
//! `oidc/provider.mjs`. It issues access tokens by the client credentials grant: a JWT
//! (`typ: at+jwt`, signed with the client's algorithm) for a token asked with a `resource`
//! ([`AUDIENCE`] or [`OTHER_AUDIENCE`]), an opaque token without one, which its introspection
//! endpoint describes. Both carry the client's applications as a top-level claim.
//!
//! The package is installed on first use by `npm ci` from the npm registry, under
//! `~/.cache/logs-export/npm-oidc-<hash of the lock file>` (`$LOGS_TEST_NPM_DIR` instead of
//! `~/.cache/logs-export`). Without Node.js 20 or later and npm, or when npm fails, the test
//! fails saying how to install them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::python::{checked, fnv1a};

const PACKAGE: &str = include_str!("../oidc/package.json");
const LOCK: &str = include_str!("../oidc/package-lock.json");

/// The resource indicator that is logs-export: the `aud` of its JWT access tokens.
pub const AUDIENCE: &str = "https://logs.example/api";
/// Another resource the provider issues tokens for, to test a wrong audience.
pub const OTHER_AUDIENCE: &str = "https://other.example/api";

/// A signing key pair made by Node's `crypto.generateKeyPairSync`.
#[derive(Clone, Debug)]
pub struct KeyPair {
    pub kid: String,
    /// `RS256`, `PS256`, `ES256` or `EdDSA`.
    pub alg: String,
    /// The private key, PKCS#8 PEM (to sign tokens of one's own).
    pub private_pem: String,
    /// The public JWK (JSON), with `kid`, `alg` and `use: sig`.
    pub public_jwk: String,
    /// The private JWK (JSON) the provider signs with.
    pub private_jwk: String,
}

/// A new key pair of `alg` (`RS256`, `PS256`, `ES256` or `EdDSA`) named `kid`.
pub fn genkey(alg: &str, kid: &str) -> KeyPair {
    check_node();
    let output = checked(
        Command::new("node").arg(script()).args(["genkey", "--alg", alg, "--kid", kid]).output(),
        "node provider.mjs genkey",
    );
    let key: Value = serde_json::from_slice(&output.stdout).expect("genkey prints JSON");
    KeyPair {
        kid: kid.to_owned(),
        alg: alg.to_owned(),
        private_pem: key["private_pem"].as_str().expect("private_pem").to_owned(),
        public_jwk: key["public_jwk"].to_string(),
        private_jwk: key["private_jwk"].to_string(),
    }
}

/// The applications a client's tokens grant.
#[derive(Clone, Debug)]
pub enum Applications {
    Ids(Vec<u64>),
    /// `"*"`: every application.
    All,
}

/// A client of the client credentials grant, authenticating with HTTP Basic.
#[derive(Clone, Debug)]
pub struct Client {
    pub client_id: String,
    pub client_secret: String,
    /// The scopes it may ask for, space-separated.
    pub scope: String,
    /// Put into its tokens as the claim named by [`ProviderConfig::applications_claim`].
    pub applications: Applications,
    /// The signing algorithm of its JWT access tokens.
    pub alg: String,
}

impl Client {
    /// A client allowed `service:read` and `service:write`, with the secret `secret-<client_id>`.
    pub fn new(client_id: &str, alg: &str, applications: Applications) -> Client {
        Client {
            client_id: client_id.to_owned(),
            client_secret: format!("secret-{client_id}"),
            scope: "service:read service:write".to_owned(),
            applications,
            alg: alg.to_owned(),
        }
    }
}

/// What the provider is started with.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// Published in this order in the JWKS; a client's tokens are signed with the first key of
    /// its algorithm.
    pub keys: Vec<KeyPair>,
    pub clients: Vec<Client>,
    /// The name of the applications claim (default `applications`).
    pub applications_claim: String,
    /// The lifetime of access tokens (default 5 minutes).
    pub access_token_ttl: Duration,
    /// A `Cache-Control` header for the JWKS answer (default none: the provider sends none).
    pub jwks_cache_control: Option<String>,
}

impl ProviderConfig {
    pub fn new(keys: Vec<KeyPair>, clients: Vec<Client>) -> ProviderConfig {
        ProviderConfig {
            keys,
            clients,
            applications_claim: "applications".to_owned(),
            access_token_ttl: Duration::from_secs(300),
            jwks_cache_control: None,
        }
    }

    fn to_json(&self) -> String {
        let keys: Vec<Value> =
            self.keys.iter().map(|k| serde_json::from_str(&k.private_jwk).expect("a JWK")).collect();
        let clients: Vec<Value> = self
            .clients
            .iter()
            .map(|c| {
                let applications = match &c.applications {
                    Applications::Ids(ids) => json!(ids),
                    Applications::All => json!("*"),
                };
                json!({"client_id": c.client_id, "client_secret": c.client_secret, "scope": c.scope,
                       "applications": applications, "alg": c.alg})
            })
            .collect();
        json!({
            "keys": keys,
            "clients": clients,
            "audience": AUDIENCE,
            "other_audience": OTHER_AUDIENCE,
            "applications_claim": self.applications_claim,
            "access_token_ttl": self.access_token_ttl.as_secs().max(1),
            "jwks_cache_control": self.jwks_cache_control,
        })
        .to_string()
    }
}

/// The running provider, killed when dropped.
#[derive(Debug)]
pub struct OidcProvider {
    child: Option<Child>,
    port: u16,
    config: ProviderConfig,
    folder: tempfile::TempDir,
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl OidcProvider {
    /// Starts the provider on a free port of `127.0.0.1` and waits until its discovery
    /// document answers.
    pub fn start(config: ProviderConfig) -> OidcProvider {
        let folder = tempfile::Builder::new().prefix("logs-oidc-").tempdir().expect("a temporary folder");
        let mut provider = OidcProvider { child: None, port: crate::free_port(), config, folder };
        provider.spawn();
        provider
    }

    /// Stops the provider (if running) and starts it again on the same port with `config`,
    /// e.g. to rotate keys: restart with keys `[new, old]`, then `[new]`. Its opaque tokens are
    /// forgotten (they live in the process's memory).
    pub fn restart(&mut self, config: ProviderConfig) {
        self.stop();
        self.config = config;
        self.spawn();
    }

    /// Kills the provider; returns once the process is gone and its port refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            child.wait().expect("wait for the provider");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(self.addr()).is_ok() {
            assert!(
                Instant::now() < deadline,
                "{} still accepts connections after the provider stopped",
                self.addr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `http://127.0.0.1:<port>`, the `iss` of its tokens.
    pub fn issuer(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// [`AUDIENCE`].
    pub fn audience(&self) -> String {
        AUDIENCE.to_owned()
    }

    /// Where it publishes its keys.
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer())
    }

    /// Its token endpoint.
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer())
    }

    /// Its introspection endpoint (RFC 7662).
    pub fn introspection_endpoint(&self) -> String {
        format!("{}/token/introspection", self.issuer())
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// What the provider printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.folder.path().join("provider.log")).unwrap_or_default()
    }

    /// An access token for `client_id` (one of the configuration's clients) by the client
    /// credentials grant over the token endpoint: a JWT for `resource` ([`AUDIENCE`] or
    /// [`OTHER_AUDIENCE`]), an opaque token without one. `scope` is space-separated. The error
    /// is the provider's refusal (its status, `error` and `error_description`).
    pub fn token(&self, client_id: &str, resource: Option<&str>, scope: &str) -> Result<String, String> {
        let mut form = vec![("grant_type", "client_credentials"), ("scope", scope)];
        form.extend(resource.map(|r| ("resource", r)));
        let answer = self.post(client_id, "/token", &form)?;
        answer["access_token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| "no access_token in the answer".to_owned())
    }

    /// The introspection endpoint's answer about `token`, asked by `client_id`.
    pub fn introspect(&self, client_id: &str, token: &str) -> Result<Value, String> {
        self.post(client_id, "/token/introspection", &[("token", token)])
    }

    /// The JWKS it publishes, and the `Cache-Control` header of that answer.
    pub fn jwks(&self) -> (Value, Option<String>) {
        let response = crate::http::exchange(self.addr(), "GET", "/jwks", &[], b"").expect("GET /jwks");
        assert_eq!(response.status, 200, "GET /jwks: {}", response.body);
        let cache_control = response.header("cache-control").map(str::to_owned);
        (serde_json::from_str(&response.body).expect("a JWKS"), cache_control)
    }

    /// POSTs `form` to `path` with `client_id`'s HTTP Basic credentials; the JSON answer of a
    /// 200, or the refusal.
    fn post(&self, client_id: &str, path: &str, form: &[(&str, &str)]) -> Result<Value, String> {
        let client = self
            .config
            .clients
            .iter()
            .find(|c| c.client_id == client_id)
            .ok_or_else(|| format!("no client {client_id} in the provider's configuration"))?;
        let credentials = format!("{}:{}", url_encode(&client.client_id), url_encode(&client.client_secret));
        let authorization =
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials));
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let response = crate::http::exchange(
            self.addr(),
            "POST",
            path,
            &[
                ("Authorization", authorization.as_str()),
                ("Content-Type", "application/x-www-form-urlencoded"),
                ("Accept", "application/json"),
            ],
            body.as_bytes(),
        )
        .map_err(|e| format!("POST {path}: {e}"))?;
        let answer: Value = serde_json::from_str(&response.body)
            .map_err(|e| format!("POST {path}: {} with no JSON ({e})", response.status))?;
        if response.status != 200 {
            return Err(format!(
                "POST {path}: {} {} {}",
                response.status,
                answer["error"].as_str().unwrap_or(""),
                answer["error_description"].as_str().unwrap_or("")
            ));
        }
        Ok(answer)
    }

    fn spawn(&mut self) {
        let modules = npm_dir().join("node_modules");
        let config = self.folder.path().join("config.json");
        std::fs::write(&config, self.config.to_json()).expect("write the provider's configuration");
        let log = std::fs::File::create(self.folder.path().join("provider.log")).expect("the provider's log");
        let child = Command::new("node")
            .arg(script())
            .args(["serve", "--port", &self.port.to_string(), "--config"])
            .arg(&config)
            .env("NODE_PATH", &modules)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the provider's log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start node {}: {e}", script().display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, _)) =
                crate::http::request(self.addr(), "GET", "/.well-known/openid-configuration")
            {
                return;
            }
            if let Some(status) =
                self.child.as_mut().expect("started").try_wait().expect("the provider's status")
            {
                panic!("the OpenID provider on {} stopped ({status}):\n{}", self.addr(), self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the OpenID provider on {} not ready within 30 s:\n{}",
                self.addr(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `oidc/provider.mjs`, beside this crate's sources.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("oidc/provider.mjs")
}

/// The form encoding of a Basic credential's parts (RFC 6749, 2.3.1).
fn url_encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

const INSTALL: &str = "the OpenID provider tests need Node.js 20 or later and npm \
    (Debian: apt-get install nodejs npm, where its nodejs is 20 or later; .ci/run installs them where missing)";

/// Panics, saying how to install them, unless `node` 20 or later and `npm` run.
fn check_node() {
    static CHECKED: OnceLock<()> = OnceLock::new();
    CHECKED.get_or_init(|| {
        let version = Command::new("node").arg("--version").output();
        let version = match &version {
            Ok(output) if output.status.success() => {
                String::from_utf8_lossy(&output.stdout).trim().to_owned()
            }
            _ => panic!("no node: {INSTALL}"),
        };
        let major: u32 =
            version.trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0);
        assert!(major >= 20, "node {version}: {INSTALL}");
        let npm = Command::new("npm").arg("--version").output();
        assert!(npm.is_ok_and(|o| o.status.success()), "no npm: {INSTALL}");
    });
}

/// The folder where `npm ci` installed the pinned packages, installing them on first use.
fn npm_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        check_node();
        let base = std::env::var_os("LOGS_TEST_NPM_DIR").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/logs-export")
        });
        let dir = base.join(format!("npm-oidc-{:016x}", fnv1a(LOCK.as_bytes())));
        if dir.join("node_modules/oidc-provider/package.json").exists() {
            return dir;
        }
        std::fs::create_dir_all(&base).expect("create the npm folder's parent");
        // Made beside its final place and renamed when complete, like the Python environments.
        let partial = base.join(format!(".npm-oidc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&partial).expect("create the npm folder");
        std::fs::write(partial.join("package.json"), PACKAGE).expect("write package.json");
        std::fs::write(partial.join("package-lock.json"), LOCK).expect("write package-lock.json");
        let npm = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&partial)
            .output();
        let npm = npm.unwrap_or_else(|e| panic!("npm ci: {e}: {INSTALL}"));
        assert!(
            npm.status.success(),
            "npm ci (oidc-provider, from the npm registry) failed ({}):\n{}\n{}",
            npm.status,
            String::from_utf8_lossy(&npm.stdout),
            String::from_utf8_lossy(&npm.stderr)
        );
        if std::fs::rename(&partial, &dir).is_err() {
            // Another process finished first: use its folder.
            let _ = std::fs::remove_dir_all(&partial);
        }
        assert!(
            dir.join("node_modules/oidc-provider/package.json").exists(),
            "no oidc-provider in {}",
            dir.display()
        );
        dir
    })
    .clone()
}

/// The header and the claims of a JWT, decoded without checking its signature; `None` when it
/// is not three base64url parts with JSON in the first two.
pub fn jwt_parts(token: &str) -> Option<(Value, Value)> {
    let parts: Vec<&str> = token.split('.').collect();
    let &[header, claims, _signature] = parts.as_slice() else { return None };
    let decode = |part: &str| -> Option<Value> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).ok()?;
        serde_json::from_slice(&bytes).ok()
    };
    Some((decode(header)?, decode(claims)?))
}
