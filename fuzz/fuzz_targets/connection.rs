//! A connection's input makes the same events whether its bytes come at once or in the
//! pieces the first byte chooses, never panics, and never holds more than it may.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::connection::{Connection, Event};
use linerate_http::request::{Http2, Limits};
use linerate_http::Protocol;

fn events(data: &[u8], step: usize) -> (Vec<Event>, usize) {
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
    let mut c = Connection::new(limits, 4);
    let mut out = Vec::new();
    let mut most = 0;
    for piece in data.chunks(step.max(1)) {
        c.receive(piece);
        most = most.max(c.buffered());
        loop {
            match c.next(now) {
                Event::Wait => break,
                // The connection turned to HTTP/2: nothing is owed for it.
                Event::Http2 => {
                    out.push(Event::Http2);
                    break;
                }
                e => {
                    out.push(e);
                    c.sent();
                }
            }
        }
    }
    (out, most)
}

fuzz_target!(|input: &[u8]| {
    let Some((&step, data)) = input.split_first() else {
        return;
    };
    let (whole, _) = events(data, data.len());
    let (pieces, most) = events(data, usize::from(step % 16) + 1);
    assert_eq!(whole, pieces);
    // A head is at most its limits plus the empty lines before it; a piece may land
    // on top of one.
    assert!(most <= 256 + 512 + 256 + 64 + 16);
});
