//! The page headers and levels of `thrift.rs`, read and written, against bytes the parquet crate
//! writes and bytes written out by hand.

use super::*;

/// RLE runs and bit-packed groups, cut to the levels asked for; anything short or above
/// level 1 refused.
#[test]
fn levels_decode_run_by_run() {
    let decode = |bytes: &[u8], count: usize| {
        let mut levels = Vec::new();
        decode_levels(bytes, count, |len, defined| levels.extend(std::iter::repeat_n(defined, len)))
            .map(|()| levels.iter().map(|&d| u8::from(d)).collect::<Vec<u8>>())
    };
    // A run of 4 ones, then one group of 8 bit-packed levels, then a run of 300 zeros.
    let bytes = [0x08, 0x01, 0x03, 0b1010_0101, 0xd8, 0x04, 0x00];
    assert_eq!(decode(&bytes, 12), Some(vec![1, 1, 1, 1, 1, 0, 1, 0, 0, 1, 0, 1]));
    assert_eq!(decode(&bytes, 2), Some(vec![1, 1]));
    assert_eq!(decode(&bytes[..3], 4), Some(vec![1, 1, 1, 1]));
    let all = decode(&bytes, 312).unwrap();
    assert_eq!((all.len(), all[12..].iter().all(|&l| l == 0)), (312, true));
    assert_eq!(decode(&bytes, 0), Some(vec![]));
    for (bytes, count) in
        [(&bytes[..], 313), (&bytes[..3], 5), (&[0x08][..], 1), (&[0x08, 0x02], 1), (&[], 1)]
    {
        assert_eq!(decode(bytes, count), None, "{bytes:02x?} {count}");
    }
}

/// What the writer writes the reader reads back: field ids as deltas and written out (a
/// jump over 15, a step back), booleans, a nested struct.
#[test]
fn written_fields_read_back() {
    let mut w = CompactWriter::default();
    w.i32(1, -7);
    w.i32(20, i32::MAX);
    w.bool(3, true);
    let outer = w.begin_struct(5);
    w.i32(1, i32::MIN);
    w.bool(7, false);
    w.end_struct(outer);
    w.i32(6, 300);
    w.end_struct(0);
    let mut r = Compact { bytes: &w.bytes, at: 0 };
    let (mut fields, mut last_id) = (Vec::new(), 0);
    while let Some((id, kind)) = r.field_header(last_id).unwrap() {
        match kind {
            T_I32 => fields.push((id, r.zigzag().unwrap())),
            T_BOOL_TRUE | T_BOOL_FALSE => fields.push((id, i64::from(kind == T_BOOL_TRUE))),
            T_STRUCT => {
                let (ints, flag) = read_struct(&mut r).unwrap();
                fields.push((id, i64::from(ints[0].unwrap())));
                fields.push((id, i64::from(flag.unwrap())));
            }
            _ => panic!("type {kind}"),
        }
        last_id = id;
    }
    assert_eq!(r.at, w.bytes.len());
    let expected = [(1, -7), (20, i64::from(i32::MAX)), (3, 1), (5, i64::from(i32::MIN)), (5, 0), (6, 300)];
    assert_eq!(fields, expected);
}

/// Page headers are as long as the page minus its body wherever the sizes allow that.
#[test]
fn headers_make_up_the_page_length_exactly() {
    let mut gaps = 0;
    for total in (0..300).chain(8_100..8_300).chain(1_048_500..1_048_700) {
        let Some(header) = page_header(total, 5_000, 100, 7, 20) else {
            gaps += 1;
            continue;
        };
        let mut r = Compact { bytes: &header, at: 0 };
        let mut sizes = Vec::new();
        let mut last_id = 0;
        while let Some((id, kind)) = r.field_header(last_id).unwrap() {
            match id {
                2 | 3 => sizes.push(r.zigzag().unwrap() as usize),
                _ => r.skip(kind, 0).unwrap(),
            }
            last_id = id;
        }
        assert_eq!(r.at, header.len());
        assert_eq!(sizes, [5_000, total - header.len()], "{total}");
        assert_eq!(dictionary_encoded(&header), Some(false));
    }
    // Too short for any header, and one length at each of the two varint boundaries.
    assert_eq!(gaps, 26 + 1 + 1);
}

/// A data page header: type = DATA_PAGE (0), uncompressed 100, compressed 50,
/// data_page_header { num_values 7 (at index 8 its field header, 9 its value), encoding
/// RLE_DICTIONARY (8) }.
const DATA_PAGE_HEADER: [u8; 14] =
    [0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x64, 0x2c, 0x15, 0x0e, 0x15, 0x10, 0x00, 0x00];

/// [`DATA_PAGE_HEADER`] with a field of every Thrift type after its own, as a later version
/// of the format could add: each is skipped, and the header ends after the last.
#[test]
fn fields_of_every_type_that_are_not_needed_are_skipped() {
    let mut header = DATA_PAGE_HEADER[..DATA_PAGE_HEADER.len() - 1].to_vec();
    header.extend_from_slice(&[
        0x47, 1, 2, 3, 4, 5, 6, 7, 8, // 9: double
        0x19, 0x35, 0x02, 0x04, 0x06, // 10: list of three i32
        0x19, 0x21, 0x01, 0x02, // 11: list of two booleans, a byte each
        0x1a, 0xf8, 0x10, // 12: set of 16 binaries (the size after the header)...
    ]);
    for i in 0..16 {
        header.extend_from_slice(&[0x01, b'a' + i]); // ...each one byte long
    }
    header.extend_from_slice(&[
        0x1b, 0x02, 0x86, 0x01, b'k', 0x02, 0x01, b'l', 0x80, 0x01, // 13: map binary → i64
        0x1b, 0x00, // 14: empty map
        0x13, 0xff, // 15: byte
        0x14, 0x81, 0x01, // 16: i16
        0x16, 0x80, 0x80, 0x01, // 17: i64
        0x11, // 18: boolean true
        0x0c, 0xc8, 0x01, // 100 (its id written out): a struct holding
        0x1c, 0x15, 0x02, 0x00, // 1: a struct holding 1: i32
        0x00, // end of field 100
        0x00, // end of the page header
    ]);
    let expected = PageHeader {
        length: header.len() as u64,
        compressed_size: 50,
        data_page_rows: Some(7),
        data_page_encoding: Some(8),
    };
    assert_eq!(parse_page_header(&header), Ok(expected));
    // Cut anywhere, it is incomplete, never wrong.
    for cut in 0..header.len() {
        assert_eq!(parse_page_header(&header[..cut]), Err(Malformed::Truncated), "cut at {cut}");
    }
    // A page type written as a binary is skipped, and without it the header is invalid.
    assert_eq!(parse_page_header(&[0x18, 0x01, 0x00, 0x25, 0x64, 0x00]), Err(Malformed::Invalid));
    // So is a data page header whose num_values is an i64: the reader wants an i32.
    let mut i64_rows = DATA_PAGE_HEADER;
    i64_rows[8] = 0x16;
    assert_eq!(parse_page_header(&i64_rows), Err(Malformed::Invalid));
    // A varint of more than ten bytes is refused, not read on.
    let mut long = vec![0x15];
    long.extend_from_slice(&[0xff; 10]);
    assert_eq!(parse_page_header(&long), Err(Malformed::Invalid));
    assert_eq!(parse_page_header(&long[..10]), Err(Malformed::Truncated));
}

/// A skipped collection ends exactly where its last element does: booleans take a byte
/// each, other integers a varint of any length; nested lists and maps count toward the
/// depth bound as structs do.
#[test]
fn skipped_collections_end_where_their_elements_do() {
    let skip = |kind: u8, bytes: &[u8]| {
        let mut reader = Compact { bytes, at: 0 };
        reader.skip(kind, 0).map(|()| reader.at)
    };
    for list in [&[0x21, 0x01, 0x02][..], &[0x22, 0x02, 0x01], &[0x25, 0x80, 0x01, 0x02], &[0x05]] {
        assert_eq!(skip(T_LIST, list), Ok(list.len()), "{list:02x?}");
    }
    // Lists of lists, maps whose values are maps, and maps whose keys are maps (each map
    // of one entry, the other half an i32 0), `levels` deep.
    let lists: fn(usize) -> Vec<u8> = |levels| [vec![0x19u8; levels - 1], vec![0x09]].concat();
    let by_value = |levels: usize| [[0x01u8, 0x5b, 0x00].repeat(levels - 1), vec![0x00]].concat();
    let by_key = |levels: usize| [[0x01u8, 0xb5].repeat(levels - 1), vec![0x00; levels]].concat();
    for (kind, nested) in [(T_LIST, lists), (T_MAP, by_value), (T_MAP, by_key)] {
        let deepest = nested(MAX_DEPTH + 1);
        assert_eq!(skip(kind, &deepest), Ok(deepest.len()), "{deepest:02x?}");
        assert_eq!(skip(kind, &nested(MAX_DEPTH + 2)), Err(Malformed::Invalid));
    }
}

/// Integers come back as the compact protocol writes them: zigzag, then a varint.
#[test]
fn zigzag_varints_decode_to_what_was_written() {
    for value in [
        0,
        1,
        -1,
        2,
        -2,
        63,
        -64,
        64,
        300,
        -300,
        i64::from(i32::MAX),
        i64::from(i32::MIN),
        i64::MAX,
        i64::MIN,
    ] {
        let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
        let mut bytes = Vec::new();
        while zigzag >= 0x80 {
            bytes.push(zigzag as u8 | 0x80);
            zigzag >>= 7;
        }
        bytes.push(zigzag as u8);
        let mut reader = Compact { bytes: &bytes, at: 0 };
        assert_eq!(reader.zigzag(), Ok(value));
        assert_eq!(reader.at, bytes.len(), "{value}");
    }
}

/// Structs nested up to [`MAX_DEPTH`] below the header are skipped; deeper is refused.
#[test]
fn nesting_deeper_than_the_bound_is_refused() {
    let nested = |levels: usize| {
        // The dictionary page header of `EMPTY_DICTIONARY_PAGE_HEADER`, then field 9 (a
        // struct) holding field 1 (a struct) holding … `levels` structs in all.
        let mut header = EMPTY_DICTIONARY_PAGE_HEADER[..EMPTY_DICTIONARY_PAGE_HEADER.len() - 1].to_vec();
        header.push(0x2c);
        header.extend(std::iter::repeat_n(0x1c, levels - 1));
        header.extend(std::iter::repeat_n(0x00, levels + 1));
        parse_page_header(&header)
    };
    assert_eq!(nested(1).map(|h| h.data_page_rows), Ok(None));
    assert_eq!(nested(MAX_DEPTH + 1).map(|h| h.compressed_size), Ok(0));
    assert_eq!(nested(MAX_DEPTH + 2), Err(Malformed::Invalid));
}

#[test]
fn a_truncated_header_asks_for_more_and_garbage_is_refused() {
    let header = DATA_PAGE_HEADER;
    let parsed = parse_page_header(&header).unwrap();
    let expected =
        PageHeader { length: 14, compressed_size: 50, data_page_rows: Some(7), data_page_encoding: Some(8) };
    assert_eq!(parsed, expected);
    assert_eq!(dictionary_encoded(&header), Some(true));
    assert_eq!(dictionary_encoded(&EMPTY_DICTIONARY_PAGE_HEADER), None, "not a data page");
    // A data page of no rows is read as such (the chunk's rows must still add up); one of
    // fewer than none is refused.
    let mut rows = header;
    for (num_values, expected) in [(0x00, Ok(Some(0))), (0x01, Err(Malformed::Invalid))] {
        rows[9] = num_values;
        assert_eq!(parse_page_header(&rows).map(|h| h.data_page_rows), expected, "{num_values}");
    }
    // Without its encoding, a data page header is refused.
    assert_eq!(
        parse_page_header(&[0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x64, 0x2c, 0x15, 0x0e, 0x00, 0x00]),
        Err(Malformed::Invalid)
    );
    for cut in 0..header.len() {
        assert_eq!(parse_page_header(&header[..cut]), Err(Malformed::Truncated), "cut at {cut}");
    }
    assert_eq!(parse_page_header(&[0x1f, 0x00]), Err(Malformed::Invalid));
    // A page type the format does not have.
    assert_eq!(parse_page_header(&[0x15, 0x0e, 0x25, 0x64, 0x00]), Err(Malformed::Invalid));
}
