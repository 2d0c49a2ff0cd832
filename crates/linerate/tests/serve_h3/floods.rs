//! HTTP/3 floods through the binary, each bounded and counted (docs/operations.md,
//! "HTTP/3"), by the tests' own QUIC client (`linerate_testkit::quic`).
//! Rules: docs/http.md Q6.

use std::time::Duration;

use super::*;
use linerate_testkit::quic::{self, control_stream, get, Quic};
use quinn_proto::Dir;

/// A server with HTTP/3, a status page at `/.s`, `big.bin` (1 MiB) and `a.txt` in its
/// root, and `extra` flags; the certificate, and the directories kept while it runs.
fn serve(extra: &[&str]) -> (Server, std::path::PathBuf, [tempfile::TempDir; 2]) {
    let root = docroot();
    put(root.path(), "big.bin", &pattern(1 << 20, 3));
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let args = [&["--http3", "on", "--status-path", "/.s"][..], extra].concat();
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
    (server, cert, [root, certs])
}

/// A client that asks for a 1 MiB file and cancels the answer at once (STOP_SENDING),
/// again and again, as HTTP/2's rapid reset: past 100 answers cancelled, when they
/// are more than half its requests, its connection ends with H3_EXCESSIVE_LOAD,
/// counted; another connection is answered as ever.
#[test]
fn answers_cancelled_by_the_hundred_end_the_connection() {
    let (server, cert, _dirs) = serve(&[]);
    let mut q = Quic::connect(server.tls_addr(), &cert);
    q.open(Dir::Uni, &control_stream(), false);
    for _ in 0..300 {
        if q.closed.is_some() {
            break;
        }
        let id = q.open(Dir::Bi, &get("/big.bin"), true);
        q.drive_until(Duration::from_secs(2), |q| !q.stream(id).data.is_empty());
        q.stop(id, 0x10c);
    }
    q.drive_until(Duration::from_secs(5), |q| q.closed.is_some());
    assert_eq!(q.close_code(), Some(0x107), "{:?}", q.closed);
    let s = status_at(&server, "/.s");
    assert_eq!(s["http3"]["excessive_load"], 1, "{s}");
    assert_eq!(s["http3"]["connection_errors"], 1, "{s}");
    let mut other = Quic::connect(server.tls_addr(), &cert);
    let id = other.open(Dir::Bi, &get("/a.txt"), true);
    other.drive_until(Duration::from_secs(5), |q| q.stream(id).fin);
    assert_eq!(quic::status_of(&other.stream(id).data), Some(200));
}

/// The server's metrics text at `/m`.
fn metrics(server: &Server) -> String {
    String::from_utf8_lossy(&page(server, "/m")).into_owned()
}

/// A client that asks for 8 MiB and never reads (so its flow control never lets more
/// than its first window go): past `--send-timeout` the connection is closed, counted
/// as a send timeout, and the server goes on.
#[test]
fn a_peer_that_never_reads_is_closed_at_the_send_timeout() {
    let root = docroot();
    put(root.path(), "huge.bin", &pattern(8 << 20, 5));
    let certs = docroot();
    let args = [
        "--http3",
        "on",
        "--send-timeout",
        "1",
        "--metrics-path",
        "/m",
    ];
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let mut q = Quic::connect(server.tls_addr(), &cert);
    q.reading = false;
    q.open(Dir::Bi, &get("/huge.bin"), true);
    let closed = q.drive_until(Duration::from_secs(10), |q| q.closed.is_some());
    assert!(closed, "still open after 10 s");
    assert_eq!(q.close_code(), Some(0x100), "{:?}", q.closed);
    let m = metrics(&server);
    assert!(
        m.contains("linerate_timeouts_total{kind=\"send\"} 1"),
        "{m}"
    );
}

/// A client that goes silent (no packet at all, as one that left without a word) is
/// forgotten after `--idle-timeout`, counted as an idle timeout.
#[test]
fn a_silent_peer_is_forgotten_at_the_idle_timeout() {
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let args = [
        "--http3",
        "on",
        "--idle-timeout",
        "1",
        "--metrics-path",
        "/m",
    ];
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
    let q = Quic::connect(server.tls_addr(), &cert);
    // Not driven from here: no ACK, no packet.
    let idle = "linerate_timeouts_total{kind=\"idle\"} 1";
    let mut m = String::new();
    for _ in 0..50 {
        m = metrics(&server);
        if m.contains(idle) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(m.contains(idle), "{m}");
    drop(q);
}

/// A client may have as many request streams open at once as HTTP/2's
/// SETTINGS_MAX_CONCURRENT_STREAMS, 128: QUIC gives no credit for more until some end.
#[test]
fn request_streams_at_once_are_bounded() {
    let (server, cert, _dirs) = serve(&[]);
    let mut q = Quic::connect(server.tls_addr(), &cert);
    q.reading = false;
    let mut open = 0;
    while q.try_open(Dir::Bi).is_some() {
        open += 1;
        assert!(open <= 1000, "no bound on streams");
    }
    assert_eq!(open, 128);
}

/// A flood of Initials from one address that never finishes a handshake: past 64
/// handshakes under way on the worker's socket, each new client's address is checked
/// with a Retry first (`--http3-retry auto`), counted, and a real client is still
/// served (it echoes its token).
#[test]
fn a_handshake_flood_is_met_with_retry() {
    let (server, cert, _dirs) = serve(&["--workers", "1"]);
    let (_flood, _) = quic::initials(server.tls_addr(), 80);
    // The flood's datagrams are read by the worker before the client's below: wait
    // until its Retries show.
    let mut s = serde_json::Value::Null;
    for _ in 0..50 {
        s = status_at(&server, "/.s");
        if s["http3"]["retries"].as_u64() >= Some(15) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        s["http3"]["retries"], 15,
        "65 handshakes taken, 15 Retries: {s}"
    );
    let mut q = Quic::connect(server.tls_addr(), &cert);
    let id = q.open(Dir::Bi, &get("/a.txt"), true);
    q.drive_until(Duration::from_secs(5), |q| q.stream(id).fin);
    assert_eq!(quic::status_of(&q.stream(id).data), Some(200));
    let s = status_at(&server, "/.s");
    assert_eq!(s["http3"]["retries"], 16, "{s}");
}

/// A client whose address is spoofed (it sends an Initial and never answers) gets at
/// most three times the bytes it sent (RFC 9000 §8.1) though the server's first
/// flight, its certificate chain of some 6 KB, is longer: the rest waits for an
/// address the client proves.
#[test]
fn a_spoofed_address_gets_at_most_three_times_what_it_sent() {
    let root = docroot();
    let certs = docroot();
    let (crt, key) = linerate_testkit::tls_files(certs.path(), "server");
    let pem = std::fs::read_to_string(&crt).unwrap();
    std::fs::write(&crt, pem.repeat(12)).unwrap();
    let args = h3_on("127.0.0.1:0", &crt, &key);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = LINERATE.start(root.path(), &args);
    let (sock, sent) = quic::initials(server.tls_addr(), 1);
    let chain = pem.len() * 12 * 3 / 4;
    assert!(
        chain > 3 * sent,
        "the chain ({chain} B) outweighs the limit"
    );
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut got = 0;
    let mut buf = vec![0u8; 65536];
    let until = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < until {
        if let Ok(n) = sock.recv(&mut buf) {
            got += n;
        }
    }
    assert!(got > 0, "the server answered nothing");
    assert!(got <= 3 * sent, "{got} bytes to a client that sent {sent}");
}
