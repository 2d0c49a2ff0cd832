//! linerate's measurement kit: the discard sink (netserver's role), the stream benchmark
//! (netperf TCP_STREAM / TCP_SENDFILE's role), CPU accounting, and the two-namespace
//! topology the transmit measurements need, seed 000's table over a grid of stream runs,
//! and the HTTP load generator (wrk's role).
//!
//! Benchmarks return plain data (serde-serializable results) and leave statistics to
//! `linerate stat`; [`cli`] is their command lines (`linerate bench …`, `linerate
//! sink`) and prints them, human or `--json`, for the binary to dispatch to.

#![forbid(unsafe_code)]

pub mod cli;
pub mod cold;
pub mod compare;
pub mod conns;
pub mod cpu;
pub mod http;
pub mod idle;
pub mod kernel;
pub mod machine;
pub mod netns;
pub mod procs;
pub mod series;
pub mod sink;
pub mod soak;
pub mod stream;
pub mod table;

/// Set by SIGINT/SIGTERM handlers; long loops stop when it is set.
pub type StopFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// True once a stop was asked for.
pub fn stopped(flag: &StopFlag) -> bool {
    flag.load(std::sync::atomic::Ordering::Relaxed)
}
