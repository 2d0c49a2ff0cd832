//! QUIC's variable-length integers (RFC 9000 §16), which HTTP/3 writes every frame type,
//! length, setting and stream type in: the two high bits of the first byte say the
//! length (1, 2, 4 or 8 bytes), the rest is the value, big-endian, up to 2^62 - 1.
//!
//! Reading never fails once the bytes are there (any 62-bit value, in any of the lengths
//! that hold it, is valid: RFC 9000 asks for the shortest form only of QUIC's own frame
//! types), so a reader says only "the value" or "not all here yet"; writing fails only
//! for a value past 2^62 - 1, which no stream id or length the server makes reaches.

/// The largest value a variable-length integer holds: 2^62 - 1.
pub const MAX: u64 = (1 << 62) - 1;

/// A value past [`MAX`], which has no encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge(pub u64);

/// The bytes of the integer whose first byte is `first`.
pub fn len_of(first: u8) -> usize {
    1 << (first >> 6)
}

/// The bytes `v` takes in its shortest encoding (8 past [`MAX`], which has none).
pub fn size(v: u64) -> usize {
    match v {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Reads the integer at the start of `b`: its value and its length, or `None` when `b`
/// ends before it does.
pub fn read(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = len_of(first);
    let bytes = b.get(..len)?;
    let v = bytes[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b));
    Some((v, len))
}

/// Appends `v` in its shortest encoding.
pub fn write(out: &mut Vec<u8>, v: u64) -> Result<(), TooLarge> {
    match size(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ if v <= MAX => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
        _ => return Err(TooLarge(v)),
    }
    Ok(())
}

/// An integer read from a stream whose bytes come in pieces of any size: the bytes of
/// one not yet whole are kept here (at most 7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reader {
    buf: [u8; 8],
    len: u8,
}

impl Reader {
    /// A reader with no byte yet.
    pub fn new() -> Reader {
        Reader::default()
    }

    /// Whether some bytes of an integer have come (and the rest not yet).
    pub fn started(&self) -> bool {
        self.len > 0
    }

    /// Takes from `input` the bytes the integer still lacks: how many it took, and the
    /// value once whole (the reader is then empty again, for the next).
    pub fn read(&mut self, input: &[u8]) -> (usize, Option<u64>) {
        if self.len == 0 {
            // Most integers come whole: read in place.
            if let Some((v, n)) = read(input) {
                return (n, Some(v));
            }
        }
        let Some(&first) = self.buf[..usize::from(self.len)].first().or(input.first()) else {
            return (0, None);
        };
        let need = len_of(first) - usize::from(self.len);
        let take = need.min(input.len());
        let at = usize::from(self.len);
        self.buf[at..at + take].copy_from_slice(&input[..take]);
        self.len += take as u8;
        if take < need {
            return (take, None);
        }
        let v = read(&self.buf[..usize::from(self.len)]).map(|(v, _)| v);
        self.len = 0;
        (take, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9000 Appendix A.1's examples.
    #[test]
    fn the_rfc_9000_examples_read_and_write() {
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, v) in cases {
            assert_eq!(read(bytes), Some((v, bytes.len())));
            let mut out = Vec::new();
            write(&mut out, v).unwrap();
            assert_eq!(out, bytes);
        }
        // 37 in two bytes: valid, if not the shortest.
        assert_eq!(read(&[0x40, 0x25]), Some((37, 2)));
    }

    #[test]
    fn each_length_ends_where_the_next_begins() {
        for (v, n) in [
            (0, 1),
            (63, 1),
            (64, 2),
            (16_383, 2),
            (16_384, 4),
            ((1 << 30) - 1, 4),
            (1 << 30, 8),
            (MAX, 8),
        ] {
            let mut out = Vec::new();
            write(&mut out, v).unwrap();
            assert_eq!((out.len(), size(v)), (n, n), "{v}");
            assert_eq!(read(&out), Some((v, n)));
        }
        assert_eq!(write(&mut Vec::new(), MAX + 1), Err(TooLarge(MAX + 1)));
        assert_eq!(write(&mut Vec::new(), u64::MAX), Err(TooLarge(u64::MAX)));
    }

    #[test]
    fn an_integer_cut_short_is_not_yet_read() {
        assert_eq!(read(&[]), None);
        assert_eq!(read(&[0x40]), None);
        assert_eq!(read(&[0x80, 0, 0]), None);
        assert_eq!(read(&[0xc0, 0, 0, 0, 0, 0, 0]), None);
    }

    #[test]
    fn a_reader_takes_an_integer_one_byte_at_a_time() {
        let bytes = [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c, 0x25];
        let mut r = Reader::new();
        for (i, b) in bytes[..7].iter().enumerate() {
            assert_eq!(r.read(&[*b]), (1, None), "byte {i}");
            assert!(r.started());
        }
        assert_eq!(r.read(&bytes[7..]), (1, Some(151_288_809_941_952_652)));
        assert!(!r.started());
        assert_eq!(r.read(&bytes[8..]), (1, Some(37)));
        assert_eq!(r.read(&[]), (0, None));
    }

    proptest::proptest! {
        /// Any value up to 2^62 - 1 reads back as written, whole or cut anywhere.
        #[test]
        fn values_read_back_as_written(v in 0..=MAX, cut in 0usize..8, tail: u8) {
            let mut out = Vec::new();
            write(&mut out, v).unwrap();
            proptest::prop_assert_eq!(out.len(), size(v));
            out.push(tail);
            proptest::prop_assert_eq!(read(&out), Some((v, size(v))));
            let cut = cut.min(size(v));
            let mut r = Reader::new();
            let (a, first) = r.read(&out[..cut]);
            let (b, second) = match first {
                Some(_) => (0, first),
                None => r.read(&out[cut..]),
            };
            proptest::prop_assert_eq!(a + b, size(v));
            proptest::prop_assert_eq!(second, Some(v));
        }
    }
}
