//! `linerate serve`: a static web server (HTTP/1.1, HTTP/2 and HTTPS) on the linerate
//! transmit engine.
//!
//! Thread per core: each worker is pinned to a CPU, has its own `SO_REUSEPORT` listener,
//! its own event loop (through `linerate_event::Driver`: io_uring, or epoll), its own
//! open-file cache and its connections, which never migrate. No locks on the request
//! path. What answers a request (the sites, their rules, the router) is built once per
//! configuration generation and shared read-only (`site::Resolver`); each worker's
//! `Site` holds its own caches and counters beside it.
//!
//! The protocols are linerate-http's, asked through one interface
//! (`linerate_http::Protocol`); `conn.rs` runs one request loop for all of them, and
//! its transport (plain, TLS, kernel TLS) and the driver execute every operation the
//! output queue hands out (`output.rs`; the transmit strategies are linerate-tx's).
//!
//! A response is a list of parts: bytes (heads, small files from the per-worker cache)
//! and file ranges. Consecutive byte parts, across pipelined responses, go out in one
//! `sendmsg` of at most `IOV_MAX` buffers (seed 001); a file range goes through the
//! engine (`sendfile` by default) after its head was sent with `MSG_MORE` (seed 003).

#![forbid(unsafe_code)]

mod access_log;
#[macro_use]
mod acme;
pub mod auth;
pub mod check;
pub mod compress;
#[macro_use]
mod compress_cache;
pub mod config;
mod conn;
pub mod control;
mod cors;
mod deadline;
mod digest;
mod disk;
mod files;
mod h2;
#[macro_use]
mod h3;
#[macro_use]
pub mod limits;
pub mod listen;
mod listing;
pub mod logs;
mod metrics;
mod output;
#[cfg(any(test, feature = "fuzzing"))]
mod output_model;
#[macro_use]
mod proxy;
mod quic;
#[cfg(any(test, feature = "fuzzing"))]
mod redirect_model;
mod response;
mod router;
pub mod rules;
mod serve;
pub mod settings;
mod site;
#[cfg(test)]
mod site_answers;
#[cfg(test)]
mod snapshot_test;
mod stats;
pub mod systemd;
mod tickets;
pub mod tls;
mod worker;

pub use config::Endpoint;
pub use config::{AccessLog, Config, LogFormat};
pub use control::Control;
pub use listen::Kind;
pub use logs::ErrorLog;
pub use serve::{serve, ServeError};
pub use settings::Settings;

/// What the fuzz targets drive (the `fuzzing` feature): model runs of the I/O-free
/// state machines.
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    pub use crate::output_model::run as output_queue;
    pub use crate::redirect_model::run as redirects;

    /// A PROXY header at the start of `bytes`: None while partial, Some(None) when
    /// refused, Some(Some(len)) when whole.
    pub fn proxy_header(bytes: &[u8]) -> Option<Option<usize>> {
        match crate::proxy::parse(bytes) {
            crate::proxy::Header::Partial => None,
            crate::proxy::Header::Invalid(_) => Some(None),
            crate::proxy::Header::Whole { len, .. } => Some(Some(len)),
        }
    }
}
