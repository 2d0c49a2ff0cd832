//! A seccomp filter that answers `io_uring_setup` with `EPERM`, as the default profiles
//! of Docker and other container runtimes do: how the tests show what `--driver`
//! does where io_uring cannot run.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes `cmd`'s process, once started, unable to set up io_uring: `io_uring_setup`
/// fails with `EPERM`; every other call is allowed. The filter is installed in the
/// child between `fork` and `exec` (with `no_new_privs`, so no privilege is needed).
pub fn refuse_io_uring(cmd: &mut Command) {
    const NR_OFFSET: u32 = 0; // seccomp_data.nr
    let code = |c: u32| c as u16;
    let filter: [libc::sock_filter; 4] = [
        libc::sock_filter {
            code: code(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS),
            jt: 0,
            jf: 0,
            k: NR_OFFSET,
        },
        libc::sock_filter {
            code: code(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K),
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        libc::sock_filter {
            code: code(libc::BPF_RET | libc::BPF_K),
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        },
        libc::sock_filter {
            code: code(libc::BPF_RET | libc::BPF_K),
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two `prctl` calls and touches
    // nothing but the filter it owns (moved in, no allocation).
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY (of the call): `prog` points at the filter, alive for the call;
            // the kernel copies it.
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filtered_child_cannot_set_up_io_uring_and_others_are_unaffected() {
        // `linerate-sys`'s own test binary, asked to run only the probe below.
        let me = std::env::current_exe().unwrap();
        let mut cmd = Command::new(&me);
        cmd.args([
            "--exact",
            "seccomp::tests::probe_child",
            "--ignored",
            "--nocapture",
        ]);
        refuse_io_uring(&mut cmd);
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("io_uring: Operation not permitted"), "{text}");
        assert!(crate::uring::Ring::new(4).is_ok(), "this process still can");
    }

    /// Run by the test above in a filtered child.
    #[test]
    #[ignore]
    fn probe_child() {
        match crate::uring::Ring::new(4) {
            Ok(_) => println!("io_uring: set up"),
            Err(e) => println!("io_uring: {e}"),
        }
    }
}
