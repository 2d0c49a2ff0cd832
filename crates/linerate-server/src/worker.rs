//! Workers: one thread per CPU, each with its own listeners (`SO_REUSEPORT`), event
//! loop, open-file cache and connections. Listeners are bound before any worker starts,
//! so a bad address fails the start, not a worker.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::compress_cache::{Compressor, Store};
use crate::config::Endpoint;
use crate::config::{AccessLog, Config, LogFormat, SiteConfig};
use crate::conn::{Aborted, After, Conn, Cut};
use crate::control::{Control, Request as ControlRequest};
use crate::disk::{self, Disk, Inbox, Job};
use crate::files::FileCache;
use crate::listen::{bind_all, hand_out, status_line, BindError, Bound, Kind, Listener, Peer};
use crate::logs::{more, AccessLines, AccessTarget, LogFile, RateLimit};
use crate::response::Response;
use crate::site::{Host, Site};
use crate::stats::{Board, Earlier, Stats};
use linerate_event::{
    Driver, DriverChoice, EpollDriver, Interest, Io, Ready, Tick, Timers, UringDriver,
};

/// Why the server could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The document root.
    #[error("the root {}", path.display())]
    Root {
        /// The path given.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A listen address.
    #[error("cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: Endpoint,
        /// Why.
        source: io::Error,
    },
    /// A log file.
    #[error("{what} {}", path.display())]
    Log {
        /// Which log.
        what: &'static str,
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
    /// `--user`: no such user, or root could not be given up for it.
    #[error("--user {name}: {reason}")]
    User {
        /// The name given.
        name: String,
        /// Why.
        reason: String,
    },
    /// `--driver uring` where io_uring cannot run.
    #[error("{0}")]
    Driver(String),
    /// The TLS certificate or key.
    #[error("{0}")]
    Tls(String),
    /// The compression cache's directory.
    #[error("compress-cache {}", path.display())]
    CompressCache {
        /// The path.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Anything else.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<BindError> for ServeError {
    fn from(e: BindError) -> ServeError {
        match e.addr {
            Some(addr) => ServeError::Listen {
                addr,
                source: e.source,
            },
            None => ServeError::Io(e.source),
        }
    }
}

/// Each site's settings and its open root directory.
type Roots = Vec<(SiteConfig, std::fs::File)>;

/// Opens the root of every site of `cfg`. Never blocks: a FIFO or a device given as a
/// root fails here at once.
fn open_roots(cfg: &Config) -> Result<Roots, ServeError> {
    cfg.sites()
        .into_iter()
        .map(|s| match linerate_sys::fs::open_directory(&s.root) {
            Ok(f) => Ok((s, f)),
            Err(source) => Err(ServeError::Root {
                path: s.root.clone(),
                source,
            }),
        })
        .collect()
}

/// The user `--user` names, or why not.
fn looked_up(name: &str) -> Result<linerate_sys::user::User, ServeError> {
    let fail = |reason: String| ServeError::User {
        name: name.to_string(),
        reason,
    };
    linerate_sys::user::lookup(name)
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("no such user".into()))
}

/// The user and group `--user` names, when the server is root and will become them.
fn serving_user(cfg: &Config) -> Result<Option<(u32, u32)>, ServeError> {
    match &cfg.user {
        Some(name) if linerate_sys::ns::effective_uid() == 0 => {
            let user = looked_up(name)?;
            Ok(Some((user.uid, user.gid)))
        }
        _ => Ok(None),
    }
}

/// Gives up root for `cfg.user` (see [`linerate_sys::user::become_user`]); as root
/// without it, a warning.
fn drop_privileges(cfg: &Config) -> Result<(), ServeError> {
    let Some(name) = &cfg.user else {
        if linerate_sys::ns::effective_uid() == 0 {
            tracing::warn!("running as root: --user NAME gives root up once the sockets are bound");
        }
        return Ok(());
    };
    let user = looked_up(name)?;
    let fail = |reason: String| ServeError::User {
        name: name.clone(),
        reason,
    };
    linerate_sys::user::become_user(&user).map_err(|e| fail(e.to_string()))?;
    tracing::info!(
        "serving as {} (uid {}, gid {})",
        user.name,
        user.uid,
        user.gid
    );
    Ok(())
}

const TICK: Duration = Duration::from_millis(100);

/// Slots of the deadline wheel: 1,024 ticks of 100 ms, 102 s to a round, longer than
/// the default timeouts, so an entry is looked at once, when it is due.
const TIMER_SLOTS: usize = 1024;

/// How often a connection's deadline is looked at, at least: the shortest timeout a
/// state can start with. (The drain's, shorter, starts once a connection's life: its
/// entry is the one earlier move that costs a second entry.)
fn check_every(cfg: &Config) -> Duration {
    [
        cfg.header_timeout,
        cfg.body_timeout,
        cfg.send_timeout,
        cfg.idle_timeout,
    ]
    .into_iter()
    .min()
    .unwrap_or(DRAIN)
    .max(TICK)
}

/// When a connection's deadline passes, and what that means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Deadline {
    at: Instant,
    /// How its responses not sent are logged.
    cut: Cut,
    /// The error-log line (empty: none).
    why: &'static str,
    /// The kind of timeout counted: an index of `TIMEOUT_KINDS`.
    kind: Option<usize>,
}

/// `t` later by `d`, or as late as it gets.
fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .unwrap_or_else(|| t + Duration::from_secs(1 << 32))
}

/// The deadline that applies to `c` in the state it is in: the drain's while its
/// input is drained; else the body's, if a body is awaited with nothing owed, or the
/// state's, whichever comes first (send progress while a response is in flight, the
/// handshake or the head within the header timeout, the idle timeout between
/// requests, a body being skipped no byte within the header timeout).
/// A connection's token with the driver and the timers (made from its slot and serial,
/// not kept: an idle connection is kept small).
fn token_of(c: &Conn) -> u64 {
    Token::conn(c.slot as usize, u64::from(c.serial)).encode()
}

fn deadline(c: &Conn, cfg: &Config) -> Deadline {
    let d = |at, cut, why, kind| Deadline { at, cut, why, kind };
    if let Some(s) = c.draining_since {
        return d(after(s, DRAIN), Cut::Client, "", None);
    }
    let state = if c.waits() && !c.busy() {
        // A request waiting for its password check: the helpers' queue is bounded, but
        // not its time under a flood.
        d(
            after(c.last_activity, cfg.send_timeout),
            Cut::Client,
            "password check not made within --send-timeout",
            Some(2),
        )
    } else if c.slow() {
        d(
            c.rate_clock().unwrap_or(c.last_activity),
            Cut::SlowClient,
            "the client took less than --min-send-rate over --send-timeout",
            Some(2),
        )
    } else if c.busy() {
        let send = d(
            after(c.send_clock(), cfg.send_timeout),
            Cut::SendTimeout,
            "no send progress within --send-timeout",
            Some(2),
        );
        // The rate is judged at the end of each window (then, if the client took
        // enough, a new one starts: the deadline moves on).
        match c.rate_clock().filter(|_| cfg.min_send_rate > 0) {
            Some(r) if after(r, cfg.send_timeout) < send.at => Deadline {
                at: after(r, cfg.send_timeout),
                ..send
            },
            _ => send,
        }
    } else if let Some(p) = c.proxy_since() {
        d(
            after(p, cfg.header_timeout),
            Cut::Client,
            "PROXY protocol header not whole within --header-timeout",
            Some(0),
        )
    } else if let Some(h) = c.handshake_since() {
        d(
            after(h, cfg.header_timeout),
            Cut::Client,
            "TLS handshake not done within --header-timeout",
            Some(0),
        )
    } else if let Some(h) = c.http.head_started() {
        d(
            after(h, cfg.header_timeout),
            Cut::Client,
            "request head not whole within --header-timeout",
            Some(0),
        )
    } else if c.is_idle() {
        d(
            after(c.last_activity, cfg.idle_timeout),
            Cut::Client,
            "",
            Some(1),
        )
    } else {
        d(
            after(c.last_activity, cfg.header_timeout),
            Cut::BodyTimeout,
            "no request body byte within --header-timeout",
            Some(3),
        )
    };
    match c.body_clock.map(|b| after(b, cfg.body_timeout)) {
        Some(at) if at <= state.at => d(
            at,
            Cut::BodyTimeout,
            "request body not whole within --body-timeout",
            Some(3),
        ),
        _ => state,
    }
}

/// What a registration's token names: its kind in the top two bits, then an index;
/// a connection's token also carries its serial's low 30 bits, so an event meant for
/// a connection that has since closed never reaches the next one in its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    /// Connection slot, and the serial's low bits.
    Conn(usize, u32),
    /// Listener index.
    Listener(usize),
    /// Site i's inotify descriptor.
    Notify(usize),
    /// The eventfd the disk helpers wake the worker with.
    Wake,
}

impl Token {
    const KIND_SHIFT: u32 = 62;
    const SERIAL_BITS: u32 = 30;
    const INDEX_MASK: u64 = (1 << 32) - 1;

    fn conn(slot: usize, serial: u64) -> Token {
        Token::Conn(slot, (serial & ((1 << Self::SERIAL_BITS) - 1)) as u32)
    }

    fn encode(self) -> u64 {
        match self {
            Token::Conn(slot, serial) => (u64::from(serial) << 32) | slot as u64,
            Token::Listener(i) => (1 << Self::KIND_SHIFT) | i as u64,
            Token::Notify(i) => (2 << Self::KIND_SHIFT) | i as u64,
            Token::Wake => 3 << Self::KIND_SHIFT,
        }
    }

    fn decode(t: u64) -> Token {
        let index = (t & Self::INDEX_MASK) as usize;
        match t >> Self::KIND_SHIFT {
            0 => Token::Conn(index, (t >> 32) as u32),
            1 => Token::Listener(index),
            2 => Token::Notify(index),
            _ => Token::Wake,
        }
    }
}
/// How long input is drained after our side shut down.
const DRAIN: Duration = Duration::from_secs(2);
/// At a stop or reload, how long a connection that has had no request yet is given
/// for its first (at most the header timeout).
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);
/// How long accepting pauses after EMFILE/ENFILE.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Descriptors kept back from the open-file caches' share for what each worker holds
/// besides connections and cached files (epoll, inotify, eventfd, its listeners) and
/// what the process holds once (standard streams, logs, the root, the helpers'
/// `/dev/null`).
fn fixed_descriptors(cfg: &Config) -> u64 {
    let workers = cfg.workers.max(1) as u64;
    // Per worker and site: its root and its inotify instance.
    let sites = cfg.sites.len().max(1) as u64;
    8 + workers * (4 + cfg.listen.len() as u64 + 2 * sites) + cfg.disk_helpers as u64
}

/// Raises the soft descriptor limit to the hard one and sizes each worker's open-file
/// cache from its share of it: half of what is left after [`fixed_descriptors`], split
/// among the workers, so cached files can never take the descriptors connections need
/// (the other half; a cache that meets `EMFILE` anyway empties itself and retries).
fn size_for_descriptors(cfg: &mut Config) {
    let (soft, hard) = match linerate_sys::fs::raise_nofile_limit() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot raise the descriptor limit: {e}");
            linerate_sys::fs::nofile_limit().unwrap_or((1024, 1024))
        }
    };
    let share = soft.saturating_sub(fixed_descriptors(cfg)) / 2 / cfg.workers.max(1) as u64;
    let entries = (cfg.open_file_cache_entries as u64).min(share.max(16)) as usize;
    if entries < cfg.open_file_cache_entries {
        tracing::info!(
            "open-file cache: {entries} entries per worker (asked {}), its share of {soft} descriptors",
            cfg.open_file_cache_entries
        );
        cfg.open_file_cache_entries = entries;
    }
    if soft < LOW_DESCRIPTOR_LIMIT {
        tracing::warn!(
            "only {soft} descriptors (hard limit {hard}): each connection and each cached file takes one; raise the hard limit (ulimit -Hn, systemd's LimitNOFILE=) to serve more than a few hundred connections"
        );
    }
}

/// Below this many descriptors the start says the limit is low.
const LOW_DESCRIPTOR_LIMIT: u64 = 4096;

/// How often the main thread looks at the signal flags and the workers.
const CONTROL_POLL: Duration = Duration::from_millis(50);

/// How a generation's workers are told to end.
#[derive(Debug, Default)]
struct Ending {
    /// Set: no new work is taken; what is in flight finishes (up to the shutdown
    /// timeout), and the workers end.
    now: AtomicBool,
    /// Set with `now` by a reload, cleared by a stop: connections are not closed while
    /// idle (a request may be on its way on them; its client would have to send it
    /// again) but answer their next request with `Connection: close`, or end at their
    /// idle deadline or the shutdown deadline.
    gently: AtomicBool,
}

impl Ending {
    /// A reload retires the generation.
    fn retire(&self) {
        self.gently.store(true, Ordering::Relaxed);
        // Release: a worker that sees `now` sees `gently` as it was set before it.
        self.now.store(true, Ordering::Release);
    }

    /// The server stops: idle connections end now.
    fn stop(&self) {
        self.gently.store(false, Ordering::Relaxed);
        self.now.store(true, Ordering::Release);
    }
}

/// One generation of workers: the settings of the start or of one reload.
struct Generation<'scope> {
    /// Its workers end (gracefully) when this says so.
    stop: Arc<Ending>,
    /// Its workers that still accept connections (each counts itself out when it has
    /// let go of its listeners).
    accepting: Arc<std::sync::atomic::AtomicUsize>,
    handles: Vec<std::thread::ScopedJoinHandle<'scope, io::Result<()>>>,
    /// Its access-log files (the server's and the sites' own), open once for all its
    /// workers.
    log_files: Vec<Arc<LogFile>>,
    /// Its compression cache.
    compress: Option<Arc<Store>>,
    /// Reloads before it (0: the start).
    number: u64,
    /// Its workers' counters.
    stats: Arc<[Arc<Stats>]>,
    /// Its settings' `shutdown-delay`.
    shutdown_delay: Duration,
}

/// A worker's place in its generation's count of workers still accepting: given up
/// once, when the worker lets go of its listeners or when it ends, whichever way (a
/// worker that ends at once, with no connection to drain, has let go too).
struct CountedIn(Option<Arc<std::sync::atomic::AtomicUsize>>);

impl CountedIn {
    fn out(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for CountedIn {
    fn drop(&mut self) {
        self.out();
    }
}

impl Generation<'_> {
    fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    fn any_finished(&self) -> bool {
        self.handles.iter().any(|h| h.is_finished())
    }

    /// Waits for the workers; the first error any of them met.
    fn join(self) -> Result<(), ServeError> {
        let mut first = Ok(());
        for h in self.handles {
            let r = match h.join() {
                Ok(r) => r.map_err(ServeError::Io),
                Err(_) => Err(ServeError::Io(io::Error::other("a worker panicked"))),
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Settings of the start that a reload cannot change (a warning says so).
struct Fixed {
    error_log: crate::logs::ErrorLog,
    error_log_level: tracing::Level,
    user: Option<String>,
}

/// What every generation shares: the helpers' queue, the CPUs, and the counters of
/// the generations before.
struct Shared<'a> {
    jobs: Option<&'a std::sync::mpsc::Sender<Job>>,
    cpus: &'a [usize],
    earlier: Arc<Earlier>,
    /// A stop has begun: the health path answers 503.
    draining: Arc<AtomicBool>,
    /// The compression cache's thread.
    compressor: &'a Compressor,
    /// The content digests' thread (`etag = "content"`).
    digests: &'a Arc<crate::digest::Digests>,
    /// The password checks' threads (`htpasswd`).
    checker: &'a Arc<crate::auth::Checker>,
    /// The ACME certificates and challenges.
    acme: &'a Arc<crate::acme::Acme>,
}

/// What a worker hands work to: the disk helpers, the compression cache, the content
/// digests' thread.
struct Helpers {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    compress: Option<Arc<Store>>,
    digests: Arc<crate::digest::Digests>,
    checker: Arc<crate::auth::Checker>,
}

/// Gives up the digests queued however the scope their thread runs in ends.
struct StopDigests<'a>(&'a crate::digest::Digests);

impl Drop for StopDigests<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Stops the ACME thread however the scope it runs in ends.
struct StopAcme<'a>(&'a crate::acme::Acme);

impl Drop for StopAcme<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Stops the compressor (the job under way, and those queued) however the scope it
/// runs in ends.
struct StopCompressor<'a>(&'a Compressor);

impl Drop for StopCompressor<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// The ACME plan of `cfg`, its directory made (owned by `owner`) and its stored
/// certificates read; or why not.
fn acme_plan(cfg: &Config, owner: Option<(u32, u32)>) -> Result<Option<crate::acme::Plan>, String> {
    let plan = crate::acme::Plan::of(cfg)?;
    if plan.is_some() {
        crate::acme::prepare(&cfg.acme.dir, owner)
            .map_err(|e| format!("acme-dir {}: {e}", cfg.acme.dir.display()))?;
    }
    Ok(plan)
}

/// What a generation opened before its workers start: its access-log files and its
/// compression cache.
struct Opened {
    log_files: Vec<Arc<LogFile>>,
    compress: Option<Arc<Store>>,
}

/// The compression cache of `cfg`: `current`'s when it is the same directory (its size
/// set anew), else opened.
fn compress_store(
    cfg: &Config,
    compressor: &Compressor,
    current: Option<&Arc<Store>>,
) -> Result<Option<Arc<Store>>, ServeError> {
    let Some(dir) = &cfg.compress_cache else {
        return Ok(None);
    };
    if let Some(s) = current.filter(|s| s.dir() == dir.as_path()) {
        s.set_limit(cfg.compress_cache_size);
        return Ok(Some(Arc::clone(s)));
    }
    let fail = |source| ServeError::CompressCache {
        path: dir.clone(),
        source,
    };
    crate::compress_cache::prepare(dir, None).map_err(fail)?;
    let s = Store::open(dir, cfg.compress_cache_size, compressor).map_err(fail)?;
    tracing::info!(
        "compress-cache: {} (at most {} bytes)",
        dir.display(),
        cfg.compress_cache_size
    );
    Ok(Some(s))
}

/// Starts a generation's workers on `listeners` (one list per worker).
fn start_generation<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    cfg: Arc<Config>,
    roots: &Roots,
    listeners: Vec<Vec<Listener>>,
    opened: Opened,
    shared: &Shared<'_>,
    number: u64,
) -> io::Result<Generation<'scope>> {
    let Opened {
        log_files,
        compress,
    } = opened;
    let stop = Arc::new(Ending::default());
    let accepting = Arc::new(std::sync::atomic::AtomicUsize::new(listeners.len()));
    let board = Board {
        workers: (0..listeners.len()).map(|_| Arc::default()).collect(),
        earlier: Arc::clone(&shared.earlier),
        draining: Arc::clone(&shared.draining),
        compress: Arc::clone(&shared.compressor.counters),
        acme: cfg
            .sites()
            .iter()
            .any(|s| s.acme)
            .then(|| Arc::clone(shared.acme)),
    };
    // Everything that can fail is done before the first thread starts, so a failure
    // leaves no worker running that nobody will stop.
    let roots = (0..listeners.len())
        .map(|_| {
            roots
                .iter()
                .map(|(s, f)| Ok((s.clone(), OwnedFd::from(f.try_clone()?))))
                .collect::<io::Result<Vec<_>>>()
        })
        .collect::<io::Result<Vec<_>>>()?;
    let mut handles = Vec::new();
    for ((i, listeners), root) in listeners.into_iter().enumerate().zip(roots) {
        let jobs = if cfg.disk_helpers > 0 {
            shared.jobs.cloned()
        } else {
            None
        };
        let stats = (Arc::clone(&board.workers[i]), board.clone());
        let cfg = Arc::clone(&cfg);
        let cpu = shared.cpus[i % shared.cpus.len()];
        let stop = Arc::clone(&stop);
        let mut counted = CountedIn(Some(Arc::clone(&accepting)));
        let log_files = log_files.clone();
        let helpers = Helpers {
            jobs,
            compress: compress.clone(),
            digests: Arc::clone(shared.digests),
            checker: Arc::clone(shared.checker),
        };
        handles.push(scope.spawn(move || -> io::Result<()> {
            // Best effort: a restricted affinity mask is not fatal.
            let pinned =
                (cfg.pin && linerate_sys::cpu::pin_thread_to_cpu(cpu).is_ok()).then_some(cpu);
            match cfg.driver {
                DriverChoice::Uring => match UringDriver::new() {
                    Ok(driver) => {
                        Worker::new(driver, cfg, root, listeners, &log_files, helpers, stats)?
                            .pinned_to(pinned)
                            .run(&stop, &mut counted)
                    }
                    // The probe at the start passed, but this worker's ring cannot be
                    // made (locked-memory limits on older kernels, say).
                    Err(e) if cfg.driver_fallback => {
                        tracing::warn!(
                            "driver auto: a worker cannot set up io_uring ({e}); it runs epoll"
                        );
                        let driver = EpollDriver::new()?;
                        Worker::new(driver, cfg, root, listeners, &log_files, helpers, stats)?
                            .pinned_to(pinned)
                            .run(&stop, &mut counted)
                    }
                    Err(e) => Err(e),
                },
                DriverChoice::Epoll | DriverChoice::Auto => {
                    let driver = EpollDriver::new()?;
                    Worker::new(driver, cfg, root, listeners, &log_files, helpers, stats)?
                        .pinned_to(pinned)
                        .run(&stop, &mut counted)
                }
            }
        }));
    }
    Ok(Generation {
        stop,
        accepting,
        handles,
        log_files,
        compress,
        number,
        stats: board.workers,
        shutdown_delay: cfg.shutdown_delay,
    })
}

/// The access-log files of `cfg` (the server's and the sites' own, each path once): a
/// file already open when the path is the same.
fn open_access_logs(cfg: &Config, open: &[Arc<LogFile>]) -> Result<Vec<Arc<LogFile>>, ServeError> {
    let mut files: Vec<Arc<LogFile>> = Vec::new();
    for p in cfg.access_log_paths() {
        if let Some(f) = open.iter().find(|f| f.path() == p.as_path()) {
            files.push(Arc::clone(f));
            continue;
        }
        let f = LogFile::open(&p).map_err(|source| ServeError::Log {
            what: "access log",
            path: p,
            source,
        })?;
        files.push(Arc::new(f));
    }
    Ok(files)
}

/// Serves `cfg` until `control` says stop; then finishes in-flight responses (up to the
/// shutdown timeout) and returns. `on_listen` hears each bound address once, with the
/// settings it serves first. On
/// `SIGHUP`, `reload` gives the settings to serve from then on (or why not, in one
/// line): a new generation of workers starts on the same listening sockets, and the
/// old one finishes what it has in flight and ends (docs/operations.md).
pub fn serve(
    mut cfg: Config,
    control: &Control,
    on_listen: &dyn Fn(&Endpoint, Kind, &Config),
    reload: &dyn Fn() -> Result<Config, String>,
) -> Result<(), ServeError> {
    // A splice or sendfile to a peer that has gone raises SIGPIPE (they take no
    // MSG_NOSIGNAL): ignored for the process, whoever embeds the server.
    linerate_sys::ignore_sigpipe();
    let roots = open_roots(&cfg)?;
    // The error log first, so what follows can be reported.
    let error_log =
        crate::logs::install_error_log(&cfg.error_log, cfg.error_log_level).map_err(|source| {
            ServeError::Log {
                what: "error log",
                path: match &cfg.error_log {
                    crate::logs::ErrorLog::File(p) => p.clone(),
                    _ => PathBuf::new(),
                },
                source,
            }
        })?;
    size_for_descriptors(&mut cfg);
    cfg.driver_fallback = cfg.driver == DriverChoice::Auto;
    cfg.driver = cfg.driver.resolve().map_err(ServeError::Driver)?;
    tracing::info!("event loop: {}", cfg.driver);
    // The ACME directory is made for the user the server becomes, and the certificates
    // stored there serve from the first handshake.
    let acme = Arc::new(crate::acme::Acme::default());
    acme.install(acme_plan(&cfg, serving_user(&cfg)?).map_err(ServeError::Tls)?);
    // Read while the server may still be root (a key is often readable by root only).
    let tls = crate::tls::load_with(&cfg, Some(&acme)).map_err(ServeError::Tls)?;
    tracing::info!(
        "small files: up to {} bytes each, {} bytes in all per worker",
        cfg.small_file_bytes,
        cfg.small_file_memory_bytes()
    );
    // Every listener of every worker is bound now, before anything is announced; or
    // systemd passed them (socket activation).
    let mut fresh: Vec<Endpoint> = Vec::new();
    // Sockets of one address come as a group (the process before had one per worker):
    // one endpoint, each socket handed to one worker, as they were there.
    let mut activated: Vec<Bound> = Vec::new();
    for (l, kind) in crate::systemd::activated_listeners()? {
        let b = Bound::passed(l, cfg.sndbuf, kind)?;
        match activated.iter_mut().find(|a| a.addr == b.addr) {
            Some(a) => a.sockets.extend(b.sockets),
            None => activated.push(b),
        }
    }
    if !activated.is_empty() {
        tracing::info!(
            "socket activation: serving on the {} socket(s) passed ({} address(es)); listen is not used",
            activated.iter().map(|b| b.sockets.len()).sum::<usize>(),
            activated.len()
        );
        fresh.extend(activated.iter().map(|b| b.addr.clone()));
    }
    let mut bound = bind_all(&cfg, &activated, &mut |a| fresh.push(a.clone()))?;
    drop(activated);
    // The log opens after the binds (a port in use creates no log file) and before
    // any address is announced (a start that fails names none).
    let log_files = open_access_logs(&cfg, &[])?;
    // Made while the server may still be root, for the user it will serve as.
    if let Some(dir) = &cfg.compress_cache {
        crate::compress_cache::prepare(dir, serving_user(&cfg)?).map_err(|source| {
            ServeError::CompressCache {
                path: dir.clone(),
                source,
            }
        })?;
    }
    // Root is given up before any thread starts, with everything that needs it done.
    drop_privileges(&cfg)?;
    if control.stopping() {
        return Ok(());
    }
    // Workers are pinned within the CPUs this process may use (taskset, cgroups).
    let cpus = linerate_sys::cpu::allowed_cpus()
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| vec![0]);
    // Steered before any address is announced: no connection comes by the hash first.
    cfg.steering = cfg.steer.active(cfg.pin, cfg.workers.max(1), cpus.len());
    crate::listen::steer(&bound, cfg.steering, cfg.workers, &cpus);
    say_not_steering(&cfg, cpus.len());
    // Inherited sockets (one per worker of the process before) share their address.
    fresh.dedup();
    for a in &fresh {
        let kind = bound
            .iter()
            .find(|b| &b.addr == a)
            .map_or(Kind::Plain, |b| b.kind);
        on_listen(a, kind, &cfg);
    }
    let helpers = cfg.disk_helpers;
    let fixed = Fixed {
        error_log: cfg.error_log.clone(),
        error_log_level: cfg.error_log_level,
        user: cfg.user.clone(),
    };
    std::thread::scope(|scope| -> Result<(), ServeError> {
        // The helpers serve every generation; they end when the last sender is gone.
        let jobs = (helpers > 0).then(|| disk::start_helpers(scope, helpers));
        let compressor = Compressor::start(scope);
        let digests = crate::digest::Digests::start(scope);
        let checker = crate::auth::Checker::start(scope);
        let _stop_acme = StopAcme(&acme);
        let _stop_compressor = StopCompressor(&compressor);
        let _stop_digests = StopDigests(&digests);
        {
            let acme = &acme;
            scope.spawn(move || acme.run());
        }
        let shared = Shared {
            jobs: jobs.as_ref(),
            cpus: &cpus,
            earlier: Arc::default(),
            draining: Arc::default(),
            compressor: &compressor,
            digests: &digests,
            checker: &checker,
            acme: &acme,
        };
        let per = hand_out(&bound, &cfg, tls.as_ref())?;
        let workers = per.len();
        let opened = Opened {
            log_files,
            compress: compress_store(&cfg, &compressor, None)?,
        };
        let mut current = start_generation(scope, Arc::new(cfg), &roots, per, opened, &shared, 0)?;
        crate::systemd::ready(&status_line(&bound, workers));
        let mut told_stopping = false;
        // When a stop asked for proceeds: at once, or after the shutdown delay.
        let mut stop_at: Option<Instant> = None;
        // Processes started by SIGUSR2, reaped if they end first.
        let mut upgrades: Vec<std::process::Child> = Vec::new();
        let mut retiring: Vec<Generation<'_>> = Vec::new();
        let mut result = Ok(());
        // The operator's signals are answered here, between looks at the workers; a
        // worker that ends before a stop was asked for (an error) stops the others, so
        // the process ends and says why instead of serving on with fewer workers.
        loop {
            let stopping = control.stopping();
            if stopping && !told_stopping {
                crate::systemd::stopping();
                told_stopping = true;
                // The health path answers 503 from now; the listeners stay open for
                // the delay, so a balancer's checks see the drain first.
                shared.draining.store(true, Ordering::Relaxed);
                let delay = current.shutdown_delay;
                if !delay.is_zero() {
                    tracing::info!(
                        "stopping in {:?} (shutdown-delay): the health path answers 503",
                        delay
                    );
                }
                stop_at = Some(Instant::now() + delay);
            }
            if stopping && stop_at.is_some_and(|t| Instant::now() >= t) {
                // The workers' copies are the last: the kernel refuses new connections
                // once they let go. A Unix socket's file goes now, so no client finds
                // it while it drains.
                for b in bound.drain(..) {
                    b.remove_file();
                }
                current.stop.stop();
                for g in &retiring {
                    g.stop.stop();
                }
                shared.compressor.stop();
                shared.digests.stop();
                shared.acme.stop();
            }
            for r in control.take() {
                match r {
                    ControlRequest::Reload if !stopping => {
                        crate::systemd::reloading();
                        let next = reload_generation(
                            scope, reload, &current, &mut bound, &shared, &fixed, on_listen,
                        );
                        match next {
                            Ok(next) => {
                                let old = std::mem::replace(&mut current, next);
                                old.stop.retire();
                                // Requests from now on are the new settings': wait
                                // (a tick at most) until every old worker has let go
                                // (one that ended has too).
                                let deadline = Instant::now() + Duration::from_secs(2);
                                while old.accepting.load(Ordering::Relaxed) > 0
                                    && Instant::now() < deadline
                                {
                                    std::thread::sleep(Duration::from_millis(2));
                                }
                                tracing::info!(
                                    target: crate::logs::NOTICE,
                                    "SIGHUP: reloaded (generation {}); the workers before finish what they have in flight",
                                    current.number
                                );
                                retiring.push(old);
                            }
                            Err(e) => {
                                tracing::error!("SIGHUP: {e}; serving on with the settings before")
                            }
                        }
                        crate::systemd::ready(&status_line(&bound, current.handles.len()));
                    }
                    ControlRequest::Reload => {}
                    ControlRequest::Upgrade if !stopping => {
                        let sockets: Vec<(&socket2::Socket, Kind)> = bound
                            .iter()
                            .flat_map(|b| b.sockets.iter().map(move |s| (s, b.kind)))
                            .collect();
                        match crate::systemd::upgrade(&sockets) {
                            Ok(child) => {
                                // Its socket files are the new process's now.
                                bound.iter_mut().for_each(Bound::handed_over);
                                tracing::warn!(
                                    "SIGUSR2: started the binary again as PID {} on the same listening sockets; this process serves on until it is stopped (SIGQUIT)",
                                    child.id()
                                );
                                upgrades.push(child);
                                // The new process orders and answers challenges
                                // from now on: two would split a validation.
                                if shared.acme.planned() {
                                    tracing::warn!("SIGUSR2: ACME is the new process's now; this one renews nothing");
                                }
                                shared.acme.stop();
                            }
                            Err(e) => tracing::error!(
                                "SIGUSR2: cannot start the binary again: {e}; serving on"
                            ),
                        }
                    }
                    ControlRequest::Upgrade => {}
                    r => {
                        let mut logs: Vec<&LogFile> = Vec::new();
                        for f in std::iter::once(&current)
                            .chain(&retiring)
                            .flat_map(|g| g.log_files.iter().map(|f| &**f))
                            .chain(error_log.as_deref())
                        {
                            if !logs.iter().any(|l| std::ptr::eq(*l, f)) {
                                logs.push(f);
                            }
                        }
                        answer(r, &logs);
                    }
                }
            }
            upgrades.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
            // Generations that finished their drain are joined.
            let (done, left): (Vec<_>, Vec<_>) = retiring.into_iter().partition(|g| g.finished());
            retiring = left;
            for g in done {
                shared.earlier.ended(&g.stats);
                if let Err(e) = g.join() {
                    tracing::error!("a worker of an earlier generation ended with: {e}");
                }
            }
            if current.finished() && retiring.is_empty() {
                break;
            }
            if !control.stopping() && current.any_finished() {
                tracing::error!("a worker ended unasked; stopping the others");
                control.stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(CONTROL_POLL);
        }
        if let Err(e) = current.join() {
            result = Err(e);
        }
        result
    })
}

/// One info line when `--steer` asks for steering that these workers and CPUs do not
/// allow.
fn say_not_steering(cfg: &Config, cpus: usize) {
    if cfg.steer != crate::config::Steer::Off && !cfg.steering {
        tracing::info!(
            "--steer {}: not steering ({} workers on {cpus} CPUs{})",
            cfg.steer,
            cfg.workers,
            if cfg.pin { "" } else { ", not pinned" }
        );
    }
}

/// A new generation from the settings `reload` gives, on the sockets of `bound`
/// (which it extends with any new address); or why not, in one line.
fn reload_generation<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    reload: &dyn Fn() -> Result<Config, String>,
    current: &Generation<'scope>,
    bound: &mut Vec<Bound>,
    shared: &Shared<'_>,
    fixed: &Fixed,
    on_listen: &dyn Fn(&Endpoint, Kind, &Config),
) -> Result<Generation<'scope>, String> {
    let mut cfg = reload()?;
    size_for_descriptors(&mut cfg);
    cfg.driver_fallback = cfg.driver == DriverChoice::Auto;
    cfg.driver = cfg.driver.resolve()?;
    let roots = open_roots(&cfg).map_err(|e| describe(&e))?;
    let tls = crate::tls::load_with(&cfg, Some(shared.acme))?;
    let acme_plan = acme_plan(&cfg, None)?;
    let log_files = open_access_logs(&cfg, &current.log_files).map_err(|e| describe(&e))?;
    let compress = compress_store(&cfg, shared.compressor, current.compress.as_ref())
        .map_err(|e| describe(&e))?;
    if (&cfg.error_log, cfg.error_log_level) != (&fixed.error_log, fixed.error_log_level) {
        tracing::warn!("SIGHUP: error-log and error-log-level take effect at the next start");
    }
    if cfg.user != fixed.user {
        tracing::warn!("SIGHUP: user takes effect at the next start");
    }
    if cfg.disk_helpers > 0 && shared.jobs.is_none() {
        tracing::warn!(
            "SIGHUP: the server started without disk helpers; they take effect at the next start"
        );
    }
    // From here the old generation's counters are the earlier ones (counted once
    // whichever generation is asked).
    shared.earlier.retire(&current.stats);
    let mut fresh = Vec::new();
    let next = bind_all(&cfg, bound, &mut |a| fresh.push(a.clone()))
        .map_err(|e| describe(&ServeError::from(e)))?;
    let per = hand_out(&next, &cfg, tls.as_ref()).map_err(|e| e.to_string())?;
    cfg.steering = cfg
        .steer
        .active(cfg.pin, cfg.workers.max(1), shared.cpus.len());
    say_not_steering(&cfg, shared.cpus.len());
    let steer = (cfg.steering, cfg.workers);
    let fresh: Vec<(Endpoint, Kind)> = fresh
        .into_iter()
        .map(|a| {
            let kind = next
                .iter()
                .find(|b| b.addr == a)
                .map_or(Kind::Plain, |b| b.kind);
            (a, kind)
        })
        .collect();
    let cfg = Arc::new(cfg);
    let generation = start_generation(
        scope,
        Arc::clone(&cfg),
        &roots,
        per,
        Opened {
            log_files,
            compress,
        },
        shared,
        current.number + 1,
    )
    .map_err(|e| e.to_string())?;
    // Its challenges and orders from now on, not before (a reload refused above leaves
    // the ACME thread on the settings before, which the workers still answer).
    shared.acme.install(acme_plan);
    // The new workers serve: connections go the new generation's way (a reload
    // refused before this leaves the program as it was).
    crate::listen::steer(&next, steer.0, steer.1, shared.cpus);
    // Addresses no longer configured close once the old workers let go of them; a
    // Unix socket's file goes at once.
    for b in bound.iter() {
        if !next.iter().any(|n| n.addr == b.addr) {
            b.remove_file();
        }
    }
    *bound = next;
    for (a, kind) in &fresh {
        on_listen(a, *kind, &cfg);
    }
    Ok(generation)
}

/// A [`ServeError`] in one line with its cause.
fn describe(e: &ServeError) -> String {
    match std::error::Error::source(e) {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}

/// Carries out one signal's request (see [`crate::control`]) on the open `logs`.
fn answer(r: ControlRequest, logs: &[&LogFile]) {
    match r {
        ControlRequest::Reopen => {
            for f in logs {
                match f.reopen() {
                    Ok(()) => tracing::info!("SIGUSR1: reopened {}", f.path().display()),
                    Err(e) => tracing::error!(
                        "SIGUSR1: cannot reopen {}: {e}; still writing to the file open before",
                        f.path().display()
                    ),
                }
            }
        }
        // Handled by the caller.
        ControlRequest::Reload => {}
        // Handled by the caller.
        ControlRequest::Upgrade => {}
        ControlRequest::Stray => tracing::warn!(
            "a signal that asks nothing of linerate (SIGALRM, SIGPROF, a real-time signal, ...) arrived and was ignored"
        ),
    }
}

/// What a listener's connections are.
struct Role {
    unix: bool,
    tls: Option<Arc<rustls::ServerConfig>>,
    redirect: Option<u16>,
    proxy: bool,
}

/// One worker's state; everything it asks of the kernel's readiness machinery goes
/// through `D`.
struct Worker<D: Driver> {
    cfg: Arc<Config>,
    /// The CPU it is pinned to (`--pin`): each connection accepted is counted as taken
    /// on the CPU that processed its packets, or elsewhere.
    cpu: Option<usize>,
    driver: D,
    listeners: Vec<Option<Listener>>,
    /// What each listener's connections are, kept after its socket is let go (for the
    /// connections the driver accepted ahead: [`Worker::adopt_orphans`]).
    roles: Vec<Role>,
    /// The worker has begun to end: no new work after what it has.
    ending: bool,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    site: Site,
    /// The site's counters, borrowed apart from it while a connection drives the site.
    stats: Arc<Stats>,
    accept_paused_until: Option<Instant>,
    /// The driver's ring counts already added to the counters.
    ring_seen: linerate_sys::uring::RingCounts,
    /// The descriptor limit (soft, hard) at the last tick.
    nofile: Option<(u64, u64)>,
    log: AccessLogs,
    /// Where every connection's reads land first.
    scratch: Vec<u8>,
    /// Connections that gave up their turn with the socket still writable; served
    /// again after the next wait, which then does not block.
    runnable: Vec<usize>,
    /// Serial of the last connection accepted.
    serial: u64,
    /// Error-log lines for accepts refused for lack of descriptors.
    accept_log: RateLimit,
    /// What wakes the worker from its helpers (the disk's reads, password checks).
    inbox: Arc<Inbox>,
    /// Connections whose requests wait for password checks.
    waiting: Vec<usize>,
    /// Lines for idle connections closed to make room.
    room_log: RateLimit,
    /// When idle connections were last closed to make room.
    room_made_at: Option<Instant>,
    /// Error-log lines for connections cut by a deadline.
    cut_log: RateLimit,
    /// Each connection's next deadline, at most [`Worker::check_every`] ahead.
    timers: Timers,
    /// The entries that came due in a tick (kept for its allocation).
    fired: Vec<(u64, Tick)>,
    /// The shortest timeout: a connection's deadline is looked at again at least this
    /// often, so one that moves earlier (a new state with a shorter timeout, started
    /// now) almost never needs a second entry.
    check_every: Duration,
    /// Connections held, and how many of them are idle.
    open: u64,
    idle: u64,
}

impl<D: Driver> Worker<D> {
    /// Says which CPU the worker's thread is pinned to.
    fn pinned_to(mut self, cpu: Option<usize>) -> Self {
        self.cpu = cpu;
        self
    }

    fn new(
        mut driver: D,
        cfg: Arc<Config>,
        roots: Vec<(SiteConfig, OwnedFd)>,
        listeners: Vec<Listener>,
        log_files: &[Arc<LogFile>],
        helpers: Helpers,
        (stats, board): (Arc<Stats>, Board),
    ) -> io::Result<Worker<D>> {
        let Helpers {
            jobs,
            compress,
            digests,
            checker,
        } = helpers;
        for (i, l) in listeners.iter().enumerate() {
            driver.register(
                l.sock.as_fd(),
                Token::Listener(i).encode(),
                Interest::Listener,
            )?;
        }
        // What wakes the worker: the disk helpers' reads, and the password checks.
        let inbox = Arc::new(Inbox::new()?);
        driver.register(inbox.wake.as_fd(), Token::Wake.encode(), Interest::Readable)?;
        let disk = match jobs {
            Some(jobs) => {
                let inbox = Arc::clone(&inbox);
                Some(Disk {
                    jobs,
                    inbox,
                    window: cfg.read_ahead_bytes.max(1),
                    usable: std::cell::Cell::new(true),
                    epoch: 1,
                })
            }
            None => None,
        };
        // The worker's open files and small-file memory are shared among the sites.
        let sites = roots.len().max(1);
        let hosts = roots
            .into_iter()
            .map(|(site, root)| Host {
                cache: FileCache::new(
                    root,
                    (cfg.open_file_cache_entries / sites).max(1),
                    (
                        cfg.small_file_bytes,
                        cfg.small_file_memory_bytes() / sites as u64,
                    ),
                    disk.is_some(),
                    Arc::clone(&stats),
                )
                .at(&site.root)
                .with_compress_cache(compress.clone())
                .with_digests(Some(Arc::clone(&digests))),
                cfg: site,
            })
            .collect();
        let log = AccessLogs::new(&cfg, log_files)?;
        let check_every = check_every(&cfg);
        Ok(Worker {
            cpu: None,
            stats: Arc::clone(&stats),
            site: Site::new(Arc::clone(&cfg), hosts, stats, board, disk).with_checker(checker, {
                let inbox = Arc::clone(&inbox);
                Arc::new(move || inbox.poke())
            }),
            inbox,
            waiting: Vec::new(),
            cfg,
            driver,
            roles: listeners
                .iter()
                .map(|l| Role {
                    unix: l.unix,
                    tls: l.tls.clone(),
                    redirect: l.redirect,
                    proxy: l.proxy,
                })
                .collect(),
            ending: false,
            listeners: listeners.into_iter().map(Some).collect(),
            conns: Vec::new(),
            free: Vec::new(),
            accept_paused_until: None,
            ring_seen: Default::default(),
            nofile: None,
            log,
            scratch: vec![0; crate::conn::READ_BYTES],
            runnable: Vec::new(),
            serial: 0,
            accept_log: RateLimit::new(Duration::from_secs(1)),
            room_log: RateLimit::new(Duration::from_secs(1)),
            room_made_at: None,
            cut_log: RateLimit::new(Duration::from_secs(1)),
            check_every,
            timers: Timers::new(TICK, TIMER_SLOTS, Instant::now()),
            fired: Vec::new(),
            open: 0,
            idle: 0,
        })
    }

    /// Serves until `stop`; `accepting` is counted out when this worker has let go of
    /// its listeners.
    fn run(mut self, stop: &Ending, accepting: &mut CountedIn) -> io::Result<()> {
        let mut ready: Vec<Ready> = Vec::with_capacity(256);
        let mut shutdown_deadline: Option<Instant> = None;
        let mut shutdown_began: Option<Instant> = None;
        loop {
            self.watch_changes();
            ready.clear();
            // Woken at the wheel's next tick at the latest, so a deadline is met within
            // a tick of it.
            let wait = if self.runnable.is_empty() {
                self.timers
                    .next_due()
                    .saturating_duration_since(Instant::now())
                    .min(TICK)
            } else {
                Duration::ZERO
            };
            self.driver.wait(&mut ready, wait)?;
            Stats::add(&self.stats.loop_waits, 1);
            let now = Instant::now();
            // File changes first: the requests of this turn see every change that was
            // queued when the wait returned.
            for ev in &ready {
                if let Token::Notify(i) = Token::decode(ev.token) {
                    self.site.changed(i);
                }
            }
            // Those that yielded last round take their turn after the new events.
            let turn = std::mem::take(&mut self.runnable);
            for ev in ready.drain(..) {
                match Token::decode(ev.token) {
                    Token::Wake => {
                        let done = self.inbox.take();
                        self.disk_done(done, now);
                        self.checks_made(now);
                    }
                    Token::Notify(_) => {}
                    Token::Listener(i) => self.accept(i, now),
                    Token::Conn(idx, serial) => {
                        let meant = self
                            .conns
                            .get(idx)
                            .and_then(Option::as_ref)
                            .is_some_and(|c| {
                                Token::conn(idx, u64::from(c.serial)) == Token::Conn(idx, serial)
                            });
                        if !meant {
                            // Closed earlier in this turn (or meant for the connection
                            // before in this slot): a receive buffer still goes back.
                            if let Io::Received { buffer, .. } = ev.io {
                                self.driver.recycle(buffer);
                            }
                            continue;
                        }
                        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
                            continue;
                        };
                        if ev.io != Io::None {
                            self.ring_io(idx, ev.io, now);
                            continue;
                        }
                        if ev.hangup {
                            c.peer_hung_up();
                        }
                        self.event(idx, ev.readable, ev.error, now);
                    }
                }
            }
            for idx in turn {
                if let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) {
                    c.on_run_list = false;
                }
                self.event(idx, false, false, now);
            }
            if now >= self.timers.next_due() {
                self.tick(now);
                self.count_ring();
            }
            if shutdown_deadline.is_none() && stop.now.load(Ordering::Acquire) {
                shutdown_began = Some(now);
                shutdown_deadline = Some(now + self.cfg.shutdown_timeout);
                self.begin_shutdown(stop.gently.load(Ordering::Relaxed), now);
                accepting.out();
            }
            if let Some(d) = shutdown_deadline {
                // At a stop, idle connections are ended at once, the rest when done or
                // at the deadline. Ended with a FIN while their input is drained (until
                // the client closes too, or the drain deadline): a request that crossed
                // it gets a clean close to retry on, never a reset. At a reload, a
                // connection waiting for its last request waits for it (or its idle
                // deadline, or this deadline): no client has a request to send again.
                let gently = stop.gently.load(Ordering::Relaxed);
                for i in 0..self.conns.len() {
                    let Some(c) = self.conns[i].as_mut() else {
                        continue;
                    };
                    // A connection that has had no request yet gets a short grace
                    // for its first, not the whole shutdown timeout.
                    let waited = now.duration_since(shutdown_began.unwrap_or(now));
                    let grace = self.cfg.header_timeout.min(FIRST_REQUEST_GRACE);
                    let ended = now >= d
                        || (!c.busy()
                            && !c.waits()
                            && (!c.http.awaits_last() || (!gently && waited >= grace))
                            && c.draining_since.is_none()
                            && c.linger(now) != After::Keep);
                    if ended {
                        self.close(i, After::Close, Cut::Shutdown);
                    } else {
                        // `linger` may have begun its drain: a deadline 2 s away.
                        self.settle(i, now);
                        self.sync_input(i);
                    }
                }
                // Nothing the ring accepted ahead is left unserved at the end.
                self.adopt_orphans(now);
                if self.conns.iter().all(Option::is_none) {
                    Stats::add(&self.stats.log_lines_dropped, self.log.flush());
                    self.count_ring();
                    return Ok(());
                }
            }
        }
    }

    /// Adds what the driver's ring did since the last look to the counters.
    fn count_ring(&mut self) {
        let Some(now) = self.driver.ring_counts() else {
            return;
        };
        let before = std::mem::replace(&mut self.ring_seen, now);
        Stats::add(&self.stats.ring_submitted, now.submitted - before.submitted);
        Stats::add(&self.stats.ring_completed, now.completed - before.completed);
        Stats::add(&self.stats.ring_enters, now.enters - before.enters);
    }

    /// Watches the open-file caches' inotify descriptors that are new (a cache starts
    /// over with a new instance after a change); a closed one leaves the epoll set by
    /// itself, and the io_uring driver ends its watch when the next one takes its token.
    fn watch_changes(&mut self) {
        let mut unwatched = Vec::new();
        for (i, fd) in self.site.notify_fds() {
            let token = Token::Notify(i).encode();
            match fd {
                Some(fd) => {
                    if let Err(e) = self.driver.register(fd, token, Interest::Readable) {
                        tracing::warn!(
                            "watching file changes: {e}; checking files on every request"
                        );
                        unwatched.push(i);
                    }
                }
                // The cache gave its instance up (closed): its watch goes too.
                None => {
                    let _ = self.driver.closed(token);
                }
            }
        }
        // Without the readiness the cache could trust a stale path: it gives the
        // shortcut up and checks every lookup.
        for i in unwatched {
            self.site.unwatched(i);
        }
    }

    fn begin_shutdown(&mut self, gently: bool, now: Instant) {
        self.ending = true;
        // Cached files go back now (responses in flight hold their own): a reload's new
        // workers size their caches from the same descriptor limit.
        self.site.forget_files();
        for l in self.listeners.iter_mut() {
            if let Some(l) = l.take() {
                let _ = self.driver.deregister(l.sock.as_fd());
            }
        }
        // What the driver accepted ahead is served, not reset.
        self.adopt_orphans(now);
        // At a stop, responses in flight finish and no request after them is read. A
        // connection that has had no request yet gets its first one answered (with a
        // close): its client may be sending it already, and could not tell a close
        // from a refusal. At a reload, every connection's next request is answered so.
        for (i, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c.as_mut() else {
                continue;
            };
            if gently || c.http.is_fresh() {
                c.http.finish_next();
            } else {
                c.http.close_after_last();
            }
            // An HTTP/2 connection says so at once (GOAWAY), whatever it waits for.
            if c.http.is_two() && !c.on_run_list {
                c.on_run_list = true;
                self.runnable.push(i);
            }
        }
    }

    fn accept(&mut self, li: usize, now: Instant) {
        if self.accept_paused_until.is_some() {
            return;
        }
        loop {
            let Some(l) = self.listeners[li].as_ref() else {
                return;
            };
            let fd = match self
                .driver
                .accept(Token::Listener(li).encode(), l.sock.as_fd())
            {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if linerate_sys::fs::is_out_of_descriptors(&e) => {
                    Stats::add(&self.site.stats.accept_out_of_fds, 1);
                    // Room first: the longest-idle keep-alive connections go, and the
                    // accept is tried again; at most once a pause's length, so the
                    // ring's accepts (each failing on its own) cannot churn through
                    // the connections.
                    if self.room_made_at.is_none_or(|t| now >= t + ACCEPT_PAUSE) {
                        self.room_made_at = Some(now);
                        if self.close_longest_idle(now) > 0 {
                            continue;
                        }
                    }
                    // Stop accepting for a moment instead of spinning on a listener that
                    // stays readable; existing connections go on.
                    if let Some(n) = self.accept_log.allow(now) {
                        tracing::warn!(
                            "accept: {e}: pausing accepts for {} ms{}",
                            ACCEPT_PAUSE.as_millis(),
                            more(n)
                        );
                    }
                    self.pause_accepting(now);
                    return;
                }
                Err(_) => return,
            };
            self.adopt(li, fd, now);
        }
    }

    /// Connections the driver accepted for listeners it no longer watches (io_uring's
    /// accepts run ahead: a reload, a stop or a pause ended the watch with some taken
    /// from the socket's queue): served like any other, the last request of each
    /// answered with a close if the worker is ending. Never closed unserved, which
    /// would reset a client whose request may be on its way.
    fn adopt_orphans(&mut self, now: Instant) {
        while let Some((token, fd)) = self.driver.take_orphan() {
            let Token::Listener(li) = Token::decode(token) else {
                continue;
            };
            if let Some(idx) = self.adopt(li, fd, now) {
                if self.ending {
                    if let Some(c) = self.conns[idx].as_mut() {
                        c.http.finish_next();
                    }
                }
            }
        }
    }

    /// Makes `fd`, accepted from listener `li`, a connection of this worker; its index.
    fn adopt(&mut self, li: usize, fd: OwnedFd, now: Instant) -> Option<usize> {
        let role = &self.roles[li];
        let sock = socket2::Socket::from(fd);
        let peer = if role.unix {
            Peer::Unix
        } else {
            // A connection reset before this has no address any more; it fails at
            // its first read.
            Peer::Ip(
                sock.peer_addr()
                    .ok()
                    .and_then(|a| a.as_socket())
                    .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            )
        };
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        self.serial += 1;
        Stats::add(&self.site.stats.accepted, 1);
        if let (Some(cpu), Peer::Ip(_)) = (self.cpu, peer) {
            let here = linerate_sys::steer::incoming_cpu(sock.as_fd())
                .ok()
                .flatten();
            if here == Some(cpu) {
                Stats::add(&self.site.stats.on_receive_cpu, 1);
            } else if here.is_some() {
                Stats::add(&self.site.stats.off_receive_cpu, 1);
            }
        }
        let id = (idx, self.serial);
        let limits = self.site.limits();
        let tls = match role.tls.as_ref().map(crate::tls::Session::new).transpose() {
            Ok(t) => t.map(Box::new),
            Err(e) => {
                tracing::warn!("TLS: a session cannot be made: {e}");
                self.free.push(idx);
                return None;
            }
        };
        let ring = self.driver.ring_io();
        let mut conn = Conn::new(sock, peer, limits, id, ring, tls, now);
        let token = token_of(&conn);
        conn.redirect = role.redirect;
        if role.proxy {
            conn.proxy = Some(Box::new(crate::conn::ProxyWait {
                since: now,
                got: Vec::new(),
                refused: false,
            }));
        }
        if self
            .driver
            .register(conn.sock.as_fd(), token, Interest::Connection)
            .is_err()
        {
            self.free.push(idx);
            return None;
        }
        self.conns[idx] = Some(conn);
        self.open += 1;
        self.settle(idx, now);
        // Its requests are read in a later turn, after a wait: registered with data
        // waiting, it is reported ready at once. So file changes queued before its
        // request are taken in first (the inotify descriptor is ahead of it in the
        // ready list), and a client that connects again and again cannot keep the
        // worker in this loop.
        Some(idx)
    }

    /// Closes the connections idle longest between requests, to give their descriptors
    /// to new clients (as nginx drains its reusable connections): an eighth of the idle
    /// ones, between 1 and 32 at a time. How many it closed.
    fn close_longest_idle(&mut self, now: Instant) -> usize {
        let mut idle: Vec<(Instant, usize)> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .filter(|c| c.is_idle())
                    .map(|c| (c.last_activity, i))
            })
            .collect();
        let n = (idle.len() / 8).clamp(1, 32).min(idle.len());
        if n == 0 {
            return 0;
        }
        idle.select_nth_unstable(n - 1);
        for &(_, i) in &idle[..n] {
            self.close(i, After::Close, Cut::Client);
        }
        Stats::add(&self.site.stats.idle_closed_for_room, n as u64);
        if let Some(more) = self.room_log.allow(now) {
            tracing::warn!(
                "out of descriptors: closed the {n} connections idle longest to accept new ones{}",
                crate::logs::more(more)
            );
        }
        n
    }

    fn pause_accepting(&mut self, now: Instant) {
        self.accept_paused_until = Some(now + ACCEPT_PAUSE);
        for l in self.listeners.iter().flatten() {
            let _ = self.driver.deregister(l.sock.as_fd());
        }
    }

    fn event(&mut self, idx: usize, readable: bool, error: bool, now: Instant) {
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        let (log, stats) = (&mut self.log, &self.stats);
        let mut done = Done::default();
        let mut write_log = |c: &Conn, r: &Response, a: Option<Aborted>| {
            write_access(log, stats, c, r, a, &mut done)
        };
        let after = conn.drive(
            &mut self.site,
            (&mut self.driver, &mut self.scratch),
            readable,
            error,
            now,
            &mut write_log,
        );
        if std::mem::take(&mut conn.handshake_done) {
            Stats::add(&self.stats.tls_handshakes, 1);
        }
        if std::mem::take(&mut conn.handed_off) {
            Stats::add(&self.stats.tls_kernel, 1);
        }
        if after != After::Keep {
            self.close(idx, after, Cut::Client);
            return;
        }
        if conn.take_yielded() && !conn.on_run_list {
            conn.on_run_list = true;
            self.runnable.push(idx);
        }
        if conn.waits() && !self.waiting.contains(&idx) {
            self.waiting.push(idx);
        }
        self.settle(idx, now);
        self.sync_input(idx);
    }

    /// After connection `idx` moved at `now`: its body clock and the idle count follow
    /// its state, and its deadline gets an entry if it is now earlier than the one
    /// armed (a later one is found when that entry fires, at no cost until then).
    fn settle(&mut self, idx: usize, now: Instant) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        // The body deadline runs while a body is awaited and nothing is owed: while a
        // response is in flight the server reads nothing (the send deadline applies
        // then), so its time is not the client's to answer for. A body waits behind
        // at most the responses queued before its head, so the clock starts over at
        // most that once.
        c.body_clock = match (c.http.body_started(), c.busy()) {
            // A clock that started before this body's head was the body before's.
            (Some(b), false) => Some(c.body_clock.filter(|&t| t >= b).unwrap_or(now)),
            _ => None,
        };
        let idle = c.is_idle();
        if idle != c.counted_idle {
            c.counted_idle = idle;
            if idle {
                self.idle += 1;
            } else {
                self.idle -= 1;
            }
        }
        let at = deadline(c, &self.cfg).at.min(after(now, self.check_every));
        // Mostly the deadline moved later (or not at all): no tick to work out.
        // (A tick earlier than the armed one is an earlier deadline: ticks only move
        // on, so the armed tick is its deadline's own.)
        let earlier = c.armed.is_none_or(|tick| self.timers.tick_for(at) < tick);
        if earlier {
            c.armed = Some(self.timers.arm(token_of(c), at));
        }
    }

    /// Under a ring, a connection's receive follows what it can take.
    fn sync_input(&mut self, idx: usize) {
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        if let Some(on) = conn.input_change() {
            if self.driver.set_input(conn.sock.as_fd(), on).is_err() {
                self.close(idx, After::Close, Cut::Error);
            }
        }
    }

    /// What the driver's ring did for connection `idx`: bytes in, its input ended, a
    /// gather sent. Then the connection goes on.
    fn ring_io(&mut self, idx: usize, io: Io, now: Instant) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            if let Io::Received { buffer, .. } = io {
                self.driver.recycle(buffer);
            }
            return;
        };
        match io {
            Io::None => {}
            Io::Received { buffer, len } => {
                c.received(self.driver.input(buffer, len as usize), now);
                self.driver.recycle(buffer);
            }
            Io::InputEnded(r) => {
                let after = c.input_ended(r);
                if after != After::Keep {
                    self.close(idx, after, Cut::Client);
                    return;
                }
            }
            Io::Sent(r) => c.sent(r),
        }
        self.event(idx, false, false, now);
    }

    /// The helpers finished windows: their connections send again.
    fn disk_done(&mut self, done: Vec<crate::disk::Done>, now: Instant) {
        for done in done {
            Stats::add(&self.site.stats.helper_reads, 1);
            Stats::add(&self.site.stats.helper_bytes, done.read);
            let waiting = self
                .conns
                .get_mut(done.conn)
                .and_then(Option::as_mut)
                .is_some_and(|c| {
                    u64::from(c.serial) == done.serial && c.disk_ready(done.offset, done.len, now)
                });
            if waiting {
                self.event(done.conn, false, false, now);
            }
        }
    }

    /// Password checks were made: the connections whose requests waited for them answer.
    fn checks_made(&mut self, now: Instant) {
        let mut list = std::mem::take(&mut self.waiting);
        list.retain(|&i| {
            self.conns
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(Conn::waits)
        });
        for &i in &list {
            if self.conns[i].as_ref().is_some_and(Conn::check_made) {
                self.event(i, false, false, now);
            }
        }
        list.retain(|&i| {
            self.conns
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(Conn::waits)
        });
        self.waiting.append(&mut list);
        self.waiting.sort_unstable();
        self.waiting.dedup();
    }

    /// Closes connection `idx`; responses it had not sent whole are logged as cut by
    /// `cut` (unless the connection knows a cause of its own) and counted.
    fn close(&mut self, idx: usize, how: After, cut: Cut) {
        if let Some(mut c) = self.conns[idx].take() {
            self.open -= 1;
            self.idle -= u64::from(c.counted_idle);
            let (log, stats) = (&mut self.log, &self.stats);
            let mut done = Done::default();
            let aborted = c.abort(cut, &mut |c, r, a| {
                write_access(log, stats, c, r, a, &mut done)
            });
            Stats::add(&self.site.stats.aborted, aborted);
            if c.tls_refused {
                Stats::add(&self.site.stats.tls_refused, 1);
            }
            if c.proxy_refused() {
                Stats::add(&self.site.stats.proxy_refused, 1);
            }
            if let Some(k) = c.tx_counters() {
                self.stats.add_tx(k);
            }
            if how == After::Reset {
                let _ = linerate_sys::fs::reset_on_close(c.sock.as_fd());
            }
            let token = token_of(&c);
            let _ = self.driver.close(token, c.into_socket().into());
            self.free.push(idx);
        }
    }

    fn tick(&mut self, now: Instant) {
        if let Some(d) = self.site.disk.as_mut() {
            d.epoch += 1;
        }
        if self.site.draining() {
            // A stop's shutdown delay: an HTTP/2 connection that has served is told
            // GOAWAY (its streams taken are answered), at the first tick or, if it
            // opened since, at the tick after its first stream, as every HTTP/1.1
            // answer from now on says `Connection: close` (`Conn::process`), so clients
            // come back through the balancer, to an instance that is staying; the
            // listeners stay open.
            for (i, c) in self.conns.iter_mut().enumerate() {
                if let Some(c) = c.as_mut().filter(|c| c.http.is_two_serving()) {
                    c.http.finish_next();
                    if !c.on_run_list {
                        c.on_run_list = true;
                        self.runnable.push(i);
                    }
                }
            }
        }
        // What the ring accepted for a listener whose watch ended after the worker
        // last looked (a pause, a stop) is served within a tick.
        self.adopt_orphans(now);
        if self.driver.ring_io() {
            // A ring quiet for a tick gives its receive buffers' pages back.
            let _ = self.driver.release_idle();
            // The ring's accepts hold the descriptor limit of when they were armed; one
            // lowered (or raised) at run time, by `prlimit`, holds from the next tick.
            let limit = linerate_sys::fs::nofile_limit().ok();
            if limit != self.nofile {
                if self.nofile.is_some() {
                    if let Err(e) = self.driver.limit_changed() {
                        tracing::warn!("arming the accepts again for a new descriptor limit: {e}");
                    }
                }
                self.nofile = limit;
            }
        }
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
            for (i, l) in self.listeners.iter().enumerate() {
                if let Some(l) = l {
                    let _ = self.driver.register(
                        l.sock.as_fd(),
                        Token::Listener(i).encode(),
                        Interest::Listener,
                    );
                }
            }
        }
        // The deadlines that came due: each looked at again, the connection cut if its
        // deadline passed, else armed for it (activity moved it later).
        let mut fired = std::mem::take(&mut self.fired);
        self.timers.expire(now, &mut fired);
        for (token, tick) in fired.drain(..) {
            let Token::Conn(i, _) = Token::decode(token) else {
                continue;
            };
            let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if token_of(c) != token || c.armed != Some(tick) {
                // Closed, or armed again since.
                continue;
            }
            c.judge_send_rate(now, self.cfg.min_send_rate, self.cfg.send_timeout);
            let d = deadline(c, &self.cfg);
            if d.at > now {
                let at = d.at.min(after(now, self.check_every));
                c.armed = Some(self.timers.arm(token, at));
                continue;
            }
            c.armed = None;
            if let Some(k) = d.kind {
                Stats::add(&self.site.stats.timeouts[k], 1);
            }
            if !d.why.is_empty() {
                if let Some(n) = self.cut_log.allow(now) {
                    tracing::info!("closed a connection from {}: {}{}", c.peer, d.why, more(n));
                }
            }
            self.close(i, After::Close, d.cut);
        }
        self.fired = fired;
        Stats::set(&self.site.stats.open, self.open);
        Stats::set(&self.site.stats.idle, self.idle);
        Stats::add(&self.stats.log_lines_dropped, self.log.flush());
    }
}

/// Writes `r`'s access-log line, if there is a log.
/// When the responses logged in one turn of a connection ended: the clock read once
/// for them all (an HTTP/2 connection finishes many in a turn), at the first.
#[derive(Default)]
struct Done(Option<Instant>);

impl Done {
    fn at(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

fn write_access(
    log: &mut AccessLogs,
    stats: &Stats,
    c: &Conn,
    r: &Response,
    aborted: Option<Aborted>,
    done: &mut Done,
) {
    let body = aborted.map_or(r.record.body_bytes, |a| a.body_sent);
    stats.record(
        r.record.method,
        r.record.status.code(),
        body,
        r.record
            .started
            .map(|t| done.at().saturating_duration_since(t)),
    );
    if r.record.h2 {
        Stats::add(&stats.h2_responses, 1);
    }
    if let Some((l, style)) = log.of(r.record.site) {
        let line = log_line(
            style,
            (c.peer, c.tls_protocol()),
            r,
            aborted,
            SystemTime::now(),
        );
        // Whole lines: the buffer flushes between lines, never inside one.
        Stats::add(&stats.log_lines_dropped, l.push(&line));
    }
}

/// The client's address as the log writes it: the one a trusted proxy named, else
/// the connection's peer.
fn remote(peer: Peer, r: &Response) -> String {
    match r.record.client {
        Some(ip) => ip.to_string(),
        None => peer.remote(),
    }
}

/// One access-log line: Common Log Format (`-` for no body bytes, the request line with
/// `"`, `\\`, control and non-ASCII bytes as `\\xHH`, as nginx writes them), or a JSON
/// object. A response cut before its end (`aborted`) has the body bytes that left (that
/// the socket took), 499 for its status if the client went away before any byte of it
/// left (nginx's convention), and a last field saying how it was cut: ` aborted=HOW` in
/// CLF, `"aborted": "HOW"` in JSON.
fn log_line(
    style: &LogStyle,
    (peer, tls): (Peer, Option<&str>),
    r: &Response,
    aborted: Option<Aborted>,
    t: SystemTime,
) -> String {
    use std::fmt::Write as _;
    let (status, body_bytes) = match aborted {
        Some(a) if a.nothing_sent && a.cut == Cut::Client => (499, 0),
        Some(a) => (r.record.status.code(), a.body_sent),
        None => (r.record.status.code(), r.record.body_bytes),
    };
    if let LogFormat::Custom(template) = &style.format {
        let said = Said {
            status,
            body_bytes,
            tls,
        };
        return custom_line(template, peer, r, said, aborted, t);
    }
    if style.format == LogFormat::Json {
        let mut words = r.record.request_line.splitn(3, ' ');
        let (method, path) = (words.next(), words.next());
        let mut v = serde_json::json!({
            "time": humantime::format_rfc3339_micros(t).to_string(),
            "remote": remote(peer, r),
            "host": r.record.host,
            "request": r.record.request_line,
            "method": method,
            "path": path,
            "status": status,
            "bytes": body_bytes,
            "duration_us": r.record.started.map(|s| s.elapsed().as_micros() as u64),
            "user_agent": r.record.user_agent.as_deref().map(json_text),
            "referer": r.record.referer.as_deref().map(json_text),
            "transmit": style.transmit,
        });
        if let Some(a) = aborted {
            v["aborted"] = a.cut.as_str().into();
        }
        let mut line = v.to_string();
        line.push('\n');
        return line;
    }
    let mut line = String::with_capacity(80 + r.record.request_line.len());
    let _ = write!(line, "{} - - [{}] \"", remote(peer, r), clf_date(t));
    clf_escape(&mut line, r.record.request_line.as_bytes());
    let _ = write!(line, "\" {status} ");
    match body_bytes {
        0 => line.push('-'),
        n => {
            let _ = write!(line, "{n}");
        }
    }
    if style.format == LogFormat::Combined {
        for field in [&r.record.referer, &r.record.user_agent] {
            match field {
                Some(v) => {
                    line.push_str(" \"");
                    clf_escape(&mut line, v);
                    line.push('"');
                }
                None => line.push_str(" \"-\""),
            }
        }
    }
    if let Some(a) = aborted {
        let _ = write!(line, " aborted={}", a.cut.as_str());
    }
    line.push('\n');
    line
}

/// What a line says that the response alone does not: the status and body bytes as
/// logged (an aborted answer's), and the connection's TLS version.
struct Said<'a> {
    status: u16,
    body_bytes: u64,
    tls: Option<&'a str>,
}

/// A line of the operator's template: each variable as nginx writes it (`-` for what
/// is not there), client-sent text escaped as in CLF lines, then ` aborted=HOW` for a
/// cut answer, as the other formats say it.
fn custom_line(
    template: &crate::config::LogTemplate,
    peer: Peer,
    r: &Response,
    said: Said<'_>,
    aborted: Option<Aborted>,
    t: SystemTime,
) -> String {
    use crate::config::{LogPiece, LogVar};
    use std::fmt::Write as _;
    let rec = &r.record;
    let mut words = rec.request_line.splitn(3, ' ');
    let (method, uri, protocol) = (words.next(), words.next(), words.next());
    let mut line = String::with_capacity(template.source.len() + 64);
    let text = |line: &mut String, v: Option<&[u8]>| match v {
        Some(v) if !v.is_empty() => clf_escape(line, v),
        _ => line.push('-'),
    };
    for piece in template.pieces.iter() {
        match *piece {
            LogPiece::Text(a, b) => line.push_str(&template.source[a..b]),
            LogPiece::Var(v) => match v {
                LogVar::RemoteAddr => line.push_str(&remote(peer, r)),
                LogVar::Host => text(&mut line, rec.host.as_deref().map(str::as_bytes)),
                LogVar::Request => clf_escape(&mut line, rec.request_line.as_bytes()),
                LogVar::RequestMethod => text(&mut line, method.map(str::as_bytes)),
                LogVar::RequestUri => text(&mut line, uri.map(str::as_bytes)),
                LogVar::Protocol => text(&mut line, protocol.map(str::as_bytes)),
                LogVar::Status => {
                    let _ = write!(line, "{}", said.status);
                }
                LogVar::BodyBytesSent => {
                    let _ = write!(line, "{}", said.body_bytes);
                }
                LogVar::RequestTime => match rec.started {
                    Some(s) => {
                        let _ = write!(line, "{:.3}", s.elapsed().as_secs_f64());
                    }
                    None => line.push('-'),
                },
                LogVar::HttpReferer => text(&mut line, rec.referer.as_deref()),
                LogVar::HttpUserAgent => text(&mut line, rec.user_agent.as_deref()),
                LogVar::SslProtocol => line.push_str(said.tls.unwrap_or("-")),
                LogVar::TimeLocal => line.push_str(&clf_date(t)),
                LogVar::TimeIso8601 => {
                    let _ = write!(line, "{}", humantime::format_rfc3339_seconds(t));
                }
                LogVar::Msec => {
                    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
                    let _ = write!(line, "{}.{:03}", d.as_secs(), d.subsec_millis());
                }
            },
        }
    }
    if let Some(a) = aborted {
        let _ = write!(line, " aborted={}", a.cut.as_str());
    }
    line.push('\n');
    line
}

/// `s` into a quoted field of a CLF line: `"`, `\` and bytes outside printable ASCII as
/// `\xHH`, so a line can never be split or faked by what a client sent.
fn clf_escape(line: &mut String, s: &[u8]) {
    use std::fmt::Write as _;
    for &b in s {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(line, "\\x{b:02X}");
        } else {
            line.push(char::from(b));
        }
    }
}

/// A field for a JSON line: its text when it is UTF-8, else every byte outside
/// printable ASCII (and `\`) as `\xHH`, as the CLF line writes them: no byte is
/// hidden or replaced.
fn json_text(v: &[u8]) -> String {
    match std::str::from_utf8(v) {
        Ok(t) => t.to_string(),
        Err(_) => {
            let mut out = String::with_capacity(v.len() + 8);
            clf_escape(&mut out, v);
            out
        }
    }
}

/// A worker's access logs: one buffer per place lines go (standard output, each
/// file), and by site which of them and in which format (a site's own, else the
/// server's; the server's for an answer to no site).
pub(crate) struct AccessLogs {
    lines: Vec<AccessLines>,
    /// By site index, then the server's last: the buffer and the style.
    by_site: Vec<Option<(usize, LogStyle)>>,
}

impl AccessLogs {
    fn new(cfg: &Config, files: &[Arc<LogFile>]) -> io::Result<AccessLogs> {
        let mut lines: Vec<AccessLines> = Vec::new();
        let mut keys: Vec<AccessLog> = Vec::new();
        let mut by_site = Vec::new();
        let server = (cfg.access_log.clone(), cfg.log_format.clone());
        for (target, format) in cfg.site_logs().into_iter().chain([server]) {
            let at = match keys.iter().position(|k| *k == target) {
                Some(i) => Some(i),
                None => {
                    let made = match &target {
                        AccessLog::Off => None,
                        AccessLog::Stdout => {
                            let out = io::stdout().as_fd().try_clone_to_owned()?;
                            Some(AccessLines::new(AccessTarget::Stdout(out.into())))
                        }
                        AccessLog::File(p) => files
                            .iter()
                            .find(|f| f.path() == p.as_path())
                            .map(|f| AccessLines::new(AccessTarget::File(Arc::clone(f)))),
                    };
                    made.map(|l| {
                        lines.push(l);
                        keys.push(target);
                        lines.len() - 1
                    })
                }
            };
            by_site.push(at.map(|i| {
                (
                    i,
                    LogStyle {
                        format,
                        transmit: cfg.transmit.to_string(),
                    },
                )
            }));
        }
        Ok(AccessLogs { lines, by_site })
    }

    /// Where the lines of site `site` go (none: an answer to no site), if anywhere.
    fn of(&mut self, site: Option<u16>) -> Option<(&mut AccessLines, &LogStyle)> {
        let last = self.by_site.len() - 1;
        let i = site.map_or(last, |s| usize::from(s).min(last));
        let (at, style) = self.by_site[i].as_ref()?;
        Some((&mut self.lines[*at], style))
    }

    /// Writes every buffer; the lines dropped.
    fn flush(&mut self) -> u64 {
        self.lines.iter_mut().map(AccessLines::flush).sum()
    }
}

/// How access-log lines are written.
pub(crate) struct LogStyle {
    pub format: LogFormat,
    /// The transmit strategy's name, for JSON lines.
    pub transmit: String,
}

/// `[10/Oct/2000:13:55:36 +0000]`'s inside, from an HTTP date.
fn clf_date(t: SystemTime) -> String {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let d = httpdate::fmt_http_date(t);
    let f: Vec<&str> = d.split_whitespace().collect();
    match f.as_slice() {
        [_, day, mon, year, time, _] => format!("{day}/{mon}/{year}:{time} +0000"),
        _ => d,
    }
}

#[cfg(test)]
mod token_tests {
    use super::Token;

    #[test]
    fn tokens_round_trip_and_a_slot_reused_gets_another_token() {
        for t in [
            Token::conn(0, 1),
            Token::conn(123_456, (1 << 40) + 77),
            Token::Listener(0),
            Token::Listener(31),
            Token::Notify(5),
            Token::Wake,
        ] {
            assert_eq!(Token::decode(t.encode()), t, "{t:?}");
        }
        assert_ne!(Token::conn(9, 100).encode(), Token::conn(9, 101).encode());
        // No connection's token is any other kind's.
        assert_ne!(
            Token::decode(Token::conn(u32::MAX as usize, u64::MAX).encode()),
            Token::Wake
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_http::Status;

    fn response(line: &str, host: Option<&str>, status: Status, bytes: u64) -> Response {
        let mut r = Response::new(Default::default(), status, true, line.into(), bytes);
        r.record.host = host.map(str::to_string);
        r
    }

    const CLF: LogStyle = LogStyle {
        format: LogFormat::Clf,
        transmit: String::new(),
    };
    const COMBINED: LogStyle = LogStyle {
        format: LogFormat::Combined,
        transmit: String::new(),
    };
    fn json_style() -> LogStyle {
        LogStyle {
            format: LogFormat::Json,
            transmit: "sendfile".into(),
        }
    }

    #[test]
    fn access_log_lines() {
        let peer = Peer::Ip("198.18.0.2:4000".parse().unwrap());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        let r = response("GET /a.txt HTTP/1.1", Some("h"), Status::Ok, 1234);
        assert_eq!(
            log_line(&CLF, (peer, None), &r, None, t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /a.txt HTTP/1.1\" 200 1234\n"
        );
        let r = response("GET /\"x\\\u{7f}é HTTP/1.1", None, Status::NotFound, 0);
        assert_eq!(
            log_line(&CLF, (peer, None), &r, None, t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /\\x22x\\x5C\\x7F\\xC3\\xA9 HTTP/1.1\" 404 -\n"
        );
        let j: serde_json::Value =
            serde_json::from_str(&log_line(&json_style(), (peer, None), &r, None, t)).unwrap();
        assert_eq!(j["request"], "GET /\"x\\\u{7f}é HTTP/1.1");
        assert_eq!(j["host"], serde_json::Value::Null);
        assert_eq!(j["remote"], "198.18.0.2");
        assert_eq!(
            (j["status"].as_u64(), j["bytes"].as_u64()),
            (Some(404), Some(0))
        );
        assert_eq!(j["time"], "2000-10-10T13:55:36.000000Z");
        assert_eq!(
            (j["method"].as_str(), j["path"].as_str()),
            (Some("GET"), Some("/\"x\\\u{7f}é"))
        );
        assert_eq!(j["transmit"], "sendfile");
        assert_eq!(
            j["duration_us"],
            serde_json::Value::Null,
            "an answer to no request"
        );
        // Combined: CLF, then the Referer and the User-Agent, escaped, "-" when absent.
        let mut r = response("GET / HTTP/1.1", None, Status::Ok, 5);
        r.record.user_agent = Some(b"curl/8 \"x\" \xff".to_vec());
        assert_eq!(
            log_line(&COMBINED, (peer, None), &r, None, t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl/8 \\x22x\\x22 \\xFF\"\n"
        );
        // Regression (issue 28): a byte that is not UTF-8 hid the whole field (`-`,
        // or null in JSON); now it is written escaped, in both.
        let j: serde_json::Value =
            serde_json::from_str(&log_line(&json_style(), (peer, None), &r, None, t)).unwrap();
        assert_eq!(j["user_agent"], "curl/8 \\x22x\\x22 \\xFF");
        let r = response("GET http://a/ HTTP/1.1", Some("a"), Status::Ok, 5);
        let j: serde_json::Value =
            serde_json::from_str(&log_line(&json_style(), (peer, None), &r, None, t)).unwrap();
        assert_eq!(j["host"], "a");
        assert_eq!(j.get("aborted"), None);
    }

    /// A custom format writes exactly its variables, client text escaped, `-` for
    /// what is not there.
    #[test]
    fn a_custom_line_writes_exactly_the_variables_asked() {
        let peer = Peer::Ip("198.18.0.2:4000".parse().unwrap());
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(971_186_136_250);
        let style = |f: &str| LogStyle {
            format: f.parse().unwrap(),
            transmit: String::new(),
        };
        let mut r = response("GET /a?b=1 HTTP/2.0", Some("a.test"), Status::Ok, 42);
        r.record.user_agent = Some(b"ua \"q\"".to_vec());
        let s = style(
            "$remote_addr|$host|$request|$request_method|$request_uri|$protocol|$status|\
             $body_bytes_sent|$http_referer|$http_user_agent|$ssl_protocol|[$time_local]|\
             $time_iso8601|$msec|${status}x|$$",
        );
        assert_eq!(
            log_line(&s, (peer, Some("TLSv1.3")), &r, None, t),
            "198.18.0.2|a.test|GET /a?b=1 HTTP/2.0|GET|/a?b=1|HTTP/2.0|200|42|-|ua \\x22q\\x22|\
             TLSv1.3|[10/Oct/2000:13:55:36 +0000]|2000-10-10T13:55:36Z|971186136.250|200x|$\n"
        );
        // A trusted proxy's client; an aborted answer as the other formats say it.
        r.record.client = Some("203.0.113.9".parse().unwrap());
        let cut = Some(Aborted {
            cut: Cut::Client,
            body_sent: 0,
            nothing_sent: true,
        });
        assert_eq!(
            log_line(
                &style("$remote_addr $status $body_bytes_sent"),
                (peer, None),
                &r,
                cut,
                t
            ),
            "203.0.113.9 499 0 aborted=client\n"
        );
        for bad in ["$nope", "${status", "$status\t$host"] {
            assert!(bad.parse::<LogFormat>().is_err(), "{bad}");
        }
        assert!("clf".parse::<LogFormat>() == Ok(LogFormat::Clf));
    }

    #[test]
    fn aborted_responses_have_the_bytes_that_left_and_how_they_were_cut() {
        let peer = Peer::Ip("198.18.0.2:4000".parse().unwrap());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        let r = response("GET /big HTTP/1.1", Some("h"), Status::Ok, 1 << 30);
        let cut = |cut, body_sent, nothing_sent| {
            Some(Aborted {
                cut,
                body_sent,
                nothing_sent,
            })
        };
        assert_eq!(
            log_line(&CLF, (peer, None), &r, cut(Cut::SendTimeout, 65536, false), t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /big HTTP/1.1\" 200 65536 aborted=send-timeout\n"
        );
        assert_eq!(
            log_line(&CLF, (peer, None), &r, cut(Cut::Client, 0, true), t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /big HTTP/1.1\" 499 - aborted=client\n"
        );
        assert_eq!(
            log_line(&CLF, (peer, None), &r, cut(Cut::Shutdown, 0, false), t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /big HTTP/1.1\" 200 - aborted=shutdown\n",
            "the head left, no body byte"
        );
        let line = log_line(
            &json_style(),
            (peer, None),
            &r,
            cut(Cut::Truncated, 100, false),
            t,
        );
        let j: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (j["status"].as_u64(), j["bytes"].as_u64()),
            (Some(200), Some(100))
        );
        assert_eq!(j["aborted"], "truncated");
    }
}
