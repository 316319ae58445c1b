//! `logs serve --oidc-issuer … --oidc-audience …` as an operator runs it, against a real
//! OpenID provider (npm's `oidc-provider`, `logs_testkit::oidc`): JWTs checked with its keys,
//! opaque tokens introspected at the endpoint its discovery document names, a provider that is
//! down at start (503 until it answers, then accepted without a restart), the flags' errors,
//! and no token, nor any part of one, in the debug log.

mod common;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use logs_testkit::oidc::{Client, OidcProvider, ProviderConfig};
use serde_json::json;

const AUDIENCE: &str = "https://logs.example/api";
const EXPORT: &str = "/logs/v1/export/errors.csv?application_id=1001&date_since=2026-10-01&\
                      date_until=2026-10-02&fields=error_id,os_name&limit=3";

fn provider_config() -> ProviderConfig {
    let keys = vec![OidcProvider::genkey("ES256", "ec-1")];
    let client = |id: &str, scope: &str| Client {
        client_id: id.into(),
        client_secret: format!("{id}-secret"),
        scope: scope.into(),
        applications: json!([1001]),
        alg: "ES256".into(),
    };
    let clients = vec![client("loader", "service:read"), client("logs-export", "")];
    ProviderConfig::new(keys, clients, AUDIENCE, "https://other.example/api")
}

/// A running `logs serve`; killed when dropped.
struct Server {
    child: Child,
    base: String,
    admin: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Stops the server; what it logged.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `logs serve` with the provider's JWTs, and with its introspection endpoint for opaque
/// tokens when `introspect` (the provider must then answer at start).
fn start(provider: &OidcProvider, introspect: bool) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("introspection.toml");
    std::fs::write(&credentials, "client_id = \"logs-export\"\nclient_secret = \"logs-export-secret\"\n")
        .unwrap();
    let log = dir.path().join("stderr.log");
    let issuer = provider.issuer();
    let mut child = logs_command()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--log",
            "debug",
            "--data",
        ])
        .arg(testdata())
        .args(["--oidc-issuer", &issuer, "--oidc-audience", AUDIENCE, "--oidc-jwks-min-interval", "200ms"])
        .args(if introspect {
            vec![OsStr::new("--introspection-credentials"), credentials.as_os_str()]
        } else {
            vec![]
        })
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    let mut next = |prefix: &str| {
        let line = lines.find(|l| l.starts_with(prefix));
        let line = line.unwrap_or_else(|| {
            panic!("logs serve did not start:\n{}", std::fs::read_to_string(&log).unwrap())
        });
        line.rsplit(' ').next().unwrap().to_owned()
    };
    let base = next("logs serve: serving");
    let admin = next("metrics:").trim_end_matches("/metrics").to_owned();
    Server { child, base, admin, log, _dir: dir }
}

async fn get(server: &Server, token: &str) -> (u16, String) {
    logs_server::install_tls_provider();
    let response = reqwest::Client::new()
        .get(format!("{}{EXPORT}", server.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn readyz(server: &Server) -> (u16, String) {
    let response = reqwest::get(format!("{}/readyz", server.admin)).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn token(provider: &OidcProvider, resource: Option<&str>) -> String {
    tokio::task::block_in_place(|| provider.token("loader", resource, "service:read")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_and_opaque_tokens_of_the_provider_are_accepted_and_never_logged() {
    let provider = OidcProvider::start(provider_config());
    let server = start(&provider, true);
    let jwt = token(&provider, Some(AUDIENCE));
    let opaque = token(&provider, None);
    assert_eq!(jwt.split('.').count(), 3);
    assert_eq!(
        opaque.split('.').count(),
        1,
        "without a resource indicator the provider issues an opaque token"
    );
    for token in [&jwt, &opaque] {
        let (status, body) = get(&server, token).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.starts_with("error_id,os_name\n") && body.lines().count() == 4, "{body}");
    }
    let mut forged = jwt.clone();
    forged.truncate(jwt.len() - 4);
    forged.push_str("AAAA");
    assert_eq!(get(&server, &forged).await.0, 401);
    let logged = server.stop();
    assert!(logged.contains("DEBUG"), "logged at DEBUG");
    for token in [&jwt, &opaque, &forged] {
        for part in token.split('.').filter(|p| p.len() >= 16) {
            assert!(!logged.contains(part), "a part of a token is in the log");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_down_at_start_is_503_until_it_answers_then_its_tokens_work() {
    let mut provider = OidcProvider::start(provider_config());
    let jwt = token(&provider, Some(AUDIENCE));
    let config = provider.config().clone();
    provider.stop();
    let server = start(&provider, false);
    for _ in 0..2 {
        let (status, body) = get(&server, &jwt).await;
        assert_eq!(status, 503, "{body}");
        assert!(body.contains("identity_provider_unavailable"), "{body}");
    }
    // A balancer sends it nothing meanwhile.
    let (status, body) = readyz(&server).await;
    assert_eq!(status, 503);
    assert!(body.contains("identity_provider"), "{body}");
    provider.restart(config);
    eventually("the provider's keys are fetched", async || get(&server, &jwt).await.0 == 200).await;
    eventually("the replica is ready", async || readyz(&server).await.0 == 200).await;
    let logged = server.stop();
    assert!(logged.contains("cannot fetch the OpenID provider's keys"), "the outage is logged");
}

#[test]
fn bad_oidc_flags_are_usage_errors() {
    let run = |flags: &[&str]| {
        let output = logs_command()
            .args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(testdata())
            .args(flags)
            .output()
            .unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (code, stderr) = run(&["--oidc-issuer", "http://idp.example/realms/r", "--oidc-audience", "logs"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("https"), "{stderr}");
    let (code, stderr) = run(&["--oidc-issuer", "https://idp.example"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--oidc-audience"), "{stderr}");
    let (code, stderr) = run(&["--introspection-credentials", "/nonexistent.toml"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--introspection-url") && stderr.contains("--oidc-issuer"), "{stderr}");
}

/// Waits until `condition` holds (at most 20 s).
async fn eventually(what: &str, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
