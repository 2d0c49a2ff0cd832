//! The connection's output queue under any responses and any answers from the socket
//! (short counts, would-blocks, resets, a file that shrinks): the bytes that leave are
//! the queue's in order, each response finishes or is handed back once, and nothing
//! panics. The decoder and the checks are `linerate_server::fuzzing::output_queue`,
//! which the crate's property test runs too.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    linerate_server::fuzzing::output_queue(input);
});
