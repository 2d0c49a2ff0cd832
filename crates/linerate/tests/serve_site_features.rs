//! What a site needs beyond files (issue 33), through the binary under every transmit
//! strategy and driver: who may have a path (`allow`, `deny`, by the client's real
//! address behind trusted proxies), clean URLs (`try`), the security-header preset
//! and HSTS, CORS, a custom access-log format, logs per site, HTTP Basic from an
//! htpasswd file, the compression cache.

use std::fs;
use std::path::Path;

use linerate_testkit::{
    curl_tls, docroot, exchange, installed, per_strategy, put, tls_files, variant, wait_log_lines,
    Linerate, Response, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md W6.
    allow_and_deny_by_the_clients_address_per_site_and_path,
    // Rules: docs/http.md W7.
    try_serves_clean_urls_and_a_page_last,
    // Rules: docs/http.md W8.
    security_headers_with_hsts_over_https_and_rules_over_them,
    // Rules: docs/http.md W9.
    cors_preflights_and_reads_for_listed_origins_alone,
    a_custom_log_format_writes_exactly_the_fields_asked,
    each_site_logs_to_its_own_file_in_its_own_format,
    // Rules: docs/http.md W10.
    htpasswd_admits_its_users_and_throttles_a_guessing_client_alone,
    // Rules: docs/http.md W11.
    a_link_to_a_protected_file_is_under_the_rules_of_both_paths,
    // Rules: docs/http.md V4.
    the_compression_cache_sends_each_variant_made_once_and_never_a_stale_one,
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

/// [`serve_conf`] with `root = ROOT` before `rules`.
fn serve_root(base: &tempfile::TempDir, root: &Path, case: &str, rules: &str) -> Server {
    serve_conf(
        base.path(),
        case,
        &format!("root = \"{}\"\n{rules}", root.display()),
    )
}

/// A directory holding `www/` with `files` (path, bytes) in it: the directory (kept
/// while it serves) and the root.
fn www(files: &[(&str, &[u8])]) -> (tempfile::TempDir, std::path::PathBuf) {
    let base = docroot();
    let root = base.path().join("www");
    for (p, b) in files {
        put(&root, p, b);
    }
    (base, root)
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
fn bad_access_lists_try_paths_and_cors_tables_are_refused_with_their_reason() {
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
        (
            "[[rule]]\npath = \"/\"\ncors = { origins = [\"app.test\"] }\n",
            "cors: origins: 'app.test' is not an origin",
        ),
        (
            "[[rule]]\npath = \"/\"\ncors = { origins = [\"*\"], credentials = true }\n",
            "credentials need the origins listed",
        ),
        (
            "[[rule]]\npath = \"/\"\ncors = { origins = [\"*\"], methods = [\"POST\"] }\n",
            "'POST': the server answers GET and HEAD alone",
        ),
        (
            "[[rule]]\npath = \"/\"\ncors = { origin = [\"*\"] }\n",
            "unknown key `origin`; did you mean `origins`?",
        ),
        (
            "[[rule]]\npath = \"/\"\nzzz = 1\n",
            "unknown key `zzz`, expected one of",
        ),
    ] {
        fs::write(&conf, body).unwrap();
        let (code, _, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap()]);
        assert_eq!(code, 2, "{body}: {err}");
        assert!(err.contains(why), "{body}: {err}");
    }
}

fn try_serves_clean_urls_and_a_page_last(case: &str) {
    let (base, root) = www(&[
        ("posts/hello.html", b"<p>hello</p>\n"),
        ("posts/a b.html", b"<p>a b</p>\n"),
        ("blog/index.html", b"<p>blog</p>\n"),
        ("notes.txt", b"notes\n"),
        ("app/index.html", b"<div id=app></div>\n"),
        ("app/main.js", b"js\n"),
        ("admin/index.html", b"admin\n"),
        ("admin.html", b"admin page\n"),
    ]);
    let s = serve_root(
        &base,
        &root,
        case,
        r#"
[[rule]]
path = "/"
try = ["{path}", "{path}.html", "{path}/index.html"]

[[rule]]
path = "/app/"
try = ["{path}", "/app/index.html"]

[[rule]]
path = "/admin/"
deny = ["all"]

[[rule]]
path = "=/admin.html"
deny = ["all"]
"#,
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
    // A candidate is answered under its own rules: /admin tries /admin.html and
    // /admin/index.html, each refused where they are.
    assert_eq!(get("/admin").status, 403);
    assert_eq!(get("/admin/").status, 403);
    // A page last: what names nothing is the app's page; its files are themselves.
    let r = get("/app/settings/profile");
    assert_eq!((r.status, &r.body[..]), (200, &b"<div id=app></div>\n"[..]));
    assert_eq!(get("/app/main.js").body, b"js\n");
}

fn security_headers_with_hsts_over_https_and_rules_over_them(case: &str) {
    let (base, root) = www(&[
        ("index.html", b"home\n"),
        ("embed/w.html", b"widget\n"),
        ("raw/r.txt", b"raw\n"),
    ]);
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

/// `METHOD target` with `fields` (CRLF-ended lines), Connection: close.
fn ask(s: &Server, method: &str, target: &str, fields: &str) -> Response {
    let req = format!("{method} {target} HTTP/1.1\r\nHost: x\r\n{fields}Connection: close\r\n\r\n");
    exchange(s.addr, req.as_bytes(), method == "HEAD")
}

/// curl's answer to `target` over h2c (prior knowledge) with `args`: the head on
/// stdout.
fn h2c_head(s: &Server, target: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("curl")
        .args([
            "-sS",
            "-D",
            "-",
            "-o",
            "/dev/null",
            "--http2-prior-knowledge",
        ])
        .args(args)
        .arg(format!("http://{}{target}", s.addr))
        .output()
        .unwrap()
}

fn cors_preflights_and_reads_for_listed_origins_alone(case: &str) {
    let (base, root) = www(&[
        ("api/data.json", b"{}\n"),
        ("pub/font.woff2", b"font\n"),
        ("index.html", b"home\n"),
    ]);
    let s = serve_root(
        &base,
        &root,
        case,
        r#"
[[rule]]
path = "/api/"
cors = { origins = ["https://app.test"], headers = ["X-Requested-With"], max-age = "10m", credentials = true, expose = ["ETag"] }

[[rule]]
path = "/pub/"
cors = { origins = ["*"] }
"#,
    );
    let preflight = "Origin: https://app.test\r\nAccess-Control-Request-Method: GET\r\n\
                     Access-Control-Request-Headers: x-requested-with\r\n";
    // A preflight from a listed origin: 204 and every allow field.
    let r = ask(&s, "OPTIONS", "/api/data.json", preflight);
    assert_eq!(r.status, 204, "{r:?}");
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://app.test")
    );
    assert_eq!(r.header("Access-Control-Allow-Methods"), Some("GET, HEAD"));
    assert_eq!(
        r.header("Access-Control-Allow-Headers"),
        Some("X-Requested-With")
    );
    assert_eq!(r.header("Access-Control-Max-Age"), Some("600"));
    assert_eq!(r.header("Access-Control-Allow-Credentials"), Some("true"));
    assert_eq!(r.header("Content-Length"), None);
    assert!(r.body.is_empty());
    // From another origin, or asking for what is not listed: no allow field at all.
    for fields in [
        "Origin: https://evil.test\r\nAccess-Control-Request-Method: GET\r\n",
        "Origin: https://app.test\r\nAccess-Control-Request-Method: PUT\r\n",
        "Origin: https://app.test\r\nAccess-Control-Request-Method: GET\r\n\
         Access-Control-Request-Headers: authorization\r\n",
    ] {
        let r = ask(&s, "OPTIONS", "/api/data.json", fields);
        assert_eq!(r.status, 204);
        assert_eq!(r.header("Access-Control-Allow-Origin"), None, "{fields}");
        assert!(r.header("Vary").is_some_and(|v| v.contains("Origin")));
    }
    // A plain OPTIONS there says what is allowed; OPTIONS where no rule gives cors is
    // 405 as before.
    let r = ask(&s, "OPTIONS", "/api/data.json", "");
    assert_eq!(
        (r.status, r.header("Allow")),
        (204, Some("GET, HEAD, OPTIONS"))
    );
    let r = ask(&s, "OPTIONS", "/index.html", preflight);
    assert_eq!((r.status, r.header("Allow")), (405, Some("GET, HEAD")));
    // The reads: the allow field for a listed origin, Vary always.
    let r = ask(&s, "GET", "/api/data.json", "Origin: https://app.test\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://app.test")
    );
    assert_eq!(r.header("Access-Control-Expose-Headers"), Some("ETag"));
    assert!(r
        .headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("vary") && v.contains("Origin")));
    let r = ask(&s, "GET", "/api/data.json", "Origin: https://evil.test\r\n");
    assert_eq!(
        (r.status, r.header("Access-Control-Allow-Origin")),
        (200, None)
    );
    let r = ask(&s, "HEAD", "/api/data.json", "Origin: https://app.test\r\n");
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://app.test")
    );
    // "*": any origin, as "*".
    let r = ask(
        &s,
        "GET",
        "/pub/font.woff2",
        "Origin: https://anyone.test\r\n",
    );
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    // Over HTTP/2 (h2c) the same answers.
    if installed("curl") {
        let out = h2c_head(
            &s,
            "/api/data.json",
            &[
                "-X",
                "OPTIONS",
                "-H",
                "Origin: https://app.test",
                "-H",
                "Access-Control-Request-Method: GET",
            ],
        );
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(
            head.starts_with("http/2 204")
                && head.contains("access-control-allow-origin: https://app.test"),
            "{head}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn a_custom_log_format_writes_exactly_the_fields_asked(case: &str) {
    let (base, root) = www(&[("f.txt", b"F\n")]);
    let log = base.path().join("access.log");
    let (cert, key) = tls_files(base.path(), "server");
    let (transmit, driver) = variant(case);
    let conf = base.path().join("log.toml");
    fs::write(
        &conf,
        format!(
            r#"root = "{}"
transmit = "{transmit}"
driver = "{driver}"
access-log = "{}"
log-format = "$remote_addr|$host|$request|$status|$body_bytes_sent|$http_user_agent|$protocol|$ssl_protocol"
tls-listen = "127.0.0.1:0"
tls-cert = "{}"
tls-key = "{}"
"#,
            root.display(),
            log.display(),
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let s = LINERATE.serve_config(None, &conf, &["--workers", "1"]);
    let r = exchange(
        s.addr,
        b"GET /f.txt HTTP/1.1\r\nHost: a.test\r\nUser-Agent: t \"1\"\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 200);
    let mut want =
        vec!["127.0.0.1|a.test|GET /f.txt HTTP/1.1|200|2|t \\x221\\x22|HTTP/1.1|-".to_string()];
    if installed("curl") {
        let out = curl_tls(s.tls_addr(), &cert, &["--http2", "-A", "c"], &["/f.txt"]);
        assert_eq!(
            out.stdout,
            b"F\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        want.push(format!(
            "127.0.0.1|localhost:{}|GET /f.txt HTTP/2.0|200|2|c|HTTP/2.0|TLSv1.3",
            s.tls_addr().port()
        ));
    }
    assert_eq!(wait_log_lines(&log, want.len()), want);
}

fn each_site_logs_to_its_own_file_in_its_own_format(case: &str) {
    let (base, root) = www(&[("f.txt", b"F\n")]);
    let (main, own) = (base.path().join("main.log"), base.path().join("a.log"));
    let (transmit, driver) = variant(case);
    let conf = base.path().join("logs.toml");
    fs::write(
        &conf,
        format!(
            r#"transmit = "{transmit}"
driver = "{driver}"
access-log = "{}"

[[site]]
names = ["a.test"]
root = "{}"
access-log = "{}"
log-format = "json"

[[site]]
names = ["b.test"]
root = "{root}"
default = true

[[site]]
names = ["c.test"]
root = "{root}"
access-log = "off"
"#,
            main.display(),
            root.display(),
            own.display(),
            root = root.display()
        ),
    )
    .unwrap();
    let s = LINERATE.serve_config(None, &conf, &["--workers", "1"]);
    let get = |host: &str| {
        let req = format!("GET /f.txt HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        exchange(s.addr, req.as_bytes(), false).status
    };
    assert_eq!(get("a.test"), 200);
    assert_eq!(get("c.test"), 200);
    assert_eq!(get("b.test"), 200);
    assert_eq!(get("a.test"), 200);
    // An answer to no request (no site): the server's log.
    assert_eq!(
        exchange(s.addr, b"GET / HTTP/1.1\r\n\r\n", false).status,
        400
    );
    let lines = wait_log_lines(&own, 2);
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(
            (v["host"].as_str(), v["status"].as_u64()),
            (Some("a.test"), Some(200))
        );
    }
    let lines = wait_log_lines(&main, 2);
    assert!(
        lines[0].contains("\"GET /f.txt HTTP/1.1\" 200 2"),
        "{lines:?}"
    );
    assert!(lines[1].contains("\" 400 "), "{lines:?}");
    drop(s);
    assert_eq!(fs::read_to_string(&own).unwrap().lines().count(), 2);
    assert_eq!(
        fs::read_to_string(&main).unwrap().lines().count(),
        2,
        "c.test's line is in no file"
    );
}

/// `htpasswd -nbB -C 5 alice secret`.
const ALICE: &str = "alice:$2y$05$K96.w96XA89FxJ..xXDe4emC.79jgwH3z0UIzIVIzhKY4W9SZ9uhm\n";
/// `htpasswd -nbB -C 5 bob h2secret`.
const BOB: &str = "bob:$2y$05$SY/P4ShnSY6IG89WwnrodOYzmaExhD21NRDAV/Y2wQdGMiMowj6lO\n";

fn htpasswd_admits_its_users_and_throttles_a_guessing_client_alone(case: &str) {
    let (base, root) = www(&[
        ("private/a.txt", b"secret stuff\n"),
        ("index.html", b"home\n"),
    ]);
    let users = base.path().join("htpasswd");
    fs::write(&users, format!("{ALICE}{BOB}")).unwrap();
    let s = serve_root(
        &base,
        &root,
        case,
        &format!(
            "[[rule]]\npath = \"/private/\"\nhtpasswd = \"{}\"\n",
            users.display()
        ),
    );
    // "alice:secret", "alice:guess", "mallory:secret".
    let (good, wrong, unknown) = (
        "Authorization: Basic YWxpY2U6c2VjcmV0\r\n",
        "Authorization: Basic YWxpY2U6Z3Vlc3M=\r\n",
        "Authorization: Basic bWFsbG9yeTpzZWNyZXQ=\r\n",
    );
    let as_client = |client: &str, fields: &str| {
        let req = format!(
            "GET /private/a.txt HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {client}\r\n{fields}Connection: close\r\n\r\n"
        );
        exchange(s.addr, req.as_bytes(), false)
    };
    if installed("nghttp") {
        // Over HTTP/2, streams waiting for a check (bob, not checked yet: the answers
        // wait for a helper) beside another on one connection: all answered.
        let out = std::process::Command::new("nghttp")
            .args(["-n", "-s", "-H", "authorization: Basic Ym9iOmgyc2VjcmV0"])
            .arg(format!("http://{}/private/a.txt", s.addr))
            .arg(format!("http://{}/index.html", s.addr))
            .arg(format!("http://{}/private/a.txt?again", s.addr))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            text.lines().filter(|l| l.contains(" 200 ")).count(),
            3,
            "{text}"
        );
    }
    let r = as_client("198.51.100.1", "");
    assert_eq!(r.status, 401);
    assert!(
        r.must("WWW-Authenticate").starts_with("Basic realm="),
        "{r:?}"
    );
    assert_eq!(as_client("198.51.100.1", good).body, b"secret stuff\n");
    assert_eq!(as_client("198.51.100.1", unknown).status, 401);
    assert_eq!(get_as(&s, "x", "/index.html", "198.51.100.1").status, 200);
    // Guessing from one address: refused, unchecked (its remembered credentials too),
    // once it has failed ten times in a minute. (Ten guesses: a guess repeated within
    // 10 s is answered by its first check's outcome, neither checked nor counted again.)
    for guess in [
        "YWxpY2U6Z3Vlc3Mw",
        "YWxpY2U6Z3Vlc3Mx",
        "YWxpY2U6Z3Vlc3My",
        "YWxpY2U6Z3Vlc3Mz",
        "YWxpY2U6Z3Vlc3M0",
        "YWxpY2U6Z3Vlc3M1",
        "YWxpY2U6Z3Vlc3M2",
        "YWxpY2U6Z3Vlc3M3",
        "YWxpY2U6Z3Vlc3M4",
        "YWxpY2U6Z3Vlc3M5",
    ] {
        let field = format!("Authorization: Basic {guess}\r\n");
        assert_eq!(as_client("203.0.113.5", &field).status, 401);
    }
    let r = as_client("203.0.113.5", good);
    assert_eq!(r.status, 429);
    let secs: u64 = r.must("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&secs), "{secs}");
    // Another client is checked as ever, and remembered credentials pass.
    assert_eq!(as_client("198.51.100.2", good).status, 200);
    assert_eq!(as_client("198.51.100.2", wrong).status, 401);
    // Another user behind the guessing address is not locked out with alice.
    let bob = "Authorization: Basic Ym9iOmgyc2VjcmV0\r\n";
    assert_eq!(as_client("203.0.113.5", bob).body, b"secret stuff\n");
    if installed("curl") {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--http2-prior-knowledge", "-u", "alice:secret"])
            .arg(format!("http://{}/private/a.txt", s.addr))
            .output()
            .unwrap();
        assert_eq!(
            out.stdout,
            b"secret stuff\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A symbolic link inside the root to a protected file (issue 43 served it without
/// credentials: the rules matched the request's path alone): the rules of the path it
/// resolves to apply too, the stricter winning; through a linked directory as well.
fn a_link_to_a_protected_file_is_under_the_rules_of_both_paths(case: &str) {
    let (base, root) = www(&[
        ("private/s.txt", b"secret\n"),
        ("hidden/.env", b"KEY=1\n"),
        ("open/o.txt", b"open\n"),
        ("mine/m.txt", b"mine\n"),
    ]);
    std::os::unix::fs::symlink("private/s.txt", root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("private", root.join("linkdir")).unwrap();
    std::os::unix::fs::symlink("../hidden/.env", root.join("open/env.txt")).unwrap();
    std::os::unix::fs::symlink("../open/o.txt", root.join("mine/o-link.txt")).unwrap();
    let users = base.path().join("htpasswd");
    fs::write(&users, ALICE).unwrap();
    let s = serve_root(
        &base,
        &root,
        case,
        &format!(
            "autoindex = true\n[[rule]]\npath = \"/private/\"\nhtpasswd = \"{}\"\n\
             [[rule]]\npath = \"/mine/\"\ndeny = [\"198.51.100.9\"]\n",
            users.display()
        ),
    );
    let good = "Authorization: Basic YWxpY2U6c2VjcmV0\r\n";
    let ask = |path: &str, client: &str, fields: &str| {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {client}\r\n{fields}Connection: close\r\n\r\n"
        );
        exchange(s.addr, req.as_bytes(), false)
    };
    for path in ["/private/s.txt", "/link.txt", "/linkdir/s.txt"] {
        let r = ask(path, "198.51.100.1", "");
        assert_eq!(r.status, 401, "{path}: {r:?}");
        assert_ne!(r.body, b"secret\n", "{path}");
        assert_eq!(ask(path, "198.51.100.1", good).body, b"secret\n", "{path}");
    }
    // The listing of a linked directory: the rules of the directory it is too.
    let r = ask("/linkdir/", "198.51.100.1", "");
    assert_eq!(r.status, 401, "{r:?}");
    let r = ask("/linkdir/", "198.51.100.1", good);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(String::from_utf8_lossy(&r.body).contains("s.txt"));
    // A dot-file reached by a name without a dot: 404, as by its own name.
    assert_eq!(ask("/hidden/.env", "198.51.100.1", "").status, 404);
    assert_eq!(ask("/open/env.txt", "198.51.100.1", "").status, 404);
    // The asked path's rules still apply: a link from a denied directory to an open
    // file stays denied; the file by its own path is open.
    assert_eq!(ask("/mine/o-link.txt", "198.51.100.9", "").status, 403);
    assert_eq!(ask("/open/o.txt", "198.51.100.9", "").body, b"open\n");
    assert_eq!(ask("/mine/o-link.txt", "198.51.100.1", "").body, b"open\n");
}

/// The compression cache's directory is the server's alone (issue 43: a symbolic link
/// planted there sent a file outside every root as gzip, and a directory made by hand
/// kept mode 0755): a variant is never opened through a link, a directory made by hand
/// is tightened to 0700, and another user's that others may write refuses the start.
/// Rules: docs/http.md V4.
#[test]
fn the_compression_cache_directory_is_the_servers_alone() {
    use std::os::unix::fs::PermissionsExt;
    let js = prose(4, 60 << 10);
    let (base, root) = www(&[("app.js", &js)]);
    let outside = base.path().join("outside.txt");
    fs::write(&outside, b"a file outside every root\n").unwrap();
    let cache = base.path().join("zcache");
    fs::create_dir(&cache).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o755)).unwrap();
    let conf = format!("compress-cache = \"{}\"\n", cache.display());
    let s = serve_root(&base, &root, "splice", &conf);
    assert_eq!(
        fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
        0o700,
        "tightened"
    );
    until_coded(&s, "/app.js", "gzip", "gzip", &js);
    drop(s);
    // The variant's name now a link to a file outside: a new process never follows it,
    // and writes the variant in its place.
    let variant = fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "gz"))
        .expect("a gzip variant in the cache");
    fs::remove_file(&variant).unwrap();
    std::os::unix::fs::symlink(&outside, &variant).unwrap();
    let s = serve_root(&base, &root, "splice", &conf);
    let (_, gz) = until_coded(&s, "/app.js", "gzip", "gzip", &js);
    assert!(gunzip(&gz.body) == js);
    assert!(
        fs::symlink_metadata(&variant).unwrap().is_file(),
        "replaced"
    );
    drop(s);
    // Another user's directory that others may write: refused, saying why.
    if linerate_sys::ns::effective_uid() == 0 {
        let theirs = base.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(&theirs, fs::Permissions::from_mode(0o777)).unwrap();
        let conf = base.path().join("bad.toml");
        fs::write(
            &conf,
            format!(
                "root = \"{}\"\nlisten = \"127.0.0.1:0\"\ncompress-cache = \"{}\"\n",
                root.display(),
                theirs.display()
            ),
        )
        .unwrap();
        let (code, _, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap()]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("compress-cache") && err.contains("others may write it (mode 0777"),
            "{err}"
        );
        let (code, _, err) =
            LINERATE.run(&["serve", "--config", conf.to_str().unwrap(), "--check"]);
        assert_eq!(code, 2, "--check: {err}");
        assert!(err.contains("others may write it"), "--check: {err}");
    }
}

#[test]
fn an_htpasswd_file_with_a_hash_other_than_bcrypt_is_refused_at_start() {
    let dir = docroot();
    let users = dir.path().join("htpasswd");
    fs::write(
        &users,
        format!("{ALICE}carol:$apr1$A6uNhTrX$2AIzdiySDRczo6mGDL4f41\n"),
    )
    .unwrap();
    let conf = dir.path().join("c.toml");
    fs::write(
        &conf,
        format!(
            "root = \"{}\"\n[[rule]]\npath = \"/\"\nhtpasswd = \"{}\"\n",
            dir.path().display(),
            users.display()
        ),
    )
    .unwrap();
    let (code, _, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("line 2: user carol: not a bcrypt hash"),
        "{err}"
    );
}

/// SIGHUP takes every one of these keys from the file again; a bad htpasswd file
/// keeps the settings before.
#[test]
fn a_reload_takes_the_site_keys_and_a_bad_htpasswd_keeps_the_settings_before() {
    let (base, root) = www(&[("posts/hello.html", b"hello\n"), ("f.txt", b"F\n")]);
    let users = base.path().join("htpasswd");
    fs::write(&users, ALICE).unwrap();
    let conf = base.path().join("site.toml");
    let head = format!(
        "root = \"{}\"\naccess-log = \"off\"\ntrusted-proxies = [\"127.0.0.1/32\"]\n",
        root.display()
    );
    fs::write(&conf, &head).unwrap();
    let s = LINERATE.serve_config(
        None,
        &conf,
        &["--workers", "1", "--error-log-level", "info"],
    );
    let ask = |target: &str, fields: &str| {
        let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\n{fields}Connection: close\r\n\r\n");
        exchange(s.addr, req.as_bytes(), false)
    };
    assert_eq!(ask("/posts/hello", "").status, 404);
    assert_eq!(ask("/f.txt", "").status, 200);
    let rules = format!(
        r#"
[[rule]]
path = "/"
try = ["{{path}}", "{{path}}.html"]
security-headers = true
cors = {{ origins = ["https://app.test"] }}

[[rule]]
path = "=/f.txt"
htpasswd = "{}"
deny = ["192.0.2.0/24"]
"#,
        users.display()
    );
    fs::write(&conf, format!("{head}{rules}")).unwrap();
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    let r = ask("/posts/hello", "Origin: https://app.test\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"hello\n"[..]));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(
        r.header("Access-Control-Allow-Origin"),
        Some("https://app.test")
    );
    assert_eq!(ask("/f.txt", "").status, 401);
    assert_eq!(
        ask("/f.txt", "Authorization: Basic YWxpY2U6c2VjcmV0\r\n").status,
        200
    );
    assert_eq!(ask("/f.txt", "X-Forwarded-For: 192.0.2.7\r\n").status, 403);
    // A file the reload cannot take: one line says why, the settings before serve on.
    fs::write(&users, "alice:{SHA}EfatjsUqKYSrqv18O1FlA3hcIHI=\n").unwrap();
    s.signal("HUP");
    let log = s.wait_stderr("serving on with the settings before");
    assert!(log.contains("not a bcrypt hash"), "{log}");
    assert_eq!(
        ask("/f.txt", "Authorization: Basic YWxpY2U6c2VjcmV0\r\n").status,
        200
    );
}

/// Text that compresses to about half: words drawn at random from a small list.
fn prose(seed: u64, bytes: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "const", "let", "function", "return", "this", "value", "document", "window", "render",
        "state", "props", "export", "import", "default", "async", "await",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(bytes + 16);
    while out.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
        out.extend_from_slice(if x.is_multiple_of(7) { b";\n" } else { b" " });
        if x.is_multiple_of(5) {
            // A number now and then, so it does not compress to nothing.
            out.extend_from_slice(format!("{} ", x % 100_000).as_bytes());
        }
    }
    out.truncate(bytes);
    out
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn unbrotli(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    brotli::Decompressor::new(b, 4096)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// GETs `target` with `Accept-Encoding: ae` until the answer comes in `coding` (at most
/// 20 s), checking each on the way: the identity body or that coding, of `want`. The
/// answers before it, and it.
fn until_coded(s: &Server, target: &str, ae: &str, coding: &str, want: &[u8]) -> (usize, Response) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut before = 0;
    loop {
        let r = ask(s, "GET", target, &format!("Accept-Encoding: {ae}\r\n"));
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{r:?}");
        match r.header("Content-Encoding") {
            None => assert!(r.body == want, "identity, of the file as it is"),
            Some(c) if c == coding => {
                let plain = if c == "gzip" {
                    gunzip(&r.body)
                } else {
                    unbrotli(&r.body)
                };
                assert!(plain == want, "{c} of the file as it is");
                return (before, r);
            }
            // Another coding the client takes, made already.
            Some("gzip") => assert!(gunzip(&r.body) == want),
            Some(c) => panic!("{c}: {r:?}"),
        }
        before += 1;
        assert!(
            std::time::Instant::now() < until,
            "no {coding} after {before} answers"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn cache_files(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    v.sort();
    v
}

fn the_compression_cache_sends_each_variant_made_once_and_never_a_stale_one(case: &str) {
    let js = prose(1, 100 << 10);
    let (base, root) = www(&[
        ("app.js", &js),
        ("pre.css", &prose(2, 4000)),
        ("pre.css.gz", b"precompressed beside"),
        ("tiny.js", b"let x = 1;\n"),
        ("logo.png", &prose(3, 4000)),
    ]);
    let cache = base.path().join("zcache");
    let s = serve_root(
        &base,
        &root,
        case,
        &format!(
            "compress-cache = \"{}\"\nstatus-path = \"/.status\"\n",
            cache.display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&cache).unwrap().permissions().mode() & 0o777,
        0o700,
        "made private"
    );
    let plain = ask(&s, "GET", "/app.js", "");
    assert_eq!(plain.header("Content-Encoding"), None);
    // The first answers may be identity; then gzip from the cache, every time.
    let (_, gz) = until_coded(&s, "/app.js", "gzip", "gzip", &js);
    assert!(gz.body.len() < js.len() * 2 / 3, "{}", gz.body.len());
    assert_ne!(
        gz.header("ETag"),
        plain.header("ETag"),
        "validators per coding"
    );
    assert_eq!(gz.header("Last-Modified"), plain.header("Last-Modified"));
    for _ in 0..20 {
        let r = ask(&s, "GET", "/app.js", "Accept-Encoding: gzip\r\n");
        assert_eq!(r.header("Content-Encoding"), Some("gzip"));
        assert!(r.body == gz.body);
    }
    // A range of the variant, and a 304 on its validator.
    let r = ask(
        &s,
        "GET",
        "/app.js",
        "Accept-Encoding: gzip\r\nRange: bytes=0-9\r\n",
    );
    assert_eq!((r.status, &r.body[..]), (206, &gz.body[..10]));
    let etag = gz.header("ETag").unwrap();
    let r = ask(
        &s,
        "GET",
        "/app.js",
        &format!("Accept-Encoding: gzip\r\nIf-None-Match: {etag}\r\n"),
    );
    assert_eq!(r.status, 304);
    // An If-Range date is the file's: it never resumes a download in another coding.
    let r = ask(
        &s,
        "GET",
        "/app.js",
        &format!(
            "Accept-Encoding: gzip\r\nRange: bytes=0-9\r\nIf-Range: {}\r\n",
            plain.header("Last-Modified").unwrap()
        ),
    );
    assert_eq!((r.status, r.body.len()), (200, gz.body.len()));
    let r = ask(
        &s,
        "GET",
        "/app.js",
        &format!("Accept-Encoding: gzip\r\nRange: bytes=0-9\r\nIf-Range: {etag}\r\n"),
    );
    assert_eq!(r.status, 206);
    // A client preferring br gets gzip while br is made, then br.
    until_coded(&s, "/app.js", "br, gzip;q=0.5", "br", &js);
    // Over HTTP/2 (h2c), the same variant.
    if installed("curl") {
        let out = h2c_head(&s, "/app.js", &["-H", "Accept-Encoding: gzip"]);
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(
            head.starts_with("http/2 200") && head.contains("content-encoding: gzip"),
            "{head}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A variant beside the file is sent as it is; a tiny file and an image never.
    let r = ask(&s, "GET", "/pre.css", "Accept-Encoding: gzip\r\n");
    assert_eq!(&r.body[..], b"precompressed beside");
    for t in ["/tiny.js", "/logo.png"] {
        for _ in 0..3 {
            let r = ask(&s, "GET", t, "Accept-Encoding: gzip\r\n");
            assert_eq!((r.status, r.header("Content-Encoding")), (200, None), "{t}");
        }
    }
    let files = cache_files(&cache);
    assert_eq!(
        files.len(),
        2,
        "app.js in gzip and br, nothing else: {files:?}"
    );
    assert!(
        files.iter().any(|(n, _)| n.ends_with(".gz"))
            && files.iter().any(|(n, _)| n.ends_with(".br")),
        "{files:?}"
    );
    // The file edited: never the old contents again, in any coding.
    let edited = prose(4, 90 << 10);
    fs::write(root.join("app.js"), &edited).unwrap();
    until_coded(&s, "/app.js", "gzip", "gzip", &edited);
    let st: serde_json::Value =
        serde_json::from_slice(&ask(&s, "GET", "/.status", "").body).unwrap();
    let c = &st["compress_cache"];
    assert_eq!(c["written"], 3, "{c}");
    assert_eq!(c["failed"], 0, "{c}");
    assert!(c["hits"].as_u64().unwrap() >= 22, "{c}");
    assert_eq!(cache_files(&cache).len(), 3);
}

/// Rules: docs/http.md V4.
#[test]
fn the_compression_cache_stays_within_its_size_and_a_reload_moves_it() {
    // About 650 bytes each in gzip: 40 of them, 26K, in 16K.
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| (format!("f{i}.js"), prose(10 + i, 2000)))
        .collect();
    let named: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    let (base, root) = www(&named);
    let conf = base.path().join("site.toml");
    let cache = base.path().join("zcache");
    let head = format!(
        "root = \"{}\"\naccess-log = \"off\"\nstatus-path = \"/.status\"\n",
        root.display()
    );
    fs::write(
        &conf,
        format!(
            "{head}compress-cache = \"{}\"\ncompress-cache-size = \"16K\"\n",
            cache.display()
        ),
    )
    .unwrap();
    let s = LINERATE.serve_config(
        None,
        &conf,
        &["--workers", "1", "--error-log-level", "info"],
    );
    for (n, b) in &files {
        until_coded(&s, &format!("/{n}"), "gzip", "gzip", b);
    }
    let held: u64 = cache_files(&cache).iter().map(|f| f.1).sum();
    assert!(held <= 16 << 10, "{held} bytes held");
    let st: serde_json::Value =
        serde_json::from_slice(&ask(&s, "GET", "/.status", "").body).unwrap();
    let c = &st["compress_cache"];
    assert_eq!(c["written"], 40, "{c}");
    assert!(c["evictions"].as_u64().unwrap() >= 10, "{c}");
    assert_eq!(c["bytes_held"], held, "{c}");
    // Every file is still answered right, evicted variants made again.
    for (n, b) in files.iter().take(4) {
        until_coded(&s, &format!("/{n}"), "gzip", "gzip", b);
    }
    // A reload to another directory: variants are made there.
    let moved = base.path().join("zcache2");
    fs::write(
        &conf,
        format!("{head}compress-cache = \"{}\"\n", moved.display()),
    )
    .unwrap();
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    until_coded(&s, "/f5.js", "br", "br", &files[5].1);
    assert_eq!(cache_files(&moved).len(), 1);
    // A directory the server cannot make refuses the reload; it serves on.
    fs::write(base.path().join("plain-file"), b"x").unwrap();
    fs::write(
        &conf,
        format!(
            "{head}compress-cache = \"{}\"\n",
            base.path().join("plain-file/sub").display()
        ),
    )
    .unwrap();
    s.signal("HUP");
    let log = s.wait_stderr("serving on with the settings before");
    assert!(log.contains("compress-cache"), "{log}");
    until_coded(&s, "/f5.js", "br", "br", &files[5].1);
}
