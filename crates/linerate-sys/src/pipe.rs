//! Pipes and `splice(2)`: file → pipe → socket without a copy through user memory.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::{cvt, cvt_size, to_off64};

/// Flags of a `splice(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpliceFlags(u32);

impl SpliceFlags {
    /// `SPLICE_F_MOVE`: a hint; pages are moved where the kernel can.
    pub const MOVE: SpliceFlags = SpliceFlags(libc::SPLICE_F_MOVE);
    /// `SPLICE_F_NONBLOCK`: do not block on the pipe.
    pub const NONBLOCK: SpliceFlags = SpliceFlags(libc::SPLICE_F_NONBLOCK);
    /// `SPLICE_F_MORE`: more data follows (like `MSG_MORE`).
    pub const MORE: SpliceFlags = SpliceFlags(libc::SPLICE_F_MORE);

    /// Both sets of flags.
    pub const fn union(self, other: SpliceFlags) -> SpliceFlags {
        SpliceFlags(self.0 | other.0)
    }

    /// The bits, as the kernel takes them.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

impl std::ops::BitOr for SpliceFlags {
    type Output = SpliceFlags;
    fn bitor(self, other: SpliceFlags) -> SpliceFlags {
        self.union(other)
    }
}

/// A pipe a splice moves bytes through (file → pipe → socket).
#[derive(Debug)]
pub struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

/// Pipes kept per thread for reuse.
const POOL_MAX: usize = 16;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Pipe>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Pipe {
    /// One of this thread's spare pipes, or a new one asked to hold `capacity` bytes
    /// (a smaller pipe still works; only the batch size suffers).
    pub fn take(capacity: usize) -> io::Result<Pipe> {
        if let Some(p) = POOL.with(|p| p.borrow_mut().pop()) {
            return Ok(p);
        }
        let (r, w) = pipe()?;
        let _ = set_pipe_size(w.as_fd(), capacity);
        Ok(Pipe { r, w })
    }

    /// Keeps an empty pipe for this thread's next [`Pipe::take`] (closed when the pool
    /// is full). A pipe still holding bytes must be dropped instead: its bytes would go
    /// out on the next connection.
    pub fn recycle(self) {
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOL_MAX {
                pool.push(self);
            }
        });
    }

    /// The read end.
    pub fn read_end(&self) -> BorrowedFd<'_> {
        self.r.as_fd()
    }

    /// The write end.
    pub fn write_end(&self) -> BorrowedFd<'_> {
        self.w.as_fd()
    }
}

/// Creates a non-blocking, close-on-exec pipe: `(read end, write end)`.
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for the kernel to fill.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    // SAFETY: pipe2 succeeded, so both are fresh descriptors owned by nobody else.
    let fds = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok(fds)
}

/// Sets a pipe's capacity (`F_SETPIPE_SZ`); the kernel rounds up to a power of two pages
/// and returns the capacity it chose.
pub fn set_pipe_size(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<usize> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: F_SETPIPE_SZ takes an int argument and touches no memory of ours.
    let n = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, bytes) })?;
    Ok(n as usize)
}

/// `splice(2)`: moves up to `len` bytes from `fd_in` to `fd_out`, one of which must be a
/// pipe. An offset, when given, is used and advanced instead of the file position.
pub fn splice(
    fd_in: BorrowedFd<'_>,
    off_in: Option<&mut u64>,
    fd_out: BorrowedFd<'_>,
    off_out: Option<&mut u64>,
    len: usize,
    flags: SpliceFlags,
) -> io::Result<usize> {
    let mut oin = match &off_in {
        Some(o) => Some(to_off64(**o)?),
        None => None,
    };
    let mut oout = match &off_out {
        Some(o) => Some(to_off64(**o)?),
        None => None,
    };
    let pin = oin
        .as_mut()
        .map_or(std::ptr::null_mut(), |o| o as *mut libc::loff_t);
    let pout = oout
        .as_mut()
        .map_or(std::ptr::null_mut(), |o| o as *mut libc::loff_t);
    // SAFETY: the descriptors are borrowed for the call; each offset pointer is null or
    // points at a live local that the kernel may update.
    let n = cvt_size(unsafe {
        libc::splice(
            fd_in.as_raw_fd(),
            pin,
            fd_out.as_raw_fd(),
            pout,
            len,
            flags.bits(),
        )
    })?;
    if let (Some(o), Some(v)) = (off_in, oin) {
        *o = v as u64;
    }
    if let (Some(o), Some(v)) = (off_out, oout) {
        *o = v as u64;
    }
    Ok(n)
}
