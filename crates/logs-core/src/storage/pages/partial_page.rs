//! Data pages rewritten so that the Parquet reader decompresses only the rows a scan reads.
//!
//! The reader decompresses every page it reads whole. Files written by other tools (pyarrow,
//! Spark, DuckDB) hold zstd pages of about 1 MiB, and long text plain-encoded once the
//! dictionary is full; a point export selects a few rows of each, and would decompress all of
//! every page for them. The scan knows which rows of each page it will read, so it hands the
//! page to [`PageRewriter::rewrite_sparse`] first, which decompresses it only up to the end of
//! the last of those rows' values and replaces it with a data page v2 that holds the same
//! value (or null) for each of them and an empty value for every other row.
//!
//! The rewritten page takes exactly the bytes of the original: the reader slices each page out
//! of the column chunk by the size its offset index gives, so the page must fit there, and
//! every other page stays where it was. Its values are a zstd frame of raw (stored) blocks,
//! which the reader's zstd decoder copies out, and the page's remaining bytes (8 at least, or
//! the page is left as it is) a skippable frame, which the decoder passes over: so the rewrite writes only the page's front, over the
//! original page's own bytes when nothing else holds them (the scan reads such pages from a
//! local file into buffers of their own), and the values end exactly where the decompressed
//! page does (parquet's PLAIN decoder for byte arrays divides by zero when asked for values
//! past a page's last one while bytes remain after it).
//!
//! Only pages of flat `BYTE_ARRAY` columns are rewritten, and only data pages (v1 or v2) whose
//! values are PLAIN-encoded and zstd-compressed; any other page, or one whose header, levels or
//! values do not add up, is left as it is.

use bytes::{Bytes, BytesMut};
use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

use super::thrift::{DataPage, Levels, decode_levels, page_header, parse_data_page};

/// The largest page decompressed in part: larger ones are left as they are, so that a corrupt
/// header cannot make the rewriter reserve any amount of memory.
const MAX_PAGE: usize = 64 * 1024 * 1024;

/// How a zstd frame starts.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Rewrites data pages of flat `BYTE_ARRAY` columns (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct PageRewriter {
    inflater: Inflater,
    /// The value indices of the selected rows that are not null, ascending.
    wanted: Vec<usize>,
    /// Where each of `wanted` lies in the decompressed bytes.
    selected: Vec<std::ops::Range<usize>>,
    /// The rewritten page's values, and its front (header, levels and the values' frame).
    values: Vec<u8>,
    front: Vec<u8>,
}

impl PageRewriter {
    pub(crate) fn new() -> PageRewriter {
        PageRewriter::default()
    }

    /// Bytes decompressed by every rewrite so far.
    #[cfg(test)]
    pub(crate) fn decompressed(&self) -> u64 {
        self.inflater.decompressed
    }

    /// `page`: exactly the bytes of one data page as an offset index locates it (its Thrift
    /// page header followed by its body). `optional`: the column's max definition level is 1
    /// (false: 0); the column is flat, of physical type `BYTE_ARRAY`, and its chunk's codec is
    /// ZSTD. `rows`: ascending, distinct row offsets within the page (0-based, relative to the
    /// page's first row) whose values the reader may read; every other row's value may be
    /// replaced.
    ///
    /// Replaces `page` with a page of exactly as many bytes that the Parquet reader decodes to
    /// the same value (or null) for every row in `rows`, and returns true; or returns false and
    /// leaves it as it is. The rewrite is written over `page`'s own bytes if nothing else holds
    /// them. The page is left as it is, without decompressing any of it, unless `rows` are few
    /// enough for the rewrite to pay: rows selected from every part of a page leave little to
    /// save, and if their values, at the page's average length, would take more than half of
    /// its bytes, the rewritten page would likely not fit, found only after decompressing most
    /// of it (which the reader would then do again).
    pub(crate) fn rewrite_sparse(&mut self, page: &mut Bytes, optional: bool, rows: &[u32]) -> bool {
        let Some(header) = parse_data_page(page, optional) else { return false };
        let values = header.uncompressed_size.saturating_mul(rows.len()) / header.num_values.max(1);
        let sparse = rows.len().saturating_mul(8) <= header.num_values && values <= page.len() / 2;
        sparse && self.rewrite_parsed(page, &header, optional, rows).is_some()
    }

    /// [`PageRewriter::rewrite_sparse`] of a copy of `page`, whatever the share of rows
    /// selected, so that the tests can rewrite every kind of selection.
    #[cfg(test)]
    pub(crate) fn rewrite(&mut self, page: &[u8], optional: bool, rows: &[u32]) -> Option<Bytes> {
        let header = parse_data_page(page, optional)?;
        let mut page = Bytes::copy_from_slice(page);
        self.rewrite_parsed(&mut page, &header, optional, rows)?;
        Some(page)
    }

    /// The rewrite of [`PageRewriter::rewrite_sparse`], given the page's header; `None` leaves
    /// the page as it is.
    fn rewrite_parsed(
        &mut self,
        page: &mut Bytes,
        header: &DataPage,
        optional: bool,
        rows: &[u32],
    ) -> Option<()> {
        let last_row = usize::try_from(*rows.last()?).ok()?;
        if rows.windows(2).any(|pair| pair[0] >= pair[1]) {
            return None;
        }
        if last_row >= header.num_values {
            return None;
        }
        let body = &page[header.header_len..];
        let inflater = &mut self.inflater;

        // The frame that decompresses to the values (v1: to the definition levels' length, the
        // levels and the values).
        let (mut frame, leading) = match header.levels {
            Levels::Leading { len, .. } => {
                let limit = header.uncompressed_size.checked_sub(len)?;
                (Frame::new(body.get(len..)?, limit), Some(body.get(..len)?))
            }
            Levels::Prefixed => (Frame::new(body, header.uncompressed_size), None),
        };
        inflater.start(frame.limit)?;
        let prefixed = if leading.is_none() && optional {
            inflater.fill(&mut frame, 4)?;
            let len = u32::from_le_bytes(inflater.bytes()[..4].try_into().ok()?);
            let end = usize::try_from(len).ok()?.checked_add(4)?;
            inflater.fill(&mut frame, end)?;
            4..end
        } else {
            0..0
        };
        let values_start = prefixed.end;
        let levels = leading.unwrap_or(&inflater.bytes()[prefixed.clone()]);

        // The value index of each selected row that is not null.
        let wanted = &mut self.wanted;
        wanted.clear();
        let non_null = if optional {
            let mut next = rows.iter().map(|&row| row as usize).peekable();
            let (mut first, mut non_null) = (0usize, 0usize);
            decode_levels(levels, header.num_values, |len, defined| {
                while let Some(row) = next.next_if(|&row| row < first + len) {
                    if defined {
                        wanted.push(non_null + (row - first));
                    }
                }
                first += len;
                if defined {
                    non_null += len;
                }
            })?;
            non_null
        } else {
            wanted.extend(rows.iter().map(|&row| row as usize));
            header.num_values
        };
        let num_nulls = header.num_values - non_null;
        if let Levels::Leading { nulls, .. } = header.levels
            && nulls != num_nulls
        {
            return None;
        }

        // The header, the levels, the frames' headers and a placeholder for every value must
        // fit before anything more is decompressed; then each selected value. (The header is at
        // most as long as one for sizes of the whole page. This bounds the work spent on a page
        // that cannot be rewritten; whether the page fits is settled exactly below.)
        let levels_size = levels.len();
        let counts = [header.num_values, num_nulls, levels_size].map(i32::try_from);
        let [Ok(num_values), Ok(num_nulls), Ok(levels_len)] = counts else { return None };
        let longest_header = page_header(page.len(), page.len(), num_values, num_nulls, levels_len)?;
        let mut room = page
            .len()
            .checked_sub(
                longest_header.len()
                    + levels_size
                    + RAW_FRAME_HEADER.len()
                    + 4
                    + BLOCK_HEADER
                    + SKIPPABLE_HEADER,
            )?
            .checked_sub(non_null.checked_mul(4)?)?;
        // Where each selected value lies in the decompressed bytes; values before it are read
        // only to find where it starts.
        let selected = &mut self.selected;
        selected.clear();
        let (mut at, mut value) = (values_start, 0);
        for &target in wanted.iter() {
            loop {
                inflater.fill(&mut frame, at.checked_add(4)?)?;
                let len = u32::from_le_bytes(inflater.bytes()[at..at + 4].try_into().ok()?);
                let end = (at + 4).checked_add(usize::try_from(len).ok()?)?;
                if value == target {
                    room = room.checked_sub(end - at - 4)?;
                    inflater.fill(&mut frame, end)?;
                    selected.push(at..end);
                    (at, value) = (end, value + 1);
                    break;
                }
                (at, value) = (end, value + 1);
            }
        }

        // The values: each selected one, and an empty one for every other.
        let values = &mut self.values;
        values.clear();
        let mut selected = wanted.iter().zip(selected.iter()).peekable();
        let mut value = 0;
        while value < non_null {
            if let Some((_, range)) = selected.next_if(|(index, _)| **index == value) {
                values.extend_from_slice(&inflater.bytes()[range.clone()]);
                value += 1;
            } else {
                let next = selected.peek().map_or(non_null, |(index, _)| **index);
                values.resize(values.len() + (next - value) * 4, 0);
                value = next;
            }
        }

        // The page's front: header, levels and the values in a frame of raw blocks. The rest
        // of the page's bytes become a skippable frame, which needs room for its header.
        let blocks = values.len().div_ceil(MAX_BLOCK).max(1);
        let frame_len = RAW_FRAME_HEADER.len() + 4 + blocks * BLOCK_HEADER + values.len();
        let uncompressed = levels_size.checked_add(values.len())?;
        let page_header = page_header(page.len(), uncompressed, num_values, num_nulls, levels_len)?;
        let front = &mut self.front;
        front.clear();
        front.extend_from_slice(&page_header);
        front.extend_from_slice(leading.unwrap_or(&inflater.bytes()[prefixed]));
        front.extend_from_slice(&RAW_FRAME_HEADER);
        front.extend_from_slice(&u32::try_from(values.len()).ok()?.to_le_bytes());
        let mut chunks = values.chunks(MAX_BLOCK).peekable();
        if chunks.peek().is_none() {
            front.extend_from_slice(&block_header(0, true));
        }
        while let Some(chunk) = chunks.next() {
            front.extend_from_slice(&block_header(chunk.len(), chunks.peek().is_none()));
            front.extend_from_slice(chunk);
        }
        debug_assert_eq!(front.len(), page_header.len() + levels_size + frame_len);
        let skipped = page.len().checked_sub(front.len() + SKIPPABLE_HEADER)?;
        let skipped = u32::try_from(skipped).ok()?;

        // Written over the page's own bytes when nothing else holds them, else into a copy.
        let mut out = match std::mem::take(page).try_into_mut() {
            Ok(unique) => unique,
            Err(shared) => BytesMut::zeroed(shared.len()),
        };
        let (written, rest) = out.split_at_mut(front.len());
        written.copy_from_slice(front);
        rest[..4].copy_from_slice(&SKIPPABLE_MAGIC);
        rest[4..SKIPPABLE_HEADER].copy_from_slice(&skipped.to_le_bytes());
        *page = out.freeze();
        Some(())
    }
}

/// The header of a raw frame: the magic number and a descriptor of a single segment whose
/// content size follows in 4 bytes, without checksum or dictionary.
const RAW_FRAME_HEADER: [u8; 5] = [0x28, 0xB5, 0x2F, 0xFD, 0xA0];
/// The length of a block header, and of the largest block's content.
const BLOCK_HEADER: usize = 3;
const MAX_BLOCK: usize = 128 * 1024;
/// A skippable frame: its magic number, then the length of what follows in 4 bytes.
const SKIPPABLE_MAGIC: [u8; 4] = [0x50, 0x2A, 0x4D, 0x18];
const SKIPPABLE_HEADER: usize = 8;

/// The header of a raw block of `len` bytes (at most [`MAX_BLOCK`]).
fn block_header(len: usize, last: bool) -> [u8; BLOCK_HEADER] {
    let header = (len as u32) << 3 | u32::from(last);
    let bytes = header.to_le_bytes();
    [bytes[0], bytes[1], bytes[2]]
}

/// A reused zstd decoder and the bytes it decompressed of the current page.
#[derive(Default)]
struct Inflater {
    /// Created on first use. It writes straight into `inflated` (`ZSTD_d_stableOutBuffer`)
    /// rather than into a window of its own that it would then copy out of.
    decoder: Option<Decoder<'static>>,
    /// The current page's decompressed bytes so far. Its capacity, kept from page to page,
    /// is the decoder's output buffer, which must stay where it is for the whole frame.
    inflated: Vec<u8>,
    /// Bytes decompressed, over all pages.
    decompressed: u64,
}

impl std::fmt::Debug for Inflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflater").field("decompressed", &self.decompressed).finish_non_exhaustive()
    }
}

impl Inflater {
    /// Readies the decoder for a page whose frame decompresses to `limit` bytes at most.
    fn start(&mut self, limit: usize) -> Option<()> {
        if limit > MAX_PAGE {
            return None;
        }
        let decoder = match &mut self.decoder {
            Some(decoder) => decoder,
            None => {
                let mut decoder = Decoder::new().ok()?;
                decoder.set_parameter(DParameter::StableOutBuffer(true)).ok()?;
                self.decoder.insert(decoder)
            }
        };
        decoder.reinit().ok()?;
        self.inflated.clear();
        self.inflated.reserve(limit);
        Some(())
    }

    /// The current page's decompressed bytes so far.
    fn bytes(&self) -> &[u8] {
        &self.inflated
    }

    /// Decompresses `frame` a block at a time until [`Inflater::bytes`] holds at least `want`
    /// bytes (and less than a block, 128 KiB at most, more); `None` if the frame ends first, is
    /// corrupt, or would exceed its limit.
    fn fill(&mut self, frame: &mut Frame<'_>, want: usize) -> Option<()> {
        if want > frame.limit {
            return None;
        }
        let decoder = self.decoder.as_mut()?;
        while self.inflated.len() < want {
            let end = frame.next_block_end()?;
            let before = self.inflated.len();
            let mut input = InBuffer { src: frame.input.get(..end)?, pos: frame.fed };
            decoder.run(&mut input, &mut OutBuffer::around_pos(&mut self.inflated, before)).ok()?;
            // Handed whole, a block is decompressed whole.
            if input.pos != end {
                return None;
            }
            frame.fed = end;
            self.decompressed += (self.inflated.len() - before) as u64;
        }
        Some(())
    }
}

/// The compressed part of a page, handed to the decoder a block at a time: zstd frames
/// (RFC 8878), each a header, blocks and an optional checksum.
struct Frame<'a> {
    input: &'a [u8],
    /// Bytes handed to the decoder so far, up to the end of a block.
    fed: usize,
    /// Whether `fed` is where a frame starts, rather than a block.
    at_frame: bool,
    /// The length of the current frame's checksum, 0 or 4.
    checksum: usize,
    /// Bytes it decompresses to, at most.
    limit: usize,
}

impl<'a> Frame<'a> {
    fn new(input: &'a [u8], limit: usize) -> Frame<'a> {
        Frame { input, fed: 0, at_frame: true, checksum: 0, limit }
    }

    /// Where the next block ends: with the frame header before it if it is a frame's first,
    /// and the checksum after it if it is its last. `None` if the input is not a zstd frame
    /// without a dictionary, or ends first.
    fn next_block_end(&mut self) -> Option<usize> {
        let mut at = self.fed;
        if self.at_frame {
            let header = self.input.get(at..at + 5)?;
            let descriptor = header[4];
            if header[..4] != ZSTD_MAGIC || descriptor & 3 != 0 {
                return None;
            }
            let single_segment = descriptor & 0x20 != 0;
            let content_size = [usize::from(single_segment), 2, 4, 8][usize::from(descriptor >> 6)];
            let window = usize::from(!single_segment);
            self.checksum = if descriptor & 4 != 0 { 4 } else { 0 };
            self.at_frame = false;
            at += 5 + window + content_size;
        }
        let header = self.input.get(at..at + 3)?;
        let header = u32::from(header[0]) | u32::from(header[1]) << 8 | u32::from(header[2]) << 16;
        let size = usize::try_from(header >> 3).ok()?;
        // Block types: raw, RLE (one byte repeated `size` times), compressed, reserved.
        let content = match (header >> 1) & 3 {
            0 | 2 => size,
            1 => 1,
            _ => return None,
        };
        at += 3 + content;
        if header & 1 != 0 {
            at += self.checksum;
            self.at_frame = true;
        }
        (at <= self.input.len()).then_some(at)
    }
}

#[cfg(test)]
mod tests;
