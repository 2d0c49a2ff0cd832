//! An HTTP/2 connection never panics whatever a client sends, and makes the same
//! events and the same frames of its own (and of its answers) whether the bytes come
//! at once or in the pieces the first byte chooses. Every request is answered with a
//! 5-byte body, as far as the client's windows allow.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::h2::{Config, Connection, Event, PREFACE};
use linerate_http::request::{Http2, Limits};

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
    for piece in data.chunks(step.max(1)) {
        c.receive(piece);
        loop {
            match c.next(now) {
                Event::Wait => break,
                Event::Request { stream, request, priority } => {
                    events.push(Event::Request { stream, request, priority });
                    c.response_head(stream, 200, [("content-length", "5")], false, &mut out);
                    owed.push((stream, 5));
                }
                Event::Cancel { stream } => {
                    owed.retain(|(s, _)| *s != stream);
                    events.push(Event::Cancel { stream });
                }
                e => events.push(e),
            }
        }
        // The answers' bodies as the windows allow.
        owed.retain_mut(|(stream, left)| {
            let n = (*left).min(c.window(*stream)).min(c.max_frame());
            if n == 0 {
                return true;
            }
            *left -= n;
            out.extend_from_slice(&c.data_header(*stream, n as u32, *left == 0));
            *left > 0
        });
        c.take_control(&mut out);
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
