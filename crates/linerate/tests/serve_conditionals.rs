//! `linerate serve` answering conditional requests: `If-None-Match` (lists, `*`, weak
//! comparison) and its bodiless 304, `If-Match` (strong comparison, 412),
//! `If-Modified-Since` and `If-Unmodified-Since` in the three HTTP date formats
//! (IMF-fixdate, RFC 850, asctime), and `If-Range` with strong validators only.
//!
//! The test runs once per transmit strategy (one `#[test]` each:
//! `conditional_requests::splice`), with the defaults and again with `--collapse 0
//! --small-file 0`.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use linerate_testkit::{
    asctime_date, docroot, fetch, imf_date, parse_imf_date, per_strategy, put, req, rfc850_date,
    secs_of, Conn, Linerate, Server, FILE_PARTS,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md F3.
    conditional_requests,
    // Rules: docs/http.md F1, F8.
    instances_agree_on_validators,
);

/// `linerate serve` with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    LINERATE.serve(root, transmit, extra)
}

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

fn set_mtime(p: &Path, t: SystemTime) {
    File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// The ETag `server` gives `/f.bin`, waiting (10 s at most) while it gives none (a
/// digest not computed yet).
fn etag_of(server: &Server) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = fetch(server.addr, "/f.bin", "");
        assert_eq!(r.status, 200);
        if let Some(t) = r.header("etag") {
            return t.to_string();
        }
        assert!(std::time::Instant::now() < until, "no ETag in 10 s: {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two instances behind a balancer, each with its own copy of one file (other inodes):
/// with the default they agree when the copies' modification times do; with `etag =
/// "content"` whatever the times; a revalidation and an `If-Range` learned from one
/// are answered by the other. `etag = "off"` sends none.
fn instances_agree_on_validators(transmit: &str) {
    let (a, b) = (docroot(), docroot());
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    put(a.path(), "f.bin", &body);
    put(b.path(), "f.bin", &body);
    let (fa, fb) = (a.path().join("f.bin"), b.path().join("f.bin"));
    let when = SystemTime::now() - Duration::from_secs(3600);
    set_mtime(&fa, when);
    set_mtime(&fb, when);
    let (sa, sb) = (
        serve(a.path(), transmit, &[]),
        serve(b.path(), transmit, &[]),
    );
    let tag = etag_of(&sa);
    assert_eq!(etag_of(&sb), tag, "the same size and time: the same tag");
    let r = fetch(sb.addr, "/f.bin", &format!("If-None-Match: {tag}\r\n"));
    assert_eq!(r.status, 304, "{r:?}");
    drop((sa, sb));

    // Deployed apart: other modification times.
    set_mtime(&fb, when + Duration::from_secs(7));
    let (sa, sb) = (
        serve(a.path(), transmit, &[]),
        serve(b.path(), transmit, &[]),
    );
    assert_ne!(etag_of(&sa), etag_of(&sb), "mtime: other times, other tags");
    drop((sa, sb));
    let content = ["--etag", "content"];
    let (sa, sb) = (
        serve(a.path(), transmit, &content),
        serve(b.path(), transmit, &content),
    );
    let tag = etag_of(&sa);
    assert_eq!(etag_of(&sb), tag, "content: the same bytes, the same tag");
    assert_eq!(tag.len(), 34, "16 bytes as hex, quoted: {tag}");
    let r = fetch(sb.addr, "/f.bin", &format!("If-None-Match: {tag}\r\n"));
    assert_eq!(r.status, 304, "{r:?}");
    assert_eq!(r.header("etag"), Some(tag.as_str()));
    // A download begun on one instance, resumed on the other.
    let r = fetch(
        sb.addr,
        "/f.bin",
        &format!("Range: bytes=100000-\r\nIf-Range: {tag}\r\n"),
    );
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.body, &body[100_000..]);
    // A changed file gets another tag, never the old one.
    let mut changed = body.clone();
    changed[0] ^= 1;
    put(b.path(), "f.bin", &changed);
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = fetch(sb.addr, "/f.bin", "");
        assert_ne!(
            r.header("etag"),
            Some(tag.as_str()),
            "the old tag on new bytes"
        );
        if r.header("etag").is_some() && r.body == changed {
            break;
        }
        assert!(std::time::Instant::now() < until, "no new tag: {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop((sa, sb));

    let off = serve(a.path(), transmit, &["--etag", "off"]);
    let r = fetch(off.addr, "/f.bin", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("etag"), None, "{r:?}");
    assert!(r.header("last-modified").is_some());
    let r = fetch(off.addr, "/f.bin", "If-None-Match: *\r\n");
    assert_eq!(r.status, 304);
}
