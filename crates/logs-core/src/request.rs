//! Stage two of request parsing: decoded pairs become a validated [`ExportRequest`].
//!
//! Every rule of spec §4.1 (and of the issue that pinned down what the spec leaves open) is
//! checked here, once, for the library, the CLI and the HTTP server alike. An
//! `ExportRequest` can only be obtained through this validation.

use std::sync::Arc;

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

use crate::aliases::{ColumnSource, FieldAliases};
use crate::cursor::{self, Binding, ChainCursor, CursorKeys};
use crate::error::{RequestError, quote};
use crate::privacy::{Privacy, Treatment};
use crate::query::{PARAMETERS, QueryPairs};
pub use crate::schema::DateDimension;
use crate::schema::{Field, FieldType, PART_KEY};

/// An inclusive range of Unix seconds, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    pub since: i64,
    pub until: i64,
}

/// The value of an equality filter, already checked against its field's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue {
    String(String),
    Int64(i64),
    UInt64(u64),
}

/// An equality filter: `field = value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub field: Field,
    pub value: FilterValue,
}

/// A request for one part of an export split into `count` disjoint parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub count: u32,
    pub number: u32,
}

/// The largest `parts_count` accepted.
pub const MAX_PARTS: u32 = 1024;

/// Operator settings that validation depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestPolicy {
    /// The largest `limit` allowed, and the limit applied when none is given.
    /// `None`: no maximum, and an omitted `limit` exports every matching row.
    pub max_limit: Option<u64>,
    /// Other names accepted for fields, and fields the dataset does not hold.
    pub aliases: FieldAliases,
    /// The keys that check the cursors of chains (`cursor=`).
    pub cursor_keys: CursorKeys,
}

/// The last second a chain's range holds: a chain has no end date.
const CHAIN_UNTIL: i64 = 253_402_300_799; // 9999-12-31 23:59:59

/// One column of the output: the name the request gave it, and what it is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The name as requested in `fields`: a field's name, an alias or an absent field's name.
    pub name: String,
    pub source: ColumnSource,
}

/// A validated export request (spec §4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRequest {
    application_id: i64,
    range: TimeRange,
    date_dimension: DateDimension,
    columns: Vec<Column>,
    filters: Vec<Filter>,
    limit: Option<u64>,
    use_utf8_bom: bool,
    skip_unavailable_shards: bool,
    parts: Option<Parts>,
    cursor: Option<ChainCursor>,
    privacy: Arc<Privacy>,
}

impl ExportRequest {
    /// Parses and validates a raw query string such as
    /// `application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name`.
    pub fn parse(query: &str, policy: &RequestPolicy) -> Result<ExportRequest, RequestError> {
        ExportRequest::from_pairs(&QueryPairs::parse(query)?, policy)
    }

    /// Validates decoded pairs.
    pub fn from_pairs(pairs: &QueryPairs, policy: &RequestPolicy) -> Result<ExportRequest, RequestError> {
        ExportRequest::from_pairs_under(pairs, policy, &Privacy::none())
    }

    /// Validates decoded pairs for a caller under a field policy: a denied field is refused in
    /// `fields` and in filters, a filter on a treated field compares the value as the caller
    /// sees it (a pseudonym, a truncated address, a rounded time), and the range and parts
    /// cannot reveal more of a time or an identity than the policy shows.
    pub fn from_pairs_under(
        pairs: &QueryPairs,
        policy: &RequestPolicy,
        privacy: &Arc<Privacy>,
    ) -> Result<ExportRequest, RequestError> {
        let aliases = &policy.aliases;
        let mut filters = Vec::new();
        for (name, value) in pairs.iter() {
            match aliases.resolve(name) {
                // The required parameter, not a filter.
                Some(ColumnSource::Field(Field::APPLICATION_ID)) => {}
                Some(ColumnSource::Field(field)) => {
                    let value = match privacy.treatment(field) {
                        Treatment::Deny => return Err(denied(name, name, field)),
                        Treatment::Pseudonymise => parse_pseudonym(name, value)?,
                        Treatment::Truncate | Treatment::Coarsen => {
                            let parsed = parse_filter_value(name, field, value)?;
                            check_treated_value(name, field, &parsed, privacy)?;
                            parsed
                        }
                        _ => parse_filter_value(name, field, value)?,
                    };
                    filters.push(Filter { field, value });
                }
                Some(ColumnSource::Absent(_)) => {
                    return Err(RequestError::new(
                        name,
                        "names a field this dataset does not hold: it may be requested in `fields`, \
                         where it is always empty, but not used as a filter",
                    ));
                }
                None if PARAMETERS.contains(&name) => {}
                None => return Err(unknown_parameter(name, aliases)),
            }
        }

        let application_id = parse_i64("application_id", required(pairs, "application_id")?)?;
        let cursor = match pairs.get("cursor") {
            None => None,
            Some("start") => Some(ChainCursor::Start),
            Some(text) => Some(ChainCursor::Continue {
                position: cursor::open(text, &policy.cursor_keys)?,
                text: text.to_owned(),
            }),
        };
        let range = match &cursor {
            None => {
                let since = parse_datetime("date_since", required(pairs, "date_since")?, false)?;
                let until = parse_datetime("date_until", required(pairs, "date_until")?, true)?;
                if since > until {
                    return Err(RequestError::new(
                        "date_since",
                        format!("({since}) is after date_until ({until}); the range must not be empty"),
                    ));
                }
                TimeRange { since: since.and_utc().timestamp(), until: until.and_utc().timestamp() }
            }
            Some(cursor) => TimeRange { since: chain_since(pairs, cursor)?, until: CHAIN_UNTIL },
        };
        let columns = parse_fields(required(pairs, "fields")?, aliases)?;
        if let Some((column, field)) = columns.iter().find_map(|c| match c.source {
            ColumnSource::Field(f) if privacy.treatment(f) == Treatment::Deny => Some((c, f)),
            _ => None,
        }) {
            return Err(denied("fields", &column.name, field));
        }
        let date_dimension = match pairs.get("date_dimension") {
            None | Some("default") => DateDimension::Default,
            Some("receive") => DateDimension::Receive,
            Some(other) => {
                return Err(RequestError::new(
                    "date_dimension",
                    format!("is `{}`; allowed values: `default`, `receive`", quote(other)),
                ));
            }
        };
        let use_utf8_bom = parse_bool("use_utf8_bom", pairs.get("use_utf8_bom"))?;
        let skip_unavailable_shards =
            parse_bool("skip_unavailable_shards", pairs.get("skip_unavailable_shards"))?;
        let parts = parse_parts(pairs.get("parts_count"), pairs.get("part_number"))?;
        check_private_range(privacy, date_dimension, range, cursor.is_some())?;
        if parts.is_some()
            && privacy.key().is_none()
            && let Some(field) = PART_KEY.iter().find(|f| privacy.treatment(**f) != Treatment::Allow)
        {
            return Err(RequestError::new(
                "parts_count",
                format!(
                    "cannot be used under this token's field policy: a record's part is computed from `{field}`, \
                     which the policy hides, and hiding it needs the service's pseudonym key, which is not set"
                ),
            ));
        }
        let limit = match &cursor {
            None => parse_limit(pairs.get("limit"), policy)?,
            // A chain's call sends every new record, whatever the service's maximum `limit`:
            // a cut would leave records no cursor covers.
            Some(cursor) => {
                refuse_with_cursor(pairs, skip_unavailable_shards)?;
                if let ChainCursor::Continue { position, .. } = cursor {
                    check_chain(
                        position,
                        application_id,
                        date_dimension,
                        &binding(&columns, &filters, privacy),
                    )?;
                }
                None
            }
        };

        Ok(ExportRequest {
            application_id,
            range,
            date_dimension,
            columns,
            filters,
            limit,
            use_utf8_bom,
            skip_unavailable_shards,
            parts,
            cursor,
            privacy: Arc::clone(privacy),
        })
    }

    /// The field policy the request was validated under, which its plan applies.
    pub fn privacy(&self) -> &Arc<Privacy> {
        &self.privacy
    }

    /// The columns the field policy changes, as `name=treatment`, in order: the value of the
    /// `Logs-Field-Policy` header.
    pub fn changed_columns(&self) -> Vec<String> {
        self.columns
            .iter()
            .filter_map(|c| match c.source {
                ColumnSource::Field(field) => match self.privacy.treatment(field) {
                    Treatment::Allow => None,
                    t => Some(format!("{}={}", c.name, t.name())),
                },
                ColumnSource::Absent(_) => None,
            })
            .collect()
    }

    pub fn application_id(&self) -> i64 {
        self.application_id
    }

    /// The inclusive range of Unix seconds, in the time given by [`Self::date_dimension`].
    pub fn range(&self) -> TimeRange {
        self.range
    }

    pub fn date_dimension(&self) -> DateDimension {
        self.date_dimension
    }

    /// The output columns, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The equality filters, in the order given.
    pub fn filters(&self) -> &[Filter] {
        &self.filters
    }

    /// The maximum number of rows to export (`None`: all).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    pub fn use_utf8_bom(&self) -> bool {
        self.use_utf8_bom
    }

    pub fn skip_unavailable_shards(&self) -> bool {
        self.skip_unavailable_shards
    }

    pub fn parts(&self) -> Option<Parts> {
        self.parts
    }

    /// The cursor chain this request starts or continues (`cursor=`), if any.
    pub fn cursor(&self) -> Option<&ChainCursor> {
        self.cursor.as_ref()
    }

    /// What a chain's cursor is bound to besides the application and the dimension.
    pub(crate) fn binding(&self) -> Binding {
        binding(&self.columns, &self.filters, &self.privacy)
    }
}

/// What a chain is bound to: the columns, the filters and, when there is one, the field policy
/// (a chain continues only under the policy it started under).
fn binding(columns: &[Column], filters: &[Filter], privacy: &Privacy) -> Binding {
    let mut names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let policy = format!("\0field policy {}", privacy.fingerprint());
    if !privacy.fingerprint().is_empty() {
        names.push(&policy);
    }
    let filters = filters
        .iter()
        .map(|f| {
            let value = match &f.value {
                FilterValue::String(s) => s.clone(),
                FilterValue::Int64(n) => n.to_string(),
                FilterValue::UInt64(n) => n.to_string(),
            };
            format!("{}={value}", f.field.name())
        })
        .collect();
    Binding::of(&names, filters)
}

/// `date_since` of a chain's call, in Unix seconds: required to start one; carried by the
/// cursor after, and then, if given, the same.
fn chain_since(pairs: &QueryPairs, cursor: &ChainCursor) -> Result<i64, RequestError> {
    if pairs.get("date_until").is_some() {
        return Err(RequestError::new(
            "date_until",
            "cannot be given with `cursor`: a chain has no end date, each call exports what is new",
        ));
    }
    let given = pairs.get("date_since").map(|v| parse_datetime("date_since", v, false)).transpose()?;
    let given = given.map(|since| since.and_utc().timestamp());
    match (cursor, given) {
        (ChainCursor::Start, Some(since)) => Ok(since),
        (ChainCursor::Start, None) => Err(RequestError::new(
            "date_since",
            "is required with cursor=start: the chain exports every record from that date on",
        )),
        (ChainCursor::Continue { position, .. }, None) => Ok(position.since()),
        (ChainCursor::Continue { position, .. }, Some(since)) if since == position.since() => Ok(since),
        (ChainCursor::Continue { position, .. }, Some(_)) => Err(RequestError::new(
            "date_since",
            format!(
                "differs from the chain's: its cursor was started with date_since={}; leave it out or give \
                 the same",
                chrono::DateTime::from_timestamp(position.since(), 0).map_or_else(
                    || position.since().to_string(),
                    |t| t.format("%Y-%m-%d %H:%M:%S").to_string()
                )
            ),
        )),
    }
}

/// The parameters a chain's call cannot take: each would send less than what is new while
/// the next cursor moved past it.
fn refuse_with_cursor(pairs: &QueryPairs, skip_unavailable_shards: bool) -> Result<(), RequestError> {
    let why = "cannot be combined with `cursor`: a chain's call sends every new record, so that the next \
               cursor covers exactly what was sent";
    for name in ["limit", "parts_count", "part_number"] {
        if pairs.get(name).is_some() {
            return Err(RequestError::new(name, why));
        }
    }
    if skip_unavailable_shards {
        return Err(RequestError::new("skip_unavailable_shards", why));
    }
    Ok(())
}

/// Fails unless a chain's cursor was made for this application, dimension, fields and
/// filters.
fn check_chain(
    position: &cursor::ChainPosition,
    application_id: i64,
    dimension: DateDimension,
    bound: &Binding,
) -> Result<(), RequestError> {
    let belongs = |what: String| {
        RequestError::new(
            "cursor",
            format!(
                "belongs to a chain of {what}; a chain's calls ask for the same application_id, date_dimension, fields (in order) and filters under the same field policy, or start a new chain with cursor=start"
            ),
        )
    };
    if position.application_id() != application_id {
        return Err(belongs(format!("application_id={}", position.application_id())));
    }
    if position.date_dimension() != dimension {
        let name = match position.date_dimension() {
            DateDimension::Default => "default",
            DateDimension::Receive => "receive",
        };
        return Err(belongs(format!("date_dimension={name}")));
    }
    if position.binding.fields != bound.fields {
        return Err(belongs("other fields or another field policy".into()));
    }
    if position.binding.filters != bound.filters {
        return Err(belongs("other filters".into()));
    }
    Ok(())
}

impl TryFrom<&QueryPairs> for ExportRequest {
    type Error = RequestError;

    /// Validates with the default policy (no maximum `limit`).
    fn try_from(pairs: &QueryPairs) -> Result<ExportRequest, RequestError> {
        ExportRequest::from_pairs(pairs, &RequestPolicy::default())
    }
}

fn required<'a>(pairs: &'a QueryPairs, name: &str) -> Result<&'a str, RequestError> {
    pairs.get(name).ok_or_else(|| RequestError::new(name, "is required"))
}

fn unknown_parameter(name: &str, aliases: &FieldAliases) -> RequestError {
    let mut known: Vec<&str> = PARAMETERS.iter().copied().chain(Field::all().map(Field::name)).collect();
    known.extend(
        aliases.iter().filter(|(_, source)| matches!(source, ColumnSource::Field(_))).map(|(alias, _)| alias),
    );
    let message = match closest(name, known) {
        Some(meant) => format!("is not a known parameter (did you mean `{meant}`?)"),
        None => format!(
            "is not a known parameter; allowed: {} or a field name used as an equality filter ({})",
            PARAMETERS.join(", "),
            filter_names(aliases)
        ),
    };
    RequestError::new(name, message)
}

/// The candidate a misspelt `name` most likely meant: the nearest within two letters added,
/// dropped or changed, ignoring case (Levenshtein distance, `strsim`). None for a name longer
/// than any parameter or field could be: the distance's cost grows with the product of lengths.
fn closest<'a>(name: &str, candidates: Vec<&'a str>) -> Option<&'a str> {
    if name.len() > 64 {
        return None;
    }
    let name = name.to_lowercase();
    candidates
        .into_iter()
        .map(|candidate| (strsim::levenshtein(&name, &candidate.to_lowercase()), candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, candidate)| candidate)
}

/// The names a filter may use: every field, then the aliases.
fn filter_names(aliases: &FieldAliases) -> String {
    names(aliases, |source| matches!(source, ColumnSource::Field(_)))
}

/// The names `fields` may hold: every field, then the aliases and absent fields.
fn column_names(aliases: &FieldAliases) -> String {
    names(aliases, |_| true)
}

fn names(aliases: &FieldAliases, include: impl Fn(ColumnSource) -> bool) -> String {
    let mut names: Vec<&str> = Field::all().map(Field::name).collect();
    names.extend(aliases.iter().filter(|(_, source)| include(*source)).map(|(name, _)| name));
    names.join(",")
}

fn parse_i64(name: &str, value: &str) -> Result<i64, RequestError> {
    value.parse::<i64>().map_err(|_| {
        RequestError::new(
            name,
            format!("is `{}`; expected an integer from {} to {}", quote(value), i64::MIN, i64::MAX),
        )
    })
}

/// The value of filter `name` (the field's name or an alias) on `field`.
fn parse_filter_value(name: &str, field: Field, value: &str) -> Result<FilterValue, RequestError> {
    Ok(match field.field_type() {
        FieldType::String => FilterValue::String(value.to_owned()),
        FieldType::Int64 => FilterValue::Int64(parse_i64(name, value)?),
        FieldType::UInt64 => FilterValue::UInt64(value.parse::<u64>().map_err(|_| {
            RequestError::new(
                name,
                format!("is `{}`; expected an integer from 0 to {}", quote(value), u64::MAX),
            )
        })?),
    })
}

/// The refusal of `name` (a parameter, or the filter itself), which names `field`, denied.
fn denied(parameter: &str, name: &str, field: Field) -> RequestError {
    let what =
        if name == field.name() { format!("`{name}`") } else { format!("`{}` (`{field}`)", quote(name)) };
    let place = if parameter == "fields" { "contains" } else { "filters on" };
    RequestError::new(
        parameter,
        format!(
            "{place} {what}, which this token's field policy denies: it may not be exported or filtered on"
        ),
    )
}

/// A filter on a pseudonymised field takes a pseudonym, as the caller's exports show it.
fn parse_pseudonym(name: &str, value: &str) -> Result<FilterValue, RequestError> {
    if value.len() == 32 && value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(FilterValue::String(value.to_owned()))
    } else {
        Err(RequestError::new(
            name,
            format!(
                "is `{}`; this token's field policy pseudonymises the field, so a filter on it takes a pseudonym: \
                 32 lowercase hexadecimal digits, as the exports show it",
                quote(value)
            ),
        ))
    }
}

/// A filter on a truncated or coarsened field takes a value as the caller sees them (a
/// network, a whole hour or day): any other value could match nothing, and the export would
/// be silently empty.
fn check_treated_value(
    name: &str,
    field: Field,
    value: &FilterValue,
    privacy: &Privacy,
) -> Result<(), RequestError> {
    use crate::privacy::kernels::{coarsen_datetime, truncate_ip};
    let policy = privacy.policy();
    let (seen, what) = match (privacy.treatment(field), value) {
        (Treatment::Truncate, FilterValue::String(text)) => {
            let mut out = String::new();
            let what = format!(
                "this token's field policy truncates `{field}` to networks (IPv4 /{}, IPv6 /{})",
                policy.ipv4_prefix(),
                policy.ipv6_prefix()
            );
            if !truncate_ip(text, policy.ipv4_prefix(), policy.ipv6_prefix(), &mut out) {
                return Err(RequestError::new(
                    name,
                    format!("is `{}`, not an IP address; {what}", quote(text)),
                ));
            }
            (out, what)
        }
        (Treatment::Coarsen, FilterValue::Int64(v)) => {
            let unit = policy.coarsening();
            (
                (v - v.rem_euclid(unit.seconds())).to_string(),
                format!("this token's field policy rounds `{field}` down to the {}", unit.name()),
            )
        }
        (Treatment::Coarsen, FilterValue::String(text)) => {
            let unit = policy.coarsening();
            let what = format!("this token's field policy rounds `{field}` down to the {}", unit.name());
            let mut out = String::new();
            if !coarsen_datetime(text, unit, &mut out) {
                return Err(RequestError::new(
                    name,
                    format!("is `{}`; expected `yyyy-mm-dd hh:mm:ss`; {what}", quote(text)),
                ));
            }
            (out, what)
        }
        _ => return Ok(()),
    };
    let given = match value {
        FilterValue::String(text) => text.clone(),
        FilterValue::Int64(v) => v.to_string(),
        FilterValue::UInt64(v) => v.to_string(),
    };
    if seen == given {
        Ok(())
    } else {
        Err(RequestError::new(
            name,
            format!(
                "is `{}`, which no record shows: {what}; give the value as exports show it: `{}`",
                quote(&given),
                quote(&seen)
            ),
        ))
    }
}

/// Under a policy that denies or coarsens the time the range applies to, the range must
/// start and end on whole days (denied) or whole units of the coarsening: a finer range would
/// tell the hidden time by bisection.
fn check_private_range(
    privacy: &Privacy,
    dimension: DateDimension,
    range: TimeRange,
    chain: bool,
) -> Result<(), RequestError> {
    let field = dimension.timestamp_field();
    let unit = match privacy.treatment(field) {
        Treatment::Deny => crate::privacy::Coarsening::Day,
        Treatment::Coarsen => privacy.policy().coarsening(),
        _ => return Ok(()),
    };
    let seconds = unit.seconds();
    let why = format!(
        "this token's field policy {} `{field}`, so the range must start and end on whole {}s{}",
        if privacy.treatment(field) == Treatment::Deny { "denies" } else { "coarsens" },
        unit.name(),
        if unit == crate::privacy::Coarsening::Day {
            " (give dates alone)"
        } else {
            " (hh:00:00 to hh:59:59)"
        },
    );
    if range.since.rem_euclid(seconds) != 0 {
        return Err(RequestError::new(
            "date_since",
            format!("does not start a whole {}: {why}", unit.name()),
        ));
    }
    if !chain && (range.until + 1).rem_euclid(seconds) != 0 {
        return Err(RequestError::new("date_until", format!("does not end a whole {}: {why}", unit.name())));
    }
    Ok(())
}

/// Parses `yyyy-mm-dd hh:mm:ss` or `yyyy-mm-dd`; a date alone means the day's first second,
/// or its last when `end_of_day`.
fn parse_datetime(name: &str, value: &str, end_of_day: bool) -> Result<NaiveDateTime, RequestError> {
    let invalid = || {
        RequestError::new(
            name,
            format!(
                "is `{}`; expected a valid UTC date and time as `yyyy-mm-dd hh:mm:ss` or a date as `yyyy-mm-dd`",
                quote(value)
            ),
        )
    };
    let b = value.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let s = b.get(range)?;
        if s.iter().all(u8::is_ascii_digit) { std::str::from_utf8(s).ok()?.parse().ok() } else { None }
    };
    let shape_ok = matches!(b.len(), 10 | 19)
        && b[4] == b'-'
        && b[7] == b'-'
        && (b.len() == 10 || (b[10] == b' ' && b[13] == b':' && b[16] == b':'));
    if !shape_ok {
        return Err(invalid());
    }
    let date = NaiveDate::from_ymd_opt(
        digits(0..4).ok_or_else(invalid)? as i32,
        digits(5..7).ok_or_else(invalid)?,
        digits(8..10).ok_or_else(invalid)?,
    )
    .ok_or_else(invalid)?;
    let time = if b.len() == 10 {
        if end_of_day { NaiveTime::from_hms_opt(23, 59, 59) } else { NaiveTime::from_hms_opt(0, 0, 0) }
    } else {
        NaiveTime::from_hms_opt(
            digits(11..13).ok_or_else(invalid)?,
            digits(14..16).ok_or_else(invalid)?,
            digits(17..19).ok_or_else(invalid)?,
        )
    }
    .ok_or_else(invalid)?;
    Ok(date.and_time(time))
}

fn parse_fields(value: &str, aliases: &FieldAliases) -> Result<Vec<Column>, RequestError> {
    let mut columns: Vec<Column> = Vec::new();
    for name in value.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(RequestError::new(
                "fields",
                format!("contains an empty name; give a comma-separated list of: {}", column_names(aliases)),
            ));
        }
        let source = aliases.resolve(name).ok_or_else(|| {
            let mut known: Vec<&str> = Field::all().map(Field::name).collect();
            known.extend(aliases.iter().map(|(alias, _)| alias));
            let help = match closest(name, known) {
                Some(meant) => format!("did you mean `{meant}`?"),
                None => format!("allowed: {}", column_names(aliases)),
            };
            RequestError::new("fields", format!("contains `{}`, which is not a field; {help}", quote(name)))
        })?;
        if columns.iter().any(|c| c.name == name) {
            return Err(RequestError::new("fields", format!("names `{}` more than once", quote(name))));
        }
        columns.push(Column { name: name.to_owned(), source });
    }
    Ok(columns)
}

fn parse_limit(value: Option<&str>, policy: &RequestPolicy) -> Result<Option<u64>, RequestError> {
    let Some(value) = value else {
        return Ok(policy.max_limit);
    };
    let limit = value.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
        let max = policy.max_limit.map_or(u64::MAX, |m| m);
        RequestError::new("limit", format!("is `{}`; expected a whole number from 1 to {max}", quote(value)))
    })?;
    match policy.max_limit {
        Some(max) if limit > max => Err(RequestError::new(
            "limit",
            format!("is {limit}, above this service's maximum of {max}; give a limit from 1 to {max}"),
        )),
        _ => Ok(Some(limit)),
    }
}

fn parse_bool(name: &str, value: Option<&str>) -> Result<bool, RequestError> {
    match value {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(RequestError::new(
            name,
            format!("is `{}`; allowed values: `true`, `false`, `1`, `0`", quote(other)),
        )),
    }
}

fn parse_parts(count: Option<&str>, number: Option<&str>) -> Result<Option<Parts>, RequestError> {
    let (count, number) = match (count, number) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(RequestError::new("part_number", "is required when parts_count is given"));
        }
        (None, Some(_)) => {
            return Err(RequestError::new("parts_count", "is required when part_number is given"));
        }
        (Some(c), Some(n)) => (c, n),
    };
    let count = count.parse::<u32>().ok().filter(|c| (1..=MAX_PARTS).contains(c)).ok_or_else(|| {
        RequestError::new(
            "parts_count",
            format!("is `{}`; expected a whole number from 1 to {MAX_PARTS}", quote(count)),
        )
    })?;
    let number = number.parse::<u32>().ok().filter(|n| *n < count).ok_or_else(|| {
        RequestError::new(
            "part_number",
            format!(
                "is `{}`; expected a whole number from 0 to {} (parts are numbered from 0)",
                quote(number),
                count - 1
            ),
        )
    })?;
    Ok(Some(Parts { count, number }))
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
