//! The event-loop driver: the one interface between the workers and the kernel's
//! readiness (or completion) machinery. epoll now; io_uring is to come behind the same
//! trait with no change above it.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use linerate_sys::epoll::{self, Epoll};

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
