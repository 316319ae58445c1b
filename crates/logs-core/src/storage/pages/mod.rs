//! Page machinery: what the scan does with Parquet pages below the parquet crate's public
//! surface. One entry point, [`PageReads::read`], which the scan's reader calls for every read
//! of several ranges (a row group's pages); with [`PageMachinery::OFF`] the reader does not
//! call it and reads the ranges as they are asked for.
//!
//! - `dictionary.rs`: a dictionary page nothing will use is handed back empty, so that the
//!   reader does not decompress and decode it;
//! - `selection.rs` and `partial_page.rs`: with equality filters on texts, the rows they select
//!   in a row group are worked out first, and each page of another text column is handed back
//!   rewritten to be decompressed only as far as those rows;
//! - `read_ahead.rs`: over an object store, the first request for a row group's pages brings
//!   those of the later steps of a filtered read;
//! - `offset_index.rs`: an offset index rebuilt from the page headers of a file written
//!   without one (called by `footer.rs` when the catalog completes a footer);
//! - `thrift.rs`: every byte of a page header or of definition levels read or written here.
//!
//! Each trick answers the pages the parquet crate asked for, byte for byte where it does not
//! rewrite them, and leaves a page as it is whenever anything about it is unexpected.

mod dictionary;
pub(crate) mod offset_index;
mod partial_page;
mod read_ahead;
mod selection;
mod thrift;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_plan::metrics::Count;

use crate::error::Result;
use crate::storage::object::ObjectFile;
use dictionary::{dictionary_pages, empty_dictionary_page, only_plain_pages};
use read_ahead::{READ_AHEAD_LIMIT, ReadAhead};
pub(crate) use selection::{PartialPages, TextFilters};

#[cfg(test)]
pub(crate) use read_ahead::tests as read_ahead_tests;
#[cfg(test)]
pub(crate) use thrift::{EMPTY_DICTIONARY_PAGE_HEADER, dictionary_encoded};

/// Which page tricks the scan plays (see the storage module's `pages` documentation). All are
/// on by default; [`PageMachinery::OFF`] reads pages only through the parquet crate's public
/// interface (offset indexes are still rebuilt when `offset_index` is on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageMachinery {
    /// Hand back an empty dictionary page when no data page read with it uses it.
    pub dictionaries: bool,
    /// Decompress text pages only as far as the rows an export's equality filters select.
    pub partial_pages: bool,
    /// Over an object store, fetch the pages of a filtered read's later steps with its first.
    pub read_ahead: bool,
    /// Rebuild the offset index of a file written without one from its page headers.
    pub offset_index: bool,
}

impl PageMachinery {
    pub const ON: PageMachinery =
        PageMachinery { dictionaries: true, partial_pages: true, read_ahead: true, offset_index: true };
    pub const OFF: PageMachinery =
        PageMachinery { dictionaries: false, partial_pages: false, read_ahead: false, offset_index: false };

    /// Whether the reader calls [`PageReads::read`] at all.
    fn reads_pages(&self) -> bool {
        self.dictionaries || self.partial_pages || self.read_ahead
    }
}

impl std::str::FromStr for PageMachinery {
    type Err = crate::error::Error;

    /// `on`, `off`, or the tricks to play, comma-separated: `dictionaries`, `partial_pages`,
    /// `read_ahead`, `offset_index` (for measuring one against another).
    fn from_str(s: &str) -> Result<PageMachinery> {
        match s {
            "on" => return Ok(PageMachinery::ON),
            "off" => return Ok(PageMachinery::OFF),
            _ => {}
        }
        let mut machinery = PageMachinery::OFF;
        for trick in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let on = match trick {
                "dictionaries" => &mut machinery.dictionaries,
                "partial_pages" => &mut machinery.partial_pages,
                "read_ahead" => &mut machinery.read_ahead,
                "offset_index" => &mut machinery.offset_index,
                other => {
                    let message = format!("unknown page trick {other:?}");
                    return Err(crate::error::Error::Config { setting: "page_machinery", message });
                }
            };
            *on = true;
        }
        Ok(machinery)
    }
}

impl Default for PageMachinery {
    fn default() -> PageMachinery {
        PageMachinery::ON
    }
}

/// What one export's scan asks of the page machinery.
#[derive(Debug, Clone)]
pub(crate) struct PagePlan {
    pub(crate) machinery: PageMachinery,
    /// The columns the scan reads, once known (for read-ahead).
    pub(crate) columns: Option<Arc<HashSet<String>>>,
    /// The export's equality filters on texts, if any (for partial pages).
    pub(crate) filters: Option<TextFilters>,
}

/// The counters of one file's reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageCounts {
    /// Dictionary pages replaced by an empty one.
    pub(crate) dictionaries_skipped: Count,
    /// Pages fetched ahead of the step that reads them.
    pub(crate) pages_read_ahead: Count,
    /// Pages decompressed only as far as the export's rows.
    pub(crate) pages_decompressed_partially: Count,
}

/// The page machinery of the reader of one file. Whether the file is local is decided once,
/// here: a local read costs no round trip, so nothing is read ahead, a dictionary page nothing
/// needs is not read at all, and a page that may be rewritten is read into a buffer of its own.
#[derive(Debug)]
pub(crate) struct PageReads {
    local: bool,
    machinery: PageMachinery,
    pub(crate) counts: PageCounts,
    /// By the offset of each dictionary page: where the chunk's data pages start and where it
    /// ends. Built from the footer on the first read.
    dictionary_pages: Option<HashMap<u64, Range<u64>>>,
    /// The columns the scan reads, if their pages are read ahead.
    pub(crate) columns: Option<Arc<HashSet<String>>>,
    /// Built from the footer and `columns` on the first read.
    read_ahead: Option<ReadAhead>,
    pub(crate) partial: Option<PartialPages>,
}

impl PageReads {
    /// The page machinery of a reader of `object` for a scan with `plan`, or `None` if it plays
    /// no trick.
    pub(crate) fn new(object: &ObjectFile, plan: &PagePlan, counts: PageCounts) -> Option<PageReads> {
        let machinery = plan.machinery;
        if !machinery.reads_pages() {
            return None;
        }
        let local = !object.reads().round_trips;
        let columns = plan.columns.clone().filter(|_| machinery.read_ahead && !local);
        let partial = plan
            .filters
            .clone()
            .filter(|_| machinery.partial_pages)
            .map(|filters| PartialPages::new(filters, counts.pages_decompressed_partially.clone()));
        Some(PageReads {
            local,
            machinery,
            counts,
            dictionary_pages: None,
            columns,
            read_ahead: None,
            partial,
        })
    }

    /// Forgets what was worked out from the footer (a new footer was handed out).
    pub(crate) fn footer_changed(&mut self) {
        self.dictionary_pages = None;
        self.read_ahead = None;
    }

    /// The entry point: reads `ranges` of `object`, whose footer is `footer` if known, and
    /// answers what the parquet crate will decode for them.
    pub(crate) async fn read(
        &mut self,
        object: &ObjectFile,
        footer: Option<Arc<ParquetMetaData>>,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>> {
        let dictionaries = self.dictionary_ranges(footer.as_deref(), ranges);
        // Over an object store every request costs a round trip, and a dictionary page sits
        // right before its chunk's data pages: it is fetched in the same GET, and only its
        // decoding is saved. From a local file, a dictionary page nothing needs is not read.
        let with_dictionaries = !self.local;
        let first: Vec<usize> =
            (0..ranges.len()).filter(|i| with_dictionaries || !dictionaries.contains_key(i)).collect();
        let mut out = vec![Bytes::new(); ranges.len()];
        self.fetch_into(object, footer.as_deref(), ranges, &first, &mut out).await?;
        let mut dictionaries: Vec<(usize, Range<u64>)> = dictionaries.into_iter().collect();
        dictionaries.sort_by_key(|(i, _)| *i);
        let mut needed = Vec::new();
        for (i, data_pages) in dictionaries {
            let unused = only_plain_pages(ranges, &out, &data_pages);
            match unused.then(|| empty_dictionary_page(ranges[i].end - ranges[i].start)).flatten() {
                Some(page) => {
                    self.counts.dictionaries_skipped.add(1);
                    out[i] = page;
                }
                None if with_dictionaries => {}
                None => needed.push(i),
            }
        }
        // The dictionaries still needed, in one more call.
        self.fetch_into(object, footer.as_deref(), ranges, &needed, &mut out).await?;
        if let (Some(footer), Some(partial)) = (&footer, self.partial.as_mut()) {
            partial.rewrite(object, footer, ranges, &mut out).await;
        }
        Ok(out)
    }

    /// Reads the ranges of `ranges` at `indices` into the same places of `out`, in one call.
    async fn fetch_into(
        &mut self,
        object: &ObjectFile,
        footer: Option<&ParquetMetaData>,
        ranges: &[Range<u64>],
        indices: &[usize],
        out: &mut [Bytes],
    ) -> Result<()> {
        let mut wanted = Vec::with_capacity(indices.len());
        let mut slots = Vec::with_capacity(indices.len());
        let apart = self.read_apart(footer, ranges, indices);
        for &i in indices {
            if let Some(bytes) = self.read_ahead.as_ref().and_then(|ahead| ahead.get(&ranges[i])) {
                out[i] = bytes;
            } else if apart.contains(&i) {
                out[i] = object.get(ranges[i].clone()).await?;
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
            Some(read_ahead) if wanted.iter().any(|r| !object.holds(r)) => {
                let planned = read_ahead.plan(&wanted);
                planned.into_iter().filter(|r| !object.holds(r)).collect()
            }
            _ => Vec::new(),
        };
        let asked = wanted.len();
        self.counts.pages_read_ahead.add(ahead.len());
        wanted.extend(ahead.iter().cloned());
        let mut fetched = object.get_ranges(&wanted).await?;
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
    pub(crate) fn read_apart(
        &mut self,
        footer: Option<&ParquetMetaData>,
        ranges: &[Range<u64>],
        indices: &[usize],
    ) -> HashSet<usize> {
        let (true, Some(footer), Some(partial)) = (self.local, footer, self.partial.as_mut()) else {
            return HashSet::new();
        };
        indices.iter().copied().filter(|&i| partial.may_rewrite(footer, &ranges[i])).collect()
    }

    /// The requested ranges that are a column chunk's whole dictionary page, by index, each
    /// with the range of the chunk's data pages.
    fn dictionary_ranges(
        &mut self,
        footer: Option<&ParquetMetaData>,
        ranges: &[Range<u64>],
    ) -> HashMap<usize, Range<u64>> {
        if self.dictionary_pages.is_none()
            && let Some(footer) = footer
        {
            if let Some(columns) = &self.columns {
                self.read_ahead = ReadAhead::new(footer, columns, READ_AHEAD_LIMIT);
            }
            let pages = if self.machinery.dictionaries { dictionary_pages(footer) } else { HashMap::new() };
            self.dictionary_pages = Some(pages);
        }
        let Some(pages) = &self.dictionary_pages else { return HashMap::new() };
        let dictionary = |r: &Range<u64>| pages.get(&r.start).filter(|data| data.start == r.end).cloned();
        ranges.iter().enumerate().filter_map(|(i, r)| Some((i, dictionary(r)?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machinery_is_named_whole_or_trick_by_trick() {
        assert_eq!("on".parse::<PageMachinery>().unwrap(), PageMachinery::ON);
        assert_eq!("off".parse::<PageMachinery>().unwrap(), PageMachinery::OFF);
        let some: PageMachinery = "read_ahead, offset_index".parse().unwrap();
        assert_eq!(some, PageMachinery { read_ahead: true, offset_index: true, ..PageMachinery::OFF });
        let error = "read_ahead,pages".parse::<PageMachinery>().unwrap_err().to_string();
        assert!(error.contains("page_machinery") && error.contains("\"pages\""), "{error}");
    }
}
