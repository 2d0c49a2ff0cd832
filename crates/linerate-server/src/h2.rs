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
    pub response: Response,
    /// Bytes of the front body part already framed.
    front: u64,
    /// Body bytes framed so far (for the log of an answer cut short).
    pub framed: u64,
    /// What the client said of its priority (RFC 9218), if anything.
    priority: Option<Priority>,
}

/// The server side of one HTTP/2 connection.
pub(crate) struct H2 {
    pub proto: Connection,
    /// Answers with body left to frame, in turn order.
    answers: VecDeque<Answer>,
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
            answers: VecDeque::new(),
            counted: false,
            failure_counted: false,
            cancelled: Vec::new(),
        }
    }

    /// Answers waiting for window or their turn.
    pub fn waiting(&self) -> bool {
        !self.answers.is_empty()
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
        // A body of one part that the windows and the frame size take whole goes with
        // its head at once, one entry of the queue (most small files).
        let whole = r.plan.parts.len() == 1
            && body > 0
            && body <= self.proto.window(stream)
            && body <= self.proto.max_frame();
        let Some(head) = head else {
            // An answer without a head (the server gives every one a head): the stream
            // is reset.
            self.proto.cancel(stream);
            self.cancelled.push(Answer {
                stream,
                response: r,
                front: 0,
                framed: 0,
                priority,
            });
            return;
        };
        self.proto
            .head(stream, &head, body == 0, &mut frames, heads);
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
            priority,
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
        let max_frame = self.proto.max_frame();
        let header_len = h2::frame::HEADER_LEN as u64;
        let mut budget = (2 * max_frame).clamp(FILL_BYTES.0, FILL_BYTES.1);
        while budget > header_len {
            let proto = &self.proto;
            let Some(i) = pick(
                self.answers
                    .iter()
                    .map(|a| (a.priority, proto.window(a.stream) > 0)),
            ) else {
                break;
            };
            let Some(mut a) = self.answers.remove(i) else {
                break;
            };
            let Some(part) = a.response.plan.parts.front() else {
                // Answers here have body left (the last frame takes them out).
                debug_assert!(false, "an answer with no body left");
                self.proto.cancel(a.stream);
                self.cancelled.push(a);
                continue;
            };
            let n = (part.len() - a.front)
                .min(self.proto.window(a.stream))
                .min(max_frame)
                .min(budget - header_len);
            self.sent_at = now;
            let end = a.response.plan.parts.len() == 1 && a.front + n == part.len();
            let slice = slice(part, a.front, n);
            let header = self.proto.data_header(a.stream, n as u32, end);
            a.front += n;
            a.framed += n;
            budget -= n + header_len;
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
                // Its next frame: after the others' (turns), or next (a whole answer
                // served before its peers: RFC 9218's non-incremental).
                match a.priority {
                    Some(p) if !p.incremental => self.answers.insert(i, a),
                    _ => self.answers.push_back(a),
                }
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

    /// The client gave `stream` a new priority (PRIORITY_UPDATE).
    pub fn reprioritize(&mut self, stream: u32, p: Priority) {
        if let Some(a) = self.answers.iter_mut().find(|a| a.stream == stream) {
            a.priority = Some(p);
        }
    }
}

/// Which answer gets the next frame, of those given as (priority, window open) in
/// turn order. A client that signals no priority gets its answers in turns, a frame
/// each. Once it signals any (RFC 9218), the most urgent go first; of equal urgency,
/// whole answers (non-incremental) before incremental ones, one at a time in the order
/// they came, and incremental ones in turns; answers that signalled nothing count as
/// urgency 3, non-incremental, as the RFC's defaults.
fn pick(answers: impl Iterator<Item = (Option<Priority>, bool)>) -> Option<usize> {
    let mut best: Option<((u8, bool), usize)> = None;
    let mut signalled = false;
    let mut first_open = None;
    for (i, (p, open)) in answers.enumerate() {
        signalled |= p.is_some();
        if !open {
            continue;
        }
        first_open.get_or_insert(i);
        let p = p.unwrap_or_default();
        let key = (p.urgency, p.incremental);
        if best.is_none_or(|(k, _)| key < k) {
            best = Some((key, i));
        }
    }
    if signalled {
        best.map(|(_, i)| i)
    } else {
        first_open
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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(urgency: u8, incremental: bool) -> Option<Priority> {
        Some(Priority {
            urgency,
            incremental,
        })
    }

    /// Rules: docs/http.md T11.
    #[test]
    fn answers_take_turns_unless_the_client_signals_priorities() {
        // No signal: the first with window open, in turn order.
        assert_eq!(
            pick([(None, false), (None, true), (None, true)].into_iter()),
            Some(1)
        );
        assert_eq!(pick([(None, false)].into_iter()), None);
        // The most urgent first, whatever its place.
        assert_eq!(
            pick([(None, true), (p(7, true), true), (p(0, false), true)].into_iter()),
            Some(2)
        );
        // One that signalled nothing is urgency 3: ahead of a 5.
        assert_eq!(
            pick([(p(5, false), true), (None, true)].into_iter()),
            Some(1)
        );
        // Of equal urgency, whole answers before incremental ones, in order.
        assert_eq!(
            pick([(p(3, true), true), (p(3, false), true), (p(3, false), true)].into_iter()),
            Some(1)
        );
        // A closed window is passed over.
        assert_eq!(
            pick([(p(0, false), false), (p(6, true), true)].into_iter()),
            Some(1)
        );
    }
}
