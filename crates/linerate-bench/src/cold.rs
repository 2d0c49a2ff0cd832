//! `bench cold`: does a file that is not in memory stall everyone else on its worker?
//!
//! Seed 003's question (docs/design.md). Each variant of linerate (by default the disk
//! helpers against `--disk-helpers 0`, a worker that reads the disk itself as nginx does
//! without aio threads) runs with one worker. Each round, for each variant in turn, the
//! cold files are dropped from the page cache, then one client loads a hot small file
//! over several keep-alive connections while another fetches every cold file once over
//! one connection. The hot client's tail latency shows whether the worker waited for
//! the disk; the cold client's throughput what the helpers cost. Variants are
//! interleaved round by round and judged against the first with Student's t.
//!
//! The cold files must live on a disk file system: the pages of tmpfs cannot be
//! dropped, and a run refuses a directory whose pages stay cached.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::compare::{peers, CompareError, ServerSpec};
use crate::http::{self, workload, HttpConfig, HttpResult, Limit, Workload};
use crate::series::{Judged, Metric};

/// What `bench cold` runs.
#[derive(Clone, Debug)]
pub struct ColdConfig {
    /// linerate variants, the first the baseline.
    pub servers: Vec<ServerSpec>,
    /// Directory for the cold files (on a disk file system; kept for the next run).
    pub dir: PathBuf,
    /// Cold files.
    pub files: usize,
    /// Bytes of each.
    pub size: u64,
    /// The hot load: its duration, connections and client CPUs come from here.
    pub hot: HttpConfig,
    /// CPU of the servers.
    pub server_cpu: Option<usize>,
    /// Rounds.
    pub rounds: usize,
    /// Confidence of the verdicts.
    pub confidence: linerate_stat::Confidence,
    /// Where samples go, if anywhere.
    pub out: Option<PathBuf>,
}

/// One round of one variant: the hot load and the cold fetch made beside it.
#[derive(Clone, Debug, Serialize)]
pub struct ColdRun {
    /// The hot client's run.
    pub hot: HttpResult,
    /// The cold client's run.
    pub cold: HttpResult,
}

/// The metrics of a cold run, all judged.
pub const METRICS: [Metric<ColdRun>; 5] = [
    Metric {
        name: "hot_p99_us",
        unit: "us",
        value: |r| Some(r.hot.latency_us.p99 as f64),
        better: Some(linerate_stat::Better::Lower),
    },
    Metric {
        name: "hot_p999_us",
        unit: "us",
        value: |r| Some(r.hot.latency_us.p999 as f64),
        better: Some(linerate_stat::Better::Lower),
    },
    Metric {
        name: "hot_max_us",
        unit: "us",
        value: |r| Some(r.hot.latency_us.max as f64),
        better: Some(linerate_stat::Better::Lower),
    },
    Metric {
        name: "hot_rps",
        unit: "requests/s",
        value: |r| Some(r.hot.requests_per_second),
        better: Some(linerate_stat::Better::Higher),
    },
    Metric {
        name: "cold_mb_s",
        unit: "MB/s",
        value: |r| Some(r.cold.megabytes_per_second),
        better: Some(linerate_stat::Better::Higher),
    },
];

/// A variant that took part.
#[derive(Clone, Debug, Serialize)]
pub struct ColdServer {
    /// Its label.
    pub name: String,
    /// Its command line.
    pub config: String,
}

/// The result of `bench cold`.
#[derive(Clone, Debug, Serialize)]
pub struct ColdResult {
    /// Variants, the baseline first.
    pub servers: Vec<ColdServer>,
    /// Runs per variant, one per round.
    pub runs: Vec<Vec<ColdRun>>,
    /// Each metric judged against the first variant.
    pub judged: Judged,
}

/// The cold files' names: `c01.bin`, `c02.bin`, …
fn cold_name(i: usize, files: usize) -> String {
    let width = files.to_string().len().max(2);
    format!("c{:0width$}.bin", i + 1)
}

/// Writes the file set (files already there with the right contents are kept) and
/// the hot file, synced so that their pages can be dropped.
fn write_set(cfg: &ColdConfig) -> std::io::Result<()> {
    for i in 0..cfg.files {
        workload::write_generated(&cfg.dir, &cold_name(i, cfg.files), cfg.size)?;
    }
    workload::write_generated(&cfg.dir, "hot.bin", 1024)?;
    crate::compare::readable_by_all(&cfg.dir)
}

/// Drops every cold file from the page cache, and checks it is gone.
fn evict(cfg: &ColdConfig) -> Result<(), CompareError> {
    for i in 0..cfg.files {
        let path = cfg.dir.join(cold_name(i, cfg.files));
        let f = std::fs::File::open(&path)?;
        linerate_sys::cache::evict(f.as_fd())?;
        let left = linerate_sys::cache::cachestat(f.as_fd(), 0, 0)?;
        if left.nr_cache > 0 {
            return Err(CompareError::Nothing(format!(
                "--dir {}: {} pages of {} stay in the page cache after they are dropped \
                 (tmpfs?); give a directory on a disk file system",
                cfg.dir.display(),
                left.nr_cache,
                path.display()
            )));
        }
    }
    Ok(())
}

/// Runs `bench cold`; `on(round, variant, run)` after each run.
pub fn run(
    cfg: &ColdConfig,
    stop: &crate::StopFlag,
    on: &mut dyn FnMut(usize, &str, &ColdRun),
) -> Result<ColdResult, CompareError> {
    write_set(cfg).map_err(|reason| CompareError::FileSet {
        dir: cfg.dir.clone(),
        reason,
    })?;
    let work = tempfile::Builder::new()
        .prefix("linerate-cold-servers")
        .tempdir()?;
    let mut running = Vec::new();
    let mut servers = Vec::new();
    for spec in &cfg.servers {
        let launch = peers::Launch {
            peer: spec.peer,
            exe: spec
                .exe
                .clone()
                .or_else(|| spec.peer.find())
                .ok_or_else(|| CompareError::Nothing(format!("{}: not installed", spec.label)))?,
            root: cfg.dir.clone(),
            bind: peers::Launch::LOOPBACK,
            port: peers::free_port(peers::Launch::LOOPBACK, None)?,
            netns: None,
            cpu: cfg.server_cpu,
            work: work.path().join(&spec.label),
            extra: spec.args.clone(),
            settings: peers::Settings::default(),
        };
        let r = peers::start(&launch).map_err(|reason| CompareError::Start {
            server: spec.label.clone(),
            reason,
        })?;
        servers.push(ColdServer {
            name: spec.label.clone(),
            config: r.config.clone(),
        });
        running.push(r);
    }
    let item = |path: &str, len: u64| workload::Item {
        path: path.to_string(),
        expect: Some(workload::Expect {
            len,
            crc: workload::content_crc(path.trim_start_matches('/'), len),
        }),
    };
    let hot_work = Arc::new(Workload::List(vec![item("/hot.bin", 1024)]));
    let cold_work = Arc::new(Workload::List(
        (0..cfg.files)
            .map(|i| item(&format!("/{}", cold_name(i, cfg.files)), cfg.size))
            .collect(),
    ));
    let mut runs: Vec<Vec<ColdRun>> = vec![Vec::new(); running.len()];
    for round in 0..cfg.rounds {
        for (i, server) in running.iter().enumerate() {
            if crate::stopped(stop) {
                return Err(CompareError::Interrupted);
            }
            evict(cfg)?;
            let hot = HttpConfig {
                target: server.addr,
                host: server.addr.to_string(),
                workload: Arc::clone(&hot_work),
                server_pid: Some(server.pid),
                ..cfg.hot.clone()
            };
            let cold = HttpConfig {
                workload: Arc::clone(&cold_work),
                connections: 1,
                threads: 1,
                pipeline: 1,
                limit: Limit::Requests(cfg.files as u64),
                server_pid: None,
                timeout: Duration::from_secs(60),
                ..hot.clone()
            };
            let label = &servers[i].name;
            let fail = |reason| CompareError::Run {
                server: label.clone(),
                workload: "cold".into(),
                reason,
            };
            // The hot load starts first; the cold fetch half a second into it.
            let (h, c) = std::thread::scope(|s| {
                let h = s.spawn(|| http::run(&hot, stop, &mut |_, _| {}));
                std::thread::sleep(Duration::from_millis(500));
                let c = http::run(&cold, stop, &mut |_, _| {});
                (h.join(), c)
            });
            let h = h
                .unwrap_or_else(|_| Err(http::HttpError::Io(std::io::Error::other("panicked"))))
                .map_err(fail)?;
            let c = c.map_err(fail)?;
            for (what, r) in [("hot", &h), ("cold", &c)] {
                if r.errors.total() > 0 || r.non_2xx() > 0 {
                    return Err(CompareError::Nothing(format!(
                        "{label}: the {what} client saw errors or non-2xx answers: {:?}",
                        r.first_error.as_deref().unwrap_or("")
                    )));
                }
            }
            let run = ColdRun { hot: h, cold: c };
            on(round + 1, label, &run);
            runs[i].push(run);
        }
    }
    drop(running);
    let labels: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
    let out = cfg.out.as_ref().map(|d| d.join("cold.d"));
    let judged =
        crate::series::judge_metrics(&METRICS, &labels, &runs, out.as_deref(), cfg.confidence)?;
    Ok(ColdResult {
        servers,
        runs,
        judged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cold_names_sort_in_order() {
        assert_eq!(cold_name(0, 24), "c01.bin");
        assert_eq!(cold_name(23, 24), "c24.bin");
        assert_eq!(cold_name(99, 120), "c100.bin");
        assert_eq!(cold_name(0, 120), "c001.bin");
    }
}
