use datafusion::arrow::array::{BooleanArray, Int64Array, RecordBatch};
use datafusion::parquet::arrow::ParquetRecordBatchStreamBuilder;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::{ArrowPredicateFn, RowFilter, RowSelection, RowSelector};
use datafusion::parquet::file::metadata::PageIndexPolicy;
use futures::TryStreamExt;

use super::*;
use crate::storage::object::Prefetched;
use crate::storage::pages::read_ahead_tests::{ROW_GROUP, file};

/// Reads rows with 250 <= id < 262 of each row group of the read-ahead test file from an
/// object store, as a filtered scan does: the page index keeps rows 200..300 of each row
/// group, the filter reads `id`, then the other columns are read for the rows that matched.
/// Returns the batches, the GETs made for pages and the pages read ahead.
async fn filtered_read(path: &std::path::Path, columns: Option<&[&str]>) -> (Vec<RecordBatch>, u64, usize) {
    let (object, counts) = crate::storage::object::testing::stored_file(path).await;
    let mut reader = super::tests::reader_of(object);
    super::tests::machinery(&mut reader).columns =
        columns.map(|c| Arc::new(c.iter().map(|c| c.to_string()).collect()));
    let read_ahead = super::tests::machinery(&mut reader).counts.pages_read_ahead.clone();
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
        .flat_map(|_| [RowSelector::skip(200), RowSelector::select(100), RowSelector::skip(ROW_GROUP - 300)])
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
    let in_memory =
        Prefetched::new(held.start, Bytes::copy_from_slice(&content[held.start as usize..held.end as usize]));
    let (object, counts) = crate::storage::object::testing::stored_file(&path).await;
    let mut reader = super::tests::reader_of(object.with_prefetched(in_memory));
    reader.footer = Some(Arc::clone(&footer));
    super::tests::machinery(&mut reader).columns =
        Some(Arc::new(["id", "name", "text"].map(String::from).into()));
    let read_ahead = super::tests::machinery(&mut reader).counts.pages_read_ahead.clone();

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
