//! Content types and precompressed variants (docs/http.md V1-V3) through the binary:
//! the variant `Accept-Encoding` asks for, sent whole, ranged, revalidated and as HEAD
//! under every transmit strategy; stale variants ignored; variants that appear or go
//! away while the server runs; `--precompressed`.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use linerate_testkit::{assert_bytes_eq, docroot, fetch, pattern, per_strategy, put, Linerate};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md V2, V3.
    the_variant_asked_for_is_sent_whole_ranged_revalidated_and_as_head,
    // Rules: docs/http.md V3.
    a_small_files_variant_comes_from_memory,
);

/// Sets `path`'s modification time `secs` seconds before now.
fn age(path: &Path, secs: u64) {
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs))
        .unwrap();
}

/// A root with `app.js` (100 KiB) and its `.br` and `.gz` (each different bytes, so the
/// body tells which went), a stale `style.css.gz`, and `logo.png` with a `.gz` that
/// must never be used (an image is not compressed).
fn site(root: &Path) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let js = pattern(100 << 10, 1);
    let br = pattern(20 << 10, 2);
    let gz = pattern(30 << 10, 3);
    put(root, "app.js", &js);
    put(root, "app.js.br", &br);
    put(root, "app.js.gz", &gz);
    age(&root.join("app.js"), 60);
    put(root, "style.css", b"body{}\n");
    put(root, "style.css.gz", b"stale");
    age(&root.join("style.css.gz"), 60);
    put(root, "logo.png", b"PNG");
    put(root, "logo.png.gz", b"never");
    (js, br, gz)
}

fn the_variant_asked_for_is_sent_whole_ranged_revalidated_and_as_head(transmit: &str) {
    let root = docroot();
    let (js, br, gz) = site(root.path());
    let s = LINERATE.serve(root.path(), transmit, &[]);
    let get = |extra: &str| fetch(s.addr, "/app.js", extra);
    let vary = |r: &linerate_testkit::Response| r.header("vary").map(str::to_string);

    let identity = get("");
    assert_eq!(identity.status, 200);
    assert_bytes_eq(&identity.body, &js, "no Accept-Encoding: the file");
    assert_eq!(identity.header("content-encoding"), None);
    assert_eq!(vary(&identity).as_deref(), Some("Accept-Encoding"));
    assert_eq!(
        identity.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );

    let b = get("Accept-Encoding: gzip, deflate, br\r\n");
    assert_eq!((b.status, b.header("content-encoding")), (200, Some("br")));
    assert_bytes_eq(&b.body, &br, "br preferred");
    assert_eq!(b.header("content-type"), identity.header("content-type"));
    assert_eq!(vary(&b).as_deref(), Some("Accept-Encoding"));
    assert_eq!(b.header("content-length"), Some("20480"));

    let g = get("Accept-Encoding: gzip\r\n");
    assert_eq!(g.header("content-encoding"), Some("gzip"));
    assert_bytes_eq(&g.body, &gz, "gzip");
    let etags = [&identity, &b, &g].map(|r| r.header("etag").unwrap().to_string());
    assert!(
        etags[0] != etags[1] && etags[1] != etags[2] && etags[0] != etags[2],
        "an ETag per coding: {etags:?}"
    );

    // Zstandard asked for, none there: gzip is the next the client takes.
    let z = get("Accept-Encoding: zstd, gzip;q=0.5\r\n");
    assert_eq!(z.header("content-encoding"), Some("gzip"));
    let none = get("Accept-Encoding: identity;q=0, deflate\r\n");
    assert_eq!(none.header("content-encoding"), None);
    assert_bytes_eq(&none.body, &js, "nothing acceptable: the file");

    // A range of the variant's bytes.
    let r = get("Accept-Encoding: gzip\r\nRange: bytes=10-19\r\n");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("content-range"), Some("bytes 10-19/30720"));
    assert_eq!(r.body, &gz[10..20]);
    assert_eq!(vary(&r).as_deref(), Some("Accept-Encoding"));
    // If-Range with the gzip ETag applies the range; with the identity one it does not.
    let ir = get(&format!(
        "Accept-Encoding: gzip\r\nRange: bytes=0-0\r\nIf-Range: {}\r\n",
        etags[2]
    ));
    assert_eq!(ir.status, 206);
    let ir = get(&format!(
        "Accept-Encoding: gzip\r\nRange: bytes=0-0\r\nIf-Range: {}\r\n",
        etags[0]
    ));
    assert_eq!((ir.status, ir.body.len()), (200, gz.len()));

    // Revalidation against the variant's own validator.
    let nm = get(&format!(
        "Accept-Encoding: gzip\r\nIf-None-Match: {}\r\n",
        etags[2]
    ));
    assert_eq!(nm.status, 304);
    assert_eq!(vary(&nm).as_deref(), Some("Accept-Encoding"));
    assert_eq!(nm.header("etag"), Some(etags[2].as_str()));
    let other = get(&format!(
        "Accept-Encoding: br\r\nIf-None-Match: {}\r\n",
        etags[2]
    ));
    assert_eq!(
        other.status, 200,
        "the gzip ETag does not match the br variant"
    );
    assert_bytes_eq(&other.body, &br, "br after a gzip ETag");

    // HEAD: GET's fields, no body.
    let mut c = s.conn();
    let h = c.head("/app.js", "Accept-Encoding: br\r\n");
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-encoding"), Some("br"));
    assert_eq!(h.header("content-length"), Some("20480"));
    assert!(h.body.is_empty());

    // A variant older than its file is left by an edit: never sent.
    let css = fetch(s.addr, "/style.css", "Accept-Encoding: gzip\r\n");
    assert_eq!(css.header("content-encoding"), None);
    assert_eq!(css.body, b"body{}\n");
    assert_eq!(vary(&css).as_deref(), Some("Accept-Encoding"));
    // An image is never looked up for variants, nor varies.
    let png = fetch(s.addr, "/logo.png", "Accept-Encoding: gzip\r\n");
    assert_eq!((png.body.as_slice(), vary(&png)), (&b"PNG"[..], None));
    assert_eq!(png.header("content-type"), Some("image/png"));
}

fn a_small_files_variant_comes_from_memory(transmit: &str) {
    let root = docroot();
    put(root.path(), "small.json", b"{\"a\": 1}\n");
    put(root.path(), "small.json.zst", b"zstd bytes");
    age(&root.path().join("small.json"), 60);
    let s = LINERATE.serve(root.path(), transmit, &[]);
    for _ in 0..3 {
        let r = fetch(s.addr, "/small.json", "Accept-Encoding: zstd\r\n");
        assert_eq!(r.header("content-encoding"), Some("zstd"));
        assert_eq!(r.body, b"zstd bytes");
        assert_eq!(
            r.header("content-type"),
            Some("application/json; charset=utf-8")
        );
    }
}

/// Variants that appear, change or go away while the server runs are seen at the next
/// request (the open-file cache's change notifications, or its checks without them).
/// Rules: docs/http.md V3.
#[test]
fn variants_made_or_removed_while_serving_are_seen_at_once() {
    let root = docroot();
    put(root.path(), "doc.html", b"<p>doc</p>\n");
    age(&root.path().join("doc.html"), 60);
    let s = LINERATE.start(root.path(), &[]);
    let get = || fetch(s.addr, "/doc.html", "Accept-Encoding: br, gzip\r\n");
    for _ in 0..2 {
        assert_eq!(get().header("content-encoding"), None);
    }
    put(root.path(), "doc.html.gz", b"gz v1");
    assert_eq!(get().body, b"gz v1", "made after the first requests");
    put(root.path(), "doc.html.br", b"br v1");
    assert_eq!(get().body, b"br v1");
    fs::rename(root.path().join("doc.html.gz"), root.path().join("x")).unwrap();
    fs::remove_file(root.path().join("doc.html.br")).unwrap();
    let r = get();
    assert_eq!(
        (r.header("content-encoding"), r.body.as_slice()),
        (None, &b"<p>doc</p>\n"[..])
    );
    // The file edited after its variant: the variant is stale from then on.
    // (Timestamps are coarse: within a few ms two writes may share one, and a variant
    // as new as its file counts as fresh; so the variant is dated back.)
    put(root.path(), "doc.html.gz", b"gz v2");
    age(&root.path().join("doc.html.gz"), 30);
    assert_eq!(get().body, b"gz v2");
    put(root.path(), "doc.html", b"<p>doc, edited</p>\n");
    let r = get();
    assert_eq!(r.header("content-encoding"), None, "a stale variant");
    assert_eq!(r.body, b"<p>doc, edited</p>\n");
}

/// `--precompressed` narrows or turns off the variants; a bad list is a usage error
/// naming the flag.
/// Rules: docs/http.md V2.
#[test]
fn precompressed_chooses_which_codings_are_sent() {
    let root = docroot();
    let (js, _, gz) = site(root.path());
    let s = LINERATE.start(root.path(), &["--precompressed", "gzip"]);
    let r = fetch(s.addr, "/app.js", "Accept-Encoding: br, gzip\r\n");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_bytes_eq(&r.body, &gz, "only gzip configured");
    drop(s);
    let s = LINERATE.start(root.path(), &["--precompressed", "none"]);
    let r = fetch(s.addr, "/app.js", "Accept-Encoding: br, gzip\r\n");
    assert_eq!(
        (r.header("content-encoding"), r.header("vary")),
        (None, None)
    );
    assert_bytes_eq(&r.body, &js, "none configured");
    drop(s);
    let (code, _, err) = LINERATE.run(&["serve", "--precompressed", "gzip,deflate"]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--precompressed") && err.contains("'deflate' is not a coding"),
        "{err}"
    );
}

/// Content types of the files of static sites and mirrors, with a charset on text.
/// Rules: docs/http.md V1.
#[test]
fn content_types_for_sites_and_mirrors() {
    let root = docroot();
    let cases = [
        ("index.html", "text/html; charset=utf-8"),
        ("a.mjs", "text/javascript; charset=utf-8"),
        ("a.wasm", "application/wasm"),
        ("a.avif", "image/avif"),
        (
            "site.webmanifest",
            "application/manifest+json; charset=utf-8",
        ),
        ("p-1.0-1.noarch.rpm", "application/x-rpm"),
        ("p_1.0_all.deb", "application/vnd.debian.binary-package"),
        ("SHA256SUMS.asc", "application/pgp-signature"),
        ("notes.TXT", "text/plain; charset=utf-8"),
        ("LICENSE", "application/octet-stream"),
    ];
    for (name, _) in cases {
        put(root.path(), name, b"x");
    }
    let s = LINERATE.start(root.path(), &[]);
    for (name, want) in cases {
        let r = fetch(s.addr, &format!("/{name}"), "");
        assert_eq!(r.header("content-type"), Some(want), "{name}");
    }
}

/// `linerate compress DIR` writes the variants the server then sends; a second run
/// writes nothing; a file edited since is compressed again, and a reader meanwhile
/// always finds a whole variant (the old one or the new one), never a part.
#[test]
fn compress_writes_variants_idempotently_and_atomically() {
    use std::io::Read;
    let root = docroot();
    let v1 = "function one() { return 1; }\n".repeat(20_000);
    put(root.path(), "big.js", v1.as_bytes());
    put(root.path(), "photo.jpg", b"jpeg");
    let dir = root.path().to_str().unwrap();
    let (code, out, err) = LINERATE.run(&["compress", dir, "--codings", "gzip,br"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("1 files: 2 variants written"), "{out}");
    let (code, out, _) = LINERATE.run(&["compress", dir, "--codings", "gzip,br", "--json"]);
    assert_eq!(code, 0);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (j["written"].as_u64(), j["current"].as_u64()),
        (Some(0), Some(2)),
        "{out}"
    );
    assert!(!root.path().join("photo.jpg.gz").exists());
    let s = LINERATE.start(root.path(), &[]);
    let r = fetch(s.addr, "/big.js", "Accept-Encoding: gzip\r\n");
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let mut got = String::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_string(&mut got)
        .unwrap();
    assert!(got == v1, "the served variant decompresses to the file");

    // Edited: compressed again while a reader keeps reading the variant.
    let v2 = "function two() { return 2; }\n".repeat(20_000);
    age(&root.path().join("big.js.gz"), 60);
    put(root.path(), "big.js", v2.as_bytes());
    let gz = root.path().join("big.js.gz");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                let bytes = fs::read(&gz).expect("the variant is always there");
                let mut text = String::new();
                flate2::read::GzDecoder::new(&bytes[..])
                    .read_to_string(&mut text)
                    .expect("a whole gzip stream");
                assert!(text == v1 || text == v2, "old or new, never a part");
                reads += 1;
            }
            reads
        });
        for _ in 0..3 {
            let (code, _, err) = LINERATE.run(&["compress", dir, "--codings", "gzip", "-q"]);
            assert_eq!(code, 0, "{err}");
            age(&gz, 60);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let (code, _, _) = LINERATE.run(&["compress", dir, "--codings", "gzip", "-q"]);
    assert_eq!(code, 0);
    let r = fetch(s.addr, "/big.js", "Accept-Encoding: gzip\r\n");
    let mut got = String::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_string(&mut got)
        .unwrap();
    assert!(got == v2, "the edited file's variant");
    // A bad level is a usage error naming the flag.
    let (code, _, err) = LINERATE.run(&["compress", dir, "--gzip-level", "10"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--gzip-level"), "{err}");
}

/// The variant chosen for each `Accept-Encoding`, through the server: a file with all
/// three variants, and one with only a `.gz`.
/// Rules: docs/http.md V2.
#[test]
fn the_variant_for_each_accept_encoding_through_the_server() {
    let root = docroot();
    put(root.path(), "all.css", b"identity");
    put(root.path(), "all.css.br", b"br");
    put(root.path(), "all.css.zst", b"zstd");
    put(root.path(), "all.css.gz", b"gzip");
    put(root.path(), "gz.css", b"identity");
    put(root.path(), "gz.css.gz", b"gzip");
    for name in ["all.css", "gz.css"] {
        age(&root.path().join(name), 60);
    }
    let s = LINERATE.start(root.path(), &[]);
    for (file, header, want) in [
        ("all.css", None, "identity"),
        ("all.css", Some("gzip"), "gzip"),
        ("all.css", Some("gzip, deflate, br"), "br"),
        ("all.css", Some("gzip, deflate, br, zstd"), "br"),
        ("all.css", Some("zstd, gzip"), "zstd"),
        ("all.css", Some("br;q=0.5, gzip"), "gzip"),
        ("all.css", Some("br;q=0.5, zstd;q=0.6, gzip;q=0.4"), "zstd"),
        ("all.css", Some("GZIP"), "gzip"),
        ("all.css", Some("x-gzip"), "gzip"),
        ("all.css", Some("deflate"), "identity"),
        ("all.css", Some(""), "identity"),
        ("all.css", Some("*"), "br"),
        ("all.css", Some("*;q=0.1, br;q=0"), "zstd"),
        ("all.css", Some("*;q=0"), "identity"),
        ("all.css", Some("identity"), "identity"),
        ("all.css", Some("gzip;q=0.5, identity"), "identity"),
        ("all.css", Some("gzip, identity;q=0"), "gzip"),
        ("all.css", Some("identity;q=0"), "identity"),
        ("all.css", Some("gzip;q=2"), "identity"),
        ("gz.css", Some("br, zstd, gzip;q=0.1"), "gzip"),
        ("gz.css", Some("br"), "identity"),
        ("gz.css", Some("*"), "gzip"),
    ] {
        let extra = header.map_or(String::new(), |h| format!("Accept-Encoding: {h}\r\n"));
        let r = fetch(s.addr, &format!("/{file}"), &extra);
        assert_eq!(r.status, 200, "{file} {header:?}");
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            want,
            "{file} with Accept-Encoding {header:?}"
        );
        let coding = r.header("content-encoding").unwrap_or("identity");
        assert_eq!(coding, want, "{file} {header:?}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    }
}
