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
}

impl ScanReaders {
    pub(crate) fn new(
        backend: Backend,
        files: &[SelectedFile],
        metadata_cache: Arc<FileMetadataCache>,
        counts: Arc<RequestCounts>,
        progress: Arc<ScanProgress>,
    ) -> ScanReaders {
        let files = Arc::new(files.iter().map(|f| (f.object.location.clone(), f.clone())).collect());
        ScanReaders { backend, files, metadata_cache, counts, progress, columns: None, filters: None }
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
        let metrics = ParquetFileMetrics::new(partition_index, file.path().as_ref(), metrics);
        Ok(Box::new(ScanReader {
            object,
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
        for &i in indices {
            match self.read_ahead.as_ref().and_then(|ahead| ahead.get(&ranges[i])) {
                Some(bytes) => out[i] = bytes,
                None => {
                    wanted.push(ranges[i].clone());
                    slots.push(i);
                }
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
mod tests {
    use super::*;
    use crate::storage::object::testing;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    fn reader(path: &std::path::Path) -> ScanReader {
        let (object, _) = testing::local_file(path);
        reader_of(object)
    }

    pub(super) fn reader_of(object: ObjectFile) -> ScanReader {
        let runtime = RuntimeEnvBuilder::new().build_arc().unwrap();
        let metrics = ExecutionPlanMetricsSet::new();
        let metrics = ParquetFileMetrics::new(0, "f", &metrics);
        ScanReader {
            object,
            metrics,
            dictionaries_skipped: Count::new(),
            pages_read_ahead: Count::new(),
            footer: None,
            dictionary_pages: None,
            columns: None,
            read_ahead: None,
            partial: None,
            metadata_cache: runtime.cache_manager.get_file_metadata_cache(),
            progress: Arc::default(),
            read_pages: false,
        }
    }

    #[tokio::test]
    async fn ranges_in_any_order_overlapping_or_far_apart_read_exactly_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (path, content) = testing::patterned_file(dir.path(), "f", 200_000);
        let mut reader = reader(&path);
        let ranges = vec![
            150_000..150_010,
            0..10,
            5..20,
            20..20,
            10..100,
            100_000..199_999,
            100_000..100_001,
            199_999..200_000,
        ];
        testing::assert_exact(&ranges, &reader.read_ranges(&ranges).await.unwrap(), &content);
        // Two reads: 0..100, and 100_000..200_000 (which holds the other four).
        assert_eq!(reader.metrics.bytes_scanned.value(), 100 + 100_000, "merged reads");
        let error = reader.read_ranges(&[10..20, 199_990..200_001]).await.unwrap_err().to_string();
        assert!(error.contains("outside the object's 200000 bytes"), "{error}");
    }

    /// Every read counts the bytes it fetched, once: in the file's `bytes_scanned` and in the
    /// export's progress. The end of a reader that read pages counts the rest of the file as
    /// passed over, once per file; a reader that read only a footer or bloom filters does not.
    #[tokio::test]
    async fn each_read_is_counted_once_and_a_finished_file_counts_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = testing::patterned_file(dir.path(), "f", 200_000);
        let location = testing::local_file(&path).0.meta().location.clone();
        let progress = Arc::new(ScanProgress::default());
        let reader_of_export = |progress: &Arc<ScanProgress>| {
            let mut reader = reader(&path);
            reader.progress = Arc::clone(progress);
            reader
        };

        let mut pages = reader_of_export(&progress);
        pages.read_ranges(std::slice::from_ref(&(0..100))).await.unwrap();
        pages.read_ranges(&[50_000..50_500, 150_000..150_100]).await.unwrap();
        pages.read(190_000..190_050).await.unwrap();
        assert_eq!(pages.metrics.bytes_scanned.value(), 750);
        assert_eq!(progress.covered(), 750);
        let efficiency = pages.metrics.scan_efficiency_ratio.clone();
        drop(pages);
        assert_eq!((efficiency.part(), efficiency.total()), (750, 200_000));
        assert_eq!(progress.covered(), 200_000, "the file is covered once its reader is done");

        // Another reader of the same file adds what it reads, not the file again.
        let mut again = reader_of_export(&progress);
        again.read_ranges(std::slice::from_ref(&(0..10))).await.unwrap();
        drop(again);
        assert_eq!(progress.covered(), 200_010);
        assert!(progress.finished.lock().unwrap().contains(&location));

        // A reader that read no pages does not finish its file.
        let progress = Arc::new(ScanProgress::default());
        let mut footer = reader_of_export(&progress);
        footer.read(199_000..200_000).await.unwrap();
        drop(footer);
        assert_eq!(progress.covered(), 1000);
    }

    #[tokio::test]
    async fn a_file_that_changed_after_selection_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        std::fs::write(&path, vec![1u8; 1000]).unwrap();
        let mut grown = reader(&path);
        std::fs::write(&path, vec![1u8; 2000]).unwrap();
        let error = grown.read(0..10).await.unwrap_err().to_string();
        assert!(error.contains("changed after the export selected it"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");

        // Renamed over with the same size and modification time: only the inode tells.
        std::fs::write(&path, vec![1u8; 1000]).unwrap();
        let mut renamed_over = reader(&path);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let other = dir.path().join("g.parquet");
        std::fs::write(&other, vec![2u8; 1000]).unwrap();
        std::fs::File::options().write(true).open(&other).unwrap().set_modified(modified).unwrap();
        std::fs::rename(&other, &path).unwrap();
        let error = renamed_over.read(0..10).await.unwrap_err().to_string();
        assert!(error.contains("changed after the export selected it"), "{error}");
    }

    /// A file of one string column of 4 000 distinct values, one row group: pages of 100
    /// rows, dictionary-encoded until the 4 KiB dictionary is full and plain after that,
    /// Snappy, with an offset index. Returns the values and the footer.
    fn dictionary_fallback_file(path: &std::path::Path) -> (Vec<String>, Arc<ParquetMetaData>) {
        use datafusion::arrow::array::{RecordBatch, StringArray};
        use datafusion::parquet::basic::Compression;
        use datafusion::parquet::file::properties::WriterProperties;
        let values: Vec<String> = (0..4000).map(|i| format!("value {i:05} {}", "x".repeat(i % 50))).collect();
        let column = Arc::new(StringArray::from(values.clone()));
        let batch = RecordBatch::try_from_iter([("text", column as _)]).unwrap();
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_dictionary_page_size_limit(4096)
            .set_write_batch_size(100)
            .set_data_page_row_count_limit(100)
            .build();
        (values, crate::storage::read_ahead::tests::write(path, &batch, properties))
    }

    /// The byte ranges of the one column chunk of [`dictionary_fallback_file`].
    struct Chunk {
        dictionary: Range<u64>,
        /// Its first data page (dictionary-encoded) and its last (plain).
        first: Range<u64>,
        last: Range<u64>,
    }

    /// Writes [`dictionary_fallback_file`] at `path`: its footer, its bytes and its chunk.
    fn chunk_of_dictionary_fallback_file(path: &std::path::Path) -> (Arc<ParquetMetaData>, Vec<u8>, Chunk) {
        let (_, footer) = dictionary_fallback_file(path);
        let content = std::fs::read(path).unwrap();
        let pages = footer.offset_index().unwrap()[0][0].page_locations();
        let page = |i: usize| {
            pages[i].offset as u64..(pages[i].offset + i64::from(pages[i].compressed_page_size)) as u64
        };
        let (first, last) = (page(0), page(pages.len() - 1));
        let dictionary = footer.row_group(0).column(0).byte_range().0..first.start;
        (footer.clone(), content, Chunk { dictionary, first, last })
    }

    #[tokio::test]
    async fn a_dictionary_page_that_only_plain_pages_follow_is_replaced_by_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let (footer, content, Chunk { dictionary, first, last }) = chunk_of_dictionary_fallback_file(&path);
        let bytes = |r: &Range<u64>| &content[r.start as usize..r.end as usize];
        assert_eq!(dictionary_encoded(bytes(&first)), Some(true));
        assert_eq!(dictionary_encoded(bytes(&last)), Some(false));
        assert!(dictionary.end - dictionary.start > 200, "a real dictionary page");

        let mut blind = reader(&path);
        let mut reader = reader(&path);
        reader.footer = Some(Arc::clone(&footer));
        let read = reader.read_ranges(&[last.clone(), dictionary.clone()]).await.unwrap();
        assert_eq!(&read[0][..], bytes(&last));
        assert_eq!(read[1].len(), bytes(&dictionary).len());
        assert!(read[1].starts_with(&EMPTY_DICTIONARY_PAGE_HEADER));
        assert_eq!(reader.dictionaries_skipped.value(), 1);
        // With a dictionary-encoded page among those asked for, or with no data page at all
        // (then what follows is unknown), the dictionary page is read.
        for ranges in [vec![dictionary.clone(), last.clone(), first.clone()], vec![dictionary.clone()]] {
            let read = reader.read_ranges(&ranges).await.unwrap();
            assert_eq!(&read[0][..], bytes(&dictionary), "{ranges:?}");
        }
        assert_eq!(reader.dictionaries_skipped.value(), 1);
        // Without the footer the reader cannot tell a dictionary page: it reads what it is asked.
        assert_eq!(
            &blind.read_ranges(&[dictionary.clone(), last.clone()]).await.unwrap()[0][..],
            bytes(&dictionary)
        );
    }

    /// Over an object store the dictionary page comes in the same GET as the data pages after
    /// it, and is still replaced by an empty one when no page needs it.
    #[tokio::test]
    async fn over_a_store_a_dictionary_page_costs_no_request_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let (footer, content, Chunk { dictionary, first, last }) = chunk_of_dictionary_fallback_file(&path);
        let (object, counts) = crate::storage::object::testing::stored_file(&path).await;
        let mut reader = reader_of(object);
        reader.footer = Some(Arc::clone(&footer));
        let read = reader.read_ranges(&[dictionary.clone(), first.clone()]).await.unwrap();
        assert_eq!(
            &read[0][..],
            &content[dictionary.start as usize..dictionary.end as usize],
            "needed: real"
        );
        assert_eq!(counts.snapshot().gets, 1, "one GET for the dictionary and the page after it");
        let read = reader.read_ranges(&[last.clone(), dictionary.clone()]).await.unwrap();
        assert!(read[1].starts_with(&EMPTY_DICTIONARY_PAGE_HEADER), "not needed: replaced");
        assert_eq!(&read[0][..], &content[last.start as usize..last.end as usize]);
        assert_eq!(counts.snapshot().gets, 2, "and again one GET");
        assert_eq!(reader.dictionaries_skipped.value(), 1);
    }

    #[tokio::test]
    async fn rows_decoded_after_an_empty_dictionary_page_are_the_rows_written() {
        use datafusion::arrow::array::AsArray;
        use datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder;
        use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
        use futures::TryStreamExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let (values, _) = dictionary_fallback_file(&path);
        // Rows in plain pages only (the dictionary is not needed), then rows in the
        // dictionary-encoded first pages as well.
        let plain = vec![
            RowSelector::skip(3_150),
            RowSelector::select(120),
            RowSelector::skip(700),
            RowSelector::select(30),
        ];
        let both = vec![
            RowSelector::skip(5),
            RowSelector::select(20),
            RowSelector::skip(3_900),
            RowSelector::select(75),
        ];
        for (selectors, replaced) in [(plain, 1), (both, 0)] {
            let mut expected = Vec::new();
            let mut row = 0;
            for s in &selectors {
                if !s.skip {
                    expected.extend_from_slice(&values[row..row + s.row_count]);
                }
                row += s.row_count;
            }
            let reader = reader(&path);
            let skipped = reader.dictionaries_skipped.clone();
            let options = ArrowReaderOptions::new()
                .with_page_index_policy(datafusion::parquet::file::metadata::PageIndexPolicy::Required);
            let stream = ParquetRecordBatchStreamBuilder::new_with_options(reader, options)
                .await
                .unwrap()
                .with_row_selection(RowSelection::from(selectors))
                .build()
                .unwrap();
            let batches: Vec<_> = stream.try_collect().await.unwrap();
            let got: Vec<String> = batches
                .iter()
                .flat_map(|b| {
                    b.column(0).as_string::<i32>().iter().map(|v| v.unwrap().to_owned()).collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(got, expected);
            assert_eq!(skipped.value(), replaced);
        }
    }
}

#[cfg(test)]
mod read_ahead_tests {
    use datafusion::arrow::array::{BooleanArray, Int64Array, RecordBatch};
    use datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder;
    use datafusion::parquet::arrow::ProjectionMask;
    use datafusion::parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter, RowSelection, RowSelector};
    use datafusion::parquet::file::metadata::PageIndexPolicy;
    use futures::TryStreamExt;

    use super::*;
    use crate::storage::object::Prefetched;
    use crate::storage::read_ahead::tests::{ROW_GROUP, file};

    /// Reads rows with 250 <= id < 262 of each row group of the read-ahead test file from an
    /// object store, as a filtered scan does: the page index keeps rows 200..300 of each row
    /// group, the filter reads `id`, then the other columns are read for the rows that matched.
    /// Returns the batches, the GETs made for pages and the pages read ahead.
    async fn filtered_read(
        path: &std::path::Path,
        columns: Option<&[&str]>,
    ) -> (Vec<RecordBatch>, u64, usize) {
        let (object, counts) = crate::storage::object::testing::stored_file(path).await;
        let mut reader = super::tests::reader_of(object);
        reader.columns = columns.map(|c| Arc::new(c.iter().map(|c| c.to_string()).collect()));
        let read_ahead = reader.pages_read_ahead.clone();
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let builder = ParquetRecordBatchStreamBuilder::new_with_options(reader, options).await.unwrap();
        let (filtered, projected) = (
            ProjectionMask::leaves(builder.parquet_schema(), [0]),
            ProjectionMask::leaves(builder.parquet_schema(), [0, 1, 2]),
        );
        let filter = ArrowPredicateFn::new(filtered, |batch: RecordBatch| {
            let id = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            Ok(id
                .values()
                .iter()
                .map(|i| Some((250..262).contains(&(i % ROW_GROUP as i64))))
                .collect::<BooleanArray>())
        });
        let selection: Vec<RowSelector> = (0..2)
            .flat_map(|_| {
                [RowSelector::skip(200), RowSelector::select(100), RowSelector::skip(ROW_GROUP - 300)]
            })
            .collect();
        let before = counts.snapshot().gets;
        let stream = builder
            .with_projection(projected)
            .with_row_selection(RowSelection::from(selection))
            .with_row_filter(RowFilter::new(vec![Box::new(filter)]))
            .build()
            .unwrap();
        let batches: Vec<RecordBatch> = stream.try_collect().await.unwrap();
        (batches, counts.snapshot().gets - before, read_ahead.value())
    }

    /// Only a read that makes a request brings pages ahead: a first step served from bytes in
    /// memory (the end of the file the footer was read with) fetches nothing, since the rows it
    /// holds may all be rejected. The next step, which makes a request, reads ahead.
    #[tokio::test]
    async fn a_step_served_from_memory_reads_nothing_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let footer = file(&path);
        let page = |column: usize| {
            let location = &footer.offset_index().unwrap()[1][column].page_locations()[2];
            location.offset as u64..(location.offset + i64::from(location.compressed_page_size)) as u64
        };
        let (id, name) = (page(0), page(1));
        let content = std::fs::read(&path).unwrap();
        let held = footer.row_group(1).column(0).byte_range();
        let held = held.0..held.0 + held.1;
        let in_memory = Prefetched::new(
            held.start,
            Bytes::copy_from_slice(&content[held.start as usize..held.end as usize]),
        );
        let (object, counts) = crate::storage::object::testing::stored_file(&path).await;
        let mut reader = super::tests::reader_of(object.with_prefetched(in_memory));
        reader.footer = Some(Arc::clone(&footer));
        reader.columns = Some(Arc::new(["id", "name", "text"].map(String::from).into()));
        let read_ahead = reader.pages_read_ahead.clone();

        let got = reader.read_ranges(std::slice::from_ref(&id)).await.unwrap();
        assert_eq!(got[0], content[id.start as usize..id.end as usize]);
        assert_eq!((counts.snapshot().gets, read_ahead.value()), (0, 0), "served from memory");

        let got = reader.read_ranges(std::slice::from_ref(&name)).await.unwrap();
        assert_eq!(got[0], content[name.start as usize..name.end as usize]);
        assert_eq!((counts.snapshot().gets, read_ahead.value()), (1, 1), "`text` read ahead with `name`");
    }

    #[tokio::test]
    async fn over_a_store_a_filtered_read_makes_one_request_per_row_group_and_reads_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        file(&path);
        let (expected, gets_without, none) = filtered_read(&path, None).await;
        let (batches, gets, read_ahead) = filtered_read(&path, Some(&["id", "name", "text"])).await;
        assert_eq!(batches, expected);
        let ids: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
            .collect();
        assert_eq!(ids, (250..262).chain(1250..1262).collect::<Vec<_>>());
        assert_eq!(none, 0);
        assert!(read_ahead > 0);
        // Without reading ahead: the `id` pages, then the other columns' pages, per row group.
        assert_eq!(gets_without, 4);
        assert_eq!(gets, 2, "one GET per row group");
    }
}
