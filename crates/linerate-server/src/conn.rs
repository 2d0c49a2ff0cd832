//! One connection: bytes in, parsed requests, the output queue ([`crate::output`]),
//! bytes out.
//!
//! Reading stops while the queue holds [`MAX_QUEUED`] responses, so a client that
//! pipelines without reading cannot grow the server's memory. The socket is registered
//! edge-triggered, so each call reads and writes until the kernel says `EAGAIN` (or the
//! engine says the buffer is full). The output queue makes no call itself: `flush`
//! hands each operation it asks for to whoever runs it: the TLS session, a filter on
//! an HTTPS connection (plaintext in, records out); the worker's disk helpers for a
//! window to read in; else the driver's executor ([`Driver::execute`]).
//!
//! Under a driver that does the connection's I/O on its ring (`Driver::ring`),
//! the connection reads nothing itself: the bytes come from the driver
//! ([`Conn::received`]), and its gathers go on the ring, one at a time, their results
//! coming back in a later turn ([`Conn::sent`]). The driver's executor still makes a
//! file body's operations (`sendfile`, `splice`, zero-copy sends) and `TCP_CORK` at
//! once, on the ring's writable edges.
//!
//! On an HTTPS listener the connection holds a TLS session ([`crate::tls`]): what it
//! reads goes through the session before its HTTP input sees it, and what its queue
//! sends goes into the session, whose records this executor then writes (or hands to
//! the driver). Its file bodies go by the `copy` strategy.

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

use linerate_event::{Driver, Submitted};
use linerate_http::connection::{Connection, Ending};
use linerate_http::request::Limits;
use linerate_http::Protocol;
use linerate_sys::op::Op;
use linerate_sys::Errno;
use linerate_tx::{Flow, TxError, TxSocket};

use crate::listen::Peer;
use crate::output::{Ctx, OutNext, Output};
use crate::response::Response;
use crate::site::Site;
use crate::stats::Stats;
use crate::tls::{Refused, Session};

mod http;
mod transport;

pub(crate) use http::Http;
use http::Next;
use transport::{looks_like_http, Farewell, Transport};

/// Responses queued per connection before it stops reading.
pub(crate) const MAX_QUEUED: usize = 32;
/// Bytes read per call (the worker's scratch buffer).
pub(crate) const READ_BYTES: usize = 16 * 1024;
/// Most bytes read from one connection per turn (a large request body being discarded,
/// say) before the worker serves the others.
const READ_TURN_BYTES: usize = 256 * 1024;

/// What the worker should do with the connection after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Keep it.
    Keep,
    /// Close it.
    Close,
    /// Close it with a reset: bytes queued in the socket must not be delivered.
    Reset,
}

/// How a response that did not finish was cut, for the access log and the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// The client reset or closed the connection first (nginx logs 499 when nothing
    /// was sent).
    Client,
    /// No send progress for `--send-timeout`.
    SendTimeout,
    /// The client took less than `--min-send-rate` over a `--send-timeout`.
    SlowClient,
    /// The request body did not come whole within `--body-timeout`.
    BodyTimeout,
    /// The shutdown deadline after SIGTERM.
    Shutdown,
    /// The file shrank during the send.
    Truncated,
    /// A local error (out of descriptors for a pipe, a disk error under `sendfile`).
    Error,
}

impl Cut {
    /// The word in the access log.
    pub fn as_str(self) -> &'static str {
        match self {
            Cut::Client => "client",
            Cut::SendTimeout => "send-timeout",
            Cut::SlowClient => "min-send-rate",
            Cut::BodyTimeout => "body-timeout",
            Cut::Shutdown => "shutdown",
            Cut::Truncated => "truncated",
            Cut::Error => "error",
        }
    }
}

/// What the access log says of a response that did not finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aborted {
    pub cut: Cut,
    /// Body bytes (everything after the head) that left.
    pub body_sent: u64,
    /// None of the head left.
    pub nothing_sent: bool,
}

pub(crate) struct Conn {
    pub sock: socket2::Socket,
    pub peer: Peer,
    /// The engine's state for this socket, made when the first file part goes out
    /// (boxed, as the transmit below: an idle connection is kept small).
    tx: Option<Box<TxSocket>>,
    /// The input side: requests, bodies, when to read, how the connection ends.
    pub http: Http,
    /// The output side: responses queued and on their way out (boxed, taken from the
    /// worker's spares at the first response and given back when the connection is
    /// idle: an idle keep-alive connection holds none).
    out: Option<Box<Output>>,
    /// How its bytes are sealed: not, by a TLS session here, or by the kernel.
    transport: Transport,
    /// Who moves its bytes: the connection on readiness edges, or the driver's ring.
    io: Io,
    /// Our side was shut down; input is being drained before the close.
    pub draining_since: Option<Instant>,
    /// Last time bytes moved either way.
    pub last_activity: Instant,
    /// The connection stopped at its slice with the socket still writable: the worker
    /// must come back to it without waiting for an event.
    yielded: bool,
    /// It is on the worker's run list (so it is put there once).
    pub on_run_list: bool,
    /// Slot in the worker and a serial unique in it, for the helpers' answers.
    pub slot: u32,
    pub serial: u32,
    /// Why the last `drive` gave up on the connection, if it failed.
    pub cut: Option<Cut>,
    /// Since when a request body has been awaited with nothing owed to the client (the
    /// body deadline's clock: it does not run while the server itself is not reading,
    /// its socket full of a response).
    pub body_clock: Option<Instant>,
    /// The tick its deadline entry is armed for in the worker's timers (an entry that
    /// fires with another tick is stale).
    pub armed: Option<linerate_event::Tick>,
    /// It is counted among the worker's idle connections.
    pub counted_idle: bool,
    /// The session refused the peer's bytes: the connection ends.
    refused: bool,
    /// What it says before it closes, refused.
    farewell: Option<Farewell>,
    /// The TLS session refused what the peer sent (counted when it closes).
    pub tls_refused: bool,
    /// Its TLS handshake finished and has not been counted yet.
    pub handshake_done: bool,
    /// Its TLS session went to the kernel and has not been counted yet.
    pub handed_off: bool,
    /// Accepted on a redirect listener: every request is sent to HTTPS on this port.
    pub redirect: Option<u16>,
    /// The UDP port HTTP/3 answers on for this listener (0: none): its answers say
    /// `Alt-Svc: h3=":PORT"`.
    pub alt_svc: u16,
    /// Accepted on a `--proxy-protocol` listener and its header not whole yet (boxed:
    /// most connections never have one).
    pub proxy: Option<Box<ProxyWait>>,
}

/// A `--proxy-protocol` connection's wait for its header.
pub(crate) struct ProxyWait {
    /// Since when (accepted).
    pub since: Instant,
    /// The bytes so far.
    pub got: Vec<u8>,
    /// They were not a PROXY header: the connection is closing.
    pub refused: bool,
}

/// Who moves a connection's bytes.
enum Io {
    /// The connection itself, on the driver's readiness edges.
    Ready {
        /// A read may find bytes: a readable edge came, or the last read filled its
        /// buffer. After a short read the socket is drained and the next edge says
        /// when to read.
        may_read: bool,
        /// The peer shut its side down (seen in an event): once the socket is drained,
        /// its input has ended, and no later edge will say so.
        peer_hup: bool,
    },
    /// The driver's ring (`Driver::ring`): a receive brings the bytes, and its
    /// gathers are handed to it one at a time.
    Ring {
        /// The gather handed to the driver.
        send: RingSend,
        /// Whether the driver was last told to receive for it.
        input_on: bool,
        /// The driver's receive ended: nothing more comes in.
        input_done: bool,
        /// An event came while an operation was on the ring: a writable edge may have
        /// been among them, so an operation that comes back full is tried again once
        /// before the connection waits for the next edge.
        woke: bool,
    },
}

impl Io {
    /// Takes the ring's send and whether an event came while it was there (nothing
    /// under readiness).
    fn take_send(&mut self) -> (RingSend, bool) {
        match self {
            Io::Ring { send, woke, .. } => (
                std::mem::replace(send, RingSend::Idle),
                std::mem::take(woke),
            ),
            Io::Ready { .. } => (RingSend::Idle, false),
        }
    }

    /// A send is on the ring; `woke`: this turn's event may be the edge it waits for.
    fn in_flight(&mut self, woke: bool) {
        if let Io::Ring { send, woke: w, .. } = self {
            *send = RingSend::InFlight;
            *w = woke;
        }
    }
}

/// A gather handed to the ring.
#[derive(Clone, Copy)]
enum RingSend {
    /// None.
    Idle,
    /// On its way.
    InFlight,
    /// Completed with this, to be taken in by the next `drive`.
    Done(Result<u32, Errno>),
}

/// A request waiting for its password check (made off the worker: docs/http.md W10),
/// answered again when it is made; on HTTP/2, its stream and priority.
pub(crate) struct Waiting {
    request: Box<linerate_http::request::Request>,
    ticket: std::sync::Arc<crate::auth::Ticket>,
    /// When it was taken (its access-log line's time counts the wait).
    started: Instant,
    stream: Option<(u32, Option<linerate_http::h2::Priority>)>,
}

/// The site's answer to a request, over either protocol: on a redirect listener, the
/// way to HTTPS on that port.
pub(crate) fn answer(
    site: &mut Site,
    redirect: Option<u16>,
    peer: Peer,
    request: &linerate_http::request::Request,
    t: SystemTime,
) -> Response {
    let client = site.resolver().client(peer.ip(), request);
    let mut r = match redirect {
        Some(port) => site.redirect_to_https(request, port, t),
        None => site.respond(request, client, t),
    };
    if client != peer.ip() {
        r.record.client = client;
    }
    r
}

impl Conn {
    pub fn new(
        sock: socket2::Socket,
        peer: Peer,
        limits: std::rc::Rc<Limits>,
        (slot, serial): (usize, u64),
        ring: bool,
        tls: Option<Box<Session>>,
        now: Instant,
    ) -> Conn {
        Conn {
            transport: match tls {
                Some(mut t) => {
                    t.handshake_since = Some(now);
                    Transport::Tls(t)
                }
                None => Transport::Plain,
            },
            io: if ring {
                Io::Ring {
                    send: RingSend::Idle,
                    input_on: true,
                    input_done: false,
                    woke: false,
                }
            } else {
                Io::Ready {
                    may_read: true,
                    peer_hup: false,
                }
            },
            refused: false,
            farewell: None,
            tls_refused: false,
            handshake_done: false,
            handed_off: false,
            redirect: None,
            alt_svc: 0,
            proxy: None,
            sock,
            peer,
            tx: None,
            http: Http::One(Connection::new(limits, MAX_QUEUED)),
            out: None,
            draining_since: None,
            last_activity: now,
            yielded: false,
            on_run_list: false,
            // A worker holds far fewer than 2^32 connections; the serial is unique
            // among the recent ones (its token keeps 30 bits of it).
            slot: slot as u32,
            serial: serial as u32,
            cut: None,
            body_clock: None,
            armed: None,
            counted_idle: false,
        }
    }

    /// Its socket, the rest of it gone (its responses' files, its transmit state).
    pub fn into_socket(self) -> socket2::Socket {
        self.sock
    }

    /// Bytes the driver received for it.
    pub fn received(&mut self, bytes: &[u8], now: Instant) {
        self.last_activity = now;
        if self.draining_since.is_none() && self.take_in(bytes).is_err() {
            self.refused = true;
        }
    }

    /// Bytes from the socket: to the HTTP input, through the TLS session if there is
    /// one. A session that refuses them leaves its farewell to be said as the
    /// connection closes ([`Conn::say_farewell`]).
    fn take_in(&mut self, bytes: &[u8]) -> io::Result<()> {
        if let Some(mut wait) = self.proxy.take() {
            // The PROXY header first: what follows it is the connection's own.
            let got = &mut wait.got;
            got.extend_from_slice(bytes);
            return match crate::proxy::parse(got) {
                crate::proxy::Header::Partial => {
                    self.proxy = Some(wait);
                    Ok(())
                }
                crate::proxy::Header::Whole { len, source } => {
                    if let Some(a) = source {
                        self.peer = Peer::Ip(a);
                    }
                    let rest = std::mem::take(got);
                    match rest.get(len..) {
                        Some(after) if !after.is_empty() => self.take_in(after),
                        _ => Ok(()),
                    }
                }
                crate::proxy::Header::Invalid(why) => {
                    tracing::debug!("{}: {why}", self.peer);
                    self.cut = Some(Cut::Client);
                    // Kept, marked, for the count when it closes.
                    wait.refused = true;
                    wait.got = Vec::new();
                    self.proxy = Some(wait);
                    Err(io::Error::new(io::ErrorKind::InvalidData, why))
                }
            };
        }
        let Transport::Tls(t) = &mut self.transport else {
            self.http.receive(bytes);
            return Ok(());
        };
        let r = t.receive(bytes, &mut self.http);
        if t.ready() && t.handshake_since.is_some() {
            t.handshake_since = None;
            self.handshake_done = true;
        }
        match r {
            Ok(()) => Ok(()),
            Err(refused) => {
                tracing::debug!("{}: {refused}", self.peer);
                // Best effort: the alert says why, then the connection closes (not
                // while records are on their way by the ring: it would cut in).
                let queued = matches!(
                    self.io,
                    Io::Ring {
                        send: RingSend::InFlight,
                        ..
                    }
                ) || !t.records.is_empty();
                if matches!(refused, Refused::Protocol(_)) && !queued {
                    self.farewell = Some(Farewell::Alert);
                }
                if matches!(refused, Refused::NotTls) && looks_like_http(bytes) {
                    self.farewell = Some(Farewell::PlainHttp);
                }
                self.cut = Some(Cut::Client);
                self.tls_refused = true;
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    refused.to_string(),
                ))
            }
        }
    }

    /// The driver's receive ended: the peer closed (`Ok`), or an error.
    pub fn input_ended(&mut self, r: Result<(), Errno>) -> After {
        if let Io::Ring { input_done, .. } = &mut self.io {
            *input_done = true;
        }
        if r.is_ok() {
            self.http.peer_closed();
            if self.draining_since.is_some() {
                return After::Close;
            }
            After::Keep
        } else {
            self.cut = Some(Cut::Client);
            After::Close
        }
    }

    /// The gather handed to the driver completed with `r` (bytes, or the error).
    pub fn sent(&mut self, r: Result<u32, Errno>) {
        if let Io::Ring { send, .. } = &mut self.io {
            *send = RingSend::Done(r);
        }
    }

    /// Under the ring: whether the driver's receive must be turned on (`Some(true)`)
    /// or off (`Some(false)`) to follow what the connection can take (see
    /// [`Conn::wants_input`]); none when it already does.
    pub fn input_change(&mut self) -> Option<bool> {
        let wants = self.wants_input();
        match &mut self.io {
            Io::Ring { input_on, .. } if *input_on != wants => {
                *input_on = wants;
                Some(wants)
            }
            _ => None,
        }
    }

    /// Whether the driver should receive for it: a request may come, or input is being
    /// drained before the close.
    pub fn wants_input(&self) -> bool {
        self.draining_since.is_some() || self.http.wants_bytes()
    }

    /// The connection is being closed with `cut` (unless `drive` found a cause of its
    /// own): every response not sent whole is logged with the bytes that left, then
    /// the ones already sent and not yet logged. Returns how many were cut.
    pub fn abort(
        &mut self,
        cut: Cut,
        log: &mut dyn FnMut(&Conn, &Response, Option<Aborted>),
    ) -> u64 {
        self.log_finished(log);
        let cut = self.cut.unwrap_or(cut);
        let (queue, front_sent) = self
            .out
            .as_mut()
            .map(|o| o.take_unsent())
            .unwrap_or_default();
        let mut n = 0;
        let cut_h2 = match &mut self.http {
            Http::Two(h2) => {
                let mut all = std::mem::take(&mut h2.cancelled);
                all.extend(h2.take_answers());
                all
            }
            Http::One(_) => Vec::new(),
        };
        for a in cut_h2 {
            log(
                self,
                &a.response,
                Some(Aborted {
                    cut,
                    body_sent: a.framed,
                    nothing_sent: false,
                }),
            );
            n += 1;
        }
        for (i, r) in queue.iter().enumerate() {
            if r.quiet {
                continue;
            }
            let sent = if i == 0 {
                r.progress.sent + front_sent
            } else {
                r.progress.sent
            };
            log(
                self,
                r,
                Some(Aborted {
                    cut,
                    body_sent: sent.saturating_sub(r.progress.head_bytes),
                    nothing_sent: sent == 0,
                }),
            );
            n += 1;
        }
        n
    }

    /// The helpers brought `len` bytes from `offset` into the page cache; true if the
    /// connection was waiting for them (the worker then drives it).
    pub fn disk_ready(&mut self, offset: u64, len: u64, now: Instant) -> bool {
        let waited = self.out.as_mut().is_some_and(|o| o.disk_ready(offset, len));
        if waited {
            self.last_activity = now;
        }
        waited
    }

    /// The engine's counters for this socket, if a file part went out on it.
    pub fn tx_counters(&self) -> Option<&linerate_tx::Counters> {
        self.tx.as_deref().map(TxSocket::counters)
    }

    /// The peer shut its side down (an event said so).
    pub fn peer_hung_up(&mut self) {
        if let Io::Ready { peer_hup, .. } = &mut self.io {
            *peer_hup = true;
        }
    }

    /// The socket is drained: reading waits for the next edge, unless the peer has shut
    /// its side, in which case the input has ended (a read would return 0).
    fn drained(&mut self) {
        if let Io::Ready { may_read, peer_hup } = &mut self.io {
            *may_read = false;
            if *peer_hup {
                self.http.peer_closed();
            }
        }
    }

    /// The start of the window `--min-send-rate` is judged over, while answers are owed.
    pub fn rate_clock(&self) -> Option<Instant> {
        self.out.as_ref().and_then(|o| o.rate.since)
    }

    /// The client took less than `--min-send-rate` over a window.
    pub fn slow(&self) -> bool {
        self.out.as_ref().is_some_and(|o| o.rate.slow)
    }

    /// At the end of a window of `window` with answers owed: whether the client took
    /// `rate` bytes a second over it, by its TCP acknowledgements (one `TCP_INFO` a
    /// window); if not, the connection is [`Conn::slow`]; if so, a new window starts.
    /// Not judged where the socket says nothing (a Unix socket).
    pub fn judge_send_rate(&mut self, now: Instant, rate: u64, window: Duration) {
        let busy = self.busy();
        let last_progress = self.send_clock();
        let Some(out) = self.out.as_deref_mut() else {
            return;
        };
        let Some(since) = out.rate.since else {
            return;
        };
        if rate == 0 || now < since + window || !busy {
            return;
        }
        if last_progress <= since {
            // No progress at all in the window: the send timeout's to judge (a stall,
            // not a slow client); a new window starts.
            out.rate.since = Some(now);
            return;
        }
        let Ok(acked) = linerate_sys::net::tcp_bytes_acked(self.sock.as_fd()) else {
            out.rate.since = Some(now);
            return;
        };
        let took = acked.saturating_sub(out.rate.base);
        out.rate.base = acked;
        let need = rate.saturating_mul(now.duration_since(since).as_secs().max(1));
        if took < need {
            out.rate.slow = true;
        } else {
            out.rate.since = Some(now);
        }
    }

    /// When the send deadline's clock last started: the last bytes moved (HTTP/2: the
    /// last bytes that left while answers were owed).
    pub fn send_clock(&self) -> Instant {
        match &self.http {
            Http::Two(h) => h.sent_at,
            Http::One(_) => self.last_activity,
        }
    }

    /// Whether the connection gave up its turn with more to send (and clears that).
    pub fn take_yielded(&mut self) -> bool {
        std::mem::take(&mut self.yielded)
    }

    /// Requests wait for password checks.
    pub fn waits(&self) -> bool {
        self.out.as_ref().is_some_and(|o| !o.waiting.is_empty())
    }

    /// A password check a request waits for is made: it can be answered.
    pub fn check_made(&self) -> bool {
        self.out
            .as_ref()
            .is_some_and(|o| o.waiting.iter().any(|w| w.ticket.done()))
    }

    /// Nothing in flight and nothing half-received: an idle keep-alive connection.
    pub fn is_idle(&self) -> bool {
        !self.waits()
            && !self.busy()
            && self.http.is_idle()
            && self.handshake_since().is_none()
            && self.proxy.is_none()
    }

    /// An idle connection lets its buffers go, and its output queue too: to the
    /// worker's spares (a keep-alive connection takes one again at its next response,
    /// with no allocation), or freed when there are enough spares.
    fn release_buffers(&mut self, site: &mut Site) {
        self.http.release_buffer();
        match self.out.take() {
            // An empty queue goes to the spares with its room (bounded), so the next
            // answers are queued with no allocation.
            Some(mut o) if o.is_empty() => {
                o.trim();
                site.spare_output(o);
            }
            Some(mut o) => {
                o.release();
                self.out = Some(o);
            }
            None => {}
        }
    }

    /// Its TLS version as logs name it (`TLSv1.3`), if it speaks TLS.
    pub fn tls_protocol(&self) -> Option<&'static str> {
        match &self.transport {
            Transport::Plain => None,
            // Kernel TLS takes TLS 1.3 sessions alone.
            Transport::Kernel => Some("TLSv1.3"),
            Transport::Tls(t) => t.protocol_name(),
        }
    }

    /// Since when its PROXY header has been awaited, if it is.
    pub fn proxy_since(&self) -> Option<Instant> {
        self.proxy.as_ref().map(|w| w.since)
    }

    /// What opened the connection was not a PROXY header.
    pub fn proxy_refused(&self) -> bool {
        self.proxy.as_ref().is_some_and(|w| w.refused)
    }

    /// Since when its TLS handshake has been awaited, if it is.
    pub fn handshake_since(&self) -> Option<Instant> {
        match &self.transport {
            Transport::Tls(t) => t.handshake_since,
            _ => None,
        }
    }

    /// Responses queued or being sent (a TLS connection's records included).
    pub fn busy(&self) -> bool {
        self.out.as_ref().is_some_and(|o| o.busy())
            || matches!(&self.transport, Transport::Tls(t) if !t.records.is_empty() || t.pending())
            || matches!(&self.http, Http::Two(h) if h.waiting() || h.proto.has_control())
    }

    /// An HTTP/2 connection whose client has closed its side, with nothing of ours left
    /// to send but answers that wait on flow-control windows: no WINDOW_UPDATE can come
    /// any more, so they never will be.
    fn stalled_for_good(&self) -> bool {
        matches!(&self.http, Http::Two(h) if h.proto.peer_has_closed() && h.waiting() && !h.proto.has_control())
            && !self.out.as_ref().is_some_and(|o| o.busy())
            && !matches!(&self.transport, Transport::Tls(t) if !t.records.is_empty() || t.pending())
    }

    /// Called on readiness (and after shutdown starts): reads, answers, writes.
    pub fn drive(
        &mut self,
        site: &mut Site,
        // The driver, and the buffer reads land in when the connection reads itself.
        (driver, scratch): (&mut dyn Driver, &mut [u8]),
        readable: bool,
        error_event: bool,
        now: Instant,
        log: &mut dyn FnMut(&Conn, &Response, Option<Aborted>),
    ) -> After {
        if let (true, Io::Ready { may_read, .. }) = (readable, &mut self.io) {
            *may_read = true;
        }
        if error_event {
            if let Some(tx) = self.tx.as_mut() {
                if let Err(e) = tx.reap(self.sock.as_fd()) {
                    return self.failed(&e);
                }
            }
        }
        if self.refused {
            self.say_farewell(driver);
            return After::Close;
        }
        if self.draining_since.is_some() {
            return self.drain_input();
        }
        let mut read_this_turn = 0;
        if let Some(o) = self.out.as_mut() {
            o.begin_turn();
        }
        loop {
            match self.flush(now, log, site, driver) {
                Ok(true) => return After::Keep, // blocked on a full socket
                Ok(false) => {}
                Err(e) => return self.failed(&e),
            }
            // Requests already read come first (they waited while the queue was full).
            if self.process(site, now) {
                continue;
            }
            let may_read = matches!(self.io, Io::Ready { may_read: true, .. });
            if !may_read || !self.http.wants_bytes() {
                break;
            }
            match self.read_some(scratch, now) {
                Ok(0) => break,
                Ok(n) => {
                    read_this_turn += n;
                    if read_this_turn >= READ_TURN_BYTES {
                        // The others' turn; the worker comes back without an event.
                        self.yielded = true;
                        return After::Keep;
                    }
                }
                Err(_) => {
                    self.say_farewell(driver);
                    self.cut = Some(Cut::Client);
                    return After::Close;
                }
            }
        }
        if self.stalled_for_good() {
            // Its answers could never be sent: closed now, not at the send timeout.
            self.cut = Some(Cut::Client);
            return After::Close;
        }
        if self.busy() {
            return After::Keep;
        }
        if self.waits() {
            // Its answer is owed once its password check is made (the worker comes
            // back when it is): not the end, even if the request said close.
            return After::Keep;
        }
        // Nothing owed: the rate's window starts again with the next answer.
        if let Some(o) = self.out.as_mut() {
            o.rate.since = None;
        }
        if self.is_idle() {
            // An idle keep-alive connection holds no buffers: memory scales with the
            // work in flight, not with the connections open.
            self.release_buffers(site);
        }
        match self.http.ending() {
            Ending::KeepOpen => After::Keep,
            // Half-close, then drain what the client still sends, so it reads our
            // last response instead of a reset: closing a socket with input unread
            // resets it, and the reset discards what the kernel has not sent yet of
            // that response (a keep-alive client may have sent its next request
            // before it learns that this connection ends: a reload, a shutdown).
            Ending::Close | Ending::Linger => self.linger(now, driver),
        }
    }

    /// Ends our side (FIN) and reads and discards what the client still sends until it
    /// closes too: a request that crossed the FIN costs the client a clean close it can
    /// retry on, not a reset. The worker closes the connection when this says so, or
    /// after [`crate::worker`]'s drain deadline.
    pub fn linger(&mut self, now: Instant, driver: &mut dyn Driver) -> After {
        if self.draining_since.is_none() {
            if let Transport::Tls(t) = &mut self.transport {
                // close_notify, best effort: nothing is owed, so the socket has room
                // unless the last records filled it exactly; then the client sees the
                // FIN without it (every response carries its length, so nothing is
                // taken for truncated).
                t.close();
                let fd = self.sock.as_fd();
                let _ = t.send(&mut |op| driver.now(fd, op, None));
            } else if let Transport::Kernel = self.transport {
                // The same alert, sealed by the kernel.
                let _ = driver.now(self.sock.as_fd(), &mut Op::CloseNotify, None);
            }
            // Made at once under the ring too: see `Ring::close`.
            let _ = driver.now(self.sock.as_fd(), &mut Op::Shutdown, None);
            self.draining_since = Some(now);
        }
        self.drain_input()
    }

    fn drain_input(&mut self) -> After {
        if let Io::Ring { input_done, .. } = self.io {
            // The driver's receive discards what comes and reports the end (or has).
            return if input_done {
                After::Close
            } else {
                After::Keep
            };
        }
        let mut buf = [0u8; 4096];
        loop {
            match self.read_plain(&mut buf) {
                Ok(0) => return After::Close,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return After::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return After::Close,
            }
        }
    }

    /// A `read` of the socket's plaintext. On a kernel-TLS socket a record that is not
    /// application data would fail a plain `read` with `EIO` and stay unread, so it is
    /// read with its type: the client's close_notify is the end of its stream (0), and
    /// any other (another alert, a KeyUpdate this server does not follow) an error.
    fn read_plain(&self, buf: &mut [u8]) -> io::Result<usize> {
        if !matches!(self.transport, Transport::Kernel) {
            return (&self.sock).read(buf);
        }
        use linerate_sys::ktls::{recv, Received};
        match recv(self.sock.as_fd(), buf)? {
            Received::Data(n) => Ok(n),
            Received::CloseNotify => Ok(0),
            Received::Other { kind, .. } => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a TLS record of type {kind} after the handoff"),
            )),
        }
    }

    /// Reads until `EAGAIN`, or until the connection wants no more; returns bytes read
    /// (0: none now). Reads land in the worker's `scratch` buffer and only what arrived
    /// is copied into the connection's own, so a request costs no zero-filled buffer of
    /// its own.
    fn read_some(&mut self, scratch: &mut [u8], now: Instant) -> io::Result<usize> {
        let mut total = 0;
        loop {
            match self.read_plain(scratch) {
                Ok(0) => {
                    self.http.peer_closed();
                    return Ok(total);
                }
                Ok(n) => {
                    self.take_in(&scratch[..n])?;
                    total += n;
                    self.last_activity = now;
                    if n < scratch.len() {
                        // Drained: the next edge brings more (or, after a hang-up,
                        // nothing).
                        self.drained();
                        return Ok(total);
                    }
                    if !self.http.wants_bytes() {
                        return Ok(total);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained();
                    return Ok(total);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Answers the requests read so far, whichever protocol brought them: one loop,
    /// the protocol saying what comes next ([`Http::next`]) and taking each answer in
    /// its own form (HTTP/1.1's head written before its parts, HTTP/2's HEADERS and
    /// DATA); true if any response was queued.
    fn process(&mut self, site: &mut Site, now: Instant) -> bool {
        let mut queued = false;
        let mut sys_now = None;
        if self.http.is_two() {
            self.start_two(site, now);
        }
        loop {
            let (to, mut r) = match self.http.next(self.out.as_deref_mut(), now) {
                Next::Wait => break,
                Next::Upgrade => {
                    if let Http::One(http) = &mut self.http {
                        let rest = http.take_input();
                        self.http = Http::to_two(http);
                        self.http.receive(&rest);
                        self.start_two(site, now);
                    }
                    continue;
                }
                Next::Request {
                    to,
                    mut request,
                    started,
                } => {
                    let t = *sys_now.get_or_insert_with(SystemTime::now);
                    request.secure = !matches!(self.transport, Transport::Plain);
                    if to.is_none() && site.draining() {
                        // A stop's delay: this answer ends the connection, so the
                        // client's next request goes through its balancer again.
                        request.keep_alive = false;
                    }
                    let mut r = answer(site, self.redirect, self.peer, &request, t);
                    if let Some(ticket) = r.waiting.take() {
                        // Answered again once its password check is made, or its turn
                        // under a rate limit has come.
                        request.admitted |= r.admitted;
                        self.out
                            .get_or_insert_with(|| site.spare_outputs.pop().unwrap_or_default())
                            .waiting
                            .push(Waiting {
                                request,
                                ticket,
                                started,
                                stream: to,
                            });
                        continue;
                    }
                    // The loop's clock: no clock read of its own per request.
                    r.record.started = Some(started);
                    if to.is_none() && r.plan.close {
                        // An answer that closes (a 400 the path earned, say).
                        self.http.close_after_last();
                    }
                    (to, r)
                }
                Next::Reject { to, status } => {
                    let t = *sys_now.get_or_insert_with(SystemTime::now);
                    let mut r = site.error(status, to.is_some(), &[], "-".into(), t);
                    if to.is_some() {
                        r.record.started = Some(now);
                    }
                    (to.map(|stream| (stream, None)), r)
                }
            };
            if self.alt_svc != 0 {
                crate::h3::advertise(&mut r, self.alt_svc);
            }
            let out = self
                .out
                .get_or_insert_with(|| site.spare_outputs.pop().unwrap_or_default());
            match (&mut self.http, to) {
                (Http::Two(h2), Some((stream, priority))) => {
                    r.record.wire = crate::response::Wire::Two;
                    Stats::add(&site.stats.h2_streams, 1);
                    h2.answer(stream, priority, r, out, &mut site.h2_heads);
                }
                (Http::One(_), _) => {
                    r.progress.head_bytes = r.write_h1_head();
                    out.push(r);
                }
                // HTTP/2's `next` gives every request and refusal its stream.
                (Http::Two(_), None) => debug_assert!(false, "an HTTP/2 answer on no stream"),
            }
            out.rate.since.get_or_insert(now);
            queued = true;
        }
        if self.http.is_two() {
            queued |= self.end_two(site, now);
        }
        queued
    }

    /// An HTTP/2 connection's turn begins: counted once, its queue there, and the send
    /// clock started if nothing was owed.
    fn start_two(&mut self, site: &mut Site, now: Instant) {
        let Http::Two(h2) = &mut self.http else {
            return;
        };
        if !h2.counted {
            h2.counted = true;
            Stats::add(&site.stats.h2_connections, 1);
        }
        let out = self
            .out
            .get_or_insert_with(|| site.spare_outputs.pop().unwrap_or_default());
        if !h2.waiting() && !out.busy() {
            // Nothing owed until now: the send clock starts with what comes.
            h2.sent_at = now;
        }
    }

    /// An HTTP/2 connection's turn ends: a connection error cuts what is not framed;
    /// then its own frames and DATA as the windows allow. True if anything was queued.
    fn end_two(&mut self, site: &mut Site, now: Instant) -> bool {
        let (Http::Two(h2), Some(out)) = (&mut self.http, self.out.as_deref_mut()) else {
            return false;
        };
        if let Some(code) = h2.proto.failed() {
            // A connection error: the GOAWAY goes, the answers not framed are cut (and
            // the requests waiting for password checks, never answered, let go).
            let cut = h2.take_answers();
            h2.cancelled.extend(cut);
            out.waiting.clear();
            if !std::mem::replace(&mut h2.failure_counted, true) {
                use linerate_http::h2::frame::ErrorCode;
                let kind = match code {
                    ErrorCode::CompressionError => 1,
                    ErrorCode::EnhanceYourCalm => 2,
                    _ => 0,
                };
                Stats::add(&site.stats.h2_errors[kind], 1);
                tracing::debug!(
                    "{}: HTTP/2 GOAWAY {}: {}",
                    self.peer,
                    code.name(),
                    h2.proto.failed_why().map_or("", |v| v.as_str())
                );
            }
        }
        // Frames are cut only when the queue has sent what it had: a window's worth
        // at a time, the streams taking turns.
        if out.busy() && !h2.proto.has_control() {
            return false;
        }
        h2.fill(out, now)
    }

    /// Sends queued responses; `Ok(true)` when the socket is full (or the queue waits
    /// for the disk helpers, or yielded its turn). The output queue's readiness
    /// executor: each call it asks for is made at once.
    fn flush(
        &mut self,
        now: Instant,
        log: &mut dyn FnMut(&Conn, &Response, Option<Aborted>),
        site: &Site,
        driver: &mut dyn Driver,
    ) -> Result<bool, TxError> {
        let ctx = Ctx {
            disk: site.disk.as_ref(),
            stats: &site.stats,
            sending: &site.sending,
            unix: self.peer == Peer::Unix,
        };
        // The last operation taken from the ring had an event come while it was there.
        let mut ring_woke = false;
        loop {
            self.log_finished(log);
            if matches!(self.transport, Transport::Tls(_)) && self.push_records(driver, now)? {
                return Ok(true);
            }
            // Under the ring a receive may be in flight, its ciphertext not yet taken:
            // only a connection that reads for itself is handed over.
            let ready = match (&mut self.transport, &self.io) {
                (Transport::Tls(t), Io::Ready { .. }) => t.records.is_empty() && t.kernel_ready(),
                _ => false,
            };
            if ready {
                self.hand_off(driver)?;
            }
            let (ring_send, woke) = self.io.take_send();
            let r = if let RingSend::Done(r) = ring_send {
                // The operation on the ring completed.
                ring_woke = woke;
                r.map(|n| n as usize)
            } else if let RingSend::InFlight = ring_send {
                // This turn's event may be the writable edge the operation, if it comes
                // back full, would wait for.
                self.io.in_flight(true);
                return Ok(true);
            } else {
                let Some(out) = self.out.as_deref_mut() else {
                    // No queue: nothing was ever queued, or all of it went.
                    self.log_finished(log);
                    return Ok(false);
                };
                match out.poll(self.tx.as_deref_mut(), &ctx)? {
                    // What the last step finished is logged before the queue rests.
                    OutNext::Empty => {
                        self.log_finished(log);
                        return Ok(false);
                    }
                    OutNext::DiskWait => {
                        self.log_finished(log);
                        return Ok(true);
                    }
                    OutNext::Yield => {
                        self.log_finished(log);
                        self.yielded = true;
                        return Ok(true);
                    }
                    OutNext::PrepareSocket => {
                        // The engine's per-socket setup costs system calls; connections
                        // that only ever send bytes parts (small files, errors) never pay
                        // them.
                        let config = self.tx_config(site);
                        self.tx = Some(Box::new(TxSocket::unset(config)));
                        continue;
                    }
                    OutNext::Op(mut op) => {
                        let at = Executors {
                            transport: &mut self.transport,
                            io: &mut self.io,
                            zc: self.tx.as_deref_mut().and_then(TxSocket::zero_copy),
                            fd: self.sock.as_fd(),
                            job: (self.slot as usize, u64::from(self.serial)),
                        };
                        match at.execute(&mut op, now, site, driver) {
                            Some(r) => r,
                            // On the ring (a gather): its result comes back later.
                            None => return Ok(true),
                        }
                    }
                }
            };
            // A completion is of a step the queue gave, so the queue is there.
            let Some(out) = self.out.as_deref_mut() else {
                return Ok(false);
            };
            let (flow, moved) = out.complete(self.tx.as_deref_mut(), r, &site.stats)?;
            if moved {
                self.last_activity = now;
            }
            if flow == Flow::Blocked {
                if std::mem::take(&mut ring_woke) {
                    // Full, but an edge came while it was on the ring: once more in the
                    // worker's next turn rather than a wait for an edge that came.
                    self.yielded = true;
                }
                return Ok(true);
            }
        }
    }

    /// How this connection's file parts are sent: the server's strategy, but for what
    /// its transport or socket cannot take.
    fn tx_config(&self, site: &Site) -> linerate_tx::TxConfig {
        match self.peer {
            // Every byte of a TLS connection passes through the session.
            _ if matches!(self.transport, Transport::Tls(_)) => linerate_tx::TxConfig {
                strategy: linerate_tx::Strategy::Copy,
                zerocopy: false,
                ..site.sending.tx.clone()
            },
            // The kernel's TLS takes no MSG_ZEROCOPY sends.
            Peer::Ip(_) if matches!(self.transport, Transport::Kernel) => linerate_tx::TxConfig {
                zerocopy: false,
                ..site.sending.tx.clone()
            },
            Peer::Ip(_) => site.sending.tx.clone(),
            // A Unix socket has neither an unsent-bytes mark nor zero-copy sends.
            Peer::Unix => linerate_tx::TxConfig {
                notsent_lowat: Some(0),
                zerocopy: false,
                ..site.sending.tx.clone()
            },
        }
    }

    /// Logs the responses sent whole, in order.
    fn log_finished(&mut self, log: &mut dyn FnMut(&Conn, &Response, Option<Aborted>)) {
        self.log_cancelled(log);
        let Some(out) = self.out.as_mut().filter(|o| o.has_finished()) else {
            return;
        };
        let mut done = out.take_finished();
        for r in done.drain(..) {
            let r = &r;
            if r.quiet {
                continue;
            }
            if let Http::One(c) = &mut self.http {
                c.sent();
            }
            if r.unlogged {
                continue;
            }
            log(self, r, None);
        }
        if let Some(o) = self.out.as_mut() {
            o.recycle_finished(done);
        }
    }

    /// Logs the HTTP/2 answers the client reset (or a connection error cut) before
    /// they were framed whole.
    fn log_cancelled(&mut self, log: &mut dyn FnMut(&Conn, &Response, Option<Aborted>)) {
        let Http::Two(h2) = &mut self.http else {
            return;
        };
        if h2.cancelled.is_empty() {
            return;
        }
        for a in std::mem::take(&mut h2.cancelled) {
            log(
                self,
                &a.response,
                Some(Aborted {
                    cut: Cut::Client,
                    body_sent: a.framed,
                    nothing_sent: false,
                }),
            );
        }
    }
}

thread_local! {
    /// Error-log lines for failed sends, at most one a second per worker: a disk error
    /// or a shortage of pipes can fail every send at once.
    static SEND_ERRORS: std::cell::RefCell<crate::logs::RateLimit> = const {
        std::cell::RefCell::new(crate::logs::RateLimit::new(std::time::Duration::from_secs(1)))
    };
}

/// Writes `line` (with the count of lines left out) if the rate limit allows.
fn send_error_line(line: impl FnOnce(String)) {
    SEND_ERRORS.with(|r| {
        if let Some(n) = r.borrow_mut().allow(Instant::now()) {
            line(crate::logs::more(n));
        }
    });
}

impl Conn {
    /// A send failed: how the connection ends, and why for the log.
    fn failed(&mut self, e: &TxError) -> After {
        match e {
            TxError::Truncated { .. } => {
                self.cut = Some(Cut::Truncated);
                // Logged as the file system's condition, not the client's.
                send_error_line(|more| tracing::warn!("{e}: connection reset{more}"));
                After::Reset
            }
            TxError::PeerGone(_) => {
                self.cut = Some(Cut::Client);
                After::Close
            }
            TxError::Io(_) => {
                // The server's own trouble, not the client's: the operator must see it.
                self.cut = Some(Cut::Error);
                let peer = self.peer;
                send_error_line(|more| {
                    tracing::warn!("sending to {peer}: {e}: connection closed{more}")
                });
                After::Close
            }
        }
    }
}

/// What runs one connection's operations, borrowed from it while its queue lends the
/// operation: the transport (TLS takes the queue's sends as plaintext), the
/// connection's place on the ring, its zero-copy state and socket, and its name for
/// the disk helpers.
struct Executors<'a> {
    transport: &'a mut Transport,
    io: &'a mut Io,
    zc: Option<&'a mut linerate_sys::zerocopy::ZeroCopy>,
    fd: std::os::fd::BorrowedFd<'a>,
    /// (slot, serial), for a disk helper's answer.
    job: (usize, u64),
}

impl Executors<'_> {
    /// Runs the queue's operation `op` through its executor: the TLS session (the
    /// queue's sends, as plaintext: its records leave in `push_records`), the disk
    /// helpers (a warm-up), else the driver. None: on the ring, its result comes later.
    fn execute(
        self,
        op: &mut Op,
        now: Instant,
        site: &Site,
        driver: &mut dyn Driver,
    ) -> Option<Result<usize, Errno>> {
        let r = match (&*op, self.transport) {
            // The `copy` strategy's file reads are made as anywhere.
            (Op::Gather { pieces, .. }, Transport::Tls(t)) => t
                .write_pieces(pieces.iter().map(|p| p.bytes), now)
                .map_err(|e| Errno::from_io(&e)),
            (Op::Send { data, .. }, Transport::Tls(t)) => {
                t.write(data, now).map_err(|e| Errno::from_io(&e))
            }
            // The disk helpers are the worker's, not the kernel's.
            (Op::Warm { file, at, len }, _) => {
                Ok(usize::from(site.disk.as_ref().is_some_and(|d| {
                    d.jobs
                        .send(crate::disk::Job {
                            file: std::sync::Arc::clone(file),
                            offset: *at,
                            len: *len,
                            conn: self.job.0,
                            serial: self.job.1,
                            inbox: std::sync::Arc::clone(&d.inbox),
                        })
                        .is_ok()
                })))
            }
            _ => match driver.execute(self.fd, op, self.zc) {
                Submitted::Done(r) => r,
                Submitted::Pending => {
                    if let Io::Ring { send, .. } = self.io {
                        *send = RingSend::InFlight;
                    }
                    return None;
                }
            },
        };
        Some(r)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod ring_tests;
