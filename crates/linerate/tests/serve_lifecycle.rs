//! `linerate serve` from start to stop: start-up errors (a FIFO as the root, a missing
//! root, a bad configuration file), `serve --help` against the flags in src/main.rs, the
//! small-file settings and memory budget, files truncated, replaced or deleted while
//! they are sent, the access log (CLF and JSON, one exact line per request, one line per
//! aborted response with the bytes that left), SIGUSR1 reopening it, signals sent by
//! habit, and SIGTERM with responses in flight, idle connections and a client that never
//! reads.
//!
//! Tests taking a transmit strategy run once per strategy (one `#[test]` each:
//! `sigusr1_reopens_the_access_log_by_its_path_and_loses_no_line::splice`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use linerate_testkit::{
    assert_bytes_eq, docroot, family_rss_kib, fetch, imf_date, log_lines, pattern, per_strategy,
    put, req, unix_now, wait_log_lines, End, Linerate, Server, MIB,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md S1.
    a_file_truncated_during_a_send_gives_a_prefix_then_a_close,
    // Rules: docs/http.md S2.
    a_file_replaced_or_deleted_during_a_send_is_served_from_the_open_file,
    // Rules: docs/http.md E4.
    sigterm_finishes_the_response_in_flight_closes_idle_ones_and_exits_0,
    // Rules: docs/http.md E6.
    the_health_path_turns_503_at_sigterm_and_the_listener_stays_for_the_shutdown_delay,
    // Rules: docs/http.md E4.
    sigterm_drains_an_idle_client_that_keeps_its_side_open_for_2_s_not_the_shutdown_timeout,
    // Rules: docs/http.md E4.
    sigterm_with_a_client_that_never_reads_exits_0_after_the_shutdown_timeout,
    // Rules: docs/http.md R3.
    the_access_log_holds_one_exact_line_per_request_in_order,
    // Rules: docs/http.md E4.
    signals_sent_by_habit_leave_the_server_serving_and_lose_no_log_line,
    // Rules: docs/http.md E4.
    sigusr1_reopens_the_access_log_by_its_path_and_loses_no_line,
    // Rules: docs/http.md E4.
    aborted_responses_have_one_access_log_line_with_the_bytes_that_left,
    small_file_contents_stay_within_their_memory_budget,
);

/// `linerate serve` with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    LINERATE.serve(root, transmit, extra)
}

/// A 64 MiB file cut to 2 MiB while its response is going out, while another file with
/// distinctive bytes is served beside it. `copy` reads the file itself: every byte the
/// client gets is the file's, at its offset, then the connection closes. The
/// page-reference strategies send pages already queued as the page cache holds them when
/// they leave (README, Known behaviour): past the new end such a byte is the old byte or a
/// zero, never anything else (never the other file's), before the close.
fn a_file_truncated_during_a_send_gives_a_prefix_then_a_close(transmit: &str) {
    let root = docroot();
    let content = pattern(64 * MIB, 41);
    let new_len = 2 * MIB;
    let path = root.path().join("big.bin");
    fs::write(&path, &content).unwrap();
    // Never a zero byte, and never equal to `content` at the same offset.
    let other: Vec<u8> = content
        .iter()
        .take(8 * MIB)
        .map(|&b| if b == 0xA5 { 0x5A } else { 0xA5 })
        .collect();
    put(root.path(), "other.bin", &other);
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    let h = c.read_head();
    assert_eq!(
        (h.status, h.content_length()),
        (200, Some(content.len() as u64))
    );
    let mut got = Vec::new();
    for _ in 0..16 {
        let (b, end) = c.read_upto(64 << 10);
        assert_eq!(end, End::Open);
        got.extend_from_slice(&b);
        thread::sleep(Duration::from_millis(5));
    }
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(new_len as u64)
        .unwrap();
    // Pages freed by the cut are taken again by another file.
    for _ in 0..2 {
        let r = fetch(server.addr, "/other.bin", "");
        assert_eq!(r.status, 200);
        assert_bytes_eq(&r.body, &other, "the other file");
    }
    // Reads until the connection ends: EOF, or the reset the server closes with so that
    // bytes still queued in its socket are not delivered (conn.rs, After::Reset).
    let (rest, end) = c.read_upto(usize::MAX);
    got.extend_from_slice(&rest);
    assert_ne!(end, End::Open);
    assert!(
        got.len() < content.len(),
        "all {} bytes arrived though the file shrank to 2 MiB",
        got.len()
    );
    if transmit == "copy" {
        assert_bytes_eq(&got, &content[..got.len()], "copy: the file's own bytes");
    } else {
        let prefix = got.len().min(new_len);
        assert_bytes_eq(&got[..prefix], &content[..prefix], "before the new end");
        if let Some(i) = (prefix..got.len()).find(|&i| got[i] != 0 && got[i] != content[i]) {
            panic!(
                "byte {i} past the new end is {:#04x}: neither the old byte {:#04x} nor zero{}",
                got[i],
                content[i],
                if matches!(got[i], 0xA5 | 0x5A) {
                    " (the other file's)"
                } else {
                    ""
                }
            );
        }
    }
    // The cut response left nothing behind in what the next one goes through.
    let r = fetch(server.addr, "/other.bin", "");
    assert_bytes_eq(&r.body, &other, "the other file after the cut");
    let r = fetch(server.addr, "/f.txt", "");
    assert_eq!(r.status, 200);
}

fn a_file_replaced_or_deleted_during_a_send_is_served_from_the_open_file(transmit: &str) {
    let root = docroot();
    // Sizes differ: a Content-Length or an end taken from the path, not from `fstat` of
    // the open file, shows.
    let old = pattern(16 * MIB, 21);
    let new = pattern(9 * MIB + 123, 22);
    let path = root.path().join("big.bin");
    fs::write(&path, &old).unwrap();
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();

    // Replaced by a rename.
    c.send(&req("GET", "/big.bin", ""));
    let h = c.read_head();
    assert_eq!(
        (h.status, h.content_length()),
        (200, Some(old.len() as u64))
    );
    let (mut got, end) = c.read_upto(MIB);
    assert_eq!(end, End::Open);
    let tmp = root.path().join("big.bin.new");
    fs::write(&tmp, &new).unwrap();
    fs::rename(&tmp, &path).unwrap();
    let (rest, end) = c.read_upto(old.len() - got.len());
    got.extend_from_slice(&rest);
    assert_eq!(end, End::Open, "cut after {} bytes", got.len());
    assert_bytes_eq(&got, &old, "replaced during the send");

    // The next request gets the new file; deleted during its send, it is served whole.
    c.send(&req("GET", "/big.bin", ""));
    let h = c.read_head();
    assert_eq!(
        (h.status, h.content_length()),
        (200, Some(new.len() as u64))
    );
    let (mut got, end) = c.read_upto(MIB);
    assert_eq!(end, End::Open);
    fs::remove_file(&path).unwrap();
    let (rest, end) = c.read_upto(new.len() - got.len());
    got.extend_from_slice(&rest);
    assert_eq!(end, End::Open, "cut after {} bytes", got.len());
    assert_bytes_eq(&got, &new, "deleted during the send");
    assert_eq!(fetch(server.addr, "/big.bin", "").status, 404);

    // Grown during the send: exactly the length announced; the next request sees the
    // new length.
    fs::write(&path, &old).unwrap();
    c.send(&req("GET", "/big.bin", ""));
    let h = c.read_head();
    assert_eq!(
        (h.status, h.content_length()),
        (200, Some(old.len() as u64))
    );
    let (mut got, end) = c.read_upto(MIB);
    assert_eq!(end, End::Open);
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&new)
        .unwrap();
    let (rest, end) = c.read_upto(old.len() - got.len());
    got.extend_from_slice(&rest);
    assert_eq!(end, End::Open, "cut after {} bytes", got.len());
    assert_bytes_eq(&got, &old, "grown during the send");
    c.send(&req("GET", "/big.bin", "Range: bytes=0-3\r\n"));
    let r = c.response();
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 0-3/{}", old.len() + new.len()).as_str())
    );
    assert_eq!(r.body, &old[..4]);
}

fn sigterm_finishes_the_response_in_flight_closes_idle_ones_and_exits_0(transmit: &str) {
    let root = docroot();
    let big = pattern(64 * MIB, 31);
    put(root.path(), "big.bin", &big);
    put(root.path(), "f.txt", b"F\n");
    let mut server = serve(root.path(), transmit, &[]);
    let addr = server.addr;

    let mut idle = server.conn();
    assert_eq!(idle.get("/f.txt", "").status, 200);
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    let h = c.read_head();
    assert_eq!(
        (h.status, h.content_length()),
        (200, Some(big.len() as u64))
    );
    let (mut got, end) = c.read_upto(MIB);
    assert_eq!(end, End::Open);

    server.sigterm();
    let t = Instant::now();
    idle.expect_eof();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "idle connection closed {:?} after SIGTERM",
        t.elapsed()
    );

    // New connections are no longer served.
    let late = thread::spawn(move || -> Vec<u8> {
        let Ok(mut s) = TcpStream::connect(addr) else {
            return Vec::new();
        };
        s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let _ = s.write_all(b"GET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        got
    });

    let (rest, end) = c.read_upto(big.len() - got.len());
    got.extend_from_slice(&rest);
    assert_eq!(end, End::Open, "response cut after {} bytes", got.len());
    assert_bytes_eq(&got, &big, "the response in flight at SIGTERM");
    let (after, end) = c.read_upto(usize::MAX);
    assert!(after.is_empty(), "{} bytes after the response", after.len());
    assert_eq!(end, End::Eof);

    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("exits after SIGTERM");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let late = late.join().unwrap();
    assert!(
        !late.starts_with(b"HTTP/1.1 200"),
        "a connection made after SIGTERM was served"
    );
}

fn sigterm_drains_an_idle_client_that_keeps_its_side_open_for_2_s_not_the_shutdown_timeout(
    transmit: &str,
) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let mut server = serve(root.path(), transmit, &["--shutdown-timeout", "20"]);
    let mut idle = server.conn();
    assert_eq!(idle.get("/f.txt", "").status, 200);
    server.sigterm();
    let t = Instant::now();
    // The server ends its side at once and reads on for its drain (2 s) while the
    // client, holding its own side open, never answers the FIN.
    idle.expect_eof();
    let status = server
        .wait_exit(Duration::from_secs(8))
        .expect("exits after the drain, long before --shutdown-timeout 20");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "exited {:?} after SIGTERM: the drain was not waited for",
        t.elapsed()
    );
    drop(idle);
}

fn sigterm_with_a_client_that_never_reads_exits_0_after_the_shutdown_timeout(transmit: &str) {
    let root = docroot();
    let len: u64 = 256 << 20;
    File::create(root.path().join("zeros"))
        .unwrap()
        .set_len(len)
        .unwrap();
    put(root.path(), "f.txt", b"F\n");
    let mut server = serve(root.path(), transmit, &["--shutdown-timeout", "1"]);
    let addr = server.addr;
    let mut idle = server.conn();
    assert_eq!(idle.get("/f.txt", "").status, 200);
    let mut stalled = server.conn();
    stalled.send(&req("GET", "/zeros", ""));
    // Its buffers fill; it never reads until the server is gone.
    thread::sleep(Duration::from_millis(300));

    server.sigterm();
    let t = Instant::now();
    idle.expect_eof();
    // The idle close comes after the listener is closed: a new connection is refused.
    match TcpStream::connect(addr) {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}"),
        Ok(_) => panic!("a connection made after SIGTERM was accepted by the kernel"),
    }
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("exits within 5 s of SIGTERM with --shutdown-timeout 1");
    let took = t.elapsed();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        took >= Duration::from_millis(500),
        "exited {took:?} after SIGTERM: the response in flight did not get its second"
    );
    // The stalled response was cut, not finished nor padded: a head, zeros, then EOF.
    let h = stalled.read_head();
    assert_eq!((h.status, h.content_length()), (200, Some(len)));
    let (body, end) = stalled.read_upto(len as usize);
    assert_eq!(end, End::Eof, "after {} bytes", body.len());
    assert!((body.len() as u64) < len);
    assert!(body.iter().all(|&b| b == 0), "bytes other than the file's");
}

/// Checks one access-log line against what is known of its request. `format`: "clf" or
/// "json". All the log assertions are here, so a change of format is one change.
/// One access-log line: CLF writes `-` for no body bytes and `"` and `\` as `\xHH`;
/// JSON lines carry the host (the absolute-form authority, else `Host`).
fn check_access_log_line(
    format: &str,
    line: &str,
    request_line: &str,
    host: Option<&str>,
    status: u16,
    bytes: u64,
) {
    match format {
        "combined" => {
            // CLF, then `"REFERER" "USER-AGENT"` ("-" when absent).
            let fields: Vec<&str> = line.rsplitn(3, " \"").collect();
            assert_eq!(fields.len(), 3, "{line:?}");
            assert!(
                fields[0].ends_with('"') && fields[1].ends_with('"'),
                "{line:?}"
            );
            check_access_log_line("clf", fields[2], request_line, host, status, bytes);
        }
        "clf" => {
            // 127.0.0.1 - - [22/Nov/2026:18:20:12 +0000] "GET / HTTP/1.1" 200 2
            let (before, rest) = line
                .split_once(" [")
                .unwrap_or_else(|| panic!("CLF line {line:?}"));
            assert_eq!(before, "127.0.0.1 - -", "{line:?}");
            let (time, rest) = rest.split_once("] ").unwrap();
            check_clf_time(time);
            let escaped = request_line.replace('\\', "\\x5C").replace('"', "\\x22");
            let bytes = match bytes {
                0 => "-".to_string(),
                n => n.to_string(),
            };
            assert_eq!(rest, format!("\"{escaped}\" {status} {bytes}"), "{line:?}");
        }
        "json" => {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("JSON line {line:?}: {e}"));
            let obj = v.as_object().expect("a JSON object");
            let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            keys.sort();
            assert_eq!(
                keys,
                [
                    "bytes",
                    "duration_us",
                    "host",
                    "method",
                    "path",
                    "referer",
                    "remote",
                    "request",
                    "status",
                    "time",
                    "transmit",
                    "user_agent"
                ],
                "{line:?}"
            );
            let mut words = request_line.split(' ');
            assert_eq!(v["method"].as_str(), words.next(), "{line:?}");
            assert_eq!(v["path"].as_str(), words.next(), "{line:?}");
            assert!(v["duration_us"].is_u64(), "{line:?}");
            assert_eq!(v["remote"], "127.0.0.1", "{line:?}");
            assert_eq!(v["host"].as_str(), host, "{line:?}");
            assert_eq!(v["request"], request_line, "{line:?}");
            assert_eq!(v["status"], status, "{line:?}");
            assert_eq!(v["bytes"], bytes, "{line:?}");
            let time = v["time"].as_str().expect("time is a string");
            let t = humantime::parse_rfc3339(time)
                .unwrap_or_else(|e| panic!("time {time:?} is no ISO 8601 time: {e}"));
            let t = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
            assert!((t - unix_now()).abs() <= 30, "time {time:?} is not now");
        }
        other => panic!("format {other}"),
    }
}

/// `10/Oct/2000:13:55:36 +0000`, and now: the CLF form of a second within 30 s of now,
/// made from the fields of its IMF-fixdate (`Tue, 10 Oct 2000 13:55:36 GMT`).
fn check_clf_time(time: &str) {
    let clf = |t: i64| {
        let imf = imf_date(t);
        let f: Vec<&str> = imf.split(' ').collect();
        format!("{}/{}/{}:{} +0000", f[1], f[2], f[3], f[4])
    };
    let now = unix_now();
    assert!(
        (now - 30..=now + 30).any(|t| clf(t) == time),
        "CLF time {time:?} is not now"
    );
}

fn the_access_log_holds_one_exact_line_per_request_in_order(transmit: &str) {
    let root = docroot();
    let content = pattern(40_000, 61);
    put(root.path(), "f.txt", b"F\n");
    put(root.path(), "big.bin", &content);
    let logs = docroot();
    for format in ["clf", "combined", "json"] {
        let log = logs.path().join(format!("access.{format}"));
        let log_arg = log.to_str().unwrap();
        let server = serve(
            root.path(),
            transmit,
            &["--access-log", log_arg, "--log-format", format],
        );
        let mut c = server.conn();
        // (request line, host, status, body bytes)
        let mut want: Vec<(String, Option<&str>, u16, u64)> = Vec::new();
        let r = c.get("/f.txt", "");
        assert_eq!(r.status, 200);
        want.push(("GET /f.txt HTTP/1.1".into(), Some("t"), 200, 2));
        let r = c.head("/f.txt", "");
        assert_eq!(r.status, 200);
        want.push(("HEAD /f.txt HTTP/1.1".into(), Some("t"), 200, 0));
        let r = c.get("/missing?x=1", "");
        assert_eq!(r.status, 404);
        want.push(("GET /missing?x=1 HTTP/1.1".into(), Some("t"), 404, 14));
        let r = c.get("/big.bin", "");
        assert_eq!(r.status, 200);
        want.push((
            "GET /big.bin HTTP/1.1".into(),
            Some("t"),
            200,
            content.len() as u64,
        ));
        let r = c.get("/big.bin", "Range: bytes=10-19\r\n");
        assert_eq!(r.status, 206);
        want.push(("GET /big.bin HTTP/1.1".into(), Some("t"), 206, 10));
        let etag = r.must("etag").to_string();
        let r = c.get("/big.bin", &format!("If-None-Match: {etag}\r\n"));
        assert_eq!(r.status, 304);
        want.push(("GET /big.bin HTTP/1.1".into(), Some("t"), 304, 0));
        let r = c.head("/missing", "");
        assert_eq!(r.status, 404);
        want.push(("HEAD /missing HTTP/1.1".into(), Some("t"), 404, 0));
        // An absolute-form target's authority wins over Host, in the log too.
        c.send(b"GET http://other.example:8080/f.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        want.push((
            "GET /f.txt HTTP/1.1".into(),
            Some("other.example:8080"),
            200,
            2,
        ));
        // A request line with a quote and a backslash, escaped in CLF.
        let r = c.get("/q\"\\x", "");
        assert_eq!(r.status, 404);
        want.push(("GET /q\"\\x HTTP/1.1".into(), Some("t"), 404, 14));
        // The client's User-Agent and Referer, written by combined and json.
        let r = c.get(
            "/f.txt",
            "User-Agent: probe/1 \"q\"\r\nReferer: http://r.example/\r\n",
        );
        assert_eq!(r.status, 200);
        want.push(("GET /f.txt HTTP/1.1".into(), Some("t"), 200, 2));
        c.send(b"GET /f.txt HTTP/1.0\r\n\r\n");
        let r = c.response();
        assert_eq!(r.status, 200);
        want.push(("GET /f.txt HTTP/1.0".into(), None, 200, 2));
        c.expect_eof();

        // Lines may reach the file up to a tick later.
        let deadline = Instant::now() + Duration::from_secs(3);
        let text = loop {
            let text = fs::read_to_string(&log).unwrap_or_default();
            if text.lines().count() >= want.len() || Instant::now() > deadline {
                break text;
            }
            thread::sleep(Duration::from_millis(50));
        };
        assert!(text.ends_with('\n'), "{format}: {text:?}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), want.len(), "{format}: {text}");
        for (line, (request_line, host, status, bytes)) in lines.iter().zip(&want) {
            check_access_log_line(format, line, request_line, *host, *status, *bytes);
        }
        let probe = lines[lines.len() - 2];
        match format {
            "combined" => assert!(
                probe.ends_with(" \"http://r.example/\" \"probe/1 \\x22q\\x22\""),
                "{probe}"
            ),
            "json" => {
                let v: serde_json::Value = serde_json::from_str(probe).unwrap();
                assert_eq!(v["user_agent"], "probe/1 \"q\"", "{probe}");
                assert_eq!(v["referer"], "http://r.example/", "{probe}");
            }
            _ => assert!(
                !probe.contains("probe/1"),
                "clf writes no user agent: {probe}"
            ),
        }
    }
}

/// The keys contrib/linerate.toml documents (`# key = value` lines).
fn documented_keys() -> Vec<String> {
    let text = include_str!("../../../contrib/linerate.toml");
    let mut keys: Vec<String> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("# ")
                .or((!l.starts_with('#')).then_some(l))?
                .split_once(" = ")
        })
        .map(|(k, _)| k.to_string())
        .filter(|k| !k.contains(' '))
        .collect();
    keys.sort();
    keys
}

/// `serve --help`, contrib/linerate.toml and the settings agree: every key has its flag
/// (`root` is the DIR argument) and every flag but --config and --check its key.
#[test]
fn serve_help_names_every_long_flag() {
    let out = LINERATE
        .command()
        .args(["serve", "--help"])
        .output()
        .expect("linerate serve --help runs");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).expect("UTF-8 help");
    let mut in_help: Vec<String> = help
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("-h, ").unwrap_or(l);
            let flag = l.strip_prefix("--")?;
            let end = flag.find([' ', '=', ',', '[']).unwrap_or(flag.len());
            Some(flag[..end].to_string())
        })
        .filter(|f| f != "help" && f != "config" && f != "check")
        .chain(["root".to_string()])
        .collect();
    in_help.sort();
    let keys = documented_keys();
    assert!(
        keys.len() >= 30 && keys.iter().any(|k| k == "transmit"),
        "contrib/linerate.toml parsed wrong: {keys:?}"
    );
    assert_eq!(
        in_help, keys,
        "serve --help against contrib/linerate.toml:\n{help}"
    );
    // And the binary loads the documented file (uncommented: every key at once) the
    // same as it parses the flags.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("all.toml");
    let all: String = include_str!("../../../contrib/linerate.toml")
        .lines()
        .filter_map(|l| l.strip_prefix("# ").or((!l.starts_with('#')).then_some(l)))
        .filter(|l| l.split_once(" = ").is_some_and(|(k, _)| !k.contains(' ')))
        // The TLS keys name files that are not there, and a redirect needs them (serve_tls.rs
        // starts HTTPS from a file of its own); a PROXY listener would want a header
        // before the fetch below (serve_balancer.rs).
        .filter(|l| {
            !l.starts_with("tls-")
                && !l.starts_with("redirect-listen")
                && !l.starts_with("proxy-protocol")
        })
        .map(|l| format!("{}\n", l.split(" # ").next().unwrap()))
        .collect::<String>()
        .replace(
            "root = \"/var/www/html\"",
            &format!("root = {:?}", dir.path()),
        )
        .replace(
            "listen = [\"0.0.0.0:80\", \"[::]:80\"]",
            "listen = \"127.0.0.1:0\"",
        )
        .replace("access-log = \"stdout\"", "access-log = \"off\"");
    std::fs::write(&conf, all).unwrap();
    let s = LINERATE.spawn(&["serve", "--config", conf.to_str().unwrap()]);
    let r = fetch(s.addr, "/.status", "");
    assert_eq!(r.status, 200, "the documented status path answers");
    s.signal("TERM");
}

/// Regression: SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT killed the server (exit 129, 138,
/// 140, 131), cutting the download in flight, and a `kill -HUP` after 500 answered
/// requests left 327 lines in the access log. Now each leaves the server serving (so do
/// SIGWINCH, SIGCHLD, SIGPIPE, SIGALRM, SIGPROF and the real-time signals; SIGUSR2, which
/// now starts a second process, has a test
/// of its own in serve_systemd.rs), the download goes on byte-exact (SIGHUP's reload
/// lets the workers before finish it, then close that connection), SIGQUIT stops
/// gracefully with exit 0, and every answered request has its line.
fn signals_sent_by_habit_leave_the_server_serving_and_lose_no_log_line(transmit: &str) {
    let root = docroot();
    let big = pattern(16 * MIB, 71);
    put(root.path(), "big.bin", &big);
    put(root.path(), "f.txt", b"F\n");
    let logs = docroot();
    let log = logs.path().join("access.log");
    let mut server = serve(
        root.path(),
        transmit,
        &["--access-log", log.to_str().unwrap()],
    );
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    let h = c.read_head();
    assert_eq!(h.status, 200);
    let (mut got, end) = c.read_upto(MIB);
    assert_eq!(end, End::Open);
    let mut answered = 0;
    // Regression (issue 28): SIGALRM and the other signals whose default ends a
    // process killed it at once, losing buffered access-log lines.
    for sig in [
        "HUP", "USR1", "WINCH", "CHLD", "PIPE", "ALRM", "VTALRM", "PROF", "POLL", "PWR", "RTMIN",
        "RTMIN+30",
    ] {
        server.signal(sig);
        thread::sleep(Duration::from_millis(150));
        assert!(server.running(), "SIG{sig} ended the server");
        assert_eq!(
            fetch(server.addr, "/f.txt", "").status,
            200,
            "after SIG{sig}"
        );
        answered += 1;
    }
    let (rest, end) = c.read_upto(big.len() - got.len());
    got.extend_from_slice(&rest);
    assert_eq!(end, End::Open, "download cut after {} bytes", got.len());
    assert_bytes_eq(&got, &big, "the download in flight during the signals");
    answered += 1;
    // The reload retired the worker of `c`: the next requests go on a new connection.
    let mut c = server.conn();
    for _ in 0..500 {
        assert_eq!(c.get("/f.txt", "").status, 200);
    }
    answered += 500;
    server.signal("HUP");
    thread::sleep(Duration::from_millis(50));
    server.signal("QUIT");
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("exits after SIGQUIT");
    assert_eq!(status.code(), Some(0), "SIGQUIT: {status:?}");
    let lines = log_lines(&log);
    assert_eq!(
        lines.len(),
        answered,
        "access-log lines for {answered} answers"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains("GET /big.bin")).count(),
        1
    );
}

/// `mv access.log access.log.1; kill -USR1 PID` (logrotate's postrotate): the lines
/// before the reopen are in the renamed file, those after it in a new file at the path,
/// none lost; the error log says so.
fn sigusr1_reopens_the_access_log_by_its_path_and_loses_no_line(transmit: &str) {
    let root = docroot();
    put(root.path(), "a.txt", b"A\n");
    put(root.path(), "b.txt", b"B\n");
    let logs = docroot();
    let log = logs.path().join("access.log");
    let rotated = logs.path().join("access.log.1");
    let mut server = serve(
        root.path(),
        transmit,
        &[
            "--access-log",
            log.to_str().unwrap(),
            "--error-log-level",
            "info",
        ],
    );
    let mut c = server.conn();
    for _ in 0..100 {
        assert_eq!(c.get("/a.txt", "").status, 200);
    }
    fs::rename(&log, &rotated).unwrap();
    server.signal("USR1");
    let err = server.wait_stderr("SIGUSR1: reopened");
    assert!(err.contains("SIGUSR1: reopened"), "error log: {err}");
    for _ in 0..100 {
        assert_eq!(c.get("/b.txt", "").status, 200);
    }
    server.sigterm();
    assert_eq!(
        server.wait_exit(Duration::from_secs(10)).map(|s| s.code()),
        Some(Some(0))
    );
    let (old, new) = (log_lines(&rotated), log_lines(&log));
    assert_eq!(old.len() + new.len(), 200, "old {old:?}\nnew {new:?}");
    assert!(old.iter().all(|l| l.contains("/a.txt")), "{old:?}");
    assert_eq!(new.iter().filter(|l| l.contains("/b.txt")).count(), 100);
}

/// Regression: `mkfifo pipe; linerate serve pipe` hung in `open` and ignored SIGTERM and
/// SIGINT. Now it exits with one line naming the root, at once.
#[test]
fn a_fifo_as_the_root_fails_the_start_at_once_with_one_line() {
    let dir = docroot();
    let fifo = dir.path().join("pipe");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let t = Instant::now();
    let mut child = LINERATE
        .command()
        .args(["serve", fifo.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(3) {
        thread::sleep(Duration::from_millis(10));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
        panic!("still starting after 3 s with a FIFO as the root");
    }
    let out = child.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("pipe") && err.contains("Not a directory"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "announced an address with a FIFO root"
    );
}

/// Regression: a missing root printed its cause twice ("No such file or directory (os
/// error 2): No such file or directory (os error 2)").
#[test]
fn a_start_error_names_its_cause_once() {
    let out = LINERATE
        .command()
        .args([
            "serve",
            "/nonexistent/linerate-root",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("the root /nonexistent/linerate-root"), "{err}");
}

/// A configuration file's `listen` takes one address as well as a list (it was refused
/// with "expected a sequence" and no key named); a bad value names its line and key.
#[test]
fn the_config_file_takes_one_listen_address_and_names_a_bad_key() {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let conf = root.path().join("linerate.toml");
    fs::write(
        &conf,
        "listen = \"127.0.0.1:0\"\naccess-log = \"off\"\nworkers = 1\n",
    )
    .unwrap();
    // Not through `LINERATE.start`, whose --listen flag would win over the file.
    let server = LINERATE.spawn(&[
        "serve",
        root.path().to_str().unwrap(),
        "--config",
        conf.to_str().unwrap(),
    ]);
    let status = fetch(server.addr, "/f.txt", "").status;
    drop(server);
    assert_eq!(status, 200);
    fs::write(&conf, "workers = 1\nlisten = 70000\n").unwrap();
    let out = LINERATE
        .command()
        .args(["serve", "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2: listen: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// The body-bytes field of a CLF line (`-` is 0).
fn clf_bytes(line: &str) -> u64 {
    let after = line.rsplit_once("\" ").expect("a request field").1;
    let mut f = after.split_whitespace();
    let _status = f.next();
    match f.next() {
        Some("-") | None => 0,
        Some(n) => n.parse().expect("a byte count"),
    }
}

/// Regression: responses cut before their end left no access-log line (about 24,000 of
/// 1.12 M soak requests). A 200 MiB download the client resets, one the client stops
/// reading (cut by --send-timeout) and one still going at the shutdown deadline each
/// leave one line: the status sent, the body bytes that left, how it was cut.
fn aborted_responses_have_one_access_log_line_with_the_bytes_that_left(transmit: &str) {
    let root = docroot();
    let f = File::create(root.path().join("big.bin")).unwrap();
    f.set_len(200 * MIB as u64).unwrap(); // sparse: zeros, no disk
    drop(f);
    let logs = docroot();
    let log = logs.path().join("access.log");
    let mut server = serve(
        root.path(),
        transmit,
        &[
            "--access-log",
            log.to_str().unwrap(),
            "--send-timeout",
            "1",
            "--shutdown-timeout",
            "1",
        ],
    );
    // 1. The client resets after 4 MiB (a close with unread bytes sends a reset).
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    assert_eq!(c.read_head().status, 200);
    let (got, _) = c.read_upto(4 * MIB);
    drop(c);
    let lines = wait_log_lines(&log, 1);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("\"GET /big.bin HTTP/1.1\" 200 "),
        "{lines:?}"
    );
    assert!(lines[0].ends_with(" aborted=client"), "{lines:?}");
    let sent = clf_bytes(&lines[0]);
    assert!(
        sent >= got.len() as u64 && sent < 200 * MIB as u64,
        "{sent} body bytes logged, {} read: {lines:?}",
        got.len()
    );

    // 2. The client stops reading: --send-timeout cuts it.
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    assert_eq!(c.read_head().status, 200);
    let lines = wait_log_lines(&log, 2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[1].ends_with(" aborted=send-timeout"), "{lines:?}");
    assert!(clf_bytes(&lines[1]) > 0, "{lines:?}");
    drop(c);

    // 3. A download still going at the shutdown deadline: the client reads on, slowly,
    // so the send deadline never fires.
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", ""));
    assert_eq!(c.read_head().status, 200);
    let reader = thread::spawn(move || {
        // About 5 MB/s: 40 s for the whole body, never a second without progress.
        let mut chunk = vec![0u8; 256 * 1024];
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match c.s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(_) => thread::sleep(Duration::from_millis(50)),
            }
        }
    });
    server.sigterm();
    assert_eq!(
        server.wait_exit(Duration::from_secs(10)).map(|s| s.code()),
        Some(Some(0))
    );
    reader.join().unwrap();
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[2].ends_with(" aborted=shutdown"), "{lines:?}");
}

/// Regression: `--small-file 10G` was accepted, and two 200 MiB files then sat in memory
/// (RSS 415 MB); with the defaults 10,000 files of 16 KiB cost 158 MB. The setting is now
/// capped at 16M, and each worker holds at most `--small-file-memory` bytes of contents,
/// giving up the largest first; every body stays exact.
fn small_file_contents_stay_within_their_memory_budget(transmit: &str) {
    let root = docroot();
    let files: Vec<Vec<u8>> = (0..400).map(|i| pattern(64 * 1024, 900 + i)).collect();
    for (i, f) in files.iter().enumerate() {
        put(root.path(), &format!("s/{i}.bin"), f);
    }
    let server = serve(
        root.path(),
        transmit,
        &[
            "--small-file",
            "64K",
            "--small-file-memory",
            "2M",
            "--status-path",
            "/status",
        ],
    );
    let mut c = server.conn();
    assert_eq!(c.get("/s/0.bin", "").status, 200);
    let rss_before = family_rss_kib(server.pid());
    for round in 0..2 {
        for (i, f) in files.iter().enumerate() {
            let r = c.get(&format!("/s/{i}.bin"), "");
            assert_eq!(r.status, 200);
            assert_bytes_eq(&r.body, f, &format!("round {round}, {i}.bin"));
        }
    }
    let grown_kib = family_rss_kib(server.pid()).saturating_sub(rss_before);
    let j: serde_json::Value = serde_json::from_slice(&c.get("/status", "").body).unwrap();
    let held = j["small_files"]["bytes_held"].as_u64().unwrap();
    assert!(held > 0 && held <= 2 << 20, "{held} bytes held: {j}");
    assert!(j["small_files"]["evictions"].as_u64() > Some(0), "{j}");
    // 25 MiB of files went through; contents beyond the budget were not kept.
    assert!(
        grown_kib < 12 * 1024,
        "RSS grew {grown_kib} KiB for a 2 MiB budget"
    );
}

#[test]
fn the_small_file_size_is_capped() {
    let dir = docroot();
    let root = dir.path().to_str().unwrap();
    let out = LINERATE
        .command()
        .args(["serve", root, "--small-file", "10G"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("--small-file") && err.contains("16M"), "{err}");
    let conf = dir.path().join("c.toml");
    fs::write(&conf, "small-file = \"10G\"\n").unwrap();
    let out = LINERATE
        .command()
        .args(["serve", root, "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("small-file") && err.contains("16M"), "{err}");
}

/// A balancer's view of a stop: the health path answers 200, then 503 from the moment
/// of SIGTERM while the listener still takes new connections and serves files for the
/// shutdown delay; then the listener closes and the server exits 0. The health checks
/// are not in the access log; the files are.
fn the_health_path_turns_503_at_sigterm_and_the_listener_stays_for_the_shutdown_delay(
    transmit: &str,
) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let log_s = log.to_str().unwrap();
    let mut server = serve(
        root.path(),
        transmit,
        &[
            "--health-path",
            "/healthz",
            "--shutdown-delay",
            "1.5",
            "--access-log",
            log_s,
        ],
    );
    let addr = server.addr;
    let health = fetch(addr, "/healthz", "");
    assert_eq!((health.status, &health.body[..]), (200, &b"ok\n"[..]));
    assert_eq!(fetch(addr, "/f.txt", "").status, 200);
    server.sigterm();
    let t = Instant::now();
    // Within the delay: new connections taken, the health path 503, files served.
    let mut saw_503 = false;
    while t.elapsed() < Duration::from_millis(1000) {
        let h = fetch(addr, "/healthz", "");
        if h.status == 503 {
            saw_503 = true;
            break;
        }
        assert_eq!(h.status, 200, "before the stop is seen");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(saw_503, "the health path never turned 503");
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    // Still serving in the delay, each answer closing its connection (a keep-alive
    // client comes back through its balancer).
    let mut c = server.conn();
    let r = c.get("/f.txt", "");
    assert_eq!(r.status, 200, "still serving in the delay");
    assert!(r.closes(), "{:?}", r.headers);
    c.expect_eof();
    // After it: the listener closes and the server ends.
    let status = server.wait_exit(Duration::from_secs(10)).expect("it exits");
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    assert!(status.success(), "{status:?}");
    assert!(TcpStream::connect(addr).is_err(), "the listener is closed");
    let lines = log_lines(&log);
    assert_eq!(
        lines.iter().filter(|l| l.contains("/f.txt")).count(),
        2,
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("/healthz")), "{lines:?}");
}
