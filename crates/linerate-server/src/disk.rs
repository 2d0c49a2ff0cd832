//! Keeping the event loop off the disk (seed 003: Flash's helpers, DeBox's flag).
//!
//! Before a file range goes out inline, the connection asks the page cache whether the
//! next read-ahead window of it is resident (`cachestat`, one call per window, no
//! mapping). If it is, `sendfile` will not start a disk read and the send goes on. If not,
//! the window is handed to a pool of helper threads, which read it (so it lands in the
//! page cache) and tell the worker through its eventfd; the connection sends nothing
//! meanwhile, and the worker serves everyone else. A small file's contents are read
//! with `preadv2(RWF_NOWAIT)`; if that would wait, the file goes out as a file range
//! by the same path, and its contents are cached on a later request.
//!
//! A file of up to [`WHOLE_PROBE`] (64 MiB) is probed whole when its response is made,
//! and a "resident" answer is remembered in its open-file cache entry for the current
//! residency epoch ([`Disk::epoch`]), one tick of the worker (100 ms): files served over
//! and over cost a probe per tick, not per response (the probe walks every page: 0.4 µs
//! for 100 KiB here, measured at 6% of the server's CPU at 100 KiB, and 2-3% at 10 MiB
//! when each response probed its windows). The answer ([`Whole`]) is shared with the
//! file's responses in flight: a resident file's response goes out with no probe of its
//! own, asking again at each turn, which costs a look, or one whole probe per epoch for
//! all of them (a response to a slow reader can take minutes, and pages may go
//! meanwhile). Once a page has gone, what is left goes a probed window at a time; a
//! larger file is probed so from the start. A whole probe that found a page missing is
//! not made again for a file of more than one window until the epoch ends. Pages evicted within the tick are
//! missed until it ends: a send may then wait for the disk, as seed 003's heuristic did
//! before its `sendfile` flag. The kernel gives no cheap signal of evictions: this
//! machine's DAMON `pageout` drops file pages without moving any `pgsteal_*` counter of
//! `/proc/vmstat`, so the epoch is a plain tick. A rewritten or replaced file gets a new
//! entry (the cache sees the change), so a new probe.
//!
//! cachestat counts a page whose read is under way as present. A send can therefore
//! wait for a read already started (kernel read-ahead running ahead of a sequential
//! send), never start one. The failed `RWF_NOWAIT` read of a cold small file starts
//! such a read, which is why that file goes straight to the helpers, unprobed.
//!
//! The pool is shared by the workers; jobs are rare (a miss per window of a cold file),
//! so a channel and a mutex on the miss path cost nothing on the request path. A helper
//! pulls the pages in with `sendfile` to `/dev/null`, which reads them into the page
//! cache and copies nothing out; when the call returns they are there (an asynchronous
//! hint such as `POSIX_FADV_WILLNEED` would say nothing about when). While a window
//! goes out, the connection has the helpers read the next one. Path lookups
//! (`openat2`, `fstatat`) can still wait on a cold inode; Flash had helpers for
//! those as well, which are not built yet.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};

use std::os::fd::AsFd;

use linerate_sys::cache::EventFd;

use crate::stats::Stats;
use linerate_sys::sendfile::sendfile;
use linerate_sys::Errno;

/// Bytes a helper reads per call.
const READ_CHUNK: usize = 1 << 20;

/// One window to bring into the page cache for a connection.
pub(crate) struct Job {
    pub file: Arc<File>,
    pub offset: u64,
    pub len: u64,
    /// The connection's slot and serial in its worker.
    pub conn: usize,
    pub serial: u64,
    /// Where the answer goes.
    pub inbox: Arc<Inbox>,
}

/// A finished job.
pub(crate) struct Done {
    pub conn: usize,
    pub serial: u64,
    /// The window read (`offset`, `len`), as asked.
    pub offset: u64,
    pub len: u64,
    /// Bytes actually read (short at the end of a file that shrank).
    pub read: u64,
}

/// A worker's mailbox: finished jobs, and the eventfd that wakes its loop.
pub(crate) struct Inbox {
    pub wake: EventFd,
    done: Mutex<Vec<Done>>,
}

impl Inbox {
    pub fn new() -> std::io::Result<Inbox> {
        Ok(Inbox {
            wake: EventFd::new()?,
            done: Mutex::new(Vec::new()),
        })
    }

    /// Wakes the worker for something other than a finished read (a password check).
    pub fn poke(&self) {
        let _ = self.wake.notify();
    }

    /// The jobs finished since the last call.
    pub fn take(&self) -> Vec<Done> {
        let _ = self.wake.drain();
        std::mem::take(&mut *self.done.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn put(&self, d: Done) {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(d);
        let _ = self.wake.notify();
    }
}

/// Starts `n` helpers in `scope`; they end when every sender of jobs is gone.
pub(crate) fn start_helpers<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    n: usize,
) -> Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    for _ in 0..n {
        let rx = Arc::clone(&rx);
        scope.spawn(move || helper(&rx));
    }
    tx
}

fn helper(rx: &Mutex<Receiver<Job>>) {
    // Pages are pulled in by sendfile to /dev/null: the kernel reads them into the
    // page cache and discards them, with no copy to this thread (a pread into a
    // buffer if /dev/null cannot be opened).
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .ok();
    let mut buf = Vec::new();
    loop {
        let job = {
            let Ok(rx) = rx.lock() else { return };
            match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        let mut read = 0u64;
        let mut failed = None;
        while read < job.len {
            let want = (job.len - read).min(READ_CHUNK as u64) as usize;
            let mut at = job.offset + read;
            let r = match &null {
                Some(null) => sendfile(null.as_fd(), job.file.as_fd(), &mut at, want),
                None => {
                    buf.resize(READ_CHUNK, 0);
                    job.file.read_at(&mut buf[..want], at)
                }
            };
            match r {
                Ok(0) => break,
                Ok(n) => read += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // The send will meet the error itself and close the connection.
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            // Rare (a disk error, a file system gone): each is worth its line.
            tracing::warn!(
                "disk helper: reading {} bytes at offset {}: {e}",
                job.len - read,
                job.offset + read
            );
        }
        job.inbox.put(Done {
            conn: job.conn,
            serial: job.serial,
            offset: job.offset,
            len: job.len,
            read,
        });
    }
}

/// Files up to this size are probed whole, once per residency epoch (larger ones a
/// window at a time, as they go): a whole probe of a file that is then read only in part
/// costs at most about 0.25 ms.
pub(crate) const WHOLE_PROBE: u64 = 64 << 20;

/// What is known of a whole file's residency, shared by its open-file cache entry and
/// every response of it in flight: one probe of the whole file per epoch answers for
/// all of them, at the start of a response and at each turn of one that outlasts an
/// epoch.
#[derive(Debug)]
pub(crate) struct Whole {
    size: u64,
    /// The epoch in which a probe found every page (0: none). Atomic only so a response
    /// can hold it across threads' types; one worker uses it.
    resident: AtomicU64,
    /// The epoch in which a probe found a page missing (0: none).
    missing: AtomicU64,
}

impl Whole {
    pub fn new(size: u64) -> Arc<Whole> {
        Arc::new(Whole {
            size,
            resident: AtomicU64::new(0),
            missing: AtomicU64::new(0),
        })
    }

    /// Whether every page of the file is in the page cache in this epoch: known, or
    /// probed now, once per epoch. A file larger than [`WHOLE_PROBE`] and one window
    /// is never probed whole; one larger than a window and found short is not probed
    /// again until the epoch ends (its windows are, as they go).
    pub fn resident(&self, d: &Disk, f: &File, stats: &Stats) -> bool {
        if let Some(known) = self.known(d) {
            return known;
        }
        Stats::add(&stats.probes, 1);
        let probe = linerate_sys::cache::resident(f.as_fd(), 0, self.size);
        self.found(d, probe.map_err(|e| Errno::from_io(&e)))
    }

    /// What is known without a probe in this epoch: resident, or not worth probing
    /// (too large, found short already, or no probing here); none when a probe of the
    /// whole file ([`Whole::size`] bytes from 0) must say.
    pub fn known(&self, d: &Disk) -> Option<bool> {
        if self.size > WHOLE_PROBE.max(d.window) || !d.usable.get() {
            return Some(false);
        }
        if self.resident.load(Ordering::Relaxed) == d.epoch {
            return Some(true);
        }
        if self.size > d.window && self.missing.load(Ordering::Relaxed) == d.epoch {
            return Some(false);
        }
        None
    }

    /// The file's size, what a probe of it whole asks about.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Takes what a probe of the whole file found (1: every page there), for this
    /// epoch; whether the file is resident.
    pub fn found(&self, d: &Disk, probe: Result<bool, Errno>) -> bool {
        match probe {
            Ok(true) => {
                self.resident.store(d.epoch, Ordering::Relaxed);
                true
            }
            Ok(false) => {
                self.missing.store(d.epoch, Ordering::Relaxed);
                false
            }
            Err(_) => {
                // No cachestat here: this worker stops probing.
                d.usable.set(false);
                false
            }
        }
    }
}

/// What a probe found for a file part.
#[derive(Clone, Debug)]
pub(crate) enum Residency {
    /// Not probed yet: the connection probes each window.
    Unknown,
    /// Its whole file was in the page cache when the response was made: it goes out
    /// unprobed while [`Whole::resident`] says so, epoch by epoch, and a window at a
    /// time once it does not.
    Whole(Arc<Whole>),
    /// Some of it is certainly not (a small file whose `RWF_NOWAIT` read failed): it
    /// goes to the helpers unprobed.
    Missing,
}

/// What a connection needs to hand a window to the helpers.
pub(crate) struct Disk {
    pub jobs: Sender<Job>,
    pub inbox: Arc<Inbox>,
    /// Bytes probed and read per window.
    pub window: u64,
    /// The probe works on this kernel and file system (cleared at its first failure).
    pub usable: std::cell::Cell<bool>,
    /// The residency epoch, counted in worker ticks from 1 (an entry's 0 means never
    /// probed resident): a probe's "all resident" holds until it ends.
    pub epoch: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Waits until the inbox has `n` finished jobs (the helpers run on their own).
    fn wait_done(inbox: &Inbox, n: usize) -> Vec<Done> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        while got.len() < n {
            assert!(Instant::now() < deadline, "helpers did not answer");
            got.extend(inbox.take());
            std::thread::sleep(Duration::from_millis(5));
        }
        got
    }

    #[test]
    fn helpers_read_each_window_and_answer_the_connection_that_asked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![7u8; 3 * READ_CHUNK + 100]).unwrap();
        let file = Arc::new(File::open(&p).unwrap());
        let inbox = Arc::new(Inbox::new().unwrap());
        std::thread::scope(|s| {
            let jobs = start_helpers(s, 2);
            let ask = |conn, serial, offset, len| {
                jobs.send(Job {
                    file: Arc::clone(&file),
                    offset,
                    len,
                    conn,
                    serial,
                    inbox: Arc::clone(&inbox),
                })
                .unwrap();
            };
            // A window of several read chunks, one at the end that the file cuts short,
            // and one wholly past the end.
            ask(1, 10, 0, 2 * READ_CHUNK as u64 + 5);
            ask(2, 20, 3 * READ_CHUNK as u64, 1000);
            ask(3, 30, 4 * READ_CHUNK as u64, 10);
            let mut done = wait_done(&inbox, 3);
            done.sort_by_key(|d| d.conn);
            let got: Vec<_> = done
                .iter()
                .map(|d| (d.conn, d.serial, d.offset, d.len, d.read))
                .collect();
            assert_eq!(
                got,
                [
                    (
                        1,
                        10,
                        0,
                        2 * READ_CHUNK as u64 + 5,
                        2 * READ_CHUNK as u64 + 5
                    ),
                    (2, 20, 3 * READ_CHUNK as u64, 1000, 100),
                    (3, 30, 4 * READ_CHUNK as u64, 10, 0),
                ]
            );
            // Dropping the last sender ends the helpers, so the scope returns.
            drop(jobs);
        });
        assert!(inbox.take().is_empty(), "taken once");
    }
}
