//! Content types by file name, for static sites and package mirrors.
//!
//! A table of its own first, because the general databases get the files of these
//! sites wrong (`mime_guess` answers `.rpm` with `audio/x-pn-realaudio-plugin`, and
//! names no charset): web documents and scripts, fonts, images, media, archives and
//! the packages, signatures and checksums of mirrors. Text types carry
//! `charset=utf-8`. Other extensions fall back to `mime_guess` (with the charset added
//! to its text types), and a name it does not know either is
//! `application/octet-stream`. Extensions match without regard to case.

use std::borrow::Cow;

/// Extension (lower case) → content type.
const TABLE: &[(&str, &str)] = &[
    // Web documents, styles, scripts, data.
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("xhtml", "application/xhtml+xml; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("cjs", "text/javascript; charset=utf-8"),
    ("json", "application/json; charset=utf-8"),
    ("map", "application/json; charset=utf-8"),
    ("jsonld", "application/ld+json; charset=utf-8"),
    ("webmanifest", "application/manifest+json; charset=utf-8"),
    ("xml", "application/xml; charset=utf-8"),
    ("xsl", "application/xml; charset=utf-8"),
    ("atom", "application/atom+xml; charset=utf-8"),
    ("rss", "application/rss+xml; charset=utf-8"),
    ("txt", "text/plain; charset=utf-8"),
    ("text", "text/plain; charset=utf-8"),
    ("log", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("markdown", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("tsv", "text/tab-separated-values; charset=utf-8"),
    ("ics", "text/calendar; charset=utf-8"),
    ("vtt", "text/vtt; charset=utf-8"),
    ("yaml", "application/yaml; charset=utf-8"),
    ("yml", "application/yaml; charset=utf-8"),
    ("toml", "application/toml; charset=utf-8"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("epub", "application/epub+zip"),
    // Images.
    ("svg", "image/svg+xml; charset=utf-8"),
    ("png", "image/png"),
    ("apng", "image/apng"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("jxl", "image/jxl"),
    ("ico", "image/x-icon"),
    ("bmp", "image/bmp"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    // Fonts.
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("eot", "application/vnd.ms-fontobject"),
    // Audio and video.
    ("mp4", "video/mp4"),
    ("m4v", "video/mp4"),
    ("webm", "video/webm"),
    ("ogv", "video/ogg"),
    ("mov", "video/quicktime"),
    ("mkv", "video/x-matroska"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("mpd", "application/dash+xml"),
    ("mp3", "audio/mpeg"),
    ("m4a", "audio/mp4"),
    ("ogg", "audio/ogg"),
    ("oga", "audio/ogg"),
    ("opus", "audio/ogg"),
    ("flac", "audio/flac"),
    ("wav", "audio/wav"),
    // Archives and compressed files.
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tgz", "application/gzip"),
    ("bz2", "application/x-bzip2"),
    ("xz", "application/x-xz"),
    ("zst", "application/zstd"),
    ("br", "application/x-brotli"),
    ("lz", "application/x-lzip"),
    ("lzma", "application/x-lzma"),
    ("tar", "application/x-tar"),
    ("7z", "application/x-7z-compressed"),
    ("rar", "application/vnd.rar"),
    ("iso", "application/x-iso9660-image"),
    ("img", "application/octet-stream"),
    ("qcow2", "application/octet-stream"),
    // Packages, signatures and checksums of mirrors.
    ("rpm", "application/x-rpm"),
    ("deb", "application/vnd.debian.binary-package"),
    ("udeb", "application/vnd.debian.binary-package"),
    ("dsc", "text/plain; charset=utf-8"),
    ("changes", "text/plain; charset=utf-8"),
    ("apk", "application/vnd.android.package-archive"),
    ("jar", "application/java-archive"),
    ("whl", "application/zip"),
    ("gem", "application/octet-stream"),
    ("crate", "application/gzip"),
    ("msi", "application/x-msi"),
    ("exe", "application/vnd.microsoft.portable-executable"),
    ("dmg", "application/x-apple-diskimage"),
    ("pkg", "application/octet-stream"),
    ("snap", "application/vnd.snap"),
    ("flatpakref", "application/vnd.flatpak.ref"),
    ("appimage", "application/vnd.appimage"),
    ("asc", "application/pgp-signature"),
    ("sig", "application/pgp-signature"),
    ("gpg", "application/pgp-signature"),
    ("pem", "application/x-pem-file"),
    ("sha1", "text/plain; charset=utf-8"),
    ("sha256", "text/plain; charset=utf-8"),
    ("sha512", "text/plain; charset=utf-8"),
    ("md5", "text/plain; charset=utf-8"),
    ("sha256sum", "text/plain; charset=utf-8"),
    ("sha512sum", "text/plain; charset=utf-8"),
];

/// The content type of a file at `path` (by its last segment's extension).
pub fn content_type(path: &str) -> Cow<'static, str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext,
        _ => return Cow::Borrowed("application/octet-stream"),
    };
    if let Some((_, t)) = TABLE.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)) {
        return Cow::Borrowed(t);
    }
    match mime_guess::from_ext(ext).first_raw() {
        Some(t) if t.starts_with("text/") => Cow::Owned(format!("{t}; charset=utf-8")),
        Some(t) => Cow::Borrowed(t),
        None => Cow::Borrowed("application/octet-stream"),
    }
}

/// Whether a body of this type gains by compression: text, and the text-like
/// structured types (JSON, XML, SVG, JavaScript) and WebAssembly. Precompressed
/// variants are looked for only for these.
pub fn compressible(content_type: &str) -> bool {
    let t = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    t.starts_with("text/")
        || t.ends_with("+json")
        || t.ends_with("+xml")
        || matches!(
            t.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/wasm"
                | "application/yaml"
                | "application/toml"
                | "application/vnd.ms-fontobject"
                | "font/ttf"
                | "font/otf"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules: docs/http.md V1.
    #[test]
    fn static_site_and_mirror_types() {
        for (name, want) in [
            ("index.html", "text/html; charset=utf-8"),
            ("INDEX.HTM", "text/html; charset=utf-8"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("mod.mjs", "text/javascript; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
            ("data.json", "application/json; charset=utf-8"),
            (
                "site.webmanifest",
                "application/manifest+json; charset=utf-8",
            ),
            ("logo.svg", "image/svg+xml; charset=utf-8"),
            ("photo.avif", "image/avif"),
            ("app.wasm", "application/wasm"),
            ("pkg-1.0-1.x86_64.rpm", "application/x-rpm"),
            ("pkg_1.0_amd64.deb", "application/vnd.debian.binary-package"),
            ("SHA256SUMS.asc", "application/pgp-signature"),
            ("f.woff2", "font/woff2"),
            ("a.tar.gz", "application/gzip"),
            ("a.tar.zst", "application/zstd"),
            ("README", "application/octet-stream"),
            ("docs/v1.2/README", "application/octet-stream"),
            ("docs/v1.2/a.css", "text/css; charset=utf-8"),
            (".bashrc", "application/octet-stream"),
            ("x.unknown-extension", "application/octet-stream"),
        ] {
            assert_eq!(content_type(name), want, "{name}");
        }
        // The fallback adds the charset to text types it knows.
        assert_eq!(content_type("a.rtx"), "text/richtext; charset=utf-8");
    }

    #[test]
    fn compressible_types() {
        for t in [
            "text/html; charset=utf-8",
            "application/json",
            "image/svg+xml; charset=utf-8",
            "application/manifest+json; charset=utf-8",
            "application/wasm",
        ] {
            assert!(compressible(t), "{t}");
        }
        for t in ["image/png", "application/gzip", "video/mp4", "font/woff2"] {
            assert!(!compressible(t), "{t}");
        }
    }
}
