//! Every setting of `linerate serve`, defined once.
//!
//! [`Settings`] is at the same time the command line (clap) and the configuration file
//! (serde, kebab-case keys): a field is a flag `--key` and a key `key = …`, with one doc
//! comment for `--help`, one type, and one range. The value types (`values`) parse a
//! value and check its range in one place, so a flag and a key refuse the same values
//! with the same words; the blocks (`[[site]]`, `[[rule]]`) and their checks are in
//! `blocks`. Each key is one row of the `settings!` table: its documentation, flag,
//! file spelling and type, then its field in the [`Config`] (of the same name), its
//! default and how a given value becomes the field's. The two structs, the merge of a
//! flag over the file ([`Settings::over`]), the defaults ([`Config::new`]) and the
//! landing ([`Settings::apply`]) are written from the rows; the configuration the
//! server runs on is the rows' fields and what the blocks make.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use linerate_http::request::Limits;
use linerate_tx::Strategy;

use crate::config::{
    AccessLog, AcmeChallenge, Cidr, Endpoint, EtagMode, KernelTls, LogFormat, SiteConfig, Steer,
    DEFAULT_COLLAPSE, DEFAULT_DISK_HELPERS, DEFAULT_NOTSENT_LOWAT, DEFAULT_READ_AHEAD,
    DEFAULT_SEND_SLICE, DEFAULT_SEND_SLICE_MIN, DEFAULT_SMALL_FILE, LETS_ENCRYPT,
};
use crate::cors::Cors;
use crate::logs::ErrorLog;
use crate::rules::{Access, Fallback, PathMatch, Redirect};
use std::collections::BTreeMap;

mod error;
#[macro_use]
mod values;
mod blocks;

pub use crate::cors::CorsSettings;
pub use crate::limits::LimitSettings;
pub use blocks::*;
pub use error::{ConfigError, Reason, Refusal, ValueError};
pub(crate) use values::as_text;
pub use values::*;

/// A key's value given or not: `Option`'s `Some`, a list's entries. A flag given wins
/// over the file's key, and a key given over the default.
trait Merge: Clone {
    /// What is left unsaid: `None`, an empty list.
    fn unset(&self) -> bool;

    /// `self` if given, else `under`.
    fn over(&self, under: &Self) -> Self {
        if self.unset() {
            under.clone()
        } else {
            self.clone()
        }
    }
}

impl<T: Clone> Merge for Option<T> {
    fn unset(&self) -> bool {
        self.is_none()
    }
}

impl<T: Clone> Merge for Vec<T> {
    fn unset(&self) -> bool {
        self.is_empty()
    }
}

/// A given key's value, to land in the configuration: an `Option`'s content, a whole
/// list.
trait Given {
    type Value;
    fn given(self) -> Option<Self::Value>;
}

impl<T> Given for Option<T> {
    type Value = T;
    fn given(self) -> Option<T> {
        self
    }
}

impl<T> Given for Vec<T> {
    type Value = Vec<T>;
    fn given(self) -> Option<Vec<T>> {
        (!self.is_empty()).then_some(self)
    }
}

/// The server's keys, one row each: its documentation (which `--help`, the man page
/// and the file's reference show), its flag (`#[arg]`), how the file spells it
/// (`#[serde]`, kebab-case by default) and its type, which checks its range; after
/// `=>`, its field in the [`Config`], the default, and how a given value becomes the
/// field's. From the rows come the [`Settings`] (a flag and a file key each), their
/// merge ([`Settings::over`]), the [`Config`]'s key fields, [`Config::new`]'s defaults,
/// and the landing of what was given ([`Settings::apply`]). A row with no `=>` (the
/// blocks) is applied by hand, into the fields the [`Config`] declares after the rows.
macro_rules! settings {
    // The features' rows join the table, one module's after another: `@with` calls
    // the next module's `*_keys!`, which hands its rows back to `@join`.
    (@with [$next:ident $(, $rest:ident)*] $($table:tt)*) => {
        $next! { [$($rest),*] $($table)* }
    };
    (@with [] $($table:tt)*) => {
        settings! { $($table)* }
    };
    (
        @join [$($rows:tt)*] [$($rest:ident),*]
        $(#[$sm:meta])*
        pub struct Settings { $($mine:tt)* }
        $($config:tt)*
    ) => {
        settings! {
            @with [$($rest),*]
            $(#[$sm])*
            pub struct Settings { $($mine)* $($rows)* }
            $($config)*
        }
    };
    (
        $(#[$sm:meta])*
        pub struct Settings {
            $(
                $(#[$m:meta])*
                pub $key:ident: $ty:ty
                    $(=> $cty:ty = $default:expr, |$v:ident| $conv:expr)?,
            )*
        }

        $(#[$cm:meta])*
        pub struct Config {
            $(
                $(#[$fm:meta])*
                pub $field:ident: $fty:ty = $fdefault:expr,
            )*
        }
    ) => {
        $(#[$sm])*
        #[derive(clap::Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct Settings {
            $(
                $(#[$m])*
                #[serde(skip_serializing_if = "Merge::unset")]
                pub $key: $ty,
            )*
        }

        $(#[$cm])*
        #[derive(Clone, Debug)]
        pub struct Config {
            $($(
                #[doc = concat!("The `", stringify!($key), "` setting: see [`Settings::", stringify!($key), "`].")]
                pub $key: $cty,
            )?)*
            $(
                $(#[$fm])*
                pub $field: $fty,
            )*
        }

        impl Config {
            /// The defaults, serving `root`.
            pub fn new(root: PathBuf) -> Config {
                let mut cfg = Config {
                    $($($key: $default,)?)*
                    $($field: $fdefault,)*
                };
                cfg.root = root;
                cfg
            }
        }

        impl Settings {
            /// `self` (the flags) over `under` (the file), key by key: a key given in
            /// both takes the flag's value; a list given as flags replaces the file's.
            pub fn over(&self, under: &Settings) -> Settings {
                Settings {
                    $($key: Merge::over(&self.$key, &under.$key),)*
                }
            }

            /// Each key given, into its field of `cfg`.
            fn land(&self, cfg: &mut Config) {
                $($(
                    if let Some($v) = Given::given(self.$key.clone()) {
                        cfg.$key = $conv;
                    }
                )?)*
            }
        }
    };
}

settings! {
    @with [acme_keys, proxy_keys, compress_cache_keys, http3_keys, limit_keys]
    /// Every setting of `linerate serve`. Each is a flag (`--small-file 32K`) and a key of
    /// the `--config` file (`small-file = "32K"`); a flag wins over the file, which wins over
    /// the defaults. `Option` fields left `None` keep the default.
    pub struct Settings {
        /// Document root (the positional DIR on the command line); required when started
        /// from a configuration file or by systemd, unless `[[site]]` blocks give every
        /// root [default at a terminal: the current directory, unless it is /].
        #[arg(skip)]
        pub root: Option<PathBuf>
            => PathBuf = PathBuf::new(), |r| r,
        /// `[[site]]` blocks of the file: virtual hosts, each with its names and root.
        #[arg(skip)]
        #[serde(default, rename = "site")]
        pub sites: Vec<SiteSettings>,
        /// `[[rule]]` blocks of the file: per-path settings for every site.
        #[arg(skip)]
        #[serde(default, rename = "rule")]
        pub rules: Vec<RuleSettings>,
        /// Address to listen on: PORT or :PORT (every IPv4 address), HOST:PORT (a name:
        /// each address it resolves to), [IPv6]:PORT, or unix:/PATH (a Unix socket; a
        /// stale socket file there is replaced, a live one refused); repeat for several
        /// (port 0: a free port; each bound address is printed as "listening on ADDR")
        /// [default: 127.0.0.1:8080].
        #[arg(long, value_name = "ADDR")]
        #[serde(
            default,
            deserialize_with = "one_or_many"
        )]
        pub listen: Vec<ListenAddr>
            => Vec<Endpoint> = vec![Endpoint::Ip(SocketAddr::from(([127, 0, 0, 1], 8080)))], |l| endpoints(l),
        /// Permissions of the Unix sockets --listen makes, in octal (connecting needs
        /// write permission) [default: 0666, as nginx].
        #[arg(long, value_name = "MODE")]
        pub unix_mode: Option<Mode>
            => u32 = 0o666, |m| m.0,
        /// Owner of the Unix sockets --listen makes: USER, USER:GROUP or :GROUP (names or
        /// numbers) [default: the user that starts the server].
        #[arg(long, value_name = "USER[:GROUP]")]
        pub unix_owner: Option<String>
            => Option<String> = None, |o| Some(o),
        /// Address to serve HTTPS on, written as --listen's (":443"); repeat for several.
        /// Needs --tls-cert and --tls-key (or `acme`). TLS 1.3 and 1.2, HTTP/2 and
        /// HTTP/1.1 by ALPN (h2 first; see --http2), session resumption by tickets and by
        /// session ID [default: none].
        #[arg(long, value_name = "ADDR")]
        #[serde(
            default,
            deserialize_with = "one_or_many"
        )]
        pub tls_listen: Vec<ListenAddr>
            => Vec<Endpoint> = Vec::new(), |l| endpoints(l),
        /// Address whose every request is answered with a redirect to the same URL over
        /// HTTPS (301, to the port of the first --tls-listen, the host from the request),
        /// as nginx's `return 301 https://$host$request_uri`; repeat for several. Needs
        /// --tls-listen [default: none].
        #[arg(long, value_name = "ADDR")]
        #[serde(
            default,
            deserialize_with = "one_or_many"
        )]
        pub redirect_listen: Vec<ListenAddr>
            => Vec<Endpoint> = Vec::new(), |l| endpoints(l),
        /// Certificate chain of --tls-listen: a PEM file, the server's certificate first,
        /// then the intermediates (ECDSA or RSA); read again at each reload (SIGHUP), a bad
        /// one refusing the reload [default: none].
        #[arg(long, value_name = "FILE")]
        pub tls_cert: Option<PathBuf>
            => Option<PathBuf> = None, |p| Some(p),
        /// Private key of --tls-cert: a PEM file (PKCS #8, SEC1 EC or PKCS #1 RSA)
        /// [default: none].
        #[arg(long, value_name = "FILE")]
        pub tls_key: Option<PathBuf>
            => Option<PathBuf> = None, |p| Some(p),
        /// Session ticket keys shared by instances behind one balancer: a file of 48 or 80
        /// random bytes (openssl rand 80 > FILE), the same on each, so a session resumes on
        /// any of them; rotated by replacing the file and reloading (tickets of the two
        /// keys before are still accepted) [default: keys made at random by the process,
        /// kept across reloads].
        #[arg(long, value_name = "FILE")]
        pub tls_ticket_keys: Option<PathBuf>
            => Option<PathBuf> = None, |p| Some(p),
        /// Kernel TLS: auto hands each TLS 1.3 connection's keys to its socket after the
        /// handshake where the kernel has kernel TLS (CONFIG_TLS), so file bodies go by
        /// --transmit and the kernel seals the records (else user space, said once); on
        /// refuses to start without it; off seals every record in user space. Not run on
        /// the machines this project is measured on (see docs/operations.md)
        /// [default: off].
        #[arg(long, value_name = "MODE")]
        pub kernel_tls: Option<KernelTls>
            => KernelTls = KernelTls::Off, |k| k,
        /// Worker threads, each with its own listener [default: one per CPU].
        #[arg(long, value_name = "N")]
        pub workers: Option<Count<1, 1024>>
            => usize = linerate_sys::cpu::allowed_cpus().map_or(1, |c| c.len().max(1)), |n| n.0 as usize,
        /// Give up root for this user (and its group, with no supplementary groups) once
        /// the sockets are bound and the logs open, before serving; the start fails if it
        /// cannot [default: the user that starts it; as root, a warning].
        #[arg(long, value_name = "NAME")]
        pub user: Option<String>
            => Option<String> = None, |u| Some(u),
        /// Pin worker i to the i-th CPU the process may use; --pin=false leaves them to the
        /// scheduler [default: true].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        pub pin: Option<bool>
            => bool = true, |p| p,
        /// Which worker takes a new connection: cpu sends it to the worker pinned to the
        /// CPU that processed its SYN (a program on each address's SO_REUSEPORT group), so
        /// its packets, its accept and its requests stay on one CPU; auto does so when
        /// there are as many workers as CPUs, each pinned; off leaves it to the kernel's
        /// hash. Needs --pin [default: off].
        #[arg(long, value_name = "MODE")]
        pub steer: Option<Steer>
            => Steer = Steer::Off, |m| m,
        /// Strategy for file bodies: splice (file → the worker's pipe → socket, batched as
        /// sendfile is; measured 2-3% cheaper at 1 MiB), sendfile, copy or zerocopy (also
        /// sendfile-4k and sendfile-chunk-SIZE, for measurement) [default: splice].
        #[arg(long, value_name = "STRATEGY")]
        pub transmit: Option<Transmit>
            => Strategy = Strategy::Splice, |t| t.0,
        /// Event-loop driver: uring (io_uring: connections' bytes and HTTP/3's datagrams
        /// received and sent on a ring, one io_uring_enter per loop turn; refuses to start where io_uring cannot
        /// run, or on a kernel before 6.0); epoll; or auto (uring where it can run, else
        /// epoll with one line saying why) [default: auto].
        #[arg(long, value_name = "DRIVER")]
        pub driver: Option<Driver>
            => linerate_event::DriverChoice = linerate_event::DriverChoice::Auto, |d| d.0,
        /// TCP_NOTSENT_LOWAT of the batched strategies: the socket wakes when fewer than
        /// half this many bytes wait unsent, so the worker, not the client's ACKs, sends
        /// nearly every segment. 0 leaves it unset, as nginx does [default: 16K].
        #[arg(long, value_name = "BYTES")]
        pub lowat: Option<Bytes<0, { i32::MAX as u64 }>>
            => Option<usize> = Some(DEFAULT_NOTSENT_LOWAT), |b| Some(b.0 as usize),
        /// Files up to this size (at most 16M) are kept in memory per worker and sent with
        /// their head in one sendmsg [default: 64K].
        #[arg(long, value_name = "BYTES")]
        pub small_file: Option<Bytes<0, { crate::config::MAX_SMALL_FILE }>>
            => u64 = DEFAULT_SMALL_FILE, |b| b.0,
        /// Most bytes of small-file contents each worker keeps in memory; past it the
        /// largest are given up first, and those files go out by the transmit strategy
        /// [default: 1/32 of the machine's memory shared by the workers, at most 64M].
        #[arg(long, value_name = "BYTES")]
        pub small_file_memory: Option<Bytes<0, { i64::MAX as u64 }>>
            => Option<u64> = None, |b| Some(b.0),
        /// Most bytes of a file one connection sends per turn before the worker serves the
        /// others, as lighttpd's 256 KiB and nginx's sendfile_max_chunk do; 0: until the
        /// socket is full [default: 256K].
        #[arg(long, value_name = "BYTES")]
        pub send_slice: Option<Bytes<0, { i64::MAX as u64 }>>
            => u64 = DEFAULT_SEND_SLICE, |b| b.0,
        /// Only file bodies of at least this many bytes are sliced [default: 1M].
        #[arg(long, value_name = "BYTES")]
        pub send_slice_min: Option<Bytes<0, { i64::MAX as u64 }>>
            => u64 = DEFAULT_SEND_SLICE_MIN, |b| b.0,
        /// File bodies of at least this many bytes go out with TCP_CORK set, as nginx's
        /// tcp_nopush: fewer, fuller segments at the cost of a system call each; 0: never
        /// [default: 0].
        #[arg(long, value_name = "BYTES")]
        pub cork_min: Option<Bytes<0, { i64::MAX as u64 }>>
            => u64 = 0, |b| b.0,
        /// SO_SNDBUF of accepted connections (as nginx's `listen ... sndbuf=`); fixing it
        /// turns the kernel's send-buffer autotuning off [default: autotuning].
        #[arg(long, value_name = "BYTES")]
        pub sndbuf: Option<Bytes<1, { i32::MAX as u64 }>>
            => Option<usize> = None, |b| Some(b.0 as usize),
        /// Threads that read file ranges missing from the page cache, so a worker never
        /// starts a disk read itself; 0 turns the residency probe off (workers then read
        /// inline, as nginx does without aio threads) [default: 4].
        #[arg(long, value_name = "N")]
        pub disk_helpers: Option<Count<0, 256>>
            => usize = DEFAULT_DISK_HELPERS, |n| n.0 as usize,
        /// Bytes of a file body checked for residency at once (one cachestat call), and
        /// read by a helper when any page is missing; while one window goes out the next is
        /// checked and read ahead [default: 4M].
        #[arg(long, value_name = "BYTES")]
        pub read_ahead: Option<Bytes<1, { i32::MAX as u64 }>>
            => u64 = DEFAULT_READ_AHEAD, |b| b.0,
        /// Answer GET PATH with the server's counters as JSON (connections, requests,
        /// residency probes and misses, helper reads, queue collapses and defrags), like
        /// nginx's stub_status; anyone who can reach the server can read it [default: no
        /// status page].
        #[arg(long, value_name = "PATH")]
        pub status_path: Option<UrlPath>
            => Option<String> = None, |p| Some(p.0),
        /// Answer GET PATH with 200 `ok` while serving and 503 from the moment
        /// a stop is asked for (SIGTERM, SIGINT, SIGQUIT), for a load balancer's health
        /// checks; its answers are not logged [default: no health path].
        #[arg(long, value_name = "PATH")]
        pub health_path: Option<UrlPath>
            => Option<String> = None, |p| Some(p.0),
        /// Answer GET PATH with the counters as Prometheus / OpenMetrics text (responses by
        /// method and status class, bytes, connections, timeouts, errors, open-file cache,
        /// disk helpers, collapses, a response-time histogram) [default: no metrics].
        #[arg(long, value_name = "PATH")]
        pub metrics_path: Option<UrlPath>
            => Option<String> = None, |p| Some(p.0),
        /// Clients that may read --metrics-path (others get 403): a network, an address, or
        /// unix: for clients of a Unix socket; repeat for several [default: every client
        /// that reaches the server].
        #[arg(long, value_name = "CIDR")]
        #[serde(default)]
        pub metrics_allow: Vec<Cidr>
            => Vec<Cidr> = Vec::new(), |a| a,
        /// File ranges up to this size (the parts of a multipart/byteranges answer, say) are
        /// read and gathered with the heads around them into one sendmsg, as seed 001
        /// collapses small buffers; a queue still too fragmented for one call is
        /// linearized into its last segment. 0: each range goes by the transmit strategy
        /// [default: 16K].
        #[arg(long, value_name = "BYTES")]
        pub collapse: Option<Bytes<0, { i64::MAX as u64 }>>
            => u64 = DEFAULT_COLLAPSE, |b| b.0,
        /// Open files (descriptor, metadata, validators, small contents) each worker keeps,
        /// as nginx's open_file_cache max=N; when full the cache starts over [default:
        /// 10000].
        #[arg(long, value_name = "N")]
        pub open_file_cache: Option<Count<1, 1_000_000>>
            => usize = 10_000, |n| n.0 as usize,
        /// Longest request line, 414 beyond (1 byte to 1M) [default: 8K].
        #[arg(long, value_name = "BYTES")]
        pub max_request_line: Option<Bytes<1, MAX_HEAD_LIMIT>>
            => usize = Limits::default().request_line_bytes, |b| b.0 as usize,
        /// Largest header block, 431 beyond (1 byte to 1M) [default: 16K].
        #[arg(long, value_name = "BYTES")]
        pub max_header_bytes: Option<Bytes<1, MAX_HEAD_LIMIT>>
            => usize = Limits::default().header_bytes, |b| b.0 as usize,
        /// Most header fields, 431 beyond [default: 100].
        #[arg(long, value_name = "N")]
        pub max_header_fields: Option<Count<1, 10_000>>
            => usize = Limits::default().header_fields, |n| n.0 as usize,
        /// Close a keep-alive connection idle this long (seconds, or 500ms, 30s, 2m, 1h)
        /// [default: 60].
        #[arg(long, value_name = "DURATION")]
        pub idle_timeout: Option<Seconds>
            => Duration = Duration::from_secs(60), |d| d.0,
        /// A request head must arrive whole within this long of its first byte [default: 10].
        #[arg(long, value_name = "DURATION")]
        pub header_timeout: Option<Seconds>
            => Duration = Duration::from_secs(10), |d| d.0,
        /// Close a response that makes no send progress this long [default: 60].
        #[arg(long, value_name = "DURATION")]
        pub send_timeout: Option<Seconds>
            => Duration = Duration::from_secs(60), |d| d.0,
        /// Close a connection with answers owed whose client takes fewer bytes a second
        /// than this over a whole --send-timeout (its TCP acknowledgements counted, so an
        /// HTTP/2 stream fed a 1-byte window, or a reader that takes a byte now and then,
        /// cannot hold it); 0: no such limit [default: 1K].
        #[arg(long, value_name = "BYTES")]
        pub min_send_rate: Option<Bytes<0, { i64::MAX as u64 }>>
            => u64 = 1024, |b| b.0,
        /// A request body must arrive whole (it is read and discarded) within this long of
        /// its head, however it trickles (nginx's client_body_timeout and lingering_time)
        /// [default: 30].
        #[arg(long, value_name = "DURATION")]
        pub body_timeout: Option<Seconds>
            => Duration = Duration::from_secs(30), |d| d.0,
        /// After SIGTERM, SIGINT or SIGQUIT, in-flight responses get this long [default: 10].
        #[arg(long, value_name = "DURATION")]
        pub shutdown_timeout: Option<Seconds>
            => Duration = Duration::from_secs(10), |d| d.0,
        /// After SIGTERM, SIGINT or SIGQUIT, serve on this long with the health path
        /// answering 503 before the listeners close, so a load balancer's checks see the
        /// drain before connections are refused; meanwhile every answer closes its
        /// connection (HTTP/2: GOAWAY), so clients come back through the balancer
        /// [default: none].
        #[arg(long, value_name = "DURATION")]
        pub shutdown_delay: Option<Seconds>
            => Duration = Duration::ZERO, |d| d.0,
        /// HTTP/2: on, offered by ALPN (`h2`, then `http/1.1`) on the TLS listeners and
        /// spoken in clear by a client that opens with its preface (prior knowledge, as
        /// load balancers do); off, every connection is HTTP/1.1; only, every connection
        /// is HTTP/2 (TLS offers `h2` alone; in clear, bytes that are not the preface get
        /// a GOAWAY: an h2c-only port, as a balancer's backend) [default: on].
        #[arg(long, value_name = "on|off|only")]
        pub http2: Option<Http2>
            => linerate_http::request::Http2 = Limits::default().http2, |h| h.0,
        /// Serve dot-files and dot-directories (404 otherwise) [default: false].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        pub dotfiles: Option<bool>
            => bool = false, |b| b,
        /// List directories that have no index file (--index) [default: false].
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
        pub autoindex: Option<bool>
            => bool = false, |b| b,
        /// Names of a directory's index file, tried in order: `/dir/` answers with the
        /// first that is a file there, as nginx's `index` (a name, not a path); repeat or
        /// separate with commas [default: index.html].
        #[arg(long, value_name = "NAME", value_delimiter = ',')]
        #[serde(default)]
        pub index: Vec<IndexName>
            => Vec<String> = vec!["index.html".into()], |n| n.into_iter().map(|n| n.0).collect(),
        /// How entity tags (ETag) are made: mtime (size and modification time, the same
        /// on every instance whose files keep their times), content (a SHA-256 of the
        /// bytes, computed once per file version on a helper thread: the same on every
        /// instance however the files were deployed; none until computed) or off
        /// (Last-Modified alone). Also per [[site]] and [[rule]] [default: mtime].
        #[arg(long, value_name = "MODE")]
        pub etag: Option<EtagMode>
            => EtagMode = EtagMode::Mtime, |m| m,
        /// Precompressed variants to send, in order of preference: FILE.br, FILE.zst,
        /// FILE.gz beside a text file (HTML, CSS, JavaScript, JSON, SVG, ...) go to clients
        /// whose Accept-Encoding takes them, through the transmit strategy like any file
        /// (linerate compress DIR makes them); none: never [default: br,zstd,gzip].
        #[arg(long, value_name = "CODINGS")]
        pub precompressed: Option<Codings>
            => Vec<linerate_http::coding::Coding> = linerate_http::coding::Coding::ALL.to_vec(), |c| c.0,
        /// Access log: stdout, off, or a file to append to; SIGUSR1 reopens a file
        /// [default: stdout].
        #[arg(long, value_name = "stdout|off|FILE")]
        pub access_log: Option<AccessLog>
            => AccessLog = AccessLog::Stdout, |l| l,
        /// Access log lines: clf (Common Log Format), combined (CLF with Referer and
        /// User-Agent), json (ISO 8601 time, method, path, host, status, bytes, duration in
        /// µs, user agent, referer, transmit strategy), or a line of your own with nginx-like
        /// variables: "$remote_addr $host \"$request\" $status $body_bytes_sent
        /// $request_time $http_user_agent $ssl_protocol" (also $request_method,
        /// $request_uri, $protocol, $http_referer, $time_local, $time_iso8601, $msec)
        /// [default: clf].
        #[arg(long, value_name = "clf|combined|json|LINE")]
        pub log_format: Option<LogFormat>
            => LogFormat = LogFormat::Clf, |f| f,
        /// Error log (operational conditions: out of descriptors, permission refused, disk
        /// read errors, cut connections, signals): stderr, off, or a file to append to;
        /// SIGUSR1 reopens a file [default: stderr].
        #[arg(long, value_name = "stderr|off|FILE")]
        pub error_log: Option<ErrorLog>
            => crate::logs::ErrorLog = crate::logs::ErrorLog::Stderr, |l| l,
        /// Least severe error-log lines written: error, warn, info or debug [default: warn].
        #[arg(long, value_name = "LEVEL")]
        pub error_log_level: Option<Level>
            => tracing::Level = tracing::Level::WARN, |l| l.0,
    }

    /// Everything `serve` needs: each key's field, and what the blocks and the start
    /// make of them.
    pub struct Config {
        /// What `steer` came to at the start (or reload), with the workers and CPUs
        /// there were: whether the program is on the listeners.
        pub steering: bool = false,
        /// `auto` chose io_uring: a worker that cannot set up its own ring runs epoll.
        pub driver_fallback: bool = false,
        /// The sites (virtual hosts) of `[[site]]` blocks; none: one site, `root`, for
        /// every Host.
        pub sites: Vec<SiteConfig> = Vec::new(),
        /// `[[rule]]` blocks: per-path settings for every site.
        pub rules: Vec<Rule> = Vec::new(),
    }
}

impl Settings {
    /// Reads a configuration file; an error names the file, and the line, block and
    /// key where it knows them (its `Display` is one line).
    pub fn load(path: &std::path::Path) -> Result<Settings, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::parse(e.to_string()).in_file(path))?;
        Settings::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Parses configuration text.
    pub fn parse(text: &str) -> Result<Settings, ConfigError> {
        let s: Settings = toml::from_str(text).map_err(|e| explain(text, &e))?;
        check_sites(&s.sites)?;
        for r in &s.rules {
            r.to_rule(false)?;
        }
        for (i, site) in s.sites.iter().enumerate() {
            for r in &site.rules {
                r.to_rule(true).map_err(|e| {
                    e.in_block(format_args!("site #{} ({})", i + 1, site.root.display()))
                })?;
            }
        }
        Ok(s)
    }

    /// The keys, in the order of `--help`.
    pub fn keys() -> Vec<String> {
        let cmd = <Settings as clap::Args>::augment_args(clap::Command::new("serve"));
        std::iter::once("root".to_string())
            .chain(
                cmd.get_arguments()
                    .filter_map(|a| a.get_long().map(str::to_string)),
            )
            .collect()
    }

    /// Writes what was given into `cfg` (the rest keeps its default).
    pub fn apply(&self, cfg: &mut Config) {
        self.land(cfg);
        if self.listen.is_empty() && !self.tls_listen.is_empty() {
            // HTTPS alone: the default plain address is not opened beside it.
            cfg.listen.clear();
        }
        let s = self;
        let root_given = s.root.is_some();
        // The blocks: rules for every site, then each site's own over them.
        // Checked by `parse`; a rule that fails here came from no file.
        cfg.rules = s
            .rules
            .iter()
            .filter_map(|r| r.to_rule(false).ok())
            .collect();
        let server_rules = cfg.rules.clone();
        let mut sites: Vec<SiteConfig> = s
            .sites
            .iter()
            .map(|b| SiteConfig {
                rules: {
                    let mut all = server_rules.clone();
                    let access = !b.allow.is_empty() || !b.deny.is_empty();
                    let label = b
                        .names
                        .first()
                        .map_or_else(|| b.root.display().to_string(), |n| n.0.clone());
                    let limit = |l: &crate::limits::LimitSettings, path: &str| {
                        let l = l.checked().ok()?;
                        Some(std::sync::Arc::new(l.of_rule(&label, path)))
                    };
                    if access
                        || b.security_headers.is_some()
                        || b.hsts.is_some()
                        || b.htpasswd.is_some()
                        || b.limit_requests.is_some()
                    {
                        // The site's own `/` rule, before its blocks (which win a tie).
                        all.push(Rule {
                            path: PathMatch::parse("/").ok(),
                            access: access.then(|| Access {
                                allow: b.allow.clone(),
                                deny: b.deny.clone(),
                            }),
                            security_headers: b.security_headers,
                            hsts: b.hsts.map(|a| a.0),
                            htpasswd: b.htpasswd.clone(),
                            limit_requests: (b.limit_requests.as_ref()).and_then(|l| limit(l, "/")),
                            site: true,
                            ..Rule::default()
                        });
                    }
                    let own = b
                        .rules
                        .iter()
                        .filter_map(|r| Some((r, r.to_rule(true).ok()?)));
                    all.extend(own.map(|(settings, mut r)| {
                        if let Some(l) = &settings.limit_requests {
                            r.limit_requests = limit(l, &settings.path.to_string());
                        }
                        r
                    }));
                    crate::rules::sort(&mut all);
                    all
                },
                names: b.names.iter().map(|n| n.0.clone()).collect(),
                tls: b.tls_cert.clone().zip(b.tls_key.clone()),
                acme: b.acme,
                access_log: b.access_log.clone(),
                log_format: b.log_format.clone(),
                root: b.root.clone(),
                default: b.default,
                dotfiles: b.dotfiles.unwrap_or(cfg.dotfiles),
                autoindex: b.autoindex.unwrap_or(cfg.autoindex),
                etag: b.etag.unwrap_or(cfg.etag),
                precompressed: b
                    .precompressed
                    .as_ref()
                    .map_or_else(|| cfg.precompressed.clone(), |c| c.0.clone()),
            })
            .collect();
        // The root (DIR) beside blocks serves what no block names, as the default
        // site (with no blocks, `Config::sites` makes it the only one).
        if !sites.is_empty() && root_given && !sites.iter().any(|x| x.default) {
            let only_root = Config {
                sites: Vec::new(),
                ..cfg.clone()
            };
            sites.extend(only_root.sites());
        }
        cfg.sites = sites;
    }
}

/// The keys of a block as the file spells them (`[[site]]`'s are
/// `keys_of::<SiteSettings>()`), in their declared order: the names serde reads,
/// asked of the type itself (its derived `Deserialize` hands them to the deserializer),
/// so a list made from them cannot fall behind the struct.
pub fn keys_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    /// A deserializer that keeps the field names it is asked for, and reads nothing.
    struct Fields(&'static [&'static str]);

    impl<'de> Deserializer<'de> for &mut Fields {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("a struct's keys only"))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(Self::Error::custom("a struct's keys only"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut f = Fields(&[]);
    let _ = T::deserialize(&mut f);
    f.0
}

/// A TOML error with where it is: the line, and the key when the error points into a
/// `key = value` line (serde's own messages, such as "data did not match any variant",
/// name no key).
fn explain(text: &str, e: &toml::de::Error) -> ConfigError {
    let msg = e.message().trim_end().replace('\n', " ");
    let mut err = ConfigError::parse(msg.clone());
    if let Some(reason) = unknown_key(&msg) {
        err.reason = reason;
    }
    let Some(span) = e.span() else {
        return err;
    };
    let line_no = text[..span.start.min(text.len())].matches('\n').count() + 1;
    err.line = Some(line_no);
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    if let Some((key, _)) = line.split_once('=') {
        let key = key.trim().trim_matches('"');
        if !key.is_empty() && !key.starts_with('[') {
            err.key = Some(key.to_string());
        }
    }
    err
}

/// serde's "unknown field `x`, expected one of `a`, `b`, …" as an unknown key with the
/// nearest one when one is close (as clap says for a flag), else with the list.
fn unknown_key(msg: &str) -> Option<Reason> {
    let rest = msg.strip_prefix("unknown field `")?;
    let (typed, expected) = rest.split_once('`')?;
    let keys = expected.split('`').skip(1).step_by(2);
    let nearest = keys
        .map(|k| (strsim::jaro(typed, k), k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.to_string());
    Some(Reason::UnknownKey {
        typed: typed.to_string(),
        nearest,
        expected: expected.trim_end().to_string(),
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod contrib;

#[cfg(test)]
mod snapshot;
