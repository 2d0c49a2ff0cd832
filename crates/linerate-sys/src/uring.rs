//! io_uring as the event loop uses it so far: poll requests whose completions report
//! readiness. A watch is a multishot poll (a completion on each wake-up of the file,
//! as an edge-triggered epoll reports) or a one-shot poll that its owner arms again
//! after each report (level-triggered). One `io_uring_enter` submits what was queued
//! and waits, with a timeout, for completions.
//!
//! Built on the `io-uring` crate. Its `push` is `unsafe` because an entry may name
//! memory the kernel reads or writes later; the poll entries here name none (a file
//! descriptor number, an event mask, a tag), so every push is sound.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

/// The tag of removal requests, whose completions are not reported.
const REMOVAL: u64 = u64::MAX;

/// One completion: the tag of its request, the result (the ready events, or a negative
/// errno), and whether a multishot request goes on (`IORING_CQE_F_MORE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The tag given when the request was queued.
    pub tag: u64,
    /// `poll` events (`POLLIN` …) on success, `-errno` on failure.
    pub result: i32,
    /// A multishot request is still armed.
    pub more: bool,
}

/// Counts of the ring's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    /// Requests submitted.
    pub submitted: u64,
    /// Completions read.
    pub completed: u64,
    /// `io_uring_enter` calls.
    pub enters: u64,
}

/// A ring of poll requests.
pub struct PollRing {
    ring: IoUring,
    counts: RingCounts,
}

impl std::fmt::Debug for PollRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollRing")
            .field("counts", &self.counts)
            .finish()
    }
}

impl PollRing {
    /// A ring with `entries` submission slots, or why io_uring cannot serve here: the
    /// setup refused (`kernel.io_uring_disabled`, a seccomp profile: `EPERM`, `ENOSYS`)
    /// or a kernel without timed waits (5.11) or poll requests.
    ///
    /// The ring belongs to the thread that makes it (`IORING_SETUP_SINGLE_ISSUER`), and
    /// the kernel's completion work waits until that thread asks for completions
    /// (`IORING_SETUP_DEFER_TASKRUN`, Linux 6.1; before it, `COOP_TASKRUN`): a poll
    /// that fires while the worker is busy does not interrupt it.
    pub fn new(entries: u32) -> io::Result<PollRing> {
        let ring = match IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries)
        {
            Ok(r) => r,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                match IoUring::builder().setup_coop_taskrun().build(entries) {
                    Ok(r) => r,
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries)?,
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring has no timed waits (IORING_FEAT_EXT_ARG, Linux 5.11)",
            ));
        }
        let mut probe = io_uring::Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        for (code, name) in [
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::PollRemove::CODE, "POLL_REMOVE"),
        ] {
            if !probe.is_supported(code) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the kernel's io_uring has no {name}"),
                ));
            }
        }
        Ok(PollRing {
            ring,
            counts: RingCounts::default(),
        })
    }

    /// What the ring did so far.
    pub fn counts(&self) -> RingCounts {
        self.counts
    }

    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the entries pushed here (poll add and poll remove) name no user
            // memory, only a descriptor number, an event mask and tags; nothing has to
            // outlive the push.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            // The submission queue is full: hand it to the kernel first.
            self.submit()?;
        }
    }

    /// Queues a poll of `fd` for `events` under `tag`; `multishot` keeps it armed
    /// after each report. The descriptor is looked up when the request is submitted:
    /// call [`PollRing::submit`] before it can be closed.
    pub fn poll_add(
        &mut self,
        fd: RawFd,
        events: u32,
        tag: u64,
        multishot: bool,
    ) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fd(fd), events)
            .multi(multishot)
            .build()
            .user_data(tag);
        self.push(entry)
    }

    /// Queues the removal of the poll tagged `tag`. Until it is submitted (the next
    /// [`PollRing::submit`] or [`PollRing::wait`]) the request holds its file open.
    pub fn poll_remove(&mut self, tag: u64) -> io::Result<()> {
        let entry = opcode::PollRemove::new(tag).build().user_data(REMOVAL);
        self.push(entry)
    }

    /// Submits what is queued without waiting.
    pub fn submit(&mut self) -> io::Result<usize> {
        let queued = self.ring.submission().len();
        if queued == 0 {
            return Ok(0);
        }
        self.counts.enters += 1;
        let n = self.ring.submit()?;
        self.counts.submitted += n as u64;
        Ok(n)
    }

    /// Submits what is queued and waits up to `timeout` (0: not at all) for a
    /// completion; appends every completion there is to `out` (removals left out).
    /// One `io_uring_enter`, which also runs the completion work deferred until now.
    pub fn wait(&mut self, timeout: Duration, out: &mut Vec<Completion>) -> io::Result<()> {
        let queued = self.ring.submission().len();
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        self.counts.enters += 1;
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(n) => self.counts.submitted += n as u64,
            // The timeout, a signal, or completions the kernel holds back for a full
            // completion queue (read below, which makes room).
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) =>
            {
                self.counts.submitted += queued.saturating_sub(self.ring.submission().len()) as u64;
            }
            Err(e) => return Err(e),
        }
        for cqe in self.ring.completion() {
            self.counts.completed += 1;
            if cqe.user_data() == REMOVAL {
                continue;
            }
            out.push(Completion {
                tag: cqe.user_data(),
                result: cqe.result(),
                more: cqueue::more(cqe.flags()),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    fn ring() -> PollRing {
        PollRing::new(8).expect("io_uring on the test machine")
    }

    #[test]
    fn a_multishot_poll_reports_each_wake_up_until_removed() {
        let mut r = ring();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        r.poll_add(a.as_raw_fd(), libc::POLLIN as u32, 7, true)
            .unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_millis(20), &mut out).unwrap();
        assert!(out.is_empty(), "nothing to read yet: {out:?}");
        b.write_all(b"x").unwrap();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].tag, 7);
        assert!(out[0].result as i16 & libc::POLLIN != 0 && out[0].more);
        out.clear();
        b.write_all(b"y").unwrap();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.iter().filter(|c| c.tag == 7).count(), 1, "{out:?}");
        out.clear();
        r.poll_remove(7).unwrap();
        r.wait(Duration::from_millis(50), &mut out).unwrap();
        // The request ends with -ECANCELED (and no F_MORE); then nothing more.
        assert!(out.iter().all(|c| c.tag == 7 && !c.more), "{out:?}");
        out.clear();
        b.write_all(b"z").unwrap();
        r.wait(Duration::from_millis(50), &mut out).unwrap();
        assert!(out.is_empty(), "{out:?}");
        let c = r.counts();
        // Two requests; their reports, the removal's and the cancellation read.
        assert!(
            c.enters >= 2 && c.submitted == 2 && c.completed >= 4,
            "{c:?}"
        );
    }

    #[test]
    fn a_one_shot_poll_reports_once_and_again_when_armed_again() {
        let mut r = ring();
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        b.write_all(b"x").unwrap();
        r.poll_add(a.as_raw_fd(), libc::POLLIN as u32, 1, false)
            .unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(!out[0].more);
        out.clear();
        // Still readable (nothing was read): armed again, it reports at once.
        r.poll_add(a.as_raw_fd(), libc::POLLIN as u32, 1, false)
            .unwrap();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_bad_descriptor_completes_with_its_error() {
        let mut r = ring();
        r.poll_add(-1, libc::POLLIN as u32, 3, true).unwrap();
        let mut out = Vec::new();
        r.wait(Duration::from_secs(5), &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].result, -libc::EBADF);
    }
}
