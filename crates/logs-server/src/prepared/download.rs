//! Serving a complete prepared export: `200` with its length and strong `ETag`, `206` for a
//! `Range`, `304` for an `If-None-Match` that names it, `416` for a range past its end.
//!
//! A client that accepts gzip gets the copy compressed when the export was prepared
//! (`Content-Encoding: gzip`, its own `ETag`, ranges counted in its bytes); any other gets the
//! plain copy. Only single ranges are served; a `Range` with several, or one that cannot be
//! parsed, is ignored (RFC 9110 §14.2 allows both) and the whole export is sent. `If-Range`
//! with another validator than the current `ETag` also sends the whole export.

use std::ops::Range;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, StatusCode, header};
use logs_format::Format;

use super::spool::{Manifest, ReadError, Spool};
use crate::encoding::request_accepts_gzip;
use crate::error::ApiError;
use crate::export::headers::{LOGS_CURSOR, SKIPPED_SHARDS, content_disposition};
use crate::log::RowsWhenComplete;

/// The answer to `headers` from the complete export `manifest`; `None` if one of its copies
/// is gone from the spool.
pub(super) async fn respond(
    spool: &Spool,
    manifest: &Manifest,
    format: Format,
    headers: &HeaderMap,
) -> Result<Option<Response>, ApiError> {
    // The router's middleware has already dropped an `Accept-Encoding` that refuses gzip.
    let (gzip, copy) = match &manifest.gzip {
        Some(compressed) if request_accepts_gzip(headers) => (true, compressed),
        _ => (false, &manifest.plain),
    };
    let etag = format!("\"{}\"", copy.sha256);
    let common = |builder: http::response::Builder| {
        let builder = builder
            .header(header::ETAG, &etag)
            .header(header::VARY, "accept-encoding")
            .header(header::ACCEPT_RANGES, "bytes");
        if gzip { builder.header(header::CONTENT_ENCODING, "gzip") } else { builder }
    };
    let built = |result: Result<Response, http::Error>| {
        result.map(Some).map_err(|e| ApiError::Internal(format!("cannot build the response: {e}")))
    };

    if none_match(headers, &etag) {
        return built(common(Response::builder().status(StatusCode::NOT_MODIFIED)).body(Body::empty()));
    }
    let range = match requested_range(headers, &etag) {
        None => None,
        Some(spec) => match spec.within(copy.bytes) {
            Some(range) => Some(range),
            None => return Err(ApiError::RangeNotSatisfiable { length: copy.bytes }),
        },
    };
    let (status, bytes) = match &range {
        Some(range) => (StatusCode::PARTIAL_CONTENT, range.clone()),
        None => (StatusCode::OK, 0..copy.bytes),
    };
    let length = bytes.end - bytes.start;
    let body = if length == 0 {
        Body::empty()
    } else {
        match spool.read(manifest, gzip, bytes.clone()).await {
            Ok(stream) => Body::from_stream(stream),
            Err(ReadError::Gone) => return Ok(None),
            Err(ReadError::Failed(e)) => return Err(e.into()),
        }
    };
    let mut builder = common(Response::builder().status(status))
        .header(header::CONTENT_TYPE, format.content_type())
        .header(header::CONTENT_DISPOSITION, content_disposition(format))
        .header(header::CONTENT_LENGTH, length)
        .header(SKIPPED_SHARDS, manifest.skipped_shards);
    if let Some(cursor) = &manifest.cursor {
        builder = builder.header(LOGS_CURSOR, cursor.as_str());
    }
    if range.is_some() {
        builder = builder
            .header(header::CONTENT_RANGE, format!("bytes {}-{}/{}", bytes.start, bytes.end - 1, copy.bytes));
    } else {
        builder = builder.extension(RowsWhenComplete(manifest.rows));
    }
    built(builder.body(body))
}

/// `If-None-Match` names `etag` (weak comparison, RFC 9110 §13.1.2) or is `*`.
fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers.get_all(header::IF_NONE_MATCH).iter().filter_map(|v| v.to_str().ok()).any(|value| {
        value.split(',').map(str::trim).any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
    })
}

/// One range of a `Range: bytes=…` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeSpec {
    /// `first-` or `first-last`.
    From { first: u64, last: Option<u64> },
    /// `-n`: the last `n` bytes.
    Suffix(u64),
}

impl RangeSpec {
    /// The bytes it selects of a `length`-byte representation; `None`: none (416).
    fn within(self, length: u64) -> Option<Range<u64>> {
        match self {
            RangeSpec::From { first, last } if first < length => {
                let end = last.map_or(length, |last| last.saturating_add(1).min(length));
                Some(first..end)
            }
            RangeSpec::From { .. } => None,
            RangeSpec::Suffix(0) => None,
            RangeSpec::Suffix(n) if length > 0 => Some(length.saturating_sub(n)..length),
            RangeSpec::Suffix(_) => None,
        }
    }
}

/// The one range the request asks for, if it asks for exactly one that parses and its
/// `If-Range` (if any) is the current `etag`.
fn requested_range(headers: &HeaderMap, etag: &str) -> Option<RangeSpec> {
    if let Some(if_range) = headers.get(header::IF_RANGE) {
        // Only a strong match: a date or a weak tag never validates a range.
        if if_range.to_str().ok().map(str::trim) != Some(etag) {
            return None;
        }
    }
    let mut values = headers.get_all(header::RANGE).iter();
    let (Some(value), None) = (values.next(), values.next()) else { return None };
    parse_range(value.to_str().ok()?)
}

fn parse_range(value: &str) -> Option<RangeSpec> {
    let (unit, set) = value.trim().split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return None;
    }
    let (first, last) = set.trim().split_once('-')?;
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) { None } else { s.parse().ok() }
    };
    match (first.trim().is_empty(), last.trim().is_empty()) {
        (true, false) => Some(RangeSpec::Suffix(number(last)?)),
        (false, true) => Some(RangeSpec::From { first: number(first)?, last: None }),
        (false, false) => {
            let (first, last) = (number(first)?, number(last)?);
            (first <= last).then_some(RangeSpec::From { first, last: Some(last) })
        }
        (true, true) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn ranges_parse_as_rfc_9110_writes_them() {
        assert_eq!(parse_range("bytes=0-99"), Some(RangeSpec::From { first: 0, last: Some(99) }));
        assert_eq!(parse_range("bytes=100-"), Some(RangeSpec::From { first: 100, last: None }));
        assert_eq!(parse_range("bytes=-5"), Some(RangeSpec::Suffix(5)));
        assert_eq!(parse_range("BYTES = 1-2"), Some(RangeSpec::From { first: 1, last: Some(2) }));
        for ignored in
            ["bytes=5-1", "bytes=0-1,5-6", "items=0-1", "bytes=-", "bytes=a-b", "bytes=+1-2", "0-1", ""]
        {
            assert_eq!(parse_range(ignored), None, "{ignored}");
        }
    }

    #[test]
    fn ranges_select_within_the_length() {
        let from = |first, last| RangeSpec::From { first, last };
        assert_eq!(from(0, Some(99)).within(1000), Some(0..100));
        assert_eq!(from(990, Some(2000)).within(1000), Some(990..1000));
        assert_eq!(from(10, None).within(1000), Some(10..1000));
        assert_eq!(from(1000, None).within(1000), None);
        assert_eq!(from(0, None).within(0), None);
        assert_eq!(RangeSpec::Suffix(10).within(1000), Some(990..1000));
        assert_eq!(RangeSpec::Suffix(5000).within(1000), Some(0..1000));
        assert_eq!(RangeSpec::Suffix(0).within(1000), None);
        assert_eq!(RangeSpec::Suffix(1).within(0), None);
    }

    #[test]
    fn if_range_and_if_none_match_compare_tags() {
        let etag = "\"abc\"";
        let mut headers = HeaderMap::new();
        headers.insert(header::RANGE, HeaderValue::from_static("bytes=1-"));
        assert!(requested_range(&headers, etag).is_some());
        headers.insert(header::IF_RANGE, HeaderValue::from_static("\"old\""));
        assert!(requested_range(&headers, etag).is_none(), "another version: the whole export");
        headers.insert(header::IF_RANGE, HeaderValue::from_static("W/\"abc\""));
        assert!(requested_range(&headers, etag).is_none(), "a weak tag never validates a range");
        headers.insert(header::IF_RANGE, HeaderValue::from_static("\"abc\""));
        assert!(requested_range(&headers, etag).is_some());

        let mut headers = HeaderMap::new();
        assert!(!none_match(&headers, etag));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"x\", W/\"abc\""));
        assert!(none_match(&headers, etag));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(none_match(&headers, etag));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"abcd\""));
        assert!(!none_match(&headers, etag));
    }
}
