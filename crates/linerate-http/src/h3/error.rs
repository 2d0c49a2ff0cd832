//! HTTP/3's error codes (RFC 9114 §8.1) and QPACK's (RFC 9204 §6), one type for both:
//! QUIC carries either in a stream reset or a connection close, and the caller only
//! needs the number to send and, for its logs, the name. Each says too where the RFCs
//! use it: to end the connection, to reset a stream, or either.

/// Where an error code is used: what the caller ends when it sends one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The whole connection (CONNECTION_CLOSE).
    Connection,
    /// One stream (RESET_STREAM, STOP_SENDING).
    Stream,
    /// Either, as the case is.
    Either,
}

/// An HTTP/3 or QPACK error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// H3_NO_ERROR (0x100): no error, the stream or connection is closed all the same.
    NoError,
    /// H3_GENERAL_PROTOCOL_ERROR (0x101): a violation no other code names.
    GeneralProtocolError,
    /// H3_INTERNAL_ERROR (0x102): an error in this HTTP stack.
    InternalError,
    /// H3_STREAM_CREATION_ERROR (0x103): a stream this side does not accept (a second
    /// control stream, a push stream from a client).
    StreamCreationError,
    /// H3_CLOSED_CRITICAL_STREAM (0x104): a control or QPACK stream was closed.
    ClosedCriticalStream,
    /// H3_FRAME_UNEXPECTED (0x105): a frame not allowed on its stream, or there.
    FrameUnexpected,
    /// H3_FRAME_ERROR (0x106): a frame whose layout or size is wrong.
    FrameError,
    /// H3_EXCESSIVE_LOAD (0x107): the peer asks for more work than is reasonable.
    ExcessiveLoad,
    /// H3_ID_ERROR (0x108): a stream or push id used wrongly.
    IdError,
    /// H3_SETTINGS_ERROR (0x109): an error in a SETTINGS frame's payload.
    SettingsError,
    /// H3_MISSING_SETTINGS (0x10a): the control stream did not begin with SETTINGS.
    MissingSettings,
    /// H3_REQUEST_REJECTED (0x10b): a request refused before any work on it.
    RequestRejected,
    /// H3_REQUEST_CANCELLED (0x10c): a request or its response no longer wanted.
    RequestCancelled,
    /// H3_REQUEST_INCOMPLETE (0x10d): the request stream ended before the request did.
    RequestIncomplete,
    /// H3_MESSAGE_ERROR (0x10e): a malformed request or response.
    MessageError,
    /// H3_CONNECT_ERROR (0x10f): a CONNECT tunnel's TCP connection failed.
    ConnectError,
    /// H3_VERSION_FALLBACK (0x110): the request cannot be served over HTTP/3.
    VersionFallback,
    /// QPACK_DECOMPRESSION_FAILED (0x200): a field section that does not decode.
    QpackDecompressionFailed,
    /// QPACK_ENCODER_STREAM_ERROR (0x201): an instruction on the encoder stream that
    /// does not hold.
    QpackEncoderStreamError,
    /// QPACK_DECODER_STREAM_ERROR (0x202): an instruction on the decoder stream that
    /// does not hold.
    QpackDecoderStreamError,
    /// A code this side does not know (a peer may send any; it means H3_NO_ERROR, RFC
    /// 9114 §9), reserved ones ([`super::reserved`]) among them.
    Other(u64),
}

impl ErrorCode {
    /// The code with the number `c`.
    pub fn from_u64(c: u64) -> ErrorCode {
        use ErrorCode::*;
        match c {
            0x100 => NoError,
            0x101 => GeneralProtocolError,
            0x102 => InternalError,
            0x103 => StreamCreationError,
            0x104 => ClosedCriticalStream,
            0x105 => FrameUnexpected,
            0x106 => FrameError,
            0x107 => ExcessiveLoad,
            0x108 => IdError,
            0x109 => SettingsError,
            0x10a => MissingSettings,
            0x10b => RequestRejected,
            0x10c => RequestCancelled,
            0x10d => RequestIncomplete,
            0x10e => MessageError,
            0x10f => ConnectError,
            0x110 => VersionFallback,
            0x200 => QpackDecompressionFailed,
            0x201 => QpackEncoderStreamError,
            0x202 => QpackDecoderStreamError,
            c => Other(c),
        }
    }

    /// The number sent.
    pub fn as_u64(self) -> u64 {
        use ErrorCode::*;
        match self {
            NoError => 0x100,
            GeneralProtocolError => 0x101,
            InternalError => 0x102,
            StreamCreationError => 0x103,
            ClosedCriticalStream => 0x104,
            FrameUnexpected => 0x105,
            FrameError => 0x106,
            ExcessiveLoad => 0x107,
            IdError => 0x108,
            SettingsError => 0x109,
            MissingSettings => 0x10a,
            RequestRejected => 0x10b,
            RequestCancelled => 0x10c,
            RequestIncomplete => 0x10d,
            MessageError => 0x10e,
            ConnectError => 0x10f,
            VersionFallback => 0x110,
            QpackDecompressionFailed => 0x200,
            QpackEncoderStreamError => 0x201,
            QpackDecoderStreamError => 0x202,
            Other(c) => c,
        }
    }

    /// The name the RFCs give it (for logs).
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            NoError => "H3_NO_ERROR",
            GeneralProtocolError => "H3_GENERAL_PROTOCOL_ERROR",
            InternalError => "H3_INTERNAL_ERROR",
            StreamCreationError => "H3_STREAM_CREATION_ERROR",
            ClosedCriticalStream => "H3_CLOSED_CRITICAL_STREAM",
            FrameUnexpected => "H3_FRAME_UNEXPECTED",
            FrameError => "H3_FRAME_ERROR",
            ExcessiveLoad => "H3_EXCESSIVE_LOAD",
            IdError => "H3_ID_ERROR",
            SettingsError => "H3_SETTINGS_ERROR",
            MissingSettings => "H3_MISSING_SETTINGS",
            RequestRejected => "H3_REQUEST_REJECTED",
            RequestCancelled => "H3_REQUEST_CANCELLED",
            RequestIncomplete => "H3_REQUEST_INCOMPLETE",
            MessageError => "H3_MESSAGE_ERROR",
            ConnectError => "H3_CONNECT_ERROR",
            VersionFallback => "H3_VERSION_FALLBACK",
            QpackDecompressionFailed => "QPACK_DECOMPRESSION_FAILED",
            QpackEncoderStreamError => "QPACK_ENCODER_STREAM_ERROR",
            QpackDecoderStreamError => "QPACK_DECODER_STREAM_ERROR",
            Other(_) => "unknown",
        }
    }

    /// Where the RFCs use it. Every frame, SETTINGS and QPACK stream error ends the
    /// connection; a request's own troubles reset its stream; the rest may do either.
    /// (QPACK_DECOMPRESSION_FAILED is a stream error only for a value past what an
    /// implementation decodes, RFC 9204 §7.4; this server never needs that case.)
    pub fn scope(self) -> Scope {
        use ErrorCode::*;
        match self {
            ClosedCriticalStream
            | FrameUnexpected
            | FrameError
            | ExcessiveLoad
            | IdError
            | SettingsError
            | MissingSettings
            | QpackDecompressionFailed
            | QpackEncoderStreamError
            | QpackDecoderStreamError => Scope::Connection,
            RequestRejected | RequestCancelled | RequestIncomplete | MessageError
            | ConnectError | VersionFallback => Scope::Stream,
            NoError | GeneralProtocolError | InternalError | StreamCreationError | Other(_) => {
                Scope::Either
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code's number, from RFC 9114 §8.1 and RFC 9204 §6, both ways.
    #[test]
    fn each_code_has_its_rfc_number() {
        use ErrorCode::*;
        let codes = [
            (NoError, 0x100),
            (GeneralProtocolError, 0x101),
            (InternalError, 0x102),
            (StreamCreationError, 0x103),
            (ClosedCriticalStream, 0x104),
            (FrameUnexpected, 0x105),
            (FrameError, 0x106),
            (ExcessiveLoad, 0x107),
            (IdError, 0x108),
            (SettingsError, 0x109),
            (MissingSettings, 0x10a),
            (RequestRejected, 0x10b),
            (RequestCancelled, 0x10c),
            (RequestIncomplete, 0x10d),
            (MessageError, 0x10e),
            (ConnectError, 0x10f),
            (VersionFallback, 0x110),
            (QpackDecompressionFailed, 0x200),
            (QpackEncoderStreamError, 0x201),
            (QpackDecoderStreamError, 0x202),
        ];
        for (code, n) in codes {
            assert_eq!(code.as_u64(), n, "{}", code.name());
            assert_eq!(ErrorCode::from_u64(n), code);
            assert_ne!(code.name(), "unknown");
        }
        for n in [0, 0x111, 0x203, 0x21, 0x1f * 9 + 0x21] {
            assert_eq!(ErrorCode::from_u64(n), Other(n));
            assert_eq!(Other(n).as_u64(), n);
        }
    }

    #[test]
    fn frame_and_qpack_errors_end_the_connection_and_message_errors_a_stream() {
        assert_eq!(ErrorCode::FrameUnexpected.scope(), Scope::Connection);
        assert_eq!(
            ErrorCode::QpackDecompressionFailed.scope(),
            Scope::Connection
        );
        assert_eq!(ErrorCode::SettingsError.scope(), Scope::Connection);
        assert_eq!(ErrorCode::MessageError.scope(), Scope::Stream);
        assert_eq!(ErrorCode::RequestRejected.scope(), Scope::Stream);
        assert_eq!(ErrorCode::NoError.scope(), Scope::Either);
    }
}
