//! The client behind trusted proxies: any header value, any trust, never a panic; with
//! no proxy trusted the client is the rightmost element's address alone.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::forwarded::{client, Header};

fuzz_target!(|input: (&str, bool, u8)| {
    let (value, rfc7239, trust) = input;
    let header = if rfc7239 { Header::Forwarded } else { Header::XForwardedFor };
    // Trust by the address's last byte, so chains of trusted hops occur.
    let trusted = |ip: std::net::IpAddr| match ip {
        std::net::IpAddr::V4(a) => a.octets()[3] & trust != 0,
        std::net::IpAddr::V6(a) => a.octets()[15] & trust != 0,
    };
    let _ = client(value, header, trusted);
    let none = client(value, header, |_| false);
    let last = value.rsplit(',').map(str::trim).find(|e| !e.is_empty());
    if let (Some(ip), Some(last)) = (none, last) {
        assert_eq!(client(last, header, |_| false), Some(ip), "{value:?}");
    }
});
