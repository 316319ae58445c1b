//! Stage one of request parsing: a raw query string becomes decoded name/value pairs.
//!
//! Decoding is strict: `+` is a space, `%XX` is a byte, and the decoded bytes must be UTF-8.
//! A malformed escape or invalid UTF-8 is refused rather than replaced, so that a filter
//! value can never be silently changed on its way in.

use percent_encoding::percent_decode;

use crate::error::{RequestError, quote};

/// The names of the request's parameters other than the field filters.
pub(crate) const PARAMETERS: [&str; 11] = [
    "application_id",
    "date_since",
    "date_until",
    "fields",
    "date_dimension",
    "limit",
    "use_utf8_bom",
    "skip_unavailable_shards",
    "parts_count",
    "part_number",
    "cursor",
];

/// The decoded `name=value` pairs of a query string, in their original order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryPairs {
    pairs: Vec<(String, String)>,
}

impl QueryPairs {
    /// Splits and decodes `query` (without the leading `?`). A parameter that appears twice is
    /// refused here, whatever its name.
    pub fn parse(query: &str) -> Result<QueryPairs, RequestError> {
        let query = query.strip_prefix('?').unwrap_or(query);
        let mut pairs: Vec<(String, String)> = Vec::new();
        for segment in query.split('&').filter(|s| !s.is_empty()) {
            let (raw_name, raw_value) = segment.split_once('=').unwrap_or((segment, ""));
            // A name that does not decode is named as it was sent.
            let name = decode_component(raw_name, raw_name)?;
            let value = decode_component(raw_value, &name)?;
            if name.is_empty() {
                return Err(RequestError::new(
                    "",
                    format!("a parameter has an empty name (in `{}`)", quote(segment)),
                ));
            }
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(RequestError::new(
                    &name,
                    "is given more than once; give each parameter at most once",
                ));
            }
            pairs.push((name, value));
        }
        Ok(QueryPairs { pairs })
    }

    /// Builds pairs from already decoded names and values (for embedders and the CLI's flags).
    pub fn from_pairs<N, V>(pairs: impl IntoIterator<Item = (N, V)>) -> Result<QueryPairs, RequestError>
    where
        N: Into<String>,
        V: Into<String>,
    {
        let mut out = QueryPairs::default();
        for (name, value) in pairs {
            let name = name.into();
            if out.get(&name).is_some() {
                return Err(RequestError::new(
                    &name,
                    "is given more than once; give each parameter at most once",
                ));
            }
            out.pairs.push((name, value.into()));
        }
        Ok(out)
    }

    /// The value of parameter `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Encodes the pairs back into a query string that [`QueryPairs::parse`] reads as equal.
    pub fn to_query_string(&self) -> String {
        let mut out = String::new();
        for (i, (name, value)) in self.pairs.iter().enumerate() {
            if i > 0 {
                out.push('&');
            }
            encode_component(name, &mut out);
            out.push('=');
            encode_component(value, &mut out);
        }
        out
    }
}

fn decode_component(raw: &str, parameter: &str) -> Result<String, RequestError> {
    let bytes = raw.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'%' {
            let valid = bytes.get(i + 1..i + 3).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
            if !valid {
                return Err(RequestError::new(
                    parameter,
                    "contains a malformed percent-escape: `%` must be followed by two hex digits",
                ));
            }
        }
    }
    let plus_as_space = raw.replace('+', " ");
    percent_decode(plus_as_space.as_bytes())
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| RequestError::new(parameter, "is not valid UTF-8 after percent-decoding"))
}

fn encode_component(s: &str, out: &mut String) {
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' | b',' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.push('%');
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 15) as usize] as char);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_plus_and_percent_escapes() {
        let q = QueryPairs::parse("date_since=2026-10-01+00%3A00%3A00&city=S%C3%A3o%20Paulo&x").unwrap();
        assert_eq!(q.get("date_since"), Some("2026-10-01 00:00:00"));
        assert_eq!(q.get("city"), Some("São Paulo"));
        assert_eq!(q.get("x"), Some(""));
        assert_eq!(q.get("y"), None);
    }

    #[test]
    fn leading_question_mark_and_empty_segments_are_ignored() {
        let q = QueryPairs::parse("?a=1&&b=2&").unwrap();
        assert_eq!(q.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
    }

    #[test]
    fn refuses_duplicates_bad_escapes_and_bad_utf8() {
        let e = QueryPairs::parse("limit=1&limit=2").unwrap_err();
        assert_eq!(e.parameter(), "limit");
        assert!(e.to_string().contains("more than once"), "{e}");
        let e = QueryPairs::parse("os_name=%zz").unwrap_err();
        assert_eq!(e.parameter(), "os_name");
        let e = QueryPairs::parse("os_name=%FF").unwrap_err();
        assert!(e.to_string().contains("UTF-8"), "{e}");
        assert!(QueryPairs::parse("=5").is_err());
    }

    #[test]
    fn encoding_round_trips() {
        let q = QueryPairs::from_pairs([("error", "a&b=c +%\"\n"), ("city", "Zürich")]).unwrap();
        assert_eq!(QueryPairs::parse(&q.to_query_string()).unwrap(), q);
    }
}
