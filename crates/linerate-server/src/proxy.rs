//! The PROXY protocol (HAProxy's, versions 1 and 2): a load balancer that passes TCP
//! through opens each connection with a header naming the client, before any byte
//! of HTTP or TLS. A listener named by `--proxy-protocol` expects one on every
//! connection; the header is parsed by the `ppp` crate (made for it), and what is
//! kept of it is the client's address.

/// The keys of the client's address as a balancer tells it: PROXY headers and trusted
/// proxies' forwarded fields: rows of the settings table (`settings!` in settings.rs,
/// which says what a row holds), kept here beside what they drive; `--help` shows them
/// under their own heading.
macro_rules! proxy_keys {
    ($($table:tt)*) => {
        settings! {
            @join [
            /// Address, among --listen, --tls-listen and --redirect-listen, whose every
            /// connection opens with a PROXY protocol header (v1 or v2, as HAProxy's send-proxy
            /// and send-proxy-v2, AWS and other load balancers send it, before any TLS): the
            /// client's address is the one the header names, for the access log,
            /// --metrics-allow and everything else; a connection without a valid header within
            /// --header-timeout is closed. Repeat for several [default: none].
            #[arg(long, help_heading = "Proxies", value_name = "ADDR")]
            #[serde(
                default,
                deserialize_with = "one_or_many"
            )]
            pub proxy_protocol: Vec<ListenAddr>
                => Vec<Endpoint> = Vec::new(), |l| endpoints(l),
            /// Proxies whose --forwarded-header names the client: a network, an address, or
            /// unix: for a Unix socket's clients; the header is read from the right, past every
            /// trusted address, and ignored from any other sender. Repeat for several
            /// [default: none: the header is never believed].
            #[arg(long, help_heading = "Proxies", value_name = "CIDR")]
            #[serde(default)]
            pub trusted_proxies: Vec<Cidr>
                => Vec<Cidr> = Vec::new(), |t| t,
            /// The header --trusted-proxies name the client in: x-forwarded-for or forwarded
            /// (RFC 7239's for=) [default: x-forwarded-for].
            #[arg(long, help_heading = "Proxies", value_name = "HEADER")]
            pub forwarded_header: Option<ForwardedHeader>
                => linerate_http::forwarded::Header = Default::default(), |h| h.0,
            ]
            $($table)*
        }
    };
}

use std::net::SocketAddr;

/// Longest header taken: a v1 line is at most 107 bytes; a v2 header is 16 bytes and
/// its addresses and TLVs (what balancers add is well under this).
pub(crate) const MAX_HEADER: usize = 4096;

/// A v2 header's first 12 bytes.
const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// Longest v1 line, its CRLF included.
const V1_MAX: usize = 107;

/// What the bytes so far amount to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Header {
    /// Not whole yet.
    Partial,
    /// A header of `len` bytes, naming `source` as the client (none: a v2 LOCAL
    /// command, a balancer's own health check, or v1 `UNKNOWN`: the connection's own
    /// peer is the client).
    Whole {
        len: usize,
        source: Option<SocketAddr>,
    },
    /// Not a PROXY header: the connection is closed.
    Invalid(String),
}

/// Parses the header at the start of `bytes`.
pub(crate) fn parse(bytes: &[u8]) -> Header {
    use ppp::{v1, v2, HeaderResult};
    // Where the header ends is found here, and the parser given it whole: its own
    // judgement of a partial header takes a line cut inside its last field for a bad
    // one.
    let head = &bytes[..bytes.len().min(V2_SIGNATURE.len())];
    let end = if V2_SIGNATURE.starts_with(head) {
        if bytes.len() < 16 {
            return Header::Partial;
        }
        let len = 16 + u16::from_be_bytes([bytes[14], bytes[15]]) as usize;
        if len > MAX_HEADER {
            return Header::Invalid(format!("a PROXY header longer than {MAX_HEADER} bytes"));
        }
        len
    } else if b"PROXY ".starts_with(&bytes[..bytes.len().min(6)]) {
        match bytes.iter().position(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if bytes.len() < V1_MAX => return Header::Partial,
            None => return Header::Invalid(format!("a PROXY line longer than {V1_MAX} bytes")),
        }
    } else {
        return Header::Invalid("not a PROXY header".into());
    };
    if bytes.len() < end {
        return Header::Partial;
    }
    match HeaderResult::parse(&bytes[..end]) {
        HeaderResult::V1(Ok(h)) => Header::Whole {
            len: h.header.len(),
            source: match h.addresses {
                v1::Addresses::Tcp4(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                v1::Addresses::Tcp6(a) => Some(SocketAddr::from((a.source_address, a.source_port))),
                v1::Addresses::Unknown => None,
            },
        },
        HeaderResult::V2(Ok(h)) => Header::Whole {
            len: h.len(),
            source: match (h.command, h.addresses) {
                (v2::Command::Local, _) => None,
                (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                    Some(SocketAddr::from((a.source_address, a.source_port)))
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                    Some(SocketAddr::from((a.source_address, a.source_port)))
                }
                // A Unix socket's client or an unspecified family names no address.
                (v2::Command::Proxy, _) => None,
            },
        },
        HeaderResult::V1(Err(e)) => Header::Invalid(format!("not a PROXY header ({e})")),
        HeaderResult::V2(Err(e)) => Header::Invalid(format!("not a PROXY header ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        h.push(0x20 | command);
        h.push(family);
        let len = (addresses.len() + tlvs.len()) as u16;
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(addresses);
        h.extend_from_slice(tlvs);
        h
    }

    #[test]
    fn v1_names_the_client_and_its_length_is_the_line() {
        let line = b"PROXY TCP4 198.51.100.7 198.18.0.1 56324 80\r\nGET / HTTP/1.1\r\n";
        assert_eq!(
            parse(line),
            Header::Whole {
                len: 45,
                source: Some("198.51.100.7:56324".parse().unwrap())
            }
        );
        assert_eq!(
            parse(b"PROXY TCP6 2001:db8::7 2001:db8::1 4711 443\r\n"),
            Header::Whole {
                len: 45,
                source: Some("[2001:db8::7]:4711".parse().unwrap())
            }
        );
        assert_eq!(
            parse(b"PROXY UNKNOWN\r\n"),
            Header::Whole {
                len: 15,
                source: None
            }
        );
    }

    #[test]
    fn v2_names_the_client_and_a_local_command_names_none() {
        let mut a = vec![198, 51, 100, 7, 198, 18, 0, 1];
        a.extend_from_slice(&56324u16.to_be_bytes());
        a.extend_from_slice(&80u16.to_be_bytes());
        // A TLV (NOOP) after the addresses is part of the header.
        let h = v2(1, 0x11, &a, &[0x04, 0, 2, 0, 0]);
        let mut bytes = h.clone();
        bytes.extend_from_slice(b"\x16\x03\x01");
        assert_eq!(
            parse(&bytes),
            Header::Whole {
                len: h.len(),
                source: Some("198.51.100.7:56324".parse().unwrap())
            }
        );
        let local = v2(0, 0x00, &[], &[]);
        assert_eq!(
            parse(&local),
            Header::Whole {
                len: 16,
                source: None
            }
        );
    }

    #[test]
    fn a_header_in_pieces_is_partial_until_whole() {
        let line = b"PROXY TCP4 198.51.100.7 198.18.0.1 56324 80\r\n";
        for n in 1..line.len() {
            assert_eq!(parse(&line[..n]), Header::Partial, "{n} bytes");
        }
        let mut a = vec![198, 51, 100, 7, 198, 18, 0, 1];
        a.extend_from_slice(&[0, 1, 0, 80]);
        let h = v2(1, 0x11, &a, &[]);
        for n in 1..h.len() {
            assert_eq!(parse(&h[..n]), Header::Partial, "{n} bytes");
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for bytes in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"PROXY TCP4 198.51.100.7 198.18.0.1 56324\r\n",
            b"PROXY TCP5 1 2 3 4\r\n",
        ] {
            assert!(matches!(parse(bytes), Header::Invalid(_)), "{bytes:?}");
        }
        // No end in sight: refused at the bound, not buffered without one.
        let mut long = b"PROXY TCP4 ".to_vec();
        long.resize(200, b'1');
        assert!(matches!(parse(&long), Header::Invalid(_)));
    }
}
