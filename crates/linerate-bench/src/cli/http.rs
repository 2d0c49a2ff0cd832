//! `linerate bench http` and `linerate bench files`: the command lines over
//! `crate::http`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::compare;
use crate::http::{self, workload, HttpConfig, HttpResult, Limit, Workload};
use crate::series;
use anyhow::Context;
use clap::{Args, Parser};

use super::{parse_confidence, parse_seconds, parse_size_u64, stop_flag, usage_error};

#[derive(Args, Debug, Clone)]
pub struct HttpArgs {
    /// URLs to request, round-robin (http://HOST[:PORT]/PATH or https://..., all on
    /// one server); with --sizes or --mix, the base URL of the file set (default
    /// http://127.0.0.1:8080/).
    #[arg(value_name = "URL")]
    urls: Vec<String>,
    /// With https:// URLs: check the server's certificate against the CAs in FILE (PEM)
    /// instead of the system's bundle.
    #[arg(long, value_name = "FILE")]
    cacert: Option<PathBuf>,
    /// With https:// URLs: accept any certificate (a self-signed test server); the
    /// handshake's signature is still checked.
    #[arg(long, conflicts_with = "cacert")]
    insecure: bool,
    /// Also request the paths listed in FILE, one per line.
    #[arg(long, value_name = "FILE")]
    urls_file: Option<PathBuf>,
    #[command(flatten)]
    set: FileSetArgs,
    #[command(flatten)]
    load: LoadArgs,
    /// Measure this server process's CPU (with its child processes) per request and KB.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// Seed of the SpecWeb99 draw.
    #[arg(long, value_name = "N", default_value = "1")]
    seed: u64,
    /// Runs per variant (at least 3 for statistics); variants are interleaved.
    #[arg(short = 'i', long = "iterations", value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(1..=1000))]
    iterations: u32,
    /// Variants to compare, comma-separated; each is options (and optionally URLs
    /// first) that override the others: "--pipeline 1,--pipeline 8" or
    /// "http://127.0.0.1:8080/ --server-pid 10,http://127.0.0.1:8081/ --server-pid 20".
    #[arg(long, value_name = "A,B[,...]", allow_hyphen_values = true)]
    compare: Option<String>,
    /// Write each metric's samples here, one ministat file per variant and metric.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Confidence of the comparisons: 80, 90, 95, 98, 99 or 99.5.
    #[arg(long, value_name = "PERCENT", default_value = "95", value_parser = parse_confidence)]
    confidence: linerate_stat::Confidence,
    /// Any answer with another status is an error: the command then says how many and
    /// exits 1 (without it, non-2xx answers are reported, as wrk does, and exit 0).
    #[arg(long, value_name = "STATUS", value_parser = clap::value_parser!(u16).range(100..=599))]
    expect_status: Option<u16>,
    /// Print results as JSON.
    #[arg(long)]
    json: bool,
    /// Speak HTTP/2: prior knowledge on http:// (h2c), ALPN h2 on https:// (a server
    /// that does not pick h2 fails the connection). DATA frames are counted and thrown
    /// away as HTTP/1.1 bodies are.
    #[arg(long, conflicts_with_all = ["close", "checksum"])]
    h2: bool,
    /// Speak HTTP/3: QUIC to the URL's port over UDP (https:// only; ALPN h3), each
    /// connection on a UDP socket of its own. DATA is counted (and hashed with
    /// --checksum) as it comes. With --netns (and --tls) the server started speaks
    /// HTTP/3 too, and its UDP counters (datagrams per send, bytes per receive,
    /// datagrams handed between workers) are read from its status page around the run
    /// and reported (`server_udp` in --json).
    #[arg(long, conflicts_with = "h2")]
    h3: bool,
    /// With --h2 or --h3: streams in flight per connection (h2load's -m) [default: 1].
    #[arg(short = 'm', long = "streams", value_name = "N", conflicts_with = "pipeline", value_parser = clap::value_parser!(u32).range(1..=1024))]
    streams: Option<u32>,
    /// With --h2: the largest DATA frame the client takes (its SETTINGS_MAX_FRAME_SIZE;
    /// 16384 is what browsers and h2load take) [default: 16384].
    #[arg(long, value_name = "BYTES", requires = "h2", value_parser = clap::value_parser!(u32).range(16_384..=16_777_215))]
    h2_frame_size: Option<u32>,
    /// Start `linerate serve` on the file set (--sizes, --mix) in a network namespace
    /// made for the run, pinned to --server-cpu, and load it from another namespace
    /// over a veth pair (MTU 1500, the server on 198.18.0.1), each side's received
    /// packets steered to its CPU, as `bench compare --netns` does. Needs root;
    /// everything is removed afterwards.
    #[arg(long, conflicts_with_all = ["urls", "urls_file", "server_pid", "compare"])]
    netns: bool,
    /// With --netns: TSO and GSO on the veth pair.
    #[arg(long, default_value = "on", value_parser = super::parse_on_off, action = clap::ArgAction::Set, requires = "netns")]
    tso: bool,
    /// With --netns: the server listens for HTTPS with a self-signed ECDSA P-256
    /// certificate made for the run, which the load trusts (as its --cacert).
    #[arg(long, requires = "netns")]
    tls: bool,
    /// With --netns: the server's CPU (default: 1 when there are two CPUs or more; the
    /// load then defaults to CPU 0).
    #[arg(long, value_name = "N", requires = "netns", conflicts_with = "queues")]
    server_cpu: Option<usize>,
    /// With --netns: a veth pair with N queues over the first N CPUs, each end's
    /// packets spread over them by flow hash (as a NIC's RSS), and the server with a
    /// worker per CPU, each pinned by the server; the server's status page (given
    /// --status-path in --linerate-args) is read at the end for how many connections
    /// its workers took on their receive CPU.
    #[arg(long, value_name = "N", requires = "netns", value_parser = clap::value_parser!(u64).range(1..=1024))]
    queues: Option<u64>,
    /// With --netns: extra arguments for `linerate serve`, one string ("--lowat 0").
    #[arg(
        long,
        value_name = "ARGS",
        allow_hyphen_values = true,
        requires = "netns"
    )]
    linerate_args: Option<String>,
    /// With --netns: write the file set here (kept afterwards) instead of a temporary
    /// directory.
    #[arg(long, value_name = "DIR", requires = "netns")]
    root: Option<PathBuf>,
}

/// With `--expect-status`, the answers of `results` that had another status: a line
/// on standard error and exit 1; else exit 0.
fn expected_exit<'a>(
    expect: Option<u16>,
    results: impl IntoIterator<Item = &'a HttpResult>,
) -> ExitCode {
    let Some(want) = expect else {
        return ExitCode::SUCCESS;
    };
    let mut other = std::collections::BTreeMap::new();
    for r in results {
        for (&s, &n) in r.statuses.iter().filter(|(&s, _)| s != want) {
            *other.entry(s).or_insert(0u64) += n;
        }
    }
    if other.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "linerate: --expect-status {want}: {} other answers ({})",
        other.values().sum::<u64>(),
        by_status(&other).join(", ")
    );
    ExitCode::from(1)
}

/// The load of one `bench http` run, shared with `bench compare`.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Connections, over all threads (bench compare: a list sweeps them, 1,8,32,128,
    /// each size and count a workload of its own).
    #[arg(short = 'c', long = "connections", value_name = "N", default_value = "32", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub connections: Vec<u32>,
    /// Load threads (each an event loop over its share of the connections).
    #[arg(short = 't', long = "threads", value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Seconds to run.
    #[arg(short = 'd', long = "duration", value_name = "SECONDS", default_value = "10", value_parser = parse_seconds, conflicts_with = "requests")]
    pub duration: Duration,
    /// Stop after this many responses instead.
    #[arg(short = 'n', long = "requests", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// One request per connection (Connection: close); latency includes the connect.
    #[arg(long)]
    pub close: bool,
    /// Requests in flight per connection.
    #[arg(long, value_name = "DEPTH", default_value = "1", value_parser = clap::value_parser!(u32).range(1..=1024), conflicts_with = "close")]
    pub pipeline: u32,
    /// Target rate, requests per second over all connections; latency is measured from
    /// each request's scheduled time (no coordinated omission).
    #[arg(short = 'R', long = "rate", value_name = "N", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Read every body and compare its CRC-32 with the file set's (or with the first
    /// response for the same URL); without it bodies are discarded uncopied and only
    /// their lengths are checked.
    #[arg(long)]
    pub checksum: bool,
    /// A request with no progress this long counts as an error.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub timeout: Duration,
    /// Extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub headers: Vec<String>,
    /// Pin the load threads to these CPUs, round-robin (for example 0 or 0,1).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cpu: Vec<usize>,
}

impl LoadArgs {
    /// Checks what clap cannot.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = self.connections.clone();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err("--connections: a count is named twice".into());
        }
        for &c in &self.cpu {
            crate::cpu::check_cpu("--cpu", c)?;
        }
        Ok(())
    }

    /// The run these flags ask for, against `target` (Host field `host`).
    pub fn config(
        &self,
        target: SocketAddr,
        host: String,
        workload: Arc<Workload>,
        server_pid: Option<u32>,
        seed: u64,
    ) -> HttpConfig {
        HttpConfig {
            target,
            host,
            workload,
            connections: self.connections.first().copied().unwrap_or(32) as usize,
            threads: self.threads as usize,
            pipeline: self.pipeline as usize,
            close: self.close,
            rate: self.rate,
            limit: match self.requests {
                Some(n) => Limit::Requests(n),
                None => Limit::Time(self.duration),
            },
            checksum: self.checksum,
            timeout: self.timeout,
            headers: self.headers.clone(),
            cpus: self.cpu.clone(),
            server_pid,
            server_core: None,
            seed,
            tls: None,
            h2: None,
            h3: false,
        }
    }
}

/// The file sets: `bench files` writes them, `bench http` and `bench compare` ask for them.
#[derive(Args, Debug, Clone)]
pub struct FileSetArgs {
    /// One file per size, SIZE.bin under the root (for example 1K,100K,10M); `bench
    /// http` runs one workload per size.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_size_u64)]
    pub sizes: Vec<u64>,
    /// The SpecWeb99-style static mix, under specweb99/ (36 files, about 5 MB, per
    /// directory).
    #[arg(long, value_name = "specweb99", value_parser = ["specweb99"])]
    pub mix: Option<String>,
    /// Directories of the SpecWeb99 file set.
    #[arg(long, value_name = "N", default_value = "10", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub dirs: u32,
}

#[derive(Parser, Debug)]
#[command(name = "linerate bench http", args_override_self = true)]
struct HttpOnly {
    #[command(flatten)]
    args: HttpArgs,
}

#[derive(Args, Debug)]
pub struct FilesArgs {
    /// Directory to write into (created if missing).
    dir: PathBuf,
    #[command(flatten)]
    set: FileSetArgs,
    /// Print what was written as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!(
            "'{s}' is not a positive number of requests per second"
        )),
    }
}

fn parse_header(s: &str) -> Result<String, String> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}': expected \"Name: value\""))?;
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!("'{name}' is not a header name"));
    }
    if value.chars().any(|c| c == '\r' || c == '\n') {
        return Err("a header value cannot hold a line break".into());
    }
    Ok(format!("{name}: {}", value.trim()))
}

/// `http://HOST[:PORT]/PATH` → the address, the Host field and the path.
pub(crate) fn parse_url(url: &str) -> Result<(SocketAddr, String, String), String> {
    if url.starts_with("https://") {
        return Err(format!("'{url}': only http:// URLs are supported here"));
    }
    parse_any_url(url).map(|(a, h, p, _)| (a, h, p))
}

/// `http://` or `https://HOST[:PORT]/PATH` → the address, the Host field, the path and
/// whether it is HTTPS.
pub(crate) fn parse_any_url(url: &str) -> Result<(SocketAddr, String, String, bool), String> {
    let (rest, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(r), _) => (r, false),
        (_, Some(r)) => (r, true),
        _ => {
            return Err(format!(
                "'{url}': only http:// and https:// URLs are supported"
            ))
        }
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("'{url}': no host"));
    }
    let with_port = if authority.ends_with(']') || !authority.contains(':') {
        format!("{authority}:{}", if https { 443 } else { 80 })
    } else {
        authority.to_string()
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("'{url}': {e}"))?
        .next()
        .ok_or_else(|| format!("'{url}': the host has no address"))?;
    Ok((addr, authority.to_string(), path.to_string(), https))
}

/// The runs one command line asks for: one configuration per workload.
fn configs(a: &HttpArgs) -> Result<Vec<HttpConfig>, String> {
    let mut urls = a.urls.clone();
    if let Some(f) = &a.urls_file {
        let text =
            std::fs::read_to_string(f).map_err(|e| format!("--urls-file {}: {e}", f.display()))?;
        let base = urls.first().cloned();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if line.starts_with("http://") || line.starts_with("https://") {
                urls.push(line.to_string());
            } else if let Some(b) = &base {
                let (_, host, _, https) = parse_any_url(b)?;
                let scheme = if https { "https" } else { "http" };
                urls.push(format!(
                    "{scheme}://{host}/{}",
                    line.trim_start_matches('/')
                ));
            } else {
                return Err(format!(
                    "--urls-file: '{line}' is a path; give a URL on the command line for its server"
                ));
            }
        }
    }
    let generated = !a.set.sizes.is_empty() || a.set.mix.is_some();
    if urls.is_empty() {
        urls.push("http://127.0.0.1:8080/".into());
    }
    if generated && urls.len() > 1 {
        return Err("--sizes and --mix take one base URL".into());
    }
    let parsed: Vec<_> = urls
        .iter()
        .map(|u| parse_any_url(u))
        .collect::<Result<_, _>>()?;
    let (target, host, _, https) = parsed[0].clone();
    if parsed
        .iter()
        .any(|(t, _, _, s)| *t != target || *s != https)
    {
        return Err("all URLs must be on one server, by one scheme".into());
    }
    let tls = if https {
        let name = match host.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host.as_str(),
        };
        Some(http::tls::ClientTls::new(
            name,
            a.cacert.as_deref(),
            a.insecure,
            a.load.close,
        )?)
    } else {
        if a.cacert.is_some() || a.insecure {
            return Err("--cacert and --insecure go with https:// URLs".into());
        }
        None
    };
    if a.h3 && !https {
        return Err("--h3: QUIC needs an https:// URL".into());
    }
    if a.streams.is_some() && !a.h2 && !a.h3 {
        return Err("-m/--streams goes with --h2 or --h3".into());
    }
    let parsed: Vec<(SocketAddr, String, String)> =
        parsed.into_iter().map(|(a, h, p, _)| (a, h, p)).collect();
    a.load.check()?;
    if a.load.connections.len() > 1 {
        return Err(
            "--connections: bench http takes one count (bench compare sweeps a list)".into(),
        );
    }
    let mut workloads = Vec::new();
    if generated {
        let mut prefix = parsed[0].2.clone();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        for &s in &a.set.sizes {
            workloads.push(Workload::List(vec![workload::size_item(&prefix, s)]));
        }
        if a.set.mix.is_some() {
            workloads.push(Workload::specweb99(&prefix, a.set.dirs as usize));
        }
    } else {
        workloads.push(Workload::List(
            parsed
                .iter()
                .map(|(_, _, p)| http::Item {
                    path: p.clone(),
                    expect: None,
                })
                .collect(),
        ));
    }
    Ok(workloads
        .into_iter()
        .map(|w| {
            let c = a
                .load
                .config(target, host.clone(), Arc::new(w), a.server_pid, a.seed);
            HttpConfig {
                tls: tls.clone(),
                h2: a.h2.then(|| a.h2_frame_size.unwrap_or(16_384)),
                h3: a.h3,
                pipeline: match a.streams {
                    Some(m) => m as usize,
                    None => c.pipeline,
                },
                ..c
            }
        })
        .collect())
}

/// A progress bar on a terminal (stderr), nothing otherwise.
pub fn progress_bar(limit: Limit, quiet: bool) -> Box<dyn FnMut(u64, Duration)> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return Box::new(|_, _| {});
    }
    let (len, template) = match limit {
        Limit::Time(d) => (
            d.as_millis() as u64,
            "{spinner} [{bar:40}] {elapsed}/{duration} {msg}",
        ),
        Limit::Requests(n) => (n, "{spinner} [{bar:40}] {pos}/{len} responses {msg}"),
    };
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    Box::new(move |done, elapsed| {
        match limit {
            Limit::Time(_) => bar.set_position(elapsed.as_millis() as u64),
            Limit::Requests(_) => bar.set_position(done),
        }
        bar.set_message(format!(
            "{:.0} requests/s",
            done as f64 / elapsed.as_secs_f64().max(1e-9)
        ));
        if bar.position() >= len {
            bar.finish_and_clear();
        }
    })
}

pub fn run_files(a: FilesArgs) -> anyhow::Result<ExitCode> {
    if a.set.sizes.is_empty() && a.set.mix.is_none() {
        return Ok(usage_error(
            "bench files: give --sizes LIST and/or --mix specweb99",
        ));
    }
    let mut total = workload::FileSet::default();
    if !a.set.sizes.is_empty() {
        let s = workload::write_sizes(&a.dir, &a.set.sizes)
            .with_context(|| format!("writing into {}", a.dir.display()))?;
        total.files += s.files;
        total.bytes += s.bytes;
    }
    if a.set.mix.is_some() {
        let s = workload::write_specweb99(&a.dir, a.set.dirs as usize)
            .with_context(|| format!("writing into {}", a.dir.display()))?;
        total.files += s.files;
        total.bytes += s.bytes;
    }
    if a.json {
        println!("{}", serde_json::to_string(&total)?);
    } else {
        println!(
            "{}: {} files, {} bytes",
            a.dir.display(),
            total.files,
            total.bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_http(a: HttpArgs) -> anyhow::Result<ExitCode> {
    if a.netns {
        return run_http_netns(a);
    }
    run_http_on(a, None, None)
}

/// `bench http --netns`: the server started here, in its namespace; the load from the
/// other.
fn run_http_netns(mut a: HttpArgs) -> anyhow::Result<ExitCode> {
    if a.set.sizes.is_empty() && a.set.mix.is_none() {
        return Ok(usage_error(
            "--netns: give --sizes and/or --mix: the server it starts serves that file set",
        ));
    }
    if a.h3 && !a.tls {
        return Ok(usage_error(
            "--h3 with --netns needs --tls: QUIC runs on the server's HTTPS port",
        ));
    }
    if let Err(e) = a.load.check() {
        return Ok(usage_error(&e));
    }
    // --cpu was checked with the other load flags above.
    if let Some(Err(e)) = a
        .server_cpu
        .map(|c| crate::cpu::check_cpu("--server-cpu", c))
    {
        return Ok(usage_error(&e));
    }
    let cpus = crate::cpu::online_cpus();
    let queues = match a.queues {
        None => Vec::new(),
        Some(n) => {
            let allowed = linerate_sys::cpu::allowed_cpus().context("--queues")?;
            if n as usize > allowed.len() {
                return Ok(usage_error(&format!(
                    "--queues {n}: this process may use {} CPUs",
                    allowed.len()
                )));
            }
            allowed[..n as usize].to_vec()
        }
    };
    let server_cpu = if queues.is_empty() {
        a.server_cpu.or((cpus >= 2).then_some(1))
    } else {
        None
    };
    if a.load.cpu.is_empty() && cpus >= 2 {
        a.load.cpu = if queues.is_empty() {
            vec![0]
        } else {
            queues.clone()
        };
    }
    let mut args = super::words(a.linerate_args.as_deref());
    let mut status_path = args
        .windows(2)
        .find(|w| w[0] == "--status-path")
        .map(|w| w[1].clone());
    if a.h3 && status_path.is_none() {
        // Where the UDP counters are read from.
        let path = "/.bench-status".to_string();
        args.extend(["--status-path".to_string(), path.clone()]);
        status_path = Some(path);
    }
    let hosted = compare::Hosted::start(&compare::HostedConfig {
        exe: std::env::current_exe().context("finding the linerate binary")?,
        args,
        root: a.root.clone(),
        sizes: a.set.sizes.clone(),
        mix_dirs: a.set.mix.is_some().then_some(a.set.dirs as usize),
        netns: crate::netns::NetnsSettings { tso: a.tso },
        client_cpu: a.load.cpu.first().copied(),
        server_cpu,
        queues: queues.clone(),
        tls: a.tls,
        h3: a.h3,
    })?;
    if !a.json {
        eprintln!(
            "started {} in its namespace; the load comes from {}",
            hosted.config(),
            hosted.client_ns()
        );
    }
    let scheme = if a.tls { "https" } else { "http" };
    a.urls = vec![format!("{scheme}://{}/", hosted.addr())];
    a.cacert = hosted.cacert().map(Path::to_path_buf);
    a.server_pid = Some(hosted.pid());
    let ns = hosted.client_ns().to_string();
    let addr = hosted.addr();
    let udp = match (a.h3, &status_path, a.cacert.as_deref()) {
        (true, Some(path), Some(ca)) => Some(StatusPage {
            addr,
            path: path.clone(),
            tls: http::tls::ClientTls::new(&addr.ip().to_string(), Some(ca), false, false)
                .map_err(anyhow::Error::msg)?,
        }),
        _ => None,
    };
    let code = crate::netns::within(Some(&ns), move || run_http_on(a, server_cpu, udp.as_ref()))??;
    if let (false, Some(path)) = (queues.is_empty(), status_path) {
        let got = crate::netns::within(Some(&ns), move || status_of(addr, &path))?;
        match got {
            Ok(v) => eprintln!(
                "server: {} connections taken on their receive CPU, {} elsewhere (steer: {})",
                v["connections_on_receive_cpu"],
                v["connections_off_receive_cpu"],
                v["steer"].as_str().unwrap_or("?")
            ),
            Err(e) => eprintln!("server: its status page ({e})"),
        }
    }
    drop(hosted);
    Ok(code)
}

/// The server's status page at `addr` and `path`, as JSON.
fn status_of(addr: std::net::SocketAddr, path: &str) -> std::io::Result<serde_json::Value> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )?;
    let mut got = Vec::new();
    c.read_to_end(&mut got)?;
    json_body(&got)
}

/// A server's status page over HTTPS, for its HTTP/3 UDP counters.
struct StatusPage {
    addr: std::net::SocketAddr,
    path: String,
    tls: http::tls::ClientTls,
}

/// A server's HTTP/3 UDP counters (its status page's `http3` object), or what they
/// moved by over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
struct Udp {
    udp_sends: u64,
    datagrams_sent: u64,
    udp_receives: u64,
    datagrams_received: u64,
    bytes_received: u64,
    misrouted_datagrams: u64,
}

impl StatusPage {
    /// The counters now.
    fn udp(&self) -> std::io::Result<Udp> {
        use std::io::{Read, Write};
        let tcp = std::net::TcpStream::connect(self.addr)?;
        tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        let mut c = self.tls.stream(tcp)?;
        write!(
            c,
            "GET {} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n",
            self.path
        )?;
        let mut got = Vec::new();
        match c.read_to_end(&mut got) {
            Ok(_) => {}
            // A server that closes without close_notify has still said it all.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !got.is_empty() => {}
            Err(e) => return Err(e),
        }
        let v = json_body(&got)?;
        let n = |k: &str| v["http3"][k].as_u64().unwrap_or(0);
        Ok(Udp {
            udp_sends: n("udp_sends"),
            datagrams_sent: n("datagrams_sent"),
            udp_receives: n("udp_receives"),
            datagrams_received: n("datagrams_received"),
            bytes_received: n("bytes_received"),
            misrouted_datagrams: n("misrouted_datagrams"),
        })
    }
}

impl Udp {
    fn since(&self, before: &Udp) -> Udp {
        Udp {
            udp_sends: self.udp_sends.saturating_sub(before.udp_sends),
            datagrams_sent: self.datagrams_sent.saturating_sub(before.datagrams_sent),
            udp_receives: self.udp_receives.saturating_sub(before.udp_receives),
            datagrams_received: self
                .datagrams_received
                .saturating_sub(before.datagrams_received),
            bytes_received: self.bytes_received.saturating_sub(before.bytes_received),
            misrouted_datagrams: self
                .misrouted_datagrams
                .saturating_sub(before.misrouted_datagrams),
        }
    }

    fn datagrams_per_send(&self) -> f64 {
        self.datagrams_sent as f64 / self.udp_sends.max(1) as f64
    }

    fn bytes_per_receive(&self) -> f64 {
        self.bytes_received as f64 / self.udp_receives.max(1) as f64
    }

    fn json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        v["datagrams_per_send"] = self.datagrams_per_send().into();
        v["bytes_per_receive"] = self.bytes_per_receive().into();
        v
    }
}

/// The JSON body of an HTTP/1.1 answer.
fn json_body(got: &[u8]) -> std::io::Result<serde_json::Value> {
    let body = got
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| &got[i + 4..])
        .ok_or_else(|| std::io::Error::other("no response head"))?;
    serde_json::from_slice(body).map_err(std::io::Error::other)
}

/// The runs of `a`; `server_core`: the CPU the server is pinned to, whose whole busy
/// time is reported too; `udp`: the server's status page, read around each run for its
/// HTTP/3 UDP counters.
fn run_http_on(
    a: HttpArgs,
    server_core: Option<usize>,
    udp: Option<&StatusPage>,
) -> anyhow::Result<ExitCode> {
    let mut base = match configs(&a) {
        Ok(c) => c,
        Err(e) => return Ok(usage_error(&e)),
    };
    for c in &mut base {
        c.server_core = server_core;
    }
    let stop = stop_flag()?;
    if a.compare.is_none() && a.iterations == 1 {
        let mut results = Vec::new();
        let mut sent = Vec::new();
        for cfg in &base {
            let mut progress = progress_bar(cfg.limit, a.json);
            let before = udp.map(StatusPage::udp).transpose()?;
            let r = http::run(cfg, &stop, &mut *progress)?;
            let moved = match (udp, before) {
                (Some(page), Some(before)) => Some(page.udp()?.since(&before)),
                _ => None,
            };
            if !a.json {
                print_http(&r);
                if let Some(m) = moved {
                    println!(
                        "server UDP: {} datagrams in {} sends ({:.1} per send); {} bytes in {} receives ({:.0} per receive); {} misrouted",
                        m.datagrams_sent,
                        m.udp_sends,
                        m.datagrams_per_send(),
                        m.bytes_received,
                        m.udp_receives,
                        m.bytes_per_receive(),
                        m.misrouted_datagrams
                    );
                }
            }
            results.push(r);
            sent.push(moved);
        }
        if a.json {
            let mut each = Vec::new();
            for (r, moved) in results.iter().zip(&sent) {
                let mut v = serde_json::to_value(r)?;
                if let (Some(m), Some(o)) = (moved, v.as_object_mut()) {
                    o.insert("server_udp".into(), m.json());
                }
                each.push(v);
            }
            let v = if each.len() == 1 {
                each.remove(0)
            } else {
                serde_json::Value::Array(each)
            };
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        return Ok(expected_exit(a.expect_status, &results));
    }
    if a.iterations < 3 {
        return Ok(usage_error(
            "-i: statistics need at least 3 runs per variant",
        ));
    }
    // Variants: the command line with the variant's words last (they win); a variant
    // that starts with a URL replaces the command line's URLs.
    let given = super::words_after("http");
    let labels = match super::variant_labels(a.compare.as_deref(), "run") {
        Ok(l) => l,
        Err(e) => return Ok(usage_error(&e)),
    };
    // variants[v][w]: variant v's configuration for workload w.
    let mut variants: Vec<Vec<HttpConfig>> = Vec::new();
    for label in &labels {
        if a.compare.is_none() {
            variants.push(base.clone());
            continue;
        }
        let words: Vec<String> = label.split_whitespace().map(str::to_string).collect();
        let own_url = words.first().is_some_and(|w| !w.starts_with('-'));
        let mut all = vec!["http".to_string()];
        if own_url {
            let without_urls = HttpOnly::try_parse_from(
                std::iter::once("http".to_string()).chain(given.iter().cloned()),
            )
            .map(|p| p.args.urls)
            .unwrap_or_default();
            all.extend(given.iter().filter(|w| !without_urls.contains(w)).cloned());
        } else {
            all.extend(given.iter().cloned());
        }
        all.extend(words);
        let parsed = match HttpOnly::try_parse_from(&all) {
            Ok(p) => p.args,
            Err(e) => {
                return Ok(usage_error(&format!(
                    "--compare variant '{label}': {}",
                    e.kind()
                )))
            }
        };
        match configs(&parsed) {
            Ok(c) if c.len() == base.len() => variants.push(c),
            Ok(_) => {
                return Ok(usage_error(&format!(
                    "--compare variant '{label}': a different number of workloads"
                )))
            }
            Err(e) => return Ok(usage_error(&format!("--compare variant '{label}': {e}"))),
        }
    }
    let mut out = Vec::new();
    let mut exit = ExitCode::SUCCESS;
    for w in 0..base.len() {
        let cfgs: Vec<&HttpConfig> = variants.iter().map(|v| &v[w]).collect();
        let total = a.iterations as usize * cfgs.len();
        let mut done = 0;
        let runs = series::interleave(&cfgs, a.iterations as usize, &stop, |cfg, round| {
            let mut progress = progress_bar(cfg.limit, a.json);
            let r = http::run(cfg, &stop, &mut *progress)?;
            done += 1;
            if !a.json {
                eprintln!(
                    "[{done}/{total}] round {} {}: {}",
                    round + 1,
                    r.workload,
                    run_line(&r)
                );
            }
            Ok::<_, anyhow::Error>(r)
        })?;
        if expected_exit(a.expect_status, runs.iter().flatten()) != ExitCode::SUCCESS {
            exit = ExitCode::from(1);
        }
        let workload = base[w].workload.describe();
        let judged = http::judge(&labels, &runs, a.out.as_deref(), &workload, a.confidence)
            .with_context(|| "--out".to_string())?;
        if !a.json {
            println!("== {workload}");
            for (metric, unit, text) in &judged.reports {
                println!("{metric} ({unit}):\n{text}");
            }
            super::print_verdicts(&judged.verdicts);
        }
        out.push(serde_json::json!({
            "workload": workload,
            "samples": judged.samples,
            "verdicts": judged.verdicts,
            "reports": judged.reports.iter().map(|(m, _, t)| (m.to_string(), serde_json::Value::from(t.clone()))).collect::<serde_json::Map<_, _>>(),
            "runs": runs,
        }));
    }
    if a.json {
        let v = serde_json::json!({
            "variants": labels,
            "iterations": a.iterations,
            "confidence": a.confidence.percent(),
            "workloads": out,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    Ok(exit)
}

/// One run in a line: requests/s, p99, server CPU per request, and trouble if any.
pub fn run_line(r: &HttpResult) -> String {
    let mut line = format!(
        "{:.1} requests/s, p99 {}",
        r.requests_per_second,
        format_us(r.latency_us.p99)
    );
    if let Some(s) = &r.server {
        line.push_str(&format!(", server {:.2} us/request", s.us_per_request));
    }
    if r.errors.total() + r.non_2xx() > 0 {
        line.push_str(&format!(
            ", {} errors, {} non-2xx",
            r.errors.total(),
            r.non_2xx()
        ));
    }
    line
}

/// Microseconds with a readable unit.
pub fn format_us(us: u64) -> String {
    if us < 1000 {
        format!("{us} us")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.2} s", us as f64 / 1e6)
    }
}

pub fn print_http(r: &HttpResult) {
    println!(
        "HTTP GET {} {}: {} connection{}, {} thread{}, {}{}",
        r.target,
        r.workload,
        r.connections,
        if r.connections == 1 { "" } else { "s" },
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        if r.protocol == "h2" {
            format!("HTTP/2, {} streams per connection", r.pipeline)
        } else if r.protocol == "h3" && r.keep_alive {
            format!("HTTP/3, {} streams per connection", r.pipeline)
        } else if r.protocol == "h3" {
            "HTTP/3, a connection per request".to_string()
        } else if r.keep_alive {
            format!("keep-alive, pipeline {}", r.pipeline)
        } else {
            "a connection per request".to_string()
        },
        r.rate
            .map(|x| format!(", paced at {x} requests/s"))
            .unwrap_or_default()
    );
    println!(
        "  requests  {} in {:.2} s: {:.2} requests/s, {:.2} 10^6 bytes/s of bodies",
        r.requests, r.elapsed_seconds, r.requests_per_second, r.megabytes_per_second
    );
    let l = &r.latency_us;
    println!(
        "  latency   mean {}, p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
        format_us(l.mean.round() as u64),
        format_us(l.p50),
        format_us(l.p90),
        format_us(l.p99),
        format_us(l.p999),
        format_us(l.max)
    );
    let statuses: Vec<String> = r
        .statuses
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    println!(
        "  status    {}",
        if statuses.is_empty() {
            "none".to_string()
        } else {
            statuses.join(", ")
        }
    );
    if r.non_2xx() > 0 {
        // As prominent as wrk makes it: a run of 404s is not a benchmark of a server.
        println!("  Non-2xx responses: {}", r.non_2xx());
    }
    let e = &r.errors;
    if e.total() == 0 {
        println!("  errors    none");
    } else {
        println!(
            "  errors    {} (connect {}, read {}, timeout {}, bad response {}, length {}, checksum {}); first: {}",
            e.total(),
            e.connect,
            e.read,
            e.timeout,
            e.bad_response,
            e.length,
            e.checksum,
            r.first_error.as_deref().unwrap_or("-")
        );
    }
    if let Some(s) = &r.server {
        println!(
            "  server    pid {}: {:.3} CPU s ({:.1}% of one CPU), {:.3} us/request, {:.4} us/KB",
            s.pid, s.cpu_seconds, s.percent_of_one_cpu, s.us_per_request, s.us_per_kb
        );
        if let Some(k) = &s.kernel {
            println!(
                "  kernel    {} segments ({:.1}/MB, {:.0} body bytes each), {} retransmitted, {} context switches ({:.2}/MB)",
                k.segments,
                k.segments_per_mb,
                k.body_bytes_per_segment,
                k.retransmits,
                k.context_switches,
                k.context_switches_per_mb
            );
        }
        if let Some(c) = &s.core {
            println!(
                "  its CPU   {}: {:.3} s busy ({:.1}%, softirq {:.3} s), {:.3} us/request, {:.4} us/KB",
                c.cpu, c.busy_seconds, c.percent_busy, c.softirq_seconds, c.us_per_request, c.us_per_kb
            );
        }
    }
    println!(
        "  client    {:.3} CPU s, {:.3} us/request, {} connections opened{}",
        r.client.cpu_seconds,
        r.client.us_per_request,
        r.connections_opened,
        if r.retried > 0 {
            format!(
                ", {} requests sent again after the server closed a kept-alive connection",
                r.retried
            )
        } else {
            String::new()
        }
    );
    if let Some(h) = r.tls_handshakes {
        println!(
            "  tls       {h} handshakes ({:.1}/s)",
            h as f64 / r.elapsed_seconds.max(1e-9)
        );
    }
}

#[derive(Args, Debug, Clone)]
pub struct IdleArgs {
    /// The URL each connection requests once before it is held
    /// (http://HOST[:PORT]/PATH) [default: http://127.0.0.1:8080/].
    #[arg(value_name = "URL")]
    url: Option<String>,
    /// Connections to open and hold (capped by this process's descriptor limit, which
    /// is raised to its hard limit first) [default: 10000].
    #[arg(short = 'c', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    connections: Option<u32>,
    /// Seconds to hold them before the probe request on a new connection [default: 0].
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    hold: Option<Duration>,
    /// The server's process: its memory (with its child processes), descriptors and
    /// threads are read before and with the connections held.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// One JSON object instead of the human report.
    #[arg(long)]
    json: bool,
    /// Servers to start and measure instead of a URL (each round starts each afresh,
    /// with --workers workers and a 600 s keep-alive), compared by memory per
    /// connection against the first.
    #[command(flatten)]
    set_of: super::compare::ServerSetArgs,
    /// With --servers: rounds, servers interleaved in each (at least 3).
    #[arg(short = 'i', long = "iterations", value_name = "N", default_value = "5", value_parser = clap::value_parser!(u32).range(3..=1000))]
    iterations: u32,
    /// With --servers: worker processes or threads of every server.
    #[arg(long, value_name = "N", default_value = "2", value_parser = clap::value_parser!(u32).range(1..=256))]
    workers: u32,
    /// With --servers: confidence of the comparison (80, 90, 95, 98, 99 or 99.5).
    #[arg(long, value_name = "PERCENT", default_value = "95", value_parser = parse_confidence)]
    confidence: linerate_stat::Confidence,
    /// With --servers: directory for the ministat sample files.
    #[arg(long, value_name = "DIR", default_value = "bench-out/idle")]
    out: PathBuf,
}

/// `linerate bench idle --servers …`: each server started afresh per round.
fn run_idle_servers(a: IdleArgs) -> anyhow::Result<ExitCode> {
    if a.url.is_some() || a.server_pid.is_some() {
        return Ok(usage_error(
            "--servers: give servers to start, or a URL (with --server-pid), not both",
        ));
    }
    let exe = std::env::current_exe().context("finding the linerate binary")?;
    let servers = match a.set_of.specs(&exe, &[crate::compare::Peer::Linerate]) {
        Ok(s) => s,
        Err(e) => return Ok(usage_error(&e)),
    };
    let cfg = crate::idle::IdleCompareConfig {
        servers,
        rounds: a.iterations as usize,
        connections: a.connections.unwrap_or(10_000) as usize,
        hold: a.hold.unwrap_or(Duration::ZERO),
        workers: a.workers as usize,
        confidence: a.confidence,
        out: Some(a.out.clone()),
    };
    let stop = stop_flag()?;
    let quiet = a.json;
    let r = crate::idle::compare(&cfg, &stop, &mut |round, name, r| {
        if !quiet {
            eprintln!(
                "round {round} {name}: {} connections held, {:.0} bytes each",
                r.connections_held,
                r.rss_bytes_per_connection.unwrap_or(f64::NAN)
            );
        }
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    for name in &r.skipped {
        println!("skipped {name}: not installed");
    }
    if let Some(text) = &r.report {
        println!("server memory per idle connection, bytes:\n{text}");
    }
    super::print_verdicts(&r.verdicts);
    println!("samples under {}", a.out.display());
    Ok(ExitCode::SUCCESS)
}

/// `linerate bench idle`.
pub fn run_idle(a: IdleArgs) -> anyhow::Result<ExitCode> {
    if a.set_of.given() {
        return run_idle_servers(a);
    }
    let url = a.url.as_deref().unwrap_or("http://127.0.0.1:8080/");
    let (target, host, path) = match parse_url(url) {
        Ok(t) => t,
        Err(e) => return Ok(usage_error(&format!("URL {e}"))),
    };
    if let Some(pid) = a.server_pid {
        if crate::procs::Usage::of_tree(pid).is_none() {
            return Ok(usage_error(&format!("--server-pid {pid}: no such process")));
        }
    }
    let cfg = crate::idle::IdleConfig {
        target,
        host,
        path,
        connections: a.connections.unwrap_or(10_000) as usize,
        hold: a.hold.unwrap_or(Duration::ZERO),
        server_pid: a.server_pid,
    };
    let r = crate::idle::run(&cfg).with_context(|| url.to_string())?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print_idle(&r);
    }
    // Every connection held and answered 200, and the probe too: exit 0.
    let all_ok = r.connections_held == r.connections_asked
        && r.statuses.keys().all(|&s| s == 200)
        && r.probe_status == Some(200);
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `3 × 200, 1 × 404`: counts by status.
pub(crate) fn by_status(statuses: &std::collections::BTreeMap<u16, u64>) -> Vec<String> {
    statuses.iter().map(|(s, n)| format!("{n} × {s}")).collect()
}

fn print_idle(r: &crate::idle::IdleReport) {
    let statuses = by_status(&r.statuses);
    println!(
        "idle connections: {} of {} held ({:.1} s to open), answers {}",
        r.connections_held,
        r.connections_asked,
        r.open_seconds,
        if statuses.is_empty() {
            "none".into()
        } else {
            statuses.join(", ")
        }
    );
    for (what, n) in &r.failures {
        println!("  failed {n} ×: {what}");
    }
    if r.connections_held < r.connections_asked {
        println!(
            "  (this process may open {} descriptors)",
            r.client_descriptor_limit
        );
    }
    if let (Some(b), Some(w)) = (r.server_before, r.server_with) {
        println!(
            "server: RSS {:.1} MiB before, {:.1} MiB with them; descriptors {} → {}; threads {} → {}",
            b.rss_kib as f64 / 1024.0,
            w.rss_kib as f64 / 1024.0,
            b.descriptors,
            w.descriptors,
            b.threads,
            w.threads
        );
    }
    if let Some(per) = r.rss_bytes_per_connection {
        println!(
            "memory per idle connection: {:.2} KB ({per:.0} bytes)",
            per / 1024.0
        );
    }
    match (r.probe_status, r.probe_ms) {
        (Some(s), Some(ms)) => {
            println!("a request on a new connection meanwhile: {s} in {ms:.2} ms")
        }
        _ => println!("a request on a new connection meanwhile: no answer"),
    }
}
