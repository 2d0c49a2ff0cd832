//! What a response says besides its fields ([`crate::fields`]): dates, content ranges,
//! and the framing of `multipart/byteranges` bodies, as bytes.

use std::time::SystemTime;

use crate::range::ByteRange;

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
