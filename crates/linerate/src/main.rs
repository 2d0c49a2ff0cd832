//! The `linerate` binary: thin over the library crates. Errors print one line naming the
//! cause; usage errors exit 64, other failures 2.

#![forbid(unsafe_code)]

mod compress_cmd;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use linerate_bench::cli::{usage_error, Bench, SinkArgs, EXIT_FAILURE, EXIT_USAGE};
use linerate_server::settings::{keys_of, CorsSettings, LimitSettings, RuleSettings, SiteSettings};

#[derive(Parser, Debug)]
#[command(
    name = "linerate",
    version,
    about = "A static web server (HTTP/1.1, HTTP/2 and HTTPS) that sends files at the lowest CPU cost Linux allows, and the benchmarks that prove it"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// ministat, byte for byte: `linerate stat [-Anqs] [-C column] [-c confidence]
    /// [-d delimiters] [-w width] [file ...]`; `linerate stat --paired higher|lower A B`
    /// reads two interleaved sample files as pairs (see `linerate stat --help`).
    #[command(disable_help_flag = true)]
    Stat {
        /// ministat's options and files.
        #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Serve DIR as a static web server: HTTP/1.1, HTTP/2 and HTTPS (GET and HEAD of
    /// files, ranges, listings, virtual hosts, automatic certificates).
    Serve(Box<ServeArgs>),
    /// Accept connections and discard what arrives (netserver's role).
    Sink(Box<SinkArgs>),
    /// Write the precompressed variants `serve` sends (FILE.br, FILE.zst, FILE.gz)
    /// beside each text file under DIR where they are missing or older than the file,
    /// atomically (written beside, renamed); a variant that does not save 10% is not
    /// written. A second run writes nothing.
    Compress(compress_cmd::CompressArgs),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        bench: Bench,
    },
    /// Print a shell completion script for SHELL (bash, zsh, fish, elvish or
    /// powershell) on stdout.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages into a manual's directory: DIR/man1 (linerate.1 and one per
    /// subcommand, linerate-serve.1, …) and DIR/man5 (linerate.toml.5, the
    /// configuration file)
    Man {
        /// The manual's directory, such as /usr/local/share/man or ~/.local/share/man
        /// (made if missing; a directory named man1 is taken as its parent's man1)
        dir: PathBuf,
    },
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Document root; required with --config (unless `root` or [[site]] blocks give
    /// it) and under systemd [default at a terminal: the current directory, never /].
    dir: Option<PathBuf>,
    /// TOML file with any of the settings below, each flag's name without the dashes
    /// as its key (and `root` for DIR), and [[site]] (virtual hosts) and [[rule]]
    /// (per-path settings) blocks: see linerate.toml(5) and contrib/linerate.toml.
    /// Flags win.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Read and judge everything a start would (the settings, each site's root, the
    /// certificates and keys, the addresses, the logs, the user), print what would be
    /// served, with absolute roots, and exit: 0, or 2 naming every problem (a port in
    /// use is a note: a reload keeps its sockets). Nothing is served and no address is
    /// kept (nginx's -t)
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    settings: linerate_server::Settings,
}

/// Which build this is, for the reports of `bench compare`.
fn build() -> linerate_bench::machine::Build {
    linerate_bench::machine::Build {
        commit: env!("LINERATE_COMMIT").to_string(),
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_string(),
    }
}

fn main() -> ExitCode {
    // `stat` parses its own arguments exactly as ministat's getopt does.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("stat") {
        return linerate_stat::command::main(&args[2..]);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            if let Some(hint) = nginx_habit(&args, &e) {
                eprintln!("error: unexpected argument '-t' found\n\n  tip: {hint}\n");
                eprintln!("For more information, try 'linerate serve --help'.");
                return ExitCode::from(code);
            }
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let r = match cli.command {
        Command::Stat { args } => Ok(linerate_stat::command::main(&args)),
        Command::Serve(a) => run_serve(*a),
        Command::Sink(a) => linerate_bench::cli::run_sink(*a),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "linerate", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => write_man_pages(&dir),
        Command::Compress(a) => compress_cmd::run(a),
        Command::Bench { bench } => linerate_bench::cli::run(bench, build()),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("linerate: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// What an nginx user's `serve -t` means: clap's own tip (pass it after `--`) would
/// send them the wrong way.
fn nginx_habit(args: &[String], e: &clap::Error) -> Option<&'static str> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let serve = args.get(1).map(String::as_str) == Some("serve");
    let t = matches!(e.get(ContextKind::InvalidArg), Some(ContextValue::String(a)) if a == "-t");
    (serve && t && e.kind() == ErrorKind::UnknownArgument)
        .then_some("to check the configuration and exit (nginx's -t), use '--check'")
}

fn run_serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    // First of all: from here on no signal ends the server unasked, and a stop asked
    // for during the start is honoured (nothing below blocks).
    let control = linerate_server::Control::install().context("installing signal handlers")?;
    // Flags win over the configuration file, which wins over the defaults.
    let file = match &a.config {
        Some(p) => match linerate_server::Settings::load(p) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("linerate: --config {e}");
                return Ok(ExitCode::from(EXIT_FAILURE));
            }
        },
        None => linerate_server::Settings::default(),
    };
    let mut flags = a.settings.clone();
    flags.root = a.dir.clone();
    // Each a usage error on a start; with --check, problems among the others.
    let mut problems = Vec::new();
    if let Err(e) = root_given(&flags, &file, a.config.is_some()) {
        problems.push(e);
    }
    if a.dir.is_some() && file.sites.iter().any(|s| s.default) {
        problems.push(
            "DIR with a default [[site]] in --config: DIR would be the default site too".into(),
        );
    }
    let mut cfg = linerate_server::Config::new(PathBuf::from("."));
    flags.over(&file).apply(&mut cfg);
    if let Err(e) = linerate_server::tls::check(&cfg) {
        problems.push(e);
    }
    if let Err(e) = linerate_server::listen::check_proxy(&cfg) {
        problems.push(e);
    }
    if let Err(e) = linerate_server::auth::check(&cfg) {
        problems.push(e);
    }
    if cfg.steer == linerate_server::config::Steer::Cpu && !cfg.pin {
        problems.push(
            "--steer cpu needs --pin: a worker on no CPU of its own cannot be the CPU's".into(),
        );
    }
    if a.check {
        return Ok(check(&cfg, problems));
    }
    if let Some(e) = problems.first() {
        return Ok(usage_error(e));
    }
    // SIGHUP: the file again, under the same flags.
    let config_path = a.config.clone();
    let reload = move || -> Result<linerate_server::Config, String> {
        let file = match &config_path {
            Some(p) => linerate_server::Settings::load(p).map_err(|e| e.to_string())?,
            None => linerate_server::Settings::default(),
        };
        root_given(&flags, &file, config_path.is_some())?;
        let mut cfg = linerate_server::Config::new(PathBuf::from("."));
        flags.over(&file).apply(&mut cfg);
        linerate_server::listen::check_proxy(&cfg)?;
        linerate_server::auth::check(&cfg)?;
        Ok(cfg)
    };
    let announce = |addr: &linerate_server::Endpoint,
                    kind: linerate_server::Kind,
                    cfg: &linerate_server::Config| {
        use std::io::Write;
        println!("listening on {addr}{}", kind.note());
        let _ = std::io::stdout().flush();
        // For a person at a terminal; a closed stderr must not stop the server.
        let tls = kind == linerate_server::Kind::Tls;
        let what = if kind == linerate_server::Kind::Redirect {
            "redirecting to https".to_string()
        } else {
            format!("serving {}", roots_of(cfg))
        };
        let _ = writeln!(std::io::stderr(), "{what} at {}", url_of(addr, tls));
    };
    linerate_server::serve(cfg, &control, &announce, &reload)?;
    Ok(ExitCode::SUCCESS)
}

/// `serve --check`: what a start would serve on stdout, every problem on stderr (those
/// found before, then the check's); exit 0 or 2.
fn check(cfg: &linerate_server::Config, mut problems: Vec<String>) -> ExitCode {
    let c = linerate_server::check::check(cfg);
    problems.extend(c.problems);
    for line in &c.served {
        println!("{line}");
    }
    for n in &c.notes {
        eprintln!("linerate: --check: note: {n}");
    }
    for p in &problems {
        eprintln!("linerate: --check: {p}");
    }
    if problems.is_empty() {
        println!("the configuration is good: a start would serve the above");
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "linerate: --check: {} problem{}: a start would fail",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        ExitCode::from(EXIT_FAILURE)
    }
}

/// Whether the settings name what to serve. Started from a configuration file or by
/// systemd (a service's working directory is `/`), the root must be given: DIR, `root`,
/// or a `[[site]]` for every name (each has its own root). At a terminal the current
/// directory is served, unless it is `/`.
fn root_given(
    flags: &linerate_server::Settings,
    file: &linerate_server::Settings,
    from_file: bool,
) -> Result<(), String> {
    if flags.root.is_some() || file.root.is_some() || !file.sites.is_empty() {
        return Ok(());
    }
    let service =
        std::env::var_os("LISTEN_FDS").is_some() || std::env::var_os("NOTIFY_SOCKET").is_some();
    if from_file || service {
        return Err(format!(
            "no root: give DIR, or root = \"/var/www/html\" in {} (started {}, the current directory is not served)",
            if from_file { "--config" } else { "a --config file" },
            if from_file { "from a configuration file" } else { "by systemd" },
        ));
    }
    match std::env::current_dir() {
        Ok(d) if d.parent().is_none() => {
            Err("no DIR, and the current directory is /: give the directory to serve".to_string())
        }
        _ => Ok(()),
    }
}

/// What a start line says is served: the root as an absolute path, or each site's
/// names and root.
fn roots_of(cfg: &linerate_server::Config) -> String {
    let abs = linerate_server::check::absolute;
    if cfg.sites.is_empty() {
        return abs(&cfg.root);
    }
    let each: Vec<String> = cfg
        .sites
        .iter()
        .map(|s| {
            let name = s.names.first().map_or("the default site", String::as_str);
            format!("{name} from {}", abs(&s.root))
        })
        .collect();
    format!("{} sites ({})", each.len(), each.join(", "))
}

/// `linerate man DIR`: a page per command in DIR/man1, named as `man` finds them
/// (`linerate-bench-http.1` for `linerate bench http`), and the configuration file's
/// page in DIR/man5.
fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    // `linerate man ~/.local/share/man/man1`, as an earlier README said: its parent.
    let root = match (dir.file_name(), dir.parent()) {
        (Some(n), Some(p)) if n == "man1" => p,
        _ => dir,
    };
    let (man1, man5) = (root.join("man1"), root.join("man5"));
    for d in [&man1, &man5] {
        std::fs::create_dir_all(d).with_context(|| format!("making {}", d.display()))?;
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let written = man_pages(&cmd, "linerate", &man1)?;
    let path = man5.join("linerate.toml.5");
    std::fs::write(&path, config_page()).with_context(|| format!("writing {}", path.display()))?;
    println!(
        "wrote {written} man pages in {} and linerate.toml.5 in {}",
        man1.display(),
        man5.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Keys as a roff sentence's list: each in bold, a comma after each, a full stop
/// after the last.
fn roff_list(keys: &[&str]) -> String {
    keys.iter()
        .enumerate()
        .map(|(i, k)| {
            let end = if i + 1 == keys.len() { "." } else { "," };
            format!(".BR {} {end}\n", k.replace('-', "\\-"))
        })
        .collect()
}

/// linerate.toml(5): what the file is, its sites and rules, and the reference file
/// (contrib/linerate.toml, every key with its default) as it is, so the page cannot
/// fall behind the keys (a test holds the file to `serve --help`).
fn config_page() -> String {
    const REFERENCE: &str = include_str!("../../../contrib/linerate.toml");
    let mut page = format!(
        r#".TH linerate.toml 5 "" "linerate {}" "File formats"
.SH NAME
linerate.toml \- the configuration file of linerate serve
.SH SYNOPSIS
.B /etc/linerate/linerate.toml
.SH DESCRIPTION
A TOML file, given as
.B linerate serve \-\-config
.IR FILE .
Every setting of
.BR linerate\-serve (1)
is a key, named as its long flag without the dashes
.RB ( workers ,
.BR tls\-listen ,
\&...), and
.B root
is the document root (the DIR argument). A flag given on the command line wins over
the file, the file over the defaults. A relative root is taken from the directory the
server starts in: under systemd that is /, so give an absolute one.
.PP
.B SIGHUP
reads the file again and serves the new settings on the same sockets; a file that does
not parse is named in one error\-log line and the settings before stay.
.B linerate serve \-\-config
.I FILE
.B \-\-check
judges it as a start would (roots, certificates, addresses, logs, user) and names every
problem, serving nothing.
.SH SITES
Without
.B [[site]]
blocks, the root answers every Host. With them, each request goes to the site its Host
names (port and case ignored): an exact name first, then the longest
.B *.
name, then the site with
.BR "default = true" .
A block's
.B names
(a list) and
.B root
say which site it is;
.BR tls\-cert ,
.B tls\-key
or
.B acme
give its own certificate on tls\-listen (chosen by SNI); its other keys override the
server's for its requests. The keys of a block:
{site_keys}.SH RULES
.B [[rule]]
blocks apply to every site,
.B [[site.rule]]
blocks after a
.B [[site]]
to that site.
.B path
is a prefix ("/assets/"), an exact path ("=/about.html") or a glob ("*.js",
"/static/**/*.css"); the most specific rule wins, setting by setting. Among a rule's
keys,
.B headers
is a table of fields to add,
.B expires
sets Cache\-Control and Expires,
.B errors
is a table of status to page,
.B fallback
a page for paths that are not files (as a single\-page application needs; false
turns an outer rule's off), and
.B cors
a table of
{cors_keys}and
.B limit\-requests
(on a site too) a table of
{limit_keys}The keys of a rule:
{rule_keys}.SH THE REFERENCE FILE
Every key with its default; the commented lines are examples. It is
contrib/linerate.toml in the sources, and /etc/linerate/linerate.toml as the package
installs it.
.PP
.nf
"#,
        env!("CARGO_PKG_VERSION"),
        site_keys = roff_list(keys_of::<SiteSettings>()),
        rule_keys = roff_list(keys_of::<RuleSettings>()),
        cors_keys = roff_list(keys_of::<CorsSettings>()),
        limit_keys = roff_list(keys_of::<LimitSettings>()),
    );
    for line in REFERENCE.lines() {
        // Verbatim: a backslash written as roff's \e, a line that roff would take as a request
        // (a leading dot or quote) escaped.
        let line = line.replace('\\', "\\e");
        if line.starts_with('.') || line.starts_with('\'') {
            page.push_str("\\&");
        }
        page.push_str(&line);
        page.push('\n');
    }
    page.push_str(".fi\n.SH SEE ALSO\n.BR linerate\\-serve (1),\n.BR linerate (1)\n");
    page
}

fn man_pages(cmd: &clap::Command, name: &str, dir: &std::path::Path) -> anyhow::Result<usize> {
    use anyhow::Context;
    let cmd = cmd.clone().name(name.to_string());
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    let mut n = 1;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        n += man_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(n)
}

/// The URL a person would open for a listening address: the loopback address of the
/// same family when the server listens on all addresses.
/// Where a person points a client: a URL, or for a Unix socket the `curl` words.
fn url_of(endpoint: &linerate_server::Endpoint, tls: bool) -> String {
    let addr = match endpoint {
        linerate_server::Endpoint::Ip(a) => *a,
        linerate_server::Endpoint::Unix(p) => {
            let scheme = if tls { "https" } else { "http" };
            return format!(
                "{endpoint} (curl --unix-socket {} {scheme}://localhost/)",
                p.display()
            );
        }
    };
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{}/", SocketAddr::new(ip, addr.port()))
}
