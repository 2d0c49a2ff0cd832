//! The epoll driver: readiness only; a connection makes its own calls when told.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use linerate_sys::epoll::{self, Epoll};

use super::{Driver, Interest, Io, Ready};

/// The epoll driver.
pub struct EpollDriver {
    ep: Epoll,
    raw: Vec<epoll::Event>,
}

impl EpollDriver {
    /// A driver reporting up to 256 events per wait.
    pub fn new() -> io::Result<EpollDriver> {
        EpollDriver::with_events(256)
    }

    /// A driver reporting up to `n` events per wait.
    pub fn with_events(n: usize) -> io::Result<EpollDriver> {
        Ok(EpollDriver {
            ep: Epoll::new(n)?,
            raw: Vec::with_capacity(n),
        })
    }
}

impl Driver for EpollDriver {
    fn register(&mut self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        let ev = match interest {
            Interest::Readable | Interest::Listener | Interest::Datagram => epoll::IN,
            Interest::Connection => epoll::IN | epoll::OUT | epoll::RDHUP | epoll::ET,
        };
        self.ep.add(fd, token, ev)
    }

    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ep.delete(fd)
    }

    fn close(&mut self, _token: u64, fd: OwnedFd) -> io::Result<()> {
        // The close takes the registration with it (epoll forgets a file when its last
        // descriptor goes, and a connection's is never duplicated): no `epoll_ctl` call
        // per connection.
        drop(fd);
        Ok(())
    }

    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()> {
        self.raw.clear();
        // Rounded up: a wait for a deadline less than a millisecond away must not spin.
        let ms = i32::try_from(timeout.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
        self.ep.wait(&mut self.raw, ms)?;
        out.extend(self.raw.iter().map(|e| Ready {
            token: e.token,
            readable: e.events & (epoll::IN | epoll::RDHUP | epoll::HUP) != 0,
            hangup: e.events & (epoll::RDHUP | epoll::HUP) != 0,
            writable: e.events & (epoll::OUT | epoll::HUP) != 0,
            error: e.events & epoll::ERR != 0,
            io: Io::None,
        }));
        Ok(())
    }
}
