//! An HTTP/3 client of the tests' own, on quinn-proto over a real UDP socket, for what
//! the outside clients will not send: frames on the wrong stream, SETTINGS twice,
//! malformed heads, QPACK that names a table, resets at once, a head past the limits,
//! a peer that never reads. It speaks QUIC correctly (quinn-proto's) and HTTP/3 only
//! as far as each test says: the bytes of each stream are the test's, and what the
//! server answers (each stream's bytes, its reset code, the connection's close code)
//! is read back as sent.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{
    ClientConfig, Connection, ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint,
    EndpointConfig, Event, StreamEvent, StreamId, VarInt,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use linerate_http::h3::qpack::{Decoder, Encoder};
use linerate_http::h3::varint;

/// What one stream of the server's brought.
#[derive(Debug, Default, Clone)]
pub struct Recv {
    /// Its bytes so far.
    pub data: Vec<u8>,
    /// It ended (FIN).
    pub fin: bool,
    /// The server reset it, with this code.
    pub reset: Option<u64>,
}

/// One QUIC connection to a server, driven by the calling thread.
pub struct Quic {
    sock: UdpSocket,
    endpoint: Endpoint,
    conn: Connection,
    handle: ConnectionHandle,
    buf: Vec<u8>,
    streams: HashMap<StreamId, Recv>,
    /// Read what the server sends (off: a peer that never reads, whose windows close).
    pub reading: bool,
    /// How the connection ended, once it has.
    pub closed: Option<ConnectionError>,
}

/// A client's QUIC configuration: TLS 1.3, ALPN `h3`, trusting the certificates of
/// `cert` (a PEM file; none: trusting nothing, for a handshake never finished).
fn client_config(cert: Option<&Path>) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(cert) = cert {
        for c in CertificateDer::pem_file_iter(cert).expect("the certificate reads") {
            roots.add(c.expect("a certificate")).expect("a root");
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC");
    ClientConfig::new(Arc::new(quic))
}

/// The first flight (Initial) of `n` new connections to `server`, sent from one socket
/// and then nothing more, as a client whose source address is spoofed would (it never
/// sees the answers, so it never finishes a handshake): the socket, which the answers
/// reach, and the bytes sent.
pub fn initials(server: SocketAddr, n: usize) -> (UdpSocket, usize) {
    let sock = UdpSocket::bind(SocketAddr::new(server.ip(), 0)).expect("a UDP socket");
    let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
    let mut sent = 0;
    let mut out = Vec::new();
    for _ in 0..n {
        let now = Instant::now();
        let (_, mut conn) = endpoint
            .connect(now, client_config(None), server, "localhost")
            .expect("connects");
        while let Some(t) = conn.poll_transmit(now, 1, &mut out) {
            sent += sock.send_to(&out[..t.size], t.destination).expect("sent");
            out.clear();
        }
    }
    (sock, sent)
}

impl Quic {
    /// A connection to `server`'s UDP port for `localhost`, trusting `cert` (a PEM
    /// file), ALPN `h3`, the handshake done.
    pub fn connect(server: SocketAddr, cert: &Path) -> Quic {
        Quic::connect_as(server, cert, "localhost").expect("a handshake")
    }

    /// A connection to `server`'s UDP port for the name `name` (SNI), trusting `cert`,
    /// the handshake done; how it failed, if it did.
    pub fn connect_as(server: SocketAddr, cert: &Path, name: &str) -> Result<Quic, String> {
        Quic::start_as(server, cert, name).handshake()
    }

    /// This connection once its handshake is done (10 s at most); how it failed, if it
    /// did.
    fn handshake(mut self) -> Result<Quic, String> {
        let up = self.drive_until(Duration::from_secs(10), |q| !q.conn.is_handshaking());
        match (&self.closed, up) {
            (None, true) => Ok(self),
            (closed, _) => Err(format!("no handshake: {closed:?}")),
        }
    }

    /// A connection to `server` for `name`, trusting `cert`, its handshake begun (its
    /// Initial sent) and not driven further: the server's answer waits in the socket
    /// until [`Quic::drive_until`] reads it.
    pub fn start_as(server: SocketAddr, cert: &Path, name: &str) -> Quic {
        Quic::start_with(server, name, client_config(Some(cert)))
    }

    /// A connection to `server` for `localhost`, trusting `cert`, the handshake done,
    /// whose receive windows are `stream` bytes a stream and `connection` bytes in
    /// all: a connection window smaller than a stream's has the server's writes cut
    /// short by the connection's MAX_DATA, not the stream's (as quic-go's first
    /// windows, 512 KiB a stream and 768 KiB in all, sometimes do).
    pub fn connect_windowed(server: SocketAddr, cert: &Path, stream: u32, connection: u32) -> Quic {
        let mut config = client_config(Some(cert));
        let mut t = quinn_proto::TransportConfig::default();
        t.stream_receive_window(VarInt::from_u32(stream));
        t.receive_window(VarInt::from_u32(connection));
        config.transport_config(Arc::new(t));
        Quic::start_with(server, "localhost", config)
            .handshake()
            .expect("a handshake")
    }

    fn start_with(server: SocketAddr, name: &str, config: ClientConfig) -> Quic {
        let sock = socket_near(server);
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        let (handle, conn) = endpoint
            .connect(Instant::now(), config, server, name)
            .expect("connects");
        let mut q = Quic {
            sock,
            endpoint,
            conn,
            handle,
            buf: vec![0; 65536],
            streams: HashMap::new(),
            reading: true,
            closed: None,
        };
        q.flush();
        q
    }

    /// Moves the connection to a new local port (a new socket), as a client whose NAT
    /// rebinds it: what it sends from now on comes from there.
    pub fn move_to_new_port(&mut self) {
        let here = self.sock.local_addr().expect("an address");
        self.sock = socket_near(here);
    }

    /// Whether the handshake is under way still.
    pub fn handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Opens a stream of `dir` (waiting up to 10 s for the server to allow one) and
    /// writes `bytes` on it (and its end with `fin`).
    pub fn open(&mut self, dir: Dir, bytes: &[u8], fin: bool) -> StreamId {
        let mut id = self.conn.streams().open(dir);
        let until = Instant::now() + Duration::from_secs(10);
        while id.is_none() && self.closed.is_none() && Instant::now() < until {
            self.turn(Duration::from_millis(5));
            id = self.conn.streams().open(dir);
        }
        let id = id.expect("a stream the server allows");
        self.send(id, bytes, fin);
        id
    }

    /// Writes `bytes` on stream `id` (all of them, driving the connection while flow
    /// control holds them), and its end with `fin`.
    pub fn send(&mut self, id: StreamId, bytes: &[u8], fin: bool) {
        let mut at = 0;
        let until = Instant::now() + Duration::from_secs(10);
        while at < bytes.len() && self.closed.is_none() && Instant::now() < until {
            match self.conn.send_stream(id).write(&bytes[at..]) {
                Ok(n) => at += n,
                Err(quinn_proto::WriteError::Blocked) => self.turn(Duration::from_millis(5)),
                Err(e) => panic!("stream {id}: {e}"),
            }
        }
        if fin {
            let _ = self.conn.send_stream(id).finish();
        }
        self.flush();
    }

    /// Resets stream `id` with `code`.
    pub fn reset(&mut self, id: StreamId, code: u64) {
        let _ = self
            .conn
            .send_stream(id)
            .reset(VarInt::from_u64(code).expect("a code"));
        self.flush();
    }

    /// Opens a stream of `dir` if the server allows one more now.
    pub fn try_open(&mut self, dir: Dir) -> Option<StreamId> {
        self.conn.streams().open(dir)
    }

    /// Asks the server to stop sending on stream `id` (STOP_SENDING with `code`): a
    /// cancelled answer.
    pub fn stop(&mut self, id: StreamId, code: u64) {
        let _ = self
            .conn
            .recv_stream(id)
            .stop(VarInt::from_u64(code).expect("a code"));
        self.flush();
    }

    /// What the server's stream `id` (or the reply on a stream of ours) brought.
    pub fn stream(&self, id: StreamId) -> Recv {
        self.streams.get(&id).cloned().unwrap_or_default()
    }

    /// The server's unidirectional streams, each with what it brought.
    pub fn server_uni(&self) -> Vec<Recv> {
        let mut ids: Vec<&StreamId> = self
            .streams
            .keys()
            .filter(|id| id.dir() == Dir::Uni && id.initiator() == quinn_proto::Side::Server)
            .collect();
        ids.sort_by_key(|id| id.index());
        ids.into_iter().map(|id| self.streams[id].clone()).collect()
    }

    /// The application error code the server closed the connection with, if it did.
    pub fn close_code(&self) -> Option<u64> {
        match &self.closed {
            Some(ConnectionError::ApplicationClosed(c)) => Some(c.error_code.into_inner()),
            _ => None,
        }
    }

    /// Drives the connection until `done` holds or `most` has passed: whether it held.
    pub fn drive_until(&mut self, most: Duration, mut done: impl FnMut(&Quic) -> bool) -> bool {
        let until = Instant::now() + most;
        loop {
            if done(self) {
                return true;
            }
            if self.closed.is_some() || Instant::now() >= until {
                return done(self);
            }
            self.turn(Duration::from_millis(10).min(until - Instant::now()));
        }
    }

    /// One turn: what there is to send, what comes within `wait`, the timers.
    fn turn(&mut self, wait: Duration) {
        self.flush();
        let wait = match self.conn.poll_timeout() {
            Some(t) => wait.min(t.saturating_duration_since(Instant::now())),
            None => wait,
        };
        let wait = wait.max(Duration::from_millis(1));
        self.sock.set_read_timeout(Some(wait)).expect("a timeout");
        // The first datagram waited for, then what else the socket holds (up to a
        // GSO batch's worth), so a burst is not left to overflow it.
        let mut more = false;
        for _ in 0..64 {
            let Ok((n, from)) = self.sock.recv_from(&mut self.buf) else {
                break;
            };
            if !more {
                self.sock.set_nonblocking(true).expect("non-blocking");
                more = true;
            }
            let now = Instant::now();
            let data = bytes::BytesMut::from(&self.buf[..n]);
            let mut scratch = Vec::new();
            if let Some(DatagramEvent::ConnectionEvent(_, e)) =
                self.endpoint
                    .handle(now, from, None, None, data, &mut scratch)
            {
                self.conn.handle_event(e);
            }
        }
        if more {
            self.sock.set_nonblocking(false).expect("blocking");
        }
        let now = Instant::now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        self.events();
        self.flush();
    }

    fn events(&mut self) {
        while let Some(e) = self.conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(self.handle, e) {
                self.conn.handle_event(back);
            }
        }
        while let Some(e) = self.conn.poll() {
            match e {
                Event::ConnectionLost { reason } => self.closed = Some(reason),
                Event::Stream(StreamEvent::Opened { dir }) => {
                    while let Some(id) = self.conn.streams().accept(dir) {
                        self.streams.entry(id).or_default();
                        self.read(id);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => self.read(id),
                _ => {}
            }
        }
    }

    fn read(&mut self, id: StreamId) {
        if !self.reading {
            return;
        }
        let r = self.streams.entry(id).or_default();
        let mut recv = self.conn.recv_stream(id);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(c)) => r.data.extend_from_slice(&c.bytes),
                Ok(None) => {
                    r.fin = true;
                    break;
                }
                Err(quinn_proto::ReadError::Reset(code)) => {
                    r.reset = Some(code.into_inner());
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        while let Some(t) = self.conn.poll_transmit(Instant::now(), 1, &mut out) {
            let _ = self.sock.send_to(&out[..t.size], t.destination);
            out.clear();
        }
    }

    /// Closes the connection (NO_ERROR) and sends the close.
    pub fn close(&mut self) {
        self.conn
            .close(Instant::now(), VarInt::from_u32(0x100), Bytes::new());
        self.flush();
    }
}

/// A varint (RFC 9000 §16) appended to `out`.
pub fn varint(out: &mut Vec<u8>, v: u64) {
    varint::write(out, v).expect("a varint");
}

/// An HTTP/3 frame: its type, its length, `payload`.
pub fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, kind);
    varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// A client's control stream as it opens: its type (0x00), then an empty SETTINGS.
pub fn control_stream() -> Vec<u8> {
    let mut out = vec![0x00];
    out.extend(frame(0x04, &[]));
    out
}

/// A HEADERS frame of `fields` (pseudo-fields among them, as given), QPACK with the
/// static table and literals.
pub fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let e = Encoder::default();
    let mut section = Vec::new();
    e.start(&mut section);
    for (n, v) in fields {
        e.field(&mut section, n.as_bytes(), v.as_bytes());
    }
    frame(0x01, &section)
}

/// A GET of `path` as HEADERS.
pub fn get(path: &str) -> Vec<u8> {
    headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", path),
    ])
}

/// A response stream's head, decoded: `:status` and the fields, in order; None
/// when the stream does not open with a HEADERS frame.
pub fn response_head(stream: &[u8]) -> Option<Vec<(String, String)>> {
    let (kind, at) = read_varint(stream, 0)?;
    let (len, at) = read_varint(stream, at)?;
    if kind != 0x01 {
        return None;
    }
    let section = stream.get(at..at + usize::try_from(len).ok()?)?;
    let mut fields = Vec::new();
    Decoder::new()
        .decode(section, usize::MAX, &mut |n, v| {
            let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            fields.push((s(n), s(v)));
        })
        .ok()?;
    Some(fields)
}

/// The body of a response stream: its DATA frames' payloads, in order.
pub fn body_of(stream: &[u8]) -> Vec<u8> {
    frames(stream)
        .into_iter()
        .filter(|(t, _)| *t == 0x00)
        .flat_map(|(_, p)| p)
        .collect()
}

/// The `:status` of a response stream.
pub fn status_of(stream: &[u8]) -> Option<u16> {
    let head = response_head(stream)?;
    head.iter()
        .find(|(n, _)| n == ":status")
        .and_then(|(_, v)| v.parse().ok())
}

fn read_varint(b: &[u8], at: usize) -> Option<(u64, usize)> {
    let (v, len) = varint::read(b.get(at..)?)?;
    Some((v, at + len))
}

/// A HEADERS frame of `fields` written as literals with literal names (RFC 9204
/// §4.5.6), byte for byte as given: upper-case names, pseudo-fields anywhere, names no
/// encoder would write.
pub fn headers_literal(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut section = vec![0x00, 0x00];
    for (n, v) in fields {
        prefixed(&mut section, 0x20, 3, n.len());
        section.extend_from_slice(n);
        prefixed(&mut section, 0x00, 7, v.len());
        section.extend_from_slice(v);
    }
    frame(0x01, &section)
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1) after the bits `flags`.
fn prefixed(out: &mut Vec<u8>, flags: u8, n: u32, v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = v - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// The frames of a stream's bytes (after its type, for a unidirectional stream): each
/// frame's type and payload, as far as they are whole.
pub fn frames(mut b: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some((kind, at)) = read_varint(b, 0) {
        let Some((len, at)) = read_varint(b, at) else {
            break;
        };
        let Some(payload) = usize::try_from(len).ok().and_then(|n| b.get(at..at + n)) else {
            break;
        };
        out.push((kind, payload.to_vec()));
        b = &b[at + payload.len()..];
    }
    out
}

impl Quic {
    /// Whether the server said GOAWAY on its control stream, after the SETTINGS that
    /// must come first (RFC 9114 §6.2.1).
    pub fn told_go_away(&self) -> bool {
        self.server_uni()
            .iter()
            .filter(|s| s.data.first() == Some(&0x00))
            .map(|s| frames(&s.data[1..]))
            .any(|f| {
                f.first().is_some_and(|(t, _)| *t == 0x04) && f.iter().any(|(t, _)| *t == 0x07)
            })
    }

    /// A GET of `path` on a new stream, driven until it is answered (up to 5 s): the
    /// status.
    pub fn get(&mut self, path: &str) -> Option<u16> {
        let id = self.open(Dir::Bi, &get(path), true);
        self.drive_until(Duration::from_secs(5), |q| q.stream(id).fin);
        status_of(&self.stream(id).data)
    }
}

/// A UDP socket on an ephemeral port of `addr`'s address, with a receive buffer of
/// 4 MiB where the kernel allows it (as the server asks for its own): a test that
/// has a megabyte in flight while it is busy sending must not lose the server's
/// CONNECTION_CLOSE to a full buffer (then it hears a stateless reset instead).
fn socket_near(addr: SocketAddr) -> UdpSocket {
    use std::os::fd::AsFd;
    let sock = UdpSocket::bind(SocketAddr::new(addr.ip(), 0)).expect("a UDP socket");
    let _ = linerate_sys::udp::buffer(sock.as_fd(), false, 4 << 20);
    sock
}
