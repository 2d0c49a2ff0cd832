//! A connection driven over real sockets: pipelined answers in order, files sent whole,
//! half-closed clients, aborted answers and what the log says of them.

use super::*;

/// An idle connection's state is what every held connection costs (issue 28: it
/// had grown back to 544 bytes unnoticed; 312, then 320 with a PROXY header's
/// wait, its driver token made from slot and serial instead of kept). The output
/// queue, the TLS records, the body skipper and the PROXY wait are boxed and let go
/// when idle; the limits are shared; the deadline entry is its tick alone.
#[test]
fn an_idle_connection_is_kept_small() {
    let (conn, http) = (
        std::mem::size_of::<Conn>(),
        std::mem::size_of::<Connection>(),
    );
    assert!(conn <= 320, "Conn is {conn} bytes");
    assert!(http <= 144, "http::Connection is {http} bytes");
}
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A connection of ours on one end of a loopback pair; the client on the other.
fn pair() -> (Conn, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (sock, peer) = l.accept().unwrap();
    sock.set_nonblocking(true).unwrap();
    client.set_nonblocking(true).unwrap();
    let limits = linerate_http::request::Limits::default();
    (
        Conn::new(
            sock.into(),
            Peer::Ip(peer),
            limits.into(),
            (0, 1),
            false,
            None,
            Instant::now(),
        ),
        client,
    )
}

/// What the access log was told: (request line, status, aborted).
type Logged = Vec<(String, u16, Option<Aborted>)>;

/// Drives `c` (readable) until it says to close or `want` bytes reached the client,
/// reading them as they come; (what the client got, the last answer of `drive`).
fn run(
    c: &mut Conn,
    s: &mut Site,
    client: &mut TcpStream,
    want: usize,
    log: &mut Logged,
) -> (Vec<u8>, After) {
    let mut scratch = vec![0u8; READ_BYTES];
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let after = c.drive(
            s,
            (
                &mut linerate_event::EpollDriver::new().unwrap(),
                &mut scratch,
            ),
            true,
            false,
            Instant::now(),
            &mut |_, r, a| log.push((r.record.request_line.clone(), r.record.status.code(), a)),
        );
        loop {
            match client.read(&mut buf) {
                Ok(0) => return (got, after),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
        }
        if after != After::Keep || got.len() >= want {
            return (got, after);
        }
        assert!(
            Instant::now() < deadline,
            "stuck at {} of {want} bytes",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_and_each_logged_once() {
    let (_root, mut site) = crate::site::tests::site_with(false, true);
    let (mut c, mut client) = pair();
    client
        .write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut log = Logged::new();
    let (got, after) = run(&mut c, &mut site, &mut client, 66_000, &mut log);
    assert_eq!(after, After::Keep);
    let text = String::from_utf8_lossy(&got);
    let a = text.find("hello").expect("the small file");
    let big = text
        .find("Content-Length: 65536")
        .expect("the large file's head");
    let nope = text.find("HTTP/1.1 404").expect("the 404");
    assert!(a < big && big < nope, "in order");
    assert!(
        got.windows(4096).any(|w| w.iter().all(|&b| b == 3)),
        "the body"
    );
    let lines: Vec<(&str, u16)> = log.iter().map(|(l, s, _)| (l.as_str(), *s)).collect();
    assert_eq!(
        lines,
        [
            ("GET /a.txt HTTP/1.1", 200),
            ("GET /big.bin HTTP/1.1", 200),
            ("GET /nope HTTP/1.1", 404)
        ]
    );
    assert!(log.iter().all(|(_, _, a)| a.is_none()));
    assert!(c.is_idle());
}

#[test]
fn a_file_response_sent_whole_is_logged_and_leaves_the_connection_idle() {
    let (_root, mut site) = crate::site::tests::site_with(false, true);
    let (mut c, mut client) = pair();
    client
        .write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut log = Logged::new();
    let (got, after) = run(&mut c, &mut site, &mut client, 64 << 10, &mut log);
    assert_eq!(after, After::Keep);
    assert!(got.len() > 64 << 10, "{}", got.len());
    // The file went out by the engine, its last byte in the last turn: that turn
    // logs it, with nothing left for a later event to find.
    let lines: Vec<&str> = log.iter().map(|(l, _, _)| l.as_str()).collect();
    assert_eq!(lines, ["GET /big.bin HTTP/1.1"]);
    assert!(c.is_idle());
}

#[test]
fn a_half_closed_client_gets_its_answer_then_the_connection_closes() {
    let (_root, mut site) = crate::site::tests::site(false);
    let (mut c, mut client) = pair();
    client
        .write_all(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    c.peer_hung_up();
    let mut log = Logged::new();
    let (got, after) = run(&mut c, &mut site, &mut client, usize::MAX, &mut log);
    assert!(String::from_utf8_lossy(&got).ends_with("hello"), "{got:?}");
    assert_ne!(after, After::Keep);
}

#[test]
fn an_aborted_response_is_logged_with_the_bytes_that_left() {
    let (root, mut site) = crate::site::tests::site_with(false, true);
    let (mut c, mut client) = pair();
    // Large enough not to fit the socket buffers while the client reads nothing.
    std::fs::write(root.path().join("huge.bin"), vec![1u8; 32 << 20]).unwrap();
    client
        .write_all(
            b"GET /huge.bin HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        .unwrap();
    let mut scratch = vec![0u8; READ_BYTES];
    let mut log = Logged::new();
    for _ in 0..20 {
        let after = c.drive(
            &mut site,
            (
                &mut linerate_event::EpollDriver::new().unwrap(),
                &mut scratch,
            ),
            true,
            false,
            Instant::now(),
            &mut |_, r, a| log.push((r.record.request_line.clone(), r.record.status.code(), a)),
        );
        assert_eq!(after, After::Keep);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(c.busy());
    let n = c.abort(Cut::Client, &mut |_, r, a| {
        log.push((r.record.request_line.clone(), r.record.status.code(), a))
    });
    assert_eq!(n, 2, "both responses were cut");
    let huge = log.iter().find(|(l, _, _)| l.contains("huge")).unwrap();
    let a = huge.2.expect("cut");
    assert_eq!(a.cut, Cut::Client);
    assert!(!a.nothing_sent);
    assert!(a.body_sent > 0 && a.body_sent < 32 << 20, "{a:?}");
    let small = log.iter().find(|(l, _, _)| l.contains("a.txt")).unwrap();
    assert_eq!(
        small.2.map(|a| (a.nothing_sent, a.body_sent)),
        Some((true, 0))
    );
}
