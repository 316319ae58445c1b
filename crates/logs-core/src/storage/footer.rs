//! Parquet footers: read through an [`ObjectFile`], completed with what the scan needs to fetch
//! single pages, and kept in DataFusion's file-metadata cache.
//!
//! The cache is keyed by the object's location, and an entry serves only the object with the
//! same size, modification time, ETag and version: an object replaced under the same key (even
//! within the same second, and with the same size) is never served a stale footer. Every
//! lookup and insertion goes through this module.

use std::sync::Arc;

use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::execution::cache::cache_manager::{CachedFileMetadataEntry, FileMetadataCache};
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::FOOTER_SIZE;
use datafusion::parquet::file::metadata::{
    FooterTail, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader,
};
use object_store::ObjectMeta;

use crate::error::{Error, Result};
use crate::storage::object::{ObjectFile, Prefetched};
use crate::storage::pages::offset_index;

/// The footer of `file`, without its page index. The end of the file is fetched first
/// (`Reads::footer_tail`, or all of a small file: `Reads::small_file`), in one request, and
/// `file` holds it: reading the page index and bloom filters from it later makes no request.
pub(crate) async fn read(file: &mut ObjectFile) -> Result<ParquetMetaData> {
    let reads = *file.reads();
    // `prefetch_tail` reads all of a file shorter than it is asked to.
    let tail = if file.size() <= reads.small_file { reads.small_file } else { reads.footer_tail };
    file.prefetch_tail(tail).await?;
    ParquetMetaDataReader::new().load_and_finish(&*file, file.size()).await.map_err(|e| unreadable(file, e))
}

/// What the scan should keep of the bytes `file` holds since [`read`]: over a store, all of
/// them (the page index, bloom filters and last pages, or the whole of a small object), each
/// of which the scan would otherwise fetch in a request of its own; of a local file, only a
/// small file held whole (the tail of a larger one would be read again at little cost).
pub(crate) fn kept_for_scan(file: &ObjectFile) -> Prefetched {
    let reads = file.reads();
    if reads.round_trips || file.size() <= reads.small_file {
        file.prefetched().clone()
    } else {
        Prefetched::default()
    }
}

/// How many bytes at the end of a Parquet file its footer takes, its length and magic included,
/// read from `tail` (the file's last bytes): `None` if `tail` does not hold all of them.
pub(crate) fn footer_len(tail: &[u8]) -> Option<u64> {
    let last: &[u8; FOOTER_SIZE] = tail.last_chunk()?;
    let len = FooterTail::try_new(last).ok()?.metadata_length() as u64 + FOOTER_SIZE as u64;
    (len <= tail.len() as u64).then_some(len)
}

/// `footer` with the page index of `file`. For a file written without one, when the scan will
/// pick rows within it (`selects_rows`), an offset index rebuilt from its page headers, so that
/// the scan fetches only the pages it needs; a scan that reads every row needs none, and walking
/// the headers would cost a read per page (a request per page in a store).
pub(crate) async fn complete(
    file: &ObjectFile,
    footer: &ParquetMetaData,
    selects_rows: bool,
) -> Result<ParquetMetaData> {
    let mut reader = ParquetMetaDataReader::new_with_metadata(footer.clone())
        .with_page_index_policy(PageIndexPolicy::Optional);
    reader.load_page_index(file).await.map_err(|e| unreadable(file, e))?;
    let footer = reader.finish().map_err(|e| unreadable(file, e))?;
    if !rebuilds_offset_index(file, selects_rows) {
        return Ok(footer);
    }
    Ok(match offset_index::with_rebuilt_offset_index(file, &footer).await {
        Some(rebuilt) => rebuilt,
        None => footer,
    })
}

/// Why a footer could not be read: the store's own error (a read of `file` failed), or the
/// file's fault.
fn unreadable(file: &ObjectFile, e: ParquetError) -> Error {
    match e {
        ParquetError::External(inner) => match inner.downcast::<Error>() {
            Ok(error) => *error,
            Err(inner) => not_parquet(file, ParquetError::External(inner)),
        },
        e => not_parquet(file, e),
    }
}

fn not_parquet(file: &ObjectFile, e: ParquetError) -> Error {
    Error::Storage {
        path: Some(file.name().to_owned()),
        message: format!("not a readable Parquet file ({e})"),
    }
}

/// The cached footer of the object `meta` describes, if the cache holds one for it.
pub(crate) fn cached(cache: &FileMetadataCache, meta: &ObjectMeta) -> Option<Arc<ParquetMetaData>> {
    let entry = cache.get(&meta.location)?;
    let same = entry.meta.size == meta.size
        && entry.meta.last_modified == meta.last_modified
        && entry.meta.e_tag == meta.e_tag
        && entry.meta.version == meta.version;
    if !same {
        return None;
    }
    let footer = entry.file_metadata.as_any().downcast_ref::<CachedParquetMetaData>()?;
    Some(Arc::clone(footer.parquet_metadata()))
}

/// Caches the completed footer ([`complete`]) of the object `meta` describes: with its page
/// index, or without one where the file has none (the scan then loads none: DataFusion loads a
/// page index only where the footer locates one).
pub(crate) fn remember(cache: &FileMetadataCache, meta: &ObjectMeta, footer: ParquetMetaData) {
    let entry = CachedParquetMetaData::new(Arc::new(footer));
    cache.put(&meta.location, CachedFileMetadataEntry::new(meta.clone(), Arc::new(entry)));
}

/// Whether the scan of an export that picks rows within `file` (`selects_rows`) needs more
/// than `footer`, cached by an export that did not: an offset index rebuilt from the page
/// headers of a file written without a page index.
pub(crate) fn lacks_offset_index(file: &ObjectFile, footer: &ParquetMetaData, selects_rows: bool) -> bool {
    rebuilds_offset_index(file, selects_rows) && footer.offset_index().is_none()
}

/// Whether an offset index is rebuilt for `file` when an export picks rows within it: from a
/// local file, or from the bytes of a small object read whole with its footer. Over a store,
/// walking the page headers of a larger object costs a request per window of them (a point
/// export over 258 streaming-ingest files: 1 177 requests, 3.0 s, against 389 requests, 1.3
/// s, reading whole column chunks).
fn rebuilds_offset_index(file: &ObjectFile, selects_rows: bool) -> bool {
    selects_rows && (!file.reads().round_trips || file.prefetched().len() == file.size())
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::parquet::arrow::ArrowWriter;
    use object_store::path::Path as ObjectPath;

    use super::*;

    /// A replaced object with the same size and modification time (within a second, as S3
    /// reports it) but another ETag is never served the old footer.
    #[test]
    fn a_cached_footer_serves_only_the_object_with_the_same_etag() {
        let values: ArrayRef = Arc::new(Int64Array::from_iter_values(0..100));
        let batch = RecordBatch::try_from_iter([("n", values)]).unwrap();
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let footer = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Required)
            .parse_and_finish(&bytes::Bytes::from(bytes.clone()))
            .unwrap();
        let runtime = RuntimeEnvBuilder::new().build_arc().unwrap();
        let cache = runtime.cache_manager.get_file_metadata_cache();
        let meta = ObjectMeta {
            location: ObjectPath::from("a/f.parquet"),
            last_modified: chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap(),
            size: bytes.len() as u64,
            e_tag: Some("\"etag-1\"".into()),
            version: None,
        };
        remember(cache.as_ref(), &meta, footer);
        assert!(cached(cache.as_ref(), &meta).is_some());
        let replaced = ObjectMeta { e_tag: Some("\"etag-2\"".into()), ..meta.clone() };
        assert!(cached(cache.as_ref(), &replaced).is_none());
        let other_version = ObjectMeta { version: Some("v2".into()), ..meta.clone() };
        assert!(cached(cache.as_ref(), &other_version).is_none());
        let grown = ObjectMeta { size: meta.size + 1, ..meta };
        assert!(cached(cache.as_ref(), &grown).is_none());
    }

    /// A file written without a page index gets an offset index rebuilt from its page headers
    /// when an export picks rows in it, locally or from a small object held whole; not from a
    /// larger object, whose headers would cost a request per window of them.
    #[tokio::test]
    async fn the_offset_index_is_rebuilt_where_the_headers_cost_no_request() {
        use datafusion::arrow::array::StringArray;
        use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, rows: usize| {
            let text: StringArray =
                (0..rows).map(|i| Some(format!("line {i} {}", "x".repeat(i % 200)))).collect();
            let batch = RecordBatch::try_from_iter([("t", Arc::new(text) as ArrayRef)]).unwrap();
            let props = WriterProperties::builder()
                .set_offset_index_disabled(true)
                .set_statistics_enabled(EnabledStatistics::Chunk)
                .set_data_page_row_count_limit(100)
                .set_write_batch_size(100)
                .build();
            let path = dir.path().join(name);
            let file = std::fs::File::create(&path).unwrap();
            let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            path
        };
        let (small, large) = (write("small.parquet", 2_000), write("large.parquet", 20_000));
        for (path, held_whole) in [(&small, true), (&large, false)] {
            let (mut stored, counts) = crate::storage::object::testing::stored_file(path).await;
            assert_eq!(stored.size() <= stored.reads().small_file, held_whole, "{}", stored.size());
            let footer = read(&mut stored).await.unwrap();
            assert!(footer.offset_index().is_none(), "written without one");
            let gets = counts.snapshot().gets;
            let completed = complete(&stored, &footer, true).await.unwrap();
            assert_eq!(completed.offset_index().is_some(), held_whole, "{}", path.display());
            assert_eq!(counts.snapshot().gets, gets, "no request for the headers");
            assert!(!lacks_offset_index(&stored, &completed, true));

            let (local, _) = crate::storage::object::testing::local_file(path);
            assert!(complete(&local, &footer, true).await.unwrap().offset_index().is_some());
            assert!(complete(&local, &footer, false).await.unwrap().offset_index().is_none());
        }
    }

    /// A local file of up to `Reads::small_file` is read whole with its footer and kept for
    /// the scan, which then reads nothing; of a larger one the scan keeps nothing.
    #[tokio::test]
    async fn a_small_local_file_is_read_once_and_a_large_ones_tail_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, rows: i64| {
            let values: ArrayRef =
                Arc::new(Int64Array::from_iter_values((0..rows).map(|n| n * 7919 % 1_000_003)));
            let batch = RecordBatch::try_from_iter([("n", values)]).unwrap();
            let path = dir.path().join(name);
            let mut writer =
                ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), batch.schema(), None).unwrap();
            writer.write(&batch).unwrap();
            writer.close().unwrap();
            path
        };
        let small = write("small.parquet", 20_000);
        let (mut file, counts) = crate::storage::object::testing::local_file(&small);
        let size = file.size();
        assert!(size > file.reads().footer_tail && size <= file.reads().small_file, "{size} bytes");
        read(&mut file).await.unwrap();
        assert_eq!(counts.snapshot().gets, 1);
        let kept = kept_for_scan(&file);
        assert_eq!(kept.len(), size);
        let scan = file.with_prefetched(kept);
        scan.get_ranges(&[0..size / 2, size / 2..size]).await.unwrap();
        assert_eq!(counts.snapshot().gets, 1, "the scan read the small file again");

        let large = write("large.parquet", 200_000);
        let (mut file, _) = crate::storage::object::testing::local_file(&large);
        assert!(file.size() > file.reads().small_file);
        read(&mut file).await.unwrap();
        assert_eq!(kept_for_scan(&file).len(), 0);
    }
}
