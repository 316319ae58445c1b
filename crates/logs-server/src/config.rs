//! Why the service cannot be set up: one error type for the files and settings that
//! `logs-server` reads and checks before it serves (the tokens file, the introspection
//! credentials and grants, `applications.toml`, [`crate::Settings`]).

use std::path::PathBuf;

/// Why a configuration file or setting cannot be used. A file that cannot be read is not
/// the content's fault ([`ConfigError::Unreadable`]: `logs serve` exits 1); content or a
/// setting that says something invalid is ([`ConfigError::InvalidFile`],
/// [`ConfigError::Invalid`]: exit 2). No message quotes a secret.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read: missing, permission denied, not a file.
    #[error("cannot read the {what} {}: {source}", path.display())]
    Unreadable {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An object of the dataset's storage (such as `applications.toml` in a bucket) could not
    /// be read.
    #[error("cannot read the {what}: {source}")]
    UnreadableObject {
        what: &'static str,
        #[source]
        source: logs_core::Error,
    },
    /// A file was read, and its content is invalid.
    #[error("the {what} {} is invalid: {message}", path.display())]
    InvalidFile { what: &'static str, path: PathBuf, message: String },
    /// Content or settings given directly are invalid.
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    /// Reads `path`, the `what` (e.g. "tokens file"), as text.
    pub(crate) fn read(what: &'static str, path: &std::path::Path) -> Result<String, ConfigError> {
        std::fs::read_to_string(path).map_err(|source| ConfigError::Unreadable {
            what,
            path: path.to_owned(),
            source,
        })
    }

    /// The content of `path` (the `what`) was invalid, as `error` says.
    pub(crate) fn in_file(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(ConfigError) -> ConfigError {
        move |error| ConfigError::InvalidFile { what, path: path.to_owned(), message: error.to_string() }
    }
}

impl From<String> for ConfigError {
    fn from(message: String) -> ConfigError {
        ConfigError::Invalid(message)
    }
}

/// The TOML error's line and message, with every quoted value blanked out (serde's messages
/// quote the offending value, which could be a token).
pub(crate) fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let mut message = String::new();
    let mut quoted = false;
    for c in e.message().chars() {
        if c == '"' {
            if !quoted {
                message.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            message.push(c);
        }
    }
    let message = message.trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let line = text.get(..span.start).map_or(0, |before| before.matches('\n').count()) + 1;
            format!("line {line}: {message}")
        }
        None => message,
    }
}
