//! UDP for QUIC: one `sendmsg(2)` carries a batch of equal datagrams (`UDP_SEGMENT`,
//! generic segmentation offload: the kernel cuts the buffer into datagrams of the given
//! size after routing it once), and one `recvmsg(2)` takes a batch the kernel coalesced
//! (`UDP_GRO`), with the ECN bits of the packets (`IP_TOS`/`IPV6_TCLASS`) and the local
//! address they came to (`IP_PKTINFO`/`IPV6_PKTINFO`), which a socket bound to a
//! wildcard address needs to answer from the address the client used.
//!
//! This is seed 000's batching on the datagram side: a QUIC sender that writes one
//! datagram per call pays the whole stack once per 1,200 bytes; a GSO batch pays it
//! once per 64 datagrams at most ([`MAX_SEGMENTS`]).
//!
//! The socket itself is made by the caller (`socket2`, as the TCP listeners are);
//! [`prepare`] sets the options here and says which the kernel took. Read beside
//! quinn-udp's Linux code (learned from, not copied).

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt_size;
use crate::net::{get_int, set_int};

/// The most datagrams one GSO send carries here: the kernel's `UDP_MAX_SEGMENTS`
/// before Linux 6.11 (128 since), so a batch is never refused for its count.
pub const MAX_SEGMENTS: usize = 64;

/// The most payload one GSO send may carry: the batch is one IP packet to the kernel
/// until it is cut, so 65,535 bytes less IPv4's 20-byte header and UDP's 8; more is
/// refused whole with `EMSGSIZE` (64 datagrams of 1,452 bytes would be 92,928).
pub const MAX_GSO_BYTES: usize = 65_535 - 20 - 8;

/// Datagrams of `size` bytes one GSO send may carry: as many as [`MAX_GSO_BYTES`]
/// holds, at most [`MAX_SEGMENTS`], at least 1.
pub fn gso_batch(size: usize) -> usize {
    (MAX_GSO_BYTES / size.max(1)).clamp(1, MAX_SEGMENTS)
}

/// The ECN codepoint's two bits of a packet's TOS or traffic class (RFC 3168).
pub const ECN_MASK: u8 = 0b11;

/// What [`prepare`] found the kernel takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// `UDP_SEGMENT` sends (GSO).
    pub gso: bool,
    /// `UDP_GRO` receives.
    pub gro: bool,
}

/// Sets a UDP socket up for QUIC: the ECN bits and the local address of each packet
/// received, the don't-fragment bit on every packet sent (`IP_PMTUDISC_PROBE`: QUIC
/// finds the path's MTU itself), and coalesced receives where the kernel has them.
/// `v6` is the socket's family. The ECN and address options are required; GSO and GRO
/// are reported, as the kernel may lack them.
pub fn prepare(fd: BorrowedFd<'_>, v6: bool) -> io::Result<Features> {
    use libc::{IPPROTO_IP as IP, IPPROTO_IPV6 as IP6};
    let (required, wanted): (&[_], &[_]) = if v6 {
        (
            &[
                (IP6, libc::IPV6_RECVTCLASS, 1),
                (IP6, libc::IPV6_RECVPKTINFO, 1),
                (IP6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE),
            ],
            // A dual-stack socket takes IPv4 packets too: their facts as well (refused
            // on a v6-only socket, which is fine).
            &[(IP, libc::IP_RECVTOS, 1), (IP, libc::IP_PKTINFO, 1)],
        )
    } else {
        (
            &[
                (IP, libc::IP_RECVTOS, 1),
                (IP, libc::IP_PKTINFO, 1),
                (IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE),
            ],
            &[],
        )
    };
    for &(level, name, v) in required {
        set_int(fd, level, name, v)?;
    }
    for &(level, name, v) in wanted {
        let _ = set_int(fd, level, name, v);
    }
    let gro = set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
    let gso = get_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
    Ok(Features { gso, gro })
}

/// A buffer size asked of the kernel and the size it gave (`SO_RCVBUF`/`SO_SNDBUF`
/// are capped by `net.core.rmem_max`/`wmem_max`; the kernel reports twice what it
/// granted, counting its own overhead, so `got` is halved back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSize {
    pub asked: usize,
    pub got: usize,
}

impl BufferSize {
    /// The kernel gave less than was asked: the sysctl caps it.
    pub fn capped(&self) -> bool {
        self.got < self.asked
    }
}

/// Asks for a receive (`send` false) or send buffer of `bytes`, and reads back what the
/// kernel granted.
pub fn buffer(fd: BorrowedFd<'_>, send: bool, bytes: usize) -> io::Result<BufferSize> {
    let name = if send {
        libc::SO_SNDBUF
    } else {
        libc::SO_RCVBUF
    };
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(fd, libc::SOL_SOCKET, name, v)?;
    let got = get_int(fd, libc::SOL_SOCKET, name)?.max(0) as usize / 2;
    Ok(BufferSize { asked: bytes, got })
}

/// One batch to send: `buf` to `to`, as datagrams of `segment` bytes each (the last may
/// be shorter) when `segment` is given, else as one datagram; from `from` (the local
/// address the client wrote to, for a wildcard-bound socket) with the ECN codepoint
/// `ecn`.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub to: SocketAddr,
    pub from: Option<IpAddr>,
    pub ecn: u8,
    pub segment: Option<u16>,
    pub buf: &'a [u8],
}

/// Where and how a batch goes, without its bytes: a [`Batch`] once given them.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    pub to: SocketAddr,
    pub from: Option<IpAddr>,
    pub ecn: u8,
    pub segment: Option<u16>,
}

impl Head {
    /// The batch of `buf` sent so.
    pub fn with(self, buf: &[u8]) -> Batch<'_> {
        Batch {
            to: self.to,
            from: self.from,
            ecn: self.ecn,
            segment: self.segment,
            buf,
        }
    }
}

/// Room for the control messages of one send or receive: a segment size, a TOS or
/// traffic class, and a packet-info record of either family, each with its header.
const CONTROL: usize = 128;

/// A control buffer aligned for `cmsghdr`.
#[repr(C, align(8))]
struct Control([u8; CONTROL]);

/// Sends one batch (`sendmsg(2)`, `MSG_NOSIGNAL`). The kernel refuses a GSO batch with
/// `EIO` where the device cannot segment it, and with `EINVAL` for a segment count or
/// size it does not take: the caller then sends the datagrams one by one (and may stop
/// asking for GSO).
pub fn send(fd: BorrowedFd<'_>, b: &Batch<'_>) -> io::Result<usize> {
    let mut m = Message::default();
    m.build(b, b.buf.as_ptr(), b.buf.len());
    // SAFETY: `m.msg` points at `m`'s own name, iovec and control buffer, alive and
    // unmoved for the call, and the iovec at `b.buf`, borrowed for it; the kernel only
    // reads them.
    cvt_size(unsafe { libc::sendmsg(fd.as_raw_fd(), &m.msg, libc::MSG_NOSIGNAL) })
}

/// A `sendmsg` header with what it names beside it: the address, one iovec, the
/// control messages. A send on io_uring keeps one (boxed, with the bytes) until its
/// completion, so nothing it names moves or goes while the kernel reads it.
pub struct Message {
    pub msg: libc::msghdr,
    name: libc::sockaddr_storage,
    iov: libc::iovec,
    control: Control,
}

impl Default for Message {
    fn default() -> Message {
        // SAFETY: msghdr, sockaddr_storage and iovec are plain data; all-zero is valid
        // (an empty header, no address, an empty iovec).
        unsafe {
            Message {
                msg: zeroed(),
                name: zeroed(),
                iov: zeroed(),
                control: Control([0; CONTROL]),
            }
        }
    }
}

impl Message {
    /// Sets the header for batch `b` (its address, ECN codepoint, segment size, source
    /// address) with the `len` bytes at `bytes` as its payload. The header points into
    /// `self`: it is valid while `self` does not move, and the payload while the
    /// memory at `bytes` lives.
    pub fn build(&mut self, b: &Batch<'_>, bytes: *const u8, len: usize) {
        let (name, name_len) = sockaddr(b.to);
        self.name = name;
        self.iov = libc::iovec {
            iov_base: bytes as *mut libc::c_void,
            iov_len: len,
        };
        self.control = Control([0; CONTROL]);
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        self.msg = unsafe { zeroed() };
        self.msg.msg_name = (&mut self.name as *mut libc::sockaddr_storage).cast();
        self.msg.msg_namelen = name_len;
        self.msg.msg_iov = &mut self.iov;
        self.msg.msg_iovlen = 1;
        self.msg.msg_control = self.control.0.as_mut_ptr().cast();
        self.msg.msg_controllen = CONTROL as _;
        let mut w = ControlWriter::new(&mut self.msg);
        let v6 = b.to.is_ipv6();
        if v6 {
            w.put(
                libc::IPPROTO_IPV6,
                libc::IPV6_TCLASS,
                libc::c_int::from(b.ecn),
            );
        } else {
            w.put(libc::IPPROTO_IP, libc::IP_TOS, libc::c_int::from(b.ecn));
        }
        if let Some(seg) = b.segment {
            w.put(libc::SOL_UDP, libc::UDP_SEGMENT, seg);
        }
        match b.from {
            Some(IpAddr::V4(ip)) if !v6 => {
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from_ne_bytes(ip.octets()),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                w.put(libc::IPPROTO_IP, libc::IP_PKTINFO, info);
            }
            Some(ip) if v6 => {
                let ip = match ip {
                    IpAddr::V6(ip) => ip,
                    IpAddr::V4(ip) => ip.to_ipv6_mapped(),
                };
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr {
                        s6_addr: ip.octets(),
                    },
                    ipi6_ifindex: 0,
                };
                w.put(libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, info);
            }
            _ => {}
        }
        w.finish();
    }
}

/// The kernel refused a GSO batch as such (`EIO`: the device cannot segment it;
/// `EINVAL`: a segment count or size it does not take), not the datagrams in it.
pub fn gso_refused(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL))
}

/// Appends control messages to a `msghdr`'s buffer, then sets its length to what was
/// written.
struct ControlWriter<'m> {
    msg: &'m mut libc::msghdr,
    at: *mut libc::cmsghdr,
    len: usize,
}

impl<'m> ControlWriter<'m> {
    fn new(msg: &'m mut libc::msghdr) -> ControlWriter<'m> {
        // SAFETY: `msg` has a control buffer of `msg_controllen` bytes, aligned.
        let at = unsafe { libc::CMSG_FIRSTHDR(msg) };
        ControlWriter { msg, at, len: 0 }
    }

    /// One control message holding `value`.
    fn put<T: Copy>(&mut self, level: libc::c_int, kind: libc::c_int, value: T) {
        // SAFETY: CMSG_SPACE is a pure computation on a size.
        let space = unsafe { libc::CMSG_SPACE(size_of::<T>() as u32) } as usize;
        assert!(
            !self.at.is_null() && self.len + space <= self.msg.msg_controllen,
            "the control buffer holds every message a send writes"
        );
        // SAFETY: `at` points at a cmsghdr within the control buffer with room for
        // `space` bytes (checked above); CMSG_DATA points past its header within it, and
        // the unaligned write copies `value` there.
        unsafe {
            (*self.at).cmsg_level = level;
            (*self.at).cmsg_type = kind;
            (*self.at).cmsg_len = libc::CMSG_LEN(size_of::<T>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(self.at).cast::<T>(), value);
        }
        self.len += space;
        // SAFETY: `msg` and `at` are valid; CMSG_NXTHDR returns the next header within
        // the buffer or null. The length is set first, as CMSG_NXTHDR reads it.
        self.at = unsafe { libc::CMSG_NXTHDR(self.msg, self.at) };
    }

    fn finish(self) {
        self.msg.msg_controllen = self.len as _;
        if self.len == 0 {
            self.msg.msg_control = std::ptr::null_mut();
        }
    }
}

/// What one receive brought.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes written to the buffer: one datagram, or with GRO several of `segment`
    /// bytes each (the last may be shorter).
    pub len: usize,
    pub from: SocketAddr,
    /// The local address the packets came to.
    pub to: Option<IpAddr>,
    /// Their ECN codepoint.
    pub ecn: u8,
    /// The size of each coalesced datagram (GRO), when the kernel coalesced.
    pub segment: Option<usize>,
    /// The datagram was longer than the buffer and was cut.
    pub truncated: bool,
}

/// Receives one datagram, or one coalesced batch of them (`recvmsg(2)`, never blocking:
/// `EAGAIN` when there is none).
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut name: libc::sockaddr_storage = unsafe { zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = Control([0; CONTROL]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as _;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL as _;
    // SAFETY: `msg` points at the live name, iovec (borrowing `buf`, writable for its
    // length) and control buffer above for the call.
    let len = cvt_size(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) })?;
    let from = socket_addr(&name)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "sender of no IP family"))?;
    let mut r = Received {
        len,
        from,
        to: None,
        ecn: 0,
        segment: None,
        truncated: msg.msg_flags & libc::MSG_TRUNC != 0,
    };
    read_control(&msg, &mut r);
    Ok(r)
}

/// The header a receive on io_uring names (`IORING_OP_RECVMSG`, multishot): room for an
/// address and [`CONTROL`] bytes of control messages, no iovec (the payload goes to a
/// provided buffer, after the kernel's `io_uring_recvmsg_out`, the address and the
/// control messages).
pub fn receive_header() -> libc::msghdr {
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as _;
    msg.msg_controllen = CONTROL as _;
    msg
}

/// A datagram (or a GRO batch) a receive on io_uring put in a provided buffer: what
/// [`recv`] says of one, from the address and control messages the kernel wrote
/// before it, and its bytes. None if the sender is of no IP family.
pub fn from_ring<'b>(
    name: &[u8],
    control: &[u8],
    payload: &'b [u8],
    truncated: bool,
) -> Option<(Received, &'b [u8])> {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let n = name.len().min(size_of::<libc::sockaddr_storage>());
    // SAFETY: at most the storage's size is copied into it from the slice.
    unsafe {
        std::ptr::copy_nonoverlapping(
            name.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            n,
        );
    }
    let from = socket_addr(&storage)?;
    let mut r = Received {
        len: payload.len(),
        from,
        to: None,
        ecn: 0,
        segment: None,
        truncated,
    };
    // The control messages, copied to an aligned buffer for CMSG_FIRSTHDR/NXTHDR.
    let mut aligned = Control([0; CONTROL]);
    let n = control.len().min(CONTROL);
    aligned.0[..n].copy_from_slice(&control[..n]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_control = aligned.0.as_mut_ptr().cast();
    msg.msg_controllen = n as _;
    read_control(&msg, &mut r);
    Some((r, payload))
}

/// Reads what a receive's control messages say (ECN, local address, GRO segment size)
/// into `r`. `msg`'s control buffer holds `msg_controllen` bytes of well-formed control
/// messages, as the kernel writes them.
fn read_control(msg: &libc::msghdr, r: &mut Received) {
    if msg.msg_controllen == 0 {
        return;
    }
    // SAFETY: the control buffer holds `msg_controllen` bytes of well-formed control
    // messages (the kernel wrote them); CMSG_FIRSTHDR/NXTHDR walk them within it.
    let mut at = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !at.is_null() {
        // SAFETY: `at` is a control message header within the buffer (see above).
        let (level, kind) = unsafe { ((*at).cmsg_level, (*at).cmsg_type) };
        // SAFETY: CMSG_DATA points at the message's data within the buffer; each read
        // below is of the type the kernel writes for that level and type, unaligned.
        let data = unsafe { libc::CMSG_DATA(at) };
        // SAFETY: as above, per the (level, type) the kernel documents.
        unsafe {
            match (level, kind) {
                (libc::IPPROTO_IP, libc::IP_TOS) => r.ecn = data.read() & ECN_MASK,
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    r.ecn = (data.cast::<libc::c_int>().read_unaligned() as u8) & ECN_MASK;
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                    let info = data.cast::<libc::in_pktinfo>().read_unaligned();
                    let ip = Ipv4Addr::from(info.ipi_addr.s_addr.to_ne_bytes());
                    r.to = Some(IpAddr::V4(ip));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                    let info = data.cast::<libc::in6_pktinfo>().read_unaligned();
                    r.to = Some(IpAddr::V6(Ipv6Addr::from(info.ipi6_addr.s6_addr)));
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let seg = data.cast::<libc::c_int>().read_unaligned();
                    r.segment = usize::try_from(seg).ok().filter(|&s| s > 0);
                }
                _ => {}
            }
        }
        // SAFETY: `msg` and `at` are valid (see above); null past the last message.
        at = unsafe { libc::CMSG_NXTHDR(msg, at) };
    }
}

/// `addr` as the kernel's socket address and its length.
fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut s: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (s, len as libc::socklen_t)
}

/// The kernel's socket address as a `SocketAddr` (an IPv4-mapped IPv6 sender as
/// itself: the caller answers to the same form).
fn socket_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match libc::c_int::from(s.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { *(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { *(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;
    use std::time::Duration;

    fn pair(local: &str) -> (UdpSocket, UdpSocket, Features) {
        let a = UdpSocket::bind(local).unwrap();
        let b = UdpSocket::bind(local).unwrap();
        let v6 = local.starts_with('[');
        prepare(a.as_fd(), v6).unwrap();
        let f = prepare(b.as_fd(), v6).unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        (a, b, f)
    }

    /// Waits until `sock` has something, then receives it.
    fn recv_wait(sock: &UdpSocket, buf: &mut [u8]) -> Received {
        for _ in 0..200 {
            match recv(sock.as_fd(), buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                r => return r.unwrap(),
            }
        }
        panic!("nothing received");
    }

    #[test]
    fn a_datagram_carries_its_ecn_and_local_address_both_ways() {
        for local in ["127.0.0.1:0", "[::1]:0"] {
            let (a, b, _) = pair(local);
            let to = b.local_addr().unwrap();
            let batch = Batch {
                to,
                from: Some(to.ip()),
                ecn: 0b10,
                segment: None,
                buf: b"hello",
            };
            assert_eq!(send(a.as_fd(), &batch).unwrap(), 5);
            let mut buf = [0u8; 2048];
            let r = recv_wait(&b, &mut buf);
            assert_eq!(&buf[..r.len], b"hello");
            assert_eq!(r.from, a.local_addr().unwrap(), "{local}");
            assert_eq!(r.to, Some(to.ip()), "{local}");
            assert_eq!(r.ecn, 0b10, "ECT(0) as sent, {local}");
            assert!(!r.truncated);
        }
    }

    /// The kernel takes a GSO batch of [`gso_batch`]'s count and refuses one past
    /// [`MAX_GSO_BYTES`] whole (its 64 datagrams of 1,452 bytes would all be lost).
    #[test]
    fn a_gso_batch_is_at_most_one_ip_packet_of_payload() {
        assert_eq!(gso_batch(1452), 45);
        assert_eq!(gso_batch(1200), 54);
        assert_eq!(gso_batch(1000), MAX_SEGMENTS);
        assert_eq!(gso_batch(0), MAX_SEGMENTS);
        assert_eq!(gso_batch(70_000), 1);
        let (a, b, f) = pair("127.0.0.1:0");
        if !f.gso {
            eprintln!("no UDP_SEGMENT on this kernel: nothing to test");
            return;
        }
        let to = b.local_addr().unwrap();
        let data = vec![7u8; MAX_SEGMENTS * 1452];
        let batch = |n: usize| Batch {
            to,
            from: None,
            ecn: 0,
            segment: Some(1452),
            buf: &data[..n * 1452],
        };
        let n = gso_batch(1452);
        assert_eq!(send(a.as_fd(), &batch(n)).unwrap(), n * 1452);
        let e = send(a.as_fd(), &batch(n + 1)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EMSGSIZE), "{e}");
    }

    #[test]
    fn a_gso_batch_arrives_as_its_datagrams_or_coalesced_with_its_size() {
        let (a, b, f) = pair("127.0.0.1:0");
        if !f.gso {
            eprintln!("no UDP_SEGMENT on this kernel: nothing to test");
            return;
        }
        let to = b.local_addr().unwrap();
        let data: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let batch = Batch {
            to,
            from: None,
            ecn: 0,
            segment: Some(1200),
            buf: &data,
        };
        assert_eq!(send(a.as_fd(), &batch).unwrap(), 3000);
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        let mut buf = vec![0u8; 65536];
        while got.len() < data.len() {
            let r = recv_wait(&b, &mut buf);
            match r.segment {
                Some(seg) => {
                    assert_eq!(seg, 1200, "GRO says each datagram's size");
                    sizes.extend(buf[..r.len].chunks(seg).map(<[u8]>::len));
                }
                None => sizes.push(r.len),
            }
            got.extend_from_slice(&buf[..r.len]);
        }
        assert_eq!(got, data, "the bytes, in order");
        assert_eq!(
            sizes,
            [1200, 1200, 600],
            "three datagrams, the last shorter"
        );
    }

    #[test]
    fn a_segment_size_the_kernel_refuses_is_an_error_not_a_send() {
        let (a, b, f) = pair("127.0.0.1:0");
        if !f.gso {
            return;
        }
        // A thousand segments in one batch: more than any kernel takes.
        let data = vec![0u8; 10 * 1000];
        let batch = Batch {
            to: b.local_addr().unwrap(),
            from: None,
            ecn: 0,
            segment: Some(10),
            buf: &data,
        };
        let e = send(a.as_fd(), &batch).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
        assert!(gso_refused(&e));
    }

    #[test]
    fn a_buffer_size_reports_what_the_kernel_granted() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let small = buffer(s.as_fd(), false, 64 << 10).unwrap();
        assert_eq!(small.got, 64 << 10);
        assert!(!small.capped());
        let huge = buffer(s.as_fd(), true, 1 << 30).unwrap();
        assert!(huge.capped(), "wmem_max caps 1 GiB: {huge:?}");
    }

    #[test]
    fn an_empty_socket_would_block() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = recv(s.as_fd(), &mut [0u8; 64]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
