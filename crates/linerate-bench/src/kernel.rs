//! What the kernel did for a server over a run, from `/proc`: the TCP segments its
//! network namespace sent and retransmitted (`/proc/PID/net/snmp`, the namespace of the
//! process, so over `--netns` the servers' side alone, on loopback both ends), and the
//! context switches of its process tree (`voluntary_ctxt_switches` and
//! `nonvoluntary_ctxt_switches` of every thread). Reported per MB of response bodies,
//! so that a transmit pattern can be read off: fuller segments, fewer wake-ups.

use std::fs;
use std::io;

use serde::Serialize;

/// Counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelReading {
    /// `Tcp: OutSegs` of the namespace.
    pub out_segs: u64,
    /// `Tcp: RetransSegs` of the namespace.
    pub retrans_segs: u64,
    /// Context switches of the process tree's threads, both kinds.
    pub context_switches: u64,
}

impl KernelReading {
    /// Reads `pid`'s namespace counters and its tree's context switches.
    pub fn now(pid: u32) -> io::Result<KernelReading> {
        let snmp = fs::read_to_string(format!("/proc/{pid}/net/snmp"))?;
        let (out_segs, retrans_segs) = tcp_segments(&snmp)
            .ok_or_else(|| io::Error::other(format!("/proc/{pid}/net/snmp has no Tcp lines")))?;
        let context_switches = crate::procs::tree(pid)
            .into_iter()
            .map(context_switches_of)
            .sum();
        Ok(KernelReading {
            out_segs,
            retrans_segs,
            context_switches,
        })
    }
}

/// The kernel's work for a server over a run, per MB (10^6 bytes) of bodies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelWork {
    /// TCP segments sent (on loopback, the client's ACKs too).
    pub segments: u64,
    /// Of which retransmitted.
    pub retransmits: u64,
    /// Context switches of the server's threads.
    pub context_switches: u64,
    /// Segments per MB of bodies.
    pub segments_per_mb: f64,
    /// Bytes of body per segment.
    pub body_bytes_per_segment: f64,
    /// Context switches per MB of bodies.
    pub context_switches_per_mb: f64,
}

impl KernelWork {
    /// The work between two readings, for `body_bytes` of bodies.
    pub fn between(before: &KernelReading, after: &KernelReading, body_bytes: u64) -> KernelWork {
        let segments = after.out_segs.saturating_sub(before.out_segs);
        let context_switches = after
            .context_switches
            .saturating_sub(before.context_switches);
        let mb = body_bytes as f64 / 1e6;
        let per_mb = |n: u64| if mb > 0.0 { n as f64 / mb } else { 0.0 };
        KernelWork {
            segments,
            retransmits: after.retrans_segs.saturating_sub(before.retrans_segs),
            context_switches,
            segments_per_mb: per_mb(segments),
            body_bytes_per_segment: if segments > 0 {
                body_bytes as f64 / segments as f64
            } else {
                0.0
            },
            context_switches_per_mb: per_mb(context_switches),
        }
    }
}

/// `OutSegs` and `RetransSegs` from the text of `/proc/net/snmp`: a `Tcp:` line of
/// names followed by a `Tcp:` line of values.
fn tcp_segments(snmp: &str) -> Option<(u64, u64)> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names: Vec<&str> = tcp.next()?.split_whitespace().collect();
    let values: Vec<&str> = tcp.next()?.split_whitespace().collect();
    let get = |name: &str| {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse::<u64>().ok()
    };
    Some((get("OutSegs")?, get("RetransSegs")?))
}

/// Context switches of every thread of `pid` (0 once it is gone).
fn context_switches_of(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .map(|s| {
            crate::procs::status_number(&s, "voluntary_ctxt_switches:")
                + crate::procs::status_number(&s, "nonvoluntary_ctxt_switches:")
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_from_snmp_text() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\nTcp: 1 200 120000 -1 10 9 0 0 3 1000 2000 7 0 1 0\nUdp: InDatagrams\nUdp: 0\n";
        assert_eq!(tcp_segments(snmp), Some((2000, 7)));
        assert_eq!(tcp_segments("Ip: a\nIp: 1\n"), None);
    }

    #[test]
    fn per_mb_figures() {
        let a = KernelReading {
            out_segs: 100,
            retrans_segs: 1,
            context_switches: 10,
        };
        let b = KernelReading {
            out_segs: 300,
            retrans_segs: 3,
            context_switches: 30,
        };
        let w = KernelWork::between(&a, &b, 4_000_000);
        assert_eq!(
            (w.segments, w.retransmits, w.context_switches),
            (200, 2, 20)
        );
        assert_eq!(w.segments_per_mb, 50.0);
        assert_eq!(w.body_bytes_per_segment, 20_000.0);
        assert_eq!(w.context_switches_per_mb, 5.0);
    }

    #[test]
    fn this_process_is_read() {
        let r = KernelReading::now(std::process::id()).unwrap();
        assert!(r.context_switches > 0);
    }
}
