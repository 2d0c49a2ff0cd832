//! Behind a load balancer: the PROXY protocol (`--proxy-protocol`, v1 and v2, in clear
//! and before TLS) and trusted proxies' forwarding headers (`--trusted-proxies`,
//! `--forwarded-header`) name the client in the access log and to `--metrics-allow`;
//! a connection without its header is closed and counted, an untrusted sender's header
//! is ignored. Headers are written by hand here, byte for byte as HAProxy's
//! `send-proxy` and `send-proxy-v2` write them; the cluster test drives HAProxy itself.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use linerate_testkit::{
    curl_tls, docroot, fetch, installed, parse_all, per_strategy, put, read_until_eof, req,
    wait_log_lines, Linerate, Response, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md B1.
    a_proxy_header_v1_or_v2_names_the_client_and_a_connection_without_one_is_closed,
    // Rules: docs/http.md B1.
    a_proxy_header_comes_before_the_tls_handshake,
    // Rules: docs/http.md B2.
    a_trusted_proxys_forwarding_header_names_the_client_and_an_untrusted_ones_is_ignored,
);

/// A PROXY v1 line naming `client` (TCP4 or TCP6) as the source.
fn v1(client: SocketAddr) -> Vec<u8> {
    let (family, dst) = match client {
        SocketAddr::V4(_) => ("TCP4", "127.0.0.1"),
        SocketAddr::V6(_) => ("TCP6", "::1"),
    };
    format!(
        "PROXY {family} {} {dst} {} 80\r\n",
        client.ip(),
        client.port()
    )
    .into_bytes()
}

/// A PROXY v2 header (command PROXY, TCP) naming `client`, with a NOOP TLV after the
/// addresses as balancers add TLVs.
fn v2(client: SocketAddr) -> Vec<u8> {
    let mut body = Vec::new();
    let family = match client {
        SocketAddr::V4(a) => {
            body.extend_from_slice(&a.ip().octets());
            body.extend_from_slice(&[127, 0, 0, 1]);
            0x11
        }
        SocketAddr::V6(a) => {
            body.extend_from_slice(&a.ip().octets());
            body.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
            0x21
        }
    };
    body.extend_from_slice(&client.port().to_be_bytes());
    body.extend_from_slice(&80u16.to_be_bytes());
    body.extend_from_slice(&[0x04, 0, 1, 0]);
    v2_with(0x21, family, &body)
}

/// A v2 header of `command` byte (version 2 in its high nibble), family byte and body.
fn v2_with(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[command, family]);
    h.extend_from_slice(&(body.len() as u16).to_be_bytes());
    h.extend_from_slice(body);
    h
}

/// `header` then `requests` on a new connection (the header in two writes, as a slow
/// balancer might send it), read to the close.
fn through(addr: SocketAddr, header: &[u8], requests: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let cut = header.len() / 2;
    s.write_all(&header[..cut]).unwrap();
    s.flush().unwrap();
    thread::sleep(Duration::from_millis(30));
    let mut rest = header[cut..].to_vec();
    rest.extend_from_slice(requests);
    s.write_all(&rest).unwrap();
    read_until_eof(&mut s, Vec::new())
}

/// The log lines' first fields (the client's address), in order.
fn remotes(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect()
}

/// `serve` of a root holding `f.txt`, its access log in a file, under `case` with
/// `extra`: the server, the log, and the directories to keep while it runs.
fn serve_logged(case: &str, extra: &[&str]) -> (Server, PathBuf, [tempfile::TempDir; 2]) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let args = [&["--access-log", log.to_str().unwrap()][..], extra].concat();
    let server = LINERATE.serve(root.path(), case, &args);
    (server, log, [root, logs])
}

/// SIGTERM, and a clean exit.
fn stop(mut server: Server) {
    server.sigterm();
    assert!(server.wait_exit(Duration::from_secs(10)).unwrap().success());
}

fn a_proxy_header_v1_or_v2_names_the_client_and_a_connection_without_one_is_closed(case: &str) {
    // The test's one address is the PROXY listener.
    let (server, log, _dirs) = serve_logged(
        case,
        &[
            "--proxy-protocol",
            "127.0.0.1:0",
            "--metrics-path",
            "/metrics",
            "--metrics-allow",
            "198.51.100.0/24",
        ],
    );
    let addr = server.addr;
    let close = req("GET", "/f.txt", "Connection: close\r\n");
    let keep = req("GET", "/f.txt", "");

    let got = through(addr, &v1("198.51.100.7:56324".parse().unwrap()), &close);
    assert_eq!(answers(&got, 1), [200]);
    let two = [keep.clone(), close.clone()].concat();
    let got = through(addr, &v2("[2001:db8::7]:4711".parse().unwrap()), &two);
    assert_eq!(answers(&got, 2), [200, 200]);
    // v2 LOCAL (a balancer's own check) and v1 UNKNOWN: the connection's own peer.
    let got = through(addr, &v2_with(0x20, 0x00, &[]), &close);
    assert_eq!(answers(&got, 1), [200]);
    let got = through(addr, b"PROXY UNKNOWN\r\n", &close);
    assert_eq!(answers(&got, 1), [200]);
    // --metrics-allow sees the client the header named.
    let m = through(
        addr,
        &v1("198.51.100.9:1000".parse().unwrap()),
        &req("GET", "/metrics", "Connection: close\r\n"),
    );
    assert_eq!(answers(&m, 1), [200]);
    let m = through(
        addr,
        &v1("203.0.113.9:1000".parse().unwrap()),
        &req("GET", "/metrics", "Connection: close\r\n"),
    );
    assert_eq!(answers(&m, 1), [403]);

    // No header, a broken one, a TLS hello: closed with nothing answered.
    for bad in [
        &close[..],
        b"PROXY TCP4 198.51.100.7 127.0.0.1 1\r\n",
        b"\x16\x03\x01\x00\x05hello",
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(bad).unwrap();
        let got = read_until_eof(&mut s, Vec::new());
        assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    }
    let lines = wait_log_lines(&log, 7);
    assert_eq!(
        remotes(&lines),
        [
            "198.51.100.7",
            "2001:db8::7",
            "2001:db8::7",
            "127.0.0.1",
            "127.0.0.1",
            "198.51.100.9",
            "203.0.113.9",
        ],
        "{lines:?}"
    );
    let m = through(
        addr,
        &v1("198.51.100.9:1001".parse().unwrap()),
        &req("GET", "/metrics", "Connection: close\r\n"),
    );
    let body = String::from_utf8_lossy(&m);
    assert!(
        body.contains("linerate_proxy_header_refused_total 3"),
        "{body}"
    );
    stop(server);
}

/// The statuses of `n` responses in `got`.
fn answers(got: &[u8], n: usize) -> Vec<u16> {
    parse_all(got, &vec![false; n])
        .iter()
        .map(|r: &Response| r.status)
        .collect()
}

/// A balancer in TCP mode for one address: each connection accepted on the address it
/// returns is passed to `to`, `header` written first, bytes copied both ways.
fn relay(to: SocketAddr, header: Vec<u8>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    thread::spawn(move || {
        for c in l.incoming() {
            let Ok(client) = c else { return };
            let mut server = TcpStream::connect(to).unwrap();
            server.write_all(&header).unwrap();
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut s2);
                let _ = s2.shutdown(Shutdown::Write);
            });
            let (mut s3, mut c3) = (server, client);
            thread::spawn(move || {
                let _ = std::io::copy(&mut s3, &mut c3);
                let _ = c3.shutdown(Shutdown::Write);
            });
        }
    });
    at
}

fn a_proxy_header_comes_before_the_tls_handshake(case: &str) {
    if !installed("curl") {
        return;
    }
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let certs = tempfile::tempdir().unwrap();
    let args = [
        &linerate_testkit::variant_args(case)[..],
        &[
            "--access-log",
            log.to_str().unwrap(),
            "--log-format",
            "json",
        ],
        &["--proxy-protocol", "127.0.0.1:0"],
    ]
    .concat();
    // Both listeners were asked for as 127.0.0.1:0: both take the header.
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let tls = server.tls_addr();
    let front = relay(tls, v2("198.51.100.20:443".parse().unwrap()));
    for version in [&["--http1.1"][..], &["--http2"]] {
        let out = curl_tls(front, &cert, version, &["/f.txt"]);
        assert_eq!(
            out.stdout,
            b"F\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let lines = wait_log_lines(&log, 2);
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["remote"], "198.51.100.20", "{l}");
    }
    // The plain listener wants its header too.
    let got = through(
        server.addr,
        &v1("198.51.100.21:1".parse().unwrap()),
        &req("GET", "/f.txt", "Connection: close\r\n"),
    );
    assert_eq!(answers(&got, 1), [200]);
    stop(server);
}

fn a_trusted_proxys_forwarding_header_names_the_client_and_an_untrusted_ones_is_ignored(
    case: &str,
) {
    // Loopback is the trusted balancer, and so is 10.0.0.0/8 behind it.
    let (server, log, _dirs) = serve_logged(
        case,
        &[
            "--trusted-proxies",
            "127.0.0.0/8",
            "--trusted-proxies",
            "10.0.0.0/8",
            "--metrics-path",
            "/metrics",
            "--metrics-allow",
            "198.51.100.0/24",
        ],
    );
    let addr = server.addr;
    let get = |extra: &str| fetch(addr, "/f.txt", extra).status;
    assert_eq!(get("X-Forwarded-For: 198.51.100.7\r\n"), 200);
    // Right to left, past the trusted hops; what the client wrote on the left is not
    // believed.
    assert_eq!(
        get("X-Forwarded-For: 203.0.113.1, 198.51.100.8\r\nX-Forwarded-For: 10.1.2.3\r\n"),
        200
    );
    // Every hop trusted: the leftmost; an entry with no address: unknown (0.0.0.0), not
    // the trusted hop right of it.
    assert_eq!(get("X-Forwarded-For: 10.9.9.9, 10.1.1.1\r\n"), 200);
    assert_eq!(
        get("X-Forwarded-For: 203.0.113.1, unknown, 10.1.1.2\r\n"),
        200
    );
    // The other header is not read: a client may have written it.
    assert_eq!(get("Forwarded: for=198.51.100.99\r\n"), 200);
    // --metrics-allow sees the named client.
    let m = |xff: &str| fetch(addr, "/metrics", &format!("X-Forwarded-For: {xff}\r\n")).status;
    assert_eq!(m("198.51.100.50"), 200);
    assert_eq!(m("203.0.113.50"), 403);
    let mut want = vec![
        "198.51.100.7",
        "198.51.100.8",
        "10.9.9.9",
        "0.0.0.0",
        "127.0.0.1",
        "198.51.100.50",
        "203.0.113.50",
    ];
    if installed("curl") {
        // Over HTTP/2 (h2c) the same, by the same code: the client is found per
        // request (a stream), as a proxy multiplexes many onto one connection.
        let out = std::process::Command::new("curl")
            .args(["-sS", "--http2-prior-knowledge"])
            .args([
                "-H",
                "X-Forwarded-For: 203.0.113.1, 198.51.100.61, 10.0.0.7",
            ])
            .arg(format!("http://{addr}/f.txt"))
            .output()
            .unwrap();
        assert_eq!(
            out.stdout,
            b"F\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        want.push("198.51.100.61");
    }
    let lines = wait_log_lines(&log, want.len());
    assert_eq!(remotes(&lines), want, "{lines:?}");
    if installed("curl") {
        assert!(
            lines[7..].iter().all(|l| l.contains("HTTP/2.0")),
            "{lines:?}"
        );
    }
    stop(server);

    // An untrusted sender (the PROXY header names 203.0.113.7): its header ignored; a
    // trusted one's (10.0.0.5) read, here as RFC 7239's Forwarded.
    let (server, log2, _dirs2) = serve_logged(
        case,
        &[
            "--proxy-protocol",
            "127.0.0.1:0",
            "--trusted-proxies",
            "10.0.0.0/8",
            "--forwarded-header",
            "forwarded",
        ],
    );
    let fwd = "Forwarded: for=\"[2001:db8::9]:1\";proto=http\r\nConnection: close\r\n";
    for client in ["203.0.113.7:1", "10.0.0.5:1"] {
        let got = through(
            server.addr,
            &v2(client.parse().unwrap()),
            &req("GET", "/f.txt", fwd),
        );
        assert_eq!(answers(&got, 1), [200]);
    }
    let lines = wait_log_lines(&log2, 2);
    assert_eq!(remotes(&lines), ["203.0.113.7", "2001:db8::9"], "{lines:?}");
    stop(server);
}

#[test]
fn a_proxy_protocol_address_that_is_not_listened_on_is_a_usage_error() {
    let root = docroot();
    let (code, _, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--proxy-protocol",
        "127.0.0.1:9",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--proxy-protocol 127.0.0.1:9: not an address of --listen"),
        "{err}"
    );
    let (code, _, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--trusted-proxies",
        "10.0.0.0/33",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--trusted-proxies"), "{err}");
    let (code, _, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--forwarded-header",
        "x-real-ip",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--forwarded-header"), "{err}");
}
