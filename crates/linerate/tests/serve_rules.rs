//! Per-path rules (docs/http.md W1-W4) through the binary: header fields and
//! `expires`, content-type overrides, autoindex and dot-files per path, error pages
//! with their status, every redirect code with the query kept, the single-page
//! fallback, and the precedence between rules.

use std::fs;
use std::path::Path;

use linerate_testkit::{
    docroot, exchange, parse_imf_date, per_strategy, put, unix_now, variant, Linerate, Response,
    Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md W1, W2.
    header_rules_types_and_precedence,
    // Rules: docs/http.md W3, W4.
    error_pages_redirects_and_the_fallback,
    // Rules: docs/http.md W5.
    no_request_writes_a_field_or_leaves_the_site,
    // Rules: docs/http.md F5, W1.
    a_rule_gives_the_index_names_of_its_directories,
);

/// `index` in a rule: its directories try its names, in order; the others the
/// server's (`index.html`); a more specific rule's list replaces a less specific one's.
fn a_rule_gives_the_index_names_of_its_directories(transmit: &str) {
    let root = docroot();
    let r = root.path();
    put(r, "docs/README.html", b"readme\n");
    put(r, "docs/index.html", b"docs index\n");
    put(r, "docs/api/index.html", b"api index\n");
    put(r, "docs/api/start.html", b"start\n");
    put(r, "other/README.html", b"other readme\n");
    put(r, "other/index.html", b"other index\n");
    let s = serve_rules(
        r,
        transmit,
        r#"
[[rule]]
path = "/docs/"
index = ["README.html", "index.html"]

[[rule]]
path = "/docs/api/"
index = ["start.html"]
"#,
    );
    for (path, want) in [
        ("/docs/", &b"readme\n"[..]),
        ("/docs/api/", b"start\n"),
        ("/other/", b"other index\n"),
    ] {
        let got = get(&s, path);
        assert_eq!((got.status, &got.body[..]), (200, want), "{path}");
    }
}

/// A documentation site: assets cached for a year, HTML for ten minutes with security
/// headers, `.rpm` overridden, a listing under /pub/, dot-files allowed under
/// /.well-known/ only, an error page, redirects, and an app with a fallback.
fn site(root: &Path, transmit: &str) -> Server {
    put(root, "index.html", b"<p>home</p>\n");
    put(root, "assets/app.js", b"js\n");
    put(root, "assets/logo.png", b"png\n");
    put(root, "pub/pkg-1.0.x86_64.rpm", b"rpm\n");
    put(root, ".well-known/security.txt", b"contact\n");
    put(root, ".git/config", b"secret\n");
    put(root, "errors/404.html", b"<h1>not here</h1>\n");
    put(root, "errors/403.html", b"<h1>forbidden</h1>\n");
    put(root, "app/index.html", b"<div id=app></div>\n");
    put(root, "app/main.js", b"app js\n");
    put(root, "app/assets/app.css", b"css\n");
    put(
        root,
        "evil.example/index.html",
        b"a directory named like a host\n",
    );
    put(root, "private/x.txt", b"x\n");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o000);
    fs::set_permissions(root.join("private/x.txt"), mode).unwrap();
    serve_rules(
        root,
        transmit,
        r#"
[[rule]]
path = "/"
headers = { "X-Content-Type-Options" = "nosniff", "X-Scope" = "all" }
errors = { 404 = "/errors/404.html", 403 = "/errors/403.html" }

[[rule]]
path = "/assets/"
expires = "365d"
headers = { "Cache-Control" = "public, max-age=31536000, immutable", "X-Scope" = "assets" }

[[rule]]
path = "*.js"
headers = { "X-Scope" = "js", "Access-Control-Allow-Origin" = "*" }

[[rule]]
path = "=/assets/app.js"
headers = { "X-Scope" = "exact" }

[[rule]]
path = "/pub/"
autoindex = true
types = { rpm = "application/x-redhat-package-manager" }
expires = "10m"

[[rule]]
path = "/.well-known/"
dotfiles = true

[[rule]]
path = "/old/"
redirect = "https://new.example.com/docs/"
redirect-code = 308

[[rule]]
path = "=/moved"
redirect = "/index.html"

[[rule]]
path = "=/found"
redirect = "/index.html"
redirect-code = 302

[[rule]]
path = "=/see-other"
redirect = "/index.html"
redirect-code = 303

[[rule]]
path = "=/temporary"
redirect = "/index.html"
redirect-code = 307

[[rule]]
path = "/app/"
fallback = "/app/index.html"

[[rule]]
path = "/app/assets/"
fallback = false
headers = { "Cache-Control" = "public, max-age=31536000, immutable" }

[[rule]]
path = "/go/"
redirect = "/dest/"

[[rule]]
path = "/leave"
redirect = "/"
"#,
    )
}

/// `linerate serve` of `root` with `transmit` (and its driver), one worker, no access
/// log, and `rules` in its configuration file.
fn serve_rules(root: &Path, transmit: &str, rules: &str) -> Server {
    let conf = root.parent().unwrap().join(format!(
        "rules-{}.toml",
        root.file_name().unwrap().to_string_lossy()
    ));
    let (strategy, driver) = variant(transmit);
    let head = format!(
        "access-log = \"off\"\ntransmit = \"{strategy}\"\ndriver = \"{driver}\"\nroot = \"{}\"\n",
        root.display()
    );
    fs::write(&conf, head + rules).unwrap();
    LINERATE.serve_config(None, &conf, &["--workers", "1"])
}

fn get(s: &Server, target: &str) -> Response {
    let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    exchange(s.addr, req.as_bytes(), false)
}

fn header_rules_types_and_precedence(transmit: &str) {
    let base = docroot();
    let root = base.path().join("www");
    let s = site(&root, transmit);
    let scope = |target: &str| get(&s, target).header("x-scope").map(str::to_string);
    assert_eq!(scope("/").as_deref(), Some("all"));
    assert_eq!(scope("/assets/logo.png").as_deref(), Some("assets"));
    assert_eq!(
        scope("/app/main.js").as_deref(),
        Some("js"),
        "a glob over a prefix"
    );
    assert_eq!(scope("/assets/app.js").as_deref(), Some("exact"));
    // Fields from several rules merge, the most specific winning per name.
    let js = get(&s, "/assets/app.js");
    assert_eq!(js.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(js.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        js.header("cache-control"),
        Some("public, max-age=31536000, immutable"),
        "a header rule's Cache-Control over expires"
    );
    assert!(js.header("expires").is_some(), "{js:?}");
    // expires alone: max-age and an Expires date ten minutes on.
    let listing = get(&s, "/pub/");
    assert_eq!(listing.status, 200);
    assert!(String::from_utf8_lossy(&listing.body).contains("pkg-1.0.x86_64.rpm"));
    let rpm = get(&s, "/pub/pkg-1.0.x86_64.rpm");
    assert_eq!(
        rpm.header("content-type"),
        Some("application/x-redhat-package-manager")
    );
    assert_eq!(rpm.header("cache-control"), Some("max-age=600"));
    let expires = parse_imf_date(rpm.header("expires").unwrap()).expect("an IMF date");
    let ahead = expires - unix_now();
    assert!((590..=601).contains(&ahead), "{ahead}");
    // A 304 carries the rule's fields too.
    let etag = rpm.header("etag").unwrap();
    let req = format!(
        "GET /pub/pkg-1.0.x86_64.rpm HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\nConnection: close\r\n\r\n"
    );
    let nm = exchange(s.addr, req.as_bytes(), false);
    assert_eq!(
        (nm.status, nm.header("cache-control")),
        (304, Some("max-age=600"))
    );
    // No listing elsewhere; dot-files only where a rule allows them, even encoded.
    assert_eq!(get(&s, "/assets/").status, 404);
    assert_eq!(get(&s, "/.well-known/security.txt").body, b"contact\n");
    for target in ["/.git/config", "/%2egit/config", "/assets/../.git/config"] {
        assert_eq!(get(&s, target).status, 404, "{target}");
    }
}

fn error_pages_redirects_and_the_fallback(transmit: &str) {
    let base = docroot();
    let root = base.path().join("www");
    let s = site(&root, transmit);
    // Error pages, with the status of the error.
    let r = get(&s, "/no/such/page");
    assert_eq!(r.status, 404);
    assert_eq!(r.body, b"<h1>not here</h1>\n");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    if !linerate_testkit::is_root() {
        let r = get(&s, "/private/x.txt");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (403, &b"<h1>forbidden</h1>\n"[..])
        );
    }
    let req = "HEAD /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let h = exchange(s.addr, req.as_bytes(), true);
    assert_eq!((h.status, h.header("content-length")), (404, Some("18")));
    // Every redirect code, the query kept, a prefix's rest of the path appended.
    let r = get(&s, "/old/guide/intro.html?lang=en");
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some("https://new.example.com/docs/guide/intro.html?lang=en")
    );
    for (target, code) in [
        ("/moved", 301),
        ("/found", 302),
        ("/see-other", 303),
        ("/temporary", 307),
    ] {
        let r = get(&s, &format!("{target}?a=1&b=2"));
        assert_eq!(r.status, code, "{target}");
        assert_eq!(
            r.header("location"),
            Some("/index.html?a=1&b=2"),
            "{target}"
        );
    }
    // The fallback: a missing path under /app/ is the app's page, with 200; files
    // that exist are themselves.
    for target in ["/app/", "/app/users/42", "/app/settings/"] {
        let r = get(&s, target);
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"<div id=app></div>\n"[..]),
            "{target}"
        );
    }
    assert_eq!(get(&s, "/app/main.js").body, b"app js\n");
    assert_eq!(
        get(&s, "/elsewhere").status,
        404,
        "no fallback outside /app/"
    );
}

/// Regression (issue 28): `GET /go/%0d%0aSet-Cookie:x=1` wrote a header line through
/// a redirect rule, `GET /old/%5cevil.example` redirected browsers to another origin,
/// and a single-page fallback answered missing assets with the app's page cached for
/// a year. Every field the server writes holds visible ASCII and spaces only, every
/// Location built from a request stays on the site under the WHATWG URL rules, and
/// `fallback = false` switches an inherited fallback off.
fn no_request_writes_a_field_or_leaves_the_site(transmit: &str) {
    let base = docroot();
    let root = base.path().join("www");
    let s = site(&root, transmit);
    let site_url = url::Url::parse("http://x/").unwrap();
    let targets = [
        "/go/%0d%0aSet-Cookie:x=1",
        "/go/%0D%0A%0D%0AHTTP/1.1%20200%20OK%0D%0A",
        "/go/a%09b%7fc%c3%a9%ff",
        "/leave/%5cevil.example",
        "/leave//evil.example",
        "/leave/%2f%2fevil.example",
        "/leave/%09/evil.example",
        "/leave%5c%5cevil.example",
        "/leave/../evil.example",
        "//evil.example",
        "/evil.example",
        "/./evil.example",
        "/go/x?a=%0d%0a&b=\\evil",
        "/app/assets/missing.js",
    ];
    for target in targets {
        let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let bytes = linerate_testkit::raw(s.addr, req.as_bytes(), false);
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head");
        for line in bytes[..end + 2].split_inclusive(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\n").unwrap();
            let line = line.strip_suffix(b"\r").expect("every line ends in CRLF");
            assert!(
                line.iter().all(|&b| b == b' ' || b.is_ascii_graphic()),
                "{target}: {:?}",
                String::from_utf8_lossy(line)
            );
        }
        let r = exchange(s.addr, req.as_bytes(), false);
        assert!(r.header("set-cookie").is_none(), "{target}: {r:?}");
        if let Some(loc) = r.header("location") {
            let to = site_url.join(loc).expect("a Location a browser reads");
            assert_eq!(to.origin(), site_url.origin(), "{target} -> {loc}");
        }
    }
    let loc = |target: &str| get(&s, target).header("location").map(str::to_string);
    assert_eq!(
        loc("/go/%0d%0aSet-Cookie:x=1").as_deref(),
        Some("/dest/%0D%0ASet-Cookie:x=1")
    );
    assert_eq!(
        loc("/leave/%5cevil.example").as_deref(),
        Some("/%5Cevil.example")
    );
    assert_eq!(loc("//evil.example").as_deref(), Some("/evil.example/"));
    // The asset rule's `fallback = false`: a missing asset is 404, not the app.
    let r = get(&s, "/app/assets/missing.js");
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(get(&s, "/app/assets/app.css").body, b"css\n");
    assert_eq!(
        get(&s, "/app/users/42").status,
        200,
        "the app's fallback stays"
    );
}

/// A broken rule is refused with a line that names it and says why.
/// Rules: docs/http.md W1.
#[test]
fn bad_rules_are_refused_with_their_reason() {
    let dir = docroot();
    let conf = dir.path().join("c.toml");
    for (rule, why) in [
        ("path = \"assets\"", "is not a path"),
        (
            "path = \"/\"\nheaders = { \"Bad Name\" = \"x\" }",
            "'Bad Name' is not a field name",
        ),
        (
            "path = \"/\"\nerrors = { 200 = \"/ok.html\" }",
            "'200' is not a 4xx or 5xx status",
        ),
        (
            "path = \"/\"\nredirect = \"/x\"\nredirect-code = 300",
            "300 is not 301, 302, 303, 307 or 308",
        ),
        (
            "path = \"/\"\nredirect-code = 301",
            "redirect-code without redirect",
        ),
        ("path = \"/\"\nexpires = \"soon\"", "'soon' is not an age"),
        (
            "path = \"/\"\nfallback = \"index.html\"",
            "must start with /",
        ),
        (
            "path = \"/\"\nfallback = true",
            "or false to switch an inherited fallback off",
        ),
        (
            "path = \"/\"\nredirect = \"//evil.example/\"",
            "is neither a path on the site",
        ),
        (
            "path = \"/\"\nredirect = \"dest/\"",
            "is neither a path on the site",
        ),
        (
            "path = \"/\"\nheaders = { \"X-A\" = \"a\\tb\" }",
            "holds a byte other than visible ASCII and spaces",
        ),
    ] {
        fs::write(&conf, format!("[[rule]]\n{rule}\n")).unwrap();
        let (code, _, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap()]);
        assert_eq!(code, 2, "{rule}: {err}");
        assert!(err.contains(why), "{rule}: {err}");
    }
}
