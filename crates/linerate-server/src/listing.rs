//! Directory listings (`autoindex`): an HTML table (name, size, modification time,
//! a parent link; directories first, then by name) or, with `?format=json`, the same
//! entries as JSON.
//!
//! Names are whatever bytes the file system holds: in HTML each is escaped for its
//! place (text and a quoted attribute), and every link is percent-encoded from the raw
//! bytes, so a file named `<script>`, `a b%` or `x"y` lists and links as itself, and no
//! name can open an element or end an attribute. A name that is not UTF-8 shows with
//! replacement characters and still links to its own bytes.

use std::time::SystemTime;

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ListEntry {
    pub name: Vec<u8>,
    pub dir: bool,
    pub size: u64,
    pub modified: SystemTime,
}

/// Directories first, then by name (bytes).
pub(crate) fn sort(entries: &mut [ListEntry]) {
    entries.sort_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
}

/// `&`, `<`, `>`, `"` and `'` as character references.
pub(crate) fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Every byte but RFC 3986's unreserved ones as `%XX`.
pub(crate) fn percent_encode(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A size as people read it: `532`, `12K`, `3.4M`.
fn size_text(n: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if n < 1024 {
        return n.to_string();
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v < 10.0 {
        format!("{v:.1}{}", UNITS[unit])
    } else {
        format!("{v:.0}{}", UNITS[unit])
    }
}

/// The HTML page listing `entries` of the directory at `path` (the request's path, as
/// sent).
pub(crate) fn html(path: &str, entries: &[ListEntry]) -> String {
    let title = html_escape(path);
    let mut body = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head><body>\n<h1>Index of {title}</h1>\n<table>\n<tr><th>Name</th><th>Size</th><th>Modified (UTC)</th></tr>\n"
    );
    if path != "/" {
        body.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    for e in entries {
        let slash = if e.dir { "/" } else { "" };
        let shown = html_escape(&String::from_utf8_lossy(&e.name));
        let size = if e.dir {
            "-".to_string()
        } else {
            size_text(e.size)
        };
        let when = humantime::format_rfc3339_seconds(e.modified).to_string();
        let when = when.trim_end_matches('Z').replace('T', " ");
        body.push_str(&format!(
            "<tr><td><a href=\"./{}{slash}\">{shown}{slash}</a></td><td title=\"{}\">{size}</td><td>{when}</td></tr>\n",
            percent_encode(&e.name),
            e.size
        ));
    }
    body.push_str("</table>\n</body></html>\n");
    body
}

/// The entries as JSON: `[{"name", "type": "file"|"directory", "size", "modified"}]`
/// (`modified` in RFC 3339, UTC).
pub(crate) fn json(entries: &[ListEntry]) -> String {
    let list: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            serde_json::json!({
                "name": String::from_utf8_lossy(&e.name),
                "type": if e.dir { "directory" } else { "file" },
                "size": e.size,
                "modified": humantime::format_rfc3339_seconds(e.modified).to_string(),
            })
        })
        .collect();
    let mut out = serde_json::Value::Array(list).to_string();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn entry(name: &[u8], dir: bool, size: u64) -> ListEntry {
        ListEntry {
            name: name.to_vec(),
            dir,
            size,
            modified: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    #[test]
    fn escaping() {
        assert_eq!(
            html_escape("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
        assert_eq!(percent_encode("a b%/ü~".as_bytes()), "a%20b%25%2F%C3%BC~");
    }

    /// Rules: docs/http.md F5.
    #[test]
    fn hostile_names_list_and_link_as_themselves() {
        let mut entries = vec![
            entry(b"<script>alert(1)</script>", false, 5),
            entry(b"a b%", false, 2048),
            entry(b"x\"y' z", false, 3 << 20),
            entry(b"sub", true, 4096),
            entry(b"\xffbad", false, 1),
        ];
        sort(&mut entries);
        assert_eq!(entries[0].name, b"sub", "directories first");
        let page = html("/d/", &entries);
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("href=\"./%3Cscript%3Ealert%281%29%3C%2Fscript%3E\""));
        assert!(page.contains("href=\"./a%20b%25\">a b%</a>"), "{page}");
        assert!(page.contains("href=\"./x%22y%27%20z\">x&quot;y&#39; z</a>"));
        assert!(page.contains("href=\"./%FFbad\">\u{fffd}bad</a>"));
        assert!(page.contains("href=\"./sub/\">sub/</a>"));
        assert!(page.contains("href=\"../\""), "a parent link");
        assert!(page.contains("<td title=\"2048\">2.0K</td>"));
        assert!(page.contains("<td title=\"3145728\">3.0M</td>"));
        assert!(page.contains("2023-11-14 22:13:20"));
        assert!(
            !html("/", &entries).contains("href=\"../\""),
            "none at the root"
        );
        let j: serde_json::Value = serde_json::from_str(&json(&entries)).unwrap();
        assert_eq!(j[0]["type"], "directory");
        assert_eq!(j[1]["name"], "<script>alert(1)</script>");
        assert_eq!(j[1]["modified"], "2023-11-14T22:13:20Z");
    }
}
