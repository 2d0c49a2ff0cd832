//! `bench compare`: linerate against the static servers users know, and linerate's
//! option sets (or builds) against each other, in one command.
//!
//! It writes the file set, starts every server that is installed (see [`peers`]), runs
//! the same load against each for every workload, the servers interleaved round by
//! round (linerate, nginx, lighttpd, h2o, linerate, …), and judges requests/s, p99
//! latency and server CPU per request of each against the first (the baseline) with
//! Student's t and the paired reading. The load comes from the built-in client
//! (`bench http`), from wrk, or from both, each a column of its own. [`report`] renders
//! the result as a self-contained HTML page with SVG charts.

pub mod peers;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::http::{self, workload, HttpConfig, HttpResult, Judged, Workload};
use crate::netns::{self, NetnsError, NetnsSettings, Topology};
pub use peers::Peer;

/// One server of a comparison: a peer, or linerate with a set of options.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    /// Its name in the output (the peer's name, or the variant's).
    pub label: String,
    /// What it is.
    pub peer: Peer,
    /// Its executable (None: the peer found on `PATH`).
    pub exe: Option<PathBuf>,
    /// Extra arguments (linerate only: `--transmit splice`, say).
    pub args: Vec<String>,
}

impl ServerSpec {
    /// A peer as installed, under its own name.
    pub fn peer(peer: Peer) -> ServerSpec {
        ServerSpec {
            label: peer.name().to_string(),
            peer,
            exe: None,
            args: Vec::new(),
        }
    }
}

/// What a user asked to compare: peers in order, and linerate's variants.
#[derive(Clone, Copy, Debug)]
pub struct Lineup<'a> {
    /// Peers in order (linerate where its variants go).
    pub peers: &'a [Peer],
    /// linerate option sets: (name, flags).
    pub variants: &'a [(String, String)],
    /// Other linerate builds: (variant name, binary).
    pub bins: &'a [(String, PathBuf)],
    /// Peers of another build, each a server of its own after those listed: (name,
    /// which peer, its binary), a current Caddy beside Debian's, say.
    pub peer_bins: &'a [(String, Peer, PathBuf)],
    /// Arguments every linerate gets before its own.
    pub common: &'a [String],
    /// This linerate.
    pub exe: &'a std::path::Path,
}

/// The servers of `l` in order: each peer as listed, linerate replaced by the variants
/// (appended when linerate is not listed). A name given twice is a usage mistake.
pub fn server_specs(l: &Lineup<'_>) -> Result<Vec<ServerSpec>, String> {
    for (what, names) in [
        (
            "--variant",
            l.variants.iter().map(|v| &v.0).collect::<Vec<_>>(),
        ),
        ("--bin", l.bins.iter().map(|b| &b.0).collect()),
    ] {
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(format!("{what}: '{n}' is named twice"));
            }
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for n in l
        .variants
        .iter()
        .map(|v| &v.0)
        .chain(l.bins.iter().map(|b| &b.0))
    {
        if !names.contains(&n.as_str()) {
            names.push(n);
        }
    }
    let linerate: Vec<ServerSpec> = if names.is_empty() {
        vec![ServerSpec {
            exe: Some(l.exe.to_path_buf()),
            args: l.common.to_vec(),
            ..ServerSpec::peer(Peer::Linerate)
        }]
    } else {
        names
            .iter()
            .map(|&n| {
                let mut args = l.common.to_vec();
                if let Some((_, f)) = l.variants.iter().find(|v| v.0 == n) {
                    args.extend(f.split_whitespace().map(str::to_string));
                }
                let bin = l.bins.iter().find(|b| b.0 == n).map(|b| b.1.clone());
                ServerSpec {
                    label: n.to_string(),
                    peer: Peer::Linerate,
                    exe: Some(bin.unwrap_or_else(|| l.exe.to_path_buf())),
                    args,
                }
            })
            .collect()
    };
    let mut out: Vec<ServerSpec> = Vec::new();
    let mut placed = false;
    for &p in l.peers {
        if p == Peer::Linerate {
            if !placed {
                out.extend(linerate.iter().cloned());
                placed = true;
            }
        } else if !out.iter().any(|s| s.peer == p) {
            out.push(ServerSpec::peer(p));
        }
    }
    if !placed && !names.is_empty() {
        out.extend(linerate);
    }
    for (name, peer, exe) in l.peer_bins {
        if *peer == Peer::Linerate {
            return Err(format!(
                "--peer-bin {name}: linerate's builds are --bin NAME=PATH"
            ));
        }
        if out.iter().any(|s| s.label == *name) {
            return Err(format!("--peer-bin: '{name}' names another server"));
        }
        out.push(ServerSpec {
            label: name.clone(),
            exe: Some(exe.clone()),
            ..ServerSpec::peer(*peer)
        });
    }
    if out.is_empty() {
        return Err("--servers: give at least one server".into());
    }
    Ok(out)
}

/// A protocol a comparison's column speaks (`--protocols`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Protocol {
    /// HTTP/1.1.
    #[serde(rename = "http/1.1")]
    H1,
    /// HTTP/2 (ALPN h2 over TLS, prior knowledge in clear).
    #[serde(rename = "h2")]
    H2,
    /// HTTP/3 (QUIC; TLS only).
    #[serde(rename = "h3")]
    H3,
}

impl Protocol {
    /// Its name in column labels and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// `load` made to speak it (HTTP/2 with 16 KiB frames, as `--h2`).
    fn apply(self, load: &mut HttpConfig) {
        load.h2 = (self == Protocol::H2).then_some(16_384);
        load.h3 = self == Protocol::H3;
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Protocol, String> {
        match s {
            "h1" | "http/1.1" => Ok(Protocol::H1),
            "h2" => Ok(Protocol::H2),
            "h3" => Ok(Protocol::H3),
            _ => Err(format!("'{s}': the protocols are h1, h2 and h3")),
        }
    }
}

/// Whether `peer`, as installed here, speaks HTTP/3.
fn speaks_h3(peer: Peer) -> bool {
    matches!(peer, Peer::Linerate | Peer::Caddy)
}

/// The program that makes the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Client {
    /// `bench http`'s own client.
    Builtin,
    /// wrk (one URL per run: the sizes, not the mix).
    Wrk,
    /// h2load, with `--h2` (one URL per run, as wrk).
    H2load,
}

impl Client {
    /// Its name on the command line and in labels.
    pub fn name(self) -> &'static str {
        match self {
            Client::Builtin => "builtin",
            Client::Wrk => "wrk",
            Client::H2load => "h2load",
        }
    }
}

impl std::str::FromStr for Client {
    type Err = String;
    fn from_str(s: &str) -> Result<Client, String> {
        match s {
            "builtin" => Ok(Client::Builtin),
            "wrk" => Ok(Client::Wrk),
            "h2load" => Ok(Client::H2load),
            _ => Err(format!("'{s}': the clients are builtin, wrk and h2load")),
        }
    }
}

/// What `bench compare` runs.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    /// Servers in order, the first being the baseline. Peers not installed are
    /// skipped; a linerate that does not start ends the comparison.
    pub servers: Vec<ServerSpec>,
    /// Load clients; with several, each server and client pair is a column.
    pub clients: Vec<Client>,
    /// Protocols side by side (`--protocols`): each server and protocol a column, in
    /// one interleaved run (empty: the load's own, one column a server).
    pub protocols: Vec<Protocol>,
    /// Where the file set is written (a temporary directory if None).
    pub root: Option<PathBuf>,
    /// One workload per size.
    pub sizes: Vec<u64>,
    /// The SpecWeb99 mix, with this many directories.
    pub mix_dirs: Option<usize>,
    /// The load: connections, threads, duration, pipeline, client CPUs… (target,
    /// workload and server pid are filled in per run).
    pub load: HttpConfig,
    /// CPU for the servers.
    pub server_cpu: Option<usize>,
    /// Run the servers in one network namespace and the load in another, joined by a
    /// veth pair, the load's received packets steered to its first CPU (None: loopback).
    pub netns: Option<NetnsSettings>,
    /// Connection counts to sweep: each size (or the mix) is run at each, as a workload
    /// of its own named `PATH c=N` (empty: the load's one count).
    pub connections: Vec<usize>,
    /// Runs per server and workload.
    pub iterations: usize,
    /// Runs per server and workload made first and discarded: the first round of a
    /// fresh server runs 20-30% slow (caches, the page cache, the CPU's frequency).
    pub warmup: usize,
    /// Confidence of the comparisons.
    pub confidence: linerate_stat::Confidence,
    /// Where samples (ministat files) go, if anywhere.
    pub out: Option<PathBuf>,
    /// The linerate build that runs the comparison, for the report.
    pub build: crate::machine::Build,
    /// Ask for gzip (`Accept-Encoding: gzip`) of `SIZE.js` files that have a `.gz`
    /// beside them, and configure the peers to send that or to compress themselves.
    pub gzip: Option<peers::Gzip>,
    /// HTTPS: every server with one self-signed ECDSA P-256 certificate made for the
    /// run, TLS 1.3 (1.2 allowed), and a client that offers AES-128-GCM alone.
    pub tls: bool,
}

/// lighttpd's TLS module (a package of its own on Debian).
const LIGHTTPD_OPENSSL: &str = "/usr/lib/lighttpd/mod_openssl.so";

/// A self-signed ECDSA P-256 certificate for `localhost`, 127.0.0.1 and the servers'
/// `--netns` address, written with its key in `dir`.
fn make_certificate(dir: &Path) -> Result<peers::TlsFiles, CompareError> {
    let names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        netns::SENDER_ADDR.to_string(),
    ];
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| CompareError::Nothing(format!("making the TLS certificate: {e}")))?;
    let files = peers::TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.cert, made.cert.pem())?;
    std::fs::write(&files.key, made.signing_key.serialize_pem())?;
    Ok(files)
}

/// Failures that end a comparison.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Writing the file set failed.
    #[error("writing the file set in {dir}: {reason}")]
    FileSet {
        /// Where.
        dir: PathBuf,
        /// Why.
        reason: std::io::Error,
    },
    /// A server could not be started.
    #[error("starting {server}: {reason}")]
    Start {
        /// Which.
        server: String,
        /// Why.
        reason: std::io::Error,
    },
    /// A load run failed.
    #[error("{server}, {workload}: {reason}")]
    Run {
        /// Which server and client.
        server: String,
        /// Which workload.
        workload: String,
        /// Why.
        reason: http::HttpError,
    },
    /// The `--netns` topology could not be built.
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Interrupted.
    #[error("interrupted")]
    Interrupted,
    /// Nothing to compare.
    #[error("{0}")]
    Nothing(String),
    /// Anything else.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A column of the comparison: a server that took part, with the client that loaded it.
#[derive(Clone, Debug, Serialize)]
pub struct ServerInfo {
    /// Its label: the server's, or "server/client" when there are several clients.
    pub name: String,
    /// The server's kind.
    pub peer: Peer,
    /// The load client.
    pub client: Client,
    /// The protocol of its column, with `--protocols`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Its version line.
    pub version: String,
    /// Its configuration (for linerate: the command line).
    pub config: String,
}

/// One workload's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadComparison {
    /// The workload.
    pub workload: String,
    /// Runs per server, in the order of [`CompareResult::servers`].
    pub runs: Vec<Vec<HttpResult>>,
    /// Statistics, each peer against linerate.
    pub judged: Judged,
}

/// A whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct CompareResult {
    /// Columns compared, the baseline first.
    pub servers: Vec<ServerInfo>,
    /// Servers asked for but not run, and why.
    pub skipped: Vec<(String, String)>,
    /// One entry per workload.
    pub workloads: Vec<WorkloadComparison>,
    /// Runs per server and workload.
    pub iterations: usize,
    /// Rounds run first and discarded.
    pub warmup: usize,
    /// Where the packets went: "loopback", "netns tso on" or "netns tso off".
    pub path: String,
    /// Confidence of the comparisons, percent.
    pub confidence: f64,
    /// Connections of the load.
    pub connections: usize,
    /// Load threads.
    pub threads: usize,
    /// Seconds per run (None: a request count).
    pub seconds: Option<f64>,
    /// The client's CPUs.
    pub client_cpus: Vec<usize>,
    /// The servers' CPU.
    pub server_cpu: Option<usize>,
    /// Kernel release.
    pub kernel: String,
    /// CPUs of the machine.
    pub cpus: usize,
    /// The build and the machine: commit, profile, date, CPU model, governor, memory.
    pub machine: crate::machine::Machine,
}

/// Progress of a comparison, for the caller to show.
#[derive(Debug)]
pub enum Event<'a> {
    /// A server was started (one event per column).
    Started(&'a ServerInfo),
    /// A server asked for is not installed.
    Skipped(&'a str, &'a str),
    /// A run finished: (run number, of total, column label, result).
    Run(usize, usize, &'a str, &'a HttpResult),
    /// A warm-up run finished, its result discarded: (column label, result).
    WarmUp(&'a str, &'a HttpResult),
}

/// Why `cfg` cannot run, if it cannot: a usage mistake, found before anything starts.
pub fn check(cfg: &CompareConfig) -> Result<(), String> {
    if cfg.clients.is_empty() {
        return Err("--client: give builtin, wrk or h2load, or several".into());
    }
    let h2 = cfg.load.h2.is_some();
    if h2 && cfg.clients.contains(&Client::Wrk) {
        return Err("--h2: wrk speaks HTTP/1.1: give --client builtin or h2load".into());
    }
    if h2 && cfg.gzip == Some(peers::Gzip::Dynamic) {
        return Err(
            "--gzip dynamic: the HTTP/2 clients read no compressed stream: leave out --h2".into(),
        );
    }
    if !cfg.protocols.is_empty() {
        if cfg.clients.iter().any(|c| *c != Client::Builtin) {
            return Err(
                "--protocols: the builtin client alone speaks each: give --client builtin".into(),
            );
        }
        if cfg.protocols.contains(&Protocol::H3) && !cfg.tls {
            return Err("--protocols h3: QUIC needs --tls".into());
        }
        if cfg.gzip == Some(peers::Gzip::Dynamic) {
            return Err("--gzip dynamic: needs wrk: leave out --protocols".into());
        }
        for (i, p) in cfg.protocols.iter().enumerate() {
            if cfg.protocols[..i].contains(p) {
                return Err(format!("--protocols: '{}' is named twice", p.name()));
            }
        }
    }
    if cfg.load.h3 && cfg.clients.iter().any(|c| *c != Client::Builtin) {
        return Err("--h3: only the builtin client speaks HTTP/3: give --client builtin".into());
    }
    if cfg.load.h3 && cfg.gzip == Some(peers::Gzip::Dynamic) {
        return Err("--gzip dynamic: needs wrk, which speaks no HTTP/3: leave out --h3".into());
    }
    if cfg.tls && cfg.clients.contains(&Client::Wrk) {
        return Err(
            "--tls: wrk offers every TLS 1.3 cipher and h2o 2.2 cannot be held to AES-128-GCM; \
             give --client builtin"
                .into(),
        );
    }
    if cfg.gzip.is_some() && cfg.mix_dirs.is_some() {
        return Err("--gzip: give --sizes (the mix has no .js files)".into());
    }
    if cfg.gzip == Some(peers::Gzip::Dynamic) && cfg.clients.contains(&Client::Builtin) {
        return Err(
            "--gzip dynamic: the peers answer chunked, which the builtin client does not read: give --client wrk"
                .into(),
        );
    }
    // The tools run, not the built-in client: one URL per run, and their own limits.
    let one = HttpConfig {
        workload: Arc::new(Workload::List(vec![workload::size_item("/", 1)])),
        ..cfg.load.clone()
    };
    type Unsupported = fn(&HttpConfig) -> Option<&'static str>;
    let tools: [(Client, Unsupported); 2] = [
        (Client::Wrk, http::wrk::unsupported),
        (Client::H2load, http::h2load::unsupported),
    ];
    for (client, unsupported) in tools {
        if !cfg.clients.contains(&client) {
            continue;
        }
        let why = if cfg.mix_dirs.is_some() {
            Some("it is given one URL: leave out --mix (give --sizes)")
        } else {
            unsupported(&one)
        };
        if let Some(why) = why {
            return Err(format!("--client {}: {why}", client.name()));
        }
    }
    let mut labels: Vec<&str> = cfg.servers.iter().map(|s| s.label.as_str()).collect();
    labels.sort_unstable();
    if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("--servers/--variant: '{}' is named twice", w[0]));
    }
    Ok(())
}

/// Why a peer sits this comparison out, if it does: a setting it lacks, a module not
/// installed, answers a client asked for cannot read.
fn sits_out(cfg: &CompareConfig, peer: Peer) -> Option<String> {
    let gzip_static = cfg.gzip == Some(peers::Gzip::Static);
    match peer {
        // nginx has HTTP/3 from 1.25 (Debian 12's is 1.22), h2o from 2.3 (Debian's is
        // 2.2); lighttpd has none.
        peer if cfg.load.h3 && !speaks_h3(peer) => {
            Some("it speaks no HTTP/3 in the version installed here".to_string())
        }
        Peer::Lighttpd if gzip_static => {
            Some("it has no setting to send precompressed files".to_string())
        }
        Peer::Lighttpd if cfg.tls && !Path::new(LIGHTTPD_OPENSSL).exists() => Some(format!(
            "{LIGHTTPD_OPENSSL} is not installed (Debian: lighttpd-mod-openssl)"
        )),
        Peer::Caddy if gzip_static && cfg.clients.contains(&Client::Builtin) => Some(
            "it sends precompressed files chunked, which the builtin client does not read \
             (give --client wrk)"
                .to_string(),
        ),
        _ => None,
    }
}

/// Runs the comparison.
pub fn run(
    cfg: &CompareConfig,
    stop: &crate::StopFlag,
    on: &mut dyn FnMut(Event<'_>),
) -> Result<CompareResult, CompareError> {
    check(cfg).map_err(CompareError::Nothing)?;
    let (root, _tmp) = file_set_root(cfg.root.as_deref(), "linerate-compare")?;
    let items = write_file_set(&root, cfg.gzip, &cfg.sizes, cfg.mix_dirs)?;
    // Made before the servers start and dropped after they stop (declared first).
    let topo = match cfg.netns {
        Some(n) => Some(Topology::create(
            n.tso,
            cfg.load.cpus.first().copied(),
            cfg.server_cpu,
        )?),
        None => None,
    };
    let server_ns = topo.as_ref().map(|t| t.sender_ns.clone());
    let client_ns = topo.as_ref().map(|t| t.sink_ns.as_str());
    let bind = match topo {
        Some(_) => netns::SENDER_ADDR.into(),
        None => peers::Launch::LOOPBACK,
    };
    let work = tempfile::Builder::new()
        .prefix("linerate-compare-servers")
        .tempdir()?;
    let (tls_files, client_tls) = if cfg.tls {
        let files = make_certificate(work.path())?;
        let client = http::tls::ClientTls::aes128_only("localhost", &files.cert, cfg.load.close)
            .map_err(CompareError::Nothing)?;
        (Some(files), Some(client))
    } else {
        (None, None)
    };
    // Start each server once, for the whole comparison.
    let mut running = Vec::new();
    let mut skipped = Vec::new();
    let mut servers = Vec::new();
    // The tools' executables, each found once.
    let tool = |client: Client, find: fn() -> Option<PathBuf>, package: &str| {
        if !cfg.clients.contains(&client) {
            return Ok(None);
        }
        find().map(Some).ok_or_else(|| {
            let name = client.name();
            CompareError::Nothing(format!(
                "--client {name}: {name} is not installed (Debian: {package})"
            ))
        })
    };
    let wrk = tool(Client::Wrk, http::wrk::find, "wrk")?;
    let h2load = tool(Client::H2load, http::h2load::find, "nghttp2-client")?;
    for spec in &cfg.servers {
        if let Some(why) = sits_out(cfg, spec.peer) {
            on(Event::Skipped(&spec.label, &why));
            skipped.push((spec.label.clone(), why));
            continue;
        }
        let exe = spec.exe.clone().or_else(|| spec.peer.find());
        let Some(exe) = exe else {
            on(Event::Skipped(&spec.label, "not installed"));
            skipped.push((spec.label.clone(), "not installed".to_string()));
            continue;
        };
        let launch = peers::Launch {
            peer: spec.peer,
            exe,
            root: root.clone(),
            bind,
            port: peers::free_port(bind, server_ns.as_deref())?,
            netns: server_ns.clone(),
            cpu: cfg.server_cpu,
            work: work.path().join(&spec.label),
            extra: spec.args.clone(),
            settings: peers::Settings {
                gzip: cfg.gzip,
                tls: tls_files.clone(),
                h2: cfg.load.h2.is_some() || cfg.protocols.contains(&Protocol::H2),
                h3: cfg.load.h3 || cfg.protocols.contains(&Protocol::H3),
                ..peers::Settings::default()
            },
        };
        let r = match peers::start(&launch) {
            Ok(r) => r,
            // A linerate that does not start is a mistake in its options or build.
            Err(reason) if spec.peer == Peer::Linerate => {
                return Err(CompareError::Start {
                    server: spec.label.clone(),
                    reason,
                })
            }
            Err(reason) => {
                let why = format!("did not start: {reason}");
                on(Event::Skipped(&spec.label, &why));
                skipped.push((spec.label.clone(), why));
                continue;
            }
        };
        let protocols: Vec<Option<Protocol>> = if cfg.protocols.is_empty() {
            vec![None]
        } else {
            cfg.protocols.iter().copied().map(Some).collect()
        };
        for &client in &cfg.clients {
            for &protocol in &protocols {
                let mut name = spec.label.clone();
                if cfg.clients.len() > 1 {
                    name = format!("{name}/{}", client.name());
                }
                if let Some(p) = protocol {
                    name = format!("{name}/{}", p.name());
                    if p == Protocol::H3 && !speaks_h3(spec.peer) {
                        let why = "it speaks no HTTP/3 in the version installed here";
                        on(Event::Skipped(&name, why));
                        skipped.push((name, why.to_string()));
                        continue;
                    }
                }
                let info = ServerInfo {
                    name,
                    peer: spec.peer,
                    client,
                    protocol,
                    version: r.version.clone(),
                    config: r.config.clone(),
                };
                on(Event::Started(&info));
                servers.push((info, running.len()));
            }
        }
        running.push(r);
    }
    if servers.is_empty() {
        return Err(CompareError::Nothing(
            "no server to measure: none of those asked for is installed".into(),
        ));
    }
    let mut sets: Vec<Workload> = items
        .into_iter()
        .map(|item| Workload::List(vec![item]))
        .collect();
    if let Some(d) = cfg.mix_dirs {
        sets.push(Workload::specweb99("/", d));
    }
    // (workload, connections, name): each size at each count of the sweep.
    let counts: Vec<usize> = if cfg.connections.is_empty() {
        vec![cfg.load.connections]
    } else {
        cfg.connections.clone()
    };
    let mut workloads = Vec::new();
    for set in sets {
        let set = Arc::new(set);
        for &c in &counts {
            let name = if counts.len() > 1 {
                format!("{} c={c}", set.describe())
            } else {
                set.describe()
            };
            workloads.push((Arc::clone(&set), c, name));
        }
    }
    let total = workloads.len() * servers.len() * cfg.iterations;
    let mut done = 0;
    let labels: Vec<String> = servers.iter().map(|(s, _)| s.name.clone()).collect();
    let mut out = Vec::new();
    for (w, connections, name) in workloads {
        let mut runs: Vec<Vec<HttpResult>> = vec![Vec::new(); servers.len()];
        for round in 0..cfg.warmup + cfg.iterations {
            let warming = round < cfg.warmup;
            // Each server goes first in turn (for two: A B, B A, A B, ...): a server
            // that always ran second would pay for whatever the first leaves behind
            // (measured at about 1% of CPU per request on loopback, BENCHMARKS.md).
            let n = servers.len();
            for i in (0..n).map(|k| (k + round) % n) {
                let (info, at) = &servers[i];
                if crate::stopped(stop) {
                    return Err(CompareError::Interrupted);
                }
                let server = &running[*at];
                let mut load = HttpConfig {
                    target: server.addr,
                    host: server.addr.to_string(),
                    workload: Arc::clone(&w),
                    server_pid: Some(server.pid),
                    server_core: cfg.server_cpu,
                    connections,
                    tls: client_tls.clone(),
                    ..cfg.load.clone()
                };
                if let Some(p) = info.protocol {
                    p.apply(&mut load);
                }
                if cfg.gzip.is_some() {
                    load.headers.push("Accept-Encoding: gzip".to_string());
                }
                let result = netns::within(client_ns, || {
                    match (info.client, wrk.as_deref(), h2load.as_deref()) {
                        (Client::Wrk, Some(exe), _) => http::wrk::run(&load, exe),
                        (Client::H2load, _, Some(exe)) => http::h2load::run(&load, exe),
                        _ => http::run(&load, stop, &mut |_, _| {}),
                    }
                })?;
                let r = result.map_err(|reason| CompareError::Run {
                    server: info.name.clone(),
                    workload: name.clone(),
                    reason,
                })?;
                if warming {
                    on(Event::WarmUp(&info.name, &r));
                    continue;
                }
                done += 1;
                on(Event::Run(done, total, &info.name, &r));
                runs[i].push(r);
            }
        }
        let judged = http::judge(&labels, &runs, cfg.out.as_deref(), &name, cfg.confidence)?;
        out.push(WorkloadComparison {
            workload: name,
            runs,
            judged,
        });
    }
    drop(running);
    drop(topo);
    let machine = crate::machine::Machine::read(&cfg.build);
    Ok(CompareResult {
        servers: servers.into_iter().map(|(s, _)| s).collect(),
        skipped,
        workloads: out,
        iterations: cfg.iterations,
        warmup: cfg.warmup,
        path: cfg
            .netns
            .map_or_else(|| "loopback".to_string(), NetnsSettings::describe),
        confidence: cfg.confidence.percent(),
        connections: cfg.load.connections,
        threads: cfg.load.threads,
        seconds: match cfg.load.limit {
            http::Limit::Time(d) => Some(d.as_secs_f64()),
            http::Limit::Requests(_) => None,
        },
        client_cpus: cfg.load.cpus.clone(),
        server_cpu: cfg.server_cpu,
        kernel: machine.kernel.clone(),
        cpus: machine.cpus,
        machine,
    })
}

/// Where a file set goes: `root` if given (kept), else a new temporary directory
/// (removed when the second value is dropped).
fn file_set_root(
    root: Option<&std::path::Path>,
    prefix: &str,
) -> Result<(PathBuf, Option<tempfile::TempDir>), CompareError> {
    Ok(match root {
        Some(r) => (r.to_path_buf(), None),
        None => {
            let t = tempfile::Builder::new().prefix(prefix).tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    })
}

/// Writes the file set under `root`, readable by every server's user: one file per
/// size (with `gzip`, script-like text with its `.gz` beside it) and the SpecWeb99 mix.
/// Returns the sizes' items, in order.
fn write_file_set(
    root: &std::path::Path,
    gzip: Option<peers::Gzip>,
    sizes: &[u64],
    mix_dirs: Option<usize>,
) -> Result<Vec<workload::Item>, CompareError> {
    let fileset = |reason| CompareError::FileSet {
        dir: root.to_path_buf(),
        reason,
    };
    std::fs::create_dir_all(root).map_err(fileset)?;
    let mut items = Vec::new();
    if let Some(g) = gzip {
        for &s in sizes {
            let exact = g == peers::Gzip::Static;
            items.push(workload::write_text_size(root, "/", s, exact).map_err(fileset)?);
        }
    } else {
        workload::write_sizes(root, sizes).map_err(fileset)?;
        items.extend(sizes.iter().map(|&s| workload::size_item("/", s)));
    }
    if let Some(d) = mix_dirs {
        workload::write_specweb99(root, d).map_err(fileset)?;
    }
    readable_by_all(root).map_err(fileset)?;
    Ok(items)
}

/// Makes `dir` and everything in it readable by everyone: a peer's workers may run as
/// another user. The directories above are left alone; a temporary set lives under
/// the world-searchable temporary directory.
pub(crate) fn readable_by_all(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn widen(p: &std::path::Path, m: &std::fs::Metadata) -> std::io::Result<()> {
        let mode = m.permissions().mode();
        let want = if m.is_dir() { 0o755 } else { 0o644 };
        if mode & want != want {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | want))?;
        }
        Ok(())
    }
    fn walk(d: &std::path::Path) -> std::io::Result<()> {
        for e in std::fs::read_dir(d)? {
            let e = e?;
            let m = e.metadata()?;
            widen(&e.path(), &m)?;
            if m.is_dir() {
                walk(&e.path())?;
            }
        }
        Ok(())
    }
    std::fs::create_dir_all(dir)?;
    widen(dir, &std::fs::metadata(dir)?)?;
    walk(dir)
}

/// One `linerate serve` on a written file set, in the servers' namespace of a `--netns`
/// topology made for it: what `bench http --netns` loads from the other namespace.
/// Dropping it stops the server, then removes the namespaces (and a temporary root).
pub struct Hosted {
    server: peers::Running,
    topo: Topology,
    cacert: Option<PathBuf>,
    _work: tempfile::TempDir,
    _root: Option<tempfile::TempDir>,
}

/// What [`Hosted::start`] starts.
#[derive(Clone, Debug)]
pub struct HostedConfig {
    /// The linerate binary.
    pub exe: PathBuf,
    /// Extra `serve` arguments.
    pub args: Vec<String>,
    /// Where to write the file set (kept); None: a temporary directory.
    pub root: Option<PathBuf>,
    /// One file per size.
    pub sizes: Vec<u64>,
    /// The SpecWeb99 mix, with this many directories.
    pub mix_dirs: Option<usize>,
    /// TSO and GSO on the veth pair.
    pub netns: NetnsSettings,
    /// The load's CPU (its received packets are steered there).
    pub client_cpu: Option<usize>,
    /// The server's CPU (it is pinned there, and its ACKs are processed there).
    pub server_cpu: Option<usize>,
    /// A multi-queue link over these CPUs ([`Topology::create_multiqueue`]) and a
    /// worker per CPU, each pinned by the server itself (`server_cpu` is not used);
    /// empty: one queue, one worker on `server_cpu`.
    pub queues: Vec<usize>,
    /// HTTPS, with a self-signed certificate made for the run ([`Hosted::cacert`]).
    pub tls: bool,
    /// HTTP/3 as well, on the HTTPS port (`--http3 on`).
    pub h3: bool,
}

impl Hosted {
    /// Writes the file set, builds the topology and starts the server.
    pub fn start(cfg: &HostedConfig) -> Result<Hosted, CompareError> {
        let (root, tmp) = file_set_root(cfg.root.as_deref(), "linerate-http")?;
        write_file_set(&root, None, &cfg.sizes, cfg.mix_dirs)?;
        let topo = if cfg.queues.is_empty() {
            Topology::create(cfg.netns.tso, cfg.client_cpu, cfg.server_cpu)?
        } else {
            Topology::create_multiqueue(cfg.netns.tso, &cfg.queues)?
        };
        let work = tempfile::Builder::new()
            .prefix("linerate-http-server")
            .tempdir()?;
        let bind = netns::SENDER_ADDR.into();
        let tls = if cfg.tls {
            Some(make_certificate(work.path())?)
        } else {
            None
        };
        let launch = peers::Launch {
            peer: Peer::Linerate,
            exe: cfg.exe.clone(),
            root,
            bind,
            port: peers::free_port(bind, Some(&topo.sender_ns))?,
            netns: Some(topo.sender_ns.clone()),
            cpu: if cfg.queues.is_empty() {
                cfg.server_cpu
            } else {
                None
            },
            work: work.path().join("linerate"),
            extra: cfg.args.clone(),
            settings: peers::Settings {
                workers: cfg.queues.len().max(peers::Settings::default().workers),
                tls: tls.clone(),
                h3: cfg.h3,
                ..peers::Settings::default()
            },
        };
        let server = peers::start(&launch).map_err(|reason| CompareError::Start {
            server: "linerate".into(),
            reason,
        })?;
        Ok(Hosted {
            server,
            topo,
            cacert: tls.map(|t| t.cert),
            _work: work,
            _root: tmp,
        })
    }

    /// With HTTPS, the certificate the server was given (self-signed: its own CA).
    pub fn cacert(&self) -> Option<&Path> {
        self.cacert.as_deref()
    }

    /// Where the server listens.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.server.addr
    }

    /// The server's process.
    pub fn pid(&self) -> u32 {
        self.server.pid
    }

    /// The load's namespace.
    pub fn client_ns(&self) -> &str {
        &self.topo.sink_ns
    }

    /// How the server was started.
    pub fn config(&self) -> &str {
        &self.server.config
    }
}
