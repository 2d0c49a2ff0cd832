//! `linerate sink`: accepts connections and discards what arrives (netserver's role).
//!
//! When a sender half-closes, the sink answers with one JSON line, a [`SinkReport`]
//! (bytes, its own CPU time for the connection, its receive buffer), and closes. That is
//! how `linerate bench stream` learns the receiver's CPU without a control connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::{Domain, Socket, Type};

use crate::StopFlag;

/// How arriving bytes are thrown away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Discard {
    /// `read` into a user buffer.
    Read,
    /// `splice` socket → pipe → `/dev/null`: no copy to user memory.
    Splice,
}

impl FromStr for Discard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" => Ok(Discard::Read),
            "splice" => Ok(Discard::Splice),
            _ => Err(format!(
                "unknown discard mode '{s}' (expected read or splice)"
            )),
        }
    }
}

/// Sink settings.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// How to discard.
    pub discard: Discard,
    /// `SO_RCVBUF` for accepted connections (set on the listener so window scaling fits).
    pub rcvbuf: Option<usize>,
    /// Serve this many connections, then exit.
    pub max_connections: Option<u64>,
}

/// What the sink saw on one connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SinkReport {
    /// Peer address.
    pub peer: String,
    /// Bytes received.
    pub bytes: u64,
    /// From accept to end of stream.
    pub elapsed_seconds: f64,
    /// The sink thread's user CPU for the connection.
    pub cpu_user_seconds: f64,
    /// The sink thread's system CPU for the connection.
    pub cpu_system_seconds: f64,
    /// `SO_RCVBUF` of the connection as the kernel reports it.
    pub rcvbuf_bytes: usize,
    /// The discard mode.
    pub discard: Discard,
}

/// A bound sink.
pub struct Sink {
    listener: TcpListener,
    config: SinkConfig,
}

impl Sink {
    /// Binds and listens.
    pub fn bind(config: SinkConfig) -> io::Result<Sink> {
        let sock = Socket::new(Domain::for_address(config.listen), Type::STREAM, None)?;
        sock.set_reuse_address(true)?;
        if let Some(n) = config.rcvbuf {
            sock.set_recv_buffer_size(n)?;
        }
        sock.bind(&config.listen.into())?;
        sock.listen(128)?;
        Ok(Sink {
            listener: sock.into(),
            config,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is set or the connection budget is spent, calling `report`
    /// for each finished connection. Connections are served one thread each.
    pub fn run(self, stop: &StopFlag, report: &(dyn Fn(&SinkReport) + Sync)) -> io::Result<()> {
        self.listener.set_nonblocking(true)?;
        let mut served = 0u64;
        std::thread::scope(|scope| -> io::Result<()> {
            let mut handles = Vec::new();
            while !crate::stopped(stop) && self.config.max_connections.is_none_or(|m| served < m) {
                let ev = linerate_sys::net::poll_one(
                    self.listener.as_fd(),
                    linerate_sys::net::POLLIN,
                    200,
                )?;
                if ev == 0 {
                    continue;
                }
                let (conn, peer) = match self.listener.accept() {
                    Ok(c) => c,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                };
                served += 1;
                let discard = self.config.discard;
                handles.push(scope.spawn(move || match serve(conn, peer, discard, stop) {
                    Ok(r) => report(&r),
                    Err(e) => eprintln!("linerate sink: {peer}: {e}"),
                }));
            }
            for h in handles {
                let _ = h.join();
            }
            Ok(())
        })
    }
}

fn serve(
    mut conn: TcpStream,
    peer: SocketAddr,
    discard: Discard,
    stop: &StopFlag,
) -> io::Result<SinkReport> {
    let start = Instant::now();
    let cpu0 = linerate_sys::cpu::thread_cpu()?;
    conn.set_nonblocking(false)?;
    // Wake up now and then to notice a stop request.
    conn.set_read_timeout(Some(Duration::from_millis(500)))?;
    let rcvbuf = linerate_sys::net::getsockopt_int(
        conn.as_fd(),
        linerate_sys::net::SOL_SOCKET,
        linerate_sys::net::SO_RCVBUF,
    )?;
    let bytes = match discard {
        Discard::Read => discard_read(&mut conn, stop)?,
        Discard::Splice => discard_splice(&conn, stop)?,
    };
    let elapsed = start.elapsed();
    let cpu = linerate_sys::cpu::thread_cpu()?.since(&cpu0);
    let report = SinkReport {
        peer: peer.to_string(),
        bytes,
        elapsed_seconds: elapsed.as_secs_f64(),
        cpu_user_seconds: cpu.user.as_secs_f64(),
        cpu_system_seconds: cpu.system.as_secs_f64(),
        rcvbuf_bytes: rcvbuf.max(0) as usize,
        discard,
    };
    let mut line = serde_json::to_string(&report).map_err(io::Error::other)?;
    line.push('\n');
    // The sender may have closed both ways; then nobody wants the report.
    let _ = conn.write_all(line.as_bytes());
    let _ = conn.shutdown(std::net::Shutdown::Both);
    Ok(report)
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn discard_read(conn: &mut TcpStream, stop: &StopFlag) -> io::Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if crate::stopped(stop) {
                    return Ok(total);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

fn discard_splice(conn: &TcpStream, stop: &StopFlag) -> io::Result<u64> {
    use linerate_sys::pipe;
    let (r, w) = pipe::pipe()?;
    let _ = pipe::set_pipe_size(w.as_fd(), 1 << 20);
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let mut total = 0u64;
    loop {
        // The socket side blocks (up to the read timeout); the pipe is drained each time.
        match pipe::splice(
            conn.as_fd(),
            None,
            w.as_fd(),
            None,
            1 << 20,
            pipe::SPLICE_F_MOVE,
        ) {
            Ok(0) => return Ok(total),
            Ok(n) => {
                total += n as u64;
                let mut left = n;
                while left > 0 {
                    match pipe::splice(
                        r.as_fd(),
                        None,
                        null.as_fd(),
                        None,
                        left,
                        pipe::SPLICE_F_MOVE,
                    ) {
                        Ok(m) => left -= m,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => {
                if crate::stopped(stop) {
                    return Ok(total);
                }
            }
            Err(e) => return Err(e),
        }
    }
}
