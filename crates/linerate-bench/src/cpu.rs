//! CPU accounting: machine-wide from `/proc/stat`, per process from `/proc/PID/stat`,
//! per thread from `getrusage`. Service demand is netperf's: CPU microseconds per KB
//! (1024 bytes) moved.

use std::fs;
use std::io;
use std::time::Duration;

use serde::Serialize;

/// Machine-wide CPU time counters, summed over all CPUs (the `cpu` line of `/proc/stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// user + nice.
    pub user_ticks: u64,
    /// system.
    pub system_ticks: u64,
    /// irq.
    pub irq_ticks: u64,
    /// softirq: receive processing, ACKs, transmit completion.
    pub softirq_ticks: u64,
    /// steal (time the hypervisor gave to others).
    pub steal_ticks: u64,
    /// idle + iowait.
    pub idle_ticks: u64,
}

impl MachineCpu {
    /// Reads `/proc/stat` now.
    pub fn now() -> io::Result<MachineCpu> {
        parse_proc_stat(&fs::read_to_string("/proc/stat")?)
            .ok_or_else(|| io::Error::other("/proc/stat has no cpu line"))
    }

    /// Reads the counters of CPU `cpu` alone (its `cpuN` line of `/proc/stat`).
    pub fn of_cpu(cpu: usize) -> io::Result<MachineCpu> {
        let prefix = format!("cpu{cpu} ");
        let text = fs::read_to_string("/proc/stat")?;
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix))
            .ok_or_else(|| io::Error::other(format!("/proc/stat has no line for CPU {cpu}")))?;
        parse_cpu_line(line).ok_or_else(|| io::Error::other("/proc/stat: a malformed cpu line"))
    }

    /// What changed since `earlier`.
    pub fn since(&self, earlier: &MachineCpu) -> MachineCpu {
        MachineCpu {
            user_ticks: self.user_ticks.saturating_sub(earlier.user_ticks),
            system_ticks: self.system_ticks.saturating_sub(earlier.system_ticks),
            irq_ticks: self.irq_ticks.saturating_sub(earlier.irq_ticks),
            softirq_ticks: self.softirq_ticks.saturating_sub(earlier.softirq_ticks),
            steal_ticks: self.steal_ticks.saturating_sub(earlier.steal_ticks),
            idle_ticks: self.idle_ticks.saturating_sub(earlier.idle_ticks),
        }
    }

    /// Busy ticks (everything but idle and steal).
    pub fn busy_ticks(&self) -> u64 {
        self.user_ticks + self.system_ticks + self.irq_ticks + self.softirq_ticks
    }

    /// All ticks.
    pub fn total_ticks(&self) -> u64 {
        self.busy_ticks() + self.idle_ticks + self.steal_ticks
    }
}

fn parse_proc_stat(s: &str) -> Option<MachineCpu> {
    parse_cpu_line(s.lines().find(|l| l.starts_with("cpu "))?)
}

/// One `cpu` or `cpuN` line of `/proc/stat`.
fn parse_cpu_line(line: &str) -> Option<MachineCpu> {
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(MachineCpu {
        user_ticks: at(0) + at(1),
        system_ticks: at(2),
        idle_ticks: at(3) + at(4),
        irq_ticks: at(5),
        softirq_ticks: at(6),
        steal_ticks: at(7),
    })
}

/// Why CPU `c`, given with `flag`, is not one of this machine's (a usage error's text).
pub fn check_cpu(flag: &str, c: usize) -> Result<(), String> {
    let n = online_cpus();
    if c >= n {
        return Err(format!("{flag} {c}: this machine has CPUs 0 to {}", n - 1));
    }
    Ok(())
}

/// CPUs of the machine (the `cpuN` lines of `/proc/stat`), whatever this thread's
/// affinity.
pub fn online_cpus() -> usize {
    fs::read_to_string("/proc/stat")
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

/// User plus system CPU of process `pid` so far: the larger of its live threads' run
/// times in nanoseconds (`/proc/PID/task/*/schedstat`, summed) and its clock ticks
/// (`/proc/PID/stat`, which count threads that have exited too, but in 10 ms steps: a
/// 0.2 s run of a server that spends 5 ms on it reads as none by ticks alone). Both
/// only grow and neither exceeds the time spent, so their larger is too.
pub fn process_cpu(pid: u32) -> io::Result<Duration> {
    let ticks = process_ticks(pid)?;
    Ok(threads_cpu(pid).map_or(ticks, |t| t.max(ticks)))
}

/// The sum of process `pid`'s threads' run times (`schedstat`'s first field, in ns).
fn threads_cpu(pid: u32) -> Option<Duration> {
    let mut ns: u64 = 0;
    for t in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = t.ok()?.path().join("schedstat");
        // A thread may exit between the listing and the reading.
        let Ok(s) = fs::read_to_string(path) else {
            continue;
        };
        ns += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(ns))
}

/// User plus system CPU of process `pid` so far, in clock ticks (`/proc/PID/stat`).
fn process_ticks(pid: u32) -> io::Result<Duration> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces and parentheses; fields resume after the last ')'.
    let rest = s
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| io::Error::other("bad /proc/PID/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    let hz = linerate_sys::cpu::clock_ticks_per_second();
    Ok(Duration::from_micros(
        (ticks(11) + ticks(12)) * 1_000_000 / hz,
    ))
}

/// User plus system CPU of process `pid` and every live descendant (nginx's master and
/// its workers, for example): the `children` lists under `/proc/PID/task/*/` are walked
/// at the moment of the call. A descendant that exits between two readings takes its
/// time with it, so measure servers whose processes live for the whole run.
pub fn process_tree_cpu(pid: u32) -> io::Result<Duration> {
    let mut total = process_cpu(pid)?;
    for p in crate::procs::tree(pid).into_iter().skip(1) {
        // A child may exit between the listing and the reading; it no longer counts.
        if let Ok(t) = process_cpu(p) {
            total += t;
        }
    }
    Ok(total)
}

/// A CPU figure for one side of a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuFigure {
    /// CPU seconds used.
    pub cpu_seconds: f64,
    /// As a percentage of one CPU over the elapsed time.
    pub percent_of_one_cpu: f64,
    /// CPU microseconds per KB (1024 bytes) moved.
    pub service_demand_us_per_kb: f64,
}

impl CpuFigure {
    /// `cpu` spent moving `bytes` in `elapsed`.
    pub fn new(cpu: Duration, elapsed: Duration, bytes: u64) -> CpuFigure {
        let secs = cpu.as_secs_f64();
        CpuFigure {
            cpu_seconds: secs,
            percent_of_one_cpu: if elapsed.is_zero() {
                0.0
            } else {
                100.0 * secs / elapsed.as_secs_f64()
            },
            service_demand_us_per_kb: service_demand(cpu, bytes),
        }
    }
}

/// netperf's service demand: CPU microseconds per KB (1024 bytes).
pub fn service_demand(cpu: Duration, bytes: u64) -> f64 {
    if bytes == 0 {
        return 0.0;
    }
    cpu.as_secs_f64() * 1e6 / (bytes as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_line() {
        let m = parse_proc_stat("cpu  10 2 30 400 5 6 7 8 0 0\ncpu0 1 1 1 1 1 1 1 1\n").unwrap();
        assert_eq!(m.user_ticks, 12);
        assert_eq!(m.system_ticks, 30);
        assert_eq!(m.idle_ticks, 405);
        assert_eq!(m.irq_ticks, 6);
        assert_eq!(m.softirq_ticks, 7);
        assert_eq!(m.steal_ticks, 8);
        assert_eq!(m.busy_ticks(), 55);
        assert_eq!(m.total_ticks(), 468);
    }

    #[test]
    fn demand() {
        assert_eq!(
            service_demand(Duration::from_secs(1), 1024 * 1_000_000),
            1.0
        );
        assert_eq!(service_demand(Duration::from_secs(1), 0), 0.0);
    }

    #[test]
    fn process_tree_counts_children() {
        // A child that burns CPU shows in the tree's figure but not in our own.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        // Both parts first, then the whole: each figure only grows.
        let me = std::process::id();
        let kid = process_cpu(child.id()).unwrap();
        let own = process_cpu(me).unwrap();
        let tree = process_tree_cpu(me).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(kid > Duration::ZERO, "the child burned no CPU");
        assert!(
            tree >= own + kid,
            "tree {tree:?} < own {own:?} + child {kid:?}"
        );
    }

    #[test]
    fn own_process_cpu_is_readable() {
        let me = std::process::id();
        // Burn a little CPU so the figure is not trivially zero on a fast machine.
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(process_cpu(me).is_ok());
    }
}
