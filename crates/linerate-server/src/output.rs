//! A connection's output: the queue of responses and how its parts leave, as an I/O-free
//! state machine. [`Output::poll`] says what comes next (a gather `sendmsg`, the
//! transmit engine's operation for a file part, `TCP_CORK` on or off) and
//! [`Output::complete`] takes its result; the connection makes the calls (see
//! `Conn::flush`). The page-cache probe, the hand-off of cold windows to the disk
//! helpers and seed 001's collapse are file-side bookkeeping done here, never a call on
//! the socket.
//!
//! Consecutive byte parts across queued responses go out in one `sendmsg` of at most
//! `IOV_MAX - 1` buffers; file parts go through the transmit engine.
//!
//! Seed 001's lesson, that a fragmented chain must be collapsed rather than sent piece
//! by piece or dropped, applies twice. Collapse: a file range of at most
//! `--collapse` bytes (the parts of a multipart/byteranges answer, say) is read into
//! the gather, so it and the heads around it go in one `sendmsg` instead of a
//! `sendfile` and a `sendmsg` each; with the residency probe on it is read with
//! `RWF_NOWAIT`, and a range not in the page cache is left to the probe. Defrag: a
//! gather with more buffers than one `sendmsg` takes is linearized from its
//! `IOV_MAX - 1`th buffer on into one copy, the segment seed 001 keeps in reserve, so
//! the queue still goes in one call. Both are counted (the status page's `queue`).
//!
//! With the residency probe on, a file part goes out one read-ahead window at a time,
//! each checked to be in the page cache first; a window that is not is handed to the
//! disk helpers, and the connection sends nothing until they are done (see
//! [`crate::disk`]). While a window goes out, the next one is probed, and handed to the
//! helpers if it is not resident, so a cold file's reads overlap its sends.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::sync::Arc;

use linerate_sys::net::{SockOpt, IOV_MAX};
use linerate_sys::op::{Completion, Op, Piece};
use linerate_sys::Errno;
use linerate_tx::{Flow, Next, Source, Transmit, TxError, TxSocket};

use crate::config::Sending;
use crate::disk::{Disk, Residency};
use crate::response::{FileRange, Part, Response};
use crate::stats::Stats;

/// Bytes gathered into one `sendmsg` at most.
const GATHER_BYTES: usize = 1 << 20;
/// Most bytes of a cold window a connection waits for the helpers to read: the rest
/// is read ahead while these go out, so a cold file's first bytes leave sooner.
const WAITED_READ: u64 = 256 * 1024;

/// What the queue needs to know of its worker and connection.
pub(crate) struct Ctx<'a> {
    pub disk: Option<&'a Disk>,
    pub stats: &'a Stats,
    pub sending: &'a Sending,
    /// A Unix socket: no `TCP_CORK`.
    pub unix: bool,
}

/// What the queue wants next.
pub(crate) enum OutNext<'a> {
    /// Make this call, then [`Output::complete`] with its result.
    Op(Op<'a>),
    /// A file part is next and the socket has no transmit state yet: make it
    /// ([`TxSocket::unset`], no call) and poll again; its setup's operations come next.
    PrepareSocket,
    /// Nothing is queued.
    Empty,
    /// The helpers are reading the next window; [`Output::disk_ready`] says when.
    DiskWait,
    /// A slice of a large file went: the other connections have their turn first.
    Yield,
}

/// Where the queue stands, with nothing borrowed.
enum Step {
    Transmit,
    Gather,
    Cork(bool),
    PrepareSocket,
    SetUp,
    Ask,
    Empty,
    DiskWait,
    Yield,
}

/// A question of the file side the queue asks before it sends; its answer comes back
/// through [`Output::complete`] ([`Op::Probe`], [`Op::Read`], [`Op::Warm`]).
enum Question {
    /// Are `len` bytes from `at` all in the page cache?
    Resident { file: Arc<File>, at: u64, len: u64 },
    /// The bytes of a file range, for a collapse (from the page cache only, `nowait`):
    /// the queue's `part`th part from the front (pipelined requests for the same range
    /// are different questions).
    Read {
        file: Arc<File>,
        at: u64,
        len: u64,
        nowait: bool,
        part: usize,
    },
    /// Hand a window to the disk helpers.
    Warm { file: Arc<File>, at: u64, len: u64 },
}

impl Question {
    fn same(&self, other: &Question) -> bool {
        use Question::*;
        match (self, other) {
            (
                Resident { file, at, len },
                Resident {
                    file: f,
                    at: a,
                    len: l,
                },
            )
            | (
                Warm { file, at, len },
                Warm {
                    file: f,
                    at: a,
                    len: l,
                },
            ) => Arc::ptr_eq(file, f) && at == a && len == l,
            (
                Read {
                    file,
                    at,
                    len,
                    nowait,
                    part,
                },
                Read {
                    file: f,
                    at: a,
                    len: l,
                    nowait: n,
                    part: p,
                },
            ) => Arc::ptr_eq(file, f) && at == a && len == l && nowait == n && part == p,
            _ => false,
        }
    }
}

/// What a question was answered.
enum Answer {
    Resident(Result<bool, Errno>),
    /// The bytes, whole (none: a short read, or taken already by this step).
    Read(Result<Option<Vec<u8>>, Errno>),
    /// Handed to the helpers.
    Warm(bool),
}

impl Answer {
    /// The answer, its bytes taken out (a second look finds none).
    fn take(&mut self) -> Answer {
        match self {
            Answer::Resident(r) => Answer::Resident(*r),
            Answer::Read(Ok(b)) => Answer::Read(Ok(b.take())),
            Answer::Read(Err(e)) => Answer::Read(Err(*e)),
            Answer::Warm(w) => Answer::Warm(*w),
        }
    }
}

/// The step asked a question and waits for its answer.
struct Asking;

/// What the connection has of the transmit state of its socket.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Have {
    None,
    Unset,
    Ready,
}

/// A result for a call the queue did not ask for, or a poll out of turn: the
/// executor's fault, refused.
fn asked_for_nothing() -> TxError {
    TxError::Io(io::Error::new(
        io::ErrorKind::InvalidInput,
        "a result for an output queue that asked for nothing",
    ))
}

/// The call [`Output::poll`] gave last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Pending {
    #[default]
    None,
    Gather,
    Transmit,
    Cork(bool),
    SetUp,
    Ask,
}

/// Responses' room an idle queue keeps (in the queue, and in the finished list).
const KEPT_ROOM: usize = 16;

/// The responses of one connection on their way out.
#[derive(Default)]
pub(crate) struct Output {
    queue: VecDeque<Response>,
    /// Bytes of the first part of the first response already sent.
    front_sent: usize,
    transmit: Option<Box<Transmit>>,
    /// Responses sent but not yet logged.
    finished: Vec<Response>,
    /// Bytes of the current file part the current transmit covers.
    slice_len: u64,
    /// The current transmit ends at the slice limit (not at a read-ahead window's end):
    /// the connection yields its turn there.
    yield_at_end: bool,
    /// `TCP_CORK` is set, for the front file part.
    corked: bool,
    /// The front file part is known resident up to this file offset.
    resident_until: u64,
    /// ... because its whole file was found resident ([`Residency::Whole`]), which is
    /// asked again at each turn (a look, or one probe per epoch for the file).
    on_whole: bool,
    /// The queue waits for the helpers' window at `job_at`; nothing is sent.
    disk_wait: bool,
    /// The file offset of the window the helpers are reading for this connection.
    job_at: Option<u64>,
    /// The question asked and not answered yet, and the buffer a read lands in.
    asking: Option<(Question, Vec<u8>)>,
    /// The answers the step in progress was given.
    answers: Vec<(Question, Answer)>,
    /// Parts the collapse of the step in progress looked at already.
    collapse_seen: usize,
    /// The defrag copy of a pending gather: its buffers past `IOV_MAX - 2`.
    tail: Vec<u8>,
    pending: Pending,
    /// The transmit in progress was polled in this turn (its wake-up is counted).
    resumed: bool,
    /// How fast the client takes what is owed (`--min-send-rate`).
    pub rate: SendRate,
    /// Requests whose answers wait for password checks (docs/http.md W10).
    pub waiting: Vec<crate::conn::Waiting>,
}

/// What `--min-send-rate` judges a connection by: kept with its output queue, which
/// exists while answers are owed, so an idle connection holds none of it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendRate {
    /// Since when answers have been owed: the start of the window judged.
    pub since: Option<std::time::Instant>,
    /// The bytes the client had acknowledged when it was last judged.
    pub base: u64,
    /// It took too few.
    pub slow: bool,
}

impl Output {
    /// Queues a response.
    pub fn push(&mut self, r: Response) {
        debug_assert!(r.plan.head.is_none(), "a head its protocol has not written");
        self.queue.push_back(r);
    }

    /// Responses queued (sent whole or not).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Responses queued or being sent.
    pub fn busy(&self) -> bool {
        !self.queue.is_empty() || self.transmit.is_some()
    }

    /// Nothing queued, in flight, finished, pending or waited for: the queue holds no
    /// state a fresh one would not (so an idle connection can let it go whole).
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
            && self.transmit.is_none()
            && self.finished.is_empty()
            && matches!(self.pending, Pending::None)
            && !self.corked
            && !self.disk_wait
            && self.job_at.is_none()
            && self.asking.is_none()
            && self.waiting.is_empty()
    }

    /// Gives back the memory of an idle queue.
    pub fn release(&mut self) {
        self.queue = VecDeque::new();
        self.finished = Vec::new();
        self.tail = Vec::new();
        self.answers = Vec::new();
    }

    /// Keeps an empty queue's room for its next use (as a worker's spare), up to
    /// [`KEPT_ROOM`] responses; the rest of its memory goes.
    pub fn trim(&mut self) {
        self.rate = SendRate::default();
        if self.queue.capacity() > KEPT_ROOM {
            self.queue = VecDeque::new();
        }
        if self.finished.capacity() > KEPT_ROOM {
            self.finished = Vec::new();
        }
        self.tail = Vec::new();
        self.answers = Vec::new();
    }

    /// Gives back the list [`Output::take_finished`] took, emptied, so the next
    /// responses finish into it without an allocation.
    pub fn recycle_finished(&mut self, mut done: Vec<Response>) {
        if self.finished.capacity() == 0 && done.capacity() <= KEPT_ROOM {
            done.clear();
            self.finished = done;
        }
    }

    /// A new turn (a writable event, a drive): the transmit in progress counts a
    /// wake-up when it is next polled.
    pub fn begin_turn(&mut self) {
        self.resumed = false;
    }

    /// Some response was sent whole and not yet taken by [`Output::take_finished`].
    #[inline]
    pub fn has_finished(&self) -> bool {
        !self.finished.is_empty() || self.queue.front().is_some_and(|r| r.plan.parts.is_empty())
    }

    /// Takes the responses sent whole, for the log, in order.
    pub fn take_finished(&mut self) -> Vec<Response> {
        self.retire_sent();
        std::mem::take(&mut self.finished)
    }

    /// Takes every response not sent whole, with the bytes of the first that left
    /// (the connection is being closed).
    pub fn take_unsent(&mut self) -> (VecDeque<Response>, u64) {
        let in_flight = self.transmit.take().map_or(0, |t| t.sent());
        let front = self.front_sent as u64 + in_flight;
        (std::mem::take(&mut self.queue), front)
    }

    /// What comes next. Poll again only after [`Output::complete`] took the result of
    /// the call this gave (or forget a call that would block: the next poll gives it
    /// again).
    pub fn poll<'a>(
        &'a mut self,
        tx: Option<&mut TxSocket>,
        ctx: &Ctx<'_>,
    ) -> Result<OutNext<'a>, TxError> {
        let have_tx = match tx.as_deref() {
            None => Have::None,
            Some(t) if !t.is_set_up() => Have::Unset,
            Some(_) => Have::Ready,
        };
        match self.step(have_tx, ctx)? {
            Step::Empty => Ok(OutNext::Empty),
            Step::DiskWait => Ok(OutNext::DiskWait),
            Step::Yield => Ok(OutNext::Yield),
            Step::PrepareSocket => Ok(OutNext::PrepareSocket),
            Step::Ask => {
                let Some((q, buf)) = self.asking.as_mut() else {
                    return Err(asked_for_nothing());
                };
                self.pending = Pending::Ask;
                Ok(OutNext::Op(match q {
                    Question::Resident { file, at, len } => Op::Probe {
                        file,
                        at: *at,
                        len: *len,
                    },
                    Question::Read {
                        file, at, nowait, ..
                    } => Op::Read {
                        file,
                        at: *at,
                        buf: &mut buf[..],
                        nowait: *nowait,
                    },
                    Question::Warm { file, at, len } => Op::Warm {
                        file,
                        at: *at,
                        len: *len,
                    },
                }))
            }
            Step::SetUp => match tx.and_then(|t| t.setup_op()) {
                Some(op) => {
                    self.pending = Pending::SetUp;
                    Ok(OutNext::Op(op))
                }
                None => Err(asked_for_nothing()),
            },
            Step::Cork(on) => {
                self.pending = Pending::Cork(on);
                Ok(OutNext::Op(Op::SetOption {
                    opt: SockOpt::Cork,
                    value: i32::from(on),
                }))
            }
            Step::Gather => {
                self.pending = Pending::Gather;
                Ok(OutNext::Op(self.gather(ctx.stats)))
            }
            Step::Transmit => {
                // A transmit and its socket's state, as `step` found them.
                let (Some(t), Some(tx)) = (self.transmit.as_mut(), tx) else {
                    return Err(asked_for_nothing());
                };
                if !self.resumed {
                    self.resumed = true;
                    tx.count_wakeup();
                }
                match t.poll_op(tx)? {
                    Next::Op(op) => {
                        self.pending = Pending::Transmit;
                        Ok(OutNext::Op(op))
                    }
                    // A transmit with bytes left is not done.
                    Next::Done => Err(asked_for_nothing()),
                }
            }
        }
    }

    /// The call [`Output::poll`] gave last would block: it is forgotten (the next poll
    /// asks again, from measurements made then).
    fn would_block(&mut self, tx: Option<&mut TxSocket>) {
        if std::mem::take(&mut self.pending) == Pending::Transmit {
            if let (Some(t), Some(tx)) = (self.transmit.as_mut(), tx) {
                t.would_block(tx);
            }
        }
    }

    /// Takes the result of the call [`Output::poll`] gave last (never `EINTR`). A send
    /// that would block (`EAGAIN`) is forgotten and says [`Flow::Blocked`]: the next
    /// poll, on the next writable edge, asks for it again. The second value: bytes
    /// left.
    pub fn complete(
        &mut self,
        tx: Option<&mut TxSocket>,
        r: Completion,
        stats: &Stats,
    ) -> Result<(Flow, bool), TxError> {
        if r == Err(Errno::AGAIN) && self.pending != Pending::Ask {
            // The socket is full: the call is forgotten, and asked for again on the
            // next writable edge.
            self.would_block(tx);
            return Ok((Flow::Blocked, false));
        }
        match std::mem::take(&mut self.pending) {
            Pending::Ask => {
                let Some((q, buf)) = self.asking.take() else {
                    return Err(asked_for_nothing());
                };
                let a = match &q {
                    Question::Resident { .. } => {
                        Stats::add(&stats.probes, 1);
                        Answer::Resident(r.map(|n| n > 0))
                    }
                    // A short read (the file shrank, or a page not in memory) is not
                    // collapsed.
                    Question::Read { len, .. } => {
                        Answer::Read(r.map(|n| (n as u64 == *len).then_some(buf)))
                    }
                    Question::Warm { .. } => {
                        Stats::add(&stats.misses, 1);
                        Answer::Warm(r.is_ok_and(|n| n > 0))
                    }
                };
                self.answers.push((q, a));
                Ok((Flow::Continue, false))
            }
            Pending::Gather => {
                let n = r?;
                self.consume(n);
                Ok((Flow::Continue, n > 0))
            }
            Pending::Transmit => {
                let (Some(t), Some(tx)) = (self.transmit.as_mut(), tx) else {
                    return Err(asked_for_nothing());
                };
                let before = t.sent();
                let flow = t.complete(tx, r)?;
                Ok((flow, t.sent() > before))
            }
            Pending::Cork(on) => {
                r?;
                self.corked = on;
                Stats::add(if on { &stats.corked } else { &stats.uncorked }, 1);
                Ok((Flow::Continue, false))
            }
            Pending::SetUp => {
                let Some(tx) = tx else {
                    return Err(asked_for_nothing());
                };
                tx.setup_complete(r)?;
                Ok((Flow::Continue, false))
            }
            Pending::None => Err(asked_for_nothing()),
        }
    }

    /// Moves the queue on to its next call, doing the bookkeeping on the way: a file
    /// part's slice and window, the probe, the collapse. A question for the file side
    /// ends it ([`Step::Ask`]); it is made again, from the start, with the answer, and
    /// the answers of one step are forgotten when it ends.
    fn step(&mut self, have_tx: Have, ctx: &Ctx<'_>) -> Result<Step, TxError> {
        let r = self.step_through(have_tx, ctx);
        if !matches!(r, Ok(Step::Ask)) {
            self.answers.clear();
            self.collapse_seen = 0;
        }
        r
    }

    fn step_through(&mut self, have_tx: Have, ctx: &Ctx<'_>) -> Result<Step, TxError> {
        if self.disk_wait {
            return Ok(Step::DiskWait);
        }
        let sending = ctx.sending;
        let nowait = ctx.disk.is_some_and(|d| d.usable.get());
        loop {
            if let Some(t) = &self.transmit {
                if t.remaining() > 0 {
                    return Ok(match have_tx {
                        Have::Ready => Step::Transmit,
                        Have::Unset => Step::SetUp,
                        Have::None => Step::PrepareSocket,
                    });
                }
                self.transmit = None;
                let part_len = match self.queue.front().and_then(|r| r.plan.parts.front()) {
                    Some(part) => part.len(),
                    None => 0,
                };
                if (self.front_sent as u64) + self.slice_len < part_len {
                    self.front_sent += self.slice_len as usize;
                    if self.yield_at_end {
                        // A slice of the file went; the rest waits for the next turn.
                        return Ok(Step::Yield);
                    }
                    // A read-ahead window went: probe the next one.
                    continue;
                }
                if let Some(front) = self.queue.front_mut() {
                    if let Some(p) = front.plan.parts.pop_front() {
                        front.progress.sent += p.len();
                    }
                }
                self.front_sent = 0;
                self.resident_until = 0;
                self.on_whole = false;
                if self.corked {
                    // Clearing the cork sends the held tail at once.
                    return Ok(Step::Cork(false));
                }
                continue;
            }
            self.retire_sent();
            if self.collapse(sending.collapse, nowait, ctx.stats).is_err() {
                return Ok(Step::Ask);
            }
            let Some(front) = self.queue.front_mut() else {
                return Ok(Step::Empty);
            };
            // Empty byte parts (none are made today) would make an empty gather.
            while self.front_sent == 0
                && front
                    .plan
                    .parts
                    .front()
                    .is_some_and(|p| p.len() == 0 && !matches!(p, Part::File(..)))
            {
                front.plan.parts.pop_front();
            }
            if front.plan.parts.is_empty() {
                continue;
            }
            let Some(Part::File(r)) = front.plan.parts.front() else {
                return Ok(Step::Gather);
            };
            let (f, off, len, residency) =
                (Arc::clone(&r.file), r.offset, r.len, r.residency.clone());
            let start = off + self.front_sent as u64;
            let rest = len - self.front_sent as u64;
            let mut n = match sending.slice_bytes {
                0 => rest,
                _ if len < sending.slice_min => rest,
                s => rest.min(s),
            };
            self.yield_at_end = n < rest;
            if let Some(d) = ctx.disk.filter(|d| d.usable.get()) {
                let until =
                    match self.resident_ahead(d, &f, (start, off + len), residency, start == off) {
                        Ok(Some(until)) => until,
                        Ok(None) => return Ok(Step::DiskWait),
                        Err(Asking) => return Ok(Step::Ask),
                    };
                if until < start + n {
                    n = until - start;
                    self.yield_at_end = false;
                }
            }
            self.slice_len = n;
            self.transmit = Some(Box::new(Transmit::new(Source::File {
                file: f,
                offset: start,
                len: n,
            })));
            self.resumed = false;
            if sending.cork_min > 0 && len >= sending.cork_min && !self.corked && !ctx.unix {
                // Without the cork, ACKs handled between two of the kernel's 64 KiB
                // steps inside one `sendfile` push the partial segment at the queue's
                // tail out on its own (we set `TCP_NODELAY`): 169-170 segments per
                // 10 MiB, against nginx's 164 with `tcp_nopush`.
                return Ok(Step::Cork(true));
            }
        }
    }

    /// The byte parts from the front of the queue, across pipelined responses, up to a
    /// file part. Past `IOV_MAX - 2` buffers the rest is copied into one, the last.
    fn gather(&mut self, stats: &Stats) -> Op<'_> {
        let Output {
            queue,
            front_sent,
            tail,
            ..
        } = self;
        tail.clear();
        // Room for every byte part queued (one allocation, not a growth per turn).
        let parts: usize = queue.iter().map(|r| r.plan.parts.len()).sum();
        let mut pieces: Vec<Piece<'_>> = Vec::with_capacity(parts.min(IOV_MAX - 1));
        let mut bytes = 0usize;
        let mut file_follows = false;
        'gather: for (ri, resp) in queue.iter().enumerate() {
            for (pi, part) in resp.plan.parts.iter().enumerate() {
                let skip = if ri == 0 && pi == 0 { *front_sent } else { 0 };
                let (s, shared): (&[u8], _) = match part {
                    Part::Bytes(b) => (&b[skip..], None),
                    Part::Shared { buf, start, end } => {
                        (&buf[start + skip..*end], Some((buf, start + skip)))
                    }
                    Part::File(..) => {
                        file_follows = true;
                        break 'gather;
                    }
                };
                if pieces.len() < IOV_MAX - 2 {
                    if !s.is_empty() {
                        pieces.push(Piece { bytes: s, shared });
                    }
                } else {
                    tail.extend_from_slice(s);
                }
                bytes += s.len();
                if bytes >= GATHER_BYTES {
                    break 'gather;
                }
            }
        }
        let tail: &Vec<u8> = tail;
        if !tail.is_empty() {
            Stats::add(&stats.defrags, 1);
            pieces.push(Piece {
                bytes: tail,
                shared: None,
            });
        }
        Op::Gather {
            pieces,
            more: file_follows,
        }
    }

    /// Responses at the front with every part sent move to `finished`.
    fn retire_sent(&mut self) {
        while self.queue.front().is_some_and(|r| r.plan.parts.is_empty()) {
            if let Some(r) = self.queue.pop_front() {
                self.finished.push(r);
            }
        }
    }

    /// The helpers brought `len` bytes from `offset` into the page cache; true if the
    /// queue was waiting for them (the worker then drives the connection).
    pub fn disk_ready(&mut self, offset: u64, len: u64) -> bool {
        if self.job_at != Some(offset) {
            return false;
        }
        self.job_at = None;
        // A job starts at the first byte not known resident (at or past
        // `resident_until`, which is 0 when a new part began).
        if self.resident_until <= offset {
            // Trusted without a second probe: pages evicted again at once (heavy
            // memory pressure) cost a short wait in sendfile, not a loop of helper
            // reads.
            self.resident_until = offset + len;
        }
        std::mem::take(&mut self.disk_wait)
    }

    /// Makes sure the file part's bytes from `start` (to `end`) are in the page cache
    /// before they go out: returns how far they are known to be, or None if the
    /// connection must wait for the helpers. `known` is what the response found when it
    /// probed the whole file. While a window goes out, the next one is probed and, if
    /// any page is missing, handed to the helpers without waiting.
    fn resident_ahead(
        &mut self,
        d: &Disk,
        f: &Arc<File>,
        (start, end): (u64, u64),
        known: Residency,
        first: bool,
    ) -> Result<Option<u64>, Asking> {
        if let Residency::Whole(w) = &known {
            if self.on_whole || self.resident_until <= start {
                let all = match w.known(d) {
                    Some(all) => all,
                    None => w.found(d, self.resident(f, 0, w.size())?),
                };
                if all {
                    // Every page of the file is there in this epoch.
                    self.resident_until = end;
                    self.on_whole = true;
                    return Ok(Some(end));
                }
                if std::mem::take(&mut self.on_whole) {
                    // They were; some have gone since: a window at a time from here.
                    self.resident_until = self.resident_until.min(start);
                }
            }
        }
        // What the response found applies to the first window only.
        let known = if first { known } else { Residency::Unknown };
        if self.resident_until <= start {
            if self.job_at == Some(start) {
                // The helpers are reading this window already.
                self.disk_wait = true;
                return Ok(None);
            }
            let w = (end - start).min(d.window);
            let probe = match known {
                Residency::Missing => Ok(false),
                // Unknown, or its whole file no longer all there.
                Residency::Unknown | Residency::Whole(_) => self.resident(f, start, w)?,
            };
            match probe {
                Ok(true) => self.resident_until = start + w,
                Ok(false) => {
                    // The connection waits for this read, so it is kept short; the
                    // rest of the window comes in while it goes out.
                    let first = w.min(WAITED_READ);
                    if self.job_at.is_none() && self.read_ahead(f, start, first)? {
                        self.disk_wait = true;
                        return Ok(None);
                    }
                    // No helpers left (shutting down): send inline.
                    self.resident_until = start + w;
                }
                Err(_) => {
                    // No cachestat here (before Linux 6.5, or a file system without a
                    // page cache): this worker stops probing.
                    d.usable.set(false);
                    self.resident_until = start + w;
                }
            }
        }
        let next = self.resident_until;
        if next < end && self.job_at.is_none() && next - start <= d.window {
            let w = (end - next).min(d.window);
            match self.resident(f, next, w)? {
                Ok(true) => self.resident_until = next + w,
                Ok(false) => {
                    self.read_ahead(f, next, w)?;
                }
                Err(_) => d.usable.set(false),
            }
        }
        Ok(Some(self.resident_until))
    }

    /// Whether `len` bytes of `file` from `at` are all in the page cache.
    fn resident(
        &mut self,
        file: &Arc<File>,
        at: u64,
        len: u64,
    ) -> Result<Result<bool, Errno>, Asking> {
        match self.ask(Question::Resident {
            file: Arc::clone(file),
            at,
            len,
        })? {
            Answer::Resident(r) => Ok(r),
            _ => Ok(Ok(false)),
        }
    }

    /// Hands `len` bytes of `file` from `offset` to the helpers; false if there are
    /// none (shutting down, or none here).
    fn read_ahead(&mut self, file: &Arc<File>, offset: u64, len: u64) -> Result<bool, Asking> {
        let handed = matches!(
            self.ask(Question::Warm {
                file: Arc::clone(file),
                at: offset,
                len,
            })?,
            Answer::Warm(true)
        );
        if handed {
            self.job_at = Some(offset);
        }
        Ok(handed)
    }

    /// The answer to `q` if this step has it; else `q` is asked (the step then ends,
    /// and is made again once the answer came).
    fn ask(&mut self, q: Question) -> Result<Answer, Asking> {
        if let Some((_, a)) = self.answers.iter_mut().find(|(k, _)| k.same(&q)) {
            return Ok(a.take());
        }
        let buf = match &q {
            Question::Read { len, .. } => vec![0u8; *len as usize],
            _ => Vec::new(),
        };
        self.asking = Some((q, buf));
        Err(Asking)
    }

    /// Seed 001's collapse: the file ranges of at most `max` bytes that the next gather
    /// reaches are read into bytes (only from the page cache with `nowait`). It stops at
    /// the first range it cannot take, where the gather stops too.
    fn collapse(&mut self, max: u64, nowait: bool, stats: &Stats) -> Result<(), Asking> {
        if max == 0 {
            return Ok(());
        }
        // The front part may be half sent, or have the helpers reading for it.
        let front_busy = self.front_sent > 0 || self.job_at.is_some();
        // Parts this step looked at already (its answers made again) are passed over.
        let mut seen = 0usize;
        for ri in 0..self.queue.len() {
            for pi in 0..self.queue[ri].plan.parts.len() {
                seen += 1;
                if seen > IOV_MAX {
                    return Ok(());
                }
                if seen <= self.collapse_seen {
                    continue;
                }
                let Part::File(FileRange {
                    file, offset, len, ..
                }) = &self.queue[ri].plan.parts[pi]
                else {
                    continue;
                };
                let (file, offset, len) = (Arc::clone(file), *offset, *len);
                let front = ri == 0 && pi == 0;
                if len > max || (front && front_busy) {
                    return Ok(());
                }
                self.collapse_seen = seen - 1;
                let read = |nowait| Question::Read {
                    file: Arc::clone(&file),
                    at: offset,
                    len,
                    nowait,
                    part: seen,
                };
                let mut got = self.ask(read(nowait))?;
                if nowait && matches!(got, Answer::Read(Err(Errno::OPNOTSUPP))) {
                    // A file system that cannot say (tmpfs): read it as it is.
                    got = self.ask(read(false))?;
                }
                let Answer::Read(Ok(Some(bytes))) = got else {
                    return Ok(());
                };
                if front {
                    // What was known of this range's residency goes with it.
                    self.resident_until = 0;
                    self.on_whole = false;
                }
                Stats::add(&stats.collapsed, 1);
                Stats::add(&stats.collapsed_bytes, len);
                self.queue[ri].plan.parts[pi] = Part::Bytes(bytes);
            }
        }
        Ok(())
    }

    /// Marks `n` sent bytes off the front of the queue; finished responses move to
    /// `finished` for the log.
    fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.queue.front_mut() else {
                return;
            };
            let Some(part) = front.plan.parts.front() else {
                if let Some(r) = self.queue.pop_front() {
                    self.finished.push(r);
                }
                continue;
            };
            let left = part.len() as usize - self.front_sent;
            if n < left {
                self.front_sent += n;
                return;
            }
            n -= left;
            if let Some(p) = front.plan.parts.pop_front() {
                front.progress.sent += p.len();
            }
            self.front_sent = 0;
            if front.plan.parts.is_empty() {
                if let Some(r) = self.queue.pop_front() {
                    self.finished.push(r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The queue driven one result at a time: which calls it asks for, in which order,
    //! and what it does with short counts; no call is made on a socket.

    use std::collections::VecDeque;
    use std::fs::File;
    use std::io::Write;

    use linerate_http::Status;

    use super::*;

    fn sending(slice_bytes: u64, cork_min: u64) -> Sending {
        Sending {
            tx: linerate_tx::TxConfig::default(),
            slice_bytes,
            slice_min: 1 << 20,
            cork_min,
            collapse: 0,
        }
    }

    fn ctx<'a>(stats: &'a Stats, sending: &'a Sending) -> Ctx<'a> {
        Ctx {
            disk: None,
            stats,
            sending,
            unix: false,
        }
    }

    fn response(parts: Vec<Part>, line: &str) -> Response {
        let parts: VecDeque<Part> = parts.into();
        let body = parts.iter().skip(1).map(Part::len).sum();
        Response::new(parts, Status::Ok, true, line.into(), body)
    }

    fn bytes(b: &[u8]) -> Part {
        Part::Bytes(b.to_vec())
    }

    /// A file of `len` bytes and its part.
    fn file_part(len: usize) -> (tempfile::NamedTempFile, Part) {
        let mut t = tempfile::NamedTempFile::new().unwrap();
        t.write_all(&vec![5u8; len]).unwrap();
        let f = Arc::new(File::open(t.path()).unwrap());
        (
            t,
            Part::File(FileRange {
                file: f,
                offset: 0,
                len: len as u64,
                residency: Residency::Unknown,
            }),
        )
    }

    /// Transmit state set up as a socket would answer its setup.
    fn tx_socket() -> TxSocket {
        let mut tx = TxSocket::unset(linerate_tx::TxConfig::default());
        while let Some(op) = tx.setup_op() {
            let r = if matches!(op, Op::SendBufferSize) {
                65_536
            } else {
                0
            };
            tx.setup_complete(Ok(r)).unwrap();
        }
        tx
    }

    /// The next call, described: ("gather", bytes, more), ("sendfile", len, _),
    /// ("cork", on, _) or the state's name.
    fn next(o: &mut Output, tx: Option<&mut TxSocket>, c: &Ctx<'_>) -> (String, u64, bool) {
        match o.poll(tx, c).unwrap() {
            OutNext::Op(Op::Gather { pieces, more }) => (
                format!("gather/{}", pieces.len()),
                pieces.iter().map(|s| s.bytes.len() as u64).sum(),
                more,
            ),
            OutNext::Op(Op::Sendfile { len, .. }) => ("sendfile".into(), len as u64, false),
            OutNext::Op(Op::SetOption {
                opt: SockOpt::Cork,
                value,
            }) => ("cork".into(), value as u64, false),
            OutNext::Op(op) => (op.name().into(), 0, false),
            OutNext::PrepareSocket => ("prepare".into(), 0, false),
            OutNext::Empty => ("empty".into(), 0, false),
            OutNext::DiskWait => ("disk-wait".into(), 0, false),
            OutNext::Yield => ("yield".into(), 0, false),
        }
    }

    fn lines(done: Vec<Response>) -> Vec<String> {
        done.into_iter().map(|r| r.record.request_line).collect()
    }

    #[test]
    fn pipelined_byte_responses_go_in_one_gather_and_a_short_count_resumes_mid_part() {
        let (stats, s) = (Stats::default(), sending(0, 0));
        let c = ctx(&stats, &s);
        let mut o = Output::default();
        o.push(response(
            vec![bytes(b"head-a\r\n\r\n"), bytes(b"aaaa")],
            "a",
        ));
        o.push(response(vec![bytes(b"head-b\r\n\r\n")], "b"));
        o.push(response(vec![bytes(b"head-c\r\n\r\n"), bytes(b"cc")], "c"));
        assert_eq!(next(&mut o, None, &c), ("gather/5".into(), 36, false));
        // 12 bytes: the first head and two body bytes.
        o.complete(None, Ok(12), &stats).unwrap();
        assert!(o.take_finished().is_empty());
        assert_eq!(next(&mut o, None, &c), ("gather/4".into(), 24, false));
        // The rest of the first, the second, two bytes of the third's head.
        o.complete(None, Ok(14), &stats).unwrap();
        assert_eq!(lines(o.take_finished()), ["a", "b"]);
        assert_eq!(next(&mut o, None, &c), ("gather/2".into(), 10, false));
        o.complete(None, Ok(10), &stats).unwrap();
        assert_eq!(next(&mut o, None, &c).0, "empty");
        assert_eq!(lines(o.take_finished()), ["c"]);
        assert!(!o.busy());
    }

    #[test]
    fn a_file_part_goes_by_the_engine_after_its_head_with_more() {
        let (stats, s) = (Stats::default(), sending(0, 0));
        let c = ctx(&stats, &s);
        let (_f, part) = file_part(100_000);
        let mut o = Output::default();
        o.push(response(vec![bytes(b"head\r\n\r\n"), part], "f"));
        assert_eq!(next(&mut o, None, &c), ("gather/1".into(), 8, true));
        o.complete(None, Ok(8), &stats).unwrap();
        // No transmit state yet: the connection makes it, and the queue asks for its
        // setup's calls first (no call of its own).
        assert_eq!(next(&mut o, None, &c).0, "prepare");
        let mut tx = TxSocket::unset(linerate_tx::TxConfig::default());
        assert_eq!(next(&mut o, Some(&mut tx), &c).0, "send-buffer-size");
        o.complete(Some(&mut tx), Ok(65_536), &stats).unwrap();
        assert_eq!(next(&mut o, Some(&mut tx), &c).0, "set-option");
        o.complete(Some(&mut tx), Ok(0), &stats).unwrap();
        assert!(tx.is_set_up());
        assert_eq!(
            next(&mut o, Some(&mut tx), &c),
            ("sendfile".into(), 100_000, false)
        );
        let (flow, moved) = o.complete(Some(&mut tx), Ok(60_000), &stats).unwrap();
        assert_eq!((flow, moved), (Flow::Continue, true));
        assert_eq!(
            next(&mut o, Some(&mut tx), &c),
            ("sendfile".into(), 40_000, false)
        );
        // The writable event after a full socket: a wake-up of its own.
        o.begin_turn();
        assert_eq!(
            next(&mut o, Some(&mut tx), &c),
            ("sendfile".into(), 40_000, false)
        );
        o.complete(Some(&mut tx), Ok(40_000), &stats).unwrap();
        assert_eq!(next(&mut o, Some(&mut tx), &c).0, "empty");
        assert_eq!(lines(o.take_finished()), ["f"]);
        assert_eq!(tx.counters().wakeups, 2);
        assert_eq!(tx.counters().bytes, 100_000);
    }

    #[test]
    fn a_large_file_goes_in_slices_each_a_turn_and_corked_to_its_end() {
        let (stats, s) = (Stats::default(), sending(256 << 10, 1 << 20));
        let c = ctx(&stats, &s);
        let (_f, part) = file_part(600 << 10);
        let mut tx = tx_socket();
        let mut o = Output::default();
        // Below --send-slice-min nothing is sliced: this one is 1 MiB.
        let (_g, big) = file_part(1 << 20);
        o.push(response(vec![part], "small"));
        o.push(response(vec![big], "big"));
        assert_eq!(
            next(&mut o, Some(&mut tx), &c),
            ("sendfile".into(), 600 << 10, false)
        );
        o.complete(Some(&mut tx), Ok(600 << 10), &stats).unwrap();
        // The big one: corked, then 256 KiB and the turn ends.
        assert_eq!(next(&mut o, Some(&mut tx), &c), ("cork".into(), 1, false));
        assert_eq!(lines(o.take_finished()), ["small"]);
        o.complete(Some(&mut tx), Ok(0), &stats).unwrap();
        for _ in 0..3 {
            assert_eq!(
                next(&mut o, Some(&mut tx), &c),
                ("sendfile".into(), 256 << 10, false)
            );
            o.complete(Some(&mut tx), Ok(256 << 10), &stats).unwrap();
            assert_eq!(next(&mut o, Some(&mut tx), &c).0, "yield");
        }
        assert_eq!(
            next(&mut o, Some(&mut tx), &c),
            ("sendfile".into(), 256 << 10, false)
        );
        o.complete(Some(&mut tx), Ok(256 << 10), &stats).unwrap();
        // Its end: the cork comes off, then it is done.
        assert_eq!(next(&mut o, Some(&mut tx), &c), ("cork".into(), 0, false));
        o.complete(Some(&mut tx), Ok(0), &stats).unwrap();
        assert_eq!(next(&mut o, Some(&mut tx), &c).0, "empty");
        assert_eq!(lines(o.take_finished()), ["big"]);
        use std::sync::atomic::Ordering::Relaxed;
        assert_eq!(
            (stats.corked.load(Relaxed), stats.uncorked.load(Relaxed)),
            (1, 1)
        );
    }

    #[test]
    fn past_iov_max_buffers_the_rest_is_copied_into_one_and_counted() {
        let (stats, s) = (Stats::default(), sending(0, 0));
        let c = ctx(&stats, &s);
        let mut o = Output::default();
        for i in 0..1_500 {
            o.push(response(vec![bytes(b"0123456789")], &i.to_string()));
        }
        assert_eq!(
            next(&mut o, None, &c),
            (format!("gather/{}", IOV_MAX - 1), 15_000, false)
        );
        assert_eq!(stats.defrags.load(std::sync::atomic::Ordering::Relaxed), 1);
        o.complete(None, Ok(15_000), &stats).unwrap();
        assert_eq!(o.take_finished().len(), 1_500);
    }

    #[test]
    fn a_cut_connection_gets_back_what_did_not_leave_with_the_bytes_that_did() {
        let (stats, s) = (Stats::default(), sending(0, 0));
        let c = ctx(&stats, &s);
        let (_f, part) = file_part(100_000);
        let mut tx = tx_socket();
        let mut o = Output::default();
        o.push(response(vec![bytes(b"head\r\n\r\n"), part], "f"));
        o.push(response(vec![bytes(b"next")], "n"));
        next(&mut o, None, &c);
        o.complete(None, Ok(8), &stats).unwrap();
        next(&mut o, Some(&mut tx), &c);
        o.complete(Some(&mut tx), Ok(30_000), &stats).unwrap();
        let (unsent, front) = o.take_unsent();
        assert_eq!(unsent.len(), 2);
        // The head went whole (counted in the response); 30,000 of the body.
        assert_eq!((unsent[0].progress.sent, front), (8, 30_000));
        assert!(!o.busy());
    }

    #[test]
    fn a_result_nobody_asked_for_is_refused() {
        let stats = Stats::default();
        let mut o = Output::default();
        o.push(response(vec![bytes(b"x")], "x"));
        assert!(o.complete(None, Ok(1), &stats).is_err());
        assert!(o.busy());
    }
}
