//! An independent model of the export request's documented rules (docs/api.md, "The export
//! request"), for `request_properties.rs`: it decodes query strings, validates the pairs and
//! converts dates (days from the civil calendar) by itself, and serializes pairs with its own
//! percent-encoder. It takes nothing from the crate but the types it compares against.
#![allow(dead_code)]

use std::collections::BTreeSet;

use logs_core::request::MAX_PARTS;
use logs_core::{DateDimension, RequestPolicy};

pub mod strategies;

/// The fields of spec §2.1, in its order, with their declared types.
pub const FIELDS: [(&str, Kind); 30] = [
    ("error", Kind::Text),
    ("error_datetime", Kind::Text),
    ("error_id", Kind::Text),
    ("error_json", Kind::Text),
    ("error_name", Kind::Text),
    ("error_receive_datetime", Kind::Text),
    ("error_receive_timestamp", Kind::Signed),
    ("error_timestamp", Kind::Signed),
    ("service_device_id", Kind::Unsigned),
    ("city", Kind::Text),
    ("connection_type", Kind::Text),
    ("country_iso_code", Kind::Text),
    ("device_ipv6", Kind::Text),
    ("device_locale", Kind::Text),
    ("device_manufacturer", Kind::Text),
    ("device_model", Kind::Text),
    ("device_type", Kind::Text),
    ("google_aid", Kind::Text),
    ("ios_ifa", Kind::Text),
    ("ios_ifv", Kind::Text),
    ("mcc", Kind::Signed),
    ("mnc", Kind::Signed),
    ("operator_name", Kind::Text),
    ("os_name", Kind::Text),
    ("os_version", Kind::Text),
    ("profile_id", Kind::Text),
    ("windows_aid", Kind::Text),
    ("app_package_name", Kind::Text),
    ("app_version_name", Kind::Text),
    ("application_id", Kind::Signed),
];

/// The parameters of docs/api.md's table other than the field names.
pub const PARAMETERS: [&str; 10] = [
    "application_id",
    "date_since",
    "date_until",
    "fields",
    "date_dimension",
    "limit",
    "use_utf8_bom",
    "skip_unavailable_shards",
    "parts_count",
    "part_number",
];

/// The longest `message()` and `Display` of a refusal that still counts as short: the longest
/// legitimate message lists every parameter and field name (about 700 bytes).
pub const MAX_MESSAGE_BYTES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Signed,
    Unsigned,
}

pub fn field_kind(name: &str) -> Option<Kind> {
    FIELDS.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
}

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// Decodes one query component: `+` is a space, `%XX` a byte, the result must be UTF-8.
pub fn model_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let hex = |b: Option<&u8>| b.and_then(|&b| (b as char).to_digit(16));
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let (high, low) = (hex(bytes.get(i + 1))?, hex(bytes.get(i + 2))?);
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Why the first stage refuses a query (the first bad segment, left to right).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairsFault {
    /// The name does not decode (malformed escape or not UTF-8); the name as sent.
    BadName(String),
    /// The value does not decode; the decoded name.
    BadValue(String),
    /// The name decodes to nothing (`=5`).
    EmptyName,
    /// A name given twice.
    Duplicate(String),
}

pub fn model_pairs(query: &str) -> Result<Vec<(String, String)>, PairsFault> {
    let query = query.strip_prefix('?').unwrap_or(query);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for segment in query.split('&').filter(|s| !s.is_empty()) {
        let (raw_name, raw_value) = segment.split_once('=').unwrap_or((segment, ""));
        let name = model_decode(raw_name).ok_or_else(|| PairsFault::BadName(raw_name.to_owned()))?;
        let value = model_decode(raw_value).ok_or_else(|| PairsFault::BadValue(name.clone()))?;
        if name.is_empty() {
            return Err(PairsFault::EmptyName);
        }
        if pairs.iter().any(|(n, _)| *n == name) {
            return Err(PairsFault::Duplicate(name));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// The model's verdict on one value: valid (with what it means), invalid, or either (a detail
/// docs/api.md leaves open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<T> {
    Valid(T),
    Invalid,
    Either,
}

/// A decimal integer in `min..=max`. The canonical form (`0`, `-12`, `345`) is valid; a
/// leading `+`, leading zeros or `-0` are left open when the number is in range.
pub fn model_integer(value: &str, min: i128, max: i128) -> Verdict<i128> {
    let (negative, digits) = match value.as_bytes().first() {
        Some(b'-') => (true, &value[1..]),
        Some(b'+') => (false, &value[1..]),
        _ => (false, value),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Verdict::Invalid;
    }
    let significant = digits.trim_start_matches('0');
    if significant.len() > 30 {
        return Verdict::Invalid;
    }
    let magnitude: i128 = if significant.is_empty() { 0 } else { significant.parse().unwrap() };
    let number = if negative { -magnitude } else { magnitude };
    if number < min || number > max {
        return Verdict::Invalid;
    }
    let canonical = number.to_string();
    if value == canonical { Verdict::Valid(number) } else { Verdict::Either }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (H. Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `yyyy-mm-dd` or `yyyy-mm-dd hh:mm:ss` as Unix seconds; a date alone is its first second,
/// or its last for `date_until`.
pub fn model_datetime(value: &str, end_of_day: bool) -> Verdict<i64> {
    let b = value.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        part.iter().all(u8::is_ascii_digit).then(|| std::str::from_utf8(part).unwrap().parse().unwrap())
    };
    let shape = match b.len() {
        10 => b[4] == b'-' && b[7] == b'-',
        19 => b[4] == b'-' && b[7] == b'-' && b[10] == b' ' && b[13] == b':' && b[16] == b':',
        _ => false,
    };
    if !shape {
        return Verdict::Invalid;
    }
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return Verdict::Invalid;
    };
    if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return Verdict::Invalid;
    }
    let seconds = if b.len() == 10 {
        if end_of_day { 86_399 } else { 0 }
    } else {
        let (Some(h), Some(m), Some(s)) = (number(11..13), number(14..16), number(17..19)) else {
            return Verdict::Invalid;
        };
        if h > 23 || m > 59 || s > 59 {
            return Verdict::Invalid;
        }
        h * 3600 + m * 60 + s
    };
    if year == 0 {
        return Verdict::Either;
    }
    Verdict::Valid(days_from_civil(year, month, day) * 86_400 + seconds)
}

/// `fields`: comma-separated names, spaces around them ignored; no empty, unknown or repeated
/// name.
pub fn model_fields(value: &str) -> Verdict<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    let mut open = false;
    for element in value.split(',') {
        let name = element.trim_matches(' ');
        if name.trim() != name {
            // Whitespace other than spaces at the ends: docs/api.md only speaks of spaces.
            open = true;
        }
        let name = name.trim();
        if name.is_empty() || field_kind(name).is_none() || names.iter().any(|n| n == name) {
            return Verdict::Invalid;
        }
        names.push(name.to_owned());
    }
    if open { Verdict::Either } else { Verdict::Valid(names) }
}

pub fn model_bool(value: Option<&str>) -> Verdict<bool> {
    match value {
        None | Some("false" | "0") => Verdict::Valid(false),
        Some("true" | "1") => Verdict::Valid(true),
        Some(_) => Verdict::Invalid,
    }
}

/// What the model expects of an accepted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub application_id: i64,
    pub since: i64,
    pub until: i64,
    pub dimension: DateDimension,
    pub fields: Vec<String>,
    pub filters: Vec<(String, ExpectedValue)>,
    pub limit: Option<u64>,
    pub bom: bool,
    pub skip: bool,
    pub parts: Option<(u32, u32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpectedValue {
    Text(String),
    Signed(i64),
    Unsigned(u64),
}

/// The second stage's verdict: which parameters are at fault (a refusal must name one of
/// them, or one of the open ones), and what an accepted request holds.
#[derive(Debug, Default)]
pub struct Validation {
    pub faults: BTreeSet<String>,
    pub open: BTreeSet<String>,
    pub expected: Option<Expected>,
}

pub fn model_validate(pairs: &[(String, String)], policy: &RequestPolicy) -> Validation {
    let mut v = Validation::default();
    let get = |name: &str| pairs.iter().find(|(n, _)| n == name).map(|(_, value)| value.as_str());
    let mut judge = |name: &str, verdict_ok: Option<bool>| match verdict_ok {
        Some(true) => {}
        Some(false) => {
            v.faults.insert(name.to_owned());
        }
        None => {
            v.open.insert(name.to_owned());
        }
    };
    pub fn ok<T>(verdict: &Verdict<T>) -> Option<bool> {
        match verdict {
            Verdict::Valid(_) => Some(true),
            Verdict::Invalid => Some(false),
            Verdict::Either => None,
        }
    }
    pub fn value<T: Clone>(verdict: &Verdict<T>) -> Option<T> {
        match verdict {
            Verdict::Valid(t) => Some(t.clone()),
            _ => None,
        }
    }

    let mut filters = Vec::new();
    for (name, raw) in pairs {
        match field_kind(name) {
            Some(_) if name == "application_id" => {}
            Some(Kind::Text) => filters.push((name.clone(), ExpectedValue::Text(raw.clone()))),
            Some(Kind::Signed) => {
                let verdict = model_integer(raw, i64::MIN.into(), i64::MAX.into());
                judge(name, ok(&verdict));
                if let Some(n) = value(&verdict) {
                    filters.push((name.clone(), ExpectedValue::Signed(n as i64)));
                }
            }
            Some(Kind::Unsigned) => {
                let verdict = model_integer(raw, 0, u64::MAX.into());
                judge(name, ok(&verdict));
                if let Some(n) = value(&verdict) {
                    filters.push((name.clone(), ExpectedValue::Unsigned(n as u64)));
                }
            }
            None if PARAMETERS.contains(&name.as_str()) => {}
            None => judge(name, Some(false)),
        }
    }

    let application_id = match get("application_id") {
        None => Verdict::Invalid,
        Some(raw) => model_integer(raw, i64::MIN.into(), i64::MAX.into()),
    };
    judge("application_id", ok(&application_id));
    let since = get("date_since").map_or(Verdict::Invalid, |raw| model_datetime(raw, false));
    judge("date_since", ok(&since));
    let until = get("date_until").map_or(Verdict::Invalid, |raw| model_datetime(raw, true));
    judge("date_until", ok(&until));
    if let (Verdict::Valid(s), Verdict::Valid(u)) = (&since, &until)
        && s > u
    {
        // The range is empty: either end may be named.
        judge("date_since", Some(false));
        judge("date_until", Some(false));
    }
    let fields = get("fields").map_or(Verdict::Invalid, model_fields);
    judge("fields", ok(&fields));
    let dimension = match get("date_dimension") {
        None | Some("default") => Verdict::Valid(DateDimension::Default),
        Some("receive") => Verdict::Valid(DateDimension::Receive),
        Some(_) => Verdict::Invalid,
    };
    judge("date_dimension", ok(&dimension));
    let max = policy.max_limit.unwrap_or(u64::MAX);
    let limit = match get("limit") {
        None => Verdict::Valid(policy.max_limit),
        Some(raw) => match model_integer(raw, 1, max.into()) {
            Verdict::Valid(n) => Verdict::Valid(Some(n as u64)),
            Verdict::Invalid => Verdict::Invalid,
            Verdict::Either => Verdict::Either,
        },
    };
    judge("limit", ok(&limit));
    let bom = model_bool(get("use_utf8_bom"));
    judge("use_utf8_bom", ok(&bom));
    let skip = model_bool(get("skip_unavailable_shards"));
    judge("skip_unavailable_shards", ok(&skip));
    let parts = match (get("parts_count"), get("part_number")) {
        (None, None) => Verdict::Valid(None),
        (Some(_), None) | (None, Some(_)) => {
            judge("parts_count", Some(false));
            judge("part_number", Some(false));
            Verdict::Invalid
        }
        (Some(count), Some(number)) => match model_integer(count, 1, MAX_PARTS.into()) {
            Verdict::Invalid => {
                // The number cannot be judged without a count: either may be named.
                judge("parts_count", Some(false));
                judge("part_number", None);
                Verdict::Invalid
            }
            Verdict::Either => {
                judge("parts_count", None);
                judge("part_number", None);
                Verdict::Either
            }
            Verdict::Valid(c) => match model_integer(number, 0, c - 1) {
                Verdict::Valid(n) => Verdict::Valid(Some((c as u32, n as u32))),
                other => {
                    judge("part_number", ok(&other));
                    Verdict::Invalid
                }
            },
        },
    };
    if matches!(parts, Verdict::Either) {
        judge("parts_count", None);
    }

    if v.faults.is_empty() && v.open.is_empty() {
        v.expected = Some(Expected {
            application_id: value(&application_id).unwrap() as i64,
            since: value(&since).unwrap(),
            until: value(&until).unwrap(),
            dimension: value(&dimension).unwrap(),
            fields: value(&fields).unwrap(),
            filters,
            limit: value(&limit).unwrap(),
            bom: value(&bom).unwrap(),
            skip: value(&skip).unwrap(),
            parts: value(&parts).unwrap(),
        });
    }
    v
}

/// A small deterministic generator for the encoder's choices (proptest draws the seed).
#[derive(Debug, Clone)]
pub struct Choices(pub u64);

impl Choices {
    pub fn next(&mut self) -> u64 {
        // SplitMix64.
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

pub fn push_escape(out: &mut String, byte: u8, choices: &mut Choices) {
    let digits: &[u8; 16] = if choices.one_in(2) { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    out.push('%');
    out.push(digits[(byte >> 4) as usize] as char);
    out.push(digits[(byte & 15) as usize] as char);
}

/// An independent percent-encoder that varies everything the rules allow: unreserved
/// characters raw or escaped, a space as `+`, `%20` or `%2b`'s opposite, hex digits in either
/// case, non-ASCII raw or escaped byte by byte, control characters raw (the library takes any
/// `&str`) or escaped, `=` raw inside a value.
pub fn encode_component(s: &str, is_value: bool, choices: &mut Choices, out: &mut String) {
    for c in s.chars() {
        let mut buf = [0u8; 4];
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        match c {
            'A'..='Z'
            | 'a'..='z'
            | '0'..='9'
            | '-'
            | '_'
            | '.'
            | '~'
            | ':'
            | ','
            | '/'
            | '@'
            | '!'
            | '$'
            | '\''
            | '('
            | ')'
            | '*'
            | ';'
            | '?'
            | '#'
            | '['
            | ']' => {
                if choices.one_in(6) {
                    push_escape(out, bytes[0], choices);
                } else {
                    out.push(c);
                }
            }
            ' ' => {
                if choices.one_in(2) {
                    out.push('+');
                } else {
                    push_escape(out, b' ', choices);
                }
            }
            '=' if is_value && !choices.one_in(3) => out.push('='),
            '&' | '=' | '+' | '%' => push_escape(out, bytes[0], choices),
            c if !c.is_ascii() && choices.one_in(2) => out.push(c),
            c if c.is_ascii_control() && choices.one_in(3) => out.push(c),
            _ => bytes.iter().for_each(|&b| push_escape(out, b, choices)),
        }
    }
}

/// Serializes pairs with [`encode_component`], with a leading `?` and empty segments
/// sometimes.
pub fn encode_query(pairs: &[(String, String)], seed: u64) -> String {
    let mut choices = Choices(seed);
    let mut out = String::new();
    if choices.one_in(4) {
        out.push('?');
    }
    for (i, (name, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        while choices.one_in(8) {
            out.push('&');
        }
        encode_component(name, false, &mut choices, &mut out);
        // A parameter without `=` has the empty value.
        if !value.is_empty() || !choices.one_in(3) {
            out.push('=');
            encode_component(value, true, &mut choices, &mut out);
        }
    }
    if choices.one_in(5) {
        out.push('&');
    }
    out
}
