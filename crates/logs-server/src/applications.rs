//! The applications the service lists: those described in the dataset's `applications.toml`,
//! and those that have a folder.

use std::collections::BTreeMap;
use std::path::Path;

use logs_core::Storage;
use serde::{Deserialize, Serialize};

use crate::auth::describe_toml_error;
use crate::config::ConfigError;

/// The file name of the application descriptions in the dataset root.
pub const APPLICATIONS_FILE: &str = "applications.toml";

/// One application, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Application {
    pub id: i64,
    pub name: String,
    #[serde(default = "utc")]
    pub time_zone_name: String,
}

fn utc() -> String {
    "UTC".into()
}

/// The applications described in `applications.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplicationDirectory {
    described: BTreeMap<i64, Application>,
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
            applications: Vec<Application>,
        }
        let file: File = toml::from_str(text).map_err(|e| describe_toml_error(text, &e))?;
        let mut described = BTreeMap::new();
        for app in file.applications {
            if app.name.trim().is_empty() || app.time_zone_name.trim().is_empty() {
                return Err(
                    format!("application {}: `name` and `time_zone_name` must not be empty", app.id).into()
                );
            }
            let id = app.id;
            if described.insert(id, app).is_some() {
                return Err(format!("application {id} is described twice").into());
            }
        }
        Ok(ApplicationDirectory { described })
    }

    /// Every application: the described ones and those in `discovered`, ascending by id.
    pub fn list(&self, discovered: &[i64]) -> Vec<Application> {
        let mut all = self.described.clone();
        for &id in discovered {
            all.entry(id).or_insert_with(|| Application { id, name: id.to_string(), time_zone_name: utc() });
        }
        all.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_described_and_discovered() {
        let dir = ApplicationDirectory::parse(
            "[[applications]]\nid = 1002\nname = \"Shop\"\ntime_zone_name = \"Europe/Berlin\"\n\
             [[applications]]\nid = 7\nname = \"Old\"",
        )
        .unwrap();
        let list = dir.list(&[1001, 1002]);
        let ids: Vec<i64> = list.iter().map(|a| a.id).collect();
        assert_eq!(ids, [7, 1001, 1002]);
        assert_eq!(list[0].time_zone_name, "UTC");
        assert_eq!(list[1].name, "1001");
        assert_eq!(list[2].name, "Shop");
    }

    #[test]
    fn refuses_bad_files() {
        assert!(ApplicationDirectory::parse("[[applications]]\nid = 1\nname = \"\"").is_err());
        assert!(
            ApplicationDirectory::parse(
                "[[applications]]\nid = 1\nname = \"a\"\n[[applications]]\nid = 1\nname = \"b\""
            )
            .is_err()
        );
        assert!(ApplicationDirectory::parse("[[applications]]\nid = 1\nnme = \"a\"").is_err());
    }
}
