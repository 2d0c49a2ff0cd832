//! Deadlines without a scan: a hashed timing wheel.
//!
//! A loop that holds many connections, each with a deadline that moves on every read
//! and write, wants three things of its timers: arming costs O(1), nothing is done for
//! a connection whose deadline is far away, and the work of a turn is the entries that
//! came due, not the connections held. A hashed wheel gives that (Varghese and Lauck's
//! scheme 6): time is cut into ticks of a fixed resolution, an entry due at tick `t`
//! goes in slot `t mod slots`, and each turn empties the slots of the ticks that have
//! passed, keeping the entries of later rounds that share a slot.
//!
//! Entries are never removed early. The owner keeps the [`Tick`] it armed a key for,
//! and an entry that fires with another tick is one it has since re-armed (stale):
//! it ignores it. Re-arming only when a deadline moves *earlier* than the armed tick,
//! and checking the real deadline when an entry fires (arming again if it moved later),
//! keeps the entries to about one per key: a deadline pushed back by activity costs
//! nothing until its entry comes due.
//!
//! Why by hand: the timer crates of the ecosystem are tied to an async runtime (tokio's
//! wheel, `futures-timer`) or keep a heap with removal, O(log n) per arm; a loop that
//! checks its real deadlines at expiry needs neither removal nor ordering within a tick.

use std::time::{Duration, Instant};

/// The tick an entry was armed for: the owner keeps it to know its own entry when it
/// fires. Later ticks compare greater.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tick(u64);

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    tick: u64,
}

/// A hashed timing wheel of keys (the owner's tokens).
#[derive(Debug)]
pub struct Timers {
    origin: Instant,
    resolution: Duration,
    slots: Vec<Vec<Entry>>,
    /// The first tick whose entries have not been handed out.
    next: u64,
    /// When that tick has passed (kept: a loop asks at every turn).
    due: Instant,
    len: usize,
}

impl Timers {
    /// A wheel of `slots` slots (rounded up to a power of two, at least 1) of
    /// `resolution` each, its tick 0 at `now`. Entries due further ahead than
    /// `slots × resolution` are kept in their slot over the rounds between.
    pub fn new(resolution: Duration, slots: usize, now: Instant) -> Timers {
        let resolution = resolution.max(Duration::from_micros(1));
        let n = slots.max(1).next_power_of_two();
        Timers {
            origin: now,
            resolution,
            slots: (0..n).map(|_| Vec::new()).collect(),
            next: 0,
            due: now,
            len: 0,
        }
    }

    /// The resolution: an entry fires in the first [`Timers::expire`] at or after its
    /// instant rounded up to it.
    pub fn resolution(&self) -> Duration {
        self.resolution
    }

    /// Entries held, stale ones included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tick `at` falls in, rounded up (never before `at`).
    fn tick_of(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.origin);
        let res = self.resolution.as_nanos();
        u64::try_from(d.as_nanos().div_ceil(res)).unwrap_or(u64::MAX)
    }

    /// The last tick wholly passed at `now`.
    /// (Tick t covers the resolutions from t-1 to t: it has passed once `now` is there.)
    fn passed(&self, now: Instant) -> u64 {
        let d = now.saturating_duration_since(self.origin);
        u64::try_from(d.as_nanos() / self.resolution.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The tick [`Timers::arm`] would give an entry due at `at` (an instant already
    /// past gets the next tick handed out): to compare with one already armed.
    pub fn tick_for(&self, at: Instant) -> Tick {
        Tick(self.tick_of(at).max(self.next))
    }

    /// When the next tick not yet handed out has passed: an [`Timers::expire`] from then
    /// on hands its entries out (a loop that waits until then meets each deadline
    /// within one resolution of it).
    pub fn next_due(&self) -> Instant {
        self.due
    }

    /// Arms `key` for `at`; returns the tick, for the owner to keep.
    pub fn arm(&mut self, key: u64, at: Instant) -> Tick {
        let Tick(tick) = self.tick_for(at);
        let mask = self.slots.len() as u64 - 1;
        self.slots[(tick & mask) as usize].push(Entry { key, tick });
        self.len += 1;
        Tick(tick)
    }

    /// Appends every entry due at `now` or before, as (key, the tick it was armed
    /// for), in the order of their ticks' slots.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<(u64, Tick)>) {
        let upto = self.passed(now);
        if upto < self.next {
            return;
        }
        let n = self.slots.len() as u64;
        let mask = n - 1;
        // Every slot once at most: a gap of a whole round or more visits each.
        let span = (upto - self.next + 1).min(n);
        for t in self.next..self.next + span {
            let slot = &mut self.slots[(t & mask) as usize];
            if slot.is_empty() {
                continue;
            }
            let before = slot.len();
            slot.retain(|e| {
                if e.tick <= upto {
                    out.push((e.key, Tick(e.tick)));
                    false
                } else {
                    true
                }
            });
            self.len -= before - slot.len();
        }
        self.next = upto + 1;
        let ns = u128::from(self.next) * self.resolution.as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX);
        self.due = self
            .origin
            .checked_add(Duration::from_nanos(ns))
            .unwrap_or_else(|| self.origin + Duration::from_secs(1 << 32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn keys(out: &[(u64, Tick)]) -> Vec<u64> {
        out.iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn an_entry_fires_at_its_tick_and_not_before() {
        let t0 = Instant::now();
        let mut w = Timers::new(ms(100), 8, t0);
        let tick = w.arm(7, t0 + ms(250));
        assert_eq!(tick, Tick(3), "rounded up to the next whole tick");
        let mut out = Vec::new();
        w.expire(t0 + ms(100), &mut out);
        w.expire(t0 + ms(299), &mut out);
        assert!(out.is_empty(), "{out:?}");
        w.expire(t0 + ms(300), &mut out);
        assert_eq!(out, vec![(7, Tick(3))]);
        assert!(w.is_empty());
        out.clear();
        w.expire(t0 + ms(10_000), &mut out);
        assert!(out.is_empty(), "an entry fires once");
    }

    #[test]
    fn next_due_is_when_the_next_tick_has_passed() {
        let t0 = Instant::now();
        let mut w = Timers::new(ms(100), 8, t0);
        assert_eq!(w.next_due(), t0);
        let mut out = Vec::new();
        w.expire(t0 + ms(250), &mut out);
        assert_eq!(w.next_due(), t0 + ms(300));
        w.arm(1, t0 + ms(260));
        w.expire(w.next_due() - ms(1), &mut out);
        assert!(out.is_empty());
        w.expire(w.next_due(), &mut out);
        assert_eq!(keys(&out), vec![1]);
    }

    #[test]
    fn a_past_instant_fires_at_the_next_expire() {
        let t0 = Instant::now();
        let mut w = Timers::new(ms(100), 8, t0);
        let mut out = Vec::new();
        w.expire(t0 + ms(500), &mut out);
        let tick = w.arm(1, t0);
        assert_eq!(tick, Tick(6));
        assert!(w.tick_for(t0 + ms(550)) == Tick(6));
        w.expire(t0 + ms(599), &mut out);
        assert!(out.is_empty());
        w.expire(t0 + ms(600), &mut out);
        assert_eq!(keys(&out), vec![1]);
    }

    #[test]
    fn entries_beyond_one_round_wait_for_their_round() {
        let t0 = Instant::now();
        // 4 slots of 10 ms: one round is 40 ms.
        let mut w = Timers::new(ms(10), 4, t0);
        w.arm(1, t0 + ms(20));
        w.arm(2, t0 + ms(60)); // the same slot, the next round
        w.arm(3, t0 + ms(1000));
        let mut out = Vec::new();
        for t in (0..=59).step_by(3) {
            w.expire(t0 + ms(t), &mut out);
        }
        assert_eq!(keys(&out), vec![1]);
        w.expire(t0 + ms(60), &mut out);
        assert_eq!(keys(&out), vec![1, 2]);
        // A long gap: every slot visited once, the far entry still only at its time.
        w.expire(t0 + ms(999), &mut out);
        assert_eq!(keys(&out), vec![1, 2]);
        assert_eq!(w.len(), 1);
        w.expire(t0 + ms(5000), &mut out);
        assert_eq!(keys(&out), vec![1, 2, 3]);
        assert!(w.is_empty());
    }

    #[test]
    fn stale_entries_are_the_owners_to_skip_by_their_tick() {
        let t0 = Instant::now();
        let mut w = Timers::new(ms(100), 16, t0);
        let late = w.arm(5, t0 + ms(900));
        let early = w.arm(5, t0 + ms(200));
        assert!(early < late);
        let mut out = Vec::new();
        w.expire(t0 + ms(1000), &mut out);
        assert_eq!(out, vec![(5, early), (5, late)]);
    }

    #[test]
    fn many_entries_come_out_exactly_once_each_in_tick_order() {
        let t0 = Instant::now();
        let mut w = Timers::new(ms(1), 64, t0);
        // Due times spread over several rounds, armed out of order.
        let mut due: Vec<(u64, u64)> = (0..500u64).map(|k| (k, (k * 7919) % 700)).collect();
        for &(k, at) in &due {
            w.arm(k, t0 + ms(at));
        }
        let mut out = Vec::new();
        let mut now: u64 = 0;
        while now < 700 + 13 {
            let before = out.len();
            w.expire(t0 + ms(now), &mut out);
            for (k, _) in &out[before..] {
                let at = due.iter().find(|(x, _)| x == k).unwrap().1;
                assert!(at <= now, "key {k} due at {at} ms fired at {now}");
                assert!(at + 13 > now, "key {k} due at {at} ms fired late, at {now}");
            }
            now += 13;
        }
        let mut got = keys(&out);
        got.sort_unstable();
        due.sort_unstable();
        assert_eq!(got, due.iter().map(|(k, _)| *k).collect::<Vec<_>>());
        assert!(w.is_empty());
    }
}
