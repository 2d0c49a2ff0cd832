//! The event-loop driver: the one interface between a loop (a server worker, a load thread) and the kernel's
//! readiness and completion machinery. Two drivers behind the same trait: epoll, where
//! connections make their own calls when told they are ready, and io_uring
//! (`--driver uring`), which receives a connection's bytes into its provided buffers
//! and sends its gathers itself, one `io_uring_enter` per loop turn for all of them
//! (docs/design.md, "The event loop").

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use linerate_sys::op::Op;
use linerate_sys::uring::RingCounts;
use linerate_sys::zerocopy::ZeroCopy;
use linerate_sys::Errno;

/// What a registration is interested in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// Readable, level-triggered (the inotify and helper descriptors).
    Readable,
    /// A listening socket: connections are taken with [`Driver::accept`] once it is
    /// reported readable (level-triggered; the io_uring driver accepts them itself).
    Listener,
    /// A connection: readable, writable, errors and hang-ups (edge-triggered: the
    /// owner reads and writes until `EAGAIN`).
    Connection,
    /// A UDP socket (HTTP/3's): under epoll readable, level-triggered, and the owner
    /// reads it; under io_uring the ring receives its datagrams into buffers of its own
    /// (each an [`Io::Received`], read with [`Ring::datagram`]) and sends them
    /// ([`Ring::send_datagram`], each completion an [`Io::Sent`]).
    Datagram,
}

/// One readiness event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// The registration's token.
    pub token: u64,
    /// Readable (or the peer closed).
    pub readable: bool,
    /// The peer shut its side down (`EPOLLRDHUP`, `EPOLLHUP`): once what it sent before
    /// is read, nothing more comes. An edge-triggered socket may report this together
    /// with the data before it, and never again.
    pub hangup: bool,
    /// Writable.
    pub writable: bool,
    /// Error queue or socket error (zero-copy completions).
    pub error: bool,
    /// What the ring did for a connection (the io_uring driver), reported on its own.
    pub io: Io,
}

/// A connection's input or send that the ring completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Io {
    /// Readiness only.
    #[default]
    None,
    /// Bytes received into a buffer of the driver's: read them with
    /// [`Ring::input`], then give the buffer back with [`Ring::recycle`].
    Received { buffer: u16, len: u32 },
    /// The input ended: `Ok` when the peer closed, else the error.
    InputEnded(Result<(), Errno>),
    /// The send queued with [`Driver::execute`] (a gather on the ring) completed: bytes sent, or the error.
    Sent(Result<u32, Errno>),
}

/// What [`Driver::execute`] did with an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// Made now: its completion.
    Done(linerate_sys::op::Completion),
    /// On the ring: its completion comes as [`Io::Sent`].
    Pending,
}

/// The event-loop driver.
pub trait Driver {
    /// Watches `fd` under `token`.
    fn register(&mut self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()>;
    /// Stops watching `fd`.
    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()>;
    /// Waits up to `timeout` and appends what is ready.
    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()>;
    /// Makes `op` at once on the non-blocking socket `fd`, under either driver: what a
    /// connection sends best effort as it ends (a TLS alert, `close_notify`, the answer
    /// to plain HTTP on a TLS port, the shutdown), the kernel TLS hand-off, and a TLS
    /// session's records under epoll. A call that would block comes back as
    /// `Errno::AGAIN` ([`linerate_sys::exec::now`]).
    fn now(
        &mut self,
        fd: BorrowedFd<'_>,
        op: &mut Op<'_>,
        zc: Option<&mut ZeroCopy>,
    ) -> linerate_sys::op::Completion {
        linerate_sys::exec::now(fd, op, zc)
    }
    /// Runs one of a connection's output operations: this driver's executor. Under
    /// epoll every operation is made at once ([`linerate_sys::exec::now`]). Under io_uring a
    /// gather goes on the ring, which owns what it sends until its completion (a copy
    /// of owned bytes, a reference to shared ones) and reports it as [`Io::Sent`] under
    /// the connection's token, one in flight per connection; the rest is made at once.
    /// `zc` is the socket's zero-copy tracker, for the operations that need it.
    fn execute(
        &mut self,
        fd: BorrowedFd<'_>,
        op: &mut Op<'_>,
        zc: Option<&mut ZeroCopy>,
    ) -> Submitted {
        Submitted::Done(linerate_sys::exec::now(fd, op, zc))
    }
    /// A connection of the listener `fd` watched under `token`, or `WouldBlock` when
    /// none waits (`accept4`, under epoll).
    fn accept(&mut self, _token: u64, fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
        linerate_sys::fs::accept_nonblocking(fd)
    }
    /// Stops watching the connection `fd` (under `token`) and closes it.
    fn close(&mut self, _token: u64, fd: OwnedFd) -> io::Result<()> {
        let r = self.deregister(fd.as_fd());
        drop(fd);
        r
    }
    /// The ring's own operations, when this driver is a ring (io_uring): none under
    /// epoll.
    fn ring(&mut self) -> Option<&mut dyn Ring> {
        None
    }
    /// [`Driver::ring`], to read: connections' bytes are received and sent by the
    /// driver ([`Io`] events), not by the connections' own calls, when there is one.
    fn as_ring(&self) -> Option<&dyn Ring> {
        None
    }
}

/// What only a driver that receives and sends connections' bytes itself (io_uring)
/// does, apart from the trait every driver has ([`Driver::ring`]).
pub trait Ring {
    /// What the ring did so far.
    fn counts(&self) -> RingCounts;
    /// The descriptor watched under `token` was closed without being deregistered
    /// (epoll forgets it by itself; a ring's request would hold it open).
    fn closed(&mut self, token: u64) -> io::Result<()>;
    /// The first `len` bytes of a receive buffer ([`Io::Received`]).
    fn input(&self, buffer: u16, len: usize) -> &[u8];
    /// Gives a receive buffer back.
    fn recycle(&mut self, buffer: u16);
    /// The datagram (or GRO batch) in a receive buffer of a [`Interest::Datagram`]
    /// watch ([`Io::Received`]), with what the kernel said of it; none if it cannot be
    /// read (a sender of no IP family). Give the buffer back after.
    fn datagram(&self, buffer: u16, len: usize) -> Option<(linerate_sys::udp::Received, &[u8])>;
    /// Queues the batch in `bytes` (as `head` says) to be sent on the
    /// [`Interest::Datagram`] socket `fd`, the bytes taken, not copied: `bytes` is then
    /// a spare buffer of the ring's, empty. Its completion comes as [`Io::Sent`] under
    /// the socket's token, several in flight at once.
    fn send_datagram(
        &mut self,
        fd: BorrowedFd<'_>,
        head: linerate_sys::udp::Head,
        bytes: &mut Vec<u8>,
    ) -> io::Result<()>;
    /// A connection the driver accepted for a listener whose watch has ended since
    /// (the ring's accepts run ahead of the owner), with the token the listener was
    /// watched under: the owner serves it, as a closed one would be reset with its
    /// request unread.
    fn take_orphan(&mut self) -> Option<(u64, OwnedFd)>;
    /// Called once per tick: memory the ring holds only for bursts (its receive
    /// buffers) goes back to the system if it has been idle since the last call.
    fn release_idle(&mut self) -> io::Result<bool>;
    /// The process's descriptor limit changed: accepts the kernel armed under the old
    /// one are armed again (io_uring reads it when an accept is queued).
    fn limit_changed(&mut self) -> io::Result<()>;
    /// Whether the connection `fd` is to receive (a paused one leaves its bytes in the
    /// socket, so a client that will not read cannot fill our memory).
    fn set_input(&mut self, fd: BorrowedFd<'_>, on: bool) -> io::Result<()>;
}

/// Which driver a worker runs: the setting (`--driver`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DriverChoice {
    /// io_uring when the kernel and the sandbox allow it, else epoll (with one line
    /// saying why).
    #[default]
    Auto,
    /// epoll.
    Epoll,
    /// io_uring, or no start.
    Uring,
}

impl DriverChoice {
    /// The names `--driver` takes.
    pub const NAMES: [&'static str; 3] = ["auto", "epoll", "uring"];

    /// The driver to run: `Epoll` or `Uring`, after probing io_uring for `Auto` and
    /// `Uring`; for `Uring`, an error saying why io_uring cannot run.
    pub fn resolve(self) -> Result<DriverChoice, String> {
        match self {
            DriverChoice::Epoll => Ok(DriverChoice::Epoll),
            DriverChoice::Uring => UringDriver::new()
                .map(|_| DriverChoice::Uring)
                .map_err(|e| format!("--driver uring: io_uring cannot run here: {e}")),
            DriverChoice::Auto => match UringDriver::new() {
                Ok(_) => Ok(DriverChoice::Uring),
                Err(e) => {
                    tracing::warn!("driver auto: io_uring cannot run here ({e}); epoll instead");
                    Ok(DriverChoice::Epoll)
                }
            },
        }
    }
}

impl DriverChoice {
    /// Its name, as `--driver` takes it.
    pub fn name(self) -> &'static str {
        match self {
            DriverChoice::Auto => "auto",
            DriverChoice::Epoll => "epoll",
            DriverChoice::Uring => "uring",
        }
    }
}

impl std::fmt::Display for DriverChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DriverChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DriverChoice::Auto),
            "epoll" => Ok(DriverChoice::Epoll),
            "uring" => Ok(DriverChoice::Uring),
            _ => Err(format!("'{s}': expected auto, epoll or uring")),
        }
    }
}

mod epoll;
mod uring;

pub use epoll::EpollDriver;
pub use uring::UringDriver;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    /// Both drivers report the same things for the same sockets.
    fn drivers() -> Vec<(&'static str, Box<dyn Driver>)> {
        vec![
            ("epoll", Box::new(EpollDriver::new().unwrap())),
            ("uring", Box::new(UringDriver::new().unwrap())),
        ]
    }

    fn wait(d: &mut dyn Driver, ms: u64) -> Vec<Ready> {
        let mut out = Vec::new();
        d.wait(&mut out, Duration::from_millis(ms)).unwrap();
        out
    }

    #[test]
    fn a_connection_reports_data_once_per_wait_and_a_hang_up() {
        let mut d = EpollDriver::new().unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        d.register(a.as_fd(), 5, Interest::Connection).unwrap();
        // Writable at once.
        let r = wait(&mut d, 1_000);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].writable && !r[0].readable, "{r:?}");
        b.write_all(b"one").unwrap();
        b.write_all(b"two").unwrap();
        let r = wait(&mut d, 1_000);
        assert_eq!(r.len(), 1, "one event for both writes: {r:?}");
        assert_eq!(r[0].token, 5);
        assert!(r[0].readable && !r[0].hangup, "{r:?}");
        drop(b);
        let r = wait(&mut d, 1_000);
        assert!(r.iter().any(|e| e.token == 5 && e.hangup), "{r:?}");
        d.deregister(a.as_fd()).unwrap();
        assert!(wait(&mut d, 20).is_empty());
    }

    /// Waits until `f` has seen what it wants of the events (at most 5 s).
    fn wait_until(d: &mut dyn Driver, mut f: impl FnMut(&mut dyn Driver, &Ready) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            assert!(std::time::Instant::now() < deadline, "not seen");
            for e in wait(d, 100) {
                if f(d, &e) {
                    return;
                }
            }
        }
    }

    #[test]
    fn the_ring_receives_a_connections_bytes_pauses_and_reports_the_end() {
        let mut d = UringDriver::new().unwrap();
        assert!(d.as_ring().is_some());
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        d.register(a.as_fd(), 5, Interest::Connection).unwrap();
        let mut got = Vec::new();
        b.write_all(b"one").unwrap();
        b.write_all(b"two").unwrap();
        wait_until(&mut d, |d, e| {
            assert_eq!(e.token, 5);
            assert!(!e.readable, "no readiness for input: {e:?}");
            if let Io::Received { buffer, len } = e.io {
                let ring = d.ring().unwrap();
                got.extend_from_slice(ring.input(buffer, len as usize));
                ring.recycle(buffer);
            }
            got.len() == 6
        });
        assert_eq!(got, b"onetwo");
        // Paused: the bytes stay in the socket until the input is on again.
        d.ring().unwrap().set_input(a.as_fd(), false).unwrap();
        let _ = wait(&mut d, 20);
        b.write_all(b"three").unwrap();
        let r = wait(&mut d, 100);
        assert!(r.iter().all(|e| e.io == Io::None), "{r:?}");
        d.ring().unwrap().set_input(a.as_fd(), true).unwrap();
        got.clear();
        wait_until(&mut d, |d, e| {
            if let Io::Received { buffer, len } = e.io {
                let ring = d.ring().unwrap();
                got.extend_from_slice(ring.input(buffer, len as usize));
                ring.recycle(buffer);
            }
            got == b"three"
        });
        // A gather sent by the ring.
        let mut gather = Op::Gather {
            pieces: vec![linerate_sys::op::Piece {
                bytes: b"answer",
                shared: None,
            }],
            more: false,
        };
        assert_eq!(d.execute(a.as_fd(), &mut gather, None), Submitted::Pending);
        wait_until(&mut d, |_, e| e.io == Io::Sent(Ok(6)));
        let mut answer = [0u8; 6];
        std::io::Read::read_exact(&mut b, &mut answer).unwrap();
        assert_eq!(&answer, b"answer");
        drop(b);
        wait_until(&mut d, |_, e| e.io == Io::InputEnded(Ok(())));
        d.deregister(a.as_fd()).unwrap();
        assert!(wait(&mut d, 20).is_empty());
    }

    /// A UDP socket's watch: under epoll it is readable (the owner reads); under
    /// io_uring the ring receives each datagram into a buffer of its own, read with
    /// its sender and ECN bits, and sends the owner's batches, each completion under
    /// the socket's token.
    #[test]
    fn a_datagram_watch_receives_and_sends_on_the_ring_and_is_readable_under_epoll() {
        use linerate_sys::udp;
        for (name, mut d) in drivers() {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            sock.set_nonblocking(true).unwrap();
            udp::prepare(sock.as_fd(), false).unwrap();
            let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            d.register(sock.as_fd(), 11, Interest::Datagram).unwrap();
            peer.send_to(b"ping", sock.local_addr().unwrap()).unwrap();
            let mut got = None;
            wait_until(d.as_mut(), |d, e| {
                assert_eq!(e.token, 11, "{name}");
                match (e.io, d.ring()) {
                    (Io::Received { buffer, len }, Some(ring)) => {
                        let (r, bytes) = ring.datagram(buffer, len as usize).expect("read");
                        got = Some((r.from, bytes.to_vec()));
                        ring.recycle(buffer);
                    }
                    (Io::None, None) if e.readable => {
                        let mut buf = [0u8; 64];
                        let r = udp::recv(sock.as_fd(), &mut buf).unwrap();
                        got = Some((r.from, buf[..r.len].to_vec()));
                    }
                    (io, _) => panic!("{name}: {io:?}"),
                }
                true
            });
            assert_eq!(
                got,
                Some((peer.local_addr().unwrap(), b"ping".to_vec())),
                "{name}"
            );
            let head = udp::Head {
                to: peer.local_addr().unwrap(),
                from: None,
                ecn: 0,
                segment: None,
            };
            let mut bytes = b"pong".to_vec();
            match d.ring() {
                Some(ring) => {
                    ring.send_datagram(sock.as_fd(), head, &mut bytes).unwrap();
                    // The bytes taken, a spare buffer left.
                    assert!(bytes.is_empty(), "{name}");
                    wait_until(d.as_mut(), |_, e| e.token == 11 && e.io == Io::Sent(Ok(4)));
                }
                None => assert_eq!(udp::send(sock.as_fd(), &head.with(&bytes)).unwrap(), 4),
            }
            let mut buf = [0u8; 8];
            peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let (n, from) = peer.recv_from(&mut buf).unwrap();
            assert_eq!(
                (&buf[..n], from),
                (&b"pong"[..], sock.local_addr().unwrap()),
                "{name}"
            );
            d.deregister(sock.as_fd()).unwrap();
            peer.send_to(b"late", sock.local_addr().unwrap()).unwrap();
            assert!(wait(d.as_mut(), 50).is_empty(), "{name}: the watch ended");
        }
    }

    #[test]
    fn a_level_watch_reports_again_until_drained() {
        for (name, mut d) in drivers() {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            d.register(a.as_fd(), 1, Interest::Readable).unwrap();
            assert!(wait(d.as_mut(), 20).is_empty(), "{name}");
            b.write_all(b"x").unwrap();
            for _ in 0..3 {
                let r = wait(d.as_mut(), 1_000);
                assert_eq!(r.len(), 1, "{name}: still readable: {r:?}");
                assert!(r[0].readable);
            }
            let mut buf = [0u8; 8];
            std::io::Read::read(&mut &a, &mut buf).unwrap();
            assert!(wait(d.as_mut(), 20).is_empty(), "{name}: drained");
        }
    }

    #[test]
    fn a_report_for_an_ended_watch_never_reaches_the_token_reused() {
        let mut d = UringDriver::new().unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        d.register(a.as_fd(), 9, Interest::Connection).unwrap();
        wait(&mut d, 1_000);
        b.write_all(b"x").unwrap();
        drop(b);
        // The hang-up is reported before the wait that sees it ...
        std::thread::sleep(Duration::from_millis(20));
        d.deregister(a.as_fd()).unwrap();
        // ... and the token goes to a new, quiet connection.
        let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
        d.register(c.as_fd(), 9, Interest::Connection).unwrap();
        let r = wait(&mut d, 100);
        assert!(r.iter().all(|e| !e.hangup && !e.readable), "{r:?}");
    }

    #[test]
    fn a_level_watch_closed_under_it_is_reported_once_and_then_forgotten() {
        let mut d = UringDriver::new().unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        d.register(a.as_fd(), 4, Interest::Readable).unwrap();
        b.write_all(b"x").unwrap();
        assert_eq!(wait(&mut d, 1_000).len(), 1);
        // Closed without a word to the driver, as epoll allows: its next arming fails.
        drop(a);
        let r = wait(&mut d, 100);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].error && r[0].token == 4);
        for _ in 0..3 {
            assert!(wait(&mut d, 20).is_empty());
        }
        // And a watch the owner says is closed ends at once.
        let (c, mut e) = std::os::unix::net::UnixStream::pair().unwrap();
        d.register(c.as_fd(), 6, Interest::Readable).unwrap();
        d.ring().unwrap().closed(6).unwrap();
        e.write_all(b"y").unwrap();
        assert!(wait(&mut d, 50).is_empty());
    }

    #[test]
    fn a_listener_hands_over_its_connections_and_a_wait_reports_them_once() {
        for (name, mut d) in drivers() {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.set_nonblocking(true).unwrap();
            d.register(l.as_fd(), 3, Interest::Listener).unwrap();
            assert!(wait(d.as_mut(), 20).is_empty(), "{name}");
            let clients: Vec<_> = (0..3)
                .map(|_| std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap())
                .collect();
            let mut got = Vec::new();
            wait_until(d.as_mut(), |d, e| {
                assert_eq!((e.token, e.readable), (3, true), "{name}");
                loop {
                    match d.accept(3, l.as_fd()) {
                        Ok(fd) => got.push(std::net::TcpStream::from(fd)),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => panic!("{name}: {e}"),
                    }
                }
                got.len() == 3
            });
            for s in &got {
                let peer = s.peer_addr().unwrap();
                assert!(clients.iter().any(|c| c.local_addr().unwrap() == peer));
            }
            // Nothing more waits: no report (level-triggered, drained).
            assert!(wait(d.as_mut(), 50).is_empty(), "{name}");
            d.deregister(l.as_fd()).unwrap();
            drop(l);
            // Closed: a new connection is refused.
            assert!(std::net::TcpStream::connect(clients[0].peer_addr().unwrap()).is_err());
        }
    }

    /// Regression (issue 28): a listener's watch ended with connections its ring had
    /// accepted and not handed over; they were closed, resetting clients whose
    /// requests were on their way. They go to the owner as orphans, with the token.
    #[test]
    fn connections_accepted_ahead_of_an_ended_watch_are_handed_over_not_closed() {
        for (name, mut d) in drivers() {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.set_nonblocking(true).unwrap();
            d.register(l.as_fd(), 7, Interest::Listener).unwrap();
            let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            client.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
            // The wait reports the listener; nobody accepts before it ends.
            wait_until(d.as_mut(), |_, e| e.token == 7);
            d.deregister(l.as_fd()).unwrap();
            let mut took = Vec::new();
            while let Some((token, fd)) = d.ring().and_then(|r| r.take_orphan()) {
                took.push((token, std::net::TcpStream::from(fd)));
            }
            if name == "epoll" {
                // epoll accepts only when asked: the connection waits in the socket.
                assert!(took.is_empty(), "{name}");
                let fd = linerate_sys::fs::accept_nonblocking(l.as_fd()).unwrap();
                took.push((7, std::net::TcpStream::from(fd)));
            }
            assert_eq!(took.len(), 1, "{name}");
            assert_eq!(took[0].0, 7, "{name}");
            let mut got = [0u8; 32];
            let mut s = &took[0].1;
            s.set_nonblocking(false).unwrap();
            let n = std::io::Read::read(&mut s, &mut got).unwrap();
            assert_eq!(
                &got[..n],
                b"GET / HTTP/1.1\r\n\r\n",
                "{name}: the request is there"
            );
        }
    }

    #[test]
    fn a_connection_closed_just_before_the_driver_goes_is_closed() {
        // The ring closes it with the next submission; a driver dropped first (a worker
        // ending) still submits it.
        let mut d = UringDriver::new().unwrap();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        d.register(a.as_fd(), 8, Interest::Connection).unwrap();
        d.ring().unwrap().set_input(a.as_fd(), false).unwrap();
        let _ = wait(&mut d, 20);
        d.close(8, OwnedFd::from(a)).unwrap();
        drop(d);
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 8];
        // The ring's teardown runs as task work on this thread; a read with a timeout set
        // is then ended by EINTR instead of restarted (sock_intr_errno), so it is retried.
        let n = loop {
            match std::io::Read::read(&mut b, &mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r.unwrap(),
            }
        };
        assert_eq!(n, 0, "EOF");
    }

    #[test]
    fn driver_names_round_trip_and_bad_ones_are_refused() {
        for n in DriverChoice::NAMES {
            assert_eq!(n.parse::<DriverChoice>().unwrap().to_string(), n);
        }
        assert!("io_uring".parse::<DriverChoice>().is_err());
        assert_eq!(DriverChoice::Epoll.resolve().unwrap(), DriverChoice::Epoll);
        assert_eq!(DriverChoice::Uring.resolve().unwrap(), DriverChoice::Uring);
    }
}
