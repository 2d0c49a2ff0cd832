//! An HTTP/2 connection's answers: the protocol ([`linerate_http::h2`]) says which
//! requests came and how much each stream may be sent; here each answer, built by the
//! site as for HTTP/1.1, is turned into frames and handed to the output queue as the
//! windows allow. A DATA frame is its 9-byte header and a slice of the answer's body
//! part as it is (a file range stays a file range, sent by the transmit strategy; cached
//! bytes stay shared), so a file body still goes by `sendfile` or `splice` on a clear
//! connection.
//!
//! Streams take turns: each turn gives every stream with window left one frame, in the
//! order their answers came, so one large download never starves the small ones on the
//! same connection.

use std::collections::VecDeque;
use std::sync::Arc;

use linerate_http::h2::{self, Connection};

use crate::output::Output;
use crate::response::{FileRange, Part, Response};

/// Bytes of frames handed to the output queue per fill: the queue then sends them
/// (one `sendmsg` for byte parts, the engine for file parts) before more are cut.
const FILL_BYTES: u64 = 512 * 1024;

/// An answer whose body is being framed.
pub(crate) struct Answer {
    pub stream: u32,
    pub response: Response,
    /// Bytes of the front body part already framed.
    front: u64,
    /// Body bytes framed so far (for the log of an answer cut short).
    pub framed: u64,
}

/// The server side of one HTTP/2 connection.
pub(crate) struct H2 {
    pub proto: Connection,
    /// Answers with body left to frame, in turn order.
    answers: VecDeque<Answer>,
    /// Counted among the worker's HTTP/2 connections.
    pub counted: bool,
    /// Answers cut before they were framed whole (the client reset their streams, or
    /// a connection error), to be logged.
    pub cancelled: Vec<Answer>,
    /// When the answers last moved (DATA cut for the queue, which it is given only
    /// once it has sent what it had), or the first answer came: the send deadline's
    /// clock. What the client sends (a PING, a WINDOW_UPDATE of 0 bytes' worth) and
    /// the connection's own frames do not move it, so a client that opens no window
    /// cannot hold answers and their files for ever.
    pub sent_at: std::time::Instant,
}

impl H2 {
    pub fn new(proto: Connection, now: std::time::Instant) -> H2 {
        H2 {
            sent_at: now,
            proto,
            answers: VecDeque::new(),
            counted: false,
            cancelled: Vec::new(),
        }
    }

    /// Answers waiting for window or their turn.
    pub fn waiting(&self) -> bool {
        !self.answers.is_empty()
    }

    /// Takes the site's answer to `stream`: its head goes out as HEADERS at once
    /// (ending the stream when there is no body), its body as the windows allow.
    pub fn answer(&mut self, stream: u32, mut r: Response, out: &mut Output) {
        // The connection's own frames first: its SETTINGS lead everything it sends.
        self.push_control(out);
        let head = match r.plan.parts.pop_front() {
            Some(Part::Bytes(b)) => b,
            _ => Vec::new(),
        };
        r.plan.parts.retain(|p| p.len() > 0);
        let body: u64 = r.plan.parts.iter().map(Part::len).sum();
        let mut frames = Vec::with_capacity(head.len());
        // A body of one part that the windows and the frame size take whole goes with
        // its head at once, one entry of the queue (most small files).
        let whole = r.plan.parts.len() == 1
            && body > 0
            && body <= self.proto.window(stream)
            && body <= self.proto.max_frame();
        if !self
            .proto
            .response_head_h1(stream, &head, body == 0, &mut frames)
        {
            // Not a head the server made (it makes every one): the stream is reset.
            self.cancelled.push(Answer {
                stream,
                response: r,
                front: 0,
                framed: 0,
            });
            return;
        }
        if whole {
            frames.extend_from_slice(&self.proto.data_header(stream, body as u32, true));
            r.progress.head_bytes = frames.len() as u64;
            r.plan.parts.push_front(Part::Bytes(frames));
            r.plan.close = false;
            out.push(r);
            return;
        }
        r.progress.head_bytes = frames.len() as u64;
        let headers = Part::Bytes(frames);
        if body == 0 {
            r.plan.parts.clear();
            r.plan.parts.push_back(headers);
            r.plan.close = false;
            out.push(r);
            return;
        }
        let mut frame = Response::frames();
        frame.plan.parts.push_back(headers);
        out.push(frame);
        r.plan.close = false;
        self.answers.push_back(Answer {
            stream,
            response: r,
            front: 0,
            framed: 0,
        });
    }

    /// The client reset `stream`: its answer is taken out, to be logged as cut.
    pub fn cancel(&mut self, stream: u32) -> Option<Answer> {
        let i = self.answers.iter().position(|a| a.stream == stream)?;
        self.answers.remove(i)
    }

    /// Every answer not framed whole (the connection is closing).
    pub fn take_answers(&mut self) -> VecDeque<Answer> {
        std::mem::take(&mut self.answers)
    }

    /// Hands the output queue the connection's own frames, then DATA frames of the
    /// answers as far as the windows and [`FILL_BYTES`] allow, a frame per stream per
    /// turn. True if anything was queued.
    pub fn fill(&mut self, out: &mut Output, now: std::time::Instant) -> bool {
        let mut queued = self.push_control(out);
        let mut budget = FILL_BYTES;
        let max_frame = self.proto.max_frame();
        // Turns until every stream had one with nothing to send.
        let mut idle_turns = 0;
        while budget > 0 && idle_turns < self.answers.len() {
            let Some(mut a) = self.answers.pop_front() else {
                break;
            };
            let window = self.proto.window(a.stream);
            let Some(part) = a.response.plan.parts.front() else {
                // Answers here have body left (the last frame takes them out).
                debug_assert!(false, "an answer with no body left");
                self.proto.cancel(a.stream);
                self.cancelled.push(a);
                continue;
            };
            let left = part.len() - a.front;
            let n = left.min(window).min(max_frame).min(budget);
            if n == 0 && left > 0 {
                self.answers.push_back(a);
                idle_turns += 1;
                continue;
            }
            idle_turns = 0;
            self.sent_at = now;
            let last_part = a.response.plan.parts.len() == 1;
            let end = last_part && n == left;
            let slice = slice(part, a.front, n);
            let header = self.proto.data_header(a.stream, n as u32, end);
            a.front += n;
            a.framed += n;
            budget -= n;
            if a.front == part.len() {
                a.response.plan.parts.pop_front();
                a.front = 0;
            }
            let mut frame = if end {
                // The answer's last frame carries its record.
                let mut r = a.response;
                r.plan.parts.clear();
                // For the log of a cut: its "head" is the frame header, and the body
                // framed before it counts as sent (the frames before it are ahead of
                // it in the queue).
                r.progress = Default::default();
                r.progress.head_bytes = h2::frame::HEADER_LEN as u64;
                r.progress.sent = a.framed - n;
                r
            } else {
                self.answers.push_back(a);
                Response::frames()
            };
            frame.plan.parts.push_back(Part::Bytes(header.to_vec()));
            if let Some(s) = slice {
                frame.plan.parts.push_back(s);
            }
            out.push(frame);
            queued = true;
        }
        queued
    }
}

impl H2 {
    /// Queues the connection's own frames, if it has any.
    fn push_control(&mut self, out: &mut Output) -> bool {
        if !self.proto.has_control() {
            return false;
        }
        let mut control = Vec::new();
        self.proto.take_control(&mut control);
        let mut r = Response::frames();
        r.plan.parts.push_back(Part::Bytes(control));
        out.push(r);
        true
    }
}

/// `len` bytes of `part` from `at`, as a part of its own (none for an empty slice).
fn slice(part: &Part, at: u64, len: u64) -> Option<Part> {
    if len == 0 {
        return None;
    }
    let (at, len) = (at as usize, len as usize);
    Some(match part {
        Part::Bytes(b) => Part::Bytes(b[at..at + len].to_vec()),
        Part::Shared { buf, start, .. } => Part::Shared {
            buf: Arc::clone(buf),
            start: start + at,
            end: start + at + len,
        },
        Part::File(f) => Part::File(FileRange {
            file: Arc::clone(&f.file),
            offset: f.offset + at as u64,
            len: len as u64,
            residency: f.residency.clone(),
        }),
    })
}
