//! `linerate stat --paired`, the paired reading of interleaved benchmark samples, which
//! every `-i N --compare` and `bench compare` also prints under each verdict.

use std::process::Output;

use linerate_testkit::Linerate;

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

fn run(a: &str, b: &str, better: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb) = (dir.path().join("a.rps"), dir.path().join("b.rps"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    LINERATE
        .command()
        .args(["stat", "--paired", better])
        .arg(&pa)
        .arg(&pb)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn counts_rounds_won_and_gives_the_binomial_p() {
    let cases = [
        (
            "100\n200\n100\n200\n100\n200\n100\n200\n",
            "110\n220\n110\n220\n110\n220\n110\n220\n",
            "higher",
            "in 8 of 8 rounds (sign test p = 0.008); \
             b.rps/a.rps geometric mean 1.100, range 1.100-1.100\n",
        ),
        // Lower is better: 1 of 6 lower, so p = 2 * P(X <= 1) = 2 * 7/64.
        (
            "10\n10\n10\n10\n10\n10\n",
            "5\n20\n20\n20\n20\n20\n",
            "lower",
            "in 1 of 6 rounds (sign test p = 0.219); \
             b.rps/a.rps geometric mean 1.587, range 0.500-2.000\n",
        ),
    ];
    for (a, b, better, tail) in cases {
        let out = stdout(&run(a, b, better));
        assert_eq!(out, format!("paired: b.rps better than a.rps {tail}"));
    }
}

#[test]
fn ties_count_against_b_and_p_is_capped_at_one() {
    let out = stdout(&run("1\n2\n", "1\n3\n", "higher"));
    assert!(
        out.contains("in 1 of 2 rounds (sign test p = 1.000)"),
        "{out}"
    );
}

#[test]
fn bad_input_is_refused_with_a_usage_or_data_code() {
    assert_eq!(run("1\n", "1\n", "bigger").status.code(), Some(64));
    assert_eq!(run("1\n2\n", "1\n", "higher").status.code(), Some(65));
    assert_eq!(run("1\n0\n", "1\n1\n", "higher").status.code(), Some(65));
    assert_eq!(run("", "", "higher").status.code(), Some(65));
    assert_eq!(run("1\nx\n", "1\n1\n", "higher").status.code(), Some(65));
    assert_eq!(run("1\n\n", "1\n1\n", "higher").status.code(), Some(65));
    let missing = LINERATE
        .command()
        .args([
            "stat",
            "--paired",
            "higher",
            "/nonexistent/a",
            "/nonexistent/b",
        ])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read /nonexistent/a"));
}

#[test]
fn wrong_word_counts_are_usage_errors_and_ministat_is_untouched() {
    let out = LINERATE
        .command()
        .args(["stat", "--paired", "higher", "a"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--paired higher|lower A B"));
    // After another option `--paired` is ministat's invalid option, as `--help` is.
    let out = LINERATE
        .command()
        .args(["stat", "-n", "--paired"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("ministat: invalid option -- '-'"));
    let help = LINERATE
        .command()
        .args(["stat", "--help"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("linerate stat --paired higher|lower A B")
    );
}
