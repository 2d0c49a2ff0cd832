//! One builder of a [`Request`] for every protocol. A protocol reads its own framing
//! (HTTP/1.1's request line, `Connection` and `Transfer-Encoding`; HTTP/2's
//! pseudo-header fields and its ban on connection-specific fields) and hands every
//! other field here, where each field means the same in every version: `Host`,
//! `Content-Length`, the validators, `Range`, `Accept-Encoding`, and the fields a
//! server asks to keep ([`Limits`]: the log's, CORS's, credentials, the forwarding
//! header). HTTP/3 (RFC 9114 §4.3) hands its fields to the same builder.

use super::{Body, CorsFields, Limits, Method, Request, Version};

/// Why a field the builder reads cannot be taken: each protocol names it in its own
/// terms ([`crate::refusal::Refusal`] for HTTP/1.x, a malformed block for HTTP/2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `Host` or `Content-Length` with a byte that is not text (obs-text is allowed in
    /// values, but none of the fields read may carry it).
    NotText,
    /// A `Content-Length` that is not one decimal number.
    BadContentLength,
    /// A second `Content-Length`: any over HTTP/1.x, one that differs over HTTP/2.
    SecondContentLength,
}

/// A request as its fields arrive.
pub struct Builder {
    /// Boxed from the start: the request leaves boxed, and the builder moves as a
    /// pointer, not as the request's few hundred bytes.
    r: Box<Request>,
    /// The last `Host` field, trimmed.
    host: Option<String>,
    /// How many `Host` fields came.
    hosts: u32,
    content_length: Option<u64>,
}

impl Builder {
    /// A request with no field yet: keep-alive is the protocol's to say at
    /// [`Builder::finish`].
    pub fn new(method: Method, version: Version, path: String, query: Option<String>) -> Builder {
        Builder {
            r: Box::new(Request {
                method,
                version,
                path,
                query,
                host: None,
                keep_alive: false,
                body: Body::None,
                range: None,
                if_match: None,
                if_none_match: None,
                if_modified_since: None,
                if_unmodified_since: None,
                if_range: None,
                user_agent: None,
                referer: None,
                forwarded: None,
                secure: false,
                cors: None,
                authorization: None,
                admitted: false,
                accept_encoding: None,
            }),
            host: None,
            hosts: 0,
            content_length: None,
        }
    }

    /// Sets the method, the path and the query, for a protocol that learns them
    /// after its other fields (HTTP/2's pseudo-header fields may come in any order).
    pub fn target(&mut self, method: Method, path: String, query: Option<String>) {
        self.r.method = method;
        self.r.path = path;
        self.r.query = query;
    }

    /// Takes one field that the protocol does not read itself. A field no one reads
    /// is ignored.
    pub fn field(&mut self, name: &str, value: &[u8], limits: &Limits) -> Result<(), Fault> {
        if self.kept(name, value, limits) {
            return Ok(());
        }
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        let Ok(value) = std::str::from_utf8(value) else {
            if is("host") || is("content-length") {
                return Err(Fault::NotText);
            }
            return Ok(());
        };
        let value = value.trim_matches([' ', '\t']);
        if is("host") {
            self.hosts += 1;
            self.host = Some(value.to_string());
        } else if is("content-length") {
            if self.content_length.is_some() && self.r.version != Version::Http2 {
                return Err(Fault::SecondContentLength);
            }
            let n = super::parse_content_length(value).ok_or(Fault::BadContentLength)?;
            if self.content_length.is_some_and(|m| m != n) {
                return Err(Fault::SecondContentLength);
            }
            self.content_length = Some(n);
        } else if is("range") {
            self.r.range = Some(value.to_string());
        } else if is("if-match") {
            append(&mut self.r.if_match, value);
        } else if is("if-none-match") {
            append(&mut self.r.if_none_match, value);
        } else if is("if-modified-since") {
            self.r.if_modified_since = Some(value.to_string());
        } else if is("if-unmodified-since") {
            self.r.if_unmodified_since = Some(value.to_string());
        } else if is("if-range") {
            self.r.if_range = Some(value.to_string());
        } else if is("accept-encoding") {
            self.r
                .accept_encoding
                .get_or_insert_with(Default::default)
                .add(value);
        }
        Ok(())
    }

    /// How many `Host` fields came.
    pub fn hosts(&self) -> u32 {
        self.hosts
    }

    /// The last `Host` field, trimmed.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The `Content-Length` field's number, when one came.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The request: its authority (an absolute target's or `:authority`, as the
    /// protocol has checked it; none: the `Host` field's; empty is none), its body's
    /// framing and whether the connection stays open after it.
    pub fn finish(
        mut self,
        authority: Option<String>,
        body: Body,
        keep_alive: bool,
    ) -> Box<Request> {
        self.r.host = authority.or(self.host).filter(|h| !h.is_empty());
        self.r.body = body;
        self.r.keep_alive = keep_alive;
        self.r
    }

    /// Keeps a field the limits ask for (credentials, CORS's, the forwarding header,
    /// the log's): true if `name` was one of them.
    fn kept(&mut self, name: &str, v: &[u8], limits: &Limits) -> bool {
        let r = &mut *self.r;
        if limits.authorization && name.eq_ignore_ascii_case("authorization") {
            // Credentials that are not UTF-8 are none the server could take.
            r.authorization = std::str::from_utf8(v).ok().map(|t| t.trim().to_string());
            return true;
        }
        if limits.cors {
            let which = [
                "origin",
                "access-control-request-method",
                "access-control-request-headers",
            ]
            .iter()
            .position(|n| name.eq_ignore_ascii_case(n));
            if let Some(i) = which {
                let text = String::from_utf8_lossy(v);
                let text = text.trim_matches([' ', '\t']);
                let c: &mut CorsFields = r.cors.get_or_insert_with(Default::default);
                match i {
                    0 => c.origin = Some(text.to_string()),
                    1 => c.request_method = Some(text.to_string()),
                    _ => append(&mut c.request_headers, text),
                }
                return true;
            }
        }
        if let Some(h) = limits.forwarded {
            if name.eq_ignore_ascii_case(h.name()) {
                // A chain with bytes no address has names no client past them: kept
                // as text, a non-ASCII byte ends the walk there (read as "unknown").
                let v = String::from_utf8_lossy(v);
                append(&mut r.forwarded, v.trim_matches([' ', '\t']));
                return true;
            }
        }
        if !limits.client_fields {
            return false;
        }
        let slot = if name.eq_ignore_ascii_case("user-agent") {
            &mut r.user_agent
        } else if name.eq_ignore_ascii_case("referer") {
            &mut r.referer
        } else {
            return false;
        };
        // Any byte, UTF-8 or not: a client must not hide its name from the log.
        let start = v
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .unwrap_or(v.len());
        let end = v
            .iter()
            .rposition(|&b| b != b' ' && b != b'\t')
            .map_or(start, |e| e + 1);
        *slot = Some(v[start..end].to_vec());
        true
    }
}

fn append(slot: &mut Option<String>, value: &str) {
    match slot {
        Some(s) => {
            s.push_str(", ");
            s.push_str(value);
        }
        None => *slot = Some(value.to_string()),
    }
}
