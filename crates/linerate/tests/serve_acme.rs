//! Automatic HTTPS (issue 34) against pebble, Let's Encrypt's test directory, on
//! loopback: a first certificate by TLS-ALPN-01 and by HTTP-01, a restart that serves
//! the stored certificate without a new order, and a failed validation that is logged,
//! counted and leaves the certificate before serving. pebble validates `a.test`, which
//! its DNS (pebble-challtestsrv) resolves to 127.0.0.1, on fixed ports (5001 for
//! TLS-ALPN-01, 5002 for HTTP-01): the tests take turns.

use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use linerate_testkit::{docroot, installed, put, tls_files_for, Linerate, Server};

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// One pebble at a time: its ports, and the validation ports, are fixed.
static TURN: Mutex<()> = Mutex::new(());

const DIRECTORY: &str = "https://127.0.0.1:14000/dir";

/// pebble and its DNS, running until dropped.
struct Pebble {
    procs: Vec<Child>,
    /// The root pebble issues under (for clients of the certificates it issues).
    issuer: PathBuf,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

fn wait_port(addr: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < until, "{addr} never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Debian's pebble issuing certificates valid `validity` seconds, with a CA for its own
/// HTTPS made in `dir`.
fn pebble(dir: &Path, validity: u64) -> Option<Pebble> {
    // By its path: the pebble 2.10 of the ARI test may come first on PATH.
    const DEBIAN: &str = "/usr/bin/pebble";
    if !Path::new(DEBIAN).exists() {
        eprintln!("pebble is not installed: the ACME tests cannot run");
        return None;
    }
    pebble_of(DEBIAN, dir, validity)
}

/// [`pebble`] by the binary `bin`.
fn pebble_of(bin: &str, dir: &Path, validity: u64) -> Option<Pebble> {
    if !installed("pebble-challtestsrv") {
        eprintln!("pebble-challtestsrv is not installed: the ACME tests cannot run");
        return None;
    }
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Its own name: a leaf named as its issuer looks self-signed to OpenSSL.
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "pebble test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    leaf.distinguished_name
        .push(rcgen::DnType::CommonName, "pebble");
    let cert = leaf.signed_by(&key, &Issuer::new(ca, ca_key)).unwrap();
    let ca_path = dir.join("pebble-ca.pem");
    fs::write(&ca_path, ca_cert.pem()).unwrap();
    fs::write(dir.join("pebble.pem"), cert.pem()).unwrap();
    fs::write(dir.join("pebble.key"), key.serialize_pem()).unwrap();
    let config = dir.join("pebble.json");
    fs::write(
        &config,
        format!(
            r#"{{"pebble":{{"listenAddress":"127.0.0.1:14000","managementListenAddress":"127.0.0.1:15000",
"certificate":"{0}/pebble.pem","privateKey":"{0}/pebble.key","httpPort":5002,"tlsPort":5001,
"ocspResponderURL":"","externalAccountBindingRequired":false,"certificateValidityPeriod":{validity}}}}}"#,
            dir.display()
        ),
    )
    .unwrap();
    let quiet = |c: &mut Command| {
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    };
    let mut dns = Command::new("pebble-challtestsrv");
    dns.args(["-dns01", "127.0.0.1:8053", "-http01", "", "-https01", ""])
        .args(["-tlsalpn01", "", "-management", "127.0.0.1:8055"])
        .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""]);
    quiet(&mut dns);
    let mut procs = vec![dns.spawn().unwrap()];
    let mut p = Command::new(bin);
    p.arg("-config")
        .arg(&config)
        .args(["-dnsserver", "127.0.0.1:8053"])
        .env("PEBBLE_VA_NOSLEEP", "1")
        .env("PEBBLE_WFE_NONCEREJECT", "0")
        .env("PEBBLE_AUTHZREUSE", "0");
    quiet(&mut p);
    procs.push(p.spawn().unwrap());
    let pebble = Pebble {
        procs,
        issuer: dir.join("pebble-issuer.pem"),
    };
    wait_port("127.0.0.1:14000");
    wait_port("127.0.0.1:15000");
    let root = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&ca_path)
        .arg("https://127.0.0.1:15000/roots/0")
        .output()
        .unwrap();
    assert!(root.status.success(), "{root:?}");
    fs::write(&pebble.issuer, &root.stdout).unwrap();
    Some(pebble)
}

/// `curl https://a.test:PORT/f.txt` trusting `ca`, the name resolved to 127.0.0.1:
/// the body, or curl's error.
fn fetch(port: u16, ca: &Path) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert"])
        .arg(ca)
        .args(["--resolve", &format!("a.test:{port}:127.0.0.1")])
        .arg(format!("https://a.test:{port}/f.txt"))
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// [`fetch`] until it succeeds (at most 60 s); the body.
fn fetch_until(port: u16, ca: &Path, s: &Server) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match fetch(port, ca) {
            Ok(b) => return b,
            Err(e) => assert!(
                Instant::now() < until,
                "no certificate from pebble: {e}\n{}",
                s.stderr_text()
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status page's `acme` object.
fn acme_status(s: &Server) -> serde_json::Value {
    let r = linerate_testkit::exchange(
        s.addr,
        b"GET /.status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        false,
    );
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    v["acme"].clone()
}

/// A configuration for `a.test` with `acme = true` (and `extra` keys at the top).
fn conf(base: &Path, extra: &str, site_extra: &str) -> PathBuf {
    let www = base.join("www");
    put(&www, "f.txt", b"hello over ACME\n");
    let conf = base.join("linerate.toml");
    fs::write(
        &conf,
        format!(
            "access-log = \"off\"\nstatus-path = \"/.status\"\nerror-log-level = \"info\"\n\
             acme-directory = \"{DIRECTORY}\"\nacme-directory-ca = \"{}\"\nacme-dir = \"{}\"\n{extra}\n\
             [[site]]\nnames = [\"a.test\"]\nroot = \"{}\"\nacme = true\n{site_extra}",
            base.join("pebble-ca.pem").display(),
            base.join("acme").display(),
            www.display()
        ),
    )
    .unwrap();
    conf
}

/// [`conf`] with `top`, and a certificate of the site's own for `a.test` (the
/// fallback until ACME's arrives): the configuration and that certificate.
fn with_fallback(base: &Path, top: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = tls_files_for(base, "fallback", &["a.test"]);
    let site = format!(
        "tls-cert = \"{}\"\ntls-key = \"{}\"\n",
        cert.display(),
        key.display()
    );
    (conf(base, top, &site), cert)
}

/// pebble issuing certificates of `validity` seconds, and a server for `a.test` on
/// TLS-ALPN-01 that has its first: the directory, pebble, the configuration, the
/// server.
fn issued(validity: u64) -> Option<(tempfile::TempDir, Pebble, PathBuf, Server)> {
    let base = docroot();
    let p = pebble(base.path(), validity)?;
    let conf = conf(base.path(), "tls-listen = \"127.0.0.1:5001\"\n", "");
    let s = LINERATE.serve_config(None, &conf, &[]);
    fetch_until(5001, &p.issuer, &s);
    Some((base, p, conf, s))
}

/// Docs: docs/operations.md, "Automatic HTTPS".
#[test]
fn tls_alpn_01_gets_a_certificate_and_a_restart_serves_it_without_a_new_order() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let base = docroot();
    let Some(p) = pebble(base.path(), 3600) else {
        return;
    };
    let conf = conf(base.path(), "tls-listen = \"127.0.0.1:5001\"\n", "");
    let s = LINERATE.serve_config(None, &conf, &[]);
    assert_eq!(fetch_until(5001, &p.issuer, &s), "hello over ACME\n");
    let a = acme_status(&s);
    assert_eq!(a["issued"], 1, "{a}");
    assert!(a["certificates"][0]["not_after"].as_u64().is_some(), "{a}");
    // Stored for the user alone.
    use std::os::unix::fs::PermissionsExt;
    let acme = base.path().join("acme");
    assert_eq!(
        fs::metadata(&acme).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert_eq!(
        fs::metadata(acme.join("a.test/key.pem"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    // A plain HTTPS client that does not ask for acme-tls/1 never gets a challenge
    // certificate; a validator's handshake with none under way gets no certificate.
    let validator = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            "127.0.0.1:5001",
            "-servername",
            "a.test",
        ])
        .args(["-alpn", "acme-tls/1"])
        .stdin(Stdio::null())
        .output();
    if let Ok(out) = validator {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("BEGIN CERTIFICATE"), "{text}");
    }
    s.signal("TERM");
    drop(s);
    // The second start: the stored certificate serves at once, no order made.
    let s = LINERATE.serve_config(None, &conf, &[]);
    assert_eq!(fetch(5001, &p.issuer).as_deref(), Ok("hello over ACME\n"));
    s.wait_stderr("the stored certificate serves");
    let a = acme_status(&s);
    assert_eq!(
        (a["issued"].as_u64(), a["failed"].as_u64()),
        (Some(0), Some(0)),
        "{a}"
    );
    assert!(!s.stderr_text().contains("ordering a certificate"));
}

/// Docs: docs/operations.md, "Automatic HTTPS".
#[test]
fn http_01_on_the_redirect_listener_gets_a_certificate_and_a_fallback_serves_until_it_comes() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let base = docroot();
    let Some(p) = pebble(base.path(), 3600) else {
        return;
    };
    let (conf, cert) = with_fallback(base.path(), "redirect-listen = \"127.0.0.1:5002\"\ntls-listen = \"127.0.0.1:5001\"\nacme-challenge = \"http-01\"\nhttp3 = \"on\"\n");
    let s = LINERATE.serve_config(None, &conf, &[]);
    // Until pebble's arrives the site's own certificate serves; then pebble's.
    let first = fetch(5001, &cert);
    let by_pebble = fetch_until(5001, &p.issuer, &s);
    assert_eq!(by_pebble, "hello over ACME\n");
    if let Ok(b) = first {
        assert_eq!(b, "hello over ACME\n");
    }
    assert_eq!(acme_status(&s)["issued"], 1);
    // HTTP/3 on the same port shows the ACME certificate too: a client that trusts
    // pebble's issuer alone completes its handshake for a.test and is answered.
    let udp: std::net::SocketAddr = "127.0.0.1:5001".parse().unwrap();
    let mut q = linerate_testkit::quic::Quic::connect_as(udp, &p.issuer, "a.test")
        .unwrap_or_else(|e| panic!("HTTP/3 with the ACME certificate: {e}"));
    assert_eq!(q.get("/f.txt"), Some(200));
    // No challenge outlives its order; every other path still redirects.
    let redirect: std::net::SocketAddr = "127.0.0.1:5002".parse().unwrap();
    let r = linerate_testkit::exchange(
        redirect,
        b"GET /f.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 301);
    let r = linerate_testkit::exchange(
        redirect,
        b"GET /.well-known/acme-challenge/anything HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
        false,
    );
    assert_eq!(r.status, 404);
}

/// Docs: docs/operations.md, "Automatic HTTPS".
#[test]
fn a_failed_validation_is_logged_and_counted_and_the_certificate_before_serves() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let base = docroot();
    let Some(_p) = pebble(base.path(), 3600) else {
        return;
    };
    // HTTP-01, but nothing answers on pebble's port 5002.
    let (conf, cert) = with_fallback(
        base.path(),
        "tls-listen = \"127.0.0.1:5001\"\nacme-challenge = \"http-01\"\n",
    );
    let s = LINERATE.serve_config(None, &conf, &[]);
    let log = s.wait_stderr("trying again in");
    assert!(log.contains("acme: a.test: validation:"), "{log}");
    let a = acme_status(&s);
    assert_eq!(a["failed"], 1, "{a}");
    assert!(
        a["certificates"][0]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("connection")),
        "{a}"
    );
    assert_eq!(fetch(5001, &cert).as_deref(), Ok("hello over ACME\n"));
}

/// A wildcard name cannot be had without DNS-01: the start says so and serves nothing.
#[test]
fn a_wildcard_name_with_acme_is_refused_with_the_reason() {
    let base = docroot();
    let www = base.path().join("www");
    put(&www, "f.txt", b"x");
    let conf = base.path().join("w.toml");
    fs::write(
        &conf,
        format!(
            "tls-listen = \"127.0.0.1:0\"\n[[site]]\nnames = [\"*.a.test\"]\nroot = \"{}\"\nacme = true\n",
            www.display()
        ),
    )
    .unwrap();
    let (code, out, err) = LINERATE.run(&["serve", "--config", conf.to_str().unwrap()]);
    assert_eq!(code, 64, "a usage error: {out}{err}");
    assert!(err.contains("*.a.test") && err.contains("DNS-01"), "{err}");
}

/// A directory whose certificate the ACME client refuses (here a linerate over TLS with
/// a self-signed one, and no `acme-directory-ca`): the log says so, not just "client
/// error (Connect)".
#[test]
fn a_directory_whose_certificate_is_refused_is_logged_with_the_reason() {
    let base = docroot();
    let (cert, key) = tls_files_for(base.path(), "dir", &["127.0.0.1"]);
    let directory = LINERATE.start(
        base.path(),
        &[
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let www = base.path().join("www");
    put(&www, "f.txt", b"x");
    let conf = base.path().join("c.toml");
    fs::write(
        &conf,
        format!(
            "access-log = \"off\"\nerror-log-level = \"info\"\ntls-listen = \"127.0.0.1:0\"\n\
             acme-directory = \"https://127.0.0.1:{}/dir\"\nacme-dir = \"{}\"\n\
             [[site]]\nnames = [\"a.test\"]\nroot = \"{}\"\nacme = true\n",
            directory.tls_addr().port(),
            base.path().join("acme").display(),
            www.display()
        ),
    )
    .unwrap();
    let s = LINERATE.serve_config(None, &conf, &[]);
    let log = s.wait_stderr("acme: a.test:");
    let line = log.lines().find(|l| l.contains("acme: a.test:")).unwrap();
    assert!(line.contains("certificate"), "{line}");
}

/// Docs: docs/operations.md, "Automatic HTTPS". Certificates of 20 s (pebble's last
/// second is not in them) are renewed at about 12 s while `bench http` makes a full
/// handshake per request: none fails.
#[test]
fn a_certificate_is_renewed_under_load_with_no_handshake_or_request_failed() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_base, p, _conf, s)) = issued(20) else {
        return;
    };
    let first = acme_status(&s)["certificates"][0]["not_after"].clone();
    let out = LINERATE
        .command()
        .args([
            "bench",
            "http",
            "https://127.0.0.1:5001/f.txt",
            "--insecure",
            "--close",
        ])
        .args(["-c", "4", "-d", "18", "--expect-status", "200", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["requests"].as_u64().unwrap() > 100, "{v}");
    let errors: u64 = v["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|e| e.as_u64().unwrap())
        .sum();
    assert_eq!(errors, 0, "{v}");
    assert_eq!(v["statuses"]["200"], v["requests"], "{v}");
    // A refused handshake would be a connect or read error (those in flight when the
    // run ends are neither).
    assert!(v["tls_handshakes"].as_u64().unwrap() >= v["requests"].as_u64().unwrap());
    let a = acme_status(&s);
    assert!(a["issued"].as_u64().unwrap() >= 2, "renewed: {a}");
    assert_eq!(a["failed"], 0, "{a}");
    assert_ne!(a["certificates"][0]["not_after"], first, "{a}");
    // The renewed one is pebble's, for the name.
    assert_eq!(fetch(5001, &p.issuer).as_deref(), Ok("hello over ACME\n"));
}

/// Docs: docs/operations.md, "Automatic HTTPS". A renewal that pebble refuses (the
/// challenge moved by a reload to HTTP-01, which nothing answers on its port) is
/// logged with pebble's problem and counted, and the certificate before serves on.
#[test]
fn a_refused_renewal_leaves_the_certificate_before_serving() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_base, p, conf, s)) = issued(20) else {
        return;
    };
    let text = fs::read_to_string(&conf)
        .unwrap()
        .replace("tls-listen", "acme-challenge = \"http-01\"\ntls-listen");
    fs::write(&conf, text).unwrap();
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    // The renewal is due at about 12 s (pebble makes the life 19 s).
    let log = s.wait_stderr_for("trying again in", Duration::from_secs(40));
    assert!(
        log.contains("acme: a.test: validation:")
            && log.contains("(the certificate before serves on)"),
        "{log}"
    );
    // One refusal counted. pebble may hand a renewal the authorization of the last
    // order, still valid, so it needs no challenge (seen here: the renewal at 12 s
    // issued without one, PEBBLE_AUTHZREUSE=0 notwithstanding, and the next, at 25 s,
    // was refused): the issued count is 1 or 2.
    let a = acme_status(&s);
    assert_eq!(a["failed"].as_u64(), Some(1), "{a}\n{}", s.stderr_text());
    assert!(
        matches!(a["issued"].as_u64(), Some(1 | 2)),
        "{a}\n{}",
        s.stderr_text()
    );
    assert_eq!(fetch(5001, &p.issuer).as_deref(), Ok("hello over ACME\n"));
}

/// Docs: docs/operations.md, "Automatic HTTPS". pebble 2.10 (from the Go module proxy:
/// Debian's 2.4 has no ACME Renewal Information) suggests a window at two thirds of the
/// lifetime; told through its management API that the certificate must be renewed now,
/// a restart asks again and renews at once, naming the certificate it replaces.
#[test]
fn renewal_information_decides_when_a_certificate_is_renewed() {
    let bin = std::env::var("HOME").unwrap_or_default() + "/go/bin/pebble";
    if !Path::new(&bin).exists() {
        eprintln!("{bin} is missing (scripts/test installs it): ARI cannot be tried");
        return;
    }
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let base = docroot();
    let Some(p) = pebble_of(&bin, base.path(), 3600) else {
        return;
    };
    let conf = conf(base.path(), "tls-listen = \"127.0.0.1:5001\"\n", "");
    let s = LINERATE.serve_config(None, &conf, &[]);
    fetch_until(5001, &p.issuer, &s);
    let log = s.wait_stderr("renewal information says renew at");
    assert!(log.contains("renewal information says renew at"), "{log}");
    let a = acme_status(&s);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let next = a["certificates"][0]["next_attempt"].as_u64().unwrap();
    assert!(next > now + 600, "the window is far: {a}");
    let not_after = a["certificates"][0]["not_after"].clone();
    // The certificate must go now, says pebble.
    let chain = fs::read_to_string(base.path().join("acme/a.test/fullchain.pem")).unwrap();
    let leaf = &chain[..chain.find("-----END CERTIFICATE-----").unwrap() + 25];
    let at = |d: i64| {
        let t = std::time::SystemTime::now();
        let t = if d < 0 {
            t - Duration::from_secs(d.unsigned_abs())
        } else {
            t + Duration::from_secs(d as u64)
        };
        humantime::format_rfc3339_seconds(t).to_string()
    };
    // A window wholly past: any moment drawn in it is past, so the renewal is at once
    // (RFC 9773 §4.2). A window reaching into the future would make the draw, and the
    // test, a matter of chance.
    let window = format!(
        r#"{{"suggestedWindow":{{"start":"{}","end":"{}"}}}}"#,
        at(-120),
        at(-60)
    );
    let body = serde_json::json!({ "Certificate": leaf, "ARIResponse": window });
    let set = Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(base.path().join("pebble-ca.pem"))
        .args(["-X", "POST", "--data", &body.to_string()])
        .arg("https://127.0.0.1:15000/set-renewal-info/")
        .output()
        .unwrap();
    assert!(set.status.success(), "{set:?}");
    s.signal("TERM");
    drop(s);
    let s = LINERATE.serve_config(None, &conf, &[]);
    let until = Instant::now() + Duration::from_secs(30);
    while acme_status(&s)["issued"] != 1 {
        assert!(Instant::now() < until, "not renewed: {}", s.stderr_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    let a = acme_status(&s);
    assert_ne!(a["certificates"][0]["not_after"], not_after, "{a}");
    assert_eq!(fetch(5001, &p.issuer).as_deref(), Ok("hello over ACME\n"));
}

/// Docs: docs/operations.md, "Automatic HTTPS". A reload that adds a name to the site
/// orders a certificate for both at once; the one before serves meanwhile.
#[test]
fn a_reload_that_adds_a_name_orders_a_certificate_for_it() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some((_base, p, conf, s)) = issued(3600) else {
        return;
    };
    let text = fs::read_to_string(&conf)
        .unwrap()
        .replace("names = [\"a.test\"]", "names = [\"a.test\", \"b.test\"]");
    fs::write(&conf, text).unwrap();
    s.signal("HUP");
    s.wait_stderr("(generation 1)");
    let until = Instant::now() + Duration::from_secs(30);
    while acme_status(&s)["issued"] != 2 {
        assert!(Instant::now() < until, "not ordered: {}", s.stderr_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "--cacert"])
        .arg(&p.issuer)
        .args([
            "--resolve",
            "b.test:5001:127.0.0.1",
            "https://b.test:5001/f.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello over ACME\n",
        "{out:?}"
    );
    assert_eq!(fetch(5001, &p.issuer).as_deref(), Ok("hello over ACME\n"));
}
