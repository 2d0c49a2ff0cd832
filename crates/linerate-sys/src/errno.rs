//! The kernel's numbers the layers above compare with: error numbers (as a `-errno`
//! completion or `raw_os_error` carries them) and poll event bits, taken from `libc` so
//! that no crate above types one by hand.

/// Error numbers.
pub const EPIPE: i32 = libc::EPIPE;
pub const ECONNRESET: i32 = libc::ECONNRESET;
pub const ENOTCONN: i32 = libc::ENOTCONN;
pub const EFAULT: i32 = libc::EFAULT;
pub const ENOBUFS: i32 = libc::ENOBUFS;
pub const ECANCELED: i32 = libc::ECANCELED;
pub const EBADF: i32 = libc::EBADF;
pub const ENOENT: i32 = libc::ENOENT;
pub const ENXIO: i32 = libc::ENXIO;

/// Poll event bits, as a poll request's result carries them.
pub const POLLIN: u32 = libc::POLLIN as u32;
pub const POLLOUT: u32 = libc::POLLOUT as u32;
pub const POLLERR: u32 = libc::POLLERR as u32;
pub const POLLHUP: u32 = libc::POLLHUP as u32;
pub const POLLRDHUP: u32 = libc::POLLRDHUP as u32;
