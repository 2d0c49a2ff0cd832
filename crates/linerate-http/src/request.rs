//! Request heads: `httparse` for the grammar, and around it the policies of
//! docs/http.md that it leaves to us: bare LF, size limits, `Host`, body framing,
//! methods, connection persistence. Parsing is restartable: call [`parse`] again with
//! more bytes; a request that arrives one byte per write gets the same answer.

use std::mem::MaybeUninit;

use crate::refusal::Refusal;

mod build;
use crate::Status;
pub use build::{Builder, Fault};

/// Size limits of a request head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Request line, without its CRLF (414 beyond).
    pub request_line_bytes: usize,
    /// Header fields, without the request line (431 beyond).
    pub header_bytes: usize,
    /// Number of header fields (431 beyond).
    pub header_fields: usize,
    /// Keep `User-Agent` and `Referer` (for an access log that writes them); off, they
    /// cost nothing.
    pub client_fields: bool,
    /// Keep this header's fields (joined with ", "), for a server that trusts proxies
    /// to name the client; none: it costs nothing.
    pub forwarded: Option<crate::forwarded::Header>,
    /// Keep `Origin`, `Access-Control-Request-Method` and
    /// `Access-Control-Request-Headers`, for a server that answers CORS.
    pub cors: bool,
    /// Keep `Authorization`, for a server that checks credentials.
    pub authorization: bool,
    /// Whether a connection speaks HTTP/2.
    pub http2: Http2,
}

/// Whether connections speak HTTP/2 (`--http2`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Http2 {
    /// Never: the preface is an unknown method.
    Off,
    /// A connection that opens with HTTP/2's preface speaks HTTP/2 (prior knowledge
    /// in clear, or after ALPN chose `h2`); any other is HTTP/1.1.
    #[default]
    On,
    /// Every connection speaks HTTP/2 from its first byte: one that does not open
    /// with the preface gets a GOAWAY (PROTOCOL_ERROR), not an HTTP/1.1 answer (an
    /// h2c-only port, as a load balancer's backend; TLS offers `h2` alone).
    Only,
}

impl std::str::FromStr for Http2 {
    type Err = String;
    fn from_str(s: &str) -> Result<Http2, String> {
        match s {
            "off" | "false" => Ok(Http2::Off),
            "on" | "true" => Ok(Http2::On),
            "only" => Ok(Http2::Only),
            _ => Err(format!("'{s}': expected on, off or only")),
        }
    }
}

impl std::fmt::Display for Http2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Http2::Off => "off",
            Http2::On => "on",
            Http2::Only => "only",
        })
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_line_bytes: 8 * 1024,
            header_bytes: 16 * 1024,
            header_fields: 100,
            client_fields: false,
            forwarded: None,
            cors: false,
            authorization: false,
            http2: Http2::On,
        }
    }
}

/// Request methods the server knows. Any other token (including lower-case ones) is
/// answered 501.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET
    Get,
    /// HEAD
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// OPTIONS
    Options,
    /// TRACE
    Trace,
    /// CONNECT
    Connect,
    /// PATCH
    Patch,
}

impl Method {
    pub(crate) fn from_token(t: &str) -> Option<Method> {
        Some(match t {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            "PATCH" => Method::Patch,
            _ => return None,
        })
    }

    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Patch => "PATCH",
        }
    }
}

/// HTTP version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
    /// HTTP/2 (a stream of an HTTP/2 connection: [`crate::h2`])
    Http2,
    /// HTTP/3 (a request stream of a QUIC connection)
    Http3,
}

impl Version {
    /// As a request line or the access log writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
            Version::Http3 => "HTTP/3.0",
        }
    }
}

/// How the request's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed, validated request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The version.
    pub version: Version,
    /// The path of the target, still percent-encoded; empty for CONNECT and `*`.
    pub path: String,
    /// The query, without `?`.
    pub query: Option<String>,
    /// The authority: of an absolute-form target if there is one, else `Host`.
    pub host: Option<String>,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// How the body is framed.
    pub body: Body,
    /// `Range`.
    pub range: Option<String>,
    /// `If-Match` (several fields joined with ", ").
    pub if_match: Option<String>,
    /// `If-None-Match` (several fields joined with ", ").
    pub if_none_match: Option<String>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<String>,
    /// `If-Unmodified-Since`.
    pub if_unmodified_since: Option<String>,
    /// `If-Range`.
    pub if_range: Option<String>,
    /// `User-Agent`, when [`Limits::client_fields`] asks for it: the bytes as sent
    /// (blanks around trimmed), so a log can write every byte, escaped.
    pub user_agent: Option<Vec<u8>>,
    /// `Referer`, when [`Limits::client_fields`] asks for it (as `user_agent`).
    pub referer: Option<Vec<u8>>,
    /// `Accept-Encoding` (every field of it), for the precompressed variants.
    pub accept_encoding: Option<crate::coding::AcceptEncoding>,
    /// The header [`Limits::forwarded`] names (every field, joined with ", "), when it
    /// asks for one.
    pub forwarded: Option<String>,
    /// It came over TLS: set by the server that knows its connection (no parser sets
    /// it).
    pub secure: bool,
    /// `Origin`, `Access-Control-Request-Method` and `Access-Control-Request-Headers`
    /// (every field of the last, joined), when [`Limits::cors`] asks for them.
    pub cors: Option<Box<CorsFields>>,
    /// `Authorization`, when [`Limits::authorization`] asks for it.
    pub authorization: Option<String>,
    /// It waited its turn under a request-rate limit and is answered now without
    /// being counted again: set by the server that held it (no parser sets it).
    pub admitted: bool,
}

/// What a CORS request says of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CorsFields {
    pub origin: Option<String>,
    pub request_method: Option<String>,
    pub request_headers: Option<String>,
}

/// What the bytes so far amount to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parse {
    /// The head is not complete yet.
    Incomplete,
    /// A head of `head_len` bytes; the body (if any) follows.
    Complete {
        /// The request.
        request: Box<Request>,
        /// Bytes of the head, final CRLF CRLF included.
        head_len: usize,
    },
    /// Answer `status` and close the connection.
    Invalid {
        /// The status to answer (the reason's).
        status: Status,
        /// Why.
        reason: Refusal,
    },
}

fn invalid(reason: Refusal) -> Parse {
    Parse::Invalid {
        status: reason.status(),
        reason,
    }
}

/// Parses the request head at the start of `buf`.
pub fn parse(buf: &[u8], limits: &Limits) -> Parse {
    parse_resumed(&mut HeadScan::default(), buf, limits)
}

/// Where the scan of a request head that has not all arrived stands, so that more bytes
/// cost a look at those bytes only: a head that comes one byte per read is scanned
/// once, not once per byte.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeadScan {
    /// Bytes of empty lines before the request line.
    start: usize,
    /// The request line has begun, so `start` is final.
    started: bool,
    /// The next byte to look at.
    pos: usize,
    /// Past the request line.
    in_fields: bool,
    /// Where the header fields begin.
    fields_start: usize,
    /// Where the current line begins.
    line_start: usize,
}

impl HeadScan {
    /// Looks at the bytes of `buf` not seen before (`buf` is what it was at the last
    /// call, with more at its end): `Ok(Some((start, head_len)))` once the empty line
    /// that ends the head has come.
    fn scan(&mut self, buf: &[u8], limits: &Limits) -> Result<Option<(usize, usize)>, Parse> {
        if !self.started {
            // RFC 9112 lets a server ignore empty lines before the request line; they
            // count against the request line's limit, so they cannot go on for ever.
            while buf[self.start..].starts_with(b"\r\n") {
                self.start += 2;
                if self.start > limits.request_line_bytes {
                    return Err(invalid(Refusal::EmptyLines));
                }
            }
            let rest = &buf[self.start..];
            if rest.is_empty() || rest == b"\r" {
                // A lone CR may be the first half of one more empty line.
                return Ok(None);
            }
            // A request line starts with its method, a token: anything else (a TLS
            // ClientHello's 0x16 sent to a plain port, say) is refused at its first
            // byte instead of being awaited as a line until a timeout.
            if !is_tchar(rest[0]) {
                return Err(invalid(Refusal::NotHttp));
            }
            self.started = true;
            self.pos = self.start;
            self.line_start = self.start;
        }
        // One forward scan, so the first violation in byte order decides, whether the
        // bytes came at once or one at a time: a bare LF (400), a request line past its
        // limit (414), a header block past its limit (431).
        let start = self.start;
        for i in self.pos..buf.len() {
            let b = buf[i];
            if b == b'\n' {
                if i == 0 || buf[i - 1] != b'\r' {
                    return Err(invalid(Refusal::BareLf));
                }
                if !self.in_fields {
                    self.in_fields = true;
                    self.fields_start = i + 1;
                } else if i == self.line_start + 1 {
                    self.pos = i + 1;
                    return Ok(Some((start, i + 1)));
                }
                self.line_start = i + 1;
                continue;
            }
            // A CR waiting for its LF does not count yet.
            let pending_cr = usize::from(b == b'\r');
            if !self.in_fields {
                if i + 1 - start - pending_cr > limits.request_line_bytes {
                    return Err(invalid(Refusal::RequestLineTooLong));
                }
            } else if i + 1 - self.fields_start - pending_cr > limits.header_bytes {
                return Err(invalid(Refusal::HeadTooLarge));
            }
        }
        self.pos = buf.len();
        Ok(None)
    }
}

/// [`parse`], resuming where `scan` stopped the last time on the same bytes (with more
/// at their end). Start a new [`HeadScan`] for each head.
pub fn parse_resumed(scan: &mut HeadScan, buf: &[u8], limits: &Limits) -> Parse {
    let (start, head_len) = match scan.scan(buf, limits) {
        Ok(Some(head)) => head,
        Ok(None) => return Parse::Incomplete,
        Err(invalid) => return invalid,
    };
    // One slot more than the limit, so that "too many" is seen. The slots need no
    // initializing; up to the default limit they live on the stack.
    const STACK_HEADERS: usize = 128;
    let mut stack = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; STACK_HEADERS];
    let mut heap = Vec::new();
    let slots = if limits.header_fields < STACK_HEADERS {
        &mut stack[..limits.header_fields + 1]
    } else {
        heap.resize_with(limits.header_fields + 1, MaybeUninit::uninit);
        &mut heap[..]
    };
    let mut req = httparse::Request::new(&mut []);
    match req.parse_with_uninit_headers(&buf[start..head_len], slots) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return invalid(Refusal::MalformedHead),
        Err(httparse::Error::TooManyHeaders) => return invalid(Refusal::TooManyFields),
        Err(_) => return invalid(Refusal::MalformedHead),
    }
    if req.headers.len() > limits.header_fields {
        return invalid(Refusal::TooManyFields);
    }
    let version = match req.version {
        Some(0) => Version::Http10,
        Some(1) => Version::Http11,
        _ => return invalid(Refusal::BadVersion),
    };
    let Some(method) = req.method.and_then(Method::from_token) else {
        return invalid(Refusal::UnknownMethod);
    };
    let target = req.path.unwrap_or("");
    let (authority, path_and_query) = match split_target(method, target) {
        Ok(t) => t,
        Err(reason) => return invalid(reason),
    };
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (path_and_query.to_string(), None),
    };

    let mut codings: Vec<String> = Vec::new();
    let mut saw_te = false;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut b = Builder::new(method, version, path, query);
    for h in req.headers.iter() {
        let name = h.name;
        let framing = name.eq_ignore_ascii_case("transfer-encoding");
        if !framing && !name.eq_ignore_ascii_case("connection") {
            if let Err(fault) = b.field(name, h.value, limits) {
                return invalid(fault.into());
            }
            continue;
        }
        let Ok(value) = std::str::from_utf8(h.value) else {
            if framing {
                return invalid(Refusal::NonAsciiValue);
            }
            continue;
        };
        let value = value.trim_matches([' ', '\t']);
        if framing {
            saw_te = true;
            for c in value.split(',') {
                let c = c.trim_matches([' ', '\t']);
                if c.is_empty() || !c.bytes().all(is_tchar) {
                    return invalid(Refusal::BadTransferEncoding);
                }
                codings.push(c.to_ascii_lowercase());
            }
        } else {
            for t in value.split(',') {
                let t = t.trim_matches([' ', '\t']);
                close |= t.eq_ignore_ascii_case("close");
                keep_alive_token |= t.eq_ignore_ascii_case("keep-alive");
            }
        }
    }
    if version == Version::Http11 && b.hosts() != 1 {
        return invalid(Refusal::NoHost);
    }
    if b.hosts() > 1 {
        return invalid(Refusal::MoreThanOneHost);
    }
    if b.host().is_some_and(|h| !valid_host(h)) {
        return invalid(Refusal::InvalidHost);
    }
    let mut body = Body::None;
    if saw_te {
        if b.content_length().is_some() {
            return invalid(Refusal::LengthWithTransferEncoding);
        }
        if version == Version::Http10 {
            return invalid(Refusal::TransferEncodingIn10);
        }
        if codings.iter().any(|c| c != "chunked") {
            return invalid(Refusal::UnsupportedCoding);
        }
        if codings.len() != 1 {
            return invalid(Refusal::ChunkedTwice);
        }
        body = Body::Chunked;
    } else if let Some(n) = b.content_length() {
        body = if n == 0 { Body::None } else { Body::Length(n) };
    }
    let keep_alive = match version {
        Version::Http11 | Version::Http2 | Version::Http3 => !close,
        Version::Http10 => keep_alive_token && !close,
    };
    Parse::Complete {
        request: b.finish(authority.map(str::to_string), body, keep_alive),
        head_len,
    }
}

impl From<Fault> for Refusal {
    fn from(fault: Fault) -> Refusal {
        match fault {
            Fault::NotText => Refusal::NonAsciiValue,
            Fault::BadContentLength => Refusal::BadContentLength,
            Fault::SecondContentLength => Refusal::DuplicateContentLength,
        }
    }
}

/// `(authority of an absolute-form target, path and query)`.
fn split_target(method: Method, target: &str) -> Result<(Option<&str>, &str), Refusal> {
    if target.starts_with('/') {
        return Ok((None, target));
    }
    if method == Method::Connect {
        // authority-form; answered 405 by the server.
        return Ok((None, ""));
    }
    if target == "*" {
        return if method == Method::Options {
            Ok((None, ""))
        } else {
            Err(Refusal::AsteriskOutsideOptions)
        };
    }
    let lower = target
        .get(..8)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let rest = if lower.starts_with("http://") {
        &target[7..]
    } else if lower.starts_with("https://") {
        &target[8..]
    } else {
        return Err(Refusal::BadTarget);
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() || authority.contains('@') || !valid_host(authority) {
        return Err(Refusal::BadAuthorityInTarget);
    }
    let pq = &rest[end..];
    Ok((Some(authority), if pq.is_empty() { "/" } else { pq }))
}

/// 1 to 19 ASCII digits: no sign, no list, no hex, nothing that could overflow.
pub(crate) fn parse_content_length(v: &str) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

pub(crate) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `uri-host [ ":" port ]`: a reg-name (no empty label), IPv4 address or bracketed IP
/// literal.
/// The bytes a host name may hold (a reg-name, RFC 3986 §3.2.2: unreserved,
/// sub-delims, `%`), by value.
const HOST_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric();
        b += 1;
    }
    let others = b"-._~!$&'()*+,;=%";
    let mut i = 0;
    while i < others.len() {
        t[others[i] as usize] = true;
        i += 1;
    }
    t
};

pub(crate) fn valid_host(h: &str) -> bool {
    let valid_port = |p: &str| p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
    if h.is_empty() {
        return true;
    }
    if let Some(rest) = h.strip_prefix('[') {
        let Some((lit, after)) = rest.split_once(']') else {
            return false;
        };
        let lit_ok = !lit.is_empty()
            && lit
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        return lit_ok && (after.is_empty() || after.strip_prefix(':').is_some_and(valid_port));
    }
    let (name, port) = match h.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (h, None),
    };
    // As nginx: no empty label (`..`, a leading `.`, `.` alone); one trailing dot is
    // a fully qualified name. One pass: each byte allowed, no dot after a dot (or at
    // the start).
    let mut after_dot = true;
    !name.is_empty()
        && name.bytes().all(|b| {
            let dot = b == b'.';
            let ok = HOST_BYTES[usize::from(b)] && !(dot && after_dot);
            after_dot = dot;
            ok
        })
        && port.is_none_or(valid_port)
}

/// Skips a chunked body, sans I/O: feed it bytes, it says how many belong to the body.
#[derive(Clone, Debug, Default)]
pub struct ChunkedSkipper {
    state: ChunkState,
    size: u64,
    size_digits: u8,
    trailer_line_len: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    TrailerLf,
    FinalLf,
    Done,
}

/// A malformed chunked body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadChunk;

impl ChunkedSkipper {
    /// A skipper at the start of a body.
    pub fn new() -> ChunkedSkipper {
        ChunkedSkipper::default()
    }

    /// True once the whole body, trailers included, has been seen.
    pub fn is_done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consumes body bytes from the start of `buf`; returns how many were body. Stops at
    /// the end of the body (the rest is the next request).
    pub fn feed(&mut self, buf: &[u8]) -> Result<usize, BadChunk> {
        use ChunkState::*;
        let mut i = 0;
        while i < buf.len() && self.state != Done {
            let b = buf[i];
            match self.state {
                Size => {
                    if let Some(d) = (b as char).to_digit(16) {
                        if self.size_digits == 16 {
                            return Err(BadChunk);
                        }
                        self.size = self.size * 16 + u64::from(d);
                        self.size_digits += 1;
                    } else if self.size_digits == 0 {
                        return Err(BadChunk);
                    } else if b == b';' || b == b' ' || b == b'\t' {
                        self.state = Extension;
                    } else if b == b'\r' {
                        self.state = SizeLf;
                    } else {
                        return Err(BadChunk);
                    }
                    i += 1;
                }
                Extension => {
                    if b == b'\r' {
                        self.state = SizeLf;
                    } else if b == b'\n' || (b < 0x20 && b != b'\t') {
                        return Err(BadChunk);
                    }
                    i += 1;
                }
                SizeLf => {
                    if b != b'\n' {
                        return Err(BadChunk);
                    }
                    i += 1;
                    self.state = if self.size == 0 { TrailerStart } else { Data };
                }
                Data => {
                    let take =
                        (buf.len() - i).min(usize::try_from(self.size).unwrap_or(usize::MAX));
                    i += take;
                    self.size -= take as u64;
                    if self.size == 0 {
                        self.state = DataCr;
                    }
                }
                DataCr => {
                    if b != b'\r' {
                        return Err(BadChunk);
                    }
                    i += 1;
                    self.state = DataLf;
                }
                DataLf => {
                    if b != b'\n' {
                        return Err(BadChunk);
                    }
                    i += 1;
                    self.size_digits = 0;
                    self.state = Size;
                }
                TrailerStart => {
                    i += 1;
                    if b == b'\r' {
                        self.state = FinalLf;
                    } else if b == b'\n' {
                        return Err(BadChunk);
                    } else {
                        self.trailer_line_len = 1;
                        self.state = TrailerLine;
                    }
                }
                TrailerLine => {
                    i += 1;
                    self.trailer_line_len += 1;
                    if self.trailer_line_len > 8192 || b == b'\n' {
                        return Err(BadChunk);
                    }
                    if b == b'\r' {
                        self.state = TrailerLf;
                    }
                }
                TrailerLf => {
                    if b != b'\n' {
                        return Err(BadChunk);
                    }
                    i += 1;
                    self.state = TrailerStart;
                }
                FinalLf => {
                    if b != b'\n' {
                        return Err(BadChunk);
                    }
                    i += 1;
                    self.state = Done;
                }
                Done => {}
            }
        }
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `raw` whole, and again fed one byte at a time (as a server re-parses
    /// after each read); both must agree.
    fn both(raw: &[u8]) -> Parse {
        let whole = parse(raw, &Limits::default());
        let mut fed = Parse::Incomplete;
        for n in 1..=raw.len() {
            fed = parse(&raw[..n], &Limits::default());
            if fed != Parse::Incomplete {
                break;
            }
        }
        assert_eq!(
            whole,
            fed,
            "whole and byte-at-a-time differ for {:?}",
            String::from_utf8_lossy(raw)
        );
        whole
    }

    /// Refusals are typed: each names its reason, and its status follows from it.
    #[test]
    fn refusals_name_their_reason() {
        for (raw, want) in [
            ("GET / HTTP/1.1\r\n\r\n", Refusal::NoHost),
            ("GET / HTTP/1.1\nHost: x\r\n\r\n", Refusal::BareLf),
            ("BREW / HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::UnknownMethod),
            ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::AsteriskOutsideOptions),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                Refusal::LengthWithTransferEncoding,
            ),
        ] {
            match both(raw.as_bytes()) {
                Parse::Invalid { status, reason } => {
                    assert_eq!(reason, want, "{raw:?}");
                    assert_eq!(status, want.status(), "{raw:?}");
                }
                _ => panic!("{raw:?} is not refused"),
            }
        }
        assert_eq!(Refusal::UnknownMethod.status(), Status::NotImplemented);
        assert_eq!(
            Refusal::NoHost.to_string(),
            "HTTP/1.1 needs exactly one Host"
        );
    }

    fn status(raw: &str) -> Option<u16> {
        match both(raw.as_bytes()) {
            Parse::Invalid { status, .. } => Some(status.code()),
            Parse::Complete { .. } => None,
            Parse::Incomplete => Some(0),
        }
    }

    fn ok(raw: &str) -> Request {
        match both(raw.as_bytes()) {
            Parse::Complete { request, head_len } => {
                assert!(head_len <= raw.len());
                *request
            }
            other => panic!("{raw:?}: {other:?}"),
        }
    }

    #[test]
    fn a_plain_get() {
        let r = ok("GET /a/b?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.path, "/a/b");
        assert_eq!(r.query.as_deref(), Some("x=1"));
        assert_eq!(r.host.as_deref(), Some("example.com"));
        assert!(r.keep_alive);
        assert_eq!(r.body, Body::None);
    }

    /// Rules: docs/http.md P1, R6.
    #[test]
    fn bare_lf_anywhere_is_400() {
        assert_eq!(status("GET / HTTP/1.1\nHost: a\r\n\r\n"), Some(400));
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\n\r\n"), Some(400));
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\n\n"), Some(400));
    }

    /// Rules: docs/http.md P7.
    #[test]
    fn a_first_byte_that_cannot_begin_a_method_is_400_at_once() {
        assert_eq!(status("\x16\x03\x01\x02\x00\x01"), Some(400));
        assert_eq!(status("\r\n\x16"), Some(400));
        assert_eq!(status(" GET / HTTP/1.1\r\n"), Some(400));
        // A method's first byte is awaited on.
        assert_eq!(status("G"), Some(0));
    }

    /// Rules: docs/http.md R1, R6.
    #[test]
    fn malformed_heads_are_400() {
        for raw in [
            "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nBad@Name: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
            "G ET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.0 x\r\n\r\n",
            "GET / HTTP/10.0\r\n\r\n",
            "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
            "GET foo HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            assert_eq!(status(raw), Some(400), "{raw:?}");
        }
    }

    /// Rules: docs/http.md R2, R6.
    #[test]
    fn unknown_and_lower_case_methods_are_501() {
        assert_eq!(status("get / HTTP/1.1\r\nHost: a\r\n\r\n"), Some(501));
        assert_eq!(status("BREW / HTTP/1.1\r\nHost: a\r\n\r\n"), Some(501));
        assert_eq!(
            ok("POST / HTTP/1.1\r\nHost: a\r\n\r\n").method,
            Method::Post
        );
        assert_eq!(
            ok("CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n").method,
            Method::Connect
        );
    }

    /// Rules: docs/http.md R3, R6.
    #[test]
    fn host_rules() {
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), Some(400));
        assert_eq!(
            status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            Some(400)
        );
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), Some(400));
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), Some(400));
        // Issue 28: an empty label is no host name, as nginx answers.
        for h in ["..", ".", "a..b", ".a", "..:80"] {
            let head = format!("GET / HTTP/1.1\r\nHost: {h}\r\n\r\n");
            assert_eq!(status(&head), Some(400), "{h}");
        }
        assert_eq!(
            ok("GET / HTTP/1.1\r\nHost: a.example.\r\n\r\n")
                .host
                .as_deref(),
            Some("a.example.")
        );
        assert_eq!(
            status("GET / HTTP/1.1\r\nHost: a:99999x\r\n\r\n"),
            Some(400)
        );
        assert_eq!(ok("GET / HTTP/1.0\r\n\r\n").host, None);
        assert_eq!(
            ok("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n")
                .host
                .as_deref(),
            Some("[::1]:8080")
        );
        let r = ok("GET http://other.example:81/p?q HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(r.host.as_deref(), Some("other.example:81"));
        assert_eq!(r.path, "/p");
        assert_eq!(r.query.as_deref(), Some("q"));
    }

    /// Rules: docs/http.md R4, R6.
    #[test]
    fn body_framing() {
        let h = "GET / HTTP/1.1\r\nHost: a\r\n";
        assert_eq!(
            ok(&format!("{h}Content-Length: 5\r\n\r\n")).body,
            Body::Length(5)
        );
        assert_eq!(
            ok(&format!("{h}Transfer-Encoding: chunked\r\n\r\n")).body,
            Body::Chunked
        );
        for bad in [
            "+5",
            "5, 6",
            "0x10",
            "12345678901234567890",
            "-1",
            "",
            "5 5",
        ] {
            assert_eq!(
                status(&format!("{h}Content-Length: {bad}\r\n\r\n")),
                Some(400),
                "{bad}"
            );
        }
        assert_eq!(
            status(&format!(
                "{h}Content-Length: 5\r\nContent-Length: 5\r\n\r\n"
            )),
            Some(400)
        );
        assert_eq!(
            status(&format!(
                "{h}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            )),
            Some(400)
        );
        assert_eq!(
            status(&format!("{h}Transfer-Encoding: gzip, chunked\r\n\r\n")),
            Some(501)
        );
        assert_eq!(
            status(&format!("{h}Transfer-Encoding: chunked, chunked\r\n\r\n")),
            Some(400)
        );
        assert_eq!(
            status(&format!("{h}Transfer-Encoding: ,\r\n\r\n")),
            Some(400)
        );
    }

    /// Rules: docs/http.md C2.
    #[test]
    fn persistence() {
        assert!(!ok("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(ok("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        assert!(!ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!ok("GET / HTTP/1.1\r\nHost: a\r\nConnection: x, Close\r\n\r\n").keep_alive);
    }

    /// Rules: docs/http.md P6.
    #[test]
    fn limits() {
        let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
        assert_eq!(
            parse(long.as_bytes(), &Limits::default()),
            invalid(Refusal::RequestLineTooLong)
        );
        // Without ever seeing the end of the line, too.
        let partial = format!("GET /{}", "a".repeat(9000));
        assert!(matches!(
            parse(partial.as_bytes(), &Limits::default()),
            Parse::Invalid {
                status: Status::UriTooLong,
                ..
            }
        ));
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "b".repeat(17000)
        );
        assert!(matches!(
            parse(big.as_bytes(), &Limits::default()),
            Parse::Invalid {
                status: Status::HeaderFieldsTooLarge,
                ..
            }
        ));
        let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
        let raw = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        assert!(matches!(
            parse(raw.as_bytes(), &Limits::default()),
            Parse::Invalid {
                status: Status::HeaderFieldsTooLarge,
                ..
            }
        ));
        let hundred: String = (0..99).map(|i| format!("X-{i}: v\r\n")).collect();
        let raw = format!("GET / HTTP/1.1\r\nHost: a\r\n{hundred}\r\n");
        assert!(matches!(
            parse(raw.as_bytes(), &Limits::default()),
            Parse::Complete { .. }
        ));
    }

    /// Rules: docs/http.md B2.
    #[test]
    fn the_forwarding_header_is_kept_only_when_asked_for_and_every_field_of_it() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.2.3.4\r\n\
                    Forwarded: for=5.6.7.8\r\nx-forwarded-for:\t10.0.0.1 \r\n\r\n";
        let kept = |limits: &Limits| match parse(raw, limits) {
            Parse::Complete { request, .. } => request.forwarded,
            other => panic!("{other:?}"),
        };
        assert_eq!(kept(&Limits::default()), None);
        let xff = Limits {
            forwarded: Some(crate::forwarded::Header::XForwardedFor),
            ..Limits::default()
        };
        assert_eq!(kept(&xff).as_deref(), Some("1.2.3.4, 10.0.0.1"));
        let fwd = Limits {
            forwarded: Some(crate::forwarded::Header::Forwarded),
            ..Limits::default()
        };
        assert_eq!(kept(&fwd).as_deref(), Some("for=5.6.7.8"));
    }

    /// Rules: docs/http.md P1, P6, R6.
    #[test]
    fn the_first_violation_in_byte_order_decides() {
        // A bare LF after the request line's limit: 414 whole and byte by byte.
        let raw = format!("GET /{}\n", "a".repeat(9000));
        assert_eq!(status(&raw), Some(414));
        // A bare LF before the limit: 400 both ways.
        let raw = format!("GET /a\n{}", "a".repeat(9000));
        assert_eq!(status(&raw), Some(400));
        // A line exactly at the limit, its CR last, is fine.
        let limits = Limits {
            request_line_bytes: 16,
            ..Limits::default()
        };
        let line = b"GET /12345 HTTP/1.1"[..16].to_vec();
        let mut raw = line.clone();
        raw.extend_from_slice(b"\r");
        assert_eq!(parse(&raw, &limits), Parse::Incomplete);
        raw.extend_from_slice(b"x");
        assert!(matches!(
            parse(&raw, &limits),
            Parse::Invalid {
                status: Status::UriTooLong,
                ..
            }
        ));
    }

    #[test]
    fn pipelined_heads_are_taken_one_at_a_time() {
        let two = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n";
        let Parse::Complete { request, head_len } = parse(two, &Limits::default()) else {
            panic!()
        };
        assert_eq!(request.path, "/1");
        let Parse::Complete { request, .. } = parse(&two[head_len..], &Limits::default()) else {
            panic!()
        };
        assert_eq!(request.path, "/2");
    }

    /// Rules: docs/http.md R5, R6.
    #[test]
    fn chunked_bodies_are_skipped_exactly() {
        let body = b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\nGET /next";
        let mut s = ChunkedSkipper::new();
        let n = s.feed(body).unwrap();
        assert!(s.is_done());
        assert_eq!(&body[n..], b"GET /next");
        // One byte at a time.
        let mut s = ChunkedSkipper::new();
        let mut total = 0;
        for b in body.iter() {
            if s.is_done() {
                break;
            }
            total += s.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(total, n);
        for bad in [
            &b"x\r\n"[..],
            b"5\r\nhelloXX",
            b"5\nhello",
            b"11111111111111111\r\n",
        ] {
            assert_eq!(
                ChunkedSkipper::new().feed(bad),
                Err(BadChunk),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
