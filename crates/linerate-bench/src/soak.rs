//! `bench soak`: a bounded mixed load of the kind that takes servers down, then a look at
//! what it left behind.
//!
//! Client threads each loop until the deadline, drawing one action at a time: keep-alive
//! GETs of files whose every byte is checked, pipelined bursts, ranges and HEADs, 404s,
//! malformed requests, clients that reset in the middle of a large response, slow
//! readers that give up, half-closed clients, and requests for files that a mutator
//! thread truncates, regrows and renames meanwhile (an answer for one of those may be a
//! 404, or a prefix of the file and then a close; never another file's bytes). Before
//! the load, after a warm-up request for every file, and after it, once every connection
//! is gone and every file was requested again, the server's process tree is read from
//! `/proc` (descriptors, threads, resident memory), so what the load leaked shows as a
//! difference. With the access log's path, its lines are counted against the requests
//! sent and the requests answered: every answered request must have its line.
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
}

impl SoakReport {
    /// Every answered request has its log line, and no more lines than requests.
    pub fn log_consistent(&self) -> Option<bool> {
        self.access_log_lines
            .map(|l| l >= self.requests_answered && l <= self.requests_sent)
    }

    /// Nothing leaked: descriptors back to the baseline (give or take what the
    /// open-file cache holds for the mutated files), the same threads.
    pub fn nothing_leaked(&self) -> Option<bool> {
        match (self.server_before, self.server_after) {
            (Some(b), Some(a)) => {
                Some(a.descriptors <= b.descriptors + 4 && a.threads == b.threads)
            }
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
    sent: AtomicU64,
    answered: AtomicU64,
    resets: AtomicU64,
    slow: AtomicU64,
    changes: AtomicU64,
    statuses: Mutex<BTreeMap<u16, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    fn status(&self, s: u16) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        *self.statuses.lock().unwrap().entry(s).or_insert(0) += 1;
    }
    fn error(&self, what: impl Into<String>) {
        *self.errors.lock().unwrap().entry(what.into()).or_insert(0) += 1;
    }
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
    let tally = Arc::new(Tally::default());
    // Warm-up: every file once, so the baseline has them in the server's caches. Its
    // requests are logged before the count starts, so they are not counted either.
    let warm_tally = Arc::new(Tally::default());
    Client::new(cfg.target, &cfg.host, Arc::clone(&warm_tally)).warm_up(&files, &large, &mutable);
    for (what, n) in std::mem::take(&mut *warm_tally.errors.lock().unwrap()) {
        *tally.errors.lock().unwrap().entry(what).or_insert(0) += n;
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = cfg.server_pid.and_then(Usage::of_tree);
    let log_start = cfg.access_log.as_deref().map(count_lines).transpose()?;

    let deadline = Instant::now() + cfg.duration;
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for seed in 0..cfg.clients.max(1) {
        let mut c = Client::new(cfg.target, &cfg.host, Arc::clone(&tally));
        let (files, large, mutable) =
            (Arc::clone(&files), Arc::clone(&large), Arc::clone(&mutable));
        let (stop, user_stop) = (Arc::clone(&stop), Arc::clone(&cfg.stop));
        threads.push(std::thread::spawn(move || {
            let mut rng = fastrand::Rng::with_seed(seed as u64 + 1);
            while Instant::now() < deadline
                && !stop.load(Ordering::Relaxed)
                && !user_stop.load(Ordering::Relaxed)
            {
                c.act(&mut rng, &files, &large, &mutable);
            }
        }));
    }
    let mutator = {
        let (dir, tally, stop) = (cfg.root.join(DIR), Arc::clone(&tally), Arc::clone(&stop));
        let user_stop = Arc::clone(&cfg.stop);
        std::thread::spawn(move || mutate(&dir, &tally, deadline, &stop, &user_stop))
    };
    for t in threads {
        if t.join().is_err() {
            tally.error("a client thread panicked");
        }
    }
    stop.store(true, Ordering::Relaxed);
    if let Ok(Err(e)) = mutator.join() {
        tally.error(format!("changing files: {e}"));
    }
    let seconds = start.elapsed().as_secs_f64();
    // Every file once more (the mutated ones restored), then the connections gone.
    write_files(&cfg.root)?;
    Client::new(cfg.target, &cfg.host, Arc::clone(&tally)).warm_up(&files, &large, &mutable);
    let after = cfg.server_pid.and_then(|pid| settled(pid, before));
    let log_lines = match (&cfg.access_log, log_start) {
        (Some(p), Some(n)) => {
            // Lines are written within a tick of the server's (100 ms).
            std::thread::sleep(Duration::from_millis(500));
            Some(count_lines(p)?.saturating_sub(n))
        }
        _ => None,
    };
    let t = Arc::try_unwrap(tally).unwrap_or_default();
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
        access_log_lines: log_lines,
    })
}

/// The server's tree once its descriptors are back to `before`'s, or after 5 s: closes
/// finish a moment after the client sees the connections end.
fn settled(pid: u32, before: Option<Usage>) -> Option<Usage> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = Usage::of_tree(pid)?;
        let done = before.is_none_or(|b| now.descriptors <= b.descriptors);
        if done || Instant::now() > deadline {
            return Some(now);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Lines (newlines) in the file at `path`.
pub fn count_lines(path: &Path) -> io::Result<u64> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        match f.read(&mut buf)? {
            0 => return Ok(n),
            k => n += buf[..k].iter().filter(|&&b| b == b'\n').count() as u64,
        }
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

/// A connection and the bytes read ahead on it.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

/// A response read from a connection.
struct Answer {
    status: u16,
    body: Vec<u8>,
    /// The whole announced body arrived.
    whole: bool,
    close: bool,
}

impl Conn {
    fn open(target: SocketAddr) -> io::Result<Conn> {
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
    fn answer(&mut self, head: bool) -> io::Result<Option<Answer>> {
        loop {
            match parse_head(&self.buf) {
                Ok(Some(h)) => {
                    let want = if head { 0 } else { h.content_length as usize };
                    while self.buf.len() - h.head_len < want {
                        if self.fill()? == 0 {
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

    fn request(&self, method: &str, path: &str, extra: &str) -> Vec<u8> {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n",
            self.host
        )
        .into_bytes()
    }

    fn send(&self, c: &mut Conn, bytes: &[u8], requests: u64) -> io::Result<()> {
        c.s.write_all(bytes)?;
        self.tally.sent.fetch_add(requests, Ordering::Relaxed);
        Ok(())
    }

    /// Requests each file once on a new connection, checking every byte.
    fn warm_up(&self, files: &[(String, Vec<u8>)], large: &[u8], mutable: &[(String, Vec<u8>)]) {
        let large_path = format!("/{DIR}/{}", LARGE.0);
        let all = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .chain([(large_path.as_str(), large)])
            .chain(mutable.iter().map(|(p, b)| (p.as_str(), b.as_slice())));
        let mut c = match Conn::open(self.target) {
            Ok(c) => c,
            Err(e) => return self.tally.error(format!("warm-up connect: {e}")),
        };
        for (path, want) in all {
            let req = self.request("GET", path, "");
            let r = self.send(&mut c, &req, 1).and_then(|()| c.answer(false));
            match r {
                Ok(Some(a)) if a.status == 200 && a.whole && a.body == want => {
                    self.tally.status(200)
                }
                Ok(Some(a)) => {
                    self.tally.status(a.status);
                    self.tally.error(format!(
                        "warm-up {path}: {} ({} bytes)",
                        a.status,
                        a.body.len()
                    ));
                }
                Ok(None) => self.tally.error(format!("warm-up {path}: closed")),
                Err(e) => self.tally.error(format!("warm-up {path}: {e}")),
            }
        }
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

    /// GETs (or HEADs) on the kept connection, pipelined, each answer checked
    /// (`want` is the body; a HEAD's is empty). A connection the server closed while
    /// idle is opened again once.
    fn keep_alive(
        &mut self,
        reqs: &[(&str, &[u8])],
        method: &str,
        extra: &str,
    ) -> Result<(), String> {
        let bytes: Vec<u8> = reqs
            .iter()
            .flat_map(|(p, _)| self.request(method, p, extra))
            .collect();
        let tally = Arc::clone(&self.tally);
        let head = method == "HEAD";
        let want_status = if extra.is_empty() { 200 } else { 206 };
        for attempt in 0..2 {
            let c = self.kept().map_err(|e| format!("connect: {e}"))?;
            if c.s.write_all(&bytes).is_err() {
                self.keep = None;
                continue;
            }
            tally.sent.fetch_add(reqs.len() as u64, Ordering::Relaxed);
            for (i, (path, want)) in reqs.iter().enumerate() {
                match c.answer(head) {
                    Ok(Some(a)) => {
                        tally.status(a.status);
                        if a.status != want_status || !a.whole || a.body != *want {
                            self.keep = None;
                            return Err(format!(
                                "{method} {path}: {} with {} bytes, wanted {want_status} with {}",
                                a.status,
                                a.body.len(),
                                want.len()
                            ));
                        }
                        if a.close {
                            self.keep = None;
                            return Err(format!("{method} {path}: closed a keep-alive connection"));
                        }
                    }
                    // Closed by the server's idle deadline just as we wrote: once more.
                    Ok(None) if i == 0 && attempt == 0 => {
                        self.keep = None;
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
                if i + 1 == reqs.len() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A request on a new connection that must get `status`.
    fn expect_status(&self, path: &str, status: u16) -> Result<(), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        self.send(
            &mut c,
            &self.request("GET", path, "Connection: close\r\n"),
            1,
        )
        .map_err(|e| format!("send: {e}"))?;
        match c.answer(false) {
            Ok(Some(a)) if a.status == status => {
                self.tally.status(a.status);
                Ok(())
            }
            Ok(Some(a)) => {
                self.tally.status(a.status);
                Err(format!("GET {path}: {} instead of {status}", a.status))
            }
            Ok(None) => Err(format!("GET {path}: closed before the answer")),
            Err(e) => Err(format!("GET {path}: {}", e.kind())),
        }
    }

    /// A request line no server may accept: 400, then the connection closes.
    fn malformed(&self) -> Result<(), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        self.send(&mut c, b"G ET / HTTP/1.1\r\nHost: t\r\n\r\n", 1)
            .map_err(|e| format!("send: {e}"))?;
        match c.answer(false) {
            Ok(Some(a)) if a.status == 400 && a.close => {
                self.tally.status(400);
                Ok(())
            }
            Ok(Some(a)) => {
                self.tally.status(a.status);
                Err(format!(
                    "malformed request: {} (close {})",
                    a.status, a.close
                ))
            }
            _ => Err("malformed request: no answer".into()),
        }
    }

    /// A large GET read for a while, then the connection reset.
    fn reset_mid_response(&self, rng: &mut fastrand::Rng, large: &[u8]) -> Result<(), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        let path = format!("/{DIR}/{}", LARGE.0);
        self.send(&mut c, &self.request("GET", &path, ""), 1)
            .map_err(|e| format!("send: {e}"))?;
        let take = rng.usize(1..1 << 20);
        let mut seen_head = false;
        loop {
            if let Ok(Some(h)) = parse_head(&c.buf) {
                if !seen_head {
                    seen_head = true;
                    self.tally.status(h.status);
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
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        let path = format!("/{DIR}/{}", LARGE.0);
        self.send(&mut c, &self.request("GET", &path, ""), 1)
            .map_err(|e| format!("send: {e}"))?;
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
                    self.tally.status(h.status);
                    if h.status != 200 || c.buf[h.head_len..] != large[..c.buf.len() - h.head_len] {
                        return Err(format!("GET {path}: {} or wrong bytes", h.status));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.tally.slow.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A file being truncated or renamed: 404, the whole file, or a prefix of it and a
    /// close; never other bytes.
    fn mutable(&self, path: &str, full: &[u8]) -> Result<(), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        self.send(
            &mut c,
            &self.request("GET", path, "Connection: close\r\n"),
            1,
        )
        .map_err(|e| format!("send: {e}"))?;
        match c.answer(false) {
            Ok(Some(a)) => {
                self.tally.status(a.status);
                let prefix = a.body.len() <= full.len() && a.body == full[..a.body.len()];
                let zeros = a.body.iter().all(|&b| b == 0);
                match a.status {
                    404 => Ok(()),
                    // Past a cut, page-reference strategies may send zeros (the kernel's
                    // zeroed folio tail); never another file's bytes.
                    200 if prefix || (!a.whole && (zeros || prefix_then_zeros(&a.body, full))) => {
                        Ok(())
                    }
                    s => Err(format!(
                        "GET {path}: {s} with {} bytes not of the file",
                        a.body.len()
                    )),
                }
            }
            Ok(None) => Err(format!("GET {path}: closed before the answer")),
            // A truncation resets the connection (the server's choice when a file
            // shrinks under a send).
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(()),
            Err(e) => Err(format!("GET {path}: {}", e.kind())),
        }
    }

    /// A request written, the client's side half-closed, the answer read to the end.
    fn half_closed(&self, path: &str, want: &[u8]) -> Result<(), String> {
        let mut c = Conn::open(self.target).map_err(|e| format!("connect: {e}"))?;
        self.send(&mut c, &self.request("GET", path, ""), 1)
            .map_err(|e| format!("send: {e}"))?;
        let _ = c.s.shutdown(Shutdown::Write);
        match c.answer(false) {
            Ok(Some(a)) if a.status == 200 && a.whole && a.body == want => {
                self.tally.status(200);
                Ok(())
            }
            Ok(Some(a)) => {
                self.tally.status(a.status);
                Err(format!(
                    "half-closed GET {path}: {} with {} bytes",
                    a.status,
                    a.body.len()
                ))
            }
            Ok(None) => Err(format!("half-closed GET {path}: no answer")),
            Err(e) => Err(format!("half-closed GET {path}: {}", e.kind())),
        }
    }
}

/// `body` is a prefix of `full` up to some point and zeros after it.
fn prefix_then_zeros(body: &[u8], full: &[u8]) -> bool {
    let same = body.iter().zip(full).take_while(|(a, b)| a == b).count();
    body[same..].iter().all(|&b| b == 0)
}
