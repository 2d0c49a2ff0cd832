//! The client side of HTTP/2 for `bench http --h2`, sans I/O: the connection's preface
//! and requests as bytes to send, and the server's frames read back into whole
//! responses (status, body length), the windows given back as the bodies come. One
//! decoder per connection (the server's, from `linerate-http`); requests are field
//! blocks built once per item (the static table and literals), so a request costs a
//! frame header and a copy.
//!
//! A DATA payload is never held: the caller may throw it away in the kernel
//! (`recv(MSG_TRUNC)`) once its frame header is read ([`ClientH2::discardable`]), as
//! HTTP/1.1 bodies are.

use std::collections::VecDeque;

use linerate_http::h2::frame::{self, flag, setting, ErrorCode, Header, Kind, HEADER_LEN};
use linerate_http::h2::hpack::{string, Decoder};

/// The stream window the client advertises: the largest there is, so no stream waits
/// for a WINDOW_UPDATE (the connection's is raised as far at the start, and given back
/// in steps of [`GIVE_BACK`]).
const WINDOW: u32 = (1 << 31) - 1;
/// Connection window given back once this much has come.
const GIVE_BACK: u64 = 1 << 30;

/// A stream in flight.
struct Stream {
    id: u32,
    status: u16,
    received: u64,
}

/// What the server's bytes amounted to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Got {
    /// The `index`th stream in flight (in the order asked) ended: its status and body
    /// length.
    Response { index: usize, status: u16, len: u64 },
    /// The `index`th stream was reset by the server.
    Reset { index: usize, code: u32 },
    /// The server goes away: streams above `last` will not be answered.
    GoAway { last: u32, code: u32 },
    /// Nothing whole yet.
    Need,
}

/// One connection's HTTP/2 state, client side.
pub(crate) struct ClientH2 {
    decoder: Decoder,
    next_id: u32,
    streams: VecDeque<Stream>,
    /// The DATA payload being read: its stream, bytes left, and whether it ends it.
    data: Option<(u32, u64, bool)>,
    /// Connection window used since it was last given back.
    used: u64,
    /// The server's largest frame (its SETTINGS).
    pub max_frame: u32,
    /// Streams the server takes at once: 1 until its first SETTINGS come, then what
    /// they say (unlimited if they say nothing). Asking for more would be refused.
    pub max_streams: u32,
    settings_seen: bool,
}

/// A request's field block: GET `path` of `authority`.
pub(crate) fn request_block(authority: &str, path: &str, https: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(32 + path.len() + authority.len());
    b.push(0x82); // :method GET
    b.push(if https { 0x87 } else { 0x86 }); // :scheme
                                             // :path and :authority, literal without indexing, names from the static table.
    for (index, value) in [(4u8, path), (1, authority)] {
        b.push(index);
        string(&mut b, value.as_bytes());
    }
    b
}

/// Appends a field as a literal with a new name, never indexed.
pub(crate) fn literal_field(b: &mut Vec<u8>, name: &str, value: &str) {
    b.push(0x10);
    string(b, name.as_bytes());
    string(b, value.as_bytes());
}

impl ClientH2 {
    /// A new connection; its preface, SETTINGS and window goes into `out`.
    /// `max_frame`: the largest DATA payload the client takes (the servers' frames are
    /// cut to it: 16 KiB is what browsers take).
    pub fn new(out: &mut Vec<u8>, max_frame: u32) -> ClientH2 {
        out.extend_from_slice(frame::PREFACE);
        frame::write_settings(
            out,
            &[
                (setting::ENABLE_PUSH, 0),
                (setting::INITIAL_WINDOW_SIZE, WINDOW),
                (setting::MAX_FRAME_SIZE, max_frame),
            ],
        );
        frame::write_window_update(out, 0, WINDOW - frame::DEFAULT_WINDOW);
        ClientH2 {
            decoder: Decoder::new(),
            next_id: 1,
            streams: VecDeque::new(),
            data: None,
            used: 0,
            max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            max_streams: 1,
            settings_seen: false,
        }
    }

    /// Asks for `block` on a new stream.
    pub fn request(&mut self, block: &[u8], out: &mut Vec<u8>) {
        let id = self.next_id;
        self.next_id += 2;
        frame::write(
            out,
            Kind::Headers,
            flag::END_HEADERS | flag::END_STREAM,
            id,
            block,
        );
        self.streams.push_back(Stream {
            id,
            status: 0,
            received: 0,
        });
    }

    /// Forgets the streams above `last` (a GOAWAY's): their indexes, last first.
    pub fn forget_above(&mut self, last: u32) -> Vec<usize> {
        let gone: Vec<usize> = (0..self.streams.len())
            .rev()
            .filter(|&i| self.streams[i].id > last)
            .collect();
        for &i in &gone {
            self.streams.remove(i);
        }
        gone
    }

    /// Bytes of a DATA payload the caller may throw away unread now.
    pub fn discardable(&self) -> Option<u64> {
        self.data.map(|(_, left, _)| left).filter(|&l| l > 0)
    }

    /// `n` payload bytes were thrown away (at most [`ClientH2::discardable`]).
    pub fn discarded(&mut self, n: u64, out: &mut Vec<u8>) -> Got {
        self.payload(n, out)
    }

    fn index(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Takes `n` bytes of the DATA payload being read.
    fn payload(&mut self, n: u64, out: &mut Vec<u8>) -> Got {
        let Some((id, left, end)) = self.data.as_mut() else {
            return Got::Need;
        };
        *left -= n;
        let (id, done, end) = (*id, *left == 0, *end);
        if let Some(i) = self.index(id) {
            self.streams[i].received += n;
        }
        self.used += n;
        if self.used >= GIVE_BACK {
            frame::write_window_update(out, 0, self.used as u32);
            self.used = 0;
        }
        if done {
            self.data = None;
            if end {
                return self.end(id);
            }
        }
        Got::Need
    }

    fn end(&mut self, id: u32) -> Got {
        match self.index(id) {
            Some(index) => {
                let s = self.streams.remove(index).expect("found");
                Got::Response {
                    index,
                    status: s.status,
                    len: s.received,
                }
            }
            None => Got::Need,
        }
    }

    /// Reads frames from `buf`: how many bytes it took, and what came of them (it stops
    /// after each whole response, so the caller takes them one at a time). Frames the
    /// client owes (SETTINGS and PING acknowledgements, window) go into `out`.
    pub fn read(&mut self, buf: &[u8], out: &mut Vec<u8>) -> Result<(usize, Got), String> {
        let mut at = 0;
        loop {
            if let Some((_, left, _)) = self.data {
                let n = left.min((buf.len() - at) as u64);
                at += n as usize;
                match self.payload(n, out) {
                    Got::Need if self.data.is_some() => return Ok((at, Got::Need)),
                    Got::Need => continue,
                    got => return Ok((at, got)),
                }
            }
            let Some(head) = buf[at..].first_chunk::<HEADER_LEN>() else {
                return Ok((at, Got::Need));
            };
            let h = Header::parse(head);
            if h.kind == Kind::Data && h.flags & flag::PADDED == 0 {
                at += HEADER_LEN;
                self.data = Some((h.stream, u64::from(h.len), h.flags & flag::END_STREAM != 0));
                if h.len == 0 {
                    self.data = None;
                    if h.flags & flag::END_STREAM != 0 {
                        return Ok((at, self.end(h.stream)));
                    }
                }
                continue;
            }
            let end = at + HEADER_LEN + h.len as usize;
            if buf.len() < end {
                if end - at > 1 << 20 {
                    return Err(format!("a {:?} frame of {} bytes", h.kind, h.len));
                }
                return Ok((at, Got::Need));
            }
            let payload = &buf[at + HEADER_LEN..end];
            at = end;
            if let Some(got) = self.frame(h, payload, out)? {
                return Ok((at, got));
            }
        }
    }

    fn frame(&mut self, h: Header, p: &[u8], out: &mut Vec<u8>) -> Result<Option<Got>, String> {
        let unpad = |p: &'_ [u8]| -> Result<Vec<u8>, String> {
            if h.flags & flag::PADDED == 0 {
                return Ok(p.to_vec());
            }
            let (&pad, rest) = p.split_first().ok_or("a padded frame without its length")?;
            let keep = rest
                .len()
                .checked_sub(usize::from(pad))
                .ok_or("padding longer than the frame")?;
            Ok(rest[..keep].to_vec())
        };
        match h.kind {
            Kind::Settings if h.flags & flag::ACK == 0 => {
                if !std::mem::replace(&mut self.settings_seen, true) {
                    self.max_streams = u32::MAX;
                }
                for s in p.chunks_exact(6) {
                    let value = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                    match u16::from_be_bytes([s[0], s[1]]) {
                        setting::MAX_FRAME_SIZE => self.max_frame = value,
                        setting::MAX_CONCURRENT_STREAMS => self.max_streams = value,
                        _ => {}
                    }
                }
                frame::write(out, Kind::Settings, flag::ACK, 0, &[]);
            }
            Kind::Ping if h.flags & flag::ACK == 0 => {
                frame::write(out, Kind::Ping, flag::ACK, 0, p);
            }
            Kind::Headers => {
                if h.flags & flag::END_HEADERS == 0 {
                    return Err("a response head in CONTINUATION frames".into());
                }
                let mut block = unpad(p)?;
                if h.flags & flag::PRIORITY != 0 {
                    block.drain(..5.min(block.len()));
                }
                let mut status = 0;
                self.decoder
                    .decode(&block, 1 << 20, &mut |n, v| {
                        if n == b":status" {
                            status = std::str::from_utf8(v)
                                .ok()
                                .and_then(|s| s.parse().ok())
                                .unwrap_or(0);
                        }
                    })
                    .map_err(|e| format!("a response head that does not decode: {e:?}"))?;
                if let Some(i) = self.index(h.stream) {
                    // An interim (1xx) head is followed by the final one.
                    if !(100..200).contains(&status) {
                        self.streams[i].status = status;
                    }
                }
                if h.flags & flag::END_STREAM != 0 {
                    return Ok(Some(self.end(h.stream)));
                }
            }
            Kind::Data => {
                // Padded (unpadded DATA is read as it comes, above).
                let body = unpad(p)?;
                self.used += u64::from(h.len);
                if let Some(i) = self.index(h.stream) {
                    self.streams[i].received += body.len() as u64;
                }
                if h.flags & flag::END_STREAM != 0 {
                    return Ok(Some(self.end(h.stream)));
                }
            }
            Kind::RstStream => {
                let code = p.first_chunk::<4>().map_or(0, |c| u32::from_be_bytes(*c));
                if let Some(index) = self.index(h.stream) {
                    self.streams.remove(index);
                    return Ok(Some(Got::Reset { index, code }));
                }
            }
            Kind::GoAway => {
                let last = p
                    .first_chunk::<4>()
                    .map_or(0, |c| u32::from_be_bytes(*c) & 0x7fff_ffff);
                let code = p
                    .get(4..8)
                    .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                return Ok(Some(Got::GoAway { last, code }));
            }
            Kind::PushPromise => return Err("PUSH_PROMISE, though push is off".into()),
            _ => {}
        }
        Ok(None)
    }

    /// The name of an error code, for the report.
    pub fn code_name(code: u32) -> &'static str {
        ErrorCode::from_u32(code).name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_wait_for_the_servers_settings_and_keep_to_its_limit() {
        let mut out = Vec::new();
        let mut c = ClientH2::new(&mut out, 16_384);
        assert_eq!(c.max_streams, 1, "one stream until the server has spoken");
        let mut settings = Vec::new();
        frame::write_settings(&mut settings, &[(setting::MAX_CONCURRENT_STREAMS, 8)]);
        out.clear();
        let (used, _) = c.read(&settings, &mut out).unwrap();
        assert_eq!(used, settings.len());
        assert_eq!(c.max_streams, 8);
        // SETTINGS that do not name it leave it; a first SETTINGS without it: no limit.
        let mut other = Vec::new();
        frame::write_settings(&mut other, &[(setting::MAX_FRAME_SIZE, 32_768)]);
        c.read(&other, &mut out).unwrap();
        assert_eq!((c.max_streams, c.max_frame), (8, 32_768));
        let mut fresh = ClientH2::new(&mut out, 16_384);
        fresh.read(&other, &mut out).unwrap();
        assert_eq!(fresh.max_streams, u32::MAX);
    }
}
