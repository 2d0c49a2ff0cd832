//! `linerate serve` answering `Range`: single ranges (suffix, clamped), unsatisfiable
//! (416), invalid (ignored: 200), several (`multipart/byteranges` in request order with an
//! exact length), HEAD (ignored), and many, overlapping or oversized ranges (coalesced or
//! 200, never in proportion to ranges times file).
//!
//! The test runs once per transmit strategy (one `#[test]` each: `byte_ranges::splice`),
//! with the defaults and again with `--collapse 0 --small-file 0`, so small files and
//! ranges go by the strategy too.

use std::path::Path;

use linerate_testkit::{
    assert_bytes_eq, content_range, docroot, expect_parts, expect_range, fetch, multipart_parts,
    pattern, per_strategy, put, Linerate, Response, Server, FILE_PARTS,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md P2, P5, F2.
    byte_ranges,
);

/// `linerate serve` with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    LINERATE.serve(root, transmit, extra)
}

/// Any correct answer to a satisfiable Range on `content`: 200 with everything, or 206
/// whose parts each hold what their Content-Range names.
fn check_any_range_answer(r: &Response, content: &[u8]) {
    let len = content.len() as u64;
    let slice = |range: &str| {
        let (a, b, total) = content_range(range);
        assert_eq!(total, len, "{range}");
        &content[a as usize..=b as usize]
    };
    match r.status {
        200 => assert_bytes_eq(&r.body, content, "200 to a Range"),
        206 if r.must("content-type").starts_with("multipart/byteranges") => {
            let parts = multipart_parts(r);
            assert!(
                !parts.is_empty() && parts.len() <= 16,
                "{} parts",
                parts.len()
            );
            for (range, _, data) in &parts {
                assert_bytes_eq(data, slice(range), range);
            }
        }
        206 => assert_bytes_eq(&r.body, slice(r.must("content-range")), "single part"),
        s => panic!("status {s} for a satisfiable Range: {r:?}"),
    }
}

/// [`byte_ranges_with`] with the defaults, then with every part by the strategy.
fn byte_ranges(transmit: &str) {
    for extra in FILE_PARTS {
        byte_ranges_with(transmit, extra);
    }
}

fn byte_ranges_with(transmit: &str, extra: &[&str]) {
    let root = docroot();
    let content = pattern(1000, 5);
    put(root.path(), "r.txt", &content);
    let server = serve(root.path(), transmit, extra);
    let addr = server.addr;
    let mut c = server.conn();

    for (spec, a, b) in [
        ("bytes=0-8", 0, 8),
        ("bytes=-10", 990, 999),
        ("bytes=990-", 990, 999),
        ("bytes=990-5000", 990, 999),
        ("bytes=0-0", 0, 0),
        ("bytes=999-999", 999, 999),
        ("bytes=-5000", 0, 999),
        ("bytes=5-5, 2000-3000", 5, 5),
    ] {
        expect_range(
            &mut c,
            "/r.txt",
            spec,
            a,
            b,
            1000,
            &content[a as usize..=b as usize],
        );
    }

    for spec in ["bytes=1000-", "bytes=2000-3000,5000-", "bytes=-0"] {
        let r = fetch(addr, "/r.txt", &format!("Range: {spec}\r\n"));
        assert_eq!(r.status, 416, "{spec}: {r:?}");
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{spec}");
    }

    for spec in ["bytes=7-1", "bytes=abc", "items=0-1", "bytes="] {
        let r = c.get("/r.txt", &format!("Range: {spec}\r\n"));
        assert_eq!(r.status, 200, "{spec}: {r:?}");
        assert!(r.header("content-range").is_none(), "{spec}");
        assert_bytes_eq(&r.body, &content, spec);
    }

    // Several ranges: multipart, request order, exact length (the next response on the
    // connection parses only if it is).
    let r = c.get("/r.txt", "Range: bytes=500-599,0-9\r\n");
    expect_parts(
        &r,
        "text/plain; charset=utf-8",
        &content,
        &[(500, 599), (0, 9)],
    );
    let r = c.get("/r.txt", "Range: bytes=0-0,998-999,100-199\r\n");
    expect_parts(
        &r,
        "text/plain; charset=utf-8",
        &content,
        &[(0, 0), (998, 999), (100, 199)],
    );
    expect_range(&mut c, "/r.txt", "bytes=0-8", 0, 8, 1000, &content[..9]);

    // Range only applies to GET.
    let h = c.head("/r.txt", "Range: bytes=0-8\r\n");
    assert_eq!(h.status, 200, "{h:?}");
    assert_eq!(h.content_length(), Some(1000));
    assert!(h.header("content-range").is_none());

    // Many, overlapping or oversized ranges: coalesced or 200, never O(ranges x file).
    let singles: Vec<String> = (0..1000).map(|i| format!("{i}-{i}")).collect();
    let spread: Vec<String> = (0..40).map(|i| format!("{0}-{0}", i * 20)).collect();
    let seventeen: Vec<String> = (0..17).map(|i| format!("{0}-{0}", i * 50)).collect();
    let whole = vec!["0-".to_string(); 16];
    for spec in [
        singles.join(","),
        spread.join(","),
        seventeen.join(","),
        whole.join(","),
        "0-9,5-19,100-109".to_string(),
        "0-499,250-999".to_string(),
    ] {
        let r = fetch(addr, "/r.txt", &format!("Range: bytes={spec}\r\n"));
        check_any_range_answer(&r, &content);
        assert!(
            r.body.len() <= 4 * content.len(),
            "{} body bytes for a 1000-byte file and Range {spec:.60}",
            r.body.len()
        );
    }
}
