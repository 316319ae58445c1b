//! Test support of logs-export, used only by the workspace's tests and benchmarks, and by
//! `logs-cluster`, the one command that brings up replicas behind a balancer:
//!
//! - [`python`]: a Python interpreter with pinned packages, in a virtual environment made on
//!   first use from the Python package registry;
//! - [`s3`]: a real S3-protocol server (moto's server mode) on `127.0.0.1`, started by the
//!   test that needs it;
//! - [`proxy`]: a TCP proxy between a client and a server that passes, delays, answers an
//!   HTTP error or drops, to put faults and latency between the engine and its store;
//! - [`haproxy`]: Debian's haproxy with the repository's `deploy/haproxy.cfg`;
//! - [`cluster`]: moto holding a dataset and a spool, N `logs serve` replicas over that bucket
//!   and haproxy in front of them, each replica stopped, killed and started again at will;
//! - [`oidc`]: a real OpenID provider (npm's `oidc-provider`) on `127.0.0.1`, its package
//!   installed on first use from the npm registry;
//! - [`machine`]: what a test needs of the machine (running as `nobody`, `/dev/full`, a small
//!   disk), and [`machine::missing`], which fails a test that cannot have it unless
//!   `LOGS_TEST_ALLOW_SKIP=1`;
//! - [`process`]: child processes run to their end within a bound;
//! - [`writer`]: a writer adding staged Parquet files to a dataset (a folder or a bucket) while
//!   exports run (`dataset-writer`).
//!
//! Nothing here mocks a protocol: the tests speak real HTTP to a real S3 server, through a
//! real load balancer, and get tokens from a real OpenID provider.

pub mod cluster;
pub mod haproxy;
mod http;
pub mod machine;
pub mod oidc;
pub mod process;
pub mod proxy;
pub mod python;
pub mod s3;
pub mod writer;

/// Overwrites the first half of a Parquet file's column chunks, leaving its footer and the
/// page index before it whole: its footer checks pass, and reading its pages fails, so that an
/// export fails after the rows of the files before it are out.
pub fn damage_pages(file: &std::path::Path) {
    let mut bytes = std::fs::read(file).expect("read the file to damage");
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().expect("4 bytes"));
    let data_end = bytes.len() - 8 - footer as usize;
    bytes[4..data_end / 2].fill(0xA5);
    std::fs::write(file, bytes).expect("write the damaged file");
}

/// A free port of `127.0.0.1`, for a server started at once (and, for a replica, restarted on
/// it). It comes from below the kernel's ephemeral range: a port the kernel handed out and got
/// back could be handed out again, before the server binds it, as any outgoing connection's
/// local port, and a replica would then fail to start ("Address already in use"). Ports are
/// taken in turn from a point that depends on the process, each checked free by binding it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOWEST: u32 = 10_000;
    let ephemeral_low = ephemeral_range_start().unwrap_or(32_768);
    if ephemeral_low < LOWEST + 1_000 {
        return std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    }
    let span = ephemeral_low - LOWEST;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let port = (LOWEST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port of 127.0.0.1 from {LOWEST} to {ephemeral_low}");
}

/// The names of the files in `dir` (a spool's listing), sorted.
pub fn file_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`).
fn ephemeral_range_start() -> Option<u32> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn free_ports_are_distinct_free_and_outside_the_ephemeral_range() {
        let ephemeral_low = super::ephemeral_range_start().unwrap_or(32_768);
        let ports: Vec<u16> = (0..50).map(|_| super::free_port()).collect();
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for port in ports {
            assert!(u32::from(port) < ephemeral_low, "{port} is in the ephemeral range");
            std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
