//! Each strategy as a small I/O-free state machine: `poll` says which [`Op`] comes
//! next from the state alone, `complete` takes that operation's result. Neither makes a
//! call on the socket (see [`crate::op`]); the file-side bookkeeping that is not on the
//! send path (the size of a file that shrank, a zero-copy window's mapping, a pipe from
//! the pool) is done here.
//!
//! Between a `poll` and its `complete` the state does not change, so `complete` knows
//! what was asked from the `pending` it recorded.

use std::fs::File;
use std::io;
use std::sync::Arc;

use linerate_sys::pipe::Pipe;
use linerate_sys::zerocopy::{self, Mmap, Pinned};

use crate::op::{Completion, Flow, Next, Op};
use crate::transmit::{Sizing, TxSocket};
use crate::{Source, TxError};

pub(crate) const PAGE_BYTES: usize = 4096;
/// Buffer size of the `copy` strategy and send size for memory, unless capped lower.
pub(crate) const COPY_BUFFER_BYTES: usize = 64 * 1024;
/// Capacity asked of each splice pipe (the default `pipe-max-size` allows it).
pub(crate) const PIPE_BYTES: usize = 1 << 20;
/// Largest window of a file mapped at once for zero-copy sends.
const ZC_MAP_WINDOW_BYTES: usize = 8 << 20;

use linerate_sys::Errno;

/// The bytes of one transmit and how many the socket has accepted.
#[derive(Debug)]
pub(crate) struct Cursor {
    pub source: Source,
    pub sent: u64,
}

impl Cursor {
    pub fn remaining(&self) -> u64 {
        self.source.len() - self.sent
    }

    /// The file, the offset of the range and its length (file strategies are only
    /// chosen for file sources: memory here is refused).
    pub(crate) fn file(&self) -> Result<(&Arc<File>, u64, u64), TxError> {
        match &self.source {
            Source::File { file, offset, len } => Ok((file, *offset, *len)),
            Source::Memory { .. } => Err(wrong_source()),
        }
    }

    /// The file ended early; its size now is asked by the transmit before the error
    /// is given ([`crate::Transmit`]).
    fn truncated(&self) -> TxError {
        let len = match self.file() {
            Ok((_, _, len)) => len,
            Err(e) => return e,
        };
        TxError::Truncated {
            sent: self.sent,
            expected: len,
            file_len: 0,
        }
    }

    fn accepted(&mut self, sock: &mut TxSocket, n: usize) {
        self.sent += n as u64;
        sock.counters.bytes += n as u64;
    }

    /// The socket took `n` of the `want` bytes a send asked; true (and counted) when it
    /// took fewer.
    fn took(&mut self, sock: &mut TxSocket, n: usize, want: usize) -> bool {
        self.accepted(sock, n);
        let short = n < want;
        if short {
            sock.counters.short_sends += 1;
        }
        short
    }

    /// `EFAULT` from a mapped file means the file shrank under the mapping.
    fn efault(&self) -> TxError {
        match &self.source {
            Source::File { .. } => self.truncated(),
            Source::Memory { .. } => TxError::from(Errno::FAULT),
        }
    }
}

/// A strategy driven with a source it was not chosen for.
fn wrong_source() -> TxError {
    TxError::Io(io::Error::new(
        io::ErrorKind::InvalidInput,
        "a strategy driven with a source it was not chosen for",
    ))
}

/// The strategy a transmit runs, chosen from the socket's configuration and the source
/// at its first poll.
#[derive(Debug)]
pub(crate) enum Machine {
    CopyFile(CopyFile),
    CopyMemory(CopyMemory),
    SendfileFixed(SendfileFixed),
    SendfileBatched(SendfileBatched),
    Splice(Splice),
    Zerocopy(Zerocopy),
}

impl Machine {
    pub fn choose(cur: &Cursor, sock: &mut TxSocket) -> Machine {
        use crate::Strategy as S;
        let file = matches!(cur.source, Source::File { .. });
        match (file, sock.config.strategy) {
            (true, S::Copy) => Machine::CopyFile(CopyFile::default()),
            (true, S::Sendfile4k) => Machine::SendfileFixed(SendfileFixed {
                chunk: PAGE_BYTES,
                page_aligned: true,
                want: 0,
            }),
            (true, S::SendfileChunked { chunk_bytes }) => Machine::SendfileFixed(SendfileFixed {
                chunk: chunk_bytes,
                page_aligned: false,
                want: 0,
            }),
            (true, S::SendfileBatched) => Machine::SendfileBatched(SendfileBatched::default()),
            (true, S::Splice) => Machine::Splice(Splice::default()),
            (_, S::Zerocopy) => Machine::Zerocopy(Zerocopy::default()),
            (false, S::Copy) => Machine::CopyMemory(CopyMemory::default()),
            (false, _) => {
                // sendfile and splice need a file; memory goes out by copying.
                sock.counters.degraded += 1;
                Machine::CopyMemory(CopyMemory::default())
            }
        }
    }

    pub fn poll<'a>(
        &'a mut self,
        cur: &'a Cursor,
        sock: &mut TxSocket,
    ) -> Result<Next<'a>, TxError> {
        match self {
            Machine::CopyFile(m) => m.poll(cur, sock),
            Machine::CopyMemory(m) => m.poll(cur, sock),
            Machine::SendfileFixed(m) => m.poll(cur, sock),
            Machine::SendfileBatched(m) => m.poll(cur, sock),
            Machine::Splice(m) => m.poll(cur, sock),
            Machine::Zerocopy(m) => m.poll(cur, sock),
        }
    }

    pub fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        match self {
            Machine::CopyFile(m) => m.complete(cur, sock, r),
            Machine::CopyMemory(m) => m.complete(cur, sock, r),
            Machine::SendfileFixed(m) => m.complete(cur, sock, r),
            Machine::SendfileBatched(m) => m.complete(cur, sock, r),
            Machine::Splice(m) => m.complete(cur, sock, r),
            Machine::Zerocopy(m) => m.complete(cur, sock, r),
        }
    }

    /// The last operation would block: a free-space measurement made for it is stale
    /// by the next writable event.
    pub fn would_block(&mut self) {
        match self {
            Machine::SendfileBatched(m) => m.budget.space = None,
            Machine::Splice(m) => m.budget.space = None,
            Machine::Zerocopy(m) => m.budget.space = None,
            _ => {}
        }
    }

    /// The pending operation is a reap (counted as the reads it made).
    pub fn reaping(&self) -> bool {
        matches!(self, Machine::Zerocopy(z) if z.pending == ZcPending::Reap)
    }

    /// Bytes a splice pipe holds (read from the file, not yet on the socket).
    pub fn pipe_held(&self) -> usize {
        match self {
            Machine::Splice(s) => s.held,
            _ => 0,
        }
    }
}

/// The free-space budget of the batched strategies ([`Sizing`]): with `Remaining`
/// there is none to measure; with `FreeSpace` it is measured before each send.
#[derive(Debug, Default)]
struct Budget {
    /// Bytes the next send may ask for, once measured.
    space: Option<usize>,
    /// The last send took all of it: `SO_SNDBUF` is read again before the next (none
    /// after a transmit's last send: the next transmit's first full send re-reads it).
    refresh: bool,
}

impl Budget {
    /// The operation that must come before the next send, if any.
    fn before_send(&self, sock: &TxSocket) -> Option<Op<'static>> {
        if self.refresh {
            Some(Op::SendBufferSize)
        } else if sock.config.sizing == Sizing::FreeSpace && self.space.is_none() {
            Some(Op::QueuedBytes)
        } else {
            None
        }
    }

    /// The budget of the next send: everything, or the free space measured.
    fn space(&self) -> usize {
        self.space.unwrap_or(usize::MAX)
    }

    /// Takes the result of the operation [`Budget::before_send`] asked for.
    fn complete(&mut self, sock: &mut TxSocket, n: usize) {
        if self.refresh {
            self.refresh = false;
            sock.sndbuf_bytes = n;
        } else {
            sock.counters.space_queries += 1;
            // At least a page, so a call is always made and either queues bytes or
            // sees EAGAIN.
            self.space = Some(sock.sndbuf_bytes.saturating_sub(n).max(PAGE_BYTES));
        }
    }

    /// A send of `n` bytes asked `want` went: the next measures again.
    fn spent(&mut self, sock: &TxSocket, n: usize) {
        if let Some(space) = self.space.take() {
            if sock.config.sizing == Sizing::FreeSpace && n >= space {
                // It all fit: the buffer may have grown under autotuning.
                self.refresh = true;
            }
        }
    }
}

/// `pread` into a buffer, `send` from it, until `EAGAIN`.
#[derive(Debug, Default)]
pub(crate) struct CopyFile {
    buf: Vec<u8>,
    /// Bytes read but not yet sent are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes asked of the pending call.
    want: usize,
}

impl CopyFile {
    fn poll<'a>(&'a mut self, cur: &'a Cursor, sock: &TxSocket) -> Result<Next<'a>, TxError> {
        let cap = sock.cap(COPY_BUFFER_BYTES);
        if self.buf.len() != cap {
            self.buf = vec![0; cap];
        }
        if self.start == self.end {
            let (file, offset, len) = cur.file()?;
            let unread = len - cur.sent;
            if unread == 0 {
                return Ok(Next::Done);
            }
            self.want = unread.min(cap as u64) as usize;
            return Ok(Next::Op(Op::Read {
                file,
                at: offset + cur.sent,
                buf: &mut self.buf[..self.want],
                nowait: false,
            }));
        }
        self.want = self.end - self.start;
        Ok(Next::Op(Op::Send {
            data: &self.buf[self.start..self.end],
            more: cur.remaining() > self.want as u64,
        }))
    }

    fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        let n = r?;
        if self.start == self.end {
            if n == 0 {
                return Err(cur.truncated());
            }
            self.start = 0;
            self.end = n;
        } else {
            self.start += n;
            cur.took(sock, n, self.want);
        }
        Ok(Flow::Continue)
    }
}

/// `send` straight from a memory buffer, until `EAGAIN`.
#[derive(Debug, Default)]
pub(crate) struct CopyMemory {
    want: usize,
}

impl CopyMemory {
    fn poll<'a>(&mut self, cur: &'a Cursor, sock: &TxSocket) -> Result<Next<'a>, TxError> {
        let Source::Memory { buf, offset, len } = &cur.source else {
            return Err(wrong_source());
        };
        let start = offset + cur.sent as usize;
        let end = offset + len;
        if start == end {
            return Ok(Next::Done);
        }
        self.want = (end - start).min(sock.cap(COPY_BUFFER_BYTES));
        Ok(Next::Op(Op::Send {
            data: &buf[start..start + self.want],
            more: end - start > self.want,
        }))
    }

    fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        cur.took(sock, r?, self.want);
        Ok(Flow::Continue)
    }
}

/// Fixed-size `sendfile` calls until `EAGAIN`; `page_aligned` stops each call at a
/// page boundary, as the old one-page-per-mbuf loop did.
#[derive(Debug)]
pub(crate) struct SendfileFixed {
    chunk: usize,
    page_aligned: bool,
    want: usize,
}

impl SendfileFixed {
    fn poll<'a>(&mut self, cur: &'a Cursor, sock: &TxSocket) -> Result<Next<'a>, TxError> {
        let chunk = self.chunk.min(sock.cap(usize::MAX)).max(1) as u64;
        let (file, offset, len) = cur.file()?;
        let rem = len - cur.sent;
        if rem == 0 {
            return Ok(Next::Done);
        }
        let at = offset + cur.sent;
        let mut want = rem.min(chunk);
        if self.page_aligned {
            want = want.min(PAGE_BYTES as u64 - at % PAGE_BYTES as u64);
        }
        self.want = want as usize;
        Ok(Next::Op(Op::Sendfile {
            file,
            at,
            len: self.want,
        }))
    }

    fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        match r? {
            0 => Err(cur.truncated()),
            n => {
                cur.took(sock, n, self.want);
                Ok(Flow::Continue)
            }
        }
    }
}

/// Seed 000: one `sendfile` of `min(remaining, free space)` per writable event, and
/// after a short count one more to tell a full socket (`EAGAIN`) from a file that
/// ended early (0).
#[derive(Debug, Default)]
pub(crate) struct SendfileBatched {
    budget: Budget,
    want: usize,
    /// The pending operation is the budget's, not a send.
    measuring: bool,
}

impl SendfileBatched {
    fn poll<'a>(&mut self, cur: &'a Cursor, sock: &TxSocket) -> Result<Next<'a>, TxError> {
        let (file, offset, len) = cur.file()?;
        let rem = len - cur.sent;
        if rem == 0 {
            return Ok(Next::Done);
        }
        if let Some(op) = self.budget.before_send(sock) {
            self.measuring = true;
            return Ok(Next::Op(op));
        }
        self.measuring = false;
        self.want = rem
            .min(self.budget.space() as u64)
            .min(sock.cap(usize::MAX) as u64) as usize;
        Ok(Next::Op(Op::Sendfile {
            file,
            at: offset + cur.sent,
            len: self.want,
        }))
    }

    fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        let n = r?;
        if self.measuring {
            self.budget.complete(sock, n);
            return Ok(Flow::Continue);
        }
        if n == 0 {
            return Err(cur.truncated());
        }
        if cur.took(sock, n, self.want) {
            // Short: the socket filled, or the file ended early. Only the first leaves
            // the socket flagged to wake us, so call again: EAGAIN (full: the writable
            // edge will come), 0 (the file shrank), or more bytes. Waiting on a short
            // count alone hung a truncated transmit once the low-water mark was small.
            self.budget.space = None;
            return Ok(Flow::Continue);
        }
        self.budget.spent(sock, n);
        Ok(Flow::Continue)
    }
}

/// File → pipe → socket, sized like [`SendfileBatched`]. Bytes left in the pipe by a
/// full socket stay there for the next call.
#[derive(Debug, Default)]
pub(crate) struct Splice {
    pipe: Option<Arc<Pipe>>,
    /// The pending operation asks for the pipe.
    asking_pipe: bool,
    /// Bytes the pipe holds: read from the file, not yet sent.
    held: usize,
    budget: Budget,
    measuring: bool,
}

impl Drop for Splice {
    fn drop(&mut self) {
        // A pipe still holding bytes (an error, an abandoned send) is closed, never
        // reused: its bytes would go out on the next connection.
        if let Some(p) = self.pipe.take() {
            // (Not while an executor still holds it.)
            if let (0, Ok(p)) = (self.held, Arc::try_unwrap(p)) {
                p.recycle();
            }
        }
    }
}

impl Splice {
    fn poll<'a>(&'a mut self, cur: &'a Cursor, sock: &mut TxSocket) -> Result<Next<'a>, TxError> {
        let Splice {
            pipe, asking_pipe, ..
        } = self;
        let Some(p) = pipe else {
            *asking_pipe = true;
            return Ok(Next::Op(Op::Pipe {
                slot: pipe,
                capacity: PIPE_BYTES,
            }));
        };
        let (file, offset, len) = cur.file()?;
        let rem = len - cur.sent;
        if self.held > 0 {
            self.measuring = false;
            return Ok(Next::Op(Op::SpliceOut {
                pipe: p,
                len: self.held,
                more: rem > self.held as u64,
            }));
        }
        if rem == 0 {
            return Ok(Next::Done);
        }
        if let Some(op) = self.budget.before_send(sock) {
            self.measuring = true;
            return Ok(Next::Op(op));
        }
        self.measuring = false;
        let want = rem
            .min(self.budget.space() as u64)
            .min(sock.cap(PIPE_BYTES).min(PIPE_BYTES) as u64) as usize;
        Ok(Next::Op(Op::SpliceIn {
            file,
            at: offset + cur.sent,
            pipe: p,
            len: want,
        }))
    }

    fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        if std::mem::take(&mut self.asking_pipe) {
            r?;
            return match self.pipe {
                Some(_) => Ok(Flow::Continue),
                None => Err(wrong_source()),
            };
        }
        let n = r?;
        if self.measuring {
            self.budget.complete(sock, n);
            return Ok(Flow::Continue);
        }
        if self.held == 0 {
            // Into the pipe.
            if n == 0 {
                return Err(cur.truncated());
            }
            self.held = n;
            self.budget.space = None;
            return Ok(Flow::Continue);
        }
        if n == 0 {
            return Err(TxError::PeerGone(io::Error::from(io::ErrorKind::WriteZero)));
        }
        let held = self.held;
        self.held -= n;
        if cur.took(sock, n, held) {
            return Ok(Flow::Blocked);
        }
        Ok(Flow::Continue)
    }
}

/// What the pending operation of a [`Zerocopy`] transmit is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ZcPending {
    #[default]
    None,
    Measure,
    Reap,
    SendZerocopy,
    SendCopy,
    Map,
    CheckSize,
}

/// Seed 002: `MSG_ZEROCOPY` sends, each buffer held until its completion; copies below
/// the minimum size, after `ENOBUFS`, or once zero-copy stopped paying.
#[derive(Debug, Default)]
pub(crate) struct Zerocopy {
    /// Of a file: the mapped window, the file offset it starts at, and how many of its
    /// bytes the file held when it was mapped.
    window: Option<(Pinned, u64, usize)>,
    /// The memory the pending send comes from.
    region: Option<Pinned>,
    /// Where a window asked for is mapped, and the file offset it starts at.
    mapped: Option<Mmap>,
    map_base: u64,
    /// The last send of a mapped file went with these bytes, not yet counted.
    last: Option<usize>,
    budget: Budget,
    want: usize,
    pending: ZcPending,
    /// `ENOBUFS` came: reap the completions owed, then copy this send.
    reap_then_copy: bool,
    copy_next: bool,
}

impl Zerocopy {
    /// The pinned memory the next send comes from, and the range in it (of a file, the
    /// window mapped for it).
    fn region(&self, cur: &Cursor) -> Result<(Pinned, usize, usize), TxError> {
        match (&cur.source, &self.window) {
            (Source::Memory { buf, offset, len }, _) => {
                let start = offset + cur.sent as usize;
                Ok((Pinned::Memory(Arc::clone(buf)), start, offset + len))
            }
            (Source::File { offset, len, .. }, Some((w, base, limit))) => {
                let start = (offset + cur.sent - base) as usize;
                let stop = ((offset + len - base) as usize).min(*limit);
                Ok((w.clone(), start, stop))
            }
            (Source::File { .. }, None) => Err(wrong_source()),
        }
    }

    fn poll<'a>(&'a mut self, cur: &'a Cursor, sock: &mut TxSocket) -> Result<Next<'a>, TxError> {
        if self.reap_then_copy {
            self.pending = ZcPending::Reap;
            return Ok(Next::Op(Op::Reap));
        }
        if let (Some(_), Source::File { file, .. }) = (self.last, &cur.source) {
            // The last send of a mapped file went: the file's size says whether a
            // shrink sent a zeroed page tail.
            self.pending = ZcPending::CheckSize;
            return Ok(Next::Op(Op::FileSize { file }));
        }
        if cur.remaining() == 0 {
            return Ok(Next::Done);
        }
        if let Source::File { file, offset, len } = &cur.source {
            let pos = offset + cur.sent;
            let covered = matches!(&self.window, Some((_, base, limit)) if pos >= *base && pos < *base + *limit as u64);
            if !covered {
                // Mapped no further than the file's end now: the bytes of a mapping past
                // it read as zeros up to the page's end, so a file that shrank is
                // reported, never padded.
                self.window = None;
                let page = zerocopy::page_size() as u64;
                let base = pos - pos % page;
                self.map_base = base;
                self.pending = ZcPending::Map;
                return Ok(Next::Op(Op::Map {
                    file,
                    at: base,
                    len: (offset + len - base).min(ZC_MAP_WINDOW_BYTES as u64) as usize,
                    slot: &mut self.mapped,
                }));
            }
        }
        let (region, start, stop) = self.region(cur)?;
        if let Some(op) = self.budget.before_send(sock) {
            self.pending = ZcPending::Measure;
            return Ok(Next::Op(op));
        }
        // Pinning is charged for the whole request (RLIMIT_MEMLOCK, optmem), and the
        // socket takes at most a buffer's worth: ask no more than that.
        self.want = (stop - start)
            .min(self.budget.space())
            .min(sock.cap(usize::MAX))
            .min(sock.sndbuf_bytes.max(PAGE_BYTES));
        let more = cur.remaining() > self.want as u64;
        let range = start..start + self.want;
        let copy = std::mem::take(&mut self.copy_next);
        let region = self.region.insert(region);
        if !copy && sock.zerocopy_on() && self.want >= sock.config.zerocopy_min_bytes {
            self.pending = ZcPending::SendZerocopy;
            return Ok(Next::Op(Op::SendZerocopy {
                region,
                range,
                more,
            }));
        }
        sock.counters.zc_copy_sends += 1;
        self.pending = ZcPending::SendCopy;
        Ok(Next::Op(Op::SendPinned {
            region,
            range,
            more,
        }))
    }

    fn complete(
        &mut self,
        cur: &mut Cursor,
        sock: &mut TxSocket,
        r: Completion,
    ) -> Result<Flow, TxError> {
        let pending = std::mem::take(&mut self.pending);
        self.region = None;
        let n = match (pending, r) {
            (ZcPending::Map, r) => {
                let n = r?;
                let pos = cur.file()?.1 + cur.sent;
                return match self.mapped.take() {
                    Some(m) if self.map_base + n as u64 > pos => {
                        self.window = Some((Pinned::Map(Arc::new(m)), self.map_base, n));
                        Ok(Flow::Continue)
                    }
                    _ => Err(cur.truncated()),
                };
            }
            (ZcPending::CheckSize, r) => {
                let size = r? as u64;
                let n = self.last.take().unwrap_or(0);
                self.window = None;
                cur.took(sock, n, self.want);
                let (_, offset, len) = cur.file()?;
                if size < offset + len {
                    return Err(cur.truncated());
                }
                return Ok(Flow::Continue);
            }
            (ZcPending::Measure, r) => {
                self.budget.complete(sock, r?);
                return Ok(Flow::Continue);
            }
            (ZcPending::Reap, r) => {
                sock.reaped(r)?;
                self.reap_then_copy = false;
                self.copy_next = true;
                // Nothing was owed, so no zero-copy send of this size can succeed:
                // stop trying.
                if sock.completions_owed() == 0 && sock.counters.zc_disabled == 0 {
                    tracing::info!(
                        "zero-copy sends refused with ENOBUFS while none were owed; copying from now on"
                    );
                    sock.counters.zc_disabled = 1;
                }
                return Ok(Flow::Continue);
            }
            (ZcPending::SendZerocopy, Err(Errno::NOBUFS)) => {
                // Too many completions owed (optmem), or the pages cannot be pinned
                // (RLIMIT_MEMLOCK without CAP_IPC_LOCK): collect the completions and
                // copy this one.
                sock.counters.zc_enobufs += 1;
                self.reap_then_copy = true;
                return Ok(Flow::Continue);
            }
            (ZcPending::SendZerocopy | ZcPending::SendCopy, Err(Errno::FAULT)) => {
                return Err(cur.efault());
            }
            (ZcPending::SendZerocopy, r) => {
                let n = r?;
                sock.counters.zc_sends += 1;
                n
            }
            (_, r) => r?,
        };
        // Measured again before the next send (no `SO_SNDBUF` refresh here).
        self.budget.space = None;
        if self.window.is_some() && n as u64 == cur.remaining() {
            // The last bytes of a mapped file: counted once its size is checked (a
            // shrink after the last window was mapped may have sent a zeroed page
            // tail: said rather than reported as success).
            self.last = Some(n);
            return Ok(Flow::Continue);
        }
        let short = cur.took(sock, n, self.want);
        if short {
            return Ok(Flow::Blocked);
        }
        Ok(Flow::Continue)
    }
}
