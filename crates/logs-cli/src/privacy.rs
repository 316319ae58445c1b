//! The field-policy flags of `logs serve` and `logs export` (see `logs_core::privacy`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use logs_core::{Policies, Privacy, PseudonymKey};
use logs_server::service::PrivacyFiles;

use crate::Failure;

#[derive(Debug, Args)]
pub(crate) struct PrivacyArgs {
    /// A TOML file of field policies: named policies (`[policies.NAME] fields = { FIELD =
    /// "allow|deny|pseudonymise|truncate|coarsen|scrub" }`), the scopes that select them,
    /// the default, and more patterns to scrub.
    #[arg(long, env = "LOGS_FIELD_POLICIES", value_name = "FILE")]
    field_policies: Option<PathBuf>,
    /// A file of at least 32 random bytes: the key of `pseudonymise` (HMAC-SHA-256).
    #[arg(long, env = "LOGS_PSEUDONYM_KEY_FILE", value_name = "FILE")]
    pseudonym_key_file: Option<PathBuf>,
}

impl PrivacyArgs {
    /// The service's files.
    pub(crate) fn files(&self) -> PrivacyFiles {
        PrivacyFiles {
            field_policies: self.field_policies.clone(),
            pseudonym_key: self.pseudonym_key_file.clone(),
        }
    }

    /// The policy `logs export` applies: `name` from the file, else the file's default, else
    /// none. A file or key that cannot be read or used is bad usage.
    pub(crate) fn privacy(&self, name: Option<&str>) -> Result<Arc<Privacy>, Failure> {
        let key = match &self.pseudonym_key_file {
            Some(path) => Some(Arc::new(
                PseudonymKey::from_file(path)
                    .map_err(|e| Failure::Usage(format!("--pseudonym-key-file: {e}")))?,
            )),
            None => None,
        };
        let policies = match &self.field_policies {
            Some(path) => Policies::from_file(path, key)
                .map_err(|e| Failure::Usage(format!("--field-policies: {e}")))?,
            None if name.is_some() => return Err(Failure::Usage("--policy needs --field-policies".into())),
            None => return Ok(Privacy::none()),
        };
        match name {
            None => Ok(Arc::clone(policies.default_policy())),
            Some(name) => policies.named(name).cloned().ok_or_else(|| {
                let known: Vec<&str> = policies.names().collect();
                Failure::Usage(format!(
                    "--policy: `{name}` is not a policy of the file; it defines: {}",
                    known.join(", ")
                ))
            }),
        }
    }
}
