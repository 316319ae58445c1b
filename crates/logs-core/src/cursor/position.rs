//! A chain's position, as its cursor carries it (a leaf: `token.rs` writes it, `mod.rs`
//! moves it on).

use chrono::NaiveDate;
use sha2::{Digest, Sha256};

use crate::schema::DateDimension;

/// Where a chain stands (see the `cursor` module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPosition {
    pub(crate) application_id: i64,
    pub(crate) dimension: DateDimension,
    /// `date_since`, in Unix seconds.
    pub(crate) since: i64,
    pub(crate) binding: Binding,
    /// Objects modified at or before this (ns since the epoch) have been delivered.
    pub(crate) horizon: i64,
    pub(crate) max_lateness_days: u16,
    /// The first date folder whose digest is kept.
    pub(crate) window_start: NaiveDate,
    /// The delivered objects of each date folder from `window_start` on that has any.
    pub(crate) dates: Vec<DateDigest>,
}

impl ChainPosition {
    /// `date_since`, in Unix seconds.
    pub fn since(&self) -> i64 {
        self.since
    }

    pub fn application_id(&self) -> i64 {
        self.application_id
    }

    pub fn date_dimension(&self) -> DateDimension {
        self.dimension
    }
}

/// Hashes of the request's fields and filters a chain was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Binding {
    pub(crate) fields: u32,
    pub(crate) filters: u32,
}

impl Binding {
    /// The binding of the requested column names, in order, and the filters as
    /// `field=value` texts, in any order.
    pub(crate) fn of(names: &[&str], mut filters: Vec<String>) -> Binding {
        filters.sort();
        Binding { fields: hash32(&names.join("\0")), filters: hash32(&filters.join("\0")) }
    }
}

fn hash32(text: &str) -> u32 {
    let digest = Sha256::digest(text.as_bytes());
    u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// The delivered objects of one date folder: how many, and the sum of their identities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DateDigest {
    pub(crate) date: NaiveDate,
    pub(crate) objects: u32,
    pub(crate) sum: u64,
}
