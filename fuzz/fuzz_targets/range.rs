//! Range evaluation never panics, and what it asks to send lies within the file and
//! never totals more than the file (coalescing keeps the work O(file)).
#![no_main]
use libfuzzer_sys::fuzz_target;
use linerate_http::range::{evaluate, RangeDecision, MAX_RANGES};

fuzz_target!(|input: (bool, &str, u64)| {
    let (prefixed, spec, len) = input;
    // Half the inputs start as a real Range does, so the fuzzer explores past the unit.
    let value = if prefixed { format!("bytes={spec}") } else { spec.to_string() };
    if let RangeDecision::Partial(rs) = evaluate(&value, len) {
        assert!(!rs.is_empty() && rs.len() <= MAX_RANGES);
        let mut total: u128 = 0;
        for r in &rs {
            assert!(r.start < r.end && r.end <= len);
            total += u128::from(r.end - r.start);
        }
        assert!(total <= u128::from(len));
    }
});
