//! HTTP/3 at a stop and a reload, seen by the tests' own QUIC client: GOAWAY on the
//! server's control stream, the requests taken answered, then CONNECTION_CLOSE with
//! H3_NO_ERROR; a stop's `--shutdown-delay` drains HTTP/3 as it does HTTP/2.
//! Rules: docs/http.md Q4.

use std::time::Duration;

use super::*;
use linerate_testkit::quic::Quic;

/// A server with HTTP/3, `a.txt` in its root, and `extra` flags.
fn serve(extra: &[&str]) -> (Server, std::path::PathBuf, [tempfile::TempDir; 2]) {
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let args = [&["--http3", "on"][..], extra].concat();
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &args);
    (server, cert, [root, certs])
}

/// A connection that has been answered is told GOAWAY at `signal` and closed with
/// H3_NO_ERROR; at a reload, a new connection is served by the next generation.
fn goaway_then_no_error(signal: &str) {
    let (server, cert, _dirs) = serve(&[]);
    let mut q = Quic::connect(server.tls_addr(), &cert);
    assert_eq!(q.get("/a.txt"), Some(200));
    server.signal(signal);
    let closed = q.drive_until(Duration::from_secs(10), |q| q.closed.is_some());
    assert!(closed, "{signal}: still open");
    assert!(
        q.told_go_away(),
        "{signal}: no GOAWAY: {:?}",
        q.server_uni()
    );
    assert_eq!(q.close_code(), Some(0x100), "{signal}: {:?}", q.closed);
    if signal == "HUP" {
        let mut next = Quic::connect(server.tls_addr(), &cert);
        assert_eq!(next.get("/a.txt"), Some(200));
    }
}

#[test]
fn sigquit_says_goaway_and_closes_with_no_error() {
    goaway_then_no_error("QUIT");
}

#[test]
fn sigterm_says_goaway_and_closes_with_no_error() {
    goaway_then_no_error("TERM");
}

#[test]
fn a_reload_says_goaway_and_closes_with_no_error() {
    goaway_then_no_error("HUP");
}

/// A connection whose handshake ends after SIGQUIT is told GOAWAY too (after its
/// SETTINGS) and closed with H3_NO_ERROR, not left open until the stop's deadline.
#[test]
fn a_handshake_that_ends_after_a_stop_is_told_goaway() {
    let (server, cert, _dirs) = serve(&[]);
    let mut q = Quic::start_as(server.tls_addr(), &cert, "localhost");
    // The server takes the Initial and answers; the client reads that only after
    // the signal, so the handshake ends after it.
    std::thread::sleep(Duration::from_millis(300));
    assert!(q.handshaking());
    server.signal("QUIT");
    std::thread::sleep(Duration::from_millis(300));
    let closed = q.drive_until(Duration::from_secs(10), |q| q.closed.is_some());
    assert!(closed, "still open");
    assert!(q.told_go_away(), "no GOAWAY: {:?}", q.server_uni());
    assert_eq!(q.close_code(), Some(0x100), "{:?}", q.closed);
}

/// `--shutdown-delay`: at SIGTERM a connection that has been answered is told GOAWAY
/// and closed (its client comes back through the balancer), while a new one made
/// during the delay is still served, as over HTTP/2.
#[test]
fn the_shutdown_delay_drains_http3_as_http2() {
    let (server, cert, _dirs) = serve(&["--shutdown-delay", "3"]);
    let mut old = Quic::connect(server.tls_addr(), &cert);
    assert_eq!(old.get("/a.txt"), Some(200));
    server.signal("TERM");
    // Closed at the next tick (a second), not at the delay's end (3 s).
    let closed = old.drive_until(Duration::from_secs(2), |q| q.closed.is_some());
    assert!(closed && old.told_go_away(), "{:?}", old.closed);
    assert_eq!(old.close_code(), Some(0x100), "{:?}", old.closed);
    let mut new = Quic::connect(server.tls_addr(), &cert);
    assert_eq!(
        new.get("/a.txt"),
        Some(200),
        "a new connection in the delay"
    );
}
