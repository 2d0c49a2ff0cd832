//! The binary under test and the `linerate serve` process.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::client::Conn;

/// The `linerate` binary, by its path (`env!("CARGO_BIN_EXE_linerate")` in the test
/// file: only the test crate's build knows it).
#[derive(Clone, Copy, Debug)]
pub struct Linerate {
    bin: &'static str,
}

impl Linerate {
    pub const fn new(bin: &'static str) -> Linerate {
        Linerate { bin }
    }

    /// The binary's path.
    pub fn path(&self) -> &'static str {
        self.bin
    }

    /// `linerate`, to be given arguments.
    pub fn command(&self) -> Command {
        Command::new(self.bin)
    }

    /// `linerate ARGS` run to its end, standard input empty.
    pub fn output(&self, args: &[&str]) -> Output {
        self.command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("linerate runs")
    }

    /// `linerate ARGS` run to its end: (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.output(args);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `linerate serve ROOT --listen 127.0.0.1:0 --workers 1 --access-log off EXTRA...`
    /// (without `--workers 1` or `--access-log off` when `extra` names its own).
    pub fn start(&self, root: &Path, extra: &[&str]) -> Server {
        self.start_under(&[], root, extra)
    }

    /// [`Linerate::start`] with `--transmit TRANSMIT` before `extra`; `STRATEGY@DRIVER`
    /// adds `--driver DRIVER` (as `per_strategy!` names the io_uring case).
    pub fn serve(&self, root: &Path, transmit: &str, extra: &[&str]) -> Server {
        self.start(root, &[&crate::variant_args(transmit)[..], extra].concat())
    }

    /// [`Linerate::start`] with the command run by `wrapper` (`prlimit ...`,
    /// `setpriv ...`).
    pub fn start_under(&self, wrapper: &[&str], root: &Path, extra: &[&str]) -> Server {
        let root = root.to_str().expect("a UTF-8 root");
        let mut args = vec!["serve", root, "--listen", "127.0.0.1:0"];
        if !extra.contains(&"--workers") {
            args.extend(["--workers", "1"]);
        }
        if !extra.contains(&"--access-log") {
            args.extend(["--access-log", "off"]);
        }
        args.extend(extra);
        self.launch(wrapper, None, &args)
    }

    /// `linerate serve [ROOT] --config CONF --listen 127.0.0.1:0 EXTRA...` (the flag's
    /// address over the file's).
    pub fn serve_config(&self, root: Option<&Path>, conf: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["serve"];
        if let Some(r) = root {
            args.push(r.to_str().expect("a UTF-8 root"));
        }
        let conf = conf.to_str().expect("a UTF-8 path");
        args.extend(["--config", conf, "--listen", "127.0.0.1:0"]);
        args.extend(extra);
        self.launch(&[], None, &args)
    }

    /// [`Linerate::start`] with HTTPS beside the plain address: `--tls-listen
    /// 127.0.0.1:0` with a fresh self-signed certificate written in `certs`
    /// ([`crate::tls_files`]); the server and the certificate's path.
    pub fn start_tls(&self, root: &Path, certs: &Path, extra: &[&str]) -> (Server, PathBuf) {
        let (cert, key) = crate::tls_files(certs, "server");
        let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
        let tls = [
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            c,
            "--tls-key",
            k,
        ];
        (self.start(root, &[&tls[..], extra].concat()), cert)
    }

    /// `linerate ARGS...`, which must announce its address (`listening on ADDR`).
    pub fn spawn(&self, args: &[&str]) -> Server {
        self.launch(&[], None, args)
    }

    /// [`Linerate::spawn`] in the working directory `dir`.
    pub fn spawn_in(&self, dir: &Path, args: &[&str]) -> Server {
        self.launch(&[], Some(dir), args)
    }

    /// [`Linerate::start`] in a process that cannot set up io_uring (a seccomp filter
    /// answers `io_uring_setup` with `EPERM`, as containers' default profiles do).
    pub fn start_without_io_uring(&self, root: &Path, extra: &[&str]) -> Server {
        let root = root.to_str().expect("a UTF-8 root");
        let mut cmd = self.command();
        linerate_sys::seccomp::refuse_io_uring(&mut cmd);
        let args = [&["serve", root, "--listen", "127.0.0.1:0"], extra].concat();
        self.launch_cmd(cmd, &args)
    }

    /// [`Linerate::run`] in a process that cannot set up io_uring.
    pub fn run_without_io_uring(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = self.command();
        linerate_sys::seccomp::refuse_io_uring(&mut cmd);
        let out = cmd
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("linerate runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn launch(&self, wrapper: &[&str], dir: Option<&Path>, args: &[&str]) -> Server {
        let mut cmd = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut c = Command::new(program);
                c.args(wrapper_args).arg(self.bin);
                c
            }
            None => self.command(),
        };
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        self.launch_cmd(cmd, args)
    }

    fn launch_cmd(&self, mut cmd: Command, args: &[&str]) -> Server {
        let mut child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("linerate starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err_pipe = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                match err_pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
                }
            }
        });
        let mut out = BufReader::new(child.stdout.take().expect("stdout piped"));
        let mut first = String::new();
        out.read_line(&mut first).expect("reads stdout");
        let addr: SocketAddr = match first.trim_end().strip_prefix("listening on ") {
            Some(a) => a.parse().expect("announces a socket address"),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                thread::sleep(Duration::from_millis(100));
                let err = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
                panic!("first stdout line {first:?} (args {args:?}); stderr:\n{err}");
            }
        };
        // Keep draining stdout so the server never writes into a full pipe; the
        // addresses it announces later are kept.
        let announced = Arc::new(Mutex::new(vec![first.trim_end().to_string()]));
        let lines = Arc::clone(&announced);
        thread::spawn(move || {
            let mut line = String::new();
            while out.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line.starts_with("listening on ") {
                    lines.lock().unwrap().push(line.trim_end().to_string());
                }
                line.clear();
            }
        });
        Server {
            child: Some(child),
            addr,
            stderr,
            announced,
        }
    }

    /// Whether this test process can start the binary as user nobody (root, `setpriv`,
    /// and a binary nobody may reach: a checkout under /root is not).
    pub fn can_run_as_nobody(&self) -> bool {
        crate::proc::is_root()
            && Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(self.bin)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
    }
}

/// A running `linerate serve`, stopped with SIGTERM when dropped; what it wrote to
/// standard error is printed if the test fails.
pub struct Server {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Its `listening on` lines so far.
    announced: Arc<Mutex<Vec<String>>>,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server not yet reaped").id()
    }

    /// The first HTTPS address it announced (`listening on ADDR (https)`), waiting up
    /// to 5 s for it.
    pub fn tls_addr(&self) -> SocketAddr {
        self.announced(" (https)")
    }

    /// The first address it announced with `note` after it (`listening on ADDR NOTE`),
    /// waiting up to 5 s for it.
    pub fn announced(&self, note: &str) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let found = self.announced.lock().unwrap().iter().find_map(|l| {
                l.strip_prefix("listening on ")?
                    .strip_suffix(note)?
                    .parse()
                    .ok()
            });
            if let Some(a) = found {
                return a;
            }
            assert!(
                Instant::now() < deadline,
                "no address announced with {note:?}; stderr:\n{}",
                self.stderr_text()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new client connection.
    pub fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    pub fn sigterm(&self) {
        self.signal("TERM");
    }

    /// `kill -NAME PID`.
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill -{name} {} failed", self.pid());
    }

    /// What the server wrote to standard error so far (the error log by default).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits up to 5 s for standard error to hold `needle`; returns all of it.
    pub fn wait_stderr(&self, needle: &str) -> String {
        self.wait_stderr_for(needle, Duration::from_secs(5))
    }

    /// [`Server::wait_stderr`], waiting up to `most`.
    pub fn wait_stderr_for(&self, needle: &str, most: Duration) -> String {
        let deadline = Instant::now() + most;
        loop {
            let text = self.stderr_text();
            if text.contains(needle) || Instant::now() > deadline {
                return text;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to 5 s for a whole line of standard error that starts with `prefix`;
    /// the line, without its newline.
    pub fn stderr_line(&self, prefix: &str) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = self.stderr_text();
            let line = text
                .split_inclusive('\n')
                .find(|l| l.starts_with(prefix) && l.ends_with('\n'));
            if let Some(l) = line {
                return Some(l.trim_end().to_string());
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            let status = self
                .child
                .as_mut()
                .expect("server not yet reaped")
                .try_wait()
                .expect("try_wait");
            if let Some(st) = status {
                self.child = None;
                return Some(st);
            }
            if start.elapsed() > limit {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process has not exited.
    pub fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().map(Child::id) {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            let start = Instant::now();
            while let Some(c) = self.child.as_mut() {
                match c.try_wait() {
                    Ok(None) if start.elapsed() < Duration::from_secs(5) => {
                        thread::sleep(Duration::from_millis(20))
                    }
                    Ok(None) | Err(_) => {
                        let _ = c.kill();
                        let _ = c.wait();
                        self.child = None;
                    }
                    Ok(Some(_)) => self.child = None,
                }
            }
        }
        if thread::panicking() {
            eprintln!(
                "linerate serve stderr:\n{}",
                String::from_utf8_lossy(&self.stderr.lock().unwrap())
            );
        }
    }
}
