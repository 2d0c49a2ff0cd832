//! The `linerate` binary driven as a user would: smoke runs of `bench stream` for every
//! strategy at tiny sizes, the sink's report, `--netns`, and the error exits.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use linerate_testkit::{is_root, Linerate};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

#[test]
fn stream_runs_with_every_strategy_and_counts_bytes_both_ends() {
    for s in [
        "copy",
        "sendfile-4k",
        "sendfile",
        "sendfile-chunk-64K",
        "splice",
        "zerocopy",
    ] {
        let out = LINERATE.output(&[
            "bench",
            "stream",
            "--strategy",
            s,
            "--bytes",
            "3M",
            "--size",
            "1M",
            "--json",
        ]);
        let v = json(&out);
        assert_eq!(v["strategy"], s);
        assert_eq!(v["bytes"], 3 << 20, "{s}");
        assert_eq!(v["sink_bytes"], 3 << 20, "{s}: the sink's own count");
        assert!(v["throughput_mbps"].as_f64().unwrap() > 0.0);
        assert!(
            v["receiver"]["cpu_seconds"].is_number(),
            "{s}: receiver CPU reported"
        );
        assert!(v["counters"]["syscalls"].as_u64().unwrap() > 0);
        assert_eq!(v["path"], "loopback");
    }
}

#[test]
fn stream_human_output_has_the_netperf_columns() {
    let out = LINERATE.output(&[
        "bench", "stream", "-l", "0.3", "--size", "1M", "-s", "64K", "-S", "64K", "--chunk", "64K",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("10^6bits/s"), "{text}");
    assert!(text.contains("us/KB"), "{text}");
    assert!(text.contains("sendfile-chunk-64K"), "{text}");
    assert!(text.contains("wake-ups"), "{text}");
}

#[test]
fn stream_from_memory_and_from_a_given_file() {
    let v = json(&LINERATE.output(&[
        "bench",
        "stream",
        "--memory",
        "--size",
        "256K",
        "--bytes",
        "1M",
        "--strategy",
        "copy",
        "--json",
    ]));
    assert_eq!(v["bytes"], 1 << 20);
    assert!(v["source"].as_str().unwrap().starts_with("memory"));
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), vec![7u8; 100_000]).unwrap();
    let p = f.path().to_str().unwrap();
    let v = json(&LINERATE.output(&["bench", "stream", "-F", p, "--bytes", "250000", "--json"]));
    assert_eq!(v["bytes"], 250_000);
    assert_eq!(v["sink_bytes"], 250_000);
}

#[test]
fn sink_reports_what_a_remote_sender_sent() {
    let (mut sink, mut lines, addr) = start_sink(&["--connections", "1", "--discard", "splice"]);
    let v = json(&LINERATE.output(&[
        "bench", "stream", "--host", &addr, "--bytes", "2M", "--size", "1M", "--json",
    ]));
    assert_eq!(v["path"], "remote");
    assert_eq!(v["sink_bytes"], 2 << 20);
    let report: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(report["bytes"], 2 << 20);
    assert_eq!(report["discard"], "splice");
    assert!(sink.wait().unwrap().success());
}

/// Starts `linerate sink` with `args`; its stdout's lines and the address it announced.
fn start_sink(
    args: &[&str],
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
    String,
) {
    let mut sink = LINERATE
        .command()
        .args(["sink", "--listen", "127.0.0.1:0", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(sink.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .strip_prefix("listening on ")
        .expect("announces its address")
        .to_string();
    (sink, lines, addr)
}

/// Half-closes `c` and reads the sink's report from it.
fn report_of(c: &mut std::net::TcpStream) -> serde_json::Value {
    use std::io::Read;
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    serde_json::from_str(reply.trim()).unwrap_or_else(|e| panic!("{e}: {reply:?}"))
}

#[test]
fn sink_serves_many_connections_at_once_on_several_workers() {
    use std::io::Write;
    for discard in ["read", "splice"] {
        let (mut sink, mut lines, addr) =
            start_sink(&["--workers", "2", "--connections", "6", "--discard", discard]);
        // All six open at once, their bytes interleaved, each a different count.
        let mut conns: Vec<_> = (0..6)
            .map(|_| std::net::TcpStream::connect(&addr).unwrap())
            .collect();
        let chunk = vec![7u8; 10_000];
        for round in 0..12 {
            for (i, c) in conns.iter_mut().enumerate() {
                if round <= 2 * i {
                    c.write_all(&chunk).unwrap();
                }
            }
        }
        let mut want = std::collections::HashMap::new();
        for (i, c) in conns.iter_mut().enumerate() {
            let bytes = 10_000 * (2 * i as u64 + 1);
            let r = report_of(c);
            assert_eq!(r["bytes"], bytes, "{discard}: the sender's own report");
            assert_eq!(r["discard"], discard);
            want.insert(c.local_addr().unwrap().to_string(), bytes);
        }
        // The sink printed the same six, then ended by itself: its budget was spent.
        for _ in 0..6 {
            let r: serde_json::Value =
                serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            let peer = r["peer"].as_str().unwrap();
            assert_eq!(want.remove(peer), r["bytes"].as_u64(), "{discard}: {peer}");
        }
        assert!(want.is_empty());
        assert!(sink.wait().unwrap().success());
    }
}

#[test]
fn a_stopped_sink_reports_its_open_connections() {
    use std::io::Write;
    let (mut sink, _lines, addr) = start_sink(&["--workers", "1"]);
    let mut open = std::net::TcpStream::connect(&addr).unwrap();
    open.write_all(&[1u8; 100_000]).unwrap();
    // A second connection's report shows the worker has come past the first's bytes.
    let mut other = std::net::TcpStream::connect(&addr).unwrap();
    other.write_all(b"x").unwrap();
    assert_eq!(report_of(&mut other)["bytes"], 1);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let killed = Command::new("kill")
        .args(["-TERM", &sink.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut reply = String::new();
    std::io::Read::read_to_string(&mut open, &mut reply).unwrap();
    let r: serde_json::Value = serde_json::from_str(reply.trim()).unwrap();
    assert_eq!(r["bytes"], 100_000);
    assert!(sink.wait().unwrap().success());
}

fn assert_fails(args: &[&str], code: i32, needle: &str) {
    let out = LINERATE.output(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: stderr does not name {needle:?}: {err}"
    );
    assert!(
        out.stdout.is_empty(),
        "{args:?}: printed a result on failure"
    );
}

#[test]
fn bad_input_names_the_cause() {
    assert_fails(&["bench", "stream", "-s", "0"], 64, "-s");
    assert_fails(
        &["bench", "stream", "--strategy", "mmap"],
        64,
        "unknown strategy 'mmap'",
    );
    assert_fails(
        &["bench", "stream", "--chunk", "64K", "--strategy", "copy"],
        64,
        "--chunk",
    );
    assert_fails(&["bench", "stream", "-l", "0"], 64, "--length");
    assert_fails(&["bench", "stream", "--tso", "off"], 64, "--netns");
    assert_fails(
        &["bench", "stream", "--cpu-sender", "4096"],
        64,
        "--cpu-sender",
    );
    assert_fails(
        &["bench", "stream", "-F", "/nonexistent/file"],
        2,
        "/nonexistent/file",
    );
    assert_fails(&["bench", "stream", "-F", "/"], 2, "not a regular file");
    // A port nobody listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    assert_fails(
        &[
            "bench",
            "stream",
            "--host",
            &format!("127.0.0.1:{port}"),
            "--bytes",
            "1M",
        ],
        2,
        "refused",
    );
    assert_fails(&["sink", "--discard", "drop"], 64, "--discard");
    assert_fails(&["sink", "--workers", "0"], 64, "--workers");
    // nginx's habit: -t points to --check, not to clap's "use '-- -t'".
    assert_fails(&["serve", "-t"], 64, "use '--check'");
}

/// What a new user reads first says what the program is: a web server, its protocols,
/// in plain words (issue 43's first hour).
#[test]
fn help_and_man_pages_say_what_the_server_is() {
    let top = String::from_utf8_lossy(&LINERATE.output(&["--help"]).stdout).to_string();
    assert!(
        top.contains("static web server (HTTP/1.1, HTTP/2 and HTTPS)"),
        "{top}"
    );
    let serve = String::from_utf8_lossy(&LINERATE.output(&["serve", "--help"]).stdout).to_string();
    assert!(serve.contains("HTTP/1.1, HTTP/2 and HTTPS"), "{serve}");
    assert!(!serve.contains("transmit engine"), "jargon in serve --help");
    assert!(
        !serve.contains("ALPN http/1.1,"),
        "--tls-listen offers h2 too"
    );
    let http =
        String::from_utf8_lossy(&LINERATE.output(&["bench", "http", "--help"]).stdout).to_string();
    assert!(http.contains("HTTP/1.1 or HTTP/2"), "{http}");
    let dir = tempfile::tempdir().unwrap();
    assert!(LINERATE
        .output(&["man", dir.path().to_str().unwrap()])
        .status
        .success());
    let page = std::fs::read_to_string(dir.path().join("man1/linerate-serve.1")).unwrap();
    let name = page
        .split(".SH NAME")
        .nth(1)
        .and_then(|s| s.lines().nth(1))
        .unwrap_or_default();
    assert!(name.contains("static web server"), "NAME: {name}");
}

/// Runs the binary as user nobody; `None` when that cannot be arranged here.
fn run_as_nobody(args: &[&str]) -> Option<Output> {
    if !is_root() || Command::new("setpriv").arg("--version").output().is_err() {
        return None;
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            LINERATE.path(),
        ])
        .args(args)
        .output()
        .ok()?;
    // nobody may not be allowed into the build directory at all.
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("setpriv:") {
        return None;
    }
    Some(out)
}

#[test]
fn unreadable_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let p = d.path().join("secret");
    std::fs::write(&p, b"x").unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let Some(out) = run_as_nobody(&["bench", "stream", "-F", p.to_str().unwrap(), "--bytes", "1"])
    else {
        eprintln!("skipped: cannot run as an unprivileged user here (root reads any file)");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("secret") && err.contains("Permission denied"),
        "{err}"
    );
}

#[test]
fn netns_runs_between_two_namespaces_and_cleans_up() {
    if !is_root() {
        let out = LINERATE.output(&["bench", "stream", "--netns", "--bytes", "1M"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("needs root"));
        return;
    }
    for tso in ["on", "off"] {
        let child = LINERATE
            .command()
            .args([
                "bench", "stream", "--netns", "--tso", tso, "--bytes", "4M", "--size", "1M",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let v = json(&child.wait_with_output().unwrap());
        assert_eq!(v["path"], format!("netns tso {tso}"));
        assert_eq!(v["sink_bytes"], 4 << 20);
        linerate_testkit::assert_no_netns_left(pid);
    }
}

#[test]
fn netns_as_an_unprivileged_user_says_it_needs_root() {
    let Some(out) = run_as_nobody(&["bench", "stream", "--netns", "--bytes", "1M"]) else {
        eprintln!("skipped: cannot run as an unprivileged user here");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--netns needs root"), "{err}");
}

#[test]
fn ctrl_c_removes_namespaces_and_the_temporary_file() {
    if !is_root() {
        eprintln!("skipped: --netns needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let child = LINERATE
        .command()
        .args(["bench", "stream", "--netns", "-l", "60", "--size", "4M"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let ns_name = format!("lr{pid}s");
    // Wait until the run is under way: its namespace exists.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
        if String::from_utf8_lossy(&list.stdout).contains(&ns_name) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never created its namespace"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let killed = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    linerate_testkit::assert_no_netns_left(pid);
    let links = Command::new("ip").args(["link", "show"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains(&format!("lr{pid}")),
        "veth left behind"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn compare_interleaves_variants_and_prints_verdicts() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = LINERATE.output(&[
        "bench",
        "stream",
        "--bytes",
        "2M",
        "--size",
        "1M",
        "-i",
        "3",
        "--compare",
        "sendfile-4k,sendfile",
        "--out",
        out_dir.path().to_str().unwrap(),
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(
        v["variants"],
        serde_json::json!(["sendfile-4k", "sendfile"])
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0][0]["strategy"], "sendfile-4k");
    assert_eq!(runs[1][2]["strategy"], "sendfile");
    assert_eq!(
        v["samples"]["throughput"][1]["values"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let verdicts = v["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 2, "throughput and sender service demand");
    assert!(verdicts
        .iter()
        .all(|x| x["comparison"]["significant"].is_boolean()));
    // The rounds are interleaved, so each verdict also reads them as pairs (throughput is
    // never zero; a service demand could be, and then there is no paired reading).
    assert_eq!(verdicts[0]["metric"], "throughput");
    assert_eq!(verdicts[0]["paired"]["rounds"], 3);
    assert!(verdicts[0]["paired"]["sign_test_p"].as_f64().unwrap() >= 0.25);
    assert!(v["reports"]["sender_sd"].as_str().unwrap().contains("Avg"));
    // The sample files are ministat input: linerate stat reads them.
    let a = out_dir.path().join("sendfile-4k.sender_sd");
    let b = out_dir.path().join("sendfile.sender_sd");
    assert_eq!(std::fs::read_to_string(&a).unwrap().lines().count(), 3);
    let st = LINERATE.output(&["stat", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(st.status.success());
    assert!(String::from_utf8_lossy(&st.stdout).contains("confidence"));
}

#[test]
fn compare_human_output_ends_with_the_statistics() {
    let out = LINERATE.output(&[
        "bench",
        "stream",
        "--bytes",
        "1M",
        "--size",
        "1M",
        "-i",
        "3",
        "--compare",
        "copy,-m 16K",
        "--confidence",
        "90",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("throughput (10^6bits/s):"), "{text}");
    assert!(text.contains("sender_sd (sender us/KB):"), "{text}");
    assert!(
        text.contains("90.0% confidence") || text.contains("at 90% confidence"),
        "{text}"
    );
    // Under the throughput verdict, its paired reading.
    let verdict = text
        .lines()
        .position(|l| l.starts_with("throughput ") && l.contains(": -m 16K vs copy: "))
        .expect(&text);
    let paired = text.lines().nth(verdict + 1).unwrap();
    assert!(
        paired.starts_with("  paired: -m 16K better than copy in ")
            && paired.contains(" of 3 rounds (sign test p = ")
            && paired.contains("; -m 16K/copy geometric mean "),
        "{text}"
    );
}

#[test]
fn compare_refuses_bad_variants_before_running() {
    assert_fails(
        &["bench", "stream", "-i", "2", "--compare", "copy,sendfile"],
        64,
        "-i",
    );
    assert_fails(
        &["bench", "stream", "-i", "3", "--compare", "copy"],
        64,
        "--compare",
    );
    assert_fails(
        &["bench", "stream", "-i", "3", "--compare", "copy,mmap"],
        64,
        "mmap",
    );
    assert_fails(
        &[
            "bench",
            "stream",
            "-i",
            "3",
            "--confidence",
            "97",
            "--compare",
            "copy,sendfile",
        ],
        64,
        "--confidence",
    );
}

/// `linerate stat --help` prints what the command is and ministat's usage, exit 0; `-h`
/// stays ministat's invalid option (the differential tests hold it to the byte).
#[test]
fn stat_help_exits_0_and_dash_h_stays_ministats() {
    let out = LINERATE.output(&["stat", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("linerate stat: ministat"), "{text}");
    assert!(
        text.contains("Usage: ministat [-C column]") && text.contains("-q :"),
        "{text}"
    );
    let out = LINERATE.output(&["stat", "-h"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("ministat: invalid option -- 'h'"));
    let top = LINERATE.output(&["--help"]);
    assert!(String::from_utf8_lossy(&top.stdout).contains("linerate stat --help"));
}

#[test]
fn completions_and_man_pages_come_from_the_command_definitions() {
    let out = LINERATE.output(&["completions", "bash"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("complete -F"), "not a bash completion");
    for word in ["serve", "bench", "compare", "--variant", "--expect-status"] {
        assert!(text.contains(word), "bash completion lacks {word}");
    }
    let out = LINERATE.output(&["completions", "zsh"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("#compdef linerate"));
    assert_fails(&["completions", "tcsh"], 64, "tcsh");
    let dir = tempfile::tempdir().unwrap();
    let out = LINERATE.output(&["man", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let man = dir.path().join("man1");
    let serve = std::fs::read_to_string(man.join("linerate-serve.1")).unwrap();
    assert!(
        serve.starts_with(".ie"),
        "{}",
        &serve[..80.min(serve.len())]
    );
    assert!(serve.contains(".TH linerate-serve 1"), "no title line");
    assert!(serve.contains("disk\\-helpers"), "the flags are in it");
    for page in ["linerate.1", "linerate-bench-http.1", "linerate-stat.1"] {
        assert!(man.join(page).exists(), "{page}");
    }
    // The configuration file's page, in man5: its sites, its rules, every key.
    let conf = std::fs::read_to_string(dir.path().join("man5/linerate.toml.5")).unwrap();
    assert!(conf.contains(".TH linerate.toml 5"), "no title line");
    for word in [
        ".SH SITES",
        ".SH RULES",
        "[[site]]",
        "[[rule]]",
        "tls\\-listen",
        "disk-helpers",
    ] {
        assert!(conf.contains(word), "linerate.toml.5 lacks {word}");
    }
    // Every key of a site, a rule and a rule's cors table, as the file reads them.
    use linerate_server::settings::{
        keys_of, CorsSettings, LimitSettings, RuleSettings, SiteSettings,
    };
    for keys in [
        keys_of::<SiteSettings>(),
        keys_of::<RuleSettings>(),
        keys_of::<CorsSettings>(),
        keys_of::<LimitSettings>(),
    ] {
        assert!(keys.len() > 3, "{keys:?}");
        for k in keys {
            let line = format!("\n.BR {} ", k.replace('-', "\\-"));
            assert!(conf.contains(&line), "linerate.toml.5 lacks {k}");
        }
    }
    // Rendered by man without a warning, where man is.
    if std::process::Command::new("man")
        .arg("--version")
        .output()
        .is_ok()
    {
        let out = std::process::Command::new("man")
            .args(["--warnings", "-l"])
            .arg(dir.path().join("man5/linerate.toml.5"))
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.trim().is_empty(), "{err}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("[[site.rule]]"));
    }
    // Given a man1 directory (as the README once said), its parent is the manual.
    let old = tempfile::tempdir().unwrap();
    let out = LINERATE.output(&["man", old.path().join("man1").to_str().unwrap()]);
    assert!(out.status.success());
    assert!(old.path().join("man1/linerate-serve.1").exists());
    assert!(old.path().join("man5/linerate.toml.5").exists());
}
