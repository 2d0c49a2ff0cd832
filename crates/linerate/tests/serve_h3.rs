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

per_strategy!(
    // Rules: docs/http.md Q1, Q2.
    answers_over_h3_are_the_files_and_the_answers_over_https,
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
    let port = server.tls_addr().port().to_string();
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("https://localhost:{port}{p}"))
        .collect();
    let out = Command::new(client)
        .args(["--quiet", "--exit-on-all-streams-close", "--timeout=10s"])
        .arg(format!("--download={}", dir.display()))
        .args(["127.0.0.1", &port])
        .args(&urls)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gtlsclient: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
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
    let args = [
        &[
            "--workers",
            "2",
            "--http3",
            "on",
            "--access-log",
            log.to_str().unwrap(),
        ][..],
        &variant_args(case),
    ]
    .concat();
    let (server, _cert) = LINERATE.start_tls(p, certs.path(), &args);
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

/// Without `--http3 on` no UDP socket is bound and HTTPS says nothing of HTTP/3.
#[test]
fn http3_is_off_unless_asked_for() {
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &["--workers", "1"]);
    let (body, alt) = curl_https(&server, "/a.txt");
    assert_eq!(body, b"hello");
    assert_eq!(alt, None);
    let port = server.tls_addr().port();
    let udp = std::net::UdpSocket::bind(("127.0.0.1", port));
    assert!(udp.is_ok(), "the UDP port is free: {udp:?}");
}
