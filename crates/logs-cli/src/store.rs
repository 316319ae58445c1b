//! Where datasets live, as the commands take it: `--data`/`--out` is a local path, a
//! `file://` URL or an `s3://bucket/prefix` URL; the flags here set what an S3 location needs
//! beyond the standard `AWS_*` variables (credentials come only from those variables).

use clap::{Args, ValueEnum};
use logs_core::{Addressing, S3Options};

/// S3 settings shared by `export`, `serve` and `generate`.
#[derive(Debug, Args)]
pub(crate) struct S3Args {
    /// The S3-compatible server of an s3:// location, such as http://127.0.0.1:9000 (default:
    /// AWS_ENDPOINT_URL, else AWS's endpoint for the region).
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// The bucket's region (default: AWS_REGION, else us-east-1).
    #[arg(long, value_name = "REGION")]
    s3_region: Option<String>,
    /// How requests name the bucket: `path` (http://server/bucket/key, the default, what most
    /// S3-compatible servers expect) or `virtual` (http://bucket.server/key).
    #[arg(long, value_enum, value_name = "STYLE")]
    s3_addressing: Option<AddressingArg>,
    /// Allow a plain http:// endpoint (also AWS_ALLOW_HTTP=true).
    #[arg(long)]
    s3_allow_http: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AddressingArg {
    Path,
    Virtual,
}

impl S3Args {
    pub(crate) fn options(&self) -> S3Options {
        S3Options {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            addressing: self.s3_addressing.map(|a| match a {
                AddressingArg::Path => Addressing::Path,
                AddressingArg::Virtual => Addressing::VirtualHosted,
            }),
            allow_http: self.s3_allow_http.then_some(true),
            credentials: None,
        }
    }
}
