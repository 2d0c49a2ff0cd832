//! A protocol's own deadlines, asked for as quinn-proto's `poll_timeout` is: each
//! protocol says when its next limit falls due and which limit it is, from the clock
//! times it was handed (`next(now)`), so that its owner arms a timer without reading
//! the protocol's state to work deadlines out. The connection's own deadlines (sends,
//! the TLS handshake, the PROXY header, idleness between requests) stay with the
//! connection that owns the socket.

use std::time::{Duration, Instant};

/// The time limits a protocol holds its client to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For a request head (HTTP/2: a frame) from its first byte to its last.
    pub head: Duration,
    /// For a request body from the end of its head to its last byte.
    pub body: Duration,
}

/// Which limit falls due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// A head (HTTP/2: a frame) not whole within [`Timeouts::head`].
    Head,
    /// A request body not whole within [`Timeouts::body`] (the owner may put it off
    /// while it owes answers: the client is not read from then).
    Body,
}

/// A protocol's next deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    pub at: Instant,
    pub what: Timeout,
}

impl Due {
    /// `what` falls due `limit` after `since` (or as late as the clock goes).
    pub fn after(since: Instant, limit: Duration, what: Timeout) -> Due {
        Due {
            at: later(since, limit),
            what,
        }
    }
}

/// `t` later by `d`, or as late as the clock goes.
pub fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .unwrap_or_else(|| t + Duration::from_secs(1 << 32))
}
