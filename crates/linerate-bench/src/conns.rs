//! `linerate bench conns`: tcpp's model of many connections. `-p` client threads
//! (tcpp's processes), each holding `-c` connections open at once, each connection
//! moving `-b` bytes, from the client to a sink (`--send`) or from a source to the
//! client (`--receive`, the sink started with `--send BYTES`). It reports what tcpp
//! reports, connections and bytes per second over the elapsed time, and the CPU of
//! each side with its service demand, as `bench stream` does.
//!
//! The clients are threads of this process, each on its own edge-triggered event loop
//! (`linerate-event`), pinned when asked. The other side is a `linerate sink` process
//! started here, on loopback or in the sink namespace of a
//! [`Topology`](crate::netns::Topology), with its own workers (`--sink-workers`,
//! `SO_REUSEPORT`), or any sink at `--host`. The sink's CPU is read from
//! `/proc/PID/stat` before and after; every connection's byte count is checked: the
//! sink's report line says what it received, and a receiving client counts what came.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use linerate_event::{Driver, EpollDriver, Interest, Ready};
use linerate_stat::Better;
use serde::Serialize;
use socket2::{Domain, SockAddr, Socket, Type};

use crate::cpu::{CpuFigure, MachineCpu};
use crate::netns::{NetnsSettings, Topology};
use crate::sink::SinkReport;
use crate::stream::{MachineFigure, StreamError};
use crate::StopFlag;

/// Which way the bytes go, seen from the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The client sends, the sink discards.
    Send,
    /// The sink sends (`linerate sink --send`), the client discards.
    Receive,
}

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct ConnsConfig {
    /// A running sink (for `Receive`, one started with `--send` of the same byte
    /// count); `None`: start one here.
    pub target: Option<SocketAddr>,
    /// Client threads.
    pub processes: usize,
    /// Connections each client thread holds open at once.
    pub connections: usize,
    /// Bytes each connection moves.
    pub bytes: u64,
    /// Which way.
    pub direction: Direction,
    /// Client thread i is pinned to `client_cpus[i % len]` (empty: not pinned).
    pub client_cpus: Vec<usize>,
    /// Pin a sink started here to this CPU (and steer its packets there under
    /// `--netns`).
    pub sink_cpu: Option<usize>,
    /// Workers of a sink started here.
    pub sink_workers: usize,
    /// Run over two namespaces instead of loopback.
    pub netns: Option<NetnsSettings>,
    /// With `netns`: a multi-queue link over these CPUs
    /// ([`Topology::create_multiqueue`]); empty: one queue, steered to the sink's CPU.
    pub queues: Vec<usize>,
    /// A sink started here pins its workers one per CPU (`linerate sink --steer`)
    /// and, with `Some(true)`, steers each connection to the worker on its receive
    /// CPU; `None`: its workers are not pinned.
    pub sink_steer: Option<bool>,
    /// The `linerate` binary, to start the sink.
    pub linerate_exe: PathBuf,
}

/// One run's result.
#[derive(Clone, Debug, Serialize)]
pub struct ConnsResult {
    /// "send" or "receive".
    pub direction: Direction,
    /// "loopback", "netns tso on", "netns tso off", or "remote".
    pub path: String,
    /// Client threads.
    pub processes: usize,
    /// Connections per client thread.
    pub connections_per_process: usize,
    /// Bytes per connection.
    pub bytes_per_connection: u64,
    /// Workers of the sink (0: a sink given with `--host`).
    pub sink_workers: usize,
    /// Connections that moved all their bytes.
    pub connections: u64,
    /// Bytes moved in all.
    pub bytes: u64,
    /// From the first connect to the last connection's end.
    pub elapsed_seconds: f64,
    /// Connections per second over the elapsed time.
    pub connections_per_second: f64,
    /// 10^6 bits/s.
    pub throughput_mbps: f64,
    /// The client threads' own CPU, summed.
    pub client: CpuFigure,
    /// The sink process's CPU (a sink started here).
    pub sink: Option<CpuFigure>,
    /// All CPUs.
    pub machine: MachineFigure,
    /// Connections a pinned sink worker served on the CPU that processed their
    /// packets, and elsewhere (a sink started here with `--steer`).
    pub sink_on_receive_cpu: Option<u64>,
    pub sink_off_receive_cpu: Option<u64>,
    /// Whether the sink steered connections to their receive CPU's worker (`None`:
    /// its workers were not pinned).
    pub sink_steer: Option<bool>,
    /// Receive queues of the link (`--queues`; 1 otherwise).
    pub queues: usize,
}

/// One figure of a [`ConnsResult`] by which series of runs are compared.
pub type Metric = crate::series::Metric<ConnsResult>;

/// The figures `-i N --compare` reports for every variant, in their order.
pub const METRICS: [Metric; 5] = [
    Metric {
        name: "throughput",
        unit: "10^6bits/s",
        value: |r| Some(r.throughput_mbps),
        better: Some(Better::Higher),
    },
    Metric {
        name: "connections_per_second",
        unit: "conn/s",
        value: |r| Some(r.connections_per_second),
        better: Some(Better::Higher),
    },
    Metric {
        name: "client_sd",
        unit: "client us/KB",
        value: |r| Some(r.client.service_demand_us_per_kb),
        better: Some(Better::Lower),
    },
    Metric {
        name: "sink_sd",
        unit: "sink us/KB",
        value: |r| r.sink.map(|c| c.service_demand_us_per_kb),
        better: Some(Better::Lower),
    },
    Metric {
        name: "machine_sd",
        unit: "machine us/KB",
        value: |r| Some(r.machine.service_demand_us_per_kb),
        better: None,
    },
];

/// No byte moved on any connection of a client thread for this long: the run fails.
const STALL: Duration = Duration::from_secs(30);
/// Bytes per `send` and per `read`.
const IO_BYTES: usize = 256 << 10;

/// Runs one measurement.
pub fn run(cfg: &ConnsConfig, stop: &StopFlag) -> Result<ConnsResult, StreamError> {
    let total = (cfg.processes * cfg.connections) as u64;
    let topo = match cfg.netns {
        Some(s) if !cfg.queues.is_empty() => Some(Topology::create_multiqueue(s.tso, &cfg.queues)?),
        Some(s) => Some(Topology::create(
            s.tso,
            cfg.sink_cpu,
            cfg.client_cpus.first().copied(),
        )?),
        None => None,
    };
    let sink = match cfg.target {
        Some(_) => None,
        None => {
            // Its reports (one JSON line per connection) say where each was served.
            let mut args = vec![
                "--connections".to_string(),
                total.to_string(),
                "--workers".to_string(),
                cfg.sink_workers.to_string(),
                "--json".to_string(),
            ];
            if let Some(on) = cfg.sink_steer {
                let mode = if on { "cpu" } else { "off" };
                args.extend(["--steer".to_string(), mode.to_string()]);
            }
            if cfg.direction == Direction::Receive {
                args.extend(["--send".to_string(), cfg.bytes.to_string()]);
            }
            if let Some(c) = cfg.sink_cpu {
                args.extend(["--cpu".to_string(), c.to_string()]);
            }
            Some(crate::stream::spawn_sink(
                &cfg.linerate_exe,
                topo.as_ref(),
                &args,
            )?)
        }
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
    let client_ns = topo.as_ref().map(|t| Topology::path(&t.sender_ns));
    let sink_pid = sink.as_ref().map(|s| s.pid());
    let sink_cpu0 = sink_pid.map(crate::cpu::process_cpu).transpose()?;
    let machine0 = MachineCpu::now()?;
    let barrier = Barrier::new(cfg.processes);
    let outs: Vec<Result<ClientOut, StreamError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.processes)
            .map(|i| {
                let (barrier, client_ns) = (&barrier, client_ns.as_deref());
                s.spawn(move || client(cfg, i, target, client_ns, barrier, stop))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(StreamError::Sink("a client thread panicked".into())))
            })
            .collect()
    });
    let machine = MachineCpu::now()?.since(&machine0);
    let sink_cpu = match (sink_pid, sink_cpu0) {
        (Some(pid), Some(c0)) => Some(crate::cpu::process_cpu(pid)?.saturating_sub(c0)),
        _ => None,
    };
    let reports: Vec<SinkReport> = sink
        .map(|s| s.finish())
        .unwrap_or_default()
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    drop(topo);
    let pinned: Vec<&SinkReport> = reports.iter().filter(|r| r.worker_cpu.is_some()).collect();
    let on = pinned
        .iter()
        .filter(|r| r.incoming_cpu.is_some() && r.incoming_cpu == r.worker_cpu)
        .count() as u64;
    let mut outs_ok = Vec::with_capacity(outs.len());
    for o in outs {
        outs_ok.push(o?);
    }
    let start = outs_ok
        .iter()
        .map(|o| o.start)
        .min()
        .expect("one client or more");
    let end = outs_ok
        .iter()
        .map(|o| o.end)
        .max()
        .expect("one client or more");
    let elapsed = end.duration_since(start);
    let bytes: u64 = outs_ok.iter().map(|o| o.bytes).sum();
    let connections: u64 = outs_ok.iter().map(|o| o.connections).sum();
    let client_cpu: Duration = outs_ok.iter().map(|o| o.cpu).sum();
    let secs = elapsed.as_secs_f64().max(1e-9);
    Ok(ConnsResult {
        direction: cfg.direction,
        path,
        processes: cfg.processes,
        connections_per_process: cfg.connections,
        bytes_per_connection: cfg.bytes,
        sink_workers: if cfg.target.is_some() {
            0
        } else {
            cfg.sink_workers
        },
        connections,
        bytes,
        elapsed_seconds: secs,
        connections_per_second: connections as f64 / secs,
        throughput_mbps: bytes as f64 * 8.0 / secs / 1e6,
        client: CpuFigure::new(client_cpu, elapsed, bytes),
        sink: sink_cpu.map(|c| CpuFigure::new(c, elapsed, bytes)),
        machine: MachineFigure::of(&machine, bytes),
        sink_on_receive_cpu: (!pinned.is_empty()).then_some(on),
        sink_off_receive_cpu: (!pinned.is_empty()).then_some(pinned.len() as u64 - on),
        sink_steer: cfg.sink_steer.filter(|_| cfg.target.is_none()),
        queues: cfg.queues.len().max(1),
    })
}

/// What one client thread did.
struct ClientOut {
    start: Instant,
    end: Instant,
    cpu: Duration,
    bytes: u64,
    connections: u64,
}

/// Where one connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The connect is under way.
    Connecting,
    /// Bytes go (`Send`) or come (`Receive`).
    Moving,
    /// `Send`: all sent and our side ended; the sink's report line comes.
    Report,
    /// Done and closed.
    Done,
}

struct Conn {
    sock: TcpStream,
    phase: Phase,
    /// Bytes still to send (`Send`), or received so far (`Receive`).
    left: u64,
    got: u64,
    /// The sink's report line, as it comes.
    report: Vec<u8>,
}

fn client(
    cfg: &ConnsConfig,
    index: usize,
    target: SocketAddr,
    netns_path: Option<&Path>,
    barrier: &Barrier,
    stop: &StopFlag,
) -> Result<ClientOut, StreamError> {
    // Every thread reaches the barrier, failed or not: the others wait there.
    let ready = (|| -> Result<EpollDriver, StreamError> {
        if let Some(p) = netns_path {
            linerate_sys::ns::enter_net_namespace(p)?;
        }
        if !cfg.client_cpus.is_empty() {
            let cpu = cfg.client_cpus[index % cfg.client_cpus.len()];
            linerate_sys::cpu::pin_thread_to_cpu(cpu).map_err(|e| {
                StreamError::Sink(format!("pinning a client thread to CPU {cpu}: {e}"))
            })?;
        }
        Ok(EpollDriver::new()?)
    })();
    barrier.wait();
    let mut driver = ready?;
    let pattern: Vec<u8> = (0..IO_BYTES).map(|i| (i % 253) as u8).collect();
    let mut buf = vec![0u8; IO_BYTES];
    let start = Instant::now();
    let cpu0 = linerate_sys::cpu::thread_cpu()?;
    let mut conns = Vec::with_capacity(cfg.connections);
    for i in 0..cfg.connections {
        let sock = Socket::new(Domain::for_address(target), Type::STREAM, None)?;
        sock.set_nonblocking(true)?;
        match sock.connect(&SockAddr::from(target)) {
            Ok(()) => {}
            Err(e) if linerate_sys::Errno::INPROGRESS.is(&e) => {}
            Err(source) => {
                return Err(StreamError::Connect {
                    addr: target,
                    source,
                })
            }
        }
        driver.register(sock.as_fd(), i as u64, Interest::Connection)?;
        conns.push(Conn {
            sock: sock.into(),
            phase: Phase::Connecting,
            left: cfg.bytes,
            got: 0,
            report: Vec::new(),
        });
    }
    let mut open = conns.len();
    let mut bytes = 0u64;
    let mut events: Vec<Ready> = Vec::with_capacity(256);
    let mut last_progress = Instant::now();
    while open > 0 {
        if crate::stopped(stop) {
            return Err(StreamError::Interrupted);
        }
        events.clear();
        driver.wait(&mut events, Duration::from_millis(200))?;
        let mut moved = false;
        for ev in &events {
            let c = &mut conns[ev.token as usize];
            if c.phase == Phase::Done {
                continue;
            }
            let before = (c.left, c.got, c.report.len());
            step(c, cfg, &pattern, &mut buf, target)?;
            if (c.left, c.got, c.report.len()) != before || c.phase == Phase::Done {
                moved = true;
            }
            if c.phase == Phase::Done {
                let _ = driver.deregister(c.sock.as_fd());
                open -= 1;
                bytes += cfg.bytes;
            }
        }
        if moved {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > STALL {
            return Err(StreamError::Sink(format!(
                "no progress for {} s with {open} connections open",
                STALL.as_secs()
            )));
        }
    }
    let cpu = linerate_sys::cpu::thread_cpu()?.since(&cpu0).total();
    Ok(ClientOut {
        start,
        end: Instant::now(),
        cpu,
        bytes,
        connections: cfg.connections as u64,
    })
}

/// Moves connection `c` as far as its socket allows (edge-triggered: until `EAGAIN`).
fn step(
    c: &mut Conn,
    cfg: &ConnsConfig,
    pattern: &[u8],
    buf: &mut [u8],
    target: SocketAddr,
) -> Result<(), StreamError> {
    use linerate_sys::net::{send, SendFlags};
    let failed = |what: &str, e: io::Error| {
        StreamError::Sink(format!("a connection to {target}: {what}: {e}"))
    };
    if c.phase == Phase::Connecting {
        match c.sock.take_error() {
            Ok(None) => {}
            Ok(Some(source)) | Err(source) => {
                return Err(StreamError::Connect {
                    addr: target,
                    source,
                })
            }
        }
        // Not connected yet: the next writable edge says when.
        if c.sock.peer_addr().is_err() {
            return Ok(());
        }
        c.phase = Phase::Moving;
        if cfg.direction == Direction::Receive {
            // Nothing to send: the source sends, then waits for our end.
            c.sock
                .shutdown(std::net::Shutdown::Write)
                .map_err(|e| failed("shutdown", e))?;
        }
    }
    if c.phase == Phase::Moving && cfg.direction == Direction::Send {
        while c.left > 0 {
            let want = c.left.min(pattern.len() as u64) as usize;
            match send(c.sock.as_fd(), &pattern[..want], SendFlags::NONE) {
                Ok(n) => c.left -= n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(failed("send", e)),
            }
        }
        c.sock
            .shutdown(std::net::Shutdown::Write)
            .map_err(|e| failed("shutdown", e))?;
        c.phase = Phase::Report;
    }
    loop {
        match c.sock.read(buf) {
            Ok(0) => break,
            Ok(n) => match (c.phase, cfg.direction) {
                (Phase::Moving, Direction::Receive) => c.got += n as u64,
                _ if c.report.len() + n <= 64 << 10 => c.report.extend_from_slice(&buf[..n]),
                _ => {
                    return Err(failed(
                        "read",
                        io::Error::other("a report line over 64 KiB"),
                    ))
                }
            },
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(failed("read", e)),
        }
    }
    // The end of the peer's stream: check what moved.
    match cfg.direction {
        Direction::Receive if c.got != cfg.bytes => {
            return Err(failed(
                "receive",
                io::Error::other(format!("{} bytes came, {} were due", c.got, cfg.bytes)),
            ))
        }
        Direction::Receive => {}
        Direction::Send => {
            let line = String::from_utf8_lossy(&c.report);
            let report: SinkReport = serde_json::from_str(line.trim()).map_err(|e| {
                failed(
                    "the sink's report",
                    io::Error::other(format!("{e}: {:?}", line.trim())),
                )
            })?;
            if report.bytes != cfg.bytes {
                return Err(failed(
                    "send",
                    io::Error::other(format!(
                        "the sink received {} bytes of {}",
                        report.bytes, cfg.bytes
                    )),
                ));
            }
        }
    }
    c.phase = Phase::Done;
    Ok(())
}
