//! Server settings: limits, timeouts and policies of docs/http.md, with its
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

/// The access log's line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Common Log Format.
    Clf,
    /// One JSON object per line.
    Json,
}

/// Default [`Config::send_slice_bytes`]: 0, no slices. A connection sends until its
/// socket is full (seed 000's batch) and the low-water mark wakes it half empty. 64 KiB
/// slices won on an earlier machine but lost here (BENCHMARKS.md, "Slices off"): with
/// wrk pinned beside one worker, 10 MiB bodies sliced at 64 KiB cost 64% more CPU per
/// request than nginx and 14% fewer requests/s, and 1 MiB bodies about twice the CPU of
/// unsliced ones. `--send-slice` stays for turn-taking between large and small responses.
pub const DEFAULT_SEND_SLICE: u64 = 0;

/// Default [`Config::notsent_lowat`]: 16 KiB. The engine's own default, the send
/// buffer's size, comes out at 4 MiB on loopback, where autotuning has already grown the
/// buffer when a connection's first file part goes out. Then up to 2 MiB wait unsent,
/// and the client's CPU sends them: its ACKs open the window, and the kernel transmits
/// the queued bytes in the softirq that handles each ACK. With 16 KiB almost nothing
/// waits, so the worker sends every segment itself. With wrk on the other CPU at 10 MiB,
/// that gave +69% requests/s against nginx (10 of 10 rounds), with CPU per request
/// level (BENCHMARKS.md, "The low-water mark").
pub const DEFAULT_NOTSENT_LOWAT: usize = 16 * 1024;

/// Default [`Config::send_slice_min_bytes`].
pub const DEFAULT_SEND_SLICE_MIN: u64 = 1 << 20;

/// Default [`Config::disk_helpers`]: enough to keep a few disk reads in flight.
pub const DEFAULT_DISK_HELPERS: usize = 4;

/// Default [`Config::read_ahead_bytes`]: 4 MiB, a few send buffers' worth, so a cold
/// large file costs a helper round trip per 4 MiB and a hot one a probe per 4 MiB.
pub const DEFAULT_READ_AHEAD: u64 = 4 << 20;

/// Default [`Config::collapse_bytes`]: 16 KiB, the small-file size. Below it a copy
/// costs less than a system call of its own.
pub const DEFAULT_COLLAPSE: u64 = 16 * 1024;

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
    /// `TCP_NOTSENT_LOWAT` for the batched strategies: None, the send buffer's size
    /// when the engine first sends; 0, left unset. [`DEFAULT_NOTSENT_LOWAT`] unless set.
    pub notsent_lowat: Option<usize>,
    /// Files up to this size are cached in memory per worker and sent with their head
    /// in one `sendmsg`.
    pub small_file_bytes: u64,
    /// Most bytes of small-file contents each worker holds (None: [`Config::small_file_memory_bytes`]'s default).
    pub small_file_memory: Option<u64>,
    /// Request head limits.
    pub limits: Limits,
    /// A keep-alive connection idle this long is closed.
    pub idle_timeout: Duration,
    /// A request head must be complete this long after its first byte.
    pub header_timeout: Duration,
    /// A response that makes no send progress this long is abandoned.
    pub send_timeout: Duration,
    /// A request body must be read (and discarded) whole within this long of its head.
    pub body_timeout: Duration,
    /// In-flight responses get this long after SIGTERM.
    pub shutdown_timeout: Duration,
    /// Serve dot-files and dot-directories.
    pub dotfiles: bool,
    /// List directories without an index.html.
    pub autoindex: bool,
    /// Access log.
    pub access_log: AccessLog,
    /// Access log line format.
    pub log_format: LogFormat,
    /// Where operational conditions are logged.
    pub error_log: crate::logs::ErrorLog,
    /// The least severe error-log lines written.
    pub error_log_level: tracing::Level,
    /// Open files kept per worker.
    pub open_file_cache_entries: usize,
    /// Most bytes of a file one connection sends per turn before the worker serves the
    /// others (0: until the socket is full).
    pub send_slice_bytes: u64,
    /// Only file bodies of at least this many bytes are sliced.
    pub send_slice_min_bytes: u64,
    /// File bodies of at least this many bytes go out with `TCP_CORK` set, as nginx's
    /// `tcp_nopush` (0: never).
    pub cork_min_bytes: u64,
    /// `SO_SNDBUF` of accepted connections (None: the kernel's autotuning).
    pub sndbuf: Option<usize>,
    /// Helper threads that read cold file ranges into the page cache, so the workers
    /// never wait on the disk (0: no residency probe; workers read and send inline).
    pub disk_helpers: usize,
    /// Bytes of a file body probed for residency at a time, and read by a helper on a
    /// miss.
    pub read_ahead_bytes: u64,
    /// A path answering with the server's counters as JSON (None: no status page).
    pub status_path: Option<String>,
    /// File ranges up to this size are read and gathered with the bytes around them
    /// into one `sendmsg` (seed 001's collapse; 0: each goes by the transmit strategy).
    pub collapse_bytes: u64,
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
            notsent_lowat: Some(DEFAULT_NOTSENT_LOWAT),
            small_file_bytes: 16 * 1024,
            small_file_memory: None,
            limits: Limits::default(),
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(10),
            dotfiles: false,
            autoindex: false,
            access_log: AccessLog::Stdout,
            log_format: LogFormat::Clf,
            error_log: crate::logs::ErrorLog::Stderr,
            error_log_level: tracing::Level::WARN,
            open_file_cache_entries: 10_000,
            send_slice_bytes: DEFAULT_SEND_SLICE,
            send_slice_min_bytes: DEFAULT_SEND_SLICE_MIN,
            cork_min_bytes: 0,
            sndbuf: None,
            disk_helpers: DEFAULT_DISK_HELPERS,
            read_ahead_bytes: DEFAULT_READ_AHEAD,
            status_path: None,
            collapse_bytes: DEFAULT_COLLAPSE,
        }
    }
}

/// Largest `--small-file`: above it `sendfile` from the page cache beats a copy held in
/// memory anyway, and a few such files would fill any budget.
pub const MAX_SMALL_FILE: u64 = 16 << 20;

/// Most bytes of small-file contents a worker holds by default: 1/32 of the machine's
/// memory shared by the workers, at most [`MAX_SMALL_FILE_MEMORY_DEFAULT`].
pub const MAX_SMALL_FILE_MEMORY_DEFAULT: u64 = 64 << 20;

/// How a worker's connections send: the settings they share, kept once per worker so a
/// connection does not carry its own copy.
#[derive(Clone, Debug)]
pub struct Sending {
    /// The transmit engine's settings.
    pub tx: linerate_tx::TxConfig,
    /// Most file bytes sent per turn before other connections get theirs (0: no limit).
    pub slice_bytes: u64,
    /// Only file parts of at least this many bytes are sliced.
    pub slice_min: u64,
    /// File parts of at least this many bytes are sent corked (0: none).
    pub cork_min: u64,
    /// File ranges up to this size are read into the gather (seed 001's collapse).
    pub collapse: u64,
}

impl Config {
    /// The settings a worker's connections send by.
    pub fn sending(&self) -> Sending {
        Sending {
            tx: linerate_tx::TxConfig {
                notsent_lowat: self.notsent_lowat,
                ..linerate_tx::TxConfig::new(self.transmit)
            },
            slice_bytes: self.send_slice_bytes,
            slice_min: self.send_slice_min_bytes,
            cork_min: self.cork_min_bytes,
            collapse: self.collapse_bytes,
        }
    }

    /// Bytes of small-file contents each worker may hold: the setting, or by default
    /// 1/32 of the machine's memory shared by the workers, at most 64 MiB and at least
    /// one small file.
    pub fn small_file_memory_bytes(&self) -> u64 {
        self.small_file_memory.unwrap_or_else(|| {
            let ram = total_memory_bytes().unwrap_or(1 << 30);
            (ram / 32 / self.workers.max(1) as u64)
                .min(MAX_SMALL_FILE_MEMORY_DEFAULT)
                .max(self.small_file_bytes)
        })
    }
}

/// `MemTotal` of `/proc/meminfo`.
fn total_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The settings a TOML configuration file may hold; each is also a command-line flag,
/// which wins. Unknown keys are refused.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    /// Document root.
    pub root: Option<PathBuf>,
    /// Listen addresses: one ("127.0.0.1:80") or a list.
    pub listen: Option<OneOrMany<SocketAddr>>,
    /// Worker threads.
    pub workers: Option<usize>,
    /// Pin workers to CPUs.
    pub pin: Option<bool>,
    /// Strategy name for file bodies.
    pub transmit: Option<String>,
    /// `TCP_NOTSENT_LOWAT` of the batched strategies (0: unset).
    pub lowat: Option<Size>,
    /// Small-file size: bytes, or a string like "16K".
    pub small_file: Option<Size>,
    /// Small-file contents per worker.
    pub small_file_memory: Option<Size>,
    /// Most file bytes per connection per turn.
    pub send_slice: Option<Size>,
    /// Smallest file body that is sliced.
    pub send_slice_min: Option<Size>,
    /// Smallest file body sent with `TCP_CORK` (0: never).
    pub cork_min: Option<Size>,
    /// Send buffer of accepted connections.
    pub sndbuf: Option<Size>,
    /// Disk helper threads (0: no residency probe).
    pub disk_helpers: Option<usize>,
    /// Residency probe and helper read window.
    pub read_ahead: Option<Size>,
    /// Status page path.
    pub status_path: Option<String>,
    /// Largest file range collapsed into the gather.
    pub collapse: Option<Size>,
    /// Open-file cache entries per worker.
    pub open_file_cache: Option<usize>,
    /// Request line limit.
    pub max_request_line: Option<Size>,
    /// Header block limit.
    pub max_header_bytes: Option<Size>,
    /// Header field count limit.
    pub max_header_fields: Option<usize>,
    /// Seconds.
    pub idle_timeout: Option<f64>,
    /// Seconds.
    pub header_timeout: Option<f64>,
    /// Seconds.
    pub send_timeout: Option<f64>,
    /// Seconds.
    pub body_timeout: Option<f64>,
    /// Seconds.
    pub shutdown_timeout: Option<f64>,
    /// Serve dot-files.
    pub dotfiles: Option<bool>,
    /// Directory listings.
    pub autoindex: Option<bool>,
    /// "stdout", "off" or a file path.
    pub access_log: Option<String>,
    /// "clf" or "json".
    pub log_format: Option<String>,
    /// "stderr", "off" or a file path.
    pub error_log: Option<String>,
    /// "error", "warn", "info" or "debug".
    pub error_log_level: Option<String>,
}

/// A key that takes one value or a list of them.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// `key = value`.
    One(T),
    /// `key = [value, ...]`.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values, in order.
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A byte count in a configuration file: a number, or a string with K, M or G.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// Bytes.
    Bytes(u64),
    /// "16K" and the like.
    Text(String),
}

impl Size {
    /// The byte count.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Size::Bytes(n) => Ok(*n),
            Size::Text(t) => linerate_tx::parse_size(t),
        }
    }
}

impl FileConfig {
    /// Reads and checks a configuration file.
    pub fn load(path: &std::path::Path) -> Result<FileConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), explain(&text, &e)))
    }
}

/// A TOML error as one line naming where it is: `line N: KEY: message` when the error
/// points into a `key = value` line (serde's own messages, such as "data did not match
/// any variant", name no key).
fn explain(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim_end().replace('\n', " ");
    let Some(span) = e.span() else {
        return msg;
    };
    let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    match line.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() && !key.trim().starts_with('[') => {
            let key = key.trim().trim_matches('"');
            if msg.contains(key) {
                format!("line {line_no}: {msg}")
            } else {
                format!("line {line_no}: {key}: {msg}")
            }
        }
        _ => format!("line {line_no}: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_parse_and_unknown_keys_are_refused() {
        let c: FileConfig = toml::from_str(
            "root = \"/srv\"\nlisten = [\"127.0.0.1:80\"]\nsmall-file = \"32K\"\nmax-header-bytes = 8192\nidle-timeout = 1.5\n",
        )
        .unwrap();
        assert_eq!(c.small_file.unwrap().bytes().unwrap(), 32768);
        assert_eq!(c.max_header_bytes.unwrap().bytes().unwrap(), 8192);
        assert_eq!(c.idle_timeout, Some(1.5));
        let e = toml::from_str::<FileConfig>("wrokers = 2\n").unwrap_err();
        assert!(e.message().contains("wrokers"), "{}", e.message());
        let one: FileConfig = toml::from_str("listen = \"127.0.0.1:80\"\n").unwrap();
        let many: FileConfig =
            toml::from_str("listen = [\"127.0.0.1:80\", \"[::1]:81\"]\n").unwrap();
        assert_eq!(one.listen.unwrap().to_vec().len(), 1);
        assert_eq!(many.listen.unwrap().to_vec().len(), 2);
    }

    #[test]
    fn a_bad_value_is_reported_with_its_line_and_key() {
        let text = "workers = 2\nlisten = 80\n";
        let e = toml::from_str::<FileConfig>(text).unwrap_err();
        let line = explain(text, &e);
        assert!(line.starts_with("line 2: listen: "), "{line}");
        assert!(!line.contains('\n'), "{line}");
        let text = "workers = \"two\"\n";
        let e = toml::from_str::<FileConfig>(text).unwrap_err();
        let line = explain(text, &e);
        assert!(line.starts_with("line 1: workers: "), "{line}");
    }
}
