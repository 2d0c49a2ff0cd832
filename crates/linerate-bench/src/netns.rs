//! The two-host topology of the transmit measurements: two network namespaces made for
//! one run, joined by a veth pair with MTU 1500, sender 198.18.0.1, sink 198.18.0.2
//! (RFC 2544's benchmarking range). Built with iproute2 and ethtool, removed when the
//! [`Topology`] is dropped, including after an error or Ctrl-C.
//!
//! `bench stream` sends from the first namespace to a sink in the second; `bench
//! compare` and `bench http --netns` run the servers in the first and the load in the
//! second, so in both the first namespace holds the side whose CPU is measured.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

/// Address of the sending end.
pub const SENDER_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Address of the sink end.
pub const SINK_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

/// The namespace topology settings (`--netns [--tso on|off]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetnsSettings {
    /// TSO and GSO on the veth pair.
    pub tso: bool,
}

impl NetnsSettings {
    /// How a run's path is named in reports: "netns tso on" or "netns tso off".
    pub fn describe(self) -> String {
        format!("netns tso {}", if self.tso { "on" } else { "off" })
    }
}

/// Why the topology could not be built.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// Namespaces need root.
    #[error("--netns needs root: it creates network namespaces and a veth pair")]
    NotRoot,
    /// A command failed.
    #[error("{command}: {message}")]
    Command {
        /// The command line.
        command: String,
        /// What it said.
        message: String,
    },
}

/// Two namespaces joined by a veth pair; removed on drop.
#[derive(Debug)]
pub struct Topology {
    /// Namespace of the sender.
    pub sender_ns: String,
    /// Namespace of the sink.
    pub sink_ns: String,
    /// veth device in the sender's namespace.
    pub sender_dev: String,
    /// veth device in the sink's namespace.
    pub sink_dev: String,
    created: Vec<String>,
}

fn run(program: &str, args: &[&str]) -> Result<(), NetnsError> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| NetnsError::Command {
            command: command.clone(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{program} is not installed (Debian package {})",
                    if program == "ip" { "iproute2" } else { program }
                )
            } else {
                e.to_string()
            },
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError::Command {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

impl Topology {
    /// Builds the topology. `tso` switches TSO and GSO on both veth ends (off: every
    /// 1500-byte segment is built by the stack, as on a card without offload).
    /// `sink_cpu`, when given, steers the sink's received packets to that CPU with RPS,
    /// so the receive work is not charged to the sender's CPU. `sender_cpu` does the
    /// same for the packets the sender receives (ACKs): processed on the sender's CPU,
    /// as a NIC's interrupt would be on the sender's host, not on the sink's.
    pub fn create(
        tso: bool,
        sink_cpu: Option<usize>,
        sender_cpu: Option<usize>,
    ) -> Result<Topology, NetnsError> {
        Topology::create_with(
            tso,
            Spread::Cpus {
                sink_cpu,
                sender_cpu,
            },
        )
    }

    /// A multi-queue link (`bench conns --queues N`): each veth end with `cpus.len()`
    /// transmit and receive queues, transmit queue i used by CPU i (XPS), and each
    /// end's received packets spread over all of `cpus` by their flow's hash (RPS on
    /// every receive queue), as a NIC with one queue per CPU spreads them by RSS. veth
    /// hands every packet to its peer's first receive queue whatever queue it left by,
    /// so the flow hash, not the sending CPU, picks the CPU, as on such a NIC.
    pub fn create_multiqueue(tso: bool, cpus: &[usize]) -> Result<Topology, NetnsError> {
        Topology::create_with(tso, Spread::Queues(cpus.to_vec()))
    }

    fn create_with(tso: bool, spread: Spread) -> Result<Topology, NetnsError> {
        if linerate_sys::ns::effective_uid() != 0 {
            return Err(NetnsError::NotRoot);
        }
        let id = std::process::id();
        let mut t = Topology {
            sender_ns: format!("lr{id}s"),
            sink_ns: format!("lr{id}r"),
            sender_dev: format!("lr{id}s0"),
            sink_dev: format!("lr{id}r0"),
            created: Vec::new(),
        };
        t.build(tso, &spread)?;
        Ok(t)
    }

    fn build(&mut self, tso: bool, spread: &Spread) -> Result<(), NetnsError> {
        let (s, r) = (self.sender_ns.clone(), self.sink_ns.clone());
        let (sd, rd) = (self.sender_dev.clone(), self.sink_dev.clone());
        for ns in [&s, &r] {
            run("ip", &["netns", "add", ns])?;
            self.created.push(ns.clone());
        }
        let queues = match spread {
            Spread::Queues(cpus) => cpus.len().max(1),
            Spread::Cpus { .. } => 1,
        }
        .to_string();
        let q = ["numtxqueues", &queues, "numrxqueues", &queues];
        let link = [
            &["link", "add", &sd, "netns", &s][..],
            &q,
            &["type", "veth", "peer", "name", &rd, "netns", &r],
            &q,
        ]
        .concat();
        run("ip", &link)?;
        let sa = format!("{SENDER_ADDR}/30");
        let ra = format!("{SINK_ADDR}/30");
        for (ns, dev, addr) in [(&s, &sd, &sa), (&r, &rd, &ra)] {
            run("ip", &["-n", ns, "addr", "add", addr, "dev", dev])?;
            run("ip", &["-n", ns, "link", "set", dev, "mtu", "1500", "up"])?;
            run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            let onoff = if tso { "on" } else { "off" };
            run(
                "ip",
                &[
                    "netns", "exec", ns, "ethtool", "-K", dev, "tso", onoff, "gso", onoff,
                ],
            )?;
        }
        let write = |ns: &str, path: String, mask: String| {
            run(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "sh",
                    "-c",
                    &format!("echo {mask} > {path}"),
                ],
            )
        };
        match spread {
            Spread::Cpus {
                sink_cpu,
                sender_cpu,
            } => {
                for (ns, dev, cpu) in [(&r, &rd, sink_cpu), (&s, &sd, sender_cpu)] {
                    if let Some(cpu) = cpu {
                        let path = format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus");
                        write(ns, path, rps_mask(&[*cpu]))?;
                    }
                }
            }
            Spread::Queues(cpus) => {
                for (ns, dev) in [(&r, &rd), (&s, &sd)] {
                    for (i, &cpu) in cpus.iter().enumerate() {
                        let queues = format!("/sys/class/net/{dev}/queues");
                        write(ns, format!("{queues}/rx-{i}/rps_cpus"), rps_mask(cpus))?;
                        write(ns, format!("{queues}/tx-{i}/xps_cpus"), rps_mask(&[cpu]))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The bind-mounted namespace file of `ns`, for `setns`.
    pub fn path(ns: &str) -> PathBuf {
        PathBuf::from("/var/run/netns").join(ns)
    }
}

/// Runs `f` on a thread of its own that first enters the network namespace `ns` (made
/// with `ip netns add`; None: this one), so that the sockets it makes, the threads it
/// starts and the programs it spawns are there, and the rest of the process is not.
pub fn within<R: Send>(ns: Option<&str>, f: impl FnOnce() -> R + Send) -> std::io::Result<R> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(ns) = ns {
                linerate_sys::ns::enter_net_namespace(&Topology::path(ns))?;
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("a thread in the namespace panicked")))
    })
}

/// How each end's received packets are spread over the CPUs.
enum Spread {
    /// All of them to one CPU (per end, when given).
    Cpus {
        sink_cpu: Option<usize>,
        sender_cpu: Option<usize>,
    },
    /// Over these CPUs by flow hash, one transmit queue per CPU.
    Queues(Vec<usize>),
}

/// The `rps_cpus` (or `xps_cpus`) mask selecting `cpus`: comma-separated 32-bit hex
/// words, most significant first, as the kernel's bitmap parser reads them.
fn rps_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(0, |m| m / 32) + 1;
    (0..words)
        .rev()
        .map(|w| {
            let bits: u32 = cpus
                .iter()
                .filter(|&&c| c / 32 == w)
                .fold(0, |b, &c| b | 1 << (c % 32));
            format!("{bits:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Deleting a namespace removes the veth end inside it, and so the pair.
        for ns in self.created.drain(..) {
            let _ = run("ip", &["netns", "del", &ns]);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rps_masks() {
        assert_eq!(super::rps_mask(&[0]), "00000001");
        assert_eq!(super::rps_mask(&[1]), "00000002");
        assert_eq!(super::rps_mask(&[31]), "80000000");
        assert_eq!(super::rps_mask(&[32]), "00000001,00000000");
        assert_eq!(super::rps_mask(&[70]), "00000040,00000000,00000000");
        assert_eq!(super::rps_mask(&[0, 1]), "00000003");
        assert_eq!(super::rps_mask(&[1, 33]), "00000002,00000002");
    }
}
