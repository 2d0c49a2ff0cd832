//! Workers: one thread per CPU, each with its own listeners (`SO_REUSEPORT`), event
//! loop, open-file cache and connections. Listeners are bound before any worker starts,
//! so a bad address fails the start, not a worker.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::access_log::{write_access, AccessLogs, Done};
use crate::config::Config;
use crate::conn::{Aborted, After, Conn, Cut};
use crate::deadline::{after, check_every, deadline, timeouts, TICK, TIMER_SLOTS};
use crate::disk::{Disk, Inbox};
use crate::files::FileCache;
use crate::listen::{Listener, Peer};
use crate::logs::{more, LogFile, RateLimit};
use crate::response::Response;
use crate::serve::{CountedIn, Ending, Helpers};
use crate::site::{Resolver, Site};
use crate::stats::{Board, Stats};
use linerate_event::{Driver, Interest, Io, Ready, Tick, Timers};
use linerate_http::timeout::Timeout;
use linerate_http::Protocol;

mod quic;
use quic::QuicTurn;

/// At a stop or reload, how long a connection that has had no request yet is given
/// for its first (at most the header timeout).
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);
/// How long accepting pauses after EMFILE/ENFILE.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What a registration's token names: its kind in the top two bits, then an index;
/// a connection's token also carries its serial's low 30 bits, so an event meant for
/// a connection that has since closed never reaches the next one in its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    /// Connection slot, and the serial's low bits.
    Conn(usize, u32),
    /// Listener index.
    Listener(usize),
    /// Site i's inotify descriptor.
    Notify(usize),
    /// The eventfd the disk helpers wake the worker with.
    Wake,
    /// HTTP/3's UDP socket i.
    Quic(usize),
}

impl Token {
    const KIND_SHIFT: u32 = 62;
    const SERIAL_BITS: u32 = 30;
    const INDEX_MASK: u64 = (1 << 32) - 1;

    fn conn(slot: usize, serial: u64) -> Token {
        Token::Conn(slot, (serial & ((1 << Self::SERIAL_BITS) - 1)) as u32)
    }

    fn encode(self) -> u64 {
        match self {
            Token::Conn(slot, serial) => (u64::from(serial) << 32) | slot as u64,
            Token::Listener(i) => (1 << Self::KIND_SHIFT) | i as u64,
            Token::Notify(i) => (2 << Self::KIND_SHIFT) | i as u64,
            Token::Wake => 3 << Self::KIND_SHIFT,
            Token::Quic(i) => (3 << Self::KIND_SHIFT) | (1 << 32) | i as u64,
        }
    }

    fn decode(t: u64) -> Token {
        let index = (t & Self::INDEX_MASK) as usize;
        match t >> Self::KIND_SHIFT {
            0 => Token::Conn(index, (t >> 32) as u32),
            1 => Token::Listener(index),
            2 => Token::Notify(index),
            _ if t & (1 << 32) != 0 => Token::Quic(index),
            _ => Token::Wake,
        }
    }
}

/// A connection's token with the driver and the timers (made from its slot and serial,
/// not kept: an idle connection is kept small).
fn token_of(c: &Conn) -> u64 {
    Token::conn(c.slot as usize, u64::from(c.serial)).encode()
}

/// What a listener's connections are.
pub(crate) struct Role {
    unix: bool,
    tls: Option<Arc<rustls::ServerConfig>>,
    redirect: Option<u16>,
    proxy: bool,
    /// The UDP port HTTP/3 answers on beside it (0: none).
    h3_port: u16,
}

/// One worker's state; everything it asks of the kernel's readiness machinery goes
/// through `D`.
pub(crate) struct Worker<D: Driver> {
    cfg: Arc<Config>,
    /// The CPU it is pinned to (`--pin`): each connection accepted is counted as taken
    /// on the CPU that processed its packets, or elsewhere.
    cpu: Option<usize>,
    driver: D,
    listeners: Vec<Option<Listener>>,
    /// What each listener's connections are, kept after its socket is let go (for the
    /// connections the driver accepted ahead: [`Worker::adopt_orphans`]).
    roles: Vec<Role>,
    /// The worker has begun to end: no new work after what it has.
    ending: bool,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    site: Site,
    /// The site's counters, borrowed apart from it while a connection drives the site.
    stats: Arc<Stats>,
    accept_paused_until: Option<Instant>,
    /// The driver's ring counts already added to the counters.
    ring_seen: linerate_sys::uring::RingCounts,
    /// The descriptor limit (soft, hard) at the last tick.
    nofile: Option<(u64, u64)>,
    log: AccessLogs,
    /// Where every connection's reads land first.
    scratch: Vec<u8>,
    /// Connections that gave up their turn with the socket still writable; served
    /// again after the next wait, which then does not block.
    runnable: Vec<usize>,
    /// Serial of the last connection accepted.
    serial: u64,
    /// Error-log lines for accepts refused for lack of descriptors.
    accept_log: RateLimit,
    /// What wakes the worker from its helpers (the disk's reads, password checks).
    inbox: Arc<Inbox>,
    /// Connections whose requests wait for password checks.
    waiting: Vec<usize>,
    /// Lines for idle connections closed to make room.
    room_log: RateLimit,
    /// When idle connections were last closed to make room.
    room_made_at: Option<Instant>,
    /// Error-log lines for connections cut by a deadline.
    cut_log: RateLimit,
    /// Each connection's next deadline, at most [`Worker::check_every`] ahead.
    timers: Timers,
    /// The entries that came due in a tick (kept for its allocation).
    fired: Vec<(u64, Tick)>,
    /// The shortest timeout: a connection's deadline is looked at again at least this
    /// often, so one that moves earlier (a new state with a shorter timeout, started
    /// now) almost never needs a second entry.
    check_every: Duration,
    /// Connections held, and how many of them are idle.
    open: u64,
    idle: u64,
    /// HTTP/3 on the HTTPS listeners' UDP sockets.
    quic: Vec<crate::h3::Quic3>,
    /// HTTP/3 sockets whose endpoints the generation before holds until it hands them
    /// over (a reload).
    awaiting: Vec<quic::Awaiting>,
    /// The HTTP/3 sockets the ring received datagrams for in this turn, to serve at
    /// its end.
    quic_received: Vec<usize>,
}

impl<D: Driver> Worker<D> {
    /// Says which CPU the worker's thread is pinned to.
    pub(crate) fn pinned_to(mut self, cpu: Option<usize>) -> Self {
        self.cpu = cpu;
        self
    }

    pub(crate) fn new(
        mut driver: D,
        resolver: Arc<Resolver>,
        roots: Vec<OwnedFd>,
        listeners: Vec<Listener>,
        log_files: &[Arc<LogFile>],
        helpers: Helpers,
        (stats, board): (Arc<Stats>, Board),
    ) -> io::Result<Worker<D>> {
        let cfg = Arc::clone(&resolver.cfg);
        let Helpers {
            jobs,
            compress,
            digests,
            checker,
        } = helpers;
        for (i, l) in listeners.iter().enumerate() {
            driver.register(
                l.sock.as_fd(),
                Token::Listener(i).encode(),
                Interest::Listener,
            )?;
        }
        // What wakes the worker: the disk helpers' reads, and the password checks.
        let inbox = Arc::new(Inbox::new()?);
        driver.register(inbox.wake.as_fd(), Token::Wake.encode(), Interest::Readable)?;
        let disk = match jobs {
            Some(jobs) => {
                let inbox = Arc::clone(&inbox);
                Some(Disk {
                    jobs,
                    inbox,
                    window: cfg.read_ahead.max(1),
                    usable: std::cell::Cell::new(true),
                    epoch: 1,
                })
            }
            None => None,
        };
        // The worker's open files and small-file memory are shared among the sites.
        let sites = roots.len().max(1);
        let caches = roots
            .into_iter()
            .zip(&resolver.sites)
            .map(|(root, site)| {
                FileCache::new(
                    root,
                    (cfg.open_file_cache / sites).max(1),
                    (cfg.small_file, cfg.small_file_memory_bytes() / sites as u64),
                    disk.is_some(),
                    Arc::clone(&stats),
                )
                .at(&site.root)
                .with_compress_cache(compress.clone())
                .with_digests(Some(Arc::clone(&digests)))
            })
            .collect();
        let log = AccessLogs::new(&cfg, log_files)?;
        let check_every = check_every(&cfg);
        Worker {
            cpu: None,
            stats: Arc::clone(&stats),
            site: Site::new(resolver, caches, stats, board, disk).with_checker(checker, {
                let inbox = Arc::clone(&inbox);
                Arc::new(move || inbox.poke())
            }),
            inbox,
            waiting: Vec::new(),
            cfg,
            driver,
            roles: listeners
                .iter()
                .map(|l| Role {
                    unix: l.unix,
                    tls: l.tls.clone(),
                    redirect: l.redirect,
                    h3_port: l
                        .quic
                        .first()
                        .and_then(|(_, s)| s.local_addr().ok()?.as_socket())
                        .map_or(0, |a| a.port()),
                    proxy: l.proxy,
                })
                .collect(),
            ending: false,
            listeners: listeners.into_iter().map(Some).collect(),
            conns: Vec::new(),
            free: Vec::new(),
            accept_paused_until: None,
            ring_seen: Default::default(),
            nofile: None,
            log,
            scratch: vec![0; crate::conn::READ_BYTES],
            runnable: Vec::new(),
            serial: 0,
            accept_log: RateLimit::new(Duration::from_secs(1)),
            room_log: RateLimit::new(Duration::from_secs(1)),
            room_made_at: None,
            cut_log: RateLimit::new(Duration::from_secs(1)),
            check_every,
            timers: Timers::new(TICK, TIMER_SLOTS, Instant::now()),
            fired: Vec::new(),
            open: 0,
            idle: 0,
            quic: Vec::new(),
            awaiting: Vec::new(),
            quic_received: Vec::new(),
        }
        .with_quic()
    }

    /// Serves until `stop`; `accepting` is counted out when this worker has let go of
    /// its listeners.
    pub(crate) fn run(mut self, stop: &Ending, accepting: &mut CountedIn) -> io::Result<()> {
        let mut ready: Vec<Ready> = Vec::with_capacity(256);
        let mut shutdown_deadline: Option<Instant> = None;
        let mut shutdown_began: Option<Instant> = None;
        loop {
            self.watch_changes();
            ready.clear();
            // Woken at the wheel's next tick at the latest, so a deadline is met within
            // a tick of it.
            let wait = if self.runnable.is_empty() {
                let quic = self.quic_due();
                self.timers
                    .next_due()
                    .min(quic.unwrap_or_else(|| self.timers.next_due()))
                    .saturating_duration_since(Instant::now())
                    .min(TICK)
            } else {
                Duration::ZERO
            };
            self.driver.wait(&mut ready, wait)?;
            Stats::add(&self.stats.loop_waits, 1);
            let now = Instant::now();
            // File changes first: the requests of this turn see every change that was
            // queued when the wait returned.
            for ev in &ready {
                if let Token::Notify(i) = Token::decode(ev.token) {
                    self.site.changed(i);
                }
            }
            // Those that yielded last round take their turn after the new events.
            let turn = std::mem::take(&mut self.runnable);
            for ev in ready.drain(..) {
                match Token::decode(ev.token) {
                    Token::Wake => {
                        let done = self.inbox.take();
                        self.disk_done(done, now);
                        self.checks_made(now);
                        self.take_on_quic(now, self.ending);
                        self.quic(None, now, QuicTurn::Serve);
                    }
                    Token::Notify(_) => {}
                    Token::Listener(i) => self.accept(i, now),
                    Token::Quic(i) if ev.io != Io::None => self.quic_io(i, ev.io, now),
                    Token::Quic(i) => self.quic(Some(i), now, QuicTurn::Readable),
                    Token::Conn(idx, serial) => {
                        let meant = self
                            .conns
                            .get(idx)
                            .and_then(Option::as_ref)
                            .is_some_and(|c| {
                                Token::conn(idx, u64::from(c.serial)) == Token::Conn(idx, serial)
                            });
                        if !meant {
                            // Closed earlier in this turn (or meant for the connection
                            // before in this slot): a receive buffer still goes back.
                            if let (Io::Received { buffer, .. }, Some(r)) =
                                (ev.io, self.driver.ring())
                            {
                                r.recycle(buffer);
                            }
                            continue;
                        }
                        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
                            continue;
                        };
                        if ev.io != Io::None {
                            self.ring_io(idx, ev.io, now);
                            continue;
                        }
                        if ev.hangup {
                            c.peer_hung_up();
                        }
                        self.event(idx, ev.readable, ev.error, now);
                    }
                }
            }
            self.quic_served(now);
            for idx in turn {
                if let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) {
                    c.on_run_list = false;
                }
                self.event(idx, false, false, now);
            }
            if now >= self.timers.next_due() {
                self.tick(now);
                self.count_ring();
            }
            self.quic_timers(now);
            if shutdown_deadline.is_none() && stop.now.load(Ordering::Acquire) {
                shutdown_began = Some(now);
                shutdown_deadline = Some(now + self.cfg.shutdown_timeout);
                self.begin_shutdown(stop.gently.load(Ordering::Relaxed), now);
                accepting.out();
            }
            if let Some(d) = shutdown_deadline {
                // At a stop, idle connections are ended at once, the rest when done or
                // at the deadline. Ended with a FIN while their input is drained (until
                // the client closes too, or the drain deadline): a request that crossed
                // it gets a clean close to retry on, never a reset. At a reload, a
                // connection waiting for its last request waits for it (or its idle
                // deadline, or this deadline): no client has a request to send again.
                let gently = stop.gently.load(Ordering::Relaxed);
                for i in 0..self.conns.len() {
                    let Some(c) = self.conns[i].as_mut() else {
                        continue;
                    };
                    // A connection that has had no request yet gets a short grace
                    // for its first, not the whole shutdown timeout.
                    let waited = now.duration_since(shutdown_began.unwrap_or(now));
                    let grace = self.cfg.header_timeout.min(FIRST_REQUEST_GRACE);
                    let ended = now >= d
                        || (!c.busy()
                            && !c.waits()
                            && (!c.http.awaits_last() || (!gently && waited >= grace))
                            && c.draining_since.is_none()
                            && c.linger(now, &mut self.driver) != After::Keep);
                    if ended {
                        self.close(i, After::Close, Cut::Shutdown);
                    } else {
                        // `linger` may have begun its drain: a deadline 2 s away.
                        self.settle(i, now);
                        self.sync_input(i);
                    }
                }
                // Nothing the ring accepted ahead is left unserved at the end.
                self.adopt_orphans(now);
                if now >= d {
                    self.quic(None, now, QuicTurn::CloseAll);
                }
                if self.conns.iter().all(Option::is_none) && self.quic_done() {
                    Stats::add(&self.stats.log_lines_dropped, self.log.flush());
                    self.count_ring();
                    return Ok(());
                }
            }
        }
    }

    /// Adds what the driver's ring did since the last look to the counters.
    fn count_ring(&mut self) {
        let Some(now) = self.driver.as_ring().map(|r| r.counts()) else {
            return;
        };
        let before = std::mem::replace(&mut self.ring_seen, now);
        Stats::add(&self.stats.ring_submitted, now.submitted - before.submitted);
        Stats::add(&self.stats.ring_completed, now.completed - before.completed);
        Stats::add(&self.stats.ring_enters, now.enters - before.enters);
    }

    /// Watches the open-file caches' inotify descriptors that are new (a cache starts
    /// over with a new instance after a change); a closed one leaves the epoll set by
    /// itself, and the io_uring driver ends its watch when the next one takes its token.
    fn watch_changes(&mut self) {
        let mut unwatched = Vec::new();
        for (i, fd) in self.site.notify_fds() {
            let token = Token::Notify(i).encode();
            match fd {
                Some(fd) => {
                    if let Err(e) = self.driver.register(fd, token, Interest::Readable) {
                        tracing::warn!(
                            "watching file changes: {e}; checking files on every request"
                        );
                        unwatched.push(i);
                    }
                }
                // The cache gave its instance up (closed): its watch goes too.
                None => {
                    if let Some(r) = self.driver.ring() {
                        let _ = r.closed(token);
                    }
                }
            }
        }
        // Without the readiness the cache could trust a stale path: it gives the
        // shortcut up and checks every lookup.
        for i in unwatched {
            self.site.unwatched(i);
        }
    }

    fn begin_shutdown(&mut self, gently: bool, now: Instant) {
        self.ending = true;
        // Cached files go back now (responses in flight hold their own): a reload's new
        // workers size their caches from the same descriptor limit.
        self.site.forget_files();
        for l in self.listeners.iter_mut() {
            if let Some(l) = l.take() {
                let _ = self.driver.deregister(l.sock.as_fd());
            }
        }
        // What the driver accepted ahead is served, not reset.
        self.adopt_orphans(now);
        self.quic_shutdown(gently, now);
        // At a stop, responses in flight finish and no request after them is read. A
        // connection that has had no request yet gets its first one answered (with a
        // close): its client may be sending it already, and could not tell a close
        // from a refusal. At a reload, every connection's next request is answered so.
        for (i, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c.as_mut() else {
                continue;
            };
            if gently || c.http.is_fresh() {
                c.http.finish_next();
            } else {
                c.http.close_after_last();
            }
            // An HTTP/2 connection says so at once (GOAWAY), whatever it waits for.
            if c.http.is_two() && !c.on_run_list {
                c.on_run_list = true;
                self.runnable.push(i);
            }
        }
    }

    fn accept(&mut self, li: usize, now: Instant) {
        if self.accept_paused_until.is_some() {
            return;
        }
        loop {
            let Some(l) = self.listeners[li].as_ref() else {
                return;
            };
            let fd = match self
                .driver
                .accept(Token::Listener(li).encode(), l.sock.as_fd())
            {
                Ok(fd) => fd,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if linerate_sys::fs::is_out_of_descriptors(&e) => {
                    Stats::add(&self.site.stats.accept_out_of_fds, 1);
                    // Room first: the longest-idle keep-alive connections go, and the
                    // accept is tried again; at most once a pause's length, so the
                    // ring's accepts (each failing on its own) cannot churn through
                    // the connections.
                    if self.room_made_at.is_none_or(|t| now >= t + ACCEPT_PAUSE) {
                        self.room_made_at = Some(now);
                        if self.close_longest_idle(now) > 0 {
                            continue;
                        }
                    }
                    // Stop accepting for a moment instead of spinning on a listener that
                    // stays readable; existing connections go on.
                    if let Some(n) = self.accept_log.allow(now) {
                        tracing::warn!(
                            "accept: {e}: pausing accepts for {} ms{}",
                            ACCEPT_PAUSE.as_millis(),
                            more(n)
                        );
                    }
                    self.pause_accepting(now);
                    return;
                }
                Err(_) => return,
            };
            self.adopt(li, fd, now);
        }
    }

    /// Connections the driver accepted for listeners it no longer watches (io_uring's
    /// accepts run ahead: a reload, a stop or a pause ended the watch with some taken
    /// from the socket's queue): served like any other, the last request of each
    /// answered with a close if the worker is ending. Never closed unserved, which
    /// would reset a client whose request may be on its way.
    fn adopt_orphans(&mut self, now: Instant) {
        while let Some((token, fd)) = self.driver.ring().and_then(|r| r.take_orphan()) {
            let Token::Listener(li) = Token::decode(token) else {
                continue;
            };
            if let Some(idx) = self.adopt(li, fd, now) {
                if self.ending {
                    if let Some(c) = self.conns[idx].as_mut() {
                        c.http.finish_next();
                    }
                }
            }
        }
    }

    /// Makes `fd`, accepted from listener `li`, a connection of this worker; its index.
    fn adopt(&mut self, li: usize, fd: OwnedFd, now: Instant) -> Option<usize> {
        let role = &self.roles[li];
        let sock = socket2::Socket::from(fd);
        let peer = if role.unix {
            Peer::Unix
        } else {
            // A connection reset before this has no address any more; it fails at
            // its first read.
            Peer::Ip(
                sock.peer_addr()
                    .ok()
                    .and_then(|a| a.as_socket())
                    .unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            )
        };
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        self.serial += 1;
        Stats::add(&self.site.stats.accepted, 1);
        if let (Some(cpu), Peer::Ip(_)) = (self.cpu, peer) {
            let here = linerate_sys::steer::incoming_cpu(sock.as_fd())
                .ok()
                .flatten();
            if here == Some(cpu) {
                Stats::add(&self.site.stats.on_receive_cpu, 1);
            } else if here.is_some() {
                Stats::add(&self.site.stats.off_receive_cpu, 1);
            }
        }
        let id = (idx, self.serial);
        let limits = self.site.limits();
        let tls = match role.tls.as_ref().map(crate::tls::Session::new).transpose() {
            Ok(t) => t.map(Box::new),
            Err(e) => {
                tracing::warn!("TLS: a session cannot be made: {e}");
                self.free.push(idx);
                return None;
            }
        };
        let ring = self.driver.as_ring().is_some();
        let mut conn = Conn::new(sock, peer, limits, id, ring, tls, now);
        let token = token_of(&conn);
        conn.redirect = role.redirect;
        conn.alt_svc = role.h3_port;
        if role.proxy {
            conn.proxy = Some(Box::new(crate::conn::ProxyWait {
                since: now,
                got: Vec::new(),
                refused: false,
            }));
        }
        if self
            .driver
            .register(conn.sock.as_fd(), token, Interest::Connection)
            .is_err()
        {
            self.free.push(idx);
            return None;
        }
        self.conns[idx] = Some(conn);
        self.open += 1;
        self.settle(idx, now);
        // Its requests are read in a later turn, after a wait: registered with data
        // waiting, it is reported ready at once. So file changes queued before its
        // request are taken in first (the inotify descriptor is ahead of it in the
        // ready list), and a client that connects again and again cannot keep the
        // worker in this loop.
        Some(idx)
    }

    /// Closes the connections idle longest between requests, to give their descriptors
    /// to new clients (as nginx drains its reusable connections): an eighth of the idle
    /// ones, between 1 and 32 at a time. How many it closed.
    fn close_longest_idle(&mut self, now: Instant) -> usize {
        let mut idle: Vec<(Instant, usize)> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                c.as_ref()
                    .filter(|c| c.is_idle())
                    .map(|c| (c.last_activity, i))
            })
            .collect();
        let n = (idle.len() / 8).clamp(1, 32).min(idle.len());
        if n == 0 {
            return 0;
        }
        idle.select_nth_unstable(n - 1);
        for &(_, i) in &idle[..n] {
            self.close(i, After::Close, Cut::Client);
        }
        Stats::add(&self.site.stats.idle_closed_for_room, n as u64);
        if let Some(more) = self.room_log.allow(now) {
            tracing::warn!(
                "out of descriptors: closed the {n} connections idle longest to accept new ones{}",
                crate::logs::more(more)
            );
        }
        n
    }

    fn pause_accepting(&mut self, now: Instant) {
        self.accept_paused_until = Some(now + ACCEPT_PAUSE);
        for l in self.listeners.iter().flatten() {
            let _ = self.driver.deregister(l.sock.as_fd());
        }
    }

    fn event(&mut self, idx: usize, readable: bool, error: bool, now: Instant) {
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        let (log, stats) = (&mut self.log, &self.stats);
        let mut done = Done::default();
        let mut write_log = |c: &Conn, r: &Response, a: Option<Aborted>| {
            write_access(log, stats, (c.peer, c.tls_protocol()), r, a, &mut done)
        };
        let after = conn.drive(
            &mut self.site,
            (&mut self.driver, &mut self.scratch),
            readable,
            error,
            now,
            &mut write_log,
        );
        if std::mem::take(&mut conn.handshake_done) {
            Stats::add(&self.stats.tls_handshakes, 1);
        }
        if std::mem::take(&mut conn.handed_off) {
            Stats::add(&self.stats.tls_kernel, 1);
        }
        if after != After::Keep {
            self.close(idx, after, Cut::Client);
            return;
        }
        if conn.take_yielded() && !conn.on_run_list {
            conn.on_run_list = true;
            self.runnable.push(idx);
        }
        if conn.waits() && !self.waiting.contains(&idx) {
            self.waiting.push(idx);
        }
        self.settle(idx, now);
        self.sync_input(idx);
    }

    /// After connection `idx` moved at `now`: its body clock and the idle count follow
    /// its state, and its deadline gets an entry if it is now earlier than the one
    /// armed (a later one is found when that entry fires, at no cost until then).
    fn settle(&mut self, idx: usize, now: Instant) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        // The body deadline runs while a body is awaited and nothing is owed: while a
        // response is in flight the server reads nothing (the send deadline applies
        // then), so its time is not the client's to answer for. A body waits behind
        // at most the responses queued before its head, so the clock starts over at
        // most that once.
        let due = c.http.poll_timeout(&timeouts(&self.cfg));
        c.body_clock = match due.filter(|d| d.what == Timeout::Body) {
            // A clock that started before this body's head was the body before's: the
            // protocol's own deadline is the later (see `deadline`).
            Some(_) if !c.busy() => Some(c.body_clock.unwrap_or(now)),
            _ => None,
        };
        let idle = c.is_idle();
        if idle != c.counted_idle {
            c.counted_idle = idle;
            if idle {
                self.idle += 1;
            } else {
                self.idle -= 1;
            }
        }
        let at = deadline(c, &self.cfg, due)
            .at
            .min(after(now, self.check_every));
        // Mostly the deadline moved later (or not at all): no tick to work out.
        // (A tick earlier than the armed one is an earlier deadline: ticks only move
        // on, so the armed tick is its deadline's own.)
        let earlier = c.armed.is_none_or(|tick| self.timers.tick_for(at) < tick);
        if earlier {
            c.armed = Some(self.timers.arm(token_of(c), at));
        }
    }

    /// Under a ring, a connection's receive follows what it can take.
    fn sync_input(&mut self, idx: usize) {
        let Some(conn) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        if let Some(on) = conn.input_change() {
            let set = self
                .driver
                .ring()
                .map_or(Ok(()), |r| r.set_input(conn.sock.as_fd(), on));
            if set.is_err() {
                self.close(idx, After::Close, Cut::Error);
            }
        }
    }

    /// What the driver's ring did for connection `idx`: bytes in, its input ended, a
    /// gather sent. Then the connection goes on.
    fn ring_io(&mut self, idx: usize, io: Io, now: Instant) {
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            if let (Io::Received { buffer, .. }, Some(r)) = (io, self.driver.ring()) {
                r.recycle(buffer);
            }
            return;
        };
        match io {
            Io::None => {}
            Io::Received { buffer, len } => {
                if let Some(r) = self.driver.ring() {
                    c.received(r.input(buffer, len as usize), now);
                    r.recycle(buffer);
                }
            }
            Io::InputEnded(r) => {
                let after = c.input_ended(r);
                if after != After::Keep {
                    self.close(idx, after, Cut::Client);
                    return;
                }
            }
            Io::Sent(r) => c.sent(r),
        }
        self.event(idx, false, false, now);
    }

    /// The helpers finished windows: their connections send again.
    fn disk_done(&mut self, done: Vec<crate::disk::Done>, now: Instant) {
        for done in done {
            Stats::add(&self.site.stats.helper_reads, 1);
            Stats::add(&self.site.stats.helper_bytes, done.read);
            let waiting = self
                .conns
                .get_mut(done.conn)
                .and_then(Option::as_mut)
                .is_some_and(|c| {
                    u64::from(c.serial) == done.serial && c.disk_ready(done.offset, done.len, now)
                });
            if waiting {
                self.event(done.conn, false, false, now);
            }
        }
    }

    /// Password checks were made: the connections whose requests waited for them answer.
    fn checks_made(&mut self, now: Instant) {
        let mut list = std::mem::take(&mut self.waiting);
        list.retain(|&i| {
            self.conns
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(Conn::waits)
        });
        for &i in &list {
            if self.conns[i].as_ref().is_some_and(Conn::check_made) {
                self.event(i, false, false, now);
            }
        }
        list.retain(|&i| {
            self.conns
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(Conn::waits)
        });
        self.waiting.append(&mut list);
        self.waiting.sort_unstable();
        self.waiting.dedup();
    }

    /// Closes connection `idx`; responses it had not sent whole are logged as cut by
    /// `cut` (unless the connection knows a cause of its own) and counted.
    fn close(&mut self, idx: usize, how: After, cut: Cut) {
        if let Some(mut c) = self.conns[idx].take() {
            self.open -= 1;
            self.idle -= u64::from(c.counted_idle);
            let (log, stats) = (&mut self.log, &self.stats);
            let mut done = Done::default();
            let aborted = c.abort(cut, &mut |c, r, a| {
                write_access(log, stats, (c.peer, c.tls_protocol()), r, a, &mut done)
            });
            Stats::add(&self.site.stats.aborted, aborted);
            if c.tls_refused {
                Stats::add(&self.site.stats.tls_refused, 1);
            }
            if c.proxy_refused() {
                Stats::add(&self.site.stats.proxy_refused, 1);
            }
            if let Some(k) = c.tx_counters() {
                self.stats.add_tx(k);
            }
            if how == After::Reset {
                let _ = linerate_sys::fs::reset_on_close(c.sock.as_fd());
            }
            let token = token_of(&c);
            let _ = self.driver.close(token, c.into_socket().into());
            self.free.push(idx);
        }
    }

    fn tick(&mut self, now: Instant) {
        if let Some(d) = self.site.disk.as_mut() {
            d.epoch += 1;
        }
        // An endpoint handed over whose wake-up went astray is taken on by the tick.
        self.take_on_quic(now, self.ending);
        if self.site.draining() {
            // A stop's shutdown delay: an HTTP/2 connection that has served is told
            // GOAWAY (its streams taken are answered), at the first tick or, if it
            // opened since, at the tick after its first stream, as every HTTP/1.1
            // answer from now on says `Connection: close` (`Conn::process`), so clients
            // come back through the balancer, to an instance that is staying; the
            // listeners stay open.
            for (i, c) in self.conns.iter_mut().enumerate() {
                if let Some(c) = c.as_mut().filter(|c| c.http.is_two_serving()) {
                    c.http.finish_next();
                    if !c.on_run_list {
                        c.on_run_list = true;
                        self.runnable.push(i);
                    }
                }
            }
            // HTTP/3's connections likewise.
            if !self.quic.is_empty() {
                self.quic(None, now, QuicTurn::Drain);
            }
        }
        // What the ring accepted for a listener whose watch ended after the worker
        // last looked (a pause, a stop) is served within a tick.
        self.adopt_orphans(now);
        if let Some(r) = self.driver.ring() {
            // A ring quiet for a tick gives its receive buffers' pages back.
            let _ = r.release_idle();
            // The ring's accepts hold the descriptor limit of when they were armed; one
            // lowered (or raised) at run time, by `prlimit`, holds from the next tick.
            let limit = linerate_sys::fs::nofile_limit().ok();
            if limit != self.nofile {
                if self.nofile.is_some() {
                    if let Err(e) = r.limit_changed() {
                        tracing::warn!("arming the accepts again for a new descriptor limit: {e}");
                    }
                }
                self.nofile = limit;
            }
        }
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
            for (i, l) in self.listeners.iter().enumerate() {
                if let Some(l) = l {
                    let _ = self.driver.register(
                        l.sock.as_fd(),
                        Token::Listener(i).encode(),
                        Interest::Listener,
                    );
                }
            }
        }
        // The deadlines that came due: each looked at again, the connection cut if its
        // deadline passed, else armed for it (activity moved it later).
        let mut fired = std::mem::take(&mut self.fired);
        self.timers.expire(now, &mut fired);
        for (token, tick) in fired.drain(..) {
            let Token::Conn(i, _) = Token::decode(token) else {
                continue;
            };
            let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if token_of(c) != token || c.armed != Some(tick) {
                // Closed, or armed again since.
                continue;
            }
            c.judge_send_rate(now, self.cfg.min_send_rate, self.cfg.send_timeout);
            let d = deadline(c, &self.cfg, c.http.poll_timeout(&timeouts(&self.cfg)));
            if d.at > now {
                let at = d.at.min(after(now, self.check_every));
                c.armed = Some(self.timers.arm(token, at));
                continue;
            }
            c.armed = None;
            if let Some(k) = d.kind {
                Stats::add(&self.site.stats.timeouts[k], 1);
            }
            if !d.why.is_empty() {
                if let Some(n) = self.cut_log.allow(now) {
                    tracing::info!("closed a connection from {}: {}{}", c.peer, d.why, more(n));
                }
            }
            self.close(i, After::Close, d.cut);
        }
        self.fired = fired;
        Stats::set(&self.site.stats.open, self.open);
        Stats::set(&self.site.stats.idle, self.idle);
        Stats::add(&self.stats.log_lines_dropped, self.log.flush());
    }
}

#[cfg(test)]
mod token_tests {
    use super::Token;

    #[test]
    fn tokens_round_trip_and_a_slot_reused_gets_another_token() {
        for t in [
            Token::conn(0, 1),
            Token::conn(123_456, (1 << 40) + 77),
            Token::Listener(0),
            Token::Listener(31),
            Token::Notify(5),
            Token::Wake,
        ] {
            assert_eq!(Token::decode(t.encode()), t, "{t:?}");
        }
        assert_ne!(Token::conn(9, 100).encode(), Token::conn(9, 101).encode());
        // No connection's token is any other kind's.
        assert_ne!(
            Token::decode(Token::conn(u32::MAX as usize, u64::MAX).encode()),
            Token::Wake
        );
    }
}
