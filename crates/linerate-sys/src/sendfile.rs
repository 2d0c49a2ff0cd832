//! `sendfile(2)`, `pread`-free: the kernel moves file pages onto the socket.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::{cvt_size, to_off64};

/// Sends up to `count` bytes of `file` starting at `*offset` to `out`, advancing `*offset`
/// by what was sent. Returns 0 when `*offset` is at or past the end of the file.
pub fn sendfile(
    out: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    let mut off = to_off64(*offset)?;
    // SAFETY: both descriptors are borrowed and so open for the whole call; `off` is a
    // live local the kernel reads and writes back.
    let n =
        cvt_size(unsafe { libc::sendfile64(out.as_raw_fd(), file.as_raw_fd(), &mut off, count) })?;
    *offset = off as u64;
    Ok(n)
}
