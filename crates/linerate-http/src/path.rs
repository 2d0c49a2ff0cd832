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
    /// The segments, decoded (arbitrary bytes but `/` and NUL).
    pub segments: Vec<Vec<u8>>,
    /// The request path names a directory: it ends in `/`, or in a `.` or `..` segment
    /// (`/a/.`, `/a/b/..`), as nginx reads it. A file named so is 404.
    pub trailing_slash: bool,
}

impl Resolved {
    /// The path relative to the root, segments joined by `/` (empty for the root).
    pub fn relative(&self) -> Vec<u8> {
        self.segments.join(&b'/')
    }
}

/// Resolves a request path (still percent-encoded, starting with `/`).
pub fn resolve(raw: &str, allow_dotfiles: bool) -> Result<Resolved, Status> {
    if !raw.starts_with('/') {
        return Err(Status::BadRequest);
    }
    let mut segments: Vec<Vec<u8>> = Vec::new();
    let mut names_directory = false;
    for seg in raw[1..].split('/') {
        let decoded = decode(seg)?;
        names_directory = matches!(&decoded[..], b"" | b"." | b"..");
        if decoded.contains(&0) {
            return Err(Status::BadRequest);
        }
        match &decoded[..] {
            b"" | b"." => {}
            b".." => {
                if segments.pop().is_none() {
                    return Err(Status::BadRequest);
                }
            }
            d => {
                if d.contains(&b'/') {
                    return Err(Status::NotFound);
                }
                if d[0] == b'.' && !allow_dotfiles {
                    return Err(Status::NotFound);
                }
                segments.push(decoded);
            }
        }
    }
    Ok(Resolved {
        segments,
        trailing_slash: names_directory,
    })
}

fn decode(seg: &str) -> Result<Vec<u8>, Status> {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
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
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn segs(raw: &str) -> Result<Vec<String>, Status> {
        resolve(raw, false).map(|r| {
            r.segments
                .iter()
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
                for s in &r.segments {
                    prop_assert!(!s.is_empty());
                    prop_assert!(s != b"." && s != b"..");
                    prop_assert!(!s.contains(&b'/') && !s.contains(&0));
                }
                let joined = std::path::Path::new("/root").join(std::str::from_utf8(&r.relative()).unwrap_or("x"));
                prop_assert!(joined.starts_with("/root"));
            }
        }

        #[test]
        fn never_panics(raw in ".{0,64}") {
            let _ = resolve(&raw, false);
        }
    }
}
