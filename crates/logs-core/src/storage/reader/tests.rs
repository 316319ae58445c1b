use super::*;
use crate::storage::object::testing;
use crate::storage::pages::PageMachinery;
use crate::storage::pages::{EMPTY_DICTIONARY_PAGE_HEADER, PartialPages, dictionary_encoded};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::metrics::Count;

fn reader(path: &std::path::Path) -> ScanReader {
    let (object, _) = testing::local_file(path);
    reader_of(object)
}

pub(super) fn reader_of(object: ObjectFile) -> ScanReader {
    let runtime = RuntimeEnvBuilder::new().build_arc().unwrap();
    let metrics = ExecutionPlanMetricsSet::new();
    let budget = FetchBudget::new(u64::MAX).share(&metrics);
    let metrics = ReaderMetrics::new(&metrics, 0);
    let plan = PagePlan { machinery: PageMachinery::ON, columns: None, filters: None };
    let pages = PageReads::new(&object, &plan, PageCounts::default());
    ScanReader {
        object,
        budget,
        row_groups: Arc::from([]),
        metrics,
        footer: None,
        pages,
        metadata_cache: runtime.cache_manager.get_file_metadata_cache(),
        parsed: Arc::default(),
        progress: Arc::default(),
        read_pages: false,
    }
}

/// The page machinery of `reader`.
pub(super) fn machinery(reader: &mut ScanReader) -> &mut PageReads {
    reader.pages.as_mut().expect("the page machinery is on")
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
    drop(pages);
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

/// The readers of a scan partition share one set of metrics, whatever the number of files
/// they read: a scan of thousands of small files registers a few, not thousands.
#[tokio::test]
async fn a_partitions_readers_register_one_set_of_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<SelectedFile> = (0..20)
        .map(|i| {
            let (path, _) = testing::patterned_file(dir.path(), &format!("f{i:02}"), 100);
            let object = testing::local_file(&path).0;
            SelectedFile {
                name: object.name().to_owned(),
                object: object.meta().clone(),
                rows: 1,
                row_groups: 1,
                all_in_range: true,
                prefetched: Default::default(),
                row_group_spans: Arc::from([]),
            }
        })
        .collect();
    let runtime = RuntimeEnvBuilder::new().build_arc().unwrap();
    let settings = ScanSettings { fetched_limit: u64::MAX, machinery: PageMachinery::ON };
    let readers = ScanReaders::new(
        Backend::Local { root: dir.path().to_owned() },
        &files,
        runtime.cache_manager.get_file_metadata_cache(),
        Arc::default(),
        Arc::default(),
        settings,
    )
    .reading(HashSet::new());
    let metrics = ExecutionPlanMetricsSet::new();
    for (i, file) in files.iter().enumerate() {
        let file = PartitionedFile::new_from_meta(file.object.clone());
        let mut reader = readers.create_reader(i % 2, file, None, &metrics).unwrap();
        reader.get_bytes(0..10).await.unwrap();
    }
    let all = metrics.clone_inner();
    let scanned: Vec<_> = all.iter().filter(|m| m.value().name() == "bytes_scanned").collect();
    assert_eq!(scanned.len(), 2, "one per partition");
    assert_eq!(scanned.iter().map(|m| m.value().as_usize()).sum::<usize>(), 200);
    assert!(all.iter().count() <= 12, "{} metrics", all.iter().count());
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
    (values, crate::storage::pages::read_ahead_tests::write(path, &batch, properties))
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
    assert_eq!(machinery(&mut reader).counts.dictionaries_skipped.value(), 1);
    // With a dictionary-encoded page among those asked for, or with no data page at all
    // (then what follows is unknown), the dictionary page is read.
    for ranges in [vec![dictionary.clone(), last.clone(), first.clone()], vec![dictionary.clone()]] {
        let read = reader.read_ranges(&ranges).await.unwrap();
        assert_eq!(&read[0][..], bytes(&dictionary), "{ranges:?}");
    }
    assert_eq!(machinery(&mut reader).counts.dictionaries_skipped.value(), 1);
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
    assert_eq!(&read[0][..], &content[dictionary.start as usize..dictionary.end as usize], "needed: real");
    assert_eq!(counts.snapshot().gets, 1, "one GET for the dictionary and the page after it");
    let read = reader.read_ranges(&[last.clone(), dictionary.clone()]).await.unwrap();
    assert!(read[1].starts_with(&EMPTY_DICTIONARY_PAGE_HEADER), "not needed: replaced");
    assert_eq!(&read[0][..], &content[last.start as usize..last.end as usize]);
    assert_eq!(counts.snapshot().gets, 2, "and again one GET");
    assert_eq!(machinery(&mut reader).counts.dictionaries_skipped.value(), 1);
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
        let mut reader = reader(&path);
        let skipped = machinery(&mut reader).counts.dictionaries_skipped.clone();
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

/// From a local file, each page the partial-page rewriter may rewrite (a text column's, not a
/// filter column's) is read into a buffer of its own, which its rewrite then writes over; from
/// a store, pages are fetched together.
#[tokio::test]
async fn pages_that_may_be_rewritten_are_read_apart_from_a_local_file_only() {
    use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
    use datafusion::parquet::basic::{Compression, ZstdLevel};
    use datafusion::parquet::file::properties::WriterProperties;

    use crate::storage::pages::TextFilters;
    use crate::storage::pages::read_ahead_tests::write;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.parquet");
    let rows = 1_000;
    let batch = RecordBatch::try_from_iter([
        ("name", Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("n{}", i % 7)))) as _),
        (
            "text",
            Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("{i} {}", "t".repeat(200)))))
                as _,
        ),
        ("id", Arc::new(Int64Array::from_iter_values(0..rows)) as _),
    ])
    .unwrap();
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(false)
        .set_data_page_row_count_limit(100)
        .set_write_batch_size(100)
        .build();
    let footer = write(&path, &batch, properties);
    let pages = |column: usize| -> Vec<Range<u64>> {
        let locations = footer.offset_index().unwrap()[0][column].page_locations();
        locations.iter().map(|l| l.offset as u64..l.offset as u64 + l.compressed_page_size as u64).collect()
    };
    let ranges: Vec<Range<u64>> = (0..3).flat_map(pages).collect();
    let (names, texts) = (pages(0).len(), pages(1).len());
    assert!(texts >= 10, "{texts} pages");
    let every: Vec<usize> = (0..ranges.len()).collect();
    let filters = TextFilters::from(vec![("name".to_owned(), "n3".to_owned())]);

    let (local, _) = testing::local_file(&path);
    let (stored, _) = testing::stored_file(&path).await;
    for (object, apart) in [(local, (names..names + texts).collect()), (stored, HashSet::new())] {
        let mut reader = reader_of(object);
        reader.footer = Some(Arc::clone(&footer));
        machinery(&mut reader).partial = Some(PartialPages::new(filters.clone(), Count::new()));
        let footer = reader.footer();
        assert_eq!(machinery(&mut reader).read_apart(footer.as_deref(), &ranges, &every), apart);
        // The pages read are the file's, whichever way they were read (the rows of `n3` are one
        // in seven: too many for the pages to be rewritten).
        let content = std::fs::read(&path).unwrap();
        let got = reader.read_ranges(&ranges).await.unwrap();
        for (range, bytes) in ranges.iter().zip(got) {
            assert_eq!(bytes, content[range.start as usize..range.end as usize]);
        }
    }
}

#[test]
fn the_footers_the_readers_parsed_are_kept_for_the_next_reader_the_last_ones_only() {
    let dir = tempfile::tempdir().unwrap();
    let footer = crate::storage::pages::read_ahead_tests::file(&dir.path().join("f.parquet"));
    let parsed = ParsedFooters::default();
    let at = |i: usize| ObjectPath::from(format!("data/{i}.parquet"));
    for i in 0..PARSED_FOOTERS_KEPT + 3 {
        parsed.put(&at(i), &footer);
    }
    for i in 0..3 {
        assert!(parsed.get(&at(i)).is_none(), "{i} was let go");
    }
    for i in 3..PARSED_FOOTERS_KEPT + 3 {
        assert!(Arc::ptr_eq(&parsed.get(&at(i)).unwrap(), &footer), "{i} is kept");
    }
}
