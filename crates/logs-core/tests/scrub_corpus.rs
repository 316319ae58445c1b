//! `scrub` against a corpus of real-looking crash texts (`tests/privacy/scrub_corpus.jsonl`):
//! stack traces, crash reports and JSON payloads with planted secrets of every kind, at the
//! start, middle and end of lines, inside JSON strings and next to escaped quotes — each one
//! replaced by its placeholder — and texts without secrets, which must come back byte for byte
//! (without even a copy). The expected texts follow the published rules (docs/api.md); the
//! tests' Python oracle checks the same corpus with its own regexes (logs-cli `privacy`).

use std::borrow::Cow;

use logs_core::Scrubber;
use serde_json::Value;

const CORPUS: &str = include_str!("privacy/scrub_corpus.jsonl");

#[test]
fn every_planted_secret_goes_and_every_clean_text_stays() {
    let scrubber = Scrubber::default();
    let (mut secrets, mut clean) = (0, 0);
    for (i, line) in CORPUS.lines().enumerate() {
        let case: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", i + 1));
        let text = case["text"].as_str().unwrap();
        let expected = case["expected"].as_str().unwrap();
        let scrubbed = scrubber.scrub(text);
        assert_eq!(scrubbed, expected, "line {}: {text:?}", i + 1);
        if text == expected {
            clean += 1;
            assert!(matches!(scrubbed, Cow::Borrowed(_)), "line {}: a clean text was copied", i + 1);
        } else {
            secrets += 1;
        }
    }
    assert!(secrets >= 50 && clean >= 25, "{secrets} texts with secrets, {clean} without");
}

#[test]
fn the_corpus_plants_every_kind_of_secret() {
    let expected: String = CORPUS
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["expected"].as_str().unwrap().to_owned())
        .collect();
    for placeholder in ["[email]", "[phone]", "[ip]", "[token]", "[card]"] {
        assert!(expected.matches(placeholder).count() >= 5, "{placeholder}");
    }
}
