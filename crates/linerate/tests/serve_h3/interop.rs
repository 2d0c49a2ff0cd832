//! The QUIC interop runner's cases that fit one host, each against ngtcp2's client
//! (docs/http.md Q5): resumption, 0-RTT (refused by default; with
//! `--http3-early-data on`, GET and HEAD answered from it and anything else 425),
//! ChaCha20-Poly1305, a key update, a migration to a new local port, a NAT's rebinding
//! of the client's address and port (in network namespaces), ECN.

use super::*;

/// Two workers with HTTP/3 (and `extra`), a status page at `/.s`, `/a.txt` in the
/// root, and ngtcp2's client keeping its session and the transport parameters in files
/// from one connection to the next (so it resumes, and sends early data when the
/// session allows it).
struct Resuming {
    client: &'static str,
    server: Server,
    log: std::path::PathBuf,
    files: [String; 2],
    _dirs: [tempfile::TempDir; 2],
}

impl Resuming {
    fn serve(body: &[u8], extra: &[&str]) -> Option<Resuming> {
        let client = gtlsclient()?;
        let root = docroot();
        put(root.path(), "a.txt", body);
        let certs = docroot();
        let log = certs.path().join("access.log");
        let extra = [&["--status-path", "/.s"][..], extra].concat();
        let server = serve_two_workers(root.path(), certs.path(), &log, &extra);
        let at = |name: &str| certs.path().join(name).display().to_string();
        let files = [
            format!("--session-file={}", at("session")),
            format!("--tp-file={}", at("tp")),
        ];
        Some(Resuming {
            client,
            server,
            log,
            files,
            _dirs: [root, certs],
        })
    }

    /// `/a.txt` by `method` on a new connection: the body.
    fn fetch(&self, method: &str) -> Vec<u8> {
        let got = docroot();
        let m = format!("--http-method={method}");
        let extra = ["--quiet", &self.files[0], &self.files[1], &m];
        ngtcp2(self.client, &self.server, &["/a.txt"], got.path(), &extra);
        std::fs::read(got.path().join("a.txt")).unwrap_or_default()
    }
}

/// A session resumes on either of two workers (the HTTPS listeners' ticketer is
/// QUIC's too), one connection after another and after a reload, each counted; with
/// early data off the client sends nothing in 0-RTT. Rules: docs/http.md Q5.
#[test]
fn resumption_on_either_worker_and_after_a_reload_no_early_data_by_default() {
    let Some(r) = Resuming::serve(b"resumed", &[]) else {
        return;
    };
    for i in 0..4 {
        if i == 2 {
            r.server.signal("HUP");
            r.server.wait_stderr("SIGHUP: reloaded");
        }
        assert_eq!(r.fetch("GET"), b"resumed");
    }
    let s = status_at(&r.server, "/.s");
    assert_eq!(s["http3"]["connections"], 4, "{s}");
    assert_eq!(s["http3"]["resumed"], 3, "{s}");
    assert_eq!(s["http3"]["early_requests"], 0, "{s}");
}

/// `--http3-early-data on`: a resumed client's requests in 0-RTT are taken, GET
/// answered from it as ever, POST 425 Too Early (RFC 8470), each counted and logged.
/// Rules: docs/http.md Q5.
#[test]
fn early_data_on_answers_get_from_0rtt_and_post_425() {
    let Some(r) = Resuming::serve(b"early", &["--http3-early-data", "on"]) else {
        return;
    };
    // The first connection makes the session; the next two resume it and send their
    // request in 0-RTT.
    assert_eq!(r.fetch("GET"), b"early");
    r.fetch("POST");
    assert_eq!(r.fetch("GET"), b"early");
    let s = status_at(&r.server, "/.s");
    assert_eq!(s["http3"]["resumed"], 2, "{s}");
    assert_eq!(s["http3"]["early_requests"], 2, "{s}");
    let Resuming { server, log, .. } = r;
    drop(server);
    let lines = log_lines(&log);
    let line = |l: &str| lines.iter().filter(|x| x.contains(l)).count();
    assert_eq!(line("\"POST /a.txt HTTP/3.0\" 425 "), 1, "{lines:#?}");
    assert_eq!(line("\"GET /a.txt HTTP/3.0\" 200 5"), 2, "{lines:#?}");
}

/// A server with HTTP/3 on (and `extra`) whose root holds one file of a pattern, and
/// ngtcp2's client to fetch it.
struct OneFile {
    client: &'static str,
    server: Server,
    name: &'static str,
    data: Vec<u8>,
    _dirs: [tempfile::TempDir; 2],
}

impl OneFile {
    /// `name`, `len` bytes; None (skipped) without ngtcp2's client.
    fn serve(name: &'static str, len: usize, extra: &[&str]) -> Option<OneFile> {
        let client = gtlsclient()?;
        let root = docroot();
        let data = pattern(len, len as u64);
        put(root.path(), name, &data);
        let certs = docroot();
        let args = [&["--http3", "on"][..], extra].concat();
        let (server, _) = LINERATE.start_tls(root.path(), certs.path(), &args);
        Some(OneFile {
            client,
            server,
            name,
            data,
            _dirs: [root, certs],
        })
    }

    /// The file fetched over one connection with `extra` flags, byte for byte; what the
    /// client said of the connection.
    fn fetch(&self, extra: &[&str]) -> String {
        let got = docroot();
        let path = format!("/{}", self.name);
        let said = ngtcp2(self.client, &self.server, &[&path], got.path(), extra);
        let body = std::fs::read(got.path().join(self.name)).unwrap();
        assert_bytes_eq(&body, &self.data, &format!("{extra:?}"));
        said
    }
}

/// The client offers ChaCha20-Poly1305 only: the handshake takes it, the body is the
/// file's. Rules: docs/http.md Q5.
#[test]
fn chacha20_only() {
    let Some(one) = OneFile::serve("c.bin", 256 << 10, &[]) else {
        return;
    };
    let ciphers = "--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+CHACHA20-POLY1305";
    let said = one.fetch(&[ciphers]);
    assert!(said.contains("CHACHA20"), "{said}");
}

/// The client offers AES-256-GCM before AES-128-GCM: the server's order decides, as
/// over HTTPS, and takes AES-128-GCM (the cheaper per byte). Rules: docs/http.md Q5.
#[test]
fn the_server_picks_aes_128_gcm_over_the_clients_order() {
    let Some(one) = OneFile::serve("a.bin", 64 << 10, &[]) else {
        return;
    };
    let ciphers = "--ciphers=NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM";
    let said = one.fetch(&[ciphers]);
    let negotiated = said.lines().find(|l| l.contains("Negotiated cipher suite"));
    assert!(
        negotiated.is_some_and(|l| l.contains("AES-128-GCM")),
        "{negotiated:?}"
    );
}

/// The client updates its keys while a 3 MiB body comes: the server follows (RFC 9001
/// §6) and the body arrives whole. Rules: docs/http.md Q5.
#[test]
fn a_key_update_during_a_download() {
    let Some(one) = OneFile::serve("k.bin", 3 << 20, &[]) else {
        return;
    };
    let said = one.fetch(&["--key-update=1ms"]);
    assert!(said.contains("Initiate key update"), "{said}");
}

/// The client moves to a new socket (a new port) during a 3 MiB download and checks
/// the new path (RFC 9000 §9): the server answers its PATH_CHALLENGE, the connection
/// goes on at the new address, one connection, the body whole. (ngtcp2's NAT rebinding,
/// `--nat-rebinding`, which ignores what still comes to the old port, stalls mid-body
/// with any server that keeps RFC 9000 §9.3: the client's only packets from the new
/// port are then NEW_CONNECTION_ID probes, and a server moves only on a non-probing
/// packet; a NAT in the middle is the runner's rebind-port, not this.) Rules:
/// docs/http.md Q5.
#[test]
fn the_connection_follows_the_client_to_a_new_port() {
    let status_path = ["--status-path", "/.s"];
    let Some(one) = OneFile::serve("m.bin", 3 << 20, &status_path) else {
        return;
    };
    let said = one.fetch(&["--change-local-addr=1ms"]);
    assert!(said.contains("Local address is now"), "{said}");
    let answered = said
        .lines()
        .any(|l| l.contains(" frm rx ") && l.contains("PATH_RESPONSE"));
    assert!(answered, "no PATH_RESPONSE from the server");
    let s = status_at(&one.server, "/.s");
    assert_eq!(s["http3"]["connections"], 1, "{s}");
}

/// ECN (RFC 9000 §13.4): the server reads the codepoints its datagrams came with and
/// reports them back in its ACKs, so the client finds the path ECN-capable (its
/// validation passes only if the counts it sees match what it marked). Rules:
/// docs/http.md Q5.
#[test]
fn ecn_counts_go_back_to_the_client() {
    let Some(one) = OneFile::serve("e.bin", 256 << 10, &[]) else {
        return;
    };
    let said = one.fetch(&[]);
    assert!(said.contains("path is ECN capable"), "{said}");
}

/// Two network namespaces joined by a veth pair, the server's at 198.18.0.1 and the
/// client's at 198.18.0.2 with 198.18.0.3 beside it, removed when dropped; None where
/// they cannot be made (not root, no `ip` or `nft`).
struct Pair {
    server: String,
    client: String,
}

impl Pair {
    fn new() -> Option<Pair> {
        if !linerate_testkit::is_root() || !installed("ip") || !installed("nft") {
            eprintln!("skipped: network namespaces need root, ip and nft");
            return None;
        }
        let id = std::process::id();
        let pair = Pair {
            server: format!("lrq{id}s"),
            client: format!("lrq{id}c"),
        };
        let sh = |cmd: &str| {
            let ok = Command::new("sh")
                .args(["-c", cmd])
                .status()
                .unwrap()
                .success();
            assert!(ok, "{cmd}");
        };
        let (s, c) = (&pair.server, &pair.client);
        sh(&format!("ip netns add {s} && ip netns add {c}"));
        sh(&format!("ip link add {s}v type veth peer name {c}v"));
        sh(&format!(
            "ip link set {s}v netns {s} && ip link set {c}v netns {c}"
        ));
        sh(&format!(
            "ip -n {s} addr add 198.18.0.1/24 dev {s}v && ip -n {s} link set {s}v up && \
             ip -n {s} link set lo up && ip -n {c} addr add 198.18.0.2/24 dev {c}v && \
             ip -n {c} addr add 198.18.0.3/24 dev {c}v && ip -n {c} link set {c}v up && \
             ip -n {c} link set lo up"
        ));
        Some(pair)
    }

    /// From now on the client's datagrams to `port` leave from `to` (its address, and
    /// its port if given) and the answers to `to` come back to where it sent from, as a
    /// NAT that has rebound its mapping: the client does not know (stateless rewrites in
    /// its namespace, before connection tracking), and what the server still sends to
    /// the old mapping is lost.
    fn rebind(&self, port: u16, from_port: u16, to: (&str, Option<u16>)) {
        let (addr, new_port) = to;
        let (out_port, back_port) = match new_port {
            Some(p) => (
                format!(" udp sport set {p}"),
                format!(" udp dport set {from_port}"),
            ),
            None => (String::new(), String::new()),
        };
        let back_match = new_port.map_or(String::new(), |p| format!(" udp dport {p}"));
        let rules = format!(
            "table ip rebind {{\n\
             chain out {{ type filter hook output priority raw; ip daddr 198.18.0.1 udp dport {port} \
             udp sport {from_port} ip saddr set {addr}{out_port} notrack; }}\n\
             chain back {{ type filter hook prerouting priority raw; \
             ip saddr 198.18.0.1 udp sport {port} ip daddr 198.18.0.2 udp dport {from_port} drop; \
             ip saddr 198.18.0.1 udp sport {port}{back_match} ip daddr {addr} \
             ip daddr set 198.18.0.2{back_port} notrack; }}\n}}\n"
        );
        let mut nft = Command::new("ip")
            .args(["netns", "exec", &self.client, "nft", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        nft.stdin
            .take()
            .unwrap()
            .write_all(rules.as_bytes())
            .unwrap();
        assert!(nft.wait().unwrap().success(), "{rules}");
    }

    /// The local port of the client's UDP socket (the one client running).
    fn client_port(&self) -> Option<u16> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.client, "ss", "-uanH"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // Its socket may be connected to the server or not: the one bound on the
        // client's address.
        text.lines().find_map(|l| {
            let local = l.split_whitespace().nth(3)?;
            local.strip_prefix("198.18.0.2:")?.parse().ok()
        })
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.server, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// The QUIC interop runner's rebind-addr and rebind-port, through a NAT in network
/// namespaces: mid-download the client's datagrams start to come from another address
/// (and port), the client unaware; the server sees the new address on non-probing
/// packets, checks it (PATH_CHALLENGE, which the client answers without knowing why)
/// and moves the connection there (RFC 9000 §9.3): the body arrives whole, on one
/// connection. Rules: docs/http.md Q5.
#[test]
fn the_connection_follows_a_nat_rebinding_of_address_and_port() {
    let Some(client) = gtlsclient() else {
        return;
    };
    // The client's probes after a rebind go unanswered in about one run in five here
    // (at 01c2898 too): each case is tried up to three times, every failed try said.
    for to_port in [None, Some(40_000)] {
        let mut tries = Vec::new();
        for _ in 0..3 {
            match rebind_once(client, to_port) {
                None => return,
                Some(Ok(())) => break,
                Some(Err(e)) => {
                    eprintln!("rebinding to {to_port:?}, try {}: {e}", tries.len() + 1);
                    tries.push(e);
                }
            }
        }
        assert!(
            tries.len() < 3,
            "{to_port:?}: three tries failed: {tries:#?}"
        );
    }
}

/// One download through a NAT that rebinds to `to_port` (and a new address) in its
/// middle: why the server did not follow, if it did not; none when namespaces cannot
/// be made.
fn rebind_once(client: &str, to_port: Option<u16>) -> Option<Result<(), String>> {
    let pair = Pair::new()?;
    let root = docroot();
    // Large enough that the rebind (a few commands) comes well before its end.
    let data = pattern(64 << 20, 29);
    put(root.path(), "n.bin", &data);
    let certs = docroot();
    let (cert, key) = linerate_testkit::tls_files(certs.path(), "server");
    let wrapper = ["ip", "netns", "exec", pair.server.as_str()];
    let args = h3_on("198.18.0.1:4433", &cert, &key);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _server = LINERATE.start_under(&wrapper, root.path(), &args);
    let got = docroot();
    let mut fetch = Command::new("ip")
        .args(["netns", "exec", &pair.client, client])
        .args(["--exit-on-all-streams-close", "--timeout=5s"])
        .args(["--no-quic-dump", "--no-http-dump"])
        .arg(format!("--download={}", got.path().display()))
        .args(["198.18.0.1", "4433", "https://localhost:4433/n.bin"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its account is read as it comes: a full pipe would hold the client (and the
    // download) until the end.
    let mut err = fetch.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut said = String::new();
        std::io::Read::read_to_string(&mut err, &mut said).map(|_| said)
    });
    // Rebind once the download is under way.
    let mut from = None;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut started = false;
    while std::time::Instant::now() < until {
        from = pair.client_port();
        let file = got.path().join("n.bin");
        started = std::fs::metadata(&file).is_ok_and(|m| m.len() > 1 << 20);
        if from.is_some() && started {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(started, "{to_port:?}: the download did not start in 10 s");
    let from = from.expect("the client's port");
    pair.rebind(4433, from, ("198.18.0.3", to_port));
    let status = fetch.wait().unwrap();
    let said = reader.join().unwrap().unwrap_or_default();
    if !status.success() {
        return Some(Err(format!("{to_port:?}: the client ended with {status}")));
    }
    let challenged = said
        .lines()
        .any(|l| l.contains(" frm rx ") && l.contains("PATH_CHALLENGE"));
    if !challenged {
        let end: Vec<&str> = said
            .lines()
            .rev()
            .filter(|l| l.contains(" rx "))
            .take(6)
            .collect();
        return Some(Err(format!(
            "{to_port:?}: the server never checked the new address; the client's last receives:\n{}",
            end.join("\n")
        )));
    }
    let body = std::fs::read(got.path().join("n.bin")).unwrap();
    assert_bytes_eq(&body, &data, &format!("rebound to {to_port:?}"));
    Some(Ok(()))
}
