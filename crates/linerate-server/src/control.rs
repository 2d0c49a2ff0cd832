//! What the operator asks of a running server by signal.
//!
//! [`Control::install`] is the first thing `linerate serve` does, so from then on no
//! signal an operator sends by habit ends the process unasked:
//!
//! | signal | meaning |
//! |---|---|
//! | `SIGTERM`, `SIGINT`, `SIGQUIT` | graceful stop: no new connections, in-flight responses finish (up to the shutdown timeout), exit 0 |
//! | `SIGUSR1` | reopen the log files by their paths (log rotation) |
//! | `SIGHUP` | reload the configuration: a new generation of workers on the same listening sockets, the one before drains (see `serve::serve`, docs/operations.md) |
//! | `SIGUSR2` | binary upgrade: the program started again on the same listening sockets (`systemd::upgrade`); both serve until the old one is stopped |
//! | `SIGPIPE` | ignored (a peer that went away is an `EPIPE` of its own connection) |
//! | `SIGXFSZ` | ignored (a log past the file-size limit fails its write with `EFBIG`) |
//! | `SIGALRM`, `SIGVTALRM`, `SIGPROF`, `SIGIO`, `SIGPWR`, `SIGSTKFLT`, `SIGXCPU`, real-time signals | ignored, with one warning each time (their default action would end the process and lose buffered log lines) |
//!
//! The handlers only set flags (async-signal-safe); the server's main thread reads them
//! between its waits for the workers.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGXFSZ};

/// The flags the signal handlers set.
#[derive(Clone, Debug, Default)]
pub struct Control {
    /// `SIGTERM`, `SIGINT`, `SIGQUIT`: stop gracefully. Workers read it every tick.
    pub stop: Arc<AtomicBool>,
    /// `SIGUSR1`: reopen the logs.
    reopen: Arc<AtomicBool>,
    /// `SIGHUP`.
    reload: Arc<AtomicBool>,
    /// `SIGUSR2`.
    upgrade: Arc<AtomicBool>,
    /// A signal that asks nothing of the server (`linerate_sys::stray_signals`).
    stray: Arc<AtomicBool>,
}

/// One request an operator made by signal, taken from the flags once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Reopen the logs (`SIGUSR1`).
    Reopen,
    /// Reload the configuration (`SIGHUP`).
    Reload,
    /// Upgrade the binary (`SIGUSR2`).
    Upgrade,
    /// A signal with no meaning here arrived and was ignored.
    Stray,
}

impl Control {
    /// Installs the handlers of the table above.
    pub fn install() -> io::Result<Control> {
        let c = Control::default();
        for sig in [SIGTERM, SIGINT, SIGQUIT] {
            signal_hook::flag::register(sig, Arc::clone(&c.stop))?;
        }
        signal_hook::flag::register(SIGUSR1, Arc::clone(&c.reopen))?;
        signal_hook::flag::register(SIGHUP, Arc::clone(&c.reload))?;
        signal_hook::flag::register(SIGUSR2, Arc::clone(&c.upgrade))?;
        // A handler that only sets a flag nobody reads: the signal no longer ends the
        // process, and the write that raised it fails with EFBIG instead.
        signal_hook::flag::register(SIGXFSZ, Arc::new(AtomicBool::new(false)))?;
        for sig in linerate_sys::stray_signals() {
            signal_hook::flag::register(sig, Arc::clone(&c.stray))?;
        }
        linerate_sys::ignore_sigpipe();
        Ok(c)
    }

    /// A stop was asked for.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The requests made since the last call, each once.
    pub fn take(&self) -> Vec<Request> {
        [
            (&self.reopen, Request::Reopen),
            (&self.reload, Request::Reload),
            (&self.upgrade, Request::Upgrade),
            (&self.stray, Request::Stray),
        ]
        .into_iter()
        .filter(|(flag, _)| flag.swap(false, Ordering::Relaxed))
        .map(|(_, r)| r)
        .collect()
    }
}
