//! Field blocks (RFC 7541), both ways, written here. The decoder keeps the client's
//! dynamic table and decodes Huffman strings by the canonical code's lengths; around
//! it, the bound on what a block may decode to. The encoder writes no Huffman code:
//! `:status` and names from the static table, values as literals. A worker encodes
//! each head it sends once, from its fields ([`crate::fields::Head`], [`HeadCache`]); a
//! connection's [`Encoder`] adds a head's fields to the client's dynamic table the
//! first time and sends indexes for them after.
//!
//! Why not a crate: `loona-hpack` (made to pass h2spec, and used here first) builds its
//! Huffman decoding table, two levels of hash maps, for every string it decodes; that
//! was 60% of the server's CPU at 1 KiB over HTTP/2 (BENCHMARKS.md, "HTTP/2 heads").
//! RFC 7541's own examples (Appendix C) test this one.

use std::collections::VecDeque;
use std::sync::OnceLock;

use super::frame::ErrorCode;
use crate::fields::Head;

/// The dynamic table size this server allows the client's encoder (the default of
/// SETTINGS_HEADER_TABLE_SIZE, which it does not change).
const TABLE_SIZE: usize = 4096;

/// How many times the field section limit a block may decode to before the
/// connection ends (an HPACK bomb: one byte naming a large table entry, again and
/// again). Up to it, the block is decoded and the request refused with 431.
const BOMB_FACTOR: usize = 4;

/// Why a block did not decode.
#[derive(Debug)]
pub enum DecodeError {
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

/// RFC 7541 Appendix A: the static table, indexes 1 to 61.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// RFC 7541 Appendix B: the Huffman code's length for each symbol (256 is EOS). The
/// code is canonical (codes of one length are consecutive, in symbol order, and each
/// length's first code follows the last of the length before, shifted), so the lengths
/// are the whole code.
pub(crate) const HUFFMAN_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The canonical code's decoding tables: per length, its first code, how many codes
/// it has, and where its symbols start in the symbols sorted by (length, symbol).
struct Canonical {
    first: [u32; 31],
    count: [u32; 31],
    offset: [u16; 31],
    symbols: [u16; 257],
}

fn canonical() -> &'static Canonical {
    static TABLE: OnceLock<Canonical> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut c = Canonical {
            first: [0; 31],
            count: [0; 31],
            offset: [0; 31],
            symbols: [0; 257],
        };
        for &l in &HUFFMAN_LENGTHS {
            c.count[usize::from(l)] += 1;
        }
        let (mut code, mut at) = (0u32, 0u16);
        for l in 1..31 {
            c.first[l] = code;
            c.offset[l] = at;
            at += c.count[l] as u16;
            code = (code + c.count[l]) << 1;
        }
        let mut next = c.offset;
        for (sym, &l) in HUFFMAN_LENGTHS.iter().enumerate() {
            let l = usize::from(l);
            c.symbols[usize::from(next[l])] = sym as u16;
            next[l] += 1;
        }
        c
    })
}

/// Decodes a Huffman string into `out` (RFC 7541 §5.2: EOS inside it, or padding
/// longer than 7 bits or not all ones, is an error).
pub(crate) fn huffman_decode(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let c = canonical();
    let (mut code, mut len) = (0u32, 0usize);
    for &b in bytes {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((b >> shift) & 1);
            len += 1;
            if len > 30 {
                return Err(DecodeError::Invalid);
            }
            let rank = code.wrapping_sub(c.first[len]);
            if rank < c.count[len] {
                let sym = c.symbols[usize::from(c.offset[len]) + rank as usize];
                if sym == 256 {
                    return Err(DecodeError::Invalid);
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            }
        }
    }
    // What is left is padding: the most significant bits of EOS, all ones.
    if len > 7 || code != (1 << len) - 1 {
        return Err(DecodeError::Invalid);
    }
    Ok(())
}

/// Reads an integer with an `n`-bit prefix at `at` (RFC 7541 §5.1, which QPACK uses
/// with other prefixes, RFC 9204 §4.1.1), of at most `more` bytes after the prefix's:
/// its value and the bytes after it, or `None` when `b` ends before it does.
pub(crate) fn prefixed_integer(
    b: &[u8],
    at: usize,
    n: u32,
    more: u32,
) -> Result<Option<(u64, usize)>, DecodeError> {
    let max = (1u64 << n) - 1;
    let Some(&first) = b.get(at) else {
        return Ok(None);
    };
    let mut v = u64::from(first) & max;
    let mut at = at + 1;
    if v < max {
        return Ok(Some((v, at)));
    }
    let mut shift = 0;
    loop {
        let Some(&byte) = b.get(at) else {
            return Ok(None);
        };
        at += 1;
        // At most 9 bytes after the prefix (63 bits): no overflow.
        if shift >= 7 * more.min(9) {
            return Err(DecodeError::Invalid);
        }
        v += u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(Some((v, at)));
        }
    }
}

/// Reads an integer with an `n`-bit prefix at `at`: its value and the bytes after it.
fn read_integer(b: &[u8], at: usize, n: u32) -> Result<(usize, usize), DecodeError> {
    // No value this server takes is near 2^28 (four bytes after the prefix); more is
    // an attack or an error.
    match prefixed_integer(b, at, n, 4)? {
        Some((v, at)) => Ok((v as usize, at)),
        None => Err(DecodeError::Invalid),
    }
}

/// Reads a string literal at `at` into `out` (cleared first); the bytes after it.
fn read_string(b: &[u8], at: usize, out: &mut Vec<u8>) -> Result<usize, DecodeError> {
    read_prefixed_string(b, at, 7, out)
}

/// Reads a string literal whose length has an `n`-bit prefix, its Huffman flag the bit
/// above (HPACK's are 7-bit, RFC 7541 §5.2; QPACK's names may have 3, RFC 9204 §4.1.2),
/// at `at` into `out` (cleared first); the bytes after it.
pub(crate) fn read_prefixed_string(
    b: &[u8],
    at: usize,
    n: u32,
    out: &mut Vec<u8>,
) -> Result<usize, DecodeError> {
    let huffman = b.get(at).ok_or(DecodeError::Invalid)? & (1 << n) != 0;
    let (len, at) = read_integer(b, at, n)?;
    let raw = b.get(at..at + len).ok_or(DecodeError::Invalid)?;
    out.clear();
    if huffman {
        huffman_decode(raw, out)?;
    } else {
        out.extend_from_slice(raw);
    }
    Ok(at + len)
}

/// An entry of the dynamic table: name, value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The connection's decoder: the client's dynamic table, newest first.
pub struct Decoder {
    table: VecDeque<Entry>,
    /// Bytes of the table as RFC 7541 counts them (name, value, 32 each).
    size: usize,
    /// Its largest size now (the client's encoder lowers it by size updates).
    max: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new()
    }
}

impl Decoder {
    /// A decoder with an empty table of 4,096 bytes.
    pub fn new() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The entry at `index` (1-based: the static table, then the dynamic one).
    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        match index {
            0 => Err(DecodeError::Invalid),
            1..=61 => {
                let (n, v) = STATIC[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            i => self
                .table
                .get(i - 62)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(DecodeError::Invalid),
        }
    }

    fn evict(&mut self) {
        while self.size > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        // An entry larger than the table empties it and is not kept (RFC 7541 §4.4).
        self.size += size;
        self.table.push_front((name.into(), value.into()));
        self.evict();
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
        let mut at = 0;
        let mut fields = 0;
        let mut take = |size: &mut usize, n: &[u8], v: &[u8]| -> Result<(), DecodeError> {
            *size = size.saturating_add(n.len() + v.len() + 32);
            if *size <= limit {
                field(n, v);
            } else if *size > BOMB_FACTOR * limit {
                return Err(DecodeError::Bomb);
            }
            Ok(())
        };
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                // Indexed field.
                let (i, next) = read_integer(block, at, 7)?;
                at = next;
                let (n, v) = self.entry(i)?;
                take(&mut size, n, v)?;
            } else if b & 0xe0 == 0x20 {
                // A size update: only before the block's first field (§4.2).
                let (max, next) = read_integer(block, at, 5)?;
                if fields > 0 || max > TABLE_SIZE {
                    return Err(DecodeError::Invalid);
                }
                at = next;
                self.max = max;
                self.evict();
                continue;
            } else {
                // A literal: with incremental indexing (01), without (0000) or never
                // indexed (0001).
                let indexing = b & 0x40 != 0;
                let (i, next) = read_integer(block, at, if indexing { 6 } else { 4 })?;
                at = next;
                let mut name = std::mem::take(&mut self.name);
                let mut value = std::mem::take(&mut self.value);
                if i == 0 {
                    at = read_string(block, at, &mut name)?;
                } else {
                    name.clear();
                    name.extend_from_slice(self.entry(i)?.0);
                }
                at = read_string(block, at, &mut value)?;
                let r = take(&mut size, &name, &value);
                if indexing {
                    self.insert(&name, &value);
                }
                self.name = name;
                self.value = value;
                r?;
            }
            fields += 1;
        }
        Ok(size <= limit)
    }
}

/// Appends an integer with an `n`-bit prefix (RFC 7541 §5.1) whose other bits are
/// `first`.
pub(crate) fn integer(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
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

/// Appends a string literal (RFC 7541 §5.2), without Huffman coding (the bench
/// client writes its requests with it too).
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
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
    encode_name(out, name.as_bytes(), 0x00, 4);
    string(out, value.as_bytes());
}

/// A literal's name, lower-cased: its static index when it has one.
/// The longest name in the static table (`access-control-allow-origin`).
const LONGEST_NAME: usize = 27;

/// The static table's regular names (index 15 and up) by length: each length's
/// indexes, 0 ending the list (no length has more than six).
const BY_LENGTH: [[u8; 8]; LONGEST_NAME + 1] = {
    let mut t = [[0u8; 8]; LONGEST_NAME + 1];
    let mut i = 14;
    while i < STATIC.len() {
        let len = STATIC[i].0.len();
        let mut k = 0;
        while t[len][k] != 0 {
            k += 1;
        }
        t[len][k] = (i + 1) as u8;
        i += 1;
    }
    t
};

/// Appends a literal's name with the representation's `first` bits and `n`-bit index
/// prefix (RFC 7541 §6.2): 0x00 and 4 never adds the field to a table, 0x40 and 6 adds it.
fn encode_name(out: &mut Vec<u8>, name: &[u8], first: u8, n: u32) {
    // Only the names of the same length are compared: one to six of them.
    let index = BY_LENGTH.get(name.len()).and_then(|same| {
        same.iter().take_while(|&&i| i != 0).find(|&&i| {
            STATIC[usize::from(i) - 1]
                .0
                .as_bytes()
                .eq_ignore_ascii_case(name)
        })
    });
    match index {
        Some(&i) => integer(out, first, n, usize::from(i)),
        None => {
            out.push(first);
            integer(out, 0, 7, name.len());
            out.extend(name.iter().map(|b| b.to_ascii_lowercase()));
        }
    }
}

/// Fields HTTP/2 forbids in a response (RFC 9113 §8.2.2): the connection's own.
const CONNECTION_FIELDS: [&[u8]; 5] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
];

/// Heads cached anywhere in the process, numbered: a connection's [`Encoder`] knows a
/// head it placed in the client's table by this number, which no other head (of
/// another worker, or of a cache a reload made) ever has.
static HEADS_CACHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Response heads already encoded, by what tells them apart less their `Date` value
/// (which changes every second and is encoded each time), each in the two forms a
/// connection's [`Encoder`] sends. A site sends few distinct heads (one per file and its
/// rules), so after the first answer for a file its head is copied, not encoded again
/// field by field: that cost a third of the encoding at 1 KiB (`BENCHMARKS.md`). Owned
/// by a worker and shared by its connections: it holds no connection's state.
#[derive(Default)]
pub struct HeadCache {
    heads: crate::fields::HeadSlots<CachedHead>,
}

struct CachedHead {
    /// Its number ([`HEADS_CACHED`]).
    id: u64,
    /// `:status` and the fields less `date` (which goes at `at`), each a literal never
    /// added to a table.
    block: Box<[u8]>,
    at: usize,
    /// The same, each field a literal added to the table (`:status` as in `block`);
    /// the date goes at `indexed_at`.
    indexed: Box<[u8]>,
    indexed_at: usize,
    /// The length of `:status`, which leads both.
    status: usize,
    /// Each field's size in the table (RFC 7541 §4.1), in order; how many come before
    /// the date; their sum.
    sizes: Box<[u32]>,
    before_date: usize,
    total: usize,
}

impl HeadCache {
    pub fn new() -> HeadCache {
        HeadCache::default()
    }
}

/// The dynamic table an [`Encoder`] fills, at most: the size every client allows
/// (SETTINGS_HEADER_TABLE_SIZE's default).
const ENCODER_TABLE: usize = 4096;

/// How many heads an [`Encoder`] remembers the places of, found by number; a new one
/// takes the place of the one added longest ago. (Slots chosen by number let two heads
/// that shared one push each other out at every turn.)
const PLACED_HEADS: usize = 16;

/// A connection's encoder, which keeps its copy of the client's dynamic table of
/// response fields. The first time a connection is sent a head (one of its worker's
/// [`HeadCache`]), its fields go as literals that the client adds to its table; after
/// that, while they are all still there, the head goes as one index per field (a byte
/// each) and the date (32 bytes): 36 bytes in place of 144 at 1 KiB, less to seal
/// and to send, and a client decodes an index without reading a string. A head is added only
/// when it fills at most half the table, so that two heads taking turns both stay.
///
/// Only sizes are kept: a field is known by its head's number and its place in that
/// head, and its index follows from when it was added (the newest is 62, RFC 7541
/// §2.3.3). An entry this side evicts early is one the client still has, so evicting
/// is always safe; nothing is sent an index this side does not hold.
pub struct Encoder {
    /// The table's bound: the client's SETTINGS_HEADER_TABLE_SIZE, at most
    /// [`ENCODER_TABLE`], once said to it in a size update.
    max: usize,
    size: usize,
    /// The entries' sizes, oldest first.
    entries: VecDeque<u32>,
    /// Entries ever added: entry `n` (from 0) is at index 62 + (added - 1 - n).
    added: u64,
    /// Heads added: (head number, its first entry's number); number 0 is no head.
    placed: [(u64, u64); PLACED_HEADS],
    /// The bound the client set (the smallest since the last block, then the last),
    /// owed as size updates at the start of the next block (RFC 7541 §4.2).
    update: Option<(usize, usize)>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder {
            max: ENCODER_TABLE,
            size: 0,
            entries: VecDeque::new(),
            added: 0,
            placed: [(0, 0); PLACED_HEADS],
            update: None,
        }
    }

    /// The client set SETTINGS_HEADER_TABLE_SIZE to `size`.
    pub(crate) fn peer_table_size(&mut self, size: u32) {
        let bound = (size as usize).min(ENCODER_TABLE);
        let least = self.update.map_or(bound, |(least, _)| least.min(bound));
        self.update = Some((least, bound));
    }

    /// Starts a block: the size updates owed, the table evicted to them.
    pub(crate) fn start(&mut self, out: &mut Vec<u8>) {
        let Some((least, bound)) = self.update.take() else {
            return;
        };
        if least != self.max {
            integer(out, 0x20, 5, least);
            self.evict_to(least);
        }
        if bound != least {
            integer(out, 0x20, 5, bound);
        }
        self.max = bound;
    }

    fn evict_to(&mut self, bound: usize) {
        while self.size > bound {
            let Some(s) = self.entries.pop_front() else {
                break;
            };
            self.size -= s as usize;
        }
    }

    /// Appends `head`'s block with `date` in it: indexes when its fields are in the
    /// table, else literals that add them when they fit, else literals.
    fn head(&mut self, c: &CachedHead, date: Option<&[u8]>, out: &mut Vec<u8>) {
        let n = c.sizes.len() as u64;
        let oldest = self.added - self.entries.len() as u64;
        let found = self.placed.iter().position(|&(id, _)| id == c.id);
        let first = found.map_or(0, |i| self.placed[i].1);
        if n > 0 && found.is_some() && first >= oldest {
            out.extend_from_slice(&c.indexed[..c.status]);
            // Field k was entry first + k: index 62 + (added - 1 - first - k).
            let newest = 62 + (self.added - 1 - first) as usize;
            for k in 0..n as usize {
                if k == c.before_date {
                    if let Some(d) = date {
                        encode_date(out, d);
                    }
                }
                integer(out, 0x80, 7, newest - k);
            }
            if c.before_date == n as usize {
                if let Some(d) = date {
                    encode_date(out, d);
                }
            }
            return;
        }
        let (block, at) = if n > 0 && c.total <= self.max / 2 {
            // Its own place, else an empty one, else the head added longest ago (the
            // nearest to eviction, or evicted).
            let slot = found.unwrap_or_else(|| {
                (0..PLACED_HEADS)
                    .min_by_key(|&i| match self.placed[i] {
                        (0, _) => 0,
                        (_, first) => first + 1,
                    })
                    .unwrap_or(0)
            });
            self.placed[slot] = (c.id, self.added);
            for &s in c.sizes.iter() {
                self.evict_to(self.max - s as usize);
                self.entries.push_back(s);
                self.size += s as usize;
                self.added += 1;
            }
            (&c.indexed, c.indexed_at)
        } else {
            (&c.block, c.at)
        };
        out.extend_from_slice(&block[..at]);
        if let Some(d) = date {
            encode_date(out, d);
        }
        out.extend_from_slice(&block[at..]);
    }
}

/// Encodes `head` as a field block, without the connection-specific fields, by the
/// connection's `encoder`: `:status`, `server`, `date`, then its fields in order. A
/// head `cache` holds (by what tells it apart, [`Head::around_date`]) is copied, not
/// encoded again field by field.
pub(crate) fn encode_head(
    out: &mut Vec<u8>,
    head: &Head,
    cache: &mut HeadCache,
    encoder: &mut Encoder,
) {
    let (c, _) = cache.heads.get_or_make(head, 0, || {
        let mut fields = Vec::with_capacity(head.iter().len() + 1);
        fields.push((&b"Server"[..], &b"linerate"[..]));
        fields.extend(head.iter().filter(|(n, _)| !connection_field(n)));
        cached_head(head.status().code(), &fields, 1)
    });
    encoder.head(c, Some(head.date()), out);
}

/// Whether `name` is one of the fields HTTP/2 forbids in a response.
pub(crate) fn connection_field(name: &[u8]) -> bool {
    CONNECTION_FIELDS
        .iter()
        .any(|c| c.len() == name.len() && c.eq_ignore_ascii_case(name))
}

/// A head's two forms ([`CachedHead`]) from its status and fields, the date going
/// after the first `before_date`; `before` and `after` are its key.
fn cached_head(code: u16, fields: &[(&[u8], &[u8])], before_date: usize) -> CachedHead {
    let mut block = Vec::with_capacity(256);
    encode_status(&mut block, code);
    let status_len = block.len();
    let mut indexed = block.clone();
    let (mut at, mut indexed_at) = (block.len(), indexed.len());
    let mut sizes = Vec::with_capacity(fields.len());
    for (k, &(name, value)) in fields.iter().enumerate() {
        if k == before_date {
            (at, indexed_at) = (block.len(), indexed.len());
        }
        encode_name(&mut block, name, 0x00, 4);
        string(&mut block, value);
        encode_name(&mut indexed, name, 0x40, 6);
        string(&mut indexed, value);
        sizes.push((name.len() + value.len() + 32) as u32);
    }
    if before_date == fields.len() {
        (at, indexed_at) = (block.len(), indexed.len());
    }
    CachedHead {
        id: HEADS_CACHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        block: block.into(),
        at,
        indexed: indexed.into(),
        indexed_at,
        status: status_len,
        total: sizes.iter().map(|&s| s as usize).sum(),
        sizes: sizes.into(),
        before_date,
    }
}

/// `date` (static name 33) and its value, a literal never added to a table.
fn encode_date(out: &mut Vec<u8>, value: &[u8]) {
    integer(out, 0x00, 4, 33);
    string(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fields::testing::hex;

    fn decode(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        d.decode(block, 1 << 16, &mut |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .expect("decodes");
        out
    }

    /// A head as `crate::fields::Head` writes it, and the fields a client should
    /// decode from it.
    fn head(date: &str, etag: &str, extra: usize) -> (Head, Vec<(String, String)>) {
        let mut h = Head::new(crate::Status::Ok, date);
        let long = "v".repeat(extra);
        h.field("Content-Type", "text/html").field("ETag", etag);
        if extra > 0 {
            h.field("X-Long", &long);
        }
        let text = String::from_utf8(h.clone().h1(true)).unwrap();
        let mut want = vec![(":status".to_string(), "200".to_string())];
        for line in text.lines().skip(1).take_while(|l| !l.is_empty()) {
            let (n, v) = line.split_once(": ").unwrap();
            if !n.eq_ignore_ascii_case("connection") {
                want.push((n.to_ascii_lowercase(), v.to_string()));
            }
        }
        (h, want)
    }

    /// Heads sent on one connection decode, through the client's one table, to their
    /// own fields, dates and all: the first time as literals that fill the table, after
    /// that as indexes; a head too large for half the table stays literals; a head
    /// not like any before (another worker's cache, or none) is read afresh.
    /// Rules: docs/http.md T12.
    #[test]
    fn heads_decode_through_the_table_to_their_own_fields() {
        let mut cache = HeadCache::new();
        let mut enc = Encoder::new();
        let mut d = Decoder::new();
        let dates = [
            "Fri, 27 Nov 2026 00:00:00 GMT",
            "Fri, 27 Nov 2026 00:00:01 GMT",
        ];
        let mut sizes = Vec::new();
        for round in 0..3 {
            for (i, etag) in ["\"a\"", "\"b\"", "\"c\""].iter().enumerate() {
                let (h, want) = head(dates[(round + i) % 2], etag, 0);
                let mut out = Vec::new();
                encode_head(&mut out, &h, &mut cache, &mut enc);
                assert_eq!(decode(&mut d, &out), want, "round {round}, {etag}");
                sizes.push(out.len());
            }
        }
        // Indexes after the first round: `:status` and a byte per field, the date a
        // literal (32 bytes).
        let fields = head(dates[0], "\"a\"", 0).1.len() - 2;
        assert_eq!(sizes[3], 1 + fields + 32, "{sizes:?}");
        assert_eq!(sizes[3..6], sizes[6..9]);
        // Larger than half the table: never added, and still right.
        let (big, want) = head(dates[0], "\"d\"", 2100);
        for _ in 0..2 {
            let mut out = Vec::new();
            encode_head(&mut out, &big, &mut cache, &mut enc);
            assert_eq!(out[1] & 0xc0, 0, "a literal never added");
            assert_eq!(decode(&mut d, &out), want);
        }
        // The same head through another cache: read again, right again.
        let (h, want) = head(dates[0], "\"a\"", 0);
        let mut out = Vec::new();
        encode_head(&mut out, &h, &mut HeadCache::new(), &mut enc);
        assert_eq!(decode(&mut d, &out), want);
        let mut out = Vec::new();
        let (h, want) = head(dates[1], "\"b\"", 0);
        encode_head(&mut out, &h, &mut cache, &mut enc);
        assert_eq!(decode(&mut d, &out), want);
    }

    /// A head decodes to the fields its HTTP/1.1 form shows, less the connection's
    /// own, while many take turns on one connection and the client changes its
    /// table's bound: heads of random fields and values (bytes to percent-encode too,
    /// and connection fields, which HTTP/2 never sends). Rules: docs/http.md T12.
    #[test]
    fn a_head_decodes_to_the_fields_its_http11_form_shows() {
        let mut next = crate::fields::testing::lcg(11);
        let statuses = [
            crate::Status::Ok,
            crate::Status::NotFound,
            crate::Status::NotModified,
        ];
        let mut cache = HeadCache::new();
        let mut enc = Encoder::new();
        let mut d = Decoder::new();
        for i in 0..2000 {
            if i % 101 == 0 {
                enc.peer_table_size([0, 200, 4096][next(3) as usize]);
            }
            let date = format!("Fri, 27 Nov 2026 00:00:{:02} GMT", i / 50 % 60);
            let status = statuses[next(3) as usize];
            let h = crate::fields::testing::random_head(&mut next, status, &date, 6);
            // What a client reads in the HTTP/1.1 form, less the connection's fields.
            let want = crate::fields::testing::h1_fields(&h, next(2) == 0);
            let mut out = Vec::new();
            enc.start(&mut out);
            encode_head(&mut out, &h, &mut cache, &mut enc);
            assert_eq!(decode(&mut d, &out), want, "head {i}");
        }
    }

    /// Many heads taking turns, the table evicting, while the client changes its
    /// table's bound (to nothing, small, the default): every block decodes to its own
    /// fields, no size update passes the bound the client set, and the client's table
    /// stays within it. Rules: docs/http.md T12.
    #[test]
    fn heads_stay_right_as_the_table_evicts_and_its_bound_changes() {
        let mut cache = HeadCache::new();
        let mut enc = Encoder::new();
        let mut d = Decoder::new();
        let mut next = crate::fields::testing::lcg(7);
        let mut bound = 4096;
        for i in 0..3000 {
            // The smallest bound the client set since the last block: a strict client
            // (nghttp2) holds its table to it from the SETTINGS ACK on, and wants a
            // size update no larger at the start of the next block.
            let mut lowest = None;
            if i % 97 == 0 {
                bound = [0, 100, 256, 1000, 4096, 8192][next(6) as usize];
                enc.peer_table_size(bound as u32);
                lowest = Some(bound);
                if next(2) == 0 {
                    // A second change before the next block.
                    bound = [0, 300, 4096][next(3) as usize];
                    enc.peer_table_size(bound as u32);
                    lowest = lowest.min(Some(bound));
                }
            }
            let etag = format!("\"{}\"", next(40));
            let date = format!("Fri, 27 Nov 2026 00:00:{:02} GMT", i / 100 % 60);
            let (h, want) = head(&date, &etag, [0, 0, 0, 300, 1500][next(5) as usize]);
            let mut out = Vec::new();
            enc.start(&mut out);
            encode_head(&mut out, &h, &mut cache, &mut enc);
            let mut at = 0;
            let mut first = None;
            while out[at] & 0xe0 == 0x20 {
                let (size, n) = read_integer(&out, at, 5).unwrap();
                assert!(size <= bound.min(ENCODER_TABLE), "{size} past {bound}");
                first.get_or_insert(size);
                at = n;
            }
            if let Some(low) = lowest.filter(|&l| l < d.max) {
                assert!(
                    first.is_some_and(|f| f <= low),
                    "head {i}: no update to {low}"
                );
            }
            assert_eq!(decode(&mut d, &out), want, "head {i}");
            assert!(d.size <= bound, "{} past {bound}", d.size);
            // The encoder's entries are the client's newest, one for one.
            assert!(enc.entries.len() <= d.table.len());
            for (k, &size) in enc.entries.iter().rev().enumerate() {
                let (n, v) = &d.table[k];
                assert_eq!(size as usize, n.len() + v.len() + 32, "head {i}, entry {k}");
            }
        }
    }

    /// Twelve heads taking turns all fit the table, and after the first round each goes
    /// as indexes, whatever numbers the worker's cache gave them (places kept by number
    /// modulo 16 made two of them push each other out at every turn).
    /// Rules: docs/http.md T12.
    #[test]
    fn heads_taking_turns_stay_indexed() {
        let mut cache = HeadCache::new();
        let mut enc = Encoder::new();
        let mut d = Decoder::new();
        let date = "Fri, 27 Nov 2026 00:00:00 GMT";
        for round in 0..3 {
            for i in 0..12 {
                let (h, want) = head(date, &format!("\"{i}\""), 0);
                let mut out = Vec::new();
                encode_head(&mut out, &h, &mut cache, &mut enc);
                assert_eq!(decode(&mut d, &out), want);
                if round > 0 {
                    assert_eq!(
                        out.len(),
                        1 + (want.len() - 2) + 32,
                        "round {round}, head {i}"
                    );
                } else {
                    // Fifteen heads of another worker in between: these twelve are
                    // numbered 16 apart.
                    let mut other = HeadCache::new();
                    for k in 0..15 {
                        let (h, _) = head(date, &format!("\"other {k}\""), 0);
                        encode_head(&mut Vec::new(), &h, &mut other, &mut Encoder::new());
                    }
                }
            }
        }
    }

    /// A size update goes once, at the start of the next block. Rules: docs/http.md
    /// T12.
    #[test]
    fn a_size_update_goes_once_at_the_start_of_the_next_block() {
        let mut enc = Encoder::new();
        enc.peer_table_size(100);
        let mut out = Vec::new();
        enc.start(&mut out);
        assert_eq!(out, [0x3f, 0x45], "an update to 100");
        let mut none = Vec::new();
        enc.start(&mut none);
        assert!(none.is_empty(), "once");
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

    /// RFC 7541 C.3: the same requests without Huffman coding.
    #[test]
    fn the_rfc_7541_plain_request_examples_decode() {
        let mut d = Decoder::new();
        let first = decode(
            &mut d,
            &hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
        );
        assert_eq!(first[3], (":authority".into(), "www.example.com".into()));
        let second = decode(&mut d, &hex("8286 84be 5808 6e6f 2d63 6163 6865"));
        assert_eq!(second[3], (":authority".into(), "www.example.com".into()));
        assert_eq!(second[4], ("cache-control".into(), "no-cache".into()));
        assert_eq!(d.size, 110, "two entries: 57 and 53 bytes");
    }

    /// RFC 7541 C.6: responses with Huffman coding in a 256-byte table, whose entries
    /// are evicted as new ones come.
    #[test]
    fn the_rfc_7541_response_examples_decode_with_eviction() {
        let mut d = Decoder::new();
        d.max = 256;
        let first = decode(
            &mut d,
            &hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3"),
        );
        assert_eq!(
            first,
            [
                (":status".into(), "302".into()),
                ("cache-control".into(), "private".into()),
                ("date".into(), "Mon, 21 Oct 2013 20:13:21 GMT".into()),
                ("location".into(), "https://www.example.com".into()),
            ]
        );
        assert_eq!(d.size, 222);
        let second = decode(&mut d, &hex("4883 640e ff c1 c0 bf"));
        assert_eq!(second[0], (":status".into(), "307".into()));
        assert_eq!(
            second[3],
            ("location".into(), "https://www.example.com".into())
        );
        assert_eq!(d.size, 222, "(:status, 302) evicted for (:status, 307)");
        let third = decode(
            &mut d,
            &hex("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07"),
        );
        assert_eq!(
            third[2],
            ("date".into(), "Mon, 21 Oct 2013 20:13:22 GMT".into())
        );
        assert_eq!(third[4], ("content-encoding".into(), "gzip".into()));
        assert_eq!(
            third[5],
            (
                "set-cookie".into(),
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1".into()
            )
        );
        assert_eq!(d.size, 215);
    }

    #[test]
    fn huffman_strings_refuse_eos_and_bad_padding() {
        let mut out = Vec::new();
        // "a" is 00011 (5 bits), padded with ones: 0001 1111.
        assert!(huffman_decode(&[0x1f], &mut out).is_ok());
        assert_eq!(out, b"a");
        // Padded with a zero bit.
        assert!(huffman_decode(&[0x1e], &mut Vec::new()).is_err());
        // Eight bits of padding (a whole byte of ones after "a").
        assert!(huffman_decode(&[0x1f, 0xff], &mut Vec::new()).is_err());
        // EOS (30 ones) inside.
        assert!(huffman_decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new()).is_err());
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

    /// Every regular name of the static table is encoded as its index, in any case;
    /// another name as a lower-cased literal. Decoded back, the name is the table's.
    #[test]
    fn names_of_the_static_table_are_indexed() {
        for (i, (name, _)) in STATIC.iter().enumerate().skip(14) {
            for form in [name.to_string(), name.to_ascii_uppercase()] {
                let mut out = Vec::new();
                encode_name(&mut out, form.as_bytes(), 0x00, 4);
                string(&mut out, b"v");
                let mut want = Vec::new();
                integer(&mut want, 0, 4, i + 1);
                assert!(out.starts_with(&want), "{form}: {out:?}");
                let mut d = Decoder::new();
                assert_eq!(decode(&mut d, &out), [(name.to_string(), "v".to_string())]);
            }
        }
        let mut out = Vec::new();
        encode_name(&mut out, b"X-Custom", 0x00, 4);
        assert_eq!(out, b"\x00\x08x-custom");
        encode_name(&mut Vec::new(), &[b'a'; 100], 0x00, 4);
    }
}
