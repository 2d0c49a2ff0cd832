//! CORS, one feature in one file: the keys of a rule's `cors` table
//! ([`CorsSettings`], read by serde, with their check), and what a path that admits
//! cross-origin reads answers ([`Cors`]: the fields of an answer, and of the 204 to a
//! preflight), as the Fetch standard's CORS protocol asks a server to say. The site
//! calls it for OPTIONS and for the fields of every answer under such a rule
//! (docs/http.md W9); the rules merge it whole (`Rule::cors`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::settings::{field_value, token, Age, ConfigError, ValueError};

/// A rule's `cors` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CorsSettings {
    /// Origins that may read (`scheme://host[:port]`), or `"*"` for any.
    pub origins: Vec<String>,
    /// Methods a preflight may ask for: GET and HEAD, the ones the server answers
    /// [default: both].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Request header fields a preflight may ask for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// How long a browser keeps a preflight's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age: Option<Age>,
    /// Requests with credentials may read (then the origins must be listed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub credentials: bool,
    /// Response fields a script may read beyond the safelisted ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expose: Vec<String>,
}

impl CorsSettings {
    /// The table, checked: origins are `*` or `scheme://host[:port]`, methods are GET
    /// or HEAD, field names are tokens, credentials come with listed origins.
    pub(crate) fn checked(&self) -> Result<Cors, ConfigError> {
        let refused = |key: &str, e| Err(ConfigError::at_key(format!("cors{key}"), e));
        if self.origins.is_empty() {
            return refused(
                ": origins",
                ValueError::kind("list the origins that may read, or \"*\""),
            );
        }
        let any_origin = self.origins.iter().any(|o| o == "*");
        for o in self.origins.iter().filter(|o| *o != "*") {
            let ok = o.split_once("://").is_some_and(|(scheme, rest)| {
                matches!(scheme, "http" | "https")
                    && !rest.is_empty()
                    && !rest.contains(['/', '?', '#', ' ', '*'])
            }) && field_value(o);
            if !ok {
                let is = "not an origin (https://app.example.com[:port], or \"*\")";
                return refused(": origins", ValueError::is(o, is));
            }
        }
        if any_origin && self.credentials {
            return refused(
                "",
                ValueError::kind("credentials need the origins listed, not \"*\""),
            );
        }
        for m in &self.methods {
            if m != "GET" && m != "HEAD" {
                let says = "the server answers GET and HEAD alone";
                return refused(": methods", ValueError::says(m, says));
            }
        }
        for f in self.headers.iter().chain(&self.expose) {
            if !token(f) {
                return refused("", ValueError::is(f, "not a field name"));
            }
        }
        Ok(Cors {
            origins: self.origins.iter().filter(|o| *o != "*").cloned().collect(),
            any_origin,
            methods: if self.methods.is_empty() {
                vec!["GET".into(), "HEAD".into()]
            } else {
                self.methods.clone()
            },
            headers: self.headers.clone(),
            max_age: self.max_age.map(|a| a.0),
            credentials: self.credentials,
            expose: self.expose.clone(),
        })
    }
}

/// Cross-origin requests a path admits (`cors`), as the Fetch standard's CORS
/// protocol asks a server to say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cors {
    /// Origins (`https://app.example.com`) that may read the answers.
    pub origins: Vec<String>,
    /// `*`: every origin (never with `credentials`).
    pub any_origin: bool,
    /// Methods a preflight may ask for (GET and HEAD, what the server answers).
    pub methods: Vec<String>,
    /// Request header fields a preflight may ask for.
    pub headers: Vec<String>,
    /// How long a browser may keep a preflight's answer.
    pub max_age: Option<Duration>,
    /// Requests with credentials (cookies, HTTP authentication) may read the answers.
    pub credentials: bool,
    /// Response header fields the page's script may read beyond the safelisted ones.
    pub expose: Vec<String>,
}

impl Cors {
    /// The `Access-Control-Allow-Origin` value for `origin`, if it may read.
    pub fn allow_origin<'a>(&self, origin: &'a str) -> Option<&'a str> {
        if self.any_origin && !self.credentials {
            Some("*")
        } else if self.any_origin || self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            Some(origin)
        } else {
            None
        }
    }

    /// The fields of an answer to a request from `origin` (none: not a CORS request):
    /// always `Vary: Origin` (the answer depends on it); for an origin that may read,
    /// `Access-Control-Allow-Origin`, with credentials and exposed fields as set.
    pub fn fields(&self, origin: Option<&str>, out: &mut Vec<(String, String)>) {
        out.push(("Vary".into(), "Origin".into()));
        let Some(allowed) = origin.and_then(|o| self.allow_origin(o)) else {
            return;
        };
        out.push(("Access-Control-Allow-Origin".into(), allowed.into()));
        if self.credentials {
            out.push(("Access-Control-Allow-Credentials".into(), "true".into()));
        }
        if !self.expose.is_empty() {
            out.push((
                "Access-Control-Expose-Headers".into(),
                self.expose.join(", "),
            ));
        }
    }

    /// The fields of the answer (204) to a preflight from `origin` asking for `method`
    /// and the header fields `headers`: the allow fields if the origin, the method and
    /// every field asked for are admitted; else `Vary` alone, so the browser refuses.
    pub fn preflight(
        &self,
        origin: &str,
        method: &str,
        headers: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut out = vec![(
            "Vary".to_string(),
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers".to_string(),
        )];
        let Some(allowed) = self.allow_origin(origin) else {
            return out;
        };
        let method_ok = self.methods.iter().any(|m| m == method);
        let headers_ok = headers.is_none_or(|h| {
            h.split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .all(|f| self.headers.iter().any(|a| a.eq_ignore_ascii_case(f)))
        });
        if !(method_ok && headers_ok) {
            return out;
        }
        out.push(("Access-Control-Allow-Origin".into(), allowed.into()));
        out.push((
            "Access-Control-Allow-Methods".into(),
            self.methods.join(", "),
        ));
        if !self.headers.is_empty() {
            out.push((
                "Access-Control-Allow-Headers".into(),
                self.headers.join(", "),
            ));
        }
        if let Some(d) = self.max_age {
            out.push(("Access-Control-Max-Age".into(), d.as_secs().to_string()));
        }
        if self.credentials {
            out.push(("Access-Control-Allow-Credentials".into(), "true".into()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Cors, String> {
        toml::from_str::<CorsSettings>(text)
            .map_err(|e| e.to_string())?
            .checked()
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_table_is_checked_and_a_preflight_answered_as_it_says() {
        for (text, why) in [
            ("origins = []", "list the origins"),
            (
                "origins = [\"*\"]\ncredentials = true",
                "credentials need the origins",
            ),
            ("origins = [\"app.example\"]", "is not an origin"),
            (
                "origins = [\"*\"]\nmethods = [\"POST\"]",
                "GET and HEAD alone",
            ),
            (
                "origins = [\"*\"]\nheaders = [\"a b\"]",
                "is not a field name",
            ),
        ] {
            let e = table(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let c =
            table("origins = [\"https://app.example\"]\nheaders = [\"X-A\"]\nmax-age = \"10m\"")
                .unwrap();
        assert_eq!(c.methods, ["GET", "HEAD"], "both by default");
        let fields = c.preflight("https://app.example", "GET", Some("x-a"));
        let has = |n: &str| fields.iter().any(|(f, _)| f == n);
        assert!(has("Access-Control-Allow-Origin") && has("Access-Control-Max-Age"));
        // Another origin, or a field not listed: Vary alone, and the browser refuses.
        assert_eq!(c.preflight("https://evil.example", "GET", None).len(), 1);
        assert_eq!(
            c.preflight("https://app.example", "GET", Some("X-B")).len(),
            1
        );
    }
}
