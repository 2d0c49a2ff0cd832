//! A worker's HTTP/3 endpoint handed to the next generation's worker at a reload, so
//! that its QUIC connections go on (a TCP connection's state is the kernel's and stays
//! with the process; a QUIC connection's is the endpoint's, in the worker).
//!
//! The next generation's worker for a UDP socket asks first ([`want`]): if an endpoint
//! reads that socket now, it waits for it, woken when it comes. The retiring worker,
//! told to end gently (a reload, not a stop), sees that it is wanted ([`wanted`]),
//! takes no new request from then on (their streams are read and kept, unanswered),
//! finishes the answers it has, and hands the endpoint, its connections and their
//! HTTP/3 over ([`give`]). The answers must be done first: they hold the old
//! generation's files and caches, which stay on its thread. An endpoint not handed
//! over within [`HAND_WITHIN`] (a large answer still under way, or nobody wanting it:
//! the listener gone, HTTP/3 turned off, a binary upgrade's new process) is declined
//! ([`decline`]): its connections are told GOAWAY and closed as at a stop, and the
//! waiting worker starts an endpoint of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::Handed;

/// How long a retiring worker may take to hand its endpoint over: past it, its
/// requests are answered by itself again and its connections told GOAWAY. While it
/// hands over, new requests wait: this bounds that wait.
pub(crate) const HAND_WITHIN: Duration = Duration::from_millis(250);

type Wake = Arc<dyn Fn() + Send + Sync>;

/// One socket's handover: who wants its endpoint, and what was given.
struct Slot {
    ticket: u64,
    wake: Wake,
    given: Option<Box<Handed>>,
    declined: bool,
}

#[derive(Default)]
struct Slots {
    next: u64,
    by_socket: HashMap<u64, Slot>,
}

fn slots() -> std::sync::MutexGuard<'static, Slots> {
    static S: OnceLock<Mutex<Slots>> = OnceLock::new();
    S.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// What a waiting worker finds.
pub(crate) enum Claim {
    /// The endpoint, to take on.
    Given(Box<Handed>),
    /// It was declined: start an endpoint of its own.
    Fresh,
    /// Not yet.
    Wait,
    /// A later generation wants it instead (a reload during a reload): nothing to do.
    Superseded,
}

/// The next generation's worker for socket `socket` (its inode): a ticket to wait
/// with when an endpoint reads the socket now (that endpoint's worker is woken to
/// look), woken by `wake` when it is handed over or declined; none when there is no
/// endpoint to wait for.
pub(crate) fn want(socket: u64, wake: Box<dyn Fn() + Send + Sync>) -> Option<u64> {
    let ticket = {
        let mut s = slots();
        s.next += 1;
        let ticket = s.next;
        let wake: Wake = Arc::from(wake);
        // A generation that wanted it and has not taken it yet (a reload during a
        // reload) is superseded: what was given or declined for it is this one's.
        let slot = s.by_socket.entry(socket).or_insert_with(|| Slot {
            ticket,
            wake: Arc::clone(&wake),
            given: None,
            declined: false,
        });
        slot.ticket = ticket;
        slot.wake = wake;
        ticket
    };
    let given = || {
        slots()
            .by_socket
            .get(&socket)
            .is_some_and(|t| t.given.is_some())
    };
    if crate::quic::wake_current(socket) || given() {
        return Some(ticket);
    }
    // Nobody reads the socket: nothing will come.
    let mut s = slots();
    if s.by_socket.get(&socket).is_some_and(|t| t.ticket == ticket) {
        s.by_socket.remove(&socket);
    }
    None
}

/// What the worker holding `ticket` for `socket` finds now.
pub(crate) fn claim(socket: u64, ticket: u64) -> Claim {
    let mut s = slots();
    let Some(slot) = s.by_socket.get_mut(&socket) else {
        return Claim::Superseded;
    };
    if slot.ticket != ticket {
        return Claim::Superseded;
    }
    if let Some(h) = slot.given.take() {
        s.by_socket.remove(&socket);
        return Claim::Given(h);
    }
    if slot.declined {
        s.by_socket.remove(&socket);
        return Claim::Fresh;
    }
    Claim::Wait
}

/// The waiting worker ends (a stop) before the endpoint came: it no longer waits; what
/// was given already is its to take on (and to close).
pub(crate) fn withdraw(socket: u64, ticket: u64) -> Option<Box<Handed>> {
    let mut s = slots();
    if s.by_socket.get(&socket).is_none_or(|t| t.ticket != ticket) {
        return None;
    }
    s.by_socket.remove(&socket).and_then(|t| t.given)
}

/// Whether a worker waits for the endpoint reading `socket` now.
pub(crate) fn wanted(socket: u64) -> bool {
    slots()
        .by_socket
        .get(&socket)
        .is_some_and(|t| t.given.is_none() && !t.declined)
}

/// Hands `h` to the worker waiting for `socket`'s endpoint and wakes it; back when none
/// waits (it withdrew).
pub(crate) fn give(socket: u64, h: Box<Handed>) -> Result<(), Box<Handed>> {
    let wake = {
        let mut s = slots();
        match s.by_socket.get_mut(&socket) {
            Some(t) if t.given.is_none() && !t.declined => {
                t.given = Some(h);
                Arc::clone(&t.wake)
            }
            _ => return Err(h),
        }
    };
    wake();
    Ok(())
}

/// The endpoint reading `socket` will not be handed over: a waiting worker starts its
/// own.
pub(crate) fn decline(socket: u64) {
    let wake = {
        let mut s = slots();
        match s.by_socket.get_mut(&socket) {
            Some(t) if t.given.is_none() && !t.declined => {
                t.declined = true;
                Arc::clone(&t.wake)
            }
            _ => return,
        }
    };
    wake();
}
