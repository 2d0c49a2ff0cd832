//! `linerate serve` under systemd: the states it reports (`sd_notify`, read from a
//! datagram socket the test owns, as the service manager's would be) and listening
//! sockets passed by socket activation (`systemd-socket-activate`, Debian's `systemd`).

use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use linerate_testkit::{docroot, fetch, installed, put, Linerate};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// Reads the address from a child's "listening on ADDR" line.
fn listening(child: &mut Child) -> std::net::SocketAddr {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line {line:?}"))
        .parse()
        .unwrap()
}

fn signal(child: &Child, name: &str) {
    Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
}

/// The value of one series in a metrics scrape.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} missing:\n{text}"))
        .parse()
        .unwrap()
}

/// Each line a child writes on `r`, as it comes (read for the child's whole life: a
/// process it starts writes to the same pipe).
fn piped_lines(r: Box<dyn std::io::Read + Send>) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// The next line of `rx` holding `what` (10 s at most).
fn wait_for(rx: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no line with {what:?}"));
        if l.contains(what) {
            return l;
        }
    }
}

/// The new process's PID, from the line "SIGUSR2: started the binary again as PID N".
fn upgraded_pid(err: &std::sync::mpsc::Receiver<String>) -> u32 {
    let started = wait_for(err, "SIGUSR2: started the binary again as PID ");
    started
        .split("PID ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{started}"))
}

/// Stops the process `pid` (SIGTERM) and waits until it is gone: reparented when the
/// process that started it ended, it is gone or a zombie nobody reaps here.
fn stop_and_wait_gone(pid: u32) {
    Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if state.is_empty() || state.contains("State:\tZ") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new process did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The next datagram on `sock`, as text.
fn message(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .expect("a notification within the timeout");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// With `NOTIFY_SOCKET` set, the server says `READY=1` once it serves, `RELOADING=1`
/// with `MONOTONIC_USEC` at a SIGHUP and `READY=1` when the reload is done, and
/// `STOPPING=1` at SIGTERM; each with a `STATUS=` line.
#[test]
fn sd_notify_reports_ready_reloading_and_stopping() {
    let dir = docroot();
    let path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let mut child = LINERATE
        .command()
        .args(["serve", root.path().to_str().unwrap()])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--access-log",
            "off",
        ])
        .env("NOTIFY_SOCKET", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = listening(&mut child);
    let ready = message(&sock);
    assert_eq!(
        ready,
        format!("READY=1\nSTATUS=serving on {addr} with 2 workers\n")
    );
    assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    signal(&child, "HUP");
    let reloading = message(&sock);
    let mut lines = reloading.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"), "{reloading}");
    let usec: u64 = lines
        .next()
        .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC: {reloading}"));
    assert!(usec > 0);
    assert!(message(&sock).starts_with("READY=1\nSTATUS=serving on "));
    signal(&child, "TERM");
    assert_eq!(message(&sock), "STOPPING=1\nSTATUS=stopping\n");
    assert!(child.wait().unwrap().success());
}

/// `systemd-socket-activate -l ADDR linerate serve …`: the server takes the socket it
/// is passed (no bind of its own, `listen` unused), every worker accepts from it, and
/// the connection that started it is answered.
#[test]
fn socket_activation_serves_on_the_passed_socket() {
    if !installed("systemd-socket-activate") {
        eprintln!("systemd-socket-activate is not installed: skipped");
        return;
    }
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    // A free port, given to systemd-socket-activate to listen on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let at = format!("127.0.0.1:{port}");
    let mut child = Command::new("systemd-socket-activate")
        .args(["-l", &at, LINERATE.path(), "serve"])
        .arg(root.path())
        .args(["--workers", "2", "--access-log", "off"])
        // Ignored under socket activation: the passed socket is the listener.
        .args(["--listen", "127.0.0.1:1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It listens before the server runs; the first connection starts the server.
    let addr: std::net::SocketAddr = at.parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "nothing listens on {at}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..20 {
        assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    }
    assert_eq!(listening(&mut child), addr, "announces the passed socket");
    signal(&child, "TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// Socket activation of a Unix socket (`systemd-socket-activate -l /PATH`): served as
/// a TCP one is, announced as `unix:/PATH`, and its file left to the service manager
/// that made it (the server removes only files it made).
#[test]
fn socket_activation_serves_a_passed_unix_socket() {
    use std::io::{Read, Write};
    if !installed("systemd-socket-activate") {
        eprintln!("systemd-socket-activate is not installed: skipped");
        return;
    }
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let dir = docroot();
    let sock = dir.path().join("activated.sock");
    let mut child = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&sock)
        .arg(LINERATE.path())
        .arg("serve")
        .arg(root.path())
        .args(["--workers", "2", "--access-log", "off"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no {}",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The file appears at bind(2), before the socket listens: until it does, a connect
    // is refused (seen once in CI on a loaded machine).
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never listened",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..10 {
        let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        assert!(
            got.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&got)
        );
        assert!(got.ends_with(b"\r\n\r\nF\n"));
    }
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), format!("listening on unix:{}", sock.display()));
    signal(&child, "TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        sock.exists(),
        "the service manager's file is not the server's to remove"
    );
}

/// `--metrics-path`: after a known load, the OpenMetrics text counts it exactly, passes
/// `promtool check metrics` (Debian's `prometheus`), and a client outside
/// `--metrics-allow` gets 403.
#[test]
fn metrics_count_the_load_and_pass_promtool() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let s = LINERATE.spawn(&[
        "serve",
        root.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--access-log",
        "off",
        "--metrics-path",
        "/metrics",
        "--metrics-allow",
        "127.0.0.1/32",
    ]);
    for _ in 0..40 {
        assert_eq!(fetch(s.addr, "/f.txt", "").status, 200);
    }
    for _ in 0..3 {
        assert_eq!(fetch(s.addr, "/missing", "").status, 404);
    }
    let om = fetch(s.addr, "/metrics?format=openmetrics", "");
    assert!(
        om.header("content-type")
            .is_some_and(|t| t.starts_with("application/openmetrics-text")),
        "{om:?}"
    );
    assert!(String::from_utf8_lossy(&om.body).ends_with("# EOF\n"));
    let r = fetch(s.addr, "/metrics", "");
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.starts_with("text/plain; version=0.0.4")),
        "{r:?}"
    );
    let text = String::from_utf8(r.body.clone()).unwrap();
    let value = |series: &str| sample(&text, series);
    // The load, and the OpenMetrics scrape before this one.
    assert_eq!(
        value("linerate_responses_total{method=\"GET\",class=\"2xx\"}"),
        41
    );
    assert_eq!(
        value("linerate_responses_total{method=\"GET\",class=\"4xx\"}"),
        3
    );
    assert_eq!(
        value("linerate_response_body_bytes_total{transmit=\"splice\"}"),
        40 * 2 + 3 * 14 + om.body.len() as u64
    );
    assert_eq!(value("linerate_response_seconds_count"), 44);
    assert_eq!(value("linerate_connections_accepted_total"), 45);
    assert_eq!(value("linerate_workers"), 2);
    if installed("promtool") {
        let mut check = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        check
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = check.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(s);
    // From an address outside the list: 403.
    let s = LINERATE.start(
        root.path(),
        &[
            "--metrics-path",
            "/metrics",
            "--metrics-allow",
            "10.0.0.0/8",
        ],
    );
    assert_eq!(fetch(s.addr, "/metrics", "").status, 403);
}

/// The engine's counters reach the metrics when connections close: zero-copy sends and
/// the kernel's verdicts on them.
#[test]
fn metrics_count_zero_copy_sends() {
    let root = docroot();
    put(root.path(), "big.bin", &vec![7u8; 2 << 20]);
    let s = LINERATE.start(
        root.path(),
        &["--transmit", "zerocopy", "--metrics-path", "/metrics"],
    );
    for _ in 0..5 {
        assert_eq!(fetch(s.addr, "/big.bin", "").status, 200);
    }
    let text = String::from_utf8(fetch(s.addr, "/metrics", "").body).unwrap();
    let value = |series: &str| sample(&text, series);
    assert!(value("linerate_zerocopy_sends_total") > 0, "{text}");
    assert!(value("linerate_transmit_syscalls_total") > 0, "{text}");
    assert!(
        value("linerate_zerocopy_copied_total") <= value("linerate_zerocopy_completions_total")
    );
}

/// SIGUSR2 (nginx's binary upgrade): the program is started again on the same
/// listening sockets; both serve until the old process is stopped (SIGQUIT), then the
/// new one alone, on the same port, with no refused connection between.
#[test]
fn sigusr2_hands_the_listening_sockets_to_a_new_process() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let mut old = LINERATE
        .command()
        .args(["serve", root.path().to_str().unwrap()])
        .args([
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--access-log",
            "off",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both processes write to these pipes: read them for the whole test.
    let out = piped_lines(Box::new(old.stdout.take().unwrap()));
    let err = piped_lines(Box::new(old.stderr.take().unwrap()));
    let first = wait_for(&out, "listening on ");
    let addr: std::net::SocketAddr = first["listening on ".len()..].parse().unwrap();
    assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    signal(&old, "USR2");
    let new_pid = upgraded_pid(&err);
    assert_eq!(
        wait_for(&out, "listening on "),
        first,
        "the new process announces the same address"
    );
    assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    signal(&old, "QUIT");
    assert!(old.wait().unwrap().success());
    for _ in 0..10 {
        assert_eq!(
            fetch(addr, "/f.txt", "").status,
            200,
            "served by the new process"
        );
    }
    stop_and_wait_gone(new_pid);
}

/// Counters go on across reloads: requests served by the workers before a SIGHUP (some
/// still draining, others ended) and after it are all counted, once.
#[test]
fn metrics_count_on_across_reloads() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let dir = docroot();
    let conf = dir.path().join("linerate.toml");
    std::fs::write(
        &conf,
        "metrics-path = \"/metrics\"\nworkers = 2\naccess-log = \"off\"\n",
    )
    .unwrap();
    let s = LINERATE.serve_config(Some(root.path()), &conf, &["--error-log-level", "info"]);
    let get_2xx = |s: &linerate_testkit::Server| {
        let text = String::from_utf8(fetch(s.addr, "/metrics", "").body).unwrap();
        (
            sample(
                &text,
                "linerate_responses_total{method=\"GET\",class=\"2xx\"}",
            ),
            sample(&text, "linerate_workers"),
        )
    };
    for _ in 0..10 {
        assert_eq!(fetch(s.addr, "/f.txt", "").status, 200);
    }
    // A keep-alive request of the first generation.
    let mut c = s.conn();
    assert_eq!(c.get("/f.txt", "").status, 200);
    std::fs::write(
        &conf,
        "metrics-path = \"/metrics\"\nworkers = 1\naccess-log = \"off\"\n",
    )
    .unwrap();
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    for _ in 0..5 {
        assert_eq!(fetch(s.addr, "/f.txt", "").status, 200);
    }
    // 10 + 1 + 5 files; the scrape counts itself when it has been sent.
    assert_eq!(get_2xx(&s), (16, 1));
    drop(c);
    s.signal("HUP");
    s.wait_stderr("(generation 2)");
    // Whether the generations before are draining or ended (their counts folded into
    // the sum), each request is counted once.
    assert_eq!(get_2xx(&s), (17, 1), "16 files and the first scrape");
}

/// The unit files pass `systemd-analyze verify` (with ExecStart pointed at the binary
/// built here, since the unit names where it is installed) and its hardening scores
/// "OK" or better in `systemd-analyze security` (offline: no service manager runs
/// here). Starting them under systemd as PID 1 is not possible on this project's
/// machines.
#[test]
fn the_unit_files_verify_and_are_hardened() {
    if !installed("systemd-analyze") {
        eprintln!("systemd-analyze is not installed: skipped");
        return;
    }
    let contrib = concat!(env!("CARGO_MANIFEST_DIR"), "/../../contrib");
    let dir = docroot();
    let service = std::fs::read_to_string(format!("{contrib}/linerate.service"))
        .unwrap()
        // The unit names the command, which systemd finds in /usr/bin or /usr/local/bin
        // once installed: here, the binary built.
        .replace(
            "ExecStart=linerate ",
            &format!("ExecStart={} ", LINERATE.path()),
        );
    std::fs::write(dir.path().join("linerate.service"), service).unwrap();
    std::fs::copy(
        format!("{contrib}/linerate.socket"),
        dir.path().join("linerate.socket"),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("systemd-analyze")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, text) = run(&["verify", "--man=no", "linerate.service", "linerate.socket"]);
    assert!(ok && text.trim().is_empty(), "{text}");
    // Exposure on systemd's scale of 0 (best) to 10, times ten: 4.0 at most ("OK").
    let (ok, text) = run(&[
        "security",
        "--offline=yes",
        "--threshold=40",
        "linerate.service",
    ]);
    assert!(ok, "{text}");
}

/// `--driver`: the error log, the status page and the metrics name the driver that
/// runs (`auto` resolved), and a reload moves the workers to another.
#[test]
fn the_driver_that_runs_is_named_everywhere_and_a_reload_changes_it() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let driver_of = |s: &linerate_testkit::Server| {
        let status = fetch(s.addr, "/.status", "");
        assert_eq!(status.status, 200);
        let v: serde_json::Value = serde_json::from_slice(&status.body).unwrap();
        // The loop's counts (the ring's are added every tick of 100 ms).
        let ring = v["event_loop"]["ring_enters"].as_u64().unwrap();
        let waits = v["event_loop"]["waits"].as_u64().unwrap();
        assert!(waits > 0, "{v}");
        if v["driver"] == "uring" {
            assert!(
                ring > 0 && v["event_loop"]["ring_submissions"].as_u64().unwrap() > 0,
                "{v}"
            );
        } else {
            assert_eq!(ring, 0, "{v}");
        }
        let metrics = String::from_utf8(fetch(s.addr, "/metrics", "").body).unwrap();
        let info = metrics
            .lines()
            .find(|l| l.starts_with("linerate_build_info{"))
            .unwrap_or_else(|| panic!("{metrics}"))
            .to_string();
        (v["driver"].as_str().unwrap().to_string(), info)
    };
    let conf = root.path().join("linerate.toml");
    let write_conf = |driver: &str| {
        std::fs::write(
            &conf,
            format!(
                "root = \"{}\"\nlisten = \"127.0.0.1:0\"\nworkers = 1\naccess-log = \"off\"\n\
                 error-log-level = \"info\"\nstatus-path = \"/.status\"\n\
                 metrics-path = \"/metrics\"\nmetrics-allow = [\"127.0.0.1/32\"]\n\
                 driver = \"{driver}\"\n",
                root.path().display()
            ),
        )
        .unwrap();
    };
    // This machine runs io_uring, so auto picks it.
    for (asked, runs) in [("epoll", "epoll"), ("uring", "uring"), ("auto", "uring")] {
        write_conf(asked);
        let s = LINERATE.serve_config(None, &conf, &[]);
        s.wait_stderr(&format!("event loop: {runs}"));
        assert_eq!(fetch(s.addr, "/f.txt", "").body, b"F\n");
        std::thread::sleep(Duration::from_millis(250));
        let (status, info) = driver_of(&s);
        assert_eq!(status, runs, "--driver {asked}");
        assert!(info.contains(&format!("driver=\"{runs}\"")), "{info}");
        assert_eq!(fetch(s.addr, "/f.txt", "").body, b"F\n");
    }
    write_conf("epoll");
    let s = LINERATE.serve_config(None, &conf, &[]);
    assert_eq!(driver_of(&s).0, "epoll");
    write_conf("uring");
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(driver_of(&s).0, "uring");
    assert_eq!(fetch(s.addr, "/f.txt", "").body, b"F\n");
    // A bad value is the flag's usage error, and nothing starts.
    let (code, _, err) = LINERATE.run(&["serve", ".", "--driver", "io_uring"]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--driver") && err.contains("expected auto, epoll or uring"),
        "{err}"
    );
}

/// Where io_uring cannot be set up (a seccomp profile, here): `--driver uring` refuses
/// to start and says why; `auto` serves on epoll after one warning line.
#[test]
fn without_io_uring_uring_refuses_to_start_and_auto_falls_back_to_epoll() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let dir = root.path().to_str().unwrap();
    let (code, out, err) = LINERATE.run_without_io_uring(&[
        "serve",
        dir,
        "--listen",
        "127.0.0.1:0",
        "--driver",
        "uring",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.is_empty(), "nothing announced: {out}");
    assert!(
        err.contains("--driver uring: io_uring cannot run here: Operation not permitted"),
        "{err}"
    );
    let s = LINERATE.start_without_io_uring(
        root.path(),
        &[
            "--driver",
            "auto",
            "--error-log-level",
            "info",
            "--status-path",
            "/.status",
        ],
    );
    let log = s.wait_stderr("event loop: epoll");
    assert_eq!(
        log.matches("driver auto: io_uring cannot run here (Operation not permitted")
            .count(),
        1,
        "{log}"
    );
    assert_eq!(fetch(s.addr, "/f.txt", "").body, b"F\n");
    let v: serde_json::Value = serde_json::from_slice(&fetch(s.addr, "/.status", "").body).unwrap();
    assert_eq!(v["driver"], "epoll");
}

/// Regression (issue 28): after a binary upgrade under io_uring, five SIGHUPs under
/// `bench http --close` reset 10 connections with no log line, and keep-alive load
/// over TLS lost about a request per SIGHUP. The upgraded process took the passed
/// group of sockets as systemd's (every worker accepting from every socket), and a
/// worker letting go of one listener closed the connections its ring had accepted
/// for another. Now the group is handed out one socket per worker again, and what a
/// ring accepted ahead is served. Under each driver, plain with `--close`, plain and
/// TLS keep-alive: no error, no request sent again.
#[test]
fn reloads_after_an_upgrade_lose_no_connection() {
    for driver in ["auto", "epoll"] {
        reloads_after_an_upgrade_lose_no_connection_under(driver);
    }
}

fn reloads_after_an_upgrade_lose_no_connection_under(driver: &str) {
    let (root, certs) = (docroot(), docroot());
    put(root.path(), "f.bin", &vec![7u8; 64 << 10]);
    let (cert, key) = linerate_testkit::tls_files(certs.path(), "server");
    let mut old = LINERATE
        .command()
        .args(["serve", root.path().to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0"])
        .args([
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ])
        .args(["--workers", "2", "--access-log", "off", "--driver", driver])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = piped_lines(Box::new(old.stdout.take().unwrap()));
    let err = piped_lines(Box::new(old.stderr.take().unwrap()));
    let addr_of = |l: &str| -> std::net::SocketAddr {
        l["listening on ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let plain = addr_of(&wait_for(&out, "listening on "));
    let tls = addr_of(&wait_for(&out, "listening on "));
    signal(&old, "USR2");
    let new_pid = upgraded_pid(&err);
    wait_for(&out, "listening on ");
    wait_for(&out, "listening on ");
    signal(&old, "QUIT");
    assert!(old.wait().unwrap().success());
    let hup = || {
        Command::new("kill")
            .args(["-HUP", &new_pid.to_string()])
            .status()
            .unwrap();
    };
    let loads: [(&str, String, &[&str]); 3] = [
        (
            "plain, --close",
            format!("http://{plain}/f.bin"),
            &["--close"],
        ),
        ("plain, keep-alive", format!("http://{plain}/f.bin"), &[]),
        (
            "TLS, keep-alive",
            format!("https://{tls}/f.bin"),
            &["--insecure"],
        ),
    ];
    // All at once: each worker has a socket of each address, and letting go of one
    // must not cost the connections another brought.
    let running: Vec<_> = loads
        .into_iter()
        .map(|(what, url, extra)| {
            let mut args: Vec<String> = ["bench", "http", &url, "-c", "8", "-d", "2", "--json"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            let load = std::thread::spawn(move || {
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                LINERATE.run(&a)
            });
            (what, load)
        })
        .collect();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(300));
        hup();
    }
    for (what, load) in running {
        let (code, json, stderr) = load.join().unwrap();
        assert_eq!(code, 0, "{driver}, {what}: {stderr}");
        linerate_testkit::expect_clean_bench(&json, &format!("{driver}, {what}"));
    }
    stop_and_wait_gone(new_pid);
}

/// The listening sockets of `port` in this network namespace (`/proc/net/tcp` lists
/// each member of a `SO_REUSEPORT` group).
fn listening_sockets(port: u16) -> usize {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let me = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1].ends_with(&me) && f[3] == "0A"
        })
        .count()
}

/// Regression (issue 28): after a binary upgrade the passed group was taken as
/// systemd's sockets: shared by every worker and never grown, so a reload to more
/// workers left them sharing two sockets. Upgrade, reload to 4 workers, upgrade again:
/// one listening socket per worker each time, and every request answered.
#[test]
fn upgrades_and_reloads_keep_one_listening_socket_per_worker() {
    let (root, dir) = (docroot(), docroot());
    put(root.path(), "f.txt", b"F\n");
    let conf = dir.path().join("linerate.toml");
    let write_conf = |workers: u32| {
        std::fs::write(
            &conf,
            format!("workers = {workers}\naccess-log = \"off\"\nerror-log-level = \"info\"\n"),
        )
        .unwrap();
    };
    write_conf(2);
    let mut old = LINERATE
        .command()
        .args(["serve", root.path().to_str().unwrap(), "--config"])
        .arg(&conf)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = piped_lines(Box::new(old.stdout.take().unwrap()));
    let err = piped_lines(Box::new(old.stderr.take().unwrap()));
    let first = wait_for(&out, "listening on ");
    let addr: std::net::SocketAddr = first["listening on ".len()..].parse().unwrap();
    assert_eq!(listening_sockets(addr.port()), 2);
    signal(&old, "USR2");
    let pid = upgraded_pid(&err);
    wait_for(&out, "listening on ");
    signal(&old, "QUIT");
    assert!(old.wait().unwrap().success());
    assert_eq!(listening_sockets(addr.port()), 2, "after the upgrade");
    write_conf(4);
    let kill = |sig: &str, pid: u32| {
        Command::new("kill")
            .args([&format!("-{sig}"), &pid.to_string()])
            .status()
            .unwrap();
    };
    kill("HUP", pid);
    wait_for(&err, "SIGHUP: reloaded");
    assert_eq!(
        listening_sockets(addr.port()),
        4,
        "after a reload to 4 workers"
    );
    for _ in 0..20 {
        assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    }
    kill("USR2", pid);
    let pid2 = upgraded_pid(&err);
    wait_for(&out, "listening on ");
    kill("QUIT", pid);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|s| !s.contains("State:\tZ"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first upgrade did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listening_sockets(addr.port()), 4, "after a second upgrade");
    for _ in 0..20 {
        assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    }
    stop_and_wait_gone(pid2);
}
