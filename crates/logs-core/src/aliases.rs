//! Other names for fields, set by the operator, so that clients written for another API's
//! field names work unchanged:
//!
//! - an **alias** is a second name of a field of the dataset (`appmetrica_device_id` for
//!   `service_device_id`): accepted wherever the field's name is, in `fields` and as a filter,
//!   and the output names the column as the request did;
//! - an **absent field** is a name the dataset holds no values for (`oaid`): it may be
//!   requested in `fields` and is exported as null in every record; filtering on it is refused,
//!   since no record could match.
//!
//! Names that are neither fields, aliases nor absent fields stay refused, as without aliases.
//!
//! The table is usually read from a TOML file (`logs serve --field-aliases FILE`):
//!
//! ```toml
//! [aliases]
//! appmetrica_device_id = "service_device_id"
//!
//! [absent]
//! oaid = "string"
//! android_id = "string"
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::error::{Error, quote};
use crate::query::PARAMETERS;
use crate::schema::{Field, FieldType};

/// What a column of the output is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnSource {
    /// A field of the dataset.
    Field(Field),
    /// A field the dataset does not hold, of the declared type: null in every record.
    Absent(FieldType),
}

impl ColumnSource {
    /// The type of the column's values.
    pub fn field_type(self) -> FieldType {
        match self {
            ColumnSource::Field(field) => field.field_type(),
            ColumnSource::Absent(field_type) => field_type,
        }
    }
}

/// The longest alias or absent-field name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// The operator's aliases and absent fields. Cheap to clone; empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldAliases {
    names: Arc<BTreeMap<String, ColumnSource>>,
}

/// The TOML form, as read from a file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AliasFile {
    #[serde(default)]
    aliases: BTreeMap<String, String>,
    #[serde(default)]
    absent: BTreeMap<String, String>,
}

impl FieldAliases {
    /// No aliases: only the dataset's own field names are accepted.
    pub fn new() -> FieldAliases {
        FieldAliases::default()
    }

    /// Parses the TOML form (see the module documentation): `[aliases]` maps a name to a
    /// field's name, `[absent]` a name to `"string"` or `"integer"`.
    pub fn from_toml(text: &str) -> Result<FieldAliases, Error> {
        let file: AliasFile =
            toml::from_str(text).map_err(|e| config(e.to_string().trim_end().to_owned()))?;
        let mut aliases = FieldAliases::new();
        for (name, target) in &file.aliases {
            let field = Field::from_name(target).ok_or_else(|| {
                config(format!(
                    "alias `{}` names `{}`, which is not a field; give one of: {}",
                    quote(name),
                    quote(target),
                    crate::schema::field_names()
                ))
            })?;
            aliases = aliases.with_alias(name, field)?;
        }
        for (name, kind) in &file.absent {
            let field_type = match kind.as_str() {
                "string" => FieldType::String,
                "integer" => FieldType::Int64,
                other => {
                    return Err(config(format!(
                        "absent field `{}` has type `{}`; allowed: `string`, `integer`",
                        quote(name),
                        quote(other)
                    )));
                }
            };
            aliases = aliases.with_absent(name, field_type)?;
        }
        Ok(aliases)
    }

    /// These aliases and `name` as another name of `field`. Refused: a name that is a field,
    /// a parameter or already taken, a name that is not 1 to 64 ASCII letters, digits and
    /// `_`, and an alias of `application_id` (also the request's required parameter).
    pub fn with_alias(self, name: &str, field: Field) -> Result<FieldAliases, Error> {
        if field == Field::APPLICATION_ID {
            return Err(config(format!(
                "alias `{}` names `application_id`, which is also the required parameter and cannot have another name",
                quote(name)
            )));
        }
        self.with(name, ColumnSource::Field(field))
    }

    /// These aliases and `name` as a field the dataset does not hold, of type `field_type`.
    /// The same names are refused as by [`FieldAliases::with_alias`].
    pub fn with_absent(self, name: &str, field_type: FieldType) -> Result<FieldAliases, Error> {
        self.with(name, ColumnSource::Absent(field_type))
    }

    fn with(self, name: &str, source: ColumnSource) -> Result<FieldAliases, Error> {
        let valid = (1..=MAX_NAME_LEN).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(config(format!(
                "`{}` is not a valid name: use 1 to {MAX_NAME_LEN} ASCII letters, digits and `_`",
                quote(name)
            )));
        }
        if Field::from_name(name).is_some() || PARAMETERS.contains(&name) {
            return Err(config(format!(
                "`{name}` is a field or parameter name already and cannot be an alias"
            )));
        }
        if self.names.contains_key(name) {
            return Err(config(format!("`{name}` is declared twice")));
        }
        let mut names = (*self.names).clone();
        names.insert(name.to_owned(), source);
        Ok(FieldAliases { names: Arc::new(names) })
    }

    /// What `name` stands for, if it is an alias or an absent field.
    pub fn get(&self, name: &str) -> Option<ColumnSource> {
        self.names.get(name).copied()
    }

    /// What `name` stands for: a field by its own name, else an alias or an absent field.
    pub fn resolve(&self, name: &str) -> Option<ColumnSource> {
        Field::from_name(name).map(ColumnSource::Field).or_else(|| self.get(name))
    }

    /// Every name with what it stands for, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, ColumnSource)> {
        self.names.iter().map(|(name, source)| (name.as_str(), *source))
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

fn config(message: String) -> Error {
    Error::Config { setting: "field_aliases", message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_aliases_and_absent_fields() {
        let aliases = FieldAliases::from_toml(
            "[aliases]\nappmetrica_device_id = \"service_device_id\"\n[absent]\noaid = \"string\"\nlevel = \"integer\"\n",
        )
        .unwrap();
        assert_eq!(aliases.get("appmetrica_device_id"), Some(ColumnSource::Field(Field::SERVICE_DEVICE_ID)));
        assert_eq!(aliases.get("oaid"), Some(ColumnSource::Absent(FieldType::String)));
        assert_eq!(aliases.get("level"), Some(ColumnSource::Absent(FieldType::Int64)));
        assert_eq!(aliases.get("service_device_id"), None);
        let names: Vec<_> = aliases.iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["appmetrica_device_id", "level", "oaid"]);
        assert!(FieldAliases::from_toml("").unwrap().is_empty());
    }

    #[test]
    fn refuses_what_would_be_ambiguous_or_wrong() {
        let refused = [
            ("[aliases]\nos = \"operating_system\"\n", "not a field"),
            ("[aliases]\nos_name = \"city\"\n", "field or parameter name"),
            ("[aliases]\nlimit = \"city\"\n", "field or parameter name"),
            ("[aliases]\napp = \"application_id\"\n", "required parameter"),
            ("[aliases]\n\"a b\" = \"city\"\n", "not a valid name"),
            ("[aliases]\ntown = \"city\"\n[absent]\ntown = \"string\"\n", "declared twice"),
            ("[absent]\noaid = \"uuid\"\n", "allowed: `string`, `integer`"),
            ("[alias]\nx = \"city\"\n", "unknown field"),
            ("[aliases]\nx = 5\n", "invalid type"),
        ];
        for (text, expected) in refused {
            let error = FieldAliases::from_toml(text).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(error.contains("field_aliases"), "{error}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert!(FieldAliases::new().with_absent(&long, FieldType::String).is_err());
        assert!(FieldAliases::new().with_absent(&long[1..], FieldType::String).is_ok());
    }
}
