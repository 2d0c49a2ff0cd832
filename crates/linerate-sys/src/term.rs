//! Terminal size and signals: what `linerate stat` needs to behave as ministat, and
//! stopping a child server.

use std::os::fd::{AsRawFd, BorrowedFd};

/// Columns of the terminal `fd` refers to (`TIOCGWINSZ`), if it is one.
pub fn terminal_columns(fd: BorrowedFd<'_>) -> Option<u16> {
    // SAFETY: winsize is plain data; all-zero is valid.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer, a live local.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut ws) };
    (r == 0).then_some(ws.ws_col)
}

/// Ends the process by `signal` with its default action (a core-dumping signal such as
/// `SIGSEGV` gives the shell status 128 + signal), as a program that crashes would.
pub fn die_of_signal(signal: i32) -> ! {
    // SAFETY: SIG_DFL is a valid disposition; raise only delivers the signal.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    std::process::abort()
}

/// `SIGSEGV`.
pub const SIGSEGV: i32 = libc::SIGSEGV;

/// `SIGTERM`.
pub const SIGTERM: i32 = libc::SIGTERM;
/// `SIGKILL`.
pub const SIGKILL: i32 = libc::SIGKILL;

/// Sends `signal` to every process of process group `pgid` (a child started as a group
/// leader: its pid).
pub fn signal_group(pgid: u32, signal: i32) -> std::io::Result<()> {
    let pgid = libc::pid_t::try_from(pgid)
        .ok()
        .filter(|&p| p > 1)
        .ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a process group")
        })?;
    // SAFETY: kill only delivers a signal; a negative pid names the group, and pgid > 1
    // excludes "every process" (-1) and our own group (0).
    crate::cvt(unsafe { libc::kill(-pgid, signal) })?;
    Ok(())
}

/// Sends `signal` to process `pid`.
pub fn signal_process(pid: u32, signal: i32) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a process"))?;
    // SAFETY: kill only delivers a signal; pid > 0 names one process.
    crate::cvt(unsafe { libc::kill(pid, signal) })?;
    Ok(())
}
