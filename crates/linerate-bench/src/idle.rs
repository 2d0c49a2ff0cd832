//! `bench idle`: what idle keep-alive connections cost a server.
//!
//! Opens `connections` connections one after another, makes one request on each (so
//! each is a served keep-alive connection, not just an accepted socket), keeps them all
//! open and reads the server's process tree (`/proc`: resident memory, descriptors,
//! threads) before and after. While they are held, one request on a new connection
//! shows whether the server still answers, and how fast. The cost per connection is the
//! growth of the server's resident memory divided by the connections held; kernel socket
//! memory is not in it (it is the same for every server).
//!
//! Blocking sockets, one thread: on loopback a connection and its request take tens of
//! microseconds, so 19,000 take a second or two, and the connections are made in a
//! known order with no load generator of note running meanwhile.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::procs::Usage;
use crate::soak::Conn;

/// One `bench idle` run.
#[derive(Clone, Debug)]
pub struct IdleConfig {
    /// The server.
    pub target: SocketAddr,
    /// `Host` to send.
    pub host: String,
    /// Path to request on each connection.
    pub path: String,
    /// Connections to open and hold.
    pub connections: usize,
    /// How long to hold them after the last is made, before the probe request.
    pub hold: Duration,
    /// The server's process, for its memory, descriptors and threads.
    pub server_pid: Option<u32>,
}

/// What a run found.
#[derive(Clone, Debug, Serialize)]
pub struct IdleReport {
    /// Connections asked for.
    pub connections_asked: usize,
    /// Connections whose request was answered (any status) and that were held.
    pub connections_held: usize,
    /// Answers by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Connections that failed, by what happened.
    pub failures: BTreeMap<String, u64>,
    /// This process's descriptor limit, which caps `connections_held`.
    pub client_descriptor_limit: u64,
    /// The server's tree before the connections (one connection made and closed first).
    pub server_before: Option<Usage>,
    /// The server's tree with the connections held.
    pub server_with: Option<Usage>,
    /// Resident memory growth per held connection, bytes.
    pub rss_bytes_per_connection: Option<f64>,
    /// The probe request on a new connection while the others are held: its status.
    pub probe_status: Option<u16>,
    /// Its time from connect to the whole answer, milliseconds.
    pub probe_ms: Option<f64>,
    /// Seconds taken to open and serve the connections.
    pub open_seconds: f64,
}

/// Runs the measurement.
pub fn run(cfg: &IdleConfig) -> io::Result<IdleReport> {
    let (limit, _) = linerate_sys::fs::raise_nofile_limit()?;
    let request = format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", cfg.path, cfg.host).into_bytes();
    let mut statuses = BTreeMap::new();
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    // A first connection, made and closed, so the baseline has the server's code and
    // first-request allocations in it.
    let warm = exchange(cfg.target, &request)?;
    drop(warm);
    std::thread::sleep(Duration::from_millis(300));
    let before = cfg.server_pid.and_then(Usage::of_tree);
    let start = Instant::now();
    let mut held = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections {
        match exchange(cfg.target, &request) {
            Ok((s, status)) => {
                *statuses.entry(status).or_insert(0) += 1;
                held.push(s);
            }
            Err(e) => {
                let out_of_fds = linerate_sys::fs::is_out_of_descriptors(&e);
                *failures.entry(e.to_string()).or_insert(0) += 1;
                if out_of_fds {
                    // Our own limit: more attempts fail the same way.
                    break;
                }
            }
        }
    }
    let open_seconds = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500) + cfg.hold);
    let with = cfg.server_pid.and_then(Usage::of_tree);
    let t = Instant::now();
    let probe = exchange(cfg.target, &request);
    let probe_ms = t.elapsed().as_secs_f64() * 1e3;
    let (probe_status, probe_ms) = match probe {
        Ok((_, st)) => (Some(st), Some(probe_ms)),
        Err(e) => {
            *failures.entry(format!("probe: {e}")).or_insert(0) += 1;
            (None, None)
        }
    };
    let per_conn = match (before, with, held.len()) {
        (Some(b), Some(w), n) if n > 0 => {
            Some((w.rss_kib as f64 - b.rss_kib as f64) * 1024.0 / n as f64)
        }
        _ => None,
    };
    Ok(IdleReport {
        connections_asked: cfg.connections,
        connections_held: held.len(),
        statuses,
        failures,
        client_descriptor_limit: limit,
        server_before: before,
        server_with: with,
        rss_bytes_per_connection: per_conn,
        probe_status,
        probe_ms,
        open_seconds,
    })
}

/// `bench idle --servers`: the same measurement against several servers, each started
/// afresh for every round with the same [`Settings`](crate::compare::peers::Settings),
/// servers interleaved round by round, and the memory per connection judged against
/// the first server.
#[derive(Clone, Debug)]
pub struct IdleCompareConfig {
    /// Servers in order, the first the baseline.
    pub servers: Vec<crate::compare::ServerSpec>,
    /// Rounds.
    pub rounds: usize,
    /// Connections per run.
    pub connections: usize,
    /// Hold before the probe.
    pub hold: Duration,
    /// Workers (processes or threads) of every server.
    pub workers: usize,
    /// Confidence of the verdicts.
    pub confidence: linerate_stat::Confidence,
    /// Where the samples (ministat files) go, if anywhere.
    pub out: Option<std::path::PathBuf>,
}

/// A server of an idle comparison.
#[derive(Clone, Debug, Serialize)]
pub struct IdleServer {
    /// Its label.
    pub name: String,
    /// Its version line.
    pub version: String,
    /// Its configuration.
    pub config: String,
}

/// The result of `bench idle --servers`.
#[derive(Clone, Debug, Serialize)]
pub struct IdleComparison {
    /// Servers measured, the baseline first.
    pub servers: Vec<IdleServer>,
    /// Servers asked for but not installed.
    pub skipped: Vec<String>,
    /// Reports per server, one per round.
    pub runs: Vec<Vec<IdleReport>>,
    /// ministat's report of the bytes per connection.
    pub report: Option<String>,
    /// Each server against the first.
    pub verdicts: Vec<crate::series::Verdict>,
}

/// Runs `bench idle --servers`; `on(round, server, report)` after each run.
pub fn compare(
    cfg: &IdleCompareConfig,
    stop: &crate::StopFlag,
    on: &mut dyn FnMut(usize, &str, &IdleReport),
) -> Result<IdleComparison, crate::compare::CompareError> {
    use crate::compare::{peers, CompareError};
    let root = tempfile::Builder::new().prefix("linerate-idle").tempdir()?;
    std::fs::write(root.path().join("index.html"), "<p>idle</p>\n")?;
    crate::compare::readable_by_all(root.path())?;
    let work = tempfile::Builder::new()
        .prefix("linerate-idle-servers")
        .tempdir()?;
    let mut skipped = Vec::new();
    let mut servers = Vec::new();
    for spec in &cfg.servers {
        match spec.exe.clone().or_else(|| spec.peer.find()) {
            Some(exe) => servers.push((spec, exe)),
            None => skipped.push(spec.label.clone()),
        }
    }
    let settings = peers::Settings {
        workers: cfg.workers,
        keepalive_seconds: 600,
        connections: cfg.connections + 1024,
        gzip: None,
        tls: None,
        h2: false,
        h3: false,
    };
    let mut infos: Vec<Option<IdleServer>> = vec![None; servers.len()];
    let mut runs: Vec<Vec<IdleReport>> = vec![Vec::new(); servers.len()];
    for round in 0..cfg.rounds {
        for (i, (spec, exe)) in servers.iter().enumerate() {
            if crate::stopped(stop) {
                return Err(CompareError::Interrupted);
            }
            let launch = peers::Launch {
                peer: spec.peer,
                exe: exe.clone(),
                root: root.path().to_path_buf(),
                bind: peers::Launch::LOOPBACK,
                port: peers::free_port(peers::Launch::LOOPBACK, None)?,
                netns: None,
                cpu: None,
                work: work.path().join(&spec.label),
                extra: spec.args.clone(),
                settings: settings.clone(),
            };
            let server = peers::start(&launch).map_err(|reason| CompareError::Start {
                server: spec.label.clone(),
                reason,
            })?;
            infos[i].get_or_insert_with(|| IdleServer {
                name: spec.label.clone(),
                version: server.version.clone(),
                config: server.config.clone(),
            });
            let r = run(&IdleConfig {
                target: server.addr,
                host: server.addr.to_string(),
                path: "/index.html".into(),
                connections: cfg.connections,
                hold: cfg.hold,
                server_pid: Some(server.pid),
            })?;
            drop(server);
            if r.connections_held < r.connections_asked || r.rss_bytes_per_connection.is_none() {
                return Err(CompareError::Nothing(format!(
                    "{}: held {} of {} connections (this process may open {} descriptors)",
                    spec.label, r.connections_held, r.connections_asked, r.client_descriptor_limit
                )));
            }
            on(round + 1, &spec.label, &r);
            runs[i].push(r);
        }
    }
    let names: Vec<String> = servers.iter().map(|(s, _)| s.label.clone()).collect();
    let samples: Vec<crate::series::Samples> = names
        .iter()
        .zip(&runs)
        .map(|(n, rs)| crate::series::Samples {
            variant: n.clone(),
            values: rs
                .iter()
                .filter_map(|r| r.rss_bytes_per_connection)
                .collect(),
        })
        .collect();
    if let Some(dir) = &cfg.out {
        for s in &samples {
            crate::series::write_samples(dir, "bytes_per_connection", s)?;
        }
    }
    let judged = crate::series::judge(
        "bytes_per_connection",
        &samples,
        &names,
        cfg.confidence,
        linerate_stat::Better::Lower,
    );
    let (report, verdicts) = match judged {
        Some((text, v)) => (Some(text), v),
        None => (None, Vec::new()),
    };
    Ok(IdleComparison {
        servers: infos.into_iter().flatten().collect(),
        skipped,
        runs,
        report,
        verdicts,
    })
}

/// Connects, sends `request`, reads the whole answer; the open connection and the status.
fn exchange(target: SocketAddr, request: &[u8]) -> io::Result<(TcpStream, u16)> {
    let mut c = Conn::open(target)?;
    c.s.write_all(request)?;
    match c.answer(false)? {
        Some(a) if a.whole && !a.close => Ok((c.s, a.status)),
        Some(a) if a.whole => Err(io::Error::other("the server closed a keep-alive request")),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before the whole answer",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A tiny keep-alive server: answers every request on every connection with 200.
    fn server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut s = s;
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            return;
                        }
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                    }
                });
            }
        });
        addr
    }

    #[test]
    fn connections_are_held_and_the_probe_is_answered() {
        let cfg = IdleConfig {
            target: server(),
            host: "t".into(),
            path: "/".into(),
            connections: 20,
            hold: Duration::ZERO,
            server_pid: Some(std::process::id()),
        };
        let r = run(&cfg).unwrap();
        assert_eq!(r.connections_held, 20, "{r:?}");
        assert_eq!(r.statuses.get(&200), Some(&20));
        assert_eq!(r.probe_status, Some(200));
        assert!(r.failures.is_empty(), "{r:?}");
        assert!(r.rss_bytes_per_connection.is_some());
    }
}
