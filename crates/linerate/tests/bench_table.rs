//! `linerate bench stream --table` driven as a user would: a small grid on loopback (raw
//! results, sample files, the markdown table, the bars it could not judge), the same as
//! JSON, seed 000's bars over namespaces when root, and the usage errors. No timing is
//! asserted.

use std::process::Output;

use linerate_testkit::{is_root, Linerate};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

fn ok(out: &Output) -> (String, String) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    (stdout, stderr)
}

const SMALL: [&str; 16] = [
    "bench",
    "stream",
    "--table",
    "--paths",
    "loopback",
    "--bufs",
    "64K",
    "--sizes",
    "64K",
    "-i",
    "3",
    "--bytes",
    "1M",
    "--size",
    "1M",
    "--strategies",
];

#[test]
fn table_on_loopback_writes_raw_results_and_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = SMALL.to_vec();
    args.extend([
        "sendfile-4k,sendfile-chunk-64K,sendfile",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let (stdout, stderr) = ok(&LINERATE.output(&args));

    // One JSON object per run, with the cell's keys, the strategy innermost, each
    // strategy first in turn.
    let raw = std::fs::read_to_string(dir.path().join("raw.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).expect("raw.jsonl holds JSON lines"))
        .collect();
    assert_eq!(lines.len(), 9, "{raw}");
    let order = ["sendfile-4k", "sendfile-chunk-64K", "sendfile"];
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["strategy"], order[(i % 3 + i / 3) % 3], "line {i}");
        assert_eq!(l["run"], i / 3 + 1, "line {i}");
        assert_eq!(l["cell_path"], "loopback");
        assert_eq!(l["cell_buf"], "64K");
        assert_eq!(l["cell_m"], "64K");
        assert_eq!(l["path"], "loopback");
        assert_eq!(l["bytes"], 1 << 20);
        assert_eq!(l["sink_bytes"], 1 << 20);
    }
    assert!(
        stderr.contains("[1/9] run 1 loopback -s 64K -m 64K sendfile-4k"),
        "{stderr}"
    );
    assert!(stderr.contains("raw.jsonl (9 runs)"), "{stderr}");

    // The samples are ministat input, one value per round.
    let sd = dir
        .path()
        .join("samples/loopback-s64K-m64K-sendfile-chunk-64K.sender_sd");
    assert_eq!(std::fs::read_to_string(sd).unwrap().lines().count(), 3);

    // The table, in the shape BENCHMARKS.md shows.
    assert!(
        stdout.starts_with("## Seed 000's table on this machine\n"),
        "{stdout}"
    );
    assert!(stdout.contains(
        "### loopback\n\n| -s/-S | -m | strategy | 10^6 bits/s | sender SD | receiver SD | machine SD | calls/MB | wake-ups/MB | n |\n|---|---|---|---|---|---|---|---|---|---|\n| 64K | 64K | sendfile-4k | "
    ), "{stdout}");
    for s in order {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| 64K | 64K | {s} | ")))
            .unwrap_or_else(|| panic!("no row for {s}: {stdout}"));
        assert!(row.ends_with(" | 3 |"), "{row}");
        assert_eq!(row.matches(" ± ").count(), 6, "{row}");
    }
    assert!(!stdout.contains("### netns"), "{stdout}");

    // No namespace cells ran, so neither bar could be judged, and the output says so.
    let bars = &stdout[stdout.find("## The bars").expect("the bars part")..];
    assert!(!bars.contains("```"), "nothing was judged: {bars}");
    assert!(bars.contains("Not judged:"), "{bars}");
    for bar in [
        "- Bar 1, netns TSO on, -s 64K -m 64K: sendfile-4k vs sendfile: netns, TSO on not in --paths.",
        "- Bar 2, netns TSO on, -s 64K -m 64K: 64 KiB chunks vs sendfile: netns, TSO on not in --paths.",
    ] {
        assert!(bars.contains(bar), "{bars}");
    }
}

#[test]
fn table_json_has_the_cells_samples_and_bars() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = SMALL.to_vec();
    args.extend([
        "copy,sendfile",
        "--out",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    let (stdout, _) = ok(&LINERATE.output(&args));
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("--json prints JSON");
    assert_eq!(v["rounds"], 3);
    assert_eq!(v["paths"], serde_json::json!(["loopback"]));
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0]["label"], "loopback-s64K-m64K-copy");
    assert_eq!(cells[1]["strategy"], "sendfile");
    let samples = cells[1]["samples"].as_array().unwrap();
    let metrics: Vec<&str> = samples
        .iter()
        .map(|s| s["metric"].as_str().unwrap())
        .collect();
    assert_eq!(
        metrics,
        [
            "throughput",
            "sender_sd",
            "receiver_sd",
            "machine_sd",
            "syscalls_per_mb",
            "wakeups_per_mb"
        ]
    );
    assert_eq!(samples[0]["values"].as_array().unwrap().len(), 3);
    assert!(samples[0]["mean"].as_f64().unwrap() > 0.0);
    let bars = v["bars"].as_array().unwrap();
    assert_eq!(bars.len(), 2, "two bars at one buffer and send size");
    for b in bars {
        assert_eq!(b["outcome"]["status"], "not_judged", "{b}");
    }
    assert!(bars[1]["outcome"]["reason"]
        .as_str()
        .unwrap()
        .contains("not in --paths"));
}

#[test]
fn table_over_namespaces_judges_the_bars() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "stream",
        "--table",
        "--paths",
        "on",
        "--bufs",
        "64K",
        "--sizes",
        "1M",
        "--strategies",
        "sendfile-4k,sendfile",
        "-i",
        "3",
        "--bytes",
        "2M",
        "--size",
        "1M",
        "--out",
        dir.path().to_str().unwrap(),
    ];
    let out = LINERATE.output(&args);
    if !is_root() {
        // The one path is skipped with one line, and then nothing is left to run.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("skipping path on: --netns needs root"),
            "{err}"
        );
        return;
    }
    let (stdout, _) = ok(&out);
    assert!(stdout.contains("### netns, TSO on\n"), "{stdout}");
    let bar1 = "#### Bar 1, netns TSO on, -s 64K -m 1M: sendfile-4k vs sendfile\n\nSender service demand, µs/KB: sendfile-4k ";
    assert!(stdout.contains(bar1), "{stdout}");
    assert!(stdout.contains(
        "$ linerate stat -c 95 samples/on-s64K-m1M-sendfile-4k.sender_sd samples/on-s64K-m1M-sendfile.sender_sd\n"
    ), "{stdout}");
    assert!(
        stdout.contains("paired: on-s64K-m1M-sendfile.sender_sd better than on-s64K-m1M-sendfile-4k.sender_sd in "),
        "{stdout}"
    );
    assert!(stdout.contains(
        "- Bar 2, netns TSO on, -s 64K -m 1M: 64 KiB chunks vs sendfile: sendfile-chunk-64K not in --strategies."
    ), "{stdout}");
    // The printed report is what linerate stat prints from the sample files.
    let st = LINERATE
        .command()
        .args([
            "stat",
            "-c",
            "95",
            "samples/on-s64K-m1M-sendfile-4k.sender_sd",
            "samples/on-s64K-m1M-sendfile.sender_sd",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(st.status.success());
    assert!(
        stdout.contains(String::from_utf8_lossy(&st.stdout).trim_end()),
        "{stdout}"
    );
}

#[test]
fn table_usage_errors_name_the_flag() {
    let cases: [(&[&str], &str); 9] = [
        (&["--table", "--host", "127.0.0.1:9"], "--host"),
        (&["--table", "--strategy", "copy"], "--strategy"),
        (&["--table", "-s", "64K"], "-s"),
        (&["--table", "--netns"], "--netns"),
        (&["--table", "--compare", "copy,sendfile"], "--compare"),
        (&["--paths", "on"], "--table"),
        (
            &["--table", "--paths", "loopback,veth"],
            "--paths: unknown path 'veth'",
        ),
        (
            &["--table", "--strategies", "copy,mmap"],
            "--strategies: unknown strategy 'mmap'",
        ),
        (&["--table", "-i", "2"], "-i"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["bench", "stream"];
        args.extend_from_slice(extra);
        let out = LINERATE.output(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    for (flag, bad) in [("--bufs", "0"), ("--sizes", "64K,64K")] {
        let out = LINERATE.output(&["bench", "stream", "--table", flag, bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{flag}: {err}");
        assert!(err.contains(&format!("{flag}: ")), "{flag}: {err}");
    }
}
