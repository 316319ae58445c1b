//! Strategies for `request_properties.rs`: valid requests as values with the pairs that say
//! them, and hostile names, values and whole queries.

use logs_core::request::MAX_PARTS;
use logs_core::{DateDimension, RequestPolicy};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

use super::*;

/// Characters that matter to parsing and encoding, mixed with arbitrary ones.
pub fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => select(vec![
            'a', 'Z', '0', ' ', '+', '%', '&', '=', '?', '#', ',', ';', '"', '\'', '\\', '\0', '\r', '\n',
            '\t', '\u{1b}', '\u{7f}', '\u{85}', '\u{a0}', 'é', 'ß', '✓', '😀', '\u{2028}', '\u{feff}',
            '\u{fffd}', '\u{10ffff}',
        ]),
        1 => any::<char>(),
    ]
}

pub fn hostile_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(hostile_char(), 0..max).prop_map(|chars| chars.into_iter().collect())
}

// ----- valid requests -----

#[derive(Debug, Clone)]
pub struct DateTime {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    /// `None`: the date-only form.
    pub time: Option<(i64, i64, i64)>,
}

impl DateTime {
    pub fn text(&self) -> String {
        let date = format!("{:04}-{:02}-{:02}", self.year, self.month, self.day);
        match self.time {
            None => date,
            Some((h, m, s)) => format!("{date} {h:02}:{m:02}:{s:02}"),
        }
    }

    pub fn seconds(&self, end_of_day: bool) -> i64 {
        let (h, m, s) = self.time.unwrap_or(if end_of_day { (23, 59, 59) } else { (0, 0, 0) });
        days_from_civil(self.year, self.month, self.day) * 86_400 + h * 3600 + m * 60 + s
    }
}

pub fn datetime() -> impl Strategy<Value = DateTime> {
    let year = prop_oneof![1 => 1i64..=9999, 3 => 1970i64..=2100, 1 => select(vec![1i64, 1600, 1900, 2000, 2024, 9999])];
    (year, 1i64..=12, 0.0f64..1.0, prop::option::of((0i64..24, 0i64..60, 0i64..60))).prop_map(
        |(year, month, day_fraction, time)| {
            let days = days_in_month(year, month);
            let day = 1 + ((day_fraction * days as f64) as i64).min(days - 1);
            DateTime { year, month, day, time }
        },
    )
}

pub fn integer_text(kind: Kind) -> BoxedStrategy<String> {
    match kind {
        Kind::Signed => prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), Just(-1i64), any::<i64>()]
            .prop_map(|n| n.to_string())
            .boxed(),
        Kind::Unsigned => prop_oneof![Just(u64::MAX), Just(0u64), Just(1u64 << 63), any::<u64>()]
            .prop_map(|n| n.to_string())
            .boxed(),
        Kind::Text => hostile_text(40).boxed(),
    }
}

/// A valid request as values, and the pairs that say it.
#[derive(Debug, Clone)]
pub struct ValidRequest {
    pub pairs: Vec<(String, String)>,
    pub policy: RequestPolicy,
    pub expected: Expected,
}

pub fn valid_request() -> impl Strategy<Value = ValidRequest> {
    let names: Vec<&'static str> = FIELDS.iter().map(|(n, _)| *n).collect();
    let filterable: Vec<&'static str> = names.iter().copied().filter(|n| *n != "application_id").collect();
    let fields = subsequence(names, 1..=30).prop_shuffle().prop_flat_map(|fields| {
        let n = fields.len();
        (Just(fields), prop::collection::vec((0usize..3, 0usize..3), n))
    });
    let filters = subsequence(filterable, 0..=6).prop_flat_map(|names| {
        let values: Vec<BoxedStrategy<(String, String)>> = names
            .into_iter()
            .map(|name| {
                integer_text(field_kind(name).unwrap()).prop_map(move |v| (name.to_owned(), v)).boxed()
            })
            .collect();
        values
    });
    let max_limit =
        prop::option::of(prop_oneof![1u64..=1000, Just(u64::MAX), any::<u64>().prop_map(|n| n.max(1))]);
    let limits = max_limit.prop_flat_map(|max| {
        let top = max.unwrap_or(u64::MAX);
        (Just(max), prop::option::of(prop_oneof![Just(1u64), Just(top), 1u64..=top]))
    });
    let boolean = || prop::option::of(select(vec!["true", "false", "1", "0"]));
    let parts = prop::option::of((1u32..=MAX_PARTS).prop_flat_map(|count| (Just(count), 0..count)));
    let application_id = prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), Just(-7i64), any::<i64>()];
    let dimension = prop::option::of(select(vec!["default", "receive"]));
    (
        (application_id, datetime(), datetime(), fields, dimension),
        (filters, limits, boolean(), boolean(), parts),
    )
        .prop_flat_map(
            |(
                (application_id, a, b, (fields, padding), dimension),
                (filters, (max, limit), bom, skip, parts),
            )| {
                // Whichever order makes a non-empty range (see `DateTime::seconds`).
                let (since, until) = if a.seconds(false) <= b.seconds(true) { (a, b) } else { (b, a) };
                let mut pairs: Vec<(String, String)> = vec![
                    ("application_id".into(), application_id.to_string()),
                    ("date_since".into(), since.text()),
                    ("date_until".into(), until.text()),
                ];
                let list: Vec<String> = fields
                    .iter()
                    .zip(&padding)
                    .map(|(name, (before, after))| {
                        format!("{}{name}{}", " ".repeat(*before), " ".repeat(*after))
                    })
                    .collect();
                pairs.push(("fields".into(), list.join(",")));
                if let Some(d) = dimension {
                    pairs.push(("date_dimension".into(), d.into()));
                }
                if let Some(l) = limit {
                    pairs.push(("limit".into(), l.to_string()));
                }
                if let Some(v) = bom {
                    pairs.push(("use_utf8_bom".into(), v.into()));
                }
                if let Some(v) = skip {
                    pairs.push(("skip_unavailable_shards".into(), v.into()));
                }
                if let Some((count, number)) = parts {
                    pairs.push(("parts_count".into(), count.to_string()));
                    pairs.push(("part_number".into(), number.to_string()));
                }
                pairs.extend(filters.iter().cloned());
                let expected = Expected {
                    application_id,
                    since: since.seconds(false),
                    until: until.seconds(true),
                    dimension: if dimension == Some("receive") {
                        DateDimension::Receive
                    } else {
                        DateDimension::Default
                    },
                    fields: fields.iter().map(|f| (*f).to_owned()).collect(),
                    filters: vec![],
                    limit: limit.or(max),
                    bom: matches!(bom, Some("true" | "1")),
                    skip: matches!(skip, Some("true" | "1")),
                    parts,
                };
                let policy = RequestPolicy { max_limit: max, ..RequestPolicy::default() };
                (Just(pairs).prop_shuffle(), Just(expected), Just(policy))
            },
        )
        .prop_map(|(pairs, mut expected, policy)| {
            // Filters come back in the order of the query.
            expected.filters = pairs
                .iter()
                .filter_map(|(name, value)| {
                    let value = match field_kind(name)? {
                        _ if name == "application_id" => return None,
                        Kind::Text => ExpectedValue::Text(value.clone()),
                        Kind::Signed => ExpectedValue::Signed(value.parse().unwrap()),
                        Kind::Unsigned => ExpectedValue::Unsigned(value.parse().unwrap()),
                    };
                    Some((name.clone(), value))
                })
                .collect();
            ValidRequest { pairs, policy, expected }
        })
}

// ----- hostile queries -----

pub fn hostile_name() -> impl Strategy<Value = String> {
    let known: Vec<&str> = PARAMETERS.iter().copied().chain(FIELDS.iter().map(|(n, _)| *n)).collect();
    prop_oneof![
        8 => select(known).prop_map(str::to_owned),
        2 => select(vec![
            "limt", "os_nmae", "Fields", "LIMIT", "limit ", " limit", "limit\0", "fields[]", "date_since[0]",
            "application-id", "applicationid", "érror", "dátе_since", "x", "\u{feff}limit", "limit\u{200b}",
        ])
        .prop_map(str::to_owned),
        1 => hostile_text(12),
    ]
}

pub fn number_text() -> impl Strategy<Value = String> {
    let edges: Vec<i128> = vec![
        0,
        1,
        -1,
        2,
        1023,
        1024,
        1025,
        i64::MIN as i128 - 1,
        i64::MIN as i128,
        i64::MAX as i128,
        i64::MAX as i128 + 1,
        u64::MAX as i128,
        u64::MAX as i128 + 1,
        u32::MAX as i128 + 1,
    ];
    prop_oneof![
        4 => select(edges).prop_map(|n| n.to_string()),
        2 => any::<i128>().prop_map(|n| n.to_string()),
        1 => "[0-9]{20,400}",
        1 => "-[0-9]{20,400}",
        2 => select(vec![
            "+5", "-0", "00", "007", " 1", "1 ", "1e3", "0x1f", "１２", "", "+", "-", "--1", "1.0", "1,000", "½", "٣",
            "NaN", "inf",
        ])
        .prop_map(str::to_owned),
    ]
}

pub fn date_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => datetime().prop_map(|d| d.text()),
        2 => select(vec![
            "2026-02-29", "2024-02-29", "2026-02-30", "2026-13-01", "2026-00-10", "2026-10-00", "2026-10-01 24:00:00",
            "2026-10-01 23:60:00", "2026-10-01 23:59:60", "2026-10-01T00:00:00", "2026-1-01", "26-10-01",
            "2026-10-01 00:00", "2026-10-01  00:00:00", "0000-01-01", "9999-12-31 23:59:59", "+2026-10-01",
            "2026-10-01\0", "２０２６-10-01", "2026-10-01 00:00:00Z", "",
        ])
        .prop_map(str::to_owned),
        1 => hostile_text(20),
    ]
}

pub fn fields_text() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = FIELDS.iter().map(|(n, _)| *n).collect();
    let element = prop_oneof![
        8 => select(names).prop_map(str::to_owned),
        1 => select(vec!["", " ", "\t", "nope", "Error", "error_id\0", "os_name,", " error ", "\u{a0}city"]).prop_map(str::to_owned),
        1 => hostile_text(8),
    ];
    prop::collection::vec(element, 0..40).prop_map(|list| list.join(","))
}

pub fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => number_text(),
        3 => date_text(),
        2 => fields_text(),
        1 => select(vec!["true", "false", "1", "0", "TRUE", "yes", "default", "receive", "Receive"]).prop_map(str::to_owned),
        3 => hostile_text(40),
    ]
}

/// Breaks an encoded component: a malformed or non-UTF-8 escape, or a raw `&`, `=`, `+`, `%`.
pub fn corrupt(encoded: &mut String, position: usize, damage: &str) {
    let mut at = position % (encoded.len() + 1);
    while !encoded.is_char_boundary(at) {
        at -= 1;
    }
    encoded.insert_str(at, damage);
}

pub const DAMAGE: [&str; 16] = [
    "%",
    "%4",
    "%G0",
    "%%41",
    "%4%41",
    "%FF",
    "%C3",
    "%C3%28",
    "%ED%A0%80",
    "%C0%AF",
    "%F4%90%80%80",
    "%E2%82",
    "&",
    "=",
    "+",
    "%00",
];

/// A query: pairs of hostile names and values, encoded by the independent encoder, some of
/// them damaged at the byte level.
pub fn hostile_query() -> impl Strategy<Value = String> {
    let pair = (hostile_name(), hostile_value());
    let damage = prop::option::weighted(0.15, (any::<usize>(), select(DAMAGE.to_vec())));
    let segment = (pair, damage, any::<u64>()).prop_map(|((name, value), damage, seed)| {
        let mut choices = Choices(seed);
        let mut out = String::new();
        encode_component(&name, false, &mut choices, &mut out);
        out.push('=');
        encode_component(&value, true, &mut choices, &mut out);
        if let Some((position, damage)) = damage {
            corrupt(&mut out, position, damage);
        }
        out
    });
    // A valid request, then hostile parameters mixed in.
    (valid_request(), prop::collection::vec(segment, 0..8), any::<u64>(), prop::bool::weighted(0.3)).prop_map(
        |(valid, extra, seed, drop_some)| {
            let mut segments: Vec<String> = encode_query(&valid.pairs, seed)
                .trim_start_matches('?')
                .split('&')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if drop_some && !segments.is_empty() {
                segments.remove((seed % segments.len() as u64) as usize);
            }
            for (i, segment) in extra.into_iter().enumerate() {
                let at = (seed.rotate_left(i as u32 * 7) % (segments.len() as u64 + 1)) as usize;
                segments.insert(at, segment);
            }
            segments.join("&")
        },
    )
}

pub fn policy() -> impl Strategy<Value = RequestPolicy> {
    prop::option::of(prop_oneof![1u64..=100, Just(u64::MAX)])
        .prop_map(|max_limit| RequestPolicy { max_limit, ..RequestPolicy::default() })
}
