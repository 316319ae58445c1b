//! The applications the service describes: those in the dataset's `applications.toml`, and
//! those that have a folder.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, NaiveDate, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use logs_core::Storage;
use serde::{Deserialize, Serialize, Serializer};

use crate::config::{ConfigError, describe_toml_error};

/// The file name of the application descriptions in the dataset root.
pub const APPLICATIONS_FILE: &str = "applications.toml";

/// One application, with the fields of the original API that an export's dataset can fill.
//
// `crate::management` says which fields are left out and why.
// `deny_unknown_fields` only gives the schema `additionalProperties: false`; nothing parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Application {
    pub id: i64,
    /// Its name in `applications.toml`, else its id.
    pub name: String,
    /// An IANA time zone: the one in `applications.toml`, else `UTC`.
    pub time_zone_name: String,
    /// The zone's offset from UTC in seconds at the time of the answer (daylight saving time
    /// included).
    pub time_zone_offset: i32,
    /// What the token may do with the application: `view`, read only (the service has
    /// nothing that changes an application).
    pub permission: Permission,
    /// `YYYY-MM-DD`: the one in `applications.toml`, else the date of the application's first
    /// `date=` folder; absent when there is neither.
    #[serde(serialize_with = "serialize_date", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = Date, required = false, example = "2026-10-01")]
    pub create_date: Option<NaiveDate>,
}

/// Access rights, as the original API names them; this service only grants `view`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    View,
}

fn serialize_date<S: Serializer>(date: &Option<NaiveDate>, serializer: S) -> Result<S::Ok, S::Error> {
    match date {
        Some(date) => serializer.collect_str(&date.format("%Y-%m-%d")),
        None => serializer.serialize_none(),
    }
}

/// One application as `applications.toml` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Described {
    name: String,
    time_zone: Tz,
    create_date: Option<NaiveDate>,
}

/// The applications described in `applications.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplicationDirectory {
    described: BTreeMap<i64, Described>,
}

impl ApplicationDirectory {
    /// Reads the dataset's `applications.toml` (in its folder or bucket prefix), if it has one.
    pub async fn load(storage: &Storage) -> Result<ApplicationDirectory, ConfigError> {
        const WHAT: &str = "applications file";
        let path = Path::new(storage.location()).join(APPLICATIONS_FILE);
        let bytes = match storage.read_optional(APPLICATIONS_FILE).await {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(ApplicationDirectory::default()),
            Err(source) => return Err(ConfigError::UnreadableObject { what: WHAT, source }),
        };
        let text = std::str::from_utf8(&bytes).map_err(|_| ConfigError::InvalidFile {
            what: WHAT,
            path: path.clone(),
            message: "not UTF-8 text".into(),
        })?;
        ApplicationDirectory::parse(text).map_err(ConfigError::in_file(WHAT, &path))
    }

    pub fn parse(text: &str) -> Result<ApplicationDirectory, ConfigError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            applications: Vec<Entry>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Entry {
            id: i64,
            name: String,
            time_zone_name: Option<String>,
            create_date: Option<toml::Value>,
        }
        let file: File = toml::from_str(text).map_err(|e| describe_toml_error(text, &e))?;
        let mut described = BTreeMap::new();
        for Entry { id, name, time_zone_name, create_date } in file.applications {
            if name.trim().is_empty() {
                return Err(format!("application {id}: `name` must not be empty").into());
            }
            let time_zone = match time_zone_name {
                None => Tz::UTC,
                Some(zone) => zone.parse::<Tz>().map_err(|_| {
                    format!(
                        "application {id}: `time_zone_name` is `{}`; expected a zone of the IANA time \
                         zone database, such as `Europe/Berlin` or `UTC`",
                        logs_core::error::quote(&zone)
                    )
                })?,
            };
            let create_date = create_date
                .map(|value| {
                    parse_date(&value).ok_or_else(|| {
                        format!(
                            "application {id}: `create_date` must be a date such as 2026-10-01 (a TOML \
                             local date, or the same in quotes)"
                        )
                    })
                })
                .transpose()?;
            if described.insert(id, Described { name, time_zone, create_date }).is_some() {
                return Err(format!("application {id} is described twice").into());
            }
        }
        Ok(ApplicationDirectory { described })
    }

    /// Whether `applications.toml` describes application `id`.
    pub fn describes(&self, id: i64) -> bool {
        self.described.contains_key(&id)
    }

    /// Whether the answer for application `id` needs its first date folder: it has no
    /// `create_date` in `applications.toml`.
    pub fn needs_first_date(&self, id: i64) -> bool {
        self.described.get(&id).is_none_or(|d| d.create_date.is_none())
    }

    /// Every application: the described ones and those in `discovered`, ascending by id.
    pub fn ids(&self, discovered: &[i64]) -> Vec<i64> {
        let mut ids: Vec<i64> = self.described.keys().chain(discovered).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The answer for application `id` at `now`, given the date of its first date folder.
    pub fn application(&self, id: i64, first_date: Option<NaiveDate>, now: DateTime<Utc>) -> Application {
        let described = self.described.get(&id);
        let time_zone = described.map_or(Tz::UTC, |d| d.time_zone);
        Application {
            id,
            name: described.map_or_else(|| id.to_string(), |d| d.name.clone()),
            time_zone_name: time_zone.name().to_owned(),
            time_zone_offset: time_zone.offset_from_utc_datetime(&now.naive_utc()).fix().local_minus_utc(),
            permission: Permission::View,
            create_date: described.and_then(|d| d.create_date).or(first_date),
        }
    }
}

/// A TOML local date (`2026-10-01`), or the same as a string.
fn parse_date(value: &toml::Value) -> Option<NaiveDate> {
    match value {
        toml::Value::Datetime(dt) if dt.time.is_none() && dt.offset.is_none() => {
            let date = dt.date?;
            NaiveDate::from_ymd_opt(date.year.into(), date.month.into(), date.day.into())
        }
        toml::Value::String(text) if text.len() == 10 => NaiveDate::parse_from_str(text, "%Y-%m-%d").ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn merges_described_and_discovered() {
        let dir = ApplicationDirectory::parse(
            "[[applications]]\nid = 1002\nname = \"Shop\"\ntime_zone_name = \"Europe/Berlin\"\n\
             create_date = 2026-09-15\n\
             [[applications]]\nid = 7\nname = \"Old\"\ncreate_date = \"2020-01-31\"",
        )
        .unwrap();
        assert_eq!(dir.ids(&[1001, 1002]), [7, 1001, 1002]);
        assert!(dir.describes(7) && !dir.describes(1001));
        assert!(!dir.needs_first_date(1002) && dir.needs_first_date(1001));
        let summer = at("2026-07-01T12:00:00Z");
        let first = NaiveDate::from_ymd_opt(2026, 10, 1);
        let old = dir.application(7, None, summer);
        assert_eq!((old.time_zone_name.as_str(), old.time_zone_offset), ("UTC", 0));
        assert_eq!(old.create_date, NaiveDate::from_ymd_opt(2020, 1, 31));
        let found = dir.application(1001, first, summer);
        assert_eq!((found.name.as_str(), found.time_zone_name.as_str()), ("1001", "UTC"));
        assert_eq!(found.create_date, first);
        assert_eq!(dir.application(1001, None, summer).create_date, None);
        // The configured date wins over the first folder; the offset follows daylight saving.
        let shop = dir.application(1002, first, summer);
        assert_eq!(shop.create_date, NaiveDate::from_ymd_opt(2026, 9, 15));
        assert_eq!((shop.name.as_str(), shop.time_zone_offset), ("Shop", 7200));
        assert_eq!(dir.application(1002, first, at("2026-12-01T12:00:00Z")).time_zone_offset, 3600);
    }

    #[test]
    fn answers_the_documented_shape() {
        let dir = ApplicationDirectory::default();
        let now = at("2026-10-02T00:00:00Z");
        let json =
            serde_json::to_value(dir.application(5, NaiveDate::from_ymd_opt(2026, 10, 1), now)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": 5, "name": "5", "time_zone_name": "UTC", "time_zone_offset": 0,
                               "permission": "view", "create_date": "2026-10-01"})
        );
        let json = serde_json::to_value(dir.application(5, None, now)).unwrap();
        assert!(json.get("create_date").is_none(), "{json}");
    }

    #[test]
    fn refuses_bad_files() {
        let refused = |text: &str, says: &str| {
            let e = ApplicationDirectory::parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        };
        refused("[[applications]]\nid = 1\nname = \"\"", "`name` must not be empty");
        refused("[[applications]]\nid = 1\nname = \"a\"\n[[applications]]\nid = 1\nname = \"b\"", "twice");
        refused("[[applications]]\nid = 1\nnme = \"a\"", "nme");
        refused("[[applications]]\nid = 1\nname = \"a\"\ntime_zone_name = \"Europe/Berln\"", "Europe/Berln");
        refused("[[applications]]\nid = 1\nname = \"a\"\ntime_zone_name = \"\"", "time_zone_name");
        let with_date = |date: &str| format!("[[applications]]\nid = 1\nname = \"a\"\ncreate_date = {date}");
        for date in ["\"2026-02-30\"", "\"2026-1-5\"", "2026-10-01T00:00:00", "12:00:00", "20261001", "true"]
        {
            refused(&with_date(date), "`create_date` must be a date");
        }
        // Not TOML at all: the parser's message, with the line.
        refused(&with_date("2026-13-01"), "line 4");
    }
}
