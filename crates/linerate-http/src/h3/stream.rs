//! Unidirectional streams (RFC 9114 §6.2): each begins with its type, a variable-length
//! integer, and what follows is that type's. A client opens at most one control stream,
//! one QPACK encoder stream and one QPACK decoder stream (a second is
//! H3_STREAM_CREATION_ERROR), never a push stream (only servers push); a reserved or
//! unknown type is no error: its stream is discarded, or its reading stopped with
//! H3_STREAM_CREATION_ERROR, as the caller likes (§6.2, §6.2.3).
//!
//! The server opens its own three the same way: [`write_stream_type`], and on the
//! control stream its SETTINGS ([`super::frame::write_settings`]). Its QPACK streams
//! carry nothing more: its encoder uses no dynamic table, and its decoder allows none
//! (see [`super::qpack`]).

use super::error::ErrorCode;
use super::reserved;
use super::varint::{self, TooLarge};

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamType {
    /// 0x00: the control stream, frames beginning with SETTINGS.
    Control,
    /// 0x01: a push stream (a server's only).
    Push,
    /// 0x02: the QPACK encoder stream, the sender's encoder instructions.
    QpackEncoder,
    /// 0x03: the QPACK decoder stream, the sender's decoder instructions.
    QpackDecoder,
    /// A reserved type (`0x1f * N + 0x21`, [`super::reserved`]): no meaning.
    Reserved(u64),
    /// A type this side does not know.
    Unknown(u64),
}

impl StreamType {
    /// The type numbered `t`.
    pub fn from_u64(t: u64) -> StreamType {
        match t {
            0x00 => StreamType::Control,
            0x01 => StreamType::Push,
            0x02 => StreamType::QpackEncoder,
            0x03 => StreamType::QpackDecoder,
            t if reserved(t) => StreamType::Reserved(t),
            t => StreamType::Unknown(t),
        }
    }

    /// Its number.
    pub fn as_u64(self) -> u64 {
        match self {
            StreamType::Control => 0x00,
            StreamType::Push => 0x01,
            StreamType::QpackEncoder => 0x02,
            StreamType::QpackDecoder => 0x03,
            StreamType::Reserved(t) | StreamType::Unknown(t) => t,
        }
    }
}

/// Appends a unidirectional stream's type, its first bytes.
pub fn write_stream_type(out: &mut Vec<u8>, t: StreamType) -> Result<(), TooLarge> {
    varint::write(out, t.as_u64())
}

/// Reads the type at the start of a unidirectional stream, from bytes that come in
/// pieces of any size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamTypeReader(varint::Reader);

impl StreamTypeReader {
    /// A reader with no byte yet.
    pub fn new() -> StreamTypeReader {
        StreamTypeReader::default()
    }

    /// Takes from `input` the bytes of the type: how many it took (what follows is the
    /// stream's content), and the type once whole.
    pub fn read(&mut self, input: &[u8]) -> (usize, Option<StreamType>) {
        let (n, t) = self.0.read(input);
        (n, t.map(StreamType::from_u64))
    }
}

/// Why a client's unidirectional stream was refused: H3_STREAM_CREATION_ERROR, which
/// ends the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// A push stream: only servers push.
    PushFromClient,
    /// A second stream of a type there is one of.
    Second(StreamType),
}

impl StreamError {
    /// The error code the connection is closed with.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::StreamCreationError
    }
}

/// What to do with a client's unidirectional stream, by its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accept {
    /// Read it: the control stream, or a QPACK stream.
    Read(StreamType),
    /// Discard it, or stop reading it with H3_STREAM_CREATION_ERROR: a reserved or
    /// unknown type.
    Ignore,
}

/// The client's critical streams, each of which it opens at most once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerStreams {
    control: bool,
    encoder: bool,
    decoder: bool,
}

impl PeerStreams {
    /// None opened yet.
    pub fn new() -> PeerStreams {
        PeerStreams::default()
    }

    /// The client opened a stream of type `t`: read it, ignore it, or end the
    /// connection.
    pub fn open(&mut self, t: StreamType) -> Result<Accept, StreamError> {
        let seen = match t {
            StreamType::Control => &mut self.control,
            StreamType::QpackEncoder => &mut self.encoder,
            StreamType::QpackDecoder => &mut self.decoder,
            StreamType::Push => return Err(StreamError::PushFromClient),
            StreamType::Reserved(_) | StreamType::Unknown(_) => return Ok(Accept::Ignore),
        };
        if std::mem::replace(seen, true) {
            return Err(StreamError::Second(t));
        }
        Ok(Accept::Read(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_types_are_numbered_as_in_the_rfcs() {
        for (t, kind) in [
            (0x00, StreamType::Control),
            (0x01, StreamType::Push),
            (0x02, StreamType::QpackEncoder),
            (0x03, StreamType::QpackDecoder),
            (0x21, StreamType::Reserved(0x21)),
            (0x1f * 5 + 0x21, StreamType::Reserved(0x1f * 5 + 0x21)),
            (0x04, StreamType::Unknown(0x04)),
            (0x54, StreamType::Unknown(0x54)),
        ] {
            assert_eq!(StreamType::from_u64(t), kind);
            assert_eq!(kind.as_u64(), t);
            let mut out = Vec::new();
            write_stream_type(&mut out, kind).unwrap();
            assert_eq!(varint::read(&out), Some((t, out.len())));
        }
    }

    /// The type, one byte at a time, then the stream's content left in the input.
    #[test]
    fn the_type_is_read_in_pieces_and_the_rest_left() {
        let mut r = StreamTypeReader::new();
        assert_eq!(r.read(&[0x40]), (1, None));
        assert_eq!(r.read(&[0x21, 0xaa]), (1, Some(StreamType::Reserved(0x21))));
        let mut r = StreamTypeReader::new();
        assert_eq!(r.read(&[]), (0, None));
        assert_eq!(r.read(&[0x00, 0x04, 0x00]), (1, Some(StreamType::Control)));
    }

    /// One of each critical stream; a second, or a push stream, is
    /// H3_STREAM_CREATION_ERROR; reserved and unknown ones are ignored, as many as come.
    #[test]
    fn a_client_opens_each_critical_stream_once_and_no_push_stream() {
        let mut p = PeerStreams::new();
        for t in [
            StreamType::Control,
            StreamType::QpackEncoder,
            StreamType::QpackDecoder,
        ] {
            assert_eq!(p.open(t), Ok(Accept::Read(t)));
        }
        for t in [StreamType::Reserved(0x21), StreamType::Unknown(0x54)] {
            assert_eq!(p.open(t), Ok(Accept::Ignore));
            assert_eq!(p.open(t), Ok(Accept::Ignore));
        }
        for t in [
            StreamType::Control,
            StreamType::QpackEncoder,
            StreamType::QpackDecoder,
        ] {
            let e = p.open(t).unwrap_err();
            assert_eq!(e, StreamError::Second(t));
            assert_eq!(e.code(), ErrorCode::StreamCreationError);
        }
        let e = PeerStreams::new().open(StreamType::Push).unwrap_err();
        assert_eq!(e, StreamError::PushFromClient);
        assert_eq!(e.code(), ErrorCode::StreamCreationError);
    }
}
