//! Generated input for both stages of request parsing, `QueryPairs::parse` (a raw query
//! string becomes decoded pairs) and `ExportRequest::parse` (the pairs become a validated
//! request), judged by an independent model of the documented rules (docs/api.md, "The export
//! request"):
//!
//! - hostile query strings (arbitrary text, NUL, unicode, valid and broken percent-escapes,
//!   huge and negative numbers, thousands of parameters, very long field lists) never panic;
//!   each is accepted exactly when the model finds nothing wrong, and each refusal is a
//!   `RequestError` naming a parameter the model found at fault, with a short single-line
//!   message;
//! - valid requests, generated as values (fields subset and order, both date forms, filters
//!   with arbitrary unicode values, limits, booleans, parts), serialized by the crate's own
//!   encoder and by an independent percent-encoder that varies every choice the rules allow,
//!   parse back to exactly the generated values.
//!
//! The model decodes, validates and converts dates (days from the civil calendar) by itself;
//! it takes from the crate only the `Field` names to compare against. Where docs/api.md leaves a
//! detail open (a `+` sign or leading zeros on a number, whitespace other than spaces around
//! field names, the year 0000), the model accepts either answer but still requires that a
//! refusal names that parameter.

use logs_core::{ExportRequest, FilterValue, Parts, QueryPairs, RequestError, RequestPolicy};
use proptest::prelude::*;
use proptest::sample::select;

mod request_model;

use request_model::strategies::*;
use request_model::*;

// ---------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------

/// A refusal's text: short, and on one line without control characters (it is printed by
/// the CLI and logged).
fn check_text(what: &str, text: &str, query: &str) -> Result<(), TestCaseError> {
    prop_assert!(!text.is_empty(), "empty {} for {:?}", what, query);
    prop_assert!(
        text.len() <= MAX_MESSAGE_BYTES,
        "{} of {} bytes for a query of {} bytes: {:.200}…",
        what,
        text.len(),
        query.len(),
        text
    );
    prop_assert!(
        !text.chars().any(char::is_control),
        "{} holds a control character: {:?} (query {:?})",
        what,
        text,
        query
    );
    Ok(())
}

fn check_error_text(e: &RequestError, query: &str) -> Result<(), TestCaseError> {
    let display = e.to_string();
    if e.parameter().is_empty() {
        prop_assert_eq!(&display, e.message());
    } else {
        prop_assert!(display.starts_with("parameter `"), "{}", display);
        prop_assert!(display.ends_with(e.message()), "{}", display);
    }
    check_text("message()", e.message(), query)?;
    check_text("Display", &display, query)
}

/// The first stage's refusal: names the parameter of the first bad segment (a name that does
/// not decode as it was sent).
fn check_pairs_refusal(e: &RequestError, fault: &PairsFault, query: &str) -> Result<(), TestCaseError> {
    match fault {
        PairsFault::EmptyName => {
            prop_assert_eq!(e.parameter(), "", "{}", e);
            prop_assert!(e.message().contains("empty name"), "{}", e);
        }
        PairsFault::BadName(raw) => {
            prop_assert_eq!(e.parameter(), raw.as_str(), "{}", e);
            prop_assert!(e.message().contains("percent-escape") || e.message().contains("UTF-8"), "{}", e);
        }
        PairsFault::BadValue(name) => {
            prop_assert_eq!(e.parameter(), name.as_str(), "{}", e);
            prop_assert!(e.message().contains("percent-escape") || e.message().contains("UTF-8"), "{}", e);
        }
        PairsFault::Duplicate(name) => {
            prop_assert_eq!(e.parameter(), name.as_str(), "{}", e);
            prop_assert!(e.message().contains("more than once"), "{}", e);
        }
    }
    check_error_text(e, query)
}

fn check_request(request: &ExportRequest, expected: &Expected) -> Result<(), TestCaseError> {
    prop_assert_eq!(request.application_id(), expected.application_id);
    prop_assert_eq!(request.range().since, expected.since);
    prop_assert_eq!(request.range().until, expected.until);
    prop_assert_eq!(request.date_dimension(), expected.dimension);
    let fields: Vec<&str> = request.columns().iter().map(|c| c.name.as_str()).collect();
    prop_assert_eq!(fields, expected.fields.iter().map(String::as_str).collect::<Vec<_>>());
    let filters: Vec<(String, ExpectedValue)> = request
        .filters()
        .iter()
        .map(|f| {
            let value = match &f.value {
                FilterValue::String(s) => ExpectedValue::Text(s.clone()),
                FilterValue::Int64(n) => ExpectedValue::Signed(*n),
                FilterValue::UInt64(n) => ExpectedValue::Unsigned(*n),
            };
            (f.field.name().to_owned(), value)
        })
        .collect();
    prop_assert_eq!(&filters, &expected.filters);
    prop_assert_eq!(request.limit(), expected.limit);
    prop_assert_eq!(request.use_utf8_bom(), expected.bom);
    prop_assert_eq!(request.skip_unavailable_shards(), expected.skip);
    prop_assert_eq!(request.parts(), expected.parts.map(|(count, number)| Parts { count, number }));
    Ok(())
}

/// Runs both stages on `query` and holds them to the model.
fn check_query(query: &str, policy: &RequestPolicy) -> Result<(), TestCaseError> {
    let pairs = QueryPairs::parse(query);
    let request = ExportRequest::parse(query, policy);
    match model_pairs(query) {
        Err(fault) => {
            let e = pairs.expect_err("the model refuses the pairs");
            check_pairs_refusal(&e, &fault, query)?;
            prop_assert_eq!(request.expect_err("refused by the first stage"), e);
        }
        Ok(model) => {
            let pairs = match pairs {
                Ok(pairs) => pairs,
                Err(e) => return Err(TestCaseError::fail(format!("{query:?} refused: {e}"))),
            };
            let decoded: Vec<(&str, &str)> = pairs.iter().collect();
            let modelled: Vec<(&str, &str)> = model.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            prop_assert_eq!(decoded, modelled);
            let validation = model_validate(&model, policy);
            match request {
                Ok(request) => {
                    prop_assert!(
                        validation.faults.is_empty(),
                        "accepted although {:?} are wrong: {:?}",
                        validation.faults,
                        query
                    );
                    if let Some(expected) = &validation.expected {
                        check_request(&request, expected)?;
                    }
                }
                Err(e) => {
                    prop_assert!(
                        !validation.faults.is_empty() || !validation.open.is_empty(),
                        "refused although valid: `{}` for {:?}",
                        e,
                        query
                    );
                    let named = e.parameter();
                    prop_assert!(
                        validation.faults.contains(named) || validation.open.contains(named),
                        "refusal names `{}` but the faults are {:?} (open: {:?}): {}",
                        named,
                        validation.faults,
                        validation.open,
                        e
                    );
                    let given = model.iter().any(|(n, _)| n == named);
                    prop_assert!(
                        given || e.message().contains("required"),
                        "names `{}`, which is not in the query, without saying it is required: {}",
                        named,
                        e
                    );
                    check_error_text(&e, query)?;
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Valid requests, serialized by `QueryPairs::to_query_string`, parse back exactly.
    #[test]
    fn valid_requests_round_trip_through_the_crate_encoder(valid in valid_request()) {
        let pairs = QueryPairs::from_pairs(valid.pairs.clone()).unwrap();
        let query = pairs.to_query_string();
        prop_assert_eq!(QueryPairs::parse(&query).unwrap(), pairs.clone());
        let request = ExportRequest::parse(&query, &valid.policy)
            .map_err(|e| TestCaseError::fail(format!("{e} for {query:?}")))?;
        check_request(&request, &valid.expected)?;
        prop_assert_eq!(&ExportRequest::from_pairs(&pairs, &valid.policy).unwrap(), &request);
        if valid.policy.max_limit.is_none() {
            prop_assert_eq!(&ExportRequest::try_from(&pairs).unwrap(), &request);
        }
    }

    /// Valid requests, serialized by an independent encoder that varies every allowed choice,
    /// parse back exactly; the model agrees.
    #[test]
    fn valid_requests_round_trip_through_an_independent_encoder(valid in valid_request(), seed in any::<u64>()) {
        let query = encode_query(&valid.pairs, seed);
        let decoded = QueryPairs::parse(&query).map_err(|e| TestCaseError::fail(format!("{e} for {query:?}")))?;
        prop_assert_eq!(decoded, QueryPairs::from_pairs(valid.pairs.clone()).unwrap());
        let request = ExportRequest::parse(&query, &valid.policy)
            .map_err(|e| TestCaseError::fail(format!("{e} for {query:?}")))?;
        check_request(&request, &valid.expected)?;
        check_query(&query, &valid.policy)?;
    }

    /// Hostile parameters mixed into valid requests: accepted exactly when the model finds
    /// nothing wrong, and every refusal names a parameter at fault in one short line.
    #[test]
    fn hostile_queries_are_refused_precisely(query in hostile_query(), policy in policy()) {
        check_query(&query, &policy)?;
    }

    /// Arbitrary text as the whole query string.
    #[test]
    fn arbitrary_text_never_panics(query in prop_oneof![
        any::<String>(),
        "[a-z_&=%+?0-9A-Fa-f .:,-]{0,120}",
        hostile_text(120),
    ], policy in policy()) {
        check_query(&query, &policy)?;
    }

    /// Arbitrary bytes, percent-encoded (often not UTF-8 once decoded), as a name or a value.
    #[test]
    fn percent_encoded_bytes(bytes in prop::collection::vec(any::<u8>(), 0..40), as_name in any::<bool>(),
                             valid in valid_request(), seed in any::<u64>()) {
        let mut choices = Choices(seed);
        let mut escaped = String::new();
        bytes.iter().for_each(|&b| push_escape(&mut escaped, b, &mut choices));
        let base = encode_query(&valid.pairs, seed);
        let query = if as_name { format!("{base}&{escaped}=1") } else { format!("{base}&os_version={escaped}") };
        check_query(&query, &valid.policy)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    /// Thousands of parameters: unknown names, repeats, empty segments.
    #[test]
    fn thousands_of_parameters(valid in valid_request(), count in 1000usize..4000, shape in 0u8..4, seed in any::<u64>()) {
        let base = encode_query(&valid.pairs, seed);
        let extra: Vec<String> = (0..count)
            .map(|i| match shape {
                0 => format!("p{i}=v"),
                1 => String::new(),
                2 => format!("{}=x", ["os_name", "city", "limit", "x"][i % 4]),
                _ => format!("error_name{}", "%20".repeat(i % 3)),
            })
            .collect();
        let query = if seed % 2 == 0 { format!("{base}&{}", extra.join("&")) } else { format!("{}&{base}", extra.join("&")) };
        check_query(&query, &valid.policy)?;
    }

    /// Very long field lists: thousands of names, repeated, unknown or empty.
    #[test]
    fn very_long_field_lists(names in prop::collection::vec(prop_oneof![
        20 => select(FIELDS.iter().map(|(n, _)| *n).collect::<Vec<_>>()).prop_map(str::to_owned),
        1 => Just(String::new()),
        1 => "[a-z_]{1,30}",
    ], 1000..8000), valid in valid_request(), seed in any::<u64>()) {
        let mut pairs = valid.pairs.clone();
        pairs.retain(|(n, _)| n != "fields");
        pairs.push(("fields".into(), names.join(",")));
        check_query(&encode_query(&pairs, seed), &valid.policy)?;
    }
}

// ---------------------------------------------------------------------------------------
// Fixed cases the generators reach only by luck
// ---------------------------------------------------------------------------------------

const BASE: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id";

#[test]
fn fixed_hostile_cases_hold_to_the_model() {
    let cases = [
        "",
        "?",
        "??",
        "&&&",
        "=",
        "==",
        "=5",
        "%",
        "%%",
        "a=%",
        "a=%4",
        "%zz=1",
        "%FF=1",
        "a=%FF",
        "a=%C3%28",
        "a=%ED%A0%80",
        "a=%C0%AF",
        "a=%F4%90%80%80",
        "\0=\0",
        "limit=1&limit=1",
        "limit=1&lim%69t=2",
        "application_id=-9223372036854775809",
        "application_id=9223372036854775808",
        "application_id=99999999999999999999999999999999999999999999",
        "service_device_id=-0",
        "service_device_id=18446744073709551616",
        "mcc=1e3",
    ];
    for case in cases {
        let query = format!("{BASE}&{case}");
        for q in [case, query.as_str()] {
            if let Err(e) = check_query(q, &RequestPolicy::default()) {
                panic!("{q:?}: {e}");
            }
        }
    }
    let limits = RequestPolicy { max_limit: Some(10), ..RequestPolicy::default() };
    for limit in ["0", "10", "11", "18446744073709551615", "18446744073709551616", "-1"] {
        let q = format!("{BASE}&limit={limit}");
        if let Err(e) = check_query(&q, &limits) {
            panic!("{q:?}: {e}");
        }
    }
}

/// A value of a megabyte in each kind of parameter: a filter keeps it whole, a refusal quotes
/// it cut short.
#[test]
fn megabyte_values() {
    let valid = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,error";
    let huge = format!("{}\u{1b}[31m\r\n\0", "é\n,=&%".repeat((1 << 20) / 8));
    for name in ["error", "service_device_id", "limit", "date_since", "fields", "nope"] {
        let mut pairs: Vec<(String, String)> = QueryPairs::parse(valid)
            .unwrap()
            .iter()
            .filter(|(n, _)| *n != name)
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        pairs.push((name.to_owned(), huge.clone()));
        let query = QueryPairs::from_pairs(pairs).unwrap().to_query_string();
        assert!(query.len() > 1 << 20);
        if let Err(e) = check_query(&query, &RequestPolicy::default()) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn the_empty_name_is_the_only_refusal_without_a_parameter() {
    for query in ["=5", "=", "&=x&", "%3D=1"] {
        let e = QueryPairs::parse(query).map(|_| ()).err();
        match query {
            // `%3D` decodes to a name `=`, which is not empty.
            "%3D=1" => assert!(e.is_none(), "{query}"),
            _ => assert_eq!(e.expect(query).parameter(), "", "{query}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Regressions: bugs the properties above found (issue 5), pinned by their smallest inputs
// ---------------------------------------------------------------------------------------

/// `Display` quoted the parameter name raw: a decoded name with a newline or a terminal escape
/// made a multi-line error or rewrote the terminal of whoever ran `logs export`, and a long
/// name made an error as long.
#[test]
fn parameter_names_are_quoted_cut_and_escaped() {
    let policy = RequestPolicy::default();
    let long = "n".repeat(100_000);
    for (query, name) in [
        (format!("{BASE}&%0Aevil%1B%5B2J=1"), "\nevil\u{1b}[2J"),
        (format!("{BASE}&{long}=1"), long.as_str()),
    ] {
        let e = ExportRequest::parse(&query, &policy).unwrap_err();
        // The name is kept as given (the HTTP `location`); only its quotation is cut and escaped.
        assert_eq!(e.parameter(), name);
        let shown = e.to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(shown.len() <= MAX_MESSAGE_BYTES, "{} bytes", shown.len());
    }
    let shown = QueryPairs::parse("%0A=1&%0A=2").unwrap_err().to_string();
    assert!(!shown.contains('\n'), "{shown:?}");
}

/// A name with a malformed escape or invalid UTF-8 was refused with an empty `parameter()`
/// and a message naming nothing.
#[test]
fn a_name_that_does_not_decode_is_named_as_sent() {
    for (query, name) in [
        ("%zz=1", "%zz"),
        ("os_name%=ios", "os_name%"),
        ("os%FFname=ios", "os%FFname"),
        ("date%C3_since=1", "date%C3_since"),
    ] {
        let e = QueryPairs::parse(query).unwrap_err();
        assert_eq!(e.parameter(), name, "{query}: `{e}`");
        assert!(e.to_string().starts_with(&format!("parameter `{name}` ")), "{e}");
    }
}

/// The empty-name refusal quoted the raw segment whole.
#[test]
fn the_empty_name_refusal_is_short_and_on_one_line() {
    let long = format!("={}", "v".repeat(100_000));
    for query in ["=\n", "=\u{1b}[2J", long.as_str()] {
        let e = QueryPairs::parse(query).unwrap_err();
        assert!(!e.message().chars().any(char::is_control), "{:?}", e.message());
        assert!(e.message().len() <= MAX_MESSAGE_BYTES, "{} bytes", e.message().len());
    }
}

/// An unknown `date_dimension` was quoted back whole and raw, unlike every other value.
#[test]
fn date_dimension_is_quoted_back_cut_and_escaped() {
    let policy = RequestPolicy::default();
    let long = "x".repeat(100_000);
    for value in ["%0A", "%1B%5B2J", long.as_str()] {
        let e = ExportRequest::parse(&format!("{BASE}&date_dimension={value}"), &policy).unwrap_err();
        assert_eq!(e.parameter(), "date_dimension");
        assert!(!e.message().chars().any(char::is_control), "{:?}", e.message());
        assert!(e.message().len() <= MAX_MESSAGE_BYTES, "{} bytes", e.message().len());
    }
}
