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
}

impl<D: Driver> Worker<D> {
    /// HTTP/3 on the UDP sockets its HTTPS listeners carry, each watched readable.
    pub(super) fn with_quic(mut self) -> io::Result<Worker<D>> {
        let limits = self.site.limits();
        for l in self.listeners.iter().flatten() {
            let Some(tls) = &l.tls else {
                continue;
            };
            for (index, s) in &l.quic {
                let limits = std::rc::Rc::clone(&limits);
                let inbox = std::sync::Arc::clone(&self.inbox);
                let wake = Box::new(move || inbox.poke());
                let sock = s.try_clone()?;
                let q = crate::h3::Quic3::new(sock, *index, tls, limits, &self.cfg, wake)?;
                let token = Token::Quic(self.quic.len()).encode();
                self.driver
                    .register(q.sock.as_fd(), token, Interest::Datagram)?;
                self.quic.push(q);
            }
        }
        Ok(self)
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
        let mut out = |fd: BorrowedFd<'_>, b: &udp::Batch<'_>| {
            let sent = match driver.ring() {
                Some(ring) => ring.send_datagram(fd, b).map(|()| b.buf.len()),
                None => udp::send(fd, b),
            };
            if sent.is_ok() {
                let datagrams = match b.segment {
                    Some(s) if s > 0 => b.buf.len().div_ceil(usize::from(s)),
                    _ => 1,
                };
                Stats::add(&stats.h3_sends, 1);
                Stats::add(&stats.h3_datagrams_sent, datagrams as u64);
            }
            sent
        };
        for q in &mut self.quic[which] {
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
            }
            let r = q.take_receives();
            Stats::add(&stats.h3_receives, r.calls);
            Stats::add(&stats.h3_datagrams_received, r.datagrams);
            Stats::add(&stats.h3_bytes_received, r.bytes);
            Stats::add(&stats.h3_misrouted, r.misrouted);
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
