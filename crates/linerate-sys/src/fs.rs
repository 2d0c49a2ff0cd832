//! Opening files for the server: `openat2` confined beneath the document root.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `RESOLVE_BENEATH`: resolution may not leave the directory, by `..` or symlink.
const RESOLVE_BENEATH: u64 = 0x08;
/// `RESOLVE_NO_MAGICLINKS`: no `/proc/*/fd` style links.
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// `RESOLVE_NO_SYMLINKS`: no symbolic link anywhere in the path.
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Opens `path` (relative, no NUL) read-only and non-blocking beneath `dir`: symbolic
/// links are followed only while they stay under `dir`; escaping gives `EXDEV`. FIFOs
/// and devices open without blocking (`O_NONBLOCK`), so the caller can refuse them.
pub fn open_beneath(dir: BorrowedFd<'_>, path: &[u8]) -> io::Result<OwnedFd> {
    openat2(dir, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
}

/// Like [`open_beneath`], but fails (`ELOOP`) if any component of `path` is a symbolic
/// link: the path names its file directly, through directories that are really there.
pub fn open_beneath_no_symlinks(dir: BorrowedFd<'_>, path: &[u8]) -> io::Result<OwnedFd> {
    openat2(dir, path, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)
}

fn openat2(dir: BorrowedFd<'_>, path: &[u8], resolve: u64) -> io::Result<OwnedFd> {
    let p = if path.is_empty() { &b"."[..] } else { path };
    let c =
        CString::new(p).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY) as u64,
        mode: 0,
        resolve,
    };
    // SAFETY: `c` is a NUL-terminated path and `how` a live open_how of the size passed;
    // the kernel only reads them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat2 returned a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// `accept4` with `SOCK_NONBLOCK | SOCK_CLOEXEC`: one call for a ready-to-use socket.
pub fn accept_nonblocking(listener: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed; no memory of ours is written.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes the next close of `fd` send a reset and drop unsent data (`SO_LINGER` 0): for
/// a connection whose queued bytes must not be delivered.
pub fn reset_on_close(fd: BorrowedFd<'_>) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the kernel reads one linger from a live local.
    crate::cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// What [`stat_at`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// `st_mode`.
    pub mode: u32,
}

impl FileMeta {
    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
}

fn meta(st: &libc::stat) -> FileMeta {
    FileMeta {
        dev: st.st_dev,
        ino: st.st_ino,
        size: st.st_size.max(0) as u64,
        mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
        mode: st.st_mode,
    }
}

/// `fstatat(dir, path)`, following symbolic links: one call to check a cached file.
pub fn stat_at(dir: BorrowedFd<'_>, path: &[u8]) -> io::Result<FileMeta> {
    let p = if path.is_empty() { &b"."[..] } else { path };
    let c =
        CString::new(p).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: stat is plain data; all-zero is valid and the kernel fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` a live, writable stat.
    crate::cvt(unsafe { libc::fstatat(dir.as_raw_fd(), c.as_ptr(), &mut st, 0) })?;
    Ok(meta(&st))
}

/// `fstat` of an open descriptor.
pub fn stat_fd(fd: BorrowedFd<'_>) -> io::Result<FileMeta> {
    // SAFETY: as for stat_at.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a live, writable stat.
    crate::cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(meta(&st))
}

/// Opens `path` as a directory without ever blocking: a FIFO, a device or anything else
/// that is not a directory fails at once (`ENOTDIR`) instead of waiting in `open` for a
/// writer, as a plain open of a FIFO would.
pub fn open_directory(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Opens the directory `path` itself, never a symbolic link to one (`O_NOFOLLOW`:
/// `ELOOP`), so what is then changed through the descriptor (`fchown`, `fchmod`) is
/// that directory whatever the path comes to name meanwhile.
pub fn open_directory_no_follow(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
}

/// Opens the regular file `path` to read, never through a symbolic link at its last
/// component (`O_NOFOLLOW`: `ELOOP`) and never blocking on a FIFO or a device
/// (`O_NONBLOCK`); anything but a regular file is refused (`EINVAL`).
pub fn open_regular_no_follow(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok(f)
}

/// Opens `path` for appending (creating a regular file if there is none) without ever
/// blocking in `open`: a FIFO nobody reads fails with `ENXIO`. Once open, writes block
/// as usual (`O_NONBLOCK` is cleared), so a FIFO or a terminal never drops a line.
pub fn open_append(path: &std::path::Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    // SAFETY: F_GETFL reads the flags of a descriptor `f` owns; no memory is passed.
    let flags = crate::cvt(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: F_SETFL takes an integer; `f` stays open for the call.
    crate::cvt(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) })?;
    Ok(f)
}

/// The process's descriptor limit (`RLIMIT_NOFILE`) as (soft, hard).
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: the kernel writes one rlimit into a live local.
    crate::cvt(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) })?;
    Ok((r.rlim_cur, r.rlim_max))
}

/// Raises the soft descriptor limit to the hard one, as most servers do at start;
/// returns the new (soft, hard).
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let (soft, hard) = nofile_limit()?;
    if soft < hard {
        let r = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: the kernel reads one rlimit from a live local.
        crate::cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) })?;
    }
    nofile_limit()
}

/// `EMFILE` or `ENFILE`: the process or the system is out of descriptors.
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// `EACCES`: the permission bits refuse the open.
pub fn is_permission_denied(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EACCES)
}

/// Lets `fd` survive an `exec` (clears `FD_CLOEXEC`), or not (`inherit` false): how
/// listening sockets are handed to a new binary (`serve`'s SIGUSR2).
pub fn set_inherited(fd: BorrowedFd<'_>, inherit: bool) -> io::Result<()> {
    // SAFETY: F_GETFD/F_SETFD on a live descriptor read and set one flag word.
    let flags = crate::cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) })?;
    let flags = if inherit {
        flags & !libc::FD_CLOEXEC
    } else {
        flags | libc::FD_CLOEXEC
    };
    // SAFETY: as above.
    crate::cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flags) })?;
    Ok(())
}

/// Takes ownership of descriptor `fd` that this process inherited from its parent as a
/// listening socket (a binary upgrade names their numbers in the environment). Refused
/// unless `fd` is open and a listening stream socket, so a wrong number can never
/// take a descriptor something else owns; marked close-on-exec again.
pub fn take_inherited_listener(fd: i32) -> io::Result<OwnedFd> {
    if fd < 3 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "descriptors 0-2 are the standard streams",
        ));
    }
    // SAFETY: F_GETFD only asks whether the number is open; no memory is touched.
    crate::cvt(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    let mut listening: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes one int into `listening`, of the size given in `len`.
    crate::cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut listening as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    if listening == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not a listening socket"),
        ));
    }
    // SAFETY: `fd` is open, a listening socket, inherited for this process to own; no
    // other owner exists in this process (it was checked only, never wrapped before).
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    set_inherited(owned.as_fd(), false)?;
    Ok(owned)
}
