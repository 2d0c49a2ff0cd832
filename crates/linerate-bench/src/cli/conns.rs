//! `linerate bench conns`: tcpp's many-connection test on [`crate::conns`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::conns::{self, ConnsConfig, ConnsResult, Direction};
use crate::stream::NetnsSettings;
use anyhow::Context;
use clap::{Args, Parser};

use super::{parse_confidence, parse_on_off, parse_positive_size_u64, usage_error};

#[derive(Args, Debug)]
pub struct ConnsArgs {
    /// Client threads (tcpp's processes), each with its own event loop, holding -c
    /// connections.
    #[arg(short = 'p', long = "processes", value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1024))]
    processes: u64,
    /// Connections each client thread holds open at once.
    #[arg(short = 'c', long = "connections", value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    connections: u64,
    /// Bytes each connection moves (K, M, G suffixes).
    #[arg(short = 'b', long = "bytes", value_name = "BYTES", default_value = "1M", value_parser = parse_positive_size_u64)]
    bytes: u64,
    /// The client sends and the sink discards (the default).
    #[arg(long, conflicts_with = "receive")]
    send: bool,
    /// The sink sends (`linerate sink --send BYTES`) and the client discards.
    #[arg(long)]
    receive: bool,
    /// A running sink to connect to (with --receive, one started with --send of the
    /// same byte count); default: start one here.
    #[arg(long = "host", value_name = "HOST:PORT", conflicts_with = "netns")]
    host: Option<SocketAddr>,
    /// Worker threads of the sink started here, each with its own SO_REUSEPORT
    /// listener.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    sink_workers: u64,
    /// Pin the client threads to these CPUs, round-robin [default: 0 when there are two
    /// CPUs or more].
    #[arg(long = "cpu-client", value_name = "LIST", value_delimiter = ',')]
    cpu_client: Vec<usize>,
    /// Pin a sink started here to this CPU [default: 1 when there are two CPUs or
    /// more, and neither --steer cpu nor --queues].
    #[arg(long = "cpu-sink", value_name = "N", conflicts_with = "steer")]
    cpu_sink: Option<usize>,
    /// The sink started here pins its workers one per CPU and picks the worker of a
    /// new connection: cpu, the worker on the CPU that processed its SYN (as `serve
    /// --steer cpu`); off, the kernel's hash. Either way each connection is counted as
    /// served on its receive CPU or elsewhere. Without it the sink is pinned to
    /// --cpu-sink.
    #[arg(long, value_name = "MODE", value_parser = ["off", "cpu"])]
    steer: Option<String>,
    /// Pin nothing.
    #[arg(long, conflicts_with_all = ["cpu_client", "cpu_sink"])]
    no_pin: bool,
    /// Run between two network namespaces made for the run, over a veth pair (MTU
    /// 1500, 198.18.0.1 → 198.18.0.2). Needs root.
    #[arg(long)]
    netns: bool,
    /// With --netns: TSO and GSO on the veth pair.
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set, requires = "netns")]
    tso: bool,
    /// With --netns: a veth pair with N transmit and receive queues over the first N
    /// CPUs, transmit queue i for CPU i (XPS) and each end's received packets spread
    /// over the N CPUs by flow hash (RPS), as a NIC with a queue per CPU spreads them.
    #[arg(long, value_name = "N", requires = "netns", value_parser = clap::value_parser!(u64).range(1..=1024))]
    queues: Option<u64>,
    /// Runs per variant (at least 3 for statistics); variants are interleaved.
    #[arg(short = 'i', long = "iterations", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    iterations: u32,
    /// Variants to compare, comma-separated, each options that override the others:
    /// "-c 10,-c 100" or "--sink-workers 1,--sink-workers 2".
    #[arg(long, value_name = "A,B[,...]", allow_hyphen_values = true)]
    compare: Option<String>,
    /// Write each metric's samples here, one ministat file per variant and metric.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Confidence of the comparisons: 80, 90, 95, 98, 99 or 99.5.
    #[arg(long = "confidence", default_value = "95", value_parser = parse_confidence)]
    confidence: linerate_stat::Confidence,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `bench conns`'s arguments alone, to parse a --compare variant over the others.
#[derive(Parser, Debug)]
#[command(name = "linerate bench conns", args_override_self = true)]
struct ConnsOnly {
    #[command(flatten)]
    args: ConnsArgs,
}

fn config(a: &ConnsArgs) -> Result<ConnsConfig, String> {
    let allowed = linerate_sys::cpu::allowed_cpus().unwrap_or_default();
    for &c in &a.cpu_client {
        crate::cpu::check_cpu("--cpu-client", c)?;
        if !allowed.is_empty() && !allowed.contains(&c) {
            return Err(format!(
                "--cpu-client: CPU {c} is not one this process may use ({allowed:?})"
            ));
        }
    }
    if let Some(c) = a.cpu_sink {
        crate::cpu::check_cpu("--cpu-sink", c)?;
    }
    let pin = !a.no_pin && crate::cpu::online_cpus() >= 2;
    let client_cpus = match (&a.cpu_client[..], pin) {
        ([], true) => vec![0],
        (list, _) => list.to_vec(),
    };
    let steer = a.steer.as_deref().map(|m| m == "cpu");
    if steer.is_some() && a.host.is_some() {
        return Err("--steer is for a sink started here, not --host".into());
    }
    let queues = match a.queues {
        None => Vec::new(),
        Some(n) => {
            let cpus = linerate_sys::cpu::allowed_cpus().map_err(|e| format!("--queues: {e}"))?;
            if n as usize > cpus.len() {
                return Err(format!(
                    "--queues {n}: this process may use {} CPUs",
                    cpus.len()
                ));
            }
            cpus[..n as usize].to_vec()
        }
    };
    let sink_pin = pin && steer.is_none() && queues.is_empty();
    Ok(ConnsConfig {
        target: a.host,
        processes: a.processes as usize,
        connections: a.connections as usize,
        bytes: a.bytes,
        direction: if a.receive {
            Direction::Receive
        } else {
            Direction::Send
        },
        client_cpus,
        sink_cpu: a.cpu_sink.or(sink_pin.then_some(1)),
        sink_workers: a.sink_workers as usize,
        netns: a.netns.then_some(NetnsSettings { tso: a.tso }),
        queues,
        sink_steer: steer,
        linerate_exe: std::env::current_exe()
            .map_err(|e| format!("cannot find the linerate binary: {e}"))?,
    })
}

pub fn run(a: ConnsArgs) -> anyhow::Result<ExitCode> {
    let base = match config(&a) {
        Ok(c) => c,
        Err(e) => return Ok(usage_error(&e)),
    };
    let stop = super::stop_flag()?;
    if a.compare.is_none() && a.iterations == 1 {
        let r = conns::run(&base, &stop)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else {
            print(&r);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.iterations < 3 {
        return Ok(usage_error(
            "-i: statistics need at least 3 runs per variant",
        ));
    }
    let labels = match super::variant_labels(a.compare.as_deref(), "run") {
        Ok(l) => l,
        Err(e) => return Ok(usage_error(&e)),
    };
    let configs = if a.compare.is_none() {
        vec![base.clone()]
    } else {
        let words = |l: &str| l.split_whitespace().map(str::to_string).collect();
        match super::variant_configs("conns", &labels, words, |p: ConnsOnly| p.args, config) {
            Ok(c) => c,
            Err(e) => return Ok(usage_error(&e)),
        }
    };
    let total = a.iterations as usize * configs.len();
    let mut done = 0;
    let runs = crate::series::interleave(&configs, a.iterations as usize, &stop, |cfg, round| {
        let r = conns::run(cfg, &stop)?;
        done += 1;
        if !a.json {
            eprintln!(
                    "[{done}/{total}] round {}: {:.2} 10^6bits/s, {:.1} connections/s, client {:.3} us/KB",
                    round + 1,
                    r.throughput_mbps,
                    r.connections_per_second,
                    r.client.service_demand_us_per_kb
                );
        }
        Ok::<_, crate::stream::StreamError>(r)
    })?;
    let judged = crate::series::judge_metrics(
        &conns::METRICS,
        &labels,
        &runs,
        a.out.as_deref(),
        a.confidence,
    )
    .context("--out: writing the samples")?;
    let runs = serde_json::to_value(&runs)?;
    super::print_judged(&judged, &labels, a.iterations, a.confidence, runs, a.json)?;
    Ok(ExitCode::SUCCESS)
}

/// tcpp's summary, then each side's CPU.
fn print(r: &ConnsResult) {
    let dir = match r.direction {
        Direction::Send => "client → sink",
        Direction::Receive => "sink → client",
    };
    println!(
        "CONNS {dir} over {}: {} processes × {} connections × {} bytes, sink workers {}",
        r.path,
        r.processes,
        r.connections_per_process,
        r.bytes_per_connection,
        if r.sink_workers == 0 {
            "-".to_string()
        } else {
            r.sink_workers.to_string()
        }
    );
    println!(
        "  elapsed     {:.3} s: {} connections ({:.1}/s), {} bytes ({:.2} 10^6bits/s)",
        r.elapsed_seconds, r.connections, r.connections_per_second, r.bytes, r.throughput_mbps
    );
    println!(
        "  client      {:.3} CPU s ({:.1}% of one CPU), {:.3} us/KB",
        r.client.cpu_seconds, r.client.percent_of_one_cpu, r.client.service_demand_us_per_kb
    );
    match &r.sink {
        Some(s) => println!(
            "  sink        {:.3} CPU s ({:.1}% of one CPU), {:.3} us/KB",
            s.cpu_seconds, s.percent_of_one_cpu, s.service_demand_us_per_kb
        ),
        None => println!("  sink        - (not started here)"),
    }
    if let (Some(on), Some(off)) = (r.sink_on_receive_cpu, r.sink_off_receive_cpu) {
        println!(
            "  steering    {}: {on} connections served on their receive CPU, {off} elsewhere{}",
            if r.sink_steer == Some(true) {
                "cpu"
            } else {
                "off"
            },
            if r.queues > 1 {
                format!(" ({} receive queues)", r.queues)
            } else {
                String::new()
            }
        );
    }
    println!(
        "  machine     {:.3} CPU s ({:.1}% of {} CPUs), {:.3} us/KB, softirq {:.3} s",
        r.machine.cpu_seconds,
        r.machine.utilization_percent,
        r.machine.cpus,
        r.machine.service_demand_us_per_kb,
        r.machine.softirq_seconds
    );
}
