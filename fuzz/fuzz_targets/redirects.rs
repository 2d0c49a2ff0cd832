//! Request paths through a site with redirect, fallback and error-page rules of every
//! kind: no head line holds a byte other than visible ASCII and spaces, and no Location
//! leaves the site but a rule's own absolute URL (`redirect_model`'s checks).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|target: &[u8]| {
    let mut t = b"/".to_vec();
    t.extend_from_slice(target);
    linerate_server::fuzzing::redirects(&t);
});
