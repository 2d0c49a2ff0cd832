//! Kernel TLS: handing a TLS 1.3 session's record keys to a TCP socket, so that what
//! is written to the socket (`send`, `sendfile`, `splice`) leaves as encrypted records
//! and what is read from it arrives decrypted.
//!
//! After the handshake (done in user space), the socket takes the "tls" upper-layer
//! protocol ([`crate::net::set_tcp_ulp`]) and then one key per direction
//! ([`set_keys`]): the AEAD key, its 12-byte nonce base and the sequence number of the
//! next record. The kernel forms each record's nonce as TLS 1.3 does (RFC 8446, 5.3):
//! the base XOR the 64-bit sequence number, right-aligned. The layouts are
//! `linux/tls.h`'s `tls12_crypto_info_*` structures (taken from `libc`), which split the
//! base into a 4-byte `salt` and an 8-byte `iv` for AES-GCM and keep it whole for
//! ChaCha20-Poly1305.
//!
//! Only TLS 1.3 is handed over. For TLS 1.2 with AES-GCM the kernel writes an explicit
//! nonce that it counts up from the one given, while rustls XORs the sequence number
//! into it: the two series could meet, and a nonce used twice under one key breaks
//! GCM. TLS 1.2 connections stay in user space.
//!
//! Messages that are not application data (the close_notify alert) are written with
//! [`send_close_notify`]: one `sendmsg` carrying the record type in a control message.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::cvt;

/// `SOL_TLS` and its two directions.
const SOL_TLS: libc::c_int = 282;
const TLS_TX: libc::c_int = 1;
const TLS_RX: libc::c_int = 2;
/// The control message that sets the type of the record `sendmsg` writes, and the one
/// that tells the type of the record `recvmsg` read.
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;
/// The application-data record type.
const APPLICATION_DATA: u8 = 23;
/// TLS 1.3 in the kernel's encoding (major 3, minor 4).
const TLS_1_3_VERSION: u16 = 0x0304;
/// Cipher numbers of `linux/tls.h`.
const TLS_CIPHER_AES_GCM_128: u16 = 51;
const TLS_CIPHER_AES_GCM_256: u16 = 52;
const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;
/// The alert record type.
const ALERT: u8 = 21;

/// The direction a key is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Records the socket writes.
    Transmit,
    /// Records the socket reads.
    Receive,
}

/// A TLS 1.3 AEAD key as the kernel takes it.
#[derive(Clone, PartialEq, Eq)]
pub enum Keys {
    /// AES-128-GCM.
    Aes128Gcm {
        /// The key.
        key: [u8; 16],
        /// The nonce base (the traffic secret's `iv`).
        iv: [u8; 12],
        /// Sequence number of the next record.
        seq: u64,
    },
    /// AES-256-GCM.
    Aes256Gcm {
        /// The key.
        key: [u8; 32],
        /// The nonce base.
        iv: [u8; 12],
        /// Sequence number of the next record.
        seq: u64,
    },
    /// ChaCha20-Poly1305.
    Chacha20Poly1305 {
        /// The key.
        key: [u8; 32],
        /// The nonce base.
        iv: [u8; 12],
        /// Sequence number of the next record.
        seq: u64,
    },
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Key material is never printed.
        f.write_str(self.cipher_name())
    }
}

impl Keys {
    /// The cipher's name.
    pub fn cipher_name(&self) -> &'static str {
        match self {
            Keys::Aes128Gcm { .. } => "AES-128-GCM",
            Keys::Aes256Gcm { .. } => "AES-256-GCM",
            Keys::Chacha20Poly1305 { .. } => "ChaCha20-Poly1305",
        }
    }

    /// The structure `setsockopt(SOL_TLS, ...)` takes, as bytes: what the kernel
    /// reads. [`Keys::from_crypto_info`] reads it back the way the kernel does.
    pub fn crypto_info(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(56);
        out.extend_from_slice(&TLS_1_3_VERSION.to_ne_bytes());
        match self {
            Keys::Aes128Gcm { key, iv, seq } => {
                out.extend_from_slice(&TLS_CIPHER_AES_GCM_128.to_ne_bytes());
                out.extend_from_slice(&iv[4..]);
                out.extend_from_slice(key);
                out.extend_from_slice(&iv[..4]);
                out.extend_from_slice(&seq.to_be_bytes());
            }
            Keys::Aes256Gcm { key, iv, seq } => {
                out.extend_from_slice(&TLS_CIPHER_AES_GCM_256.to_ne_bytes());
                out.extend_from_slice(&iv[4..]);
                out.extend_from_slice(key);
                out.extend_from_slice(&iv[..4]);
                out.extend_from_slice(&seq.to_be_bytes());
            }
            Keys::Chacha20Poly1305 { key, iv, seq } => {
                out.extend_from_slice(&TLS_CIPHER_CHACHA20_POLY1305.to_ne_bytes());
                out.extend_from_slice(iv);
                out.extend_from_slice(key);
                out.extend_from_slice(&seq.to_be_bytes());
            }
        }
        out
    }

    /// Reads a TLS 1.3 `crypto_info` as the kernel does (salt, then iv, form the nonce
    /// base); `None` if it is not one [`Keys::crypto_info`] can write.
    pub fn from_crypto_info(b: &[u8]) -> Option<Keys> {
        let u16_at = |at: usize| Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?));
        if u16_at(0)? != TLS_1_3_VERSION {
            return None;
        }
        let seq_at = |at: usize| Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?));
        let gcm = |key_len: usize| -> Option<([u8; 12], &[u8], u64)> {
            // iv[8] key[K] salt[4] rec_seq[8]
            let (iv, key) = (b.get(4..12)?, b.get(12..12 + key_len)?);
            let salt = b.get(12 + key_len..16 + key_len)?;
            let mut base = [0u8; 12];
            base[..4].copy_from_slice(salt);
            base[4..].copy_from_slice(iv);
            Some((base, key, seq_at(16 + key_len)?))
        };
        match u16_at(2)? {
            TLS_CIPHER_AES_GCM_128 if b.len() == 40 => {
                let (iv, key, seq) = gcm(16)?;
                Some(Keys::Aes128Gcm {
                    key: key.try_into().ok()?,
                    iv,
                    seq,
                })
            }
            TLS_CIPHER_AES_GCM_256 if b.len() == 56 => {
                let (iv, key, seq) = gcm(32)?;
                Some(Keys::Aes256Gcm {
                    key: key.try_into().ok()?,
                    iv,
                    seq,
                })
            }
            // iv[12] key[32] rec_seq[8]
            TLS_CIPHER_CHACHA20_POLY1305 if b.len() == 56 => Some(Keys::Chacha20Poly1305 {
                iv: b.get(4..16)?.try_into().ok()?,
                key: b.get(16..48)?.try_into().ok()?,
                seq: seq_at(48)?,
            }),
            _ => None,
        }
    }
}

/// `setsockopt(SOL_TLS, TLS_TX or TLS_RX, crypto_info)`: the socket encrypts (or
/// decrypts) records with `keys` from now on. The socket must have the "tls"
/// upper-layer protocol already.
pub fn set_keys(fd: BorrowedFd<'_>, dir: Direction, keys: &Keys) -> io::Result<()> {
    let info = keys.crypto_info();
    let name = match dir {
        Direction::Transmit => TLS_TX,
        Direction::Receive => TLS_RX,
    };
    // SAFETY: the kernel reads `info.len()` bytes from a live buffer, laid out as the
    // `tls12_crypto_info_*` structure its cipher number names (checked against libc's
    // definitions in this module's tests).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            SOL_TLS,
            name,
            info.as_ptr().cast(),
            info.len() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// The alert description close_notify, and the warning level it is sent at.
const CLOSE_NOTIFY: u8 = 0;
const WARNING: u8 = 1;

/// Writes the close_notify alert on a socket that encrypts records in the kernel.
pub fn send_close_notify(fd: BorrowedFd<'_>) -> io::Result<()> {
    send_alert(fd, WARNING, CLOSE_NOTIFY)
}

/// Writes one alert record (`level`, `description`) on a socket that encrypts records
/// in the kernel: a `sendmsg` of the two bytes with the record type as a control
/// message.
fn send_alert(fd: BorrowedFd<'_>, level: u8, description: u8) -> io::Result<()> {
    let mut body = [level, description];
    let mut iov = libc::iovec {
        iov_base: body.as_mut_ptr().cast(),
        iov_len: body.len(),
    };
    // u64 elements keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: CMSG_SPACE is a pure computation on a length.
    let space = unsafe { libc::CMSG_SPACE(1) } as usize;
    debug_assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` zeroed, aligned bytes, enough for one
    // cmsghdr with one byte of data, so CMSG_FIRSTHDR is non-null and CMSG_DATA is
    // within the buffer.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = SOL_TLS;
        (*c).cmsg_type = TLS_SET_RECORD_TYPE;
        (*c).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(c) = ALERT;
    }
    // SAFETY: msg and everything it points at (iov, body, control) live across the
    // call; the kernel only reads them.
    let n = crate::cvt_size(unsafe {
        libc::sendmsg(
            fd.as_raw_fd(),
            &msg,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    })?;
    if n != body.len() {
        return Err(io::ErrorKind::WriteZero.into());
    }
    Ok(())
}

/// What [`recv`] read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// `n` bytes of application data (0: the peer closed the connection).
    Data(usize),
    /// The peer's close_notify alert: the end of its stream.
    CloseNotify,
    /// A record of another type (an alert, a handshake message such as KeyUpdate):
    /// its type and the first `n` bytes of its body in the buffer.
    Other {
        /// The record's content type (21 alert, 22 handshake).
        kind: u8,
        /// Bytes of its body in the buffer.
        n: usize,
    },
}

/// `recvmsg` on a socket that decrypts records in the kernel, with room for the record
/// type: a plain `read` fails with `EIO` when the next record is not application data,
/// and the record stays unread; this reads it and says what it was. A socket without
/// kernel TLS gives `Data` always.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64 elements keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: msg points at `buf` (writable, its length) and at the control buffer (its
    // size), both live across the call.
    let n =
        crate::cvt_size(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) })?;
    let mut kind = APPLICATION_DATA;
    // SAFETY: msg was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay within
    // msg_controllen, and CMSG_DATA of a TLS_GET_RECORD_TYPE message holds one byte.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_TLS && (*c).cmsg_type == TLS_GET_RECORD_TYPE {
                kind = *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(match kind {
        APPLICATION_DATA => Received::Data(n),
        // TLS 1.3 ignores an alert's level; its description is the second byte.
        ALERT if n == 2 && buf[1] == CLOSE_NOTIFY => Received::CloseNotify,
        _ => Received::Other { kind, n },
    })
}

/// Whether a failed handoff call says this kernel cannot do kernel TLS (no module, no
/// such option, or not this cipher), rather than something about one socket (it is no
/// longer connected, say).
pub fn is_unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOPROTOOPT | libc::EOPNOTSUPP | libc::EINVAL)
            // ENOTSUPP, the kernel's own "not supported" (524), as setsockopt gives it.
            | Some(524)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layouts_are_the_kernels() {
        // The sizes of linux/tls.h's structures, as libc defines them.
        let aes128 = Keys::Aes128Gcm {
            key: [1; 16],
            iv: [2; 12],
            seq: 3,
        };
        assert_eq!(
            aes128.crypto_info().len(),
            std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_128>()
        );
        let aes256 = Keys::Aes256Gcm {
            key: [1; 32],
            iv: [2; 12],
            seq: 3,
        };
        assert_eq!(
            aes256.crypto_info().len(),
            std::mem::size_of::<libc::tls12_crypto_info_aes_gcm_256>()
        );
        let chacha = Keys::Chacha20Poly1305 {
            key: [1; 32],
            iv: [2; 12],
            seq: 3,
        };
        assert_eq!(
            chacha.crypto_info().len(),
            std::mem::size_of::<libc::tls12_crypto_info_chacha20_poly1305>()
        );
        assert_eq!(libc::TLS_CIPHER_AES_GCM_128, TLS_CIPHER_AES_GCM_128);
        assert_eq!(libc::TLS_CIPHER_AES_GCM_256, TLS_CIPHER_AES_GCM_256);
        assert_eq!(
            libc::TLS_CIPHER_CHACHA20_POLY1305,
            TLS_CIPHER_CHACHA20_POLY1305
        );
        assert_eq!(libc::TLS_1_3_VERSION, TLS_1_3_VERSION);
        assert_eq!(libc::SOL_TLS, SOL_TLS);
        assert_eq!((libc::TLS_TX, libc::TLS_RX), (TLS_TX, TLS_RX));
        assert_eq!(libc::TLS_SET_RECORD_TYPE, TLS_SET_RECORD_TYPE);
    }

    /// The raw bytes of a libc structure.
    fn raw<T>(v: &T) -> Vec<u8> {
        // SAFETY: `v` is a live, initialized value of a plain C structure of bytes and
        // u16s with no padding (its size equals the sum of its fields', checked by
        // the_layouts_are_the_kernels); its bytes are read, not kept.
        unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        }
        .to_vec()
    }

    #[test]
    fn the_fields_land_where_libc_puts_them_and_read_back() {
        let key16: [u8; 16] = std::array::from_fn(|i| i as u8);
        let key32: [u8; 32] = std::array::from_fn(|i| 0x40 + i as u8);
        let iv: [u8; 12] = std::array::from_fn(|i| 0xa0 + i as u8);
        let seq = 0x0102_0304_0506_0708u64;
        let info = |cipher_type| libc::tls_crypto_info {
            version: TLS_1_3_VERSION,
            cipher_type,
        };
        let cases = [
            (
                Keys::Aes128Gcm {
                    key: key16,
                    iv,
                    seq,
                },
                raw(&libc::tls12_crypto_info_aes_gcm_128 {
                    info: info(TLS_CIPHER_AES_GCM_128),
                    iv: iv[4..].try_into().unwrap(),
                    key: key16,
                    salt: iv[..4].try_into().unwrap(),
                    rec_seq: seq.to_be_bytes(),
                }),
            ),
            (
                Keys::Aes256Gcm {
                    key: key32,
                    iv,
                    seq,
                },
                raw(&libc::tls12_crypto_info_aes_gcm_256 {
                    info: info(TLS_CIPHER_AES_GCM_256),
                    iv: iv[4..].try_into().unwrap(),
                    key: key32,
                    salt: iv[..4].try_into().unwrap(),
                    rec_seq: seq.to_be_bytes(),
                }),
            ),
            (
                Keys::Chacha20Poly1305 {
                    key: key32,
                    iv,
                    seq,
                },
                raw(&libc::tls12_crypto_info_chacha20_poly1305 {
                    info: info(TLS_CIPHER_CHACHA20_POLY1305),
                    iv,
                    key: key32,
                    salt: [],
                    rec_seq: seq.to_be_bytes(),
                }),
            ),
        ];
        for (k, want) in cases {
            let b = k.crypto_info();
            assert_eq!(b, want, "{k:?}");
            assert_eq!(Keys::from_crypto_info(&b), Some(k.clone()));
            assert_eq!(Keys::from_crypto_info(&b[..b.len() - 1]), None);
        }
        let k = Keys::Aes128Gcm {
            key: key16,
            iv,
            seq,
        };
        assert_eq!(format!("{k:?}"), "AES-128-GCM");
    }

    #[test]
    fn a_socket_without_the_tls_protocol_refuses_keys_and_alerts_go_as_sendmsg() {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        use std::os::fd::AsFd;
        let k = Keys::Aes128Gcm {
            key: [0; 16],
            iv: [0; 12],
            seq: 0,
        };
        // No "tls" upper-layer protocol (none on a kernel without CONFIG_TLS): refused,
        // the socket unchanged.
        assert!(set_keys(s.as_fd(), Direction::Transmit, &k).is_err());
        // On a plain socket the control message is refused or ignored; either way no
        // panic, and the socket still carries bytes.
        let _ = send_close_notify(s.as_fd());
        drop(c);
        // recv on a plain socket (a fresh pair: the one above saw a reset): data, and
        // the end.
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        use std::io::Write;
        (&c).write_all(b"abc").unwrap();
        drop(c);
        let mut buf = [0u8; 16];
        let mut got = Vec::new();
        loop {
            match recv(s.as_fd(), &mut buf) {
                Ok(Received::Data(0)) => break,
                Ok(Received::Data(n)) => got.extend_from_slice(&buf[..n]),
                Ok(other) => panic!("{other:?}"),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"abc");
        assert!(is_unsupported(&io::Error::from_raw_os_error(libc::ENOENT)));
        assert!(!is_unsupported(&io::Error::from_raw_os_error(
            libc::ENOTCONN
        )));
    }
}
