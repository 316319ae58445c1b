//! The clients: each runs requests one after another until the run's request budget or its
//! deadline is spent, and checks every answer.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flate2::write::GzDecoder;
use http::header;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reqwest::{RequestBuilder, Response};
use serde_json::Value;

use crate::digest::DigestWriter;
use crate::workload::{DROP_AFTER, Export, Kind, Refused, SLOW_PHASE, SLOW_RATE, Size};

/// What every client shares.
#[derive(Debug)]
pub struct Plan {
    pub base: String,
    /// Valid tokens; client `i` uses token `i % len`.
    pub tokens: Vec<String>,
    pub exports: Vec<Export>,
    pub bad_parameters: Vec<Refused>,
    pub bad_tokens: Vec<Refused>,
    pub max_requests: u64,
    pub deadline: Instant,
    /// The longest one request may take, body included.
    pub request_timeout: Duration,
    pub issued: AtomicU64,
}

/// What one request came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub kind: Kind,
    /// 0: no answer (a transport error or a timeout).
    pub status: u16,
    /// The `error_type` of an error answer.
    pub error_type: Option<String>,
    pub first_byte: Duration,
    pub total: Duration,
    /// Body bytes as sent (compressed, for gzip) and after unpacking.
    pub wire_bytes: u64,
    pub body_bytes: u64,
    /// A 200 export body compared with the expected export.
    pub checked: bool,
    /// What was wrong, if anything.
    pub violation: Option<String>,
}

/// Runs client `index` until the plan's budget is spent.
pub async fn run_client(plan: Arc<Plan>, http: reqwest::Client, index: usize, seed: u64) -> Vec<Outcome> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9));
    let token = plan.tokens[index % plan.tokens.len()].clone();
    let mut outcomes = Vec::new();
    let mut n = 0u64;
    loop {
        if Instant::now() >= plan.deadline || plan.issued.fetch_add(1, Ordering::Relaxed) >= plan.max_requests
        {
            break;
        }
        n += 1;
        let kind = Kind::pick(&mut rng);
        let request_id = format!("lt-{index}-{n}");
        let outcome = match tokio::time::timeout(
            plan.request_timeout,
            one_request(&plan, &http, &token, kind, &request_id, &mut rng),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Outcome::failed(
                kind,
                Duration::ZERO,
                format!("{request_id}: no complete answer within {:?}", plan.request_timeout),
            ),
        };
        // A client told to come back later waits a little (less than `Retry-After`, to keep
        // the pressure on).
        if matches!(outcome.status, 429 | 503) {
            tokio::time::sleep(BACK_OFF).await;
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// How long a client waits after a 429 or 503 before its next request.
const BACK_OFF: Duration = Duration::from_millis(200);

impl Outcome {
    fn failed(kind: Kind, total: Duration, violation: String) -> Outcome {
        Outcome {
            kind,
            status: 0,
            error_type: None,
            first_byte: total,
            total,
            wire_bytes: 0,
            body_bytes: 0,
            checked: false,
            violation: Some(violation),
        }
    }
}

async fn one_request(
    plan: &Plan,
    http: &reqwest::Client,
    token: &str,
    kind: Kind,
    request_id: &str,
    rng: &mut ChaCha8Rng,
) -> Outcome {
    let started = Instant::now();
    let oauth = format!("OAuth {token}");
    let (path, authorization, export, refused) = match kind {
        Kind::Small | Kind::Large | Kind::Gzip | Kind::SlowReader | Kind::Dropper => {
            let size = if kind == Kind::Small { Size::Small } else { Size::Large };
            let candidates: Vec<&Export> = plan.exports.iter().filter(|e| e.size == size).collect();
            let export = candidates[rng.random_range(0..candidates.len())];
            (export.path(), Some(oauth.clone()), Some(export), None)
        }
        Kind::BadToken | Kind::BadParameters => {
            let list = if kind == Kind::BadToken { &plan.bad_tokens } else { &plan.bad_parameters };
            let refused = &list[rng.random_range(0..list.len())];
            let authorization = match refused.authorization {
                None => None,
                Some(None) => Some(oauth.clone()),
                Some(Some(value)) => Some(value.to_owned()),
            };
            (refused.path.clone(), authorization, None, Some(refused))
        }
        Kind::Applications => ("/management/v1/applications".to_owned(), Some(oauth.clone()), None, None),
    };
    let mut request: RequestBuilder =
        http.get(format!("{}{path}", plan.base)).header("x-request-id", request_id);
    if let Some(authorization) = authorization {
        request = request.header(header::AUTHORIZATION, authorization);
    }
    if kind == Kind::Gzip {
        request = request.header(header::ACCEPT_ENCODING, "gzip");
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => {
            return Outcome::failed(kind, started.elapsed(), format!("{request_id}: request failed: {e}"));
        }
    };
    let first_byte = started.elapsed();
    let mut outcome = Outcome {
        kind,
        status: response.status().as_u16(),
        error_type: None,
        first_byte,
        total: first_byte,
        wire_bytes: 0,
        body_bytes: 0,
        checked: false,
        violation: None,
    };
    let problem = check_answer(&mut outcome, response, request_id, export, refused, kind).await;
    outcome.total = started.elapsed();
    if let Err(problem) = problem {
        outcome.violation = Some(format!("{request_id} {path}: {problem}"));
    }
    outcome
}

/// Checks the answer; `Err` says what was wrong.
async fn check_answer(
    outcome: &mut Outcome,
    mut response: Response,
    request_id: &str,
    export: Option<&Export>,
    refused: Option<&Refused>,
    kind: Kind,
) -> Result<(), String> {
    let status = response.status().as_u16();
    let echoed = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
    if echoed != request_id {
        return Err(format!("the answer is for request `{echoed}`, not this one (a mixed-up response)"));
    }
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let retry_after = header("retry-after");
    let challenge = header("www-authenticate");
    let content_type = header("content-type").unwrap_or_default();
    let gzip = header("content-encoding").as_deref() == Some("gzip");

    if status != 200 {
        let body = read_all(&mut response, outcome).await?;
        let body = if gzip { gunzip(&body)? } else { body };
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| format!("status {status}: the error body is not JSON: {e}"))?;
        let error_type = value["errors"][0]["error_type"].as_str().unwrap_or("").to_owned();
        outcome.error_type = Some(error_type.clone());
        if value["code"] != status {
            return Err(format!("status {status}: the body's code is {}", value["code"]));
        }
        return match (status, error_type.as_str()) {
            (429, "too_many_requests") | (503, "server_busy") if export.is_some() => {
                if retry_after.is_none() {
                    Err(format!("{status} {error_type} without Retry-After"))
                } else {
                    Ok(())
                }
            }
            _ => match refused {
                Some(r) if r.status == status && r.error_types.contains(&error_type.as_str()) => {
                    let location = value["errors"][0]["location"].as_str();
                    if r.location.is_some() && location != r.location {
                        Err(format!("{status} {error_type} names `{location:?}`, not `{:?}`", r.location))
                    } else if status == 401 && challenge.is_none() {
                        Err("401 without WWW-Authenticate".into())
                    } else {
                        Ok(())
                    }
                }
                _ => Err(format!("unexpected {status} {error_type}: {}", value["message"])),
            },
        };
    }

    match (export, kind) {
        (None, Kind::Applications) => {
            let body = read_all(&mut response, outcome).await?;
            let body = if gzip { gunzip(&body)? } else { body };
            let value: Value =
                serde_json::from_slice(&body).map_err(|e| format!("applications: not JSON: {e}"))?;
            let ids: Vec<i64> = value["applications"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["id"].as_i64())
                .collect();
            if [1001, 1002, 1003].iter().all(|id| ids.contains(id)) {
                Ok(())
            } else {
                Err(format!("applications list without 1001, 1002, 1003: {ids:?}"))
            }
        }
        (None, _) => {
            let expected = refused.map_or(0, |r| r.status);
            Err(format!("status 200 where {expected} was expected"))
        }
        (Some(export), _) => {
            if !content_type.starts_with(export.format.content_type().split(';').next().unwrap_or("")) {
                return Err(format!("content type `{content_type}` for a {} export", export.format));
            }
            if header("x-skipped-shards").as_deref() != Some("0") {
                return Err(format!("X-Skipped-Shards is {:?}", header("x-skipped-shards")));
            }
            if kind == Kind::Gzip && !gzip {
                return Err("asked for gzip, got an unpacked body".into());
            }
            check_export_body(outcome, response, export, kind, gzip).await
        }
    }
}

/// Reads and digests an export body (slowly, or only its start, as `kind` says) and compares
/// it with the expected one.
async fn check_export_body(
    outcome: &mut Outcome,
    mut response: Response,
    export: &Export,
    kind: Kind,
    gzip: bool,
) -> Result<(), String> {
    let mut sink = if gzip {
        Sink::Gzip(Box::new(GzDecoder::new(DigestWriter::new(export.format))))
    } else {
        Sink::Plain(DigestWriter::new(export.format))
    };
    let started = Instant::now();
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            format!("the body broke off after {} bytes: {e} (an incomplete transfer)", outcome.wire_bytes)
        })?;
        let Some(chunk) = chunk else { break };
        outcome.wire_bytes += chunk.len() as u64;
        sink.write(&chunk)?;
        if kind == Kind::Dropper && outcome.wire_bytes >= DROP_AFTER {
            // Going away mid-export is the point; nothing to compare.
            return Ok(());
        }
        if kind == Kind::SlowReader && started.elapsed() < SLOW_PHASE {
            let due = Duration::from_secs_f64(outcome.wire_bytes as f64 / SLOW_RATE as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait.min(SLOW_PHASE)).await;
            }
        }
    }
    let digest = sink.finish()?;
    outcome.body_bytes = digest.bytes;
    outcome.checked = true;
    if digest == export.expected {
        Ok(())
    } else {
        Err(format!(
            "{}: the body differs from the expected export ({} bytes, {} records; expected {} bytes, {} records)",
            export.name, digest.bytes, digest.records, export.expected.bytes, export.expected.records
        ))
    }
}

enum Sink {
    Plain(DigestWriter),
    Gzip(Box<GzDecoder<DigestWriter>>),
}

impl Sink {
    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self {
            Sink::Plain(w) => {
                w.update(bytes);
                Ok(())
            }
            Sink::Gzip(w) => w.write_all(bytes).map_err(|e| format!("bad gzip: {e}")),
        }
    }

    fn finish(self) -> Result<crate::digest::BodyDigest, String> {
        match self {
            Sink::Plain(w) => Ok(w.finish()),
            Sink::Gzip(w) => Ok(w.finish().map_err(|e| format!("bad gzip: {e}"))?.finish()),
        }
    }
}

async fn read_all(response: &mut Response, outcome: &mut Outcome) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("the body broke off: {e}"))? {
        outcome.wire_bytes += chunk.len() as u64;
        body.extend_from_slice(&chunk);
    }
    outcome.body_bytes = body.len() as u64;
    Ok(body)
}

fn gunzip(body: &[u8]) -> Result<Vec<u8>, String> {
    let mut decoder = GzDecoder::new(Vec::new());
    decoder.write_all(body).map_err(|e| format!("bad gzip: {e}"))?;
    decoder.finish().map_err(|e| format!("bad gzip: {e}"))
}
