//! `MSG_ZEROCOPY` sends and their completions (seed 002 on Linux).
//!
//! A zero-copy send hands the kernel references to user pages; the pages must stay
//! mapped and unchanged until the kernel says it has let go of them, by a notification
//! on the socket's error queue. [`ZeroCopy`] keeps that promise for its callers: each
//! send stores a clone of the buffer's [`Pinned`] handle, and the handle is dropped only
//! when the notification covering that send has been read. No caller needs `unsafe`.
//!
//! The kernel numbers successful zero-copy sends on a socket 0, 1, 2, … (a call that
//! queues nothing takes no number) and reports completions as inclusive ranges
//! `[lo, hi]` of those numbers, usually in order but not always. A completion can carry
//! the "copied" verdict: the kernel had to copy the data after all (loopback, a local
//! receiver in another namespace, a device without scatter-gather), so zero-copy cost
//! more than a plain send would have.
//!
//! A [`Mmap`] gives zero-copy sends of file ranges. Its contents are never exposed to
//! Rust code: if the file shrinks under the mapping, the kernel's page pinning fails
//! with `EFAULT` instead of this process taking `SIGBUS`.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::net::SendFlags;
use crate::{cvt_size, to_off64};

const MSG_ZEROCOPY: libc::c_int = 0x400_0000;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;
const SOL_IP: libc::c_int = 0;
const IP_RECVERR: libc::c_int = 11;
const SOL_IPV6: libc::c_int = 41;
const IPV6_RECVERR: libc::c_int = 25;

/// Turns `SO_ZEROCOPY` on or off for a socket ([`ZeroCopy::new`] turns it on).
pub fn set_zerocopy(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    crate::net::set_option(fd, crate::net::SockOpt::ZeroCopy, i32::from(on))
}

/// A read-only shared mapping of a file range, only ever read by the kernel.
#[derive(Debug)]
pub struct Mmap {
    addr: NonNull<libc::c_void>,
    len: usize,
}

// SAFETY: the mapping is read-only and never dereferenced by Rust code; its address is
// only passed to the kernel, which may do so from any thread.
unsafe impl Send for Mmap {}
// SAFETY: as above: shared references give no access to the contents.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `file` from `offset`, which must be a multiple of the page size.
    pub fn map(file: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<Mmap> {
        if len == 0 || !offset.is_multiple_of(page_size() as u64) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mapping needs a non-empty, page-aligned range",
            ));
        }
        let off = to_off64(offset)?;
        // SAFETY: a fresh read-only mapping chosen by the kernel overlaps nothing of ours;
        // the descriptor is borrowed for the call (the mapping outlives it by design).
        let p = unsafe {
            libc::mmap64(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let addr = NonNull::new(p).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { addr, len })
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty mappings cannot be made.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: addr/len are exactly what mmap returned, and the mapping is unmapped once.
        unsafe {
            libc::munmap(self.addr.as_ptr(), self.len);
        }
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Memory that may be sent with `MSG_ZEROCOPY`: immutable while any handle exists.
#[derive(Clone, Debug)]
pub enum Pinned {
    /// A heap buffer, shared and immutable.
    Memory(Arc<[u8]>),
    /// A file mapping.
    Map(Arc<Mmap>),
}

impl Pinned {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Pinned::Memory(b) => b.len(),
            Pinned::Map(m) => m.len,
        }
    }

    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn base(&self) -> *const u8 {
        match self {
            Pinned::Memory(b) => b.as_ptr(),
            Pinned::Map(m) => m.addr.as_ptr().cast::<u8>().cast_const(),
        }
    }
}

/// What one read of the error queue found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Sends whose completion arrived.
    pub completed: u64,
    /// Of those, sends the kernel copied after all.
    pub copied: u64,
    /// Notifications read (each covers a range of sends).
    pub notifications: u64,
}

/// Zero-copy sends on one socket and the buffers they still hold.
///
/// Made for one socket by [`ZeroCopy::new`], which turns `SO_ZEROCOPY` on: the kernel
/// numbers zero-copy sends per socket, so a tracker refuses any other descriptor.
///
/// Dropping a tracker with completions still owed (an error, an abandoned connection)
/// leaks the heap buffers of those sends instead of freeing them: the kernel may still
/// transmit or retransmit from their pages, and freed memory would be reused. File
/// mappings are unmapped as usual; their pages belong to the page cache and stay valid.
#[derive(Debug)]
pub struct ZeroCopy {
    fd: libc::c_int,
    base_seq: u32,
    in_flight: VecDeque<Option<Pinned>>,
    totals: Reaped,
}

impl ZeroCopy {
    /// Turns `SO_ZEROCOPY` on for `fd` and tracks its zero-copy sends from now on. Make
    /// it before the socket's first zero-copy send.
    pub fn new(fd: BorrowedFd<'_>) -> io::Result<ZeroCopy> {
        set_zerocopy(fd, true)?;
        let mut zc = ZeroCopy::tracker();
        zc.fd = fd.as_raw_fd();
        Ok(zc)
    }

    /// A tracker for a socket whose `SO_ZEROCOPY` was turned on by other means (an
    /// executor's socket-option operation); it takes the first socket it is used with
    /// as its own.
    pub fn tracker() -> ZeroCopy {
        ZeroCopy {
            fd: -1,
            base_seq: 0,
            in_flight: VecDeque::new(),
            totals: Reaped::default(),
        }
    }

    fn check_fd(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if self.fd < 0 {
            self.fd = fd.as_raw_fd();
        }
        if fd.as_raw_fd() == self.fd {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-copy tracker used with another socket",
            ))
        }
    }

    /// Sends `range` of `buf` with `MSG_ZEROCOPY`. A handle to `buf` is kept until the
    /// kernel's completion for this send is read by [`ZeroCopy::reap`].
    pub fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        buf: &Pinned,
        range: Range<usize>,
        flags: SendFlags,
    ) -> io::Result<usize> {
        self.check_fd(fd)?;
        if range.start > range.end || range.end > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range outside buffer",
            ));
        }
        // SAFETY: range was checked to lie within buf; the pages stay valid and unchanged
        // after the call because a clone of `buf` is stored below before any completion
        // can be read, Pinned gives no mutable access, and Drop leaks rather than frees
        // buffers still owed.
        let ptr = unsafe { buf.base().add(range.start) };
        // SAFETY: ptr..ptr+len lies within live, immutable memory held as described above.
        let n = cvt_size(unsafe {
            libc::send(
                fd.as_raw_fd(),
                ptr.cast(),
                range.end - range.start,
                flags.bits() | MSG_ZEROCOPY,
            )
        })?;
        // SO_ZEROCOPY is on (new() set it), so every call that queued bytes took a number.
        if n > 0 {
            self.in_flight.push_back(Some(buf.clone()));
        }
        Ok(n)
    }

    /// Sends `range` of `buf` with a plain (copying) `send`, for sizes or sockets where
    /// zero-copy does not pay. Nothing is retained: the kernel copies before returning.
    pub fn send_copy(
        fd: BorrowedFd<'_>,
        buf: &Pinned,
        range: Range<usize>,
        flags: SendFlags,
    ) -> io::Result<usize> {
        if range.start > range.end || range.end > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range outside buffer",
            ));
        }
        // SAFETY: range lies within buf, which the borrow keeps alive for the call; the
        // kernel copies (and faults in, for a mapping: EFAULT, never SIGBUS) before returning.
        let ptr = unsafe { buf.base().add(range.start) };
        // SAFETY: as above.
        cvt_size(unsafe {
            libc::send(
                fd.as_raw_fd(),
                ptr.cast(),
                range.end - range.start,
                flags.bits(),
            )
        })
    }

    /// Sends whose completion has not arrived yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.iter().filter(|b| b.is_some()).count()
    }

    /// Everything read from the error queue so far.
    pub fn totals(&self) -> Reaped {
        self.totals
    }

    /// Reads every completion waiting on the socket's error queue, without blocking, and
    /// releases the buffers of the completed sends. Returns the error-queue reads made.
    /// Messages that are not zero-copy notifications are skipped. The totals count every
    /// notification read, also when a later read fails.
    pub fn reap(&mut self, fd: BorrowedFd<'_>) -> io::Result<u64> {
        self.check_fd(fd)?;
        let mut reads = 0;
        loop {
            reads += 1;
            match read_error_message(fd)? {
                ErrorMessage::Empty => return Ok(reads),
                ErrorMessage::Other => {}
                ErrorMessage::Completion(c) => {
                    let count = u64::from(c.hi.wrapping_sub(c.lo)) + 1;
                    self.totals.notifications += 1;
                    self.totals.completed += count;
                    if c.copied {
                        self.totals.copied += count;
                    }
                    self.release(c.lo, c.hi);
                }
            }
        }
    }

    fn release(&mut self, lo: u32, hi: u32) {
        let mut seq = lo;
        loop {
            let idx = seq.wrapping_sub(self.base_seq) as usize;
            if let Some(slot) = self.in_flight.get_mut(idx) {
                *slot = None;
            }
            if seq == hi {
                break;
            }
            seq = seq.wrapping_add(1);
        }
        while let Some(None) = self.in_flight.front() {
            self.in_flight.pop_front();
            self.base_seq = self.base_seq.wrapping_add(1);
        }
    }
}

impl Drop for ZeroCopy {
    fn drop(&mut self) {
        for p in self.in_flight.drain(..).flatten() {
            if let Pinned::Memory(buf) = p {
                // The kernel may still read these pages: leak rather than free them.
                std::mem::forget(buf);
            }
        }
    }
}

enum ErrorMessage {
    Empty,
    Other,
    Completion(Completion),
}

struct Completion {
    lo: u32,
    hi: u32,
    copied: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct SockExtendedErr {
    ee_errno: u32,
    ee_origin: u8,
    ee_type: u8,
    ee_code: u8,
    ee_pad: u8,
    ee_info: u32,
    ee_data: u32,
}

/// Reads one error-queue message.
fn read_error_message(fd: BorrowedFd<'_>) -> io::Result<ErrorMessage> {
    // u64 elements keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at a live control buffer of the stated size and no iovecs.
    let r = cvt_size(unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
        )
    });
    match r {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ErrorMessage::Empty),
        Err(e) => return Err(e),
    }
    // SAFETY: msg was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay within msg_controllen.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: cmsg is non-null and within the control buffer, as CMSG_* guarantee.
        let (level, kind) = unsafe { ((*cmsg).cmsg_level, (*cmsg).cmsg_type) };
        if (level == SOL_IP && kind == IP_RECVERR) || (level == SOL_IPV6 && kind == IPV6_RECVERR) {
            // SAFETY: for these types the data is a sock_extended_err; read_unaligned
            // copes with any alignment, and the kernel wrote at least that many bytes.
            let ee: SockExtendedErr = unsafe {
                std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<SockExtendedErr>())
            };
            if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                return Ok(ErrorMessage::Completion(Completion {
                    lo: ee.ee_info,
                    hi: ee.ee_data,
                    copied: ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                }));
            }
        }
        // SAFETY: as for CMSG_FIRSTHDR above.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Ok(ErrorMessage::Other)
}
