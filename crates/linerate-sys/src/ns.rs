//! Network namespaces: moving the calling thread into one made with `ip netns add`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::cvt;

/// Moves the calling thread into the network namespace bound at `path` (for example
/// `/var/run/netns/NAME`). Sockets the thread creates afterwards belong to it.
pub fn enter_net_namespace(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: `f` is an open namespace file for the call; setns touches no memory of ours.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// The effective user id (0 for root).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no memory effects.
    unsafe { libc::geteuid() }
}
