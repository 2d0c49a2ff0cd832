//! Snapshot files for the tests that pin text byte for byte (`src/snapshots/`): the
//! text must be the file's; `LINERATE_WRITE_SNAPSHOT=1` writes it again instead, to be
//! reviewed in the diff.

/// Panics, naming the first line that differs, unless `got` is `snapshots/NAME`.
pub(crate) fn check(name: &str, got: &str) {
    let path = format!("{}/src/snapshots/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("LINERATE_WRITE_SNAPSHOT").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("the snapshot (LINERATE_WRITE_SNAPSHOT=1)");
    if got != want {
        let line = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "the text differs from {path} from line {}:\n got: {:?}\nwant: {:?}",
            line + 1,
            got.lines().nth(line),
            want.lines().nth(line)
        );
    }
}
