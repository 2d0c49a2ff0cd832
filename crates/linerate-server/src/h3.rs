//! HTTP/3: answers over QUIC on the HTTPS listeners' UDP ports. The QUIC endpoint is
//! [`crate::quic`]; HTTP/3's frames and QPACK are `linerate_http::h3`; the request
//! model (the site's answer, the access log, the counters) is the one HTTP/1.1 and
//! HTTP/2 share.

/// HTTP/3's keys: rows of the settings table (`settings!` in settings.rs, which says
/// what a row holds), kept here beside what they drive; `--help` shows them under their
/// own heading.
macro_rules! http3_keys {
    ($($table:tt)*) => {
        settings! {
            @join [
            /// HTTP/3 over QUIC on the UDP port of each --tls-listen address (the same
            /// port number as HTTPS), one socket per worker: on or off. Answers over
            /// HTTPS say `Alt-Svc: h3=":PORT"` when it is on, so browsers move to it. A
            /// UDP port someone else holds fails the start, as a TCP one does
            /// [default: on].
            #[arg(long, help_heading = "HTTP/3", value_name = "on|off")]
            pub http3: Option<crate::h3::Http3>
                => crate::h3::Http3 = crate::h3::Http3::On, |h| h,
            /// When a new HTTP/3 client's address is checked first with a Retry (the
            /// client echoes a token, one round trip more, before a handshake is spent
            /// on it): auto, when more than 64 handshakes are under way on a worker's
            /// socket (a flood of Initials from spoofed addresses then costs a datagram
            /// each); always; or off [default: auto].
            #[arg(long, help_heading = "HTTP/3", value_name = "auto|always|off")]
            pub http3_retry: Option<crate::quic::Retry>
                => crate::quic::Retry = crate::quic::Retry::Auto, |r| r,
            /// Whether an HTTP/3 client resuming a session may send requests in 0-RTT,
            /// before the handshake ends (one round trip less): on or off. Early data
            /// can be replayed by anyone who saw it, so only GET and HEAD are answered
            /// from it; any other method is answered 425 Too Early (RFC 8470) and the
            /// client sends it again after the handshake. Sessions that allow it are
            /// held by the instance and each taken once (single-use, as RFC 8446 §8
            /// asks), so with it on a session resumes only on the instance and
            /// generation that made it [default: off].
            #[arg(long, help_heading = "HTTP/3", value_name = "on|off")]
            pub http3_early_data: Option<crate::h3::Http3>
                => crate::h3::Http3 = crate::h3::Http3::Off, |h| h,
            ]
            $($table)*
        }
    };
}

/// `--http3`: whether the HTTPS listeners serve HTTP/3 too (and `--http3-early-data`:
/// whether its clients may send requests in 0-RTT).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Http3 {
    #[default]
    Off,
    On,
}

crate::config::words!(Http3 {
    "off" => Off,
    "on" => On,
});

crate::settings::as_text!(Http3);

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use linerate_http::h3::connection::{Connection as Proto, Event as H3Event};
use linerate_http::h3::error::ErrorCode;
use linerate_http::request::{Limits, Method, Request};
use linerate_http::Status;
use linerate_sys::udp;
use quinn_proto::{ConnectionHandle, Dir, StreamId, VarInt};

use crate::conn::{Aborted, Cut};
use crate::listen::Peer;
use crate::quic::{Endpoint, Event};
use crate::response::{Part, Response, Wire};
use crate::site::Site;
use crate::stats::Stats;

mod handover;
pub(crate) use handover::{claim, want, withdraw, Claim};

/// Room for one receive: a GRO batch of datagrams, at most 64 KiB.
const RECV_BYTES: usize = 64 * 1024;
/// Receives per readable event before the requests they bring are served.
const RECVS_PER_TURN: usize = 64;
/// Body bytes a DATA frame takes from a file range: read into memory (QUIC keeps what
/// it sends until acknowledged, so no file page goes to the socket as with TCP).
const FRAME_BYTES: u64 = 64 * 1024;
/// How long a connection whose handshake ended after GOAWAY was said may take to send
/// its first request before it is told GOAWAY too.
const LATE_GRACE: Duration = Duration::from_secs(1);
/// The least time between a GOAWAY handed to QUIC and the close that follows it.
const CLOSE_AFTER: Duration = Duration::from_millis(5);
/// What an access log line says of the transport.
const TLS13: &str = "TLSv1.3";
/// The UDP socket buffers asked for, each way: a burst of QUIC datagrams from many
/// clients, or a GSO batch's worth per connection, without a drop at the socket (the
/// kernel's default is 208 KiB; quinn and quic-go ask for several MiB too).
const UDP_BUFFER: usize = 4 << 20;

/// Asks for [`UDP_BUFFER`] each way on `sock`; says once per process, naming the
/// sysctl, when the kernel gives less.
fn size_buffers(sock: &socket2::Socket) -> io::Result<()> {
    static SAID: [std::sync::Once; 2] = [std::sync::Once::new(), std::sync::Once::new()];
    for (send, capped) in capped_buffers(sock)? {
        SAID[usize::from(send)].call_once(|| tracing::warn!("http3: {capped}"));
    }
    Ok(())
}

/// Asks for [`UDP_BUFFER`] each way on `sock`: the ways (send or not) the kernel gave
/// less, each with a line saying so and naming the sysctl that caps it.
fn capped_buffers(sock: &socket2::Socket) -> io::Result<Vec<(bool, String)>> {
    let mut out = Vec::new();
    for (send, sysctl) in [(false, "net.core.rmem_max"), (true, "net.core.wmem_max")] {
        let b = udp::buffer(sock.as_fd(), send, UDP_BUFFER)?;
        if b.capped() {
            let way = if send { "send" } else { "receive" };
            out.push((
                send,
                format!(
                    "the UDP {way} buffer is {} KiB, not the {} KiB asked for: {sysctl} caps it \
                     (sysctl -w {sysctl}={UDP_BUFFER} raises it)",
                    b.got >> 10,
                    b.asked >> 10
                ),
            ));
        }
    }
    Ok(out)
}

/// How an answer's bytes are handed to its stream.
struct Answer {
    stream: StreamId,
    response: Response,
    /// Framed chunks the stream has not taken yet (a head, a DATA frame): handed to
    /// QUIC as they are, which keeps them until acknowledged without a copy.
    out: VecDeque<Bytes>,
    /// Framed bytes the stream has taken.
    taken: u64,
    /// Body bytes framed so far.
    body: u64,
    /// Where it stood at the last sweep (`body`, `taken`), and since when it has not
    /// moved: past `--send-timeout` its connection is closed.
    seen: (u64, u64),
    stalled: Option<Instant>,
}

/// A request waiting for its password check.
struct Waiting {
    stream: StreamId,
    request: Box<Request>,
    ticket: Arc<crate::auth::Ticket>,
    started: Instant,
}

/// One QUIC connection's HTTP/3.
struct H3Conn {
    proto: Proto,
    peer: SocketAddr,
    /// This side's control stream, once opened.
    control: Option<StreamId>,
    /// Bytes for it the stream has not taken yet.
    control_out: Vec<u8>,
    answers: Vec<Answer>,
    waiting: Vec<Waiting>,
    /// Streams whose answers are all handed to QUIC and not all acknowledged yet: a
    /// stop closes the connection only once they are.
    unacked: Vec<StreamId>,
    /// Request streams below this one (a stream id) may have had bytes in 0-RTT:
    /// the highest read before the handshake ended, plus 4. A client opens its
    /// streams in order, so one below it came early or was opened by one that did.
    early_below: u64,
    /// When it may close, its GOAWAY handed to QUIC: a round trip later, so the
    /// client has it (a close drops what QUIC has not sent yet).
    close_at: Option<Instant>,
    /// Its handshake ended after GOAWAY was said (a stop or reload), at this time: it
    /// is told GOAWAY after its first answer, as in a shutdown delay (its client sent
    /// its first requests with the handshake's end, and they are served), or after
    /// [`LATE_GRACE`] if it sends none.
    late: Option<Instant>,
}

/// A connection's HTTP/3 as a reload hands it to the next generation's worker: all of
/// it but answers and password checks, which it has none of then (they hold the old
/// generation's files and caches).
struct Kept {
    proto: Proto,
    peer: SocketAddr,
    control: Option<StreamId>,
    control_out: Vec<u8>,
    unacked: Vec<StreamId>,
    early_below: u64,
}

impl H3Conn {
    fn new(proto: Proto, peer: SocketAddr) -> H3Conn {
        H3Conn {
            proto,
            peer,
            control: None,
            control_out: Vec::new(),
            answers: Vec::new(),
            waiting: Vec::new(),
            unacked: Vec::new(),
            early_below: 0,
            close_at: None,
            late: None,
        }
    }

    fn kept(self) -> Kept {
        Kept {
            proto: self.proto,
            peer: self.peer,
            control: self.control,
            control_out: self.control_out,
            unacked: self.unacked,
            early_below: self.early_below,
        }
    }

    fn taken_on(k: Kept) -> H3Conn {
        H3Conn {
            control: k.control,
            control_out: k.control_out,
            unacked: k.unacked,
            early_below: k.early_below,
            ..H3Conn::new(k.proto, k.peer)
        }
    }
}

/// An endpoint and its connections, handed from a retiring worker to the next
/// generation's at a reload ([`handover`]).
pub(crate) struct Handed {
    endpoint: Endpoint,
    conns: HashMap<ConnectionHandle, Kept>,
}

// It crosses threads.
const _: fn() = || {
    fn sent<T: Send>() {}
    sent::<Handed>();
};

/// The inode of a socket: the same for every copy of it (each worker's, each
/// generation's), naming it in the routing and the handover.
pub(crate) fn socket_inode(sock: &socket2::Socket) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let fd = std::os::fd::OwnedFd::from(sock.try_clone()?);
    Ok(std::fs::File::from(fd).metadata()?.ino())
}

/// One worker's HTTP/3 on one UDP socket: the QUIC endpoint and its connections.
pub(crate) struct Quic3 {
    pub sock: socket2::Socket,
    endpoint: Endpoint,
    conns: HashMap<ConnectionHandle, H3Conn>,
    events: Vec<Event>,
    buf: Vec<u8>,
    limits: Limits,
    /// The socket's inode ([`socket_inode`]).
    inode: u64,
    /// A reload: the endpoint is being handed to the next generation's worker, until
    /// this time at the latest ([`handover`]).
    handing: Option<Instant>,
    /// The next generation's worker waits for it: no new request is answered here.
    quiet: bool,
    /// It was handed on: this one has nothing left (and reads nothing more).
    spent: bool,
    /// Taken on from the generation before: its connections' requests read there and
    /// not answered yet are answered at the first turn, and counted as kept.
    taken_on: Option<u64>,
    /// The last transmit would block: try again soon.
    pub blocked: bool,
    /// GOAWAY was said (a stop or reload): connections close once their answers are
    /// done.
    going_away: bool,
    /// A stop's shutdown delay is under way ([`Quic3::drain`]).
    draining: bool,
    /// Sessions resumed, counted by the TLS side, not yet added to the counters.
    resumed: Arc<AtomicU64>,
    /// `--send-timeout`, and when the answers under way are next looked at for it.
    send_timeout: Duration,
    sweep_at: Option<Instant>,
    /// Response heads this worker has encoded, for its connections to copy.
    heads: linerate_http::h3::qpack::HeadCache,
    /// The earliest time a connection told GOAWAY may close ([`Quic3::close_idle`]).
    close_at: Option<Instant>,
    /// Receives since the worker last took the count ([`Quic3::take_receives`]).
    receives: Receives,
}

/// What a socket's receives brought: the receives (each one `recvmsg`, or one ring
/// completion), the datagrams in them (several in one when GRO coalesced them), their
/// bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Receives {
    pub calls: u64,
    pub datagrams: u64,
    pub bytes: u64,
    /// Datagrams of connections another endpoint owns, handed to it.
    pub misrouted: u64,
}

impl Receives {
    fn count(&mut self, r: &udp::Received) {
        self.calls += 1;
        self.bytes += r.len as u64;
        self.datagrams += match r.segment {
            Some(s) if s > 0 => r.len.div_ceil(s) as u64,
            _ => 1,
        };
    }
}

/// Where answered requests are logged: the client, the response, how it was cut.
pub(crate) type Log<'a> = dyn FnMut((Peer, Option<&'static str>), &Response, Option<Aborted>) + 'a;

/// How a batch of datagrams goes to the socket: `sendmsg` now (epoll), or queued on the
/// worker's ring (io_uring), which takes the buffer (leaving a spare one, no copy);
/// the bytes sent, or why not.
pub(crate) type Out<'a> =
    dyn FnMut(std::os::fd::BorrowedFd<'_>, udp::Head, &mut Vec<u8>) -> io::Result<usize> + 'a;

impl Quic3 {
    /// HTTP/3 on `sock` (its inode `inode`, [`socket_inode`]), socket `index` of its
    /// address's group, with the certificates of the HTTPS listener it goes with.
    pub fn new(
        sock: socket2::Socket,
        inode: u64,
        index: u8,
        tls: &rustls::ServerConfig,
        limits: Limits,
        cfg: &crate::config::Config,
        wake: crate::quic::Wake,
    ) -> io::Result<Quic3> {
        let v6 = sock.local_addr()?.is_ipv6();
        let features = udp::prepare(sock.as_fd(), v6)?;
        size_buffers(&sock)?;
        let (config, resumed) = Quic3::server_config(tls, cfg)?;
        let endpoint = Endpoint::routed(config, features.gso, inode, index, wake);
        Ok(Quic3::with(
            sock,
            inode,
            endpoint,
            HashMap::new(),
            resumed,
            limits,
            cfg,
        ))
    }

    /// The endpoint the generation before handed over at a reload, on this
    /// generation's copy of its socket: its connections go on as they were, new ones
    /// are made with this generation's certificates and settings, and the requests
    /// from now on read within `limits`.
    pub fn take_on(
        handed: Box<Handed>,
        sock: socket2::Socket,
        inode: u64,
        tls: &rustls::ServerConfig,
        limits: Limits,
        cfg: &crate::config::Config,
        wake: crate::quic::Wake,
    ) -> io::Result<Quic3> {
        let (config, resumed) = Quic3::server_config(tls, cfg)?;
        let Handed {
            mut endpoint,
            conns,
        } = *handed;
        endpoint.adopted(config, wake);
        let conns: HashMap<ConnectionHandle, H3Conn> = conns
            .into_iter()
            .map(|(h, mut k)| {
                k.proto.set_limits(limits);
                (h, H3Conn::taken_on(k))
            })
            .collect();
        let mut q = Quic3::with(sock, inode, endpoint, conns, resumed, limits, cfg);
        q.taken_on = Some(q.endpoint.open() as u64);
        Ok(q)
    }

    fn server_config(
        tls: &rustls::ServerConfig,
        cfg: &crate::config::Config,
    ) -> io::Result<(Arc<quinn_proto::ServerConfig>, Arc<AtomicU64>)> {
        let resumed = Arc::new(AtomicU64::new(0));
        let transport = crate::quic::Transport {
            early_data: cfg.http3_early_data == Http3::On,
            idle: cfg.idle_timeout,
            streams: linerate_http::h2::Config::default().max_concurrent_streams,
        };
        let config =
            crate::quic::server_config(tls, &transport, &resumed).map_err(io::Error::other)?;
        Ok((config, resumed))
    }

    fn with(
        sock: socket2::Socket,
        inode: u64,
        mut endpoint: Endpoint,
        conns: HashMap<ConnectionHandle, H3Conn>,
        resumed: Arc<AtomicU64>,
        limits: Limits,
        cfg: &crate::config::Config,
    ) -> Quic3 {
        endpoint.retry = cfg.http3_retry;
        Quic3 {
            resumed,
            send_timeout: cfg.send_timeout,
            sweep_at: None,
            heads: linerate_http::h3::qpack::HeadCache::new(),
            close_at: None,
            sock,
            endpoint,
            conns,
            events: Vec::new(),
            buf: vec![0; RECV_BYTES],
            limits,
            inode,
            handing: None,
            quiet: false,
            spent: false,
            taken_on: None,
            blocked: false,
            going_away: false,
            draining: false,
            receives: Receives::default(),
        }
    }

    /// The receives counted since the last call.
    pub fn take_receives(&mut self) -> Receives {
        let mut r = std::mem::take(&mut self.receives);
        r.misrouted = std::mem::take(&mut self.endpoint.handed);
        r
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.endpoint.open()
    }

    /// The earliest time a connection wants to be woken.
    pub fn next_timeout(&mut self) -> Option<Instant> {
        self.endpoint
            .next_timeout()
            .into_iter()
            .chain(self.sweep_at)
            .chain(self.close_at)
            .chain(self.handing)
            .min()
    }

    /// Reads what the socket holds (up to [`RECVS_PER_TURN`] receives), then serves
    /// (under epoll; under io_uring the ring receives, [`Quic3::received`]).
    pub fn readable(
        &mut self,
        now: Instant,
        site: &mut Site,
        log: &mut Log<'_>,
        out: &mut Out<'_>,
    ) {
        for _ in 0..RECVS_PER_TURN {
            match udp::recv(self.sock.as_fd(), &mut self.buf) {
                Ok(r) if r.truncated => self.receives.count(&r),
                Ok(r) => {
                    self.receives.count(&r);
                    self.endpoint.receive(now, &r, &self.buf);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP error of an earlier send, reported on this socket: the
                // datagrams behind it are still there.
                Err(_) => continue,
            }
        }
        self.serve(now, site, log, out);
    }

    /// A datagram (or GRO batch) the worker's ring received for this socket: handed
    /// to QUIC; served at the turn's end ([`Quic3::serve`]), once for all the turn's.
    pub fn received(&mut self, now: Instant, r: &udp::Received, payload: &[u8]) {
        self.receives.count(r);
        if !r.truncated {
            self.endpoint.receive(now, r, payload);
        }
    }

    /// A send the ring made completed: a GSO batch the kernel refused as such turns
    /// GSO off for the socket (the batch is lost, as on the wire, and QUIC sends
    /// again what it held); any other refusal is a datagram lost.
    pub fn sent(&mut self, result: Result<u32, linerate_sys::Errno>) {
        if let Err(e) = result {
            if self.endpoint.gso && udp::gso_refused(&io::Error::from(e)) {
                self.endpoint.gso = false;
            }
        }
    }

    /// Wakes the connections whose time has come (retransmits, idle timeouts), then
    /// serves.
    pub fn tick(&mut self, now: Instant, site: &mut Site, log: &mut Log<'_>, out: &mut Out<'_>) {
        self.endpoint.timeouts(now);
        if self.sweep_at.is_some_and(|t| t <= now) {
            self.sweep(now, site, log);
        }
        self.serve(now, site, log, out);
    }

    /// How often the answers under way are looked at for the send deadline: a
    /// second, or the deadline when it is shorter (so it errs by at most that).
    fn sweep_every(&self) -> Duration {
        self.send_timeout
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    /// The send deadline (`--send-timeout`), as over TCP: a connection one of whose
    /// answers has not moved for that long (a client that never reads, so its flow
    /// control never lets more go) is closed, its answers cut, counted as a send
    /// timeout. Looked at every [`Quic3::sweep_every`], not on each write.
    fn sweep(&mut self, now: Instant, site: &mut Site, log: &mut Log<'_>) {
        let limit = self.send_timeout;
        let mut stalled = Vec::new();
        for (h, c) in &mut self.conns {
            for a in &mut c.answers {
                let at = (a.body, a.taken);
                if at != a.seen {
                    a.seen = at;
                    a.stalled = None;
                } else if now.duration_since(*a.stalled.get_or_insert(now)) >= limit {
                    stalled.push(*h);
                    break;
                }
            }
        }
        for h in stalled {
            Stats::add(&site.stats.timeouts[2], 1);
            if let Some(c) = self.conns.get_mut(&h) {
                for a in c.answers.drain(..) {
                    log_cut(log, c.peer, &a);
                }
            }
            if let Some(q) = self.endpoint.conn(h) {
                let why = bytes::Bytes::from_static(b"send timeout");
                q.close(now, varint(ErrorCode::NoError), why);
            }
        }
        let open = self.conns.values().any(|c| !c.answers.is_empty());
        self.sweep_at = open.then(|| now + self.sweep_every());
    }

    /// Passes every event to its connection's HTTP/3 until there are none, answers the
    /// requests that came, and sends what QUIC has to send.
    pub fn serve(&mut self, now: Instant, site: &mut Site, log: &mut Log<'_>, out: &mut Out<'_>) {
        if let Some(kept) = self.taken_on.take() {
            Stats::add(&site.stats.h3_kept, kept);
            self.act_all(now, site, log);
        }
        self.endpoint.take_mail(now);
        for _ in 0..16 {
            self.endpoint.events(&mut self.events);
            self.retry_waiting(site, log);
            if self.events.is_empty() {
                break;
            }
            for e in std::mem::take(&mut self.events) {
                self.event(e, now, site, log);
            }
        }
        if self.going_away || self.draining {
            self.close_idle(now);
        }
        Stats::add(
            &site.stats.h3_retries,
            std::mem::take(&mut self.endpoint.retries),
        );
        Stats::add(
            &site.stats.h3_resumed,
            self.resumed.swap(0, Ordering::Relaxed),
        );
        Stats::add(
            &site.stats.timeouts[1],
            std::mem::take(&mut self.endpoint.idle_closed),
        );
        if self.handing.is_some() {
            self.try_hand(now, site, log);
        }
        let fd = self.sock.as_fd();
        let r = self
            .endpoint
            .transmit(now, &mut |h, bytes| out(fd, h, bytes));
        self.blocked = matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    }

    fn event(&mut self, e: Event, now: Instant, site: &mut Site, log: &mut Log<'_>) {
        match e {
            Event::Connected(h) => {
                Stats::add(&site.stats.h3_connections, 1);
                self.conn(h);
                self.open_control(h);
                // A handshake that ended after a stop or reload said GOAWAY: this
                // connection is told too, once its first requests are taken.
                if let (true, Some(c)) = (self.going_away, self.conns.get_mut(&h)) {
                    c.late = Some(now);
                }
            }
            Event::Opened(h, dir) => {
                while let Some(id) = self.endpoint.conn(h).and_then(|c| c.streams().accept(dir)) {
                    if dir == Dir::Bi {
                        Stats::add(&site.stats.h3_streams, 1);
                    }
                    self.read(h, id, now, site, log);
                }
            }
            Event::Readable(h, id) => self.read(h, id, now, site, log),
            Event::Writable(h, id) => {
                if Some(id) == self.conns.get(&h).and_then(|c| c.control) {
                    self.flush_control(h);
                } else {
                    self.pump(h, id, log);
                }
            }
            Event::Stopped(h, id, code) => {
                self.cut(h, id, code, log);
                self.act(h, now, site, log);
            }
            Event::Finished(h, id) => {
                if let Some(c) = self.conns.get_mut(&h) {
                    c.unacked.retain(|&s| s != id);
                }
            }
            Event::Closed(h) => {
                if let Some(c) = self.conns.remove(&h) {
                    for a in c.answers {
                        log_cut(log, c.peer, &a);
                    }
                }
            }
        }
    }

    /// The HTTP/3 of connection `h`, made on its first use.
    fn conn(&mut self, h: ConnectionHandle) -> Option<&mut H3Conn> {
        if !self.conns.contains_key(&h) {
            let peer = self.endpoint.conn(h)?.remote_address();
            let c = H3Conn::new(Proto::new(self.limits), peer);
            self.conns.insert(h, c);
        }
        self.conns.get_mut(&h)
    }

    /// Opens this side's control stream with its SETTINGS.
    fn open_control(&mut self, h: ConnectionHandle) {
        let Some(id) = self
            .endpoint
            .conn(h)
            .and_then(|c| c.streams().open(Dir::Uni))
        else {
            return;
        };
        if let Some(c) = self.conns.get_mut(&h) {
            c.control = Some(id);
            c.proto.opening(&mut c.control_out);
        }
        self.flush_control(h);
    }

    /// Hands the control stream what it can take of its bytes.
    fn flush_control(&mut self, h: ConnectionHandle) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        let (Some(id), Some(q)) = (c.control, self.endpoint.conn(h)) else {
            return;
        };
        // Until the stream refuses: only a refused write asks quinn-proto for a
        // Writable event (see [`Quic3::pump`]).
        while !c.control_out.is_empty() {
            match q.send_stream(id).write(&c.control_out) {
                Ok(n) if n > 0 => drop(c.control_out.drain(..n)),
                _ => break,
            }
        }
    }

    /// Reads what stream `id` of `h` has into its connection's HTTP/3, and acts on
    /// what that makes.
    fn read(
        &mut self,
        h: ConnectionHandle,
        id: StreamId,
        now: Instant,
        site: &mut Site,
        log: &mut Log<'_>,
    ) {
        if self.conn(h).is_none() {
            return;
        }
        let (Some(q), Some(c)) = (self.endpoint.conn(h), self.conns.get_mut(&h)) else {
            return;
        };
        let raw = u64::from(VarInt::from(id));
        // A server reads a client's stream before the handshake ends only from 0-RTT.
        if q.is_handshaking() && id.dir() == Dir::Bi {
            c.early_below = c.early_below.max(raw + 4);
        }
        let mut recv = q.recv_stream(id);
        if let Ok(mut chunks) = recv.read(true) {
            loop {
                match chunks.next(usize::MAX) {
                    Ok(Some(chunk)) => c.proto.receive(raw, &chunk.bytes),
                    Ok(None) => {
                        c.proto.end(raw);
                        break;
                    }
                    Err(quinn_proto::ReadError::Reset(_)) => {
                        c.proto.reset_by_peer(raw);
                        break;
                    }
                    Err(_) => break,
                }
            }
            let _ = chunks.finalize();
        }
        self.act(h, now, site, log);
    }

    /// Acts on what connection `h`'s HTTP/3 has: answers requests, resets streams,
    /// closes the connection.
    fn act(&mut self, h: ConnectionHandle, now: Instant, site: &mut Site, log: &mut Log<'_>) {
        // Handing over: the next generation's worker answers what is read now.
        if self.quiet {
            return;
        }
        loop {
            let Some(c) = self.conns.get_mut(&h) else {
                return;
            };
            let Some(e) = c.proto.next_event() else {
                return;
            };
            match e {
                H3Event::Request { stream, request } => {
                    let id = stream_id(stream);
                    self.request(h, id, request, now, site, log);
                }
                H3Event::Reject { stream, status, .. } => {
                    let t = SystemTime::now();
                    let mut r = site.error(status, true, &[], "-".into(), t);
                    r.record.started = Some(now);
                    self.answer(h, stream_id(stream), r, log);
                }
                H3Event::ResetStream { stream, code } => {
                    let id = stream_id(stream);
                    self.reset(h, id, code, log);
                }
                H3Event::Close { code } => {
                    Stats::add(&site.stats.h3_errors, 1);
                    if code == ErrorCode::ExcessiveLoad {
                        Stats::add(&site.stats.h3_excessive_load, 1);
                    }
                    if let Some(q) = self.endpoint.conn(h) {
                        q.close(
                            now,
                            varint(code),
                            bytes::Bytes::from_static(code.name().as_bytes()),
                        );
                    }
                }
            }
        }
    }

    /// The site's answer to a request on stream `id`, or its wait for a password
    /// check.
    fn request(
        &mut self,
        h: ConnectionHandle,
        id: StreamId,
        mut request: Box<Request>,
        started: Instant,
        site: &mut Site,
        log: &mut Log<'_>,
    ) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        request.secure = true;
        let peer = Peer::Ip(c.peer);
        if u64::from(VarInt::from(id)) < c.early_below {
            Stats::add(&site.stats.h3_early, 1);
            if !matches!(request.method, Method::Get | Method::Head) {
                let (line, t) = (site.request_line(&request), SystemTime::now());
                let mut r = site.error(Status::TooEarly, true, &[], line, t);
                r.record.started = Some(started);
                return self.answer(h, id, r, log);
            }
        }
        let mut r = crate::conn::answer(site, None, peer, &request, SystemTime::now());
        if let Some(ticket) = r.waiting.take() {
            let mut request = request;
            request.admitted |= r.admitted;
            c.waiting.push(Waiting {
                stream: id,
                request,
                ticket,
                started,
            });
            return;
        }
        r.record.started = Some(started);
        self.answer(h, id, r, log);
    }

    /// Answers the requests whose password checks are made.
    fn retry_waiting(&mut self, site: &mut Site, log: &mut Log<'_>) {
        let made = |c: &H3Conn| c.waiting.iter().any(|w| w.ticket.done());
        if !self.conns.values().any(made) {
            return;
        }
        let ready: Vec<(ConnectionHandle, Waiting)> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| made(c))
            .flat_map(|(h, c)| {
                let (done, wait): (Vec<_>, Vec<_>) =
                    c.waiting.drain(..).partition(|w| w.ticket.done());
                c.waiting = wait;
                done.into_iter().map(move |w| (*h, w))
            })
            .collect();
        for (h, w) in ready {
            self.request(h, w.stream, w.request, w.started, site, log);
        }
    }

    /// Starts answer `r` on stream `id`: its head at once, its body as the stream
    /// takes it.
    fn answer(&mut self, h: ConnectionHandle, id: StreamId, mut r: Response, log: &mut Log<'_>) {
        let Some(c) = self.conns.get_mut(&h) else {
            return;
        };
        r.record.wire = Wire::Three;
        let started = r.record.started;
        r.plan.parts.retain(|p| p.len() > 0);
        let mut out = VecDeque::with_capacity(2);
        if let Some(head) = r.plan.head.take() {
            let mut framed = Vec::with_capacity(256);
            c.proto.head(&head, &mut self.heads, &mut framed);
            out.push_back(Bytes::from(framed));
        }
        c.answers.push(Answer {
            stream: id,
            response: r,
            out,
            taken: 0,
            body: 0,
            seen: (0, 0),
            stalled: None,
        });
        if let (None, Some(t)) = (self.sweep_at, started) {
            self.sweep_at = Some(t + self.sweep_every());
        }
        self.pump(h, id, log);
    }

    /// Hands stream `id` as much of its answer as it takes; logs the answer once the
    /// stream has it all.
    fn pump(&mut self, h: ConnectionHandle, id: StreamId, log: &mut Log<'_>) {
        let (Some(c), Some(q)) = (self.conns.get_mut(&h), self.endpoint.conn(h)) else {
            return;
        };
        let Some(i) = c.answers.iter().position(|a| a.stream == id) else {
            return;
        };
        let a = &mut c.answers[i];
        loop {
            if !a.out.is_empty() {
                match q.send_stream(id).write_chunks(a.out.make_contiguous()) {
                    // Part of what was offered taken: written again at once, for
                    // only a refused write (Blocked) asks quinn-proto to say when
                    // the stream takes more. A write cut short by the connection's
                    // window (its MAX_DATA, or the send window) and not refused
                    // would wait for a Writable event that never comes.
                    Ok(w) if w.bytes > 0 || w.chunks > 0 => {
                        a.taken += w.bytes as u64;
                        a.out.drain(..w.chunks);
                    }
                    Ok(_) | Err(quinn_proto::WriteError::Blocked) => return,
                    Err(_) => {
                        let a = c.answers.swap_remove(i);
                        log_cut(log, c.peer, &a);
                        return;
                    }
                }
                continue;
            }
            match frame_next(&mut a.response, &mut a.out) {
                Ok(Some(n)) => a.body += n,
                Ok(None) => {
                    if q.send_stream(id).finish().is_ok() {
                        c.unacked.push(id);
                    }
                    let a = c.answers.swap_remove(i);
                    c.proto.forget(u64::from(VarInt::from(id)));
                    if !a.response.quiet && !a.response.unlogged {
                        log((Peer::Ip(c.peer), Some(TLS13)), &a.response, None);
                    }
                    return;
                }
                Err(_) => {
                    // The file could not be read: the stream is reset, the answer cut.
                    let _ = q.send_stream(id).reset(varint(ErrorCode::InternalError));
                    let a = c.answers.swap_remove(i);
                    log_cut(log, c.peer, &a);
                    return;
                }
            }
        }
    }

    /// The client stopped stream `id` with `code`: its answer is cut, the stream
    /// reset with the same code (RFC 9000 §3.5), a password check for it dropped.
    fn cut(&mut self, h: ConnectionHandle, id: StreamId, code: VarInt, log: &mut Log<'_>) {
        let (Some(c), Some(q)) = (self.conns.get_mut(&h), self.endpoint.conn(h)) else {
            return;
        };
        let _ = q.send_stream(id).reset(code);
        c.proto.forget(u64::from(VarInt::from(id)));
        c.waiting.retain(|w| w.stream != id);
        let unacked = c.unacked.len();
        c.unacked.retain(|&s| s != id);
        let mut under_way = unacked != c.unacked.len();
        if let Some(i) = c.answers.iter().position(|a| a.stream == id) {
            let a = c.answers.swap_remove(i);
            log_cut(log, c.peer, &a);
            under_way = true;
        }
        if under_way {
            c.proto.cancelled();
        }
    }

    /// Resets stream `id` with `code` both ways; an answer under way on it is cut.
    fn reset(&mut self, h: ConnectionHandle, id: StreamId, code: ErrorCode, log: &mut Log<'_>) {
        if let Some(q) = self.endpoint.conn(h) {
            let _ = q.send_stream(id).reset(varint(code));
            let _ = q.recv_stream(id).stop(varint(code));
        }
        if let Some(c) = self.conns.get_mut(&h) {
            c.proto.forget(u64::from(VarInt::from(id)));
            c.waiting.retain(|w| w.stream != id);
            c.unacked.retain(|&s| s != id);
            if let Some(i) = c.answers.iter().position(|a| a.stream == id) {
                let a = c.answers.swap_remove(i);
                log_cut(log, c.peer, &a);
            }
        }
    }

    /// A reload: the endpoint is handed to the next generation's worker once its
    /// answers under way are done, within [`handover::HAND_WITHIN`]; else its
    /// connections are told GOAWAY as at a stop ([`Quic3::go_away`]).
    pub fn hand_over(&mut self, now: Instant) {
        self.handing = Some(now + handover::HAND_WITHIN);
    }

    /// Whether a handover is under way.
    pub fn handing(&self) -> bool {
        self.handing.is_some()
    }

    /// Whether it was handed on since the last call (its socket is then watched no
    /// more).
    pub fn take_spent(&mut self) -> bool {
        std::mem::take(&mut self.spent)
    }

    /// One step of a handover: when the next generation's worker waits, no new request
    /// is answered, and once no answer is under way the endpoint goes to it; past the
    /// deadline, or if it is not wanted by then, the connections are told GOAWAY and
    /// the requests read meanwhile answered here.
    fn try_hand(&mut self, now: Instant, site: &mut Site, log: &mut Log<'_>) {
        let Some(until) = self.handing else {
            return;
        };
        let wanted = handover::wanted(self.inode);
        if wanted {
            self.quiet = true;
            let idle = |c: &H3Conn| c.answers.is_empty() && c.waiting.is_empty();
            if self.conns.values().all(idle) {
                let endpoint = std::mem::replace(&mut self.endpoint, Endpoint::spent(self.inode));
                let conns = self.conns.drain().map(|(h, c)| (h, c.kept())).collect();
                match handover::give(self.inode, Box::new(Handed { endpoint, conns })) {
                    Ok(()) => {
                        self.handing = None;
                        self.quiet = false;
                        self.spent = true;
                        return;
                    }
                    Err(back) => {
                        let Handed { endpoint, conns } = *back;
                        self.endpoint = endpoint;
                        self.conns = conns
                            .into_iter()
                            .map(|(h, k)| (h, H3Conn::taken_on(k)))
                            .collect();
                    }
                }
            }
            if now < until {
                return;
            }
        } else if now < until {
            if std::mem::take(&mut self.quiet) {
                self.act_all(now, site, log);
            }
            return;
        }
        self.quiet = false;
        self.go_away();
        self.act_all(now, site, log);
    }

    /// Acts on what every connection's HTTP/3 has.
    fn act_all(&mut self, now: Instant, site: &mut Site, log: &mut Log<'_>) {
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for h in handles {
            self.act(h, now, site, log);
        }
    }

    /// A stop or reload: GOAWAY on every connection, and no new one; each closes once
    /// its answers are done (at the next [`Quic3::serve`]).
    pub fn go_away(&mut self) {
        if self.handing.take().is_some() {
            handover::decline(self.inode);
        }
        self.going_away = true;
        self.endpoint.refuse_new();
        self.say_go_away(|_| true);
    }

    /// A stop's shutdown delay: each connection that has been answered is told GOAWAY
    /// (its requests taken are answered, then it closes), as HTTP/2's are, so clients
    /// come back through the balancer; new connections are still taken, and told at
    /// the next turn after their first answer.
    pub fn drain(&mut self) {
        self.draining = true;
        self.say_go_away(|c| c.proto.answered() > 0);
    }

    /// GOAWAY on each connection `which` picks that has not said it yet, once its
    /// control stream is open (SETTINGS first, RFC 9114 §6.2.1): one whose handshake
    /// is under way is told when it ends.
    fn say_go_away(&mut self, which: impl Fn(&H3Conn) -> bool) {
        let handles: Vec<ConnectionHandle> = self
            .conns
            .iter()
            .filter(|(_, c)| c.control.is_some() && !c.proto.going_away() && which(c))
            .map(|(h, _)| *h)
            .collect();
        for h in handles {
            if let Some(c) = self.conns.get_mut(&h) {
                c.proto.go_away(&mut c.control_out);
            }
            self.flush_control(h);
        }
    }

    /// Closes the connections that said GOAWAY and have nothing under way, a round
    /// trip after the GOAWAY went out (at least [`CLOSE_AFTER`]): a close drops
    /// whatever QUIC has not sent yet, and a client that had not seen the GOAWAY
    /// could not tell a stop from a fault.
    fn close_idle(&mut self, now: Instant) {
        self.close_at = None;
        let late = |c: &H3Conn| c.late.filter(|_| !c.proto.going_away());
        if self.conns.values().any(|c| late(c).is_some()) {
            let told = |c: &H3Conn| {
                late(c).is_some_and(|t| c.proto.answered() > 0 || now >= t + LATE_GRACE)
            };
            self.say_go_away(told);
            let waits = self.conns.values().filter_map(late);
            self.close_at = waits.map(|t| t + LATE_GRACE).min();
        }
        for (h, c) in &mut self.conns {
            let done = c.answers.is_empty() && c.waiting.is_empty() && c.unacked.is_empty();
            if !c.proto.going_away() || !done || !c.control_out.is_empty() {
                continue;
            }
            let Some(q) = self.endpoint.conn(*h) else {
                continue;
            };
            if q.is_closed() {
                continue;
            }
            let at = *c
                .close_at
                .get_or_insert_with(|| now + q.rtt().max(CLOSE_AFTER));
            if at <= now {
                q.close(now, varint(ErrorCode::NoError), bytes::Bytes::new());
            } else {
                self.close_at = Some(self.close_at.map_or(at, |t| t.min(at)));
            }
        }
    }

    /// Closes every connection (the shutdown's deadline).
    pub fn close_all(&mut self, now: Instant, log: &mut Log<'_>) {
        for (h, c) in self.conns.drain() {
            for a in &c.answers {
                log_cut(log, c.peer, a);
            }
            if let Some(q) = self.endpoint.conn(h) {
                q.close(now, varint(ErrorCode::NoError), bytes::Bytes::new());
            }
        }
    }
}

impl Drop for Quic3 {
    /// A worker that ends with the socket's current endpoint (nothing was open to hand
    /// over, or a stop) lets a worker that waits for it start its own.
    fn drop(&mut self) {
        if self.endpoint.is_current() {
            handover::decline(self.inode);
        }
    }
}

/// What `--check` says of HTTP/3: each UDP address it would take, whether someone
/// holds it, and the UDP buffers the kernel allows (a note when less than asked).
pub(crate) fn check(cfg: &crate::config::Config, c: &mut crate::check::Checked) {
    if cfg.http3 != Http3::On {
        return;
    }
    for e in &cfg.tls_listen {
        let crate::config::Endpoint::Ip(ip) = e else {
            c.notes
                .push(format!("listen {e}: no HTTP/3 on a Unix socket"));
            continue;
        };
        c.served
            .push(format!("listen {e}: HTTP/3 (UDP, the same port)"));
        match crate::listen::udp_port_free(*ip) {
            _ if ip.port() == 0 => {}
            Ok(()) => {}
            Err(why) if why.kind() == io::ErrorKind::AddrInUse => c.notes.push(format!(
                "listen {e} (UDP, HTTP/3): in use now: a start would fail, a reload of \
                 the server that holds it would not"
            )),
            Err(why) => c.problems.push(format!("listen {e} (UDP, HTTP/3): {why}")),
        }
    }
    let probe = std::net::UdpSocket::bind(("127.0.0.1", 0)).map(socket2::Socket::from);
    let capped = probe.and_then(|s| capped_buffers(&s)).unwrap_or_default();
    c.notes
        .extend(capped.into_iter().map(|(_, line)| format!("http3: {line}")));
}

/// How long a client may remember that HTTP/3 is here (a day, as Caddy says it).
const ALT_SVC_MAX_AGE: u32 = 86400;

/// Says on an answer over HTTPS that HTTP/3 answers on UDP `port`: `Alt-Svc:
/// h3=":PORT"; ma=86400` (RFC 7838), written without an allocation.
pub(crate) fn advertise(r: &mut Response, port: u16) {
    use std::io::Write;
    let Some(head) = r.plan.head.as_mut() else {
        return;
    };
    let mut buf = [0u8; 40];
    let mut w = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(w, "h3=\":{port}\"; ma={ALT_SVC_MAX_AGE}");
    let len = w.position() as usize;
    if let Ok(v) = std::str::from_utf8(&buf[..len]) {
        head.field("Alt-Svc", v);
    }
}

/// Frames the next piece of `r`'s body onto `out` (a DATA frame: its header and up to
/// [`FRAME_BYTES`] of a file range read straight in behind it, or a part of bytes
/// whole, or cached contents shared without a copy): the body bytes framed, or none
/// when the body is all framed.
fn frame_next(r: &mut Response, out: &mut VecDeque<Bytes>) -> io::Result<Option<u64>> {
    let Some(part) = r.plan.parts.pop_front() else {
        return Ok(None);
    };
    let mut header = Vec::with_capacity(16);
    let n = match part {
        Part::Bytes(b) => {
            Proto::data_header(b.len() as u64, &mut header);
            header.extend_from_slice(&b);
            out.push_back(Bytes::from(header));
            b.len() as u64
        }
        Part::Shared { buf, start, end } => {
            Proto::data_header((end - start) as u64, &mut header);
            out.push_back(Bytes::from(header));
            out.push_back(Bytes::from_owner(Cached(buf)).slice(start..end));
            (end - start) as u64
        }
        Part::File(mut f) => {
            let n = f.len.min(FRAME_BYTES);
            let mut framed = Vec::with_capacity(16 + n as usize);
            Proto::data_header(n, &mut framed);
            linerate_sys::cache::read_at_append(f.file.as_fd(), &mut framed, n as usize, f.offset)?;
            out.push_back(Bytes::from(framed));
            if n < f.len {
                f.offset += n;
                f.len -= n;
                r.plan.parts.push_front(Part::File(f));
            }
            n
        }
    };
    Ok(Some(n))
}

/// Cached file contents as a chunk QUIC holds until acknowledged: the cache's bytes,
/// shared, not copied.
struct Cached(Arc<[u8]>);

impl AsRef<[u8]> for Cached {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Logs an answer that did not finish.
fn log_cut(log: &mut Log<'_>, peer: SocketAddr, a: &Answer) {
    if a.response.quiet || a.response.unlogged {
        return;
    }
    let aborted = Aborted {
        cut: Cut::Client,
        body_sent: a.body,
        nothing_sent: a.taken == 0,
    };
    log((Peer::Ip(peer), Some(TLS13)), &a.response, Some(aborted));
}

/// An HTTP/3 error code as QUIC carries it.
fn varint(code: ErrorCode) -> VarInt {
    VarInt::from_u64(code.as_u64()).unwrap_or(VarInt::from_u32(0x102))
}

/// A stream id as quinn names it.
fn stream_id(raw: u64) -> StreamId {
    StreamId::from(VarInt::from_u64(raw).unwrap_or(VarInt::MAX))
}
