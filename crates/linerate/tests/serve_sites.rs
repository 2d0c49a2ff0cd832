//! `[[site]]` blocks (docs/http.md H1-H3): requests routed by Host or by the authority
//! of an absolute-form target, each site with its own root and settings, bad blocks
//! refused with the words that say why, and sites added by a reload.

use std::fs;
use std::path::Path;

use linerate_testkit::{docroot, exchange, per_strategy, put, variant, Linerate};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md H1, H2.
    each_host_reaches_its_own_site,
);

/// Three sites under `base`: `docs` (docs.example.com), `wild` (*.example.org, with a
/// listing and no precompressed variants), and `main` (the default, www.example.com);
/// `main/inner` is a site of its own too (inner.example.com), nested in main's root.
/// Each index.html says which site it is. Returns the configuration's path.
fn three_sites(base: &Path, extra: &str) -> std::path::PathBuf {
    for site in ["docs", "wild", "main", "main/inner"] {
        put(
            &base.join(site),
            "index.html",
            format!("{site}\n").as_bytes(),
        );
    }
    put(&base.join("docs"), "only-docs.txt", b"docs only\n");
    put(&base.join("main"), "secret.txt", b"main's\n");
    put(&base.join("wild"), "list/a.txt", b"a\n");
    put(&base.join("wild"), "app.js", b"js\n");
    put(&base.join("wild"), "app.js.gz", b"gz\n");
    let conf = base.join("linerate.toml");
    let b = base.display();
    fs::write(
        &conf,
        format!(
            "access-log = \"off\"\n{extra}\n\
             [[site]]\nnames = [\"docs.example.com\"]\nroot = \"{b}/docs\"\n\n\
             [[site]]\nnames = [\"*.example.org\"]\nroot = \"{b}/wild\"\nautoindex = true\nprecompressed = []\n\n\
             [[site]]\nnames = [\"www.example.com\"]\nroot = \"{b}/main\"\ndefault = true\n\n\
             [[site]]\nnames = [\"inner.example.com\"]\nroot = \"{b}/main/inner\"\n"
        ),
    )
    .unwrap();
    conf
}

/// The body of `GET target` with `Host: host` (none: an HTTP/1.0 request without one).
fn body_for(addr: std::net::SocketAddr, host: Option<&str>, target: &str) -> (u16, String) {
    let req = match host {
        Some(h) => format!("GET {target} HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"),
        None => format!("GET {target} HTTP/1.0\r\n\r\n"),
    };
    let r = exchange(addr, req.as_bytes(), false);
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

fn each_host_reaches_its_own_site(transmit: &str) {
    let base = docroot();
    let (transmit, driver) = variant(transmit);
    let conf = three_sites(
        base.path(),
        &format!("transmit = \"{transmit}\"\ndriver = \"{driver}\""),
    );
    let s = LINERATE.serve_config(None, &conf, &["--workers", "1"]);
    for (host, want) in [
        (Some("docs.example.com"), "docs\n"),
        (Some("DOCS.Example.COM:8080"), "docs\n"),
        (Some("docs.example.com."), "docs\n"),
        (Some("a.example.org"), "wild\n"),
        (Some("b.c.example.org:443"), "wild\n"),
        (Some("example.org"), "main\n"),
        (Some("www.example.com"), "main\n"),
        (Some("unknown.example.net"), "main\n"),
        (Some("127.0.0.1"), "main\n"),
        (Some("[::1]:80"), "main\n"),
        (Some("inner.example.com"), "main/inner\n"),
        (None, "main\n"),
    ] {
        assert_eq!(
            body_for(s.addr, host, "/"),
            (200, want.to_string()),
            "Host {host:?}"
        );
    }
    // The authority of an absolute-form target wins over Host.
    let r = exchange(
        s.addr,
        b"GET http://docs.example.com/ HTTP/1.1\r\nHost: www.example.com\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(r.body, b"docs\n");
    // A site's files are its own: not through another Host, not from a nested root.
    assert_eq!(
        body_for(s.addr, Some("docs.example.com"), "/only-docs.txt").0,
        200
    );
    assert_eq!(
        body_for(s.addr, Some("a.example.org"), "/only-docs.txt").0,
        404
    );
    assert_eq!(
        body_for(s.addr, Some("www.example.com"), "/only-docs.txt").0,
        404
    );
    assert_eq!(
        body_for(s.addr, Some("www.example.com"), "/inner/").1,
        "main/inner\n"
    );
    for target in ["/secret.txt", "/../secret.txt", "/%2e%2e/secret.txt"] {
        let (status, body) = body_for(s.addr, Some("inner.example.com"), target);
        assert!(
            (status == 404 || status == 400) && !body.contains("main's"),
            "{target}: {status} {body}"
        );
    }
    // Each site's settings: a listing and no variants on wild, the opposite elsewhere.
    let (status, listing) = body_for(s.addr, Some("x.example.org"), "/list/");
    assert_eq!(status, 200);
    assert!(listing.contains("a.txt"), "{listing}");
    put(&base.path().join("docs"), "list/a.txt", b"a\n");
    assert_eq!(body_for(s.addr, Some("docs.example.com"), "/list/").0, 404);
    let ask = |host: &str| {
        let req = format!(
            "GET /app.js HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        );
        exchange(s.addr, req.as_bytes(), false)
    };
    let r = ask("x.example.org");
    assert_eq!((r.body.as_slice(), r.header("vary")), (&b"js\n"[..], None));
    put(&base.path().join("main"), "app.js", b"js\n");
    put(&base.path().join("main"), "app.js.gz", b"gz\n");
    let r = ask("www.example.com");
    assert_eq!(
        (r.body.as_slice(), r.header("content-encoding")),
        (&b"gz\n"[..], Some("gzip"))
    );
}

/// Bad `[[site]]` blocks are refused at the start with one line naming the problem,
/// and by a reload with the sites before serving on; a good reload adds a site.
/// Rules: docs/http.md H3.
#[test]
fn bad_site_blocks_are_refused_and_a_reload_adds_a_site() {
    let base = docroot();
    let conf = three_sites(base.path(), "");
    let text = fs::read_to_string(&conf).unwrap();
    let bad = base.path().join("bad.toml");
    for (broken, why) in [
        (
            text.replace(
                "names = [\"www.example.com\"]",
                "names = [\"docs.example.com\"]",
            ),
            "'docs.example.com' is named by two sites",
        ),
        (
            text.replace(
                "[[site]]\nnames = [\"*.example.org\"]",
                "[[site]]\ndefault = true\nnames = [\"*.example.org\"]",
            ),
            "2 blocks say default = true",
        ),
        (
            text.replace("*.example.org", "foo*.example.org"),
            "'foo*.example.org' is not a host name",
        ),
        (
            text.replace("names = [\"inner.example.com\"]\n", ""),
            "give it names, or default = true",
        ),
        (
            text.replace("autoindex = true", "autoindx = true"),
            "unknown key `autoindx`; did you mean `autoindex`?",
        ),
    ] {
        fs::write(&bad, broken).unwrap();
        let (code, _, err) = LINERATE.run(&["serve", "--config", bad.to_str().unwrap()]);
        assert_eq!(code, 2, "{why}: {err}");
        assert!(err.contains(why), "{why}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let (code, _, err) = LINERATE.run(&["serve", ".", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("DIR with a default [[site]]"), "{err}");

    // A reload: a broken file keeps the sites before; a good one adds a site.
    let s = LINERATE.serve_config(None, &conf, &["--error-log-level", "info"]);
    assert_eq!(body_for(s.addr, Some("new.example.net"), "/").1, "main\n");
    fs::write(
        &conf,
        text.replace(
            "names = [\"docs.example.com\"]",
            "names = [\"www.example.com\"]",
        ),
    )
    .unwrap();
    s.signal("HUP");
    let log = s.wait_stderr("serving on with the settings before");
    assert!(log.contains("named by two sites"), "{log}");
    put(&base.path().join("new"), "index.html", b"new\n");
    fs::write(
        &conf,
        format!(
            "{text}\n[[site]]\nnames = [\"new.example.net\"]\nroot = \"{}/new\"\n",
            base.path().display()
        ),
    )
    .unwrap();
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    assert_eq!(body_for(s.addr, Some("new.example.net"), "/").1, "new\n");
    assert_eq!(body_for(s.addr, Some("docs.example.com"), "/").1, "docs\n");
}

/// DIR beside blocks none of which is the default serves the hosts no block names.
/// Rules: docs/http.md H3.
#[test]
fn dir_beside_blocks_is_the_default_site() {
    let base = docroot();
    let conf = three_sites(base.path(), "");
    let text = fs::read_to_string(&conf).unwrap();
    fs::write(&conf, text.replace("default = true\n", "")).unwrap();
    put(&base.path().join("dir"), "index.html", b"dir\n");
    let s = LINERATE.serve_config(Some(&base.path().join("dir")), &conf, &[]);
    assert_eq!(
        body_for(s.addr, Some("unknown.example.net"), "/").1,
        "dir\n"
    );
    assert_eq!(body_for(s.addr, None, "/").1, "dir\n");
    assert_eq!(body_for(s.addr, Some("www.example.com"), "/").1, "main\n");
}
