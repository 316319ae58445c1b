//! What the clients ask: the exports (each with its expected digest, computed by encoding the
//! engine's stream directly), the refused requests, and how each kind of client behaves.

use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use logs_core::Engine;
use logs_format::{Encoder, EncoderOptions, Format};
use rand::Rng;

use crate::digest::{BodyDigest, DigestWriter};

/// One export a client may ask for.
#[derive(Debug, Clone)]
pub struct Export {
    pub name: &'static str,
    pub format: Format,
    pub query: String,
    pub size: Size,
    pub expected: BodyDigest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Small,
    Large,
}

impl Export {
    pub fn path(&self) -> String {
        format!("/logs/v1/export/errors.{}?{}", self.format.extension(), self.query)
    }
}

/// Every day the load test may ask about: the generated data starts on 2026-10-01.
const ALL_DAYS: &str = "date_since=2026-10-01&date_until=2027-12-31";
const FIRST_DAY: &str = "date_since=2026-10-01&date_until=2026-10-01%2023:59:59";

/// The exports, with their expected digests from `engine`.
pub async fn exports(engine: &Engine) -> anyhow::Result<Vec<Export>> {
    let wide = "error_id,error_datetime,error,error_json,city,device_model,os_version,mcc,service_device_id";
    let specs: [(&str, Format, String, Size); 9] = [
        (
            "small-csv",
            Format::Csv,
            format!("application_id=1002&{FIRST_DAY}&fields=error_datetime,error_name,os_name&os_name=ios"),
            Size::Small,
        ),
        (
            "small-json",
            Format::Json,
            format!("application_id=1003&{FIRST_DAY}&fields=error_id,mcc,mnc,service_device_id,city"),
            Size::Small,
        ),
        (
            "small-bom-csv",
            Format::Csv,
            format!(
                "application_id=1001&{FIRST_DAY}&fields=error_id,connection_type&connection_type=wifi&use_utf8_bom=true"
            ),
            Size::Small,
        ),
        (
            "receive-json",
            Format::Json,
            format!(
                "application_id=1003&{ALL_DAYS}&date_dimension=receive&fields=error_receive_datetime,error_name,device_type&device_type=tablet"
            ),
            Size::Small,
        ),
        (
            "part-csv",
            Format::Csv,
            format!(
                "application_id=1002&{ALL_DAYS}&fields=error_id,error_name,app_version_name&parts_count=4&part_number=1"
            ),
            Size::Small,
        ),
        ("large-csv", Format::Csv, format!("application_id=1001&{ALL_DAYS}&fields={wide}"), Size::Large),
        ("large-json", Format::Json, format!("application_id=1001&{ALL_DAYS}&fields={wide}"), Size::Large),
        (
            "medium-csv",
            Format::Csv,
            format!("application_id=1002&{ALL_DAYS}&fields=error_id,error,error_json"),
            Size::Large,
        ),
        (
            "medium-json",
            Format::Json,
            format!("application_id=1002&{ALL_DAYS}&fields=error_id,error,device_ipv6,google_aid"),
            Size::Large,
        ),
    ];
    let mut out = Vec::new();
    for (name, format, query, size) in specs {
        let expected =
            expected_digest(engine, format, &query).await.with_context(|| format!("export {name}"))?;
        out.push(Export { name, format, query, size, expected });
    }
    Ok(out)
}

/// The export encoded straight from the engine's stream, digested.
async fn expected_digest(engine: &Engine, format: Format, query: &str) -> anyhow::Result<BodyDigest> {
    let request = engine.parse_request(query)?;
    let mut stream = engine.export(&request).await?;
    let options = EncoderOptions::default().with_bom(request.use_utf8_bom());
    let mut encoder = Encoder::new(format, DigestWriter::new(format), &stream.schema(), options)?;
    while let Some(batch) = stream.next().await {
        encoder.write_batch(&batch?)?;
    }
    Ok(encoder.finish()?.finish())
}

/// A request the server must refuse, and how.
#[derive(Debug, Clone)]
pub struct Refused {
    pub path: String,
    /// `None`: send no `Authorization` header; `Some(None)`: the client's good token.
    pub authorization: Option<Option<&'static str>>,
    pub status: u16,
    pub error_types: &'static [&'static str],
    /// The `location` the error must name, when it must name one.
    pub location: Option<&'static str>,
}

/// Requests with bad parameters: 400 naming the parameter.
pub fn bad_parameters() -> Vec<Refused> {
    let base = "/logs/v1/export/errors.csv?application_id=1001";
    let bad = |query: String, location: &'static str| Refused {
        path: format!("{base}&{query}"),
        authorization: Some(None),
        status: 400,
        error_types: &["invalid_parameter"],
        location: Some(location),
    };
    vec![
        bad("date_since=2026-02-30&date_until=2026-10-01&fields=error_id".into(), "date_since"),
        bad(format!("{FIRST_DAY}&fields=error_id&os_nmae=ios"), "os_nmae"),
        bad(format!("{FIRST_DAY}&fields=error_id,nope"), "fields"),
        bad(format!("{FIRST_DAY}&fields=error_id&limit=0"), "limit"),
        bad(format!("{FIRST_DAY}&fields=error_id&mcc=abc"), "mcc"),
        bad(format!("{FIRST_DAY}&fields=error_id&parts_count=2&part_number=2"), "part_number"),
        bad(format!("{FIRST_DAY}&fields=error_id&city=a&city=b"), "city"),
        bad("date_since=2026-10-02&date_until=2026-10-01&fields=error_id".into(), "date_since"),
    ]
}

/// Requests with bad or missing tokens: 401 with a challenge.
pub fn bad_tokens() -> Vec<Refused> {
    let path = format!("/logs/v1/export/errors.json?application_id=1001&{FIRST_DAY}&fields=error_id");
    let refused = |authorization, error_types| Refused {
        path: path.clone(),
        authorization,
        status: 401,
        error_types,
        location: None,
    };
    vec![
        refused(None, &["unauthorized"]),
        refused(Some(Some("OAuth not-a-known-token-5d41402abc4b2a76")), &["invalid_token"]),
        refused(Some(Some("Basic dXNlcjpwYXNz")), &["invalid_token"]),
        refused(Some(Some("OAuth bad\"token")), &["invalid_token"]),
        Refused {
            path: format!("{path}&access_token=leaked"),
            authorization: Some(None),
            status: 401,
            error_types: &["invalid_request"],
            location: Some("access_token"),
        },
    ]
}

/// What one client request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A small export, read at once.
    Small,
    /// A large export, read at once.
    Large,
    /// A large export with `Accept-Encoding: gzip`, unpacked and checked.
    Gzip,
    /// A large export read slowly for a while, then at once: the server must hold back.
    SlowReader,
    /// A large export dropped after its first bytes.
    Dropper,
    /// A bad or missing token.
    BadToken,
    /// Bad parameters.
    BadParameters,
    /// The applications list.
    Applications,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Small,
        Kind::Large,
        Kind::Gzip,
        Kind::SlowReader,
        Kind::Dropper,
        Kind::BadToken,
        Kind::BadParameters,
        Kind::Applications,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Small => "small export",
            Kind::Large => "large export",
            Kind::Gzip => "gzip export",
            Kind::SlowReader => "slow reader",
            Kind::Dropper => "dropped mid-export",
            Kind::BadToken => "bad token",
            Kind::BadParameters => "bad parameters",
            Kind::Applications => "applications list",
        }
    }

    /// The share of requests of this kind, in percent.
    fn weight(self) -> u32 {
        match self {
            Kind::Small => 34,
            Kind::Large => 10,
            Kind::Gzip => 10,
            Kind::SlowReader => 4,
            Kind::Dropper => 10,
            Kind::BadToken => 12,
            Kind::BadParameters => 14,
            Kind::Applications => 6,
        }
    }

    pub fn pick(rng: &mut impl Rng) -> Kind {
        let total: u32 = Kind::ALL.iter().map(|k| k.weight()).sum();
        let mut roll = rng.random_range(0..total);
        for kind in Kind::ALL {
            if roll < kind.weight() {
                return kind;
            }
            roll -= kind.weight();
        }
        Kind::Small
    }
}

/// How a slow reader reads: this many bytes per second, for at most this long, then at once.
/// Meanwhile the server could encode tens of MB ahead; backpressure must stop it after the
/// chunk queue.
pub const SLOW_RATE: u64 = 256 * 1024;
pub const SLOW_PHASE: Duration = Duration::from_secs(4);
/// A dropper goes away after this many bytes of the body.
pub const DROP_AFTER: u64 = 256 * 1024;
