//! A real S3-protocol server on loopback: moto's server mode (`moto[server]`, pinned in
//! `requirements-s3.txt`), started by the test that needs it and stopped when dropped.
//!
//! Every listing of it is paginated: the server answers at most [`MAX_KEYS`] keys per
//! ListObjectsV2 page, so that every test that lists goes through continuation tokens. moto
//! accepts any credentials; [`ACCESS_KEY_ID`] and [`SECRET_ACCESS_KEY`] are what the tests give.

use std::net::SocketAddr;
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

    /// Starts moto answering at most `max_keys` keys per listing page (S3's own is 1 000).
    pub fn start_with_max_keys(max_keys: usize) -> S3Server {
        S3Server::start_with(&[("MOTO_S3_DEFAULT_MAX_KEYS", &max_keys.to_string())])
    }

    fn start_with(env: &[(&str, &str)]) -> S3Server {
        let python = moto_python();
        let port = crate::free_port();
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
        while crate::http::request(server.addr, "GET", "/").is_err() {
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
        let (status, _) =
            crate::http::request(self.addr, "PUT", &format!("/{bucket}")).expect("create the bucket");
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
            let (_, body) = crate::http::request(self.addr, "GET", &target).expect("list the bucket");
            keys.extend(between(&body, "<Key>", "</Key>"));
            token = between(&body, "<NextContinuationToken>", "</NextContinuationToken>").into_iter().next();
            if token.is_none() {
                return keys;
            }
        }
    }

    /// The keys of the multipart uploads begun in `bucket` and neither completed nor aborted
    /// (the first page of ListMultipartUploads: up to 1 000).
    pub fn multipart_uploads(&self, bucket: &str) -> Vec<String> {
        let (status, body) =
            crate::http::request(self.addr, "GET", &format!("/{bucket}?uploads")).expect("list the uploads");
        assert_eq!(status, 200, "GET /{bucket}?uploads: {body}");
        body.split("<Upload>")
            .skip(1)
            .filter_map(|upload| upload.split("<Key>").nth(1)?.split("</Key>").next().map(str::to_owned))
            .collect()
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

    /// Downloads every object of `bucket` below `prefix` into `folder`, at its key relative to
    /// `prefix`, with boto3: the bucket's contents as another tool reads them.
    pub fn download_folder(&self, bucket: &str, prefix: &str, folder: &Path) {
        let script = r#"
import os, sys, boto3
endpoint, bucket, prefix, folder = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
    for item in page.get("Contents", []):
        path = os.path.join(folder, item["Key"][len(prefix) + 1:])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, item["Key"], path)
"#;
        let output = Command::new(moto_python())
            .args(["-c", script, &self.endpoint(), bucket, prefix])
            .arg(folder)
            .output();
        python::checked(output, "download the dataset with boto3");
    }

    /// Deletes the object `key` of `bucket`, with boto3.
    pub fn delete_object(&self, bucket: &str, key: &str) {
        let script = r#"
import sys, boto3
endpoint, bucket, key = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
s3.delete_object(Bucket=bucket, Key=key)
"#;
        let output = Command::new(moto_python()).args(["-c", script, &self.endpoint(), bucket, key]).output();
        python::checked(output, "delete an object with boto3");
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
