//! An HTTP/2 connection never panics whatever a client sends, and makes the same
//! events of what the client sent whether its bytes come at once or in the pieces the
//! first byte chooses. Every request is then answered, after the last piece, with a
//! 5-byte body as far as the client's windows allow, under one of a few heads (by its
//! stream id) through the indexing encoder; whatever SETTINGS the client sent, every
//! field block the server wrote decodes, through one client table, to its head's own
//! fields. (This decoder always allows a 4,096-byte table: the size update owed after
//! a client lowers it is checked by the unit tests, not here.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::fields::Head;
use linerate_http::h2::hpack::{Decoder, HeadCache};
use linerate_http::h2::{Config, Connection, Event, PREFACE};
use linerate_http::request::{Http2, Limits};
use linerate_http::Protocol;

/// The heads answers go with: one of them, by stream id, and the fields a client
/// decodes from it (less `date`).
fn heads() -> Vec<(Head, Vec<(Vec<u8>, Vec<u8>)>)> {
    use linerate_http::Status;
    let long = "v".repeat(900);
    let mut out = Vec::new();
    for (i, extra) in ["", "x", &long].iter().enumerate() {
        let mut h = Head::new(Status::Ok, "Fri, 27 Nov 2026 00:00:00 GMT");
        h.field("Content-Type", "text/plain")
            .field("ETag", &format!("\"{i}\""));
        if !extra.is_empty() {
            h.field("X-Extra", extra);
        }
        h.content_length(5);
        let text = String::from_utf8(h.clone().h1(true)).unwrap();
        let mut want = vec![(b":status".to_vec(), b"200".to_vec())];
        for line in text.lines().skip(1).take_while(|l| !l.is_empty()) {
            let (n, v) = line.split_once(": ").unwrap();
            if n != "Date" {
                want.push((n.to_ascii_lowercase().into_bytes(), v.as_bytes().to_vec()));
            }
        }
        out.push((h, want));
    }
    out
}

/// Every field block in `out` (HEADERS and its CONTINUATIONs), in order.
fn blocks(mut out: &[u8]) -> Vec<Vec<u8>> {
    let (mut all, mut block) = (Vec::new(), Vec::new());
    while out.len() >= 9 {
        let len = usize::from(out[0]) << 16 | usize::from(out[1]) << 8 | usize::from(out[2]);
        let (kind, flags) = (out[3], out[4]);
        let payload = out.get(9..9 + len).expect("the server's frames are whole");
        if kind == 1 || kind == 9 {
            block.extend_from_slice(payload);
            if flags & 0x4 != 0 {
                all.push(std::mem::take(&mut block));
            }
        }
        out = &out[9 + len..];
    }
    all
}

fn run(data: &[u8], step: usize) -> (Vec<Event>, Vec<u8>) {
    let now = std::time::Instant::now();
    let limits = Limits {
        request_line_bytes: 256,
        header_bytes: 512,
        header_fields: 8,
        client_fields: true,
        forwarded: Some(linerate_http::forwarded::Header::XForwardedFor),
        cors: true,
        authorization: true,
        http2: Http2::On,
    };
    let mut c = Connection::new(limits, Config::default());
    let (mut events, mut out) = (Vec::new(), Vec::new());
    let mut owed: Vec<(u32, u64)> = Vec::new();
    let heads = heads();
    let mut cache = HeadCache::new();
    let mut sent = Vec::new();
    // What the client sent, read piece by piece: the requests are answered after the
    // last piece, so that what the connection makes of the input cannot depend on
    // when an answer ended (a HEADERS frame again on a stream is a reset while its
    // answer runs, and not once it has ended).
    let mut asked = Vec::new();
    for piece in data.chunks(step.max(1)) {
        c.receive(piece);
        loop {
            match c.next(now) {
                Event::Wait => break,
                Event::Request {
                    stream,
                    request,
                    priority,
                } => {
                    asked.push(stream);
                    events.push(Event::Request {
                        stream,
                        request,
                        priority,
                    });
                }
                Event::Cancel { stream } => {
                    asked.retain(|s| *s != stream);
                    events.push(Event::Cancel { stream });
                }
                e => events.push(e),
            }
        }
        c.take_control(&mut out);
    }
    for stream in asked {
        let which = (stream as usize / 2) % heads.len();
        c.head(stream, &heads[which].0, false, &mut out, &mut cache);
        sent.push(which);
        owed.push((stream, 5));
    }
    // The answers' bodies as the windows allow.
    owed.retain_mut(|(stream, left)| {
        let n = (*left).min(c.window(*stream)).min(c.max_frame());
        if n == 0 {
            return true;
        }
        *left -= n;
        out.extend_from_slice(&c.data_header(*stream, n as u32, *left == 0));
        // The frame's payload, so that the frames after it are read where they are.
        out.resize(out.len() + n as usize, b'.');
        *left > 0
    });
    c.take_control(&mut out);
    // One client table for every block, in the order they were written.
    let mut d = Decoder::new();
    let written = blocks(&out);
    assert_eq!(written.len(), sent.len());
    for (block, &which) in written.iter().zip(&sent) {
        let mut got = Vec::new();
        d.decode(block, 1 << 16, &mut |n, v| {
            if n != b"date" {
                got.push((n.to_vec(), v.to_vec()));
            }
        })
        .expect("a block the server wrote decodes");
        assert_eq!(got, heads[which].1);
    }
    (events, out)
}

fuzz_target!(|input: &[u8]| {
    let Some((&step, data)) = input.split_first() else {
        return;
    };
    // Past the preface and an empty SETTINGS, so the frames are what is explored.
    let mut bytes = PREFACE.to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    bytes.extend_from_slice(data);
    let whole = run(&bytes, bytes.len());
    let pieces = run(&bytes, usize::from(step % 64) + 1);
    assert_eq!(whole.0, pieces.0);
});
