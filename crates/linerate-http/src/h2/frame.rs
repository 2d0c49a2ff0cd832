//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte header, the frame types and flags the
//! server reads and writes, the error codes and the settings. Only layout lives here;
//! what a frame means for a stream is [`super::Connection`]'s.

/// The connection preface a client sends first (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 9;

/// The largest frame payload any peer may allow (2^24 - 1).
pub const MAX_FRAME_SIZE_LIMIT: u32 = (1 << 24) - 1;
/// The frame payload every peer must accept (and the default).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The initial flow-control window of a connection and, by default, of each stream.
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

/// Frame types (RFC 9113 §6; PRIORITY_UPDATE from RFC 9218 §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    PriorityUpdate,
    /// A type this server does not know: ignored (RFC 9113 §5.5).
    Unknown(u8),
}

impl Kind {
    pub fn from_u8(t: u8) -> Kind {
        match t {
            0 => Kind::Data,
            1 => Kind::Headers,
            2 => Kind::Priority,
            3 => Kind::RstStream,
            4 => Kind::Settings,
            5 => Kind::PushPromise,
            6 => Kind::Ping,
            7 => Kind::GoAway,
            8 => Kind::WindowUpdate,
            9 => Kind::Continuation,
            16 => Kind::PriorityUpdate,
            t => Kind::Unknown(t),
        }
    }

    pub fn as_u8(self) -> u8 {
        match self {
            Kind::Data => 0,
            Kind::Headers => 1,
            Kind::Priority => 2,
            Kind::RstStream => 3,
            Kind::Settings => 4,
            Kind::PushPromise => 5,
            Kind::Ping => 6,
            Kind::GoAway => 7,
            Kind::WindowUpdate => 8,
            Kind::Continuation => 9,
            Kind::PriorityUpdate => 16,
            Kind::Unknown(t) => t,
        }
    }
}

/// Frame flags.
pub mod flag {
    /// DATA, HEADERS: the last frame of the stream from its sender.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the last frame of a field block.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: a pad length byte leads the payload.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: five bytes of (deprecated) priority lead the field block.
    pub const PRIORITY: u8 = 0x20;
}

/// Error codes (RFC 9113 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    NoError,
    ProtocolError,
    InternalError,
    FlowControlError,
    SettingsTimeout,
    StreamClosed,
    FrameSizeError,
    RefusedStream,
    Cancel,
    CompressionError,
    ConnectError,
    EnhanceYourCalm,
    InadequateSecurity,
    Http11Required,
    /// A code this server does not know (a peer may send any).
    Other(u32),
}

impl ErrorCode {
    pub fn from_u32(c: u32) -> ErrorCode {
        use ErrorCode::*;
        match c {
            0x0 => NoError,
            0x1 => ProtocolError,
            0x2 => InternalError,
            0x3 => FlowControlError,
            0x4 => SettingsTimeout,
            0x5 => StreamClosed,
            0x6 => FrameSizeError,
            0x7 => RefusedStream,
            0x8 => Cancel,
            0x9 => CompressionError,
            0xa => ConnectError,
            0xb => EnhanceYourCalm,
            0xc => InadequateSecurity,
            0xd => Http11Required,
            c => Other(c),
        }
    }

    pub fn as_u32(self) -> u32 {
        use ErrorCode::*;
        match self {
            NoError => 0x0,
            ProtocolError => 0x1,
            InternalError => 0x2,
            FlowControlError => 0x3,
            SettingsTimeout => 0x4,
            StreamClosed => 0x5,
            FrameSizeError => 0x6,
            RefusedStream => 0x7,
            Cancel => 0x8,
            CompressionError => 0x9,
            ConnectError => 0xa,
            EnhanceYourCalm => 0xb,
            InadequateSecurity => 0xc,
            Http11Required => 0xd,
            Other(c) => c,
        }
    }

    /// The name RFC 9113 gives it (for logs).
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            NoError => "NO_ERROR",
            ProtocolError => "PROTOCOL_ERROR",
            InternalError => "INTERNAL_ERROR",
            FlowControlError => "FLOW_CONTROL_ERROR",
            SettingsTimeout => "SETTINGS_TIMEOUT",
            StreamClosed => "STREAM_CLOSED",
            FrameSizeError => "FRAME_SIZE_ERROR",
            RefusedStream => "REFUSED_STREAM",
            Cancel => "CANCEL",
            CompressionError => "COMPRESSION_ERROR",
            ConnectError => "CONNECT_ERROR",
            EnhanceYourCalm => "ENHANCE_YOUR_CALM",
            InadequateSecurity => "INADEQUATE_SECURITY",
            Http11Required => "HTTP_1_1_REQUIRED",
            Other(_) => "unknown",
        }
    }
}

/// Setting identifiers (RFC 9113 §6.5.2; RFC 9218 §2.1).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    pub const NO_RFC7540_PRIORITIES: u16 = 0x9;
}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub len: u32,
    pub kind: Kind,
    pub flags: u8,
    /// The stream (the reserved bit cleared).
    pub stream: u32,
}

impl Header {
    /// Reads a header from the first [`HEADER_LEN`] bytes of `b`.
    pub fn parse(b: &[u8; HEADER_LEN]) -> Header {
        Header {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: Kind::from_u8(b[3]),
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    /// The header's bytes.
    pub fn bytes(&self) -> [u8; HEADER_LEN] {
        let l = self.len.to_be_bytes();
        let s = self.stream.to_be_bytes();
        [
            l[1],
            l[2],
            l[3],
            self.kind.as_u8(),
            self.flags,
            s[0],
            s[1],
            s[2],
            s[3],
        ]
    }

    /// Appends the header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bytes());
    }
}

/// Appends a whole frame (header and payload) to `out`.
pub fn write(out: &mut Vec<u8>, kind: Kind, flags: u8, stream: u32, payload: &[u8]) {
    Header {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .write(out);
    out.extend_from_slice(payload);
}

/// Appends a SETTINGS frame of `(id, value)` pairs.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    let mut p = Vec::with_capacity(settings.len() * 6);
    for (id, v) in settings {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    write(out, Kind::Settings, 0, 0, &p);
}

/// Appends a GOAWAY frame.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&last_stream.to_be_bytes());
    p[4..].copy_from_slice(&code.as_u32().to_be_bytes());
    write(out, Kind::GoAway, 0, 0, &p);
}

/// Appends a RST_STREAM frame.
pub fn write_rst(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write(
        out,
        Kind::RstStream,
        0,
        stream,
        &code.as_u32().to_be_bytes(),
    );
}

/// Appends a WINDOW_UPDATE frame.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write(out, Kind::WindowUpdate, 0, stream, &increment.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_as_written_with_the_reserved_bit_cleared() {
        let h = Header {
            len: 0x12_3456,
            kind: Kind::Headers,
            flags: flag::END_HEADERS | flag::END_STREAM,
            stream: 0x7fff_fffd,
        };
        assert_eq!(Header::parse(&h.bytes()), h);
        let mut b = h.bytes();
        b[5] |= 0x80;
        assert_eq!(Header::parse(&b).stream, 0x7fff_fffd);
        assert_eq!(Kind::from_u8(0xfe), Kind::Unknown(0xfe));
        assert_eq!(ErrorCode::from_u32(0x100), ErrorCode::Other(0x100));
    }
}
