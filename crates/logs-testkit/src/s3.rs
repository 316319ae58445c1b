//! A real S3-protocol server on loopback: moto's server mode (`moto[server]`, pinned in
//! `requirements-s3.txt`), started by the test that needs it and stopped when dropped.
//!
//! Every listing of it is paginated: the server answers at most [`MAX_KEYS`] keys per
//! ListObjectsV2 page, so that every test that lists goes through continuation tokens. moto
//! accepts any credentials; [`ACCESS_KEY_ID`] and [`SECRET_ACCESS_KEY`] are what the tests give.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::python;

const REQUIREMENTS: &str = include_str!("../requirements-s3.txt");

/// Keys per listing page.
pub const MAX_KEYS: usize = 3;
pub const ACCESS_KEY_ID: &str = "AKIATESTKEYLOGSEXPORT";
pub const SECRET_ACCESS_KEY: &str = "test-secret-0f3b8c1d9e7a6b5c4d3e2f1a";
pub const REGION: &str = "us-east-1";

/// A running moto server.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `python` of the environment with moto, made on first use.
pub fn moto_python() -> std::path::PathBuf {
    python::python("s3", REQUIREMENTS)
}

impl S3Server {
    /// Starts moto on a free port of `127.0.0.1` and waits until it answers.
    pub fn start() -> S3Server {
        S3Server::start_with(&[])
    }

    /// Starts moto with authentication on: every request must be signed with keys of a user
    /// of moto's own IAM, so the test keys are refused (`InvalidAccessKeyId`).
    pub fn start_with_authentication() -> S3Server {
        S3Server::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")])
    }

    fn start_with(env: &[(&str, &str)]) -> S3Server {
        let python = moto_python();
        // A free port: taken from the kernel, let go, and given to moto at once.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .env("MOTO_S3_DEFAULT_MAX_KEYS", MAX_KEYS.to_string())
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto's server (python -m moto.server)");
        let server = S3Server { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while http(server.addr, "GET", "/", &[]).is_err() {
            assert!(Instant::now() < deadline, "moto did not answer on {} within 30 s", server.addr);
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates `bucket` (a plain PUT: moto takes unsigned requests).
    pub fn create_bucket(&self, bucket: &str) {
        let status = http(self.addr, "PUT", &format!("/{bucket}"), &[]).expect("create the bucket");
        assert_eq!(status, 200, "PUT /{bucket}");
    }

    /// The keys of `bucket` below `prefix`, every page of ListObjectsV2 followed.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let between = |text: &str, open: &str, close: &str| -> Vec<String> {
            text.split(open).skip(1).filter_map(|rest| rest.split(close).next()).map(str::to_owned).collect()
        };
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut target = format!("/{bucket}?list-type=2&prefix={}", percent_encode(prefix));
            if let Some(token) = &token {
                target.push_str(&format!("&continuation-token={}", percent_encode(token)));
            }
            let body = get_body(self.addr, &target).expect("list the bucket");
            keys.extend(between(&body, "<Key>", "</Key>"));
            token = between(&body, "<NextContinuationToken>", "</NextContinuationToken>").into_iter().next();
            if token.is_none() {
                return keys;
            }
        }
    }

    /// The variables a child process (`logs …`) needs to use this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY.to_owned()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
        ]
    }

    /// Uploads every file below `folder` to `bucket`, at `prefix` + its relative path, with
    /// moto's own Python client (boto3): the dataset arrives as another tool wrote it.
    pub fn upload_folder(&self, folder: &Path, bucket: &str, prefix: &str) {
        let script = r#"
import os, sys, boto3
endpoint, folder, bucket, prefix = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
for root, _, files in os.walk(folder):
    for name in files:
        path = os.path.join(root, name)
        key = os.path.relpath(path, folder).replace(os.sep, "/")
        s3.upload_file(path, bucket, f"{prefix}/{key}" if prefix else key)
"#;
        let output = Command::new(moto_python())
            .args(["-c", script, &self.endpoint()])
            .arg(folder)
            .args([bucket, prefix])
            .output();
        python::checked(output, "upload the dataset with boto3");
    }
}

/// Every byte but letters, digits and `-._~` as `%XX`.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A GET's response body (the whole response after its head).
fn get_body(addr: SocketAddr, target: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let request = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response).into_owned();
    Ok(text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default())
}

/// Sends one request with an empty body; the response's status.
fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let line = String::from_utf8_lossy(&response);
    line.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status from {addr}")))
}
