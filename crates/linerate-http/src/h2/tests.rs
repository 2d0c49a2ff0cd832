//! One HTTP/2 connection fed literal frames, whole and a byte at a time.

use super::*;

/// A client's bytes, built frame by frame.
#[derive(Default)]
struct Client(Vec<u8>);

impl Client {
    fn open() -> Client {
        let mut c = Client(PREFACE.to_vec());
        frame::write_settings(&mut c.0, &[]);
        c
    }
    fn frame(mut self, kind: Kind, flags: u8, stream: u32, payload: &[u8]) -> Client {
        frame::write(&mut self.0, kind, flags, stream, payload);
        self
    }
    fn get(self, stream: u32, path: &str, flags: u8) -> Client {
        let mut block = Vec::new();
        for (n, v) in [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "h"),
            (":path", path),
        ] {
            hpack::encode_field(&mut block, n, v);
        }
        self.frame(Kind::Headers, flags | flag::END_HEADERS, stream, &block)
    }
}

/// A frame as a test reads it: (kind, flags, stream, payload).
type Sent = (Kind, u8, u32, Vec<u8>);

/// Frames in `bytes`.
fn frames(mut bytes: &[u8]) -> Vec<Sent> {
    let mut out = Vec::new();
    while let Some(h) = bytes.first_chunk::<HEADER_LEN>() {
        let h = Header::parse(h);
        let end = HEADER_LEN + h.len as usize;
        out.push((h.kind, h.flags, h.stream, bytes[HEADER_LEN..end].to_vec()));
        bytes = &bytes[end..];
    }
    out
}

/// What a connection makes of `input` fed `step` bytes at a time: its events other
/// than Wait, and the frames it sent of its own.
fn run(input: &[u8], step: usize) -> (Vec<Event>, Vec<Sent>) {
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    let mut events = Vec::new();
    for piece in input.chunks(step) {
        c.receive(piece);
        loop {
            match c.next(now) {
                Event::Wait => break,
                e => events.push(e),
            }
        }
    }
    let mut out = Vec::new();
    c.take_control(&mut out);
    (events, frames(&out))
}

fn both(input: &[u8]) -> (Vec<Event>, Vec<Sent>) {
    let whole = run(input, input.len());
    assert_eq!(
        whole,
        run(input, 1),
        "at once and one byte at a time differ"
    );
    whole
}

/// The GOAWAY among `frames`, as (last stream, code).
fn goaway(frames: &[Sent]) -> Option<(u32, ErrorCode)> {
    frames.iter().find(|f| f.0 == Kind::GoAway).map(|f| {
        let p = &f.3;
        (
            u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
            ErrorCode::from_u32(u32::from_be_bytes([p[4], p[5], p[6], p[7]])),
        )
    })
}

fn resets(frames: &[Sent]) -> Vec<(u32, ErrorCode)> {
    frames
        .iter()
        .filter(|f| f.0 == Kind::RstStream)
        .map(|f| {
            (
                f.2,
                ErrorCode::from_u32(u32::from_be_bytes([f.3[0], f.3[1], f.3[2], f.3[3]])),
            )
        })
        .collect()
}

/// Rules: docs/http.md T1.
#[test]
fn requests_come_out_with_their_streams_and_settings_are_acknowledged() {
    let input = Client::open()
        .get(1, "/a?x", flag::END_STREAM)
        .get(3, "/b", flag::END_STREAM)
        .frame(Kind::Ping, 0, 0, b"12345678")
        .0;
    let (events, out) = both(&input);
    let paths: Vec<(u32, String)> = events
        .iter()
        .map(|e| match e {
            Event::Request {
                stream, request, ..
            } => (*stream, request.path.clone()),
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(paths, [(1, "/a".to_string()), (3, "/b".to_string())]);
    assert_eq!(out[0].0, Kind::Settings, "our SETTINGS first");
    assert!(out
        .iter()
        .any(|f| f.0 == Kind::Settings && f.1 == flag::ACK));
    assert!(out
        .iter()
        .any(|f| f.0 == Kind::Ping && f.1 == flag::ACK && f.3 == b"12345678"));
    assert_eq!(goaway(&out), None);
}

/// Rules: docs/http.md T2.
#[test]
fn protocol_errors_end_the_connection_with_the_right_code() {
    let cases: Vec<(Vec<u8>, ErrorCode)> = vec![
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), ErrorCode::ProtocolError),
        (
            Client::open().frame(Kind::Data, 0, 1, b"x").0,
            ErrorCode::ProtocolError,
        ),
        (
            Client::open().frame(Kind::Data, 0, 0, b"x").0,
            ErrorCode::ProtocolError,
        ),
        (
            Client::open().frame(Kind::Settings, 0, 0, b"12345").0,
            ErrorCode::FrameSizeError,
        ),
        (
            Client::open()
                .frame(Kind::Settings, 0, 0, &[0, 2, 0, 0, 0, 2])
                .0,
            ErrorCode::ProtocolError,
        ),
        (
            Client::open()
                .frame(Kind::Settings, 0, 0, &[0, 4, 0x80, 0, 0, 0])
                .0,
            ErrorCode::FlowControlError,
        ),
        (
            Client::open().frame(Kind::Ping, 0, 0, b"1234").0,
            ErrorCode::FrameSizeError,
        ),
        (
            Client::open()
                .frame(Kind::WindowUpdate, 0, 0, &[0, 0, 0, 0])
                .0,
            ErrorCode::ProtocolError,
        ),
        (
            Client::open().get(2, "/", flag::END_STREAM).0,
            ErrorCode::ProtocolError,
        ),
        (
            Client::open()
                .get(5, "/", flag::END_STREAM)
                .get(3, "/", flag::END_STREAM)
                .0,
            ErrorCode::ProtocolError,
        ),
        (
            Client::open()
                .frame(Kind::Headers, flag::END_HEADERS, 1, &[0x80 | 70])
                .0,
            ErrorCode::CompressionError,
        ),
        (
            Client::open().frame(Kind::Data, 0, 0, &[0u8; 16_385]).0,
            ErrorCode::FrameSizeError,
        ),
        (
            Client::open()
                .frame(Kind::Continuation, flag::END_HEADERS, 1, &[])
                .0,
            ErrorCode::ProtocolError,
        ),
    ];
    for (input, code) in cases {
        let (_, out) = both(&input);
        assert_eq!(goaway(&out).map(|g| g.1), Some(code), "{input:?}");
    }
}

/// Rules: docs/http.md T2.
#[test]
fn stream_errors_reset_the_stream_and_keep_the_connection() {
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
        ("Upper", "x"),
    ] {
        hpack::encode_field(&mut block, n, v);
    }
    // encode_field lower-cases names: write the upper-case one by hand.
    block.truncate(block.len() - 9);
    block.extend_from_slice(&[0x00, 5, b'U', b'p', b'p', b'e', b'r', 1, b'x']);
    let input = Client::open()
        .frame(
            Kind::Headers,
            flag::END_HEADERS | flag::END_STREAM,
            1,
            &block,
        )
        .get(3, "/", flag::END_STREAM)
        .frame(Kind::Data, 0, 3, b"late")
        .frame(Kind::Priority, 0, 5, &[0, 0, 0, 5, 1])
        .get(7, "/ok", flag::END_STREAM)
        .0;
    let (events, out) = both(&input);
    assert_eq!(goaway(&out), None);
    assert_eq!(
        resets(&out),
        [
            (1, ErrorCode::ProtocolError),
            (3, ErrorCode::StreamClosed),
            (5, ErrorCode::ProtocolError)
        ]
    );
    // Stream 3's reset drops its answer.
    assert_eq!(events[1], Event::Cancel { stream: 3 });
    assert!(matches!(events[2], Event::Request { stream: 7, .. }));
    assert_eq!(events.len(), 3);
}

/// Rules: docs/http.md T3.
#[test]
fn a_reset_from_the_client_cancels_its_answer() {
    let input = Client::open()
        .get(1, "/", flag::END_STREAM)
        .frame(Kind::RstStream, 0, 1, &[0, 0, 0, 8])
        .0;
    let (events, _) = both(&input);
    assert!(matches!(events[0], Event::Request { stream: 1, .. }));
    assert_eq!(events[1], Event::Cancel { stream: 1 });
}

/// Rules: docs/http.md T4.
#[test]
fn the_clients_windows_bound_every_data_byte() {
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    // An initial stream window of 10 bytes.
    c.receive(
        &Client::open()
            .frame(Kind::Settings, 0, 0, &[0, 4, 0, 0, 0, 10])
            .get(1, "/", flag::END_STREAM)
            .0,
    );
    assert!(matches!(c.next(now), Event::Request { stream: 1, .. }));
    let mut out = Vec::new();
    c.response_head(1, 200, [("content-length", "100")], false, &mut out);
    assert_eq!(c.window(1), 10);
    c.data_header(1, 10, false);
    assert_eq!(c.window(1), 0);
    c.receive(
        &Client::default()
            .frame(Kind::WindowUpdate, 0, 1, &[0, 0, 0, 90])
            .0,
    );
    assert_eq!(c.next(now), Event::Wait);
    assert_eq!(c.window(1), 90);
    // The client shrinks the initial window: the stream's goes below zero.
    c.receive(
        &Client::default()
            .frame(Kind::Settings, 0, 0, &[0, 4, 0, 0, 0, 0])
            .0,
    );
    c.next(now);
    assert_eq!(c.window(1), 80);
    c.receive(
        &Client::default()
            .frame(Kind::Settings, 0, 0, &[0, 4, 0, 0, 0, 0])
            .0,
    );
    assert_eq!(c.pending(), 1);
    let h = c.data_header(1, 80, true);
    assert_eq!(Header::parse(&h).flags, flag::END_STREAM);
    assert_eq!(c.pending(), 0);
    assert!(c.is_idle() || c.has_control());
    // The connection's window: 65,535 less the 90 sent.
    assert_eq!(c.send_window, 65_535 - 90);
}

/// Rules: docs/http.md T5.
#[test]
fn streams_beyond_the_limit_are_refused() {
    let mut input = Client::open();
    for i in 0..130u32 {
        input = input.get(2 * i + 1, "/", flag::END_STREAM);
    }
    let (events, out) = run(&input.0, input.0.len());
    assert_eq!(events.len(), 128);
    assert_eq!(
        resets(&out),
        [
            (257, ErrorCode::RefusedStream),
            (259, ErrorCode::RefusedStream)
        ]
    );
}

/// Rules: docs/http.md T5.
#[test]
fn a_continuation_flood_ends_the_connection() {
    let mut input = Client::open().frame(Kind::Headers, 0, 1, &[0x82]);
    for _ in 0..40 {
        input = input.frame(Kind::Continuation, 0, 1, &[]);
    }
    let (events, out) = both(&input.0);
    assert!(events.is_empty());
    assert_eq!(goaway(&out).map(|g| g.1), Some(ErrorCode::EnhanceYourCalm));
}

/// Rules: docs/http.md T2.
#[test]
fn a_body_that_is_not_its_content_length_resets_the_stream() {
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "POST"),
        (":scheme", "https"),
        (":path", "/"),
        ("content-length", "3"),
    ] {
        hpack::encode_field(&mut block, n, v);
    }
    let input = Client::open()
        .frame(Kind::Headers, flag::END_HEADERS, 1, &block)
        .frame(Kind::Data, flag::END_STREAM, 1, b"four")
        .0;
    let (events, out) = both(&input);
    assert!(matches!(events[0], Event::Request { stream: 1, .. }));
    assert_eq!(events[1], Event::Cancel { stream: 1 });
    assert_eq!(resets(&out), [(1, ErrorCode::ProtocolError)]);
}

/// Rules: docs/http.md T6.
#[test]
fn going_away_answers_the_streams_taken_and_ignores_later_ones() {
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    c.receive(&Client::open().get(1, "/", flag::END_STREAM).0);
    assert!(matches!(c.next(now), Event::Request { stream: 1, .. }));
    c.go_away();
    c.receive(&Client::default().get(3, "/", flag::END_STREAM).0);
    assert_eq!(c.next(now), Event::Wait);
    let mut out = Vec::new();
    c.take_control(&mut out);
    assert_eq!(goaway(&frames(&out)), Some((1, ErrorCode::NoError)));
    assert_eq!(c.pending(), 1);
    c.response_head(1, 204, [], true, &mut out);
    assert_eq!(c.pending(), 0);
    assert_eq!(c.ending(), Ending::Linger);
}

/// Rules: docs/http.md T5.
#[test]
fn rapid_resets_end_the_connection() {
    let mut input = Client::open();
    for i in 0..150u32 {
        input = input.get(2 * i + 1, "/", flag::END_STREAM).frame(
            Kind::RstStream,
            0,
            2 * i + 1,
            &[0, 0, 0, 8],
        );
    }
    let (events, out) = run(&input.0, input.0.len());
    let cancels = events
        .iter()
        .filter(|e| matches!(e, Event::Cancel { .. }))
        .count();
    assert_eq!(cancels, 100, "the 101st ends the connection");
    assert_eq!(goaway(&out), Some((201, ErrorCode::EnhanceYourCalm)));
    // A few resets among many answers are a browser leaving a page.
    let mut input = Client::open();
    for i in 0..300u32 {
        input = input.get(2 * i + 1, "/", flag::END_STREAM);
        if i % 3 == 0 {
            input = input.frame(Kind::RstStream, 0, 2 * i + 1, &[0, 0, 0, 8]);
        }
    }
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    c.receive(&input.0);
    let mut n = 0;
    loop {
        match c.next(now) {
            Event::Wait => break,
            Event::Request { stream, .. } => {
                n += 1;
                if (stream / 2) % 3 != 0 {
                    c.response_head(stream, 204, [], true, &mut Vec::new());
                }
            }
            _ => {}
        }
    }
    assert_eq!(n, 300);
    assert_eq!(c.failed(), None);
    // Every other stream reset (half: under a limit by ratio) is ended all the same.
    let mut input = Client::open();
    for i in 0..400u32 {
        input = input.get(2 * i + 1, "/", flag::END_STREAM);
        if i % 2 == 0 {
            input = input.frame(Kind::RstStream, 0, 2 * i + 1, &[0, 0, 0, 8]);
        }
    }
    let (_, out) = run(&input.0, input.0.len());
    assert_eq!(goaway(&out).map(|g| g.1), Some(ErrorCode::EnhanceYourCalm));
    // Spread over time, resets are given back: 100 now and 100 ten seconds later.
    let mut c = Connection::new(Limits::default(), Config::default());
    let start = Instant::now();
    let mut id = 1;
    for at in [start, start + std::time::Duration::from_secs(10)] {
        let mut input = if id == 1 {
            Client::open()
        } else {
            Client(Vec::new())
        };
        for _ in 0..100 {
            input =
                input
                    .get(id, "/", flag::END_STREAM)
                    .frame(Kind::RstStream, 0, id, &[0, 0, 0, 8]);
            id += 2;
        }
        c.receive(&input.0);
        while !matches!(c.next(at), Event::Wait) {}
    }
    assert_eq!(c.failed(), None, "100 resets, then 100 more 10 s later");
}

#[test]
fn priorities_are_read_from_the_field_and_from_priority_update() {
    assert_eq!(
        Priority::parse(b"u=1, i"),
        Priority {
            urgency: 1,
            incremental: true
        }
    );
    assert_eq!(
        Priority::parse(b"i=?0;x=1, u=7"),
        Priority {
            urgency: 7,
            incremental: false
        }
    );
    assert_eq!(
        Priority::parse(b"u=9, i=?1, zz"),
        Priority {
            urgency: 3,
            incremental: true
        }
    );
    assert_eq!(Priority::parse(b"\xff"), Priority::default());
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/"),
        ("priority", "u=0"),
    ] {
        hpack::encode_field(&mut block, n, v);
    }
    let mut update = 1u32.to_be_bytes().to_vec();
    update.extend_from_slice(b"u=6, i");
    let input = Client::open()
        .frame(
            Kind::Headers,
            flag::END_HEADERS | flag::END_STREAM,
            1,
            &block,
        )
        .get(3, "/", flag::END_STREAM)
        .frame(Kind::PriorityUpdate, 0, 0, &update)
        .0;
    let (events, _) = both(&input);
    let got: Vec<(u32, Option<Priority>)> = events
        .iter()
        .map(|e| match e {
            Event::Request {
                stream, priority, ..
            } => (*stream, *priority),
            Event::Priority { stream, priority } => (*stream, Some(*priority)),
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                1,
                Some(Priority {
                    urgency: 0,
                    incremental: false
                })
            ),
            (3, None),
            (
                1,
                Some(Priority {
                    urgency: 6,
                    incremental: true
                })
            ),
        ]
    );
    let (_, out) = both(&Client::open().frame(Kind::PriorityUpdate, 0, 1, &update).0);
    assert_eq!(goaway(&out).map(|g| g.1), Some(ErrorCode::ProtocolError));
}

/// Rules: docs/http.md T5.
#[test]
fn floods_of_frames_that_bring_no_request_end_the_connection() {
    for (kind, flags, payload) in [
        (Kind::Ping, 0, &b"12345678"[..]),
        (Kind::Settings, 0, &[][..]),
        (Kind::Priority, 0, &[0, 0, 0, 0, 16][..]),
        (Kind::Data, 0, &[][..]),
        (Kind::Unknown(0xee), 0, &b"x"[..]),
    ] {
        let stream = if matches!(kind, Kind::Priority | Kind::Data) {
            1
        } else {
            0
        };
        let mut input = Client::open();
        if kind == Kind::Data {
            // An open stream to send empty DATA on.
            let mut block = Vec::new();
            for (n, v) in [(":method", "POST"), (":scheme", "https"), (":path", "/")] {
                hpack::encode_field(&mut block, n, v);
            }
            input = input.frame(Kind::Headers, flag::END_HEADERS, 1, &block);
        }
        for _ in 0..1200 {
            input = input.frame(kind, flags, stream, payload);
        }
        let (_, out) = run(&input.0, input.0.len());
        assert_eq!(
            goaway(&out).map(|g| g.1),
            Some(ErrorCode::EnhanceYourCalm),
            "{kind:?}"
        );
    }
    // As many with requests among them are a busy client, not a flood.
    let mut input = Client::open();
    for i in 0..300u32 {
        input = input.get(2 * i + 1, "/", flag::END_STREAM);
        for _ in 0..4 {
            input = input.frame(Kind::Ping, 0, 0, b"12345678");
        }
    }
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    c.receive(&input.0);
    loop {
        match c.next(now) {
            Event::Wait => break,
            Event::Request { stream, .. } => {
                c.response_head(stream, 204, [], true, &mut Vec::new())
            }
            _ => {}
        }
        c.take_control(&mut Vec::new());
    }
    assert_eq!(c.failed(), None);
}

#[test]
fn a_smaller_table_is_acknowledged_at_the_start_of_the_next_block() {
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    c.receive(
        &Client::open()
            .frame(Kind::Settings, 0, 0, &[0, 1, 0, 0, 0, 0])
            .get(1, "/", flag::END_STREAM)
            .get(3, "/", flag::END_STREAM)
            .0,
    );
    let mut out = Vec::new();
    assert!(matches!(c.next(now), Event::Request { stream: 1, .. }));
    c.response_head(1, 200, [], true, &mut out);
    assert_eq!(
        &out[HEADER_LEN..],
        [0x20, 0x88],
        "a size update to 0, then :status 200"
    );
    out.clear();
    assert!(matches!(c.next(now), Event::Request { stream: 3, .. }));
    c.response_head(3, 200, [], true, &mut out);
    assert_eq!(&out[HEADER_LEN..], [0x88], "once");
}

/// Rules: docs/http.md T2.
#[test]
fn a_stream_that_depends_on_itself_is_reset_after_its_whole_block() {
    let mut block = Vec::new();
    for (n, v) in [(":method", "GET"), (":scheme", "https"), (":path", "/")] {
        hpack::encode_field(&mut block, n, v);
    }
    let mut first = vec![0, 0, 0, 1, 16];
    first.extend_from_slice(&block[..4]);
    let input = Client::open()
        .frame(Kind::Headers, flag::PRIORITY, 1, &first)
        .frame(Kind::Continuation, flag::END_HEADERS, 1, &block[4..])
        .get(3, "/ok", flag::END_STREAM)
        .0;
    let (events, out) = both(&input);
    assert_eq!(goaway(&out), None);
    assert_eq!(resets(&out), [(1, ErrorCode::ProtocolError)]);
    assert!(matches!(events[..], [Event::Request { stream: 3, .. }]));
}

/// A head goes as one HEADERS frame: its status, `server`, `date` and fields in
/// order, less the fields HTTP/2 forbids (RFC 9113 §8.2.2).
#[test]
fn a_head_goes_as_its_fields_without_the_connections_own() {
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    c.receive(&Client::open().get(1, "/", flag::END_STREAM).0);
    let mut h = crate::fields::Head::new(Status::NotFound, "Thu, 26 Nov 2026 18:00:00 GMT");
    h.field("Content-Type", "text/plain")
        .field("X-Custom", "a: b")
        .field("Transfer-Encoding", "chunked")
        .content_length(10);
    assert!(matches!(c.next(now), Event::Request { stream: 1, .. }));
    let mut out = Vec::new();
    let mut cache = hpack::HeadCache::new();
    c.head(1, &h, true, &mut out, &mut cache);
    let f = frames(&out);
    assert_eq!(
        (f[0].0, f[0].1),
        (Kind::Headers, flag::END_HEADERS | flag::END_STREAM)
    );
    let mut got = Vec::new();
    hpack::Decoder::new()
        .decode(&f[0].3, 1 << 16, &mut |n, v| {
            got.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .unwrap();
    let want = [
        (":status", "404"),
        ("server", "linerate"),
        ("date", "Thu, 26 Nov 2026 18:00:00 GMT"),
        ("content-type", "text/plain"),
        ("x-custom", "a: b"),
        ("content-length", "10"),
    ];
    let got: Vec<(&str, &str)> = got.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(got, want, "no Transfer-Encoding");
}

#[test]
fn a_head_longer_than_the_clients_frame_size_goes_in_continuations() {
    let now = Instant::now();
    let mut c = Connection::new(Limits::default(), Config::default());
    c.receive(&Client::open().get(1, "/", flag::END_STREAM).0);
    c.next(now);
    let big = "v".repeat(40_000);
    let mut out = Vec::new();
    c.response_head(1, 200, [("x-big", big.as_str())], true, &mut out);
    let f = frames(&out);
    let kinds: Vec<(Kind, u8)> = f.iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(
        kinds,
        [
            (Kind::Headers, flag::END_STREAM),
            (Kind::Continuation, 0),
            (Kind::Continuation, flag::END_HEADERS)
        ]
    );
    let block: Vec<u8> = f.iter().flat_map(|f| f.3.clone()).collect();
    let mut got = Vec::new();
    hpack::Decoder::new()
        .decode(&block, 1 << 20, &mut |n, v| got.push((n.to_vec(), v.len())))
        .ok()
        .unwrap();
    assert_eq!(got[1], (b"x-big".to_vec(), 40_000));
}

/// A connection error names its reason, typed, and the log's words come from it.
#[test]
fn connection_errors_name_their_reason() {
    let now = Instant::now();
    for (input, want) in [
        (
            Client::open().frame(Kind::Data, 0, 0, b"x").0,
            Violation::DataOnStream0,
        ),
        (
            Client::open().frame(Kind::Ping, 0, 1, &[0; 8]).0,
            Violation::PingOnStream,
        ),
        (
            Client::open()
                .frame(Kind::WindowUpdate, 0, 0, &0u32.to_be_bytes())
                .0,
            Violation::WindowUpdateOfZero,
        ),
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), Violation::NotThePreface),
    ] {
        let mut c = Connection::new(Limits::default(), Config::default());
        c.receive(&input);
        while !matches!(c.next(now), Event::Wait) {}
        assert_eq!(c.failed_why(), Some(want), "{want}");
        assert!(c.failed().is_some());
    }
    assert_eq!(Violation::RapidReset.to_string(), "rapid reset");
}

/// The frame deadline runs from a frame's first byte to its last, and none runs
/// between frames (a stream's body is bounded by its window and the owner's idle
/// deadline).
#[test]
fn the_head_deadline_runs_from_the_first_byte_of_a_frame() {
    use crate::timeout::{Due, Timeout, Timeouts};
    let t = Timeouts {
        head: std::time::Duration::from_secs(10),
        body: std::time::Duration::from_secs(30),
    };
    let t0 = Instant::now();
    let t1 = t0 + std::time::Duration::from_secs(1);
    let mut c = Connection::new(Limits::default(), Config::default());
    let bytes = Client::open().get(1, "/", flag::END_STREAM).0;
    let (whole, last) = bytes.split_at(bytes.len() - 1);
    assert_eq!(c.poll_timeout(&t), None);
    c.receive(&whole[..whole.len() - 3]);
    while c.next(t0) != Event::Wait {}
    assert_eq!(
        c.poll_timeout(&t),
        Some(Due::after(t0, t.head, Timeout::Head))
    );
    c.receive(&whole[whole.len() - 3..]);
    while c.next(t1) != Event::Wait {}
    assert_eq!(
        c.poll_timeout(&t),
        Some(Due::after(t0, t.head, Timeout::Head)),
        "a byte does not restart it"
    );
    c.receive(last);
    while !matches!(c.next(t1), Event::Wait) {}
    assert_eq!(c.poll_timeout(&t), None, "the frame is whole");
}
