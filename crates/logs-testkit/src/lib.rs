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
//!   and haproxy in front of them, each replica stopped, killed and started again at will.
//!
//! Nothing here mocks a protocol: the tests speak real HTTP to a real S3 server, through a
//! real load balancer.

pub mod cluster;
pub mod haproxy;
mod http;
pub mod proxy;
pub mod python;
pub mod s3;

/// A free port of `127.0.0.1`: taken from the kernel and let go, for a server started at once.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
