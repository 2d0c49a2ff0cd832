//! One connection's requests, sans I/O: the caller hands in the bytes it read and the
//! clock, and hears which requests to answer, when to stop reading and how the
//! connection ends. The server's I/O layer (`linerate-server`'s `conn`) owns the socket
//! and the output queue; every decision about the input is made here, so each is tested
//! with literal bytes, one byte at a time as well as all at once.
//!
//! The rules it keeps (docs/http.md):
//! - pipelined requests come out in order; once `max_pending` answers are owed, nothing
//!   more is parsed and [`Connection::wants_bytes`] says stop reading, so a client that
//!   pipelines without reading cannot grow the server's memory;
//! - a request body (`Content-Length` or chunked) is read and discarded, never parsed as
//!   the next request;
//! - an invalid request gets its status and no request after it is read; so does one
//!   that asked to close (`Connection: close`, HTTP/1.0 without keep-alive);
//! - after the last answer, the connection stays open, closes (the peer has closed), or
//!   lingers: our side half-closes and the input is drained for a while, so the client
//!   reads the answer instead of a reset.
//!
//! Non-goals: timeouts are the caller's (it reads [`Connection::head_started`] and keeps
//! its own clock of send progress); responses are the caller's.

use std::rc::Rc;
use std::time::Instant;

use crate::request::{self, Body, ChunkedSkipper, HeadScan, Http2, Limits, Parse, Request};
use crate::timeout::{Due, Timeout, Timeouts};
use crate::Protocol;
use crate::Status;

/// Most bytes held before they are parsed, unless the limits allow a larger head: this
/// bounds reading ahead of pipelined requests.
const MAX_BUFFERED: usize = 64 * 1024;

/// What the connection has for its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A request to answer.
    Request(Box<Request>),
    /// Input that must be answered with `status`; no request after it is read.
    Reject {
        /// The status to answer.
        status: Status,
        /// Why.
        reason: crate::refusal::Refusal,
    },
    /// Nothing more to answer until more bytes come (or answers owed are sent).
    Wait,
    /// The connection opened with HTTP/2's preface (and [`Limits::http2`] allows it):
    /// it is an HTTP/2 connection from here, its bytes so far in
    /// [`Connection::take_input`].
    Http2,
}

/// How the connection ends once every answer owed has been sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Keep it open for the next request.
    KeepOpen,
    /// Close it: the peer has closed its side.
    Close,
    /// Half-close our side and drain the peer's input for a while before closing, so the
    /// client reads our last answer instead of a reset.
    Linger,
}

enum BodySkip {
    Length(u64),
    Chunked(ChunkedSkipper),
}

/// The input side of one HTTP/1.1 connection.
pub struct Connection {
    /// Shared by every connection of a worker (an idle connection is kept small).
    limits: Rc<Limits>,
    max_pending: usize,
    /// Bytes read and not yet consumed.
    buf: Vec<u8>,
    /// How far the head at the start of `buf` has been scanned.
    scan: HeadScan,
    /// The body of the last request, being discarded (boxed: rare for a static server,
    /// and an idle connection is kept small).
    body: Option<Box<BodySkip>>,
    /// Answers owed: requests and rejects handed out whose responses are not yet sent.
    pending: usize,
    /// No request after the ones handed out will be read.
    stopped: bool,
    /// The next request handed out is the last (see [`Connection::finish_next`]).
    last_one: bool,
    /// Requests and rejects handed out so far.
    handed_out: u64,
    /// The peer will send no more.
    peer_closed: bool,
    /// When the first byte of a head that has not all come arrived.
    head_started: Option<Instant>,
    /// When the head of the request whose body is being discarded was complete.
    body_started: Option<Instant>,
}

impl Connection {
    /// A new connection; it reads ahead of at most `max_pending` unsent answers.
    pub fn new(limits: impl Into<Rc<Limits>>, max_pending: usize) -> Connection {
        Connection {
            limits: limits.into(),
            max_pending: max_pending.max(1),
            buf: Vec::new(),
            scan: HeadScan::default(),
            body: None,
            pending: 0,
            stopped: false,
            last_one: false,
            handed_out: 0,
            peer_closed: false,
            head_started: None,
            body_started: None,
        }
    }

    /// The limits it keeps (shared).
    pub fn limits(&self) -> Rc<Limits> {
        Rc::clone(&self.limits)
    }

    /// Most bytes held unparsed: room for the largest head the limits allow (empty
    /// lines before the request line count against its limit too).
    fn max_buffered(&self) -> usize {
        (2 * self.limits.request_line_bytes + self.limits.header_bytes + 4).max(MAX_BUFFERED)
    }

    /// The next thing to do, at `now`.
    pub fn next(&mut self, now: Instant) -> Event {
        loop {
            if self.stopped {
                return Event::Wait;
            }
            if let Some(skip) = &mut self.body {
                let taken = match &mut **skip {
                    BodySkip::Length(left) => {
                        let n = (*left).min(self.buf.len() as u64);
                        *left -= n;
                        if *left == 0 {
                            self.body = None;
                        }
                        n as usize
                    }
                    BodySkip::Chunked(c) => match c.feed(&self.buf) {
                        Ok(n) => {
                            if c.is_done() {
                                self.body = None;
                            }
                            n
                        }
                        Err(_) => {
                            let why = crate::refusal::Refusal::BadChunkedBody;
                            return self.reject(why.status(), why);
                        }
                    },
                };
                self.buf.drain(..taken);
                if self.body.is_some() {
                    return Event::Wait;
                }
                self.body_started = None;
                continue;
            }
            if self.pending >= self.max_pending {
                return Event::Wait;
            }
            if self.buf.is_empty() {
                return Event::Wait;
            }
            if self.handed_out == 0 && self.limits.http2 == Http2::Only {
                // HTTP/2 from the first byte: its connection checks the preface.
                self.stopped = true;
                self.handed_out = 1;
                return Event::Http2;
            }
            if self.handed_out == 0 && self.limits.http2 == Http2::On && self.buf[0] == b'P' {
                let preface = crate::h2::PREFACE;
                let n = self.buf.len().min(preface.len());
                if self.buf[..n] == preface[..n] {
                    if n < preface.len() {
                        return Event::Wait;
                    }
                    self.stopped = true;
                    self.handed_out = 1;
                    return Event::Http2;
                }
            }
            match request::parse_resumed(&mut self.scan, &self.buf, &self.limits) {
                Parse::Incomplete => {
                    self.head_started.get_or_insert(now);
                    return Event::Wait;
                }
                Parse::Invalid { status, reason } => return self.reject(status, reason),
                Parse::Complete {
                    mut request,
                    head_len,
                } => {
                    self.buf.drain(..head_len);
                    self.scan = HeadScan::default();
                    self.head_started = None;
                    self.body = match request.body {
                        Body::None => None,
                        Body::Length(n) => Some(Box::new(BodySkip::Length(n))),
                        Body::Chunked => Some(Box::new(BodySkip::Chunked(ChunkedSkipper::new()))),
                    };
                    self.body_started = self.body.as_ref().map(|_| now);
                    self.pending += 1;
                    self.handed_out += 1;
                    if self.last_one {
                        request.keep_alive = false;
                    }
                    if !request.keep_alive {
                        self.stop();
                    }
                    return Event::Request(request);
                }
            }
        }
    }

    /// [`Connection::finish_next`] was asked (whether or not that request came).
    pub fn finish_asked(&self) -> bool {
        self.last_one
    }

    /// The peer closed its side.
    pub fn peer_has_closed(&self) -> bool {
        self.peer_closed
    }

    fn reject(&mut self, status: Status, reason: crate::refusal::Refusal) -> Event {
        self.pending += 1;
        self.handed_out += 1;
        self.stop();
        Event::Reject { status, reason }
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.body = None;
        self.body_started = None;
        self.head_started = None;
        self.buf = Vec::new();
    }

    /// One answer owed has been sent in full.
    pub fn sent(&mut self) {
        debug_assert!(self.pending > 0, "an answer sent that was not owed");
        self.pending = self.pending.saturating_sub(1);
    }

    /// Answers owed.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Takes the bytes received and not yet consumed (for the HTTP/2 connection that
    /// follows [`Event::Http2`]).
    pub fn take_input(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// Bytes received and not yet consumed.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

impl Protocol for Connection {
    /// Whether the owner should read: it has room for more, and they could matter.
    fn wants_bytes(&self) -> bool {
        !self.stopped
            && !self.peer_closed
            && self.pending < self.max_pending
            && self.buf.len() < self.max_buffered()
    }

    /// Takes bytes the peer sent.
    fn receive(&mut self, bytes: &[u8]) {
        if self.stopped {
            // Nothing after a rejected or final request is read.
            return;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The peer closed its side (a read returned 0).
    fn peer_closed(&mut self) {
        self.peer_closed = true;
    }

    /// Nothing owed, nothing half-received.
    fn is_idle(&self) -> bool {
        self.pending == 0 && self.buf.is_empty() && self.body.is_none()
    }

    /// Gives the input buffer's memory back (an idle keep-alive connection holds none).
    fn release_buffer(&mut self) {
        if self.buf.is_empty() {
            self.buf = Vec::new();
        }
    }

    /// How the connection ends if nothing more is owed now.
    fn ending(&self) -> Ending {
        if self.peer_closed {
            Ending::Close
        } else if self.stopped {
            Ending::Linger
        } else {
            Ending::KeepOpen
        }
    }

    /// The protocol's next deadline: the head being received, from its first byte,
    /// or the body being read and discarded, from the end of its head (one byte every
    /// few seconds must not hold the connection for ever): docs/http.md P6.
    fn poll_timeout(&self, t: &Timeouts) -> Option<Due> {
        match (self.head_started, self.body_started) {
            (Some(h), _) => Some(Due::after(h, t.head, Timeout::Head)),
            (None, Some(b)) => Some(Due::after(b, t.body, Timeout::Body)),
            (None, None) => None,
        }
    }

    /// The next request, whether part of it has come or none yet, is the last: it is
    /// answered as if it had asked `Connection: close`, and nothing after it is read.
    /// For a connection that has not yet had its first request when the server stops
    /// taking new work (a reload): closing it unanswered would fail a request its
    /// client may be sending already, which it cannot tell from a refusal.
    fn finish_next(&mut self) {
        self.last_one = true;
    }

    /// The answer to the last request closes the connection (the owner's decision,
    /// a 400 for its path, say): no request after it is read.
    fn close_after_last(&mut self) {
        self.stop();
    }

    /// Nothing handed out yet: no request, no reject.
    fn is_fresh(&self) -> bool {
        self.handed_out == 0 && !self.stopped
    }

    /// [`Connection::finish_next`] was asked and that request has not come yet.
    fn awaits_last(&self) -> bool {
        self.last_one && !self.stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Method;

    const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n";

    /// What a connection makes of `input`, fed in pieces of `step` bytes, answering
    /// every request at once: the events other than `Wait`, and how it ends.
    fn run(input: &[u8], step: usize) -> (Vec<Event>, Ending) {
        let now = Instant::now();
        let mut c = Connection::new(Limits::default(), 32);
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            assert!(c.wants_bytes() || c.ending() != Ending::KeepOpen);
            c.receive(piece);
            loop {
                match c.next(now) {
                    Event::Wait => break,
                    e => {
                        out.push(e);
                        c.sent();
                    }
                }
            }
        }
        c.peer_closed();
        (out, c.ending())
    }

    /// `run` all at once and one byte at a time, which must agree.
    fn both(input: &[u8]) -> Vec<Event> {
        let whole = run(input, input.len().max(1));
        let bytewise = run(input, 1);
        assert_eq!(
            whole,
            bytewise,
            "at once and one byte at a time differ for {:?}",
            String::from_utf8_lossy(input)
        );
        whole.0
    }

    fn paths(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Request(r) => r.path.clone(),
                Event::Reject { status, .. } => status.code().to_string(),
                Event::Wait => "wait".into(),
                Event::Http2 => "h2".into(),
            })
            .collect()
    }

    /// Rules: docs/http.md C1.
    #[test]
    fn pipelined_requests_come_out_in_order() {
        let mut input = Vec::new();
        for i in 0..50 {
            input.extend_from_slice(format!("GET /{i} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        }
        let want: Vec<String> = (0..50).map(|i| format!("/{i}")).collect();
        assert_eq!(paths(&both(&input)), want);
    }

    /// Rules: docs/http.md R5, R6.
    #[test]
    fn bodies_are_discarded_not_parsed_as_requests() {
        let input = [
            &b"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 28\r\n\r\n"[..],
            GET, // the body: looks like a request, is not one
            b"GET /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"1c;ext=1\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n\r\n0\r\nX-Trailer: t\r\n\r\n",
            b"GET /d HTTP/1.1\r\nHost: h\r\n\r\n",
        ]
        .concat();
        assert_eq!(paths(&both(&input)), ["/a", "/b", "/d"]);
    }

    #[test]
    fn a_bad_chunked_body_is_refused_and_ends_the_input() {
        let input = [
            &b"GET /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"zz\r\n",
            GET,
        ]
        .concat();
        assert_eq!(paths(&both(&input)), ["/a", "400"]);
        assert_eq!(run(&input, 1).1, Ending::Close);
    }

    /// Rules: docs/http.md P1, R2, R3, R4, R6, C3.
    #[test]
    fn nothing_after_an_invalid_request_is_read() {
        for (bad, status) in [
            (&b"GET / HTTP/1.1\nHost: h\r\n\r\n"[..], "400"),
            (b"get / HTTP/1.1\r\nHost: h\r\n\r\n", "501"),
            (b"GET / HTTP/1.1\r\n\r\n", "400"),
            (
                b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n",
                "400",
            ),
        ] {
            let input = [GET, bad, GET].concat();
            assert_eq!(paths(&both(&input)), ["/a", status]);
            // The client still sends: our side half-closes and drains.
            let mut c = Connection::new(Limits::default(), 32);
            c.receive(&input);
            let now = Instant::now();
            while c.next(now) != Event::Wait {
                c.sent();
            }
            assert_eq!(c.ending(), Ending::Linger);
            assert!(!c.wants_bytes());
            c.receive(GET);
            assert_eq!(c.next(now), Event::Wait);
        }
    }

    /// Rules: docs/http.md C2.
    #[test]
    fn persistence_follows_version_and_connection() {
        let now = Instant::now();
        for (head, ending) in [
            ("GET / HTTP/1.1\r\nHost: h\r\n\r\n", Ending::KeepOpen),
            (
                "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
                Ending::Linger,
            ),
            ("GET / HTTP/1.0\r\n\r\n", Ending::Linger),
            (
                "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                Ending::KeepOpen,
            ),
        ] {
            let mut c = Connection::new(Limits::default(), 32);
            c.receive(head.as_bytes());
            c.receive(GET);
            assert!(matches!(c.next(now), Event::Request(_)), "{head:?}");
            c.sent();
            let next_is_request = matches!(c.next(now), Event::Request(_));
            assert_eq!(next_is_request, ending == Ending::KeepOpen, "{head:?}");
            if next_is_request {
                c.sent();
            }
            assert_eq!(c.ending(), ending, "{head:?}");
        }
    }

    #[test]
    fn an_answer_that_closes_ends_the_input() {
        let now = Instant::now();
        let mut c = Connection::new(Limits::default(), 32);
        c.receive(&GET.repeat(3));
        assert!(matches!(c.next(now), Event::Request(_)));
        c.close_after_last();
        assert_eq!(c.next(now), Event::Wait);
        assert!(!c.wants_bytes());
        c.sent();
        assert_eq!(c.ending(), Ending::Linger);
    }

    /// Rules: docs/http.md C1.
    #[test]
    fn reading_pauses_while_answers_are_owed() {
        let now = Instant::now();
        let mut c = Connection::new(Limits::default(), 4);
        let input = GET.repeat(10);
        c.receive(&input);
        for _ in 0..4 {
            assert!(matches!(c.next(now), Event::Request(_)));
        }
        assert_eq!(c.next(now), Event::Wait);
        assert!(!c.wants_bytes(), "four answers owed: stop reading");
        assert_eq!(c.buffered(), 6 * GET.len());
        c.sent();
        assert!(c.wants_bytes());
        assert!(matches!(c.next(now), Event::Request(_)));
        assert_eq!(c.next(now), Event::Wait);
        for _ in 0..4 {
            c.sent();
        }
        for _ in 0..5 {
            assert!(matches!(c.next(now), Event::Request(_)));
            c.sent();
        }
        assert_eq!(c.next(now), Event::Wait);
        assert!(c.is_idle());
    }

    /// Rules: docs/http.md C1.
    #[test]
    fn input_held_unparsed_is_bounded() {
        let now = Instant::now();
        let mut c = Connection::new(Limits::default(), 1);
        c.receive(GET);
        assert!(matches!(c.next(now), Event::Request(_)));
        while c.wants_bytes() {
            c.receive(GET);
        }
        assert!(c.buffered() < MAX_BUFFERED + GET.len());
    }

    /// Rules: docs/http.md P6.
    #[test]
    fn a_head_as_large_as_the_limits_allow_is_read_whole() {
        let limits = Limits {
            request_line_bytes: 100_000,
            header_bytes: 1000,
            header_fields: 10,
            ..Limits::default()
        };
        let now = Instant::now();
        let mut c = Connection::new(limits, 32);
        let head = format!("GET /{} HTTP/1.1\r\nHost: h\r\n\r\n", "a".repeat(99_000));
        for piece in head.as_bytes().chunks(16 * 1024) {
            assert!(c.wants_bytes());
            c.receive(piece);
        }
        assert!(matches!(c.next(now), Event::Request(_)));
    }

    #[test]
    fn a_flood_of_empty_lines_is_refused() {
        let mut input = b"\r\n".repeat(3);
        input.extend_from_slice(GET);
        assert_eq!(paths(&both(&input)), ["/a"]);
        let flood = b"\r\n".repeat(8 * 1024);
        assert_eq!(paths(&both(&flood)), ["400"]);
    }

    fn timeouts() -> Timeouts {
        Timeouts {
            head: std::time::Duration::from_secs(10),
            body: std::time::Duration::from_secs(30),
        }
    }

    /// Rules: docs/http.md P6.
    #[test]
    fn the_head_deadline_runs_from_the_first_byte_of_a_head() {
        let t = timeouts();
        let head = |at| Some(Due::after(at, t.head, Timeout::Head));
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_secs(1);
        let mut c = Connection::new(Limits::default(), 32);
        assert_eq!(c.poll_timeout(&t), None);
        c.receive(b"GET / HT");
        assert_eq!(c.next(t0), Event::Wait);
        c.receive(b"TP/1.1\r\n");
        assert_eq!(c.next(t1), Event::Wait);
        assert_eq!(c.poll_timeout(&t), head(t0));
        c.receive(b"Host: h\r\n\r\nGET");
        assert!(matches!(c.next(t1), Event::Request(_)));
        assert_eq!(c.next(t1), Event::Wait);
        assert_eq!(c.poll_timeout(&t), head(t1), "the next head started");
    }

    /// Rules: docs/http.md P6.
    #[test]
    fn the_body_deadline_runs_from_the_end_of_its_head_to_its_last_byte() {
        let t = timeouts();
        let body = |at| Some(Due::after(at, t.body, Timeout::Body));
        let mut c = Connection::new(Limits::default(), 4);
        let t0 = Instant::now();
        c.receive(b"GET /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nx");
        assert!(matches!(c.next(t0), Event::Request(_)));
        assert_eq!(c.next(t0), Event::Wait);
        assert_eq!(c.poll_timeout(&t), body(t0));
        let t1 = t0 + std::time::Duration::from_secs(2);
        c.receive(b"y");
        assert_eq!(c.next(t1), Event::Wait);
        assert_eq!(c.poll_timeout(&t), body(t0), "a byte does not restart it");
        c.receive(b"z");
        assert_eq!(c.next(t1), Event::Wait);
        assert_eq!(c.poll_timeout(&t), None, "the body is done");
        c.receive(GET);
        assert!(matches!(c.next(t1), Event::Request(_)));
        assert_eq!(c.poll_timeout(&t), None, "no body, no deadline");
    }

    #[test]
    fn a_peer_that_closes_mid_head_ends_the_connection() {
        let now = Instant::now();
        let mut c = Connection::new(Limits::default(), 32);
        c.receive(b"GET / HTTP/1.1\r\nHo");
        assert_eq!(c.next(now), Event::Wait);
        c.peer_closed();
        assert!(!c.wants_bytes());
        assert_eq!(c.ending(), Ending::Close);
    }

    /// Rules: docs/http.md C4.
    #[test]
    fn a_half_closed_peer_still_has_its_requests_answered() {
        let now = Instant::now();
        let mut c = Connection::new(Limits::default(), 32);
        c.receive(&[GET, b"HEAD /b HTTP/1.1\r\nHost: h\r\n\r\n"].concat());
        c.peer_closed();
        assert!(matches!(c.next(now), Event::Request(_)));
        let Event::Request(r) = c.next(now) else {
            panic!("the second request")
        };
        assert_eq!(r.method, Method::Head);
        assert_eq!(c.pending(), 2);
        assert_eq!(c.ending(), Ending::Close);
    }

    /// Rules: docs/http.md P6, R6.
    #[test]
    fn limits_apply_the_same_one_byte_at_a_time() {
        let long_line = format!("GET /{} HTTP/1.1\r\nHost: h\r\n\r\n", "a".repeat(9000));
        assert_eq!(paths(&both(long_line.as_bytes())), ["414"]);
        let big_head = format!(
            "GET / HTTP/1.1\r\nHost: h\r\nX: {}\r\n\r\n",
            "b".repeat(17000)
        );
        assert_eq!(paths(&both(big_head.as_bytes())), ["431"]);
    }

    /// Rules: docs/http.md T7, T8.
    #[test]
    fn the_http2_preface_turns_the_connection_over_when_allowed() {
        let now = Instant::now();
        let preface = crate::h2::PREFACE;
        let mut c = Connection::new(Limits::default(), 32);
        c.receive(&preface[..10]);
        assert_eq!(c.next(now), Event::Wait, "a part of it is awaited");
        c.receive(&preface[10..]);
        c.receive(b"\0\0\0\x04");
        assert_eq!(c.next(now), Event::Http2);
        assert_eq!(c.take_input(), [&preface[..], b"\0\0\0\x04"].concat());
        assert!(!c.wants_bytes());
        // Off, it is a request line with an unknown method.
        let off = Limits {
            http2: Http2::Off,
            ..Limits::default()
        };
        let mut c = Connection::new(off, 32);
        c.receive(preface);
        assert!(matches!(c.next(now), Event::Reject { .. }));
        // After a request, it is one too.
        let mut c = Connection::new(Limits::default(), 32);
        c.receive(&[GET, &preface[..]].concat());
        assert!(matches!(c.next(now), Event::Request(_)));
        c.sent();
        assert!(matches!(c.next(now), Event::Reject { .. }));
        // Only: HTTP/2 from the first byte, whatever it is (the HTTP/2 connection
        // refuses what is not its preface).
        let only = Limits {
            http2: Http2::Only,
            ..Limits::default()
        };
        let mut c = Connection::new(only, 32);
        c.receive(GET);
        assert_eq!(c.next(now), Event::Http2);
        assert_eq!(c.take_input(), GET);
    }

    /// A reload stops a connection that has had no request yet: its first request is
    /// still answered, with a close, and nothing after it is read; a connection that
    /// has had one takes no further request.
    #[test]
    fn the_next_request_can_be_made_the_last() {
        let now = Instant::now();
        let mut fresh = Connection::new(Limits::default(), 32);
        assert!(fresh.is_fresh());
        fresh.finish_next();
        assert!(fresh.awaits_last());
        fresh.receive(GET);
        fresh.receive(GET);
        match fresh.next(now) {
            Event::Request(r) => assert!(!r.keep_alive, "answered with a close"),
            e => panic!("{e:?}"),
        }
        assert_eq!(fresh.next(now), Event::Wait, "the second is not read");
        assert!(!fresh.awaits_last() && !fresh.is_fresh());
        fresh.sent();
        // Input is left unread: the owner half-closes and drains it.
        assert_eq!(fresh.ending(), Ending::Linger);
        let mut used = Connection::new(Limits::default(), 32);
        used.receive(GET);
        assert!(matches!(used.next(now), Event::Request(_)));
        assert!(!used.is_fresh());
    }
}
