//! io_uring as the event loop uses it: poll requests whose completions report
//! readiness, multishot receives into a ring of provided buffers, and gather sends of
//! memory the ring owns until their completion.
//!
//! A poll is multishot (a completion on each wake-up of the file, as an edge-triggered
//! epoll reports) or one-shot, armed again by its owner after each report
//! (level-triggered). A receive is multishot: each completion names a buffer of the
//! ring's group, which the kernel picked when the bytes arrived, so an idle connection
//! holds none; the owner copies the bytes out and gives the buffer back. A send takes a
//! [`SendBuf`] by value and keeps it until its completion, so the memory the kernel
//! reads cannot change or go away under it. A multishot accept makes a connection's
//! descriptor as soon as it is established; the ring owns each such descriptor from
//! its completion on ([`Ring::accepted`]), so none leaks. One `io_uring_enter` submits
//! what was queued and waits, with a timeout, for completions.
//!
//! Built on the `io-uring` crate. Its `push` is `unsafe` because an entry may name
//! memory the kernel reads or writes later: each push below says what that memory is
//! and why it lives long enough. When the ring is dropped, every request is cancelled
//! and its completion awaited before the buffers are freed.

use std::collections::HashMap;
use std::io;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::Errno;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// The tag of cancellations, whose completions are not reported.
const REMOVAL: u64 = u64::MAX;
/// Set in the user data of a receive (never in a caller's tag): its last completion
/// is counted off [`Ring::receiving`] without a set of tags (one fewer map entry per
/// connection).
const RECEIVE: u64 = 1 << 63;
/// The provided-buffer group of the receives.
const GROUP: u16 = 0;
/// Set in the user data of a datagram receive (with [`RECEIVE`]): its buffers are of
/// [`DGRAM_GROUP`], and the ids it reports carry [`DGRAM_BUFFER`].
const DGRAM: u64 = 1 << 62;
/// Set in the user data of a datagram send (with its number in the low bits, not the
/// caller's tag: several are in flight per socket).
const DGRAM_SEND: u64 = 1 << 61;
/// The provided-buffer group of the datagram receives: buffers large enough for a GRO
/// batch (64 KiB) behind the kernel's header, address and control messages.
const DGRAM_GROUP: u16 = 1;
/// Set in the buffer id a datagram receive's completion reports.
pub const DGRAM_BUFFER: u16 = 0x8000;
const DGRAM_BUFFERS: u16 = 64;
const DGRAM_BUFFER_BYTES: usize = 64 * 1024 + 512;

/// One completion: the tag of its request, the result, whether a multishot request
/// goes on (`IORING_CQE_F_MORE`), and the provided buffer it filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The tag given when the request was queued.
    pub tag: u64,
    /// Poll events (`POLLIN` …, as [`crate::Events::from_bits`] reads them) or bytes
    /// moved on success; the error on failure.
    pub result: Result<u32, Errno>,
    /// A multishot request is still armed.
    pub more: bool,
    /// The buffer a receive filled (`result` bytes of it): read it with
    /// [`Ring::buffer`], then give it back with [`Ring::recycle`].
    pub buffer: Option<u16>,
}

/// Counts of the ring's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    /// Requests submitted.
    pub submitted: u64,
    /// Completions read.
    pub completed: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
}

/// What a gather send carries: bytes copied in, and ranges of shared buffers held by
/// reference. Owned by the ring from [`Ring::send`] to the send's completion.
#[derive(Default)]
pub struct SendBuf {
    pieces: Vec<Piece>,
    copied: Vec<u8>,
    iov: Vec<libc::iovec>,
    /// The message header that names `iov`, read by the kernel through the pointer in
    /// the request; made once per buffer, which the ring reuses.
    msg: Option<Box<libc::msghdr>>,
    len: usize,
}

enum Piece {
    Copied(usize, usize),
    Shared(Arc<[u8]>, usize, usize),
}

impl SendBuf {
    /// Appends a copy of `bytes`.
    pub fn copy(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let start = self.copied.len();
        self.copied.extend_from_slice(bytes);
        match self.pieces.last_mut() {
            Some(Piece::Copied(_, end)) if *end == start => *end = self.copied.len(),
            _ => self.pieces.push(Piece::Copied(start, self.copied.len())),
        }
        self.len += bytes.len();
    }

    /// Appends `data[start..end]`, held by reference.
    ///
    /// # Panics
    /// If the range is not within `data`.
    pub fn share(&mut self, data: &Arc<[u8]>, start: usize, end: usize) {
        assert!(start <= end && end <= data.len(), "a range of the buffer");
        if start == end {
            return;
        }
        self.pieces
            .push(Piece::Shared(Arc::clone(data), start, end));
        self.len += end - start;
    }

    /// Bytes carried.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Carries nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Buffers in the gather.
    pub fn buffers(&self) -> usize {
        self.pieces.len()
    }

    fn clear(&mut self) {
        self.pieces.clear();
        self.copied.clear();
        self.iov.clear();
        self.len = 0;
    }

    /// The iovecs of the pieces, pointing into memory this value owns or holds.
    fn build(&mut self) {
        self.iov.clear();
        for p in &self.pieces {
            let s: &[u8] = match p {
                Piece::Copied(a, b) => &self.copied[*a..*b],
                Piece::Shared(d, a, b) => &d[*a..*b],
            };
            self.iov.push(libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            });
        }
    }
}

/// The provided buffers of the receives: `count` buffers of `size` bytes and the ring
/// of entries through which they are handed to the kernel, both mapped memory.
struct Buffers {
    ring: *mut Entry,
    ring_bytes: usize,
    mem: *mut u8,
    mem_bytes: usize,
    size: usize,
    count: u16,
    /// Our copy of the ring's tail.
    tail: u16,
}

/// `struct io_uring_buf`; the `resv` field of the first entry is the ring's tail.
#[repr(C)]
struct Entry {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

fn map(bytes: usize) -> io::Result<*mut libc::c_void> {
    // SAFETY: an anonymous private mapping names no existing memory; the result is
    // checked before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p)
}

impl Buffers {
    fn new(count: u16, size: usize) -> io::Result<Buffers> {
        assert!(count.is_power_of_two(), "a ring's size is a power of two");
        let ring_bytes = usize::from(count) * std::mem::size_of::<Entry>();
        let ring = map(ring_bytes)?.cast::<Entry>();
        let mem_bytes = usize::from(count) * size;
        let mem = match map(mem_bytes) {
            Ok(m) => m.cast::<u8>(),
            Err(e) => {
                // SAFETY: the ring mapping above, of that size, used by nothing yet.
                unsafe { libc::munmap(ring.cast(), ring_bytes) };
                return Err(e);
            }
        };
        Ok(Buffers {
            ring,
            ring_bytes,
            mem,
            mem_bytes,
            size,
            count,
            tail: 0,
        })
    }

    /// Puts buffer `id` in the ring without publishing the tail.
    fn put(&mut self, id: u16) {
        let slot = usize::from(self.tail & (self.count - 1));
        // SAFETY: `slot` is below `count`, the entries the ring mapping holds; the
        // fields are written one by one through raw pointers, never the first entry's
        // `resv` (the tail, which the kernel reads), and the kernel reads an entry only
        // once the tail published after this write covers it. The buffer's address is
        // inside the buffers' mapping (`id` is below `count`).
        unsafe {
            let e = self.ring.add(slot);
            std::ptr::addr_of_mut!((*e).addr)
                .write(self.mem.add(usize::from(id) * self.size) as u64);
            std::ptr::addr_of_mut!((*e).len).write(self.size as u32);
            std::ptr::addr_of_mut!((*e).bid).write(id);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers put so far visible to the kernel.
    fn publish(&self) {
        // SAFETY: the tail is the `resv` field of the first entry, inside the ring
        // mapping, 2-byte aligned; the kernel reads it with an acquire load, so it is
        // written as an atomic with release order (after the entries it covers).
        let tail = unsafe { &*std::ptr::addr_of!((*self.ring).resv).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// Gives the buffers' pages back (`MADV_DONTNEED`): the next write into one finds a
    /// zeroed page.
    fn release(&self) -> io::Result<()> {
        // SAFETY: the range is the buffers' own private anonymous mapping, made in `new`
        // and alive while `self` is. No slice into it is alive (`slice` borrows `self`,
        // and this is reached through `&mut Ring`). The kernel writes into it only in
        // completion work run inside the owning thread's waits (the caller checks
        // `DEFER_TASKRUN`) or when this thread submits a receive whose data is there
        // already (the caller checks that every such completion was read and its buffer
        // given back): not during this call, and nothing written before it is unread;
        // after it, a write faults a zeroed page in, so no receive loses a byte.
        let r = unsafe { libc::madvise(self.mem.cast(), self.mem_bytes, libc::MADV_DONTNEED) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn slice(&self, id: u16, len: usize) -> &[u8] {
        assert!(id < self.count && len <= self.size, "a buffer of the ring");
        // SAFETY: the buffer lies inside the mapping (checked above). The kernel wrote
        // it before posting the completion that named it and writes it again only
        // after `recycle` hands it back, which takes `&mut` of the ring and so cannot
        // happen while this borrow lives.
        unsafe { std::slice::from_raw_parts(self.mem.add(usize::from(id) * self.size), len) }
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: the two mappings made in `new`, of these sizes; the ring that used
        // them has ended every request before this runs (see `Ring`'s drop).
        unsafe {
            libc::munmap(self.ring.cast(), self.ring_bytes);
            libc::munmap(self.mem.cast(), self.mem_bytes);
        }
    }
}

/// What a splice on the ring names, held until its completion.
pub struct Held {
    /// The file spliced from (none: the pipe is the source).
    pub file: Option<std::sync::Arc<std::fs::File>>,
    /// The pipe.
    pub pipe: std::sync::Arc<crate::pipe::Pipe>,
}

/// A datagram send in flight: its header and its bytes, which the header names.
struct DgramSend {
    message: crate::udp::Message,
    bytes: Vec<u8>,
}

/// A ring: polls, receives into provided buffers, owned sends.
pub struct Ring {
    // Declared before `buffers`: dropped (its descriptor closed) first.
    ring: IoUring,
    buffers: Option<Buffers>,
    /// The datagram receives' buffers, made at the first such receive.
    dgram_buffers: Option<Buffers>,
    /// The header every datagram receive names (how much room its address and control
    /// messages take in a buffer; the kernel reads it when the request is issued).
    dgram_header: Box<libc::msghdr>,
    /// Datagram sends in flight, by number: the caller's tag and what the kernel reads.
    dgram_sends: HashMap<u64, (u64, Box<DgramSend>)>,
    /// Boxed, as in `dgram_sends`: a header points into its own box, which must not
    /// move while a send names it.
    #[allow(clippy::vec_box)]
    dgram_spare: Vec<Box<DgramSend>>,
    next_dgram_send: u64,
    /// Sends in flight, by tag.
    sends: HashMap<u64, SendBuf>,
    /// What the splices in flight name (their file and pipe), by tag: held until their
    /// completion, as a connection cut meanwhile lets go of its own.
    splices: HashMap<u64, Held>,
    spare: Vec<SendBuf>,
    /// Receives armed and not yet ended (their memory is the buffers').
    receiving: usize,
    /// Tags of the multishot accepts armed and not yet ended, with how many are armed
    /// under each (one being cancelled while its successor is armed: two).
    accepting: HashMap<u64, u32>,
    /// Descriptors accepted, with their accept's tag, not yet taken.
    accepted: Vec<(u64, OwnedFd)>,
    /// Tags whose last completion a reap read (kept for its buffer).
    ended: Vec<u64>,
    counts: RingCounts,
    /// Completion work runs only inside this thread's waits (`DEFER_TASKRUN`): between
    /// them no receive writes into the buffers, so their pages can be given back.
    deferred: bool,
    /// Buffers handed out in completions and not yet recycled.
    lent: u32,
    /// A receive completed since the last [`Ring::release_idle_buffers`].
    received: bool,
    /// The buffers may hold resident pages (written since they were last given back).
    touched: bool,
    /// Requests were submitted outside a wait and their completions not read yet: a
    /// receive issued at submission may already have written into a buffer.
    unreaped: bool,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("counts", &self.counts)
            .finish()
    }
}

/// Receive buffers per ring, and their size.
const BUFFERS: u16 = 256;
const BUFFER_BYTES: usize = 16 * 1024;

impl Ring {
    /// A ring with `entries` submission slots, or why io_uring cannot serve here: the
    /// setup refused (`kernel.io_uring_disabled`, a seccomp profile: `EPERM`, `ENOSYS`)
    /// or a kernel without timed waits (5.11), poll requests, sends, receives into a
    /// provided-buffer ring (5.19) or multishot receives (6.0).
    ///
    /// The ring belongs to the thread that makes it (`IORING_SETUP_SINGLE_ISSUER`), and
    /// the kernel's completion work waits until that thread asks for completions
    /// (`IORING_SETUP_DEFER_TASKRUN`, Linux 6.1; before it, `COOP_TASKRUN`): a request
    /// that completes while the worker is busy does not interrupt it.
    pub fn new(entries: u32) -> io::Result<Ring> {
        let (ring, deferred) = match IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(entries * 8)
            .build(entries)
        {
            Ok(r) => (r, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                match IoUring::builder()
                    .setup_coop_taskrun()
                    .setup_cqsize(entries * 8)
                    .build(entries)
                {
                    Ok(r) => (r, false),
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        (IoUring::new(entries)?, false)
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring has no timed waits (IORING_FEAT_EXT_ARG, Linux 5.11)",
            ));
        }
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        for (code, name) in [
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
            (opcode::SendMsg::CODE, "SENDMSG"),
            (opcode::RecvMulti::CODE, "RECV"),
            (opcode::AcceptMulti::CODE, "ACCEPT"),
            (opcode::Close::CODE, "CLOSE"),
        ] {
            if !probe.is_supported(code) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the kernel's io_uring has no {name}"),
                ));
            }
        }
        let mut buffers = Buffers::new(BUFFERS, BUFFER_BYTES)?;
        // SAFETY: the ring mapping holds `BUFFERS` entries and lives in `self.buffers`
        // until the ring is dropped (its descriptor closed first, which unregisters it).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(buffers.ring as u64, BUFFERS, GROUP, 0)
        }
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("the kernel's io_uring has no provided-buffer rings (Linux 5.19): {e}"),
            )
        })?;
        for id in 0..BUFFERS {
            buffers.put(id);
        }
        buffers.publish();
        let mut r = Ring {
            ring,
            buffers: Some(buffers),
            dgram_buffers: None,
            dgram_header: Box::new(crate::udp::receive_header()),
            dgram_sends: HashMap::new(),
            dgram_spare: Vec::new(),
            next_dgram_send: 0,
            sends: HashMap::new(),
            splices: HashMap::new(),
            spare: Vec::new(),
            receiving: 0,
            accepting: Default::default(),
            accepted: Vec::new(),
            ended: Vec::new(),
            counts: RingCounts::default(),
            deferred,
            lent: 0,
            received: false,
            touched: false,
            unreaped: false,
        };
        r.check_multishot_receive()?;
        r.counts = RingCounts::default();
        Ok(r)
    }

    /// Multishot receives came in Linux 6.0; before it the request fails with
    /// `EINVAL`. Tried on a socket pair.
    fn check_multishot_receive(&mut self) -> io::Result<()> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let (a, mut b) = std::os::unix::net::UnixStream::pair()?;
        self.recv(a.as_raw_fd(), 1)?;
        b.write_all(b"x")?;
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(1);
        while out.is_empty() && Instant::now() < deadline {
            self.wait(Duration::from_millis(100), &mut out)?;
        }
        let got = out.first().copied();
        self.cancel_receive(1)?;
        drop(a);
        while self.receiving > 0 && Instant::now() < deadline {
            let mut rest = Vec::new();
            self.wait(Duration::from_millis(100), &mut rest)?;
            out.extend(rest);
        }
        for c in &out {
            if let Some(id) = c.buffer {
                self.recycle(id);
            }
        }
        match got {
            Some(c) if c.result == Ok(1) && c.more => Ok(()),
            Some(Completion { result: Err(e), .. }) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the kernel's io_uring has no multishot receives (Linux 6.0): {e}"),
            )),
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring gave no multishot receive",
            )),
        }
    }

    /// What the ring did so far.
    pub fn counts(&self) -> RingCounts {
        self.counts
    }

    /// Queues `entry`; the caller has made sure that what it names outlives it.
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry pushed here names either no user memory (polls,
            // cancellations), the provided buffers (receives; the mapping outlives
            // every request, see the drop), a message header and buffers kept in
            // `self.sends` or `self.dgram_sends` until the send's completion (sends),
            // or the datagram receives' header, boxed and kept for the ring's life.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            // The submission queue is full: hand it to the kernel first.
            self.submit()?;
        }
    }

    /// Queues a poll of `fd` for `events` under `tag`; `multishot` keeps it armed
    /// after each report. The descriptor is looked up when the request is submitted:
    /// call [`Ring::submit`] before it can be closed.
    pub fn poll_add(
        &mut self,
        fd: RawFd,
        events: u32,
        tag: u64,
        multishot: bool,
    ) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), events)
            .multi(multishot)
            .build()
            .user_data(tag);
        self.push(entry)
    }

    /// Queues a multishot receive on `fd` under `tag`: each completion carries a
    /// buffer, until one without `more` (the peer closed: result 0; an error; or no
    /// buffer was free: `-ENOBUFS`, arm it again once some are given back).
    pub fn recv(&mut self, fd: RawFd, tag: u64) -> io::Result<()> {
        debug_assert!(tag & RECEIVE == 0, "a tag with the receive bit");
        let entry = opcode::RecvMulti::new(types::Fd(fd), GROUP)
            .build()
            .user_data(tag | RECEIVE);
        self.push(entry)?;
        self.receiving += 1;
        Ok(())
    }

    /// Queues a multishot receive of datagrams on the UDP socket `fd` under `tag`
    /// (`IORING_OP_RECVMSG`): each completion carries a buffer (its id with
    /// [`DGRAM_BUFFER`] set) holding one datagram or a GRO batch, with its sender and
    /// control messages, read with [`Ring::datagram`]; it ends as [`Ring::recv`]'s do
    /// and is cancelled with [`Ring::cancel_datagram_receive`].
    pub fn recvmsg(&mut self, fd: RawFd, tag: u64) -> io::Result<()> {
        debug_assert!(
            tag & (RECEIVE | DGRAM | DGRAM_SEND) == 0,
            "a tag with a flag bit"
        );
        if self.dgram_buffers.is_none() {
            let mut b = Buffers::new(DGRAM_BUFFERS, DGRAM_BUFFER_BYTES)?;
            // SAFETY: the ring mapping holds `DGRAM_BUFFERS` entries and lives in
            // `self.dgram_buffers` until the ring is dropped (its descriptor closed
            // first, which unregisters it).
            unsafe {
                self.ring.submitter().register_buf_ring_with_flags(
                    b.ring as u64,
                    DGRAM_BUFFERS,
                    DGRAM_GROUP,
                    0,
                )
            }?;
            for id in 0..DGRAM_BUFFERS {
                b.put(id);
            }
            b.publish();
            self.dgram_buffers = Some(b);
        }
        let entry = opcode::RecvMsgMulti::new(types::Fd(fd), &*self.dgram_header, DGRAM_GROUP)
            .build()
            .user_data(tag | RECEIVE | DGRAM);
        self.push(entry)?;
        self.receiving += 1;
        Ok(())
    }

    /// What datagram buffer `id` (a datagram receive's, [`DGRAM_BUFFER`] set) holds:
    /// the datagram (or GRO batch) and what its control messages said. None if the
    /// kernel's layout cannot be read or the sender is of no IP family.
    pub fn datagram(&self, id: u16, len: usize) -> Option<(crate::udp::Received, &[u8])> {
        let buf = self.buffer(id, len);
        let out = types::RecvMsgOut::parse(buf, &self.dgram_header).ok()?;
        let truncated = out.is_payload_truncated();
        // The payload as a slice of the buffer itself (the parser lends it only as
        // long as itself).
        let p = out.payload_data();
        let at = (p.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
        let payload = buf.get(at..at + p.len())?;
        let (r, _) = crate::udp::from_ring(out.name_data(), out.control_data(), &[], truncated)?;
        Some((
            crate::udp::Received {
                len: payload.len(),
                ..r
            },
            payload,
        ))
    }

    /// A spare datagram send, or a new one.
    fn dgram_box(&mut self) -> Box<DgramSend> {
        self.dgram_spare.pop().unwrap_or_else(|| {
            Box::new(DgramSend {
                message: crate::udp::Message::default(),
                bytes: Vec::new(),
            })
        })
    }

    fn queue_datagram(
        &mut self,
        fd: RawFd,
        head: crate::udp::Head,
        mut d: Box<DgramSend>,
        tag: u64,
    ) -> io::Result<()> {
        let DgramSend { message, bytes } = &mut *d;
        message.build(&head.with(bytes), bytes.as_ptr(), bytes.len());
        let n = self.next_dgram_send;
        self.next_dgram_send = (n + 1) & (DGRAM_SEND - 1);
        let entry = opcode::SendMsg::new(types::Fd(fd), &d.message.msg)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
            .user_data(DGRAM_SEND | n);
        // The box (header, address, control messages) and the bytes' heap block do
        // not move when the box does; kept here until the completion.
        self.dgram_sends.insert(n, (tag, d));
        if let Err(e) = self.push(entry) {
            if let Some((_, d)) = self.dgram_sends.remove(&n) {
                self.dgram_spare.push(d);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Queues a datagram send of the batch in `bytes`, as `head` says, on the UDP
    /// socket `fd`: the bytes are taken, not copied (the ring keeps that buffer and the
    /// header until the completion and leaves `bytes` a spare one of its own, empty:
    /// seed 000's send with no copy beyond the kernel's); the completion comes under
    /// `tag`, whose sends may be many in flight.
    pub fn send_datagram(
        &mut self,
        fd: RawFd,
        head: crate::udp::Head,
        bytes: &mut Vec<u8>,
        tag: u64,
    ) -> io::Result<()> {
        let mut d = self.dgram_box();
        std::mem::swap(&mut d.bytes, bytes);
        bytes.clear();
        self.queue_datagram(fd, head, d, tag)
    }

    /// Queues a multishot accept on the listening socket `fd` under `tag`: each
    /// completion is a connection (its descriptor, non-blocking and close-on-exec,
    /// taken with [`Ring::accepted`]) until one without `more` (an error, such as
    /// `-EMFILE`; arm it again when it makes sense).
    ///
    /// The kernel reads the process's descriptor limit (`RLIMIT_NOFILE`) when the
    /// request is queued: a limit changed later holds for it only once it is cancelled
    /// and armed again (the same tag may be armed again at once behind its
    /// cancellation).
    pub fn accept(&mut self, fd: RawFd, tag: u64) -> io::Result<()> {
        let entry = opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build()
            .user_data(tag);
        self.push(entry)?;
        *self.accepting.entry(tag).or_default() += 1;
        Ok(())
    }

    /// An accept under `tag` is armed (its last completion not yet read).
    pub fn accepting(&self, tag: u64) -> bool {
        self.accepting.contains_key(&tag)
    }

    /// Takes the descriptors accepted since the last call, each with its accept's tag.
    pub fn accepted(&mut self) -> std::vec::Drain<'_, (u64, OwnedFd)> {
        self.accepted.drain(..)
    }

    /// An empty buffer for [`Ring::send`] (one given back by an earlier send, if any).
    pub fn send_buf(&mut self) -> SendBuf {
        self.spare.pop().unwrap_or_default()
    }

    /// Queues a gather send of `buf` on `fd` under `tag` (`MSG_MORE` if `more`), at
    /// most one per tag in flight. The ring keeps `buf` until the completion.
    pub fn send(&mut self, fd: RawFd, mut buf: SendBuf, more: bool, tag: u64) -> io::Result<()> {
        if self.sends.contains_key(&tag) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a send under this tag is in flight",
            ));
        }
        buf.build();
        let SendBuf { iov, msg, .. } = &mut buf;
        // SAFETY: an all-zero `msghdr` is a valid one (no name, no control data).
        let msg = msg.get_or_insert_with(|| Box::new(unsafe { std::mem::zeroed() }));
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        let mut flags = libc::MSG_NOSIGNAL;
        if more {
            flags |= libc::MSG_MORE;
        }
        let entry = opcode::SendMsg::new(types::Fd(fd), &**msg)
            .flags(flags as u32)
            .build()
            .user_data(tag);
        // The header (boxed), its iovecs and the memory they name are heap blocks that
        // moving `buf` does not move; kept here until the completion.
        self.sends.insert(tag, buf);
        if let Err(e) = self.push(entry) {
            if let Some(buf) = self.sends.remove(&tag) {
                self.give_back(buf);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Queues a `splice` of `len` bytes from `fd_in` (from `off_in`, a file; none: a
    /// pipe) to `fd_out` under `tag`, holding `held` (what the descriptors belong to)
    /// until its completion. The kernel runs it on its worker threads and looks the
    /// descriptors up there: the owner must not close `fd_out` (a socket) before the
    /// completion. A pipe or socket that would block completes with `EAGAIN`.
    pub fn splice(
        &mut self,
        (fd_in, off_in): (RawFd, Option<u64>),
        fd_out: RawFd,
        len: u32,
        flags: crate::pipe::SpliceFlags,
        held: Held,
        tag: u64,
    ) -> io::Result<()> {
        let off_in = match off_in {
            Some(o) => i64::try_from(o).map_err(|_| io::Error::from(Errno::INVAL))?,
            None => -1,
        };
        let entry = opcode::Splice::new(types::Fd(fd_in), off_in, types::Fd(fd_out), -1, len)
            .flags(flags.bits())
            .build()
            .user_data(tag);
        self.splices.insert(tag, held);
        if let Err(e) = self.push(entry) {
            self.splices.remove(&tag);
            return Err(e);
        }
        Ok(())
    }

    fn give_back(&mut self, mut buf: SendBuf) {
        buf.clear();
        if self.spare.len() < 64 {
            self.spare.push(buf);
        }
    }

    /// The first `len` bytes of provided buffer `id`, which a receive's completion
    /// named.
    pub fn buffer(&self, id: u16, len: usize) -> &[u8] {
        if id & DGRAM_BUFFER != 0 {
            return match &self.dgram_buffers {
                Some(b) => b.slice(id & !DGRAM_BUFFER, len),
                None => &[],
            };
        }
        match &self.buffers {
            Some(b) => b.slice(id, len),
            None => &[],
        }
    }

    /// Gives buffer `id` back to the kernel.
    pub fn recycle(&mut self, id: u16) {
        let (buffers, id) = if id & DGRAM_BUFFER != 0 {
            (self.dgram_buffers.as_mut(), id & !DGRAM_BUFFER)
        } else {
            (self.buffers.as_mut(), id)
        };
        if let Some(b) = buffers {
            if id < b.count {
                b.put(id);
                b.publish();
                self.lent = self.lent.saturating_sub(1);
            }
        }
    }

    /// Gives the receive buffers' pages back to the system when the ring has been idle
    /// since the last call (no receive completed, none of the buffers handed out) and
    /// they were written since they were last given back; true if it did. Called once
    /// per tick, it costs an idle server one `madvise` after its last request, and
    /// keeps what idle connections cost from including pages that only a burst of
    /// requests touched (each buffer's first page, 1 MiB per ring, is otherwise held for
    /// ever). Only when completion work runs in this thread's waits alone
    /// (`DEFER_TASKRUN`) and every completion of what was submitted outside a wait has
    /// been read (a receive issued at submission writes at once): then no receive has
    /// written into a buffer that is not accounted for, and none writes during the call.
    pub fn release_idle_buffers(&mut self) -> io::Result<bool> {
        if std::mem::take(&mut self.received)
            || !self.deferred
            || self.lent > 0
            || !self.touched
            || self.unreaped
        {
            return Ok(false);
        }
        for b in [&self.buffers, &self.dgram_buffers].into_iter().flatten() {
            b.release()?;
        }
        self.touched = false;
        Ok(true)
    }

    /// Queues the close of `fd`, after every request queued before it (which named the
    /// descriptor by its number, resolved when they are submitted: the number cannot be
    /// reused under them).
    ///
    /// Only requests the kernel tries at once when they are submitted (polls, sends,
    /// receives, accepts, cancellations, this close) resolve the number then. A
    /// `SHUTDOWN` goes to the ring's worker threads and looks the number up only when
    /// one runs it, which may be after this close and another connection's accept
    /// took the number: 2% of connections-per-request were shut down before their
    /// answer that way. Such calls stay the caller's own.
    pub fn close(&mut self, fd: OwnedFd) -> io::Result<()> {
        let raw = fd.into_raw_fd();
        let entry = opcode::Close::new(types::Fd(raw))
            .build()
            .user_data(REMOVAL);
        if let Err(e) = self.push(entry) {
            // SAFETY: the descriptor was ours (taken from the OwnedFd above) and the
            // entry naming it was not queued.
            drop(unsafe { OwnedFd::from_raw_fd(raw) });
            return Err(e);
        }
        Ok(())
    }

    /// Cancels the receive queued under `tag` ([`Ring::recv`]).
    pub fn cancel_receive(&mut self, tag: u64) -> io::Result<()> {
        self.cancel(tag | RECEIVE)
    }

    /// Cancels the datagram receive queued under `tag` ([`Ring::recvmsg`]).
    pub fn cancel_datagram_receive(&mut self, tag: u64) -> io::Result<()> {
        self.cancel(tag | RECEIVE | DGRAM)
    }

    /// Queues the cancellation of the request tagged `tag` (its last completion
    /// follows, `-ECANCELED` or its own). Until it is submitted (the next
    /// [`Ring::submit`] or [`Ring::wait`]) the request holds its file open.
    pub fn cancel(&mut self, tag: u64) -> io::Result<()> {
        // Every request under the tag (an accept armed again behind its cancellation
        // may be two).
        let entry = opcode::AsyncCancel2::new(types::CancelBuilder::user_data(tag).all())
            .build()
            .user_data(REMOVAL);
        self.push(entry)
    }

    /// Submits what is queued without waiting.
    pub fn submit(&mut self) -> io::Result<usize> {
        let queued = self.ring.submission().len();
        if queued == 0 {
            return Ok(0);
        }
        self.counts.enters += 1;
        let n = self.ring.submit()?;
        self.counts.submitted += n as u64;
        self.unreaped |= n > 0;
        Ok(n)
    }

    /// Submits what is queued and waits up to `timeout` (0: not at all) for a
    /// completion; appends every completion there is to `out` (cancellations left out).
    /// One `io_uring_enter`, which also runs the completion work deferred until now.
    pub fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> io::Result<()> {
        let queued = self.ring.submission().len();
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        self.counts.enters += 1;
        // Asking for a completion (`IORING_ENTER_GETEVENTS`), even with no time to
        // wait, is what runs the deferred completion work: a cancelled request lets go
        // of its file there.
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(n) => self.counts.submitted += n as u64,
            // The timeout, a signal, or completions the kernel holds back for a full
            // completion queue (read below, which makes room).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                self.counts.submitted += queued.saturating_sub(self.ring.submission().len()) as u64;
            }
            Err(e) => return Err(e),
        }
        self.reap(out);
        Ok(())
    }

    /// Reads the completion queue.
    fn reap(&mut self, out: &mut Vec<Completion>) {
        // Everything submitted so far has posted what it wrote by now (a receive
        // issued at submission posts its completion at once): read below.
        self.unreaped = false;
        let mut ended = std::mem::take(&mut self.ended);
        for cqe in self.ring.completion() {
            self.counts.completed += 1;
            if cqe.user_data() == REMOVAL {
                continue;
            }
            let receive = cqe.user_data() & RECEIVE != 0;
            let more = cqueue::more(cqe.flags());
            if cqe.user_data() & DGRAM_SEND != 0 && !receive {
                let n = cqe.user_data() & (DGRAM_SEND - 1);
                if let Some((tag, d)) = self.dgram_sends.remove(&n) {
                    if self.dgram_spare.len() < 64 {
                        self.dgram_spare.push(d);
                    }
                    out.push(Completion {
                        tag,
                        result: Errno::result(cqe.result()),
                        more: false,
                        buffer: None,
                    });
                }
                continue;
            }
            let dgram = cqe.user_data() & DGRAM != 0;
            let tag = cqe.user_data() & !(RECEIVE | DGRAM);
            let buffer =
                cqueue::buffer_select(cqe.flags()).map(
                    |b| {
                        if dgram {
                            b | DGRAM_BUFFER
                        } else {
                            b
                        }
                    },
                );
            if buffer.is_some() {
                self.lent += 1;
                self.received = true;
                self.touched = true;
            }
            if cqe.result() >= 0 && !receive && self.accepting.contains_key(&tag) {
                // SAFETY: an accept's result is a descriptor the kernel has just made
                // for us; nothing else owns it.
                let fd = unsafe { OwnedFd::from_raw_fd(cqe.result()) };
                self.accepted.push((tag, fd));
            }
            if !more {
                if receive {
                    self.receiving -= 1;
                } else {
                    ended.push(tag);
                }
            }
            out.push(Completion {
                tag,
                result: Errno::result(cqe.result()),
                more,
                buffer,
            });
        }
        for &tag in &ended {
            self.splices.remove(&tag);
            match self.sends.remove(&tag) {
                Some(buf) => self.give_back(buf),
                None => {
                    if let Some(n) = self.accepting.get_mut(&tag) {
                        *n -= 1;
                        if *n == 0 {
                            self.accepting.remove(&tag);
                        }
                    }
                }
            }
        }
        ended.clear();
        self.ended = ended;
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // What is queued goes first: closes of connections among it (their descriptors
        // are ours no more).
        let _ = self.submit();
        // Requests naming our memory (sends, receives) are cancelled and their last
        // completions read before the memory goes; if that does not finish, the memory
        // is leaked rather than freed under the kernel.
        if self.sends.is_empty() && self.dgram_sends.is_empty() && self.receiving == 0 {
            return;
        }
        let all = types::CancelBuilder::any();
        let entry = opcode::AsyncCancel2::new(all).build().user_data(REMOVAL);
        let _ = self.push(entry);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut out = Vec::new();
        let busy = |r: &Ring| !r.sends.is_empty() || !r.dgram_sends.is_empty() || r.receiving > 0;
        while busy(self) && Instant::now() < deadline {
            out.clear();
            if self.wait(Duration::from_millis(50), &mut out).is_err() {
                break;
            }
        }
        if busy(self) {
            std::mem::forget(std::mem::take(&mut self.sends));
            std::mem::forget(std::mem::take(&mut self.dgram_sends));
            std::mem::forget(self.buffers.take());
            std::mem::forget(self.dgram_buffers.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    fn ring() -> Ring {
        Ring::new(8).expect("io_uring on the test machine")
    }

    fn wait_for(r: &mut Ring, out: &mut Vec<Completion>, tag: u64) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !out.iter().any(|c| c.tag == tag) {
            assert!(
                Instant::now() < deadline,
                "no completion for {tag}: {out:?}"
            );
            r.wait(Duration::from_millis(100), out).unwrap();
        }
    }

    /// Datagrams both ways on the ring: a GSO batch sent (its header and bytes held
    /// until the completion) arrives as its datagrams, each received into a datagram
    /// buffer with its sender and ECN codepoint, as `udp::recv` reads them.
    #[test]
    fn datagrams_go_both_ways_on_the_ring() {
        use std::net::UdpSocket;
        let mut r = ring();
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let features = crate::udp::prepare(std::os::fd::AsFd::as_fd(&server), false).unwrap();
        crate::udp::prepare(std::os::fd::AsFd::as_fd(&client), false).unwrap();
        r.recvmsg(server.as_raw_fd(), 3).unwrap();
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let head = crate::udp::Head {
            to: server.local_addr().unwrap(),
            from: None,
            ecn: 0b10,
            segment: features.gso.then_some(1200),
        };
        let mut bytes = if features.gso {
            payload.clone()
        } else {
            payload[..1200].to_vec()
        };
        let b = head.with(&payload[..bytes.len()]);
        r.send_datagram(client.as_raw_fd(), head, &mut bytes, 9)
            .unwrap();
        assert!(bytes.is_empty(), "the bytes taken, a spare buffer left");
        let mut out = Vec::new();
        wait_for(&mut r, &mut out, 9);
        let sent = out.iter().find(|c| c.tag == 9).unwrap();
        assert_eq!(sent.result, Ok(b.buf.len() as u32), "{out:?}");
        assert!(r.dgram_sends.is_empty(), "the send's memory kept until now");
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < b.buf.len() {
            assert!(
                Instant::now() < deadline,
                "received {} of {}",
                got.len(),
                b.buf.len()
            );
            for c in out.drain(..).filter(|c| c.tag == 3) {
                assert!(c.more, "{c:?}");
                let id = c.buffer.expect("a buffer");
                assert!(id & DGRAM_BUFFER != 0);
                let (d, bytes) = r.datagram(id, c.result.unwrap() as usize).expect("parsed");
                assert_eq!(d.from, client.local_addr().unwrap());
                assert_eq!(d.ecn, 0b10);
                assert_eq!(d.to, Some("127.0.0.1".parse().unwrap()));
                assert_eq!(d.len, bytes.len());
                assert!(!d.truncated);
                got.extend_from_slice(bytes);
                r.recycle(id);
            }
            r.wait(Duration::from_millis(100), &mut out).unwrap();
        }
        assert_eq!(got, b.buf);
        r.cancel_datagram_receive(3).unwrap();
        wait_for(&mut r, &mut out, 3);
        assert_eq!(r.receiving, 0);
    }

    #[test]
    fn a_multishot_poll_reports_each_wake_up_until_cancelled() {
        let mut r = ring();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        r.poll_add(a.as_raw_fd(), libc::POLLIN as u32, 7, true)
            .unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_millis(20), &mut out).unwrap();
        assert!(out.is_empty(), "nothing to read yet: {out:?}");
        b.write_all(b"x").unwrap();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].tag, 7);
        assert!(
            crate::Events::from_bits(out[0].result.unwrap()).any(crate::Events::IN) && out[0].more
        );
        out.clear();
        b.write_all(b"y").unwrap();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.iter().filter(|c| c.tag == 7).count(), 1, "{out:?}");
        out.clear();
        r.cancel(7).unwrap();
        r.wait(Duration::from_millis(50), &mut out).unwrap();
        // The request ends with -ECANCELED (and no F_MORE); then nothing more.
        assert!(out.iter().all(|c| c.tag == 7 && !c.more), "{out:?}");
        out.clear();
        b.write_all(b"z").unwrap();
        r.wait(Duration::from_millis(50), &mut out).unwrap();
        assert!(out.is_empty(), "{out:?}");
        let c = r.counts();
        assert!(
            c.enters >= 2 && c.submitted == 2 && c.completed >= 4,
            "{c:?}"
        );
    }

    #[test]
    fn a_one_shot_poll_reports_once_and_again_when_armed_again() {
        let mut r = ring();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.write_all(b"x").unwrap();
        r.poll_add(a.as_raw_fd(), libc::POLLIN as u32, 1, false)
            .unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(!out[0].more);
        out.clear();
        // Still readable (nothing was read): armed again, it reports at once.
        r.poll_add(a.as_raw_fd(), libc::POLLIN as u32, 1, false)
            .unwrap();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_bad_descriptor_completes_with_its_error() {
        let mut r = ring();
        r.poll_add(-1, libc::POLLIN as u32, 3, true).unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].result, Err(Errno::BADF));
    }

    #[test]
    fn a_multishot_receive_hands_out_buffers_then_the_end() {
        let mut r = ring();
        let (a, mut b) = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| {
                let c = std::net::TcpStream::connect(l.local_addr()?)?;
                Ok((l.accept()?.0, c))
            })
            .unwrap();
        a.set_nonblocking(true).unwrap();
        r.recv(a.as_raw_fd(), 5).unwrap();
        let mut out = Vec::new();
        let mut got = Vec::new();
        for word in [&b"GET / HTTP/1.1\r\n\r\n"[..], b"second"] {
            b.write_all(word).unwrap();
            out.clear();
            wait_for(&mut r, &mut out, 5);
            for c in &out {
                assert!(c.more, "{c:?}");
                let id = c.buffer.expect("a buffer");
                got.extend_from_slice(r.buffer(id, c.result.unwrap() as usize));
                r.recycle(id);
            }
        }
        assert_eq!(got, b"GET / HTTP/1.1\r\n\r\nsecond");
        // More data than one buffer holds comes in several.
        let big = vec![7u8; 3 * BUFFER_BYTES + 5];
        b.write_all(&big).unwrap();
        got.clear();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < big.len() {
            assert!(Instant::now() < deadline, "{} of {}", got.len(), big.len());
            out.clear();
            r.wait(Duration::from_millis(100), &mut out).unwrap();
            for c in &out {
                let id = c.buffer.expect("a buffer");
                got.extend_from_slice(r.buffer(id, c.result.unwrap() as usize));
                r.recycle(id);
            }
        }
        assert_eq!(got, big);
        drop(b);
        out.clear();
        wait_for(&mut r, &mut out, 5);
        assert_eq!(
            (out[0].result, out[0].more, out[0].buffer),
            (Ok(0), false, None),
            "the end"
        );
        assert_eq!(r.receiving, 0);
    }

    #[test]
    fn a_send_owns_its_buffers_and_reports_the_bytes() {
        let mut r = ring();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let shared: Arc<[u8]> = Arc::from(&b"..body.."[..]);
        let mut buf = r.send_buf();
        buf.copy(b"head ");
        buf.share(&shared, 2, 6);
        buf.copy(b" tail");
        assert_eq!((buf.len(), buf.buffers()), (14, 3));
        r.send(a.as_raw_fd(), buf, false, 9).unwrap();
        drop(shared); // the ring holds its own reference
        let mut out = Vec::new();
        wait_for(&mut r, &mut out, 9);
        assert_eq!(out[0].result, Ok(14));
        let mut got = [0u8; 14];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"head body tail");
        assert!(r.sends.is_empty() && r.spare.len() == 1);
    }

    #[test]
    fn a_send_to_a_full_socket_waits_for_room() {
        // Though the socket is non-blocking (the worker makes its own calls on it too),
        // the ring does not report EAGAIN: it waits for room, as a poll would.
        let mut r = ring();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let big = vec![1u8; 4 << 20];
        let mut buf = r.send_buf();
        buf.copy(&big);
        r.send(a.as_raw_fd(), buf, false, 1).unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_millis(100), &mut out).unwrap();
        let first = out.iter().find(|c| c.tag == 1).map(|c| c.result);
        let reader = std::thread::spawn(move || {
            let mut n = 0;
            let mut chunk = vec![0u8; 1 << 16];
            while n < 4 << 20 {
                match b.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
            }
            n
        });
        if first.is_none() {
            wait_for(&mut r, &mut out, 1);
        }
        let sent = out.iter().find(|c| c.tag == 1).unwrap().result.unwrap();
        assert!(sent > 0, "{out:?}");
        drop(a);
        drop(r);
        assert_eq!(reader.join().unwrap(), sent as usize);
    }

    #[test]
    fn a_multishot_accept_hands_over_each_connection() {
        let mut r = ring();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        r.accept(l.as_raw_fd(), 4).unwrap();
        let clients: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap())
            .collect();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < 3 {
            assert!(Instant::now() < deadline, "{} of 3", got.len());
            let mut out = Vec::new();
            r.wait(Duration::from_millis(100), &mut out).unwrap();
            assert!(out.iter().all(|c| c.tag == 4 && c.more && c.result.is_ok()));
            got.extend(r.accepted());
        }
        // Each is a connection of ours: what a client writes arrives there.
        let (_, fd) = got.pop().unwrap();
        let server = std::net::TcpStream::from(fd);
        assert!(clients
            .iter()
            .any(|c| c.local_addr().unwrap() == server.peer_addr().unwrap()));
        r.cancel(4).unwrap();
        let mut out = Vec::new();
        wait_for(&mut r, &mut out, 4);
        assert!(r.accepting.is_empty());
    }

    #[test]
    fn a_ring_dropped_with_requests_in_flight_ends_them_first() {
        let mut r = ring();
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        r.recv(a.as_raw_fd(), 1).unwrap();
        r.submit().unwrap();
        let t = Instant::now();
        drop(r);
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
