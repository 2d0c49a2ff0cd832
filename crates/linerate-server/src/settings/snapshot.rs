//! The settings pinned as text: `serve`'s help for every key, the configuration the
//! defaults make, and the one a file setting every key (away from its default where it
//! has one) makes, compared with `snapshots/settings.txt`. A change to how keys are
//! declared that moves a word of `--help` or a field of the configuration fails here;
//! one meant to is written again with `LINERATE_WRITE_SNAPSHOT=1` and reviewed in the
//! diff.

use super::*;

/// Every key once, none at its default (the lists and blocks given too).
const EVERY_KEY: &str = r#"
root = "/srv/www"
listen = ["127.0.0.1:8081", "unix:/run/linerate.sock"]
unix-mode = "0660"
unix-owner = "www-data:www-data"
tls-listen = "[::1]:8443"
redirect-listen = ":8082"
proxy-protocol = "127.0.0.1:8081"
trusted-proxies = ["10.0.0.0/8", "::1"]
forwarded-header = "forwarded"
acme-directory = "https://acme.test/dir"
acme-directory-ca = "/etc/linerate/acme-ca.pem"
acme-email = "ops@example.com"
acme-dir = "/var/lib/linerate/acme2"
acme-challenge = "http-01"
tls-cert = "/etc/linerate/fullchain.pem"
tls-key = "/etc/linerate/privkey.pem"
tls-ticket-keys = "/etc/linerate/ticket.key"
kernel-tls = "auto"
workers = 3
user = "www-data"
pin = false
steer = "cpu"
transmit = "zerocopy"
driver = "epoll"
lowat = "32K"
small-file = "16K"
small-file-memory = "8M"
send-slice = "128K"
send-slice-min = "2M"
cork-min = "1M"
sndbuf = "512K"
disk-helpers = 2
read-ahead = "2M"
status-path = "/s"
health-path = "/h"
metrics-path = "/m"
metrics-allow = ["127.0.0.1/32"]
collapse = "8K"
open-file-cache = 500
max-request-line = "4K"
max-header-bytes = "8K"
max-header-fields = 50
idle-timeout = "61s"
header-timeout = "11s"
send-timeout = "62s"
min-send-rate = "2K"
body-timeout = "31s"
shutdown-timeout = "12s"
shutdown-delay = "3s"
http2 = "only"
http3 = "off"
http3-retry = "always"
http3-early-data = "on"
limit-requests-memory = "4M"
dotfiles = true
autoindex = true
index = ["index.htm", "default.htm"]
etag = "content"
precompressed = ["gzip"]
compress-cache = "/var/cache/linerate"
compress-cache-size = "64M"
access-log = "/var/log/linerate/access.log"
log-format = "combined"
error-log = "off"
error-log-level = "debug"

[[rule]]
path = "/assets/"
headers = { "X-Content-Type-Options" = "nosniff" }
expires = "365d"
limit-requests = { rate = "20/s", burst = 40, delay = 10, key = "user" }

[[site]]
names = ["a.example", "*.a.example"]
root = "/srv/a"
etag = "off"
allow = ["10.0.0.0/8"]
hsts = "1d"

[[site.rule]]
path = "/private/"
deny = ["all"]
"#;

fn snapshot() -> String {
    let mut out = String::new();
    let mut cmd = <Settings as clap::Args>::augment_args(clap::Command::new("serve"));
    out.push_str("== serve --help (the keys)\n");
    out.push_str(&cmd.render_long_help().to_string());
    out.push_str("\n== Config::new\n");
    out.push_str(&format!("{:#?}\n", Config::new(PathBuf::from("."))));
    out.push_str("\n== every key set\n");
    let mut cfg = Config::new(PathBuf::from("."));
    Settings::parse(EVERY_KEY).unwrap().apply(&mut cfg);
    out.push_str(&format!("{cfg:#?}\n"));
    out
}

#[test]
fn every_key_sets_its_field() {
    let mut keys: Vec<String> = EVERY_KEY
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = ").map(|(k, _)| k.to_string()))
        .collect();
    keys.sort();
    let mut want = Settings::keys();
    want.sort();
    assert_eq!(keys, want, "EVERY_KEY names every key once");
    // None at its default: each line alone changes the configuration.
    let defaults = format!("{:?}", Config::new(PathBuf::from(".")));
    for line in EVERY_KEY.lines().take_while(|l| !l.starts_with('[')) {
        if line.is_empty() {
            continue;
        }
        let mut cfg = Config::new(PathBuf::from("."));
        Settings::parse(line).unwrap().apply(&mut cfg);
        assert_ne!(format!("{cfg:?}"), defaults, "{line} changes nothing");
    }
}

#[test]
fn the_settings_are_the_snapshot() {
    crate::snapshot_test::check("settings.txt", &snapshot());
}
