//! `linerate stat`: ministat's command line, parsed as glibc's `getopt` parses
//! `"AC:c:d:snw:"` (plus `-q`, an extension as in current FreeBSD), with ministat's
//! messages and exit statuses. A pure function from arguments and inputs to output, so
//! the binary only does the I/O.

use std::fs::File;
use std::io::{BufRead, BufReader};

use crate::input::{read_dataset, strerror, ReadOptions};
use crate::paired::{format_paired, Better};
use crate::report::{render, ReportOptions};
use crate::stats::Confidence;

/// The program name ministat's messages carry.
const PROG: &str = "ministat";

const USAGE: &str = "Usage: ministat [-C column] [-c confidence] [-d delimiter(s)] [-Ans] [-w width] [file [file ...]]
\tconfidence = {80%, 90%, 95%, 98%, 99%, 99.5%}
\t-A : print statistics only. suppress the graph.
\t-C : column number to extract (starts and defaults to 1)
\t-d : delimiter(s) string, default to \" \\t\"
\t-n : print summary statistics only, no graph/test
\t-s : print avg/median/stddev bars on separate lines
\t-w : width of graph/test output (default 74 or terminal width)
";

/// `linerate stat --help`: what the command is, then ministat's own usage. ministat has
/// no help option (`-h` is an invalid option there, and stays one here, byte for byte).
pub fn help() -> String {
    format!(
        "linerate stat: ministat, byte for byte (Debian's 20150715), plus FreeBSD's -q (no legend, no header).\n\
         Each file holds one sample, a number per line (column -C); two or more files are compared by\n\
         Student's t at the -c confidence. Reads standard input without files.\n\n{USAGE}\t-q : print no legend and no header\n\n\
         {PAIRED_USAGE}\n\
         \tThe paired reading of two interleaved sample files (line i of A and of B from the same round):\n\
         \tthe rounds B won (ties count against B), their two-sided sign test p, and the geometric mean\n\
         \tand range of B/A. higher: bigger is better (requests/s); lower: smaller is (CPU per request).\n"
    )
}

const PAIRED_USAGE: &str = "Usage: linerate stat --paired higher|lower A B";

/// `linerate stat --paired higher|lower A B` (`args` after `--paired`): the paired
/// reading of two interleaved sample files, one number per line, named by their base
/// names. Exits 64 on a usage error, 66 when a file cannot be read, 65 when the samples
/// cannot be paired (different lengths, a line that is not a positive number, none).
pub fn paired(args: &[String]) -> Outcome {
    let fail = |code: i32, msg: String| Outcome {
        stdout: String::new(),
        stderr: format!("linerate stat --paired: {msg}\n"),
        exit: Exit::Code(code),
    };
    let [better, a, b] = args else {
        return Outcome {
            stdout: String::new(),
            stderr: format!("{PAIRED_USAGE}\n"),
            exit: Exit::Code(64),
        };
    };
    let better: Better = match better.parse() {
        Ok(d) => d,
        Err(e) => return fail(64, e),
    };
    let mut texts = Vec::with_capacity(2);
    for f in [a, b] {
        match std::fs::read(f) {
            Ok(bytes) => texts.push(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) => return fail(66, format!("cannot read {f}: {}", strerror(&e))),
        }
    }
    let (ta, tb) = (&texts[0], &texts[1]);
    let (na, nb) = (ta.lines().count(), tb.lines().count());
    if na != nb {
        return fail(
            65,
            format!("{a} and {b} differ in length ({na} and {nb} lines)"),
        );
    }
    let mut columns = Vec::with_capacity(2);
    for (f, t) in [(a, ta), (b, tb)] {
        let mut values = Vec::with_capacity(na);
        for (i, line) in t.lines().enumerate() {
            match line.split_whitespace().next().map(str::parse::<f64>) {
                Some(Ok(v)) => values.push(v),
                _ => return fail(65, format!("{f}, line {}: not a number", i + 1)),
            }
        }
        columns.push(values);
    }
    match crate::paired::paired(&columns[0], &columns[1], better) {
        Ok(p) => Outcome {
            stdout: format!("{}\n", format_paired(&p, &base_name(a), &base_name(b))),
            stderr: String::new(),
            exit: Exit::Code(0),
        },
        Err(e) => fail(65, format!("{a} and {b}: {e}")),
    }
}

/// The last component of a path, as `basename` prints it.
fn base_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// How a run ends.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exit with this status.
    Code(i32),
    /// ministat would crash with SIGSEGV here; so must a byte-exact clone.
    Crash,
}

/// What a run printed and how it ended.
#[derive(Debug)]
pub struct Outcome {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// The end.
    pub exit: Exit,
}

/// The surroundings that decide defaults.
pub struct Environment<'a> {
    /// Columns of the terminal standard output is, if it is one.
    pub terminal_columns: Option<Option<u16>>,
    /// `COLUMNS`.
    pub columns_var: Option<String>,
    /// `POSIXLY_CORRECT` is set.
    pub posixly_correct: bool,
    /// Opens standard input (once per `-` operand).
    pub stdin: &'a mut dyn FnMut() -> Box<dyn BufRead>,
}

fn usage(whine: &str, stderr: String) -> Outcome {
    Outcome {
        stdout: String::new(),
        stderr: format!("{stderr}{whine}\n{USAGE}"),
        exit: Exit::Code(2),
    }
}

/// C's integer prefix as `strtol(s, &end, 10)` reads it: white space, a sign, decimal
/// digits, saturating at the `long` range. `None` without a digit; else the value and
/// whether characters follow it.
fn c_integer(s: &str) -> Option<(i64, bool)> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let n = digits.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let v = match digits[..n].parse::<i64>() {
        Ok(v) if neg => -v,
        Ok(v) => v,
        Err(_) if neg => i64::MIN,
        Err(_) => i64::MAX,
    };
    Some((v, n != digits.len()))
}

/// `strtol` then `(int)`, as ministat reads `-C` and `-w`: `None` when characters are
/// left over (an empty string converts to 0 with nothing left over).
fn strtol_int(s: &str) -> Option<i32> {
    match c_integer(s) {
        None if s.is_empty() => Some(0),
        None | Some((_, true)) => None,
        Some((v, false)) => Some(v as i32),
    }
}

/// C `atoi`: `(int)strtol`, 0 without digits.
fn atoi(s: &str) -> i64 {
    c_integer(s).map_or(0, |(v, _)| i64::from(v as i32))
}

/// Runs ministat on `args` (without the program name).
pub fn run(args: &[String], env: Environment<'_>) -> Outcome {
    let mut width: i64 = 74;
    if let Some(tty) = env.terminal_columns {
        match env.columns_var.as_deref() {
            Some(c) if !c.is_empty() => width = atoi(c),
            _ => {
                if let Some(cols) = tty.filter(|&c| c > 0) {
                    width = i64::from(cols) - 2;
                }
            }
        }
    }
    let mut opts = ReportOptions::default();
    let mut read = ReadOptions::default();
    let mut confidence: Option<Confidence> = None;
    let mut operands: Vec<String> = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if options_done || a == "-" || !a.starts_with('-') {
            if !options_done && env.posixly_correct {
                options_done = true;
            }
            operands.push(a.clone());
            continue;
        }
        if a == "--" {
            options_done = true;
            continue;
        }
        let chars: Vec<char> = a[1..].chars().collect();
        let mut ci = 0;
        while ci < chars.len() {
            let c = chars[ci];
            ci += 1;
            match c {
                'A' => opts.plot = false,
                'n' => opts.summary_only = true,
                's' => opts.separate_bars = true,
                'q' => opts.quiet = true,
                'C' | 'c' | 'd' | 'w' => {
                    let value: String = if ci < chars.len() {
                        let v = chars[ci..].iter().collect();
                        ci = chars.len();
                        v
                    } else if i < args.len() {
                        i += 1;
                        args[i - 1].clone()
                    } else {
                        return usage(
                            "Unknown option",
                            format!("{PROG}: option requires an argument -- '{c}'\n"),
                        );
                    };
                    match c {
                        'C' => match strtol_int(&value) {
                            None => return usage("Invalid column number.", String::new()),
                            Some(v) if v <= 0 => {
                                return usage("Column number should be positive.", String::new())
                            }
                            Some(v) => read.column = v as usize,
                        },
                        'c' => {
                            let level = if value.is_empty() {
                                Some(0.0)
                            } else {
                                crate::input::parse_strtod(value.as_bytes())
                            };
                            let Some(level) = level else {
                                return usage("Not a floating point number", String::new());
                            };
                            match Confidence::from_percent(level) {
                                Some(conf) => confidence = Some(conf),
                                None if confidence.is_none() => {
                                    return usage("No support for confidence level", String::new())
                                }
                                None => {}
                            }
                        }
                        'd' => {
                            if value.is_empty() {
                                return usage("Can't use empty delimiter string", String::new());
                            }
                            read.delimiters = value.into_bytes();
                        }
                        _ => match strtol_int(&value) {
                            None => return usage("Invalid width, not a number.", String::new()),
                            Some(v) if v < 0 => {
                                return usage("Unable to move beyond left margin.", String::new())
                            }
                            Some(v) => width = i64::from(v),
                        },
                    }
                }
                other => {
                    return usage(
                        "Unknown option",
                        format!("{PROG}: invalid option -- '{other}'\n"),
                    )
                }
            }
        }
    }
    if operands.len() > 7 {
        return usage("Too many datasets.", String::new());
    }
    if operands.is_empty() {
        operands.push("-".to_string());
    }
    let mut sets = Vec::new();
    for name in &operands {
        let (mut reader, shown): (Box<dyn BufRead>, &str) = if name == "-" {
            ((env.stdin)(), "<stdin>")
        } else {
            match File::open(name) {
                Ok(f) => (Box::new(BufReader::new(f)), name.as_str()),
                Err(source) => {
                    let e = crate::StatError::CannotOpen {
                        name: name.clone(),
                        source,
                    };
                    return Outcome {
                        stdout: String::new(),
                        stderr: format!("{}\n", e.message()),
                        exit: Exit::Code(e.exit_code()),
                    };
                }
            }
        };
        match read_dataset(&mut reader, shown, &read) {
            Ok(s) => sets.push(s),
            Err(e) => {
                return Outcome {
                    stdout: String::new(),
                    stderr: format!("{}\n", e.message()),
                    exit: Exit::Code(e.exit_code()),
                }
            }
        }
    }
    opts.width = width;
    opts.confidence = confidence.unwrap_or_default();
    match render(&sets, &opts) {
        Ok(stdout) => Outcome {
            stdout,
            stderr: String::new(),
            exit: Exit::Code(0),
        },
        Err(_) => Outcome {
            stdout: String::new(),
            stderr: String::new(),
            exit: Exit::Crash,
        },
    }
}
