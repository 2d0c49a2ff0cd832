//! Why a request is refused, typed: each reason with the status it is answered with
//! and the words the log says. Tests match the reason; the log reads
//! [`Refusal::as_str`].

use std::fmt;

use crate::Status;

/// Why a request head was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Only empty lines, more than a request may lead with.
    EmptyLines,
    /// Bytes that do not start a request line.
    NotHttp,
    /// A line ended by LF alone.
    BareLf,
    /// A request line longer than the limit (414).
    RequestLineTooLong,
    /// A head `httparse` could not read.
    MalformedHead,
    /// More fields than the limit (431).
    TooManyFields,
    /// A head of more bytes than the limit (431).
    HeadTooLarge,
    /// A chunked body that does not parse.
    BadChunkedBody,
    /// A version other than HTTP/1.0 and HTTP/1.1.
    BadVersion,
    /// A method the server does not know (501).
    UnknownMethod,
    /// `*` as the target of a method other than OPTIONS.
    AsteriskOutsideOptions,
    /// A target that is no path, absolute URI or `*`.
    BadTarget,
    /// An absolute URI whose authority is not one.
    BadAuthorityInTarget,
    /// A field value with a byte past ASCII.
    NonAsciiValue,
    /// Two `Content-Length` values.
    DuplicateContentLength,
    /// A `Content-Length` that is no number.
    BadContentLength,
    /// A `Transfer-Encoding` that does not parse.
    BadTransferEncoding,
    /// An HTTP/1.1 request without `Host`.
    NoHost,
    /// More than one `Host`.
    MoreThanOneHost,
    /// A `Host` that is not one.
    InvalidHost,
    /// Both `Content-Length` and `Transfer-Encoding` (a smuggling attempt, maybe).
    LengthWithTransferEncoding,
    /// `Transfer-Encoding` in an HTTP/1.0 request.
    TransferEncodingIn10,
    /// A transfer coding other than chunked (501).
    UnsupportedCoding,
    /// `chunked` applied twice.
    ChunkedTwice,
}

impl Refusal {
    /// The status it is answered with.
    pub fn status(self) -> Status {
        match self {
            Refusal::RequestLineTooLong => Status::UriTooLong,
            Refusal::TooManyFields | Refusal::HeadTooLarge => Status::HeaderFieldsTooLarge,
            Refusal::UnknownMethod | Refusal::UnsupportedCoding => Status::NotImplemented,
            _ => Status::BadRequest,
        }
    }

    /// What the log says.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::EmptyLines => "empty lines without a request",
            Refusal::NotHttp => "not an HTTP request",
            Refusal::BareLf => "bare LF",
            Refusal::RequestLineTooLong => "request line too long",
            Refusal::MalformedHead => "malformed head",
            Refusal::TooManyFields => "too many header fields",
            Refusal::HeadTooLarge => "header block too large",
            Refusal::BadChunkedBody => "bad chunked body",
            Refusal::BadVersion => "bad version",
            Refusal::UnknownMethod => "unknown method",
            Refusal::AsteriskOutsideOptions => "asterisk-form outside OPTIONS",
            Refusal::BadTarget => "bad request target",
            Refusal::BadAuthorityInTarget => "bad authority in target",
            Refusal::NonAsciiValue => "non-ASCII value",
            Refusal::DuplicateContentLength => "duplicate Content-Length",
            Refusal::BadContentLength => "bad Content-Length",
            Refusal::BadTransferEncoding => "bad Transfer-Encoding",
            Refusal::NoHost => "HTTP/1.1 needs exactly one Host",
            Refusal::MoreThanOneHost => "more than one Host",
            Refusal::InvalidHost => "invalid Host",
            Refusal::LengthWithTransferEncoding => "Content-Length with Transfer-Encoding",
            Refusal::TransferEncodingIn10 => "Transfer-Encoding in HTTP/1.0",
            Refusal::UnsupportedCoding => "unsupported transfer coding",
            Refusal::ChunkedTwice => "chunked applied twice",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
