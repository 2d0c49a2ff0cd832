//! The `linerate` binary driven as a user would: smoke runs of `bench stream` for every
//! strategy at tiny sizes, the sink's report, `--netns`, and the error exits.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

fn linerate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
}

fn run(args: &[&str]) -> Output {
    linerate()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("linerate runs")
}

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
        let out = run(&[
            "bench",
            "stream",
            "--strategy",
            s,
            "-n",
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
    let out = run(&[
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
    let v = json(&run(&[
        "bench",
        "stream",
        "--memory",
        "--size",
        "256K",
        "-n",
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
    let v = json(&run(&[
        "bench", "stream", "-F", p, "-n", "250000", "--json",
    ]));
    assert_eq!(v["bytes"], 250_000);
    assert_eq!(v["sink_bytes"], 250_000);
}

#[test]
fn sink_reports_what_a_remote_sender_sent() {
    let mut sink = linerate()
        .args([
            "sink",
            "--listen",
            "127.0.0.1:0",
            "--connections",
            "1",
            "--json",
            "--discard",
            "splice",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(sink.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .strip_prefix("listening on ")
        .expect("announces its address")
        .to_string();
    let v = json(&run(&[
        "bench", "stream", "-H", &addr, "-n", "2M", "--size", "1M", "--json",
    ]));
    assert_eq!(v["path"], "remote");
    assert_eq!(v["sink_bytes"], 2 << 20);
    let report: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(report["bytes"], 2 << 20);
    assert_eq!(report["discard"], "splice");
    assert!(sink.wait().unwrap().success());
}

fn assert_fails(args: &[&str], code: i32, needle: &str) {
    let out = run(args);
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
            "-H",
            &format!("127.0.0.1:{port}"),
            "-n",
            "1M",
        ],
        2,
        "refused",
    );
    assert_fails(&["sink", "--discard", "drop"], 64, "--discard");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
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
            env!("CARGO_BIN_EXE_linerate"),
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
    let Some(out) = run_as_nobody(&["bench", "stream", "-F", p.to_str().unwrap(), "-n", "1"])
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
        let out = run(&["bench", "stream", "--netns", "-n", "1M"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("needs root"));
        return;
    }
    for tso in ["on", "off"] {
        let v = json(&run(&[
            "bench", "stream", "--netns", "--tso", tso, "-n", "4M", "--size", "1M", "--json",
        ]));
        assert_eq!(v["path"], format!("netns tso {tso}"));
        assert_eq!(v["sink_bytes"], 4 << 20);
    }
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let me = String::from_utf8_lossy(&ns.stdout);
    assert!(
        !me.lines().any(|l| l.starts_with("lr") && l.contains('s')),
        "namespaces left behind: {me}"
    );
}

#[test]
fn netns_as_an_unprivileged_user_says_it_needs_root() {
    let Some(out) = run_as_nobody(&["bench", "stream", "--netns", "-n", "1M"]) else {
        eprintln!("skipped: cannot run as an unprivileged user here");
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--netns needs root"), "{err}");
}
