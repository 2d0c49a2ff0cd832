//! The compression cache (docs/http.md V4, `--compress-cache DIR`): a text file with no
//! precompressed variant beside it is compressed once, off the request path, into a
//! directory of the operator's, and from then on sent from there by the transmit
//! strategy like any file, as lighttpd's `deflate.cache-dir` does.
//!
//! **Names.** A cached variant is named by a SHA-256 digest of what identifies its
//! file's contents (device, inode, size and modification time in nanoseconds) and its
//! coding, with the coding's suffix (`3fa9...c1.gz`). A file edited, replaced or
//! truncated has a new name, so a variant of old contents is never found; nothing in
//! the directory names a path of a site; two workers, two generations after a reload,
//! or the two processes of an upgrade name the same variant alike, and a restart finds
//! what the process before wrote. (A rewrite within one tick of the file clock that
//! keeps the size keeps the name: the open-file cache has the same blind spot for
//! `fstatat`, and inotify closes it there; here the variant stays until evicted.)
//!
//! **The worker.** The first request of an open-file cache entry in a coding the client
//! takes opens that name in the directory (one `open`, per entry and coding, not per
//! request). Missing, it hands a job to the compressor and answers with the identity
//! file, as it does every request until the variant is written; written, it opens it
//! once and keeps it with the entry (see [`crate::files::FileCache::compressed`]). From
//! then on an answer costs what a precompressed variant's does: no system call, no
//! lock, nothing compressed on a worker.
//!
//! **The compressor.** One thread for the process at nice 10 (it takes the CPU time the
//! workers leave, never theirs), fed by a channel. It reads the file through the
//! worker's open descriptor (a rename over the path changes nothing), checks afterwards
//! that the file is as it was named, writes the variant under a hidden temporary name,
//! `fsync`s it and renames it into place, so a reader sees it whole or not at all, even
//! after a crash; the modification time is the file's, so `Last-Modified` agrees across
//! codings. A variant that saves under 10% is not written, and remembered so (in
//! memory) so it is not tried again. Then variants are deleted, least recently used
//! first, until the directory is within `--compress-cache-size`; a worker holding one
//! open sends it on to its end. Each job is asked once however many workers want it.
//! At a stop the compressor gives up the job it is on (a brotli run on a large file can
//! take seconds) and leaves no temporary file.
//!
//! What is not built: compression levels of one's own (the cache uses `linerate
//! compress`'s, the highest), and a limit shared by the two processes of an upgrade
//! (each counts what it wrote and what it found at its start, so the directory can
//! exceed the size by what the other wrote until the next start).

/// The compression cache's keys: rows of the settings table (`settings!` in
/// settings.rs, which says what a row holds), kept here beside what they drive;
/// `--help` shows them under their own heading.
macro_rules! compress_cache_keys {
    ($($table:tt)*) => {
        settings! {
            @join [
            /// Compress text files that have no precompressed variant beside them into DIR,
            /// once, on a helper thread, the first time a client takes a coding of them, and
            /// send them from there from then on (the identity file goes out until the variant
            /// is written); created mode 0700 if missing. Only codings of `precompressed` are
            /// made [default: none].
            #[arg(long, help_heading = "Compression cache", value_name = "DIR")]
            pub compress_cache: Option<PathBuf>
                => Option<PathBuf> = None, |p| Some(p),
            /// Most bytes the compress-cache directory holds; past it the least recently used
            /// variants are deleted, and files above an eighth of it are not compressed
            /// [default: 256M].
            #[arg(long, help_heading = "Compression cache", value_name = "BYTES")]
            pub compress_cache_size: Option<Bytes<1, { i64::MAX as u64 }>>
                => u64 = 256 << 20, |b| b.0,
            ]
            $($table)*
        }
    };
}

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use linerate_http::coding::Coding;
use linerate_sys::fs::FileMeta;

use crate::compress::{encode, Options};

/// Files smaller than this are not compressed: the coding's header and the `Vary`
/// cost more than they save (h5bp's and Caddy's threshold; nginx's `gzip_min_length`
/// is 20).
pub(crate) const MIN_SIZE: u64 = 256;

/// The counters of the cache, for the whole process (every generation's store counts
/// here).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Variants written, not written because they saved too little, and failed.
    pub written: AtomicU64,
    pub not_smaller: AtomicU64,
    pub failed: AtomicU64,
    /// Bytes read from files and written as variants.
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Variants deleted to stay within the size.
    pub evicted: AtomicU64,
    /// Bytes the directory holds now, as counted (a gauge).
    pub bytes_held: AtomicU64,
    /// Jobs waiting or running.
    pub queued: AtomicU64,
}

/// What became of a job, as a worker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Pending,
    Written,
    /// Not worth writing, the file changed under it, or an error: the identity body
    /// goes out for this entry.
    NotWritten,
}

/// A job's outcome, shared by the workers that asked for it and the compressor.
#[derive(Debug, Default)]
pub(crate) struct Ticket(AtomicU8);

impl Ticket {
    pub fn state(&self) -> State {
        match self.0.load(Ordering::Acquire) {
            0 => State::Pending,
            1 => State::Written,
            _ => State::NotWritten,
        }
    }

    fn set(&self, s: State) {
        let v = match s {
            State::Pending => 0,
            State::Written => 1,
            State::NotWritten => 2,
        };
        self.0.store(v, Ordering::Release);
    }
}

struct Job {
    store: Arc<Store>,
    name: String,
    file: Arc<File>,
    meta: FileMeta,
    coding: Coding,
    ticket: Arc<Ticket>,
}

/// The compressor thread's queue, started once per process.
pub(crate) struct Compressor {
    jobs: Sender<Job>,
    stop: Arc<AtomicBool>,
    pub counters: Arc<Counters>,
}

impl Compressor {
    /// Starts the thread in `scope`; it ends when every store (and this) is gone.
    pub fn start<'scope>(scope: &'scope std::thread::Scope<'scope, '_>) -> Compressor {
        let (tx, rx) = mpsc::channel::<Job>();
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let s = Arc::clone(&stop);
        scope.spawn(move || compressor(&rx, &s));
        Compressor {
            jobs: tx,
            stop,
            counters,
        }
    }

    /// The process is stopping: the job under way is given up, and those queued.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What a worker finds under a name.
pub(crate) enum Found {
    /// The variant, open, and its mark of use (see [`Used`]).
    File(File, Used),
    /// Tried already in this process, and not worth writing.
    NotSmaller,
    Missing,
}

/// A variant's mark of use: a worker that sends it sets it (a load first, so a mark
/// already set costs no write to a shared line); eviction takes the marks as uses now
/// and clears them (the CLOCK approximation of least recently used: no clock read and
/// no lock per answer).
#[derive(Clone, Debug, Default)]
pub(crate) struct Used(Arc<AtomicBool>);

impl Used {
    /// The variant was sent.
    pub fn mark(&self) {
        if !self.0.load(Ordering::Relaxed) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// An entry of the in-memory index: size, last use (nanoseconds since the epoch) and
/// its mark.
struct Indexed {
    size: u64,
    used: u64,
    mark: Used,
}

impl Indexed {
    fn new(size: u64, used: u64) -> Indexed {
        Indexed {
            size,
            used,
            mark: Used::default(),
        }
    }
}

#[derive(Default)]
struct Index {
    files: HashMap<String, Indexed>,
    total: u64,
    /// Jobs in flight by name, so each is asked once.
    pending: HashMap<String, Arc<Ticket>>,
    /// Names tried and not worth writing (bounded: emptied when full).
    not_smaller: HashSet<String>,
}

const NOT_SMALLER_KEPT: usize = 100_000;

/// Jobs waiting at most: each holds its file's descriptor.
const MAX_QUEUED: u64 = 256;

/// One cache directory, shared by a generation's workers (and the next generation's,
/// when a reload keeps the directory).
pub(crate) struct Store {
    dir: PathBuf,
    limit: AtomicU64,
    index: Mutex<Index>,
    jobs: Sender<Job>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A cached variant's name: see the module's text.
pub(crate) fn name(meta: &FileMeta, coding: Coding) -> String {
    let mut key = Vec::with_capacity(64);
    key.extend_from_slice(b"linerate compress-cache 1\0");
    key.extend_from_slice(&meta.dev.to_le_bytes());
    key.extend_from_slice(&meta.ino.to_le_bytes());
    key.extend_from_slice(&meta.size.to_le_bytes());
    key.extend_from_slice(&meta.mtime_ns.to_le_bytes());
    key.extend_from_slice(coding.token().as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &key);
    let mut s = String::with_capacity(48);
    for b in &digest.as_ref()[..20] {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
    }
    s.push_str(coding.suffix());
    s
}

/// A name this module writes (the digest's 40 hex digits and a coding's suffix).
fn is_variant_name(n: &str) -> bool {
    let Some((hex, suffix)) = n.split_once('.') else {
        return false;
    };
    hex.len() == 40
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && Coding::ALL.iter().any(|c| c.suffix()[1..] == *suffix)
}

const TEMPORARY: &str = ".tmp-";

/// Whether the process that names a temporary file (`.tmp-...-PID`) runs, other than
/// this one.
fn writer_alive(temporary: &str) -> bool {
    let pid = temporary
        .rsplit('-')
        .next()
        .and_then(|p| p.parse::<u32>().ok());
    pid.is_some_and(|p| p != std::process::id() && Path::new(&format!("/proc/{p}")).exists())
}

/// Creates `dir` (mode 0700, owned by `owner` when given); missing directories above
/// it are made as `mkdir -p` makes them, so the user can reach it.
pub(crate) fn make(dir: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    fs::DirBuilder::new().mode(0o700).create(dir)?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))?;
    }
    Ok(())
}

/// Makes `dir` the cache's and the server's alone: created (mode 0700, owned by
/// `owner`, root starting for `--user`) if it is missing. One that exists is taken
/// only if it is a directory itself (not a symbolic link to one) holding nothing but
/// what the cache writes: then given to `owner` and tightened to 0700 through its own
/// descriptor. See [`refusal`] for what is refused.
pub(crate) fn prepare(dir: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    if !dir.exists() && fs::symlink_metadata(dir).is_err() {
        return make(dir, owner);
    }
    let uid = owner.map_or_else(linerate_sys::ns::effective_uid, |o| o.0);
    if let Some(why) = refusal(dir, uid, owner.is_some()) {
        return Err(io::Error::other(why));
    }
    let d = linerate_sys::fs::open_directory_no_follow(dir)?;
    let m = d.metadata()?;
    if let Some((uid, gid)) = owner.filter(|&(u, g)| (m.uid(), m.gid()) != (u, g)) {
        std::os::unix::fs::fchown(&d, Some(uid), Some(gid))?;
    }
    if m.mode() & 0o7777 != 0o700 {
        d.set_permissions(fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Why the existing `dir` cannot be the cache of a server running as `uid` (`take`:
/// root starts it and may give the directory to that user), or None: a symbolic link
/// (the directory must be named itself), not a directory, one holding other files than
/// the cache's (a typo such as `/var/cache` must not be taken over), or one of another
/// user that its group or others may write, or that cannot be given to `uid`.
pub(crate) fn refusal(dir: &Path, uid: u32, take: bool) -> Option<String> {
    let m = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return Some(e.to_string()),
    };
    if m.file_type().is_symlink() {
        return Some("a symbolic link: name the directory itself".into());
    }
    if !m.is_dir() {
        return Some("not a directory".into());
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        // Not readable here (another user's): judged by its owner and mode below.
        Err(_) => return others_may_write(&m, uid),
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !is_variant_name(&name) && !name.starts_with(TEMPORARY) {
            return Some(format!(
                "it holds {name}, which the cache did not write: name a directory of its own"
            ));
        }
    }
    if m.uid() != uid {
        // Files planted before it became the server's would stay: refused even when
        // root could give it to the user.
        if let Some(why) = others_may_write(&m, uid) {
            return Some(why);
        }
        if !take {
            return Some(format!(
                "owned by uid {}, not the server's user (uid {uid}): chown it to that user",
                m.uid()
            ));
        }
    }
    None
}

/// Why a directory (`m`) that user `uid` would not own is refused: its group or others
/// may write it. None if they may not, or if it is `uid`'s (the start tightens it).
pub(crate) fn others_may_write(m: &fs::Metadata, uid: u32) -> Option<String> {
    let mode = m.mode() & 0o7777;
    (m.uid() != uid && mode & 0o022 != 0).then(|| {
        format!(
            "others may write it (mode {mode:04o}, owner uid {}): it must be the server's user's alone (chown it to that user, chmod 0700)",
            m.uid()
        )
    })
}

impl Store {
    /// Opens the directory `dir` (made by [`prepare`]) holding at most `limit` bytes:
    /// temporary files a stop or a crash left are deleted, and the variants there are
    /// counted, the oldest written first to go.
    pub fn open(dir: &Path, limit: u64, compressor: &Compressor) -> io::Result<Arc<Store>> {
        let mut index = Index::default();
        for e in fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(TEMPORARY) {
                // Left by a process that is gone; another's (the other process of an
                // upgrade) is being written.
                if !writer_alive(name) {
                    let _ = fs::remove_file(e.path());
                }
                continue;
            }
            if !is_variant_name(name) {
                continue;
            }
            // Gone since the listing (the other process of an upgrade evicted it).
            let Ok(m) = e.metadata() else { continue };
            if !m.is_file() {
                continue;
            }
            // The change time is the rename's: when it was written.
            let written = (m.ctime().max(0) as u64) * 1_000_000_000 + m.ctime_nsec() as u64;
            index
                .files
                .insert(name.to_string(), Indexed::new(m.len(), written));
            index.total += m.len();
        }
        // Probe that the directory takes files (a read-only mount, another owner).
        let probe = dir.join(format!("{TEMPORARY}probe-{}", std::process::id()));
        File::create(&probe)?;
        fs::remove_file(&probe)?;
        let store = Arc::new(Store {
            dir: dir.to_path_buf(),
            limit: AtomicU64::new(limit),
            index: Mutex::new(index),
            jobs: compressor.jobs.clone(),
            stop: Arc::clone(&compressor.stop),
            counters: Arc::clone(&compressor.counters),
        });
        store.evict(None);
        Ok(store)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A reload kept the directory and changed its size (a smaller one applies now).
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
        self.evict(None);
    }

    fn index(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The largest file the cache compresses: an eighth of its size, so one file never
    /// pushes out most of the others.
    pub fn largest(&self) -> u64 {
        self.limit.load(Ordering::Relaxed) / 8
    }

    /// Looks for `name` (a worker, once per entry and coding).
    pub fn find(&self, name: &str) -> Found {
        // A link is never followed and only a regular file is a variant: a name
        // planted in the directory cannot send a file from elsewhere.
        match linerate_sys::fs::open_regular_no_follow(&self.dir.join(name)) {
            Ok(f) => {
                let mut ix = self.index();
                let used = now_ns();
                let size = f.metadata().map_or(0, |m| m.len());
                let ix = &mut *ix;
                let e = ix.files.entry(name.to_string()).or_insert_with(|| {
                    // Written by the other process of an upgrade.
                    ix.total += size;
                    Indexed::new(size, used)
                });
                e.used = used;
                Found::File(f, e.mark.clone())
            }
            Err(_) if self.index().not_smaller.contains(name) => Found::NotSmaller,
            Err(_) => Found::Missing,
        }
    }

    /// Asks the compressor for `name`, the variant of `file` (as `meta` says it is) in
    /// `coding`, unless it is asked already: the ticket says when it is written.
    pub fn ask(
        self: &Arc<Self>,
        name: &str,
        file: &Arc<File>,
        meta: FileMeta,
        coding: Coding,
    ) -> Arc<Ticket> {
        let mut ix = self.index();
        if let Some(t) = ix.pending.get(name) {
            return Arc::clone(t);
        }
        let ticket = Arc::new(Ticket::default());
        if self.stop.load(Ordering::Relaxed) {
            ticket.set(State::NotWritten);
            return ticket;
        }
        // Bounded: each job holds its file open. Past it the file is asked again by
        // a later entry (the ticket says not written, for this one).
        if self.counters.queued.load(Ordering::Relaxed) >= MAX_QUEUED {
            ticket.set(State::NotWritten);
            return ticket;
        }
        let job = Job {
            store: Arc::clone(self),
            name: name.to_string(),
            file: Arc::clone(file),
            meta,
            coding,
            ticket: Arc::clone(&ticket),
        };
        if self.jobs.send(job).is_err() {
            ticket.set(State::NotWritten);
            return ticket;
        }
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        ix.pending.insert(name.to_string(), Arc::clone(&ticket));
        ticket
    }

    /// Deletes the least recently used variants until the directory is within its size,
    /// never `written` (the variant just written, not yet sent: every other may have
    /// been sent since the last eviction, and so count as used later).
    fn evict(&self, written: Option<&str>) {
        let limit = self.limit.load(Ordering::Relaxed);
        let mut ix = self.index();
        if ix.total > limit {
            let now = now_ns();
            for e in ix.files.values_mut() {
                if e.mark.take() {
                    e.used = now;
                }
            }
        }
        while ix.total > limit {
            let Some(oldest) = ix
                .files
                .iter()
                .filter(|(n, _)| Some(n.as_str()) != written)
                .min_by_key(|(_, e)| e.used)
                .map(|(n, _)| n.clone())
            else {
                break;
            };
            let size = ix.files.remove(&oldest).map_or(0, |e| e.size);
            ix.total -= size;
            match fs::remove_file(self.dir.join(&oldest)) {
                Ok(()) => {
                    self.counters.evicted.fetch_add(1, Ordering::Relaxed);
                }
                // Gone already (the other process of an upgrade evicted it).
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(
                    "compress-cache: deleting {}: {e}",
                    self.dir.join(&oldest).display()
                ),
            }
        }
        self.counters.bytes_held.store(ix.total, Ordering::Relaxed);
    }

    /// The job is done: `written` bytes in the directory under its name, or none.
    fn done(&self, job: &Job, outcome: &io::Result<Option<u64>>) {
        {
            let mut ix = self.index();
            ix.pending.remove(&job.name);
            match outcome {
                Ok(Some(n)) => {
                    let old = ix
                        .files
                        .insert(job.name.clone(), Indexed::new(*n, now_ns()));
                    ix.total += n;
                    ix.total -= old.map_or(0, |o| o.size);
                }
                Ok(None) => {
                    if ix.not_smaller.len() >= NOT_SMALLER_KEPT {
                        ix.not_smaller.clear();
                    }
                    ix.not_smaller.insert(job.name.clone());
                }
                Err(_) => {}
            }
        }
        let c = &self.counters;
        c.queued.fetch_sub(1, Ordering::Relaxed);
        match outcome {
            Ok(Some(n)) => {
                c.written.fetch_add(1, Ordering::Relaxed);
                c.bytes_in.fetch_add(job.meta.size, Ordering::Relaxed);
                c.bytes_out.fetch_add(*n, Ordering::Relaxed);
                self.evict(Some(&job.name));
            }
            Ok(None) => {
                c.not_smaller.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        job.ticket.set(if matches!(outcome, Ok(Some(_))) {
            State::Written
        } else {
            State::NotWritten
        });
    }
}

fn compressor(rx: &Receiver<Job>, stop: &AtomicBool) {
    // Best effort: at the priority of the workers it would only compete with them.
    if let Err(e) = linerate_sys::cpu::lower_thread_priority(10) {
        tracing::debug!("compress-cache: cannot lower the compressor's priority: {e}");
    }
    let opts = Options::default();
    while let Ok(job) = rx.recv() {
        let outcome = if stop.load(Ordering::Relaxed) {
            Err(io::Error::other("stopping"))
        } else {
            write(&job, &opts, stop)
        };
        if let Err(e) = &outcome {
            if !stop.load(Ordering::Relaxed) {
                tracing::warn!(
                    "compress-cache: {} of a {}-byte file (inode {}): {e}",
                    job.coding,
                    job.meta.size,
                    job.meta.ino
                );
            }
        }
        job.store.done(&job, &outcome);
    }
}

/// Reads the file, stopping early when the process stops.
struct Input<'a> {
    file: &'a File,
    at: u64,
    end: u64,
    stop: &'a AtomicBool,
}

impl Read for Input<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("stopping"));
        }
        let want = (self.end - self.at).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Writes `job`'s variant: `Some(bytes)` written, `None` not worth it.
fn write(job: &Job, opts: &Options, stop: &AtomicBool) -> io::Result<Option<u64>> {
    let dir = &job.store.dir;
    // Changed while the job waited: its name is of contents gone.
    let now = linerate_sys::fs::stat_fd(std::os::fd::AsFd::as_fd(&*job.file))?;
    if (now.size, now.mtime_ns) != (job.meta.size, job.meta.mtime_ns) {
        return Err(io::Error::other(
            "the file changed before it was compressed",
        ));
    }
    let tmp = dir.join(format!("{TEMPORARY}{}-{}", job.name, std::process::id()));
    let result = (|| -> io::Result<Option<u64>> {
        let out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut input = Input {
            file: &job.file,
            at: 0,
            end: job.meta.size,
            stop,
        };
        let out = encode(
            job.coding,
            &mut input,
            io::BufWriter::with_capacity(1 << 16, out),
            opts,
            job.meta.size,
        )?;
        let mut out = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        out.flush()?;
        // The file as it was named, all of it read: else the name would lie.
        let now = linerate_sys::fs::stat_fd(std::os::fd::AsFd::as_fd(&*job.file))?;
        if (now.size, now.mtime_ns) != (job.meta.size, job.meta.mtime_ns) || input.at != now.size {
            return Err(io::Error::other("the file changed while it was compressed"));
        }
        let n = out.metadata()?.len();
        if (n as f64) > (job.meta.size as f64) * (1.0 - opts.min_saving) {
            return Ok(None);
        }
        let mtime = UNIX_EPOCH
            + std::time::Duration::from_nanos(job.meta.mtime_ns.clamp(0, u64::MAX as i128) as u64);
        out.set_modified(mtime)?;
        out.sync_all()?;
        fs::rename(&tmp, dir.join(&job.name))?;
        Ok(Some(n))
    })();
    if !matches!(result, Ok(Some(_))) {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn meta_of(f: &File) -> FileMeta {
        linerate_sys::fs::stat_fd(std::os::fd::AsFd::as_fd(f)).unwrap()
    }

    fn wait(t: &Ticket) -> State {
        let until = Instant::now() + Duration::from_secs(20);
        while t.state() == State::Pending && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        t.state()
    }

    #[test]
    fn names_are_the_contents_identity_and_coding() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.js");
        fs::write(&p, "x".repeat(1000)).unwrap();
        let m = meta_of(&File::open(&p).unwrap());
        let gz = name(&m, Coding::Gzip);
        assert!(is_variant_name(&gz), "{gz}");
        assert!(gz.ends_with(".gz") && gz.len() == 43, "{gz}");
        assert_eq!(gz, name(&m, Coding::Gzip), "the same each time");
        assert_ne!(gz, name(&m, Coding::Br));
        let edited = FileMeta {
            mtime_ns: m.mtime_ns + 1,
            ..m
        };
        assert_ne!(gz, name(&edited, Coding::Gzip));
        assert!(!is_variant_name("notes.txt") && !is_variant_name(&format!("{gz}x")));
    }

    #[test]
    fn a_variant_is_written_once_whole_and_evicted_least_recently_used_first() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        prepare(&cache, None).unwrap();
        std::thread::scope(|s| {
            let c = Compressor::start(s);
            let store = Store::open(&cache, 1 << 20, &c).unwrap();
            let mut names = Vec::new();
            for i in 0..3 {
                let p = d.path().join(format!("{i}.css"));
                let text = format!("body {{ margin: {i}px }}\n").repeat(4000);
                fs::write(&p, &text).unwrap();
                let f = Arc::new(File::open(&p).unwrap());
                let m = meta_of(&f);
                let n = name(&m, Coding::Gzip);
                assert!(matches!(store.find(&n), Found::Missing));
                let t = store.ask(&n, &f, m, Coding::Gzip);
                // A second ask while pending shares the job.
                let t2 = store.ask(&n, &f, m, Coding::Gzip);
                assert!(Arc::ptr_eq(&t, &t2) || t2.state() == State::Written);
                assert_eq!(wait(&t), State::Written);
                let Found::File(mut v, _) = store.find(&n) else {
                    panic!("written")
                };
                let mut z = Vec::new();
                v.read_to_end(&mut z).unwrap();
                let mut out = String::new();
                flate2::read::GzDecoder::new(&z[..])
                    .read_to_string(&mut out)
                    .unwrap();
                assert_eq!(out, text);
                assert_eq!(
                    v.metadata().unwrap().modified().unwrap(),
                    fs::metadata(&p).unwrap().modified().unwrap(),
                    "Last-Modified agrees with the file's"
                );
                names.push((n, z.len() as u64));
            }
            assert_eq!(c.counters.written.load(Ordering::Relaxed), 3);
            // Opened again: 0 is now the most recent, 1 the least; but a worker sends 1
            // (its mark), so 2 is the least recently used.
            assert!(matches!(store.find(&names[0].0), Found::File(..)));
            let Found::File(_, used) = store.find(&names[1].0) else {
                panic!("there")
            };
            assert!(matches!(store.find(&names[0].0), Found::File(..)));
            used.mark();
            // Room for two of them: the least recently used goes, at once.
            store.set_limit(names[0].1 + names[1].1 + 1);
            assert!(matches!(store.find(&names[2].0), Found::Missing));
            assert!(matches!(store.find(&names[1].0), Found::File(..)));
            assert!(matches!(store.find(&names[0].0), Found::File(..)));
            assert_eq!(c.counters.evicted.load(Ordering::Relaxed), 1);
            // Nothing else is in the directory.
            let left: Vec<String> = fs::read_dir(&cache)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(left.len(), 2, "{left:?}");
            drop(store);
        });
    }

    #[test]
    fn incompressible_or_changed_files_write_nothing_and_a_start_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        fs::create_dir(&cache).unwrap();
        fs::write(cache.join(format!("{TEMPORARY}left-by-a-crash")), b"x").unwrap();
        // The init process stands for a live writer (the other process of an upgrade).
        fs::write(cache.join(format!("{TEMPORARY}being-written-1")), b"x").unwrap();
        fs::write(cache.join("README"), b"not ours").unwrap();
        std::thread::scope(|s| {
            let c = Compressor::start(s);
            let store = Store::open(&cache, 1 << 20, &c).unwrap();
            let noise = crate::compress::tests::noise(20_000);
            let p = d.path().join("noise.txt");
            fs::write(&p, &noise).unwrap();
            let f = Arc::new(File::open(&p).unwrap());
            let m = meta_of(&f);
            let n = name(&m, Coding::Gzip);
            assert_eq!(wait(&store.ask(&n, &f, m, Coding::Gzip)), State::NotWritten);
            assert!(matches!(store.find(&n), Found::NotSmaller));
            // Named for contents it no longer has.
            let q = d.path().join("b.html");
            fs::write(&q, "<p>hello</p>".repeat(1000)).unwrap();
            let g = Arc::new(File::open(&q).unwrap());
            let old = FileMeta {
                mtime_ns: meta_of(&g).mtime_ns - 1_000_000_000,
                ..meta_of(&g)
            };
            let n2 = name(&old, Coding::Gzip);
            assert_eq!(
                wait(&store.ask(&n2, &g, old, Coding::Gzip)),
                State::NotWritten
            );
            assert_eq!(c.counters.failed.load(Ordering::Relaxed), 1);
            let mut left: Vec<String> = fs::read_dir(&cache)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            left.sort();
            assert_eq!(
                left,
                [".tmp-being-written-1", "README"],
                "no temporary file of its own or a dead one, nothing written"
            );
            drop(store);
        });
    }
}
