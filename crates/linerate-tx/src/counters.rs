//! What the engine did, per socket: the figures seed 000 and 002 argue with.

use serde::Serialize;

/// Counts of one socket's transmit work. All fields only grow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// System calls made by the engine (sends, reads, splices, queue queries, error-queue reads).
    pub syscalls: u64,
    /// Payload bytes the socket accepted.
    pub bytes: u64,
    /// Calls that returned `EAGAIN`.
    pub eagain: u64,
    /// Sends that took fewer bytes than asked (the socket filled up).
    pub short_sends: u64,
    /// Times a transmit was resumed (writable events handled).
    pub wakeups: u64,
    /// Send-space queries (`SIOCOUTQ`).
    pub space_queries: u64,
    /// `MSG_ZEROCOPY` sends that queued bytes.
    pub zc_sends: u64,
    /// Zero-copy sends whose completion arrived.
    pub zc_completions: u64,
    /// Of those, sends the kernel copied after all.
    pub zc_copied: u64,
    /// Zero-copy sends refused with `ENOBUFS` (too many completions owed).
    pub zc_enobufs: u64,
    /// Sends made by copying in zero-copy mode (below the minimum size, after `ENOBUFS`,
    /// or after zero-copy was switched off for the socket).
    pub zc_copy_sends: u64,
    /// 1 once zero-copy was switched off for this socket because it did not pay.
    pub zc_disabled: u64,
    /// Transmits that could not use their strategy and degraded to a simpler one
    /// (for example sendfile of a memory buffer).
    pub degraded: u64,
}
