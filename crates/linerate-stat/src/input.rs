//! Reading a data set the way ministat does: lines of at most 8191 bytes, trailing
//! white space stripped, `strtok`-style columns, `#` comments, `strtod` numbers.

use std::io::{self, BufRead};

use crate::stats::DataSet;

/// How to pick numbers out of the lines.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// 1-based column.
    pub column: usize,
    /// Delimiter characters (default space and TAB).
    pub delimiters: Vec<u8>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            column: 1,
            delimiters: b" \t".to_vec(),
        }
    }
}

/// A data set that cannot be used. `Display` gives ministat's message (without its
/// `ministat: ` prefix where ministat prints one: see [`StatError::message`]).
#[derive(Debug, thiserror::Error)]
pub enum StatError {
    /// The file cannot be opened.
    #[error("Cannot open {name}: {}", strerror(.source))]
    CannotOpen {
        /// The name given.
        name: String,
        /// Why.
        source: io::Error,
    },
    /// A line's number is not a number.
    #[error("Invalid data on line {line} in {name}")]
    InvalidData {
        /// 1-based line (reads of at most 8191 bytes count as lines).
        line: usize,
        /// The data set's name.
        name: String,
    },
    /// Fewer than three values.
    #[error("Dataset {name} must contain at least 3 data points")]
    TooFew {
        /// The data set's name.
        name: String,
    },
}

impl StatError {
    /// The exact line ministat prints on stderr for this error.
    pub fn message(&self) -> String {
        match self {
            StatError::TooFew { .. } => self.to_string(),
            _ => format!("ministat: {self}"),
        }
    }

    /// ministat's exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            StatError::CannotOpen { .. } => 1,
            _ => 2,
        }
    }
}

/// `strerror` text of an I/O error, without Rust's "(os error N)".
pub(crate) fn strerror(e: &io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Reads one data set named `name` from `r`.
pub fn read_dataset(
    r: &mut dyn BufRead,
    name: &str,
    opts: &ReadOptions,
) -> Result<DataSet, StatError> {
    let mut values = Vec::new();
    let mut line_no = 0usize;
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        // fgets into an 8192-byte buffer: at most 8191 bytes, up to and including '\n'.
        // Like fgets, a read error (a directory: EISDIR) ends the input.
        if !read_chunk(r, &mut buf, 8191).unwrap_or(false) {
            break;
        }
        line_no += 1;
        let mut line: &[u8] = &buf;
        if let Some(nul) = line.iter().position(|&b| b == 0) {
            line = &line[..nul];
        }
        while let Some((&last, rest)) = line.split_last() {
            if is_c_space(last) {
                line = rest;
            } else {
                break;
            }
        }
        let Some(token) = select_column(line, opts) else {
            continue;
        };
        match parse_strtod(token) {
            Some(v) => values.push(v),
            None => {
                return Err(StatError::InvalidData {
                    line: line_no,
                    name: name.to_string(),
                })
            }
        }
    }
    DataSet::from_values(name, values).ok_or_else(|| StatError::TooFew {
        name: name.to_string(),
    })
}

fn read_chunk(r: &mut dyn BufRead, out: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(!out.is_empty());
        }
        let room = max - out.len();
        let take = avail.len().min(room);
        let (n, done) = match avail[..take].iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (take, out.len() + take == max),
        };
        out.extend_from_slice(&avail[..n]);
        r.consume(n);
        if done {
            return Ok(true);
        }
    }
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The token at the wanted column, or `None` when the line has none there or a token
/// before it (or it) starts a `#` comment.
fn select_column<'a>(line: &'a [u8], opts: &ReadOptions) -> Option<&'a [u8]> {
    let mut tokens = line
        .split(|b| opts.delimiters.contains(b))
        .filter(|t| !t.is_empty());
    let mut i = 1;
    loop {
        let t = tokens.next()?;
        if t[0] == b'#' {
            return None;
        }
        if i == opts.column {
            return Some(t);
        }
        i += 1;
    }
}

/// glibc `strtod` in the C locale, accepting the token only if it is consumed whole.
pub(crate) fn parse_strtod(token: &[u8]) -> Option<f64> {
    let mut s = token;
    while let Some((&b, rest)) = s.split_first() {
        if is_c_space(b) {
            s = rest;
        } else {
            break;
        }
    }
    let mut negative = false;
    if let Some((&b, rest)) = s.split_first() {
        if b == b'+' || b == b'-' {
            negative = b == b'-';
            s = rest;
        }
    }
    let text = std::str::from_utf8(s).ok()?;
    let lower = text.to_ascii_lowercase();
    let v = if lower == "inf" || lower == "infinity" {
        f64::INFINITY
    } else if let Some(rest) = lower.strip_prefix("nan") {
        let ok = rest.is_empty()
            || (rest.starts_with('(')
                && rest.ends_with(')')
                && rest[1..rest.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        if !ok {
            return None;
        }
        f64::NAN
    } else if let Some(hex) = lower.strip_prefix("0x") {
        parse_hex(hex)?
    } else {
        parse_decimal(text)?
    };
    Some(if negative { -v } else { v })
}

fn parse_decimal(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut digits = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j == start {
            // "1e" or "1e+": strtod stops before the 'e', leaving junk.
            return None;
        }
        i = j;
    }
    if i != b.len() {
        return None;
    }
    s.parse::<f64>().ok()
}

fn parse_hex(s: &str) -> Option<f64> {
    let (mant, exp) = match s.find('p') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac_part) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    if int_part.len() + frac_part.len() == 0
        || !int_part
            .bytes()
            .chain(frac_part.bytes())
            .all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let mut v = 0f64;
    for c in int_part.chars().chain(frac_part.chars()) {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut e2: i32 = -4 * frac_part.len() as i32;
    if let Some(x) = exp {
        let digits = x.strip_prefix(['+', '-']).unwrap_or(x);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: i32 = digits.parse().unwrap_or(i32::MAX / 2);
        e2 = e2.saturating_add(if x.starts_with('-') { -n } else { n });
    }
    Some(v * 2f64.powi(e2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_accepts_what_glibc_accepts() {
        for (s, v) in [
            ("+1", 1.0),
            ("1.", 1.0),
            (".5", 0.5),
            ("0x1p3", 8.0),
            ("0x1.8", 1.5),
            ("0X1P-1", 0.5),
            ("INF", f64::INFINITY),
            ("-Infinity", f64::NEG_INFINITY),
            ("1e999", f64::INFINITY),
            ("1e-400", 0.0),
            ("  7", 7.0),
            ("-2.5e2", -250.0),
        ] {
            assert_eq!(parse_strtod(s.as_bytes()), Some(v), "{s}");
        }
        for s in ["nan()", "nan(abc_1)", "NaN"] {
            assert!(parse_strtod(s.as_bytes()).unwrap().is_nan(), "{s}");
        }
        assert!(parse_strtod(b"-nan").unwrap().is_sign_negative());
    }

    #[test]
    fn strtod_refuses_what_glibc_leaves_junk_in() {
        for s in [
            "1e", "1e+", ".", "-", "0x", "0x1p", "infinit", "nan(a-b)", "1_000", "5#", "1,5", "",
        ] {
            assert_eq!(parse_strtod(s.as_bytes()).map(|_| ()), None, "{s}");
        }
    }

    #[test]
    fn lines_columns_and_comments() {
        let input = "# header\n\n1 x\n  2\t# c\n3\r\n#4\n5 # tail\n";
        let ds = read_dataset(&mut input.as_bytes(), "t", &ReadOptions::default()).unwrap();
        assert_eq!(ds.points(), &[1.0, 2.0, 3.0, 5.0]);
        let opts = ReadOptions {
            column: 2,
            delimiters: b",".to_vec(),
        };
        let ds = read_dataset(&mut "a,1\nb,2\nc\nd,#3\ne,3\n".as_bytes(), "t", &opts).unwrap();
        assert_eq!(ds.points(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn errors_say_what_ministat_says() {
        let e = read_dataset(
            &mut "1\n2\nthree\n".as_bytes(),
            "f",
            &ReadOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.message(), "ministat: Invalid data on line 3 in f");
        assert_eq!(e.exit_code(), 2);
        let e = read_dataset(&mut "1\n2\n".as_bytes(), "f", &ReadOptions::default()).unwrap_err();
        assert_eq!(e.message(), "Dataset f must contain at least 3 data points");
    }
}
