//! What a process tree holds, from `/proc`: its processes, resident memory, open
//! descriptors and threads. `bench idle` and `bench soak` read a server's tree before
//! and after a load to show what the load left behind.

use std::fs;

use serde::Serialize;

/// Process `pid` and its live descendants (nginx's master and workers, say), walked
/// through the `children` lists of every thread at the moment of the call.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut seen = vec![pid];
    let mut todo = children(pid);
    while let Some(p) = todo.pop() {
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        todo.extend(children(p));
    }
    seen
}

/// The child processes of `pid`, over all its threads.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(s) = fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|w| w.parse::<u32>().ok()));
        }
    }
    out
}

/// A process tree's holdings at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Processes in the tree.
    pub processes: u64,
    /// Resident memory (`VmRSS`), KiB, summed.
    pub rss_kib: u64,
    /// Open descriptors, summed.
    pub descriptors: u64,
    /// Of those, sockets (listeners and connections).
    pub sockets: u64,
    /// Threads, summed.
    pub threads: u64,
}

impl Usage {
    /// Reads the tree of `pid` now; `None` if `pid` does not exist.
    pub fn of_tree(pid: u32) -> Option<Usage> {
        fs::metadata(format!("/proc/{pid}")).ok()?;
        let mut u = Usage::default();
        for p in tree(pid) {
            let Ok(status) = fs::read_to_string(format!("/proc/{p}/status")) else {
                continue; // gone since the walk
            };
            u.processes += 1;
            u.rss_kib += status_number(&status, "VmRSS:");
            u.threads += status_number(&status, "Threads:");
            if let Ok(fds) = fs::read_dir(format!("/proc/{p}/fd")) {
                for fd in fds.flatten() {
                    u.descriptors += 1;
                    let target = fs::read_link(fd.path()).unwrap_or_default();
                    if target
                        .as_os_str()
                        .as_encoded_bytes()
                        .starts_with(b"socket:")
                    {
                        u.sockets += 1;
                    }
                }
            }
        }
        Some(u)
    }
}

/// A numeric field of `/proc/PID/status` (its unit, if any, dropped).
pub(crate) fn status_number(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_descriptors_and_a_thread() {
        let u = Usage::of_tree(std::process::id()).unwrap();
        // Other tests of this process may have children running.
        assert!(u.processes >= 1, "{u:?}");
        assert!(
            u.rss_kib > 0 && u.descriptors >= 3 && u.threads >= 1,
            "{u:?}"
        );
        assert!(Usage::of_tree(u32::MAX).is_none());
    }

    #[test]
    fn status_fields_are_read_without_their_unit() {
        let s = "Name:\tx\nVmRSS:\t  1234 kB\nThreads:\t7\n";
        assert_eq!(status_number(s, "VmRSS:"), 1234);
        assert_eq!(status_number(s, "Threads:"), 7);
        assert_eq!(status_number(s, "VmSwap:"), 0);
    }
}
