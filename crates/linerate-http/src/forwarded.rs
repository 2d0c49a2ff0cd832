//! The client behind trusted proxies: `X-Forwarded-For` (de facto) and `Forwarded`
//! (RFC 7239), read from the right.
//!
//! Each proxy appends the address it received the request from, so the list reads
//! client first, nearest proxy last. Only the entries the trusted proxies appended can
//! be believed: anything to their left may be what the client wrote itself. So the
//! walk starts at the right end and skips entries that are trusted proxies too (a chain
//! of them, as nginx's `real_ip_recursive on`); the first entry that is not one is the
//! client. An entry that names no address (`unknown`, an obfuscated `_id`, garbage)
//! makes the client unknown, `0.0.0.0`, which only an `all` admits: never the trusted
//! proxy's own address, which allow-lists often admit. Entries are split at every
//! comma, quotes or not: a quote the client leaves open must not swallow the entry the
//! proxy appends after it.

use std::net::IpAddr;

/// Which header carries the chain (`--forwarded-header`). One only: a proxy that
/// appends to one of them passes the other through as the client wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Header {
    /// `X-Forwarded-For: client, proxy1, proxy2`.
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239).
    Forwarded,
}

impl Header {
    /// The field's name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            Header::XForwardedFor => "x-forwarded-for",
            Header::Forwarded => "forwarded",
        }
    }
}

impl std::str::FromStr for Header {
    type Err = String;
    fn from_str(s: &str) -> Result<Header, String> {
        match s.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(Header::XForwardedFor),
            "forwarded" => Ok(Header::Forwarded),
            _ => Err(format!("'{s}': expected x-forwarded-for or forwarded")),
        }
    }
}

impl std::fmt::Display for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The client an address the walk cannot name is: unknown.
pub const UNKNOWN: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

/// The client address the chain `value` (every field of the header, joined with ", ")
/// gives, the proxy that sent it being trusted: the rightmost address that `trusted`
/// refuses; the leftmost address if every one is trusted; [`UNKNOWN`] if the walk meets
/// an entry that names no address; None if the chain has no entry at all.
pub fn client(value: &str, header: Header, trusted: impl Fn(IpAddr) -> bool) -> Option<IpAddr> {
    let mut last = None;
    for element in value.split(',').rev().filter(|e| !e.trim().is_empty()) {
        let node = match header {
            Header::XForwardedFor => Some(element.trim()),
            Header::Forwarded => for_parameter(element),
        };
        let Some(ip) = node.and_then(address) else {
            return Some(UNKNOWN);
        };
        if !trusted(ip) {
            return Some(ip);
        }
        last = Some(ip);
    }
    last
}

/// The value of a `Forwarded` element's `for` parameter, unquoted.
fn for_parameter(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| value.trim().trim_matches('"'))
    })
}

/// The address of a node: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
/// `[2001:db8::1]` or `[2001:db8::1]:4711`; anything else names none.
fn address(node: &str) -> Option<IpAddr> {
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    if let Some(rest) = node.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        if !(after.is_empty() || port(after.strip_prefix(':')?)) {
            return None;
        }
        return ip
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|a| IpAddr::V6(a).to_canonical());
    }
    let (ip, p) = node.rsplit_once(':')?;
    if !port(p) {
        return None;
    }
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

fn port(p: &str) -> bool {
    p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Proxies at 10.0.0.0/8 are trusted.
    fn tens(a: IpAddr) -> bool {
        matches!(a, IpAddr::V4(v) if v.octets()[0] == 10)
    }

    #[test]
    fn the_rightmost_untrusted_address_is_the_client() {
        let h = Header::XForwardedFor;
        assert_eq!(client("198.51.100.7", h, tens), Some(ip("198.51.100.7")));
        // What the client wrote itself (left) is not believed past an untrusted hop.
        assert_eq!(
            client("1.2.3.4, 198.51.100.7, 10.0.0.2", h, tens),
            Some(ip("198.51.100.7"))
        );
        assert_eq!(client("10.0.0.3,10.0.0.2", h, tens), Some(ip("10.0.0.3")));
        assert_eq!(
            client(" 198.51.100.7:5555 ", h, tens),
            Some(ip("198.51.100.7"))
        );
        assert_eq!(client("[2001:db8::1]:80", h, tens), Some(ip("2001:db8::1")));
        assert_eq!(
            client("::ffff:198.51.100.7", h, tens),
            Some(ip("198.51.100.7"))
        );
    }

    #[test]
    fn an_entry_without_an_address_makes_the_client_unknown_not_the_proxy() {
        let h = Header::XForwardedFor;
        assert_eq!(client("unknown", h, tens), Some(UNKNOWN));
        assert_eq!(client("", h, tens), None);
        assert_eq!(client(" , ", h, tens), None);
        assert_eq!(client("1.2.3.4, garbage, 10.0.0.2", h, tens), Some(UNKNOWN));
        assert_eq!(client("1.2.3.4, 1.2.3.4:99999", h, tens), Some(UNKNOWN));
        assert_eq!(client("1.2.3.4:", h, tens), Some(UNKNOWN));
        // A quote the client left open swallows nothing the proxy appended.
        assert_eq!(client("\", 203.0.113.5", h, tens), Some(ip("203.0.113.5")));
        let f = Header::Forwarded;
        assert_eq!(
            client("for=\", for=203.0.113.5", f, tens),
            Some(ip("203.0.113.5"))
        );
        assert_eq!(client("for=\"", f, tens), Some(UNKNOWN));
    }

    #[test]
    fn forwarded_reads_the_for_parameter_of_each_element() {
        let h = Header::Forwarded;
        assert_eq!(
            client(
                "for=1.2.3.4, for=\"[2001:db8::7]:4711\";proto=https, For=10.0.0.9;by=10.0.0.1",
                h,
                tens
            ),
            Some(ip("2001:db8::7"))
        );
        assert_eq!(client("for=_hidden, for=10.0.0.2", h, tens), Some(UNKNOWN));
        assert_eq!(client("proto=https", h, tens), Some(UNKNOWN));
    }

    #[test]
    fn header_names_parse_in_any_case() {
        assert_eq!(
            "X-Forwarded-For".parse::<Header>(),
            Ok(Header::XForwardedFor)
        );
        assert_eq!("forwarded".parse::<Header>(), Ok(Header::Forwarded));
        assert!("x-real-ip".parse::<Header>().is_err());
    }
}
