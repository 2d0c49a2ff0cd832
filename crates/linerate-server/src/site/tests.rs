//! The site's answers, request by request.

use super::*;
use crate::config::{Config, SiteConfig};
use crate::router::Router;
use linerate_http::request::{parse, Parse};

/// A site over a temporary root holding `a.txt` (5 bytes), `big.bin` (64 KiB, above
/// the small-file size), `dir/index.html`, `list/` (no index) and `<b> & c`.
pub(crate) fn site(autoindex: bool) -> (tempfile::TempDir, Site) {
    site_with(autoindex, false)
}

/// [`site`], with the access-log line of each response made when `logging`.
pub(crate) fn site_with(autoindex: bool, logging: bool) -> (tempfile::TempDir, Site) {
    let root = tempfile::tempdir().unwrap();
    let p = root.path();
    std::fs::write(p.join("a.txt"), b"hello").unwrap();
    std::fs::write(p.join("big.bin"), vec![3u8; 64 << 10]).unwrap();
    std::fs::create_dir(p.join("dir")).unwrap();
    std::fs::write(p.join("dir/index.html"), b"<p>i</p>").unwrap();
    std::fs::create_dir(p.join("list")).unwrap();
    std::fs::write(p.join("list/<b> & c"), b"x").unwrap();
    let mut cfg = Config::new(p.to_path_buf());
    // 16 KiB, so that big.bin is above it whatever the default.
    cfg.small_file = 16 << 10;
    cfg.autoindex = autoindex;
    cfg.status_path = Some("/.status".into());
    if !logging {
        cfg.access_log = crate::config::AccessLog::Off;
    }
    (root, Site::alone(cfg))
}

fn ask(s: &mut Site, head: &str) -> Response {
    let text = format!("{head}\r\nHost: x\r\n\r\n");
    match parse(text.as_bytes(), &s.limits()) {
        Parse::Complete { request, .. } => {
            // In HTTP/1.1's form, the head the first part.
            let mut r = s.respond(&request, Some([127, 0, 0, 1].into()), SystemTime::now());
            r.write_h1_head();
            r
        }
        _ => panic!("not a valid request: {head}"),
    }
}

/// The head's text and the body's length as the parts say.
fn head_of(r: &Response) -> String {
    match r.plan.parts.front() {
        Some(Part::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => panic!("a response starts with its head"),
    }
}

fn body_len(r: &Response) -> u64 {
    r.plan.parts.iter().skip(1).map(Part::len).sum()
}

#[test]
fn a_small_file_goes_from_memory_a_large_one_as_a_file_range() {
    let (_root, mut s) = site(false);
    let r = ask(&mut s, "GET /a.txt HTTP/1.1");
    assert_eq!(r.record.status, Status::Ok);
    let head = head_of(&r);
    assert!(head.contains("Content-Length: 5\r\n"), "{head}");
    assert!(head.contains("ETag: \""), "{head}");
    assert!(matches!(
        r.plan.parts.get(1),
        Some(Part::Shared {
            start: 0,
            end: 5,
            ..
        })
    ));
    assert_eq!((r.record.body_bytes, body_len(&r)), (5, 5));
    let r = ask(&mut s, "GET /big.bin HTTP/1.1");
    assert!(matches!(
        r.plan.parts.get(1),
        Some(Part::File(FileRange {
            offset: 0,
            len: 65536,
            ..
        }))
    ));
    assert_eq!(r.record.body_bytes, 65536);
    // HEAD: the same head, no body.
    let h = ask(&mut s, "HEAD /big.bin HTTP/1.1");
    assert_eq!(h.plan.parts.len(), 1);
    assert_eq!(h.record.body_bytes, 0);
    assert!(head_of(&h).contains("Content-Length: 65536\r\n"));
}

#[test]
fn ranges_single_and_multipart_add_up_to_their_length() {
    let (_root, mut s) = site(false);
    let r = ask(&mut s, "GET /big.bin HTTP/1.1\r\nRange: bytes=10-19");
    assert_eq!(r.record.status, Status::PartialContent);
    assert!(head_of(&r).contains("Content-Range: bytes 10-19/65536\r\n"));
    assert_eq!(body_len(&r), 10);
    let r = ask(
        &mut s,
        "GET /big.bin HTTP/1.1\r\nRange: bytes=0-0,100-199,-5",
    );
    assert_eq!(r.record.status, Status::PartialContent);
    let head = head_of(&r);
    assert!(head.contains("multipart/byteranges; boundary="), "{head}");
    let declared: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(declared, body_len(&r), "Content-Length is the parts' sum");
    let r = ask(&mut s, "GET /big.bin HTTP/1.1\r\nRange: bytes=70000-");
    assert_eq!(r.record.status, Status::RangeNotSatisfiable);
    assert!(head_of(&r).contains("Content-Range: bytes */65536\r\n"));
}

#[test]
fn validators_give_304_and_failed_preconditions_412() {
    let (_root, mut s) = site(false);
    let head = head_of(&ask(&mut s, "GET /a.txt HTTP/1.1"));
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("ETag: "))
        .unwrap()
        .to_string();
    let r = ask(
        &mut s,
        &format!("GET /a.txt HTTP/1.1\r\nIf-None-Match: {etag}"),
    );
    assert_eq!(r.record.status, Status::NotModified);
    assert_eq!(r.plan.parts.len(), 1, "no body");
    let r = ask(&mut s, "GET /a.txt HTTP/1.1\r\nIf-Match: \"other\"");
    assert_eq!(r.record.status, Status::PreconditionFailed);
}

#[test]
fn directories_redirect_serve_their_index_or_list_when_asked() {
    let (_root, mut s) = site(false);
    let r = ask(&mut s, "GET /dir?x=1 HTTP/1.1");
    assert_eq!(r.record.status, Status::MovedPermanently);
    assert!(head_of(&r).contains("Location: /dir/?x=1\r\n"));
    let r = ask(&mut s, "GET /dir/ HTTP/1.1");
    assert_eq!(r.record.status, Status::Ok);
    assert_eq!(r.record.body_bytes, 8);
    assert_eq!(
        ask(&mut s, "GET /list/ HTTP/1.1").record.status,
        Status::NotFound
    );
    assert_eq!(
        ask(&mut s, "GET /a.txt/ HTTP/1.1").record.status,
        Status::NotFound
    );
    let (_root, mut s) = site(true);
    let r = ask(&mut s, "GET /list/ HTTP/1.1");
    assert_eq!(r.record.status, Status::Ok);
    let body: Vec<u8> = r
        .plan
        .parts
        .iter()
        .skip(1)
        .flat_map(|p| match p {
            Part::Bytes(b) => b.clone(),
            _ => panic!("a listing is bytes"),
        })
        .collect();
    let html = String::from_utf8(body).unwrap();
    assert!(html.contains("href=\"./%3Cb%3E%20%26%20c\""), "{html}");
    assert!(html.contains("&lt;b&gt; &amp; c"), "{html}");
}

/// Rules: docs/http.md H1.
#[test]
fn the_router_takes_exact_names_then_the_longest_wildcard_then_the_default() {
    let site = |names: &[&str], default: bool| SiteConfig {
        tls: None,
        acme: false,
        access_log: None,
        log_format: None,
        names: names.iter().map(|n| n.to_string()).collect(),
        root: "/".into(),
        default,
        dotfiles: false,
        autoindex: false,
        etag: crate::config::EtagMode::Mtime,
        precompressed: Vec::new(),
        rules: Vec::new(),
    };
    let r = Router::new(&[
        site(&["a.example.com"], false),
        site(&["*.example.com"], false),
        site(&["*.b.example.com"], false),
        site(&[], true),
    ]);
    let long = format!("{}.example.com", "x".repeat(300));
    for (authority, want) in [
        (Some("a.example.com"), 0),
        (Some("A.EXAMPLE.COM:8080"), 0),
        (Some("a.example.com."), 0),
        (Some("z.example.com"), 1),
        (Some("c.b.example.com"), 2),
        (Some("example.com"), 3),
        (Some("[::1]:80"), 3),
        (Some(long.as_str()), 1),
        (None, 3),
    ] {
        assert_eq!(r.route(authority), want, "{authority:?}");
    }
}

#[test]
fn methods_paths_and_the_status_page() {
    let (_root, mut s) = site(false);
    let r = ask(&mut s, "DELETE /a.txt HTTP/1.1");
    assert_eq!(r.record.status, Status::MethodNotAllowed);
    assert!(head_of(&r).contains("Allow: GET, HEAD\r\n"));
    // docs/http.md F6: a `..` that would leave the root is 400.
    assert_eq!(
        ask(&mut s, "GET /%2e%2e/etc HTTP/1.1").record.status,
        Status::BadRequest
    );
    assert_eq!(
        ask(&mut s, "GET /dir/../a.txt HTTP/1.1").record.status,
        Status::Ok
    );
    assert_eq!(
        ask(&mut s, "GET /a%00 HTTP/1.1").record.status,
        Status::BadRequest
    );
    let r = ask(&mut s, "GET /.status HTTP/1.1");
    assert_eq!(r.record.status, Status::Ok);
    assert!(head_of(&r).contains("application/json"));
    // Every request so far is counted, this one too.
    assert!(Stats::get(&s.stats.requests) >= 4);
}
