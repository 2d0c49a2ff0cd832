//! `linerate serve` reading requests, over real sockets with raw bytes in and exact
//! bytes out, whole and one byte per write: parsing and framing (bare LF, obs-fold, bad
//! names and values, bad request lines), methods, `Host`, absolute-form targets,
//! `Content-Length` / `Transfer-Encoding` and chunk framing, bodies that must not be
//! taken for requests, and the request-line and header-block limits (414, 431), by
//! default and set by their flags.
//!
//! Every test runs once per transmit strategy (`--transmit copy|sendfile|splice|zerocopy`,
//! one `#[test]` each: `methods_hosts_targets_and_request_bodies::splice`); every response
//! read is checked for what all responses carry (linerate-testkit's `check_common`).

use std::path::Path;

use linerate_testkit::{
    answers, docroot, expect_answers, expect_error_body, expect_refused, fetch, parse_all,
    per_strategy, put, raw, raw_bytewise, req, Conn, Linerate, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md P1, R1, R2, R3, R4, R6.
    malformed_requests_are_refused_then_closed_also_one_byte_per_write,
    // Rules: docs/http.md R2, R3, R5, R6.
    methods_hosts_targets_and_request_bodies,
    // Rules: docs/http.md P6.
    request_line_and_header_block_limits,
    // Rules: docs/http.md R4, R6.
    transfer_codings_and_chunk_framing_through_the_binary,
    // Rules: docs/http.md R2, R3, R6, C2.
    methods_versions_and_targets_one_byte_per_write,
    // Rules: docs/http.md P6, R6.
    request_line_and_header_limits_follow_their_flags,
);

/// `linerate serve` with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    LINERATE.serve(root, transmit, extra)
}

/// Requests refused with their status, then closed.
const BAD_REQUESTS: &[(&str, u16)] = &[
    ("GET /f.txt HTTP/1.1\nHost: t\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\n\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n b\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nBad@Name: x\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nX: a\0b\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n", 400),
    ("G ET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.0 x\r\n\r\n", 400),
    ("GET /f.txt HTTP/10.0\r\n\r\n", 400),
    ("get /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", 501),
    ("BREW /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", 501),
    ("GET /f.txt HTTP/1.1\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t u\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t/u\r\n\r\n", 400),
    // Regression (issue 28): an empty label was served by the default site.
    ("GET /f.txt HTTP/1.1\r\nHost: ..\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: .\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: a..b\r\n\r\n", 400),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        400,
    ),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhello", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0x10\r\n\r\n", 400),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 12345678901234567890\r\n\r\n",
        400,
    ),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
    ),
];

fn malformed_requests_are_refused_then_closed_also_one_byte_per_write(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    for &(request, status) in BAD_REQUESTS {
        let whole = expect_refused(server.addr, request.as_bytes(), status);
        let bytewise = parse_all(&raw_bytewise(server.addr, request.as_bytes()), &[]);
        assert_eq!(
            answers(&bytewise),
            answers(std::slice::from_ref(&whole)),
            "{request:?} one byte per write"
        );
    }
    let r = fetch(server.addr, "/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
}

fn methods_hosts_targets_and_request_bodies(transmit: &str) {
    let root = docroot();
    for (name, body) in [
        ("a.txt", "A\n"),
        ("b.txt", "B smuggled\n"),
        ("c.txt", "C\n"),
        ("f.txt", "F\n"),
    ] {
        put(root.path(), name, body.as_bytes());
    }
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;

    // Known methods other than GET and HEAD on a file: 405 with Allow (checked for every
    // 405 by the parser).
    for (m, target) in [
        ("POST", "/f.txt"),
        ("PUT", "/f.txt"),
        ("DELETE", "/f.txt"),
        ("TRACE", "/f.txt"),
        ("CONNECT", "/f.txt"),
        ("CONNECT", "t:443"),
    ] {
        let mut c = Conn::open(addr);
        c.send(&req(m, target, ""));
        let r = c.response();
        assert_eq!(r.status, 405, "{m} {target}: {r:?}");
    }

    // HTTP/1.0 without Host is served (and closed: no keep-alive asked for).
    let rs = parse_all(&raw(addr, b"GET /f.txt HTTP/1.0\r\n\r\n", false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);

    // Absolute-form target: served from its path whatever the authority.
    let rs = parse_all(
        &raw(
            addr,
            b"GET http://other.example:8080/f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            false,
        ),
        &[],
    );
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);

    // Bodies on GET are read and discarded; a body that looks like a request is never
    // answered as one.
    let smuggled = "GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    let last = "GET /c.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let framed = [
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{smuggled}{last}",
            smuggled.len()
        ),
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n{last}",
            smuggled.len()
        ),
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4;name=value\r\n{}\r\n{:x}\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n{last}",
            &smuggled[..4],
            smuggled.len() - 4,
            &smuggled[4..]
        ),
    ];
    let want = vec![(200, false, b"A\n".to_vec()), (200, true, b"C\n".to_vec())];
    for request in &framed {
        let whole = parse_all(&raw(addr, request.as_bytes(), false), &[]);
        assert_eq!(answers(&whole), want, "{request:?}");
        let bytewise = parse_all(&raw_bytewise(addr, request.as_bytes()), &[]);
        assert_eq!(answers(&bytewise), want, "{request:?} one byte per write");
    }
    // The same for a plain GET, one byte per write.
    let plain = b"GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let rs = parse_all(&raw_bytewise(addr, plain), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
}

fn request_line_and_header_block_limits(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;

    // A request line of exactly `len` bytes (CRLF not counted).
    let line = |len: usize| {
        let q = "q".repeat(len - "GET /f.txt? HTTP/1.1".len());
        format!("GET /f.txt?{q} HTTP/1.1")
    };
    let at_limit = format!("{}\r\nHost: t\r\nConnection: close\r\n\r\n", line(8192));
    let rs = parse_all(&raw(addr, at_limit.as_bytes(), false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
    let over = format!("{}\r\nHost: t\r\n\r\n", line(8193));
    expect_refused(addr, over.as_bytes(), 414);
    // Also before the line ends.
    let mut c = Conn::open(addr);
    c.send(format!("GET /{}", "a".repeat(9000)).as_bytes());
    let r = c.response();
    assert_eq!(r.status, 414, "{r:?}");
    assert!(r.closes());
    c.expect_eof();

    // Header block: 16 KiB.
    let with_fields = |fields: &str| {
        format!("GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{fields}\r\n")
    };
    let big = |n: usize| format!("X-Big: {}\r\n", "b".repeat(n));
    let rs = parse_all(&raw(addr, with_fields(&big(15_000)).as_bytes(), false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
    expect_refused(addr, with_fields(&big(17_000)).as_bytes(), 431);
    let mut c = Conn::open(addr);
    c.send(
        format!(
            "GET /f.txt HTTP/1.1\r\nHost: t\r\nX-Big: {}",
            "b".repeat(20_000)
        )
        .as_bytes(),
    );
    let r = c.response();
    assert_eq!(r.status, 431, "a header block that never ends: {r:?}");
    assert!(r.closes());
    c.expect_eof();

    // 100 fields (Host and Connection included) pass, 101 do not.
    let fields = |n: usize| -> String { (0..n).map(|i| format!("X-{i}: v\r\n")).collect() };
    let rs = parse_all(&raw(addr, with_fields(&fields(98)).as_bytes(), false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
    expect_refused(addr, with_fields(&fields(99)).as_bytes(), 431);
}

fn transfer_codings_and_chunk_framing_through_the_binary(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;
    const BAD: &[u8] = b"400 Bad Request\n";
    const UNSUPPORTED: &[u8] = b"501 Not Implemented\n";
    let h = "GET /f.txt HTTP/1.1\r\nHost: t\r\n";
    // A well-formed coding the server does not support: 501; a malformed field: 400.
    for (te, status, body) in [
        ("bogus", 501, UNSUPPORTED),
        ("bogus, chunked", 501, UNSUPPORTED),
        ("chunked, bogus", 501, UNSUPPORTED),
        ("gzip", 501, UNSUPPORTED),
        (",", 400, BAD),
        ("chunked, chunked", 400, BAD),
        ("chu nked", 400, BAD),
        ("chunked;q=1", 400, BAD),
    ] {
        let request = format!("{h}Transfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
        expect_answers(addr, &request, &[(status, true, body)]);
        let r = expect_refused(addr, request.as_bytes(), status);
        assert_eq!(r.content_length(), Some(body.len() as u64));
    }
    // Any Transfer-Encoding in HTTP/1.0.
    expect_answers(
        addr,
        "GET /f.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &[(400, true, BAD)],
    );
    // Bad chunk framing in a GET's body: the GET, whose head was whole, is answered; the
    // body then gets a 400 and the close.
    for body in [
        "zz\r\n",
        "\r\n",
        "5\r\nhelloXX\r\n0\r\n\r\n",
        "5\nhello\r\n0\r\n\r\n",
        "0\r\nX-Trailer: 1\n\r\n",
        "11111111111111111\r\n",
    ] {
        let request = format!("{h}Transfer-Encoding: chunked\r\n\r\n{body}");
        expect_answers(addr, &request, &[(200, false, b"F\n"), (400, true, BAD)]);
    }
    let r = fetch(addr, "/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
}

fn methods_versions_and_targets_one_byte_per_write(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;
    let not_allowed: &[u8] = b"405 Method Not Allowed\n";
    for request in [
        "POST /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "POST /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        "DELETE /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    ] {
        expect_answers(addr, request, &[(405, true, not_allowed)]);
    }
    // A POST with a body, then a GET on the same connection.
    expect_answers(
        addr,
        "POST /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        &[(405, false, not_allowed), (200, true, b"F\n")],
    );
    // HTTP/1.0 without Host: served, then closed.
    expect_answers(addr, "GET /f.txt HTTP/1.0\r\n\r\n", &[(200, true, b"F\n")]);
    expect_answers(
        addr,
        "GET /f.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /f.txt HTTP/1.0\r\n\r\n",
        &[(200, false, b"F\n"), (200, true, b"F\n")],
    );
    // Absolute-form: the path is served whatever the authority and Host say.
    for request in [
        "GET http://other.example:8080/f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET http://t/f.txt HTTP/1.0\r\n\r\n",
        "GET http://t/%66.txt?q=1 HTTP/1.1\r\nHost: elsewhere\r\nConnection: close\r\n\r\n",
    ] {
        expect_answers(addr, request, &[(200, true, b"F\n")]);
    }
}

fn request_line_and_header_limits_follow_their_flags(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let line = |len: usize| {
        let q = "q".repeat(len - "GET /f.txt? HTTP/1.1".len());
        format!("GET /f.txt?{q} HTTP/1.1")
    };
    // Header lines (CRLFs included, the empty line not) of exactly `len` bytes.
    let fields = |len: usize| {
        let fixed = "Host: t\r\nConnection: close\r\nX-Pad: \r\n".len();
        format!(
            "Host: t\r\nConnection: close\r\nX-Pad: {}\r\n",
            "p".repeat(len - fixed)
        )
    };
    let ok = [(200, true, &b"F\n"[..])];
    for (max_line, max_header) in [(100usize, 1000usize), (20_000, 30_000)] {
        let server = serve(
            root.path(),
            transmit,
            &[
                "--max-request-line",
                &max_line.to_string(),
                "--max-header-bytes",
                &max_header.to_string(),
            ],
        );
        let addr = server.addr;
        // One byte per write too, for the small limits only (time).
        let check = |request: String, want: &[(u16, bool, &[u8])]| {
            if max_line < 1000 {
                expect_answers(addr, &request, want);
            } else {
                let rs = parse_all(&raw(addr, request.as_bytes(), false), &[]);
                let want: Vec<(u16, bool, Vec<u8>)> =
                    want.iter().map(|&(s, c, b)| (s, c, b.to_vec())).collect();
                assert_eq!(answers(&rs), want, "{:.80}", request);
            }
        };
        check(format!("{}\r\n{}\r\n", line(max_line), fields(100)), &ok);
        check(
            format!("{}\r\n{}\r\n", line(max_line + 1), fields(100)),
            &[(414, true, b"414 URI Too Long\n")],
        );
        let over = format!("{}\r\n{}\r\n", line(max_line + 1), fields(100));
        expect_error_body(
            &expect_refused(addr, over.as_bytes(), 414),
            414,
            "URI Too Long",
        );

        let head = "GET /f.txt HTTP/1.1\r\n";
        check(format!("{head}{}\r\n", fields(max_header)), &ok);
        check(
            format!("{head}{}\r\n", fields(max_header + 1)),
            &[(431, true, b"431 Request Header Fields Too Large\n")],
        );
        let over = format!("{head}{}\r\n", fields(max_header + 1));
        let r = expect_refused(addr, over.as_bytes(), 431);
        expect_error_body(&r, 431, "Request Header Fields Too Large");
    }
}
