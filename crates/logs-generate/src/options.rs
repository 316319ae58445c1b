//! What to generate: the applications, the size and time span of the dataset, and the
//! Parquet layout knobs, with their parsing and validation.

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate};

use crate::GenerateError;

/// One application of the dataset and its share of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppSpec {
    /// The `application_id` (folder `application_id=<id>`).
    pub id: i64,
    /// Relative share of the rows; the rows are split across apps in proportion to it.
    pub weight: u32,
}

impl FromStr for AppSpec {
    type Err = GenerateError;

    /// Parses `"1001"` (weight 1) or `"1001:80"`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |message: String| GenerateError::InvalidOption { name: "apps", message };
        let s = s.trim();
        let (id, weight) = match s.split_once(':') {
            Some((id, weight)) => (id.trim(), Some(weight.trim())),
            None => (s, None),
        };
        let id = id.parse::<i64>().map_err(|_| {
            invalid(format!("`{s}`: application id `{id}` is not an integer (expected `ID` or `ID:WEIGHT`)"))
        })?;
        let weight = match weight {
            None => 1,
            Some(w) => w.parse::<u32>().map_err(|_| {
                invalid(format!("`{s}`: weight `{w}` is not a non-negative integer (expected `ID:WEIGHT`)"))
            })?,
        };
        Ok(AppSpec { id, weight })
    }
}

impl fmt::Display for AppSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.id, self.weight)
    }
}

/// Parses a comma-separated list of apps, e.g. `"1001:80,1002:15,1003:5"`, and checks it
/// (non-empty, unique ids, positive weights).
pub fn parse_apps(s: &str) -> Result<Vec<AppSpec>, GenerateError> {
    let apps = s
        .split(',')
        .map(|part| {
            if part.trim().is_empty() {
                Err(GenerateError::InvalidOption {
                    name: "apps",
                    message: format!("`{s}` has an empty entry (expected e.g. `1001:80,1002:15`)"),
                })
            } else {
                part.parse()
            }
        })
        .collect::<Result<Vec<AppSpec>, _>>()?;
    validate_apps(&apps)?;
    Ok(apps)
}

fn validate_apps(apps: &[AppSpec]) -> Result<(), GenerateError> {
    let invalid = |message: String| GenerateError::InvalidOption { name: "apps", message };
    if apps.is_empty() {
        return Err(invalid("at least one application is required".into()));
    }
    let mut seen = HashSet::new();
    for app in apps {
        if !seen.insert(app.id) {
            return Err(invalid(format!("application id {} is listed twice", app.id)));
        }
        if app.weight == 0 {
            return Err(invalid(format!("application {} has weight 0 (weights must be positive)", app.id)));
        }
    }
    Ok(())
}

/// The order of the rows inside each file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// By `error_timestamp`.
    ErrorTimestamp,
    /// By `error_receive_timestamp`.
    ErrorReceiveTimestamp,
    /// By `error_id`, then `error_timestamp` (the default). The rows of one error cluster in
    /// a few pages, so an export filtered by `error_id` decompresses only those pages (with
    /// the page index), and similar stack traces sit together and compress about 30% better.
    /// Exports by whole days prune as well as with a time order (the date folders hold one
    /// day each); ranges of hours within a day prune less.
    #[default]
    ErrorId,
    /// By `service_device_id`, then `error_timestamp`.
    ServiceDeviceId,
    /// Not sorted: the order in which rows were generated (random times).
    Unsorted,
}

impl SortKey {
    const ALL: [(&'static str, SortKey); 5] = [
        ("error_timestamp", SortKey::ErrorTimestamp),
        ("error_receive_timestamp", SortKey::ErrorReceiveTimestamp),
        ("error_id", SortKey::ErrorId),
        ("service_device_id", SortKey::ServiceDeviceId),
        ("none", SortKey::Unsorted),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, k)| *k == self).map_or("none", |(n, _)| n)
    }
}

impl FromStr for SortKey {
    type Err = GenerateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, k)| *k).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|(n, _)| *n).collect();
            GenerateError::InvalidOption {
                name: "sort_by",
                message: format!("`{s}` is not a sort key (expected one of {})", names.join(", ")),
            }
        })
    }
}

impl fmt::Display for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The Parquet compression codec of the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Codec {
    Uncompressed,
    Snappy,
    /// LZ4 (Parquet's `LZ4_RAW`).
    Lz4,
    /// ZSTD at the given level (1..=22).
    Zstd(i32),
    /// The default: ZSTD level 1 for the long texts (`error`, `error_json`), which hold most of
    /// the bytes; LZ4 for the time columns, `device_ipv6`, `ios_ifa` and `profile_id`, which it
    /// shrinks by a quarter or more; no compression for the others (dictionary indices and
    /// random ids, which LZ4 did not shrink). A reader sets up a codec for every column chunk
    /// it opens, and the Parquet reader's ZSTD codec allocates a compression and a
    /// decompression context each time: with 30 columns in 60 files, a point export spent a
    /// sixth of its CPU there (perf: 18%). LZ4 costs nothing to set up and decodes faster, and
    /// an uncompressed page is not even copied. The files grow by a fifth (906 MiB all ZSTD to
    /// 1 103 MiB for 5 M rows).
    #[default]
    Mixed,
}

impl FromStr for Codec {
    type Err = GenerateError;

    /// `mixed`, `none`, `snappy`, `lz4`, `zstd` (level 1) or `zstd:<level>`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || GenerateError::InvalidOption {
            name: "compression",
            message: format!(
                "`{s}` is not a codec (expected mixed, none, snappy, lz4, zstd or zstd:<1..=22>)"
            ),
        };
        match s.split_once(':') {
            None if s == "mixed" => Ok(Codec::Mixed),
            None if s == "none" => Ok(Codec::Uncompressed),
            None if s == "snappy" => Ok(Codec::Snappy),
            None if s == "lz4" => Ok(Codec::Lz4),
            None if s == "zstd" => Ok(Codec::Zstd(1)),
            Some(("zstd", level)) => match level.parse::<i32>() {
                Ok(level) if (1..=22).contains(&level) => Ok(Codec::Zstd(level)),
                _ => Err(invalid()),
            },
            _ => Err(invalid()),
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Codec::Uncompressed => f.write_str("none"),
            Codec::Snappy => f.write_str("snappy"),
            Codec::Lz4 => f.write_str("lz4"),
            Codec::Mixed => f.write_str("mixed"),
            Codec::Zstd(level) => write!(f, "zstd:{level}"),
        }
    }
}

/// Everything that determines a generated dataset. The same options (including `seed`)
/// always produce byte-identical files, whatever `threads` is.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateOptions {
    /// The dataset root; must be absent or an empty directory.
    pub out: PathBuf,
    /// Total number of rows over all apps and days.
    pub rows: u64,
    /// The applications and their shares of the rows.
    pub apps: Vec<AppSpec>,
    /// Number of days (date folders per app), starting at `start`.
    pub days: u32,
    /// The first error date (UTC).
    pub start: NaiveDate,
    pub seed: u64,
    /// Maximum rows per Parquet row group.
    pub row_group_rows: usize,
    /// Maximum rows per file (not counting late rows); a day with more rows gets several
    /// files, `part-00000.parquet`, `part-00001.parquet`, ...
    pub max_file_rows: u64,
    /// Worker threads (files are generated in parallel).
    pub threads: usize,
    /// Fraction of rows received hours to days after the error (written to `late-*.parquet`).
    pub late_fraction: f64,
    /// The order of the rows inside each file.
    pub sort_by: SortKey,
    pub compression: Codec,
}

impl GenerateOptions {
    /// The defaults: 100 000 rows, apps `1001:80,1002:15,1003:5`, 30 days from 2026-10-01,
    /// seed 1, row groups of 131 072 rows, files of at most 1 048 576 rows, one thread per
    /// core, 3% late rows, sorted by `error_id` then `error_timestamp`, [`Codec::Mixed`]
    /// compression.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        GenerateOptions {
            out: out.into(),
            rows: 100_000,
            apps: vec![
                AppSpec { id: 1001, weight: 80 },
                AppSpec { id: 1002, weight: 15 },
                AppSpec { id: 1003, weight: 5 },
            ],
            days: 30,
            start: NaiveDate::from_ymd_opt(2026, 10, 1).expect("valid date"),
            seed: 1,
            row_group_rows: 131_072,
            max_file_rows: 1_048_576,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            late_fraction: 0.03,
            sort_by: SortKey::default(),
            compression: Codec::default(),
        }
    }

    /// Checks every option, naming the first one that is wrong.
    pub fn validate(&self) -> Result<(), GenerateError> {
        let invalid =
            |name, message: &str| Err(GenerateError::InvalidOption { name, message: message.into() });
        validate_apps(&self.apps)?;
        if self.days == 0 {
            return invalid("days", "must be at least 1");
        }
        if self.days > 36_600 {
            return invalid("days", "must be at most 36600 (100 years)");
        }
        let end = self.start.checked_add_days(chrono::Days::new(u64::from(self.days) + 3));
        if self.start.year() < 1970 || end.is_none_or(|end| end.year() > 9999) {
            return invalid("start", "the dates must lie between 1970-01-01 and 9999-12-31");
        }
        if self.row_group_rows == 0 {
            return invalid("row_group_rows", "must be at least 1");
        }
        if self.max_file_rows == 0 {
            return invalid("max_file_rows", "must be at least 1");
        }
        if self.threads == 0 {
            return invalid("threads", "must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.late_fraction) {
            return invalid("late_fraction", "must be a number between 0 and 1");
        }
        if let Codec::Zstd(level) = self.compression
            && !(1..=22).contains(&level)
        {
            return invalid("compression", "zstd level must be between 1 and 22");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid_name(err: GenerateError) -> &'static str {
        match err {
            GenerateError::InvalidOption { name, .. } => name,
            other => panic!("unexpected error {other}"),
        }
    }

    #[test]
    fn parses_apps() {
        assert_eq!("1001".parse::<AppSpec>().unwrap(), AppSpec { id: 1001, weight: 1 });
        assert_eq!(" 7:3 ".parse::<AppSpec>().unwrap(), AppSpec { id: 7, weight: 3 });
        let apps = parse_apps("1001:80,1002:15,1003").unwrap();
        assert_eq!(apps.len(), 3);
        assert_eq!(apps[2], AppSpec { id: 1003, weight: 1 });
    }

    #[test]
    fn rejects_bad_apps() {
        for bad in ["", "x", "1001:", "1001:-1", "1001:0", "1,1", "1,,2", "1:2:3"] {
            let err = parse_apps(bad).unwrap_err();
            assert_eq!(invalid_name(err), "apps", "{bad}");
        }
        let err = parse_apps("5,5").unwrap_err().to_string();
        assert!(err.contains("apps") && err.contains("twice"), "{err}");
    }

    #[test]
    fn validation_names_the_option() {
        let ok = GenerateOptions::new("/tmp/x");
        ok.validate().unwrap();
        type Change = fn(&mut GenerateOptions);
        let cases: [(&str, Change); 7] = [
            ("days", |o| o.days = 0),
            ("max_file_rows", |o| o.max_file_rows = 0),
            ("row_group_rows", |o| o.row_group_rows = 0),
            ("threads", |o| o.threads = 0),
            ("late_fraction", |o| o.late_fraction = 1.5),
            ("late_fraction", |o| o.late_fraction = f64::NAN),
            ("apps", |o| o.apps.clear()),
        ];
        for (name, change) in cases {
            let mut o = ok.clone();
            change(&mut o);
            assert_eq!(invalid_name(o.validate().unwrap_err()), name);
        }
    }

    #[test]
    fn parses_sort_keys_and_codecs() {
        for key in SortKey::ALL.map(|(_, k)| k) {
            assert_eq!(key.name().parse::<SortKey>().unwrap(), key);
        }
        assert!("error_datetime".parse::<SortKey>().is_err());
        assert_eq!("zstd:3".parse::<Codec>().unwrap(), Codec::Zstd(3));
        assert_eq!("snappy".parse::<Codec>().unwrap(), Codec::Snappy);
        assert_eq!(Codec::Zstd(3).to_string().parse::<Codec>().unwrap(), Codec::Zstd(3));
        assert!("zstd:0".parse::<Codec>().is_err());
        assert!("gzip".parse::<Codec>().is_err());
        assert_eq!("zstd".parse::<Codec>().unwrap(), Codec::Zstd(1));
        for codec in [Codec::Mixed, Codec::Lz4, Codec::Uncompressed, Codec::Snappy] {
            assert_eq!(codec.to_string().parse::<Codec>().unwrap(), codec);
        }
    }
}
