//! One load-generating thread: an event loop over its share of the connections, on the
//! same layer as the server's workers (`linerate_event`, its epoll driver: edge-triggered,
//! so a connection costs no `epoll_ctl` call after its registration; one that stops
//! reading before `EAGAIN` to give the others their turn waits on a run list).
//!
//! Each connection keeps up to `pipeline` requests in flight, written together in one
//! send; responses are framed by `Content-Length` (parsed with `httparse`) and their
//! bodies are thrown away with `recv(MSG_TRUNC)`, which frees the bytes in the kernel
//! without copying them, unless `--checksum` asks for them to be read and hashed. The
//! client's own cost per response is a head parse and a few system calls, so a single
//! pinned thread can load a server that is faster than most clients.
//!
//! With `--h2` each connection speaks HTTP/2 ([`super::h2`]): its requests are
//! streams, up to `pipeline` in flight, and DATA payloads are thrown away in the kernel
//! as HTTP/1.1 bodies are, once their frame header is read.
//!
//! Over `https://` each connection holds a rustls session ([`super::tls`]): requests
//! go into it as plaintext and its records to the socket; responses are decrypted
//! into the read buffer and parsed as over plain HTTP (their bodies cannot be thrown
//! away unread then). A handshake completed is counted apart from the requests.
//!
//! Latency runs from a request's start to its response's last byte. With a target rate
//! the start is the moment the schedule said the request should go, not when it went:
//! a stalled server is charged for the requests it held up (no coordinated omission).
//! With `--close` it includes the connection set-up.
//!
//! Written by hand: no client library offers pipelining, a paced open loop and copy-free
//! body discard together, and these are what make the numbers trustworthy.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use linerate_event::{Driver, EpollDriver, Interest, Ready};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::h2::{ClientH2, Got};
use super::tls::{read_plain, write_records, ClientTls};
use super::workload::{Picker, Workload};
use super::{Errors, Limit};

/// Largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// Read buffer per connection: room for a head and many small pipelined responses.
const READ_BUF: usize = 64 * 1024;
/// Scratch for discarded bodies (never written by the kernel; see `recv_discard`).
const DISCARD_CHUNK: usize = 4 << 20;
/// Reads per readiness event before other connections get a turn.
pub(crate) const READS_PER_EVENT: usize = 32;
/// Pause before reconnecting after a failed connection.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// What every thread shares.
pub(crate) struct Shared {
    pub target: SocketAddr,
    pub workload: Arc<Workload>,
    /// Request bytes per item, ready to send.
    pub requests: Vec<Vec<u8>>,
    pub pipeline: usize,
    pub close: bool,
    pub checksum: bool,
    pub timeout: Duration,
    pub seed: u64,
    pub limit: Limit,
    /// Requests started so far over all threads (for `-n`).
    pub issued: AtomicU64,
    /// Responses completed so far over all threads (for progress).
    pub completed: AtomicU64,
    pub stop: crate::StopFlag,
    /// Reads per event before the others' turn ([`READS_PER_EVENT`]; tests lower it).
    pub reads_per_event: usize,
    /// `https://`: each connection's session settings.
    pub tls: Option<ClientTls>,
    /// HTTP/2: each item's request as a field block, and the frame size the client
    /// takes (`pipeline` is then streams per connection).
    pub h2: Option<H2Setup>,
    /// HTTP/3 (`--h3`): QUIC's settings and each item's request (`pipeline` is then
    /// the streams in flight per connection).
    pub h3: Option<super::h3::H3Setup>,
}

impl Shared {
    /// May one more request start (the `-n` budget)?
    pub(crate) fn may_issue(&self) -> bool {
        match self.limit {
            Limit::Requests(n) => self.issued.load(Ordering::Relaxed) < n,
            Limit::Time(_) => true,
        }
    }

    /// Takes one request from the `-n` budget.
    pub(crate) fn take_ticket(&self) -> bool {
        match self.limit {
            // Only a granted ticket counts: a refused one must not push the count past
            // n, or tickets given back later would not make room again.
            Limit::Requests(n) => self
                .issued
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    (v < n).then_some(v + 1)
                })
                .is_ok(),
            Limit::Time(_) => true,
        }
    }

    /// Gives `n` requests back to the `-n` budget (taken, never answered, to go again).
    pub(crate) fn give_back(&self, n: u64) {
        if n > 0 {
            if let Limit::Requests(_) = self.limit {
                self.issued.fetch_sub(n, Ordering::Relaxed);
            }
        }
    }
}

/// What an HTTP/2 run asks with.
pub(crate) struct H2Setup {
    pub blocks: Vec<Vec<u8>>,
    pub max_frame: u32,
}

/// One thread's tallies.
pub(crate) struct ThreadStats {
    pub latency_us: Histogram<u64>,
    pub requests: u64,
    pub body_bytes: u64,
    pub bytes: u64,
    pub statuses: BTreeMap<u16, u64>,
    pub errors: Errors,
    pub connections: u64,
    pub first_error: Option<String>,
    /// Requests sent again after a kept-alive connection closed under them.
    pub retried: u64,
    /// TLS handshakes completed.
    pub handshakes: u64,
    /// HTTP/3: ACK_FREQUENCY frames the servers sent (their asking for fewer ACKs).
    pub ack_frequency_frames: u64,
    /// When the thread's run ended.
    pub finished: Instant,
}

impl ThreadStats {
    pub(crate) fn new() -> ThreadStats {
        ThreadStats {
            // 1 µs to 100 s at three significant digits.
            latency_us: Histogram::new_with_bounds(1, 100_000_000, 3)
                .expect("valid histogram bounds"),
            requests: 0,
            body_bytes: 0,
            bytes: 0,
            statuses: BTreeMap::new(),
            errors: Errors::default(),
            connections: 0,
            first_error: None,
            retried: 0,
            handshakes: 0,
            ack_frequency_frames: 0,
            finished: Instant::now(),
        }
    }

    pub(crate) fn error(
        &mut self,
        kind: fn(&mut Errors) -> &mut u64,
        what: impl FnOnce() -> String,
    ) {
        *kind(&mut self.errors) += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }
}

/// A request sent and not yet answered.
#[derive(Clone, Copy)]
struct Inflight {
    item: usize,
    /// Start of the request, ns since the run's start.
    start_ns: u64,
}

/// The response being read.
struct Body {
    status: u16,
    /// Body bytes still to come.
    remaining: u64,
    /// Body length announced.
    len: u64,
    close: bool,
    crc: Option<crc32fast::Hasher>,
}

enum State {
    /// No socket; may connect at this time (ns).
    Idle { at_ns: u64 },
    /// Non-blocking connect under way.
    Connecting,
    /// Connected.
    Open,
}

struct Conn {
    sock: Option<Socket>,
    state: State,
    out: Vec<u8>,
    out_pos: usize,
    inflight: VecDeque<Inflight>,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    body: Option<Body>,
    picker: Picker,
    /// Rate mode: when this connection's next request is due (ns).
    next_due_ns: u64,
    /// Rate mode: ns between this connection's requests.
    interval_ns: u64,
    /// Last send or receive progress (ns), for the timeout.
    last_progress_ns: u64,
    /// On the run list: it stopped reading with bytes perhaps left in its socket.
    on_run_list: bool,
    /// The peer's FIN (or a reset) was reported on this socket: a short read no longer
    /// means that nothing is left, since the end itself waits to be read and no new
    /// edge will come for it.
    peer_done: bool,
    /// Responses completed on the current socket.
    answered: u64,
    /// Its TLS session (`https://`); the request and response bytes above are its
    /// plaintext.
    tls: Option<Box<rustls::ClientConnection>>,
    /// Its HTTP/2 state (`--h2`): `inflight` holds its streams in the order asked.
    h2: Option<Box<ClientH2>>,
    /// The server said GOAWAY: no more requests on it.
    going_away: bool,
}

/// One thread's part of a run: its `conns` connections, numbered from `first` of
/// `total`, each paced at `rate_per_conn` (or not), from `start` to `end` (or the `-n`
/// budget).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Part {
    pub conns: usize,
    pub first: usize,
    pub total: usize,
    pub rate_per_conn: Option<f64>,
    pub start: Instant,
    pub end: Option<Instant>,
}

pub(crate) fn run_thread(shared: &Shared, part: Part) -> io::Result<ThreadStats> {
    let Part {
        conns,
        first: first_conn,
        total: total_conns,
        rate_per_conn,
        start,
        end,
    } = part;
    let mut t = Thread {
        shared,
        start,
        stats: ThreadStats::new(),
        driver: EpollDriver::with_events(conns.max(1))?,
        events: Vec::with_capacity(conns.max(1)),
        runnable: Vec::new(),
        scratch: vec![0u8; DISCARD_CHUNK],
        conns: Vec::with_capacity(conns),
        crcs: BTreeMap::new(),
        paced: rate_per_conn.is_some(),
        any_idle: true,
    };
    for i in 0..conns {
        let global = first_conn + i;
        let (interval_ns, first_due) = pacing(rate_per_conn, global, total_conns);
        t.conns.push(Conn {
            sock: None,
            state: State::Idle { at_ns: first_due },
            out: Vec::new(),
            out_pos: 0,
            inflight: VecDeque::new(),
            rbuf: vec![0u8; READ_BUF],
            rstart: 0,
            rend: 0,
            body: None,
            picker: shared.workload.picker(shared.seed, global),
            next_due_ns: first_due,
            interval_ns,
            last_progress_ns: 0,
            on_run_list: false,
            peer_done: false,
            answered: 0,
            tls: None,
            h2: None,
            going_away: false,
        });
    }
    t.run(end)?;
    t.stats.finished = Instant::now();
    Ok(t.stats)
}

/// Paced at `rate_per_conn` requests per second: connection `global`'s ns between
/// requests and its first one's due time, the connections' schedules spread over one
/// interval; (0, 0) unpaced.
pub(crate) fn pacing(rate_per_conn: Option<f64>, global: usize, total_conns: usize) -> (u64, u64) {
    match rate_per_conn {
        Some(r) => {
            let iv = (1e9 / r).clamp(1.0, 1e18) as u64;
            let first = iv as u128 * global as u128 / total_conns.max(1) as u128;
            (iv, first as u64)
        }
        None => (0, 0),
    }
}

/// A request's start, ns: paced (`interval_ns` > 0), the time its schedule gave it
/// (and the schedule moves on), else `now`.
pub(crate) fn request_start(next_due_ns: &mut u64, interval_ns: u64, now: u64) -> u64 {
    if interval_ns == 0 {
        return now;
    }
    let due = *next_due_ns;
    *next_due_ns += interval_ns;
    due
}

struct Thread<'a> {
    shared: &'a Shared,
    start: Instant,
    stats: ThreadStats,
    driver: EpollDriver,
    events: Vec<Ready>,
    /// Connections that stopped reading at `READS_PER_EVENT` (an edge-triggered
    /// registration reports nothing more for bytes already there).
    runnable: Vec<usize>,
    scratch: Vec<u8>,
    conns: Vec<Conn>,
    /// Checksums of the first body seen per item whose content is not known in advance.
    crcs: BTreeMap<usize, (u64, u32)>,
    /// Requests follow a schedule (`-R`).
    paced: bool,
    /// Some connection may be waiting to connect.
    any_idle: bool,
}

impl Thread<'_> {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn run(&mut self, end: Option<Instant>) -> io::Result<()> {
        let end_ns = end.map(|e| e.saturating_duration_since(self.start).as_nanos() as u64);
        let mut last_sweep = 0u64;
        loop {
            if crate::stopped(&self.shared.stop) {
                break;
            }
            let now = self.now_ns();
            if end_ns.is_some_and(|e| now >= e) {
                break;
            }
            // Start connections and due requests. Unpaced, only a connection waiting to
            // connect needs this walk; the rest move on their own events.
            let mut next_wake = end_ns.unwrap_or(u64::MAX);
            if self.paced || self.any_idle {
                self.any_idle = false;
                for i in 0..self.conns.len() {
                    next_wake = next_wake.min(self.service(i, now));
                    if matches!(self.conns[i].state, State::Idle { at_ns } if at_ns != u64::MAX) {
                        self.any_idle = true;
                    }
                }
            }
            if !self.may_issue() && self.conns.iter().all(|c| c.inflight.is_empty()) {
                break; // -n reached and everything answered
            }
            if now.saturating_sub(last_sweep) > 100_000_000 {
                last_sweep = now;
                self.sweep_timeouts(now);
            }
            // Wake for the earliest due time, the end, or a timeout check (rounded up to
            // epoll's milliseconds by the driver: a paced request may go up to 1 ms late,
            // and its latency counts that); at once while connections wait to read on.
            let wait_ns = if self.runnable.is_empty() {
                next_wake.saturating_sub(now).min(100_000_000)
            } else {
                0
            };
            self.events.clear();
            self.driver
                .wait(&mut self.events, Duration::from_nanos(wait_ns))?;
            let events = std::mem::take(&mut self.events);
            for ev in &events {
                self.on_event(ev.token as usize, ev);
            }
            self.events = events;
            // Those that stopped reading last turn read on, after the new events.
            let turn = std::mem::take(&mut self.runnable);
            for &i in &turn {
                self.conns[i].on_run_list = false;
                self.on_event(
                    i,
                    &Ready {
                        token: i as u64,
                        readable: true,
                        ..Ready::default()
                    },
                );
            }
        }
        Ok(())
    }

    /// Connects an idle connection whose time has come and sends due requests; returns
    /// when this connection next needs attention without an event (ns).
    fn service(&mut self, i: usize, now: u64) -> u64 {
        if let State::Idle { at_ns } = self.conns[i].state {
            if at_ns == u64::MAX || at_ns > now {
                return at_ns;
            }
            if !self.may_issue() {
                self.conns[i].state = State::Idle { at_ns: u64::MAX };
                return u64::MAX;
            }
            self.connect(i, now);
            return u64::MAX;
        }
        if matches!(self.conns[i].state, State::Open) && self.conns[i].interval_ns > 0 {
            if !self.may_issue() {
                return u64::MAX; // the -n budget is spent: nothing more is due
            }
            self.fill(i, now);
            let c = &self.conns[i];
            if c.inflight.len() < self.shared.pipeline {
                return c.next_due_ns;
            }
        }
        u64::MAX
    }

    fn may_issue(&self) -> bool {
        self.shared.may_issue()
    }

    fn take_ticket(&self) -> bool {
        self.shared.take_ticket()
    }

    fn connect(&mut self, i: usize, now: u64) {
        let sock = match Socket::new(
            Domain::for_address(self.shared.target),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        ) {
            Ok(s) => s,
            Err(e) => {
                let target = self.shared.target;
                self.connect_failed(i, now, format!("socket for {target}: {e}"));
                return;
            }
        };
        let _ = sock.set_nodelay(true);
        let tls = match self.shared.tls.as_ref().map(ClientTls::session).transpose() {
            Ok(t) => t.map(Box::new),
            Err(e) => {
                self.connect_failed(i, now, format!("TLS: {e}"));
                return;
            }
        };
        match sock.connect(&SockAddr::from(self.shared.target)) {
            Ok(()) => {}
            Err(e) if linerate_sys::Errno::INPROGRESS.is(&e) => {}
            Err(e) => {
                let target = self.shared.target;
                self.connect_failed(i, now, format!("connecting to {target}: {e}"));
                return;
            }
        }
        if let Err(e) = self
            .driver
            .register(sock.as_fd(), i as u64, Interest::Connection)
        {
            self.connect_failed(i, now, format!("epoll: {e}"));
            return;
        }
        let c = &mut self.conns[i];
        c.sock = Some(sock);
        c.tls = tls;
        c.state = State::Connecting;
        c.last_progress_ns = now;
        c.peer_done = false;
        c.rstart = 0;
        c.rend = 0;
        c.body = None;
        c.out.clear();
        c.out_pos = 0;
        c.going_away = false;
        c.h2 = self
            .shared
            .h2
            .as_ref()
            .map(|h| Box::new(ClientH2::new(&mut c.out, h.max_frame)));
        // With --close the request's clock starts at the connect.
        if self.shared.close && c.inflight.is_empty() && self.take_ticket() {
            self.queue_request(i, now);
        }
        self.stats.connections += 1;
    }

    /// A kept-alive connection the server closed (or reset) as requests went out on it
    /// (the keep-alive race): not one byte of an answer came, so the requests go again
    /// on a new connection, as browsers and curl do for GET. Counted apart as retried,
    /// never hidden; a connection that never answered gets no such grace.
    fn retry_on_new_connection(&mut self, i: usize, now: u64) {
        let unanswered = self.conns[i].inflight.len() as u64;
        self.stats.retried += unanswered;
        self.shared.give_back(unanswered);
        self.drop_conn(i, now, false);
    }

    /// Counts a connection that could not be opened; with `-n` it uses up one request,
    /// so a run against a server that refuses ends instead of retrying for ever. The
    /// connection tries again after a pause.
    fn connect_failed(&mut self, i: usize, now: u64, what: String) {
        self.stats.error(|e| &mut e.connect, || what);
        // A --close connection's request was counted when its connect began.
        if self.conns[i].inflight.is_empty() {
            let _ = self.take_ticket();
        }
        let c = &mut self.conns[i];
        c.inflight.clear();
        c.state = State::Idle {
            at_ns: (now + RECONNECT_PAUSE.as_nanos() as u64).max(c.next_due_ns),
        };
        self.any_idle = true;
    }

    fn on_event(&mut self, i: usize, ev: &Ready) {
        let now = self.now_ns();
        if matches!(self.conns[i].state, State::Connecting) {
            if !(ev.writable || ev.error || ev.hangup) {
                return;
            }
            let err = match self.conns[i].sock.as_ref().map(Socket::take_error) {
                Some(Ok(None)) => None,
                Some(Ok(Some(e))) | Some(Err(e)) => Some(e),
                None => return,
            };
            if let Some(e) = err {
                let target = self.shared.target;
                self.connect_failed(i, now, format!("connecting to {target}: {e}"));
                self.drop_conn(i, now, true);
                return;
            }
            self.conns[i].state = State::Open;
            self.fill(i, now);
        }
        if !matches!(self.conns[i].state, State::Open) {
            return;
        }
        if ev.hangup || ev.error {
            self.conns[i].peer_done = true;
        }
        if ev.readable || ev.error || ev.hangup {
            if !self.read(i, now) {
                return;
            }
            self.fill(i, now);
        }
        if ev.writable {
            self.flush(i, now);
        }
    }

    /// Adds requests up to the pipeline depth (and, paced, those that are due) and
    /// sends them.
    fn fill(&mut self, i: usize, now: u64) {
        let depth = self.shared.pipeline;
        let close = self.shared.close;
        loop {
            let c = &self.conns[i];
            // An HTTP/2 server says how many streams it takes at once (lighttpd: 8).
            let depth =
                c.h2.as_deref()
                    .map_or(depth, |h| depth.min(h.max_streams as usize));
            if close || c.inflight.len() >= depth || c.going_away {
                break;
            }
            if c.interval_ns > 0 && c.next_due_ns > now {
                break;
            }
            if !self.take_ticket() {
                break;
            }
            self.queue_request(i, now);
        }
        self.flush(i, now);
    }

    /// Queues connection `i`'s next request; paced, its clock starts at its scheduled
    /// time, otherwise now.
    fn queue_request(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        let start_ns = request_start(&mut c.next_due_ns, c.interval_ns, now);
        let item = c.picker.next(self.shared.requests.len());
        match (c.h2.as_deref_mut(), self.shared.h2.as_ref()) {
            (Some(h), Some(setup)) => h.request(&setup.blocks[item], &mut c.out),
            _ => c.out.extend_from_slice(&self.shared.requests[item]),
        }
        c.inflight.push_back(Inflight { item, start_ns });
    }

    /// Writes pending request bytes, until the socket is full (its writable edge brings
    /// the connection back).
    fn flush(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        let Some(sock) = c.sock.as_mut() else { return };
        if let Some(t) = c.tls.as_deref_mut() {
            // The session takes all the plaintext (it holds it until its handshake is
            // done), then its records go until the socket is full.
            if c.out_pos < c.out.len() {
                // Unlimited buffers: it takes them all (a short take is kept for later).
                c.out_pos += t.writer().write(&c.out[c.out_pos..]).unwrap_or(0);
                if c.out_pos == c.out.len() {
                    c.out.clear();
                    c.out_pos = 0;
                }
            }
            match write_records(t, sock) {
                // Progress is bytes that left, as for a plain connection.
                Ok(n) if n > 0 => c.last_progress_ns = now,
                Ok(_) => {}
                Err(e) => {
                    self.stats
                        .error(|e| &mut e.read, || format!("sending a request: {e}"));
                    self.drop_conn(i, now, true);
                }
            }
            return;
        }
        while c.out_pos < c.out.len() {
            match sock.write(&c.out[c.out_pos..]) {
                Ok(n) => {
                    c.out_pos += n;
                    c.last_progress_ns = now;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.stats
                        .error(|e| &mut e.read, || format!("sending a request: {e}"));
                    self.drop_conn(i, now, true);
                    return;
                }
            }
        }
        if c.out_pos == c.out.len() {
            c.out.clear();
            c.out_pos = 0;
        }
    }

    /// Reads and completes responses; false if the connection was dropped.
    fn read(&mut self, i: usize, now: u64) -> bool {
        let mut drained = false;
        for _ in 0..self.shared.reads_per_event {
            // Whole responses already buffered first.
            loop {
                match self.advance(i, now) {
                    Step::Progress => continue,
                    Step::NeedBytes => break,
                    Step::Dropped => return false,
                }
            }
            let c = &mut self.conns[i];
            let Some(sock) = c.sock.as_mut() else {
                return false;
            };
            // Bodies are thrown away in the kernel only when they come as they are.
            let discard = match c.h2.as_deref() {
                Some(h) => h
                    .discardable()
                    .filter(|_| c.rstart == c.rend && c.tls.is_none()),
                None => c
                    .body
                    .as_ref()
                    .filter(|b| b.crc.is_none() && c.rstart == c.rend && c.tls.is_none())
                    .map(|b| b.remaining),
            };
            let asked;
            let got = match discard {
                Some(rem) => {
                    let n = rem.min(self.scratch.len() as u64) as usize;
                    asked = n;
                    linerate_sys::net::recv_discard(sock.as_fd(), &mut self.scratch[..n])
                }
                None => {
                    if c.rstart > 0 {
                        c.rbuf.copy_within(c.rstart..c.rend, 0);
                        c.rend -= c.rstart;
                        c.rstart = 0;
                    }
                    if c.rend == c.rbuf.len() {
                        self.stats.error(
                            |e| &mut e.bad_response,
                            || format!("response head over {MAX_HEAD} bytes"),
                        );
                        self.drop_conn(i, now, true);
                        return false;
                    }
                    let c = &mut self.conns[i];
                    let sock = c.sock.as_mut().expect("open");
                    asked = c.rbuf.len() - c.rend;
                    match c.tls.as_deref_mut() {
                        Some(t) => {
                            let mut done = false;
                            let r = read_plain(t, sock, &mut c.rbuf[c.rend..], &mut done);
                            self.stats.handshakes += u64::from(done);
                            r
                        }
                        None => sock.read(&mut c.rbuf[c.rend..]),
                    }
                }
            };
            match got {
                Ok(0) => {
                    let c = &self.conns[i];
                    let nothing_pending = c.body.is_none()
                        && c.rstart == c.rend
                        && c.h2.as_deref().is_none_or(|h| h.discardable().is_none());
                    if c.inflight.is_empty() && nothing_pending {
                        // The server closed an idle connection: reconnect quietly.
                        self.drop_conn(i, now, false);
                    } else if nothing_pending && c.answered > 0 {
                        self.retry_on_new_connection(i, now);
                    } else {
                        self.stats.error(
                            |e| &mut e.read,
                            || "the server closed the connection mid-response".into(),
                        );
                        self.drop_conn(i, now, true);
                    }
                    return false;
                }
                Ok(n) => {
                    let c = &mut self.conns[i];
                    c.last_progress_ns = now;
                    if discard.is_some() {
                        self.stats.bytes += n as u64;
                        if let Some(h) = c.h2.as_deref_mut() {
                            // Body bytes are counted when their stream ends.
                            let got = h.discarded(n as u64, &mut c.out);
                            if let Step::Dropped = self.h2_got(i, got, now) {
                                return false;
                            }
                            continue;
                        }
                        self.stats.body_bytes += n as u64;
                        let b = c.body.as_mut().expect("discarding a body");
                        b.remaining -= n as u64;
                    } else {
                        c.rend += n;
                    }
                    // (A short read of a TLS session's plaintext says nothing of the
                    // socket: only EAGAIN does.)
                    if n < asked && !c.peer_done && c.tls.is_none() {
                        // The socket is drained: no read that would only say EAGAIN (the
                        // next bytes to arrive, or the FIN, bring an edge of their own).
                        drained = true;
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drained = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let c = &self.conns[i];
                    if e.kind() == io::ErrorKind::ConnectionReset
                        && c.body.is_none()
                        && c.rstart == c.rend
                        && c.answered > 0
                    {
                        self.retry_on_new_connection(i, now);
                        return false;
                    }
                    self.stats
                        .error(|e| &mut e.read, || format!("reading a response: {e}"));
                    self.drop_conn(i, now, true);
                    return false;
                }
            }
        }
        // Stopped to give the others their turn: no edge comes for the bytes left.
        if !drained && !self.conns[i].on_run_list {
            self.conns[i].on_run_list = true;
            self.runnable.push(i);
        }
        // Finish what the last read completed.
        loop {
            match self.advance(i, now) {
                Step::Progress => continue,
                Step::NeedBytes => return true,
                Step::Dropped => return false,
            }
        }
    }

    /// Parses a head or consumes body bytes from the buffer.
    fn advance(&mut self, i: usize, now: u64) -> Step {
        if self.conns[i].h2.is_some() {
            return self.advance_h2(i, now);
        }
        let checksum = self.shared.checksum;
        let c = &mut self.conns[i];
        if c.body.is_none() {
            if c.rstart == c.rend {
                return Step::NeedBytes;
            }
            match parse_head(&c.rbuf[c.rstart..c.rend]) {
                Ok(None) => {
                    if c.rend - c.rstart > MAX_HEAD {
                        self.stats.error(
                            |e| &mut e.bad_response,
                            || format!("response head over {MAX_HEAD} bytes"),
                        );
                        self.drop_conn(i, now, true);
                        return Step::Dropped;
                    }
                    return Step::NeedBytes;
                }
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    // An interim response (100 Continue, 103 Early Hints): the final one
                    // follows for the same request.
                    c.rstart += h.head_len;
                    self.stats.bytes += h.head_len as u64;
                    return Step::Progress;
                }
                Ok(Some(h)) => {
                    if h.status == 101 {
                        self.stats.error(
                            |e| &mut e.bad_response,
                            || "101 Switching Protocols: not an HTTP/1.1 response".into(),
                        );
                        self.drop_conn(i, now, true);
                        return Step::Dropped;
                    }
                    if c.inflight.is_empty() {
                        self.stats.error(
                            |e| &mut e.bad_response,
                            || "a response nobody asked for".into(),
                        );
                        self.drop_conn(i, now, true);
                        return Step::Dropped;
                    }
                    c.rstart += h.head_len;
                    self.stats.bytes += h.head_len as u64;
                    c.body = Some(Body {
                        status: h.status,
                        remaining: h.content_length,
                        len: h.content_length,
                        close: h.close,
                        crc: checksum.then(crc32fast::Hasher::new),
                    });
                }
                Err(what) => {
                    self.stats
                        .error(|e| &mut e.bad_response, || what.to_string());
                    self.drop_conn(i, now, true);
                    return Step::Dropped;
                }
            }
        }
        let c = &mut self.conns[i];
        let b = c.body.as_mut().expect("a response in progress");
        let avail = (c.rend - c.rstart) as u64;
        let take = avail.min(b.remaining) as usize;
        if take > 0 {
            if let Some(h) = b.crc.as_mut() {
                h.update(&c.rbuf[c.rstart..c.rstart + take]);
            }
            c.rstart += take;
            b.remaining -= take as u64;
            self.stats.bytes += take as u64;
            self.stats.body_bytes += take as u64;
        }
        if c.rstart == c.rend {
            c.rstart = 0;
            c.rend = 0;
        }
        if b.remaining > 0 {
            return Step::NeedBytes;
        }
        // A whole response.
        let b = c.body.take().expect("a response in progress");
        let req = c.inflight.pop_front().expect("checked at the head");
        self.complete(i, req, b, now)
    }

    /// [`Thread::advance`] for HTTP/2: frames from the buffer, a stream at a time.
    fn advance_h2(&mut self, i: usize, now: u64) -> Step {
        let c = &mut self.conns[i];
        let Some(h) = c.h2.as_deref_mut() else {
            return Step::NeedBytes;
        };
        match h.read(&c.rbuf[c.rstart..c.rend], &mut c.out) {
            Err(what) => {
                self.stats.error(|e| &mut e.bad_response, || what);
                self.drop_conn(i, now, true);
                Step::Dropped
            }
            Ok((n, got)) => {
                c.rstart += n;
                self.stats.bytes += n as u64;
                if c.rstart == c.rend {
                    c.rstart = 0;
                    c.rend = 0;
                }
                match got {
                    Got::Need if n == 0 => Step::NeedBytes,
                    got => self.h2_got(i, got, now),
                }
            }
        }
    }

    /// What an HTTP/2 connection's bytes amounted to.
    fn h2_got(&mut self, i: usize, got: Got, now: u64) -> Step {
        match got {
            Got::Need => Step::Progress,
            Got::Response { index, status, len } => {
                let Some(req) = self.conns[i].inflight.remove(index) else {
                    return Step::Progress;
                };
                self.stats.body_bytes += len;
                let b = Body {
                    status,
                    remaining: 0,
                    len,
                    close: false,
                    crc: None,
                };
                let step = self.complete(i, req, b, now);
                let c = &self.conns[i];
                if c.going_away && c.inflight.is_empty() {
                    self.drop_conn(i, now, false);
                    return Step::Dropped;
                }
                step
            }
            Got::Reset { index, code } => {
                self.conns[i].inflight.remove(index);
                self.stats.error(
                    |e| &mut e.read,
                    || format!("the server reset a stream: {}", ClientH2::code_name(code)),
                );
                Step::Progress
            }
            Got::GoAway { last, code } => {
                if code != 0 {
                    self.stats.error(
                        |e| &mut e.read,
                        || format!("GOAWAY {}", ClientH2::code_name(code)),
                    );
                }
                // Streams above `last` will not be answered: they go again on a new
                // connection, counted as retried.
                let c = &mut self.conns[i];
                c.going_away = true;
                let gone =
                    c.h2.as_deref_mut()
                        .map_or(Vec::new(), |h| h.forget_above(last));
                for &index in &gone {
                    c.inflight.remove(index);
                }
                self.stats.retried += gone.len() as u64;
                self.shared.give_back(gone.len() as u64);
                let c = &self.conns[i];
                if c.inflight.is_empty() {
                    self.drop_conn(i, now, false);
                    return Step::Dropped;
                }
                Step::Progress
            }
        }
    }

    fn complete(&mut self, i: usize, req: Inflight, b: Body, now: u64) -> Step {
        self.conns[i].answered += 1;
        let crc = b.crc.map(crc32fast::Hasher::finalize);
        tally(
            self.shared,
            &mut self.stats,
            &mut self.crcs,
            req.item,
            req.start_ns,
            now,
            b.status,
            b.len,
            crc,
        );
        if b.close || self.shared.close {
            // The server closes after this response: requests pipelined behind it will
            // never be answered. They are not errors; they go again on a new connection
            // (with -n, their share of the budget is given back).
            self.shared.give_back(self.conns[i].inflight.len() as u64);
            self.drop_conn(i, now, false);
            return Step::Dropped;
        }
        Step::Progress
    }

    /// Closes connection `i`; requests in flight are lost (counted by the caller). The
    /// connection reconnects at once, or after a pause when it failed.
    fn drop_conn(&mut self, i: usize, now: u64, failed: bool) {
        let c = &mut self.conns[i];
        if let Some(sock) = c.sock.take() {
            let _ = self.driver.close(i as u64, sock.into());
        }
        c.tls = None;
        c.h2 = None;
        c.going_away = false;
        c.inflight.clear();
        c.body = None;
        c.out.clear();
        c.out_pos = 0;
        c.rstart = 0;
        c.rend = 0;
        c.answered = 0;
        let at = if failed {
            now + RECONNECT_PAUSE.as_nanos() as u64
        } else {
            now
        };
        // Paced connections reconnect when their next request is due.
        let at = if c.interval_ns > 0 {
            at.max(c.next_due_ns)
        } else {
            at
        };
        c.state = State::Idle { at_ns: at };
        self.any_idle = true;
    }

    fn sweep_timeouts(&mut self, now: u64) {
        let limit = self.shared.timeout.as_nanos() as u64;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            let waiting = matches!(c.state, State::Connecting)
                || (matches!(c.state, State::Open) && !c.inflight.is_empty());
            if waiting && now.saturating_sub(c.last_progress_ns) > limit {
                let secs = self.shared.timeout.as_secs_f64();
                self.stats.error(
                    |e| &mut e.timeout,
                    || format!("no response progress for {secs} s"),
                );
                self.drop_conn(i, now, true);
            }
        }
    }
}

/// Counts an answer to a request for `item` started at `start_ns`: its latency, its
/// status, and for a 2xx its body's length (and checksum, when read) against what the
/// item expects, or against the first body seen for it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tally(
    shared: &Shared,
    stats: &mut ThreadStats,
    crcs: &mut BTreeMap<usize, (u64, u32)>,
    item: usize,
    start_ns: u64,
    now: u64,
    status: u16,
    len: u64,
    crc: Option<u32>,
) {
    let latency_us = (now.saturating_sub(start_ns) / 1000).max(1);
    let _ = stats.latency_us.record(latency_us.min(100_000_000));
    stats.requests += 1;
    *stats.statuses.entry(status).or_insert(0) += 1;
    shared.completed.fetch_add(1, Ordering::Relaxed);
    // Only successful responses carry the file.
    if !(200..300).contains(&status) {
        return;
    }
    let path = || &shared.workload.items()[item].path;
    match shared.workload.items()[item].expect {
        Some(x) => {
            if x.len != len {
                stats.error(
                    |e| &mut e.length,
                    || format!("{}: {len} bytes, expected {}", path(), x.len),
                );
            } else if crc.is_some_and(|c| c != x.crc) {
                stats.error(
                    |e| &mut e.checksum,
                    || format!("{}: checksum differs", path()),
                );
            }
        }
        None => {
            let seen = *crcs.entry(item).or_insert((len, crc.unwrap_or(0)));
            if seen.0 != len {
                stats.error(
                    |e| &mut e.length,
                    || format!("{}: {len} bytes, earlier {}", path(), seen.0),
                );
            } else if crc.is_some_and(|c| c != seen.1) {
                stats.error(
                    |e| &mut e.checksum,
                    || format!("{}: checksum differs from an earlier response", path()),
                );
            }
        }
    }
}

enum Step {
    Progress,
    NeedBytes,
    Dropped,
}

/// A parsed response head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub status: u16,
    pub content_length: u64,
    pub close: bool,
    pub head_len: usize,
}

/// Parses a response head at the start of `buf`: `Ok(None)` while incomplete. Bodies
/// must be framed by `Content-Length` (or be empty by status); chunked responses are an
/// error, as static servers do not send them for files.
pub(crate) fn parse_head(buf: &[u8]) -> Result<Option<Head>, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 48];
    let mut r = httparse::Response::new(&mut headers);
    let head_len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err("a malformed response head"),
    };
    let status = r.code.ok_or("a response without a status")?;
    let mut content_length = None;
    let mut close = r.version == Some(0);
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or("a bad Content-Length")?;
            if content_length.is_some_and(|c| c != v) {
                return Err("conflicting Content-Length fields");
            }
            content_length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err("a Transfer-Encoding response (only Content-Length is supported)");
        } else if h.name.eq_ignore_ascii_case("connection") {
            for tok in h.value.split(|&b| b == b',') {
                let tok = tok.trim_ascii();
                if tok.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if tok.eq_ignore_ascii_case(b"keep-alive") && r.version == Some(0) {
                    close = false;
                }
            }
        }
    }
    let bodiless = (100..200).contains(&status) || status == 204 || status == 304;
    let content_length = match (content_length, bodiless) {
        (_, true) => 0,
        (Some(n), false) => n,
        (None, false) => return Err("a response without Content-Length"),
    };
    Ok(Some(Head {
        status,
        content_length,
        close,
        head_len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread's settings for a test against `target`: `n` requests for `/`.
    /// One connection, unpaced, from `start` to `end`.
    fn one(start: Instant, end: Instant) -> Part {
        Part {
            conns: 1,
            first: 0,
            total: 1,
            rate_per_conn: None,
            start,
            end: Some(end),
        }
    }

    fn shared(target: SocketAddr, pipeline: usize, n: u64, reads_per_event: usize) -> Shared {
        Shared {
            target,
            workload: Arc::new(Workload::List(vec![super::super::workload::Item {
                path: "/".into(),
                expect: None,
            }])),
            requests: vec![b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()],
            pipeline,
            close: false,
            checksum: false,
            timeout: Duration::from_secs(2),
            seed: 1,
            limit: Limit::Requests(n),
            issued: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            stop: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            reads_per_event,
            tls: None,
            h2: None,
            h3: None,
        }
    }

    /// An answer cut short by the server's close: its bytes and the FIN may be reported
    /// in one edge, and the short read of the bytes must not be taken for "nothing
    /// left", or the end is never read (no edge comes for it) and the run waits for its
    /// timeout instead of counting a read error.
    #[test]
    fn an_answer_and_the_close_behind_it_in_one_edge_are_both_read() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for s in l.incoming().take(20) {
                let mut s = s.unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
            }
        });
        for _ in 0..20 {
            let shared = shared(target, 1, 1, READS_PER_EVENT);
            let start = Instant::now();
            let end = start + Duration::from_secs(10);
            let stats = run_thread(&shared, one(start, end)).unwrap();
            assert_eq!(stats.errors.timeout, 0, "{:?}", stats.first_error);
            assert_eq!(stats.errors.read, 1, "{:?}", stats.first_error);
        }
        server.join().unwrap();
    }

    /// Connections are edge-triggered: one that stops reading for the others' turn,
    /// with bytes left in its socket, gets no new edge for them and must come back by
    /// itself (the run list). One read per turn here, and 64 answers of 2 KiB written
    /// at once: without the run list the last of them sit in the socket until the
    /// timeout.
    #[test]
    fn a_connection_that_stops_reading_for_its_turn_reads_on_without_a_new_edge() {
        use std::io::{Read, Write};
        const N: usize = 64;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 65_536];
            while seen.windows(4).filter(|w| w == b"\r\n\r\n").count() < N {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0, "the client went before its requests were whole");
                seen.extend_from_slice(&buf[..n]);
            }
            let mut all = Vec::new();
            for _ in 0..N {
                all.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2048\r\n\r\n");
                all.extend_from_slice(&[b'x'; 2048]);
            }
            s.write_all(&all).unwrap();
            // Held open, nothing more sent, until the client goes.
            let _ = s.read(&mut buf);
        });
        let shared = shared(target, N, N as u64, 1);
        let start = Instant::now();
        let stats = run_thread(&shared, one(start, start + Duration::from_secs(10))).unwrap();
        assert_eq!(stats.errors.timeout, 0, "{:?}", stats.first_error);
        assert_eq!(stats.requests, N as u64);
        assert_eq!(stats.body_bytes, (N * 2048) as u64);
        server.join().unwrap();
    }

    #[test]
    fn heads() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
        assert_eq!(
            h,
            Some(Head {
                status: 200,
                content_length: 5,
                close: false,
                head_len: 38
            })
        );
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Len").unwrap(), None);
        let h = parse_head(b"HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.content_length, h.close), (0, true));
        let h = parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.close);
        let h =
            parse_head(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\n")
                .unwrap()
                .unwrap();
        assert!(!h.close);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
                .is_err()
        );
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
    }
}
