//! A PROXY protocol header: any bytes, never a panic; a header found is no longer than
//! the input, and the bytes fed one at a time give the same answer as whole.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_server::fuzzing::proxy_header;

fuzz_target!(|data: &[u8]| {
    let whole = proxy_header(data);
    if let Some(Some(len)) = whole {
        assert!(len <= data.len());
    }
    let mut fed = None;
    for n in 1..=data.len() {
        fed = proxy_header(&data[..n]);
        if fed.is_some() {
            break;
        }
    }
    if let Some(Some(_)) = whole {
        assert_eq!(fed, whole);
    }
});
