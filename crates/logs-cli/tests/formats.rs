//! The typed formats read back by the readers analysts use, against `logs serve` over a real
//! socket and files written by `logs export`: every format (CSV, JSON, NDJSON, Parquet, Arrow)
//! read by pyarrow, DuckDB, Polars and pandas (current and 1.5 with pyarrow 14) gives exactly
//! the rows DuckDB computes from the dataset's Parquet files, with device ids above 2^63,
//! nulls, multi-line texts, U+2028, an alias and an absent field, each column of its published
//! type; NDJSON with integers as numbers is read typed as exactly; a prepared Parquet export
//! is read through ranges by pyarrow over fsspec's HTTP file system without being downloaded
//! whole; and the body of an export that fails after its first bytes is refused by every
//! reader.
//!
//! The readers run in two Python environments the tests make on first use
//! (`common::python::Readers`): no test skips when one cannot be made.

mod common;

use std::collections::BTreeSet;
use std::process::Stdio;

use common::python::{Readers, run_script_with};
use common::*;
use serde_json::Value;

/// Application 9001's hand-made edge cases (testdata/make_edge_cases.py): every field, the
/// device id under its original API name (an alias) and `oaid` (declared absent).
const EDGE: &str = "application_id=9001&date_since=2026-10-01&date_until=2026-10-07&fields=\
    error,error_datetime,error_id,error_json,error_name,error_receive_datetime,\
    error_receive_timestamp,error_timestamp,appmetrica_device_id,city,connection_type,\
    country_iso_code,device_ipv6,device_locale,device_manufacturer,device_model,device_type,\
    google_aid,ios_ifa,ios_ifv,mcc,mnc,operator_name,os_name,os_version,profile_id,windows_aid,\
    app_package_name,app_version_name,application_id,oaid";

/// Two generated days of application 1001: thousands of rows, no null device id (so that
/// pandas' default reading keeps it `uint64`), nulls in `mcc`, `mnc`, `city`, `profile_id`.
const DAYS: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-02&fields=\
    error_id,appmetrica_device_id,error_timestamp,error_receive_timestamp,mcc,mnc,city,os_name,\
    profile_id,error_datetime,application_id,oaid";

const FORMATS: [&str; 5] = ["csv", "json", "ndjson", "parquet", "arrow"];

/// Fields that are never null in the dataset.
const NEVER_NULL: [&str; 5] = [
    "error_datetime",
    "error_receive_datetime",
    "error_timestamp",
    "error_receive_timestamp",
    "application_id",
];

/// One JSON report per line, as the scripts print them.
fn reports(output: &str) -> Vec<Value> {
    output.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// What the dataset holds for a query, computed by DuckDB from the Parquet files: (fields,
/// rows sorted by their JSON text).
struct Oracle {
    fields: Vec<String>,
    rows: Vec<Vec<Value>>,
}

fn oracle(query: &str) -> Oracle {
    let root = testdata().display().to_string();
    let target = format!("errors.parquet?{query}");
    let output = run_script_with(Readers::Formats, "formats.py", &["oracle", &root, &target]);
    let report = &reports(&output)[0];
    let fields =
        report["fields"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_owned()).collect();
    Oracle { fields, rows: sorted(rows_of(report)) }
}

impl Oracle {
    fn column(&self, name: &str) -> Vec<&Value> {
        let i = self.fields.iter().position(|f| f == name).unwrap_or_else(|| panic!("no field {name}"));
        self.rows.iter().map(|row| &row[i]).collect()
    }

    /// The rows as a format without types holds them: an integer as its decimal text, a null
    /// as `null` (JSON, NDJSON) or `""` (CSV).
    fn as_text(&self, null: Value) -> Vec<Vec<Value>> {
        let text = |v: &Value| match v {
            Value::Null => null.clone(),
            Value::Number(n) => Value::String(n.to_string()),
            other => other.clone(),
        };
        sorted(self.rows.iter().map(|row| row.iter().map(text).collect()).collect())
    }

    /// The rows a reader of `format` must give.
    fn expected(&self, format: &str) -> Vec<Vec<Value>> {
        match format {
            "csv" => self.as_text(Value::String(String::new())),
            "json" | "ndjson" => self.as_text(Value::Null),
            _ => self.rows.clone(),
        }
    }
}

fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_cached_key(|row| Value::Array(row.clone()).to_string());
    rows
}

fn rows_of(report: &Value) -> Vec<Vec<Value>> {
    let rows = report["rows"].as_array().unwrap_or_else(|| panic!("no rows: {report}"));
    rows.iter().map(|r| r.as_array().unwrap().clone()).collect()
}

/// The published type of a field, as `reader` names it.
fn type_name(reader: &str, field: &str) -> &'static str {
    let kind = match field {
        "appmetrica_device_id" | "service_device_id" => 2,
        "error_timestamp" | "error_receive_timestamp" | "mcc" | "mnc" | "application_id" => 1,
        _ => 0,
    };
    let names = match reader {
        "pyarrow" => ["string", "int64", "uint64"],
        "polars" => ["String", "Int64", "UInt64"],
        "duckdb" => ["VARCHAR", "BIGINT", "UBIGINT"],
        "pandas" => ["string[pyarrow]", "int64[pyarrow]", "uint64[pyarrow]"],
        _ => panic!("no published types for {reader}"),
    };
    names[kind]
}

/// The readers `formats.py` runs for `format` in `env` (as its `READERS` says).
fn readers(env: Readers, format: &str) -> &'static [&'static str] {
    match (env, format) {
        (Readers::Formats, "csv") => &["csv"],
        (Readers::Formats, "json") => &["json", "pandas", "duckdb", "polars"],
        (Readers::Formats, "ndjson") => &["pyarrow", "pandas", "duckdb", "polars"],
        (Readers::Formats, "typed-ndjson") => &["pyarrow", "pandas_default", "duckdb", "polars"],
        (Readers::Formats, _) => &["pyarrow", "pandas", "pandas_default", "duckdb", "polars"],
        (Readers::Pandas15, "typed-ndjson") => &["pyarrow", "pandas_default"],
        (Readers::Pandas15, "csv") => &[],
        (Readers::Pandas15, "json") => &["pandas"],
        (Readers::Pandas15, "ndjson") => &["pyarrow", "pandas"],
        (Readers::Pandas15, _) => &["pyarrow", "pandas", "pandas_default"],
    }
}

/// Checks the reports of one environment on `target` (`format`) against the oracle: every
/// reader there, each with the requested columns and exactly the oracle's rows, of the
/// published types (Parquet, Arrow); pandas' default reading against pyarrow's, row by row.
fn check_reports(env: Readers, oracle: &Oracle, format: &str, target: &str, reports: &[&Value]) {
    let names: Vec<&str> = reports.iter().map(|r| r["reader"].as_str().unwrap()).collect();
    assert_eq!(names, readers(env, format), "{env:?} {target}");
    for report in reports {
        let reader = report["reader"].as_str().unwrap();
        let what = format!("{env:?} {reader} on {target}");
        assert!(report.get("error").is_none(), "{what}: {}", report["error"]);
        assert_eq!(report["columns"], serde_json::json!(oracle.fields), "{what}");
        if reader == "pandas_default" {
            let pyarrow = reports.iter().find(|r| r["reader"] == "pyarrow").unwrap();
            check_pandas_default(env, oracle, format, report, pyarrow, &what);
            continue;
        }
        let rows = sorted(rows_of(report));
        assert_eq!(rows.len(), oracle.rows.len(), "{what}");
        for (got, expected) in rows.iter().zip(oracle.expected(format)) {
            assert_eq!(got, &expected, "{what}");
        }
        if matches!(format, "parquet" | "arrow" | "typed-ndjson") {
            for field in &oracle.fields {
                assert_eq!(report["types"][field], type_name(reader, field), "{what}: {field}");
            }
        }
    }
}

/// pandas' default reading (`read_parquet`, `to_pandas()`, `read_json(lines=True)`), as
/// docs/api.md describes it: an integer column without nulls keeps its numpy type (`uint64`
/// for the device id) and every value; one with nulls becomes `float64`, each value what a
/// double makes of it (ids above 2^53 rounded); texts are Python strings.
fn check_pandas_default(
    env: Readers,
    oracle: &Oracle,
    format: &str,
    report: &Value,
    pyarrow: &Value,
    what: &str,
) {
    let (got, exact) = (rows_of(report), rows_of(pyarrow));
    assert_eq!(got.len(), exact.len(), "{what}");
    let text = match env {
        Readers::Formats => "str",
        Readers::Pandas15 => "object",
    };
    for (i, field) in oracle.fields.iter().enumerate() {
        let integer = type_name("pyarrow", field) != "string";
        let has_null = oracle.column(field).iter().any(|v| v.is_null());
        let dtype = report["types"][field].as_str().unwrap();
        // A column of nulls only: nothing in a JSON text tells pandas its type.
        let all_null = oracle.column(field).iter().all(|v| v.is_null());
        if all_null && format == "typed-ndjson" {
            assert!(got.iter().all(|row| row[i].is_null()), "{what}: {field}");
            continue;
        }
        let expected = match (integer, has_null) {
            (false, _) => text,
            (true, true) => "float64",
            (true, false) => type_name("pyarrow", field),
        };
        assert_eq!(dtype, expected, "{what}: {field}");
        for (row, exact_row) in got.iter().zip(&exact) {
            let (value, exact) = (&row[i], &exact_row[i]);
            if dtype == "float64" && !exact.is_null() {
                let double = exact.as_u64().map(|v| v as f64).or(exact.as_i64().map(|v| v as f64)).unwrap();
                assert_eq!(value.as_f64(), Some(double), "{what}: {field}");
            } else {
                assert_eq!(value, exact, "{what}: {field}");
            }
        }
    }
}

/// The checks that make the readback mean something: the oracle holds what readers get wrong.
fn assert_edge_cases_present(edge: &Oracle, days: &Oracle) {
    assert_eq!(edge.rows.len(), 9, "application 9001's edge cases");
    for oracle in [edge, days] {
        let ids = oracle.column("appmetrica_device_id");
        assert!(ids.iter().any(|v| v.as_u64().is_some_and(|id| id > 1 << 63)), "an id above 2^63");
        assert!(oracle.column("oaid").iter().all(|v| v.is_null()), "oaid is absent");
    }
    assert!(edge.column("appmetrica_device_id").contains(&&Value::from(u64::MAX)));
    for field in &edge.fields {
        let nulls = edge.column(field).iter().filter(|v| v.is_null()).count();
        if NEVER_NULL.contains(&field.as_str()) {
            assert_eq!(nulls, 0, "{field}");
        } else {
            assert!(nulls > 0, "a null in {field}");
        }
    }
    let texts: Vec<&str> = edge.rows.iter().flatten().filter_map(|v| v.as_str()).collect();
    assert!(texts.iter().any(|t| t.contains('\n')), "a multi-line text");
    assert!(texts.iter().any(|t| t.contains('\u{2028}')), "U+2028");
    assert!(days.rows.len() > 1000, "{} rows", days.rows.len());
    assert!(days.column("appmetrica_device_id").iter().all(|v| !v.is_null()));
    assert!(days.column("mcc").iter().any(|v| v.is_null()));
}

#[test]
fn every_format_reads_back_exactly_in_every_reader() {
    let (edge, days) = (oracle(EDGE), oracle(DAYS));
    assert_edge_cases_present(&edge, &days);
    let served = serve_with(&testdata(), &["--field-aliases", &original_api_aliases()], Stdio::null());
    let targets: Vec<(String, &str, &Oracle)> = [(EDGE, &edge), (DAYS, &days)]
        .into_iter()
        .flat_map(|(query, oracle)| {
            FORMATS.map(|format| (format!("errors.{format}?{query}"), format, oracle))
        })
        .collect();
    for env in [Readers::Formats, Readers::Pandas15] {
        let mut args = vec!["read", env.name(), &served.base, &served.token];
        args.extend(targets.iter().map(|(target, _, _)| target.as_str()));
        let reports = reports(&run_script_with(env, "formats.py", &args));
        for (target, format, oracle) in &targets {
            let of_target: Vec<&Value> = reports.iter().filter(|r| r["target"] == target.as_str()).collect();
            check_reports(env, oracle, format, target, &of_target);
        }
    }
}

/// NDJSON with `--json-integers number`: pyarrow, DuckDB and Polars told the published types
/// read every integer exactly, device ids above 2^63 included; pandas' `read_json` does where
/// a column has no null.
#[test]
fn ndjson_with_integers_as_numbers_reads_back_typed() {
    let (edge, days) = (oracle(EDGE), oracle(DAYS));
    let flags = ["--field-aliases", &original_api_aliases(), "--json-integers", "number"];
    let served = serve_with(&testdata(), &flags, Stdio::null());
    let targets = [(format!("errors.ndjson?{EDGE}"), &edge), (format!("errors.ndjson?{DAYS}"), &days)];
    for env in [Readers::Formats, Readers::Pandas15] {
        let mut args = vec!["read-typed-ndjson", env.name(), &served.base, &served.token];
        args.extend(targets.iter().map(|(target, _)| target.as_str()));
        let reports = reports(&run_script_with(env, "formats.py", &args));
        for (target, oracle) in &targets {
            let of_target: Vec<&Value> = reports.iter().filter(|r| r["target"] == target.as_str()).collect();
            check_reports(env, oracle, "typed-ndjson", target, &of_target);
        }
    }
}

/// `logs export` into files named `.parquet`, `.arrow` and `.ndjson`: with the target's
/// extension, and with flags, the format inferred from the file's.
#[test]
fn files_written_by_logs_export_read_back_exactly() {
    let edge = oracle(EDGE);
    let out = tempfile::tempdir().unwrap();
    let aliases = original_api_aliases();
    let fields = edge.fields.join(",");
    let file = |name: &str| out.path().join(name).display().to_string();
    let (parquet, arrow, ndjson) = (file("edge.parquet"), file("edge.arrow"), file("edge.ndjson"));
    let data = testdata();
    let export = |args: &[&str]| {
        let output = logs_command()
            .args(["export", "--data"])
            .arg(&data)
            .args(["--field-aliases", &aliases])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        assert!(output.stdout.is_empty(), "{args:?}: the export goes to the file");
    };
    export(&["-o", &parquet, &format!("errors.parquet?{EDGE}")]);
    for file in [&arrow, &ndjson] {
        let flags = ["--app", "9001", "--since", "2026-10-01", "--until", "2026-10-07", "--fields", &fields];
        export(&[&flags[..], &["-o", file]].concat());
    }
    let arrow_stream = std::fs::read(&arrow).unwrap();
    assert!(arrow_stream.starts_with(&[0xFF, 0xFF, 0xFF, 0xFF]), "an Arrow IPC stream");
    assert!(std::fs::read(&parquet).unwrap().starts_with(b"PAR1"));

    let args = ["read-files", "formats", &fields, &parquet, &arrow, &ndjson];
    let reports = reports(&run_script_with(Readers::Formats, "formats.py", &args));
    for (file, format) in [(&parquet, "parquet"), (&arrow, "arrow"), (&ndjson, "ndjson")] {
        let of_file: Vec<&Value> = reports.iter().filter(|r| r["target"] == file.as_str()).collect();
        check_reports(Readers::Formats, &edge, format, file, &of_file);
    }
}

/// Application 1001's one day of `rows` records in one file, generated.
fn one_day(rows: u64) -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(data.path());
    options.rows = rows;
    options.days = 1;
    options.threads = 2;
    options.apps = logs_generate::parse_apps("1001").unwrap();
    logs_generate::generate(&options).unwrap();
    data
}

/// A prepared Parquet export of 300,000 rows with long texts (about 28 MB, five row groups):
/// pyarrow over fsspec's HTTP file system, with the `Authorization` header, reads the footer
/// and two small columns of the second row group through ranges (fsspec's `cache_type="none"`:
/// without it, fsspec reads 5 MiB ahead of each read), and the server sends under a tenth of
/// the file. The columns read are those of the file downloaded whole.
#[test]
fn a_prepared_parquet_export_is_read_through_ranges_without_downloading_it_whole() {
    let data = one_day(300_000);
    let spool = tempfile::tempdir().unwrap();
    let spool_path = spool.path().display().to_string();
    let served = serve_with(data.path(), &["--spool", &spool_path, "--prepare", "always"], Stdio::null());
    let target = "errors.parquet?application_id=1001&date_since=2026-10-01&date_until=2026-10-01\
                  &fields=error_id,error,error_json,service_device_id,error_timestamp,city,os_name";
    let args = [served.base.as_str(), &served.token, target, "1", "error_id,service_device_id"];
    let output = run_script_with(Readers::Formats, "parquet_ranges.py", &args);
    let report = &reports(&output)[0];
    assert_eq!(report["rows"], 300_000, "{report}");
    assert!(report["row_groups"].as_u64().unwrap() >= 3, "{report}");
    assert_eq!(report["read_rows"], logs_format::ROW_GROUP_ROWS as u64, "{report}");
    assert_eq!(report["equal"], true, "{report}");
    let size = report["size"].as_u64().unwrap();
    assert!(size > 20_000_000, "{report}");
    let served_bytes = report["served"].as_u64().unwrap();
    assert!(served_bytes < size / 10, "{served_bytes} of {size} bytes served: {report}");
    // Only ranges: the file is never asked for whole.
    let requests = report["requests"].as_array().unwrap();
    assert!(
        requests.iter().filter(|r| r.as_str().unwrap().starts_with("GET bytes=")).count() >= 2,
        "{report}"
    );
    assert!(
        requests.iter().all(|r| r == "HEAD -" || r.as_str().unwrap().starts_with("GET bytes=")),
        "{report}"
    );
}

/// Application 1001's first day of 150,000 records in 15 files of 10,000, the last one with its
/// pages damaged and its footer intact: an export of the day fails after its first 140,000
/// rows, more than a Parquet row group (65,536 rows), are out (as in
/// `crates/logs-server/tests/formats.rs`, with more rows).
fn dataset_failing_at_its_last_file() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut options = logs_generate::GenerateOptions::new(dir.path());
    options.rows = 150_000;
    options.days = 1;
    options.threads = 2;
    options.max_file_rows = 10_000;
    options.apps = logs_generate::parse_apps("1001").unwrap();
    logs_generate::generate(&options).unwrap();
    let folder = dir.path().join("application_id=1001/date=2026-10-01");
    let mut files: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    logs_testkit::damage_pages(files.last().unwrap());
    dir
}

/// An export that fails after its first bytes (`skip_unavailable_shards` off, the default),
/// saved as it arrived, gzipped or not: every reader of each environment refuses the Parquet,
/// Arrow and NDJSON bodies.
#[test]
fn a_broken_export_leaves_bodies_every_reader_refuses() {
    let data = dataset_failing_at_its_last_file();
    let served = serve(data.path());
    let query = "application_id=1001&date_since=2026-10-01&date_until=2026-10-01\
                 &fields=error_id,service_device_id,mcc,os_name";
    let targets: Vec<String> = ["parquet", "arrow", "ndjson"].map(|f| format!("errors.{f}?{query}")).into();
    for env in [Readers::Formats, Readers::Pandas15] {
        let mut args = vec!["broken", env.name(), &served.base, &served.token];
        args.extend(targets.iter().map(String::as_str));
        let reports = reports(&run_script_with(env, "formats.py", &args));
        let mut seen = BTreeSet::new();
        for report in &reports {
            let what = format!("{env:?}: {report}");
            assert_ne!(report["transfer"], "complete", "{what}");
            // A row group (Parquet) or many batches (Arrow, NDJSON) went out before the failure.
            assert!(report["bytes"].as_u64().unwrap() > 100_000, "{what}");
            assert_eq!(report["refused"], true, "{what}");
            seen.insert((
                report["format"].to_string(),
                report["reader"].to_string(),
                report["encoding"].to_string(),
            ));
        }
        let expected: usize = ["parquet", "arrow", "ndjson"].iter().map(|f| 2 * readers(env, f).len()).sum();
        assert_eq!(seen.len(), expected, "{env:?}: every reader, both encodings: {seen:?}");
    }
}
