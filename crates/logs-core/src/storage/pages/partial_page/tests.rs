//! `PageRewriter` against parquet-rs: rewritten pages spliced into files it wrote and read back.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::compute::{cast, concat, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use datafusion::parquet::arrow::{ArrowWriter, ProjectionMask};
use datafusion::parquet::basic::{Compression, Encoding, ZstdLevel};
use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use datafusion::parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesBuilder, WriterVersion,
};

use rand::rngs::StdRng;
use rand::{Rng as _, RngCore, SeedableRng};

use super::*;
use crate::storage::pages::thrift::{Compact, dictionary_encoded, read_struct};

const VERSIONS: [WriterVersion; 2] = [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0];

/// The largest block of a zstd frame: the rewriter decompresses less than this past the bytes
/// it needs.
const BLOCK: usize = 128 * 1024;

/// Deterministic data and row choices.
struct Rng(StdRng);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(StdRng::seed_from_u64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.random_range(0..n)
    }
}

/// Log-like text with multi-byte characters, of at least a length in `lens` (none for 0).
fn text(rng: &mut Rng, lens: std::ops::Range<usize>) -> String {
    let len = lens.start + rng.below(lens.len().max(1));
    const WORDS: [&str; 10] = [
        "GET /api/v1/users",
        "status=200",
        "timeout",
        "café",
        "日本語",
        "user=",
        "\n",
        "latency_ms=",
        "ok",
        "é",
    ];
    let mut text = String::new();
    while text.len() < len {
        text.push_str(WORDS[rng.below(WORDS.len())]);
        text.push_str(&rng.below(100_000).to_string());
        text.push(' ');
    }
    text
}

/// Zstd, PLAIN byte arrays (writer v2 would otherwise fall back to DELTA_BYTE_ARRAY), pages
/// of 100 rows at most, an offset index and page statistics, and v2 pages compressed even
/// where that does not make them smaller (as other writers do).
fn properties(version: WriterVersion) -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_writer_version(version)
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::PLAIN)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_data_page_row_count_limit(100)
        .set_write_batch_size(10)
        .set_data_page_v2_compression_ratio_threshold(1e6)
}

/// A file written in memory, its values, and its metadata as three readers see it.
struct Written {
    bytes: Bytes,
    /// Each column's values, whole.
    values: Vec<ArrayRef>,
    /// With the page index: pages are sliced by their offset-index locations.
    indexed: ArrowReaderMetadata,
    /// The same, decoding strings and binaries as views.
    views: ArrowReaderMetadata,
    /// Without the page index: pages are found by walking their headers.
    walked: ArrowReaderMetadata,
}

fn write(batch: &RecordBatch, properties: WriterProperties) -> Written {
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), Some(properties)).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
    let bytes = Bytes::from(bytes);
    let indexed_options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
    let indexed = ArrowReaderMetadata::load(&bytes, indexed_options.clone()).unwrap();
    let view_fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => f.as_ref().clone().with_data_type(DataType::Utf8View),
            DataType::Binary => f.as_ref().clone().with_data_type(DataType::BinaryView),
            _ => f.as_ref().clone(),
        })
        .collect();
    let view_options = indexed_options.with_schema(Arc::new(Schema::new(view_fields)));
    let views = ArrowReaderMetadata::try_new(Arc::clone(indexed.metadata()), view_options).unwrap();
    let walked = ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::new()).unwrap();
    assert!(walked.metadata().offset_index().is_none());
    let values = (0..batch.num_columns()).map(|c| read_column(&bytes, &indexed, c, None).unwrap()).collect();
    Written { bytes, values, indexed, views, walked }
}

/// Column `column` of the file, or only the rows `rows` (row group, rows of it) selects.
fn read_column(
    bytes: &Bytes,
    meta: &ArrowReaderMetadata,
    column: usize,
    rows: Option<(usize, Vec<RowSelector>)>,
) -> Result<ArrayRef, String> {
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone());
    let mask = ProjectionMask::roots(builder.parquet_schema(), [column]);
    let mut builder = builder.with_projection(mask);
    if let Some((row_group, selectors)) = rows {
        builder = builder.with_row_groups(vec![row_group]).with_row_selection(RowSelection::from(selectors));
    }
    let reader = builder.build().map_err(|e| e.to_string())?;
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(0).as_ref()).collect();
    concat(&arrays).map_err(|e| e.to_string())
}

/// A data page, as the offset index locates it.
#[derive(Debug, Clone)]
struct Page {
    column: usize,
    row_group: usize,
    /// The file's row that is the page's first.
    first_row: usize,
    rows: usize,
    offset: usize,
    len: usize,
}

fn data_pages(meta: &ParquetMetaData, column: usize) -> Vec<Page> {
    let mut pages = Vec::new();
    let mut group_start = 0;
    for (row_group, index) in meta.offset_index().unwrap().iter().enumerate() {
        let locations = index[column].page_locations();
        let group_rows = meta.row_group(row_group).num_rows() as usize;
        for (i, location) in locations.iter().enumerate() {
            let first = location.first_row_index as usize;
            let end = locations.get(i + 1).map_or(group_rows, |next| next.first_row_index as usize);
            pages.push(Page {
                column,
                row_group,
                first_row: group_start + first,
                rows: end - first,
                offset: location.offset as usize,
                len: location.compressed_page_size as usize,
            });
        }
        group_start += group_rows;
    }
    pages
}

impl Written {
    fn page(&self, page: &Page) -> &[u8] {
        &self.bytes[page.offset..page.offset + page.len]
    }

    /// The file with `page` replaced by `bytes`.
    fn spliced(&self, page: &Page, bytes: &[u8]) -> Bytes {
        let mut spliced = self.bytes.to_vec();
        spliced[page.offset..page.offset + page.len].copy_from_slice(bytes);
        Bytes::from(spliced)
    }

    /// Rows `rows` of `page`, read from `bytes` (this file, or one spliced into it).
    fn read_rows(
        &self,
        bytes: &Bytes,
        meta: &ArrowReaderMetadata,
        page: &Page,
        rows: &[u32],
    ) -> Result<ArrayRef, String> {
        let group_start: usize =
            (0..page.row_group).map(|g| self.indexed.metadata().row_group(g).num_rows() as usize).sum();
        let mut selectors = Vec::new();
        let mut at = group_start;
        for &row in rows {
            let row = page.first_row + row as usize;
            if row > at {
                selectors.push(RowSelector::skip(row - at));
            }
            selectors.push(RowSelector::select(1));
            at = row + 1;
        }
        read_column(bytes, meta, page.column, Some((page.row_group, selectors)))
    }

    /// The file's values at rows `rows` of `page`.
    fn expected(&self, page: &Page, rows: &[u32]) -> ArrayRef {
        let indices: UInt32Array = rows.iter().map(|&r| page.first_row as u32 + r).collect();
        take(&self.values[page.column], &indices, None).unwrap()
    }

    /// Rewrites `page` for `rows`; if it was, splices it in and asserts that the three
    /// readers read the file's own values at those rows from it. Returns whether it was.
    fn check(&self, rewriter: &mut PageRewriter, page: &Page, optional: bool, rows: &[u32]) -> bool {
        let original = self.page(page);
        let Some(rewritten) = rewriter.rewrite(original, optional, rows) else { return false };
        assert_eq!(rewritten.len(), original.len());
        assert_ne!(&rewritten[..], original, "{page:?}");
        let spliced = self.spliced(page, &rewritten);
        let expected = self.expected(page, rows);
        for meta in [&self.indexed, &self.walked, &self.views] {
            let got = self
                .read_rows(&spliced, meta, page, rows)
                .unwrap_or_else(|e| panic!("{page:?} {rows:?}: {e}"));
            let got = cast(&got, expected.data_type()).unwrap();
            assert_eq!(&got, &expected, "{page:?} {rows:?}");
        }
        true
    }
}

/// First row, last row, a middle row, up to 5 scattered rows.
fn selections(rng: &mut Rng, rows: usize) -> Vec<Vec<u32>> {
    let n = rows as u32;
    let mut scattered: Vec<u32> = (0..5).map(|_| rng.below(rows) as u32).collect();
    scattered.sort_unstable();
    scattered.dedup();
    vec![vec![0], vec![n - 1], vec![n / 2], scattered]
}

/// 1 000 rows in two row groups: a required text column (with empty strings), an optional
/// one (random nulls and runs of them), and a binary column of random bytes (mostly not
/// UTF-8, some empty).
fn mixed_batch() -> RecordBatch {
    let mut rng = Rng::new(1);
    let rows = 1_000;
    let required: StringArray =
        (0..rows).map(|i| Some(if i % 13 == 0 { String::new() } else { text(&mut rng, 0..150) })).collect();
    let optional: StringArray = (0..rows)
        .map(|i| {
            let null_run = (150..210).contains(&i) || (430..445).contains(&i) || (820..890).contains(&i);
            (!null_run && rng.below(10) >= 3).then(|| text(&mut rng, 0..120))
        })
        .collect();
    let binary: BinaryArray = (0..rows)
        .map(|i| {
            let len = if i % 11 == 0 { 0 } else { rng.below(100) };
            Some((0..len).map(|_| rng.next() as u8).collect::<Vec<u8>>())
        })
        .collect();
    let columns: [(&str, ArrayRef); 3] =
        [("required", Arc::new(required)), ("optional", Arc::new(optional)), ("binary", Arc::new(binary))];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn rewritten_pages_read_back_as_written(version: WriterVersion) {
    let file = write(&mixed_batch(), properties(version).set_max_row_group_row_count(Some(600)).build());
    let meta = file.indexed.metadata();
    assert_eq!(meta.num_row_groups(), 2);
    let mut rewriter = PageRewriter::new();
    let mut rng = Rng::new(2);
    let mut all_but_one = 0;
    for (column, optional) in [(0, false), (1, true), (2, false)] {
        let pages = data_pages(meta, column);
        assert!(pages.len() >= 10, "{} pages", pages.len());
        for page in &pages {
            for rows in selections(&mut rng, page.rows) {
                assert!(file.check(&mut rewriter, page, optional, &rows), "{page:?} {rows:?}");
            }
            // Every row: read back as written if it fits.
            let every: Vec<u32> = (0..page.rows as u32).collect();
            file.check(&mut rewriter, page, optional, &every);
            // Every row but the last value: fits where the values do not compress.
            let values = file.expected(page, &every);
            let last = every.iter().rposition(|&r| values.is_valid(r as usize)).unwrap();
            let rows = [&every[..last], &every[last + 1..]].concat();
            if file.check(&mut rewriter, page, optional, &rows) {
                all_but_one += 1;
            }
            if optional {
                // Only null rows: nothing of a v2 page is decompressed.
                let nulls: Vec<u32> = every.iter().copied().filter(|&r| values.is_null(r as usize)).collect();
                assert!(!nulls.is_empty() && nulls.len() < page.rows, "{page:?}");
                let before = rewriter.decompressed();
                assert!(file.check(&mut rewriter, page, optional, &nulls), "{page:?}");
                if version == WriterVersion::PARQUET_2_0 {
                    assert_eq!(rewriter.decompressed(), before);
                }
            }
        }
    }
    // Pages of random bytes, where the value left out is longer than the header grows.
    assert!(all_but_one > 0);
}

#[test]
fn rewritten_v1_pages_read_back_as_written() {
    rewritten_pages_read_back_as_written(WriterVersion::PARQUET_1_0);
}

#[test]
fn rewritten_v2_pages_read_back_as_written() {
    rewritten_pages_read_back_as_written(WriterVersion::PARQUET_2_0);
}

/// Pages of about 300 KB of text, several zstd blocks each: a first row is read without
/// decompressing the page whole, a last row with.
#[test]
fn decompression_stops_after_the_last_selected_value() {
    let mut rng = Rng::new(3);
    let values: StringArray = (0..60).map(|_| Some(text(&mut rng, 20_000..40_000))).collect();
    let batch = RecordBatch::try_from_iter([("long", Arc::new(values) as ArrayRef)]).unwrap();
    for version in VERSIONS {
        let properties = properties(version).set_write_batch_size(2).set_data_page_size_limit(256 * 1024);
        let file = write(&batch, properties.build());
        let pages = data_pages(file.indexed.metadata(), 0);
        assert!(pages.len() >= 4, "{} pages", pages.len());
        let mut rewriter = PageRewriter::new();
        // The last page may be short.
        for page in &pages[..pages.len() - 1] {
            let size = parse_data_page(file.page(page), false).unwrap().uncompressed_size as u64;
            assert!(size > 2 * 128 * 1024, "{size}");
            let before = rewriter.decompressed();
            assert!(file.check(&mut rewriter, page, false, &[0]));
            let first = rewriter.decompressed() - before;
            let needed = 4 + file.values[0].as_string::<i32>().value(page.first_row).len() as u64;
            assert!(first < size / 2 && first < needed + BLOCK as u64, "{first} of {size}");
            let before = rewriter.decompressed();
            assert!(file.check(&mut rewriter, page, false, &[page.rows as u32 - 1]));
            assert_eq!(rewriter.decompressed() - before, size);
        }
    }
}

/// [`PageRewriter::rewrite_sparse`] of a copy of `page`, of a column without nulls.
fn rewrite_sparse(rewriter: &mut PageRewriter, page: &[u8], rows: &[u32]) -> Option<Bytes> {
    let mut page = Bytes::copy_from_slice(page);
    rewriter.rewrite_sparse(&mut page, false, rows).then_some(page)
}

/// `rewrite_sparse` rewrites a page for one row in eight or fewer, and only while their
/// values at the page's average length take at most half its bytes; otherwise it leaves
/// the page as it is without decompressing any of it.
#[test]
fn only_sparse_selections_are_rewritten() {
    let batch = mixed_batch();
    let file = write(&batch, properties(WriterVersion::PARQUET_1_0).build());
    let mut rewriter = PageRewriter::new();
    let (mut sparse, mut dense) = (0, 0);
    for page in data_pages(file.indexed.metadata(), 0) {
        let header = parse_data_page(file.page(&page), false).unwrap();
        let eighth = (page.rows / 8) as u32;
        let fits = |rows: u32| header.uncompressed_size * rows as usize / header.num_values <= page.len / 2;
        if eighth == 0 {
            continue;
        }
        let before = rewriter.decompressed();
        let every: Vec<u32> = (0..eighth + 1).map(|i| i * 7).filter(|&r| (r as usize) < page.rows).collect();
        if every.len() as u32 == eighth + 1 {
            assert!(rewrite_sparse(&mut rewriter, file.page(&page), &every).is_none(), "{page:?}");
            assert_eq!(rewriter.decompressed(), before, "nothing is decompressed for a dense selection");
            dense += 1;
        }
        let few: Vec<u32> = (0..eighth).map(|i| i * 8).collect();
        let rewritten = rewrite_sparse(&mut rewriter, file.page(&page), &few);
        assert_eq!(rewritten.is_some(), fits(eighth), "{page:?}");
        if rewritten.is_some() {
            assert!(file.check(&mut rewriter, &page, false, &few));
            sparse += 1;
        }
    }
    assert!(sparse > 0 && dense > 0, "{sparse} sparse, {dense} dense");

    // Values that compress well: a few rows whose values, at the page's average length,
    // take three quarters of its bytes are refused without decompressing anything, though
    // they would fit.
    let mut rng = Rng::new(6);
    let values: StringArray = (0..1_000).map(|_| Some(text(&mut rng, 400..401).repeat(4))).collect();
    let batch = RecordBatch::try_from_iter([("text", Arc::new(values) as ArrayRef)]).unwrap();
    let file = write(&batch, properties(WriterVersion::PARQUET_1_0).build());
    let mut refused = 0;
    for page in data_pages(file.indexed.metadata(), 0) {
        let header = parse_data_page(file.page(&page), false).unwrap();
        let rows = page.len * 3 / 4 * header.num_values / header.uncompressed_size;
        if rows == 0 || rows * 8 > header.num_values {
            continue;
        }
        let few: Vec<u32> = (0..rows as u32).map(|i| i * 8).collect();
        let before = rewriter.decompressed();
        assert!(rewrite_sparse(&mut rewriter, file.page(&page), &few).is_none(), "{page:?}");
        assert_eq!(rewriter.decompressed(), before);
        assert!(file.check(&mut rewriter, &page, false, &few), "{page:?}: it would fit");
        refused += 1;
    }
    assert!(refused > 0, "no page compressed well enough");
}

/// A chunk whose dictionary fills up: its dictionary page and dictionary-encoded pages are
/// left as they are, its PLAIN pages are rewritten.
#[test]
fn only_plain_pages_after_dictionary_fallback_are_rewritten() {
    let mut rng = Rng::new(4);
    let values: StringArray =
        (0..1_000).map(|i| (i % 5 != 0).then(|| format!("{i} {}", text(&mut rng, 40..41)))).collect();
    let batch = RecordBatch::try_from_iter([("text", Arc::new(values) as ArrayRef)]).unwrap();
    for version in VERSIONS {
        let properties =
            properties(version).set_dictionary_enabled(true).set_dictionary_page_size_limit(2_048).build();
        let file = write(&batch, properties);
        let (mut dictionary, mut plain) = (0, 0);
        let mut rewriter = PageRewriter::new();
        for page in data_pages(file.indexed.metadata(), 0) {
            let rows = [0, page.rows as u32 / 3, page.rows as u32 - 1];
            if dictionary_encoded(file.page(&page)).unwrap() {
                dictionary += 1;
                assert!(rewriter.rewrite(file.page(&page), true, &rows).is_none());
            } else {
                plain += 1;
                assert!(file.check(&mut rewriter, &page, true, &rows));
            }
        }
        assert!(dictionary > 0 && plain > 0, "{dictionary} {plain}");
        let chunk = file.indexed.metadata().row_group(0).column(0);
        let start = chunk.dictionary_page_offset().unwrap() as usize;
        let end = chunk.data_page_offset() as usize;
        assert!(rewriter.rewrite(&file.bytes[start..end], true, &[0]).is_none());
    }
}

/// The data pages of a text column written with `properties`.
fn other_pages(properties: WriterProperties) -> Vec<Bytes> {
    let mut rng = Rng::new(5);
    let values: StringArray = (0..300).map(|_| Some(text(&mut rng, 60..61))).collect();
    let batch = RecordBatch::try_from_iter([("text", Arc::new(values) as ArrayRef)]).unwrap();
    let file = write(&batch, properties);
    data_pages(file.indexed.metadata(), 0)
        .iter()
        .map(|p| file.bytes.slice(p.offset..p.offset + p.len))
        .collect()
}

#[test]
fn pages_not_plain_or_not_zstd_are_left_as_they_are() {
    let snappy = properties(WriterVersion::PARQUET_1_0).set_compression(Compression::SNAPPY).build();
    let delta = properties(WriterVersion::PARQUET_2_0).set_encoding(Encoding::DELTA_BYTE_ARRAY).build();
    // v2 pages compressed only where that makes them a hundred times smaller: none.
    let uncompressed =
        properties(WriterVersion::PARQUET_2_0).set_data_page_v2_compression_ratio_threshold(0.01).build();
    let mut rewriter = PageRewriter::new();
    for properties in [snappy, delta, uncompressed] {
        let pages = other_pages(properties);
        assert!(pages.len() >= 3);
        for page in pages {
            assert!(rewriter.rewrite(&page, false, &[0, 1]).is_none());
        }
    }
    assert_eq!(rewriter.decompressed(), 0);
}

#[test]
fn rows_the_page_does_not_have_are_refused() {
    let pages = other_pages(properties(WriterVersion::PARQUET_1_0).build());
    let mut rewriter = PageRewriter::new();
    let page = &pages[0];
    assert!(rewriter.rewrite(page, false, &[0, 99]).is_some());
    for rows in [&[][..], &[100], &[0, 100], &[5, 3], &[3, 3], &[u32::MAX]] {
        assert!(rewriter.rewrite(page, false, rows).is_none(), "{rows:?}");
    }
    // The page, cut short or with a byte more.
    assert!(rewriter.rewrite(&page[..page.len() - 1], false, &[0]).is_none());
    assert!(rewriter.rewrite(&[&page[..], &[0]].concat(), false, &[0]).is_none());
}

/// The frames other writers may produce, handed to the decoder a block at a time: compressed,
/// raw (incompressible) and RLE blocks, with a checksum or without, one frame or two in a row,
/// with their content size, without it, and with a window descriptor before it.
/// Every prefix asked for is the start of what zstd decompresses the input to, less than a
/// block past it is decompressed, and the whole input decompresses to all of it.
#[test]
fn frames_are_decompressed_a_block_at_a_time() {
    use zstd::stream::raw::CParameter;

    let mut rng = Rng::new(9);
    let log: Vec<u8> = (0..40).flat_map(|_| text(&mut rng, 5_000..15_000).into_bytes()).collect();
    let noise: Vec<u8> = (0..300_000).map(|_| rng.next() as u8).collect();
    let run = vec![b'x'; 300_000];
    let mixed = [&log[..100_000], &run[..], &noise[..], &log[100_000..]].concat();
    let mut inflater = Inflater::default();
    for data in [&log, &noise, &run, &mixed] {
        for checksum in [false, true] {
            let mut compressor = zstd::bulk::Compressor::new(3).unwrap();
            compressor.set_parameter(CParameter::ChecksumFlag(checksum)).unwrap();
            let one = compressor.compress(data).unwrap();
            let (first, second) = data.split_at(data.len() / 3);
            let two = [compressor.compress(first).unwrap(), compressor.compress(second).unwrap()].concat();
            // Streamed, without its size in advance: a window descriptor, no content size. And
            // with its size but a window smaller than the content: both.
            let streamed = |size: Option<u64>| {
                let mut encoder = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
                encoder.include_checksum(checksum).unwrap();
                encoder.set_parameter(CParameter::WindowLog(17)).unwrap();
                encoder.set_pledged_src_size(size).unwrap();
                std::io::Write::write_all(&mut encoder, data).unwrap();
                encoder.finish().unwrap()
            };
            let (unknown_size, windowed) = (streamed(None), streamed(Some(data.len() as u64)));
            assert_eq!(unknown_size[4] & 0xE0, 0, "neither single segment nor content size");
            assert_eq!(windowed[4] & 0xE0, 0x80, "a window descriptor and 4 bytes of content size");
            for input in [one, two, unknown_size, windowed] {
                let mut frame = Frame::new(&input, data.len());
                inflater.start(frame.limit).unwrap();
                for want in [1, 1000, 150_000, 290_000, data.len()] {
                    inflater.fill(&mut frame, want).unwrap();
                    let got = inflater.bytes();
                    assert!(got.len() >= want && got.len() < want + BLOCK, "{} for {want}", got.len());
                    assert!(got == &data[..got.len()], "{want}");
                }
                assert_eq!(frame.fed, input.len(), "every block and checksum handed over");
                assert!(inflater.fill(&mut frame, data.len() + 1).is_none(), "past the limit");
            }
        }
    }
    // Not a zstd frame, a dictionary's frame, a truncated frame: nothing to decompress.
    let input = zstd::bulk::compress(&log, 3).unwrap();
    let mut with_dictionary = input.clone();
    with_dictionary[4] |= 1;
    for input in [&input[1..], &with_dictionary[..], &input[..input.len() - 1]] {
        let mut frame = Frame::new(input, log.len());
        inflater.start(frame.limit).unwrap();
        assert!(inflater.fill(&mut frame, log.len()).is_none());
    }
}

/// A page whose header says it decompresses to more than 64 MiB is left as it is before any
/// of it is decompressed (the rewriter reserves its buffer from that size).
#[test]
fn pages_over_64_mib_are_left_as_they_are() {
    let values: StringArray = (0..9).map(|i| Some(format!("{i}{}", "a".repeat(7_500_000)))).collect();
    let batch = RecordBatch::try_from_iter([("text", Arc::new(values) as ArrayRef)]).unwrap();
    for version in VERSIONS {
        let properties = properties(version).set_data_page_size_limit(usize::MAX).set_write_batch_size(9);
        let file = write(&batch, properties.build());
        let [page] = &data_pages(file.indexed.metadata(), 0)[..] else { panic!("one page") };
        let header = parse_data_page(file.page(page), false).unwrap();
        assert!(header.uncompressed_size > MAX_PAGE, "{}", header.uncompressed_size);
        let mut rewriter = PageRewriter::new();
        assert!(rewriter.rewrite(file.page(page), false, &[0]).is_none());
        assert_eq!(rewriter.decompressed(), 0);
    }
}

/// Values that compress to almost nothing do not fit decompressed: left as they are, after
/// decompressing no more than the first block.
#[test]
fn values_that_do_not_fit_leave_the_page_as_it_is() {
    let values: StringArray = (0..20).map(|i| Some(format!("{i}{}", "a".repeat(50_000)))).collect();
    let batch = RecordBatch::try_from_iter([("text", Arc::new(values) as ArrayRef)]).unwrap();
    for version in VERSIONS {
        let file = write(&batch, properties(version).set_write_batch_size(4).build());
        let mut rewriter = PageRewriter::new();
        for page in data_pages(file.indexed.metadata(), 0) {
            assert!(page.len < 50_000, "{page:?}");
            for rows in [vec![0], (0..page.rows as u32).collect()] {
                let before = rewriter.decompressed();
                assert!(rewriter.rewrite(file.page(&page), false, &rows).is_none());
                assert!(rewriter.decompressed() - before <= BLOCK as u64);
            }
        }
    }
}

/// Corrupt bytes anywhere in a page never panic; a page that is rewritten despite them reads
/// back as the corrupt page itself does, whenever the reader accepts that.
#[test]
fn corrupt_pages_never_panic() {
    use std::panic::AssertUnwindSafe;

    for version in VERSIONS {
        let file = write(&mixed_batch(), properties(version).build());
        let page = data_pages(file.indexed.metadata(), 1)[2].clone();
        let original = file.page(&page);
        let rows = [0, page.rows as u32 / 2, page.rows as u32 - 1];
        let mut rewriter = PageRewriter::new();
        let (mut agreed, mut refused) = (0, 0);
        for at in (0..original.len()).step_by(7) {
            for flip in [0x01, 0x80, 0xff] {
                let mut corrupt = original.to_vec();
                corrupt[at] ^= flip;
                let Some(rewritten) = rewriter.rewrite(&corrupt, true, &rows) else {
                    refused += 1;
                    continue;
                };
                assert_eq!(rewritten.len(), original.len());
                let ours = file.read_rows(&file.spliced(&page, &rewritten), &file.indexed, &page, &rows);
                // The reader may fail on the corrupt page, or panic (parquet 59 skips values
                // without checking their lengths).
                let theirs = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    file.read_rows(&file.spliced(&page, &corrupt), &file.indexed, &page, &rows)
                }));
                if let Ok(Ok(theirs)) = theirs {
                    assert_eq!(ours, Ok(theirs), "byte {at} ^ {flip:#x}");
                    agreed += 1;
                }
            }
        }
        assert!(agreed > 0 && refused > 0, "{agreed} {refused}");
    }
}

/// The fields of a rewritten page's header: its uncompressed and compressed sizes, and the
/// length of its levels; and where its body starts.
fn rewritten_header(page: &[u8]) -> ([usize; 3], usize) {
    let mut r = Compact { bytes: page, at: 0 };
    let (mut sizes, mut levels, mut last_id) = ([0; 2], None, 0);
    while let Some((id, kind)) = r.field_header(last_id).unwrap() {
        match id {
            2 | 3 => sizes[id as usize - 2] = r.zigzag().unwrap() as usize,
            8 => levels = read_struct(&mut r).map(|(ints, flag)| (ints[4].unwrap() as usize, flag)),
            _ => r.skip(kind, 0).unwrap(),
        }
        last_id = id;
    }
    let (levels, compressed) = levels.unwrap();
    assert_eq!(compressed, Some(true));
    ([sizes[0], sizes[1], levels], r.at)
}

/// A rewritten page is its header, its levels, its values in a frame of raw blocks that zstd
/// decompresses to exactly the rest of the page's uncompressed size, and a skippable frame
/// over the rest of the page's bytes, which are left as they were: written over the page
/// itself when nothing else holds it, and into a new buffer when something does.
#[test]
fn the_values_are_a_raw_frame_and_the_rest_of_the_page_a_skippable_one() {
    for version in VERSIONS {
        let file = write(&mixed_batch(), properties(version).build());
        let page = data_pages(file.indexed.metadata(), 1)[1].clone();
        let original = file.page(&page);
        // Two rows that are not null.
        let every: Vec<u32> = (0..page.rows as u32).collect();
        let all = file.expected(&page, &every);
        let valid: Vec<u32> = every.into_iter().filter(|&r| all.is_valid(r as usize)).collect();
        let rows = [valid[1], valid[5]];
        let expected = file.expected(&page, &rows);

        let mut unique = Bytes::copy_from_slice(original);
        let at = unique.as_ptr();
        assert!(PageRewriter::new().rewrite_sparse(&mut unique, true, &rows));
        assert_eq!(unique.as_ptr(), at, "written over the page itself");
        let shared = Bytes::copy_from_slice(original);
        let mut copy = shared.clone();
        assert!(PageRewriter::new().rewrite_sparse(&mut copy, true, &rows));
        assert_ne!(copy.as_ptr(), shared.as_ptr());
        assert_eq!(&shared[..], original, "the shared bytes are left as they are");

        for rewritten in [&unique, &copy] {
            assert_eq!(rewritten.len(), original.len());
            let ([uncompressed, compressed, levels], body) = rewritten_header(rewritten);
            assert_eq!(body + compressed, rewritten.len());
            let frames = &rewritten[body + levels..];
            let values = zstd::bulk::decompress(frames, uncompressed).unwrap();
            assert_eq!(levels + values.len(), uncompressed);
            let raw = RAW_FRAME_HEADER.len() + 4 + BLOCK_HEADER + values.len();
            assert_eq!(frames[..RAW_FRAME_HEADER.len()], RAW_FRAME_HEADER);
            assert_eq!(frames[raw..raw + 4], SKIPPABLE_MAGIC);
            let skipped = u32::from_le_bytes(frames[raw + 4..raw + 8].try_into().unwrap()) as usize;
            assert_eq!(raw + SKIPPABLE_HEADER + skipped, frames.len());
            let rest = rewritten.len() - skipped;
            if std::ptr::eq(rewritten, &unique) {
                assert_eq!(rewritten[rest..], original[rest..]);
            }
            let spliced = file.spliced(&page, rewritten);
            for meta in [&file.indexed, &file.walked, &file.views] {
                let got = file.read_rows(&spliced, meta, &page, &rows).unwrap();
                assert_eq!(&cast(&got, expected.data_type()).unwrap(), &expected);
            }
        }
    }
}

/// Selected values of more than a block's bytes (128 KiB) are split into raw blocks.
#[test]
fn values_longer_than_a_block_are_split_into_blocks() {
    let mut rng = Rng::new(7);
    let values: BinaryArray =
        (0..12).map(|_| Some((0..60_000).map(|_| rng.next() as u8).collect::<Vec<u8>>())).collect();
    let batch = RecordBatch::try_from_iter([("random", Arc::new(values) as ArrayRef)]).unwrap();
    for version in VERSIONS {
        let file = write(&batch, properties(version).set_write_batch_size(1).build());
        let pages = data_pages(file.indexed.metadata(), 0);
        assert_eq!(pages.len(), 1);
        let mut rewriter = PageRewriter::new();
        for rows in [vec![0, 1, 2, 3, 4], vec![1, 5, 9, 10, 11], (0..11).collect()] {
            assert!(file.check(&mut rewriter, &pages[0], false, &rows), "{rows:?}");
            let rewritten = rewriter.rewrite(file.page(&pages[0]), false, &rows).unwrap();
            let ([uncompressed, ..], body) = rewritten_header(&rewritten);
            assert!(uncompressed > 2 * BLOCK, "{uncompressed}");
            // The second block's header follows the first, whole block: 128 KiB << 3, raw
            // (type 0), not the last (RFC 8878, little-endian).
            let second = body + RAW_FRAME_HEADER.len() + 4 + BLOCK_HEADER + BLOCK;
            assert_eq!(rewritten[second..second + 3], [0x00, 0x00, 0x10]);
        }
    }
}

/// The levels of parquet's own pages, over random nulls (RLE runs and bit-packed groups
/// both), decode to the nulls it reads.
#[test]
fn levels_decode_to_the_nulls_parquet_reads() {
    let mut rng = Rng::new(6);
    for version in VERSIONS {
        for nulls_in_ten in [1, 5, 9] {
            // Rows 150 to 199 of every 200 hold values, the others at random; then one row in
            // fifty is null whatever it held.
            let values: StringArray = (0..1_000)
                .map(|i| {
                    let defined = (i % 200 >= 150 || rng.below(10) >= nulls_in_ten) && rng.below(50) != 0;
                    defined.then(|| i.to_string())
                })
                .collect();
            let batch = RecordBatch::try_from_iter([("text", Arc::new(values) as ArrayRef)]).unwrap();
            let file = write(&batch, properties(version).build());
            for page in data_pages(file.indexed.metadata(), 0) {
                let bytes = file.page(&page);
                let header = parse_data_page(bytes, true).unwrap();
                let body = &bytes[header.header_len..];
                let levels = match header.levels {
                    Levels::Leading { len, .. } => body[..len].to_vec(),
                    Levels::Prefixed => {
                        let body = zstd::decode_all(body).unwrap();
                        let len = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
                        body[4..4 + len].to_vec()
                    }
                };
                let mut defined = Vec::new();
                decode_levels(&levels, page.rows, |len, d| defined.extend(std::iter::repeat_n(d, len)))
                    .unwrap();
                let values = file.values[0].slice(page.first_row, page.rows);
                let expected: Vec<bool> = (0..page.rows).map(|i| values.is_valid(i)).collect();
                assert_eq!(defined, expected, "{version:?} {nulls_in_ten} {page:?}");
            }
        }
    }
}
