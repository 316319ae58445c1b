//! The cursor's text: a [`ChainPosition`] in a fixed binary layout, authenticated with an
//! HMAC-SHA-256 under one of the operator's keys, in base64url without padding.
//!
//! ```text
//! version 1 | key id 4 | application_id i64 | dimension u8 | since i64 | fields u32 | filters u32
//! | horizon i64 (ns) | max lateness u16 (days) | window start i32 (days) | dates u16
//! | dates × (date i32 (days) | objects u32 | sum u64) | MAC 16 (HMAC-SHA-256, first half)
//! ```
//!
//! Integers are little-endian; days count from 1970-01-01. The MAC covers every byte before
//! it, so that no field can be changed without the key; nothing in it is secret.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::NaiveDate;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use super::position::{Binding, ChainPosition, DateDigest};
use crate::schema::DateDimension;

const VERSION: u8 = 1;
const MAC_LEN: usize = 16;
const HEADER_LEN: usize = 1 + 4 + 8 + 1 + 8 + 4 + 4 + 8 + 2 + 4 + 2;
const DATE_LEN: usize = 4 + 4 + 8;
/// The most date folders a cursor holds (half a year): 16 bytes each, so that the longest
/// cursor, about 4 000 characters, still fits in a URL with room to spare.
pub(crate) const MAX_DATES: usize = 183;
/// The longest cursor text accepted (a window of `MAX_DATES` dates and a little more).
pub(super) const MAX_TEXT: usize = (HEADER_LEN + MAX_DATES * DATE_LEN + MAC_LEN) * 4 / 3 + 4;

type HmacSha256 = hmac::Hmac<Sha256>;

/// A key that signs or checks cursors.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Key {
    bytes: Vec<u8>,
    id: [u8; 4],
}

impl Key {
    pub(super) fn new(bytes: Vec<u8>) -> Key {
        let digest =
            Sha256::new().chain_update(b"logs-export cursor key id\0").chain_update(&bytes).finalize();
        let id = [digest[0], digest[1], digest[2], digest[3]];
        Key { bytes, id }
    }

    fn mac(&self, payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.bytes).expect("HMAC takes a key of any length");
        mac.update(payload);
        mac
    }
}

/// Why a cursor text was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// Not a cursor: bad base64, too short or long, an unknown version, a layout that does not
    /// add up, or a MAC that does not match.
    Damaged,
    /// Signed by a key this process does not hold.
    UnknownKey,
}

/// The text of `position`, signed with `key`.
pub(super) fn seal(position: &ChainPosition, key: &Key) -> String {
    let mut out = Vec::with_capacity(HEADER_LEN + position.dates.len() * DATE_LEN + MAC_LEN);
    out.push(VERSION);
    out.extend_from_slice(&key.id);
    out.extend_from_slice(&position.application_id.to_le_bytes());
    out.push(match position.dimension {
        DateDimension::Default => 0,
        DateDimension::Receive => 1,
    });
    out.extend_from_slice(&position.since.to_le_bytes());
    out.extend_from_slice(&position.binding.fields.to_le_bytes());
    out.extend_from_slice(&position.binding.filters.to_le_bytes());
    out.extend_from_slice(&position.horizon.to_le_bytes());
    out.extend_from_slice(&position.max_lateness_days.to_le_bytes());
    out.extend_from_slice(&days(position.window_start).to_le_bytes());
    let dates = u16::try_from(position.dates.len().min(MAX_DATES)).expect("at most MAX_DATES");
    out.extend_from_slice(&dates.to_le_bytes());
    for date in position.dates.iter().take(MAX_DATES) {
        out.extend_from_slice(&days(date.date).to_le_bytes());
        out.extend_from_slice(&date.objects.to_le_bytes());
        out.extend_from_slice(&date.sum.to_le_bytes());
    }
    let tag = key.mac(&out).finalize().into_bytes();
    out.extend_from_slice(&tag[..MAC_LEN]);
    URL_SAFE_NO_PAD.encode(out)
}

/// The position `text` holds, if one of `keys` signed it.
pub(super) fn open(text: &str, keys: &[Key]) -> Result<ChainPosition, Refusal> {
    if text.len() > MAX_TEXT {
        return Err(Refusal::Damaged);
    }
    let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| Refusal::Damaged)?;
    if bytes.len() < HEADER_LEN + MAC_LEN || bytes[0] != VERSION {
        return Err(Refusal::Damaged);
    }
    let (payload, tag) = bytes.split_at(bytes.len() - MAC_LEN);
    let key = keys.iter().find(|key| key.id == payload[1..5]).ok_or(Refusal::UnknownKey)?;
    key.mac(payload).verify_truncated_left(tag).map_err(|_| Refusal::Damaged)?;
    let mut r = Reader { bytes: &payload[5..] };
    let application_id = i64::from_le_bytes(r.take()?);
    let dimension = match r.take::<1>()?[0] {
        0 => DateDimension::Default,
        1 => DateDimension::Receive,
        _ => return Err(Refusal::Damaged),
    };
    let since = i64::from_le_bytes(r.take()?);
    let binding = Binding { fields: u32::from_le_bytes(r.take()?), filters: u32::from_le_bytes(r.take()?) };
    let horizon = i64::from_le_bytes(r.take()?);
    let max_lateness_days = u16::from_le_bytes(r.take()?);
    let window_start = date(i32::from_le_bytes(r.take()?))?;
    let count = usize::from(u16::from_le_bytes(r.take()?));
    if r.bytes.len() != count * DATE_LEN {
        return Err(Refusal::Damaged);
    }
    let mut dates = Vec::with_capacity(count);
    for _ in 0..count {
        let date = date(i32::from_le_bytes(r.take()?))?;
        dates.push(DateDigest {
            date,
            objects: u32::from_le_bytes(r.take()?),
            sum: u64::from_le_bytes(r.take()?),
        });
    }
    Ok(ChainPosition {
        application_id,
        dimension,
        since,
        binding,
        horizon,
        max_lateness_days,
        window_start,
        dates,
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Refusal> {
        let (head, rest) = self.bytes.split_first_chunk::<N>().ok_or(Refusal::Damaged)?;
        self.bytes = rest;
        Ok(*head)
    }
}

fn days(date: NaiveDate) -> i32 {
    (date - NaiveDate::from_ymd_opt(1970, 1, 1).expect("a valid date")).num_days() as i32
}

fn date(days: i32) -> Result<NaiveDate, Refusal> {
    NaiveDate::from_ymd_opt(1970, 1, 1)
        .expect("a valid date")
        .checked_add_signed(chrono::TimeDelta::days(i64::from(days)))
        .ok_or(Refusal::Damaged)
}
