//! HTTPS test material: self-signed certificates made on the spot (rcgen, ECDSA
//! P-256), and curl pointed at a server's TLS address with them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A self-signed certificate for `localhost` and 127.0.0.1 and its key, written as
/// `NAME.crt` and `NAME.key` (PEM) in `dir`; their paths.
pub fn tls_files(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    tls_files_for(dir, name, &["localhost", "127.0.0.1"])
}

/// [`tls_files`] for the host names `hosts`.
pub fn tls_files_for(dir: &Path, name: &str, hosts: &[&str]) -> (PathBuf, PathBuf) {
    let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let made = rcgen::generate_simple_self_signed(hosts).expect("rcgen makes a certificate");
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, made.cert.pem()).expect("writes the certificate");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("writes the key");
    (cert, key)
}

/// `curl -sS --cacert CERT ARGS... https://localhost:PORT/PATH` for each path, the name
/// resolved to `addr` (the certificate names `localhost`).
pub fn curl_tls(addr: SocketAddr, cert: &Path, args: &[&str], paths: &[&str]) -> Output {
    let port = addr.port();
    Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(cert)
        .arg("--resolve")
        .arg(format!("localhost:{port}:{}", addr.ip()))
        .args(args)
        .args(paths.iter().map(|p| format!("https://localhost:{port}{p}")))
        .output()
        .expect("curl runs")
}

/// A self-signed RSA-2048 certificate for `localhost` and 127.0.0.1 made by `openssl`,
/// written as `NAME.crt` and `NAME.key` in `dir`; the key in PKCS#1 form (`BEGIN RSA
/// PRIVATE KEY`) when `pkcs1`, PKCS#8 otherwise. `None` when `openssl` is missing.
pub fn rsa_tls_files(dir: &Path, name: &str, pkcs1: bool) -> Option<(PathBuf, PathBuf)> {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .ok()?;
    assert!(
        made.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    if pkcs1 {
        let out = Command::new("openssl")
            .args(["rsa", "-traditional", "-in"])
            .arg(&key)
            .output()
            .expect("openssl rsa runs");
        assert!(out.status.success(), "openssl rsa -traditional");
        std::fs::write(&key, &out.stdout).expect("writes the key");
    }
    Some((cert, key))
}

/// Two sites, each with a certificate of its own, in a configuration file written in
/// `dir` (`sites.toml`): `a.test` (and `a_names` more) served from `a_root`, `b.test`
/// from `b_root` and the default; both on `127.0.0.1:0` in clear and over TLS, with
/// `extra` server-wide lines first. The file, and the two certificates.
pub fn two_sites(
    dir: &Path,
    (a_root, a_names): (&Path, &[&str]),
    b_root: &Path,
    extra: &str,
) -> (PathBuf, PathBuf, PathBuf) {
    let a_hosts = [&["a.test"][..], a_names].concat();
    let (a_cert, a_key) = tls_files_for(dir, "a", &a_hosts);
    let (b_cert, b_key) = tls_files_for(dir, "b", &["b.test"]);
    let names: Vec<String> = a_hosts.iter().map(|n| format!("{n:?}")).collect();
    let conf = dir.join("sites.toml");
    std::fs::write(
        &conf,
        format!(
            "listen = \"127.0.0.1:0\"\ntls-listen = \"127.0.0.1:0\"\n{extra}\
             [[site]]\nnames = [{}]\nroot = {a_root:?}\ntls-cert = {a_cert:?}\ntls-key = {a_key:?}\n\
             [[site]]\nnames = [\"b.test\"]\nroot = {b_root:?}\ndefault = true\ntls-cert = {b_cert:?}\ntls-key = {b_key:?}\n",
            names.join(", "),
        ),
    )
    .expect("writes the configuration");
    (conf, a_cert, b_cert)
}
