//! An HTTP/2 connection's answers: the protocol ([`linerate_http::h2`]) says which
//! requests came, and its send side ([`linerate_http::h2::send`]) which answer gets
//! the next DATA frame and how much of its body goes in it; here each answer, built by
//! the site as for HTTP/1.1, keeps its body's parts, and each frame cut is handed to
//! the output queue: its 9-byte header and a slice of the answer's body part as it is
//! (a file range stays a file range, sent by the transmit strategy; cached bytes stay
//! shared), so a file body still goes by `sendfile` or `splice` on a clear
//! connection.

use std::sync::Arc;

use linerate_http::h2::send::Sender;
use linerate_http::h2::{self, Connection, Priority};

use crate::output::Output;
use crate::response::{FileRange, Part, Response};

/// Bytes of DATA frames, headers included, handed to the output queue per fill: two of
/// the client's largest frames, within these bounds. The queue sends them before more
/// are cut. Frames of 16 KiB (what browsers and h2load take) are read into memory and
/// gathered with their headers (the queue's collapse), so a fill is one `sendmsg` (or
/// one write into the TLS session, [`crate::tls::WRITE_BYTES`]: two whole records) of
/// 32 KiB: measured over `--netns`, 512 KiB fills cost 2.2× the CPU per KB in clear
/// (the socket taken for one long copy while ACKs wait in its backlog: twice the
/// softirq time per byte) and 1.3× over TLS; 16 KiB fills 1.35× and 1.45× (a send per
/// frame); 32-48 KiB are best (`BENCHMARKS.md`). The headers count, so a fill of two
/// frames is 32 KiB exactly, not 18 bytes more for a write of their own. Larger frames
/// are file ranges sent by the transmit strategy, in larger fills as HTTP/1.1 sends
/// its slices.
const FILL_BYTES: (u64, u64) = (32 * 1024, 512 * 1024);

/// An answer whose body is being framed.
pub(crate) struct Answer {
    pub stream: u32,
    /// Its body's parts not framed whole yet.
    pub response: Response,
    /// Body bytes framed (for the log of an answer cut short), once it is cut.
    pub framed: u64,
}

/// The server side of one HTTP/2 connection.
pub(crate) struct H2 {
    pub proto: Connection,
    /// Answers with body left to frame, by stream.
    answers: Vec<Answer>,
    /// Which of them gets the next frame.
    send: Sender,
    /// Counted among the worker's HTTP/2 connections.
    pub counted: bool,
    /// Its connection error, if it had one, counted.
    pub failure_counted: bool,
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
            answers: Vec::new(),
            send: Sender::new(),
            counted: false,
            failure_counted: false,
            cancelled: Vec::new(),
        }
    }

    /// Answers waiting for window or their turn.
    pub fn waiting(&self) -> bool {
        self.send.waiting()
    }

    /// Takes the site's answer to `stream`: its head goes out as HEADERS at once
    /// (ending the stream when there is no body), its body as the windows allow.
    pub fn answer(
        &mut self,
        stream: u32,
        priority: Option<Priority>,
        mut r: Response,
        out: &mut Output,
        heads: &mut h2::hpack::HeadCache,
    ) {
        // The connection's own frames first: its SETTINGS lead everything it sends.
        self.push_control(out);
        let head = r.plan.head.take();
        r.plan.parts.retain(|p| p.len() > 0);
        let body: u64 = r.plan.parts.iter().map(Part::len).sum();
        let mut frames = Vec::with_capacity(256);
        let Some(head) = head else {
            // An answer without a head (the server gives every one a head): the stream
            // is reset.
            self.proto.cancel(stream);
            self.cancelled.push(Answer {
                stream,
                response: r,
                framed: 0,
            });
            return;
        };
        self.proto
            .head(stream, &head, body == 0, &mut frames, heads);
        // A body that goes in one frame at once goes with its head, one entry of the
        // queue (most small files).
        let one_part = (r.plan.parts.len() == 1).then(|| r.plan.parts[0].len());
        let at_once = one_part.and_then(|len| Sender::at_once(&mut self.proto, stream, &[len]));
        if let Some(header) = at_once {
            frames.extend_from_slice(&header);
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
        self.send
            .add(stream, priority, r.plan.parts.iter().map(Part::len));
        self.answers.push(Answer {
            stream,
            response: r,
            framed: 0,
        });
    }

    /// The client reset `stream`: its answer is taken out, to be logged as cut.
    pub fn cancel(&mut self, stream: u32) -> Option<Answer> {
        let framed = self.send.cancel(stream)?;
        let i = self.answers.iter().position(|a| a.stream == stream)?;
        let mut a = self.answers.swap_remove(i);
        a.framed = framed;
        Some(a)
    }

    /// Every answer not framed whole (the connection is closing).
    pub fn take_answers(&mut self) -> Vec<Answer> {
        let mut all = Vec::with_capacity(self.answers.len());
        for (stream, framed) in self.send.take_all() {
            if let Some(i) = self.answers.iter().position(|a| a.stream == stream) {
                let mut a = self.answers.swap_remove(i);
                a.framed = framed;
                all.push(a);
            }
        }
        all
    }

    /// Hands the output queue the connection's own frames, then DATA frames of the
    /// answers as far as the windows and [`FILL_BYTES`] allow, as the send side cuts
    /// them. True if anything was queued.
    pub fn fill(&mut self, out: &mut Output, now: std::time::Instant) -> bool {
        let mut queued = self.push_control(out);
        let header_len = h2::frame::HEADER_LEN as u64;
        let mut budget = (2 * self.proto.max_frame()).clamp(FILL_BYTES.0, FILL_BYTES.1);
        while let Some(cut) = self.send.next(&mut self.proto, budget) {
            self.sent_at = now;
            budget -= cut.len + header_len;
            let Some(i) = self.answers.iter().position(|a| a.stream == cut.stream) else {
                debug_assert!(false, "a frame of no answer");
                continue;
            };
            let a = &mut self.answers[i];
            let slice = a
                .response
                .plan
                .parts
                .front()
                .and_then(|part| slice(part, cut.at, cut.len));
            if cut.part_done {
                a.response.plan.parts.pop_front();
            }
            let mut frame = if cut.end {
                // The answer's last frame carries its record.
                let mut r = self.answers.swap_remove(i).response;
                r.plan.parts.clear();
                // For the log of a cut: its "head" is the frame header, and the body
                // framed before it counts as sent (the frames before it are ahead of
                // it in the queue).
                r.progress = Default::default();
                r.progress.head_bytes = header_len;
                r.progress.sent = cut.framed_before;
                r
            } else {
                Response::frames()
            };
            frame.plan.parts.push_back(Part::Bytes(cut.header.to_vec()));
            if let Some(s) = slice {
                frame.plan.parts.push_back(s);
            }
            out.push(frame);
            queued = true;
        }
        queued
    }

    /// The client gave `stream` a new priority (PRIORITY_UPDATE).
    pub fn reprioritize(&mut self, stream: u32, p: Priority) {
        self.send.reprioritize(stream, p);
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
