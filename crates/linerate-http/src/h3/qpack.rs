//! QPACK (RFC 9204), both ways, with no dynamic table: the static table of Appendix A,
//! literals, and HPACK's Huffman code and prefixed integers (shared with
//! [`crate::h2::hpack`]).
//!
//! Why no dynamic table. The server's SETTINGS say QPACK_MAX_TABLE_CAPACITY 0, so its
//! [`Decoder`] keeps nothing per connection (a table of the client's entries would be
//! memory held for each of them) and never waits: a field section that names an entry
//! not yet received would block its stream until the encoder stream brings it, which is
//! the head-of-line blocking QUIC's streams are there to avoid. A client's section that
//! refers to the dynamic table anyway is QPACK_DECOMPRESSION_FAILED, and its encoder
//! stream may only set the capacity to 0 ([`EncoderStreamReader`]). The [`Encoder`]
//! uses no dynamic table either, whatever the client's SETTINGS allow (which RFC 9204
//! §2.1.1 always permits): a response head is the static table's indexes and names and
//! literals, so its bytes depend on nothing but the head, and the server's own QPACK
//! streams carry nothing but their type.
//!
//! A decoded field goes to a callback as `(name, value)` bytes, as HPACK's do, so that
//! the same code makes a request of either.

use super::error::ErrorCode;
use super::varint;
use crate::fields::Head;
use crate::h2::hpack::{
    self, connection_field, integer, prefixed_integer, read_prefixed_string, HUFFMAN_LENGTHS,
};

/// RFC 9204 Appendix A: the static table, indexes 0 to 98.
pub const STATIC: [(&str, &str); 99] = [
    (":authority", ""),
    (":path", "/"),
    ("age", "0"),
    ("content-disposition", ""),
    ("content-length", "0"),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("referer", ""),
    ("set-cookie", ""),
    (":method", "CONNECT"),
    (":method", "DELETE"),
    (":method", "GET"),
    (":method", "HEAD"),
    (":method", "OPTIONS"),
    (":method", "POST"),
    (":method", "PUT"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "103"),
    (":status", "200"),
    (":status", "304"),
    (":status", "404"),
    (":status", "503"),
    ("accept", "*/*"),
    ("accept", "application/dns-message"),
    ("accept-encoding", "gzip, deflate, br"),
    ("accept-ranges", "bytes"),
    ("access-control-allow-headers", "cache-control"),
    ("access-control-allow-headers", "content-type"),
    ("access-control-allow-origin", "*"),
    ("cache-control", "max-age=0"),
    ("cache-control", "max-age=2592000"),
    ("cache-control", "max-age=604800"),
    ("cache-control", "no-cache"),
    ("cache-control", "no-store"),
    ("cache-control", "public, max-age=31536000"),
    ("content-encoding", "br"),
    ("content-encoding", "gzip"),
    ("content-type", "application/dns-message"),
    ("content-type", "application/javascript"),
    ("content-type", "application/json"),
    ("content-type", "application/x-www-form-urlencoded"),
    ("content-type", "image/gif"),
    ("content-type", "image/jpeg"),
    ("content-type", "image/png"),
    ("content-type", "text/css"),
    ("content-type", "text/html; charset=utf-8"),
    ("content-type", "text/plain"),
    ("content-type", "text/plain;charset=utf-8"),
    ("range", "bytes=0-"),
    ("strict-transport-security", "max-age=31536000"),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains",
    ),
    (
        "strict-transport-security",
        "max-age=31536000; includesubdomains; preload",
    ),
    ("vary", "accept-encoding"),
    ("vary", "origin"),
    ("x-content-type-options", "nosniff"),
    ("x-xss-protection", "1; mode=block"),
    (":status", "100"),
    (":status", "204"),
    (":status", "206"),
    (":status", "302"),
    (":status", "400"),
    (":status", "403"),
    (":status", "421"),
    (":status", "425"),
    (":status", "500"),
    ("accept-language", ""),
    ("access-control-allow-credentials", "FALSE"),
    ("access-control-allow-credentials", "TRUE"),
    ("access-control-allow-headers", "*"),
    ("access-control-allow-methods", "get"),
    ("access-control-allow-methods", "get, post, options"),
    ("access-control-allow-methods", "options"),
    ("access-control-expose-headers", "content-length"),
    ("access-control-request-headers", "content-type"),
    ("access-control-request-method", "get"),
    ("access-control-request-method", "post"),
    ("alt-svc", "clear"),
    ("authorization", ""),
    (
        "content-security-policy",
        "script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    ("early-data", "1"),
    ("expect-ct", ""),
    ("forwarded", ""),
    ("if-range", ""),
    ("origin", ""),
    ("purpose", "prefetch"),
    ("server", ""),
    ("timing-allow-origin", "*"),
    ("upgrade-insecure-requests", "1"),
    ("user-agent", ""),
    ("x-forwarded-for", ""),
    ("x-frame-options", "deny"),
    ("x-frame-options", "sameorigin"),
];

/// The longest name in the static table (`access-control-allow-credentials`).
const LONGEST_NAME: usize = 32;
/// The most entries whose names have one length (26 of 7 bytes: `:status` and
/// `:method` among them).
const SAME_LENGTH: usize = 26;
/// No entry (the end of a list in [`BY_LENGTH`]).
const NONE: u8 = u8::MAX;

/// The static table's indexes by their names' length, in order: an encoder compares a
/// name with the few entries of its length only.
const BY_LENGTH: [[u8; SAME_LENGTH]; LONGEST_NAME + 1] = {
    let mut t = [[NONE; SAME_LENGTH]; LONGEST_NAME + 1];
    let mut i = 0;
    while i < STATIC.len() {
        let len = STATIC[i].0.len();
        let mut k = 0;
        while t[len][k] != NONE {
            k += 1;
        }
        t[len][k] = i as u8;
        i += 1;
    }
    t
};

/// What the static table has for a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// The field itself, at this index.
    Field(usize),
    /// Its name, first at this index.
    Name(usize),
    Nothing,
}

/// Looks `name` (in any case) and `value` up in the static table.
fn find(name: &[u8], value: &[u8]) -> Found {
    let Some(same) = BY_LENGTH.get(name.len()) else {
        return Found::Nothing;
    };
    let mut named = Found::Nothing;
    for &i in same.iter().take_while(|&&i| i != NONE) {
        let (n, v) = STATIC[usize::from(i)];
        if n.as_bytes().eq_ignore_ascii_case(name) {
            if v.as_bytes() == value {
                return Found::Field(usize::from(i));
            }
            if named == Found::Nothing {
                named = Found::Name(usize::from(i));
            }
        }
    }
    named
}

/// The static entry at `index` (QPACK_DECOMPRESSION_FAILED past it, RFC 9204 §3.1).
fn entry(index: u64) -> Result<(&'static [u8], &'static [u8]), DecodeError> {
    let (n, v) = usize::try_from(index)
        .ok()
        .and_then(|i| STATIC.get(i))
        .ok_or(DecodeError::StaticIndex(index))?;
    Ok((n.as_bytes(), v.as_bytes()))
}

/// RFC 7541 Appendix B's code for each symbol, (code, length), from the lengths HPACK
/// decodes with: the code is canonical, so each length's codes follow in symbol order.
const HUFFMAN_CODES: [(u32, u8); 257] = {
    let mut codes = [(0u32, 0u8); 257];
    let mut code = 0u32;
    let mut len = 1;
    while len <= 30 {
        let mut sym = 0;
        while sym < 257 {
            if HUFFMAN_LENGTHS[sym] == len {
                codes[sym] = (code, len);
                code += 1;
            }
            sym += 1;
        }
        code <<= 1;
        len += 1;
    }
    codes
};

/// The bytes `s` takes Huffman-coded.
fn huffman_len(s: impl Iterator<Item = u8>) -> usize {
    let bits: usize = s
        .map(|b| usize::from(HUFFMAN_CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends `s` Huffman-coded, the last byte padded with ones (EOS's first bits).
fn huffman_encode(out: &mut Vec<u8>, s: impl Iterator<Item = u8>) {
    let (mut acc, mut bits) = (0u64, 0u32);
    for b in s {
        let (code, len) = HUFFMAN_CODES[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

/// Why a field section did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not QPACK: cut short, an integer too long, a Huffman string that does not
    /// decode (RFC 7541 §5.2).
    Malformed,
    /// A Required Insert Count other than 0: the section needs dynamic table entries,
    /// and this decoder allows none (RFC 9204 §4.5.1.1).
    RequiredInsertCount,
    /// A Sign bit of 1 with a Required Insert Count of 0: a negative Base (§4.5.1.2).
    NegativeBase,
    /// A reference to the dynamic table, which is empty (§2.2.3).
    DynamicReference,
    /// A static table index past 98 (§3.1).
    StaticIndex(u64),
    /// The fields went past the limit (names, values and 32 bytes each, RFC 9114
    /// §4.2.2): not a protocol error; the request is answered 431.
    TooLarge,
}

impl DecodeError {
    /// The error code to send: QPACK_DECOMPRESSION_FAILED, which ends the connection,
    /// for all but [`DecodeError::TooLarge`], whose request is answered 431 (its code,
    /// H3_EXCESSIVE_LOAD, is for a caller that ends the connection instead).
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::TooLarge => ErrorCode::ExcessiveLoad,
            _ => ErrorCode::QpackDecompressionFailed,
        }
    }
}

impl From<hpack::DecodeError> for DecodeError {
    fn from(_: hpack::DecodeError) -> DecodeError {
        DecodeError::Malformed
    }
}

/// Reads an integer with an `n`-bit prefix at `at` (of up to 62 bits and some, as RFC
/// 9204 §4.1.1 asks), all there: its value and the bytes after it.
fn int(b: &[u8], at: usize, n: u32) -> Result<(u64, usize), DecodeError> {
    prefixed_integer(b, at, n, 9)?.ok_or(DecodeError::Malformed)
}

/// A connection's decoder of field sections. It holds no table, only the buffers its
/// literals are decoded into, kept from one section to the next.
#[derive(Debug, Default)]
pub struct Decoder {
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Decodes a whole field section (a HEADERS frame's payload), giving each field to
    /// `field` as it comes, in order; past `limit` (names, values and 32 bytes a field)
    /// it stops with [`DecodeError::TooLarge`]. The `N` (never index) bit of a literal
    /// is read and not kept: this server is no intermediary, and never encodes a
    /// request's field again.
    pub fn decode(
        &mut self,
        section: &[u8],
        limit: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let mut at = prefix(section)?;
        let mut size = 0usize;
        while at < section.len() {
            let (name, value, next) = line(section, at, &mut self.name, &mut self.value)?;
            at = next;
            size = size.saturating_add(name.len() + value.len() + 32);
            if size > limit {
                return Err(DecodeError::TooLarge);
            }
            field(name, value);
        }
        Ok(())
    }
}

/// Reads a section's prefix (RFC 9204 §4.5.1): the bytes after it.
fn prefix(section: &[u8]) -> Result<usize, DecodeError> {
    let (required, at) = int(section, 0, 8)?;
    if required != 0 {
        return Err(DecodeError::RequiredInsertCount);
    }
    let sign = section.get(at).ok_or(DecodeError::Malformed)? & 0x80 != 0;
    // Delta Base: any value with no reference to the table (§4.5.1.2), read and unused.
    let (_, at) = int(section, at, 7)?;
    if sign {
        return Err(DecodeError::NegativeBase);
    }
    Ok(at)
}

/// Reads the field line at `at` (RFC 9204 §4.5.2 to §4.5.6), its literals into `name`
/// and `value`: the field and the bytes after it.
fn line<'a>(
    b: &[u8],
    at: usize,
    name: &'a mut Vec<u8>,
    value: &'a mut Vec<u8>,
) -> Result<(&'a [u8], &'a [u8], usize), DecodeError> {
    let first = *b.get(at).ok_or(DecodeError::Malformed)?;
    if first & 0x80 != 0 {
        // Indexed field line: 1 T index(6+).
        if first & 0x40 == 0 {
            return Err(DecodeError::DynamicReference);
        }
        let (i, next) = int(b, at, 6)?;
        let (n, v) = entry(i)?;
        return Ok((n, v, next));
    }
    if first & 0x40 != 0 {
        // Literal field line with name reference: 01 N T index(4+), value.
        if first & 0x10 == 0 {
            return Err(DecodeError::DynamicReference);
        }
        let (i, next) = int(b, at, 4)?;
        let (n, _) = entry(i)?;
        let next = read_prefixed_string(b, next, 7, value)?;
        return Ok((n, value, next));
    }
    if first & 0x20 != 0 {
        // Literal field line with literal name: 001 N H length(3+), name, value.
        let next = read_prefixed_string(b, at, 3, name)?;
        let next = read_prefixed_string(b, next, 7, value)?;
        return Ok((name, value, next));
    }
    // 0001: indexed field line with post-Base index; 0000: literal field line with
    // post-Base name reference. Both name the dynamic table.
    Err(DecodeError::DynamicReference)
}

/// Writes response heads as field sections: `:status` and every field by the static
/// table (the field's index, else its name's and a literal value), else as literals,
/// names lower-cased; each string Huffman-coded when that is shorter and
/// [`Encoder::huffman`] is on. No dynamic table: the bytes depend on the head alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoder {
    /// Huffman-code the strings it makes shorter (a date: 29 bytes to 22); off, every
    /// string goes as it is, which costs no CPU.
    pub huffman: bool,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder { huffman: true }
    }
}

impl Encoder {
    /// Appends a section's prefix: Required Insert Count 0, Base 0 (no dynamic table).
    pub fn start(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[0x00, 0x00]);
    }

    /// Appends `:status`: an index for the fourteen codes the static table has, else a
    /// literal named by its entry 24.
    pub fn status(&self, out: &mut Vec<u8>, code: u16) {
        let index = match code {
            103 => 24,
            200 => 25,
            304 => 26,
            404 => 27,
            503 => 28,
            100 => 63,
            204 => 64,
            206 => 65,
            302 => 66,
            400 => 67,
            403 => 68,
            421 => 69,
            425 => 70,
            500 => 71,
            _ => {
                integer(out, 0x50, 4, 24);
                self.string(
                    out,
                    0x00,
                    7,
                    itoa::Buffer::new().format(code).as_bytes(),
                    false,
                );
                return;
            }
        };
        integer(out, 0xc0, 6, index);
    }

    /// Appends a field, its name lower-cased: the static table's index of it, else a
    /// literal named by the table, else a literal name and value (the `N` bit clear:
    /// no field the server sends needs it).
    pub fn field(&self, out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        match find(name, value) {
            // 11 index(6+): static.
            Found::Field(i) => integer(out, 0xc0, 6, i),
            // 01 0 1 index(4+): static name.
            Found::Name(i) => {
                integer(out, 0x50, 4, i);
                self.string(out, 0x00, 7, value, false);
            }
            // 001 0 H length(3+).
            Found::Nothing => {
                self.string(out, 0x20, 3, name, true);
                self.string(out, 0x00, 7, value, false);
            }
        }
    }

    /// Appends `head` as a whole field section: the prefix, `:status`, `server`,
    /// `date`, then its fields in order less those HTTP/3 forbids (the connection's
    /// own, RFC 9114 §4.2), as HTTP/2's encoder sends them.
    pub fn head(&self, out: &mut Vec<u8>, head: &Head) {
        self.start(out);
        self.status(out, head.status().code());
        self.field(out, b"server", b"linerate");
        self.field(out, b"date", head.date());
        self.fields(out, head);
    }

    /// Appends `head`'s fields after `date`, less those HTTP/3 forbids.
    fn fields(&self, out: &mut Vec<u8>, head: &Head) {
        for (n, v) in head.iter().filter(|(n, _)| !connection_field(n)) {
            self.field(out, n, v);
        }
    }

    /// Appends a string literal whose length has an `n`-bit prefix under `first`'s
    /// bits, its Huffman flag the bit above (RFC 9204 §4.1.2), lower-cased with `lower`.
    fn string(&self, out: &mut Vec<u8>, first: u8, n: u32, s: &[u8], lower: bool) {
        let bytes = s
            .iter()
            .map(move |&b| if lower { b.to_ascii_lowercase() } else { b });
        let coded = if self.huffman {
            huffman_len(bytes.clone())
        } else {
            usize::MAX
        };
        if coded < s.len() {
            integer(out, first | (1 << n), n, coded);
            huffman_encode(out, bytes);
        } else {
            integer(out, first, n, s.len());
            out.extend(bytes);
        }
    }
}

/// Response heads already encoded, and the date's field as last encoded (it changes
/// once a second). After the first answer for a file its head is copied, not encoded
/// field by field: the static table looked up and each value Huffman-coded was 12% of
/// the server's CPU at 1 KiB (`BENCHMARKS.md`). With no dynamic table the bytes depend
/// on the head alone, so a worker's connections share one cache;
/// [`HeadCache::encode`] gives what [`Encoder::head`] does.
#[derive(Default)]
pub struct HeadCache {
    heads: crate::fields::HeadSlots<Around>,
    /// The last date value encoded, its Huffman choice, and its field as encoded.
    date: (Vec<u8>, bool, Vec<u8>),
}

/// A head encoded but for its date: the section's prefix, `:status` and `server`;
/// then the fields after `date`.
type Around = (Box<[u8]>, Box<[u8]>);

impl HeadCache {
    pub fn new() -> HeadCache {
        HeadCache::default()
    }

    /// Appends `head` as a whole field section, as `enc` writes it; whether its head
    /// was encoded now (not found).
    pub fn encode(&mut self, enc: &Encoder, head: &Head, out: &mut Vec<u8>) -> bool {
        let ((before, after), made) = self.heads.get_or_make(head, u8::from(enc.huffman), || {
            let mut before = Vec::with_capacity(16);
            enc.start(&mut before);
            enc.status(&mut before, head.status().code());
            enc.field(&mut before, b"server", b"linerate");
            let mut after = Vec::with_capacity(128);
            enc.fields(&mut after, head);
            (before.into_boxed_slice(), after.into_boxed_slice())
        });
        out.extend_from_slice(before);
        let (value, huffman, coded) = &mut self.date;
        if value.as_slice() != head.date() || *huffman != enc.huffman {
            value.clear();
            value.extend_from_slice(head.date());
            *huffman = enc.huffman;
            coded.clear();
            enc.field(coded, b"date", head.date());
        }
        out.extend_from_slice(coded);
        out.extend_from_slice(after);
        made
    }
}

/// Why the client's encoder stream was refused: QPACK_ENCODER_STREAM_ERROR, which ends
/// the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncoderStreamError {
    /// Set Dynamic Table Capacity above 0, the most this decoder allows (RFC 9204
    /// §4.3.1).
    Capacity,
    /// An insert (with a name reference or a literal name) into a table of capacity 0:
    /// an entry larger than the table (§3.2.2).
    Insert,
    /// Duplicate, in an empty table (§4.3.4).
    Duplicate,
}

impl EncoderStreamError {
    /// The error code the connection is closed with.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::QpackEncoderStreamError
    }
}

/// Reads the client's QPACK encoder stream (after its type byte) for a decoder with no
/// dynamic table: only Set Dynamic Table Capacity 0, one byte (0x20), is allowed, so
/// every instruction is judged by its first byte and no state is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncoderStreamReader;

impl EncoderStreamReader {
    /// A reader.
    pub fn new() -> EncoderStreamReader {
        EncoderStreamReader
    }

    /// Reads `input`, all of it: the instructions it held.
    pub fn read(&mut self, input: &[u8]) -> Result<usize, EncoderStreamError> {
        for &b in input {
            match b {
                0x20 => {}
                // 001 capacity(5+), not 0.
                0x21..=0x3f => return Err(EncoderStreamError::Capacity),
                // 1 T index(6+) value; 01 H length(5+) name value.
                0x40..=0xff => return Err(EncoderStreamError::Insert),
                // 000 index(5+).
                _ => return Err(EncoderStreamError::Duplicate),
            }
        }
        Ok(input.len())
    }
}

/// Why the client's decoder stream was refused: QPACK_DECODER_STREAM_ERROR, which ends
/// the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderStreamError {
    /// Section Acknowledgment: every section this server sends has a Required Insert
    /// Count of 0, so none is owed one (RFC 9204 §4.4.1).
    SectionAcknowledgment,
    /// Insert Count Increment: this server inserts nothing, so any increment, 0 or
    /// more, goes past what it sent (§4.4.3).
    InsertCountIncrement,
    /// A Stream Cancellation whose stream id is past 2^62 - 1, or longer than any.
    StreamId,
}

impl DecoderStreamError {
    /// The error code the connection is closed with.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::QpackDecoderStreamError
    }
}

/// Reads the client's QPACK decoder stream (after its type byte), from bytes that come
/// in pieces of any size. An encoder that never uses the dynamic table is owed no
/// instruction but Stream Cancellation (a client resets a stream, its decoder says so:
/// nothing to do here), which is read and dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStreamReader {
    /// The bytes so far of a Stream Cancellation not yet whole: 01 and a 6-bit prefix,
    /// then up to 10 more bytes (the 10th is one too many, refused as it comes).
    pending: [u8; 11],
    len: u8,
}

impl DecoderStreamReader {
    /// A reader with no byte yet.
    pub fn new() -> DecoderStreamReader {
        DecoderStreamReader::default()
    }

    /// Reads `input`, all of it: the Stream Cancellations it ended.
    pub fn read(&mut self, input: &[u8]) -> Result<usize, DecoderStreamError> {
        let mut cancelled = 0;
        for &b in input {
            if self.len == 0 {
                match b {
                    0x80..=0xff => return Err(DecoderStreamError::SectionAcknowledgment),
                    0x00..=0x3f => return Err(DecoderStreamError::InsertCountIncrement),
                    _ => {}
                }
            }
            self.pending[usize::from(self.len)] = b;
            self.len += 1;
            let whole = prefixed_integer(&self.pending[..usize::from(self.len)], 0, 6, 9);
            match whole {
                Ok(Some((id, _))) if id <= varint::MAX => {
                    self.len = 0;
                    cancelled += 1;
                }
                Ok(None) => {}
                Ok(Some(_)) | Err(_) => return Err(DecoderStreamError::StreamId),
            }
        }
        Ok(cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::huffman_decode;
    use crate::Status;

    use crate::fields::testing::hex;

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn decode_limit(section: &[u8], limit: usize) -> Result<Fields, DecodeError> {
        let mut out = Vec::new();
        Decoder::new().decode(section, limit, &mut |n, v| {
            out.push((n.to_vec(), v.to_vec()))
        })?;
        Ok(out)
    }

    fn decode(section: &[u8]) -> Result<Fields, DecodeError> {
        decode_limit(section, 1 << 16)
    }

    fn fields(f: &[(&str, &str)]) -> Fields {
        f.iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn the_static_table_is_rfc_9204_appendix_a() {
        assert_eq!(STATIC.len(), 99);
        for (i, n, v) in [
            (0, ":authority", ""),
            (1, ":path", "/"),
            (2, "age", "0"),
            (15, ":method", "CONNECT"),
            (17, ":method", "GET"),
            (23, ":scheme", "https"),
            (25, ":status", "200"),
            (31, "accept-encoding", "gzip, deflate, br"),
            (52, "content-type", "text/html; charset=utf-8"),
            (
                58,
                "strict-transport-security",
                "max-age=31536000; includesubdomains; preload",
            ),
            (62, "x-xss-protection", "1; mode=block"),
            (71, ":status", "500"),
            (73, "access-control-allow-credentials", "FALSE"),
            (
                85,
                "content-security-policy",
                "script-src 'none'; object-src 'none'; base-uri 'none'",
            ),
            (92, "server", ""),
            (98, "x-frame-options", "sameorigin"),
        ] {
            assert_eq!(STATIC[i], (n, v), "index {i}");
        }
        // Names are lower case; the longest is LONGEST_NAME long.
        assert!(STATIC
            .iter()
            .all(|(n, _)| !n.bytes().any(|b| b.is_ascii_uppercase())));
        assert_eq!(
            STATIC.iter().map(|(n, _)| n.len()).max(),
            Some(LONGEST_NAME)
        );
    }

    /// Every entry is found at its own index (the first of equal ones), and every name
    /// at its first index, in any case.
    #[test]
    fn every_static_entry_is_found_by_the_encoder() {
        for (i, (n, v)) in STATIC.iter().enumerate() {
            assert_eq!(
                find(n.as_bytes(), v.as_bytes()),
                Found::Field(i),
                "{n}: {v}"
            );
            let upper = n.to_ascii_uppercase();
            assert_eq!(
                find(upper.as_bytes(), v.as_bytes()),
                Found::Field(i),
                "{upper}"
            );
            let first = STATIC.iter().position(|(m, _)| m == n).unwrap();
            assert_eq!(
                find(n.as_bytes(), b"\x01 no such value"),
                Found::Name(first)
            );
        }
        assert_eq!(find(b"x-custom", b""), Found::Nothing);
        assert_eq!(find(&[b'a'; 100], b""), Found::Nothing);
    }

    /// The status codes encoded as one index are those of the static table.
    #[test]
    fn statuses_of_the_static_table_are_one_byte() {
        let e = Encoder::default();
        for code in 100..600u16 {
            let mut out = Vec::new();
            e.status(&mut out, code);
            let text = code.to_string();
            let index = STATIC
                .iter()
                .position(|&(n, v)| n == ":status" && v == text);
            match index {
                Some(i) => {
                    let mut want = Vec::new();
                    integer(&mut want, 0xc0, 6, i);
                    assert_eq!(out, want, "{code}");
                }
                None => assert_eq!(out[..2], [0x5f, 0x09], "{code}: named by entry 24"),
            }
            let mut section = vec![0, 0];
            section.extend(out);
            assert_eq!(decode(&section), Ok(fields(&[(":status", &text)])));
        }
    }

    /// RFC 9204 B.1: a literal field line with a static name reference.
    #[test]
    fn the_rfc_9204_literal_with_name_reference_example() {
        let section = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
        assert_eq!(decode(&section), Ok(fields(&[(":path", "/index.html")])));
        let mut out = Vec::new();
        let e = Encoder { huffman: false };
        e.start(&mut out);
        e.field(&mut out, b":path", b"/index.html");
        assert_eq!(out, section);
    }

    /// RFC 9204 B.2 and B.4: sections that need the dynamic table this decoder does not
    /// keep.
    #[test]
    fn the_rfc_9204_dynamic_table_examples_are_refused() {
        for section in ["0381 10 11", "0500 80 c1 81"] {
            let e = decode(&hex(section)).unwrap_err();
            assert_eq!(e, DecodeError::RequiredInsertCount, "{section}");
            assert_eq!(e.code(), ErrorCode::QpackDecompressionFailed);
        }
    }

    /// Huffman strings from RFC 7541 C.4 in each of QPACK's literals: a value after a
    /// static name, a literal name and value.
    #[test]
    fn huffman_strings_decode() {
        // :authority (0) www.example.com.
        let section = hex("0000 50 8c f1e3 c2e5 f23a 6ba0 ab90 f4ff");
        assert_eq!(
            decode(&section),
            Ok(fields(&[(":authority", "www.example.com")]))
        );
        // cache-control (36) no-cache.
        let section = hex("0000 5f15 86 a8eb 1064 9cbf");
        assert_eq!(
            decode(&section),
            Ok(fields(&[("cache-control", "no-cache")]))
        );
        // custom-key: custom-value, both Huffman-coded: 001 0 1 length 8 (7 + 1).
        let section = hex("0000 2f01 25a8 49e9 5ba9 7d7f 89 25a8 49e9 5bb8 e8b4 bf");
        assert_eq!(
            decode(&section),
            Ok(fields(&[("custom-key", "custom-value")]))
        );
        // A bad Huffman string: EOS inside.
        let e = decode(&hex("0000 50 84 ffff ffff")).unwrap_err();
        assert_eq!(e, DecodeError::Malformed);
        assert_eq!(e.code(), ErrorCode::QpackDecompressionFailed);
        // Padding of zeros.
        assert_eq!(decode(&hex("0000 50 81 1e")), Err(DecodeError::Malformed));
    }

    /// The N bit is read and changes nothing; Delta Base may be anything with Sign 0.
    #[test]
    fn the_never_index_bit_and_delta_base_change_nothing() {
        let plain = decode(&hex("0000 51 01 61 21 78 01 79")).unwrap();
        assert_eq!(plain, fields(&[(":path", "a"), ("x", "y")]));
        assert_eq!(decode(&hex("0000 71 01 61 31 78 01 79")).unwrap(), plain);
        // Delta Base of 2^62 - 1, read whole.
        let mut section = vec![0x00];
        integer(&mut section, 0x00, 7, varint::MAX as usize);
        section.extend(hex("51 01 61 21 78 01 79"));
        assert_eq!(decode(&section).unwrap(), plain);
    }

    /// Every reference to the dynamic table, and every form that only names it:
    /// QPACK_DECOMPRESSION_FAILED.
    #[test]
    fn dynamic_references_are_decompression_failures() {
        for line in [
            "80", "bf 01", "40 01 61", "60 01 61", "10", "1f 05", "00 01 61", "08 01 61",
        ] {
            let e = decode(&hex(&format!("0000 {line}"))).unwrap_err();
            assert_eq!(e, DecodeError::DynamicReference, "{line}");
            assert_eq!(e.code(), ErrorCode::QpackDecompressionFailed);
        }
    }

    #[test]
    fn bad_prefixes_indexes_and_cut_sections_are_decompression_failures() {
        let cases = [
            ("", DecodeError::Malformed),
            ("00", DecodeError::Malformed),
            ("01 00", DecodeError::RequiredInsertCount),
            ("ff 01 00", DecodeError::RequiredInsertCount),
            ("00 80", DecodeError::NegativeBase),
            ("00 ff 01", DecodeError::NegativeBase),
            ("00 7f", DecodeError::Malformed),
            ("0000 ff 24", DecodeError::StaticIndex(99)),
            ("0000 5f 7f 00", DecodeError::StaticIndex(15 + 127)),
            ("0000 ff", DecodeError::Malformed),
            ("0000 51", DecodeError::Malformed),
            ("0000 51 05 61", DecodeError::Malformed),
            ("0000 23 78", DecodeError::Malformed),
            ("0000 23 78 79 7a", DecodeError::Malformed),
            (
                "0000 ff ff ff ff ff ff ff ff ff ff ff 01",
                DecodeError::Malformed,
            ),
        ];
        for (section, want) in cases {
            let e = decode(&hex(section)).unwrap_err();
            assert_eq!(e, want, "{section:?}");
            assert_eq!(e.code(), ErrorCode::QpackDecompressionFailed);
        }
        assert_eq!(decode(&hex("0000")), Ok(vec![]), "an empty section");
    }

    /// Fields up to the limit (names, values and 32 bytes each) are taken; past it, the
    /// section stops with TooLarge, the fields before it given.
    #[test]
    fn a_section_past_the_limit_is_too_large() {
        // :path / (38 bytes), then x: yy (35 bytes).
        let section = hex("0000 c1 21 78 02 7979");
        assert_eq!(decode_limit(&section, 73).unwrap().len(), 2);
        let mut n = 0;
        let e = Decoder::new()
            .decode(&section, 72, &mut |_, _| n += 1)
            .unwrap_err();
        assert_eq!((e, n), (DecodeError::TooLarge, 1));
        assert_eq!(e.code(), ErrorCode::ExcessiveLoad);
        // One byte naming a large entry, again and again: stopped at the limit.
        let mut bomb = vec![0, 0];
        bomb.extend(std::iter::repeat_n([0xff, 85 - 63], 10_000).flatten());
        assert_eq!(decode_limit(&bomb, 16 << 10), Err(DecodeError::TooLarge));
    }

    /// RFC 7541 C.4 and C.6's Huffman strings, from this encoder.
    #[test]
    fn the_huffman_encoder_writes_rfc_7541_strings() {
        for (s, coded) in [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            (
                "Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            ),
            (
                "https://www.example.com",
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            ),
        ] {
            let mut out = Vec::new();
            huffman_encode(&mut out, s.bytes());
            assert_eq!(out, hex(coded), "{s}");
            assert_eq!(huffman_len(s.bytes()), out.len());
        }
    }

    /// Strings go Huffman-coded only when that is shorter, names lower-cased either way.
    #[test]
    fn huffman_only_when_shorter() {
        let e = Encoder::default();
        let mut out = Vec::new();
        e.field(&mut out, b"X-Custom", b"{}{}");
        // 001 0 1 length(3+): 6 bytes for "x-custom"; "{}{}" as it is (Huffman: 8).
        assert_eq!(out[0], 0x20 | 0x08 | 6);
        assert_eq!(out[7..], [0x04, b'{', b'}', b'{', b'}']);
        let mut section = vec![0, 0];
        section.extend(&out);
        assert_eq!(decode(&section), Ok(fields(&[("x-custom", "{}{}")])));
        let mut raw = Vec::new();
        Encoder { huffman: false }.field(&mut raw, b"X-Custom", b"{}{}");
        // A length of 8 past the 3-bit prefix: 7, then 1.
        assert_eq!(raw, b"\x27\x01x-custom\x04{}{}");
    }

    /// Exact static fields are one index; names of the table a reference and a literal.
    #[test]
    fn fields_of_the_static_table_are_indexed() {
        let e = Encoder { huffman: false };
        let mut out = Vec::new();
        e.field(&mut out, b"Content-Type", b"text/css");
        assert_eq!(out, [0xc0 | 51]);
        out.clear();
        e.field(&mut out, b"accept-ranges", b"bytes");
        assert_eq!(out, [0xc0 | 32]);
        out.clear();
        e.field(&mut out, b"X-Frame-Options", b"sameorigin");
        assert_eq!(out, [0xff, 98 - 63]);
        out.clear();
        e.field(&mut out, b"Content-Type", b"text/x");
        assert_eq!(out, b"\x5f\x1d\x06text/x", "named by entry 44");
        out.clear();
        e.field(&mut out, b"ETag", b"\"a\"");
        assert_eq!(out, b"\x57\x03\"a\"", "named by entry 7");
    }

    /// A head decodes to the fields its HTTP/1.1 form shows, less the connection's own,
    /// with Huffman coding and without.
    #[test]
    fn a_head_decodes_to_the_fields_its_http11_form_shows() {
        let mut next = crate::fields::testing::lcg(5);
        let statuses = [
            Status::Ok,
            Status::NotFound,
            Status::NotModified,
            Status::MovedPermanently,
        ];
        for i in 0..500 {
            let status = statuses[next(4) as usize];
            let date = "Fri, 27 Nov 2026 00:00:00 GMT";
            let h = crate::fields::testing::random_head(&mut next, status, date, 7);
            let want: Vec<(Vec<u8>, Vec<u8>)> = crate::fields::testing::h1_fields(&h, next(2) == 0)
                .into_iter()
                .map(|(n, v)| (n.into_bytes(), v.into_bytes()))
                .collect();
            for huffman in [true, false] {
                let mut out = Vec::new();
                Encoder { huffman }.head(&mut out, &h);
                assert_eq!(decode(&out), Ok(want.clone()), "head {i}");
            }
        }
    }

    /// The cache gives the bytes the encoder does, head after head: the same heads
    /// again, new dates, more distinct heads than it has slots, Huffman on and off.
    #[test]
    fn cached_heads_are_the_bytes_the_encoder_writes() {
        let dates = [
            "Fri, 27 Nov 2026 00:00:00 GMT",
            "Fri, 27 Nov 2026 00:00:01 GMT",
        ];
        // The same 150 heads on each date (the same draws), which differ by it alone.
        let heads: Vec<Vec<Head>> = dates
            .iter()
            .map(|date| {
                let mut next = crate::fields::testing::lcg(9);
                (0..150)
                    .map(|i| {
                        let status = [Status::Ok, Status::NotFound][i % 2];
                        crate::fields::testing::random_head(&mut next, status, date, 6)
                    })
                    .collect()
            })
            .collect();
        assert_eq!(heads[0][3].around_date(), heads[1][3].around_date());
        let mut next = crate::fields::testing::lcg(10);
        let mut cache = HeadCache::new();
        let mut hits = 0;
        for round in 0..2000 {
            // Mostly a few heads, as a site sends; now and then any of them.
            let k = if round % 7 == 0 { next(150) } else { next(5) } as usize;
            let h = &heads[usize::from(round % 3 == 0)][k];
            let enc = Encoder {
                huffman: next(4) != 0,
            };
            let mut want = Vec::new();
            enc.head(&mut want, h);
            let mut got = Vec::new();
            hits += usize::from(!cache.encode(&enc, h, &mut got));
            assert_eq!(got, want, "round {round}, head {k}, {enc:?}");
        }
        assert!(hits > 1000, "the few heads are found again: {hits} of 2000");
    }

    /// RFC 9204 B.2 to B.5's encoder stream instructions: each needs a table.
    #[test]
    fn encoder_stream_instructions_for_a_table_are_refused() {
        let cases = [
            ("3fbd01", EncoderStreamError::Capacity),
            ("21", EncoderStreamError::Capacity),
            (
                "c00f 7777 772e 6578 616d 706c 652e 636f 6d",
                EncoderStreamError::Insert,
            ),
            (
                "4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565",
                EncoderStreamError::Insert,
            ),
            ("02", EncoderStreamError::Duplicate),
            ("00", EncoderStreamError::Duplicate),
            (
                "810d 6375 7374 6f6d 2d76 616c 7565 32",
                EncoderStreamError::Insert,
            ),
        ];
        for (bytes, want) in cases {
            let mut r = EncoderStreamReader::new();
            let e = r.read(&hex(bytes)).unwrap_err();
            assert_eq!(e, want, "{bytes}");
            assert_eq!(e.code(), ErrorCode::QpackEncoderStreamError);
        }
        // Capacity 0, as often as the client likes.
        let mut r = EncoderStreamReader::new();
        assert_eq!(r.read(&[0x20, 0x20]), Ok(2));
        assert_eq!(r.read(&[]), Ok(0));
        assert_eq!(r.read(&[0x20, 0x3f]), Err(EncoderStreamError::Capacity));
    }

    /// RFC 9204 B.4's Stream Cancellation is taken; B.2's Section Acknowledgment and
    /// B.3's Insert Count Increment are refused, as any is for a server that uses no
    /// table.
    #[test]
    fn decoder_stream_instructions() {
        let mut r = DecoderStreamReader::new();
        assert_eq!(r.read(&hex("48")), Ok(1));
        for (bytes, want) in [
            ("84", DecoderStreamError::SectionAcknowledgment),
            ("01", DecoderStreamError::InsertCountIncrement),
            ("00", DecoderStreamError::InsertCountIncrement),
            ("3f 01", DecoderStreamError::InsertCountIncrement),
        ] {
            let e = DecoderStreamReader::new().read(&hex(bytes)).unwrap_err();
            assert_eq!(e, want, "{bytes}");
            assert_eq!(e.code(), ErrorCode::QpackDecoderStreamError);
        }
        // Long stream ids, one byte at a time, then another at once.
        let mut input = Vec::new();
        integer(&mut input, 0x40, 6, 1_000_000);
        integer(&mut input, 0x40, 6, varint::MAX as usize);
        integer(&mut input, 0x40, 6, 4);
        let mut r = DecoderStreamReader::new();
        let total: usize = input.iter().map(|&b| r.read(&[b]).unwrap()).sum();
        assert_eq!(total, 3);
        let mut too_far = Vec::new();
        integer(&mut too_far, 0x40, 6, varint::MAX as usize + 1);
        let e = DecoderStreamReader::new().read(&too_far).unwrap_err();
        assert_eq!(e, DecoderStreamError::StreamId);
        let e = DecoderStreamReader::new().read(&[
            0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ]);
        assert_eq!(e, Err(DecoderStreamError::StreamId));
    }

    proptest::proptest! {
        /// Any bytes Huffman-code and decode back (HPACK's decoder).
        #[test]
        fn huffman_strings_read_back(s in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            let mut out = Vec::new();
            huffman_encode(&mut out, s.iter().copied());
            proptest::prop_assert_eq!(out.len(), huffman_len(s.iter().copied()));
            let mut back = Vec::new();
            proptest::prop_assert!(huffman_decode(&out, &mut back).is_ok());
            proptest::prop_assert_eq!(back, s);
        }

        /// Any status and fields encode and decode back, names lower-cased, with
        /// Huffman coding and without.
        #[test]
        fn sections_read_back(
            status in 100u16..1000,
            picks in proptest::collection::vec(
                (0usize..STATIC.len() + 1, "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,40}", proptest::collection::vec(proptest::num::u8::ANY, 0..60), 0usize..3),
                0..12),
            huffman: bool,
        ) {
            let e = Encoder { huffman };
            let mut out = Vec::new();
            e.start(&mut out);
            e.status(&mut out, status);
            let mut want = vec![(b":status".to_vec(), status.to_string().into_bytes())];
            for (i, name, value, how) in &picks {
                // A static entry, a static name with another value, or a name of its own.
                let (name, value) = match (STATIC.get(*i), how) {
                    (Some((n, v)), 0) => (n.as_bytes().to_vec(), v.as_bytes().to_vec()),
                    (Some((n, _)), 1) => (n.to_ascii_uppercase().into_bytes(), value.clone()),
                    _ => (name.as_bytes().to_vec(), value.clone()),
                };
                e.field(&mut out, &name, &value);
                want.push((name.to_ascii_lowercase(), value));
            }
            proptest::prop_assert_eq!(decode(&out), Ok(want));
        }
    }
}
