//! What a site needs beyond files (issue 33), through the binary under every transmit
//! strategy and driver: who may have a path (`allow`, `deny`, by the client's real
//! address behind trusted proxies), clean URLs (`try`), the security-header preset
//! and HSTS.

use std::fs;
use std::path::Path;

use linerate_testkit::{
    curl_tls, docroot, exchange, installed, per_strategy, put, tls_files, variant, Linerate,
    Response, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md W6.
    allow_and_deny_by_the_clients_address_per_site_and_path,
    // Rules: docs/http.md W7.
    try_serves_clean_urls_and_a_page_last,
    // Rules: docs/http.md W8.
    security_headers_with_hsts_over_https_and_rules_over_them,
);

/// `linerate serve --config` of `body` (after the case's transmit and driver) with
/// loopback trusted to name the client by X-Forwarded-For, so one test can be any
/// client.
fn serve_conf(dir: &Path, case: &str, body: &str) -> Server {
    let (transmit, driver) = variant(case);
    let conf = dir.join("site.toml");
    fs::write(
        &conf,
        format!(
            "access-log = \"off\"\ntransmit = \"{transmit}\"\ndriver = \"{driver}\"\n\
             trusted-proxies = [\"127.0.0.1/32\"]\n{body}"
        ),
    )
    .unwrap();
    LINERATE.serve_config(None, &conf, &["--workers", "1"])
}

/// GET `target` on `host`, as the client `client` (named by X-Forwarded-For).
fn get_as(s: &Server, host: &str, target: &str, client: &str) -> Response {
    let req = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nX-Forwarded-For: {client}\r\nConnection: close\r\n\r\n"
    );
    exchange(s.addr, req.as_bytes(), false)
}

fn allow_and_deny_by_the_clients_address_per_site_and_path(case: &str) {
    let base = docroot();
    let (intra, www) = (base.path().join("intra"), base.path().join("www"));
    for root in [&intra, &www] {
        put(root, "index.html", b"home\n");
        put(root, "public/a.txt", b"public\n");
        put(root, "errors/403.html", b"<h1>not for you</h1>\n");
        put(root, "old/x.txt", b"x\n");
    }
    let s = serve_conf(
        base.path(),
        case,
        &format!(
            r#"
[[site]]
names = ["intra.test"]
root = "{}"
allow = ["10.0.0.0/8", "unix:"]
deny = ["10.6.6.6", "all"]

[[site.rule]]
path = "/public/"
allow = ["all"]

[[site.rule]]
path = "/"
errors = {{ 403 = "/errors/403.html" }}

[[site.rule]]
path = "/old/"
redirect = "/public/"

[[site]]
names = ["www.test"]
default = true
root = "{}"

[[rule]]
path = "/public/"
deny = ["192.0.2.0/24"]
"#,
            intra.display(),
            www.display()
        ),
    );
    let status = |host: &str, target: &str, client: &str| get_as(&s, host, target, client).status;
    // The site: its network in, one address of it out, everyone else out.
    assert_eq!(status("intra.test", "/index.html", "10.1.2.3"), 200);
    assert_eq!(status("intra.test", "/index.html", "10.6.6.6"), 403);
    assert_eq!(status("intra.test", "/index.html", "198.51.100.7"), 403);
    // A more specific rule opens a subtree.
    assert_eq!(status("intra.test", "/public/a.txt", "198.51.100.7"), 200);
    // The refusal comes before a redirect, and with the site's error page.
    assert_eq!(status("intra.test", "/old/x.txt", "198.51.100.7"), 403);
    assert_eq!(status("intra.test", "/old/x.txt", "10.1.2.3"), 301);
    let r = get_as(&s, "intra.test", "/index.html", "198.51.100.7");
    assert_eq!(r.body, b"<h1>not for you</h1>\n");
    // A server-wide rule: a deny list alone refuses its network and no one else; a
    // site's own rule for the same path wins over it.
    assert_eq!(status("www.test", "/public/a.txt", "192.0.2.9"), 403);
    assert_eq!(status("www.test", "/public/a.txt", "198.51.100.7"), 200);
    assert_eq!(status("www.test", "/index.html", "192.0.2.9"), 200);
    assert_eq!(status("intra.test", "/public/a.txt", "192.0.2.9"), 200);
    // Without a trusted header the client is loopback itself: refused by the site.
    let r = exchange(
        s.addr,
        b"GET /index.html HTTP/1.1\r\nHost: intra.test\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 403);
}

#[test]
fn bad_access_lists_and_try_paths_are_refused_with_their_reason() {
    let dir = docroot();
    let conf = dir.path().join("c.toml");
    for (body, why) in [
        (
            "[[rule]]\npath = \"/\"\nallow = [\"10.0.0.0/33\"]\n",
            "10.0.0.0/33",
        ),
        (
            "[[rule]]\npath = \"/\"\ndeny = [\"everyone\"]\n",
            "'everyone' is not an address",
        ),
        (
            "[[rule]]\npath = \"/\"\ntry = [\"index.html\"]\n",
            "try: 'index.html' is not a path",
        ),
        (
            "[[rule]]\npath = \"/\"\ntry = [\"{uri}.html\"]\n",
            "try: '{uri}.html' is not a path",
        ),
    ] {
        fs::write(&conf, body).unwrap();
        let (code, _, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap()]);
        assert_eq!(code, 2, "{body}: {err}");
        assert!(err.contains(why), "{body}: {err}");
    }
}

fn try_serves_clean_urls_and_a_page_last(case: &str) {
    let base = docroot();
    let root = base.path().join("www");
    put(&root, "posts/hello.html", b"<p>hello</p>\n");
    put(&root, "posts/a b.html", b"<p>a b</p>\n");
    put(&root, "blog/index.html", b"<p>blog</p>\n");
    put(&root, "notes.txt", b"notes\n");
    put(&root, "app/index.html", b"<div id=app></div>\n");
    put(&root, "app/main.js", b"js\n");
    let s = serve_conf(
        base.path(),
        case,
        &format!(
            r#"root = "{}"

[[rule]]
path = "/"
try = ["{{path}}", "{{path}}.html", "{{path}}/index.html"]

[[rule]]
path = "/app/"
try = ["{{path}}", "/app/index.html"]
"#,
            root.display()
        ),
    );
    let get = |target: &str| get_as(&s, "x", target, "127.0.0.1");
    // What static-site generators write, by its clean URL, as text/html.
    let r = get("/posts/hello");
    assert_eq!((r.status, &r.body[..]), (200, &b"<p>hello</p>\n"[..]));
    assert!(r.must("Content-Type").starts_with("text/html"), "{r:?}");
    assert_eq!(get("/posts/hello/").body, b"<p>hello</p>\n");
    // The path is decoded once, as any path is.
    assert_eq!(get("/posts/a%20b").body, b"<p>a b</p>\n");
    // A directory's index without the redirect to its slash.
    let r = get("/blog");
    assert_eq!((r.status, &r.body[..]), (200, &b"<p>blog</p>\n"[..]));
    // The path itself first.
    assert_eq!(get("/notes.txt").body, b"notes\n");
    assert_eq!(get("/posts/missing").status, 404);
    // No candidate leaves the root: a path that would is refused before any (F6),
    // and one that stays is tried under the root alone.
    assert_eq!(get("/../../etc/passwd").status, 400);
    assert_eq!(get("/posts/../../posts/hello").status, 400);
    assert_eq!(get("/posts/x/../hello").body, b"<p>hello</p>\n");
    // A page last: what names nothing is the app's page; its files are themselves.
    let r = get("/app/settings/profile");
    assert_eq!((r.status, &r.body[..]), (200, &b"<div id=app></div>\n"[..]));
    assert_eq!(get("/app/main.js").body, b"js\n");
}

fn security_headers_with_hsts_over_https_and_rules_over_them(case: &str) {
    let base = docroot();
    let root = base.path().join("www");
    put(&root, "index.html", b"home\n");
    put(&root, "embed/w.html", b"widget\n");
    put(&root, "raw/r.txt", b"raw\n");
    let (cert, key) = tls_files(base.path(), "server");
    let s = serve_conf(
        base.path(),
        case,
        &format!(
            r#"tls-listen = "127.0.0.1:0"
tls-cert = "{}"
tls-key = "{}"

[[site]]
names = ["localhost"]
default = true
root = "{}"
security-headers = true
hsts = "365d"

[[site.rule]]
path = "/embed/"
headers = {{ "X-Frame-Options" = "DENY" }}

[[site.rule]]
path = "/raw/"
security-headers = false
"#,
            cert.display(),
            key.display(),
            root.display()
        ),
    );
    // In clear: the preset, no HSTS (a browser ignores it there, and it would be a lie).
    let r = get_as(&s, "localhost", "/index.html", "127.0.0.1");
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(
        r.header("Referrer-Policy"),
        Some("strict-origin-when-cross-origin")
    );
    assert_eq!(r.header("X-Frame-Options"), Some("SAMEORIGIN"));
    assert_eq!(r.header("Strict-Transport-Security"), None);
    // A rule's own field wins over the preset's of the same name; a rule turns it off.
    let r = get_as(&s, "localhost", "/embed/w.html", "127.0.0.1");
    assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    let r = get_as(&s, "localhost", "/raw/r.txt", "127.0.0.1");
    assert_eq!(r.header("X-Content-Type-Options"), None);
    // Not on errors, as the rules' headers (W2).
    let r = get_as(&s, "localhost", "/missing", "127.0.0.1");
    assert_eq!((r.status, r.header("X-Frame-Options")), (404, None));
    if !installed("curl") {
        return;
    }
    // Over HTTPS, both protocols: HSTS too.
    for version in [&["--http1.1"][..], &["--http2"]] {
        let args = [version, &["-D", "-", "-o", "/dev/null"]].concat();
        let out = curl_tls(s.tls_addr(), &cert, &args, &["/index.html"]);
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(
            head.contains("strict-transport-security: max-age=31536000")
                && head.contains("x-content-type-options: nosniff"),
            "{head}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
