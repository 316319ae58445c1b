//! Incremental exports: a chain of calls that hands every record over exactly once, late
//! arrivals included (`cursor=start`, then `cursor=<the last Logs-Cursor>`).
//!
//! Objects are the unit: a record becomes visible when the object that holds it does, and the
//! dataset promises that records arrive as new objects and that an object is never rewritten
//! in place (docs/api.md, "Incremental exports"). A chain's position is a *horizon*, a
//! modification time: every object modified at or before it has been delivered, none after.
//! A call lists the application's date folders, delivers the objects modified after the old
//! horizon and at or before the new one, and moves the horizon to the call's start less the
//! *settle time* ([`CursorSettings::settle`]): an object modified earlier than that is
//! assumed visible by then (its upload done, the writers' and the store's clocks within it).
//! Newer objects wait for a later call.
//!
//! The promise is checked, not trusted: for each date folder of the listing window the
//! position keeps how many objects were delivered and a sum of their identities (name, size,
//! modification time, ETag). A call finds the same count and sum for the objects at or
//! before the old horizon, or it fails with [`crate::Error::CursorConflict`] (HTTP 409)
//! naming the folder: an object delivered was deleted or replaced, or one appeared behind
//! the horizon. Never a silent loss or repeat.
//!
//! The listing is bounded: after the first call, only date folders at most
//! [`CursorSettings::max_lateness_days`] before today (UTC) are listed and checked.
//!
//! The position travels in the cursor itself (`token.rs`), authenticated with the operator's
//! key, so that any process holding the key continues any chain; it is bound to the
//! application, `date_dimension`, `date_since`, fields and filters it was made for.

mod position;
mod token;

use std::time::{Duration, SystemTime};

use chrono::NaiveDate;
use sha2::{Digest, Sha256};

use crate::error::{Error, RequestError};
use crate::schema::DateDimension;
use crate::storage::listing::Listed;

pub use position::ChainPosition;
pub(crate) use position::{Binding, DateDigest};
use token::{Key, Refusal};

/// The keys that sign and check cursors: the first signs, every one is accepted.
#[derive(Clone, PartialEq, Eq)]
pub struct CursorKeys {
    keys: Vec<Key>,
}

impl std::fmt::Debug for CursorKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the keys themselves.
        f.debug_struct("CursorKeys").field("keys", &self.keys.len()).finish()
    }
}

/// The shortest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

impl CursorKeys {
    /// A random key, made now: its cursors are good until the process ends.
    pub fn generated() -> CursorKeys {
        use rand::RngCore;
        let mut bytes = vec![0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        CursorKeys { keys: vec![Key::new(bytes)] }
    }

    /// The keys of a key file: one per line, blank lines and lines starting with `#` passed
    /// over, each at least [`MIN_KEY_BYTES`] bytes (for example `openssl rand -hex 32`). The
    /// first line signs. Errors name the line, never its text.
    pub fn from_text(text: &str) -> Result<CursorKeys, String> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "line {}: a key must be at least {MIN_KEY_BYTES} characters (for instance the output \
                     of `openssl rand -hex 32`)",
                    number + 1
                ));
            }
            keys.push(Key::new(line.as_bytes().to_vec()));
        }
        if keys.is_empty() {
            return Err("holds no key: give one per line, the signing key first".into());
        }
        Ok(CursorKeys { keys })
    }

    /// The key `logs export` uses without `--cursor-key-file`: public, so that its cursors
    /// are checked for damage, not forgery (whoever runs the CLI reads the files anyway).
    pub fn public() -> CursorKeys {
        CursorKeys { keys: vec![Key::new(b"logs-export: the command line's public cursor key".to_vec())] }
    }

    /// How many keys are held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    fn signing(&self) -> &Key {
        &self.keys[0]
    }
}

impl Default for CursorKeys {
    fn default() -> CursorKeys {
        CursorKeys::generated()
    }
}

/// How cursor chains run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorSettings {
    pub keys: CursorKeys,
    /// How old an object's modification time must be before a chain delivers it: longer than
    /// any upload takes, plus the clock difference between the writers, the store and this
    /// process.
    pub settle: Duration,
    /// After a chain's first call, only date folders at most this many days before today
    /// (UTC) are listed: an object written into an older folder is not seen. A cursor checks
    /// the newest 183 date folders at most.
    pub max_lateness_days: u16,
}

impl Default for CursorSettings {
    fn default() -> CursorSettings {
        CursorSettings {
            keys: CursorKeys::default(),
            settle: Duration::from_secs(300),
            max_lateness_days: 31,
        }
    }
}

/// What a request asks of a chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainCursor {
    /// `cursor=start`.
    Start,
    /// A cursor a previous call handed out, checked and opened; `text` as given.
    Continue { position: ChainPosition, text: String },
}

/// Opens the cursor text of parameter `cursor`.
pub(crate) fn open(text: &str, keys: &CursorKeys) -> Result<ChainPosition, RequestError> {
    token::open(text, &keys.keys).map_err(|refusal| {
        RequestError::new(
            "cursor",
            match refusal {
                Refusal::Damaged => {
                    "is not a cursor this service handed out (it is damaged, cut short or changed); pass \
                     the `Logs-Cursor` value of the chain's last response as it came, or start a new \
                     chain with cursor=start"
                }
                Refusal::UnknownKey => {
                    "was signed with a key this service no longer holds (its cursor key changed or was \
                     generated at start); start a new chain with cursor=start"
                }
            },
        )
    })
}

/// One call's step of a chain: the objects it delivers and the cursor after them.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) deliver: Vec<(NaiveDate, Listed)>,
    pub(crate) next: String,
    pub(crate) summary: StepSummary,
}

/// What a chain's call saw, for `--explain` and embedders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepSummary {
    /// Objects delivered by this call (before the footers prune any).
    pub new_objects: usize,
    /// Objects delivered by earlier calls, found unchanged.
    pub delivered_before: usize,
    /// Objects too recently modified, left for a later call.
    pub settling: usize,
}

/// What a chain's call needs besides the listing.
pub(crate) struct Call<'a> {
    pub(crate) cursor: &'a ChainCursor,
    pub(crate) application_id: i64,
    pub(crate) dimension: DateDimension,
    pub(crate) since: i64,
    pub(crate) binding: Binding,
    pub(crate) settings: &'a CursorSettings,
    /// When the listing began.
    pub(crate) now: SystemTime,
}

/// The first date folder a call lists: every one from `date_since` on for a chain's first
/// call, the window of the maximum lateness after it (the chain's, or the one configured
/// now if wider).
pub(crate) fn first_listed(
    cursor: &ChainCursor,
    settings: &CursorSettings,
    now: SystemTime,
) -> Option<NaiveDate> {
    match cursor {
        ChainCursor::Start => None,
        ChainCursor::Continue { position, .. } => {
            Some(window_start(now, position.max_lateness_days.max(settings.max_lateness_days)))
        }
    }
}

fn window_start(now: SystemTime, max_lateness_days: u16) -> NaiveDate {
    let today = chrono::DateTime::<chrono::Utc>::from(now).date_naive();
    today.checked_sub_signed(chrono::TimeDelta::days(i64::from(max_lateness_days))).unwrap_or(NaiveDate::MIN)
}

/// The step of `call` over `listed`: the date folders' objects (a folder's date with each).
pub(crate) fn step(call: Call<'_>, listed: Vec<(NaiveDate, Listed)>) -> Result<Step, Error> {
    let (previous, max_lateness_days) = match call.cursor {
        ChainCursor::Start => (None, call.settings.max_lateness_days),
        // The wider of the chain's window and the one configured now: a window widened by
        // the operator reaches the chains already running.
        ChainCursor::Continue { position, .. } => {
            (Some(position), position.max_lateness_days.max(call.settings.max_lateness_days))
        }
    };
    let old_horizon = previous.map_or(i64::MIN, |p| p.horizon);
    let settled =
        nanos(call.now).saturating_sub(i64::try_from(call.settings.settle.as_nanos()).unwrap_or(i64::MAX));
    let horizon = old_horizon.max(settled);
    let window = window_start(call.now, max_lateness_days);

    let mut deliver = Vec::new();
    let mut summary = StepSummary::default();
    // Per date folder: what was found at or before the old horizon, and at or before the new.
    let mut seen: std::collections::BTreeMap<NaiveDate, (DateDigest, DateDigest)> = Default::default();
    for (date, object) in listed {
        let modified = object.meta.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX);
        let empty = DateDigest { date, objects: 0, sum: 0 };
        let (before, after) = seen.entry(date).or_insert((empty, empty));
        if modified > horizon {
            summary.settling += 1;
            continue;
        }
        let identity = identity(&object);
        after.objects += 1;
        after.sum = after.sum.wrapping_add(identity);
        if modified <= old_horizon {
            before.objects += 1;
            before.sum = before.sum.wrapping_add(identity);
            summary.delivered_before += 1;
        } else {
            summary.new_objects += 1;
            deliver.push((date, object));
        }
    }
    if let Some(previous) = previous {
        // The folders this call listed (`first_listed`: from `window` on) that the previous
        // call kept digests of.
        check_unchanged(previous, &seen, previous.window_start.max(window), call.since)?;
    }
    let mut dates: Vec<DateDigest> =
        seen.into_values().map(|(_, after)| after).filter(|d| d.date >= window && d.objects > 0).collect();
    // Beyond what a cursor holds, the oldest folders are no longer checked.
    let mut window = window;
    if dates.len() > token::MAX_DATES {
        dates.drain(..dates.len() - token::MAX_DATES);
        window = dates[0].date;
    }
    let next = ChainPosition {
        application_id: call.application_id,
        dimension: call.dimension,
        since: call.since,
        binding: call.binding,
        horizon,
        max_lateness_days,
        window_start: window,
        dates,
    };
    Ok(Step { deliver, next: token::seal(&next, call.settings.keys.signing()), summary })
}

/// Fails when a date folder from `first` on does not hold, at or before `previous`'s
/// horizon, exactly the objects delivered.
fn check_unchanged(
    previous: &ChainPosition,
    seen: &std::collections::BTreeMap<NaiveDate, (DateDigest, DateDigest)>,
    first: NaiveDate,
    since: i64,
) -> Result<(), Error> {
    let kept = |date: NaiveDate| previous.dates.iter().find(|d| d.date == date).copied();
    let dates = seen.keys().copied().chain(previous.dates.iter().map(|d| d.date));
    for date in dates.filter(|d| *d >= first) {
        let expected = kept(date).unwrap_or(DateDigest { date, objects: 0, sum: 0 });
        let found = seen.get(&date).map_or(DateDigest { date, objects: 0, sum: 0 }, |(before, _)| *before);
        if (found.objects, found.sum) == (expected.objects, expected.sum) {
            continue;
        }
        let what = if found.objects < expected.objects {
            format!(
                "objects the chain delivered are gone ({} deleted or replaced, as compaction or retention \
                 do)",
                expected.objects - found.objects
            )
        } else if found.objects > expected.objects {
            format!(
                "objects appeared in it with a modification time the chain had already passed ({} written \
                 in place, copied with their old times, or dated by a clock behind)",
                found.objects - expected.objects
            )
        } else {
            "an object the chain delivered was replaced".to_owned()
        };
        let restart = match previous.dimension {
            DateDimension::Default => date,
            DateDimension::Receive => utc_date(since),
        };
        return Err(Error::CursorConflict { date, restart, what });
    }
    Ok(())
}

/// An object's identity as a 64-bit number: its name, size, modification time and ETag.
fn identity(object: &Listed) -> u64 {
    let meta = &object.meta;
    let mut hash = Sha256::new();
    hash.update(meta.location.as_ref().as_bytes());
    hash.update([0]);
    hash.update(meta.size.to_le_bytes());
    hash.update(meta.last_modified.timestamp_nanos_opt().unwrap_or(i64::MAX).to_le_bytes());
    hash.update(meta.e_tag.as_deref().unwrap_or("").as_bytes());
    let digest = hash.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("eight bytes"))
}

fn nanos(time: SystemTime) -> i64 {
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

fn utc_date(timestamp: i64) -> NaiveDate {
    chrono::DateTime::from_timestamp(timestamp, 0).map_or(NaiveDate::MIN, |t| t.date_naive())
}

#[cfg(test)]
mod tests;
