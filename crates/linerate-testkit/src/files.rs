//! Document roots, file contents and log files.

use std::fs;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

/// A temporary directory, removed when dropped.
pub fn docroot() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Writes `data` at `rel` under `root`, making directories.
pub fn put(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(p, data).unwrap();
}

/// Deterministic bytes that differ from offset to offset (xorshift64).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = vec![0u8; len.div_ceil(8) * 8];
    for word in v.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        word.copy_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// Equality of byte strings too long to print: says where they first differ.
pub fn assert_bytes_eq(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: got {} bytes, want {}; first difference at offset {at}",
            got.len(),
            want.len()
        );
    }
}

/// Lines of a log file (none if it does not exist).
pub fn log_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits up to 5 s for the log at `path` to have `n` lines; returns them.
pub fn wait_log_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lines = log_lines(path);
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The workspace's root directory.
pub fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, depth first.
pub fn rust_sources(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("a readable source directory") {
            let p = e.expect("a directory entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// A page at `index.html` under `root` with 40 small images (`a/0.svg` to `a/39.svg`)
/// and no favicon to fetch (Chromium fetches one on a connection of its own): what a
/// browser loads in 41 requests.
pub fn forty_asset_page(root: &Path) {
    let mut page =
        String::from("<!doctype html><html><head><link rel=icon href=\"data:,\"></head><body>");
    for i in 0..40 {
        page.push_str(&format!("<img src=\"/a/{i}.svg\" width=4 height=4>"));
        let svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"4\" height=\"4\">\
             <rect width=\"4\" height=\"{}\"/></svg>",
            i % 4 + 1
        );
        put(root, &format!("a/{i}.svg"), svg.as_bytes());
    }
    page.push_str("</body></html>");
    put(root, "index.html", page.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_is_deterministic_and_varies() {
        assert_eq!(pattern(1000, 7), pattern(1000, 7));
        assert_ne!(pattern(1000, 7), pattern(1000, 8));
        assert_eq!(pattern(13, 7), pattern(1000, 7)[..13]);
        let p = pattern(4096, 1);
        assert!(p.windows(8).all(|w| w != [0; 8]), "a run of zeros");
    }

    #[test]
    #[should_panic(expected = "first difference at offset 2")]
    fn byte_strings_name_their_first_difference() {
        assert_bytes_eq(b"abcd", b"abxd", "four bytes");
    }
}
