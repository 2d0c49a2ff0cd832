//! The residency probe and the disk helpers (seed 003), driven through the real server
//! with files really evicted from the page cache, and the status page that counts them.

use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use linerate_testkit::{exchange, fetch, parse_all, pattern, raw, Linerate, Response};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// A directory on a disk file system (the target directory; a tmpfs page cannot be
/// evicted, so /tmp would not do everywhere).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn write_synced(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

/// Drops `path`'s pages and checks they are gone.
fn evict(path: &Path) {
    let f = std::fs::File::open(path).unwrap();
    linerate_sys::cache::evict(f.as_fd()).unwrap();
    let s = linerate_sys::cache::cachestat(f.as_fd(), 0, 0).unwrap();
    assert_eq!(s.nr_cache, 0, "{} still cached: {s:?}", path.display());
}

fn get(addr: SocketAddr, path: &str) -> Response {
    fetch(addr, path, "")
}

fn status(addr: SocketAddr) -> serde_json::Value {
    let r = get(addr, "/_status");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.must("content-type").starts_with("application/json"),
        "{r:?}"
    );
    assert!(r.must("cache-control").contains("no-store"), "{r:?}");
    serde_json::from_slice(&r.body).unwrap()
}

fn disk(v: &serde_json::Value, key: &str) -> u64 {
    v["disk"][key].as_u64().unwrap()
}

fn queue(v: &serde_json::Value, key: &str) -> u64 {
    v["queue"][key].as_u64().unwrap()
}

struct Site {
    _dir: tempfile::TempDir,
    root: PathBuf,
    big: Vec<u8>,
    small: Vec<u8>,
    mid: Vec<u8>,
}

fn site() -> Site {
    let dir = disk_dir();
    let root = dir.path().to_path_buf();
    let big = pattern(5 << 20, 1);
    let small = pattern(5000, 2);
    let mid = pattern(100_000, 3);
    write_synced(&root.join("mid.bin"), &mid);
    write_synced(&root.join("big.bin"), &big);
    write_synced(&root.join("small.bin"), &small);
    write_synced(&root.join("hot.txt"), b"hot\n");
    Site {
        _dir: dir,
        root,
        big,
        small,
        mid,
    }
}

/// Rules: docs/http.md C1, S4.
#[test]
fn cold_files_are_read_by_the_helpers_and_served_whole() {
    let s = site();
    let srv = LINERATE.start(
        &s.root,
        &["--status-path", "/_status", "--read-ahead", "1M"],
    );
    let addr = srv.addr;
    // Warm the hot file and the cache entries, then make the files cold.
    assert_eq!(get(addr, "/hot.txt").body, b"hot\n");
    evict(&s.root.join("big.bin"));
    evict(&s.root.join("small.bin"));
    let before = status(addr);

    // A cold big file, pipelined with a hot one behind it: both whole, in order.
    let out = raw(
        addr,
        b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /hot.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        false,
    );
    let r = parse_all(&out, &[]);
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].status, 200, "{:?}", r[0]);
    assert!(r[0].body == s.big, "the cold body differs");
    assert_eq!(r[1].body, b"hot\n");
    // A cold small file: its contents could not be read without the disk.
    let r = get(addr, "/small.bin");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body == s.small, "the cold small body differs");

    // Each window handed to the helpers is counted as read when the worker takes their
    // answer, which can come after the response: the page-cache check of a later
    // window (a new epoch's whole-file probe) may find pages a helper has read before
    // the worker heard from it. Asked again until it has (bounded).
    let mut after = status(addr);
    for _ in 0..50 {
        if disk(&after, "misses") == disk(&after, "helper_reads") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        after = status(addr);
    }
    let d = |k| disk(&after, k) - disk(&before, k);
    // The small file may be in by the time its range is gathered (its failed
    // RWF_NOWAIT read started the kernel's read-ahead); the big one's first window
    // cannot be.
    assert!(d("misses") >= 1, "{after}");
    assert_eq!(d("misses"), d("helper_reads"), "{after}");
    // At least the big file's first read (256 KiB, waited for).
    assert!(d("helper_bytes") >= 256 << 10, "{after}");
    assert_eq!(d("small_file_misses"), 1, "{after}");
    assert!(
        d("probes") >= 5,
        "one probe per 1 MiB window at least: {after}"
    );

    // Now resident: the small file comes from memory (no probe), the big one (under
    // 64 MiB) is probed once, whole, and found present: no window is probed. (Within
    // the epoch of the cold request, 100 ms, the "missing" of its whole probe would
    // hold and its windows would be probed: the test waits the epoch out.)
    // On a loaded machine the worker's tick can come late, and the epoch with it (one
    // CI run of 20 saw a window probed 250 ms on): the pair is asked again, an epoch
    // later each time, until it goes without a miss (5 tries).
    let (mut before_pair, mut last) = (after.clone(), after.clone());
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(250));
        before_pair = status(addr);
        assert!(get(addr, "/small.bin").body == s.small);
        assert!(get(addr, "/big.bin").body == s.big);
        last = status(addr);
        if disk(&last, "misses") == disk(&before_pair, "misses") {
            break;
        }
    }
    assert_eq!(
        disk(&last, "misses"),
        disk(&before_pair, "misses"),
        "{last}"
    );
    assert_eq!(
        disk(&last, "small_file_misses"),
        disk(&before_pair, "small_file_misses")
    );
    // One whole-file probe when the response is made; a second when an epoch (a
    // 100 ms tick) ends before its queue looks again, which a loaded machine makes
    // likely: never a window's.
    let probes = disk(&last, "probes") - disk(&before_pair, "probes");
    assert!((1..=2).contains(&probes), "{probes} probes: {last}");

    // A range deep in a cold file: the window starts at the range. (The probe's
    // "resident" of the request before holds until its epoch, a 100 ms tick, ends.)
    evict(&s.root.join("big.bin"));
    std::thread::sleep(std::time::Duration::from_millis(250));
    let r = fetch(addr, "/big.bin", "Range: bytes=4000000-4099999\r\n");
    assert_eq!(r.status, 206, "{r:?}");
    assert!(r.body == s.big[4_000_000..4_100_000]);
    let ranged = status(addr);
    assert_eq!(disk(&ranged, "misses"), disk(&last, "misses") + 1);
    assert_eq!(
        disk(&ranged, "helper_bytes"),
        disk(&last, "helper_bytes") + 100_000
    );
    // Requests and connections are counted (this status request included).
    assert!(ranged["requests"].as_u64().unwrap() >= 9, "{ranged}");
    assert!(ranged["connections_accepted"].as_u64().unwrap() >= 8);
    assert_eq!(ranged["workers"], 1);

    // A file of one window is probed whole when its response is made; once found
    // resident, the answer holds for the epoch (one 100 ms tick), so twenty more
    // requests, a few milliseconds, make a probe only where an epoch ends among them.
    evict(&s.root.join("mid.bin"));
    assert!(get(addr, "/mid.bin").body == s.mid);
    let cold = status(addr);
    assert_eq!(disk(&cold, "misses"), disk(&ranged, "misses") + 1);
    // Probed whole (not all resident), then its one window (a miss).
    assert_eq!(disk(&cold, "probes"), disk(&ranged, "probes") + 2);
    assert!(get(addr, "/mid.bin").body == s.mid);
    let warm = status(addr);
    assert_eq!(disk(&warm, "probes"), disk(&cold, "probes") + 1);
    for _ in 0..20 {
        assert!(get(addr, "/mid.bin").body == s.mid);
    }
    let memo = status(addr);
    assert!(disk(&memo, "probes") <= disk(&warm, "probes") + 5, "{memo}");
    assert_eq!(disk(&memo, "misses"), disk(&cold, "misses"));
}

#[test]
fn cold_ranges_arrive_whole_one_helper_read_each() {
    // Three ranges of a cold small file, and of a file of one window with one page
    // missing: each range not known resident is read for itself, from its own offset.
    let s = site();
    for collapse in ["16K", "0"] {
        cold_ranges(&s, collapse);
    }
}

fn cold_ranges(s: &Site, collapse: &str) {
    let srv = LINERATE.start(
        &s.root,
        &["--status-path", "/_status", "--collapse", collapse],
    );
    let addr = srv.addr;
    for (name, content) in [("small.bin", &s.small), ("mid.bin", &s.mid)] {
        evict(&s.root.join(name));
        if name == "mid.bin" {
            // All but the last page back in the cache.
            let f = std::fs::File::open(s.root.join(name)).unwrap();
            let mut buf = vec![0u8; 90_000];
            std::os::unix::fs::FileExt::read_exact_at(&f, &mut buf, 0).unwrap();
        }
        let before = status(addr);
        let r = fetch(
            addr,
            &format!("/{name}"),
            "Range: bytes=0-9,1000-1009,4990-4999\r\n",
        );
        assert_eq!(r.status, 206, "{r:?}");
        for (a, b) in [(0, 10), (1000, 1010), (4990, 5000)] {
            assert!(
                r.body.windows(10).any(|w| w == &content[a..b]),
                "{name}: bytes {a}-{b}"
            );
        }
        let after = status(addr);
        let misses = disk(&after, "misses") - disk(&before, "misses");
        let read = disk(&after, "helper_bytes") - disk(&before, "helper_bytes");
        if name == "small.bin" && collapse == "0" {
            // Known cold: each range goes to the helpers, unprobed, from its offset.
            assert_eq!((misses, read), (3, 30), "{after}");
        } else if name == "small.bin" {
            // The failed RWF_NOWAIT read of the whole file started the kernel's
            // read-ahead; a range in by the time the gather reaches it is collapsed
            // from the page cache, one that is not goes to the helpers first (and is
            // collapsed once they are done).
            assert!(misses <= 3, "{after}");
            let collapsed = queue(&after, "collapsed") - queue(&before, "collapsed");
            assert!(collapsed <= 3 && collapsed + misses >= 3, "{after}");
            assert_eq!(read, misses * 10, "{after}");
        } else {
            // The whole-file probe fails, each range is probed, and all are resident.
            assert_eq!(misses, 0, "{after}");
        }
    }
}

#[test]
fn small_files_on_tmpfs_are_cached_without_the_helpers() {
    // tmpfs refuses RWF_NOWAIT (and has no disk to wait for): a small file there is
    // read plainly into the cache, not sent to the helpers on every request.
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("no /dev/shm here; nothing to test");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let small = pattern(5000, 4);
    std::fs::write(dir.path().join("small.bin"), &small).unwrap();
    let srv = LINERATE.start(dir.path(), &["--status-path", "/_status"]);
    for _ in 0..3 {
        assert!(get(srv.addr, "/small.bin").body == small);
    }
    let v = status(srv.addr);
    for k in ["misses", "helper_reads", "small_file_misses"] {
        assert_eq!(disk(&v, k), 0, "{k}: {v}");
    }
}

#[test]
fn without_helpers_nothing_is_probed_and_cold_files_still_arrive() {
    let s = site();
    let srv = LINERATE.start(
        &s.root,
        &["--status-path", "/_status", "--disk-helpers", "0"],
    );
    let addr = srv.addr;
    evict(&s.root.join("big.bin"));
    evict(&s.root.join("small.bin"));
    assert!(get(addr, "/big.bin").body == s.big);
    assert!(get(addr, "/small.bin").body == s.small);
    let v = status(addr);
    for k in ["probes", "misses", "helper_reads", "small_file_misses"] {
        assert_eq!(disk(&v, k), 0, "{k}: {v}");
    }
    // HEAD of the status page: the head only.
    let r = exchange(
        addr,
        b"HEAD /_status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        true,
    );
    assert_eq!(r.status, 200, "{r:?}");
    // Without --status-path the path is just a missing file.
    drop(srv);
    let srv = LINERATE.start(&s.root, &[]);
    assert_eq!(get(srv.addr, "/_status").status, 404);
}

#[test]
fn bad_disk_settings_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    for (args, flag) in [
        (vec!["--disk-helpers", "300"], "--disk-helpers"),
        (vec!["--disk-helpers", "x"], "--disk-helpers"),
        (vec!["--read-ahead", "0"], "--read-ahead"),
        (vec!["--status-path", "status"], "--status-path"),
    ] {
        let mut a = vec!["serve", root, "--listen", "127.0.0.1:0"];
        a.extend(&args);
        let (code, out, err) = LINERATE.run(&a);
        assert_eq!(code, 64, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(!out.contains("listening"), "{args:?}");
    }
    for (text, key) in [
        ("disk-helpers = 999\n", "disk-helpers"),
        ("read-ahead = 0\n", "read-ahead"),
        ("status-path = \"x\"\n", "status-path"),
    ] {
        let cfg = dir.path().join("bad.toml");
        std::fs::write(&cfg, text).unwrap();
        let (code, out, err) = LINERATE.run(&[
            "serve",
            root,
            "--listen",
            "127.0.0.1:0",
            "--config",
            cfg.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{text}: {err}");
        assert!(err.contains(key), "{text}: {err}");
        assert!(!out.contains("listening"), "{text}");
    }
}

/// Sends `/big.bin` to a reader that stops after 1 MiB for `pause` (its socket full,
/// the response outlasting several 100 ms epochs), calling `meanwhile` then; the body.
fn slow_get(addr: SocketAddr, pause: std::time::Duration, meanwhile: impl FnOnce()) -> Vec<u8> {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    linerate_testkit::set_rcvbuf(&s, 64 << 10);
    s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = vec![0u8; 1 << 20];
    s.read_exact(&mut out).unwrap();
    meanwhile();
    std::thread::sleep(pause);
    s.read_to_end(&mut out).unwrap();
    let mut r = parse_all(&out, &[]);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, 200);
    r.remove(0).body
}

/// Rules: docs/http.md C1.
#[test]
fn a_resident_file_is_asked_about_whole_once_an_epoch_and_a_window_at_a_time_once_evicted() {
    let dir = disk_dir();
    let big = pattern(16 << 20, 9);
    let path = dir.path().join("big.bin");
    write_synced(&path, &big);
    let srv = LINERATE.start(
        dir.path(),
        &["--status-path", "/_status", "--read-ahead", "1M"],
    );
    let addr = srv.addr;
    assert!(get(addr, "/big.bin").body == big);
    let before = status(addr);
    // Resident all along: the whole file is asked about again once per epoch in which
    // the response goes on (a probe or two here), never window by window (16 windows
    // of 1 MiB).
    let pause = std::time::Duration::from_millis(400);
    assert!(
        slow_get(addr, pause, || {}) == big,
        "the slow reader's body differs"
    );
    let resident = status(addr);
    let probes = disk(&resident, "probes") - disk(&before, "probes");
    assert!(probes < 8, "{probes} probes: {resident}");
    assert_eq!(disk(&resident, "misses"), disk(&before, "misses"));
    // Evicted while the response waits: once its epoch has ended, the whole file is
    // found short, and what is left goes a probed window at a time, read in by the
    // helpers.
    let body = slow_get(addr, pause, || {
        // Pages held by the pipe and the socket stay; the rest go.
        let f = std::fs::File::open(&path).unwrap();
        linerate_sys::cache::evict(f.as_fd()).unwrap();
        let left = linerate_sys::cache::cachestat(f.as_fd(), 0, 0).unwrap();
        assert!(left.nr_cache < 1024, "{left:?}");
    });
    assert!(body == big, "the evicted file's body differs");
    let evicted = status(addr);
    assert!(
        disk(&evicted, "misses") > disk(&resident, "misses"),
        "{evicted}"
    );
    assert!(
        disk(&evicted, "probes") >= disk(&resident, "probes") + 5,
        "{evicted}"
    );
}
