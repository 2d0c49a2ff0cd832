//! `Location` values built from a request: the rest of a path and a query put after a
//! target the operator configured, percent-encoded so that nothing the client sent can
//! end the field, start another one, or move the redirect to another origin.
//!
//! The origin rule follows the WHATWG URL standard, which is what browsers apply to a
//! `Location`: for `http` and `https` a backslash in a path is a slash, a value starting
//! with two slashes (or a slash and a backslash) names a host, and TAB, CR and LF are
//! dropped wherever they are. So the request's bytes are encoded (every byte but the
//! unreserved characters, the sub-delimiters, `:`, `@` and `/`), and a target that is a
//! path never yields a value starting with `//`. A target that is an absolute URL is
//! the operator's own and may name another origin.

/// `byte` stays as it is in a path taken from a request.
fn path_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b)
}

/// `byte` stays as it is in a query taken from a request (which is still encoded as the
/// client sent it, so `%` stays).
fn query_safe(b: u8) -> bool {
    path_safe(b) || b == b'?' || b == b'%'
}

fn encode_into(out: &mut String, bytes: &[u8], keep: fn(u8) -> bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if keep(b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
}

/// `bytes` percent-encoded for a path (`/` kept).
pub fn encode_path(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    encode_into(&mut out, bytes, path_safe);
    out
}

/// Whether a configured redirect target is one [`build`] takes: a path (`/new/`, not
/// `//host` or `/\host`) or an absolute `http`/`https` URL with a host, in visible
/// ASCII without a backslash or fragment.
pub fn valid_target(to: &str) -> bool {
    let visible =
        !to.is_empty() && to.bytes().all(|b| b.is_ascii_graphic()) && !to.contains(['\\', '#']);
    if !visible {
        return false;
    }
    if to.starts_with('/') {
        return !to.starts_with("//");
    }
    let rest = to
        .strip_prefix("https://")
        .or_else(|| to.strip_prefix("http://"));
    rest.is_some_and(|r| {
        let host = r.split(['/', '?']).next().unwrap_or("");
        !host.is_empty() && !host.starts_with(':') && !host.contains('@')
    })
}

/// The `Location` for a redirect to `to` (checked by [`valid_target`]) with the rest of
/// the request's path (decoded bytes) after it and the request's query (as sent).
pub fn build(to: &str, rest: &[u8], query: Option<&str>) -> String {
    let mut out = String::with_capacity(to.len() + rest.len() + 16);
    out.push_str(to);
    // An absolute target with no path (`https://example.com`) gets its `/` first:
    // what follows must never extend the host (`.evil.net`), add user information
    // (`@evil.net`) or a port.
    if let Some(authority) = to.find("://").map(|i| i + 3) {
        let end = to[authority..]
            .find(['/', '?'])
            .map_or(to.len(), |i| authority + i);
        if !to[end..].starts_with('/') {
            out.insert(end, '/');
        }
    }
    let to = out.clone();
    let to = to.as_str();
    let rest = if to.ends_with('/') {
        let start = rest.iter().position(|&b| b != b'/').unwrap_or(rest.len());
        &rest[start..]
    } else {
        rest
    };
    encode_into(&mut out, rest, path_safe);
    if to.starts_with('/') && out.starts_with("//") {
        // `to = "/"` with an empty rest cannot get here; a path target that became
        // `//…` (a prefix without its slash: `/old` + `/x` after `/`) loses the extra
        // slashes instead of naming a host.
        let keep = out.trim_start_matches('/').len();
        out.replace_range(..out.len() - keep, "/");
    }
    if let Some(q) = query {
        out.push(if out.contains('?') { '&' } else { '?' });
        encode_into(&mut out, q.as_bytes(), query_safe);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_is_encoded_and_cannot_end_the_field() {
        assert_eq!(
            build("/dest/", b"\r\nSet-Cookie:x=1", None),
            "/dest/%0D%0ASet-Cookie:x=1"
        );
        assert_eq!(
            build("/dest/", b"a b\tc", Some("q=1")),
            "/dest/a%20b%09c?q=1"
        );
        assert_eq!(build("/d/", "é".as_bytes(), None), "/d/%C3%A9");
    }

    #[test]
    fn a_path_target_never_names_a_host() {
        assert_eq!(build("/", b"\\evil.example", None), "/%5Cevil.example");
        assert_eq!(build("/", b"/evil.example", None), "/evil.example");
        assert_eq!(build("/", b"//evil.example", None), "/evil.example");
        assert_eq!(build("/x", b"/y", None), "/x/y");
        assert_eq!(build("/", b"", Some("a=1")), "/?a=1");
    }

    #[test]
    fn the_query_is_kept_as_sent_but_for_what_cannot_be_in_a_field() {
        assert_eq!(build("/n", b"", Some("a=%20b&c=d")), "/n?a=%20b&c=d");
        assert_eq!(build("/n?x=1", b"", Some("a\\b#c")), "/n?x=1&a%5Cb%23c");
    }

    #[test]
    fn an_absolute_target_without_a_path_keeps_its_host() {
        assert_eq!(
            build("https://example.com", b".evil.net/x", None),
            "https://example.com/.evil.net/x"
        );
        assert_eq!(
            build("https://example.com", b"@evil.net", None),
            "https://example.com/@evil.net"
        );
        assert_eq!(
            build("https://example.com:8443", b":1234", None),
            "https://example.com:8443/:1234"
        );
        assert_eq!(
            build("https://example.com?a=1", b"", Some("b")),
            "https://example.com/?a=1&b"
        );
        assert_eq!(
            build("https://example.com/", b"/x", None),
            "https://example.com/x"
        );
    }

    #[test]
    fn targets() {
        for ok in [
            "/",
            "/new/",
            "/a?b=c",
            "https://example.com",
            "http://e.x:8080/p",
        ] {
            assert!(valid_target(ok), "{ok}");
        }
        for bad in [
            "",
            "//evil.example",
            "/\\evil",
            "new/",
            "https://",
            "https:///x",
            "ftp://x/",
            "/a b",
            "/a#b",
            "https://u@evil/",
            "javascript:alert(1)",
        ] {
            assert!(!valid_target(bad), "{bad}");
        }
    }
}
