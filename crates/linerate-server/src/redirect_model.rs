//! A model run of one site against any request path: rules of every kind that answer
//! from the path (redirects by prefix, exact path and glob, to paths and to an absolute
//! URL, with and without a trailing slash; a fallback, one switched off, error pages;
//! directories redirected to their `/`), and the checks issue 28 asked for:
//!
//! - every line of every head holds visible ASCII and spaces only (no byte the client
//!   sent can end a field or start another);
//! - every `Location` resolves, under the WHATWG URL rules (the `url` crate, as
//!   browsers), to the site's own origin, or, when it starts with the absolute URL a
//!   rule names, to that URL's origin (a bare host is never extended: `.evil.net`,
//!   `@evil.net`, a port).
//!
//! The property test of `site.rs` and the `redirects` fuzz target both run it.

use std::cell::RefCell;
use std::path::Path;
use std::time::SystemTime;

use linerate_http::request::{parse, Parse};

use crate::config::Config;
use crate::response::Part;
use crate::site::Site;

/// The targets that may leave the site: rules' own absolute URLs (one with a path, one
/// a bare host that nothing from the request may extend).
const ELSEWHERE: &str = "https://other.example/new/";
const BARE_HOST: &str = "https://bare.example";

fn rules() -> String {
    format!(
        r#"
[[rule]]
path = "/"
errors = {{ 404 = "/errors/404.html" }}

[[rule]]
path = "/app/"
fallback = "/app/index.html"

[[rule]]
path = "/app/assets/"
fallback = false

[[rule]]
path = "/go/"
redirect = "/dest/"

[[rule]]
path = "/old"
redirect = "/"
redirect-code = 302

[[rule]]
path = "/x/"
redirect = "/x"

[[rule]]
path = "/far/"
redirect = "{ELSEWHERE}"
redirect-code = 308

[[rule]]
path = "/bare"
redirect = "{BARE_HOST}"

[[rule]]
path = "=/exact"
redirect = "/here?from=exact"

[[rule]]
path = "*.php"
redirect = "/"
"#
    )
}

/// A site over a temporary root with the rules above.
struct Model {
    _root: tempfile::TempDir,
    site: Site,
}

impl Model {
    fn new() -> Model {
        let root = tempfile::tempdir().expect("a temporary directory");
        let p = root.path();
        for (name, body) in [
            ("index.html", "home"),
            ("errors/404.html", "not here"),
            ("app/index.html", "app"),
            ("evil.example/index.html", "a directory named as a host"),
            ("dir/sub/a.txt", "a"),
        ] {
            put(p, name, body);
        }
        let mut cfg = Config::new(p.to_path_buf());
        crate::Settings::parse(&rules())
            .expect("the model's rules load")
            .apply(&mut cfg);
        let site = Site::alone(cfg);
        Model { _root: root, site }
    }

    fn check(&mut self, target: &[u8]) {
        let mut text = b"GET ".to_vec();
        text.extend_from_slice(target);
        text.extend_from_slice(b" HTTP/1.1\r\nHost: site.example\r\n\r\n");
        let req = match parse(&text, &self.site.limits()) {
            Parse::Complete { request, .. } => request,
            _ => return,
        };
        let mut r = self.site.respond(&req, None, SystemTime::UNIX_EPOCH);
        r.write_h1_head();
        let Some(Part::Bytes(head)) = r.plan.parts.front() else {
            panic!("a response starts with its head");
        };
        let end = head
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a head ends with an empty line");
        let site = url::Url::parse("http://site.example/").expect("a URL");
        for line in head[..end].split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            assert!(
                line.iter().all(|&b| b == b' ' || b.is_ascii_graphic()),
                "{:?}: a head line {:?}",
                String::from_utf8_lossy(target),
                String::from_utf8_lossy(line)
            );
            let line = String::from_utf8_lossy(line);
            let Some(loc) = line.strip_prefix("Location: ") else {
                continue;
            };
            let to = site.join(loc).expect("a Location a browser reads");
            // A rule's own absolute target is the origin it names; anything else the
            // site's.
            let own = [ELSEWHERE, BARE_HOST]
                .into_iter()
                .find(|t| loc.starts_with(t))
                .map_or(site.clone(), |t| url::Url::parse(t).expect("a URL"));
            assert_eq!(
                to.origin(),
                own.origin(),
                "{:?} -> {loc}",
                String::from_utf8_lossy(target)
            );
        }
    }
}

fn put(root: &Path, name: &str, body: &str) {
    let p = root.join(name);
    std::fs::create_dir_all(p.parent().expect("a parent")).expect("a directory");
    std::fs::write(p, body).expect("a file");
}

thread_local! {
    static MODEL: RefCell<Option<Model>> = const { RefCell::new(None) };
}

/// Answers `GET TARGET` (any bytes; those the request parser refuses are skipped) and
/// checks its head; panics on a violation.
pub fn run(target: &[u8]) {
    MODEL.with(|m| m.borrow_mut().get_or_insert_with(Model::new).check(target));
}

#[cfg(test)]
mod tests {
    proptest::proptest! {
        /// Issue 28: request paths against redirect, fallback and error-page rules never
        /// yield a header value with a control byte or a Location off the site (the
        /// checks of this model, which the `redirects` fuzz target runs too).
        #[test]
        fn no_request_path_writes_a_field_or_leaves_the_site(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("/".to_string()),
                    proptest::strategy::Just("//".to_string()),
                    proptest::strategy::Just("\\".to_string()),
                    proptest::strategy::Just("%5c".to_string()),
                    proptest::strategy::Just("%2f".to_string()),
                    proptest::strategy::Just("%0d%0a".to_string()),
                    proptest::strategy::Just("%09".to_string()),
                    proptest::strategy::Just("..".to_string()),
                    proptest::strategy::Just("go".to_string()),
                    proptest::strategy::Just("old".to_string()),
                    proptest::strategy::Just("x".to_string()),
                    proptest::strategy::Just("far".to_string()),
                    proptest::strategy::Just("bare".to_string()),
                    proptest::strategy::Just("@".to_string()),
                    proptest::strategy::Just(".evil.net".to_string()),
                    proptest::strategy::Just("app".to_string()),
                    proptest::strategy::Just("evil.example".to_string()),
                    proptest::strategy::Just("a.php".to_string()),
                    proptest::strategy::Just("?".to_string()),
                    "%[0-9a-fA-F]{2}",
                    "[ -~]{0,3}",
                ],
                0..10,
            )
        ) {
            let target = format!("/{}", parts.concat());
            super::run(target.as_bytes());
        }
    }

    #[test]
    fn the_redirect_model_checks_what_it_says() {
        for target in [
            "/go/%0d%0aSet-Cookie:x=1",
            "/old/%5cevil.example",
            "/old//evil.example",
            "/old%2f%2fevil.example",
            "//evil.example",
            "/far/anything",
            "/x/%09y?q=%0a",
            "/exact?a=b",
            "/a/b.php",
            "/bare.evil.net/x",
            "/bare@evil.net",
            "/bare:1234",
            "/app/assets/missing.js",
            "/app/deep/link",
        ] {
            super::run(target.as_bytes());
        }
    }
}
