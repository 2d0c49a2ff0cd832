//! Field blocks (RFC 7541). Decoding is `loona-hpack`'s, a decoder made to pass h2spec
//! (its dynamic table, Huffman strings, the size-update rules); around it, the bound on
//! what a block may decode to. Encoding is ours and needs no state: `:status` and names
//! from the static table, every value a literal that is never added to a table, so the
//! client's decoder keeps nothing of ours and no table-size setting matters (measured
//! against a dynamic table in BENCHMARKS.md, "HTTP/2 heads").

use super::frame::ErrorCode;

/// The dynamic table size this server allows the client's encoder (the default of
/// SETTINGS_HEADER_TABLE_SIZE, which it does not change).
const TABLE_SIZE: usize = 4096;

/// How many times the field section limit a block may decode to before the
/// connection ends (an HPACK bomb: one byte naming a large table entry, again and
/// again). Up to it, the block is decoded and the request refused with 431.
const BOMB_FACTOR: usize = 4;

/// Why a block did not decode.
pub(crate) enum DecodeError {
    /// Not valid HPACK: COMPRESSION_ERROR.
    Invalid,
    /// It decodes to far more than the limit: ENHANCE_YOUR_CALM.
    Bomb,
}

impl DecodeError {
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Invalid => ErrorCode::CompressionError,
            DecodeError::Bomb => ErrorCode::EnhanceYourCalm,
        }
    }
}

/// The connection's decoder.
pub(crate) struct Decoder {
    inner: loona_hpack::Decoder<'static>,
}

impl Decoder {
    pub fn new() -> Decoder {
        let mut inner = loona_hpack::Decoder::new();
        inner.set_max_allowed_table_size(TABLE_SIZE);
        Decoder { inner }
    }

    /// Decodes a whole block, giving each field to `field` while the section (names,
    /// values, and 32 bytes a field, as RFC 9113 counts it) stays within `limit`;
    /// `Ok(false)` if it went past (the fields past it are decoded, for the table's
    /// sake, and dropped).
    pub fn decode(
        &mut self,
        block: &[u8],
        limit: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<bool, DecodeError> {
        let mut size = 0usize;
        let mut bomb = false;
        self.inner
            .decode_with_cb(block, |n, v| {
                size = size.saturating_add(n.len() + v.len() + 32);
                if size <= limit {
                    field(&n, &v);
                } else if size > BOMB_FACTOR * limit {
                    bomb = true;
                }
            })
            .map_err(|_| DecodeError::Invalid)?;
        if bomb {
            return Err(DecodeError::Bomb);
        }
        Ok(size <= limit)
    }
}

/// The static table's entries a response uses (RFC 7541 Appendix A): name, index.
const STATIC_NAMES: &[(&str, u8)] = &[
    ("accept-ranges", 18),
    ("access-control-allow-origin", 20),
    ("age", 21),
    ("allow", 22),
    ("cache-control", 24),
    ("content-disposition", 25),
    ("content-encoding", 26),
    ("content-language", 27),
    ("content-length", 28),
    ("content-location", 29),
    ("content-range", 30),
    ("content-type", 31),
    ("date", 33),
    ("etag", 34),
    ("expires", 36),
    ("last-modified", 44),
    ("link", 45),
    ("location", 46),
    ("proxy-authenticate", 48),
    ("refresh", 52),
    ("retry-after", 53),
    ("server", 54),
    ("set-cookie", 55),
    ("strict-transport-security", 56),
    ("transfer-encoding", 57),
    ("vary", 59),
    ("via", 60),
    ("www-authenticate", 61),
];

/// Appends an integer with an `n`-bit prefix (RFC 7541 §5.1) whose other bits are
/// `first`.
fn integer(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// Appends a string literal, without Huffman coding.
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Appends a dynamic table size update (RFC 7541 §6.3).
pub(crate) fn encode_table_size(out: &mut Vec<u8>, size: usize) {
    integer(out, 0x20, 5, size);
}

/// Appends `:status`: one byte for the codes the static table has.
pub(crate) fn encode_status(out: &mut Vec<u8>, code: u16) {
    let index = match code {
        200 => 8,
        204 => 9,
        206 => 10,
        304 => 11,
        400 => 12,
        404 => 13,
        500 => 14,
        _ => 0,
    };
    if index > 0 {
        out.push(0x80 | index);
    } else {
        // Literal without indexing, the name `:status` (index 8).
        integer(out, 0x00, 4, 8);
        string(out, code.to_string().as_bytes());
    }
}

/// Appends a field, its name lower-cased: a literal never added to a table, its name
/// from the static table when it is there.
pub(crate) fn encode_field(out: &mut Vec<u8>, name: &str, value: &str) {
    let lower = name.to_ascii_lowercase();
    match STATIC_NAMES.iter().find(|(n, _)| *n == lower) {
        Some((_, i)) => integer(out, 0x00, 4, usize::from(*i)),
        None => {
            out.push(0x00);
            string(out, lower.as_bytes());
        }
    }
    string(out, value.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn decode(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(block, 1 << 16, &mut |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .ok()
        .expect("decodes");
        out
    }

    /// RFC 7541 C.4: three requests with Huffman coding, sharing one dynamic table.
    #[test]
    fn the_rfc_7541_request_examples_decode() {
        let mut d = Decoder::new();
        let first = decode(&mut d, &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"));
        assert_eq!(
            first,
            [
                (":method".into(), "GET".into()),
                (":scheme".into(), "http".into()),
                (":path".into(), "/".into()),
                (":authority".into(), "www.example.com".into()),
            ]
        );
        let second = decode(&mut d, &hex("8286 84be 5886 a8eb 1064 9cbf"));
        assert_eq!(second[3], (":authority".into(), "www.example.com".into()));
        assert_eq!(second[4], ("cache-control".into(), "no-cache".into()));
        let third = decode(
            &mut d,
            &hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf"),
        );
        assert_eq!(third[2], (":path".into(), "/index.html".into()));
        assert_eq!(third[4], ("custom-key".into(), "custom-value".into()));
    }

    #[test]
    fn what_we_encode_decodes_to_what_we_meant() {
        let mut block = Vec::new();
        for code in [200, 206, 304, 404, 416, 503] {
            block.clear();
            encode_status(&mut block, code);
            encode_field(&mut block, "Content-Type", "text/html; charset=utf-8");
            encode_field(&mut block, "X-Long", &"v".repeat(300));
            let got = decode(&mut Decoder::new(), &block);
            assert_eq!(got[0], (":status".into(), code.to_string()));
            assert_eq!(
                got[1],
                ("content-type".into(), "text/html; charset=utf-8".into())
            );
            assert_eq!(got[2], ("x-long".into(), "v".repeat(300)));
        }
    }

    /// A size update at the end of a block, or above the table size allowed, is a
    /// decoding error (RFC 7541 §4.2, §6.3).
    #[test]
    fn size_updates_out_of_place_or_too_large_are_refused() {
        let mut d = Decoder::new();
        assert!(d
            .decode(&hex("82 3f e1 1f"), 1 << 16, &mut |_, _| {})
            .is_err());
        let mut d = Decoder::new();
        assert!(d
            .decode(&hex("3f e1 ff 03 82"), 1 << 16, &mut |_, _| {})
            .is_err());
    }

    /// One byte per field naming a large table entry: past the limit the fields are
    /// dropped; far past it the block is refused.
    #[test]
    fn a_block_that_decodes_to_too_much_is_bounded() {
        let mut d = Decoder::new();
        // Literal with incremental indexing, new name "x", a 3000-byte value; then the
        // entry (index 62) named again and again.
        let mut block = vec![0x40];
        string(&mut block, b"x");
        string(&mut block, &[b'a'; 3000]);
        block.extend(std::iter::repeat_n(0x80 | 62, 3));
        let mut n = 0;
        assert!(matches!(
            d.decode(&block, 8000, &mut |_, _| n += 1),
            Ok(false)
        ));
        assert_eq!(n, 2, "the fields within the limit");
        let mut bomb = vec![0x80 | 62; 100];
        assert!(matches!(
            d.decode(&{ std::mem::take(&mut bomb) }, 8000, &mut |_, _| {}),
            Err(DecodeError::Bomb)
        ));
    }
}
