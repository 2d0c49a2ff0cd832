//! `linerate serve` over real sockets, raw bytes in and exact bytes out: one or more
//! checks per line of docs/http.md.
//!
//! - request parsing and framing (bare LF, obs-fold, bad names and values, bad request
//!   lines, methods, `Host`, absolute-form, `Content-Length`/`Transfer-Encoding`, bodies
//!   that must not be taken for requests), whole and one byte per write;
//! - limits (request line 414, header block and field count 431);
//! - connections (1,000 pipelined requests in order, memory bounded while the client does
//!   not read, HTTP/1.0 and 1.1 persistence, half-close, resets mid-response);
//! - files (`ETag` across a same-size rewrite in the same second, `Last-Modified`,
//!   `Content-Type`, `Date`), `Range` (single, suffix, clamped, unsatisfiable, invalid,
//!   multipart, many ranges), conditionals (`If-None-Match`, `If-Match`,
//!   `If-(Un)Modified-Since` in the three date formats, `If-Range`), HEAD;
//! - directories and paths (redirects, index, `%2F`, `..`, `%00`, bad escapes, dotfiles,
//!   symbolic links in and out of the root, FIFOs and sockets, `--dotfiles`, `--autoindex`);
//! - files truncated, replaced or deleted during a send;
//! - header, idle and send deadlines, running out of descriptors (via `prlimit`),
//!   SIGTERM with a response in flight;
//! - GETs, ranges, HEADs and offsets past 4 GiB through every part of the queue;
//! - one exact test each for: device files, `\` in paths, transfer codings and chunk
//!   framing, one-byte writes of 405 / HTTP/1.0 / absolute-form, an inode change at the
//!   same size and mtime, a trickling reader, SIGTERM with a reader that never reads,
//!   `--max-request-line` / `--max-header-bytes`, the drain after an error, the access
//!   log (CLF and JSON), and `serve --help` against the flags in src/main.rs.
//!
//! Every test runs once per transmit strategy (`--transmit copy|sendfile|splice|zerocopy`,
//! one `#[test]` each: `byte_ranges::splice`); tests of file parts run a second time with
//! `--collapse 0 --small-file 0`, so small files and ranges go by the strategy too.
//!
//! The harness starts the binary on `127.0.0.1:0` in a temporary document root, takes the
//! address from its first stdout line (`listening on ADDR`) and sends SIGTERM when dropped.
//! Every response read is checked for what all responses carry: an `HTTP/1.1` status line,
//! `Server: linerate`, a current `Date`, `Content-Length` (none on 304), no chunking, and
//! for errors a short `text/plain` body.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::{symlink, FileExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Flags that make small files and file ranges go by the transmit strategy: by default
/// files up to 16 KiB are served from memory and ranges up to 16 KiB are read into the
/// gather with `pread`, whatever `--transmit` says.
const BY_STRATEGY: &[&str] = &["--collapse", "0", "--small-file", "0"];
/// The variants a test of file parts runs: the defaults, then [`BY_STRATEGY`].
const FILE_PARTS: [&[&str]; 2] = [&[], BY_STRATEGY];
const MIB: usize = 1 << 20;
/// Statuses whose responses carry a short `text/plain` body.
const ERROR_STATUSES: [u16; 10] = [400, 403, 404, 405, 412, 414, 416, 431, 501, 503];

// ---------------------------------------------------------------------------------------
// One test per transmit strategy

/// For each `name`, a module `name` with one `#[test]` per transmit strategy calling
/// `name(STRATEGY)`, so a failure names its strategy (`byte_ranges::splice`) and the
/// strategies run in parallel.
macro_rules! per_strategy {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn copy() {
                super::$name("copy")
            }
            #[test]
            fn sendfile() {
                super::$name("sendfile")
            }
            #[test]
            fn splice() {
                super::$name("splice")
            }
            #[test]
            fn zerocopy() {
                super::$name("zerocopy")
            }
        }
    )*};
}

per_strategy!(
    // Rules: docs/http.md P1, R1, R2, R3, R4, R6.
    malformed_requests_are_refused_then_closed_also_one_byte_per_write,
    // Rules: docs/http.md R2, R3, R5, R6.
    methods_hosts_targets_and_request_bodies,
    // Rules: docs/http.md P6.
    request_line_and_header_block_limits,
    // Rules: docs/http.md C1.
    a_thousand_pipelined_requests_are_answered_in_order,
    // Rules: docs/http.md C1.
    pipelined_responses_the_client_does_not_read_do_not_pile_up_in_memory,
    // Rules: docs/http.md C2.
    persistence_follows_version_and_connection,
    // Rules: docs/http.md C4.
    a_half_closed_client_gets_the_whole_response,
    // Rules: docs/http.md C5.
    clients_resetting_mid_response_cost_nothing,
    // Rules: docs/http.md F1.
    validators_content_types_and_dates,
    // Rules: docs/http.md P2, P5, F2.
    byte_ranges,
    // Rules: docs/http.md F3.
    conditional_requests,
    // Rules: docs/http.md F2, F4.
    head_has_the_headers_of_get_and_no_body,
    // Rules: docs/http.md P3, P4, F5, F6.
    directories_paths_dotfiles_symlinks_and_special_files,
    // Rules: docs/http.md S1.
    a_file_truncated_during_a_send_gives_a_prefix_then_a_close,
    // Rules: docs/http.md S2.
    a_file_replaced_or_deleted_during_a_send_is_served_from_the_open_file,
    // Rules: docs/http.md P6, E1.
    slowloris_is_cut_by_the_header_deadline_while_others_are_served,
    // Rules: docs/http.md P6.
    idle_connections_are_closed_after_the_idle_timeout,
    // Rules: docs/http.md P6, E1.
    a_reader_that_stops_reading_is_closed_by_the_send_deadline,
    // Rules: docs/http.md E4.
    sigterm_finishes_the_response_in_flight_closes_idle_ones_and_exits_0,
    // Rules: docs/http.md E2.
    out_of_descriptors_no_accept_busy_loop_and_accepting_resumes,
    // Rules: docs/http.md F2, F4.
    gets_ranges_heads_and_offsets_past_4_gib,
    // Rules: docs/http.md P4.
    device_files_are_404_without_blocking,
    // Rules: docs/http.md P3.
    a_backslash_is_a_literal_byte_of_a_path,
    // Rules: docs/http.md R4, R6.
    transfer_codings_and_chunk_framing_through_the_binary,
    // Rules: docs/http.md R2, R3, R6, C2.
    methods_versions_and_targets_one_byte_per_write,
    // Rules: docs/http.md F1, F3.
    the_etag_changes_with_the_inode_at_the_same_size_and_mtime,
    // Rules: docs/http.md P6.
    a_trickling_reader_is_not_closed_by_the_send_deadline,
    // Rules: docs/http.md E4.
    sigterm_with_a_client_that_never_reads_exits_0_after_the_shutdown_timeout,
    // Rules: docs/http.md P6, R6.
    request_line_and_header_limits_follow_their_flags,
    // Rules: docs/http.md C3.
    after_an_error_a_client_still_sending_reads_the_error_then_the_server_closes,
    // Rules: docs/http.md R3.
    the_access_log_holds_one_exact_line_per_request_in_order,
    // Rules: docs/http.md E4.
    signals_sent_by_habit_leave_the_server_serving_and_lose_no_log_line,
    // Rules: docs/http.md E4.
    sigusr1_reopens_the_access_log_by_its_path_and_loses_no_line,
    // Rules: docs/http.md F7.
    with_1024_descriptors_1500_files_are_all_served,
    // Rules: docs/http.md F7.
    out_of_descriptors_an_existing_file_is_served_or_503_never_404,
    // Rules: docs/http.md F5.
    a_path_that_names_a_directory_never_serves_a_file,
    // Rules: docs/http.md F7.
    a_file_the_server_may_not_read_is_403_with_an_error_log_line,
    // Rules: docs/http.md E4.
    aborted_responses_have_one_access_log_line_with_the_bytes_that_left,
    // Rules: docs/http.md P6, E1.
    a_trickled_request_body_is_cut_by_the_body_deadline,
    small_file_contents_stay_within_their_memory_budget,
    // Rules: docs/http.md P6.
    the_body_deadline_does_not_run_while_the_server_is_not_reading,
);

/// The zero-copy strategy hands the kernel its buffers and reuses one only after the
/// kernel's completion; on loopback every completion says the kernel copied anyway, and
/// after a probe of 64 sends the strategy says so and copies from then on. Every
/// answer, before and after the switch, is whole and exact.
/// Rules: docs/http.md S3.
#[test]
fn zero_copy_answers_stay_exact_and_copied_completions_switch_to_copying() {
    let root = tempfile::tempdir().unwrap();
    let big = pattern(3 << 20, 31);
    fs::write(root.path().join("big.bin"), &big).unwrap();
    let s = serve(root.path(), "zerocopy", &["--error-log-level", "info"]);
    let mut c = Conn::open(s.addr);
    for i in 0..12 {
        let r = c.get("/big.bin", "");
        assert_eq!(r.status, 200, "answer {i}");
        assert_bytes_eq(&r.body, &big, &format!("answer {i}"));
    }
    let log = s.wait_stderr("mostly copied by the kernel");
    assert!(
        log.contains("zero-copy sends were mostly copied by the kernel; copying from now on"),
        "no switch to copying was logged: {log}"
    );
    let r = c.get("/big.bin", "");
    assert_bytes_eq(&r.body, &big, "after the switch");
}

// ---------------------------------------------------------------------------------------
// The server process

/// [`Server::start`] with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    Server::start(root, &[&["--transmit", transmit], extra].concat())
}

/// A running `linerate serve`, stopped with SIGTERM when dropped.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    /// `linerate serve ROOT --listen 127.0.0.1:0 --workers 1 --access-log off EXTRA...`
    /// (without `--workers 1` or `--access-log off` when `extra` names its own).
    fn start(root: &Path, extra: &[&str]) -> Server {
        Server::start_under(&[], root, extra)
    }

    /// [`Server::start`] with the command run by `wrapper` (`prlimit ...`, `setpriv ...`).
    fn start_under(wrapper: &[&str], root: &Path, extra: &[&str]) -> Server {
        let log_off: &[&str] = if extra.contains(&"--access-log") {
            &[]
        } else {
            &["--access-log", "off"]
        };
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_linerate"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_linerate")),
        };
        let one_worker: &[&str] = if extra.contains(&"--workers") {
            &[]
        } else {
            &["--workers", "1"]
        };
        let mut child = cmd
            .arg("serve")
            .arg(root)
            .args(["--listen", "127.0.0.1:0"])
            .args(one_worker)
            .args(log_off)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("linerate serve starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut err_pipe = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&stderr);
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                match err_pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
                }
            }
        });
        let mut out = BufReader::new(child.stdout.take().expect("stdout piped"));
        let mut first = String::new();
        out.read_line(&mut first).expect("reads stdout");
        let addr: SocketAddr = match first.trim_end().strip_prefix("listening on ") {
            Some(a) => a.parse().expect("announces a socket address"),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                thread::sleep(Duration::from_millis(100));
                let err = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
                panic!("first stdout line {first:?} (args {extra:?}); stderr:\n{err}");
            }
        };
        // Keep draining stdout so the server never writes into a full pipe.
        thread::spawn(move || {
            let _ = io::copy(&mut out, &mut io::sink());
        });
        Server {
            child: Some(child),
            addr,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("server not yet reaped").id()
    }

    fn conn(&self) -> Conn {
        Conn::open(self.addr)
    }

    fn sigterm(&self) {
        self.signal("TERM");
    }

    /// `kill -NAME PID`.
    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill -{name} {} failed", self.pid());
    }

    /// What the server wrote to standard error so far (the error log by default).
    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits up to 5 s for standard error to hold `needle`.
    fn wait_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = self.stderr_text();
            if text.contains(needle) || Instant::now() > deadline {
                return text;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits up to `limit` for the process to exit.
    fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            let status = self
                .child
                .as_mut()
                .expect("server not yet reaped")
                .try_wait()
                .expect("try_wait");
            if let Some(st) = status {
                self.child = None;
                return Some(st);
            }
            if start.elapsed() > limit {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(pid) = self.child.as_ref().map(Child::id) {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
            let start = Instant::now();
            while let Some(c) = self.child.as_mut() {
                match c.try_wait() {
                    Ok(None) if start.elapsed() < Duration::from_secs(5) => {
                        thread::sleep(Duration::from_millis(20))
                    }
                    Ok(None) | Err(_) => {
                        let _ = c.kill();
                        let _ = c.wait();
                        self.child = None;
                    }
                    Ok(Some(_)) => self.child = None,
                }
            }
        }
        if thread::panicking() {
            eprintln!(
                "linerate serve stderr:\n{}",
                String::from_utf8_lossy(&self.stderr.lock().unwrap())
            );
        }
    }
}

/// The server process and its direct children (in case workers are processes).
fn family(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    let parent = pid.to_string();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(n) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(st) = fs::read_to_string(format!("/proc/{n}/status")) {
                if st
                    .lines()
                    .any(|l| l.strip_prefix("PPid:").is_some_and(|p| p.trim() == parent))
                {
                    pids.push(n);
                }
            }
        }
    }
    pids
}

/// Resident memory of the server's processes, KiB.
fn family_rss_kib(pid: u32) -> u64 {
    family(pid)
        .iter()
        .map(|p| {
            fs::read_to_string(format!("/proc/{p}/status"))
                .ok()
                .and_then(|s| {
                    s.lines().find_map(|l| {
                        l.strip_prefix("VmRSS:").map(|v| {
                            v.trim()
                                .trim_end_matches("kB")
                                .trim()
                                .parse::<u64>()
                                .unwrap_or(0)
                        })
                    })
                })
                .unwrap_or(0)
        })
        .sum()
}

/// Open file descriptors of the server's processes.
fn family_fd_count(pid: u32) -> usize {
    family(pid)
        .iter()
        .map(|p| {
            fs::read_dir(format!("/proc/{p}/fd"))
                .map(|d| d.count())
                .unwrap_or(0)
        })
        .sum()
}

/// The server's descriptor count once it is back to `baseline`, or after 3 s: closes
/// finish a moment after the client sees the connection end.
fn fd_count_settled(pid: u32, baseline: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut fds = family_fd_count(pid);
    while fds > baseline && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        fds = family_fd_count(pid);
    }
    fds
}

/// CPU time (user + system) of the server's processes, seconds.
fn family_cpu_seconds(pid: u32) -> f64 {
    let ticks_per_second: f64 = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    family(pid)
        .iter()
        .map(|p| {
            let stat = fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // After the command name: state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let field = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            (field(11) + field(12)) / ticks_per_second
        })
        .sum()
}

/// The descriptor numbers open in process `pid`.
fn open_fds(pid: u32) -> Vec<u64> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u64>().ok()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Files

fn docroot() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Writes `data` at `rel` under `root`, making directories.
fn put(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, data).unwrap();
}

/// Deterministic bytes that differ from offset to offset (xorshift64).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = vec![0u8; len.div_ceil(8) * 8];
    for word in v.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Equality of byte strings too long to print: says where they first differ.
fn assert_bytes_eq(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: got {} bytes, want {}; first difference at offset {at}",
            got.len(),
            want.len()
        );
    }
}

// ---------------------------------------------------------------------------------------
// HTTP dates (IMF-fixdate, RFC 850, asctime)

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (weekday 0 = Sunday, day, month 1-12, year, hour, minute, second) of a Unix time.
fn broken_down(t: i64) -> (usize, i64, usize, i64, i64, i64, i64) {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let wday = (days + 4).rem_euclid(7) as usize;
    (
        wday,
        d,
        m as usize,
        y,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
    )
}

fn imf_date(t: i64) -> String {
    let (w, d, mo, y, h, mi, s) = broken_down(t);
    format!(
        "{}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} GMT",
        DAYS[w],
        MONTHS[mo - 1]
    )
}

fn rfc850_date(t: i64) -> String {
    let (w, d, mo, y, h, mi, s) = broken_down(t);
    format!(
        "{}, {d:02}-{}-{:02} {h:02}:{mi:02}:{s:02} GMT",
        LONG_DAYS[w],
        MONTHS[mo - 1],
        y % 100
    )
}

fn asctime_date(t: i64) -> String {
    let (w, d, mo, y, h, mi, s) = broken_down(t);
    format!(
        "{} {} {d:>2} {h:02}:{mi:02}:{s:02} {y}",
        DAYS[w],
        MONTHS[mo - 1]
    )
}

/// An IMF-fixdate (the only format a server may send) as a Unix time.
fn parse_imf_date(s: &str) -> Option<i64> {
    let f: Vec<&str> = s.split(' ').collect();
    if s.len() != 29 || f.len() != 6 || f[5] != "GMT" || f[1].len() != 2 || f[3].len() != 4 {
        return None;
    }
    let wday = DAYS.iter().position(|d| f[0] == format!("{d},"))?;
    let day: i64 = f[1].parse().ok()?;
    let mon = MONTHS.iter().position(|m| *m == f[2])? as i64 + 1;
    let year: i64 = f[3].parse().ok()?;
    let hms = f[4]
        .split(':')
        .map(|x| if x.len() == 2 { x.parse().ok() } else { None })
        .collect::<Option<Vec<i64>>>()?;
    if hms.len() != 3 || hms[0] > 23 || hms[1] > 59 || hms[2] > 60 || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, mon, day);
    if (days + 4).rem_euclid(7) as usize != wday {
        return None;
    }
    Some(days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2])
}

fn secs_of(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn unix_now() -> i64 {
    secs_of(SystemTime::now())
}

// ---------------------------------------------------------------------------------------
// Responses

/// A parsed response.
struct Response {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.reason)?;
        for (n, v) in &self.headers {
            write!(f, "\n  {n}: {v}")?;
        }
        let shown = &self.body[..self.body.len().min(200)];
        write!(
            f,
            "\n  [{} body bytes] {:?}",
            self.body.len(),
            String::from_utf8_lossy(shown)
        )
    }
}

impl Response {
    /// The field `name` (any case); it must not appear twice.
    fn header(&self, name: &str) -> Option<&str> {
        let mut all = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        let first = all.next();
        assert!(all.next().is_none(), "{name} twice in {self:?}");
        first
    }

    fn must(&self, name: &str) -> &str {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name} in {self:?}"))
    }

    fn content_length(&self) -> Option<u64> {
        self.header("content-length")
            .map(|v| v.parse().unwrap_or_else(|_| panic!("Content-Length {v:?}")))
    }

    /// The server says it will close the connection.
    fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }

    /// All fields but `Date`, names lower-cased, sorted.
    fn headers_except_date(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        v.sort();
        v
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Parses the response at the start of `buf`; `head`: it answers a HEAD (no body). None
/// while incomplete. Checks what every response carries.
fn parse_response(buf: &[u8], head: bool) -> Option<(Response, usize)> {
    let end = find(buf, b"\r\n\r\n")? + 4;
    let text = std::str::from_utf8(&buf[..end - 4]).unwrap_or_else(|_| {
        panic!(
            "response head not UTF-8: {:?}",
            String::from_utf8_lossy(&buf[..end])
        )
    });
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let (code, reason) = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.split_once(' '))
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    assert!(
        code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()) && !reason.is_empty(),
        "status line {status_line:?}"
    );
    let mut headers = Vec::new();
    for line in lines {
        let (n, v) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("header line {line:?} in {text:?}"));
        assert!(
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()),
            "header name {n:?}"
        );
        assert!(!line.contains(['\r', '\n']), "bare CR or LF in {line:?}");
        headers.push((n.to_string(), v.trim_matches([' ', '\t']).to_string()));
    }
    let mut r = Response {
        status: code.parse().unwrap(),
        reason: reason.to_string(),
        headers,
        body: Vec::new(),
    };
    assert!(
        r.header("transfer-encoding").is_none(),
        "responses are never chunked: {r:?}"
    );
    let len = if r.status == 304 {
        assert!(
            r.header("content-length").is_none(),
            "a 304 has no Content-Length: {r:?}"
        );
        0
    } else {
        let cl = r
            .content_length()
            .unwrap_or_else(|| panic!("no Content-Length: {r:?}"));
        if head {
            0
        } else {
            usize::try_from(cl).unwrap()
        }
    };
    if buf.len() < end + len {
        return None;
    }
    r.body = buf[end..end + len].to_vec();
    check_common(&r);
    Some((r, end + len))
}

/// What every response carries.
fn check_common(r: &Response) {
    assert_eq!(r.header("server"), Some("linerate"), "{r:?}");
    let date = r.must("date");
    let t = parse_imf_date(date).unwrap_or_else(|| panic!("Date {date:?} is no IMF-fixdate"));
    assert!((t - unix_now()).abs() <= 30, "Date {date:?} is not now");
    if ERROR_STATUSES.contains(&r.status) {
        let ct = r.header("content-type").unwrap_or("");
        assert!(
            ct.starts_with("text/plain"),
            "error without text/plain: {r:?}"
        );
        assert!(
            r.content_length().unwrap_or(0) > 0,
            "error without a body: {r:?}"
        );
    }
    if r.status == 405 {
        assert_eq!(r.header("allow"), Some("GET, HEAD"), "{r:?}");
    }
}

/// Back-to-back responses filling `buf` exactly; `heads[i]`: the i-th answers a HEAD
/// (missing entries: GET).
fn parse_all(buf: &[u8], heads: &[bool]) -> Vec<Response> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let head = heads.get(out.len()).copied().unwrap_or(false);
        match parse_response(&buf[at..], head) {
            Some((r, n)) => {
                out.push(r);
                at += n;
            }
            None => panic!(
                "incomplete response after {} complete ones: {:?}",
                out.len(),
                String::from_utf8_lossy(&buf[at..buf.len().min(at + 400)])
            ),
        }
    }
    out
}

/// What a comparison of two answers looks at: status, `Connection: close`, body.
fn answers(rs: &[Response]) -> Vec<(u16, bool, Vec<u8>)> {
    rs.iter()
        .map(|r| (r.status, r.closes(), r.body.clone()))
        .collect()
}

/// `bytes FIRST-LAST/LEN` into its numbers.
fn content_range(v: &str) -> (u64, u64, u64) {
    let parse = || -> Option<(u64, u64, u64)> {
        let (span, len) = v.strip_prefix("bytes ")?.split_once('/')?;
        let (a, b) = span.split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?, len.parse().ok()?))
    };
    let (a, b, len) = parse().unwrap_or_else(|| panic!("Content-Range {v:?}"));
    assert!(a <= b && b < len, "Content-Range {v:?} out of bounds");
    (a, b, len)
}

/// The parts of a `multipart/byteranges` body: (Content-Range, Content-Type, data), each
/// part's length taken from its Content-Range and the framing checked byte by byte.
fn multipart_parts(r: &Response) -> Vec<(String, String, Vec<u8>)> {
    let ct = r.must("content-type");
    let boundary = ct
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap_or_else(|| panic!("not multipart/byteranges: {r:?}"))
        .trim_matches('"');
    assert!(!boundary.is_empty(), "empty boundary: {r:?}");
    let delimiter = format!("\r\n--{boundary}").into_bytes();
    // The first delimiter's CRLF may be left out.
    let body: Vec<u8> = if r.body.starts_with(&delimiter[2..]) {
        [&b"\r\n"[..], &r.body[..]].concat()
    } else {
        r.body.clone()
    };
    assert!(
        body.starts_with(&delimiter),
        "body does not open with the boundary: {r:?}"
    );
    let mut parts = Vec::new();
    let mut at = delimiter.len();
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            assert!(
                rest == b"--\r\n" || rest == b"--",
                "bytes after the close delimiter: {:?}",
                String::from_utf8_lossy(rest)
            );
            return parts;
        }
        assert!(
            rest.starts_with(b"\r\n"),
            "no CRLF after a delimiter: {:?}",
            String::from_utf8_lossy(&rest[..rest.len().min(100)])
        );
        let head_end = find(rest, b"\r\n\r\n").expect("a part head");
        assert!(head_end > 2, "a part without fields");
        let head = std::str::from_utf8(&rest[2..head_end]).expect("ASCII part head");
        let (mut range, mut ctype) = (None, None);
        for line in head.split("\r\n") {
            let (n, v) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("part field {line:?}"));
            if n.eq_ignore_ascii_case("content-range") {
                range = Some(v.trim().to_string());
            } else if n.eq_ignore_ascii_case("content-type") {
                ctype = Some(v.trim().to_string());
            }
        }
        let range = range.unwrap_or_else(|| panic!("a part without Content-Range: {head:?}"));
        let ctype = ctype.unwrap_or_else(|| panic!("a part without Content-Type: {head:?}"));
        let (first, last, _) = content_range(&range);
        let len = usize::try_from(last - first + 1).unwrap();
        let data_start = head_end + 4;
        assert!(rest.len() >= data_start + len, "part {range} cut short");
        let data = rest[data_start..data_start + len].to_vec();
        assert!(
            rest[data_start + len..].starts_with(&delimiter),
            "part {range} is not followed by the boundary"
        );
        parts.push((range, ctype, data));
        at += data_start + len + delimiter.len();
    }
}

// ---------------------------------------------------------------------------------------
// Connections

/// `METHOD TARGET HTTP/1.1`, `Host: t`, then `extra` (whole lines, CRLF included).
fn req(method: &str, target: &str, extra: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nHost: t\r\n{extra}\r\n").into_bytes()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until EOF, after `got`; a reset or a 5 s silence fails the test.
fn read_until_eof(s: &mut TcpStream, mut got: Vec<u8>) -> Vec<u8> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => panic!(
                "{e} instead of EOF, after {} bytes: {:?}",
                got.len(),
                String::from_utf8_lossy(&got[..got.len().min(400)])
            ),
        }
    }
}

/// Writes `request` on a new connection, half-closes if asked, and reads until EOF.
fn raw(addr: SocketAddr, request: &[u8], half_close: bool) -> Vec<u8> {
    let mut s = connect(addr);
    s.write_all(request).expect("request written");
    if half_close {
        s.shutdown(Shutdown::Write).expect("half-close");
    }
    read_until_eof(&mut s, Vec::new())
}

/// [`raw`] with the request written one byte per write (TCP_NODELAY: a segment each). A
/// refused write (the server answered and closed) ends the writing.
fn raw_bytewise(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    for b in request {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            break;
        }
        let _ = s.flush();
        thread::sleep(Duration::from_micros(300));
    }
    read_until_eof(&mut s, Vec::new())
}

/// One request the server must refuse with `status`, `Connection: close`, then a clean
/// close (never a reset before or after the response).
fn expect_refused(addr: SocketAddr, request: &[u8], status: u16) -> Response {
    let rs = parse_all(&raw(addr, request, false), &[]);
    let what = String::from_utf8_lossy(&request[..request.len().min(120)]).into_owned();
    assert_eq!(rs.len(), 1, "{what:?}: {rs:?}");
    assert_eq!(rs[0].status, status, "{what:?}: {:?}", rs[0]);
    assert!(
        rs[0].closes(),
        "{what:?}: no Connection: close: {:?}",
        rs[0]
    );
    rs.into_iter().next().unwrap()
}

/// How a read of a body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// All the bytes asked for arrived.
    Open,
    Eof,
    Reset,
}

/// A client connection that reads responses one at a time.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        Conn {
            s: connect(addr),
            buf: Vec::new(),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("request written");
    }

    /// Reads more; false at EOF. Errors and 5 s of silence fail the test.
    fn fill(&mut self) -> bool {
        let mut chunk = vec![0u8; 256 * 1024];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!(
                    "reading a response: {e}, {} bytes buffered: {:?}",
                    self.buf.len(),
                    String::from_utf8_lossy(&self.buf[..self.buf.len().min(300)])
                ),
            }
        }
    }

    fn response_to(&mut self, head: bool) -> Response {
        loop {
            if let Some((r, n)) = parse_response(&self.buf, head) {
                self.buf.drain(..n);
                return r;
            }
            if !self.fill() {
                panic!(
                    "EOF inside a response: {:?}",
                    String::from_utf8_lossy(&self.buf[..self.buf.len().min(400)])
                );
            }
        }
    }

    fn response(&mut self) -> Response {
        self.response_to(false)
    }

    fn get(&mut self, target: &str, extra: &str) -> Response {
        self.send(&req("GET", target, extra));
        self.response()
    }

    fn head(&mut self, target: &str, extra: &str) -> Response {
        self.send(&req("HEAD", target, extra));
        self.response_to(true)
    }

    /// The next thing is a clean close, with no byte before it.
    fn expect_eof(&mut self) {
        let rest = read_until_eof(&mut self.s, std::mem::take(&mut self.buf));
        assert!(
            rest.is_empty(),
            "{} bytes instead of EOF: {:?}",
            rest.len(),
            String::from_utf8_lossy(&rest[..rest.len().min(400)])
        );
    }

    /// A response head; its body is left for [`Conn::read_upto`].
    fn read_head(&mut self) -> Response {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let (r, n) = parse_response(&self.buf[..end + 4], true).expect("a whole head");
                self.buf.drain(..n);
                return r;
            }
            assert!(self.fill(), "EOF before a response head");
        }
    }

    /// Up to `n` more bytes; fewer only if the connection ends first.
    fn read_upto(&mut self, n: usize) -> (Vec<u8>, End) {
        let mut out: Vec<u8> = if self.buf.len() > n {
            self.buf.drain(..n).collect()
        } else {
            std::mem::take(&mut self.buf)
        };
        let mut chunk = vec![0u8; 256 * 1024];
        while out.len() < n {
            let want = (n - out.len()).min(chunk.len());
            match self.s.read(&mut chunk[..want]) {
                Ok(0) => return (out, End::Eof),
                Ok(k) => out.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return (out, End::Reset),
                Err(e) => panic!("reading a body: {e} after {} bytes", out.len()),
            }
        }
        (out, End::Open)
    }
}

/// One GET on a new connection with `Connection: close`; the server must close after.
fn fetch(addr: SocketAddr, target: &str, extra: &str) -> Response {
    let mut c = Conn::open(addr);
    let r = c.get(target, &format!("{extra}Connection: close\r\n"));
    assert!(
        r.closes(),
        "{target}: close asked for, not announced: {r:?}"
    );
    c.expect_eof();
    r
}

/// A 206 with one range `first-last` of `total` holding `want`.
fn expect_range(
    c: &mut Conn,
    target: &str,
    spec: &str,
    first: u64,
    last: u64,
    total: u64,
    want: &[u8],
) {
    let r = c.get(target, &format!("Range: {spec}\r\n"));
    assert_eq!(r.status, 206, "{target} {spec}: {r:?}");
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes {first}-{last}/{total}").as_str()),
        "{target} {spec}"
    );
    assert_eq!(
        r.content_length(),
        Some(last - first + 1),
        "{target} {spec}"
    );
    assert_eq!(r.header("accept-ranges"), Some("bytes"), "{target} {spec}");
    assert!(r.header("etag").is_some(), "{target} {spec}: {r:?}");
    assert_bytes_eq(&r.body, want, &format!("{target} {spec}"));
}

/// A multipart/byteranges 206 with exactly the parts `want`, in that order.
fn expect_parts(r: &Response, ctype: &str, content: &[u8], want: &[(u64, u64)]) {
    assert_eq!(r.status, 206, "{r:?}");
    assert!(r.header("content-range").is_none(), "{r:?}");
    let parts = multipart_parts(r);
    assert_eq!(parts.len(), want.len(), "{r:?}");
    for ((range, pct, data), &(a, b)) in parts.iter().zip(want) {
        assert_eq!(range, &format!("bytes {a}-{b}/{}", content.len()));
        assert_eq!(pct, ctype, "part Content-Type");
        assert_bytes_eq(data, &content[a as usize..=b as usize], range);
    }
}

/// Any correct answer to a satisfiable Range on `content`: 200 with everything, or 206
/// whose parts each hold what their Content-Range names.
fn check_any_range_answer(r: &Response, content: &[u8]) {
    let len = content.len() as u64;
    let slice = |range: &str| {
        let (a, b, total) = content_range(range);
        assert_eq!(total, len, "{range}");
        &content[a as usize..=b as usize]
    };
    match r.status {
        200 => assert_bytes_eq(&r.body, content, "200 to a Range"),
        206 if r.must("content-type").starts_with("multipart/byteranges") => {
            let parts = multipart_parts(r);
            assert!(
                !parts.is_empty() && parts.len() <= 16,
                "{} parts",
                parts.len()
            );
            for (range, _, data) in &parts {
                assert_bytes_eq(data, slice(range), range);
            }
        }
        206 => assert_bytes_eq(&r.body, slice(r.must("content-range")), "single part"),
        s => panic!("status {s} for a satisfiable Range: {r:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// 1. Parsing and framing

/// Requests refused with their status, then closed.
const BAD_REQUESTS: &[(&str, u16)] = &[
    ("GET /f.txt HTTP/1.1\nHost: t\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\n\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n b\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nBad@Name: x\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nX: a\0b\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n", 400),
    ("G ET /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.0 x\r\n\r\n", 400),
    ("GET /f.txt HTTP/10.0\r\n\r\n", 400),
    ("get /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", 501),
    ("BREW /f.txt HTTP/1.1\r\nHost: t\r\n\r\n", 501),
    ("GET /f.txt HTTP/1.1\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t u\r\n\r\n", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t/u\r\n\r\n", 400),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        400,
    ),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhello", 400),
    ("GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0x10\r\n\r\n", 400),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 12345678901234567890\r\n\r\n",
        400,
    ),
    (
        "GET /f.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
    ),
];

fn malformed_requests_are_refused_then_closed_also_one_byte_per_write(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    for &(request, status) in BAD_REQUESTS {
        let whole = expect_refused(server.addr, request.as_bytes(), status);
        let bytewise = parse_all(&raw_bytewise(server.addr, request.as_bytes()), &[]);
        assert_eq!(
            answers(&bytewise),
            answers(std::slice::from_ref(&whole)),
            "{request:?} one byte per write"
        );
    }
    let r = fetch(server.addr, "/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
}

fn methods_hosts_targets_and_request_bodies(transmit: &str) {
    let root = docroot();
    for (name, body) in [
        ("a.txt", "A\n"),
        ("b.txt", "B smuggled\n"),
        ("c.txt", "C\n"),
        ("f.txt", "F\n"),
    ] {
        put(root.path(), name, body.as_bytes());
    }
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;

    // Known methods other than GET and HEAD on a file: 405 with Allow (checked for every
    // 405 by the parser).
    for (m, target) in [
        ("POST", "/f.txt"),
        ("PUT", "/f.txt"),
        ("DELETE", "/f.txt"),
        ("TRACE", "/f.txt"),
        ("CONNECT", "/f.txt"),
        ("CONNECT", "t:443"),
    ] {
        let mut c = Conn::open(addr);
        c.send(&req(m, target, ""));
        let r = c.response();
        assert_eq!(r.status, 405, "{m} {target}: {r:?}");
    }

    // HTTP/1.0 without Host is served (and closed: no keep-alive asked for).
    let rs = parse_all(&raw(addr, b"GET /f.txt HTTP/1.0\r\n\r\n", false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);

    // Absolute-form target: served from its path whatever the authority.
    let rs = parse_all(
        &raw(
            addr,
            b"GET http://other.example:8080/f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            false,
        ),
        &[],
    );
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);

    // Bodies on GET are read and discarded; a body that looks like a request is never
    // answered as one.
    let smuggled = "GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    let last = "GET /c.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let framed = [
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{smuggled}{last}",
            smuggled.len()
        ),
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n{last}",
            smuggled.len()
        ),
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4;name=value\r\n{}\r\n{:x}\r\n{}\r\n0\r\nX-Trailer: 1\r\n\r\n{last}",
            &smuggled[..4],
            smuggled.len() - 4,
            &smuggled[4..]
        ),
    ];
    let want = vec![(200, false, b"A\n".to_vec()), (200, true, b"C\n".to_vec())];
    for request in &framed {
        let whole = parse_all(&raw(addr, request.as_bytes(), false), &[]);
        assert_eq!(answers(&whole), want, "{request:?}");
        let bytewise = parse_all(&raw_bytewise(addr, request.as_bytes()), &[]);
        assert_eq!(answers(&bytewise), want, "{request:?} one byte per write");
    }
    // The same for a plain GET, one byte per write.
    let plain = b"GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let rs = parse_all(&raw_bytewise(addr, plain), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
}

// ---------------------------------------------------------------------------------------
// 2. Limits

fn request_line_and_header_block_limits(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;

    // A request line of exactly `len` bytes (CRLF not counted).
    let line = |len: usize| {
        let q = "q".repeat(len - "GET /f.txt? HTTP/1.1".len());
        format!("GET /f.txt?{q} HTTP/1.1")
    };
    let at_limit = format!("{}\r\nHost: t\r\nConnection: close\r\n\r\n", line(8192));
    let rs = parse_all(&raw(addr, at_limit.as_bytes(), false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
    let over = format!("{}\r\nHost: t\r\n\r\n", line(8193));
    expect_refused(addr, over.as_bytes(), 414);
    // Also before the line ends.
    let mut c = Conn::open(addr);
    c.send(format!("GET /{}", "a".repeat(9000)).as_bytes());
    let r = c.response();
    assert_eq!(r.status, 414, "{r:?}");
    assert!(r.closes());
    c.expect_eof();

    // Header block: 16 KiB.
    let with_fields = |fields: &str| {
        format!("GET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{fields}\r\n")
    };
    let big = |n: usize| format!("X-Big: {}\r\n", "b".repeat(n));
    let rs = parse_all(&raw(addr, with_fields(&big(15_000)).as_bytes(), false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
    expect_refused(addr, with_fields(&big(17_000)).as_bytes(), 431);
    let mut c = Conn::open(addr);
    c.send(
        format!(
            "GET /f.txt HTTP/1.1\r\nHost: t\r\nX-Big: {}",
            "b".repeat(20_000)
        )
        .as_bytes(),
    );
    let r = c.response();
    assert_eq!(r.status, 431, "a header block that never ends: {r:?}");
    assert!(r.closes());
    c.expect_eof();

    // 100 fields (Host and Connection included) pass, 101 do not.
    let fields = |n: usize| -> String { (0..n).map(|i| format!("X-{i}: v\r\n")).collect() };
    let rs = parse_all(&raw(addr, with_fields(&fields(98)).as_bytes(), false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);
    expect_refused(addr, with_fields(&fields(99)).as_bytes(), 431);
}

// ---------------------------------------------------------------------------------------
// 3. Connections

fn a_thousand_pipelined_requests_are_answered_in_order(transmit: &str) {
    let root = docroot();
    for i in 0..10 {
        put(
            root.path(),
            &format!("f{i}.txt"),
            format!("file number {i}\n").as_bytes(),
        );
    }
    let server = serve(root.path(), transmit, &[]);
    let mut all = Vec::new();
    for i in 0..1000 {
        let close = if i == 999 {
            "Connection: close\r\n"
        } else {
            ""
        };
        all.extend(req("GET", &format!("/f{}.txt?n={i}", i % 10), close));
    }
    let mut s = connect(server.addr);
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || w.write_all(&all).expect("requests written"));
    let got = read_until_eof(&mut s, Vec::new());
    writer.join().unwrap();
    let rs = parse_all(&got, &[]);
    assert_eq!(rs.len(), 1000);
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "response {i}: {r:?}");
        assert_eq!(
            r.body,
            format!("file number {}\n", i % 10).into_bytes(),
            "response {i} out of order"
        );
        assert_eq!(r.closes(), i == 999, "response {i}: {r:?}");
    }
}

fn pipelined_responses_the_client_does_not_read_do_not_pile_up_in_memory(transmit: &str) {
    let root = docroot();
    let content = pattern(128 << 10, 3);
    put(root.path(), "m.bin", &content);
    // copy holds file bytes in user space; the page-reference strategies hold pages.
    let server = serve(root.path(), transmit, &[]);
    let before = family_rss_kib(server.pid());
    let mut c = server.conn();
    let mut reqs = Vec::new();
    for i in 0..1000 {
        let close = if i == 999 {
            "Connection: close\r\n"
        } else {
            ""
        };
        reqs.extend(req("GET", &format!("/m.bin?{i}"), close));
    }
    let mut w = c.s.try_clone().unwrap();
    let writer = thread::spawn(move || w.write_all(&reqs).expect("requests written"));
    // 125 MiB of answers are due; the client reads none for a while.
    thread::sleep(Duration::from_millis(800));
    let during = family_rss_kib(server.pid());
    assert!(
        during < before + 64 * 1024,
        "server RSS grew from {before} KiB to {during} KiB with the output queue full"
    );
    for i in 0..1000 {
        let r = c.response();
        assert_eq!(r.status, 200, "response {i}");
        assert_bytes_eq(&r.body, &content, &format!("response {i}"));
    }
    c.expect_eof();
    writer.join().unwrap();
}

fn persistence_follows_version_and_connection(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;

    // HTTP/1.0: one response, then close.
    let rs = parse_all(&raw(addr, b"GET /f.txt HTTP/1.0\r\n\r\n", false), &[]);
    assert_eq!(answers(&rs), vec![(200, true, b"F\n".to_vec())]);

    // HTTP/1.0 with keep-alive: stays open until a request without it.
    let mut c = Conn::open(addr);
    for _ in 0..2 {
        c.send(b"GET /f.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c.response();
        assert_eq!((r.status, r.closes()), (200, false), "{r:?}");
    }
    c.send(b"GET /f.txt HTTP/1.0\r\n\r\n");
    let r = c.response();
    assert_eq!((r.status, r.closes()), (200, true), "{r:?}");
    c.expect_eof();

    // HTTP/1.1: stays open until `close` (any case, any place in the list).
    for close in ["Connection: close\r\n", "Connection: x, Close\r\n"] {
        let mut c = Conn::open(addr);
        for _ in 0..3 {
            let r = c.get("/f.txt", "");
            assert_eq!((r.status, r.closes()), (200, false), "{r:?}");
        }
        let r = c.get("/f.txt", close);
        assert_eq!((r.status, r.closes()), (200, true), "{close:?}: {r:?}");
        c.expect_eof();
    }
}

fn a_half_closed_client_gets_the_whole_response(transmit: &str) {
    let root = docroot();
    let big = pattern(5 * MIB, 4);
    put(root.path(), "big", &big);
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);

    let rs = parse_all(&raw(server.addr, &req("GET", "/big", ""), true), &[]);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status, 200);
    assert_bytes_eq(&rs[0].body, &big, "half-closed client");

    // Regression (found by bench soak): a request and the half-close sent back to back
    // reach the server as one edge-triggered event; the server answered, then held the
    // connection until the idle deadline. Now it closes once the answer is sent.
    drop(server);
    let server = serve(root.path(), transmit, &["--idle-timeout", "30"]);
    for _ in 0..20 {
        let t = Instant::now();
        let rs = parse_all(&raw(server.addr, &req("GET", "/f.txt", ""), true), &[]);
        assert_eq!((rs.len(), rs[0].status), (1, 200));
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "EOF after {:?}",
            t.elapsed()
        );
    }

    // Two pipelined requests, then the half-close: both answered, then EOF.
    let mut c = server.conn();
    c.send(&[req("GET", "/big", ""), req("GET", "/f.txt", "")].concat());
    c.s.shutdown(Shutdown::Write).unwrap();
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_bytes_eq(&r.body, &big, "first of two, half-closed");
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
    c.expect_eof();
}

/// GETs a big file, reads a little, and drops the socket with unread data (a reset).
fn reset_mid_response(addr: SocketAddr) {
    let mut c = Conn::open(addr);
    c.send(&req("GET", "/big", ""));
    let h = c.read_head();
    assert_eq!(h.status, 200);
    let (b, end) = c.read_upto(64 << 10);
    assert_eq!((b.len(), end), (64 << 10, End::Open));
}

fn clients_resetting_mid_response_cost_nothing(transmit: &str) {
    let root = docroot();
    let big = pattern(5 * MIB, 6);
    put(root.path(), "big", &big);
    let mut server = serve(root.path(), transmit, &[]);
    for _ in 0..3 {
        reset_mid_response(server.addr);
    }
    thread::sleep(Duration::from_millis(300));
    let baseline = family_fd_count(server.pid());
    for _ in 0..30 {
        reset_mid_response(server.addr);
    }
    // Not one more descriptor: under splice a pipe kept by a reset connection shows.
    let fds = fd_count_settled(server.pid(), baseline);
    assert!(
        fds <= baseline,
        "{fds} descriptors open after 30 resets, {baseline} before"
    );
    assert!(server.running(), "the server died (SIGPIPE?)");
    let mut c = server.conn();
    let r = c.get("/big", "");
    assert_eq!(r.status, 200);
    assert_bytes_eq(&r.body, &big, "after the resets");
}

// ---------------------------------------------------------------------------------------
// 4. Files

fn validators_content_types_and_dates(transmit: &str) {
    let root = docroot();
    put(root.path(), "page.html", b"<p>hi</p>\n");
    put(root.path(), "notes.txt", b"notes\n");
    put(root.path(), "blob", &[0, 1, 2, 3]);
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    let mut etags = Vec::new();
    for (target, ctype, body) in [
        ("/page.html", "text/html", &b"<p>hi</p>\n"[..]),
        ("/notes.txt", "text/plain", &b"notes\n"[..]),
        ("/blob", "application/octet-stream", &[0u8, 1, 2, 3][..]),
    ] {
        let r = c.get(target, "");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.body, body, "{target}");
        assert_eq!(r.header("content-type"), Some(ctype), "{target}");
        assert_eq!(r.header("accept-ranges"), Some("bytes"), "{target}");
        let etag = r.must("etag");
        assert!(
            etag.len() > 2
                && etag.starts_with('"')
                && etag.ends_with('"')
                && !etag[1..etag.len() - 1].contains('"'),
            "{target}: a strong, quoted ETag: {etag}"
        );
        etags.push(etag.to_string());
        let mtime = fs::metadata(root.path().join(&target[1..]))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(
            r.header("last-modified"),
            Some(imf_date(secs_of(mtime)).as_str()),
            "{target}"
        );
    }
    etags.sort();
    etags.dedup();
    assert_eq!(etags.len(), 3, "three files, three ETags");

    // A same-size rewrite within the same second changes the ETag, not Last-Modified.
    let path = root.path().join("same.txt");
    let mut tries = 0;
    loop {
        tries += 1;
        assert!(tries <= 5, "could not rewrite within one second");
        fs::write(&path, b"first version\n").unwrap();
        let before = fs::metadata(&path).unwrap().modified().unwrap();
        let r1 = c.get("/same.txt", "");
        assert_eq!(r1.body, b"first version\n");
        // Past the coarse clock's tick, so the nanoseconds differ.
        thread::sleep(Duration::from_millis(20));
        fs::write(&path, b"other version\n").unwrap();
        let after = fs::metadata(&path).unwrap().modified().unwrap();
        let r2 = c.get("/same.txt", "");
        assert_eq!(r2.body, b"other version\n");
        if secs_of(before) != secs_of(after) {
            continue;
        }
        assert_ne!(before, after, "the filesystem kept the mtime");
        assert_ne!(r1.must("etag"), r2.must("etag"), "same-size rewrite");
        assert_eq!(r1.must("last-modified"), r2.must("last-modified"));
        break;
    }

    // Date on errors too (checked by the parser on every response).
    let r = fetch(server.addr, "/missing", "");
    assert_eq!(r.status, 404);
}

// ---------------------------------------------------------------------------------------
// 5. Ranges

/// [`byte_ranges_with`] with the defaults, then with every part by the strategy.
fn byte_ranges(transmit: &str) {
    for extra in FILE_PARTS {
        byte_ranges_with(transmit, extra);
    }
}

fn byte_ranges_with(transmit: &str, extra: &[&str]) {
    let root = docroot();
    let content = pattern(1000, 5);
    put(root.path(), "r.txt", &content);
    let server = serve(root.path(), transmit, extra);
    let addr = server.addr;
    let mut c = server.conn();

    for (spec, a, b) in [
        ("bytes=0-8", 0, 8),
        ("bytes=-10", 990, 999),
        ("bytes=990-", 990, 999),
        ("bytes=990-5000", 990, 999),
        ("bytes=0-0", 0, 0),
        ("bytes=999-999", 999, 999),
        ("bytes=-5000", 0, 999),
        ("bytes=5-5, 2000-3000", 5, 5),
    ] {
        expect_range(
            &mut c,
            "/r.txt",
            spec,
            a,
            b,
            1000,
            &content[a as usize..=b as usize],
        );
    }

    for spec in ["bytes=1000-", "bytes=2000-3000,5000-", "bytes=-0"] {
        let r = fetch(addr, "/r.txt", &format!("Range: {spec}\r\n"));
        assert_eq!(r.status, 416, "{spec}: {r:?}");
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{spec}");
    }

    for spec in ["bytes=7-1", "bytes=abc", "items=0-1", "bytes="] {
        let r = c.get("/r.txt", &format!("Range: {spec}\r\n"));
        assert_eq!(r.status, 200, "{spec}: {r:?}");
        assert!(r.header("content-range").is_none(), "{spec}");
        assert_bytes_eq(&r.body, &content, spec);
    }

    // Several ranges: multipart, request order, exact length (the next response on the
    // connection parses only if it is).
    let r = c.get("/r.txt", "Range: bytes=500-599,0-9\r\n");
    expect_parts(&r, "text/plain", &content, &[(500, 599), (0, 9)]);
    let r = c.get("/r.txt", "Range: bytes=0-0,998-999,100-199\r\n");
    expect_parts(
        &r,
        "text/plain",
        &content,
        &[(0, 0), (998, 999), (100, 199)],
    );
    expect_range(&mut c, "/r.txt", "bytes=0-8", 0, 8, 1000, &content[..9]);

    // Range only applies to GET.
    let h = c.head("/r.txt", "Range: bytes=0-8\r\n");
    assert_eq!(h.status, 200, "{h:?}");
    assert_eq!(h.content_length(), Some(1000));
    assert!(h.header("content-range").is_none());

    // Many, overlapping or oversized ranges: coalesced or 200, never O(ranges x file).
    let singles: Vec<String> = (0..1000).map(|i| format!("{i}-{i}")).collect();
    let spread: Vec<String> = (0..40).map(|i| format!("{0}-{0}", i * 20)).collect();
    let seventeen: Vec<String> = (0..17).map(|i| format!("{0}-{0}", i * 50)).collect();
    let whole = vec!["0-".to_string(); 16];
    for spec in [
        singles.join(","),
        spread.join(","),
        seventeen.join(","),
        whole.join(","),
        "0-9,5-19,100-109".to_string(),
        "0-499,250-999".to_string(),
    ] {
        let r = fetch(addr, "/r.txt", &format!("Range: bytes={spec}\r\n"));
        check_any_range_answer(&r, &content);
        assert!(
            r.body.len() <= 4 * content.len(),
            "{} body bytes for a 1000-byte file and Range {spec:.60}",
            r.body.len()
        );
    }
}

// ---------------------------------------------------------------------------------------
// 6. Conditionals

fn expect_not_modified(c: &mut Conn, extra: &str, etag: &str, lm: &str) {
    let r = c.get("/c.txt", extra);
    assert_eq!(r.status, 304, "{extra:?}: {r:?}");
    assert_eq!(r.header("etag"), Some(etag), "{extra:?}");
    assert_eq!(r.header("last-modified"), Some(lm), "{extra:?}");
    assert!(r.body.is_empty());
}

/// [`conditional_requests_with`] with the defaults, then with every part by the strategy.
fn conditional_requests(transmit: &str) {
    for extra in FILE_PARTS {
        conditional_requests_with(transmit, extra);
    }
}

fn conditional_requests_with(transmit: &str, extra: &[&str]) {
    let root = docroot();
    let body = b"conditional body\n";
    put(root.path(), "c.txt", body);
    // An hour old, so Last-Modified is a strong validator for If-Range.
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    File::options()
        .write(true)
        .open(root.path().join("c.txt"))
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    let server = serve(root.path(), transmit, extra);
    let addr = server.addr;
    let mut c = server.conn();
    let r = c.get("/c.txt", "");
    assert_eq!(r.status, 200, "{r:?}");
    let etag = r.must("etag").to_string();
    let lm = r.must("last-modified").to_string();
    let lm_t = parse_imf_date(&lm).unwrap();
    assert_eq!(lm_t, secs_of(hour_ago));

    let plain_200 = |c: &mut Conn, extra: &str| {
        let r = c.get("/c.txt", extra);
        assert_eq!(r.status, 200, "{extra:?}: {r:?}");
        assert_eq!(r.body, body, "{extra:?}");
    };

    // If-None-Match: weak comparison, lists, `*`.
    for inm in [
        etag.clone(),
        format!("\"nope\", {etag}"),
        format!("\"a\",\"b\" , {etag}"),
        "*".to_string(),
        format!("W/{etag}"),
    ] {
        expect_not_modified(&mut c, &format!("If-None-Match: {inm}\r\n"), &etag, &lm);
    }
    plain_200(&mut c, "If-None-Match: \"nope\"\r\n");
    plain_200(&mut c, "If-None-Match: W/\"nope\", \"other\"\r\n");

    // A 304 has no body: the next pipelined response parses.
    let inm = format!("If-None-Match: {etag}\r\n");
    c.send(&[req("GET", "/c.txt", &inm), req("GET", "/c.txt", "")].concat());
    assert_eq!(c.response().status, 304);
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, &body[..]));

    // If-Match: strong comparison.
    for im in ["\"nope\"".to_string(), format!("W/{etag}")] {
        let r = fetch(addr, "/c.txt", &format!("If-Match: {im}\r\n"));
        assert_eq!(r.status, 412, "If-Match {im}: {r:?}");
    }
    plain_200(&mut c, &format!("If-Match: {etag}\r\n"));
    plain_200(&mut c, "If-Match: *\r\n");

    // Dates in the three formats.
    let formats: [fn(i64) -> String; 3] = [imf_date, rfc850_date, asctime_date];
    for f in formats {
        expect_not_modified(
            &mut c,
            &format!("If-Modified-Since: {}\r\n", f(lm_t)),
            &etag,
            &lm,
        );
        expect_not_modified(
            &mut c,
            &format!("If-Modified-Since: {}\r\n", f(lm_t + 60)),
            &etag,
            &lm,
        );
        plain_200(&mut c, &format!("If-Modified-Since: {}\r\n", f(lm_t - 1)));
        plain_200(&mut c, &format!("If-Unmodified-Since: {}\r\n", f(lm_t)));
        let ius = format!("If-Unmodified-Since: {}\r\n", f(lm_t - 1));
        let r = fetch(addr, "/c.txt", &ius);
        assert_eq!(r.status, 412, "{ius:?}: {r:?}");
    }
    // If-None-Match decides over If-Modified-Since.
    plain_200(
        &mut c,
        &format!(
            "If-None-Match: \"nope\"\r\nIf-Modified-Since: {}\r\n",
            imf_date(lm_t)
        ),
    );

    // If-Range: a strong validator lets the Range apply; anything else sends it all.
    let range = "Range: bytes=0-4\r\n";
    for good in [etag.clone(), lm.clone()] {
        let r = c.get("/c.txt", &format!("{range}If-Range: {good}\r\n"));
        assert_eq!(r.status, 206, "If-Range {good}: {r:?}");
        assert_eq!(
            r.header("content-range"),
            Some(format!("bytes 0-4/{}", body.len()).as_str())
        );
        assert_eq!(r.body, &body[..5]);
    }
    for bad in [
        "\"wrong\"".to_string(),
        format!("W/{etag}"),
        imf_date(lm_t - 1),
    ] {
        plain_200(&mut c, &format!("{range}If-Range: {bad}\r\n"));
    }
}

// ---------------------------------------------------------------------------------------
// 7. HEAD

fn head_has_the_headers_of_get_and_no_body(transmit: &str) {
    let root = docroot();
    let page = [&b"<html>"[..], &pattern(3000, 7)[..]].concat();
    put(root.path(), "page.html", &page);
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;
    let mut c = server.conn();

    let g = c.get("/page.html", "");
    let h = c.head("/page.html", "");
    assert_eq!(g.status, 200);
    assert_eq!(h.headers_except_date(), g.headers_except_date());
    assert_eq!(h.content_length(), Some(page.len() as u64));
    let hr = c.head("/page.html", "Range: bytes=0-9\r\n");
    assert_eq!(hr.headers_except_date(), g.headers_except_date());

    // Errors too.
    let missing_get = fetch(addr, "/missing.html", "");
    let mut m = Conn::open(addr);
    let missing_head = m.head("/missing.html", "Connection: close\r\n");
    m.expect_eof();
    assert_eq!(missing_get.status, 404);
    assert_eq!(
        missing_head.headers_except_date(),
        missing_get.headers_except_date()
    );

    // Pipelined after a HEAD: the next response still parses.
    let pipeline = [
        req("HEAD", "/page.html", ""),
        req("GET", "/page.html", ""),
        req("HEAD", "/page.html", "Range: bytes=0-9\r\n"),
        req("GET", "/page.html", "Connection: close\r\n"),
    ]
    .concat();
    let rs = parse_all(&raw(addr, &pipeline, false), &[true, false, true, false]);
    assert_eq!(rs.len(), 4);
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "{i}: {r:?}");
        assert_eq!(r.content_length(), Some(page.len() as u64), "{i}");
        if i % 2 == 0 {
            assert!(r.body.is_empty());
        } else {
            assert_bytes_eq(&r.body, &page, "GET after HEAD");
        }
    }
}

// ---------------------------------------------------------------------------------------
// 8. Directories and paths

fn directories_paths_dotfiles_symlinks_and_special_files(transmit: &str) {
    let root = docroot();
    let r = root.path();
    put(r, "f.txt", b"F\n");
    put(r, "dir/index.html", b"<p>index</p>\n");
    put(r, "dir/.secret", b"secret\n");
    put(r, "noindex/file.txt", b"file\n");
    put(r, "noindex/.dot", b"dot\n");
    put(r, "a/b", b"a slash b\n");
    put(r, ".hidden", b"hidden\n");
    put(r, ".git/config", b"[core]\n");
    fs::create_dir(r.join("sub")).unwrap();
    symlink("f.txt", r.join("link-in")).unwrap();
    symlink("../f.txt", r.join("sub/up")).unwrap();
    symlink("/etc/passwd", r.join("link-out")).unwrap();
    symlink(
        "../../../../../../../../../../etc/passwd",
        r.join("link-up"),
    )
    .unwrap();
    let outside = docroot();
    put(outside.path(), "x.txt", b"outside\n");
    symlink(outside.path(), r.join("link-outdir")).unwrap();
    let made = Command::new("mkfifo")
        .arg(r.join("fifo"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let _sock = std::os::unix::net::UnixListener::bind(r.join("sock")).unwrap();

    {
        let server = serve(r, transmit, &[]);
        let addr = server.addr;
        let mut c = server.conn();

        for (target, location) in [("/dir", "/dir/"), ("/dir?x=1", "/dir/?x=1")] {
            let m = c.get(target, "");
            assert_eq!(m.status, 301, "{target}: {m:?}");
            assert_eq!(m.header("location"), Some(location), "{target}");
        }
        for target in [
            "/dir/",
            "/dir/?x=1",
            "/dir/index.html",
            "/dir//./index.html",
        ] {
            let i = c.get(target, "");
            assert_eq!(i.status, 200, "{target}: {i:?}");
            assert_eq!(i.body, b"<p>index</p>\n", "{target}");
            assert_eq!(i.header("content-type"), Some("text/html"), "{target}");
        }
        for (target, body) in [
            ("/a/b", &b"a slash b\n"[..]),
            ("/dir/../f.txt", &b"F\n"[..]),
            ("/%66.txt", &b"F\n"[..]),
            ("/link-in", &b"F\n"[..]),
            ("/sub/up", &b"F\n"[..]),
        ] {
            let g = c.get(target, "");
            assert_eq!(
                (g.status, g.body.as_slice()),
                (200, body),
                "{target}: {g:?}"
            );
        }

        for target in [
            "/noindex/",
            "/a%2Fb",
            "/a%2fb",
            "/.hidden",
            "/.git/config",
            "/dir/.secret",
            "/dir/%2esecret",
            "/link-out",
            "/link-up",
            "/link-outdir/x.txt",
            "/missing",
        ] {
            let g = fetch(addr, target, "");
            assert_eq!(g.status, 404, "{target}: {g:?}");
        }
        for target in [
            "/../f.txt",
            "/dir/../../f.txt",
            "/%2e%2e/f.txt",
            "/f.txt%00",
            "/%00",
            "/%zz",
            "/f.txt%2",
            "/f%",
        ] {
            expect_refused(addr, &req("GET", target, ""), 400);
        }
        for target in ["/fifo", "/sock"] {
            let t = Instant::now();
            let g = fetch(addr, target, "");
            assert_eq!(g.status, 404, "{target}: {g:?}");
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{target} took {:?}",
                t.elapsed()
            );
        }
        let g = fetch(addr, "/f.txt", "");
        assert_eq!((g.status, g.body.as_slice()), (200, &b"F\n"[..]));
    }

    {
        let server = serve(r, transmit, &["--dotfiles"]);
        for (target, body) in [
            ("/.hidden", &b"hidden\n"[..]),
            ("/.git/config", &b"[core]\n"[..]),
            ("/dir/.secret", &b"secret\n"[..]),
        ] {
            let g = fetch(server.addr, target, "");
            assert_eq!(
                (g.status, g.body.as_slice()),
                (200, body),
                "{target}: {g:?}"
            );
        }
        // Escaping the root stays refused.
        assert_eq!(fetch(server.addr, "/link-out", "").status, 404);
    }

    {
        let server = serve(r, transmit, &["--autoindex"]);
        let l = fetch(server.addr, "/noindex/", "");
        assert_eq!(l.status, 200, "{l:?}");
        let listing = String::from_utf8_lossy(&l.body);
        assert!(listing.contains("file.txt"), "{listing}");
        assert!(!listing.contains(".dot"), "a dotfile listed: {listing}");
        let i = fetch(server.addr, "/dir/", "");
        assert_eq!(i.body, b"<p>index</p>\n", "index.html wins over a listing");
        let m = fetch(server.addr, "/noindex", "");
        assert_eq!((m.status, m.header("location")), (301, Some("/noindex/")));
    }
}

// ---------------------------------------------------------------------------------------
// 9. While sending

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

// ---------------------------------------------------------------------------------------
// 10. Exhaustion and lifecycle

fn slowloris_is_cut_by_the_header_deadline_while_others_are_served(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(
        root.path(),
        transmit,
        &["--header-timeout", "1", "--idle-timeout", "30"],
    );
    let slow = connect(server.addr);
    let mut reader = slow.try_clone().unwrap();
    let mut writer = slow;
    let closed = Arc::new(AtomicBool::new(false));
    let started = Instant::now();

    let reader_closed = Arc::clone(&closed);
    let reader_thread = thread::spawn(move || {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            match reader.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        reader_closed.store(true, Ordering::SeqCst);
        (started.elapsed(), got, end)
    });
    let writer_closed = Arc::clone(&closed);
    let writer_thread = thread::spawn(move || {
        let head = b"GET /f.txt HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        for &b in head.iter().chain(std::iter::repeat(&b'a')).take(40) {
            if writer_closed.load(Ordering::SeqCst) || writer.write_all(&[b]).is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(300));
        }
    });

    let mut served = 0;
    while !closed.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(6) {
        let t = Instant::now();
        let r = fetch(server.addr, "/f.txt", "");
        assert_eq!(r.status, 200);
        assert!(
            t.elapsed() < Duration::from_millis(800),
            "a normal client waited {:?} beside the slowloris",
            t.elapsed()
        );
        served += 1;
        thread::sleep(Duration::from_millis(100));
    }
    let (elapsed, got, end) = reader_thread.join().unwrap();
    writer_thread.join().unwrap();
    match end {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the slowloris was not closed within 5 s: {e}"),
    }
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed <= Duration::from_secs(3),
        "slowloris closed after {elapsed:?} with --header-timeout 1"
    );
    if !got.is_empty() {
        let rs = parse_all(&got, &[]);
        assert_eq!(rs.len(), 1, "{rs:?}");
        assert_eq!(rs[0].status, 408, "{:?}", rs[0]);
    }
    assert!(served >= 3, "only {served} requests served meanwhile");
}

fn idle_connections_are_closed_after_the_idle_timeout(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(
        root.path(),
        transmit,
        &["--idle-timeout", "1", "--header-timeout", "30"],
    );
    let mut c = server.conn();
    let r = c.get("/f.txt", "");
    assert_eq!((r.status, r.closes()), (200, false));
    let t = Instant::now();
    c.expect_eof();
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited <= Duration::from_secs(3),
        "idle keep-alive connection closed after {waited:?} with --idle-timeout 1"
    );

    // A connection that never sends a byte is idle too.
    let mut quiet = server.conn();
    let t = Instant::now();
    quiet.expect_eof();
    assert!(
        t.elapsed() <= Duration::from_secs(3),
        "silent connection closed after {:?}",
        t.elapsed()
    );
}

fn a_reader_that_stops_reading_is_closed_by_the_send_deadline(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let len = 64 * MIB;
    File::create(root.path().join("zeros"))
        .unwrap()
        .set_len(len as u64)
        .unwrap();
    let content = pattern(4 * MIB, 71);
    put(root.path(), "p.bin", &content);
    let server = serve(root.path(), transmit, &["--send-timeout", "1"]);
    // Every file in the open-file cache before the count.
    assert_bytes_eq(&fetch(server.addr, "/p.bin", "").body, &content, "before");
    assert_eq!(fetch(server.addr, "/f.txt", "").status, 200);
    let mut warm = server.conn();
    assert_eq!(warm.head("/zeros", "Connection: close\r\n").status, 200);
    warm.expect_eof();
    thread::sleep(Duration::from_millis(200));
    let baseline = family_fd_count(server.pid());
    let mut stalled = server.conn();
    stalled.send(&req("GET", "/zeros", ""));
    // The stalled reader holds nobody up.
    thread::sleep(Duration::from_millis(1000));
    let t = Instant::now();
    assert_eq!(fetch(server.addr, "/f.txt", "").status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(800),
        "{:?}",
        t.elapsed()
    );
    thread::sleep(Duration::from_millis(1500));
    let h = stalled.read_head();
    assert_eq!((h.status, h.content_length()), (200, Some(len as u64)));
    let (body, end) = stalled.read_upto(len);
    assert_ne!(
        end,
        End::Open,
        "all 64 MiB arrived: no progress for 2.5 s did not close the connection"
    );
    assert!(body.len() < len);
    assert!(body.iter().all(|&b| b == 0), "bytes other than the file's");
    // Nothing of the cut response is left behind: no descriptor (a pipe under splice),
    // no queued byte in what the next response goes through.
    let r = fetch(server.addr, "/p.bin", "");
    assert_bytes_eq(&r.body, &content, "after the cut");
    let fds = fd_count_settled(server.pid(), baseline);
    assert!(
        fds <= baseline,
        "{fds} descriptors open after the cut, {baseline} before"
    );
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

/// [`out_of_descriptors_no_accept_busy_loop_and_accepting_resumes_with`] with the defaults (the file served from memory), then with
/// the file sent by the strategy from its cached descriptor.
fn out_of_descriptors_no_accept_busy_loop_and_accepting_resumes(transmit: &str) {
    for extra in FILE_PARTS {
        out_of_descriptors_no_accept_busy_loop_and_accepting_resumes_with(transmit, extra);
    }
}

fn out_of_descriptors_no_accept_busy_loop_and_accepting_resumes_with(
    transmit: &str,
    extra: &[&str],
) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(
        root.path(),
        transmit,
        &[extra, &["--status-path", "/status"]].concat(),
    );
    let mut existing = server.conn();
    assert_eq!(existing.get("/f.txt", "").status, 200);
    thread::sleep(Duration::from_millis(200));
    // Room for exactly 8 more descriptors in each of the server's processes: the limit
    // is the number below which 8 are free (descriptors are taken lowest first).
    let mut limits = Vec::new();
    for p in family(server.pid()) {
        let open = open_fds(p);
        let limit = (0..)
            .filter(|fd| !open.contains(fd))
            .nth(8)
            .expect("a ninth free descriptor number");
        limits.push((p, limit));
        let ok = Command::new("prlimit")
            .arg("--pid")
            .arg(p.to_string())
            .arg(format!("--nofile={limit}:{limit}"))
            .status()
            .expect("prlimit runs")
            .success();
        assert!(ok, "prlimit --pid {p} failed");
    }
    let crowd: Vec<TcpStream> = (0..40).map(|_| connect(server.addr)).collect();
    thread::sleep(Duration::from_millis(500));
    // The descriptors really ran out: every number below the limit is taken.
    for &(p, limit) in &limits {
        let open = open_fds(p);
        let below = open.iter().filter(|&&fd| fd < limit).count() as u64;
        assert_eq!(
            below, limit,
            "process {p}: {below} descriptors below the limit of {limit} open with 40 connections waiting"
        );
    }
    let cpu_before = family_cpu_seconds(server.pid());
    thread::sleep(Duration::from_secs(1));
    let burned = family_cpu_seconds(server.pid()) - cpu_before;
    assert!(
        burned < 0.3,
        "{burned:.2} s of CPU in 1 s spent out of descriptors: an accept busy-loop"
    );

    // The connection made before is still served: the file it asked for before is open
    // in the cache, so no descriptor is needed.
    let t = Instant::now();
    let r = existing.get("/f.txt", "");
    assert_eq!(
        (r.status, r.closes(), r.body.as_slice()),
        (200, false, &b"F\n"[..]),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // Logged (once a second at most) and counted.
    let err = server.wait_stderr("accept: ");
    assert!(err.contains("pausing accepts"), "error log: {err}");
    let s = existing.get("/status", "");
    let j: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert!(
        j["errors"]["accept_out_of_descriptors"].as_u64() > Some(0),
        "{j}"
    );

    // Descriptors free up: accepting resumes.
    drop(crowd);
    let t = Instant::now();
    let r = fetch(server.addr, "/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "a new connection waited {:?}",
        t.elapsed()
    );
    let r = existing.get("/f.txt", "");
    assert_eq!(r.status, 200, "{r:?}");
}

// ---------------------------------------------------------------------------------------
// 11. Every transmit strategy

fn gets_ranges_heads_and_offsets_past_4_gib(transmit: &str) {
    let root = docroot();
    let small = pattern(1000, 11);
    let mid = pattern(5 * MIB, 12);
    put(root.path(), "small.txt", &small);
    put(root.path(), "mid", &mid);
    put(root.path(), "empty.txt", b"");
    let sparse_len: u64 = 5 << 30;
    let marker_at: u64 = (4 << 30) + 100;
    let marker = b"past-4-GiB";
    let f = File::create(root.path().join("sparse")).unwrap();
    f.set_len(sparse_len).unwrap();
    f.write_all_at(marker, marker_at).unwrap();
    drop(f);

    for extra in FILE_PARTS {
        let s = &format!("{transmit} {extra:?}");
        let server = serve(root.path(), transmit, extra);
        let mut c = server.conn();

        let g = c.get("/small.txt", "");
        assert_eq!(g.status, 200, "{s}: {g:?}");
        assert_eq!(g.header("content-type"), Some("text/plain"), "{s}");
        assert_bytes_eq(&g.body, &small, s);
        let h = c.head("/small.txt", "");
        assert_eq!(h.headers_except_date(), g.headers_except_date(), "{s}");

        let m = c.get("/mid", "");
        assert_eq!(m.status, 200, "{s}");
        assert_eq!(
            m.header("content-type"),
            Some("application/octet-stream"),
            "{s}"
        );
        assert_bytes_eq(&m.body, &mid, &format!("{s}: 5 MiB"));

        let e = c.get("/empty.txt", "");
        assert_eq!((e.status, e.content_length()), (200, Some(0)), "{s}");

        expect_range(&mut c, "/small.txt", "bytes=0-8", 0, 8, 1000, &small[..9]);
        expect_range(
            &mut c,
            "/small.txt",
            "bytes=-10",
            990,
            999,
            1000,
            &small[990..],
        );
        expect_range(
            &mut c,
            "/small.txt",
            "bytes=990-",
            990,
            999,
            1000,
            &small[990..],
        );
        expect_range(
            &mut c,
            "/mid",
            "bytes=1000000-3999999",
            1_000_000,
            3_999_999,
            mid.len() as u64,
            &mid[1_000_000..4_000_000],
        );
        let r = c.get("/small.txt", "Range: bytes=500-599,0-9\r\n");
        expect_parts(&r, "text/plain", &small, &[(500, 599), (0, 9)]);

        // Offsets past 4 GiB of a sparse 5 GiB file.
        let hs = c.head("/sparse", "");
        assert_eq!(hs.content_length(), Some(sparse_len), "{s}");
        let past = marker_at + marker.len() as u64 - 1;
        expect_range(
            &mut c,
            "/sparse",
            &format!("bytes={marker_at}-{past}"),
            marker_at,
            past,
            sparse_len,
            marker,
        );
        expect_range(
            &mut c,
            "/sparse",
            "bytes=-4",
            sparse_len - 4,
            sparse_len - 1,
            sparse_len,
            &[0; 4],
        );
        let r = c.get(
            "/sparse",
            &format!("Range: bytes={marker_at}-{past},0-1\r\n"),
        );
        assert_eq!(r.status, 206, "{s}: {r:?}");
        let parts = multipart_parts(&r);
        assert_eq!(parts.len(), 2, "{s}");
        assert_eq!(parts[0].0, format!("bytes {marker_at}-{past}/{sparse_len}"));
        assert_eq!(parts[0].2, marker, "{s}");
        assert_eq!(parts[1].0, format!("bytes 0-1/{sparse_len}"));
        assert_eq!(parts[1].2, [0, 0], "{s}");

        // Pipelined: a range, a HEAD, a GET, then the close.
        c.send(
            &[
                req("GET", "/small.txt", "Range: bytes=10-19\r\n"),
                req("HEAD", "/mid", ""),
                req("GET", "/small.txt", "Connection: close\r\n"),
            ]
            .concat(),
        );
        let r = c.response();
        assert_eq!((r.status, r.body.as_slice()), (206, &small[10..20]), "{s}");
        let r = c.response_to(true);
        assert_eq!(
            (r.status, r.content_length()),
            (200, Some(mid.len() as u64)),
            "{s}"
        );
        let r = c.response();
        assert_eq!(r.status, 200, "{s}");
        assert!(r.closes(), "{s}");
        assert_bytes_eq(&r.body, &small, s);
        c.expect_eof();
    }
}

// ---------------------------------------------------------------------------------------
// 12. Gaps: one exact test each

/// The short body every error carries: `STATUS REASON\n`.
fn expect_error_body(r: &Response, status: u16, reason: &str) {
    assert_eq!((r.status, r.reason.as_str()), (status, reason), "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/plain"), "{r:?}");
    assert_eq!(r.body, format!("{status} {reason}\n").into_bytes(), "{r:?}");
}

/// Whether the tests run as root (mknod needs it).
fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next().map(|u| u == "0"))
        .unwrap_or(false)
}

fn device_files_are_404_without_blocking(transmit: &str) {
    if !is_root() {
        eprintln!("skipped: mknod needs root");
        return;
    }
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    // /dev/null's and /dev/zero's numbers, and a block device (loop0's).
    for (name, kind, major, minor) in [
        ("null", "c", "1", "3"),
        ("zero", "c", "1", "5"),
        ("loop", "b", "7", "0"),
    ] {
        let made = Command::new("mknod")
            .arg(root.path().join(name))
            .args([kind, major, minor])
            .status()
            .expect("mknod runs");
        assert!(made.success(), "mknod {name} {kind} {major} {minor}");
    }
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    for target in ["/null", "/zero", "/loop"] {
        let t = Instant::now();
        let r = c.get(target, "");
        expect_error_body(&r, 404, "Not Found");
        assert!(!r.closes(), "{target}: a 404 keeps the connection: {r:?}");
        let h = c.head(target, "");
        assert_eq!(h.status, 404, "HEAD {target}: {h:?}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "{target} took {:?}",
            t.elapsed()
        );
    }
    let r = c.get("/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
}

fn a_backslash_is_a_literal_byte_of_a_path(transmit: &str) {
    let root = docroot();
    put(root.path(), "a\\b", b"back slash\n");
    put(root.path(), "a/b", b"a slash b\n");
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    for target in ["/a\\b", "/a%5Cb", "/a%5cb"] {
        let r = c.get(target, "");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"back slash\n"[..]),
            "{target}: {r:?}"
        );
        assert_eq!(
            r.header("content-type"),
            Some("application/octet-stream"),
            "{target}"
        );
        assert_eq!(r.content_length(), Some(11), "{target}");
    }
    // Never a separator: `/a\b` is not `/a/b`, and `\..\` climbs nowhere.
    let r = c.get("/a%2Fb", "");
    expect_error_body(&r, 404, "Not Found");
    let r = c.get("/x\\..\\a\\b", "");
    expect_error_body(&r, 404, "Not Found");
}

/// Requests answered with these (status, `Connection: close`, body) exactly, whole and
/// one byte per write.
fn expect_answers(addr: SocketAddr, request: &str, want: &[(u16, bool, &[u8])]) {
    let want: Vec<(u16, bool, Vec<u8>)> =
        want.iter().map(|&(s, c, b)| (s, c, b.to_vec())).collect();
    let whole = parse_all(&raw(addr, request.as_bytes(), false), &[]);
    assert_eq!(answers(&whole), want, "{request:?}");
    let bytewise = parse_all(&raw_bytewise(addr, request.as_bytes()), &[]);
    assert_eq!(answers(&bytewise), want, "{request:?} one byte per write");
}

fn transfer_codings_and_chunk_framing_through_the_binary(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;
    const BAD: &[u8] = b"400 Bad Request\n";
    const UNSUPPORTED: &[u8] = b"501 Not Implemented\n";
    let h = "GET /f.txt HTTP/1.1\r\nHost: t\r\n";
    // A well-formed coding the server does not support: 501; a malformed field: 400.
    for (te, status, body) in [
        ("bogus", 501, UNSUPPORTED),
        ("bogus, chunked", 501, UNSUPPORTED),
        ("chunked, bogus", 501, UNSUPPORTED),
        ("gzip", 501, UNSUPPORTED),
        (",", 400, BAD),
        ("chunked, chunked", 400, BAD),
        ("chu nked", 400, BAD),
        ("chunked;q=1", 400, BAD),
    ] {
        let request = format!("{h}Transfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
        expect_answers(addr, &request, &[(status, true, body)]);
        let r = expect_refused(addr, request.as_bytes(), status);
        assert_eq!(r.content_length(), Some(body.len() as u64));
    }
    // Any Transfer-Encoding in HTTP/1.0.
    expect_answers(
        addr,
        "GET /f.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        &[(400, true, BAD)],
    );
    // Bad chunk framing in a GET's body: the GET, whose head was whole, is answered; the
    // body then gets a 400 and the close.
    for body in [
        "zz\r\n",
        "\r\n",
        "5\r\nhelloXX\r\n0\r\n\r\n",
        "5\nhello\r\n0\r\n\r\n",
        "0\r\nX-Trailer: 1\n\r\n",
        "11111111111111111\r\n",
    ] {
        let request = format!("{h}Transfer-Encoding: chunked\r\n\r\n{body}");
        expect_answers(addr, &request, &[(200, false, b"F\n"), (400, true, BAD)]);
    }
    let r = fetch(addr, "/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
}

fn methods_versions_and_targets_one_byte_per_write(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let addr = server.addr;
    let not_allowed: &[u8] = b"405 Method Not Allowed\n";
    for request in [
        "POST /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "POST /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        "DELETE /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    ] {
        expect_answers(addr, request, &[(405, true, not_allowed)]);
    }
    // A POST with a body, then a GET on the same connection.
    expect_answers(
        addr,
        "POST /f.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhelloGET /f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        &[(405, false, not_allowed), (200, true, b"F\n")],
    );
    // HTTP/1.0 without Host: served, then closed.
    expect_answers(addr, "GET /f.txt HTTP/1.0\r\n\r\n", &[(200, true, b"F\n")]);
    expect_answers(
        addr,
        "GET /f.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /f.txt HTTP/1.0\r\n\r\n",
        &[(200, false, b"F\n"), (200, true, b"F\n")],
    );
    // Absolute-form: the path is served whatever the authority and Host say.
    for request in [
        "GET http://other.example:8080/f.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        "GET http://t/f.txt HTTP/1.0\r\n\r\n",
        "GET http://t/%66.txt?q=1 HTTP/1.1\r\nHost: elsewhere\r\nConnection: close\r\n\r\n",
    ] {
        expect_answers(addr, request, &[(200, true, b"F\n")]);
    }
}

fn the_etag_changes_with_the_inode_at_the_same_size_and_mtime(transmit: &str) {
    use std::os::unix::fs::MetadataExt;
    let root = docroot();
    let path = root.path().join("i.txt");
    let body = b"the same bytes\n";
    fs::write(&path, body).unwrap();
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    let r1 = c.get("/i.txt", "");
    assert_eq!((r1.status, r1.body.as_slice()), (200, &body[..]));
    let before = fs::metadata(&path).unwrap();

    let tmp = root.path().join("i.txt.new");
    fs::write(&tmp, body).unwrap();
    File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    fs::rename(&tmp, &path).unwrap();
    let after = fs::metadata(&path).unwrap();
    assert_ne!(after.ino(), before.ino());
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec()),
        "same size and mtime to the nanosecond"
    );

    let r2 = c.get("/i.txt", "");
    assert_eq!((r2.status, r2.body.as_slice()), (200, &body[..]));
    assert_ne!(
        r1.must("etag"),
        r2.must("etag"),
        "a new inode, the same ETag"
    );
    assert_eq!(r1.must("last-modified"), r2.must("last-modified"));
    // The old validator no longer matches; the new one does.
    let r = c.get("/i.txt", &format!("If-None-Match: {}\r\n", r1.must("etag")));
    assert_eq!(r.status, 200, "{r:?}");
    let r = c.get("/i.txt", &format!("If-None-Match: {}\r\n", r2.must("etag")));
    assert_eq!(r.status, 304, "{r:?}");
}

/// Sets `SO_RCVBUF` of a connected socket (which fixes it: no autotuning).
fn set_rcvbuf(s: &TcpStream, bytes: i32) {
    use std::os::fd::AsFd;
    linerate_sys::net::setsockopt_int(
        s.as_fd(),
        linerate_sys::net::SOL_SOCKET,
        linerate_sys::net::SO_RCVBUF,
        bytes,
    )
    .expect("SO_RCVBUF");
}

fn a_trickling_reader_is_not_closed_by_the_send_deadline(transmit: &str) {
    let root = docroot();
    let content = pattern(256 << 10, 51);
    put(root.path(), "t.bin", &content);
    // Small buffers on both sides, so the server waits on this reader most of the time.
    let server = serve(
        root.path(),
        transmit,
        &["--send-timeout", "1", "--sndbuf", "16K"],
    );
    let mut c = server.conn();
    set_rcvbuf(&c.s, 16 << 10);
    let t = Instant::now();
    c.send(&req("GET", "/t.bin", ""));
    let h = c.read_head();
    assert_eq!(
        (h.status, h.content_length()),
        (200, Some(content.len() as u64))
    );
    let mut got = Vec::new();
    while got.len() < content.len() {
        thread::sleep(Duration::from_millis(200));
        let want = (32 << 10).min(content.len() - got.len());
        let (b, end) = c.read_upto(want);
        got.extend_from_slice(&b);
        assert_eq!(
            end,
            End::Open,
            "{transmit}: closed after {} bytes and {:?} though the reader kept reading",
            got.len(),
            t.elapsed()
        );
    }
    assert_bytes_eq(&got, &content, "trickled body");
    // The test means something only if the server waited on the reader for well over
    // the deadline in all.
    assert!(
        t.elapsed() > Duration::from_millis(1200),
        "the body arrived in {:?}: buffers too large for this test",
        t.elapsed()
    );
    // Still a keep-alive connection.
    let r = c.get("/t.bin", "Range: bytes=0-9\r\n");
    assert_eq!((r.status, r.body.as_slice()), (206, &content[..10]));
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

fn request_line_and_header_limits_follow_their_flags(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let line = |len: usize| {
        let q = "q".repeat(len - "GET /f.txt? HTTP/1.1".len());
        format!("GET /f.txt?{q} HTTP/1.1")
    };
    // Header lines (CRLFs included, the empty line not) of exactly `len` bytes.
    let fields = |len: usize| {
        let fixed = "Host: t\r\nConnection: close\r\nX-Pad: \r\n".len();
        format!(
            "Host: t\r\nConnection: close\r\nX-Pad: {}\r\n",
            "p".repeat(len - fixed)
        )
    };
    let ok = [(200, true, &b"F\n"[..])];
    for (max_line, max_header) in [(100usize, 1000usize), (20_000, 30_000)] {
        let server = serve(
            root.path(),
            transmit,
            &[
                "--max-request-line",
                &max_line.to_string(),
                "--max-header-bytes",
                &max_header.to_string(),
            ],
        );
        let addr = server.addr;
        // One byte per write too, for the small limits only (time).
        let check = |request: String, want: &[(u16, bool, &[u8])]| {
            if max_line < 1000 {
                expect_answers(addr, &request, want);
            } else {
                let rs = parse_all(&raw(addr, request.as_bytes(), false), &[]);
                let want: Vec<(u16, bool, Vec<u8>)> =
                    want.iter().map(|&(s, c, b)| (s, c, b.to_vec())).collect();
                assert_eq!(answers(&rs), want, "{:.80}", request);
            }
        };
        check(format!("{}\r\n{}\r\n", line(max_line), fields(100)), &ok);
        check(
            format!("{}\r\n{}\r\n", line(max_line + 1), fields(100)),
            &[(414, true, b"414 URI Too Long\n")],
        );
        let over = format!("{}\r\n{}\r\n", line(max_line + 1), fields(100));
        expect_error_body(
            &expect_refused(addr, over.as_bytes(), 414),
            414,
            "URI Too Long",
        );

        let head = "GET /f.txt HTTP/1.1\r\n";
        check(format!("{head}{}\r\n", fields(max_header)), &ok);
        check(
            format!("{head}{}\r\n", fields(max_header + 1)),
            &[(431, true, b"431 Request Header Fields Too Large\n")],
        );
        let over = format!("{head}{}\r\n", fields(max_header + 1));
        let r = expect_refused(addr, over.as_bytes(), 431);
        expect_error_body(&r, 431, "Request Header Fields Too Large");
    }
}

fn after_an_error_a_client_still_sending_reads_the_error_then_the_server_closes(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &[]);
    let mut s = connect(server.addr);
    s.write_all(b"GET /f.txt HTTP/1.1\r\nHost: t\r\nBad@Name: x\r\n\r\n")
        .unwrap();
    let start = Instant::now();
    // The client goes on sending 1 KiB every 20 ms, for up to 8 s, until a write fails.
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || -> Option<Duration> {
        let junk = [b'j'; 1024];
        while start.elapsed() < Duration::from_secs(8) {
            if w.write_all(&junk).is_err() {
                return Some(start.elapsed());
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    });
    // It reads only after sending for a while: a server that closed at once, with its
    // input unread, would have reset the connection under the unread 400 by now.
    thread::sleep(Duration::from_millis(500));
    let got = read_until_eof(&mut s, Vec::new());
    let rs = parse_all(&got, &[]);
    assert_eq!(rs.len(), 1, "{rs:?}");
    expect_error_body(&rs[0], 400, "Bad Request");
    assert!(rs[0].closes(), "{:?}", rs[0]);
    let failed = writer.join().unwrap();
    let failed = failed.expect("the server never closed while the client kept sending");
    assert!(
        failed < Duration::from_secs(5),
        "the server closed {failed:?} after the error (it drains for about 2 s)"
    );
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
                ["bytes", "host", "remote", "request", "status", "time"],
                "{line:?}"
            );
            assert_eq!(v["remote"], "127.0.0.1", "{line:?}");
            assert_eq!(v["host"].as_str(), host, "{line:?}");
            assert_eq!(v["request"], request_line, "{line:?}");
            assert_eq!(v["status"], status, "{line:?}");
            assert_eq!(v["bytes"], bytes, "{line:?}");
            let time = v["time"].as_str().expect("time is a string");
            let t =
                parse_imf_date(time).unwrap_or_else(|| panic!("time {time:?} is no IMF-fixdate"));
            assert!((t - unix_now()).abs() <= 30, "time {time:?} is not now");
        }
        other => panic!("format {other}"),
    }
}

/// `10/Oct/2000:13:55:36 +0000`, and now.
fn check_clf_time(time: &str) {
    let parse = || -> Option<i64> {
        let (date, zone) = time.split_once(' ')?;
        if zone != "+0000" {
            return None;
        }
        let f: Vec<&str> = date.split([':', '/']).collect();
        if f.len() != 6 || f[0].len() != 2 || f[2].len() != 4 || f[3..].iter().any(|x| x.len() != 2)
        {
            return None;
        }
        let num = |x: &str| x.parse::<i64>().ok();
        let mon = MONTHS.iter().position(|m| *m == f[1])? as i64 + 1;
        let days = days_from_civil(num(f[2])?, mon, num(f[0])?);
        Some(days * 86_400 + num(f[3])? * 3600 + num(f[4])? * 60 + num(f[5])?)
    };
    let t = parse().unwrap_or_else(|| panic!("CLF time {time:?}"));
    assert!((t - unix_now()).abs() <= 30, "CLF time {time:?} is not now");
}

fn the_access_log_holds_one_exact_line_per_request_in_order(transmit: &str) {
    let root = docroot();
    let content = pattern(40_000, 61);
    put(root.path(), "f.txt", b"F\n");
    put(root.path(), "big.bin", &content);
    let logs = docroot();
    for format in ["clf", "json"] {
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
    }
}

/// The long flags `linerate serve` declares in src/main.rs (`ServeArgs`).
fn serve_flags_in_source() -> Vec<String> {
    let src = include_str!("../src/main.rs");
    let start = src
        .find("struct ServeArgs {")
        .expect("ServeArgs in main.rs");
    let body = &src[start..];
    let body = &body[..body.find("\n}\n").expect("the end of ServeArgs")];
    let mut flags = Vec::new();
    let mut long: Option<Option<String>> = None;
    for line in body.lines().map(str::trim) {
        if line.starts_with("#[arg(") {
            if let Some(i) = line.find("long = \"") {
                let rest = &line[i + 8..];
                long = Some(Some(rest[..rest.find('"').unwrap()].to_string()));
            } else if line.contains("long") {
                long = Some(None);
            }
        } else if let Some((field, _)) = line.split_once(':') {
            if field.starts_with("//") || field.contains(' ') {
                continue;
            }
            if let Some(name) = long.take() {
                flags.push(name.unwrap_or_else(|| field.replace('_', "-")));
            }
        }
    }
    flags.sort();
    flags
}

#[test]
fn serve_help_names_every_long_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
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
            let end = flag.find([' ', '=', ',']).unwrap_or(flag.len());
            Some(flag[..end].to_string())
        })
        .filter(|f| f != "help")
        .collect();
    in_help.sort();
    let in_source = serve_flags_in_source();
    assert!(
        in_source.len() >= 20 && in_source.iter().any(|f| f == "transmit"),
        "ServeArgs parsed wrong: {in_source:?}"
    );
    assert_eq!(
        in_help, in_source,
        "serve --help against ServeArgs:\n{help}"
    );

    // --config names a key for each flag but itself: `root` for DIR, `pin` for --no-pin.
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let keys = flat
        .split_once("without the dashes: ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list)
        .unwrap_or_else(|| panic!("no key list in --config's help:\n{help}"));
    let mut keys: Vec<String> = keys.split(", ").map(str::to_string).collect();
    keys.sort();
    let mut want: Vec<String> = in_source
        .iter()
        .filter(|f| *f != "config")
        .map(|f| {
            if f == "no-pin" {
                "pin".into()
            } else {
                f.clone()
            }
        })
        .chain(["root".to_string()])
        .collect();
    want.sort();
    assert_eq!(keys, want, "--config's keys against the flags");
}

// ---------------------------------------------------------------------------------------
// Signals and start-up

/// Lines of a log file (none if it does not exist).
fn log_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Regression: SIGHUP, SIGUSR1, SIGUSR2 and SIGQUIT killed the server (exit 129, 138,
/// 140, 131), cutting the download in flight, and a `kill -HUP` after 500 answered
/// requests left 327 lines in the access log. Now each leaves the server serving (so do
/// SIGWINCH, SIGCHLD and SIGPIPE), the download goes on byte-exact, SIGQUIT stops
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
    for sig in ["HUP", "USR1", "USR2", "WINCH", "CHLD", "PIPE"] {
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
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
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
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
    assert!(err.contains("/nonexistent/linerate-root"), "{err}");
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
    // Not through the harness, whose --listen flag would win over the file.
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .arg("serve")
        .arg(root.path())
        .args(["--config", conf.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr: SocketAddr = first
        .trim_end()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("first line {first:?}"));
    let status = fetch(addr, "/f.txt", "").status;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200);
    fs::write(&conf, "workers = 1\nlisten = 8080\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2: listen: "), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

// ---------------------------------------------------------------------------------------
// Descriptors and permissions

/// Sets the soft descriptor limit of process `pid` (the hard one stays).
fn set_soft_nofile(pid: u32, soft: u64) {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let hard = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .expect("Max open files line")
        .to_string();
    let ok = Command::new("prlimit")
        .arg("--pid")
        .arg(pid.to_string())
        .arg(format!("--nofile={soft}:{hard}"))
        .status()
        .expect("prlimit runs")
        .success();
    assert!(ok, "prlimit --pid {pid} --nofile={soft}:{hard}");
}

/// Regression: under `prlimit --nofile=1024:1024` with two workers and the default
/// `--open-file-cache 10000`, 1,500 distinct 16 KiB files gave 1,003 answers 200 and 497
/// answers 404 (`openat2` failing with EMFILE), and `/index.html` was 404 afterwards.
/// Each worker's cache is now sized from its share of the limit.
fn with_1024_descriptors_1500_files_are_all_served(transmit: &str) {
    let root = docroot();
    let body = pattern(16 * 1024, 81);
    for i in 0..1500 {
        put(root.path(), &format!("d{}/f{i}.bin", i % 10), &body);
    }
    put(root.path(), "index.html", b"<p>home</p>\n");
    let server = Server::start_under(
        &["prlimit", "--nofile=1024:1024"],
        root.path(),
        &["--transmit", transmit, "--workers", "2"],
    );
    // Eight keep-alive connections, spread over both workers by the kernel's hash.
    let mut conns: Vec<Conn> = (0..8).map(|_| server.conn()).collect();
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..1500 {
        let r = conns[i % 8].get(&format!("/d{}/f{i}.bin", i % 10), "");
        *statuses.entry(r.status).or_insert(0) += 1;
        if r.status == 200 {
            assert_bytes_eq(&r.body, &body, &format!("f{i}.bin"));
        }
    }
    assert_eq!(statuses.get(&200), Some(&1500), "statuses: {statuses:?}");
    for _ in 0..20 {
        let r = fetch(server.addr, "/index.html", "");
        assert_eq!(r.status, 200, "{r:?}");
    }
}

/// Out of descriptors for real: a file that exists is never a 404. With cached files
/// holding descriptors, the cache gives them back and the open is retried (200); with
/// none to give back, 503 with `Retry-After`, and 200 again once descriptors are free.
/// Both are counted on the status page and the first is in the error log.
fn out_of_descriptors_an_existing_file_is_served_or_503_never_404(transmit: &str) {
    let root = docroot();
    let big = pattern(100_000, 82);
    for i in 0..8 {
        put(root.path(), &format!("f{i}.bin"), &big);
    }
    put(root.path(), "new.bin", &big);
    put(root.path(), "g.txt", b"G\n");
    let server = serve(root.path(), transmit, &["--status-path", "/status"]);
    let pid = server.pid();
    let mut c = server.conn();
    for i in 0..8 {
        assert_eq!(c.get(&format!("/f{i}.bin"), "").status, 200);
    }
    // No descriptor free: the lowest free number is the limit.
    let open = open_fds(pid);
    let lowest_free = (0..).find(|fd| !open.contains(fd)).unwrap();
    set_soft_nofile(pid, lowest_free);
    let r = c.get("/new.bin", "");
    assert_eq!(r.status, 200, "the cache gave back its descriptors: {r:?}");
    assert_bytes_eq(&r.body, &big, "new.bin");
    let err = server.wait_stderr("out of descriptors opening /new.bin");
    assert!(
        err.contains("emptied the open-file cache"),
        "error log: {err}"
    );

    // Nothing left to give back: every new descriptor is refused.
    set_soft_nofile(pid, 3);
    for _ in 0..2 {
        let r = c.get("/g.txt", "");
        assert_eq!(r.status, 503, "{r:?}");
        assert_eq!(r.header("retry-after"), Some("1"), "{r:?}");
        assert!(
            !r.closes(),
            "a 503 for descriptors keeps the connection: {r:?}"
        );
    }
    set_soft_nofile(pid, 1024);
    let r = c.get("/g.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"G\n"[..]), "{r:?}");
    let s = c.get("/status", "");
    let j: serde_json::Value = serde_json::from_slice(&s.body).unwrap();
    assert!(
        j["errors"]["open_out_of_descriptors"].as_u64() >= Some(3),
        "{j}"
    );
    assert!(j["errors"]["unavailable_503"].as_u64() >= Some(2), "{j}");
}

/// Regression: `GET /file.bin/` and `/file.bin/.` answered 200 with the file (nginx: 404).
/// A path ending in `/`, `.` or `..` names a directory.
fn a_path_that_names_a_directory_never_serves_a_file(transmit: &str) {
    let root = docroot();
    put(root.path(), "file.bin", b"FILE\n");
    put(root.path(), "dir/index.html", b"INDEX\n");
    let server = serve(root.path(), transmit, &[]);
    let mut c = server.conn();
    for target in [
        "/file.bin/",
        "/file.bin/.",
        "/file.bin/%2e",
        "/file.bin/x/..",
    ] {
        let r = c.get(target, "");
        assert_eq!(r.status, 404, "{target}: {r:?}");
        let h = c.head(target, "");
        assert_eq!(h.status, 404, "HEAD {target}: {h:?}");
    }
    assert_eq!(c.get("/file.bin", "").body, b"FILE\n");
    for target in ["/dir/", "/dir/.", "/dir/x/.."] {
        let r = c.get(target, "");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"INDEX\n"[..]),
            "{target}"
        );
    }
    assert_eq!(c.get("/dir", "").status, 301);
}

/// Whether this test process can start the server as user nobody (root, and `setpriv`).
fn can_run_as_nobody() -> bool {
    let root = fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    // nobody must be able to reach the binary too (a checkout under /root is not).
    root && Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_linerate"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Regression: a file the server may not read (mode 000, the server running as nobody)
/// answered 404 and logged nothing. Now 403 with an error-log line; so is a file under a
/// directory the server may not search. Readable files beside them are served.
fn a_file_the_server_may_not_read_is_403_with_an_error_log_line(transmit: &str) {
    use std::os::unix::fs::PermissionsExt;
    if !can_run_as_nobody() {
        eprintln!("skipped: needs root, setpriv, and a binary user nobody may run");
        return;
    }
    let root = docroot();
    put(root.path(), "secret.txt", b"S\n");
    put(root.path(), "open.txt", b"O\n");
    put(root.path(), "closed/inner.txt", b"I\n");
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    mode(root.path(), 0o755);
    mode(&root.path().join("secret.txt"), 0o000);
    mode(&root.path().join("closed"), 0o700);
    let server = Server::start_under(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        root.path(),
        &["--transmit", transmit],
    );
    let mut c = server.conn();
    let r = c.get("/secret.txt", "");
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(c.head("/secret.txt", "").status, 403);
    assert_eq!(c.get("/closed/inner.txt", "").status, 403);
    assert_eq!(c.get("/open.txt", "").body, b"O\n");
    let err = server.wait_stderr("secret.txt");
    assert!(
        err.lines().any(|l| l.contains("/secret.txt")
            && l.contains("Permission denied")
            && l.contains("403")),
        "error log: {err}"
    );
}

// ---------------------------------------------------------------------------------------
// Cut responses and bodies

/// Waits up to 5 s for the log at `path` to have `n` lines; returns them.
fn wait_log_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = log_lines(path);
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        thread::sleep(Duration::from_millis(20));
    }
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

/// Regression: a request body trickled one byte every 2 s kept its connection open
/// indefinitely (still open at 25 s with --header-timeout 3 --idle-timeout 5). The whole
/// body must now arrive within --body-timeout of its head (4 s here); the answer is
/// sent, then the connection is closed at the deadline, with an error-log line.
fn a_trickled_request_body_is_cut_by_the_body_deadline(transmit: &str) {
    let root = docroot();
    put(root.path(), "f.txt", b"F\n");
    let server = serve(
        root.path(),
        transmit,
        &[
            "--body-timeout",
            "4",
            "--header-timeout",
            "3",
            "--idle-timeout",
            "5",
            "--error-log-level",
            "info",
        ],
    );
    let mut c = server.conn();
    c.send(&req("GET", "/f.txt", "Content-Length: 100\r\n"));
    let t = Instant::now();
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
    c.s.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    // One byte every 2 s (under the 3 s allowed between two bytes), reading meanwhile
    // for the close.
    let mut closed_at = None;
    let mut next_byte = Instant::now();
    while closed_at.is_none() && t.elapsed() < Duration::from_secs(8) {
        if Instant::now() >= next_byte {
            if c.s.write_all(b"x").is_err() {
                closed_at = Some(t.elapsed());
            }
            next_byte += Duration::from_secs(2);
        }
        let mut b = [0u8; 64];
        match c.s.read(&mut b) {
            Ok(0) => closed_at = Some(t.elapsed()),
            Ok(n) => panic!("{n} bytes after the answer"),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(_) => closed_at = Some(t.elapsed()),
        }
    }
    let closed_at = closed_at.expect("the connection was still open 8 s into a trickled body");
    assert!(
        closed_at >= Duration::from_millis(3800) && closed_at < Duration::from_secs(5),
        "closed {closed_at:?} after the head, with --body-timeout 4"
    );
    let err = server.wait_stderr("--body-timeout");
    assert!(
        err.contains("request body not whole within --body-timeout"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// Memory

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
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", root, "--small-file", "10G"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("--small-file") && err.contains("16M"), "{err}");
    let conf = dir.path().join("c.toml");
    fs::write(&conf, "small-file = \"10G\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["serve", root, "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("small-file") && err.contains("16M"), "{err}");
}

/// The body deadline is the client's to meet only while the server reads: while a large
/// response fills the socket the server reads nothing, so a client still sending its
/// body then (and not reading) is not cut at --body-timeout; once the answer is read,
/// the rest of the body comes and the connection goes on.
fn the_body_deadline_does_not_run_while_the_server_is_not_reading(transmit: &str) {
    let root = docroot();
    let big = pattern(16 * MIB, 83);
    put(root.path(), "big.bin", &big);
    put(root.path(), "f.txt", b"F\n");
    let server = serve(root.path(), transmit, &["--body-timeout", "1"]);
    let mut c = server.conn();
    c.send(&req("GET", "/big.bin", "Content-Length: 5\r\n"));
    c.send(b"a");
    // The server fills the socket with the answer and stops reading; 2.5 s pass.
    thread::sleep(Duration::from_millis(2500));
    let h = c.read_head();
    assert_eq!(h.status, 200);
    let (body, end) = c.read_upto(big.len());
    assert_eq!(
        end,
        End::Open,
        "the download was cut after {} bytes",
        body.len()
    );
    assert_bytes_eq(&body, &big, "the answer read late");
    c.send(b"bcde");
    let r = c.get("/f.txt", "");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"F\n"[..]));
}
