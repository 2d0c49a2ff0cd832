//! `linerate bench compare` through the real binary: the peers started, loaded and
//! stopped, the statistics and the files written, and the HTML report opened in
//! headless Chromium. Tiny durations: a smoke run, never a timing. In CI the peers and
//! Chromium must be there (`scripts/test` installs them); elsewhere a missing one is
//! skipped with a note.

mod util;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use util::linerate;

fn installed(program: &str) -> bool {
    let found = Command::new("sh")
        .args([
            "-c",
            &format!("command -v {program} || test -x /usr/sbin/{program}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("CI").is_some() {
        panic!("{program} is missing under CI: scripts/test installs it");
    }
    found
}

/// No process whose command line holds `pattern` is running.
fn none_left(pattern: &str) -> bool {
    !Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Loads `page` in headless Chromium; returns the console lines it printed and whether
/// a screenshot was written.
fn chromium(page: &Path, shot: &Path) -> (Vec<String>, bool) {
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args([
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,2400",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
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
    let peers: Vec<&str> = ["nginx", "lighttpd", "h2o"]
        .into_iter()
        .filter(|p| installed(p))
        .collect();
    let out = tempfile::tempdir().unwrap();
    let (code, stdout, err) = linerate(&[
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
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let mut want = vec!["linerate"];
    want.extend(&peers);
    assert_eq!(names, want);
    let workloads = v["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 3);
    assert_eq!(workloads[1]["workload"], "/200K.bin");
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
        let verdicts = w["judged"]["verdicts"].as_array().unwrap();
        assert_eq!(verdicts.len(), 3 * peers.len());
        assert!(verdicts.iter().all(|x| x["baseline"] == "linerate"));
    }
    // The servers are gone: the measured processes, and anything started with a
    // configuration from the work directory.
    for w in workloads {
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
    assert!(
        none_left("linerate-compare-servers"),
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
    ] {
        let (code, _, err) = linerate(args);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = tempfile::tempdir().unwrap();
    let (code, _, err) = linerate(&[
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
