//! Path resolution never panics and never yields a segment that could leave the root.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::path::resolve;

fuzz_target!(|input: (&str, bool)| {
    let (raw, dotfiles) = input;
    if let Ok(r) = resolve(raw, dotfiles) {
        for s in r.segments() {
            assert!(!s.is_empty() && s != b"." && s != b"..");
            assert!(!s.contains(&b'/') && !s.contains(&0));
            assert!(dotfiles || s[0] != b'.');
        }
    }
});
