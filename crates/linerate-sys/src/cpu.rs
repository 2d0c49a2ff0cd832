//! CPU time of this thread and process, and CPU affinity.

use std::io;
use std::time::Duration;

use crate::cvt;

/// User and system CPU time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time in user mode.
    pub user: Duration,
    /// Time in the kernel on the task's behalf.
    pub system: Duration,
}

impl CpuTime {
    /// User plus system.
    pub fn total(&self) -> Duration {
        self.user + self.system
    }

    /// The time spent since `earlier` (saturating).
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

fn rusage(who: libc::c_int) -> io::Result<CpuTime> {
    // SAFETY: rusage is plain data; all-zero is valid and the kernel fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage.
    cvt(unsafe { libc::getrusage(who, &mut ru) })?;
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Ok(CpuTime {
        user: tv(ru.ru_utime),
        system: tv(ru.ru_stime),
    })
}

/// CPU time of the calling thread (`RUSAGE_THREAD`).
pub fn thread_cpu() -> io::Result<CpuTime> {
    rusage(libc::RUSAGE_THREAD)
}

/// CPU time of the whole process (`RUSAGE_SELF`).
pub fn process_cpu() -> io::Result<CpuTime> {
    rusage(libc::RUSAGE_SELF)
}

/// Pins the calling thread to one CPU.
pub fn pin_thread_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU number out of range",
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` was checked against CPU_SETSIZE above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a live cpu_set_t of the size passed.
    cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// Lowers the calling thread's scheduling priority to `nice` (Linux keeps a nice value
/// per thread), so it runs on CPU time the other threads leave. Raising it back needs
/// privileges this process gives up.
pub fn lower_thread_priority(nice: i32) -> io::Result<()> {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: PRIO_PROCESS with a thread id sets that thread's nice value; plain
    // integers, no memory passed.
    cvt(unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) })?;
    Ok(())
}

/// Clock ticks per second (`_SC_CLK_TCK`), the unit of `/proc/*/stat` times.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

/// The CPUs the calling thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a live, writable cpu_set_t of the
    // size passed.
    cvt(unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) })?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}
