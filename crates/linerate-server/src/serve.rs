//! The server's life: privileges, descriptor limits, generations of workers (one per
//! start or reload, on the same listening sockets), the helpers they share, and the
//! control loop that reloads and stops them.

use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::compress_cache::{Compressor, Store};
use crate::config::Endpoint;
use crate::config::{Config, SiteConfig};
use crate::control::{Control, Request as ControlRequest};
use crate::disk::{self, Job};
use crate::listen::{bind_all, bind_quic, hand_out, status_line, BindError, Bound, Kind, Listener};
use crate::logs::LogFile;
use crate::site::Resolver;
use crate::stats::{Board, Earlier, Stats};
use crate::worker::Worker;
use linerate_event::{DriverChoice, EpollDriver, UringDriver};

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
    let entries = (cfg.open_file_cache as u64).min(share.max(16)) as usize;
    if entries < cfg.open_file_cache {
        tracing::info!(
            "open-file cache: {entries} entries per worker (asked {}), its share of {soft} descriptors",
            cfg.open_file_cache
        );
        cfg.open_file_cache = entries;
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
pub(crate) struct Ending {
    /// Set: no new work is taken; what is in flight finishes (up to the shutdown
    /// timeout), and the workers end.
    pub(crate) now: AtomicBool,
    /// Set with `now` by a reload, cleared by a stop: connections are not closed while
    /// idle (a request may be on its way on them; its client would have to send it
    /// again) but answer their next request with `Connection: close`, or end at their
    /// idle deadline or the shutdown deadline.
    pub(crate) gently: AtomicBool,
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
pub(crate) struct CountedIn(Option<Arc<std::sync::atomic::AtomicUsize>>);

impl CountedIn {
    pub(crate) fn out(&mut self) {
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
pub(crate) struct Helpers {
    pub(crate) jobs: Option<std::sync::mpsc::Sender<Job>>,
    pub(crate) compress: Option<Arc<Store>>,
    pub(crate) digests: Arc<crate::digest::Digests>,
    pub(crate) checker: Arc<crate::auth::Checker>,
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
        crate::acme::prepare(&cfg.acme_dir, owner)
            .map_err(|e| format!("acme-dir {}: {e}", cfg.acme_dir.display()))?;
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
        limits: crate::limits::any_in(&cfg)
            .then(|| shared.checker.limits.table(cfg.limit_requests_memory)),
    };
    // Everything that can fail is done before the first thread starts, so a failure
    // leaves no worker running that nobody will stop.
    let resolver = Arc::new(Resolver::new(
        Arc::clone(&cfg),
        roots.iter().map(|(s, _)| s.clone()).collect(),
    ));
    let roots = (0..listeners.len())
        .map(|_| {
            roots
                .iter()
                .map(|(_, f)| Ok(OwnedFd::from(f.try_clone()?)))
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
        let resolver = Arc::clone(&resolver);
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
                    Ok(driver) => Worker::new(
                        driver, resolver, root, listeners, &log_files, helpers, stats,
                    )?
                    .pinned_to(pinned)
                    .run(&stop, &mut counted),
                    // The probe at the start passed, but this worker's ring cannot be
                    // made (locked-memory limits on older kernels, say).
                    Err(e) if cfg.driver_fallback => {
                        tracing::warn!(
                            "driver auto: a worker cannot set up io_uring ({e}); it runs epoll"
                        );
                        let driver = EpollDriver::new()?;
                        Worker::new(
                            driver, resolver, root, listeners, &log_files, helpers, stats,
                        )?
                        .pinned_to(pinned)
                        .run(&stop, &mut counted)
                    }
                    Err(e) => Err(e),
                },
                DriverChoice::Epoll | DriverChoice::Auto => {
                    let driver = EpollDriver::new()?;
                    Worker::new(
                        driver, resolver, root, listeners, &log_files, helpers, stats,
                    )?
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
        cfg.small_file,
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
    bind_quic(&mut bound, &activated, &cfg)?;
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
                // Requests waiting their turn under a rate limit are answered now.
                shared.checker.limits.delayer.end();
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
                        let bases = crate::listen::quic_bases(&bound);
                        match crate::systemd::upgrade(&sockets, &bases) {
                            Ok(child) => {
                                crate::listen::quic_handed_on();
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
    let mut next = bind_all(&cfg, bound, &mut |a| fresh.push(a.clone()))
        .map_err(|e| describe(&ServeError::from(e)))?;
    bind_quic(&mut next, bound, &cfg).map_err(|e| describe(&ServeError::from(e)))?;
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
