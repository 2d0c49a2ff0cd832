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
//!
//! For QUIC's UDP sockets a second program ([`quic_program`]) routes by connection ID:
//! it reads the first byte of the destination connection ID, which this server's IDs
//! set to the index of the socket that owns the connection, and returns it; a new
//! connection (an Initial or 0-RTT packet, whose ID the client chose) gets no index,
//! so the hash picks. For a UDP group the kernel runs the program on the datagram's
//! payload (the UDP header pulled), so offset 0 is the QUIC packet's first byte.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// `SO_ATTACH_REUSEPORT_CBPF` and `SO_DETACH_REUSEPORT_BPF`.
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;
const SO_DETACH_REUSEPORT_BPF: libc::c_int = 68;
/// Classic BPF opcodes and the ancillary CPU load.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_LD_B_ABS: u16 = 0x30;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JSET_K: u16 = 0x45;
const BPF_AND_K: u16 = 0x54;
const BPF_ADD_K: u16 = 0x04;
const BPF_SUB_K: u16 = 0x14;
const BPF_MOD_K: u16 = 0x94;
const BPF_RET_K: u16 = 0x06;
const BPF_RET_A: u16 = 0x16;
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

/// The program that sends each QUIC datagram to the socket its destination connection
/// ID names in its first byte (the socket's index in the group): a short header's ID
/// begins at the packet's second byte; a Handshake packet's after the version and the
/// ID's length, when that is `cid_len`. An Initial or 0-RTT packet goes to one of the
/// `count` sockets from index `base` (this process's), by its ID's first byte: the
/// client's random choice at first, picking one of them, then the server's, naming the
/// one that took the connection (`base + (byte - base) mod count` is the byte itself
/// there). A Retry or other long header, and an index past the group, go to the
/// kernel's hash. A datagram too short to hold the byte read ends the program with 0,
/// the first socket (whose endpoint hands on what is not its own).
pub fn quic_program(cid_len: u8, base: u8, count: u8) -> Vec<libc::sock_filter> {
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        // 0: the first byte; the long header bit set: to 4.
        insn(BPF_LD_B_ABS, 0, 0, 0),
        insn(BPF_JSET_K, 2, 0, 0x80),
        // 2: a short header: the ID's first byte is the index.
        insn(BPF_LD_B_ABS, 0, 0, 1),
        insn(BPF_RET_A, 0, 0, 0),
        // 4: the long packet type's two bits; not Handshake (2): to 10.
        insn(BPF_AND_K, 0, 0, 0x30),
        insn(BPF_JEQ_K, 0, 4, 0x20),
        // 6: the ID's length (else to 16), then its first byte.
        insn(BPF_LD_B_ABS, 0, 0, 5),
        insn(BPF_JEQ_K, 0, 8, u32::from(cid_len)),
        insn(BPF_LD_B_ABS, 0, 0, 6),
        insn(BPF_RET_A, 0, 0, 0),
        // 10: a Retry (3): to 16. An Initial or 0-RTT: one of this process's sockets.
        insn(BPF_JEQ_K, 5, 0, 0x30),
        insn(BPF_LD_B_ABS, 0, 0, 6),
        insn(BPF_SUB_K, 0, 0, u32::from(base)),
        insn(BPF_MOD_K, 0, 0, u32::from(count.max(1))),
        insn(BPF_ADD_K, 0, 0, u32::from(base)),
        insn(BPF_RET_A, 0, 0, 0),
        // 16: the hash picks.
        insn(BPF_RET_K, 0, 0, NO_INDEX),
    ]
}

/// Attaches `program` ([`cpu_program`], [`quic_program`]) to the `SO_REUSEPORT` group of the listening
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

    /// `n` sockets of type `ty` in one `SO_REUSEPORT` group, bound in order to one
    /// loopback port, non-blocking; and the port's address.
    fn group(ty: socket2::Type, n: usize) -> (Vec<socket2::Socket>, std::net::SocketAddr) {
        let mut addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let mut group = Vec::new();
        for _ in 0..n {
            let s = socket2::Socket::new(socket2::Domain::IPV4, ty, None).unwrap();
            s.set_reuse_port(true).unwrap();
            s.set_nonblocking(true).unwrap();
            s.bind(&addr.into()).unwrap();
            addr = s.local_addr().unwrap().as_socket().unwrap();
            group.push(s);
        }
        (group, addr)
    }

    #[test]
    fn the_constants_are_the_kernels() {
        assert_eq!(libc::SO_ATTACH_REUSEPORT_CBPF, SO_ATTACH_REUSEPORT_CBPF);
        assert_eq!(libc::SO_DETACH_REUSEPORT_BPF, SO_DETACH_REUSEPORT_BPF);
        assert_eq!(libc::SKF_AD_OFF, SKF_AD_OFF);
        assert_eq!(libc::SKF_AD_CPU, SKF_AD_CPU);
        let opcodes = [
            (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, BPF_LD_W_ABS),
            (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, BPF_LD_B_ABS),
            (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, BPF_JEQ_K),
            (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, BPF_JSET_K),
            (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, BPF_AND_K),
            (libc::BPF_ALU | libc::BPF_ADD | libc::BPF_K, BPF_ADD_K),
            (libc::BPF_ALU | libc::BPF_SUB | libc::BPF_K, BPF_SUB_K),
            (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, BPF_MOD_K),
            (libc::BPF_RET | libc::BPF_K, BPF_RET_K),
            (libc::BPF_RET | libc::BPF_A, BPF_RET_A),
        ];
        for (kernel, ours) in opcodes {
            assert_eq!(kernel as u16, ours);
        }
    }

    /// Four UDP sockets in one group with the QUIC program: from any source port, a
    /// short header datagram and a Handshake packet reach the socket their ID's first
    /// byte names; an Initial, one of the program's sockets by that byte; a Retry, an
    /// index past the group and a datagram of one byte, some socket of the group (the
    /// hash, or the first).
    #[test]
    fn a_quic_datagram_reaches_the_socket_its_connection_id_names() {
        let (group, addr) = group(socket2::Type::DGRAM, 4);
        let read_by = |group: &[socket2::Socket]| -> Vec<usize> {
            std::thread::sleep(std::time::Duration::from_millis(5));
            let mut by = Vec::new();
            for (i, s) in group.iter().enumerate() {
                let mut b = [std::mem::MaybeUninit::new(0u8); 64];
                while s.recv(&mut b).is_ok() {
                    by.push(i);
                }
            }
            by
        };
        let initial = |b: u8| [0xc0, 0, 0, 0, 1, 8, b, 9, 9, 9, 9, 9, 9, 9, 0];
        // The whole group this process's; then its last two (the first two another's).
        for (base, count) in [(0u8, 4u8), (2, 2)] {
            attach(group[0].as_fd(), &quic_program(8, base, count)).unwrap();
            for port in 0..16u8 {
                let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let index = port % 4;
                let short = [0x40, index, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3];
                c.send_to(&short, addr).unwrap();
                assert_eq!(read_by(&group), [usize::from(index)], "a short header");
                let hs = [0xe0, 0, 0, 0, 1, 8, index, 9, 9, 9, 9, 9, 9, 9, 0];
                c.send_to(&hs, addr).unwrap();
                assert_eq!(read_by(&group), [usize::from(index)], "a Handshake");
                let random = port.wrapping_mul(37);
                c.send_to(&initial(random), addr).unwrap();
                let picked = usize::from(base + random.wrapping_sub(base) % count);
                let by = read_by(&group);
                assert_eq!(by, [picked], "an Initial of {random}, {base}+{count}");
                assert!(by[0] >= usize::from(base), "one of the program's");
                if index >= base {
                    c.send_to(&initial(index), addr).unwrap();
                    assert_eq!(read_by(&group), [usize::from(index)], "the server's ID");
                }
                for other in [
                    &[0xf0, 0, 0, 0, 1, 8, 3, 9, 9, 9, 9, 9, 9, 9, 0][..],
                    &[0x40, 7, 9, 9, 9, 9, 9, 9, 9][..],
                    &[0x40][..],
                ] {
                    c.send_to(other, addr).unwrap();
                    assert_eq!(read_by(&group).len(), 1, "{other:?} read once");
                }
            }
        }
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
        let (group, addr) = group(socket2::Type::STREAM, 2);
        let [a, b] = &group[..] else { unreachable!() };
        a.listen(16).unwrap();
        b.listen(16).unwrap();
        let cpus = crate::cpu::allowed_cpus().unwrap();
        let routes: Vec<(u32, u32)> = cpus.iter().map(|&c| (c as u32, 1)).collect();
        attach(a.as_fd(), &cpu_program(&routes).unwrap()).unwrap();
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
