//! The figures of a run and the checks that decide its exit status.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use logs_server::ExportCounts;

use crate::client::Outcome;
use crate::workload::Kind;

/// What the server's memory and counters must stay within.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Resident memory before the load.
    pub rss_before: u64,
    /// The engine's memory pool (`--memory-limit`).
    pub pool: u64,
    /// What may come on top of the pool: the runtime, connections, decode buffers.
    pub overhead: u64,
    /// Peak encoded bytes waiting for connections: `max_exports × (chunk_queue + 2) × 1 MiB`.
    pub buffered: u64,
    pub max_exports: usize,
    pub chunk_queue: usize,
}

/// Everything measured.
#[derive(Debug)]
pub struct Run {
    pub outcomes: Vec<Outcome>,
    pub elapsed: Duration,
    /// (VmRSS, VmHWM) after the load; `None` when the server's process is unknown.
    pub memory: Option<(u64, u64)>,
    pub peak_reset: bool,
    /// The server's counters after the load settled.
    pub counts: Option<ExportCounts>,
}

/// Prints the figures and returns the violations (empty: the run passed).
pub fn report(run: &Run, bounds: &Bounds) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut violations: Vec<String> = Vec::new();
    let n = run.outcomes.len();
    let seconds = run.elapsed.as_secs_f64().max(1e-9);
    let _ = writeln!(out, "requests        {n} in {seconds:.1} s = {:.1} requests/s", n as f64 / seconds);

    let mut first: Vec<Duration> =
        run.outcomes.iter().filter(|o| o.status != 0).map(|o| o.first_byte).collect();
    let mut whole: Vec<Duration> = run
        .outcomes
        .iter()
        .filter(|o| o.status != 0 && o.kind != Kind::SlowReader && o.kind != Kind::Dropper)
        .map(|o| o.total)
        .collect();
    let _ = writeln!(
        out,
        "latency         headers p50 {} p99 {}; whole answer p50 {} p99 {} (slow readers and droppers aside)",
        ms(percentile(&mut first, 50)),
        ms(percentile(&mut first, 99)),
        ms(percentile(&mut whole, 50)),
        ms(percentile(&mut whole, 99)),
    );

    let mut by_status: BTreeMap<(u16, String), usize> = BTreeMap::new();
    for o in &run.outcomes {
        *by_status.entry((o.status, o.error_type.clone().unwrap_or_default())).or_default() += 1;
    }
    let class =
        |c: u16| -> usize { by_status.iter().filter(|((s, _), _)| s / 100 == c).map(|(_, n)| n).sum() };
    let detail = |c: u16| -> String {
        let parts: Vec<String> = by_status
            .iter()
            .filter(|((s, _), _)| s / 100 == c)
            .map(|((s, t), n)| if t.is_empty() { format!("{s}: {n}") } else { format!("{s} {t}: {n}") })
            .collect();
        if parts.is_empty() { String::new() } else { format!(" ({})", parts.join(", ")) }
    };
    let no_answer = by_status.iter().filter(|((s, _), _)| *s == 0).map(|(_, n)| n).sum::<usize>();
    let _ = writeln!(
        out,
        "statuses        2xx {}, 4xx {}{}, 5xx {}{}, no answer {no_answer}",
        class(2),
        class(4),
        detail(4),
        class(5),
        detail(5)
    );
    let mut kinds = String::new();
    for kind in Kind::ALL {
        let of_kind: Vec<&Outcome> = run.outcomes.iter().filter(|o| o.kind == kind).collect();
        let ok = of_kind.iter().filter(|o| o.status == 200).count();
        let sep = if kinds.is_empty() { "" } else { ", " };
        let _ = write!(kinds, "{sep}{} {ok} of {}", kind.name(), of_kind.len());
    }
    let _ = writeln!(out, "200s by kind    {kinds}");

    let wire: u64 = run.outcomes.iter().map(|o| o.wire_bytes).sum();
    let body: u64 = run.outcomes.iter().map(|o| o.body_bytes).sum();
    let checked = run.outcomes.iter().filter(|o| o.checked).count();
    let _ = writeln!(
        out,
        "bytes           {} received ({} after gunzip); {checked} export bodies complete and compared with the expected export",
        mib(wire),
        mib(body)
    );

    match run.memory {
        Some((rss, hwm)) => {
            let limit = bounds.rss_before + bounds.pool + bounds.overhead;
            let since = if run.peak_reset { "during the load" } else { "since the process started" };
            let _ = writeln!(
                out,
                "server memory   peak RSS {} {since} (before the load {}, now {}); bound {} = before + pool {} + overhead {}",
                mib(hwm),
                mib(bounds.rss_before),
                mib(rss),
                mib(limit),
                mib(bounds.pool),
                mib(bounds.overhead)
            );
            if hwm > limit {
                violations.push(format!("server peak RSS {} above its bound {}", mib(hwm), mib(limit)));
            }
        }
        None => {
            let _ = writeln!(out, "server memory   unknown (give --pid for a server in another process)");
        }
    }
    match run.counts {
        Some(c) => {
            let _ = writeln!(
                out,
                "server metrics  exports running after the run {}, buffered now {}; completed {}, cancelled {}, failed {}; \
                 peak buffered {} (bound {} = {} exports × ({} + 2) chunks × 1 MiB)",
                c.running,
                c.buffered,
                c.completed,
                c.cancelled,
                c.failed,
                mib(c.buffered_peak),
                mib(bounds.buffered),
                bounds.max_exports,
                bounds.chunk_queue
            );
            if c.running != 0 {
                violations.push(format!("{} exports still running after the run", c.running));
            }
            if c.buffered_peak > bounds.buffered {
                violations.push(format!(
                    "peak buffered bytes {} above {}: slow readers grew the server's memory",
                    mib(c.buffered_peak),
                    mib(bounds.buffered)
                ));
            }
            if c.failed != 0 {
                violations.push(format!("{} exports failed on the server", c.failed));
            }
        }
        None => {
            let _ =
                writeln!(out, "server metrics  unknown (give --admin-url for a server in another process)");
        }
    }

    for o in &run.outcomes {
        let allowed_5xx = o.status == 503 && o.error_type.as_deref() == Some("server_busy");
        if o.status >= 500 && !allowed_5xx {
            violations.push(format!(
                "a {} {} answer ({})",
                o.status,
                o.error_type.as_deref().unwrap_or(""),
                o.kind.name()
            ));
        }
    }
    violations.extend(run.outcomes.iter().filter_map(|o| o.violation.clone()));
    if n == 0 {
        violations.push("no request was made".into());
    }
    (out, violations)
}

fn percentile(values: &mut [Duration], p: usize) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    values.sort();
    let index = (values.len() * p).div_ceil(100).saturating_sub(1).min(values.len() - 1);
    values[index]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&mut v, 50), Duration::from_millis(50));
        assert_eq!(percentile(&mut v, 99), Duration::from_millis(99));
        assert_eq!(percentile(&mut [], 50), Duration::ZERO);
    }
}
