//! An HTTP/2 request's field block into the same [`Request`] an HTTP/1.1 head makes
//! (RFC 9113 §8.2 and §8.3): pseudo-header fields first, names in lower case, no
//! connection-specific field, the four pseudo-headers once each. A block that breaks
//! one of these is malformed: the stream is reset with PROTOCOL_ERROR (§8.1.1), and no
//! response is made. Everything else (the method, the path, the validators) is judged
//! as for HTTP/1.1, by the server that answers it.

use crate::request::{self, Body, Builder, Fault, Limits, Method, Request, Version};

/// Why a request's fields make it malformed (RFC 9113 §8.1.1): its stream is reset,
/// but for a method the server does not know, answered 501 as over HTTP/1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// A field value with NUL, CR, LF or blanks at its ends.
    BadValue,
    /// A pseudo-header field after a regular one.
    PseudoAfterRegular,
    /// A pseudo-header field twice.
    PseudoTwice,
    /// Two :scheme fields.
    TwoSchemes,
    /// An unknown pseudo-header field.
    UnknownPseudo,
    /// A field name that is not a lower-case token.
    BadName,
    /// A connection-specific field.
    ConnectionField,
    /// TE other than "trailers".
    BadTe,
    /// A non-ASCII Host or Content-Length.
    NonAsciiHostOrLength,
    /// Two Host fields.
    TwoHosts,
    /// A malformed Content-Length.
    BadContentLength,
    /// Two Content-Length values.
    TwoContentLengths,
    /// No :method.
    NoMethod,
    /// :path in a CONNECT.
    PathInConnect,
    /// No :path.
    NoPath,
    /// An empty :path.
    EmptyPath,
    /// No :scheme.
    NoScheme,
    /// An asterisk :path outside OPTIONS.
    AsteriskOutsideOptions,
    /// A :path that is not absolute.
    RelativePath,
    /// Host and :authority differ.
    HostAndAuthorityDiffer,
    /// An invalid :authority.
    InvalidAuthority,
    /// A pseudo-header field in trailers.
    PseudoInTrailers,
    /// A pseudo-header value that is not text.
    PseudoNotText,
    /// A method the server does not know.
    UnknownMethod,
}

impl From<Fault> for Malformed {
    fn from(fault: Fault) -> Malformed {
        match fault {
            Fault::NotText => Malformed::NonAsciiHostOrLength,
            Fault::BadContentLength => Malformed::BadContentLength,
            Fault::SecondContentLength => Malformed::TwoContentLengths,
        }
    }
}

/// A request's fields as they are decoded.
pub(crate) struct Fields {
    b: Builder,
    /// `:method`: the method, or None for one the server does not know.
    method: Option<Option<Method>>,
    scheme: bool,
    path: Option<String>,
    authority: Option<String>,
    /// A regular field came: no pseudo-header after it.
    regular: bool,
    /// Its `priority` field (RFC 9218), when it has one.
    priority: Option<super::Priority>,
    /// Fields other than the pseudo-headers.
    count: usize,
    /// Too many fields (431 when the block is whole).
    pub too_many: bool,
}

/// What a trailer or request field block (after its end) says.
pub(crate) struct Head {
    pub request: Box<Request>,
    pub content_length: Option<u64>,
    pub priority: Option<super::Priority>,
}

/// A token (HTTP/1.1's, RFC 9110 §5.6.2) with no upper-case letter.
fn lower_token(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| request::is_tchar(b) && !b.is_ascii_uppercase())
}

/// A value as RFC 9113 §8.2.1 allows it: no NUL, CR or LF, no blank at either end.
fn valid_value(v: &[u8]) -> bool {
    // Every byte looked at, no early exit: the compiler checks many at a time.
    v.iter()
        .fold(true, |ok, &b| ok & (b != 0) & (b != b'\r') & (b != b'\n'))
        && !v.first().is_some_and(|&b| b == b' ' || b == b'\t')
        && !v.last().is_some_and(|&b| b == b' ' || b == b'\t')
}

impl Fields {
    pub fn new() -> Fields {
        Fields::for_version(Version::Http2)
    }

    /// The fields of a request of `version` (HTTP/3's field sections follow HTTP/2's
    /// rules, RFC 9114 §4.2 and §4.3).
    pub fn for_version(version: Version) -> Fields {
        Fields {
            b: Builder::new(Method::Get, version, String::new(), None),
            method: None,
            scheme: false,
            path: None,
            authority: None,
            regular: false,
            priority: None,
            count: 0,
            too_many: false,
        }
    }

    /// Takes one decoded field.
    pub fn field(&mut self, name: &[u8], value: &[u8], limits: &Limits) -> Result<(), Malformed> {
        if !valid_value(value) {
            return Err(Malformed::BadValue);
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular {
                return Err(Malformed::PseudoAfterRegular);
            }
            let text = || String::from_utf8(value.to_vec()).map_err(|_| Malformed::PseudoNotText);
            let slot = match pseudo {
                b"method" => {
                    if self.method.is_some() {
                        return Err(Malformed::PseudoTwice);
                    }
                    let token = std::str::from_utf8(value).map_err(|_| Malformed::PseudoNotText)?;
                    self.method = Some(Method::from_token(token));
                    return Ok(());
                }
                b"path" => &mut self.path,
                b"authority" => &mut self.authority,
                b"scheme" => {
                    if std::mem::replace(&mut self.scheme, true) {
                        return Err(Malformed::TwoSchemes);
                    }
                    return Ok(());
                }
                _ => return Err(Malformed::UnknownPseudo),
            };
            if slot.is_some() {
                return Err(Malformed::PseudoTwice);
            }
            *slot = Some(text()?);
            return Ok(());
        }
        self.regular = true;
        if !lower_token(name) {
            return Err(Malformed::BadName);
        }
        // Safe to read as text: a token.
        let name = std::str::from_utf8(name).unwrap_or_default();
        match name {
            "connection" | "proxy-connection" | "keep-alive" | "transfer-encoding" | "upgrade" => {
                return Err(Malformed::ConnectionField);
            }
            "te" if value != b"trailers" => return Err(Malformed::BadTe),
            "priority" => self.priority = Some(super::Priority::parse(value)),
            _ => {}
        }
        self.count += 1;
        if self.count > limits.header_fields {
            self.too_many = true;
            return Ok(());
        }
        self.b.field(name, value, limits).map_err(Malformed::from)?;
        if self.b.hosts() > 1 {
            return Err(Malformed::TwoHosts);
        }
        Ok(())
    }

    /// The request, once its block is whole.
    pub fn finish(mut self) -> Result<Head, Malformed> {
        let Some(method) = self.method else {
            return Err(Malformed::NoMethod);
        };
        let connect = method == Some(Method::Connect);
        let path = match (self.path, connect) {
            (None, true) => String::new(),
            (Some(_), true) => return Err(Malformed::PathInConnect),
            (None, false) => return Err(Malformed::NoPath),
            (Some(p), false) if p.is_empty() => return Err(Malformed::EmptyPath),
            (Some(p), false) => p,
        };
        if !connect && !self.scheme {
            return Err(Malformed::NoScheme);
        }
        // An unknown method is the server's to answer (501), as over HTTP/1.1: it
        // reaches it as a method it does not serve.
        let known = method.unwrap_or(Method::Patch);
        if path == "*" {
            if known != Method::Options {
                return Err(Malformed::AsteriskOutsideOptions);
            }
        } else if !connect && !path.starts_with('/') {
            return Err(Malformed::RelativePath);
        }
        let (p, q) = match path.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None if path == "*" => (String::new(), None),
            None => (path, None),
        };
        self.b.target(known, p, q);
        if let (Some(a), Some(h)) = (&self.authority, self.b.host()) {
            if !a.eq_ignore_ascii_case(h) {
                return Err(Malformed::HostAndAuthorityDiffer);
            }
        }
        if let Some(a) = self.authority.as_deref().or(self.b.host()) {
            if a.contains('@') || !request::valid_host(a) {
                return Err(Malformed::InvalidAuthority);
            }
        }
        if method.is_none() {
            return Err(Malformed::UnknownMethod);
        }
        let content_length = self.b.content_length();
        Ok(Head {
            request: self.b.finish(self.authority, Body::None, true),
            content_length,
            priority: self.priority,
        })
    }
}

/// Checks a trailer field (a field block after the request's DATA): no pseudo-header.
pub(crate) fn trailer_field(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    if name.starts_with(b":") {
        return Err(Malformed::PseudoInTrailers);
    }
    if !lower_token(name) {
        return Err(Malformed::BadName);
    }
    if !valid_value(value) {
        return Err(Malformed::BadValue);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(fields: &[(&str, &str)]) -> Result<Head, Malformed> {
        let mut f = Fields::new();
        let limits = Limits::default();
        for (n, v) in fields {
            f.field(n.as_bytes(), v.as_bytes(), &limits)?;
        }
        f.finish()
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a/b?x=1"),
    ];

    #[test]
    fn a_request_reads_as_over_http11() {
        let mut fields = GET.to_vec();
        fields.extend([
            ("range", "bytes=0-1"),
            ("if-none-match", "\"a\""),
            ("if-none-match", "\"b\""),
        ]);
        let h = build(&fields).unwrap();
        let r = h.request;
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.version, Version::Http2);
        assert_eq!((r.path.as_str(), r.query.as_deref()), ("/a/b", Some("x=1")));
        assert_eq!(r.host.as_deref(), Some("example.com"));
        assert_eq!(r.range.as_deref(), Some("bytes=0-1"));
        assert_eq!(r.if_none_match.as_deref(), Some("\"a\", \"b\""));
        assert!(r.keep_alive);
        let h = build(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("host", "h:8080"),
        ])
        .unwrap();
        assert_eq!(h.request.host.as_deref(), Some("h:8080"));
    }

    #[test]
    fn malformed_blocks_are_refused() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut f = GET.to_vec();
            f.extend_from_slice(extra);
            build(&f).err()
        };
        assert!(with(&[("Accept", "x")]).is_some(), "upper case");
        assert!(with(&[("connection", "close")]).is_some());
        assert!(with(&[("te", "gzip")]).is_some());
        assert!(with(&[("te", "trailers")]).is_none());
        assert!(with(&[(":path", "/again")]).is_some(), "a pseudo twice");
        assert!(with(&[("x", "a"), (":status", "200")]).is_some());
        assert!(with(&[("x", " a")]).is_some(), "a leading blank");
        assert!(with(&[("content-length", "1"), ("content-length", "2")]).is_some());
        assert!(with(&[("host", "other.example")]).is_some());
        assert!(
            build(&[(":method", "GET"), (":path", "/")]).is_err(),
            "no :scheme"
        );
        assert!(build(&[(":method", "GET"), (":scheme", "http"), (":path", "")]).is_err());
        assert!(build(&[(":scheme", "http"), (":path", "/")]).is_err());
        assert!(build(&[(":method", "GET"), (":scheme", "http"), (":path", "a")]).is_err());
        assert_eq!(
            build(&[(":method", "BREW"), (":scheme", "http"), (":path", "/")]).err(),
            Some(Malformed::UnknownMethod)
        );
    }

    proptest::proptest! {
        /// One builder: fields that mean the same in both versions make the same
        /// request from an HTTP/1.1 head and from an HTTP/2 block.
        #[test]
        fn the_same_fields_make_the_same_request_over_both(
            picks in proptest::collection::vec((0usize..12, "[a-z0-9=\",;/ -]{0,12}"), 0..10)
        ) {
            const NAMES: [&str; 12] = [
                "range", "if-match", "if-none-match", "if-modified-since",
                "if-unmodified-since", "if-range", "accept-encoding", "user-agent",
                "referer", "origin", "x-forwarded-for", "authorization",
            ];
            let limits = Limits {
                client_fields: true,
                cors: true,
                authorization: true,
                forwarded: Some(crate::forwarded::Header::XForwardedFor),
                ..Limits::default()
            };
            let fields: Vec<(&str, String)> = picks
                .iter()
                .map(|(i, v)| (NAMES[*i], v.trim_matches(' ').to_string()))
                .collect();
            let mut text = String::from("GET /a?b HTTP/1.1\r\nhost: h\r\n");
            let mut f = Fields::new();
            for (n, v) in [(":method", "GET"), (":scheme", "https"), (":path", "/a?b"), (":authority", "h")] {
                f.field(n.as_bytes(), v.as_bytes(), &limits).unwrap();
            }
            for (n, v) in &fields {
                text.push_str(&format!("{n}: {v}\r\n"));
                f.field(n.as_bytes(), v.as_bytes(), &limits).unwrap();
            }
            text.push_str("\r\n");
            let request::Parse::Complete { request: mut h1, .. } = request::parse(text.as_bytes(), &limits) else {
                panic!("not a request: {text:?}");
            };
            let h2 = f.finish().unwrap().request;
            h1.version = Version::Http2;
            proptest::prop_assert_eq!(h1, h2);
        }
    }
}
