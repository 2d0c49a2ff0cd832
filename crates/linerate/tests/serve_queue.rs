//! Seed 001 in the server's output queue: small file ranges collapsed into the gather,
//! and a queue too fragmented for one `sendmsg` defragmented into its last segment;
//! through the real server, with the counters of its status page.

mod util;
use util::{exchange, next_response, Server};

fn pattern(n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

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

/// Reads one response off `buf`: (head, body, rest).
fn response(buf: &[u8]) -> (String, &[u8], &[u8]) {
    next_response(buf, true)
}

/// Checks a multipart/byteranges body part by part against `file`.
fn check_multipart(head: &str, body: &[u8], file: &[u8]) {
    assert!(head.starts_with("HTTP/1.1 206"), "{head}");
    let boundary = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: multipart/byteranges; boundary="))
        .expect("multipart")
        .trim()
        .to_string();
    let mut rest = body;
    let mut got = Vec::new();
    loop {
        let open = format!("\r\n--{boundary}\r\n");
        let close = format!("\r\n--{boundary}--\r\n");
        if rest == close.as_bytes() {
            break;
        }
        assert!(rest.starts_with(open.as_bytes()), "a part starts");
        rest = &rest[open.len()..];
        let h = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let fields = String::from_utf8_lossy(&rest[..h]).into_owned();
        let cr = fields
            .lines()
            .find_map(|l| l.strip_prefix("Content-Range: bytes "))
            .expect("Content-Range");
        let (a, b) = cr.split_once('/').unwrap().0.split_once('-').unwrap();
        let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
        let data = &rest[h..h + (b - a + 1) as usize];
        assert!(data == &file[a as usize..=b as usize], "bytes {a}-{b}");
        got.push((a, b));
        rest = &rest[h + data.len()..];
    }
    assert_eq!(got, ranges());
}

fn status(addr: &str) -> serde_json::Value {
    let out = exchange(
        addr,
        b"GET /_status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let (_, body, _) = response(&out);
    serde_json::from_slice(body).unwrap()
}

fn queue(v: &serde_json::Value, key: &str) -> u64 {
    v["queue"][key].as_u64().unwrap()
}

fn site() -> (tempfile::TempDir, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let file = pattern(2 << 20);
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
        let srv = Server::start(
            dir.path(),
            &["--status-path", "/_status", "--collapse", collapse],
        );
        let out = exchange(&srv.addr, req.as_bytes());
        let (head, body, rest) = response(&out);
        check_multipart(&head, body, &file);
        assert!(rest.is_empty());
        let v = status(&srv.addr);
        // With 1000 bytes, the ranges up to 1000 bytes (the first seven) are collapsed,
        // and the gather stops at the first that is not.
        assert_eq!(queue(&v, "collapsed"), parts, "--collapse {collapse}: {v}");
        if parts == 16 {
            assert_eq!(queue(&v, "collapsed_bytes"), total, "{v}");
        }
        assert_eq!(queue(&v, "defrags"), 0, "{v}");
    }
}

/// Rules: docs/http.md F2.
#[test]
fn a_queue_too_fragmented_for_one_sendmsg_is_defragmented_and_arrives_whole() {
    // 40 pipelined requests of 16 ranges each: 32 are queued at once, 34 buffers each,
    // over the 1023 one sendmsg may take.
    let (dir, file) = site();
    let srv = Server::start(dir.path(), &["--status-path", "/_status"]);
    let one = format!(
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: {}\r\n\r\n",
        range_header()
    );
    let mut req = one.repeat(39);
    req.push_str(&one.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"));
    let out = exchange(&srv.addr, req.as_bytes());
    let mut rest = &out[..];
    for _ in 0..40 {
        let (head, body, r) = response(rest);
        check_multipart(&head, body, &file);
        rest = r;
    }
    assert!(rest.is_empty());
    let v = status(&srv.addr);
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
        let srv = Server::start(dir.path(), &args);
        let out = exchange(&srv.addr, req.as_bytes());
        let (head, body, rest) = response(&out);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body == &file[..], "first body intact");
        let (head, body, rest) = response(rest);
        assert!(head.starts_with("HTTP/1.1 206"), "{head}");
        assert!(body == &file[1000..1100], "range intact");
        let (head, body, rest) = response(rest);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body == &file[..], "last body intact");
        assert!(rest.is_empty());
        let v = status(&srv.addr);
        assert_eq!(queue(&v, "corked"), corks, "{flags:?}: {v}");
        assert_eq!(queue(&v, "uncorked"), corks, "{flags:?}: {v}");
    }
}
