//! Programs some tests drive (Debian packages `scripts/test` installs): whether one is
//! there, and headless Chromium.

use std::process::{Command, Output};

/// Whether `program` is installed (on the PATH or in /usr/sbin). Under CI it must be:
/// a missing one fails the test instead of skipping what it checks.
pub fn installed(program: &str) -> bool {
    let found = Command::new("sh")
        .args([
            "-c",
            &format!("command -v {program} || test -x /usr/sbin/{program}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && std::env::var_os("CI").is_some() {
        panic!("{program} is missing under CI: scripts/test installs it");
    }
    found
}

/// `chromium --headless ARGS...` (no sandbox, no GPU, at most 120 s); `None` when
/// Chromium is not installed. One Chromium at a time in a test binary: two load both
/// cores, and what a browser does while it waits (as racing QUIC with TCP) is then
/// less of the test's making.
pub fn headless_chromium(args: &[&str]) -> Option<Output> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if !installed("chromium") {
        return None;
    }
    let _one = ONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args(args)
        .output()
        .expect("chromium runs");
    Some(out)
}

/// Headless Chromium with `args` loads `url`, the page [`crate::forty_asset_page`]
/// makes, and shows its last image; false when Chromium is not installed.
pub fn chromium_loads_forty_asset_page(args: &[&str], url: &str) -> bool {
    let Some(out) = headless_chromium(&[args, &["--dump-dom", url]].concat()) else {
        eprintln!("skipped: no chromium");
        return false;
    };
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("/a/39.svg"),
        "the page: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

/// Asserts that no network namespace of the run with process id `pid` (`lrPID...`,
/// as `bench --netns` names them) is left behind.
pub fn assert_no_netns_left(pid: u32) {
    let ns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let ns = String::from_utf8_lossy(&ns.stdout);
    assert!(
        !ns.contains(&format!("lr{pid}")),
        "namespaces left behind: {ns}"
    );
}

/// A `bench http --json` report of a run that lost nothing: no error of any kind, no
/// request sent again, some requests made (`what` names the run in a failure). The
/// report, for more checks.
pub fn expect_clean_bench(report: &str, what: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(report)
        .unwrap_or_else(|e| panic!("{what}: not a bench report ({e}): {report}"));
    let errors: u64 = v["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no errors in {v}"))
        .values()
        .filter_map(serde_json::Value::as_u64)
        .sum();
    assert_eq!(errors, 0, "{what}: {v}");
    assert_eq!(v["retried"], 0, "{what}: requests sent again: {v}");
    assert!(v["requests"].as_u64().unwrap_or(0) > 0, "{what}: {v}");
    v
}
