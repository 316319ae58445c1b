//! How the scan reads a selected file: through [`ObjectFile`], which checks that the file is
//! still the one selected, merges close ranges and counts what it fetches.
//!
//! Footers come from the file-metadata cache, where the catalog put them (`footer.rs`); the
//! scan reads a footer itself only for a file whose completed footer the cache no longer
//! holds. Over a store, each reader starts with the bytes the catalog kept of its footer read,
//! in memory or in the export's spool on local disk (its end or its footer, or all of a small
//! file): reads inside them make no request, and the first read of a row group's pages brings
//! those its later reads will need (`read_ahead.rs`).
//!
//! Every read of several ranges (a row group's pages) goes through the page machinery
//! (`pages/`), unless the engine's config turns it off.
//!
//! The pages the readers of one export hold fetched at once are bounded (`budget.rs`): a read
//! of a row group's pages waits while the other readers hold too many.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::ParquetFileReaderFactory;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::parquet::arrow::arrow_reader::ArrowReaderOptions;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::errors::{ParquetError, Result as ParquetResult};
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::path::Path as ObjectPath;

use crate::storage::budget::{BudgetShare, FetchBudget};
use crate::storage::catalog::SelectedFile;
use crate::storage::footer;
use crate::storage::object::{Backend, ObjectFile, RequestCounts};
use crate::storage::pages::{PageCounts, PageMachinery, PagePlan, PageReads, TextFilters};

/// How far the scan of one export has got through its files' bytes: what it has read, plus,
/// for each file whose pages it has finished reading, the bytes it did not need (pruned pages
/// and row groups). An estimate for progress bars, at most the selected files' total (files
/// pruned whole by bloom filters are counted only when the export ends).
#[derive(Debug, Default)]
pub struct ScanProgress {
    read: AtomicU64,
    passed_over: AtomicU64,
    finished: Mutex<HashSet<ObjectPath>>,
}

impl ScanProgress {
    /// Bytes of the selected files covered so far.
    pub fn covered(&self) -> u64 {
        self.read.load(Ordering::Relaxed) + self.passed_over.load(Ordering::Relaxed)
    }

    fn finished(&self, location: &ObjectPath, size: u64, read: u64) {
        let mut finished = self.finished.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if finished.insert(location.clone()) {
            self.passed_over.fetch_add(size.saturating_sub(read), Ordering::Relaxed);
        }
    }
}

/// How the scan of one export reads its files.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanSettings {
    /// About the most bytes of pages its readers hold fetched at once (`budget.rs`).
    pub(crate) fetched_limit: u64,
    pub(crate) machinery: PageMachinery,
}

/// Makes a [`ScanReader`] for each file the scan of one export opens.
#[derive(Debug, Clone)]
pub(crate) struct ScanReaders {
    backend: Backend,
    /// The export's files, by location: what the catalog selected.
    files: Arc<HashMap<ObjectPath, SelectedFile>>,
    metadata_cache: Arc<FileMetadataCache>,
    counts: Arc<RequestCounts>,
    progress: Arc<ScanProgress>,
    /// What the page machinery is to do for the scan.
    pages: PagePlan,
    /// The bytes the export's readers may hold fetched at once (`budget.rs`).
    budget: Arc<FetchBudget>,
    /// The metrics of the scan's readers, by partition (see [`ReaderMetrics`]).
    metrics: Arc<Mutex<HashMap<usize, ReaderMetrics>>>,
    /// Footers the readers parsed themselves, for the next reader of the same file.
    parsed: Arc<ParsedFooters>,
}

/// The last footers the scan's readers parsed themselves, when the cache no longer held them
/// (a month of small files outgrows it): DataFusion reads a file's bloom filters through one
/// reader and its pages through another, which would otherwise know no footer and so could
/// not read pages ahead (`read_ahead.rs`). A few files are open at once; this holds the last
/// [`PARSED_FOOTERS_KEPT`].
#[derive(Debug, Default)]
struct ParsedFooters(Mutex<VecDeque<(ObjectPath, Arc<ParquetMetaData>)>>);

const PARSED_FOOTERS_KEPT: usize = 64;

impl ParsedFooters {
    fn get(&self, location: &ObjectPath) -> Option<Arc<ParquetMetaData>> {
        let parsed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        parsed.iter().rev().find(|(at, _)| at == location).map(|(_, footer)| Arc::clone(footer))
    }

    fn put(&self, location: &ObjectPath, footer: &Arc<ParquetMetaData>) {
        let mut parsed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if parsed.len() == PARSED_FOOTERS_KEPT {
            parsed.pop_front();
        }
        parsed.push_back((location.clone(), Arc::clone(footer)));
    }
}

/// What the readers of one scan partition count, registered once for the partition rather
/// than for each file it reads: a scan of thousands of small files would otherwise register
/// thousands of sets of metrics, each naming its file, and hold them to the end.
#[derive(Debug, Clone)]
struct ReaderMetrics {
    bytes_scanned: Count,
    pages: PageCounts,
}

impl ReaderMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> ReaderMetrics {
        let counter = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        ReaderMetrics {
            bytes_scanned: counter("bytes_scanned"),
            pages: PageCounts {
                dictionaries_skipped: counter("dictionary_pages_not_read"),
                pages_read_ahead: counter("pages_read_ahead"),
                pages_decompressed_partially: counter("pages_decompressed_partially"),
            },
        }
    }
}

impl ScanReaders {
    /// The readers of an export of `files`, reading as `settings` say.
    pub(crate) fn new(
        backend: Backend,
        files: &[SelectedFile],
        metadata_cache: Arc<FileMetadataCache>,
        counts: Arc<RequestCounts>,
        progress: Arc<ScanProgress>,
        settings: ScanSettings,
    ) -> ScanReaders {
        let files = Arc::new(files.iter().map(|f| (f.object.location.clone(), f.clone())).collect());
        let budget = FetchBudget::new(settings.fetched_limit);
        let pages = PagePlan { machinery: settings.machinery, columns: None, filters: None };
        let metrics = Arc::default();
        let parsed = Arc::default();
        ScanReaders { backend, files, metadata_cache, counts, progress, pages, budget, metrics, parsed }
    }

    /// These readers, for a scan that reads the columns named in `columns` (and registers
    /// metrics of its own).
    pub(crate) fn reading(&self, columns: HashSet<String>) -> ScanReaders {
        let pages = PagePlan { columns: Some(Arc::new(columns)), ..self.pages.clone() };
        ScanReaders { pages, metrics: Arc::default(), ..self.clone() }
    }

    /// These readers, for a scan that keeps only rows where each column of `filters` equals
    /// its value.
    pub(crate) fn selecting(&self, filters: Vec<(String, String)>) -> ScanReaders {
        let filters = (!filters.is_empty()).then(|| TextFilters::from(filters));
        ScanReaders { pages: PagePlan { filters, ..self.pages.clone() }, ..self.clone() }
    }
}

impl ParquetFileReaderFactory for ScanReaders {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        _metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let selected = self
            .files
            .get(&file.object_meta.location)
            .ok_or_else(|| DataFusionError::Internal(format!("{} was not selected", file.path())))?;
        let object = ObjectFile::new(
            &self.backend,
            Arc::from(selected.name.as_str()),
            selected.object.clone(),
            Arc::clone(&self.counts),
        )
        .with_prefetched(selected.prefetched.clone());
        let partition = {
            let mut by_partition = self.metrics.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let partition = by_partition.entry(partition_index);
            partition.or_insert_with(|| ReaderMetrics::new(metrics, partition_index)).clone()
        };
        let counts = partition.pages.clone();
        let pages = PageReads::new(&object, &self.pages, counts);
        let budget = self.budget.share(metrics);
        let metrics = partition;
        Ok(Box::new(ScanReader {
            object,
            budget,
            row_groups: Arc::clone(&selected.row_group_spans),
            metrics,
            footer: self.parsed.get(&file.object_meta.location),
            pages,
            metadata_cache: Arc::clone(&self.metadata_cache),
            parsed: Arc::clone(&self.parsed),
            progress: Arc::clone(&self.progress),
            read_pages: false,
        }))
    }
}

/// Reads one selected file (see the module documentation).
#[derive(Debug)]
pub(crate) struct ScanReader {
    object: ObjectFile,
    /// This reader's share of the bytes the export may hold fetched.
    budget: BudgetShare,
    /// The bytes of each row group's column chunks (`SelectedFile::row_group_spans`).
    row_groups: Arc<[Range<u64>]>,
    metrics: ReaderMetrics,
    /// The footer the scan got from [`AsyncFileReader::get_metadata`].
    footer: Option<Arc<ParquetMetaData>>,
    /// The page machinery, unless the engine's config turns it off.
    pages: Option<PageReads>,
    metadata_cache: Arc<FileMetadataCache>,
    parsed: Arc<ParsedFooters>,
    progress: Arc<ScanProgress>,
    /// Whether this reader read pages (DataFusion opens a file through one reader for its
    /// footer and bloom filters and another for its pages): only then does its end finish the
    /// file for [`ScanProgress`].
    read_pages: bool,
}

fn external(e: crate::error::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl ScanReader {
    async fn read(&mut self, range: Range<u64>) -> ParquetResult<Bytes> {
        let before = self.object.bytes_read();
        let bytes = self.object.get(range).await.map_err(external)?;
        self.scanned(self.object.bytes_read() - before);
        Ok(bytes)
    }

    fn scanned(&self, bytes: u64) {
        self.metrics.bytes_scanned.add(bytes as usize);
        self.progress.read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Reads `ranges` (a row group's pages), through the page machinery if it is on.
    async fn read_ranges(&mut self, ranges: &[Range<u64>]) -> ParquetResult<Vec<Bytes>> {
        self.read_pages = true;
        if let Some(row_group) = ranges.first().and_then(|r| self.row_group_at(r.start)) {
            let bytes = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
            self.budget.acquire(row_group, bytes).await;
        }
        let footer = self.footer();
        let before = self.object.bytes_read();
        let read = match self.pages.as_mut() {
            Some(pages) => pages.read(&self.object, footer, ranges).await,
            None => self.object.get_ranges(ranges).await,
        };
        self.scanned(self.object.bytes_read() - before);
        read.map_err(external)
    }

    /// The row group whose column chunks hold the byte at `offset`, if any.
    fn row_group_at(&self, offset: u64) -> Option<usize> {
        self.row_groups.iter().position(|span| span.contains(&offset))
    }

    /// The footer of the file: the one the scan asked this reader for (or another reader of the
    /// file parsed: [`ParsedFooters`]), or the cached one (the scan may read a file through
    /// another reader than the one it asked for the footer).
    fn footer(&self) -> Option<Arc<ParquetMetaData>> {
        self.footer.clone().or_else(|| footer::cached(self.metadata_cache.as_ref(), self.object.meta()))
    }
}

impl AsyncFileReader for ScanReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        self.read(range).boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, ParquetResult<Vec<Bytes>>> {
        async move { self.read_ranges(&ranges).await }.boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
        async move {
            let footer = match footer::cached(self.metadata_cache.as_ref(), self.object.meta()) {
                Some(footer) => footer,
                None => {
                    let policy = options.map(|o| o.column_index_policy()).unwrap_or_default();
                    let mut reader = ParquetMetaDataReader::new().with_page_index_policy(policy);
                    reader.try_load(&self.object, self.object.size()).await?;
                    let footer = Arc::new(reader.finish()?);
                    self.parsed.put(&self.object.meta().location, &footer);
                    footer
                }
            };
            self.footer = Some(Arc::clone(&footer));
            if let Some(pages) = self.pages.as_mut() {
                pages.footer_changed();
            }
            Ok(footer)
        }
        .boxed()
    }
}

impl Drop for ScanReader {
    fn drop(&mut self) {
        if self.read_pages {
            self.progress.finished(
                &self.object.meta().location,
                self.object.size(),
                self.object.bytes_read(),
            );
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod read_ahead_tests;
