//! `linerate serve` started as a user would, with curl-like raw requests: the basics
//! every transmit strategy must get right, and the start-up errors. The full
//! docs/http.md suite is in serve_http.rs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};

mod util;
use util::{exchange, Server};

fn split(resp: &[u8]) -> (String, Vec<u8>) {
    let i = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    (
        String::from_utf8_lossy(&resp[..i]).into_owned(),
        resp[i..].to_vec(),
    )
}

/// Rules: docs/http.md C1, F2.
#[test]
fn sliced_sends_take_turns_and_lose_nothing() {
    // With --send-slice 4K each connection yields after every 4 KiB of a file, so
    // several downloads interleave through the worker's run list; pipelined requests
    // and ranges behind a sliced body still arrive whole and in order.
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i * 13 % 253) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    for t in ["sendfile", "splice", "copy"] {
        let s = Server::start(
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
                let addr = s.addr.clone();
                std::thread::spawn(move || {
                    exchange(&addr, b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=5-9,-3\r\nConnection: close\r\n\r\n")
                })
            })
            .collect();
        for c in clients {
            let out = c.join().unwrap();
            let (head, rest) = split(&out);
            assert!(head.contains("Content-Length: 1000000\r\n"), "{t}: {head}");
            assert!(rest[..1_000_000] == big[..], "{t}: first body differs");
            let (head2, body2) = split(&rest[1_000_000..]);
            assert!(head2.starts_with("HTTP/1.1 206"), "{t}: {head2}");
            let text = String::from_utf8_lossy(&body2);
            assert!(
                text.contains("Content-Range: bytes 5-9/1000000"),
                "{t}: {text}"
            );
            assert!(
                text.contains("Content-Range: bytes 999997-999999/1000000"),
                "{t}"
            );
        }
    }
}

/// Rules: docs/http.md F2, F4.
#[test]
fn every_transmit_strategy_serves_small_large_and_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::write(dir.path().join("a.txt"), b"hello\n").unwrap();
    for t in ["copy", "sendfile", "splice", "zerocopy", "sendfile-4k"] {
        let s = Server::start(dir.path(), &["--transmit", t]);
        let (head, body) = split(&exchange(
            &s.addr,
            b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ));
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{t}: {head}");
        assert!(head.contains("Content-Length: 3000000\r\n"), "{t}: {head}");
        assert!(body == big, "{t}: body differs ({} bytes)", body.len());
        let (head, body) = split(&exchange(&s.addr, b"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-1999\r\nConnection: close\r\n\r\n"));
        assert!(
            head.starts_with("HTTP/1.1 206 Partial Content\r\n"),
            "{t}: {head}"
        );
        assert!(
            head.contains("Content-Range: bytes 1000-1999/3000000\r\n"),
            "{t}: {head}"
        );
        assert_eq!(body, &big[1000..2000], "{t}");
        // Small file, pipelined twice, the second closing.
        let out = exchange(&s.addr, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let text = String::from_utf8_lossy(&out);
        assert_eq!(
            text.matches("HTTP/1.1 200 OK\r\n").count(),
            3,
            "{t}: {text}"
        );
        assert_eq!(
            text.matches("hello\n").count(),
            2,
            "{t}: HEAD has no body: {text}"
        );
    }
}

/// Rules: docs/http.md P1, R2, F4, F5.
#[test]
fn errors_and_redirects() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("d/index.html"), b"<p>i</p>").unwrap();
    let s = Server::start(dir.path(), &[]);
    let (head, _) = split(&exchange(
        &s.addr,
        b"GET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
    let (head, _) = split(&exchange(
        &s.addr,
        b"GET /d?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(
        head.starts_with("HTTP/1.1 301 ") && head.contains("Location: /d/?x=1\r\n"),
        "{head}"
    );
    let (head, body) = split(&exchange(
        &s.addr,
        b"GET /d/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(head.contains("Content-Type: text/html\r\n"), "{head}");
    assert_eq!(body, b"<p>i</p>");
    let (head, _) = split(&exchange(
        &s.addr,
        b"POST /d/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ));
    assert!(
        head.starts_with("HTTP/1.1 405 ") && head.contains("Allow: GET, HEAD\r\n"),
        "{head}"
    );
    let (head, body) = split(&exchange(&s.addr, b"GET / HTTP/1.1\nHost: x\r\n\r\n"));
    assert!(
        head.starts_with("HTTP/1.1 400 ") && head.contains("Connection: close\r\n"),
        "{head}"
    );
    assert_eq!(body, b"400 Bad Request\n");
    let (head, body) = split(&exchange(
        &s.addr,
        b"HEAD /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(
        head.starts_with("HTTP/1.1 404 ") && head.contains("Content-Length: 14\r\n"),
        "{head}"
    );
    assert!(body.is_empty(), "HEAD error with a body");
}

#[test]
fn bad_configuration_fails_before_serving() {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", "/nonexistent/root", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/root"));
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", dir.path().to_str().unwrap(), "--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&addr));
    // Another linerate on the port: SO_REUSEPORT must not let a second server share it.
    let first = Server::start(dir.path(), &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args([
            "serve",
            dir.path().to_str().unwrap(),
            "--listen",
            &first.addr,
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Address already in use"));
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", "--workers", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    for flag in ["--max-request-line", "--max-header-bytes"] {
        let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["serve", flag, "2M"])
            .output()
            .unwrap();
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
    let s = Server::spawn(&[
        "serve",
        "--config",
        conf.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
    ]);
    // autoindex from the file: a listing of /sub/.
    let (head, body) = split(&exchange(
        &s.addr,
        b"GET /sub/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(String::from_utf8_lossy(&body).contains("x.txt"));
    // max-header-fields = 5 from the file.
    let many: String = (0..6).map(|i| format!("X-{i}: v\r\n")).collect();
    let (head, _) = split(&exchange(
        &s.addr,
        format!("GET /sub/x.txt HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes(),
    ));
    assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
    drop(s);
    // JSON lines in the file the configuration named.
    let text = std::fs::read_to_string(&log).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["status"], 200);
    assert_eq!(first["request"], "GET /sub/ HTTP/1.1");

    std::fs::write(&conf, "wrokers = 2\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
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
        let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(["serve", "--config", conf.to_str().unwrap(), "--listen"])
            .arg("127.0.0.1:0")
            .output()
            .unwrap();
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
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", root.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--access-log", "/nonexistent/dir/access.log"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/dir/access.log"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "announced an address: {:?}",
        out.stdout
    );
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", "--config", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.toml"));
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Rules: docs/http.md E3.
#[test]
fn idle_keep_alive_connections_hold_no_buffers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), vec![b'a'; 2000]).unwrap();
    let s = Server::start(dir.path(), &[]);
    let pid = s.child.id();
    // Warm up allocator and caches with a few connections first.
    let mut conns: Vec<TcpStream> = Vec::new();
    let get = |c: &mut TcpStream| {
        c.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = 0;
        while !buf[..got].windows(4).any(|w| w == b"\r\n\r\n") || got < 2000 {
            got += c.read(&mut buf[got..]).unwrap();
        }
    };
    for _ in 0..20 {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        get(&mut c);
        conns.push(c);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = rss_kib(pid);
    for _ in 0..500 {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        get(&mut c);
        conns.push(c);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let after = rss_kib(pid);
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
    let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::write(dir.path().join("page.html"), b"<p>page</p>").unwrap();
    let s = Server::start(dir.path(), &[]);
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
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(dir.path().join("d.bin"), &data).unwrap();
    let s = Server::start(dir.path(), &["--transmit", "splice"]);
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
        let s = Server::start(dir.path(), &extra);
        let port = s.addr.rsplit(':').next().unwrap().to_string();
        // A client that asks for 4 MiB and reads nothing keeps the connection open.
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
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
fn body_of(addr: &str, path: &str) -> Vec<u8> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let (head, body) = split(&exchange(addr, req.as_bytes()));
    assert!(head.starts_with("HTTP/1.1 200 "), "{path}: {head}");
    body
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
    let s = Server::start(r, &[]);
    for _ in 0..3 {
        assert_eq!(body_of(&s.addr, "/a.txt"), b"first");
        assert_eq!(body_of(&s.addr, "/d/f.txt"), b"in d, one");
        assert_eq!(body_of(&s.addr, "/link/g.txt"), b"real one");
    }
    // Rewritten in place, through the other link, same size.
    std::fs::write(outside.path().join("a-link"), b"other").unwrap();
    assert_eq!(body_of(&s.addr, "/a.txt"), b"other");
    // Replaced by a rename.
    std::fs::write(r.join("new.txt"), b"second, longer").unwrap();
    std::fs::rename(r.join("new.txt"), r.join("a.txt")).unwrap();
    assert_eq!(body_of(&s.addr, "/a.txt"), b"second, longer");
    // Its directory moved away and another put in its place.
    assert_eq!(body_of(&s.addr, "/d/f.txt"), b"in d, one");
    std::fs::rename(r.join("d"), r.join("d-old")).unwrap();
    std::fs::create_dir(r.join("d")).unwrap();
    std::fs::write(r.join("d/f.txt"), b"in d, two").unwrap();
    assert_eq!(body_of(&s.addr, "/d/f.txt"), b"in d, two");
    // And then a file replaced inside the new directory.
    std::fs::write(r.join("d/tmp"), b"in d, three").unwrap();
    std::fs::rename(r.join("d/tmp"), r.join("d/f.txt")).unwrap();
    assert_eq!(body_of(&s.addr, "/d/f.txt"), b"in d, three");
    // Through a symbolic link: replaced in the link's target directory.
    std::fs::write(r.join("real/tmp"), b"real two").unwrap();
    std::fs::rename(r.join("real/tmp"), r.join("real/g.txt")).unwrap();
    assert_eq!(body_of(&s.addr, "/link/g.txt"), b"real two");
    // Deleted.
    std::fs::remove_file(r.join("a.txt")).unwrap();
    let (head, _) = split(&exchange(
        &s.addr,
        b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    ));
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");
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
    let s = Server::start(dir.path(), &["--open-file-cache", "4"]);
    let get = |path: &str| {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let (head, body) = split(&exchange(&s.addr, req.as_bytes()));
        assert!(head.starts_with("HTTP/1.1 200 "), "{path}: {head}");
        String::from_utf8(body).unwrap()
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
    let body: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big"), &body).unwrap();
    std::fs::write(dir.path().join("small"), b"small").unwrap();
    let mut s = Server::start(dir.path(), &[]);
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    c.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // The response is under way (the client reads nothing yet) when SIGTERM comes.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let kill = Command::new("kill")
        .args(["-TERM", &s.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    std::thread::sleep(std::time::Duration::from_millis(400));
    // A request pipelined after the signal is not answered.
    c.write_all(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    let (head, rest) = split(&got);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(rest.len(), body.len(), "one response, then the close");
    assert!(rest == body, "the body differs");
    let status = s.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn lowat_settings_serve_large_files_whole() {
    let dir = tempfile::tempdir().unwrap();
    let body: Vec<u8> = (0..3u32 << 20).map(|i| (i % 253) as u8).collect();
    std::fs::write(dir.path().join("big"), &body).unwrap();
    for lowat in ["0", "32K", "4M"] {
        let s = Server::start(dir.path(), &["--lowat", lowat, "--send-slice", "0"]);
        let (head, got) = split(&exchange(
            &s.addr,
            b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ));
        assert!(head.starts_with("HTTP/1.1 200 "), "--lowat {lowat}: {head}");
        assert!(got == body, "--lowat {lowat}: the body differs");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", "--lowat", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lowat"));
}

/// The workspace root, where the README's commands run.
fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `linerate serve ARGS` on a free port, one worker, no access log, started in the
/// workspace root as the README says; (child, address from "listening on", the stderr
/// line "serving ROOT at URL").
fn start_in_workspace(args: &[&str]) -> (std::process::Child, String, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .current_dir(workspace())
        .args(args)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--access-log",
            "off",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The first stderr line that says where it serves (a warning may come first).
    let told = std::io::BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("serving "))
        .unwrap_or_default();
    let addr = match first.trim().strip_prefix("listening on ") {
        Some(a) => a.to_string(),
        None => {
            let _ = child.kill();
            panic!("stdout {first:?}, stderr {told:?}");
        }
    };
    (child, addr, told.trim().to_string())
}

#[test]
fn the_readme_first_command_serves_the_example_site_at_the_url_it_prints() {
    let (mut child, addr, told) = start_in_workspace(&["serve", "examples/site"]);
    let url = format!("http://{addr}/");
    let page = exchange(
        &addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(told, format!("serving examples/site at {url}"));
    let (head, body) = split(&page);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(
        String::from_utf8_lossy(&body).contains("linerate is serving"),
        "not examples/site/index.html"
    );
}

#[test]
fn the_example_configuration_loads_and_serves() {
    // Flags win over the file: only the address and the access log change.
    let (mut child, addr, _) = start_in_workspace(&["serve", "--config", "examples/linerate.toml"]);
    let hello = exchange(
        &addr,
        b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-4\r\nConnection: close\r\n\r\n",
    );
    let status = exchange(
        &addr,
        b"GET /.status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let _ = child.kill();
    let _ = child.wait();
    let (head, body) = split(&hello);
    assert!(head.starts_with("HTTP/1.1 206 "), "{head}");
    assert_eq!(body, b"Hello");
    let (head, _) = split(&status);
    assert!(
        head.starts_with("HTTP/1.1 200 "),
        "the example's status page: {head}"
    );
}
