//! Response heads, and the framing of `multipart/byteranges` bodies, as bytes.

use std::time::SystemTime;

use crate::range::ByteRange;
use crate::Status;

/// A response head being built.
#[derive(Clone, Debug)]
pub struct Head {
    buf: Vec<u8>,
}

impl Head {
    /// Status line, `Server` and `Date`.
    pub fn new(status: Status, date: &str) -> Head {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(b"HTTP/1.1 ");
        buf.extend_from_slice(itoa::Buffer::new().format(status.code()).as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(status.reason().as_bytes());
        buf.extend_from_slice(b"\r\nServer: linerate\r\nDate: ");
        buf.extend_from_slice(date.as_bytes());
        buf.extend_from_slice(b"\r\n");
        Head { buf }
    }

    /// Adds a field: written as [`Lines::field`] writes it.
    pub fn field(&mut self, name: &str, value: &str) -> &mut Head {
        write_field(&mut self.buf, name, value);
        self
    }

    /// Adds field lines written before (a file's own fields, the same in each of its
    /// answers).
    pub fn lines(&mut self, lines: &Lines) -> &mut Head {
        self.buf.extend_from_slice(&lines.0);
        self
    }

    /// `Content-Length`.
    pub fn content_length(&mut self, n: u64) -> &mut Head {
        self.field("Content-Length", itoa::Buffer::new().format(n))
    }

    /// Ends the head: `Connection: close` when the connection will close, then the
    /// empty line.
    pub fn finish(mut self, keep_alive: bool) -> Vec<u8> {
        if !keep_alive {
            self.buf.extend_from_slice(b"Connection: close\r\n");
        }
        self.buf.extend_from_slice(b"\r\n");
        self.buf
    }
}

/// Field lines written once, to be added to many heads ([`Head::lines`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lines(Vec<u8>);

impl Lines {
    /// Adds a field. This is the one place every field the server writes goes
    /// through ([`Head::field`] too): a value holds only visible ASCII and spaces, and
    /// any other byte (a control byte, TAB, CR, LF, DEL, anything past ASCII) is
    /// written percent-encoded, so no value can end its line or start another whatever
    /// reached it. A name is always the server's own or a configured token.
    pub fn field(&mut self, name: &str, value: &str) -> &mut Lines {
        write_field(&mut self.0, name, value);
        self
    }

    /// `Content-Length`.
    pub fn content_length(&mut self, n: u64) -> &mut Lines {
        self.field("Content-Length", itoa::Buffer::new().format(n))
    }
}

fn write_field(buf: &mut Vec<u8>, name: &str, value: &str) {
    debug_assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':'));
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b": ");
    let fits = |b: u8| b == b' ' || b.is_ascii_graphic();
    // Every byte looked at, no early exit: the compiler checks many at a time.
    if value
        .bytes()
        .fold(true, |ok, b| ok & (b.wrapping_sub(b' ') < 0x7f - b' '))
    {
        // Nearly always: the value is written as it is.
        buf.extend_from_slice(value.as_bytes());
    } else {
        for &b in value.as_bytes() {
            if fits(b) {
                buf.push(b);
            } else {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                buf.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            }
        }
    }
    buf.extend_from_slice(b"\r\n");
}

/// An HTTP date (IMF-fixdate).
pub fn http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// `Content-Range` of one part: `bytes START-END/LEN`.
pub fn content_range(r: ByteRange, len: u64) -> String {
    format!("bytes {}-{}/{}", r.start, r.end - 1, len)
}

/// The framing of a `multipart/byteranges` body: each part's header (to send before
/// the part's bytes) and the closing delimiter, with the exact total length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Multipart {
    /// The boundary.
    pub boundary: String,
    /// Per range: the bytes to send before its data.
    pub part_heads: Vec<Vec<u8>>,
    /// The bytes after the last part.
    pub trailer: Vec<u8>,
    /// The whole body's length.
    pub content_length: u64,
}

impl Multipart {
    /// Frames `ranges` of a `len`-byte representation of `content_type`; `boundary` must
    /// not occur in the content (callers make it from random bits).
    pub fn new(ranges: &[ByteRange], len: u64, content_type: &str, boundary: &str) -> Multipart {
        let part_heads: Vec<Vec<u8>> = ranges
            .iter()
            .map(|r| {
                format!(
                    "\r\n--{boundary}\r\nContent-Type: {content_type}\r\nContent-Range: {}\r\n\r\n",
                    content_range(*r, len)
                )
                .into_bytes()
            })
            .collect();
        let trailer = format!("\r\n--{boundary}--\r\n").into_bytes();
        let content_length = part_heads.iter().map(|h| h.len() as u64).sum::<u64>()
            + ranges.iter().map(ByteRange::len).sum::<u64>()
            + trailer.len() as u64;
        Multipart {
            boundary: boundary.to_string(),
            part_heads,
            trailer,
            content_length,
        }
    }

    /// The `Content-Type` of the whole response.
    pub fn content_type(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_bytes() {
        let mut h = Head::new(Status::Ok, "Sun, 06 Nov 1994 08:49:37 GMT");
        h.content_length(5).field("Content-Type", "text/plain");
        assert_eq!(
            String::from_utf8(h.finish(false)).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 5\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        );
    }

    /// Rules: docs/http.md F2.
    #[test]
    fn a_field_value_cannot_end_its_line() {
        let mut h = Head::new(Status::Ok, "D");
        h.field("Location", "/a\r\nSet-Cookie: x=1\t\u{7f}\u{e9} b");
        let text = String::from_utf8(h.finish(true)).unwrap();
        assert!(
            text.contains("Location: /a%0D%0ASet-Cookie: x=1%09%7F%C3%A9 b\r\n\r\n"),
            "{text}"
        );
    }

    #[test]
    fn multipart_length_is_exact() {
        let ranges = [
            ByteRange {
                start: 500,
                end: 600,
            },
            ByteRange { start: 0, end: 10 },
        ];
        let m = Multipart::new(&ranges, 1000, "text/plain", "B0UND");
        let mut body = Vec::new();
        for (h, r) in m.part_heads.iter().zip(&ranges) {
            body.extend_from_slice(h);
            body.extend(std::iter::repeat_n(b'x', r.len() as usize));
        }
        body.extend_from_slice(&m.trailer);
        assert_eq!(body.len() as u64, m.content_length);
        assert!(
            String::from_utf8_lossy(&m.part_heads[0]).contains("Content-Range: bytes 500-599/1000")
        );
        assert_eq!(m.content_type(), "multipart/byteranges; boundary=B0UND");
    }
}
