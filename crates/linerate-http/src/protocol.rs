//! What every protocol's connection does for its owner, whichever the version: bytes
//! in, whether more are wanted, the protocol's deadlines, and how it stops taking
//! requests and ends. The owner holds one protocol at a time and asks it through this
//! trait (each protocol's own events, `next`, are its own enum, which the owner maps to
//! one kind of next thing). HTTP/1.1's [`crate::connection::Connection`] and HTTP/2's
//! [`crate::h2::Connection`] implement it; HTTP/3's will.

use crate::connection::Ending;
use crate::timeout::{Due, Timeouts};

/// One connection's protocol, sans I/O.
pub trait Protocol {
    /// Whether the owner should read: it has room for more, and they could matter.
    fn wants_bytes(&self) -> bool;
    /// Takes bytes the peer sent.
    fn receive(&mut self, bytes: &[u8]);
    /// The peer closed its side (a read returned 0).
    fn peer_closed(&mut self);
    /// Nothing owed, nothing half-received (HTTP/2: nothing of its own to send).
    fn is_idle(&self) -> bool;
    /// Gives the input buffer's memory back when it is empty.
    fn release_buffer(&mut self);
    /// How the connection ends if nothing more is owed now.
    fn ending(&self) -> Ending;
    /// The protocol's next deadline ([`crate::timeout`]).
    fn poll_timeout(&self, t: &Timeouts) -> Option<Due>;
    /// The next request is the last (HTTP/1.1: answered as if it asked
    /// `Connection: close`; HTTP/2: GOAWAY).
    fn finish_next(&mut self);
    /// No request after those handed out (HTTP/2: GOAWAY).
    fn close_after_last(&mut self);
    /// Nothing handed out yet.
    fn is_fresh(&self) -> bool;
    /// [`Protocol::finish_next`] was asked and that request has not come yet.
    fn awaits_last(&self) -> bool;
}
