//! How a connection's bytes are sealed and what it sends of its own: plaintext, a TLS
//! session here (a filter: plaintext in, records out, its record pump), or the kernel's
//! TLS after the hand-off; and the farewell of a connection its session refused. Every
//! operation goes through the driver ([`Driver::now`], or its ring for records).

use std::io;
use std::os::fd::AsFd;
use std::time::Instant;

use linerate_event::{Driver, Submitted};
use linerate_sys::op::{Op, Piece};
use linerate_tx::TxError;

use super::{Conn, Io, RingSend};
use crate::tls::{Handoff, Session};

/// How a connection's bytes are sealed.
pub(super) enum Transport {
    /// Plaintext.
    Plain,
    /// By a TLS session here (boxed: a plain connection stays small): what is read goes
    /// through it before the HTTP input sees it, and what the queue sends goes into it
    /// (a filter: plaintext in, records out).
    Tls(Box<Session>),
    /// By the kernel (kernel TLS, after a handoff): the connection reads and sends
    /// plaintext as a plain one does; its alerts are records of their own.
    Kernel,
}

/// What a connection refused by its TLS session says before it closes, best effort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Farewell {
    /// The session's alert, which says why.
    Alert,
    /// A person who typed http:// for an https:// port is told so, not given an empty
    /// close (as nginx).
    PlainHttp,
}

/// The answer to plain HTTP on a TLS port (the first bytes were a request line, not a
/// TLS record), as nginx gives it.
const PLAIN_HTTP_TO_TLS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nServer: linerate\r\nContent-Type: text/plain\r\nContent-Length: 46\r\nConnection: close\r\n\r\nThe plain HTTP request was sent to HTTPS port\n";

/// Whether `bytes` start as a request line does: a method in capitals, then a space.
pub(super) fn looks_like_http(bytes: &[u8]) -> bool {
    let method = bytes.iter().take_while(|b| b.is_ascii_uppercase()).count();
    (1..=16).contains(&method) && bytes.get(method) == Some(&b' ')
}

impl Conn {
    /// Says what a refused connection says before it closes, by the driver at once.
    pub(super) fn say_farewell(&mut self, driver: &mut dyn Driver) {
        let fd = self.sock.as_fd();
        match (self.farewell.take(), &mut self.transport) {
            (Some(Farewell::Alert), Transport::Tls(t)) => {
                let _ = t.send(&mut |op| driver.now(fd, op, None));
            }
            (Some(Farewell::PlainHttp), _) => {
                let mut answer = Op::Send {
                    data: PLAIN_HTTP_TO_TLS,
                    more: false,
                };
                let _ = driver.now(fd, &mut answer, None);
            }
            _ => {}
        }
    }

    /// Gives the TLS session's keys to the socket (kernel TLS). A socket that refuses
    /// the TLS protocol leaves the session in user space; one that refuses the keys,
    /// once they are out of the session, loses the connection. Either refusal stops
    /// later sessions from trying (said once).
    pub(super) fn hand_off(&mut self, driver: &mut dyn Driver) -> Result<(), TxError> {
        let t = match std::mem::replace(&mut self.transport, Transport::Plain) {
            Transport::Tls(t) => t,
            other => {
                self.transport = other;
                return Ok(());
            }
        };
        let fd = self.sock.as_fd();
        match t.hand_off(&mut |op| driver.now(fd, op, None)) {
            Handoff::Kernel => {
                self.transport = Transport::Kernel;
                self.handed_off = true;
                Ok(())
            }
            Handoff::Stayed(t, refusal) => {
                crate::tls::kernel_refused(&refusal);
                self.transport = Transport::Tls(t);
                Ok(())
            }
            Handoff::Lost(refusal) => {
                crate::tls::kernel_refused(&refusal);
                Err(TxError::Io(io::Error::other(refusal.why)))
            }
        }
    }

    /// Moves a TLS session's records toward the socket: written at once (epoll), or
    /// handed to the driver, one batch in flight (the ring). `Ok(true)` while records
    /// wait for the socket or the driver: the queue gives the session no more until
    /// they are gone.
    pub(super) fn push_records(
        &mut self,
        driver: &mut dyn Driver,
        now: Instant,
    ) -> Result<bool, TxError> {
        let Transport::Tls(t) = &mut self.transport else {
            return Ok(false);
        };
        let Io::Ring { send, .. } = &mut self.io else {
            let fd = self.sock.as_fd();
            return match t.send(&mut |op| driver.now(fd, op, None)) {
                Ok((written, all)) => {
                    // Progress is bytes that left, as for a plain connection.
                    if written > 0 {
                        self.last_activity = now;
                    }
                    Ok(!all)
                }
                Err(e) => Err(TxError::from(e)),
            };
        };
        match *send {
            RingSend::Done(r) => {
                *send = RingSend::Idle;
                let n = r.map_err(|e| TxError::from(io::Error::from(e)))?;
                t.records.drain(..(n as usize).min(t.records.len()));
                self.last_activity = now;
            }
            RingSend::InFlight => return Ok(true),
            RingSend::Idle => {}
        }
        if t.records.is_empty() {
            let mut records = std::mem::take(&mut t.records);
            t.take_records(&mut records);
            t.records = records;
        }
        if t.records.is_empty() {
            return Ok(false);
        }
        let mut gather = Op::Gather {
            pieces: vec![Piece {
                bytes: &t.records,
                shared: None,
            }],
            more: false,
        };
        match driver.execute(self.sock.as_fd(), &mut gather, None) {
            Submitted::Pending => {
                *send = RingSend::InFlight;
                Ok(true)
            }
            // Made at once (a driver that sends nothing itself).
            Submitted::Done(r) => {
                let n = r.map_err(|e| TxError::from(io::Error::from(e)))?;
                t.records.drain(..n.min(t.records.len()));
                self.last_activity = now;
                Ok(!t.records.is_empty())
            }
        }
    }
}
