//! `linerate bench conns` (tcpp's model) driven as a user would, at tiny sizes: both
//! directions against a sink it starts (one worker and several), its JSON and human
//! output, `--netns`, `-i --compare` with ministat's report, the usage errors, and the
//! sink's `--send` against a plain client.

use std::io::Read;
use std::process::{Output, Stdio};

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
fn both_directions_move_every_byte_of_every_connection() {
    for (dir, workers) in [
        ("--send", "1"),
        ("--receive", "1"),
        ("--send", "2"),
        ("--receive", "2"),
    ] {
        let v = json(&LINERATE.output(&[
            "bench",
            "conns",
            dir,
            "-p",
            "2",
            "-c",
            "5",
            "-b",
            "64K",
            "--sink-workers",
            workers,
            "--json",
        ]));
        let what = format!("{dir} with {workers} sink workers: {v}");
        assert_eq!(v["direction"], &dir[2..], "{what}");
        assert_eq!(v["connections"], 10, "{what}");
        assert_eq!(v["bytes"], 10 * 65536, "{what}");
        assert_eq!(v["processes"], 2, "{what}");
        assert_eq!(v["connections_per_process"], 5, "{what}");
        assert_eq!(v["path"], "loopback", "{what}");
        assert!(v["elapsed_seconds"].as_f64().unwrap() > 0.0, "{what}");
        assert!(v["throughput_mbps"].as_f64().unwrap() > 0.0, "{what}");
        assert!(
            v["connections_per_second"].as_f64().unwrap() > 0.0,
            "{what}"
        );
        assert!(v["client"]["cpu_seconds"].is_number(), "{what}");
        assert!(v["sink"]["cpu_seconds"].is_number(), "{what}");
        assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1, "{what}");
    }
}

#[test]
fn the_human_output_says_what_tcpp_says_and_each_sides_cpu() {
    let out = LINERATE.output(&["bench", "conns", "-p", "1", "-c", "3", "-b", "100K"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "CONNS client → sink over loopback: 1 processes × 3 connections × 102400 bytes",
        "3 connections (",
        "307200 bytes (",
        "client ",
        "sink ",
        "machine ",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
}

#[test]
fn netns_runs_between_two_namespaces_and_cleans_up() {
    if !is_root() {
        let out = LINERATE.output(&["bench", "conns", "--netns", "-c", "1", "-b", "1K"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("needs root"));
        return;
    }
    for dir in ["--send", "--receive"] {
        let child = LINERATE
            .command()
            .args([
                "bench", "conns", "--netns", dir, "-p", "2", "-c", "4", "-b", "256K", "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let v = json(&child.wait_with_output().unwrap());
        assert_eq!(v["path"], "netns tso on", "{v}");
        assert_eq!(v["connections"], 8, "{v}");
        assert_eq!(v["bytes"], 8 * 262_144, "{v}");
        linerate_testkit::assert_no_netns_left(pid);
    }
}

/// The sink's workers pinned one per CPU, client threads on each CPU: with `--steer
/// cpu` every connection is served on the CPU that processed its packets; with
/// `--steer off` (the kernel's hash) some are not. On loopback a packet is processed
/// on its sender's CPU; over `--netns --queues 2` the flow's hash picks the CPU, as a
/// NIC's RSS does.
#[test]
fn steering_serves_every_connection_on_its_receive_cpu() {
    let cpus = linerate_sys::cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        return;
    }
    let clients = format!("{},{}", cpus[0], cpus[1]);
    let mut paths = vec![vec![]];
    if is_root() {
        paths.push(vec!["--netns", "--queues", "2"]);
    }
    for path in &paths {
        for (mode, all_on) in [("cpu", true), ("off", false)] {
            let args = [
                &["bench", "conns", "-p", "2", "-c", "20", "-b", "64K"][..],
                &[
                    "--sink-workers",
                    "2",
                    "--cpu-client",
                    &clients,
                    "--steer",
                    mode,
                ],
                path,
                &["--json"],
            ]
            .concat();
            let v = json(&LINERATE.output(&args));
            let (on, off) = (
                v["sink_on_receive_cpu"].as_u64().unwrap(),
                v["sink_off_receive_cpu"].as_u64().unwrap(),
            );
            assert_eq!(on + off, 40, "{path:?} {mode}: {v}");
            if all_on {
                assert_eq!(off, 0, "{path:?}: every one on its receive CPU: {v}");
            } else {
                // 40 connections all on one side by the hash: about 1 in 10^12.
                assert!(off > 0 && on > 0, "{path:?}: the hash splits them: {v}");
            }
        }
    }
    // One sink worker steers too (a group of one).
    let v = json(&LINERATE.output(&[
        "bench", "conns", "-p", "1", "-c", "4", "-b", "1K", "--steer", "cpu", "--json",
    ]));
    assert_eq!(
        v["sink_on_receive_cpu"].as_u64().unwrap() + v["sink_off_receive_cpu"].as_u64().unwrap(),
        4,
        "{v}"
    );
    // Without --steer the sink's workers are not pinned: nothing to count.
    let v = json(&LINERATE.output(&["bench", "conns", "-c", "2", "-b", "1K", "--json"]));
    assert!(v["sink_on_receive_cpu"].is_null(), "{v}");
}

#[test]
fn compare_interleaves_variants_and_judges_them_with_ministat() {
    let out = LINERATE.output(&[
        "bench",
        "conns",
        "-p",
        "1",
        "-c",
        "2",
        "-b",
        "32K",
        "-i",
        "3",
        "--compare",
        "-c 2,-c 4",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    // ministat's table for each metric, then a verdict line per metric.
    assert!(text.contains("throughput (10^6bits/s):"), "{text}");
    assert!(text.contains("    N           Min           Max"), "{text}");
    assert!(text.contains("vs -c 2"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("] round ").count(), 6, "{err}");
    let v = json(&LINERATE.output(&[
        "bench", "conns", "-p", "1", "-c", "2", "-b", "32K", "-i", "3", "--json",
    ]));
    assert_eq!(v["iterations"], 3);
    assert_eq!(v["runs"][0].as_array().unwrap().len(), 3);
    assert_eq!(v["runs"][0][2]["connections"], 2);
}

fn assert_usage(args: &[&str], needle: &str) {
    let out = LINERATE.output(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {needle:?} in {err}");
    assert!(out.stdout.is_empty(), "{args:?}: printed a result");
}

#[test]
fn bad_input_names_the_flag_and_exits_64() {
    assert_usage(&["bench", "conns", "-p", "0"], "--processes");
    assert_usage(&["bench", "conns", "-c", "0"], "--connections");
    assert_usage(&["bench", "conns", "-b", "0"], "--bytes");
    assert_usage(&["bench", "conns", "--send", "--receive"], "--receive");
    assert_usage(&["bench", "conns", "--tso", "off"], "--netns");
    assert_usage(&["bench", "conns", "--cpu-client", "4096"], "--cpu-client");
    assert_usage(&["bench", "conns", "-i", "2"], "-i");
    assert_usage(
        &["bench", "conns", "-i", "3", "--compare", "-c 2"],
        "--compare",
    );
    assert_usage(
        &["bench", "conns", "-i", "3", "--compare", "-c 2,-c 0"],
        "--compare variant '-c 0'",
    );
    assert_usage(&["bench", "conns", "--queues", "2"], "--netns");
    assert_usage(&["bench", "conns", "--steer", "rss"], "--steer");
    assert_usage(
        &["bench", "conns", "--steer", "cpu", "--cpu-sink", "1"],
        "--cpu-sink",
    );
    assert_usage(
        &["bench", "conns", "--steer", "cpu", "--host", "127.0.0.1:9"],
        "--steer",
    );
}

#[test]
fn a_sink_with_send_writes_that_many_bytes_then_ends_its_side() {
    let mut sink = LINERATE
        .command()
        .args([
            "sink",
            "--listen",
            "127.0.0.1:0",
            "--send",
            "300000",
            "--connections",
            "1",
            "--json",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(sink.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 300_000);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i % (256 << 10) % 251) as u8));
    let mut report = String::new();
    std::io::BufRead::read_line(&mut out, &mut report).unwrap();
    let r: serde_json::Value = serde_json::from_str(report.trim()).unwrap();
    assert_eq!(r["sent_bytes"], 300_000, "{r}");
    assert_eq!(r["bytes"], 0, "{r}");
    assert!(sink.wait().unwrap().success());
}
