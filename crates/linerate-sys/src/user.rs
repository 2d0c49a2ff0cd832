//! Users: looking one up by name, and giving up root for it (`serve --user`).

use std::ffi::{CStr, CString};
use std::io;

/// A user account as the server needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

/// Runs a reentrant lookup of the system databases (`getpwnam_r`, `getgrnam_r`) with a
/// buffer for its strings, growing the buffer while the call says `ERANGE`.
fn with_buffer<T>(mut call: impl FnMut(&mut [u8]) -> Result<T, libc::c_int>) -> io::Result<T> {
    let mut buf = vec![0u8; 4096];
    loop {
        match call(&mut buf) {
            Err(libc::ERANGE) if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            Err(e) => return Err(io::Error::from_raw_os_error(e)),
            Ok(v) => return Ok(v),
        }
    }
}

/// `name` as a C string; `what` names it in the error.
fn c_name(name: &str, what: &str) -> io::Result<CString> {
    CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("a {what} has no NUL")))
}

/// Looks `name` up in the user database (`getpwnam_r`: /etc/passwd, NSS). `Ok(None)`
/// when there is no such user.
pub fn lookup(name: &str) -> io::Result<Option<User>> {
    let c_name = c_name(name, "user name")?;
    with_buffer(|buf| {
        // SAFETY: an all-zero passwd is a valid value of the plain C struct; the call
        // fills it with pointers into `buf`, which outlives every use of them below.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to live memory of the stated size; the result is
        // written to `found` (null when there is no such user).
        let r = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                &mut pw,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if r != 0 {
            return Err(r);
        }
        if found.is_null() {
            return Ok(None);
        }
        // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`.
        let name = unsafe { CStr::from_ptr(pw.pw_name) }
            .to_string_lossy()
            .into_owned();
        Ok(Some(User {
            name,
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        }))
    })
}

/// Looks a group `name` up in the group database (`getgrnam_r`: /etc/group, NSS) and
/// gives its id. `Ok(None)` when there is no such group.
pub fn lookup_group(name: &str) -> io::Result<Option<u32>> {
    let c_name = c_name(name, "group name")?;
    with_buffer(|buf| {
        // SAFETY: an all-zero group is a valid value of the plain C struct; the call
        // fills it with pointers into `buf` (only the id, a number, is read after).
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: every pointer is to live memory of the stated size; the result is
        // written to `found` (null when there is no such group).
        let r = unsafe {
            libc::getgrnam_r(
                c_name.as_ptr(),
                &mut gr,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match r {
            0 => Ok((!found.is_null()).then_some(gr.gr_gid)),
            e => Err(e),
        }
    })
}

/// Becomes `user` for good: supplementary groups cleared, then the group, then the user
/// (real, effective and saved ids, so root cannot be taken back), and checks that it
/// held. The process must be root (or hold `CAP_SETUID` and `CAP_SETGID`). glibc applies
/// each change to every thread of the process.
pub fn become_user(user: &User) -> io::Result<()> {
    // SAFETY: setgroups with a count of 0 reads no memory.
    crate::cvt(unsafe { libc::setgroups(0, std::ptr::null()) })?;
    // SAFETY: plain id arguments.
    crate::cvt(unsafe { libc::setresgid(user.gid, user.gid, user.gid) })?;
    // SAFETY: plain id arguments.
    crate::cvt(unsafe { libc::setresuid(user.uid, user.uid, user.uid) })?;
    // SAFETY: these cannot fail and touch no memory.
    let (uid, euid, gid) = unsafe { (libc::getuid(), libc::geteuid(), libc::getgid()) };
    if (uid, euid, gid) != (user.uid, user.uid, user.gid) {
        return Err(io::Error::other(format!(
            "still uid {uid}, euid {euid}, gid {gid} after becoming {}",
            user.name
        )));
    }
    // Root must be out of reach now.
    // SAFETY: plain id argument; a failure is what is expected.
    if user.uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(io::Error::other("root could be taken back"));
    }
    Ok(())
}

/// Runs `f` on a thread of its own with `user`'s identity as [`become_user`] leaves the
/// process (no supplementary groups, its group, its user, no capabilities), and gives
/// its result: what `f` opens is judged as the server would judge it once it has
/// become `user` (`serve --check` as root with `--user`). The changes are the kernel's
/// per-thread calls made directly (glibc's wrappers would apply them to every thread
/// of the process), and the thread ends with `f`: no other thread is touched. The
/// process must be root.
///
/// On 32-bit targets the raw calls here are the old 16-bit ones (`setresuid32` and its
/// kin are what glibc uses there): this says it cannot, and the caller judges as itself.
#[cfg(not(target_pointer_width = "64"))]
pub fn as_user<T: Send>(_user: &User, _f: impl FnOnce() -> T + Send) -> io::Result<T> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "per-thread identities are taken on 64-bit targets alone",
    ))
}

/// See the 32-bit version's text: this is the working one.
#[cfg(target_pointer_width = "64")]
pub fn as_user<T: Send>(user: &User, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let take = |r: libc::c_long| {
        if r == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: the raw setgroups with a count of 0 reads no memory and changes
            // this thread's credentials alone.
            take(unsafe {
                libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>())
            })?;
            // SAFETY: plain id arguments; this thread's credentials alone.
            take(unsafe { libc::syscall(libc::SYS_setresgid, user.gid, user.gid, user.gid) })?;
            // SAFETY: plain id arguments; this thread's credentials alone (and, leaving
            // uid 0, its capabilities).
            take(unsafe { libc::syscall(libc::SYS_setresuid, user.uid, user.uid, user.uid) })?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the thread of the user's checks panicked")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_missing_users() {
        let root = lookup("root").unwrap().expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(lookup("no-such-user-linerate").unwrap(), None);
        assert!(lookup("a\0b").is_err());
    }

    #[test]
    fn root_and_missing_groups() {
        assert_eq!(lookup_group("root").unwrap(), Some(0));
        assert_eq!(lookup_group("no-such-group-linerate").unwrap(), None);
        assert!(lookup_group("a\0b").is_err());
    }
}
