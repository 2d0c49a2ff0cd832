//! h2load as a load client: `bench compare --h2 --client h2load` makes the same run as
//! [`super::run`] with nghttp2's tool, the HTTP/2 counterpart of wrk, so the built-in
//! client's HTTP/2 figures can be checked against an independent one.
//!
//! h2load is run, not reimplemented. Its summary rounds the run's duration and prints
//! no latency percentiles, so it is also asked for its per-request log (`--log-file`:
//! start, status and duration of every request, tab-separated): the statuses and the
//! latency distribution come from there, exact, as the built-in client's do. Its
//! summary gives the protocol it spoke (a run that did not speak HTTP/2, "h2" over
//! TLS and "h2c" in clear, is an error: h2load falls back to HTTP/1.1 when ALPN does
//! not pick h2), the body bytes and the failures.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use hdrhistogram::Histogram;

use super::{Errors, HttpConfig, HttpError, HttpResult, Limit};

/// h2load on `PATH`, if installed.
pub fn find() -> Option<PathBuf> {
    super::wrk::find_program("h2load")
}

/// Why a load cannot be made by h2load as this module runs it, if it cannot: one URL,
/// for a time, as fast as answered, over HTTP/2.
pub fn unsupported(cfg: &HttpConfig) -> Option<&'static str> {
    if cfg.h2.is_none() {
        Some("h2load is run for HTTP/2: give --h2 (wrk makes the HTTP/1.1 runs)")
    } else if cfg.workload.items().len() != 1 {
        Some("h2load is given one URL: give one size, not a mix or a list")
    } else if !matches!(cfg.limit, Limit::Time(_)) {
        Some("h2load is run for a time (-d), not a request count")
    } else if cfg.rate.is_some() {
        Some("h2load has no request rate (-R) in its timed runs")
    } else if cfg.close {
        Some("h2load keeps connections open (no --close)")
    } else {
        None
    }
}

/// Runs `exe` (h2load) with the load of `cfg`, pinned to the client CPUs, measuring
/// the server's CPU as [`super::run`] does.
pub fn run(cfg: &HttpConfig, exe: &Path) -> Result<HttpResult, HttpError> {
    if let Some(why) = unsupported(cfg) {
        return Err(HttpError::Io(io::Error::other(why)));
    }
    let Limit::Time(duration) = cfg.limit else {
        unreachable!("checked by unsupported()")
    };
    let item = &cfg.workload.items()[0];
    let log = tempfile::Builder::new()
        .prefix("linerate-h2load")
        .suffix(".log")
        .tempfile()?;
    let threads = cfg.threads.clamp(1, cfg.connections.max(1));
    // h2load takes whole seconds: -d is rounded up.
    let seconds = (duration.as_secs_f64().ceil() as u64).max(1);
    let mut cmd = Command::new(exe);
    cmd.arg(format!("--clients={}", cfg.connections))
        .arg(format!("--threads={threads}"))
        .arg(format!("--max-concurrent-streams={}", cfg.pipeline.max(1)))
        .arg(format!("--duration={seconds}"))
        .arg("--warm-up-time=0")
        .arg(format!("--log-file={}", log.path().display()));
    if cfg.host != cfg.target.to_string() {
        cmd.arg(format!("--header=:authority: {}", cfg.host));
    }
    for h in &cfg.headers {
        cmd.arg(format!("--header={h}"));
    }
    let scheme = if cfg.tls.is_some() {
        // As the built-in client: AES-128-GCM alone, ALPN h2 alone.
        cmd.arg("--ciphers=ECDHE-ECDSA-AES128-GCM-SHA256")
            .arg("--tls13-ciphers=TLS_AES_128_GCM_SHA256")
            .arg("--npn-list=h2");
        "https"
    } else {
        "http"
    };
    cmd.arg(format!("{scheme}://{}{}", cfg.target, item.path));
    let secs = seconds as f64;
    let ((summary, logged), cpu) = super::wrk::run_tool(cfg, &mut cmd, |out| {
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(summary) = parse_summary(&text) else {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(HttpError::Io(io::Error::other(format!(
                "h2load ({}) printed no result: {}",
                out.status,
                err.lines().chain(text.lines()).last().unwrap_or("")
            ))));
        };
        // What h2load calls HTTP/2 in clear.
        let want = if cfg.tls.is_some() { "h2" } else { "h2c" };
        if summary.protocol != want {
            return Err(HttpError::Io(io::Error::other(format!(
                "h2load spoke {} to {}, not {want}",
                if summary.protocol.is_empty() {
                    "no application protocol"
                } else {
                    &summary.protocol
                },
                cfg.target
            ))));
        }
        let logged = read_log(log.path())?;
        if logged.requests == 0 {
            return Err(HttpError::NoResponses(format!(
                "h2load: no responses ({} failed, {} errored)",
                summary.failed, summary.errored
            )));
        }
        let counted = (secs, logged.requests, summary.data_bytes);
        Ok(((summary, logged), counted))
    })?;
    let requests = logged.requests;
    let body_bytes = summary.data_bytes;
    Ok(HttpResult {
        target: format!("{scheme}://{}", cfg.target),
        workload: cfg.workload.describe(),
        connections: cfg.connections,
        threads,
        pipeline: cfg.pipeline.max(1),
        keep_alive: true,
        protocol: "h2",
        rate: None,
        elapsed_seconds: secs,
        requests,
        requests_per_second: requests as f64 / secs,
        body_bytes,
        bytes: summary.total_bytes,
        megabytes_per_second: body_bytes as f64 / secs / 1e6,
        latency_us: super::latency(&logged.latency),
        statuses: logged.statuses,
        errors: Errors {
            // Requests that failed (a reset stream, a closed connection) and those that
            // errored before they were sent.
            read: summary.failed,
            connect: summary.errored,
            timeout: summary.timeout,
            ..Errors::default()
        },
        first_error: None,
        connections_opened: cfg.connections as u64,
        retried: 0,
        tls_handshakes: None,
        ack_frequency_frames: None,
        server: cpu.server,
        client: cpu.client,
        wrk: None,
    })
}

/// What h2load's summary says.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    /// "Application protocol:" (empty when it printed none).
    protocol: String,
    failed: u64,
    errored: u64,
    timeout: u64,
    /// Bytes read in all, and of DATA frames ("traffic:").
    total_bytes: u64,
    data_bytes: u64,
}

/// Reads the summary lines of h2load's output (None without its "requests:" line).
fn parse_summary(text: &str) -> Option<Summary> {
    let mut s = Summary::default();
    let mut seen = false;
    for line in text.lines() {
        if let Some(p) = line.strip_prefix("Application protocol:") {
            s.protocol = p.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("requests:") {
            // "N total, N started, N done, N succeeded, N failed, N errored, N timeout"
            for field in rest.split(',') {
                let mut w = field.split_whitespace();
                let (Some(n), Some(what)) = (w.next(), w.next()) else {
                    return None;
                };
                let n: u64 = n.parse().ok()?;
                match what {
                    "failed" => s.failed = n,
                    "errored" => s.errored = n,
                    "timeout" => s.timeout = n,
                    _ => {}
                }
            }
            seen = true;
        } else if let Some(rest) = line.strip_prefix("traffic:") {
            // "1.19GB (1277952000) total, 4.88MB (5120000) headers (space savings
            // 95.12%), 1.17GB (1250000000) data": the exact counts are in parentheses.
            for field in rest.split(',') {
                let Some((_, after)) = field.split_once('(') else {
                    continue;
                };
                let Some((n, what)) = after.split_once(')') else {
                    continue;
                };
                let Ok(n) = n.trim().parse::<u64>() else {
                    continue;
                };
                match what.split_whitespace().next() {
                    Some("total") => s.total_bytes = n,
                    Some("data") => s.data_bytes = n,
                    _ => {}
                }
            }
        }
    }
    seen.then_some(s)
}

/// What h2load's per-request log says.
#[derive(Debug)]
struct Logged {
    requests: u64,
    statuses: BTreeMap<u16, u64>,
    latency: Histogram<u64>,
}

/// Reads the per-request log: one line per request answered, "start (µs since the
/// epoch) TAB status TAB duration (µs)". A line with no status (-1: the stream failed;
/// 0: begun in a warm-up, which these runs do not have) is not an answer.
fn read_log(path: &Path) -> io::Result<Logged> {
    let text = std::fs::read_to_string(path)?;
    parse_log(&text).ok_or_else(|| io::Error::other("h2load's log: a line it did not write"))
}

fn parse_log(text: &str) -> Option<Logged> {
    let mut l = Logged {
        requests: 0,
        statuses: BTreeMap::new(),
        latency: Histogram::new_with_bounds(1, 100_000_000, 3).ok()?,
    };
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut f = line.split('\t');
        let (Some(_start), Some(status), Some(us)) = (f.next(), f.next(), f.next()) else {
            return None;
        };
        let status: i64 = status.trim().parse().ok()?;
        let us: u64 = us.trim().parse().ok()?;
        let Ok(status @ 1..) = u16::try_from(status) else {
            continue;
        };
        l.requests += 1;
        *l.statuses.entry(status).or_default() += 1;
        l.latency.saturating_record(us.max(1));
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "starting benchmark...
spawning thread #0: 4 total client(s). Timing-based test with 0s of warm-up time and 1s of main duration for measurements.
Warm-up started for thread #0.
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
TLS Protocol: TLSv1.3
Cipher: TLS_AES_128_GCM_SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 1.00s, 1234.00 req/s, 1.24MB/s
requests: 1234 total, 1238 started, 1234 done, 1233 succeeded, 1 failed, 0 errored, 0 timeout
status codes: 1233 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 1.24MB (1300000) total, 12.05KB (12340) headers (space savings 90.00%), 1.18MB (1262592) data
                     min         max         mean         sd        +/- sd
time for request:       44us      1.23ms       120us        30us    80.00%
";

    #[test]
    fn the_summary_gives_protocol_failures_and_exact_byte_counts() {
        let s = parse_summary(OUTPUT).unwrap();
        assert_eq!(s.protocol, "h2");
        assert_eq!((s.failed, s.errored, s.timeout), (1, 0, 0));
        assert_eq!((s.total_bytes, s.data_bytes), (1_300_000, 1_262_592));
        // No "requests:" line: not a run.
        assert_eq!(parse_summary("starting benchmark...\n"), None);
        let plain = OUTPUT.replace("Application protocol: h2\n", "");
        assert_eq!(parse_summary(&plain).unwrap().protocol, "");
    }

    #[test]
    fn the_log_gives_statuses_and_latencies() {
        let l = parse_log("1700000000000000\t200\t120\n1700000000000100\t200\t80\n1700000000000200\t304\t5000\n1700000000000300\t-1\t7\n").unwrap();
        assert_eq!(l.requests, 3);
        assert_eq!(l.statuses.get(&200), Some(&2));
        assert_eq!(l.statuses.get(&304), Some(&1));
        assert!((5000..5010).contains(&l.latency.max()), "3 digits");
        assert!(parse_log("not a log line\n").is_none());
    }
}
