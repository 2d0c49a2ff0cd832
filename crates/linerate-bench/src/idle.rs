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
