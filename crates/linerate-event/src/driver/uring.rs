//! The io_uring driver: readiness from poll requests, a connection's bytes received
//! into provided buffers and its gathers sent on the ring.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use linerate_sys::op::Op;
use linerate_sys::uring::{Completion, Ring, RingCounts, SendBuf};
use linerate_sys::zerocopy::ZeroCopy;
use linerate_sys::{Errno, Events};

use super::Ring as RingOps;
use super::{Driver, Interest, Io, Ready, Submitted};

/// A watch of the io_uring driver.
#[derive(Clone, Copy, Debug)]
struct Watch {
    token: u64,
    fd: RawFd,
    /// Its generation in its slot (see [`Watches`]).
    generation: u32,
    events: Events,
    /// Level-triggered: a one-shot poll armed again after each report.
    level: bool,
    /// A connection: the ring receives and sends its bytes.
    stream: bool,
    /// The owner wants its input (a connection's receive is to be armed).
    want_input: bool,
    /// A receive is armed (or its cancellation not yet complete).
    receiving: bool,
    /// Its cancellation was asked for.
    cancelling: bool,
    /// The input ended (the peer closed, or an error): no receive again.
    input_over: bool,
    /// A listener: the ring accepts its connections.
    listener: bool,
    /// A UDP socket: the ring receives its datagrams (no poll) and sends them.
    datagram: bool,
}

/// The live watches of a ring: a slab of slots, reused, and each descriptor's slot.
/// A watch's id is its slot and the slot's generation when it was made
/// (`generation << SLOT_BITS | slot`): a completion of an ended watch names an id no
/// live watch has, even when a new one took its slot. Plain vectors, not maps: an idle
/// connection costs one slot (32 bytes) and one descriptor entry (4).
#[derive(Default)]
struct Watches {
    slots: Vec<Option<Watch>>,
    free: Vec<u32>,
    /// By descriptor number: its slot + 1 (0: none).
    by_fd: Vec<u32>,
    next_generation: u32,
}

const SLOT_BITS: u32 = 24;

impl Watches {
    fn split(id: u64) -> (usize, u32) {
        (
            (id & ((1 << SLOT_BITS) - 1)) as usize,
            (id >> SLOT_BITS) as u32,
        )
    }

    fn get(&self, id: u64) -> Option<&Watch> {
        let (slot, generation) = Self::split(id);
        self.slots
            .get(slot)?
            .as_ref()
            .filter(|w| w.generation == generation)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut Watch> {
        let (slot, generation) = Self::split(id);
        self.slots
            .get_mut(slot)?
            .as_mut()
            .filter(|w| w.generation == generation)
    }

    fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
    }

    /// Makes `w` live under a new id (its generation is set here).
    fn insert(&mut self, mut w: Watch) -> u64 {
        w.generation = self.next_generation;
        // Ids stay below 2^56, so tags (id * KINDS + kind) fit.
        self.next_generation = self.next_generation.wrapping_add(1);
        let slot = match self.free.pop() {
            Some(s) => s as usize,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        debug_assert!(slot < 1 << SLOT_BITS, "more watches than ids");
        let fd = w.fd as usize;
        if self.by_fd.len() <= fd {
            self.by_fd.resize(fd + 1, 0);
        }
        self.by_fd[fd] = slot as u32 + 1;
        let id = (u64::from(w.generation) << SLOT_BITS) | slot as u64;
        self.slots[slot] = Some(w);
        id
    }

    fn remove(&mut self, id: u64) -> Option<Watch> {
        let (slot, _) = Self::split(id);
        self.get(id)?;
        let w = self.slots[slot].take()?;
        if self.by_fd.get(w.fd as usize) == Some(&(slot as u32 + 1)) {
            self.by_fd[w.fd as usize] = 0;
        }
        self.free.push(slot as u32);
        Some(w)
    }

    /// The id of the watch of descriptor `fd`.
    fn of_fd(&self, fd: RawFd) -> Option<u64> {
        let slot = (*self.by_fd.get(usize::try_from(fd).ok()?)?).checked_sub(1)? as usize;
        let w = self.slots.get(slot)?.as_ref()?;
        Some((u64::from(w.generation) << SLOT_BITS) | slot as u64)
    }

    /// The id of the watch under `token`: a look at every watch, for the rare calls
    /// that name a token alone (a closed inotify instance, a token registered again).
    fn of_token(&self, token: u64) -> Option<u64> {
        self.iter()
            .find(|(_, w)| w.token == token)
            .map(|(id, _)| id)
    }

    fn iter(&self) -> impl Iterator<Item = (u64, &Watch)> {
        self.slots.iter().enumerate().filter_map(|(slot, w)| {
            let w = w.as_ref()?;
            Some(((u64::from(w.generation) << SLOT_BITS) | slot as u64, w))
        })
    }
}

/// The kinds of request a watch makes, in the low bits of their tags.
const POLL: u64 = 0;
const RECV: u64 = 1;
const SEND: u64 = 2;
const ACCEPT: u64 = 3;
const KINDS: u64 = 4;

/// The io_uring driver: readiness from poll requests on a ring, and a connection's
/// bytes received and sent on the ring.
///
/// A connection ([`Interest::Connection`]) gets three requests: a multishot receive
/// into the ring's provided buffers (its bytes come as [`Io::Received`], no `read`),
/// gather sends ([`Driver::execute`], at most one in flight; [`Io::Sent`]), and a
/// multishot poll for writable and error-queue edges, which the calls a connection
/// still makes itself (a file body's `sendfile`, zero-copy completions) need.
///
/// A descriptor closed without being deregistered (epoll forgets those by itself)
/// keeps its file open while its requests live; registering its token or its number
/// again ends them. Each watch has its own tags, never reused, so a completion that
/// arrives after its watch ended (the kernel may have posted it before the removal) is
/// dropped (its buffer given back) instead of reaching the next connection on the same
/// token. Poll reports of one watch within one wait are merged, so a worker sees one
/// readiness event per registration per wait, as from epoll.
pub struct UringDriver {
    ring: Ring,
    watches: Watches,
    /// One-shot polls to arm again before the next wait.
    rearm: Vec<u64>,
    /// Receives to arm (again) before the next wait.
    rearm_input: Vec<u64>,
    done: Vec<Completion>,
    /// Completions read outside `wait` (while a watch was ended), reported by the next.
    early: Vec<Completion>,
    /// Watches whose descriptor was found closed, ended before the next wait.
    ended_bad: Vec<u64>,
    /// Index in the caller's list of each watch's readiness reported in this wait.
    merged: HashMap<u64, usize>,
    /// Connections accepted by a listener's watch, not yet taken; and the error that
    /// ended its accept, if one did.
    accepted: HashMap<u64, (VecDeque<OwnedFd>, Option<Errno>)>,
    /// Listeners' accepts to arm again before the next wait.
    rearm_accept: Vec<u64>,
    /// The tokens of listeners whose watch ended, by watch: what their accepts still
    /// bring goes to `orphans`.
    ended_listeners: HashMap<u64, u64>,
    /// Connections accepted for an ended listener's watch, with its token, for the
    /// owner to take ([`Ring::take_orphan`](super::Ring::take_orphan)).
    orphans: VecDeque<(u64, OwnedFd)>,
    /// Splices go on the ring (`LINERATE_RING_SPLICE=1`, an experiment: see
    /// BENCHMARKS.md); else they are made at once.
    ring_splice: bool,
    /// Watches with a splice on the kernel's worker threads, which look the socket up
    /// only when they run it: a connection closed meanwhile has its descriptor here
    /// until that splice completes, then closed (its number cannot go to another
    /// connection under the splice).
    on_workers: HashMap<u64, Option<OwnedFd>>,
}

impl UringDriver {
    /// A splice of a file body on the ring, under the connection's send tag (one in
    /// flight per connection, as a gather); none for another operation.
    fn splice(&mut self, fd: BorrowedFd<'_>, op: &Op<'_>) -> Option<Submitted> {
        use linerate_sys::pipe::SpliceFlags;
        use linerate_sys::uring::Held;
        let sock = fd.as_raw_fd();
        let (from, to, len, flags, held) = match op {
            Op::SpliceIn {
                file,
                at,
                pipe,
                len,
            } => (
                (file.as_raw_fd(), Some(*at)),
                pipe.write_end().as_raw_fd(),
                *len,
                SpliceFlags::MOVE,
                Held {
                    file: Some(std::sync::Arc::clone(file)),
                    pipe: std::sync::Arc::clone(pipe),
                },
            ),
            Op::SpliceOut { pipe, len, more } => (
                (pipe.read_end().as_raw_fd(), None),
                sock,
                *len,
                if *more {
                    SpliceFlags::MOVE | SpliceFlags::MORE
                } else {
                    SpliceFlags::MOVE
                },
                Held {
                    file: None,
                    pipe: std::sync::Arc::clone(pipe),
                },
            ),
            _ => return None,
        };
        let Some(id) = self.watches.of_fd(sock) else {
            return Some(Submitted::Done(Err(Errno::NOENT)));
        };
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        Some(
            match self
                .ring
                .splice(from, to, len, flags, held, id * KINDS + SEND)
            {
                Ok(()) => {
                    self.on_workers.insert(id, None);
                    Submitted::Pending
                }
                Err(e) => Submitted::Done(Err(Errno::from_io(&e))),
            },
        )
    }

    /// A completion of watch `id`'s send tag came: a splice it had on the workers is
    /// over, and a descriptor closed under it is closed now.
    fn worker_done(&mut self, c: &Completion) -> io::Result<()> {
        if c.tag % KINDS != SEND || c.more {
            return Ok(());
        }
        if let Some(Some(fd)) = self.on_workers.remove(&(c.tag / KINDS)) {
            self.ring.close(fd)?;
        }
        Ok(())
    }

    /// Sends `buf` on the connection `fd` (`MSG_MORE` if `more`); its result comes as
    /// [`Io::Sent`] under its token. One send in flight per connection.
    fn send(&mut self, fd: BorrowedFd<'_>, buf: SendBuf, more: bool) -> io::Result<()> {
        let fd = fd.as_raw_fd();
        let Some(id) = self.watches.of_fd(fd) else {
            return Err(io::Error::from(Errno::NOENT));
        };
        self.ring.send(fd, buf, more, id * KINDS + SEND)
    }

    /// A driver on a ring of 256 entries, or why io_uring cannot serve here.
    pub fn new() -> io::Result<UringDriver> {
        Ok(UringDriver {
            ring: Ring::new(256)?,
            watches: Watches::default(),
            rearm: Vec::new(),
            rearm_input: Vec::new(),
            done: Vec::new(),
            early: Vec::new(),
            ended_bad: Vec::new(),
            merged: HashMap::new(),
            accepted: HashMap::new(),
            rearm_accept: Vec::new(),
            ended_listeners: HashMap::new(),
            orphans: VecDeque::new(),
            ring_splice: std::env::var_os("LINERATE_RING_SPLICE").is_some_and(|v| v == "1"),
            on_workers: HashMap::new(),
        })
    }

    /// Ends the watch `id`: its completions are dropped from now on, and its requests
    /// are cancelled at once.
    fn end(&mut self, id: u64) -> io::Result<()> {
        if self.forget(id)? {
            // Submitted and completed at once: a request holds its file open until its
            // cancellation is done, and the owner closes the descriptor next (a
            // listener must refuse connections from then on, a connection must send
            // its FIN). One call, as epoll_ctl is; what else completed waits for the
            // next `wait` (completions of ended watches are dropped now, so they do not
            // cut its wait short).
            self.ring.wait(Duration::ZERO, &mut self.early)?;
            self.drop_early()?;
        }
        Ok(())
    }

    /// Ends the watch `id` and queues the cancellation of its requests; false if there
    /// was no such watch.
    fn forget(&mut self, id: u64) -> io::Result<bool> {
        let Some(w) = self.watches.remove(id) else {
            return Ok(false);
        };
        self.rearm.retain(|t| *t != id);
        self.rearm_input.retain(|t| *t != id);
        self.rearm_accept.retain(|t| *t != id);
        // Connections accepted and not taken are the owner's still: a listener's watch
        // ends while its socket may stay open elsewhere (a reload's new workers hold
        // it), and a connection accepted here has left the socket's queue, so closing
        // it would reset a client whose request may be on its way.
        if let Some((queue, _)) = self.accepted.remove(&id) {
            self.orphans
                .extend(queue.into_iter().map(|fd| (w.token, fd)));
        }
        if w.listener {
            self.ended_listeners.insert(id, w.token);
            self.ring.cancel(id * KINDS + ACCEPT)?;
            return Ok(true);
        }
        self.ring.cancel(id * KINDS + POLL)?;
        if w.stream {
            // A send in flight or a receive; a cancellation that finds nothing is
            // answered with ENOENT, unreported.
            self.ring.cancel_receive(id * KINDS + RECV)?;
            self.ring.cancel(id * KINDS + SEND)?;
        }
        if w.datagram {
            // Its sends in flight complete by themselves (a datagram never waits for
            // a peer); their completions find no watch and are dropped.
            self.ring.cancel_datagram_receive(id * KINDS + RECV)?;
        }
        Ok(true)
    }

    /// Completions read while a watch ended that belong to ended watches go (their
    /// buffers given back, their connections closed); the rest wait for `wait`.
    fn drop_early(&mut self) -> io::Result<()> {
        self.take_accepted();
        let mut early = std::mem::take(&mut self.early);
        for c in &early {
            if !self.watches.contains(c.tag / KINDS) {
                self.worker_done(c)?;
            }
        }
        early.retain(|c| {
            let keep = self.watches.contains(c.tag / KINDS);
            if !keep {
                if let Some(b) = c.buffer {
                    self.ring.recycle(b);
                }
            }
            keep
        });
        self.early = early;
        Ok(())
    }

    /// The connections the ring accepted: queued for their listener's owner, or as
    /// orphans if the listener's watch has ended.
    fn take_accepted(&mut self) {
        let (watches, accepted) = (&self.watches, &mut self.accepted);
        for (tag, fd) in self.ring.accepted() {
            let id = tag / KINDS;
            if watches.contains(id) {
                accepted.entry(id).or_default().0.push_back(fd);
            } else if let Some(&token) = self.ended_listeners.get(&id) {
                self.orphans.push_back((token, fd));
            }
        }
        // An ended listener's accepts are all over once the ring no longer counts one
        // armed under its tag: nothing more can come for it.
        let ring = &self.ring;
        self.ended_listeners
            .retain(|id, _| ring.accepting(id * KINDS + ACCEPT));
    }

    fn arm_input(&mut self, id: u64) -> io::Result<()> {
        let Some(w) = self.watches.get_mut(id) else {
            return Ok(());
        };
        if w.want_input && !w.receiving && !w.input_over {
            w.receiving = true;
            w.cancelling = false;
            let fd = w.fd;
            if w.datagram {
                self.ring.recvmsg(fd, id * KINDS + RECV)?;
            } else {
                self.ring.recv(fd, id * KINDS + RECV)?;
            }
        }
        Ok(())
    }

    /// A completion of a connection's receive: what the owner is told, if anything.
    fn received(&mut self, id: u64, c: &Completion) -> Option<Io> {
        let w = self.watches.get_mut(id)?;
        let bytes = c.buffer.map(|b| Io::Received {
            buffer: b,
            len: c.result.unwrap_or(0),
        });
        if c.more {
            return bytes;
        }
        // The receive ended.
        w.receiving = false;
        w.cancelling = false;
        match c.result {
            // Out of buffers, or ended with bytes (a full completion queue ends a
            // multishot request): armed again.
            Ok(n) if n > 0 => {
                if !self.rearm_input.contains(&id) {
                    self.rearm_input.push(id);
                }
                bytes
            }
            Err(Errno::NOBUFS) => {
                if !self.rearm_input.contains(&id) {
                    self.rearm_input.push(id);
                }
                bytes
            }
            // Paused by the owner (armed again if it asked for it meanwhile).
            Err(Errno::CANCELED) => {
                if w.want_input && !self.rearm_input.contains(&id) {
                    self.rearm_input.push(id);
                }
                None
            }
            // A UDP socket's receive that ended otherwise (an error of one datagram;
            // a connection's would end for good): armed again.
            r if w.datagram && r != Err(Errno::BADF) => {
                if !self.rearm_input.contains(&id) {
                    self.rearm_input.push(id);
                }
                bytes
            }
            r => {
                w.input_over = true;
                Some(Io::InputEnded(r.map(|_| ())))
            }
        }
    }
}

impl Driver for UringDriver {
    fn ring(&mut self) -> Option<&mut dyn RingOps> {
        Some(self)
    }

    fn as_ring(&self) -> Option<&dyn RingOps> {
        Some(self)
    }

    fn register(&mut self, fd: BorrowedFd<'_>, token: u64, interest: Interest) -> io::Result<()> {
        let (events, level, stream) = match interest {
            Interest::Readable | Interest::Listener | Interest::Datagram => {
                (Events::IN, true, false)
            }
            Interest::Connection => (Events::OUT | Events::ERR, false, true),
        };
        let listener = interest == Interest::Listener;
        let datagram = interest == Interest::Datagram;
        let fd = fd.as_raw_fd();
        // epoll forgets a descriptor when it is closed, and the workers rely on it: an
        // open-file cache closes its inotify instance and watches a new one under the
        // same token. So a token, or a descriptor number, registered again ends the
        // watch it had (the removal goes in before the new request).
        // (A connection's token is new each time: only the others' are looked for.)
        let by_token = if stream {
            None
        } else {
            self.watches.of_token(token)
        };
        for old in [by_token, self.watches.of_fd(fd)].into_iter().flatten() {
            self.end(old)?;
        }
        let id = self.watches.insert(Watch {
            token,
            fd,
            generation: 0,
            events,
            level,
            stream,
            want_input: stream || datagram,
            receiving: false,
            cancelling: false,
            input_over: false,
            listener,
            datagram,
        });
        // Submitted now, while the descriptor is surely the one meant; a request that
        // cannot be is removed again behind it, never left to arm a later descriptor
        // with the same number.
        let armed = if listener {
            self.ring.accept(fd, id * KINDS + ACCEPT)
        } else if datagram {
            self.arm_input(id)
        } else {
            self.ring
                .poll_add(fd, events.bits(), id * KINDS + POLL, !level)
                .and_then(|()| self.arm_input(id))
        }
        // A connection's requests go with the turn's one submission: it is closed only
        // through `close`, whose close request comes after them.
        .and_then(|()| {
            if stream {
                Ok(())
            } else {
                self.ring.submit().map(|_| ())
            }
        });
        if let Err(e) = armed {
            let _ = self.end(id);
            return Err(e);
        }
        Ok(())
    }

    fn execute(
        &mut self,
        fd: BorrowedFd<'_>,
        op: &mut Op<'_>,
        zc: Option<&mut ZeroCopy>,
    ) -> Submitted {
        if self.ring_splice {
            if let Some(r) = self.splice(fd, op) {
                return r;
            }
        }
        let Op::Gather { pieces, more } = op else {
            return Submitted::Done(linerate_sys::exec::now(fd, op, zc));
        };
        let mut buf = self.ring.send_buf();
        for p in pieces.iter() {
            match p.shared {
                Some((data, at)) => buf.share(data, at, at + p.bytes.len()),
                None => buf.copy(p.bytes),
            }
        }
        match self.send(fd, buf, *more) {
            Ok(()) => Submitted::Pending,
            Err(e) => Submitted::Done(Err(Errno::from_io(&e))),
        }
    }

    fn accept(&mut self, _token: u64, fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
        let Some(id) = self.watches.of_fd(fd.as_raw_fd()) else {
            return Err(io::Error::from(io::ErrorKind::WouldBlock));
        };
        let Some((queue, error)) = self.accepted.get_mut(&id) else {
            return Err(io::Error::from(io::ErrorKind::WouldBlock));
        };
        if let Some(fd) = queue.pop_front() {
            return Ok(fd);
        }
        match error.take() {
            Some(e) => Err(e.into()),
            None => Err(io::Error::from(io::ErrorKind::WouldBlock)),
        }
    }

    fn close(&mut self, token: u64, fd: OwnedFd) -> io::Result<()> {
        // Its requests are cancelled and the descriptor closed by the ring, in that
        // order, with the turn's submission: no call of its own. The FIN (or the reset)
        // goes when the last request lets go of the socket, in that same call.
        let ended = match self.watches.of_fd(fd.as_raw_fd()) {
            Some(id) if self.watches.get(id).is_some_and(|w| w.token == token) => {
                let ended = self.forget(id);
                if let Some(slot) = self.on_workers.get_mut(&id) {
                    // A splice on the workers names it still: closed after it.
                    *slot = Some(fd);
                    return ended.map(|_| ());
                }
                ended
            }
            _ => Ok(false),
        };
        let closed = self.ring.close(fd);
        ended.and(closed)
    }

    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let Some(id) = self.watches.of_fd(fd.as_raw_fd()) else {
            return Err(io::Error::from(Errno::NOENT));
        };
        self.end(id)
    }

    fn wait(&mut self, out: &mut Vec<Ready>, timeout: Duration) -> io::Result<()> {
        // Nothing is added to `rearm` before the completions below: its buffer is
        // reused from wait to wait.
        let mut rearm = std::mem::take(&mut self.rearm);
        for &id in &rearm {
            if let Some(w) = self.watches.get(id) {
                self.ring
                    .poll_add(w.fd, w.events.bits(), id * KINDS + POLL, !w.level)?;
            }
        }
        rearm.clear();
        self.rearm = rearm;
        for id in std::mem::take(&mut self.rearm_accept) {
            if let Some(w) = self.watches.get(id) {
                self.ring.accept(w.fd, id * KINDS + ACCEPT)?;
            }
        }
        let mut rearm_input = std::mem::take(&mut self.rearm_input);
        for &id in &rearm_input {
            self.arm_input(id)?;
        }
        rearm_input.clear();
        self.rearm_input = rearm_input;
        for id in std::mem::take(&mut self.ended_bad) {
            self.end(id)?;
        }
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        done.append(&mut self.early);
        let timeout = if done.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        self.ring.wait(timeout, &mut done)?;
        self.take_accepted();
        self.merged.clear();
        for c in &done {
            self.worker_done(c)?;
            let id = c.tag / KINDS;
            let Some(w) = self.watches.get(id).copied() else {
                // A watch that has ended.
                if let Some(b) = c.buffer {
                    self.ring.recycle(b);
                }
                continue;
            };
            match c.tag % KINDS {
                RECV => {
                    if let Some(io) = self.received(id, c) {
                        out.push(Ready {
                            token: w.token,
                            io,
                            ..Ready::default()
                        });
                    }
                    continue;
                }
                SEND => {
                    out.push(Ready {
                        token: w.token,
                        io: Io::Sent(c.result),
                        ..Ready::default()
                    });
                    continue;
                }
                ACCEPT => {
                    if c.result == Err(Errno::CANCELED) {
                        continue;
                    }
                    // An error (out of descriptors, say): the owner hears of it from
                    // `accept`. If it ended the accept, the accept is armed again (a
                    // listener the owner pauses is deregistered first).
                    if let Err(e) = c.result {
                        self.accepted.entry(id).or_default().1 = Some(e);
                    }
                    // (Not if another is armed already: `limit_changed` armed one behind
                    // this, which was read earlier.)
                    if !c.more && !self.ring.accepting(c.tag) && !self.rearm_accept.contains(&id) {
                        self.rearm_accept.push(id);
                    }
                    // Reported as readable, once per wait.
                    if let std::collections::hash_map::Entry::Vacant(e) = self.merged.entry(id) {
                        e.insert(out.len());
                        out.push(Ready {
                            token: w.token,
                            readable: true,
                            ..Ready::default()
                        });
                    }
                    continue;
                }
                _ => {}
            }
            if c.result == Err(Errno::CANCELED) {
                continue;
            }
            if c.result == Err(Errno::BADF) {
                // The descriptor was closed under a live watch: reported once, as an
                // error, and never armed again.
                self.ended_bad.push(id);
                out.push(Ready {
                    token: w.token,
                    readable: true,
                    hangup: false,
                    writable: true,
                    error: true,
                    io: Io::None,
                });
                continue;
            }
            // A failed poll is reported as everything, so the owner's next call finds
            // out what is wrong.
            let ev = match c.result {
                Ok(bits) => Events::from_bits(bits),
                Err(_) => Events::IN | Events::OUT | Events::ERR,
            };
            let ready = Ready {
                token: w.token,
                // A connection's input comes from its receive, not from readiness.
                readable: !w.stream && ev.any(Events::IN | Events::RDHUP | Events::HUP),
                hangup: !w.stream && ev.any(Events::RDHUP | Events::HUP),
                writable: ev.any(Events::OUT | Events::HUP),
                error: ev.any(Events::ERR),
                io: Io::None,
            };
            if w.level || !c.more {
                // One-shot, or a multishot poll the kernel ended: armed again.
                if !self.rearm.contains(&id) {
                    self.rearm.push(id);
                }
            }
            match self.merged.get(&id) {
                Some(&i) => {
                    let r = &mut out[i];
                    r.readable |= ready.readable;
                    r.hangup |= ready.hangup;
                    r.writable |= ready.writable;
                    r.error |= ready.error;
                }
                None => {
                    self.merged.insert(id, out.len());
                    out.push(ready);
                }
            }
        }
        self.done = done;
        Ok(())
    }
}

impl RingOps for UringDriver {
    fn counts(&self) -> RingCounts {
        self.ring.counts()
    }
    fn input(&self, buffer: u16, len: usize) -> &[u8] {
        self.ring.buffer(buffer, len)
    }
    fn recycle(&mut self, buffer: u16) {
        self.ring.recycle(buffer);
    }
    fn datagram(&self, buffer: u16, len: usize) -> Option<(linerate_sys::udp::Received, &[u8])> {
        self.ring.datagram(buffer, len)
    }
    fn send_datagram(
        &mut self,
        fd: BorrowedFd<'_>,
        head: linerate_sys::udp::Head,
        bytes: &mut Vec<u8>,
    ) -> io::Result<()> {
        let fd = fd.as_raw_fd();
        let Some(id) = self.watches.of_fd(fd) else {
            return Err(io::Error::from(Errno::NOENT));
        };
        self.ring.send_datagram(fd, head, bytes, id * KINDS + SEND)
    }
    fn take_orphan(&mut self) -> Option<(u64, OwnedFd)> {
        self.orphans.pop_front()
    }
    fn release_idle(&mut self) -> io::Result<bool> {
        self.ring.release_idle_buffers()
    }
    fn limit_changed(&mut self) -> io::Result<()> {
        let listeners: Vec<(u64, RawFd)> = self
            .watches
            .iter()
            .filter(|(_, w)| w.listener)
            .map(|(id, w)| (id, w.fd))
            .collect();
        for (id, fd) in listeners {
            // The cancellation goes in first; its completion (-ECANCELED) is dropped,
            // and what the old request accepted before it is delivered as usual.
            self.ring.cancel(id * KINDS + ACCEPT)?;
            self.ring.accept(fd, id * KINDS + ACCEPT)?;
            self.rearm_accept.retain(|t| *t != id);
        }
        Ok(())
    }
    fn set_input(&mut self, fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
        let Some(id) = self.watches.of_fd(fd.as_raw_fd()) else {
            return Ok(());
        };
        let Some(w) = self.watches.get_mut(id) else {
            return Ok(());
        };
        w.want_input = on;
        if on {
            if !w.receiving && !self.rearm_input.contains(&id) {
                self.rearm_input.push(id);
            }
        } else if w.receiving && !w.cancelling {
            w.cancelling = true;
            if w.datagram {
                self.ring.cancel_datagram_receive(id * KINDS + RECV)?;
            } else {
                self.ring.cancel_receive(id * KINDS + RECV)?;
            }
        }
        Ok(())
    }
    fn closed(&mut self, token: u64) -> io::Result<()> {
        match self.watches.of_token(token) {
            Some(id) => self.end(id),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The watches' slots are reused with a new generation: a completion of an ended
    /// watch never reaches the one that took its slot, and a descriptor's watch is
    /// found by its number.
    #[test]
    fn watch_slots_are_reused_under_new_ids() {
        let mut w = Watches::default();
        let watch = |fd, token| Watch {
            token,
            fd,
            generation: 0,
            events: Events::NONE,
            level: false,
            stream: true,
            want_input: true,
            receiving: false,
            cancelling: false,
            input_over: false,
            listener: false,
            datagram: false,
        };
        let a = w.insert(watch(7, 1));
        assert_eq!(w.of_fd(7), Some(a));
        assert_eq!(w.get(a).map(|x| x.token), Some(1));
        assert!(w.remove(a).is_some());
        assert!(!w.contains(a) && w.of_fd(7).is_none());
        let b = w.insert(watch(7, 2));
        assert_ne!(a, b, "the slot is reused under a new id");
        assert_eq!(Watches::split(a).0, Watches::split(b).0);
        assert!(w.get(a).is_none(), "the old id names nothing");
        assert_eq!(w.of_token(2), Some(b));
        assert!(
            w.remove(a).is_none(),
            "removing the old id leaves the new watch"
        );
        assert_eq!(w.of_fd(7), Some(b));
    }
}
