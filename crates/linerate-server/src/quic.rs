//! QUIC for HTTP/3: one endpoint per worker, driven by the worker's own loop.
//!
//! The protocol is `quinn-proto`'s: a QUIC state machine with no I/O and no runtime,
//! which takes datagrams and the time and hands back datagrams to send and the next
//! time it wants to be woken, so it fits the workers as HTTP/2 does (sans I/O, clock
//! passed in). The alternatives do not fit this house: quiche brings BoringSSL beside
//! rustls; s2n-quic is built on aws-lc-rs and owns its sockets and runtime; `h3` and
//! `h3-quinn` need tokio. TLS is rustls with the ring provider, as for HTTPS.
//!
//! What is here: [`Endpoint`] keeps the quinn-proto endpoint and its connections, feeds
//! them what a socket received ([`Endpoint::receive`], a GRO batch cut into its
//! datagrams), passes the events between the endpoint and its connections, and hands
//! the datagrams to send to the caller as GSO batches ([`Endpoint::transmit`]), each of
//! up to [`linerate_sys::udp::MAX_SEGMENTS`] datagrams and no more than one IP packet
//! of payload ([`linerate_sys::udp::gso_batch`]), as seed 000 fills a socket in one
//! call. HTTP/3 itself (frames, QPACK) is `linerate_http::h3`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    AckFrequencyConfig, ConnectionError, ConnectionHandle, DatagramEvent, Dir, EcnCodepoint,
    EndpointConfig, IdleTimeout, ServerConfig, StreamEvent, StreamId, TransportConfig, VarInt,
};

use linerate_sys::udp::{Head, Received};
use rustls::server::{ProducesTickets, StoresServerSessions};

mod route;

pub(crate) use route::{wake_current, Wake, CID_LEN};

/// The HTTP/3 ALPN token.
pub(crate) const ALPN_H3: &[u8] = b"h3";

/// The TLS side of QUIC for a server: TLS 1.3 only (QUIC has no other), ALPN `h3`, the
/// certificates the HTTPS listener `https` chooses (its own, SNI sites and ACME
/// included) and its sessions: its ticketer (the process's, or the shared key file's),
/// so a session made over QUIC resumes on any worker, after a reload and on another
/// instance as over TCP. With `early_data` (`--http3-early-data on`) the client may send
/// requests in 0-RTT: rustls takes early data only with sessions it holds and gives out
/// once (RFC 8446 §8's single-use tickets, its anti-replay), so the sessions are then
/// the listener's session cache's, on this instance and generation only. Every session
/// resumed is counted in `resumed`.
pub(crate) fn server_config(
    https: &rustls::ServerConfig,
    transport: &Transport,
    resumed: &Arc<AtomicU64>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let provider = Arc::new(crate::tls::provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_cert_resolver(Arc::clone(&https.cert_resolver));
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    // The server's order of cipher suites decides, as over HTTPS: AES-128-GCM first.
    tls.ignore_client_order = true;
    let counted = Counted {
        inner: Sessions {
            ticketer: Arc::clone(&https.ticketer),
            storage: Arc::clone(&https.session_storage),
        },
        resumed: Arc::clone(resumed),
    };
    let counted = Arc::new(counted);
    tls.session_storage = Arc::clone(&counted) as _;
    if transport.early_data {
        // quinn-proto takes 0 (no early data) or u32::MAX only.
        tls.max_early_data_size = u32::MAX;
    } else {
        tls.max_early_data_size = 0;
        tls.ticketer = counted;
    }
    let quic = quinn_proto::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| rustls::Error::General(e.to_string()))?;
    let mut config = ServerConfig::with_crypto(Arc::new(quic));
    config.transport_config(Arc::new(transport.config()));
    Ok(Arc::new(config))
}

/// What a server's QUIC connections may do: early data or not, how long one may be
/// idle (`--idle-timeout`, quinn-proto's idle timer: no packet either way for that
/// long), and how many request streams a client may have open at once (HTTP/2's
/// SETTINGS_MAX_CONCURRENT_STREAMS: past them QUIC gives no credit, so a client cannot
/// open more).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transport {
    pub early_data: bool,
    pub idle: Duration,
    pub streams: u32,
}

/// Packets a client that takes the ACK frequency extension receives before it
/// acknowledges them (RFC 9000's default is 2). 10 is Chromium's acknowledgement
/// decimation; measured against 2 and 32 in BENCHMARKS.md (a client that reads a batch
/// of datagrams at a time acknowledges the batch anyway, so the gain measured there is
/// mostly [`ACK_DELAY`]'s).
const ACK_EVERY: u32 = 10;
/// The longest a client that takes the extension holds an acknowledgement back, so
/// that a window of fewer than [`ACK_EVERY`] packets (slow start, a response's tail)
/// is acknowledged soon (the client's own default is 25 ms).
const ACK_DELAY: Duration = Duration::from_millis(1);

/// A client's unidirectional streams at once: its control and QPACK streams, and room
/// for reserved ones (RFC 9114 §6.2.3).
const UNI_STREAMS: u32 = 16;

impl Transport {
    fn config(&self) -> TransportConfig {
        let mut t = TransportConfig::default();
        t.max_concurrent_bidi_streams(VarInt::from_u32(self.streams));
        t.max_concurrent_uni_streams(VarInt::from_u32(UNI_STREAMS));
        // Past the range QUIC's idle timeout takes (2^62 ms): none.
        t.max_idle_timeout(IdleTimeout::try_from(self.idle).ok());
        // Fewer acknowledgements to receive (draft-ietf-quic-ack-frequency, which
        // quinn-proto clients take): one per ACK_EVERY packets, or after 1 ms.
        let mut ack = AckFrequencyConfig::default();
        ack.ack_eliciting_threshold(VarInt::from_u32(ACK_EVERY - 1));
        ack.max_ack_delay(Some(ACK_DELAY));
        t.ack_frequency_config(Some(ack));
        t
    }
}

/// The HTTPS listener's ticketer and session cache.
#[derive(Debug)]
struct Sessions {
    ticketer: Arc<dyn ProducesTickets>,
    storage: Arc<dyn StoresServerSessions>,
}

/// [`Sessions`] that count each session a client resumes: a ticket opened, or a held
/// session taken.
#[derive(Debug)]
struct Counted {
    inner: Sessions,
    resumed: Arc<AtomicU64>,
}

impl Counted {
    fn count<T>(&self, found: Option<T>) -> Option<T> {
        if found.is_some() {
            self.resumed.fetch_add(1, Ordering::Relaxed);
        }
        found
    }
}

impl ProducesTickets for Counted {
    fn enabled(&self) -> bool {
        self.inner.ticketer.enabled()
    }
    fn lifetime(&self) -> u32 {
        self.inner.ticketer.lifetime()
    }
    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.ticketer.encrypt(plain)
    }
    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.count(self.inner.ticketer.decrypt(cipher))
    }
}

impl StoresServerSessions for Counted {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.storage.put(key, value)
    }
    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.storage.get(key)
    }
    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.count(self.inner.storage.take(key))
    }
    fn can_cache(&self) -> bool {
        self.inner.storage.can_cache()
    }
}

/// What happened on a connection, for the HTTP/3 layer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The handshake completed.
    Connected(ConnectionHandle),
    /// The peer opened streams of this direction (take them with
    /// `streams().accept(dir)`).
    Opened(ConnectionHandle, Dir),
    /// A stream has data, its end or a reset to read.
    Readable(ConnectionHandle, StreamId),
    /// A stream that was blocked by flow control may take more.
    Writable(ConnectionHandle, StreamId),
    /// The peer asked us to stop sending on a stream, with this error code.
    Stopped(ConnectionHandle, StreamId, VarInt),
    /// A stream this side finished has all its bytes acknowledged.
    Finished(ConnectionHandle, StreamId),
    /// The connection is closed (by either side, or timed out) and forgotten.
    Closed(ConnectionHandle),
}

/// When a new connection's address is validated first with a Retry (RFC 9000 §8.1.2):
/// the client must echo a token to the address it claims before the server spends a
/// handshake on it, at the cost of one round trip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Retry {
    /// When more than [`RETRY_ABOVE`] handshakes are under way on the endpoint: a
    /// flood of Initials from spoofed addresses costs a datagram each, no handshake.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Off,
}

crate::config::words!(Retry {
    "auto" => Auto,
    "always" => Always,
    "off" => Off,
});

crate::settings::as_text!(Retry);

/// Handshakes under way on one endpoint above which [`Retry::Auto`] validates new
/// addresses first.
pub(crate) const RETRY_ABOVE: usize = 64;

/// A batch the socket would not take yet, kept whole for the next try.
#[derive(Debug)]
struct Held {
    head: Head,
    bytes: Vec<u8>,
}

/// One worker's QUIC endpoint and its connections.
pub(crate) struct Endpoint {
    inner: quinn_proto::Endpoint,
    conns: HashMap<ConnectionHandle, quinn_proto::Connection>,
    /// Connections to poll for events and datagrams on the next turn.
    touched: Vec<ConnectionHandle>,
    /// Datagrams the endpoint answers by itself (version negotiation, stateless
    /// resets, refusals), and a batch the socket refused for now.
    responses: VecDeque<Held>,
    held: Option<Held>,
    /// Send GSO batches (cleared when the kernel refuses one).
    pub gso: bool,
    scratch: Vec<u8>,
    /// When new addresses are validated first.
    pub retry: Retry,
    /// Retries sent, and connections closed by the idle timeout, not yet read by the
    /// caller (for the counters).
    pub retries: u64,
    pub idle_closed: u64,
    /// Datagrams read here and handed to the endpoint that owns their connection
    /// (misrouted), not yet read by the caller.
    pub handed: u64,
    /// Its place in the process's connection-ID routing (none: a test's endpoint).
    place: Option<route::Place>,
    /// It takes no new connection (a stop or reload began).
    draining: bool,
    /// Its worker handed the endpoint on (a reload): what it still reads of socket
    /// (inode) this goes to the owner.
    spent: Option<u64>,
}

impl Endpoint {
    /// An endpoint that accepts connections with `server` (`None`: a client only),
    /// outside the routing (the tests').
    #[cfg(test)]
    pub fn new(server: Option<Arc<ServerConfig>>, gso: bool) -> Endpoint {
        Endpoint::with(EndpointConfig::default(), server, gso, None)
    }

    /// A server's endpoint on the UDP socket `socket` (its inode, the same for every
    /// worker generation's copy of it; `index`, its place in the `SO_REUSEPORT`
    /// group), in the connection-ID routing: its IDs name the socket and the endpoint,
    /// what others read of its connections is handed to it (and `wake` wakes its
    /// worker to take it, [`Endpoint::take_mail`]), and from now on it takes the
    /// socket's new connections.
    pub fn routed(
        server: Arc<ServerConfig>,
        gso: bool,
        socket: u64,
        index: u8,
        wake: route::Wake,
    ) -> Endpoint {
        let place = route::Place::take(socket, wake);
        let mut config = EndpointConfig::default();
        let tag = place.tag;
        config.cid_generator(move || Box::new(route::Issuer::new(index, tag)));
        Endpoint::with(config, Some(server), gso, Some(place))
    }

    fn with(
        config: EndpointConfig,
        server: Option<Arc<ServerConfig>>,
        gso: bool,
        place: Option<route::Place>,
    ) -> Endpoint {
        let config = Arc::new(config);
        Endpoint {
            inner: quinn_proto::Endpoint::new(config, server, true, None),
            conns: HashMap::new(),
            touched: Vec::new(),
            responses: VecDeque::new(),
            held: None,
            gso,
            scratch: Vec::new(),
            retry: Retry::default(),
            retries: 0,
            idle_closed: 0,
            handed: 0,
            place,
            draining: false,
            spent: None,
        }
    }

    /// An endpoint with nothing, on socket `socket` (its inode): what a worker keeps
    /// once it has handed its own on. What it reads until its watch ends goes to the
    /// endpoint that owns it, as a misrouted datagram.
    pub fn spent(socket: u64) -> Endpoint {
        let mut e = Endpoint::with(EndpointConfig::default(), None, false, None);
        e.spent = Some(socket);
        e
    }

    /// Taken on by the next generation's worker at a reload: new connections are
    /// accepted with `server` (the reload's certificates and transport), its worker
    /// woken by `wake`; the connections it has go on as they are.
    pub fn adopted(&mut self, server: Arc<ServerConfig>, wake: route::Wake) {
        self.inner.set_server_config(Some(server));
        if let Some(p) = &self.place {
            p.rewake(wake);
        }
    }

    /// Whether it takes its socket's new connections (none handed it on since).
    pub fn is_current(&self) -> bool {
        self.place.as_ref().is_some_and(route::Place::is_current)
    }

    /// Takes the datagrams other endpoints handed to this one.
    pub fn take_mail(&mut self, now: Instant) {
        let Some(mail) = self.place.as_ref().map(|p| p.mailbox.take()) else {
            return;
        };
        for (r, bytes) in mail {
            let ecn = EcnCodepoint::from_bits(r.ecn);
            self.datagram(now, r.from, r.to, ecn, &bytes);
        }
    }

    /// Takes no new connection from now on (a stop or reload: the next generation's
    /// workers take them).
    pub fn refuse_new(&mut self) {
        self.draining = true;
        self.inner.set_server_config(None);
    }

    /// Connections open now: those closed (by either side) and only draining are not
    /// counted.
    pub fn open(&self) -> usize {
        self.conns.values().filter(|c| !c.is_closed()).count()
    }

    /// A connection, to read and write its streams.
    pub fn conn(&mut self, h: ConnectionHandle) -> Option<&mut quinn_proto::Connection> {
        self.touched.push(h);
        self.conns.get_mut(&h)
    }

    /// Opens a connection to `remote` as a client (the tests' client).
    #[cfg(test)]
    pub fn connect(
        &mut self,
        now: Instant,
        config: quinn_proto::ClientConfig,
        remote: SocketAddr,
        server_name: &str,
    ) -> Result<ConnectionHandle, quinn_proto::ConnectError> {
        let (h, conn) = self.inner.connect(now, config, remote, server_name)?;
        self.conns.insert(h, conn);
        self.touched.push(h);
        Ok(h)
    }

    /// What one receive brought: `data` is `r.len` bytes, one datagram or (GRO) several
    /// of `r.segment` bytes each.
    pub fn receive(&mut self, now: Instant, r: &Received, data: &[u8]) {
        let ecn = EcnCodepoint::from_bits(r.ecn);
        let step = r.segment.unwrap_or(data.len()).max(1);
        for datagram in data[..r.len].chunks(step) {
            if let Some(socket) = self.spent {
                self.handed += u64::from(route::hand_on(socket, r, datagram));
                continue;
            }
            let theirs = self.place.as_ref();
            if theirs.is_some_and(|p| p.forward(r, datagram, self.draining)) {
                self.handed += 1;
                continue;
            }
            self.datagram(now, r.from, r.to, ecn, datagram);
        }
    }

    fn datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        to: Option<IpAddr>,
        ecn: Option<EcnCodepoint>,
        datagram: &[u8],
    ) {
        self.scratch.clear();
        let data = BytesMut::from(datagram);
        match self
            .inner
            .handle(now, from, to, ecn, data, &mut self.scratch)
        {
            Some(DatagramEvent::ConnectionEvent(h, event)) => {
                if let Some(c) = self.conns.get_mut(&h) {
                    c.handle_event(event);
                    self.touched.push(h);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.scratch.clear();
                if !incoming.remote_address_validated()
                    && incoming.may_retry()
                    && self.wants_retry()
                {
                    match self.inner.retry(incoming, &mut self.scratch) {
                        Ok(t) => {
                            self.retries += 1;
                            self.respond(&t);
                        }
                        Err(e) => self.inner.ignore(e.into_incoming()),
                    }
                    return;
                }
                match self.inner.accept(incoming, now, &mut self.scratch, None) {
                    Ok((h, conn)) => {
                        self.conns.insert(h, conn);
                        self.touched.push(h);
                    }
                    Err(e) => {
                        if let Some(t) = e.response {
                            self.respond(&t);
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => self.respond(&t),
            None => {}
        }
    }

    /// Whether a new connection from an address not validated yet gets a Retry.
    fn wants_retry(&self) -> bool {
        match self.retry {
            Retry::Always => true,
            Retry::Off => false,
            Retry::Auto => {
                // Counted up to the threshold only: a flood makes it no slower.
                let shaking = self.conns.values().filter(|c| c.is_handshaking());
                shaking.take(RETRY_ABOVE + 1).count() > RETRY_ABOVE
            }
        }
    }

    /// Keeps a datagram the endpoint wrote in `scratch` to send.
    fn respond(&mut self, t: &quinn_proto::Transmit) {
        self.responses.push_back(Held {
            head: head_of(t),
            bytes: self.scratch[..t.size].to_vec(),
        });
    }

    /// The earliest time a connection wants to be woken.
    pub fn next_timeout(&mut self) -> Option<Instant> {
        self.conns
            .values_mut()
            .filter_map(|c| c.poll_timeout())
            .min()
    }

    /// Wakes the connections whose time has come.
    pub fn timeouts(&mut self, now: Instant) {
        for (h, c) in &mut self.conns {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
                self.touched.push(*h);
            }
        }
    }

    /// Passes the events between the endpoint and the connections touched since the
    /// last turn, and gives the HTTP/3 layer theirs.
    pub fn events(&mut self, out: &mut Vec<Event>) {
        self.touched.sort_unstable();
        self.touched.dedup();
        for h in std::mem::take(&mut self.touched) {
            let Some(c) = self.conns.get_mut(&h) else {
                continue;
            };
            while let Some(e) = c.poll_endpoint_events() {
                if let Some(back) = self.inner.handle_event(h, e) {
                    c.handle_event(back);
                }
            }
            while let Some(e) = c.poll() {
                out.extend(match e {
                    quinn_proto::Event::Connected => Some(Event::Connected(h)),
                    quinn_proto::Event::Stream(StreamEvent::Opened { dir }) => {
                        Some(Event::Opened(h, dir))
                    }
                    quinn_proto::Event::Stream(StreamEvent::Readable { id }) => {
                        Some(Event::Readable(h, id))
                    }
                    quinn_proto::Event::Stream(StreamEvent::Writable { id }) => {
                        Some(Event::Writable(h, id))
                    }
                    quinn_proto::Event::Stream(StreamEvent::Stopped { id, error_code }) => {
                        Some(Event::Stopped(h, id, error_code))
                    }
                    quinn_proto::Event::Stream(StreamEvent::Finished { id }) => {
                        Some(Event::Finished(h, id))
                    }
                    quinn_proto::Event::ConnectionLost {
                        reason: ConnectionError::TimedOut,
                    } => {
                        self.idle_closed += 1;
                        None
                    }
                    _ => None,
                });
            }
            // A connection the HTTP/3 layer writes to after these events is touched
            // again by [`Endpoint::conn`]; its datagrams go at the next transmit.
            if c.is_drained() {
                self.conns.remove(&h);
                out.push(Event::Closed(h));
            }
        }
    }

    /// Hands every datagram there is to send to `send`, as GSO batches when `gso` is
    /// on: where and how, and the buffer holding the bytes, which `send` may take (and
    /// leave another in its place, as the ring's send does: no copy). `send` says how
    /// the socket took a batch: a would-block keeps it for the next call (and stops
    /// there), a refused GSO batch is sent again one datagram at a time and GSO is
    /// turned off.
    pub fn transmit(&mut self, now: Instant, send: &mut Send<'_>) -> io::Result<()> {
        if let Some(held) = self.held.take() {
            self.send_held(held, send)?;
        }
        while let Some(held) = self.responses.pop_front() {
            self.send_held(held, send)?;
        }
        let gso = self.gso;
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for h in handles {
            loop {
                self.scratch.clear();
                let Some(c) = self.conns.get_mut(&h) else {
                    break;
                };
                // A batch no larger than one GSO send takes: a larger one is refused
                // whole (EMSGSIZE), every datagram in it lost.
                let max = if gso {
                    linerate_sys::udp::gso_batch(usize::from(c.current_mtu()))
                } else {
                    1
                };
                let Some(t) = c.poll_transmit(now, max, &mut self.scratch) else {
                    break;
                };
                let head = head_of(&t);
                self.scratch.truncate(t.size);
                // Sent from the buffer QUIC wrote it in (taken by the ring, or kept for
                // the next batch); kept whole when the socket is full.
                if let Err(e) = send_batch(head, &mut self.scratch, send, &mut self.gso) {
                    let bytes = std::mem::take(&mut self.scratch);
                    self.held = Some(Held { head, bytes });
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn send_held(&mut self, mut held: Held, send: &mut Send<'_>) -> io::Result<()> {
        let result = send_batch(held.head, &mut held.bytes, send, &mut self.gso);
        if result.is_err() {
            self.held = Some(held);
        }
        result
    }
}

/// How a batch goes to the socket: where and how, and the buffer holding it, which the
/// send may take (leaving a spare one); the bytes taken, or why not.
pub(crate) type Send<'a> = dyn FnMut(Head, &mut Vec<u8>) -> io::Result<usize> + 'a;

/// Where and how quinn-proto's transmit `t` goes.
fn head_of(t: &quinn_proto::Transmit) -> Head {
    Head {
        to: t.destination,
        from: t.src_ip,
        ecn: t.ecn.map_or(0, |e| e as u8),
        segment: t.segment_size.and_then(|s| u16::try_from(s).ok()),
    }
}

/// Sends the batch in `bytes`: `WouldBlock` when the socket is full (nothing sent;
/// `bytes` kept for the next try), one datagram at a time from then on (`gso`
/// cleared) when the kernel refuses a GSO batch.
fn send_batch(
    head: Head,
    bytes: &mut Vec<u8>,
    send: &mut Send<'_>,
    gso: &mut bool,
) -> io::Result<()> {
    match send(head, bytes) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(e),
        Err(e) if head.segment.is_some() && linerate_sys::udp::gso_refused(&e) => {
            *gso = false;
            let seg = usize::from(head.segment.unwrap_or(u16::MAX)).max(1);
            let one_head = Head {
                segment: None,
                ..head
            };
            for one in bytes.chunks(seg) {
                // A datagram the socket would not take now is lost, as on the wire.
                let _ = send(one_head, &mut one.to_vec());
            }
            Ok(())
        }
        // A datagram the network refuses (unreachable, too big) is lost, as on the
        // wire: QUIC sends it again or gives up by itself.
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A server and a client endpoint joined by an in-memory network.
    struct Pair {
        server: Endpoint,
        client: Endpoint,
        server_addr: SocketAddr,
        client_addr: SocketAddr,
        now: Instant,
        /// Batches each sent: (to, segment, bytes).
        wire: Vec<(SocketAddr, Option<u16>, Vec<u8>)>,
        /// Batches of several datagrams that crossed.
        segmented: usize,
    }

    fn certificate() -> (
        rustls::pki_types::CertificateDer<'static>,
        Arc<rustls::sign::CertifiedKey>,
    ) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let der = c.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(c.signing_key.serialize_der().into());
        let provider = rustls::crypto::ring::default_provider();
        let signer = provider.key_provider.load_private_key(key).unwrap();
        let key = Arc::new(rustls::sign::CertifiedKey::new(vec![der.clone()], signer));
        (der, key)
    }

    impl Pair {
        fn new(gso: bool) -> Pair {
            let (der, key) = certificate();
            let mut roots = rustls::RootCertStore::empty();
            roots.add(der).unwrap();
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let https = rustls::ServerConfig::builder_with_provider(provider)
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_no_client_auth()
                .with_cert_resolver(Arc::new(Single(key)));
            let transport = Transport {
                early_data: false,
                idle: Duration::from_secs(30),
                streams: 100,
            };
            let config = server_config(&https, &transport, &Arc::default()).unwrap();
            let server = Endpoint::new(Some(config), gso);
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_protocol_versions(&[&rustls::version::TLS13])
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
            tls.alpn_protocols = vec![ALPN_H3.to_vec()];
            let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
            let mut client = Endpoint::new(None, gso);
            let now = Instant::now();
            let server_addr: SocketAddr = "127.0.0.1:4433".parse().unwrap();
            let config = quinn_proto::ClientConfig::new(Arc::new(quic));
            client
                .connect(now, config, server_addr, "localhost")
                .unwrap();
            Pair {
                server,
                client,
                server_addr,
                client_addr: "127.0.0.1:50000".parse().unwrap(),
                now,
                wire: Vec::new(),
                segmented: 0,
            }
        }

        /// Runs both sides until nothing moves; returns each side's events.
        fn run(&mut self) -> (Vec<Event>, Vec<Event>) {
            let (mut se, mut ce) = (Vec::new(), Vec::new());
            for _ in 0..100 {
                self.client.events(&mut ce);
                self.server.events(&mut se);
                let wire = &mut self.wire;
                // Taken, as the ring's send takes them: the endpoint goes on with the
                // empty buffer left in their place.
                let mut put = |h: Head, bytes: &mut Vec<u8>| {
                    let n = bytes.len();
                    wire.push((h.to, h.segment, std::mem::take(bytes)));
                    Ok(n)
                };
                self.client.transmit(self.now, &mut put).unwrap();
                self.server.transmit(self.now, &mut put).unwrap();
                if self.wire.is_empty() {
                    // A timer due soon (an acknowledgement held back for up to
                    // ACK_DELAY) moves things on; past it, nothing will.
                    let soon = self.now + ACK_DELAY;
                    let due = [self.client.next_timeout(), self.server.next_timeout()]
                        .into_iter()
                        .flatten()
                        .min()
                        .filter(|&t| t <= soon);
                    let Some(due) = due else {
                        return (se, ce);
                    };
                    self.now = self.now.max(due);
                    self.client.timeouts(self.now);
                    self.server.timeouts(self.now);
                    continue;
                }
                for (to, segment, bytes) in std::mem::take(&mut self.wire) {
                    self.segmented +=
                        usize::from(segment.is_some_and(|s| bytes.len() > usize::from(s)));
                    let (ep, from) = if to == self.server_addr {
                        (&mut self.server, self.client_addr)
                    } else {
                        (&mut self.client, self.server_addr)
                    };
                    let r = Received {
                        len: bytes.len(),
                        from,
                        to: Some(to.ip()),
                        ecn: 0,
                        segment: segment.map(usize::from),
                        truncated: false,
                    };
                    ep.receive(self.now, &r, &bytes);
                }
                self.now += Duration::from_millis(1);
            }
            panic!("the endpoints never settled");
        }
    }

    /// Resolves every name to one key.
    #[derive(Debug)]
    struct Single(Arc<rustls::sign::CertifiedKey>);

    impl rustls::server::ResolvesServerCert for Single {
        fn resolve(
            &self,
            _: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(self.0.clone())
        }
    }

    fn only_conn(events: &[Event]) -> ConnectionHandle {
        events
            .iter()
            .find_map(|e| match e {
                Event::Connected(h) => Some(*h),
                _ => None,
            })
            .expect("connected")
    }

    fn read_all(ep: &mut Endpoint, h: ConnectionHandle, id: StreamId) -> (Vec<u8>, bool) {
        let c = ep.conn(h).unwrap();
        let mut s = c.recv_stream(id);
        let mut chunks = s.read(true).unwrap();
        let mut got = Vec::new();
        let mut fin = false;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => got.extend_from_slice(&chunk.bytes),
                Ok(None) => {
                    fin = true;
                    break;
                }
                Err(_) => break,
            }
        }
        let _ = chunks.finalize();
        (got, fin)
    }

    #[test]
    fn a_stream_goes_both_ways_after_the_handshake() {
        for gso in [true, false] {
            let mut p = Pair::new(gso);
            let (se, ce) = p.run();
            let sh = only_conn(&se);
            let ch = only_conn(&ce);
            assert_eq!(p.server.open(), 1);

            let c = p.client.conn(ch).unwrap();
            let id = c.streams().open(Dir::Bi).unwrap();
            c.send_stream(id).write(b"GET /").unwrap();
            c.send_stream(id).finish().unwrap();
            let (se, _) = p.run();
            assert!(se.contains(&Event::Opened(sh, Dir::Bi)), "{se:?}");
            let sid = p
                .server
                .conn(sh)
                .unwrap()
                .streams()
                .accept(Dir::Bi)
                .unwrap();
            assert_eq!(sid, id);
            assert_eq!(read_all(&mut p.server, sh, sid), (b"GET /".to_vec(), true));

            // An answer larger than one datagram, in batches.
            let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            let s = p.server.conn(sh).unwrap();
            let mut at = 0;
            while at < body.len() {
                match s.send_stream(sid).write(&body[at..]) {
                    Ok(n) => at += n,
                    Err(_) => break,
                }
            }
            let mut got = Vec::new();
            for _ in 0..50 {
                if at == body.len() {
                    let _ = p.server.conn(sh).unwrap().send_stream(sid).finish();
                }
                let (se, ce) = p.run();
                if ce.contains(&Event::Readable(ch, id)) {
                    let (more, fin) = read_all(&mut p.client, ch, id);
                    got.extend(more);
                    if fin {
                        break;
                    }
                }
                if se.contains(&Event::Writable(sh, sid)) || at < body.len() {
                    let s = p.server.conn(sh).unwrap();
                    while at < body.len() {
                        match s.send_stream(sid).write(&body[at..]) {
                            Ok(n) => at += n,
                            Err(_) => break,
                        }
                    }
                }
            }
            assert_eq!(got.len(), body.len(), "gso {gso}");
            assert!(got == body, "the bytes as written, gso {gso}");
            assert_eq!(p.segmented > 0, gso, "GSO batches only when asked for");
        }
    }

    #[test]
    fn a_refused_gso_batch_goes_one_datagram_at_a_time_and_gso_stops() {
        let mut p = Pair::new(true);
        p.run();
        let mut sizes = Vec::new();
        let mut refuse = |h: Head, bytes: &mut Vec<u8>| {
            if h.segment.is_some() {
                return Err(io::Error::from_raw_os_error(5)); // EIO
            }
            sizes.push(bytes.len());
            Ok(bytes.len())
        };
        let (_, ce) = p.run();
        let _ = ce;
        let ch = *p.client.conns.keys().next().unwrap();
        let c = p.client.conn(ch).unwrap();
        let id = c.streams().open(Dir::Uni).unwrap();
        c.send_stream(id).write(&[7u8; 20_000]).unwrap();
        let mut ce = Vec::new();
        p.client.events(&mut ce);
        p.client.transmit(p.now, &mut refuse).unwrap();
        assert!(!p.client.gso, "GSO off after the kernel refused a batch");
        assert!(sizes.len() > 1, "{sizes:?}");
        assert!(sizes.iter().all(|&s| s <= 1500), "{sizes:?}");
    }

    #[test]
    fn a_would_block_keeps_the_batch_for_the_next_call() {
        let mut p = Pair::new(false);
        let mut ce = Vec::new();
        p.client.events(&mut ce);
        let mut block =
            |_: Head, _: &mut Vec<u8>| Err::<usize, _>(io::ErrorKind::WouldBlock.into());
        let e = p.client.transmit(p.now, &mut block).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        let mut sent = Vec::new();
        let mut take = |_: Head, bytes: &mut Vec<u8>| {
            sent.push(bytes.clone());
            Ok(bytes.len())
        };
        p.client.transmit(p.now, &mut take).unwrap();
        assert!(!sent.is_empty(), "the held Initial goes out");
        assert!(
            sent[0].len() >= 1200,
            "a client's Initial is padded to 1200"
        );
    }
}
