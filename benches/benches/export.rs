//! End-to-end exports and planning time on a generated dataset (made on first run under
//! `benches/data/`, 500 000 rows by default; set `LOGS_BENCH_ROWS` for another size).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use logs_core::object_store::local::LocalFileSystem;
use logs_core::{Engine, EngineConfig};
use logs_format::{Encoder, EncoderOptions, Format};

const WIDE: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-07\
    &fields=error_datetime,error_name,error_id,error,os_name,os_version,device_model,app_version_name,service_device_id,city";
const NARROW: &str = "application_id=1001&date_since=2026-10-01&date_until=2026-10-30\
    &fields=error_datetime,error_name,os_name,app_version_name";

fn rows() -> u64 {
    std::env::var("LOGS_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(500_000)
}

/// Runs one export into a sink and returns the bytes written.
async fn export(engine: &Engine, query: &str, format: Format) -> u64 {
    let request = engine.parse_request(query).unwrap();
    let mut stream = engine.export(&request).await.unwrap();
    let mut encoder =
        Encoder::new(format, std::io::sink(), &stream.schema(), EncoderOptions::default()).unwrap();
    while let Some(batch) = stream.next().await {
        encoder.write_batch(&batch.unwrap()).unwrap();
    }
    let bytes = encoder.bytes_written();
    encoder.finish().unwrap();
    bytes
}

fn end_to_end(c: &mut Criterion) {
    let root = logs_benches::dataset(rows());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let engine = Engine::open(&root, EngineConfig::default()).unwrap();
    let mut group = c.benchmark_group("export");
    group.sample_size(10);
    for (name, query, format) in [
        ("wide_csv", WIDE, Format::Csv),
        ("wide_json", WIDE, Format::Json),
        ("wide_csv_receive", &*format!("{WIDE}&date_dimension=receive"), Format::Csv),
        ("narrow_csv", NARROW, Format::Csv),
    ] {
        let bytes = runtime.block_on(export(&engine, query, format));
        group.throughput(Throughput::Bytes(bytes));
        group
            .bench_function(name, |b| b.iter(|| runtime.block_on(export(&engine, black_box(query), format))));
    }
    group.finish();
}

fn planning(c: &mut Criterion) {
    let root = logs_benches::dataset(rows());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let engine = Engine::open(&root, EngineConfig::default()).unwrap();
    c.bench_function("parse_request", |b| b.iter(|| engine.parse_request(black_box(WIDE)).unwrap()));
    // From request to a running stream: file selection (footers), logical and physical plan.
    let request = engine.parse_request(NARROW).unwrap();
    c.bench_function("plan_30_days", |b| b.iter(|| runtime.block_on(engine.export(&request)).unwrap()));
}

/// Every field: the point export's projection.
const ALL: &str = "error,error_datetime,error_id,error_json,error_name,error_receive_datetime,\
    error_receive_timestamp,error_timestamp,service_device_id,city,connection_type,country_iso_code,device_ipv6,\
    device_locale,device_manufacturer,device_model,device_type,google_aid,ios_ifa,ios_ifv,mcc,mnc,operator_name,\
    os_name,os_version,profile_id,windows_aid,app_package_name,app_version_name,application_id";

/// The local folder's own piece of the storage layer (listing with `std::fs`, reads on the
/// calling thread) against the same folder read through `object_store`'s `LocalFileSystem`,
/// the general path every other store takes; side by side, same rows.
fn local_reads(c: &mut Criterion) {
    let root = logs_benches::dataset(rows());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let folder = Engine::open(&root, EngineConfig::default()).unwrap();
    let store = LocalFileSystem::new_with_prefix(&root).unwrap();
    let general = Engine::open_store(Arc::new(store), "", EngineConfig::default()).unwrap();
    // One error of an Android device, over the 30 days: the point export.
    let first = "application_id=1001&date_since=2026-10-01&date_until=2026-10-30&fields=error_id&os_name=android&limit=1";
    let id = runtime.block_on(async {
        let mut stream = folder.export(&folder.parse_request(first).unwrap()).await.unwrap();
        let batch = stream.next().await.unwrap().unwrap();
        let ids = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Utf8).unwrap();
        arrow::array::AsArray::as_string::<i32>(&ids).value(0).to_owned()
    });
    let point = format!(
        "application_id=1001&date_since=2026-10-01&date_until=2026-10-30&fields={ALL}&error_id={id}&os_name=android"
    );
    let mut group = c.benchmark_group("local_reads");
    group.sample_size(20);
    for (name, query) in [("point_csv", point.as_str()), ("wide_csv", WIDE)] {
        let bytes = runtime.block_on(export(&folder, query, Format::Csv));
        assert_eq!(bytes, runtime.block_on(export(&general, query, Format::Csv)), "{name}: the same export");
        for (path, engine) in [("folder", &folder), ("object_store_local", &general)] {
            group.bench_function(format!("{name}/{path}"), |b| {
                b.iter(|| runtime.block_on(export(engine, black_box(query), Format::Csv)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, planning, end_to_end, local_reads);
criterion_main!(benches);
