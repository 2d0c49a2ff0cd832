//! The page cache: is a file range in memory, and reading without waiting for the disk.
//!
//! Seed 003 (Flash, DeBox) keeps the event loop off the disk: before an inline send the
//! server checks that the pages are resident and hands misses to helpers. FreeBSD got a
//! `sendfile` flag that fails instead of blocking; Linux's `sendfile` has none, so the
//! check is [`cachestat`] (Linux 6.5+, one call for a whole range, no mapping, unlike
//! `mincore`), and a small file's contents are read with [`read_at_nowait`]
//! (`preadv2(RWF_NOWAIT)`), which fails with `EAGAIN` rather than start disk I/O.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::zerocopy::page_size;
use crate::{cvt, cvt_size, to_off64};

/// `cachestat`'s system call number: 451 on every architecture (it came after the
/// numbers were unified); the `libc` crate does not name it for x86_64.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// What `cachestat` says about a range of a file, in pages.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStat {
    /// Pages of the range in the page cache.
    pub nr_cache: u64,
    /// Of those, dirty.
    pub nr_dirty: u64,
    /// Of those, under writeback.
    pub nr_writeback: u64,
    /// Pages evicted from the cache.
    pub nr_evicted: u64,
    /// Pages evicted recently (they would have stayed with a little more memory).
    pub nr_recently_evicted: u64,
}

/// Page-cache state of `len` bytes of `fd` from `offset` (`len` 0: to the end of the
/// file). `ENOSYS` before Linux 6.5; `EOPNOTSUPP` on file systems without a page cache
/// (hugetlbfs).
pub fn cachestat(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<CacheStat> {
    let range = CachestatRange { off: offset, len };
    let mut out = CacheStat::default();
    // SAFETY: `range` is a live cachestat_range the kernel only reads, and `out` a live,
    // writable struct cachestat of the kernel's layout (five u64s); flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            &mut out as *mut CacheStat,
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(out)
}

/// Whether every page of `len` bytes of `fd` from `offset` is in the page cache (true
/// for an empty range). The kernel stops counting at the end of the file, so a range
/// running past it is not resident.
pub fn resident(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<bool> {
    let end = offset.saturating_add(len);
    if end <= offset {
        return Ok(true);
    }
    let page = page_size() as u64;
    let pages = end.div_ceil(page) - offset / page;
    Ok(cachestat(fd, offset, end - offset)?.nr_cache >= pages)
}

/// Reads at `offset` into `buf` only from the page cache: `EAGAIN`
/// ([`io::ErrorKind::WouldBlock`]) if that would mean waiting for the disk, and a short
/// count if only the first pages are resident. A file system that does not take
/// `RWF_NOWAIT` (tmpfs) gives [`io::ErrorKind::Unsupported`].
pub fn read_at_nowait(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, live and writable for its length, for this call.
    // A file system that cannot say (tmpfs) gives EOPNOTSUPP, kept as the kernel's
    // number (its kind is `Unsupported`), so callers can tell it from a miss.
    cvt_size(unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, to_off64(offset)?, libc::RWF_NOWAIT) })
}

/// Reads `n` bytes of `fd` at `offset` onto the end of `out`, straight into its spare
/// capacity (no zeroing first, no buffer between): `UnexpectedEof` if the file ends
/// sooner, `out` then keeping what was read. HTTP/3 bodies are read this way into the
/// chunks QUIC sends from.
pub fn read_at_append(
    fd: BorrowedFd<'_>,
    out: &mut Vec<u8>,
    n: usize,
    offset: u64,
) -> io::Result<()> {
    out.reserve(n);
    let mut done = 0;
    while done < n {
        let spare = out.spare_capacity_mut();
        let want = (n - done).min(spare.len());
        let at = to_off64(offset + done as u64)?;
        // SAFETY: `spare` is `out`'s allocated, unused capacity, at least `want` bytes
        // (reserved above, and each read is counted into the length before the next),
        // live and writable for this call; pread writes at most `want` bytes into it.
        let got =
            cvt_size(unsafe { libc::pread64(fd.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) });
        let got = match got {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // SAFETY: pread initialised the first `got` (at most `want`) bytes of the spare
        // capacity, so the length may grow by `got`.
        unsafe { out.set_len(out.len() + got) };
        done += got;
    }
    Ok(())
}

/// Drops the clean cached pages of `fd` (`POSIX_FADV_DONTNEED`): the next read goes to
/// the disk. For tests and cold-cache benchmarks; dirty pages stay until written back.
pub fn evict(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: posix_fadvise only takes numbers; it returns an errno value, not -1.
    let r = unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// A non-blocking `eventfd`: threads wake an event loop by [`EventFd::notify`]; the
/// loop sees it readable and [`EventFd::drain`]s it.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new counter at zero.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd takes an initial value and flags and returns a new descriptor.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: the descriptor is new and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventFd { fd })
    }

    /// The descriptor, to register with an event loop.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }

    /// Adds one to the counter, waking the loop.
    pub fn notify(&self) -> io::Result<()> {
        let one: u64 = 1;
        loop {
            // SAFETY: `one` is a live u64 of the 8 bytes passed.
            let r = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
            if r == 8 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                // The counter is at its maximum: the loop has a wake-up pending anyway.
                io::ErrorKind::WouldBlock => return Ok(()),
                _ => return Err(e),
            }
        }
    }

    /// Resets the counter to zero; true if it was not zero.
    pub fn drain(&self) -> io::Result<bool> {
        let mut v: u64 = 0;
        loop {
            // SAFETY: `v` is a live, writable u64 of the 8 bytes passed.
            let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
            if r == 8 {
                return Ok(v != 0);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(false),
                _ => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn file_on_disk(bytes: usize) -> (std::path::PathBuf, std::fs::File) {
        // The target directory is on a disk file system (tmpfs pages cannot be evicted).
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("cache-{}-{bytes}", std::process::id()));
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(&vec![7u8; bytes]).unwrap();
        f.sync_all().unwrap();
        (p.clone(), std::fs::File::open(&p).unwrap())
    }

    #[test]
    fn cachestat_sees_eviction_and_nowait_refuses_the_disk() {
        let (p, f) = file_on_disk(1 << 20);
        let size = 1 << 20;
        let mut buf = vec![0u8; 1 << 20];
        // Read once: resident.
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 0).unwrap();
        match cachestat(f.as_fd(), 0, 0) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => return, // before 6.5
            r => assert_eq!(r.unwrap().nr_cache, size / page_size() as u64),
        }
        assert!(resident(f.as_fd(), 0, size).unwrap());
        assert!(resident(f.as_fd(), 4096, 10).unwrap());
        assert_eq!(
            read_at_nowait(f.as_fd(), &mut buf[..4096], 0).unwrap(),
            4096
        );
        evict(f.as_fd()).unwrap();
        let s = cachestat(f.as_fd(), 0, 0).unwrap();
        if s.nr_cache != 0 {
            // Something else holds the pages (a mapping); nothing more to learn here.
            let _ = std::fs::remove_file(&p);
            return;
        }
        assert!(!resident(f.as_fd(), 0, size).unwrap());
        let e = read_at_nowait(f.as_fd(), &mut buf[..4096], 8192).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // An empty range is resident.
        assert!(resident(f.as_fd(), 0, 0).unwrap());
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn read_at_append_reads_onto_the_end_and_names_a_short_file() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("append-{}", std::process::id()));
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &bytes).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let mut out = b"head".to_vec();
        read_at_append(f.as_fd(), &mut out, 150_000, 1_000).unwrap();
        assert_eq!(&out[..4], b"head");
        assert_eq!(out[4..], bytes[1_000..151_000]);
        let e = read_at_append(f.as_fd(), &mut out, 100, 199_950).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(out.len(), 4 + 150_000 + 50, "what was read is kept");
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn eventfd_counts_and_drains() {
        let e = EventFd::new().unwrap();
        assert!(!e.drain().unwrap());
        e.notify().unwrap();
        e.notify().unwrap();
        assert!(e.drain().unwrap());
        assert!(!e.drain().unwrap());
    }
}
