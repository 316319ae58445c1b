use super::policies::Policies;
use super::*;
use crate::request::{ExportRequest, RequestPolicy};
use crate::{QueryPairs, plan};

fn spec(fields: &[(&str, &str)]) -> PolicySpec {
    PolicySpec {
        fields: fields.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect(),
        ..Default::default()
    }
}

fn key() -> Arc<PseudonymKey> {
    Arc::new(PseudonymKey::new(&[b'k'; 32]).unwrap())
}

fn privacy(fields: &[(&str, &str)]) -> Arc<Privacy> {
    let policy = FieldPolicy::from_spec(&spec(fields)).unwrap();
    Arc::new(Privacy::new(policy, Some(key()), Arc::new(Scrubber::default())).unwrap())
}

fn parse(query: &str, privacy: &Arc<Privacy>) -> Result<ExportRequest, crate::RequestError> {
    ExportRequest::from_pairs_under(&QueryPairs::parse(query).unwrap(), &RequestPolicy::default(), privacy)
}

#[test]
fn pseudonyms_are_the_published_hmac() {
    // Computed with Python's hmac: hmac.new(b"k" * 32, text, sha256).hexdigest()[:32].
    let key = key();
    assert_eq!(key.pseudonym(b"18446744073709551615"), "6746b34974edede6fa889346c335c18e");
    assert_eq!(key.pseudonym(b"-5"), "4f17f45b5fe0f55fab90900cedb0640f");
    assert_eq!(key.pseudonym("été".as_bytes()), "97545946c322bc49fa078e38677c8672");
    assert!(PseudonymKey::new(&[0; 31]).unwrap_err().contains("at least 32"));
    assert_eq!(format!("{key:?}"), "PseudonymKey(…)");
}

/// The two-compression path gives the `hmac` crate's digest for every length it takes, with
/// keys shorter and longer than a block; longer values take the crate's path.
#[test]
fn the_one_block_hmac_is_the_crates() {
    use rand::prelude::*;
    let mut rng = rand::rngs::StdRng::seed_from_u64(46);
    for key_len in [32, 55, 64, 65, 100, 200] {
        let bytes: Vec<u8> = (0..key_len).map(|_| rng.random()).collect();
        let key = PseudonymKey::new(&bytes).unwrap();
        for len in 0..=80 {
            let text: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            assert_eq!(key.one_block_hmac(&text).is_some(), len <= 55, "{len}");
            if let Some(digest) = key.one_block_hmac(&text) {
                assert_eq!(digest, key.hmac(&text), "key of {key_len} bytes, text of {len}");
            }
        }
    }
}

#[test]
fn policies_are_checked_naming_the_field() {
    let err = |fields: &[(&str, &str)]| FieldPolicy::from_spec(&spec(fields)).unwrap_err();
    assert!(err(&[("devise_id", "deny")]).contains("`devise_id`"));
    assert!(err(&[("city", "hide")]).contains("allowed: allow, deny"));
    assert!(err(&[("mcc", "scrub")]).contains("text fields only"));
    assert!(err(&[("city", "coarsen")]).contains("time fields"));
    assert!(
        err(&[("error_timestamp", "pseudonymise"), ("error_datetime", "pseudonymise")])
            .contains("time field")
    );
    assert!(err(&[("error_timestamp", "coarsen")]).contains("same treatment"));
    let no_key = FieldPolicy::from_spec(&spec(&[("google_aid", "pseudonymise")])).unwrap();
    assert!(Privacy::new(no_key, None, Arc::default()).unwrap_err().contains("--pseudonym-key-file"));
    let bad_prefix = PolicySpec { ipv4_prefix: Some(33), ..Default::default() };
    assert!(FieldPolicy::from_spec(&bad_prefix).unwrap_err().contains("ipv4_prefix"));
}

#[test]
fn the_strictest_of_several_policies_denies_where_they_disagree() {
    let a = FieldPolicy::from_spec(&spec(&[
        ("city", "scrub"),
        ("google_aid", "pseudonymise"),
        ("error", "scrub"),
    ]))
    .unwrap();
    let mut b_spec = spec(&[("city", "truncate"), ("ios_ifa", "deny"), ("error", "scrub")]);
    b_spec.coarsen = Some("hour".into());
    b_spec.ipv4_prefix = Some(16);
    let b = FieldPolicy::from_spec(&b_spec).unwrap();
    let merged = FieldPolicy::strictest([&a, &b]);
    let city = Field::from_name("city").unwrap();
    assert_eq!(merged.treatment(city), Treatment::Deny);
    assert_eq!(merged.treatment(Field::from_name("google_aid").unwrap()), Treatment::Pseudonymise);
    assert_eq!(merged.treatment(Field::from_name("ios_ifa").unwrap()), Treatment::Deny);
    assert_eq!(merged.treatment(Field::from_name("error").unwrap()), Treatment::Scrub);
    assert_eq!(merged.ipv4_prefix(), 16);
    assert_eq!(merged.coarsening(), Coarsening::Day);
}

const Q: &str = "application_id=7&date_since=2026-10-01&date_until=2026-10-01";

#[test]
fn denied_fields_are_refused_in_fields_in_filters_and_by_alias() {
    let p = privacy(&[("service_device_id", "deny")]);
    let e = parse(&format!("{Q}&fields=error_id,service_device_id"), &p).unwrap_err();
    assert_eq!(e.parameter(), "fields");
    assert!(e.message().contains("`service_device_id`") && e.message().contains("denies"), "{e}");
    let e = parse(&format!("{Q}&fields=error_id&service_device_id=5"), &p).unwrap_err();
    assert_eq!(e.parameter(), "service_device_id");
    let policy = RequestPolicy {
        aliases: crate::FieldAliases::from_toml("[aliases]\nappmetrica_device_id = \"service_device_id\"\n")
            .unwrap(),
        ..Default::default()
    };
    let pairs = QueryPairs::parse(&format!("{Q}&fields=appmetrica_device_id")).unwrap();
    let e = ExportRequest::from_pairs_under(&pairs, &policy, &p).unwrap_err();
    assert!(e.message().contains("`appmetrica_device_id` (`service_device_id`)"), "{e}");
    let pairs = QueryPairs::parse(&format!("{Q}&fields=error_id&appmetrica_device_id=5")).unwrap();
    assert_eq!(
        ExportRequest::from_pairs_under(&pairs, &policy, &p).unwrap_err().parameter(),
        "appmetrica_device_id"
    );
}

#[test]
fn a_filter_on_a_pseudonymised_field_takes_a_pseudonym_and_compares_it() {
    let p = privacy(&[("service_device_id", "pseudonymise")]);
    let e = parse(&format!("{Q}&fields=error_id&service_device_id=5"), &p).unwrap_err();
    assert!(e.message().contains("32 lowercase hexadecimal digits"), "{e}");
    let pseudonym = key().pseudonym(b"5");
    let request = parse(&format!("{Q}&fields=service_device_id&service_device_id={pseudonym}"), &p).unwrap();
    let table = datafusion::datasource::provider_as_source(Arc::new(
        datafusion::datasource::empty::EmptyTable::new(crate::schema::file_schema()),
    ));
    let text =
        plan::build_plan(&request, table, plan::RangeTest::PerRow).unwrap().display_indent().to_string();
    assert!(
        text.contains(&format!("logs_pseudonymise(errors.service_device_id) = Utf8View(\"{pseudonym}\")")),
        "{text}"
    );
    assert!(text.contains("logs_pseudonymise(errors.service_device_id) AS service_device_id"), "{text}");
    assert!(!text.contains("kkkk"), "{text}");
}

#[test]
fn a_hidden_time_takes_whole_days_or_units_of_its_rounding() {
    let coarse = privacy(&[("error_timestamp", "coarsen"), ("error_datetime", "coarsen")]);
    let e = parse(
        "application_id=7&date_since=2026-10-01 00:00:01&date_until=2026-10-01&fields=error_id",
        &coarse,
    )
    .unwrap_err();
    assert_eq!(e.parameter(), "date_since");
    let e = parse(
        "application_id=7&date_since=2026-10-01&date_until=2026-10-01 12:59:59&fields=error_id",
        &coarse,
    )
    .unwrap_err();
    assert_eq!(e.parameter(), "date_until");
    parse(&format!("{Q}&fields=error_id"), &coarse).unwrap();
    // The other dimension is not hidden: any range.
    parse(
        "application_id=7&date_since=2026-10-01 00:00:01&date_until=2026-10-01&fields=error_id&date_dimension=receive",
        &coarse,
    )
    .unwrap();
    let denied = privacy(&[("error_receive_timestamp", "deny"), ("error_receive_datetime", "deny")]);
    assert!(parse(
        "application_id=7&date_since=2026-10-01 05:00:00&date_until=2026-10-01&fields=error_id&date_dimension=receive",
        &denied,
    )
    .is_err());
}

#[test]
fn parts_over_hidden_values_need_the_key() {
    let policy =
        FieldPolicy::from_spec(&spec(&[("error_timestamp", "coarsen"), ("error_datetime", "coarsen")]))
            .unwrap();
    let no_key = Arc::new(Privacy::new(policy, None, Arc::default()).unwrap());
    let e = parse(&format!("{Q}&fields=error_id&parts_count=2&part_number=0"), &no_key).unwrap_err();
    assert_eq!(e.parameter(), "parts_count");
    parse(&format!("{Q}&fields=error_id&parts_count=2&part_number=0"), &privacy(&[("error", "scrub")]))
        .unwrap();
}

#[test]
fn the_fingerprint_names_policy_key_and_patterns_and_is_empty_without_a_policy() {
    assert_eq!(Privacy::none().fingerprint(), "");
    let a = privacy(&[("error", "scrub")]);
    assert_eq!(a.fingerprint().len(), 32);
    assert_eq!(a.fingerprint(), privacy(&[("error", "scrub")]).fingerprint());
    assert_ne!(a.fingerprint(), privacy(&[("error_json", "scrub")]).fingerprint());
    let policy = FieldPolicy::from_spec(&spec(&[("error", "scrub")])).unwrap();
    let other_key = Arc::new(PseudonymKey::new(&[b'x'; 32]).unwrap());
    let b = Privacy::new(policy.clone(), Some(other_key), Arc::default()).unwrap();
    assert_ne!(a.fingerprint(), b.fingerprint());
    let c = Privacy::new(policy, Some(key()), Arc::new(Scrubber::new(&["x+".into()]).unwrap())).unwrap();
    assert_ne!(a.fingerprint(), c.fingerprint());
}

#[test]
fn the_policies_file_selects_by_claim_scope_and_default() {
    let text = r#"
default = "outside"
scrub_patterns = ["ACME-[0-9]{6}"]
[policies.outside]
fields = { google_aid = "deny" }
[policies.contractor]
fields = { service_device_id = "pseudonymise", device_ipv6 = "truncate", google_aid = "deny", error = "scrub" }
ipv4_prefix = 16
[policies.partner]
fields = { device_ipv6 = "scrub" }
[scopes]
"logs:contractor" = "contractor"
"logs:partner" = "partner"
"#;
    let policies = Policies::parse(text, Some(key())).unwrap();
    let resolve = |scopes: &[&str], named: Option<&str>| {
        policies.resolve(policies::Claims { own: None, named, scopes })
    };
    let ipv6 = Field::from_name("device_ipv6").unwrap();
    assert_eq!(
        resolve(&[], None).unwrap().treatment(Field::from_name("google_aid").unwrap()),
        Treatment::Deny
    );
    assert_eq!(resolve(&["logs:contractor"], None).unwrap().treatment(ipv6), Treatment::Truncate);
    assert_eq!(resolve(&["logs:contractor", "logs:partner"], None).unwrap().treatment(ipv6), Treatment::Deny);
    assert_eq!(resolve(&["logs:partner"], Some("contractor")).unwrap().treatment(ipv6), Treatment::Truncate);
    assert!(resolve(&[], Some("nobody")).unwrap_err().contains("`nobody`"));
    let own = FieldPolicy::allow_all();
    assert!(
        policies
            .resolve(policies::Claims { own: Some(&own), named: None, scopes: &[] })
            .unwrap()
            .policy()
            .is_open()
    );
    assert!(Policies::parse(text, None).unwrap_err().contains("policy `contractor`"));
    assert!(Policies::parse("default = \"x\"", None).unwrap_err().contains("`default`"));
    assert!(Policies::parse("[scopes]\na = \"x\"", None).unwrap_err().contains("scope `a`"));
    assert!(Policies::parse("[policies.a]\nfeilds = {}", None).is_err());
}

/// The partition's `application_id` is a constant in the plan: pseudonymised, it is the
/// pseudonym of its decimal text in every row.
#[tokio::test]
async fn a_pseudonymised_constant_is_the_constant_s_pseudonym() {
    use datafusion::logical_expr::{LogicalPlanBuilder, lit};
    use datafusion::prelude::SessionContext;

    let p = privacy(&[("application_id", "pseudonymise")]);
    let expr = kernels::treat(&p, Field::APPLICATION_ID, lit(1001i64)).alias("application_id");
    let plan = LogicalPlanBuilder::empty(true).project(vec![expr]).unwrap().build().unwrap();
    let batches = SessionContext::new().execute_logical_plan(plan).await.unwrap().collect().await.unwrap();
    let column =
        datafusion::arrow::compute::cast(batches[0].column(0), &datafusion::arrow::datatypes::DataType::Utf8)
            .unwrap();
    let values = datafusion::arrow::array::AsArray::as_string::<i32>(&column);
    assert_eq!(values.value(0), key().pseudonym(b"1001"));
}

/// A filter on a truncated or coarsened field takes the value as exports show it: any other
/// could match nothing, and is refused naming the form to give.
#[test]
fn a_filter_on_a_truncated_or_coarsened_field_takes_the_value_as_shown() {
    let p = privacy(&[
        ("device_ipv6", "truncate"),
        ("error_timestamp", "coarsen"),
        ("error_datetime", "coarsen"),
    ]);
    let e = parse(&format!("{Q}&fields=error_id&device_ipv6=203.0.113.7"), &p).unwrap_err();
    assert_eq!(e.parameter(), "device_ipv6");
    assert!(e.message().contains("`203.0.113.0`"), "{e}");
    assert!(
        parse(&format!("{Q}&fields=error_id&device_ipv6=not-an-address"), &p)
            .unwrap_err()
            .message()
            .contains("not an IP")
    );
    parse(&format!("{Q}&fields=error_id&device_ipv6=203.0.113.0"), &p).unwrap();
    parse(&format!("{Q}&fields=error_id&device_ipv6=%3A%3Affff%3A203.0.113.0"), &p).unwrap();
    let e = parse(&format!("{Q}&fields=error_id&error_timestamp=1790812801"), &p).unwrap_err();
    assert!(e.message().contains("`1790812800`"), "{e}");
    parse(&format!("{Q}&fields=error_id&error_timestamp=1790812800"), &p).unwrap();
    let e = parse(&format!("{Q}&fields=error_id&error_datetime=2026-10-01%2012%3A00%3A00"), &p).unwrap_err();
    assert!(e.message().contains("`2026-10-01 00:00:00`"), "{e}");
}

/// A pseudonymising policy without a key cannot be made (`Privacy::new`); were one to exist,
/// the plan gives a null column, never the stored values.
#[test]
fn without_a_key_a_pseudonymised_column_is_null_not_raw() {
    let policy = FieldPolicy::from_spec(&spec(&[("google_aid", "pseudonymise")])).unwrap();
    let keyless = Privacy { policy, key: None, scrubber: Arc::default(), fingerprint: "x".into() };
    let expr = kernels::treat(
        &keyless,
        Field::from_name("google_aid").unwrap(),
        datafusion::prelude::col("google_aid"),
    );
    assert_eq!(expr.to_string(), "Utf8View(NULL)");
}
