//! `linerate stat` against Debian's `ministat`: the same arguments and files given to
//! both, byte-identical stdout and stderr and the same exit status (or signal) required.
//! The cases are generated from a fixed seed, so a failure reproduces.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use linerate_testkit::Linerate;

const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

fn ministat_available() -> bool {
    Command::new("ministat")
        .arg("-n")
        .arg("/dev/null")
        .output()
        .is_ok()
}

fn require_ministat() -> bool {
    if ministat_available() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("ministat is not installed: CI must install Debian's ministat (scripts/test does)");
    }
    eprintln!("skipped: ministat is not installed (apt-get install ministat)");
    false
}

fn run_both(dir: &Path, args: &[String], stdin: Option<&[u8]>) -> (Output, Output) {
    let go = |mut c: Command| {
        c.args(args)
            .current_dir(dir)
            .env_remove("POSIXLY_CORRECT")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = c.spawn().unwrap();
        if let Some(data) = stdin {
            use std::io::Write;
            // ministat may exit before reading all of it (an option error).
            let _ = child.stdin.take().unwrap().write_all(data);
        }
        child.wait_with_output().unwrap()
    };
    let theirs = go(Command::new("ministat"));
    let mut ours = LINERATE.command();
    ours.arg("stat");
    (theirs, go(ours))
}

fn assert_same(dir: &Path, args: &[String], stdin: Option<&[u8]>, case: &str) {
    let (theirs, ours) = run_both(dir, args, stdin);
    let show = |o: &Output| {
        format!(
            "status {:?} signal {:?}\n--- stdout\n{}--- stderr\n{}",
            o.status.code(),
            o.status.signal(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let same = theirs.stdout == ours.stdout
        && theirs.stderr == ours.stderr
        && theirs.status.code() == ours.status.code()
        && theirs.status.signal() == ours.status.signal();
    if !same {
        let files: String = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| {
                format!(
                    "== {}\n{}",
                    e.file_name().to_string_lossy(),
                    std::fs::read_to_string(e.path()).unwrap_or_default()
                )
            })
            .collect();
        panic!(
            "{case}: `ministat {}` differs\n===== ministat\n{}\n===== linerate stat\n{}\n===== files\n{files}",
            args.join(" "),
            show(&theirs),
            show(&ours)
        );
    }
}

/// A number as people write them: plain, exponent, leading '+', trailing '.', etc.
fn spell(rng: &mut Rng, v: f64) -> String {
    match rng.below(8) {
        0 => format!("{v:e}"),
        1 => format!("{v:.3}"),
        2 if v >= 0.0 => format!("+{v}"),
        3 => format!("{v:.0}."),
        _ => format!("{v}"),
    }
}

fn values(rng: &mut Rng, n: usize) -> Vec<f64> {
    let kind = rng.below(9);
    let scale = *rng.pick(&[1.0, 1e-6, 1e-3, 10.0, 1e3, 1e6, 1e12]);
    let offset = *rng.pick(&[0.0, 0.0, 100.0, -50.0, 1e4]);
    (0..n)
        .map(|_| {
            let x = match kind {
                0 => rng.unit(),
                1 => (0..6).map(|_| rng.unit()).sum::<f64>() / 6.0,
                2 => -rng.unit().max(1e-12).ln(),
                3 => rng.below(5) as f64,
                4 => 7.0,
                5 => -(rng.unit() * 3.0),
                6 => (rng.below(1000) as f64) / 8.0,
                7 => rng.unit().powi(4),
                _ => (rng.below(3) as f64) * 0.5,
            };
            x * scale + offset
        })
        .collect()
}

/// Writes a data file: one value per line, in column `col` of `delim`-separated fields,
/// with comments, blank lines and CRLF sprinkled in.
fn write_file(rng: &mut Rng, path: &Path, vals: &[f64], col: usize, delim: char) {
    let mut s = String::new();
    if rng.below(3) == 0 {
        s.push_str("# generated data\n");
    }
    for v in vals {
        if rng.below(12) == 0 {
            s.push('\n');
        }
        if rng.below(15) == 0 {
            s.push_str("  # a comment line\n");
        }
        let mut fields: Vec<String> = (1..col).map(|i| format!("f{i}")).collect();
        fields.push(spell(rng, *v));
        if rng.below(4) == 0 {
            fields.push("tail".into());
        }
        s.push_str(&fields.join(&delim.to_string()));
        if rng.below(10) == 0 {
            s.push_str(" # trailing");
        }
        s.push_str(if rng.below(10) == 0 { "\r\n" } else { "\n" });
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn generated_data_sets_match_ministat() {
    if !require_ministat() {
        return;
    }
    let mut rng = Rng(0x5eed_0000_0000_0004);
    for case in 0..400 {
        let dir = tempfile::tempdir().unwrap();
        let files = 1 + rng.below(7) as usize;
        let col = if rng.below(4) == 0 {
            1 + rng.below(3) as usize
        } else {
            1
        };
        let delim = if col > 1 && rng.below(2) == 0 {
            ','
        } else {
            ' '
        };
        let mut args: Vec<String> = Vec::new();
        for flag in ["-A", "-n", "-s"] {
            if rng.below(6) == 0 {
                args.push(flag.into());
            }
        }
        if rng.below(3) == 0 {
            args.push("-c".into());
            args.push(
                rng.pick(&["80", "90", "95", "98", "99", "99.5"])
                    .to_string(),
            );
        }
        if rng.below(3) == 0 {
            args.push(format!("-w{}", rng.pick(&[2, 3, 10, 40, 60, 74, 100, 150])));
        }
        if col > 1 {
            args.push("-C".into());
            args.push(col.to_string());
        }
        if delim == ',' {
            args.push("-d".into());
            args.push(",".into());
        }
        for f in 0..files {
            let n = 3 + rng.below(98) as usize;
            let name = format!("set{f}");
            let vals = values(&mut rng, n);
            write_file(&mut rng, &dir.path().join(&name), &vals, col, delim);
            args.push(name);
        }
        assert_same(dir.path(), &args, None, &format!("case {case}"));
    }
}

fn write(dir: &Path, name: &str, s: &str) -> String {
    std::fs::write(dir.join(name), s).unwrap();
    name.to_string()
}

#[test]
fn fixed_cases_match_ministat() {
    if !require_ministat() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a3 = write(d, "a3", "1\n2\n3\n");
    let b4 = write(d, "b4", "1\n2\n3\n4\n");
    let before = write(d, "before", "0.133\n0.134\n0.136\n0.137\n0.137\n");
    let after = write(d, "after", "0.139\n0.139\n0.139\n0.140\n0.140\n");
    let zero = write(d, "zero", "42\n42\n42\n");
    let tenths = write(d, "tenths", "0.1\n0.1\n0.1\n");
    let neg = write(d, "neg", "-1\n-2.5\n-3e0\n-4\n");
    let bad = write(d, "bad", "1\n2\nthree\n4\n");
    let two = write(d, "two", "1\n2\n");
    let big = write(d, "big", "1e200\n2e200\n3e200\n");
    let inf = write(d, "inf3", "1\n2\ninf\n");
    let nan = write(d, "nan3", "1\n2\nnan\n");
    let hex = write(d, "hex", "0x1p3\n0x1.8\n.5\n1.\n");
    let negz = write(d, "negz", "-0\n0\n0\n");
    let secret = write(d, "secret", "1\n2\n3\n");
    let cases: Vec<Vec<String>> = vec![
        vec![before.clone(), after.clone()],
        vec![after.clone(), before.clone()],
        vec!["-s".into(), before.clone(), after.clone()],
        vec!["-A".into(), before.clone(), after.clone()],
        vec!["-n".into(), before.clone(), after.clone()],
        vec!["-w".into(), "40".into(), before.clone(), after.clone()],
        vec!["-nw40".into(), a3.clone()],
        vec!["-c".into(), "99.5".into(), before.clone(), after.clone()],
        vec![
            "-c".into(),
            "80".into(),
            "-c".into(),
            "77".into(),
            before.clone(),
            after.clone(),
        ],
        vec![zero.clone()],
        vec![tenths.clone()],
        vec![neg.clone(), a3.clone()],
        vec![big.clone()],
        vec![inf.clone()],
        vec!["-A".into(), inf.clone()],
        vec![nan.clone()],
        vec![nan.clone(), a3.clone()],
        vec![hex.clone(), a3.clone()],
        vec![negz.clone()],
        vec!["-w".into(), "1".into(), a3.clone()],
        vec!["-w".into(), "0".into(), a3.clone()],
        vec!["-w".into(), "0".into(), b4.clone(), a3.clone()],
        vec!["-w".into(), "0".into(), a3.clone(), b4.clone()],
        vec!["-w".into(), "2".into(), a3.clone(), b4.clone()],
        vec![a3.clone(), "-n".into()],
        vec![
            a3.clone(),
            b4.clone(),
            a3.clone(),
            b4.clone(),
            a3.clone(),
            b4.clone(),
            a3.clone(),
        ],
        vec![
            a3.clone(),
            b4.clone(),
            a3.clone(),
            b4.clone(),
            a3.clone(),
            b4.clone(),
            a3.clone(),
            b4.clone(),
        ],
        vec![bad.clone()],
        vec![bad.clone(), "nosuchfile".into()],
        vec!["nosuchfile".into(), bad.clone()],
        vec![two.clone()],
        vec![d.to_string_lossy().into_owned()],
        vec!["-c".into(), "77".into(), a3.clone()],
        vec!["-c".into(), "".into(), a3.clone()],
        vec!["-c".into(), "9x".into(), a3.clone()],
        vec!["-c".into(), "9.5e1".into(), a3.clone(), b4.clone()],
        vec!["-C".into(), "0".into(), a3.clone()],
        vec!["-C".into(), "x".into(), a3.clone()],
        vec!["-C".into(), "3".into(), a3.clone()],
        vec!["-d".into(), "".into(), a3.clone()],
        vec!["-w".into(), "-5".into(), a3.clone()],
        vec!["-w".into(), "4x".into(), a3.clone()],
        vec!["-w".into(), "4294967370".into(), a3.clone(), b4.clone()],
        vec!["-x".into(), a3.clone()],
        // `--help` alone is linerate's own help (exit 0, tested in cli.rs); after another
        // option it is getopt's invalid option, as in ministat.
        vec!["-n".into(), "--help".into()],
        vec!["-w".into()],
        vec!["--".into(), a3.clone()],
        vec![secret.clone()],
    ];
    std::fs::set_permissions(
        d.join(&secret),
        std::os::unix::fs::PermissionsExt::from_mode(0o000),
    )
    .unwrap();
    for (i, args) in cases.iter().enumerate() {
        assert_same(d, args, None, &format!("fixed case {i}"));
    }
    // Standard input, alone and as '-'.
    assert_same(d, &[], Some(b"5\n6\n7\n8\n"), "stdin");
    assert_same(
        d,
        &["-".into(), a3.clone()],
        Some(b"5\n6\n7\n8\n"),
        "stdin as -",
    );
    assert_same(
        d,
        &["-".into(), "-".into()],
        Some(b"5\n6\n7\n"),
        "stdin twice",
    );
    // A line longer than ministat's 8191-byte read.
    let long = format!("1\n2\n{}3\n4\n", " ".repeat(9000));
    assert_same(d, &[write(d, "long", &long)], None, "long line");
}

#[test]
fn quiet_leaves_out_legend_and_header() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", "1\n2\n3\n");
    let out = LINERATE
        .command()
        .args(["stat", "-q", "-n", &a])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "x   3             1             3             2             2             1\n"
    );
}

#[test]
fn terminal_width_follows_columns_and_the_window_as_ministat_does() {
    if !require_ministat() {
        return;
    }
    // util-linux `script` gives each program a pseudo-terminal as standard output.
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: util-linux script is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a", "1\n2\n3\n5\n8\n");
    let b = write(dir.path(), "b", "2\n3\n4\n6\n9\n");
    let exe = LINERATE.path();
    for columns in ["COLUMNS=50", "COLUMNS=abc", "COLUMNS=", "unset COLUMNS;"] {
        let in_pty = |cmd: String| {
            Command::new("script")
                .args([
                    "-qec",
                    &format!("stty cols 60 rows 20; {columns} {cmd}"),
                    "/dev/null",
                ])
                .current_dir(dir.path())
                .output()
                .unwrap()
        };
        let theirs = in_pty(format!("ministat {a} {b}"));
        let ours = in_pty(format!("{exe} stat {a} {b}"));
        assert_eq!(
            String::from_utf8_lossy(&theirs.stdout),
            String::from_utf8_lossy(&ours.stdout),
            "{columns}"
        );
    }
}
