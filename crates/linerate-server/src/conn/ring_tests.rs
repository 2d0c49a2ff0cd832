//! A connection under a driver that sends on its ring, completions arriving later.

use super::*;
use linerate_event::{Interest, Ready};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A ring driver that keeps every operation ([`Submitted::Pending`]); the test
/// gives the completions.
struct Held;

impl Driver for Held {
    fn register(&mut self, _: std::os::fd::BorrowedFd<'_>, _: u64, _: Interest) -> io::Result<()> {
        Ok(())
    }
    fn deregister(&mut self, _: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
        Ok(())
    }
    fn wait(&mut self, _: &mut Vec<Ready>, _: Duration) -> io::Result<()> {
        Ok(())
    }
    fn execute(
        &mut self,
        _: std::os::fd::BorrowedFd<'_>,
        _: &mut Op<'_>,
        _: Option<&mut linerate_sys::zerocopy::ZeroCopy>,
    ) -> Submitted {
        Submitted::Pending
    }
}

/// A connection under the ring with a response queued, its head's gather on the
/// ring.
fn sending() -> (Conn, Site, tempfile::TempDir, TcpStream) {
    let (root, mut site) = crate::site::tests::site(false);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (sock, peer) = l.accept().unwrap();
    let limits = linerate_http::request::Limits::default();
    let mut c = Conn::new(
        sock.into(),
        Peer::Ip(peer),
        limits.into(),
        (0, 1),
        true,
        None,
        Instant::now(),
    );
    c.received(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n", Instant::now());
    drive(&mut c, &mut site);
    (c, site, root, client)
}

fn drive(c: &mut Conn, site: &mut Site) -> After {
    let mut scratch = vec![0u8; READ_BYTES];
    c.drive(
        site,
        (&mut Held, &mut scratch),
        false,
        false,
        Instant::now(),
        &mut |_, _, _| {},
    )
}

/// An operation that comes back from the ring full waits for the next writable
/// edge, unless an event came while it was there (the edge it would wait for may
/// have been that one): then it is tried again in the worker's next turn.
#[test]
fn a_full_answer_from_the_ring_after_an_event_is_tried_again_not_waited_on() {
    // No event while it was on the ring: the next edge is waited for.
    let (mut c, mut site, _root, _client) = sending();
    c.sent(Err(Errno::AGAIN));
    assert_eq!(drive(&mut c, &mut site), After::Keep);
    assert!(!c.take_yielded(), "waits for an edge");
    // An event came meanwhile: tried again without one.
    let (mut c, mut site, _root, _client) = sending();
    assert_eq!(drive(&mut c, &mut site), After::Keep);
    c.sent(Err(Errno::AGAIN));
    assert_eq!(drive(&mut c, &mut site), After::Keep);
    assert!(c.take_yielded(), "tried again in the next turn");
}
