//! How the scan reads a selected file: through [`ObjectFile`], which checks that the file is
//! still the one selected, merges close ranges and counts what it fetches.
//!
//! Footers come from the file-metadata cache, where the catalog put them (`footer.rs`); the
//! scan reads a footer itself only for a file whose completed footer was not cached. Over a
//! store, each reader starts with the bytes the catalog read with the file's footer (its end,
//! or all of a small file): reads inside them make no request, and the first read of a row
//! group's pages brings those its later reads will need (`read_ahead.rs`).
//!
//! A dictionary page nothing will use is not read. A column chunk's dictionary page comes
//! before its data pages, and the Parquet reader decompresses and decodes it before any of
//! them, even when every data page it then reads is plain-encoded. Writers that fall back from
//! dictionary to plain encoding once the dictionary is full (pyarrow, DuckDB, parquet-rs: at
//! 1 MiB) leave most pages of a high-cardinality column plain, so a point export over such
//! files would spend most of its time on dictionaries. The reader fetches a chunk's dictionary
//! page together with the data pages it needs from that chunk, in one request; when it can see
//! that none of those pages holds dictionary indices, it hands back an empty dictionary page
//! instead.
//!
//! A page of a text column is decompressed only as far as the rows the export selects. When
//! the export has equality filters on texts, the reader works out which rows of a row group
//! they select (`selection.rs`) and hands back each page of another text column it can rewrite
//! as one holding only those rows' values (`partial_page.rs`).
//!
//! The pages the readers of one export hold fetched at once are bounded (`budget.rs`): a read
//! of a row group's pages waits while the other readers hold too many.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileMetrics;
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
use crate::storage::page_headers::{EMPTY_DICTIONARY_PAGE_HEADER, dictionary_encoded};
use crate::storage::read_ahead::{READ_AHEAD_LIMIT, ReadAhead};
use crate::storage::selection::{PartialPages, TextFilters};

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

/// Makes a [`ScanReader`] for each file the scan of one export opens.
#[derive(Debug, Clone)]
pub(crate) struct ScanReaders {
    backend: Backend,
    /// The export's files, by location: what the catalog selected.
    files: Arc<HashMap<ObjectPath, SelectedFile>>,
    metadata_cache: Arc<FileMetadataCache>,
    counts: Arc<RequestCounts>,
    progress: Arc<ScanProgress>,
    /// The columns the scan reads, once known: over a store, their pages are read ahead
    /// (`read_ahead.rs`).
    columns: Option<Arc<HashSet<String>>>,
    /// The export's equality filters on texts, if any: the pages of other text columns are
    /// then decompressed only as far as the rows they select (`partial_page.rs`).
    filters: Option<TextFilters>,
    /// The bytes the export's readers may hold fetched at once (`budget.rs`).
    budget: Arc<FetchBudget>,
}

impl ScanReaders {
    /// The readers of an export of `files`, whose readers hold at most about `fetched_limit`
    /// bytes fetched at once (`budget.rs`).
    pub(crate) fn new(
        backend: Backend,
        files: &[SelectedFile],
        metadata_cache: Arc<FileMetadataCache>,
        counts: Arc<RequestCounts>,
        progress: Arc<ScanProgress>,
        fetched_limit: u64,
    ) -> ScanReaders {
        let files = Arc::new(files.iter().map(|f| (f.object.location.clone(), f.clone())).collect());
        let budget = FetchBudget::new(fetched_limit);
        ScanReaders { backend, files, metadata_cache, counts, progress, columns: None, filters: None, budget }
    }

    /// These readers, for a scan that reads the columns named in `columns`.
    pub(crate) fn reading(&self, columns: HashSet<String>) -> ScanReaders {
        ScanReaders { columns: Some(Arc::new(columns)), ..self.clone() }
    }

    /// These readers, for a scan that keeps only rows where each column of `filters` equals
    /// its value.
    pub(crate) fn selecting(&self, filters: Vec<(String, String)>) -> ScanReaders {
        let filters = (!filters.is_empty()).then(|| TextFilters::from(filters));
        ScanReaders { filters, ..self.clone() }
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
        // A local file's reads cost no round trip: nothing is read ahead.
        let columns = self.columns.clone().filter(|_| object.is_remote());
        let dictionaries_skipped = MetricBuilder::new(metrics)
            .with_new_label("filename", file.path().to_string())
            .counter("dictionary_pages_not_read", partition_index);
        let pages_read_ahead = MetricBuilder::new(metrics)
            .with_new_label("filename", file.path().to_string())
            .counter("pages_read_ahead", partition_index);
        let partial = self.filters.clone().map(|filters| {
            let rewritten = MetricBuilder::new(metrics)
                .with_new_label("filename", file.path().to_string())
                .counter("pages_decompressed_partially", partition_index);
            PartialPages::new(filters, rewritten)
        });
        let budget = self.budget.share(metrics);
        let metrics = ParquetFileMetrics::new(partition_index, file.path().as_ref(), metrics);
        Ok(Box::new(ScanReader {
            object,
            budget,
            row_groups: Arc::clone(&selected.row_group_spans),
            metrics,
            dictionaries_skipped,
            pages_read_ahead,
            footer: None,
            dictionary_pages: None,
            columns,
            read_ahead: None,
            partial,
            metadata_cache: Arc::clone(&self.metadata_cache),
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
    metrics: ParquetFileMetrics,
    /// Dictionary pages replaced by an empty one (see the module documentation).
    dictionaries_skipped: Count,
    /// Pages fetched ahead of the step that reads them (`read_ahead.rs`).
    pages_read_ahead: Count,
    /// The footer the scan got from [`AsyncFileReader::get_metadata`].
    footer: Option<Arc<ParquetMetaData>>,
    /// By the offset of each dictionary page in the file: where the chunk's data pages start
    /// and where the chunk ends. Built from `footer`, or from the cached footer, on the first
    /// read of several ranges.
    dictionary_pages: Option<HashMap<u64, Range<u64>>>,
    /// The columns the scan reads, if their pages are to be read ahead.
    columns: Option<Arc<HashSet<String>>>,
    /// Built from the footer and `columns` on the first read of several ranges.
    read_ahead: Option<ReadAhead>,
    /// Pages decompressed only as far as the export's rows, if it has equality filters.
    partial: Option<PartialPages>,
    metadata_cache: Arc<FileMetadataCache>,
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

    /// Reads `ranges`, replacing each dictionary page none of the data pages asked for with it
    /// needs.
    async fn read_ranges(&mut self, ranges: &[Range<u64>]) -> ParquetResult<Vec<Bytes>> {
        self.read_pages = true;
        if let Some(row_group) = ranges.first().and_then(|r| self.row_group_at(r.start)) {
            let bytes = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
            self.budget.acquire(row_group, bytes).await;
        }
        let dictionaries = self.dictionary_ranges(ranges);
        // Over an object store every request costs a round trip, and a dictionary page sits
        // right before its chunk's data pages: it is fetched in the same GET, and only its
        // decoding is saved. From a local file, a dictionary page nothing needs is not read.
        let with_dictionaries = self.object.is_remote();
        let first: Vec<usize> =
            (0..ranges.len()).filter(|i| with_dictionaries || !dictionaries.contains_key(i)).collect();
        let mut out = vec![Bytes::new(); ranges.len()];
        self.fetch_into(ranges, &first, &mut out).await?;
        let mut dictionaries: Vec<(usize, Range<u64>)> = dictionaries.into_iter().collect();
        dictionaries.sort_by_key(|(i, _)| *i);
        let mut needed = Vec::new();
        for (i, data_pages) in dictionaries {
            let unused = only_plain_pages(ranges, &out, &data_pages);
            match unused.then(|| empty_dictionary_page(ranges[i].end - ranges[i].start)).flatten() {
                Some(page) => {
                    self.dictionaries_skipped.add(1);
                    out[i] = page;
                }
                None if with_dictionaries => {}
                None => needed.push(i),
            }
        }
        // The dictionaries still needed, in one more call.
        self.fetch_into(ranges, &needed, &mut out).await?;
        self.decompress_partially(ranges, &mut out).await;
        Ok(out)
    }

    /// Replaces each page of `pages` (read for `ranges`) that holds a text column's values
    /// with one that holds only the values of the rows the export's filters select
    /// (`selection.rs`). The filter columns' reads count as the scan's.
    async fn decompress_partially(&mut self, ranges: &[Range<u64>], pages: &mut [Bytes]) {
        let Some(footer) = self.footer() else { return };
        let Some(partial) = self.partial.as_mut() else { return };
        let read = partial.rewrite(&self.object, &footer, ranges, pages).await;
        self.scanned(read);
    }

    /// Reads the ranges of `ranges` at `indices` into the same places of `out`, in one call.
    async fn fetch_into(
        &mut self,
        ranges: &[Range<u64>],
        indices: &[usize],
        out: &mut [Bytes],
    ) -> ParquetResult<()> {
        let mut wanted = Vec::with_capacity(indices.len());
        let mut slots = Vec::with_capacity(indices.len());
        let apart = self.read_apart(ranges, indices);
        for &i in indices {
            if let Some(bytes) = self.read_ahead.as_ref().and_then(|ahead| ahead.get(&ranges[i])) {
                out[i] = bytes;
            } else if apart.contains(&i) {
                out[i] = self.read(ranges[i].clone()).await?;
            } else {
                wanted.push(ranges[i].clone());
                slots.push(i);
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        // Only a read that makes a request brings pages ahead, and only pages not in memory.
        let ahead = match self.read_ahead.as_mut() {
            Some(read_ahead) if wanted.iter().any(|r| !self.object.holds(r)) => {
                let planned = read_ahead.plan(&wanted);
                planned.into_iter().filter(|r| !self.object.holds(r)).collect()
            }
            _ => Vec::new(),
        };
        let asked = wanted.len();
        self.pages_read_ahead.add(ahead.len());
        wanted.extend(ahead.iter().cloned());
        let before = self.object.bytes_read();
        let mut fetched = self.object.get_ranges(&wanted).await.map_err(external)?;
        self.scanned(self.object.bytes_read() - before);
        let fetched_ahead = fetched.split_off(asked);
        if let Some(read_ahead) = self.read_ahead.as_mut() {
            read_ahead.hold(&ahead, fetched_ahead);
        }
        for (i, bytes) in slots.into_iter().zip(fetched) {
            out[i] = bytes;
        }
        Ok(())
    }

    /// Those of `indices` whose range of `ranges` is a page the partial-page rewriter may
    /// rewrite, if the file is local: such a page is read into a buffer of its own, which its
    /// rewrite then writes over instead of copying the page (`partial_page.rs`). Over an object
    /// store every read is a request, and pages close together are fetched at once.
    fn read_apart(&mut self, ranges: &[Range<u64>], indices: &[usize]) -> HashSet<usize> {
        if self.object.is_remote() {
            return HashSet::new();
        }
        let (Some(footer), Some(partial)) = (self.footer(), self.partial.as_mut()) else {
            return HashSet::new();
        };
        indices.iter().copied().filter(|&i| partial.may_rewrite(&footer, &ranges[i])).collect()
    }

    /// The row group whose column chunks hold the byte at `offset`, if any.
    fn row_group_at(&self, offset: u64) -> Option<usize> {
        self.row_groups.iter().position(|span| span.contains(&offset))
    }

    /// The footer of the file: the one the scan asked this reader for, or the cached one (the
    /// scan may read a file through another reader than the one it asked for the footer).
    fn footer(&self) -> Option<Arc<ParquetMetaData>> {
        self.footer.clone().or_else(|| footer::cached(self.metadata_cache.as_ref(), self.object.meta()))
    }

    /// The requested ranges that are a column chunk's whole dictionary page, by index, each
    /// with the range of the chunk's data pages.
    fn dictionary_ranges(&mut self, ranges: &[Range<u64>]) -> HashMap<usize, Range<u64>> {
        if self.dictionary_pages.is_none() {
            let footer = self.footer();
            if let (Some(footer), Some(columns)) = (&footer, &self.columns) {
                self.read_ahead = ReadAhead::new(footer, columns, READ_AHEAD_LIMIT);
            }
            self.dictionary_pages = footer.map(|footer| dictionary_pages(&footer));
        }
        let Some(pages) = &self.dictionary_pages else { return HashMap::new() };
        let dictionary = |r: &Range<u64>| pages.get(&r.start).filter(|data| data.start == r.end).cloned();
        ranges.iter().enumerate().filter_map(|(i, r)| Some((i, dictionary(r)?))).collect()
    }
}

/// Whether `pages` (read for `ranges`) hold at least one data page in `data_pages`, and none
/// there holds dictionary indices.
fn only_plain_pages(ranges: &[Range<u64>], pages: &[Bytes], data_pages: &Range<u64>) -> bool {
    let mut pages = ranges.iter().zip(pages).filter(|(r, _)| data_pages.contains(&r.start)).peekable();
    pages.peek().is_some() && pages.all(|(_, page)| dictionary_encoded(page) == Some(false))
}

/// Every dictionary page of `footer` that its offset index places: by the page's offset,
/// where the chunk's data pages start and where the chunk ends.
fn dictionary_pages(footer: &ParquetMetaData) -> HashMap<u64, Range<u64>> {
    let Some(offset_index) = footer.offset_index() else { return HashMap::new() };
    let mut out = HashMap::new();
    for (row_group, indexes) in footer.row_groups().iter().zip(offset_index) {
        for (column, index) in row_group.columns().iter().zip(indexes) {
            let (start, length) = column.byte_range();
            if let Some(first) = index.page_locations().first()
                && first.offset as u64 > start
            {
                out.insert(start, first.offset as u64..start.saturating_add(length));
            }
        }
    }
    out
}

/// An empty dictionary page `len` bytes long (the bytes after its header are never read), or
/// `None` if `len` is implausible for a dictionary page.
fn empty_dictionary_page(len: u64) -> Option<Bytes> {
    /// The longest page handed out; zeroed pages beyond the first are mapped but never touched.
    const CAPACITY: usize = 64 << 20;
    static PAGE: OnceLock<Bytes> = OnceLock::new();
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| (EMPTY_DICTIONARY_PAGE_HEADER.len()..=CAPACITY).contains(&n))?;
    let page = PAGE.get_or_init(|| {
        let mut page = vec![0u8; CAPACITY];
        page[..EMPTY_DICTIONARY_PAGE_HEADER.len()].copy_from_slice(&EMPTY_DICTIONARY_PAGE_HEADER);
        Bytes::from(page)
    });
    Some(page.slice(..len))
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
                    Arc::new(reader.finish()?)
                }
            };
            self.footer = Some(Arc::clone(&footer));
            self.dictionary_pages = None;
            self.read_ahead = None;
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
        let ratio = &self.metrics.scan_efficiency_ratio;
        ratio.add_part(self.metrics.bytes_scanned.value());
        ratio.set_total(self.object.size() as usize);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod read_ahead_tests;
