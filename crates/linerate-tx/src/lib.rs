//! The linerate transmit engine: moves a byte range of a file, or a memory buffer, onto
//! a non-blocking TCP socket, by one of several [`Strategy`]s, as a resumable state
//! machine.
//!
//! A [`Transmit`] sends what the socket takes, stops on `EAGAIN` (returning
//! [`Progress::Blocked`]) and resumes when called again on the next writable event.
//! Per-socket state that outlives one transmit (zero-copy completions still owed, the
//! learned send-buffer size, counters) lives in a [`TxSocket`].
//!
//! The strategies are the subject of the project's measurements, so each is written
//! here by hand on the raw calls of `linerate-sys`: no crate offers batched sendfile
//! sized to the free send space, or zero-copy completion tracking.
//!
//! # Non-goals
//! No HTTP, no event loop: the caller waits for readiness (`POLLOUT`, and `POLLERR` for
//! zero-copy completions) however it likes and calls back in.

#![forbid(unsafe_code)]

mod counters;
mod source;
mod strategy;
mod transmit;

pub use counters::Counters;
pub use source::Source;
pub use strategy::{format_size, parse_size, ParseStrategyError, Strategy};
pub use transmit::{Progress, Sizing, Transmit, TxConfig, TxError, TxSocket};
