//! The per-socket transmit state, and [`Transmit`]: one byte range on its way to a
//! socket, an I/O-free state machine ([`Transmit::poll_op`], [`Transmit::complete`])
//! with a readiness executor on top ([`Transmit::advance`]).

use std::io;
use std::os::fd::BorrowedFd;

use linerate_sys::net::SockOpt;
use linerate_sys::zerocopy::ZeroCopy;
use linerate_sys::Errno;

use crate::op::{Completion, Flow, Next, Op};
use crate::steps::{Cursor, Machine};
use crate::{Counters, Source, Strategy};

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
    /// derives it from the send buffer (see [`TxSocket::unset`]); `Some(0)` leaves the
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
        match Errno::of(&e) {
            Some(Errno::PIPE | Errno::CONNRESET | Errno::NOTCONN) => TxError::PeerGone(e),
            _ => TxError::Io(e),
        }
    }
}

impl From<Errno> for TxError {
    fn from(e: Errno) -> Self {
        TxError::from(e.io())
    }
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
    pub(crate) config: TxConfig,
    pub(crate) counters: Counters,
    /// `SO_SNDBUF` as the kernel reports it: the ceiling of queued payload.
    pub(crate) sndbuf_bytes: usize,
    pub(crate) zc: Option<ZeroCopy>,
    /// The next step of the socket's setup.
    setup: Setup,
}

/// The socket's setup, one operation at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// Read `SO_SNDBUF`.
    SendBuffer,
    /// Set `TCP_NOTSENT_LOWAT` to this.
    Lowat(i32),
    /// Turn `SO_ZEROCOPY` on.
    ZeroCopy,
    /// Set up.
    Ready,
}

impl TxSocket {
    /// The state of a socket to be set up for transmits with `config`, with no call
    /// made: [`TxSocket::setup_op`] hands out the operations that set it up, and
    /// [`TxSocket::setup_complete`] takes their results.
    ///
    /// For the batched strategies the setup sets `TCP_NOTSENT_LOWAT` to the send buffer
    /// size unless configured otherwise. The kernel then reports the socket writable
    /// only when fewer than half that many bytes wait unsent (`tcp_stream_memory_free`
    /// with its wake shift of 1) and a third of the buffer is free
    /// (`sk_stream_min_wspace`): the "sleep until 50% free" of seed 000, so each
    /// wake-up has a large batch to send.
    ///
    /// For `zerocopy` it sets `SO_ZEROCOPY`; if the kernel refuses, the socket copies
    /// and [`Counters::zc_disabled`] says so.
    pub fn unset(config: TxConfig) -> TxSocket {
        TxSocket {
            config,
            counters: Counters::default(),
            sndbuf_bytes: 0,
            zc: None,
            setup: Setup::SendBuffer,
        }
    }

    /// Sets up a connected, non-blocking socket for transmits with `config` now, by
    /// the readiness executor (see [`TxSocket::unset`]).
    pub fn new(fd: BorrowedFd<'_>, config: TxConfig) -> Result<TxSocket, TxError> {
        linerate_sys::ignore_sigpipe();
        let mut sock = TxSocket::unset(config);
        while let Some(mut op) = sock.setup_op() {
            let r = linerate_sys::exec::now(fd, &mut op, None);
            sock.setup_complete(r)?;
        }
        Ok(sock)
    }

    /// The next operation of the socket's setup; none once it is set up.
    pub fn setup_op(&self) -> Option<Op<'static>> {
        match self.setup {
            Setup::SendBuffer => Some(Op::SendBufferSize),
            Setup::Lowat(value) => Some(Op::SetOption {
                opt: SockOpt::NotSentLowat,
                value,
            }),
            Setup::ZeroCopy => Some(Op::SetOption {
                opt: SockOpt::ZeroCopy,
                value: 1,
            }),
            Setup::Ready => None,
        }
    }

    /// Whether the setup is done.
    pub fn is_set_up(&self) -> bool {
        self.setup == Setup::Ready
    }

    /// Takes the result of [`TxSocket::setup_op`]'s operation.
    pub fn setup_complete(&mut self, r: Completion) -> Result<(), TxError> {
        self.counters.syscalls += 1;
        let zerocopy = self.config.strategy == Strategy::Zerocopy && self.config.zerocopy;
        let after_lowat = if zerocopy {
            Setup::ZeroCopy
        } else {
            Setup::Ready
        };
        self.setup = match self.setup {
            Setup::SendBuffer => {
                self.sndbuf_bytes = r?;
                let lowat = self.config.notsent_lowat.unwrap_or(self.sndbuf_bytes);
                if self.config.strategy.is_batched() && lowat > 0 {
                    Setup::Lowat(i32::try_from(lowat).unwrap_or(i32::MAX))
                } else {
                    after_lowat
                }
            }
            Setup::Lowat(_) => {
                r?;
                after_lowat
            }
            Setup::ZeroCopy => {
                match r {
                    Ok(_) => self.zc = Some(ZeroCopy::tracker()),
                    Err(e) => {
                        tracing::info!("SO_ZEROCOPY refused ({e}); this socket copies");
                        self.counters.zc_disabled = 1;
                    }
                }
                Setup::Ready
            }
            Setup::Ready => {
                return Err(TxError::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a setup result for a socket set up",
                )))
            }
        };
        Ok(())
    }

    /// A socket's state with no socket behind it, for driving transmits one completion
    /// at a time in tests.
    #[cfg(test)]
    pub(crate) fn detached(config: TxConfig, sndbuf_bytes: usize) -> TxSocket {
        TxSocket {
            sndbuf_bytes,
            setup: Setup::Ready,
            ..TxSocket::unset(config)
        }
    }

    /// Counts a resumed transmit (a writable event handled), for executors other than
    /// [`Transmit::advance`], which counts its own.
    pub fn count_wakeup(&mut self) {
        self.counters.wakeups += 1;
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
    /// turns zero-copy off for the socket when most sends were copied anyway: the
    /// readiness executor's [`Op::Reap`], then [`TxSocket::reaped`].
    pub fn reap(&mut self, fd: BorrowedFd<'_>) -> Result<(), TxError> {
        let r = linerate_sys::exec::now(fd, &mut Op::Reap, self.zc.as_mut());
        self.reaped(r)
    }

    /// The socket's zero-copy tracker, which an executor's zero-copy sends and reaps
    /// use (none: zero-copy is off for the socket).
    pub fn zero_copy(&mut self) -> Option<&mut ZeroCopy> {
        self.zc.as_mut()
    }

    /// Takes the result of an [`Op::Reap`] (the number of reads it made): counts the
    /// completions read, and turns zero-copy off for the socket when most sends were
    /// copied anyway.
    pub fn reaped(&mut self, r: Completion) -> Result<(), TxError> {
        let Some(zc) = self.zc.as_ref() else {
            return Ok(());
        };
        // Count what was read even when a later read failed.
        let totals = zc.totals();
        self.counters.zc_completions = totals.completed;
        self.counters.zc_copied = totals.copied;
        self.counters.syscalls += r.map_or(1, |reads| reads as u64);
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

    pub(crate) fn zerocopy_on(&self) -> bool {
        self.zc.is_some() && self.counters.zc_disabled == 0
    }

    pub(crate) fn cap(&self, default: usize) -> usize {
        self.config.max_call_bytes.unwrap_or(default).max(1)
    }
}

/// One byte range on its way to a socket.
///
/// Driven either by [`Transmit::advance`] on each writable event (the readiness
/// executor), or by an executor of its own: [`Transmit::poll_op`] says which operation
/// comes next, and [`Transmit::complete`] takes its result.
pub struct Transmit {
    cur: Cursor,
    /// The strategy's state machine, chosen at the first poll from the socket's
    /// configuration.
    machine: Option<Machine>,
    /// The file ended early, these bytes of those asked sent: its size now is asked
    /// ([`Op::FileSize`]) before the error is given.
    shrank: Option<(u64, u64)>,
}

impl std::fmt::Debug for Transmit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transmit")
            .field("len", &self.cur.source.len())
            .field("sent", &self.cur.sent)
            .field(
                "pipe_held",
                &self.machine.as_ref().map_or(0, Machine::pipe_held),
            )
            .finish()
    }
}

impl Transmit {
    /// A transmit of `source`, nothing sent yet.
    pub fn new(source: Source) -> Transmit {
        Transmit {
            cur: Cursor { source, sent: 0 },
            machine: None,
            shrank: None,
        }
    }

    /// Bytes the socket has accepted.
    pub fn sent(&self) -> u64 {
        self.cur.sent
    }

    /// Bytes still to send; at least 1 while a truncation waits to be reported (the
    /// file's size is asked first), so a transmit is done exactly when this is 0.
    pub fn remaining(&self) -> u64 {
        self.cur.remaining().max(u64::from(self.shrank.is_some()))
    }

    /// The operation that comes next by the socket's strategy, or [`Next::Done`] when
    /// every byte was accepted. What it borrows stays put until [`Transmit::complete`]
    /// takes its result; poll again only after that (or after [`Transmit::would_block`]
    /// for an operation that would block: the next poll asks for it again).
    ///
    /// It says [`Next::Done`] exactly when [`Transmit::remaining`] is 0, so a caller
    /// can tell a finished transmit without polling it.
    pub fn poll_op<'a>(&'a mut self, sock: &mut TxSocket) -> Result<Next<'a>, TxError> {
        if self.shrank.is_some() {
            return Ok(Next::Op(Op::FileSize {
                file: self.cur.file()?.0,
            }));
        }
        if self.cur.remaining() == 0 {
            return Ok(Next::Done);
        }
        let Transmit {
            cur,
            machine,
            shrank,
        } = self;
        let machine = machine.get_or_insert_with(|| Machine::choose(cur, sock));
        match machine.poll(cur, sock) {
            Err(TxError::Truncated { sent, expected, .. }) => {
                *shrank = Some((sent, expected));
                Ok(Next::Op(Op::FileSize {
                    file: cur.file()?.0,
                }))
            }
            r => r,
        }
    }

    /// Takes the result of the operation [`Transmit::poll_op`] gave last (never
    /// `EINTR` or `EAGAIN`: those are the executor's). Each is counted as a call (a
    /// reap as the reads it made).
    pub fn complete(&mut self, sock: &mut TxSocket, r: Completion) -> Result<Flow, TxError> {
        let Some(machine) = self.machine.as_mut() else {
            return Err(TxError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a result for a transmit that asked for nothing",
            )));
        };
        if !machine.reaping() {
            sock.counters.syscalls += 1;
        }
        if let Some((sent, expected)) = self.shrank.take() {
            return Err(TxError::Truncated {
                sent,
                expected,
                file_len: r.unwrap_or(0) as u64,
            });
        }
        match machine.complete(&mut self.cur, sock, r) {
            Err(TxError::Truncated { sent, expected, .. }) => {
                self.shrank = Some((sent, expected));
                Ok(Flow::Continue)
            }
            r => r,
        }
    }

    /// The operation [`Transmit::poll_op`] gave last would block and is forgotten: what
    /// was measured for it (the free send space) is measured again for the next. The
    /// call is counted, and its `EAGAIN`.
    pub fn would_block(&mut self, sock: &mut TxSocket) {
        sock.counters.syscalls += 1;
        sock.counters.eagain += 1;
        if let Some(m) = self.machine.as_mut() {
            m.would_block();
        }
    }

    /// Sends what the socket takes by the socket's strategy; resumes where the last call
    /// stopped. Call on each writable event until it returns [`Progress::Done`].
    pub fn advance(
        &mut self,
        fd: BorrowedFd<'_>,
        sock: &mut TxSocket,
    ) -> Result<Progress, TxError> {
        sock.count_wakeup();
        loop {
            let r = match self.poll_op(sock)? {
                Next::Done => return Ok(Progress::Done),
                Next::Op(mut op) => {
                    let zc = sock.zc.as_mut();
                    linerate_sys::exec::now(fd, &mut op, zc)
                }
            };
            if r == Err(Errno::AGAIN) {
                self.would_block(sock);
                return Ok(Progress::Blocked);
            }
            if self.complete(sock, r)? == Flow::Blocked {
                return Ok(Progress::Blocked);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every strategy driven one completion at a time, with no socket: short counts,
    //! errors, a file that shrinks, and the free-space sizing's measurements.

    use std::fs::File;
    use std::io::Write;
    use std::sync::Arc;

    use super::*;
    use crate::Op;
    use std::os::fd::AsFd;

    fn file_of(len: usize) -> (tempfile::NamedTempFile, Arc<File>, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut t = tempfile::NamedTempFile::new().unwrap();
        t.write_all(&bytes).unwrap();
        let f = Arc::new(File::open(t.path()).unwrap());
        (t, f, bytes)
    }

    fn file_tx(file: &Arc<File>, offset: u64, len: u64) -> Transmit {
        Transmit::new(Source::File {
            file: Arc::clone(file),
            offset,
            len,
        })
    }

    fn sock(strategy: Strategy) -> TxSocket {
        TxSocket::detached(TxConfig::new(strategy), 64 * 1024)
    }

    /// The next operation, described: its name and its (offset, length, more).
    fn next(t: &mut Transmit, s: &mut TxSocket) -> (&'static str, u64, usize, bool) {
        match t.poll_op(s).unwrap() {
            Next::Done => ("done", 0, 0, false),
            Next::Op(op) => {
                let name = op.name();
                match op {
                    Op::Read { at, buf, .. } => (name, at, buf.len(), false),
                    Op::Send { data, more } => (name, 0, data.len(), more),
                    Op::Sendfile { at, len, .. } => (name, at, len, false),
                    Op::SpliceIn { at, len, .. } => (name, at, len, false),
                    Op::SpliceOut { len, more, .. } => (name, 0, len, more),
                    Op::SendZerocopy { range, more, .. } | Op::SendPinned { range, more, .. } => {
                        (name, range.start as u64, range.len(), more)
                    }
                    _ => (name, 0, 0, false),
                }
            }
        }
    }

    /// Answers the pending resource operation (a pipe, a mapping, a size) as the
    /// readiness executor does; its result.
    fn resource(t: &mut Transmit, s: &mut TxSocket, f: &File) -> Completion {
        let r = match t.poll_op(s).unwrap() {
            // The socket is not used by these operations.
            Next::Op(mut op) => linerate_sys::exec::now(f.as_fd(), &mut op, None),
            Next::Done => panic!("done"),
        };
        t.complete(s, r).unwrap();
        r
    }

    fn ok(t: &mut Transmit, s: &mut TxSocket, n: usize) -> Flow {
        t.complete(s, Ok(n)).unwrap()
    }

    #[test]
    fn batched_sendfile_asks_for_everything_and_again_after_a_short_count() {
        let (_t, f, _) = file_of(10_000);
        let mut s = sock(Strategy::SendfileBatched);
        let mut t = file_tx(&f, 100, 9_000);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 100, 9_000, false));
        assert_eq!(ok(&mut t, &mut s, 3_000), Flow::Continue);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 3_100, 6_000, false));
        ok(&mut t, &mut s, 6_000);
        assert_eq!(next(&mut t, &mut s).0, "done");
        assert_eq!((t.sent(), t.remaining()), (9_000, 0));
        // Each completion is a call, whoever made it.
        let c = s.counters();
        assert_eq!((c.bytes, c.short_sends, c.syscalls), (9_000, 1, 2));
    }

    #[test]
    fn a_file_that_ends_early_is_reported_never_padded() {
        let (_t, f, _) = file_of(5_000);
        for strategy in [
            Strategy::SendfileBatched,
            Strategy::Sendfile4k,
            Strategy::SendfileChunked { chunk_bytes: 1024 },
        ] {
            let mut s = sock(strategy);
            // The range says 8,000 bytes; the file has 5,000.
            let mut t = file_tx(&f, 0, 8_000);
            next(&mut t, &mut s);
            ok(&mut t, &mut s, 1_000);
            next(&mut t, &mut s);
            // The end of the file: its size is asked, then the error given.
            assert_eq!(ok(&mut t, &mut s, 0), Flow::Continue);
            assert_eq!(next(&mut t, &mut s).0, "file-size");
            match t.complete(&mut s, Ok(5_000)) {
                Err(TxError::Truncated {
                    sent,
                    expected,
                    file_len,
                }) => assert_eq!(
                    (sent, expected, file_len),
                    (1_000, 8_000, 5_000),
                    "{strategy}"
                ),
                other => panic!("{strategy}: {other:?}"),
            }
        }
    }

    #[test]
    fn free_space_sizing_measures_before_each_send_and_rereads_the_buffer_when_it_all_fit() {
        let (_t, f, _) = file_of(100_000);
        let mut s = TxSocket::detached(
            TxConfig {
                sizing: Sizing::FreeSpace,
                ..TxConfig::new(Strategy::SendfileBatched)
            },
            16_384,
        );
        let mut t = file_tx(&f, 0, 100_000);
        assert_eq!(next(&mut t, &mut s).0, "queued-bytes");
        ok(&mut t, &mut s, 10_000);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 0, 6_384, false));
        ok(&mut t, &mut s, 6_384);
        // All of it fit: the buffer may have grown.
        assert_eq!(next(&mut t, &mut s).0, "send-buffer-size");
        ok(&mut t, &mut s, 65_536);
        assert_eq!(next(&mut t, &mut s).0, "queued-bytes");
        // A full queue still makes one call of a page.
        ok(&mut t, &mut s, 70_000);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 6_384, 4_096, false));
        ok(&mut t, &mut s, 1_000);
        // Short: measured again, no buffer re-read.
        assert_eq!(next(&mut t, &mut s).0, "queued-bytes");
        // Counted as their results come (the last is still asked for).
        assert_eq!(s.counters().space_queries, 2);
        assert_eq!(s.sndbuf_bytes, 65_536);
        // A send that would block is forgotten with its measurement: the next
        // writable event measures again.
        ok(&mut t, &mut s, 60_000);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 7_384, 5_536, false));
        t.would_block(&mut s);
        assert_eq!(next(&mut t, &mut s).0, "queued-bytes");
    }

    #[test]
    fn page_at_a_time_stops_each_call_at_a_page_boundary() {
        let (_t, f, _) = file_of(20_000);
        let mut s = sock(Strategy::Sendfile4k);
        let mut t = file_tx(&f, 1_000, 10_000);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 1_000, 3_096, false));
        ok(&mut t, &mut s, 3_096);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 4_096, 4_096, false));
        ok(&mut t, &mut s, 100);
        assert_eq!(next(&mut t, &mut s), ("sendfile", 4_196, 3_996, false));
        assert_eq!(s.counters().short_sends, 1);
    }

    #[test]
    fn copy_reads_then_sends_what_it_read_with_more_until_the_last() {
        let (_t, f, bytes) = file_of(100_000);
        let mut s = sock(Strategy::Copy);
        let mut t = file_tx(&f, 10, 70_000);
        let mut out = Vec::new();
        loop {
            let r = match t.poll_op(&mut s).unwrap() {
                Next::Done => break,
                Next::Op(Op::Read { at, buf, .. }) => {
                    assert_eq!(buf.len(), 65_536.min(70_010 - at as usize));
                    let n = buf.len();
                    buf.copy_from_slice(&bytes[at as usize..at as usize + n]);
                    n
                }
                Next::Op(Op::Send { data, more }) => {
                    // More follows when bytes past these remain to be read.
                    assert_eq!(more, out.len() + data.len() < 70_000);
                    // Half of each send is taken: the rest goes in the next.
                    let n = data.len().div_ceil(2);
                    out.extend_from_slice(&data[..n]);
                    n
                }
                Next::Op(op) => panic!("copy asked for {}", op.name()),
            };
            t.complete(&mut s, Ok(r)).unwrap();
        }
        assert_eq!(out, &bytes[10..70_010]);
        assert_eq!(s.counters().bytes, 70_000);
    }

    #[test]
    fn copy_of_a_file_that_ends_early_is_reported() {
        let (_t, f, _) = file_of(1_000);
        let mut s = sock(Strategy::Copy);
        let mut t = file_tx(&f, 0, 2_000);
        assert_eq!(next(&mut t, &mut s), ("read", 0, 2_000, false));
        ok(&mut t, &mut s, 0);
        assert_eq!(next(&mut t, &mut s).0, "file-size");
        assert!(matches!(
            t.complete(&mut s, Ok(1_000)),
            Err(TxError::Truncated {
                file_len: 1_000,
                ..
            })
        ));
    }

    #[test]
    fn memory_goes_out_by_copying_under_every_file_strategy_and_says_so_once() {
        for strategy in [
            Strategy::SendfileBatched,
            Strategy::Splice,
            Strategy::Sendfile4k,
        ] {
            let mut s = TxSocket::detached(
                TxConfig {
                    max_call_bytes: Some(1_000),
                    ..TxConfig::new(strategy)
                },
                65_536,
            );
            let buf: Arc<[u8]> = vec![7u8; 2_500].into();
            let mut t = Transmit::new(Source::memory(buf));
            assert_eq!(next(&mut t, &mut s), ("send", 0, 1_000, true));
            ok(&mut t, &mut s, 1_000);
            assert_eq!(next(&mut t, &mut s), ("send", 0, 1_000, true));
            ok(&mut t, &mut s, 1_000);
            assert_eq!(next(&mut t, &mut s), ("send", 0, 500, false));
            ok(&mut t, &mut s, 500);
            assert_eq!(next(&mut t, &mut s).0, "done");
            assert_eq!(s.counters().degraded, 1, "{strategy}");
        }
    }

    #[test]
    fn splice_fills_the_pipe_then_empties_it_and_waits_after_a_short_splice_out() {
        let (_t, f, _) = file_of(3 << 20);
        let mut s = sock(Strategy::Splice);
        let mut t = file_tx(&f, 0, 3 << 20);
        // The pipe first, from the executor (the thread's spares, or a new one).
        assert_eq!(next(&mut t, &mut s).0, "pipe");
        assert_eq!(resource(&mut t, &mut s, &f), Ok(0));
        // At most a pipe's worth per splice in.
        assert_eq!(next(&mut t, &mut s), ("splice-in", 0, 1 << 20, false));
        ok(&mut t, &mut s, 600_000);
        assert_eq!(next(&mut t, &mut s), ("splice-out", 0, 600_000, true));
        assert_eq!(ok(&mut t, &mut s, 200_000), Flow::Blocked);
        assert_eq!(next(&mut t, &mut s), ("splice-out", 0, 400_000, true));
        ok(&mut t, &mut s, 400_000);
        assert_eq!(next(&mut t, &mut s), ("splice-in", 600_000, 1 << 20, false));
        assert_eq!(t.sent(), 600_000);
        assert_eq!(s.counters().short_sends, 1);
        // A socket that takes nothing from a full pipe has gone.
        ok(&mut t, &mut s, 5);
        assert_eq!(next(&mut t, &mut s), ("splice-out", 0, 5, true));
        assert!(matches!(
            t.complete(&mut s, Ok(0)),
            Err(TxError::PeerGone(_))
        ));
    }

    #[test]
    fn zerocopy_without_the_socket_option_copies_and_counts_it() {
        let mut s = TxSocket::detached(TxConfig::new(Strategy::Zerocopy), 100_000);
        let buf: Arc<[u8]> = vec![1u8; 300_000].into();
        let mut t = Transmit::new(Source::memory(buf));
        // No more than a send buffer's worth is pinned for one call.
        assert_eq!(next(&mut t, &mut s), ("send-pinned", 0, 100_000, true));
        assert_eq!(ok(&mut t, &mut s, 100_000), Flow::Continue);
        assert_eq!(
            next(&mut t, &mut s),
            ("send-pinned", 100_000, 100_000, true)
        );
        // Short: the socket is full.
        assert_eq!(ok(&mut t, &mut s, 50_000), Flow::Blocked);
        assert_eq!(
            next(&mut t, &mut s),
            ("send-pinned", 150_000, 100_000, true)
        );
        let c = s.counters();
        assert_eq!((c.zc_copy_sends, c.zc_sends, c.short_sends), (3, 0, 1));
    }

    #[test]
    fn zerocopy_refused_with_enobufs_reaps_then_copies_and_stops_when_nothing_was_owed() {
        // A real socket only for SO_ZEROCOPY; every result below is made up.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut s = TxSocket::new(
            std::os::fd::AsFd::as_fd(&c),
            TxConfig::new(Strategy::Zerocopy),
        )
        .unwrap();
        assert_eq!(s.counters().zc_disabled, 0);
        let buf: Arc<[u8]> = vec![1u8; 40_000].into();
        let mut t = Transmit::new(Source::memory(buf));
        assert_eq!(next(&mut t, &mut s), ("send-zerocopy", 0, 40_000, false));
        let r = t.complete(&mut s, Err(Errno::NOBUFS));
        assert_eq!(r.unwrap(), Flow::Continue);
        assert_eq!(next(&mut t, &mut s).0, "reap");
        ok(&mut t, &mut s, 0);
        // None were owed: zero-copy cannot work here, and this send is copied.
        assert_eq!(s.counters().zc_disabled, 1);
        assert_eq!(next(&mut t, &mut s), ("send-pinned", 0, 40_000, false));
        ok(&mut t, &mut s, 40_000);
        assert_eq!(next(&mut t, &mut s).0, "done");
        let c = s.counters();
        assert_eq!((c.zc_enobufs, c.zc_sends, c.zc_copy_sends), (1, 0, 1));
    }

    #[test]
    fn zerocopy_of_a_file_maps_a_window_and_reports_a_shrink_as_truncation() {
        let (t0, f, _) = file_of(50_000);
        let mut s = TxSocket::detached(TxConfig::new(Strategy::Zerocopy), 1 << 20);
        let mut t = file_tx(&f, 5_000, 40_000);
        // The window starts at the page below the range, mapped by the executor no
        // further than the file's end.
        assert_eq!(next(&mut t, &mut s).0, "map");
        assert_eq!(resource(&mut t, &mut s, &f), Ok(45_000 - 4_096));
        assert_eq!(next(&mut t, &mut s), ("send-pinned", 904, 40_000, false));
        t0.as_file().set_len(10_000).unwrap();
        assert_eq!(
            t.complete(&mut s, Err(Errno::FAULT)).unwrap(),
            Flow::Continue
        );
        assert_eq!(next(&mut t, &mut s).0, "file-size");
        match t.complete(&mut s, Ok(10_000)) {
            Err(TxError::Truncated { file_len, .. }) => assert_eq!(file_len, 10_000),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_shrink_after_the_last_window_is_reported_and_the_transmit_not_done() {
        let (t0, f, _) = file_of(50_000);
        let mut s = TxSocket::detached(TxConfig::new(Strategy::Zerocopy), 1 << 20);
        let mut t = file_tx(&f, 0, 50_000);
        assert_eq!(next(&mut t, &mut s).0, "map");
        assert_eq!(resource(&mut t, &mut s, &f), Ok(50_000));
        assert_eq!(next(&mut t, &mut s), ("send-pinned", 0, 50_000, false));
        // All of it went; the file shrank meanwhile, so a zeroed page tail may have.
        t0.as_file().set_len(10_000).unwrap();
        ok(&mut t, &mut s, 50_000);
        assert_eq!(next(&mut t, &mut s).0, "file-size");
        assert_eq!(ok(&mut t, &mut s, 10_000), Flow::Continue);
        // Not done: the error is still owed, after the size of the file now.
        assert!(t.remaining() > 0);
        assert_eq!(next(&mut t, &mut s).0, "file-size");
        match t.complete(&mut s, Ok(10_000)) {
            Err(TxError::Truncated {
                sent,
                expected,
                file_len,
            }) => assert_eq!((sent, expected, file_len), (50_000, 50_000, 10_000)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_reset_is_the_peer_gone_and_any_other_error_is_passed_on() {
        let (_t, f, _) = file_of(10_000);
        let mut s = sock(Strategy::SendfileBatched);
        let mut t = file_tx(&f, 0, 10_000);
        next(&mut t, &mut s);
        assert!(matches!(
            t.complete(&mut s, Err(Errno::CONNRESET)),
            Err(TxError::PeerGone(_))
        ));
        let mut t = file_tx(&f, 0, 10_000);
        next(&mut t, &mut s);
        assert!(matches!(
            t.complete(&mut s, Err(Errno::IO)),
            Err(TxError::Io(_))
        ));
    }

    #[test]
    fn a_result_nobody_asked_for_is_refused() {
        let (_t, f, _) = file_of(10);
        let mut s = sock(Strategy::SendfileBatched);
        let mut t = file_tx(&f, 0, 10);
        assert!(matches!(t.complete(&mut s, Ok(10)), Err(TxError::Io(_))));
        assert_eq!(t.sent(), 0);
    }
}
