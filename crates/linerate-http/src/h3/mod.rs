//! HTTP/3 (RFC 9114) with QPACK (RFC 9204), sans I/O: the bytes on a connection's
//! streams, read and written here; the streams themselves are QUIC's.
//!
//! QUIC (RFC 9000) is quinn-proto's, driven by the server's workers: packets,
//! TLS 1.3, loss recovery, flow control, and streams that hand their bytes over in
//! order but cut anywhere. What HTTP/3 puts on those streams is here, each part read
//! from pieces of any size (one byte at a time as well as all at once) and written by
//! appending to a buffer, so every rule is tested with literal bytes:
//!
//! - [`varint`]: QUIC's variable-length integers, in which HTTP/3 writes every type,
//!   length, setting and id;
//! - [`frame`]: the frames of a control or request stream ([`FrameReader`]: DATA passed
//!   through, the others held whole up to a limit, reserved and unknown types skipped),
//!   SETTINGS read and written, and the server's HEADERS, DATA and GOAWAY headers;
//! - [`stream`]: the type that begins each unidirectional stream, and the one control,
//!   QPACK encoder and QPACK decoder stream a client may open;
//! - [`qpack`]: field sections both ways, by the static table, literals and Huffman
//!   strings, and the client's QPACK encoder and decoder streams;
//! - [`error`]: HTTP/3's and QPACK's error codes, and what each ends;
//! - [`connection`]: one connection's streams put together: the client's control and
//!   QPACK streams checked, each request stream's head made into a
//!   [`crate::request::Request`] (through HTTP/2's checks of a field block), its body
//!   discarded and counted, and the server's control stream, heads and GOAWAY.
//!
//! # No dynamic table, either way
//! The server's SETTINGS allow the client's encoder no dynamic table
//! (QPACK_MAX_TABLE_CAPACITY 0, QPACK_BLOCKED_STREAMS 0), as RFC 9204 lets a decoder
//! say: no table is held per connection (HTTP/2's is 4 KiB each, for a gain of a few
//! dozen bytes a request), and no request ever waits on the encoder stream for an entry
//! that a lost packet delays, the head-of-line blocking QUIC removes from everything
//! else. The server's encoder uses no dynamic table either, whatever the client's
//! SETTINGS allow it (an encoder may always do without, §2.1.1): a response head is
//! indexes into the static table and literals, the same bytes on every connection, and
//! the server's QPACK streams carry their type and nothing else.
//!
//! Request fields decode to `(name, value)` pairs given to a callback, as HPACK's do,
//! so the code that makes HTTP/2's fields into a [`crate::request::Request`] can take
//! HTTP/3's too.

pub mod connection;
pub mod error;
pub mod frame;
pub mod qpack;
pub mod stream;
pub mod varint;

pub use error::{ErrorCode, Scope};
pub use frame::{Event, Frame, FrameError, FrameReader, FrameType, Role, ServerSettings, Settings};
pub use qpack::{DecodeError, Decoder, Encoder};
pub use stream::{Accept, PeerStreams, StreamError, StreamType, StreamTypeReader};

/// The ALPN protocol id of HTTP/3 (RFC 9114 §3.1).
pub const ALPN: &[u8] = b"h3";

/// Whether `v` is reserved (`0x1f * N + 0x21`): a frame type, setting, stream type or
/// error code with no meaning, sent to keep peers ignoring what they do not know (RFC
/// 9114 §6.2.3, §7.2.4.1, §7.2.8, §8.1).
pub fn reserved(v: u64) -> bool {
    v >= 0x21 && (v - 0x21).is_multiple_of(0x1f)
}

/// The `n`th reserved value, `0x1f * n + 0x21` (the last one a variable-length integer
/// holds, for any larger `n`).
pub fn reserved_id(n: u64) -> u64 {
    0x1f * n.min((varint::MAX - 0x21) / 0x1f) + 0x21
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_values_are_0x1f_n_plus_0x21() {
        let first: Vec<u64> = (0..0x100).filter(|&v| reserved(v)).collect();
        assert_eq!(first, [0x21, 0x40, 0x5f, 0x7e, 0x9d, 0xbc, 0xdb, 0xfa]);
        assert_eq!(reserved_id(0), 0x21);
        assert_eq!(reserved_id(1), 0x40);
        // The last, as RFC 9114 §11.2.1 writes it.
        assert_eq!(reserved_id(u64::MAX), 0x3fff_ffff_ffff_fffe);
        assert!(reserved(reserved_id(u64::MAX)));
    }

    /// A client's streams as QUIC hands them over, one byte at a time: the control
    /// stream (its type, SETTINGS, a reserved frame), the QPACK streams, a reserved
    /// stream, and a request (HEADERS of a QPACK section with Huffman strings, DATA).
    #[test]
    fn a_clients_streams_read_one_byte_at_a_time() {
        let mut peer = PeerStreams::new();
        let mut control = vec![0x00, 0x04, 0x04, 0x01, 0x00, 0x07, 0x00, 0x21, 0x00];
        control.extend([0x07, 0x01, 0x00]);
        let mut opened = Vec::new();
        for stream in [
            &control[..],
            &[0x02, 0x20],
            &[0x03, 0x48],
            &[0x21, 0xff, 0xff],
        ] {
            let mut types = StreamTypeReader::new();
            let mut at = 0;
            let t = loop {
                let (n, t) = types.read(&stream[at..at + 1]);
                at += n;
                if let Some(t) = t {
                    break t;
                }
            };
            opened.push(peer.open(t).unwrap());
            match t {
                StreamType::Control => {
                    let mut r = FrameReader::new(Role::Control, 1024);
                    let mut got = Vec::new();
                    for b in &stream[at..] {
                        if let (1, Some(e)) = r.read(std::slice::from_ref(b)).unwrap() {
                            got.push(e.clone().into_owned_test());
                        }
                    }
                    assert_eq!(
                        got,
                        [
                            "settings Settings { qpack_max_table_capacity: 0, max_field_section_size: None, qpack_blocked_streams: 0 }",
                            "skipped 33",
                            "goaway 0"
                        ]
                    );
                }
                StreamType::QpackEncoder => {
                    assert_eq!(qpack::EncoderStreamReader::new().read(&stream[at..]), Ok(1));
                }
                StreamType::QpackDecoder => {
                    let mut r = qpack::DecoderStreamReader::new();
                    assert_eq!(r.read(&stream[at..]), Ok(1));
                }
                _ => {}
            }
        }
        assert_eq!(opened[3], Accept::Ignore);

        // GET https://www.example.com/ : :method GET, :scheme https, :path /,
        // :authority www.example.com (Huffman), then a 3-byte body.
        let section = [
            0x00, 0x00, 0xd1, 0xd7, 0xc1, 0x50, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b,
            0xa0, 0xab, 0x90, 0xf4, 0xff,
        ];
        let mut request = Vec::new();
        frame::write_headers_header(&mut request, section.len() as u64).unwrap();
        request.extend(section);
        frame::write_data_header(&mut request, 3).unwrap();
        request.extend(b"abc");
        let mut r = FrameReader::new(Role::Request, 1024);
        let mut fields = Vec::new();
        let mut body = Vec::new();
        for b in &request {
            match r.read(std::slice::from_ref(b)).unwrap() {
                (1, Some(Event::Frame(Frame::Headers(h)))) => {
                    Decoder::new()
                        .decode(&h, 1 << 14, &mut |n, v| {
                            fields.push(format!(
                                "{}: {}",
                                String::from_utf8_lossy(n),
                                String::from_utf8_lossy(v)
                            ))
                        })
                        .unwrap();
                }
                (1, Some(Event::DataBytes(d))) => body.extend_from_slice(d),
                (1, _) => {}
                (n, e) => panic!("{n} bytes taken, {e:?}"),
            }
        }
        assert_eq!(r.end(), Ok(()));
        assert_eq!(
            fields,
            [
                ":method: GET",
                ":scheme: https",
                ":path: /",
                ":authority: www.example.com"
            ]
        );
        assert_eq!(body, b"abc");
    }

    impl Event<'_> {
        /// A short text of the event, to compare in tests.
        fn into_owned_test(self) -> String {
            match self {
                Event::Frame(Frame::Settings(s)) => format!("settings {s:?}"),
                Event::Frame(Frame::GoAway(id)) => format!("goaway {id}"),
                Event::Skipped { kind, .. } => format!("skipped {kind}"),
                e => format!("{e:?}"),
            }
        }
    }
}
