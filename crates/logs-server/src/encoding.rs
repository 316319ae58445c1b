//! Content coding: whether a request accepts gzip.

use http::header;

/// Whether the request's `Accept-Encoding` headers, all of them, accept gzip (none: no).
pub(crate) fn request_accepts_gzip(headers: &http::HeaderMap) -> bool {
    let values: Vec<&str> =
        headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).collect();
    !values.is_empty() && accepts_gzip(&values.join(","))
}

/// Whether an `Accept-Encoding` value accepts gzip: `gzip` (or `x-gzip`) with a weight above
/// zero, or else `*` with one.
fn accepts_gzip(value: &str) -> bool {
    let mut wildcard = None;
    for item in value.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let weight = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        match coding.as_str() {
            "gzip" | "x-gzip" => return weight > 0.0,
            "*" => wildcard = Some(weight > 0.0),
            _ => {}
        }
    }
    wildcard.unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_is_accepted_by_name_or_wildcard_with_a_weight() {
        for yes in [
            "gzip",
            "gzip, deflate, br",
            "GZIP;q=0.5",
            "x-gzip",
            "*",
            "identity;q=0, *;q=0.1",
            "br, gzip;q=1.0",
        ] {
            assert!(accepts_gzip(yes), "{yes}");
        }
        for no in
            ["", "identity", "identity;q=0", "*;q=0", "gzip;q=0", "gzip;q=0, *", "br", "deflate;q=1, *;q=0"]
        {
            assert!(!accepts_gzip(no), "{no}");
        }
    }
}
