//! HTTP/3 frames (RFC 9114 §7): a type and a length, both variable-length integers,
//! then the payload. Only layout lives here, and the rules a frame breaks by its type
//! alone on the stream it came on (the control stream begins with SETTINGS, takes no
//! DATA or HEADERS, and a request stream no control frame); what a frame means for a
//! request is the connection's.
//!
//! [`FrameReader`] reads one stream's frames from bytes that come in pieces of any size
//! (QUIC hands a stream's data over as it arrives, cut anywhere): DATA's payload goes
//! out as it comes, never held, as the body is discarded or passed on; every other
//! frame is held until whole, up to a limit (H3_EXCESSIVE_LOAD past it), and lent out
//! of the input itself when it came in one piece. Reserved and unknown frame types are
//! skipped unread (RFC 9114 §9), and HTTP/2's types with no HTTP/3 counterpart refused
//! (§7.2.8).
//!
//! The writers make the server's frames: the header of a HEADERS or DATA frame (its
//! payload, the field section or the body, is the caller's to send after it), the
//! server's SETTINGS and GOAWAY.

use std::borrow::Cow;

use super::error::ErrorCode;
use super::reserved;
use super::varint::{self, TooLarge};

/// Frame types (RFC 9114 §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameType {
    /// DATA (0x0): content.
    Data,
    /// HEADERS (0x1): a QPACK field section.
    Headers,
    /// CANCEL_PUSH (0x3): a push no longer wanted.
    CancelPush,
    /// SETTINGS (0x4): the first frame on a control stream, and only there.
    Settings,
    /// PUSH_PROMISE (0x5): a server's push; never a client's.
    PushPromise,
    /// GOAWAY (0x7): the end of a connection, gracefully.
    GoAway,
    /// MAX_PUSH_ID (0xd): a client's bound on pushes.
    MaxPushId,
    /// HTTP/2's types with no HTTP/3 counterpart (0x2 PRIORITY, 0x6 PING, 0x8
    /// WINDOW_UPDATE, 0x9 CONTINUATION): H3_FRAME_UNEXPECTED wherever they come.
    Http2(u64),
    /// A reserved type (`0x1f * N + 0x21`, [`super::reserved`]): ignored.
    Reserved(u64),
    /// A type this side does not know: ignored.
    Unknown(u64),
}

impl FrameType {
    /// The type numbered `t`.
    pub fn from_u64(t: u64) -> FrameType {
        match t {
            0x0 => FrameType::Data,
            0x1 => FrameType::Headers,
            0x3 => FrameType::CancelPush,
            0x4 => FrameType::Settings,
            0x5 => FrameType::PushPromise,
            0x7 => FrameType::GoAway,
            0xd => FrameType::MaxPushId,
            0x2 | 0x6 | 0x8 | 0x9 => FrameType::Http2(t),
            t if reserved(t) => FrameType::Reserved(t),
            t => FrameType::Unknown(t),
        }
    }

    /// Its number.
    pub fn as_u64(self) -> u64 {
        match self {
            FrameType::Data => 0x0,
            FrameType::Headers => 0x1,
            FrameType::CancelPush => 0x3,
            FrameType::Settings => 0x4,
            FrameType::PushPromise => 0x5,
            FrameType::GoAway => 0x7,
            FrameType::MaxPushId => 0xd,
            FrameType::Http2(t) | FrameType::Reserved(t) | FrameType::Unknown(t) => t,
        }
    }
}

/// Setting identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub mod setting {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: the dynamic table the sender's decoder allows.
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x1;
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest field section the sender takes.
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x6;
    /// SETTINGS_QPACK_BLOCKED_STREAMS: the streams the sender's decoder lets wait for
    /// table entries.
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x7;
}

/// What a peer's SETTINGS said, each setting at its default when it was not there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// The dynamic table the peer's decoder allows this side's encoder (0: none).
    pub qpack_max_table_capacity: u64,
    /// The largest field section the peer takes (`None`: no limit said).
    pub max_field_section_size: Option<u64>,
    /// The streams the peer's decoder lets wait for table entries.
    pub qpack_blocked_streams: u64,
}

impl Settings {
    /// Reads a SETTINGS frame's payload: a setting twice, or one of HTTP/2's with no
    /// HTTP/3 counterpart (0x2 to 0x5), is H3_SETTINGS_ERROR; an identifier this side
    /// does not know is ignored.
    pub fn parse(payload: &[u8]) -> Result<Settings, FrameError> {
        let mut s = Settings::default();
        let mut ids = Vec::new();
        let mut at = 0;
        while at < payload.len() {
            let malformed = FrameError::Malformed(FrameType::Settings);
            let (id, n) = varint::read(&payload[at..]).ok_or(malformed)?;
            at += n;
            let (v, n) = varint::read(&payload[at..]).ok_or(malformed)?;
            at += n;
            match id {
                0x2..=0x5 => return Err(FrameError::Http2Setting(id)),
                setting::QPACK_MAX_TABLE_CAPACITY => s.qpack_max_table_capacity = v,
                setting::MAX_FIELD_SECTION_SIZE => s.max_field_section_size = Some(v),
                setting::QPACK_BLOCKED_STREAMS => s.qpack_blocked_streams = v,
                _ => {}
            }
            ids.push(id);
        }
        // Sorted, so that many settings cost no more than their count times its log.
        ids.sort_unstable();
        match ids.windows(2).find(|w| w[0] == w[1]) {
            Some(w) => Err(FrameError::DuplicateSetting(w[0])),
            None => Ok(s),
        }
    }
}

/// What this server says in its SETTINGS. Its QPACK decoder keeps no dynamic table
/// (QPACK_MAX_TABLE_CAPACITY and QPACK_BLOCKED_STREAMS are 0, said all the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest request head taken.
    pub max_field_section_size: u64,
    /// A reserved setting ([`super::reserved_id`]) and its value, sent so that clients
    /// keep ignoring the settings they do not know (RFC 9114 §7.2.4.1 asks for one).
    pub grease: Option<(u64, u64)>,
}

/// Appends a frame header: type and payload length.
fn write_header(out: &mut Vec<u8>, kind: FrameType, len: u64) -> Result<(), TooLarge> {
    varint::write(out, kind.as_u64())?;
    varint::write(out, len)
}

/// Appends the header of a HEADERS frame whose field section is `len` bytes (sent
/// after it).
pub fn write_headers_header(out: &mut Vec<u8>, len: u64) -> Result<(), TooLarge> {
    write_header(out, FrameType::Headers, len)
}

/// Appends the header of a DATA frame of `len` bytes of body (sent after it).
pub fn write_data_header(out: &mut Vec<u8>, len: u64) -> Result<(), TooLarge> {
    write_header(out, FrameType::Data, len)
}

/// Appends the server's SETTINGS frame.
pub fn write_settings(out: &mut Vec<u8>, s: &ServerSettings) -> Result<(), TooLarge> {
    debug_assert!(s.grease.is_none_or(|(id, _)| reserved(id)));
    let mut payload = Vec::with_capacity(16);
    let settings = [
        (setting::QPACK_MAX_TABLE_CAPACITY, 0),
        (setting::MAX_FIELD_SECTION_SIZE, s.max_field_section_size),
        (setting::QPACK_BLOCKED_STREAMS, 0),
    ];
    for (id, v) in settings.into_iter().chain(s.grease) {
        varint::write(&mut payload, id)?;
        varint::write(&mut payload, v)?;
    }
    write_header(out, FrameType::Settings, payload.len() as u64)?;
    out.extend_from_slice(&payload);
    Ok(())
}

/// Appends a GOAWAY frame: requests on `stream` (a client-initiated bidirectional
/// stream id) and above will not be answered.
pub fn write_goaway(out: &mut Vec<u8>, stream: u64) -> Result<(), TooLarge> {
    write_header(out, FrameType::GoAway, varint::size(stream) as u64)?;
    varint::write(out, stream)
}

/// Why a stream's frames were refused; each ends the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// One of HTTP/2's frame types with no HTTP/3 counterpart: H3_FRAME_UNEXPECTED.
    Http2Frame(u64),
    /// A frame not allowed on this stream, or not there (a second SETTINGS):
    /// H3_FRAME_UNEXPECTED.
    Unexpected(FrameType),
    /// The control stream began with another frame than SETTINGS: H3_MISSING_SETTINGS.
    MissingSettings,
    /// A frame other than DATA longer than the reader takes: H3_EXCESSIVE_LOAD.
    TooLarge { kind: FrameType, len: u64 },
    /// A payload its fields do not fill exactly: H3_FRAME_ERROR.
    Malformed(FrameType),
    /// The stream ended inside a frame: H3_FRAME_ERROR.
    Truncated,
    /// The control stream ended: H3_CLOSED_CRITICAL_STREAM.
    ControlStreamClosed,
    /// A setting twice in one SETTINGS: H3_SETTINGS_ERROR.
    DuplicateSetting(u64),
    /// One of HTTP/2's settings with no HTTP/3 counterpart: H3_SETTINGS_ERROR.
    Http2Setting(u64),
}

impl FrameError {
    /// The error code the connection is closed with.
    pub fn code(&self) -> ErrorCode {
        match self {
            FrameError::Http2Frame(_) | FrameError::Unexpected(_) => ErrorCode::FrameUnexpected,
            FrameError::MissingSettings => ErrorCode::MissingSettings,
            FrameError::TooLarge { .. } => ErrorCode::ExcessiveLoad,
            FrameError::Malformed(_) | FrameError::Truncated => ErrorCode::FrameError,
            FrameError::ControlStreamClosed => ErrorCode::ClosedCriticalStream,
            FrameError::DuplicateSetting(_) | FrameError::Http2Setting(_) => {
                ErrorCode::SettingsError
            }
        }
    }
}

/// The stream a [`FrameReader`] reads: what frames it may carry from a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The client's control stream (after its type byte): SETTINGS first, then
    /// CANCEL_PUSH, GOAWAY, MAX_PUSH_ID; never DATA, HEADERS or PUSH_PROMISE.
    Control,
    /// A request stream: HEADERS and DATA.
    Request,
}

/// A whole frame other than DATA, as a [`FrameReader`] read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// HEADERS: its field section (to [`super::qpack::Decoder::decode`]), lent from the
    /// input when it came in one piece.
    Headers(Cow<'a, [u8]>),
    /// SETTINGS.
    Settings(Settings),
    /// CANCEL_PUSH and its push id (this server promises no push: any id is an
    /// H3_ID_ERROR, RFC 9114 §7.2.3).
    CancelPush(u64),
    /// GOAWAY and the client's push id.
    GoAway(u64),
    /// MAX_PUSH_ID and its push id.
    MaxPushId(u64),
}

/// What a [`FrameReader`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A DATA frame's header: `len` bytes of body follow, as [`Event::DataBytes`]
    /// (none when it is empty).
    Data { len: u64 },
    /// Body bytes of the DATA frame under way, lent from the input.
    DataBytes(&'a [u8]),
    /// A whole frame.
    Frame(Frame<'a>),
    /// A reserved or unknown frame type, and its length: its payload is skipped unread
    /// (told, so that the caller may count them).
    Skipped { kind: u64, len: u64 },
}

/// Where a [`FrameReader`] is in its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a frame's type.
    Type(varint::Reader),
    /// Reading its length.
    Length(FrameType, varint::Reader),
    /// In a DATA frame: the bytes of it left.
    Data(u64),
    /// In a frame read whole: its type and length (what came so far is in `buf`).
    Payload(FrameType, usize),
    /// In a skipped frame: the bytes of it left.
    Skip(u64),
}

/// Reads one stream's frames, from bytes that come in pieces of any size.
#[derive(Clone, Debug)]
pub struct FrameReader {
    role: Role,
    /// The longest payload taken for a frame other than DATA.
    max: u64,
    state: State,
    /// A frame's payload so far, when it came in pieces.
    buf: Vec<u8>,
    /// The control stream's SETTINGS came.
    settings: bool,
}

impl FrameReader {
    /// A reader for a stream of `role`, taking frames other than DATA of up to `max`
    /// bytes of payload (unknown ones, skipped unread, have no limit).
    pub fn new(role: Role, max: u64) -> FrameReader {
        FrameReader {
            role,
            max,
            state: State::Type(varint::Reader::new()),
            buf: Vec::new(),
            settings: false,
        }
    }

    /// Reads from `input`: the bytes it took, and what they made, if anything. Call
    /// again with the bytes after those taken until it says `None`, which it does only
    /// once it has taken all of `input`. An error ends the connection: read no more.
    pub fn read<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Option<Event<'a>>), FrameError> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            match &mut self.state {
                State::Type(r) => {
                    let (n, t) = r.read(rest);
                    at += n;
                    let Some(t) = t else {
                        return Ok((at, None));
                    };
                    let kind = FrameType::from_u64(t);
                    self.check(kind)?;
                    self.state = State::Length(kind, varint::Reader::new());
                }
                State::Length(kind, r) => {
                    let kind = *kind;
                    let (n, len) = r.read(rest);
                    at += n;
                    let Some(len) = len else {
                        return Ok((at, None));
                    };
                    if let Some(e) = self.begin(kind, len)? {
                        return Ok((at, Some(e)));
                    }
                }
                State::Data(left) => {
                    if rest.is_empty() {
                        return Ok((at, None));
                    }
                    let n = rest.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    *left -= n as u64;
                    if *left == 0 {
                        self.state = State::Type(varint::Reader::new());
                    }
                    return Ok((at + n, Some(Event::DataBytes(&rest[..n]))));
                }
                State::Skip(left) => {
                    if rest.is_empty() {
                        return Ok((at, None));
                    }
                    let n = rest.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    *left -= n as u64;
                    at += n;
                    if *left == 0 {
                        self.state = State::Type(varint::Reader::new());
                    }
                }
                State::Payload(kind, len) => {
                    let (kind, len) = (*kind, *len);
                    let (n, frame) = self.payload(kind, len, rest)?;
                    at += n;
                    let Some(frame) = frame else {
                        return Ok((at, None));
                    };
                    return Ok((at, Some(Event::Frame(frame))));
                }
            }
        }
    }

    /// The stream ended cleanly: an error if that was inside a frame, or if it is the
    /// control stream (which must stay open, RFC 9114 §6.2.1).
    pub fn end(&self) -> Result<(), FrameError> {
        match (self.role, self.state) {
            (Role::Control, _) => Err(FrameError::ControlStreamClosed),
            (Role::Request, State::Type(r)) if !r.started() => Ok(()),
            (Role::Request, _) => Err(FrameError::Truncated),
        }
    }

    /// Whether a frame of `kind` may come next on this stream.
    fn check(&mut self, kind: FrameType) -> Result<(), FrameError> {
        use FrameType::*;
        match (self.role, kind) {
            (_, Http2(t)) => Err(FrameError::Http2Frame(t)),
            (Role::Control, Settings) if !self.settings => {
                self.settings = true;
                Ok(())
            }
            (Role::Control, _) if !self.settings => Err(FrameError::MissingSettings),
            (Role::Control, CancelPush | GoAway | MaxPushId | Reserved(_) | Unknown(_)) => Ok(()),
            (Role::Request, Data | Headers | Reserved(_) | Unknown(_)) => Ok(()),
            (_, kind) => Err(FrameError::Unexpected(kind)),
        }
    }

    /// A frame's header is whole: what it is said to be at once, if anything.
    fn begin(&mut self, kind: FrameType, len: u64) -> Result<Option<Event<'static>>, FrameError> {
        let next = match kind {
            FrameType::Data => {
                self.state = match len {
                    0 => State::Type(varint::Reader::new()),
                    len => State::Data(len),
                };
                return Ok(Some(Event::Data { len }));
            }
            FrameType::Reserved(t) | FrameType::Unknown(t) => {
                self.state = match len {
                    0 => State::Type(varint::Reader::new()),
                    len => State::Skip(len),
                };
                return Ok(Some(Event::Skipped { kind: t, len }));
            }
            // One integer: one to eight bytes.
            FrameType::CancelPush | FrameType::GoAway | FrameType::MaxPushId
                if len == 0 || len > 8 =>
            {
                return Err(FrameError::Malformed(kind));
            }
            _ => match usize::try_from(len) {
                Ok(n) if len <= self.max => State::Payload(kind, n),
                _ => return Err(FrameError::TooLarge { kind, len }),
            },
        };
        self.state = next;
        Ok(None)
    }

    /// Takes from `rest` what the payload of a frame of `kind` and `len` bytes still
    /// lacks: the bytes taken, and the frame once whole.
    fn payload<'a>(
        &mut self,
        kind: FrameType,
        len: usize,
        rest: &'a [u8],
    ) -> Result<(usize, Option<Frame<'a>>), FrameError> {
        if self.buf.is_empty() && rest.len() >= len {
            // All here: lent, not copied.
            self.state = State::Type(varint::Reader::new());
            return Ok((len, Some(parse(kind, Cow::Borrowed(&rest[..len]))?)));
        }
        let n = (len - self.buf.len()).min(rest.len());
        self.buf.extend_from_slice(&rest[..n]);
        if self.buf.len() < len {
            return Ok((n, None));
        }
        self.state = State::Type(varint::Reader::new());
        let payload = std::mem::take(&mut self.buf);
        Ok((n, Some(parse(kind, Cow::Owned(payload))?)))
    }
}

/// A whole payload of a frame of `kind` (one [`FrameReader::check`] let through, not
/// DATA and not skipped) as its frame.
fn parse(kind: FrameType, payload: Cow<'_, [u8]>) -> Result<Frame<'_>, FrameError> {
    let one = |p: &[u8]| match varint::read(p) {
        Some((v, n)) if n == p.len() => Ok(v),
        _ => Err(FrameError::Malformed(kind)),
    };
    match kind {
        FrameType::Headers => Ok(Frame::Headers(payload)),
        FrameType::Settings => Settings::parse(&payload).map(Frame::Settings),
        FrameType::CancelPush => one(&payload).map(Frame::CancelPush),
        FrameType::GoAway => one(&payload).map(Frame::GoAway),
        FrameType::MaxPushId => one(&payload).map(Frame::MaxPushId),
        kind => Err(FrameError::Unexpected(kind)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owned copy of an event, to compare events read in different pieces.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Got {
        Data(u64),
        Bytes(Vec<u8>),
        Headers(Vec<u8>),
        Settings(Settings),
        CancelPush(u64),
        GoAway(u64),
        MaxPushId(u64),
        Skipped(u64, u64),
    }

    fn got(e: Event<'_>) -> Got {
        match e {
            Event::Data { len } => Got::Data(len),
            Event::DataBytes(b) => Got::Bytes(b.to_vec()),
            Event::Frame(Frame::Headers(h)) => Got::Headers(h.into_owned()),
            Event::Frame(Frame::Settings(s)) => Got::Settings(s),
            Event::Frame(Frame::CancelPush(v)) => Got::CancelPush(v),
            Event::Frame(Frame::GoAway(v)) => Got::GoAway(v),
            Event::Frame(Frame::MaxPushId(v)) => Got::MaxPushId(v),
            Event::Skipped { kind, len } => Got::Skipped(kind, len),
        }
    }

    /// Reads `input` in pieces of `piece` bytes: the events, body bytes joined, or the
    /// first error.
    fn read_all(r: &mut FrameReader, input: &[u8], piece: usize) -> Result<Vec<Got>, FrameError> {
        let mut out: Vec<Got> = Vec::new();
        for chunk in input.chunks(piece.max(1)) {
            let mut at = 0;
            loop {
                let (n, e) = r.read(&chunk[at..])?;
                at += n;
                let Some(e) = e else {
                    assert_eq!(at, chunk.len(), "None only once all is taken");
                    break;
                };
                match (got(e), out.last_mut()) {
                    (Got::Bytes(b), Some(Got::Bytes(last))) => last.extend(b),
                    (g, _) => out.push(g),
                }
            }
        }
        Ok(out)
    }

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint::write(&mut out, kind).unwrap();
        varint::write(&mut out, payload.len() as u64).unwrap();
        out.extend_from_slice(payload);
        out
    }

    fn settings_frame(pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut p = Vec::new();
        for &(id, v) in pairs {
            varint::write(&mut p, id).unwrap();
            varint::write(&mut p, v).unwrap();
        }
        frame(0x4, &p)
    }

    fn control(input: &[u8], piece: usize) -> Result<Vec<Got>, FrameError> {
        read_all(&mut FrameReader::new(Role::Control, 1024), input, piece)
    }

    fn request(input: &[u8], piece: usize) -> Result<Vec<Got>, FrameError> {
        read_all(&mut FrameReader::new(Role::Request, 1024), input, piece)
    }

    /// A request stream: HEADERS, a reserved frame, DATA in two frames (one empty), an
    /// unknown frame, trailers. The same events whatever the pieces, one byte at a time
    /// too.
    #[test]
    fn a_request_stream_reads_the_same_in_pieces_of_any_size() {
        let mut input = frame(0x1, b"\x00\x00\xd1");
        input.extend(frame(0x21, b"grease"));
        input.extend(frame(0x0, &[7u8; 300]));
        input.extend(frame(0x0, b""));
        input.extend(frame(0x1f * 1000 + 0x22, &[1, 2, 3]));
        input.extend(frame(0x1, b"\x00\x00"));
        let want = vec![
            Got::Headers(b"\x00\x00\xd1".to_vec()),
            Got::Skipped(0x21, 6),
            Got::Data(300),
            Got::Bytes(vec![7; 300]),
            Got::Data(0),
            Got::Skipped(0x1f * 1000 + 0x22, 3),
            Got::Headers(b"\x00\x00".to_vec()),
        ];
        for piece in [1, 2, 3, 7, 64, 1000] {
            let mut r = FrameReader::new(Role::Request, 1024);
            assert_eq!(read_all(&mut r, &input, piece), Ok(want.clone()), "{piece}");
            assert_eq!(r.end(), Ok(()));
        }
    }

    /// A frame that came whole is lent from the input; one that came in pieces is
    /// gathered.
    #[test]
    fn a_whole_frame_is_lent_and_a_cut_one_gathered() {
        let input = frame(0x1, b"\x00\x00\xd1\xd7");
        let mut r = FrameReader::new(Role::Request, 1024);
        let (n, e) = r.read(&input).unwrap();
        assert_eq!(n, input.len());
        assert!(matches!(
            e,
            Some(Event::Frame(Frame::Headers(Cow::Borrowed(_))))
        ));
        let (n, e) = r.read(&input[..3]).unwrap();
        assert_eq!((n, e), (3, None));
        let (n, e) = r.read(&input[3..]).unwrap();
        assert_eq!(n, input.len() - 3);
        assert!(matches!(
            e,
            Some(Event::Frame(Frame::Headers(Cow::Owned(_))))
        ));
    }

    #[test]
    fn a_control_stream_reads_settings_then_control_frames() {
        let mut input = settings_frame(&[(0x1, 0), (0x6, 16384), (0x7, 0), (0x21, 9), (0x33, 1)]);
        input.extend(frame(0xd, &[0x05]));
        input.extend(frame(0x7, &[0x40, 0x08]));
        input.extend(frame(0x3, &[0x00]));
        input.extend(frame(0x40, b""));
        let want = vec![
            Got::Settings(Settings {
                qpack_max_table_capacity: 0,
                max_field_section_size: Some(16384),
                qpack_blocked_streams: 0,
            }),
            Got::MaxPushId(5),
            Got::GoAway(8),
            Got::CancelPush(0),
            Got::Skipped(0x40, 0),
        ];
        for piece in [1, 2, 5, 100] {
            assert_eq!(control(&input, piece), Ok(want.clone()), "{piece}");
        }
        let r = FrameReader::new(Role::Control, 1024);
        assert_eq!(r.end(), Err(FrameError::ControlStreamClosed));
        assert_eq!(
            FrameError::ControlStreamClosed.code(),
            ErrorCode::ClosedCriticalStream
        );
    }

    /// The control stream's first frame is SETTINGS, even before a reserved one, and
    /// SETTINGS comes once.
    #[test]
    fn the_control_stream_begins_with_settings_once() {
        for first in [frame(0x7, &[0]), frame(0x21, b""), frame(0xd, &[1])] {
            let e = control(&first, 1).unwrap_err();
            assert_eq!(e, FrameError::MissingSettings);
            assert_eq!(e.code(), ErrorCode::MissingSettings);
        }
        let mut twice = settings_frame(&[]);
        twice.extend(settings_frame(&[]));
        let e = control(&twice, 3).unwrap_err();
        assert_eq!(e, FrameError::Unexpected(FrameType::Settings));
        assert_eq!(e.code(), ErrorCode::FrameUnexpected);
    }

    /// DATA, HEADERS and PUSH_PROMISE on the control stream, control frames and
    /// PUSH_PROMISE on a request stream: H3_FRAME_UNEXPECTED.
    #[test]
    fn frames_off_their_stream_are_unexpected() {
        for kind in [0x0, 0x1, 0x5] {
            let mut input = settings_frame(&[]);
            input.extend(frame(kind, &[0, 0]));
            let e = control(&input, 1).unwrap_err();
            assert_eq!(e, FrameError::Unexpected(FrameType::from_u64(kind)));
            assert_eq!(e.code(), ErrorCode::FrameUnexpected);
        }
        for kind in [0x3, 0x4, 0x5, 0x7, 0xd] {
            let e = request(&frame(kind, &[0]), 1).unwrap_err();
            assert_eq!(e, FrameError::Unexpected(FrameType::from_u64(kind)));
            assert_eq!(e.code(), ErrorCode::FrameUnexpected);
        }
    }

    /// HTTP/2's PRIORITY, PING, WINDOW_UPDATE and CONTINUATION: H3_FRAME_UNEXPECTED on
    /// any stream, known from the type alone.
    #[test]
    fn http2_frame_types_are_unexpected_anywhere() {
        for kind in [0x2, 0x6, 0x8, 0x9] {
            let e = request(&[kind as u8], 1).unwrap_err();
            assert_eq!(e, FrameError::Http2Frame(kind));
            assert_eq!(e.code(), ErrorCode::FrameUnexpected);
            let mut input = settings_frame(&[]);
            input.extend(frame(kind, &[0; 4]));
            assert_eq!(control(&input, 2), Err(FrameError::Http2Frame(kind)));
        }
    }

    /// A HEADERS or SETTINGS past the limit is refused from its header, before its
    /// payload comes; DATA and skipped frames have no limit.
    #[test]
    fn frames_past_the_limit_are_excessive_load() {
        let mut header = Vec::new();
        write_headers_header(&mut header, 1025).unwrap();
        let e = request(&header, 1).unwrap_err();
        assert_eq!(
            e,
            FrameError::TooLarge {
                kind: FrameType::Headers,
                len: 1025
            }
        );
        assert_eq!(e.code(), ErrorCode::ExcessiveLoad);
        assert!(request(&frame(0x1, &[0; 1024]), 100).is_ok());
        let big = settings_frame(&[(0x21, 0); 600]);
        assert!(matches!(
            control(&big, 7),
            Err(FrameError::TooLarge {
                kind: FrameType::Settings,
                ..
            })
        ));
        assert!(request(&frame(0x0, &[0; 5000]), 999).is_ok());
        assert!(request(&frame(0x21, &[0; 5000]), 999).is_ok());
    }

    /// A frame of one integer whose payload holds more or less: H3_FRAME_ERROR.
    #[test]
    fn payloads_their_fields_do_not_fill_are_frame_errors() {
        for kind in [0x3, 0x7, 0xd] {
            for payload in [&[][..], &[0x40], &[0x05, 0x00], &[0; 9]] {
                let mut input = settings_frame(&[]);
                input.extend(frame(kind, payload));
                let e = control(&input, 1).unwrap_err();
                assert_eq!(e, FrameError::Malformed(FrameType::from_u64(kind)));
                assert_eq!(e.code(), ErrorCode::FrameError);
            }
        }
        // A setting without its value.
        let e = control(&frame(0x4, &[0x06]), 1).unwrap_err();
        assert_eq!(e, FrameError::Malformed(FrameType::Settings));
        assert_eq!(e.code(), ErrorCode::FrameError);
        // A value cut short.
        let e = control(&frame(0x4, &[0x06, 0x80, 0x00]), 1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::FrameError);
    }

    /// A request stream that ends inside a frame, even inside its type: H3_FRAME_ERROR.
    #[test]
    fn a_stream_ending_inside_a_frame_is_truncated() {
        let input = frame(0x0, &[1, 2, 3]);
        for cut in 1..input.len() {
            let mut r = FrameReader::new(Role::Request, 1024);
            read_all(&mut r, &input[..cut], 1).unwrap();
            assert_eq!(r.end(), Err(FrameError::Truncated), "cut at {cut}");
            assert_eq!(FrameError::Truncated.code(), ErrorCode::FrameError);
        }
        let mut r = FrameReader::new(Role::Request, 1024);
        read_all(&mut r, &[0x40], 1).unwrap();
        assert_eq!(r.end(), Err(FrameError::Truncated), "in a two-byte type");
    }

    #[test]
    fn settings_twice_or_from_http2_are_settings_errors() {
        for pairs in [
            &[(0x6, 1), (0x6, 2)][..],
            &[(0x1, 0), (0x7, 0), (0x1, 0)],
            &[(0x21, 0), (0x21, 1)],
        ] {
            let e = Settings::parse(&settings_frame(pairs)[2..]).unwrap_err();
            assert!(matches!(e, FrameError::DuplicateSetting(_)), "{pairs:?}");
            assert_eq!(e.code(), ErrorCode::SettingsError);
        }
        for id in 0x2..=0x5 {
            let e = Settings::parse(&settings_frame(&[(0x6, 1), (id, 0)])[2..]).unwrap_err();
            assert_eq!(e, FrameError::Http2Setting(id));
            assert_eq!(e.code(), ErrorCode::SettingsError);
        }
        // Unknown and reserved identifiers are ignored; 0x0 too (reserved, but not one
        // of HTTP/2's).
        let s = Settings::parse(&settings_frame(&[(0x0, 1), (0x8, 1), (0x21 + 0x1f * 7, 3)])[2..]);
        assert_eq!(s, Ok(Settings::default()));
    }

    /// The server's frames, byte for byte, and read back.
    #[test]
    fn the_server_frames_are_written_as_the_rfc_lays_them_out() {
        let mut out = Vec::new();
        write_headers_header(&mut out, 37).unwrap();
        write_data_header(&mut out, 16384).unwrap();
        write_goaway(&mut out, 4 * 1000).unwrap();
        assert_eq!(
            out,
            [0x01, 37, 0x00, 0x80, 0x00, 0x40, 0x00, 0x07, 0x02, 0x4f, 0xa0]
        );
        let mut s = Vec::new();
        let settings = ServerSettings {
            max_field_section_size: 16384,
            grease: Some((0x21 + 0x1f, 7)),
        };
        write_settings(&mut s, &settings).unwrap();
        assert_eq!(
            s,
            [0x04, 0x0c, 0x01, 0x00, 0x06, 0x80, 0x00, 0x40, 0x00, 0x07, 0x00, 0x40, 0x40, 0x07]
        );
        assert_eq!(
            control(&s, 1),
            Ok(vec![Got::Settings(Settings {
                max_field_section_size: Some(16384),
                ..Settings::default()
            })])
        );
        assert_eq!(
            write_data_header(&mut Vec::new(), varint::MAX + 1),
            Err(TooLarge(varint::MAX + 1))
        );
    }

    #[test]
    fn frame_types_are_numbered_as_in_rfc_9114() {
        for (t, kind) in [
            (0x0, FrameType::Data),
            (0x1, FrameType::Headers),
            (0x3, FrameType::CancelPush),
            (0x4, FrameType::Settings),
            (0x5, FrameType::PushPromise),
            (0x7, FrameType::GoAway),
            (0xd, FrameType::MaxPushId),
            (0x2, FrameType::Http2(0x2)),
            (0x9, FrameType::Http2(0x9)),
            (0x21, FrameType::Reserved(0x21)),
            (0x40, FrameType::Reserved(0x40)),
            (
                0x3fff_ffff_ffff_fffe,
                FrameType::Reserved(0x3fff_ffff_ffff_fffe),
            ),
            (0xa, FrameType::Unknown(0xa)),
            (0x22, FrameType::Unknown(0x22)),
        ] {
            assert_eq!(FrameType::from_u64(t), kind);
            assert_eq!(kind.as_u64(), t);
        }
    }

    proptest::proptest! {
        /// Frames of any kind a request stream takes, cut into pieces anywhere, read to
        /// the same events as whole.
        #[test]
        fn frames_read_the_same_however_cut(
            frames in proptest::collection::vec(
                (proptest::sample::select(vec![0x0u64, 0x1, 0x21, 0x1f * 3 + 0x21, 0x17, 0x4000]),
                 proptest::collection::vec(proptest::num::u8::ANY, 0..200)),
                0..8),
            piece in 1usize..50,
        ) {
            let mut input = Vec::new();
            for (kind, payload) in &frames {
                input.extend(frame(*kind, payload));
            }
            let whole = request(&input, input.len().max(1)).unwrap();
            proptest::prop_assert_eq!(request(&input, piece).unwrap(), whole);
        }
    }
}
