//! HTTP Basic authentication from htpasswd files (`htpasswd = "FILE"` on a site or a
//! rule; docs/http.md W10).
//!
//! Only bcrypt hashes (`$2y$`, `$2b$`, `$2a$`, as `htpasswd -B` writes them) are
//! taken: the others htpasswd can write (MD5-crypt `$apr1$`, `{SHA}`, crypt) are fast
//! to guess, and a file holding one is refused with its line named. The bcrypt crate
//! checks a password. A check costs milliseconds of CPU by design, so:
//! - it never runs on a worker: a [`Checker`] for the process hands it to helper
//!   threads at nice 10, at most [`CHECKS_PER_SECOND`] a second for the whole process
//!   (past that, or with [`QUEUED`] checks waiting, the answer is 503 with
//!   `Retry-After: 1`), and the request waits ([`Verdict::Pending`]) while the worker
//!   serves the others; the helper wakes the worker, which answers it again;
//! - credentials that passed are remembered per worker ([`Guard`], bounded), and a
//!   client sending them again costs a map lookup, not a bcrypt check;
//! - failures are counted per client (an IPv4 address, an IPv6 /64) and user name, for
//!   the whole process ([`Throttle`]): past [`FAILURES`] in a minute, that client gets
//!   429 for that user without a check (of its password, or of the remembered ones)
//!   until the minute is over; the other users behind the same address are not
//!   affected;
//! - an unknown user is checked against a hash of the file's own cost (a file takes
//!   one cost for all its users), so the time of an answer does not tell a user that
//!   exists from one that does not.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Failed checks a client address may have in a [`WINDOW`] before it is refused.
pub const FAILURES: u32 = 10;
/// The window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Credentials remembered per worker (all forgotten when full).
const REMEMBERED: usize = 4096;
/// Clients (and users) whose failures are counted (the oldest windows forgotten when
/// full).
const COUNTED: usize = 16384;
/// Password checks the process makes a second at most (and at once, after a quiet
/// while): past it, 503.
pub const CHECKS_PER_SECOND: u32 = 50;
/// Checks waiting for a helper at most: past it, 503.
pub const QUEUED: usize = 64;
/// Helper threads that make the checks.
const HELPERS: usize = 2;
/// Checks asked, per worker, remembered at most (the oldest forgotten past it).
const ASKED: usize = 4096;
/// The longest `Authorization: Basic` token taken (base64 of a user name and a
/// password): what a worker keeps of the checks it asked is bounded by it.
const MAX_CREDENTIALS: usize = 1024;
/// How long a check's outcome answers the requests that repeat its credentials.
const SHARED: Duration = Duration::from_secs(10);

/// The users of one htpasswd file.
#[derive(Debug)]
pub struct Htpasswd {
    users: HashMap<String, String>,
    /// A hash of the file's cost (one for all its users), checked for an unknown user.
    dummy: String,
}

impl Htpasswd {
    /// Reads `path`: `user:hash` lines (blank lines and `#` comments skipped), every
    /// hash bcrypt; an error names the file, the line and why.
    pub fn load(path: &Path) -> Result<Htpasswd, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("htpasswd {}: {e}", path.display()))?;
        let mut users = HashMap::new();
        let mut cost = 4;
        for (n, line) in text.lines().enumerate() {
            let at = |why: &str| format!("htpasswd {} line {}: {why}", path.display(), n + 1);
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (user, hash) = line.split_once(':').ok_or_else(|| at("not user:hash"))?;
            let c = bcrypt_cost(hash).ok_or_else(|| {
                at(&format!(
                    "user {user}: not a bcrypt hash; only bcrypt ($2y$, from htpasswd -B) is taken, \
                     as MD5-crypt, SHA and crypt hashes are fast to guess"
                ))
            })?;
            if users.is_empty() {
                cost = c;
            } else if c != cost {
                return Err(at(&format!(
                    "user {user}: cost {c}, where the users before have {cost}; one cost for \
                     all (htpasswd -B -C N), so an unknown user takes as long as a known one"
                )));
            }
            users.insert(user.to_string(), hash.to_string());
        }
        let dummy = bcrypt::hash("an unknown user's password", cost)
            .map_err(|e| format!("htpasswd {}: {e}", path.display()))?;
        Ok(Htpasswd { users, dummy })
    }

    /// Whether `user` with `password` is in the file (a bcrypt check either way).
    fn check(&self, user: &str, password: &str) -> bool {
        let (hash, known) = match self.users.get(user) {
            Some(h) => (h.as_str(), true),
            None => (self.dummy.as_str(), false),
        };
        bcrypt::verify(password, hash).unwrap_or(false) && known
    }
}

/// The cost of a bcrypt hash (`$2y$05$...`), if it is one.
fn bcrypt_cost(hash: &str) -> Option<u32> {
    let rest = ["$2y$", "$2b$", "$2a$"]
        .iter()
        .find_map(|p| hash.strip_prefix(p))?;
    let (cost, body) = rest.split_once('$')?;
    let cost: u32 = cost.parse().ok().filter(|c| (4..=31).contains(c))?;
    (body.len() == 53).then_some(cost)
}

/// Checks every htpasswd file `cfg` names (the sites' rules), as a start or a reload
/// would load them.
pub fn check(cfg: &crate::Config) -> Result<(), String> {
    for p in files(cfg) {
        Htpasswd::load(&p)?;
    }
    Ok(())
}

/// The htpasswd files `cfg`'s rules name, each once.
fn files(cfg: &crate::Config) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for s in cfg.sites() {
        for r in &s.rules {
            if let Some(p) = &r.htpasswd {
                if !out.contains(p) {
                    out.push(p.clone());
                }
            }
        }
    }
    out
}

/// The user name of an `Authorization: Basic` value (the scheme in any case, blanks
/// around the token), as the guard reads it: the one bucket of a user however its
/// client spells the field.
pub fn user_of(authorization: &str) -> Option<String> {
    use base64::Engine as _;
    let (scheme, token) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") || token.trim().len() > MAX_CREDENTIALS {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    Some(text.split_once(':')?.0.to_string())
}

/// What a request's credentials come to.
#[derive(Debug)]
pub enum Verdict {
    Pass,
    /// 401: none, or wrong.
    Challenge,
    /// 429: too many failures from this client lately; try again after this long.
    Throttled(Duration),
    /// The check is being made off the worker: ask again when the ticket is done.
    Pending(Arc<Ticket>),
    /// 503: the process makes as many checks as it may now.
    Busy,
}

impl PartialEq for Verdict {
    fn eq(&self, other: &Verdict) -> bool {
        match (self, other) {
            (Verdict::Pending(a), Verdict::Pending(b)) => Arc::ptr_eq(a, b),
            (Verdict::Throttled(a), Verdict::Throttled(b)) => a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// What a helper calls when a check is made: wakes the worker that asked.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// A check handed to the helpers, and how it came out.
#[derive(Debug, Default)]
pub struct Ticket(AtomicU8);

const PENDING: u8 = 0;
const PASSED: u8 = 1;
const FAILED: u8 = 2;

impl Ticket {
    /// The check is made.
    pub fn done(&self) -> bool {
        self.0.load(Ordering::Acquire) != PENDING
    }

    /// Marks it done and passed: a request held for its turn under a rate limit is
    /// let go ([`crate::limits::Delayer`]).
    pub fn pass(&self) {
        self.0.store(PASSED, Ordering::Release);
    }

    fn outcome(&self) -> Option<bool> {
        match self.0.load(Ordering::Acquire) {
            PASSED => Some(true),
            FAILED => Some(false),
            _ => None,
        }
    }
}

/// A check for a helper: the file, the user and password, where the outcome goes and
/// whom to wake.
struct Job {
    file: Arc<Htpasswd>,
    user: String,
    password: String,
    ticket: Arc<Ticket>,
    wake: Wake,
    /// Where a failure is counted, and whose it is: counted when the check is made,
    /// whether or not the client is still there to be answered.
    throttle: Arc<Throttle>,
    who: (Counted, String),
}

/// The process's password checks: its helper threads and their rate, and the failures
/// by client and user that every worker's [`Guard`] counts in.
pub struct Checker {
    jobs: SyncSender<Job>,
    /// Checks that may start now (in millionths), and when that was counted.
    bucket: Mutex<(u64, Option<Instant>)>,
    pub throttle: Arc<Throttle>,
    /// The request-rate limits, whose waiting requests come back the same way.
    pub limits: crate::limits::Limits,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker").finish_non_exhaustive()
    }
}

impl Checker {
    /// Starts the helpers in `scope`; they end when this is dropped.
    pub fn start<'scope>(scope: &'scope std::thread::Scope<'scope, '_>) -> Arc<Checker> {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUED);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..HELPERS {
            let rx = Arc::clone(&rx);
            scope.spawn(move || helper(&rx));
        }
        Arc::new(Checker {
            jobs: tx,
            bucket: Mutex::new((u64::from(CHECKS_PER_SECOND) * 1_000_000, None)),
            throttle: Arc::default(),
            limits: crate::limits::Limits::start(scope),
        })
    }

    /// A check may start at `now` (one taken from the rate).
    fn may_start(&self, now: Instant) -> bool {
        let mut b = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let full = u64::from(CHECKS_PER_SECOND) * 1_000_000;
        match b.1 {
            // Refilled by the nanosecond, so calls close together lose nothing; the
            // clock never moves back.
            Some(at) if now > at => {
                let ns = now.duration_since(at).as_nanos().min(u128::from(u64::MAX)) as u64;
                let add = ns.saturating_mul(u64::from(CHECKS_PER_SECOND)) / 1000;
                b.0 = b.0.saturating_add(add).min(full);
                b.1 = Some(now);
            }
            Some(_) => {}
            None => b.1 = Some(now),
        }
        if b.0 < 1_000_000 {
            return false;
        }
        b.0 -= 1_000_000;
        true
    }

    /// Gives back a check taken by [`Checker::may_start`] that did not start.
    fn give_back(&self) {
        let mut b = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        b.0 = (b.0 + 1_000_000).min(u64::from(CHECKS_PER_SECOND) * 1_000_000);
    }
}

/// A helper: checks until the [`Checker`] is gone.
fn helper(rx: &Mutex<Receiver<Job>>) {
    // At the workers' priority it would compete with them for the CPU a flood of
    // guesses asks for: the workers come first.
    if let Err(e) = linerate_sys::cpu::lower_thread_priority(10) {
        tracing::debug!("htpasswd: cannot lower a checker's priority: {e}");
    }
    loop {
        let job = match rx.lock().unwrap_or_else(PoisonError::into_inner).recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        let ok = job.file.check(&job.user, &job.password);
        if !ok {
            job.throttle.failed(job.who, Instant::now());
        }
        job.ticket
            .0
            .store(if ok { PASSED } else { FAILED }, Ordering::Release);
        (job.wake)();
    }
}

/// Failed checks by client and user name, and checks asked by client, for the whole
/// process.
#[derive(Debug, Default)]
pub struct Throttle {
    failures: Mutex<HashMap<(Counted, String), (Instant, u32)>>,
    /// Checks asked (503s included) by client, whatever the user name: one address
    /// trying many names cannot take the process's rate alone.
    asked: Mutex<HashMap<Counted, (Instant, u32)>>,
    /// Some client is counted at all (no lock taken for a remembered credential
    /// while none is).
    any: std::sync::atomic::AtomicBool,
}

/// Checks a client may ask for in a [`WINDOW`], whatever the user names.
pub const ASKS: u32 = 30;

impl Throttle {
    /// How long `who` is still refused, if it is: too many failures for that user, or
    /// too many checks asked by that client.
    fn refused(&self, who: &(Counted, String), clock: impl Fn() -> Instant) -> Option<Duration> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let now = clock();
        let left = |since: Instant| WINDOW.saturating_sub(now.saturating_duration_since(since));
        let asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((since, n)) = asked.get(&who.0) {
            if *n >= ASKS && !left(*since).is_zero() {
                return Some(left(*since));
            }
        }
        drop(asked);
        let f = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let (since, n) = f.get(who)?;
        (*n >= FAILURES && !left(*since).is_zero()).then(|| left(*since))
    }

    /// Counts a check asked by `client` at `now`.
    fn ask(&self, client: Counted, now: Instant) {
        self.any.store(true, Ordering::Relaxed);
        let mut a = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        if a.len() >= COUNTED {
            a.retain(|_, (since, _)| now.saturating_duration_since(*since) < WINDOW);
            if a.len() >= COUNTED {
                a.clear();
            }
        }
        let e = a.entry(client).or_insert((now, 0));
        if now.saturating_duration_since(e.0) >= WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
    }

    /// Counts a failed check of `who` at `now`.
    fn failed(&self, who: (Counted, String), now: Instant) {
        self.any.store(true, Ordering::Relaxed);
        let mut f = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if f.len() >= COUNTED {
            f.retain(|_, (since, _)| now.saturating_duration_since(*since) < WINDOW);
            if f.len() >= COUNTED {
                // Still full: the older half of the windows go, the newest (a guesser
                // at work now) stay counted.
                let mut starts: Vec<Instant> = f.values().map(|v| v.0).collect();
                starts.sort_unstable();
                let cut = starts[starts.len() / 2];
                f.retain(|_, (since, _)| *since > cut);
            }
        }
        let e = f.entry(who).or_insert((now, 0));
        if now.saturating_duration_since(e.0) >= WINDOW {
            *e = (now, 0);
        }
        e.1 += 1;
    }
}

/// A set of strings hashed by foldhash (the credentials that passed: the client sends
/// them, but only ones that passed a bcrypt check are ever put in).
type Passed = std::collections::HashSet<String, foldhash::fast::RandomState>;

/// One worker's htpasswd files with the credentials that passed each, the checks it
/// asked of the helpers, and where it counts failures.
#[derive(Default)]
pub struct Guard {
    /// By path (few: compared as bytes, no hashing per request).
    files: Vec<(PathBuf, Option<Arc<Htpasswd>>, Passed)>,
    /// The process's checker (none: checks made here, as the unit tests do) and how a
    /// helper wakes this worker.
    checker: Option<(Arc<Checker>, Wake)>,
    /// Checks asked, by file and credentials, with when: requests that repeat
    /// credentials share one check and its outcome for [`SHARED`].
    asked: HashMap<(usize, String), (Arc<Ticket>, Instant)>,
    /// Failures, when there is no checker to share them with.
    own: Arc<Throttle>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("files", &self.files.len())
            .field("asked", &self.asked.len())
            .finish_non_exhaustive()
    }
}

/// Whose failures count together: an IPv4 address, an IPv6 /64 (one host's, which it
/// may rotate through at will), or every client of a Unix socket.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Counted {
    V4(u32),
    V6(u64),
    Unix,
}

impl Counted {
    fn of(client: Option<IpAddr>) -> Counted {
        match client.map(|ip| ip.to_canonical()) {
            Some(IpAddr::V4(a)) => Counted::V4(u32::from(a)),
            Some(IpAddr::V6(a)) => Counted::V6((u128::from(a) >> 64) as u64),
            None => Counted::Unix,
        }
    }
}

impl Guard {
    /// Loads the files `cfg` names. One that cannot be read now (it changed since the
    /// start's check) is kept as none: its paths refuse every request (401).
    pub fn new(cfg: &crate::Config) -> Guard {
        let files = files(cfg)
            .into_iter()
            .map(|p| {
                let loaded = match Htpasswd::load(&p) {
                    Ok(h) => Some(Arc::new(h)),
                    Err(e) => {
                        tracing::error!("{e}; its paths refuse every request");
                        None
                    }
                };
                (p, loaded, Passed::default())
            })
            .collect();
        Guard {
            files,
            ..Guard::default()
        }
    }

    /// Checks go to `checker`'s helpers, which call `wake` when one is made.
    pub fn with_checker(
        mut self,
        checker: Arc<Checker>,
        wake: Arc<dyn Fn() + Send + Sync>,
    ) -> Guard {
        self.checker = Some((checker, wake));
        self
    }

    /// A ticket done at `at`, when this worker is woken (a request waiting its turn
    /// under a rate limit); none without the process's checker (a unit test's site).
    pub fn hold(&self, at: Instant) -> Option<Arc<Ticket>> {
        let (checker, wake) = self.checker.as_ref()?;
        Some(checker.limits.delayer.hold(at, Arc::clone(wake)))
    }

    fn throttle(&self) -> &Arc<Throttle> {
        self.checker.as_ref().map_or(&self.own, |c| &c.0.throttle)
    }

    /// The verdict on `authorization` (the field's value, if sent) for a path the
    /// htpasswd `file` guards, from `client` at `now`.
    pub fn check(
        &mut self,
        file: &Path,
        authorization: Option<&str>,
        client: Option<IpAddr>,
        now: Instant,
    ) -> Verdict {
        self.check_at(file, authorization, client, || now)
    }

    /// [`Guard::check`], the clock read only when a failure is counted or looked at
    /// (a client with remembered credentials and no failure anywhere costs none).
    pub fn check_at(
        &mut self,
        file: &Path,
        authorization: Option<&str>,
        client: Option<IpAddr>,
        clock: impl Fn() -> Instant,
    ) -> Verdict {
        let Some(index) = self.files.iter().position(|(p, ..)| {
            p.as_os_str().as_encoded_bytes() == file.as_os_str().as_encoded_bytes()
        }) else {
            return Verdict::Challenge;
        };
        let Some(h) = self.files[index].1.clone() else {
            return Verdict::Challenge;
        };
        let Some(creds) = authorization.and_then(|a| {
            let (scheme, token) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("basic").then(|| token.trim())
        }) else {
            return Verdict::Challenge;
        };
        // No user name and password of bcrypt's (72 bytes at most) makes more: refused
        // unchecked, and never kept.
        if creds.len() > MAX_CREDENTIALS {
            return Verdict::Challenge;
        }
        // Remembered, and no client throttled anywhere: no decoding, no lock.
        if !self.throttle().any.load(Ordering::Relaxed) && self.files[index].2.contains(creds) {
            return Verdict::Pass;
        }
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(creds)
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        let Some((user, password)) = decoded.as_deref().and_then(|d| d.split_once(':')) else {
            return Verdict::Challenge;
        };
        let key = (index, creds.to_string());
        // An outcome shared long enough: the next request is checked again.
        if self
            .asked
            .get(&key)
            .is_some_and(|(t, at)| t.done() && clock().saturating_duration_since(*at) >= SHARED)
        {
            self.asked.remove(&key);
        }
        // A check made for these credentials answers them (the request that waited
        // for it, and those repeating them for a while): its outcome, whatever the
        // throttle says since (its failure counted already).
        if let Some(ok) = self.asked.get(&key).and_then(|(t, _)| t.outcome()) {
            return if ok {
                self.remember(&key)
            } else {
                Verdict::Challenge
            };
        }
        // The throttle first: a client past it learns nothing, not even whether its
        // guess is credentials some other client had pass.
        let who = (Counted::of(client), user.to_string());
        if let Some(left) = self.throttle().refused(&who, &clock) {
            return Verdict::Throttled(left);
        }
        if self.files[index].2.contains(creds) {
            return Verdict::Pass;
        }
        let ok = match (&self.checker, self.asked.get(&key)) {
            // Made inline (no helpers: the unit tests); its failure counted here.
            (None, _) => {
                let ok = h.check(user, password);
                if !ok {
                    self.throttle().failed(who, clock());
                }
                ok
            }
            (Some(_), Some((t, _))) => match t.outcome() {
                None => return Verdict::Pending(Arc::clone(t)),
                // Its failure was counted when it was made.
                Some(ok) => ok,
            },
            (Some((checker, wake)), None) => {
                let now = clock();
                checker.throttle.ask(who.0, now);
                if !checker.may_start(now) {
                    return Verdict::Busy;
                }
                let ticket = Arc::new(Ticket::default());
                let job = Job {
                    file: h,
                    user: user.to_string(),
                    password: password.to_string(),
                    ticket: Arc::clone(&ticket),
                    wake: Arc::clone(wake),
                    throttle: Arc::clone(&checker.throttle),
                    who,
                };
                if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                    checker.jobs.try_send(job)
                {
                    checker.give_back();
                    return Verdict::Busy;
                }
                if self.asked.len() >= ASKED {
                    self.asked.retain(|_, (t, at)| {
                        !t.done() || now.saturating_duration_since(*at) < SHARED
                    });
                    if self.asked.len() >= ASKED {
                        self.asked.retain(|_, (t, _)| !t.done());
                    }
                }
                self.asked.insert(key, (Arc::clone(&ticket), now));
                return Verdict::Pending(ticket);
            }
        };
        if ok {
            return self.remember(&key);
        }
        Verdict::Challenge
    }

    /// The credentials of `key` (file index, token) passed a check: remembered for
    /// their file, so sending them again costs no check.
    fn remember(&mut self, key: &(usize, String)) -> Verdict {
        self.asked.remove(key);
        let passed = &mut self.files[key.0].2;
        if passed.len() >= REMEMBERED {
            passed.clear();
        }
        passed.insert(key.1.clone());
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `htpasswd -nbB -C 5 alice secret`
    const ALICE: &str = "alice:$2y$05$K96.w96XA89FxJ..xXDe4emC.79jgwH3z0UIzIVIzhKY4W9SZ9uhm";

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("htpasswd");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    fn basic(user_pass: &str) -> String {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_pass)
        )
    }

    /// Rules: docs/http.md W10.
    #[test]
    fn only_bcrypt_is_taken_and_a_bad_line_is_named() {
        let (_d, p) = file(&format!("# users\n{ALICE}\n\n"));
        let h = Htpasswd::load(&p).unwrap();
        assert!(h.check("alice", "secret") && !h.check("alice", "Secret"));
        assert!(!h.check("mallory", "secret"));
        for (line, why) in [
            (
                "carol:$apr1$A6uNhTrX$2AIzdiySDRczo6mGDL4f41",
                "line 2: user carol: not a bcrypt hash",
            ),
            (
                "dave:{SHA}EfatjsUqKYSrqv18O1FlA3hcIHI=",
                "line 2: user dave: not a bcrypt hash",
            ),
            ("erin", "line 2: not user:hash"),
            (
                "bob:$2y$06$PCxeaqGvM768VMJFLwUYEOH1rQvZ9pHF5AN4EyiI92S8hNgeIBSIu",
                "line 2: user bob: cost 6, where the users before have 5",
            ),
        ] {
            let (_d, p) = file(&format!("{ALICE}\n{line}\n"));
            let e = Htpasswd::load(&p).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    /// Rules: docs/http.md W10.
    #[test]
    fn checks_are_capped_for_the_whole_process() {
        std::thread::scope(|s| {
            let (tx, _rx) = mpsc::sync_channel(1);
            let c = Checker {
                jobs: tx,
                bucket: Mutex::new((u64::from(CHECKS_PER_SECOND) * 1_000_000, None)),
                throttle: Arc::default(),
                limits: crate::limits::Limits::start(s),
            };
            let t = Instant::now();
            for _ in 0..CHECKS_PER_SECOND {
                assert!(c.may_start(t));
            }
            assert!(!c.may_start(t), "past the rate");
            let next = t + Duration::from_millis(1000 / u64::from(CHECKS_PER_SECOND));
            assert!(c.may_start(next));
            assert!(!c.may_start(next));
        });
    }

    /// Rules: docs/http.md W10.
    #[test]
    fn passed_credentials_are_remembered_and_failures_throttle_their_client_alone() {
        let (_d, p) = file(ALICE);
        let mut g = Guard::default();
        let loaded = Some(Arc::new(Htpasswd::load(&p).unwrap()));
        g.files.push((p.clone(), loaded, Passed::default()));
        let t = Instant::now();
        let (a, b) = (
            Some("192.0.2.1".parse().unwrap()),
            Some("192.0.2.2".parse().unwrap()),
        );
        assert_eq!(g.check(&p, None, a, t), Verdict::Challenge);
        assert_eq!(g.check(&p, Some("Bearer x"), a, t), Verdict::Challenge);
        let good = basic("alice:secret");
        assert_eq!(g.check(&p, Some(&good), a, t), Verdict::Pass);
        assert!(g.files[0].2.contains(&good[6..]));
        let bad = basic("alice:guess");
        for _ in 0..FAILURES {
            assert_eq!(g.check(&p, Some(&bad), a, t), Verdict::Challenge);
        }
        assert!(matches!(
            g.check(&p, Some(&bad), a, t + Duration::from_secs(1)),
            Verdict::Throttled(d) if d == Duration::from_secs(59)
        ));
        // Not even remembered credentials pass from the throttled client; another
        // client is checked as ever; the window passes.
        assert!(matches!(
            g.check(&p, Some(&good), a, t),
            Verdict::Throttled(_)
        ));
        assert_eq!(g.check(&p, Some(&good), b, t), Verdict::Pass);
        assert_eq!(g.check(&p, Some(&bad), b, t), Verdict::Challenge);
        // An IPv6 client's /64 is one client.
        let (v6a, v6b) = (
            Some("2001:db8::1".parse().unwrap()),
            Some("2001:db8::ffff".parse().unwrap()),
        );
        for _ in 0..FAILURES {
            assert_eq!(g.check(&p, Some(&bad), v6a, t), Verdict::Challenge);
        }
        assert!(matches!(
            g.check(&p, Some(&bad), v6b, t),
            Verdict::Throttled(_)
        ));
        assert_eq!(g.check(&p, Some(&bad), a, t + WINDOW), Verdict::Challenge);
        // A file that could not be loaded refuses everyone.
        let gone = Path::new("/nonexistent/htpasswd");
        g.files.push((gone.to_path_buf(), None, Passed::default()));
        assert_eq!(g.check(gone, Some(&good), a, t), Verdict::Challenge);
    }
}
