//! The worker's HTTP/3: a [`Quic3`](crate::h3::Quic3) per UDP socket its HTTPS
//! listeners carry, watched readable under the worker's driver, served in the worker's
//! loop with the same site and access log as its TCP connections.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use linerate_event::{Driver, Interest, Io};
use linerate_sys::udp;

use super::{Token, Worker};
use crate::access_log::{write_access, Done};
use crate::conn::Aborted;
use crate::listen::Peer;
use crate::response::Response;
use crate::stats::Stats;

/// Why an HTTP/3 socket is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum QuicTurn {
    /// It is readable.
    Readable,
    /// A connection's timer is due.
    Tick,
    /// Password checks were made.
    Serve,
    /// A stop or reload began.
    GoAway,
    /// A stop's shutdown delay: GOAWAY on the connections answered.
    Drain,
    /// The stop's deadline came.
    CloseAll,
    /// A reload began: each endpoint is handed to the next generation's worker.
    HandOver,
}

/// An HTTP/3 socket whose endpoint the generation before still holds: taken on when
/// it is handed over ([`crate::h3::claim`]).
pub(super) struct Awaiting {
    sock: socket2::Socket,
    index: u8,
    tls: std::sync::Arc<rustls::ServerConfig>,
    inode: u64,
    ticket: u64,
}

impl<D: Driver> Worker<D> {
    /// HTTP/3 on the UDP sockets its HTTPS listeners carry, each watched readable; a
    /// socket whose endpoint the generation before holds (a reload) waits for it.
    pub(super) fn with_quic(mut self) -> io::Result<Worker<D>> {
        let mut socks = Vec::new();
        for l in self.listeners.iter().flatten() {
            let Some(tls) = &l.tls else {
                continue;
            };
            for (index, s) in &l.quic {
                socks.push((s.try_clone()?, *index, std::sync::Arc::clone(tls)));
            }
        }
        for (sock, index, tls) in socks {
            let inode = crate::h3::socket_inode(&sock)?;
            match crate::h3::want(inode, self.wake()) {
                Some(ticket) => self.awaiting.push(Awaiting {
                    sock,
                    index,
                    tls,
                    inode,
                    ticket,
                }),
                None => self.start_quic(sock, inode, index, &tls, None)?,
            }
        }
        Ok(self)
    }

    /// What wakes this worker from another thread.
    fn wake(&self) -> crate::quic::Wake {
        let inbox = std::sync::Arc::clone(&self.inbox);
        Box::new(move || inbox.poke())
    }

    /// HTTP/3 on `sock`: a new endpoint, or the one `handed` over by the generation
    /// before; watched readable.
    fn start_quic(
        &mut self,
        sock: socket2::Socket,
        inode: u64,
        index: u8,
        tls: &rustls::ServerConfig,
        handed: Option<Box<crate::h3::Handed>>,
    ) -> io::Result<()> {
        let limits = *self.site.limits();
        let wake = self.wake();
        let q = match handed {
            None => crate::h3::Quic3::new(sock, inode, index, tls, limits, &self.cfg, wake)?,
            Some(h) => crate::h3::Quic3::take_on(h, sock, inode, tls, limits, &self.cfg, wake)?,
        };
        let token = Token::Quic(self.quic.len()).encode();
        self.driver
            .register(q.sock.as_fd(), token, Interest::Datagram)?;
        self.quic.push(q);
        Ok(())
    }

    /// Takes on the endpoints handed over (or starts its own where the generation
    /// before declined); with `ending`, no longer waits for those not handed yet.
    pub(super) fn take_on_quic(&mut self, now: Instant, ending: bool) {
        if self.awaiting.is_empty() {
            return;
        }
        let mut started = false;
        for a in std::mem::take(&mut self.awaiting) {
            let handed = match crate::h3::claim(a.inode, a.ticket) {
                crate::h3::Claim::Given(h) => Some(h),
                crate::h3::Claim::Fresh if !ending => None,
                crate::h3::Claim::Wait if !ending => {
                    self.awaiting.push(a);
                    continue;
                }
                crate::h3::Claim::Wait => match crate::h3::withdraw(a.inode, a.ticket) {
                    Some(h) => Some(h),
                    None => continue,
                },
                crate::h3::Claim::Fresh | crate::h3::Claim::Superseded => continue,
            };
            if let Err(e) = self.start_quic(a.sock, a.inode, a.index, &a.tls, handed) {
                tracing::error!("http3: taking the socket on after a reload: {e}");
            }
            started = true;
        }
        if started {
            self.quic(None, now, QuicTurn::Serve);
        }
    }

    /// A stop or reload begins. At a reload, each endpoint goes to the next
    /// generation's worker with its connections; at a stop (or where it cannot be
    /// handed over), no new connection, GOAWAY on each, closed once its answers are
    /// done.
    pub(super) fn quic_shutdown(&mut self, gently: bool, now: Instant) {
        self.take_on_quic(now, true);
        let turn = if gently {
            QuicTurn::HandOver
        } else {
            QuicTurn::GoAway
        };
        self.quic(None, now, turn);
    }

    /// Whether HTTP/3 lets the worker end: no connection open, and no endpoint still
    /// waiting to be handed to the next generation (one with nothing open is handed
    /// over all the same, so that the next worker need not wait for it).
    pub(super) fn quic_done(&self) -> bool {
        self.quic.iter().all(|q| q.open() == 0 && !q.handing())
    }

    /// HTTP/3's turn, of socket `i` or (none) of every one: what it received, its
    /// connections' timers, the requests whose password checks were made, a stop
    /// (GOAWAY), or the stop's deadline (every connection closed, its answers cut).
    pub(super) fn quic(&mut self, i: Option<usize>, now: Instant, turn: QuicTurn) {
        let (log, stats) = (&mut self.log, &self.stats);
        let mut done = Done::default();
        let mut write_log =
            |peer: (Peer, Option<&'static str>), r: &Response, a: Option<Aborted>| {
                write_access(log, stats, peer, r, a, &mut done)
            };
        let which = match i {
            Some(i) => i..(i + 1).min(self.quic.len()),
            None => 0..self.quic.len(),
        };
        let site = &mut self.site;
        let driver = &mut self.driver;
        // Each send counted with its datagrams: a GSO batch is several (seed 000's
        // one call for as much as the socket takes, on UDP).
        let mut out = |fd: BorrowedFd<'_>, h: udp::Head, bytes: &mut Vec<u8>| {
            let len = bytes.len();
            let sent = match driver.ring() {
                Some(ring) => ring.send_datagram(fd, h, bytes).map(|()| len),
                None => udp::send(fd, &h.with(bytes)),
            };
            if sent.is_ok() {
                let datagrams = match h.segment {
                    Some(s) if s > 0 => len.div_ceil(usize::from(s)),
                    _ => 1,
                };
                Stats::add(&stats.h3_sends, 1);
                Stats::add(&stats.h3_datagrams_sent, datagrams as u64);
            }
            sent
        };
        let mut spent = Vec::new();
        let first = which.start;
        for (k, q) in (first..).zip(&mut self.quic[which]) {
            let log = &mut write_log;
            match turn {
                QuicTurn::Readable => q.readable(now, site, log, &mut out),
                QuicTurn::Tick => q.tick(now, site, log, &mut out),
                QuicTurn::Serve => q.serve(now, site, log, &mut out),
                QuicTurn::GoAway => {
                    q.go_away();
                    q.serve(now, site, log, &mut out);
                }
                QuicTurn::Drain => {
                    q.drain();
                    q.serve(now, site, log, &mut out);
                }
                QuicTurn::CloseAll => {
                    q.close_all(now, log);
                    q.serve(now, site, log, &mut out);
                }
                QuicTurn::HandOver => {
                    q.hand_over(now);
                    q.serve(now, site, log, &mut out);
                }
            }
            if q.take_spent() {
                spent.push(k);
            }
            let r = q.take_receives();
            Stats::add(&stats.h3_receives, r.calls);
            Stats::add(&stats.h3_datagrams_received, r.datagrams);
            Stats::add(&stats.h3_bytes_received, r.bytes);
            Stats::add(&stats.h3_misrouted, r.misrouted);
        }
        // Handed on: its watch ends (what the ring reported of it before that is
        // handed on to the owner too).
        for k in spent {
            let _ = self.driver.deregister(self.quic[k].sock.as_fd());
        }
    }

    /// What the ring did for HTTP/3 socket `i`: a datagram received (handed to QUIC,
    /// served at the turn's end, [`Worker::quic_served`]) or a send completed.
    pub(super) fn quic_io(&mut self, i: usize, io: Io, now: Instant) {
        let Some(ring) = self.driver.ring() else {
            return;
        };
        match io {
            Io::Received { buffer, len } => {
                if let (Some(q), Some((r, payload))) =
                    (self.quic.get_mut(i), ring.datagram(buffer, len as usize))
                {
                    q.received(now, &r, payload);
                    if !self.quic_received.contains(&i) {
                        self.quic_received.push(i);
                    }
                }
                ring.recycle(buffer);
            }
            Io::Sent(r) => {
                if let Some(q) = self.quic.get_mut(i) {
                    q.sent(r);
                }
            }
            Io::InputEnded(_) | Io::None => {}
        }
    }

    /// Serves the HTTP/3 sockets the ring received datagrams for in this turn, once
    /// each.
    pub(super) fn quic_served(&mut self, now: Instant) {
        for i in std::mem::take(&mut self.quic_received) {
            self.quic(Some(i), now, QuicTurn::Serve);
        }
    }

    /// When HTTP/3 wants the worker awake: its connections' next timer, or at once
    /// (a millisecond) when a send would block.
    pub(super) fn quic_due(&mut self) -> Option<Instant> {
        self.quic
            .iter_mut()
            .filter_map(|q| {
                let soon = q.blocked.then(|| Instant::now() + Duration::from_millis(1));
                q.next_timeout().into_iter().chain(soon).min()
            })
            .min()
    }

    /// Serves the HTTP/3 sockets whose timers are due or whose send would block.
    pub(super) fn quic_timers(&mut self, now: Instant) {
        for i in 0..self.quic.len() {
            let q = &mut self.quic[i];
            if q.blocked || q.next_timeout().is_some_and(|t| t <= now) {
                self.quic(Some(i), now, QuicTurn::Tick);
            }
        }
    }
}
