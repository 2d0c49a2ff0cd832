//! Server settings: limits, timeouts and policies of HTTP-BEHAVIOUR.md, with its
//! defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use linerate_http::request::Limits;
use linerate_tx::Strategy;

/// Where the access log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLog {
    /// No log.
    Off,
    /// Common Log Format on standard output.
    Stdout,
    /// Common Log Format appended to a file.
    File(PathBuf),
}

/// Everything `serve` needs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Document root.
    pub root: PathBuf,
    /// Addresses to listen on (port 0: a free port, the same for all workers).
    pub listen: Vec<SocketAddr>,
    /// Worker threads (one per CPU by default).
    pub workers: usize,
    /// Pin worker i to the i-th CPU (mod their number) of those the process may use.
    pub pin: bool,
    /// Strategy for file bodies.
    pub transmit: Strategy,
    /// Files up to this size are cached in memory per worker and sent with their head
    /// in one `sendmsg`.
    pub small_file_bytes: u64,
    /// Request head limits.
    pub limits: Limits,
    /// A keep-alive connection idle this long is closed.
    pub idle_timeout: Duration,
    /// A request head must be complete this long after its first byte.
    pub header_timeout: Duration,
    /// A response that makes no send progress this long is abandoned.
    pub send_timeout: Duration,
    /// In-flight responses get this long after SIGTERM.
    pub shutdown_timeout: Duration,
    /// Serve dot-files and dot-directories.
    pub dotfiles: bool,
    /// List directories without an index.html.
    pub autoindex: bool,
    /// Access log.
    pub access_log: AccessLog,
    /// Open files kept per worker.
    pub open_file_cache_entries: usize,
}

impl Config {
    /// Defaults for serving `root`.
    pub fn new(root: PathBuf) -> Config {
        Config {
            root,
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 8080))],
            workers: linerate_sys::cpu::allowed_cpus().map_or(1, |c| c.len().max(1)),
            pin: true,
            transmit: Strategy::SendfileBatched,
            small_file_bytes: 16 * 1024,
            limits: Limits::default(),
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(10),
            dotfiles: false,
            autoindex: false,
            access_log: AccessLog::Stdout,
            open_file_cache_entries: 10_000,
        }
    }
}
