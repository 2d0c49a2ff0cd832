//! What a transmit asks for and says back.
//!
//! A [`crate::Transmit`] makes no system call on the socket itself: it says what it
//! wants next ([`crate::Transmit::poll_op`] gives an [`Op`], the vocabulary every
//! producer of a connection's output shares, from `linerate-sys`), an executor makes
//! that call (`linerate_sys::exec::now` at once on a writable socket; the io_uring
//! driver on its ring), and the transmit takes the result ([`crate::Transmit::complete`]).
//! The memory an operation names is borrowed from the transmit and stays put until the
//! completion: the transmit is not polled again, nor dropped, in between.
//!
//! `EINTR` and `EAGAIN` are the executor's business, not the strategy's: an
//! interrupted call is made again, and a would-block ends the turn with
//! [`crate::Progress::Blocked`]: the executor says so ([`crate::Transmit::would_block`],
//! which drops a free-space measurement made for it) and the next poll, on the next
//! writable event, asks for the operation again.

pub use linerate_sys::op::{Completion, Op};

/// What a transmit wants next.
#[derive(Debug)]
pub enum Next<'a> {
    /// This operation, then its result to [`crate::Transmit::complete`].
    Op(Op<'a>),
    /// Every byte was accepted by the socket.
    Done,
}

/// What a transmit says after taking a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Ask for the next operation.
    Continue,
    /// The socket is full although no call said `EAGAIN` (a short splice or zero-copy
    /// send): wait for it to be writable.
    Blocked,
}
