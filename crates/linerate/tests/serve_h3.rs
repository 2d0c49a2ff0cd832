//! HTTP/3 through the real binary, fetched by a client nobody here wrote: ngtcp2's
//! (Debian's `ngtcp2-client`, `gtlsclient`, which scripts/test installs). Its bodies
//! are compared with the files and with curl's answers over HTTPS from the same server,
//! under every transmit strategy and driver (HTTP/3's bodies are read into memory
//! whatever the strategy: the cases check that nothing of the TCP path leaks into it).

use std::path::Path;
use std::process::Command;

use linerate_testkit::{
    assert_bytes_eq, docroot, installed, log_lines, pattern, per_strategy, put, variant_args,
    Linerate, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

#[path = "serve_h3/floods.rs"]
mod floods;
#[path = "serve_h3/graceful.rs"]
mod graceful;
#[path = "serve_h3/interop.rs"]
mod interop;
#[path = "serve_h3/protocol.rs"]
mod protocol;

per_strategy!(
    // Rules: docs/http.md Q1, Q2, Q7.
    answers_over_h3_are_the_files_and_the_answers_over_https,
    // Rules: docs/http.md Q2.
    every_answer_over_h3_is_the_answer_over_http11,
);

/// ngtcp2's client, or None (and under CI, a failure: scripts/test installs it).
fn gtlsclient() -> Option<&'static str> {
    if installed("gtlsclient") {
        return Some("gtlsclient");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "gtlsclient is missing under CI: scripts/test installs ngtcp2-client"
    );
    eprintln!("skipped: no gtlsclient (apt-get install ngtcp2-client)");
    None
}

/// Fetches `paths` from the server's HTTP/3 port on one connection into `dir`, each
/// saved under its last path segment.
fn fetch_h3(client: &str, server: &Server, paths: &[&str], dir: &Path) {
    ngtcp2(client, server, paths, dir, &["--quiet"]);
}

/// ngtcp2's client against the server's HTTP/3 port for `paths` (one connection, each
/// body saved in `dir` under its last path segment), with `extra` flags; what it said
/// of the connection on standard error (its debug account unless `--quiet` is among
/// `extra`; the frames' and bodies' dumps left out).
fn ngtcp2(client: &str, server: &Server, paths: &[&str], dir: &Path, extra: &[&str]) -> String {
    let port = server.tls_addr().port().to_string();
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("https://localhost:{port}{p}"))
        .collect();
    let out = Command::new(client)
        .args(["--exit-on-all-streams-close", "--timeout=10s"])
        .args(["--no-quic-dump", "--no-http-dump"])
        .arg(format!("--download={}", dir.display()))
        .args(extra)
        .args(["127.0.0.1", &port])
        .args(&urls)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "gtlsclient: {}\n{said}", out.status);
    said
}

/// curl's body and `Alt-Svc` for `path` over HTTPS (HTTP/1.1).
fn curl_https(server: &Server, path: &str) -> (Vec<u8>, Option<String>) {
    let url = format!("https://127.0.0.1:{}{path}", server.tls_addr().port());
    let out = Command::new("curl")
        .args(["-sk", "--http1.1", "-D", "/dev/stderr", &url])
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stderr).to_ascii_lowercase();
    let alt = head
        .lines()
        .find_map(|l| l.strip_prefix("alt-svc: ").map(|v| v.trim().to_string()));
    (out.stdout, alt)
}

fn answers_over_h3_are_the_files_and_the_answers_over_https(case: &str) {
    let Some(client) = gtlsclient() else {
        return;
    };
    let root = docroot();
    let p = root.path();
    let files = [
        ("one.bin", pattern(1024, 1)),
        ("hundred.bin", pattern(100 << 10, 2)),
        ("big.bin", pattern(3 << 20, 3)),
        ("page.html", b"<p>hello</p>\n".repeat(200)),
        ("empty.txt", Vec::new()),
    ];
    for (name, data) in &files {
        put(p, name, data);
    }
    let certs = docroot();
    let log = certs.path().join("access.log");
    let server = serve_two_workers(p, certs.path(), &log, &variant_args(case));
    let got = docroot();
    let mut paths: Vec<String> = files.iter().map(|(n, _)| format!("/{n}")).collect();
    paths.push("/missing.txt".into());
    let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
    fetch_h3(client, &server, &paths, got.path());
    for (name, data) in &files {
        let body = std::fs::read(got.path().join(name)).unwrap();
        assert_bytes_eq(&body, data, &format!("{name} over HTTP/3, {case}"));
        let (https, _) = curl_https(&server, &format!("/{name}"));
        assert_bytes_eq(&body, &https, &format!("{name}: HTTP/3 and HTTPS, {case}"));
    }
    // The 404 page is the one HTTPS gets.
    let missing = std::fs::read(got.path().join("missing.txt")).unwrap();
    let (https, alt) = curl_https(&server, "/missing.txt");
    assert_bytes_eq(&missing, &https, &format!("the 404 page, {case}"));
    // HTTPS answers say where HTTP/3 is.
    let port = server.tls_addr().port();
    assert_eq!(alt, Some(format!("h3=\":{port}\"; ma=86400")), "{case}");
    drop(server);
    let lines = log_lines(&log);
    let h3: Vec<&String> = lines.iter().filter(|l| l.contains("HTTP/3.0\"")).collect();
    assert_eq!(
        h3.len(),
        paths.len(),
        "one line an HTTP/3 answer: {lines:#?}"
    );
    assert!(
        h3.iter()
            .any(|l| l.contains("\"GET /missing.txt HTTP/3.0\" 404")),
        "{h3:#?}"
    );
    assert!(
        h3.iter()
            .any(|l| l.contains("\"GET /big.bin HTTP/3.0\" 200 3145728")),
        "{h3:#?}"
    );
}

/// HTTP/3 is on by default: an HTTPS listener started without `--http3` says
/// `Alt-Svc: h3=":PORT"` over HTTPS, holds the same UDP port, and answers a QUIC client
/// there with the file. Rules: docs/http.md Q1.
#[test]
fn http3_is_on_by_default_and_said_by_alt_svc() {
    let Some(client) = gtlsclient() else {
        return;
    };
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &["--workers", "1"]);
    let port = server.tls_addr().port();
    let (body, alt) = curl_https(&server, "/a.txt");
    assert_eq!(body, b"hello");
    assert_eq!(alt, Some(format!("h3=\":{port}\"; ma=86400")));
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
    assert!(udp.is_err(), "the UDP port is the server's: {udp:?}");
    let out = docroot();
    fetch_h3(client, &server, &["/a.txt"], out.path());
    assert_eq!(std::fs::read(out.path().join("a.txt")).unwrap(), b"hello");
}

/// With `--http3 off` no UDP socket is bound and HTTPS says nothing of HTTP/3.
#[test]
fn http3_off_binds_no_udp_and_says_nothing() {
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let args = ["--workers", "1", "--http3", "off"];
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let (body, alt) = curl_https(&server, "/a.txt");
    assert_eq!(body, b"hello");
    assert_eq!(alt, None);
    let port = server.tls_addr().port();
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
    assert!(udp.is_ok(), "the UDP port is free: {udp:?}");
}

/// Two workers with HTTP/3 and the access log at `log`, and `extra` flags.
fn serve_two_workers(root: &Path, certs: &Path, log: &Path, extra: &[&str]) -> Server {
    let args = [
        &[
            "--workers",
            "2",
            "--http3",
            "on",
            "--access-log",
            log.to_str().unwrap(),
        ][..],
        extra,
    ]
    .concat();
    LINERATE.start_tls(root, certs, &args).0
}

/// One worker with HTTP/3, a status page at `/.status` and the access log at `log`.
fn serve_counted(root: &Path, certs: &Path, log: &Path) -> (Server, std::path::PathBuf) {
    let args = [
        "--workers",
        "1",
        "--http3",
        "on",
        "--status-path",
        "/.status",
        "--access-log",
        log.to_str().unwrap(),
    ];
    LINERATE.start_tls(root, certs, &args)
}

/// The flags of an HTTPS listener at `addr` with `cert` and `key`, and HTTP/3 on.
fn h3_on(addr: &str, cert: &Path, key: &Path) -> Vec<String> {
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    [
        "--tls-listen",
        addr,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--http3",
        "on",
    ]
    .map(String::from)
    .to_vec()
}

/// The server's status page.
fn status(server: &Server) -> serde_json::Value {
    status_at(server, "/.status")
}

/// The server's status page at `path`.
fn status_at(server: &Server, path: &str) -> serde_json::Value {
    serde_json::from_slice(&page(server, path)).unwrap()
}

/// The body of `path` on the server's plain HTTP address.
fn page(server: &Server, path: &str) -> Vec<u8> {
    let out = Command::new("curl")
        .args(["-s", &format!("http://{}{path}", server.addr)])
        .output()
        .unwrap();
    out.stdout
}

/// The base64 SHA-256 of `cert`'s public key, as Chromium's
/// `--ignore-certificate-errors-spki-list` takes it (openssl's words for it).
fn spki_hash(cert: &Path) -> String {
    let script = format!(
        "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
         | openssl dgst -sha256 -binary | base64",
        cert.display()
    );
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Headless Chromium forced onto QUIC for the server's origin loads a page and its 40
/// images: 41 requests, every one over HTTP/3, on one QUIC connection (the status page
/// counts the connections and streams). Rules: docs/http.md Q1, Q2.
#[test]
fn a_browser_loads_a_page_and_its_forty_assets_over_one_h3_connection() {
    let root = docroot();
    linerate_testkit::forty_asset_page(root.path());
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, cert) = serve_counted(root.path(), certs.path(), &log);
    let tls = server.tls_addr();
    let origin = format!("localhost:{}", tls.port());
    let args = [
        format!("--origin-to-force-quic-on={origin}"),
        format!("--ignore-certificate-errors-spki-list={}", spki_hash(&cert)),
        format!("--host-resolver-rules=MAP localhost {}", tls.ip()),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if !linerate_testkit::chromium_loads_forty_asset_page(&args, &format!("https://{origin}/")) {
        return;
    }
    let status = status(&server);
    drop(server);
    let lines = log_lines(&log);
    let page_lines: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"GET /a/") || l.contains("\"GET / "))
        .collect();
    assert_eq!(page_lines.len(), 41, "{lines:#?}");
    assert!(
        page_lines.iter().all(|l| l.contains(" HTTP/3.0\" 200 ")),
        "{lines:#?}"
    );
    assert_eq!(status["http3"]["connections"], 1, "{status}");
    assert_eq!(status["http3"]["streams"], 41, "{status}");
    assert_eq!(status["http3"]["responses"], 41, "{status}");
}

/// A client that takes the ACK frequency extension (quinn-proto's, in `bench http
/// --h3`) is asked to acknowledge less often: each of its connections is sent an
/// ACK_FREQUENCY frame; each answer whole (lengths checked), under both drivers.
/// Rules: docs/http.md Q7.
#[test]
fn quinn_clients_are_asked_for_fewer_acknowledgements() {
    for driver in ["auto", "epoll"] {
        let root = docroot();
        put(root.path(), "big.bin", &pattern(4 << 20, 7));
        let certs = docroot();
        let log = certs.path().join("access.log");
        let args = [
            "--workers",
            "1",
            "--http3",
            "on",
            "--driver",
            driver,
            "--status-path",
            "/.status",
            "--access-log",
            log.to_str().unwrap(),
        ];
        let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
        let url = format!("https://{}/big.bin", server.tls_addr());
        let (code, out, err) = LINERATE.run(&[
            "bench",
            "http",
            &url,
            "--h3",
            "--cacert",
            cert.to_str().unwrap(),
            "-c",
            "1",
            "-n",
            "6",
            "--json",
        ]);
        assert_eq!(code, 0, "{driver}: {err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(r["statuses"]["200"], 6, "{driver}: {r}");
        assert!(
            r["ack_frequency_frames"].as_u64().unwrap() >= 1,
            "{driver}: {r}"
        );
    }
}

/// A client whose connection window (256 KiB) is smaller than its stream window
/// (4 MiB) has the server's writes cut short by the connection's MAX_DATA, not the
/// stream's: the answer goes on each time the client opens the window, to the last
/// byte, under both drivers (quic-go's first windows did this to one fetch in ten,
/// which then waited forever). Rules: docs/http.md Q2.
#[test]
fn an_answer_cut_short_by_the_connection_window_goes_on_when_it_opens() {
    use linerate_testkit::quic::{self, get, Quic};
    let root = docroot();
    let big = pattern(1 << 20, 5);
    put(root.path(), "big.bin", &big);
    for driver in ["auto", "epoll"] {
        let certs = docroot();
        let args = ["--workers", "1", "--http3", "on", "--driver", driver];
        let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
        let mut q = Quic::connect_windowed(server.tls_addr(), &cert, 4 << 20, 256 << 10);
        let id = q.open(quinn_proto::Dir::Bi, &get("/big.bin"), true);
        q.drive_until(std::time::Duration::from_secs(20), |q| q.stream(id).fin);
        let data = q.stream(id).data;
        assert_eq!(quic::status_of(&data), Some(200), "{driver}");
        let body = quic::body_of(&data);
        assert_bytes_eq(&body, &big, driver);
    }
}

/// Two workers, and clients that move to a new port again and again (as behind a NAT
/// that rebinds): the kernel's hash of the new addresses would pick either worker's
/// socket, but every datagram reaches the worker that owns its connection, by the
/// connection ID (none handed between workers, counted), and each connection goes on,
/// under both drivers. Rules: docs/http.md Q5.
#[test]
fn every_datagram_reaches_the_worker_that_owns_its_connection() {
    use linerate_testkit::quic::{self, get, Quic};
    let root = docroot();
    let body = pattern(64 << 10, 7);
    put(root.path(), "m.bin", &body);
    for driver in ["auto", "epoll"] {
        let certs = docroot();
        let args = [
            "--workers",
            "2",
            "--http3",
            "on",
            "--driver",
            driver,
            "--status-path",
            "/.s",
        ];
        let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
        let mut clients: Vec<Quic> = (0..4)
            .map(|_| Quic::connect(server.tls_addr(), &cert))
            .collect();
        for round in 0..6 {
            for (c, q) in clients.iter_mut().enumerate() {
                q.move_to_new_port();
                let id = q.open(quinn_proto::Dir::Bi, &get("/m.bin"), true);
                q.drive_until(std::time::Duration::from_secs(10), |q| q.stream(id).fin);
                let data = q.stream(id).data;
                let what = format!("{driver}: client {c}, move {round}");
                assert_eq!(quic::status_of(&data), Some(200), "{what}");
                let got = quic::body_of(&data);
                assert_bytes_eq(&got, &body, &what);
            }
        }
        let s = status_at(&server, "/.s");
        assert_eq!(s["http3"]["connections"], 4, "{driver}: {s}");
        assert_eq!(s["http3"]["misrouted_datagrams"], 0, "{driver}: {s}");
    }
}

/// A binary upgrade (SIGUSR2): the new process binds UDP sockets of its own into each
/// group after the old one's, told where they begin, and routes to them: its IDs name
/// its own sockets (had it named them from index 0, they would be the old process's,
/// and its handshakes would never end) and new connections come to it, while every
/// datagram of a connection of the old process's still reaches that one (the kernel's
/// hash over the grown group would hand some to the new process). Rules:
/// docs/http.md Q4.
#[test]
fn after_a_binary_upgrade_both_processes_answer_over_http3() {
    use linerate_testkit::quic::{self, get, Quic};
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let args = ["--workers", "2", "--http3", "on"];
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let fetch = |q: &mut Quic, what: &str| {
        let id = q.open(quinn_proto::Dir::Bi, &get("/a.txt"), true);
        q.drive_until(std::time::Duration::from_secs(10), |q| q.stream(id).fin);
        assert_eq!(quic::status_of(&q.stream(id).data), Some(200), "{what}");
    };
    let mut before = Quic::connect(server.tls_addr(), &cert);
    fetch(&mut before, "before the upgrade");
    server.signal("USR2");
    let text = server.wait_stderr("started the binary again as PID ");
    let pid: u32 = text
        .split("as PID ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    // The new process says where it listens as the first did.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.stderr_text().matches(" at https://").count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            server.stderr_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for i in 0..8 {
        let mut q = Quic::connect(server.tls_addr(), &cert);
        fetch(&mut q, &format!("connection {i} after the upgrade"));
        q.close();
    }
    fetch(
        &mut before,
        "the old process's connection, after the upgrade",
    );
    before.close();
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
}

/// A stop (SIGTERM) while a large download is under way over HTTP/3: the answer is
/// finished byte for byte, and the server then ends cleanly. Rules: docs/http.md Q4.
#[test]
fn a_stop_finishes_the_answers_under_way() {
    let Some(client) = gtlsclient() else {
        return;
    };
    let root = docroot();
    let big = pattern(24 << 20, 9);
    put(root.path(), "big.bin", &big);
    let certs = docroot();
    let args = ["--workers", "1", "--http3", "on", "--driver", "epoll"];
    let (mut server, _) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let got = docroot();
    let port = server.tls_addr().port().to_string();
    let mut fetch = Command::new(client)
        .args(["--quiet", "--exit-on-all-streams-close", "--timeout=20s"])
        .arg(format!("--download={}", got.path().display()))
        .args([
            "127.0.0.1",
            &port,
            &format!("https://localhost:{port}/big.bin"),
        ])
        .spawn()
        .unwrap();
    // The download under way: its first bytes saved (a debug build sends 24 MiB in
    // well over the time that takes).
    let saved = got.path().join("big.bin");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::metadata(&saved).map_or(0, |m| m.len()) == 0 {
        assert!(
            std::time::Instant::now() < until,
            "the download never began"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    server.sigterm();
    assert!(fetch.wait().unwrap().success(), "the client finished");
    let body = std::fs::read(got.path().join("big.bin")).unwrap();
    assert_bytes_eq(&body, &big, "the answer under way at the stop");
    let status = server.wait_exit(std::time::Duration::from_secs(20));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

/// A hundred requests at once on one QUIC connection (ngtcp2's `-n 100`): every one
/// answered, one connection, a hundred streams; and HEAD answered with the head alone.
/// Rules: docs/http.md Q2.
#[test]
fn a_hundred_streams_on_one_connection_and_head() {
    let Some(client) = gtlsclient() else {
        return;
    };
    let root = docroot();
    let data = pattern(20 << 10, 4);
    put(root.path(), "one.bin", &data);
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, _) = serve_counted(root.path(), certs.path(), &log);
    let port = server.tls_addr().port().to_string();
    let url = format!("https://localhost:{port}/one.bin");
    let got = docroot();
    let run = |extra: &[&str]| {
        let out = Command::new(client)
            .args(["--quiet", "--exit-on-all-streams-close", "--timeout=10s"])
            .arg(format!("--download={}", got.path().display()))
            .args(extra)
            .args(["127.0.0.1", &port, &url])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    // A hundred downloads of one file (ngtcp2 writes each to the same name, so the
    // bodies are checked by the log's lengths below, not the file).
    run(&["-n", "100"]);
    let status = status(&server);
    assert_eq!(status["http3"]["connections"], 1, "{status}");
    assert_eq!(status["http3"]["streams"], 100, "{status}");
    // Its UDP counted: the 2 MB of answers in datagrams of at most 1,500 bytes, sent
    // in batches of one or more (GSO); the client's datagrams received, each receive
    // one or more (GRO).
    let n = |k: &str| status["http3"][k].as_u64().unwrap_or(0);
    let (sends, sent) = (n("udp_sends"), n("datagrams_sent"));
    assert!(sends > 0 && sent >= sends, "{status}");
    assert!(sent >= (100 * data.len() / 1500) as u64, "{status}");
    let (receives, received) = (n("udp_receives"), n("datagrams_received"));
    assert!(receives > 0 && received >= receives, "{status}");
    assert!(n("bytes_received") >= received, "{status}");
    let _ = std::fs::remove_file(got.path().join("one.bin"));
    run(&["--http-method=HEAD"]);
    let head = std::fs::read(got.path().join("one.bin")).unwrap_or_default();
    assert!(head.is_empty(), "HEAD has no body: {} bytes", head.len());
    drop(server);
    let lines = log_lines(&log);
    let gets = lines
        .iter()
        .filter(|l| l.contains("\"GET /one.bin HTTP/3.0\" 200 20480"))
        .count();
    assert_eq!(gets, 100, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"HEAD /one.bin HTTP/3.0\" 200")),
        "{lines:#?}"
    );
}

/// curl-cffi (libcurl with HTTP/3, from PyPI; scripts/test installs it): for each
/// request of the JSON on standard input (`{"base": URL, "requests": [[METHOD, PATH,
/// {HEADERS}], ...]}`), the answer over HTTP/1.1 and over HTTP/3 to the same server:
/// the HTTP version, status, a few header fields, the body's length and SHA-256 (a
/// multipart body's boundary, random per answer, written `BOUNDARY`). No coding is
/// undone: `Accept-Encoding` goes as the request says.
const CURL_CFFI: &str = r#"
import hashlib, json, sys
from curl_cffi import requests, CurlHttpVersion
job = json.load(sys.stdin)
names = ["content-type", "content-length", "content-range", "etag", "last-modified",
         "content-encoding", "vary", "location", "accept-ranges", "cache-control"]
out = []
s = requests.Session()
for method, path, headers in job["requests"]:
    one = {}
    for key, version in [("h1", CurlHttpVersion.V1_1), ("h3", CurlHttpVersion.V3ONLY)]:
        r = s.request(method, job["base"] + path, headers=headers, verify=False,
                      http_version=version, accept_encoding=None, allow_redirects=False)
        fields = {n: r.headers.get(n) for n in names}
        body = r.content
        ct = fields["content-type"] or ""
        if ct.startswith("multipart/byteranges; boundary="):
            b = ct.split("=", 1)[1]
            body = body.replace(b.encode(), b"BOUNDARY")
            fields["content-type"] = ct.replace(b, "BOUNDARY")
        one[key] = {"version": int(r.http_version), "status": r.status_code,
                    "fields": fields, "len": len(body),
                    "sha": hashlib.sha256(body).hexdigest()}
    out.append(one)
print(json.dumps(out))
"#;

/// Each of `requests` (`[METHOD, PATH, {HEADERS}]`) over HTTP/1.1 and over HTTP/3 by
/// curl-cffi ([`CURL_CFFI`]): an object a request, `h1` and `h3` its answers.
fn over_both(server: &Server, requests: &serde_json::Value) -> Vec<serde_json::Value> {
    let job = serde_json::json!({
        "base": format!("https://127.0.0.1:{}", server.tls_addr().port()),
        "requests": requests,
    });
    serde_json::from_value(python_json(CURL_CFFI, &job)).unwrap()
}

/// `python3 -c SCRIPT` given `job` on standard input: the JSON it prints (it must
/// succeed).
fn python_json(script: &str, job: &serde_json::Value) -> serde_json::Value {
    let out = piped(
        Command::new("python3").args(["-c", script]),
        job.to_string().as_bytes(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python3: {err}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `cmd` run with `input` on its standard input: its output.
fn piped(cmd: &mut Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Whether python3 can import `module` (scripts/test installs it from PyPI); under CI,
/// a failure if not.
fn python_module(module: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "{module} is missing under CI: scripts/test installs it"
        );
        eprintln!("skipped: no {module} (python3 -m pip install it)");
    }
    ok
}

fn every_answer_over_h3_is_the_answer_over_http11(case: &str) {
    if !python_module("curl_cffi") {
        return;
    }
    let root = docroot();
    let p = root.path();
    put(p, "one.bin", &pattern(1024, 1));
    put(p, "hundred.bin", &pattern(100 << 10, 2));
    put(p, "big.bin", &pattern(3 << 20, 3));
    put(p, "page.html", &b"<p>hello</p>\n".repeat(200));
    put(p, "page.html.gz", b"gzip bytes of the page");
    put(p, "dir/index.html", b"in dir");
    let certs = docroot();
    let args = [
        &["--workers", "1", "--http3", "on", "--precompressed", "gzip"][..],
        &variant_args(case),
    ]
    .concat();
    let (server, _) = LINERATE.start_tls(p, certs.path(), &args);
    let none = serde_json::json!({});
    let requests = serde_json::json!([
        ["GET", "/one.bin", none],
        ["GET", "/big.bin", none],
        ["GET", "/hundred.bin", {"Range": "bytes=0-99,200-299"}],
        ["GET", "/big.bin", {"Range": "bytes=1000000-"}],
        ["GET", "/one.bin", {"Range": "bytes=5000-"}],
        ["GET", "/page.html", {"Accept-Encoding": "gzip"}],
        ["GET", "/page.html", none],
        ["HEAD", "/big.bin", none],
        ["GET", "/one.bin", {"If-None-Match": "*"}],
        ["GET", "/one.bin", {"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"}],
        ["GET", "/dir", none],
        ["GET", "/dir/", none],
        ["GET", "/missing.txt", none],
        ["DELETE", "/one.bin", none],
    ]);
    let answers = over_both(&server, &requests);
    let statuses: Vec<u64> = answers
        .iter()
        .map(|a| a["h1"]["status"].as_u64().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 206, 206, 416, 200, 200, 200, 304, 304, 301, 200, 404, 405],
        "{case}"
    );
    for (a, r) in answers.iter().zip(requests.as_array().unwrap()) {
        assert_eq!(a["h1"]["version"], 2, "HTTP/1.1 first: {r}");
        assert_eq!(a["h3"]["version"], 30, "then HTTP/3: {r}");
        for k in ["status", "fields", "len", "sha"] {
            assert_eq!(a["h1"][k], a["h3"][k], "{k} of {r}, {case}");
        }
    }
}

/// quic-go's example client (scripts/test installs it as `~/go/bin/quic-go-client`),
/// or None (and under CI, a failure).
fn quic_go_client() -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from)?;
    let p = home.join("go/bin/quic-go-client");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "quic-go-client is missing under CI: scripts/test installs it"
    );
    eprintln!("skipped: no quic-go-client");
    None
}

/// quic-go's client fetches two files on one connection over HTTP/3: each answer is
/// HTTP/3.0, 200, of the file's length. Rules: docs/http.md Q2.
#[test]
fn quic_go_fetches_files() {
    let Some(client) = quic_go_client() else {
        return;
    };
    let root = docroot();
    put(root.path(), "one.bin", &pattern(1024, 1));
    put(root.path(), "big.bin", &pattern(3 << 20, 3));
    let certs = docroot();
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &["--http3", "on"]);
    let port = server.tls_addr().port();
    let out = Command::new(client)
        .arg("-insecure")
        .args(["one.bin", "big.bin"].map(|f| format!("https://127.0.0.1:{port}/{f}")))
        .output()
        .unwrap();
    // It logs each answer, and its body, to standard error.
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    for data in [pattern(1024, 1), pattern(3 << 20, 3)] {
        let said = format!("Response Body ({} bytes):\n", data.len());
        let at = out
            .stderr
            .windows(said.len())
            .position(|w| w == said.as_bytes())
            .unwrap_or_else(|| panic!("{said}: {}", &text[..text.len().min(2000)]));
        let start = at + said.len();
        let body = out
            .stderr
            .get(start..start + data.len())
            .unwrap_or_default();
        assert_bytes_eq(body, &data, &said);
    }
    let h3 = text.matches("Proto:\"HTTP/3.0\"").count();
    let ok = text.matches("StatusCode:200").count();
    assert_eq!((h3, ok), (2, 2), "{}", &text[..text.len().min(2000)]);
}

/// `--check` names HTTP/3's UDP address beside HTTPS, and a UDP port someone holds as
/// what a start would trip on. Rules: docs/http.md Q1.
#[test]
fn check_names_the_udp_listener() {
    let (code, out, err, addr) = serve_on_a_held_udp_port(&["--check"]);
    assert_eq!(code, 0, "a port in use is a note: {out}{err}");
    assert!(
        out.contains(&format!("listen {addr}: HTTP/3 (UDP, the same port)")),
        "{out}"
    );
    assert!(
        format!("{out}{err}").contains(&format!("listen {addr} (UDP, HTTP/3): in use now")),
        "{out}{err}"
    );
}

/// Ten reloads (SIGHUP) while clients fetch over HTTP/3 without pause: no request
/// fails and every body is whole (both generations of workers read the same UDP
/// sockets; each datagram reaches the endpoint that owns its connection ID).
/// Rules: docs/http.md Q4.
#[test]
fn ten_reloads_under_http3_load_fail_no_request() {
    let Some(client) = gtlsclient() else {
        return;
    };
    let root = docroot();
    let data = pattern(200 << 10, 6);
    let names: Vec<String> = (0..5).map(|i| format!("mid{i}.bin")).collect();
    for n in &names {
        put(root.path(), n, &data);
    }
    let certs = docroot();
    let log = certs.path().join("access.log");
    let server = serve_two_workers(root.path(), certs.path(), &log, &[]);
    let pid = server.pid().to_string();
    let reloads = std::thread::spawn(move || {
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(300));
            Command::new("kill").args(["-HUP", &pid]).status().unwrap();
        }
    });
    let port = server.tls_addr().port().to_string();
    let urls: Vec<String> = names
        .iter()
        .map(|n| format!("https://localhost:{port}/{n}"))
        .collect();
    let mut fetches = 0;
    while !reloads.is_finished() || fetches < 12 {
        let got = docroot();
        let out = Command::new(client)
            .args(["--quiet", "--exit-on-all-streams-close", "--timeout=30s"])
            .arg(format!("--download={}", got.path().display()))
            .args(["127.0.0.1", &port])
            .args(&urls)
            .output()
            .unwrap();
        assert!(out.status.success(), "fetch {fetches}: {out:?}");
        for n in &names {
            let body = std::fs::read(got.path().join(n)).unwrap();
            assert_bytes_eq(&body, &data, &format!("fetch {fetches}, {n}"));
        }
        fetches += 1;
    }
    reloads.join().unwrap();
    server.wait_stderr("reloaded (generation 10)");
    drop(server);
    let ok = log_lines(&log)
        .iter()
        .filter(|l| l.contains(" HTTP/3.0\" 200 204800"))
        .count();
    assert_eq!(ok, fetches * 5, "every request answered whole, once");
}

/// `--http3-retry always`: every new connection's address is checked with a Retry
/// first; the client echoes the token and is served, and the Retry is counted.
#[test]
fn http3_retry_always_checks_the_address_and_serves() {
    let Some(client) = gtlsclient() else {
        return;
    };
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let args = [
        "--http3",
        "on",
        "--http3-retry",
        "always",
        "--status-path",
        "/.status",
    ];
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let got = docroot();
    fetch_h3(client, &server, &["/a.txt"], got.path());
    assert_eq!(std::fs::read(got.path().join("a.txt")).unwrap(), b"hello");
    let s = status(&server);
    assert_eq!(s["http3"]["retries"], 1, "{s}");
    assert_eq!(s["http3"]["connections"], 1, "{s}");
}

/// `htpasswd -nbB -C 5 alice secret`.
const ALICE: &str = "alice:$2y$05$K96.w96XA89FxJ..xXDe4emC.79jgwH3z0UIzIVIzhKY4W9SZ9uhm\n";

/// A path under HTTP Basic over HTTP/3: the requests wait for their password checks
/// (made off the worker) and are answered as over HTTP/1.1: 401 without or with wrong
/// credentials, 200 with right ones. Rules: docs/http.md Q2.
#[test]
fn htpasswd_answers_over_h3_as_over_http11() {
    if !python_module("curl_cffi") {
        return;
    }
    let root = docroot();
    put(root.path(), "private/a.txt", b"secret stuff\n");
    let certs = docroot();
    let users = certs.path().join("htpasswd");
    std::fs::write(&users, ALICE).unwrap();
    let conf = certs.path().join("linerate.toml");
    let rule = format!(
        "[[rule]]\npath = \"/private/\"\nhtpasswd = \"{}\"\n",
        users.display()
    );
    std::fs::write(&conf, rule).unwrap();
    let args = ["--http3", "on", "--config", conf.to_str().unwrap()];
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let none = serde_json::json!({});
    let requests = serde_json::json!([
        ["GET", "/private/a.txt", none],
        ["GET", "/private/a.txt", {"Authorization": "Basic YWxpY2U6c2VjcmV0"}],
        ["GET", "/private/a.txt", {"Authorization": "Basic YWxpY2U6Z3Vlc3M="}],
    ]);
    let answers = over_both(&server, &requests);
    for (a, want) in answers.iter().zip([401, 200, 401]) {
        assert_eq!(a["h3"]["version"], 30, "{a}");
        assert_eq!(a["h3"]["status"], want, "{a}");
        for k in ["status", "fields", "len", "sha"] {
            assert_eq!(a["h1"][k], a["h3"][k], "{k}: {a}");
        }
    }
}

/// A start whose HTTP/3 UDP port someone holds fails, and says it is the UDP port:
/// held by a plain socket, and by one that shares its port as another server's do
/// (`SO_REUSEADDR` and `SO_REUSEPORT`, which a UDP socket could otherwise join, and
/// take half its datagrams).
#[test]
fn a_held_udp_port_fails_the_start_and_says_udp() {
    let (code, out, err, addr) = serve_on_a_held_udp_port(&[]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains(&addr) && err.contains("UDP (HTTP/3)"), "{err}");
    let (code, out, err, addr) = serve_on_a_udp_port_held_by(&[], shared_udp);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains(&addr) && err.contains("UDP (HTTP/3)"), "{err}");
}

/// A UDP socket on `port` of 127.0.0.1 that lets others share it, as a server's
/// `SO_REUSEPORT` group does (and `SO_REUSEADDR`, which on UDP shares a port too).
fn shared_udp(port: u16) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(s.into())
}

/// `linerate serve` with HTTP/3 on an address whose UDP port a socket of the test
/// holds, and `extra` flags: its exit code, output, error output, and the address.
fn serve_on_a_held_udp_port(extra: &[&str]) -> (i32, String, String, String) {
    serve_on_a_udp_port_held_by(extra, |port| std::net::UdpSocket::bind(("127.0.0.1", port)))
}

/// [`serve_on_a_held_udp_port`] with the UDP socket made by `hold` (given the port).
fn serve_on_a_udp_port_held_by(
    extra: &[&str],
    hold: impl Fn(u16) -> std::io::Result<std::net::UdpSocket>,
) -> (i32, String, String, String) {
    let root = docroot();
    let certs = docroot();
    let (cert, key) = linerate_testkit::tls_files(certs.path(), "server");
    // A port number whose TCP side is free (another test's listener on it would fail
    // the start first) and whose UDP side this test holds.
    let held = loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        if let Ok(udp) = hold(port) {
            break udp;
        }
    };
    let addr = held.local_addr().unwrap().to_string();
    let h3 = h3_on(&addr, &cert, &key);
    let mut args = vec!["serve", root.path().to_str().unwrap()];
    args.extend(h3.iter().map(String::as_str));
    args.extend(extra);
    let (code, out, err) = LINERATE.run(&args);
    (code, out, err, addr)
}

/// niquests fetches files over HTTP/3: every answer HTTP/3, 200, the file's bytes.
/// Rules: docs/http.md Q2.
#[test]
fn niquests_fetches_files() {
    if !python_module("niquests") {
        return;
    }
    let root = docroot();
    let files = [
        ("one.bin", pattern(1024, 1)),
        ("big.bin", pattern(3 << 20, 3)),
    ];
    for (n, d) in &files {
        put(root.path(), n, d);
    }
    let certs = docroot();
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &["--http3", "on"]);
    let gets: Vec<serde_json::Value> = files
        .iter()
        .map(|(n, _)| serde_json::json!(["GET", format!("/{n}"), {}]))
        .collect();
    let job = serde_json::json!({
        "host": "127.0.0.1",
        "port": server.tls_addr().port(),
        "requests": gets,
    });
    let got: Vec<serde_json::Value> =
        serde_json::from_value(python_json(NIQUESTS_REQUESTS, &job)).unwrap();
    assert_eq!(got.len(), files.len(), "{got:?}");
    for ((_, data), g) in files.iter().zip(&got) {
        assert_eq!(
            (&g["version"], &g["status"]),
            (&30.into(), &200.into()),
            "{g}"
        );
        assert_eq!(g["sha"].as_str(), Some(sha256_hex(data).as_str()), "{g}");
    }
}

/// The SHA-256 of `data`, in hex (by `sha256sum`).
fn sha256_hex(data: &[u8]) -> String {
    let out = piped(&mut Command::new("sha256sum"), data);
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().next().unwrap().to_string()
}

/// niquests (Python, on qh3: aioquic's descendant; scripts/test installs it), told
/// that the server speaks HTTP/3, for each request of the JSON on standard input (`{"host",
/// "port", "requests": [[METHOD, PATH, {HEADERS}], ...]}`, a header value `ETAG`
/// standing for the first answer's ETag): the HTTP version, status, a few fields, and
/// the body as it came (no coding undone): its length and SHA-256.
const NIQUESTS_REQUESTS: &str = r#"
import hashlib, json, sys, warnings
warnings.simplefilter("ignore")
import niquests
job = json.load(sys.stdin)
s = niquests.Session()
s.quic_cache_layer.add_domain(job["host"], job["port"])
base = "https://%s:%d" % (job["host"], job["port"])
out, etag = [], None
for method, path, headers in job["requests"]:
    headers = {k: (etag if v == "ETAG" else v) for k, v in headers.items()}
    r = s.request(method, base + path, headers=headers, verify=False, stream=True)
    body = r.raw.read(decode_content=False) or b""
    etag = etag or r.headers.get("etag")
    out.append({"version": r.http_version, "status": r.status_code,
                "encoding": r.headers.get("content-encoding"),
                "range": r.headers.get("content-range"),
                "length": r.headers.get("content-length"),
                "sha": hashlib.sha256(body).hexdigest(), "len": len(body)})
print(json.dumps(out))
"#;

/// niquests fetches a range, a 304 by the ETag, a HEAD and a precompressed variant
/// over HTTP/3, each byte for byte: the range's bytes, no body for 304 and HEAD (with
/// the file's length), the `.gz` file's bytes as they are. Rules: docs/http.md Q2.
#[test]
fn niquests_gets_ranges_validators_head_and_variants() {
    if !python_module("niquests") {
        return;
    }
    let root = docroot();
    let data = pattern(5000, 21);
    put(root.path(), "r.bin", &data);
    let text = b"hello world ".repeat(1000);
    put(root.path(), "p.txt", &text);
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&text).unwrap();
        e.finish().unwrap()
    };
    put(root.path(), "p.txt.gz", &gz);
    let certs = docroot();
    let args = ["--http3", "on", "--precompressed", "gzip"];
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let job = serde_json::json!({
        "host": "127.0.0.1",
        "port": server.tls_addr().port(),
        "requests": [
            ["GET", "/r.bin", {}],
            ["GET", "/r.bin", {"range": "bytes=10-19"}],
            ["GET", "/r.bin", {"if-none-match": "ETAG"}],
            ["HEAD", "/r.bin", {}],
            ["GET", "/p.txt", {"accept-encoding": "gzip"}],
        ],
    });
    let got: Vec<serde_json::Value> =
        serde_json::from_value(python_json(NIQUESTS_REQUESTS, &job)).unwrap();
    let empty = sha256_hex(b"");
    let want = [
        (200, None, None, Some("5000"), sha256_hex(&data)),
        (
            206,
            None,
            Some("bytes 10-19/5000"),
            Some("10"),
            sha256_hex(&data[10..20]),
        ),
        (304, None, None, None, empty.clone()),
        (200, None, None, Some("5000"), empty),
        (200, Some("gzip"), None, None, sha256_hex(&gz)),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, (status, encoding, range, length, sha)) in got.iter().zip(want) {
        assert_eq!(g["version"], 30, "{g}");
        assert_eq!(g["status"], status, "{g}");
        assert_eq!(g["encoding"].as_str(), encoding, "{g}");
        assert_eq!(g["range"].as_str(), range, "{g}");
        if let Some(length) = length {
            assert_eq!(g["length"].as_str(), Some(length), "{g}");
        }
        assert_eq!(g["sha"].as_str(), Some(sha.as_str()), "{g}");
    }
}

/// Chromium, not forced onto QUIC, loads a page over HTTPS: the first answer comes over
/// HTTP/2 and its `Alt-Svc` sends the browser to HTTP/3 on the same port, where the 40
/// images come, on one QUIC connection (its net log shows the alternative service
/// found). Chromium takes QUIC only with a certificate of a publicly known root, a rule
/// waived for the hosts named by `--origin-to-force-quic-on`: the flag names this host
/// at port 9, where nothing is asked, so the rule is lifted for the test certificate
/// while the page's own origin is not forced (its first request goes over TCP).
/// Rules: docs/http.md Q1.
#[test]
fn a_browser_told_by_alt_svc_moves_to_http3() {
    let root = docroot();
    linerate_testkit::forty_asset_page(root.path());
    let certs = docroot();
    let log = certs.path().join("access.log");
    let (server, cert) = serve_counted(root.path(), certs.path(), &log);
    let tls = server.tls_addr();
    let origin = format!("localhost:{}", tls.port());
    let net_log = certs.path().join("net.json");
    let args = [
        format!("--ignore-certificate-errors-spki-list={}", spki_hash(&cert)),
        format!("--host-resolver-rules=MAP localhost {}", tls.ip()),
        format!("--log-net-log={}", net_log.display()),
        "--origin-to-force-quic-on=localhost:9".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if !linerate_testkit::chromium_loads_forty_asset_page(&args, &format!("https://{origin}/")) {
        return;
    }
    let events = net_log_events(&net_log);
    let found = format!("quic {origin}");
    let told = events.iter().any(|(n, p)| {
        n == "HTTP_STREAM_JOB_CONTROLLER_ALT_SVC_FOUND"
            && p["alt_svc"].as_str().is_some_and(|a| a.starts_with(&found))
    });
    assert!(told, "no Alt-Svc to {found} in Chromium's net log");
    let status = status(&server);
    drop(server);
    let lines = log_lines(&log);
    let page: Vec<&String> = lines.iter().filter(|l| l.contains("\"GET / ")).collect();
    assert_eq!(page.len(), 1, "{lines:#?}");
    assert!(page[0].contains(" HTTP/2.0\" 200 "), "{lines:#?}");
    let assets: Vec<&String> = lines.iter().filter(|l| l.contains("\"GET /a/")).collect();
    assert_eq!(assets.len(), 40, "{lines:#?}");
    let over = |v: &str| {
        let v = format!(" HTTP/{v}\" 200 ");
        assets.iter().filter(|l| l.contains(&v)).count()
    };
    // Chromium races its QUIC handshake with the HTTP/2 connection it has: an image
    // asked for before the handshake ends may still go over HTTP/2.
    let (h2, h3) = (over("2.0"), over("3.0"));
    eprintln!("assets over HTTP/3: {h3}, over HTTP/2: {h2}");
    assert!(h3 >= 1 && h2 + h3 == 40, "{lines:#?}");
    assert_eq!(status["http3"]["connections"], 1, "{status}");
    assert_eq!(status["http3"]["responses"], h3, "{status}");
}

/// Chromium's net log (`--log-net-log`): each event's type name and parameters.
fn net_log_events(path: &Path) -> Vec<(String, serde_json::Value)> {
    let log: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let names: std::collections::HashMap<u64, String> = log["constants"]["logEventTypes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (v.as_u64().unwrap(), k.clone()))
        .collect();
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["type"]
                .as_u64()
                .and_then(|t| names.get(&t))
                .cloned()
                .unwrap_or_default();
            (name, e["params"].clone())
        })
        .collect()
}

/// Over HTTP/3 each site answers with its own certificate, as over HTTPS (the same
/// resolver): a client asking for `a.test` (SNI) is shown site a's certificate, not
/// b's, and the other way round; each request goes to the site its `:authority` names.
/// Rules: docs/http.md Q1.
#[test]
fn each_site_answers_with_its_own_certificate_over_h3() {
    use linerate_testkit::quic::{self, headers, Quic};
    let (a_root, b_root, certs) = (docroot(), docroot(), docroot());
    put(a_root.path(), "who", b"a");
    put(b_root.path(), "who", b"b");
    let (conf, a_cert, b_cert) = linerate_testkit::two_sites(
        certs.path(),
        (a_root.path(), &[]),
        b_root.path(),
        "http3 = \"on\"\n",
    );
    let server = LINERATE.serve_config(None, &conf, &[]);
    let addr = server.tls_addr();
    for (name, right, wrong) in [("a.test", &a_cert, &b_cert), ("b.test", &b_cert, &a_cert)] {
        let wrong_one = Quic::connect_as(addr, wrong, name);
        assert!(
            wrong_one.is_err(),
            "{name}: not the other site's certificate"
        );
        let mut q = Quic::connect_as(addr, right, name).unwrap();
        let request = headers(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", name),
            (":path", "/who"),
        ]);
        let id = q.open(quinn_proto::Dir::Bi, &request, true);
        q.drive_until(std::time::Duration::from_secs(5), |q| q.stream(id).fin);
        let data = q.stream(id).data;
        assert_eq!(quic::status_of(&data), Some(200), "{name}");
        let body = quic::body_of(&data);
        assert_eq!(body, &name.as_bytes()[..1], "{name}: its site's file");
    }
}
