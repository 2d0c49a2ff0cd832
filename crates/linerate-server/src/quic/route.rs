//! Connection-ID routing: each datagram goes to the endpoint that owns its
//! connection, whichever worker read it.
//!
//! Workers share their UDP sockets across a reload (the old generation drains while
//! the new one serves, both reading the same sockets), so a datagram of a connection
//! can be read by an endpoint that does not hold it. Every connection ID this server
//! issues carries the index of its endpoint's socket in the `SO_REUSEPORT` group, and,
//! hidden, the tag of the endpoint that issued it (8 bytes: the index, 5 random, then
//! the tag XOR a keyed hash of the first 6). The kernel reads the index
//! ([`linerate_sys::steer::quic_program`], attached to each group): every datagram of
//! a connection reaches the socket of the worker that owns it, whichever port the
//! client's datagrams come from (a migration, a NAT's rebinding), where the kernel's
//! hash of the addresses would pick again. The index is in the clear, as QUIC-LB's
//! plaintext routing (draft-ietf-quic-load-balancers) has it: an observer learns
//! which of the workers a connection's IDs belong to, a few bits shared by every
//! connection of that worker, and nothing that links two IDs of one connection beyond
//! them (RFC 9000 §5.1). An endpoint that reads a datagram of another's tag (another
//! generation's on the same socket, across a reload, or a datagram the program could
//! not place) hands it to that endpoint's mailbox and wakes its worker, counted as
//! misrouted. A new connection's first datagrams name an ID the client chose: a
//! draining endpoint hands them to the socket's current one.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use quinn_proto::{ConnectionId, ConnectionIdGenerator};
use ring::rand::SecureRandom;

use linerate_sys::udp::Received;

/// The length of the connection IDs this server issues.
pub(crate) const CID_LEN: usize = 8;

/// How a worker is woken from another thread.
pub(crate) type Wake = Box<dyn Fn() + Send + Sync>;

/// Datagrams handed to an endpoint by others, and how to wake its worker (another
/// worker's, once a reload has handed the endpoint on).
pub(crate) struct Mailbox {
    queue: Mutex<Vec<(Received, Vec<u8>)>>,
    wake: Mutex<Wake>,
}

impl Mailbox {
    /// Takes what came.
    pub fn take(&self) -> Vec<(Received, Vec<u8>)> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn put(&self, r: Received, bytes: &[u8]) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let first = q.is_empty();
        q.push((r, bytes.to_vec()));
        drop(q);
        if first {
            self.wake();
        }
    }

    fn wake(&self) {
        (self.wake.lock().unwrap_or_else(PoisonError::into_inner))();
    }
}

#[derive(Default)]
struct Routes {
    next: u16,
    boxes: HashMap<u16, Arc<Mailbox>>,
    /// The endpoint taking new connections on each socket (by its inode).
    current: HashMap<u64, u16>,
}

struct Router {
    key: RandomState,
    routes: Mutex<Routes>,
}

fn router() -> &'static Router {
    static R: OnceLock<Router> = OnceLock::new();
    R.get_or_init(|| Router {
        key: RandomState::new(),
        routes: Mutex::default(),
    })
}

fn routes() -> std::sync::MutexGuard<'static, Routes> {
    router()
        .routes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The 16 bits that hide a tag: a keyed hash of an ID's random bytes.
fn mask(random: &[u8]) -> u16 {
    let mut h = router().key.build_hasher();
    h.write(random);
    h.finish() as u16
}

/// The tag an ID of this server's carries.
fn tag_of(cid: &[u8]) -> Option<u16> {
    let cid: &[u8; CID_LEN] = cid.try_into().ok()?;
    Some(u16::from_be_bytes([cid[6], cid[7]]) ^ mask(&cid[..6]))
}

/// Issues IDs carrying the socket's `index` and the endpoint's `tag`.
pub(crate) struct Issuer {
    index: u8,
    tag: u16,
    rng: ring::rand::SystemRandom,
}

impl Issuer {
    pub fn new(index: u8, tag: u16) -> Issuer {
        Issuer {
            index,
            tag,
            rng: ring::rand::SystemRandom::new(),
        }
    }
}

impl ConnectionIdGenerator for Issuer {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut b = [0u8; CID_LEN];
        // The system's random source does not fail on Linux; were it to, the ID is
        // still unique enough for the endpoint's own table (the tag stays right).
        let _ = self.rng.fill(&mut b[1..6]);
        b[0] = self.index;
        let t = (self.tag ^ mask(&b[..6])).to_be_bytes();
        b[6..].copy_from_slice(&t);
        ConnectionId::new(&b)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Where a datagram belongs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The endpoint of this tag.
    Tag(u16),
    /// A new connection (an Initial or 0-RTT packet: the ID is the client's).
    New,
    /// Nobody to route to: left to the endpoint that read it.
    Here,
}

/// The owner of `d` by its destination connection ID (RFC 9000 §17: a short header's
/// ID follows its first byte; a long header's follows the version and its length).
pub(crate) fn owner(d: &[u8]) -> Owner {
    let Some(&first) = d.first() else {
        return Owner::Here;
    };
    let id = if first & 0x80 == 0 {
        d.get(1..1 + CID_LEN)
    } else {
        // QUIC v1's long packet types: Initial 0, 0-RTT 1, Handshake 2, Retry 3.
        if (first >> 4) & 0b11 <= 1 {
            return Owner::New;
        }
        let len = usize::from(*d.get(5).unwrap_or(&0));
        d.get(6..6 + len)
    };
    match id.and_then(tag_of) {
        Some(t) => Owner::Tag(t),
        None => Owner::Here,
    }
}

/// An endpoint's place in the routing table, given up when dropped.
pub(crate) struct Place {
    pub tag: u16,
    socket: u64,
    pub mailbox: Arc<Mailbox>,
}

impl Place {
    /// A new endpoint on the socket `socket` (its inode), woken by `wake`: its tag, its
    /// mailbox, and from now on the socket's current endpoint.
    pub fn take(socket: u64, wake: Wake) -> Place {
        let mut r = routes();
        let mut tag = r.next;
        while r.boxes.contains_key(&tag) {
            tag = tag.wrapping_add(1);
        }
        r.next = tag.wrapping_add(1);
        let mailbox = Arc::new(Mailbox {
            queue: Mutex::default(),
            wake: Mutex::new(wake),
        });
        r.boxes.insert(tag, Arc::clone(&mailbox));
        r.current.insert(socket, tag);
        Place {
            tag,
            socket,
            mailbox,
        }
    }

    /// Whether its endpoint takes the socket's new connections.
    pub fn is_current(&self) -> bool {
        routes().current.get(&self.socket) == Some(&self.tag)
    }

    /// Its endpoint's worker is woken by `wake` from now on (the next generation's,
    /// which took the endpoint on at a reload), and woken now for what came before.
    pub fn rewake(&self, wake: Wake) {
        *self
            .mailbox
            .wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = wake;
        self.mailbox.wake();
    }

    /// The IDs this endpoint issues.
    #[cfg(test)]
    pub fn issuer(&self) -> Issuer {
        Issuer::new(0, self.tag)
    }

    /// Hands `d` (received as `r` says) to its owner if that is another endpoint;
    /// false when it is this one's to handle. A new connection goes to the socket's
    /// current endpoint when `draining`.
    pub fn forward(&self, r: &Received, d: &[u8], draining: bool) -> bool {
        let to = match owner(d) {
            Owner::Tag(t) if t != self.tag => t,
            Owner::New if draining => match routes().current.get(&self.socket) {
                Some(&t) if t != self.tag => t,
                _ => return false,
            },
            _ => return false,
        };
        put(to, r, d)
    }
}

/// Hands `d` (received as `r` says on socket `socket`) to the endpoint that owns it
/// (a new connection: the socket's current one), read by a worker whose endpoint went
/// to the next generation: whether one took it.
pub(crate) fn hand_on(socket: u64, r: &Received, d: &[u8]) -> bool {
    let to = match owner(d) {
        Owner::Tag(t) => t,
        Owner::New => match routes().current.get(&socket) {
            Some(&t) => t,
            None => return false,
        },
        Owner::Here => return false,
    };
    put(to, r, d)
}

/// Puts `d` in the mailbox of the endpoint tagged `to`: whether there is one.
fn put(to: u16, r: &Received, d: &[u8]) -> bool {
    let Some(mb) = routes().boxes.get(&to).cloned() else {
        return false;
    };
    let one = Received {
        len: d.len(),
        segment: None,
        ..*r
    };
    mb.put(one, d);
    true
}

/// Wakes the worker of the endpoint taking socket `socket`'s new connections, if one
/// does: whether one does.
pub(crate) fn wake_current(socket: u64) -> bool {
    let mb = {
        let r = routes();
        let Some(tag) = r.current.get(&socket) else {
            return false;
        };
        r.boxes.get(tag).cloned()
    };
    if let Some(mb) = mb {
        mb.wake();
    }
    true
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut r = routes();
        r.boxes.remove(&self.tag);
        if r.current.get(&self.socket) == Some(&self.tag) {
            r.current.remove(&self.socket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issued_id_names_its_endpoint_and_ids_look_random() {
        let mut g = Issuer::new(3, 0x1234);
        let a = g.generate_cid();
        let b = g.generate_cid();
        assert_eq!(tag_of(&a), Some(0x1234));
        assert_eq!(tag_of(&b), Some(0x1234));
        assert_eq!((a[0], b[0]), (3, 3), "the socket's index first");
        assert_ne!(a[6..], b[6..], "the tag's bytes differ from ID to ID");
        assert_ne!(a[1..6], b[1..6]);
        // A short header packet of it, and a Handshake packet.
        let mut short = vec![0x40];
        short.extend_from_slice(&a);
        short.extend_from_slice(&[0; 20]);
        assert_eq!(owner(&short), Owner::Tag(0x1234));
        let mut hs = vec![0xe0, 0, 0, 0, 1, CID_LEN as u8];
        hs.extend_from_slice(&b);
        assert_eq!(owner(&hs), Owner::Tag(0x1234));
        // An Initial names an ID the client chose.
        assert_eq!(owner(&[0xc0, 0, 0, 0, 1, 8, 1, 2, 3]), Owner::New);
        assert_eq!(owner(&[]), Owner::Here);
    }

    #[test]
    fn a_datagram_goes_to_the_mailbox_of_its_owner_and_wakes_it() {
        let woke = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = Arc::clone(&woke);
        let old = Place::take(
            u64::MAX - 1,
            Box::new(move || {
                w.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }),
        );
        let new = Place::take(u64::MAX - 1, Box::new(|| {}));
        let cid = old.issuer().generate_cid();
        let mut d = vec![0x40];
        d.extend_from_slice(&cid);
        let r = Received {
            len: d.len(),
            from: "127.0.0.1:5".parse().unwrap(),
            to: None,
            ecn: 0,
            segment: None,
            truncated: false,
        };
        assert!(new.forward(&r, &d, false), "the old endpoint's");
        assert!(!old.forward(&r, &d, false), "its own");
        assert_eq!(old.mailbox.take().len(), 1);
        assert_eq!(woke.load(std::sync::atomic::Ordering::Relaxed), 1);
        // A new connection read by the draining old endpoint goes to the new one.
        let initial = [0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8];
        assert!(old.forward(&r, &initial, true));
        assert_eq!(new.mailbox.take().len(), 1);
        assert!(
            !new.forward(&r, &initial, false),
            "the current one takes it"
        );
        drop(new);
        assert!(
            !old.forward(&r, &initial, true),
            "no current endpoint: kept"
        );
    }
}
