//! Generates the rows of one part of a date folder and writes them as Parquet files.
//!
//! Rows are first drawn as small `RowSeed`s (times, device, error group, a variation seed),
//! sorted, and only then turned into values, one batch at a time, straight into Arrow
//! builders: nothing is allocated per row.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Builder, RecordBatch, StringBuilder, UInt64Builder};
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::app::AppModel;
use crate::crash::{write_error, write_error_json};
use crate::options::{Codec, GenerateOptions, SortKey};
use crate::plan::Part;
use crate::values::{SplitMix, mix, push_datetime, push_ip, push_uuid};
use crate::{GenerateError, record_batch_schema};

/// Columns with a Bloom filter: the high-cardinality ones that are filtered by equality.
const BLOOM_FILTER_COLUMNS: [&str; 8] = [
    "error_id",
    "service_device_id",
    "profile_id",
    "google_aid",
    "ios_ifa",
    "ios_ifv",
    "windows_aid",
    "device_ipv6",
];
/// The long texts: most of a file's bytes.
const LONG_TEXT_COLUMNS: [&str; 2] = ["error", "error_json"];
/// The columns that `mixed` compresses with LZ4: those it shrinks by a quarter or more (the
/// time columns and texts by 45-70%, `device_ipv6`, `ios_ifa` and `profile_id` by 25-40%).
/// The others are written uncompressed: dictionary indices and random ids are incompressible
/// (LZ4 kept 86-103% of their bytes on 5 M generated rows), so compressing them only costs
/// every reader a decompression and a copy of each page it reads.
const LZ4_COLUMNS: [&str; 7] = [
    "error_timestamp",
    "error_receive_timestamp",
    "error_datetime",
    "error_receive_datetime",
    "device_ipv6",
    "ios_ifa",
    "profile_id",
];
/// The columns with page statistics (a column index), besides the sort key: the time ranges
/// of exports. Every other column has statistics per column chunk only. With rows sorted by
/// `error_id`, the pages of any other column each hold a mix of its values that spans almost
/// its whole range (`android`..`ios`, every city), so page statistics prune nothing for them,
/// while every reader that opens a file parses them (strings: two allocations per page).
const PAGE_STATISTICS_COLUMNS: [&str; 2] = ["error_timestamp", "error_receive_timestamp"];
/// Columns written without a dictionary: long texts and values that are almost unique within
/// a row group. Their dictionary pages would hold nearly every value (up to 900 KB per column
/// chunk), and a reader must decompress the whole dictionary page before it can decode even
/// one row of the chunk, so a point export would read them all (measured: 135 MB read for a
/// 3 600-row export of 4 M rows). Plain pages are read only where rows are selected.
const PLAIN_COLUMNS: [&str; 12] = [
    "error",
    "error_json",
    "error_timestamp",
    "error_receive_timestamp",
    "error_datetime",
    "error_receive_datetime",
    "service_device_id",
    "profile_id",
    "google_aid",
    "ios_ifa",
    "ios_ifv",
    "device_ipv6",
];
/// False-positive probability of the Bloom filters. The filters are sized for a whole row
/// group of distinct values, then folded down by the writer to the values actually seen.
const BLOOM_FILTER_FPP: f64 = 0.01;
/// At most this many rows per data page (the writer checks every 1 024 rows). Small pages let
/// the page index narrow an equality filter down to a few thousand rows: with the rows sorted
/// by `error_id`, an export of one error decompresses only the pages around its rows, in
/// every column (measured: 20 000-row `error_id` pages selected 830 K rows of 4 M for a
/// 3 600-row point export; 1 024-row pages select about 60 K).
const DATA_PAGE_ROW_COUNT_LIMIT: usize = 1024;
const DATA_PAGE_SIZE_LIMIT: usize = 128 << 10;
/// Rows per record batch handed to the writer, which cuts the row groups itself; small
/// batches keep the builders' memory small (~10 MB).
const BATCH_ROWS: usize = 8192;

/// Share of rows per UTC hour of the day (more errors in the daytime of the big markets).
const HOUR_WEIGHTS: [u32; 24] =
    [30, 24, 20, 18, 18, 22, 30, 40, 50, 56, 60, 62, 63, 63, 64, 66, 70, 74, 78, 80, 76, 66, 52, 40];

/// Writer properties of a file whose row groups have at most `max_rows` rows.
pub(crate) fn writer_properties(options: &GenerateOptions, max_rows: usize) -> WriterProperties {
    let zstd = |level| Compression::ZSTD(ZstdLevel::try_new(level).unwrap_or_default());
    let compression = match options.compression {
        Codec::Uncompressed => Compression::UNCOMPRESSED,
        Codec::Snappy => Compression::SNAPPY,
        Codec::Lz4 => Compression::LZ4_RAW,
        Codec::Mixed => Compression::UNCOMPRESSED,
        Codec::Zstd(level) => zstd(level),
    };
    let sorting = |names: &[&str]| {
        let schema = record_batch_schema();
        let columns = names.iter().map(|name| SortingColumn {
            column_idx: schema.index_of(name).expect("a file column") as i32,
            descending: false,
            nulls_first: false,
        });
        Some(columns.collect())
    };
    let sort_key: &[&str] = match options.sort_by {
        SortKey::ErrorTimestamp => &["error_timestamp"],
        SortKey::ErrorReceiveTimestamp => &["error_receive_timestamp", "error_timestamp"],
        SortKey::ErrorId => &["error_id", "error_timestamp"],
        SortKey::ServiceDeviceId => &["service_device_id", "error_timestamp"],
        SortKey::Unsorted => &[],
    };
    let sorting_columns = if sort_key.is_empty() { None } else { sorting(sort_key) };
    let mut builder = WriterProperties::builder()
        .set_compression(compression)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_max_row_group_row_count(Some(options.row_group_rows))
        .set_data_page_row_count_limit(DATA_PAGE_ROW_COUNT_LIMIT)
        .set_data_page_size_limit(DATA_PAGE_SIZE_LIMIT)
        .set_sorting_columns(sorting_columns);
    if options.compression == Codec::Mixed {
        for column in LONG_TEXT_COLUMNS {
            builder = builder.set_column_compression(ColumnPath::from(column), zstd(1));
        }
        for column in LZ4_COLUMNS {
            builder = builder.set_column_compression(ColumnPath::from(column), Compression::LZ4_RAW);
        }
    }
    for column in PAGE_STATISTICS_COLUMNS.iter().chain(sort_key) {
        builder = builder.set_column_statistics_enabled(ColumnPath::from(*column), EnabledStatistics::Page);
    }
    for column in PLAIN_COLUMNS {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(column), false);
    }
    for column in BLOOM_FILTER_COLUMNS {
        builder = builder
            .set_column_bloom_filter_enabled(ColumnPath::from(column), true)
            .set_column_bloom_filter_fpp(ColumnPath::from(column), BLOOM_FILTER_FPP)
            .set_column_bloom_filter_max_ndv(ColumnPath::from(column), max_rows.max(1) as u64);
    }
    builder.build()
}

/// What a written part amounts to.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Written {
    pub rows: u64,
    pub files: usize,
    pub bytes: u64,
}

/// Everything the workers share.
pub(crate) struct Job<'a> {
    pub options: &'a GenerateOptions,
    pub apps: &'a [AppModel],
    pub schema: SchemaRef,
    /// Called with the number of rows of each batch written.
    pub on_rows: &'a (dyn Fn(u64) + Sync),
}

/// One row before its values exist.
#[derive(Debug, Clone, Copy)]
struct RowSeed {
    error_ts: i64,
    receive_ts: i64,
    device: u64,
    group: u32,
    /// Seed of everything that varies per record.
    variation: u64,
}

/// Generates and writes the rows of `part`: `part-<n>.parquet` and, if some rows arrived
/// hours or days late, `late-<n>.parquet`.
pub(crate) fn write_part(job: &Job, part: &Part) -> Result<Written, GenerateError> {
    let options = job.options;
    let app = &job.apps[part.app];
    let date = options.start + chrono::Days::new(u64::from(part.day));
    let day_start = date.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp();
    let (mut on_time, mut late) = draw_rows(options, app, part, day_start);
    sort_rows(&mut on_time, options.sort_by, app);
    sort_rows(&mut late, options.sort_by, app);

    let dir = options.out.join(format!("application_id={}", app.id)).join(format!("date={date}"));
    fs::create_dir_all(&dir).map_err(|source| GenerateError::Io { path: dir.clone(), source })?;
    let mut written = Written::default();
    for (prefix, rows) in [("part", &on_time), ("late", &late)] {
        if !rows.is_empty() {
            let path = dir.join(format!("{prefix}-{:05}.parquet", part.file));
            written.bytes += write_file(job, app, &path, rows)?;
            written.rows += rows.len() as u64;
            written.files += 1;
        }
    }
    Ok(written)
}

/// Draws the rows of a part, split into those received on time and those received late.
fn draw_rows(
    options: &GenerateOptions,
    app: &AppModel,
    part: &Part,
    day_start: i64,
) -> (Vec<RowSeed>, Vec<RowSeed>) {
    let day_file = (u64::from(part.day) << 32) | u64::from(part.file);
    let seed = mix(options.seed ^ mix(app.id as u64 ^ mix(day_file + 0xda7e)));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let hour_total: u32 = HOUR_WEIGHTS.iter().sum();
    let capacity = part.rows as usize;
    let mut on_time = Vec::with_capacity(capacity - (capacity as f64 * options.late_fraction) as usize);
    let mut late = Vec::with_capacity((capacity as f64 * options.late_fraction * 1.2) as usize + 16);
    for _ in 0..part.rows {
        let (mut hour, mut x) = (0, rng.random_range(0..hour_total));
        while x >= HOUR_WEIGHTS[hour] {
            x -= HOUR_WEIGHTS[hour];
            hour += 1;
        }
        let error_ts = day_start + hour as i64 * 3600 + rng.random_range(0..3600);
        let device = app.pick_device(rng.random());
        let group = app.pick_group(app.population.os(device), rng.random()) as u32;
        let is_late = rng.random_bool(options.late_fraction);
        let delay = receive_delay(&mut rng, is_late);
        let row = RowSeed { error_ts, receive_ts: error_ts + delay, device, group, variation: rng.random() };
        if is_late { late.push(row) } else { on_time.push(row) }
    }
    (on_time, late)
}

/// Seconds between the error and its receipt: mostly seconds to minutes; for late rows one
/// hour to three days; rarely negative (device clock ahead of the server).
fn receive_delay(rng: &mut ChaCha8Rng, late: bool) -> i64 {
    if late {
        return skewed_between(rng, 3600, 3 * 86_400);
    }
    let u: f64 = rng.random();
    if u < 0.001 {
        -skewed_between(rng, 1, 300)
    } else if u < 0.70 {
        skewed_between(rng, 0, 15)
    } else if u < 0.95 {
        skewed_between(rng, 15, 600)
    } else {
        skewed_between(rng, 600, 3599)
    }
}

/// `lo + (hi - lo) * u^3`: mostly near `lo`, with a long tail towards `hi`.
fn skewed_between(rng: &mut ChaCha8Rng, lo: i64, hi: i64) -> i64 {
    let u: f64 = rng.random();
    lo + ((hi - lo) as f64 * u * u * u) as i64
}

fn sort_rows(rows: &mut [RowSeed], key: SortKey, app: &AppModel) {
    match key {
        SortKey::ErrorTimestamp => rows.sort_by_key(|r| r.error_ts),
        SortKey::ErrorReceiveTimestamp => rows.sort_by_key(|r| (r.receive_ts, r.error_ts)),
        SortKey::ErrorId => rows.sort_by(|a, b| {
            let id = |r: &RowSeed| app.groups[r.group as usize].id.as_str();
            id(a).cmp(id(b)).then(a.error_ts.cmp(&b.error_ts))
        }),
        SortKey::ServiceDeviceId => {
            rows.sort_by_cached_key(|r| (app.population.service_device_id(r.device), r.error_ts))
        }
        SortKey::Unsorted => {}
    }
}

/// Writes `rows` to `path` through a temporary file, returning the file size.
fn write_file(job: &Job, app: &AppModel, path: &Path, rows: &[RowSeed]) -> Result<u64, GenerateError> {
    let tmp = PathBuf::from(format!("{}.tmp", path.display()));
    let result = write_rows(job, app, &tmp, rows).and_then(|()| {
        fs::rename(&tmp, path).map_err(|source| GenerateError::Io { path: path.to_owned(), source })?;
        let meta =
            fs::metadata(path).map_err(|source| GenerateError::Io { path: path.to_owned(), source })?;
        Ok(meta.len())
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_rows(job: &Job, app: &AppModel, tmp: &Path, rows: &[RowSeed]) -> Result<(), GenerateError> {
    let io = |source| GenerateError::Io { path: tmp.to_owned(), source };
    let file = File::create(tmp).map_err(io)?;
    // Bloom filters are sized for the largest row group, then folded to the values seen.
    let properties = writer_properties(job.options, job.options.row_group_rows.min(rows.len()));
    let mut writer = ArrowWriter::try_new(file, job.schema.clone(), Some(properties))?;
    let mut buf = String::with_capacity(4096);
    for chunk in rows.chunks(BATCH_ROWS) {
        let mut columns = Columns::with_capacity(chunk.len());
        for row in chunk {
            columns.push(app, row, &mut buf);
        }
        let batch = columns.finish(&job.schema)?;
        // Hand the writer at most one row group at a time: it splits a larger batch by
        // recursing once per row group, which overflows the stack for tiny row groups.
        let step = job.options.row_group_rows.max(1);
        for offset in (0..batch.num_rows()).step_by(step) {
            writer.write(&batch.slice(offset, step.min(batch.num_rows() - offset)))?;
        }
        (job.on_rows)(chunk.len() as u64);
    }
    // `into_inner` writes the footer (and remaining Bloom filters) before returning the file.
    let file = writer.into_inner()?;
    file.sync_all().map_err(io)
}

/// Arrow builders for the 29 file columns.
struct Columns {
    error: StringBuilder,
    error_datetime: StringBuilder,
    error_id: StringBuilder,
    error_json: StringBuilder,
    error_name: StringBuilder,
    error_receive_datetime: StringBuilder,
    error_receive_timestamp: Int64Builder,
    error_timestamp: Int64Builder,
    service_device_id: UInt64Builder,
    city: StringBuilder,
    connection_type: StringBuilder,
    country_iso_code: StringBuilder,
    device_ipv6: StringBuilder,
    device_locale: StringBuilder,
    device_manufacturer: StringBuilder,
    device_model: StringBuilder,
    device_type: StringBuilder,
    google_aid: StringBuilder,
    ios_ifa: StringBuilder,
    ios_ifv: StringBuilder,
    mcc: Int64Builder,
    mnc: Int64Builder,
    operator_name: StringBuilder,
    os_name: StringBuilder,
    os_version: StringBuilder,
    profile_id: StringBuilder,
    windows_aid: StringBuilder,
    app_package_name: StringBuilder,
    app_version_name: StringBuilder,
}

impl Columns {
    fn with_capacity(n: usize) -> Self {
        let text = |bytes_per_row: usize| StringBuilder::with_capacity(n, n * bytes_per_row);
        Columns {
            error: text(1024),
            error_datetime: text(19),
            error_id: text(32),
            error_json: text(320),
            error_name: text(32),
            error_receive_datetime: text(19),
            error_receive_timestamp: Int64Builder::with_capacity(n),
            error_timestamp: Int64Builder::with_capacity(n),
            service_device_id: UInt64Builder::with_capacity(n),
            city: text(10),
            connection_type: text(4),
            country_iso_code: text(2),
            device_ipv6: text(32),
            device_locale: text(5),
            device_manufacturer: text(8),
            device_model: text(12),
            device_type: text(6),
            google_aid: text(24),
            ios_ifa: text(12),
            ios_ifv: text(12),
            mcc: Int64Builder::with_capacity(n),
            mnc: Int64Builder::with_capacity(n),
            operator_name: text(8),
            os_name: text(7),
            os_version: text(4),
            profile_id: text(10),
            windows_aid: text(1),
            app_package_name: text(20),
            app_version_name: text(6),
        }
    }

    fn push(&mut self, app: &AppModel, row: &RowSeed, buf: &mut String) {
        let device = app.population.device(row.device);
        let group = &app.groups[row.group as usize];
        let mut rng = SplitMix::new(row.variation, 0);
        let day = row.error_ts.div_euclid(86_400) as u32;
        // Devices update the app now and then: the version is fixed per device and week.
        let version = app.pick_version(SplitMix::new(device.key, u64::from(day / 7)).unit());

        push_text(&mut self.error, buf, |b| write_error(b, &app.names, group, version, &mut rng));
        push_text(&mut self.error_datetime, buf, |b| push_datetime(b, row.error_ts));
        self.error_id.append_value(&group.id);
        push_text(&mut self.error_json, buf, |b| write_error_json(b, &app.names, group, &mut rng));
        self.error_name.append_value(&group.name);
        push_text(&mut self.error_receive_datetime, buf, |b| push_datetime(b, row.receive_ts));
        self.error_receive_timestamp.append_value(row.receive_ts);
        self.error_timestamp.append_value(row.error_ts);
        self.service_device_id.append_value(device.service_device_id);
        self.city.append_option(device.city);
        let connection = match (device.operator.is_some(), rng.below(100)) {
            (true, 0..55) | (false, 0..96) => "wifi",
            (true, 55..97) => "cell",
            _ => "unknown",
        };
        self.connection_type.append_value(connection);
        self.country_iso_code.append_value(device.country.iso);
        push_text(&mut self.device_ipv6, buf, |b| push_ip(b, &device, day, connection == "cell"));
        self.device_locale.append_value(device.locale);
        self.device_manufacturer.append_value(device.manufacturer);
        self.device_model.append_value(device.model);
        self.device_type.append_value(device.device_type);
        push_uuid_option(&mut self.google_aid, buf, device.google_aid, false);
        push_uuid_option(&mut self.ios_ifa, buf, device.ios_ifa, true);
        push_uuid_option(&mut self.ios_ifv, buf, device.ios_ifv, true);
        self.mcc.append_option(device.operator.map(|o| o.1));
        self.mnc.append_option(device.operator.map(|o| o.2));
        self.operator_name.append_option(device.operator.map(|o| o.0));
        self.os_name.append_value(device.os.name());
        self.os_version.append_value(device.os_version);
        match device.profile_id {
            Some(profile) => push_text(&mut self.profile_id, buf, |b| app.push_profile_id(b, profile)),
            None => self.profile_id.append_null(),
        }
        push_uuid_option(&mut self.windows_aid, buf, device.windows_aid, false);
        self.app_package_name.append_value(app.package_name(device.os));
        self.app_version_name.append_value(&app.versions[version]);
    }

    fn finish(mut self, schema: &SchemaRef) -> Result<RecordBatch, GenerateError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.error.finish()),
            Arc::new(self.error_datetime.finish()),
            Arc::new(self.error_id.finish()),
            Arc::new(self.error_json.finish()),
            Arc::new(self.error_name.finish()),
            Arc::new(self.error_receive_datetime.finish()),
            Arc::new(self.error_receive_timestamp.finish()),
            Arc::new(self.error_timestamp.finish()),
            Arc::new(self.service_device_id.finish()),
            Arc::new(self.city.finish()),
            Arc::new(self.connection_type.finish()),
            Arc::new(self.country_iso_code.finish()),
            Arc::new(self.device_ipv6.finish()),
            Arc::new(self.device_locale.finish()),
            Arc::new(self.device_manufacturer.finish()),
            Arc::new(self.device_model.finish()),
            Arc::new(self.device_type.finish()),
            Arc::new(self.google_aid.finish()),
            Arc::new(self.ios_ifa.finish()),
            Arc::new(self.ios_ifv.finish()),
            Arc::new(self.mcc.finish()),
            Arc::new(self.mnc.finish()),
            Arc::new(self.operator_name.finish()),
            Arc::new(self.os_name.finish()),
            Arc::new(self.os_version.finish()),
            Arc::new(self.profile_id.finish()),
            Arc::new(self.windows_aid.finish()),
            Arc::new(self.app_package_name.finish()),
            Arc::new(self.app_version_name.finish()),
        ];
        Ok(RecordBatch::try_new(schema.clone(), columns)?)
    }
}

/// Appends the text `write` produces, through the reused `buf`.
fn push_text(builder: &mut StringBuilder, buf: &mut String, write: impl FnOnce(&mut String)) {
    buf.clear();
    write(buf);
    builder.append_value(&*buf);
}

fn push_uuid_option(builder: &mut StringBuilder, buf: &mut String, value: Option<u128>, upper: bool) {
    match value {
        Some(v) => {
            buf.clear();
            push_uuid(buf, v, upper);
            builder.append_value(&*buf);
        }
        None => builder.append_null(),
    }
}
