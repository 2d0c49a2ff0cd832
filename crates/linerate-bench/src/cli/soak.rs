//! `linerate bench soak`: the command line over `crate::soak`, and the server
//! it starts when none is given.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::soak::{self, SoakConfig, SoakReport};
use anyhow::Context;
use clap::Args;

use super::{parse_seconds, stop_flag, usage_error};

#[derive(Args, Debug, Clone)]
pub struct SoakArgs {
    /// A running server (http://HOST[:PORT]/); with it, --root is its document root
    /// (the soak writes its files under linerate-soak/ there). Without: the soak starts
    /// `linerate serve` with two workers on a free port in a temporary root, and stops
    /// it with SIGTERM at the end (it must exit 0).
    #[arg(value_name = "URL")]
    url: Option<String>,
    /// Seconds of load [default: 30].
    #[arg(short = 'd', long, value_name = "SECONDS", value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Client threads [default: 4].
    #[arg(short = 'c', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    clients: Option<u32>,
    /// The given server's document root.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The given server's process, for its descriptors, threads and memory.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// The given server's access log, whose new lines are counted against the requests.
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,
    /// One JSON object instead of the human report.
    #[arg(long)]
    json: bool,
    /// Flags for the server the soak starts (after --): `-- --transmit splice`.
    #[arg(last = true, value_name = "SERVE-FLAGS")]
    serve_flags: Vec<String>,
}

/// The server the soak started.
struct Started {
    child: Child,
    root: tempfile::TempDir,
}

/// `linerate bench soak`.
pub fn run_soak(a: SoakArgs) -> anyhow::Result<ExitCode> {
    let duration = a.duration.unwrap_or(Duration::from_secs(30));
    let clients = a.clients.unwrap_or(4) as usize;
    let stop = stop_flag()?;
    let (cfg, mut started) = match &a.url {
        Some(url) => {
            let Some(root) = a.root.clone() else {
                return Ok(usage_error(
                    "URL: give the server's document root with --root",
                ));
            };
            if !a.serve_flags.is_empty() {
                return Ok(usage_error(
                    "-- SERVE-FLAGS: only for the server the soak starts",
                ));
            }
            let (target, host, _) = match super::http::parse_url(url) {
                Ok(t) => t,
                Err(e) => return Ok(usage_error(&format!("URL {e}"))),
            };
            let cfg = SoakConfig {
                target,
                host,
                root,
                server_pid: a.server_pid,
                access_log: a.access_log.clone(),
                duration,
                clients,
                stop,
            };
            (cfg, None)
        }
        None => {
            if a.root.is_some() || a.server_pid.is_some() || a.access_log.is_some() {
                return Ok(usage_error(
                    "--root, --server-pid and --access-log describe a given server: give its URL",
                ));
            }
            let root = tempfile::tempdir().context("a temporary document root")?;
            let log = root.path().join("access.log");
            let www = root.path().join("www");
            std::fs::create_dir(&www)?;
            let errors = std::fs::File::create(root.path().join("error.log"))?;
            let (child, target) = start_server(&www, &log, errors, &a.serve_flags)?;
            let cfg = SoakConfig {
                target,
                host: "soak".into(),
                root: www,
                server_pid: Some(child.id()),
                access_log: Some(log),
                duration,
                clients,
                stop,
            };
            (cfg, Some(Started { child, root }))
        }
    };
    let r = soak::run(&cfg);
    let exit = started.as_mut().map(stop_server);
    // The started server's error log (its standard error): how many lines, by level.
    let error_log = started.as_ref().map(|s| {
        let text = std::fs::read_to_string(s.root.path().join("error.log")).unwrap_or_default();
        let mut levels = std::collections::BTreeMap::<String, u64>::new();
        for l in text.lines() {
            let level = l.split_whitespace().nth(1).unwrap_or("?").to_string();
            *levels.entry(level).or_insert(0) += 1;
        }
        levels
    });
    let r = r.context("soak")?;
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["server_error_log_lines"] = serde_json::json!(error_log);
        v["server_exit_code"] = serde_json::json!(exit.flatten());
        v["passed"] = serde_json::json!(r.passed() && exit.is_none_or(|e| e == Some(0)));
        println!("{v}");
    } else {
        print_soak(&r, exit);
        if let Some(levels) = error_log.filter(|l| !l.is_empty()) {
            let l: Vec<String> = levels.iter().map(|(k, n)| format!("{n} × {k}")).collect();
            println!("server error log: {}", l.join(", "));
        }
    }
    Ok(if r.passed() && exit.is_none_or(|e| e == Some(0)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `linerate serve ROOT --listen 127.0.0.1:0 --workers 2 --access-log LOG FLAGS...`.
fn start_server(
    root: &std::path::Path,
    log: &std::path::Path,
    errors: std::fs::File,
    flags: &[String],
) -> anyhow::Result<(Child, SocketAddr)> {
    let exe = std::env::current_exe().context("finding this binary")?;
    let mut child = Command::new(exe)
        .arg("serve")
        .arg(root)
        .args(["--listen", "127.0.0.1:0", "--workers", "2", "--access-log"])
        .arg(log)
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(errors)
        .spawn()
        .context("starting linerate serve")?;
    let mut line = String::new();
    let out = child.stdout.take().context("the server's stdout")?;
    BufReader::new(out).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok());
    match addr {
        Some(a) => Ok((child, a)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("linerate serve did not start (it said {line:?})")
        }
    }
}

/// SIGTERM, then up to 15 s for the exit; its code (None: killed or still running).
fn stop_server(s: &mut Started) -> Option<i32> {
    let _ = linerate_sys::term::signal_process(s.child.id(), linerate_sys::term::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(st)) = s.child.try_wait() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = s.child.kill();
    let _ = s.child.wait();
    None
}

fn print_soak(r: &SoakReport, exit: Option<Option<i32>>) {
    let statuses = super::http::by_status(&r.statuses);
    println!(
        "soak: {:.0} s, {} requests sent, {} answered ({}); {} resets, {} slow readers, {} file changes",
        r.seconds,
        r.requests_sent,
        r.requests_answered,
        statuses.join(", "),
        r.resets,
        r.slow_readers,
        r.file_changes
    );
    if r.errors.is_empty() {
        println!("errors: none");
    } else {
        for (what, n) in &r.errors {
            println!("error {n} ×: {what}");
        }
    }
    if let (Some(b), Some(a)) = (r.server_before, r.server_after) {
        println!(
            "server: descriptors {} → {} (sockets {} → {}), threads {} → {}, RSS {:.1} → {:.1} MiB ({})",
            b.descriptors,
            a.descriptors,
            b.sockets,
            a.sockets,
            b.threads,
            a.threads,
            b.rss_kib as f64 / 1024.0,
            a.rss_kib as f64 / 1024.0,
            if r.nothing_leaked() == Some(true) {
                "nothing leaked"
            } else {
                "LEAKED"
            }
        );
    }
    if let Some(l) = r.access_log_lines {
        println!(
            "access log: {l} lines for {} requests sent, {} answered: {} answered without a line, {} lines for no request sent or twice, {} lines for {} malformed requests ({})",
            r.requests_sent,
            r.requests_answered,
            r.access_log_missing.unwrap_or(0),
            r.access_log_unexpected.unwrap_or(0),
            r.access_log_untagged.unwrap_or(0),
            r.malformed_sent,
            if r.log_consistent() == Some(true) { "every answer logged once" } else { "LINES MISSING OR WRONG" }
        );
    }
    match exit {
        Some(Some(0)) => println!("server exit after SIGTERM: 0"),
        Some(Some(c)) => println!("server exit after SIGTERM: {c} (FAILED)"),
        Some(None) => {
            println!("server exit after SIGTERM: none within 15 s, or by a signal (FAILED)")
        }
        None => {}
    }
}
