//! The event-loop driver: the one interface between the workers and the kernel's
//! readiness (or completion) machinery. Two drivers behind the same trait: epoll, and
//! io_uring (`--driver uring`), which so far reports readiness with poll requests on
//! its ring (multishot for connections, one-shot armed again for the level-triggered
//! watches) while the connections make their calls as under epoll; sends and receives
//! submitted on the ring are the next step (docs/operations.md).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use linerate_sys::epoll::{self, Epoll};
use linerate_sys::uring::{Completion, PollRing, RingCounts};

/// What a registration is interested in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// A listening socket: readable means connections wait (level-triggered).
    Accept,
    /// A connection: readable, writable, errors and hang-ups (edge-triggered: the
    /// owner reads and writes until `EAGAIN`).
    Connection,
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
}

/// The event-loop driver.
pub trait Driver {
    /// Watches `fd` under `token`.
    fn register(&mut self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()>;
    /// Stops watching `fd`.
    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()>;
    /// Waits up to `timeout` and appends what is ready.
    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()>;
    /// What a ring did so far (the io_uring driver; None for epoll).
    fn ring_counts(&self) -> Option<RingCounts> {
        None
    }
    /// The descriptor watched under `token` was closed without being deregistered
    /// (epoll forgets it by itself; a ring's request would hold it open).
    fn closed(&mut self, _token: u64) -> io::Result<()> {
        Ok(())
    }
}

/// The epoll driver.
pub struct EpollDriver {
    ep: Epoll,
    raw: Vec<epoll::Event>,
}

impl EpollDriver {
    /// A driver reporting up to 256 events per wait.
    pub fn new() -> io::Result<EpollDriver> {
        Ok(EpollDriver {
            ep: Epoll::new(256)?,
            raw: Vec::with_capacity(256),
        })
    }
}

impl Driver for EpollDriver {
    fn register(&mut self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        let ev = match interest {
            Interest::Accept => epoll::IN,
            Interest::Connection => epoll::IN | epoll::OUT | epoll::RDHUP | epoll::ET,
        };
        self.ep.add(fd, token, ev)
    }

    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ep.delete(fd)
    }

    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()> {
        self.raw.clear();
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        self.ep.wait(&mut self.raw, ms)?;
        out.extend(self.raw.iter().map(|e| Ready {
            token: e.token,
            readable: e.events & (epoll::IN | epoll::RDHUP | epoll::HUP) != 0,
            hangup: e.events & (epoll::RDHUP | epoll::HUP) != 0,
            writable: e.events & (epoll::OUT | epoll::HUP) != 0,
            error: e.events & epoll::ERR != 0,
        }));
        Ok(())
    }
}

/// Which driver a worker runs: the setting (`--driver`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DriverChoice {
    /// io_uring when the kernel and the sandbox allow it, else epoll (with one line
    /// saying why).
    Auto,
    /// epoll.
    #[default]
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

/// A watch of the io_uring driver.
#[derive(Clone, Copy, Debug)]
struct Watch {
    token: u64,
    fd: RawFd,
    events: u32,
    /// Level-triggered: a one-shot poll armed again after each report.
    level: bool,
}

const POLLIN: u32 = 0x1;
const POLLOUT: u32 = 0x4;
const POLLERR: u32 = 0x8;
const POLLHUP: u32 = 0x10;
const POLLRDHUP: u32 = 0x2000;
const ECANCELED: i32 = 125;
const EBADF: i32 = 9;
const ENOENT: i32 = 2;

/// The io_uring driver: readiness from poll requests on a ring.
///
/// A descriptor closed without being deregistered (epoll forgets those by itself)
/// keeps its file open while its poll request lives; registering its token or its
/// number again ends that request. Each watch has its own tag, never reused, so a
/// report that arrives after its watch ended (the kernel may have posted it before the
/// removal) is dropped instead of reaching the next connection on the same token.
/// Reports of one watch within one wait are merged, so a worker sees one event per
/// registration per wait, as from epoll.
pub struct UringDriver {
    ring: PollRing,
    live: HashMap<u64, Watch>,
    by_fd: HashMap<RawFd, u64>,
    by_token: HashMap<u64, u64>,
    next_tag: u64,
    /// One-shot watches to arm again before the next wait.
    rearm: Vec<u64>,
    done: Vec<Completion>,
    /// Completions read outside `wait` (while a watch was ended), reported by the next.
    early: Vec<Completion>,
    /// Watches whose descriptor was found closed, ended before the next wait.
    ended_bad: Vec<u64>,
    /// Index in the caller's list of each tag reported in this wait.
    merged: HashMap<u64, usize>,
}

impl UringDriver {
    /// A driver on a ring of 256 entries, or why io_uring cannot serve here.
    pub fn new() -> io::Result<UringDriver> {
        Ok(UringDriver {
            ring: PollRing::new(256)?,
            live: HashMap::new(),
            by_fd: HashMap::new(),
            by_token: HashMap::new(),
            next_tag: 0,
            rearm: Vec::new(),
            done: Vec::new(),
            early: Vec::new(),
            ended_bad: Vec::new(),
            merged: HashMap::new(),
        })
    }

    /// Ends the watch tagged `tag`: its reports are dropped from now on, and its
    /// request is removed with the next submission.
    fn end(&mut self, tag: u64) -> io::Result<()> {
        if let Some(w) = self.live.remove(&tag) {
            if self.by_fd.get(&w.fd) == Some(&tag) {
                self.by_fd.remove(&w.fd);
            }
            if self.by_token.get(&w.token) == Some(&tag) {
                self.by_token.remove(&w.token);
            }
        }
        self.rearm.retain(|t| *t != tag);
        self.ring.poll_remove(tag)?;
        // Submitted and completed at once: the request holds its file open until its
        // cancellation is done, and the owner closes the descriptor next (a listener
        // must refuse connections from then on, a connection must send its FIN). One
        // call, as epoll_ctl is; what else completed waits for the next `wait`
        // (reports of ended watches are dropped now, so they do not cut its wait short).
        self.ring.wait(Duration::ZERO, &mut self.early)?;
        let live = &self.live;
        self.early.retain(|c| live.contains_key(&c.tag));
        Ok(())
    }
}

impl Driver for UringDriver {
    fn register(&mut self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        let (events, level) = match interest {
            Interest::Accept => (POLLIN, true),
            Interest::Connection => (POLLIN | POLLOUT | POLLRDHUP, false),
        };
        let fd = fd.as_raw_fd();
        // epoll forgets a descriptor when it is closed, and the workers rely on it: an
        // open-file cache closes its inotify instance and watches a new one under the
        // same token. So a token, or a descriptor number, registered again ends the
        // watch it had (the removal goes in before the new request).
        for old in [self.by_token.get(&token), self.by_fd.get(&fd)]
            .into_iter()
            .flatten()
            .copied()
            .collect::<Vec<_>>()
        {
            self.end(old)?;
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        self.live.insert(
            tag,
            Watch {
                token,
                fd,
                events,
                level,
            },
        );
        self.by_fd.insert(fd, tag);
        self.by_token.insert(token, tag);
        // Submitted now, while the descriptor is surely the one meant; a request that
        // cannot be is removed again behind it, never left to arm a later descriptor
        // with the same number.
        let armed = self.ring.poll_add(fd, events, tag, !level);
        if let Err(e) = armed.and_then(|()| self.ring.submit().map(|_| ())) {
            let _ = self.end(tag);
            return Err(e);
        }
        Ok(())
    }

    fn ring_counts(&self) -> Option<RingCounts> {
        Some(self.ring.counts())
    }

    fn closed(&mut self, token: u64) -> io::Result<()> {
        match self.by_token.get(&token) {
            Some(&tag) => self.end(tag),
            None => Ok(()),
        }
    }

    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let Some(&tag) = self.by_fd.get(&fd.as_raw_fd()) else {
            return Err(io::Error::from_raw_os_error(ENOENT));
        };
        self.end(tag)
    }

    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()> {
        // Nothing is added to `rearm` before the completions below: its buffer is
        // reused from wait to wait.
        let mut rearm = std::mem::take(&mut self.rearm);
        for &tag in &rearm {
            if let Some(w) = self.live.get(&tag) {
                self.ring.poll_add(w.fd, w.events, tag, !w.level)?;
            }
        }
        rearm.clear();
        self.rearm = rearm;
        for tag in std::mem::take(&mut self.ended_bad) {
            self.end(tag)?;
        }
        self.done.clear();
        self.done.append(&mut self.early);
        let timeout = if self.done.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        self.ring.wait(timeout, &mut self.done)?;
        self.merged.clear();
        for c in &self.done {
            let Some(w) = self.live.get(&c.tag) else {
                continue; // a watch that has ended
            };
            if c.result == -ECANCELED {
                continue;
            }
            if c.result == -EBADF {
                // The descriptor was closed under a live watch: reported once, as an
                // error, and never armed again.
                let token = w.token;
                self.ended_bad.push(c.tag);
                out.push(Ready {
                    token,
                    readable: true,
                    hangup: false,
                    writable: true,
                    error: true,
                });
                continue;
            }
            // A failed poll is reported as everything, so the owner's next call finds
            // out what is wrong.
            let ev = if c.result < 0 {
                POLLIN | POLLOUT | POLLERR
            } else {
                c.result as u32
            };
            let ready = Ready {
                token: w.token,
                readable: ev & (POLLIN | POLLRDHUP | POLLHUP) != 0,
                hangup: ev & (POLLRDHUP | POLLHUP) != 0,
                writable: ev & (POLLOUT | POLLHUP) != 0,
                error: ev & POLLERR != 0,
            };
            if w.level || !c.more {
                // One-shot, or a multishot poll the kernel ended: armed again.
                if !self.rearm.contains(&c.tag) {
                    self.rearm.push(c.tag);
                }
            }
            match self.merged.get(&c.tag) {
                Some(&i) => {
                    let r = &mut out[i];
                    r.readable |= ready.readable;
                    r.hangup |= ready.hangup;
                    r.writable |= ready.writable;
                    r.error |= ready.error;
                }
                None => {
                    self.merged.insert(c.tag, out.len());
                    out.push(ready);
                }
            }
        }
        Ok(())
    }
}

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
        for (name, mut d) in drivers() {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            a.set_nonblocking(true).unwrap();
            d.register(a.as_fd(), 5, Interest::Connection).unwrap();
            // Writable at once.
            let r = wait(d.as_mut(), 1_000);
            assert_eq!(r.len(), 1, "{name}: {r:?}");
            assert!(r[0].writable && !r[0].readable, "{name}: {r:?}");
            b.write_all(b"one").unwrap();
            b.write_all(b"two").unwrap();
            let r = wait(d.as_mut(), 1_000);
            assert_eq!(r.len(), 1, "{name}: one event for both writes: {r:?}");
            assert_eq!(r[0].token, 5);
            assert!(r[0].readable && !r[0].hangup, "{name}: {r:?}");
            drop(b);
            let r = wait(d.as_mut(), 1_000);
            assert!(r.iter().any(|e| e.token == 5 && e.hangup), "{name}: {r:?}");
            d.deregister(a.as_fd()).unwrap();
            assert!(wait(d.as_mut(), 20).is_empty(), "{name}");
        }
    }

    #[test]
    fn a_level_watch_reports_again_until_drained() {
        for (name, mut d) in drivers() {
            let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
            d.register(a.as_fd(), 1, Interest::Accept).unwrap();
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
        d.register(a.as_fd(), 4, Interest::Accept).unwrap();
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
        d.register(c.as_fd(), 6, Interest::Accept).unwrap();
        d.closed(6).unwrap();
        e.write_all(b"y").unwrap();
        assert!(wait(&mut d, 50).is_empty());
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
