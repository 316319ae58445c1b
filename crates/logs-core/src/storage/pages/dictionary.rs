//! Dictionary pages nothing will use, handed back empty.
//!
//! A column chunk's dictionary page comes before its data pages, and the Parquet reader
//! decompresses and decodes it before any of them, even when every data page it then reads is
//! plain-encoded. Writers that fall back from dictionary to plain encoding once the dictionary
//! is full (pyarrow, DuckDB, parquet-rs: at 1 MiB) leave most pages of a high-cardinality
//! column plain. When none of the data pages read with a dictionary page holds dictionary
//! indices, the reader gets an empty dictionary page of the same length instead.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;
use datafusion::parquet::file::metadata::ParquetMetaData;

use super::thrift::{EMPTY_DICTIONARY_PAGE_HEADER, dictionary_encoded};

/// Whether `pages` (read for `ranges`) hold at least one data page in `data_pages`, and none
/// there holds dictionary indices.
pub(super) fn only_plain_pages(ranges: &[Range<u64>], pages: &[Bytes], data_pages: &Range<u64>) -> bool {
    let mut pages = ranges.iter().zip(pages).filter(|(r, _)| data_pages.contains(&r.start)).peekable();
    pages.peek().is_some() && pages.all(|(_, page)| dictionary_encoded(page) == Some(false))
}

/// Every dictionary page of `footer` that its offset index places: by the page's offset,
/// where the chunk's data pages start and where the chunk ends.
pub(super) fn dictionary_pages(footer: &ParquetMetaData) -> HashMap<u64, Range<u64>> {
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
pub(super) fn empty_dictionary_page(len: u64) -> Option<Bytes> {
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
