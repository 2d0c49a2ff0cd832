//! HTTP/2's send side: which answer gets the next DATA frame, and how much of its body
//! goes in it. Answers are known by their stream and the lengths of their body's
//! parts (the server keeps the bytes: memory, or ranges of open files); each frame cut
//! says which bytes of the front part it carries, with its header, the windows charged
//! ([`Connection::data_header`]).
//!
//! Streams take turns: without priorities, each stream with window left gets one frame
//! per turn, in the order the answers came, so one large download never starves the
//! small ones on the same connection. Once the client signals any priority (RFC 9218),
//! the most urgent go first; of equal urgency, whole answers (non-incremental) before
//! incremental ones, one at a time in the order they came, and incremental ones in
//! turns; answers that signalled nothing count as urgency 3, non-incremental, the
//! RFC's defaults.

use std::collections::VecDeque;

use smallvec::SmallVec;

use super::frame::HEADER_LEN;
use super::Connection;

/// A response's priority as the client signals it (RFC 9218): its `priority` field,
/// or a PRIORITY_UPDATE frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    /// 0 (most urgent) to 7; 3 by default.
    pub urgency: u8,
    /// Whether it is useful in parts (served interleaved with its peers) rather than
    /// whole (served one after another).
    pub incremental: bool,
}

impl Default for Priority {
    fn default() -> Priority {
        Priority {
            urgency: 3,
            incremental: false,
        }
    }
}

impl Priority {
    /// Reads a `priority` field value (an RFC 8941 dictionary: `u=N`, `i` or
    /// `i=?1`/`i=?0`); members it does not know, or cannot read, are ignored, as RFC
    /// 9218 §4 says.
    pub fn parse(value: &[u8]) -> Priority {
        let mut p = Priority::default();
        let Ok(text) = std::str::from_utf8(value) else {
            return p;
        };
        for member in text.split(',') {
            let member = member.trim_matches([' ', '\t']);
            // Parameters after `;` belong to the member and are not read.
            let member = member.split(';').next().unwrap_or("");
            match member.split_once('=') {
                Some(("u", n)) => {
                    if let Ok(u @ 0..=7) = n.parse::<u8>() {
                        p.urgency = u;
                    }
                }
                Some(("i", "?1")) => p.incremental = true,
                Some(("i", "?0")) => p.incremental = false,
                None if member == "i" => p.incremental = true,
                _ => {}
            }
        }
        p
    }
}

/// An answer whose body is being framed.
#[derive(Debug)]
struct Body {
    stream: u32,
    priority: Option<Priority>,
    /// The lengths of its parts, none empty (most bodies have one or two: kept without
    /// an allocation of their own), and the first not framed whole.
    parts: SmallVec<[u64; 2]>,
    next: usize,
    /// Bytes of the front part already framed.
    front: u64,
    /// Body bytes framed so far.
    framed: u64,
}

/// One DATA frame cut from an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    pub stream: u32,
    /// The frame's header (its windows already charged).
    pub header: [u8; HEADER_LEN],
    /// Its payload: `len` bytes of the answer's front part from `at`.
    pub at: u64,
    pub len: u64,
    /// The payload ends the front part: the next frame starts in the next.
    pub part_done: bool,
    /// The answer's last frame.
    pub end: bool,
    /// Body bytes of the answer framed before this frame.
    pub framed_before: u64,
}

/// The answers of one connection with body left to frame, in turn order.
#[derive(Debug, Default)]
pub struct Sender {
    bodies: VecDeque<Body>,
}

impl Sender {
    pub fn new() -> Sender {
        Sender::default()
    }

    /// Adds the answer on `stream` whose body has parts of these lengths (empty ones
    /// are left out); an answer with no body left is not added.
    pub fn add(
        &mut self,
        stream: u32,
        priority: Option<Priority>,
        parts: impl IntoIterator<Item = u64>,
    ) {
        let parts: SmallVec<[u64; 2]> = parts.into_iter().filter(|&n| n > 0).collect();
        if parts.is_empty() {
            return;
        }
        self.bodies.push_back(Body {
            stream,
            priority,
            parts,
            next: 0,
            front: 0,
            framed: 0,
        });
    }

    /// The header of the one DATA frame that takes the whole body of `stream`'s answer
    /// now (a body of one part, of at least a byte, that its windows and the client's
    /// frame size take), its windows charged; none if it takes more, or must wait.
    pub fn at_once(conn: &mut Connection, stream: u32, parts: &[u64]) -> Option<[u8; HEADER_LEN]> {
        let &[len] = parts else {
            return None;
        };
        (len > 0 && len <= conn.window(stream) && len <= conn.max_frame())
            .then(|| conn.data_header(stream, len as u32, true))
    }

    /// Whether any answer has body left.
    pub fn waiting(&self) -> bool {
        !self.bodies.is_empty()
    }

    /// Takes out `stream`'s answer (its stream was reset): the body bytes framed of
    /// it, if it was here.
    pub fn cancel(&mut self, stream: u32) -> Option<u64> {
        let i = self.bodies.iter().position(|b| b.stream == stream)?;
        self.bodies.remove(i).map(|b| b.framed)
    }

    /// Takes out every answer: each stream, and its body bytes framed.
    pub fn take_all(&mut self) -> Vec<(u32, u64)> {
        self.bodies
            .drain(..)
            .map(|b| (b.stream, b.framed))
            .collect()
    }

    /// The client gave `stream` a new priority (PRIORITY_UPDATE).
    pub fn reprioritize(&mut self, stream: u32, p: Priority) {
        if let Some(b) = self.bodies.iter_mut().find(|b| b.stream == stream) {
            b.priority = Some(p);
        }
    }

    /// The next DATA frame, of at most `budget` bytes with its header, as the windows
    /// of `conn` and its client's frame size allow; none when no answer has window
    /// left or the budget takes no byte.
    pub fn next(&mut self, conn: &mut Connection, budget: u64) -> Option<Cut> {
        let header_len = HEADER_LEN as u64;
        if budget <= header_len {
            return None;
        }
        let i = pick(
            self.bodies
                .iter()
                .map(|b| (b.priority, conn.window(b.stream) > 0)),
        )?;
        let mut b = self.bodies.remove(i)?;
        let part = b.parts[b.next];
        let len = (part - b.front)
            .min(conn.window(b.stream))
            .min(conn.max_frame())
            .min(budget - header_len);
        let at = b.front;
        let part_done = at + len == part;
        let end = part_done && b.next + 1 == b.parts.len();
        let header = conn.data_header(b.stream, len as u32, end);
        let cut = Cut {
            stream: b.stream,
            header,
            at,
            len,
            part_done,
            end,
            framed_before: b.framed,
        };
        b.framed += len;
        if part_done {
            b.next += 1;
            b.front = 0;
        } else {
            b.front += len;
        }
        if !end {
            // Its next frame: after the others' (turns), or next (a whole answer served
            // before its peers: RFC 9218's non-incremental).
            match b.priority {
                Some(p) if !p.incremental => self.bodies.insert(i, b),
                _ => self.bodies.push_back(b),
            }
        }
        Some(cut)
    }
}

/// Which answer gets the next frame, of those given as (priority, window open) in
/// turn order (see the module's doc).
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

#[cfg(test)]
mod tests {
    use super::super::frame::{self, flag, Header, Kind};
    use super::super::{hpack, Config, Event, PREFACE};
    use super::*;
    use crate::request::Limits;
    use crate::Protocol;
    use std::time::Instant;

    fn p(urgency: u8, incremental: bool) -> Option<Priority> {
        Some(Priority {
            urgency,
            incremental,
        })
    }

    /// A connection whose client sent `settings` ((id, value)) and asked for `streams`,
    /// each waiting for its answer.
    fn asked(settings: &[(u16, u32)], streams: &[u32]) -> Connection {
        let mut bytes = PREFACE.to_vec();
        frame::write_settings(&mut bytes, settings);
        for &s in streams {
            let mut block = Vec::new();
            for (n, v) in [
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "h"),
                (":path", "/"),
            ] {
                hpack::encode_field(&mut block, n, v);
            }
            frame::write(
                &mut bytes,
                Kind::Headers,
                flag::END_HEADERS | flag::END_STREAM,
                s,
                &block,
            );
        }
        let mut c = Connection::new(Limits::default(), Config::default());
        c.receive(&bytes);
        let now = Instant::now();
        let mut asked = Vec::new();
        loop {
            match c.next(now) {
                Event::Wait => break,
                Event::Request { stream, .. } => asked.push(stream),
                _ => {}
            }
        }
        assert_eq!(asked, streams);
        c
    }

    /// The client opens `stream`'s window (0: the connection's) by `n`.
    fn window_update(c: &mut Connection, stream: u32, n: u32) {
        let mut bytes = Vec::new();
        frame::write(&mut bytes, Kind::WindowUpdate, 0, stream, &n.to_be_bytes());
        c.receive(&bytes);
        while !matches!(c.next(Instant::now()), Event::Wait) {}
    }

    /// Every frame `s` cuts within `budget` each, as (stream, at, len, end).
    fn drain(s: &mut Sender, c: &mut Connection, budget: u64) -> Vec<(u32, u64, u64, bool)> {
        let mut out = Vec::new();
        while let Some(cut) = s.next(c, budget) {
            out.push((cut.stream, cut.at, cut.len, cut.end));
        }
        out
    }

    const INITIAL_WINDOW: u16 = 0x4;
    const MAX_FRAME: u16 = 0x5;

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

    /// Without priorities, streams take turns a frame each, in the order their answers
    /// came, each frame as large as the client's frame size allows.
    #[test]
    fn streams_take_turns_a_frame_each() {
        let mut c = asked(&[], &[1, 3]);
        let mut s = Sender::new();
        s.add(1, None, [40_000]);
        s.add(3, None, [20_000]);
        assert_eq!(
            drain(&mut s, &mut c, 1 << 20),
            [
                (1, 0, 16384, false),
                (3, 0, 16384, false),
                (1, 16384, 16384, false),
                (3, 16384, 3616, true),
                (1, 32768, 7232, true),
            ]
        );
        assert!(!s.waiting());
    }

    /// A whole answer (non-incremental, as signalled) is served before its peers of
    /// the same urgency; a more urgent one first of all.
    #[test]
    fn urgent_and_whole_answers_go_first() {
        let mut c = asked(&[], &[1, 3, 5]);
        let mut s = Sender::new();
        s.add(1, p(3, true), [20_000]);
        s.add(3, p(3, false), [20_000]);
        s.add(5, p(1, true), [5]);
        let order: Vec<u32> = drain(&mut s, &mut c, 1 << 20).iter().map(|f| f.0).collect();
        assert_eq!(order, [5, 3, 3, 1, 1]);
    }

    /// A frame is no larger than the client's SETTINGS_MAX_FRAME_SIZE.
    #[test]
    fn frames_follow_the_clients_frame_size() {
        let mut c = asked(&[(MAX_FRAME, 20_000)], &[1]);
        let mut s = Sender::new();
        s.add(1, None, [50_000]);
        let lens: Vec<u64> = drain(&mut s, &mut c, 1 << 20).iter().map(|f| f.2).collect();
        assert_eq!(lens, [20_000, 20_000, 10_000]);
    }

    /// A frame is no larger than what is left of the fill's budget, header included;
    /// a budget that takes no payload byte cuts nothing.
    #[test]
    fn frames_fit_the_budget() {
        let mut c = asked(&[], &[1]);
        let mut s = Sender::new();
        s.add(1, None, [1000]);
        assert!(s.next(&mut c, HEADER_LEN as u64).is_none());
        let cut = s.next(&mut c, 109).unwrap();
        assert_eq!((cut.at, cut.len, cut.end), (0, 100, false));
        assert!(s.waiting());
        assert_eq!(drain(&mut s, &mut c, 1 << 20), [(1, 100, 900, true)]);
    }

    /// A stream's window stops its frames while the others go on; its client's
    /// WINDOW_UPDATE lets it resume where it stopped.
    #[test]
    fn a_shut_window_waits_for_its_update() {
        let mut c = asked(&[(INITIAL_WINDOW, 1000)], &[1, 3]);
        let mut s = Sender::new();
        s.add(1, None, [3000]);
        s.add(3, None, [500]);
        assert_eq!(
            drain(&mut s, &mut c, 1 << 20),
            [(1, 0, 1000, false), (3, 0, 500, true)]
        );
        assert!(s.waiting());
        window_update(&mut c, 1, 5000);
        assert_eq!(drain(&mut s, &mut c, 1 << 20), [(1, 1000, 2000, true)]);
    }

    /// The connection's window bounds every stream's frames together.
    #[test]
    fn the_connections_window_bounds_them_all() {
        let mut c = asked(&[(INITIAL_WINDOW, 1 << 20)], &[1, 3]);
        let mut s = Sender::new();
        s.add(1, None, [40_000]);
        s.add(3, None, [40_000]);
        // The connection's window is 65,535 until the client opens it.
        let total: u64 = drain(&mut s, &mut c, 1 << 20).iter().map(|f| f.2).sum();
        assert_eq!(total, 65_535);
        window_update(&mut c, 0, 20_000);
        let more: u64 = drain(&mut s, &mut c, 1 << 20).iter().map(|f| f.2).sum();
        assert_eq!(more, 14_465);
        assert!(!s.waiting());
    }

    /// A body of several parts is cut part by part: no frame spans two, each says
    /// where in its part it starts, and only the last part's last frame ends the
    /// stream; empty parts are left out.
    #[test]
    fn parts_are_cut_one_at_a_time() {
        let mut c = asked(&[], &[1]);
        let mut s = Sender::new();
        s.add(1, None, [10, 0, 20_000, 5]);
        let mut cuts = Vec::new();
        while let Some(cut) = s.next(&mut c, 1 << 20) {
            cuts.push((cut.at, cut.len, cut.part_done, cut.end, cut.framed_before));
        }
        assert_eq!(
            cuts,
            [
                (0, 10, true, false, 0),
                (0, 16384, false, false, 10),
                (16384, 3616, true, false, 16394),
                (0, 5, true, true, 20010),
            ]
        );
    }

    /// The frame's header is a DATA frame's: its length, stream, and END_STREAM on the
    /// last.
    #[test]
    fn headers_say_length_stream_and_end() {
        let mut c = asked(&[], &[7]);
        let mut s = Sender::new();
        s.add(7, None, [20_000]);
        let first = s.next(&mut c, 1 << 20).unwrap();
        let last = s.next(&mut c, 1 << 20).unwrap();
        for (cut, flags) in [(first, 0), (last, flag::END_STREAM)] {
            let h = Header::parse(&cut.header);
            assert_eq!(
                (h.kind, h.flags, h.stream, u64::from(h.len)),
                (Kind::Data, flags, 7, cut.len)
            );
        }
    }

    /// A reset stream's answer is taken out with what was framed of it; the others go
    /// on, and an answer not here is none.
    #[test]
    fn a_cancelled_answer_leaves_the_turns() {
        let mut c = asked(&[], &[1, 3]);
        let mut s = Sender::new();
        s.add(1, None, [40_000]);
        s.add(3, None, [100]);
        assert_eq!(s.next(&mut c, 1 << 20).map(|f| f.stream), Some(1));
        assert_eq!(s.cancel(1), Some(16384));
        assert_eq!(s.cancel(1), None);
        assert_eq!(drain(&mut s, &mut c, 1 << 20), [(3, 0, 100, true)]);
    }

    /// A PRIORITY_UPDATE moves an answer ahead of the others.
    #[test]
    fn a_new_priority_moves_an_answer() {
        let mut c = asked(&[], &[1, 3]);
        let mut s = Sender::new();
        s.add(1, None, [20_000]);
        s.add(3, None, [20_000]);
        s.reprioritize(
            3,
            Priority {
                urgency: 0,
                incremental: false,
            },
        );
        let order: Vec<u32> = drain(&mut s, &mut c, 1 << 20).iter().map(|f| f.0).collect();
        assert_eq!(order, [3, 3, 1, 1]);
    }

    /// A body of one part that fits the windows and a frame goes at once, as its
    /// answer's last frame; one of two parts, one too large for a frame or the window,
    /// or an empty one does not, and charges nothing.
    #[test]
    fn a_small_body_goes_at_once() {
        let mut c = asked(&[(INITIAL_WINDOW, 1000)], &[1, 3]);
        for parts in [&[][..], &[0], &[10, 10], &[1001], &[20_000]] {
            assert_eq!(Sender::at_once(&mut c, 1, parts), None, "{parts:?}");
        }
        assert_eq!(c.window(1), 1000);
        let header = Sender::at_once(&mut c, 1, &[1000]).expect("at once");
        let h = Header::parse(&header);
        assert_eq!((h.len, h.flags, h.stream), (1000, flag::END_STREAM, 1));
        assert_eq!(c.window(1), 0);
        assert_eq!(Sender::at_once(&mut c, 3, &[1]).map(|_| ()), Some(()));
    }

    /// An answer with no body is never added; taking them all out says what was
    /// framed of each, in turn order.
    #[test]
    fn empty_bodies_are_not_kept_and_all_can_be_taken() {
        let mut c = asked(&[], &[1, 3, 5]);
        let mut s = Sender::new();
        s.add(1, None, [0, 0]);
        assert!(!s.waiting());
        s.add(3, None, [20_000]);
        s.add(5, None, [30]);
        s.next(&mut c, 1 << 20);
        assert_eq!(s.take_all(), [(5, 0), (3, 16384)]);
        assert!(!s.waiting());
    }
}
