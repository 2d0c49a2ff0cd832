//! Connections served on the CPU that receives them: a program for a `SO_REUSEPORT`
//! group that picks, for each new connection, the listener of the worker pinned to the
//! CPU processing the connection's SYN, and the socket option that says which CPU
//! processed a socket's packets.
//!
//! The program is classic BPF (`SO_ATTACH_REUSEPORT_CBPF`): it loads the CPU number
//! (`SKF_AD_CPU`) and compares it with each CPU that has a listener, returning that
//! listener's index in the group (the order in which the group's sockets began to
//! listen). A CPU with none returns an index past the group, and the kernel then picks
//! by the connection's hash, as with no program. One program serves the whole group;
//! attaching another replaces it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// `SO_ATTACH_REUSEPORT_CBPF` and `SO_DETACH_REUSEPORT_BPF`.
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;
const SO_DETACH_REUSEPORT_BPF: libc::c_int = 68;
/// Classic BPF opcodes and the ancillary CPU load.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
const SKF_AD_OFF: i32 = -0x1000;
const SKF_AD_CPU: i32 = 36;
/// An index no group has: the kernel falls back to the hash.
const NO_INDEX: u32 = u32::MAX;
/// Classic BPF programs hold at most this many instructions (`BPF_MAXINSNS`).
const MAX_INSNS: usize = 4096;

/// The program that sends a connection whose SYN CPU `cpu` processed to listener
/// `index`, for each `(cpu, index)` of `routes`; any other CPU, to the kernel's hash.
/// `None` when it would not fit a classic BPF program.
pub fn cpu_program(routes: &[(u32, u32)]) -> Option<Vec<libc::sock_filter>> {
    if 2 + 2 * routes.len() > MAX_INSNS {
        return None;
    }
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut p = vec![insn(BPF_LD_W_ABS, 0, 0, (SKF_AD_OFF + SKF_AD_CPU) as u32)];
    for &(cpu, index) in routes {
        // Equal: the next instruction returns the index; not: skip it.
        p.push(insn(BPF_JEQ_K, 0, 1, cpu));
        p.push(insn(BPF_RET_K, 0, 0, index));
    }
    p.push(insn(BPF_RET_K, 0, 0, NO_INDEX));
    Some(p)
}

/// Attaches `program` ([`cpu_program`]) to the `SO_REUSEPORT` group of the listening
/// socket `fd`.
pub fn attach(fd: BorrowedFd<'_>, program: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "program too long"))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies `len` instructions from `filter`, a live slice, during
    // the call; `prog` lives across it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Takes a group's program off, best effort. A kernel before 5.3 has no option for
/// that (`ENOPROTOOPT`): there a program that names no listener (the hash picks) takes
/// its place. A group with none (`ENOENT`) is left as it is.
pub fn take_off(fd: BorrowedFd<'_>) {
    if let Err(e) = detach(fd) {
        if e.raw_os_error() == Some(libc::ENOPROTOOPT) {
            if let Some(p) = cpu_program(&[]) {
                let _ = attach(fd, &p);
            }
        }
    }
}

/// Takes the group's program away (`ENOENT` when there is none).
pub fn detach(fd: BorrowedFd<'_>) -> io::Result<()> {
    let zero: libc::c_int = 0;
    // SAFETY: the kernel reads one int from a live local (and ignores it).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_DETACH_REUSEPORT_BPF,
            (&zero as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// The CPU that last processed the packets of socket `fd` (`SO_INCOMING_CPU`); for a
/// connection just accepted, the one that processed its handshake. `None` when the
/// kernel has not recorded one.
pub fn incoming_cpu(fd: BorrowedFd<'_>) -> io::Result<Option<usize>> {
    let v = crate::net::get_option(fd, crate::net::SockOpt::IncomingCpu)?;
    Ok(usize::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_constants_are_the_kernels() {
        assert_eq!(libc::SO_ATTACH_REUSEPORT_CBPF, SO_ATTACH_REUSEPORT_CBPF);
        assert_eq!(libc::SO_DETACH_REUSEPORT_BPF, SO_DETACH_REUSEPORT_BPF);
        assert_eq!(libc::SKF_AD_OFF, SKF_AD_OFF);
        assert_eq!(libc::SKF_AD_CPU, SKF_AD_CPU);
        assert_eq!(
            (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            BPF_LD_W_ABS
        );
        assert_eq!(
            (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            BPF_JEQ_K
        );
        assert_eq!((libc::BPF_RET | libc::BPF_K) as u16, BPF_RET_K);
    }

    #[test]
    fn the_program_has_a_test_and_a_return_per_cpu() {
        let p = cpu_program(&[(2, 0), (3, 1)]).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!((p[1].code, p[1].k, p[1].jt, p[1].jf), (BPF_JEQ_K, 2, 0, 1));
        assert_eq!((p[2].code, p[2].k), (BPF_RET_K, 0));
        assert_eq!((p[4].code, p[4].k), (BPF_RET_K, 1));
        assert_eq!((p[5].code, p[5].k), (BPF_RET_K, NO_INDEX));
        assert!(cpu_program(&vec![(0, 0); 2047]).is_some());
        assert!(cpu_program(&vec![(0, 0); 2048]).is_none());
    }

    /// Two listeners in one group, the program sending every CPU's connections to the
    /// second: a connection from any CPU lands there, and its socket names the CPU that
    /// took its handshake.
    #[test]
    fn a_group_with_the_program_sends_each_cpu_to_its_listener() {
        let listen = || {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_reuse_port(true).unwrap();
            s
        };
        let a = listen();
        a.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        a.listen(16).unwrap();
        let addr = a.local_addr().unwrap().as_socket().unwrap();
        let b = listen();
        b.bind(&addr.into()).unwrap();
        b.listen(16).unwrap();
        let cpus = crate::cpu::allowed_cpus().unwrap();
        let routes: Vec<(u32, u32)> = cpus.iter().map(|&c| (c as u32, 1)).collect();
        attach(a.as_fd(), &cpu_program(&routes).unwrap()).unwrap();
        b.set_nonblocking(true).unwrap();
        a.set_nonblocking(true).unwrap();
        let mut clients = Vec::new();
        for _ in 0..8 {
            clients.push(std::net::TcpStream::connect(addr).unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut on_b = 0;
        while let Ok((s, _)) = b.accept() {
            let cpu = incoming_cpu(s.as_fd()).unwrap();
            assert!(cpu.is_some_and(|c| cpus.contains(&c)), "{cpu:?}");
            on_b += 1;
        }
        assert_eq!(
            on_b, 8,
            "every connection to the listener the program named"
        );
        assert!(a.accept().is_err(), "none to the other");
        // Without the program the hash spreads them again.
        detach(a.as_fd()).unwrap();
        assert!(detach(a.as_fd()).is_err(), "nothing left to take away");
    }
}
