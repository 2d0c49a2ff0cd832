//! HTTPS (`--tls-listen`): curl and `openssl s_client` against the real binary. Bodies
//! of every size byte-exact over TLS 1.3 and 1.2 under every transmit strategy and
//! driver, ranges, keep-alive, ALPN, resumption (tickets and session IDs), plain HTTP
//! sent to the TLS port (a 400 that says so), a ClientHello sent to the plain port, a malformed ClientHello,
//! a handshake cut by the header timeout, a reload swapping the certificate (and a bad
//! one refused), and the settings' errors.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use linerate_testkit::{
    assert_bytes_eq, curl_tls, docroot, fetch, installed, pattern, per_strategy, put,
    rsa_tls_files, tls_files, variant_args, Linerate, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    bodies_of_every_size_are_byte_exact_over_tls_13_and_12,
    // Rules: docs/http.md P7.
    plain_http_sent_to_the_tls_port_is_told_so_with_a_400,
    a_malformed_client_hello_closes_the_connection_and_the_server_goes_on,
    a_handshake_not_done_within_the_header_timeout_is_cut,
    an_rsa_certificate_serves_tls_13_and_12_with_either_key_form,
);

/// `serve ROOT --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0` with a fresh certificate
/// (plain first, so its address is the one announced first); the server and the
/// certificate's path.
fn serve_tls(root: &Path, certs: &Path, case: &str, extra: &[&str]) -> (Server, PathBuf) {
    let args = [
        &["--workers", "1", "--access-log", "off"][..],
        &variant_args(case),
        extra,
    ];
    LINERATE.start_tls(root, certs, &args.concat())
}

fn ok(out: &Output, what: &str) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{what}: curl {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout.clone()
}

/// Reads until the server closes (or 10 s pass); what came.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // A reset after the server's close is a close too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("no close within 10 s ({e}); got {got:?}"),
        }
    }
}

fn bodies_of_every_size_are_byte_exact_over_tls_13_and_12(case: &str) {
    if !installed("curl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("/empty", Vec::new()),
        ("/small.txt", b"hello over TLS\n".to_vec()),
        ("/100k.bin", pattern(100_000, 1)),
        // Past the small-file size: a file body by the transmit strategy.
        ("/3m.bin", pattern(3 << 20, 2)),
    ];
    for (p, data) in &files {
        put(root.path(), &p[1..], data);
    }
    let (server, cert) = serve_tls(root.path(), certs.path(), case, &[]);
    let addr = server.tls_addr();
    for version in [&["--tlsv1.3"][..], &["--tlsv1.2", "--tls-max", "1.2"]] {
        for (p, data) in &files {
            let got = ok(&curl_tls(addr, &cert, version, &[p]), p);
            assert_bytes_eq(&got, data, &format!("{case} {version:?} {p}"));
        }
        // Several on one connection, and a range of the large one.
        let all: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
        let got = ok(&curl_tls(addr, &cert, version, &all), "keep-alive");
        let want: Vec<u8> = files.iter().flat_map(|(_, d)| d.clone()).collect();
        assert_bytes_eq(&got, &want, &format!("{case} {version:?} keep-alive"));
        let got = ok(
            &curl_tls(
                addr,
                &cert,
                &[version, &["-r", "1000000-2000000"]].concat(),
                &["/3m.bin"],
            ),
            "range",
        );
        assert_bytes_eq(&got, &files[3].1[1_000_000..=2_000_000], "range");
    }
    // The plain listener beside it is still plain.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let got = read_to_close(&mut s);
    assert!(got.ends_with(b"hello over TLS\n"), "{got:?}");
}

/// An RSA certificate (openssl's, the form most sites hold) with its key in PKCS#8 and
/// in PKCS#1 form: TLS 1.3 signs with RSA-PSS, TLS 1.2 takes an ECDHE-RSA suite.
fn an_rsa_certificate_serves_tls_13_and_12_with_either_key_form(case: &str) {
    if !installed("curl") || !installed("openssl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    let body = pattern(300_000, 7);
    put(root.path(), "f.bin", &body);
    for pkcs1 in [false, true] {
        let name = if pkcs1 { "pkcs1" } else { "pkcs8" };
        let (cert, key) = rsa_tls_files(certs.path(), name, pkcs1).expect("openssl runs");
        let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
        let args = [
            &["--workers", "1", "--access-log", "off"][..],
            &[
                "--tls-listen",
                "127.0.0.1:0",
                "--tls-cert",
                c,
                "--tls-key",
                k,
            ],
            &variant_args(case),
        ];
        let server = LINERATE.start(root.path(), &args.concat());
        for version in [&["--tlsv1.3"][..], &["--tlsv1.2", "--tls-max", "1.2"]] {
            // The CA file is the RSA certificate alone: curl verifies only if it was the
            // one served.
            let got = ok(
                &curl_tls(server.tls_addr(), &cert, version, &["/f.bin"]),
                name,
            );
            assert_bytes_eq(&got, &body, &format!("{case} {name} {version:?}"));
        }
        let out = Command::new("openssl")
            .args(["s_client", "-connect", &server.tls_addr().to_string()])
            .args(["-tls1_2", "-servername", "localhost"])
            .stdin(Stdio::null())
            .output()
            .expect("openssl runs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("ECDHE-RSA-AES128-GCM-SHA256"), "{said}");
    }
}

fn plain_http_sent_to_the_tls_port_is_told_so_with_a_400(case: &str) {
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "a.txt", b"a");
    let (server, _) = serve_tls(root.path(), certs.path(), case, &[]);
    let mut s = TcpStream::connect(server.tls_addr()).unwrap();
    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Regression (issue 28): an empty close; nginx answers 400 and says why.
    let got = read_to_close(&mut s);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\nThe plain HTTP request was sent to HTTPS port\n"),
        "{text}"
    );
    // Bytes that are neither TLS nor a request line still get an empty close.
    let mut s = TcpStream::connect(server.tls_addr()).unwrap();
    s.write_all(b"\x00\x01garbage").unwrap();
    assert_eq!(read_to_close(&mut s), b"");
    // And a ClientHello sent to the plain port: 400 at its first byte, then the close.
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        .unwrap();
    let got = read_to_close(&mut s);
    assert!(
        got.starts_with(b"HTTP/1.1 400 "),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

fn a_malformed_client_hello_closes_the_connection_and_the_server_goes_on(case: &str) {
    if !installed("curl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "a.txt", b"still here");
    let (server, cert) = serve_tls(
        root.path(),
        certs.path(),
        case,
        &["--status-path", "/.status", "--metrics-path", "/metrics"],
    );
    let addr = server.tls_addr();
    for junk in [
        // A handshake record whose ClientHello ends inside its random.
        &b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\x03\x03\x00\x00"[..],
        // A handshake message longer than any the server takes.
        b"\x16\x03\x01\x00\x08garbage!",
        // A record longer than TLS allows.
        b"\x16\x03\x01\xff\xff\x01",
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(junk).unwrap();
        let got = read_to_close(&mut s);
        // Nothing but an alert record, if anything.
        assert!(got.is_empty() || got[0] == 0x15, "{junk:?}: {got:?}");
    }
    let got = ok(&curl_tls(addr, &cert, &[], &["/a.txt"]), "after the junk");
    assert_eq!(got, b"still here");
    // The status page and the metrics count both kinds.
    let status: serde_json::Value =
        serde_json::from_slice(&fetch(server.addr, "/.status", "").body).unwrap();
    assert_eq!(status["tls"]["refused"], 3, "{status}");
    assert_eq!(status["tls"]["handshakes"], 1, "{status}");
    // Kernel TLS is off by default: the handshake's connection stayed in user space.
    assert_eq!(status["tls"]["path_user"], 1, "{status}");
    assert_eq!(status["tls"]["path_kernel"], 0, "{status}");
    // Whether the kernel could seal records, probed at the start: said, either way.
    let note = status["tls"]["kernel_tls"].as_str().unwrap();
    assert!(
        note.starts_with("no kernel TLS here: ") || note == "the kernel has TLS",
        "{note}"
    );
    let metrics = String::from_utf8(fetch(server.addr, "/metrics", "").body).unwrap();
    assert!(
        metrics.contains("linerate_tls_connections_total{result=\"refused\",path=\"user\"} 3")
            && metrics.contains("linerate_tls_connections_total{result=\"done\",path=\"user\"} 1")
            && metrics
                .contains("linerate_tls_connections_total{result=\"done\",path=\"kernel\"} 0"),
        "{metrics}"
    );
}

fn a_handshake_not_done_within_the_header_timeout_is_cut(case: &str) {
    let (root, certs) = (docroot(), docroot());
    let (server, _) = serve_tls(root.path(), certs.path(), case, &["--header-timeout", "1"]);
    for start in [&b""[..], b"\x16\x03\x01\x02\x00\x01"] {
        let mut s = TcpStream::connect(server.tls_addr()).unwrap();
        s.write_all(start).unwrap();
        let t = Instant::now();
        assert_eq!(read_to_close(&mut s), b"", "{start:?}");
        // Cut by the timeout, not at once (no timing bound beyond the 10 s read).
        assert!(
            t.elapsed() >= Duration::from_millis(500),
            "{start:?}: closed at once"
        );
    }
}

/// `openssl s_client` through one request, its session written to or read from
/// `session`; its output.
fn s_client(addr: SocketAddr, cert: &Path, session: &Path, save: bool, extra: &[&str]) -> String {
    let mut cmd = Command::new("openssl");
    cmd.args([
        "s_client",
        "-connect",
        &addr.to_string(),
        "-servername",
        "localhost",
    ])
    .arg("-CAfile")
    .arg(cert)
    .arg("-ign_eof")
    .arg(if save { "-sess_out" } else { "-sess_in" })
    .arg(session)
    .args(extra)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("openssl runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn alpn_versions_and_resumption_under_each_driver() {
    if !installed("curl") || !installed("openssl") {
        return;
    }
    for driver in ["auto", "epoll"] {
        let (root, certs) = (docroot(), docroot());
        put(root.path(), "a.txt", b"resumed");
        let (server, cert) = serve_tls(root.path(), certs.path(), &format!("splice@{driver}"), &[]);
        let addr = server.tls_addr();
        for (flags, version) in [
            (&["--tlsv1.3"][..], "TLSv1.3"),
            (&["--tlsv1.2", "--tls-max", "1.2"], "TLSv1.2"),
        ] {
            // ALPN: h2 first; HTTP/1.1 for a client that offers it alone.
            let out = curl_tls(
                addr,
                &cert,
                &[flags, &["-v", "--http1.1"]].concat(),
                &["/a.txt"],
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            assert!(
                err.contains("ALPN: server accepted http/1.1"),
                "{driver}: {err}"
            );
            let out = curl_tls(addr, &cert, &[flags, &["-v"]].concat(), &["/a.txt"]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            assert!(err.contains("ALPN: server accepted h2"), "{driver}: {err}");
            assert!(err.contains(version), "{driver}: {version}: {err}");
            // The server's preference: AES-128-GCM.
            assert!(
                err.contains("AES_128_GCM") || err.contains("AES128-GCM"),
                "{err}"
            );
        }
        // A second connection resumes the first one's session: by ticket (1.3) and
        // by ticket or session ID (1.2).
        for extra in [&["-tls1_3"][..], &["-tls1_2"], &["-tls1_2", "-no_ticket"]] {
            let session = certs.path().join("session.pem");
            let first = s_client(addr, &cert, &session, true, extra);
            assert!(first.contains("New, TLS"), "{driver} {extra:?}: {first}");
            assert!(first.contains("resumed"), "{driver} {extra:?}: {first}");
            let second = s_client(addr, &cert, &session, false, extra);
            assert!(
                second.contains("Reused, TLS"),
                "{driver} {extra:?}: {second}"
            );
            assert!(second.contains("resumed"), "{driver} {extra:?}: {second}");
        }
    }
}

#[test]
fn a_reload_swaps_the_certificate_and_a_bad_one_is_refused() {
    if !installed("curl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "a.txt", b"a");
    put(root.path(), "big.bin", &pattern(8 << 20, 3));
    let (server, first) = serve_tls(root.path(), certs.path(), "splice", &[]);
    let addr = server.tls_addr();
    let kept = certs.path().join("first.crt");
    std::fs::copy(&first, &kept).unwrap();
    // A download under way on the first certificate's session.
    let download = Command::new("curl")
        .args(["-sS", "--limit-rate", "4M", "--cacert"])
        .arg(&kept)
        .arg("--resolve")
        .arg(format!("localhost:{}:127.0.0.1", addr.port()))
        .arg(format!("https://localhost:{}/big.bin", addr.port()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // New files under the same names: the reload reads them.
    let (second, _) = tls_files(certs.path(), "server");
    server.signal("HUP");
    server.wait_stderr("reloaded");
    let out = curl_tls(addr, &second, &[], &["/a.txt"]);
    assert_eq!(ok(&out, "the new certificate"), b"a");
    let out = curl_tls(addr, &kept, &[], &["/a.txt"]);
    assert!(!out.status.success(), "the old certificate is gone");
    let got = download.wait_with_output().unwrap();
    assert!(got.status.success());
    assert_bytes_eq(
        &got.stdout,
        &pattern(8 << 20, 3),
        "the download across the reload",
    );
    // A key that is no key: the reload is refused and the certificate serves on.
    std::fs::write(certs.path().join("server.key"), "not a key\n").unwrap();
    server.signal("HUP");
    let err = server.wait_stderr("--tls-key");
    assert!(err.contains("serving on with the settings before"), "{err}");
    assert_eq!(
        ok(&curl_tls(addr, &second, &[], &["/a.txt"]), "after"),
        b"a"
    );
}

/// Sessions outlive a reload and cross instances (issue 43; docs/operations.md,
/// "Session tickets"): without a key file, a session resumes on the same server after a
/// reload; with one file on two instances, a session made on one resumes on the other,
/// by TLS 1.3 and by TLS 1.2 tickets; after the file is replaced and one instance
/// reloaded, the sessions made before still resume there. A file that is no key refuses
/// the start, naming the key.
#[test]
fn sessions_resume_across_a_reload_and_on_another_instance_with_a_ticket_file() {
    if !installed("openssl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "a.txt", b"resumed");
    let resumes = |from: SocketAddr, to: SocketAddr, cert: &Path, extra: &[&str], what: &str| {
        let session = certs.path().join("session.pem");
        let first = s_client(from, cert, &session, true, extra);
        assert!(first.contains("New, TLS"), "{what} {extra:?}: {first}");
        let second = s_client(to, cert, &session, false, extra);
        second.contains("Reused, TLS")
    };
    // No file: the process's keys, kept across a reload.
    let (server, cert) = serve_tls(root.path(), certs.path(), "splice", &[]);
    let addr = server.tls_addr();
    let session = certs.path().join("before-reload.pem");
    assert!(s_client(addr, &cert, &session, true, &["-tls1_3"]).contains("New, TLS"));
    server.signal("HUP");
    server.wait_stderr("reloaded");
    let after = s_client(addr, &cert, &session, false, &["-tls1_3"]);
    assert!(after.contains("Reused, TLS"), "after a reload: {after}");
    drop(server);
    // Two instances without a file: their own keys, no resumption across.
    let (a, _) = serve_tls(root.path(), certs.path(), "splice", &[]);
    let key = certs.path().join("server.key");
    let tls = |extra: &[&str]| -> Vec<String> {
        [
            "--workers",
            "1",
            "--access-log",
            "off",
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
    };
    let b = LINERATE.start(
        root.path(),
        &tls(&[]).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(
        !resumes(a.tls_addr(), b.tls_addr(), &cert, &["-tls1_3"], "no file"),
        "resumed on another instance without a shared file"
    );
    drop((a, b));
    // One file on both.
    let keys = certs.path().join("ticket.key");
    std::fs::write(&keys, pattern(80, 7)).unwrap();
    let with = tls(&["--tls-ticket-keys", keys.to_str().unwrap()]);
    let with: Vec<&str> = with.iter().map(String::as_str).collect();
    let (a, b) = (
        LINERATE.start(root.path(), &with),
        LINERATE.start(root.path(), &with),
    );
    for extra in [&["-tls1_3"][..], &["-tls1_2"]] {
        assert!(
            resumes(a.tls_addr(), b.tls_addr(), &cert, extra, "shared file"),
            "{extra:?}: not resumed on the other instance"
        );
    }
    // Rotated on b: a session of the key before still resumes there.
    let old_session = certs.path().join("old.pem");
    assert!(s_client(a.tls_addr(), &cert, &old_session, true, &["-tls1_3"]).contains("New, TLS"));
    std::fs::write(&keys, pattern(80, 8)).unwrap();
    b.signal("HUP");
    b.wait_stderr("reloaded");
    let out = s_client(b.tls_addr(), &cert, &old_session, false, &["-tls1_3"]);
    assert!(
        out.contains("Reused, TLS"),
        "the key before, after a rotation: {out}"
    );
    // A file that is no key.
    std::fs::write(&keys, b"short").unwrap();
    let (code, _, err) =
        LINERATE.run(&[&["serve", root.path().to_str().unwrap()][..], &with].concat());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("tls-ticket-keys") && err.contains("5 bytes: 48 or 80"),
        "{err}"
    );
}

/// Whether this kernel takes the "tls" upper-layer protocol (kernel TLS).
fn kernel_has_tls() -> bool {
    use std::os::fd::AsFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    linerate_sys::net::set_tcp_ulp(s.as_fd(), "tls").is_ok()
}

/// `--kernel-tls`: `on` refuses to start where the kernel has no kernel TLS (this
/// project's machines) and `auto` serves from user space there, saying so once; where
/// the kernel has it, TLS 1.3 connections go to the kernel and TLS 1.2 ones stay, and
/// bodies are byte-exact either way.
#[test]
fn kernel_tls_is_refused_without_the_kernels_and_auto_serves_either_way() {
    if !installed("curl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    let body = pattern(2 << 20, 5);
    put(root.path(), "f.bin", &body);
    put(root.path(), "s.txt", b"small");
    let here = kernel_has_tls();
    let (cert, key) = tls_files(certs.path(), "server");
    let tls = [
        "--tls-listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    let r = root.path().to_str().unwrap();
    if !here {
        let (code, _, err) =
            LINERATE.run(&[&["serve", r, "--kernel-tls", "on"][..], &tls].concat());
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("--kernel-tls on: this kernel has no kernel TLS"),
            "{err}"
        );
    }
    for driver in ["epoll", "auto"] {
        let args = [
            &[
                "--workers",
                "1",
                "--access-log",
                "off",
                "--kernel-tls",
                "auto",
            ][..],
            &[
                "--driver",
                driver,
                "--transmit",
                "sendfile",
                "--error-log-level",
                "info",
            ],
            &["--status-path", "/.status"],
            &tls,
        ]
        .concat();
        let server = LINERATE.start(root.path(), &args);
        let said = server.wait_stderr("kernel TLS");
        if here {
            assert!(said.contains("go to the kernel"), "{said}");
        } else {
            assert!(said.contains("no kernel TLS here"), "{said}");
        }
        let addr = server.tls_addr();
        for version in [&["--tlsv1.3"][..], &["--tlsv1.2", "--tls-max", "1.2"]] {
            let got = ok(
                &curl_tls(addr, &cert, version, &["/s.txt", "/f.bin", "/s.txt"]),
                driver,
            );
            let want = [&b"small"[..], &body, b"small"].concat();
            assert_bytes_eq(&got, &want, &format!("{driver} {version:?}"));
        }
        let status: serde_json::Value =
            serde_json::from_slice(&fetch(server.addr, "/.status", "").body).unwrap();
        // Only TLS 1.3 under epoll goes to the kernel (a receive may be in flight on
        // the ring at the handshake's end).
        let kernel = u64::from(here && status["driver"] == "epoll");
        assert_eq!(status["tls"]["handshakes"], 2, "{status}");
        assert_eq!(status["tls"]["path_kernel"], kernel, "{status}");
        assert_eq!(status["tls"]["path_user"], 2 - kernel, "{status}");
    }
}

#[test]
fn tls_settings_that_do_not_go_together_are_usage_errors() {
    let root = docroot();
    let r = root.path().to_str().unwrap();
    for (args, needle) in [
        (
            &["--tls-listen", "127.0.0.1:0"][..],
            "--tls-listen needs --tls-cert and --tls-key",
        ),
        (
            &["--tls-cert", "/x.crt", "--tls-key", "/x.key"],
            "go with --tls-listen",
        ),
        (
            &["--kernel-tls", "auto"],
            "--kernel-tls goes with --tls-listen",
        ),
        (&["--kernel-tls", "yes"], "expected off, auto or on"),
    ] {
        let (code, _, err) = LINERATE.run(&[&["serve", r], args].concat());
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // Files that are not what they should be: the start fails naming the flag.
    let certs = docroot();
    let (cert, key) = tls_files(certs.path(), "server");
    let junk = certs.path().join("junk.pem");
    std::fs::write(&junk, "junk\n").unwrap();
    // Another pair's key: said in words (rustls' own word is `KeyMismatch`).
    let (_, other_key) = tls_files(certs.path(), "other");
    for (c, k, needle) in [
        (&junk, &key, "--tls-cert"),
        (&cert, &junk, "--tls-key"),
        (&cert, &certs.path().join("none.key"), "--tls-key"),
        (&cert, &other_key, "the key is not the certificate's"),
    ] {
        let (code, _, err) = LINERATE.run(&[
            "serve",
            r,
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            c.to_str().unwrap(),
            "--tls-key",
            k.to_str().unwrap(),
        ]);
        assert_ne!(code, 0, "{c:?} {k:?}");
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn https_alone_from_the_configuration_file() {
    if !installed("curl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "a.txt", b"from the file");
    let (cert, key) = tls_files(certs.path(), "server");
    let conf = certs.path().join("linerate.toml");
    std::fs::write(
        &conf,
        format!(
            "root = {:?}\ntls-listen = [\"127.0.0.1:0\"]\ntls-cert = {:?}\ntls-key = {:?}\naccess-log = \"off\"\n",
            root.path(),
            cert,
            key
        ),
    )
    .unwrap();
    // No plain listener: the first (and only) address announced is the HTTPS one.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_linerate"));
    cmd.args(["serve", "--config", conf.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let addr: SocketAddr = first
        .trim_end()
        .strip_prefix("listening on ")
        .and_then(|a| a.strip_suffix(" (https)"))
        .unwrap_or_else(|| panic!("{first:?}"))
        .parse()
        .unwrap();
    let got = ok(&curl_tls(addr, &cert, &[], &["/a.txt"]), "from the file");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(got, b"from the file");
}

/// `openssl s_client -servername NAME` (none: `-noservername`) checking the server's
/// chain against `ca`; whether it verified.
fn verifies(addr: SocketAddr, name: Option<&str>, ca: &Path) -> bool {
    let mut cmd = Command::new("openssl");
    cmd.args([
        "s_client",
        "-connect",
        &addr.to_string(),
        "-verify_return_error",
    ])
    .arg("-CAfile")
    .arg(ca);
    match name {
        Some(n) => cmd.args(["-servername", n]),
        None => cmd.arg("-noservername"),
    };
    let out = cmd.stdin(Stdio::null()).output().expect("openssl runs");
    String::from_utf8_lossy(&out.stdout).contains("Verify return code: 0 (ok)")
}

#[test]
fn each_site_answers_with_its_own_certificate_and_unknown_names_get_the_default_sites() {
    if !installed("openssl") || !installed("curl") {
        return;
    }
    let (a_root, b_root, certs) = (docroot(), docroot(), docroot());
    put(a_root.path(), "who", b"a");
    put(b_root.path(), "who", b"b");
    let (conf, a_cert, b_cert) = linerate_testkit::two_sites(
        certs.path(),
        (a_root.path(), &["*.a.test"]),
        b_root.path(),
        "access-log = \"off\"\n",
    );
    let server = LINERATE.serve_config(None, &conf, &[]);
    let addr = server.tls_addr();
    for (name, right, wrong) in [
        (Some("a.test"), &a_cert, &b_cert),
        (Some("www.a.test"), &a_cert, &b_cert),
        (Some("b.test"), &b_cert, &a_cert),
        // A name no site has, and none at all: the default site's.
        (Some("c.test"), &b_cert, &a_cert),
        (None, &b_cert, &a_cert),
    ] {
        assert!(
            verifies(addr, name, right),
            "{name:?}: its site's certificate"
        );
        assert!(!verifies(addr, name, wrong), "{name:?}: not the other's");
    }
    // And the request goes to the site its Host names, over the session of that name.
    let port = addr.port();
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&a_cert)
        .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
        .arg(format!("https://a.test:{port}/who"))
        .output()
        .unwrap();
    assert_eq!(ok(&out, "site a"), b"a");
}

/// testssl.sh against the default HTTPS configuration: no finding of severity HIGH or
/// CRITICAL but those about the test's own certificate (self-signed, short-lived, no
/// revocation URL), which a CA-issued certificate does not have.
#[test]
fn testssl_finds_nothing_high_or_critical_in_the_defaults() {
    if !installed("testssl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "index.html", b"<p>hi</p>");
    let (server, _) = serve_tls(root.path(), certs.path(), "splice", &[]);
    let json = certs.path().join("testssl.json");
    let out = Command::new("timeout")
        .args([
            "600",
            "testssl",
            "--quiet",
            "--color",
            "0",
            "--warnings",
            "off",
        ])
        .arg("--jsonfile")
        .arg(&json)
        .arg(server.tls_addr().to_string())
        .output()
        .expect("testssl runs");
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let findings: serde_json::Value = serde_json::from_str(&text).unwrap();
    let findings = findings.as_array().expect("a list of findings");
    assert!(
        findings.len() > 50,
        "testssl ran its checks: {}",
        findings.len()
    );
    let bad: Vec<String> = findings
        .iter()
        .filter(|f| matches!(f["severity"].as_str(), Some("HIGH" | "CRITICAL")))
        .filter(|f| !f["id"].as_str().unwrap_or("").starts_with("cert_"))
        .map(|f| format!("{} {}: {}", f["severity"], f["id"], f["finding"]))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn a_redirect_listener_sends_every_request_to_https_under_each_driver() {
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "a.txt", b"over https");
    for driver in ["auto", "epoll"] {
        let (server, cert) = serve_tls(
            root.path(),
            certs.path(),
            &format!("splice@{driver}"),
            &["--redirect-listen", "127.0.0.1:0"],
        );
        let (tls, redirect) = (server.tls_addr(), server.announced(" (redirect to https)"));
        let mut s = TcpStream::connect(redirect).unwrap();
        // Two on one connection (it stays open), a HEAD, and one with no usable host.
        s.write_all(
            format!(
                "GET /a.txt?x=1 HTTP/1.1\r\nHost: localhost:{}\r\n\r\n\
                 HEAD /dir/ HTTP/1.1\r\nHost: Example.COM\r\n\r\n\
                 GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n",
                redirect.port()
            )
            .as_bytes(),
        )
        .unwrap();
        let got = String::from_utf8(read_to_close(&mut s)).unwrap();
        let heads: Vec<&str> = got.split("HTTP/1.1 ").skip(1).collect();
        assert_eq!(heads.len(), 3, "{driver}: {got}");
        assert!(heads[0].starts_with("301 "), "{got}");
        let port = tls.port();
        assert!(
            heads[0].contains(&format!(
                "\r\nLocation: https://localhost:{port}/a.txt?x=1\r\n"
            )),
            "{driver}: {got}"
        );
        assert!(heads[1].starts_with("301 "), "{got}");
        assert!(
            heads[1].contains(&format!(
                "\r\nLocation: https://Example.COM:{port}/dir/\r\n"
            )),
            "{got}"
        );
        assert!(heads[1].ends_with("\r\n\r\n"), "a HEAD has no body: {got}");
        assert!(heads[2].starts_with("400 "), "{got}");
        if installed("curl") {
            // A client that follows it gets the file over HTTPS.
            let out = Command::new("curl")
                .args(["-sSL", "--cacert"])
                .arg(&cert)
                .arg(format!("http://localhost:{}/a.txt", redirect.port()))
                .output()
                .unwrap();
            assert_eq!(ok(&out, "followed"), b"over https");
        }
    }
    let (code, _, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--redirect-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--redirect-listen needs --tls-listen"),
        "{err}"
    );
    // HTTPS on a Unix socket only: no port to send clients to.
    let sock = format!("unix:{}", certs.path().join("s.sock").display());
    let cert = certs.path().join("server.crt");
    let key = certs.path().join("server.key");
    let (code, _, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--tls-listen",
        &sock,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--redirect-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("with an IP address"), "{err}");
}

/// A file cut short while it goes out over TLS: the client sees the connection fail,
/// never a short body passed off as whole; a header rule's Strict-Transport-Security
/// rides on every answer.
#[test]
fn a_file_truncated_during_a_tls_send_fails_the_download_and_rules_add_hsts() {
    if !installed("curl") {
        return;
    }
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "big.bin", &pattern(16 << 20, 5));
    put(root.path(), "a.txt", b"a");
    let conf = certs.path().join("rules.toml");
    std::fs::write(
        &conf,
        "[[rule]]\npath = \"/\"\nheaders = { \"Strict-Transport-Security\" = \"max-age=63072000\" }\n",
    )
    .unwrap();
    for driver in ["auto", "epoll"] {
        let (server, cert) = serve_tls(
            root.path(),
            certs.path(),
            &format!("splice@{driver}"),
            &["--config", conf.to_str().unwrap()],
        );
        let addr = server.tls_addr();
        let out = curl_tls(addr, &cert, &["-sSI"], &["/a.txt"]);
        let head = String::from_utf8_lossy(&ok(&out, "HEAD")).into_owned();
        assert!(
            head.contains("strict-transport-security: max-age=63072000")
                || head.contains("Strict-Transport-Security: max-age=63072000"),
            "{head}"
        );
        let port = addr.port();
        let download = Command::new("curl")
            .args(["-sS", "--limit-rate", "2M", "--cacert"])
            .arg(&cert)
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .arg(format!("https://localhost:{port}/big.bin"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(root.path().join("big.bin"))
            .unwrap();
        f.set_len(1 << 20).unwrap();
        let got = download.wait_with_output().unwrap();
        assert!(
            !got.status.success(),
            "{driver}: curl took {} bytes as a whole body",
            got.stdout.len()
        );
        assert!(got.stdout.len() < 16 << 20, "{driver}");
        // Put it back for the next driver.
        put(root.path(), "big.bin", &pattern(16 << 20, 5));
    }
}
