//! The chunked-body skipper never panics, never claims more bytes than it was given, and
//! consumes the same bytes whether fed at once or one byte at a time.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::request::ChunkedSkipper;

fuzz_target!(|data: &[u8]| {
    let mut whole = ChunkedSkipper::new();
    let a = whole.feed(data);
    if let Ok(n) = a {
        assert!(n <= data.len());
    }
    let mut bytewise = ChunkedSkipper::new();
    let mut total = 0;
    let mut err = false;
    for b in data {
        if bytewise.is_done() {
            break;
        }
        match bytewise.feed(std::slice::from_ref(b)) {
            Ok(n) => total += n,
            Err(_) => {
                err = true;
                break;
            }
        }
    }
    match a {
        Ok(n) => {
            assert!(!err);
            assert_eq!(n, total);
            assert_eq!(whole.is_done(), bytewise.is_done());
        }
        Err(_) => assert!(err),
    }
});
