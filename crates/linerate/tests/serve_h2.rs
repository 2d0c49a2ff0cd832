//! HTTP/2 through the real binary: h2spec over TLS (ALPN `h2`) and in clear (prior
//! knowledge), and curl's answers over HTTP/2 compared with its answers over HTTP/1.1
//! from the same server (files of every size, ranges, 304s, precompressed variants,
//! redirects, errors), under every transmit strategy and driver.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use linerate_testkit::{
    assert_bytes_eq, docroot, installed, pattern, per_strategy, put, variant_args, Linerate, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md T8.
    h2spec_passes_over_tls_and_in_clear,
    // Rules: docs/http.md T7, T9, T12.
    answers_over_h2_are_the_answers_over_http11,
    // Rules: docs/http.md T10.
    a_client_gone_with_its_windows_shut_is_closed_at_once,
    // Rules: docs/http.md S5.
    a_stream_fed_a_byte_of_window_at_a_time_is_ended_by_the_minimum_rate,
);

/// h2spec: on PATH, or where `go install` puts it (scripts/test installs it there).
fn h2spec() -> Option<PathBuf> {
    if installed("h2spec") {
        return Some(PathBuf::from("h2spec"));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let p = home.join("go/bin/h2spec");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "h2spec is missing under CI: scripts/test installs it"
    );
    None
}

/// `serve` with a plain and a TLS listener, access log to `log`.
fn serve(root: &Path, certs: &Path, case: &str, log: &Path, extra: &[&str]) -> (Server, PathBuf) {
    let args = [
        &["--workers", "1", "--access-log", log.to_str().unwrap()][..],
        &variant_args(case),
        extra,
    ];
    LINERATE.start_tls(root, certs, &args.concat())
}

/// `serve` (sendfile) of a root holding `a.txt` ("hello"), with `extra` flags: the
/// server, its certificate, and the directories to keep while it runs.
fn serve_hello(extra: &[&str]) -> (Server, PathBuf, [tempfile::TempDir; 2]) {
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, cert) = serve(root.path(), certs.path(), "sendfile", &log, extra);
    (server, cert, [root, certs])
}

/// h2spec's summary line's counts: (tests, passed, failed), and its failures' text.
fn run_h2spec(bin: &Path, addr: SocketAddr, tls: bool) -> ((u32, u32, u32), String) {
    let mut c = Command::new(bin);
    c.args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["-P", "/index.html", "-o", "5"]);
    if tls {
        c.args(["-t", "-k"]);
    }
    let out = c.output().expect("h2spec runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = text
        .lines()
        .find(|l| l.contains(" tests, "))
        .unwrap_or_else(|| panic!("no summary from h2spec:\n{text}"));
    let n: Vec<u32> = summary
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    let failures = text
        .split_once("Failures:")
        .map_or(String::new(), |(_, f)| f.to_string());
    ((n[0], n[1], n[3]), failures)
}

fn h2spec_passes_over_tls_and_in_clear(case: &str) {
    let Some(bin) = h2spec() else {
        eprintln!("skipped: no h2spec");
        return;
    };
    let root = docroot();
    put(root.path(), "index.html", &pattern(20_000, 1));
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(root.path(), certs.path(), case, &log, &[]);
    let ((tests, passed, failed), failures) = run_h2spec(&bin, server.tls_addr(), true);
    assert!(tests >= 145, "{tests} tests");
    assert_eq!((passed, failed), (tests, 0), "over TLS:\n{failures}");
    // In clear, one port serves HTTP/1.1 and prior-knowledge HTTP/2: bytes that are
    // not HTTP/2's preface are an HTTP/1.1 request, so h2spec's "invalid connection
    // preface" gets an HTTP/1.1 400 rather than a bare close (docs/http.md T8).
    let ((tests, passed, failed), failures) = run_h2spec(&bin, server.addr, false);
    assert_eq!((passed, failed), (tests - 1, 1), "in clear:\n{failures}");
    assert!(
        failures.contains("Sends invalid connection preface"),
        "{failures}"
    );
    drop(server);
    // `--http2 only`: every connection is HTTP/2, and h2spec passes every test in clear
    // too.
    let (server, _) = serve(root.path(), certs.path(), case, &log, &["--http2", "only"]);
    let ((tests, passed, failed), failures) = run_h2spec(&bin, server.addr, false);
    assert!(tests >= 145, "{tests} tests");
    assert_eq!((passed, failed), (tests, 0), "in clear, only:\n{failures}");
}

/// `curl -sS` with `args` for `url`: its output with `-w` giving the status and version
/// on a last line.
fn curl(args: &[&str], url: &str) -> (u16, String, Vec<u8>) {
    let out: Output = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code} %{http_version}",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl {args:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let split = out.stdout.iter().rposition(|&b| b == b'\n').unwrap();
    let last = String::from_utf8_lossy(&out.stdout[split + 1..]).into_owned();
    let (code, version) = last.split_once(' ').unwrap();
    (
        code.parse().unwrap(),
        version.to_string(),
        out.stdout[..split].to_vec(),
    )
}

/// The heads curl receives for `paths` fetched in one run (one connection), each its
/// fields less the status line, `Date` and the connection's own, names lower-cased.
fn heads(args: &[&str], base: &str, paths: &[&str]) -> Vec<Vec<(String, String)>> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "-D", "-"]).args(args);
    for p in paths {
        cmd.args(["-o", "/dev/null"]).arg(format!("{base}{p}"));
    }
    let out = cmd.output().expect("curl runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut heads = Vec::new();
    for line in text.lines().map(|l| l.trim_end_matches('\r')) {
        if line.starts_with("HTTP/") {
            heads.push(Vec::new());
        } else if let (Some(h), Some((n, v))) = (heads.last_mut(), line.split_once(": ")) {
            let n = n.to_ascii_lowercase();
            if !["date", "connection", "keep-alive"].contains(&n.as_str()) {
                h.push((n, v.to_string()));
            }
        }
    }
    heads
}

/// The heads nghttp receives for `urls` (one connection), as [`heads`] reads curl's,
/// and the length of each HEADERS frame.
fn nghttp_heads(args: &[&str], urls: &[String]) -> (Vec<Vec<(String, String)>>, Vec<usize>) {
    let out = Command::new("nghttp")
        .arg("-nv")
        .args(args)
        .args(urls)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut heads, mut lens) = (Vec::new(), Vec::new());
    let mut head = Vec::new();
    for line in text.lines() {
        if let Some((_, field)) = line.split_once("] recv (stream_id=") {
            // `N) name: value`, a pseudo-header's name with its colon.
            let field = field.split_once(") ").map_or("", |(_, f)| f);
            let at = field
                .get(1..)
                .and_then(|f| f.find(": "))
                .map_or(0, |i| i + 1);
            let (n, v) = (&field[..at], field.get(at + 2..).unwrap_or(""));
            if n != ":status" && n != "date" {
                head.push((n.to_string(), v.to_string()));
            }
        } else if let Some(rest) = line.split("recv HEADERS frame <length=").nth(1) {
            lens.push(rest.split(',').next().unwrap().parse::<usize>().unwrap());
            heads.push(std::mem::take(&mut head));
        }
    }
    assert_eq!(heads.len(), urls.len(), "every answer: {text}");
    (heads, lens)
}

fn answers_over_h2_are_the_answers_over_http11(case: &str) {
    if !installed("curl") {
        eprintln!("skipped: no curl");
        return;
    }
    let root = docroot();
    let p = root.path();
    for (name, len) in [
        ("one.bin", 1024),
        ("hundred.bin", 100 << 10),
        ("big.bin", 3 << 20),
    ] {
        put(p, name, &pattern(len, len as u64));
    }
    put(p, "page.html", &b"<p>hello</p>\n".repeat(200));
    // A precompressed variant, sent to a client that takes gzip.
    put(p, "page.html.gz", b"gzip bytes of the page");
    put(p, "dir/index.html", b"in dir");
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, cert) = serve(
        p,
        certs.path(),
        case,
        &log,
        &[
            "--precompressed",
            "gzip",
            "--status-path",
            "/.status",
            "--metrics-path",
            "/.metrics",
        ],
    );
    let plain = format!("http://{}", server.addr);
    let tls = server.tls_addr();
    let secure = format!("https://localhost:{}", tls.port());
    let resolve = format!("localhost:{}:{}", tls.port(), tls.ip());
    let etag = {
        let out = Command::new("curl")
            .args(["-sS", "-I", &format!("{plain}/one.bin")])
            .output()
            .unwrap();
        let head = String::from_utf8_lossy(&out.stdout).into_owned();
        head.lines()
            .find_map(|l| {
                l.strip_prefix("ETag: ")
                    .or_else(|| l.strip_prefix("etag: "))
            })
            .expect("an ETag")
            .trim()
            .to_string()
    };
    let inm = format!("If-None-Match: {etag}");
    let asks: Vec<(&str, Vec<&str>)> = vec![
        ("/one.bin", vec![]),
        ("/hundred.bin", vec![]),
        ("/big.bin", vec![]),
        ("/big.bin", vec!["-r", "1000-1999"]),
        ("/big.bin", vec!["-r", "0-9,100-109"]),
        ("/one.bin", vec!["-H", &inm]),
        ("/page.html", vec!["-H", "Accept-Encoding: gzip"]),
        ("/dir", vec![]),
        ("/nope", vec![]),
        ("/big.bin", vec!["-I"]),
    ];
    let cert = cert.to_str().unwrap();
    for (path, extra) in &asks {
        let (s1, v1, b1) = curl(
            &[&["--http1.1"][..], extra].concat(),
            &format!("{plain}{path}"),
        );
        assert_eq!(v1, "1.1");
        let clear = curl(
            &[&["--http2-prior-knowledge"][..], extra].concat(),
            &format!("{plain}{path}"),
        );
        let sealed = curl(
            &[
                &["--http2", "--cacert", cert, "--resolve", &resolve][..],
                extra,
            ]
            .concat(),
            &format!("{secure}{path}"),
        );
        for (what, (s2, v2, b2)) in [("h2c", clear), ("h2", sealed)] {
            assert_eq!((s2, v2.as_str()), (s1, "2"), "{what} {path} {extra:?}");
            if extra.first() != Some(&"-I") {
                // Multipart boundaries differ per answer; everything else is the same.
                if !path.contains("big") || !extra.contains(&"0-9,100-109") {
                    assert_bytes_eq(&b2, &b1, &format!("{what} {path} {extra:?}"));
                }
            }
        }
    }
    // The counters say how many answers went by each protocol: each ask above went
    // once over HTTP/1.1 and twice over HTTP/2 (in clear, over TLS), each on a
    // connection of its own.
    let (_, _, status) = curl(&["--http1.1"], &format!("{plain}/.status"));
    let status: serde_json::Value = serde_json::from_slice(&status).unwrap();
    let n = asks.len() as u64;
    assert_eq!(status["http2"]["connections"], 2 * n, "{status}");
    assert_eq!(status["http2"]["responses"], 2 * n, "{status}");
    let (_, _, metrics) = curl(&["--http2-prior-knowledge"], &format!("{plain}/.metrics"));
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains(&format!(
            "linerate_responses_by_protocol_total{{protocol=\"h2\"}} {}",
            2 * n
        )),
        "{metrics}"
    );
    // Many answers on one connection: the heads' fields go into the client's table
    // the first time and come back as indexes after (T12). curl over TLS, and nghttp
    // in clear (curl 7.88 cannot reuse a prior-knowledge connection, whatever the
    // server), decode each head to what HTTP/1.1 says; nghttp shows the later HEADERS
    // frames are a few bytes.
    // (nghttp asks for gzip, and no path here has a variant.)
    let paths = [
        "/one.bin",
        "/hundred.bin",
        "/dir/index.html",
        "/one.bin",
        "/nope",
    ];
    let h1 = heads(&["--http1.1"], &plain, &paths);
    let again: Vec<&str> = paths.iter().chain(&paths).chain(&paths).copied().collect();
    let sealed = heads(
        &["--http2", "--cacert", cert, "--resolve", &resolve],
        &secure,
        &again,
    );
    assert_eq!(
        sealed.len(),
        again.len(),
        "h2: one connection, every answer"
    );
    // Over TLS each answer says where HTTP/3 is (on by default), last.
    let alt = (
        "alt-svc".to_string(),
        format!("h3=\":{}\"; ma=86400", tls.port()),
    );
    for (i, head) in sealed.iter().enumerate() {
        let mut want = h1[i % paths.len()].clone();
        want.push(alt.clone());
        assert_eq!(head, &want, "h2: answer {i}");
    }
    if installed("nghttp") {
        // nghttp asks once per URL: the query makes each one its own.
        let urls: Vec<String> = again
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{plain}{p}?{i}"))
            .collect();
        let (clear, lens) = nghttp_heads(&[], &urls);
        for (i, head) in clear.iter().enumerate() {
            assert_eq!(head, &h1[i % paths.len()], "h2c: answer {i}");
        }
        // `:status`, an index per field, the date a literal of 32 bytes.
        assert!(lens[paths.len()..].iter().all(|&n| n < 45), "{lens:?}");
        assert!(lens[0] > 100, "{lens:?}");
        // A client whose table is 600 bytes: the server says so in a size update at
        // its first block (nghttp2 ends the connection without it), then adds the
        // heads that fit half of it, evicting as they come.
        let (small, _) = nghttp_heads(&["--header-table-size=600"], &urls);
        for (i, head) in small.iter().enumerate() {
            assert_eq!(head, &h1[i % paths.len()], "h2c, a small table: answer {i}");
        }
    }
    // The access log names the protocol.
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"GET /big.bin HTTP/2.0\" 200 3145728"),
        "{text}"
    );
    assert!(
        text.contains("\"GET /one.bin HTTP/1.1\" 200 1024"),
        "{text}"
    );
}

/// `--http2 off`: ALPN offers HTTP/1.1 alone, and the preface in clear is not taken.
/// Rules: docs/http.md T7.
#[test]
fn http2_off_answers_http11_only() {
    let (server, cert, _dirs) = serve_hello(&["--http2", "off"]);
    let tls = server.tls_addr();
    let (s, v, b) = curl(
        &[
            "--http2",
            "--cacert",
            cert.to_str().unwrap(),
            "--resolve",
            &format!("localhost:{}:{}", tls.port(), tls.ip()),
        ],
        &format!("https://localhost:{}/a.txt", tls.port()),
    );
    assert_eq!((s, v.as_str(), &b[..]), (200, "1.1", &b"hello"[..]));
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--http2-prior-knowledge"])
        .arg(format!("http://{}/a.txt", server.addr))
        .output()
        .unwrap();
    assert!(!out.status.success(), "prior knowledge is refused");
    let (s, _, _) = curl(&[], &format!("http://{}/a.txt", server.addr));
    assert_eq!(s, 200);
}

/// `--http2 only`: an HTTP/1.1 request in clear gets the server's SETTINGS and a
/// GOAWAY (PROTOCOL_ERROR), then the close, no HTTP/1.1 answer; ALPN offers `h2` alone
/// (curl asking for HTTP/1.1 alone is refused); prior knowledge and ALPN h2 are served.
/// Rules: docs/http.md T7.
#[test]
fn http2_only_answers_http2_alone() {
    let (server, cert, _dirs) = serve_hello(&["--http2", "only"]);
    let mut r = Raw {
        s: std::net::TcpStream::connect(server.addr).unwrap(),
        buf: Vec::new(),
    };
    r.send_raw(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let wait = std::time::Duration::from_secs(5);
    let mut kinds = Vec::new();
    while let Some((kind, _, _, payload)) = r.frame(wait) {
        if kind == 7 {
            assert_eq!(payload[4..8], 1u32.to_be_bytes(), "PROTOCOL_ERROR");
        }
        kinds.push(kind);
    }
    assert_eq!(kinds.first(), Some(&4), "SETTINGS first: {kinds:?}");
    assert_eq!(
        kinds.last(),
        Some(&7),
        "GOAWAY last, then the close: {kinds:?}"
    );
    let (s, v, b) = curl(
        &["--http2-prior-knowledge"],
        &format!("http://{}/a.txt", server.addr),
    );
    assert_eq!((s, v.as_str(), &b[..]), (200, "2", &b"hello"[..]));
    let tls = server.tls_addr();
    let resolve = format!("localhost:{}:{}", tls.port(), tls.ip());
    let url = format!("https://localhost:{}/a.txt", tls.port());
    let cert = cert.to_str().unwrap();
    let (s, v, _) = curl(&["--http2", "--cacert", cert, "--resolve", &resolve], &url);
    assert_eq!((s, v.as_str()), (200, "2"));
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--http1.1", "--cacert", cert])
        .args(["--resolve", &resolve, &url])
        .output()
        .unwrap();
    assert!(!out.status.success(), "ALPN http/1.1 alone is refused");
}

/// A bare HTTP/2 client over a socket: frames written and read as they are.
struct Raw {
    s: std::net::TcpStream,
    buf: Vec<u8>,
}

/// A frame: (type, flags, stream, payload).
type Frame = (u8, u8, u32, Vec<u8>);

impl Raw {
    /// Connects and sends the preface with `settings` (id, value).
    fn open(addr: SocketAddr, settings: &[(u16, u32)]) -> Raw {
        let s = std::net::TcpStream::connect(addr).unwrap();
        let mut r = Raw { s, buf: Vec::new() };
        let mut p = Vec::new();
        for (id, v) in settings {
            p.extend_from_slice(&id.to_be_bytes());
            p.extend_from_slice(&v.to_be_bytes());
        }
        r.send_raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        r.send(4, 0, 0, &p);
        r
    }

    fn send_raw(&mut self, b: &[u8]) {
        use std::io::Write;
        self.s.write_all(b).unwrap();
    }

    fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.try_send(kind, flags, stream, payload).unwrap();
    }

    /// [`Raw::send`], or the error of a connection the server has closed (a broken
    /// pipe, a reset).
    fn try_send(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> std::io::Result<()> {
        use std::io::Write;
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        self.s.write_all(&f)
    }

    /// GET `path` on `stream` (literal fields, no Huffman).
    fn get(&mut self, stream: u32, path: &str) {
        let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
        block.extend_from_slice(path.as_bytes());
        block.extend_from_slice(&[0x01, 1, b'x']);
        self.send(1, 0x5, stream, &block);
    }

    /// The next frame, or None when the server closed (or `wait` passed).
    fn frame(&mut self, wait: std::time::Duration) -> Option<Frame> {
        use std::io::Read;
        let deadline = std::time::Instant::now() + wait;
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let f: Vec<u8> = self.buf.drain(..9 + len).collect();
                    let stream = u32::from_be_bytes([f[5], f[6], f[7], f[8]]) & 0x7fff_ffff;
                    return Some((f[3], f[4], stream, f[9..].to_vec()));
                }
            }
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            self.s
                .set_read_timeout(Some(left.max(std::time::Duration::from_millis(1))))
                .unwrap();
            let mut b = [0u8; 65536];
            match self.s.read(&mut b) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&b[..n]),
            }
        }
    }
}

/// A client that opens no window while it keeps the connection busy with PINGs is cut
/// by the send timeout: what the client sends is no progress of the answer.
/// Rules: docs/http.md T10.
#[test]
fn a_client_that_opens_no_window_is_cut_by_the_send_timeout() {
    let root = docroot();
    put(root.path(), "big.bin", &pattern(3 << 20, 3));
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(
        root.path(),
        certs.path(),
        "splice",
        &log,
        &["--send-timeout", "2"],
    );
    let mut c = Raw::open(server.addr, &[(4, 0)]);
    c.get(1, "/big.bin");
    let start = std::time::Instant::now();
    let mut closed = false;
    while start.elapsed() < std::time::Duration::from_secs(8) {
        c.send(6, 0, 0, b"still...");
        // Drain what came (SETTINGS, acks, the HEADERS); None: closed.
        loop {
            match c.frame(std::time::Duration::from_millis(300)) {
                Some((0, _, 1, p)) => assert!(p.is_empty(), "DATA beyond a zero window"),
                Some(_) => continue,
                None => break,
            }
        }
        use std::io::Write;
        if c.s.write_all(&[]).is_err() || c.s.peek(&mut [0u8; 1]).is_ok_and(|n| n == 0) {
            closed = true;
            break;
        }
    }
    assert!(closed, "still open after {:?}", start.elapsed());
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"GET /big.bin HTTP/2.0\"") && text.contains("send-timeout"),
        "{text}"
    );
}

/// A client that asks for a large file on streams whose window is 0 and then closes its
/// side (it exits) is closed at once: no WINDOW_UPDATE can come any more (issue 43:
/// 3,000 such connections held 218 MB in CLOSE-WAIT until the 60 s send timeout). The
/// answers are logged as cut by the client.
fn a_client_gone_with_its_windows_shut_is_closed_at_once(case: &str) {
    let root = docroot();
    put(root.path(), "big.bin", &pattern(4 << 20, 9));
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(
        root.path(),
        certs.path(),
        case,
        &log,
        &["--send-timeout", "60"],
    );
    let mut c = Raw::open(server.addr, &[(4, 0)]);
    for i in 0..8 {
        c.get(2 * i + 1, "/big.bin");
    }
    // The heads come (no DATA: the windows are shut); then the client goes.
    let mut heads = 0;
    while heads < 8 {
        match c.frame(std::time::Duration::from_secs(5)) {
            Some((1, _, _, _)) => heads += 1,
            Some((0, _, _, p)) => assert!(p.is_empty(), "DATA beyond a zero window"),
            Some(_) => {}
            None => panic!("closed before the heads"),
        }
    }
    c.s.shutdown(std::net::Shutdown::Write).unwrap();
    // Closed well before the send timeout: read until the end (5 s at most).
    loop {
        match c.frame(std::time::Duration::from_secs(5)) {
            Some((0, _, _, p)) => assert!(p.is_empty(), "DATA beyond a zero window"),
            Some(_) => {}
            None => break,
        }
    }
    c.s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let closed = matches!(c.s.peek(&mut b), Ok(0))
        || matches!(c.s.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset);
    assert!(
        closed,
        "still open with its answers stalled after the client left"
    );
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("\"GET /big.bin HTTP/2.0\""))
            .count(),
        8,
        "{text}"
    );
}

/// A stream fed a 1-byte WINDOW_UPDATE at a time makes progress, so the send timeout
/// alone never ends it (issue 43: it stayed open indefinitely); the minimum send rate
/// does, within its window, and logs why.
fn a_stream_fed_a_byte_of_window_at_a_time_is_ended_by_the_minimum_rate(case: &str) {
    let root = docroot();
    put(root.path(), "big.bin", &pattern(1 << 20, 4));
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(
        root.path(),
        certs.path(),
        case,
        &log,
        &["--send-timeout", "2", "--min-send-rate", "1K"],
    );
    let mut c = Raw::open(server.addr, &[(4, 0)]);
    c.get(1, "/big.bin");
    let start = std::time::Instant::now();
    let mut data = 0usize;
    let mut closed = false;
    // 15 s at most: the window is 2 s.
    while start.elapsed() < std::time::Duration::from_secs(15) {
        // A write to a connection the server has just closed fails: closed, too.
        let sent = c
            .try_send(8, 0, 1, &1u32.to_be_bytes())
            .and_then(|()| c.try_send(8, 0, 0, &1u32.to_be_bytes()));
        if sent.is_err() {
            closed = true;
            break;
        }
        match c.frame(std::time::Duration::from_millis(200)) {
            Some((0, _, 1, p)) => data += p.len(),
            Some(_) => {}
            None => {
                c.s.set_nonblocking(true).unwrap();
                let mut b = [0u8; 1];
                if matches!(c.s.peek(&mut b), Ok(0)) {
                    closed = true;
                    break;
                }
                c.s.set_nonblocking(false).unwrap();
            }
        }
    }
    assert!(
        closed,
        "still open after {:?}, {data} bytes taken",
        start.elapsed()
    );
    assert!(data > 0, "the trickle made progress");
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("\"GET /big.bin HTTP/2.0\"") && text.contains("min-send-rate"),
        "{text}"
    );
}

/// SIGTERM: GOAWAY names the streams taken, and they are answered whole before the
/// connection closes.
/// Rules: docs/http.md T6.
#[test]
fn a_stop_sends_goaway_and_finishes_the_streams_taken() {
    let root = docroot();
    put(root.path(), "big.bin", &pattern(1 << 20, 5));
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(root.path(), certs.path(), "splice", &log, &[]);
    // The default window (65,535): the answer waits for the client's WINDOW_UPDATEs.
    let mut c = Raw::open(server.addr, &[]);
    c.get(1, "/big.bin");
    let mut body = 0usize;
    let wait = std::time::Duration::from_secs(5);
    while body < 65_535 {
        let (kind, _, _, p) = c.frame(wait).expect("the first window's DATA");
        if kind == 0 {
            body += p.len();
        }
    }
    server.sigterm();
    // The rest of the window, once the stop has begun.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let open = (1u32 << 20).to_be_bytes();
    c.send(8, 0, 0, &open);
    c.send(8, 0, 1, &open);
    let mut goaway = None;
    let mut ended = false;
    while let Some((kind, flags, stream, p)) = c.frame(wait) {
        match kind {
            7 => goaway = Some(u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
            0 if stream == 1 => {
                body += p.len();
                ended |= flags & 1 != 0;
            }
            _ => {}
        }
    }
    assert_eq!(goaway, Some(1), "GOAWAY names stream 1");
    assert!(ended, "the stream ended");
    assert_eq!(body, 1 << 20);
}

/// A stop's shutdown delay: an HTTP/2 connection gets GOAWAY within a tick of SIGTERM,
/// its stream answered, while the listener still takes new connections (whose streams
/// are answered, then told GOAWAY as well).
/// Rules: docs/http.md E6, T6.
#[test]
fn a_stops_delay_sends_goaway_at_once_and_keeps_serving() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(
        root.path(),
        certs.path(),
        "splice",
        &log,
        &["--shutdown-delay", "3", "--health-path", "/healthz"],
    );
    let wait = std::time::Duration::from_secs(5);
    let mut c = Raw::open(server.addr, &[]);
    c.get(1, "/f.txt");
    let answered = |c: &mut Raw, id: u32| loop {
        match c.frame(wait) {
            Some((0, flags, s, _)) if s == id && flags & 1 != 0 => return,
            Some(_) => continue,
            None => panic!("stream {id} not answered"),
        }
    };
    answered(&mut c, 1);
    let t = std::time::Instant::now();
    server.sigterm();
    let goaway = loop {
        match c.frame(wait) {
            Some((7, _, _, p)) => break u32::from_be_bytes([p[0], p[1], p[2], p[3]]),
            Some(_) => continue,
            None => panic!("no GOAWAY"),
        }
    };
    assert_eq!(goaway, 1, "GOAWAY names stream 1");
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        t.elapsed()
    );
    // A new connection in the delay is served, then told GOAWAY too.
    let mut d = Raw::open(server.addr, &[]);
    d.get(1, "/f.txt");
    answered(&mut d, 1);
    let t = std::time::Instant::now();
    loop {
        match d.frame(wait) {
            Some((7, _, _, p)) => {
                assert_eq!(u32::from_be_bytes([p[0], p[1], p[2], p[3]]), 1);
                break;
            }
            Some(_) => continue,
            None => panic!("no GOAWAY on the connection opened in the delay"),
        }
    }
    assert!(
        t.elapsed() < std::time::Duration::from_secs(1),
        "{:?}",
        t.elapsed()
    );
    drop(server);
}

/// A browser: headless Chromium loads a page of 40 images over HTTPS, every request
/// over HTTP/2, and every connection it opened speaks it. (Chromium opens a second
/// connection beside the first; which requests went on which, the access log cannot
/// say yet.)
/// Rules: docs/http.md T7, T9.
#[test]
fn a_browser_loads_a_page_and_its_forty_assets_over_one_h2_connection() {
    let root = docroot();
    linerate_testkit::forty_asset_page(root.path());
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(
        root.path(),
        certs.path(),
        "sendfile",
        &log,
        &["--status-path", "/.status"],
    );
    let tls = server.tls_addr();
    let rules = format!("--host-resolver-rules=MAP localhost {}", tls.ip());
    let url = format!("https://localhost:{}/", tls.port());
    let args = ["--ignore-certificate-errors", &rules];
    if !linerate_testkit::chromium_loads_forty_asset_page(&args, &url) {
        return;
    }
    // What the server counted of its HTTPS connections, before the log is read.
    let (_, _, status) = curl(&["--http1.1"], &format!("http://{}/.status", server.addr));
    let status: serde_json::Value = serde_json::from_slice(&status).unwrap();
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let page_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"GET /a/") || l.contains("\"GET / "))
        .collect();
    assert_eq!(page_lines.len(), 41, "{text}");
    assert!(
        page_lines.iter().all(|l| l.contains(" HTTP/2.0\" 200 ")),
        "{text}"
    );
    let handshakes = status["tls"]["handshakes"].as_u64().unwrap();
    assert!((1..=2).contains(&handshakes), "{status}");
    assert_eq!(status["http2"]["connections"], handshakes, "{status}");
    assert_eq!(status["http2"]["streams"], 41, "{status}");
}

/// A large download does not hold back small answers asked for on the same connection
/// while it goes: they all end within a quarter of its DATA (what the sockets' buffers
/// already hold of it, up to several MiB, and a few turns), not after its 64 MiB.
/// Rules: docs/http.md T11.
#[test]
fn small_answers_are_not_held_back_by_a_large_download() {
    let root = docroot();
    put(root.path(), "big.bin", &pattern(64 << 20, 9));
    // Three frames each: framed in turns with the download, not sent with their heads.
    for i in 0..20 {
        put(root.path(), &format!("s{i}.txt"), &pattern(40 << 10, i));
    }
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve(root.path(), certs.path(), "splice", &log, &[]);
    // Windows as large as there are: only the scheduler decides the order.
    let mut c = Raw::open(server.addr, &[(4, (1 << 31) - 1)]);
    c.send(8, 0, 0, &((1u32 << 31) - 1 - 65_535).to_be_bytes());
    c.get(1, "/big.bin");
    let wait = std::time::Duration::from_secs(10);
    let mut big = 0usize;
    while big < 1 << 20 {
        if let Some((0, _, 1, p)) = c.frame(wait) {
            big += p.len();
        }
    }
    let asked_at = big;
    for i in 0..20u32 {
        c.get(3 + 2 * i, &format!("/s{i}.txt"));
    }
    let mut small_done = 0;
    let mut big_ended = false;
    while small_done < 20 {
        let (kind, flags, stream, p) = c.frame(wait).expect("frames");
        if kind == 0 && stream == 1 {
            big += p.len();
            big_ended |= flags & 1 != 0;
        } else if kind == 0 && flags & 1 != 0 {
            small_done += 1;
        }
    }
    assert!(!big_ended, "the small answers waited for the large one");
    let behind = big - asked_at;
    assert!(
        behind < 16 << 20,
        "{behind} bytes of the download went before the 20 small answers"
    );
}

/// A flood of PINGs ends its connection with GOAWAY ENHANCE_YOUR_CALM, counted; the
/// server goes on serving the others.
/// Rules: docs/http.md T5.
#[test]
fn a_ping_flood_ends_its_connection_and_is_counted() {
    let (server, _, _dirs) = serve_hello(&["--status-path", "/.status"]);
    let mut c = Raw::open(server.addr, &[]);
    let mut pings = Vec::new();
    for _ in 0..1500 {
        pings.extend_from_slice(&[0, 0, 8, 6, 0, 0, 0, 0, 0]);
        pings.extend_from_slice(b"12345678");
    }
    c.send_raw(&pings);
    let mut code = None;
    while let Some((kind, _, _, p)) = c.frame(std::time::Duration::from_secs(5)) {
        if kind == 7 {
            code = Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
        }
    }
    assert_eq!(code, Some(0xb), "GOAWAY ENHANCE_YOUR_CALM");
    let (s, v, b) = curl(
        &["--http2-prior-knowledge"],
        &format!("http://{}/a.txt", server.addr),
    );
    assert_eq!((s, v.as_str(), &b[..]), (200, "2", &b"hello"[..]));
    let (_, _, status) = curl(&[], &format!("http://{}/.status", server.addr));
    let status: serde_json::Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(
        status["http2"]["connection_errors"]["enhance_your_calm"], 1,
        "{status}"
    );
}
