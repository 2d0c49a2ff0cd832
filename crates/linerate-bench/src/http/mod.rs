//! `bench http`: an HTTP/1.1, HTTP/2 and HTTP/3 load generator (wrk's and h2load's role) with
//! server CPU accounting.
//!
//! Threads each drive an epoll loop over their share of the connections (see
//! [`client`]); the calling thread starts them together, reports progress, and reads
//! the server's CPU (its whole process tree, from `/proc`) at the start and the end of
//! the measured interval, so a result says what each request cost the server as well as
//! how fast it came back.

pub(crate) mod client;
mod h2;
pub mod h2load;
mod h3;
mod judge;
pub mod tls;
pub mod workload;
pub mod wrk;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

pub use crate::series::Judged;
pub use judge::{judge, METRICS};
pub use workload::{Item, Workload};

/// How long a run lasts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// For this long.
    Time(Duration),
    /// Until this many requests have been answered.
    Requests(u64),
}

/// One `bench http` run.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The server.
    pub target: SocketAddr,
    /// The `Host` field to send.
    pub host: String,
    /// What to ask for.
    pub workload: Arc<Workload>,
    /// Connections, over all threads.
    pub connections: usize,
    /// Threads.
    pub threads: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// One request per connection (`Connection: close`).
    pub close: bool,
    /// Requests per second over all connections (open loop), or as fast as answered.
    pub rate: Option<f64>,
    /// Duration or request count.
    pub limit: Limit,
    /// Read bodies and compare their CRC-32 (otherwise bodies are discarded uncopied
    /// and only their lengths are checked).
    pub checksum: bool,
    /// A request with no progress this long is an error.
    pub timeout: Duration,
    /// Extra request header lines (`Name: value`).
    pub headers: Vec<String>,
    /// CPUs to pin the threads to, round-robin (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Server process whose CPU (with its descendants) is measured.
    pub server_pid: Option<u32>,
    /// The CPU the server is pinned to: its whole busy time is reported too
    /// ([`CoreCpu`]), with `server_pid`.
    pub server_core: Option<usize>,
    /// Seeds the SpecWeb99 draw.
    pub seed: u64,
    /// `https://`: how connections speak TLS.
    pub tls: Option<tls::ClientTls>,
    /// Speak HTTP/2 (prior knowledge on `http://`, ALPN `h2` on `https://`), taking
    /// DATA frames of at most this many bytes; `pipeline` is then the streams in
    /// flight per connection.
    pub h2: Option<u32>,
    /// Speak HTTP/3 (QUIC to the URL's port over UDP; `https://` only); `pipeline`
    /// is then the streams in flight per connection.
    pub h3: bool,
}

/// Failures that end a run.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Not one response came back, and this was the first error.
    #[error("no responses: {0}")]
    NoResponses(String),
    /// The server process could not be measured.
    #[error("--server-pid {pid}: {reason}")]
    ServerPid {
        /// The pid.
        pid: u32,
        /// Why.
        reason: std::io::Error,
    },
    /// Interrupted by a signal.
    #[error("interrupted")]
    Interrupted,
    /// HTTP/3 asked of an `http://` URL.
    #[error("--h3: QUIC needs an https:// URL")]
    NeedsTls,
    /// QUIC's TLS settings could not be made.
    #[error("--h3: {0}")]
    Quic(String),
    /// A system call failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Errors by kind (each also ends the connection it happened on).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Errors {
    /// Connections refused or failed to open.
    pub connect: u64,
    /// Connections reset or closed mid-response, or failed sends.
    pub read: u64,
    /// Requests with no progress within the timeout.
    pub timeout: u64,
    /// Unparseable or unframed responses.
    pub bad_response: u64,
    /// Bodies of the wrong length.
    pub length: u64,
    /// Bodies whose checksum differs.
    pub checksum: u64,
}

impl Errors {
    /// All errors.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.timeout + self.bad_response + self.length + self.checksum
    }

    fn add(&mut self, o: &Errors) {
        self.connect += o.connect;
        self.read += o.read;
        self.timeout += o.timeout;
        self.bad_response += o.bad_response;
        self.length += o.length;
        self.checksum += o.checksum;
    }
}

/// Latency percentiles, microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
    /// The distribution: (percentile, microseconds) at HdrHistogram's quantile
    /// iteration (ticks halve the distance to 100% each step), for plots.
    pub distribution: Vec<(f64, u64)>,
}

/// A server's CPU over the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerCpu {
    /// The measured process (with its descendants).
    pub pid: u32,
    /// CPU seconds used.
    pub cpu_seconds: f64,
    /// As a percentage of one CPU.
    pub percent_of_one_cpu: f64,
    /// CPU microseconds per response.
    pub us_per_request: f64,
    /// CPU microseconds per KB (1024 bytes) of response bodies (service demand).
    pub us_per_kb: f64,
    /// The server's CPU as a whole, when it is pinned to one (`server_core`).
    pub core: Option<CoreCpu>,
    /// Segments, retransmits and context switches, per MB of bodies.
    pub kernel: Option<crate::kernel::KernelWork>,
}

/// The busy time of the CPU a server is pinned to, from `/proc/stat`: the server's own
/// time and the softirq work done there for its packets, whichever task it interrupted
/// (over `--netns` the ACKs the server receives are processed there, as a NIC's
/// interrupt would be on the server's host; a process's own time misses most of it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoreCpu {
    /// The CPU.
    pub cpu: usize,
    /// Busy seconds (user, system, irq, softirq).
    pub busy_seconds: f64,
    /// Of which softirq.
    pub softirq_seconds: f64,
    /// Busy, as a percentage of the run.
    pub percent_busy: f64,
    /// Busy microseconds per response.
    pub us_per_request: f64,
    /// Busy microseconds per KB of response bodies.
    pub us_per_kb: f64,
}

/// One reading of a server's CPU: its process tree's, and its pinned CPU's counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerReading {
    process: Duration,
    core: Option<crate::cpu::MachineCpu>,
    kernel: Option<crate::kernel::KernelReading>,
}

impl ServerReading {
    /// Reads `pid`'s process tree and, with `core`, that CPU's counters.
    pub(crate) fn now(pid: u32, core: Option<usize>) -> Result<ServerReading, HttpError> {
        let process = crate::cpu::process_tree_cpu(pid)
            .map_err(|reason| HttpError::ServerPid { pid, reason })?;
        let core = core.map(crate::cpu::MachineCpu::of_cpu).transpose()?;
        // Figures to read a pattern by, not to fail a run for.
        let kernel = crate::kernel::KernelReading::now(pid).ok();
        Ok(ServerReading {
            process,
            core,
            kernel,
        })
    }
}

impl ServerCpu {
    /// The figures of `pid` from its CPU readings before and after a run of `secs`
    /// seconds that got `requests` answers with `body_bytes` of bodies.
    pub(crate) fn between(
        cfg: &HttpConfig,
        before: Option<ServerReading>,
        after: Option<ServerReading>,
        secs: f64,
        requests: u64,
        body_bytes: u64,
    ) -> Option<ServerCpu> {
        let (pid, before, after) = (cfg.server_pid?, before?, after?);
        let cpu = after.process.saturating_sub(before.process);
        let core = match (cfg.server_core, before.core, after.core) {
            (Some(n), Some(b), Some(a)) => {
                let d = a.since(&b);
                let hz = linerate_sys::cpu::clock_ticks_per_second().max(1) as f64;
                let busy = Duration::from_secs_f64(d.busy_ticks() as f64 / hz);
                Some(CoreCpu {
                    cpu: n,
                    busy_seconds: busy.as_secs_f64(),
                    softirq_seconds: d.softirq_ticks as f64 / hz,
                    percent_busy: 100.0 * busy.as_secs_f64() / secs,
                    us_per_request: per(busy, requests),
                    us_per_kb: crate::cpu::service_demand(busy, body_bytes),
                })
            }
            _ => None,
        };
        Some(ServerCpu {
            pid,
            cpu_seconds: cpu.as_secs_f64(),
            percent_of_one_cpu: 100.0 * cpu.as_secs_f64() / secs,
            us_per_request: per(cpu, requests),
            us_per_kb: crate::cpu::service_demand(cpu, body_bytes),
            core,
            kernel: match (&before.kernel, &after.kernel) {
                (Some(b), Some(a)) => Some(crate::kernel::KernelWork::between(b, a, body_bytes)),
                _ => None,
            },
        })
    }
}

/// The client's own CPU over the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClientCpu {
    /// CPU seconds used by this process.
    pub cpu_seconds: f64,
    /// CPU microseconds per response.
    pub us_per_request: f64,
}

/// The result of one run.
#[derive(Clone, Debug, Serialize)]
pub struct HttpResult {
    /// `http://ADDR`.
    pub target: String,
    /// What was asked for.
    pub workload: String,
    /// Connections.
    pub connections: usize,
    /// Threads.
    pub threads: usize,
    /// Pipeline depth (HTTP/2: streams in flight per connection).
    pub pipeline: usize,
    /// Keep-alive (false: one request per connection).
    pub keep_alive: bool,
    /// The protocol: "http/1.1", "h2" or "h3".
    pub protocol: &'static str,
    /// The target rate, if paced.
    pub rate: Option<f64>,
    /// Seconds measured.
    pub elapsed_seconds: f64,
    /// Responses completed.
    pub requests: u64,
    /// Responses per second.
    pub requests_per_second: f64,
    /// Body bytes received.
    pub body_bytes: u64,
    /// Head and body bytes received.
    pub bytes: u64,
    /// Body throughput, 10^6 bytes per second.
    pub megabytes_per_second: f64,
    /// Latency, microseconds.
    pub latency_us: Latency,
    /// Responses by status code.
    pub statuses: BTreeMap<u16, u64>,
    /// Errors by kind.
    pub errors: Errors,
    /// The first error, in words.
    pub first_error: Option<String>,
    /// Connections opened.
    pub connections_opened: u64,
    /// Requests sent again because the server closed a kept-alive connection as they
    /// went out (no byte of an answer had come).
    pub retried: u64,
    /// TLS handshakes completed (`https://`; each connection's first, full or resumed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_handshakes: Option<u64>,
    /// With --h3: the ACK_FREQUENCY frames the server sent (draft-ietf-quic-ack-frequency:
    /// it asked the client to acknowledge less often).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_frequency_frames: Option<u64>,
    /// The server's CPU, with `--server-pid`.
    pub server: Option<ServerCpu>,
    /// This process's CPU.
    pub client: ClientCpu,
    /// When wrk made the run: its two status counts (it records no statuses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wrk: Option<wrk::WrkStatuses>,
}

impl HttpResult {
    /// Responses whose status is not 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.statuses
            .iter()
            .filter(|(s, _)| !(200..300).contains(*s))
            .map(|(_, n)| n)
            .sum::<u64>()
            + self.wrk.map_or(0, |w| w.from_400)
    }
}

/// HTTP/2 field blocks for each item (extra headers as literals, names lower-cased).
fn h2_blocks(cfg: &HttpConfig) -> Vec<Vec<u8>> {
    cfg.workload
        .items()
        .iter()
        .map(|it| {
            let mut b = h2::request_block(&cfg.host, &it.path, cfg.tls.is_some());
            for h in &cfg.headers {
                if let Some((n, v)) = h.split_once(':') {
                    h2::literal_field(&mut b, &n.trim().to_ascii_lowercase(), v.trim());
                }
            }
            b
        })
        .collect()
}

/// With `--h3`: QUIC's settings from the run's TLS ones, and each item's request.
fn h3_setup(cfg: &HttpConfig) -> Result<Option<h3::H3Setup>, HttpError> {
    if !cfg.h3 {
        return Ok(None);
    }
    let tls = cfg.tls.as_ref().ok_or(HttpError::NeedsTls)?;
    let extra: Vec<(String, String)> = cfg
        .headers
        .iter()
        .filter_map(|h| h.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Some(h3::H3Setup {
        config: tls.h3().map_err(HttpError::Quic)?,
        server_name: tls.server_name(),
        frames: cfg
            .workload
            .items()
            .iter()
            .map(|it| h3::request_frame(&cfg.host, &it.path, &extra))
            .collect(),
    }))
}

/// Request bytes for each item.
fn build_requests(cfg: &HttpConfig) -> Vec<Vec<u8>> {
    cfg.workload
        .items()
        .iter()
        .map(|it| {
            let mut r = format!("GET {} HTTP/1.1\r\nHost: {}\r\n", it.path, cfg.host);
            for h in &cfg.headers {
                r.push_str(h);
                r.push_str("\r\n");
            }
            if cfg.close {
                r.push_str("Connection: close\r\n");
            }
            r.push_str("\r\n");
            r.into_bytes()
        })
        .collect()
}

/// Runs the load; `progress(completed, elapsed)` is called about ten times a second
/// from the calling thread, which is pinned to the first of the client's CPUs if any
/// are given.
pub fn run(
    cfg: &HttpConfig,
    stop: &crate::StopFlag,
    progress: &mut dyn FnMut(u64, Duration),
) -> Result<HttpResult, HttpError> {
    let threads = cfg.threads.clamp(1, cfg.connections.max(1));
    let shared = Arc::new(client::Shared {
        target: cfg.target,
        workload: Arc::clone(&cfg.workload),
        requests: build_requests(cfg),
        pipeline: if cfg.close { 1 } else { cfg.pipeline.max(1) },
        close: cfg.close,
        checksum: cfg.checksum,
        timeout: cfg.timeout,
        seed: cfg.seed,
        limit: cfg.limit,
        issued: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        stop: Arc::clone(stop),
        reads_per_event: client::READS_PER_EVENT,
        tls: match (&cfg.tls, cfg.h2) {
            (Some(t), Some(_)) => Some(t.clone().h2()),
            (t, None) => t.clone(),
            (None, Some(_)) => None,
        },
        h2: cfg.h2.map(|max_frame| client::H2Setup {
            blocks: h2_blocks(cfg),
            max_frame,
        }),
        h3: h3_setup(cfg)?,
    });
    let rate_per_conn = cfg.rate.map(|r| r / cfg.connections.max(1) as f64);
    let server_cpu = |pid: u32| ServerReading::now(pid, cfg.server_core);
    // The calling thread waits on the client's CPUs too, never beside the server.
    if let Some(&c) = cfg.cpus.first() {
        linerate_sys::cpu::pin_thread_to_cpu(c)?;
    }
    // Everything that can fail is done before a thread exists.
    let server0 = cfg.server_pid.map(server_cpu).transpose()?;
    let client0 = linerate_sys::cpu::process_cpu()?;
    // Each thread waits for the start time; if spawning fails, the senders are dropped
    // and the threads already made end without running.
    let mut handles = Vec::with_capacity(threads);
    let mut starts = Vec::with_capacity(threads);
    for t in 0..threads {
        let conns = cfg.connections / threads + usize::from(t < cfg.connections % threads);
        let first = (0..t)
            .map(|u| cfg.connections / threads + usize::from(u < cfg.connections % threads))
            .sum();
        let shared = Arc::clone(&shared);
        let (tx, rx) = std::sync::mpsc::channel::<Instant>();
        let cpu = (!cfg.cpus.is_empty()).then(|| cfg.cpus[t % cfg.cpus.len()]);
        let limit = cfg.limit;
        let total = cfg.connections;
        handles.push(
            std::thread::Builder::new()
                .name(format!("http-load-{t}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        linerate_sys::cpu::pin_thread_to_cpu(c)?;
                    }
                    let Ok(start) = rx.recv() else {
                        return Ok(None);
                    };
                    let end = match limit {
                        Limit::Time(d) => Some(start + d),
                        Limit::Requests(_) => None,
                    };
                    let part = client::Part {
                        conns,
                        first,
                        total,
                        rate_per_conn,
                        start,
                        end,
                    };
                    match &shared.h3 {
                        Some(_) => h3::run_thread(&shared, part),
                        None => client::run_thread(&shared, part),
                    }
                    .map(Some)
                })
                .map_err(HttpError::Io)?,
        );
        starts.push(tx);
    }
    let start = Instant::now();
    for tx in starts {
        let _ = tx.send(start);
    }
    // Progress while the threads run; their own finish times make the elapsed time.
    let mut last_progress = start;
    while !handles.iter().all(|h| h.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
        if last_progress.elapsed() >= Duration::from_millis(100) {
            last_progress = Instant::now();
            progress(shared.completed.load(Ordering::Relaxed), start.elapsed());
        }
    }
    let server1 = cfg.server_pid.map(server_cpu).transpose();
    let client1 = linerate_sys::cpu::process_cpu();
    let mut stats = Vec::with_capacity(threads);
    let mut failed = None;
    for h in handles {
        match h.join().expect("load thread panicked") {
            Ok(Some(s)) => stats.push(s),
            Ok(None) => {}
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        return Err(HttpError::Io(e));
    }
    let (server1, client1) = (server1?, client1?);
    let elapsed = stats
        .iter()
        .map(|s| s.finished.saturating_duration_since(start))
        .max()
        .unwrap_or_default();
    if crate::stopped(stop) {
        return Err(HttpError::Interrupted);
    }
    let mut hist: Histogram<u64> =
        Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds");
    let mut requests = 0;
    let mut body_bytes = 0;
    let mut bytes = 0;
    let mut statuses = BTreeMap::new();
    let mut errors = Errors::default();
    let mut opened = 0;
    let mut retried = 0;
    let mut handshakes = 0;
    let mut ack_frequency = 0;
    let mut first_error = None;
    for s in &stats {
        let _ = hist.add(&s.latency_us);
        requests += s.requests;
        body_bytes += s.body_bytes;
        bytes += s.bytes;
        for (k, v) in &s.statuses {
            *statuses.entry(*k).or_insert(0) += v;
        }
        errors.add(&s.errors);
        opened += s.connections;
        retried += s.retried;
        handshakes += s.handshakes;
        ack_frequency += s.ack_frequency_frames;
        if first_error.is_none() {
            first_error.clone_from(&s.first_error);
        }
    }
    if requests == 0 {
        if let Some(e) = first_error {
            return Err(HttpError::NoResponses(e));
        }
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    let server = ServerCpu::between(cfg, server0, server1, secs, requests, body_bytes);
    let client_cpu = client1.since(&client0).total();
    Ok(HttpResult {
        target: format!(
            "{}://{}",
            if cfg.tls.is_some() { "https" } else { "http" },
            cfg.target
        ),
        workload: cfg.workload.describe(),
        connections: cfg.connections,
        threads,
        pipeline: shared.pipeline,
        keep_alive: !cfg.close,
        protocol: if cfg.h3 {
            "h3"
        } else if cfg.h2.is_some() {
            "h2"
        } else {
            "http/1.1"
        },
        rate: cfg.rate,
        elapsed_seconds: secs,
        requests,
        requests_per_second: requests as f64 / secs,
        body_bytes,
        bytes,
        megabytes_per_second: body_bytes as f64 / secs / 1e6,
        latency_us: latency(&hist),
        statuses,
        errors,
        first_error,
        connections_opened: opened,
        retried,
        tls_handshakes: cfg.tls.is_some().then_some(handshakes),
        ack_frequency_frames: cfg.h3.then_some(ack_frequency),
        server,
        client: ClientCpu {
            cpu_seconds: client_cpu.as_secs_f64(),
            us_per_request: per(client_cpu, requests),
        },
        wrk: None,
    })
}

fn per(cpu: Duration, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        cpu.as_secs_f64() * 1e6 / n as f64
    }
}

fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let distribution = h
        .iter_quantiles(1)
        .map(|v| {
            (
                100.0 * v.quantile_iterated_to(),
                h.highest_equivalent(v.value_iterated_to()),
            )
        })
        .collect();
    Latency {
        mean: h.mean(),
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        distribution,
    }
}
