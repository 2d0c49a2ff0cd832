//! epoll: the readiness source of the server's first event-loop driver.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::cvt;

/// Readable.
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// Error (for zero-copy sockets: completions are waiting).
pub const ERR: u32 = libc::EPOLLERR as u32;
/// Hang-up.
pub const HUP: u32 = libc::EPOLLHUP as u32;
/// The peer shut down its writing side.
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
/// Edge-triggered.
pub const ET: u32 = libc::EPOLLET as u32;

/// One readiness event: the token given at registration and the events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// The registration's token.
    pub token: u64,
    /// `IN`, `OUT`, `ERR`, `HUP`, `RDHUP` bits.
    pub events: u32,
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new instance that reports at most `capacity` events per wait.
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: the descriptor is new and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll {
            fd,
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: BorrowedFd<'_>, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a live event the kernel reads (and ignores for DEL).
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd.as_raw_fd(), &mut ev) })?;
        Ok(())
    }

    /// Watches `fd` for `events` under `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Changes what `fd` is watched for.
    pub fn modify(&self, fd: BorrowedFd<'_>, token: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, events)
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (negative: forever) and appends the events to `out`.
    /// `EINTR` is an empty wait.
    pub fn wait(&mut self, out: &mut Vec<Event>, timeout_ms: i32) -> io::Result<()> {
        // SAFETY: buf has buf.len() writable events; the kernel fills at most that many.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr(),
                self.buf.len() as libc::c_int,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for ev in &self.buf[..n as usize] {
            out.push(Event {
                token: ev.u64,
                events: ev.events,
            });
        }
        Ok(())
    }
}
