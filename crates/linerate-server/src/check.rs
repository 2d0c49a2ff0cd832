//! `linerate serve --check` (nginx's `-t`): reads and judges everything a start would
//! (each site's root, the certificates and keys, the addresses to listen on, the log
//! files, the compression cache's directory, the user to become, the event loop) and says what would be served, with
//! absolute roots, or every problem it found, one line each. Roots and logs are judged
//! as the server will open them: as `--user` when root starts it. It serves nothing and
//! keeps nothing: an address is tried as a start tries it (a socket bound alone, to
//! see that no one holds the port) and let go at once; a log file is opened only if it
//! exists (a start would create it: here its directory is judged instead). A port in
//! use is a note, not a problem: the check cannot tell the server it is run to reload
//! (which keeps its sockets) from another program (which would fail a start).

use std::path::Path;

use crate::config::Config;
use crate::config::Endpoint;
use crate::logs::ErrorLog;

/// What the check found.
#[derive(Debug, Default)]
pub struct Checked {
    /// What a start would serve, one line each: the sites with their absolute roots,
    /// the addresses and what each serves, the event loop.
    pub served: Vec<String>,
    /// Every problem, one line each; none if a start would succeed.
    pub problems: Vec<String>,
    /// What may stop a start but not a reload (a port in use).
    pub notes: Vec<String>,
}

/// Judges `cfg` as a start would (see the module's text).
pub fn check(cfg: &Config) -> Checked {
    let mut c = Checked::default();
    for s in cfg.sites() {
        let root = absolute(&s.root);
        let names = if s.names.is_empty() {
            "every Host".to_string()
        } else {
            s.names.join(" ")
        };
        let default = if s.default && !cfg.sites.is_empty() {
            " (the default site)"
        } else {
            ""
        };
        c.served.push(format!("site {names}{default}: root {root}"));
    }
    let (problems, notes) = as_the_user(cfg);
    c.problems.extend(problems);
    c.notes.extend(notes);
    if !cfg.tls_listen.is_empty() {
        if let Err(e) = crate::tls::load(cfg) {
            c.problems.push(format!("TLS: {e}"));
        }
    }
    let listeners = cfg
        .listen
        .iter()
        .map(|e| (e, "HTTP"))
        .chain(cfg.tls_listen.iter().map(|e| (e, "HTTPS")))
        .chain(cfg.redirect_listen.iter().map(|e| (e, "redirect to HTTPS")));
    for (e, what) in listeners {
        let proxy = if cfg.proxy_protocol.contains(e) {
            ", PROXY protocol"
        } else {
            ""
        };
        c.served.push(format!("listen {e}: {what}{proxy}"));
        match try_listen(e) {
            Ok(()) => {}
            Err(Listen::InUse) => c.notes.push(format!(
                "listen {e}: in use now: a start would fail, a reload of the server that holds it would not"
            )),
            Err(Listen::Cannot(why)) => c.problems.push(format!("listen {e}: {why}")),
        }
    }
    crate::h3::check(cfg, &mut c);
    crate::limits::check(cfg, &mut c);
    for s in cfg.sites().iter().filter(|s| s.acme) {
        c.served.push(format!(
            "site {}: certificate by ACME from {}, kept in {}",
            s.label(),
            cfg.acme_directory,
            absolute(&cfg.acme_dir)
        ));
    }
    if let Some(dir) = &cfg.compress_cache {
        let shown = absolute(dir);
        c.served.push(format!(
            "compress-cache {shown} (at most {} bytes)",
            cfg.compress_cache_size
        ));
        // A start makes what is missing: the nearest part that exists must be a
        // directory.
        let there = dir
            .ancestors()
            .find(|a| a.exists() || a.as_os_str().is_empty());
        if let Some(a) = there.filter(|a| !a.as_os_str().is_empty() && !a.is_dir()) {
            c.problems.push(format!(
                "compress-cache {shown}: {} is not a directory",
                absolute(a)
            ));
        }
        // One that exists: what the start would refuse to take.
        let take = cfg.user.is_some() && linerate_sys::ns::effective_uid() == 0;
        let uid = match &cfg.user {
            Some(n) if take => linerate_sys::user::lookup(n).ok().flatten().map(|u| u.uid),
            _ => Some(linerate_sys::ns::effective_uid()),
        };
        if let (true, Some(uid)) = (std::fs::symlink_metadata(dir).is_ok(), uid) {
            if let Some(why) = crate::compress_cache::refusal(dir, uid, take) {
                c.problems.push(format!("compress-cache {shown}: {why}"));
            }
        }
    }
    if let Some(name) = &cfg.user {
        match linerate_sys::user::lookup(name) {
            Ok(Some(u)) => c
                .served
                .push(format!("user {name} (uid {}, gid {})", u.uid, u.gid)),
            Ok(None) => c.problems.push(format!("user {name}: no such user")),
            Err(e) => c.problems.push(format!("user {name}: {e}")),
        }
    }
    match cfg.driver.resolve() {
        Ok(d) => c.served.push(format!("event loop: {d}")),
        Err(e) => c.problems.push(format!("driver: {e}")),
    }
    c
}

/// The roots and the logs, judged as the server will open them: a root as `--user`
/// when root starts it (the files beneath it are opened as that user, and so is the
/// root at a reload); a log as the start opens it (as root, before root is given up),
/// then as `--user` too, which only a reopen (SIGUSR1) or a reload adding it does: a
/// log that user cannot write is a note. The problems, and the notes.
fn as_the_user(cfg: &Config) -> (Vec<String>, Vec<String>) {
    let user = cfg
        .user
        .as_ref()
        .filter(|_| linerate_sys::ns::effective_uid() == 0)
        .and_then(|n| linerate_sys::user::lookup(n).ok().flatten());
    let Some(user) = user else {
        let mut problems = roots(cfg, "");
        problems.extend(logs(cfg, ""));
        return (problems, Vec::new());
    };
    let whom = format!(" (as user {})", user.name);
    let mut problems =
        linerate_sys::user::as_user(&user, || roots(cfg, &whom)).unwrap_or_else(|e| {
            vec![format!(
                "user {}: cannot take its identity to judge the roots: {e}",
                user.name
            )]
        });
    let at_start = logs(cfg, "");
    let notes = if at_start.is_empty() {
        let reopen = format!(
            "{whom}: the start opens it as root, but a reopen (SIGUSR1) or a reload that adds it would fail"
        );
        linerate_sys::user::as_user(&user, || logs(cfg, &reopen)).unwrap_or_default()
    } else {
        Vec::new()
    };
    problems.extend(at_start);
    (problems, notes)
}

/// Each root readable and searchable; `whom` ends each line.
fn roots(cfg: &Config, whom: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for s in cfg.sites() {
        // Reading lists it; searching ("." within it) opens what is beneath.
        let opened = linerate_sys::fs::open_directory(&s.root)
            .and_then(|_| std::fs::metadata(s.root.join(".")).map(drop));
        if let Err(e) = opened {
            let names = if s.names.is_empty() {
                "every Host".to_string()
            } else {
                s.names.join(" ")
            };
            problems.push(format!(
                "site {names}: root {}: {e}{whom}",
                absolute(&s.root)
            ));
        }
    }
    problems
}

/// Each log appendable (see [`log_file`]); `whom` ends each line.
fn logs(cfg: &Config, whom: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for p in cfg.access_log_paths() {
        if let Err(why) = log_file(&p) {
            problems.push(format!("access log {}: {why}{whom}", p.display()));
        }
    }
    if let ErrorLog::File(p) = &cfg.error_log {
        if let Err(why) = log_file(p) {
            problems.push(format!("error log {}: {why}{whom}", p.display()));
        }
    }
    problems
}

/// The path as a start would serve it, from the current directory (what the start
/// line and the check print).
pub fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// Why a start could not listen on an address.
enum Listen {
    /// Someone holds the port.
    InUse,
    Cannot(String),
}

/// Whether a start could listen on `e`: an IP address whose port no one holds (port 0
/// always can), or a Unix socket path in a directory that exists.
fn try_listen(e: &Endpoint) -> Result<(), Listen> {
    let cannot = |e: std::io::Error| Listen::Cannot(e.to_string());
    match e {
        Endpoint::Ip(ip) if ip.port() == 0 => Ok(()),
        Endpoint::Ip(ip) => crate::listen::port_free(*ip).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                Listen::InUse
            } else {
                cannot(e)
            }
        }),
        Endpoint::Unix(p) => match p.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) if !d.is_dir() => Err(Listen::Cannot(format!("no directory {}", d.display()))),
            _ => Ok(()),
        },
    }
}

/// Whether a start could append to the log at `p`: the file if it exists, else its
/// directory (a start creates the file).
fn log_file(p: &Path) -> Result<(), String> {
    if p.exists() {
        return std::fs::OpenOptions::new()
            .append(true)
            .open(p)
            .map(drop)
            .map_err(|e| e.to_string());
    }
    match p.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) if !d.is_dir() => Err(format!("no directory {}", d.display())),
        _ => Ok(()),
    }
}
