//! `linerate serve` resolving request targets: directory redirects and `index.html`,
//! `--autoindex`, paths naming a directory, percent-decoding (`%2F`, `..`, `%00`, bad
//! escapes), dotfiles and `--dotfiles`, symbolic links in and out of the root, FIFOs,
//! sockets and device files (404 without blocking), `\` as an ordinary byte, and files
//! the server may not read (403 with an error-log line).
//!
//! Every test runs once per transmit strategy (one `#[test]` each:
//! `a_backslash_is_a_literal_byte_of_a_path::splice`).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use linerate_testkit::{
    docroot, expect_error_body, expect_refused, fetch, is_root, per_strategy, put, req,
    variant_args, Linerate, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md P3, P4, F5, F6.
    directories_paths_dotfiles_symlinks_and_special_files,
    // Rules: docs/http.md P4.
    device_files_are_404_without_blocking,
    // Rules: docs/http.md P3.
    a_backslash_is_a_literal_byte_of_a_path,
    // Rules: docs/http.md F5.
    a_path_that_names_a_directory_never_serves_a_file,
    // Rules: docs/http.md F7.
    a_file_the_server_may_not_read_is_403_with_an_error_log_line,
    // Rules: docs/http.md F5.
    index_names_are_tried_in_order,
);

/// `linerate serve` with `--transmit TRANSMIT` before `extra`.
fn serve(root: &Path, transmit: &str, extra: &[&str]) -> Server {
    LINERATE.serve(root, transmit, extra)
}

/// Whether the server can be started as user nobody here.
fn can_run_as_nobody() -> bool {
    LINERATE.can_run_as_nobody()
}

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
            assert_eq!(
                i.header("content-type"),
                Some("text/html; charset=utf-8"),
                "{target}"
            );
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

/// `--index NAME,...`: the first name that is a file in the directory answers; a
/// directory of that name is passed over; none, 404 (or the listing); a name that is
/// a path is refused at the start, naming the flag.
fn index_names_are_tried_in_order(transmit: &str) {
    let root = docroot();
    let r = root.path();
    put(r, "both/index.htm", b"HTM\n");
    put(r, "both/default.htm", b"DEF\n");
    put(r, "second/default.htm", b"DEF\n");
    put(r, "second/index.html", b"HTML\n");
    put(r, "dirnamed/index.htm/inner.txt", b"inner\n");
    put(r, "dirnamed/default.htm", b"DEF\n");
    put(r, "none/file.txt", b"file\n");
    put(r, "index.html", b"TOP\n");
    {
        let server = serve(r, transmit, &["--index", "index.htm,default.htm"]);
        for (path, want) in [
            ("/both/", &b"HTM\n"[..]),
            ("/second/", b"DEF\n"),
            ("/dirnamed/", b"DEF\n"),
        ] {
            let got = fetch(server.addr, path, "");
            assert_eq!((got.status, &got.body[..]), (200, want), "{path}");
        }
        // index.html is no longer a name tried, at the top as below.
        assert_eq!(fetch(server.addr, "/", "").status, 404);
        assert_eq!(fetch(server.addr, "/none/", "").status, 404);
        // HEAD of an index: its length, no body.
        let head = linerate_testkit::Conn::open(server.addr).head("/both/", "");
        assert_eq!(head.header("content-length"), Some("4"), "{head:?}");
    }
    {
        // By default, index.html alone.
        let server = serve(r, transmit, &["--autoindex"]);
        assert_eq!(fetch(server.addr, "/second/", "").body, b"HTML\n");
        let l = fetch(server.addr, "/both/", "");
        assert_eq!(l.status, 200);
        assert!(
            String::from_utf8_lossy(&l.body).contains("default.htm"),
            "a listing"
        );
    }
    for bad in ["../x", "a/b", ".", ""] {
        let (code, _, err) = LINERATE.run(&["serve", r.to_str().unwrap(), "--index", bad]);
        assert_eq!(code, 64, "--index {bad:?}: {err}");
        assert!(err.contains("--index"), "--index {bad:?}: {err}");
    }
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
    let server = LINERATE.start_under(
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ],
        root.path(),
        &variant_args(transmit),
    );
    let mut c = server.conn();
    let r = c.get("/secret.txt", "");
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(c.head("/secret.txt", "").status, 403);
    assert_eq!(c.get("/closed/inner.txt", "").status, 403);
    assert_eq!(c.get("/open.txt", "").body, b"O\n");
    let err = server.wait_stderr("secret.txt");
    // The file is named, not just the request's path.
    let file = root.path().join("secret.txt");
    assert!(
        err.lines().any(|l| l.contains(file.to_str().unwrap())
            && l.contains("Permission denied")
            && l.contains("403")),
        "error log: {err}"
    );
}

/// A listing of hostile names, loaded in headless Chromium: no name runs a script or
/// makes an element, each links to itself, and `?format=json` lists the same entries.
/// Rules: docs/http.md F5.
#[test]
fn a_listing_of_hostile_names_runs_no_script_in_a_browser() {
    let root = docroot();
    let names = [
        "<img src=x onerror=\"document.title='pwned'\">",
        "<script>document.title='pwned'",
        "<svg onload=\"document.title='pwned'\">",
        "a b%",
        "x\"y' z",
    ];
    for n in names {
        put(&root.path().join("d"), n, b"x");
    }
    let s = LINERATE.start(root.path(), &["--autoindex"]);
    let r = linerate_testkit::fetch(s.addr, "/d/?format=json", "");
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    let listed: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let mut got: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    got.sort_unstable();
    let mut want = names.to_vec();
    want.sort_unstable();
    assert_eq!(got, want);
    // Each link fetches its own file.
    let html = String::from_utf8(linerate_testkit::fetch(s.addr, "/d/", "").body).unwrap();
    for href in html.split("href=\"./").skip(1) {
        let href = href.split('"').next().unwrap();
        let r = linerate_testkit::fetch(s.addr, &format!("/d/{href}"), "");
        assert_eq!((r.status, r.body.as_slice()), (200, &b"x"[..]), "{href}");
    }
    let url = format!("http://{}/d/", s.addr);
    let Some(out) = linerate_testkit::headless_chromium(&["--dump-dom", &url]) else {
        eprintln!("chromium is not installed: the browser check is skipped");
        return;
    };
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("<title>Index of /d/</title>"), "{dom}");
    assert!(!dom.contains("pwned</title>"), "a name ran a script: {dom}");
    for tag in ["<img", "<script", "<svg"] {
        assert!(!dom.contains(tag), "{tag}: {dom}");
    }
    assert_eq!(dom.matches("<a href=").count(), names.len() + 1, "{dom}");
}
