//! `bench http --h3`: one load-generating thread's HTTP/3 connections, each a QUIC
//! connection of quinn-proto's (sans I/O, the clock passed in, as the server drives
//! its own) on a UDP socket of its own, so that the server's `SO_REUSEPORT` spreads
//! the connections over its workers as it spreads TCP ones.
//!
//! A request is a bidirectional stream: its HEADERS frame (QPACK with the static table
//! and literals, built once per item by `linerate-http`'s encoder) and its end. The
//! answer's frames are read by `linerate-http`'s frame reader: the head's `:status`
//! decoded, DATA counted (and hashed with `--checksum`), never copied out of the
//! stream's buffer. The client's SETTINGS are empty: no dynamic table, so the server's
//! heads are decoded without one. The server's control stream is read for GOAWAY (no
//! new request goes on that connection; those it rejects go again on the next); its
//! QPACK streams are read and dropped.
//!
//! Each datagram is one `send` or `recv` on a connected socket: the client's own cost
//! (QUIC's decryption above all) is reported as for the other protocols, so that a run
//! whose client saturates its core can be told from one the server limits.
//!
//! Written here, not taken from `h3`/`h3-quinn`, for the reasons the server's HTTP/3
//! module gives: they need an async runtime, and a load's timing must not pass through
//! one.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use linerate_event::{Driver, EpollDriver, Interest, Ready};
use linerate_http::h3::error::ErrorCode;
use linerate_http::h3::frame::{self, Event as FrameEvent, Frame, FrameReader, Role};
use linerate_http::h3::qpack::{Decoder, Encoder};
use linerate_http::h3::stream::{StreamType, StreamTypeReader};
use quinn_proto::{
    ClientConfig, Connection, ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint,
    EndpointConfig, Event, ReadError, StreamEvent, StreamId, VarInt,
};

use super::client::{pacing, request_start, tally, Part, Shared, ThreadStats};
use super::workload::Picker;

/// The largest field section taken in a HEADERS frame.
const MAX_HEAD: u64 = 64 * 1024;
/// Datagrams read from one socket before the other connections' turn (the socket is
/// level-triggered: the rest are reported again).
const READS_PER_EVENT: usize = 64;
/// The largest UDP payload.
const DATAGRAM: usize = 65_535;
/// Pause before reconnecting after a failed connection.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);
/// The client's control stream: its type (0x00) and an empty SETTINGS frame.
const CONTROL: [u8; 3] = [0x00, 0x04, 0x00];

/// What an HTTP/3 run asks with.
pub(crate) struct H3Setup {
    /// QUIC's TLS settings (ALPN `h3`).
    pub config: ClientConfig,
    /// The name the certificate is checked against (SNI).
    pub server_name: String,
    /// Each item's request: a whole HEADERS frame.
    pub frames: Vec<Vec<u8>>,
}

/// A request's HEADERS frame: GET `path` of `authority` over https, with `extra`
/// fields (names lower-cased), as literals where the static table has no entry.
pub(crate) fn request_frame(authority: &str, path: &str, extra: &[(String, String)]) -> Vec<u8> {
    let encoder = Encoder { huffman: false };
    let mut section = Vec::with_capacity(32 + authority.len() + path.len());
    encoder.start(&mut section);
    encoder.field(&mut section, b":method", b"GET");
    encoder.field(&mut section, b":scheme", b"https");
    encoder.field(&mut section, b":authority", authority.as_bytes());
    encoder.field(&mut section, b":path", path.as_bytes());
    for (name, value) in extra {
        encoder.field(&mut section, name.as_bytes(), value.as_bytes());
    }
    let mut f = Vec::with_capacity(section.len() + 4);
    frame::write_headers_header(&mut f, section.len() as u64).expect("a head this small");
    f.extend_from_slice(&section);
    f
}

/// A request in flight: its stream's frames so far.
struct Request {
    item: usize,
    /// Its start, ns since the run's start.
    start_ns: u64,
    frames: FrameReader,
    status: Option<u16>,
    len: u64,
    crc: Option<crc32fast::Hasher>,
}

/// A unidirectional stream of the server's.
enum Uni {
    /// Its type still to come.
    Typed(StreamTypeReader),
    /// The control stream: read for GOAWAY.
    Control(FrameReader),
    /// QPACK's streams, and any other: read and dropped.
    Dropped,
}

/// One connection (a socket and an endpoint of its own, for its life).
struct Conn {
    sock: UdpSocket,
    endpoint: Endpoint,
    quic: Connection,
    handle: ConnectionHandle,
    /// The handshake finished (the control stream is open).
    up: bool,
    requests: HashMap<StreamId, Request>,
    uni: HashMap<StreamId, Uni>,
    /// The server said GOAWAY: no more requests on this connection.
    going_away: bool,
    /// Last progress (ns), for the timeout.
    last_progress_ns: u64,
    /// Answers completed on it.
    answered: u64,
    /// With --close: it holds the ticket of its one request, not yet sent.
    ticket: bool,
}

/// A connection slot: its connection, or when it may connect (ns).
struct Slot {
    conn: Option<Conn>,
    idle_at: u64,
    picker: Picker,
    /// Paced: when its next request is due (ns), and ns between them.
    next_due_ns: u64,
    interval_ns: u64,
}

/// Runs one thread's share of an HTTP/3 load (`shared.h3` set).
pub(crate) fn run_thread(shared: &Shared, part: Part) -> io::Result<ThreadStats> {
    let conns = part.conns;
    let setup = shared
        .h3
        .as_ref()
        .ok_or_else(|| io::Error::other("an HTTP/3 load without its settings"))?;
    let mut slots = Vec::with_capacity(conns);
    for i in 0..conns {
        let global = part.first + i;
        let (interval_ns, first_due) = pacing(part.rate_per_conn, global, part.total);
        slots.push(Slot {
            conn: None,
            idle_at: first_due,
            picker: shared.workload.picker(shared.seed, global),
            next_due_ns: first_due,
            interval_ns,
        });
    }
    let mut t = Thread {
        shared,
        setup,
        start: part.start,
        stats: ThreadStats::new(),
        driver: EpollDriver::with_events(conns.max(1))?,
        events: Vec::with_capacity(conns.max(1)),
        slots,
        crcs: BTreeMap::new(),
        decoder: Decoder::new(),
        buf: vec![0; DATAGRAM],
        out: Vec::with_capacity(DATAGRAM),
    };
    t.run(part.end)?;
    for slot in &t.slots {
        if let Some(c) = &slot.conn {
            t.stats.ack_frequency_frames += c.quic.stats().frame_rx.ack_frequency;
        }
    }
    t.stats.finished = Instant::now();
    Ok(t.stats)
}

struct Thread<'a> {
    shared: &'a Shared,
    setup: &'a H3Setup,
    start: Instant,
    stats: ThreadStats,
    driver: EpollDriver,
    events: Vec<Ready>,
    slots: Vec<Slot>,
    crcs: BTreeMap<usize, (u64, u32)>,
    decoder: Decoder,
    /// A datagram received.
    buf: Vec<u8>,
    /// A datagram to send.
    out: Vec<u8>,
}

impl Thread<'_> {
    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_nanos() as u64
    }

    fn run(&mut self, end: Option<Instant>) -> io::Result<()> {
        let end_ns = end.map(|e| self.ns(e));
        let mut last_sweep = 0u64;
        loop {
            if crate::stopped(&self.shared.stop) {
                break;
            }
            let now = Instant::now();
            let now_ns = self.ns(now);
            if end_ns.is_some_and(|e| now_ns >= e) {
                break;
            }
            let mut next_wake = end_ns.unwrap_or(u64::MAX);
            for i in 0..self.slots.len() {
                next_wake = next_wake.min(self.service(i, now));
            }
            if !self.shared.may_issue()
                && self.slots.iter().all(|s| {
                    s.conn
                        .as_ref()
                        .is_none_or(|c| c.requests.is_empty() && !c.ticket)
                })
            {
                break; // -n reached and everything answered
            }
            if now_ns.saturating_sub(last_sweep) > 100_000_000 {
                last_sweep = now_ns;
                self.sweep_timeouts(now);
            }
            let wait = next_wake.saturating_sub(now_ns).min(100_000_000);
            self.events.clear();
            self.driver
                .wait(&mut self.events, Duration::from_nanos(wait))?;
            let events = std::mem::take(&mut self.events);
            for ev in &events {
                self.receive(ev.token as usize);
            }
            self.events = events;
        }
        // Whatever is open says goodbye (the server's state goes at once, not at its
        // idle timeout).
        let now = Instant::now();
        for i in 0..self.slots.len() {
            if let Some(c) = self.slots[i].conn.as_mut() {
                c.quic.close(now, no_error(), Bytes::new());
                self.transmit(i, now);
            }
        }
        Ok(())
    }

    /// Connects a slot whose time has come, runs its connection's timers, sends due
    /// requests; returns when it next needs attention without a datagram (ns).
    fn service(&mut self, i: usize, now: Instant) -> u64 {
        let now_ns = self.ns(now);
        if self.slots[i].conn.is_none() {
            let at = self.slots[i].idle_at;
            if at == u64::MAX || at > now_ns {
                return at;
            }
            // With --close the connection's one request is taken now, so that no
            // connection is made that the budget then leaves unused.
            let ready = if self.shared.close {
                self.shared.take_ticket()
            } else {
                self.shared.may_issue()
            };
            if !ready {
                self.slots[i].idle_at = u64::MAX;
                return u64::MAX;
            }
            self.connect(i, now);
        }
        let Some(c) = self.slots[i].conn.as_mut() else {
            return self.slots[i].idle_at;
        };
        if c.quic.poll_timeout().is_some_and(|t| t <= now) {
            c.quic.handle_timeout(now);
        }
        self.progress(i, now);
        let start = self.start;
        let slot = &mut self.slots[i];
        let Some(c) = slot.conn.as_mut() else {
            return slot.idle_at;
        };
        let timer = c.quic.poll_timeout().map_or(u64::MAX, |t| {
            t.saturating_duration_since(start).as_nanos() as u64
        });
        if slot.interval_ns > 0 && c.up && c.requests.len() < self.shared.pipeline {
            timer.min(slot.next_due_ns)
        } else {
            timer
        }
    }

    fn connect(&mut self, i: usize, now: Instant) {
        let target = self.shared.target;
        let local: SocketAddr = if target.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let sock = match UdpSocket::bind(local)
            .and_then(|s| s.connect(target).map(|()| s))
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
        {
            Ok(s) => s,
            Err(e) => return self.failed(i, now, format!("UDP socket for {target}: {e}")),
        };
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        let (handle, quic) = match endpoint.connect(
            now,
            self.setup.config.clone(),
            target,
            &self.setup.server_name,
        ) {
            Ok(made) => made,
            Err(e) => return self.failed(i, now, format!("QUIC to {target}: {e}")),
        };
        if let Err(e) = self
            .driver
            .register(sock.as_fd(), i as u64, Interest::Datagram)
        {
            return self.failed(i, now, format!("registering a UDP socket: {e}"));
        }
        self.stats.connections += 1;
        let now_ns = self.ns(now);
        self.slots[i].conn = Some(Conn {
            sock,
            endpoint,
            quic,
            handle,
            up: false,
            requests: HashMap::new(),
            uni: HashMap::new(),
            going_away: false,
            last_progress_ns: now_ns,
            answered: 0,
            ticket: self.shared.close,
        });
        self.transmit(i, now);
    }

    /// A connection that could not be made: counted, and tried again after a pause;
    /// with `-n` it uses up one request (with `--close`, the one it took), so a run
    /// against a server that does not answer ends instead of trying for ever.
    fn failed(&mut self, i: usize, now: Instant, what: String) {
        self.stats.error(|e| &mut e.connect, || what);
        if !self.shared.close {
            let _ = self.shared.take_ticket();
        }
        self.slots[i].idle_at = self.ns(now) + RECONNECT_PAUSE.as_nanos() as u64;
    }

    /// Reads the datagrams waiting on slot `i`'s socket into its connection.
    fn receive(&mut self, i: usize) {
        let now = Instant::now();
        let target = self.shared.target;
        let Some(c) = self.slots[i].conn.as_mut() else {
            return;
        };
        for _ in 0..READS_PER_EVENT {
            let n = match c.sock.recv(&mut self.buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP error reported on the socket (the port closed): the
                // connection's timers will tell.
                Err(_) => break,
            };
            let data = BytesMut::from(&self.buf[..n]);
            self.out.clear();
            match c
                .endpoint
                .handle(now, target, None, None, data, &mut self.out)
            {
                Some(DatagramEvent::ConnectionEvent(_, ev)) => c.quic.handle_event(ev),
                Some(DatagramEvent::Response(t)) => {
                    let _ = c.sock.send(&self.out[..t.size]);
                }
                Some(DatagramEvent::NewConnection(_)) | None => {}
            }
        }
        self.progress(i, now);
    }

    /// Takes in what connection `i`'s last datagrams or timers did (its events), sends
    /// the requests it may, and sends what it has to.
    fn progress(&mut self, i: usize, now: Instant) {
        loop {
            let Some(c) = self.slots[i].conn.as_mut() else {
                return;
            };
            while let Some(ev) = c.quic.poll_endpoint_events() {
                if let Some(back) = c.endpoint.handle_event(c.handle, ev) {
                    c.quic.handle_event(back);
                }
            }
            let Some(ev) = c.quic.poll() else {
                break;
            };
            match ev {
                Event::Connected => {
                    self.stats.handshakes += 1;
                    c.up = true;
                    match c.quic.streams().open(Dir::Uni) {
                        Some(id) => {
                            let _ = c.quic.send_stream(id).write(&CONTROL);
                        }
                        None => {
                            self.stats.error(
                                |e| &mut e.bad_response,
                                || "the server allows no unidirectional stream".into(),
                            );
                            return self.drop_conn(i, now, true);
                        }
                    }
                }
                Event::ConnectionLost { reason } => return self.lost(i, now, reason),
                Event::Stream(StreamEvent::Readable { id }) => {
                    if !self.read(i, id, now) {
                        return;
                    }
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    let mut opened = Vec::new();
                    while let Some(id) = c.quic.streams().accept(Dir::Uni) {
                        c.uni.insert(id, Uni::Typed(StreamTypeReader::new()));
                        opened.push(id);
                    }
                    for id in opened {
                        if !self.read(i, id, now) {
                            return;
                        }
                    }
                }
                Event::Stream(_) | Event::HandshakeDataReady => {}
                Event::DatagramReceived | Event::DatagramsUnblocked => {}
            }
        }
        // Done with: every answer in after a GOAWAY, or the one request of --close.
        if let Some(c) = self.slots[i].conn.as_ref() {
            let done = c.going_away || (self.shared.close && c.answered > 0);
            if done && c.requests.is_empty() {
                return self.drop_conn(i, now, false);
            }
        }
        self.fill(i, now);
        self.transmit(i, now);
    }

    /// Sends the requests connection `i` may have in flight (paced: those due).
    fn fill(&mut self, i: usize, now: Instant) {
        let now_ns = self.ns(now);
        let depth = self.shared.pipeline;
        let close = self.shared.close;
        let slot = &mut self.slots[i];
        let Some(c) = slot.conn.as_mut() else {
            return;
        };
        while c.up && !c.going_away && c.requests.len() < depth {
            // One request per connection with --close.
            if close && c.answered + c.requests.len() as u64 >= 1 {
                break;
            }
            if slot.interval_ns > 0 && slot.next_due_ns > now_ns {
                break;
            }
            // --close: its one request was taken when it connected.
            if !close && !self.shared.take_ticket() {
                break;
            }
            let Some(id) = c.quic.streams().open(Dir::Bi) else {
                // The server's stream limit: its MAX_STREAMS brings more (with
                // --close, the ticket stays with the connection's one request).
                if !close {
                    self.shared.give_back(1);
                }
                break;
            };
            let start_ns = request_start(&mut slot.next_due_ns, slot.interval_ns, now_ns);
            c.ticket = false;
            let item = slot.picker.next(self.setup.frames.len());
            let mut send = c.quic.send_stream(id);
            let _ = send.write(&self.setup.frames[item]);
            let _ = send.finish();
            c.requests.insert(
                id,
                Request {
                    item,
                    start_ns,
                    frames: FrameReader::new(Role::Request, MAX_HEAD),
                    status: None,
                    len: 0,
                    crc: self.shared.checksum.then(crc32fast::Hasher::new),
                },
            );
        }
    }

    /// Sends connection `i`'s datagrams.
    fn transmit(&mut self, i: usize, now: Instant) {
        let Some(c) = self.slots[i].conn.as_mut() else {
            return;
        };
        loop {
            self.out.clear();
            let Some(t) = c.quic.poll_transmit(now, 1, &mut self.out) else {
                break;
            };
            match c.sock.send(&self.out[..t.size]) {
                Ok(_) => {}
                // A full socket buffer drops the datagram, as the network may: QUIC
                // sends it again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => break,
            }
        }
    }

    /// Reads stream `id` of connection `i`; false if the connection was dropped.
    fn read(&mut self, i: usize, id: StreamId, now: Instant) -> bool {
        let now_ns = self.ns(now);
        let Some(c) = self.slots[i].conn.as_mut() else {
            return false;
        };
        let mut recv = c.quic.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return true; // a stream already finished with
        };
        let mut fin = false;
        let mut reset = None;
        let mut bad = None;
        let mut got = 0u64;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => {
                    got += chunk.bytes.len() as u64;
                    let result = if let Some(r) = c.requests.get_mut(&id) {
                        answer(r, &chunk.bytes, &mut self.decoder)
                    } else if let Some(u) = c.uni.get_mut(&id) {
                        server_stream(u, &chunk.bytes).map(|away| c.going_away |= away)
                    } else {
                        Ok(())
                    };
                    if let Err(e) = result {
                        bad = Some(e);
                        break;
                    }
                }
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(code)) => {
                    reset = Some(code.into_inner());
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        self.stats.bytes += got;
        if got > 0 {
            c.last_progress_ns = now_ns;
        }
        if let Some(e) = bad {
            self.stats.error(|e| &mut e.bad_response, || e);
            self.drop_conn(i, now, true);
            return false;
        }
        if !(fin || reset.is_some()) {
            return true;
        }
        c.uni.remove(&id);
        let Some(r) = c.requests.remove(&id) else {
            return true;
        };
        if let Some(code) = reset {
            if code == ErrorCode::RequestRejected.as_u64() {
                // Not taken (after a GOAWAY): it goes again elsewhere; with --close,
                // on the next connection, this one done with.
                self.stats.retried += 1;
                self.shared.give_back(1);
                c.going_away |= self.shared.close;
            } else {
                let path = &self.shared.workload.items()[r.item].path;
                self.stats.error(
                    |e| &mut e.read,
                    || format!("{path}: stream reset by the server ({code:#x})"),
                );
            }
            return true;
        }
        let Some(status) = r.status else {
            let path = &self.shared.workload.items()[r.item].path;
            self.stats.error(
                |e| &mut e.bad_response,
                || format!("{path}: the stream ended without a head"),
            );
            return true;
        };
        c.answered += 1;
        self.stats.body_bytes += r.len;
        let crc = r.crc.map(crc32fast::Hasher::finalize);
        tally(
            self.shared,
            &mut self.stats,
            &mut self.crcs,
            r.item,
            r.start_ns,
            now_ns,
            status,
            r.len,
            crc,
        );
        true
    }

    /// The connection ended under connection `i`: its requests in flight are errors,
    /// unless the server closed cleanly after a GOAWAY or after the one request of
    /// `--close` (they go again elsewhere).
    fn lost(&mut self, i: usize, now: Instant, reason: ConnectionError) {
        let Some(c) = self.slots[i].conn.as_ref() else {
            return;
        };
        let clean = match &reason {
            ConnectionError::ApplicationClosed(a) => {
                a.error_code.into_inner() == ErrorCode::NoError.as_u64()
            }
            ConnectionError::LocallyClosed => true,
            _ => false,
        };
        let in_flight = c.requests.len() as u64;
        if !c.up {
            let target = self.shared.target;
            self.stats
                .error(|e| &mut e.connect, || format!("QUIC to {target}: {reason}"));
            if !self.shared.close {
                let _ = self.shared.take_ticket();
            }
            return self.drop_conn(i, now, true);
        }
        if clean || in_flight == 0 {
            // Closed cleanly, or idle (its idle timeout): nothing lost.
            self.shared.give_back(in_flight);
            self.stats.retried += in_flight;
            self.drop_conn(i, now, false);
        } else {
            self.stats
                .error(|e| &mut e.read, || format!("connection lost: {reason}"));
            self.drop_conn(i, now, true);
        }
    }

    /// Closes connection `i` (its requests in flight are the caller's to count) and
    /// lets its slot connect again: at once, or after a pause when it failed.
    fn drop_conn(&mut self, i: usize, now: Instant, failed: bool) {
        let now_ns = self.ns(now);
        let slot = &mut self.slots[i];
        if let Some(mut c) = slot.conn.take() {
            self.stats.ack_frequency_frames += c.quic.stats().frame_rx.ack_frequency;
            if !c.quic.is_closed() {
                c.quic.close(now, no_error(), Bytes::new());
                self.out.clear();
                while let Some(t) = c.quic.poll_transmit(now, 1, &mut self.out) {
                    let _ = c.sock.send(&self.out[..t.size]);
                    self.out.clear();
                }
            }
            let _ = self.driver.deregister(c.sock.as_fd());
        }
        let at = if failed {
            now_ns + RECONNECT_PAUSE.as_nanos() as u64
        } else {
            now_ns
        };
        slot.idle_at = if slot.interval_ns > 0 {
            at.max(slot.next_due_ns)
        } else {
            at
        };
    }

    /// Ends the connections that made no progress within the timeout.
    fn sweep_timeouts(&mut self, now: Instant) {
        let now_ns = self.ns(now);
        let limit = self.shared.timeout.as_nanos() as u64;
        for i in 0..self.slots.len() {
            let Some(c) = self.slots[i].conn.as_ref() else {
                continue;
            };
            let waiting = !c.up || !c.requests.is_empty();
            if waiting && now_ns.saturating_sub(c.last_progress_ns) > limit {
                if !c.up && !self.shared.close {
                    let _ = self.shared.take_ticket();
                }
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

/// Takes `bytes` of a request stream's answer: its head's status, its body counted.
fn answer(r: &mut Request, bytes: &[u8], decoder: &mut Decoder) -> Result<(), String> {
    let mut at = 0;
    while at < bytes.len() {
        let (n, ev) = r
            .frames
            .read(&bytes[at..])
            .map_err(|e| format!("a malformed answer: {e:?}"))?;
        at += n;
        match ev {
            None => break,
            Some(FrameEvent::Frame(Frame::Headers(section))) => {
                if r.status.is_some() {
                    continue; // trailers
                }
                let mut status = None;
                decoder
                    .decode(&section, MAX_HEAD as usize, &mut |name, value| {
                        if name == b":status" {
                            status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                        }
                    })
                    .map_err(|e| format!("an undecodable head: {e:?}"))?;
                match status {
                    // An interim answer (1xx): the final head follows.
                    Some(s) if (100..200).contains(&s) => {}
                    Some(s) => r.status = Some(s),
                    None => return Err("a head without :status".into()),
                }
            }
            Some(FrameEvent::DataBytes(b)) => {
                r.len += b.len() as u64;
                if let Some(h) = r.crc.as_mut() {
                    h.update(b);
                }
            }
            Some(FrameEvent::Data { .. } | FrameEvent::Skipped { .. }) => {}
            Some(FrameEvent::Frame(f)) => return Err(format!("a {f:?} frame on a request stream")),
        }
    }
    Ok(())
}

/// Takes `bytes` of one of the server's unidirectional streams: true once its
/// control stream said GOAWAY.
fn server_stream(u: &mut Uni, bytes: &[u8]) -> Result<bool, String> {
    let mut at = 0;
    let mut away = false;
    while at < bytes.len() {
        match u {
            Uni::Typed(r) => {
                let (n, t) = r.read(&bytes[at..]);
                at += n;
                match t {
                    Some(StreamType::Control) => {
                        *u = Uni::Control(FrameReader::new(Role::Control, MAX_HEAD))
                    }
                    Some(_) => *u = Uni::Dropped,
                    None => {}
                }
            }
            Uni::Control(r) => {
                let (n, ev) = r
                    .read(&bytes[at..])
                    .map_err(|e| format!("the server's control stream: {e:?}"))?;
                at += n;
                match ev {
                    None => break,
                    Some(FrameEvent::Frame(Frame::GoAway(_))) => away = true,
                    Some(_) => {}
                }
            }
            Uni::Dropped => break,
        }
    }
    Ok(away)
}

/// H3_NO_ERROR, a connection's clean close.
fn no_error() -> VarInt {
    VarInt::from_u32(0x100)
}
