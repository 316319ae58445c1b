//! Helpers of the tests that run `logs serve` as a process: start it, read the token and the
//! address it prints, and run `logs export` beside it.
#![allow(dead_code)]

pub mod python;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const LOGS: &str = env!("CARGO_BIN_EXE_logs");

/// A running `logs serve`, killed if the test fails before stopping it.
pub struct Served {
    pub child: Child,
    pub token: String,
    pub curl_url: String,
    pub base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn logs_command() -> Command {
    let mut command = Command::new(LOGS);
    for (name, _) in std::env::vars() {
        if name.starts_with("LOGS_") {
            command.env_remove(name);
        }
    }
    // One partition: rows come in file order, so bodies compare byte for byte.
    command.env("LOGS_TARGET_PARTITIONS", "1");
    command
}

pub fn serve(data: &Path) -> Served {
    serve_with(data, &[], Stdio::null())
}

/// `logs serve` with more flags, its log going to `stderr`.
pub fn serve_with(data: &Path, flags: &[&str], stderr: Stdio) -> Served {
    serve_env(data.as_os_str(), flags, stderr, &[])
}

/// `logs serve` over `data` (a path or a URL), with more flags and variables.
pub fn serve_env(data: &OsStr, flags: &[&str], stderr: Stdio, env: &[(&str, String)]) -> Served {
    let mut child = logs_command()
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(flags)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start logs serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let mut printed = Vec::new();
    let curl = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no curl line in {printed:#?}"));
        if line.trim_start().starts_with("curl ") {
            break line;
        }
        printed.push(line);
    };
    // curl -H 'Authorization: OAuth <token>' '<url>'
    let parts: Vec<&str> = curl.split('\'').collect();
    let token =
        parts[1].strip_prefix("Authorization: OAuth ").expect("the header in the curl command").to_owned();
    let curl_url = parts[3].to_owned();
    let base = curl_url.split("/logs/").next().unwrap().to_owned();
    assert!(printed.iter().any(|l| l.trim() == token), "the token on a line of its own: {printed:#?}");
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    Served { child, token, curl_url, base }
}

pub fn export(data: &Path, target: &str) -> Vec<u8> {
    export_with(data, &[], target)
}

/// `logs export` with more flags.
pub fn export_with(data: &Path, flags: &[&str], target: &str) -> Vec<u8> {
    let output =
        logs_command().args(["export", "--data"]).arg(data).args(flags).arg(target).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    output.stdout
}
