//! The one HTTP/1.1 response parser of the tests, and the checks every response of
//! `linerate serve` must pass: an `HTTP/1.1` status line, `Server: linerate`, a current
//! `Date`, `Content-Length` (none on 304), no chunking, and for errors a short
//! `text/plain` body.

use crate::dates::{parse_imf_date, unix_now};
use crate::files::assert_bytes_eq;

/// Statuses whose responses carry a short `text/plain` body.
pub const ERROR_STATUSES: [u16; 10] = [400, 403, 404, 405, 412, 414, 416, 431, 501, 503];

/// A parsed response.
pub struct Response {
    pub status: u16,
    pub reason: String,
    /// In order, names as sent, values without surrounding blanks.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.reason)?;
        for (n, v) in &self.headers {
            write!(f, "\n  {n}: {v}")?;
        }
        let shown = &self.body[..self.body.len().min(200)];
        write!(
            f,
            "\n  [{} body bytes] {:?}",
            self.body.len(),
            String::from_utf8_lossy(shown)
        )
    }
}

impl Response {
    /// The field `name` (any case); it must not appear twice.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut all = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        let first = all.next();
        assert!(all.next().is_none(), "{name} twice in {self:?}");
        first
    }

    /// The field `name`, which must be there.
    pub fn must(&self, name: &str) -> &str {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} in {self:?}"))
    }

    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length")
            .map(|v| v.parse().unwrap_or_else(|_| panic!("Content-Length {v:?}")))
    }

    /// The server says it will close the connection.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }

    /// All fields but `Date`, names lower-cased, sorted.
    pub fn headers_except_date(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        v.sort();
        v
    }
}

/// Where `needle` first occurs in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parses the response at the start of `buf`; `head`: it answers a HEAD (no body). None
/// while incomplete; else the response and the bytes it took. Checks what every
/// response carries ([`check_common`]).
pub fn parse_response(buf: &[u8], head: bool) -> Option<(Response, usize)> {
    let end = find(buf, b"\r\n\r\n")? + 4;
    let text = std::str::from_utf8(&buf[..end - 4]).unwrap_or_else(|_| {
        panic!(
            "response head not UTF-8: {:?}",
            String::from_utf8_lossy(&buf[..end])
        )
    });
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let (code, reason) = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.split_once(' '))
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    assert!(
        code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()) && !reason.is_empty(),
        "status line {status_line:?}"
    );
    let mut headers = Vec::new();
    for line in lines {
        let (n, v) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("header line {line:?} in {text:?}"));
        assert!(
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()),
            "header name {n:?}"
        );
        assert!(!line.contains(['\r', '\n']), "bare CR or LF in {line:?}");
        headers.push((n.to_string(), v.trim_matches([' ', '\t']).to_string()));
    }
    let mut r = Response {
        status: code.parse().unwrap(),
        reason: reason.to_string(),
        headers,
        body: Vec::new(),
    };
    assert!(
        r.header("transfer-encoding").is_none(),
        "responses are never chunked: {r:?}"
    );
    // RFC 9112 6.3: a 204 or 304 ends at its head, and (RFC 9110 8.6) a 204 sends no
    // Content-Length; ours never do.
    let len = if r.status == 304 || r.status == 204 {
        assert!(
            r.header("content-length").is_none(),
            "a {} has no Content-Length: {r:?}",
            r.status
        );
        0
    } else {
        let cl = r
            .content_length()
            .unwrap_or_else(|| panic!("no Content-Length: {r:?}"));
        if head {
            0
        } else {
            usize::try_from(cl).unwrap()
        }
    };
    if buf.len() < end + len {
        return None;
    }
    r.body = buf[end..end + len].to_vec();
    check_common(&r);
    Some((r, end + len))
}

/// What every response carries.
pub fn check_common(r: &Response) {
    assert_eq!(r.header("server"), Some("linerate"), "{r:?}");
    let date = r.must("date");
    let t = parse_imf_date(date).unwrap_or_else(|| panic!("Date {date:?} is no IMF-fixdate"));
    assert!((t - unix_now()).abs() <= 30, "Date {date:?} is not now");
    if ERROR_STATUSES.contains(&r.status) {
        // text/plain, or the type of a configured error page (expect_error_body checks
        // the server's own).
        let ct = r.header("content-type").unwrap_or("");
        assert!(!ct.is_empty(), "error without a Content-Type: {r:?}");
        assert!(
            r.content_length().unwrap_or(0) > 0,
            "error without a body: {r:?}"
        );
    }
    if r.status == 405 {
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{r:?}");
    }
}

/// Back-to-back responses filling `buf` exactly; `heads[i]`: the i-th answers a HEAD
/// (missing entries: GET).
pub fn parse_all(buf: &[u8], heads: &[bool]) -> Vec<Response> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let head = heads.get(out.len()).copied().unwrap_or(false);
        match parse_response(&buf[at..], head) {
            Some((r, n)) => {
                out.push(r);
                at += n;
            }
            None => panic!(
                "incomplete response after {} complete ones: {:?}",
                out.len(),
                String::from_utf8_lossy(&buf[at..buf.len().min(at + 400)])
            ),
        }
    }
    out
}

/// What a comparison of two answers looks at: status, `Connection: close`, body.
pub fn answers(rs: &[Response]) -> Vec<(u16, bool, Vec<u8>)> {
    rs.iter()
        .map(|r| (r.status, r.closes(), r.body.clone()))
        .collect()
}

/// `bytes FIRST-LAST/LEN` into its numbers.
pub fn content_range(v: &str) -> (u64, u64, u64) {
    let parse = || -> Option<(u64, u64, u64)> {
        let (span, len) = v.strip_prefix("bytes ")?.split_once('/')?;
        let (a, b) = span.split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?, len.parse().ok()?))
    };
    let (a, b, len) = parse().unwrap_or_else(|| panic!("Content-Range {v:?}"));
    assert!(a <= b && b < len, "Content-Range {v:?} out of bounds");
    (a, b, len)
}

/// The parts of a `multipart/byteranges` body: (Content-Range, Content-Type, data), each
/// part's length taken from its Content-Range and the framing checked byte by byte.
pub fn multipart_parts(r: &Response) -> Vec<(String, String, Vec<u8>)> {
    let ct = r.must("content-type");
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart/byteranges: {r:?}"))
        .trim_matches('"');
    assert!(!boundary.is_empty(), "empty boundary: {r:?}");
    let delimiter = format!("\r\n--{boundary}").into_bytes();
    // The first delimiter's CRLF may be left out.
    let body: Vec<u8> = if r.body.starts_with(&delimiter[2..]) {
        [&b"\r\n"[..], &r.body[..]].concat()
    } else {
        r.body.clone()
    };
    assert!(
        body.starts_with(&delimiter),
        "body does not open with the boundary: {r:?}"
    );
    let mut parts = Vec::new();
    let mut at = delimiter.len();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            assert!(
                rest == b"--\r\n" || rest == b"--",
                "bytes after the close delimiter: {:?}",
                String::from_utf8_lossy(rest)
            );
            return parts;
        }
        assert!(
            rest.starts_with(b"\r\n"),
            "no CRLF after a delimiter: {:?}",
            String::from_utf8_lossy(&rest[..rest.len().min(100)])
        );
        let head_end = find(rest, b"\r\n\r\n").expect("a part head");
        assert!(head_end > 2, "a part without fields");
        let head = std::str::from_utf8(&rest[2..head_end]).expect("ASCII part head");
        let (mut range, mut ctype) = (None, None);
        for line in head.split("\r\n") {
            let (n, v) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("part field {line:?}"));
            if n.eq_ignore_ascii_case("content-range") {
                range = Some(v.trim().to_string());
            } else if n.eq_ignore_ascii_case("content-type") {
                ctype = Some(v.trim().to_string());
            }
        }
        let range = range.unwrap_or_else(|| panic!("a part without Content-Range: {head:?}"));
        let ctype = ctype.unwrap_or_else(|| panic!("a part without Content-Type: {head:?}"));
        let (first, last, _) = content_range(&range);
        let len = usize::try_from(last - first + 1).unwrap();
        let data_start = head_end + 4;
        assert!(rest.len() >= data_start + len, "part {range} cut short");
        let data = rest[data_start..data_start + len].to_vec();
        assert!(
            rest[data_start + len..].starts_with(&delimiter),
            "part {range} is not followed by the boundary"
        );
        parts.push((range, ctype, data));
        at += data_start + len + delimiter.len();
    }
}

/// The short body every error carries: `STATUS REASON\n`.
pub fn expect_error_body(r: &Response, status: u16, reason: &str) {
    assert_eq!((r.status, r.reason.as_str()), (status, reason), "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/plain"), "{r:?}");
    assert_eq!(r.body, format!("{status} {reason}\n").into_bytes(), "{r:?}");
}

/// A multipart/byteranges 206 with exactly the parts `want`, in that order.
pub fn expect_parts(r: &Response, ctype: &str, content: &[u8], want: &[(u64, u64)]) {
    assert_eq!(r.status, 206, "{r:?}");
    assert!(r.header("content-range").is_none(), "{r:?}");
    let parts = multipart_parts(r);
    assert_eq!(parts.len(), want.len(), "{r:?}");
    for ((range, pct, data), &(a, b)) in parts.iter().zip(want) {
        assert_eq!(range, &format!("bytes {a}-{b}/{}", content.len()));
        assert_eq!(pct, ctype, "part Content-Type");
        assert_bytes_eq(data, &content[a as usize..=b as usize], range);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dates::imf_date;

    /// A response head as the server writes it, dated now.
    fn head(status: &str, fields: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\nServer: linerate\r\nDate: {}\r\n{fields}\r\n",
            imf_date(unix_now())
        )
    }

    #[test]
    fn back_to_back_responses_head_and_304_included() {
        let buf = [
            head(
                "200 OK",
                "Content-Length: 5\r\nContent-Type: text/plain\r\n",
            ) + "hello",
            head("200 OK", "Content-Length: 5\r\n"),
            head("304 Not Modified", "ETag: \"x\"\r\n"),
            head(
                "404 Not Found",
                "Content-Type: text/plain\r\nContent-Length: 14\r\nConnection: close\r\n",
            ) + "404 Not Found\n",
        ]
        .concat();
        let rs = parse_all(buf.as_bytes(), &[false, true]);
        assert_eq!(
            answers(&rs),
            [
                (200, false, b"hello".to_vec()),
                (200, false, vec![]),
                (304, false, vec![]),
                (404, true, b"404 Not Found\n".to_vec()),
            ]
        );
        assert_eq!(rs[0].header("content-type"), Some("text/plain"));
        assert_eq!(rs[1].content_length(), Some(5));
        assert_eq!(rs[2].must("ETAG"), "\"x\"");
        expect_error_body(&rs[3], 404, "Not Found");
    }

    #[test]
    fn an_incomplete_response_is_none() {
        let whole = head("200 OK", "Content-Length: 5\r\n") + "hello";
        for cut in [0, 10, whole.len() - 6, whole.len() - 1] {
            assert!(parse_response(&whole.as_bytes()[..cut], false).is_none());
        }
        let (r, n) = parse_response(whole.as_bytes(), false).unwrap();
        assert_eq!((r.body.as_slice(), n), (&b"hello"[..], whole.len()));
    }

    #[test]
    #[should_panic(expected = "is no IMF-fixdate")]
    fn a_date_in_an_obsolete_format_fails() {
        let buf = "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Sun Nov  6 08:49:37 1994\r\nContent-Length: 0\r\n\r\n";
        parse_response(buf.as_bytes(), false);
    }

    #[test]
    #[should_panic(expected = "error without a Content-Type")]
    fn an_error_without_a_type_fails() {
        let buf = head("404 Not Found", "Content-Length: 0\r\n");
        parse_response(buf.as_bytes(), false);
    }

    #[test]
    #[should_panic(expected = "error without a body")]
    fn an_error_without_a_body_fails() {
        let buf = head(
            "404 Not Found",
            "Content-Type: text/plain\r\nContent-Length: 0\r\n",
        );
        parse_response(buf.as_bytes(), false);
    }

    #[test]
    fn multipart_parts_and_content_ranges() {
        let content = b"0123456789";
        let body = "\r\n--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 1-2/10\r\n\r\n12\
                    \r\n--B\r\nContent-Type: text/plain\r\nContent-Range: bytes 7-9/10\r\n\r\n789\
                    \r\n--B--\r\n";
        let buf = head(
            "206 Partial Content",
            &format!(
                "Content-Type: multipart/byteranges; boundary=B\r\nContent-Length: {}\r\n",
                body.len()
            ),
        ) + body;
        let rs = parse_all(buf.as_bytes(), &[]);
        expect_parts(&rs[0], "text/plain", content, &[(1, 2), (7, 9)]);
        assert_eq!(content_range("bytes 0-0/1"), (0, 0, 1));
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn a_content_range_past_its_length_fails() {
        content_range("bytes 5-10/10");
    }
}
