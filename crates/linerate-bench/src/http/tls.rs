//! `https://` for `bench http`: the client's TLS settings (rustls, ring provider), and
//! one connection's session between its socket and its HTTP bytes.
//!
//! Certificates are checked against `--cacert FILE` (PEM), else the system's bundle;
//! `--insecure` accepts any certificate (self-signed test servers) but still checks
//! the handshake's signature against it. With `--close` every connection makes a full
//! handshake (resumption off), so the run measures full handshakes per second; kept
//! alive, a new connection resumes a session from the run's shared cache.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use socket2::Socket;

/// The system's CA bundle (Debian's `ca-certificates`).
const SYSTEM_CAS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// How a run's connections speak TLS.
#[derive(Clone, Debug)]
pub struct ClientTls {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl ClientTls {
    /// The same, offering `h2` alone by ALPN.
    pub fn h2(mut self) -> ClientTls {
        let mut c = (*self.config).clone();
        c.alpn_protocols = vec![b"h2".to_vec()];
        self.config = Arc::new(c);
        self
    }

    /// The same for QUIC (`--h3`): ALPN `h3`, TLS 1.3 (QUIC has no other).
    pub(crate) fn h3(&self) -> Result<quinn_proto::ClientConfig, String> {
        let mut c = (*self.config).clone();
        c.alpn_protocols = vec![linerate_http::h3::ALPN.to_vec()];
        let quic = quinn_proto::crypto::rustls::QuicClientConfig::try_from(c)
            .map_err(|e| format!("QUIC: {e}"))?;
        Ok(quinn_proto::ClientConfig::new(Arc::new(quic)))
    }

    /// A TLS stream over `tcp` (offering HTTP/1.1 by ALPN), its handshake made as it
    /// is first used.
    pub(crate) fn stream(
        &self,
        tcp: std::net::TcpStream,
    ) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
        let mut c = (*self.config).clone();
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        let conn = rustls::ClientConnection::new(Arc::new(c), self.name.clone())
            .map_err(std::io::Error::other)?;
        Ok(rustls::StreamOwned::new(conn, tcp))
    }

    /// The name certificates are checked against.
    pub(crate) fn server_name(&self) -> String {
        match &self.name {
            ServerName::DnsName(d) => d.as_ref().to_string(),
            ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
            other => format!("{other:?}"),
        }
    }

    /// Settings for the server named `host` (the URL's host, without its port):
    /// certificates checked against `cacert` (else the system's bundle), or not at all
    /// with `insecure`; resumption off with `full_handshakes`. An error names the flag.
    pub fn new(
        host: &str,
        cacert: Option<&Path>,
        insecure: bool,
        full_handshakes: bool,
    ) -> Result<ClientTls, String> {
        let provider = rustls::crypto::ring::default_provider();
        ClientTls::with_provider(provider, host, cacert, insecure, full_handshakes)
    }

    /// [`ClientTls::new`] offering AES-128-GCM alone (TLS 1.3's suite, and TLS 1.2's
    /// with ECDHE and ECDSA): every server of a comparison then uses the same cipher,
    /// whatever its own preference.
    pub fn aes128_only(
        host: &str,
        cacert: &Path,
        full_handshakes: bool,
    ) -> Result<ClientTls, String> {
        let mut provider = rustls::crypto::ring::default_provider();
        provider.cipher_suites.retain(|s| {
            matches!(
                s.suite(),
                rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                    | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            )
        });
        ClientTls::with_provider(provider, host, Some(cacert), false, full_handshakes)
    }

    fn with_provider(
        provider: CryptoProvider,
        host: &str,
        cacert: Option<&Path>,
        insecure: bool,
        full_handshakes: bool,
    ) -> Result<ClientTls, String> {
        let provider = Arc::new(provider);
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let mut config = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        } else {
            let (path, flag) = match cacert {
                Some(p) => (p, "--cacert"),
                None => (Path::new(SYSTEM_CAS), "the system's CA bundle"),
            };
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("{flag} {}: {e:?}", path.display()))?;
            for c in certs {
                let c = c.map_err(|e| format!("{flag} {}: {e:?}", path.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!("{flag} {}: no certificate in it", path.display()));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        if full_handshakes {
            config.resumption = rustls::client::Resumption::disabled();
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("'{host}' is not a name TLS can check: {e}"))?;
        Ok(ClientTls {
            config: Arc::new(config),
            name,
        })
    }

    /// A new connection's session.
    pub(crate) fn session(&self) -> io::Result<ClientConnection> {
        let mut c = ClientConnection::new(Arc::clone(&self.config), self.name.clone())
            .map_err(io::Error::other)?;
        // The requests a connection has in flight are bounded by its pipeline depth:
        // the session takes them all.
        c.set_buffer_limit(None);
        Ok(c)
    }
}

/// Accepts any certificate, but checks that the handshake was signed by its key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A socket as rustls reads and writes it (non-blocking).
struct SocketIo<'a>(&'a Socket);

impl Read for SocketIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut s = self.0;
        s.read(buf)
    }
}

impl Write for SocketIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut s = self.0;
        s.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.send_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Plaintext from `tls` into `buf`, reading ciphertext from `sock` as needed: `Ok(0)` at
/// the end (close_notify or the socket's end), `WouldBlock` when the socket is empty.
/// `handshake_done` is set when this call finished the handshake.
pub(crate) fn read_plain(
    tls: &mut ClientConnection,
    sock: &Socket,
    buf: &mut [u8],
    handshake_done: &mut bool,
) -> io::Result<usize> {
    loop {
        match tls.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        let was_handshaking = tls.is_handshaking();
        match tls.read_tls(&mut SocketIo(sock)) {
            Ok(0) => return Ok(0),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        tls.process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")))?;
        if was_handshaking && !tls.is_handshaking() {
            *handshake_done = true;
        }
    }
}

/// Writes what `tls` holds to `sock` until it is all gone or the socket is full; the
/// bytes written.
pub(crate) fn write_records(tls: &mut ClientConnection, sock: &Socket) -> io::Result<usize> {
    let mut written = 0;
    while tls.wants_write() {
        match tls.write_tls(&mut SocketIo(sock)) {
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}
