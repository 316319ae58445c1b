//! Test support of logs-export, used only by the workspace's tests and benchmarks:
//!
//! - [`python`]: a Python interpreter with pinned packages, in a virtual environment made on
//!   first use from the Python package registry;
//! - [`s3`]: a real S3-protocol server (moto's server mode) on `127.0.0.1`, started by the
//!   test that needs it;
//! - [`proxy`]: a TCP proxy between a client and a server that passes, delays, answers an
//!   HTTP error or drops, to put faults and latency between the engine and its store.
//!
//! Nothing here mocks a protocol: the tests speak real HTTP to a real S3 server.

pub mod proxy;
pub mod python;
pub mod s3;
