//! Which site of several answers a request: by name, as nginx's `server_name`.

use crate::config::SiteConfig;

/// Which site answers a request, by its authority (absolute-form target, else `Host`):
/// port left out, case ignored, a final dot ignored; an exact name first, then the
/// longest `*.` name it falls under, then the default site (the one marked, else the
/// first).
#[derive(Debug)]
pub(crate) struct Router {
    exact: std::collections::HashMap<String, usize>,
    /// `*.example.com` as `.example.com`, longest first.
    wildcards: Vec<(String, usize)>,
    default: usize,
}

impl Router {
    pub fn new(sites: &[SiteConfig]) -> Router {
        let mut exact = std::collections::HashMap::new();
        let mut wildcards = Vec::new();
        for (i, s) in sites.iter().enumerate() {
            for n in &s.names {
                match n.strip_prefix('*') {
                    Some(suffix) => wildcards.push((suffix.to_string(), i)),
                    None => {
                        exact.insert(n.clone(), i);
                    }
                }
            }
        }
        wildcards.sort_by_key(|(w, _)| std::cmp::Reverse(w.len()));
        Router {
            exact,
            wildcards,
            default: sites.iter().position(|s| s.default).unwrap_or(0),
        }
    }

    /// The site for `authority` (`host`, `host:port`, `[v6]:port`; none: the default).
    pub fn route(&self, authority: Option<&str>) -> usize {
        let Some(a) = authority else {
            return self.default;
        };
        let host = match a.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => match a.rsplit_once(':') {
                Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
                _ => a,
            },
        };
        let host = host.trim_end_matches('.');
        // Lower-cased on the stack: routing allocates nothing for a name of up to 255
        // bytes (names are at most 253).
        let mut buf = [0u8; 255];
        let owned;
        let host = match buf.get_mut(..host.len()) {
            Some(b) => {
                b.copy_from_slice(host.as_bytes());
                b.make_ascii_lowercase();
                // ASCII lower-casing keeps UTF-8 valid.
                std::str::from_utf8(b).unwrap_or_default()
            }
            None => {
                owned = host.to_ascii_lowercase();
                owned.as_str()
            }
        };
        if let Some(&i) = self.exact.get(host) {
            return i;
        }
        self.wildcards
            .iter()
            .find(|(suffix, _)| host.len() > suffix.len() && host.ends_with(suffix.as_str()))
            .map_or(self.default, |&(_, i)| i)
    }
}
