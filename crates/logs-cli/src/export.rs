//! `logs export`: one export to stdout or a file.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use logs_core::{
    Engine, EngineConfig, Error, ExportRequest, ExportStream, FieldAliases, PageMachinery, QueryPairs,
    RequestError,
};
use logs_format::{Encoder, EncoderOptions, Format, JsonIntegers};

use crate::Failure;
use crate::cursor::{CursorArgs, WithoutKeyFile, read_cursor_file, write_cursor_file};
use crate::preallocate::Preallocated;
use crate::store::S3Args;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The API path tail: `errors.csv?<query string>` or `errors.json?…` (a leading
    /// `/logs/v1/export/`, or a whole URL, is allowed). Or build the request with the flags below.
    #[arg(value_name = "TARGET", conflicts_with_all = ["app", "since", "until", "fields", "format", "filter", "limit", "bom", "dimension", "skip_unavailable_shards"])]
    target: Option<String>,

    /// The dataset (`<root>/application_id=<id>/date=<yyyy-mm-dd>/*.parquet`): a local folder,
    /// a file:// URL or an s3://bucket/prefix URL.
    #[arg(long, env = "LOGS_DATA", default_value = "testdata/dataset", value_name = "LOCATION")]
    data: String,
    #[command(flatten)]
    s3: S3Args,

    /// Write to this file (via a temporary file renamed only on success) instead of stdout;
    /// a device or a pipe (`/dev/null`, a FIFO) is written in place.
    #[arg(long, short)]
    output: Option<PathBuf>,

    /// Run the export without writing rows; print the plans, their metrics and the files
    /// read, pruned and skipped.
    #[arg(long)]
    explain: bool,

    /// `application_id`.
    #[arg(long)]
    app: Option<String>,
    /// `date_since`: `yyyy-mm-dd hh:mm:ss` or `yyyy-mm-dd`.
    #[arg(long)]
    since: Option<String>,
    /// `date_until`: `yyyy-mm-dd hh:mm:ss` or `yyyy-mm-dd`.
    #[arg(long)]
    until: Option<String>,
    /// `fields`: comma-separated field names.
    #[arg(long)]
    fields: Option<String>,
    /// Output format; without it, the extension of `--output` when it names one, else csv.
    #[arg(long, value_parser = ["csv", "json", "ndjson", "parquet", "arrow"])]
    format: Option<String>,
    /// An equality filter `FIELD=VALUE`; repeat for more.
    #[arg(long, value_name = "FIELD=VALUE")]
    filter: Vec<String>,
    /// `limit`: the maximum number of records.
    #[arg(long)]
    limit: Option<String>,
    /// `use_utf8_bom=true`.
    #[arg(long)]
    bom: bool,
    /// `date_dimension`: `default` or `receive`.
    #[arg(long)]
    dimension: Option<String>,
    /// `skip_unavailable_shards=true`: leave out unreadable files and report them.
    #[arg(long)]
    skip_unavailable_shards: bool,

    /// Refuse a `limit` above this, and apply it when none is given.
    #[arg(long, env = "LOGS_MAX_LIMIT")]
    max_limit: Option<u64>,
    /// Parallel streams per query (0: one per core).
    #[arg(long, env = "LOGS_TARGET_PARTITIONS", default_value_t = 0)]
    target_partitions: usize,
    /// Rows per Arrow batch: fewer hold less memory (`logs serve` uses 2048).
    #[arg(long, env = "LOGS_BATCH_SIZE", default_value_t = EngineConfig::default().batch_size,
          value_parser = batch_size_parser())]
    batch_size: usize,

    #[command(flatten)]
    names: NamingArgs,

    #[command(flatten)]
    privacy: crate::privacy::PrivacyArgs,
    /// Export under this policy of --field-policies (default: the file's `default`), as a
    /// token of the service with it would: for preparing a dataset to hand over.
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,

    /// Continue the cursor chain whose cursor FILE holds, or start one (`--since` on) when
    /// there is no FILE; FILE is replaced with the next cursor only once the export is
    /// complete (never with `--explain`).
    #[arg(long, value_name = "FILE")]
    cursor_file: Option<PathBuf>,
    #[command(flatten)]
    cursor: CursorArgs,
}

/// How names and values are written, shared by `export` and `serve`.
#[derive(Debug, Args)]
pub(crate) struct NamingArgs {
    /// A TOML file of other names for fields (`[aliases]`) and of fields the dataset does not
    /// hold (`[absent]`), e.g. examples/original-api-aliases.toml for clients of the original API.
    #[arg(long, env = "LOGS_FIELD_ALIASES", value_name = "FILE")]
    pub(crate) field_aliases: Option<PathBuf>,
    /// How JSON writes integer fields: `string` (quoted, as the original API does: exact in
    /// readers that parse numbers as doubles, like JavaScript) or `number`.
    #[arg(long, env = "LOGS_JSON_INTEGERS", default_value_t = JsonIntegers::default())]
    pub(crate) json_integers: JsonIntegers,
}

impl NamingArgs {
    /// The aliases of `--field-aliases`: none without it. A file that cannot be read is a
    /// failure (exit 1); one that does not say what it should, bad usage (exit 2).
    pub(crate) fn aliases(&self) -> Result<FieldAliases, Failure> {
        let Some(path) = &self.field_aliases else {
            return Ok(FieldAliases::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the field aliases (--field-aliases {})", path.display()))?;
        FieldAliases::from_toml(&text)
            .map_err(|e| Failure::Usage(format!("--field-aliases {}: {e}", path.display())))
    }
}

/// `--batch-size` of `export` and `serve`: 1 to 1 Mi rows, so that a typo cannot ask the
/// engine for huge buffers.
pub(crate) fn batch_size_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=1 << 20)
}

/// The page tricks to play, from the hidden variable `LOGS_PAGE_MACHINERY` (`on`, `off`, or a
/// list of tricks: see `PageMachinery`), for benchmarks and tests that compare them.
fn page_machinery() -> Result<PageMachinery, Failure> {
    match std::env::var("LOGS_PAGE_MACHINERY") {
        Ok(value) => value.parse().map_err(|e| Failure::Usage(format!("LOGS_PAGE_MACHINERY: {e}"))),
        Err(_) => Ok(PageMachinery::ON),
    }
}

pub fn run(args: ExportArgs) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(run_export(args));
    // The process ends next: shutting the runtime down would only join idle threads.
    std::mem::forget(runtime);
    result
}

async fn run_export(args: ExportArgs) -> Result<(), Failure> {
    let (format, pairs) = match &args.target {
        Some(target) => parse_target(target)?,
        None => request_from_flags(&args)?,
    };
    check_output_extension(format, args.output.as_deref())?;
    let pairs = match &args.cursor_file {
        None => pairs,
        Some(_) if pairs.get("cursor").is_some() => {
            return Err(Failure::Usage("give the cursor either in the request or with --cursor-file".into()));
        }
        Some(path) => {
            let cursor = read_cursor_file(path)?;
            let all = pairs.iter().chain([("cursor", cursor.as_str())]);
            QueryPairs::from_pairs(all).map_err(usage)?
        }
    };
    let config = EngineConfig {
        max_limit: args.max_limit,
        target_partitions: args.target_partitions,
        // One export per process: footers need not outlive it, and a large export's would
        // otherwise fill DataFusion's default 50 MiB.
        metadata_cache_limit: 32 << 20,
        batch_size: args.batch_size,
        aliases: args.names.aliases()?,
        s3: args.s3.options(),
        page_machinery: page_machinery()?,
        cursor: args.cursor.settings(WithoutKeyFile::Public)?,
        ..EngineConfig::default()
    };
    let engine = Engine::open(&args.data, config).map_err(|e| match e {
        Error::Config { .. } => Failure::Usage(e.to_string()),
        e => Failure::Other(anyhow::Error::new(e).context("cannot open the dataset (--data)")),
    })?;
    let privacy = args.privacy.privacy(args.policy.as_deref())?;
    let request = ExportRequest::from_pairs_under(&pairs, engine.policy(), &privacy).map_err(usage)?;
    let mut export = engine.export(&request).await.map_err(engine_failure)?;
    for skipped in &export.selection().skipped {
        eprintln!("warning: skipped unreadable file {}: {}", skipped.name, skipped.reason);
    }

    if args.explain {
        let mut rows = 0;
        while let Some(batch) = export.next().await {
            rows += batch.map_err(engine_failure)?.num_rows();
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}Rows exported: {rows}", export.explain())?;
        return Ok(());
    }

    let options = EncoderOptions::default()
        .with_bom(request.use_utf8_bom())
        .with_json_integers(args.names.json_integers);
    match &args.output {
        None => {
            drop(encode(&mut export, format, std::io::stdout().lock(), options).await?);
        }
        Some(path) if !is_file_or_missing(path) => {
            // A device, a pipe or a socket (`/dev/null`, a FIFO a reader waits on): written in
            // place, as a shell's `>` would. Renaming a file over it would replace the device.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("cannot open {} for writing", path.display()))?;
            drop(encode(&mut export, format, file, options).await?);
        }
        Some(path) => {
            let file = Preallocated::new(temporary_file_beside(path)?);
            // Renamed only once complete: no reader ever sees a partial export under `path`.
            // No fsync: durability across a power loss is left to the filesystem, as other
            // export tools do; forcing gigabytes to disk would double the export's time.
            let file = encode(&mut export, format, file, options).await?;
            let file = file.finish().with_context(|| format!("cannot write {}", path.display()))?;
            file.persist(path).with_context(|| format!("cannot rename the output to {}", path.display()))?;
        }
    }
    if let (Some(path), Some(cursor)) = (&args.cursor_file, export.next_cursor()) {
        write_cursor_file(path, cursor)?;
    }
    if !export.selection().skipped.is_empty() {
        eprintln!("warning: the export left out {} unreadable files", export.selection().skipped.len());
    }
    // The output is complete and flushed, and the process ends next: freeing the plan and the
    // footers of every file read (page indexes included) would only cost time (callgrind: 3%
    // of a point export's instructions).
    std::mem::forget(export);
    std::mem::forget(engine);
    Ok(())
}

/// Streams every batch into `writer`. On failure the output is incomplete, and the error says
/// so.
async fn encode<W: Write>(
    export: &mut ExportStream,
    format: Format,
    writer: W,
    options: EncoderOptions,
) -> Result<W, Failure> {
    let mut encoder = Encoder::new(format, writer, &export.schema(), options)?;
    let progress = Progress::new(export.progress().1);
    while let Some(batch) = export.next().await {
        let batch = match batch {
            Ok(batch) => batch,
            Err(e) => {
                let rows = encoder.rows_written();
                // What reached the output ends so that no reader takes it for complete.
                let _ = encoder.abandon();
                let message = format!("the export failed after {rows} rows; the output is incomplete");
                return Err(Failure::Other(anyhow::Error::new(e).context(message)));
            }
        };
        encoder.write_batch(&batch)?;
        progress.update(export.progress().0, encoder.rows_written(), encoder.bytes_written());
    }
    progress.finish(encoder.rows_written(), encoder.bytes_written());
    Ok(encoder.finish()?)
}

/// Whether `path` (followed if a symbolic link) is an ordinary file, a directory (the rename
/// fails and says so) or nothing yet: the outputs written beside it and renamed over it.
fn is_file_or_missing(path: &Path) -> bool {
    std::fs::metadata(path).map_or(true, |m| m.is_file() || m.is_dir())
}

fn temporary_file_beside(path: &Path) -> Result<tempfile::NamedTempFile, Failure> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    // The finished file gets the usual permissions of a new file, not the temporary file's 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    builder
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))
        .map_err(Failure::Other)
}

fn usage(e: RequestError) -> Failure {
    Failure::Usage(e.to_string())
}

fn engine_failure(e: Error) -> Failure {
    match e {
        Error::InvalidRequest(e) => usage(e),
        e => Failure::Other(e.into()),
    }
}

/// The format a file's extension names (`x.parquet`: Parquet), if any.
fn format_of_path(path: &Path) -> Option<Format> {
    path.extension()?.to_str()?.to_ascii_lowercase().parse().ok()
}

/// Refuses an output file whose extension names another format than the export's (CSV written
/// to `x.parquet`): a reader would take it for what its name says.
fn check_output_extension(format: Format, output: Option<&Path>) -> Result<(), Failure> {
    match output.and_then(|path| Some((path, format_of_path(path)?))) {
        Some((path, named)) if named != format => Err(Failure::Usage(format!(
            "--output {} names a {named} file but the export is {format}: give --format {named}, or a \
             target `errors.{named}?…`, or another file name",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Splits `errors.csv?query` (optionally behind `/logs/v1/export/` or a whole URL) into the
/// format and the decoded query.
pub fn parse_target(target: &str) -> Result<(Format, QueryPairs), Failure> {
    let without_origin = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
        None => target,
    };
    let (path, query) = without_origin.split_once('?').unwrap_or((without_origin, ""));
    let path = path.trim_start_matches('/');
    let name = path.strip_prefix("logs/v1/export/").unwrap_or(path);
    let Some(format) = name.strip_prefix("errors.").and_then(|extension| extension.parse::<Format>().ok())
    else {
        return Err(Failure::Usage(format!(
            "TARGET `{target}` must be `errors.<format>?<query>`, the format one of {}, optionally after \
             `/logs/v1/export/`",
            Format::names()
        )));
    };
    Ok((format, QueryPairs::parse(query).map_err(usage)?))
}

fn request_from_flags(args: &ExportArgs) -> Result<(Format, QueryPairs), Failure> {
    let format = match (args.format.as_deref(), args.output.as_deref().and_then(format_of_path)) {
        (Some(name), _) => name.parse().map_err(|e| Failure::Usage(format!("--format: {e}")))?,
        (None, Some(format)) => format,
        (None, None) => Format::Csv,
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut push = |name: &str, value: &Option<String>| {
        if let Some(value) = value {
            pairs.push((name.to_owned(), value.clone()));
        }
    };
    push("application_id", &args.app);
    push("date_since", &args.since);
    push("date_until", &args.until);
    push("fields", &args.fields);
    push("limit", &args.limit);
    push("date_dimension", &args.dimension);
    if args.bom {
        pairs.push(("use_utf8_bom".into(), "true".into()));
    }
    if args.skip_unavailable_shards {
        pairs.push(("skip_unavailable_shards".into(), "true".into()));
    }
    for filter in &args.filter {
        let (name, value) = filter.split_once('=').ok_or_else(|| {
            Failure::Usage(format!("--filter `{filter}` must be FIELD=VALUE, for example os_name=ios"))
        })?;
        pairs.push((name.to_owned(), value.to_owned()));
    }
    if pairs.is_empty() {
        return Err(Failure::Usage(
            "give the request as TARGET (`'errors.csv?application_id=…'`) or with --app, --since, --until \
             and --fields"
                .into(),
        ));
    }
    Ok((format, QueryPairs::from_pairs(pairs).map_err(usage)?))
}

/// A progress bar on stderr, only when stderr is a terminal: the share of the selected files'
/// bytes the scan has covered (read, or passed over as pruned), with the time left, and the
/// rows and bytes written so far.
struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = if std::io::stderr().is_terminal() {
            let bar =
                ProgressBar::with_draw_target(Some(total.max(1)), ProgressDrawTarget::stderr_with_hz(4));
            let style = ProgressStyle::with_template("{bar:30} {percent:>3}% {msg}, {eta} left")
                .expect("a valid template")
                .progress_chars("=> ");
            bar.set_style(style);
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress { bar, started: Instant::now() }
    }

    fn update(&self, covered: u64, rows: u64, bytes: u64) {
        if self.bar.is_hidden() {
            return;
        }
        self.bar.set_position(covered);
        let mib = bytes as f64 / (1024.0 * 1024.0);
        let rate = mib / self.started.elapsed().as_secs_f64().max(1e-3);
        self.bar.set_message(format!("{rows} rows, {mib:.1} MiB, {rate:.1} MiB/s"));
    }

    fn finish(&self, rows: u64, bytes: u64) {
        if !self.bar.is_hidden() {
            self.update(self.bar.length().unwrap_or(0), rows, bytes);
            self.bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_in_every_accepted_form() {
        for target in [
            "errors.csv?application_id=1",
            "/logs/v1/export/errors.csv?application_id=1",
            "logs/v1/export/errors.csv?application_id=1",
            "http://localhost:8080/logs/v1/export/errors.csv?application_id=1",
        ] {
            let (format, pairs) = parse_target(target).unwrap_or_else(|_| panic!("{target}"));
            assert_eq!(format, Format::Csv);
            assert_eq!(pairs.get("application_id"), Some("1"));
        }
        for format in Format::ALL {
            assert_eq!(parse_target(&format!("errors.{format}?a=1")).unwrap().0, format);
        }
        for bad in [
            "errors.xml?a=1",
            "errors.PARQUET",
            "errors.?a=1",
            "export.csv",
            "/logs/v2/export/errors.csv",
            "",
        ] {
            assert!(matches!(parse_target(bad), Err(Failure::Usage(_))), "{bad}");
        }
    }

    #[test]
    fn the_output_files_extension_gives_the_format_or_must_agree_with_it() {
        let args = |extra: &[&str]| {
            let mut argv = vec!["export", "--app", "1001", "--since", "2026-10-01", "--until", "2026-10-01"];
            argv.extend_from_slice(&["--fields", "error_id"]);
            argv.extend_from_slice(extra);
            #[derive(clap::Parser)]
            struct Cli {
                #[command(flatten)]
                export: ExportArgs,
            }
            <Cli as clap::Parser>::try_parse_from(argv).unwrap().export
        };
        let format_of = |extra: &[&str]| request_from_flags(&args(extra)).unwrap().0;
        assert_eq!(format_of(&[]), Format::Csv);
        assert_eq!(format_of(&["-o", "week.parquet"]), Format::Parquet);
        assert_eq!(format_of(&["-o", "dir/week.ARROW"]), Format::Arrow);
        assert_eq!(format_of(&["-o", "week.ndjson"]), Format::Ndjson);
        assert_eq!(format_of(&["-o", "week.txt"]), Format::Csv);
        assert_eq!(format_of(&["--format", "json", "-o", "week.txt"]), Format::Json);
        assert_eq!(format_of(&["--format", "arrow"]), Format::Arrow);

        assert!(check_output_extension(Format::Parquet, Some(Path::new("week.parquet"))).is_ok());
        assert!(check_output_extension(Format::Csv, Some(Path::new("week.txt"))).is_ok());
        assert!(check_output_extension(Format::Csv, None).is_ok());
        let Err(Failure::Usage(message)) =
            check_output_extension(Format::Csv, Some(Path::new("week.parquet")))
        else {
            panic!("CSV into a .parquet file is refused");
        };
        assert!(
            message.contains("--output week.parquet names a parquet file but the export is csv"),
            "{message}"
        );
    }
}
