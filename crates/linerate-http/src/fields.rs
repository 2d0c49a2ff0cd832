//! A response head as a structure: its status, its date and its fields in order, which
//! each protocol writes in its own form. HTTP/1.1's form is kept as the head is built
//! (the status line, then one `Name: value` line per field), so the HTTP/1.1 writer
//! ([`Head::h1`]) only ends it; each field's place in it is kept too, so HTTP/2's
//! encoder ([`crate::h2::hpack`]) takes the fields one by one and never reads the text
//! back. A file's own fields ([`Fields`]), the same in each of its answers, are written
//! once and added to many heads.
//!
//! Every field goes through one writer: a value holds only visible ASCII and spaces,
//! and any other byte (a control byte, TAB, CR, LF, DEL, anything past ASCII) is
//! written percent-encoded, so no value can end its line or start another whatever
//! reached it, and every protocol sends the same value. A name is always the server's
//! own or a configured token.

use smallvec::SmallVec;

use crate::Status;

/// Where each field is in a text: its line's start and its name's length. Most heads
/// have fewer than ten fields, kept without an allocation of their own.
type Places = SmallVec<[(u32, u32); 10]>;

/// Fields written once, to be added to many heads ([`Head::fields`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    text: Vec<u8>,
    at: Places,
}

impl Fields {
    /// Adds a field.
    pub fn field(&mut self, name: &str, value: &str) -> &mut Fields {
        push_field(&mut self.text, &mut self.at, name, value);
        self
    }

    /// `Content-Length`.
    pub fn content_length(&mut self, n: u64) -> &mut Fields {
        self.field("Content-Length", itoa::Buffer::new().format(n))
    }
}

/// A response head being built: status, `Server`, `Date`, then its fields.
#[derive(Clone, Debug)]
pub struct Head {
    status: Status,
    /// The head in HTTP/1.1's form so far.
    text: Vec<u8>,
    /// The `Date` value's place in `text`.
    date: (u32, u32),
    /// The fields after the date.
    at: Places,
}

impl Head {
    /// Status, `Server` and `Date`.
    pub fn new(status: Status, date: &str) -> Head {
        let mut text = Vec::with_capacity(256);
        text.extend_from_slice(b"HTTP/1.1 ");
        text.extend_from_slice(itoa::Buffer::new().format(status.code()).as_bytes());
        text.push(b' ');
        text.extend_from_slice(status.reason().as_bytes());
        text.extend_from_slice(b"\r\nServer: linerate\r\nDate: ");
        let start = text.len() as u32;
        text.extend_from_slice(date.as_bytes());
        let end = text.len() as u32;
        text.extend_from_slice(b"\r\n");
        Head {
            status,
            text,
            date: (start, end),
            at: Places::new(),
        }
    }

    /// Adds a field.
    pub fn field(&mut self, name: &str, value: &str) -> &mut Head {
        push_field(&mut self.text, &mut self.at, name, value);
        self
    }

    /// Adds fields written before (a file's own, the same in each of its answers).
    pub fn fields(&mut self, fields: &Fields) -> &mut Head {
        let base = self.text.len() as u32;
        self.text.extend_from_slice(&fields.text);
        self.at
            .extend(fields.at.iter().map(|&(start, name)| (base + start, name)));
        self
    }

    /// `Content-Length`.
    pub fn content_length(&mut self, n: u64) -> &mut Head {
        self.field("Content-Length", itoa::Buffer::new().format(n))
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// The `Date` value.
    pub fn date(&self) -> &[u8] {
        &self.text[self.date.0 as usize..self.date.1 as usize]
    }

    /// The fields after `Server` and `Date`, in order.
    pub fn iter(&self) -> FieldIter<'_> {
        FieldIter {
            text: &self.text,
            at: &self.at,
            next: 0,
        }
    }

    /// What tells this head from another apart from its date, in two pieces (the
    /// head's form before the date's value, and after it): equal pieces, equal heads.
    pub fn around_date(&self) -> (&[u8], &[u8]) {
        (
            &self.text[..self.date.0 as usize],
            &self.text[self.date.1 as usize..],
        )
    }

    /// The HTTP/1.1 writer: the head ended, with `Connection: close` when the
    /// connection will close.
    pub fn h1(mut self, keep_alive: bool) -> Vec<u8> {
        if !keep_alive {
            self.text.extend_from_slice(b"Connection: close\r\n");
        }
        self.text.extend_from_slice(b"\r\n");
        self.text
    }
}

/// How many heads a [`HeadSlots`] keeps.
const HEAD_SLOTS: usize = 64;

/// What a worker made of response heads (each protocol's encoded form), found by what
/// tells a head apart less its `Date` value ([`Head::around_date`]) and a tag (the
/// encoder's own choices). A site sends few distinct heads, one per file and its
/// rules, so after a file's first answer its head is found here, not encoded again. A
/// head goes in one of two slots its hash chooses (two heads sharing one would push
/// each other out at every turn); a new head takes the older of its two.
pub struct HeadSlots<T> {
    slots: Vec<Option<Slot<T>>>,
    hasher: foldhash::fast::FixedState,
    made: u64,
}

struct Slot<T> {
    /// The head less its date: the bytes before it, then after it.
    key: Box<[u8]>,
    split: usize,
    tag: u8,
    made: u64,
    value: T,
}

impl<T> Default for HeadSlots<T> {
    fn default() -> HeadSlots<T> {
        HeadSlots {
            slots: Vec::new(),
            hasher: foldhash::fast::FixedState::default(),
            made: 0,
        }
    }
}

impl<T> HeadSlots<T> {
    /// What `head` with `tag` was made into, found or made now by `make`; and whether
    /// it was made now.
    pub fn get_or_make(&mut self, head: &Head, tag: u8, make: impl FnOnce() -> T) -> (&T, bool) {
        use std::hash::BuildHasher;
        let (before, after) = head.around_date();
        let hash = self.hasher.hash_one((before, after, tag));
        if self.slots.is_empty() {
            self.slots.resize_with(HEAD_SLOTS, || None);
        }
        let places = [
            hash as usize % HEAD_SLOTS,
            (hash >> 32) as usize % HEAD_SLOTS,
        ];
        let hit = places.into_iter().find(|&i| {
            self.slots[i].as_ref().is_some_and(|s| {
                let (b, a) = s.key.split_at(s.split);
                s.tag == tag && b == before && a == after
            })
        });
        let (i, made) = match hit {
            Some(i) => (i, false),
            None => {
                let i = places
                    .into_iter()
                    .min_by_key(|&i| self.slots[i].as_ref().map_or(0, |s| s.made))
                    .unwrap_or(places[0]);
                self.made += 1;
                self.slots[i] = Some(Slot {
                    key: [before, after].concat().into_boxed_slice(),
                    split: before.len(),
                    tag,
                    made: self.made,
                    value: make(),
                });
                (i, true)
            }
        };
        match &self.slots[i] {
            Some(s) => (&s.value, made),
            None => unreachable!("slot {i} was just found or filled"),
        }
    }
}

/// The fields of a [`Head`]: (name, value).
pub struct FieldIter<'a> {
    text: &'a [u8],
    at: &'a [(u32, u32)],
    next: usize,
}

impl<'a> Iterator for FieldIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let &(start, name) = self.at.get(self.next)?;
        self.next += 1;
        let (start, name) = (start as usize, name as usize);
        // The line ends where the next begins (or the text ends), less its CRLF.
        let end = self
            .at
            .get(self.next)
            .map_or(self.text.len(), |&(s, _)| s as usize)
            - 2;
        Some((
            &self.text[start..start + name],
            &self.text[start + name + 2..end],
        ))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.at.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for FieldIter<'_> {}

fn push_field(text: &mut Vec<u8>, at: &mut Places, name: &str, value: &str) {
    debug_assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic() && b != b':'));
    at.push((text.len() as u32, name.len() as u32));
    text.extend_from_slice(name.as_bytes());
    text.extend_from_slice(b": ");
    let fits = |b: u8| b == b' ' || b.is_ascii_graphic();
    // Every byte looked at, no early exit: the compiler checks many at a time.
    if value
        .bytes()
        .fold(true, |ok, b| ok & (b.wrapping_sub(b' ') < 0x7f - b' '))
    {
        // Nearly always: the value is written as it is.
        text.extend_from_slice(value.as_bytes());
    } else {
        for &b in value.as_bytes() {
            if fits(b) {
                text.push(b);
            } else {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                text.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            }
        }
    }
    text.extend_from_slice(b"\r\n");
}

/// What the tests of the protocols' head encoders share.
#[cfg(test)]
pub(crate) mod testing {
    use super::Head;

    /// A small random number generator (a linear congruential one), seeded: `next(n)`
    /// is below `n`.
    pub fn lcg(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        }
    }

    /// Field names and values a random head is made of: connection fields (which
    /// HTTP/2 and HTTP/3 never send), bytes to percent-encode, empty values.
    pub const NAMES: [&str; 7] = [
        "Content-Type",
        "ETag",
        "X-A",
        "Connection",
        "Vary",
        "Location",
        "Accept-Ranges",
    ];
    pub const VALUES: [&str; 7] = [
        "text/html",
        "\"x\"",
        "",
        "a b",
        "/\r\n\u{e9}",
        "close",
        "bytes",
    ];

    /// A head of `status` and up to `most` random fields of [`NAMES`] and [`VALUES`].
    pub fn random_head(
        next: &mut impl FnMut(u64) -> u64,
        status: crate::Status,
        date: &str,
        most: u64,
    ) -> Head {
        let mut h = Head::new(status, date);
        for _ in 0..next(most + 1) {
            h.field(NAMES[next(7) as usize], VALUES[next(7) as usize]);
        }
        h
    }

    /// Bytes written in hex, spaces between them allowed (as the RFCs' examples are).
    pub fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The fields a client reads in `h`'s HTTP/1.1 form, names lower-cased, less the
    /// connection's own, after `:status`: what HTTP/2 and HTTP/3 must send.
    pub fn h1_fields(h: &Head, keep_alive: bool) -> Vec<(String, String)> {
        let text = String::from_utf8(h.clone().h1(keep_alive)).unwrap();
        let mut want = vec![(":status".to_string(), h.status().code().to_string())];
        for line in text.lines().skip(1).take_while(|l| !l.is_empty()) {
            let (n, v) = line.split_once(": ").unwrap();
            if !crate::h2::hpack::connection_field(n.as_bytes()) {
                want.push((n.to_ascii_lowercase(), v.to_string()));
            }
        }
        want
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn head_bytes() {
        let mut h = Head::new(Status::Ok, "Sun, 06 Nov 1994 08:49:37 GMT");
        h.content_length(5).field("Content-Type", "text/plain");
        assert_eq!(
            String::from_utf8(h.h1(false)).unwrap(),
            "HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 5\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        );
    }

    /// Rules: docs/http.md F2.
    #[test]
    fn a_field_value_cannot_end_its_line() {
        let mut h = Head::new(Status::Ok, "D");
        h.field("Location", "/a\r\nSet-Cookie: x=1\t\u{7f}\u{e9} b");
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [(
                &b"Location"[..],
                &b"/a%0D%0ASet-Cookie: x=1%09%7F%C3%A9 b"[..]
            )]
        );
        let text = String::from_utf8(h.h1(true)).unwrap();
        assert!(
            text.contains("Location: /a%0D%0ASet-Cookie: x=1%09%7F%C3%A9 b\r\n\r\n"),
            "{text}"
        );
    }

    /// The HTTP/1.1 head as it was written before heads had a structure (the text
    /// alone), to which the writer must stay equal byte for byte.
    fn text_head(status: Status, date: &str, ops: &[Op], keep_alive: bool) -> Vec<u8> {
        let mut buf = format!(
            "HTTP/1.1 {} {}\r\nServer: linerate\r\nDate: {date}\r\n",
            status.code(),
            status.reason()
        )
        .into_bytes();
        let line = |buf: &mut Vec<u8>, n: &str, v: &str| {
            buf.extend_from_slice(format!("{n}: ").as_bytes());
            for &b in v.as_bytes() {
                if b == b' ' || b.is_ascii_graphic() {
                    buf.push(b);
                } else {
                    buf.extend_from_slice(format!("%{b:02X}").as_bytes());
                }
            }
            buf.extend_from_slice(b"\r\n");
        };
        for op in ops {
            match op {
                Op::Field(n, v) => line(&mut buf, n, v),
                Op::Length(n) => line(&mut buf, "Content-Length", &n.to_string()),
                Op::Kept(fields) => {
                    for (n, v) in fields {
                        line(&mut buf, n, v);
                    }
                }
            }
        }
        if !keep_alive {
            buf.extend_from_slice(b"Connection: close\r\n");
        }
        buf.extend_from_slice(b"\r\n");
        buf
    }

    #[derive(Clone, Debug)]
    enum Op {
        Field(String, String),
        Length(u64),
        Kept(Vec<(String, String)>),
    }

    fn name() -> impl Strategy<Value = String> {
        "[A-Za-z][A-Za-z0-9-]{0,20}"
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ -~]{0,40}",
            any::<String>().prop_map(|s| s.chars().take(40).collect()),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (name(), value()).prop_map(|(n, v)| Op::Field(n, v)),
            any::<u64>().prop_map(Op::Length),
            prop::collection::vec((name(), value()), 0..6).prop_map(Op::Kept),
        ]
    }

    proptest! {
        /// The HTTP/1.1 writer writes what the text-only head wrote, and the fields
        /// read back from their places are the lines it wrote, one for one.
        #[test]
        fn the_h1_writer_is_the_text_head_and_the_places_are_its_lines(
            ops in prop::collection::vec(op(), 0..12),
            status in prop::sample::select(vec![
                Status::Ok,
                Status::PartialContent,
                Status::NotModified,
                Status::NotFound,
                Status::InternalServerError,
            ]),
            keep_alive: bool,
        ) {
            let date = "Sun, 06 Nov 1994 08:49:37 GMT";
            let mut h = Head::new(status, date);
            for op in &ops {
                match op {
                    Op::Field(n, v) => { h.field(n, v); }
                    Op::Length(n) => { h.content_length(*n); }
                    Op::Kept(fields) => {
                        let mut f = Fields::default();
                        for (n, v) in fields {
                            f.field(n, v);
                        }
                        h.fields(&f);
                    }
                }
            }
            prop_assert_eq!(h.status(), status);
            prop_assert_eq!(h.date(), date.as_bytes());
            let mut lines = Vec::new();
            for (n, v) in h.iter() {
                lines.extend_from_slice(n);
                lines.extend_from_slice(b": ");
                lines.extend_from_slice(v);
                lines.extend_from_slice(b"\r\n");
            }
            let (before, after) = h.around_date();
            prop_assert!(after.ends_with(&lines) && after[2..] == lines[..]);
            prop_assert!(before.ends_with(b"Date: "));
            let written = h.h1(keep_alive);
            prop_assert_eq!(written, text_head(status, date, &ops, keep_alive));
        }
    }
}
