//! The request-head parser never panics, and gives the same answer whether the bytes
//! come at once or are re-parsed as they arrive one by one.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::request::{parse, Http2, Limits, Parse};

fuzz_target!(|data: &[u8]| {
    let limits = Limits { request_line_bytes: 256, header_bytes: 512, header_fields: 8, client_fields: true, forwarded: Some(linerate_http::forwarded::Header::Forwarded), cors: true, authorization: true, http2: Http2::On };
    let whole = parse(data, &limits);
    let mut fed = Parse::Incomplete;
    for n in 1..=data.len() {
        fed = parse(&data[..n], &limits);
        if fed != Parse::Incomplete {
            break;
        }
    }
    // A complete head seen early may be followed by bytes that make the whole buffer a
    // different head only if the head ended before; both agree on what came first.
    if let (Parse::Complete { head_len: a, .. }, Parse::Complete { head_len: b, .. }) = (&whole, &fed) {
        assert_eq!(a, b);
    } else {
        assert_eq!(whole, fed);
    }
});
