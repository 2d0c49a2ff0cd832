//! One HTTP/3 connection's requests, sans I/O: the caller (the server, which drives the
//! QUIC connection) hands in each stream's bytes as QUIC delivers them, its end, or its
//! reset, and hears which requests to answer ([`Connection::next_event`]); it asks here for
//! the bytes of its own control stream ([`Connection::opening`]), of an answer's head
//! ([`Connection::head`]) and DATA frame headers ([`Connection::data_header`]), and of
//! GOAWAY ([`Connection::go_away`]).
//!
//! The rules it keeps (RFC 9114, RFC 9204): a client's unidirectional streams are
//! typed, the control stream opens with SETTINGS and is never closed, the QPACK
//! streams carry no instruction this side's empty table does not allow; a request
//! stream is HEADERS, DATA (discarded, counted against `content-length`), optional
//! trailers, and nothing else. A request's fields become the same [`Request`] HTTP/1.1
//! and HTTP/2 make, through HTTP/2's checks of a field block (the same rules, RFC 9114
//! §4.2 and §4.3): a malformed request is a stream error (H3_MESSAGE_ERROR), a method
//! the server does not know is answered 501 and a head past the limits 431, as over
//! the other two.

use std::collections::{HashMap, HashSet, VecDeque};

use super::error::ErrorCode;
use super::frame::{self, Event as FrameEvent, Frame, FrameReader, Role, ServerSettings};
use super::qpack::{self, DecoderStreamReader, EncoderStreamReader};
use super::stream::{Accept, PeerStreams, StreamType, StreamTypeReader};
use crate::fields::Head;
use crate::h2::request::{self as fields_block, Malformed};
use crate::refusal::Refusal;
use crate::request::{Limits, Request, Version};
use crate::Status;

/// What a connection has for the server next.
#[derive(Debug)]
pub enum Event {
    /// A request to answer on `stream`.
    Request { stream: u64, request: Box<Request> },
    /// A request to answer with `status` on `stream` (a method the server does not
    /// know, a head past the limits), as HTTP/1.1 answers it.
    Reject {
        stream: u64,
        status: Status,
        reason: Refusal,
    },
    /// Reset `stream` with `code` and stop reading it: a malformed request, or one on a
    /// stream after GOAWAY; an answer under way on it is dropped.
    ResetStream { stream: u64, code: ErrorCode },
    /// Close the connection with `code`: the client broke a rule of the connection.
    Close { code: ErrorCode },
}

/// How many times the field section limit a request stream's frame may be before the
/// connection ends (H3_EXCESSIVE_LOAD, unread), as HTTP/2 takes a header block of
/// twice the limit: up to it, a head past the limit is answered 431.
const FRAME_FACTOR: u64 = 2;

/// Answers the client may cancel (STOP_SENDING while they are under way) before the
/// connection ends, when they are more than half the requests it made: a rapid-reset
/// flood (each request costs the server an answer, each cancel the client nothing), as
/// HTTP/2 counts its resets.
const CANCELS: u64 = 100;

/// Request streams below the highest seen whose bytes are still awaited, at most: far
/// more than the streams a client may open at once (QUIC's stream limit, 128 here).
const SKIPPED: usize = 1024;

/// Where a request stream stands.
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Its HEADERS has not come.
    Head,
    /// Its body (DATA), of which `received` bytes came, up to `expected` when the head
    /// said its length.
    Body {
        received: u64,
        expected: Option<u64>,
    },
    /// Its trailers came: nothing more may.
    Trailers,
    /// Refused or reset: what comes is dropped.
    Gone,
}

struct RequestStream {
    reader: FrameReader,
    phase: Phase,
}

/// A client's unidirectional stream, by what it turned out to be.
enum Uni {
    Typing(StreamTypeReader),
    Control(FrameReader),
    Encoder(EncoderStreamReader),
    Decoder(DecoderStreamReader),
    /// A reserved or unknown type: discarded.
    Ignored,
}

/// The server side of one HTTP/3 connection.
pub struct Connection {
    limits: Limits,
    decoder: qpack::Decoder,
    encoder: qpack::Encoder,
    peer: PeerStreams,
    uni: HashMap<u64, Uni>,
    requests: HashMap<u64, RequestStream>,
    events: VecDeque<Event>,
    /// The first request stream GOAWAY refused (none: not said).
    goaway: Option<u64>,
    /// The highest request stream seen, plus 4 (the next the client may open).
    next_request: u64,
    /// Request streams below it whose first bytes have not come: opening a stream
    /// opens every lower one (RFC 9000 §3.2), and their bytes may come later
    /// (reordered datagrams). At most [`SKIPPED`]; the client's stream limit keeps
    /// them fewer.
    skipped: HashSet<u64>,
    /// The connection was closed for an error: nothing more is read.
    failed: bool,
    /// Requests taken, and answers the client cancelled while they were under way.
    taken: u64,
    cancels: u64,
}

/// A client-initiated bidirectional stream (RFC 9000 §2.1): a request stream.
pub fn is_request_stream(id: u64) -> bool {
    id & 0b11 == 0
}

/// A client-initiated unidirectional stream.
pub fn is_client_uni(id: u64) -> bool {
    id & 0b11 == 0b10
}

impl Connection {
    /// A connection taking requests within `limits`.
    pub fn new(limits: Limits) -> Connection {
        Connection {
            limits,
            decoder: qpack::Decoder::new(),
            encoder: qpack::Encoder::default(),
            peer: PeerStreams::new(),
            uni: HashMap::new(),
            requests: HashMap::new(),
            events: VecDeque::new(),
            goaway: None,
            taken: 0,
            cancels: 0,
            next_request: 0,
            skipped: HashSet::new(),
            failed: false,
        }
    }

    /// The largest request head taken: names, values and 32 bytes a field (RFC 9114
    /// §4.2.2), as the limits say for an HTTP/1.1 head.
    fn max_section(&self) -> u64 {
        self.limits.header_bytes as u64 + 32 * self.limits.header_fields as u64
    }

    /// The bytes that open this side's control stream: its type and SETTINGS. (It
    /// opens no QPACK stream: its encoder uses no dynamic table and its decoder allows
    /// none, RFC 9204 §4.2.)
    pub fn opening(&self, out: &mut Vec<u8>) {
        let settings = ServerSettings {
            max_field_section_size: self.max_section(),
            grease: None,
        };
        // Both are small numbers: never past a variable-length integer's range.
        let _ = super::stream::write_stream_type(out, StreamType::Control);
        let _ = frame::write_settings(out, &settings);
    }

    /// Bytes QUIC delivered on the client's stream `id`, in order.
    pub fn receive(&mut self, id: u64, bytes: &[u8]) {
        if self.failed {
            return;
        }
        let r = if is_request_stream(id) {
            self.request_bytes(id, bytes)
        } else if is_client_uni(id) {
            self.uni_bytes(id, bytes)
        } else {
            Ok(())
        };
        if let Err(code) = r {
            self.fail(code);
        }
    }

    /// The client ended its stream `id` (FIN) after the bytes given.
    pub fn end(&mut self, id: u64) {
        if self.failed {
            return;
        }
        if is_client_uni(id) {
            if let Some(Uni::Control(_) | Uni::Encoder(_) | Uni::Decoder(_)) = self.uni.remove(&id)
            {
                self.fail(ErrorCode::ClosedCriticalStream);
            }
            return;
        }
        if is_request_stream(id) && !self.requests.contains_key(&id) {
            // A stream that ends with no byte on it: no HEADERS came.
            if let Err(code) = self.request_bytes(id, &[]) {
                return self.fail(code);
            }
        }
        let Some(s) = self.requests.get_mut(&id) else {
            return;
        };
        if s.phase != Phase::Gone && s.reader.end().is_err() {
            // Its last frame cut short by a clean end (RFC 9114 §7.1).
            return self.fail(ErrorCode::FrameError);
        }
        let bad = match s.phase {
            Phase::Head => Some(ErrorCode::RequestIncomplete),
            Phase::Body {
                received,
                expected: Some(n),
            } if received != n => Some(ErrorCode::MessageError),
            _ => None,
        };
        if let Some(code) = bad {
            self.reset(id, code);
        }
        if let Some(s) = self.requests.get_mut(&id) {
            s.phase = Phase::Gone;
        }
    }

    /// The client reset its stream `id`: a request stream's answer is dropped by the
    /// caller; a critical stream's reset ends the connection.
    pub fn reset_by_peer(&mut self, id: u64) {
        if is_client_uni(id) {
            if let Some(Uni::Control(_) | Uni::Encoder(_) | Uni::Decoder(_)) = self.uni.remove(&id)
            {
                self.fail(ErrorCode::ClosedCriticalStream);
            }
            return;
        }
        self.requests.remove(&id);
        self.skipped.remove(&id);
    }

    /// The client cancelled an answer under way (STOP_SENDING): past [`CANCELS`], when
    /// they are more than half the requests taken, the connection ends
    /// (H3_EXCESSIVE_LOAD).
    pub fn cancelled(&mut self) {
        self.cancels += 1;
        if self.cancels > CANCELS && self.cancels * 2 > self.taken {
            self.fail(ErrorCode::ExcessiveLoad);
        }
    }

    /// The caller is done with request stream `id` (answered, or reset): its state goes.
    pub fn forget(&mut self, id: u64) {
        if let Some(s) = self.requests.get_mut(&id) {
            if s.phase != Phase::Head {
                self.requests.remove(&id);
            }
        }
    }

    /// What comes next, if anything.
    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Says GOAWAY: the request streams from the next the client may open on are not
    /// answered. Its frame, for this side's control stream, goes to `out` (once).
    pub fn go_away(&mut self, out: &mut Vec<u8>) {
        if self.goaway.is_none() {
            self.goaway = Some(self.next_request);
            let _ = frame::write_goaway(out, self.next_request);
        }
    }

    /// GOAWAY was said.
    pub fn going_away(&self) -> bool {
        self.goaway.is_some()
    }

    /// The limits of the requests read from now on (a reload's, for a connection the
    /// next generation of workers takes on).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Requests taken so far (each answered, or being answered).
    pub fn answered(&self) -> u64 {
        self.taken
    }

    /// Request streams whose answers are not done.
    pub fn open_requests(&self) -> usize {
        self.requests.len()
    }

    /// An answer's head as a HEADERS frame, from `cache` (the worker's) when the head
    /// was encoded before.
    pub fn head(&self, head: &Head, cache: &mut qpack::HeadCache, out: &mut Vec<u8>) {
        let mut section = Vec::with_capacity(128);
        cache.encode(&self.encoder, head, &mut section);
        let _ = frame::write_headers_header(out, section.len() as u64);
        out.extend_from_slice(&section);
    }

    /// A DATA frame's header for `len` bytes of body.
    pub fn data_header(len: u64, out: &mut Vec<u8>) {
        let _ = frame::write_data_header(out, len);
    }

    fn fail(&mut self, code: ErrorCode) {
        if !self.failed {
            self.failed = true;
            self.events.push_back(Event::Close { code });
        }
    }

    fn reset(&mut self, stream: u64, code: ErrorCode) {
        if let Some(s) = self.requests.get_mut(&stream) {
            s.phase = Phase::Gone;
        }
        self.events.push_back(Event::ResetStream { stream, code });
    }

    fn uni_bytes(&mut self, id: u64, mut bytes: &[u8]) -> Result<(), ErrorCode> {
        let max = self.max_section();
        let s = self
            .uni
            .entry(id)
            .or_insert_with(|| Uni::Typing(StreamTypeReader::new()));
        if let Uni::Typing(r) = s {
            let (n, t) = r.read(bytes);
            bytes = &bytes[n..];
            let Some(t) = t else {
                return Ok(());
            };
            *s = match self.peer.open(t).map_err(|e| e.code())? {
                Accept::Ignore => Uni::Ignored,
                Accept::Read(StreamType::Control) => {
                    Uni::Control(FrameReader::new(Role::Control, max))
                }
                Accept::Read(StreamType::QpackEncoder) => Uni::Encoder(EncoderStreamReader::new()),
                Accept::Read(_) => Uni::Decoder(DecoderStreamReader::new()),
            };
        }
        match s {
            Uni::Typing(_) | Uni::Ignored => Ok(()),
            Uni::Encoder(r) => r.read(bytes).map(drop).map_err(|e| e.code()),
            Uni::Decoder(r) => r.read(bytes).map(drop).map_err(|e| e.code()),
            Uni::Control(r) => {
                while !bytes.is_empty() {
                    let (n, event) = r.read(bytes).map_err(|e| e.code())?;
                    bytes = &bytes[n..];
                    if let Some(FrameEvent::Frame(Frame::CancelPush(_))) = event {
                        // No push was promised: every push id is wrong (§7.2.3).
                        return Err(ErrorCode::IdError);
                    }
                    if n == 0 && event.is_none() {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    fn request_bytes(&mut self, id: u64, mut bytes: &[u8]) -> Result<(), ErrorCode> {
        if !self.requests.contains_key(&id) {
            if id < self.next_request && !self.skipped.remove(&id) {
                // A stream already done with: what is left of it is dropped.
                return Ok(());
            }
            if id >= self.next_request {
                let mut below = self.next_request;
                while below < id && self.skipped.len() < SKIPPED {
                    self.skipped.insert(below);
                    below += 4;
                }
                self.next_request = id + 4;
            }
            let max = FRAME_FACTOR * self.max_section();
            self.requests.insert(
                id,
                RequestStream {
                    reader: FrameReader::new(Role::Request, max),
                    phase: Phase::Head,
                },
            );
            if self.goaway.is_some_and(|g| id >= g) {
                self.reset(id, ErrorCode::RequestRejected);
            }
        }
        while !bytes.is_empty() {
            let Some(s) = self.requests.get_mut(&id) else {
                return Ok(());
            };
            if s.phase == Phase::Gone {
                return Ok(());
            }
            let (n, event) = s.reader.read(bytes).map_err(|e| e.code())?;
            bytes = &bytes[n..];
            match event {
                Some(FrameEvent::Frame(Frame::Headers(section))) => {
                    let section = section.into_owned();
                    self.headers(id, &section)?;
                }
                Some(FrameEvent::Data { .. }) => self.data_frame(id)?,
                Some(FrameEvent::DataBytes(b)) => self.body(id, b.len() as u64),
                Some(_) => {}
                None if n == 0 => break,
                None => {}
            }
        }
        Ok(())
    }

    /// A DATA frame's header: only after the head, before any trailers.
    fn data_frame(&mut self, id: u64) -> Result<(), ErrorCode> {
        match self.requests.get(&id).map(|s| &s.phase) {
            Some(Phase::Head | Phase::Trailers) => Err(ErrorCode::FrameUnexpected),
            _ => Ok(()),
        }
    }

    /// Body bytes: discarded, counted against the head's `content-length`.
    fn body(&mut self, id: u64, n: u64) {
        let Some(s) = self.requests.get_mut(&id) else {
            return;
        };
        if let Phase::Body { received, expected } = &mut s.phase {
            *received += n;
            if expected.is_some_and(|e| *received > e) {
                self.reset(id, ErrorCode::MessageError);
            }
        }
    }

    /// A HEADERS frame: the request's head, or its trailers.
    fn headers(&mut self, id: u64, section: &[u8]) -> Result<(), ErrorCode> {
        let limit = usize::try_from(self.max_section()).unwrap_or(usize::MAX);
        let phase = match self.requests.get(&id) {
            Some(s) => &s.phase,
            None => return Ok(()),
        };
        match phase {
            Phase::Head => {}
            Phase::Body { received, expected } => {
                if expected.is_some_and(|e| *received != e) {
                    self.reset(id, ErrorCode::MessageError);
                    return Ok(());
                }
                return self.trailers(id, section, limit);
            }
            Phase::Trailers => return Err(ErrorCode::FrameUnexpected),
            Phase::Gone => return Ok(()),
        }
        let limits = self.limits;
        let mut fields = fields_block::Fields::for_version(Version::Http3);
        let mut bad = None;
        let decoded = self.decoder.decode(section, limit, &mut |n, v| {
            if bad.is_none() {
                if let Err(why) = fields.field(n, v, &limits) {
                    bad = Some(why);
                }
            }
        });
        let too_large = match decoded {
            Ok(()) => false,
            Err(qpack::DecodeError::TooLarge) => true,
            Err(e) => return Err(e.code()),
        };
        let too_many = fields.too_many;
        let head = match bad {
            Some(why) => Err(why),
            None => fields.finish(),
        };
        let event = match head {
            Ok(_) if too_large || too_many => Event::Reject {
                stream: id,
                status: Status::HeaderFieldsTooLarge,
                reason: Refusal::TooManyFields,
            },
            Ok(h) => {
                if let Some(s) = self.requests.get_mut(&id) {
                    s.phase = Phase::Body {
                        received: 0,
                        expected: h.content_length,
                    };
                }
                self.taken += 1;
                Event::Request {
                    stream: id,
                    request: h.request,
                }
            }
            Err(Malformed::UnknownMethod) => Event::Reject {
                stream: id,
                status: Status::NotImplemented,
                reason: Refusal::UnknownMethod,
            },
            Err(_) if too_large => Event::Reject {
                stream: id,
                status: Status::HeaderFieldsTooLarge,
                reason: Refusal::TooManyFields,
            },
            Err(_) => {
                self.reset(id, ErrorCode::MessageError);
                return Ok(());
            }
        };
        if let (Event::Reject { .. }, Some(s)) = (&event, self.requests.get_mut(&id)) {
            // Answered as it is; what else comes on the stream is dropped.
            s.phase = Phase::Body {
                received: 0,
                expected: None,
            };
        }
        self.events.push_back(event);
        Ok(())
    }

    /// The request's trailers: checked as HTTP/2's, then nothing more may come.
    fn trailers(&mut self, id: u64, section: &[u8], limit: usize) -> Result<(), ErrorCode> {
        let mut bad = false;
        let decoded = self.decoder.decode(section, limit, &mut |n, v| {
            bad |= fields_block::trailer_field(n, v).is_err();
        });
        match decoded {
            Ok(()) | Err(qpack::DecodeError::TooLarge) => {}
            Err(e) => return Err(e.code()),
        }
        if bad {
            self.reset(id, ErrorCode::MessageError);
        } else if let Some(s) = self.requests.get_mut(&id) {
            s.phase = Phase::Trailers;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Method;

    fn conn() -> Connection {
        Connection::new(Limits::default())
    }

    /// A HEADERS frame of `fields`, QPACK literals (no table, no Huffman).
    fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
        let enc = qpack::Encoder { huffman: false };
        let mut section = Vec::new();
        enc.start(&mut section);
        for (n, v) in fields {
            enc.field(&mut section, n.as_bytes(), v.as_bytes());
        }
        let mut out = Vec::new();
        frame::write_headers_header(&mut out, section.len() as u64).unwrap();
        out.extend_from_slice(&section);
        out
    }

    fn get(path: &str) -> Vec<u8> {
        headers(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "localhost"),
            (":path", path),
        ])
    }

    fn control_stream() -> Vec<u8> {
        // Type 0x00, then an empty SETTINGS.
        vec![0x00, 0x04, 0x00]
    }

    #[test]
    fn a_request_in_pieces_is_the_same_request() {
        let bytes = get("/a/b?x=1");
        for step in [1, 2, 7, bytes.len()] {
            let mut c = conn();
            for piece in bytes.chunks(step) {
                c.receive(0, piece);
            }
            let Some(Event::Request { stream, request }) = c.next_event() else {
                panic!("a request, step {step}");
            };
            assert_eq!(stream, 0);
            assert_eq!(request.method, Method::Get);
            assert_eq!(request.path, "/a/b");
            assert_eq!(request.query.as_deref(), Some("x=1"));
            assert_eq!(request.host.as_deref(), Some("localhost"));
            assert_eq!(request.version, Version::Http3);
            c.end(0);
            assert!(c.next_event().is_none(), "step {step}");
        }
    }

    // Rules: docs/http.md Q3.
    #[test]
    fn the_control_stream_opens_with_settings_and_never_closes() {
        let mut c = conn();
        c.receive(2, &control_stream());
        assert!(c.next_event().is_none());
        c.end(2);
        assert!(matches!(
            c.next_event(),
            Some(Event::Close {
                code: ErrorCode::ClosedCriticalStream
            })
        ));
        // A control stream whose first frame is not SETTINGS.
        let mut c = conn();
        c.receive(2, &[0x00, 0x07, 0x01, 0x00]);
        assert!(matches!(
            c.next_event(),
            Some(Event::Close {
                code: ErrorCode::MissingSettings
            })
        ));
        // A second control stream.
        let mut c = conn();
        c.receive(2, &control_stream());
        c.receive(6, &control_stream());
        assert!(matches!(
            c.next_event(),
            Some(Event::Close {
                code: ErrorCode::StreamCreationError
            })
        ));
    }

    #[test]
    fn a_lower_stream_whose_bytes_come_later_is_still_a_request() {
        let mut c = conn();
        // Stream 8's request comes first; 0 and 4 were opened by it, and their
        // bytes come after (reordered datagrams).
        for id in [8, 0, 4] {
            c.receive(id, &get("/x"));
            c.end(id);
            let Some(Event::Request { stream, .. }) = c.next_event() else {
                panic!("stream {id}: a request");
            };
            assert_eq!(stream, id);
            c.forget(id);
        }
        // A stream done with: what comes on it again is dropped.
        c.receive(0, &get("/x"));
        assert!(c.next_event().is_none());
        // One the client reset before any byte came is done with too.
        c.receive(20, &get("/y"));
        assert!(matches!(
            c.next_event(),
            Some(Event::Request { stream: 20, .. })
        ));
        c.reset_by_peer(12);
        c.receive(12, &get("/y"));
        assert!(c.next_event().is_none());
        c.receive(16, &get("/z"));
        assert!(matches!(
            c.next_event(),
            Some(Event::Request { stream: 16, .. })
        ));
    }

    #[test]
    fn data_before_the_head_ends_the_connection() {
        let mut c = conn();
        c.receive(0, &[0x00, 0x01, b'x']);
        assert!(matches!(
            c.next_event(),
            Some(Event::Close {
                code: ErrorCode::FrameUnexpected
            })
        ));
    }

    #[test]
    fn a_malformed_request_resets_its_stream_only() {
        let mut c = conn();
        // A pseudo-header field after a regular one.
        c.receive(
            0,
            &headers(&[
                (":method", "GET"),
                ("x-a", "1"),
                (":scheme", "https"),
                (":path", "/"),
            ]),
        );
        assert!(matches!(
            c.next_event(),
            Some(Event::ResetStream {
                stream: 0,
                code: ErrorCode::MessageError
            })
        ));
        c.receive(4, &get("/next"));
        assert!(matches!(
            c.next_event(),
            Some(Event::Request { stream: 4, .. })
        ));
    }

    #[test]
    fn a_stream_that_ends_before_its_head_is_incomplete() {
        let mut c = conn();
        // Whole frames (one of a reserved type), and no HEADERS.
        c.receive(0, &[0x21, 0x00]);
        c.end(0);
        // No byte at all.
        c.end(4);
        for stream in [0, 4] {
            assert!(matches!(
                c.next_event(),
                Some(Event::ResetStream { stream: s, code: ErrorCode::RequestIncomplete })
                    if s == stream
            ));
        }
    }

    #[test]
    fn a_frame_cut_by_a_clean_end_is_a_frame_error() {
        let mut c = conn();
        let bytes = get("/");
        c.receive(0, &bytes[..3]);
        c.end(0);
        assert!(matches!(
            c.next_event(),
            Some(Event::Close {
                code: ErrorCode::FrameError
            })
        ));
    }

    #[test]
    fn an_unknown_method_is_answered_501() {
        let mut c = conn();
        c.receive(
            0,
            &headers(&[(":method", "BREW"), (":scheme", "https"), (":path", "/")]),
        );
        assert!(matches!(
            c.next_event(),
            Some(Event::Reject {
                stream: 0,
                status: Status::NotImplemented,
                ..
            })
        ));
    }

    #[test]
    fn a_body_longer_than_its_content_length_is_a_message_error() {
        let mut c = conn();
        let mut bytes = headers(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/"),
            ("content-length", "2"),
        ]);
        bytes.extend_from_slice(&[0x00, 0x03, b'a', b'b', b'c']);
        c.receive(0, &bytes);
        assert!(matches!(
            c.next_event(),
            Some(Event::Request { stream: 0, .. })
        ));
        assert!(matches!(
            c.next_event(),
            Some(Event::ResetStream {
                stream: 0,
                code: ErrorCode::MessageError
            })
        ));
    }

    #[test]
    fn after_goaway_new_streams_are_rejected() {
        let mut c = conn();
        c.receive(0, &get("/"));
        assert!(matches!(
            c.next_event(),
            Some(Event::Request { stream: 0, .. })
        ));
        let mut out = Vec::new();
        c.go_away(&mut out);
        assert_eq!(out, [0x07, 0x01, 0x04], "GOAWAY naming stream 4");
        c.receive(4, &get("/late"));
        assert!(matches!(
            c.next_event(),
            Some(Event::ResetStream {
                stream: 4,
                code: ErrorCode::RequestRejected
            })
        ));
    }

    #[test]
    fn cancel_push_is_an_id_error() {
        let mut c = conn();
        let mut bytes = control_stream();
        bytes.extend_from_slice(&[0x03, 0x01, 0x00]);
        c.receive(2, &bytes);
        assert!(matches!(
            c.next_event(),
            Some(Event::Close {
                code: ErrorCode::IdError
            })
        ));
    }

    #[test]
    fn the_opening_is_a_control_stream_with_settings() {
        let c = conn();
        let mut out = Vec::new();
        c.opening(&mut out);
        assert_eq!(out[0], 0x00, "control stream type");
        let mut r = FrameReader::new(Role::Control, 1 << 16);
        let (_, e) = r.read(&out[1..]).unwrap();
        let Some(FrameEvent::Frame(Frame::Settings(s))) = e else {
            panic!("SETTINGS first: {e:?}");
        };
        assert_eq!(s.qpack_max_table_capacity, 0);
        assert!(s.max_field_section_size.is_some());
    }

    #[test]
    fn a_response_head_decodes_to_its_fields() {
        let c = conn();
        let mut h = Head::new(Status::Ok, "Sun, 29 Nov 2026 06:00:00 GMT");
        h.field("Content-Type", "text/plain").content_length(5);
        let mut out = Vec::new();
        c.head(&h, &mut qpack::HeadCache::new(), &mut out);
        let mut r = FrameReader::new(Role::Request, 1 << 16);
        let (_, e) = r.read(&out).unwrap();
        let Some(FrameEvent::Frame(Frame::Headers(section))) = e else {
            panic!("HEADERS: {e:?}");
        };
        let mut got = Vec::new();
        qpack::Decoder::new()
            .decode(&section, 1 << 16, &mut |n, v| {
                got.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .unwrap();
        assert_eq!(got[0], (":status".into(), "200".into()));
        assert!(
            got.contains(&("content-type".into(), "text/plain".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&("content-length".into(), "5".into())),
            "{got:?}"
        );
    }
}
