//! HTTP/2 (RFC 9113), sans I/O, for the server side of one connection: the caller hands
//! in the bytes it read and the clock, and hears which requests to answer; it asks
//! here for the frames of its answers ([`Connection::response_head`],
//! [`Connection::data_header`]) and sends the bytes [`Connection::take_control`] gives
//! (SETTINGS, acknowledgements, WINDOW_UPDATE, RST_STREAM, GOAWAY) before any other.
//! The server's I/O layer owns the socket, the bodies and the order streams are served
//! in; every rule about frames, streams and windows is kept here, so each is tested
//! with literal bytes, one byte at a time as well as all at once.
//!
//! - [`frame`]: the frame layout;
//! - [`hpack`]: field blocks (decoding with the client's dynamic table and Huffman
//!   strings, encoding with the static table and literals);
//! - `request`: a request's field block into the [`Request`] HTTP/1.1 makes too.
//!
//! The rules it keeps (docs/http.md, T): the client's windows bound every DATA
//! byte sent; what the client sends is discarded and its window given back, so a
//! request body never stalls the connection; a malformed request resets its stream,
//! and a protocol error ends the connection with GOAWAY and the last stream it took.

pub mod frame;
pub mod hpack;
pub(crate) mod request;
pub mod send;
mod violation;

pub use send::Priority;
pub use violation::Violation;

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

use crate::connection::Ending;
use crate::refusal::Refusal;
use crate::request::{Limits, Request};
use crate::timeout::{Due, Timeout, Timeouts};
use crate::Protocol;
use crate::Status;
use frame::{flag, setting, ErrorCode, Header, Kind, HEADER_LEN};

pub use frame::PREFACE;

/// What this server says in its SETTINGS and holds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Streams a client may have open at once (more are refused).
    pub max_concurrent_streams: u32,
    /// The receive window of each stream, and, as the client is told at the start, of
    /// the connection: request bodies are discarded, so the window is given back as
    /// they come and a large one costs no memory.
    pub window: u32,
    /// The largest frame payload taken.
    pub max_frame_size: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_concurrent_streams: 128,
            window: 1 << 20,
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
        }
    }
}

/// What the connection has for its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A request to answer on `stream`, with the priority the client gave it (none: it
    /// sent no `priority` field).
    Request {
        stream: u32,
        request: Box<Request>,
        priority: Option<Priority>,
    },
    /// The client changed a stream's priority (PRIORITY_UPDATE).
    Priority { stream: u32, priority: Priority },
    /// A request to answer with `status` on `stream` (a method the server does not
    /// know, too many fields), as HTTP/1.1 answers it.
    Reject {
        stream: u32,
        status: Status,
        reason: Refusal,
    },
    /// The stream was reset (by the client, or here for a request that turned out
    /// malformed after it was handed out): its answer is dropped.
    Cancel { stream: u32 },
    /// Nothing more until more bytes come.
    Wait,
}

/// Where a stream stands (RFC 9113 §5.1), from the server's side; a closed stream is
/// no longer held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Both sides may send.
    Open,
    /// The client ended its side.
    HalfClosedRemote,
    /// The server ended its side; the client still sends (a body).
    HalfClosedLocal,
}

struct Stream {
    state: State,
    /// What the client lets the server send on it (may go below 0 when the client
    /// shrinks its initial window).
    send_window: i64,
    /// What the client may still send on it before a WINDOW_UPDATE.
    recv_window: i64,
    /// Body bytes received, and what `content-length` said they would be.
    received: u64,
    content_length: Option<u64>,
    /// An answer is owed (handed out, its last frame not made yet).
    owed: bool,
}

/// The streams held, by id: a few to a few hundred, so a list searched from its end
/// (where the newest are) costs less than hashing.
#[derive(Default)]
struct Streams(Vec<(u32, Stream)>);

impl Streams {
    fn at(&self, id: u32) -> Option<usize> {
        self.0.iter().rposition(|(s, _)| *s == id)
    }
    fn get(&self, id: &u32) -> Option<&Stream> {
        self.at(*id).map(|i| &self.0[i].1)
    }
    fn get_mut(&mut self, id: &u32) -> Option<&mut Stream> {
        self.at(*id).map(|i| &mut self.0[i].1)
    }
    fn contains_key(&self, id: &u32) -> bool {
        self.at(*id).is_some()
    }
    fn remove(&mut self, id: &u32) -> Option<Stream> {
        self.at(*id).map(|i| self.0.remove(i).1)
    }
    fn insert(&mut self, id: u32, s: Stream) {
        self.0.push((id, s));
    }
    fn values_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.0.iter_mut().map(|(_, s)| s)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl std::ops::Index<&u32> for Streams {
    type Output = Stream;
    fn index(&self, id: &u32) -> &Stream {
        self.get(id).expect("a stream held")
    }
}

/// How a stream that is no longer held was closed: frames that cross the close are
/// told apart from frames on a stream that never was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closed {
    /// Reset here: what the client sent before it knew is ignored.
    ResetHere,
    /// Reset by the client, or ended both ways: more is a STREAM_CLOSED error.
    Done,
}

/// A field block being received: HEADERS, then CONTINUATION until END_HEADERS.
struct Block {
    stream: u32,
    end_stream: bool,
    bytes: Vec<u8>,
    frames: u32,
    /// The stream is reset once the block is whole (it named itself as its
    /// dependency): the block is still decoded, for the table's sake.
    reset: bool,
}

/// Streams remembered as closed (beyond, a frame on an old stream id is taken as on a
/// stream that never was: a protocol error).
const CLOSED_MEMORY: usize = 256;
/// Most control bytes (acknowledgements, resets) held for a client that does not read
/// before reading stops.
const MAX_CONTROL: usize = 64 * 1024;
/// Most CONTINUATION frames in one field block.
const MAX_CONTINUATIONS: u32 = 32;

/// The server side of one HTTP/2 connection.
pub struct Connection {
    limits: Rc<Limits>,
    config: Config,
    /// Bytes read and not yet taken as frames.
    buf: Vec<u8>,
    /// The client's preface has been read (and its first SETTINGS must follow).
    preface: bool,
    first_settings: bool,
    decoder: hpack::Decoder,
    /// Frames to send before any other.
    control: Vec<u8>,
    events: VecDeque<Event>,
    streams: Streams,
    closed: VecDeque<(u32, Closed)>,
    /// The highest stream the client opened.
    last_stream: u32,
    block: Option<Block>,
    /// The client's settings.
    peer_max_frame: u32,
    peer_initial_window: i64,
    /// The connection's windows: what the server may send, what the client may.
    send_window: i64,
    recv_window: i64,
    /// Received bytes not yet given back to the connection's window.
    recv_unacked: u32,
    /// GOAWAY sent: no stream above this is taken.
    goaway: Option<u32>,
    /// A connection error: nothing more is read; the connection ends once the GOAWAY
    /// has gone.
    failed: Option<ErrorCode>,
    peer_closed: bool,
    /// When the first byte of a frame that has not all come arrived.
    frame_started: Option<Instant>,
    /// Answers owed.
    owed: usize,
    /// The response fields the client's dynamic table holds.
    encoder: hpack::Encoder,
    /// Streams the client opened.
    opened: u64,
    /// Resets of streams while an answer was owed (each cost the server a request's
    /// work: rapid reset, CVE-2023-44487, is many of them) the client may still make,
    /// in thousandths ([`MAX_RESETS`] at most, [`RESETS_PER_SECOND`] given back), and
    /// when that was last counted.
    reset_credit: u64,
    reset_credit_at: Option<Instant>,
    /// The `now` of the [`Connection::next`] under way.
    now: Option<Instant>,
    /// Frames that brought no request ([`MAX_IDLE_FRAMES`]).
    idle_frames: u64,
    /// Why the connection failed, for the log and the counters.
    why: Option<Violation>,
}

/// Frames that bring no request (SETTINGS, PING, PRIORITY, empty DATA, unknown types)
/// a connection may send, beyond [`IDLE_FRAMES_PER_STREAM`] for each stream it opened,
/// before it is ended with ENHANCE_YOUR_CALM (the SETTINGS, PING and empty-frame floods
/// of 2019: each costs the server work, an acknowledgement to write).
const MAX_IDLE_FRAMES: u64 = 1000;
const IDLE_FRAMES_PER_STREAM: u64 = 10;

/// Client resets of streams being answered that a connection may make at once, and
/// the rate it may go on at: past them it is ended (ENHANCE_YOUR_CALM). A browser
/// resets a few when a page is left; an attack resets many, whatever share of its
/// streams it lets finish (resetting every other one evaded a limit by ratio).
const MAX_RESETS: u64 = 100;
const RESETS_PER_SECOND: u64 = 10;

/// A connection error: GOAWAY with this code, then close.
struct ConnError(ErrorCode, Violation);

type Frame<'a> = (Header, &'a [u8]);

impl Connection {
    /// A new connection; its SETTINGS are queued at once, so a client that spoke first
    /// reads them with the answer to its preface.
    pub fn new(limits: impl Into<Rc<Limits>>, config: Config) -> Connection {
        let limits = limits.into();
        let mut control = Vec::with_capacity(64);
        frame::write_settings(
            &mut control,
            &[
                (
                    setting::MAX_CONCURRENT_STREAMS,
                    config.max_concurrent_streams,
                ),
                (setting::INITIAL_WINDOW_SIZE, config.window),
                (setting::MAX_FRAME_SIZE, config.max_frame_size),
                (
                    setting::MAX_HEADER_LIST_SIZE,
                    max_header_list(&limits) as u32,
                ),
                (setting::ENABLE_PUSH, 0),
                (setting::NO_RFC7540_PRIORITIES, 1),
            ],
        );
        let grow = i64::from(config.window) - i64::from(frame::DEFAULT_WINDOW);
        if grow > 0 {
            frame::write_window_update(&mut control, 0, grow as u32);
        }
        Connection {
            limits,
            config,
            buf: Vec::new(),
            preface: false,
            first_settings: false,
            decoder: hpack::Decoder::new(),
            control,
            events: VecDeque::new(),
            streams: Streams::default(),
            closed: VecDeque::new(),
            last_stream: 0,
            block: None,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            send_window: i64::from(frame::DEFAULT_WINDOW),
            recv_window: i64::from(config.window.max(frame::DEFAULT_WINDOW)),
            recv_unacked: 0,
            goaway: None,
            failed: None,
            peer_closed: false,
            frame_started: None,
            owed: 0,
            encoder: hpack::Encoder::new(),
            opened: 0,
            reset_credit: MAX_RESETS * 1000,
            reset_credit_at: None,
            now: None,
            idle_frames: 0,
            why: None,
        }
    }

    fn max_buffered(&self) -> usize {
        self.config.max_frame_size as usize + HEADER_LEN + 64 * 1024
    }

    /// Whether the peer closed its side: no frame, so no WINDOW_UPDATE, comes any more.
    pub fn peer_has_closed(&self) -> bool {
        self.peer_closed
    }

    /// The next thing to do, at `now`.
    pub fn next(&mut self, now: Instant) -> Event {
        self.now = Some(now);
        loop {
            if let Some(e) = self.events.pop_front() {
                return e;
            }
            if self.failed.is_some() || self.control.len() >= MAX_CONTROL {
                return Event::Wait;
            }
            match self.step() {
                Ok(true) => self.frame_started = None,
                Ok(false) => {
                    if self.buf.is_empty() {
                        self.frame_started = None;
                    } else {
                        self.frame_started.get_or_insert(now);
                    }
                    return self.events.pop_front().unwrap_or(Event::Wait);
                }
                Err(ConnError(code, why)) => {
                    self.why = Some(why);
                    self.fail(code);
                }
            }
        }
    }

    /// Ends the connection for a protocol error: GOAWAY with the last stream taken.
    fn fail(&mut self, code: ErrorCode) {
        // Never above a last stream said before (RFC 9113 §6.8).
        let last = self
            .goaway
            .map_or(self.last_stream, |g| g.min(self.last_stream));
        frame::write_goaway(&mut self.control, last, code);
        self.failed = Some(code);
        self.goaway = Some(last);
        self.buf = Vec::new();
        self.block = None;
    }

    /// Takes one frame from the input if a whole one is there; false if not.
    fn step(&mut self) -> Result<bool, ConnError> {
        if !self.preface {
            let n = self.buf.len().min(PREFACE.len());
            if self.buf[..n] != PREFACE[..n] {
                return Err(ConnError(
                    ErrorCode::ProtocolError,
                    Violation::NotThePreface,
                ));
            }
            if n < PREFACE.len() {
                return Ok(false);
            }
            self.buf.drain(..PREFACE.len());
            self.preface = true;
        }
        let Some(head) = self.buf.first_chunk::<HEADER_LEN>() else {
            return Ok(false);
        };
        let h = Header::parse(head);
        if h.len > self.config.max_frame_size {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::FrameTooLarge,
            ));
        }
        let end = HEADER_LEN + h.len as usize;
        if self.buf.len() < end {
            return Ok(false);
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.frame((h, &buf[HEADER_LEN..end]));
        self.buf = buf;
        self.buf.drain(..end);
        r.map(|()| true)
    }

    fn frame(&mut self, (h, payload): Frame<'_>) -> Result<(), ConnError> {
        if !self.first_settings {
            if h.kind != Kind::Settings || h.flags & flag::ACK != 0 {
                return Err(ConnError(
                    ErrorCode::ProtocolError,
                    Violation::NoSettingsAfterPreface,
                ));
            }
            self.first_settings = true;
        }
        if let Some(b) = &self.block {
            if h.kind != Kind::Continuation || h.stream != b.stream {
                return Err(ConnError(
                    ErrorCode::ProtocolError,
                    Violation::FieldBlockInterrupted,
                ));
            }
        }
        // Frames that ask work of the server and bring no request: a flood of them
        // (SETTINGS, PING, PRIORITY, empty DATA, frames of unknown types) is bounded
        // by the streams the client opens.
        let idle = match h.kind {
            Kind::Settings | Kind::Ping => h.flags & flag::ACK == 0,
            Kind::Priority | Kind::PriorityUpdate | Kind::Unknown(_) => true,
            Kind::Data => h.len == 0 && h.flags & flag::END_STREAM == 0,
            _ => false,
        };
        if idle {
            self.idle_frames += 1;
            if self.idle_frames > MAX_IDLE_FRAMES + IDLE_FRAMES_PER_STREAM * self.opened {
                return Err(ConnError(
                    ErrorCode::EnhanceYourCalm,
                    Violation::FloodOfEmptyFrames,
                ));
            }
        }
        match h.kind {
            Kind::Data => self.data(h, payload),
            Kind::Headers => self.headers(h, payload),
            Kind::Continuation => self.continuation(h, payload),
            Kind::Priority => self.priority(h, payload),
            Kind::RstStream => self.rst_stream(h, payload),
            Kind::Settings => self.settings(h, payload),
            Kind::PushPromise => Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::PushPromiseFromClient,
            )),
            Kind::Ping => self.ping(h, payload),
            Kind::GoAway => self.peer_goaway(h, payload),
            Kind::WindowUpdate => self.window_update(h, payload),
            Kind::PriorityUpdate => self.priority_update(h, payload),
            Kind::Unknown(_) => Ok(()),
        }
    }

    /// Whether a stream id the client names was closed, and how; `None` for one held
    /// or never used.
    fn closed(&self, id: u32) -> Option<Closed> {
        self.closed
            .iter()
            .rev()
            .find(|(s, _)| *s == id)
            .map(|(_, c)| *c)
    }

    /// A stream the client names that is not held: closed (and how) or idle.
    fn not_held(&self, id: u32) -> Result<Closed, ConnError> {
        match self.closed(id) {
            Some(c) => Ok(c),
            None if id <= self.last_stream => Ok(Closed::Done),
            None => Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::FrameOnIdleStream,
            )),
        }
    }

    fn close_stream(&mut self, id: u32, how: Closed) {
        if let Some(s) = self.streams.remove(&id) {
            if s.owed {
                self.owed -= 1;
                self.events.push_back(Event::Cancel { stream: id });
            }
        }
        if self.closed.len() == CLOSED_MEMORY {
            self.closed.pop_front();
        }
        self.closed.push_back((id, how));
    }

    /// A stream error: RST_STREAM with `code`, and the stream is closed.
    fn reset(&mut self, id: u32, code: ErrorCode) {
        frame::write_rst(&mut self.control, id, code);
        self.close_stream(id, Closed::ResetHere);
    }

    /// Strips the padding of a PADDED frame.
    fn unpad(h: Header, payload: &[u8]) -> Result<&[u8], ConnError> {
        if h.flags & flag::PADDED == 0 {
            return Ok(payload);
        }
        let Some((&pad, rest)) = payload.split_first() else {
            return Err(ConnError(ErrorCode::FrameSizeError, Violation::NoPadLength));
        };
        if usize::from(pad) > rest.len() {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::PaddingTooLong,
            ));
        }
        Ok(&rest[..rest.len() - usize::from(pad)])
    }

    fn data(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::DataOnStream0,
            ));
        }
        let body = Self::unpad(h, payload)?;
        // The whole frame counts against the windows, padding too.
        let n = i64::from(h.len);
        if n > self.recv_window {
            return Err(ConnError(
                ErrorCode::FlowControlError,
                Violation::DataBeyondWindow,
            ));
        }
        self.recv_window -= n;
        self.give_back(h.len);
        let Some(s) = self.streams.get_mut(&h.stream) else {
            return match self.not_held(h.stream)? {
                Closed::ResetHere => Ok(()),
                Closed::Done => {
                    self.reset(h.stream, ErrorCode::StreamClosed);
                    Ok(())
                }
            };
        };
        if s.state == State::HalfClosedRemote {
            self.reset(h.stream, ErrorCode::StreamClosed);
            return Ok(());
        }
        if n > s.recv_window {
            self.reset(h.stream, ErrorCode::FlowControlError);
            return Ok(());
        }
        s.recv_window -= n;
        s.received += body.len() as u64;
        let end = h.flags & flag::END_STREAM != 0;
        let over = s.content_length.is_some_and(|cl| s.received > cl);
        let short = end && s.content_length.is_some_and(|cl| s.received != cl);
        if over || short {
            self.reset(h.stream, ErrorCode::ProtocolError);
            return Ok(());
        }
        if end {
            self.end_remote(h.stream);
        } else if s.recv_window < i64::from(self.config.window) / 2 {
            let grow = i64::from(self.config.window) - s.recv_window;
            s.recv_window += grow;
            frame::write_window_update(&mut self.control, h.stream, grow as u32);
        }
        Ok(())
    }

    /// Gives received bytes back to the connection's window, in steps of half of it.
    fn give_back(&mut self, n: u32) {
        self.recv_unacked += n;
        let window = self.config.window.max(frame::DEFAULT_WINDOW);
        if self.recv_unacked >= window / 2 {
            frame::write_window_update(&mut self.control, 0, self.recv_unacked);
            self.recv_window += i64::from(self.recv_unacked);
            self.recv_unacked = 0;
        }
    }

    /// The client ended its side of `id`.
    fn end_remote(&mut self, id: u32) {
        if let Some(s) = self.streams.get_mut(&id) {
            match s.state {
                State::Open => s.state = State::HalfClosedRemote,
                State::HalfClosedLocal => self.close_stream(id, Closed::Done),
                State::HalfClosedRemote => {}
            }
        }
    }

    fn headers(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 || h.stream.is_multiple_of(2) {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::HeadersOnServerStream,
            ));
        }
        let mut rest = Self::unpad(h, payload)?;
        let mut self_dependent = false;
        if h.flags & flag::PRIORITY != 0 {
            let Some((prio, block)) = rest.split_first_chunk::<5>() else {
                return Err(ConnError(
                    ErrorCode::FrameSizeError,
                    Violation::HeadersTooShortForPriority,
                ));
            };
            let dep = u32::from_be_bytes([prio[0], prio[1], prio[2], prio[3]]) & 0x7fff_ffff;
            self_dependent = dep == h.stream;
            rest = block;
        }
        let b = Block {
            stream: h.stream,
            end_stream: h.flags & flag::END_STREAM != 0,
            bytes: rest.to_vec(),
            frames: 0,
            reset: self_dependent,
        };
        if h.flags & flag::END_HEADERS != 0 {
            self.field_block(b)
        } else {
            self.block = Some(b);
            Ok(())
        }
    }

    fn continuation(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        let Some(mut b) = self.block.take() else {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::StrayContinuation,
            ));
        };
        b.frames += 1;
        b.bytes.extend_from_slice(payload);
        if b.frames > MAX_CONTINUATIONS || b.bytes.len() > 2 * max_header_list(&self.limits) {
            // The 2024 CONTINUATION floods: a field block is bounded however it is cut.
            return Err(ConnError(
                ErrorCode::EnhanceYourCalm,
                Violation::FieldBlockTooLarge,
            ));
        }
        if h.flags & flag::END_HEADERS != 0 {
            self.field_block(b)
        } else {
            self.block = Some(b);
            Ok(())
        }
    }

    /// Decodes a block for a stream that will not use it (keeping the decoder's table
    /// in step with the client's encoder).
    fn decode_block(&mut self, block: &[u8]) -> Result<(), ConnError> {
        let limit = max_header_list(&self.limits);
        self.decoder
            .decode(block, limit, &mut |_, _| {})
            .map(|_| ())
            .map_err(|e| ConnError(e.code(), Violation::FieldBlockUndecodable))
    }

    /// A whole field block.
    fn field_block(&mut self, b: Block) -> Result<(), ConnError> {
        let id = b.stream;
        if b.reset {
            // Decoded all the same: the block is part of the compression state.
            self.decode_block(&b.bytes)?;
            if !self.streams.contains_key(&id) && id > self.last_stream {
                self.last_stream = id;
            }
            self.reset(id, ErrorCode::ProtocolError);
            return Ok(());
        }
        if let Some(s) = self.streams.get(&id) {
            // Trailers: the last thing the client sends on the stream.
            let state = s.state;
            let mut bad = None;
            let limit = max_header_list(&self.limits);
            self.decoder
                .decode(&b.bytes, limit, &mut |n, v| {
                    if let Err(why) = request::trailer_field(n, v) {
                        bad.get_or_insert(why);
                    }
                })
                .map_err(|e| ConnError(e.code(), Violation::FieldBlockUndecodable))?;
            if state == State::HalfClosedRemote {
                self.reset(id, ErrorCode::StreamClosed);
            } else if bad.is_some() || !b.end_stream {
                self.reset(id, ErrorCode::ProtocolError);
            } else {
                let s = &self.streams[&id];
                if s.content_length.is_some_and(|cl| cl != s.received) {
                    self.reset(id, ErrorCode::ProtocolError);
                } else {
                    self.end_remote(id);
                }
            }
            return Ok(());
        }
        if id <= self.last_stream {
            self.decode_block(&b.bytes)?;
            return match self.not_held(id)? {
                Closed::ResetHere => Ok(()),
                Closed::Done if self.closed(id).is_some() => Err(ConnError(
                    ErrorCode::StreamClosed,
                    Violation::HeadersOnClosedStream,
                )),
                Closed::Done => Err(ConnError(
                    ErrorCode::ProtocolError,
                    Violation::StreamIdTooLow,
                )),
            };
        }
        // A new stream.
        let limits = Rc::clone(&self.limits);
        let mut fields = request::Fields::new();
        let mut bad = None;
        let within = self
            .decoder
            .decode(&b.bytes, max_header_list(&limits), &mut |n, v| {
                if bad.is_none() {
                    if let Err(why) = fields.field(n, v, &limits) {
                        bad = Some(why);
                    }
                }
            })
            .map_err(|e| ConnError(e.code(), Violation::FieldBlockUndecodable))?;
        self.last_stream = id;
        if self.goaway.is_some_and(|last| id > last) {
            // After GOAWAY, new streams are ignored (the client retries them elsewhere).
            self.close_stream(id, Closed::ResetHere);
            return Ok(());
        }
        if self.streams.len() >= self.config.max_concurrent_streams as usize {
            self.reset(id, ErrorCode::RefusedStream);
            return Ok(());
        }
        let too_many = fields.too_many || !within;
        let head = match bad {
            Some(why) => Err(why),
            None => fields.finish(),
        };
        let (event, content_length) = match head {
            // A body announced on a request that ends at its head.
            Ok(head) if b.end_stream && head.content_length.is_some_and(|n| n > 0) => {
                self.reset(id, ErrorCode::ProtocolError);
                return Ok(());
            }
            Ok(_) if too_many => (
                Event::Reject {
                    stream: id,
                    status: Status::HeaderFieldsTooLarge,
                    reason: Refusal::TooManyFields,
                },
                None,
            ),
            Ok(head) => (
                Event::Request {
                    stream: id,
                    request: head.request,
                    priority: head.priority,
                },
                head.content_length,
            ),
            Err(request::Malformed::UnknownMethod) => (
                Event::Reject {
                    stream: id,
                    status: Status::NotImplemented,
                    reason: Refusal::UnknownMethod,
                },
                None,
            ),
            Err(_) => {
                self.reset(id, ErrorCode::ProtocolError);
                return Ok(());
            }
        };
        self.streams.insert(
            id,
            Stream {
                state: if b.end_stream {
                    State::HalfClosedRemote
                } else {
                    State::Open
                },
                send_window: self.peer_initial_window,
                recv_window: i64::from(self.config.window),
                received: 0,
                content_length,
                owed: true,
            },
        );
        self.owed += 1;
        self.opened += 1;
        self.events.push_back(event);
        Ok(())
    }

    fn priority(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::PriorityOnStream0,
            ));
        }
        if payload.len() != 5 {
            self.reset(h.stream, ErrorCode::FrameSizeError);
            return Ok(());
        }
        let dep =
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff;
        if dep == h.stream {
            self.reset(h.stream, ErrorCode::ProtocolError);
        }
        Ok(())
    }

    /// RFC 9218 §7.1: a new priority for a stream, on stream 0.
    fn priority_update(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::PriorityUpdateOnStream,
            ));
        }
        let Some((id, value)) = payload.split_first_chunk::<4>() else {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::PriorityUpdateTooShort,
            ));
        };
        let stream = u32::from_be_bytes(*id) & 0x7fff_ffff;
        // One for a stream not open (idle, or closed) changes nothing here.
        if self.streams.get(&stream).is_some_and(|s| s.owed) {
            self.events.push_back(Event::Priority {
                stream,
                priority: Priority::parse(value),
            });
        }
        Ok(())
    }

    fn rst_stream(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream == 0 {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::RstStreamOnStream0,
            ));
        }
        if payload.len() != 4 {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::RstStreamWrongLength,
            ));
        }
        if let Some(s) = self.streams.get(&h.stream) {
            if s.owed && !self.spend_reset() {
                return Err(ConnError(ErrorCode::EnhanceYourCalm, Violation::RapidReset));
            }
            self.close_stream(h.stream, Closed::Done);
        } else {
            self.not_held(h.stream)?;
        }
        Ok(())
    }

    /// Counts a reset of a stream being answered against the credit (given back at
    /// [`RESETS_PER_SECOND`] since it was last counted); false when none is left.
    fn spend_reset(&mut self) -> bool {
        if let (Some(now), Some(at)) = (self.now, self.reset_credit_at) {
            let ms = now.saturating_duration_since(at).as_millis() as u64;
            self.reset_credit =
                (self.reset_credit + ms.saturating_mul(RESETS_PER_SECOND)).min(MAX_RESETS * 1000);
        }
        self.reset_credit_at = self.now.or(self.reset_credit_at);
        if self.reset_credit < 1000 {
            return false;
        }
        self.reset_credit -= 1000;
        true
    }

    fn settings(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::SettingsOnStream,
            ));
        }
        if h.flags & flag::ACK != 0 {
            if !payload.is_empty() {
                return Err(ConnError(
                    ErrorCode::FrameSizeError,
                    Violation::SettingsAckWithPayload,
                ));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::SettingsWrongLength,
            ));
        }
        for s in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([s[0], s[1]]);
            let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            match id {
                setting::ENABLE_PUSH if v > 1 => {
                    return Err(ConnError(
                        ErrorCode::ProtocolError,
                        Violation::BadEnablePush,
                    ));
                }
                setting::INITIAL_WINDOW_SIZE => {
                    if i64::from(v) > frame::MAX_WINDOW {
                        return Err(ConnError(
                            ErrorCode::FlowControlError,
                            Violation::InitialWindowTooLarge,
                        ));
                    }
                    let delta = i64::from(v) - self.peer_initial_window;
                    for s in self.streams.values_mut() {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW {
                            return Err(ConnError(
                                ErrorCode::FlowControlError,
                                Violation::StreamWindowOverflow,
                            ));
                        }
                    }
                    self.peer_initial_window = i64::from(v);
                }
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_FRAME_SIZE_LIMIT).contains(&v) {
                        return Err(ConnError(
                            ErrorCode::ProtocolError,
                            Violation::MaxFrameSizeOutOfRange,
                        ));
                    }
                    self.peer_max_frame = v;
                }
                // The bound of the table the encoder fills: said back at the start of
                // the next block (RFC 7541 §4.2).
                setting::HEADER_TABLE_SIZE => self.encoder.peer_table_size(v),
                // No push; the header list the client takes is never near its limit.
                _ => {}
            }
        }
        frame::write(&mut self.control, Kind::Settings, flag::ACK, 0, &[]);
        Ok(())
    }

    fn ping(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError(ErrorCode::ProtocolError, Violation::PingOnStream));
        }
        if payload.len() != 8 {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::PingWrongLength,
            ));
        }
        if h.flags & flag::ACK == 0 {
            frame::write(&mut self.control, Kind::Ping, flag::ACK, 0, payload);
        }
        Ok(())
    }

    fn peer_goaway(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if h.stream != 0 {
            return Err(ConnError(
                ErrorCode::ProtocolError,
                Violation::GoawayOnStream,
            ));
        }
        if payload.len() < 8 {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::GoawayTooShort,
            ));
        }
        // The client opens no more streams; those open are answered.
        Ok(())
    }

    fn window_update(&mut self, h: Header, payload: &[u8]) -> Result<(), ConnError> {
        if payload.len() != 4 {
            return Err(ConnError(
                ErrorCode::FrameSizeError,
                Violation::WindowUpdateWrongLength,
            ));
        }
        let inc = i64::from(
            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff,
        );
        if h.stream == 0 {
            if inc == 0 {
                return Err(ConnError(
                    ErrorCode::ProtocolError,
                    Violation::WindowUpdateOfZero,
                ));
            }
            self.send_window += inc;
            if self.send_window > frame::MAX_WINDOW {
                return Err(ConnError(
                    ErrorCode::FlowControlError,
                    Violation::ConnectionWindowOverflow,
                ));
            }
            return Ok(());
        }
        let Some(s) = self.streams.get_mut(&h.stream) else {
            self.not_held(h.stream)?;
            return Ok(());
        };
        if inc == 0 {
            self.reset(h.stream, ErrorCode::ProtocolError);
            return Ok(());
        }
        s.send_window += inc;
        if s.send_window > frame::MAX_WINDOW {
            self.reset(h.stream, ErrorCode::FlowControlError);
        }
        Ok(())
    }

    // The answers.

    /// Appends the frames of a response head on `stream` (HEADERS, then CONTINUATION
    /// past the client's frame size): `:status`, then `fields`. With `end_stream`, the
    /// answer has no body and this is its last frame.
    pub fn response_head<'a>(
        &mut self,
        stream: u32,
        status: u16,
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
        end_stream: bool,
        out: &mut Vec<u8>,
    ) {
        self.head_frames(stream, end_stream, out, |block, _| {
            hpack::encode_status(block, status);
            for (n, v) in fields {
                hpack::encode_field(block, n, v);
            }
        });
    }

    /// [`Connection::response_head`] of `head`: its block copied from `cache` when a
    /// head like it was encoded before on this worker, else encoded field by field.
    pub fn head(
        &mut self,
        stream: u32,
        head: &crate::fields::Head,
        end_stream: bool,
        out: &mut Vec<u8>,
        cache: &mut hpack::HeadCache,
    ) {
        self.head_frames(stream, end_stream, out, |block, encoder| {
            hpack::encode_head(block, head, cache, encoder)
        });
    }

    /// Appends HEADERS (and CONTINUATION past the client's frame size) carrying the
    /// block `encode` writes.
    fn head_frames(
        &mut self,
        stream: u32,
        end_stream: bool,
        out: &mut Vec<u8>,
        encode: impl FnOnce(&mut Vec<u8>, &mut hpack::Encoder),
    ) {
        // Encoded in place after room for the frame header: nearly every head is one
        // frame.
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_LEN]);
        self.encoder.start(out);
        encode(out, &mut self.encoder);
        let len = out.len() - start - HEADER_LEN;
        let end = if end_stream { flag::END_STREAM } else { 0 };
        let max = self.peer_max_frame as usize;
        if len <= max {
            let h = Header {
                len: len as u32,
                kind: Kind::Headers,
                flags: flag::END_HEADERS | end,
                stream,
            };
            out[start..start + HEADER_LEN].copy_from_slice(&h.bytes());
        } else {
            let block = out.split_off(start + HEADER_LEN);
            out.truncate(start);
            let mut chunks = block.chunks(max).peekable();
            let mut first = true;
            while let Some(chunk) = chunks.next() {
                let mut flags = if chunks.peek().is_none() {
                    flag::END_HEADERS
                } else {
                    0
                };
                if first {
                    flags |= end;
                }
                let kind = if first {
                    Kind::Headers
                } else {
                    Kind::Continuation
                };
                frame::write(out, kind, flags, stream, chunk);
                first = false;
            }
        }
        if end_stream {
            self.end_local(stream);
        }
    }

    /// Bytes of DATA the client lets the server send on `stream` now: the least of the
    /// stream's window and the connection's (0 for a stream not held).
    pub fn window(&self, stream: u32) -> u64 {
        let s = self.streams.get(&stream).map_or(0, |s| s.send_window);
        s.min(self.send_window).max(0) as u64
    }

    /// The largest DATA payload the client takes in one frame.
    pub fn max_frame(&self) -> u64 {
        u64::from(self.peer_max_frame)
    }

    /// The header of a DATA frame of `len` bytes on `stream` (at most
    /// [`Connection::window`] and [`Connection::max_frame`]); with `end_stream` it is
    /// the answer's last.
    pub fn data_header(&mut self, stream: u32, len: u32, end_stream: bool) -> [u8; HEADER_LEN] {
        debug_assert!(u64::from(len) <= self.window(stream) && u64::from(len) <= self.max_frame());
        self.send_window -= i64::from(len);
        if let Some(s) = self.streams.get_mut(&stream) {
            s.send_window -= i64::from(len);
        }
        if end_stream {
            self.end_local(stream);
        }
        Header {
            len,
            kind: Kind::Data,
            flags: if end_stream { flag::END_STREAM } else { 0 },
            stream,
        }
        .bytes()
    }

    /// The server ended its side of `id`: its answer is no longer owed.
    fn end_local(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if std::mem::take(&mut s.owed) {
            self.owed -= 1;
        }
        match s.state {
            // The client may still send (a body, checked against its length to the
            // end); the stream counts against the client's limit until it ends.
            State::Open => s.state = State::HalfClosedLocal,
            State::HalfClosedRemote => self.close_stream(id, Closed::Done),
            State::HalfClosedLocal => {}
        }
    }

    /// The server gives up on a stream's answer (its file failed mid-way): RST_STREAM.
    pub fn cancel(&mut self, stream: u32) {
        if let Some(s) = self.streams.get_mut(&stream) {
            if std::mem::take(&mut s.owed) {
                self.owed -= 1;
            }
            self.reset(stream, ErrorCode::InternalError);
            // The owner knows: no Cancel event for it.
            self.events.retain(|e| *e != Event::Cancel { stream });
        }
    }

    /// Frames the connection itself sends, before any answer's: appended to `out`.
    pub fn take_control(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.control);
    }

    /// Whether frames of the connection's own wait to be sent.
    pub fn has_control(&self) -> bool {
        !self.control.is_empty()
    }

    /// A stream has been taken, and no GOAWAY sent yet: a GOAWAY now would end a
    /// connection that has served, not refuse one before its first request.
    pub fn serving(&self) -> bool {
        self.last_stream > 0 && self.goaway.is_none()
    }

    /// Stop taking new streams: GOAWAY with the last stream taken (those are answered,
    /// later ones ignored), and the connection closes once they are.
    pub fn go_away(&mut self) {
        if self.goaway.is_none() {
            frame::write_goaway(&mut self.control, self.last_stream, ErrorCode::NoError);
            self.goaway = Some(self.last_stream);
        }
    }

    /// Answers owed.
    pub fn pending(&self) -> usize {
        self.owed
    }

    /// The connection error that ended it, if one did.
    pub fn failed(&self) -> Option<ErrorCode> {
        self.failed
    }

    /// Why it failed, if it did.
    pub fn failed_why(&self) -> Option<Violation> {
        self.why
    }
}

impl Protocol for Connection {
    /// Whether the owner should read.
    fn wants_bytes(&self) -> bool {
        self.failed.is_none()
            && !self.peer_closed
            && self.control.len() < MAX_CONTROL
            && self.buf.len() < self.max_buffered()
    }

    /// Takes bytes the peer sent.
    fn receive(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The peer closed its side.
    fn peer_closed(&mut self) {
        self.peer_closed = true;
    }

    /// Nothing owed, nothing half-received, nothing of its own to send.
    fn is_idle(&self) -> bool {
        self.owed == 0 && self.buf.is_empty() && self.block.is_none() && self.control.is_empty()
    }

    /// Gives the input buffer's memory back when it is empty.
    fn release_buffer(&mut self) {
        if self.buf.is_empty() {
            self.buf = Vec::new();
        }
    }

    /// How the connection ends if nothing more is owed now.
    fn ending(&self) -> Ending {
        if self.peer_closed {
            Ending::Close
        } else if self.failed.is_some() || self.goaway.is_some() {
            Ending::Linger
        } else {
            Ending::KeepOpen
        }
    }

    /// The protocol's next deadline: the frame being received, from its first byte,
    /// within the head timeout (a body is bounded by its window and the owner's idle
    /// deadline).
    fn poll_timeout(&self, t: &Timeouts) -> Option<Due> {
        self.frame_started
            .map(|f| Due::after(f, t.head, Timeout::Head))
    }

    /// GOAWAY (the next request is none).
    fn finish_next(&mut self) {
        self.go_away()
    }

    /// GOAWAY.
    fn close_after_last(&mut self) {
        self.go_away()
    }

    /// No stream taken yet.
    fn is_fresh(&self) -> bool {
        self.last_stream == 0
    }

    /// Never: GOAWAY lets no request come after it.
    fn awaits_last(&self) -> bool {
        false
    }
}

/// The largest field section taken (RFC 9113's size: names, values and 32 bytes a
/// field): as much as an HTTP/1.1 head may carry.
fn max_header_list(limits: &Limits) -> usize {
    limits.request_line_bytes + limits.header_bytes + 32 * limits.header_fields.min(128)
}

#[cfg(test)]
mod tests;
