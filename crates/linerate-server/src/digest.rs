//! Digests of file contents for `etag = "content"` (docs/http.md F8): a SHA-256 of the
//! bytes, the same on every instance however its files were deployed.
//!
//! Computed once per file version (device, inode, size, modification time) on one
//! helper thread of the process at nice 10, never on a worker: a worker that finds no
//! digest asks for one and answers without an `ETag` meanwhile. The digests are kept
//! for the process (its workers, and every generation after a reload), at most
//! [`KEPT`] of them (then forgotten together and computed again as asked: bounded, and
//! no recency is tracked on the request path). A file found changed once read (size or
//! modification time) is given no digest: the next answer asks again under its new
//! version. Non-goal: digests kept across restarts (one pass over each file's bytes is
//! what a start costs).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use linerate_sys::fs::FileMeta;

/// A file version: what [`FileMeta`] says of it that a change alters.
type Version = (u64, u64, u64, i128);

fn version(m: &FileMeta) -> Version {
    (m.dev, m.ino, m.size, m.mtime_ns)
}

/// Digests kept at most before they are forgotten together.
pub(crate) const KEPT: usize = 1 << 16;

/// Jobs waiting at most: each holds its file's descriptor.
const MAX_QUEUED: usize = 256;

/// The first bytes of a SHA-256 kept (the entity tag shows 16).
pub(crate) type Digest = [u8; 16];

enum Slot {
    /// Asked, not computed yet.
    Pending,
    Done(Digest),
}

struct Job {
    file: Arc<File>,
    version: Version,
}

/// The process's digests and the thread that computes them.
pub(crate) struct Digests {
    known: Mutex<HashMap<Version, Slot>>,
    jobs: SyncSender<Job>,
    stop: Arc<AtomicBool>,
}

impl Digests {
    /// Starts the thread in `scope`; it ends when this is dropped (or [`Digests::stop`]
    /// gives up what is queued).
    pub fn start<'scope>(scope: &'scope std::thread::Scope<'scope, '_>) -> Arc<Digests> {
        let (tx, rx) = mpsc::sync_channel::<Job>(MAX_QUEUED);
        let d = Arc::new(Digests {
            known: Mutex::default(),
            jobs: tx,
            stop: Arc::default(),
        });
        let weak = Arc::downgrade(&d);
        let stop = Arc::clone(&d.stop);
        scope.spawn(move || {
            // Best effort: at the workers' priority it would only compete with them.
            if let Err(e) = linerate_sys::cpu::lower_thread_priority(10) {
                tracing::debug!("etag digests: cannot lower the thread's priority: {e}");
            }
            work(&rx, &stop, |v, outcome| {
                if let Some(d) = weak.upgrade() {
                    d.done(v, outcome);
                }
            });
        });
        d
    }

    /// The process is stopping: what is queued is given up.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The digest of the file `file` whose metadata is `meta`, if computed; asked of
    /// the thread the first time (and again after a change, or a full queue).
    pub fn of(&self, file: &Arc<File>, meta: &FileMeta) -> Option<Digest> {
        let v = version(meta);
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        match known.get(&v) {
            Some(Slot::Done(d)) => return Some(*d),
            Some(Slot::Pending) => return None,
            None => {}
        }
        if known.len() >= KEPT {
            known.retain(|_, s| matches!(s, Slot::Pending));
        }
        let job = Job {
            file: Arc::clone(file),
            version: v,
        };
        match self.jobs.try_send(job) {
            Ok(()) => {
                known.insert(v, Slot::Pending);
            }
            // Asked again by a later answer.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {}
        }
        None
    }

    fn done(&self, v: Version, outcome: io::Result<Option<Digest>>) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Ok(Some(d)) => {
                known.insert(v, Slot::Done(d));
            }
            Ok(None) => {
                known.remove(&v);
            }
            Err(e) => {
                known.remove(&v);
                if !self.stop.load(Ordering::Relaxed) {
                    tracing::warn!("etag digests: a {}-byte file (inode {}): {e}", v.2, v.1);
                }
            }
        }
    }
}

/// The thread: each job's digest, or None if the file changed while it was read.
fn work(rx: &Receiver<Job>, stop: &AtomicBool, done: impl Fn(Version, io::Result<Option<Digest>>)) {
    let mut buf = vec![0u8; 1 << 20];
    while let Ok(job) = rx.recv() {
        let outcome = if stop.load(Ordering::Relaxed) {
            Err(io::Error::other("stopping"))
        } else {
            digest(&job, &mut buf, stop)
        };
        done(job.version, outcome);
    }
}

fn digest(job: &Job, buf: &mut [u8], stop: &AtomicBool) -> io::Result<Option<Digest>> {
    use std::os::unix::fs::FileExt;
    let size = job.version.2;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut at = 0u64;
    while at < size {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::other("stopping"));
        }
        let want = (size - at).min(buf.len() as u64) as usize;
        let n = job.file.read_at(&mut buf[..want], at)?;
        if n == 0 {
            // Shorter than it was: changed.
            return Ok(None);
        }
        ctx.update(&buf[..n]);
        at += n as u64;
    }
    // Read whole as the version it was asked for, or it is another version now.
    let now = linerate_sys::fs::stat_fd(std::os::fd::AsFd::as_fd(&*job.file))?;
    if version(&now) != job.version {
        return Ok(None);
    }
    let mut out = Digest::default();
    out.copy_from_slice(&ctx.finish().as_ref()[..16]);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    fn wait(d: &Digests, f: &Arc<File>) -> Digest {
        let meta = linerate_sys::fs::stat_fd(std::os::fd::AsFd::as_fd(&**f)).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(x) = d.of(f, &meta) {
                return x;
            }
            assert!(Instant::now() < until, "no digest in 10 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_same_bytes_in_two_files_get_one_digest_and_other_bytes_another() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (name, body) in [
            ("a", &b"same bytes"[..]),
            ("b", b"same bytes"),
            ("c", b"other"),
        ] {
            let p = dir.path().join(name);
            File::create(&p).unwrap().write_all(body).unwrap();
            files.push(Arc::new(File::open(&p).unwrap()));
        }
        std::thread::scope(|s| {
            let d = Digests::start(s);
            let (a, b, c) = (
                wait(&d, &files[0]),
                wait(&d, &files[1]),
                wait(&d, &files[2]),
            );
            assert_eq!(a, b, "two inodes, one digest");
            assert_ne!(a, c);
            // SHA-256("same bytes"), its first 16 bytes.
            let want = ring::digest::digest(&ring::digest::SHA256, b"same bytes");
            assert_eq!(&a[..], &want.as_ref()[..16]);
        });
    }

    #[test]
    fn a_file_changed_after_it_was_asked_for_gets_no_digest_of_its_old_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"one").unwrap();
        let f = Arc::new(File::open(&p).unwrap());
        let old = linerate_sys::fs::stat_fd(std::os::fd::AsFd::as_fd(&*f)).unwrap();
        std::fs::write(&p, b"two, longer").unwrap();
        std::thread::scope(|s| {
            let d = Digests::start(s);
            assert_eq!(d.of(&f, &old), None);
            let until = Instant::now() + Duration::from_secs(5);
            // Asked under the old version: never a digest for it.
            while d.known.lock().unwrap().contains_key(&version(&old)) {
                assert!(Instant::now() < until);
                std::thread::sleep(Duration::from_millis(5));
            }
            let new = wait(&d, &f);
            let want = ring::digest::digest(&ring::digest::SHA256, b"two, longer");
            assert_eq!(&new[..], &want.as_ref()[..16]);
        });
    }
}
