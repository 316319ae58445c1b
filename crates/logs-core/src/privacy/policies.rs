//! The field-policies file: named policies, the scopes that select them, the default, and the
//! operator's scrub patterns (`logs serve --field-policies FILE`, `logs export --field-policies
//! FILE --policy NAME`).
//!
//! ```toml
//! default = "contractor"              # the policy of callers without one (omitted: allow all)
//! scrub_patterns = ["ACME-[0-9]{6}"]  # more secrets `scrub` replaces with [redacted]
//!
//! [policies.contractor]
//! fields = { service_device_id = "pseudonymise", device_ipv6 = "truncate", google_aid = "deny", error = "scrub" }
//! ipv4_prefix = 24                    # what `truncate` keeps (defaults 24 and 48)
//! ipv6_prefix = 48
//! coarsen = "day"                     # or "hour"
//!
//! [scopes]
//! "logs:pseudonymous" = "contractor"  # a token with this scope gets this policy
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use super::{FieldPolicy, PolicySpec, Privacy, PseudonymKey, Scrubber};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileContent {
    default: Option<String>,
    #[serde(default)]
    scrub_patterns: Vec<String>,
    #[serde(default)]
    policies: BTreeMap<String, PolicySpec>,
    #[serde(default)]
    scopes: BTreeMap<String, String>,
}

/// The service's policies, each bound to its key and scrubber, and how a caller gets one.
#[derive(Debug, Clone)]
pub struct Policies {
    named: BTreeMap<String, Arc<Privacy>>,
    default: Arc<Privacy>,
    scopes: BTreeMap<String, String>,
    key: Option<Arc<PseudonymKey>>,
    scrubber: Arc<Scrubber>,
}

impl Default for Policies {
    fn default() -> Policies {
        Policies::none(None)
    }
}

/// How a caller's policy is chosen, most specific first.
#[derive(Debug, Clone, Copy, Default)]
pub struct Claims<'a> {
    /// The caller's own policy (a tokens-file entry's `fields`).
    pub own: Option<&'a FieldPolicy>,
    /// The name of a policy of the file (a JWT claim).
    pub named: Option<&'a str>,
    /// The caller's scopes: the policies `[scopes]` maps them to.
    pub scopes: &'a [&'a str],
}

impl Policies {
    /// No policies: every caller sees every field, unless its own policy says otherwise.
    pub fn none(key: Option<Arc<PseudonymKey>>) -> Policies {
        Policies {
            named: BTreeMap::new(),
            default: Privacy::none(),
            scopes: BTreeMap::new(),
            key,
            scrubber: Arc::new(Scrubber::default()),
        }
    }

    /// Parses a policies file; the error names the policy and field at fault.
    pub fn parse(text: &str, key: Option<Arc<PseudonymKey>>) -> Result<Policies, String> {
        let content: FileContent = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())?;
        let scrubber = Arc::new(Scrubber::new(&content.scrub_patterns)?);
        let mut named = BTreeMap::new();
        for (name, spec) in &content.policies {
            let policy = FieldPolicy::from_spec(spec).map_err(|e| format!("policy `{name}`: {e}"))?;
            let privacy = Privacy::new(policy, key.clone(), Arc::clone(&scrubber))
                .map_err(|e| format!("policy `{name}`: {e}"))?;
            named.insert(name.clone(), Arc::new(privacy));
        }
        let lookup = |name: &str, what: &str| {
            named
                .get(name)
                .cloned()
                .ok_or_else(|| format!("{what} names policy `{name}`, which is not defined under [policies]"))
        };
        let default = match &content.default {
            Some(name) => lookup(name, "`default`")?,
            None => Privacy::none(),
        };
        for (scope, name) in &content.scopes {
            lookup(name, &format!("scope `{scope}`"))?;
        }
        Ok(Policies { named, default, scopes: content.scopes, key, scrubber })
    }

    /// Reads and parses a policies file.
    pub fn from_file(path: &std::path::Path, key: Option<Arc<PseudonymKey>>) -> Result<Policies, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the field policies file {}: {e}", path.display()))?;
        Policies::parse(&text, key).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The policy named `name`.
    pub fn named(&self, name: &str) -> Option<&Arc<Privacy>> {
        self.named.get(name)
    }

    /// The policy of callers without one.
    pub fn default_policy(&self) -> &Arc<Privacy> {
        &self.default
    }

    /// The names of the policies, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.named.keys().map(String::as_str)
    }

    /// Checks a caller's own policy: that it can run here (a key for `pseudonymise`).
    pub fn check_own(&self, policy: &FieldPolicy) -> Result<(), String> {
        Privacy::new(policy.clone(), self.key.clone(), Arc::clone(&self.scrubber)).map(|_| ())
    }

    /// The policy a caller gets: its own; else the one its claim names (an unknown name is
    /// an error: never a wider policy); else the strictest of those its scopes select; else
    /// the default.
    pub fn resolve(&self, claims: Claims<'_>) -> Result<Arc<Privacy>, String> {
        if let Some(own) = claims.own {
            return self.bind(own.clone());
        }
        if let Some(name) = claims.named {
            return self.named.get(name).cloned().ok_or_else(|| {
                format!(
                    "the token names field policy `{}`, which this service does not define",
                    crate::error::quote(name)
                )
            });
        }
        let names: std::collections::BTreeSet<&String> =
            claims.scopes.iter().filter_map(|scope| self.scopes.get(*scope)).collect();
        let selected: Vec<&Arc<Privacy>> =
            names.into_iter().filter_map(|name| self.named.get(name)).collect();
        match selected.as_slice() {
            [] => Ok(Arc::clone(&self.default)),
            [one] => Ok(Arc::clone(one)),
            many => self.bind(FieldPolicy::strictest(many.iter().map(|p| p.policy()))),
        }
    }

    fn bind(&self, policy: FieldPolicy) -> Result<Arc<Privacy>, String> {
        if policy.is_open() {
            return Ok(Privacy::none());
        }
        Privacy::new(policy, self.key.clone(), Arc::clone(&self.scrubber)).map(Arc::new)
    }
}
