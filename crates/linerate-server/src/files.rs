//! The per-worker open-file cache (seed 003's mapping recycling, for descriptors).
//!
//! Each request costs one `fstatat` of its path: when device, inode, size and mtime
//! still match the cached entry, the cached descriptor (opened with `openat2` beneath
//! the root) and, for small files, the cached contents are used; otherwise the file is
//! opened again. So a rewritten, replaced or deleted file is never served stale, and a
//! hit saves the open, fstat and close of an uncached server.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use linerate_http::conditional::Validators;
use linerate_sys::fs::{open_beneath, stat_at, stat_fd, FileMeta};

/// A cached open file.
pub(crate) struct Entry {
    pub file: Arc<File>,
    pub meta: FileMeta,
    pub validators: Validators,
    /// `Last-Modified`, formatted once per opened file.
    pub last_modified: String,
    pub content_type: &'static str,
    /// The whole contents, for files up to the small-file size.
    pub small: Option<Arc<[u8]>>,
}

pub(crate) enum Found {
    File(Rc<Entry>),
    Dir,
    Missing,
}

pub(crate) struct FileCache {
    root: OwnedFd,
    entries: HashMap<Vec<u8>, Rc<Entry>>,
    max_entries: usize,
    small_bytes: u64,
}

impl FileCache {
    pub fn new(root: OwnedFd, max_entries: usize, small_bytes: u64) -> FileCache {
        FileCache {
            root,
            entries: HashMap::new(),
            max_entries: max_entries.max(1),
            small_bytes,
        }
    }

    /// Looks `rel` (relative to the root, no `..`) up.
    pub fn lookup(&mut self, rel: &[u8]) -> Found {
        let Ok(m) = stat_at(self.root.as_fd(), rel) else {
            self.entries.remove(rel);
            return Found::Missing;
        };
        if m.is_dir() {
            // Only if it is reachable beneath the root (not through an escaping link).
            return match open_beneath(self.root.as_fd(), rel) {
                Ok(_) => Found::Dir,
                Err(_) => Found::Missing,
            };
        }
        if !m.is_file() {
            return Found::Missing;
        }
        if let Some(e) = self.entries.get(rel) {
            if e.meta == m {
                return Found::File(Rc::clone(e));
            }
        }
        let Ok(fd) = open_beneath(self.root.as_fd(), rel) else {
            self.entries.remove(rel);
            return Found::Missing;
        };
        let Ok(fm) = stat_fd(fd.as_fd()) else {
            return Found::Missing;
        };
        if !fm.is_file() {
            return Found::Missing;
        }
        let file = File::from(fd);
        let mtime =
            UNIX_EPOCH + Duration::from_nanos(fm.mtime_ns.clamp(0, u64::MAX as i128) as u64);
        let name = String::from_utf8_lossy(rel);
        let small = (fm.size <= self.small_bytes)
            .then(|| read_whole(&file, fm.size))
            .flatten();
        let validators = Validators::new(fm.ino, fm.size, mtime);
        let e = Rc::new(Entry {
            last_modified: validators.last_modified_http(),
            validators,
            content_type: linerate_http::response::content_type(&name),
            meta: fm,
            file: Arc::new(file),
            small,
        });
        if self.entries.len() >= self.max_entries {
            // Bounded: start over rather than track recency on the request path.
            self.entries.clear();
        }
        self.entries.insert(rel.to_vec(), Rc::clone(&e));
        Found::File(e)
    }

    /// Names in directory `rel`, sorted, dot-files left out unless `dotfiles`.
    pub fn list(&self, rel: &[u8], dotfiles: bool) -> Option<Vec<(String, bool)>> {
        let fd = open_beneath(self.root.as_fd(), rel).ok()?;
        // /proc/self/fd gives the opened directory itself, wherever links pointed.
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let mut names: Vec<(String, bool)> = std::fs::read_dir(path)
            .ok()?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let n = e.file_name().into_string().ok()?;
                let dir = e.file_type().ok()?.is_dir();
                (dotfiles || !n.starts_with('.')).then_some((n, dir))
            })
            .collect();
        names.sort();
        Some(names)
    }
}

/// The whole contents, or `None` if the file is not `size` bytes any more.
fn read_whole(file: &File, size: u64) -> Option<Arc<[u8]>> {
    let mut buf = vec![0u8; size as usize];
    let mut got = 0;
    while got < buf.len() {
        match std::os::unix::fs::FileExt::read_at(file, &mut buf[got..], got as u64) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(buf.into())
}
