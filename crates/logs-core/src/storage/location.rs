//! Where a dataset lives: a local folder, or a prefix in an S3-compatible bucket.
//!
//! A location is written as a local path (`testdata/dataset`), a `file:///…` URL or an
//! `s3://bucket/prefix` URL. S3 settings come from the standard variables (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//! `AWS_ALLOW_HTTP`, …, read by `object_store`), and [`S3Options`] overrides the endpoint,
//! region, addressing style and plain-HTTP permission. Credentials are never part of a
//! location: a URL carrying a user name or password is refused, and neither this type nor its
//! errors ever print one.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};
use percent_encoding::percent_decode_str;

use crate::error::{Error, Result};

/// A dataset's location (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetLocation {
    /// A folder on this machine.
    Local(PathBuf),
    /// The keys below `prefix` (no leading or trailing `/`; empty for the whole bucket).
    S3 { bucket: String, prefix: String },
}

impl DatasetLocation {
    /// Parses a local path, a `file://` URL or an `s3://bucket/prefix` URL.
    pub fn parse(text: &str) -> Result<DatasetLocation> {
        let invalid = |message: String| Error::Config { setting: "data", message };
        let Some((scheme, _)) = text.split_once("://").filter(|(s, _)| is_scheme(s)) else {
            if text.is_empty() {
                return Err(invalid("the dataset location is empty".into()));
            }
            return Ok(DatasetLocation::Local(PathBuf::from(text)));
        };
        // The URL's text is never quoted back: it could hold a password.
        let url = url::Url::parse(text)
            .map_err(|e| invalid(format!("the dataset location is not a valid {scheme}:// URL ({e})")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "the dataset location holds credentials; give them in AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY instead"
                    .into(),
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(invalid("the dataset location may not have a query (`?`) or fragment (`#`)".into()));
        }
        match url.scheme() {
            "file" => url
                .to_file_path()
                .map(DatasetLocation::Local)
                .map_err(|()| invalid("a file:// location must be an absolute local path".into())),
            "s3" => {
                let bucket = url.host_str().filter(|b| !b.is_empty()).ok_or_else(|| {
                    invalid("an s3:// location names a bucket: s3://bucket or s3://bucket/prefix".into())
                })?;
                if url.port().is_some() {
                    return Err(invalid(
                        "an s3:// location has no port; give the server in --s3-endpoint or \
                         AWS_ENDPOINT_URL"
                            .into(),
                    ));
                }
                let prefix = percent_decode_str(url.path().trim_matches('/'))
                    .decode_utf8()
                    .map_err(|_| invalid("the s3:// prefix is not UTF-8".into()))?
                    .into_owned();
                // Looked for in the text as given: the URL parser has resolved `a/../b` to `b`
                // already, where S3 would take the dots as a key's characters.
                if (prefix.split('/').any(str::is_empty) && !prefix.is_empty()) || has_dot_segment(text) {
                    return Err(invalid("the s3:// prefix has an empty, `.` or `..` segment".into()));
                }
                Ok(DatasetLocation::S3 { bucket: bucket.to_owned(), prefix })
            }
            other => Err(invalid(format!(
                "unsupported scheme `{other}://`: a location is a local path, a file:// URL or an s3:// URL"
            ))),
        }
    }

    /// The store and the prefix of an S3 location, built with `options` over the standard
    /// variables; `None` for a local folder.
    pub fn object_store(&self, options: &S3Options) -> Result<Option<(Arc<dyn ObjectStore>, ObjectPath)>> {
        let DatasetLocation::S3 { bucket, prefix } = self else { return Ok(None) };
        let store = options.builder().with_bucket_name(bucket).build().map_err(|e| Error::Config {
            setting: "data",
            // object_store's builder errors name settings, never their secret values.
            message: format!("cannot use bucket `{bucket}`: {e}"),
        })?;
        // Parsed as is: `ObjectPath::from` would percent-encode non-ASCII characters, and the
        // keys would then not match.
        let prefix = ObjectPath::parse(prefix).map_err(|e| Error::Config {
            setting: "data",
            message: format!("the s3:// prefix is not a valid key prefix ({e})"),
        })?;
        Ok(Some((Arc::new(store), prefix)))
    }
}

/// Whether the path of the URL `text` has a `.` or `..` segment, percent-encoded or not.
fn has_dot_segment(text: &str) -> bool {
    let after_scheme = text.split_once("://").map_or("", |(_, rest)| rest);
    let path = after_scheme.split_once('/').map_or("", |(_, path)| path);
    path.split('/').any(|segment| matches!(&*percent_decode_str(segment).decode_utf8_lossy(), "." | ".."))
}

fn is_scheme(s: &str) -> bool {
    s.len() > 1
        && s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

impl fmt::Display for DatasetLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetLocation::Local(path) => write!(f, "{}", path.display()),
            DatasetLocation::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            DatasetLocation::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

impl std::str::FromStr for DatasetLocation {
    type Err = Error;
    fn from_str(text: &str) -> Result<DatasetLocation> {
        DatasetLocation::parse(text)
    }
}

impl TryFrom<&str> for DatasetLocation {
    type Error = Error;
    fn try_from(text: &str) -> Result<DatasetLocation> {
        DatasetLocation::parse(text)
    }
}

impl TryFrom<&String> for DatasetLocation {
    type Error = Error;
    fn try_from(text: &String) -> Result<DatasetLocation> {
        DatasetLocation::parse(text)
    }
}

impl TryFrom<String> for DatasetLocation {
    type Error = Error;
    fn try_from(text: String) -> Result<DatasetLocation> {
        DatasetLocation::parse(&text)
    }
}

impl From<&Path> for DatasetLocation {
    fn from(path: &Path) -> DatasetLocation {
        DatasetLocation::Local(path.to_owned())
    }
}

impl From<PathBuf> for DatasetLocation {
    fn from(path: PathBuf) -> DatasetLocation {
        DatasetLocation::Local(path)
    }
}

impl From<&PathBuf> for DatasetLocation {
    fn from(path: &PathBuf) -> DatasetLocation {
        DatasetLocation::Local(path.clone())
    }
}

/// How requests name the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// `https://endpoint/bucket/key`: what most S3-compatible servers expect.
    Path,
    /// `https://bucket.endpoint/key`: what AWS itself prefers.
    VirtualHosted,
}

/// Settings of S3 locations that override the standard variables. `Default`: none, so the
/// variables (or `object_store`'s defaults: AWS's endpoint for the region, path-style
/// addressing, HTTPS only) apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Options {
    /// The server's URL, such as `http://127.0.0.1:9000` (like `AWS_ENDPOINT_URL`).
    pub endpoint: Option<String>,
    /// Like `AWS_REGION`.
    pub region: Option<String>,
    pub addressing: Option<Addressing>,
    /// Allow a plain `http://` endpoint (like `AWS_ALLOW_HTTP=true`).
    pub allow_http: Option<bool>,
    /// Credentials given by an embedder (instead of `AWS_ACCESS_KEY_ID`, …).
    pub credentials: Option<S3Credentials>,
}

/// Credentials of an S3 location given in code. `Debug` prints no part of them.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl fmt::Debug for S3Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("S3Credentials(redacted)")
    }
}

/// Transient failures (5xx, timeouts, reset connections) are retried with exponential backoff
/// until this many retries or this long after the first attempt.
const MAX_RETRIES: usize = 5;
const RETRY_DEADLINE: Duration = Duration::from_secs(30);

impl S3Options {
    fn builder(&self) -> AmazonS3Builder {
        self.builder_over(AmazonS3Builder::from_env())
    }

    /// These options over `base` (the standard `AWS_*` variables): every setting `base` has
    /// and these do not name stays, the client's (`AWS_PROXY_URL`, `AWS_TIMEOUT`, …) included.
    fn builder_over(&self, base: AmazonS3Builder) -> AmazonS3Builder {
        let mut builder = base.with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_DEADLINE,
        });
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(credentials) = &self.credentials {
            builder = builder
                .with_access_key_id(&credentials.access_key_id)
                .with_secret_access_key(&credentials.secret_access_key);
            if let Some(token) = &credentials.session_token {
                builder = builder.with_token(token);
            }
        }
        if let Some(region) = &self.region {
            builder = builder.with_region(region);
        }
        if let Some(addressing) = self.addressing {
            builder = builder.with_virtual_hosted_style_request(addressing == Addressing::VirtualHosted);
        }
        if let Some(allow) = self.allow_http {
            builder = builder.with_allow_http(allow);
        }
        // Timeouts are object_store's (5 s to connect, 30 s per request) unless the environment
        // sets them (`AWS_CONNECT_TIMEOUT`, `AWS_TIMEOUT`).
        builder
    }
}

#[cfg(test)]
mod tests {
    use object_store::ClientConfigKey;
    use object_store::aws::AmazonS3ConfigKey;

    use super::*;

    fn s3(bucket: &str, prefix: &str) -> DatasetLocation {
        DatasetLocation::S3 { bucket: bucket.into(), prefix: prefix.into() }
    }

    /// The client settings of the environment survive ours: a proxy, a timeout and
    /// `AWS_ALLOW_HTTP` stay, and a flag overrides the variable.
    #[test]
    fn client_settings_from_the_environment_are_kept() {
        let client = |key| AmazonS3ConfigKey::Client(key);
        let env = || {
            AmazonS3Builder::new()
                .with_config(client(ClientConfigKey::ProxyUrl), "http://proxy.internal:3128")
                .with_config(client(ClientConfigKey::Timeout), "7s")
                .with_config(client(ClientConfigKey::AllowHttp), "true")
        };
        let built = S3Options::default().builder_over(env());
        let value = |key| built.get_config_value(&client(key));
        assert_eq!(value(ClientConfigKey::ProxyUrl).as_deref(), Some("http://proxy.internal:3128"));
        assert_eq!(value(ClientConfigKey::Timeout).as_deref(), Some("7s"));
        assert_eq!(value(ClientConfigKey::ConnectTimeout).as_deref(), Some("5s"));
        assert_eq!(value(ClientConfigKey::AllowHttp).as_deref(), Some("true"));
        let refused = S3Options { allow_http: Some(false), ..Default::default() }.builder_over(env());
        assert_eq!(refused.get_config_value(&client(ClientConfigKey::AllowHttp)).as_deref(), Some("false"));
        let defaults = S3Options::default().builder_over(AmazonS3Builder::new());
        assert_eq!(defaults.get_config_value(&client(ClientConfigKey::Timeout)).as_deref(), Some("30s"));
    }

    /// `--s3-addressing` picks the style whatever `AWS_VIRTUAL_HOSTED_STYLE_REQUEST` says, and
    /// without the flag the variable's choice stays.
    #[test]
    fn the_addressing_flag_picks_the_style() {
        let style = |addressing, env: &str| {
            let base = AmazonS3Builder::new().with_config(AmazonS3ConfigKey::VirtualHostedStyleRequest, env);
            let built = S3Options { addressing, ..Default::default() }.builder_over(base);
            built.get_config_value(&AmazonS3ConfigKey::VirtualHostedStyleRequest).unwrap()
        };
        for env in ["true", "false"] {
            assert_eq!(style(Some(Addressing::VirtualHosted), env), "true");
            assert_eq!(style(Some(Addressing::Path), env), "false");
            assert_eq!(style(None, env), env);
        }
    }

    #[test]
    fn locations_parse() {
        assert_eq!(
            DatasetLocation::parse("testdata/dataset").unwrap(),
            DatasetLocation::Local("testdata/dataset".into())
        );
        assert_eq!(DatasetLocation::parse("/data/x").unwrap(), DatasetLocation::Local("/data/x".into()));
        assert_eq!(
            DatasetLocation::parse("file:///data/x").unwrap(),
            DatasetLocation::Local("/data/x".into())
        );
        assert_eq!(DatasetLocation::parse("s3://logs").unwrap(), s3("logs", ""));
        assert_eq!(DatasetLocation::parse("s3://logs/").unwrap(), s3("logs", ""));
        assert_eq!(DatasetLocation::parse("s3://logs/errors/v1/").unwrap(), s3("logs", "errors/v1"));
        assert_eq!(DatasetLocation::parse("s3://logs/my%20data/é").unwrap(), s3("logs", "my data/é"));
        assert_eq!(DatasetLocation::parse("s3://logs/a.b/..c/...").unwrap(), s3("logs", "a.b/..c/..."));
        assert_eq!(s3("logs", "a/b").to_string(), "s3://logs/a/b");
        assert_eq!(s3("logs", "").to_string(), "s3://logs");
        assert_eq!(DatasetLocation::Local("/data/my x".into()).to_string(), "/data/my x");
        // A `://` after something that is not a URL scheme (two or more letters, digits, `+`,
        // `-` or `.`, from a letter) is part of a local path: a drive-letter-like `c:`, a
        // leading digit, a space.
        for path in ["c://data/x", "1x://data", "my data://x", "data/x://y"] {
            assert_eq!(DatasetLocation::parse(path).unwrap(), DatasetLocation::Local(path.into()), "{path}");
        }
        assert!(
            DatasetLocation::parse("s3+x://logs").unwrap_err().to_string().contains("unsupported scheme")
        );
    }

    #[test]
    fn credentials_are_never_printed() {
        let options = S3Options {
            credentials: Some(S3Credentials {
                access_key_id: "AKIAEXAMPLE".into(),
                secret_access_key: "hunter2".into(),
                session_token: Some("sessiontoken".into()),
            }),
            ..S3Options::default()
        };
        let printed = format!("{options:?}");
        for secret in ["AKIAEXAMPLE", "hunter2", "sessiontoken"] {
            assert!(!printed.contains(secret), "{printed}");
        }
    }

    #[test]
    fn bad_locations_are_refused_without_quoting_secrets() {
        for (text, expected) in [
            ("", "empty"),
            ("s3://", "names a bucket"),
            ("s3://AKIAEXAMPLE:hunter2@logs/x", "holds credentials"),
            ("s3://user@logs/x", "holds credentials"),
            ("s3://logs/x?secret=hunter2", "query"),
            ("s3://logs:9000/x", "no port"),
            ("s3://logs/a//b", "empty"),
            ("s3://logs/a/../b", "`..`"),
            ("s3://logs/a/./b", "`..`"),
            ("s3://logs/%2E%2e/b", "`..`"),
            ("s3://logs/a/..", "`..`"),
            ("gs://logs/x", "unsupported scheme `gs://`"),
            ("file://relative/x", "absolute"),
        ] {
            let error = DatasetLocation::parse(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.contains("`data`"), "{text}: {error}");
            assert!(!error.contains("hunter2"), "{text}: {error}");
        }
    }
}
