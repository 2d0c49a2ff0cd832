//! A connection's HTTP, whichever version: bytes in, and for the request loop one kind
//! of next thing ([`Next`]) from either protocol.

use std::time::Instant;

use linerate_http::connection::{Connection, Ending, Event};
use linerate_http::h2::Priority;
use linerate_http::request::Request;
use linerate_http::timeout::{Due, Timeouts};
use linerate_http::Protocol;
use linerate_http::Status;

use super::Waiting;
use crate::h2::H2;
use crate::output::Output;

/// A connection's HTTP: 1.1 until its first bytes are HTTP/2's preface (prior knowledge
/// in clear, or after ALPN chose `h2`), then 2 (boxed: an HTTP/1.1 connection stays
/// small).
pub(crate) enum Http {
    One(Connection),
    Two(Box<H2>),
}

impl Http {
    /// The HTTP/2 connection this HTTP/1.1 one turns into (its SETTINGS queued): what
    /// was asked of it or said by the peer carries over (a reload's last request
    /// becomes GOAWAY before any stream; a closed peer stays closed).
    pub(super) fn to_two(c: &Connection) -> Http {
        let mut proto =
            linerate_http::h2::Connection::new(c.limits(), linerate_http::h2::Config::default());
        if c.finish_asked() {
            proto.go_away();
        }
        if c.peer_has_closed() {
            proto.peer_closed();
        }
        Http::Two(Box::new(H2::new(proto, Instant::now())))
    }

    /// HTTP/2.
    pub fn is_two(&self) -> bool {
        matches!(self, Http::Two(_))
    }

    /// HTTP/2 that has taken a stream and not said GOAWAY yet.
    pub fn is_two_serving(&self) -> bool {
        matches!(self, Http::Two(h) if h.proto.serving())
    }
}

/// Delegates each of [`Protocol`]'s methods to the version the connection speaks, in
/// one place: a call is a match and a direct call (none virtual on the request path).
macro_rules! delegate {
    (
        &self: $($r:ident($($ra:ident: $rt:ty),*) -> $rr:ty),*;
        &mut self: $($m:ident($($ma:ident: $mt:ty),*)),*;
    ) => {
        $(fn $r(&self $(, $ra: $rt)*) -> $rr {
            match self {
                Http::One(c) => c.$r($($ra),*),
                Http::Two(h) => h.proto.$r($($ra),*),
            }
        })*
        $(fn $m(&mut self $(, $ma: $mt)*) {
            match self {
                Http::One(c) => c.$m($($ma),*),
                Http::Two(h) => h.proto.$m($($ma),*),
            }
        })*
    };
}

impl Protocol for Http {
    delegate! {
        &self: wants_bytes() -> bool, ending() -> Ending,
            poll_timeout(t: &Timeouts) -> Option<Due>, is_fresh() -> bool,
            awaits_last() -> bool;
        &mut self: receive(bytes: &[u8]), peer_closed(), release_buffer(), finish_next(),
            close_after_last();
    }

    /// Nothing owed, nothing half-received (HTTP/2: nothing of its own to send, and
    /// no answer waiting on a window).
    fn is_idle(&self) -> bool {
        match self {
            Http::One(c) => c.is_idle(),
            Http::Two(h) => h.proto.is_idle() && !h.waiting(),
        }
    }
}

impl crate::tls::Plaintext for Http {
    fn receive(&mut self, bytes: &[u8]) {
        Protocol::receive(self, bytes)
    }
    fn peer_closed(&mut self) {
        Protocol::peer_closed(self)
    }
    fn h2(&mut self) {
        if let Http::One(c) = self {
            *self = Http::to_two(c);
        }
    }
}

/// What a connection's protocol has for the request loop next, whichever it is.
pub(super) enum Next {
    /// A request to answer: on an HTTP/2 stream, with its priority, or (none) the next
    /// in HTTP/1.1's order; taken at `started` (one that waited for its password check
    /// keeps the time it came).
    Request {
        to: Option<(u32, Option<Priority>)>,
        request: Box<Request>,
        started: Instant,
    },
    /// An answer of `status` owed for input that is no request (on an HTTP/2 stream,
    /// or HTTP/1.1's last).
    Reject { to: Option<u32>, status: Status },
    /// HTTP/1.1 turned into HTTP/2 (its preface came).
    Upgrade,
    /// Nothing more until more bytes come, answers leave, or a check is made.
    Wait,
}

impl Http {
    /// What comes next: a request whose password check is made, in its turn (HTTP/1.1:
    /// in order, one still being checked holding those after it; HTTP/2: any stream's,
    /// after what the client sent is read, so that a reset of a waiting stream comes
    /// first and takes it off the list), else what the protocol read. HTTP/2's own
    /// events (a priority, a reset) are taken here; its answers wait while the queue
    /// holds [`super::MAX_QUEUED`] (as HTTP/1.1's reading pauses).
    pub(super) fn next(&mut self, out: Option<&mut Output>, now: Instant) -> Next {
        match self {
            Http::One(c) => {
                let waited = match out.map(|o| &mut o.waiting) {
                    Some(w) if w.first().is_some_and(|w| !w.ticket.done()) => return Next::Wait,
                    Some(w) if !w.is_empty() => Some(w.remove(0)),
                    _ => None,
                };
                if let Some(w) = waited {
                    return Next::Request {
                        to: None,
                        request: w.request,
                        started: w.started,
                    };
                }
                match c.next(now) {
                    Event::Wait => Next::Wait,
                    Event::Http2 => Next::Upgrade,
                    Event::Request(request) => Next::Request {
                        to: None,
                        request,
                        started: now,
                    },
                    Event::Reject { status, .. } => Next::Reject { to: None, status },
                }
            }
            Http::Two(h2) => {
                use linerate_http::h2::Event as E;
                let Some(out) = out else {
                    return Next::Wait;
                };
                loop {
                    if out.queued() >= super::MAX_QUEUED {
                        // As over HTTP/1.1: answers (a burst of 304s, say) wait for the
                        // queue to drain before more requests are taken.
                        return Next::Wait;
                    }
                    match h2.proto.next(now) {
                        E::Wait => {
                            let ready = out.waiting.iter().position(|w| w.ticket.done());
                            match ready.map(|i| out.waiting.remove(i)) {
                                Some(Waiting {
                                    request,
                                    stream: Some((stream, priority)),
                                    started,
                                    ..
                                }) => {
                                    return Next::Request {
                                        to: Some((stream, priority)),
                                        request,
                                        started,
                                    }
                                }
                                Some(_) => continue,
                                None => return Next::Wait,
                            }
                        }
                        E::Request {
                            stream,
                            request,
                            priority,
                        } => {
                            return Next::Request {
                                to: Some((stream, priority)),
                                request,
                                started: now,
                            }
                        }
                        E::Reject { stream, status, .. } => {
                            return Next::Reject {
                                to: Some(stream),
                                status,
                            }
                        }
                        E::Priority { stream, priority } => h2.reprioritize(stream, priority),
                        E::Cancel { stream } => {
                            if let Some(a) = h2.cancel(stream) {
                                h2.cancelled.push(a);
                            }
                            out.waiting
                                .retain(|w| w.stream.is_none_or(|s| s.0 != stream));
                        }
                    }
                }
            }
        }
    }
}
