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

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

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
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;
use futures::future::BoxFuture;

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
        let metrics = ParquetFileMetrics::new(partition_index, file.path().as_ref(), metrics);
        Ok(Box::new(LocalFileReader {
            path,
            inode,
            file: None,
            partitioned_file: file,
            metrics,
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

    /// Reads `ranges`, merging those less than [`COALESCE_GAP`] apart into one read.
    fn read_ranges(&mut self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, ParquetError> {
        let mut order: Vec<usize> = (0..ranges.len()).collect();
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
        Ok(out)
    }
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
            DFParquetMetadata::new(&self.store, &self.partitioned_file.object_meta)
                .with_file_metadata_cache(Some(Arc::clone(&self.metadata_cache)))
                .with_metadata_size_hint(self.metadata_size_hint)
                .with_page_index_policy(options.map(|o| o.column_index_policy()))
                .fetch_metadata()
                .await
                .map_err(|e| ParquetError::External(Box::new(e)))
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
}
