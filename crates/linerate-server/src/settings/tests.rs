//! The settings' own tests: values, flags and keys, blocks, the merge.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    s: Settings,
}

fn flags(args: &[&str]) -> Result<Settings, String> {
    Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
        .map(|c| c.s)
        .map_err(|e| e.to_string())
}

#[test]
fn a_flag_and_a_key_take_the_same_values_and_refuse_the_same_ones() {
    for (key, good, bad, why) in [
        ("small-file", "32K", "17M", "must be 0 to 16M"),
        ("max-header-bytes", "8K", "2M", "must be 1 byte to 1M"),
        ("workers", "2", "0", "must be 1 to 1024"),
        ("idle-timeout", "1.5", "0", "more than 0"),
        ("idle-timeout", "30s", "2d", "not a duration"),
        ("transmit", "splice", "mmap", "mmap"),
        (
            "driver",
            "uring",
            "io_uring",
            "expected auto, epoll or uring",
        ),
        ("kernel-tls", "auto", "yes", "expected off, auto or on"),
        ("http2", "only", "h2c", "expected on, off or only"),
        ("steer", "cpu", "rss", "expected off, auto or cpu"),
        (
            "log-format",
            "json",
            "xml",
            "give clf, combined, json or a line",
        ),
        (
            "error-log-level",
            "info",
            "loud",
            "give error, warn, info or debug",
        ),
        ("status-path", "/s", "s", "must start with /"),
        ("unix-mode", "0660", "0999", "is not a mode"),
        (
            "precompressed",
            "gzip,br",
            "gzip,deflate",
            "'deflate' is not a coding",
        ),
    ] {
        let flag = format!("--{key}");
        let from_flag = flags(&[&flag, good]).unwrap();
        let from_file = Settings::parse(&format!("{key} = \"{good}\"\n")).unwrap();
        assert_eq!(from_flag, from_file, "{key} = {good}");
        let e = flags(&[&flag, bad]).unwrap_err();
        assert!(e.contains(why) && e.contains(&flag), "{key}: {e}");
        let e = Settings::parse(&format!("{key} = \"{bad}\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("line 1: {key}: ")) && e.contains(why),
            "{key}: {e}"
        );
    }
    // Numbers in the file where they make sense.
    let s = Settings::parse("small-file = 32768\nidle-timeout = 2\nworkers = 3\n").unwrap();
    assert_eq!(s.small_file, Some(Bytes(32768)));
    assert_eq!(s.idle_timeout, Some(Seconds(Duration::from_secs(2))));
    assert_eq!(s.workers, Some(Count(3)));
    let e = Settings::parse("small-file = 1.5\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("whole number"), "{e}");
    // http2 was a boolean before `only`: a file may still say true or false.
    use linerate_http::request::Http2 as H;
    for (text, want) in [("true", H::On), ("false", H::Off), ("\"off\"", H::Off)] {
        let s = Settings::parse(&format!("http2 = {text}\n")).unwrap();
        assert_eq!(s.http2, Some(Http2(want)), "{text}");
    }
}

#[test]
fn metrics_clients_are_networks_addresses_or_unix() {
    let s = Settings::parse("metrics-allow = [\"127.0.0.0/8\", \"::1\", \"unix:\"]\n").unwrap();
    let [net, one, unix] = s.metrics_allow[..] else {
        panic!("{:?}", s.metrics_allow)
    };
    let ip = |t: &str| Some(t.parse::<std::net::IpAddr>().unwrap());
    assert!(net.admits(ip("127.1.2.3")) && net.admits(ip("::ffff:127.0.0.1")));
    assert!(!net.admits(ip("10.0.0.1")) && !net.admits(None));
    assert!(one.admits(ip("::1")) && !one.admits(ip("::2")));
    assert!(unix.admits(None) && !unix.admits(ip("127.0.0.1")));
    assert_eq!(unix.to_string(), "unix:");
    let e = Settings::parse("metrics-allow = [\"unix\"]\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'unix' is not an address, a network, unix: or all"),
        "{e}"
    );
}

#[test]
fn listen_is_one_address_or_a_list() {
    let one = Settings::parse("listen = \"127.0.0.1:80\"\n").unwrap();
    let many = Settings::parse("listen = [\"127.0.0.1:80\", \"[::1]:81\"]\n").unwrap();
    assert_eq!(one.listen.len(), 1);
    assert_eq!(many.listen.len(), 2);
    for (text, why) in [
        ("listen = 80\n", "give an address"),
        ("listen = []\n", "at least one"),
        ("listen = [\"x\"]\n", "'x' is not an address"),
        ("listen = \"70000\"\n", "a port is 0 to 65535"),
        ("listen = \"unix:run/l.sock\"\n", "unix:/ABSOLUTE/PATH"),
        ("listen = \"unix:\"\n", "unix:/ABSOLUTE/PATH"),
    ] {
        let e = Settings::parse(text).unwrap_err().to_string();
        assert!(e.starts_with("line 1: listen: ") && e.contains(why), "{e}");
    }
    let f = flags(&["--listen", "127.0.0.1:1", "--listen", "[::1]:2"]).unwrap();
    assert_eq!(f.listen.len(), 2);
    // The forms an operator writes.
    let all = |t: &str| -> Vec<Endpoint> { t.parse::<ListenAddr>().unwrap().addrs };
    let any4 = |p: u16| Endpoint::Ip(SocketAddr::from(([0, 0, 0, 0], p)));
    assert_eq!(all("8080"), [any4(8080)]);
    assert_eq!(all(":8080"), [any4(8080)]);
    assert_eq!(
        all("[::]:8080"),
        [Endpoint::Ip("[::]:8080".parse::<SocketAddr>().unwrap())]
    );
    assert!(all("localhost:8080")
        .iter()
        .all(|a| matches!(a, Endpoint::Ip(a) if a.ip().is_loopback() && a.port() == 8080)));
    assert_eq!(
        all("unix:/run/linerate.sock"),
        [Endpoint::Unix("/run/linerate.sock".into())]
    );
    let long = format!("unix:/{}", "x".repeat(107));
    assert!(long
        .parse::<ListenAddr>()
        .unwrap_err()
        .to_string()
        .contains("at most 107 bytes"));
    // A merge keeps the words as written.
    let m = flags(&["--listen", ":81"])
        .unwrap()
        .over(&Settings::default());
    assert_eq!(m.listen[0].to_string(), ":81");
}

#[test]
fn a_merge_keeps_what_a_file_could_not_hold() {
    use std::os::unix::ffi::OsStrExt;
    let flags = Settings {
        root: Some(PathBuf::from(std::ffi::OsStr::from_bytes(b"/srv/\xff"))),
        ..Settings::default()
    };
    let file = Settings::parse("workers = 2\nroot = \"/www\"\n").unwrap();
    let m = flags.over(&file);
    assert_eq!(m.root, flags.root, "a non-UTF-8 DIR is kept");
    assert_eq!(m.workers, Some(Count(2)), "and the file's settings too");
}

#[test]
fn unknown_keys_are_refused_with_their_line() {
    let e = Settings::parse("workers = 2\nwrokers = 2\n")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("line 2: ") && e.contains("wrokers"), "{e}");
}

#[test]
fn flags_win_over_the_file_key_by_key() {
    let file = Settings::parse(
        "workers = 2\nsmall-file = \"8K\"\nlisten = \"127.0.0.1:1\"\nautoindex = true\n",
    )
    .unwrap();
    let f = flags(&["--small-file", "4K", "--autoindex=false"]).unwrap();
    let m = f.over(&file);
    assert_eq!(m.workers, Some(Count(2)), "from the file");
    assert_eq!(m.small_file, Some(Bytes(4096)), "the flag wins");
    assert_eq!(m.autoindex, Some(false), "--autoindex=false wins");
    assert_eq!(m.listen, file.listen);
    let mut cfg = Config::new(PathBuf::from("/srv"));
    m.apply(&mut cfg);
    assert_eq!(
        (cfg.workers, cfg.small_file, cfg.autoindex),
        (2, 4096, false)
    );
    // A bare boolean flag means true, and does not swallow the next word.
    let f = flags(&["--dotfiles", "--pin=false"]).unwrap();
    assert_eq!((f.dotfiles, f.pin), (Some(true), Some(false)));
}

#[test]
fn every_flag_is_a_key_and_every_key_a_flag() {
    let keys = Settings::keys();
    assert!(keys.len() >= 30, "{keys:?}");
    // Each key is accepted by the file (with a value of its type) ...
    let sample = |k: &str| match k {
        "root" => "\"/srv\"",
        "listen" | "tls-listen" | "redirect-listen" | "proxy-protocol" => "\"127.0.0.1:80\"",
        "tls-cert" | "tls-key" | "tls-ticket-keys" | "acme-directory-ca" => "\"/etc/ssl/x.pem\"",
        "acme-directory" => "\"https://acme.test/dir\"",
        "acme-email" => "\"ops@example.com\"",
        "acme-dir" => "\"/var/lib/linerate/acme\"",
        "acme-challenge" => "\"http-01\"",
        "compress-cache" => "\"/var/cache/linerate\"",
        "pin" | "dotfiles" | "autoindex" => "true",
        "http2" => "\"only\"",
        "http3" => "\"on\"",
        "http3-retry" => "\"always\"",
        "http3-early-data" => "\"on\"",
        "transmit" => "\"copy\"",
        "driver" => "\"epoll\"",
        "etag" => "\"content\"",
        "kernel-tls" => "\"auto\"",
        "steer" => "\"cpu\"",
        "user" | "unix-owner" => "\"nobody\"",
        "unix-mode" => "\"0660\"",
        "precompressed" => "[\"gzip\"]",
        "status-path" | "metrics-path" | "health-path" => "\"/s\"",
        "metrics-allow" | "trusted-proxies" => "[\"127.0.0.1/32\"]",
        "index" => "[\"index.htm\"]",
        "forwarded-header" => "\"forwarded\"",
        "access-log" => "\"off\"",
        "error-log" => "\"off\"",
        "log-format" => "\"json\"",
        "error-log-level" => "\"info\"",
        "limit-requests-memory" => "\"1M\"",
        k if k.ends_with("timeout") => "5",
        _ => "1",
    };
    for k in &keys {
        let text = format!("{k} = {}\n", sample(k));
        assert!(
            Settings::parse(&text).is_ok(),
            "{text}: {:?}",
            Settings::parse(&text)
        );
    }
    // ... and every field of the file is a flag (root is the positional DIR).
    let full: Settings = Settings::parse(
        &keys
            .iter()
            .map(|k| format!("{k} = {}\n", sample(k)))
            .collect::<String>(),
    )
    .unwrap();
    let toml::Value::Table(t) = toml::Value::try_from(&full).unwrap() else {
        panic!("not a table")
    };
    let mut written: Vec<&String> = t.keys().collect();
    written.sort();
    let mut listed: Vec<&String> = keys.iter().collect();
    listed.sort();
    assert_eq!(written, listed);
}

#[test]
fn log_destinations_read_and_write_their_words_and_files() {
    for (text, log) in [
        ("off", AccessLog::Off),
        ("stdout", AccessLog::Stdout),
        (
            "/var/log/a.log",
            AccessLog::File(PathBuf::from("/var/log/a.log")),
        ),
    ] {
        assert_eq!(text.parse::<AccessLog>(), Ok(log.clone()));
        assert_eq!(log.to_string(), text);
    }
    assert_eq!("stderr".parse::<ErrorLog>(), Ok(ErrorLog::Stderr));
    assert_eq!(ErrorLog::Off.to_string(), "off");
    assert_eq!(
        "".parse::<AccessLog>(),
        Err(ValueError::kind("give stdout, off or a file"))
    );
    assert_eq!(
        "".parse::<ErrorLog>().unwrap_err().to_string(),
        "give stderr, off or a file"
    );
}

#[test]
fn a_blocks_keys_are_what_the_file_reads() {
    let rule = keys_of::<RuleSettings>();
    assert_eq!(rule.first(), Some(&"path"));
    assert!(
        rule.contains(&"redirect-code") && rule.contains(&"cors"),
        "{rule:?}"
    );
    let site = keys_of::<SiteSettings>();
    assert!(site.contains(&"names") && site.contains(&"rule") && !site.contains(&"rules"));
    // Each key named is one the file takes, and one it does not is refused.
    for k in site {
        let value = match *k {
            "names" => "[\"a.example\"]",
            "allow" | "deny" | "rule" => "[]",
            "default" | "acme" | "dotfiles" | "autoindex" | "security-headers" => "true",
            "etag" => "\"off\"",
            "precompressed" => "[\"gzip\"]",
            "hsts" => "\"1d\"",
            "access-log" => "\"off\"",
            "log-format" => "\"clf\"",
            "limit-requests" => "{ rate = \"20/s\", burst = 40 }",
            _ => "\"/x\"",
        };
        let root = if *k == "root" {
            ""
        } else {
            "root = \"/srv\"\n"
        };
        let named = if *k == "default" {
            ""
        } else {
            "default = true\n"
        };
        // The certificate's two keys go together.
        let pair = match *k {
            "tls-cert" => "tls-key = \"/k\"\n",
            "tls-key" => "tls-cert = \"/c\"\n",
            _ => "",
        };
        let text = format!("[[site]]\n{root}{named}{pair}{k} = {value}\n");
        assert!(
            Settings::parse(&text).is_ok(),
            "{text}: {:?}",
            Settings::parse(&text)
        );
    }
    let mut server = keys_of::<Settings>().to_vec();
    server.retain(|k| *k != "site" && *k != "rule");
    assert_eq!(server, Settings::keys());
}

#[test]
fn index_names_are_a_list_of_names_in_both() {
    let from_flag = flags(&["--index", "index.htm,default.htm"]).unwrap();
    let from_file = Settings::parse("index = [\"index.htm\", \"default.htm\"]\n").unwrap();
    assert_eq!(from_flag, from_file);
    assert_eq!(
        flags(&["--index", "a.htm", "--index", "b.htm"])
            .unwrap()
            .index
            .len(),
        2
    );
    for bad in ["a/b", "..", ""] {
        let flag = flags(&["--index", bad]).unwrap_err();
        let file = Settings::parse(&format!("index = [\"{bad}\"]\n"))
            .unwrap_err()
            .to_string();
        for e in [&flag, &file] {
            assert!(e.contains("a file's name, not a path"), "{bad:?}: {e}");
        }
    }
}

#[test]
fn a_refusal_says_its_file_line_block_and_key_as_fields() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.toml");
    std::fs::write(&path, "workers = 2\nwrokers = 2\n").unwrap();
    let e = Settings::load(&path).unwrap_err();
    assert_eq!((e.file.as_deref(), e.line), (Some(path.as_path()), Some(2)));
    assert_eq!(e.key.as_deref(), Some("wrokers"));
    let Reason::UnknownKey { typed, nearest, .. } = &e.reason else {
        panic!("{e:?}")
    };
    assert_eq!(
        (typed.as_str(), nearest.as_deref()),
        ("wrokers", Some("workers"))
    );
    assert!(e
        .to_string()
        .ends_with("line 2: unknown key `wrokers`; did you mean `workers`?"));

    let text = "[[site]]\nroot = \"/srv\"\ndefault = true\n\n[[site.rule]]\npath = \"/x/\"\nheaders = { \"a b\" = \"c\" }\n";
    let e = Settings::parse(text).unwrap_err();
    assert_eq!(e.block.as_deref(), Some("site #1 (/srv): rule /x/"));
    assert_eq!(e.key.as_deref(), Some("headers"));
    assert_eq!(
        e.reason,
        Reason::Value(ValueError::is("a b", "not a field name"))
    );
    assert_eq!(
        e.to_string(),
        "site #1 (/srv): rule /x/: headers: 'a b' is not a field name"
    );
}
