//! The operations a transmit hands out, and the readiness executor that makes them.
//!
//! A [`crate::Transmit`] makes no system call on the socket itself: it says what it
//! wants next ([`crate::Transmit::poll_op`] gives an [`Op`]), something makes that call,
//! and the transmit takes the result ([`crate::Transmit::complete`]). [`execute`] here
//! is the readiness executor: it makes the call at once on a non-blocking socket, as
//! an epoll loop does; a completion executor (io_uring) would submit the same
//! operation and complete it when its completion arrives. The memory an operation
//! names is borrowed from the transmit and stays put until the completion: the
//! transmit is not polled again, nor dropped, in between.
//!
//! `EINTR` and `EAGAIN` are the executor's business, not the strategy's: an
//! interrupted call is made again, and a would-block ends the turn with
//! [`crate::Progress::Blocked`]: the executor says so ([`crate::Transmit::would_block`],
//! which drops a free-space measurement made for it) and the next poll, on the next
//! writable event, asks for the operation again.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};

use linerate_sys::net::{self, SendFlags, SockOpt};
use linerate_sys::pipe::{self, SpliceFlags};
use linerate_sys::sendfile::sendfile;
use linerate_sys::zerocopy::{Pinned, ZeroCopy};

use crate::{TxError, TxSocket};

/// One system call's worth of work a transmit asks for.
#[derive(Debug)]
pub enum Op<'a> {
    /// `pread` of `buf.len()` bytes of `file` at `at` (the `copy` strategy).
    Read {
        /// The file.
        file: &'a File,
        /// Offset in the file.
        at: u64,
        /// Where the bytes go.
        buf: &'a mut [u8],
    },
    /// `send` of `data`, with `MSG_MORE` when `more`.
    Send {
        /// The bytes.
        data: &'a [u8],
        /// More of this response follows at once.
        more: bool,
    },
    /// `sendfile` of `len` bytes of `file` from `at`.
    Sendfile {
        /// The file.
        file: &'a File,
        /// Offset in the file.
        at: u64,
        /// Bytes asked for.
        len: usize,
    },
    /// `splice` of `len` bytes of `file` from `at` into the write end of a pipe.
    SpliceIn {
        /// The file.
        file: &'a File,
        /// Offset in the file.
        at: u64,
        /// The pipe's write end.
        pipe: BorrowedFd<'a>,
        /// Bytes asked for.
        len: usize,
    },
    /// `splice` of `len` bytes from the read end of a pipe onto the socket.
    SpliceOut {
        /// The pipe's read end.
        pipe: BorrowedFd<'a>,
        /// Bytes the pipe holds.
        len: usize,
        /// More of this response follows at once (`SPLICE_F_MORE`).
        more: bool,
    },
    /// `MSG_ZEROCOPY` send of `range` of `region`; the socket's tracker holds a handle
    /// to the region until the kernel's completion for it is read.
    SendZerocopy {
        /// The pinned memory.
        region: &'a Pinned,
        /// The bytes of it.
        range: Range<usize>,
        /// More follows at once.
        more: bool,
    },
    /// A plain, copying `send` of `range` of `region`.
    SendPinned {
        /// The memory.
        region: &'a Pinned,
        /// The bytes of it.
        range: Range<usize>,
        /// More follows at once.
        more: bool,
    },
    /// Bytes in the socket's send queue (`SIOCOUTQ`), for free-space sizing.
    QueuedBytes,
    /// The socket's `SO_SNDBUF`, which autotuning may have grown.
    SendBufferSize,
    /// Read the zero-copy completions waiting on the socket's error queue.
    Reap,
}

impl Op<'_> {
    /// A short name, for traces and test failures.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Read { .. } => "read",
            Op::Send { .. } => "send",
            Op::Sendfile { .. } => "sendfile",
            Op::SpliceIn { .. } => "splice-in",
            Op::SpliceOut { .. } => "splice-out",
            Op::SendZerocopy { .. } => "send-zerocopy",
            Op::SendPinned { .. } => "send-pinned",
            Op::QueuedBytes => "queued-bytes",
            Op::SendBufferSize => "send-buffer-size",
            Op::Reap => "reap",
        }
    }
}

/// What a transmit wants next.
#[derive(Debug)]
pub enum Next<'a> {
    /// This operation, then its result to [`crate::Transmit::complete`].
    Op(Op<'a>),
    /// Every byte was accepted by the socket.
    Done,
}

/// What a transmit says after taking a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Ask for the next operation.
    Continue,
    /// The socket is full although no call said `EAGAIN` (a short splice or zero-copy
    /// send): wait for it to be writable.
    Blocked,
}

fn flags(more: bool) -> SendFlags {
    if more {
        SendFlags::MORE
    } else {
        SendFlags::NONE
    }
}

/// Makes `op` on the non-blocking socket `fd` now, counting the call in `sock`. The
/// result is the call's, `EINTR` retried; [`Op::Reap`] reports its bytes as 0 and its
/// failure as the error it is.
pub fn execute(
    fd: BorrowedFd<'_>,
    sock: &mut TxSocket,
    op: &mut Op<'_>,
) -> Result<io::Result<usize>, TxError> {
    if let Op::Reap = op {
        // Counts its own error-queue reads.
        return sock.reap(fd).map(|()| Ok(0));
    }
    loop {
        sock.counters.syscalls += 1;
        let r = match op {
            Op::Read { file, at, buf } => std::os::unix::fs::FileExt::read_at(*file, buf, *at),
            Op::Send { data, more } => net::send(fd, data, flags(*more)),
            Op::Sendfile { file, at, len } => {
                let mut at = *at;
                sendfile(fd, file.as_fd(), &mut at, *len)
            }
            Op::SpliceIn {
                file,
                at,
                pipe: w,
                len,
            } => {
                let mut at = *at;
                pipe::splice(
                    file.as_fd(),
                    Some(&mut at),
                    *w,
                    None,
                    *len,
                    SpliceFlags::MOVE | SpliceFlags::NONBLOCK,
                )
            }
            Op::SpliceOut { pipe: r, len, more } => {
                let mut f = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
                if *more {
                    f = f | SpliceFlags::MORE;
                }
                pipe::splice(*r, None, fd, None, *len, f)
            }
            Op::SendZerocopy {
                region,
                range,
                more,
            } => match sock.zc.as_mut() {
                Some(zc) => zc.send(fd, region, range.clone(), flags(*more)),
                None => Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "zero-copy send on a socket without SO_ZEROCOPY",
                )),
            },
            Op::SendPinned {
                region,
                range,
                more,
            } => ZeroCopy::send_copy(fd, region, range.clone(), flags(*more)),
            Op::QueuedBytes => net::send_queue_bytes(fd),
            Op::SendBufferSize => {
                net::get_option(fd, SockOpt::SendBuffer).map(|n| n.max(0) as usize)
            }
            Op::Reap => unreachable!("reaped above"),
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                sock.counters.eagain += 1;
                return Ok(Err(e));
            }
            r => return Ok(r),
        }
    }
}
