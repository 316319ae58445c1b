//! The values of flags: durations and sizes, for `serve` and `export` alike.

use std::time::Duration;

/// A duration as `humantime` reads it (`500ms`, `30s`, `5m`, `1h`, `1h 30m`), or a whole
/// number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map(Duration::from_secs).map_err(|_| format!("`{s}` is too large"));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration such as 500ms, 30s, 5m or 1h: {e}"))
}

/// A size as `bytesize` reads it (`16KiB`, `512MiB`, `2GiB`; `KB` and `MB` are powers of
/// 1000), or a number of bytes.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let size: bytesize::ByteSize =
        s.trim().parse().map_err(|e| format!("`{s}` is not a size such as 16KiB, 512MiB or 2GiB: {e}"))?;
    usize::try_from(size.as_u64()).map_err(|_| format!("`{s}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("fast").unwrap_err().contains("`fast` is not a duration"));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("99999999999999999999").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("16KiB"), Ok(16 * 1024));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("8 KiB"), Ok(8 * 1024));
        assert_eq!(parse_size("1KB"), Ok(1000));
        assert!(parse_size("lots").unwrap_err().contains("`lots` is not a size"));
        assert!(parse_size("-1").is_err());
    }
}
