//! Readings of the server's process tree from /proc, and its descriptor limit.

use std::fs;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// The server process and its direct children (in case workers are processes).
pub fn family(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    let parent = pid.to_string();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(st) = fs::read_to_string(format!("/proc/{n}/status")) {
                if st
                    .lines()
                    .any(|l| l.strip_prefix("PPid:").is_some_and(|p| p.trim() == parent))
                {
                    pids.push(n);
                }
            }
        }
    }
    pids
}

/// Resident memory of the server's processes, KiB.
pub fn family_rss_kib(pid: u32) -> u64 {
    family(pid)
        .iter()
        .map(|p| {
            fs::read_to_string(format!("/proc/{p}/status"))
                .ok()
                .and_then(|s| {
                    s.lines().find_map(|l| {
                        l.strip_prefix("VmRSS:").map(|v| {
                            v.trim()
                                .trim_end_matches("kB")
                                .trim()
                                .parse::<u64>()
                                .unwrap_or(0)
                        })
                    })
                })
                .unwrap_or(0)
        })
        .sum()
}

/// Open file descriptors of the server's processes.
pub fn family_fd_count(pid: u32) -> usize {
    family(pid)
        .iter()
        .map(|p| {
            fs::read_dir(format!("/proc/{p}/fd"))
                .map(|d| d.count())
                .unwrap_or(0)
        })
        .sum()
}

/// The server's descriptor count once it is back to `baseline`, or after 3 s: closes
/// finish a moment after the client sees the connection end.
pub fn fd_count_settled(pid: u32, baseline: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut fds = family_fd_count(pid);
    while fds > baseline && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        fds = family_fd_count(pid);
    }
    fds
}

/// CPU time (user + system) of the server's processes, seconds.
pub fn family_cpu_seconds(pid: u32) -> f64 {
    let ticks_per_second: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    family(pid)
        .iter()
        .map(|p| {
            let stat = fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // After the command name: state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let field = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            (field(11) + field(12)) / ticks_per_second
        })
        .sum()
}

/// The descriptor numbers open in process `pid`.
pub fn open_fds(pid: u32) -> Vec<u64> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()))
        .collect()
}

/// [`open_fds`] once it holds still: the same in two looks 100 ms apart (up to 3 s).
/// A server closes a connection the client has left when it next reads it (the start's
/// own probe, say), so a number free in one look may be taken or freed in the next.
pub fn settled_fds(pid: u32) -> Vec<u64> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut last = open_fds(pid);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let now = open_fds(pid);
        if now == last || std::time::Instant::now() > until {
            return now;
        }
        last = now;
    }
}

/// Sets the soft descriptor limit of process `pid` (the hard one stays).
pub fn set_soft_nofile(pid: u32, soft: u64) {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let hard = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .expect("Max open files line")
        .to_string();
    let ok = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={soft}:{hard}"))
        .status()
        .expect("prlimit runs")
        .success();
    assert!(ok, "prlimit --pid {pid} --nofile={soft}:{hard}");
}

/// Whether the tests run as root (effective user id 0): mknod, namespaces, `setpriv`.
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
