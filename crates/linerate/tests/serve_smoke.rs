//! `linerate serve` started as a user would, with curl-like raw requests: the basics
//! every transmit strategy must get right, and the start-up errors. The full
//! docs/http.md suite is in the other serve_*.rs files.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Output};
use std::time::Duration;

use linerate_testkit::{
    exchange, expect_refused, family_rss_kib, fetch, multipart_parts, parse_all, pattern, raw,
    Conn, Linerate, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// Rules: docs/http.md C1, F2.
#[test]
fn sliced_sends_take_turns_and_lose_nothing() {
    // With --send-slice 4K each connection yields after every 4 KiB of a file, so
    // several downloads interleave through the worker's run list; pipelined requests
    // and ranges behind a sliced body still arrive whole and in order.
    let dir = tempfile::tempdir().unwrap();
    let big = pattern(1_000_000, 13);
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    for t in ["sendfile", "splice", "copy"] {
        let s = LINERATE.start(
            dir.path(),
            &[
                "--send-slice",
                "4K",
                "--send-slice-min",
                "0",
                "--transmit",
                t,
            ],
        );
        let clients: Vec<_> = (0..4)
            .map(|_| {
                let addr = s.addr;
                std::thread::spawn(move || {
                    raw(addr, b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=5-9,-3\r\nConnection: close\r\n\r\n", false)
                })
            })
            .collect();
        for c in clients {
            let out = c.join().unwrap();
            let rs = parse_all(&out, &[]);
            assert_eq!(rs.len(), 2, "{t}: {rs:?}");
            assert_eq!(rs[0].content_length(), Some(1_000_000), "{t}: {:?}", rs[0]);
            assert!(rs[0].body == big, "{t}: first body differs");
            assert_eq!(rs[1].status, 206, "{t}: {:?}", rs[1]);
            let ranges: Vec<String> = multipart_parts(&rs[1])
                .into_iter()
                .map(|(range, _, _)| range)
                .collect();
            assert!(
                ranges.iter().any(|r| r == "bytes 5-9/1000000"),
                "{t}: {ranges:?}"
            );
            assert!(
                ranges.iter().any(|r| r == "bytes 999997-999999/1000000"),
                "{t}: {ranges:?}"
            );
        }
    }
}

/// Rules: docs/http.md F2, F4.
#[test]
fn every_transmit_strategy_serves_small_large_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let big = pattern(3_000_000, 7);
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::write(dir.path().join("a.txt"), b"hello\n").unwrap();
    for t in ["copy", "sendfile", "splice", "zerocopy", "sendfile-4k"] {
        let s = LINERATE.start(dir.path(), &["--transmit", t]);
        let r = fetch(s.addr, "/big.bin", "");
        assert_eq!((r.status, r.reason.as_str()), (200, "OK"), "{t}: {r:?}");
        assert_eq!(r.content_length(), Some(3_000_000), "{t}: {r:?}");
        assert!(r.body == big, "{t}: body differs ({} bytes)", r.body.len());
        let r = fetch(s.addr, "/big.bin", "Range: bytes=1000-1999\r\n");
        assert_eq!(
            (r.status, r.reason.as_str()),
            (206, "Partial Content"),
            "{t}: {r:?}"
        );
        assert_eq!(
            r.header("content-range"),
            Some("bytes 1000-1999/3000000"),
            "{t}: {r:?}"
        );
        assert_eq!(r.body, &big[1000..2000], "{t}");
        // Small file, pipelined twice, the second closing.
        let out = raw(s.addr, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
        let rs = parse_all(&out, &[false, true, false]);
        let got: Vec<(u16, &str, &[u8])> = rs
            .iter()
            .map(|r| (r.status, r.reason.as_str(), r.body.as_slice()))
            .collect();
        assert_eq!(
            got,
            [
                (200, "OK", &b"hello\n"[..]),
                (200, "OK", &b""[..]),
                (200, "OK", &b"hello\n"[..])
            ],
            "{t}: HEAD has no body"
        );
    }
}

/// Rules: docs/http.md P1, R2, F4, F5.
#[test]
fn errors_and_redirects() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/index.html"), b"<p>i</p>").unwrap();
    let s = LINERATE.start(dir.path(), &[]);
    let r = fetch(s.addr, "/missing", "");
    assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"), "{r:?}");
    let r = fetch(s.addr, "/d?x=1", "");
    assert_eq!(
        (r.status, r.header("location")),
        (301, Some("/d/?x=1")),
        "{r:?}"
    );
    let r = fetch(s.addr, "/d/", "");
    assert_eq!(
        r.header("content-type"),
        Some("text/html; charset=utf-8"),
        "{r:?}"
    );
    assert_eq!(r.body, b"<p>i</p>");
    let r = exchange(
        s.addr,
        b"POST /d/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(
        (r.status, r.header("allow")),
        (405, Some("GET, HEAD")),
        "{r:?}"
    );
    // 400 with Connection: close.
    let r = expect_refused(s.addr, b"GET / HTTP/1.1\nHost: x\r\n\r\n", 400);
    assert_eq!(r.body, b"400 Bad Request\n");
    // One response, its head only: a HEAD error with a body would not parse as one.
    let r = exchange(
        s.addr,
        b"HEAD /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        true,
    );
    assert_eq!((r.status, r.content_length()), (404, Some(14)), "{r:?}");
}

#[test]
fn bad_configuration_fails_before_serving() {
    let out = LINERATE.output(&["serve", "/nonexistent/root", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/root"));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = LINERATE.output(&["serve", dir.path().to_str().unwrap(), "--listen", &addr]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&addr));
    // Another linerate on the port: SO_REUSEPORT must not let a second server share it.
    let first = LINERATE.start(dir.path(), &[]);
    let out = LINERATE.output(&[
        "serve",
        dir.path().to_str().unwrap(),
        "--listen",
        &first.addr.to_string(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Address already in use"));
    let out = LINERATE.output(&["serve", "--workers", "0"]);
    assert_eq!(out.status.code(), Some(64));
    for flag in ["--max-request-line", "--max-header-bytes"] {
        let out = LINERATE.output(&["serve", flag, "2M"]);
        assert_eq!(out.status.code(), Some(64), "{flag}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(flag));
    }
}

/// Rules: docs/http.md P6, F5.
#[test]
fn config_file_settings_apply_flags_win_and_bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/x.txt"), b"x").unwrap();
    let log = dir.path().join("access.log");
    let conf = dir.path().join("linerate.toml");
    std::fs::write(
        &conf,
        format!(
            "root = {:?}\nautoindex = true\naccess-log = {:?}\nlog-format = \"json\"\nmax-header-fields = 5\nlisten = [\"127.0.0.1:1\"]\n",
            root.to_str().unwrap(),
            log.to_str().unwrap()
        ),
    )
    .unwrap();
    // The file's listen address (port 1, privileged and unused) is overridden by the flag.
    let s = LINERATE.serve_config(None, &conf, &["--workers", "1"]);
    // autoindex from the file: a listing of /sub/.
    let r = fetch(s.addr, "/sub/", "");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(String::from_utf8_lossy(&r.body).contains("x.txt"));
    // max-header-fields = 5 from the file.
    let many: String = (0..6).map(|i| format!("X-{i}: v\r\n")).collect();
    let r = exchange(
        s.addr,
        format!("GET /sub/x.txt HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes(),
        false,
    );
    assert_eq!(r.status, 431, "{r:?}");
    drop(s);
    // JSON lines in the file the configuration named.
    let text = std::fs::read_to_string(&log).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["status"], 200);
    assert_eq!(first["request"], "GET /sub/ HTTP/1.1");

    std::fs::write(&conf, "wrokers = 2\n").unwrap();
    let out = LINERATE.output(&["serve", "--config", conf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wrokers") && err.lines().count() == 1, "{err}");
    assert!(out.stdout.is_empty(), "served despite a bad configuration");
    // Values out of the flags' ranges are refused from the file too, naming the key.
    for (text, key) in [
        ("workers = 5000\n", "workers"),
        ("workers = 0\n", "workers"),
        ("max-header-fields = 0\n", "max-header-fields"),
        ("max-header-fields = 1000000\n", "max-header-fields"),
        ("max-request-line = \"2M\"\n", "max-request-line"),
        ("max-header-bytes = 0\n", "max-header-bytes"),
        ("disk-helpers = 1000\n", "disk-helpers"),
        ("log-format = \"xml\"\n", "log-format"),
        ("cork-min = \"1Q\"\n", "cork-min"),
    ] {
        std::fs::write(&conf, text).unwrap();
        let out = LINERATE.output(&[
            "serve",
            "--config",
            conf.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(
            err.contains(key) && err.lines().count() == 1,
            "{text}: {err}"
        );
        assert!(out.stdout.is_empty(), "{text}: served despite a bad value");
    }
    // An access log that cannot be opened fails the start before any address is
    // announced.
    let out = LINERATE.output(&[
        "serve",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--access-log",
        "/nonexistent/dir/access.log",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/dir/access.log"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "announced an address: {:?}",
        out.stdout
    );
    let out = LINERATE.output(&["serve", "--config", "/nonexistent.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.toml"));
}

/// Rules: docs/http.md E3.
#[test]
fn idle_keep_alive_connections_hold_no_buffers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), vec![b'a'; 2000]).unwrap();
    let s = LINERATE.start(dir.path(), &[]);
    let pid = s.pid();
    // Warm up allocator and caches with a few connections first.
    let mut conns: Vec<Conn> = Vec::new();
    for _ in 0..20 {
        let mut c = s.conn();
        c.get("/a.txt", "");
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = family_rss_kib(pid);
    for _ in 0..500 {
        let mut c = s.conn();
        c.get("/a.txt", "");
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    let after = family_rss_kib(pid);
    let per_conn = (after.saturating_sub(before)) * 1024 / 500;
    // A connection that kept its 16 KiB read buffer would cost well over this.
    assert!(
        per_conn < 8 * 1024,
        "{per_conn} bytes of memory per idle connection ({before} -> {after} KiB)"
    );
}

fn curl(args: &[&str]) -> Output {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "20"])
        .args(args)
        .output();
    match out {
        Ok(o) => o,
        Err(e) if std::env::var_os("CI").is_some() => panic!("curl is needed in CI: {e}"),
        Err(e) => panic!("curl: {e} (apt-get install curl)"),
    }
}

/// Rules: docs/http.md C2, F2, F3.
#[test]
fn curl_downloads_ranges_heads_and_revalidates() {
    let dir = tempfile::tempdir().unwrap();
    let big = pattern(5_000_000, 253);
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::write(dir.path().join("page.html"), b"<p>page</p>").unwrap();
    let s = LINERATE.start(dir.path(), &[]);
    let url = |p: &str| format!("http://{}/{p}", s.addr);
    let out_file = dir.path().join("download");
    let o = curl(&[
        "-o",
        out_file.to_str().unwrap(),
        "-w",
        "%{http_code} %{size_download}",
        &url("big.bin"),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "200 5000000");
    assert!(std::fs::read(&out_file).unwrap() == big);
    let o = curl(&["-r", "100-199", &url("big.bin")]);
    assert_eq!(o.stdout, &big[100..200]);
    let o = curl(&["-I", &url("page.html")]);
    let head = String::from_utf8_lossy(&o.stdout).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-type: text/html") && head.contains("content-length: 11"),
        "{head}"
    );
    // curl -z sends If-Modified-Since from the file's own mtime: 304, nothing downloaded.
    let o = curl(&[
        "-z",
        dir.path().join("page.html").to_str().unwrap(),
        "-w",
        "%{http_code} %{size_download}",
        "-o",
        "/dev/null",
        &url("page.html"),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "304 0");
    // HTTP/1.0 and a 404.
    let o = curl(&[
        "--http1.0",
        "-w",
        "%{http_code}",
        "-o",
        "/dev/null",
        &url("missing"),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "404");
    // Several URLs over one keep-alive connection: curl reports reusing it.
    let o = curl(&[
        "-v",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &url("page.html"),
        &url("page.html"),
    ]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Re-using existing connection"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Rules: docs/http.md F1, F2, F3.
#[test]
fn a_rust_http_client_gets_files_ranges_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(200_000, 241);
    std::fs::write(dir.path().join("d.bin"), &data).unwrap();
    let s = LINERATE.start(dir.path(), &["--transmit", "splice"]);
    let agent = ureq::AgentBuilder::new().build();
    let url = format!("http://{}/d.bin", s.addr);
    for _ in 0..3 {
        // The agent keeps the connection alive between these.
        let r = agent.get(&url).call().unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
        let etag = r.header("etag").unwrap().to_string();
        let mut body = Vec::new();
        r.into_reader().read_to_end(&mut body).unwrap();
        assert!(body == data);
        let r = agent.get(&url).set("Range", "bytes=-100").call().unwrap();
        assert_eq!(r.status(), 206);
        assert_eq!(
            r.header("content-range"),
            Some("bytes 199900-199999/200000")
        );
        let mut tail = Vec::new();
        r.into_reader().read_to_end(&mut tail).unwrap();
        assert_eq!(tail, &data[199_900..]);
        match agent.get(&url).set("If-None-Match", &etag).call() {
            Ok(r) => assert_eq!(r.status(), 304),
            Err(e) => panic!("conditional GET: {e}"),
        }
    }
    match agent.get(&format!("http://{}/nope", s.addr)).call() {
        Err(ureq::Error::Status(404, r)) => assert_eq!(r.into_string().unwrap(), "404 Not Found\n"),
        other => panic!("expected 404, got {other:?}"),
    }
}

/// The send buffer (`tb` of `ss -tm`) of the server's side of connections from `port`.
fn server_sndbufs(server_port: &str) -> Vec<u64> {
    let out = Command::new("ss")
        .args([
            "-tmnH",
            "state",
            "established",
            "sport",
            "=",
            &format!(":{server_port}"),
        ])
        .output()
        .expect("ss (iproute2) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(",tb")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse().ok())
        })
        .collect()
}

#[test]
fn sndbuf_fixes_the_send_buffer_of_accepted_connections() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.bin"), vec![7u8; 4 << 20]).unwrap();
    for (flag, want) in [(Some("64K"), Some(131_072u64)), (None, None)] {
        let extra: Vec<&str> = flag.map(|f| vec!["--sndbuf", f]).unwrap_or_default();
        let s = LINERATE.start(dir.path(), &extra);
        let port = s.addr.port().to_string();
        // A client that asks for 4 MiB and reads nothing keeps the connection open.
        let mut c = TcpStream::connect(s.addr).unwrap();
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let bufs = server_sndbufs(&port);
        assert_eq!(bufs.len(), 1, "{bufs:?}");
        match want {
            // The kernel doubles what was asked, for its bookkeeping.
            Some(w) => assert_eq!(bufs[0], w, "--sndbuf {flag:?}"),
            None => assert_ne!(bufs[0], 131_072, "autotuning left alone"),
        }
    }
}

/// The body of `GET /path`, on a new connection.
fn body_of(addr: SocketAddr, path: &str) -> Vec<u8> {
    let r = fetch(addr, path, "");
    assert_eq!(r.status, 200, "{path}: {r:?}");
    r.body
}

#[test]
fn cached_files_are_never_served_stale_whatever_changes_them() {
    // The cache skips the per-request fstatat for paths inotify watches; every way of
    // changing what a path names must still show on the very next request.
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("d")).unwrap();
    std::fs::create_dir_all(r.join("real")).unwrap();
    std::fs::write(r.join("a.txt"), b"first").unwrap();
    std::fs::write(r.join("d/f.txt"), b"in d, one").unwrap();
    std::fs::write(r.join("real/g.txt"), b"real one").unwrap();
    std::os::unix::fs::symlink("real", r.join("link")).unwrap();
    // A hard link outside the root: writes through it change the same inode.
    std::fs::hard_link(r.join("a.txt"), outside.path().join("a-link")).unwrap();
    let s = LINERATE.start(r, &[]);
    for _ in 0..3 {
        assert_eq!(body_of(s.addr, "/a.txt"), b"first");
        assert_eq!(body_of(s.addr, "/d/f.txt"), b"in d, one");
        assert_eq!(body_of(s.addr, "/link/g.txt"), b"real one");
    }
    // Rewritten in place, through the other link, same size.
    std::fs::write(outside.path().join("a-link"), b"other").unwrap();
    assert_eq!(body_of(s.addr, "/a.txt"), b"other");
    // Replaced by a rename.
    std::fs::write(r.join("new.txt"), b"second, longer").unwrap();
    std::fs::rename(r.join("new.txt"), r.join("a.txt")).unwrap();
    assert_eq!(body_of(s.addr, "/a.txt"), b"second, longer");
    // Its directory moved away and another put in its place.
    assert_eq!(body_of(s.addr, "/d/f.txt"), b"in d, one");
    std::fs::rename(r.join("d"), r.join("d-old")).unwrap();
    std::fs::create_dir(r.join("d")).unwrap();
    std::fs::write(r.join("d/f.txt"), b"in d, two").unwrap();
    assert_eq!(body_of(s.addr, "/d/f.txt"), b"in d, two");
    // And then a file replaced inside the new directory.
    std::fs::write(r.join("d/tmp"), b"in d, three").unwrap();
    std::fs::rename(r.join("d/tmp"), r.join("d/f.txt")).unwrap();
    assert_eq!(body_of(s.addr, "/d/f.txt"), b"in d, three");
    // Through a symbolic link: replaced in the link's target directory.
    std::fs::write(r.join("real/tmp"), b"real two").unwrap();
    std::fs::rename(r.join("real/tmp"), r.join("real/g.txt")).unwrap();
    assert_eq!(body_of(s.addr, "/link/g.txt"), b"real two");
    // Deleted.
    std::fs::remove_file(r.join("a.txt")).unwrap();
    let gone = fetch(s.addr, "/a.txt", "");
    assert_eq!(gone.status, 404, "{gone:?}");
}

/// inotify watches the process holds, over all its inotify descriptors.
fn inotify_watches(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}

#[test]
fn the_open_file_cache_bounds_its_inotify_watches_and_stays_correct() {
    let dir = tempfile::tempdir().unwrap();
    for d in 0..3 {
        std::fs::create_dir(dir.path().join(format!("d{d}"))).unwrap();
        for f in 0..10 {
            std::fs::write(dir.path().join(format!("d{d}/f{f}")), format!("{d}-{f}")).unwrap();
        }
    }
    let s = LINERATE.start(dir.path(), &["--open-file-cache", "4"]);
    let get = |path: &str| {
        let r = fetch(s.addr, path, "");
        assert_eq!(r.status, 200, "{path}: {r:?}");
        String::from_utf8(r.body).unwrap()
    };
    let mut most = 0;
    for round in 0..2 {
        for d in 0..3 {
            for f in 0..10 {
                assert_eq!(
                    get(&format!("/d{d}/f{f}")),
                    format!("{d}-{f}"),
                    "round {round}"
                );
                most = most.max(inotify_watches(s.pid()));
            }
        }
    }
    // At most 4 files, the root and three directories are watched at once.
    assert!(most >= 1, "no watches at all: the shortcut was never taken");
    assert!(most <= 8, "{most} watches for a cache of 4 entries");
    // A file rewritten after the cache started over is served new.
    std::fs::write(dir.path().join("d2/f9"), "new contents").unwrap();
    assert_eq!(get("/d2/f9"), "new contents");
}

/// Rules: docs/http.md E4.
#[test]
fn after_sigterm_the_response_in_flight_finishes_and_no_further_request_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(8 << 20, 251);
    std::fs::write(dir.path().join("big"), &body).unwrap();
    std::fs::write(dir.path().join("small"), b"small").unwrap();
    let mut s = LINERATE.start(dir.path(), &[]);
    let mut c = TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    c.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // The response is under way (the client reads nothing yet) when SIGTERM comes.
    std::thread::sleep(Duration::from_millis(200));
    s.sigterm();
    std::thread::sleep(Duration::from_millis(400));
    // A request pipelined after the signal is not answered.
    c.write_all(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    let rs = parse_all(&got, &[]);
    assert_eq!(rs.len(), 1, "one response, then the close");
    assert_eq!(rs[0].status, 200, "{:?}", rs[0]);
    assert!(rs[0].body == body, "the body differs");
    let status = s
        .wait_exit(Duration::from_secs(60))
        .expect("exits after SIGTERM");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn lowat_settings_serve_large_files_whole() {
    let dir = tempfile::tempdir().unwrap();
    let body = pattern(3 << 20, 253);
    std::fs::write(dir.path().join("big"), &body).unwrap();
    for lowat in ["0", "32K", "4M"] {
        let s = LINERATE.start(dir.path(), &["--lowat", lowat, "--send-slice", "0"]);
        let r = fetch(s.addr, "/big", "");
        assert_eq!(r.status, 200, "--lowat {lowat}: {r:?}");
        assert!(r.body == body, "--lowat {lowat}: the body differs");
    }
    let out = LINERATE.output(&["serve", "--lowat", "lots"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lowat"));
}

/// The workspace root, where the README's commands run.
fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `linerate serve ARGS` on a free port, one worker, no access log, started in the
/// workspace root as the README says; the server, and its stderr line "serving ROOT at
/// URL" (a warning may come first).
fn start_in_workspace(args: &[&str]) -> (Server, String) {
    let own = [
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--access-log",
        "off",
    ];
    let s = LINERATE.spawn_in(&workspace(), &[args, &own[..]].concat());
    let told = s.stderr_line("serving ").unwrap_or_default();
    (s, told)
}

#[test]
fn the_readme_first_command_serves_the_example_site_at_the_url_it_prints() {
    let (s, told) = start_in_workspace(&["serve", "examples/site"]);
    let url = format!("http://{}/", s.addr);
    let page = fetch(s.addr, "/", "");
    drop(s);
    // The root as an absolute path: a service's start line says which directory.
    let root = std::fs::canonicalize(workspace())
        .unwrap()
        .join("examples/site");
    assert_eq!(told, format!("serving {} at {url}", root.display()));
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        String::from_utf8_lossy(&page.body).contains("linerate is serving"),
        "not examples/site/index.html"
    );
}

#[test]
fn the_example_configuration_loads_and_serves() {
    // Flags win over the file: only the address and the access log change.
    let (s, _) = start_in_workspace(&["serve", "--config", "examples/linerate.toml"]);
    let hello = fetch(s.addr, "/hello.txt", "Range: bytes=0-4\r\n");
    let status = fetch(s.addr, "/.status", "");
    drop(s);
    assert_eq!(hello.status, 206, "{hello:?}");
    assert_eq!(hello.body, b"Hello");
    assert_eq!(status.status, 200, "the example's status page: {status:?}");
}

/// `--listen` as an operator writes it: a name resolves to its addresses, each bound
/// and announced, and served.
#[test]
fn listen_takes_a_host_name() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), b"A\n").unwrap();
    let s = LINERATE.spawn(&[
        "serve",
        root.path().to_str().unwrap(),
        "--listen",
        "localhost:0",
        "--access-log",
        "off",
    ]);
    assert!(s.addr.ip().is_loopback(), "{}", s.addr);
    assert_eq!(linerate_testkit::fetch(s.addr, "/a.txt", "").status, 200);
}
