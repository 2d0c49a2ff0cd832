//! `linerate bench stream`: one TCP connection sending for a time or a byte count, from
//! a file or memory, by one transmit strategy: netperf's TCP_STREAM and TCP_SENDFILE.
//!
//! The sender is this process (one thread, pinned when asked); the sink is a separate
//! `linerate sink` process, started here on loopback or in the sink namespace of a
//! [`Topology`](crate::netns::Topology), or any sink at `--host`. CPU is reported three ways:
//! the sender thread's own, the sink's own (from its report), and machine-wide from
//! `/proc/stat`, with softirq time apart.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_stat::Better;
use linerate_tx::{Counters, Progress, Source, Transmit, TxConfig, TxError, TxSocket};
use serde::Serialize;
use socket2::{Domain, Socket, Type};

use crate::cpu::{CpuFigure, MachineCpu};
pub use crate::netns::NetnsSettings;
use crate::netns::{self, NetnsError, Topology};
use crate::sink::{Discard, SinkReport};
use crate::StopFlag;

/// Where the bytes come from.
#[derive(Clone, Debug)]
pub enum StreamSource {
    /// An existing file, sent whole, again and again.
    File(PathBuf),
    /// A temporary file of this many bytes, made for the run and removed after it.
    TempFile(u64),
    /// A memory buffer of this many bytes.
    Memory(usize),
}

/// When to stop.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// Send for this long.
    Time(Duration),
    /// Send this many bytes.
    Bytes(u64),
}

/// Settings of one stream run.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// A running sink; `None`: start one here.
    pub target: Option<SocketAddr>,
    /// When to stop.
    pub limit: Limit,
    /// The bytes.
    pub source: StreamSource,
    /// Strategy and its knobs.
    pub tx: TxConfig,
    /// `SO_SNDBUF` of the sender (`-s`).
    pub sndbuf: Option<usize>,
    /// `SO_RCVBUF` of the sink (`-S`), for a sink started here.
    pub rcvbuf: Option<usize>,
    /// Pin the sender to this CPU.
    pub sender_cpu: Option<usize>,
    /// Pin a sink started here to this CPU (and steer its packets there under `--netns`).
    pub sink_cpu: Option<usize>,
    /// How a sink started here discards.
    pub discard: Discard,
    /// Run over two namespaces instead of loopback.
    pub netns: Option<NetnsSettings>,
    /// The `linerate` binary, to start the sink.
    pub linerate_exe: PathBuf,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The file cannot be used.
    #[error("{path}: {source}")]
    File {
        /// The path given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// No connection.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// Where.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The namespaces.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The sink process.
    #[error("sink: {0}")]
    Sink(String),
    /// The transmit.
    #[error("transmit: {0}")]
    Tx(#[from] TxError),
    /// Stopped by a signal.
    #[error("interrupted")]
    Interrupted,
    /// Anything else.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Machine-wide CPU over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MachineFigure {
    /// Busy CPU seconds over all CPUs.
    pub cpu_seconds: f64,
    /// Busy share of all CPUs, percent.
    pub utilization_percent: f64,
    /// Busy CPU microseconds per KB moved.
    pub service_demand_us_per_kb: f64,
    /// Of the busy time, softirq seconds (receive processing, ACKs).
    pub softirq_seconds: f64,
    /// Number of CPUs.
    pub cpus: usize,
}

impl MachineFigure {
    /// `machine`'s busy time over a run that moved `bytes`.
    pub fn of(machine: &MachineCpu, bytes: u64) -> MachineFigure {
        let hz = linerate_sys::cpu::clock_ticks_per_second() as f64;
        let busy = Duration::from_secs_f64(machine.busy_ticks() as f64 / hz);
        MachineFigure {
            cpu_seconds: busy.as_secs_f64(),
            utilization_percent: if machine.total_ticks() == 0 {
                0.0
            } else {
                100.0 * machine.busy_ticks() as f64 / machine.total_ticks() as f64
            },
            service_demand_us_per_kb: crate::cpu::service_demand(busy, bytes),
            softirq_seconds: machine.softirq_ticks as f64 / hz,
            cpus: crate::cpu::online_cpus(),
        }
    }
}

/// Per-megabyte rates of the engine's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PerMegabyte {
    /// System calls per MB (2^20 bytes).
    pub syscalls: f64,
    /// Writable events handled per MB.
    pub wakeups: f64,
    /// `EAGAIN` returns per MB.
    pub eagain: f64,
}

/// One run's result: a netperf row plus CPU three ways and the engine's counters.
#[derive(Clone, Debug, Serialize)]
pub struct StreamResult {
    /// Strategy name.
    pub strategy: String,
    /// Call sizing of the batched strategies.
    pub sizing: String,
    /// `TCP_NOTSENT_LOWAT` asked for (`None`: derived from the send buffer).
    pub notsent_lowat: Option<usize>,
    /// "loopback", "netns tso on", "netns tso off", or "remote".
    pub path: String,
    /// Where the bytes came from ("file PATH", "memory").
    pub source: String,
    /// Receiver `SO_RCVBUF` as its kernel reports it (0 when the sink sent no report).
    pub recv_socket_bytes: usize,
    /// Sender `SO_SNDBUF` as the kernel reports it at the end.
    pub send_socket_bytes: usize,
    /// Cap per call (0: none, batched strategies size calls from the free space).
    pub send_size_bytes: usize,
    /// Seconds from first send to the sink's report of the last byte.
    pub elapsed_seconds: f64,
    /// Bytes the sender's socket accepted.
    pub bytes: u64,
    /// Bytes the sink reported (equal to `bytes` on success).
    pub sink_bytes: Option<u64>,
    /// 10^6 bits/s.
    pub throughput_mbps: f64,
    /// The sender thread's own CPU.
    pub sender: CpuFigure,
    /// The sink's own CPU (from its report).
    pub receiver: Option<CpuFigure>,
    /// All CPUs.
    pub machine: MachineFigure,
    /// The engine's counters.
    pub counters: Counters,
    /// Counters per MB.
    pub per_mb: PerMegabyte,
}

/// One figure of a [`StreamResult`] by which series of runs are summarized and compared.
pub type Metric = crate::series::Metric<StreamResult>;

/// The figures `-i N --compare` and `--table` report for every variant or cell, in
/// their order: throughput, service demand three ways, calls and wake-ups per MB.
pub const METRICS: [Metric; 6] = [
    Metric {
        name: "throughput",
        unit: "10^6bits/s",
        value: |r| Some(r.throughput_mbps),
        better: Some(Better::Higher),
    },
    Metric {
        name: "sender_sd",
        unit: "sender us/KB",
        value: |r| Some(r.sender.service_demand_us_per_kb),
        better: Some(Better::Lower),
    },
    Metric {
        name: "receiver_sd",
        unit: "receiver us/KB",
        value: |r| Some(r.receiver.map_or(0.0, |c| c.service_demand_us_per_kb)),
        better: None,
    },
    Metric {
        name: "machine_sd",
        unit: "machine us/KB",
        value: |r| Some(r.machine.service_demand_us_per_kb),
        better: None,
    },
    Metric {
        name: "syscalls_per_mb",
        unit: "calls/MB",
        value: |r| Some(r.per_mb.syscalls),
        better: None,
    },
    Metric {
        name: "wakeups_per_mb",
        unit: "wake-ups/MB",
        value: |r| Some(r.per_mb.wakeups),
        better: None,
    },
];

/// A sink process started for one run; killed on drop if still there.
pub(crate) struct SinkChild {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it prints after its first line, read as it comes (so it never blocks on a
    /// full pipe), until it exits.
    rest: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl SinkChild {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for it to exit (killed after 5 s) and gives the lines it printed after
    /// its first.
    pub fn finish(mut self) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.rest
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for SinkChild {
    fn drop(&mut self) {
        // It exits by itself after its connections; give it a moment, then insist.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_sink(cfg: &StreamConfig, topo: Option<&Topology>) -> Result<SinkChild, StreamError> {
    let mut args: Vec<String> = vec!["--connections".into(), "1".into(), "--quiet".into()];
    args.extend([
        "--discard".into(),
        match cfg.discard {
            Discard::Read => "read".into(),
            Discard::Splice => "splice".into(),
        },
    ]);
    if let Some(n) = cfg.rcvbuf {
        args.extend(["-S".into(), n.to_string()]);
    }
    if let Some(c) = cfg.sink_cpu {
        args.extend(["--cpu".into(), c.to_string()]);
    }
    spawn_sink(&cfg.linerate_exe, topo, &args)
}

/// Starts `linerate sink --listen ADDR --quiet ARGS...` (on loopback, or in the sink
/// namespace of `topo`) and waits for the address it says it listens on.
pub(crate) fn spawn_sink(
    exe: &Path,
    topo: Option<&Topology>,
    args: &[String],
) -> Result<SinkChild, StreamError> {
    let listen = match topo {
        Some(_) => format!("{}:0", netns::SINK_ADDR),
        None => "127.0.0.1:0".to_string(),
    };
    let mut cmd = match topo {
        Some(t) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &t.sink_ns]).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args(["sink", "--listen", &listen]);
    cmd.args(args);
    cmd.stdout(Stdio::piped()).stdin(Stdio::null());
    let child = cmd
        .spawn()
        .map_err(|e| StreamError::Sink(format!("cannot start {}: {e}", exe.display())))?;
    // From here on the guard kills the sink on every way out.
    let mut guard = SinkChild {
        child,
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        rest: None,
    };
    let stdout = guard
        .child
        .stdout
        .take()
        .ok_or_else(|| StreamError::Sink("no stdout".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    guard.rest = Some(std::thread::spawn(move || {
        let mut out = BufReader::new(stdout);
        let mut line = String::new();
        let r = out.read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
        out.lines().map_while(Result::ok).collect()
    }));
    let line = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(r) => r?,
        Err(_) => {
            return Err(StreamError::Sink(
                "did not say where it listens within 10 s".into(),
            ))
        }
    };
    match line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
    {
        Some(addr) => {
            guard.addr = addr;
            Ok(guard)
        }
        None => Err(StreamError::Sink(format!(
            "did not start (said {:?})",
            line.trim()
        ))),
    }
}

/// A temporary file of `size` bytes of varied content; removed when dropped.
pub fn make_temp_file(size: u64) -> io::Result<tempfile::NamedTempFile> {
    let mut f = tempfile::Builder::new()
        .prefix("linerate-stream-")
        .tempfile()?;
    let mut block = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for chunk in block.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.flush()?;
    Ok(f)
}

/// Runs one stream measurement.
pub fn run(cfg: &StreamConfig, stop: &StopFlag) -> Result<StreamResult, StreamError> {
    let mut _temp = None;
    let (source, label) = match &cfg.source {
        StreamSource::File(p) => (open_source(p)?, format!("file {}", p.display())),
        StreamSource::TempFile(n) => {
            let t = make_temp_file(*n)?;
            let s = open_source(t.path())?;
            _temp = Some(t);
            (s, format!("temporary file of {n} bytes"))
        }
        StreamSource::Memory(n) => (
            Source::memory(vec![0x5a; *n].into()),
            format!("memory ({n} bytes)"),
        ),
    };
    let topo = match cfg.netns {
        Some(s) => Some(Topology::create(s.tso, cfg.sink_cpu, None)?),
        None => None,
    };
    let sink = match cfg.target {
        Some(_) => None,
        None => Some(start_sink(cfg, topo.as_ref())?),
    };
    let target = match (&sink, cfg.target) {
        (Some(s), _) => s.addr,
        (None, Some(t)) => t,
        (None, None) => unreachable!("a sink is started when no target is given"),
    };
    let path = match (cfg.netns, cfg.target) {
        (Some(s), _) => s.describe(),
        (None, Some(_)) => "remote".to_string(),
        (None, None) => "loopback".to_string(),
    };
    let sender_ns = topo.as_ref().map(|t| Topology::path(&t.sender_ns));
    // The sender runs on a thread of its own so that entering the sender namespace and
    // pinning do not touch the rest of the process.
    let result = std::thread::scope(|s| {
        s.spawn(|| send(cfg, &source, target, sender_ns.as_deref(), stop))
            .join()
            .unwrap_or_else(|_| Err(StreamError::Sink("sender thread panicked".into())))
    })?;
    drop(sink);
    drop(topo);
    Ok(StreamResult {
        path,
        source: label,
        ..result
    })
}

fn open_source(p: &Path) -> Result<Source, StreamError> {
    let err = |source| StreamError::File {
        path: p.to_path_buf(),
        source,
    };
    let file = File::open(p).map_err(err)?;
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    if meta.len() == 0 {
        return Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "file is empty",
        )));
    }
    Ok(Source::File {
        file: Arc::new(file),
        offset: 0,
        len: meta.len(),
    })
}

fn send(
    cfg: &StreamConfig,
    source: &Source,
    target: SocketAddr,
    netns_path: Option<&Path>,
    stop: &StopFlag,
) -> Result<StreamResult, StreamError> {
    use linerate_sys::net::poll_one;
    use linerate_sys::Events;
    if let Some(p) = netns_path {
        linerate_sys::ns::enter_net_namespace(p)?;
    }
    if let Some(c) = cfg.sender_cpu {
        linerate_sys::cpu::pin_thread_to_cpu(c)?;
    }
    let sock = Socket::new(Domain::for_address(target), Type::STREAM, None)?;
    if let Some(n) = cfg.sndbuf {
        sock.set_send_buffer_size(n)?;
    }
    sock.connect_timeout(&target.into(), Duration::from_secs(5))
        .map_err(|source| StreamError::Connect {
            addr: target,
            source,
        })?;
    sock.set_nonblocking(true)?;
    let conn: TcpStream = sock.into();
    let fd = conn.as_fd();
    let mut txs = TxSocket::new(fd, cfg.tx.clone())?;

    let machine0 = MachineCpu::now()?;
    let cpu0 = linerate_sys::cpu::thread_cpu()?;
    let start = Instant::now();
    let deadline = match cfg.limit {
        Limit::Time(d) => Some(start + d),
        Limit::Bytes(_) => None,
    };
    let byte_limit = match cfg.limit {
        Limit::Bytes(n) => n,
        Limit::Time(_) => u64::MAX,
    };
    let mut sent = 0u64;
    'outer: while sent < byte_limit {
        let src = limit_source(source, byte_limit - sent);
        let mut tx = Transmit::new(src);
        loop {
            if crate::stopped(stop) {
                return Err(StreamError::Interrupted);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                sent += tx.sent();
                break 'outer;
            }
            match tx.advance(fd, &mut txs)? {
                Progress::Done => {
                    sent += tx.sent();
                    break;
                }
                Progress::Blocked => {
                    let ev = poll_one(fd, Events::OUT, 200)?;
                    if ev.any(Events::ERR) {
                        txs.reap(fd)?;
                    }
                }
            }
        }
    }
    // Zero-copy buffers are released only by their completions.
    let drain_deadline = Instant::now() + Duration::from_secs(10);
    while txs.completions_owed() > 0 && Instant::now() < drain_deadline && !crate::stopped(stop) {
        let ev = poll_one(fd, Events::NONE, 100)?;
        if ev.any(Events::ERR) {
            txs.reap(fd)?;
        }
    }
    conn.set_nonblocking(false)?;
    conn.shutdown(std::net::Shutdown::Write)?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reply = String::new();
    let report: Option<SinkReport> = match (&conn).read_to_string(&mut reply) {
        Ok(_) => serde_json::from_str(reply.trim()).ok(),
        Err(_) => None,
    };
    let elapsed = start.elapsed();
    let cpu = linerate_sys::cpu::thread_cpu()?.since(&cpu0);
    let machine = MachineCpu::now()?.since(&machine0);
    if crate::stopped(stop) {
        return Err(StreamError::Interrupted);
    }
    if let Some(r) = &report {
        if r.bytes != sent {
            return Err(StreamError::Sink(format!(
                "sink received {} bytes, sender sent {sent}",
                r.bytes
            )));
        }
    }
    let sndbuf = linerate_sys::net::get_option(fd, linerate_sys::net::SockOpt::SendBuffer)?;
    let c = *txs.counters();
    let mb = sent as f64 / (1u64 << 20) as f64;
    let per = |x: u64| if mb > 0.0 { x as f64 / mb } else { 0.0 };
    Ok(StreamResult {
        strategy: cfg.tx.strategy.to_string(),
        sizing: cfg.tx.sizing.to_string(),
        notsent_lowat: cfg.tx.notsent_lowat,
        path: String::new(),
        source: String::new(),
        recv_socket_bytes: report.as_ref().map_or(0, |r| r.rcvbuf_bytes),
        send_socket_bytes: sndbuf.max(0) as usize,
        send_size_bytes: send_size(&cfg.tx),
        elapsed_seconds: elapsed.as_secs_f64(),
        bytes: sent,
        sink_bytes: report.as_ref().map(|r| r.bytes),
        throughput_mbps: sent as f64 * 8.0 / elapsed.as_secs_f64() / 1e6,
        sender: CpuFigure::new(cpu.total(), elapsed, sent),
        receiver: report.as_ref().map(|r| {
            CpuFigure::new(
                Duration::from_secs_f64(r.cpu_user_seconds + r.cpu_system_seconds),
                elapsed,
                sent,
            )
        }),
        machine: MachineFigure::of(&machine, sent),
        counters: c,
        per_mb: PerMegabyte {
            syscalls: per(c.syscalls),
            wakeups: per(c.wakeups),
            eagain: per(c.eagain),
        },
    })
}

/// The cap per call a strategy works with, for the report's "send size" column.
fn send_size(tx: &TxConfig) -> usize {
    use linerate_tx::Strategy;
    let own = match tx.strategy {
        Strategy::Copy => 64 * 1024,
        Strategy::Sendfile4k => 4096,
        Strategy::SendfileChunked { chunk_bytes } => chunk_bytes,
        Strategy::SendfileBatched | Strategy::Splice | Strategy::Zerocopy => 0,
    };
    match (tx.max_call_bytes, own) {
        (Some(m), 0) => m,
        (Some(m), o) => m.min(o),
        (None, o) => o,
    }
}

/// `source` cut to at most `max` bytes.
fn limit_source(source: &Source, max: u64) -> Source {
    match source {
        Source::File { file, offset, len } => Source::File {
            file: Arc::clone(file),
            offset: *offset,
            len: (*len).min(max),
        },
        Source::Memory { buf, offset, len } => Source::Memory {
            buf: Arc::clone(buf),
            offset: *offset,
            len: (*len as u64).min(max) as usize,
        },
    }
}
