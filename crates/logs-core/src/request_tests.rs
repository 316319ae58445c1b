use super::*;

const BASE: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name";

fn parse(query: &str) -> Result<ExportRequest, RequestError> {
    ExportRequest::parse(query, &RequestPolicy::default())
}

fn with(extra: &str) -> Result<ExportRequest, RequestError> {
    parse(&format!("{BASE}&{extra}"))
}

fn ts(s: &str) -> i64 {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap().and_utc().timestamp()
}

#[track_caller]
fn refused(query: &str, parameter: &str, needle: &str) {
    let err = parse(query).expect_err(query);
    assert_eq!(err.parameter(), parameter, "{query}: {err}");
    assert!(err.to_string().contains(needle), "{query}: `{err}` lacks `{needle}`");
}

#[test]
fn minimal_request_has_the_documented_defaults() {
    let r = parse(BASE).unwrap();
    assert_eq!(r.application_id(), 1001);
    assert_eq!(r.range(), TimeRange { since: ts("2026-10-01 00:00:00"), until: ts("2026-10-07 23:59:59") });
    assert_eq!(r.date_dimension(), DateDimension::Default);
    let sources: Vec<_> = r.columns().iter().map(|c| (c.name.as_str(), c.source)).collect();
    assert_eq!(
        sources,
        [
            ("error_id", ColumnSource::Field(Field::from_name("error_id").unwrap())),
            ("os_name", ColumnSource::Field(Field::from_name("os_name").unwrap()))
        ]
    );
    assert!(r.filters().is_empty());
    assert_eq!(r.limit(), None);
    assert!(!r.use_utf8_bom());
    assert!(!r.skip_unavailable_shards());
    assert_eq!(r.parts(), None);
}

#[test]
fn datetimes_with_time_are_exact_and_inclusive() {
    let r = parse(
        "application_id=1&date_since=2026-10-01+12:30:05&date_until=2026-10-01%2012:30:05&fields=error",
    )
    .unwrap();
    assert_eq!(r.range().since, ts("2026-10-01 12:30:05"));
    assert_eq!(r.range().until, r.range().since);
}

#[test]
fn impossible_or_malformed_dates_are_refused() {
    for bad in [
        "2026-02-30",
        "2026-13-01",
        "2026-10-01 24:00:00",
        "2026-10-01 23:59:60",
        "2026-10-01T00:00:00",
        "2026-1-01",
        "26-10-01",
        "2026-10-01 00:00",
        "",
        "yesterday",
        "２０２６-10-01",
    ] {
        let q = format!("application_id=1&date_since={bad}&date_until=2026-10-02&fields=error");
        refused(&q, "date_since", "yyyy-mm-dd hh:mm:ss");
    }
}

#[test]
fn since_after_until_is_refused() {
    refused(
        "application_id=1&date_since=2026-10-02&date_until=2026-10-01&fields=error",
        "date_since",
        "after date_until",
    );
}

#[test]
fn missing_required_parameters_are_named() {
    for name in ["application_id", "date_since", "date_until", "fields"] {
        let q: Vec<_> = BASE.split('&').filter(|p| !p.starts_with(&format!("{name}="))).collect();
        refused(&q.join("&"), name, "is required");
    }
}

#[test]
fn application_id_must_be_an_integer() {
    refused(&BASE.replace("1001", "abc"), "application_id", "expected an integer");
    refused(&BASE.replace("1001", "99999999999999999999"), "application_id", "expected an integer");
}

#[test]
fn fields_keep_order_and_refuse_unknown_empty_and_repeated_names() {
    let r = parse(&BASE.replace("error_id,os_name", "os_name,+error_id,application_id")).unwrap();
    let names: Vec<_> = r.columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["os_name", "error_id", "application_id"]);
    refused(&BASE.replace("error_id,os_name", "error_id,os_nmae"), "fields", "`os_nmae`");
    refused(&BASE.replace("error_id,os_name", ""), "fields", "empty name");
    refused(&BASE.replace("error_id,os_name", "error_id,,os_name"), "fields", "empty name");
    refused(&BASE.replace("error_id,os_name", "error_id,"), "fields", "empty name");
    refused(&BASE.replace("error_id,os_name", "os_name,os_name"), "fields", "more than once");
}

#[test]
fn date_dimension_values() {
    assert_eq!(with("date_dimension=receive").unwrap().date_dimension(), DateDimension::Receive);
    assert_eq!(with("date_dimension=default").unwrap().date_dimension(), DateDimension::Default);
    let e = with("date_dimension=server").unwrap_err();
    assert_eq!(e.parameter(), "date_dimension");
    assert!(e.to_string().contains("`default`, `receive`"), "{e}");
}

#[test]
fn limit_rules_without_a_maximum() {
    assert_eq!(with("limit=5").unwrap().limit(), Some(5));
    assert_eq!(with(&format!("limit={}", u64::MAX)).unwrap().limit(), Some(u64::MAX));
    for bad in ["0", "-1", "1.5", "abc", "", "18446744073709551616"] {
        let e = with(&format!("limit={bad}")).unwrap_err();
        assert_eq!(e.parameter(), "limit", "{bad}");
    }
}

#[test]
fn limit_rules_with_an_operator_maximum() {
    let policy = RequestPolicy { max_limit: Some(1000), ..RequestPolicy::default() };
    assert_eq!(ExportRequest::parse(BASE, &policy).unwrap().limit(), Some(1000));
    assert_eq!(ExportRequest::parse(&format!("{BASE}&limit=1000"), &policy).unwrap().limit(), Some(1000));
    let e = ExportRequest::parse(&format!("{BASE}&limit=1001"), &policy).unwrap_err();
    assert_eq!(e.parameter(), "limit");
    assert!(e.to_string().contains("maximum of 1000"), "{e}");
}

#[test]
fn booleans() {
    for (v, expected) in [("true", true), ("1", true), ("false", false), ("0", false)] {
        let r = with(&format!("use_utf8_bom={v}&skip_unavailable_shards={v}")).unwrap();
        assert_eq!((r.use_utf8_bom(), r.skip_unavailable_shards()), (expected, expected));
    }
    for name in ["use_utf8_bom", "skip_unavailable_shards"] {
        for bad in ["yes", "TRUE1", "", "2"] {
            let e = with(&format!("{name}={bad}")).unwrap_err();
            assert_eq!(e.parameter(), name);
            assert!(e.to_string().contains("`true`, `false`, `1`, `0`"), "{e}");
        }
    }
}

#[test]
fn filters_are_typed() {
    let r = with("os_name=android&mcc=250&service_device_id=18446744073709551615&error=a%2Cb").unwrap();
    let values: Vec<_> = r.filters().iter().map(|f| (f.field.name(), f.value.clone())).collect();
    assert_eq!(
        values,
        [
            ("os_name", FilterValue::String("android".into())),
            ("mcc", FilterValue::Int64(250)),
            ("service_device_id", FilterValue::UInt64(u64::MAX)),
            ("error", FilterValue::String("a,b".into())),
        ]
    );
    for (name, bad) in [("mcc", "abc"), ("error_timestamp", "1.5"), ("service_device_id", "-1"), ("mnc", "")]
    {
        let e = with(&format!("{name}={bad}")).unwrap_err();
        assert_eq!(e.parameter(), name);
        assert!(e.to_string().contains("expected an integer"), "{e}");
    }
}

#[test]
fn application_id_as_a_filter_is_the_application() {
    let r = parse(BASE).unwrap();
    assert!(r.filters().is_empty());
    assert_eq!(r.application_id(), 1001);
}

#[test]
fn unknown_parameters_are_refused_with_a_suggestion() {
    let e = with("os_nmae=ios").unwrap_err();
    assert_eq!(e.parameter(), "os_nmae");
    assert!(e.to_string().ends_with("is not a known parameter (did you mean `os_name`?)"), "{e}");
    // Case aside, a name is near its parameter: `Limit` is `limit` misspelt.
    assert!(with("Limit=1").unwrap_err().to_string().contains("did you mean `limit`?"));
    let e = with("format=csv").unwrap_err();
    assert_eq!(e.parameter(), "format");
    assert!(!e.to_string().contains("did you mean"), "{e}");
    // The message lists what is allowed: the parameters, then the fields a filter may name.
    assert!(e.to_string().contains("allowed: application_id, date_since,"), "{e}");
    assert!(e.to_string().contains("equality filter (error,error_datetime,"), "{e}");
    // Up to two letters added, dropped or changed, anywhere in the name, get a suggestion.
    for (typo, meant) in [("xlimit", "limit"), ("imit", "limit"), ("limitxx", "limit"), ("os_nam", "os_name")]
    {
        assert!(
            with(&format!("{typo}=1")).unwrap_err().to_string().contains(&format!("did you mean `{meant}`?")),
            "{typo}"
        );
    }
    assert!(!with("xxlimitx=1").unwrap_err().to_string().contains("did you mean"));
}

#[test]
fn a_misspelt_name_in_fields_gets_a_suggestion_instead_of_the_whole_list() {
    for (typo, meant) in [("error_idd", "error_id"), ("Error_ID", "error_id"), ("os_nmae", "os_name")] {
        let e = parse(&BASE.replace("error_id,os_name", &format!("city,{typo}"))).unwrap_err();
        assert_eq!(e.parameter(), "fields");
        assert!(
            e.to_string().ends_with(&format!("`{typo}`, which is not a field; did you mean `{meant}`?")),
            "{e}"
        );
    }
    // Nothing near: the names `fields` may hold are listed.
    let e = parse(&BASE.replace("error_id,os_name", "crash_reason")).unwrap_err();
    assert!(
        e.to_string().contains("`crash_reason`, which is not a field; allowed: error,error_datetime,"),
        "{e}"
    );
}

#[test]
fn repeated_parameters_are_refused() {
    refused(&format!("{BASE}&os_name=ios&os_name=android"), "os_name", "more than once");
    refused(&format!("{BASE}&application_id=1002"), "application_id", "more than once");
}

#[test]
fn parts() {
    assert_eq!(with("parts_count=4&part_number=3").unwrap().parts(), Some(Parts { count: 4, number: 3 }));
    refused(&format!("{BASE}&parts_count=4&part_number=4"), "part_number", "from 0 to 3");
    refused(&format!("{BASE}&parts_count=0&part_number=0"), "parts_count", "from 1 to 1024");
    refused(&format!("{BASE}&parts_count=2000&part_number=0"), "parts_count", "from 1 to 1024");
    refused(&format!("{BASE}&parts_count=4"), "part_number", "is required");
    refused(&format!("{BASE}&part_number=1"), "parts_count", "is required");
}

#[test]
fn echoed_values_are_short_and_single_line() {
    let long = "x".repeat(10_000);
    let e = with(&format!("limit={long}")).unwrap_err();
    assert!(e.to_string().len() < 200, "{e}");
    let e = with("limit=1%0D%0AX-Injected:%201").unwrap_err();
    assert!(!e.to_string().contains('\n') && !e.to_string().contains('\r'), "{e}");
}

#[test]
fn try_from_pairs_uses_the_default_policy() {
    let pairs = QueryPairs::parse(BASE).unwrap();
    assert_eq!(ExportRequest::try_from(&pairs).unwrap(), parse(BASE).unwrap());
}

fn with_aliases(query: &str) -> Result<ExportRequest, RequestError> {
    let aliases = FieldAliases::new()
        .with_alias("appmetrica_device_id", Field::SERVICE_DEVICE_ID)
        .unwrap()
        .with_alias("town", Field::from_name("city").unwrap())
        .unwrap()
        .with_absent("oaid", FieldType::String)
        .unwrap();
    ExportRequest::parse(query, &RequestPolicy { aliases, ..RequestPolicy::default() })
}

#[test]
fn aliases_name_columns_as_requested_and_filter_like_their_fields() {
    let query = BASE.replace("error_id,os_name", "appmetrica_device_id,oaid,service_device_id,town")
        + "&appmetrica_device_id=18446744073709551615&town=Berlin";
    let r = with_aliases(&query).unwrap();
    let columns: Vec<_> = r.columns().iter().map(|c| (c.name.as_str(), c.source)).collect();
    assert_eq!(
        columns,
        [
            ("appmetrica_device_id", ColumnSource::Field(Field::SERVICE_DEVICE_ID)),
            ("oaid", ColumnSource::Absent(FieldType::String)),
            ("service_device_id", ColumnSource::Field(Field::SERVICE_DEVICE_ID)),
            ("town", ColumnSource::Field(Field::from_name("city").unwrap())),
        ]
    );
    assert_eq!(
        r.filters(),
        [
            Filter { field: Field::SERVICE_DEVICE_ID, value: FilterValue::UInt64(u64::MAX) },
            Filter { field: Field::from_name("city").unwrap(), value: FilterValue::String("Berlin".into()) },
        ]
    );
    // An alias's value is checked as its field's, and the error names the alias.
    let e = with_aliases(&format!("{BASE}&appmetrica_device_id=-1")).unwrap_err();
    assert_eq!(e.parameter(), "appmetrica_device_id");
    // An absent field is no filter: no record could match.
    let e = with_aliases(&format!("{BASE}&oaid=x")).unwrap_err();
    assert_eq!(e.parameter(), "oaid");
    assert!(e.to_string().contains("not used as a filter"), "{e}");
    // Unknown names are refused as before, with aliases among the suggestions.
    let e = with_aliases(&format!("{BASE}&appmetrica_device_ie=1")).unwrap_err();
    assert!(e.to_string().contains("did you mean `appmetrica_device_id`?"), "{e}");
    let e = with_aliases(&BASE.replace("error_id,os_name", "android_id")).unwrap_err();
    assert_eq!(e.parameter(), "fields");
    assert!(e.to_string().contains("`android_id`, which is not a field; allowed: error,"), "{e}");
    assert!(e.to_string().contains(",appmetrica_device_id,oaid,town"), "{e}");
    // The same name twice is refused; one field under two names is not.
    let e = with_aliases(&BASE.replace("error_id,os_name", "town,town")).unwrap_err();
    assert!(e.to_string().contains("more than once"), "{e}");
    // Without aliases, the same names are unknown.
    assert!(parse(&BASE.replace("error_id,os_name", "appmetrica_device_id")).is_err());
}
