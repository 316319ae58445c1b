//! `scrub`: secrets in free texts replaced by placeholders.
//!
//! The passes run in this order, each over the result of the one before, on leftmost
//! non-overlapping matches; a match that fails its check stays as it is. The built-in classes
//! are ASCII (`\d` is `[0-9]`; a word character is `[A-Za-z0-9_]`). A match "starts a word"
//! when the character before it is not a word character, or is the letter of a backslash
//! escape (`\n`, `\r`, `\t`, `\b`, `\f`: a text holding JSON). The rules are published in
//! docs/api.md ("Field policies"); the tests' oracle implements them again with Python's `re`.
//!
//! 1. the operator's patterns (Unicode, as written) → `[redacted]`
//! 2. JWTs (`eyJ…`, three dot-separated base64url parts), starting a word → `[token]`
//! 3. `Bearer`/`OAuth` (any case), starting a word, then a credential of 8 characters or more
//!    that holds a digit or is 20 long → `[token]`
//! 4. e-mail addresses, `@` or `%40` (an address in a URL); not an image scale (`x@2x.png`);
//!    a backslash escape's letter in front stays → `[email]`
//! 5. international phone numbers: `+` and 8 to 15 digits with spaces, dots, dashes or
//!    parentheses → `[phone]`
//! 6. card numbers, starting a word: 13 to 19 digits from an issuer's range (first digit 2 to
//!    6), contiguous, in four-digit groups, or 4-6-5; Luhn-valid → `[card]`
//! 7. local phone numbers: `(123) 456-7890`, `123-456-7890`, `123.456.7890`, starting a word
//!    → `[phone]`
//! 8. IPv6 addresses: a run of hex digits, colons and dots with two colons or more, less a
//!    lone leading colon, trailing dots and a lone trailing colon, starting a word and not
//!    followed by one, that parses as an address and holds a decimal digit → `[ip]`
//! 9. IPv4 addresses: four numbers 0–255 without leading zeros, starting a word, not inside a
//!    longer dotted number → `[ip]`
//!
//! The fast path: most crash texts hold none of these, and nine regex passes over every text
//! would cost several times the export. Pass 2 runs only on a text holding `eyJ`; pass 4 only
//! on one holding an `@` or `%40` between an address's character and a domain with a dot and
//! two letters, pass 5 only on one holding `+` and a digit ([`rare_candidates`], one memchr
//! scan); passes 6 to 9 only where [`digit_candidate`] finds a necessary condition of one of
//! them: a digit run in the shape of a card, a phone number or a dotted quad (the `digits`
//! module's scans), or two colons at most four hex digits apart in a stretch of an address's
//! characters holding a digit. It is switchable
//! (`LOGS_SCRUB_FAST_PATH=off`, [`Scrubber::without_fast_path`]) and tested to give the same
//! texts as the passes alone.

use std::borrow::Cow;
use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::{Regex, RegexBuilder};

use digits::{digit_candidate, luhn_bytes};

mod digits;

/// The operator's patterns and the built-in detectors.
#[derive(Debug, Clone)]
pub struct Scrubber {
    operator: Vec<Regex>,
    patterns: Vec<String>,
    /// Skip the passes a text cannot match (see the module's documentation).
    fast_path: bool,
}

impl Default for Scrubber {
    fn default() -> Scrubber {
        Scrubber { operator: Vec::new(), patterns: Vec::new(), fast_path: fast_path_default() }
    }
}

/// The fast path unless `LOGS_SCRUB_FAST_PATH=off` (for benchmarks and tests that compare).
fn fast_path_default() -> bool {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var("LOGS_SCRUB_FAST_PATH").map_or(true, |v| v != "off"));
    *ON
}

impl PartialEq for Scrubber {
    fn eq(&self, other: &Scrubber) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for Scrubber {}

impl std::hash::Hash for Scrubber {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.patterns.hash(state);
    }
}

/// The most operator patterns accepted, and their longest text.
pub const MAX_PATTERNS: usize = 64;
const MAX_PATTERN_LEN: usize = 1024;

struct Builtin {
    jwt: Regex,
    bearer: Regex,
    email: Regex,
    phone_international: Regex,
    card: Regex,
    phone_local: Regex,
    ipv6: Regex,
    ipv4: Regex,
}

static BUILTIN: LazyLock<Builtin> = LazyLock::new(|| {
    let ascii =
        |pattern: &str| RegexBuilder::new(pattern).unicode(false).build().expect("a built-in pattern");
    Builtin {
        jwt: ascii(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
        bearer: ascii(r"(?i)(?:bearer|oauth)\s+[A-Za-z0-9._~+/=-]{8,}"),
        email: ascii(r"[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
        phone_international: ascii(r"\+\d[\d .()-]{6,22}\d"),
        card: ascii(
            r"(?:[2-6]\d{12,18}|[2-6]\d{3}(?:[ -]\d{4}){3}(?:[ -]\d{3})?|3\d{3}[ -]\d{6}[ -]\d{5})\b",
        ),
        phone_local: ascii(r"(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}\b"),
        ipv6: ascii(r"[0-9A-Fa-f.:]*:[0-9A-Fa-f.:]*:[0-9A-Fa-f.:]*"),
        ipv4: ascii(r"(?:\d{1,3}\.){3}\d{1,3}\b"),
    }
});

/// What a pass does with one match: keep it, or replace `[start, end)` of the text (within
/// the match) with a placeholder.
enum Verdict {
    Keep,
    Replace { start: usize, end: usize, placeholder: &'static str },
}

impl Scrubber {
    /// A scrubber with the operator's `patterns` (Rust `regex` syntax) besides the built-in
    /// detectors; the error names the pattern by its position, not its text.
    pub fn new(patterns: &[String]) -> Result<Scrubber, String> {
        if patterns.len() > MAX_PATTERNS {
            return Err(format!("{} scrub patterns; at most {MAX_PATTERNS} are accepted", patterns.len()));
        }
        let operator = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.len() > MAX_PATTERN_LEN || p.is_empty() {
                    return Err(format!("scrub pattern {} must be 1 to {MAX_PATTERN_LEN} bytes", i + 1));
                }
                let re = RegexBuilder::new(p)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| format!("scrub pattern {} is not a valid regular expression: {e}", i + 1))?;
                if re.is_match("") {
                    return Err(format!(
                        "scrub pattern {} matches the empty text; it must match something",
                        i + 1
                    ));
                }
                Ok(re)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scrubber { operator, patterns: patterns.to_vec(), fast_path: fast_path_default() })
    }

    /// The same scrubber running every pass on every text.
    pub fn without_fast_path(mut self) -> Scrubber {
        self.fast_path = false;
        self
    }

    /// The operator's patterns, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// `text` with every secret the passes find replaced by its placeholder; borrowed when
    /// nothing was found.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let b = &*BUILTIN;
        let all = !self.fast_path;
        let mut text = Cow::Borrowed(text);
        for re in &self.operator {
            text = pass(text, re, |_, s, e| Verdict::Replace { start: s, end: e, placeholder: "[redacted]" });
        }
        if all || memchr::memmem::find(text.as_bytes(), b"eyJ").is_some() {
            text = pass(text, &b.jwt, |t, s, e| whole(starts_word(t, s), s, e, "[token]"));
        }
        text = pass(text, &b.bearer, |t, s, e| {
            let credential = t[s..e].split_ascii_whitespace().nth(1).unwrap_or("");
            let strong = credential.len() >= 20 || credential.bytes().any(|c| c.is_ascii_digit());
            whole(starts_word(t, s) && strong, s, e, "[token]")
        });
        let (email, phone) = if all { (true, true) } else { rare_candidates(text.as_bytes()) };
        if email {
            text = pass(text, &b.email, |t, s, e| {
                let m = &t[s..e];
                let domain =
                    m.split_once('@').map_or_else(|| m.split_once("%40").map_or("", |(_, d)| d), |(_, d)| d);
                let d = domain.as_bytes();
                if d.len() > 2 && d[0].is_ascii_digit() && d[1] == b'x' && d[2] == b'.' {
                    return Verdict::Keep;
                }
                // The letter of a backslash escape in front (`\nbob@…`) is not the address's.
                let escaped = s > 0 && t.as_bytes()[s - 1] == b'\\' && b"nrtbf".contains(&t.as_bytes()[s]);
                Verdict::Replace { start: if escaped { s + 1 } else { s }, end: e, placeholder: "[email]" }
            });
        }
        if phone {
            text = pass(text, &b.phone_international, phone_international);
        }
        if !all && !digit_candidate(text.as_bytes()) {
            // Passes 6 to 9 need a digit in one of their shapes.
            return text;
        }
        text = pass(text, &b.card, |t, s, e| {
            whole(starts_word(t, s) && luhn_bytes(&t.as_bytes()[s..e]), s, e, "[card]")
        });
        text = pass(text, &b.phone_local, |t, s, e| {
            whole(t.as_bytes()[s] == b'(' || starts_word(t, s), s, e, "[phone]")
        });
        text = pass(text, &b.ipv6, ipv6);
        pass(text, &b.ipv4, |t, s, e| whole(ipv4_stands_alone(t, s, e), s, e, "[ip]"))
    }
}

fn phone_international(t: &str, s: usize, e: usize) -> Verdict {
    let digits = t[s..e].bytes().filter(u8::is_ascii_digit).count();
    whole((8..=15).contains(&digits), s, e, "[phone]")
}

/// Whether the e-mail pass (4) and the international phone pass (5) may match, from one scan
/// for `@`, `%` and `+`: an `@` or `%40` after a character of an address and before a domain
/// holding a dot and two letters; a `+` before a digit.
fn rare_candidates(t: &[u8]) -> (bool, bool) {
    let (mut email, mut phone) = (false, false);
    for at in memchr::memchr3_iter(b'@', b'%', b'+', t) {
        match t[at] {
            b'+' => phone |= t.get(at + 1).is_some_and(u8::is_ascii_digit),
            c => {
                let domain = if c == b'@' {
                    at + 1
                } else if t[at..].starts_with(b"%40") {
                    at + 3
                } else {
                    continue;
                };
                let local = at > 0 && (is_word(t[at - 1]) || b".%+-".contains(&t[at - 1]));
                email |= local && dotted_domain(&t[domain..]);
            }
        }
        if email && phone {
            break;
        }
    }
    (email, phone)
}

/// Whether the letters, digits, dots and dashes that `t` starts with hold a dot and two letters.
fn dotted_domain(t: &[u8]) -> bool {
    let run = t.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == b'.' || **c == b'-').count();
    t[..run].windows(3).any(|w| w[0] == b'.' && w[1].is_ascii_alphabetic() && w[2].is_ascii_alphabetic())
}

/// The whole match replaced by `placeholder`, when `replace`.
fn whole(replace: bool, start: usize, end: usize, placeholder: &'static str) -> Verdict {
    if replace { Verdict::Replace { start, end, placeholder } } else { Verdict::Keep }
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether the text from `at` starts a word: after a non-word character, or after the letter
/// of a backslash escape.
fn starts_word(text: &str, at: usize) -> bool {
    let b = text.as_bytes();
    match at.checked_sub(1).map(|i| b[i]) {
        None => true,
        Some(c) if !is_word(c) => true,
        Some(c) => b"nrtbf".contains(&c) && at >= 2 && b[at - 2] == b'\\',
    }
}

/// Replaces what `judge(text, match start, match end)` says for each match of `re`.
fn pass<'a>(text: Cow<'a, str>, re: &Regex, judge: impl Fn(&str, usize, usize) -> Verdict) -> Cow<'a, str> {
    let mut out: Option<String> = None;
    let mut copied = 0;
    for m in re.find_iter(&text) {
        if let Verdict::Replace { start, end, placeholder } = judge(&text, m.start(), m.end()) {
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..start]);
            out.push_str(placeholder);
            copied = end;
        }
    }
    match out {
        None => text,
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

/// An IPv6 candidate, less a lone leading colon, trailing dots and a lone trailing colon.
fn ipv6(text: &str, start: usize, end: usize) -> Verdict {
    let mut s = start;
    let mut e = end;
    let b = text.as_bytes();
    if b[s] == b':' && b.get(s + 1) != Some(&b':') {
        s += 1;
    }
    while e > s && b[e - 1] == b'.' {
        e -= 1;
    }
    if e > s + 1 && b[e - 1] == b':' && b[e - 2] != b':' {
        e -= 1;
    }
    let address = &text[s..e];
    let alone = starts_word(text, s) && !b.get(end).is_some_and(|c| is_word(*c));
    let valid = address.bytes().any(|c| c.is_ascii_digit()) && address.parse::<Ipv6Addr>().is_ok();
    whole(alone && valid, s, e, "[ip]")
}

/// Four numbers 0–255 without leading zeros, starting a word, not inside a longer dotted
/// number.
fn ipv4_stands_alone(text: &str, start: usize, end: usize) -> bool {
    let candidate = &text[start..end];
    let numbers_ok = candidate
        .split('.')
        .all(|n| n.parse::<u16>().is_ok_and(|v| v <= 255) && (n == "0" || !n.starts_with('0')));
    let b = text.as_bytes();
    let after_dot_digit = b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit);
    numbers_ok && starts_word(text, start) && (start == 0 || b[start - 1] != b'.') && !after_dot_digit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(text: &str) -> String {
        Scrubber::default().scrub(text).into_owned()
    }

    #[test]
    fn each_kind_of_secret_is_replaced() {
        assert_eq!(scrub("mail jane.doe+x@mail.example.com now"), "mail [email] now");
        assert_eq!(scrub("Authorization: Bearer abcdefgh12345678"), "Authorization: [token]");
        assert_eq!(scrub("t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln;"), "t=[token];");
        assert_eq!(scrub("card 4111 1111 1111 1111."), "card [card].");
        assert_eq!(scrub("card 4111-1111-1111-1112"), "card 4111-1111-1111-1112");
        assert_eq!(scrub("card 4111 1111 1111 1111 12/27"), "card [card] 12/27");
        assert_eq!(
            scrub("{\\\"a\\\":\\\"x\\n4111111111111111\\nbob@example.com\\\"}"),
            "{\\\"a\\\":\\\"x\\n[card]\\n[email]\\\"}"
        );
        assert_eq!(scrub("to jane.doe%40example.com"), "to [email]");
        assert_eq!(scrub("call +4915112345678"), "call [phone]");
        assert_eq!(scrub("ip:2001:db8::1, 2001:db8:85a3::8a2e:370:7334: refused"), "ip:[ip], [ip]: refused");
        assert_eq!(
            scrub("call +49 30 1234567 or (555) 123-4567 or 555-123-4567"),
            "call [phone] or [phone] or [phone]"
        );
        assert_eq!(scrub("from 192.168.1.20, ::ffff:10.0.0.1 and 2001:db8::1."), "from [ip], [ip] and [ip].");
        assert_eq!(scrub("fe80::1"), "[ip]");
    }

    #[test]
    fn near_misses_stay() {
        for text in [
            "version 1.2.3.4.5 and 10.0.1",
            "std::vector<int> at a::b",
            "at 12:34:56 on 2026-10-01",
            "0x7fff5fbff8c0 line 42",
            "id 1234567890123456",
            "uuid 123e4567-e89b-12d3-a456-426614174000",
            "user@localhost",
            "ip 256.1.1.1 or 01.2.3.4",
            "AppIcon60x60@2x.png",
            "OAuth provider returned; Bearer authentication failed",
            "range 2026-10-01 2026-10-07, at 1790000000005 ms",
            "ProcessRecord{4104930 84677278:",
            "",
        ] {
            assert!(matches!(Scrubber::default().scrub(text), Cow::Borrowed(_)), "{text}");
        }
    }

    /// The fast path changes no text: random texts of secrets, near misses and noise give
    /// the same result with and without it.
    #[test]
    fn the_fast_path_gives_what_every_pass_gives() {
        use rand::prelude::*;
        let pieces = [
            "jane.doe@example.com",
            "x%40y.org",
            "+49 30 1234567",
            "(555) 123-4567",
            "555.123.4567",
            "4111 1111 1111 1111",
            "4111-1111-1111-1112",
            "5500005555555559",
            "378282246310005",
            "3782 822463 10005",
            "192.168.0.1",
            "1.2.3.4.5",
            "10.0.1",
            "::1",
            "fe80::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
            "de:ad:be:ef:00:11:22:33",
            "std::vector",
            "12:34:56",
            "Bearer abcdefgh12345678",
            "eyJhbGciOiJ9.eyJzdWIiOiIxIn0.sig",
            "0x7fff5fbff8c0",
            "at Main.run(Main.java:42)",
            "\\n",
            "\\\"",
            "\n",
            " ",
            ".",
            "-",
            ":",
            "(",
            ")",
            "é",
            "2026-10-01",
            "123",
            "1234",
            "12",
            "9",
            "a",
            "Z",
            "_",
            "4111111111111111",
            "2221000000000009",
            "12345678901234567890",
            "0.35",
            "443) ",
            "192.168.1.",
            "(555)",
            "555-1234",
        ];
        let plain = Scrubber::default().without_fast_path();
        let fast = Scrubber { fast_path: true, ..Scrubber::default() };
        let mut rng = rand::rngs::StdRng::seed_from_u64(46);
        for _ in 0..50_000 {
            let n = rng.random_range(1..14);
            let text: String = (0..n).map(|_| *pieces.choose(&mut rng).unwrap()).collect();
            assert_eq!(fast.scrub(&text), plain.scrub(&text), "{text:?}");
        }
        for line in include_str!("../../tests/privacy/scrub_corpus.jsonl").lines() {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            let text = case["text"].as_str().unwrap();
            assert_eq!(fast.scrub(text), plain.scrub(text), "{text:?}");
        }
    }

    #[test]
    fn operator_patterns_come_first_and_are_checked() {
        let s = Scrubber::new(&["ACME-[0-9]{6}".into()]).unwrap();
        assert_eq!(s.scrub("order ACME-123456 by a@b.io"), "order [redacted] by [email]");
        assert!(Scrubber::new(&["(".into()]).unwrap_err().contains("scrub pattern 1"));
        assert!(Scrubber::new(&["x*".into()]).unwrap_err().contains("empty"));
    }
}
