//! `--listen unix:/PATH`: a Unix socket beside TCP, served under every transmit
//! strategy, its file made with the configured mode and owner, a stale file replaced,
//! a live one refused, the file removed at the stop and kept across a reload, and its
//! clients named `unix:` in the access log and by `--metrics-allow`.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use linerate_testkit::{
    assert_bytes_eq, docroot, fetch, parse_all, pattern, per_strategy, put, variant_args,
    wait_log_lines, Linerate, Response, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(a_unix_socket_serves_beside_tcp_byte_exact_and_logs_its_clients_as_unix);

/// Requests written at once on a new connection to the Unix socket at `path`, read to
/// the end (the last asks for the close).
fn unix_exchange(path: &Path, requests: &str, heads: &[bool]) -> Vec<Response> {
    let mut s = UnixStream::connect(path).expect("connects to the Unix socket");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(requests.as_bytes()).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).expect("reads to the close");
    parse_all(&got, heads)
}

/// `serve ROOT --listen 127.0.0.1:0 --listen unix:SOCK EXTRA...` (TCP first, so its
/// address is the one announced first).
fn serve_both(root: &Path, sock: &Path, extra: &[&str]) -> Server {
    let unix = format!("unix:{}", sock.display());
    let mut args = vec![
        "serve",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--listen",
        &unix,
        "--workers",
        "2",
    ];
    if !extra.contains(&"--access-log") {
        args.extend(["--access-log", "off"]);
    }
    args.extend(extra);
    LINERATE.spawn(&args)
}

fn sock_in(dir: &Path) -> PathBuf {
    dir.join("linerate.sock")
}

/// Waits up to 5 s for `path` to be gone.
fn gone(path: &Path) -> bool {
    for _ in 0..250 {
        if !path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn a_unix_socket_serves_beside_tcp_byte_exact_and_logs_its_clients_as_unix(transmit: &str) {
    let root = docroot();
    let big = pattern(3 << 20, 11);
    put(root.path(), "big.bin", &big);
    put(root.path(), "small.txt", b"small\n");
    let dir = docroot();
    let sock = sock_in(dir.path());
    let log = dir.path().join("access.log");
    let s = serve_both(
        root.path(),
        &sock,
        &[
            &variant_args(transmit)[..],
            &[
                "--access-log",
                log.to_str().unwrap(),
                "--log-format",
                "json",
            ],
        ]
        .concat(),
    );
    let meta = fs::symlink_metadata(&sock).expect("the socket file exists");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o666, "nginx's mode");
    // Pipelined: a range, a whole large file, a small one, the last closing.
    let got = unix_exchange(
        &sock,
        "GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=5-1000004\r\n\r\n\
         GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        &[false, false, false],
    );
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].status, 206);
    assert_bytes_eq(&got[0].body, &big[5..=1_000_004], "the range");
    assert_eq!(got[1].status, 200);
    assert_bytes_eq(&got[1].body, &big, "the large file");
    assert_eq!((got[2].status, &got[2].body[..]), (200, &b"small\n"[..]));
    // TCP beside it, unchanged.
    let r = fetch(s.addr, "/small.txt", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"small\n"[..]));
    let lines = wait_log_lines(&log, 4);
    let mut remotes: Vec<String> = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["remote"].as_str().unwrap().to_string()
        })
        .collect();
    // Two workers write their lines as each flushes: the order between them is not
    // the order of the requests.
    remotes.sort();
    assert_eq!(
        remotes,
        ["127.0.0.1", "unix:", "unix:", "unix:"],
        "{lines:?}"
    );
    drop(s);
    assert!(gone(&sock), "the stop removes the socket file");
}

/// A socket file nobody listens on (a server that was killed) is replaced; a live one
/// is refused with one line naming it, and left as it was; so is a file that is not a
/// socket.
#[test]
fn a_stale_socket_file_is_replaced_and_a_live_one_refused() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let dir = docroot();
    let sock = sock_in(dir.path());
    // Stale: bound, then closed without removing its file.
    drop(UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let s = serve_both(root.path(), &sock, &[]);
    let got = unix_exchange(
        &sock,
        "GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        &[false],
    );
    assert_eq!(got[0].status, 200, "served on the replaced file");
    // Live: a second server refuses, and the first serves on.
    let unix = format!("unix:{}", sock.display());
    let (code, _, err) = LINERATE.run(&["serve", ".", "--listen", &unix, "--access-log", "off"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("cannot listen on {unix}")) && err.contains("a server is listening"),
        "{err}"
    );
    let got = unix_exchange(
        &sock,
        "GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        &[false],
    );
    assert_eq!(got[0].status, 200, "the first server still serves");
    drop(s);
    // Not a socket: refused, untouched.
    let plain = dir.path().join("plain");
    fs::write(&plain, b"keep").unwrap();
    let unix = format!("unix:{}", plain.display());
    let (code, _, err) = LINERATE.run(&["serve", ".", "--listen", &unix, "--access-log", "off"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(fs::read(&plain).unwrap(), b"keep");
}

/// `--unix-mode` and `--unix-owner` (as root: the file's owner and group change);
/// a bad mode is a usage error naming the flag.
#[test]
fn unix_mode_and_owner_are_set_on_the_socket_file() {
    let root = docroot();
    let dir = docroot();
    let sock = sock_in(dir.path());
    let mut extra = vec!["--unix-mode", "0640"];
    let as_root = linerate_testkit::is_root();
    if as_root {
        extra.extend(["--unix-owner", "nobody:root"]);
    }
    let s = serve_both(root.path(), &sock, &extra);
    let meta = fs::symlink_metadata(&sock).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    if as_root {
        let nobody = fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f[0] == "nobody").then(|| f[2].parse::<u32>().unwrap())
            })
            .expect("a nobody user");
        assert_eq!((meta.uid(), meta.gid()), (nobody, 0));
    }
    drop(s);
    let (code, _, err) = LINERATE.run(&["serve", "--unix-mode", "0999"]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--unix-mode") && err.contains("not a mode"),
        "{err}"
    );
    let (code, _, err) = LINERATE.run(&["serve", "--listen", "unix:relative.sock"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("unix:/ABSOLUTE/PATH"), "{err}");
}

/// A SIGHUP keeps the Unix socket (a connection open across it is served, and new ones
/// are), and a reload that drops it from `listen` removes its file.
#[test]
fn a_reload_keeps_the_unix_socket_and_removes_it_when_dropped() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let dir = docroot();
    let sock = sock_in(dir.path());
    let conf = dir.path().join("linerate.toml");
    let listen_both = format!(
        "listen = [\"127.0.0.1:0\", \"unix:{}\"]\naccess-log = \"off\"\n",
        sock.display()
    );
    fs::write(&conf, &listen_both).unwrap();
    let s = LINERATE.spawn(&[
        "serve",
        root.path().to_str().unwrap(),
        "--config",
        conf.to_str().unwrap(),
    ]);
    let mut open = UnixStream::connect(&sock).unwrap();
    open.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    s.signal("HUP");
    // Said at the default level (warn): an operator sees a good reload.
    let log = s.wait_stderr("SIGHUP: reloaded");
    assert!(log.contains("SIGHUP: reloaded (generation 1)"), "{log}");
    // Connected before the reload, its first request answered after it.
    open.write_all(b"GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    open.read_to_end(&mut got).unwrap();
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    let r = unix_exchange(
        &sock,
        "GET /f.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        &[false],
    );
    assert_eq!(r[0].status, 200, "a new connection after the reload");
    // TCP only now: the file goes.
    let tcp_port = s.addr.port();
    fs::write(
        &conf,
        format!("listen = \"127.0.0.1:{tcp_port}\"\naccess-log = \"off\"\n"),
    )
    .unwrap();
    s.signal("HUP");
    let log = s.wait_stderr("(generation 2)");
    assert!(log.contains("SIGHUP: reloaded (generation 2)"), "{log}");
    assert!(gone(&sock), "dropped from listen: its file is removed");
    assert_eq!(fetch(s.addr, "/f.txt", "").status, 200);
}

/// `--metrics-allow unix:` admits the clients of a Unix socket; a list without it
/// refuses them (403), as it refuses any client it does not name.
#[test]
fn metrics_allow_names_unix_clients_as_unix() {
    let root = docroot();
    let dir = docroot();
    let sock = sock_in(dir.path());
    let get = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let s = serve_both(
        root.path(),
        &sock,
        &["--metrics-path", "/metrics", "--metrics-allow", "127.0.0.1"],
    );
    assert_eq!(unix_exchange(&sock, get, &[false])[0].status, 403);
    assert_eq!(fetch(s.addr, "/metrics", "").status, 200);
    drop(s);
    let s = serve_both(
        root.path(),
        &sock,
        &["--metrics-path", "/metrics", "--metrics-allow", "unix:"],
    );
    assert_eq!(unix_exchange(&sock, get, &[false])[0].status, 200);
    assert_eq!(fetch(s.addr, "/metrics", "").status, 403);
}
