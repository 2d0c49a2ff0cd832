//! The only crate of linerate with `unsafe` code.
//!
//! Every Linux system call the engine, the server and the benchmarks make that the
//! standard library does not wrap lives here, each behind a safe function returning
//! `io::Result`. Each `unsafe` block carries a `// SAFETY:` comment naming the invariant
//! it relies on. The rest of the workspace is `#![forbid(unsafe_code)]`.
//!
//! # Portability
//! Linux only (kernel 4.14+ for `MSG_ZEROCOPY` on TCP, 4.18+ for `UDP_SEGMENT`, 5.0+
//! for `UDP_GRO`, 5.6+ for `openat2`, 6.5+ for `cachestat`). Nothing here tries to build elsewhere.
//!
//! # Implementation notes
//! * Descriptors are taken as [`BorrowedFd`](std::os::fd::BorrowedFd), so a call can never
//!   outlive the descriptor it uses.
//! * Memory handed to the kernel for zero-copy sends must stay alive and unchanged until
//!   the kernel's completion; [`zerocopy::ZeroCopy`] owns that invariant by holding a
//!   reference to each buffer until its completion is read, so callers need no `unsafe`.

pub mod cache;
pub mod cpu;
pub mod epoll;
pub mod errno;
pub mod exec;
pub use errno::{Errno, Events};
pub mod fs;
pub mod ktls;
pub mod net;
pub mod notify;
pub mod ns;
pub mod op;
pub mod pipe;
pub mod seccomp;
pub mod sendfile;
pub mod steer;
pub mod term;
pub mod udp;
pub mod uring;
pub mod user;
pub mod zerocopy;

use std::io;

/// Turns a `-1` return into the thread's `errno` as an `io::Error`.
fn cvt(res: libc::c_int) -> io::Result<libc::c_int> {
    if res == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

/// Like [`cvt`] for calls returning `ssize_t`.
fn cvt_size(res: libc::ssize_t) -> io::Result<usize> {
    if res < 0 {
        Err(io::Error::last_os_error())
    } else {
        // A non-negative ssize_t always fits in usize.
        Ok(res as usize)
    }
}

/// Converts a file offset to the kernel's signed type, refusing offsets it cannot hold.
fn to_off64(offset: u64) -> io::Result<libc::off64_t> {
    libc::off64_t::try_from(offset).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "file offset does not fit in off64_t",
        )
    })
}

/// The signals whose default action ends a process, other than the faults (`SIGSEGV`,
/// `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGSYS`, `SIGTRAP`, `SIGABRT`), the ones that cannot be
/// caught, and the ones a server gives a meaning of its own (`SIGTERM`, `SIGINT`,
/// `SIGQUIT`, `SIGHUP`, `SIGUSR1`, `SIGUSR2`, `SIGPIPE`, `SIGXFSZ`): `SIGALRM`,
/// `SIGVTALRM`, `SIGPROF`, `SIGIO`, `SIGPWR`, `SIGSTKFLT`, `SIGXCPU` and the real-time
/// signals the C library leaves to programs.
pub fn stray_signals() -> Vec<i32> {
    let mut v = vec![
        libc::SIGALRM,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
        libc::SIGXCPU,
    ];
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

/// Sets `SIGPIPE` to be ignored for the whole process, so writing to a socket or pipe
/// whose peer is gone returns `EPIPE` instead of killing the process. `sendfile(2)` and
/// `splice(2)` to a socket can raise `SIGPIPE` (they take no `MSG_NOSIGNAL`), so the engine
/// calls this once before its first transmit. Idempotent.
pub fn ignore_sigpipe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; no handler code runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    });
}
