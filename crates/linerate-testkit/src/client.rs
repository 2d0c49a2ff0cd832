//! Raw-socket clients: requests written as bytes, responses read with the parser.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use crate::files::assert_bytes_eq;
use crate::http::{answers, find, parse_all, parse_response, Response};

/// `METHOD TARGET HTTP/1.1`, `Host: t`, then `extra` (whole lines, CRLF included).
pub fn req(method: &str, target: &str, extra: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").into_bytes()
}

/// A connection with 5 s read and write timeouts and `TCP_NODELAY`.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until EOF, after `got`; a reset or a 5 s silence fails the test.
pub fn read_until_eof(s: &mut TcpStream, mut got: Vec<u8>) -> Vec<u8> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!(
                "{e} instead of EOF, after {} bytes: {:?}",
                got.len(),
                String::from_utf8_lossy(&got[..got.len().min(400)])
            ),
        }
    }
}

/// Writes `request` on a new connection, half-closes if asked, and reads until EOF.
pub fn raw(addr: SocketAddr, request: &[u8], half_close: bool) -> Vec<u8> {
    let mut s = connect(addr);
    s.write_all(request).expect("request written");
    if half_close {
        s.shutdown(Shutdown::Write).expect("half-close");
    }
    read_until_eof(&mut s, Vec::new())
}

/// [`raw`] with the request written one byte per write (TCP_NODELAY: a segment each). A
/// refused write (the server answered and closed) ends the writing.
pub fn raw_bytewise(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    for b in request {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        let _ = s.flush();
        thread::sleep(Duration::from_micros(300));
    }
    read_until_eof(&mut s, Vec::new())
}

/// One request the server must refuse with `status`, `Connection: close`, then a clean
/// close (never a reset before or after the response).
pub fn expect_refused(addr: SocketAddr, request: &[u8], status: u16) -> Response {
    let rs = parse_all(&raw(addr, request, false), &[]);
    let what = String::from_utf8_lossy(&request[..request.len().min(120)]).into_owned();
    assert_eq!(rs.len(), 1, "{what:?}: {rs:?}");
    assert_eq!(rs[0].status, status, "{what:?}: {:?}", rs[0]);
    assert!(
        rs[0].closes(),
        "{what:?}: no Connection: close: {:?}",
        rs[0]
    );
    rs.into_iter().next().unwrap()
}

/// The one response to `request` on a new connection, read until the server closes;
/// `head`: it answers a HEAD.
pub fn exchange(addr: SocketAddr, request: &[u8], head: bool) -> Response {
    let rs = parse_all(&raw(addr, request, false), &[head]);
    let what = String::from_utf8_lossy(&request[..request.len().min(120)]).into_owned();
    assert_eq!(rs.len(), 1, "{what:?}: {rs:?}");
    rs.into_iter().next().unwrap()
}

/// Requests answered with these (status, `Connection: close`, body) exactly, whole and
/// one byte per write.
pub fn expect_answers(addr: SocketAddr, request: &str, want: &[(u16, bool, &[u8])]) {
    let want: Vec<(u16, bool, Vec<u8>)> =
        want.iter().map(|&(s, c, b)| (s, c, b.to_vec())).collect();
    let whole = parse_all(&raw(addr, request.as_bytes(), false), &[]);
    assert_eq!(answers(&whole), want, "{request:?}");
    let bytewise = parse_all(&raw_bytewise(addr, request.as_bytes()), &[]);
    assert_eq!(answers(&bytewise), want, "{request:?} one byte per write");
}

/// How a read of a body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// All the bytes asked for arrived.
    Open,
    Eof,
    Reset,
}

/// A client connection that reads responses one at a time.
pub struct Conn {
    /// The socket, for tests that write, shut down or tune it themselves.
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        Conn {
            s: connect(addr),
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("request written");
    }

    /// Reads more; false at EOF. Errors and 5 s of silence fail the test.
    fn fill(&mut self) -> bool {
        let mut chunk = vec![0u8; 256 * 1024];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!(
                    "reading a response: {e}, {} bytes buffered: {:?}",
                    self.buf.len(),
                    String::from_utf8_lossy(&self.buf[..self.buf.len().min(300)])
                ),
            }
        }
    }

    /// The next response; `head`: it answers a HEAD.
    pub fn response_to(&mut self, head: bool) -> Response {
        loop {
            if let Some((r, n)) = parse_response(&self.buf, head) {
                self.buf.drain(..n);
                return r;
            }
            if !self.fill() {
                panic!(
                    "EOF inside a response: {:?}",
                    String::from_utf8_lossy(&self.buf[..self.buf.len().min(400)])
                );
            }
        }
    }

    /// The next response, to a GET.
    pub fn response(&mut self) -> Response {
        self.response_to(false)
    }

    pub fn get(&mut self, target: &str, extra: &str) -> Response {
        self.send(&req("GET", target, extra));
        self.response()
    }

    pub fn head(&mut self, target: &str, extra: &str) -> Response {
        self.send(&req("HEAD", target, extra));
        self.response_to(true)
    }

    /// The next thing is a clean close, with no byte before it.
    pub fn expect_eof(&mut self) {
        let rest = read_until_eof(&mut self.s, std::mem::take(&mut self.buf));
        assert!(
            rest.is_empty(),
            "{} bytes instead of EOF: {:?}",
            rest.len(),
            String::from_utf8_lossy(&rest[..rest.len().min(400)])
        );
    }

    /// A response head; its body is left for [`Conn::read_upto`].
    pub fn read_head(&mut self) -> Response {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let (r, n) = parse_response(&self.buf[..end + 4], true).expect("a whole head");
                self.buf.drain(..n);
                return r;
            }
            assert!(self.fill(), "EOF before a response head");
        }
    }

    /// Up to `n` more bytes; fewer only if the connection ends first.
    pub fn read_upto(&mut self, n: usize) -> (Vec<u8>, End) {
        let mut out: Vec<u8> = if self.buf.len() > n {
            self.buf.drain(..n).collect()
        } else {
            std::mem::take(&mut self.buf)
        };
        let mut chunk = vec![0u8; 256 * 1024];
        while out.len() < n {
            let want = (n - out.len()).min(chunk.len());
            match self.s.read(&mut chunk[..want]) {
                Ok(0) => return (out, End::Eof),
                Ok(k) => out.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return (out, End::Reset),
                Err(e) => panic!("reading a body: {e} after {} bytes", out.len()),
            }
        }
        (out, End::Open)
    }
}

/// One GET on a new connection with `Connection: close`; the server must close after.
pub fn fetch(addr: SocketAddr, target: &str, extra: &str) -> Response {
    let mut c = Conn::open(addr);
    let r = c.get(target, &format!("{extra}Connection: close\r\n"));
    assert!(
        r.closes(),
        "{target}: close asked for, not announced: {r:?}"
    );
    c.expect_eof();
    r
}

/// A 206 with one range `first-last` of `total` holding `want`.
pub fn expect_range(
    c: &mut Conn,
    target: &str,
    spec: &str,
    first: u64,
    last: u64,
    total: u64,
    want: &[u8],
) {
    let r = c.get(target, &format!("Range: {spec}\r\n"));
    assert_eq!(r.status, 206, "{target} {spec}: {r:?}");
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes {first}-{last}/{total}").as_str()),
        "{target} {spec}"
    );
    assert_eq!(
        r.content_length(),
        Some(last - first + 1),
        "{target} {spec}"
    );
    assert_eq!(r.header("accept-ranges"), Some("bytes"), "{target} {spec}");
    assert!(r.header("etag").is_some(), "{target} {spec}: {r:?}");
    assert_bytes_eq(&r.body, want, &format!("{target} {spec}"));
}

/// Sets `SO_RCVBUF` of a connected socket (which fixes it: no autotuning).
pub fn set_rcvbuf(s: &TcpStream, bytes: i32) {
    use std::os::fd::AsFd;
    linerate_sys::net::set_option(s.as_fd(), linerate_sys::net::SockOpt::ReceiveBuffer, bytes)
        .expect("SO_RCVBUF");
}
