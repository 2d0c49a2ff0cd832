//! The readiness executor: makes an [`Op`] at once on a non-blocking socket, as an
//! epoll loop does after a writable edge. An interrupted call is made again; a call that
//! would block comes back as [`Errno::AGAIN`], and the producer asks for it again on
//! the next writable edge.
//!
//! The completion executor is the io_uring driver's (`linerate_event`'s
//! `Driver::execute` for a gather); an operation the ring does not run yet is made here
//! under it too.

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd};

use crate::cache;
use crate::ktls;
use crate::net::{self, SendFlags, SockOpt};
use crate::op::{Completion, Op};
use crate::pipe::{self, SpliceFlags};
use crate::sendfile::sendfile;
use crate::zerocopy::{Mmap, ZeroCopy};
use crate::Errno;

fn flags(more: bool) -> SendFlags {
    if more {
        SendFlags::MORE
    } else {
        SendFlags::NONE
    }
}

/// Makes `op` on the non-blocking socket `fd` now. `zc` is the socket's zero-copy
/// tracker, which a zero-copy send and a reap need (without one, a zero-copy send is
/// refused with `EINVAL` and a reap reads nothing).
pub fn now(fd: BorrowedFd<'_>, op: &mut Op<'_>, mut zc: Option<&mut ZeroCopy>) -> Completion {
    loop {
        match call(fd, op, zc.as_deref_mut()) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r.map_err(|e| Errno::from_io(&e)),
        }
    }
}

fn call(fd: BorrowedFd<'_>, op: &mut Op<'_>, zc: Option<&mut ZeroCopy>) -> io::Result<usize> {
    match op {
        Op::Gather { pieces, more } => {
            let slices: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p.bytes)).collect();
            net::sendv(fd, &slices, flags(*more))
        }
        Op::Send { data, more } => net::send(fd, data, flags(*more)),
        Op::Read {
            file,
            at,
            buf,
            nowait: false,
        } => {
            let file: &std::fs::File = file;
            std::os::unix::fs::FileExt::read_at(file, buf, *at)
        }
        Op::Read { file, at, buf, .. } => cache::read_at_nowait(file.as_fd(), buf, *at),
        Op::Probe { file, at, len } => cache::resident(file.as_fd(), *at, *len).map(usize::from),
        Op::Pipe { slot, capacity } => {
            **slot = Some(std::sync::Arc::new(pipe::Pipe::take(*capacity)?));
            Ok(0)
        }
        Op::Map {
            file,
            at,
            len,
            slot,
        } => {
            let file_len = file.metadata()?.len();
            let n = (*len as u64).min(file_len.saturating_sub(*at)) as usize;
            if n > 0 {
                **slot = Some(Mmap::map(file.as_fd(), *at, n)?);
            }
            Ok(n)
        }
        Op::FileSize { file } => Ok(file.metadata()?.len() as usize),
        Op::Shutdown => net::shutdown_write(fd).map(|()| 0),
        Op::CloseNotify => ktls::send_close_notify(fd).map(|()| 0),
        Op::KernelTls => net::set_tcp_ulp(fd, "tls").map(|()| 0),
        Op::TlsKeys { direction, keys } => ktls::set_keys(fd, *direction, keys).map(|()| 0),
        // No helpers here: not handed, and the producer sends inline.
        Op::Warm { .. } => Ok(0),
        Op::Sendfile { file, at, len } => {
            let mut at = *at;
            sendfile(fd, file.as_fd(), &mut at, *len)
        }
        Op::SpliceIn {
            file,
            at,
            pipe: w,
            len,
        } => {
            let mut at = *at;
            pipe::splice(
                file.as_fd(),
                Some(&mut at),
                w.write_end(),
                None,
                *len,
                SpliceFlags::MOVE | SpliceFlags::NONBLOCK,
            )
        }
        Op::SpliceOut { pipe: r, len, more } => {
            let mut f = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
            if *more {
                f = f | SpliceFlags::MORE;
            }
            pipe::splice(r.read_end(), None, fd, None, *len, f)
        }
        Op::SendZerocopy {
            region,
            range,
            more,
        } => match zc {
            Some(zc) => zc.send(fd, region, range.clone(), flags(*more)),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-copy send on a socket without SO_ZEROCOPY",
            )),
        },
        Op::SendPinned {
            region,
            range,
            more,
        } => ZeroCopy::send_copy(fd, region, range.clone(), flags(*more)),
        Op::QueuedBytes => net::send_queue_bytes(fd),
        Op::SendBufferSize => net::get_option(fd, SockOpt::SendBuffer).map(|n| n.max(0) as usize),
        Op::Reap => match zc {
            Some(zc) => zc.reap(fd).map(|reads| reads as usize),
            None => Ok(0),
        },
        Op::SetOption { opt, value } => net::set_option(fd, *opt, *value).map(|()| 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zerocopy::Pinned;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;

    #[test]
    fn a_gather_goes_out_in_order_and_a_full_socket_says_again() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        s.set_nonblocking(true).unwrap();
        let shared: Arc<[u8]> = b"world".to_vec().into();
        let mut op = Op::Gather {
            pieces: vec![
                crate::op::Piece {
                    bytes: b"hello ",
                    shared: None,
                },
                crate::op::Piece {
                    bytes: &shared[..],
                    shared: Some((&shared, 0)),
                },
            ],
            more: false,
        };
        assert_eq!(now(s.as_fd(), &mut op, None), Ok(11));
        let mut got = [0u8; 11];
        client.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hello world");
        // Filled until the kernel refuses: EAGAIN comes back, never a block.
        let big = vec![0u8; 1 << 20];
        let r = loop {
            match now(
                s.as_fd(),
                &mut Op::Send {
                    data: &big,
                    more: false,
                },
                None,
            ) {
                Ok(_) => continue,
                r => break r,
            }
        };
        assert_eq!(r, Err(Errno::AGAIN));
        // No tracker: a zero-copy send is refused, a reap reads nothing.
        let region = Pinned::Memory(shared.clone());
        let mut zc = Op::SendZerocopy {
            region: &region,
            range: 0..5,
            more: false,
        };
        assert_eq!(now(s.as_fd(), &mut zc, None), Err(Errno::INVAL));
        assert_eq!(now(s.as_fd(), &mut Op::Reap, None), Ok(0));
    }
}
