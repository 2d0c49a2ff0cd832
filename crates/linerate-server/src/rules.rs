//! Per-path rules of a site (`[[rule]]` for every site, `[[site.rule]]` for one):
//! response headers, `expires`, content-type overrides, `autoindex`, `dotfiles`, error
//! pages, redirects and a fallback (docs/http.md W1-W4).
//!
//! A rule's `path` is exact (`=/about.html`), a glob (`*.js`, `/static/**/*.css`: a
//! glob with no `/` looks at the last segment only; `*` and `?` stop at `/`, `**`
//! crosses it), or else a prefix (`/assets/`). Rules are matched against the decoded,
//! normalized path (so `%2e` cannot step around one) and applied from the least
//! specific to the most, each setting taken from the most specific rule that gives it:
//! prefixes (shorter first), then globs (fewer literal characters first), then exact
//! paths; on a tie a site's rule wins over a server-wide one, then the later in the
//! file. Headers merge by name the same way.

use std::fmt;

use crate::config::Cidr;

/// Where a rule applies.
#[derive(Clone, Debug)]
pub enum PathMatch {
    /// The path itself.
    Exact(String),
    /// Paths starting with it.
    Prefix(String),
    /// Paths (or, with no `/` in the pattern, last segments) the pattern matches.
    Glob {
        pattern: glob::Pattern,
        whole_path: bool,
    },
}

impl PathMatch {
    /// Parses a rule's `path`.
    pub fn parse(s: &str) -> Result<PathMatch, String> {
        if let Some(exact) = s.strip_prefix('=') {
            if !exact.starts_with('/') {
                return Err(format!("'{s}': an exact path is =/PATH"));
            }
            return Ok(PathMatch::Exact(exact.to_string()));
        }
        if s.contains(['*', '?', '[']) {
            let pattern = glob::Pattern::new(s).map_err(|e| format!("'{s}': {e}"))?;
            return Ok(PathMatch::Glob {
                whole_path: s.contains('/'),
                pattern,
            });
        }
        if !s.starts_with('/') {
            return Err(format!(
                "'{s}' is not a path (/PREFIX, =/EXACT, or a glob such as *.js)"
            ));
        }
        Ok(PathMatch::Prefix(s.to_string()))
    }

    fn matches(&self, path: &str) -> bool {
        let opts = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        match self {
            PathMatch::Exact(p) => path == p,
            PathMatch::Prefix(p) => path.starts_with(p.as_str()),
            PathMatch::Glob {
                pattern,
                whole_path: true,
            } => pattern.matches_with(path, opts),
            PathMatch::Glob { pattern, .. } => {
                pattern.matches_with(path.rsplit('/').next().unwrap_or(path), opts)
            }
        }
    }

    /// Ordering key: kind, then how much of a path it pins down.
    fn specificity(&self) -> (u8, usize) {
        match self {
            PathMatch::Prefix(p) => (0, p.len()),
            PathMatch::Glob { pattern, .. } => (
                1,
                pattern
                    .as_str()
                    .chars()
                    .filter(|c| !matches!(c, '*' | '?' | '[' | ']'))
                    .count(),
            ),
            PathMatch::Exact(p) => (2, p.len()),
        }
    }
}

impl fmt::Display for PathMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathMatch::Exact(p) => write!(f, "={p}"),
            PathMatch::Prefix(p) => f.write_str(p),
            PathMatch::Glob { pattern, .. } => f.write_str(pattern.as_str()),
        }
    }
}

impl PartialEq for PathMatch {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for PathMatch {}

/// A redirect: where to and with which status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// A URL or a path. For a prefix rule, the rest of the path after the prefix is
    /// appended; the query is always kept.
    pub to: String,
    /// 301, 302, 307 or 308.
    pub code: u16,
}

/// A rule's `fallback`: a page of the site, or `false` to switch off one that a less
/// specific rule gives (assets under a single-page app's `/`, whose missing files must
/// stay 404 rather than become the app's page).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fallback {
    Page(String),
    Off,
}

/// The fields `security-headers = true` adds (each unless a `headers` entry names it):
/// no type sniffing, the origin alone as the referrer to other sites, no framing by
/// other sites.
pub const SECURITY_HEADERS: [(&str, &str); 3] = [
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "strict-origin-when-cross-origin"),
    ("X-Frame-Options", "SAMEORIGIN"),
];

pub use crate::cors::Cors;

/// Who may have a path (`allow`, `deny`): the most specific entry that matches the
/// client decides (an address over its network, a longer network over a shorter,
/// `all` last), a `deny` winning a tie; a client no entry matches is refused if there
/// is an `allow` list and admitted if there is only a `deny` list. Order-free, so two
/// TOML lists can say it; it answers as nginx's first-match `allow`/`deny` for every
/// list written the way nginx's must be to mean anything (specific before general).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub allow: Vec<Cidr>,
    pub deny: Vec<Cidr>,
}

impl Access {
    /// Whether `client` (none: a Unix socket's) may have the path.
    pub fn admits(&self, client: Option<std::net::IpAddr>) -> bool {
        let best = |list: &[Cidr]| {
            list.iter()
                .filter(|c| c.admits(client))
                .map(Cidr::specificity)
                .max()
        };
        match (best(&self.allow), best(&self.deny)) {
            (Some(a), Some(d)) => a > d,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => self.allow.is_empty(),
        }
    }
}

/// How a setting of a more specific rule goes over a less specific one's, when the
/// rules for a path are merged ([`Effective::of`]): each field of a [`Rule`] by its
/// type's.
pub(crate) trait Merge {
    fn merge(&mut self, over: &Self);
}

/// A setting: the more specific rule's, where it gives one.
impl<T: Clone> Merge for Option<T> {
    fn merge(&mut self, over: &Self) {
        if over.is_some() {
            self.clone_from(over);
        }
    }
}

/// A list (`try`): the more specific rule's whole, where it gives one.
impl Merge for Vec<String> {
    fn merge(&mut self, over: &Self) {
        if !over.is_empty() {
            self.clone_from(over);
        }
    }
}

/// A table's key: header field names compare without case.
trait Key: Clone + PartialEq {
    fn same(&self, other: &Self) -> bool {
        self == other
    }
}

impl Key for String {
    fn same(&self, other: &Self) -> bool {
        self.eq_ignore_ascii_case(other)
    }
}

impl Key for u16 {}

/// A table (header fields, types, error pages): entry by entry, the more specific
/// rule's entry replacing one of the same key.
impl<K: Key> Merge for Vec<(K, String)> {
    fn merge(&mut self, over: &Self) {
        for (k, v) in over {
            self.retain(|(x, _)| !x.same(k));
            self.push((k.clone(), v.clone()));
        }
    }
}

pub use crate::settings::Rule;

/// Orders `rules` from the least specific to the most (see the module's text).
pub fn sort(rules: &mut [Rule]) {
    // A stable sort keeps the file's order among equals.
    rules.sort_by_key(|r| {
        let (kind, len) = r.path.as_ref().map_or((0, 0), PathMatch::specificity);
        (kind, len, r.site)
    });
}

/// What the rules say for one path: the matching rules merged into one (no path of
/// its own), and the prefix the redirect came with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effective {
    /// The path they were matched against.
    pub path: String,
    merged: Rule,
    /// The prefix of the rule the redirect came from (for the rest of the path).
    redirect_prefix: Option<String>,
}

impl std::ops::Deref for Effective {
    type Target = Rule;
    fn deref(&self) -> &Rule {
        &self.merged
    }
}

impl Effective {
    /// The rules of `rules` (sorted by [`sort`]) that match `path`, merged.
    pub fn of(rules: &[Rule], path: &str) -> Effective {
        let mut e = Effective {
            path: path.to_string(),
            ..Effective::default()
        };
        for r in rules {
            if !r.path.as_ref().is_none_or(|p| p.matches(path)) {
                continue;
            }
            e.merged.absorb(r);
            if r.redirect.is_some() {
                e.redirect_prefix = match &r.path {
                    Some(PathMatch::Prefix(p)) => Some(p.clone()),
                    _ => None,
                };
            }
        }
        e
    }

    /// The content type the rules give a file named `name`, if any.
    pub fn content_type(&self, name: &str) -> Option<&str> {
        let (_, ext) = name.rsplit('/').next()?.rsplit_once('.')?;
        self.types
            .iter()
            .find(|(x, _)| x.eq_ignore_ascii_case(ext))
            .map(|(_, t)| t.as_str())
    }

    /// The error page for `status`, if any.
    pub fn error_page(&self, status: u16) -> Option<&str> {
        self.errors
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, p)| p.as_str())
    }

    /// The redirect's status and `Location`, for a request with `query`: the rest of
    /// the path after a prefix rule's prefix and the query, encoded so that the value
    /// stays one field and a path target stays on the site (`linerate_http::location`).
    pub fn location(&self, query: Option<&str>) -> Option<(u16, String)> {
        let r = self.merged.redirect.as_ref()?;
        let prefix = self.redirect_prefix.as_deref();
        let rest = prefix
            .and_then(|p| self.path.strip_prefix(p))
            .unwrap_or_default();
        let to = linerate_http::location::build(&r.to, rest.as_bytes(), query);
        Some((r.code, to))
    }

    /// The paths to try for a request whose path (still percent-encoded, as sent) is
    /// `raw`, in order: the rules' `try` list with `{path}` replaced.
    pub fn tries<'a>(&'a self, raw: &'a str) -> impl Iterator<Item = String> + 'a {
        let base = raw.strip_suffix('/').unwrap_or(raw);
        self.merged
            .try_files
            .iter()
            .map(move |t| t.replace("{path}", base))
    }

    /// Whether `client` (none: a Unix socket's) may have the path.
    pub fn admits(&self, client: Option<std::net::IpAddr>) -> bool {
        self.merged.access.as_ref().is_none_or(|a| a.admits(client))
    }

    /// The page the rules give a path that names nothing, if any.
    pub fn fallback_page(&self) -> Option<&str> {
        match &self.merged.fallback {
            Some(Fallback::Page(p)) => Some(p),
            Some(Fallback::Off) | None => None,
        }
    }

    /// The response fields the rules add: their headers; CORS's for the request's
    /// `Origin` (W9); the security preset's fields
    /// and, on an answer over TLS (`secure`), `Strict-Transport-Security`, each unless
    /// a header of the rules has its name; and for `expires` a `Cache-Control: max-age`
    /// (unless a header rule sets `Cache-Control`) and an `Expires` date from `now`.
    pub fn fields(
        &self,
        now: std::time::SystemTime,
        req: &linerate_http::request::Request,
    ) -> Vec<(String, String)> {
        let secure = req.secure;
        let mut out = self.headers.clone();
        if let Some(c) = &self.cors {
            let origin = req.cors.as_ref().and_then(|c| c.origin.as_deref());
            c.fields(origin, &mut out);
        }
        let mut preset = |name: &str, value: String| {
            if !out.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                out.push((name.into(), value));
            }
        };
        if self.security_headers == Some(true) {
            for (name, value) in SECURITY_HEADERS {
                preset(name, value.into());
            }
        }
        if let (Some(d), true) = (self.hsts, secure) {
            preset(
                "Strict-Transport-Security",
                format!("max-age={}", d.as_secs()),
            );
        }
        if let Some(d) = self.expires {
            if !out
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("cache-control"))
            {
                out.push(("Cache-Control".into(), format!("max-age={}", d.as_secs())));
            }
            out.push(("Expires".into(), httpdate::fmt_http_date(now + d)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rule(path: &str, site: bool) -> Rule {
        Rule {
            path: Some(PathMatch::parse(path).unwrap()),
            site,
            ..Rule::default()
        }
    }

    fn header(mut r: Rule, value: &str) -> Rule {
        r.headers = vec![("X-Rule".into(), value.into())];
        r
    }

    /// Rules: docs/http.md W1.
    #[test]
    fn the_most_specific_rule_wins_setting_by_setting() {
        let mut rules = vec![
            header(rule("/", false), "server /"),
            header(rule("/assets/", false), "server /assets/"),
            header(rule("/assets/", true), "site /assets/"),
            header(rule("*.js", true), "*.js"),
            header(rule("/assets/**/*.js", true), "/assets/**/*.js"),
            header(rule("=/assets/app.js", false), "=/assets/app.js"),
            header(rule("/assets/img/", true), "site /assets/img/"),
        ];
        rules[1].expires = Some(Duration::from_secs(60));
        rules[3].autoindex = Some(true);
        sort(&mut rules);
        let fx = |p: &str| Effective::of(&rules, p);
        let x = |p: &str| fx(p).headers[0].1.clone();
        for (path, want) in [
            ("/index.html", "server /"),
            ("/assets/a.css", "site /assets/"),
            ("/assets/img/a.png", "site /assets/img/"),
            ("/lib.js", "*.js"),
            ("/assets/img/x.js", "/assets/**/*.js"),
            ("/assets/lib/x.js", "/assets/**/*.js"),
            ("/assets/app.js", "=/assets/app.js"),
        ] {
            assert_eq!(x(path), want, "{path}");
            assert_eq!(fx(path).headers.len(), 1, "merged by name: {path}");
        }
        // Other settings come from the most specific rule that gives them.
        assert_eq!(fx("/assets/app.js").expires, Some(Duration::from_secs(60)));
        assert_eq!(fx("/assets/app.js").autoindex, Some(true));
        assert_eq!(fx("/index.html").expires, None);
        // `*` stops at `/`; a glob without `/` looks at the last segment.
        assert!(PathMatch::parse("/a/*.js").unwrap().matches("/a/b.js"));
        assert!(!PathMatch::parse("/a/*.js").unwrap().matches("/a/b/c.js"));
        assert!(PathMatch::parse("*.js").unwrap().matches("/a/b/c.js"));
        assert!(!PathMatch::parse("*.js").unwrap().matches("/a.js/b"));
    }

    #[test]
    fn redirects_keep_the_rest_of_a_prefix_and_the_query() {
        let mut r = rule("/old/", true);
        r.redirect = Some(Redirect {
            to: "https://new.example.com/docs/".into(),
            code: 308,
        });
        let fx = Effective::of(&[r], "/old/a/b.html");
        assert_eq!(
            fx.location(Some("x=1")),
            Some((308, "https://new.example.com/docs/a/b.html?x=1".into()))
        );
        let mut r = rule("=/gone", true);
        r.redirect = Some(Redirect {
            to: "/here?from=gone".into(),
            code: 301,
        });
        let fx = Effective::of(&[r], "/gone");
        assert_eq!(
            fx.location(Some("q")),
            Some((301, "/here?from=gone&q".into()))
        );
    }

    /// Issue 28: a redirect built from a request is one header field on the site.
    #[test]
    fn a_redirect_cannot_write_a_field_or_leave_the_site() {
        let mut r = rule("/go/", true);
        r.redirect = Some(Redirect {
            to: "/dest/".into(),
            code: 301,
        });
        let fx = Effective::of(&[r], "/go/\r\nSet-Cookie:x=1");
        assert_eq!(
            fx.location(None),
            Some((301, "/dest/%0D%0ASet-Cookie:x=1".into()))
        );
        let mut r = rule("/old", true);
        r.redirect = Some(Redirect {
            to: "/".into(),
            code: 301,
        });
        for (path, want) in [
            ("/old/\\evil.example", "/%5Cevil.example"),
            ("/old//evil.example", "/evil.example"),
            ("/old\tx", "/%09x"),
        ] {
            let fx = Effective::of(std::slice::from_ref(&r), path);
            assert_eq!(fx.location(None), Some((301, want.into())), "{path}");
        }
    }

    #[test]
    fn a_rule_switches_an_inherited_fallback_off() {
        let mut app = rule("/", false);
        app.fallback = Some(Fallback::Page("/index.html".into()));
        let mut assets = rule("/assets/", false);
        assets.fallback = Some(Fallback::Off);
        let mut rules = vec![assets, app];
        sort(&mut rules);
        assert_eq!(
            Effective::of(&rules, "/posts/1").fallback_page(),
            Some("/index.html")
        );
        assert_eq!(
            Effective::of(&rules, "/assets/missing.js").fallback_page(),
            None
        );
    }

    /// Rules: docs/http.md W6.
    #[test]
    fn the_most_specific_access_entry_decides_and_deny_wins_a_tie() {
        let c = |s: &str| s.parse::<Cidr>().unwrap();
        let ip = |s: &str| Some(s.parse::<std::net::IpAddr>().unwrap());
        let access = |allow: &[&str], deny: &[&str]| Access {
            allow: allow.iter().map(|s| c(s)).collect(),
            deny: deny.iter().map(|s| c(s)).collect(),
        };
        // nginx: allow 10.0.0.0/8; deny all.
        let a = access(&["10.0.0.0/8"], &["all"]);
        assert!(a.admits(ip("10.1.2.3")) && !a.admits(ip("192.0.2.1")) && !a.admits(None));
        // An allow list alone refuses the rest; a deny list alone admits the rest.
        let a = access(&["10.0.0.0/8"], &[]);
        assert!(!a.admits(ip("192.0.2.1")));
        let a = access(&[], &["192.0.2.0/24"]);
        assert!(!a.admits(ip("192.0.2.1")) && a.admits(ip("198.51.100.1")));
        // nginx: deny 10.0.0.5; allow 10.0.0.0/8; deny all; and the other way round.
        let a = access(&["10.0.0.0/8"], &["10.0.0.5", "all"]);
        assert!(!a.admits(ip("10.0.0.5")) && a.admits(ip("10.0.0.6")));
        let a = access(&["10.0.0.5", "all"], &["10.0.0.0/8"]);
        assert!(a.admits(ip("10.0.0.5")) && !a.admits(ip("10.0.0.6")) && a.admits(ip("192.0.2.1")));
        // A tie: deny.
        let a = access(&["10.0.0.0/8"], &["10.0.0.0/8"]);
        assert!(!a.admits(ip("10.0.0.1")));
        // A Unix socket's clients by unix:; IPv4 clients of an IPv6 socket as IPv4.
        let a = access(&["unix:"], &["all"]);
        assert!(a.admits(None) && !a.admits(ip("127.0.0.1")));
        let a = access(&["127.0.0.1"], &[]);
        assert!(a.admits(ip("::ffff:127.0.0.1")));
        // ... and an IPv4-mapped entry is the IPv4 network it names.
        let a = access(&["::ffff:10.0.0.0/104"], &["all"]);
        assert!(a.admits(ip("10.1.2.3")) && !a.admits(ip("192.0.2.1")));
        // The most specific rule that gives either list gives both.
        let mut site = rule("/", true);
        site.access = Some(access(&["10.0.0.0/8"], &["all"]));
        let mut public = rule("/public/", true);
        public.access = Some(access(&["all"], &[]));
        let mut rules = vec![public, site];
        sort(&mut rules);
        assert!(!Effective::of(&rules, "/a.html").admits(ip("192.0.2.1")));
        assert!(Effective::of(&rules, "/public/a.html").admits(ip("192.0.2.1")));
    }

    #[test]
    fn bad_paths_are_refused() {
        for (p, why) in [
            ("assets", "is not a path"),
            ("=about", "=/PATH"),
            ("/a/[", "'/a/['"),
        ] {
            let e = PathMatch::parse(p).unwrap_err();
            assert!(e.contains(why), "{p}: {e}");
        }
    }
}
