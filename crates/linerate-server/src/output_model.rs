//! A model run of the output queue: bytes choose the responses (owned bytes, shared
//! cached bytes, file ranges), the settings (strategy, slices, the cork) and what the
//! "socket" answers to each call (short counts, would-blocks, a reset, a file that
//! shrank), and the run checks what the connection relies on:
//!
//! - nothing panics, and the queue asks for nothing it cannot be given;
//! - the bytes that leave are always a prefix of the responses' parts in order;
//! - with no fault, every byte leaves, each response is finished once and in order,
//!   and the queue ends idle;
//! - after a fault, the responses finished and those handed back as unsent are all of
//!   them, in order, and the bytes that left lie within the first unsent one.
//!
//! The property test of `output.rs` and the `output_queue` fuzz target both run it, so
//! the same decoder and the same checks serve both. No system call is made on a socket:
//! the "socket" is the model (the transmit state needs one real socket to be made; the
//! file parts are ranges of one temporary file, read with `pread` to see what a
//! `sendfile` would have sent).

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

use linerate_http::Status;
use linerate_sys::op::{Completion, Op};
use linerate_tx::{Sizing, Strategy, TxConfig, TxError, TxSocket};

use crate::config::Sending;
use crate::disk::Residency;
use crate::output::{Ctx, OutNext, Output};
use crate::response::{FileRange, Part, Response};
use crate::stats::Stats;

use linerate_sys::Errno;

/// Bytes of the file the file parts are ranges of.
const FILE_BYTES: usize = 1 << 20;

/// The byte at offset `i` of the model's file (no short period, so a part sent from the
/// wrong offset shows).
fn file_byte(i: usize) -> u8 {
    (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8
}

/// The shared file, made once per process (the queue needs no socket: the model answers
/// every operation, the transmit state's setup included).
fn fixture() -> &'static File {
    static F: OnceLock<File> = OnceLock::new();
    F.get_or_init(|| {
        let mut t = tempfile::tempfile().expect("a temporary file");
        let b: Vec<u8> = (0..FILE_BYTES).map(file_byte).collect();
        t.write_all(&b).expect("the model's file written");
        t
    })
}

/// Reads the input a byte at a time, zeros past its end.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> usize {
        usize::from(self.u8()) << 8 | usize::from(self.u8())
    }
}

/// What the "socket" does with one call.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// `EAGAIN`.
    WouldBlock,
    /// Takes at most this many bytes.
    Take(usize),
    /// `ECONNRESET`.
    Reset,
    /// A file read or `sendfile` finds the file ended (0 bytes).
    Shrunk,
}

fn answer(b: u8, faults: bool) -> Answer {
    match b {
        0 | 1 => Answer::WouldBlock,
        2 if faults => Answer::Reset,
        3 if faults => Answer::Shrunk,
        // Short counts of every size from 1 byte to 192 KiB.
        b => Answer::Take(usize::from(b) * usize::from(b) * 3 + usize::from(b % 7)),
    }
}

/// Runs the model on `input`; panics (with what was wrong) if the queue breaks a rule.
pub fn run(input: &[u8]) {
    let mut r = Bytes(input);
    let file = fixture();
    let file = Arc::new(file.try_clone().expect("the model's file"));

    let setup = r.u8();
    let strategy = [
        Strategy::Splice,
        Strategy::SendfileBatched,
        Strategy::Copy,
        Strategy::SendfileChunked { chunk_bytes: 5_000 },
        Strategy::Sendfile4k,
    ][usize::from(setup % 8 % 5)];
    let slice_bytes = [0u64, 4_096, 65_536][usize::from(setup / 8 % 3)];
    let cork = setup & 0x20 != 0;
    let faults = setup & 0x80 != 0;
    let mut tx = TxConfig::new(strategy);
    tx.notsent_lowat = Some(0);
    tx.zerocopy = false;
    if setup & 0x40 != 0 {
        tx.sizing = Sizing::FreeSpace;
    }
    let s = Sending {
        tx,
        slice_bytes,
        slice_min: 0,
        cork_min: u64::from(cork),
        collapse: 0,
    };
    let stats = Stats::default();
    let c = Ctx {
        disk: None,
        stats: &stats,
        sending: &s,
        unix: false,
    };

    let shared: Arc<[u8]> = (0..4_000u32)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<_>>()
        .into();
    let mut want = Vec::new();
    let mut lens = Vec::new();
    let mut o = Output::default();
    let responses = 1 + usize::from(r.u8() % 8);
    for ri in 0..responses {
        let mut parts = VecDeque::new();
        let start = want.len();
        for pi in 0..1 + usize::from(r.u8() % 3) {
            match r.u8() % 3 {
                0 => {
                    let seed = (ri * 7 + pi) as u8;
                    let n = 1 + r.u16() % 3_000;
                    let b: Vec<u8> = (0..n).map(|i| seed.wrapping_add(i as u8)).collect();
                    want.extend_from_slice(&b);
                    parts.push_back(Part::Bytes(b));
                }
                1 => {
                    let at = r.u16() % 2_000;
                    let n = 1 + r.u16() % 2_000;
                    want.extend_from_slice(&shared[at..at + n]);
                    parts.push_back(Part::Shared {
                        buf: Arc::clone(&shared),
                        start: at,
                        end: at + n,
                    });
                }
                _ => {
                    let at = r.u16() * 4;
                    let n = (r.u16() * 5).min(FILE_BYTES - at);
                    want.extend((at..at + n).map(file_byte));
                    parts.push_back(Part::File(FileRange {
                        file: Arc::clone(&file),
                        offset: at as u64,
                        len: n as u64,
                        residency: Residency::Unknown,
                    }));
                }
            }
        }
        lens.push(want.len() - start);
        let body = parts.iter().skip(1).map(Part::len).sum();
        o.push(Response::new(parts, Status::Ok, true, ri.to_string(), body));
    }
    // What the socket answers, in turn; at least one answer takes bytes, so each round
    // of them moves the queue on, and there are at most 512 of them, so a correct run
    // ends within the step bound below.
    let mut answers: Vec<Answer> = r.0.iter().take(512).map(|&b| answer(b, faults)).collect();
    answers.push(Answer::Take(70_000));

    // Set up by the queue's own operations, which the model answers: no socket.
    let mut txs = TxSocket::unset(s.tx.clone());
    let mut have_tx = false;
    let mut got: Vec<u8> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    let mut fault: Option<TxError> = None;
    // What the `splice` strategy's pipe holds: file bytes spliced in, not yet out.
    let mut pipe: VecDeque<u8> = VecDeque::new();
    // The next answer; only the calls that send take one (a measurement or a file
    // read is not the socket's answer), so every round of the answers makes progress.
    let mut i = 0usize;
    for step in 0usize.. {
        done.extend(o.take_finished().into_iter().map(|r| r.record.request_line));
        assert!(step < 2_000_000, "the queue never ends");
        let a = answers[i % answers.len()];
        let txr = have_tx.then_some(&mut txs);
        let next = match o.poll(txr, &c) {
            Ok(n) => n,
            Err(e) => {
                fault = Some(e);
                break;
            }
        };
        let sends = matches!(
            next,
            OutNext::Op(
                Op::Gather { .. } | Op::Sendfile { .. } | Op::Send { .. } | Op::SpliceOut { .. }
            )
        );
        i += usize::from(sends);
        let result: Completion = match next {
            OutNext::Empty => break,
            OutNext::DiskWait => panic!("a disk wait with no helpers"),
            OutNext::Yield => {
                o.begin_turn();
                continue;
            }
            OutNext::PrepareSocket => {
                assert!(!have_tx, "the transmit state asked for twice");
                have_tx = true;
                continue;
            }
            OutNext::Op(Op::SetOption { .. }) => Ok(0),
            OutNext::Op(_) if sends && matches!(a, Answer::WouldBlock) => Err(Errno::AGAIN),
            OutNext::Op(_) if sends && matches!(a, Answer::Reset) => Err(Errno::CONNRESET),
            OutNext::Op(Op::Gather { pieces, .. }) => {
                let total: usize = pieces.iter().map(|p| p.bytes.len()).sum();
                assert!(total > 0, "an empty gather");
                let take = match a {
                    Answer::Take(n) => n.clamp(1, total),
                    _ => 1,
                };
                let mut left = take;
                for p in &pieces {
                    let n = p.bytes.len().min(left);
                    got.extend_from_slice(&p.bytes[..n]);
                    left -= n;
                }
                Ok(take)
            }
            OutNext::Op(op) => match (op, a) {
                (Op::Sendfile { .. }, Answer::Shrunk) => Ok(0),
                (Op::Sendfile { file, at, len }, Answer::Take(n)) => {
                    assert!(len > 0, "an empty sendfile");
                    let n = n.clamp(1, len);
                    let mut b = vec![0u8; n];
                    file.read_exact_at(&mut b, at).expect("the model's file");
                    got.extend_from_slice(&b);
                    Ok(n)
                }
                (Op::Read { file, at, buf, .. }, a) => {
                    // The file's answer, not the socket's: whole, or nothing when the
                    // next answer says the file shrank.
                    if matches!(a, Answer::Shrunk) {
                        Ok(0)
                    } else {
                        file.read_exact_at(buf, at).expect("the model's file");
                        Ok(buf.len())
                    }
                }
                (Op::Send { data, .. }, Answer::Take(n)) => {
                    let n = n.clamp(1, data.len());
                    got.extend_from_slice(&data[..n]);
                    Ok(n)
                }
                (Op::Send { data, .. }, _) => {
                    got.extend_from_slice(&data[..1]);
                    Ok(1)
                }
                // Into the pipe: the file's answer, whole, or nothing when the next
                // answer says the file shrank.
                (Op::SpliceIn { .. }, Answer::Shrunk) => Ok(0),
                (Op::SpliceIn { file, at, len, .. }, _) => {
                    let mut b = vec![0u8; len];
                    file.read_exact_at(&mut b, at).expect("the model's file");
                    pipe.extend(b);
                    Ok(len)
                }
                (Op::SpliceOut { len, .. }, a) => {
                    assert!(
                        len > 0 && len <= pipe.len(),
                        "splice-out of {len} with {} piped",
                        pipe.len()
                    );
                    let n = match a {
                        Answer::Take(n) => n.clamp(1, len),
                        _ => 1,
                    };
                    got.extend(pipe.drain(..n));
                    Ok(n)
                }
                // The splice strategy's pipe: a real one (the model's pipe bytes are its
                // own, below), from the thread's spares.
                (Op::Pipe { slot, capacity }, _) => {
                    let pipe = linerate_sys::pipe::Pipe::take(capacity).expect("a pipe");
                    *slot = Some(Arc::new(pipe));
                    Ok(0)
                }
                // The file never really shrinks: a short answer only says it did.
                (Op::FileSize { .. }, _) => Ok(FILE_BYTES),
                (Op::QueuedBytes, Answer::Take(n)) => Ok(n % 50_000),
                (Op::QueuedBytes, _) => Ok(0),
                (Op::SendBufferSize, _) => Ok(100_000),
                (op, _) => panic!("{} asked for with no pipe or zero-copy", op.name()),
            },
        };
        let txr = have_tx.then_some(&mut txs);
        if let Err(e) = o.complete(txr, result, &stats) {
            fault = Some(e);
            break;
        }
    }

    let order: Vec<String> = (0..responses).map(|i| i.to_string()).collect();
    assert!(got.len() <= want.len(), "more bytes left than were queued");
    assert!(
        got == want[..got.len()],
        "the bytes that left are not the queue's"
    );
    match fault {
        None => {
            done.extend(o.take_finished().into_iter().map(|r| r.record.request_line));
            assert!(!o.busy(), "the queue ended busy");
            assert_eq!(got.len(), want.len(), "not every byte left");
            assert_eq!(done, order, "responses not finished once each, in order");
        }
        Some(e) => {
            // Only the faults the model made.
            assert!(
                matches!(e, TxError::PeerGone(_) | TxError::Truncated { .. }),
                "{e}"
            );
            // The finished (taken first, as `Conn::abort` does) and the unsent are all
            // the responses, in order.
            done.extend(o.take_finished().into_iter().map(|r| r.record.request_line));
            let (unsent, front) = o.take_unsent();
            assert!(!o.busy(), "a cut queue still busy");
            let mut all = done.clone();
            all.extend(unsent.iter().map(|r| r.record.request_line.clone()));
            assert_eq!(all, order, "responses lost or repeated at a cut");
            // What left covers the finished ones and lies within the first unsent.
            let finished: usize = lens[..done.len()].iter().sum();
            assert!(
                got.len() >= finished,
                "a response finished before its bytes left"
            );
            let first = lens.get(done.len()).copied().unwrap_or(0);
            // What the log says left of the first unsent one is what left.
            if let Some(u) = unsent.front() {
                assert_eq!(
                    u.progress.sent + front,
                    (got.len() - finished) as u64,
                    "the bytes logged for the cut response"
                );
            }
            assert!(
                got.len() <= finished + first,
                "bytes of a later response left"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    /// The fuzz target's first find, a fault of the model: a would-block that always
    /// fell on the send after a free-space measurement, so nothing ever left (batched
    /// sendfile, free-space sizing, 4 KiB slices, the cork, faults on).
    #[test]
    fn a_would_block_after_every_measurement_still_ends() {
        super::run(&[
            225, 64, 34, 26, 191, 191, 191, 215, 0, 64, 9, 0, 64, 0, 65, 1,
        ]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever the socket answers at each call (short counts, would-blocks, a
        /// reset, a file that shrank), the bytes that leave are the responses' parts in
        /// order and each response is finished or handed back once, in order (the
        /// checks are the model's, this model's, which the fuzz target runs too).
        #[test]
        fn any_sequence_of_answers_delivers_the_bytes_in_order(
            input in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
        ) {
            super::run(&input);
        }
    }
}
