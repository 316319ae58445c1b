//! CSV and JSON encoding throughput: `logs-format`'s encoders against Arrow's own writers on
//! the same in-memory batches (64 Ki rows in batches of 8192, DataFusion's default size),
//! written into `io::sink()`.
//!
//! The columns resemble an error export: a multi-line stack trace with commas, quotes and tabs
//! (`Utf8View`, as the engine produces text), a datetime string, a short name, `os_name` as a
//! dictionary, an `i64` Unix timestamp, a `u64` device id above 2^63, and a city that is
//! sometimes null.
//!
//! Every benchmark of a group reports throughput against the size of *our* output for that
//! format, so the MB/s figures compare the time to encode the same rows (Arrow's JSON writers
//! omit null keys and so write slightly fewer bytes).
//!
//! Run: `cargo bench --bench encoders -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::io;
use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Int64Array, StringArray, StringViewArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use logs_format::{Encoder, EncoderOptions, Format};

const ROWS: usize = 64 * 1024;
const BATCH_ROWS: usize = 8192;

/// SplitMix64: a small deterministic generator, so that every run encodes the same data.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const EXCEPTIONS: [&str; 6] = [
    "java.lang.NullPointerException: Attempt to invoke virtual method 'int java.lang.String.length()' on a null object reference",
    "java.lang.IllegalStateException: Fragment MainFragment{5f1a2b} not attached to a context.",
    "java.lang.OutOfMemoryError: Failed to allocate a 4194316 byte allocation with 2097152 free bytes and 3MB until OOM",
    "NSInvalidArgumentException: -[__NSCFString objectForKey:]: unrecognized selector sent to instance 0x600000c2d2a0",
    "kotlin.UninitializedPropertyAccessException: lateinit property \"adapter\" has not been initialized",
    "System.ArgumentException: Value does not fall within the expected range, \"index\" = 12",
];

const FRAMES: [&str; 8] = [
    "at com.example.app.ui.MainActivity.onCreate(MainActivity.kt:{})",
    "at android.app.Activity.performCreate(Activity.java:{})",
    "at com.example.app.data.Repository$load$1.invokeSuspend(Repository.kt:{})",
    "at kotlinx.coroutines.DispatchedTask.run(DispatchedTask.kt:{})",
    "at java.util.HashMap.get(HashMap.java:{}), called from \"cache\"",
    "0x{} CoreFoundation  __exceptionPreprocess + 164",
    "at Example.App.Views.ListPage.OnAppearing() in ListPage.xaml.cs:line {}",
    "at android.os.Handler.dispatchMessage(Handler.java:{})",
];

fn stack_trace(random: &mut Random) -> String {
    let mut trace = String::from(EXCEPTIONS[random.below(EXCEPTIONS.len())]);
    for _ in 0..4 + random.below(12) {
        trace.push_str("\n\t");
        trace.push_str(&FRAMES[random.below(FRAMES.len())].replace("{}", &random.below(5000).to_string()));
    }
    trace
}

fn datetime(timestamp: i64) -> String {
    let (days, seconds) = (timestamp / 86_400, timestamp % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

fn batches() -> (SchemaRef, Vec<RecordBatch>) {
    let mut random = Random(42);
    let timestamps: Vec<i64> = (0..ROWS).map(|_| 1_714_521_600 + random.below(30 * 86_400) as i64).collect();
    let errors: Vec<String> = (0..ROWS).map(|_| stack_trace(&mut random)).collect();
    let datetimes: Vec<String> = timestamps.iter().map(|&t| datetime(t)).collect();
    let names = ["NullPointerException", "IllegalStateException", "OutOfMemoryError", "ANR", "custom_error"];
    let cities =
        [Some("Moscow"), Some("Saint Petersburg"), None, Some("Berlin"), Some("São Paulo"), Some("")];

    let schema = Arc::new(Schema::new(vec![
        Field::new("error", DataType::Utf8View, true),
        Field::new("error_datetime", DataType::Utf8View, true),
        Field::new("error_name", DataType::Utf8View, true),
        Field::new(
            "os_name",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new("error_timestamp", DataType::Int64, true),
        Field::new("service_device_id", DataType::UInt64, true),
        Field::new("city", DataType::Utf8View, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringViewArray::from_iter_values(&errors)),
        Arc::new(StringViewArray::from_iter_values(&datetimes)),
        Arc::new(StringViewArray::from_iter_values((0..ROWS).map(|_| names[random.below(names.len())]))),
        Arc::new(DictionaryArray::<Int32Type>::new(
            (0..ROWS).map(|_| random.below(3) as i32).collect(),
            Arc::new(StringArray::from(vec!["ios", "android", "windows"])),
        )),
        Arc::new(Int64Array::from(timestamps)),
        Arc::new(UInt64Array::from_iter_values((0..ROWS).map(|_| random.next() | (1 << 63)))),
        Arc::new(StringViewArray::from_iter((0..ROWS).map(|_| cities[random.below(cities.len())]))),
    ];
    let whole = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let batches = (0..ROWS).step_by(BATCH_ROWS).map(|start| whole.slice(start, BATCH_ROWS)).collect();
    (schema, batches)
}

fn encode<W: io::Write>(format: Format, writer: W, schema: &SchemaRef, batches: &[RecordBatch]) -> W {
    let mut encoder = Encoder::new(format, writer, schema, EncoderOptions::default()).unwrap();
    for batch in batches {
        encoder.write_batch(batch).unwrap();
    }
    encoder.finish().unwrap()
}

fn bench_csv(c: &mut Criterion, schema: &SchemaRef, batches: &[RecordBatch]) {
    let mut group = c.benchmark_group("csv");
    group.throughput(Throughput::Bytes(encode(Format::Csv, Vec::new(), schema, batches).len() as u64));
    group.bench_function("logs_format", |b| {
        b.iter(|| encode(Format::Csv, io::sink(), schema, black_box(batches)))
    });
    group.bench_function("arrow_csv_writer", |b| {
        b.iter(|| {
            let mut writer = arrow::csv::WriterBuilder::new().with_header(true).build(io::sink());
            for batch in black_box(batches) {
                writer.write(batch).unwrap();
            }
            writer.into_inner()
        })
    });
    group.finish();
}

fn bench_json(c: &mut Criterion, schema: &SchemaRef, batches: &[RecordBatch]) {
    let mut group = c.benchmark_group("json");
    group.throughput(Throughput::Bytes(encode(Format::Json, Vec::new(), schema, batches).len() as u64));
    group.bench_function("logs_format", |b| {
        b.iter(|| encode(Format::Json, io::sink(), schema, black_box(batches)))
    });
    group.bench_function("arrow_json_line_delimited", |b| {
        b.iter(|| {
            let mut writer = arrow::json::LineDelimitedWriter::new(io::sink());
            for batch in black_box(batches) {
                writer.write(batch).unwrap();
            }
            writer.finish().unwrap();
            writer.into_inner()
        })
    });
    group.bench_function("arrow_json_array", |b| {
        b.iter(|| {
            let mut writer = arrow::json::ArrayWriter::new(io::sink());
            for batch in black_box(batches) {
                writer.write(batch).unwrap();
            }
            writer.finish().unwrap();
            writer.into_inner()
        })
    });
    group.finish();
}

fn encoders(c: &mut Criterion) {
    let (schema, batches) = batches();
    bench_csv(c, &schema, &batches);
    bench_json(c, &schema, &batches);
}

criterion_group!(benches, encoders);
criterion_main!(benches);
