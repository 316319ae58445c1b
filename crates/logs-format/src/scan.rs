//! Byte-level helpers shared by both formats: a word-at-a-time search for "special" bytes
//! (the bytes that force CSV quoting or JSON escaping) and allocation-free integer formatting.
//!
//! Both formats also treat the Unicode line breaks as special, so that a reader that splits
//! the output into lines the way Python's `str.splitlines` does (LF, CR, VT, FF, the
//! separators U+001C..U+001E, NEL U+0085, U+2028, U+2029) never cuts a record: CSV quotes a
//! value holding one, JSON escapes it. The word search marks the first byte of each multi-byte
//! break (C2, E2) as a candidate; [`line_break_at`] then decides, and a candidate that starts
//! some other character (`é` is C3 A9, `£` C2 A3, `—` E2 80 94) is passed over.
//!
//! For CSV, the search first passes over blocks of 32 bytes that hold no special byte, testing
//! each block byte by byte without branches, a loop the compiler turns into SIMD compares (the
//! crate forbids `unsafe`, which rules out `std::arch`). From the first block that holds one
//! (for JSON, from the start), it reads eight bytes at a time into a little-endian `u64` and
//! computes, without branches, a mask with the high bit set in special bytes (SWAR: "SIMD
//! within a register"), whose lowest set bit tells where the first one is. The masks use the
//! classic `(x - 0x01…) & !x` zero-byte test, which is exact up to and including the first
//! marked byte; later bytes may be marked spuriously (a borrow runs upwards), so a mask is only
//! ever used for the position of its lowest set bit. A value shorter than a word, as OS names
//! and versions are, is gathered into one word without a loop ([`find_in_short`]).

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
/// Eight `a`s: a byte that no mask marks, to fill the unused part of a word.
const FILLER: u64 = 0x6161_6161_6161_6161;

/// Marks (before `& HIGH_BITS`) bytes of `word` below `limit` (at most 0x80).
#[inline(always)]
fn below(word: u64, limit: u8) -> u64 {
    word.wrapping_sub(ONES * u64::from(limit)) & !word
}

/// Marks (before `& HIGH_BITS`) bytes of `word` equal to `byte`.
#[inline(always)]
fn equal(word: u64, byte: u8) -> u64 {
    below(word ^ (ONES * u64::from(byte)), 1)
}

/// Marks (before `& HIGH_BITS`) the bytes C2 and E2, the lead bytes of the multi-byte line
/// breaks: they differ only in bit 5, so setting it leaves E2 for both and nothing else.
#[inline(always)]
fn line_break_lead(word: u64) -> u64 {
    equal(word | (ONES * 0x20), 0xE2)
}

/// A class of special bytes, tested two ways that must agree: one byte at a time, which the
/// compiler turns into SIMD compares over a block of [`BLOCK`] bytes, and eight bytes at a
/// time in a word (SWAR), which also tells where the first one is.
pub(crate) trait Special {
    /// Whether the search passes over blocks first: it pays where special bytes are rare, and
    /// costs where they are close together (a JSON string of a stack trace has an escape
    /// every 30–60 bytes, and a block that holds one is searched again a word at a time).
    const BLOCKS: bool;
    fn byte(byte: u8) -> bool;
    /// A mask whose lowest set bit is the high bit of the first special byte of `word`
    /// (little-endian), or 0.
    fn word(word: u64) -> u64;
}

/// Candidates for special bytes of a CSV field: `,` `"` (RFC 4180), every control character
/// (CR, LF and the other line breaks among them), and the lead bytes C2 and E2 of the
/// multi-byte line breaks. [`csv_special_at`] tells the real ones.
pub(crate) struct CsvCandidate;

impl Special for CsvCandidate {
    const BLOCKS: bool = true;

    #[inline(always)]
    fn byte(byte: u8) -> bool {
        (byte < 0x20) | (byte == b',') | (byte == b'"') | (byte | 0x20 == 0xE2)
    }

    #[inline(always)]
    fn word(word: u64) -> u64 {
        (below(word, 0x20) | equal(word, b',') | equal(word, b'"') | line_break_lead(word)) & HIGH_BITS
    }
}

/// Whether the byte at `at` (marked by [`CsvCandidate`]) forces a CSV field to be quoted:
/// `,`, `"` or the start of a line break.
#[inline]
pub(crate) fn csv_special_at(text: &[u8], at: usize) -> bool {
    matches!(text[at], b',' | b'"') || line_break_at(text, at) > 0
}

/// The length in bytes of the line break that starts at `at`, or 0: LF, VT, FF, CR and
/// U+001C..U+001E (one byte), NEL U+0085 (C2 85), U+2028 and U+2029 (E2 80 A8, E2 80 A9).
/// These are the breaks of Python's `str.splitlines` (CR LF is two of them here).
#[inline]
pub(crate) fn line_break_at(text: &[u8], at: usize) -> usize {
    match text[at] {
        0x0A..=0x0D | 0x1C..=0x1E => 1,
        0xC2 if text.get(at + 1) == Some(&0x85) => 2,
        0xE2 if text.get(at + 1) == Some(&0x80) && matches!(text.get(at + 2), Some(0xA8 | 0xA9)) => 3,
        _ => 0,
    }
}

/// The first index (≥ `from`) where a CSV field needs quoting, if any.
#[inline]
pub(crate) fn find_csv_special(text: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(candidate) = find_special::<CsvCandidate>(text, at) {
        if csv_special_at(text, candidate) {
            return Some(candidate);
        }
        at = candidate + 1;
    }
    None
}

/// The double quote, the one byte a quoted CSV field escapes (by doubling it).
pub(crate) struct CsvQuote;

impl Special for CsvQuote {
    const BLOCKS: bool = true;

    #[inline(always)]
    fn byte(byte: u8) -> bool {
        byte == b'"'
    }

    #[inline(always)]
    fn word(word: u64) -> u64 {
        equal(word, b'"') & HIGH_BITS
    }
}

/// Candidates for special bytes of a JSON string: `"`, `\\`, the control characters
/// U+0000..U+001F, and the lead bytes C2 and E2 of NEL, U+2028 and U+2029, which the JSON
/// output escapes too (see [`line_break_at`]).
pub(crate) struct JsonCandidate;

impl Special for JsonCandidate {
    const BLOCKS: bool = false;

    #[inline(always)]
    fn byte(byte: u8) -> bool {
        (byte < 0x20) | (byte == b'"') | (byte == b'\\') | (byte | 0x20 == 0xE2)
    }

    #[inline(always)]
    fn word(word: u64) -> u64 {
        (below(word, 0x20) | equal(word, b'"') | equal(word, b'\\') | line_break_lead(word)) & HIGH_BITS
    }
}

/// The bytes tested at once before the search looks for the first special one: as many as
/// two SSE2 registers hold. (`|` rather than `||` in [`Special::byte`] keeps the test free of
/// branches, which is what lets the compiler vectorise it.)
const BLOCK: usize = 32;

#[inline(always)]
fn load(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Index (≥ `from`) of the first byte of `bytes` that `S` marks, if any.
///
/// Where `S::BLOCKS`, blocks without a special byte are passed over [`BLOCK`] bytes at a time;
/// the first block with one, and the tail, are searched a word at a time.
#[inline(always)]
pub(crate) fn find_special<S: Special>(bytes: &[u8], from: usize) -> Option<usize> {
    if bytes.len() < 8 {
        return find_in_short::<S>(bytes, from);
    }
    let first_in = |at: usize, mask: u64| at + (mask.trailing_zeros() / 8) as usize;
    let mut at = from;
    while let Some(block) = bytes.get(at..at + BLOCK).filter(|_| S::BLOCKS) {
        if block.iter().fold(false, |any, &byte| any | S::byte(byte)) {
            break;
        }
        at += BLOCK;
    }
    while at + 16 <= bytes.len() {
        let (low, high) = (S::word(load(bytes, at)), S::word(load(bytes, at + 8)));
        if low | high != 0 {
            return Some(if low != 0 { first_in(at, low) } else { first_in(at + 8, high) });
        }
        at += 16;
    }
    if at + 8 <= bytes.len() {
        let mask = S::word(load(bytes, at));
        if mask != 0 {
            return Some(first_in(at, mask));
        }
        at += 8;
    }
    let rest = bytes.len() - at;
    if rest == 0 {
        return None;
    }
    // Fewer than eight bytes are left: take the last eight bytes of `bytes`, with the bytes
    // before `at` overwritten with `a`, which is not special, so that no mark can come from them.
    let pad = u64::MAX >> (8 * rest);
    let mask = S::word((load(bytes, bytes.len() - 8) & !pad) | (FILLER & pad));
    (mask != 0).then(|| first_in(bytes.len() - 8, mask))
}

/// [`find_special`] for `bytes` shorter than eight (an OS name, a version, a country code):
/// every byte from `from` on is loaded into one word without a loop, some of them twice (two
/// overlapping four-byte loads, or the first, middle and last byte), and only a word that holds
/// a special byte is searched byte by byte for the first one. Kept out of line: inlined into
/// [`find_special`], it made the compiler lay out the word loop of JSON's string writer worse.
#[inline(never)]
fn find_in_short<S: Special>(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = &bytes[from..];
    let word = match rest.len() {
        0 => return None,
        1..=3 => {
            let [first, middle, last] = [rest[0], rest[rest.len() / 2], rest[rest.len() - 1]];
            (FILLER & !0xFF_FFFF) | u64::from(first) | u64::from(middle) << 8 | u64::from(last) << 16
        }
        len => {
            let four = |at: usize| {
                u64::from(u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]))
            };
            four(0) | four(len - 4) << 32
        }
    };
    if S::word(word) == 0 {
        return None;
    }
    rest.iter().position(|&byte| S::byte(byte)).map(|i| from + i)
}

/// "00" "01" … "99": two digits per table entry halve the number of divisions.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Appends the decimal digits of `value`.
#[inline]
pub(crate) fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    while value >= 100 {
        let pair = (value % 100) as usize * 2;
        value /= 100;
        start -= 2;
        digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if value >= 10 {
        let pair = value as usize * 2;
        start -= 2;
        digits[start..start + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        start -= 1;
        digits[start] = b'0' + value as u8;
    }
    out.extend_from_slice(&digits[start..]);
}

/// Appends `value` in decimal, with a leading `-` when negative.
#[inline]
pub(crate) fn write_i64(out: &mut Vec<u8>, value: i64) {
    if value < 0 {
        out.push(b'-');
    }
    write_u64(out, value.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_find(bytes: &[u8], from: usize, special: impl Fn(u8) -> bool) -> Option<usize> {
        (from..bytes.len()).find(|&i| special(bytes[i]))
    }

    fn is_json_candidate(b: u8) -> bool {
        b < 0x20 || b == b'"' || b == b'\\' || b == 0xC2 || b == 0xE2
    }

    fn is_csv_candidate(b: u8) -> bool {
        b < 0x20 || matches!(b, b',' | b'"' | 0xC2 | 0xE2)
    }

    /// The characters that Python's `str.splitlines` breaks lines at.
    fn is_python_line_break(c: char) -> bool {
        matches!(
            c,
            '\n' | '\r'
                | '\u{b}'
                | '\u{c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    }

    /// Character by character: where a CSV field must be quoted.
    fn naive_csv(text: &str, from: usize) -> Option<usize> {
        text.char_indices()
            .find(|&(i, c)| i >= from && (c == ',' || c == '"' || is_python_line_break(c)))
            .map(|(i, _)| i)
    }

    #[test]
    fn every_byte_value_is_classified_exactly() {
        for b in 0..=255u8 {
            for len in (1..=17).chain([31, 32, 33, 40, 64, 70]) {
                for pos in 0..len {
                    let mut bytes = vec![b'x'; len];
                    bytes[pos] = b;
                    let json = find_special::<JsonCandidate>(&bytes, 0);
                    assert_eq!(json, is_json_candidate(b).then_some(pos), "json byte {b} at {pos}/{len}");
                    let csv = find_special::<CsvCandidate>(&bytes, 0);
                    assert_eq!(csv, is_csv_candidate(b).then_some(pos), "csv byte {b} at {pos}/{len}");
                    let quote = find_special::<CsvQuote>(&bytes, 0);
                    assert_eq!(quote, (b == b'"').then_some(pos));
                }
            }
        }
    }

    /// Values shorter than a word take their own path: every byte value at every position,
    /// searched from every offset.
    #[test]
    fn short_values_are_searched_from_every_offset() {
        for b in 0..=255u8 {
            for len in 1..8 {
                for pos in 0..len {
                    let mut bytes = vec![b'x'; len];
                    bytes[pos] = b;
                    for from in 0..=len {
                        let json = find_special::<JsonCandidate>(&bytes, from);
                        assert_eq!(
                            json,
                            naive_find(&bytes, from, is_json_candidate),
                            "{bytes:?} from {from}"
                        );
                        let csv = find_special::<CsvCandidate>(&bytes, from);
                        assert_eq!(csv, naive_find(&bytes, from, is_csv_candidate), "{bytes:?} from {from}");
                    }
                }
            }
        }
    }

    #[test]
    fn finds_the_first_special_after_from() {
        // Neighbouring special bytes must not hide each other (no borrow between bytes).
        let bytes = b"\x00\x01\"\\a\x1f\x20\x7f\xff\"\xe0,\r\n\"\"x\x00y";
        for from in 0..=bytes.len() {
            assert_eq!(
                find_special::<JsonCandidate>(bytes, from),
                naive_find(bytes, from, is_json_candidate)
            );
            assert_eq!(find_special::<CsvCandidate>(bytes, from), naive_find(bytes, from, is_csv_candidate));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Spurious marks above the first special byte must never change the answer.
        #[test]
        fn agrees_with_a_byte_loop(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"\x00\x01\x1f\x20\x21\"#,-\\\r\n\t\x7f\x80\x81\xa2\xdc\xe0\xff".to_vec()),
                    proptest::num::u8::ANY,
                ],
                0..80,
            ),
        ) {
            for from in 0..=bytes.len() {
                proptest::prop_assert_eq!(find_special::<JsonCandidate>(&bytes, from), naive_find(&bytes, from, is_json_candidate));
                proptest::prop_assert_eq!(find_special::<CsvCandidate>(&bytes, from), naive_find(&bytes, from, is_csv_candidate));
                proptest::prop_assert_eq!(find_special::<CsvQuote>(&bytes, from), naive_find(&bytes, from, |b| b == b'"'));
            }
        }
    }

    #[test]
    fn every_line_break_and_its_neighbours_are_told_apart() {
        // Each break, and the characters that share its lead byte or its first two bytes.
        let samples = [
            "\u{b}", "\u{c}", "\u{1c}", "\u{1d}", "\u{1e}", "\u{85}", "\u{2028}", "\u{2029}", "\t", "\u{1f}",
            "\u{84}", "\u{86}", "£", "\u{a0}", "\u{2027}", "\u{202a}", "—", "€", "…", "→", "\u{2fff}", "é",
            "Ж",
        ];
        for sample in samples {
            for (prefix, suffix) in [("", ""), ("abcdefghij", ""), ("", "abcdefghijklmnopq"), ("ab", "cd")] {
                let text = format!("{prefix}{sample}{suffix}");
                for from in 0..=text.len() {
                    if text.is_char_boundary(from) {
                        assert_eq!(
                            find_csv_special(text.as_bytes(), from),
                            naive_csv(&text, from),
                            "{text:?}"
                        );
                    }
                }
            }
        }
        // A lead byte at the very end of a (truncated) buffer is not a break.
        assert_eq!(line_break_at(b"ab\xe2\x80", 2), 0);
        assert_eq!(line_break_at(b"ab\xc2", 2), 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// On any text, the word search plus [`line_break_at`] agrees with a character loop.
        #[test]
        fn finds_what_a_character_loop_finds_for_csv(
            text in "[a,\"\\\\\t\n\r\u{b}\u{c}\u{1c}-\u{1f}\u{80}-\u{a3}é€—\u{2026}-\u{202a}Ж ]{0,40}",
        ) {
            for from in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
                proptest::prop_assert_eq!(find_csv_special(text.as_bytes(), from), naive_csv(&text, from));
            }
        }
    }

    #[test]
    fn formats_integers_like_std() {
        let mut out = Vec::new();
        let samples = [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            65535,
            1_700_000_000,
            u64::MAX / 10,
            u64::MAX - 1,
            u64::MAX,
        ];
        for v in samples.into_iter().chain((0..64).map(|s| 1u64 << s)).chain((0..20).map(|e| 10u64.pow(e))) {
            for v in [v, v.saturating_sub(1), v.saturating_add(1)] {
                out.clear();
                write_u64(&mut out, v);
                assert_eq!(out, v.to_string().as_bytes());
            }
        }
        for v in [0, -1, 1, -9, -10, -99, -100, i64::MIN, i64::MIN + 1, i64::MAX, -1_700_000_000] {
            out.clear();
            write_i64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }
}
