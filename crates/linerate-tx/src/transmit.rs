//! The resumable transmit state machine and the per-socket state it shares.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use linerate_sys::net::{self, SendFlags};
use linerate_sys::pipe;
use linerate_sys::sendfile::sendfile;
use linerate_sys::zerocopy::{self, Mmap, Pinned, ZeroCopy};

use crate::{Counters, Source, Strategy};

const PAGE_BYTES: usize = 4096;
/// Buffer size of the `copy` strategy and send size for memory, unless capped lower.
const COPY_BUFFER_BYTES: usize = 64 * 1024;
/// Capacity asked of each splice pipe (the default `pipe-max-size` allows it).
const PIPE_BYTES: usize = 1 << 20;
/// Pipes kept per thread for reuse.
const PIPE_POOL_MAX: usize = 16;
/// Largest window of a file mapped at once for zero-copy sends.
const ZC_MAP_WINDOW_BYTES: usize = 8 << 20;
/// Completed zero-copy sends looked at before deciding whether zero-copy pays.
const ZC_PROBE_SENDS: u64 = 64;

/// How a socket transmits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxConfig {
    /// The strategy.
    pub strategy: Strategy,
    /// Cap on the bytes of any one call (netperf's `-m`); `None`: the strategy's own.
    pub max_call_bytes: Option<usize>,
    /// Runtime switch for zero-copy; off, the `zerocopy` strategy sends by copying.
    pub zerocopy: bool,
    /// Sends smaller than this are copied even in zero-copy mode: below it, the page
    /// pinning and the completion cost more than the copy they save.
    pub zerocopy_min_bytes: usize,
    /// How the batched strategies size each call.
    pub sizing: Sizing,
    /// Wake-up hysteresis for the batched strategies, as `TCP_NOTSENT_LOWAT`: `None`
    /// derives it from the send buffer (see [`TxSocket::new`]); `Some(0)` leaves the
    /// socket as it is.
    pub notsent_lowat: Option<usize>,
}

impl Default for TxConfig {
    fn default() -> Self {
        TxConfig {
            strategy: Strategy::SendfileBatched,
            max_call_bytes: None,
            zerocopy: true,
            zerocopy_min_bytes: 16 * 1024,
            sizing: Sizing::Remaining,
            notsent_lowat: None,
        }
    }
}

impl TxConfig {
    /// A configuration with `strategy` and defaults for the rest.
    pub fn new(strategy: Strategy) -> TxConfig {
        TxConfig {
            strategy,
            ..TxConfig::default()
        }
    }
}

/// How a batched strategy sizes each call on a writable event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Sizing {
    /// Ask for everything left (capped by `max_call_bytes`): the kernel queues what fits,
    /// including space freed by ACKs while the call runs, and returns short when the
    /// buffer is full. One call per wake-up, and one more that sees `EAGAIN`.
    #[default]
    Remaining,
    /// Seed 000 taken literally: ask for the free space measured just before the call
    /// (`SO_SNDBUF` less `SIOCOUTQ`), and call again while a call fills all of it. On
    /// Linux, ACKs processed on another CPU free space during the call, so calls come out
    /// small and many; kept to measure that.
    FreeSpace,
}

impl std::fmt::Display for Sizing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Sizing::Remaining => "remaining",
            Sizing::FreeSpace => "free-space",
        })
    }
}

impl std::str::FromStr for Sizing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "remaining" => Ok(Sizing::Remaining),
            "free-space" => Ok(Sizing::FreeSpace),
            _ => Err(format!(
                "unknown sizing '{s}' (expected remaining or free-space)"
            )),
        }
    }
}

/// Why a transmit stopped for good.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// The peer reset or closed the connection (`EPIPE`, `ECONNRESET`).
    #[error("peer closed the connection: {0}")]
    PeerGone(io::Error),
    /// The file shrank while being sent; nothing past its new end was sent, and nothing
    /// was padded.
    #[error(
        "file shrank during the send: {sent} of {expected} bytes sent, the file now has {file_len}"
    )]
    Truncated {
        /// Bytes the socket accepted.
        sent: u64,
        /// Bytes the transmit was to send.
        expected: u64,
        /// The file's size when the shortfall was seen.
        file_len: u64,
    },
    /// Any other system error.
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for TxError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc_errno) if is_peer_gone(libc_errno) => TxError::PeerGone(e),
            _ => TxError::Io(e),
        }
    }
}

fn is_peer_gone(errno: i32) -> bool {
    const EPIPE: i32 = 32;
    const ECONNRESET: i32 = 104;
    const ENOTCONN: i32 = 107;
    matches!(errno, EPIPE | ECONNRESET | ENOTCONN)
}

/// What a call to [`Transmit::advance`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every byte was accepted by the socket (zero-copy completions may still be owed:
    /// see [`TxSocket::completions_owed`]).
    Done,
    /// The socket is full; call again when it is writable.
    Blocked,
}

/// Per-socket transmit state: what outlives one transmit.
#[derive(Debug)]
pub struct TxSocket {
    config: TxConfig,
    counters: Counters,
    /// `SO_SNDBUF` as the kernel reports it: the ceiling of queued payload.
    sndbuf_bytes: usize,
    zc: Option<ZeroCopy>,
}

impl TxSocket {
    /// Prepares a connected, non-blocking socket for transmits with `config`.
    ///
    /// For the batched strategies this sets `TCP_NOTSENT_LOWAT` to the send buffer size
    /// unless configured otherwise. The kernel then reports the socket writable only
    /// when fewer than half that many bytes wait unsent (`tcp_stream_memory_free` with
    /// its wake shift of 1) and a third of the buffer is free (`sk_stream_min_wspace`):
    /// the "sleep until 50% free" of seed 000, so each wake-up has a large batch to send.
    ///
    /// For `zerocopy` it sets `SO_ZEROCOPY`; if the kernel refuses, the socket copies
    /// and [`Counters::zc_disabled`] says so.
    pub fn new(fd: BorrowedFd<'_>, config: TxConfig) -> Result<TxSocket, TxError> {
        linerate_sys::ignore_sigpipe();
        let sndbuf = net::getsockopt_int(fd, net::SOL_SOCKET, net::SO_SNDBUF)?;
        let mut sock = TxSocket {
            config,
            counters: Counters::default(),
            sndbuf_bytes: sndbuf.max(0) as usize,
            zc: None,
        };
        sock.counters.syscalls += 1;
        if sock.config.strategy.is_batched() {
            let lowat = sock.config.notsent_lowat.unwrap_or(sock.sndbuf_bytes);
            if lowat > 0 {
                sock.counters.syscalls += 1;
                let lowat = i32::try_from(lowat).unwrap_or(i32::MAX);
                net::setsockopt_int(fd, net::IPPROTO_TCP, net::TCP_NOTSENT_LOWAT, lowat)?;
            }
        }
        if sock.config.strategy == Strategy::Zerocopy && sock.config.zerocopy {
            sock.counters.syscalls += 1;
            match ZeroCopy::new(fd) {
                Ok(zc) => sock.zc = Some(zc),
                Err(e) => {
                    tracing::info!("SO_ZEROCOPY refused ({e}); this socket copies");
                    sock.counters.zc_disabled = 1;
                }
            }
        }
        Ok(sock)
    }

    /// The configuration.
    pub fn config(&self) -> &TxConfig {
        &self.config
    }

    /// The counts so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Zero-copy sends whose buffers the kernel still holds. Keep calling
    /// [`TxSocket::reap`] on `POLLERR` until this is 0 before closing the socket, or the
    /// buffers are released only when the socket is closed.
    pub fn completions_owed(&self) -> usize {
        self.zc.as_ref().map_or(0, ZeroCopy::in_flight)
    }

    /// Reads zero-copy completions (call on `POLLERR`), releasing their buffers, and
    /// turns zero-copy off for the socket when most sends were copied anyway.
    pub fn reap(&mut self, fd: BorrowedFd<'_>) -> Result<(), TxError> {
        let Some(zc) = self.zc.as_mut() else {
            return Ok(());
        };
        let before = zc.totals();
        let r = zc.reap(fd);
        let after = zc.totals();
        // Count what was read even when a later read failed.
        self.counters.zc_completions += after.completed - before.completed;
        self.counters.zc_copied += after.copied - before.copied;
        self.counters.syscalls += r.as_ref().map_or(1, |reads| *reads);
        r?;
        if self.counters.zc_disabled == 0
            && self.counters.zc_completions >= ZC_PROBE_SENDS
            && self.counters.zc_copied * 2 > self.counters.zc_completions
        {
            tracing::info!(
                copied = self.counters.zc_copied,
                completed = self.counters.zc_completions,
                "zero-copy sends were mostly copied by the kernel; copying from now on"
            );
            self.counters.zc_disabled = 1;
        }
        Ok(())
    }

    fn zerocopy_on(&self) -> bool {
        self.zc.is_some() && self.counters.zc_disabled == 0
    }

    /// Bytes to ask of the next call of a batched strategy, before the caps: by
    /// [`Sizing`], everything (no query) or the free space (at least a page, so a call is
    /// always made and either queues bytes or sees `EAGAIN`).
    fn call_budget(&mut self, fd: BorrowedFd<'_>) -> Result<usize, TxError> {
        match self.config.sizing {
            Sizing::Remaining => Ok(usize::MAX),
            Sizing::FreeSpace => Ok(self.free_space(fd)?.max(PAGE_BYTES)),
        }
    }

    /// Free send space: the send-buffer ceiling less what is queued (`SIOCOUTQ`).
    fn free_space(&mut self, fd: BorrowedFd<'_>) -> Result<usize, TxError> {
        self.counters.syscalls += 1;
        self.counters.space_queries += 1;
        let queued = net::send_queue_bytes(fd)?;
        Ok(self.sndbuf_bytes.saturating_sub(queued))
    }

    /// Re-reads `SO_SNDBUF`: buffer autotuning may have grown it.
    fn refresh_sndbuf(&mut self, fd: BorrowedFd<'_>) -> Result<(), TxError> {
        self.counters.syscalls += 1;
        let n = net::getsockopt_int(fd, net::SOL_SOCKET, net::SO_SNDBUF)?;
        self.sndbuf_bytes = n.max(0) as usize;
        Ok(())
    }

    fn cap(&self, default: usize) -> usize {
        self.config.max_call_bytes.unwrap_or(default).max(1)
    }
}

/// Outcome of one system call.
enum Call {
    Did(usize),
    WouldBlock,
}

/// Makes one system call, counting it, retrying `EINTR`, and turning `EAGAIN` into
/// [`Call::WouldBlock`].
fn call(c: &mut Counters, mut f: impl FnMut() -> io::Result<usize>) -> Result<Call, TxError> {
    loop {
        c.syscalls += 1;
        match f() {
            Ok(n) => return Ok(Call::Did(n)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                c.eagain += 1;
                return Ok(Call::WouldBlock);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

thread_local! {
    static PIPES: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
}

fn take_pipe() -> io::Result<Pipe> {
    if let Some(p) = PIPES.with(|p| p.borrow_mut().pop()) {
        return Ok(p);
    }
    let (r, w) = pipe::pipe()?;
    // A smaller pipe still works; only the batch size suffers.
    let _ = pipe::set_pipe_size(w.as_fd(), PIPE_BYTES);
    Ok(Pipe { r, w })
}

fn give_back_pipe(p: Pipe) {
    PIPES.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < PIPE_POOL_MAX {
            pool.push(p);
        }
    });
}

/// One byte range on its way to a socket.
pub struct Transmit {
    source: Source,
    sent: u64,
    /// `copy`: bytes read but not yet sent are `buf[buf_start..buf_end]`.
    buf: Vec<u8>,
    buf_start: usize,
    buf_end: usize,
    /// `splice`: the pipe and how many bytes it holds (read from the file, not yet sent).
    pipe: Option<Pipe>,
    pipe_held: usize,
    /// `zerocopy` of a file: the mapped window, the file offset it starts at, and how
    /// many of its bytes the file held when it was mapped.
    window: Option<(Pinned, u64, usize)>,
    degraded_noted: bool,
}

impl std::fmt::Debug for Transmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transmit")
            .field("len", &self.source.len())
            .field("sent", &self.sent)
            .field("pipe_held", &self.pipe_held)
            .finish()
    }
}

impl Drop for Transmit {
    fn drop(&mut self) {
        // A pipe still holding bytes (an error, an abandoned send) is closed, never
        // reused: its bytes would go out on the next connection.
        if let Some(p) = self.pipe.take() {
            if self.pipe_held == 0 {
                give_back_pipe(p);
            }
        }
    }
}

impl Transmit {
    /// A transmit of `source`, nothing sent yet.
    pub fn new(source: Source) -> Transmit {
        Transmit {
            source,
            sent: 0,
            buf: Vec::new(),
            buf_start: 0,
            buf_end: 0,
            pipe: None,
            pipe_held: 0,
            window: None,
            degraded_noted: false,
        }
    }

    /// Bytes the socket has accepted.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Bytes still to send.
    pub fn remaining(&self) -> u64 {
        self.source.len() - self.sent
    }

    /// Sends what the socket takes by the socket's strategy; resumes where the last call
    /// stopped. Call on each writable event until it returns [`Progress::Done`].
    pub fn advance(
        &mut self,
        fd: BorrowedFd<'_>,
        sock: &mut TxSocket,
    ) -> Result<Progress, TxError> {
        sock.counters.wakeups += 1;
        let strategy = sock.config.strategy;
        match (&self.source, strategy) {
            (Source::File { .. }, Strategy::Copy) => self.copy_file(fd, sock),
            (Source::File { .. }, Strategy::Sendfile4k) => {
                self.sendfile_fixed(fd, sock, PAGE_BYTES, true)
            }
            (Source::File { .. }, Strategy::SendfileChunked { chunk_bytes }) => {
                self.sendfile_fixed(fd, sock, chunk_bytes, false)
            }
            (Source::File { .. }, Strategy::SendfileBatched) => self.sendfile_batched(fd, sock),
            (Source::File { .. }, Strategy::Splice) => self.splice_batched(fd, sock),
            (_, Strategy::Zerocopy) => self.zerocopy(fd, sock),
            (Source::Memory { .. }, Strategy::Copy) => self.copy_memory(fd, sock),
            (Source::Memory { .. }, _) => {
                // sendfile and splice need a file; memory goes out by copying.
                if !self.degraded_noted {
                    self.degraded_noted = true;
                    sock.counters.degraded += 1;
                }
                self.copy_memory(fd, sock)
            }
        }
    }

    fn file(&self) -> (&Arc<File>, u64, u64) {
        match &self.source {
            Source::File { file, offset, len } => (file, *offset, *len),
            Source::Memory { .. } => {
                unreachable!("file strategies are only chosen for file sources")
            }
        }
    }

    fn truncated(&self) -> TxError {
        let (file, _, len) = self.file();
        let file_len = file.metadata().map(|m| m.len()).unwrap_or(0);
        TxError::Truncated {
            sent: self.sent,
            expected: len,
            file_len,
        }
    }

    fn accepted(&mut self, sock: &mut TxSocket, n: usize) {
        self.sent += n as u64;
        sock.counters.bytes += n as u64;
    }

    /// `pread` into a buffer, `send` from it, until `EAGAIN`.
    fn copy_file(&mut self, fd: BorrowedFd<'_>, sock: &mut TxSocket) -> Result<Progress, TxError> {
        let cap = sock.cap(COPY_BUFFER_BYTES);
        if self.buf.len() != cap {
            self.buf = vec![0; cap];
        }
        loop {
            if self.buf_start == self.buf_end {
                let (file, offset, len) = self.file();
                let unread = len - self.sent;
                if unread == 0 {
                    return Ok(Progress::Done);
                }
                let want = (unread.min(cap as u64)) as usize;
                let at = offset + self.sent;
                let file = Arc::clone(file);
                let buf = &mut self.buf[..want];
                let n = match call(&mut sock.counters, || {
                    std::os::unix::fs::FileExt::read_at(&*file, buf, at)
                })? {
                    Call::Did(n) => n,
                    Call::WouldBlock => return Ok(Progress::Blocked),
                };
                if n == 0 {
                    return Err(self.truncated());
                }
                self.buf_start = 0;
                self.buf_end = n;
            }
            let more = self.remaining() > (self.buf_end - self.buf_start) as u64;
            let flags = if more {
                SendFlags::MORE
            } else {
                SendFlags::NONE
            };
            let chunk = &self.buf[self.buf_start..self.buf_end];
            match call(&mut sock.counters, || net::send(fd, chunk, flags))? {
                Call::WouldBlock => return Ok(Progress::Blocked),
                Call::Did(n) => {
                    if n < chunk.len() {
                        sock.counters.short_sends += 1;
                    }
                    self.buf_start += n;
                    self.accepted(sock, n);
                }
            }
        }
    }

    /// `send` straight from a memory buffer, until `EAGAIN`.
    fn copy_memory(
        &mut self,
        fd: BorrowedFd<'_>,
        sock: &mut TxSocket,
    ) -> Result<Progress, TxError> {
        let cap = sock.cap(COPY_BUFFER_BYTES);
        let Source::Memory { buf, offset, len } = &self.source else {
            unreachable!("memory strategies are only chosen for memory sources")
        };
        let (buf, offset, len) = (Arc::clone(buf), *offset, *len);
        loop {
            let start = offset + self.sent as usize;
            let end = offset + len;
            if start == end {
                return Ok(Progress::Done);
            }
            let want = (end - start).min(cap);
            let flags = if end - start > want {
                SendFlags::MORE
            } else {
                SendFlags::NONE
            };
            match call(&mut sock.counters, || {
                net::send(fd, &buf[start..start + want], flags)
            })? {
                Call::WouldBlock => return Ok(Progress::Blocked),
                Call::Did(n) => {
                    if n < want {
                        sock.counters.short_sends += 1;
                    }
                    self.accepted(sock, n);
                }
            }
        }
    }

    /// Fixed-size `sendfile` calls until `EAGAIN`; `page_aligned` stops each call at a
    /// page boundary, as the old one-page-per-mbuf loop did.
    fn sendfile_fixed(
        &mut self,
        fd: BorrowedFd<'_>,
        sock: &mut TxSocket,
        chunk: usize,
        page_aligned: bool,
    ) -> Result<Progress, TxError> {
        let chunk = chunk.min(sock.cap(usize::MAX)).max(1) as u64;
        loop {
            let (file, offset, len) = self.file();
            let rem = len - self.sent;
            if rem == 0 {
                return Ok(Progress::Done);
            }
            let mut at = offset + self.sent;
            let mut want = rem.min(chunk);
            if page_aligned {
                want = want.min(PAGE_BYTES as u64 - at % PAGE_BYTES as u64);
            }
            let file = Arc::clone(file);
            match call(&mut sock.counters, || {
                sendfile(fd, file.as_fd(), &mut at, want as usize)
            })? {
                Call::WouldBlock => return Ok(Progress::Blocked),
                Call::Did(0) => return Err(self.truncated()),
                Call::Did(n) => {
                    if (n as u64) < want {
                        sock.counters.short_sends += 1;
                    }
                    self.accepted(sock, n);
                }
            }
        }
    }

    /// Seed 000: one `sendfile` of `min(remaining, free space)` per writable event, and
    /// after a short count one more to tell a full socket (`EAGAIN`) from a file that
    /// ended early (0).
    fn sendfile_batched(
        &mut self,
        fd: BorrowedFd<'_>,
        sock: &mut TxSocket,
    ) -> Result<Progress, TxError> {
        loop {
            let (file, offset, len) = self.file();
            let rem = len - self.sent;
            if rem == 0 {
                return Ok(Progress::Done);
            }
            let file = Arc::clone(file);
            let mut at = offset + self.sent;
            let space = sock.call_budget(fd)?;
            let want = rem.min(space as u64).min(sock.cap(usize::MAX) as u64) as usize;
            match call(&mut sock.counters, || {
                sendfile(fd, file.as_fd(), &mut at, want)
            })? {
                Call::WouldBlock => return Ok(Progress::Blocked),
                Call::Did(0) => return Err(self.truncated()),
                Call::Did(n) => {
                    self.accepted(sock, n);
                    if n < want {
                        // Short: the socket filled, or the file ended early. Only the
                        // first leaves the socket flagged to wake us, so call again:
                        // EAGAIN (full: the writable edge will come), 0 (the file
                        // shrank), or more bytes. Waiting on a short count alone hung a
                        // truncated transmit once the low-water mark was small.
                        sock.counters.short_sends += 1;
                        continue;
                    }
                    if sock.config.sizing == Sizing::FreeSpace && n >= space {
                        // It all fit: the buffer may have grown under autotuning.
                        sock.refresh_sndbuf(fd)?;
                    }
                }
            }
        }
    }

    /// File → pipe → socket, sized like [`Transmit::sendfile_batched`]. Bytes left in
    /// the pipe by a full socket stay there for the next call.
    fn splice_batched(
        &mut self,
        fd: BorrowedFd<'_>,
        sock: &mut TxSocket,
    ) -> Result<Progress, TxError> {
        if self.pipe.is_none() {
            sock.counters.syscalls += 1;
            self.pipe = Some(take_pipe()?);
        }
        loop {
            let (file, offset, len) = self.file();
            let rem = len - self.sent;
            if self.pipe_held == 0 {
                if rem == 0 {
                    return Ok(Progress::Done);
                }
                let file = Arc::clone(file);
                let space = sock.call_budget(fd)?;
                let want = rem
                    .min(space as u64)
                    .min(sock.cap(PIPE_BYTES).min(PIPE_BYTES) as u64)
                    as usize;
                let mut at = offset + self.sent;
                let Some(p) = self.pipe.as_ref() else {
                    unreachable!("the pipe was taken above")
                };
                let w = p.w.as_fd();
                match call(&mut sock.counters, || {
                    pipe::splice(
                        file.as_fd(),
                        Some(&mut at),
                        w,
                        None,
                        want,
                        pipe::SPLICE_F_MOVE | pipe::SPLICE_F_NONBLOCK,
                    )
                })? {
                    Call::WouldBlock => return Ok(Progress::Blocked),
                    Call::Did(0) => return Err(self.truncated()),
                    Call::Did(n) => self.pipe_held = n,
                }
            }
            let more = rem > self.pipe_held as u64;
            let mut flags = pipe::SPLICE_F_MOVE | pipe::SPLICE_F_NONBLOCK;
            if more {
                flags |= pipe::SPLICE_F_MORE;
            }
            let Some(p) = self.pipe.as_ref() else {
                unreachable!("the pipe was taken above")
            };
            let r = p.r.as_fd();
            let held = self.pipe_held;
            match call(&mut sock.counters, || {
                pipe::splice(r, None, fd, None, held, flags)
            })? {
                Call::WouldBlock => return Ok(Progress::Blocked),
                Call::Did(0) => {
                    return Err(TxError::PeerGone(io::Error::from(io::ErrorKind::WriteZero)));
                }
                Call::Did(n) => {
                    self.pipe_held -= n;
                    self.accepted(sock, n);
                    if self.pipe_held > 0 {
                        sock.counters.short_sends += 1;
                        return Ok(Progress::Blocked);
                    }
                }
            }
        }
    }

    /// The pinned memory the next zero-copy send comes from, and the range in it.
    fn zc_region(&mut self) -> Result<(Pinned, usize, usize), TxError> {
        match &self.source {
            Source::Memory { buf, offset, len } => {
                let start = offset + self.sent as usize;
                Ok((Pinned::Memory(Arc::clone(buf)), start, offset + len))
            }
            Source::File { file, offset, len } => {
                let pos = offset + self.sent;
                let end = offset + len;
                let covered = matches!(&self.window, Some((_, base, limit)) if pos >= *base && pos < *base + *limit as u64);
                if !covered {
                    // The bytes of a mapping past the end of the file read as zeros up to
                    // the page's end: map only what the file holds now, so a file that
                    // shrank is reported, never padded.
                    let file_len = file.metadata().map_err(TxError::Io)?.len();
                    if file_len <= pos {
                        return Err(self.truncated());
                    }
                    let page = zerocopy::page_size() as u64;
                    let base = pos - pos % page;
                    let wlen = (end.min(file_len) - base).min(ZC_MAP_WINDOW_BYTES as u64) as usize;
                    let map = Mmap::map(file.as_fd(), base, wlen)?;
                    self.window = Some((Pinned::Map(Arc::new(map)), base, wlen));
                }
                let Some((w, base, limit)) = &self.window else {
                    unreachable!("the window was mapped above")
                };
                let start = (pos - base) as usize;
                let stop = ((end - base) as usize).min(*limit);
                Ok((w.clone(), start, stop))
            }
        }
    }

    /// Seed 002: `MSG_ZEROCOPY` sends, each buffer held until its completion; copies
    /// below the minimum size, after `ENOBUFS`, or once zero-copy stopped paying.
    fn zerocopy(&mut self, fd: BorrowedFd<'_>, sock: &mut TxSocket) -> Result<Progress, TxError> {
        loop {
            if self.remaining() == 0 {
                if self.window.take().is_some() {
                    // A shrink after the last window was mapped may have sent a zeroed
                    // page tail: say so rather than report success.
                    let (file, offset, len) = self.file();
                    if file.metadata().map_err(TxError::Io)?.len() < offset + len {
                        return Err(self.truncated());
                    }
                }
                return Ok(Progress::Done);
            }
            let (region, start, stop) = self.zc_region()?;
            let space = sock.call_budget(fd)?;
            // Pinning is charged for the whole request (RLIMIT_MEMLOCK, optmem), and the
            // socket takes at most a buffer's worth: ask no more than that.
            let want = (stop - start)
                .min(space)
                .min(sock.cap(usize::MAX))
                .min(sock.sndbuf_bytes.max(PAGE_BYTES));
            let more = self.remaining() > want as u64;
            let flags = if more {
                SendFlags::MORE
            } else {
                SendFlags::NONE
            };
            let range = start..start + want;
            let mut result = None;
            if sock.zerocopy_on() && want >= sock.config.zerocopy_min_bytes {
                let zc = sock.zc.as_mut().expect("zerocopy_on implies a tracker");
                let mut counters = sock.counters;
                let r = call(&mut counters, || zc.send(fd, &region, range.clone(), flags));
                sock.counters = counters;
                match r {
                    Ok(Call::Did(n)) => {
                        sock.counters.zc_sends += 1;
                        result = Some(Call::Did(n));
                    }
                    Err(TxError::Io(e)) if e.raw_os_error() == Some(105) => {
                        // ENOBUFS: too many completions owed (optmem), or the pages
                        // cannot be pinned (RLIMIT_MEMLOCK without CAP_IPC_LOCK).
                        // Collect completions and copy this one; if nothing was owed,
                        // no zero-copy send of this size can succeed: stop trying.
                        sock.counters.zc_enobufs += 1;
                        sock.reap(fd)?;
                        if sock.completions_owed() == 0 && sock.counters.zc_disabled == 0 {
                            tracing::info!("zero-copy sends refused with ENOBUFS while none were owed; copying from now on");
                            sock.counters.zc_disabled = 1;
                        }
                    }
                    Err(TxError::Io(e)) if e.raw_os_error() == Some(14) => {
                        return Err(self.efault(e))
                    }
                    Ok(Call::WouldBlock) => return Ok(Progress::Blocked),
                    Err(e) => return Err(e),
                }
            }
            let r = match result {
                Some(r) => r,
                None => {
                    sock.counters.zc_copy_sends += 1;
                    match call(&mut sock.counters, || {
                        ZeroCopy::send_copy(fd, &region, range.clone(), flags)
                    }) {
                        Err(TxError::Io(e)) if e.raw_os_error() == Some(14) => {
                            return Err(self.efault(e))
                        }
                        r => r?,
                    }
                }
            };
            match r {
                Call::WouldBlock => return Ok(Progress::Blocked),
                Call::Did(n) => {
                    self.accepted(sock, n);
                    if n < want {
                        sock.counters.short_sends += 1;
                        return Ok(Progress::Blocked);
                    }
                }
            }
        }
    }

    /// `EFAULT` from a mapped file means the file shrank under the mapping.
    fn efault(&self, e: io::Error) -> TxError {
        match &self.source {
            Source::File { .. } => self.truncated(),
            Source::Memory { .. } => TxError::Io(e),
        }
    }
}
