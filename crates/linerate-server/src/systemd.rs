//! systemd: the state the service manager is told (`sd_notify`, for `Type=notify`), and
//! listening sockets it passes (socket activation), through crates made for them
//! (`sd-notify`, `listenfd`). Outside systemd (`NOTIFY_SOCKET`, `LISTEN_FDS` unset)
//! both do nothing.

use std::net::TcpListener;

use sd_notify::NotifyState;

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

/// The TCP listening sockets systemd passed (`LISTEN_FDS` for this process), made
/// non-blocking and with `TCP_NODELAY` as the server's own are; none outside socket
/// activation. A passed descriptor that is not a TCP listener is an error: the unit
/// file and the server disagree.
pub fn activated_listeners() -> std::io::Result<Vec<TcpListener>> {
    let mut fds = listenfd::ListenFd::from_env();
    let mut out = Vec::new();
    for i in 0..fds.len() {
        match fds.take_tcp_listener(i)? {
            Some(l) => {
                l.set_nonblocking(true)?;
                socket2::SockRef::from(&l).set_nodelay(true)?;
                out.push(l);
            }
            None => {
                return Err(std::io::Error::other(format!(
                    "socket activation: descriptor {} is not a TCP listening socket",
                    3 + i
                )))
            }
        }
    }
    Ok(out)
}
