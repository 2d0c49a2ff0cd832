//! `linerate serve` across reloads and checks: SIGHUP on the same sockets with
//! downloads in flight and under load, a reload that announces a new address, giving
//! up root before serving, no default that serves the filesystem, a full disk under
//! the access log, and `--check` naming what a start would serve or every problem, as
//! the user the server becomes.

use std::fs::{self};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use linerate_testkit::{assert_bytes_eq, docroot, fetch, pattern, put, req, Linerate, Server, MIB};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// A configuration file for the reload tests: the status page at `status`, `workers`.
fn reload_conf(path: &Path, status: &str, workers: u32) {
    fs::write(
        path,
        format!("status-path = \"{status}\"\nworkers = {workers}\naccess-log = \"off\"\n"),
    )
    .unwrap();
}

/// `serve ROOT --config FILE` on a free port with info lines in the error log, FILE made
/// by [`reload_conf`]; (its directory, FILE, the server).
fn reloadable(
    root: &Path,
    status: &str,
    workers: u32,
) -> (tempfile::TempDir, std::path::PathBuf, Server) {
    reloadable_with(root, status, workers, &[])
}

/// [`reloadable`] with `extra` flags.
fn reloadable_with(
    root: &Path,
    status: &str,
    workers: u32,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, Server) {
    let dir = docroot();
    let conf = dir.path().join("linerate.toml");
    reload_conf(&conf, status, workers);
    let args = [&["--error-log-level", "info"][..], extra].concat();
    let server = LINERATE.serve_config(Some(root), &conf, &args);
    (dir, conf, server)
}

/// SIGHUP re-reads the configuration file: requests after it see the new settings, on
/// the same listening socket (the same port); a 200 MiB download
/// that started before finishes byte-exact; a broken file is refused with one line
/// naming the line and the key, and the settings before keep serving.
/// Rules: docs/http.md E5.
#[test]
fn sighup_reloads_the_file_on_the_same_socket_and_the_download_in_flight_finishes() {
    let root = docroot();
    let big = pattern(200 * MIB, 5);
    put(root.path(), "big.bin", &big);
    let (_dir, conf, server) = reloadable(root.path(), "/a", 1);
    assert_eq!(fetch(server.addr, "/a", "").status, 200);
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    assert_eq!(c.read_head().status, 200);
    let (mut got, _) = c.read_upto(MIB);
    reload_conf(&conf, "/b", 2);
    server.signal("HUP");
    let log = server.wait_stderr("SIGHUP: reloaded");
    assert!(log.contains("SIGHUP: reloaded (generation 1)"), "{log}");
    assert_eq!(
        fetch(server.addr, "/b", "").status,
        200,
        "the new status path"
    );
    assert_eq!(
        fetch(server.addr, "/a", "").status,
        404,
        "the old one is gone"
    );
    // A broken file changes nothing.
    fs::write(&conf, "workers = 2\nstatus-path = \"b\"\n").unwrap();
    server.signal("HUP");
    let log = server.wait_stderr("serving on with the settings before");
    let line = log
        .lines()
        .find(|l| l.contains("serving on with the settings before"))
        .unwrap();
    assert!(
        line.contains("line 2: status-path: 'b': must start with /"),
        "{line}"
    );
    assert_eq!(fetch(server.addr, "/b", "").status, 200);
    // The download from before the reloads, whole.
    let (rest, _) = c.read_upto(big.len() - got.len());
    got.extend_from_slice(&rest);
    assert_bytes_eq(&got, &big, "the download across two SIGHUPs");
}

/// Ten SIGHUPs during `bench http` with 32 keep-alive connections on 1 MiB files,
/// under each driver: every request is answered 200 with its whole body, none fails,
/// and none had to be sent again (regression, issue 28: 80 were, because a retiring
/// generation closed idle keep-alive connections a request was already travelling on;
/// it now answers their next request with `Connection: close`). The settings switch
/// between one and two workers each time.
/// Rules: docs/http.md E5.
#[test]
fn sighups_under_load_lose_no_request() {
    for driver in ["auto", "epoll"] {
        sighups_under_load_lose_no_request_under(driver);
    }
}

fn sighups_under_load_lose_no_request_under(driver: &str) {
    let root = docroot();
    put(root.path(), "f.bin", &pattern(MIB, 9));
    let (_dir, conf, server) = reloadable_with(root.path(), "/s", 2, &["--driver", driver]);
    let url = format!("http://{}/f.bin", server.addr);
    let load = thread::spawn(move || {
        LINERATE.run(&["bench", "http", &url, "-c", "32", "-d", "4", "--json"])
    });
    for i in 0..10 {
        thread::sleep(Duration::from_millis(300));
        reload_conf(&conf, "/s", 1 + i % 2);
        server.signal("HUP");
    }
    let (code, out, err) = load.join().unwrap();
    assert_eq!(code, 0, "{err}");
    let v = linerate_testkit::expect_clean_bench(&out, driver);
    assert_eq!(v["statuses"]["200"], v["requests"], "{driver}: {v}");
}

/// `--user nobody` as root: root is given up before serving, by every thread (user,
/// group, no supplementary groups), and a world-readable root is served; a user that
/// does not exist fails the start with one line and announces nothing.
#[test]
fn user_gives_up_root_before_serving() {
    if !linerate_testkit::is_root() {
        eprintln!("not root: --user cannot be tried");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let root = docroot();
    fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755)).unwrap();
    put(root.path(), "f.txt", b"F\n");
    fs::set_permissions(root.path().join("f.txt"), fs::Permissions::from_mode(0o644)).unwrap();
    let script = "let x = 1;\n".repeat(100);
    put(root.path(), "app.js", script.as_bytes());
    fs::set_permissions(
        root.path().join("app.js"),
        fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    // The compression cache's directory is made for the user (docs/http.md V4).
    let state = docroot();
    fs::set_permissions(state.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let cache = state.path().join("zcache");
    let nobody = Command::new("id").args(["-u", "nobody"]).output().unwrap();
    let uid = String::from_utf8_lossy(&nobody.stdout).trim().to_string();
    let server = LINERATE.spawn(&[
        "serve",
        root.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--access-log",
        "off",
        "--compress-cache",
        cache.to_str().unwrap(),
        "--user",
        "nobody",
    ]);
    assert_eq!(fetch(server.addr, "/f.txt", "").status, 200);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(&cache).unwrap().uid().to_string(), uid);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while fetch(server.addr, "/app.js", "Accept-Encoding: gzip\r\n").header("Content-Encoding")
        != Some("gzip")
    {
        assert!(
            std::time::Instant::now() < until,
            "no variant written as nobody"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let tasks: Vec<_> = fs::read_dir(format!("/proc/{}/task", server.pid()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(tasks.len() >= 3, "main and two workers at least");
    for t in tasks {
        let status = fs::read_to_string(t.join("status")).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(field("Uid:"), vec![uid.clone(); 4], "{}", t.display());
        assert!(field("Groups:").is_empty(), "{}: {status}", t.display());
        assert!(
            field("Gid:").iter().all(|g| g != "0"),
            "{}: {status}",
            t.display()
        );
    }
    let (code, out, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--user",
        "no-such-user-linerate",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--user no-such-user-linerate: no such user"),
        "{err}"
    );
    assert!(!out.contains("listening on"), "{out}");
}

/// Regression (issue 28): contrib/linerate.toml had every key commented out, so a
/// service started from it served its working directory, `/`: `GET /etc/passwd` was
/// 200, and the start line said only "serving .". A configuration file (or systemd)
/// must now name the root; the shipped file names /var/www/html; the start line says
/// the absolute root.
#[test]
fn no_default_serves_the_filesystem() {
    let dir = docroot();
    let conf = dir.path().join("no-root.toml");
    fs::write(&conf, "listen = \"127.0.0.1:0\"\naccess-log = \"off\"\n").unwrap();
    let conf_s = conf.to_str().unwrap();
    // No root in the file and no DIR: refused, wherever it starts.
    for cwd in [Path::new("/"), dir.path()] {
        let out = LINERATE
            .command()
            .args(["serve", "--config", conf_s])
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "a usage error: {err}");
        assert!(err.contains("no root: give DIR, or root = "), "{err}");
    }
    // Started as systemd starts a service (no file, no DIR, in /): refused too.
    let out = LINERATE
        .command()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir("/")
        .env("NOTIFY_SOCKET", dir.path().join("nobody-listens"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    // At a terminal in /, no DIR is no root either.
    let out = LINERATE
        .command()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    // The shipped file, from /: it serves /var/www/html or refuses to start, never /.
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/linerate.toml");
    let mut child = LINERATE
        .command()
        .args(["serve", "--config"])
        .arg(&contrib)
        .args(["--listen", "127.0.0.1:0", "--access-log", "off"])
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    if let Some(addr) = first.trim().strip_prefix("listening on ") {
        let r = fetch(addr.parse().unwrap(), "/etc/passwd", "");
        assert_ne!(r.status, 200, "{r:?}");
        child.kill().unwrap();
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("/var/www/html"),
        "names the root it serves or cannot open: {status:?} {err}"
    );
    // The start line says the absolute root, also for a relative DIR.
    put(dir.path(), "www/a.txt", b"a\n");
    let s = LINERATE.spawn_in(dir.path(), &["serve", "www", "--listen", "127.0.0.1:0"]);
    let told = s.stderr_line("serving ").unwrap_or_default();
    let abs = fs::canonicalize(dir.path()).unwrap().join("www");
    assert!(
        told.starts_with(&format!("serving {} at ", abs.display())),
        "{told}"
    );
}

/// Unmounts what it names when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Regression (issue 28): with the access log on a 256 KiB tmpfs, 20,000 requests left
/// 764 lines, one of them torn, and nothing said. Now a line is written whole or
/// dropped: every line in the file is whole, the lines written and the lines counted
/// dropped (`linerate_log_lines_dropped_total`) add up to the requests, and the error
/// log says so.
#[test]
fn a_full_disk_under_the_access_log_drops_whole_lines_counted_and_said() {
    if !linerate_testkit::is_root() {
        eprintln!("skipped: mounting a small tmpfs needs root");
        return;
    }
    let dir = docroot();
    let small = dir.path().join("small");
    fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&small)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here");
        return;
    }
    let _unmount = Mounted(small.clone());
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let log = small.join("access.log");
    let error_log = dir.path().join("error.log");
    let mut server = LINERATE.start(
        root.path(),
        &[
            "--access-log",
            log.to_str().unwrap(),
            "--error-log",
            error_log.to_str().unwrap(),
            "--metrics-path",
            "/metrics",
        ],
    );
    const N: usize = 20_000;
    let mut c = server.conn();
    for i in 0..N {
        assert_eq!(c.get(&format!("/f.txt?n={i}"), "").status, 200);
    }
    // Two ticks: every line of the requests has been written or dropped.
    thread::sleep(Duration::from_millis(300));
    let metrics = String::from_utf8(fetch(server.addr, "/metrics", "").body).unwrap();
    let dropped: usize = metrics
        .lines()
        .find_map(|l| l.strip_prefix("linerate_log_lines_dropped_total "))
        .expect("the counter is published")
        .parse()
        .unwrap();
    server.signal("TERM");
    assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    let text = fs::read(&log).unwrap();
    assert!(text.ends_with(b"\n"), "the file ends with a whole line");
    // The scrape's own line is written after it, if the page the file ends in has
    // room for it.
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty() && !l.windows(12).any(|w| w == b"GET /metrics"))
        .collect();
    for (k, l) in lines.iter().enumerate() {
        let l = String::from_utf8_lossy(l);
        assert!(
            l.starts_with("127.0.0.1 - - [") && l.ends_with("\" 200 2"),
            "line {k} is torn: {l:?}"
        );
    }
    assert!(
        dropped > 0 && lines.len() < N,
        "{} lines, {dropped} dropped",
        lines.len()
    );
    assert_eq!(lines.len() + dropped, N, "every line written or counted");
    let said = fs::read_to_string(&error_log).unwrap();
    assert!(
        said.contains("access log: ") && said.contains("line(s) dropped"),
        "{said}"
    );
}

/// Regression (issue 28): after a reload that changed the root and added a listen
/// address, the start line for the new address named the root before. It names the
/// root the new address serves, as an absolute path.
#[test]
fn a_reload_announces_a_new_address_with_the_new_root() {
    let (a, b, dir) = (docroot(), docroot(), docroot());
    put(a.path(), "which.txt", b"a\n");
    put(b.path(), "which.txt", b"b\n");
    let conf = dir.path().join("linerate.toml");
    let write = |root: &Path, listen: &str| {
        fs::write(
            &conf,
            format!(
                "root = {:?}\nlisten = [{listen}]\naccess-log = \"off\"\nerror-log-level = \"info\"\n",
                root.to_str().unwrap()
            ),
        )
        .unwrap();
    };
    write(a.path(), "\"127.0.0.1:0\"");
    let server = LINERATE.spawn(&["serve", "--config", conf.to_str().unwrap()]);
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let second = free.local_addr().unwrap();
    drop(free);
    write(b.path(), &format!("\"127.0.0.1:0\", \"{second}\""));
    server.signal("HUP");
    let told = server.wait_stderr(&format!("at http://{second}/"));
    let line = told
        .lines()
        .find(|l| l.contains(&format!("at http://{second}/")))
        .unwrap()
        .to_string();
    assert_eq!(
        line,
        format!("serving {} at http://{second}/", b.path().display())
    );
    let r = fetch(second, "/which.txt", "");
    assert_eq!(r.body, b"b\n");
    server.signal("TERM");
}

/// `serve --check` (nginx's -t): a good configuration prints its sites with absolute
/// roots and its addresses, exits 0 and keeps no address; a broken one names every
/// problem (root, certificate, user, log directory, compress-cache; a port in use as a
/// note) and exits
/// 2, serving nothing; the shipped file checked from / names /var/www/html, never ".".
#[test]
fn check_names_what_a_start_would_serve_or_every_problem() {
    let dir = docroot();
    let root = dir.path().canonicalize().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let listen = format!("127.0.0.1:{port}");
    let conf = dir.path().join("good.toml");
    fs::write(
        &conf,
        format!(
            "root = \"{}\"\nlisten = \"{listen}\"\nproxy-protocol = \"{listen}\"\naccess-log = \"{}\"\n\
             compress-cache = \"{}\"\n",
            root.display(),
            dir.path().join("access.log").display(),
            root.join("zcache").display()
        ),
    )
    .unwrap();
    let (code, out, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap(), "--check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("root {}", root.display())), "{out}");
    assert!(
        out.contains(&format!("listen {listen}: HTTP, PROXY protocol")),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "compress-cache {} (at most 268435456 bytes)",
            root.join("zcache").display()
        )),
        "{out}"
    );
    assert!(
        !dir.path().join("access.log").exists() && !root.join("zcache").exists(),
        "a check creates no log and no directory"
    );
    // It kept nothing: the port is free at once.
    std::net::TcpListener::bind(&listen).expect("the checked port is free");

    // Broken in five ways at once: each is named, exit 2.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = held.local_addr().unwrap().to_string();
    let bad = dir.path().join("bad.toml");
    fs::write(
        &bad,
        format!(
            "root = \"{}/missing\"\nlisten = \"{busy}\"\ntls-listen = \"127.0.0.1:0\"\n\
             tls-cert = \"{0}/no-cert.pem\"\ntls-key = \"{0}/no-key.pem\"\n\
             user = \"no-such-user-here\"\naccess-log = \"{0}/no-dir/access.log\"\n\
             compress-cache = \"{0}/good.toml/zcache\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let (code, out, err) = LINERATE.run(&["serve", "--config", bad.to_str().unwrap(), "--check"]);
    assert_eq!(code, 2, "{out}{err}");
    for needle in [
        "missing",
        "no-cert.pem",
        "no-such-user-here: no such user",
        "no-dir",
        "good.toml is not a directory",
        &format!("note: listen {busy}: in use"),
    ] {
        assert!(err.contains(needle), "{needle} not named: {err}");
    }
    // The port in use is a note (a reload keeps its sockets), not a problem.
    assert!(err.contains("5 problems"), "{err}");
    assert!(!out.contains("listening on"), "{out}");
    drop(held);

    // The shipped file, from /: the root it names, absolute.
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/linerate.toml");
    let out = LINERATE
        .command()
        .args(["serve", "--config"])
        .arg(&contrib)
        .arg("--check")
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("root /var/www/html"), "{out:?}");
    assert!(
        !text.contains("root .") && !text.contains("root /\n"),
        "{text}"
    );
}

/// `--check` as root with `--user` judges the roots and logs as that user will open
/// them (issue 43: it said "good" for a root nobody could not read, and the server then
/// answered 403 to everything).
#[test]
fn check_judges_roots_and_logs_as_the_user_the_server_becomes() {
    use std::os::unix::fs::PermissionsExt;
    if linerate_sys::ns::effective_uid() != 0
        || linerate_sys::user::lookup("nobody")
            .ok()
            .flatten()
            .is_none()
    {
        eprintln!("skipped: needs root and a user nobody");
        return;
    }
    let dir = docroot();
    let base = dir.path().canonicalize().unwrap();
    fs::set_permissions(&base, fs::Permissions::from_mode(0o755)).unwrap();
    let root = base.join("www");
    put(&root, "index.html", b"hi\n");
    let logs = base.join("logs");
    fs::create_dir(&logs).unwrap();
    let conf = base.join("c.toml");
    fs::write(
        &conf,
        format!(
            "root = \"{}\"\nlisten = \"127.0.0.1:0\"\nuser = \"nobody\"\naccess-log = \"{}\"\n",
            root.display(),
            logs.join("access.log").display()
        ),
    )
    .unwrap();
    let check = || LINERATE.run(&["serve", "--config", conf.to_str().unwrap(), "--check"]);
    // Readable and searchable by all, the log's directory too: good.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(logs.join("access.log"), b"").unwrap();
    fs::set_permissions(logs.join("access.log"), fs::Permissions::from_mode(0o666)).unwrap();
    let (code, out, err) = check();
    assert_eq!(code, 0, "{out}{err}");
    // Root alone may search the root, and write the log: root would pass both. The
    // root is a problem (every file beneath it would be 403); the log a note (the
    // start opens it as root; a reopen as nobody would fail).
    fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(logs.join("access.log"), fs::Permissions::from_mode(0o600)).unwrap();
    let (code, out, err) = check();
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!("root {}: Permission denied", root.display()))
            && err.contains("(as user nobody)"),
        "{err}"
    );
    assert!(err.contains("1 problem:"), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("note: access log") && l.contains("(as user nobody)")),
        "{err}"
    );
    // Readable but not searchable (r without x): still a problem.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o744)).unwrap();
    fs::set_permissions(logs.join("access.log"), fs::Permissions::from_mode(0o666)).unwrap();
    let (code, _, err) = check();
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("1 problem"), "{err}");
    // Without --user, root judges as root: good.
    let (code, out, err) = LINERATE.run(&[
        "serve",
        "--config",
        conf.to_str().unwrap(),
        "--check",
        "--user",
        "root",
    ]);
    assert_eq!(code, 0, "{out}{err}");
}
