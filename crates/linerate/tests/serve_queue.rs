//! Seed 001 in the server's output queue: small file ranges collapsed into the gather,
//! and a queue too fragmented for one `sendmsg` defragmented into its last segment;
//! through the real server, with the counters of its status page.

use std::net::SocketAddr;

use linerate_testkit::{
    content_range, fetch, multipart_parts, parse_all, pattern, raw, Linerate, Response,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// Sixteen ranges (the most one request may ask), 10 to 2410 bytes each.
fn ranges() -> Vec<(u64, u64)> {
    (0..16u64)
        .map(|i| (i * 100_000 + i, i * 100_000 + i + 10 + i * 160))
        .collect()
}

fn range_header() -> String {
    let r: Vec<String> = ranges().iter().map(|(a, b)| format!("{a}-{b}")).collect();
    format!("bytes={}", r.join(","))
}

/// Checks a multipart/byteranges answer part by part against `file`: the ranges asked
/// for, in order, and the framing exact (`\r\n--BOUNDARY\r\n` opens the first part,
/// `\r\n--BOUNDARY--\r\n` ends the body).
fn check_multipart(r: &Response, file: &[u8]) {
    assert_eq!(r.status, 206, "{r:?}");
    let boundary = r
        .must("content-type")
        .strip_prefix("multipart/byteranges; boundary=")
        .expect("multipart");
    let (open, close) = (
        format!("\r\n--{boundary}\r\n"),
        format!("\r\n--{boundary}--\r\n"),
    );
    assert!(r.body.starts_with(open.as_bytes()), "a part starts");
    assert!(
        r.body.ends_with(close.as_bytes()),
        "the close delimiter ends"
    );
    let mut got = Vec::new();
    for (range, _, data) in multipart_parts(r) {
        let (a, b, _) = content_range(&range);
        assert!(data == file[a as usize..=b as usize], "bytes {a}-{b}");
        got.push((a, b));
    }
    assert_eq!(got, ranges());
}

fn status(addr: SocketAddr) -> serde_json::Value {
    serde_json::from_slice(&fetch(addr, "/_status", "").body).unwrap()
}

fn queue(v: &serde_json::Value, key: &str) -> u64 {
    v["queue"][key].as_u64().unwrap()
}

fn site() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern(2 << 20, 1);
    std::fs::write(dir.path().join("big.bin"), &file).unwrap();
    (dir, file)
}

/// Rules: docs/http.md F2.
#[test]
fn small_ranges_of_a_large_file_are_collapsed_into_the_gather() {
    let (dir, file) = site();
    let req = format!(
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: {}\r\nConnection: close\r\n\r\n",
        range_header()
    );
    let total: u64 = ranges().iter().map(|(a, b)| b - a + 1).sum();
    for (collapse, parts) in [("16K", 16), ("0", 0), ("1000", 7)] {
        let srv = LINERATE.start(
            dir.path(),
            &["--status-path", "/_status", "--collapse", collapse],
        );
        let rs = parse_all(&raw(srv.addr, req.as_bytes(), false), &[]);
        assert_eq!(rs.len(), 1, "{rs:?}");
        check_multipart(&rs[0], &file);
        let v = status(srv.addr);
        // With 1000 bytes, the ranges up to 1000 bytes (the first seven) are collapsed,
        // and the gather stops at the first that is not.
        assert_eq!(queue(&v, "collapsed"), parts, "--collapse {collapse}: {v}");
        if parts == 16 {
            assert_eq!(queue(&v, "collapsed_bytes"), total, "{v}");
        }
        assert_eq!(queue(&v, "defrags"), 0, "{v}");
    }
}

/// On tmpfs a page-cache-only read (`RWF_NOWAIT`) is refused with `EOPNOTSUPP`: the
/// collapse reads the range as it is instead of giving up.
/// Rules: docs/http.md F2.
#[test]
fn ranges_are_collapsed_on_a_file_system_that_cannot_read_without_waiting() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs at /dev/shm");
    let file = pattern(2 << 20, 1);
    std::fs::write(dir.path().join("big.bin"), &file).unwrap();
    let srv = LINERATE.start(dir.path(), &["--status-path", "/_status"]);
    let req = format!(
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: {}\r\nConnection: close\r\n\r\n",
        range_header()
    );
    let rs = parse_all(&raw(srv.addr, req.as_bytes(), false), &[]);
    assert_eq!(rs.len(), 1, "{rs:?}");
    check_multipart(&rs[0], &file);
    let v = status(srv.addr);
    assert_eq!(queue(&v, "collapsed"), 16, "{v}");
}

/// Rules: docs/http.md F2.
#[test]
fn a_queue_too_fragmented_for_one_sendmsg_is_defragmented_and_arrives_whole() {
    // 40 pipelined requests of 16 ranges each: 32 are queued at once, 34 buffers each,
    // over the 1023 one sendmsg may take.
    let (dir, file) = site();
    let srv = LINERATE.start(dir.path(), &["--status-path", "/_status"]);
    let one = format!(
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: {}\r\n\r\n",
        range_header()
    );
    let mut req = one.repeat(39);
    req.push_str(&one.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"));
    let rs = parse_all(&raw(srv.addr, req.as_bytes(), false), &[]);
    assert_eq!(rs.len(), 40);
    for r in &rs {
        check_multipart(r, &file);
    }
    let v = status(srv.addr);
    assert!(queue(&v, "defrags") >= 1, "{v}");
    assert_eq!(queue(&v, "collapsed"), 40 * 16, "{v}");
}

/// Rules: docs/http.md C1.
#[test]
fn bodies_from_cork_min_go_corked_and_the_cork_is_cleared_after_each() {
    // Two whole 2 MiB bodies (corked with --cork-min 1M), a 100-byte range of the same
    // file between them (not corked), pipelined on one connection.
    let (dir, file) = site();
    let req = "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n\
               GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes=1000-1099\r\n\r\n\
               GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let conf = dir.path().join("cork.toml");
    std::fs::write(&conf, "cork-min = \"1M\"\n").unwrap();
    let from_file = ["--config", conf.to_str().unwrap()];
    for (flags, corks) in [
        (&["--cork-min", "1M"][..], 2),
        (&from_file[..], 2),
        (&["--cork-min", "0"][..], 0),
        (&[][..], 0),
    ] {
        let mut args = vec!["--status-path", "/_status", "--collapse", "0"];
        args.extend_from_slice(flags);
        let srv = LINERATE.start(dir.path(), &args);
        let rs = parse_all(&raw(srv.addr, req.as_bytes(), false), &[]);
        assert_eq!(rs.len(), 3, "{rs:?}");
        assert_eq!(rs[0].status, 200, "{:?}", rs[0]);
        assert!(rs[0].body == file, "first body intact");
        assert_eq!(rs[1].status, 206, "{:?}", rs[1]);
        assert!(rs[1].body == file[1000..1100], "range intact");
        assert_eq!(rs[2].status, 200, "{:?}", rs[2]);
        assert!(rs[2].body == file, "last body intact");
        let v = status(srv.addr);
        assert_eq!(queue(&v, "corked"), corks, "{flags:?}: {v}");
        assert_eq!(queue(&v, "uncorked"), corks, "{flags:?}: {v}");
    }
}
