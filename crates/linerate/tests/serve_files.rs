//! `linerate serve` answering for files: validators (`ETag` across a same-size rewrite in
//! the same second and across an inode change at the same size and mtime,
//! `Last-Modified`), `Content-Type`, `Date`, HEAD with the fields of GET, GETs, ranges
//! and HEADs through every part of the queue with offsets past 4 GiB, and zero-copy sends
//! switching to copying when the kernel copies anyway.
//!
//! Every test but the zero-copy one runs once per transmit strategy (one `#[test]` each:
//! `head_has_the_headers_of_get_and_no_body::splice`); tests of file parts run a second
//! time with `--collapse 0 --small-file 0`, so small files and ranges go by the strategy
//! too.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::thread;
use std::time::Duration;

use linerate_testkit::{
    assert_bytes_eq, docroot, expect_parts, expect_range, fetch, imf_date, multipart_parts,
    parse_all, pattern, per_strategy, put, raw, req, secs_of, set_rcvbuf, Conn, Linerate, Server,
    FILE_PARTS, MIB,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md F1.
    validators_content_types_and_dates,
    // Rules: docs/http.md F2, F4.
    head_has_the_headers_of_get_and_no_body,
    // Rules: docs/http.md F2, F4.
    gets_ranges_heads_and_offsets_past_4_gib,
    // Rules: docs/http.md F1, F3.
    the_etag_is_the_same_for_the_same_size_and_mtime_whatever_the_inode,
);

/// `linerate serve` with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    LINERATE.serve(root, transmit, extra)
}

/// The zero-copy strategy hands the kernel its buffers and reuses one only after the
/// kernel's completion; on loopback every completion says the kernel copied anyway, and
/// after a probe of 64 sends the strategy says so and copies from then on. Every
/// answer, before and after the switch, is whole and exact.
/// Rules: docs/http.md S3.
#[test]
fn zero_copy_answers_stay_exact_and_copied_completions_switch_to_copying() {
    let root = tempfile::tempdir().unwrap();
    let big = pattern(3 << 20, 31);
    fs::write(root.path().join("big.bin"), &big).unwrap();
    let s = serve(root.path(), "zerocopy", &["--error-log-level", "info"]);
    let mut c = Conn::open(s.addr);
    // How many sends a 3 MiB answer takes depends on the socket buffer the kernel
    // grants, so ask until the probe's 64 completions have come (bounded).
    const SAID: &str = "mostly copied by the kernel";
    for i in 0..200 {
        let r = c.get("/big.bin", "");
        assert_eq!(r.status, 200, "answer {i}");
        assert_bytes_eq(&r.body, &big, &format!("answer {i}"));
        if i >= 4 && s.stderr_text().contains(SAID) {
            break;
        }
    }
    let log = s.wait_stderr(SAID);
    assert!(
        log.contains("zero-copy sends were mostly copied by the kernel; copying from now on"),
        "no switch to copying was logged: {log}"
    );
    let r = c.get("/big.bin", "");
    assert_bytes_eq(&r.body, &big, "after the switch");
}

fn validators_content_types_and_dates(transmit: &str) {
    let root = docroot();
    put(root.path(), "page.html", b"<p>hi</p>\n");
    put(root.path(), "notes.txt", b"notes\n");
    put(root.path(), "blob", &[0, 1, 2, 3]);
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    let mut etags = Vec::new();
    for (target, ctype, body) in [
        (
            "/page.html",
            "text/html; charset=utf-8",
            &b"<p>hi</p>\n"[..],
        ),
        ("/notes.txt", "text/plain; charset=utf-8", &b"notes\n"[..]),
        ("/blob", "application/octet-stream", &[0u8, 1, 2, 3][..]),
    ] {
        let r = c.get(target, "");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, body, "{target}");
        assert_eq!(r.header("content-type"), Some(ctype), "{target}");
        assert_eq!(r.header("accept-ranges"), Some("bytes"), "{target}");
        let etag = r.must("etag");
        assert!(
            etag.len() > 2
                && etag.starts_with('"')
                && etag.ends_with('"')
                && !etag[1..etag.len() - 1].contains('"'),
            "{target}: a strong, quoted ETag: {etag}"
        );
        etags.push(etag.to_string());
        let mtime = fs::metadata(root.path().join(&target[1..]))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            r.header("last-modified"),
            Some(imf_date(secs_of(mtime)).as_str()),
            "{target}"
        );
    }
    etags.sort();
    etags.dedup();
    assert_eq!(etags.len(), 3, "three files, three ETags");

    // A same-size rewrite within the same second changes the ETag, not Last-Modified.
    let path = root.path().join("same.txt");
    let mut tries = 0;
    loop {
        tries += 1;
        assert!(tries <= 5, "could not rewrite within one second");
        fs::write(&path, b"first version\n").unwrap();
        let before = fs::metadata(&path).unwrap().modified().unwrap();
        let r1 = c.get("/same.txt", "");
        assert_eq!(r1.body, b"first version\n");
        // Past the coarse clock's tick, so the nanoseconds differ.
        thread::sleep(Duration::from_millis(20));
        fs::write(&path, b"other version\n").unwrap();
        let after = fs::metadata(&path).unwrap().modified().unwrap();
        let r2 = c.get("/same.txt", "");
        assert_eq!(r2.body, b"other version\n");
        if secs_of(before) != secs_of(after) {
            continue;
        }
        assert_ne!(before, after, "the filesystem kept the mtime");
        assert_ne!(r1.must("etag"), r2.must("etag"), "same-size rewrite");
        assert_eq!(r1.must("last-modified"), r2.must("last-modified"));
        break;
    }

    // Date on errors too (checked by the parser on every response).
    let r = fetch(server.addr, "/missing", "");
    assert_eq!(r.status, 404);
}

fn head_has_the_headers_of_get_and_no_body(transmit: &str) {
    let root = docroot();
    let page = [&b"<html>"[..], &pattern(3000, 7)[..]].concat();
    put(root.path(), "page.html", &page);
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;
    let mut c = server.conn();

    let g = c.get("/page.html", "");
    let h = c.head("/page.html", "");
    assert_eq!(g.status, 200);
    assert_eq!(h.headers_except_date(), g.headers_except_date());
    assert_eq!(h.content_length(), Some(page.len() as u64));
    let hr = c.head("/page.html", "Range: bytes=0-9\r\n");
    assert_eq!(hr.headers_except_date(), g.headers_except_date());

    // Errors too.
    let missing_get = fetch(addr, "/missing.html", "");
    let mut m = Conn::open(addr);
    let missing_head = m.head("/missing.html", "Connection: close\r\n");
    m.expect_eof();
    assert_eq!(missing_get.status, 404);
    assert_eq!(
        missing_head.headers_except_date(),
        missing_get.headers_except_date()
    );

    // Pipelined after a HEAD: the next response still parses.
    let pipeline = [
        req("HEAD", "/page.html", ""),
        req("GET", "/page.html", ""),
        req("HEAD", "/page.html", "Range: bytes=0-9\r\n"),
        req("GET", "/page.html", "Connection: close\r\n"),
    ]
    .concat();
    let rs = parse_all(&raw(addr, &pipeline, false), &[true, false, true, false]);
    assert_eq!(rs.len(), 4);
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "{i}: {r:?}");
        assert_eq!(r.content_length(), Some(page.len() as u64), "{i}");
        if i % 2 == 0 {
            assert!(r.body.is_empty());
        } else {
            assert_bytes_eq(&r.body, &page, "GET after HEAD");
        }
    }
}

fn gets_ranges_heads_and_offsets_past_4_gib(transmit: &str) {
    let root = docroot();
    let small = pattern(1000, 11);
    let mid = pattern(5 * MIB, 12);
    put(root.path(), "small.txt", &small);
    put(root.path(), "mid", &mid);
    put(root.path(), "empty.txt", b"");
    let sparse_len: u64 = 5 << 30;
    let marker_at: u64 = (4 << 30) + 100;
    let marker = b"past-4-GiB";
    let f = File::create(root.path().join("sparse")).unwrap();
    f.set_len(sparse_len).unwrap();
    f.write_all_at(marker, marker_at).unwrap();
    drop(f);

    for extra in FILE_PARTS {
        let s = &format!("{transmit} {extra:?}");
        let server = serve(root.path(), transmit, extra);
        let mut c = server.conn();

        let g = c.get("/small.txt", "");
        assert_eq!(g.status, 200, "{s}: {g:?}");
        assert_eq!(
            g.header("content-type"),
            Some("text/plain; charset=utf-8"),
            "{s}"
        );
        assert_bytes_eq(&g.body, &small, s);
        let h = c.head("/small.txt", "");
        assert_eq!(h.headers_except_date(), g.headers_except_date(), "{s}");

        let m = c.get("/mid", "");
        assert_eq!(m.status, 200, "{s}");
        assert_eq!(
            m.header("content-type"),
            Some("application/octet-stream"),
            "{s}"
        );
        assert_bytes_eq(&m.body, &mid, &format!("{s}: 5 MiB"));

        let e = c.get("/empty.txt", "");
        assert_eq!((e.status, e.content_length()), (200, Some(0)), "{s}");

        expect_range(&mut c, "/small.txt", "bytes=0-8", 0, 8, 1000, &small[..9]);
        expect_range(
            &mut c,
            "/small.txt",
            "bytes=-10",
            990,
            999,
            1000,
            &small[990..],
        );
        expect_range(
            &mut c,
            "/small.txt",
            "bytes=990-",
            990,
            999,
            1000,
            &small[990..],
        );
        expect_range(
            &mut c,
            "/mid",
            "bytes=1000000-3999999",
            1_000_000,
            3_999_999,
            mid.len() as u64,
            &mid[1_000_000..4_000_000],
        );
        let r = c.get("/small.txt", "Range: bytes=500-599,0-9\r\n");
        expect_parts(
            &r,
            "text/plain; charset=utf-8",
            &small,
            &[(500, 599), (0, 9)],
        );

        // Offsets past 4 GiB of a sparse 5 GiB file.
        let hs = c.head("/sparse", "");
        assert_eq!(hs.content_length(), Some(sparse_len), "{s}");
        let past = marker_at + marker.len() as u64 - 1;
        expect_range(
            &mut c,
            "/sparse",
            &format!("bytes={marker_at}-{past}"),
            marker_at,
            past,
            sparse_len,
            marker,
        );
        expect_range(
            &mut c,
            "/sparse",
            "bytes=-4",
            sparse_len - 4,
            sparse_len - 1,
            sparse_len,
            &[0; 4],
        );
        let r = c.get(
            "/sparse",
            &format!("Range: bytes={marker_at}-{past},0-1\r\n"),
        );
        assert_eq!(r.status, 206, "{s}: {r:?}");
        let parts = multipart_parts(&r);
        assert_eq!(parts.len(), 2, "{s}");
        assert_eq!(parts[0].0, format!("bytes {marker_at}-{past}/{sparse_len}"));
        assert_eq!(parts[0].2, marker, "{s}");
        assert_eq!(parts[1].0, format!("bytes 0-1/{sparse_len}"));
        assert_eq!(parts[1].2, [0, 0], "{s}");

        // Pipelined: a range, a HEAD, a GET, then the close.
        c.send(
            &[
                req("GET", "/small.txt", "Range: bytes=10-19\r\n"),
                req("HEAD", "/mid", ""),
                req("GET", "/small.txt", "Connection: close\r\n"),
            ]
            .concat(),
        );
        let r = c.response();
        assert_eq!((r.status, r.body.as_slice()), (206, &small[10..20]), "{s}");
        let r = c.response_to(true);
        assert_eq!(
            (r.status, r.content_length()),
            (200, Some(mid.len() as u64)),
            "{s}"
        );
        let r = c.response();
        assert_eq!(r.status, 200, "{s}");
        assert!(r.closes(), "{s}");
        assert_bytes_eq(&r.body, &small, s);
        c.expect_eof();
    }
}

/// A file deployed again (a new inode) with the same size and modification time keeps
/// its ETag: nothing of the machine is in it, so identical instances agree (issue 43;
/// it changed with the inode before). A changed time changes it.
fn the_etag_is_the_same_for_the_same_size_and_mtime_whatever_the_inode(transmit: &str) {
    use std::os::unix::fs::MetadataExt;
    let root = docroot();
    let path = root.path().join("i.txt");
    let body = b"the same bytes\n";
    fs::write(&path, body).unwrap();
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    let r1 = c.get("/i.txt", "");
    assert_eq!((r1.status, r1.body.as_slice()), (200, &body[..]));
    let before = fs::metadata(&path).unwrap();

    let tmp = root.path().join("i.txt.new");
    fs::write(&tmp, body).unwrap();
    File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    fs::rename(&tmp, &path).unwrap();
    let after = fs::metadata(&path).unwrap();
    assert_ne!(after.ino(), before.ino());
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec()),
        "same size and mtime to the nanosecond"
    );

    let r2 = c.get("/i.txt", "");
    assert_eq!((r2.status, r2.body.as_slice()), (200, &body[..]));
    assert_eq!(
        r1.must("etag"),
        r2.must("etag"),
        "a new inode, the same size and time: the same ETag"
    );
    assert_eq!(r1.must("last-modified"), r2.must("last-modified"));
    let r = c.get("/i.txt", &format!("If-None-Match: {}\r\n", r1.must("etag")));
    assert_eq!(r.status, 304, "{r:?}");
    // Another modification time (a nanosecond later): another tag.
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before.modified().unwrap() + std::time::Duration::from_nanos(1))
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let r = c.get("/i.txt", &format!("If-None-Match: {}\r\n", r1.must("etag")));
        if r.status == 200 {
            assert_ne!(r.must("etag"), r1.must("etag"));
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the old tag still matches"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// With splices on the io_uring ring (`LINERATE_RING_SPLICE=1`), every byte still
/// arrives: whole files on a keep-alive connection, a slow reader whose socket fills
/// (the ring's splice comes back `EAGAIN` and the connection waits for room), ranges,
/// and pipelined answers; and connections cut while a splice is on the kernel's worker
/// threads cost the server nothing (their descriptors are closed after the splice).
/// Rules: docs/http.md F2.
#[test]
fn splices_on_the_ring_deliver_every_byte_and_cut_connections_cost_nothing() {
    use std::io::{Read, Write};
    let root = tempfile::tempdir().unwrap();
    let big = pattern(3 << 20, 41);
    fs::write(root.path().join("big.bin"), &big).unwrap();
    let s = LINERATE.start_under(
        &["env", "LINERATE_RING_SPLICE=1"],
        root.path(),
        &["--transmit", "splice", "--driver", "uring"],
    );
    let mut c = Conn::open(s.addr);
    for i in 0..5 {
        let r = c.get("/big.bin", "");
        assert_eq!(r.status, 200, "answer {i}");
        assert_bytes_eq(&r.body, &big, &format!("answer {i}"));
    }
    // A slow reader: a small receive buffer, read in small steps.
    let mut slow = Conn::open(s.addr);
    set_rcvbuf(&slow.s, 16 * 1024);
    slow.send(&req("GET", "/big.bin", ""));
    thread::sleep(Duration::from_millis(200));
    let r = slow.response();
    assert_bytes_eq(&r.body, &big, "the slow reader's");
    let r = c.get("/big.bin", "Range: bytes=100-199,2000000-2999999\r\n");
    assert_eq!(r.status, 206, "{r:?}");
    expect_parts(
        &r,
        "application/octet-stream",
        &big,
        &[(100, 199), (2_000_000, 2_999_999)],
    );
    // Pipelined.
    let rs = parse_all(
        &raw(
            s.addr,
            b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            false,
        ),
        &[],
    );
    assert_eq!(rs.len(), 2);
    for r in &rs {
        assert_bytes_eq(&r.body, &big, "pipelined");
    }
    // Cut while the body is on its way.
    for _ in 0..20 {
        let mut t = std::net::TcpStream::connect(s.addr).unwrap();
        t.write_all(&req("GET", "/big.bin", "")).unwrap();
        let mut some = [0u8; 4096];
        let _ = t.read(&mut some);
        drop(t);
    }
    let r = c.get("/big.bin", "");
    assert_bytes_eq(&r.body, &big, "after the cut connections");
}
