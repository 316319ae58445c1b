//! The headers every export answer has, streamed or prepared.

use http::HeaderValue;
use logs_format::Format;

/// The header that tells how many unreadable files `skip_unavailable_shards=true` left out.
pub(crate) const SKIPPED_SHARDS: &str = "x-skipped-shards";

/// The header that carries the cursor continuing a chain after this export (`cursor=`).
pub(crate) const LOGS_CURSOR: &str = "logs-cursor";

/// The header that lists the columns the caller's field policy changed (`name=treatment, …`).
pub(crate) const FIELD_POLICY: &str = "logs-field-policy";

/// `Content-Disposition` of an export in `format`.
pub(crate) fn content_disposition(format: Format) -> HeaderValue {
    HeaderValue::from_static(match format {
        Format::Csv => "attachment; filename=\"errors.csv\"",
        Format::Json => "attachment; filename=\"errors.json\"",
        Format::Ndjson => "attachment; filename=\"errors.ndjson\"",
        Format::Parquet => "attachment; filename=\"errors.parquet\"",
        Format::Arrow => "attachment; filename=\"errors.arrow\"",
    })
}
