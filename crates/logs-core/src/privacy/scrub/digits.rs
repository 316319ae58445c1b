//! Passes 6 to 9 of [`super`] need a digit in one of their shapes; [`digit_candidate`] looks
//! for a necessary condition of one, and a text without any skips the four regex passes.
//!
//! Two scans give the same answer: [`words`], eight bytes at a time in a `u64` (SWAR), on
//! every platform; and [`vectors`], 64 bytes at a time with SSE2 compares (through
//! `safe_arch`, since the crate forbids `unsafe`), on x86-64, where every processor has SSE2.
//! `LOGS_SCRUB_FAST_PATH=words` makes the words scan the one used, for benchmarks; the tests
//! compare the two on random texts of every length and on the scrub corpus.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use std::sync::LazyLock;

/// Whether `t` has a digit in a shape that passes 6 to 9 replace, as their patterns and checks
/// say, but for whether the match starts a word (a replacement by an earlier pass may make it
/// so): a Luhn-valid run of 13 to 19 digits from 2 to 6, or such a card in four-digit groups
/// (or 4-6-5); `(ddd) ddd-dddd` or `ddd-ddd-dddd`; a dotted quad of numbers to 255; a run inside
/// a stretch of hex digits, dots and colons with two colons or more within 45 bytes (an IPv6
/// address holds a decimal digit).
pub(super) fn digit_candidate(t: &[u8]) -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if vectors_wanted() {
        return vectors(t);
    }
    words(t)
}

/// The vector scan unless `LOGS_SCRUB_FAST_PATH=words`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn vectors_wanted() -> bool {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var("LOGS_SCRUB_FAST_PATH").map_or(true, |v| v != "words"));
    *ON
}

/// [`digit_candidate`] eight bytes at a time.
fn words(t: &[u8]) -> bool {
    (colon_pair(t) && ipv6_candidate(t)) || separated_digits(t)
}

/// [`digit_candidate`] 64 bytes at a time: the bytes that are digits, separators (space, dash,
/// dot, and `)` four bytes after `(`), colons and hex digits as bit masks, from SSE2 compares.
/// Then, as [`words`] does: a digit run followed by a separator, or one of 13 digits or more,
/// is looked at by [`shaped`]; two colons at most four hex digits apart send the text to
/// [`ipv6_candidate`], once.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn vectors(t: &[u8]) -> bool {
    // The digits that end the bytes before the chunk (a run crossing chunks).
    let mut run = 0usize;
    // The previous chunk's colons, hex digits and `(`, for what crosses into this one.
    let (mut last_colons, mut last_hexes, mut last_open) = (0u64, 0u64, 0u64);
    let mut ipv6_checked = false;
    let mut base = 0;
    // The last chunk, zero-filled: a zero byte is in no class.
    let mut padded = [0u8; 64];
    while base < t.len() {
        let chunk: &[u8; 64] = match t.get(base..base + 64) {
            Some(chunk) => chunk.try_into().expect("64 bytes"),
            None => {
                padded[..t.len() - base].copy_from_slice(&t[base..]);
                &padded
            }
        };
        let Masks { digits, spaces, close, open, colons, hexes } = Masks::of(chunk);
        if !ipv6_checked && colons != 0 {
            let c = u128::from(colons) << 64 | u128::from(last_colons);
            let h = u128::from(hexes) << 64 | u128::from(last_hexes);
            let (mut reach, mut r) = (c, c);
            for _ in 0..4 {
                r = (r << 1) & h;
                reach |= r;
            }
            if ((reach << 1) & c) >> 64 != 0 {
                if ipv6_candidate(t) {
                    return true;
                }
                ipv6_checked = true;
            }
        }
        // After fewer than 13 digits, `)` ends only the `(ddd)` of a phone number.
        let separators = spaces | (close & (open << 4 | last_open >> 60));
        (last_colons, last_hexes, last_open) = (colons, hexes, open);
        if digits != 0 || run > 0 {
            let mut pairs = ((digits << 1) | u64::from(run > 0)) & separators;
            while pairs != 0 {
                let end = base + pairs.trailing_zeros() as usize;
                let start = end - t[..end].iter().rev().take_while(|c| c.is_ascii_digit()).count();
                if shaped(t, start, end) {
                    return true;
                }
                pairs &= pairs - 1;
            }
            // A run of 13 digits or more: one that crosses into the chunk, then the first
            // 13th digit of each run inside it.
            let lead = digits.trailing_ones() as usize;
            if run > 0 && lead < 64 && run + lead >= 13 && shaped(t, base - run, base + lead) {
                return true;
            }
            let two = digits & (digits << 1);
            let four = two & (two << 2);
            let thirteen = four & (four << 4) & (four << 8) & (digits << 12);
            let mut firsts = thirteen & !(thirteen << 1);
            while firsts != 0 {
                let at = base + firsts.trailing_zeros() as usize;
                let start = at + 1 - t[..=at].iter().rev().take_while(|c| c.is_ascii_digit()).count();
                if shaped(t, start, run_end(t, start)) {
                    return true;
                }
                firsts &= firsts - 1;
            }
            run = if digits == u64::MAX { run + 64 } else { digits.leading_ones() as usize };
        }
        base += 64;
    }
    false
}

/// The classes of a chunk's bytes, bit `k` for byte `k`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
struct Masks {
    digits: u64,
    /// Space, dash and dot.
    spaces: u64,
    close: u64,
    open: u64,
    colons: u64,
    /// Hex digits.
    hexes: u64,
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
impl Masks {
    fn of(chunk: &[u8; 64]) -> Masks {
        use safe_arch::{
            bitor_m128i as or, cmp_eq_mask_i8_m128i as eq, load_unaligned_m128i, min_u8_m128i,
            move_mask_i8_m128i as mask, set_splat_i8_m128i as splat, sub_i8_m128i,
        };
        // `v - low` is at most `span` (unsigned) where `v` is in `low..=low + span`.
        let within = |v, low: u8, span: u8| {
            let d = sub_i8_m128i(v, splat(low as i8));
            eq(min_u8_m128i(d, splat(span as i8)), d)
        };
        let mut m = Masks { digits: 0, spaces: 0, close: 0, open: 0, colons: 0, hexes: 0 };
        for (q, part) in chunk.chunks_exact(16).enumerate() {
            let v = load_unaligned_m128i(part.try_into().expect("16 bytes"));
            let digit = within(v, b'0', 9);
            let space = or(or(eq(v, splat(b' ' as i8)), eq(v, splat(b'-' as i8))), eq(v, splat(b'.' as i8)));
            let hex = or(digit, within(or(v, splat(0x20)), b'a', 5));
            let bits = |x| u64::from(mask(x) as u16) << (16 * q);
            m.digits |= bits(digit);
            m.spaces |= bits(space);
            m.close |= bits(eq(v, splat(b')' as i8)));
            m.open |= bits(eq(v, splat(b'(' as i8)));
            m.colons |= bits(eq(v, splat(b':' as i8)));
            m.hexes |= bits(hex);
        }
        m
    }
}

/// Two colons with at most four hex digits between them, as every IPv6 address has: the gate
/// of [`ipv6_candidate`], which looks at every colon's surroundings.
fn colon_pair(t: &[u8]) -> bool {
    memchr::memchr_iter(b':', t).any(|colon| {
        let after = &t[colon + 1..(colon + 6).min(t.len())];
        after.iter().find(|c| !c.is_ascii_hexdigit()) == Some(&b':')
    })
}

/// A byte of every lane.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every lane.
const HIGH: u64 = 0x8080_8080_8080_8080;
const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;

/// The high bit of each byte of `w` that is an ASCII digit (exact: no carry crosses a lane).
fn digit_lanes(w: u64) -> u64 {
    let x = w ^ (ONES * u64::from(b'0'));
    !(((x & LOW7) + ONES * 0x76) | x) & HIGH
}

/// The high bit of each byte of `w` equal to `c` (exact).
fn byte_lanes(w: u64, c: u8) -> u64 {
    let y = w ^ (ONES * u64::from(c));
    !(((y & LOW7) + LOW7) | y) & HIGH
}

/// Whether a digit run followed by a space, dash, dot or `)`, or one of 13 digits or more, has
/// a shape of passes 6, 7 or 9 ([`shaped`]). Eight bytes at a time: only such runs are looked
/// at, where the byte-wise scan stopped at every run.
fn separated_digits(t: &[u8]) -> bool {
    // The digits that end the bytes before the current word (a run crossing words).
    let mut run = 0usize;
    let mut i = 0;
    while i + 8 <= t.len() {
        let w = u64::from_le_bytes(t[i..i + 8].try_into().expect("8 bytes"));
        let digits = digit_lanes(w);
        if digits != 0 || run > 0 {
            let separators =
                byte_lanes(w, b' ') | byte_lanes(w, b'-') | byte_lanes(w, b'.') | byte_lanes(w, b')');
            // A digit followed by a separator: in the word, or the last byte of the previous one.
            let mut pairs = ((digits << 8) | u64::from(run > 0) << 7) & separators;
            while pairs != 0 {
                let end = i + pairs.trailing_zeros() as usize / 8;
                // After fewer than 13 digits (longer runs are looked at below), `)` ends only
                // the `(ddd)` of a phone number: a stack frame's `(File.java:42)` is passed over.
                if t[end] != b')' || (end >= 4 && t[end - 4] == b'(') {
                    let start = end - t[..end].iter().rev().take_while(|c| c.is_ascii_digit()).count();
                    if shaped(t, start, end) {
                        return true;
                    }
                }
                pairs &= pairs - 1;
            }
            if digits == HIGH {
                run += 8;
            } else {
                let lead = (!digits & HIGH).trailing_zeros() as usize / 8;
                if run + lead >= 13 {
                    let start = i - run;
                    if shaped(t, start, run_end(t, start)) {
                        return true;
                    }
                }
                run = (!digits & HIGH).leading_zeros() as usize / 8;
            }
        }
        i += 8;
    }
    // The last bytes, from the start of the run that reaches them, one run at a time.
    let mut k = i - run;
    while k < t.len() {
        if !t[k].is_ascii_digit() {
            k += 1;
            continue;
        }
        let end = run_end(t, k);
        if shaped(t, k, end) {
            return true;
        }
        k = end;
    }
    false
}

/// Whether some stretch of hex digits, dots and colons around a colon (45 bytes either side:
/// an address is at most 45 long) holds another colon and a decimal digit: a necessary
/// condition of pass 8.
fn ipv6_candidate(t: &[u8]) -> bool {
    let mut from = 0;
    while let Some(colon) = memchr::memchr(b':', &t[from..]).map(|k| from + k) {
        let start = colon - t[colon.saturating_sub(45)..colon].iter().rev().take_while(|c| hex(**c)).count();
        let end = colon + 1 + t[colon + 1..(colon + 46).min(t.len())].iter().take_while(|c| hex(**c)).count();
        let stretch = &t[start..end];
        let colons = stretch.iter().filter(|c| **c == b':').count();
        if colons >= 2 && stretch.iter().any(u8::is_ascii_digit) {
            return true;
        }
        // A stretch of one colon holds no other: the next is past it.
        from = if colons >= 2 { colon + 1 } else { end };
    }
    false
}

/// A hex digit, a dot or a colon: what an IPv6 address is written with.
fn hex(c: u8) -> bool {
    c.is_ascii_hexdigit() || c == b':' || c == b'.'
}

/// The end of the digit run from `i`.
fn run_end(t: &[u8], mut i: usize) -> usize {
    while i < t.len() && t[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// Whether the digit run `t[start..end]` starts one of the shapes of passes 6, 7 and 9.
fn shaped(t: &[u8], start: usize, end: usize) -> bool {
    let len = end - start;
    let at = |k: usize| t.get(k).copied().unwrap_or(0);
    // Most runs are short and followed by none of the separators the shapes need.
    if len < 13 && !matches!(at(end), b' ' | b'-' | b'.' | b')') {
        return false;
    }
    let issuer = (b'2'..=b'6').contains(&t[start]);
    // A card: contiguous, or groups of exactly the given lengths with one space or dash between.
    let groups = |lengths: &[usize]| -> Option<usize> {
        let mut k = start;
        for (n, want) in lengths.iter().enumerate() {
            if n > 0 {
                if !matches!(at(k), b' ' | b'-') {
                    return None;
                }
                k += 1;
            }
            let e = run_end(t, k);
            if e - k != *want {
                return None;
            }
            k = e;
        }
        Some(k)
    };
    if issuer {
        if (13..=19).contains(&len) && luhn_bytes(&t[start..end]) {
            return true;
        }
        for lengths in [&[4, 4, 4, 4, 3][..], &[4, 4, 4, 4], &[4, 6, 5]] {
            if let Some(e) = groups(lengths)
                && luhn_bytes(&t[start..e])
            {
                return true;
            }
        }
    }
    // A local phone number: (ddd) ddd-dddd, ddd.ddd.dddd.
    if len == 3 {
        let paren = start > 0 && t[start - 1] == b'(' && at(end) == b')';
        let rest = if paren { end + 1 + usize::from(at(end + 1) == b' ') } else { end + 1 };
        let sep = paren || matches!(at(end), b'.' | b'-');
        if sep
            && run_end(t, rest) == rest + 3
            && matches!(at(rest + 3), b'.' | b'-')
            && run_end(t, rest + 4) == rest + 8
        {
            return true;
        }
    }
    // A dotted quad: three more numbers of 1 to 3 digits after dots.
    if len <= 3 && at(end) == b'.' {
        let mut k = end;
        let mut numbers = 1;
        while numbers < 4 && at(k) == b'.' && at(k + 1).is_ascii_digit() {
            let e = run_end(t, k + 1);
            if e - k - 1 > 3 {
                break;
            }
            k = e;
            numbers += 1;
        }
        numbers == 4
    } else {
        false
    }
}

/// Whether the digits of `number` pass the Luhn check.
pub(super) fn luhn_bytes(number: &[u8]) -> bool {
    let mut sum = 0;
    for (i, d) in number.iter().rev().filter(|c| c.is_ascii_digit()).map(|c| u32::from(c - b'0')).enumerate()
    {
        sum += if i % 2 == 1 {
            let doubled = d * 2;
            if doubled > 9 { doubled - 9 } else { doubled }
        } else {
            d
        };
    }
    sum % 10 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each shape, and near misses, at every offset across a 64-byte chunk's end, by the words
    /// and by the scan the platform uses.
    #[test]
    fn shapes_are_found_at_every_offset() {
        let shapes = [
            "(555) 123-4567",
            "555-123-4567",
            "4111111111111111",
            "4111 1111 1111 1111",
            "10.0.0.1",
            "fe80::1",
        ];
        let misses = ["(File.java:42)", "(5555) 1", "at 12:34", "1.2.3", "at 1234567890"];
        for offset in 0..140 {
            for (text, found) in shapes.iter().map(|s| (s, true)).chain(misses.iter().map(|s| (s, false))) {
                let text = format!("{}{text}{}", "x".repeat(offset), "y".repeat(offset % 7));
                assert_eq!(words(text.as_bytes()), found, "{text}");
                assert_eq!(digit_candidate(text.as_bytes()), found, "{text}");
            }
        }
    }

    /// The two scans agree on random texts of the bytes the shapes are made of, of every
    /// length across the 64-byte chunks, and on the scrub corpus.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[test]
    fn the_vector_scan_finds_what_the_words_find() {
        use rand::prelude::*;
        let alphabet = b"0123456789012345678901234567890123456789 -.():abcdefABxyz_\\n";
        let mut rng = rand::rngs::StdRng::seed_from_u64(46);
        let mut found = 0;
        for _ in 0..200_000 {
            let len = rng.random_range(0..300);
            let text: Vec<u8> = (0..len).map(|_| *alphabet.choose(&mut rng).unwrap()).collect();
            let expected = words(&text);
            assert_eq!(vectors(&text), expected, "{:?}", String::from_utf8_lossy(&text));
            found += usize::from(expected);
        }
        // Both answers are drawn often.
        assert!((20_000..180_000).contains(&found), "{found}");
        for line in include_str!("../../../tests/privacy/scrub_corpus.jsonl").lines() {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = case["text"].as_str().unwrap().as_bytes();
            assert_eq!(vectors(text), words(text), "{:?}", case["text"]);
        }
    }
}
