//! The event-loop layer every linerate loop stands on: the server's workers
//! (`linerate serve`), the HTTP load generator's threads (`linerate bench http`) and the
//! discard server's (`linerate sink`).
//!
//! One trait, [`Driver`], and two kernels' ways behind it:
//!
//! - [`EpollDriver`]: readiness. Edge-triggered for connections (the owner reads and
//!   writes until `EAGAIN`, or keeps the connection on a run list of its own when it
//!   stops before that), level-triggered for listeners and other descriptors.
//! - [`UringDriver`]: completion. io_uring accepts, receives into provided buffers,
//!   sends gathers and closes, one `io_uring_enter` per loop turn for all of them
//!   ([`Driver::ring`] gives what only it does, [`Ring`]; [`Io`] carries what the
//!   ring did). A file body's
//!   operations are made at once by its executor ([`Driver::execute`]): the ring has no
//!   `sendfile`, and it runs every `splice` on the kernel's worker threads, which
//!   measured 3-38% more CPU per request than the direct call (BENCHMARKS.md, "File
//!   bodies' splices on the io_uring ring"; `LINERATE_RING_SPLICE=1` puts them there).
//!
//! [`linerate_sys::exec::now`] is the readiness executor of a connection's output operations
//! (`linerate_sys::op::Op`), which both drivers' [`Driver::execute`] use for what they
//! make at once.
//!
//! [`Timers`] is the loops' deadlines: a hashed timing wheel, O(1) to arm, whose turn
//! costs the entries that came due, not the connections held.
//!
//! [`DriverChoice`] is the `--driver` setting: `auto` probes io_uring at start and falls
//! back to epoll with one line saying why.
//!
//! Non-goals: futures, wakers of tasks, a reactor shared between threads. A loop is
//! one thread's, with its own driver; tokens are the owner's (the server encodes what
//! a token names, the load generator uses connection indices).
//!
//! All system calls are `linerate-sys`'s; this crate forbids unsafe_code.

#![forbid(unsafe_code)]

pub mod driver;
pub mod timer;

pub use driver::{
    Driver, DriverChoice, EpollDriver, Interest, Io, Ready, Ring, Submitted, UringDriver,
};
pub use timer::{Tick, Timers};
