//! A documentation site and a package mirror configured the same way in linerate and in
//! nginx (Debian's nginx, `scripts/test` installs it): a set of requests held back
//! from the other tests gets the same status, Content-Type, Content-Encoding,
//! Cache-Control, Location and body from both.
//!
//! Three differences are by design (docs/http.md) and left out of the comparison: the
//! bodies and types of redirects and plain errors (nginx writes HTML, linerate a line of
//! text); `Vary` on an answer that is not compressed (linerate says `Vary:
//! Accept-Encoding` on every answer for a compressible file, so that a cache never
//! hands one client's coding to another; nginx only on the compressed ones); and
//! `Range` on a compressed answer (nginx 1.22 sends the whole `.gz` with 200, linerate
//! the range of it with 206, V3; serve_variants.rs tests it).

use std::fs;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use linerate_testkit::{docroot, installed, is_root, put, raw, Linerate};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// The held-back requests: (method, target, extra header lines).
const REQUESTS: &[(&str, &str, &str)] = &[
    ("GET", "/", ""),
    ("GET", "/guide/intro.html", ""),
    ("GET", "/guide", ""),
    ("GET", "/guide/?tab=2", ""),
    ("GET", "/assets/app.js", ""),
    ("GET", "/assets/app.js", "Accept-Encoding: gzip\r\n"),
    (
        "GET",
        "/assets/app.js",
        "Accept-Encoding: gzip, deflate, br\r\n",
    ),
    ("HEAD", "/assets/app.js", "Accept-Encoding: gzip\r\n"),
    ("GET", "/assets/app.js", "Accept-Encoding: gzip;q=0\r\n"),
    ("GET", "/assets/style.css", "Accept-Encoding: gzip\r\n"),
    ("GET", "/assets/logo.png", ""),
    ("GET", "/old/intro.html", ""),
    ("GET", "/old/intro.html?x=1", ""),
    ("GET", "/no/such/page", ""),
    ("HEAD", "/no/such/page", ""),
    ("GET", "/pool/main/p/pkg_1.0_amd64.deb", ""),
    ("GET", "/pool/main/p/pkg-1.0-1.x86_64.rpm", ""),
    (
        "GET",
        "/pool/main/p/pkg-1.0-1.x86_64.rpm",
        "Range: bytes=10-19\r\n",
    ),
    ("GET", "/dists/stable/Release", ""),
    ("GET", "/dists/stable/Release.gpg", ""),
    ("GET", "/dists/stable/InRelease.asc", ""),
    ("GET", "/SHA256SUMS", ""),
    ("GET", "/pool/main/p/missing.deb", ""),
];

/// The site: HTML, a script with its `.gz`, a stylesheet without one, an image, the
/// error page, and a mirror's packages, release files and checksums.
fn site(root: &Path) {
    use flate2::write::GzEncoder;
    let js = "function a(b) { return b * 2; }\n".repeat(500);
    put(root, "index.html", b"<p>docs</p>\n");
    put(root, "guide/index.html", b"<p>guide</p>\n");
    put(root, "guide/intro.html", b"<p>intro</p>\n");
    put(root, "assets/app.js", js.as_bytes());
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(js.as_bytes()).unwrap();
    put(root, "assets/app.js.gz", &gz.finish().unwrap());
    put(root, "assets/style.css", b"body { margin: 0 }\n");
    put(root, "assets/logo.png", b"\x89PNG\r\n\x1a\n");
    put(root, "errors/404.html", b"<h1>Not here</h1>\n");
    put(root, "pool/main/p/pkg_1.0_amd64.deb", &[7u8; 3000]);
    put(root, "pool/main/p/pkg-1.0-1.x86_64.rpm", &[9u8; 4000]);
    put(root, "dists/stable/Release", b"Origin: example\n");
    put(
        root,
        "dists/stable/Release.gpg",
        b"-----BEGIN PGP SIGNATURE-----\n",
    );
    put(
        root,
        "dists/stable/InRelease.asc",
        b"-----BEGIN PGP SIGNED MESSAGE-----\n",
    );
    put(root, "SHA256SUMS", b"0123  pkg_1.0_amd64.deb\n");
}

/// nginx configured as the linerate file of [`linerate_conf`] is.
fn nginx_conf(root: &Path, work: &Path, port: u16) -> String {
    let user = if is_root() { "user root;\n" } else { "" };
    format!(
        "{user}daemon off;
master_process off;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    types {{
        text/html html;
        text/css css;
        text/javascript js;
        image/png png;
        application/vnd.debian.binary-package deb;
        application/x-rpm rpm;
        application/pgp-signature asc gpg;
    }}
    default_type application/octet-stream;
    charset utf-8;
    charset_types text/html text/css text/javascript;
    absolute_redirect off;
    gzip_static on;
    gzip_vary on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        error_page 404 /errors/404.html;
        location /assets/ {{ add_header Cache-Control \"public, max-age=31536000\"; }}
        location /guide/ {{ expires 1h; }}
        location /old/ {{ rewrite ^/old/(.*)$ /guide/$1 permanent; }}
    }}
}}
",
        root = root.display(),
        work = work.display()
    )
}

/// The same site in linerate's words.
fn linerate_conf(root: &Path) -> String {
    format!(
        r#"root = "{}"
access-log = "off"
precompressed = ["gzip"]

[[rule]]
path = "/"
errors = {{ 404 = "/errors/404.html" }}

[[rule]]
path = "/assets/"
headers = {{ "Cache-Control" = "public, max-age=31536000" }}

[[rule]]
path = "/guide/"
expires = "1h"

[[rule]]
path = "/old/"
redirect = "/guide/"
"#,
        root.display()
    )
}

/// nginx on `port`, once it answers.
fn start_nginx(conf: &Path, port: u16) -> Child {
    let exe = ["/usr/sbin/nginx", "nginx"]
        .into_iter()
        .find(|p| Command::new(p).arg("-v").output().is_ok())
        .expect("nginx runs");
    let child = Command::new(exe)
        .arg("-c")
        .arg(conf)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nginx did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// An answer as both servers give it (nginx's carries no `Server: linerate`, so the
/// test kit's checking parser is not used).
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn parse(bytes: &[u8]) -> Answer {
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a whole head");
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Answer {
            status,
            headers,
            body: bytes[end + 4..].to_vec(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What is compared of an answer.
fn fields(r: &Answer, head: bool) -> String {
    let pick = |n: &str| r.header(n).unwrap_or("-").to_string();
    let plain_error = r.status >= 300 && pick("content-type").starts_with("text/plain");
    let mut out = format!("{}", r.status);
    let redirect = (300..400).contains(&r.status);
    if !redirect && !plain_error {
        out += &format!(" type={}", pick("content-type"));
    }
    out += &format!(
        " encoding={} cache-control={} location={}",
        pick("content-encoding"),
        pick("cache-control"),
        pick("location")
    );
    if r.header("content-encoding").is_some() {
        out += &format!(" vary={}", pick("vary"));
    }
    if !redirect && !plain_error {
        out += &format!(" length={}", pick("content-length"));
        if !head {
            out += &format!(" body-crc={:08x}", crc(&r.body));
        }
    }
    out
}

fn crc(b: &[u8]) -> u32 {
    // FNV-1a: enough to tell bodies apart here.
    b.iter().fold(0x811c_9dc5u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
    })
}

fn ask(addr: SocketAddr, method: &str, target: &str, extra: &str) -> Answer {
    let req = format!("{method} {target} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n");
    Answer::parse(&raw(addr, req.as_bytes(), false))
}

/// Rules: docs/http.md V1, V3, W2, W3, W4.
#[test]
fn a_docs_site_and_a_mirror_answer_as_nginx_configured_the_same_way() {
    if !installed("nginx") {
        eprintln!("nginx is not installed: skipped");
        return;
    }
    let base = docroot();
    let root = base.path().join("www");
    site(&root);
    let work = base.path().join("nginx");
    fs::create_dir_all(&work).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nconf = work.join("nginx.conf");
    fs::write(&nconf, nginx_conf(&root, &work, port)).unwrap();
    let mut nginx = start_nginx(&nconf, port);
    let lconf = base.path().join("linerate.toml");
    fs::write(&lconf, linerate_conf(&root)).unwrap();
    let l = LINERATE.serve_config(None, &lconf, &[]);
    let n_addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut differ = Vec::new();
    for &(method, target, extra) in REQUESTS {
        let ours = fields(&ask(l.addr, method, target, extra), method == "HEAD");
        let theirs = fields(&ask(n_addr, method, target, extra), method == "HEAD");
        if ours != theirs {
            differ.push(format!(
                "{method} {target} {extra:?}\n  linerate: {ours}\n  nginx:    {theirs}"
            ));
        }
    }
    let _ = nginx.kill();
    let _ = nginx.wait();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
