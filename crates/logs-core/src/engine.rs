//! The engine: opens a dataset, turns validated requests into running queries, and hands
//! back a stream of Arrow batches.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::config::TableParquetOptions;
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::display::DisplayableExecutionPlan;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::Stream;

use crate::aliases::FieldAliases;
use crate::cursor::{self, Call, CursorSettings, StepSummary};
use crate::error::{Error, RequestError, Result};
use crate::plan::{RangeTest, build_plan};
use crate::request::{ExportRequest, RequestPolicy};
use crate::schema::{file_schema, file_schema_copying_texts};
use crate::storage::{
    DatasetLocation, FileSelection, KeptForScan, PageMachinery, RequestCounts, Requests, S3Options,
    ScanProgress, ScanSettings, Scope, Storage,
};

/// The fewest parallel streams of a query over an object store when the configuration leaves
/// it to the engine.
const REMOTE_MIN_PARTITIONS: usize = 4;

/// Settings of an [`Engine`]. `Default` gives settings fit for a laptop and for a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// Parallel streams a query may use; 0 means one per CPU core over a local folder, and
    /// twice that (at least 4) over an object store, whose scans mostly wait for responses.
    pub target_partitions: usize,
    /// Rows per Arrow batch. Each running export holds a few batches: a service running
    /// several exports at once does better with fewer rows (`logs_server::SERVICE_BATCH_SIZE`,
    /// 2 048, halved `logs serve`'s peak with 8 wide exports at once).
    pub batch_size: usize,
    /// Bytes the query engine's memory pool may hand out across all running exports.
    pub memory_limit: usize,
    /// Bytes of Parquet pages the scan of one export holds fetched at once, across the files
    /// it reads at once: a read of a row group's pages that would pass it waits until the
    /// other files' row groups are done. The Parquet reader fetches a row group's pages whole
    /// before decoding it, so a row group larger than this is read alone, not split
    /// (docs/decisions.md, "Pages held fetched: a budget per export").
    pub fetched_bytes_limit: usize,
    /// The largest `limit` a request may ask for, and the limit of a request that gives none.
    /// `None`: no maximum.
    pub max_limit: Option<u64>,
    /// Evaluate filters while decoding Parquet (late materialisation): columns that are not
    /// filtered on are decoded only for matching rows.
    pub pushdown_filters: bool,
    /// Bytes of Parquet footers (with their page indexes) kept between and during exports,
    /// least recently used first out. Footers needed again are read again.
    pub metadata_cache_limit: usize,
    /// What one export keeps of the bytes read with its footers, so that its scan need not
    /// read them again: in memory (32 MiB), and over a bucket beyond that on local disk, in an
    /// unnamed temporary file that goes with the export (256 MiB, in `TMPDIR`).
    pub kept_for_scan: KeptForScan,
    /// Other names accepted for fields, and fields the dataset does not hold (none by default).
    pub aliases: FieldAliases,
    /// Settings of a dataset in an S3-compatible bucket, over the standard `AWS_*` variables.
    pub s3: S3Options,
    /// The scan's page tricks (all on by default); [`PageMachinery::OFF`] reads pages only
    /// through the parquet crate's public interface.
    pub page_machinery: PageMachinery,
    /// Cursor chains: their keys (a random one by default), settle time and listing window.
    pub cursor: CursorSettings,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            target_partitions: 0,
            batch_size: 8192,
            memory_limit: 512 * 1024 * 1024,
            fetched_bytes_limit: 96 * 1024 * 1024,
            max_limit: None,
            pushdown_filters: true,
            metadata_cache_limit: 50 * 1024 * 1024,
            kept_for_scan: KeptForScan::default(),
            aliases: FieldAliases::default(),
            s3: S3Options::default(),
            page_machinery: PageMachinery::ON,
            cursor: CursorSettings::default(),
        }
    }
}

/// An export engine over one dataset: a local folder, or a prefix in an S3-compatible bucket.
/// Cheap to share: wrap it in an `Arc`.
///
/// ```no_run
/// use futures::StreamExt;
/// use logs_core::{Engine, EngineConfig};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::open("testdata/dataset", EngineConfig::default())?;
/// let request = engine.parse_request(
///     "application_id=1001&date_since=2026-10-01&date_until=2026-10-07&fields=error_id,os_name&os_name=ios",
/// )?;
/// let mut export = engine.export(&request).await?;
/// println!("{} unreadable files skipped", export.selection().skipped.len());
/// while let Some(batch) = export.next().await {
///     let batch = batch?;
///     println!("{} rows", batch.num_rows());
/// }
/// # Ok(())
/// # }
/// ```
pub struct Engine {
    storage: Storage,
    ctx: SessionContext,
    policy: RequestPolicy,
    parquet_options: TableParquetOptions,
    fetched_bytes_limit: u64,
    page_machinery: PageMachinery,
    cursor: CursorSettings,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("location", &self.storage.location())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the dataset at `location`: a local path, or a `file://` or `s3://bucket/prefix`
    /// URL (see docs/dataset.md for its layout). A local folder is checked now; a bucket is
    /// first contacted by [`Engine::check`] or the first export.
    pub fn open<L>(location: L, config: EngineConfig) -> Result<Engine>
    where
        L: TryInto<DatasetLocation>,
        Error: From<L::Error>,
    {
        let location = location.try_into()?;
        let s3 = config.s3.clone();
        Engine::with_storage(config, |cache| Storage::open(&location, &s3, cache))
    }

    /// Opens the dataset below `prefix` in an object store of the embedder's own (any
    /// `object_store::ObjectStore`: a bucket client built with settings of its own, an
    /// in-memory store, a local file system…). Errors and `--explain` name its objects
    /// `store://dataset/<key>`.
    pub fn open_store(
        store: std::sync::Arc<dyn object_store::ObjectStore>,
        prefix: &str,
        config: EngineConfig,
    ) -> Result<Engine> {
        let prefix = object_store::path::Path::parse(prefix)
            .map_err(|e| Error::Config { setting: "prefix", message: e.to_string() })?;
        let url = datafusion::execution::object_store::ObjectStoreUrl::parse("store://dataset")?;
        let location = format!("store://dataset/{prefix}");
        Engine::with_storage(config, |cache| Ok(Storage::from_store(store, prefix, url, location, cache)))
    }

    fn with_storage(
        config: EngineConfig,
        storage: impl FnOnce(Arc<FileMetadataCache>) -> Result<Storage>,
    ) -> Result<Engine> {
        if config.batch_size == 0 {
            return Err(Error::Config { setting: "batch_size", message: "must be at least 1".into() });
        }
        if config.max_limit == Some(0) {
            return Err(Error::Config { setting: "max_limit", message: "must be at least 1".into() });
        }
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_limit(config.memory_limit, 1.0)
            .with_metadata_cache_limit(config.metadata_cache_limit)
            .build_arc()?;
        let storage =
            storage(runtime.cache_manager.get_file_metadata_cache())?.keeping(config.kept_for_scan.clone());
        if let Some(store) = storage.object_store() {
            runtime.register_object_store(storage.url().as_ref(), store);
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let partitions = match config.target_partitions {
            // Over an object store a scan mostly waits for responses: twice as many files in
            // flight as cores keep the cores busy.
            0 if !storage.is_local() => (2 * cores).max(REMOTE_MIN_PARTITIONS),
            0 => cores,
            n => n,
        };
        let mut session =
            SessionConfig::new().with_target_partitions(partitions).with_batch_size(config.batch_size);
        let parquet = &mut session.options_mut().execution.parquet;
        parquet.pushdown_filters = config.pushdown_filters;
        parquet.reorder_filters = config.pushdown_filters;
        let parquet_options = TableParquetOptions { global: parquet.clone(), ..Default::default() };
        Ok(Engine {
            storage,
            ctx: SessionContext::new_with_config_rt(session, runtime),
            policy: RequestPolicy {
                max_limit: config.max_limit,
                aliases: config.aliases,
                cursor_keys: config.cursor.keys.clone(),
            },
            parquet_options,
            fetched_bytes_limit: u64::try_from(config.fetched_bytes_limit).unwrap_or(u64::MAX),
            page_machinery: config.page_machinery,
            cursor: config.cursor,
        })
    }

    /// Where the dataset is, as errors and logs name it.
    pub fn location(&self) -> &str {
        self.storage.location()
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Lists the dataset's root once: a missing bucket, refused credentials or an unreachable
    /// store fail here rather than at the first export.
    pub async fn check(&self) -> Result<()> {
        self.storage.check().await
    }

    /// The rules requests are validated by.
    pub fn policy(&self) -> &RequestPolicy {
        &self.policy
    }

    /// Parses and validates a query string with this engine's policy.
    pub fn parse_request(&self, query: &str) -> Result<ExportRequest, RequestError> {
        ExportRequest::parse(query, &self.policy)
    }

    /// Starts an export. Unreadable files are found (and skipped or reported) before this
    /// returns, so an `Ok` means rows are on their way.
    pub async fn export(&self, request: &ExportRequest) -> Result<ExportStream> {
        // A chain's call lists from when it starts (see `cursor`).
        let now = std::time::SystemTime::now();
        let scope = Scope {
            application_id: request.application_id(),
            range: request.range(),
            dimension: request.date_dimension(),
            skip_unavailable: request.skip_unavailable_shards(),
            selects_rows: !request.filters().is_empty() || request.parts().is_some(),
            rebuild_offset_index: self.page_machinery.offset_index,
            first_folder: request.cursor().and_then(|c| cursor::first_listed(c, &self.cursor, now)),
        };
        let requests = Arc::new(RequestCounts::default());
        let mut candidates = self.storage.list_candidates(&scope, &requests).await?;
        let chain = match request.cursor() {
            None => None,
            Some(chain_cursor) => {
                let call = Call {
                    cursor: chain_cursor,
                    application_id: request.application_id(),
                    dimension: request.date_dimension(),
                    since: request.range().since,
                    binding: request.binding(),
                    settings: &self.cursor,
                    now,
                };
                let step = cursor::step(call, std::mem::take(&mut candidates.objects))?;
                candidates.objects = step.deliver;
                Some(ChainStep { next: step.next, summary: step.summary })
            }
        };
        let selection = self.storage.read_footers(&scope, candidates, &requests).await?;
        let progress = Arc::new(ScanProgress::default());
        let table = self.table(request, &selection, &requests, &progress);
        let range = if selection.all_in_range() { RangeTest::ProvenByFooters } else { RangeTest::PerRow };
        let logical = build_plan(request, provider_as_source(table), range)?;
        let mut state = self.ctx.state();
        // Many files are grouped whole into the scan's partitions by bytes (`table.rs`);
        // DataFusion would split them further into byte ranges, each opened again (its footer
        // looked up, its pruning set up, over a store its first pages fetched) by a partition
        // that, for a file of one row group, then reads nothing. Few files are split, so that
        // a large one is still scanned on every core.
        if selection.files.len() >= 2 * state.config().target_partitions() {
            state.config_mut().options_mut().optimizer.repartition_file_scans = false;
        }
        let physical = state.create_physical_plan(&logical).await?;
        let inner = execute_stream(physical.clone(), self.ctx.task_ctx())?;
        Ok(ExportStream {
            schema: inner.schema(),
            inner,
            logical,
            physical,
            selected_bytes: selection.bytes(),
            selection,
            requests,
            progress,
            local: self.storage.is_local(),
            ended: false,
            chain,
        })
    }

    fn table(
        &self,
        request: &ExportRequest,
        selection: &FileSelection,
        requests: &Arc<RequestCounts>,
        progress: &Arc<ScanProgress>,
    ) -> Arc<dyn TableProvider> {
        if selection.files.is_empty() {
            return Arc::new(EmptyTable::new(file_schema()));
        }
        // A filter or a part selects rows scattered over the pages: copy the long texts out
        // of them (see `file_schema_copying_texts`). The plan casts them back to `Utf8View`.
        let schema = if request.filters().is_empty() && request.parts().is_none() {
            file_schema()
        } else {
            file_schema_copying_texts()
        };
        let options = self.parquet_options.clone();
        self.storage.table(
            schema,
            &selection.files,
            options,
            Arc::clone(requests),
            Arc::clone(progress),
            ScanSettings { fetched_limit: self.fetched_bytes_limit, machinery: self.page_machinery },
        )
    }
}

/// A running export: a stream of record batches with the requested columns, plus what was
/// read and skipped. Dropping it cancels the query and releases its memory and files.
pub struct ExportStream {
    schema: SchemaRef,
    inner: SendableRecordBatchStream,
    logical: LogicalPlan,
    physical: Arc<dyn ExecutionPlan>,
    selection: FileSelection,
    /// The selected files' size, in all (asked for with each batch: summed once).
    selected_bytes: u64,
    requests: Arc<RequestCounts>,
    progress: Arc<ScanProgress>,
    local: bool,
    /// The stream has given its last batch.
    ended: bool,
    chain: Option<ChainStep>,
}

/// A cursor chain's call: the cursor after it, and what it saw.
#[derive(Debug, Clone)]
struct ChainStep {
    next: String,
    summary: StepSummary,
}

impl std::fmt::Debug for ExportStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportStream")
            .field("schema", &self.schema)
            .field("selection", &self.selection)
            .finish()
    }
}

impl ExportStream {
    /// The output schema: the requested fields, in order.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The files read, and those pruned or skipped.
    pub fn selection(&self) -> &FileSelection {
        &self.selection
    }

    /// How far the scan has got: bytes of the selected files covered so far (read, or passed
    /// over as pruned in files finished), and their total. An estimate for progress bars,
    /// exactly the total once the stream has ended.
    pub fn progress(&self) -> (u64, u64) {
        let total = self.selected_bytes;
        if self.ended {
            return (total, total);
        }
        (self.progress.covered().min(total), total)
    }

    /// For a cursor chain's call, the cursor that continues the chain after this export's
    /// records (`Logs-Cursor`). Hand it out only once every record has been written: a client
    /// that stores it before may lose the records it did not get.
    pub fn next_cursor(&self) -> Option<&str> {
        self.chain.as_ref().map(|c| c.next.as_str())
    }

    /// For a cursor chain's call, the objects it delivers, found delivered before and left to
    /// settle.
    pub fn chain_summary(&self) -> Option<StepSummary> {
        self.chain.as_ref().map(|c| c.summary)
    }

    /// Requests made to the storage so far (listings, ranged reads, bytes).
    pub fn requests(&self) -> Requests {
        self.requests.snapshot()
    }

    /// The logical plan, the physical plan with its metrics so far (row groups and pages
    /// pruned, rows, time), and the file selection. Most informative once the stream is done.
    pub fn explain(&self) -> String {
        let s = &self.selection;
        let mut out = String::new();
        out.push_str("Logical plan:\n");
        out.push_str(&self.logical.display_indent().to_string());
        out.push_str("\n\nPhysical plan with metrics:\n");
        out.push_str(
            &DisplayableExecutionPlan::with_metrics(self.physical.as_ref()).indent(true).to_string(),
        );
        out.push_str(&format!(
            "\nFiles: {} date folders of the application, {} outside the range; {} files in range, \
             {} pruned by footer statistics, {} skipped as unreadable, {} read ({} row groups, {} rows)\n",
            s.date_folders,
            s.date_folders_pruned,
            s.candidate_files,
            s.files_pruned_by_statistics,
            s.skipped.len(),
            s.files.len(),
            s.row_groups(),
            s.rows()
        ));
        let r = self.requests();
        if self.local {
            out.push_str(&format!(
                "Storage: {} folder listings, {} reads, {} bytes read\n",
                r.lists, r.gets, r.bytes
            ));
        } else {
            out.push_str(&format!(
                "Storage: {} LIST, 0 HEAD, {} GET requests, {} bytes fetched\n",
                r.lists, r.gets, r.bytes
            ));
            out.push_str(&format!(
                "Kept from the footer reads for the scan: {} bytes in memory, {} bytes on local disk\n",
                s.kept_in_memory(),
                s.kept_on_disk()
            ));
        }
        if let Some(chain) = &self.chain {
            let c = chain.summary;
            out.push_str(&format!(
                "Cursor: {} new objects delivered, {} delivered before, {} left to settle\n",
                c.new_objects, c.delivered_before, c.settling
            ));
        }
        for skipped in &s.skipped {
            out.push_str(&format!("Skipped {}: {}\n", skipped.name, skipped.reason));
        }
        out
    }

    /// A metric of the plan, summed over its partitions, by name: for example the Parquet
    /// scan's `row_groups_pruned_statistics`, `row_groups_pruned_bloom_filter`,
    /// `page_index_rows_pruned` or `bytes_scanned`. Most informative once the stream is done.
    pub fn metric(&self, name: &str) -> Option<MetricValue> {
        fn find(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Option<MetricValue> {
            if let Some(value) = plan.metrics().and_then(|m| m.sum_by_name(name)) {
                return Some(value);
            }
            plan.children().into_iter().find_map(|child| find(child, name))
        }
        find(&self.physical, name)
    }

    /// For a pruning metric such as `row_groups_pruned_statistics`: how many were pruned and
    /// how many matched.
    pub fn pruning(&self, name: &str) -> Option<Pruning> {
        match self.metric(name)? {
            MetricValue::PruningMetrics { pruning_metrics, .. } => {
                Some(Pruning { pruned: pruning_metrics.pruned(), matched: pruning_metrics.matched() })
            }
            _ => None,
        }
    }
}

/// Counts of a pruning step of the scan (files, row groups, pages or rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pruning {
    pub pruned: usize,
    pub matched: usize,
}

impl Stream for ExportStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(None) = item {
            self.ended = true;
        }
        item.map(|item| item.map(|r| r.map_err(Error::from)))
    }
}
