//! Builds in which commit this binary comes from, for the reports of `bench compare`:
//! `LINERATE_COMMIT` is `git describe --always --dirty` of the checkout, or "unknown"
//! when there is none (a source tarball, `cargo install` from a registry).

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args([
            "describe",
            "--always",
            "--dirty",
            "--abbrev=12",
            "--exclude=*",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=LINERATE_COMMIT={commit}");
    // A new commit or a change of the index (staging, checkout) rebuilds this crate.
    for p in [
        "../../.git/HEAD",
        "../../.git/index",
        "../../.git/refs/heads",
    ] {
        println!("cargo:rerun-if-changed={p}");
    }
}
