//! `linerate sink`: accepts connections and discards what arrives (netserver's role).
//!
//! When a sender half-closes, the sink answers with one JSON line, a [`SinkReport`]
//! (bytes, its own CPU time for the connection, its receive buffer), and closes. That is
//! how `linerate bench stream` learns the receiver's CPU without a control connection.
//!
//! With `send_bytes` (`linerate sink --send BYTES`) the sink is a source as well: it
//! writes that many bytes to each connection, then ends its side, and reads (and
//! discards) until the peer ends its own; no report line goes to the peer then. That
//! is the server side of `bench conns --receive`, as tcpp's server sends.
//!
//! Each worker is one thread with its own listener (`SO_REUSEPORT` when there are
//! several) and an edge-triggered loop on the event-loop layer (`linerate-event`), as
//! the server's workers and `bench http`'s load threads are: one thread serves any
//! number of connections, each taking a bounded share of every turn.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use linerate_event::{Driver, EpollDriver, Interest};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Socket, Type};

use crate::StopFlag;

/// How arriving bytes are thrown away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Discard {
    /// `read` into a user buffer.
    Read,
    /// `splice` socket → pipe → `/dev/null`: no copy to user memory.
    Splice,
}

impl FromStr for Discard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Discard::Read),
            "splice" => Ok(Discard::Splice),
            _ => Err(format!(
                "unknown discard mode '{s}' (expected read or splice)"
            )),
        }
    }
}

/// Sink settings.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// How to discard.
    pub discard: Discard,
    /// `SO_RCVBUF` for accepted connections (set on the listener so window scaling fits).
    pub rcvbuf: Option<usize>,
    /// Serve this many connections, then exit.
    pub max_connections: Option<u64>,
    /// Event-loop threads, each with its own `SO_REUSEPORT` listener on the address
    /// (at least 1).
    pub workers: usize,
    /// Bytes to write to each connection before ending the sink's side (`None`: a
    /// sink only).
    pub send_bytes: Option<u64>,
    /// Pin worker i to the i-th CPU this process may use (`--steer`, either mode):
    /// each report names the worker's CPU and the connection's receive CPU.
    pub pin_workers: bool,
    /// And send each new connection to the worker on the CPU that processed its SYN
    /// (`--steer cpu`, as `serve`).
    pub steer: bool,
}

/// What the sink saw on one connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// Peer address.
    pub peer: String,
    /// Bytes received.
    pub bytes: u64,
    /// Bytes sent (with `--send`).
    #[serde(default)]
    pub sent_bytes: u64,
    /// From accept to end of stream.
    pub elapsed_seconds: f64,
    /// The user CPU of the sink thread that served the connection, from its accept to
    /// its end (with other connections served by the same thread meanwhile, theirs too).
    pub cpu_user_seconds: f64,
    /// The same thread's system CPU over the same time.
    pub cpu_system_seconds: f64,
    /// `SO_RCVBUF` of the connection as the kernel reports it.
    pub rcvbuf_bytes: usize,
    /// The discard mode.
    pub discard: Discard,
    /// The CPU of the worker that served it, when workers are pinned (`--steer`).
    #[serde(default)]
    pub worker_cpu: Option<usize>,
    /// The CPU that processed its handshake (`SO_INCOMING_CPU`).
    #[serde(default)]
    pub incoming_cpu: Option<usize>,
}

/// A bound sink.
pub struct Sink {
    listeners: Vec<TcpListener>,
    config: SinkConfig,
}

impl Sink {
    /// Binds and listens: one listener per worker, all on one port.
    pub fn bind(config: SinkConfig) -> io::Result<Sink> {
        let mut listeners: Vec<TcpListener> = Vec::new();
        let mut addr = config.listen;
        for _ in 0..config.workers.max(1) {
            let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
            sock.set_reuse_address(true)?;
            // A group of one takes the steering program too.
            if config.workers > 1 || config.steer {
                sock.set_reuse_port(true)?;
            }
            if let Some(n) = config.rcvbuf {
                sock.set_recv_buffer_size(n)?;
            }
            sock.bind(&addr.into())?;
            sock.listen(1024)?;
            sock.set_nonblocking(true)?;
            let l: TcpListener = sock.into();
            // Port 0 resolves once; the other workers join the port the first got.
            addr = l.local_addr()?;
            listeners.push(l);
        }
        if config.steer {
            // Worker i is pinned to cpus[i mod len]; its listener is the group's i-th.
            let cpus = worker_cpus();
            let mut routes: Vec<(u32, u32)> = Vec::new();
            for i in 0..listeners.len() {
                let cpu = cpus[i % cpus.len()] as u32;
                if !routes.iter().any(|&(c, _)| c == cpu) {
                    routes.push((cpu, i as u32));
                }
            }
            let program = linerate_sys::steer::cpu_program(&routes)
                .ok_or_else(|| io::Error::other("--steer: more CPUs than one program can name"))?;
            linerate_sys::steer::attach(listeners[0].as_fd(), &program)?;
        }
        Ok(Sink { listeners, config })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listeners[0].local_addr()
    }

    /// Serves until `stop` is set or the connection budget is spent and its connections
    /// have ended, calling `report` for each finished connection (from the worker that
    /// served it). A stop ends every open connection with a report of what it had.
    pub fn run(self, stop: &StopFlag, report: &(dyn Fn(&SinkReport) + Sync)) -> io::Result<()> {
        let accepted = Budget::default();
        let config = &self.config;
        let accepted = &accepted;
        std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .listeners
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    scope.spawn(move || {
                        let cpu = if config.pin_workers || config.steer {
                            let cpus = worker_cpus();
                            let cpu = cpus[i % cpus.len()];
                            linerate_sys::cpu::pin_thread_to_cpu(cpu)?;
                            Some(cpu)
                        } else {
                            None
                        };
                        Worker::new(l, config, cpu)?.run(accepted, stop, report)
                    })
                })
                .collect();
            let mut first_error = None;
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("a sink worker panicked")));
                if let Err(e) = r {
                    first_error.get_or_insert(e);
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    }
}

/// The connection budget (`--connections`) the workers share: places held for an
/// accept under way, and connections taken.
#[derive(Default)]
struct Budget {
    reserved: AtomicU64,
    taken: AtomicU64,
}

/// The CPUs the workers are pinned to under `--steer`: those this process may use.
fn worker_cpus() -> Vec<usize> {
    linerate_sys::cpu::allowed_cpus()
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| vec![0])
}

/// The listener's token; connections use their slot index.
const LISTENER: u64 = u64::MAX;
/// How long a wait lasts when nothing happens, so that a stop is seen.
const STOP_POLL: Duration = Duration::from_millis(200);
/// Discarding calls one connection makes per turn before the others have theirs.
const CALLS_PER_TURN: usize = 16;
/// Bytes per `read` (the user buffer).
const READ_BYTES: usize = 256 << 10;
/// Bytes per `splice` (the pipe's size).
const SPLICE_BYTES: usize = 1 << 20;
/// Bytes per `send` of `--send`.
const SEND_BYTES: usize = 256 << 10;

/// One open connection.
struct Conn {
    sock: TcpStream,
    peer: SocketAddr,
    start: Instant,
    cpu0: linerate_sys::cpu::CpuTime,
    rcvbuf: usize,
    /// The CPU that processed its handshake.
    incoming_cpu: Option<usize>,
    bytes: u64,
    /// Bytes still to send (`--send`), and sent.
    to_send: u64,
    sent: u64,
    /// The peer's stream has been read to its end.
    ended: bool,
    /// The peer's end was reported (an edge may carry it with the last bytes, and is
    /// not repeated): from then on the socket is read until its end.
    peer_done: bool,
    /// On the run list: it stopped for the others' turn with bytes still waiting.
    runnable: bool,
}

/// Where discarded bytes go.
enum Drain {
    Read(Vec<u8>),
    /// A pipe (read end, write end) and `/dev/null`.
    Splice(OwnedFd, OwnedFd, std::fs::File),
}

/// One event-loop thread of the sink.
struct Worker<'a> {
    listener: &'a TcpListener,
    /// The CPU it is pinned to (`--steer`).
    cpu: Option<usize>,
    config: &'a SinkConfig,
    driver: EpollDriver,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    run_list: Vec<usize>,
    drain: Drain,
    accepting: bool,
    /// What `--send` writes, again and again.
    pattern: Vec<u8>,
}

/// How a connection's turn ended.
enum Turn {
    /// Nothing left to read for now.
    Empty,
    /// Its share of the turn used, bytes may be waiting.
    Yielded,
    /// The sender half-closed (or closed).
    Ended,
}

impl<'a> Worker<'a> {
    fn new(
        listener: &'a TcpListener,
        config: &'a SinkConfig,
        cpu: Option<usize>,
    ) -> io::Result<Worker<'a>> {
        let mut driver = EpollDriver::new()?;
        driver.register(listener.as_fd(), LISTENER, Interest::Listener)?;
        let drain = match config.discard {
            Discard::Read => Drain::Read(vec![0u8; READ_BYTES]),
            Discard::Splice => {
                let (r, w) = linerate_sys::pipe::pipe()?;
                let _ = linerate_sys::pipe::set_pipe_size(w.as_fd(), SPLICE_BYTES);
                let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
                Drain::Splice(r, w, null)
            }
        };
        Ok(Worker {
            listener,
            cpu,
            config,
            driver,
            conns: Vec::new(),
            free: Vec::new(),
            run_list: Vec::new(),
            drain,
            accepting: true,
            pattern: if config.send_bytes.is_some() {
                (0..SEND_BYTES).map(|i| (i % 251) as u8).collect()
            } else {
                Vec::new()
            },
        })
    }

    fn run(
        mut self,
        accepted: &Budget,
        stop: &StopFlag,
        report: &(dyn Fn(&SinkReport) + Sync),
    ) -> io::Result<()> {
        let mut ready = Vec::with_capacity(256);
        loop {
            if crate::stopped(stop) {
                for slot in 0..self.conns.len() {
                    self.finish(slot, report);
                }
                return Ok(());
            }
            if self.accepting && self.budget_spent(accepted) {
                self.stop_accepting()?;
            }
            if !self.accepting && self.free.len() == self.conns.len() {
                return Ok(());
            }
            ready.clear();
            let timeout = if self.run_list.is_empty() {
                STOP_POLL
            } else {
                Duration::ZERO
            };
            self.driver.wait(&mut ready, timeout)?;
            let turn = std::mem::take(&mut self.run_list);
            for ev in &ready {
                if ev.token == LISTENER {
                    self.accept(accepted)?;
                } else if ev.readable || ev.error || ev.writable {
                    if ev.hangup || ev.error {
                        if let Some(c) = self
                            .conns
                            .get_mut(ev.token as usize)
                            .and_then(Option::as_mut)
                        {
                            c.peer_done = true;
                        }
                    }
                    self.serve(ev.token as usize, report);
                }
            }
            for slot in turn {
                if let Some(c) = self.conns[slot].as_mut() {
                    c.runnable = false;
                    self.serve(slot, report);
                }
            }
        }
    }

    fn budget_spent(&self, accepted: &Budget) -> bool {
        self.config
            .max_connections
            .is_some_and(|m| accepted.taken.load(Ordering::Relaxed) >= m)
    }

    fn stop_accepting(&mut self) -> io::Result<()> {
        self.accepting = false;
        self.driver.deregister(self.listener.as_fd())
    }

    fn accept(&mut self, accepted: &Budget) -> io::Result<()> {
        while self.accepting {
            if self.budget_spent(accepted) {
                return self.stop_accepting();
            }
            // Take a place in the budget before the connection: the workers share it.
            // A place another worker holds only for its try (which may find its queue
            // empty) is not the budget spent: this listener is level-triggered, so its
            // connection is taken at the next turn.
            let admitted = accepted
                .reserved
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                    self.config
                        .max_connections
                        .is_none_or(|m| n < m)
                        .then_some(n + 1)
                })
                .is_ok();
            if !admitted {
                return Ok(());
            }
            let fd = match linerate_sys::fs::accept_nonblocking(self.listener.as_fd()) {
                Ok(fd) => {
                    accepted.taken.fetch_add(1, Ordering::Relaxed);
                    fd
                }
                Err(e) => {
                    accepted.reserved.fetch_sub(1, Ordering::Relaxed);
                    return match e.kind() {
                        io::ErrorKind::WouldBlock
                        | io::ErrorKind::Interrupted
                        | io::ErrorKind::ConnectionAborted => Ok(()),
                        _ => Err(e),
                    };
                }
            };
            let sock = TcpStream::from(fd);
            let looked = (|| -> io::Result<_> {
                let rcvbuf = linerate_sys::net::get_option(
                    sock.as_fd(),
                    linerate_sys::net::SockOpt::ReceiveBuffer,
                )?;
                Ok((sock.peer_addr()?, rcvbuf.max(0) as usize))
            })();
            let (peer, rcvbuf) = match looked {
                Ok(l) => l,
                // Reset before it could be looked at: nothing to report.
                Err(e) => {
                    eprintln!("linerate sink: a connection ended at its accept: {e}");
                    continue;
                }
            };
            let incoming_cpu = linerate_sys::steer::incoming_cpu(sock.as_fd())
                .ok()
                .flatten();
            let conn = Conn {
                sock,
                incoming_cpu,
                peer,
                start: Instant::now(),
                cpu0: linerate_sys::cpu::thread_cpu()?,
                rcvbuf,
                bytes: 0,
                to_send: self.config.send_bytes.unwrap_or(0),
                sent: 0,
                ended: false,
                peer_done: false,
                runnable: false,
            };
            let slot = match self.free.pop() {
                Some(s) => s,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            // Edge-triggered: bytes that came before this are reported by the add.
            self.driver
                .register(conn.sock.as_fd(), slot as u64, Interest::Connection)?;
            self.conns[slot] = Some(conn);
        }
        Ok(())
    }

    /// Sends what the connection in `slot` still owes (`--send`) and discards what it
    /// has; once both sides are done, reports it.
    fn serve(&mut self, slot: usize, report: &(dyn Fn(&SinkReport) + Sync)) {
        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let mut again = false;
        if c.to_send > 0 {
            match send_some(c, &self.pattern) {
                Ok(yielded) => again = yielded,
                Err(e) => {
                    eprintln!("linerate sink: {}: {e}", c.peer);
                    self.conns[slot] = None;
                    self.free.push(slot);
                    return;
                }
            }
        }
        if !c.ended {
            match discard(c, &mut self.drain) {
                Ok(Turn::Empty) => {}
                Ok(Turn::Yielded) => again = true,
                Ok(Turn::Ended) => c.ended = true,
                Err(e) => {
                    eprintln!("linerate sink: {}: {e}", c.peer);
                    self.conns[slot] = None;
                    self.free.push(slot);
                    return;
                }
            }
        }
        if c.ended && c.to_send == 0 {
            self.finish(slot, report);
        } else if again && !c.runnable {
            c.runnable = true;
            self.run_list.push(slot);
        }
    }

    /// Reports the connection in `slot` to its sender and to `report`, and closes it.
    fn finish(&mut self, slot: usize, report: &(dyn Fn(&SinkReport) + Sync)) {
        let Some(mut c) = self.conns.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.free.push(slot);
        let cpu = match linerate_sys::cpu::thread_cpu() {
            Ok(now) => now.since(&c.cpu0),
            Err(e) => {
                eprintln!("linerate sink: {}: {e}", c.peer);
                return;
            }
        };
        let r = SinkReport {
            peer: c.peer.to_string(),
            bytes: c.bytes,
            sent_bytes: c.sent,
            elapsed_seconds: c.start.elapsed().as_secs_f64(),
            cpu_user_seconds: cpu.user.as_secs_f64(),
            cpu_system_seconds: cpu.system.as_secs_f64(),
            rcvbuf_bytes: c.rcvbuf,
            discard: self.config.discard,
            worker_cpu: self.cpu,
            incoming_cpu: c.incoming_cpu,
        };
        // A source has ended its side already: no line can follow.
        if self.config.send_bytes.is_none() {
            if let Ok(mut line) = serde_json::to_string(&r) {
                line.push('\n');
                // A line this short fits the empty send buffer; the sender may have closed
                // both ways, and then nobody wants it.
                let _ = c.sock.write_all(line.as_bytes());
            }
        }
        let _ = c.sock.shutdown(std::net::Shutdown::Both);
        report(&r);
    }
}

/// Sends `c`'s remaining bytes from `pattern` until the socket is full, up to
/// [`CALLS_PER_TURN`] calls (then `true`: its share of the turn is used, the socket
/// may take more); once all are sent, ends the sink's side.
fn send_some(c: &mut Conn, pattern: &[u8]) -> io::Result<bool> {
    use linerate_sys::net::{send, SendFlags};
    for _ in 0..CALLS_PER_TURN {
        if c.to_send == 0 {
            return Ok(false);
        }
        let want = c.to_send.min(pattern.len() as u64) as usize;
        match send(c.sock.as_fd(), &pattern[..want], SendFlags::NONE) {
            Ok(n) => {
                c.to_send -= n as u64;
                c.sent += n as u64;
                if c.to_send == 0 {
                    c.sock.shutdown(std::net::Shutdown::Write)?;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(c.to_send > 0)
}

/// Discards what `c` has, up to [`CALLS_PER_TURN`] calls.
fn discard(c: &mut Conn, drain: &mut Drain) -> io::Result<Turn> {
    use linerate_sys::pipe;
    for _ in 0..CALLS_PER_TURN {
        let got = match drain {
            Drain::Read(buf) => c.sock.read(buf),
            Drain::Splice(_, w, _) => pipe::splice(
                c.sock.as_fd(),
                None,
                w.as_fd(),
                None,
                SPLICE_BYTES,
                pipe::SpliceFlags::MOVE | pipe::SpliceFlags::NONBLOCK,
            ),
        };
        match got {
            Ok(0) => return Ok(Turn::Ended),
            Ok(n) => {
                c.bytes += n as u64;
                match drain {
                    Drain::Splice(r, _, null) => empty_pipe(r, null, n)?,
                    // A short read found the queue empty: new bytes bring a new edge,
                    // so no call is spent to hear EAGAIN (a splice can stop short at
                    // a full pipe too, so it reads on).
                    Drain::Read(buf) if n < buf.len() && !c.peer_done => return Ok(Turn::Empty),
                    Drain::Read(_) => {}
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Turn::Empty),
            Err(e) => return Err(e),
        }
    }
    Ok(Turn::Yielded)
}

/// Moves `n` bytes from the pipe to `/dev/null`.
fn empty_pipe(r: &OwnedFd, null: &std::fs::File, mut n: usize) -> io::Result<()> {
    use linerate_sys::pipe;
    while n > 0 {
        match pipe::splice(
            r.as_fd(),
            None,
            null.as_fd(),
            None,
            n,
            pipe::SpliceFlags::MOVE,
        ) {
            Ok(0) => return Err(io::Error::other("the pipe ran dry")),
            Ok(m) => n -= m,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
