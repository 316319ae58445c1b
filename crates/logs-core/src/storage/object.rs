//! How the storage layer reads one object: ranged reads that succeed only while the object is
//! still the one the catalog listed, merged when close, issued concurrently, and counted.
//!
//! Over an object store every read is a GET with `If-Match` on the ETag the listing gave (or
//! the version, or `If-Unmodified-Since` where the store has neither), so an object deleted or
//! overwritten during an export fails it, naming the key, and never yields a short or mixed
//! export. Close ranges are fetched as one ([`STORE_READS`]). `object_store` retries transient
//! failures.
//!
//! A local folder is the one other kind of source, and the whole of its difference is decided
//! when an [`ObjectFile`] is made: its reads are positioned reads on the calling thread
//! (`local.rs`), and its [`Reads`] settings are [`LOCAL_READS`] instead of [`STORE_READS`].
//! Code above this module asks the settings, never the kind of store.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore};

use crate::error::{Error, Result};
use crate::storage::local::LocalFile;
use crate::storage::spool::{Spool, Spooled};

/// How the reads of one kind of source are made: chosen once per store, carried by each
/// [`ObjectFile`], and asked by the code that plans reads (the footer's first read, the page
/// machinery, the offset-index rebuild) instead of the kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Each read costs a round trip (a request to an object store), not a system call: worth
    /// bringing more in one read, and keeping what was brought.
    pub(crate) round_trips: bool,
    /// Ranges at most this far apart are read as one.
    pub(crate) coalesce_gap: u64,
    /// Bytes read from the end of a file at first, for its footer.
    pub(crate) footer_tail: u64,
    /// Bytes read at a time while walking a column chunk's page headers.
    pub(crate) header_window: u64,
    /// A file at most this long is read whole with its footer, and the scan reads it from
    /// memory: one read instead of two or more.
    pub(crate) small_file: u64,
}

/// A local read costs a system call, not a round trip: only ranges 16 KiB apart are read as
/// one; 64 KiB of a file's end at first (the
/// footers of the dataset's files fit); 4 KiB of page headers at a time (the pages of other
/// writers are often 1 MiB apart, and a larger window would copy what the headers do not need);
/// a file of up to 256 KiB (a streaming writer's, a late arrival's) whole.
pub(crate) const LOCAL_READS: Reads = Reads {
    round_trips: false,
    coalesce_gap: 16 * 1024,
    footer_tail: 64 * 1024,
    header_window: 4 * 1024,
    small_file: 256 * 1024,
};

/// Over an object store: ranges at most 2 MiB apart are fetched in one GET (reading through a
/// gap is worth it while it takes less than another request's first byte: latency ×
/// bandwidth, 10-20 ms at 100 MiB/s or more within a region, as in the Parquet readers of
/// Arrow C++ and DuckDB), 10 at once (`object_store::coalesce_ranges`); the last 512 KiB of an object at first, where the
/// footer, page index and bloom filters of the dataset's files usually fit (a small file comes
/// whole); 64 KiB of page headers at a time, so that small pages cost no request each.
pub(crate) const STORE_READS: Reads = Reads {
    round_trips: true,
    coalesce_gap: 2 * 1024 * 1024,
    footer_tail: 512 * 1024,
    header_window: 64 * 1024,
    small_file: 512 * 1024,
};

/// Where the objects of a dataset are read from.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// A local folder, listed with `std::fs` and read with positioned reads (`local.rs`).
    Local { root: PathBuf },
    /// Any object store, below `prefix`. `sorted_listing`: the store lists keys in their
    /// order (S3 does), so a listing can stop after the last key it needs.
    Store { store: Arc<dyn ObjectStore>, prefix: ObjectPath, url: String, sorted_listing: bool },
}

impl Backend {
    /// How the objects of this backend are read.
    pub(crate) fn reads(&self) -> Reads {
        match self {
            Backend::Local { .. } => LOCAL_READS,
            Backend::Store { .. } => STORE_READS,
        }
    }
}

/// Requests made to the store by one export (or by one catalog call), and bytes fetched.
#[derive(Debug, Default)]
pub struct RequestCounts {
    lists: AtomicU64,
    gets: AtomicU64,
    bytes: AtomicU64,
}

/// A snapshot of [`RequestCounts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// Listings of a folder or prefix (a listing of more than 1 000 keys takes one LIST request
    /// per 1 000 on S3).
    pub lists: u64,
    /// Ranged reads: GET requests to an object store, positioned reads of a local file.
    pub gets: u64,
    pub bytes: u64,
}

impl RequestCounts {
    pub fn snapshot(&self) -> Requests {
        Requests {
            lists: self.lists.load(Ordering::Relaxed),
            gets: self.gets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn listed(&self) {
        self.lists.fetch_add(1, Ordering::Relaxed);
    }

    fn fetched(&self, bytes: usize) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// One object of the dataset, as listed: reads of it fail once it is no longer that object.
#[derive(Debug)]
pub(crate) struct ObjectFile {
    /// As errors name it: the local path, or `s3://bucket/key`.
    name: Arc<str>,
    meta: ObjectMeta,
    counts: Arc<RequestCounts>,
    /// Bytes read from this object through this value (the scan's `bytes_scanned`).
    read: AtomicU64,
    source: Source,
    reads: Reads,
    /// Bytes of this object already in memory: reads inside them make no request.
    prefetched: Prefetched,
}

/// Bytes of one object held, fetched earlier while the object was the one listed (so they need
/// no new check): its end, read with the footer (all of it, for a small object). In memory, or
/// in the export's spool on local disk (`spool.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prefetched {
    /// Where the bytes start in the object.
    start: u64,
    held: Held,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Held {
    Memory(Bytes),
    Spooled(Spooled),
}

impl Default for Prefetched {
    fn default() -> Prefetched {
        Prefetched::new(0, Bytes::new())
    }
}

impl Prefetched {
    /// `bytes`, found at `start` in the object.
    pub(crate) fn new(start: u64, bytes: Bytes) -> Prefetched {
        Prefetched { start, held: Held::Memory(bytes) }
    }

    /// The bytes of `range`, if all of it is held (and, in a spool, can be read).
    fn get(&self, range: &Range<u64>) -> Option<Bytes> {
        if !self.covers(range) {
            return None;
        }
        let at = range.start - self.start;
        match &self.held {
            Held::Memory(bytes) => Some(bytes.slice(at as usize..(range.end - self.start) as usize)),
            Held::Spooled(spooled) => spooled.read(at, range.end - range.start),
        }
    }

    /// Whether all of `range` is held.
    pub(crate) fn covers(&self, range: &Range<u64>) -> bool {
        self.len() > 0 && self.start <= range.start && range.end <= self.start + self.len()
    }

    /// Bytes held, in memory or in a spool.
    pub(crate) fn len(&self) -> u64 {
        match &self.held {
            Held::Memory(bytes) => bytes.len() as u64,
            Held::Spooled(spooled) => spooled.len(),
        }
    }

    /// Bytes held in memory.
    pub(crate) fn in_memory(&self) -> u64 {
        match &self.held {
            Held::Memory(bytes) => bytes.len() as u64,
            Held::Spooled(_) => 0,
        }
    }

    /// The last `len` bytes held, written to `spool`: in it, or nothing if they do not fit (or
    /// are not in memory).
    pub(crate) fn spooled(&self, len: u64, spool: &mut Spool) -> Prefetched {
        let Held::Memory(bytes) = &self.held else { return Prefetched::default() };
        let skip = bytes.len().saturating_sub(usize::try_from(len).unwrap_or(usize::MAX));
        match spool.keep(&bytes[skip..]) {
            Some(spooled) => Prefetched { start: self.start + skip as u64, held: Held::Spooled(spooled) },
            None => Prefetched::default(),
        }
    }

    /// The last bytes of the object held in memory (empty if none are, or if the held bytes do
    /// not reach its end).
    pub(crate) fn memory_tail(&self, object_size: u64) -> &[u8] {
        match &self.held {
            Held::Memory(bytes) if self.start + bytes.len() as u64 == object_size => bytes,
            _ => &[],
        }
    }
}

#[derive(Debug)]
enum Source {
    Local(LocalFile),
    Store(Arc<dyn ObjectStore>),
}

impl ObjectFile {
    pub(crate) fn new(
        backend: &Backend,
        name: Arc<str>,
        meta: ObjectMeta,
        counts: Arc<RequestCounts>,
    ) -> ObjectFile {
        let source = match backend {
            // The name of a local file is its path (`local.rs` lists only UTF-8 names).
            Backend::Local { .. } => Source::Local(LocalFile::new(PathBuf::from(&*name))),
            Backend::Store { store, .. } => Source::Store(Arc::clone(store)),
        };
        let reads = backend.reads();
        let prefetched = Prefetched::default();
        ObjectFile { name, meta, counts, read: AtomicU64::new(0), source, reads, prefetched }
    }

    /// This object with `prefetched` in memory.
    pub(crate) fn with_prefetched(mut self, prefetched: Prefetched) -> ObjectFile {
        self.prefetched = prefetched;
        self
    }

    /// Reads the last `len` bytes of the object (all of it if smaller) in one request and
    /// holds them: later reads inside them make none.
    pub(crate) async fn prefetch_tail(&mut self, len: u64) -> Result<()> {
        let start = self.meta.size.saturating_sub(len);
        let bytes = self.get(start..self.meta.size).await?;
        self.prefetched = Prefetched::new(start, bytes);
        Ok(())
    }

    /// What is held in memory of this object.
    pub(crate) fn prefetched(&self) -> &Prefetched {
        &self.prefetched
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    /// How this object's reads are made.
    pub(crate) fn reads(&self) -> &Reads {
        &self.reads
    }

    pub(crate) fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    pub(crate) fn size(&self) -> u64 {
        self.meta.size
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Storage { path: Some(self.name.to_string()), message: message.into() }
    }

    /// The bytes of `range`.
    pub(crate) async fn get(&self, range: Range<u64>) -> Result<Bytes> {
        if range.start > range.end || range.end > self.meta.size {
            let size = self.meta.size;
            return Err(self.error(format!("range {range:?} is outside the object's {size} bytes")));
        }
        if let Some(bytes) = self.get_held(&range) {
            return Ok(bytes);
        }
        let bytes = match &self.source {
            Source::Local(file) => file.read(self.meta.e_tag.as_deref(), range.clone())?,
            Source::Store(store) => self.get_from_store(store, range.clone()).await?,
        };
        self.counts.fetched(bytes.len());
        self.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(bytes)
    }

    /// The bytes of each of `ranges`, in their order: those held in memory from it, the others
    /// fetched, ranges close together at once.
    pub(crate) async fn get_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let mut out: Vec<Option<Bytes>> = ranges.iter().map(|r| self.get_held(r)).collect();
        let missing: Vec<Range<u64>> =
            ranges.iter().zip(&out).filter(|(_, held)| held.is_none()).map(|(r, _)| r.clone()).collect();
        // Merged where at most `coalesce_gap` apart, 10 reads in flight (a local file's reads
        // complete when first polled: one after the other).
        let fetched =
            object_store::coalesce_ranges(&missing, |range| self.get(range), self.reads.coalesce_gap).await?;
        let mut fetched = fetched.into_iter();
        for slot in out.iter_mut().filter(|slot| slot.is_none()) {
            *slot = fetched.next();
        }
        Ok(out.into_iter().map(|bytes| bytes.expect("every range is held or fetched")).collect())
    }

    /// Whether the bytes of `range` are held (in memory or in the export's spool): reading them
    /// makes no request.
    pub(crate) fn holds(&self, range: &Range<u64>) -> bool {
        range.start == range.end || self.prefetched.covers(range)
    }

    /// The bytes of `range` if they are held (an empty range always is).
    fn get_held(&self, range: &Range<u64>) -> Option<Bytes> {
        if range.start == range.end && range.end <= self.meta.size {
            return Some(Bytes::new());
        }
        let bytes = self.prefetched.get(range)?;
        self.read.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Some(bytes)
    }

    async fn get_from_store(&self, store: &Arc<dyn ObjectStore>, range: Range<u64>) -> Result<Bytes> {
        let len = range.end - range.start;
        let mut options =
            GetOptions { range: Some(GetRange::Bounded(range.clone())), ..GetOptions::default() };
        match (&self.meta.e_tag, &self.meta.version) {
            (_, Some(version)) => options.version = Some(version.clone()),
            (Some(e_tag), None) => options.if_match = Some(e_tag.clone()),
            (None, None) => options.if_unmodified_since = Some(self.meta.last_modified),
        }
        let result = store.get_opts(&self.meta.location, options).await.map_err(|e| self.store_error(e))?;
        let bytes = result.bytes().await.map_err(|e| self.store_error(e))?;
        if bytes.len() as u64 != len {
            return Err(self.error(format!(
                "{} of {len} bytes at {} were returned",
                bytes.len(),
                range.start
            )));
        }
        Ok(bytes)
    }

    fn store_error(&self, e: object_store::Error) -> Error {
        match e {
            object_store::Error::NotFound { .. } => {
                self.error("the object was deleted after the export selected it")
            }
            object_store::Error::Precondition { .. } => {
                self.error("the object was replaced after the export selected it (its ETag changed)")
            }
            other => self.error(describe(&other)),
        }
    }
}

/// An object store's error as errors show it: the response body of an S3 error (XML that may
/// echo the access key id, the string signed and the signature) cut down to its code and
/// message.
pub(crate) fn describe(e: &object_store::Error) -> String {
    let text = e.to_string();
    let Some(start) = text.find('<') else { return text };
    let body = &text[start..];
    let field = |tag: &str| {
        let open = format!("<{tag}>");
        let after = &body[body.find(&open)? + open.len()..];
        Some(after[..after.find('<')?].to_owned())
    };
    let mut out = text[..start].trim_end().trim_end_matches(':').to_owned();
    if let Some(code) = field("Code") {
        out.push_str(&format!(": {code}"));
    }
    if let Some(message) = field("Message") {
        out.push_str(&format!(" ({message})"));
    }
    out
}

/// Parquet's footer reader fetches through this.
impl datafusion::parquet::arrow::async_reader::MetadataFetch for &ObjectFile {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, datafusion::parquet::errors::Result<Bytes>> {
        let file: &ObjectFile = self;
        async move {
            file.get(range)
                .await
                .map_err(|e| datafusion::parquet::errors::ParquetError::External(Box::new(e)))
        }
        .boxed()
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use std::path::{Path, PathBuf};

    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use crate::storage::object::*;

    /// `len` bytes, each unlike its neighbours, written to `name` in `dir`: its path and bytes.
    pub(crate) fn patterned_file(dir: &Path, name: &str, len: u64) -> (PathBuf, Vec<u8>) {
        let content: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let path = dir.join(name);
        std::fs::write(&path, &content).unwrap();
        (path, content)
    }

    /// Asserts that each of `read` holds exactly the bytes of its range of `content`.
    pub(crate) fn assert_exact(ranges: &[Range<u64>], read: &[Bytes], content: &[u8]) {
        assert_eq!(ranges.len(), read.len());
        for (range, bytes) in ranges.iter().zip(read) {
            assert_eq!(bytes[..], content[range.start as usize..range.end as usize], "{range:?}");
        }
    }

    /// The local file at `path`, as the local listing sees it, and its read counts.
    pub(crate) fn local_file(path: &Path) -> (ObjectFile, Arc<RequestCounts>) {
        let listing = crate::storage::local::list(path.parent().unwrap()).unwrap().unwrap();
        let listed = listing.objects.into_iter().find(|o| path.ends_with(&o.file_name)).unwrap();
        let counts = Arc::new(RequestCounts::default());
        let backend = Backend::Local { root: path.parent().unwrap().to_owned() };
        (ObjectFile::new(&backend, listed.name, listed.meta, Arc::clone(&counts)), counts)
    }

    /// A copy of the file at `path` in an in-memory object store, and its read counts.
    pub(crate) async fn stored_file(path: &Path) -> (ObjectFile, Arc<RequestCounts>) {
        let store = Arc::new(InMemory::new());
        let location = ObjectPath::from("data/f.parquet");
        store.put(&location, std::fs::read(path).unwrap().into()).await.unwrap();
        let meta = store.head(&location).await.unwrap();
        let counts = Arc::new(RequestCounts::default());
        let backend = Backend::Store {
            store,
            prefix: ObjectPath::from("data"),
            url: "memory://".into(),
            sorted_listing: false,
        };
        (ObjectFile::new(&backend, Arc::from("memory://data/f.parquet"), meta, Arc::clone(&counts)), counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_error_bodies_are_cut_to_their_code_and_message() {
        let e = object_store::Error::Generic {
            store: "S3",
            source: "Error performing list request: Client error with status 403 Forbidden: <?xml version=\"1.0\"?>\
                     <Error><Code>InvalidAccessKeyId</Code><Message>The key does not exist.</Message>\
                     <AWSAccessKeyId>AKIAEXAMPLE</AWSAccessKeyId><SignatureProvided>abc</SignatureProvided></Error>"
                .into(),
        };
        let text = describe(&e);
        assert!(text.ends_with("403 Forbidden: InvalidAccessKeyId (The key does not exist.)"), "{text}");
        assert!(!text.contains("AKIAEXAMPLE") && !text.contains("abc"), "{text}");
        let plain = object_store::Error::Generic { store: "S3", source: "connection refused".into() };
        assert!(describe(&plain).ends_with("connection refused"));
    }

    /// After `prefetch_tail`, reads inside the tail make no request; a call mixing ranges inside
    /// and outside it fetches only the outside ones, and every range gets exactly its bytes.
    #[tokio::test]
    async fn reads_inside_the_prefetched_tail_make_no_request() {
        let dir = tempfile::tempdir().unwrap();
        let (path, content) = testing::patterned_file(dir.path(), "f", 5_000_000);
        let (mut file, counts) = testing::stored_file(&path).await;
        file.prefetch_tail(1_000_000).await.unwrap();
        assert_eq!(counts.snapshot().gets, 1);
        assert_eq!(file.get(4_500_000..4_500_100).await.unwrap()[..], content[4_500_000..4_500_100]);
        assert_eq!(counts.snapshot().gets, 1);
        let ranges = [4_999_000..5_000_000, 0..10, 3_999_990..4_000_010, 4_000_000..4_000_000];
        testing::assert_exact(&ranges, &file.get_ranges(&ranges).await.unwrap(), &content);
        // 0..10 and 3_999_990..4_000_010 (which starts before the tail): one merged GET each.
        assert_eq!(counts.snapshot(), Requests { lists: 0, gets: 3, bytes: 1_000_000 + 10 + 20 });
        assert_eq!(file.bytes_read(), 1_000_000 + 100 + 1000 + 10 + 20);
        // The scan's copy of the object holds what the catalog's did.
        let (scan, counts) = testing::stored_file(&path).await;
        let scan = scan.with_prefetched(file.prefetched().clone());
        assert_eq!(scan.get(4_100_000..4_200_000).await.unwrap()[..], content[4_100_000..4_200_000]);
        assert_eq!(counts.snapshot().gets, 0);
    }

    /// An object smaller than the tail read with its footer is held whole: no read of it makes
    /// another request.
    #[tokio::test]
    async fn a_small_object_read_whole_serves_every_read() {
        let dir = tempfile::tempdir().unwrap();
        let (path, content) = testing::patterned_file(dir.path(), "f", 10_000);
        let (mut file, counts) = testing::stored_file(&path).await;
        file.prefetch_tail(512 * 1024).await.unwrap();
        assert_eq!(counts.snapshot(), Requests { lists: 0, gets: 1, bytes: 10_000 });
        let ranges = [0..10, 4_000..6_000, 9_990..10_000, 0..10_000];
        testing::assert_exact(&ranges, &file.get_ranges(&ranges).await.unwrap(), &content);
        assert_eq!(file.get(5..6).await.unwrap()[..], content[5..6]);
        assert!(ranges.iter().all(|r| file.holds(r)));
        assert_eq!(counts.snapshot().gets, 1);
    }

    /// An empty range inside the object is empty bytes and no request; a range that runs
    /// backwards or past the object's end is an error naming the object, and no request.
    #[tokio::test]
    async fn reads_outside_the_object_are_refused_and_empty_ones_make_no_request() {
        let dir = tempfile::tempdir().unwrap();
        let (path, content) = testing::patterned_file(dir.path(), "f", 1000);
        let (file, counts) = testing::stored_file(&path).await;
        for range in [0..0, 500..500, 1000..1000] {
            assert!(file.get(range).await.unwrap().is_empty());
        }
        #[allow(clippy::reversed_empty_ranges)]
        for range in [6..5, 999..1001, 1001..1001] {
            let message = file.get(range.clone()).await.unwrap_err().to_string();
            assert!(
                message.contains("f.parquet") && message.contains("outside the object's 1000 bytes"),
                "{range:?}: {message}"
            );
        }
        assert_eq!(counts.snapshot().gets, 0);
        assert_eq!(file.get(999..1000).await.unwrap()[..], content[999..]);
        assert_eq!(counts.snapshot().gets, 1);
    }

    /// A local file cut short after the export opened it: a read past its new end is an error
    /// that says how much was read, never fewer bytes than asked for.
    #[tokio::test]
    async fn a_short_read_of_a_local_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (path, content) = testing::patterned_file(dir.path(), "f.parquet", 1000);
        let (file, _) = testing::local_file(&path);
        assert_eq!(file.get(0..10).await.unwrap()[..], content[..10]);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(600).unwrap();
        let message = file.get(500..700).await.unwrap_err().to_string();
        assert!(message.contains("f.parquet") && message.contains("100 of 200 bytes at 500"), "{message}");
    }

    /// A store's reads merge across up to `STORE_READS.coalesce_gap` bytes, a local file's
    /// across up to `LOCAL_READS.coalesce_gap`; one byte more makes two reads.
    #[tokio::test]
    async fn each_source_merges_across_its_own_gap() {
        let dir = tempfile::tempdir().unwrap();
        let (path, content) = testing::patterned_file(dir.path(), "f.parquet", 3 * STORE_READS.coalesce_gap);
        let (stored, stored_counts) = testing::stored_file(&path).await;
        let (local, local_counts) = testing::local_file(&path);
        for (file, counts, gap) in [
            (&stored, &stored_counts, STORE_READS.coalesce_gap),
            (&local, &local_counts, LOCAL_READS.coalesce_gap),
        ] {
            for (apart, reads) in [(gap, 1), (gap + 1, 2)] {
                let ranges = [0..10, 10 + apart..20 + apart];
                let before = counts.snapshot().gets;
                let read = file.get_ranges(&ranges).await.unwrap();
                assert_eq!(counts.snapshot().gets - before, reads, "{apart} bytes apart, gap {gap}");
                testing::assert_exact(&ranges, &read, &content);
            }
        }
    }
}
