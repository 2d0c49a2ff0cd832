//! Request rates per client (`limit-requests` on a site or a rule; docs/http.md L1-L5).
//!
//! A limit is a rate and a burst: a client may make `burst` requests at once, and one
//! more each `1/rate` after (a token bucket, kept as the time its bucket is full
//! again: the generic cell rate algorithm, one number per client). A request past the
//! burst is refused with 429 and a `Retry-After` after which one request of that
//! client is served; with `delay = N`, the requests past the first N of a burst wait
//! their turn instead, spaced at the rate (nginx's `limit_req ... delay=N`), and only
//! those past the whole burst are refused.
//!
//! The clients' buckets are one table for the process, shared by its workers and kept
//! across reloads: a count-min sketch of [`ROWS`] rows of cells, each cell the latest
//! full-again time of the clients whose key hashes to it (a per-process random key, so
//! nobody can aim at a cell). A client's bucket is the earliest of its cells, and a
//! request moves each of them up to the client's new time, never down. So the table's
//! memory is fixed when it is made (`limit-requests-memory`), nothing is ever evicted,
//! and what two clients share can only make a client's limit stricter: no sequence of
//! requests from any number of addresses frees a bucket before its time. The price is
//! that, with `n` clients busy at once in `w` cells a row, a client that never went
//! over its limit shares all its cells with clients that did, and is refused as they
//! are, with a chance of about `(1 - e^(-n/w))^4` (16 MiB, 524,288 cells a row:
//! 65,536 busy clients, 0.02%; 10,000, 0.0000016%).
//!
//! Written here, not taken from a crate: the rate limiters on crates.io (governor and
//! its kin) keep a map of keys that grows with the clients or is evicted by age, which
//! is the bypass this table must not have.

/// The request limits' server key: a row of the settings table (`settings!` in
/// settings.rs, which says what a row holds), kept here beside what it drives;
/// `--help` shows it under its own heading. The limits themselves are a site's or a
/// rule's `limit-requests` table ([`LimitSettings`]).
macro_rules! limit_keys {
    ($($table:tt)*) => {
        settings! {
            @join [
            /// Most memory the table of clients' request rates takes (`limit-requests` on a
            /// site or a rule), taken whole at the start when a limit is set: it holds any
            /// number of clients, and more clients at once than it has cells only make a
            /// limit stricter for some, never looser (docs/http.md L3). Changed by a restart,
            /// not a reload [default: 16M].
            #[arg(long, help_heading = "Limits", value_name = "BYTES")]
            pub limit_requests_memory: Option<Bytes<4096, { 1 << 34 }>>
                => u64 = 16 << 20, |b| b.0,
            ]
            $($table)*
        }
    };
}

use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Rows of the table: a client is refused for others' requests only if all of its
/// cells are shared with clients over their limits.
pub const ROWS: usize = 4;

/// A site's or a rule's `limit-requests` table.
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitSettings {
    /// Requests a client may make: `"20/s"`, `"600/m"`, `"100/h"`.
    pub rate: String,
    /// Requests a client may make at once, more than the rate alone lets through
    /// [default: 1].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// This many requests of a burst are served at once, and the rest of it waits its
    /// turn (spaced at the rate) instead: from 1 to burst - 1 [default: none waits].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<u32>,
    /// Whose requests one bucket counts: `"address"` (IPv4 address, IPv6 /64) or
    /// `"user"` (the user `htpasswd` let in) [default: address].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl LimitSettings {
    /// The table, checked: a rate, a burst of at least 1, a delay of at most the
    /// burst, a key of the two. Its scope and names are the rule's, set by the rule.
    pub(crate) fn checked(&self) -> Result<RequestLimit, crate::settings::ConfigError> {
        use crate::settings::{ConfigError, ValueError};
        let refused = |key: &str, e| Err(ConfigError::at_key(format!("limit-requests{key}"), e));
        let rate: Rate = match self.rate.parse() {
            Ok(r) => r,
            Err(e) => return refused(": rate", ValueError::kind(e)),
        };
        let burst = self.burst.unwrap_or(1);
        if burst == 0 {
            return refused(": burst", ValueError::kind("at least 1"));
        }
        if u128::from(burst) * u128::from(rate.interval_ns) > u128::from(MAX_FILL_NS) {
            return refused(
                ": burst",
                ValueError::kind("a bucket that takes over a year to fill (burst / rate)"),
            );
        }
        if self.delay.is_some_and(|d| d == 0 || d >= burst) {
            return refused(
                ": delay",
                ValueError::kind("from 1 (the first at once, each other at the rate) to burst - 1"),
            );
        }
        let key = match self.key.as_deref() {
            None | Some("address") => KeyBy::Address,
            Some("user") => KeyBy::User,
            Some(k) => return refused(": key", ValueError::says(k, "address or user")),
        };
        Ok(RequestLimit {
            rate,
            burst,
            delay: self.delay,
            key,
            scope: 0,
            site: String::new(),
            path: String::new(),
            policy: RequestLimit::policy_of(rate, burst),
        })
    }
}

/// The longest a bucket may take to fill (`burst / rate`): a year.
const MAX_FILL_NS: u64 = 366 * 86_400 * 1_000_000_000;

/// `rate = "N/s"` (or `/m`, `/h`): requests per unit of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// Nanoseconds between two requests at the rate.
    pub interval_ns: u64,
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        let bad = || format!("'{s}': a rate is N/s, N/m or N/h (as \"20/s\")");
        let (n, unit) = s.trim().split_once('/').ok_or_else(bad)?;
        let n: f64 = n.trim().parse().map_err(|_| bad())?;
        let unit_ns = match unit.trim() {
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        if !(n.is_finite() && n > 0.0) {
            return Err(format!("'{s}': the rate must be more than 0"));
        }
        let interval = unit_ns / n;
        if interval < 1_000.0 {
            return Err(format!("'{s}': at most 1000000 requests a second"));
        }
        if interval > 86_400e9 {
            return Err(format!("'{s}': at least one request a day"));
        }
        Ok(Rate {
            interval_ns: interval as u64,
        })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per_s = 1e9 / self.interval_ns as f64;
        if per_s >= 1.0 {
            write!(f, "{}/s", trim(per_s))
        } else if per_s * 60.0 >= 1.0 {
            write!(f, "{}/m", trim(per_s * 60.0))
        } else {
            write!(f, "{}/h", trim(per_s * 3600.0))
        }
    }
}

/// A rate's number as a person writes it: no trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Whose requests one bucket counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyBy {
    /// The client's address (after PROXY and trusted forwarders): an IPv4 address, an
    /// IPv6 /64.
    Address,
    /// The user a password check let in (`htpasswd`); the address for a request
    /// without one.
    User,
}

/// One `limit-requests`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestLimit {
    pub rate: Rate,
    /// Requests a client may make at once.
    pub burst: u32,
    /// This many at once; past them, requests wait their turn (up to `burst`); none:
    /// no request waits.
    pub delay: Option<u32>,
    pub key: KeyBy,
    /// Which limit it is: its site and rule, so a reload that keeps them keeps the
    /// clients' buckets, and two rules never share one.
    pub scope: u64,
    /// The site and the rule's path, as the metrics and the status page name them.
    pub site: String,
    pub path: String,
    /// The `RateLimit-Policy` field's value (draft-ietf-httpapi-ratelimit-headers):
    /// the burst as the quota, over the time the bucket takes to fill.
    pub policy: String,
}

impl RequestLimit {
    /// This limit as the rule at `path` of `site` (`*`: every site) sets it: named,
    /// and scoped by both, so each rule's clients have buckets of their own, kept by a
    /// reload that keeps the rule.
    pub fn of_rule(mut self, site: &str, path: &str) -> RequestLimit {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        h.write(site.as_bytes());
        h.write_u8(0);
        h.write(path.as_bytes());
        self.scope = h.finish();
        self.site = site.to_string();
        self.path = path.to_string();
        self
    }

    /// The value of [`RequestLimit::policy`] for `rate` and `burst`.
    fn policy_of(rate: Rate, burst: u32) -> String {
        let window = (u128::from(burst) * u128::from(rate.interval_ns))
            .div_ceil(1_000_000_000)
            .max(1);
        format!("\"requests\";q={burst};w={window}")
    }
}

/// What a request comes to under a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Served now; requests left of the burst, and seconds until it is whole.
    Pass { left: u32, full_in: u64 },
    /// Served after this long (`delay`); then as `Pass`.
    Wait {
        after: Duration,
        left: u32,
        full_in: u64,
    },
    /// Refused (429): one request is served after this long.
    Refuse { after: Duration },
}

impl Decision {
    /// The `RateLimit` field's value for an answer served under the limit.
    pub fn field(&self) -> Option<String> {
        match *self {
            Decision::Pass { left, full_in } | Decision::Wait { left, full_in, .. } => {
                Some(format!("\"requests\";r={left};t={full_in}"))
            }
            Decision::Refuse { after } => {
                Some(format!("\"requests\";r=0;t={}", retry_after_secs(after)))
            }
        }
    }
}

/// Whole seconds of `Retry-After` that a client can trust: rounded up, at least 1.
pub fn retry_after_secs(d: Duration) -> u64 {
    d.as_nanos().div_ceil(1_000_000_000).max(1) as u64
}

/// The process's buckets (see the module's text), and what each limit has done.
pub struct Table {
    /// [`ROWS`] rows of `width` cells: each the time (nanoseconds after `epoch`) its
    /// clients' buckets are full again. One lock: a look and its update are a few
    /// loads and stores, and two requests of one client on two workers must take two
    /// turns of its bucket, not one. Zeroed by the allocator, so a page of it is
    /// memory only once a client's cell is on it.
    cells: Mutex<Box<[u64]>>,
    /// Cells a row (a power of two).
    width: usize,
    hasher: std::collections::hash_map::RandomState,
    /// Times are nanoseconds after this.
    epoch: Instant,
    counts: Mutex<Vec<Counts>>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("width", &self.width)
            .finish_non_exhaustive()
    }
}

/// What one limit (a scope) has done since the process began.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub scope: u64,
    pub site: String,
    pub path: String,
    /// Requests answered 429.
    pub refused: u64,
    /// Requests that waited their turn.
    pub delayed: u64,
}

impl Table {
    /// A table of at most `bytes` (at least one cell a row; rows of a power of two).
    pub fn new(bytes: u64) -> Table {
        let width = Table::cells_for(bytes);
        Table {
            cells: Mutex::new(vec![0u64; ROWS * width].into_boxed_slice()),
            width,
            hasher: std::collections::hash_map::RandomState::new(),
            epoch: Instant::now(),
            counts: Mutex::new(Vec::new()),
        }
    }

    /// Cells a row of a table of at most `bytes`: the largest power of two that fits
    /// (at least one).
    pub fn cells_for(bytes: u64) -> usize {
        let per_row = (bytes / (ROWS as u64 * 8)).max(1);
        1usize << (63 - per_row.leading_zeros()).min(40)
    }

    /// The bytes its cells take.
    pub fn bytes(&self) -> u64 {
        (ROWS * self.width * 8) as u64
    }

    /// Counts a request of limit `l` refused (else delayed).
    pub fn count(&self, l: &RequestLimit, refused: bool) {
        let mut c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let i = match c.iter().position(|x| x.scope == l.scope) {
            Some(i) => i,
            None => {
                c.push(Counts {
                    scope: l.scope,
                    site: l.site.clone(),
                    path: l.path.clone(),
                    ..Counts::default()
                });
                c.len() - 1
            }
        };
        if refused {
            c[i].refused += 1;
        } else {
            c[i].delayed += 1;
        }
    }

    /// What limit `scope` has done.
    pub fn counts_of(&self, scope: u64) -> Counts {
        let c = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        c.iter()
            .find(|x| x.scope == scope)
            .cloned()
            .unwrap_or_default()
    }

    /// Every limit's counts.
    pub fn counted(&self) -> Vec<Counts> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Takes one request of the client `key` under limit `l` at `now`; one that would
    /// wait its turn longer than `longest` is refused instead (its connection would be
    /// cut by then).
    pub fn take(&self, l: &RequestLimit, key: &Key, now: Instant, longest: Duration) -> Decision {
        self.turn(l, key, now, Some(longest))
    }

    /// What the client `key` has left under limit `l` at `now`, taking nothing (a
    /// request that waited its turn, answered now).
    pub fn peek(&self, l: &RequestLimit, key: &Key, now: Instant) -> Decision {
        self.turn(l, key, now, None)
    }

    fn turn(&self, l: &RequestLimit, key: &Key, now: Instant, take: Option<Duration>) -> Decision {
        let mut h = self.hasher.build_hasher();
        h.write_u64(l.scope);
        key.hash_into(&mut h);
        let hash = h.finish();
        // Four cells from two halves of one hash (Kirsch and Mitzenmacher).
        let (a, b) = (hash as u32 as usize, ((hash >> 32) as usize) | 1);
        let mask = self.width - 1;
        let at = |row: usize| row * self.width + (a.wrapping_add(row.wrapping_mul(b)) & mask);
        let now_ns = now.saturating_duration_since(self.epoch).as_nanos() as u64;
        let t = l.rate.interval_ns;
        let capacity = t.saturating_mul(u64::from(l.burst));
        let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        let full_at = (0..ROWS).map(|r| cells[at(r)]).min().unwrap_or(0);
        // A bucket at most full by this limit's measure: cells another limit's slower
        // clients moved (or a burst a reload made smaller) make it no more than empty.
        let from = full_at.clamp(now_ns, now_ns + capacity);
        let Some(longest) = take else {
            let used = from - now_ns;
            return Decision::Pass {
                // At most the burst.
                left: ((capacity - used) / t) as u32,
                full_in: used.div_ceil(1_000_000_000),
            };
        };
        let after = from + t;
        if after - now_ns > capacity {
            return Decision::Refuse {
                after: Duration::from_nanos(after - now_ns - capacity),
            };
        }
        // Its turn, if it waits for one: the first `delay` of a burst at once, then
        // one each `t`.
        let ahead = from - now_ns;
        let wait = match l.delay {
            Some(n) => ahead.saturating_sub(t * u64::from(n - 1)),
            None => 0,
        };
        let longest = longest.as_nanos().min(u128::from(u64::MAX)) as u64;
        if wait > longest {
            return Decision::Refuse {
                after: Duration::from_nanos(wait - longest),
            };
        }
        for r in 0..ROWS {
            let c = &mut cells[at(r)];
            *c = (*c).max(after);
        }
        drop(cells);
        let used = after - now_ns;
        // At most the burst.
        let left = ((capacity - used) / t) as u32;
        let full_in = used.div_ceil(1_000_000_000);
        if wait > 0 {
            Decision::Wait {
                after: Duration::from_nanos(wait),
                left,
                full_in,
            }
        } else {
            Decision::Pass { left, full_in }
        }
    }
}

/// The process's request limits: the table, made when a configuration first sets a
/// limit (its size then), and the thread that lets waiting requests go.
pub struct Limits {
    table: std::sync::OnceLock<Arc<Table>>,
    pub delayer: Arc<Delayer>,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits").finish_non_exhaustive()
    }
}

impl Limits {
    /// Starts the delayer's thread in `scope`.
    pub fn start<'scope>(scope: &'scope std::thread::Scope<'scope, '_>) -> Limits {
        Limits {
            table: std::sync::OnceLock::new(),
            delayer: Delayer::start(scope),
        }
    }

    /// The table, made of `bytes` the first time it is asked for.
    pub fn table(&self, bytes: u64) -> Arc<Table> {
        Arc::clone(self.table.get_or_init(|| Arc::new(Table::new(bytes))))
    }
}

impl Drop for Limits {
    fn drop(&mut self) {
        self.delayer.end();
    }
}

/// A client as a bucket knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    V4([u8; 4]),
    /// The first 64 bits.
    V6([u8; 8]),
    /// A Unix socket's clients, all one.
    Local,
    User(String),
}

impl Key {
    /// The key of the client at `addr` (none: a Unix socket): an IPv4 address (an
    /// IPv4-mapped IPv6 one too), an IPv6 /64.
    pub fn of(addr: Option<IpAddr>) -> Key {
        match addr.map(|a| a.to_canonical()) {
            Some(IpAddr::V4(a)) => Key::V4(a.octets()),
            Some(IpAddr::V6(a)) => {
                let mut p = [0u8; 8];
                p.copy_from_slice(&a.octets()[..8]);
                Key::V6(p)
            }
            None => Key::Local,
        }
    }

    fn hash_into(&self, h: &mut impl Hasher) {
        match self {
            Key::V4(a) => {
                h.write_u8(4);
                h.write(a);
            }
            Key::V6(p) => {
                h.write_u8(6);
                h.write(p);
            }
            Key::Local => h.write_u8(0),
            Key::User(u) => {
                h.write_u8(1);
                h.write(u.as_bytes());
            }
        }
    }
}

/// Whether a site or a rule of `cfg` sets `limit-requests` (then the process's table
/// is made, or kept).
pub fn any_in(cfg: &crate::config::Config) -> bool {
    cfg.sites()
        .iter()
        .any(|s| s.rules.iter().any(|r| r.limit_requests.is_some()))
}

/// Each `limit-requests` of `sites` once (a rule of every site is in each), as the
/// status page's `limits` shows them: where, the limit, and what it refused and
/// delayed.
pub fn status(sites: &[crate::config::SiteConfig], table: Option<&Table>) -> serde_json::Value {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for l in sites
        .iter()
        .flat_map(|s| &s.rules)
        .filter_map(|r| r.limit_requests.as_deref())
    {
        if seen.contains(&l.scope) {
            continue;
        }
        seen.push(l.scope);
        let c = table.map(|t| t.counts_of(l.scope)).unwrap_or_default();
        out.push(serde_json::json!({
            "site": l.site,
            "rule": l.path,
            "rate": l.rate.to_string(),
            "burst": l.burst,
            "delay": l.delay,
            "key": match l.key { KeyBy::Address => "address", KeyBy::User => "user" },
            "refused": c.refused,
            "delayed": c.delayed,
        }));
    }
    out.into()
}

/// What `--check` says of the request limits: each one, where it applies, and the
/// table's memory.
pub(crate) fn check(cfg: &crate::config::Config, c: &mut crate::check::Checked) {
    let sites = cfg.sites();
    let limits = status(&sites, None);
    let Some(list) = limits.as_array().filter(|l| !l.is_empty()) else {
        return;
    };
    for l in list {
        let delay = match l["delay"].as_u64() {
            Some(d) => format!(", past {d} at once waiting their turn"),
            None => String::new(),
        };
        c.served.push(format!(
            "limit-requests: site {} rule {}: {} a client ({}), burst {}{delay}",
            l["site"].as_str().unwrap_or("*"),
            l["rule"].as_str().unwrap_or("/"),
            l["rate"].as_str().unwrap_or("?"),
            l["key"].as_str().unwrap_or("address"),
            l["burst"],
        ));
    }
    let cells = Table::cells_for(cfg.limit_requests_memory);
    c.served.push(format!(
        "limit-requests: one table of {} for every client, {cells} cells a row",
        linerate_tx::format_size(cells as u64 * ROWS as u64 * 8)
    ));
}

/// Requests that wait their turn: each is let go at its time by one thread of the
/// process, which marks its ticket done and wakes its worker (the way a password
/// check comes back, [`crate::auth::Ticket`]).
pub struct Delayer {
    queue: Mutex<DelayQueue>,
    ready: std::sync::Condvar,
}

#[derive(Default)]
struct DelayQueue {
    heap: std::collections::BinaryHeap<Delayed>,
    ended: bool,
}

struct Delayed {
    at: Instant,
    ticket: Arc<crate::auth::Ticket>,
    wake: crate::auth::Wake,
}

impl PartialEq for Delayed {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Delayed {
    /// The earliest first out of a max-heap.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.at.cmp(&self.at)
    }
}

impl std::fmt::Debug for Delayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delayer").finish_non_exhaustive()
    }
}

impl Delayer {
    /// Starts its thread in `scope`; it ends at [`Delayer::end`].
    pub fn start<'scope>(scope: &'scope std::thread::Scope<'scope, '_>) -> Arc<Delayer> {
        let d = Arc::new(Delayer {
            queue: Mutex::new(DelayQueue::default()),
            ready: std::sync::Condvar::new(),
        });
        let run = Arc::clone(&d);
        scope.spawn(move || run.run());
        d
    }

    /// A ticket done at `at`, when `wake` is called (at once once the process stops).
    pub fn hold(&self, at: Instant, wake: crate::auth::Wake) -> Arc<crate::auth::Ticket> {
        let ticket = Arc::new(crate::auth::Ticket::default());
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if q.ended {
            ticket.pass();
            drop(q);
            wake();
            return ticket;
        }
        let first = q.heap.peek().is_none_or(|d| at < d.at);
        q.heap.push(Delayed {
            at,
            ticket: Arc::clone(&ticket),
            wake,
        });
        drop(q);
        if first {
            self.ready.notify_one();
        }
        ticket
    }

    /// Lets every request go now, and each held later at once, and ends the thread:
    /// a stop begins (its connections are to finish their answers, not wait turns).
    pub fn end(&self) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ended = true;
        self.ready.notify_one();
    }

    fn run(&self) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let now = Instant::now();
            while q.heap.peek().is_some_and(|d| d.at <= now || q.ended) {
                if let Some(d) = q.heap.pop() {
                    d.ticket.pass();
                    (d.wake)();
                }
            }
            if q.ended {
                return;
            }
            q = match q.heap.peek().map(|d| d.at) {
                Some(at) => {
                    self.ready
                        .wait_timeout(q, at.saturating_duration_since(now))
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self.ready.wait(q).unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(rate: &str, burst: u32, delay: Option<u32>) -> RequestLimit {
        let rate: Rate = rate.parse().unwrap();
        RequestLimit {
            rate,
            burst,
            delay,
            key: KeyBy::Address,
            scope: 7,
            site: "-".into(),
            path: "/".into(),
            policy: RequestLimit::policy_of(rate, burst),
        }
    }

    const MINUTE: Duration = Duration::from_secs(60);

    fn v4(last: u8) -> Key {
        Key::of(Some(IpAddr::from([192, 0, 2, last])))
    }

    #[test]
    fn rates_parse_and_print() {
        assert_eq!("20/s".parse::<Rate>().unwrap().interval_ns, 50_000_000);
        assert_eq!("600/m".parse::<Rate>().unwrap().interval_ns, 100_000_000);
        assert_eq!("0.5/s".parse::<Rate>().unwrap().to_string(), "30/m");
        assert_eq!("2.5/s".parse::<Rate>().unwrap().to_string(), "2.5/s");
        assert_eq!("30/m".parse::<Rate>().unwrap().to_string(), "30/m");
        assert_eq!("2/h".parse::<Rate>().unwrap().to_string(), "2/h");
        for bad in ["20", "20/x", "0/s", "-1/s", "2000000/s", "1/y", "x/s"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    /// 100 at once against 10/s with a burst of 20: 20 pass, the rest are refused
    /// for 100 ms; one waits that long and passes; another client is not touched.
    #[test]
    fn a_burst_passes_and_the_rest_wait_for_their_turn() {
        let t = Table::new(1 << 20);
        let l = limit("10/s", 20, None);
        let now = Instant::now();
        let got: Vec<Decision> = (0..100).map(|_| t.take(&l, &v4(1), now, MINUTE)).collect();
        let passed = got
            .iter()
            .filter(|d| matches!(d, Decision::Pass { .. }))
            .count();
        assert_eq!(passed, 20);
        assert_eq!(
            got[0],
            Decision::Pass {
                left: 19,
                full_in: 1
            }
        );
        assert_eq!(
            got[19],
            Decision::Pass {
                left: 0,
                full_in: 2
            }
        );
        assert_eq!(
            got[20],
            Decision::Refuse {
                after: Duration::from_millis(100)
            }
        );
        assert!(matches!(
            t.take(&l, &v4(2), now, MINUTE),
            Decision::Pass { left: 19, .. }
        ));
        let later = now + Duration::from_millis(100);
        assert!(matches!(
            t.take(&l, &v4(1), later, MINUTE),
            Decision::Pass { .. }
        ));
        assert!(matches!(
            t.take(&l, &v4(1), later, MINUTE),
            Decision::Refuse { .. }
        ));
        // Two seconds on, the bucket is whole again.
        let whole = now + Duration::from_secs(3);
        assert_eq!(
            t.take(&l, &v4(1), whole, MINUTE),
            Decision::Pass {
                left: 19,
                full_in: 1
            }
        );
    }

    /// With `delay = 1`, the burst waits its turn: the first at once, the k-th after
    /// k/10 s; one that would wait longer than the longest turn is refused.
    #[test]
    fn delay_spaces_the_burst_at_the_rate() {
        let t = Table::new(1 << 20);
        let l = limit("10/s", 20, Some(1));
        let now = Instant::now();
        let got: Vec<Decision> = (0..21).map(|_| t.take(&l, &v4(1), now, MINUTE)).collect();
        assert!(matches!(got[0], Decision::Pass { .. }));
        for (k, d) in got.iter().enumerate().take(20).skip(1) {
            let Decision::Wait { after, .. } = d else {
                panic!("{k}: {d:?}");
            };
            assert_eq!(*after, Duration::from_millis(100 * k as u64), "{k}");
        }
        assert!(matches!(got[20], Decision::Refuse { .. }));
        // delay = 5: the first 5 at once, then spaced.
        let l = RequestLimit {
            scope: 8,
            ..limit("10/s", 20, Some(5))
        };
        let got: Vec<Decision> = (0..8).map(|_| t.take(&l, &v4(1), now, MINUTE)).collect();
        assert!(got[..5].iter().all(|d| matches!(d, Decision::Pass { .. })));
        let first_wait = Duration::from_millis(100);
        assert!(matches!(got[5], Decision::Wait { after, .. } if after == first_wait));
        // A turn past the longest wait: refused, taking nothing.
        let l = RequestLimit {
            scope: 9,
            ..limit("10/s", 20, Some(1))
        };
        let half = Duration::from_millis(250);
        let got: Vec<Decision> = (0..5).map(|_| t.take(&l, &v4(1), now, half)).collect();
        assert!(matches!(got[2], Decision::Wait { .. }), "{got:?}");
        assert_eq!(
            got[3],
            Decision::Refuse {
                after: Duration::from_millis(50)
            }
        );
        assert_eq!(got[3], got[4], "a refusal takes nothing");
    }

    /// A bucket pushed far ahead (a slower limit's clients in its cells, a burst a
    /// reload made smaller) is at most empty by this limit: refused for one interval,
    /// not for the other limit's time.
    #[test]
    fn a_bucket_is_never_more_than_empty_by_its_own_limit() {
        let t = Table::new(1 << 20);
        let slow = limit("1/h", 100, None);
        let now = Instant::now();
        for _ in 0..100 {
            t.take(&slow, &v4(1), now, MINUTE);
        }
        let fast = limit("10/s", 2, None);
        assert_eq!(
            t.take(&fast, &v4(1), now, MINUTE),
            Decision::Refuse {
                after: Duration::from_millis(100)
            }
        );
    }

    #[test]
    fn settings_are_checked() {
        let ok = |rate: &str, burst, delay, key: Option<&str>| {
            LimitSettings {
                rate: rate.into(),
                burst,
                delay,
                key: key.map(String::from),
            }
            .checked()
            .map(|l| (l.burst, l.delay, l.key))
            .map_err(|e| e.to_string())
        };
        assert_eq!(ok("10/s", None, None, None), Ok((1, None, KeyBy::Address)));
        assert_eq!(
            ok("10/s", Some(20), Some(1), Some("user")),
            Ok((20, Some(1), KeyBy::User))
        );
        for (burst, delay) in [(Some(0), None), (Some(5), Some(0)), (Some(5), Some(5))] {
            assert!(
                ok("10/s", burst, delay, None).is_err(),
                "{burst:?} {delay:?}"
            );
        }
        assert!(
            ok("1/h", Some(10_000), None, None).is_err(),
            "over a year to fill"
        );
        assert!(ok("10/s", None, None, Some("header")).is_err());
        assert!(ok("10/x", None, None, None).is_err());
    }

    /// A table far smaller than the clients: no client of the flood gets more than its
    /// limit (a collision only makes it stricter), whatever the number of addresses.
    #[test]
    fn many_clients_in_a_small_table_never_get_more_than_their_limit() {
        let t = Table::new(4 * 8 * 64);
        let l = limit("1/h", 3, None);
        let now = Instant::now();
        let clients: Vec<Key> = (0..2_000u32)
            .map(|i| Key::of(Some(IpAddr::from([10, (i >> 8) as u8, i as u8, 1]))))
            .collect();
        for round in 0..5 {
            for c in &clients {
                let passed = (0..4)
                    .filter(|_| matches!(t.take(&l, c, now, MINUTE), Decision::Pass { .. }))
                    .count();
                assert!(passed <= 3, "round {round}: {passed}");
            }
        }
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Key::of(Some(a)), Key::of(Some(b)));
        assert_ne!(Key::of(Some(a)), Key::of(Some(c)));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(Key::of(Some(mapped)), v4(1));
    }

    #[test]
    fn the_fields_say_the_policy_and_what_is_left() {
        let l = limit("10/s", 20, None);
        assert_eq!(l.policy, "\"requests\";q=20;w=2");
        let d = Decision::Pass {
            left: 5,
            full_in: 2,
        };
        assert_eq!(d.field().unwrap(), "\"requests\";r=5;t=2");
        let r = Decision::Refuse {
            after: Duration::from_millis(100),
        };
        assert_eq!(r.field().unwrap(), "\"requests\";r=0;t=1");
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
    }

    #[test]
    fn the_delayer_lets_requests_go_in_time_order() {
        std::thread::scope(|s| {
            let d = Delayer::start(s);
            let order = Arc::new(Mutex::new(Vec::new()));
            let now = Instant::now();
            let mut tickets = Vec::new();
            for (i, ms) in [(0u32, 60u64), (1, 20), (2, 40)] {
                let o = Arc::clone(&order);
                let wake: crate::auth::Wake = Arc::new(move || o.lock().unwrap().push(i));
                tickets.push(d.hold(now + Duration::from_millis(ms), wake));
            }
            while !tickets.iter().all(|t| t.done()) {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(now.elapsed() >= Duration::from_millis(60));
            assert_eq!(*order.lock().unwrap(), vec![1, 2, 0]);
            d.end();
        });
    }
}
