//! wrk as a load client: `bench compare --client wrk` makes the same run as
//! [`super::run`] with the independent tool users know, so the built-in client's
//! figures can be checked against it (and published numbers can come from either).
//!
//! wrk is run, not reimplemented. Its human output rounds (two decimals, changing
//! units), so a `done()` hook of wrk's Lua interface prints the exact figures on
//! lines of their own: the run's duration, responses, bytes and error counts, and
//! latency percentiles in microseconds. wrk counts answers of 400 and above apart from
//! the others and does not break them down further, so a wrk run reports those two
//! counts instead of statuses ([`WrkStatuses`]).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use super::{ClientCpu, Errors, HttpConfig, HttpError, HttpResult, Latency, Limit, ServerCpu};

/// What wrk says of the answers' statuses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WrkStatuses {
    /// Answers with a status below 400.
    pub below_400: u64,
    /// Answers with a status of 400 or more.
    pub from_400: u64,
}

/// The `done()` hook: one line of totals, one per percentile.
const SCRIPT: &str = r#"done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("linerate-wrk totals %d %d %d %d %d %d %d %d\n",
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout))
  io.write(string.format("linerate-wrk latency %.3f %d\n", latency.mean, latency.max))
  for _, p in ipairs({50, 90, 99, 99.9}) do
    io.write(string.format("linerate-wrk p %s %d\n", p, latency:percentile(p)))
  end
end
"#;

/// wrk on `PATH`, if installed.
pub fn find() -> Option<PathBuf> {
    find_program("wrk")
}

/// The executable `name` on `PATH`, if there is one.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The CPU around a load tool's run: the server's (as [`super::run`] measures it) and
/// this process's while it waited (the tool's own is not this process's).
pub(crate) struct ToolCpu {
    pub server: Option<ServerCpu>,
    pub client: ClientCpu,
}

/// A run's seconds, requests and body bytes, for the per-request and per-KB figures.
pub(crate) type Counted = (f64, u64, u64);

/// Runs `cmd` (a load tool) to its end from a thread pinned to the first client CPU
/// (the tool inherits the affinity), its output collected, measuring the CPU around
/// it; `read` makes the run's figures of the output, with what they count, or the
/// run's error.
pub(crate) fn run_tool<T>(
    cfg: &HttpConfig,
    cmd: &mut Command,
    read: impl FnOnce(&std::process::Output) -> Result<(T, Counted), HttpError>,
) -> Result<(T, ToolCpu), HttpError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let server_cpu = |pid| super::ServerReading::now(pid, cfg.server_core);
    let server0 = cfg.server_pid.map(server_cpu).transpose()?;
    let client0 = linerate_sys::cpu::process_cpu()?;
    let cpu = cfg.cpus.first().copied();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(c) = cpu {
                linerate_sys::cpu::pin_thread_to_cpu(c)?;
            }
            cmd.output()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(io::Error::other(
                "the thread running the load tool panicked",
            ))
        })
    })?;
    let server1 = cfg.server_pid.map(server_cpu).transpose()?;
    let client1 = linerate_sys::cpu::process_cpu()?;
    let (figures, (secs, requests, body_bytes)) = read(&out)?;
    let client_cpu = client1.since(&client0).total();
    let cpu = ToolCpu {
        server: ServerCpu::between(cfg, server0, server1, secs, requests, body_bytes),
        client: ClientCpu {
            cpu_seconds: client_cpu.as_secs_f64(),
            us_per_request: super::per(client_cpu, requests),
        },
    };
    Ok((figures, cpu))
}

/// Why a load cannot be made by wrk, if it cannot: wrk asks for one URL, for a time,
/// as fast as answered, with keep-alive and no pipelining.
pub fn unsupported(cfg: &HttpConfig) -> Option<&'static str> {
    if cfg.workload.items().len() != 1 {
        Some("wrk asks for one URL: give one size, not a mix or a list")
    } else if !matches!(cfg.limit, Limit::Time(_)) {
        Some("wrk runs for a time (-d), not a request count")
    } else if cfg.rate.is_some() {
        Some("wrk has no request rate (-R)")
    } else if cfg.pipeline > 1 {
        Some("wrk does not pipeline")
    } else if cfg.close {
        Some("wrk keeps connections alive (no --close)")
    } else {
        None
    }
}

/// Runs `exe` (wrk) with the load of `cfg`, pinned to the client CPUs, measuring the
/// server's CPU as [`super::run`] does.
pub fn run(cfg: &HttpConfig, exe: &Path) -> Result<HttpResult, HttpError> {
    if let Some(why) = unsupported(cfg) {
        return Err(HttpError::Io(io::Error::other(why)));
    }
    let Limit::Time(duration) = cfg.limit else {
        unreachable!("checked by unsupported()")
    };
    let item = &cfg.workload.items()[0];
    let script = tempfile::Builder::new()
        .prefix("linerate-wrk")
        .suffix(".lua")
        .tempfile()?;
    std::fs::write(script.path(), SCRIPT)?;
    let threads = cfg.threads.clamp(1, cfg.connections.max(1));
    let mut cmd = Command::new(exe);
    cmd.arg(format!("-t{threads}"))
        .arg(format!("-c{}", cfg.connections))
        .arg(format!("-d{}s", duration.as_secs().max(1)))
        .arg(format!("--timeout={}s", cfg.timeout.as_secs().max(1)))
        .arg("-s")
        .arg(script.path());
    if cfg.host != cfg.target.to_string() {
        cmd.arg("-H").arg(format!("Host: {}", cfg.host));
    }
    for h in &cfg.headers {
        cmd.arg("-H").arg(h);
    }
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    cmd.arg(format!("{scheme}://{}{}", cfg.target, item.path));
    let ((parsed, body_bytes), cpu) = run_tool(cfg, &mut cmd, |out| {
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(parsed) = parse(&text) else {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(HttpError::Io(io::Error::other(format!(
                "wrk ({}) printed no result: {}",
                out.status,
                err.lines().chain(text.lines()).next().unwrap_or("")
            ))));
        };
        if parsed.requests == 0 {
            return Err(HttpError::NoResponses(format!(
                "wrk: no responses ({} connect, {} read errors)",
                parsed.errors.connect, parsed.errors.read
            )));
        }
        // wrk counts all bytes read; with a known body length the bodies are that many
        // per answer below 400, otherwise all bytes stand for bodies.
        let body_bytes = match item.expect {
            Some(e) => e.len * parsed.statuses.below_400,
            None => parsed.bytes,
        };
        let counted = (seconds(&parsed), parsed.requests, body_bytes);
        Ok(((parsed, body_bytes), counted))
    })?;
    let secs = seconds(&parsed);
    let requests = parsed.requests;
    Ok(HttpResult {
        target: format!(
            "{}://{}",
            if cfg.tls.is_some() { "https" } else { "http" },
            cfg.target
        ),
        workload: cfg.workload.describe(),
        connections: cfg.connections,
        threads,
        pipeline: 1,
        keep_alive: true,
        protocol: "http/1.1",
        rate: None,
        elapsed_seconds: secs,
        requests,
        requests_per_second: requests as f64 / secs,
        body_bytes,
        bytes: parsed.bytes,
        megabytes_per_second: body_bytes as f64 / secs / 1e6,
        latency_us: parsed.latency,
        statuses: BTreeMap::new(),
        errors: parsed.errors,
        first_error: None,
        connections_opened: 0,
        retried: 0,
        tls_handshakes: None,
        ack_frequency_frames: None,
        server: cpu.server,
        client: cpu.client,
        wrk: Some(parsed.statuses),
    })
}

/// A wrk run's duration in seconds.
fn seconds(p: &Parsed) -> f64 {
    p.elapsed.as_secs_f64().max(1e-9)
}

/// The figures of one wrk run.
#[derive(Debug, PartialEq)]
struct Parsed {
    elapsed: Duration,
    requests: u64,
    bytes: u64,
    errors: Errors,
    statuses: WrkStatuses,
    latency: Latency,
}

/// Reads the hook's lines out of wrk's output.
fn parse(text: &str) -> Option<Parsed> {
    let mut totals = None;
    let mut latency = Latency::default();
    let mut seen_latency = false;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        if f.next() != Some("linerate-wrk") {
            continue;
        }
        let rest: Vec<&str> = f.collect();
        match rest.as_slice() {
            ["totals", nums @ ..] if nums.len() == 8 => {
                let n: Vec<u64> = nums.iter().map(|x| x.parse().ok()).collect::<Option<_>>()?;
                totals = Some(n);
            }
            ["latency", mean, max] => {
                latency.mean = mean.parse().ok()?;
                latency.max = max.parse().ok()?;
                seen_latency = true;
            }
            ["p", p, v] => {
                let v: u64 = v.parse().ok()?;
                match *p {
                    "50" => latency.p50 = v,
                    "90" => latency.p90 = v,
                    "99" => latency.p99 = v,
                    "99.9" => latency.p999 = v,
                    _ => {}
                }
                latency.distribution.push((p.parse().ok()?, v));
            }
            _ => return None,
        }
    }
    let n = totals?;
    if !seen_latency {
        return None;
    }
    let [duration_us, requests, bytes, connect, read, write, status, timeout] = n[..] else {
        return None;
    };
    Some(Parsed {
        elapsed: Duration::from_micros(duration_us),
        requests,
        bytes,
        errors: Errors {
            connect,
            // A failed write ends a connection as a reset read does.
            read: read + write,
            timeout,
            ..Errors::default()
        },
        statuses: WrkStatuses {
            below_400: requests.saturating_sub(status),
            from_400: status,
        },
        latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Running 1s test @ http://127.0.0.1:8080/1k.bin
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   110.51us   40.12us   1.20ms   93.00%
  36034 requests in 1.00s, 44.23MB read
  Non-2xx or 3xx responses: 2
Requests/sec:  36030.12
linerate-wrk totals 1000123 36034 46378201 0 1 0 2 0
linerate-wrk latency 110.512 1203
linerate-wrk p 50 101
linerate-wrk p 90 150
linerate-wrk p 99 260
linerate-wrk p 99.9 700
";

    #[test]
    fn the_hook_lines_give_exact_figures() {
        let p = parse(OUTPUT).unwrap();
        assert_eq!(p.elapsed, Duration::from_micros(1_000_123));
        assert_eq!(p.requests, 36_034);
        assert_eq!(p.bytes, 46_378_201);
        assert_eq!(p.errors.read, 1);
        assert_eq!(
            p.statuses,
            WrkStatuses {
                below_400: 36_032,
                from_400: 2
            }
        );
        assert_eq!(
            (p.latency.p50, p.latency.p90, p.latency.p99, p.latency.p999),
            (101, 150, 260, 700)
        );
        assert_eq!(p.latency.max, 1203);
        assert_eq!(p.latency.distribution.len(), 4);
    }

    #[test]
    fn output_without_the_hook_is_refused() {
        assert_eq!(parse("Running 1s test\nRequests/sec: 10\n"), None);
        let broken = OUTPUT.replace("totals 1000123", "totals x");
        assert_eq!(parse(&broken), None);
    }
}
