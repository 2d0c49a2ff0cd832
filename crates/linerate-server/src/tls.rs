//! HTTPS: a connection's TLS session, between its socket and its HTTP.
//!
//! rustls with the ring provider does the protocol; this module moves bytes. What
//! comes from the socket is ciphertext: [`Session::receive`] hands it to rustls and the
//! plaintext it yields to the connection's HTTP input. What the output queue sends is
//! plaintext: [`Session::write`] gives it to rustls, which seals it into records, and
//! the records wait in the session until [`Session::send`] (readiness: written to the
//! socket at once) or [`Session::take_records`] (the io_uring driver: handed to the
//! ring) moves them out. A session accepts new plaintext only when its records are all
//! gone, so at most one batch of records waits in user space per connection, as at
//! most one gather waits in a socket's buffer.
//!
//! File bodies on a TLS connection go by the `copy` strategy (a `pread` into a
//! buffer, then the buffer through the session). With `--kernel-tls auto` and a
//! kernel that has kernel TLS, a TLS 1.3 session is instead handed to its socket once
//! the handshake is done ([`Session::hand_off`], [`linerate_sys::ktls`]) and the
//! connection goes on as a plain one, its bodies by the transmit strategy. The kernel
//! of this project's machines has no kernel TLS: there the handoff is checked by
//! reproducing in a test what the kernel does with the keys it would get.
//!
//! The server's configuration ([`load`]) is built once per generation from the
//! certificate chain and key files, so a reload (SIGHUP) reads them again; a bad file
//! refuses the reload and the old generation keeps serving. Session tickets come from
//! one ticketer for the process, kept by every generation (or from the keys of
//! `tls-ticket-keys`, shared by instances: [`crate::tickets`]), so a reload costs no
//! resumption; resumption by session ID uses a cache of 4,096 entries per generation,
//! shared by its workers.

use std::io::{self, BufRead, Write};

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use linerate_http::connection::Connection;
use linerate_http::request::Http2;
use linerate_http::Protocol;
use linerate_sys::ktls::Keys;
use linerate_sys::op::{Completion, Op, Piece};
use linerate_sys::Errno;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

use crate::config::{Config, KernelTls};

/// Plaintext a session takes per write: 16 KiB records, two of them. Measured over
/// `--netns` (`BENCHMARKS.md`), writes of 32 KiB cost 13% less CPU per KB than 64 KiB
/// at 1 MiB and 5% less at 10 MiB; 16 KiB (a send per record) and 48 KiB (a 64 KiB
/// read then goes as three records and one) cost more than either.
pub(crate) const WRITE_BYTES: usize = 32 * 1024;
/// Plaintext of a small record: with TLS 1.3's 22 bytes and the TCP/IP headers (IPv6
/// and timestamps) it fits one 1,500-byte segment, so the client can decrypt it as soon
/// as that segment arrives.
pub(crate) const SMALL_RECORD: usize = 1369;
/// Small records at the start of a connection, and again after it has been quiet for
/// [`QUIET`]: while the congestion window is small (new, or restarted after idle) a
/// 16 KiB record would wait for a dozen segments, some a round trip later, before the
/// client could read any of it. 40 of them are about 54 KiB, as nginx's dynamic record
/// patch and Cloudflare's defaults do.
pub(crate) const SMALL_RECORDS: usize = 40;
/// How long a connection may send nothing before it starts with small records again.
pub(crate) const QUIET: std::time::Duration = std::time::Duration::from_secs(1);

/// The first byte of a TLS handshake record. A connection to a TLS port that starts
/// with anything else is not speaking TLS (plain HTTP, a port scanner): it is closed
/// with nothing written.
const HANDSHAKE: u8 = 0x16;

/// Whether this kernel has kernel TLS, probed once per process when TLS is first
/// configured: `Ok` if a TCP socket takes the "tls" upper-layer protocol, else why not
/// (`ENOENT` where the kernel is built without `CONFIG_TLS`).
static KERNEL_TLS: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();

fn kernel_tls() -> &'static Result<(), String> {
    KERNEL_TLS.get_or_init(|| {
        let connected = || -> io::Result<_> {
            let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
            let c = std::net::TcpStream::connect(l.local_addr()?)?;
            Ok((l.accept()?.0, c))
        };
        let (s, _c) = connected().map_err(|e| format!("a loopback connection to probe on: {e}"))?;
        linerate_sys::net::set_tcp_ulp(std::os::fd::AsFd::as_fd(&s), "tls")
            .map_err(|e| format!("setsockopt TCP_ULP \"tls\": {e}"))
    })
}

/// What the status page says of kernel TLS here (once probed).
pub fn path_note() -> String {
    match KERNEL_TLS.get() {
        None => "not probed".into(),
        Some(Ok(())) if KERNEL_REFUSED.load(Ordering::Relaxed) => {
            "the kernel has TLS, but a socket refused it: user space from then on".into()
        }
        Some(Ok(())) => "the kernel has TLS".into(),
        Some(Err(e)) => format!("no kernel TLS here: {e}"),
    }
}

/// Checks that the TLS settings go together; an error names the flags.
pub fn check(cfg: &Config) -> Result<(), String> {
    crate::acme::Plan::of(cfg)?;
    // A site with acme = true has its certificate from the directory.
    let own = cfg
        .sites
        .iter()
        .filter(|s| s.tls.is_some() || s.acme)
        .count();
    match (&cfg.tls_cert, &cfg.tls_key) {
        (Some(_), None) | (None, Some(_)) => {
            return Err("--tls-cert and --tls-key go together".into())
        }
        _ => {}
    }
    let global = cfg.tls_cert.is_some();
    let ip_tls = cfg
        .tls_listen
        .iter()
        .any(|e| matches!(e, crate::config::Endpoint::Ip(_)));
    if !cfg.redirect_listen.is_empty() && !ip_tls {
        return Err(
            "--redirect-listen needs --tls-listen with an IP address (the port it sends clients to)"
                .into(),
        );
    }
    if cfg.tls_listen.is_empty() {
        if global || own > 0 {
            return Err("--tls-cert and --tls-key go with --tls-listen".into());
        }
        if cfg.kernel_tls != KernelTls::Off {
            return Err("--kernel-tls goes with --tls-listen".into());
        }
        return Ok(());
    }
    if global {
        return Ok(());
    }
    if own == 0 {
        return Err("--tls-listen needs --tls-cert and --tls-key".into());
    }
    match cfg.sites.iter().find(|s| s.tls.is_none() && !s.acme) {
        Some(s) => Err(format!(
            "--tls-listen: site {} has no tls-cert of its own, and there is no --tls-cert \
             for it",
            s.label()
        )),
        None => Ok(()),
    }
}

/// The TLS server configuration of `cfg`, if it has TLS listeners; an error is one
/// line naming the file and the cause. Each site's own certificate (a `[[site]]`
/// block's `tls-cert` and `tls-key`) answers the names the site answers, chosen by the
/// client's SNI as a request's Host chooses the site; the others, and a client that
/// names no site or an unknown one, get the default site's, else `--tls-cert`.
pub fn load(cfg: &Config) -> Result<Option<Arc<ServerConfig>>, String> {
    load_with(cfg, None)
}

/// [`load`], with the certificates `acme` obtains for the sites with `acme = true`
/// (docs/operations.md, "Automatic HTTPS"): the newest serves, else the site's own
/// `tls-cert`, else the server's; and TLS-ALPN-01 answered when that is the challenge.
pub(crate) fn load_with(
    cfg: &Config,
    acme: Option<&Arc<crate::acme::Acme>>,
) -> Result<Option<Arc<ServerConfig>>, String> {
    check(cfg)?;
    let plan = crate::acme::Plan::of(cfg)?;
    if cfg.tls_listen.is_empty() {
        return Ok(None);
    }
    let kernel = match (cfg.kernel_tls, kernel_tls()) {
        (KernelTls::Off, _) => false,
        (_, Ok(())) => true,
        (KernelTls::Auto, Err(_)) => false,
        (KernelTls::On, Err(e)) => {
            return Err(format!(
                "--kernel-tls on: this kernel has no kernel TLS ({e})"
            ))
        }
    };
    // Said once per process, at the first load.
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| match (kernel, kernel_tls()) {
        (true, _) => tracing::info!(
            "TLS: TLS 1.3 connections' keys go to the kernel after the handshake (kernel \
             TLS); TLS 1.2 records are sealed in user space"
        ),
        (false, Ok(())) => tracing::info!(
            "TLS: the kernel has kernel TLS; records are sealed in user space all the same \
             (--kernel-tls off)"
        ),
        (false, Err(e)) => {
            tracing::info!("TLS: no kernel TLS here ({e}); records are sealed in user space")
        }
    });
    let provider = provider();
    let global = match (&cfg.tls_cert, &cfg.tls_key) {
        (Some(c), Some(k)) => Some(certified(c, k, &provider, ("--tls-cert", "--tls-key"))?),
        _ => None,
    };
    let sites = cfg.sites();
    let mut keys = Vec::with_capacity(sites.len());
    for s in &sites {
        let key = match (&s.tls, &global) {
            (Some((c, k)), _) => Some(
                certified(c, k, &provider, ("tls-cert", "tls-key"))
                    .map_err(|e| format!("site {}: {e}", s.label()))?,
            ),
            (None, Some(g)) => Some(Arc::clone(g)),
            // check() saw to a certificate for every site but those of ACME.
            (None, None) => None,
        };
        keys.push(key);
    }
    let resolver = BySite {
        router: crate::router::Router::new(&sites),
        keys,
        acme: acme.filter(|_| plan.is_some()).map(|a| {
            (
                Arc::clone(a),
                sites.iter().map(|s| s.acme.then(|| s.label())).collect(),
                plan.as_ref().is_some_and(crate::acme::Plan::tls_alpn),
            )
        }),
    };
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    // h2 first when HTTP/2 is on: a browser that offers both gets it.
    config.alpn_protocols = match cfg.http2 {
        Http2::On => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        Http2::Only => vec![b"h2".to_vec()],
        Http2::Off => vec![b"http/1.1".to_vec()],
    };
    // Offered last: only the ACME directory's validator asks for it.
    if plan.as_ref().is_some_and(crate::acme::Plan::tls_alpn) {
        config.alpn_protocols.push(crate::acme::ACME_TLS.to_vec());
    }
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(4096);
    // The process's ticketer, or the shared file's keys: a reload loses no session.
    config.ticketer = crate::tickets::ticketer(cfg.tls_ticket_keys.as_deref())?;
    // The server picks the cipher suite, by the order above.
    config.ignore_client_order = true;
    // A session reads this to know its keys go to the kernel.
    config.enable_secret_extraction = kernel;
    Ok(Some(Arc::new(config)))
}

/// A chain and its key, checked to belong together; errors name `flags`.
fn certified(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
    (cert_flag, key_flag): (&str, &str),
) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
    let chain = read_chain(cert, cert_flag)?;
    let der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("{key_flag} {}: {}", key.display(), pem_error(&e)))?;
    rustls::sign::CertifiedKey::from_der(chain, der, provider)
        .map(Arc::new)
        .map_err(|e| {
            format!(
                "{cert_flag} {} and {key_flag} {}: {}",
                cert.display(),
                key.display(),
                pair_error(&e)
            )
        })
}

/// Why a certificate and a key do not make a pair, in words (rustls says `KeyMismatch`).
fn pair_error(e: &rustls::Error) -> String {
    use rustls::InconsistentKeys;
    match e {
        rustls::Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => {
            "the key is not the certificate's (its public key is another)".to_string()
        }
        rustls::Error::InconsistentKeys(InconsistentKeys::Unknown) => {
            "cannot tell whether the key is the certificate's".to_string()
        }
        e => e.to_string(),
    }
}

/// The certificate of the site a ClientHello's name (SNI) routes to.
struct BySite {
    router: crate::router::Router,
    /// One per site, in the router's order (none: an ACME site without a certificate
    /// of its own or the server's).
    keys: Vec<Option<Arc<rustls::sign::CertifiedKey>>>,
    /// The ACME certificates, each site's name among them (`Some` for `acme = true`),
    /// and whether TLS-ALPN-01 is answered.
    acme: Option<(Arc<crate::acme::Acme>, Vec<Option<String>>, bool)>,
}

impl std::fmt::Debug for BySite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BySite")
            .field("sites", &self.keys.len())
            .finish()
    }
}

impl rustls::server::ResolvesServerCert for BySite {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let i = self.router.route(hello.server_name());
        if let Some((acme, labels, tls_alpn)) = &self.acme {
            // RFC 8737: the validator offers acme-tls/1 alone.
            let validating = *tls_alpn
                && hello.alpn().is_some_and(|p| {
                    let offered: Vec<&[u8]> = p.collect();
                    offered == [crate::acme::ACME_TLS]
                });
            if validating {
                // The validator's handshake: the challenge's certificate or none.
                return hello.server_name().and_then(|n| acme.alpn_certificate(n));
            }
            if let Some(label) = labels.get(i).and_then(Option::as_ref) {
                if let Some(k) = acme.issued(label) {
                    return Some(k);
                }
            }
        }
        self.keys.get(i).cloned().flatten()
    }
}

fn read_chain(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let name = || format!("{flag} {}", path.display());
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {}", name(), pem_error(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {}", name(), pem_error(&e)))?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no certificate in it (PEM, BEGIN CERTIFICATE)",
            name()
        ));
    }
    Ok(chain)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::Io(e) => e.to_string(),
        E::NoItemsFound => {
            "no key in it (PEM: BEGIN PRIVATE KEY, BEGIN EC PRIVATE KEY or BEGIN RSA PRIVATE KEY)"
                .into()
        }
        e => format!("not valid PEM: {e:?}"),
    }
}

/// Why a session ended the connection.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The bytes were not TLS at all: close (after a plain 400 when they were an HTTP
    /// request line, as nginx answers).
    NotTls,
    /// rustls refused them (a bad handshake, a bad record); its alert waits in the
    /// session to be sent before the close.
    Protocol(rustls::Error),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotTls => f.write_str("not TLS"),
            Refused::Protocol(e) => write!(f, "TLS: {e}"),
        }
    }
}

/// One connection's TLS session.
pub(crate) struct Session {
    conn: rustls::ServerConnection,
    /// No byte has come yet (the first is checked to be a handshake record's).
    fresh: bool,
    /// The peer's close_notify came: no more plaintext follows.
    closed: bool,
    /// Small records still to come before full ones ([`SMALL_RECORDS`]).
    small_left: usize,
    /// When plaintext was last given to the session.
    last_write: Option<std::time::Instant>,
    /// Its keys go to the kernel once the handshake is done (TLS 1.3 only).
    kernel: bool,
    /// Where the bytes from the peer stand against its records.
    boundary: Boundary,
    /// Since when its handshake has been awaited (the header timeout applies); set by
    /// the connection that owns it.
    pub handshake_since: Option<std::time::Instant>,
    /// Records handed to the driver and not yet all sent (the ring only).
    pub records: Vec<u8>,
    /// The protocol ALPN chose has been told to the connection.
    alpn_told: bool,
}

/// Follows the record framing of the bytes from the peer, to know when they stop
/// between two records: the kernel can take the receive side over only there, since
/// the bytes of a record the session has half read are gone from the socket.
#[derive(Debug, Default)]
struct Boundary {
    /// The header of the record being read, and how much of it has come.
    header: [u8; 5],
    have: usize,
    /// Bytes of its body still to come.
    body_left: usize,
}

impl Boundary {
    fn pass(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(b.len());
                self.body_left -= n;
                b = &b[n..];
                continue;
            }
            let n = (5 - self.have).min(b.len());
            self.header[self.have..self.have + n].copy_from_slice(&b[..n]);
            self.have += n;
            b = &b[n..];
            if self.have == 5 {
                self.have = 0;
                self.body_left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
            }
        }
    }

    fn between(&self) -> bool {
        self.have == 0 && self.body_left == 0
    }
}

/// What came of handing a session to the kernel ([`Session::hand_off`]).
pub(crate) enum Handoff {
    /// The socket encrypts and decrypts from now on.
    Kernel,
    /// The socket refused the TLS protocol; the session goes on in user space.
    Stayed(Box<Session>, Refusal),
    /// The keys were taken but the socket refused them: the connection is lost.
    Lost(Refusal),
}

/// Why a handoff failed, and whether it says the kernel cannot do kernel TLS at all
/// (then no later session tries) or only that this socket could not (a peer that
/// closed right after its handshake: the socket is no longer connected).
pub(crate) struct Refusal {
    pub why: String,
    pub kernel_cannot: bool,
}

/// Where a session's plaintext goes: the connection's HTTP input.
pub(crate) trait Plaintext {
    fn receive(&mut self, bytes: &[u8]);
    fn peer_closed(&mut self);
    /// ALPN chose `h2`: the plaintext is HTTP/2 from its first byte.
    fn h2(&mut self);
}

impl Plaintext for Connection {
    fn receive(&mut self, bytes: &[u8]) {
        Protocol::receive(self, bytes)
    }
    fn peer_closed(&mut self) {
        Protocol::peer_closed(self)
    }
    fn h2(&mut self) {}
}

impl Session {
    pub fn new(config: &Arc<ServerConfig>) -> Result<Session, rustls::Error> {
        let mut conn = rustls::ServerConnection::new(Arc::clone(config))?;
        // Records wait in the session only until the socket takes them; the limit is
        // what `write` may leave there at once.
        conn.set_buffer_limit(Some(2 * WRITE_BYTES));
        Ok(Session {
            conn,
            fresh: true,
            closed: false,
            small_left: SMALL_RECORDS,
            last_write: None,
            kernel: config.enable_secret_extraction && !KERNEL_REFUSED.load(Ordering::Relaxed),
            boundary: Boundary::default(),
            handshake_since: None,
            records: Vec::new(),
            alpn_told: false,
        })
    }

    /// Takes ciphertext from the socket and gives the plaintext it holds to `http`.
    pub fn receive(&mut self, mut bytes: &[u8], http: &mut impl Plaintext) -> Result<(), Refused> {
        if self.fresh && !bytes.is_empty() {
            if bytes[0] != HANDSHAKE {
                return Err(Refused::NotTls);
            }
            self.fresh = false;
        }
        while !bytes.is_empty() && !self.closed {
            // Takes what fits its buffer; what does not is taken after the records
            // before it are processed. After close_notify it takes nothing (0), and
            // whatever follows is dropped.
            let before = bytes;
            match self.conn.read_tls(&mut bytes) {
                Ok(0) => break,
                Ok(n) => self.boundary.pass(&before[..n]),
                Err(e) => return Err(Refused::Protocol(rustls::Error::General(e.to_string()))),
            }
            self.conn.process_new_packets().map_err(Refused::Protocol)?;
            if !self.alpn_told && !self.conn.is_handshaking() {
                // Before any plaintext: with `h2`, the first byte is HTTP/2's.
                self.alpn_told = true;
                match self.conn.alpn_protocol() {
                    Some(b"h2") => http.h2(),
                    // TLS-ALPN-01: the handshake was all the validator wanted.
                    Some(crate::acme::ACME_TLS) => {
                        self.conn.send_close_notify();
                        self.closed = true;
                        http.peer_closed();
                        break;
                    }
                    _ => {}
                }
            }
            loop {
                // Read where the session decrypted it: no copy.
                let mut reader = self.conn.reader();
                match reader.fill_buf() {
                    Ok([]) => {
                        // close_notify: the peer sends nothing more.
                        if !self.closed {
                            self.closed = true;
                            http.peer_closed();
                        }
                        break;
                    }
                    Ok(chunk) => {
                        let n = chunk.len();
                        http.receive(chunk);
                        reader.consume(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => break,
                }
            }
        }
        Ok(())
    }

    /// Gives up to [`WRITE_BYTES`] of plaintext to the session; how many it took, or
    /// `WouldBlock` while its last records have not all gone.
    pub fn write(&mut self, data: &[u8], now: std::time::Instant) -> io::Result<usize> {
        self.write_pieces([data], now)
    }

    /// Gives pieces of plaintext to the session, in order, up to [`WRITE_BYTES`] in
    /// all; how many bytes it took. The pieces are sealed together: a head and a small
    /// body go out as one record, not one record each. At the start of the connection,
    /// and after it has been quiet, the first records are small ([`SMALL_RECORDS`]).
    pub fn write_pieces<'a>(
        &mut self,
        pieces: impl IntoIterator<Item = &'a [u8]>,
        now: std::time::Instant,
    ) -> io::Result<usize> {
        if self.conn.wants_write() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if self
            .last_write
            .is_some_and(|t| now.duration_since(t) >= QUIET)
        {
            self.small_left = SMALL_RECORDS;
        }
        self.last_write = Some(now);
        let pieces = pieces.into_iter();
        let mut parts: Vec<&'a [u8]> = Vec::with_capacity(pieces.size_hint().0);
        let mut room = WRITE_BYTES;
        for p in pieces {
            if room == 0 {
                break;
            }
            let p = &p[..p.len().min(room)];
            room -= p.len();
            parts.push(p);
        }
        let total = WRITE_BYTES - room;
        if self.small_left == 0 {
            let slices: Vec<io::IoSlice<'_>> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
            return self.conn.writer().write_vectored(&slices);
        }
        // One write per small record: each write of the session is sealed into its own
        // records.
        let mut took = 0;
        while took < total && self.small_left > 0 {
            let record = take_front(&parts, took, SMALL_RECORD);
            let n = self.conn.writer().write_vectored(&record)?;
            took += n;
            self.small_left -= 1;
            if n == 0 {
                break;
            }
        }
        Ok(took)
    }

    /// Records wait to be sent.
    pub fn pending(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes the waiting records until they are gone or the socket is full: each write
    /// is a gather operation (`Op::Gather` of the records as the session holds them,
    /// no copy) that `run`, an executor, makes. (Bytes written, all gone.)
    pub fn send(&mut self, run: Run<'_>) -> io::Result<(usize, bool)> {
        let mut sock = Records(run);
        let mut written = 0;
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut sock) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((written, false)),
                Err(e) => return Err(e),
            }
        }
        Ok((written, true))
    }

    /// Moves the waiting records into `out` (for a driver that sends them itself).
    pub fn take_records(&mut self, out: &mut Vec<u8>) {
        while self.conn.wants_write() {
            if self.conn.write_tls(out).is_err() {
                break;
            }
        }
    }

    /// Queues close_notify: the response stream ends cleanly.
    pub fn close(&mut self) {
        self.conn.send_close_notify();
    }

    /// The version agreed, as logs name it (`TLSv1.3`), once the handshake says.
    pub fn protocol_name(&self) -> Option<&'static str> {
        match self.conn.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_3 => Some("TLSv1.3"),
            rustls::ProtocolVersion::TLSv1_2 => Some("TLSv1.2"),
            _ => Some("TLS"),
        }
    }

    /// The handshake is done.
    pub fn ready(&self) -> bool {
        !self.conn.is_handshaking()
    }

    /// The session can go to the kernel now: kernel TLS was asked for, the handshake
    /// (TLS 1.3) is done and all its records sent, no plaintext has been written, and
    /// the bytes read stop between two records.
    pub fn kernel_ready(&mut self) -> bool {
        if !self.kernel || self.conn.is_handshaking() {
            return false;
        }
        if self.conn.protocol_version() != Some(rustls::ProtocolVersion::TLSv1_3)
            || self.last_write.is_some()
            || self.closed
        {
            // It stays in user space for good.
            self.kernel = false;
            return false;
        }
        !self.conn.wants_write() && self.boundary.between()
    }

    /// Hands the session's keys to the socket (kernel TLS): from now on the socket
    /// takes and gives plaintext and the kernel seals and opens the records. The calls
    /// are operations `run`, an executor, makes (`Op::KernelTls`, `Op::TlsKeys`).
    pub fn hand_off(self: Box<Self>, run: Run<'_>) -> Handoff {
        use linerate_sys::ktls::{is_unsupported, Direction};
        if let Err(e) = run(&mut Op::KernelTls).map_err(Errno::io) {
            let mut me = self;
            me.kernel = false;
            let why = format!("setsockopt TCP_ULP \"tls\": {e}");
            let kernel_cannot = is_unsupported(&e);
            return Handoff::Stayed(me, Refusal { why, kernel_cannot });
        }
        let (tx, rx) = match self.take_keys() {
            Ok(k) => k,
            Err(why) => {
                return Handoff::Lost(Refusal {
                    why,
                    kernel_cannot: true,
                })
            }
        };
        for (dir, keys) in [(Direction::Transmit, &tx), (Direction::Receive, &rx)] {
            let set = run(&mut Op::TlsKeys {
                direction: dir,
                keys,
            });
            if let Err(e) = set.map_err(Errno::io) {
                return Handoff::Lost(Refusal {
                    why: format!("setsockopt SOL_TLS ({dir:?}, {}): {e}", keys.cipher_name()),
                    kernel_cannot: is_unsupported(&e),
                });
            }
        }
        Handoff::Kernel
    }

    /// The session's keys, (transmit, receive), as the kernel takes them; the session
    /// is gone.
    fn take_keys(self: Box<Self>) -> Result<(Keys, Keys), String> {
        let secrets = self
            .conn
            .dangerous_extract_secrets()
            .map_err(|e| format!("the session's keys: {e}"))?;
        match (kernel_keys(secrets.tx), kernel_keys(secrets.rx)) {
            (Some(tx), Some(rx)) => Ok((tx, rx)),
            _ => Err("a cipher the kernel does not take".into()),
        }
    }
}

/// One direction's TLS 1.3 keys as the kernel takes them; `None` for a cipher it does
/// not.
fn kernel_keys((seq, secrets): (u64, rustls::ConnectionTrafficSecrets)) -> Option<Keys> {
    use rustls::ConnectionTrafficSecrets as S;
    Some(match secrets {
        S::Aes128Gcm { key, iv } => Keys::Aes128Gcm {
            key: key.as_ref().try_into().ok()?,
            iv: iv.as_ref().try_into().ok()?,
            seq,
        },
        S::Aes256Gcm { key, iv } => Keys::Aes256Gcm {
            key: key.as_ref().try_into().ok()?,
            iv: iv.as_ref().try_into().ok()?,
            seq,
        },
        S::Chacha20Poly1305 { key, iv } => Keys::Chacha20Poly1305 {
            key: key.as_ref().try_into().ok()?,
            iv: iv.as_ref().try_into().ok()?,
            seq,
        },
        _ => return None,
    })
}

/// Set when a socket refused kernel TLS: no session after it tries again.
static KERNEL_REFUSED: AtomicBool = AtomicBool::new(false);

/// A handoff failed: where the kernel cannot do kernel TLS, said once and no later
/// session tries; where only this socket could not, said at level debug.
pub(crate) fn kernel_refused(r: &Refusal) {
    if !r.kernel_cannot {
        tracing::debug!("TLS: a connection stays in user space ({})", r.why);
    } else if !KERNEL_REFUSED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "TLS: kernel TLS refused ({}); connections stay in user space",
            r.why
        );
    }
}

/// Up to `len` bytes of `parts` from byte `skip` on, as slices for one write.
fn take_front<'a>(parts: &[&'a [u8]], mut skip: usize, len: usize) -> Vec<io::IoSlice<'a>> {
    let mut out = Vec::new();
    let mut left = len;
    for &bytes in parts {
        if skip >= bytes.len() {
            skip -= bytes.len();
            continue;
        }
        let part = &bytes[skip..bytes.len().min(skip + left)];
        skip = 0;
        left -= part.len();
        out.push(io::IoSlice::new(part));
        if left == 0 {
            break;
        }
    }
    out
}

/// An executor of a connection's operations, as the session asks for its calls.
pub type Run<'a> = &'a mut dyn FnMut(&mut Op<'_>) -> Completion;

/// The socket as rustls writes its records to it: each write a gather the executor
/// makes (a would-block comes back as `WouldBlock`).
struct Records<'a, 'b>(&'a mut (dyn FnMut(&mut Op<'_>) -> Completion + 'b));

impl Write for Records<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let pieces = bufs
            .iter()
            .map(|b| Piece {
                bytes: b,
                shared: None,
            })
            .collect();
        (self.0)(&mut Op::Gather {
            pieces,
            more: false,
        })
        .map_err(Errno::io)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// rustls's ring provider with the cipher suites in the server's order of choice:
/// AES-128-GCM first (the cheapest per byte where the CPU has AES instructions, as
/// every x86-64 and Armv8 server CPU has), then AES-256-GCM, then ChaCha20-Poly1305.
/// HTTPS and QUIC alike; the server's order decides (`ignore_client_order`).
pub(crate) fn provider() -> rustls::crypto::CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|s| {
        use rustls::CipherSuite as C;
        match s.suite() {
            C::TLS13_AES_128_GCM_SHA256
            | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
            C::TLS13_AES_256_GCM_SHA384
            | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
            _ => 2,
        }
    });
    provider
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_http::request::Limits;
    use std::io::Read;

    /// A server session with a fresh certificate, and a client that trusts it.
    fn pair() -> (Session, rustls::ClientConnection) {
        pair_with(
            false,
            rustls::crypto::ring::default_provider(),
            rustls::DEFAULT_VERSIONS,
        )
    }

    /// [`pair`] with the session's keys for the kernel (`kernel`), and a client with
    /// `provider`'s cipher suites and the protocol `versions`.
    fn pair_with(
        kernel: bool,
        provider: rustls::crypto::CryptoProvider,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> (Session, rustls::ClientConnection) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        let mut cfg = Config::new(".".into());
        cfg.tls_listen = vec![crate::config::Endpoint::Ip(([127, 0, 0, 1], 0).into())];
        cfg.tls_cert = Some(cert);
        cfg.tls_key = Some(key);
        let mut server_cfg = (*load(&cfg).unwrap().unwrap()).clone();
        // What `load` sets where the kernel has kernel TLS and --kernel-tls allows it.
        server_cfg.enable_secret_extraction = kernel;
        let server = Session::new(&Arc::new(server_cfg)).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(made.cert.der().clone()).unwrap();
        let client_cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let client =
            rustls::ClientConnection::new(Arc::new(client_cfg), "localhost".try_into().unwrap())
                .unwrap();
        (server, client)
    }

    /// Moves bytes both ways until neither side has any to send.
    fn shake(server: &mut Session, client: &mut rustls::ClientConnection, http: &mut Connection) {
        for _ in 0..10 {
            let mut up = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut up).unwrap();
            }
            server.receive(&up, http).unwrap();
            let mut down = Vec::new();
            server.take_records(&mut down);
            if up.is_empty() && down.is_empty() {
                return;
            }
            client.read_tls(&mut &down[..]).unwrap();
            client.process_new_packets().unwrap();
        }
    }

    #[test]
    fn plaintext_reaches_the_http_input_and_bytes_after_close_notify_are_dropped() {
        let (mut server, mut client) = pair();
        let mut http = Connection::new(Limits::default(), 32);
        shake(&mut server, &mut client, &mut http);
        assert!(server.ready());
        client
            .writer()
            .write_all(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        client.send_close_notify();
        let mut up = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut up).unwrap();
        }
        // More than the session takes at one read, after the close_notify: a loop
        // that waited for all of it to be taken would never end.
        up.extend_from_slice(&[0x17; 8192]);
        server.receive(&up, &mut http).unwrap();
        assert!(matches!(
            http.next(std::time::Instant::now()),
            linerate_http::connection::Event::Request(_)
        ));
    }

    /// The lengths of the TLS records in `wire`.
    fn record_lengths(mut wire: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        while wire.len() >= 5 {
            let len = usize::from(u16::from_be_bytes([wire[3], wire[4]]));
            out.push(len);
            wire = &wire[5 + len..];
        }
        out
    }

    /// Gives `n` bytes to the session at `now`, moving its records out as it goes;
    /// the records' lengths.
    fn send(server: &mut Session, n: usize, now: std::time::Instant) -> Vec<usize> {
        let body = vec![7u8; n];
        let (mut took, mut wire) = (0, Vec::new());
        while took < n {
            took += server.write_pieces([&body[took..]], now).unwrap();
            server.take_records(&mut wire);
        }
        record_lengths(&wire)
    }

    #[test]
    fn the_first_records_and_those_after_a_quiet_spell_are_small() {
        let (mut server, mut client) = pair();
        let mut http = Connection::new(Limits::default(), 32);
        shake(&mut server, &mut client, &mut http);
        // TLS 1.3 seals a record's plaintext with a content-type byte and a 16-byte tag.
        let small = SMALL_RECORD + 17;
        let t0 = std::time::Instant::now();
        let first = send(&mut server, 200_000, t0);
        assert!(
            first[..SMALL_RECORDS].iter().all(|&l| l <= small),
            "{first:?}"
        );
        assert!(
            first[SMALL_RECORDS] > 8 * small,
            "then full records: {first:?}"
        );
        // Kept busy: full records at once.
        let busy = send(&mut server, 100_000, t0 + QUIET / 2);
        assert!(busy[0] > 8 * small, "{busy:?}");
        // Quiet for longer than QUIET: small again.
        let after = send(&mut server, 100_000, t0 + QUIET * 3);
        assert!(
            after[..SMALL_RECORDS].iter().all(|&l| l <= small),
            "{after:?}"
        );
        assert!(after[SMALL_RECORDS] > 8 * small, "{after:?}");
    }

    #[test]
    fn bytes_that_are_not_tls_are_refused_at_the_first() {
        let (mut server, _) = pair();
        let mut http = Connection::new(Limits::default(), 32);
        assert!(matches!(
            server.receive(b"GET / HTTP/1.1\r\n", &mut http),
            Err(Refused::NotTls)
        ));
    }

    /// What the kernel does with a `crypto_info` (RFC 8446, 5.2 and 5.3), done here with
    /// ring, so that the keys a session hands over are checked against a real client
    /// on a machine without kernel TLS. The keys are read back from the bytes the
    /// kernel would get, as it reads them.
    struct Kernel {
        key: ring::aead::LessSafeKey,
        iv: [u8; 12],
        seq: u64,
    }

    impl Kernel {
        fn new(keys: &Keys) -> Kernel {
            use ring::aead::{UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305};
            let read = Keys::from_crypto_info(&keys.crypto_info()).expect("it reads back");
            let (alg, key, iv, seq) = match &read {
                Keys::Aes128Gcm { key, iv, seq } => (&AES_128_GCM, &key[..], *iv, *seq),
                Keys::Aes256Gcm { key, iv, seq } => (&AES_256_GCM, &key[..], *iv, *seq),
                Keys::Chacha20Poly1305 { key, iv, seq } => {
                    (&CHACHA20_POLY1305, &key[..], *iv, *seq)
                }
            };
            Kernel {
                key: ring::aead::LessSafeKey::new(UnboundKey::new(alg, key).unwrap()),
                iv,
                seq,
            }
        }

        fn nonce(&mut self) -> ring::aead::Nonce {
            let mut n = self.iv;
            for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
                *b ^= s;
            }
            self.seq += 1;
            ring::aead::Nonce::assume_unique_for_key(n)
        }

        /// One record of content type `typ`.
        fn seal(&mut self, typ: u8, data: &[u8]) -> Vec<u8> {
            let mut body = data.to_vec();
            body.push(typ);
            let len = (body.len() + 16) as u16;
            let [hi, lo] = len.to_be_bytes();
            let header = [0x17, 3, 3, hi, lo];
            let nonce = self.nonce();
            self.key
                .seal_in_place_append_tag(nonce, ring::aead::Aad::from(header), &mut body)
                .unwrap();
            [&header[..], &body].concat()
        }

        /// The first record of `wire`: its content type and plaintext.
        fn open(&mut self, wire: &[u8]) -> (u8, Vec<u8>) {
            let len = usize::from(u16::from_be_bytes([wire[3], wire[4]]));
            let header: [u8; 5] = wire[..5].try_into().unwrap();
            let mut body = wire[5..5 + len].to_vec();
            let nonce = self.nonce();
            let plain = self
                .key
                .open_in_place(nonce, ring::aead::Aad::from(header), &mut body)
                .expect("the record opens with the handed keys");
            let (typ, data) = plain.split_last().unwrap();
            (*typ, data.to_vec())
        }
    }

    fn client_suite(suite: rustls::SupportedCipherSuite) -> rustls::crypto::CryptoProvider {
        rustls::crypto::CryptoProvider {
            cipher_suites: vec![suite],
            ..rustls::crypto::ring::default_provider()
        }
    }

    #[test]
    fn the_keys_handed_to_the_kernel_seal_and_open_what_a_client_reads_and_sends() {
        use rustls::crypto::ring::cipher_suite as cs;
        for (suite, name) in [
            (cs::TLS13_AES_128_GCM_SHA256, "AES-128-GCM"),
            (cs::TLS13_AES_256_GCM_SHA384, "AES-256-GCM"),
            (cs::TLS13_CHACHA20_POLY1305_SHA256, "ChaCha20-Poly1305"),
        ] {
            let (mut server, mut client) =
                pair_with(true, client_suite(suite), &[&rustls::version::TLS13]);
            let mut http = Connection::new(Limits::default(), 32);
            assert!(!server.kernel_ready(), "{name}: not before the handshake");
            shake(&mut server, &mut client, &mut http);
            // A first request read by the session before the handoff: the receive side
            // goes over at sequence number 1, the transmit side at 2 (the tickets).
            client
                .writer()
                .write_all(b"GET /0 HTTP/1.1\r\n\r\n")
                .unwrap();
            let mut first = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut first).unwrap();
            }
            server.receive(&first, &mut http).unwrap();
            // The handshake's records (and the tickets after it) are all out.
            assert!(server.kernel_ready(), "{name}");
            let (tx, rx) = Box::new(server).take_keys().unwrap();
            assert_eq!(tx.cipher_name(), name);
            // The kernel opens what the client sends from now on ...
            client
                .writer()
                .write_all(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
                .unwrap();
            let mut up = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut up).unwrap();
            }
            let mut kernel_rx = Kernel::new(&rx);
            assert_eq!(
                kernel_rx.open(&up),
                (0x17, b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n".to_vec()),
                "{name}"
            );
            // ... and seals what the server sends: two records, then close_notify
            // (what `ktls::send_close_notify` asks of it).
            let mut kernel_tx = Kernel::new(&tx);
            let mut down = kernel_tx.seal(0x17, b"HTTP/1.1 200 OK\r\n");
            down.extend(kernel_tx.seal(0x17, b"Content-Length: 0\r\n\r\n"));
            down.extend(kernel_tx.seal(21, &[1, 0]));
            client.read_tls(&mut &down[..]).unwrap();
            client.process_new_packets().expect(name);
            let mut got = Vec::new();
            client.reader().read_to_end(&mut got).expect(name);
            assert_eq!(
                got, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
                "{name}"
            );
        }
    }

    #[test]
    fn a_session_waits_for_a_record_boundary_and_tls_12_stays_in_user_space() {
        let (mut server, mut client) = pair_with(
            true,
            rustls::crypto::ring::default_provider(),
            &[&rustls::version::TLS13],
        );
        let mut http = Connection::new(Limits::default(), 32);
        shake(&mut server, &mut client, &mut http);
        client.writer().write_all(b"GET / HTTP/1.1\r\n").unwrap();
        let mut up = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut up).unwrap();
        }
        // Half a record read: the rest is still to come from the socket, which the
        // kernel would then read from the middle of a record.
        server.receive(&up[..up.len() / 2], &mut http).unwrap();
        assert!(!server.kernel_ready());
        server.receive(&up[up.len() / 2..], &mut http).unwrap();
        assert!(server.kernel_ready());
        // A session that has written plaintext stays where it is.
        server.write(b"x", std::time::Instant::now()).unwrap();
        assert!(!server.kernel_ready());

        let (mut server, mut client) = pair_with(
            true,
            rustls::crypto::ring::default_provider(),
            &[&rustls::version::TLS12],
        );
        shake(&mut server, &mut client, &mut http);
        assert!(server.ready() && !server.kernel_ready());
        // And one without --kernel-tls never goes.
        let (mut server, mut client) = pair();
        shake(&mut server, &mut client, &mut http);
        assert!(server.ready() && !server.kernel_ready());
    }

    #[test]
    fn the_record_framing_is_followed_across_any_split() {
        let wire: Vec<u8> = [
            &[0x17, 3, 3, 0, 3, 1, 2, 3][..],
            &[0x17, 3, 3, 0, 0],
            &[0x15, 3, 3, 1, 0],
            &[9; 256],
        ]
        .concat();
        let ends = [8, 13, 18 + 256];
        for cut in 0..=wire.len() {
            let mut b = Boundary::default();
            b.pass(&wire[..cut]);
            assert_eq!(b.between(), cut == 0 || ends.contains(&cut), "cut {cut}");
            b.pass(&wire[cut..]);
            assert!(b.between());
        }
    }

    /// What sealing costs per MiB in the session as the server uses it (64 KiB writes,
    /// 16 KiB records taken out into one buffer), against sealing 16 KiB records in
    /// place with ring (what a record layer of our own would do) and against a plain
    /// copy of the same bytes: the part an in-place design could save. Run on a thread
    /// of its own, as a worker is (the main thread's heap is trimmed back to the kernel
    /// on every free of a record, which a worker's is not). A measurement, not a check:
    /// `cargo test --release -p linerate-server --lib seal_cost -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore = "a measurement, run by hand in release mode"]
    fn seal_cost() {
        std::thread::spawn(seal_cost_here).join().unwrap();
    }

    fn seal_cost_here() {
        use std::time::Instant;
        const MIB: usize = 256;
        let (mut server, mut client) = pair();
        let mut http = Connection::new(Limits::default(), 32);
        shake(&mut server, &mut client, &mut http);
        server.small_left = 0;
        let data = vec![0x5au8; WRITE_BYTES];
        let mut out = Vec::with_capacity(2 * WRITE_BYTES);
        let rounds = MIB * (1 << 20) / WRITE_BYTES;
        let now = Instant::now();
        let per_mib = |d: std::time::Duration| d.as_secs_f64() * 1e6 / MIB as f64;
        let best = |f: &mut dyn FnMut() -> (f64, f64)| {
            (0..5)
                .map(|_| f())
                .fold((f64::MAX, f64::MAX), |a, b| (a.0.min(b.0), a.1.min(b.1)))
        };
        // (sealing into the session, moving its records out)
        let (write, take) = best(&mut || {
            let (mut w, mut t) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
            for _ in 0..rounds {
                let t0 = Instant::now();
                let n = server.write(&data, now).unwrap();
                assert_eq!(n, data.len());
                let t1 = Instant::now();
                out.clear();
                server.take_records(&mut out);
                w += t1 - t0;
                t += t1.elapsed();
            }
            (per_mib(w), per_mib(t))
        });
        let key = ring::aead::LessSafeKey::new(
            ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, &[7; 16]).unwrap(),
        );
        let mut record = vec![0x5au8; 16 * 1024 + 1];
        let mut seq = 0u64;
        let (in_place, _) = best(&mut || {
            let t = Instant::now();
            for _ in 0..rounds * 4 {
                let mut n = [0u8; 12];
                n[4..].copy_from_slice(&seq.to_be_bytes());
                seq += 1;
                let tag = key
                    .seal_in_place_separate_tag(
                        ring::aead::Nonce::assume_unique_for_key(n),
                        ring::aead::Aad::from([0x17, 3, 3, 0x40, 0x11]),
                        &mut record,
                    )
                    .unwrap();
                let _ = std::hint::black_box(tag);
            }
            (per_mib(t.elapsed()), 0.0)
        });
        let mut dst = vec![0u8; 16 * 1024];
        let (copy, _) = best(&mut || {
            let t = Instant::now();
            for _ in 0..rounds {
                for c in data.chunks(16 * 1024) {
                    dst.copy_from_slice(c);
                    std::hint::black_box(&dst);
                }
            }
            (per_mib(t.elapsed()), 0.0)
        });
        println!(
            "us per MiB, best of 5 over {MIB} MiB: session {:.1} (sealing {write:.1}, \
             records out {take:.1}), ring in place {in_place:.1}, copy {copy:.1}",
            write + take
        );
    }
}
