//! `linerate bench compare` through the real binary: the peers started, loaded and
//! stopped, the statistics and the files written, and the HTML report opened in
//! headless Chromium. Tiny durations: a smoke run, never a timing. In CI the peers and
//! Chromium must be there (`scripts/test` installs them); elsewhere a missing one is
//! skipped with a note.

use std::path::Path;
use std::process::Command;

use linerate_testkit::{headless_chromium, installed, Linerate};
use serde_json::Value;

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// No process whose command line holds `pattern` is running.
fn none_left(pattern: &str) -> bool {
    !Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Every server measured in the comparison `v` has exited.
fn assert_servers_gone(v: &Value) {
    for w in v["workloads"].as_array().unwrap() {
        for r in w["runs"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|x| x.as_array().unwrap())
        {
            let pid = r["server"]["pid"].as_u64().unwrap();
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "{pid} still running"
            );
        }
    }
}

/// Loads `page` in headless Chromium; returns the console lines it printed and whether
/// a screenshot was written.
fn chromium(page: &Path, shot: &Path) -> (Vec<String>, bool) {
    let shot_arg = format!("--screenshot={}", shot.display());
    let url = format!("file://{}", page.display());
    let out = headless_chromium(&[
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1200,2400",
        &shot_arg,
        &url,
    ])
    .expect("chromium is installed");
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let shot_ok = std::fs::metadata(shot).is_ok_and(|m| m.len() > 1000);
    (console, shot_ok)
}

#[test]
fn compares_every_installed_peer_and_writes_a_report_chromium_opens() {
    let peers: Vec<&str> = ["nginx", "lighttpd", "h2o", "caddy"]
        .into_iter()
        .filter(|p| installed(p))
        .collect();
    let out = tempfile::tempdir().unwrap();
    // Its own temporary directory: the servers' work directories are under it, so no
    // other test's servers are mistaken for its own below.
    let tmp = tempfile::tempdir().unwrap();
    let o = LINERATE
        .command()
        .env("TMPDIR", tmp.path())
        .args([
            "bench",
            "compare",
            "--sizes",
            "1K,200K",
            "--mix",
            "specweb99",
            "--dirs",
            "1",
            "-d",
            "0.2",
            "-c",
            "4",
            "-i",
            "3",
            "--out",
            out.path().to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = server_field(&v, "name");
    let mut want = vec!["linerate"];
    want.extend(&peers);
    assert_eq!(names, want);
    let workloads = v["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 3);
    assert_eq!(workloads[1]["workload"], "/200K.bin");
    assert_eq!(v["warmup"], 1, "one round run first and discarded");
    assert_eq!(v["path"], "loopback");
    // The build and the machine, for a reader to trust the numbers.
    let m = &v["machine"];
    assert!(!m["commit"].as_str().unwrap().is_empty(), "{m}");
    assert_eq!(
        m["profile"],
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    assert!(m["date"].as_str().unwrap().ends_with('Z'), "{m}");
    assert!(m["memory_bytes"].as_u64().unwrap() > 0, "{m}");
    assert_eq!(m["kernel"], v["kernel"]);
    for w in workloads {
        let runs = w["runs"].as_array().unwrap();
        assert_eq!(runs.len(), names.len());
        for (server, rs) in names.iter().zip(runs) {
            let rs = rs.as_array().unwrap();
            assert_eq!(rs.len(), 3);
            for r in rs {
                let ok = r["statuses"]["200"].as_u64().unwrap_or(0);
                assert!(ok > 0, "{server}: {r}");
                assert_eq!(r["requests"].as_u64().unwrap(), ok, "{server}: only 200s");
                let errors: u64 = r["errors"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|x| x.as_u64().unwrap())
                    .sum();
                assert_eq!(errors, 0, "{server}: {r}");
                assert!(
                    r["server"]["cpu_seconds"].as_f64().unwrap() > 0.0,
                    "{server}"
                );
            }
        }
        // Every peer is judged against linerate on the three metrics.
        // Four metrics when the servers are pinned (their CPU's whole busy time is
        // judged too), three otherwise.
        let judged = if runs[0][0]["server"]["core"].is_null() {
            3
        } else {
            4
        };
        let verdicts = w["judged"]["verdicts"].as_array().unwrap();
        assert_eq!(verdicts.len(), judged * peers.len());
        assert!(verdicts.iter().all(|x| x["baseline"] == "linerate"));
    }
    // The servers are gone: the measured processes, and anything started with a
    // configuration from the work directory.
    assert_servers_gone(&v);
    assert!(
        none_left(&tmp.path().display().to_string()),
        "a server is still running"
    );
    // The files.
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(json["servers"], v["servers"]);
    let samples = out
        .path()
        .join("samples/_1K.bin.d/linerate.requests_per_second");
    assert_eq!(
        std::fs::read_to_string(&samples).unwrap().lines().count(),
        3
    );
    let page = out.path().join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<svg").count(),
        2 + 3,
        "two summaries, three latency charts"
    );
    assert!(!html.contains("<script"), "self-contained and static");
    assert!(html.contains(&format!("linerate {}", m["commit"].as_str().unwrap())));
    assert!(html.contains("Path: loopback."));
    for column in [
        "MB/s",
        "p50",
        "p99.9",
        "max",
        "server CPU busy",
        "client CPU busy",
    ] {
        assert!(html.contains(&format!("<th>{column}</th>")), "{column}");
    }
    // One verdict matrix per workload: a row per peer, a cell per metric.
    assert_eq!(
        html.matches("<table class=\"verdicts\">").count(),
        if peers.is_empty() { 0 } else { 3 }
    );
    assert!(html.contains("whiskers: lowest to highest run"));
    for p in &peers {
        assert!(html.contains(&format!("<td>{p}</td>")));
    }
    // Chromium opens it without a console message, and it sees console messages when
    // a page makes them.
    if installed("chromium") {
        let (console, shot) = chromium(&page, &out.path().join("report.png"));
        assert!(shot, "no screenshot");
        assert!(console.is_empty(), "{console:?}");
        let bad = out.path().join("bad.html");
        std::fs::write(
            &bad,
            "<!DOCTYPE html><p>x</p><script>console.error('seen')</script>",
        )
        .unwrap();
        let (console, _) = chromium(&bad, &out.path().join("bad.png"));
        assert!(console.iter().any(|l| l.contains("seen")), "{console:?}");
    }
}

#[test]
fn bad_arguments_and_servers_that_cannot_start() {
    for (args, want) in [
        (
            &["bench", "compare", "--servers", "apache"][..],
            "--servers",
        ),
        (
            &["bench", "compare", "--server-cpu", "4096"][..],
            "--server-cpu 4096",
        ),
        (&["bench", "compare", "-i", "2"][..], "--iterations"),
        (&["bench", "compare", "--cpu", "4096"][..], "--cpu 4096"),
        (
            &["bench", "compare", "--tls", "--client", "wrk"][..],
            "--tls",
        ),
        (
            &[
                "bench", "compare", "--h2", "--client", "wrk", "--sizes", "1K",
            ][..],
            "--h2: wrk speaks HTTP/1.1",
        ),
        (
            &["bench", "compare", "--client", "h2load", "--sizes", "1K"][..],
            "give --h2",
        ),
        (
            &[
                "bench",
                "compare",
                "--h2",
                "--client",
                "h2load",
                "--mix",
                "specweb99",
            ][..],
            "--client h2load",
        ),
        (&["bench", "compare", "-m", "4"][..], "--h2"),
        (&["bench", "compare", "--h2", "--close"][..], "--close"),
    ] {
        let (code, _, err) = LINERATE.run(args);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = tempfile::tempdir().unwrap();
    let (code, _, err) = LINERATE.run(&[
        "bench",
        "compare",
        "--servers",
        "linerate",
        "--sizes",
        "1K",
        "-d",
        "0.2",
        "-i",
        "3",
        "--linerate-args",
        "--transmit nonsense",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("starting linerate") && err.contains("--transmit"),
        "{err}"
    );
    assert!(!out.path().join("report.html").exists());
}

/// One field of every server of a comparison's JSON, in order.
fn server_field<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[field].as_str().unwrap())
        .collect()
}

/// The sum of a run's error counts.
fn errors(r: &Value) -> u64 {
    r["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|x| x.as_u64().unwrap())
        .sum()
}

#[test]
fn variants_and_builds_of_linerate_each_a_server_and_wrk_as_a_second_client() {
    let out = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_linerate");
    let bin = format!("old={exe}");
    let wrk = installed("wrk");
    let clients = if wrk { "builtin,wrk" } else { "builtin" };
    let (code, stdout, err) = LINERATE.run(&[
        "bench",
        "compare",
        "--servers",
        "linerate",
        "--variant",
        "base=",
        "--variant",
        "splice=--transmit splice --lowat 0",
        "--bin",
        &bin,
        "--client",
        clients,
        "--sizes",
        "1K",
        "-d",
        "0.2",
        "-c",
        "2",
        "-i",
        "3",
        "--out",
        out.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let names = server_field(&v, "name");
    let want: Vec<String> = ["base", "splice", "old"]
        .iter()
        .flat_map(|s| {
            if wrk {
                vec![format!("{s}/builtin"), format!("{s}/wrk")]
            } else {
                vec![s.to_string()]
            }
        })
        .collect();
    assert_eq!(names, want);
    // Each variant ran with its own flags, the build given by --bin with its own path.
    let configs = server_field(&v, "config");
    let splice = names.iter().position(|n| n.starts_with("splice")).unwrap();
    assert!(
        configs[splice].contains("\"--transmit\" \"splice\""),
        "{}",
        configs[splice]
    );
    assert!(!configs[0].contains("splice"), "{}", configs[0]);
    let w = &v["workloads"][0];
    for (name, rs) in names.iter().zip(w["runs"].as_array().unwrap()) {
        for r in rs.as_array().unwrap() {
            assert!(r["requests"].as_u64().unwrap() > 0, "{name}: {r}");
            assert_eq!(errors(r), 0, "{name}: {r}");
            if name.ends_with("/wrk") {
                assert_eq!(r["wrk"]["from_400"], 0, "{name}: {r}");
                assert_eq!(r["wrk"]["below_400"], r["requests"], "{name}: {r}");
            } else {
                assert!(r.get("wrk").is_none(), "{name}: {r}");
            }
            assert!(r["server"]["cpu_seconds"].as_f64().unwrap() > 0.0);
        }
    }
    // Judged against the first column, with the paired reading of each round.
    let judged = if w["runs"][0][0]["server"]["core"].is_null() {
        3
    } else {
        4
    };
    let verdicts = w["judged"]["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), judged * (names.len() - 1));
    for x in verdicts {
        assert_eq!(x["baseline"], names[0]);
        assert_eq!(x["paired"]["rounds"], 3, "{x}");
    }
    // The servers are gone (by pid: another test's comparison may be running).
    for r in w["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|x| x.as_array().unwrap())
    {
        let pid = r["server"]["pid"].as_u64().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "{pid} still running"
        );
    }
}

#[test]
fn wrong_variants_and_clients_are_usage_errors() {
    for (args, want) in [
        (&["--variant", "=--lowat 0"][..], "--variant"),
        (&["--variant", "a b=--lowat 0"][..], "--variant"),
        (&["--variant", "nolowat"][..], "NAME=FLAGS"),
        (
            &["--variant", "a=", "--variant", "a=--lowat 0"][..],
            "named twice",
        ),
        (&["--bin", "a="][..], "--bin"),
        (&["--client", "ab"][..], "--client"),
        (
            &["--client", "wrk", "--mix", "specweb99"][..],
            "--client wrk",
        ),
        (&["--client", "wrk", "--pipeline", "4"][..], "--client wrk"),
        (&["--client", "wrk", "-n", "100"][..], "--client wrk"),
    ] {
        // Bounded, should one of them be taken: one server, one small size, short.
        let mut all = vec!["bench", "compare", "--servers", "linerate", "-c", "1"];
        all.extend(["--sizes", "1K", "-i", "3"]);
        if !args.contains(&"-n") {
            all.extend(["-d", "0.1"]);
        }
        all.extend(args);
        let (code, _, err) = LINERATE.run(&all);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `bench cold` once at a tiny size: both default variants, each round's cold files
/// dropped from the page cache and fetched whole beside a hot load, every metric judged.
#[test]
fn bench_cold_compares_the_disk_helpers_with_inline_reads() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, err) = LINERATE.run(&[
        "bench",
        "cold",
        "--dir",
        dir.path().to_str().unwrap(),
        "--files",
        "3",
        "--size",
        "256K",
        "-d",
        "0.6",
        "-c",
        "2",
        "-i",
        "3",
        "--out",
        out.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(server_field(&v, "name"), ["helpers", "inline"]);
    assert!(server_field(&v, "config")[1].contains("\"--disk-helpers\" \"0\""));
    for rs in v["runs"].as_array().unwrap() {
        let rs = rs.as_array().unwrap();
        assert_eq!(rs.len(), 3);
        for r in rs {
            assert_eq!(r["cold"]["requests"], 3, "{r}");
            assert_eq!(r["cold"]["body_bytes"], 3 * 256 * 1024, "{r}");
            assert!(r["hot"]["requests"].as_u64().unwrap() > 0, "{r}");
            assert_eq!(errors(&r["hot"]) + errors(&r["cold"]), 0, "{r}");
        }
    }
    let verdicts = v["judged"]["verdicts"].as_array().unwrap();
    assert_eq!(
        verdicts.len(),
        5,
        "five metrics, one variant against the baseline"
    );
    assert!(verdicts.iter().all(|x| x["baseline"] == "helpers"));
    // Peers are not what it measures; a tmpfs directory cannot be made cold.
    let (code, _, err) = LINERATE.run(&["bench", "cold", "--servers", "nginx"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--servers nginx"), "{err}");
    if std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some("/dev/shm") && l.contains("tmpfs"))
    {
        let shm = tempfile::tempdir_in("/dev/shm").unwrap();
        let (code, _, err) = LINERATE.run(&[
            "bench",
            "cold",
            "--dir",
            shm.path().to_str().unwrap(),
            "--files",
            "1",
            "--size",
            "64K",
            "-d",
            "0.2",
            "-i",
            "3",
        ]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("disk file system"), "{err}");
    }
}

/// `--gzip static`: every server sends the `.gz` beside `SIZE.js` (checked byte for
/// byte by length and CRC), lighttpd sits out; `--gzip dynamic` runs with wrk and
/// refuses the builtin client (it reads no chunked answers).
#[test]
fn gzip_static_checks_the_precompressed_bodies_and_dynamic_needs_wrk() {
    let out = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let (code, stdout, err) = LINERATE.run(&[
        "bench",
        "compare",
        "--gzip",
        "static",
        "--warmup",
        "0",
        "--sizes",
        "20K",
        "--root",
        root.path().to_str().unwrap(),
        "-d",
        "0.2",
        "-c",
        "4",
        "-i",
        "3",
        "--out",
        out.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let names = server_field(&v, "name");
    assert_eq!(v["warmup"], 0);
    assert!(!names.contains(&"lighttpd"), "{names:?}");
    assert!(names.contains(&"linerate"));
    if installed("lighttpd") {
        let skipped = v["skipped"].to_string();
        assert!(
            skipped.contains("no setting to send precompressed"),
            "{skipped}"
        );
    }
    // Caddy sends its precompressed files chunked, which the builtin client reads not.
    assert!(!names.contains(&"caddy"), "{names:?}");
    if installed("caddy") {
        let skipped = v["skipped"].to_string();
        assert!(skipped.contains("chunked"), "{skipped}");
    }
    let text = std::fs::read(root.path().join("20K.js")).unwrap();
    let gz = std::fs::read(root.path().join("20K.js.gz")).unwrap();
    assert_eq!(text.len(), 20 << 10);
    assert!(
        gz.len() * 3 < text.len() && gz.len() * 6 > text.len(),
        "{}",
        gz.len()
    );
    for w in v["workloads"].as_array().unwrap() {
        for runs in w["runs"].as_array().unwrap() {
            for r in runs.as_array().unwrap() {
                for (kind, n) in r["errors"].as_object().unwrap() {
                    assert_eq!(n, 0, "{kind}: {r}");
                }
            }
        }
    }
    let (code, _, err) = LINERATE.run(&[
        "bench", "compare", "--gzip", "dynamic", "--sizes", "20K", "-i", "3",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--client wrk"), "{err}");
}

/// `--connections 1,4` sweeps: each size at each count is a workload of its own, run
/// with that many connections; `bench http` takes one count.
#[test]
fn a_connections_list_sweeps_concurrency() {
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, err) = LINERATE.run(&[
        "bench",
        "compare",
        "--servers",
        "linerate",
        "--sizes",
        "1K",
        "--connections",
        "1,4",
        "--warmup",
        "0",
        "-d",
        "0.2",
        "-i",
        "3",
        "--out",
        out.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = v["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["workload"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["/1K.bin c=1", "/1K.bin c=4"]);
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert!(
        html.contains("1K requests/s by connections"),
        "a throughput-versus-concurrency chart"
    );
    for (w, want) in v["workloads"].as_array().unwrap().iter().zip([1, 4]) {
        for r in w["runs"][0].as_array().unwrap() {
            assert_eq!(r["connections"], want, "{r}");
        }
    }
    let (code, _, err) = LINERATE.run(&["bench", "http", "http://127.0.0.1:9/", "-c", "1,4"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("bench http takes one count"), "{err}");
    let (code, _, err) = LINERATE.run(&["bench", "compare", "-c", "4,4"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("named twice"), "{err}");
}

/// The ports each server listened on, from its configuration (`config` in the JSON).
fn listen_addresses(v: &Value) -> Vec<String> {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["config"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn netns_puts_the_servers_behind_a_veth_pair_and_removes_it() {
    if !linerate_testkit::is_root() {
        let (code, _, err) = LINERATE.run(&["bench", "compare", "--netns", "--sizes", "1K"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--netns needs root"), "{err}");
        return;
    }
    let peers: Vec<&str> = ["lighttpd", "nginx"]
        .into_iter()
        .filter(|p| installed(p))
        .collect();
    let mut servers = vec!["linerate"];
    servers.extend(&peers);
    for tso in ["on", "off"] {
        let out = tempfile::tempdir().unwrap();
        let child = LINERATE
            .command()
            .args([
                "bench",
                "compare",
                "--netns",
                "--tso",
                tso,
                "--servers",
                &servers.join(","),
                "--sizes",
                "1K,300K",
                "--warmup",
                "0",
                "-d",
                "0.2",
                "-c",
                "4",
                "-i",
                "3",
                "--out",
                out.path().to_str().unwrap(),
                "--json",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["path"], format!("netns tso {tso}"));
        assert_eq!(server_field(&v, "name"), servers);
        // Every server listened on the servers' end of the pair, each on its own port,
        // and each answered with 200s for CPU of its own.
        for c in listen_addresses(&v) {
            assert!(c.contains("198.18.0.1"), "{c}");
        }
        for w in v["workloads"].as_array().unwrap() {
            for (server, rs) in servers.iter().zip(w["runs"].as_array().unwrap()) {
                let mut ports = Vec::new();
                for r in rs.as_array().unwrap() {
                    let target = r["target"].as_str().unwrap();
                    assert!(target.contains("198.18.0.1:"), "{server}: {target}");
                    ports.push(target.to_string());
                    assert!(r["statuses"]["200"].as_u64().unwrap_or(0) > 0, "{r}");
                    assert_eq!(errors(r), 0, "{server}: {r}");
                    assert!(
                        r["server"]["cpu_seconds"].as_f64().unwrap() > 0.0,
                        "{server} did no work: another server answered for it"
                    );
                    // The servers' CPU as a whole: their ACKs are processed there.
                    let core = &r["server"]["core"];
                    assert!(core["busy_seconds"].as_f64().unwrap() > 0.0, "{r}");
                    assert!(core["softirq_seconds"].as_f64().unwrap() >= 0.0, "{r}");
                }
                ports.dedup();
                assert_eq!(ports.len(), 1, "{server}: {ports:?}");
            }
            let targets: Vec<&str> = w["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|rs| rs[0]["target"].as_str().unwrap())
                .collect();
            let mut unique = targets.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), targets.len(), "one port each: {targets:?}");
        }
        linerate_testkit::assert_no_netns_left(pid);
        assert_servers_gone(&v);
    }
}

/// `--tls`: every installed peer (lighttpd only with its TLS module) and linerate over
/// HTTPS with one certificate, every answer a 200 through TLS, and each server's
/// configuration in the report saying so.
#[test]
fn tls_runs_every_server_over_https_with_one_certificate() {
    let mut peers: Vec<&str> = ["nginx", "h2o"]
        .into_iter()
        .filter(|p| installed(p))
        .collect();
    if std::path::Path::new("/usr/lib/lighttpd/mod_openssl.so").exists() && installed("lighttpd") {
        peers.push("lighttpd");
    }
    let servers = [&["linerate"][..], &peers].concat().join(",");
    let (out, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = LINERATE
        .command()
        .env("TMPDIR", tmp.path())
        .args(["bench", "compare", "--tls", "--servers", &servers])
        .args([
            "--sizes", "1K,100K", "-d", "0.2", "-c", "4", "-i", "3", "--json",
        ])
        .args(["--out", out.path().to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = server_field(&v, "name");
    assert_eq!(names.len(), 1 + peers.len(), "{names:?}: {err}");
    for w in v["workloads"].as_array().unwrap() {
        for (server, rs) in names.iter().zip(w["runs"].as_array().unwrap()) {
            for r in rs.as_array().unwrap() {
                assert!(r["target"].as_str().unwrap().starts_with("https://"), "{r}");
                let n = r["requests"].as_u64().unwrap();
                assert!(n > 0, "{server}: {r}");
                assert_eq!(r["statuses"]["200"].as_u64(), Some(n), "{server}: {r}");
                assert_eq!(r["tls_handshakes"].as_u64(), Some(4), "{server}: {r}");
            }
        }
    }
    let configs = server_field(&v, "config");
    assert!(configs.iter().any(|c| c.contains("ssl_certificate")) || peers.is_empty());
}

/// `--h2`: every installed server speaks HTTP/2 to both HTTP/2 clients, in clear
/// (prior knowledge) and over TLS (ALPN), each configured for it; a run that is not
/// HTTP/2 would fail (the built-in client refuses a server that does not pick h2,
/// h2load's negotiated protocol is checked).
#[test]
fn h2_runs_every_installed_server_over_h2c_and_h2_with_both_clients() {
    let mut servers = vec!["linerate"];
    servers.extend(
        ["nginx", "lighttpd", "h2o", "caddy"]
            .into_iter()
            .filter(|p| installed(p)),
    );
    let have_h2load = installed("h2load");
    let clients = if have_h2load {
        "builtin,h2load"
    } else {
        "builtin"
    };
    let list = servers.join(",");
    for tls in [false, true] {
        let out = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec![
            "bench",
            "compare",
            "--h2",
            "-m",
            "4",
            "--servers",
            &list,
            "--client",
            clients,
            "--sizes",
            "1K",
            "-d",
            "0.3",
            "-c",
            "2",
            "-i",
            "3",
            "--warmup",
            "0",
            "--json",
            "--out",
        ];
        args.push(out.path().to_str().unwrap());
        if tls {
            args.push("--tls");
        }
        let o = LINERATE
            .command()
            .env("TMPDIR", tmp.path())
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "tls {tls}: {err}");
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let names = server_field(&v, "name");
        let per_client = if have_h2load { 2 } else { 1 };
        assert_eq!(names.len(), servers.len() * per_client, "{names:?}: {err}");
        for (name, runs) in names
            .iter()
            .zip(v["workloads"][0]["runs"].as_array().unwrap())
        {
            for r in runs.as_array().unwrap() {
                assert_eq!(r["protocol"], "h2", "{name}: {r}");
                let n = r["requests"].as_u64().unwrap();
                assert!(n > 0, "{name}: {r}");
                assert_eq!(r["statuses"]["200"].as_u64().unwrap(), n, "{name}: {r}");
                assert_eq!(errors(r), 0, "{name}: {r}");
                // Whole 1 KiB bodies (h2load counts DATA bytes of answers it finished
                // and of those cut at the end of its run).
                assert!(r["body_bytes"].as_u64().unwrap() >= n * 1024, "{name}: {r}");
                assert!(r["latency_us"]["p99"].as_u64().unwrap() > 0, "{name}: {r}");
            }
        }
        if have_h2load {
            assert!(names.contains(&"linerate/h2load"), "{names:?}");
        }
        assert_servers_gone(&v);
    }
}

/// Held by each test that runs HTTP/3 servers: a port found free for a server's TCP
/// may have its UDP taken by another test's linerate (whose HTTP/3 sockets share it by
/// SO_REUSEPORT), and Caddy's QUIC would then not bind while the client's reached that
/// other server.
static H3: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn h3_alone() -> std::sync::MutexGuard<'static, ()> {
    H3.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `--h3`: HTTP/3 to the servers that speak it (linerate, and Caddy where installed),
/// with the one certificate over TLS; nginx is left out, said so; every run is
/// HTTP/3 (the built-in client speaks nothing else with --h3), whole bodies, no error.
#[test]
fn h3_runs_linerate_and_caddy_and_leaves_out_the_servers_without_it() {
    let _alone = h3_alone();
    let caddy = installed("caddy");
    let mut servers = vec!["linerate"];
    if caddy {
        servers.push("caddy");
    }
    servers.push("nginx");
    let list = servers.join(",");
    // Another build of a peer is a column of its own (here the same Caddy again, as a
    // current one built from source would be).
    let again = if caddy {
        let path = Command::new("sh")
            .args(["-c", "command -v caddy"])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&path.stdout).trim().to_string();
        vec![
            "--peer-bin".to_string(),
            format!("caddy-again=caddy:{path}"),
        ]
    } else {
        Vec::new()
    };
    let mut args: Vec<String> = ["--tls", "--h3", "-m", "4", "--servers", &list]
        .iter()
        .chain(&["--sizes", "1K,100K", "-d", "0.3", "-c", "2", "-i", "3"])
        .chain(&["--warmup", "0"])
        .map(|a| a.to_string())
        .collect();
    args.extend(again);
    let (v, err) = compare_json(&args);
    let names = server_field(&v, "name");
    let mut want: Vec<&str> = servers.iter().copied().filter(|s| *s != "nginx").collect();
    if caddy {
        want.push("caddy-again");
    }
    assert_eq!(names, want, "{err}");
    assert!(
        v["skipped"].to_string().contains("no HTTP/3"),
        "{}",
        v["skipped"]
    );
    for (w, size) in v["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .zip([1024, 102_400])
    {
        for (name, runs) in names.iter().zip(w["runs"].as_array().unwrap()) {
            for r in runs.as_array().unwrap() {
                assert_eq!(r["protocol"], "h3", "{name}: {r}");
                let n = r["requests"].as_u64().unwrap();
                assert!(n > 0, "{name}: {r}");
                assert_eq!(r["statuses"]["200"].as_u64().unwrap(), n, "{name}: {r}");
                assert_eq!(errors(r), 0, "{name}: {r}");
                assert_eq!(r["body_bytes"].as_u64().unwrap(), n * size, "{name}: {r}");
            }
        }
    }
    assert_servers_gone(&v);
    // HTTP/3 needs TLS, and the built-in client.
    for (args, want) in [
        (&["bench", "compare", "--h3"][..], "--tls"),
        (
            &["bench", "compare", "--h3", "--tls", "--client", "wrk"],
            "--h3",
        ),
        (
            &["bench", "compare", "--peer-bin", "x=apache:/bin/true"],
            "--peer-bin",
        ),
        (
            &["bench", "compare", "--peer-bin", "x=linerate:/bin/true"],
            "--bin NAME=PATH",
        ),
    ] {
        let (code, _, err) = LINERATE.run(args);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `--h3 --close`: a QUIC connection per request, each a full handshake (none
/// resumed: the client keeps no session), under every server that speaks HTTP/3.
#[test]
fn h3_with_close_makes_a_connection_and_a_handshake_per_request() {
    let _alone = h3_alone();
    let servers = if installed("caddy") {
        "linerate,caddy"
    } else {
        "linerate"
    };
    let args: Vec<String> = ["--tls", "--h3", "--close", "--servers", servers]
        .iter()
        .chain(&["--sizes", "1K", "-d", "0.3", "-c", "2", "-i", "3"])
        .chain(&["--warmup", "0"])
        .map(|a| a.to_string())
        .collect();
    let (v, err) = compare_json(&args);
    let names = server_field(&v, "name");
    assert_eq!(names.len(), servers.split(',').count(), "{err}");
    for (name, runs) in names
        .iter()
        .zip(v["workloads"][0]["runs"].as_array().unwrap())
    {
        for r in runs.as_array().unwrap() {
            let n = r["requests"].as_u64().unwrap();
            assert!(n > 0, "{name}: {r}");
            assert_eq!(errors(r), 0, "{name}: {r}");
            // A connection per request, and at the end at most one per load
            // connection still opening.
            let opened = r["connections_opened"].as_u64().unwrap();
            assert!(
                (n..=n + 2).contains(&opened),
                "{name}: {opened} for {n}: {r}"
            );
            let handshakes = r["tls_handshakes"].as_u64().unwrap();
            assert!((n..=opened).contains(&handshakes), "{name}: {r}");
        }
    }
    assert_servers_gone(&v);
}

/// `--protocols h2,h3`: each server and protocol a column of one interleaved run
/// (linerate's HTTP/3 beside its own HTTP/2), every run of a column in its protocol;
/// a server without HTTP/3 keeps its HTTP/2 column and its HTTP/3 one is left out,
/// said so; misuse named.
#[test]
fn protocols_put_each_server_and_protocol_in_a_column() {
    let _alone = h3_alone();
    let nginx = installed("nginx");
    let servers = if nginx { "linerate,nginx" } else { "linerate" };
    let args: Vec<String> = [
        "--tls",
        "--protocols",
        "h2,h3",
        "-m",
        "2",
        "--servers",
        servers,
    ]
    .iter()
    .chain(&[
        "--sizes", "1K", "-d", "0.3", "-c", "2", "-i", "3", "--warmup", "0",
    ])
    .map(|a| a.to_string())
    .collect();
    let (v, err) = compare_json(&args);
    let names = server_field(&v, "name");
    let mut want = vec!["linerate/h2", "linerate/h3"];
    if nginx {
        want.push("nginx/h2");
        assert!(
            v["skipped"].to_string().contains("nginx/h3"),
            "{}",
            v["skipped"]
        );
    }
    assert_eq!(names, want, "{err}");
    for (name, runs) in names
        .iter()
        .zip(v["workloads"][0]["runs"].as_array().unwrap())
    {
        let protocol = name.rsplit('/').next().unwrap();
        for r in runs.as_array().unwrap() {
            assert_eq!(r["protocol"], protocol, "{name}: {r}");
            assert_eq!(r["pipeline"], 2, "{name}: {r}");
            let n = r["requests"].as_u64().unwrap();
            assert!(n > 0, "{name}: {r}");
            assert_eq!(r["statuses"]["200"].as_u64().unwrap(), n, "{name}: {r}");
            assert_eq!(errors(r), 0, "{name}: {r}");
        }
    }
    assert_servers_gone(&v);
    for (args, want) in [
        (&["bench", "compare", "--protocols", "h2,h3"][..], "--tls"),
        (&["bench", "compare", "--protocols", "h2,h4"], "--protocols"),
        (&["bench", "compare", "--protocols", "h2,h2"], "twice"),
        (&["bench", "compare", "--protocols", "h2", "--h3"], "--h3"),
    ] {
        let (code, _, err) = LINERATE.run(args);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `linerate bench compare ARGS --json` with its own TMPDIR and output directory,
/// which must succeed: its JSON, and what it said on standard error.
fn compare_json(args: &[String]) -> (Value, String) {
    let (out, tmp) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = LINERATE
        .command()
        .env("TMPDIR", tmp.path())
        .args(["bench", "compare", "--json", "--out"])
        .arg(out.path())
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    (serde_json::from_slice(&o.stdout).unwrap(), err)
}
