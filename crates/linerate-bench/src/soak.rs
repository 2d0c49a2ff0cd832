//! `bench soak`: a bounded mixed load of the kind that takes servers down, then a look at
//! what it left behind.
//!
//! Client threads each loop until the deadline, drawing one action at a time: keep-alive
//! GETs of files whose every byte is checked, pipelined bursts, ranges and HEADs, 404s,
//! malformed requests, clients that reset in the middle of a large response, slow
//! readers that give up, half-closed clients, and requests for files that a mutator
//! thread truncates, regrows and renames meanwhile (an answer for one of those may be a
//! 404, or a prefix of the file and then a close; never another file's bytes). Before
//! the measured load, after a warm-up load (a tenth of the time, 2 s at most) that fills
//! the server's caches and pools in every worker, and after it, once every connection is
//! gone, the server's process tree is read from `/proc` (descriptors, threads, resident
//! memory), so what the load leaked shows as a difference: not one socket more (every
//! connection the clients closed must be closed by the server within 5 s), and, since
//! caches and pools are bounded, [`LEAK_SLACK`] descriptors of other kinds; a leak per
//! request or per reset shows as thousands.
//!
//! Every request carries its own number in its query (`?n=ID`), so with the access log's
//! path each line is matched to its request: every request whose answer began to arrive
//! must have exactly one line, and no line may name a request never sent. Malformed
//! requests, which cannot carry a number that the log would keep, are counted apart.
//!
//! The files live under `linerate-soak/` in the server's document root, written by the
//! soak itself, contents a function of their names (the `bench files` generator), so a
//! body is checked without the file at hand.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::http::client::parse_head;
use crate::http::workload::content;
use crate::procs::Usage;

/// The directory under the document root that holds the soak's files.
pub const DIR: &str = "linerate-soak";

/// Files whose every byte is checked: (name, length).
const STABLE: [(&str, u64); 8] = [
    ("s0.bin", 100),
    ("s1.bin", 1_000),
    ("s2.bin", 4_096),
    ("s3.bin", 16_000),
    ("s4.bin", 16_384),
    ("m0.bin", 100_000),
    ("m1.bin", 300_000),
    ("m2.bin", 1_000_000),
];
/// The large file resets and slow readers ask for.
const LARGE: (&str, u64) = ("l.bin", 8 << 20);
/// Truncated and regrown by the mutator.
const TRUNCATED: (&str, u64) = ("t.bin", 4 << 20);
/// Renamed away and back by the mutator.
const RENAMED: (&str, u64) = ("r.bin", 200_000);

/// One soak run.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// The server.
    pub target: SocketAddr,
    /// `Host` to send.
    pub host: String,
    /// The server's document root: the soak writes its files there.
    pub root: PathBuf,
    /// The server's process, for descriptors, threads and memory.
    pub server_pid: Option<u32>,
    /// The server's access log, whose new lines are counted.
    pub access_log: Option<PathBuf>,
    /// How long the load runs.
    pub duration: Duration,
    /// Client threads.
    pub clients: usize,
    /// Set to stop early (Ctrl-C).
    pub stop: crate::StopFlag,
}

/// What a run found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakReport {
    /// Seconds the load ran.
    pub seconds: f64,
    /// Requests written to a socket.
    pub requests_sent: u64,
    /// Requests whose response head arrived.
    pub requests_answered: u64,
    /// Answers by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Responses the client cut with a reset.
    pub resets: u64,
    /// Slow readers that gave up.
    pub slow_readers: u64,
    /// Truncations, regrowths and renames made.
    pub file_changes: u64,
    /// What went wrong, by kind (empty: nothing).
    pub errors: BTreeMap<String, u64>,
    /// The server's tree after the warm-up.
    pub server_before: Option<Usage>,
    /// The server's tree after the load, all connections gone.
    pub server_after: Option<Usage>,
    /// Lines the access log gained.
    pub access_log_lines: Option<u64>,
    /// Answered requests without their line.
    pub access_log_missing: Option<u64>,
    /// Lines naming a request never sent, or a request twice.
    pub access_log_unexpected: Option<u64>,
    /// Malformed requests (their lines carry no number): sent, answered, and lines
    /// without a number.
    pub malformed_sent: u64,
    pub malformed_answered: u64,
    pub access_log_untagged: Option<u64>,
}

/// Descriptors the server may hold after the load beyond the baseline: what its bounded
/// caches and pools (open files, splice pipes, per worker) can still take on.
pub const LEAK_SLACK: u64 = 32;

impl SoakReport {
    /// Every answered request has its one line, no line names a request never sent, and
    /// the malformed requests' lines are between those answered and those sent.
    pub fn log_consistent(&self) -> Option<bool> {
        Some(
            self.access_log_missing? == 0
                && self.access_log_unexpected? == 0
                && (self.malformed_answered..=self.malformed_sent)
                    .contains(&self.access_log_untagged?),
        )
    }

    /// Nothing leaked: no socket more than at the baseline (every connection the
    /// clients closed is closed), descriptors back to it give or take [`LEAK_SLACK`]
    /// (bounded caches and pools), the same threads.
    pub fn nothing_leaked(&self) -> Option<bool> {
        match (self.server_before, self.server_after) {
            (Some(b), Some(a)) => Some(
                a.sockets <= b.sockets
                    && a.descriptors <= b.descriptors + LEAK_SLACK
                    && a.threads == b.threads,
            ),
            _ => None,
        }
    }

    /// No error, nothing leaked, the log consistent (where each could be checked).
    pub fn passed(&self) -> bool {
        self.errors.is_empty()
            && self.nothing_leaked() != Some(false)
            && self.log_consistent() != Some(false)
    }
}

/// Writes the soak's files under `root/linerate-soak/`.
pub fn write_files(root: &Path) -> io::Result<()> {
    let dir = root.join(DIR);
    fs::create_dir_all(&dir)?;
    for (name, len) in STABLE.iter().chain([&LARGE, &TRUNCATED, &RENAMED]) {
        write_file(&dir.join(name), name, *len)?;
    }
    Ok(())
}

fn write_file(path: &Path, name: &str, len: u64) -> io::Result<()> {
    let mut f = File::create(path)?;
    content(name, len, |b| f.write_all(b))
}

/// The generated bytes of `name`, `len` long.
fn expected(name: &str, len: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len as usize);
    let _ = content(name, len, |b| {
        v.extend_from_slice(b);
        Ok(())
    });
    v
}

/// Counters the client threads share.
#[derive(Default)]
struct Tally {
    /// The next request number.
    next_id: AtomicU64,
    sent: AtomicU64,
    answered: AtomicU64,
    /// Bit `n`: request `n`'s answer began to arrive.
    answered_ids: Mutex<Vec<u64>>,
    malformed_sent: AtomicU64,
    malformed_answered: AtomicU64,
    resets: AtomicU64,
    slow: AtomicU64,
    changes: AtomicU64,
    statuses: Mutex<BTreeMap<u16, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }
    /// Request `id` (None: a malformed one) was answered with `s`.
    fn status(&self, s: u16, id: Option<u64>) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        *self.statuses.lock().unwrap().entry(s).or_insert(0) += 1;
        match id {
            Some(id) => set_bit(&mut self.answered_ids.lock().unwrap(), id),
            None => {
                self.malformed_answered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    fn error(&self, what: impl Into<String>) {
        *self.errors.lock().unwrap().entry(what.into()).or_insert(0) += 1;
    }
}

fn set_bit(bits: &mut Vec<u64>, n: u64) {
    let (w, b) = ((n / 64) as usize, n % 64);
    if bits.len() <= w {
        bits.resize(w + 1, 0);
    }
    bits[w] |= 1 << b;
}

fn bit(bits: &[u64], n: u64) -> bool {
    bits.get((n / 64) as usize)
        .is_some_and(|w| w & (1 << (n % 64)) != 0)
}

/// What the access log says of the requests, from byte `from` of the file at `path`.
struct LogCheck {
    lines: u64,
    missing: u64,
    unexpected: u64,
    untagged: u64,
}

/// Reads the lines the log gained and matches each to its request number: those of
/// `ids` (the run's numbers) are checked; a line of a lower number is the warm-up's,
/// written late (an answer the server was still cutting when the count began, on a busy
/// machine), and is left out.
fn check_log(
    path: &Path,
    from: u64,
    ids: std::ops::Range<u64>,
    answered: &[u64],
) -> io::Result<LogCheck> {
    let ids_sent = ids.end;
    let mut f = File::open(path)?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(from))?;
    let mut text = Vec::new();
    f.read_to_end(&mut text)?;
    let mut logged: Vec<u64> = Vec::new();
    let (mut lines, mut unexpected, mut untagged) = (0, 0, 0);
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let number = request_number(line);
        if number.is_some_and(|n| n < ids.start) {
            continue;
        }
        lines += 1;
        match number {
            Some(n) if n < ids_sent && !bit(&logged, n) => set_bit(&mut logged, n),
            Some(_) => unexpected += 1,
            None => untagged += 1,
        }
    }
    let missing = ids
        .filter(|&n| bit(answered, n) && !bit(&logged, n))
        .count() as u64;
    Ok(LogCheck {
        lines,
        missing,
        unexpected,
        untagged,
    })
}

/// The `n=NUMBER` of a log line's request (CLF or JSON).
fn request_number(line: &[u8]) -> Option<u64> {
    let at = line.windows(3).position(|w| w == b"?n=")? + 3;
    let digits: Vec<u8> = line[at..]
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Bytes in the file at `path` now.
fn file_len(path: &Path) -> io::Result<u64> {
    Ok(fs::metadata(path)?.len())
}

/// Runs the soak.
pub fn run(cfg: &SoakConfig) -> io::Result<SoakReport> {
    write_files(&cfg.root)?;
    let files: Arc<Vec<(String, Vec<u8>)>> = Arc::new(
        STABLE
            .iter()
            .map(|(n, l)| (format!("/{DIR}/{n}"), expected(n, *l)))
            .collect(),
    );
    let large = Arc::new(expected(LARGE.0, LARGE.1));
    let mutable: Arc<Vec<(String, Vec<u8>)>> = Arc::new(vec![
        (
            format!("/{DIR}/{}", TRUNCATED.0),
            expected(TRUNCATED.0, TRUNCATED.1),
        ),
        (
            format!("/{DIR}/{}", RENAMED.0),
            expected(RENAMED.0, RENAMED.1),
        ),
    ]);
    let shared = Shared {
        files,
        large,
        mutable,
    };
    // Warm-up: the same load for a tenth of the time (2 s at most), so the baseline
    // has the server's caches and pools filled in every worker. Its requests are logged
    // before the count starts, so they are not counted; its errors are.
    let warm = Arc::new(Tally::default());
    let warm_for = (cfg.duration / 10).min(Duration::from_secs(2));
    load(cfg, &shared, &warm, warm_for);
    // The run's request numbers follow the warm-up's, so a warm-up line written late is
    // told apart.
    let first = warm.next_id.load(Ordering::Relaxed);
    let tally = Arc::new(Tally {
        next_id: AtomicU64::new(first),
        ..Tally::default()
    });
    for (what, n) in std::mem::take(&mut *warm.errors.lock().unwrap()) {
        *tally
            .errors
            .lock()
            .unwrap()
            .entry(format!("warm-up: {what}"))
            .or_insert(0) += n;
    }
    write_files(&cfg.root)?;
    std::thread::sleep(Duration::from_millis(500));
    let before = cfg
        .server_pid
        .and_then(|pid| settled(pid, None, Duration::ZERO));
    let log_start = cfg.access_log.as_deref().map(file_len).transpose()?;

    let start = Instant::now();
    load(cfg, &shared, &tally, cfg.duration);
    let seconds = start.elapsed().as_secs_f64();
    write_files(&cfg.root)?;
    let after = cfg
        .server_pid
        .and_then(|pid| settled(pid, before, Duration::from_secs(5)));
    let t = Arc::try_unwrap(tally).unwrap_or_default();
    let answered_ids = t.answered_ids.into_inner().unwrap_or_default();
    let log = match (&cfg.access_log, log_start) {
        (Some(p), Some(from)) => {
            // Lines are written within a tick of the server's (100 ms).
            std::thread::sleep(Duration::from_millis(500));
            Some(check_log(
                p,
                from,
                first..t.next_id.load(Ordering::Relaxed),
                &answered_ids,
            )?)
        }
        _ => None,
    };
    Ok(SoakReport {
        seconds,
        requests_sent: t.sent.into_inner(),
        requests_answered: t.answered.into_inner(),
        statuses: t.statuses.into_inner().unwrap_or_default(),
        resets: t.resets.into_inner(),
        slow_readers: t.slow.into_inner(),
        file_changes: t.changes.into_inner(),
        errors: t.errors.into_inner().unwrap_or_default(),
        server_before: before,
        server_after: after,
        access_log_lines: log.as_ref().map(|l| l.lines),
        access_log_missing: log.as_ref().map(|l| l.missing),
        access_log_unexpected: log.as_ref().map(|l| l.unexpected),
        malformed_sent: t.malformed_sent.into_inner(),
        malformed_answered: t.malformed_answered.into_inner(),
        access_log_untagged: log.as_ref().map(|l| l.untagged),
    })
}

/// The expected contents, shared by the client threads.
struct Shared {
    files: Arc<Vec<(String, Vec<u8>)>>,
    large: Arc<Vec<u8>>,
    mutable: Arc<Vec<(String, Vec<u8>)>>,
}

/// `cfg.clients` client threads and the file mutator, for `duration` (or until the
/// user stops it); every connection is closed when it returns.
fn load(cfg: &SoakConfig, shared: &Shared, tally: &Arc<Tally>, duration: Duration) {
    let deadline = Instant::now() + duration;
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for seed in 0..cfg.clients.max(1) {
        let mut c = Client::new(cfg.target, &cfg.host, Arc::clone(tally));
        let (files, large, mutable) = (
            Arc::clone(&shared.files),
            Arc::clone(&shared.large),
            Arc::clone(&shared.mutable),
        );
        let (stop, user_stop) = (Arc::clone(&stop), Arc::clone(&cfg.stop));
        let seed = seed as u64 + 1 + tally.next_id.load(Ordering::Relaxed);
        threads.push(std::thread::spawn(move || {
            let mut rng = fastrand::Rng::with_seed(seed);
            while Instant::now() < deadline
                && !stop.load(Ordering::Relaxed)
                && !user_stop.load(Ordering::Relaxed)
            {
                c.act(&mut rng, &files, &large, &mutable);
            }
        }));
    }
    let mutator = {
        let (dir, tally, stop) = (cfg.root.join(DIR), Arc::clone(tally), Arc::clone(&stop));
        let user_stop = Arc::clone(&cfg.stop);
        std::thread::spawn(move || mutate(&dir, &tally, deadline, &stop, &user_stop))
    };
    for t in threads {
        if t.join().is_err() {
            tally.error("a client thread panicked");
        }
    }
    stop.store(true, Ordering::Relaxed);
    match mutator.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tally.error(format!("changing files: {e}")),
        Err(_) => tally.error("the file mutator panicked"),
    }
}

/// The server's tree once its descriptors are back to `before`'s (or steady, with no
/// `before`), waiting at most `wait`: closes finish a moment after the client sees the
/// connections end.
fn settled(pid: u32, before: Option<Usage>, wait: Duration) -> Option<Usage> {
    let deadline = Instant::now() + wait;
    loop {
        let now = Usage::of_tree(pid)?;
        let done =
            before.is_none_or(|b| now.descriptors <= b.descriptors && now.sockets <= b.sockets);
        if done || Instant::now() > deadline {
            return Some(now);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Truncates and regrows one file, renames another away and back, every few ms.
fn mutate(
    dir: &Path,
    tally: &Tally,
    deadline: Instant,
    stop: &AtomicBool,
    user_stop: &AtomicBool,
) -> io::Result<()> {
    let t_path = dir.join(TRUNCATED.0);
    let t_full = expected(TRUNCATED.0, TRUNCATED.1);
    let (r_path, r_away) = (dir.join(RENAMED.0), dir.join("r.away"));
    let mut rng = fastrand::Rng::with_seed(99);
    while Instant::now() < deadline
        && !stop.load(Ordering::Relaxed)
        && !user_stop.load(Ordering::Relaxed)
    {
        // Truncate to a random length, then grow back to the same bytes: a reader may see
        // a prefix and a close, never other bytes.
        let f = OpenOptions::new().write(true).open(&t_path)?;
        let cut = rng.u64(0..TRUNCATED.1);
        f.set_len(cut)?;
        std::thread::sleep(Duration::from_millis(rng.u64(1..20)));
        f.write_all_at(&t_full[cut as usize..], cut)?;
        drop(f);
        fs::rename(&r_path, &r_away)?;
        std::thread::sleep(Duration::from_millis(rng.u64(1..10)));
        fs::rename(&r_away, &r_path)?;
        tally.changes.fetch_add(3, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(rng.u64(5..30)));
    }
    Ok(())
}

/// One client thread: a keep-alive connection it reuses, and new ones for the actions
/// that end theirs.
struct Client {
    target: SocketAddr,
    host: String,
    tally: Arc<Tally>,
    keep: Option<Conn>,
}

/// A connection and the bytes read ahead on it (`bench idle` reads its answers so too).
pub(crate) struct Conn {
    pub s: TcpStream,
    buf: Vec<u8>,
}

/// A response read from a connection.
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// The whole announced body arrived.
    pub whole: bool,
    pub close: bool,
}

impl Conn {
    pub fn open(target: SocketAddr) -> io::Result<Conn> {
        let s = TcpStream::connect_timeout(&target, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_write_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        Ok(Conn { s, buf: Vec::new() })
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.s.read(&mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// The next response (a HEAD's has no body). `Ok(None)`: the connection ended before
    /// a head. A body cut by a close comes back with `whole` false.
    pub fn answer(&mut self, head: bool) -> io::Result<Option<Answer>> {
        loop {
            match parse_head(&self.buf) {
                Ok(Some(h)) => {
                    let want = if head { 0 } else { h.content_length as usize };
                    while self.buf.len() - h.head_len < want {
                        // A close or a reset after the head: a cut answer.
                        if self.fill().unwrap_or(0) == 0 {
                            let body = self.buf.split_off(h.head_len);
                            self.buf.clear();
                            return Ok(Some(Answer {
                                status: h.status,
                                body,
                                whole: false,
                                close: true,
                            }));
                        }
                    }
                    let rest = self.buf.split_off(h.head_len + want);
                    let body = self.buf.split_off(h.head_len);
                    self.buf = rest;
                    return Ok(Some(Answer {
                        status: h.status,
                        body,
                        whole: true,
                        close: h.close,
                    }));
                }
                Ok(None) => {
                    if self.fill()? == 0 {
                        return Ok(None);
                    }
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        }
    }
}

impl Client {
    fn new(target: SocketAddr, host: &str, tally: Arc<Tally>) -> Client {
        Client {
            target,
            host: host.to_string(),
            tally,
            keep: None,
        }
    }

    /// A request for `path` with its number in the query; the bytes and the number.
    fn request(&self, method: &str, path: &str, extra: &str) -> (Vec<u8>, u64) {
        let id = self.tally.id();
        let bytes = format!(
            "{method} {path}?n={id} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
            self.host
        )
        .into_bytes();
        (bytes, id)
    }

    /// A new connection with one request written on it; the connection and the number.
    fn open_with(&self, path: &str, extra: &str) -> Result<(Conn, u64), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        let (req, id) = self.request("GET", path, extra);
        self.send(&mut c, &req, 1)?;
        Ok((c, id))
    }

    /// Writes requests (`count` of them) on `c`.
    fn send(&self, c: &mut Conn, bytes: &[u8], count: u64) -> Result<(), String> {
        c.s.write_all(bytes)
            .map_err(|e| format!("send: {}", e.kind()))?;
        self.tally.sent.fetch_add(count, Ordering::Relaxed);
        Ok(())
    }

    /// The kept connection, opened if there is none.
    fn kept(&mut self) -> io::Result<&mut Conn> {
        if self.keep.is_none() {
            self.keep = Some(Conn::open(self.target)?);
        }
        Ok(self.keep.as_mut().expect("just opened"))
    }

    fn act(
        &mut self,
        rng: &mut fastrand::Rng,
        files: &[(String, Vec<u8>)],
        large: &[u8],
        mutable: &[(String, Vec<u8>)],
    ) {
        let r = match rng.u32(0..100) {
            0..40 => {
                let (p, want) = &files[rng.usize(..files.len())];
                self.keep_alive(&[(p.as_str(), want.as_slice())], "GET", "")
            }
            40..50 => {
                let burst: Vec<(&str, &[u8])> = (0..8)
                    .map(|_| {
                        let (p, w) = &files[rng.usize(..files.len())];
                        (p.as_str(), w.as_slice())
                    })
                    .collect();
                self.keep_alive(&burst, "GET", "")
            }
            50..55 => {
                let (p, want) = &files[rng.usize(5..files.len())];
                self.keep_alive(
                    &[(p.as_str(), &want[10..100])],
                    "GET",
                    "Range: bytes=10-99\r\n",
                )
            }
            55..60 => {
                let (p, _) = &files[rng.usize(..files.len())];
                self.keep_alive(&[(p.as_str(), &[])], "HEAD", "")
            }
            60..65 => self.expect_status(&format!("/{DIR}/missing-{}", rng.u32(..)), 404),
            65..68 => self.malformed(),
            68..78 => self.reset_mid_response(rng, large),
            78..82 => self.slow_reader(large),
            82..95 => {
                let (p, want) = &mutable[rng.usize(..mutable.len())];
                self.mutable(p, want)
            }
            _ => {
                let (p, want) = &files[rng.usize(..5)];
                self.half_closed(p, want)
            }
        };
        if let Err(e) = r {
            self.tally.error(e);
        }
    }

    /// GETs (or HEADs) on the kept connection, pipelined, each answer checked (`want`
    /// is the body; a HEAD's is empty). A connection the server closed while idle
    /// (before any answer) is opened again once, with new requests.
    fn keep_alive(
        &mut self,
        reqs: &[(&str, &[u8])],
        method: &str,
        extra: &str,
    ) -> Result<(), String> {
        let tally = Arc::clone(&self.tally);
        let head = method == "HEAD";
        let want_status = if extra.is_empty() { 200 } else { 206 };
        let mut last = String::from("no attempt");
        for _attempt in 0..2 {
            let (mut bytes, mut ids) = (Vec::new(), Vec::new());
            for (p, _) in reqs {
                let (b, id) = self.request(method, p, extra);
                bytes.extend_from_slice(&b);
                ids.push(id);
            }
            let c = self.kept().map_err(|e| format!("connect: {e}"))?;
            if let Err(e) = c.s.write_all(&bytes) {
                self.keep = None;
                last = format!("{method}: send on a kept connection: {}", e.kind());
                continue;
            }
            tally.sent.fetch_add(reqs.len() as u64, Ordering::Relaxed);
            let mut closed_idle = false;
            for (i, ((path, want), id)) in reqs.iter().zip(&ids).enumerate() {
                match c.answer(head) {
                    Ok(Some(a)) => {
                        tally.status(a.status, Some(*id));
                        if a.status != want_status || !a.whole || a.body != *want {
                            self.keep = None;
                            return Err(format!(
                                "{method} {path}: {} with {} bytes (whole: {}), wanted {want_status} with {}",
                                a.status,
                                a.body.len(),
                                a.whole,
                                want.len()
                            ));
                        }
                        if a.close {
                            self.keep = None;
                            return Err(format!("{method} {path}: closed a keep-alive connection"));
                        }
                    }
                    // Closed by the server's idle deadline just as we wrote.
                    Ok(None) if i == 0 => {
                        closed_idle = true;
                        break;
                    }
                    Ok(None) => {
                        self.keep = None;
                        return Err(format!("{method} {path}: closed before the answer"));
                    }
                    Err(e) => {
                        self.keep = None;
                        return Err(format!("{method} {path}: {}", e.kind()));
                    }
                }
            }
            if !closed_idle {
                return Ok(());
            }
            self.keep = None;
            last = format!("{method}: a kept connection closed before any answer, twice");
        }
        Err(last)
    }

    /// A request on a new connection that must get `status`.
    fn expect_status(&self, path: &str, status: u16) -> Result<(), String> {
        let (mut c, id) = self.open_with(path, "Connection: close\r\n")?;
        match c.answer(false) {
            Ok(Some(a)) => {
                self.tally.status(a.status, Some(id));
                if a.status == status {
                    Ok(())
                } else {
                    Err(format!("GET {path}: {} instead of {status}", a.status))
                }
            }
            Ok(None) => Err(format!("GET {path}: closed before the answer")),
            Err(e) => Err(format!("GET {path}: {}", e.kind())),
        }
    }

    /// A request line no server may accept: 400, then the connection closes.
    fn malformed(&self) -> Result<(), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        self.send(&mut c, b"G ET / HTTP/1.1\r\nHost: t\r\n\r\n", 1)?;
        self.tally.malformed_sent.fetch_add(1, Ordering::Relaxed);
        match c.answer(false) {
            Ok(Some(a)) => {
                self.tally.status(a.status, None);
                if a.status == 400 && a.close {
                    Ok(())
                } else {
                    Err(format!(
                        "malformed request: {} (close {})",
                        a.status, a.close
                    ))
                }
            }
            _ => Err("malformed request: no answer".into()),
        }
    }

    /// A large GET read for a while, then the connection reset.
    fn reset_mid_response(&self, rng: &mut fastrand::Rng, large: &[u8]) -> Result<(), String> {
        let path = format!("/{DIR}/{}", LARGE.0);
        let (mut c, id) = self.open_with(&path, "")?;
        let take = rng.usize(1..1 << 20);
        let mut seen_head = false;
        loop {
            if let Ok(Some(h)) = parse_head(&c.buf) {
                if !seen_head {
                    seen_head = true;
                    self.tally.status(h.status, Some(id));
                }
                if h.status != 200 {
                    return Err(format!("GET {path}: {}", h.status));
                }
                let got = &c.buf[h.head_len..];
                if got.len() >= take {
                    if got != &large[..got.len().min(large.len())] {
                        return Err(format!("GET {path}: wrong bytes before the reset"));
                    }
                    break;
                }
            }
            match c.fill() {
                Ok(0) => return Err(format!("GET {path}: closed early")),
                Ok(_) => {}
                Err(e) => return Err(format!("GET {path}: {}", e.kind())),
            }
        }
        // Closing with unread bytes sends a reset.
        self.tally.resets.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A large GET read 16 KiB at a time with pauses, given up after half a second.
    fn slow_reader(&self, large: &[u8]) -> Result<(), String> {
        let path = format!("/{DIR}/{}", LARGE.0);
        let (mut c, id) = self.open_with(&path, "")?;
        let end = Instant::now() + Duration::from_millis(500);
        let mut chunk = [0u8; 16 * 1024];
        let mut seen_head = false;
        while Instant::now() < end {
            let n =
                c.s.read(&mut chunk)
                    .map_err(|e| format!("GET {path}: {}", e.kind()))?;
            if n == 0 {
                return Err(format!("GET {path}: closed a slow reader early"));
            }
            c.buf.extend_from_slice(&chunk[..n]);
            if !seen_head {
                if let Ok(Some(h)) = parse_head(&c.buf) {
                    seen_head = true;
                    self.tally.status(h.status, Some(id));
                    let got = &c.buf[h.head_len..];
                    if h.status != 200 || got != &large[..got.len().min(large.len())] {
                        return Err(format!("GET {path}: {} or wrong bytes", h.status));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.tally.slow.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A file being truncated, regrown or renamed: 404, or 200 with bytes that are each
    /// the file's or zero (the page-reference strategies send what the page cache holds
    /// when the bytes leave, and a truncation zeroes a cut folio's tail in place), and
    /// perhaps a close or a reset before the end; never another file's bytes.
    fn mutable(&self, path: &str, full: &[u8]) -> Result<(), String> {
        let (mut c, id) = self.open_with(path, "Connection: close\r\n")?;
        match c.answer(false) {
            Ok(Some(a)) => {
                self.tally.status(a.status, Some(id));
                match a.status {
                    404 => Ok(()),
                    200 if a.body.len() <= full.len() && of_file_or_zero(&a.body, full) => Ok(()),
                    s => Err(format!(
                        "GET {path}: {s} with {} bytes not of the file",
                        a.body.len()
                    )),
                }
            }
            Ok(None) => Err(format!("GET {path}: closed before the answer")),
            // A truncation resets the connection, perhaps before the head arrived.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
            Err(e) => Err(format!("GET {path}: {}", e.kind())),
        }
    }

    /// A request written, the client's side half-closed, the answer read to the end.
    fn half_closed(&self, path: &str, want: &[u8]) -> Result<(), String> {
        let (mut c, id) = self.open_with(path, "")?;
        let _ = c.s.shutdown(Shutdown::Write);
        match c.answer(false) {
            Ok(Some(a)) => {
                self.tally.status(a.status, Some(id));
                if a.status == 200 && a.whole && a.body == want {
                    Ok(())
                } else {
                    Err(format!(
                        "half-closed GET {path}: {} with {} bytes",
                        a.status,
                        a.body.len()
                    ))
                }
            }
            Ok(None) => Err(format!("half-closed GET {path}: no answer")),
            Err(e) => Err(format!("half-closed GET {path}: {}", e.kind())),
        }
    }
}

/// Each byte of `body` is the file's byte at its offset, or zero.
fn of_file_or_zero(body: &[u8], full: &[u8]) -> bool {
    body.iter().zip(full).all(|(&b, &f)| b == f || b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_matched_to_their_requests() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        let clf = |n: &str| {
            format!("1.2.3.4 - - [x] \"GET /linerate-soak/s1.bin?n={n} HTTP/1.1\" 200 10\n")
        };
        let mut text = String::from("an old line ?n=1\n");
        let from = text.len() as u64;
        text += &clf("0");
        text += &clf("2");
        text += &clf("2"); // twice
        text += &clf("9"); // never sent
        text += "{\"request\":\"GET /x?n=3 HTTP/1.1\",\"status\":404}\n";
        text += "1.2.3.4 - - [x] \"-\" 400 12\n";
        fs::write(&p, text).unwrap();
        let mut answered = Vec::new();
        for n in [0, 1, 2, 3] {
            set_bit(&mut answered, n);
        }
        let c = check_log(&p, from, 0..5, &answered).unwrap();
        assert_eq!((c.lines, c.missing, c.unexpected, c.untagged), (6, 1, 2, 1));
        // Numbers below the run's are the warm-up's, logged late: left out.
        let c = check_log(&p, from, 1..5, &answered).unwrap();
        assert_eq!((c.lines, c.missing, c.unexpected, c.untagged), (5, 1, 2, 1));
        assert_eq!(request_number(b"GET /a?n=42 HTTP/1.1"), Some(42));
        assert_eq!(request_number(b"GET /a HTTP/1.1"), None);
    }

    #[test]
    fn a_mutated_file_may_show_zeros_never_other_bytes() {
        let full = expected("t.bin", 10_000);
        assert!(of_file_or_zero(&full, &full));
        let mut cut = full.clone();
        cut[5000..6000].fill(0);
        assert!(of_file_or_zero(&cut, &full));
        assert!(of_file_or_zero(&full[..100], &full));
        let other = expected("r.bin", 10_000);
        assert!(!of_file_or_zero(&other, &full));
    }
}
