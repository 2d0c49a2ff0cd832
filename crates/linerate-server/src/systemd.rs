//! systemd: the state the service manager is told (`sd_notify`, for `Type=notify`), and
//! listening sockets it passes (socket activation), through crates made for them
//! (`sd-notify`, `listenfd`). Outside systemd (`NOTIFY_SOCKET`, `LISTEN_FDS` unset)
//! both do nothing.

use crate::listen::Kind;
use sd_notify::NotifyState;
use socket2::Socket;

/// Tells the service manager `states`; a failure is logged, never fatal.
fn notify(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!("sd_notify: {e}");
    }
}

/// `READY=1` and a status line.
pub fn ready(status: &str) {
    notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// `RELOADING=1` with the monotonic time systemd asks of a reload's start.
pub fn reloading() {
    match NotifyState::monotonic_usec_now() {
        Ok(now) => notify(&[NotifyState::Reloading, now]),
        Err(_) => notify(&[NotifyState::Reloading]),
    }
}

/// `STOPPING=1`.
pub fn stopping() {
    notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// The listening sockets passed to this process: by systemd (`LISTEN_FDS` for this
/// process: TCP sockets, or Unix stream sockets), or by the process before it at a
/// binary upgrade. Made non-blocking, and TCP ones given `TCP_NODELAY`, as the
/// server's own are; none outside socket activation. A passed descriptor that is not a
/// listening stream socket is an error: the unit file and the server disagree.
/// A passed socket comes with what it served in the process before (a binary
/// upgrade's: an HTTPS socket bound to port 0 is named by no `tls-listen` address);
/// systemd's come with none.
pub fn activated_listeners() -> std::io::Result<Vec<(Socket, Option<Kind>)>> {
    let made_ready = |s: Socket| -> std::io::Result<Socket> {
        s.set_nonblocking(true)?;
        if s.local_addr()?.as_socket().is_some() {
            s.set_nodelay(true)?;
        }
        Ok(s)
    };
    if let Some(list) = std::env::var_os(UPGRADE_FDS) {
        // Handed over by the process before this one (SIGUSR2), with what each served
        // (none from a process before the kinds were passed).
        let kinds = std::env::var(UPGRADE_KINDS).unwrap_or_default();
        if let Ok(bases) = std::env::var(crate::listen::UPGRADE_QUIC_BASES) {
            crate::listen::take_upgrade_bases(&bases);
        }
        std::env::remove_var(crate::listen::UPGRADE_QUIC_BASES);
        std::env::remove_var(UPGRADE_FDS);
        std::env::remove_var(UPGRADE_KINDS);
        let mut kinds = kinds.split(',');
        return list
            .to_string_lossy()
            .split(',')
            .map(|n| {
                let kind = kinds.next().unwrap_or("");
                let fd: i32 = n.parse().map_err(|_| {
                    std::io::Error::other(format!("{UPGRADE_FDS}: '{n}' is not a descriptor"))
                })?;
                let kind = match kind {
                    "tls" => Some(Kind::Tls),
                    "redirect" => Some(Kind::Redirect),
                    "plain" => Some(Kind::Plain),
                    _ => None,
                };
                let s = made_ready(Socket::from(linerate_sys::fs::take_inherited_listener(fd)?))?;
                Ok((s, kind))
            })
            .collect();
    }
    let mut fds = listenfd::ListenFd::from_env();
    let mut out = Vec::new();
    for i in 0..fds.len() {
        // A descriptor of the wrong kind is left in place by each try.
        let s = match fds.take_tcp_listener(i) {
            Ok(l) => l.map(Socket::from),
            Err(_) => match fds.take_unix_listener(i) {
                Ok(l) => l.map(|l| Socket::from(std::os::fd::OwnedFd::from(l))),
                Err(_) => None,
            },
        };
        let Some(s) = s else {
            return Err(std::io::Error::other(format!(
                "socket activation: descriptor {} is not a listening stream socket (TCP or Unix)",
                3 + i
            )));
        };
        out.push((made_ready(s)?, None));
    }
    Ok(out)
}

/// The environment variable that names the listening descriptors a binary upgrade
/// hands to the new process.
const UPGRADE_FDS: &str = "LINERATE_LISTEN_FDS";

/// What each of those descriptors served (`plain`, `tls`, `redirect`), in their order.
const UPGRADE_KINDS: &str = "LINERATE_LISTEN_KINDS";

/// SIGUSR2: starts this program again (`argv[0]`, so a binary replaced on disk is the
/// one started) with the same arguments, handing it `sockets` (they stay open here
/// too). Both serve until the operator stops this one; the new one finds the sockets
/// as [`activated_listeners`], and where its UDP sockets begin in each group in
/// `quic_bases` ([`crate::listen::quic_bases`]). Returns the new process.
pub fn upgrade(
    sockets: &[(&Socket, Kind)],
    quic_bases: &str,
) -> std::io::Result<std::process::Child> {
    use std::os::fd::AsFd;
    use std::os::fd::AsRawFd;
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let program = if std::path::Path::new(&argv0).components().count() > 1 {
        std::path::PathBuf::from(argv0)
    } else {
        std::env::current_exe()?
    };
    let fds: Vec<String> = sockets
        .iter()
        .map(|(s, _)| s.as_raw_fd().to_string())
        .collect();
    // Apart from the descriptors, so a binary from before the kinds were passed can
    // still be started this way (a rollback) and read the descriptors.
    let kinds: Vec<&str> = sockets
        .iter()
        .map(|(_, kind)| match kind {
            Kind::Plain => "plain",
            Kind::Tls => "tls",
            Kind::Redirect => "redirect",
        })
        .collect();
    for (s, _) in sockets {
        linerate_sys::fs::set_inherited(s.as_fd(), true)?;
    }
    let child = std::process::Command::new(&program)
        .args(args)
        .env(UPGRADE_FDS, fds.join(","))
        .env(UPGRADE_KINDS, kinds.join(","))
        .env(crate::listen::UPGRADE_QUIC_BASES, quic_bases)
        // The service manager's sockets and notifications are this process's.
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDNAMES")
        .env_remove("NOTIFY_SOCKET")
        .stdin(std::process::Stdio::null())
        .spawn();
    for (s, _) in sockets {
        linerate_sys::fs::set_inherited(s.as_fd(), false)?;
    }
    child
}
