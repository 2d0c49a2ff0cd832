//! Validators (`ETag`, `Last-Modified`) and the preconditions of RFC 9110 §13, evaluated
//! in its order: `If-Match`, `If-Unmodified-Since`, `If-None-Match`,
//! `If-Modified-Since`; and `If-Range` for Range requests.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A file's validators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validators {
    /// Strong entity tag, quoted; empty when the answer has none (`etag = "off"`, or
    /// a digest not computed yet), which no tag in a request matches.
    pub etag: String,
    /// Modification time, whole seconds (what `Last-Modified` can say).
    pub last_modified: SystemTime,
}

impl Validators {
    /// Validators of a file: the tag from its size and its mtime in nanoseconds, so a
    /// same-size rewrite within one second still changes it. Nothing of the machine
    /// (inode, device) is in it, so identical instances agree.
    pub fn new(size: u64, mtime: SystemTime) -> Validators {
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        Validators {
            etag: format!("\"{size:x}-{:x}\"", since.as_nanos()),
            ..Validators::dated(mtime)
        }
    }

    /// `Last-Modified` alone: no entity tag.
    pub fn dated(mtime: SystemTime) -> Validators {
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        Validators {
            etag: String::new(),
            last_modified: UNIX_EPOCH + Duration::from_secs(since.as_secs()),
        }
    }

    /// The tag from a digest of the bytes (at least 16 bytes of it, as hex), with the
    /// file's `Last-Modified`.
    pub fn of_digest(digest: &[u8], mtime: SystemTime) -> Validators {
        let mut etag = String::with_capacity(36);
        etag.push('"');
        for b in digest.iter().take(16) {
            etag.push_str(&format!("{b:02x}"));
        }
        etag.push('"');
        Validators {
            etag,
            ..Validators::dated(mtime)
        }
    }

    /// `Last-Modified` as an HTTP date.
    pub fn last_modified_http(&self) -> String {
        httpdate::fmt_http_date(self.last_modified)
    }
}

/// The outcome of the preconditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Serve the request.
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// The `If-*` fields of a request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Conditions<'a> {
    /// If-Match
    pub if_match: Option<&'a str>,
    /// If-None-Match
    pub if_none_match: Option<&'a str>,
    /// If-Modified-Since
    pub if_modified_since: Option<&'a str>,
    /// If-Unmodified-Since
    pub if_unmodified_since: Option<&'a str>,
}

/// An entity tag of a list: weak or not, and its opaque part with quotes.
fn tags(list: &str) -> Option<Vec<(bool, &str)>> {
    let mut out = Vec::new();
    let mut s = list.trim_matches([' ', '\t']);
    while !s.is_empty() {
        let (weak, rest) = match s.strip_prefix("W/") {
            Some(r) => (true, r),
            None => (false, s),
        };
        if !rest.starts_with('"') {
            return None;
        }
        let close = rest[1..].find('"')? + 2;
        out.push((weak, &rest[..close]));
        s = rest[close..].trim_start_matches([' ', '\t']);
        if let Some(r) = s.strip_prefix(',') {
            s = r.trim_start_matches([' ', '\t', ',']);
        } else if !s.is_empty() {
            return None;
        }
    }
    Some(out)
}

fn strong_match(list: &str, etag: &str) -> bool {
    if list.trim() == "*" {
        return true;
    }
    tags(list).is_some_and(|t| t.iter().any(|&(weak, tag)| !weak && tag == etag))
}

fn weak_match(list: &str, etag: &str) -> bool {
    if list.trim() == "*" {
        return true;
    }
    tags(list).is_some_and(|t| t.iter().any(|&(_, tag)| tag == etag))
}

fn date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s.trim()).ok()
}

/// Evaluates the preconditions for a GET or HEAD (`safe`) or another method.
pub fn evaluate(c: &Conditions<'_>, v: &Validators, safe: bool) -> Precondition {
    if let Some(im) = c.if_match {
        if !strong_match(im, &v.etag) {
            return Precondition::Failed;
        }
    } else if let Some(d) = c.if_unmodified_since.and_then(date) {
        if v.last_modified > d {
            return Precondition::Failed;
        }
    }
    if let Some(inm) = c.if_none_match {
        if weak_match(inm, &v.etag) {
            return if safe {
                Precondition::NotModified
            } else {
                Precondition::Failed
            };
        }
    } else if safe {
        if let Some(d) = c.if_modified_since.and_then(date) {
            if v.last_modified <= d {
                return Precondition::NotModified;
            }
        }
    }
    Precondition::Proceed
}

/// Whether `If-Range: value` lets a Range apply: only a strong validator can. An entity
/// tag must match strongly; a date must equal `Last-Modified` exactly, and counts as
/// strong only if the file was last changed at least a second before `now`.
pub fn if_range_allows(value: &str, v: &Validators, now: SystemTime) -> bool {
    let value = value.trim();
    if value.starts_with('"') || value.starts_with("W/") {
        return tags(value).is_some_and(|t| t.len() == 1 && !t[0].0 && t[0].1 == v.etag);
    }
    match date(value) {
        Some(d) => {
            d == v.last_modified
                && now
                    .duration_since(v.last_modified)
                    .is_ok_and(|a| a >= Duration::from_secs(1))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v() -> Validators {
        Validators::new(100, UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789))
    }

    fn c<'a>(
        if_match: Option<&'a str>,
        if_none_match: Option<&'a str>,
        ims: Option<&'a str>,
        ius: Option<&'a str>,
    ) -> Conditions<'a> {
        Conditions {
            if_match,
            if_none_match,
            if_modified_since: ims,
            if_unmodified_since: ius,
        }
    }

    /// Rules: docs/http.md F1.
    #[test]
    fn etag_changes_with_a_same_size_rewrite_in_the_same_second() {
        let a = Validators::new(100, UNIX_EPOCH + Duration::new(1_700_000_000, 1));
        let b = Validators::new(100, UNIX_EPOCH + Duration::new(1_700_000_000, 2));
        assert_ne!(a.etag, b.etag);
        assert_eq!(a.last_modified, b.last_modified);
    }

    /// Rules: docs/http.md F3.
    #[test]
    fn if_none_match() {
        let v = v();
        let e = v.etag.clone();
        assert_eq!(
            evaluate(&c(None, Some(&e), None, None), &v, true),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&c(None, Some(&format!("W/{e}")), None, None), &v, true),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&c(None, Some(&format!("\"x\", {e}")), None, None), &v, true),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&c(None, Some("*"), None, None), &v, true),
            Precondition::NotModified
        );
        assert_eq!(
            evaluate(&c(None, Some("\"other\""), None, None), &v, true),
            Precondition::Proceed
        );
        assert_eq!(
            evaluate(&c(None, Some(&e), None, None), &v, false),
            Precondition::Failed
        );
    }

    /// Rules: docs/http.md F3.
    #[test]
    fn if_match() {
        let v = v();
        let e = v.etag.clone();
        assert_eq!(
            evaluate(&c(Some(&e), None, None, None), &v, true),
            Precondition::Proceed
        );
        assert_eq!(
            evaluate(&c(Some("*"), None, None, None), &v, true),
            Precondition::Proceed
        );
        assert_eq!(
            evaluate(&c(Some(&format!("W/{e}")), None, None, None), &v, true),
            Precondition::Failed
        );
        assert_eq!(
            evaluate(&c(Some("\"nope\""), None, None, None), &v, true),
            Precondition::Failed
        );
    }

    /// Rules: docs/http.md F3.
    #[test]
    fn dates_in_all_three_formats() {
        let v = v();
        // Last-Modified is 2023-11-14 22:13:20 GMT.
        for later in [
            "Tue, 14 Nov 2023 22:13:20 GMT",
            "Tuesday, 14-Nov-23 22:13:20 GMT",
            "Tue Nov 14 22:13:20 2023",
        ] {
            assert_eq!(
                evaluate(&c(None, None, Some(later), None), &v, true),
                Precondition::NotModified,
                "{later}"
            );
            assert_eq!(
                evaluate(&c(None, None, None, Some(later)), &v, true),
                Precondition::Proceed,
                "{later}"
            );
        }
        let earlier = "Tue, 14 Nov 2023 22:13:19 GMT";
        assert_eq!(
            evaluate(&c(None, None, Some(earlier), None), &v, true),
            Precondition::Proceed
        );
        assert_eq!(
            evaluate(&c(None, None, None, Some(earlier)), &v, true),
            Precondition::Failed
        );
        assert_eq!(
            evaluate(&c(None, None, Some("garbage"), None), &v, true),
            Precondition::Proceed
        );
        // If-None-Match wins over If-Modified-Since.
        assert_eq!(
            evaluate(
                &c(
                    None,
                    Some("\"x\""),
                    Some("Tue, 14 Nov 2023 22:13:20 GMT"),
                    None
                ),
                &v,
                true
            ),
            Precondition::Proceed
        );
    }

    /// Rules: docs/http.md F3.
    #[test]
    fn if_range_needs_a_strong_validator() {
        let v = v();
        let now = v.last_modified + Duration::from_secs(60);
        assert!(if_range_allows(&v.etag, &v, now));
        assert!(!if_range_allows(&format!("W/{}", v.etag), &v, now));
        assert!(!if_range_allows("\"other\"", &v, now));
        assert!(if_range_allows(&v.last_modified_http(), &v, now));
        assert!(!if_range_allows(
            &v.last_modified_http(),
            &v,
            v.last_modified
        ));
        assert!(!if_range_allows("Tue, 14 Nov 2023 22:13:19 GMT", &v, now));
    }
}
