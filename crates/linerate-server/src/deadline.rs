//! When a connection's time is up: the timeout that applies to it in the state it is in,
//! and the wheel's tick.

use std::time::{Duration, Instant};

use linerate_http::timeout::{Due, Timeout, Timeouts};

use crate::config::Config;
use crate::conn::{Conn, Cut};

/// The deadline wheel's tick, and the longest a worker waits for an event.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Slots of the deadline wheel: 1,024 ticks of 100 ms, 102 s to a round, longer than
/// the default timeouts, so an entry is looked at once, when it is due.
pub(crate) const TIMER_SLOTS: usize = 1024;

/// How often a connection's deadline is looked at, at least: the shortest timeout a
/// state can start with. (The drain's, shorter, starts once a connection's life: its
/// entry is the one earlier move that costs a second entry.)
pub(crate) fn check_every(cfg: &Config) -> Duration {
    [
        cfg.header_timeout,
        cfg.body_timeout,
        cfg.send_timeout,
        cfg.idle_timeout,
    ]
    .into_iter()
    .min()
    .unwrap_or(DRAIN)
    .max(TICK)
}

/// The limits its protocol holds a client to.
pub(crate) fn timeouts(cfg: &Config) -> Timeouts {
    Timeouts {
        head: cfg.header_timeout,
        body: cfg.body_timeout,
    }
}

/// When a connection's deadline passes, and what that means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    /// How its responses not sent are logged.
    pub(crate) cut: Cut,
    /// The error-log line (empty: none).
    pub(crate) why: &'static str,
    /// The kind of timeout counted: an index of `TIMEOUT_KINDS`.
    pub(crate) kind: Option<usize>,
}

pub(crate) use linerate_http::timeout::later as after;

/// How long input is drained after our side shut down.
pub(crate) const DRAIN: Duration = Duration::from_secs(2);

/// The deadline that applies to `c` in the state it is in: the drain's while its
/// input is drained; else the body's, if a body is awaited with nothing owed, or the
/// state's, whichever comes first (send progress while a response is in flight, the
/// handshake or the head within the header timeout, the idle timeout between
/// requests, a body being skipped no byte within the header timeout).
/// `due` is the protocol's own (`Protocol::poll_timeout`), asked once by the caller.
pub(crate) fn deadline(c: &Conn, cfg: &Config, due: Option<Due>) -> Deadline {
    let d = |at, cut, why, kind| Deadline { at, cut, why, kind };
    if let Some(s) = c.draining_since {
        return d(after(s, DRAIN), Cut::Client, "", None);
    }
    let state = if c.waits() && !c.busy() {
        // A request waiting for its password check: the helpers' queue is bounded, but
        // not its time under a flood.
        d(
            after(c.last_activity, cfg.send_timeout),
            Cut::Client,
            "password check not made within --send-timeout",
            Some(2),
        )
    } else if c.slow() {
        d(
            c.rate_clock().unwrap_or(c.last_activity),
            Cut::SlowClient,
            "the client took less than --min-send-rate over --send-timeout",
            Some(2),
        )
    } else if c.busy() {
        let send = d(
            after(c.send_clock(), cfg.send_timeout),
            Cut::SendTimeout,
            "no send progress within --send-timeout",
            Some(2),
        );
        // The rate is judged at the end of each window (then, if the client took
        // enough, a new one starts: the deadline moves on).
        match c.rate_clock().filter(|_| cfg.min_send_rate > 0) {
            Some(r) if after(r, cfg.send_timeout) < send.at => Deadline {
                at: after(r, cfg.send_timeout),
                ..send
            },
            _ => send,
        }
    } else if let Some(p) = c.proxy_since() {
        d(
            after(p, cfg.header_timeout),
            Cut::Client,
            "PROXY protocol header not whole within --header-timeout",
            Some(0),
        )
    } else if let Some(h) = c.handshake_since() {
        d(
            after(h, cfg.header_timeout),
            Cut::Client,
            "TLS handshake not done within --header-timeout",
            Some(0),
        )
    } else if let Some(head) = due.filter(|d| d.what == Timeout::Head) {
        d(
            head.at,
            Cut::Client,
            "request head not whole within --header-timeout",
            Some(0),
        )
    } else if c.is_idle() {
        d(
            after(c.last_activity, cfg.idle_timeout),
            Cut::Client,
            "",
            Some(1),
        )
    } else {
        d(
            after(c.last_activity, cfg.header_timeout),
            Cut::BodyTimeout,
            "no request body byte within --header-timeout",
            Some(3),
        )
    };
    // The protocol's body deadline runs while nothing is owed, from when that last
    // began (the client is not read from while answers are owed, so that time is not
    // the client's to answer for).
    let body = due
        .filter(|d| d.what == Timeout::Body)
        .zip(c.body_clock)
        .map(|(d, clock)| d.at.max(after(clock, cfg.body_timeout)));
    match body {
        Some(at) if at <= state.at => d(
            at,
            Cut::BodyTimeout,
            "request body not whole within --body-timeout",
            Some(3),
        ),
        _ => state,
    }
}
