//! What a reader needs to trust a published number: which build of linerate made it,
//! when, and on what machine (CPU model and count, frequency governor, memory, kernel).
//! Read from `/proc` and `/sys` at the end of a run; a figure the machine does not
//! expose (a VM often has no cpufreq) is said to be unknown, never guessed.

use serde::Serialize;

/// Which linerate build runs: told by the binary, which knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Build {
    /// Its commit (see [`Machine::commit`]).
    pub commit: String,
    /// Its cargo profile.
    pub profile: String,
}

/// The build and the machine of a measurement.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Machine {
    /// linerate's commit (`git describe`-like: a short hash, `-dirty` when the tree had
    /// changes), as built in; "unknown" outside a git checkout.
    pub commit: String,
    /// The cargo profile of this build: "release" or "debug".
    pub profile: String,
    /// When the run ended, UTC, ISO 8601.
    pub date: String,
    /// `model name` of the first CPU in `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// cpufreq's governor of CPU 0, or "none" when the kernel exposes no cpufreq (as
    /// in most VMs: the host decides the frequency).
    pub governor: String,
    /// `MemTotal`, bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
}

impl Machine {
    /// Reads the machine now, for a measurement made by `build`.
    pub fn read(build: &Build) -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        Machine {
            commit: build.commit.clone(),
            profile: build.profile.clone(),
            date: iso_utc(std::time::SystemTime::now()),
            cpu_model: cpu_model(&read("/proc/cpuinfo")),
            cpus: crate::cpu::online_cpus(),
            governor: match read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").trim() {
                "" => "none".to_string(),
                g => g.to_string(),
            },
            memory_bytes: mem_total(&read("/proc/meminfo")),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        }
    }

    /// One line for a report: "Intel Xeon …, 2 CPUs, governor none, 23.4 GiB, Linux
    /// 6.18; linerate abc123 (release), 2026-11-24T23:15:46Z".
    pub fn describe(&self) -> String {
        format!(
            "{}, {} CPUs, governor {}, {:.1} GiB, Linux {}; linerate {} ({}), {}",
            if self.cpu_model.is_empty() {
                "CPU model unknown"
            } else {
                &self.cpu_model
            },
            self.cpus,
            self.governor,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.kernel,
            self.commit,
            self.profile,
            self.date
        )
    }
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "model name").then(|| v.trim().to_string())
        })
        .unwrap_or_default()
}

fn mem_total(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("MemTotal:")?;
            let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
fn iso_utc(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn dates_in_utc() {
        assert_eq!(iso_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2026-11-24 23:15:46 UTC, and a leap day.
        assert_eq!(
            iso_utc(UNIX_EPOCH + Duration::from_secs(1_795_562_146)),
            "2026-11-24T23:15:46Z"
        );
        assert_eq!(
            iso_utc(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn cpu_and_memory_from_proc_text() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(cpuinfo), "AMD EPYC 7B13");
        assert_eq!(cpu_model(""), "");
        let meminfo = "MemTotal:       24563608 kB\nMemFree:        1000 kB\n";
        assert_eq!(mem_total(meminfo), 24_563_608 * 1024);
        assert_eq!(mem_total("MemFree: 1 kB\n"), 0);
    }

    #[test]
    fn this_machine_is_described() {
        let m = Machine::read(&Build {
            commit: "abc123".into(),
            profile: "release".into(),
        });
        assert!(m.cpus >= 1);
        assert!(m.memory_bytes > 0);
        assert!(!m.kernel.is_empty());
        let line = m.describe();
        assert!(line.contains("linerate abc123 (release)"), "{line}");
        assert!(line.contains(&format!("Linux {}", m.kernel)), "{line}");
    }
}
