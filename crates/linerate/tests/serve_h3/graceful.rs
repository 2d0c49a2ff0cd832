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
/// H3_NO_ERROR.
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
}

#[test]
fn sigquit_says_goaway_and_closes_with_no_error() {
    goaway_then_no_error("QUIT");
}

#[test]
fn sigterm_says_goaway_and_closes_with_no_error() {
    goaway_then_no_error("TERM");
}

/// A reload hands each HTTP/3 connection to the next generation's workers with the
/// endpoint that holds it: the connection is not told GOAWAY, stays open, and its
/// next request is answered there, by the reloaded settings (a rule that now refuses
/// the path); a new connection is served too. Counted as kept.
fn a_reload_keeps_the_connection(driver: &str) {
    let certs = docroot();
    let conf = certs.path().join("linerate.toml");
    std::fs::write(&conf, "").unwrap();
    let args = ["--driver", driver, "--status-path", "/.status"];
    let conf_arg = ["--config", conf.to_str().unwrap()];
    let (server, cert, _dirs) = serve(&[&args[..], &conf_arg].concat());
    let mut q = Quic::connect(server.tls_addr(), &cert);
    assert_eq!(q.get("/a.txt"), Some(200));
    std::fs::write(&conf, "[[rule]]\npath = \"/a.txt\"\ndeny = [\"all\"]\n").unwrap();
    for generation in 1..=3 {
        server.signal("HUP");
        server.wait_stderr(&format!("reloaded (generation {generation})"));
        // The generation before hands its endpoint over once it sees the next one.
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            q.get("/a.txt"),
            Some(403),
            "{driver}: after reload {generation}"
        );
        assert!(q.closed.is_none(), "{driver}: closed: {:?}", q.closed);
        assert!(!q.told_go_away(), "{driver}: told GOAWAY at a reload");
    }
    let mut new = Quic::connect(server.tls_addr(), &cert);
    assert_eq!(new.get("/a.txt"), Some(403), "{driver}: a new connection");
    let s = status(&server);
    assert_eq!(s["http3"]["connections_kept"], 3, "{driver}: {s}");
    assert_eq!(s["http3"]["connections"], 2, "{driver}: {s}");
}

#[test]
fn a_reload_keeps_the_connection_under_io_uring() {
    a_reload_keeps_the_connection("auto");
}

#[test]
fn a_reload_keeps_the_connection_under_epoll() {
    a_reload_keeps_the_connection("epoll");
}

/// A reload while no HTTP/3 connection is open: the workers before end at once, with
/// nothing to hand over, and the next generation's workers (which waited for their
/// endpoints) start their own; new connections on both workers' sockets are served.
#[test]
fn a_reload_with_nothing_open_serves_new_connections_on_every_worker() {
    let (server, cert, _dirs) = serve(&["--workers", "2"]);
    server.signal("HUP");
    server.wait_stderr("reloaded (generation 1)");
    for i in 0..8 {
        let mut q = Quic::connect(server.tls_addr(), &cert);
        assert_eq!(q.get("/a.txt"), Some(200), "connection {i}");
    }
}

/// A reload that finds an answer still under way past the handover's limit (a client
/// that reads nothing, its window full) cannot hand the connection over: it is told
/// GOAWAY, its answer finishes whole, and it is closed with H3_NO_ERROR, as at a stop.
#[test]
fn a_reload_during_a_held_answer_says_goaway_and_finishes_it() {
    let root = docroot();
    let data = pattern(4 << 20, 9);
    put(root.path(), "big.bin", &data);
    let certs = docroot();
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &["--http3", "on"]);
    let mut q = Quic::connect_windowed(server.tls_addr(), &cert, 64 << 10, 64 << 10);
    let id = q.open(
        quinn_proto::Dir::Bi,
        &linerate_testkit::quic::get("/big.bin"),
        true,
    );
    q.drive_until(Duration::from_millis(300), |q| {
        !q.stream(id).data.is_empty()
    });
    server.signal("HUP");
    server.wait_stderr("reloaded (generation 1)");
    // Not read for longer than a handover may wait.
    std::thread::sleep(Duration::from_millis(600));
    let closed = q.drive_until(Duration::from_secs(20), |q| q.closed.is_some());
    assert!(closed, "still open");
    assert!(q.told_go_away(), "no GOAWAY: {:?}", q.server_uni());
    assert_eq!(q.close_code(), Some(0x100), "{:?}", q.closed);
    let body = linerate_testkit::quic::body_of(&q.stream(id).data);
    assert_bytes_eq(&body, &data, "the answer under way at the reload");
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
