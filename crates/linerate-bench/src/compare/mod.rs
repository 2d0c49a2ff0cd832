//! `bench compare`: linerate against the static servers users know, in one command.
//!
//! It writes the file set, starts every server that is installed (see [`peers`]), runs
//! the same `bench http` load against each for every workload, the servers interleaved
//! round by round (linerate, nginx, lighttpd, h2o, linerate, …), and judges requests/s,
//! p99 latency and server CPU per request of each peer against linerate with Student's
//! t. [`report`] renders the result as a self-contained HTML page with SVG charts.

pub mod peers;
pub mod report;

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

use crate::http::{self, workload, HttpConfig, HttpResult, Judged, Workload};
pub use peers::Peer;

/// What `bench compare` runs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Servers asked for; those not installed are skipped (linerate always runs).
    pub servers: Vec<Peer>,
    /// Where the file set is written (a temporary directory if None).
    pub root: Option<PathBuf>,
    /// One workload per size.
    pub sizes: Vec<u64>,
    /// The SpecWeb99 mix, with this many directories.
    pub mix_dirs: Option<usize>,
    /// The load: connections, threads, duration, pipeline, client CPUs… (target,
    /// workload and server pid are filled in per run).
    pub load: HttpConfig,
    /// CPU for the servers.
    pub server_cpu: Option<usize>,
    /// Runs per server and workload.
    pub iterations: usize,
    /// Confidence of the comparisons.
    pub confidence: linerate_stat::Confidence,
    /// Where samples (ministat files) go, if anywhere.
    pub out: Option<PathBuf>,
    /// The linerate binary.
    pub linerate_exe: PathBuf,
    /// Extra `linerate serve` arguments.
    pub linerate_args: Vec<String>,
}

/// Failures that end a comparison.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Writing the file set failed.
    #[error("writing the file set in {dir}: {reason}")]
    FileSet {
        /// Where.
        dir: PathBuf,
        /// Why.
        reason: std::io::Error,
    },
    /// A server could not be started.
    #[error("starting {server}: {reason}")]
    Start {
        /// Which.
        server: &'static str,
        /// Why.
        reason: std::io::Error,
    },
    /// A load run failed.
    #[error("{server}, {workload}: {reason}")]
    Run {
        /// Which server.
        server: &'static str,
        /// Which workload.
        workload: String,
        /// Why.
        reason: http::HttpError,
    },
    /// Interrupted.
    #[error("interrupted")]
    Interrupted,
    /// Anything else.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A server that took part.
#[derive(Clone, Debug, Serialize)]
pub struct ServerInfo {
    /// Its name.
    pub name: &'static str,
    /// Its version line.
    pub version: String,
    /// Its configuration (for linerate: the command line).
    pub config: String,
}

/// One workload's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadComparison {
    /// The workload.
    pub workload: String,
    /// Runs per server, in the order of [`CompareResult::servers`].
    pub runs: Vec<Vec<HttpResult>>,
    /// Statistics, each peer against linerate.
    pub judged: Judged,
}

/// A whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareResult {
    /// Servers compared, linerate first.
    pub servers: Vec<ServerInfo>,
    /// Servers asked for but not run, and why.
    pub skipped: Vec<(String, String)>,
    /// One entry per workload.
    pub workloads: Vec<WorkloadComparison>,
    /// Runs per server and workload.
    pub iterations: usize,
    /// Confidence of the comparisons, percent.
    pub confidence: f64,
    /// Connections of the load.
    pub connections: usize,
    /// Load threads.
    pub threads: usize,
    /// Seconds per run (None: a request count).
    pub seconds: Option<f64>,
    /// The client's CPUs.
    pub client_cpus: Vec<usize>,
    /// The servers' CPU.
    pub server_cpu: Option<usize>,
    /// Kernel release.
    pub kernel: String,
    /// CPUs of the machine.
    pub cpus: usize,
}

/// Progress of a comparison, for the caller to show.
#[derive(Debug)]
pub enum Event<'a> {
    /// A server was started.
    Started(&'a ServerInfo),
    /// A server asked for is not installed.
    Skipped(&'a str, &'a str),
    /// A run finished: (run number, of total, server, result).
    Run(usize, usize, &'a str, &'a HttpResult),
}

/// Runs the comparison.
pub fn run(
    cfg: &CompareConfig,
    stop: &crate::StopFlag,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<CompareResult, CompareError> {
    let tmp;
    let root = match &cfg.root {
        Some(r) => r.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("linerate-compare")
                .tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let fileset = |reason| CompareError::FileSet {
        dir: root.clone(),
        reason,
    };
    std::fs::create_dir_all(&root).map_err(fileset)?;
    workload::write_sizes(&root, &cfg.sizes).map_err(fileset)?;
    if let Some(d) = cfg.mix_dirs {
        workload::write_specweb99(&root, d).map_err(fileset)?;
    }
    readable_by_all(&root).map_err(fileset)?;
    let work = tempfile::Builder::new()
        .prefix("linerate-compare-servers")
        .tempdir()?;
    // Start each server once, for the whole comparison.
    let mut running = Vec::new();
    let mut skipped = Vec::new();
    let mut servers = Vec::new();
    let mut wanted = vec![Peer::Linerate];
    wanted.extend(cfg.servers.iter().copied().filter(|p| *p != Peer::Linerate));
    for peer in wanted {
        let exe = match peer {
            Peer::Linerate => Some(cfg.linerate_exe.clone()),
            p => p.find(),
        };
        let Some(exe) = exe else {
            let why = "not installed".to_string();
            on(Event::Skipped(peer.name(), &why));
            skipped.push((peer.name().to_string(), why));
            continue;
        };
        let launch = peers::Launch {
            peer,
            exe,
            root: root.clone(),
            port: peers::free_port()?,
            cpu: cfg.server_cpu,
            work: work.path().join(peer.name()),
            extra: if peer == Peer::Linerate {
                cfg.linerate_args.clone()
            } else {
                Vec::new()
            },
        };
        let r = match peers::start(&launch) {
            Ok(r) => r,
            // linerate is the baseline: without it there is nothing to compare.
            Err(reason) if peer == Peer::Linerate => {
                return Err(CompareError::Start {
                    server: peer.name(),
                    reason,
                })
            }
            Err(reason) => {
                let why = format!("did not start: {reason}");
                on(Event::Skipped(peer.name(), &why));
                skipped.push((peer.name().to_string(), why));
                continue;
            }
        };
        let info = ServerInfo {
            name: peer.name(),
            version: r.version.clone(),
            config: r.config.clone(),
        };
        on(Event::Started(&info));
        servers.push(info);
        running.push(r);
    }
    let mut workloads: Vec<Workload> = cfg
        .sizes
        .iter()
        .map(|&s| Workload::List(vec![workload::size_item("/", s)]))
        .collect();
    if let Some(d) = cfg.mix_dirs {
        workloads.push(Workload::specweb99("/", d));
    }
    let total = workloads.len() * running.len() * cfg.iterations;
    let mut done = 0;
    let labels: Vec<String> = servers.iter().map(|s| s.name.to_string()).collect();
    let mut out = Vec::new();
    for w in workloads {
        let w = Arc::new(w);
        let name = w.describe();
        let mut runs: Vec<Vec<HttpResult>> = vec![Vec::new(); running.len()];
        for _round in 0..cfg.iterations {
            for (i, server) in running.iter().enumerate() {
                if crate::stopped(stop) {
                    return Err(CompareError::Interrupted);
                }
                let load = HttpConfig {
                    target: server.addr,
                    host: server.addr.to_string(),
                    workload: Arc::clone(&w),
                    server_pid: Some(server.pid),
                    ..cfg.load.clone()
                };
                let r =
                    http::run(&load, stop, &mut |_, _| {}).map_err(|reason| CompareError::Run {
                        server: server.peer.name(),
                        workload: name.clone(),
                        reason,
                    })?;
                done += 1;
                on(Event::Run(done, total, server.peer.name(), &r));
                runs[i].push(r);
            }
        }
        let judged = http::judge(&labels, &runs, cfg.out.as_deref(), &name, cfg.confidence)?;
        out.push(WorkloadComparison {
            workload: name,
            runs,
            judged,
        });
    }
    drop(running);
    Ok(CompareResult {
        servers,
        skipped,
        workloads: out,
        iterations: cfg.iterations,
        confidence: cfg.confidence.percent(),
        connections: cfg.load.connections,
        threads: cfg.load.threads,
        seconds: match cfg.load.limit {
            http::Limit::Time(d) => Some(d.as_secs_f64()),
            http::Limit::Requests(_) => None,
        },
        client_cpus: cfg.load.cpus.clone(),
        server_cpu: cfg.server_cpu,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpus: crate::cpu::online_cpus(),
    })
}

/// Makes `dir` and everything in it readable by everyone: a peer's workers may run as
/// another user. The directories above are left alone; a temporary set lives under
/// the world-searchable temporary directory.
fn readable_by_all(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn widen(p: &std::path::Path, m: &std::fs::Metadata) -> std::io::Result<()> {
        let mode = m.permissions().mode();
        let want = if m.is_dir() { 0o755 } else { 0o644 };
        if mode & want != want {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | want))?;
        }
        Ok(())
    }
    fn walk(d: &std::path::Path) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let e = e?;
            let m = e.metadata()?;
            widen(&e.path(), &m)?;
            if m.is_dir() {
                walk(&e.path())?;
            }
        }
        Ok(())
    }
    std::fs::create_dir_all(dir)?;
    widen(dir, &std::fs::metadata(dir)?)?;
    walk(dir)
}
