//! The file's blocks: `[[site]]` (a virtual host) and `[[rule]]` (settings for some
//! paths), with their checks.

use super::*;

/// The rule keys, one row each: its documentation, how the file spells it and its
/// type (`#[serde]`), and after `=>` its field in the [`Rule`] and how the file's value
/// becomes it, checked (an error names what is wrong; [`RuleSettings::to_rule`] puts
/// the rule's path before it). From the rows come [`RuleSettings`] (what the file
/// reads), [`Rule`] (what the server runs on) and the merge of the rules for a path,
/// each field by its type's [`Merge`](crate::rules::Merge). A row with no `=>` is
/// made into the rule by hand, with another (`redirect` with `redirect-code`, `allow`
/// with `deny`), into the fields the [`Rule`] declares after the rows.
macro_rules! rule_keys {
    (
        $(#[$sm:meta])*
        pub struct RuleSettings {
            $(#[$pm:meta])*
            pub path: RulePath,
            $(
                $(#[$m:meta])*
                pub $key:ident: $ty:ty $(=> $rty:ty, |$v:ident| $conv:expr)?,
            )*
        }

        $(#[$rm:meta])*
        pub struct Rule {
            $(
                $(#[$fm:meta])*
                pub $field:ident: $fty:ty,
            )*
        }
    ) => {
        $(#[$sm])*
        #[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
        #[serde(deny_unknown_fields, rename_all = "kebab-case")]
        pub struct RuleSettings {
            $(#[$pm])*
            pub path: RulePath,
            $(
                $(#[$m])*
                pub $key: $ty,
            )*
        }

        $(#[$rm])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct Rule {
            /// The paths it applies to (none: every path, as a merged rule has).
            pub path: Option<PathMatch>,
            $($(
                #[doc = concat!("The `", stringify!($key), "` key: see [`RuleSettings::", stringify!($key), "`].")]
                pub $key: $rty,
            )?)*
            $(
                $(#[$fm])*
                pub $field: $fty,
            )*
            /// A site's own rule (over a server-wide one of the same specificity).
            pub site: bool,
        }

        impl RuleSettings {
            /// Each row's field of `rule`, checked.
            fn fill(&self, rule: &mut Rule) -> Result<(), ConfigError> {
                $($(
                    let $v = &self.$key;
                    let made: Result<$rty, ConfigError> = $conv;
                    rule.$key = made?;
                )?)*
                Ok(())
            }
        }

        impl Rule {
            /// Takes what `r` gives over what this has, setting by setting.
            pub(crate) fn absorb(&mut self, r: &Rule) {
                use crate::rules::Merge;
                $($(<$rty as Merge>::merge(&mut self.$key, &r.$key);)?)*
                $(Merge::merge(&mut self.$field, &r.$field);)*
            }
        }
    };
}

rule_keys! {
    /// A `[[rule]]` (every site) or `[[site.rule]]` (one site) block: settings for the
    /// paths its `path` matches (docs/http.md W1-W4).
    pub struct RuleSettings {
        /// `/PREFIX`, `=/EXACT` or a glob (`*.js`, `/static/**/*.css`).
        pub path: RulePath,
        /// Response header fields to add: `{ "Cache-Control" = "public, max-age=600" }`.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub headers: BTreeMap<String, String>
            => Vec<(String, String)>, |h| headers(h),
        /// `Cache-Control: max-age` and `Expires` this far ahead.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expires: Option<Age>
            => Option<Duration>, |a| Ok(a.map(|a| a.0)),
        /// Content types by extension: `{ "rpm" = "application/x-rpm" }`.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub types: BTreeMap<String, String>
            => Vec<(String, String)>, |t| types(t),
        #[serde(skip_serializing_if = "Option::is_none")]
        pub autoindex: Option<bool>
            => Option<bool>, |b| Ok(*b),
        /// Index file names for the directories under the path, tried in order (the
        /// server's `index` elsewhere): `["README.html", "index.html"]`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub index: Vec<IndexName>
            => Vec<String>, |n| Ok(n.iter().map(|n| n.0.clone()).collect()),
        #[serde(skip_serializing_if = "Option::is_none")]
        pub dotfiles: Option<bool>
            => Option<bool>, |b| Ok(*b),
        /// How entity tags are made under the path: mtime, content or off.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub etag: Option<EtagMode>
            => Option<EtagMode>, |m| Ok(*m),
        /// Error pages: `{ 404 = "/errors/404.html" }`, served with the status.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub errors: BTreeMap<String, String>
            => Vec<(u16, String)>, |e| error_pages(e),
        /// Answer with a redirect to this URL or path (a prefix rule appends the rest of
        /// the path; the query is kept).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub redirect: Option<String>,
        /// 301 (the default), 302, 303, 307 or 308.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub redirect_code: Option<u16>,
        /// A path served with 200 when the request's path names nothing (single-page
        /// applications: "/index.html"), or `false` to switch off one that a less specific
        /// rule gives (`/assets/` under an app's `/`, whose missing files stay 404).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub fallback: Option<FallbackSetting>
            => Option<Fallback>, |f| Ok(f.as_ref().map(FallbackSetting::to_fallback)),
        /// Clients that may have these paths (networks, addresses, unix:, all); the most
        /// specific entry of `allow` and `deny` that matches decides, others get 403.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub allow: Vec<Cidr>,
        /// Clients refused these paths (403).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub deny: Vec<Cidr>,
        /// Files to try in order, `{path}` standing for the request's path (clean URLs:
        /// `["{path}", "{path}.html", "{path}/index.html"]`); the first that is a file is
        /// served; a fixed path last (`"/index.html"`) serves that for what names nothing.
        #[serde(default, rename = "try", skip_serializing_if = "Vec::is_empty")]
        pub try_files: Vec<String>
            => Vec<String>, |t| try_files(t),
        /// `X-Content-Type-Options: nosniff`, `Referrer-Policy:
        /// strict-origin-when-cross-origin` and `X-Frame-Options: SAMEORIGIN` (each unless
        /// `headers` names it); false turns a less specific rule's off.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub security_headers: Option<bool>
            => Option<bool>, |b| Ok(*b),
        /// `Strict-Transport-Security: max-age` of this on answers over HTTPS.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub hsts: Option<Age>
            => Option<Duration>, |a| Ok(a.map(|a| a.0)),
        /// An htpasswd file (bcrypt, `htpasswd -B`) whose users alone may have these paths:
        /// others get 401 (HTTP Basic).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub htpasswd: Option<PathBuf>
            => Option<PathBuf>, |p| Ok(p.clone()),
        /// Cross-origin reads: `{ origins = ["https://app.example.com"], headers =
        /// ["X-Requested-With"], max-age = "10m", credentials = false, expose = [...] }`;
        /// OPTIONS preflights answered 204.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub cors: Option<CorsSettings>
            => Option<Cors>, |c| c.as_ref().map(CorsSettings::checked).transpose(),
        /// Requests per client: `{ rate = "20/s", burst = 40, delay = 10, key =
        /// "address" }`; past the burst, 429 with `Retry-After` (docs/http.md L1).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub limit_requests: Option<crate::limits::LimitSettings>
            => Option<std::sync::Arc<crate::limits::RequestLimit>>,
            |l| l.as_ref().map(|l| l.checked().map(std::sync::Arc::new)).transpose(),
    }

    /// One rule, as the server runs on it.
    pub struct Rule {
        /// `redirect` with `redirect-code`.
        pub redirect: Option<Redirect>,
        /// `allow` and `deny` (both lists come from the most specific rule that gives
        /// either).
        pub access: Option<Access>,
    }
}

/// What a configured header value may hold: visible ASCII and spaces (what the
/// response head writes as it is).
pub(crate) fn field_value(v: &str) -> bool {
    v.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
}

/// A header field name: an HTTP token.
pub(crate) fn token(n: &str) -> bool {
    !n.is_empty()
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl RuleSettings {
    /// The rule, checked: header names are tokens and no value holds a line break,
    /// error pages are for 4xx and 5xx and are paths, a redirect has a redirect code.
    pub fn to_rule(&self, site: bool) -> Result<Rule, ConfigError> {
        let at = |e: ConfigError| e.in_block(format_args!("rule {}", self.path));
        let mut rule = Rule {
            path: Some(self.path.0.clone()),
            site,
            ..Rule::default()
        };
        self.fill(&mut rule).map_err(at)?;
        // A rule of every site counts for all of them; a site's is scoped by the site
        // once it is known (`Settings::apply`).
        let name = self.path.to_string();
        rule.limit_requests = (rule.limit_requests.take())
            .map(|l| std::sync::Arc::new((*l).clone().of_rule("*", &name)));
        rule.redirect = redirect(self.redirect.as_deref(), self.redirect_code).map_err(at)?;
        rule.access = (!self.allow.is_empty() || !self.deny.is_empty()).then(|| Access {
            allow: self.allow.clone(),
            deny: self.deny.clone(),
        });
        Ok(rule)
    }
}

/// `headers`: names are tokens, values visible ASCII and spaces.
fn headers(h: &BTreeMap<String, String>) -> Result<Vec<(String, String)>, ConfigError> {
    let refused = |e| Err(ConfigError::at_key("headers", e));
    for (n, v) in h {
        if !token(n) {
            return refused(ValueError::is(n, "not a field name"));
        }
        if !field_value(v) {
            return refused(ValueError::kind(format!(
                "{n}'s value holds a byte other than visible ASCII and spaces"
            )));
        }
    }
    Ok(h.iter().map(|(n, v)| (n.clone(), v.clone())).collect())
}

/// `types`: an extension (no dot, no slash) and a type; extensions in lower case.
fn types(t: &BTreeMap<String, String>) -> Result<Vec<(String, String)>, ConfigError> {
    for (ext, ty) in t {
        if ext.is_empty() || ext.contains(['.', '/']) || !field_value(ty) {
            let e = format!("'{ext}' = '{ty}' (give an extension and a type)");
            return Err(ConfigError::at_key("types", ValueError::kind(e)));
        }
    }
    Ok(t.iter()
        .map(|(x, ty)| (x.to_ascii_lowercase(), ty.clone()))
        .collect())
}

/// `errors`: a 4xx or 5xx status and a path.
fn error_pages(e: &BTreeMap<String, String>) -> Result<Vec<(u16, String)>, ConfigError> {
    let refused = |e| ConfigError::at_key("errors", e);
    let mut out = Vec::new();
    for (code, page) in e {
        let status: u16 = code
            .parse()
            .ok()
            .filter(|s| (400..=599).contains(s))
            .ok_or_else(|| refused(ValueError::is(code, "not a 4xx or 5xx status")))?;
        if !page.starts_with('/') {
            let e = format!("'{page}' must start with /");
            return Err(refused(ValueError::kind(e)));
        }
        out.push((status, page.clone()));
    }
    Ok(out)
}

/// `try`: each a path in the site, or `{path}` with text after it.
fn try_files(t: &[String]) -> Result<Vec<String>, ConfigError> {
    for f in t {
        let fixed = f.replace("{path}", "");
        if !(f.starts_with('/') || f.starts_with("{path}")) || fixed.contains(['{', '}']) {
            let is = "not a path in the site (/PATH, or {path} with text after it)";
            return Err(ConfigError::at_key("try", ValueError::is(f, is)));
        }
    }
    Ok(t.to_vec())
}

/// `redirect` with `redirect-code` (301 by default).
fn redirect(to: Option<&str>, code: Option<u16>) -> Result<Option<Redirect>, ConfigError> {
    match (to, code) {
        (Some(to), code) => {
            let code = code.unwrap_or(301);
            if ![301, 302, 303, 307, 308].contains(&code) {
                let e = format!("{code} is not 301, 302, 303, 307 or 308");
                return Err(ConfigError::at_key("redirect-code", ValueError::kind(e)));
            }
            if !linerate_http::location::valid_target(to) {
                let is = "neither a path on the site (\"/new/\") nor an absolute http or https URL";
                return Err(ConfigError::at_key("redirect", ValueError::is(to, is)));
            }
            Ok(Some(Redirect {
                to: to.to_string(),
                code,
            }))
        }
        (None, Some(_)) => Err(ConfigError::at_key(
            "redirect-code",
            ValueError::kind("redirect-code without redirect"),
        )),
        (None, None) => Ok(None),
    }
}

/// A site's name: `docs.example.com`, or `*.example.com` for every name under
/// `example.com` (not `example.com` itself); kept in lower case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteName(pub String);

impl FromStr for SiteName {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<SiteName, ValueError> {
        let t = s.trim().trim_end_matches('.').to_ascii_lowercase();
        let bare = t.strip_prefix("*.").unwrap_or(&t);
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if bare.is_empty() || bare.len() > 253 || !bare.split('.').all(label_ok) {
            return Err(ValueError::is(
                s,
                "not a host name (docs.example.com, or *.example.com for the names under it)",
            ));
        }
        Ok(SiteName(t))
    }
}

impl fmt::Display for SiteName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

as_text!(SiteName);

/// A `[[site]]` block: a virtual host. Its keys beside `names`, `root` and `default`
/// override the server's for its requests.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SiteSettings {
    /// Host names it answers.
    #[serde(default)]
    pub names: Vec<SiteName>,
    /// Its document root.
    pub root: PathBuf,
    /// It answers requests whose Host no site names, or that have none (without one,
    /// the first block does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dotfiles: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoindex: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<EtagMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precompressed: Option<Codings>,
    /// Its certificate chain on the `tls-listen` addresses, chosen by the name the
    /// client asks for (SNI); without one, the server's `tls-cert`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// The key of its `tls-cert`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// Its certificate for `tls-listen` is obtained and renewed by ACME (acme-directory)
    /// for its names; with a `tls-cert` too, that one serves until the first arrives.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acme: bool,
    /// Clients that may have the site, and clients refused it (403), as a
    /// `[[site.rule]]` for `/` with these keys says (its own rules may say otherwise
    /// for their paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<Cidr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<Cidr>,
    /// Its own access log (stdout, off or a file) and line format; without them its
    /// lines go to the server's, in the server's format.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_log: Option<AccessLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
    /// An htpasswd file for the whole site, as a rule's key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub htpasswd: Option<PathBuf>,
    /// The security preset and HSTS for the whole site, as a rule's keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_headers: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hsts: Option<Age>,
    /// Requests per client for the whole site, as a rule's `limit-requests`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_requests: Option<crate::limits::LimitSettings>,
    /// `[[site.rule]]` blocks: per-path settings for this site.
    #[serde(default, rename = "rule", skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSettings>,
}

/// The blocks together: at most one default, no name in two sites, a name for each
/// site but the default.
pub(super) fn check_sites(sites: &[SiteSettings]) -> Result<(), ConfigError> {
    let defaults = sites.iter().filter(|s| s.default).count();
    if defaults > 1 {
        let e = format!("{defaults} blocks say default = true; one site answers unknown hosts");
        return Err(ConfigError::of_block("site", ValueError::kind(e)));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, s) in sites.iter().enumerate() {
        let site = |e: &'static str| {
            let block = format!("site #{} ({})", i + 1, s.root.display());
            Err(ConfigError::of_block(block, ValueError::kind(e)))
        };
        if s.tls_cert.is_some() != s.tls_key.is_some() {
            return site("tls-cert and tls-key go together");
        }
        if s.names.is_empty() && !s.default {
            return site("give it names, or default = true");
        }
        if let Some(l) = &s.limit_requests {
            let block = format!("site #{} ({})", i + 1, s.root.display());
            l.checked().map_err(|e| e.in_block(block))?;
        }
        for n in &s.names {
            if seen.contains(&n.0.as_str()) {
                let e = ValueError::is(&n.0, "named by two sites");
                return Err(ConfigError::of_block("site", e));
            }
            seen.push(&n.0);
        }
    }
    Ok(())
}
