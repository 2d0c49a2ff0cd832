//! The site's answers pinned byte for byte: a fixed tree, fixed clocks and a fixed
//! multipart boundary, asked a matrix of requests (files, variants, rules, conditions,
//! ranges, HEAD, errors, error pages, redirects, listings, OPTIONS), each answer written
//! as HTTP/1.1 with its body's parts and what the log counts, compared with
//! `snapshots/answers.txt`. A change that moves a byte a client sees fails here; one
//! meant to is written again with `LINERATE_WRITE_SNAPSHOT=1` and reviewed in the diff.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use linerate_http::request::{parse, Parse};

use crate::config::Config;
use crate::response::Part;
use crate::site::Site;

const RULES: &str = r#"
precompressed = ["br", "gzip"]
autoindex = true

[[rule]]
path = "/"
errors = { 404 = "/errors/404.html" }

[[rule]]
path = "/assets/"
expires = "365d"
headers = { "X-Asset" = "yes" }

[[rule]]
path = "/typed/"
types = { thing = "application/x-typed" }

[[rule]]
path = "/old/"
redirect = "https://docs.example.com/"
redirect-code = 308

[[rule]]
path = "/api/"
cors = { origins = ["https://app.example.com"], headers = ["X-Requested-With"], max-age = "10m" }

[[rule]]
path = "/blog/"
try = ["{path}", "{path}.html"]
"#;

/// The tree: name and contents.
const FILES: &[(&str, &str)] = &[
    ("index.html", "<p>home</p>"),
    ("a.txt", "hello, ranges and all"),
    ("empty.txt", ""),
    ("style.css", "body { color: black; }"),
    ("style.css.gz", "GZ-BYTES"),
    ("style.css.br", "BR-BYTES"),
    ("assets/app.js", "console.log(1);"),
    ("typed/a.thing", "typed"),
    ("errors/404.html", "<p>not here</p>"),
    ("list/b.txt", "b"),
    ("list/a <&> b.txt", "a"),
    ("blog/hello.html", "<p>hello</p>"),
    ("api/data.json", "{}"),
];

/// Requests, each a head less its `Host` (added).
const ASKED: &[&str] = &[
    "GET / HTTP/1.1",
    "GET /a.txt HTTP/1.1",
    "HEAD /a.txt HTTP/1.1",
    "GET /a.txt HTTP/1.0",
    "GET /a.txt HTTP/1.1\r\nConnection: close",
    "GET /empty.txt HTTP/1.1",
    "GET /a.txt HTTP/1.1\r\nRange: bytes=0-4",
    "GET /a.txt HTTP/1.1\r\nRange: bytes=-3",
    "GET /a.txt HTTP/1.1\r\nRange: bytes=0-1,5-6",
    "GET /a.txt HTTP/1.1\r\nRange: bytes=100-",
    "HEAD /a.txt HTTP/1.1\r\nRange: bytes=0-4",
    "GET /a.txt HTTP/1.1\r\nRange: bytes=0-4\r\nIf-Range: \"nope\"",
    "GET /a.txt HTTP/1.1\r\nRange: bytes=0-4\r\nIf-Range: Fri, 27 Nov 2026 00:00:00 GMT",
    "GET /a.txt HTTP/1.1\r\nIf-None-Match: *",
    "GET /a.txt HTTP/1.1\r\nIf-Match: \"nope\"",
    "HEAD /a.txt HTTP/1.1\r\nIf-Match: \"nope\"",
    "GET /a.txt HTTP/1.1\r\nIf-Modified-Since: Fri, 27 Nov 2026 00:00:00 GMT",
    "GET /a.txt HTTP/1.1\r\nIf-Unmodified-Since: Thu, 01 Jan 1970 00:00:00 GMT",
    "GET /style.css HTTP/1.1",
    "GET /style.css HTTP/1.1\r\nAccept-Encoding: gzip, br",
    "GET /style.css HTTP/1.1\r\nAccept-Encoding: gzip",
    "GET /style.css HTTP/1.1\r\nAccept-Encoding: gzip;q=0.5, identity",
    "GET /style.css HTTP/1.1\r\nAccept-Encoding: br\r\nRange: bytes=0-1",
    "GET /style.css HTTP/1.1\r\nAccept-Encoding: br\r\nIf-None-Match: *",
    "HEAD /style.css HTTP/1.1\r\nAccept-Encoding: gzip",
    "GET /assets/app.js HTTP/1.1",
    "GET /assets/app.js HTTP/1.1\r\nIf-None-Match: *",
    "GET /typed/a.thing HTTP/1.1",
    "GET /missing HTTP/1.1",
    "HEAD /missing HTTP/1.1",
    "GET /list HTTP/1.1",
    "GET /list/ HTTP/1.1",
    "HEAD /list/ HTTP/1.1",
    "GET /old/page?x=1 HTTP/1.1",
    "GET /blog/hello HTTP/1.1",
    "OPTIONS /api/data.json HTTP/1.1\r\nOrigin: https://app.example.com\r\nAccess-Control-Request-Method: GET",
    "OPTIONS /a.txt HTTP/1.1",
    "GET /api/data.json HTTP/1.1\r\nOrigin: https://app.example.com",
    "POST /a.txt HTTP/1.1\r\nContent-Length: 0",
    "DELETE /a.txt HTTP/1.1",
    "GET /../etc/passwd HTTP/1.1",
    "GET /a.txt/ HTTP/1.1",
];

/// The answers to [`ASKED`], as the snapshot writes them.
fn answers() -> String {
    let root = tempfile::tempdir().unwrap();
    let p = root.path();
    let modified = SystemTime::UNIX_EPOCH + Duration::new(1_764_201_600, 123_456_789);
    for (name, body) in FILES {
        let path = p.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
    }
    let mut cfg = Config::new(p.to_path_buf());
    cfg.access_log = crate::config::AccessLog::Off;
    crate::Settings::parse(RULES)
        .expect("the rules load")
        .apply(&mut cfg);
    let mut site = Site::alone(cfg);
    site.boundary_seed = 0x5eed;
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_288_000);
    let mut out = String::new();
    for asked in ASKED {
        let text = format!("{asked}\r\nHost: site.example\r\n\r\n");
        let Parse::Complete { request, .. } = parse(text.as_bytes(), &site.limits()) else {
            writeln!(out, "### {asked:?}\nnot a request\n").unwrap();
            continue;
        };
        let mut r = site.respond(&request, Some([127, 0, 0, 1].into()), now);
        r.write_h1_head();
        writeln!(out, "### {asked:?}").unwrap();
        for (i, part) in r.plan.parts.iter().enumerate() {
            match part {
                Part::Bytes(b) if i == 0 => out.push_str(&String::from_utf8_lossy(b)),
                Part::Bytes(b) => writeln!(out, "bytes {:?}", String::from_utf8_lossy(b)).unwrap(),
                Part::Shared { buf, start, end } => writeln!(
                    out,
                    "memory {start}..{end} {:?}",
                    String::from_utf8_lossy(&buf[*start..*end])
                )
                .unwrap(),
                Part::File(f) => writeln!(out, "file {}+{}", f.offset, f.len).unwrap(),
            }
        }
        writeln!(
            out,
            "= status {}, body {} in the log, close {}\n",
            r.record.status.code(),
            r.record.body_bytes,
            r.plan.close
        )
        .unwrap();
    }
    out
}

#[test]
fn the_sites_answers_are_the_snapshot() {
    crate::snapshot_test::check("answers.txt", &answers());
}
