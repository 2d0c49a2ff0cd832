//! `--steer cpu`: each new connection goes to the worker pinned to the CPU that
//! processed its SYN. On loopback a packet is processed on the CPU of the thread that
//! sent it, so client threads pinned to each CPU stand in for a NIC's queues. The
//! status page and the metrics count every connection accepted on its receive CPU or
//! elsewhere: all on it with steering, some elsewhere without (the kernel's hash), and
//! still all after a reload (a new generation of workers on the same sockets).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use linerate_testkit::{docroot, fetch, per_strategy, put, variant_args, Linerate, Server};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(connections_are_served_on_the_cpu_that_receives_them);

/// `n` connections from a thread pinned to each CPU of `cpus`, one request each.
fn connect_from_each_cpu(addr: SocketAddr, cpus: &[usize], n: usize) {
    std::thread::scope(|s| {
        for &cpu in cpus {
            s.spawn(move || {
                linerate_sys::cpu::pin_thread_to_cpu(cpu).unwrap();
                for _ in 0..n {
                    let mut c = TcpStream::connect(addr).unwrap();
                    c.write_all(b"GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .unwrap();
                    let mut got = Vec::new();
                    c.read_to_end(&mut got).unwrap();
                    assert!(got.ends_with(b"steered"), "{got:?}");
                }
            });
        }
    });
}

fn counts(server: &Server) -> (u64, u64) {
    let v: serde_json::Value =
        serde_json::from_slice(&fetch(server.addr, "/.status", "").body).unwrap();
    // The status request itself came from this (unpinned) thread: it may count either
    // way, and is taken off below.
    (
        v["connections_on_receive_cpu"].as_u64().unwrap(),
        v["connections_off_receive_cpu"].as_u64().unwrap(),
    )
}

fn connections_are_served_on_the_cpu_that_receives_them(case: &str) {
    let cpus = linerate_sys::cpu::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        return;
    }
    let cpus = &cpus[..2];
    let root = docroot();
    put(root.path(), "f", b"steered");
    let n = 20;
    for steer in ["cpu", "off"] {
        let args = [
            &[
                "--workers",
                "2",
                "--steer",
                steer,
                "--status-path",
                "/.status",
            ][..],
            &["--metrics-path", "/metrics", "--error-log-level", "info"],
            &variant_args(case),
        ]
        .concat();
        let server = LINERATE.start(root.path(), &args);
        connect_from_each_cpu(server.addr, cpus, n);
        let (on, off) = counts(&server);
        let all = (2 * n) as u64;
        // The status fetch's own connection counts one way or the other.
        assert_eq!(on + off, all + 1, "{case} steer {steer}: {on} + {off}");
        if steer == "cpu" {
            assert!(
                on >= all,
                "{case}: every pinned client's connection on its CPU: {on}/{off}"
            );
            let v: serde_json::Value =
                serde_json::from_slice(&fetch(server.addr, "/.status", "").body).unwrap();
            assert_eq!(v["steer"], "cpu");
            // A reload: the next generation's workers take over, steered the same.
            server.signal("HUP");
            server.wait_stderr("reloaded");
            connect_from_each_cpu(server.addr, cpus, n);
            let (on2, off2) = counts(&server);
            assert!(on2 - on >= all, "{case} after a reload: {on2}/{off2}");
            let metrics = String::from_utf8(fetch(server.addr, "/metrics", "").body).unwrap();
            let same: u64 = metrics
                .lines()
                .find_map(|l| {
                    l.strip_prefix("linerate_connections_receive_cpu_total{cpu=\"same\"} ")
                })
                .unwrap_or_else(|| panic!("{metrics}"))
                .parse()
                .unwrap();
            assert!(same >= 2 * all, "{metrics}");
        } else {
            // The kernel's hash: with 40 connections, both workers get some from the
            // other CPU (all on one side by chance: about 1 in 10^12).
            assert!(
                off >= 1,
                "{case}: without steering some are elsewhere: {on}/{off}"
            );
            let v: serde_json::Value =
                serde_json::from_slice(&fetch(server.addr, "/.status", "").body).unwrap();
            assert_eq!(v["steer"], "off");
        }
    }
    // More workers than CPUs: the program would name one per CPU and starve the
    // others, so the hash picks, and the status page says so.
    let many = (linerate_sys::cpu::allowed_cpus().unwrap().len() + 1).to_string();
    let server = LINERATE.start(
        root.path(),
        &[
            &[
                "--workers",
                &many,
                "--steer",
                "cpu",
                "--status-path",
                "/.status",
            ][..],
            &variant_args(case),
        ]
        .concat(),
    );
    let v: serde_json::Value =
        serde_json::from_slice(&fetch(server.addr, "/.status", "").body).unwrap();
    assert!(v["steer"].as_str().unwrap().starts_with("off ("), "{v}");
    drop(server);
    // Without pinning, steering cannot be asked for.
    let (code, _, err) = LINERATE.run(&[
        "serve",
        root.path().to_str().unwrap(),
        "--steer",
        "cpu",
        "--pin=false",
    ]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--steer cpu needs --pin"), "{err}");
}
