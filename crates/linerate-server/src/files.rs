//! The per-worker open-file cache (seed 003's mapping recycling, for descriptors).
//!
//! A lookup checks its path with one `fstatat`: when device, inode, size and mtime still
//! match the cached entry, the cached descriptor (opened with `openat2` beneath the root)
//! and, for small files, the cached contents are used; otherwise the file is opened
//! again. So a rewritten, replaced or deleted file is never served stale, and a hit saves
//! the open, fstat and close of an uncached server.
//!
//! Even that `fstatat` is skipped for a path known current. A path is known current
//! when inotify watches every directory on it, from the root down, and the file's inode,
//! and no event has come since a lookup found the entry matching. The path must contain
//! no symbolic link, since a link's target directory is not watched. The inotify
//! descriptor is in the worker's event loop ([`FileCache::notify_fd`]), and the loop
//! hands its readiness to [`FileCache::changed`] before the connections of the same
//! turn: so a lookup costs no system call at all in steady state. A change finished
//! before the worker's wait returned is seen by every request it then answers; one
//! that lands while the worker is busy in a turn is seen from the next turn on (the
//! window is a loop turn, microseconds under load, where nginx's
//! `open_file_cache_valid` allows 60 s). Any event empties the cache, so paths are
//! opened, checked and watched again: that also catches a same-size rewrite within one
//! tick of the file clock, which leaves size and mtime as they were. Events are rare on
//! a static site (a file under the root written all the time would cost the cache its
//! hits); without inotify (no instance, or out of watches) every lookup takes the
//! `fstatat`.
//!
//! With the residency probe on (see [`crate::disk`]), a small file's contents are read
//! with `RWF_NOWAIT`: if they are not all in the page cache the entry is made without
//! them (the response then goes out as a file range, through the probe and a helper),
//! and a later lookup tries again.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

/// The maps' hasher: a request's path is hashed twice per answer (known current, then
/// its entry), and SipHash took 3% of a core at 1 KiB; foldhash is several times
/// faster on short keys and still seeded at random per map, so a client cannot choose
/// paths that collide without knowing the seed (and every map here is bounded).
type Hasher = foldhash::fast::RandomState;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use linerate_http::coding::Coding;
use linerate_http::conditional::Validators;
use linerate_sys::fs::{open_beneath, open_beneath_no_symlinks, stat_at, stat_fd, FileMeta};
use linerate_sys::notify::{self, Inotify};

use crate::config::EtagMode;
use crate::listing::ListEntry;
use crate::logs::{more, RateLimit};
use crate::stats::Stats;

/// A cached open file.
pub(crate) struct Entry {
    pub file: Arc<File>,
    pub meta: FileMeta,
    /// From size and modification time (`etag = "mtime"`).
    pub validators: Validators,
    /// `Last-Modified` alone (`etag = "off"`, or a digest not computed yet).
    pub dated: Validators,
    /// From its bytes' digest (`etag = "content"`), once computed (see
    /// [`FileCache::validators`]).
    by_content: std::cell::OnceCell<Validators>,
    /// `Last-Modified`, formatted once per opened file.
    pub last_modified: String,
    /// Where beneath the root it really is, when a symbolic link on the way made that
    /// another path than the one it was asked by (docs/http.md W11): the rules of both
    /// apply.
    pub real: Option<Box<[u8]>>,
    pub content_type: std::borrow::Cow<'static, str>,
    /// Its type gains by compression: precompressed variants are looked for.
    pub compressible: bool,
    /// Its precompressed variants, once looked for (see [`FileCache::variants`]).
    variants: RefCell<Option<Variants>>,
    /// Its variants in the compression cache, by coding (see [`FileCache::compressed`]).
    made: RefCell<[Made; 3]>,
    /// The whole contents, for files up to the small-file size: see [`Small`].
    pub small: RefCell<Small>,
    /// What the residency probe found of the whole file, epoch by epoch (see
    /// [`crate::disk`]), shared with its responses in flight.
    pub whole: Arc<crate::disk::Whole>,
    /// The fields of a whole answer of it, as the type they were written with: the
    /// same in every such answer, so written once.
    pub kept: linerate_http::answer::KeptFields,
}

/// A directory's entries, and where it really is if a link made that another path.
pub(crate) type Listed = (Vec<ListEntry>, Option<Box<[u8]>>);

/// The precompressed variants of a file that exist and are not older than it.
#[derive(Clone)]
pub(crate) struct Variants {
    pub found: Rc<[(Coding, Rc<Entry>)]>,
    /// Every variant found was known current when looked for, so the list holds until
    /// a change notification (which makes a new entry for the file, without it).
    trusted: bool,
}

/// A file's variant in one coding in the compression cache, as its entry knows it.
#[derive(Clone, Default)]
enum Made {
    /// Not looked for yet.
    #[default]
    Unknown,
    /// Asked of the compressor.
    Waiting(Arc<crate::compress_cache::Ticket>),
    /// Written, and open; its mark of use.
    Ready(Rc<Entry>, crate::compress_cache::Used),
    /// Not written (it would save too little, or it failed): the identity body goes.
    No,
}

/// What [`FileCache::compressed`] found.
pub(crate) enum Compressed {
    /// A variant the client takes.
    Variant(Coding, Rc<Entry>),
    /// The one the client takes best is being written: the identity body goes for now.
    Waiting,
    /// None, and none coming.
    None,
}

/// What a cache entry holds of its file's contents.
#[derive(Clone, Debug, Default)]
pub(crate) enum Small {
    /// Not read: a file above the small-file size, or not tried yet.
    #[default]
    Unread,
    /// The whole contents.
    Held(Arc<[u8]>),
    /// Reading them would have waited for the disk (`RWF_NOWAIT`): the file goes to the
    /// helpers, and a later lookup tries again.
    NotResident,
    /// Given up to keep the worker within `--small-file-memory`: the file goes out as a
    /// file range until the cache starts over.
    Evicted,
}

impl Entry {
    fn new(file: File, fm: FileMeta, content_type: std::borrow::Cow<'static, str>) -> Entry {
        let mtime =
            UNIX_EPOCH + Duration::from_nanos(fm.mtime_ns.clamp(0, u64::MAX as i128) as u64);
        let validators = Validators::new(fm.size, mtime);
        Entry {
            last_modified: validators.last_modified_http(),
            validators,
            dated: Validators::dated(mtime),
            by_content: std::cell::OnceCell::new(),
            real: None,
            compressible: linerate_http::mime::compressible(&content_type),
            content_type,
            variants: RefCell::new(None),
            made: RefCell::default(),
            meta: fm,
            file: Arc::new(file),
            small: RefCell::new(Small::Unread),
            whole: crate::disk::Whole::new(fm.size),
            kept: Default::default(),
        }
    }

    /// The contents, if held.
    pub fn contents(&self) -> Option<Arc<[u8]>> {
        match &*self.small.borrow() {
            Small::Held(b) => Some(Arc::clone(b)),
            _ => None,
        }
    }

    /// Reading the contents just now would have waited for the disk.
    pub fn not_resident(&self) -> bool {
        matches!(*self.small.borrow(), Small::NotResident)
    }

    fn held_bytes(&self) -> u64 {
        match &*self.small.borrow() {
            Small::Held(b) => b.len() as u64,
            _ => 0,
        }
    }
}

pub(crate) enum Found {
    File(Rc<Entry>),
    Dir,
    Missing,
    /// The permission bits refuse the server (403).
    Forbidden,
    /// Out of descriptors even after the cache emptied itself (503).
    Unavailable,
}

/// The path the kernel gives an open descriptor (`/proc/self/fd/N`), if it says.
fn real_path(fd: BorrowedFd<'_>) -> Option<Vec<u8>> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .map(|p| p.into_os_string().into_vec())
}

/// Why an open failed, as the response sees it.
fn refusal(e: &std::io::Error) -> Found {
    if linerate_sys::fs::is_permission_denied(e) {
        Found::Forbidden
    } else if linerate_sys::fs::is_out_of_descriptors(e) {
        Found::Unavailable
    } else {
        Found::Missing
    }
}

pub(crate) struct FileCache {
    root: OwnedFd,
    /// The root as configured, for the error log's lines.
    root_path: std::path::PathBuf,
    /// The root's own path as the kernel resolves it, for [`Entry::real`] (None where
    /// `/proc` does not say).
    root_real: Option<Vec<u8>>,
    entries: HashMap<Vec<u8>, Rc<Entry>, Hasher>,
    max_entries: usize,
    small_bytes: u64,
    /// Most bytes of small-file contents held (`--small-file-memory`), and those held.
    small_budget: u64,
    small_held: u64,
    /// Change notification; None if inotify is unavailable.
    notify: Option<Inotify>,
    /// Paths whose entry is known current (see the module's text).
    current: HashSet<Vec<u8>, Hasher>,
    /// Directories (relative to the root; empty for the root) being watched.
    watched: HashSet<Vec<u8>, Hasher>,
    /// The inotify instance was replaced (or given up) since the event loop last took
    /// its descriptor.
    notify_replaced: bool,
    /// Read small files only from the page cache (`RWF_NOWAIT`).
    nowait: bool,
    /// The compression cache (docs/http.md V4), if configured.
    compress: Option<Arc<crate::compress_cache::Store>>,
    /// The process's content digests (docs/http.md F8), if any site asks for them.
    digests: Option<Arc<crate::digest::Digests>>,
    stats: Arc<Stats>,
    /// Error-log lines for running out of descriptors, and for refused permissions.
    out_of_fds_log: RateLimit,
    forbidden_log: RateLimit,
}

impl FileCache {
    pub fn new(
        root: OwnedFd,
        max_entries: usize,
        (small_bytes, small_budget): (u64, u64),
        nowait: bool,
        stats: Arc<Stats>,
    ) -> FileCache {
        let root_real = real_path(root.as_fd());
        FileCache {
            root,
            root_path: std::path::PathBuf::new(),
            root_real,
            entries: HashMap::default(),
            max_entries: max_entries.max(1),
            small_bytes,
            small_budget,
            small_held: 0,
            notify: Inotify::new().ok(),
            current: HashSet::default(),
            watched: HashSet::default(),
            notify_replaced: true,
            nowait,
            compress: None,
            digests: None,
            stats,
            out_of_fds_log: RateLimit::new(Duration::from_secs(1)),
            forbidden_log: RateLimit::new(Duration::from_secs(1)),
        }
    }

    /// The root is `path` (named by the error log's lines).
    pub fn at(mut self, path: &std::path::Path) -> Self {
        self.root_path = path.to_path_buf();
        self
    }

    /// Where beneath the root the file open as `fd`, asked for as `rel`, really is,
    /// if a symbolic link made that another path (one look at `/proc` per opened file).
    fn beneath(&mut self, fd: BorrowedFd<'_>, rel: &[u8]) -> Option<Box<[u8]>> {
        let real = real_path(fd)?;
        let inside = |root: &[u8]| -> Option<Box<[u8]>> {
            let inside = real.strip_prefix(root)?;
            let inside = if root == b"/" {
                inside
            } else {
                inside.strip_prefix(b"/")?
            };
            Some(inside.into())
        };
        let found = match self.root_real.as_deref().and_then(inside) {
            Some(i) => i,
            None => {
                // The root was renamed since (a deploy that swaps directories): its
                // path as it is now.
                self.root_real = real_path(self.root.as_fd());
                self.root_real.as_deref().and_then(inside)?
            }
        };
        (*found != *rel).then_some(found)
    }

    /// Digests for `etag = "content"` come from `digests`.
    pub fn with_digests(mut self, digests: Option<Arc<crate::digest::Digests>>) -> Self {
        self.digests = digests;
        self
    }

    /// `e`'s validators under `mode` (docs/http.md F8): by content once its digest is
    /// computed (asked of the digest thread the first time), `Last-Modified` alone
    /// until then.
    pub fn validators<'e>(&self, e: &'e Entry, mode: EtagMode) -> &'e Validators {
        match mode {
            EtagMode::Mtime => &e.validators,
            EtagMode::Off => &e.dated,
            EtagMode::Content => {
                if let Some(v) = e.by_content.get() {
                    return v;
                }
                let digest = self.digests.as_ref().and_then(|d| d.of(&e.file, &e.meta));
                match digest {
                    Some(d) => e
                        .by_content
                        .get_or_init(|| Validators::of_digest(&d, e.dated.last_modified)),
                    None => &e.dated,
                }
            }
        }
    }

    /// Variants not found beside their files are made in `store`.
    pub fn with_compress_cache(mut self, store: Option<Arc<crate::compress_cache::Store>>) -> Self {
        self.compress = store;
        self
    }

    /// Opens `rel` beneath the root. Out of descriptors (`EMFILE`/`ENFILE`), the cache
    /// gives back every descriptor it holds and tries once more; what still fails is
    /// logged (rate-limited) and counted.
    fn open(&mut self, rel: &[u8]) -> std::io::Result<OwnedFd> {
        let first = match open_beneath(self.root.as_fd(), rel) {
            Err(e) if linerate_sys::fs::is_out_of_descriptors(&e) => e,
            r => return self.note_refusal(rel, r),
        };
        Stats::add(&self.stats.open_out_of_fds, 1);
        let held = self.entries.len();
        // The watches stay (they cost no descriptor; a new inotify instance would).
        self.clear_entries();
        self.current.clear();
        let r = open_beneath(self.root.as_fd(), rel);
        if let Some(n) = self.out_of_fds_log.allow(Instant::now()) {
            let outcome = match &r {
                Ok(_) => "then it opened".to_string(),
                Err(e) => format!("then: {e}; answering 503"),
            };
            tracing::warn!(
                "out of descriptors opening /{} ({first}): emptied the open-file cache ({held} entries), {outcome}{}",
                String::from_utf8_lossy(rel),
                more(n)
            );
        }
        self.note_refusal(rel, r)
    }

    /// Passes `r` on, noting its error if it has one.
    fn note_refusal(
        &mut self,
        rel: &[u8],
        r: std::io::Result<OwnedFd>,
    ) -> std::io::Result<OwnedFd> {
        if let Err(e) = &r {
            self.note_error(rel, e);
        }
        r
    }

    /// Counts and logs (rate-limited) a refused permission, counts a 503.
    fn note_error(&mut self, rel: &[u8], e: &std::io::Error) {
        if linerate_sys::fs::is_permission_denied(e) {
            Stats::add(&self.stats.forbidden, 1);
            if let Some(n) = self.forbidden_log.allow(Instant::now()) {
                tracing::error!(
                    "{}: {e}: answering 403 to /{}{}",
                    self.root_path
                        .join(String::from_utf8_lossy(rel).as_ref())
                        .display(),
                    String::from_utf8_lossy(rel),
                    more(n)
                );
            }
        } else if linerate_sys::fs::is_out_of_descriptors(e) {
            Stats::add(&self.stats.unavailable, 1);
        }
    }

    /// Reads `e`'s contents if it is a small file, has none and may have them: within
    /// the memory budget, making room by evicting the largest contents held first (a
    /// held file saves a system call per response whatever its size, so the large ones
    /// give the least per byte), down to three quarters of the budget so that eviction
    /// is rare. An entry evicted once is not read again until the cache starts over, so
    /// a working set above the budget costs no read per request.
    fn fill(&mut self, e: &Rc<Entry>) {
        let size = e.meta.size;
        if size > self.small_bytes || size > self.small_budget {
            return;
        }
        if matches!(*e.small.borrow(), Small::Held(_) | Small::Evicted) {
            return;
        }
        match read_whole(&e.file, size, self.nowait) {
            Some(b) => {
                if self.small_held + size > self.small_budget {
                    self.make_room(size);
                }
                *e.small.borrow_mut() = Small::Held(b);
                self.small_held += size;
            }
            None if self.nowait => {
                *e.small.borrow_mut() = Small::NotResident;
                Stats::add(&self.stats.small_misses, 1);
            }
            None => {}
        }
        Stats::set(&self.stats.small_bytes_held, self.small_held);
    }

    fn make_room(&mut self, size: u64) {
        let mut held: Vec<(u64, &Rc<Entry>)> = self
            .entries
            .values()
            .map(|e| (e.held_bytes(), e))
            .filter(|(n, _)| *n > 0)
            .collect();
        held.sort_unstable_by_key(|(n, _)| std::cmp::Reverse(*n));
        let target = (self.small_budget / 4 * 3).saturating_sub(size);
        for (n, e) in held {
            if self.small_held <= target {
                break;
            }
            *e.small.borrow_mut() = Small::Evicted;
            self.small_held -= n;
            Stats::add(&self.stats.small_evictions, 1);
        }
    }

    /// Forgets `rel`'s entry.
    fn remove_entry(&mut self, rel: &[u8]) {
        if let Some(e) = self.entries.remove(rel) {
            self.small_held -= e.held_bytes();
        }
    }

    /// Forgets every entry and every watch: descriptors close once no response holds
    /// them.
    pub fn clear(&mut self) {
        self.clear_entries();
        self.forget_watches();
    }

    /// Forgets every entry (their descriptors close once no response holds them).
    fn clear_entries(&mut self) {
        self.entries.clear();
        self.small_held = 0;
        Stats::set(&self.stats.small_bytes_held, 0);
    }

    /// Looks `rel` (relative to the root, no `..`) up.
    pub fn lookup(&mut self, rel: &[u8]) -> Found {
        if self.current.contains(rel) {
            if let Some(e) = self.entries.get(rel) {
                let e = Rc::clone(e);
                self.fill(&e);
                Stats::add(&self.stats.cache_hits, 1);
                return Found::File(e);
            }
        }
        let m = match stat_at(self.root.as_fd(), rel) {
            Ok(m) => m,
            Err(e) => {
                self.remove_entry(rel);
                // A directory on the way that the server may not search: 403.
                if linerate_sys::fs::is_permission_denied(&e) {
                    self.note_error(rel, &e);
                    return Found::Forbidden;
                }
                return Found::Missing;
            }
        };
        if m.is_dir() {
            // Only if it is reachable beneath the root (not through an escaping link).
            return match self.open(rel) {
                Ok(_) => Found::Dir,
                Err(e) => refusal(&e),
            };
        }
        if !m.is_file() {
            return Found::Missing;
        }
        if let Some(e) = self.entries.get(rel) {
            if e.meta == m {
                let e = Rc::clone(e);
                self.fill(&e);
                self.make_current(rel, &m);
                Stats::add(&self.stats.cache_hits, 1);
                return Found::File(e);
            }
        }
        Stats::add(&self.stats.cache_misses, 1);
        let fd = match self.open(rel) {
            Ok(fd) => fd,
            Err(e) => {
                self.remove_entry(rel);
                return refusal(&e);
            }
        };
        let Ok(fm) = stat_fd(fd.as_fd()) else {
            return Found::Missing;
        };
        if !fm.is_file() {
            return Found::Missing;
        }
        let name = String::from_utf8_lossy(rel);
        let content_type = linerate_http::mime::content_type(&name);
        let real = self.beneath(fd.as_fd(), rel);
        let mut e = Entry::new(File::from(fd), fm, content_type);
        e.real = real;
        let e = Rc::new(e);
        self.keep(rel, &e);
        let m = e.meta;
        self.make_current(rel, &m);
        Found::File(e)
    }

    /// Puts `e` in the map under `key`, and reads its contents if small.
    fn keep(&mut self, key: &[u8], e: &Rc<Entry>) {
        if self.entries.len() >= self.max_entries {
            // Bounded: start over rather than track recency on the request path.
            self.clear_entries();
            self.forget_watches();
        }
        self.remove_entry(key);
        self.entries.insert(key.to_vec(), Rc::clone(e));
        // Once in the map, so the budget's accounting sees it.
        self.fill(e);
    }

    /// The variant of `base` in the compression cache the client takes best (`ranked`:
    /// the codings it takes, best first), if written (docs/http.md V4). The first time an entry is asked in a
    /// coding, the variant is looked for in the directory (one `open`) and, missing, asked
    /// of the compressor; from then on the entry remembers it, and an answer costs no
    /// system call. While the client's best coding is being written, another that it
    /// takes and that is written already goes.
    pub fn compressed(&mut self, base: &Rc<Entry>, ranked: &[Coding]) -> Compressed {
        let Some(store) = &self.compress else {
            return Compressed::None;
        };
        let size = base.meta.size;
        if size < crate::compress_cache::MIN_SIZE || size > store.largest() {
            return Compressed::None;
        }
        let Some(&best) = ranked.first() else {
            return Compressed::None;
        };
        // The answer after the first: read in place, no count of a shared reference
        // taken (the mark's is shared by the workers).
        if let Some(v) = ready_variant(base, best) {
            self.fill(&v);
            return Compressed::Variant(best, v);
        }
        let made = self.made(base, best);
        if let Some(v) = ready_variant(base, best) {
            self.fill(&v);
            return Compressed::Variant(best, v);
        }
        let ready = |c: Coding| matches!(base.made.borrow()[c.index()], Made::Ready(..));
        let other = ranked.iter().copied().find(|&c| c != best && ready(c));
        if let Some(v) = other.and_then(|c| ready_variant(base, c).map(|v| (c, v))) {
            return Compressed::Variant(v.0, v.1);
        }
        match made {
            Made::Waiting(_) => Compressed::Waiting,
            _ => Compressed::None,
        }
    }

    /// What `base`'s entry knows of its variant in `coding`, brought up to date.
    fn made(&mut self, base: &Rc<Entry>, coding: Coding) -> Made {
        use crate::compress_cache::{name, Found as Cached, State};
        let i = coding.index();
        let now = base.made.borrow()[i].clone();
        let Some(store) = self.compress.clone() else {
            return Made::No;
        };
        let next = match now {
            Made::Ready(..) | Made::No => return now,
            Made::Waiting(t) => match t.state() {
                State::Pending => return Made::Waiting(t),
                State::NotWritten => Made::No,
                State::Written => match store.find(&name(&base.meta, coding)) {
                    Cached::File(f, used) => self.variant_entry(f, used, base, coding),
                    // Gone already (evicted at once): asked again at the next entry.
                    _ => Made::No,
                },
            },
            Made::Unknown => {
                let n = name(&base.meta, coding);
                match store.find(&n) {
                    Cached::File(f, used) => self.variant_entry(f, used, base, coding),
                    Cached::NotSmaller => Made::No,
                    Cached::Missing => Made::Waiting(store.ask(&n, &base.file, base.meta, coding)),
                }
            }
        };
        base.made.borrow_mut()[i] = next.clone();
        next
    }

    /// The entry of a variant opened in the compression cache, kept in the map (under a
    /// key no path has: it starts with NUL) so its contents count in the budget.
    fn variant_entry(
        &mut self,
        f: File,
        used: crate::compress_cache::Used,
        base: &Entry,
        coding: Coding,
    ) -> Made {
        let Ok(fm) = stat_fd(f.as_fd()) else {
            return Made::No;
        };
        if !fm.is_file() {
            return Made::No;
        }
        let e = Rc::new(Entry::new(f, fm, base.content_type.clone()));
        let mut key = vec![0u8];
        key.extend_from_slice(&base.meta.dev.to_le_bytes());
        key.extend_from_slice(&base.meta.ino.to_le_bytes());
        key.extend_from_slice(coding.suffix().as_bytes());
        self.keep(&key, &e);
        Made::Ready(e, used)
    }

    /// The precompressed variants of `base`, the entry of `rel`, among `codings`:
    /// `REL.br`, `REL.zst`, `REL.gz` that are regular files beneath the root and not
    /// older than `base` (a variant left behind by an edit is never sent). Remembered in
    /// the entry while it and every variant found are known current; looked for again
    /// otherwise (one lookup per coding).
    pub fn variants(&mut self, rel: &[u8], base: &Rc<Entry>, codings: &[Coding]) -> Variants {
        if self.current.contains(rel) {
            let known = base
                .variants
                .borrow()
                .as_ref()
                .filter(|v| v.trusted)
                .cloned();
            if let Some(v) = known {
                // A variant whose contents were not resident when found is read when
                // they are, as its file's are (a look when they are held).
                for (_, e) in v.found.iter() {
                    self.fill(e);
                }
                return v;
            }
        }
        let mut found = Vec::new();
        let mut trusted = true;
        let mut path = rel.to_vec();
        for &c in codings {
            path.truncate(rel.len());
            path.extend_from_slice(c.suffix().as_bytes());
            if let Found::File(v) = self.lookup(&path) {
                // Reached through a link, it must be where its file really is, beside
                // it (docs/http.md W11): a variant never brings another path's bytes.
                let beside = match (&base.real, &v.real) {
                    (None, None) => true,
                    (base_real, Some(real)) => {
                        let at: &[u8] = base_real.as_deref().unwrap_or(rel);
                        real.strip_prefix(at) == Some(c.suffix().as_bytes())
                    }
                    // A file of its own beside the link asked for.
                    (Some(_), None) => true,
                };
                if beside && v.meta.mtime_ns >= base.meta.mtime_ns {
                    trusted &= self.current.contains(&path);
                    found.push((c, v));
                }
            }
        }
        let v = Variants {
            found: found.into(),
            trusted,
        };
        *base.variants.borrow_mut() = Some(v.clone());
        v
    }

    /// Watches `rel`'s directories and inode and, if it still matches `meta` once they
    /// are watched, marks it current.
    fn make_current(&mut self, rel: &[u8], meta: &FileMeta) {
        let Some(n) = &self.notify else { return };
        // Only a path without symbolic links: a link's target directory is not watched.
        if open_beneath_no_symlinks(self.root.as_fd(), rel).is_err() {
            return;
        }
        let base = format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&self.root)
        );
        let at = |sub: &[u8]| {
            let mut p = std::path::PathBuf::from(&base);
            if !sub.is_empty() {
                p.push(std::ffi::OsStr::from_bytes(sub));
            }
            p
        };
        // The root and each directory down to the file.
        let mut ends: Vec<usize> = vec![0];
        ends.extend(
            rel.iter()
                .enumerate()
                .filter(|(_, &b)| b == b'/')
                .map(|(i, _)| i),
        );
        for end in ends {
            let dir = &rel[..end];
            if !self.watched.contains(dir) {
                if n.watch(&at(dir), notify::DIR_CHANGES).is_err() {
                    return;
                }
                self.watched.insert(dir.to_vec());
            }
        }
        if n.watch(&at(rel), notify::FILE_CHANGES).is_err() {
            return;
        }
        // A change made before the watches were in place shows here.
        if stat_at(self.root.as_fd(), rel).is_ok_and(|now| now == *meta) {
            self.current.insert(rel.to_vec());
        }
    }

    /// The inotify descriptor for the event loop to watch, when it is new since the
    /// last call (`Some(None)`: there is none any more); `None` when unchanged.
    pub fn notify_fd(&mut self) -> Option<Option<BorrowedFd<'_>>> {
        if !std::mem::take(&mut self.notify_replaced) {
            return None;
        }
        Some(self.notify.as_ref().map(AsFd::as_fd))
    }

    /// No change notification (the event loop cannot watch it): every lookup takes the
    /// `fstatat`.
    pub fn without_notify(&mut self) {
        self.notify = None;
        self.current.clear();
        self.watched.clear();
    }

    /// The event loop saw the inotify descriptor readable: changes are taken in.
    pub fn changed(&mut self) {
        self.poll_changes();
    }

    /// Reads the change queue. After any event the cache starts over: no path is known
    /// current, no directory counts as watched (one may have been replaced), and no
    /// entry is kept, since a rewrite within one tick of the file clock leaves size and
    /// mtime as they were and only the event tells it apart.
    fn poll_changes(&mut self) {
        let Some(n) = &self.notify else { return };
        match n.drain() {
            Ok(false) => return,
            Ok(true) => {}
            Err(_) => {
                self.notify = None;
                self.notify_replaced = true;
            }
        }
        self.clear_entries();
        self.forget_watches();
    }

    /// No path is known current any more, and the kernel's watches go with the
    /// instance that held them, so they number at most the entries and their
    /// directories: a new instance starts empty.
    fn forget_watches(&mut self) {
        self.current.clear();
        self.watched.clear();
        if self.notify.is_some() {
            self.notify = Inotify::new().ok();
            self.notify_replaced = true;
        }
    }

    /// Names in directory `rel`, sorted, dot-files left out unless `dotfiles`, and where
    /// it really is beneath the root if a link made that another path; or why not
    /// (missing, forbidden, out of descriptors).
    pub fn list(&mut self, rel: &[u8], dotfiles: bool) -> Result<Listed, Found> {
        let fd = self.open(rel).map_err(|e| refusal(&e))?;
        let real = self.beneath(fd.as_fd(), rel);
        // /proc/self/fd gives the opened directory itself, wherever links pointed.
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let mut entries: Vec<ListEntry> = std::fs::read_dir(path)
            .map_err(|e| refusal(&e))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().as_bytes().to_vec();
                // Its own metadata: a link is not followed out of the root.
                let m = e.metadata().ok()?;
                (dotfiles || name.first() != Some(&b'.')).then(|| ListEntry {
                    name,
                    dir: m.is_dir(),
                    size: m.len(),
                    modified: m.modified().unwrap_or(UNIX_EPOCH),
                })
            })
            .collect();
        crate::listing::sort(&mut entries);
        Ok((entries, real))
    }
}

/// The whole contents, or `None` if the file is not `size` bytes any more or, with
/// `nowait`, if reading them would wait for the disk.
fn read_whole(file: &File, size: u64, nowait: bool) -> Option<Arc<[u8]>> {
    read_range(file, 0, size, nowait).map(Into::into)
}

/// `len` bytes of `file` from `offset`, or `None` if the file ends before or, with
/// `nowait`, if reading them would wait for the disk. A file system that cannot say
/// (`RWF_NOWAIT` unsupported: tmpfs, which has no disk to wait for) is read plainly.
pub(crate) fn read_range(file: &File, offset: u64, len: u64, mut nowait: bool) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).ok()?];
    let mut got = 0;
    while got < buf.len() {
        let at = offset + got as u64;
        let r = if nowait {
            linerate_sys::cache::read_at_nowait(file.as_fd(), &mut buf[got..], at)
        } else {
            std::os::unix::fs::FileExt::read_at(file, &mut buf[got..], at)
        };
        match r {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if nowait && e.kind() == std::io::ErrorKind::Unsupported => nowait = false,
            Err(_) => return None,
        }
    }
    Some(buf)
}

/// `base`'s variant in `coding` when it is ready, marked used (read in place).
fn ready_variant(base: &Entry, coding: Coding) -> Option<Rc<Entry>> {
    match &base.made.borrow()[coding.index()] {
        Made::Ready(v, used) => {
            used.mark();
            Some(Rc::clone(v))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A cache over `root`: `max` entries, small files up to `small` bytes within
    /// `budget`, plain reads (tmpfs cannot say "would block").
    fn cache(root: &Path, max: usize, small: u64, budget: u64) -> (FileCache, Arc<Stats>) {
        let fd = linerate_sys::fs::open_directory(root).unwrap();
        let stats = Arc::new(Stats::default());
        let c = FileCache::new(
            OwnedFd::from(fd),
            max,
            (small, budget),
            false,
            Arc::clone(&stats),
        );
        (c, stats)
    }

    /// What the worker's loop does between turns: if the cache's inotify descriptor is
    /// readable, the changes are taken in.
    fn settle(c: &mut FileCache) {
        use linerate_sys::epoll::{Epoll, IN};
        let Some(fd) = c.notify.as_ref().map(AsFd::as_fd) else {
            return;
        };
        let mut ep = Epoll::new(1).unwrap();
        ep.add(fd, 0, IN).unwrap();
        let mut ready = Vec::new();
        ep.wait(&mut ready, 0).unwrap();
        if !ready.is_empty() {
            c.changed();
        }
    }

    fn file(found: Found) -> Rc<Entry> {
        match found {
            Found::File(e) => e,
            Found::Dir => panic!("a directory"),
            Found::Missing => panic!("missing"),
            Found::Forbidden => panic!("forbidden"),
            Found::Unavailable => panic!("unavailable"),
        }
    }

    #[test]
    fn a_hit_is_the_same_entry_and_a_small_file_is_held() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.txt"), b"hello").unwrap();
        let (mut c, _) = cache(root.path(), 100, 16 << 10, 1 << 20);
        let first = file(c.lookup(b"a.txt"));
        assert_eq!(first.meta.size, 5);
        assert_eq!(first.contents().as_deref(), Some(&b"hello"[..]));
        assert_eq!(first.content_type, "text/plain; charset=utf-8");
        settle(&mut c);
        let again = file(c.lookup(b"a.txt"));
        assert!(Rc::ptr_eq(&first, &again), "a hit opens nothing new");
    }

    /// A variant whose contents were not resident when it was found is read on a later
    /// answer (regression: the remembered list was returned as it was, so such a variant
    /// went out as a file range for the entry's life, 1.7x the CPU of a held one).
    #[test]
    fn a_variant_not_resident_when_found_is_read_later() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.js"), "let a = 1;\n".repeat(100)).unwrap();
        std::fs::write(root.path().join("a.js.gz"), b"gzip bytes").unwrap();
        let (mut c, _) = cache(root.path(), 100, 16 << 10, 1 << 20);
        let base = file(c.lookup(b"a.js"));
        settle(&mut c);
        let v = c.variants(b"a.js", &base, &[Coding::Gzip]);
        let gz = Rc::clone(&v.found[0].1);
        assert_eq!(gz.contents().as_deref(), Some(&b"gzip bytes"[..]));
        // As RWF_NOWAIT leaves it when the pages are out.
        *gz.small.borrow_mut() = Small::NotResident;
        c.small_held -= gz.meta.size;
        let again = c.variants(b"a.js", &base, &[Coding::Gzip]);
        assert!(Rc::ptr_eq(&again.found[0].1, &gz), "the remembered list");
        assert_eq!(gz.contents().as_deref(), Some(&b"gzip bytes"[..]));
    }

    #[test]
    fn a_rewritten_file_is_never_served_stale() {
        let root = tempfile::tempdir().unwrap();
        let p = root.path().join("a.txt");
        std::fs::write(&p, b"aaaa").unwrap();
        let (mut c, _) = cache(root.path(), 100, 16 << 10, 1 << 20);
        let before = file(c.lookup(b"a.txt"));
        // The same size, most likely within the same tick of the file clock: only the
        // inotify event (or the inode) tells it apart.
        std::fs::write(&p, b"bbbb").unwrap();
        settle(&mut c);
        let after = file(c.lookup(b"a.txt"));
        assert_eq!(after.contents().as_deref(), Some(&b"bbbb"[..]));
        assert!(!Rc::ptr_eq(&before, &after));
        // Replaced by another inode of another size.
        let tmp = root.path().join("new");
        std::fs::write(&tmp, b"cc").unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        settle(&mut c);
        let replaced = file(c.lookup(b"a.txt"));
        assert_eq!(replaced.meta.size, 2);
        assert_eq!(replaced.contents().as_deref(), Some(&b"cc"[..]));
        std::fs::remove_file(&p).unwrap();
        settle(&mut c);
        assert!(matches!(c.lookup(b"a.txt"), Found::Missing));
    }

    #[test]
    fn directories_special_files_and_escaping_links() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("d")).unwrap();
        std::fs::write(outside.path().join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("outdir")).unwrap();
        std::os::unix::fs::symlink("d", root.path().join("in")).unwrap();
        std::fs::write(root.path().join("d/x"), b"x").unwrap();
        let fifo = root.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let (mut c, _) = cache(root.path(), 100, 16 << 10, 1 << 20);
        assert!(matches!(c.lookup(b"d"), Found::Dir));
        assert!(matches!(c.lookup(b"nothing"), Found::Missing));
        assert!(matches!(c.lookup(b"fifo"), Found::Missing), "never opened");
        assert!(
            matches!(c.lookup(b"out"), Found::Missing),
            "a link out of the root"
        );
        assert!(matches!(c.lookup(b"outdir"), Found::Missing));
        assert!(matches!(c.lookup(b"outdir/secret"), Found::Missing));
        assert_eq!(
            file(c.lookup(b"in/x")).contents().as_deref(),
            Some(&b"x"[..])
        );
    }

    #[test]
    fn small_contents_stay_within_the_budget_largest_given_up_first() {
        let root = tempfile::tempdir().unwrap();
        for (name, len) in [("a", 4000usize), ("b", 3000), ("c", 2000), ("d", 1000)] {
            std::fs::write(root.path().join(name), vec![b'x'; len]).unwrap();
        }
        let (mut c, stats) = cache(root.path(), 100, 16 << 10, 8000);
        let a = file(c.lookup(b"a"));
        let b = file(c.lookup(b"b"));
        assert!(a.contents().is_some() && b.contents().is_some());
        // 7,000 held; 2,000 more is past 8,000: the largest goes until 6,000 - 2,000.
        let cc = file(c.lookup(b"c"));
        assert!(cc.contents().is_some());
        assert!(a.contents().is_none(), "the largest is given up");
        assert!(matches!(*a.small.borrow(), Small::Evicted));
        assert_eq!(Stats::get(&stats.small_evictions), 1);
        let held = Stats::get(&stats.small_bytes_held);
        assert!(held <= 8000, "{held}");
        assert_eq!(held, 5000);
        // Once given up, not read again until the cache starts over.
        settle(&mut c);
        assert!(file(c.lookup(b"a")).contents().is_none());
        // A file above the small-file size or the whole budget is never held.
        std::fs::write(root.path().join("big"), vec![b'y'; 20_000]).unwrap();
        assert!(file(c.lookup(b"big")).contents().is_none());
    }

    #[test]
    fn a_full_cache_starts_over() {
        let root = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            std::fs::write(root.path().join(name), name).unwrap();
        }
        let (mut c, stats) = cache(root.path(), 2, 16 << 10, 1 << 20);
        let a = file(c.lookup(b"a"));
        file(c.lookup(b"b"));
        assert_eq!(c.entries.len(), 2);
        file(c.lookup(b"c"));
        assert_eq!(c.entries.len(), 1, "emptied, then c");
        assert_eq!(Stats::get(&stats.small_bytes_held), 1);
        let a2 = file(c.lookup(b"a"));
        assert!(!Rc::ptr_eq(&a, &a2), "opened again");
    }

    #[test]
    fn listings_are_sorted_and_leave_dot_files_out_unless_asked() {
        let root = tempfile::tempdir().unwrap();
        for name in ["b", "a", ".hidden"] {
            std::fs::write(root.path().join(name), name).unwrap();
        }
        std::fs::create_dir(root.path().join("c")).unwrap();
        let (mut c, _) = cache(root.path(), 100, 16 << 10, 1 << 20);
        let Ok((names, real)) = c.list(b"", false) else {
            panic!("no listing")
        };
        assert_eq!(real, None, "the root is where it is");
        let shown: Vec<(&[u8], bool)> = names.iter().map(|e| (&e.name[..], e.dir)).collect();
        assert_eq!(shown, [(&b"c"[..], true), (b"a", false), (b"b", false)]);
        assert_eq!(names[1].size, 1);
        let Ok((all, _)) = c.list(b"", true) else {
            panic!("no listing")
        };
        assert_eq!(all[1].name, b".hidden");
        assert!(matches!(c.list(b"nope", false), Err(Found::Missing)));
    }

    #[test]
    fn ranges_read_exactly_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        let f = File::open(&p).unwrap();
        assert_eq!(read_range(&f, 2, 3, false).as_deref(), Some(&b"234"[..]));
        assert_eq!(read_range(&f, 0, 0, false).as_deref(), Some(&b""[..]));
        assert_eq!(read_range(&f, 8, 5, false), None, "the file ends first");
        // With nowait on a file system that cannot say, the read happens anyway.
        assert_eq!(read_range(&f, 0, 4, true).as_deref(), Some(&b"0123"[..]));
        assert_eq!(
            read_whole(&f, 10, false).as_deref(),
            Some(&b"0123456789"[..])
        );
        assert_eq!(read_whole(&f, 11, false), None, "not that size any more");
    }
}
