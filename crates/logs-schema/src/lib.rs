//! The data contract of logs-export: the 30 fields of an error record (spec §2.1), their
//! names, their types as the API declares them, and which one comes from the dataset's
//! folder names rather than from the files. The engine (`logs-core`) and the generator
//! (`logs-generate`) both take the fields from here, so the two cannot drift apart; each maps
//! the types onto Arrow its own way.

/// The value type of a field as the API declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// Any UTF-8 text.
    String,
    /// A signed 64-bit integer.
    Int64,
    /// An unsigned 64-bit integer (`service_device_id`: real values exceed 2^63).
    UInt64,
}

impl FieldType {
    /// True for the integer types of the API (`integer` in §2.1).
    pub fn is_integer(self) -> bool {
        !matches!(self, FieldType::String)
    }
}

/// One field of the error record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Field(u8);

/// Name and type of every field, in the order of spec §2.1.
const FIELDS: [(&str, FieldType); 30] = [
    ("error", FieldType::String),
    ("error_datetime", FieldType::String),
    ("error_id", FieldType::String),
    ("error_json", FieldType::String),
    ("error_name", FieldType::String),
    ("error_receive_datetime", FieldType::String),
    ("error_receive_timestamp", FieldType::Int64),
    ("error_timestamp", FieldType::Int64),
    ("service_device_id", FieldType::UInt64),
    ("city", FieldType::String),
    ("connection_type", FieldType::String),
    ("country_iso_code", FieldType::String),
    ("device_ipv6", FieldType::String),
    ("device_locale", FieldType::String),
    ("device_manufacturer", FieldType::String),
    ("device_model", FieldType::String),
    ("device_type", FieldType::String),
    ("google_aid", FieldType::String),
    ("ios_ifa", FieldType::String),
    ("ios_ifv", FieldType::String),
    ("mcc", FieldType::Int64),
    ("mnc", FieldType::Int64),
    ("operator_name", FieldType::String),
    ("os_name", FieldType::String),
    ("os_version", FieldType::String),
    ("profile_id", FieldType::String),
    ("windows_aid", FieldType::String),
    ("app_package_name", FieldType::String),
    ("app_version_name", FieldType::String),
    ("application_id", FieldType::Int64),
];

impl Field {
    pub const ERROR_TIMESTAMP: Field = Field(7);
    pub const ERROR_RECEIVE_TIMESTAMP: Field = Field(6);
    pub const SERVICE_DEVICE_ID: Field = Field(8);
    pub const ERROR_ID: Field = Field(2);
    pub const APPLICATION_ID: Field = Field(29);

    /// Every field, in the order of spec §2.1.
    pub fn all() -> impl ExactSizeIterator<Item = Field> + Clone {
        (0..FIELDS.len() as u8).map(Field)
    }

    /// The field called `name`, if there is one (names are case-sensitive, as in the API).
    pub fn from_name(name: &str) -> Option<Field> {
        FIELDS.iter().position(|(n, _)| *n == name).map(|i| Field(i as u8))
    }

    pub fn name(self) -> &'static str {
        FIELDS[self.0 as usize].0
    }

    pub fn field_type(self) -> FieldType {
        FIELDS[self.0 as usize].1
    }

    /// True for the field that comes from the dataset's folder names, not from the files.
    pub fn is_partition(self) -> bool {
        self == Field::APPLICATION_ID
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The comma-separated list of all field names, for error messages.
pub fn field_names() -> String {
    Field::all().map(Field::name).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<_> = Field::all().map(Field::name).collect();
        assert_eq!(names.len(), 30);
        for f in Field::all() {
            assert_eq!(Field::from_name(f.name()), Some(f));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 30);
        assert_eq!(Field::from_name("Error"), None);
    }

    #[test]
    fn constants_name_their_fields() {
        assert_eq!(Field::ERROR_TIMESTAMP.name(), "error_timestamp");
        assert_eq!(Field::ERROR_RECEIVE_TIMESTAMP.name(), "error_receive_timestamp");
        assert_eq!(Field::SERVICE_DEVICE_ID.name(), "service_device_id");
        assert_eq!(Field::ERROR_ID.name(), "error_id");
        assert_eq!(Field::APPLICATION_ID.name(), "application_id");
        assert!(Field::APPLICATION_ID.is_partition());
        assert_eq!(Field::all().filter(|f| f.is_partition()).count(), 1);
    }

    #[test]
    fn integer_fields_are_the_declared_ones() {
        let ints: Vec<_> = Field::all().filter(|f| f.field_type().is_integer()).map(Field::name).collect();
        assert_eq!(
            ints,
            [
                "error_receive_timestamp",
                "error_timestamp",
                "service_device_id",
                "mcc",
                "mnc",
                "application_id"
            ]
        );
    }
}
