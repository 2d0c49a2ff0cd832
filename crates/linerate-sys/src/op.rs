//! The one vocabulary of what a connection's output asks of the kernel: each [`Op`] is
//! one call's worth of work on a socket, as data. The producers (the transmit
//! strategies of `linerate-tx`, the server's output queue) only hand these out and take
//! a [`Completion`]; an executor of `linerate-event` makes the call (readiness: at once,
//! on a writable socket) or submits it (completion: on the ring). Nothing here makes a
//! call.
//!
//! The memory an operation names is borrowed from its producer and stays put until the
//! completion: the producer is not polled again, nor dropped, in between. Files and
//! pipes are named by `Arc`, shared buffers by `Arc<[u8]>`, so an executor that must
//! own what an operation names until the kernel is done with it (the ring, whose
//! requests can outlive a connection cut meanwhile) takes a reference, not a copy.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use crate::errno::Errno;
use crate::ktls::{Direction, Keys};
use crate::net::SockOpt;
use crate::pipe::Pipe;
use crate::zerocopy::{Mmap, Pinned};

/// What an operation gave back: bytes moved (or the value it measured), or the error.
/// `EINTR` never comes back (the executor calls again); `EAGAIN` does
/// ([`Errno::AGAIN`]): the socket is full, and the producer is told with its
/// `would_block`.
pub type Completion = Result<usize, Errno>;

/// One buffer of a gather: its bytes, and the shared buffer they lie in (a cached
/// file's contents) with their offset there, so that an executor that must own what
/// it sends until the kernel is done (the ring) can hold a reference instead of a copy.
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// The shared buffer they lie in, and where.
    pub shared: Option<(&'a Arc<[u8]>, usize)>,
}

/// One call's worth of work on a connection's socket.
#[derive(Debug)]
pub enum Op<'a> {
    /// `sendmsg` of these buffers (at most `IOV_MAX`), with `MSG_MORE` when `more`.
    Gather {
        /// The buffers, in order.
        pieces: Vec<Piece<'a>>,
        /// More of this response follows at once (a file part).
        more: bool,
    },
    /// `send` of `data`, with `MSG_MORE` when `more`.
    Send {
        /// The bytes.
        data: &'a [u8],
        /// More of this response follows at once.
        more: bool,
    },
    /// `pread` of `buf.len()` bytes of `file` at `at` (the `copy` strategy, a
    /// collapse); with `nowait`, from the page cache only (`RWF_NOWAIT`: `EAGAIN` when
    /// a page is not there, `EOPNOTSUPP` where the file system cannot say).
    Read {
        /// The file.
        file: &'a Arc<File>,
        /// Offset in the file.
        at: u64,
        /// Where the bytes go.
        buf: &'a mut [u8],
        /// Only what is in the page cache.
        nowait: bool,
    },
    /// Whether `len` bytes of `file` from `at` are all in the page cache (`cachestat`):
    /// completes with 1 if they are, 0 if not (`ENOSYS` before Linux 6.5).
    Probe {
        /// The file.
        file: &'a Arc<File>,
        /// Offset in the file.
        at: u64,
        /// Bytes asked about.
        len: u64,
    },
    /// A pipe for a splice into `slot`: one of the thread's spares, or a new one asked
    /// to hold `capacity` bytes; completes with 0.
    Pipe {
        /// Where the pipe goes.
        slot: &'a mut Option<Arc<Pipe>>,
        /// Bytes it is asked to hold.
        capacity: usize,
    },
    /// Maps `len` bytes of `file` from `at` (a page boundary) for zero-copy sends, into
    /// `slot`, no further than the file's end now (the bytes of a mapping past it would
    /// read as zeros): completes with the bytes mapped, 0 when the file ends at or
    /// before `at`.
    Map {
        /// The file.
        file: &'a Arc<File>,
        /// Offset in the file, a multiple of the page size.
        at: u64,
        /// Bytes asked for.
        len: usize,
        /// Where the mapping goes.
        slot: &'a mut Option<Mmap>,
    },
    /// The size of `file` now (`fstat`), as a transmit that found it shorter reports it.
    FileSize {
        /// The file.
        file: &'a Arc<File>,
    },
    /// Ends our side of the connection (`shutdown(SHUT_WR)`: a FIN after what is queued).
    Shutdown,
    /// The close_notify alert on a socket whose TLS records the kernel seals.
    CloseNotify,
    /// Attaches kernel TLS to the socket (`TCP_ULP` "tls"), before its keys.
    KernelTls,
    /// Gives one direction's TLS keys to a socket with kernel TLS attached.
    TlsKeys {
        /// Which records they seal or open.
        direction: Direction,
        /// The keys (with the record sequence number to start from).
        keys: &'a Keys,
    },
    /// Hands `len` bytes of `file` from `at` to disk helpers that read them into the
    /// page cache off the event loop (seed 003). Made by whoever owns the helpers (the
    /// server's connection), not by a kernel executor: one without helpers completes
    /// with 0 (not handed), and the producer then sends inline; handed, 1.
    Warm {
        /// The file.
        file: &'a Arc<File>,
        /// Offset in the file.
        at: u64,
        /// Bytes to read in.
        len: u64,
    },
    /// `sendfile` of `len` bytes of `file` from `at`.
    Sendfile {
        /// The file.
        file: &'a Arc<File>,
        /// Offset in the file.
        at: u64,
        /// Bytes asked for.
        len: usize,
    },
    /// `splice` of `len` bytes of `file` from `at` into the write end of a pipe.
    SpliceIn {
        /// The file.
        file: &'a Arc<File>,
        /// Offset in the file.
        at: u64,
        /// The pipe (its write end).
        pipe: &'a Arc<Pipe>,
        /// Bytes asked for.
        len: usize,
    },
    /// `splice` of `len` bytes from the read end of a pipe onto the socket.
    SpliceOut {
        /// The pipe (its read end).
        pipe: &'a Arc<Pipe>,
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
    /// Read the zero-copy completions waiting on the socket's error queue; completes
    /// with the number of reads it made.
    Reap,
    /// Sets an integer socket option (`TCP_CORK` on or off for a file body, as nginx's
    /// `tcp_nopush`); completes with 0.
    SetOption {
        /// The option.
        opt: SockOpt,
        /// Its value.
        value: i32,
    },
}

impl Op<'_> {
    /// A short name, for traces and test failures.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Gather { .. } => "gather",
            Op::Send { .. } => "send",
            Op::Read { .. } => "read",
            Op::Probe { .. } => "probe",
            Op::Shutdown => "shutdown",
            Op::CloseNotify => "close-notify",
            Op::KernelTls => "kernel-tls",
            Op::TlsKeys { .. } => "tls-keys",
            Op::Pipe { .. } => "pipe",
            Op::Map { .. } => "map",
            Op::FileSize { .. } => "file-size",
            Op::Warm { .. } => "warm",
            Op::Sendfile { .. } => "sendfile",
            Op::SpliceIn { .. } => "splice-in",
            Op::SpliceOut { .. } => "splice-out",
            Op::SendZerocopy { .. } => "send-zerocopy",
            Op::SendPinned { .. } => "send-pinned",
            Op::QueuedBytes => "queued-bytes",
            Op::SendBufferSize => "send-buffer-size",
            Op::Reap => "reap",
            Op::SetOption { .. } => "set-option",
        }
    }
}
