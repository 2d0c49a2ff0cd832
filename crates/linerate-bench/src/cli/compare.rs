//! `linerate bench compare`: the command line over `crate::compare`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::compare::{self, report, Client, CompareConfig, Event, Peer, ServerSpec};
use crate::http::Workload;
use anyhow::Context;
use clap::Args;

use super::http::{format_us, run_line, FileSetArgs, LoadArgs};
use super::{parse_confidence, stop_flag, usage_error};

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    set_of: ServerSetArgs,
    /// Load clients, comma-separated: builtin (`bench http`'s), wrk, h2load (with --h2;
    /// it runs whole seconds, -d rounded up), or several (each server and client pair is
    /// then a column; wrk and h2load run the sizes, not the mix).
    #[arg(long = "client", value_name = "LIST", value_delimiter = ',', default_value = "builtin", value_parser = parse_client)]
    clients: Vec<Client>,
    /// Write the file set here instead of a temporary directory (kept afterwards).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    #[command(flatten)]
    set: FileSetArgs,
    #[command(flatten)]
    load: LoadArgs,
    /// CPU for the servers (default: 1 when there are two CPUs or more).
    #[arg(long, value_name = "N")]
    server_cpu: Option<usize>,
    /// Run every server in one network namespace and the load in another, made for the
    /// run and joined by a veth pair (MTU 1500, servers on 198.18.0.1), the load's
    /// received packets steered to its first --cpu: the servers' CPU is then their own
    /// transmit work, as behind a NIC, not the client's receive work too. Needs root;
    /// everything is removed afterwards.
    #[arg(long)]
    netns: bool,
    /// With --netns: TSO and GSO on the veth pair.
    #[arg(long, default_value = "on", value_parser = super::parse_on_off, action = clap::ArgAction::Set, requires = "netns")]
    tso: bool,
    /// Runs per server and workload (at least 3); servers are interleaved.
    #[arg(short = 'i', long = "iterations", value_name = "N", default_value = "5", value_parser = clap::value_parser!(u32).range(3..=1000))]
    iterations: u32,
    /// Rounds run first and discarded (the first round of a fresh server runs 20-30%
    /// slow); 0 keeps every round.
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(0..=100))]
    warmup: u32,
    /// Confidence of the comparisons: 80, 90, 95, 98, 99 or 99.5.
    #[arg(long, value_name = "PERCENT", default_value = "95", value_parser = parse_confidence)]
    confidence: linerate_stat::Confidence,
    /// Directory for compare.json, report.html and the ministat sample files.
    #[arg(long, value_name = "DIR", default_value = "bench-out/compare")]
    out: PathBuf,
    /// Print the result as JSON on stdout too.
    #[arg(long)]
    json: bool,
    /// Compressed answers: SIZE.js files (text) with SIZE.js.gz beside them, asked for
    /// with Accept-Encoding: gzip. static: every server sends the .gz (nginx
    /// gzip_static, h2o file.send-compressed, Caddy's precompressed; lighttpd cannot and
    /// is skipped); dynamic: the peers compress each response (nginx gzip on, lighttpd
    /// mod_deflate, h2o compress, Caddy's encode; needs --client wrk) while linerate
    /// still sends the .gz.
    #[arg(long, value_name = "static|dynamic")]
    gzip: Option<crate::compare::peers::Gzip>,
    /// HTTPS: every server (nginx, lighttpd with mod_openssl, h2o, linerate) with one
    /// self-signed ECDSA P-256 certificate made for the run, TLS 1.3 and 1.2, the
    /// client offering AES-128-GCM alone; with --close each request is a full handshake.
    #[arg(long)]
    tls: bool,
    /// HTTP/2 to every server: ALPN h2 with --tls, prior-knowledge h2c without, each
    /// peer configured for it (nginx `http2`, lighttpd's h2proto and h2c flags, h2o as
    /// it is, Caddy's protocols); a server that answers otherwise fails the run. 16 KiB
    /// DATA frames, as browsers and h2load take.
    #[arg(long, conflicts_with_all = ["close", "checksum"])]
    h2: bool,
    /// HTTP/3 (QUIC over UDP on the TLS port; needs --tls) to the servers that speak
    /// it: linerate (--http3 on) and Caddy (its h3 protocol); the others are left
    /// out, each said so. The built-in client alone (`bench http --h3`'s). With
    /// --close a QUIC connection per request, each a full handshake.
    #[arg(long, requires = "tls", conflicts_with = "h2")]
    h3: bool,
    /// Protocols side by side, comma-separated (h1, h2, h3): each server and protocol
    /// a column, in one interleaved run ("h2,h3" puts linerate's HTTP/3 beside its own
    /// HTTP/2); a server without HTTP/3 runs its other columns. The builtin client.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_protocol, conflicts_with_all = ["h2", "h3"])]
    protocols: Vec<crate::compare::Protocol>,
    /// With --h2, --h3 or --protocols: streams in flight per connection (h2load's -m;
    /// an HTTP/1.1 column pipelines that deep) [default: 1].
    #[arg(short = 'm', long = "streams", value_name = "N", conflicts_with = "pipeline", value_parser = clap::value_parser!(u32).range(1..=1024))]
    streams: Option<u32>,
}

/// Which servers a comparison runs: peers, and linerate's variants and builds. Shared
/// by `bench compare` and `bench idle`.
#[derive(Args, Debug, Clone)]
pub struct ServerSetArgs {
    /// Servers to compare, comma-separated (linerate, nginx, lighttpd, h2o, caddy), the first
    /// being the baseline every other is judged against; peers not installed are
    /// skipped [bench compare's default: linerate,nginx,lighttpd,h2o,caddy].
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_peer)]
    pub servers: Option<Vec<Peer>>,
    /// A linerate option set to compare, as NAME=FLAGS ("nolowat=--lowat 0"); repeat
    /// for several. The variants take linerate's place in --servers (the end if it is
    /// not listed), each a server of its own.
    #[arg(long = "variant", value_name = "NAME=FLAGS", allow_hyphen_values = true, value_parser = parse_variant)]
    pub variants: Vec<(String, String)>,
    /// Run variant NAME with another linerate binary (an earlier commit's build, say)
    /// as NAME=PATH; a NAME not given by --variant is a variant with no extra flags.
    #[arg(long = "bin", value_name = "NAME=PATH", value_parser = parse_bin)]
    pub bins: Vec<(String, PathBuf)>,
    /// Another build of a peer as a server of its own, NAME=PEER:PATH
    /// ("caddy2.11=caddy:/root/go/bin/caddy"), after those of --servers; repeat for
    /// several.
    #[arg(long = "peer-bin", value_name = "NAME=PEER:PATH", value_parser = parse_peer_bin)]
    pub peer_bins: Vec<(String, Peer, PathBuf)>,
    /// Extra arguments for every linerate `serve`, one string ("--transmit splice").
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub linerate_args: Option<String>,
}

impl ServerSetArgs {
    /// True when any option of the set was given.
    pub fn given(&self) -> bool {
        self.servers.is_some()
            || !self.variants.is_empty()
            || !self.bins.is_empty()
            || self.linerate_args.is_some()
    }

    /// The servers in order (`default` when --servers is not given), linerate
    /// replaced by its variants; `exe` is this linerate. A usage mistake in words.
    pub fn specs(
        &self,
        exe: &std::path::Path,
        default: &[Peer],
    ) -> Result<Vec<ServerSpec>, String> {
        let common = super::words(self.linerate_args.as_deref());
        compare::server_specs(&compare::Lineup {
            peers: self.servers.as_deref().unwrap_or(default),
            variants: &self.variants,
            bins: &self.bins,
            peer_bins: &self.peer_bins,
            common: &common,
            exe,
        })
    }
}

fn parse_peer(s: &str) -> Result<Peer, String> {
    s.parse()
}

fn parse_protocol(s: &str) -> Result<crate::compare::Protocol, String> {
    s.parse()
}

fn parse_client(s: &str) -> Result<Client, String> {
    s.parse()
}

/// A variant's name: it names sample files, so letters, digits, `.`, `_` and `-`.
fn variant_name(name: &str) -> Result<String, String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(format!(
            "'{name}': a name is letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(name.to_string())
}

fn parse_variant(s: &str) -> Result<(String, String), String> {
    let (name, flags) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': give NAME=FLAGS (NAME= for linerate's defaults)"))?;
    Ok((variant_name(name)?, flags.to_string()))
}

fn parse_bin(s: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': give NAME=PATH"))?;
    if path.is_empty() {
        return Err(format!("'{s}': give NAME=PATH"));
    }
    Ok((variant_name(name)?, PathBuf::from(path)))
}

fn parse_peer_bin(s: &str) -> Result<(String, Peer, PathBuf), String> {
    let (name, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': give NAME=PEER:PATH"))?;
    let (peer, path) = rest
        .split_once(':')
        .filter(|(_, p)| !p.is_empty())
        .ok_or_else(|| format!("'{s}': give NAME=PEER:PATH"))?;
    Ok((variant_name(name)?, peer.parse()?, PathBuf::from(path)))
}

pub fn run_compare(a: CompareArgs, build: crate::machine::Build) -> anyhow::Result<ExitCode> {
    if let Err(e) = a.load.check() {
        return Ok(usage_error(&e));
    }
    if let Some(Err(e)) = a
        .server_cpu
        .map(|c| crate::cpu::check_cpu("--server-cpu", c))
    {
        return Ok(usage_error(&e));
    }
    let cpus = crate::cpu::online_cpus();
    let (sizes, mix) = if a.set.sizes.is_empty() && a.set.mix.is_none() {
        // wrk asks for one URL per run: by default it runs the sizes only.
        (
            vec![1 << 10, 100 << 10, 10 << 20],
            !a.clients.contains(&Client::Wrk),
        )
    } else {
        (a.set.sizes.clone(), a.set.mix.is_some())
    };
    let mut load = a.load.clone();
    let server_cpu = a.server_cpu.or((cpus >= 2).then_some(1));
    if load.cpu.is_empty() && cpus >= 2 {
        load.cpu = vec![0];
    }
    let mut template = load.config(
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        String::new(),
        Arc::new(Workload::List(Vec::new())),
        None,
        1,
    );
    if a.streams.is_some() && !a.h2 && !a.h3 && a.protocols.is_empty() {
        return Ok(usage_error(
            "-m/--streams goes with --h2, --h3 or --protocols",
        ));
    }
    if a.h2 {
        template.h2 = Some(16_384);
    }
    template.h3 = a.h3;
    if a.h2 || a.h3 || !a.protocols.is_empty() {
        template.pipeline = a.streams.unwrap_or(1) as usize;
    }
    let exe = std::env::current_exe().context("finding the linerate binary")?;
    let cfg = CompareConfig {
        servers: match a.set_of.specs(&exe, &Peer::ALL) {
            Ok(s) => s,
            Err(e) => return Ok(usage_error(&e)),
        },
        clients: a.clients.clone(),
        protocols: a.protocols.clone(),
        root: a.root.clone(),
        sizes,
        mix_dirs: mix.then_some(a.set.dirs as usize),
        load: template,
        server_cpu,
        netns: a
            .netns
            .then_some(crate::netns::NetnsSettings { tso: a.tso }),
        connections: a.load.connections.iter().map(|&c| c as usize).collect(),
        iterations: a.iterations as usize,
        warmup: a.warmup as usize,
        confidence: a.confidence,
        out: Some(a.out.join("samples")),
        gzip: a.gzip,
        tls: a.tls,
        build,
    };
    if let Err(e) = compare::check(&cfg) {
        return Ok(usage_error(&e));
    }
    let stop = stop_flag()?;
    let quiet = a.json;
    let mut on = |e: Event<'_>| {
        if quiet {
            return;
        }
        match e {
            Event::Started(s) => eprintln!("started {} ({})", s.name, s.version),
            Event::Skipped(name, why) => eprintln!("skipping {name}: {why}"),
            Event::Run(i, n, server, r) => {
                eprintln!("[{i}/{n}] {} {server}: {}", r.workload, run_line(r))
            }
            Event::WarmUp(server, r) => {
                eprintln!(
                    "[warm-up] {} {server}: {} (discarded)",
                    r.workload,
                    run_line(r)
                )
            }
        }
    };
    let result = compare::run(&cfg, &stop, &mut on)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("--out {}", a.out.display()))?;
    let json = serde_json::to_string_pretty(&result)?;
    let json_path = a.out.join("compare.json");
    std::fs::write(&json_path, &json)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let page =
        report::html(&result, &command).map_err(|e| anyhow::anyhow!("drawing the report: {e}"))?;
    let html_path = a.out.join("report.html");
    std::fs::write(&html_path, page).with_context(|| format!("writing {}", html_path.display()))?;
    if a.json {
        println!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    let base = result.servers.first().map_or("", |s| s.name.as_str());
    let width = result
        .servers
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0)
        .max(10);
    let times = format!("x {base}");
    for w in &result.workloads {
        println!("== {}", w.workload);
        println!(
            "{:<width$} {:>14} {:>10} {:>12} {:>16} {:>10} {:>8}",
            "server", "requests/s", times, "p99", "server us/req", times, "errors"
        );
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let rps = |s: usize| mean(w.runs[s].iter().map(|r| r.requests_per_second).collect());
        let cpu = |s: usize| {
            mean(
                w.runs[s]
                    .iter()
                    .filter_map(|r| r.server.as_ref().map(|c| c.us_per_request))
                    .collect(),
            )
        };
        for (s, info) in result.servers.iter().enumerate() {
            let p99 = mean(w.runs[s].iter().map(|r| r.latency_us.p99 as f64).collect());
            let errors: u64 = w.runs[s]
                .iter()
                .map(|r| r.errors.total() + r.non_2xx())
                .sum();
            println!(
                "{:<width$} {:>14.1} {:>10.2} {:>12} {:>16.3} {:>10.2} {:>8}",
                info.name,
                rps(s),
                rps(s) / rps(0).max(1e-9),
                format_us(p99.round() as u64),
                cpu(s),
                cpu(s) / cpu(0).max(1e-9),
                errors
            );
        }
        for (metric, unit, text) in &w.judged.reports {
            println!("{metric} ({unit}):\n{text}");
        }
        super::print_verdicts(&w.judged.verdicts);
        println!();
    }
    println!(
        "wrote {}, {} and the samples under {}",
        json_path.display(),
        html_path.display(),
        a.out.join("samples").display()
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ColdArgs {
    /// linerate variants to compare (--servers may only name linerate here) [default:
    /// helpers= and inline=--disk-helpers 0].
    #[command(flatten)]
    set_of: ServerSetArgs,
    /// Directory of the cold files, on a disk file system (tmpfs pages cannot be
    /// dropped); written once and kept.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp/linerate-cold")]
    dir: PathBuf,
    /// Cold files.
    #[arg(long, value_name = "N", default_value = "24", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    files: u32,
    /// Bytes of each cold file.
    #[arg(long, value_name = "BYTES", default_value = "16M", value_parser = super::parse_positive_size)]
    size: usize,
    /// Seconds of the hot load per run.
    #[arg(short = 'd', long = "duration", value_name = "SECONDS", default_value = "3", value_parser = super::parse_seconds)]
    duration: std::time::Duration,
    /// Keep-alive connections of the hot load.
    #[arg(short = 'c', long = "connections", value_name = "N", default_value = "8", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    connections: u32,
    /// CPUs of the two clients (default: 0 when there are two CPUs or more).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    cpu: Vec<usize>,
    /// CPU of the servers (default: 1 when there are two CPUs or more).
    #[arg(long, value_name = "N")]
    server_cpu: Option<usize>,
    /// Rounds, the variants interleaved in each (at least 3).
    #[arg(short = 'i', long = "iterations", value_name = "N", default_value = "5", value_parser = clap::value_parser!(u32).range(3..=1000))]
    iterations: u32,
    /// Confidence of the comparisons: 80, 90, 95, 98, 99 or 99.5.
    #[arg(long, value_name = "PERCENT", default_value = "95", value_parser = parse_confidence)]
    confidence: linerate_stat::Confidence,
    /// Directory for the ministat sample files.
    #[arg(long, value_name = "DIR", default_value = "bench-out/cold")]
    out: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `linerate bench cold`.
pub fn run_cold(a: ColdArgs) -> anyhow::Result<ExitCode> {
    for &c in a.cpu.iter().chain(a.server_cpu.iter()) {
        if let Err(e) = crate::cpu::check_cpu("--cpu/--server-cpu", c) {
            return Ok(usage_error(&e));
        }
    }
    let cpus = crate::cpu::online_cpus();
    if let Some(p) = a
        .set_of
        .servers
        .iter()
        .flatten()
        .find(|p| **p != Peer::Linerate)
    {
        return Ok(usage_error(&format!(
            "--servers {}: bench cold compares linerate variants only",
            p.name()
        )));
    }
    let exe = std::env::current_exe().context("finding the linerate binary")?;
    let mut set_of = a.set_of.clone();
    if set_of.variants.is_empty() && set_of.bins.is_empty() {
        set_of.variants = vec![
            ("helpers".into(), String::new()),
            ("inline".into(), "--disk-helpers 0".into()),
        ];
    }
    let servers = match set_of.specs(&exe, &[Peer::Linerate]) {
        Ok(s) => s,
        Err(e) => return Ok(usage_error(&e)),
    };
    let client_cpus = if a.cpu.is_empty() && cpus >= 2 {
        vec![0]
    } else {
        a.cpu.clone()
    };
    let hot = crate::http::HttpConfig {
        target: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        host: String::new(),
        workload: Arc::new(crate::http::Workload::List(Vec::new())),
        connections: a.connections as usize,
        threads: 1,
        pipeline: 1,
        close: false,
        rate: None,
        limit: crate::http::Limit::Time(a.duration),
        checksum: false,
        timeout: std::time::Duration::from_secs(10),
        headers: Vec::new(),
        cpus: client_cpus,
        server_pid: None,
        server_core: None,
        seed: 1,
        h2: None,
        h3: false,
        tls: None,
    };
    let cfg = crate::cold::ColdConfig {
        servers,
        dir: a.dir.clone(),
        files: a.files as usize,
        size: a.size as u64,
        hot,
        server_cpu: a.server_cpu.or((cpus >= 2).then_some(1)),
        rounds: a.iterations as usize,
        confidence: a.confidence,
        out: Some(a.out.clone()),
    };
    let stop = stop_flag()?;
    let quiet = a.json;
    let r = crate::cold::run(&cfg, &stop, &mut |round, name, r| {
        if !quiet {
            eprintln!(
                "round {round} {name}: hot p99 {}, p99.9 {}, max {}, {:.0} req/s; cold {:.0} MB/s",
                format_us(r.hot.latency_us.p99),
                format_us(r.hot.latency_us.p999),
                format_us(r.hot.latency_us.max),
                r.hot.requests_per_second,
                r.cold.megabytes_per_second
            );
        }
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    for (metric, unit, text) in &r.judged.reports {
        println!("{metric} ({unit}):\n{text}");
    }
    super::print_verdicts(&r.judged.verdicts);
    println!("samples under {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}
