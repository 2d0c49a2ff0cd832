//! The linerate transmit engine: moves a byte range of a file, or a memory buffer, onto
//! a non-blocking TCP socket, by one of several [`Strategy`]s, as a resumable state
//! machine.
//!
//! Each strategy is a small I/O-free state machine: [`Transmit::poll_op`] says which
//! system call comes next (an [`Op`]: a `sendfile` range, a gather send with or without
//! `MSG_MORE`, a splice into or out of a pipe, a zero-copy send of a mapped window, a
//! send-queue measurement) and [`Transmit::complete`] takes its result. An executor of
//! `linerate-event` makes the call: [`Transmit::advance`] drives one transmit by the
//! readiness executor, making each call at once on each writable event, stopping on
//! `EAGAIN` ([`Progress::Blocked`]) and resuming when called again; a completion
//! executor (io_uring) submits the same operations. So the strategies are tested one completion at a time, with short
//! counts, errors and truncation, and with no socket at all.
//!
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
pub mod op;
mod source;
mod steps;
mod strategy;
mod transmit;

pub use counters::Counters;
pub use op::{Flow, Next, Op};
pub use source::Source;
pub use strategy::{format_size, parse_size, ParseStrategyError, Strategy};
pub use transmit::{Progress, Sizing, Transmit, TxConfig, TxError, TxSocket};
