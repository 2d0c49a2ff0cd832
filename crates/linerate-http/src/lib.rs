//! Sans-I/O HTTP/1.1, HTTP/2 and HTTP/3 for `linerate serve`: bytes in, decisions out. No
//! system calls, no clock reads (the caller passes the time), so every rule of
//! docs/http.md that lives here is tested with literal bytes.
//!
//! - [`connection`]: one HTTP/1.1 connection's input: pipelined requests, bodies
//!   discarded, reading paused while answers are owed, how the connection ends;
//! - [`h2`]: one HTTP/2 connection: frames, SETTINGS, flow control both ways, HPACK
//!   (an encoder that indexes response heads in the client's table), streams and their
//!   priorities, the limits against floods (rapid reset, CONTINUATION, HPACK bombs);
//! - [`h3`]: one HTTP/3 connection's streams (QUIC itself is quinn-proto's, driven by
//!   the server): frames, SETTINGS, QPACK with the static table and literals, the
//!   control and QPACK streams' rules, and request streams into the same `Request`;
//! - [`request`]: the request head (parsed by `httparse`, with the policy checks it does
//!   not make: bare LF, limits, `Host`, body framing, methods), the chunked body
//!   skipper, and the one `Builder` every protocol hands its fields to;
//! - [`answer`]: a request's answer decided in one call from what the server found (a
//!   file, an error, a page): preconditions, ranges, status, head and body plan;
//! - [`fields`]: a response head as a structure, and its HTTP/1.1 writer (every field
//!   value made safe there, the same for every protocol);
//! - [`range`]: `Range: bytes=` into the ranges to send;
//! - [`protocol`]: what every protocol's connection does for its owner (the trait
//!   HTTP/1.1's and HTTP/2's connections implement);
//! - [`timeout`]: a protocol's deadlines, asked for (`poll_timeout`) as quinn-proto's are;
//! - [`refusal`]: why a request is refused, typed, with its status;
//! - [`conditional`]: validators and the `If-*` preconditions;
//! - [`path`]: request target to a path under the document root;
//! - [`response`]: dates, content ranges and multipart framing;
//! - [`location`]: `Location` values built from a request, kept on the site's origin;
//! - [`mime`]: content types by file name;
//! - [`coding`]: which precompressed variants `Accept-Encoding` takes, best first;
//! - [`forwarded`]: the client behind trusted proxies (`X-Forwarded-For`, `Forwarded`).
//!
//! # Non-goals
//! Request bodies beyond discarding them; compressing in the request (variants are
//! precompressed, or made once by the server's compression cache off the workers);
//! QUIC itself (quinn-proto's).

#![forbid(unsafe_code)]

pub mod answer;
pub mod coding;
pub mod conditional;
pub mod connection;
pub mod fields;
pub mod forwarded;
pub mod h2;
pub mod h3;
pub mod location;
pub mod mime;
pub mod path;
pub mod protocol;
pub mod range;
pub mod refusal;
pub mod request;
pub mod response;
pub mod timeout;

pub use protocol::Protocol;

/// The status codes the server answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// 200
    Ok,
    /// 204
    NoContent,
    /// 206
    PartialContent,
    /// 301
    MovedPermanently,
    /// 302
    Found,
    /// 303
    SeeOther,
    /// 307
    TemporaryRedirect,
    /// 308
    PermanentRedirect,
    /// 304
    NotModified,
    /// 400
    BadRequest,
    /// 401
    Unauthorized,
    /// 403
    Forbidden,
    /// 404
    NotFound,
    /// 405
    MethodNotAllowed,
    /// 408
    RequestTimeout,
    /// 412
    PreconditionFailed,
    /// 414
    UriTooLong,
    /// 416
    RangeNotSatisfiable,
    /// 425 (RFC 8470: a request in early data the server will not take before the
    /// handshake ends)
    TooEarly,
    /// 429
    TooManyRequests,
    /// 431
    HeaderFieldsTooLarge,
    /// 500
    InternalServerError,
    /// 501
    NotImplemented,
    /// 503
    ServiceUnavailable,
}

impl Status {
    /// The redirect status of `code` (301, 302, 303, 307 or 308).
    pub fn redirect(code: u16) -> Option<Status> {
        match code {
            301 => Some(Status::MovedPermanently),
            302 => Some(Status::Found),
            303 => Some(Status::SeeOther),
            307 => Some(Status::TemporaryRedirect),
            308 => Some(Status::PermanentRedirect),
            _ => None,
        }
    }

    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::NoContent => 204,
            Status::PartialContent => 206,
            Status::MovedPermanently => 301,
            Status::Found => 302,
            Status::SeeOther => 303,
            Status::TemporaryRedirect => 307,
            Status::PermanentRedirect => 308,
            Status::NotModified => 304,
            Status::BadRequest => 400,
            Status::Unauthorized => 401,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::PreconditionFailed => 412,
            Status::UriTooLong => 414,
            Status::RangeNotSatisfiable => 416,
            Status::TooEarly => 425,
            Status::TooManyRequests => 429,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalServerError => 500,
            Status::NotImplemented => 501,
            Status::ServiceUnavailable => 503,
        }
    }

    /// The reason phrase.
    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::NoContent => "No Content",
            Status::PartialContent => "Partial Content",
            Status::MovedPermanently => "Moved Permanently",
            Status::Found => "Found",
            Status::SeeOther => "See Other",
            Status::TemporaryRedirect => "Temporary Redirect",
            Status::PermanentRedirect => "Permanent Redirect",
            Status::NotModified => "Not Modified",
            Status::BadRequest => "Bad Request",
            Status::Unauthorized => "Unauthorized",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::PreconditionFailed => "Precondition Failed",
            Status::UriTooLong => "URI Too Long",
            Status::RangeNotSatisfiable => "Range Not Satisfiable",
            Status::TooEarly => "Too Early",
            Status::TooManyRequests => "Too Many Requests",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::NotImplemented => "Not Implemented",
            Status::ServiceUnavailable => "Service Unavailable",
        }
    }
}
