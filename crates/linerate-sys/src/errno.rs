//! The kernel's numbers the layers above compare with, as typed values: an error
//! ([`Errno`], as a `-errno` completion or `raw_os_error` carries it) and poll event
//! bits ([`Events`]), taken from `libc` so that no crate above types one by hand.

use std::io;

/// A system error number, by name.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(i32);

impl Errno {
    /// `EPIPE`: the peer closed and we wrote.
    pub const PIPE: Errno = Errno(libc::EPIPE);
    /// `ECONNRESET`: the peer reset the connection.
    pub const CONNRESET: Errno = Errno(libc::ECONNRESET);
    /// `ENOTCONN`: the socket is not connected (any more).
    pub const NOTCONN: Errno = Errno(libc::ENOTCONN);
    /// `EFAULT`: a bad address (a mapped file that shrank).
    pub const FAULT: Errno = Errno(libc::EFAULT);
    /// `ENOBUFS`: out of buffers (zero-copy's page limit; a ring's buffer group empty).
    pub const NOBUFS: Errno = Errno(libc::ENOBUFS);
    /// `ECANCELED`: a ring request was cancelled.
    pub const CANCELED: Errno = Errno(libc::ECANCELED);
    /// `EBADF`: not an open descriptor.
    pub const BADF: Errno = Errno(libc::EBADF);
    /// `ENOENT`: nothing of that name.
    pub const NOENT: Errno = Errno(libc::ENOENT);
    /// `ENXIO`: a FIFO with no reader.
    pub const NXIO: Errno = Errno(libc::ENXIO);
    /// `EINPROGRESS`: a non-blocking `connect` has started.
    pub const INPROGRESS: Errno = Errno(libc::EINPROGRESS);
    /// `EAGAIN`: would block.
    pub const AGAIN: Errno = Errno(libc::EAGAIN);
    /// `EINTR`: interrupted by a signal.
    pub const INTR: Errno = Errno(libc::EINTR);
    /// `EINVAL`: an invalid argument.
    pub const INVAL: Errno = Errno(libc::EINVAL);
    /// `EOPNOTSUPP`: not supported here (`RWF_NOWAIT` on tmpfs).
    pub const OPNOTSUPP: Errno = Errno(libc::EOPNOTSUPP);
    /// `EIO`: an I/O error.
    pub const IO: Errno = Errno(libc::EIO);

    /// The error an `io::Error` carries, if it came from the kernel.
    pub fn of(e: &io::Error) -> Option<Errno> {
        e.raw_os_error().map(Errno)
    }

    /// The error an `io::Error` stands for: the kernel's number, or for one made in
    /// user space the nearest (`EINVAL` for a bad argument, `EAGAIN` for would-block,
    /// else `EIO`).
    pub fn from_io(e: &io::Error) -> Errno {
        match Errno::of(e) {
            Some(n) => n,
            None => match e.kind() {
                io::ErrorKind::InvalidInput => Errno::INVAL,
                io::ErrorKind::WouldBlock => Errno::AGAIN,
                _ => Errno::IO,
            },
        }
    }

    /// Whether `e` is this error.
    pub fn is(self, e: &io::Error) -> bool {
        e.raw_os_error() == Some(self.0)
    }

    /// A ring completion's result (`-errno` when negative) as bytes or an error.
    pub fn result(res: i32) -> Result<u32, Errno> {
        if res < 0 {
            Err(Errno(-res))
        } else {
            Ok(res as u32)
        }
    }

    /// The `io::Error` of this number.
    pub fn io(self) -> io::Error {
        io::Error::from_raw_os_error(self.0)
    }

    /// The number, for a log line.
    pub fn raw(self) -> i32 {
        self.0
    }
}

impl From<Errno> for io::Error {
    fn from(e: Errno) -> io::Error {
        e.io()
    }
}

impl std::fmt::Debug for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Errno({}: {})", self.0, self.io())
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.io().fmt(f)
    }
}

/// Poll event bits, as `poll(2)` and a ring's poll request report them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events(u32);

impl Events {
    /// None.
    pub const NONE: Events = Events(0);
    /// `POLLIN`: readable.
    pub const IN: Events = Events(libc::POLLIN as u32);
    /// `POLLOUT`: writable.
    pub const OUT: Events = Events(libc::POLLOUT as u32);
    /// `POLLERR`: for a zero-copy socket, also "completions wait on the error queue".
    pub const ERR: Events = Events(libc::POLLERR as u32);
    /// `POLLHUP`: hung up.
    pub const HUP: Events = Events(libc::POLLHUP as u32);
    /// `POLLRDHUP`: the peer shut its side down.
    pub const RDHUP: Events = Events(libc::POLLRDHUP as u32);

    /// Both sets.
    pub const fn union(self, other: Events) -> Events {
        Events(self.0 | other.0)
    }

    /// Whether any of `other` is set.
    pub const fn any(self, other: Events) -> bool {
        self.0 & other.0 != 0
    }

    /// The bits a kernel result carries.
    pub const fn from_bits(bits: u32) -> Events {
        Events(bits)
    }

    /// The bits, as the kernel takes them.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for Events {
    type Output = Events;
    fn bitor(self, other: Events) -> Events {
        self.union(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_result_is_bytes_or_a_named_error() {
        assert_eq!(Errno::result(14), Ok(14));
        assert_eq!(Errno::result(-libc::ECANCELED), Err(Errno::CANCELED));
        assert!(Errno::PIPE.is(&io::Error::from_raw_os_error(libc::EPIPE)));
        assert_eq!(
            Errno::of(&io::Error::from(Errno::NOBUFS)),
            Some(Errno::NOBUFS)
        );
        assert!((Events::IN | Events::HUP).any(Events::HUP));
        assert!(!Events::IN.any(Events::OUT));
    }
}
