//! Why an HTTP/2 connection ended with an error (RFC 9113 §5.4.1): the client broke
//! the protocol, or flooded it; typed, so tests match the reason and the log says it.

use std::fmt;

/// A connection error's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// Not the HTTP/2 preface.
    NotThePreface,
    /// A frame over SETTINGS_MAX_FRAME_SIZE.
    FrameTooLarge,
    /// The preface's SETTINGS missing.
    NoSettingsAfterPreface,
    /// A field block interrupted.
    FieldBlockInterrupted,
    /// A flood of frames that bring no request.
    FloodOfEmptyFrames,
    /// PUSH_PROMISE from a client.
    PushPromiseFromClient,
    /// A frame on an idle stream.
    FrameOnIdleStream,
    /// No pad length.
    NoPadLength,
    /// Padding longer than the frame.
    PaddingTooLong,
    /// DATA on stream 0.
    DataOnStream0,
    /// DATA beyond the connection's window.
    DataBeyondWindow,
    /// HEADERS on a stream a client cannot open.
    HeadersOnServerStream,
    /// HEADERS too short for its priority.
    HeadersTooShortForPriority,
    /// CONTINUATION with no field block.
    StrayContinuation,
    /// A field block too large.
    FieldBlockTooLarge,
    /// A field block that does not decode.
    FieldBlockUndecodable,
    /// HEADERS on a closed stream.
    HeadersOnClosedStream,
    /// A stream id lower than one opened.
    StreamIdTooLow,
    /// PRIORITY on stream 0.
    PriorityOnStream0,
    /// PRIORITY_UPDATE on a stream.
    PriorityUpdateOnStream,
    /// PRIORITY_UPDATE too short.
    PriorityUpdateTooShort,
    /// RST_STREAM on stream 0.
    RstStreamOnStream0,
    /// RST_STREAM of a wrong length.
    RstStreamWrongLength,
    /// Rapid reset.
    RapidReset,
    /// SETTINGS on a stream.
    SettingsOnStream,
    /// A SETTINGS acknowledgement with a payload.
    SettingsAckWithPayload,
    /// SETTINGS of a wrong length.
    SettingsWrongLength,
    /// ENABLE_PUSH neither 0 nor 1.
    BadEnablePush,
    /// INITIAL_WINDOW_SIZE over 2^31-1.
    InitialWindowTooLarge,
    /// A stream window over 2^31-1.
    StreamWindowOverflow,
    /// MAX_FRAME_SIZE out of range.
    MaxFrameSizeOutOfRange,
    /// PING on a stream.
    PingOnStream,
    /// PING of a wrong length.
    PingWrongLength,
    /// GOAWAY on a stream.
    GoawayOnStream,
    /// GOAWAY too short.
    GoawayTooShort,
    /// WINDOW_UPDATE of a wrong length.
    WindowUpdateWrongLength,
    /// A WINDOW_UPDATE of 0.
    WindowUpdateOfZero,
    /// The connection's window over 2^31-1.
    ConnectionWindowOverflow,
}

impl Violation {
    /// What the log says.
    pub fn as_str(self) -> &'static str {
        match self {
            Violation::NotThePreface => "not the HTTP/2 preface",
            Violation::FrameTooLarge => "a frame over SETTINGS_MAX_FRAME_SIZE",
            Violation::NoSettingsAfterPreface => "the preface's SETTINGS missing",
            Violation::FieldBlockInterrupted => "a field block interrupted",
            Violation::FloodOfEmptyFrames => "a flood of frames that bring no request",
            Violation::PushPromiseFromClient => "PUSH_PROMISE from a client",
            Violation::FrameOnIdleStream => "a frame on an idle stream",
            Violation::NoPadLength => "no pad length",
            Violation::PaddingTooLong => "padding longer than the frame",
            Violation::DataOnStream0 => "DATA on stream 0",
            Violation::DataBeyondWindow => "DATA beyond the connection's window",
            Violation::HeadersOnServerStream => "HEADERS on a stream a client cannot open",
            Violation::HeadersTooShortForPriority => "HEADERS too short for its priority",
            Violation::StrayContinuation => "CONTINUATION with no field block",
            Violation::FieldBlockTooLarge => "a field block too large",
            Violation::FieldBlockUndecodable => "a field block that does not decode",
            Violation::HeadersOnClosedStream => "HEADERS on a closed stream",
            Violation::StreamIdTooLow => "a stream id lower than one opened",
            Violation::PriorityOnStream0 => "PRIORITY on stream 0",
            Violation::PriorityUpdateOnStream => "PRIORITY_UPDATE on a stream",
            Violation::PriorityUpdateTooShort => "PRIORITY_UPDATE too short",
            Violation::RstStreamOnStream0 => "RST_STREAM on stream 0",
            Violation::RstStreamWrongLength => "RST_STREAM of a wrong length",
            Violation::RapidReset => "rapid reset",
            Violation::SettingsOnStream => "SETTINGS on a stream",
            Violation::SettingsAckWithPayload => "a SETTINGS acknowledgement with a payload",
            Violation::SettingsWrongLength => "SETTINGS of a wrong length",
            Violation::BadEnablePush => "ENABLE_PUSH neither 0 nor 1",
            Violation::InitialWindowTooLarge => "INITIAL_WINDOW_SIZE over 2^31-1",
            Violation::StreamWindowOverflow => "a stream window over 2^31-1",
            Violation::MaxFrameSizeOutOfRange => "MAX_FRAME_SIZE out of range",
            Violation::PingOnStream => "PING on a stream",
            Violation::PingWrongLength => "PING of a wrong length",
            Violation::GoawayOnStream => "GOAWAY on a stream",
            Violation::GoawayTooShort => "GOAWAY too short",
            Violation::WindowUpdateWrongLength => "WINDOW_UPDATE of a wrong length",
            Violation::WindowUpdateOfZero => "a WINDOW_UPDATE of 0",
            Violation::ConnectionWindowOverflow => "the connection's window over 2^31-1",
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
