//! Listening sockets: where the server listens (an IP address and port, or a Unix
//! socket's path), binding them once for the process's life, and handing duplicates to
//! each generation of workers.
//!
//! An IP address gets one socket per worker in one `SO_REUSEPORT` group: the kernel
//! spreads new connections over the workers with no shared accept queue. A Unix socket
//! has no such group; its one socket is shared by every worker (each accepts from it
//! when it is readable, and one of them wins each connection), as sockets passed by
//! systemd are.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use socket2::{Domain, SockAddr, Socket, Type};

use crate::config::{Config, Endpoint, UnixFile};

impl Endpoint {
    /// The endpoint a bound socket has.
    fn of(s: &Socket) -> io::Result<Endpoint> {
        let a = s.local_addr()?;
        if let Some(ip) = a.as_socket() {
            return Ok(Endpoint::Ip(ip));
        }
        match a.as_pathname() {
            Some(p) => Ok(Endpoint::Unix(p.to_path_buf())),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a listening socket that is neither TCP nor a Unix socket with a path",
            )),
        }
    }
}

/// Who a connection came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// A TCP client.
    Ip(SocketAddr),
    /// A client of a Unix socket (it has no address of its own).
    Unix,
}

impl Peer {
    /// The client's IP address; none on a Unix socket.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Peer::Ip(a) => Some(a.ip()),
            Peer::Unix => None,
        }
    }

    /// The client as the access log names it: its IP address, or `unix:` as nginx
    /// writes a Unix socket's client.
    pub fn remote(&self) -> String {
        match self {
            Peer::Ip(a) => a.ip().to_string(),
            Peer::Unix => "unix:".to_string(),
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Ip(a) => write!(f, "{a}"),
            Peer::Unix => f.write_str("unix:"),
        }
    }
}

/// Checks that every `--proxy-protocol` address is one the server listens on; an error
/// names the flag and the address.
pub fn check_proxy(cfg: &Config) -> Result<(), String> {
    let listened = |e: &Endpoint| {
        cfg.listen.contains(e) || cfg.tls_listen.contains(e) || cfg.redirect_listen.contains(e)
    };
    match cfg.proxy_protocol.iter().find(|e| !listened(e)) {
        Some(e) => Err(format!(
            "--proxy-protocol {e}: not an address of --listen, --tls-listen or --redirect-listen"
        )),
        None => Ok(()),
    }
}

/// A listening socket as a worker holds it.
pub(crate) struct Listener {
    pub sock: Socket,
    /// A Unix socket (its connections have no TCP options and no peer address).
    pub unix: bool,
    /// HTTPS: its connections' sessions are made with this configuration.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// A redirect listener: every request is answered with a redirect to HTTPS on this
    /// port.
    pub redirect: Option<u16>,
    /// Its connections open with a PROXY protocol header (`--proxy-protocol`).
    pub proxy: bool,
    /// HTTP/3's UDP sockets on its address (an HTTPS listener with `--http3 on`), each
    /// with its index in the address's `SO_REUSEPORT` group.
    pub quic: Vec<(u8, Socket)>,
}

/// What a listening endpoint serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// HTTP (`listen`).
    Plain,
    /// HTTPS (`tls-listen`).
    Tls,
    /// HTTP answered with redirects to HTTPS (`redirect-listen`).
    Redirect,
}

impl Kind {
    /// The note after its address in the `listening on` line.
    pub fn note(self) -> &'static str {
        match self {
            Kind::Plain => "",
            Kind::Tls => " (https)",
            Kind::Redirect => " (redirect to https)",
        }
    }
}

/// The listening sockets of one endpoint. They outlive reloads: a new generation of
/// workers gets duplicates of the same sockets, so no connection waiting in a queue is
/// lost and no SYN meets a closed port.
pub(crate) struct Bound {
    /// The endpoint as configured (port 0 for "any").
    asked: Endpoint,
    /// The endpoint bound.
    pub addr: Endpoint,
    /// One per worker of the generation that bound them (an IP address), or one that
    /// every worker accepts from ([`Bound::shared`]).
    pub sockets: Vec<Socket>,
    /// Passed to the process by systemd or by the process before it (SIGUSR2).
    passed: bool,
    /// What a passed socket served in the process before (a binary upgrade), for an
    /// address no list names as it is bound (port 0).
    passed_kind: Option<Kind>,
    /// The socket file this process made: removed when the process lets go of the
    /// socket, unless another process was handed it.
    made: Option<PathBuf>,
    /// What it serves.
    pub kind: Kind,
    /// HTTP/3's UDP sockets on the same address (an HTTPS endpoint with `--http3 on`),
    /// one per worker in one `SO_REUSEPORT` group, kept across reloads as the TCP ones.
    pub udp: Vec<Socket>,
    /// The index of the first of them in the group (after those of the process before
    /// a binary upgrade, still in it).
    pub udp_base: u8,
}

impl Bound {
    /// One socket that every worker accepts from: a single passed one (systemd's, made
    /// without `SO_REUSEPORT`) or a Unix socket. A passed group (a binary upgrade's:
    /// the process before had one per worker) is handed out one socket per worker.
    fn shared(&self) -> bool {
        (self.passed && self.sockets.len() == 1) || matches!(self.addr, Endpoint::Unix(_))
    }

    /// Sockets passed to this process (socket activation, a binary upgrade): shared by
    /// all workers, and the listeners for the process's life.
    pub fn passed(s: Socket, sndbuf: Option<usize>, kind: Option<Kind>) -> io::Result<Bound> {
        let addr = Endpoint::of(&s)?;
        if let Some(n) = sndbuf {
            s.set_send_buffer_size(n)?;
        }
        Ok(Bound {
            asked: addr.clone(),
            addr,
            sockets: vec![s],
            passed: true,
            passed_kind: kind,
            made: None,
            kind: kind.unwrap_or(Kind::Plain),
            udp: Vec::new(),
            udp_base: 0,
        })
    }

    /// Removes the socket file this process made, if it did (at a stop, or when a
    /// reload drops the endpoint).
    pub fn remove_file(&self) {
        if let Some(p) = &self.made {
            if let Err(e) = std::fs::remove_file(p) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!("cannot remove {}: {e}", p.display());
                }
            }
        }
    }

    /// Another process holds the socket now: its file stays when this one stops.
    pub fn handed_over(&mut self) {
        self.made = None;
    }
}

/// Why the endpoints could not be bound.
#[derive(Debug)]
pub(crate) struct BindError {
    /// The endpoint that failed (none: a failure not of one endpoint's making).
    pub addr: Option<Endpoint>,
    /// Why.
    pub source: io::Error,
}

impl From<io::Error> for BindError {
    fn from(source: io::Error) -> BindError {
        BindError { addr: None, source }
    }
}

/// A TCP listening socket with `TCP_NODELAY`; `sndbuf` fixes the send buffer of every
/// connection it accepts (they inherit both; a fixed buffer also turns the kernel's
/// autotuning off for them).
fn tcp_listener(addr: SocketAddr, sndbuf: Option<usize>) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // IPv6 alone, whatever net.ipv6.bindv6only says (nginx's ipv6only=on): "[::]:80"
    // beside "0.0.0.0:80" is two sockets, not a clash over the IPv4 port.
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    // No Nagle: a response's last partial segment must not wait for the ACK of the
    // segments before it, which a client may delay 40 ms. Heads are held back with
    // MSG_MORE where a body follows, so no small segments result. Accepted connections
    // inherit it, so no connection pays a system call for it.
    s.set_nodelay(true)?;
    if let Some(n) = sndbuf {
        s.set_send_buffer_size(n)?;
    }
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s)
}

/// `USER`, `USER:GROUP` or `:GROUP` as the ids to give a file (`None`: unchanged).
fn owner_ids(spec: &str) -> io::Result<(Option<u32>, Option<u32>)> {
    let bad = |what: &str, name: &str| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("unix-owner: no {what} '{name}'"),
        )
    };
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let uid = match user {
        "" => None,
        u => Some(match u.parse::<u32>() {
            Ok(n) => n,
            Err(_) => {
                linerate_sys::user::lookup(u)?
                    .ok_or_else(|| bad("user", u))?
                    .uid
            }
        }),
    };
    let gid = match group {
        None | Some("") => None,
        Some(g) => Some(match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => linerate_sys::user::lookup_group(g)?.ok_or_else(|| bad("group", g))?,
        }),
    };
    Ok((uid, gid))
}

/// Makes way for a Unix socket at `path`: nothing there, or a socket file nobody
/// listens on any more (a server that did not remove it: removed now). A live socket,
/// or a file of another kind, is refused: never taken over, never deleted.
fn clear_stale(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket",
        ));
    }
    // Non-blocking, so a live server with a full queue (EAGAIN) cannot hold the start.
    let probe = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    probe.set_nonblocking(true)?;
    match probe.connect(&SockAddr::unix(path)?) {
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            tracing::info!("unix:{}: removing a stale socket file", path.display());
            std::fs::remove_file(path)
        }
        Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
        _ => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "a server is listening on it",
        )),
    }
}

/// A Unix listening socket at `path` with `file`'s mode and owner. They are set before
/// `listen`: until then a client's connect is refused, so none ever reaches a socket
/// with the umask's permissions.
fn unix_listener(path: &Path, file: &UnixFile, sndbuf: Option<usize>) -> io::Result<Socket> {
    use std::os::unix::fs::PermissionsExt;
    let (uid, gid) = match &file.owner {
        Some(spec) => owner_ids(spec)?,
        None => (None, None),
    };
    clear_stale(path)?;
    let s = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    s.set_nonblocking(true)?;
    if let Some(n) = sndbuf {
        s.set_send_buffer_size(n)?;
    }
    s.bind(&SockAddr::unix(path)?)?;
    let ready = (|| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(file.mode))?;
        if uid.is_some() || gid.is_some() {
            std::os::unix::fs::chown(path, uid, gid)?;
        }
        s.listen(1024)
    })();
    if let Err(e) = ready {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(s)
}

/// Binds every endpoint of `cfg`, reusing the sockets of `old` for the endpoints it
/// already holds (and adding sockets when there are more workers now); `fresh` hears
/// each endpoint bound anew.
pub(crate) fn bind_all(
    cfg: &Config,
    old: &[Bound],
    fresh: &mut dyn FnMut(&Endpoint),
) -> Result<Vec<Bound>, BindError> {
    let workers = cfg.workers.max(1);
    let mut out: Vec<Bound> = Vec::new();
    // Sockets passed to the process are its listeners for its life; `listen` is not
    // used then.
    for b in old.iter().filter(|b| b.passed) {
        out.push(Bound {
            // A passed socket serves what the list naming its address says.
            kind: if cfg.tls_listen.contains(&b.addr) {
                Kind::Tls
            } else if cfg.redirect_listen.contains(&b.addr) {
                Kind::Redirect
            } else if cfg.listen.contains(&b.addr) {
                Kind::Plain
            } else {
                b.passed_kind.unwrap_or(Kind::Plain)
            },
            passed_kind: b.passed_kind,
            asked: b.asked.clone(),
            addr: b.addr.clone(),
            sockets: {
                let mut sockets = b
                    .sockets
                    .iter()
                    .map(Socket::try_clone)
                    .collect::<io::Result<Vec<_>>>()?;
                // A group (SO_REUSEPORT, from the process before) grows to one socket
                // per worker; a single socket (systemd's) is shared as it is.
                if let (Endpoint::Ip(addr), true) = (&b.addr, sockets.len() > 1) {
                    add_group_sockets(&mut sockets, *addr, cfg.sndbuf, workers).map_err(
                        |source| BindError {
                            addr: Some(b.addr.clone()),
                            source,
                        },
                    )?;
                }
                sockets
            },
            passed: true,
            made: None,
            udp: Vec::new(),
            udp_base: 0,
        });
    }
    if !out.is_empty() {
        return Ok(out);
    }
    let plain = cfg.listen.iter().map(|e| (e, Kind::Plain));
    let tls = cfg.tls_listen.iter().map(|e| (e, Kind::Tls));
    let redirect = cfg.redirect_listen.iter().map(|e| (e, Kind::Redirect));
    for (asked, kind) in plain.chain(tls).chain(redirect) {
        // Port 0 may be asked for twice (plain and TLS): each is a socket of its own.
        let same = |b: &Bound| &b.asked == asked || &b.addr == asked;
        if out.iter().any(|b| b.kind == kind && same(b)) {
            continue;
        }
        let fail = |addr: &Endpoint| {
            let addr = Some(addr.clone());
            move |source| BindError { addr, source }
        };
        // The socket held before for this endpoint (one not yet taken by another), of
        // the same kind first: with port 0 asked for both, each keeps its own.
        let free = |b: &&Bound| same(b) && !out.iter().any(|o| o.addr == b.addr);
        let held = old
            .iter()
            .filter(free)
            .find(|b| b.kind == kind)
            .or_else(|| old.iter().find(free));
        if let Some(b) = held {
            let mut sockets = Vec::new();
            for s in &b.sockets {
                let s = s.try_clone()?;
                if let Some(n) = cfg.sndbuf {
                    s.set_send_buffer_size(n)?;
                }
                sockets.push(s);
            }
            if let Endpoint::Ip(addr) = b.addr {
                add_group_sockets(&mut sockets, addr, cfg.sndbuf, workers)
                    .map_err(fail(&b.addr))?;
            }
            out.push(Bound {
                asked: asked.clone(),
                addr: b.addr.clone(),
                sockets,
                passed: false,
                passed_kind: None,
                made: b.made.clone(),
                kind,
                udp: Vec::new(),
                udp_base: 0,
            });
            continue;
        }
        match asked {
            Endpoint::Unix(path) => {
                let s = unix_listener(path, &cfg.unix_file(), cfg.sndbuf).map_err(fail(asked))?;
                fresh(asked);
                out.push(Bound {
                    asked: asked.clone(),
                    addr: asked.clone(),
                    sockets: vec![s],
                    passed: false,
                    passed_kind: None,
                    made: Some(path.clone()),
                    kind,
                    udp: Vec::new(),
                    udp_base: 0,
                });
            }
            &Endpoint::Ip(ip) => {
                if ip.port() != 0 {
                    port_free(ip).map_err(fail(asked))?;
                }
                // Port 0 is resolved by the first socket and reused by the others.
                let first = any_port_listener(ip, kind, cfg).map_err(fail(asked))?;
                let addr = Endpoint::of(&first)?;
                let Endpoint::Ip(bound_ip) = addr else {
                    unreachable!("a TCP socket has an IP address");
                };
                let mut sockets = vec![first];
                add_group_sockets(&mut sockets, bound_ip, cfg.sndbuf, workers)
                    .map_err(fail(&addr))?;
                fresh(&addr);
                out.push(Bound {
                    asked: asked.clone(),
                    addr,
                    sockets,
                    passed: false,
                    passed_kind: None,
                    made: None,
                    kind,
                    udp: Vec::new(),
                    udp_base: 0,
                });
            }
        }
    }
    Ok(out)
}

/// The first listening socket of `ip`. For port 0 on an HTTPS address with HTTP/3 on,
/// one whose port number is free on UDP too (HTTP/3 takes the same number), tried up
/// to 32 times: the kernel picks a TCP port without a look at UDP's.
fn any_port_listener(ip: SocketAddr, kind: Kind, cfg: &Config) -> io::Result<Socket> {
    let first = tcp_listener(ip, cfg.sndbuf)?;
    if ip.port() != 0 || kind != Kind::Tls || cfg.http3 != crate::h3::Http3::On {
        return Ok(first);
    }
    let mut s = first;
    for _ in 0..32 {
        let port = s.local_addr()?.as_socket().map_or(0, |a| a.port());
        match udp_port_free(SocketAddr::new(ip.ip(), port)) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => s = tcp_listener(ip, cfg.sndbuf)?,
            _ => return Ok(s),
        }
    }
    Ok(s)
}

/// A UDP socket for QUIC at `addr`, in an `SO_REUSEPORT` group, non-blocking (IPv6
/// alone for an IPv6 address, as the TCP listeners).
fn udp_socket(addr: SocketAddr) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, None)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    // No SO_REUSEADDR: on UDP it would let a socket of anyone's that sets it share
    // the port with the group (and take its datagrams).
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// HTTP/3's UDP sockets for the HTTPS endpoints of `bound` (`--http3 on`): those held
/// for the same address before (`old`), grown to one per worker, else new ones on the
/// port the TCP sockets have (port 0 resolved by them). With `--http3 off`, none.
pub(crate) fn bind_quic(bound: &mut [Bound], old: &[Bound], cfg: &Config) -> Result<(), BindError> {
    if cfg.http3 != crate::h3::Http3::On {
        return Ok(());
    }
    let workers = cfg.workers.max(1);
    for b in bound.iter_mut().filter(|b| b.kind == Kind::Tls) {
        let Endpoint::Ip(addr) = b.addr else {
            continue;
        };
        // Said as UDP's: the TCP socket of the same address is bound already.
        let fail = |e: io::Error| BindError {
            addr: Some(b.addr.clone()),
            source: io::Error::new(e.kind(), format!("UDP (HTTP/3): {e}")),
        };
        let mut udp = Vec::new();
        let mut base = upgrade_base(addr);
        // The group held before (a reload's); sockets passed by a binary upgrade or
        // systemd are TCP alone, and leave the upgrade's base.
        if let Some(o) = old.iter().find(|o| o.addr == b.addr && !o.udp.is_empty()) {
            for s in &o.udp {
                udp.push(s.try_clone().map_err(fail)?);
            }
            base = o.udp_base;
        }
        // A group of our own starts only on a port nobody holds (after a binary
        // upgrade, the process before holds it, and its group is joined on purpose).
        if udp.is_empty() && base == 0 {
            udp_port_free(addr).map_err(fail)?;
        }
        while udp.len() < workers {
            udp.push(udp_socket(addr).map_err(fail)?);
        }
        route_quic(&b.addr, &udp, base);
        b.udp = udp;
        b.udp_base = base;
    }
    Ok(())
}

/// Whether this process handed its listening sockets to a new process (a binary
/// upgrade): that one binds UDP sockets of its own into each group after these (a
/// QUIC connection's state cannot follow a socket into another process) and attaches
/// the routing program that sends new connections to them; this one attaches none
/// again, or it would take them back.
static QUIC_HANDED_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Where, in each address's UDP group, the sockets of a process started by a binary
/// upgrade begin: after those of the process before, which serves on beside it (read
/// once from the environment it was started with).
static UPGRADE_BASES: std::sync::OnceLock<Vec<(SocketAddr, u8)>> = std::sync::OnceLock::new();

/// The environment variable that carries [`UPGRADE_BASES`] to the new process: each
/// address and the first index after the old process's sockets, as `ADDR=N,ADDR=N`.
pub(crate) const UPGRADE_QUIC_BASES: &str = "LINERATE_QUIC_BASES";

/// From now on this process attaches no routing program (its sockets were handed to a
/// new process, [`QUIC_HANDED_ON`]).
pub(crate) fn quic_handed_on() {
    QUIC_HANDED_ON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// What a binary upgrade tells the new process of the UDP groups of `bound`: the value
/// of [`UPGRADE_QUIC_BASES`].
pub(crate) fn quic_bases(bound: &[Bound]) -> String {
    bound
        .iter()
        .filter(|b| !b.udp.is_empty())
        .filter_map(|b| match b.addr {
            Endpoint::Ip(a) => Some(format!("{a}={}", usize::from(b.udp_base) + b.udp.len())),
            Endpoint::Unix(_) => None,
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads [`UPGRADE_QUIC_BASES`] as a process started by a binary upgrade (entries that
/// do not parse are left out: their groups are routed from index 0, and what the
/// program then misplaces is handed on or lost as with the kernel's hash).
pub(crate) fn take_upgrade_bases(value: &str) {
    let bases = value
        .split(',')
        .filter_map(|e| {
            let (a, n) = e.rsplit_once('=')?;
            Some((a.parse().ok()?, n.parse::<usize>().ok()?.min(255) as u8))
        })
        .collect();
    let _ = UPGRADE_BASES.set(bases);
}

fn upgrade_base(addr: SocketAddr) -> u8 {
    UPGRADE_BASES
        .get()
        .and_then(|b| b.iter().find(|(a, _)| *a == addr))
        .map_or(0, |&(_, n)| n)
}

/// Has the kernel send each QUIC datagram of address `addr`'s group to the socket its
/// connection ID names, and each new connection to one of `udp` (this process's
/// sockets, from index `base` in the group: they are bound in this order, and kept in
/// it across reloads). A kernel that refuses the program leaves the hash, said in one
/// line, and the endpoints hand on what they read of another's connections (counted
/// as misrouted). The group of a process that handed its sockets on keeps the new
/// process's program.
fn route_quic(addr: &Endpoint, udp: &[Socket], base: u8) {
    use std::os::fd::AsFd;
    let Some(first) = udp.first() else {
        return;
    };
    if QUIC_HANDED_ON.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let count = u8::try_from(udp.len()).unwrap_or(u8::MAX);
    let program = linerate_sys::steer::quic_program(crate::quic::CID_LEN as u8, base, count);
    if let Err(e) = linerate_sys::steer::attach(first.as_fd(), &program) {
        tracing::warn!("{addr}: HTTP/3: routing by connection ID: {e}; workers hand datagrams on");
    }
}

/// Whether no one holds `ip`'s port: our listeners share their port by SO_REUSEPORT,
/// and so could another server's, so a socket bound without it (and let go at once)
/// fails if anyone holds the port at all. A start asks this first; so does
/// `serve --check`.
pub(crate) fn port_free(ip: SocketAddr) -> io::Result<()> {
    probe_port(ip, Type::STREAM)
}

/// Whether no one holds `ip`'s UDP port (HTTP/3's sockets share it by SO_REUSEPORT
/// among themselves only, as the TCP listeners do).
pub(crate) fn udp_port_free(ip: SocketAddr) -> io::Result<()> {
    probe_port(ip, Type::DGRAM)
}

/// Binds a socket of `ty` to `ip` without `SO_REUSEPORT` and lets it go. A TCP probe
/// takes `SO_REUSEADDR` (a port left with connections in TIME_WAIT is free); a UDP one
/// does not, since on UDP that option lets any number of sockets that set it share a
/// port, and the probe would pass beside another server's sockets.
fn probe_port(ip: SocketAddr, ty: Type) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(ip), ty, None)?;
    if ip.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.set_reuse_address(ty == Type::STREAM)?;
    probe.bind(&ip.into())
}

/// Sends each IP address's new connections to the worker pinned to the CPU that
/// processed their SYN (`--steer`), or gives the choice back to the kernel's hash.
/// Socket j of an address is worker j mod `workers`'s ([`hand_out`]), and worker w
/// runs on `cpus[w mod len]`, so CPU c's connections go to the first socket whose
/// worker runs on c. Sockets passed by systemd (or by the process before a binary
/// upgrade) are shared by every worker: nothing to steer. A group that refuses the
/// program keeps the hash, said in one line.
pub(crate) fn steer(bound: &[Bound], on: bool, workers: usize, cpus: &[usize]) {
    use std::os::fd::AsFd;
    let workers = workers.max(1);
    for b in bound {
        let (Endpoint::Ip(addr), Some(first)) = (&b.addr, b.sockets.first()) else {
            continue;
        };
        // Passed sockets are shared by every worker: nothing to steer, and a program
        // left on them (by the process before a binary upgrade) is taken off.
        if !on || b.passed {
            linerate_sys::steer::take_off(first.as_fd());
            continue;
        }
        let mut routes: Vec<(u32, u32)> = Vec::new();
        for j in 0..b.sockets.len() {
            let cpu = cpus[(j % workers) % cpus.len().max(1)] as u32;
            if !routes.iter().any(|&(c, _)| c == cpu) {
                routes.push((cpu, j as u32));
            }
        }
        let attached = match linerate_sys::steer::cpu_program(&routes) {
            Some(p) => linerate_sys::steer::attach(first.as_fd(), &p),
            None => Err(io::Error::other("more CPUs than one program can name")),
        };
        if let Err(e) = attached {
            tracing::warn!("{addr}: --steer: {e}; the kernel's hash picks the worker");
        }
    }
}

/// Adds sockets to `addr`'s `SO_REUSEPORT` group until there is one per worker.
fn add_group_sockets(
    sockets: &mut Vec<Socket>,
    addr: SocketAddr,
    sndbuf: Option<usize>,
    workers: usize,
) -> io::Result<()> {
    while sockets.len() < workers {
        match tcp_listener(addr, sndbuf) {
            Ok(s) => sockets.push(s),
            // A reload after --user cannot join a group bound as root (the kernel
            // wants the same owner): the workers share the sockets there are.
            Err(e) if !sockets.is_empty() => {
                tracing::warn!(
                    "{addr}: {} socket(s) for {workers} workers, which share them: {e}",
                    sockets.len()
                );
                break;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Each worker's listeners: socket j of every IP endpoint goes to worker j mod
/// `workers`, so a socket kept from more workers than there are now is still accepted
/// from; a shared socket goes to every worker. HTTPS endpoints serve with `tls`;
/// redirect endpoints send their clients to the first HTTPS endpoint's port.
pub(crate) fn hand_out(
    bound: &[Bound],
    cfg: &Config,
    tls: Option<&Arc<rustls::ServerConfig>>,
) -> io::Result<Vec<Vec<Listener>>> {
    let workers = cfg.workers.max(1);
    let mut per: Vec<Vec<Listener>> = (0..workers).map(|_| Vec::new()).collect();
    for b in bound {
        let unix = matches!(b.addr, Endpoint::Unix(_));
        let tls = if b.kind == Kind::Tls {
            tls.cloned()
        } else {
            None
        };
        let redirect = match b.kind {
            Kind::Redirect => Some(https_port(bound).ok_or_else(|| {
                io::Error::other("a redirect listener needs an HTTPS address with a port")
            })?),
            _ => None,
        };
        let proxy = cfg
            .proxy_protocol
            .iter()
            .any(|e| e == &b.addr || e == &b.asked);
        let listener = |s: &Socket| -> io::Result<Listener> {
            Ok(Listener {
                sock: s.try_clone()?,
                unix,
                tls: tls.clone(),
                redirect,
                proxy,
                quic: Vec::new(),
            })
        };
        if b.shared() {
            for w in per.iter_mut() {
                for s in &b.sockets {
                    w.push(listener(s)?);
                }
            }
            continue;
        }
        for (j, s) in b.sockets.iter().enumerate() {
            per[j % workers].push(listener(s)?);
        }
        // HTTP/3's sockets go with the worker's listener of the same address.
        for (j, s) in b.udp.iter().enumerate() {
            if let Some(l) = per[j % workers].last_mut().filter(|l| l.tls.is_some()) {
                // Past 255 sockets the index does not fit an ID's byte: 255, and the
                // endpoint that reads such a datagram hands it on (counted).
                let index = usize::from(b.udp_base) + j;
                l.quic
                    .push((u8::try_from(index).unwrap_or(u8::MAX), s.try_clone()?));
            }
        }
    }
    Ok(per)
}

/// The port of the first HTTPS endpoint bound.
fn https_port(bound: &[Bound]) -> Option<u16> {
    bound
        .iter()
        .find(|b| b.kind == Kind::Tls)
        .and_then(|b| match &b.addr {
            Endpoint::Ip(a) => Some(a.port()),
            Endpoint::Unix(_) => None,
        })
}

/// What the service manager shows: where, and with how many workers.
pub(crate) fn status_line(bound: &[Bound], workers: usize) -> String {
    let mut addrs: Vec<String> = bound.iter().map(|b| b.addr.to_string()).collect();
    addrs.dedup();
    format!("serving on {} with {workers} workers", addrs.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("linerate-listen-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn endpoints_and_peers_print_as_nginx_writes_them() {
        let ip = Endpoint::Ip("127.0.0.1:80".parse().unwrap());
        assert_eq!(ip.to_string(), "127.0.0.1:80");
        assert_eq!(
            Endpoint::Unix("/run/l.sock".into()).to_string(),
            "unix:/run/l.sock"
        );
        let p = Peer::Ip("[::1]:4000".parse().unwrap());
        assert_eq!(
            (p.remote(), p.to_string()),
            ("::1".into(), "[::1]:4000".into())
        );
        assert_eq!(
            (Peer::Unix.remote(), Peer::Unix.ip()),
            ("unix:".into(), None)
        );
    }

    #[test]
    fn a_stale_socket_is_replaced_a_live_one_and_other_files_refused() {
        let d = temp_dir("stale");
        let path = d.join("s.sock");
        let file = UnixFile::default();
        let live = unix_listener(&path, &file, None).unwrap();
        let e = unix_listener(&path, &file, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        // Closed without removing its file: stale.
        drop(live);
        assert!(path.exists());
        let again = unix_listener(&path, &file, None).unwrap();
        assert_eq!(Endpoint::of(&again).unwrap(), Endpoint::Unix(path.clone()));
        drop(again);
        let plain = d.join("plain");
        std::fs::write(&plain, b"keep me").unwrap();
        let e = unix_listener(&plain, &file, None).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&plain).unwrap(), b"keep me");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_mode_is_set_before_anyone_can_connect() {
        use std::os::unix::fs::PermissionsExt;
        let d = temp_dir("mode");
        let path = d.join("m.sock");
        let file = UnixFile {
            mode: 0o600,
            owner: None,
        };
        let _s = unix_listener(&path, &file, None).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn owners_are_names_or_numbers() {
        assert_eq!(owner_ids("root").unwrap(), (Some(0), None));
        assert_eq!(owner_ids("root:root").unwrap(), (Some(0), Some(0)));
        assert_eq!(owner_ids(":0").unwrap(), (None, Some(0)));
        assert_eq!(owner_ids("12:34").unwrap(), (Some(12), Some(34)));
        let e = owner_ids("no-such-user-linerate").unwrap_err();
        assert!(
            e.to_string().contains("no user 'no-such-user-linerate'"),
            "{e}"
        );
        let e = owner_ids("root:no-such-group-linerate").unwrap_err();
        assert!(e.to_string().contains("no group"), "{e}");
    }
}
