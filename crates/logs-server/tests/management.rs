//! The management API against the shapes the original documents: `{"applications":[…]}` and
//! `{"application":{…}}` with `id`, `name`, `time_zone_name`, `time_zone_offset` (seconds),
//! `permission` and `create_date` (`YYYY-MM-DD`, from `applications.toml` or the first date
//! folder); its 400, 403 and 404; and `charset=utf-8` on every JSON answer of the service.

mod common;

use std::path::Path;

use chrono::{Offset, TimeZone, Utc};
use chrono_tz::Tz;
use common::*;
use http::{Method, StatusCode, header};
use logs_server::Settings;
use serde_json::{Value, json};

const LIST: &str = "/management/v1/applications";
const JSON_UTF8: &str = "application/json; charset=utf-8";

fn one(id: impl std::fmt::Display) -> String {
    format!("/management/v1/application/{id}")
}

/// `zone`'s offset from UTC now, in seconds.
fn offset_now(zone: Tz) -> i64 {
    i64::from(zone.offset_from_utc_datetime(&Utc::now().naive_utc()).fix().local_minus_utc())
}

/// A dataset of date folders only (the management API reads nothing else) and an
/// `applications.toml`:
/// - 5: folders 2026-03-02 and 2026-03-01 and one that is no date; no entry;
/// - 6: a folder without date folders; no entry;
/// - 7: an entry with `create_date` and a zone, no folder;
/// - 8: an entry without `create_date`, with a folder;
/// - 9: an entry whose `create_date` is before its first folder.
fn folders_dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in [
        "application_id=5/date=2026-03-02",
        "application_id=5/date=2026-03-01",
        "application_id=5/date=yesterday",
        "application_id=6/other",
        "application_id=8/date=2026-05-05",
        "application_id=9/date=2026-01-01",
    ] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    std::fs::write(
        dir.path().join("applications.toml"),
        "[[applications]]\nid = 7\nname = \"Configured\"\ntime_zone_name = \"America/New_York\"\n\
         create_date = 2020-01-31\n\n\
         [[applications]]\nid = 8\nname = \"Named\"\n\n\
         [[applications]]\nid = 9\nname = \"Older\"\ncreate_date = \"2019-12-31\"\n",
    )
    .unwrap();
    dir
}

async fn app_of(root: &Path) -> axum::Router {
    logs_server::app(state(root, Settings::default()).await)
}

/// Checks the documented fields and their types, and that nothing else is there.
fn check_shape(application: &Value) {
    let object = application.as_object().unwrap_or_else(|| panic!("not an object: {application}"));
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort();
    let mut expected = vec!["id", "name", "permission", "time_zone_name", "time_zone_offset"];
    if object.contains_key("create_date") {
        expected.push("create_date");
        expected.sort();
        let date = application["create_date"].as_str().unwrap();
        assert!(chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok() && date.len() == 10, "{date}");
    }
    assert_eq!(keys, expected, "{application}");
    assert!(application["id"].is_i64() && application["time_zone_offset"].is_i64(), "{application}");
    assert!(application["name"].is_string() && application["time_zone_name"].is_string(), "{application}");
    assert_eq!(application["permission"], "view");
}

#[tokio::test]
async fn the_list_and_one_application_answer_the_documented_shapes() {
    let app = app_of(small_dataset()).await;
    let (status, headers, body) = get(&app, LIST, Some(READER)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], JSON_UTF8);
    let list = json(&body);
    assert_eq!(list.as_object().unwrap().keys().collect::<Vec<_>>(), ["applications"]);
    let applications = list["applications"].as_array().unwrap();
    assert_eq!(applications.len(), 3);
    for application in applications {
        check_shape(application);
        // One application is what the list says of it, wrapped in `application`.
        let (status, headers, body) = get(&app, &one(&application["id"]), Some(READER)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], JSON_UTF8);
        let answer = json(&body);
        assert_eq!(answer.as_object().unwrap().keys().collect::<Vec<_>>(), ["application"]);
        let mut expected = application.clone();
        // The offset is computed per answer; only Berlin's could change in between.
        expected["time_zone_offset"] = answer["application"]["time_zone_offset"].clone();
        assert_eq!(answer["application"], expected);
    }
    let shop = &applications[0];
    assert_eq!(
        (&shop["id"], &shop["name"], &shop["time_zone_name"], &shop["create_date"]),
        (&json!(1001), &json!("Shop"), &json!("Europe/Berlin"), &json!("2026-10-01"))
    );
    assert!([3600, 7200].contains(&shop["time_zone_offset"].as_i64().unwrap()), "{shop}");
    assert_eq!(applications[1]["time_zone_name"], "UTC");
    assert_eq!(applications[1]["time_zone_offset"], 0);

    // HEAD: the headers alone.
    let (status, headers, body) =
        call(&app, Method::HEAD, &one(1001), &[("authorization", &format!("OAuth {READER}"))]).await;
    assert_eq!((status, body.len()), (StatusCode::OK, 0));
    assert_eq!(headers[header::CONTENT_TYPE], JSON_UTF8);
}

#[tokio::test]
async fn create_date_comes_from_applications_toml_or_the_first_date_folder() {
    let dir = folders_dataset();
    let app = app_of(dir.path()).await;
    let new_york = chrono_tz::America::New_York;
    let before = offset_now(new_york);
    let listed = json(&get(&app, LIST, Some(READER)).await.2);
    let offsets = [before, offset_now(new_york)];
    let applications = listed["applications"].as_array().unwrap();
    let ids: Vec<i64> = applications.iter().map(|a| a["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [5, 6, 7, 8, 9]);
    for application in applications {
        check_shape(application);
    }
    let field = |i: usize, name: &str| applications[i].get(name).cloned().unwrap_or(Value::Null);
    // The first folder by date, not by listing order; a folder that is no date does not count.
    assert_eq!((field(0, "name"), field(0, "create_date")), (json!("5"), json!("2026-03-01")));
    // No date folder and no entry: no `create_date` at all.
    assert_eq!(field(1, "create_date"), Value::Null);
    assert!(applications[1].get("create_date").is_none());
    // Described only, with its own date and zone.
    assert_eq!(
        (field(2, "name"), field(2, "time_zone_name"), field(2, "create_date")),
        (json!("Configured"), json!("America/New_York"), json!("2020-01-31"))
    );
    assert!(offsets.contains(&field(2, "time_zone_offset").as_i64().unwrap()), "{offsets:?}");
    assert!([-18000, -14400].contains(&field(2, "time_zone_offset").as_i64().unwrap()));
    // Described without a date: the first folder's; described with one: that one.
    assert_eq!((field(3, "name"), field(3, "create_date")), (json!("Named"), json!("2026-05-05")));
    assert_eq!(field(4, "create_date"), json!("2019-12-31"));

    // One application answers the same, described or found.
    for (i, id) in ids.iter().enumerate() {
        let (status, _, body) = get(&app, &one(id), Some(READER)).await;
        assert_eq!(status, StatusCode::OK, "{id}");
        let mut answer = json(&body)["application"].clone();
        answer["time_zone_offset"] = applications[i]["time_zone_offset"].clone();
        assert_eq!(answer, applications[i], "{id}");
    }

    // A token limited to some applications sees those alone.
    let (_, _, body) = get(&app, LIST, Some(APP1001)).await;
    assert_eq!(json(&body), json!({"applications": []}));
}

#[tokio::test]
async fn a_bad_id_is_400_and_an_unknown_application_404() {
    let app = app_of(small_dataset()).await;
    for bad in ["abc", "1001.5", "99999999999999999999", "%201001", "1e3", "0x10"] {
        let (status, headers, body) = get(&app, &one(bad), Some(READER)).await;
        assert_eq!(headers[header::CONTENT_TYPE], JSON_UTF8, "{bad}");
        let v = error_body(status, &body, "invalid_parameter");
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(v["errors"][0]["location"], "id", "{bad}: {v}");
        assert!(v["message"].as_str().unwrap().contains("expected an application id"), "{v}");
    }
    let (status, headers, body) = get(&app, &one(999_999), Some(READER)).await;
    assert_eq!(headers[header::CONTENT_TYPE], JSON_UTF8);
    let v = error_body(status, &body, "not_found");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["errors"][0]["location"], "id");
    assert!(v["message"].as_str().unwrap().contains("999999"), "{v}");
    // Not the route: no id, or more after it.
    for path in
        ["/management/v1/application/", "/management/v1/application", "/management/v1/application/1001/x"]
    {
        let (status, _, body) = get(&app, path, Some(READER)).await;
        error_body(status, &body, "not_found");
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
}

/// As the export does: a token that may not read the application gets 403 whether the
/// application exists or not, worded alike; the scope is checked first, the token before all.
#[tokio::test]
async fn an_application_outside_the_token_is_403_whether_it_exists_or_not() {
    let app = app_of(small_dataset()).await;
    let (status, _, existing) = get(&app, &one(1002), Some(APP1001)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    error_body(status, &existing, "access_denied");
    let (status, _, missing) = get(&app, &one(999_999), Some(APP1001)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        String::from_utf8_lossy(&existing).replace("1002", "N"),
        String::from_utf8_lossy(&missing).replace("999999", "N")
    );
    let (status, ..) = get(&app, &one(1001), Some(APP1001)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = get(&app, &one(1001), Some(WRITER)).await;
    error_body(status, &body, "insufficient_scope");
    // The scope comes before the parameter.
    let (status, ..) = get(&app, &one("abc"), Some(WRITER)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, body) = get(&app, &one(1001), None).await;
    error_body(status, &body, "unauthorized");
}

/// A router, the request (method, target, headers) and the status expected.
type Case<'a> = (&'a axum::Router, Method, &'a str, Vec<(&'a str, &'a str)>, u16);

/// Every JSON answer of the service, whatever its route and status, says `charset=utf-8`.
#[tokio::test]
async fn every_json_answer_says_utf8() {
    let state = state(small_dataset(), Settings::default()).await;
    let app = logs_server::app(state.clone());
    let admin = logs_server::admin_app(state);
    let export_json = EXPORT_CSV.replace("errors.csv", "errors.json");
    let reader = format!("OAuth {READER}");
    let writer = format!("OAuth {WRITER}");
    let long = format!("{LIST}?x={}", "x".repeat(9000));
    let big = "h".repeat(17 * 1024);
    let cases: Vec<Case> = vec![
        (&app, Method::GET, "/healthz", vec![], 200),
        (&app, Method::GET, "/openapi.json", vec![("authorization", &reader)], 200),
        (&app, Method::GET, LIST, vec![("authorization", &reader)], 200),
        (&app, Method::GET, "/management/v1/application/1001", vec![("authorization", &reader)], 200),
        (&app, Method::GET, &export_json, vec![("authorization", &reader)], 200),
        (&app, Method::GET, "/management/v1/application/x", vec![("authorization", &reader)], 400),
        (&app, Method::GET, LIST, vec![], 401),
        (&app, Method::GET, LIST, vec![("authorization", &writer)], 403),
        (&app, Method::GET, "/nope", vec![("authorization", &reader)], 404),
        (&app, Method::POST, LIST, vec![("authorization", &reader)], 405),
        (&app, Method::GET, &long, vec![("authorization", &reader)], 414),
        (&app, Method::GET, LIST, vec![("authorization", &reader), ("x-big", &big)], 431),
        (&admin, Method::GET, "/healthz", vec![], 200),
        (&admin, Method::GET, "/readyz", vec![], 200),
        (&admin, Method::GET, "/nope", vec![], 404),
    ];
    for (router, method, uri, headers, expected) in cases {
        let (status, response, body) = call(router, method.clone(), uri, &headers).await;
        let what = format!("{method} {}", &uri[..uri.len().min(60)]);
        assert_eq!(status.as_u16(), expected, "{what}: {}", String::from_utf8_lossy(&body));
        assert_eq!(response[header::CONTENT_TYPE], JSON_UTF8, "{what}");
        json(&body);
    }
}
