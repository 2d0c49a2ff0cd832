//! Request path → path under the document root. Percent-decoded exactly once; `%2F`
//! inside a segment never becomes a separator (404); `%00` and malformed escapes are
//! 400; `.` and empty segments vanish; `..` removes the previous segment and is 400 if
//! there is none; dot-files and dot-directories are 404 unless allowed. The result is a
//! list of plain segments, so it is always under the root (property-tested); symbolic
//! links are the caller's to contain (`openat2` with `RESOLVE_BENEATH`).

use crate::Status;

/// A resolved path: segments under the root, none empty, `.`, `..` or holding `/`/NUL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The segments, decoded (arbitrary bytes but `/` and NUL), joined by `/`: one
    /// buffer, decoded into as the path is read.
    relative: Vec<u8>,
    /// The request path names a directory: it ends in `/`, or in a `.` or `..` segment
    /// (`/a/.`, `/a/b/..`), as nginx reads it. A file named so is 404.
    pub trailing_slash: bool,
}

impl Resolved {
    /// The path relative to the root, segments joined by `/` (empty for the root).
    pub fn relative(&self) -> &[u8] {
        &self.relative
    }

    /// The segments, in order (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        self.relative
            .split(|&b| b == b'/')
            .filter(|_| !self.relative.is_empty())
    }
}

/// Resolves a request path (still percent-encoded, starting with `/`).
pub fn resolve(raw: &str, allow_dotfiles: bool) -> Result<Resolved, Status> {
    if !raw.starts_with('/') {
        return Err(Status::BadRequest);
    }
    let mut relative = Vec::with_capacity(raw.len());
    let mut names_directory = false;
    for seg in raw[1..].split('/') {
        // Decoded in place after the segments before it and a separator.
        let before = relative.len();
        if before > 0 {
            relative.push(b'/');
        }
        let start = relative.len();
        decode(seg, &mut relative)?;
        let decoded = &relative[start..];
        names_directory = matches!(decoded, b"" | b"." | b"..");
        if decoded.contains(&0) {
            return Err(Status::BadRequest);
        }
        match decoded {
            b"" | b"." => relative.truncate(before),
            b".." => {
                if before == 0 {
                    return Err(Status::BadRequest);
                }
                // The segment before goes, with its separator.
                let previous = relative[..before].iter().rposition(|&b| b == b'/');
                relative.truncate(previous.unwrap_or(0));
            }
            d => {
                if d.contains(&b'/') {
                    return Err(Status::NotFound);
                }
                if d[0] == b'.' && !allow_dotfiles {
                    return Err(Status::NotFound);
                }
            }
        }
    }
    Ok(Resolved {
        relative,
        trailing_slash: names_directory,
    })
}

/// Appends `seg` percent-decoded to `out`.
fn decode(seg: &str, out: &mut Vec<u8>) -> Result<(), Status> {
    let b = seg.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => return Err(Status::BadRequest),
            }
            i += 3;
        } else {
            // Up to the next escape at once.
            let n = memchr::memchr(b'%', &b[i..]).unwrap_or(b.len() - i);
            out.extend_from_slice(&b[i..i + n]);
            i += n;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn segs(raw: &str) -> Result<Vec<String>, Status> {
        resolve(raw, false).map(|r| {
            r.segments()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }

    /// Rules: docs/http.md P3, P4, F5, F6.
    #[test]
    fn rules() {
        assert_eq!(segs("/"), Ok(vec![]));
        assert_eq!(segs("/a/b.html"), Ok(vec!["a".into(), "b.html".into()]));
        assert_eq!(segs("/a//./b/../c"), Ok(vec!["a".into(), "c".into()]));
        assert_eq!(segs("/a%20b"), Ok(vec!["a b".into()]));
        assert_eq!(
            segs("/a%252F"),
            Ok(vec!["a%2F".into()]),
            "decoded once only"
        );
        assert_eq!(segs("/a%2Fb"), Err(Status::NotFound));
        assert_eq!(segs("/a\\b"), Ok(vec!["a\\b".into()]));
        assert_eq!(segs("/.."), Err(Status::BadRequest));
        assert_eq!(segs("/a/../.."), Err(Status::BadRequest));
        assert_eq!(segs("/%2e%2e/x"), Err(Status::BadRequest));
        assert_eq!(segs("/a%00"), Err(Status::BadRequest));
        assert_eq!(segs("/a%zz"), Err(Status::BadRequest));
        assert_eq!(segs("/a%2"), Err(Status::BadRequest));
        assert_eq!(segs("/.git/config"), Err(Status::NotFound));
        assert_eq!(segs("/a/.hidden"), Err(Status::NotFound));
        assert!(resolve("/.well-known/x", true).is_ok());
        assert_eq!(segs("a"), Err(Status::BadRequest));
        assert!(resolve("/dir/", false).unwrap().trailing_slash);
        assert!(resolve("/", false).unwrap().trailing_slash);
        assert!(!resolve("/f.bin", false).unwrap().trailing_slash);
        for dir in [
            "/f.bin/.",
            "/f.bin/%2e",
            "/f.bin/x/..",
            "/f.bin//",
            "/f.bin/./",
        ] {
            let r = resolve(dir, false).unwrap();
            assert!(r.trailing_slash, "{dir} names a directory");
            assert_eq!(r.relative(), b"f.bin", "{dir}");
        }
    }

    proptest! {
        /// Rules: docs/http.md F6.
        #[test]
        fn always_under_the_root(raw in "/[a-zA-Z0-9%./\\\\_-]{0,40}") {
            if let Ok(r) = resolve(&raw, true) {
                for s in r.segments() {
                    prop_assert!(!s.is_empty());
                    prop_assert!(s != b"." && s != b"..");
                    prop_assert!(!s.contains(&b'/') && !s.contains(&0));
                }
                let joined = std::path::Path::new("/root").join(std::str::from_utf8(r.relative()).unwrap_or("x"));
                prop_assert!(joined.starts_with("/root"));
            }
        }

        #[test]
        fn never_panics(raw in ".{0,64}") {
            let _ = resolve(&raw, false);
        }
    }
}
