//! Field policies: what one caller may see of each field (issue 46).
//!
//! A [`FieldPolicy`] gives each field a [`Treatment`]: shown as stored (`allow`), refused
//! (`deny`), replaced by a keyed hash (`pseudonymise`), cut to a network prefix (`truncate`),
//! rounded down to the hour or day (`coarsen`) or cleaned of secrets (`scrub`). A [`Privacy`]
//! is a policy bound to what it needs to run — the service's [`PseudonymKey`] and
//! [`Scrubber`] — and travels inside the [`crate::ExportRequest`] it was validated under: the
//! plan ([`crate::plan`]) applies each treatment as an expression over whole batches
//! ([`kernels`]), and a filter on a treated field compares the value as the caller sees it.
//!
//! Policies are written in TOML, alone or in a file of named policies ([`policies`]).

pub mod kernels;
pub mod policies;
pub mod scrub;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::quote;
use crate::schema::{Field, FieldType};

pub use scrub::Scrubber;

/// What a policy does to one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Treatment {
    Allow,
    Deny,
    Pseudonymise,
    Truncate,
    Coarsen,
    Scrub,
}

impl Treatment {
    /// The name used in policy files and in the `Logs-Field-Policy` header.
    pub fn name(self) -> &'static str {
        match self {
            Treatment::Allow => "allow",
            Treatment::Deny => "deny",
            Treatment::Pseudonymise => "pseudonymise",
            Treatment::Truncate => "truncate",
            Treatment::Coarsen => "coarsen",
            Treatment::Scrub => "scrub",
        }
    }

    fn parse(text: &str) -> Option<Treatment> {
        [
            Treatment::Allow,
            Treatment::Deny,
            Treatment::Pseudonymise,
            Treatment::Truncate,
            Treatment::Coarsen,
            Treatment::Scrub,
        ]
        .into_iter()
        .find(|t| t.name() == text)
    }
}

/// What `coarsen` rounds timestamps down to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Coarsening {
    Hour,
    #[default]
    Day,
}

impl Coarsening {
    /// The unit in seconds.
    pub fn seconds(self) -> i64 {
        match self {
            Coarsening::Hour => 3600,
            Coarsening::Day => 86_400,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Coarsening::Hour => "hour",
            Coarsening::Day => "day",
        }
    }
}

/// The time fields: each Unix-seconds field with its `yyyy-mm-dd hh:mm:ss` twin.
const TIME_TWINS: [(&str, &str); 2] =
    [("error_timestamp", "error_datetime"), ("error_receive_timestamp", "error_receive_datetime")];

fn is_time_field(field: Field) -> bool {
    TIME_TWINS.iter().any(|(a, b)| field.name() == *a || field.name() == *b)
}

/// A policy as written: `fields = { google_aid = "deny", … }` and its settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
    /// The bits of an IPv4 address `truncate` keeps (default 24).
    pub ipv4_prefix: Option<u8>,
    /// The bits of an IPv6 address `truncate` keeps (default 48).
    pub ipv6_prefix: Option<u8>,
    /// What `coarsen` rounds down to: `hour` or `day` (default).
    pub coarsen: Option<String>,
}

/// Which treatment each field gets, with the settings of `truncate` and `coarsen`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldPolicy {
    /// The fields not allowed as stored.
    treatments: BTreeMap<Field, Treatment>,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
    coarsening: Coarsening,
}

impl Default for FieldPolicy {
    fn default() -> FieldPolicy {
        FieldPolicy::allow_all()
    }
}

impl FieldPolicy {
    /// Every field as stored: what a token without a policy sees.
    pub fn allow_all() -> FieldPolicy {
        FieldPolicy {
            treatments: BTreeMap::new(),
            ipv4_prefix: 24,
            ipv6_prefix: 48,
            coarsening: Coarsening::Day,
        }
    }

    /// Every field denied: what describes the fields to a caller whose policy cannot be had.
    pub fn deny_all() -> FieldPolicy {
        FieldPolicy {
            treatments: Field::all().map(|f| (f, Treatment::Deny)).collect(),
            ..FieldPolicy::allow_all()
        }
    }

    /// A checked policy from its written form; the error names the field or setting at fault.
    pub fn from_spec(spec: &PolicySpec) -> Result<FieldPolicy, String> {
        let mut policy = FieldPolicy::allow_all();
        if let Some(bits) = spec.ipv4_prefix {
            if bits > 32 {
                return Err(format!("`ipv4_prefix` is {bits}; expected 0 to 32"));
            }
            policy.ipv4_prefix = bits;
        }
        if let Some(bits) = spec.ipv6_prefix {
            if bits > 128 {
                return Err(format!("`ipv6_prefix` is {bits}; expected 0 to 128"));
            }
            policy.ipv6_prefix = bits;
        }
        policy.coarsening = match spec.coarsen.as_deref() {
            None | Some("day") => Coarsening::Day,
            Some("hour") => Coarsening::Hour,
            Some(other) => return Err(format!("`coarsen` is `{}`; allowed: `hour`, `day`", quote(other))),
        };
        for (name, value) in &spec.fields {
            let field = Field::from_name(name).ok_or_else(|| {
                format!("`fields` names `{}`, which is not a field of the dataset (aliases are not accepted here)", quote(name))
            })?;
            let treatment = Treatment::parse(value).ok_or_else(|| {
                format!(
                    "`fields.{name}` is `{}`; allowed: allow, deny, pseudonymise, truncate, coarsen, scrub",
                    quote(value)
                )
            })?;
            check_applies(field, treatment)?;
            if treatment != Treatment::Allow {
                policy.treatments.insert(field, treatment);
            }
        }
        for (stamp, text) in TIME_TWINS {
            let [stamp, text] = [stamp, text].map(|n| Field::from_name(n).expect("a time field"));
            if policy.treatment(stamp) != policy.treatment(text) {
                return Err(format!(
                    "`fields` treats `{stamp}` and `{text}` differently; they hold the same time, so give \
                     them the same treatment"
                ));
            }
        }
        Ok(policy)
    }

    /// The treatment of `field`.
    pub fn treatment(&self, field: Field) -> Treatment {
        self.treatments.get(&field).copied().unwrap_or(Treatment::Allow)
    }

    /// The fields not allowed as stored, with their treatments.
    pub fn treatments(&self) -> impl Iterator<Item = (Field, Treatment)> + '_ {
        self.treatments.iter().map(|(f, t)| (*f, *t))
    }

    pub fn ipv4_prefix(&self) -> u8 {
        self.ipv4_prefix
    }

    pub fn ipv6_prefix(&self) -> u8 {
        self.ipv6_prefix
    }

    pub fn coarsening(&self) -> Coarsening {
        self.coarsening
    }

    /// True when every field is allowed as stored.
    pub fn is_open(&self) -> bool {
        self.treatments.is_empty()
    }

    /// The policy of a caller several policies apply to: per field, the one treatment they
    /// agree on, else the one that is not `allow`, else `deny`; the shortest prefixes and the
    /// coarser rounding.
    pub fn strictest<'a>(policies: impl IntoIterator<Item = &'a FieldPolicy>) -> FieldPolicy {
        let mut merged = FieldPolicy::allow_all();
        let mut first = true;
        for policy in policies {
            if first {
                merged = policy.clone();
                first = false;
                continue;
            }
            for field in Field::all() {
                let treatment = match (merged.treatment(field), policy.treatment(field)) {
                    (a, b) if a == b => a,
                    (Treatment::Allow, other) | (other, Treatment::Allow) => other,
                    _ => Treatment::Deny,
                };
                if treatment == Treatment::Allow {
                    merged.treatments.remove(&field);
                } else {
                    merged.treatments.insert(field, treatment);
                }
            }
            merged.ipv4_prefix = merged.ipv4_prefix.min(policy.ipv4_prefix);
            merged.ipv6_prefix = merged.ipv6_prefix.min(policy.ipv6_prefix);
            merged.coarsening = merged.coarsening.max(policy.coarsening);
        }
        merged
    }

    /// A canonical text of the policy: equal policies give equal texts.
    fn canonical(&self) -> String {
        let fields: Vec<String> = self.treatments().map(|(f, t)| format!("{f}={}", t.name())).collect();
        format!(
            "fields {}; ipv4 /{}; ipv6 /{}; coarsen {}",
            fields.join(","),
            self.ipv4_prefix,
            self.ipv6_prefix,
            self.coarsening.name()
        )
    }
}

/// Refuses a treatment that does not apply to `field`'s values.
fn check_applies(field: Field, treatment: Treatment) -> Result<(), String> {
    let refuse = |what: &str| Err(format!("`fields.{field}` is `{}`, but {what}", treatment.name()));
    match treatment {
        Treatment::Allow | Treatment::Deny => Ok(()),
        _ if is_time_field(field) && treatment != Treatment::Coarsen => {
            refuse("a time field may only be allowed, denied or coarsened")
        }
        Treatment::Coarsen if !is_time_field(field) => refuse(
            "`coarsen` applies to the time fields (error_timestamp, error_datetime, error_receive_timestamp, \
             error_receive_datetime)",
        ),
        Treatment::Truncate | Treatment::Scrub if field.field_type() != FieldType::String => {
            refuse("it applies to text fields only")
        }
        _ => Ok(()),
    }
}

/// The secret of `pseudonymise`: at least [`MIN_PSEUDONYM_KEY_BYTES`] bytes.
#[derive(Clone)]
pub struct PseudonymKey {
    mac: Hmac<Sha256>,
    /// SHA-256's state after the key's inner and outer pads: HMAC of a value that fits in one
    /// block is then two compressions ([`PseudonymKey::pseudonym_into`]).
    inner: [u32; 8],
    outer: [u32; 8],
    /// Names the key without revealing it (in fingerprints).
    id: [u8; 8],
}

/// The two-compression path for short values unless `LOGS_PSEUDONYM_FAST_PATH=off` (for
/// benchmarks and tests that compare it with the `hmac` crate's).
fn one_block_path_on() -> bool {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var("LOGS_PSEUDONYM_FAST_PATH").map_or(true, |v| v != "off"));
    *ON
}

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
const SHA256_IV: [u32; 8] =
    [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// The longest value hashed in one block: 64 bytes less the padding's `0x80` and its length.
const ONE_BLOCK: usize = 55;

/// The state after one block of the key (hashed first when longer than a block, as HMAC
/// says), each byte XORed with `pad`.
fn padded_key_state(key: &[u8], pad: u8) -> [u32; 8] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    block.iter_mut().for_each(|b| *b ^= pad);
    let mut state = SHA256_IV;
    sha2::block_api::compress256(&mut state, &[block]);
    state
}

/// The last compression of a message: `tail` (at most [`ONE_BLOCK`] bytes) padded, after
/// one block already hashed into `state`.
fn finish_block(mut state: [u32; 8], tail: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..tail.len()].copy_from_slice(tail);
    block[tail.len()] = 0x80;
    block[56..].copy_from_slice(&((64 + tail.len() as u64) * 8).to_be_bytes());
    sha2::block_api::compress256(&mut state, &[block]);
    let mut digest = [0u8; 32];
    for (out, word) in digest.chunks_exact_mut(4).zip(state) {
        out.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

/// The shortest pseudonym key accepted, in bytes.
pub const MIN_PSEUDONYM_KEY_BYTES: usize = 32;

impl PseudonymKey {
    /// The key made of `bytes` (the whole content of the key file).
    pub fn new(bytes: &[u8]) -> Result<PseudonymKey, String> {
        if bytes.len() < MIN_PSEUDONYM_KEY_BYTES {
            return Err(format!(
                "the pseudonym key has {} bytes; it needs at least {MIN_PSEUDONYM_KEY_BYTES} random bytes \
                 (e.g. `head -c 32 /dev/urandom > FILE`)",
                bytes.len()
            ));
        }
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(bytes).map_err(|e| e.to_string())?;
        let mut id_mac = mac.clone();
        id_mac.update(b"logs-export pseudonym key id");
        let digest = id_mac.finalize().into_bytes();
        let mut id = [0; 8];
        id.copy_from_slice(&digest[..8]);
        let (inner, outer) = (padded_key_state(bytes, 0x36), padded_key_state(bytes, 0x5c));
        Ok(PseudonymKey { mac, inner, outer, id })
    }

    /// Reads the key file; the error names the file, never its content.
    pub fn from_file(path: &Path) -> Result<PseudonymKey, String> {
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read the pseudonym key file {}: {e}", path.display()))?;
        PseudonymKey::new(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The pseudonym of `text`: the lowercase hex of the first 16 bytes of HMAC-SHA-256.
    pub fn pseudonym_into(&self, text: &[u8], out: &mut [u8; 32]) {
        let digest = match one_block_path_on().then(|| self.one_block_hmac(text)).flatten() {
            Some(digest) => digest,
            None => self.hmac(text),
        };
        hex::encode_to_slice(&digest[..16], out).expect("32 hex digits for 16 bytes");
    }

    /// HMAC-SHA-256 of `text` by the `hmac` crate.
    fn hmac(&self, text: &[u8]) -> [u8; 32] {
        let mut mac = self.mac.clone();
        mac.update(text);
        mac.finalize().into_bytes().into()
    }

    /// HMAC-SHA-256 of a `text` that fits in one block, `H(K ^ opad || H(K ^ ipad || text))`
    /// from the states after the pads: two compressions, where the crate's path also copies
    /// and buffers (a third of the cost of pseudonyms in the benchmark's export).
    fn one_block_hmac(&self, text: &[u8]) -> Option<[u8; 32]> {
        (text.len() <= ONE_BLOCK).then(|| finish_block(self.outer, &finish_block(self.inner, text)))
    }

    /// The pseudonym of `text` as a string.
    pub fn pseudonym(&self, text: &[u8]) -> String {
        let mut out = [0; 32];
        self.pseudonym_into(text, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// A keyed hash of `bytes` for other uses than pseudonyms (the parts of a treated record),
    /// separated from them by `purpose`.
    pub fn keyed_u64(&self, purpose: &[u8], bytes: &[u8]) -> u64 {
        let mut mac = self.mac.clone();
        mac.update(purpose);
        mac.update(bytes);
        let digest = mac.finalize().into_bytes();
        u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
    }
}

impl fmt::Debug for PseudonymKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.write_str("PseudonymKey(…)")
    }
}

impl PartialEq for PseudonymKey {
    fn eq(&self, other: &PseudonymKey) -> bool {
        self.id == other.id
    }
}

impl Eq for PseudonymKey {}

impl std::hash::Hash for PseudonymKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

/// A field policy bound to the key and scrubber it runs with: what an
/// [`crate::ExportRequest`] is validated under and its plan applies.
#[derive(Clone)]
pub struct Privacy {
    policy: FieldPolicy,
    key: Option<Arc<PseudonymKey>>,
    scrubber: Arc<Scrubber>,
    fingerprint: String,
}

impl Privacy {
    /// No policy: every field as stored.
    pub fn none() -> Arc<Privacy> {
        static NONE: LazyLock<Arc<Privacy>> = LazyLock::new(|| {
            Arc::new(Privacy {
                policy: FieldPolicy::allow_all(),
                key: None,
                scrubber: Arc::new(Scrubber::default()),
                fingerprint: String::new(),
            })
        });
        Arc::clone(&NONE)
    }

    /// `policy` with its key and scrubber; refused when it pseudonymises without a key.
    pub fn new(
        policy: FieldPolicy,
        key: Option<Arc<PseudonymKey>>,
        scrubber: Arc<Scrubber>,
    ) -> Result<Privacy, String> {
        if key.is_none()
            && let Some((field, _)) = policy.treatments().find(|(_, t)| *t == Treatment::Pseudonymise)
        {
            return Err(format!(
                "the policy pseudonymises `{field}`, which needs the pseudonym key (`--pseudonym-key-file`)"
            ));
        }
        let fingerprint = if policy.is_open() {
            String::new()
        } else {
            let text = format!(
                "{}; key {}; scrub {:?}",
                policy.canonical(),
                key.as_ref().map_or_else(|| "none".to_owned(), |k| hex::encode(k.id)),
                scrubber.patterns()
            );
            hex::encode(&Sha256::digest(text.as_bytes())[..16])
        };
        Ok(Privacy { policy, key, scrubber, fingerprint })
    }

    pub fn policy(&self) -> &FieldPolicy {
        &self.policy
    }

    pub fn treatment(&self, field: Field) -> Treatment {
        self.policy.treatment(field)
    }

    pub fn key(&self) -> Option<&Arc<PseudonymKey>> {
        self.key.as_ref()
    }

    pub fn scrubber(&self) -> &Arc<Scrubber> {
        &self.scrubber
    }

    /// Identifies the policy, its key and its scrubber, without revealing the key: empty when
    /// every field is allowed. Part of what identifies a prepared export and binds a chain.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

impl fmt::Debug for Privacy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Privacy")
            .field("policy", &self.policy.canonical())
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl PartialEq for Privacy {
    fn eq(&self, other: &Privacy) -> bool {
        self.fingerprint == other.fingerprint && self.policy == other.policy
    }
}

impl Eq for Privacy {}

#[cfg(test)]
mod tests;
