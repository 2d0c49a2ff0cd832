//! A response as the output queue takes it: the plan of what to send ([`Plan`]: its
//! parts, head first, and whether the connection closes after it), what the access log
//! and the metrics say of it ([`Record`]), and how much of it has left ([`Progress`],
//! the queue's to keep). Built by [`crate::site`], sent by [`crate::output`], logged by
//! the worker.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;
use std::time::Instant;

use linerate_http::fields::Head;
use linerate_http::request::Method;
use linerate_http::Status;

use crate::disk::Residency;

/// A byte range of an open file, sent by the configured strategy.
pub(crate) struct FileRange {
    pub file: Arc<File>,
    /// Where the range starts in the file.
    pub offset: u64,
    pub len: u64,
    /// What is known of its pages' residency.
    pub residency: Residency,
}

/// A piece of a response body or head.
pub(crate) enum Part {
    /// Owned bytes (heads, error bodies, listings).
    Bytes(Vec<u8>),
    /// `start..end` of cached file contents.
    Shared {
        buf: Arc<[u8]>,
        start: usize,
        end: usize,
    },
    /// A range of an open file.
    File(FileRange),
}

impl Part {
    pub fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::Shared { start, end, .. } => (end - start) as u64,
            Part::File(f) => f.len,
        }
    }
}

/// What to send.
pub(crate) struct Plan {
    /// The answer's head, as each protocol writes it (HTTP/1.1 puts it before the
    /// parts, HTTP/2 encodes it into HEADERS); none for frames and bytes sent as they
    /// are.
    pub head: Option<Head>,
    /// The head once written, then the body's parts.
    pub parts: VecDeque<Part>,
    /// Close the connection after it.
    pub close: bool,
}

/// The HTTP version an answer went out in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Wire {
    /// HTTP/1.x.
    #[default]
    One,
    /// An HTTP/2 stream.
    Two,
    /// An HTTP/3 request stream.
    Three,
}

/// What the access log and the metrics say of a response.
pub(crate) struct Record {
    pub status: Status,
    /// The request line as the log writes it (`-` for no request).
    pub request_line: String,
    /// The request's authority (absolute-form target, else `Host`).
    pub host: Option<String>,
    /// Body bytes the response has.
    pub body_bytes: u64,
    /// The request's method (none: an answer to no request, such as a 400).
    pub method: Option<Method>,
    /// When the request was complete, by the worker loop's clock (None: an answer to no
    /// request; set by the connection).
    pub started: Option<Instant>,
    /// `User-Agent` and `Referer` as sent, kept for an access log that writes them.
    pub user_agent: Option<Vec<u8>>,
    pub referer: Option<Vec<u8>>,
    /// The protocol it was answered in (counted by protocol).
    pub wire: Wire,
    /// The client a trusted proxy named, when it is not the connection's peer.
    pub client: Option<std::net::IpAddr>,
    /// The site that answered (none: an answer to no request), for its own log.
    pub site: Option<u16>,
}

/// How much of a response has left.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Progress {
    /// Bytes of the head (the first part), set when the response is queued.
    pub head_bytes: u64,
    /// Bytes of parts sent whole and taken off the front.
    pub sent: u64,
}

/// A response on its way out.
pub(crate) struct Response {
    pub plan: Plan,
    pub record: Record,
    pub progress: Progress,
    /// Frames of an HTTP/2 connection that end no answer (its own frames, an answer's
    /// HEADERS or DATA before the last): sent as any response, never logged.
    pub quiet: bool,
    /// An answer the access log and the counters leave out (the health path's: a
    /// balancer's checks are not the clients' requests).
    pub unlogged: bool,
    /// No answer yet: the request waits for this password check, made off the worker,
    /// and is answered again once it is done (nothing of this is sent or logged).
    pub waiting: Option<std::sync::Arc<crate::auth::Ticket>>,
    /// The request waits its turn under a rate limit (`waiting` is its ticket): once
    /// let go it is answered without being counted again (`Request::admitted`).
    pub admitted: bool,
}

impl Response {
    /// A response of `parts` sent as they are (no head to write) with `status`, for a
    /// request whose line the log writes as `request_line`; `body_bytes` of body;
    /// closing after it unless `keep_alive`.
    pub fn new(
        parts: VecDeque<Part>,
        status: Status,
        keep_alive: bool,
        request_line: String,
        body_bytes: u64,
    ) -> Response {
        Response {
            plan: Plan {
                head: None,
                parts,
                close: !keep_alive,
            },
            record: Record {
                status,
                request_line,
                host: None,
                body_bytes,
                method: None,
                started: None,
                user_agent: None,
                referer: None,
                wire: Wire::One,
                client: None,
                site: None,
            },
            progress: Progress::default(),
            quiet: false,
            unlogged: false,
            waiting: None,
            admitted: false,
        }
    }

    /// The answer `head` with its `body` (its parts), for a request whose line the log
    /// writes as `request_line`; `body_bytes` of body; closing after it unless
    /// `keep_alive`.
    pub fn answer(
        head: Head,
        body: VecDeque<Part>,
        keep_alive: bool,
        request_line: String,
        body_bytes: u64,
    ) -> Response {
        let mut r = Response::new(body, head.status(), keep_alive, request_line, body_bytes);
        r.plan.head = Some(head);
        r
    }

    /// HTTP/1.1's form of the head, put before the body: its parts are then the
    /// bytes to send, and what it returns the head's length.
    pub fn write_h1_head(&mut self) -> u64 {
        if let Some(h) = self.plan.head.take() {
            let bytes = h.h1(!self.plan.close);
            self.plan.parts.push_front(Part::Bytes(bytes));
        }
        self.plan.parts.front().map_or(0, Part::len)
    }

    /// The stand-in for an answer that waits for `ticket` (see [`Response::waiting`]).
    pub fn waiting_for(ticket: std::sync::Arc<crate::auth::Ticket>) -> Response {
        let mut r = Response::new(VecDeque::new(), Status::Ok, true, String::new(), 0);
        r.waiting = Some(ticket);
        r.unlogged = true;
        r
    }

    /// No answer yet: the request waits its turn under a rate limit until `ticket` is
    /// done, then is answered as admitted.
    pub fn waiting_for_turn(ticket: std::sync::Arc<crate::auth::Ticket>) -> Response {
        let mut r = Response::waiting_for(ticket);
        r.admitted = true;
        r
    }

    /// An HTTP/2 connection's frames that end no answer; parts to be pushed.
    pub fn frames() -> Response {
        let mut r = Response::new(VecDeque::new(), Status::Ok, true, String::new(), 0);
        r.quiet = true;
        r
    }
}
