//! The servers `bench compare` and `bench idle` run: linerate and the peers a user
//! would otherwise pick for static files, each configured the way its own
//! documentation recommends for that job, with the same [`Settings`] (one worker by
//! default), no access log, and everything it writes kept in a work directory of ours.
//! This is the one configuration of each peer that every published number uses.
//!
//! Each server is started in the foreground from a thread whose CPU affinity is already
//! the server CPU, so every process and thread it creates inherits that one CPU; its
//! CPU is then read over its whole process tree.

use std::fs;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// A server `bench compare` knows how to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// `linerate serve`.
    Linerate,
    /// nginx.
    Nginx,
    /// lighttpd.
    Lighttpd,
    /// h2o.
    H2o,
    /// Caddy.
    Caddy,
}

impl Peer {
    /// Every peer, linerate first (the baseline of the comparisons).
    pub const ALL: [Peer; 5] = [
        Peer::Linerate,
        Peer::Nginx,
        Peer::Lighttpd,
        Peer::H2o,
        Peer::Caddy,
    ];

    /// The name used on the command line and in reports, and the program's name.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Linerate => "linerate",
            Peer::Nginx => "nginx",
            Peer::Lighttpd => "lighttpd",
            Peer::H2o => "h2o",
            Peer::Caddy => "caddy",
        }
    }

    /// The peer's executable on `PATH` (plus the sbin directories), if installed.
    pub fn find(self) -> Option<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
            .map(|d| d.join(self.name()))
            .find(|p| {
                use std::os::unix::fs::PermissionsExt;
                fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }
}

impl std::str::FromStr for Peer {
    type Err = String;
    fn from_str(s: &str) -> Result<Peer, String> {
        Peer::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("'{s}': the servers are linerate, nginx, lighttpd, h2o and caddy")
            })
    }
}

/// How to start one server.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Which.
    pub peer: Peer,
    /// Its executable.
    pub exe: PathBuf,
    /// Document root.
    pub root: PathBuf,
    /// Address to listen on: [`Launch::LOOPBACK`], or the server end of a `--netns`
    /// topology.
    pub bind: IpAddr,
    /// Port.
    pub port: u16,
    /// Network namespace to run in (started with `ip netns exec`; None: this one).
    pub netns: Option<String>,
    /// CPU to run on (None: unpinned).
    pub cpu: Option<usize>,
    /// Directory for its configuration, pid file and logs.
    pub work: PathBuf,
    /// Extra arguments (linerate only: for example `--transmit splice`).
    pub extra: Vec<String>,
    /// What every server is given alike.
    pub settings: Settings,
}

impl Launch {
    /// Where servers listen on one host: 127.0.0.1.
    pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
}

/// How compressed answers are made, in a comparison with `Accept-Encoding: gzip`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Gzip {
    /// Each server sends the `.gz` beside the file (nginx's `gzip_static`, h2o's
    /// `file.send-compressed`, Caddy's `precompressed`; lighttpd has no such setting
    /// and sits it out).
    Static,
    /// Each peer compresses every response itself (nginx's `gzip on` at its default
    /// level 1, lighttpd's mod_deflate, h2o's `compress`, Caddy's `encode`); linerate, which never
    /// compresses on the fly, still sends the `.gz`.
    Dynamic,
}

impl std::str::FromStr for Gzip {
    type Err = String;
    fn from_str(s: &str) -> Result<Gzip, String> {
        match s {
            "static" => Ok(Gzip::Static),
            "dynamic" => Ok(Gzip::Dynamic),
            _ => Err(format!("'{s}': give static or dynamic")),
        }
    }
}

/// HTTPS for every server: one certificate chain and key (PEM files), TLS 1.3 and 1.2,
/// AES-128-GCM (the client offers no other cipher, so every server uses it).
#[derive(Clone, Debug, PartialEq)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// The settings every server of a comparison gets, each in its own words.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Worker processes or threads.
    pub workers: usize,
    /// How long an idle keep-alive connection is kept, seconds.
    pub keepalive_seconds: u64,
    /// Connections the server accepts at once (and descriptors it may open: twice as
    /// many, for files and logs too).
    pub connections: usize,
    /// Compressed answers, and how they are made (None: files are sent as they are).
    pub gzip: Option<Gzip>,
    /// HTTPS instead of HTTP.
    pub tls: Option<TlsFiles>,
    /// HTTP/2 as well as HTTP/1.1: by ALPN over TLS, by prior knowledge in clear.
    pub h2: bool,
    /// HTTP/3 as well (QUIC on the TLS port, UDP): linerate's `--http3 on`, Caddy's
    /// `h3`.
    pub h3: bool,
}

impl Default for Settings {
    /// One worker, nginx's default keep-alive of 65 s, 10,240 connections.
    fn default() -> Settings {
        Settings {
            workers: 1,
            keepalive_seconds: 65,
            connections: 10_240,
            gzip: None,
            tls: None,
            h2: false,
            h3: false,
        }
    }
}

/// A running server; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct Running {
    /// Which.
    pub peer: Peer,
    /// The process to measure (its descendants count too).
    pub pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its version line.
    pub version: String,
    /// The configuration it was given, for the report.
    pub config: String,
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        // The server leads its own process group: nginx's workers and h2o's helper go
        // with it, even if the leader has to be killed.
        let group = self.child.id();
        let _ = linerate_sys::term::signal_group(group, linerate_sys::term::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = linerate_sys::term::signal_group(group, linerate_sys::term::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A free port on `bind` in the network namespace `netns` (None: this one), free when
/// asked (the server binds it a moment later), below the ephemeral range so that no
/// client connection can be holding it.
pub fn free_port(bind: IpAddr, netns: Option<&str>) -> io::Result<u16> {
    let first = 20_000 + (std::process::id() % 10_000) as u16;
    crate::netns::within(netns, || {
        // Free for UDP too: HTTP/3 takes the same port number.
        (first..32_000)
            .chain(20_000..first)
            .find(|&p| {
                TcpListener::bind((bind, p)).is_ok() && std::net::UdpSocket::bind((bind, p)).is_ok()
            })
            .ok_or_else(|| io::Error::other("no free port between 20000 and 32000"))
    })?
}

/// The configuration file text for `l` (none for linerate, which takes flags).
pub fn config_text(l: &Launch) -> String {
    let root = l.root.display();
    let work = l.work.display();
    let port = l.port;
    let bind = l.bind;
    let Settings {
        workers,
        keepalive_seconds: keepalive,
        connections,
        gzip,
        ref tls,
        h2,
        h3: _,
    } = l.settings;
    // Each server's words for HTTPS with the one certificate: TLS 1.2 and 1.3, the
    // AES-128-GCM suites (ECDSA for 1.2), the server's order, session resumption.
    let (nginx_ssl, nginx_tls, lighttpd_tls, h2o_tls) = match tls {
        None => (String::new(), String::new(), String::new(), String::new()),
        Some(TlsFiles { cert, key }) => {
            let (cert, key) = (cert.display(), key.display());
            (
                " ssl".to_string(),
                format!(
                    "    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
    ssl_prefer_server_ciphers on;
    ssl_session_cache shared:SSL:10m;
"
                ),
                format!(
                    "server.modules += (\"mod_openssl\")
ssl.engine = \"enable\"
ssl.pemfile = \"{cert}\"
ssl.privkey = \"{key}\"
ssl.openssl.ssl-conf-cmd = (\"MinProtocol\" => \"TLSv1.2\", \"Ciphersuites\" => \"TLS_AES_128_GCM_SHA256\", \"CipherString\" => \"ECDHE-ECDSA-AES128-GCM-SHA256\")
"
                ),
                format!(
                    "  ssl:
    certificate-file: {cert}
    key-file: {key}
    minimum-version: TLSv1.2
    cipher-suite: ECDHE-ECDSA-AES128-GCM-SHA256
    cipher-preference: server
    ocsp-update-interval: 0
"
                ),
            )
        }
    };
    // Each server's words for it (`.js` files are text/javascript to all of them).
    let (nginx_gzip, lighttpd_gzip, h2o_gzip) = match gzip {
        None => ("", "", "file.send-compressed: OFF\n"),
        Some(Gzip::Static) => (
            "    gzip_static on;\n    gzip_vary on;\n",
            "",
            "file.send-compressed: ON\n",
        ),
        Some(Gzip::Dynamic) => (
            "    gzip on;\n    gzip_types text/javascript;\n    gzip_vary on;\n",
            "server.modules += (\"mod_deflate\")\ndeflate.mimetypes = (\"text/javascript\")\ndeflate.allowed-encodings = (\"gzip\")\n",
            "file.send-compressed: OFF\ncompress: ON\n",
        ),
    };
    // Descriptors: two per connection at most (the socket and a file), under the
    // hard limit this process has (the servers inherit it).
    let hard = linerate_sys::fs::nofile_limit().map_or(20_000, |(_, h)| h);
    let fds = (2 * connections as u64)
        .min(hard.saturating_sub(64))
        .max(1024);
    let lighttpd_workers = if workers > 1 { workers } else { 0 };
    // HTTP/2: nginx's `http2` listen parameter (ALPN h2 with ssl, prior-knowledge h2c
    // without); lighttpd's feature flags (both on by default since 1.4.59, said
    // outright); h2o offers h2 by ALPN and takes prior-knowledge h2c unasked.
    let (nginx_h2, lighttpd_h2) = if h2 {
        (
            " http2",
            "server.feature-flags += (\"server.h2proto\" => \"enable\", \"server.h2c\" => \"enable\")\n",
        )
    } else {
        ("", "")
    };
    let user = if linerate_sys::ns::effective_uid() == 0 {
        "user: root\n"
    } else {
        ""
    };
    match l.peer {
        Peer::Linerate => String::new(),
        // nginx's "Serving Static Content" and "Optimizing Performance for Serving
        // Content" guides: sendfile with tcp_nopush, open_file_cache; no access log.
        // keepalive_requests is raised so that long-lived load connections are not
        // closed every 1000 requests.
        Peer::Nginx => format!(
            "worker_processes {workers};
worker_rlimit_nofile {fds};
daemon off;
master_process on;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections {connections}; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    open_file_cache max=10000 inactive=60s;
    open_file_cache_valid 60s;
    keepalive_requests 1000000;
    keepalive_timeout {keepalive}s;
{nginx_gzip}{nginx_tls}    client_body_temp_path {work}/client_body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    types {{ application/octet-stream bin; text/javascript js; }}
    default_type application/octet-stream;
    server {{
        listen {bind}:{port}{nginx_ssl}{nginx_h2};
        root {root};
    }}
}}
"
        ),
        // lighttpd's performance tuning page: the sendfile network backend, the stat
        // cache; a single process for one worker (max-worker 0); keep-alive requests
        // raised like nginx's, to its most (the setting is 16-bit: the load generator
        // reconnects when told to close). max-fds stays under the open-file limit.
        Peer::Lighttpd => format!(
            "server.document-root = \"{root}\"
server.bind = \"{bind}\"
server.port = {port}
server.pid-file = \"{work}/lighttpd.pid\"
server.errorlog = \"{work}/error.log\"
server.max-worker = {lighttpd_workers}
server.network-backend = \"sendfile\"
server.stat-cache-engine = \"simple\"
server.max-keep-alive-requests = 65535
server.max-keep-alive-idle = {keepalive}
server.max-connections = {connections}
server.max-fds = {fds}
mimetype.assign = (\".js\" => \"text/javascript\", \"\" => \"application/octet-stream\")
{lighttpd_gzip}{lighttpd_tls}{lighttpd_h2}"
        ),
        // h2o's configuration directives: num-threads, file.dir; no access-log
        // directive means no access log; send-compressed off (the default) so files
        // are sent as they are. h2o 2.2 has no sendfile (it reads and writes in about
        // 64 KiB pieces) and documents no open-file cache directive. Started as root it
        // would switch to nobody, who cannot write our work directory: it stays root.
        Peer::H2o => format!(
            "{user}num-threads: {workers}
pid-file: {work}/h2o.pid
error-log: {work}/error.log
max-connections: {connections}
http1-request-timeout: {keepalive}
{h2o_gzip}listen:
  host: {bind}
  port: {port}
{h2o_tls}hosts:
  default:
    paths:
      /:
        file.dir: {root}
"
        ),
        Peer::Caddy => caddy_config(l),
    }
}

/// Caddy's configuration, in its native JSON: one server with `file_server` on the
/// root, automatic HTTPS off (no redirects, no certificate management), the admin
/// endpoint off, its storage and logs in the work directory, no access log (Caddy
/// logs no access unless told to). With TLS, the run's certificate and the same
/// AES-128-GCM suite for TLS 1.2 (Go does not let TLS 1.3's suites be chosen; the
/// client offers AES-128-GCM alone). Its protocols are said outright: HTTP/1.1, and
/// h2 over TLS or h2c in clear with `h2`; HTTP/3 (with h1 and h2, as Caddy serves it
/// by default) only with `h3`. Threads: `GOMAXPROCS` (see
/// [`command`]).
fn caddy_config(l: &Launch) -> String {
    let work = l.work.display().to_string();
    let tls = l.settings.tls.as_ref();
    let protocols: &[&str] = match (l.settings.h2, l.settings.h3, tls.is_some()) {
        (_, true, true) => &["h1", "h2", "h3"],
        (false, _, _) => &["h1"],
        (true, _, true) => &["h1", "h2"],
        (true, _, false) => &["h1", "h2c"],
    };
    let mut file_server = serde_json::json!({
        "handler": "file_server",
        "root": l.root.display().to_string(),
    });
    let mut handle = Vec::new();
    match l.settings.gzip {
        None => {}
        // The `.gz` beside the file, as nginx's gzip_static.
        Some(Gzip::Static) => {
            file_server["precompressed"] = serde_json::json!({ "gzip": {} });
            file_server["precompressed_order"] = serde_json::json!(["gzip"]);
        }
        // Each response compressed (its default types take text/*), as nginx's gzip on.
        Some(Gzip::Dynamic) => handle.push(serde_json::json!({
            "handler": "encode",
            "encodings": { "gzip": {} },
            "prefer": ["gzip"],
        })),
    }
    handle.push(file_server);
    let mut server = serde_json::json!({
        "listen": [SocketAddr::new(l.bind, l.port).to_string()],
        "protocols": protocols,
        "automatic_https": { "disable": true },
        "idle_timeout": format!("{}s", l.settings.keepalive_seconds),
        "routes": [{ "handle": handle }],
    });
    let mut apps = serde_json::json!({ "http": { "servers": {} } });
    if let Some(t) = tls {
        server["tls_connection_policies"] = serde_json::json!([{
            "protocol_min": "tls1.2",
            "cipher_suites": ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"],
        }]);
        apps["tls"] = serde_json::json!({
            "certificates": { "load_files": [{
                "certificate": t.cert.display().to_string(),
                "key": t.key.display().to_string(),
            }]},
        });
    }
    apps["http"]["servers"]["bench"] = server;
    let config = serde_json::json!({
        // No admin endpoint, and no copy of the configuration saved under
        // $XDG_CONFIG_HOME.
        "admin": { "disabled": true, "config": { "persist": false } },
        "storage": { "module": "file_system", "root": format!("{work}/storage") },
        "logging": { "logs": { "default": {
            "level": "ERROR",
            "writer": { "output": "file", "filename": format!("{work}/error.log") },
        }}},
        "apps": apps,
    });
    serde_json::to_string_pretty(&config).unwrap_or_default() + "\n"
}

fn config_file(l: &Launch) -> PathBuf {
    l.work.join(match l.peer {
        Peer::Linerate => "linerate.args",
        Peer::Nginx => "nginx.conf",
        Peer::Lighttpd => "lighttpd.conf",
        Peer::H2o => "h2o.conf",
        Peer::Caddy => "caddy.json",
    })
}

/// The command line for `l`: the server itself, or `ip netns exec NS` and the server
/// (which `ip` replaces itself with, so the process is the server's).
fn command(l: &Launch) -> Command {
    let mut c = match &l.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&l.exe);
            c
        }
        None => Command::new(&l.exe),
    };
    let conf = config_file(l);
    match l.peer {
        Peer::Linerate => {
            let addr = SocketAddr::new(l.bind, l.port).to_string();
            c.arg("serve").arg(&l.root);
            match &l.settings.tls {
                Some(t) => c
                    .args(["--tls-listen", &addr, "--tls-cert"])
                    .arg(&t.cert)
                    .arg("--tls-key")
                    .arg(&t.key),
                None => c.args(["--listen", &addr]),
            };
            // Said either way: HTTP/3 (and its Alt-Svc) is on by default, and a run
            // without it gives linerate what the other servers get.
            c.args(["--http3", if l.settings.h3 { "on" } else { "off" }]);
            c.args(["--workers", &l.settings.workers.to_string()])
                .args(["--idle-timeout", &l.settings.keepalive_seconds.to_string()])
                .args(["--access-log", "off"])
                .args(&l.extra);
        }
        Peer::Nginx => {
            c.arg("-c")
                .arg(&conf)
                .arg("-p")
                .arg(&l.work)
                .arg("-e")
                .arg(l.work.join("error.log"));
        }
        Peer::Lighttpd => {
            c.arg("-D").arg("-f").arg(&conf);
        }
        Peer::H2o => {
            c.arg("-c").arg(&conf);
        }
        // Go's threads: one per worker, as the others' processes or threads. Its
        // configuration, data and step directories (which it would make under $HOME,
        // `caddy version` too) are the work directory.
        Peer::Caddy => {
            c.args(["run", "--config"])
                .arg(&conf)
                .env("GOMAXPROCS", l.settings.workers.to_string())
                .env("XDG_CONFIG_HOME", &l.work)
                .env("XDG_DATA_HOME", &l.work)
                .env("STEPPATH", l.work.join("step"));
        }
    }
    c
}

/// The server's version line.
fn version(l: &Launch) -> String {
    let flag = match l.peer {
        Peer::Linerate => "--version",
        Peer::Nginx => "-v",
        Peer::Lighttpd => "-v",
        Peer::H2o => "--version",
        Peer::Caddy => "version",
    };
    let mut c = Command::new(&l.exe);
    if l.peer == Peer::Caddy {
        c.env("STEPPATH", l.work.join("step"));
    }
    c.arg(flag)
        .output()
        .map(|o| {
            let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.push_str(&String::from_utf8_lossy(&o.stderr));
            s.lines().next().unwrap_or("").trim().to_string()
        })
        .unwrap_or_default()
}

/// Starts `l` and waits until it accepts connections.
pub fn start(l: &Launch) -> io::Result<Running> {
    fs::create_dir_all(&l.work)?;
    let config = config_text(l);
    let shown = if l.peer == Peer::Linerate {
        format!("{:?}", command(l))
    } else {
        fs::write(config_file(l), &config)?;
        config
    };
    let log_path = l.work.join(format!("{}.out", l.peer.name()));
    let log = fs::File::create(&log_path)?;
    let mut cmd = command(l);
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    // Spawned from a thread pinned to the server CPU: the affinity is inherited.
    let cpu = l.cpu;
    let child = std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(c) = cpu {
                linerate_sys::cpu::pin_thread_to_cpu(c)?;
            }
            cmd.spawn()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the launching thread panicked")))
    })?;
    let addr = SocketAddr::new(l.bind, l.port);
    let mut running = Running {
        peer: l.peer,
        pid: child.id(),
        addr,
        version: version(l),
        config: shown,
        child,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = running.child.try_wait()? {
            let mut out = String::new();
            let _ = fs::File::open(&log_path).and_then(|mut f| f.read_to_string(&mut out));
            let tail: Vec<&str> = out.lines().rev().take(3).collect();
            return Err(io::Error::other(format!(
                "{} exited ({status}) before serving: {}",
                l.peer.name(),
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            )));
        }
        // Asked from inside its namespace, where its address is a local one.
        let up = crate::netns::within(l.netns.as_deref(), || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        })?;
        if up {
            return Ok(running);
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "{} did not listen on {addr} within 10 s (log: {})",
                l.peer.name(),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
