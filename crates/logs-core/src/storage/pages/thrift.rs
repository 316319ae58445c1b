//! The bytes of Parquet pages this crate reads and writes itself, and nothing else does: page
//! headers in the Thrift compact protocol (read to rebuild offset indexes and to tell dictionary
//! indices from plain values, written for rewritten pages) and definition levels (the RLE/bit-packed
//! hybrid). The parquet crate keeps its own Thrift code private; the tests pin this file against
//! the pages the parquet crate writes, so that an upgrade that changes them fails here first.

/// Page types and encodings of the Parquet format.
pub(super) const DATA_PAGE: i32 = 0;
pub(super) const DATA_PAGE_V2: i32 = 3;
pub(super) const PLAIN: i32 = 0;
pub(super) const RLE: i32 = 3;

/// Parquet's encodings of dictionary indices in a data page.
const PLAIN_DICTIONARY: i64 = 2;
const RLE_DICTIONARY: i64 = 8;

/// Whether the data page whose header starts `bytes` holds dictionary indices, or `None` if
/// `bytes` does not start with a readable data page header.
pub(crate) fn dictionary_encoded(bytes: &[u8]) -> Option<bool> {
    let encoding = parse_page_header(bytes).ok()?.data_page_encoding?;
    Some(matches!(encoding, PLAIN_DICTIONARY | RLE_DICTIONARY))
}

/// The header of a dictionary page that holds no values: type DICTIONARY_PAGE (2), both sizes
/// 0 (so no codec runs on it), `dictionary_page_header { num_values: 0, encoding: PLAIN }`.
pub(crate) const EMPTY_DICTIONARY_PAGE_HEADER: [u8; 13] =
    [0x15, 0x04, 0x15, 0x00, 0x15, 0x00, 0x4c, 0x15, 0x00, 0x15, 0x00, 0x00, 0x00];

/// What the offset index needs from a page header.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PageHeader {
    /// Bytes of the header itself.
    pub(super) length: u64,
    pub(super) compressed_size: u64,
    /// Rows of a data page (v1: its values, the column being flat; v2: `num_rows`); `None`
    /// for dictionary and index pages.
    pub(super) data_page_rows: Option<i64>,
    /// The encoding of a data page's values; `None` for dictionary and index pages.
    pub(super) data_page_encoding: Option<i64>,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Malformed {
    /// The header runs past the bytes given.
    Truncated,
    Invalid,
}

/// Parses a Thrift compact-protocol `PageHeader` at the start of `bytes`.
pub(super) fn parse_page_header(bytes: &[u8]) -> Result<PageHeader, Malformed> {
    let mut r = Compact { bytes, at: 0 };
    let (mut page_type, mut compressed_size) = (None, None);
    let (mut v1, mut v2) = ([None; 2], [None; 2]);
    let mut last_id = 0i16;
    while let Some((id, kind)) = r.field_header(last_id)? {
        match (id, kind) {
            (1, T_I32) => page_type = Some(r.zigzag()?),
            (3, T_I32) => compressed_size = Some(r.zigzag()?),
            // DataPageHeader: 1 = num_values, 2 = encoding.
            (5, T_STRUCT) => v1 = r.struct_i32_fields([1, 2])?,
            // DataPageHeaderV2: 3 = num_rows, 4 = encoding.
            (8, T_STRUCT) => v2 = r.struct_i32_fields([3, 4])?,
            _ => r.skip(kind, 0)?,
        }
        last_id = id;
    }
    let compressed_size =
        u64::try_from(compressed_size.ok_or(Malformed::Invalid)?).map_err(|_| Malformed::Invalid)?;
    let ([data_page_rows, data_page_encoding], data_page) = match page_type.ok_or(Malformed::Invalid)? {
        0 => (v1, true),
        3 => (v2, true),
        1 | 2 => ([None; 2], false),
        _ => return Err(Malformed::Invalid),
    };
    if data_page && (data_page_rows.is_none_or(|rows| rows < 0) || data_page_encoding.is_none()) {
        return Err(Malformed::Invalid);
    }
    Ok(PageHeader { length: r.at as u64, compressed_size, data_page_rows, data_page_encoding })
}

pub(super) const T_BOOL_TRUE: u8 = 1;
pub(super) const T_BOOL_FALSE: u8 = 2;
pub(super) const T_BYTE: u8 = 3;
pub(super) const T_I16: u8 = 4;
pub(super) const T_I32: u8 = 5;
pub(super) const T_I64: u8 = 6;
pub(super) const T_DOUBLE: u8 = 7;
pub(super) const T_BINARY: u8 = 8;
pub(super) const T_LIST: u8 = 9;
pub(super) const T_SET: u8 = 10;
pub(super) const T_MAP: u8 = 11;
pub(super) const T_STRUCT: u8 = 12;

/// Deepest nesting skipped; page headers nest two levels.
pub(super) const MAX_DEPTH: usize = 16;

/// A reader of the Thrift compact protocol over a byte slice.
pub(super) struct Compact<'a> {
    pub(super) bytes: &'a [u8],
    /// Bytes read so far.
    pub(super) at: usize,
}

impl Compact<'_> {
    pub(super) fn byte(&mut self) -> Result<u8, Malformed> {
        let b = *self.bytes.get(self.at).ok_or(Malformed::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<(), Malformed> {
        let end = self.at.checked_add(n).ok_or(Malformed::Invalid)?;
        if end > self.bytes.len() {
            return Err(Malformed::Truncated);
        }
        self.at = end;
        Ok(())
    }

    pub(super) fn varint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Malformed::Invalid)
    }

    pub(super) fn zigzag(&mut self) -> Result<i64, Malformed> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// The next field's id and type, or `None` at the end of the struct.
    pub(super) fn field_header(&mut self, last_id: i16) -> Result<Option<(i16, u8)>, Malformed> {
        let b = self.byte()?;
        let kind = b & 0x0f;
        if kind == 0 {
            return Ok(None);
        }
        let delta = (b >> 4) as i16;
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?).map_err(|_| Malformed::Invalid)?
        } else {
            last_id.checked_add(delta).ok_or(Malformed::Invalid)?
        };
        Ok(Some((id, kind)))
    }

    /// Reads a struct, returning its i32 fields `wanted` (and skipping every other field).
    fn struct_i32_fields<const N: usize>(&mut self, wanted: [i16; N]) -> Result<[Option<i64>; N], Malformed> {
        let mut found = [None; N];
        let mut last_id = 0i16;
        while let Some((id, kind)) = self.field_header(last_id)? {
            match wanted.iter().position(|&w| w == id) {
                Some(i) if kind == T_I32 => found[i] = Some(self.zigzag()?),
                _ => self.skip(kind, 1)?,
            }
            last_id = id;
        }
        Ok(found)
    }

    pub(super) fn skip(&mut self, kind: u8, depth: usize) -> Result<(), Malformed> {
        if depth > MAX_DEPTH {
            return Err(Malformed::Invalid);
        }
        match kind {
            T_BOOL_TRUE | T_BOOL_FALSE => Ok(()),
            T_BYTE => self.take(1),
            T_I16 | T_I32 | T_I64 => self.varint().map(drop),
            T_DOUBLE => self.take(8),
            T_BINARY => {
                let n = usize::try_from(self.varint()?).map_err(|_| Malformed::Invalid)?;
                self.take(n)
            }
            T_LIST | T_SET => {
                let header = self.byte()?;
                let element = header & 0x0f;
                let size = match header >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                for _ in 0..size {
                    // Booleans in a collection take a byte each.
                    if element == T_BOOL_TRUE || element == T_BOOL_FALSE {
                        self.take(1)?;
                    } else {
                        self.skip(element, depth + 1)?;
                    }
                }
                Ok(())
            }
            T_MAP => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                for _ in 0..size {
                    self.skip(types >> 4, depth + 1)?;
                    self.skip(types & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            T_STRUCT => {
                let mut last_id = 0i16;
                while let Some((id, kind)) = self.field_header(last_id)? {
                    self.skip(kind, depth + 1)?;
                    last_id = id;
                }
                Ok(())
            }
            _ => Err(Malformed::Invalid),
        }
    }
}

/// What a rewrite needs of a data page's header.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct DataPage {
    pub(super) header_len: usize,
    pub(super) uncompressed_size: usize,
    pub(super) num_values: usize,
    pub(super) levels: Levels,
}

/// Where a data page keeps its definition levels (if the column has any).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Levels {
    /// v1: inside the compressed body, after their length in 4 bytes.
    Prefixed,
    /// v2: the body's first `len` bytes, uncompressed, with `nulls` nulls among them.
    Leading { len: usize, nulls: usize },
}

/// The header of the data page `page` if it is one this module rewrites, and its compressed
/// size is the rest of `page`.
pub(super) fn parse_data_page(page: &[u8], optional: bool) -> Option<DataPage> {
    let mut r = Compact { bytes: page, at: 0 };
    let (mut page_type, mut uncompressed, mut compressed, mut v1, mut v2) = (None, None, None, None, None);
    let mut last_id = 0;
    while let Some((id, kind)) = r.field_header(last_id).ok()? {
        match (id, kind) {
            (1, T_I32) => page_type = Some(read_i32(&mut r)?),
            (2, T_I32) => uncompressed = Some(read_i32(&mut r)?),
            (3, T_I32) => compressed = Some(read_i32(&mut r)?),
            (5, T_STRUCT) => v1 = Some(read_struct(&mut r)?),
            (8, T_STRUCT) => v2 = Some(read_struct(&mut r)?),
            _ => r.skip(kind, 0).ok()?,
        }
        last_id = id;
    }
    let size = |value: Option<i32>| usize::try_from(value?).ok();
    let (num_values, encoding, levels) = match (page_type?, v1, v2) {
        // DataPageHeader: 1 num_values, 2 encoding, 3 definition_level_encoding.
        (DATA_PAGE, Some(([num_values, encoding, def_encoding, ..], _)), None) => {
            if optional && def_encoding != Some(RLE) {
                return None;
            }
            (num_values, encoding, Levels::Prefixed)
        }
        // DataPageHeaderV2: 1 num_values, 2 num_nulls, 3 num_rows, 4 encoding,
        // 5 definition_levels_byte_length, 6 repetition_levels_byte_length, 7 is_compressed.
        (
            DATA_PAGE_V2,
            None,
            Some(([num_values, nulls, num_rows, encoding, len, rep_len], is_compressed)),
        ) => {
            let (len, nulls) = (size(len)?, size(nulls)?);
            let flat = num_rows? == num_values? && rep_len? == 0;
            if !flat || is_compressed == Some(false) || (!optional && (len != 0 || nulls != 0)) {
                return None;
            }
            (num_values, encoding, Levels::Leading { len, nulls })
        }
        _ => return None,
    };
    if encoding? != PLAIN {
        return None;
    }
    let data_page = DataPage {
        header_len: r.at,
        uncompressed_size: size(uncompressed)?,
        num_values: size(num_values)?,
        levels,
    };
    (r.at.checked_add(size(compressed)?)? == page.len()).then_some(data_page)
}

pub(super) fn read_i32(r: &mut Compact<'_>) -> Option<i32> {
    i32::try_from(r.zigzag().ok()?).ok()
}

/// A struct's i32 fields 1 to 6 and its boolean field 7; every other field is skipped.
pub(super) fn read_struct(r: &mut Compact<'_>) -> Option<([Option<i32>; 6], Option<bool>)> {
    let (mut ints, mut flag) = ([None; 6], None);
    let mut last_id = 0;
    while let Some((id, kind)) = r.field_header(last_id).ok()? {
        match (id, kind) {
            (1..=6, T_I32) => ints[usize::try_from(id - 1).ok()?] = Some(read_i32(r)?),
            (7, T_BOOL_TRUE) => flag = Some(true),
            (7, T_BOOL_FALSE) => flag = Some(false),
            _ => r.skip(kind, 1).ok()?,
        }
        last_id = id;
    }
    Some((ints, flag))
}

/// The header of a compressed data page v2 (PLAIN values, no repetition levels, no
/// statistics) that is `total` bytes long with its body and decompresses to `uncompressed`
/// bytes, or `None` if no body size makes the two add up to `total` (where the body size's
/// varint grows a byte, the total skips one).
pub(super) fn page_header(
    total: usize,
    uncompressed: usize,
    num_values: i32,
    num_nulls: i32,
    levels_len: i32,
) -> Option<Vec<u8>> {
    let uncompressed = i32::try_from(uncompressed).ok()?;
    let header = |size: usize| {
        let size = i32::try_from(size).ok()?;
        let mut w = CompactWriter::default();
        w.i32(1, DATA_PAGE_V2);
        w.i32(2, uncompressed);
        w.i32(3, size);
        let outer = w.begin_struct(8);
        w.i32(1, num_values);
        w.i32(2, num_nulls);
        w.i32(3, num_values);
        w.i32(4, PLAIN);
        w.i32(5, levels_len);
        w.i32(6, 0);
        w.bool(7, true);
        w.end_struct(outer);
        w.end_struct(0);
        Some(w.bytes)
    };
    // The header's length grows with the body's size, so `size + header(size).len()` does too:
    // start below `total` and count up.
    let mut size = total.checked_sub(header(total)?.len())?;
    loop {
        let bytes = header(size)?;
        match (size + bytes.len()).cmp(&total) {
            std::cmp::Ordering::Less => size += 1,
            std::cmp::Ordering::Equal => return Some(bytes),
            std::cmp::Ordering::Greater => return None,
        }
    }
}

/// A writer of the Thrift compact protocol: i32 and boolean fields, and structs.
#[derive(Default)]
pub(super) struct CompactWriter {
    bytes: Vec<u8>,
    last_id: i16,
}

impl CompactWriter {
    fn field(&mut self, id: i16, kind: u8) {
        match id - self.last_id {
            delta @ 1..=15 => self.bytes.push(((delta as u8) << 4) | kind),
            _ => {
                self.bytes.push(kind);
                self.varint(u64::from(zigzag(i32::from(id))));
            }
        }
        self.last_id = id;
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes.push(value as u8 | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    fn i32(&mut self, id: i16, value: i32) {
        self.field(id, T_I32);
        self.varint(u64::from(zigzag(value)));
    }

    /// A boolean field is its field header alone.
    fn bool(&mut self, id: i16, value: bool) {
        self.field(id, if value { T_BOOL_TRUE } else { T_BOOL_FALSE });
    }

    /// Starts struct field `id`, returning the enclosing struct's last field id.
    fn begin_struct(&mut self, id: i16) -> i16 {
        self.field(id, T_STRUCT);
        std::mem::replace(&mut self.last_id, 0)
    }

    /// Ends a struct, given what [`CompactWriter::begin_struct`] returned (0 for the outermost).
    fn end_struct(&mut self, outer: i16) {
        self.bytes.push(0);
        self.last_id = outer;
    }
}

pub(super) fn zigzag(value: i32) -> u32 {
    ((value << 1) ^ (value >> 31)) as u32
}

/// Calls `run(len, defined)` for consecutive runs of the first `count` definition levels
/// encoded in `bytes` (the RLE/bit-packed hybrid encoding, bit width 1); `None` if `bytes`
/// holds fewer levels, or a level above 1.
pub(super) fn decode_levels(bytes: &[u8], count: usize, mut run: impl FnMut(usize, bool)) -> Option<()> {
    let mut r = Compact { bytes, at: 0 };
    let mut left = count;
    while left > 0 {
        let header = r.varint().ok()?;
        let len = usize::try_from(header >> 1).ok()?;
        if header & 1 == 0 {
            // A run of one level, written in one byte.
            let level = r.byte().ok()?;
            if level > 1 {
                return None;
            }
            let len = len.min(left);
            run(len, level == 1);
            left -= len;
        } else {
            // `len` groups of 8 levels, a byte each, least significant bit first.
            let len = len.saturating_mul(8).min(left);
            let mut byte = 0;
            for i in 0..len {
                if i % 8 == 0 {
                    byte = r.byte().ok()?;
                }
                run(1, (byte >> (i % 8)) & 1 == 1);
            }
            left -= len;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests;
