//! The command lines of `linerate bench …` and `linerate sink`: their arguments
//! (clap), defaults, and the printing of what they measured, human and `--json`. The
//! binary only dispatches here.

mod compare;
mod conns;
mod http;
mod soak;
mod table;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use linerate_tx::{Strategy, TxConfig};

use crate::machine::Build;
use crate::sink::{Discard, Sink, SinkConfig, SinkReport};
use crate::stream::{self, Limit, NetnsSettings, StreamConfig, StreamResult, StreamSource};
use crate::StopFlag;

/// Exit status for usage errors (sysexits' EX_USAGE).
pub const EXIT_USAGE: u8 = 64;
/// Exit status for failures.
pub const EXIT_FAILURE: u8 = 2;

/// Runs `linerate bench …`; `build` names the binary for the reports.
pub fn run(bench: Bench, build: Build) -> anyhow::Result<ExitCode> {
    match bench {
        Bench::Stream(a) => run_stream(*a),
        Bench::Http(a) => http::run_http(*a),
        Bench::Conns(a) => conns::run(*a),
        Bench::Files(a) => http::run_files(a),
        Bench::Idle(a) => http::run_idle(a),
        Bench::Soak(a) => soak::run_soak(*a),
        Bench::Compare(a) => compare::run_compare(*a, build),
        Bench::Cold(a) => compare::run_cold(*a),
    }
}

/// Prints a usage error and gives its exit status.
pub fn usage_error(msg: &str) -> ExitCode {
    eprintln!("linerate: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// The words of a flag's one-string value (`--linerate-args "--lowat 0"`).
fn words(s: Option<&str>) -> Vec<String> {
    s.map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// One TCP stream from a file or memory by one transmit strategy (netperf
    /// TCP_STREAM / TCP_SENDFILE). With no arguments: 10 s of batched sendfile of a
    /// generated 64 MiB file to a sink started on loopback. With -i and --compare:
    /// variants run interleaved and are compared by Student's t (ministat). With
    /// --table: seed 000's table, a grid of paths, buffers, send sizes and strategies.
    #[command(args_override_self = true)]
    Stream(Box<StreamArgs>),
    /// HTTP/1.1 or HTTP/2 (--h2) load, in clear or over TLS (wrk's and h2load's
    /// role): keep-alive or a connection per request, pipelining,
    /// a paced open loop (-R), latency percentiles, status and error counts, verified
    /// lengths, and the server's CPU per request with --server-pid. With -i and
    /// --compare: variants run interleaved and are compared by Student's t (ministat).
    #[command(args_override_self = true)]
    Http(Box<http::HttpArgs>),
    /// Many connections at once (tcpp): -p client threads, each holding -c connections,
    /// each moving -b bytes to a sink (--send) or from one (--receive), started here
    /// with --sink-workers threads, on loopback or --netns. Reports connections and
    /// bytes per second and each side's CPU and service demand; with -i and --compare,
    /// variants interleaved and compared by Student's t (ministat).
    #[command(args_override_self = true)]
    Conns(Box<conns::ConnsArgs>),
    /// What idle keep-alive connections cost a server: opens N connections, one request
    /// each, holds them, and reads the server's memory, descriptors and threads before
    /// and with them (--server-pid); a request on a new connection meanwhile shows it
    /// still answers.
    Idle(http::IdleArgs),
    /// A bounded mixed load with resets, slow readers, malformed requests, pipelining,
    /// and files truncated and renamed meanwhile, against a server it starts (or one
    /// given); then the server's descriptors, threads and memory against the baseline,
    /// its access-log lines against the requests, and the errors. Exit 0 when clean.
    Soak(Box<soak::SoakArgs>),
    /// Write the file sets `bench http` asks for: one file per size, and/or the
    /// SpecWeb99-style static mix.
    Files(http::FilesArgs),
    /// linerate against nginx, lighttpd and h2o (those installed): writes the file set,
    /// starts each server with one worker pinned to the server CPU, runs the same load
    /// against each, interleaved, and compares requests/s, p99 latency and server CPU
    /// per request by Student's t; writes compare.json and an HTML report with charts.
    /// --variant and --bin compare linerate's option sets and builds; --client wrk
    /// makes the load with wrk too.
    Compare(Box<compare::CompareArgs>),
    /// Does a file not in memory stall the rest of its worker? Drops cold files from
    /// the page cache, fetches them while a hot load runs beside, and compares the hot
    /// tail latency and the cold throughput of linerate variants (default: the disk
    /// helpers against --disk-helpers 0), interleaved, by Student's t.
    Cold(Box<compare::ColdArgs>),
}

#[derive(Args, Debug)]
pub struct SinkArgs {
    /// Address to listen on (port 0 picks a free port; the first output line says which).
    #[arg(long, default_value = "127.0.0.1:12865")]
    listen: SocketAddr,
    /// How to discard: read (into a buffer) or splice (socket → pipe → /dev/null).
    #[arg(long, default_value = "read", value_parser = parse_discard)]
    discard: Discard,
    /// SO_RCVBUF of accepted connections (bytes; K, M suffixes).
    #[arg(short = 'S', long = "rcvbuf", value_name = "BYTES", value_parser = parse_positive_size)]
    rcvbuf: Option<usize>,
    /// Pin the sink to this CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Exit after this many connections.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    connections: Option<u64>,
    /// Event-loop threads, each with its own SO_REUSEPORT listener on the address; the
    /// kernel spreads connections among them.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    workers: u64,
    /// Also a source: write this many bytes to each connection, then end the sink's
    /// side (and read the peer's until it ends): the server side of `bench conns
    /// --receive`.
    #[arg(long, value_name = "BYTES", value_parser = parse_positive_size_u64)]
    send: Option<u64>,
    /// Pin worker i to the i-th CPU (each report then names the worker's CPU and the
    /// one that processed the connection's handshake), and pick the worker of a new
    /// connection: cpu, the worker on the CPU that processed its SYN (as `serve --steer
    /// cpu`); off, the kernel's hash. Without it the workers are not pinned.
    #[arg(long, value_name = "MODE", value_parser = ["off", "cpu"], conflicts_with = "cpu")]
    steer: Option<String>,
    /// Print only the "listening on" line, no per-connection reports.
    #[arg(long)]
    quiet: bool,
    /// Per-connection reports as JSON lines.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct StreamArgs {
    /// Sink to send to (a running `linerate sink`; netperf's -H, long only here since
    /// -H is a request header in `bench http`); default: start one on loopback.
    #[arg(long = "host", value_name = "HOST:PORT", conflicts_with = "netns")]
    host: Option<SocketAddr>,
    /// Seconds to send for [default: 10; 3 with --table].
    #[arg(short = 'l', long = "length", value_name = "SECONDS", value_parser = parse_seconds, conflicts_with = "bytes")]
    length: Option<Duration>,
    /// Send this many bytes instead of sending for a time (long only: -n is a request
    /// count in `bench http`).
    #[arg(long = "bytes", value_name = "BYTES", value_parser = parse_positive_size_u64)]
    bytes: Option<u64>,
    /// File to send (sent whole, repeatedly); default: a generated temporary file.
    #[arg(
        short = 'F',
        long = "file",
        value_name = "PATH",
        conflicts_with = "memory"
    )]
    file: Option<PathBuf>,
    /// Send from a memory buffer instead of a file.
    #[arg(long)]
    memory: bool,
    /// Size of the generated file or memory buffer.
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_positive_size_u64)]
    size: u64,
    /// Transmit strategy: copy, sendfile-4k, sendfile, sendfile-chunk-SIZE, splice, zerocopy.
    #[arg(long, default_value = "sendfile", value_parser = parse_strategy)]
    strategy: Strategy,
    /// With --strategy sendfile: fixed-size calls of this many bytes until EAGAIN
    /// (h2o 64K, lighttpd 256K, nginx 2M) instead of batched calls.
    #[arg(long, value_name = "BYTES", value_parser = parse_positive_size)]
    chunk: Option<usize>,
    /// Sender SO_SNDBUF (bytes; K, M suffixes). Default: the kernel's autotuning.
    #[arg(short = 's', value_name = "BYTES", value_parser = parse_positive_size)]
    sndbuf: Option<usize>,
    /// Sink SO_RCVBUF, for a sink started here.
    #[arg(short = 'S', value_name = "BYTES", value_parser = parse_positive_size)]
    rcvbuf: Option<usize>,
    /// Cap on bytes per call (netperf's send size).
    #[arg(short = 'm', value_name = "BYTES", value_parser = parse_positive_size)]
    send_size: Option<usize>,
    /// How the batched strategies size a call: remaining (everything left, the kernel
    /// takes what fits) or free-space (SO_SNDBUF less SIOCOUTQ, measured before each call).
    #[arg(long, default_value = "remaining")]
    sizing: linerate_tx::Sizing,
    /// TCP_NOTSENT_LOWAT for the batched strategies (0: leave the socket's); default:
    /// the send buffer size, so the socket wakes when half of it has drained.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    lowat: Option<usize>,
    /// Runtime switch for zero-copy sends.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    zerocopy: bool,
    /// Smallest send made with MSG_ZEROCOPY; smaller ones are copied.
    #[arg(long, value_name = "BYTES", default_value = "16K", value_parser = parse_size)]
    zerocopy_min: usize,
    /// How a sink started here discards: read or splice.
    #[arg(long, default_value = "read", value_parser = parse_discard)]
    discard: Discard,
    /// Pin the sender to this CPU (default 0 when there are two CPUs or more).
    #[arg(long, value_name = "N")]
    cpu_sender: Option<usize>,
    /// Pin a sink started here to this CPU (default 1 when there are two CPUs or more).
    #[arg(long, value_name = "N")]
    cpu_sink: Option<usize>,
    /// Pin nothing.
    #[arg(long, conflicts_with_all = ["cpu_sender", "cpu_sink"])]
    no_pin: bool,
    /// Send between two network namespaces made for the run, over a veth pair (MTU
    /// 1500, 198.18.0.1 → 198.18.0.2). Needs root.
    #[arg(long)]
    netns: bool,
    /// With --netns: TSO and GSO on the veth pair.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set, requires = "netns")]
    tso: bool,
    /// Runs per variant (at least 3 for statistics); variants are interleaved
    /// [default: 1; 5 with --table].
    #[arg(short = 'i', long = "iterations", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    iterations: Option<u32>,
    /// Variants to compare, comma-separated; each is a strategy name and/or options
    /// that override the others: "sendfile-4k,sendfile" or "-s 32K,-s 128K".
    #[arg(long, value_name = "A,B[,...]", allow_hyphen_values = true)]
    compare: Option<String>,
    /// Write each metric's samples here, one ministat file per variant and metric
    /// (with --table: raw.jsonl and samples/ [default: bench-out/seed000]).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Confidence of the comparisons: 80, 90, 95, 98, 99 or 99.5 (long only: -c is a
    /// connection count in the other benchmarks).
    #[arg(long = "confidence", default_value = "95", value_parser = parse_confidence)]
    confidence: linerate_stat::Confidence,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Seed 000's table: every cell of --paths × --bufs (-s and -S) × --sizes (-m) ×
    /// --strategies runs -i times, interleaved (the strategy innermost, each first in
    /// turn, the rounds outermost); raw results go to OUT/raw.jsonl, samples to
    /// OUT/samples/. Prints a
    /// markdown table per path (mean ± standard deviation) and seed 000's two bars over
    /// netns TSO on (sendfile-4k and sendfile-chunk-64K against sendfile, sender service
    /// demand) judged by Student's t and the paired reading.
    #[arg(long, conflicts_with_all = ["host", "compare", "netns", "sndbuf", "rcvbuf", "send_size", "strategy", "chunk"])]
    table: bool,
    /// With --table: the paths, comma-separated: loopback, on (--netns --tso on), off
    /// (--netns --tso off); a namespace path that cannot be built is skipped with one
    /// line [default: loopback,on,off].
    #[arg(long, value_name = "LIST", requires = "table")]
    paths: Option<String>,
    /// With --table: the socket buffers (-s and -S), comma-separated [default: 32K,64K,128K].
    #[arg(long, value_name = "LIST", requires = "table")]
    bufs: Option<String>,
    /// With --table: the send sizes (-m), comma-separated [default: 64K,1M].
    #[arg(long = "sizes", value_name = "LIST", requires = "table")]
    send_sizes: Option<String>,
    /// With --table: the strategies, comma-separated [default:
    /// copy,sendfile-4k,sendfile-chunk-64K,sendfile,splice,zerocopy].
    #[arg(long, value_name = "LIST", requires = "table")]
    strategies: Option<String>,
}

/// `bench stream`'s arguments alone, to parse a --compare variant over the others.
#[derive(Parser, Debug)]
#[command(name = "linerate bench stream", args_override_self = true)]
struct StreamOnly {
    #[command(flatten)]
    args: StreamArgs,
}

fn parse_confidence(s: &str) -> Result<linerate_stat::Confidence, String> {
    s.parse::<f64>()
        .ok()
        .and_then(linerate_stat::Confidence::from_percent)
        .ok_or_else(|| format!("'{s}': the t table has 80, 90, 95, 98, 99 and 99.5"))
}

fn parse_size(s: &str) -> Result<usize, String> {
    let n = linerate_tx::parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("'{s}' is too large"))
}

fn parse_positive_size(s: &str) -> Result<usize, String> {
    match parse_size(s)? {
        0 => Err("must be at least 1 byte".into()),
        n if n > i32::MAX as usize => Err(format!("'{s}' is too large")),
        n => Ok(n),
    }
}

fn parse_positive_size_u64(s: &str) -> Result<u64, String> {
    match linerate_tx::parse_size(s)? {
        0 => Err("must be at least 1 byte".into()),
        n => Ok(n),
    }
}

fn parse_size_u64(s: &str) -> Result<u64, String> {
    linerate_tx::parse_size(s)
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(v > 0.0 && v <= 86_400.0) {
        return Err("must be more than 0 and at most 86400 seconds".into());
    }
    Ok(Duration::from_secs_f64(v))
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    s.parse()
        .map_err(|e: linerate_tx::ParseStrategyError| e.to_string())
}

fn parse_discard(s: &str) -> Result<Discard, String> {
    s.parse()
}

/// This binary's build, for the reports that name it.
fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{s}': expected on or off")),
    }
}

fn stop_flag() -> anyhow::Result<StopFlag> {
    let flag: StopFlag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&flag))
            .context("installing signal handlers")?;
    }
    Ok(flag)
}

pub fn run_sink(a: SinkArgs) -> anyhow::Result<ExitCode> {
    let stop = stop_flag()?;
    if let Some(c) = a.cpu {
        linerate_sys::cpu::pin_thread_to_cpu(c).with_context(|| format!("--cpu {c}"))?;
    }
    let sink = Sink::bind(SinkConfig {
        listen: a.listen,
        discard: a.discard,
        rcvbuf: a.rcvbuf,
        max_connections: a.connections,
        workers: a.workers as usize,
        send_bytes: a.send,
        pin_workers: a.steer.is_some(),
        steer: a.steer.as_deref() == Some("cpu"),
    })
    .with_context(|| format!("cannot listen on {}", a.listen))?;
    println!("listening on {}", sink.local_addr()?);
    use std::io::Write;
    std::io::stdout().flush()?;
    let (quiet, json) = (a.quiet, a.json);
    let report = move |r: &SinkReport| {
        if quiet {
            return;
        }
        if json {
            println!("{}", serde_json::to_string(r).unwrap_or_default());
        } else {
            let mbps = r.bytes as f64 * 8.0 / r.elapsed_seconds.max(1e-9) / 1e6;
            println!(
                "{}: {} bytes in {:.2} s ({:.2} 10^6bits/s), cpu {:.3} s user {:.3} s system",
                r.peer, r.bytes, r.elapsed_seconds, mbps, r.cpu_user_seconds, r.cpu_system_seconds
            );
            if r.sent_bytes > 0 {
                println!("{}: sent {} bytes", r.peer, r.sent_bytes);
            }
            if let Some(w) = r.worker_cpu {
                let got = r.incoming_cpu.map_or("-".to_string(), |c| c.to_string());
                println!("{}: served on CPU {w}, received on CPU {got}", r.peer);
            }
        }
    };
    sink.run(&stop, &report)?;
    Ok(ExitCode::SUCCESS)
}

/// A `bench stream` configuration from its arguments, or a usage error.
fn stream_config(a: &StreamArgs) -> Result<StreamConfig, String> {
    let mut strategy = a.strategy;
    if let Some(chunk) = a.chunk {
        if strategy != Strategy::SendfileBatched {
            return Err("--chunk goes with --strategy sendfile only".into());
        }
        strategy = Strategy::SendfileChunked { chunk_bytes: chunk };
    }
    if a.memory && a.size > isize::MAX as u64 {
        return Err("--size is too large for a memory buffer".into());
    }
    let cpus = crate::cpu::online_cpus();
    for (flag, cpu) in [("--cpu-sender", a.cpu_sender), ("--cpu-sink", a.cpu_sink)] {
        if let Some(c) = cpu {
            crate::cpu::check_cpu(flag, c)?;
        }
    }
    let pin_default = !a.no_pin && cpus >= 2;
    Ok(StreamConfig {
        target: a.host,
        limit: match a.bytes {
            Some(n) => Limit::Bytes(n),
            None => Limit::Time(a.length.unwrap_or(Duration::from_secs(10))),
        },
        source: match (&a.file, a.memory) {
            (Some(p), _) => StreamSource::File(p.clone()),
            (None, true) => StreamSource::Memory(a.size as usize),
            (None, false) => StreamSource::TempFile(a.size),
        },
        tx: TxConfig {
            strategy,
            max_call_bytes: a.send_size,
            zerocopy: a.zerocopy,
            zerocopy_min_bytes: a.zerocopy_min,
            sizing: a.sizing,
            notsent_lowat: a.lowat,
        },
        sndbuf: a.sndbuf,
        rcvbuf: a.rcvbuf,
        sender_cpu: a.cpu_sender.or(pin_default.then_some(0)),
        sink_cpu: a.cpu_sink.or(pin_default.then_some(1)),
        discard: a.discard,
        netns: a.netns.then_some(NetnsSettings { tso: a.tso }),
        linerate_exe: std::env::current_exe()
            .map_err(|e| format!("cannot find the linerate binary: {e}"))?,
    })
}

/// The words of one --compare variant: a leading bare word is a strategy.
fn variant_words(variant: &str) -> Vec<String> {
    let mut words: Vec<String> = variant.split_whitespace().map(str::to_string).collect();
    if words.first().is_some_and(|w| !w.starts_with('-')) {
        words.insert(0, "--strategy".into());
    }
    words
}

fn run_stream(a: StreamArgs) -> anyhow::Result<ExitCode> {
    if a.table {
        return table::run_table(&a);
    }
    let base = match stream_config(&a) {
        Ok(c) => c,
        Err(e) => return Ok(usage_error(&e)),
    };
    let stop = stop_flag()?;
    let iterations = a.iterations.unwrap_or(1);
    if a.compare.is_none() && iterations == 1 {
        let r = stream::run(&base, &stop)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print_stream(&r);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if iterations < 3 {
        return Ok(usage_error(
            "-i: statistics need at least 3 runs per variant",
        ));
    }
    // Each variant is the command line with the variant's words last (they win).
    let labels = match variant_labels(a.compare.as_deref(), &base.tx.strategy.to_string()) {
        Ok(l) => l,
        Err(e) => return Ok(usage_error(&e)),
    };
    let configs = match variant_configs(
        "stream",
        &labels,
        variant_words,
        |p: StreamOnly| p.args,
        stream_config,
    ) {
        Ok(c) => c,
        Err(e) => return Ok(usage_error(&e)),
    };
    let total = iterations as usize * configs.len();
    let mut done = 0;
    let runs = crate::series::interleave(&configs, iterations as usize, &stop, |cfg, round| {
        let r = stream::run(cfg, &stop)?;
        done += 1;
        if !a.json {
            eprintln!(
                "[{done}/{total}] round {} {}: {:.2} 10^6bits/s, sender {:.3} us/KB",
                round + 1,
                r.strategy,
                r.throughput_mbps,
                r.sender.service_demand_us_per_kb
            );
        }
        Ok::<_, stream::StreamError>(r)
    })?;
    let judged = crate::series::judge_metrics(
        &stream::METRICS,
        &labels,
        &runs,
        a.out.as_deref(),
        a.confidence,
    )
    .context("--out: writing the samples")?;
    let runs = serde_json::to_value(&runs)?;
    print_judged(&judged, &labels, iterations, a.confidence, runs, a.json)?;
    Ok(ExitCode::SUCCESS)
}

/// The end of an `-i N --compare` run: ministat's report per metric and the verdicts,
/// or all of it (with the runs) as JSON.
fn print_judged(
    judged: &crate::series::Judged,
    labels: &[String],
    iterations: u32,
    confidence: linerate_stat::Confidence,
    runs: serde_json::Value,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let reports: serde_json::Map<String, serde_json::Value> = judged
            .reports
            .iter()
            .map(|(m, _, t)| (m.to_string(), t.clone().into()))
            .collect();
        let out = serde_json::json!({
            "variants": labels,
            "iterations": iterations,
            "confidence": confidence.percent(),
            "samples": judged.samples,
            "verdicts": judged.verdicts,
            "reports": reports,
            "runs": runs,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (metric, unit, text) in &judged.reports {
            println!("{metric} ({unit}):\n{text}");
        }
        print_verdicts(&judged.verdicts);
    }
    Ok(())
}

/// Each `--compare` variant's configuration: the command line after the subcommand
/// `name` with the variant's `words` last (they win), parsed by `P` and made by `make`;
/// an error names the variant.
fn variant_configs<P: Parser, A, C>(
    name: &str,
    labels: &[String],
    words: impl Fn(&str) -> Vec<String>,
    args: impl Fn(P) -> A,
    make: impl Fn(&A) -> Result<C, String>,
) -> Result<Vec<C>, String> {
    let given = words_after(name);
    labels
        .iter()
        .map(|label| {
            let mut all = vec![name.to_string()];
            all.extend(given.iter().cloned());
            all.extend(words(label));
            let parsed = P::try_parse_from(&all)
                .map_err(|e| format!("--compare variant '{label}': {}", e.kind()))?;
            make(&args(parsed)).map_err(|e| format!("--compare variant '{label}': {e}"))
        })
        .collect()
}

/// The words of the command line after the subcommand `name`.
fn words_after(name: &str) -> Vec<String> {
    let argv: Vec<String> = std::env::args().collect();
    argv.iter()
        .position(|w| w == name)
        .map(|i| argv[i + 1..].to_vec())
        .unwrap_or_default()
}

/// The variants of `--compare A,B,...` (two to seven, none empty), or the one label
/// `single` when there is no --compare.
fn variant_labels(compare: Option<&str>, single: &str) -> Result<Vec<String>, String> {
    let Some(list) = compare else {
        return Ok(vec![single.to_string()]);
    };
    let labels: Vec<String> = list.split(',').map(|v| v.trim().to_string()).collect();
    if labels.len() < 2 || labels.iter().any(String::is_empty) {
        return Err("--compare needs two or more non-empty variants, comma-separated".into());
    }
    if labels.len() > 7 {
        return Err("--compare: at most 7 variants (ministat's limit)".into());
    }
    Ok(labels)
}

/// One line per verdict: which metric, which variants, and the difference if proven;
/// then, when the rounds pair up, the paired reading of the variant against the baseline.
fn print_verdicts(verdicts: &[crate::series::Verdict]) {
    {
        for v in verdicts {
            let c = &v.comparison;
            println!(
                "{} {}: {} vs {}: {}",
                v.metric,
                if c.significant {
                    "differs"
                } else {
                    "no difference proven"
                },
                v.variant,
                v.baseline,
                if c.significant {
                    format!(
                        "{:+.2}% +/- {:.2}% at {}% confidence",
                        c.percent,
                        c.percent_interval.abs(),
                        c.confidence
                    )
                } else {
                    format!("at {}% confidence", c.confidence)
                }
            );
            if let Some(p) = &v.paired {
                println!(
                    "  {}",
                    linerate_stat::format_paired(p, &v.baseline, &v.variant)
                );
            }
        }
    }
}

fn print_stream(r: &StreamResult) {
    println!("STREAM {} over {}, from {}", r.strategy, r.path, r.source);
    println!("Recv     Send     Send                           Sender            Receiver          Machine ({} CPUs)", r.machine.cpus);
    println!("Socket   Socket   Message  Elapsed               CPU     Demand    CPU     Demand    Util    Demand   softirq");
    println!("Size     Size     Size     Time     Throughput   % one   us/KB     % one   us/KB     %       us/KB    secs");
    println!("bytes    bytes    bytes    secs.    10^6bits/s");
    let (rc, rd) = match &r.receiver {
        Some(c) => (
            format!("{:.2}", c.percent_of_one_cpu),
            format!("{:.3}", c.service_demand_us_per_kb),
        ),
        None => ("-".into(), "-".into()),
    };
    println!(
        "{:<8} {:<8} {:<8} {:<8.2} {:<12.2} {:<7.2} {:<9.3} {:<7} {:<9} {:<7.2} {:<8.3} {:.2}",
        r.recv_socket_bytes,
        r.send_socket_bytes,
        r.send_size_bytes,
        r.elapsed_seconds,
        r.throughput_mbps,
        r.sender.percent_of_one_cpu,
        r.sender.service_demand_us_per_kb,
        rc,
        rd,
        r.machine.utilization_percent,
        r.machine.service_demand_us_per_kb,
        r.machine.softirq_seconds,
    );
    let c = &r.counters;
    println!(
        "engine: {} bytes, {} syscalls ({:.1}/MB), {} wake-ups ({:.1}/MB), {} EAGAIN ({:.2}/MB), {} short sends, {} space queries",
        c.bytes, c.syscalls, r.per_mb.syscalls, c.wakeups, r.per_mb.wakeups, c.eagain, r.per_mb.eagain, c.short_sends, c.space_queries
    );
    if c.zc_sends + c.zc_copy_sends > 0 {
        println!(
            "zero-copy: {} sends, {} completions, {} copied by the kernel, {} ENOBUFS, {} copied sends{}",
            c.zc_sends,
            c.zc_completions,
            c.zc_copied,
            c.zc_enobufs,
            c.zc_copy_sends,
            if c.zc_disabled > 0 { ", switched off: it did not pay" } else { "" }
        );
    }
    if c.degraded > 0 {
        println!(
            "note: {} transmit(s) could not use {} and copied instead",
            c.degraded, r.strategy
        );
    }
}
