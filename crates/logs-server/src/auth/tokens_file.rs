//! The tokens file: a TOML list of tokens (by SHA-256, or in plain text for development),
//! each with a name, scopes and applications; reloaded while the server runs.
//!
//! ```toml
//! [[tokens]]
//! name = "analytics"                     # what logs show instead of the token
//! sha256 = "<hex SHA-256 of the token>"  # or: token = "<plain text>" (development)
//! scopes = ["service:read", "service:write"]
//! applications = [1001, 1002]            # omitted: all applications
//! # omitted: the policy of the field-policies file (`--field-policies`) for its scopes, else all fields
//! fields = { service_device_id = "pseudonymise", device_ipv6 = "truncate", google_aid = "deny", error = "scrub" }
//! ```
//!
//! A file that cannot be read or parsed never replaces a good set: the previous one stays and
//! the reason is logged once (without any token or hash). Error messages never quote values.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::principal::{Applications, Principal, TokenHash, is_token_syntax};
use crate::config::{ConfigError, describe_toml_error};

/// What [`ConfigError`]s call the file.
const WHAT: &str = "tokens file";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileContent {
    #[serde(default)]
    tokens: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    sha256: Option<String>,
    token: Option<String>,
    scopes: Vec<String>,
    applications: Option<Vec<i64>>,
    fields: Option<std::collections::BTreeMap<String, String>>,
}

/// A set of known tokens, looked up by hash.
#[derive(Debug, Default)]
pub struct TokenSet {
    by_hash: HashMap<TokenHash, Arc<Principal>>,
    /// Names of the tokens given in plain text.
    plain_text: Vec<String>,
}

impl TokenSet {
    /// Parses the content of a tokens file; the error message quotes no value.
    pub fn parse(text: &str) -> Result<TokenSet, ConfigError> {
        TokenSet::parse_text(text).map_err(ConfigError::Invalid)
    }

    fn parse_text(text: &str) -> Result<TokenSet, String> {
        let content: FileContent = toml::from_str(text).map_err(|e| describe_toml_error(text, &e))?;
        let mut set = TokenSet::default();
        let mut names = BTreeSet::new();
        let mut owners: HashMap<TokenHash, String> = HashMap::new();
        for (i, entry) in content.tokens.into_iter().enumerate() {
            let name = entry.name.trim().to_owned();
            let at = format!("token entry {} (`{name}`)", i + 1);
            if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
                return Err(format!("token entry {}: `name` must be 1 to 64 printable characters", i + 1));
            }
            if !names.insert(name.clone()) {
                return Err(format!("{at}: the name is used twice; names must be unique"));
            }
            let hash = match (&entry.sha256, &entry.token) {
                (Some(hex_digest), None) => parse_sha256(hex_digest).ok_or_else(|| {
                    format!("{at}: `sha256` must be 64 hexadecimal digits (the SHA-256 of the token)")
                })?,
                (None, Some(token)) => {
                    if !is_token_syntax(token) {
                        return Err(format!(
                            "{at}: `token` must be letters, digits and - . _ ~ + / (optionally ending in =)"
                        ));
                    }
                    set.plain_text.push(name.clone());
                    TokenHash::of(token)
                }
                _ => return Err(format!("{at}: give exactly one of `sha256` and `token`")),
            };
            if let Some(other) = owners.insert(hash, name.clone()) {
                return Err(format!("{at}: the same token as entry `{other}`"));
            }
            if entry.scopes.iter().any(|s| s.is_empty() || s.contains(char::is_whitespace)) {
                return Err(format!("{at}: a scope is empty or contains a space"));
            }
            let applications = match entry.applications {
                None => Applications::All,
                Some(ids) => Applications::Only(ids.into_iter().collect()),
            };
            let fields = match entry.fields {
                None => None,
                Some(fields) => {
                    let spec = logs_core::privacy::PolicySpec { fields, ..Default::default() };
                    let policy =
                        logs_core::FieldPolicy::from_spec(&spec).map_err(|e| format!("{at}: {e}"))?;
                    Some(Arc::new(policy))
                }
            };
            let principal = Principal {
                name,
                scopes: entry.scopes.into_iter().collect(),
                applications,
                fields,
                policy: None,
            };
            set.by_hash.insert(hash, Arc::new(principal));
        }
        Ok(set)
    }

    /// A set of one token (used for the token `logs serve` generates).
    pub fn single(token: &str, principal: Principal) -> TokenSet {
        TokenSet { by_hash: HashMap::from([(TokenHash::of(token), Arc::new(principal))]), plain_text: vec![] }
    }

    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    pub fn lookup(&self, hash: &TokenHash) -> Option<Arc<Principal>> {
        self.by_hash.get(hash).cloned()
    }

    /// The tokens' own field policies, by token name.
    pub fn field_policies(&self) -> impl Iterator<Item = (&str, &logs_core::FieldPolicy)> {
        self.by_hash.values().filter_map(|p| p.fields.as_deref().map(|f| (p.name.as_str(), f)))
    }
}

fn parse_sha256(hex_digest: &str) -> Option<TokenHash> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_digest.trim(), &mut out).ok()?;
    Some(TokenHash(out))
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The file has the content last tried.
    Unchanged,
    /// A new set is in use.
    Reloaded { tokens: usize },
    /// The previous set stays in use, for this reason.
    Failed(String),
}

#[derive(Debug, Default)]
struct WatchState {
    /// SHA-256 of the content last tried, good or bad.
    last_content: Option<[u8; 32]>,
    /// The last read error, logged once.
    last_error: Option<String>,
}

/// The current [`TokenSet`], and where it comes from.
#[derive(Debug)]
pub struct TokenStore {
    path: Option<PathBuf>,
    current: RwLock<Arc<TokenSet>>,
    watch: Mutex<WatchState>,
    reloads_ok: AtomicU64,
    reloads_failed: AtomicU64,
}

impl TokenStore {
    /// A store that never changes.
    pub fn fixed(set: TokenSet) -> TokenStore {
        TokenStore {
            path: None,
            current: RwLock::new(Arc::new(set)),
            watch: Mutex::default(),
            reloads_ok: AtomicU64::new(0),
            reloads_failed: AtomicU64::new(0),
        }
    }

    /// Loads the tokens file at `path`, which must be valid now.
    pub fn open(path: impl Into<PathBuf>) -> Result<TokenStore, ConfigError> {
        let path = path.into();
        let text = ConfigError::read(WHAT, &path)?;
        let set = TokenSet::parse(&text).map_err(ConfigError::in_file(WHAT, &path))?;
        log_loaded(&path, &set);
        let store = TokenStore::fixed(set);
        store.watch.lock().unwrap_or_else(|e| e.into_inner()).last_content = Some(digest(text.as_bytes()));
        Ok(TokenStore { path: Some(path), ..store })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn lookup(&self, hash: &TokenHash) -> Option<Arc<Principal>> {
        self.current().lookup(hash)
    }

    /// The set in use.
    pub fn current(&self) -> Arc<TokenSet> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Successful and failed reloads so far.
    pub fn reload_counts(&self) -> (u64, u64) {
        (self.reloads_ok.load(Ordering::Relaxed), self.reloads_failed.load(Ordering::Relaxed))
    }

    /// Reads the file again and uses it if it changed and is valid (`force`: even if its
    /// content is the one last tried). Logs what happened, once per change.
    pub fn reload(&self, force: bool) -> Reload {
        let Some(path) = &self.path else { return Reload::Unchanged };
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let text = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                let message = format!("cannot read the tokens file: {e}");
                if watch.last_error.as_ref() != Some(&message) || force {
                    tracing::warn!(path = %path.display(), reason = %message, "keeping the previous tokens");
                    self.reloads_failed.fetch_add(1, Ordering::Relaxed);
                    watch.last_error = Some(message.clone());
                }
                // Whatever appears next at the path is worth reading.
                watch.last_content = None;
                return Reload::Failed(message);
            }
        };
        watch.last_error = None;
        let content = digest(&text);
        if !force && watch.last_content == Some(content) {
            return Reload::Unchanged;
        }
        watch.last_content = Some(content);
        let parsed = std::str::from_utf8(&text)
            .map_err(|_| "the file is not UTF-8".to_owned())
            .and_then(TokenSet::parse_text);
        match parsed {
            Ok(set) => {
                log_loaded(path, &set);
                let tokens = set.len();
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
                self.reloads_ok.fetch_add(1, Ordering::Relaxed);
                Reload::Reloaded { tokens }
            }
            Err(message) => {
                tracing::warn!(path = %path.display(), reason = %message, "the tokens file is invalid; keeping the previous tokens");
                self.reloads_failed.fetch_add(1, Ordering::Relaxed);
                Reload::Failed(message)
            }
        }
    }

    /// Checks the file for changes every `interval` (reading it whole: it is small, and this
    /// catches every kind of replacement, including same-size edits within one mtime tick).
    pub fn spawn_watcher(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(store) = store.upgrade() else { return };
                tokio::task::spawn_blocking(move || store.reload(false)).await.ok();
            }
        })
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn log_loaded(path: &Path, set: &TokenSet) {
    tracing::info!(path = %path.display(), tokens = set.len(), "loaded the tokens file");
    if set.is_empty() {
        tracing::warn!(path = %path.display(), "the tokens file lists no token: every request will be refused");
    }
    if !set.plain_text.is_empty() {
        tracing::warn!(
            names = ?set.plain_text,
            "tokens given in plain text (`token = …`); use `sha256 = …` outside development"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        [[tokens]]
        name = "analytics"
        sha256 = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        scopes = ["service:read", "service:write"]
        applications = [1001, 1002]

        [[tokens]]
        name = "dev"
        token = "dev-token"
        scopes = ["service:read"]
    "#;

    #[test]
    fn parses_hashes_and_plain_tokens() {
        let set = TokenSet::parse(GOOD).unwrap();
        assert_eq!(set.len(), 2);
        // sha256("secret")
        let analytics = set.lookup(&TokenHash::of("secret")).unwrap();
        assert_eq!(analytics.name, "analytics");
        assert_eq!(analytics.applications, Applications::Only([1001, 1002].into()));
        let dev = set.lookup(&TokenHash::of("dev-token")).unwrap();
        assert_eq!(dev.applications, Applications::All);
        assert!(set.lookup(&TokenHash::of("other")).is_none());
    }

    #[test]
    fn errors_never_quote_values() {
        let cases = [
            ("[[tokens]]\nname = \"a\"\nsha256 = \"SECRETVALUE\"\nscopes = []", "64 hexadecimal"),
            ("[[tokens]]\nname = \"a\"\ntoken = \"SECRET VALUE\"\nscopes = []", "letters, digits"),
            ("[[tokens]]\nname = \"a\"\nscopes = \"SECRETVALUE\"\ntoken = \"x\"", "line 3"),
            ("[[tokens]]\nname = \"a\"\ntoken = \"SECRETVALUE", "line"),
            ("[[tokens]]\nname = \"a\"\ntokn = \"SECRETVALUE\"\nscopes = []", "unknown field"),
            ("[[tokens]]\nname = \"a\"\nscopes = []", "exactly one"),
        ];
        for (text, expected) in cases {
            let message = TokenSet::parse(text).unwrap_err().to_string();
            assert!(message.contains(expected), "{message}");
            assert!(!message.contains("SECRET"), "{message}");
        }
    }

    #[test]
    fn names_are_1_to_64_printable_characters() {
        let file = |name: &str| format!("[[tokens]]\nname = \"{name}\"\ntoken = \"x\"\nscopes = []");
        let longest = "n".repeat(64);
        for name in [longest.as_str(), "  padded  ", "a"] {
            let set = TokenSet::parse(&file(name)).unwrap_or_else(|e| panic!("{name:?}: {e}"));
            assert_eq!(set.lookup(&TokenHash::of("x")).unwrap().name, name.trim());
        }
        for name in ["", "   ", &"n".repeat(65), "bell\\u0007", "line\\nbreak", "\\u007f"] {
            let message = TokenSet::parse(&file(name)).unwrap_err().to_string();
            assert!(message.contains("1 to 64 printable characters"), "{name:?}: {message}");
        }
    }

    #[test]
    fn scopes_are_single_words() {
        let file = |scopes: &str| format!("[[tokens]]\nname = \"a\"\ntoken = \"x\"\nscopes = {scopes}");
        assert!(TokenSet::parse(&file(r#"["service:read", "service:write"]"#)).is_ok());
        for scopes in [r#"[""]"#, r#"["service:read service:write"]"#, r#"["service:read", "\tx"]"#] {
            let message = TokenSet::parse(&file(scopes)).unwrap_err().to_string();
            assert!(message.contains("a scope is empty or contains a space"), "{scopes}: {message}");
        }
    }

    #[test]
    fn refuses_duplicates() {
        let twice = "[[tokens]]\nname = \"a\"\ntoken = \"x\"\nscopes = []\n\
                     [[tokens]]\nname = \"b\"\ntoken = \"x\"\nscopes = []";
        assert!(TokenSet::parse(twice).unwrap_err().to_string().contains("same token"));
        let names = "[[tokens]]\nname = \"a\"\ntoken = \"x\"\nscopes = []\n\
                     [[tokens]]\nname = \"a\"\ntoken = \"y\"\nscopes = []";
        assert!(TokenSet::parse(names).unwrap_err().to_string().contains("twice"));
    }
}
