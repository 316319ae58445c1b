//! The pieces of `PageRewriter` that read and write bytes themselves: definition levels, the
//! Thrift compact protocol and page headers.

use super::*;
use crate::storage::page_headers::dictionary_encoded;

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
