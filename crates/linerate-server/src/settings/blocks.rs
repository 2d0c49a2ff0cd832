//! The file's blocks: `[[site]]` (a virtual host) and `[[rule]]` (settings for some
//! paths), with their checks.

use super::*;

/// A `[[rule]]` (every site) or `[[site.rule]]` (one site) block: settings for the
/// paths its `path` matches (docs/http.md W1-W4).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RuleSettings {
    /// `/PREFIX`, `=/EXACT` or a glob (`*.js`, `/static/**/*.css`).
    pub path: RulePath,
    /// Response header fields to add: `{ "Cache-Control" = "public, max-age=600" }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `Cache-Control: max-age` and `Expires` this far ahead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<Age>,
    /// Content types by extension: `{ "rpm" = "application/x-rpm" }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub types: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoindex: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dotfiles: Option<bool>,
    /// How entity tags are made under the path: mtime, content or off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etag: Option<EtagMode>,
    /// Error pages: `{ 404 = "/errors/404.html" }`, served with the status.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, String>,
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
    pub fallback: Option<FallbackSetting>,
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
    pub try_files: Vec<String>,
    /// `X-Content-Type-Options: nosniff`, `Referrer-Policy:
    /// strict-origin-when-cross-origin` and `X-Frame-Options: SAMEORIGIN` (each unless
    /// `headers` names it); false turns a less specific rule's off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_headers: Option<bool>,
    /// `Strict-Transport-Security: max-age` of this on answers over HTTPS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hsts: Option<Age>,
    /// An htpasswd file (bcrypt, `htpasswd -B`) whose users alone may have these paths:
    /// others get 401 (HTTP Basic).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub htpasswd: Option<PathBuf>,
    /// Cross-origin reads: `{ origins = ["https://app.example.com"], headers =
    /// ["X-Requested-With"], max-age = "10m", credentials = false, expose = [...] }`;
    /// OPTIONS preflights answered 204.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<CorsSettings>,
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
    pub fn to_rule(&self, site: bool) -> Result<Rule, String> {
        let at = |why: String| format!("rule {}: {why}", self.path);
        for (n, v) in &self.headers {
            if !token(n) {
                return Err(at(format!("headers: '{n}' is not a field name")));
            }
            if !field_value(v) {
                return Err(at(format!(
                    "headers: {n}'s value holds a byte other than visible ASCII and spaces"
                )));
            }
        }
        for (ext, t) in &self.types {
            if ext.is_empty() || ext.contains(['.', '/']) || !field_value(t) {
                return Err(at(format!(
                    "types: '{ext}' = '{t}' (give an extension and a type)"
                )));
            }
        }
        let mut errors = Vec::new();
        for (code, page) in &self.errors {
            let status: u16 = code
                .parse()
                .ok()
                .filter(|s| (400..=599).contains(s))
                .ok_or_else(|| at(format!("errors: '{code}' is not a 4xx or 5xx status")))?;
            if !page.starts_with('/') {
                return Err(at(format!("errors: '{page}' must start with /")));
            }
            errors.push((status, page.clone()));
        }
        for t in &self.try_files {
            let fixed = t.replace("{path}", "");
            if !(t.starts_with('/') || t.starts_with("{path}")) || fixed.contains(['{', '}']) {
                return Err(at(format!(
                    "try: '{t}' is not a path in the site (/PATH, or {{path}} with text after it)"
                )));
            }
        }
        let cors = self
            .cors
            .as_ref()
            .map(CorsSettings::checked)
            .transpose()
            .map_err(at)?;
        let redirect = match (&self.redirect, self.redirect_code) {
            (Some(to), code) => {
                let code = code.unwrap_or(301);
                if ![301, 302, 303, 307, 308].contains(&code) {
                    return Err(at(format!(
                        "redirect-code: {code} is not 301, 302, 303, 307 or 308"
                    )));
                }
                if !linerate_http::location::valid_target(to) {
                    return Err(at(format!(
                        "redirect: '{to}' is neither a path on the site (\"/new/\") nor an absolute http or https URL"
                    )));
                }
                Some(Redirect {
                    to: to.clone(),
                    code,
                })
            }
            (None, Some(_)) => return Err(at("redirect-code without redirect".into())),
            (None, None) => None,
        };
        Ok(Rule {
            path: Some(self.path.0.clone()),
            headers: self
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
            expires: self.expires.map(|a| a.0),
            types: self
                .types
                .iter()
                .map(|(x, t)| (x.to_ascii_lowercase(), t.clone()))
                .collect(),
            autoindex: self.autoindex,
            dotfiles: self.dotfiles,
            etag: self.etag,
            errors,
            redirect,
            fallback: self.fallback.as_ref().map(|f| match f {
                FallbackSetting::Page(p) => Fallback::Page(p.0.clone()),
                FallbackSetting::Off => Fallback::Off,
            }),
            try_files: self.try_files.clone(),
            security_headers: self.security_headers,
            hsts: self.hsts.map(|a| a.0),
            cors,
            htpasswd: self.htpasswd.clone(),
            access: (!self.allow.is_empty() || !self.deny.is_empty()).then(|| Access {
                allow: self.allow.clone(),
                deny: self.deny.clone(),
            }),
            site,
        })
    }
}

/// A site's name: `docs.example.com`, or `*.example.com` for every name under
/// `example.com` (not `example.com` itself); kept in lower case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteName(pub String);

impl FromStr for SiteName {
    type Err = String;
    fn from_str(s: &str) -> Result<SiteName, String> {
        let t = s.trim().trim_end_matches('.').to_ascii_lowercase();
        let bare = t.strip_prefix("*.").unwrap_or(&t);
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if bare.is_empty() || bare.len() > 253 || !bare.split('.').all(label_ok) {
            return Err(format!(
                "'{s}' is not a host name (docs.example.com, or *.example.com for the names under it)"
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
    /// `[[site.rule]]` blocks: per-path settings for this site.
    #[serde(default, rename = "rule", skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSettings>,
}

/// The blocks together: at most one default, no name in two sites, a name for each
/// site but the default.
pub(super) fn check_sites(sites: &[SiteSettings]) -> Result<(), String> {
    let defaults = sites.iter().filter(|s| s.default).count();
    if defaults > 1 {
        return Err(format!(
            "site: {defaults} blocks say default = true; one site answers unknown hosts"
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, s) in sites.iter().enumerate() {
        if s.tls_cert.is_some() != s.tls_key.is_some() {
            return Err(format!(
                "site #{} ({}): tls-cert and tls-key go together",
                i + 1,
                s.root.display()
            ));
        }
        if s.names.is_empty() && !s.default {
            return Err(format!(
                "site #{} ({}): give it names, or default = true",
                i + 1,
                s.root.display()
            ));
        }
        for n in &s.names {
            if seen.contains(&n.0.as_str()) {
                return Err(format!("site: '{}' is named by two sites", n.0));
            }
            seen.push(&n.0);
        }
    }
    Ok(())
}
