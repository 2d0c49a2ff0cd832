//! Socket calls the standard library and `socket2` do not offer: sends that never raise
//! `SIGPIPE`, `MSG_MORE`, the send-queue fill (`SIOCOUTQ`) and integer
//! socket options such as `TCP_NOTSENT_LOWAT`.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::errno::Events;
use crate::{cvt, cvt_size};

/// Flags for [`send`] and [`sendv`]. `MSG_NOSIGNAL` is always added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendFlags(libc::c_int);

impl SendFlags {
    /// No extra flags.
    pub const NONE: SendFlags = SendFlags(0);
    /// `MSG_MORE`: more data follows; the kernel holds a partial segment back.
    pub const MORE: SendFlags = SendFlags(libc::MSG_MORE);
    /// `MSG_DONTWAIT`: do not block even on a blocking socket.
    pub const DONTWAIT: SendFlags = SendFlags(libc::MSG_DONTWAIT);

    /// Both sets of flags.
    pub const fn union(self, other: SendFlags) -> SendFlags {
        SendFlags(self.0 | other.0)
    }

    pub(crate) const fn bits(self) -> libc::c_int {
        self.0 | libc::MSG_NOSIGNAL
    }
}

/// `send(2)` with `MSG_NOSIGNAL`: a vanished peer gives `EPIPE`, never `SIGPIPE`.
pub fn send(fd: BorrowedFd<'_>, buf: &[u8], flags: SendFlags) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice for the call; the kernel copies from it before returning.
    cvt_size(unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags.bits()) })
}

/// `sendmsg(2)` of several buffers in one call (gather), with `MSG_NOSIGNAL`. At most
/// `IOV_MAX` buffers are passed; the rest are left for the next call.
pub fn sendv(fd: BorrowedFd<'_>, bufs: &[IoSlice<'_>], flags: SendFlags) -> io::Result<usize> {
    let n = bufs.len().min(IOV_MAX);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is guaranteed ABI-compatible with iovec on Unix.
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = n as _;
    // SAFETY: msg points at `n` live iovecs borrowed for the call; the kernel only reads them.
    cvt_size(unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, flags.bits()) })
}

/// Receives and throws away up to `scratch.len()` bytes without copying them
/// (`recv(2)` with `MSG_TRUNC | MSG_DONTWAIT`: on TCP the kernel frees the bytes and
/// never writes the buffer). Returns how many bytes were discarded; 0 means the peer
/// closed. A load generator that only counts response bodies pays no copy for them.
pub fn recv_discard(fd: BorrowedFd<'_>, scratch: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `scratch` is a live, writable slice of the length passed; whether or not the
    // kernel writes it (TCP with MSG_TRUNC does not), it stays within those bytes.
    cvt_size(unsafe {
        libc::recv(
            fd.as_raw_fd(),
            scratch.as_mut_ptr().cast(),
            scratch.len(),
            libc::MSG_TRUNC | libc::MSG_DONTWAIT,
        )
    })
}

/// The kernel's limit on buffers per `sendmsg`/`writev` (`UIO_MAXIOV`).
pub const IOV_MAX: usize = 1024;

/// Bytes in the socket's send queue, sent or not, not yet acknowledged (`SIOCOUTQ`).
pub fn send_queue_bytes(fd: BorrowedFd<'_>) -> io::Result<usize> {
    ioctl_int(fd, libc::TIOCOUTQ as _)
}

fn ioctl_int(fd: BorrowedFd<'_>, req: libc::Ioctl) -> io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: both requests write exactly one int through the pointer, a live local.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), req, &mut n) })?;
    Ok(n.max(0) as usize)
}

/// An integer socket option, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockOpt {
    /// `SO_SNDBUF` (the kernel reports twice what was set: it counts its own overhead).
    SendBuffer,
    /// `SO_RCVBUF`.
    ReceiveBuffer,
    /// `TCP_NOTSENT_LOWAT`: the socket reports writable only while fewer unsent bytes
    /// than this are queued, and a send stops queueing once that many are unsent.
    NotSentLowat,
    /// `TCP_CORK`: while set (1), partial segments are held until full or until it is
    /// cleared (0, which sends them at once), whatever `TCP_NODELAY` says.
    Cork,
    /// `SO_ZEROCOPY`: `MSG_ZEROCOPY` sends are allowed.
    ZeroCopy,
    /// `SO_INCOMING_CPU`: the CPU that processed the socket's last packet.
    IncomingCpu,
}

impl SockOpt {
    /// Its level and name.
    fn level_name(self) -> (libc::c_int, libc::c_int) {
        match self {
            SockOpt::SendBuffer => (libc::SOL_SOCKET, libc::SO_SNDBUF),
            SockOpt::ReceiveBuffer => (libc::SOL_SOCKET, libc::SO_RCVBUF),
            SockOpt::NotSentLowat => (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT),
            SockOpt::Cork => (libc::IPPROTO_TCP, libc::TCP_CORK),
            SockOpt::ZeroCopy => (libc::SOL_SOCKET, libc::SO_ZEROCOPY),
            SockOpt::IncomingCpu => (libc::SOL_SOCKET, libc::SO_INCOMING_CPU),
        }
    }
}

/// Reads an integer socket option.
pub fn get_option(fd: BorrowedFd<'_>, opt: SockOpt) -> io::Result<i32> {
    let (level, name) = opt.level_name();
    get_int(fd, level, name)
}

/// Reads an integer socket option by its level and name.
pub(crate) fn get_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live locals sized for an int option.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// Bytes of this TCP connection's output the peer has acknowledged so far
/// (`TCP_INFO`'s `tcpi_bytes_acked`, Linux 4.1 and later): what it really took, over
/// TLS or not, whatever sent it. An error where the socket is not TCP, or the kernel's
/// `tcp_info` is too short to have it.
pub fn tcp_bytes_acked(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // The kernel's struct tcp_info: 8 one-byte fields, 24 four-byte ones, then the
    // pacing rates (two u64) and tcpi_bytes_acked, at byte 120.
    const BYTES_ACKED: usize = 120;
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: `info` and `len` are live locals; the kernel writes at most `len` bytes
    // and says how many.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    let field = info
        .get(BYTES_ACKED..BYTES_ACKED + 8)
        .filter(|_| len as usize >= BYTES_ACKED + 8)
        .ok_or_else(|| io::Error::other("tcp_info has no tcpi_bytes_acked"))?;
    let mut b = [0u8; 8];
    b.copy_from_slice(field);
    Ok(u64::from_ne_bytes(b))
}

/// `shutdown(SHUT_WR)`: ends our side of the connection (a FIN after what is queued).
pub fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the descriptor is borrowed for the call; no memory is passed.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) })?;
    Ok(())
}

/// `setsockopt(IPPROTO_TCP, TCP_ULP, name)`: attaches an upper-layer protocol ("tls",
/// kernel TLS) to an established TCP socket. `ENOENT` when the kernel has no such
/// protocol.
pub fn set_tcp_ulp(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    // SAFETY: the kernel reads `name.len()` bytes from a live string slice.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Sets an integer socket option.
pub fn set_option(fd: BorrowedFd<'_>, opt: SockOpt, value: i32) -> io::Result<()> {
    let (level, name) = opt.level_name();
    set_int(fd, level, name, value)
}

/// Sets an integer socket option by its level and name.
pub(crate) fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the kernel reads one int from a live local.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Waits up to `timeout_ms` (negative: forever) for any of `events` (`POLLIN`, `POLLOUT`)
/// on one descriptor; returns the events the kernel reported (0 on timeout; `POLLERR` and
/// `POLLHUP` are always reported). `EINTR` is returned as 0 so callers re-check their state.
pub fn poll_one(fd: BorrowedFd<'_>, events: Events, timeout_ms: i32) -> io::Result<Events> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: events.bits() as i16,
        revents: 0,
    };
    // SAFETY: one live pollfd, count 1.
    match cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) }) {
        Ok(_) => Ok(Events::from_bits(pfd.revents as u16 as u32)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Events::NONE),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_acked_counts_what_the_peer_took() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let before = super::tcp_bytes_acked(s.as_fd()).unwrap();
        s.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        c.read_exact(&mut got).unwrap();
        // The last ACK may still be on its way.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while super::tcp_bytes_acked(s.as_fd()).unwrap() < before + 100_000 {
            assert!(std::time::Instant::now() < until, "not all acknowledged");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let u = std::os::unix::net::UnixStream::pair().unwrap().0;
        assert!(super::tcp_bytes_acked(u.as_fd()).is_err());
    }
}
