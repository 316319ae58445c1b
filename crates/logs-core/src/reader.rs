//! How the scan reads the bytes of a selected file: on the calling thread.
//!
//! DataFusion's default reader goes through `object_store`'s local file system, which opens the
//! file again and hands every read to tokio's blocking pool. A point export reads about 30
//! small page ranges in each of 60 files, so those thread hand-offs were a large part of its
//! time. This reader opens each file once, checks that it is still the file the catalog
//! selected (size, modification time and inode), and reads page ranges where the scan asks
//! for them: the reads are short (pages of at most 128 KiB in files written by
//! `logs generate`), and the decoding that follows them runs on the same thread anyway.
//!
//! Footers still come from DataFusion's file-metadata cache, where the catalog put them.
//!
//! A dictionary page nothing will use is not read. A column chunk's dictionary page comes
//! before its data pages, and the Parquet reader decompresses and decodes it before any of
//! them, even when every data page it then reads is plain-encoded. Writers that fall back from
//! dictionary to plain encoding once the dictionary is full (pyarrow, DuckDB, parquet-rs: at
//! 1 MiB) leave most pages of a high-cardinality column plain, so a point export over such
//! files spent most of its time on dictionaries (measured: 294 MB of snappy for 3 600 rows
//! from 61 files written by pyarrow). The reader fetches a chunk's dictionary page together
//! with the data pages it needs from that chunk, in one request; when it can see that none of
//! those pages holds dictionary indices, it hands back an empty dictionary page instead.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileMetrics;
use datafusion::datasource::physical_plan::parquet::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::metadata::DFParquetMetadata;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::object_store::ObjectStore;
use datafusion::parquet::arrow::arrow_reader::ArrowReaderOptions;
use datafusion::parquet::arrow::async_reader::AsyncFileReader;
use datafusion::parquet::errors::{ParquetError, Result as ParquetResult};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::catalog;
use crate::page_headers::{EMPTY_DICTIONARY_PAGE_HEADER, dictionary_encoded};

/// Ranges closer than this are read at once and split afterwards.
const COALESCE_GAP: u64 = 16 * 1024;

/// A file the scan reads, as the catalog selected it, attached to its `PartitionedFile` by
/// `table.rs` (an object-store path is not always the file-system path it came from).
#[derive(Debug, Clone)]
pub struct LocalFile {
    pub path: PathBuf,
    pub inode: u64,
}

/// Makes a [`LocalFileReader`] for each file the scan opens.
#[derive(Debug)]
pub struct LocalReaderFactory {
    /// Only for footers missing from the cache (see `catalog.rs` for which ones).
    store: Arc<dyn ObjectStore>,
    metadata_cache: Arc<FileMetadataCache>,
}

impl LocalReaderFactory {
    pub fn new(store: Arc<dyn ObjectStore>, metadata_cache: Arc<FileMetadataCache>) -> LocalReaderFactory {
        LocalReaderFactory { store, metadata_cache }
    }
}

impl ParquetFileReaderFactory for LocalReaderFactory {
    fn create_reader(
        &self,
        partition_index: usize,
        file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<Box<dyn AsyncFileReader + Send>> {
        let LocalFile { path, inode } = file
            .extension::<LocalFile>()
            .ok_or_else(|| DataFusionError::Internal(format!("no local path for {}", file.path())))?
            .clone();
        let dictionaries_skipped = MetricBuilder::new(metrics)
            .with_new_label("filename", file.path().to_string())
            .counter("dictionary_pages_not_read", partition_index);
        let metrics = ParquetFileMetrics::new(partition_index, file.path().as_ref(), metrics);
        Ok(Box::new(LocalFileReader {
            path,
            inode,
            file: None,
            partitioned_file: file,
            metrics,
            dictionaries_skipped,
            footer: None,
            dictionary_pages: None,
            store: Arc::clone(&self.store),
            metadata_cache: Arc::clone(&self.metadata_cache),
            metadata_size_hint,
        }))
    }
}

/// Reads one selected file (see the module documentation).
pub struct LocalFileReader {
    path: PathBuf,
    inode: u64,
    /// Opened, and checked against the selection, on the first read.
    file: Option<File>,
    partitioned_file: PartitionedFile,
    metrics: ParquetFileMetrics,
    /// Dictionary pages replaced by an empty one (see the module documentation).
    dictionaries_skipped: Count,
    /// The footer the scan got from [`AsyncFileReader::get_metadata`].
    footer: Option<Arc<ParquetMetaData>>,
    /// By the offset of each dictionary page in the file: where the chunk's data pages start
    /// and where the chunk ends. Built from `footer`, or from the cached footer, on the first
    /// read of several ranges.
    dictionary_pages: Option<HashMap<u64, Range<u64>>>,
    store: Arc<dyn ObjectStore>,
    metadata_cache: Arc<FileMetadataCache>,
    metadata_size_hint: Option<usize>,
}

impl LocalFileReader {
    fn open(&mut self) -> Result<&File, ParquetError> {
        if self.file.is_none() {
            let file = File::open(&self.path).map_err(|e| self.io_error(e))?;
            let meta = file.metadata().map_err(|e| self.io_error(e))?;
            let modified = meta.modified().map(DateTime::<Utc>::from).map_err(|e| self.io_error(e))?;
            let selected = &self.partitioned_file.object_meta;
            if meta.len() != selected.size || modified != selected.last_modified || meta.ino() != self.inode {
                return Err(ParquetError::External(
                    format!(
                        "{}: the file changed after the export selected it (size {} -> {}, modified {} -> {}, inode {} -> {})",
                        self.path.display(),
                        selected.size,
                        meta.len(),
                        selected.last_modified,
                        modified,
                        self.inode,
                        meta.ino()
                    )
                    .into(),
                ));
            }
            self.file = Some(file);
        }
        Ok(self.file.as_ref().expect("opened above"))
    }

    fn io_error(&self, e: std::io::Error) -> ParquetError {
        ParquetError::External(format!("{}: {e}", self.path.display()).into())
    }

    fn read(&mut self, range: Range<u64>) -> Result<Bytes, ParquetError> {
        let size = self.partitioned_file.object_meta.size;
        if range.start > range.end || range.end > size {
            return Err(ParquetError::External(
                format!("{}: range {range:?} is outside the file's {size} bytes", self.path.display()).into(),
            ));
        }
        let len = (range.end - range.start) as usize;
        // Read into spare capacity: a zeroed buffer would cost a memset of every byte read.
        let mut buffer = Vec::with_capacity(len);
        let mut file = self.open()?;
        let read = file
            .seek(SeekFrom::Start(range.start))
            .and_then(|_| file.take(len as u64).read_to_end(&mut buffer));
        match read {
            Ok(n) if n == len => {}
            Ok(n) => {
                return Err(self.io_error(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    format!("{n} of {len} bytes at {} read", range.start),
                )));
            }
            Err(e) => return Err(self.io_error(e)),
        }
        self.metrics.bytes_scanned.add(len);
        Ok(Bytes::from(buffer))
    }

    /// Reads `ranges`, merging those less than [`COALESCE_GAP`] apart into one read, and
    /// replacing each dictionary page none of the data pages asked for with it needs.
    fn read_ranges(&mut self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, ParquetError> {
        let dictionaries = self.dictionary_ranges(ranges);
        let mut order: Vec<usize> = (0..ranges.len()).filter(|i| !dictionaries.contains_key(i)).collect();
        order.sort_by_key(|&i| ranges[i].start);
        let mut out = vec![Bytes::new(); ranges.len()];
        let mut i = 0;
        while i < order.len() {
            let first = &ranges[order[i]];
            let (start, mut end, mut j) = (first.start, first.end, i + 1);
            while j < order.len() && ranges[order[j]].start <= end.saturating_add(COALESCE_GAP) {
                end = end.max(ranges[order[j]].end);
                j += 1;
            }
            let merged = self.read(start..end)?;
            for &k in &order[i..j] {
                let r = &ranges[k];
                out[k] = merged.slice((r.start - start) as usize..(r.end - start) as usize);
            }
            i = j;
        }
        for (i, data_pages) in dictionaries {
            let mut pages = ranges.iter().zip(&out).filter(|(r, _)| data_pages.contains(&r.start)).peekable();
            let unused =
                pages.peek().is_some() && pages.all(|(_, page)| dictionary_encoded(page) == Some(false));
            out[i] = match unused.then(|| empty_dictionary_page(ranges[i].end - ranges[i].start)).flatten() {
                Some(page) => {
                    self.dictionaries_skipped.add(1);
                    page
                }
                None => self.read(ranges[i].clone())?,
            };
        }
        Ok(out)
    }

    /// The requested ranges that are a column chunk's whole dictionary page, by index, each
    /// with the range of the chunk's data pages.
    fn dictionary_ranges(&mut self, ranges: &[Range<u64>]) -> HashMap<usize, Range<u64>> {
        if self.dictionary_pages.is_none() {
            // The scan may read a file through another reader than the one it asked for the
            // footer; the footer is then the one in the cache.
            let footer = self.footer.clone().or_else(|| {
                catalog::cached_footer(self.metadata_cache.as_ref(), &self.partitioned_file.object_meta)
            });
            self.dictionary_pages = footer.map(|footer| dictionary_pages(&footer));
        }
        let Some(pages) = &self.dictionary_pages else { return HashMap::new() };
        let dictionary = |r: &Range<u64>| pages.get(&r.start).filter(|data| data.start == r.end).cloned();
        ranges.iter().enumerate().filter_map(|(i, r)| Some((i, dictionary(r)?))).collect()
    }
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

impl AsyncFileReader for LocalFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        futures::future::ready(self.read(range)).boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, ParquetResult<Vec<Bytes>>> {
        futures::future::ready(self.read_ranges(&ranges)).boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
        async move {
            let footer = DFParquetMetadata::new(&self.store, &self.partitioned_file.object_meta)
                .with_file_metadata_cache(Some(Arc::clone(&self.metadata_cache)))
                .with_metadata_size_hint(self.metadata_size_hint)
                .with_page_index_policy(options.map(|o| o.column_index_policy()))
                .fetch_metadata()
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))?;
            self.footer = Some(Arc::clone(&footer));
            self.dictionary_pages = None;
            Ok(footer)
        }
        .boxed()
    }
}

impl Drop for LocalFileReader {
    fn drop(&mut self) {
        let ratio = &self.metrics.scan_efficiency_ratio;
        ratio.add_part(self.metrics.bytes_scanned.value());
        ratio.set_total(self.partitioned_file.object_meta.size as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::object_store::ObjectMeta;
    use datafusion::object_store::local::LocalFileSystem;
    use datafusion::object_store::path::Path as ObjectPath;

    fn reader(path: &std::path::Path) -> LocalFileReader {
        let meta = std::fs::metadata(path).unwrap();
        let object_meta = ObjectMeta {
            location: ObjectPath::from_absolute_path(path).unwrap(),
            last_modified: DateTime::<Utc>::from(meta.modified().unwrap()),
            size: meta.len(),
            e_tag: None,
            version: None,
        };
        let file = PartitionedFile::new_from_meta(object_meta)
            .with_extension(LocalFile { path: path.to_owned(), inode: meta.ino() });
        let runtime = RuntimeEnvBuilder::new().build_arc().unwrap();
        let factory = LocalReaderFactory::new(
            Arc::new(LocalFileSystem::new()),
            runtime.cache_manager.get_file_metadata_cache(),
        );
        let metrics = ExecutionPlanMetricsSet::new();
        let metrics = ParquetFileMetrics::new(0, file.path().as_ref(), &metrics);
        LocalFileReader {
            path: path.to_owned(),
            inode: meta.ino(),
            file: None,
            partitioned_file: file,
            metrics,
            dictionaries_skipped: Count::new(),
            footer: None,
            dictionary_pages: None,
            store: factory.store,
            metadata_cache: factory.metadata_cache,
            metadata_size_hint: None,
        }
    }

    #[test]
    fn ranges_in_any_order_overlapping_or_far_apart_read_exactly_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
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
        let read = reader.read_ranges(&ranges).unwrap();
        for (range, bytes) in ranges.iter().zip(&read) {
            assert_eq!(&bytes[..], &content[range.start as usize..range.end as usize], "{range:?}");
        }
        // Two reads: 0..100, and 100_000..200_000 (which holds the other four).
        assert_eq!(reader.metrics.bytes_scanned.value(), 100 + 100_000, "merged reads");
        let error = reader.read_ranges(&[10..20, 199_990..200_001]).unwrap_err().to_string();
        assert!(error.contains("outside the file's 200000 bytes"), "{error}");
    }

    #[test]
    fn a_file_that_changed_after_selection_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        std::fs::write(&path, vec![1u8; 1000]).unwrap();
        let mut grown = reader(&path);
        std::fs::write(&path, vec![1u8; 2000]).unwrap();
        let error = grown.read(0..10).unwrap_err().to_string();
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
        let error = renamed_over.read(0..10).unwrap_err().to_string();
        assert!(error.contains("changed after the export selected it"), "{error}");
    }

    /// A file of one string column of 4 000 distinct values, one row group: pages of 100
    /// rows, dictionary-encoded until the 4 KiB dictionary is full and plain after that,
    /// Snappy, with an offset index. Returns the values and the footer.
    fn dictionary_fallback_file(path: &std::path::Path) -> (Vec<String>, Arc<ParquetMetaData>) {
        use datafusion::arrow::array::{RecordBatch, StringArray};
        use datafusion::parquet::arrow::ArrowWriter;
        use datafusion::parquet::basic::Compression;
        use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
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
        let mut writer =
            ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), Some(properties)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let footer = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .parse_and_finish(&File::open(path).unwrap())
            .unwrap();
        (values, Arc::new(footer))
    }

    #[test]
    fn a_dictionary_page_that_only_plain_pages_follow_is_replaced_by_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.parquet");
        let (_, footer) = dictionary_fallback_file(&path);
        let content = std::fs::read(&path).unwrap();
        let pages = footer.offset_index().unwrap()[0][0].page_locations();
        let page = |i: usize| {
            pages[i].offset as u64..(pages[i].offset + i64::from(pages[i].compressed_page_size)) as u64
        };
        let bytes = |r: &Range<u64>| &content[r.start as usize..r.end as usize];
        let (first, last) = (page(0), page(pages.len() - 1));
        assert_eq!(dictionary_encoded(bytes(&first)), Some(true));
        assert_eq!(dictionary_encoded(bytes(&last)), Some(false));
        let dictionary = footer.row_group(0).column(0).byte_range().0..first.start;
        assert!(dictionary.end - dictionary.start > 200, "a real dictionary page");

        let mut blind = reader(&path);
        let mut reader = reader(&path);
        reader.footer = Some(Arc::clone(&footer));
        let read = reader.read_ranges(&[last.clone(), dictionary.clone()]).unwrap();
        assert_eq!(&read[0][..], bytes(&last));
        assert_eq!(read[1].len(), bytes(&dictionary).len());
        assert!(read[1].starts_with(&EMPTY_DICTIONARY_PAGE_HEADER));
        assert_eq!(reader.dictionaries_skipped.value(), 1);
        // With a dictionary-encoded page among those asked for, or with no data page at all
        // (then what follows is unknown), the dictionary page is read.
        for ranges in [vec![dictionary.clone(), last.clone(), first.clone()], vec![dictionary.clone()]] {
            let read = reader.read_ranges(&ranges).unwrap();
            assert_eq!(&read[0][..], bytes(&dictionary), "{ranges:?}");
        }
        assert_eq!(reader.dictionaries_skipped.value(), 1);
        // Without the footer the reader cannot tell a dictionary page: it reads what it is asked.
        assert_eq!(
            &blind.read_ranges(&[dictionary.clone(), last.clone()]).unwrap()[0][..],
            bytes(&dictionary)
        );
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
