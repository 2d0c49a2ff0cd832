//! What several integration tests share: the real `linerate serve` on a free port.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

/// `linerate serve ROOT --listen 127.0.0.1:0 --workers 1 --access-log off EXTRA...`,
/// stopped with SIGTERM when dropped.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Server {
    pub fn start(root: &std::path::Path, extra: &[&str]) -> Server {
        let mut args = vec![
            "serve",
            root.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--access-log",
            "off",
        ];
        args.extend(extra);
        Server::spawn(&args)
    }

    /// `linerate ARGS...`, which must announce one address (`listening on ADDR`).
    pub fn spawn(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .expect("announces its address")
            .to_string();
        Server { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Runs the binary with `args`; (exit code, stdout, stderr).
pub fn linerate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sends `req` on a new connection and reads until the server closes.
pub fn exchange(addr: &str, req: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

/// The first response in `buf`, framed by its Content-Length (none for a response
/// without a body: `with_body` false): (head, body, what follows).
pub fn next_response(buf: &[u8], with_body: bool) -> (String, &[u8], &[u8]) {
    let i = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&buf[..i]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    let len = if with_body { len } else { 0 };
    (head, &buf[i..i + len], &buf[i + len..])
}
