//! Request rates per client (`limit-requests`, issue 48) through the binary under every
//! transmit strategy and driver: a burst served and the rest refused with a
//! `Retry-After` that holds, another client untouched, IPv6 clients by their /64, a
//! burst that waits its turn (`delay`), buckets by user, the 429 through the rules'
//! error page, the counts kept by a reload, the same limit over HTTP/2 and HTTP/3.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use linerate_testkit::{
    connect, docroot, exchange, per_strategy, put, variant, Linerate, Response, Server,
};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

per_strategy!(
    // Rules: docs/http.md L1, L4.
    a_burst_is_served_and_the_rest_refused_until_their_turn,
    // Rules: docs/http.md L2.
    delay_spaces_the_burst_at_the_rate,
    // Rules: docs/http.md L1.
    the_refusal_is_the_rules_error_page_for_429,
);

/// `linerate serve --config` of `body` (after the case's transmit and driver, the
/// status page at `/.s` and the metrics at `/.m`) with loopback trusted to name the
/// client by X-Forwarded-For, so one test can be any client.
fn serve_conf(dir: &Path, case: &str, body: &str) -> Server {
    let (transmit, driver) = variant(case);
    let conf = dir.join("site.toml");
    fs::write(
        &conf,
        format!(
            "root = \"{}\"\naccess-log = \"off\"\ntransmit = \"{transmit}\"\n\
             driver = \"{driver}\"\nstatus-path = \"/.s\"\nmetrics-path = \"/.m\"\n\
             trusted-proxies = [\"127.0.0.1/32\"]\n{body}",
            dir.join("www").display()
        ),
    )
    .unwrap();
    LINERATE.serve_config(None, &conf, &["--workers", "2"])
}

/// A directory with `www/a.txt` and whatever `files` adds beneath `www`.
fn site(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let d = docroot();
    put(d.path(), "www/a.txt", b"hello\n");
    for (name, body) in files {
        put(d.path(), &format!("www/{name}"), body);
    }
    d
}

/// GET `path` as the client `from` (X-Forwarded-For, which the server trusts from
/// loopback).
fn get_as(server: &Server, path: &str, from: &str) -> Response {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {from}\r\nConnection: close\r\n\r\n"
    );
    exchange(server.addr, req.as_bytes(), false)
}

/// `n` requests for `path` as the client `from` at once: each on a connection of its
/// own, all sent before any is read; their answers in the order sent.
fn at_once(server: &Server, path: &str, from: &str, n: usize) -> Vec<Response> {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {from}\r\nConnection: close\r\n\r\n"
    );
    let mut conns: Vec<TcpStream> = (0..n).map(|_| connect(server.addr)).collect();
    for c in &mut conns {
        c.write_all(req.as_bytes()).unwrap();
    }
    conns
        .into_iter()
        .map(|mut c| {
            let mut raw = Vec::new();
            c.read_to_end(&mut raw).unwrap();
            linerate_testkit::parse_all(&raw, &[false])
                .into_iter()
                .next()
                .expect("an answer")
        })
        .collect()
}

/// The server's status page.
fn status(server: &Server) -> serde_json::Value {
    let r = get_as(server, "/.s", "127.0.0.1");
    serde_json::from_slice(&r.body).unwrap()
}

/// 100 requests at once from one client against `rate = "1/h", burst = 20` (a rate
/// slow enough that none comes back during the test): 20 answered, each saying what
/// is left, the other 80 refused with 429, `Retry-After` of the rate's interval and
/// the draft's `RateLimit` fields; another client, and another IPv6 /64, untouched;
/// two addresses of one /64 one client. A limit of `30/m, burst = 2` refuses a third
/// request at once, and serves it after the `Retry-After` it gave. Counted on the
/// status page and in the metrics, and shown by `--check`.
fn a_burst_is_served_and_the_rest_refused_until_their_turn(case: &str) {
    let d = site(&[("fast/b.txt", b"b\n")]);
    let server = serve_conf(
        d.path(),
        case,
        "[[rule]]\npath = \"/\"\nlimit-requests = { rate = \"1/h\", burst = 20 }\n\
         [[rule]]\npath = \"/fast/\"\nlimit-requests = { rate = \"30/m\", burst = 2 }\n",
    );
    let got = at_once(&server, "/a.txt", "192.0.2.1", 100);
    let ok: Vec<&Response> = got.iter().filter(|r| r.status == 200).collect();
    let refused: Vec<&Response> = got.iter().filter(|r| r.status == 429).collect();
    assert_eq!((ok.len(), refused.len()), (20, 80), "{got:?}");
    let left: Vec<String> = ok
        .iter()
        .map(|r| r.header("RateLimit").unwrap().to_string())
        .collect();
    for r in &ok {
        assert_eq!(r.body, b"hello\n");
        assert_eq!(
            r.header("RateLimit-Policy"),
            Some("\"requests\";q=20;w=72000")
        );
    }
    // The last of the burst leaves none, and its bucket whole in 20 hours (less a
    // second if the burst took that long to come).
    let last = ["\"requests\";r=0;t=72000", "\"requests\";r=0;t=71999"];
    assert!(left.iter().any(|l| last.contains(&l.as_str())), "{left:?}");
    assert!(
        left.contains(&"\"requests\";r=19;t=3600".to_string()),
        "{left:?}"
    );
    for r in &refused {
        let after: u64 = r.header("Retry-After").unwrap().parse().unwrap();
        assert!((3599..=3600).contains(&after), "{r:?}");
        assert_eq!(
            r.header("RateLimit")
                .map(|v| v.starts_with("\"requests\";r=0;t=")),
            Some(true)
        );
        assert_eq!(
            r.header("RateLimit-Policy"),
            Some("\"requests\";q=20;w=72000")
        );
    }
    // Another client is served as ever.
    assert_eq!(get_as(&server, "/a.txt", "192.0.2.2").status, 200);
    // IPv6: a /64 is one client.
    for _ in 0..20 {
        assert_eq!(get_as(&server, "/a.txt", "2001:db8:1:2::1").status, 200);
    }
    assert_eq!(
        get_as(&server, "/a.txt", "2001:db8:1:2:ffff::9").status,
        429
    );
    assert_eq!(get_as(&server, "/a.txt", "2001:db8:1:3::1").status, 200);
    // A Retry-After to trust: waited, the next request is served.
    assert_eq!(get_as(&server, "/fast/b.txt", "192.0.2.3").status, 200);
    assert_eq!(get_as(&server, "/fast/b.txt", "192.0.2.3").status, 200);
    let third = get_as(&server, "/fast/b.txt", "192.0.2.3");
    assert_eq!(third.status, 429, "{third:?}");
    let after: u64 = third.header("Retry-After").unwrap().parse().unwrap();
    assert!((1..=2).contains(&after), "{third:?}");
    std::thread::sleep(Duration::from_secs(after));
    assert_eq!(get_as(&server, "/fast/b.txt", "192.0.2.3").status, 200);
    // Counted: on the status page, each limit; in the metrics, by site and rule.
    let s = status(&server);
    let limits = s["limits"].as_array().unwrap();
    let slow = limits.iter().find(|l| l["rule"] == "/").unwrap();
    assert_eq!(
        (
            &slow["rate"],
            &slow["burst"],
            &slow["refused"],
            &slow["site"]
        ),
        (
            &"1/h".into(),
            &20.into(),
            &81.into(),
            &serde_json::Value::from("*")
        ),
        "{s}"
    );
    assert_eq!(s["errors"]["limit_requests_429"], 82, "{s}");
    let m = get_as(&server, "/.m", "127.0.0.1");
    let m = String::from_utf8_lossy(&m.body);
    assert!(
        m.contains("linerate_limit_requests_refused_total{site=\"*\",rule=\"/\"} 81"),
        "{m}"
    );
    assert!(
        m.contains("linerate_limit_requests_refused_total{site=\"*\",rule=\"/fast/\"} 1"),
        "{m}"
    );
    let conf = d.path().join("site.toml");
    let (code, out, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap(), "--check"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("limit-requests: site * rule /: 1/h a client (address), burst 20"),
        "{out}"
    );
}

/// `rate = "2/s", burst = 5, delay = 1`, five requests at once from one client: all
/// are answered, the four past the first each after its turn (half a second apart, so
/// the last no sooner than 2 s), counted as delayed; none refused.
fn delay_spaces_the_burst_at_the_rate(case: &str) {
    let d = site(&[]);
    let server = serve_conf(
        d.path(),
        case,
        "[[rule]]\npath = \"/\"\nlimit-requests = { rate = \"2/s\", burst = 5, delay = 1 }\n",
    );
    let t = Instant::now();
    let got = at_once(&server, "/a.txt", "192.0.2.9", 5);
    let took = t.elapsed();
    assert!(
        got.iter().all(|r| r.status == 200 && r.body == b"hello\n"),
        "{got:?}"
    );
    assert!(took >= Duration::from_millis(1990), "{took:?}");
    let s = status(&server);
    let l = &s["limits"][0];
    assert_eq!(
        (&l["delayed"], &l["refused"], &l["delay"]),
        (&4.into(), &0.into(), &1.into()),
        "{s}"
    );
}

/// A refusal under a rule with an error page for 429 is that page, with the status
/// and the limit's fields.
fn the_refusal_is_the_rules_error_page_for_429(case: &str) {
    let d = site(&[("errors/429.html", b"<p>slow down</p>\n")]);
    let server = serve_conf(
        d.path(),
        case,
        "[[rule]]\npath = \"/\"\nlimit-requests = { rate = \"1/h\" }\n\
         errors = { 429 = \"/errors/429.html\" }\n",
    );
    assert_eq!(get_as(&server, "/a.txt", "192.0.2.4").status, 200);
    let r = get_as(&server, "/a.txt", "192.0.2.4");
    assert_eq!(r.status, 429);
    assert_eq!(r.body, b"<p>slow down</p>\n");
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert!(r.header("Retry-After").is_some(), "{r:?}");
    assert_eq!(
        r.header("RateLimit-Policy"),
        Some("\"requests\";q=1;w=3600")
    );
}

/// `key = "user"`: behind one address, each user `htpasswd` let in has a bucket of
/// its own. Rules: docs/http.md L3.
#[test]
fn buckets_by_user_count_each_user_alone() {
    let d = site(&[("private/p.txt", b"p\n")]);
    // `htpasswd -nbB -C 5 alice secret` and `bob h2secret`.
    let users = d.path().join("htpasswd");
    fs::write(
        &users,
        "alice:$2y$05$K96.w96XA89FxJ..xXDe4emC.79jgwH3z0UIzIVIzhKY4W9SZ9uhm\n\
         bob:$2y$05$SY/P4ShnSY6IG89WwnrodOYzmaExhD21NRDAV/Y2wQdGMiMowj6lO\n",
    )
    .unwrap();
    let server = serve_conf(
        d.path(),
        "splice",
        &format!(
            "[[rule]]\npath = \"/private/\"\nhtpasswd = \"{}\"\n\
             limit-requests = {{ rate = \"1/h\", burst = 2, key = \"user\" }}\n",
            users.display()
        ),
    );
    let as_user = |auth: &str| {
        let req = format!(
            "GET /private/p.txt HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\
             Connection: close\r\n\r\n"
        );
        exchange(server.addr, req.as_bytes(), false).status
    };
    // base64 of alice:secret and bob:h2secret; however the field is spelled, one
    // user is one bucket.
    let (alice, bob) = ("Basic YWxpY2U6c2VjcmV0", "Basic Ym9iOmgyc2VjcmV0");
    assert_eq!([as_user(alice), as_user(alice)], [200, 200]);
    for spelled in ["basic  YWxpY2U6c2VjcmV0", "BASIC YWxpY2U6c2VjcmV0 ", alice] {
        assert_eq!(as_user(spelled), 429, "{spelled}");
    }
    assert_eq!([as_user(bob), as_user(bob), as_user(bob)], [200, 200, 429]);
}

/// A reload keeps the clients' buckets of the limits it keeps (same site, same rule):
/// a client refused before is refused after; a burst raised by the reload gives it
/// what the new burst adds, no more. Rules: docs/http.md L5.
#[test]
fn a_reload_keeps_the_buckets_of_the_limits_it_keeps() {
    let d = site(&[]);
    let rule = |burst: u32| {
        format!("[[rule]]\npath = \"/\"\nlimit-requests = {{ rate = \"1/h\", burst = {burst} }}\n")
    };
    let server = serve_conf(d.path(), "splice", &rule(2));
    let ask = || get_as(&server, "/a.txt", "192.0.2.5").status;
    assert_eq!([ask(), ask(), ask()], [200, 200, 429]);
    server.signal("HUP");
    server.wait_stderr("SIGHUP: reloaded (generation 1)");
    assert_eq!(ask(), 429);
    let conf = d.path().join("site.toml");
    let text = fs::read_to_string(&conf)
        .unwrap()
        .replace(&rule(2), &rule(3));
    fs::write(&conf, text).unwrap();
    server.signal("HUP");
    server.wait_stderr("SIGHUP: reloaded (generation 2)");
    assert_eq!([ask(), ask()], [200, 429]);
    // The counts go on across the reloads.
    assert_eq!(status(&server)["limits"][0]["refused"], 3);
}

/// The same limit over HTTP/1.1 (pipelined), HTTP/2 and HTTP/3 (50 streams on one
/// connection), each under a rule of its own (`rate = "1/h", burst = 20`): 20
/// answered, 30 refused, whatever the protocol. Rules: docs/http.md L4.
#[test]
fn the_limit_is_the_same_over_every_protocol() {
    let files: Vec<(String, &[u8])> = ["h1", "h2", "h3", "d1", "d2", "d3"]
        .iter()
        .map(|p| (format!("{p}/a.txt"), &b"x\n"[..]))
        .collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let d = site(&files);
    let certs = docroot();
    let (cert, key) = linerate_testkit::tls_files(certs.path(), "server");
    let mut rules = String::new();
    for p in ["h1", "h2", "h3"] {
        rules.push_str(&format!(
            "[[rule]]\npath = \"/{p}/\"\nlimit-requests = {{ rate = \"1/h\", burst = 20 }}\n"
        ));
    }
    // And a burst that waits its turn, on each protocol.
    for p in ["d1", "d2", "d3"] {
        rules.push_str(&format!(
            "[[rule]]\npath = \"/{p}/\"\n\
             limit-requests = {{ rate = \"4/s\", burst = 5, delay = 1 }}\n"
        ));
    }
    let conf = d.path().join("site.toml");
    fs::write(
        &conf,
        format!(
            "root = \"{}\"\naccess-log = \"off\"\nstatus-path = \"/.s\"\n\
             tls-cert = \"{}\"\ntls-key = \"{}\"\n{rules}",
            d.path().join("www").display(),
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let server = LINERATE.serve_config(
        None,
        &conf,
        &["--tls-listen", "127.0.0.1:0", "--workers", "1"],
    );
    let tls = server.tls_addr();
    let cert = cert.to_str().unwrap();
    let bench = |path: &str, n: &str, extra: &[&str]| {
        let url = format!("https://{tls}{path}");
        let mut args = vec![
            "bench", "http", &url, "--cacert", cert, "-c", "1", "-n", n, "--json",
        ];
        args.extend(extra);
        let (code, out, err) = LINERATE.run(&args);
        assert_eq!(code, 0, "{path}: {err}");
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        if r.is_array() {
            r[0].clone()
        } else {
            r
        }
    };
    let ways: [&[&str]; 3] = [
        &["--pipeline", "50"],
        &["--h2", "-m", "50"],
        &["--h3", "-m", "50"],
    ];
    for (i, extra) in ways.iter().enumerate() {
        let p = format!("/h{}/a.txt", i + 1);
        let r = bench(&p, "50", extra);
        assert_eq!(
            (&r["statuses"]["200"], &r["statuses"]["429"]),
            (&20.into(), &30.into()),
            "{p}: {r}"
        );
        // Five at once on streams (pipelined on HTTP/1.1): each served, four after
        // their turns.
        let p = format!("/d{}/a.txt", i + 1);
        let r = bench(&p, "5", &[&extra[..extra.len() - 1], &["5"][..]].concat());
        assert_eq!(r["statuses"]["200"], 5, "{p}: {r}");
    }
    let s = status(&server);
    for p in ["/d1/", "/d2/", "/d3/"] {
        let l = s["limits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["rule"] == p);
        assert_eq!(l.map(|l| &l["delayed"]), Some(&4.into()), "{p}: {s}");
    }
}
