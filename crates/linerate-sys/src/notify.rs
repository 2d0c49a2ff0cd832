//! inotify: how the server's open-file cache learns that a file or a directory on a
//! cached path changed, so it can skip the `fstatat` per request.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::cvt;

/// Events on a cached file's inode: its content, its attributes, it going away.
pub const FILE_CHANGES: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;
/// Events on a directory of a cached path: names appearing, going or moving.
pub const DIR_CHANGES: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_ATTRIB
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// A non-blocking inotify instance.
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
}

impl std::os::fd::AsFd for Inotify {
    /// For an event loop to watch: readable when events are queued.
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Inotify {
    /// A new instance.
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let fd = cvt(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
        // SAFETY: the descriptor is new and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Inotify { fd })
    }

    /// Watches `path` (resolved now) for `mask`.
    pub fn watch(&self, path: &Path, mask: u32) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: `c` is a NUL-terminated path the kernel only reads.
        cvt(unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) })?;
        Ok(())
    }

    /// Reads every queued event; true if there was any (an overflow counts).
    pub fn drain(&self) -> io::Result<bool> {
        let mut buf = [0u8; 4096];
        let mut any = false;
        loop {
            // SAFETY: `buf` is a live, writable buffer of the length passed.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                any = true;
                continue;
            }
            if n == 0 {
                return Ok(any);
            }
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(any),
                io::ErrorKind::Interrupted => continue,
                _ => Err(e),
            };
        }
    }
}
