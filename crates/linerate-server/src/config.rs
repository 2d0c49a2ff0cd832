//! Server settings: limits, timeouts and policies of docs/http.md, with its
//! defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use linerate_http::request::Limits;

use crate::settings::ValueError;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Common Log Format.
    Clf,
    /// Common Log Format with the `Referer` and `User-Agent` (Apache's and nginx's
    /// "combined").
    Combined,
    /// One JSON object per line.
    Json,
    /// A line of the operator's: text and nginx-like `$variables`.
    Custom(LogTemplate),
}

/// A custom access-log line (`log-format = "$remote_addr $status ..."`): its text as
/// written, and its pieces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTemplate {
    pub source: String,
    pub pieces: std::sync::Arc<[LogPiece]>,
}

/// A piece of a [`LogTemplate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogPiece {
    /// Text as written: `start..end` of the source.
    Text(usize, usize),
    Var(LogVar),
}

/// The variables a custom line may hold, by their nginx names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogVar {
    RemoteAddr,
    Host,
    Request,
    RequestMethod,
    RequestUri,
    Protocol,
    Status,
    BodyBytesSent,
    RequestTime,
    HttpReferer,
    HttpUserAgent,
    SslProtocol,
    TimeLocal,
    TimeIso8601,
    Msec,
}

impl LogVar {
    /// Every variable with its name.
    pub const ALL: [(&'static str, LogVar); 15] = [
        ("remote_addr", LogVar::RemoteAddr),
        ("host", LogVar::Host),
        ("request", LogVar::Request),
        ("request_method", LogVar::RequestMethod),
        ("request_uri", LogVar::RequestUri),
        ("protocol", LogVar::Protocol),
        ("status", LogVar::Status),
        ("body_bytes_sent", LogVar::BodyBytesSent),
        ("request_time", LogVar::RequestTime),
        ("http_referer", LogVar::HttpReferer),
        ("http_user_agent", LogVar::HttpUserAgent),
        ("ssl_protocol", LogVar::SslProtocol),
        ("time_local", LogVar::TimeLocal),
        ("time_iso8601", LogVar::TimeIso8601),
        ("msec", LogVar::Msec),
    ];
}

impl std::str::FromStr for LogTemplate {
    type Err = ValueError;
    /// `$name` or `${name}`; `$$` is a `$`.
    fn from_str(s: &str) -> Result<LogTemplate, ValueError> {
        let mut pieces = Vec::new();
        let (mut i, mut text) = (0, 0);
        let b = s.as_bytes();
        while i < b.len() {
            if b[i] != b'$' {
                i += 1;
                continue;
            }
            if i > text {
                pieces.push(LogPiece::Text(text, i));
            }
            if b.get(i + 1) == Some(&b'$') {
                pieces.push(LogPiece::Text(i, i + 1));
                i += 2;
                text = i;
                continue;
            }
            let braced = b.get(i + 1) == Some(&b'{');
            let start = i + 1 + usize::from(braced);
            let mut end = start;
            while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
                end += 1;
            }
            let name = &s[start..end];
            if braced && b.get(end) != Some(&b'}') {
                return Err(ValueError::says(s, format!("${{{name} has no closing }}")));
            }
            let var = LogVar::ALL
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    let known: Vec<&str> = LogVar::ALL.iter().map(|(n, _)| *n).collect();
                    let known = known.join(", $");
                    ValueError::says(s, format!("${name} is not a variable (${known})"))
                })?;
            pieces.push(LogPiece::Var(var));
            i = end + usize::from(braced);
            text = i;
        }
        if text < b.len() {
            pieces.push(LogPiece::Text(text, b.len()));
        }
        if !s.bytes().all(|c| c == b' ' || c.is_ascii_graphic()) {
            return Err(ValueError::says(
                s,
                "a line format holds visible ASCII and spaces (a tab or a line break would split the line)",
            ));
        }
        Ok(LogTemplate {
            source: s.to_string(),
            pieces: pieces.into(),
        })
    }
}

/// Default [`Config::send_slice`]: 256 KiB, lighttpd's turn. A connection whose
/// body is at least [`DEFAULT_SEND_SLICE_MIN`] sends at most this much before the
/// worker serves its other connections. One `sendfile` of several MiB takes the
/// socket's lock once per 64 KiB while that connection's ACKs are processed on the
/// client's CPU under the same lock: on loopback at 10 MiB the worker spent 13% of its
/// time spinning for it (2.4% for lighttpd). 256 KiB turns measured +18% and +14%
/// requests/s at 1 MiB on loopback for 16% and 13% less CPU per request, +7% and -7%
/// over `--netns --tso on`, and at 10 MiB no difference in either, with a third of the
/// p99 on loopback; 64 and 128 KiB turns cost 12-27% more CPU per request
/// (BENCHMARKS.md, "Large files where a NIC would be").
pub const DEFAULT_SEND_SLICE: u64 = 256 * 1024;

/// Default [`Config::lowat`]: 16 KiB. The engine's own default, the send
/// buffer's size, comes out at 4 MiB on loopback, where autotuning has already grown the
/// buffer when a connection's first file part goes out. Then up to 2 MiB wait unsent,
/// and the client's CPU sends them: its ACKs open the window, and the kernel transmits
/// the queued bytes in the softirq that handles each ACK. With 16 KiB almost nothing
/// waits, so the worker sends every segment itself. With wrk on the other CPU at 10 MiB,
/// that gave +69% requests/s against nginx (10 of 10 rounds), with CPU per request
/// level (BENCHMARKS.md, "The low-water mark").
pub const DEFAULT_NOTSENT_LOWAT: usize = 16 * 1024;

/// Default [`Config::send_slice_min`].
pub const DEFAULT_SEND_SLICE_MIN: u64 = 1 << 20;

/// Default [`Config::disk_helpers`]: enough to keep a few disk reads in flight.
pub const DEFAULT_DISK_HELPERS: usize = 4;

/// Default [`Config::read_ahead`]: 4 MiB, a few send buffers' worth, so a cold
/// large file costs a helper round trip per 4 MiB, and a hot one above 64 MiB a probe
/// per 4 MiB (one up to 64 MiB is probed whole, once per 100 ms).
pub const DEFAULT_READ_AHEAD: u64 = 4 << 20;

/// Default [`Config::small_file`]: 64 KiB. Files from 20 to 60 KiB go out 17-21%
/// faster at 15-18% less CPU each from memory, with their head in one `sendmsg`, than
/// as a head and a `sendfile` (BENCHMARKS.md, "The small-file size").
pub const DEFAULT_SMALL_FILE: u64 = 64 * 1024;

/// Default [`Config::collapse`]: 16 KiB. Below it a copy
/// costs less than a system call of its own.
pub const DEFAULT_COLLAPSE: u64 = 16 * 1024;

pub use crate::settings::Config;

/// A setting that is one of a closed set of words: its `FromStr` ("'x': expected a, b
/// or c") and its `Display` (its word), written once for every such type.
macro_rules! words {
    ($t:ident { $($word:literal => $v:ident),+ $(,)? }) => {
        impl std::str::FromStr for $t {
            type Err = $crate::settings::ValueError;
            fn from_str(s: &str) -> Result<$t, $crate::settings::ValueError> {
                match s {
                    $($word => Ok($t::$v),)+
                    _ => Err($crate::settings::ValueError::says(
                        s,
                        format!("expected {}", $crate::config::or_list(&[$($word),+])),
                    )),
                }
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    $($t::$v => $word,)+
                })
            }
        }
    };
}
pub(crate) use words;

/// `a, b or c`.
pub(crate) fn or_list(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// How a site's entity tags are made (docs/http.md F8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EtagMode {
    /// From the size and the modification time: the same on every instance whose
    /// copy of the file has the same modification time (no inode, no device).
    #[default]
    Mtime,
    /// From a digest of the bytes: the same on every instance however the files were
    /// deployed; none until the digest is computed (off the workers).
    Content,
    /// No `ETag`: `Last-Modified` alone.
    Off,
}

words!(EtagMode {
    "mtime" => Mtime,
    "content" => Content,
    "off" => Off,
});

/// One site (virtual host): the Host names it answers, its root, and its settings
/// (the server's where its block gives none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteConfig {
    /// Names, lower case: exact (`docs.example.com`) or `*.example.com` (any name
    /// ending in `.example.com`, not `example.com` itself).
    pub names: Vec<String>,
    /// Its document root.
    pub root: PathBuf,
    /// Answers requests whose Host no site names, or that have none.
    pub default: bool,
    pub dotfiles: bool,
    pub autoindex: bool,
    pub etag: EtagMode,
    pub precompressed: Vec<linerate_http::coding::Coding>,
    /// Its per-path rules and the server-wide ones, least specific first.
    pub rules: Vec<crate::rules::Rule>,
    /// Its own certificate chain and key (PEM files) for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Its certificate comes from ACME (issue 34).
    pub acme: bool,
    /// Its own access log and line format (none: the server's).
    pub access_log: Option<AccessLog>,
    pub log_format: Option<LogFormat>,
}

/// How the ACME directory checks a site's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// TLS-ALPN-01 when there is a `tls-listen` address (always, with ACME).
    #[default]
    Auto,
    Http01,
    TlsAlpn01,
}

words!(AcmeChallenge {
    "auto" => Auto,
    "http-01" => Http01,
    "tls-alpn-01" => TlsAlpn01,
});

/// Where certificates of `acme = true` sites come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcmeConfig {
    pub directory: String,
    /// The root of the directory's own HTTPS certificate (PEM), if not the system's.
    pub directory_ca: Option<PathBuf>,
    pub email: Option<String>,
    /// The account key and the certificates.
    pub dir: PathBuf,
    pub challenge: AcmeChallenge,
}

/// Let's Encrypt's production directory.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

impl Default for AcmeConfig {
    fn default() -> Self {
        AcmeConfig {
            directory: LETS_ENCRYPT.to_string(),
            directory_ca: None,
            email: None,
            dir: PathBuf::from("/var/lib/linerate/acme"),
            challenge: AcmeChallenge::Auto,
        }
    }
}

impl SiteConfig {
    /// How the site is named in messages: its first name, or its root.
    pub fn label(&self) -> String {
        match self.names.first() {
            Some(n) => n.clone(),
            None => self.root.display().to_string(),
        }
    }
}

impl Config {
    /// Where each site's access-log lines go and how they are written, by site
    /// ([`Config::sites`]' order): its own, else the server's.
    pub fn site_logs(&self) -> Vec<(AccessLog, LogFormat)> {
        self.sites()
            .iter()
            .map(|s| {
                (
                    s.access_log
                        .clone()
                        .unwrap_or_else(|| self.access_log.clone()),
                    s.log_format
                        .clone()
                        .unwrap_or_else(|| self.log_format.clone()),
                )
            })
            .collect()
    }

    /// The access-log files written (the server's and the sites' own), each path once.
    pub fn access_log_paths(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let sites = self.site_logs().into_iter().map(|(l, _)| l);
        for log in sites.chain([self.access_log.clone()]) {
            if let AccessLog::File(p) = log {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The sites served: the `[[site]]` blocks, or one site for every Host from `root`
    /// and the server's settings.
    pub fn sites(&self) -> Vec<SiteConfig> {
        if !self.sites.is_empty() {
            return self.sites.clone();
        }
        vec![SiteConfig {
            tls: None,
            acme: false,
            access_log: None,
            log_format: None,
            names: Vec::new(),
            root: self.root.clone(),
            default: true,
            dotfiles: self.dotfiles,
            autoindex: self.autoindex,
            etag: self.etag,
            precompressed: self.precompressed.clone(),
            rules: {
                let mut r = self.rules.clone();
                crate::rules::sort(&mut r);
                r
            },
        }]
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
    /// The request limits the keys set (what else a [`Limits`] keeps is the sites'
    /// to say).
    pub fn limits(&self) -> Limits {
        Limits {
            request_line_bytes: self.max_request_line,
            header_bytes: self.max_header_bytes,
            header_fields: self.max_header_fields,
            http2: self.http2,
            ..Limits::default()
        }
    }

    /// Where certificates of `acme = true` sites come from.
    pub fn acme(&self) -> AcmeConfig {
        AcmeConfig {
            directory: self.acme_directory.clone(),
            directory_ca: self.acme_directory_ca.clone(),
            email: self.acme_email.clone(),
            dir: self.acme_dir.clone(),
            challenge: self.acme_challenge,
        }
    }

    /// The file of each Unix socket `listen` makes.
    pub fn unix_file(&self) -> UnixFile {
        UnixFile {
            mode: self.unix_mode,
            owner: self.unix_owner.clone(),
        }
    }

    /// The settings a worker's connections send by.
    pub fn sending(&self) -> Sending {
        Sending {
            tx: linerate_tx::TxConfig {
                notsent_lowat: self.lowat,
                ..linerate_tx::TxConfig::new(self.transmit)
            },
            slice_bytes: self.send_slice,
            slice_min: self.send_slice_min,
            cork_min: self.cork_min,
            collapse: self.collapse,
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
                .max(self.small_file)
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

/// Kernel TLS for HTTPS connections (`--kernel-tls`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KernelTls {
    /// Records are sealed in user space (rustls), always.
    #[default]
    Off,
    /// A TLS 1.3 connection's keys go to the kernel after its handshake where the
    /// kernel has kernel TLS; elsewhere user space, said once.
    Auto,
    /// As `auto`, and the server refuses to start (or a reload) without kernel TLS.
    On,
}

words!(KernelTls {
    "off" => Off,
    "auto" => Auto,
    "on" => On,
});

/// Which worker takes a new connection on an IP listener (`--steer`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Steer {
    /// The kernel's hash of the connection picks among the workers' listeners.
    #[default]
    Off,
    /// `cpu` when there are as many workers as CPUs, each pinned; else off.
    Auto,
    /// The worker pinned to the CPU that processed the connection's SYN (a program on
    /// the `SO_REUSEPORT` group), so its packets, its accept and its requests stay on
    /// one CPU.
    Cpu,
}

impl Steer {
    /// Whether connections are steered with `workers` workers over `cpus` CPUs. Not
    /// with more workers than CPUs: the program names one worker per CPU, and the
    /// others would get no connection.
    pub fn active(self, pin: bool, workers: usize, cpus: usize) -> bool {
        match self {
            Steer::Off => false,
            Steer::Cpu => pin && workers <= cpus,
            Steer::Auto => pin && workers > 1 && workers == cpus,
        }
    }
}

words!(Steer {
    "off" => Off,
    "auto" => Auto,
    "cpu" => Cpu,
});

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// An address and port (port 0: a free port).
    Ip(SocketAddr),
    /// A Unix stream socket at this path.
    Unix(PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Ip(a) => write!(f, "{a}"),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(a: SocketAddr) -> Endpoint {
        Endpoint::Ip(a)
    }
}

/// The file of a Unix socket the server makes: its permissions and owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnixFile {
    /// Permission bits (connecting needs write permission): 0666 by default, as nginx
    /// sets them.
    pub mode: u32,
    /// `USER`, `USER:GROUP` or `:GROUP` (names or numbers); none: who binds it.
    pub owner: Option<String>,
}

impl Default for UnixFile {
    fn default() -> Self {
        UnixFile {
            mode: 0o666,
            owner: None,
        }
    }
}

/// Clients: a network (`127.0.0.0/8`, `::1/128`), one address, `unix:` (every
/// client of a Unix socket, as nginx's `allow unix:`), or `all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cidr {
    /// Clients with an address in this network.
    Net(ipnet::IpNet),
    /// Clients of a Unix socket.
    Unix,
    /// Every client.
    All,
}

impl Cidr {
    /// Whether a client at `peer` (none: on a Unix socket) is one of these.
    pub fn admits(&self, peer: Option<std::net::IpAddr>) -> bool {
        match (self, peer) {
            // An IPv4 client of an IPv6 socket arrives as ::ffff:a.b.c.d.
            (Cidr::Net(n), Some(ip)) => n.contains(&ip.to_canonical()),
            (Cidr::Unix, None) | (Cidr::All, _) => true,
            _ => false,
        }
    }

    /// How narrowly it names clients: `all` least, then networks by prefix length (an
    /// address most), `unix:` (its own kind) above them.
    pub fn specificity(&self) -> u16 {
        match self {
            Cidr::All => 0,
            Cidr::Net(n) => 1 + u16::from(n.prefix_len()),
            Cidr::Unix => 200,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Cidr, ValueError> {
        let t = s.trim();
        if t == "unix:" {
            return Ok(Cidr::Unix);
        }
        if t == "all" {
            return Ok(Cidr::All);
        }
        if let Ok(n) = t.parse::<ipnet::IpNet>() {
            return Ok(Cidr::Net(canonical(n)));
        }
        t.parse::<std::net::IpAddr>()
            .map(|a| Cidr::Net(canonical(ipnet::IpNet::from(a))))
            .map_err(|_| {
                ValueError::is(
                    s,
                    "not an address, a network, unix: or all (127.0.0.1/32, ::1)",
                )
            })
    }
}

/// An IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) as the IPv4 one it names:
/// clients are compared in their IPv4 form, so the mapped form would match none.
fn canonical(n: ipnet::IpNet) -> ipnet::IpNet {
    match n {
        ipnet::IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(n, ipnet::IpNet::V4),
            None => n,
        },
        _ => n,
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cidr::Net(n) => write!(f, "{n}"),
            Cidr::Unix => f.write_str("unix:"),
            Cidr::All => f.write_str("all"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word type reads its words, writes them back, and names them all when it
    /// is given another.
    #[test]
    fn word_settings_read_write_and_refuse_in_words() {
        for (word, mode) in [
            ("mtime", EtagMode::Mtime),
            ("content", EtagMode::Content),
            ("off", EtagMode::Off),
        ] {
            assert_eq!(word.parse::<EtagMode>(), Ok(mode));
            assert_eq!(mode.to_string(), word);
        }
        let refused = |e: Result<EtagMode, ValueError>| e.unwrap_err().to_string();
        assert_eq!(refused("x".parse()), "'x': expected mtime, content or off");
        assert_eq!(
            "yes".parse::<KernelTls>().unwrap_err(),
            ValueError::says("yes", "expected off, auto or on")
        );
        assert_eq!("cpu".parse::<Steer>(), Ok(Steer::Cpu));
        assert_eq!(Steer::Auto.to_string(), "auto");
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b"]), "a or b");
    }
}
