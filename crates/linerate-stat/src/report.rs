//! ministat's report: legend, ASCII plot, summary table and comparisons.

use crate::format::{format_g, format_g_width};
use crate::stats::{compare, Confidence, DataSet};

const SYMBOLS: [u8; 8] = [b' ', b'x', b'+', b'*', b'%', b'#', b'@', b'O'];

/// What to print.
#[derive(Clone, Copy, Debug)]
pub struct ReportOptions {
    /// Plot columns between the frame characters (ministat's `-w`).
    pub width: i64,
    /// Draw the plot (off: `-A`).
    pub plot: bool,
    /// Legend and table only: no plot, no comparisons (`-n`).
    pub summary_only: bool,
    /// One bar line per data set (`-s`).
    pub separate_bars: bool,
    /// Leave out the legend and the table header (`-q`, an extension as in FreeBSD).
    pub quiet: bool,
    /// Confidence of the comparisons (`-c`).
    pub confidence: Confidence,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            width: 74,
            plot: true,
            summary_only: false,
            separate_bars: false,
            quiet: false,
            confidence: Confidence::default(),
        }
    }
}

/// The data and width make ministat itself crash (it indexes its plot with the integer
/// conversion of NaN): width 1, infinite values, or NaN positions while plotting, or
/// width 0 when a later set needs more rows. A byte-exact clone crashes the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crash;

/// The whole report for one to seven data sets (the first is the baseline).
pub fn render(sets: &[DataSet], o: &ReportOptions) -> Result<String, Crash> {
    let mut out = String::new();
    if !o.quiet {
        for (i, s) in sets.iter().enumerate() {
            out.push(SYMBOLS[i + 1] as char);
            out.push(' ');
            out.push_str(s.name());
            out.push('\n');
        }
    }
    if o.plot && !o.summary_only {
        out.push_str(&plot(sets, o)?);
    }
    if !o.quiet {
        out.push_str(
            "    N           Min           Max        Median           Avg        Stddev\n",
        );
    }
    for (i, s) in sets.iter().enumerate() {
        out.push_str(&vitals(s, i + 1));
        if i > 0 && !o.summary_only {
            let c = compare(&sets[0], s, o.confidence);
            if c.significant {
                out.push_str(&format!("Difference at {:.1}% confidence\n", c.confidence));
                out.push_str(&format!(
                    "\t{} +/- {}\n",
                    format_g(c.difference, 6),
                    format_g(c.interval, 6)
                ));
                out.push_str(&format!(
                    "\t{}% +/- {}%\n",
                    format_g(c.percent, 6),
                    format_g(c.percent_interval, 6)
                ));
                out.push_str(&format!(
                    "\t(Student's t, pooled s = {})\n",
                    format_g(c.pooled_s, 6)
                ));
            } else {
                out.push_str(&format!(
                    "No difference proven at {:.1}% confidence\n",
                    c.confidence
                ));
            }
        }
    }
    Ok(out)
}

fn vitals(s: &DataSet, symbol: usize) -> String {
    format!(
        "{} {:>3} {} {} {} {} {}\n",
        SYMBOLS[symbol] as char,
        s.n(),
        format_g_width(s.min(), 13, 8),
        format_g_width(s.max(), 13, 8),
        format_g_width(s.median(), 13, 8),
        format_g_width(s.avg(), 13, 8),
        format_g_width(s.stddev(), 13, 8),
    )
}

fn plot(sets: &[DataSet], o: &ReportOptions) -> Result<String, Crash> {
    let w = o.width;
    // ministat starts from ±999e99, not ±infinity.
    let mut min = 999e99;
    let mut max = -999e99;
    for s in sets {
        let (avg, sd) = (s.avg(), s.stddev());
        for a in [s.min(), s.max(), avg - sd, avg + sd] {
            if a < min {
                min = a;
            }
            if a > max {
                max = a;
            }
        }
    }
    let span = max - min;
    if span == 0.0 {
        return Ok("[no plot, span is zero width]\n".to_string());
    }
    if w == 1 || !span.is_finite() {
        return Err(Crash);
    }
    let dx = span / (w as f64 - 1.0);
    let x0 = min - 0.5 * dx;
    let cols = w.max(0) as usize;
    let col = |v: f64| -> Result<usize, Crash> {
        let c = (v - x0) / dx;
        if c.is_nan() {
            return Err(Crash);
        }
        let c = c.trunc();
        if c < 0.0 || c >= cols.max(1) as f64 {
            return Err(Crash);
        }
        Ok(c as usize)
    };
    let mut grid: Vec<Vec<u8>> = Vec::new();
    let mut height = 0usize;
    let nbars = if o.separate_bars { sets.len() } else { 1 };
    let mut bars: Vec<Vec<u8>> = vec![vec![0; cols]; nbars];
    for (k, s) in sets.iter().enumerate() {
        let val = (k + 1) as u8;
        // Each point's column and its place in the run of points sharing that column.
        let mut placed = Vec::with_capacity(s.n());
        let mut prev: Option<usize> = None;
        let mut j = 0usize;
        for &p in s.points() {
            let x = col(p)?;
            if Some(x) == prev {
                j += 1;
            } else {
                j = 1;
                prev = Some(x);
            }
            placed.push((x, j));
        }
        let deepest = placed.iter().map(|&(_, j)| j).max().unwrap_or(1).max(1);
        let m = deepest + 1;
        if m > height {
            if cols == 0 && k > 0 {
                // realloc(p, 0) freed the rows and returned NULL; ministat writes there.
                return Err(Crash);
            }
            if grid.len() < m {
                grid.resize(m, vec![0; cols]);
            }
            for row in &mut grid[height..m] {
                row.iter_mut().for_each(|c| *c = 0);
            }
        }
        // ministat sets the height to this set's need even when it is lower: rows of
        // earlier sets above it are not printed.
        height = m;
        if cols > 0 {
            for &(x, j) in &placed {
                grid[j][x] |= val;
            }
            let b = &mut bars[if o.separate_bars { k } else { 0 }];
            let (avg, sd) = (s.avg(), s.stddev());
            if !sd.is_nan() {
                let lo = col(avg - sd)?;
                let hi = col(avg + sd)?;
                b[hi] = b'|';
                b[lo] = b'|';
                for c in b.iter_mut().take(hi).skip(lo + 1) {
                    if *c == 0 {
                        *c = b'_';
                    }
                }
            }
            b[col(s.median())?] = b'M';
            b[col(avg)?] = b'A';
        } else if s.median().is_nan() || s.avg().is_nan() {
            return Err(Crash);
        }
    }
    let frame = format!("+{}+\n", "-".repeat(cols));
    let mut out = frame.clone();
    for r in (1..height).rev() {
        out.push('|');
        out.extend(grid[r].iter().map(|&c| SYMBOLS[c as usize & 7] as char));
        out.push_str("|\n");
    }
    for b in &bars {
        out.push('|');
        out.extend(b.iter().map(|&c| if c == 0 { ' ' } else { c as char }));
        out.push_str("|\n");
    }
    out.push_str(&frame);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(name: &str, v: &[f64]) -> DataSet {
        DataSet::from_values(name, v.to_vec()).unwrap()
    }

    #[test]
    fn ministat_readme_example() {
        let a = ds("before", &[0.133, 0.134, 0.136, 0.137, 0.137]);
        let b = ds("after", &[0.139, 0.139, 0.139, 0.140, 0.140]);
        let want = "x before
+ after
+--------------------------------------------------------------------------+
|                                                               +          |
|                                          x                    +         +|
|x         x                    x          x                    +         +|
|      |__________________A_____M____________|                |_M___A____| |
+--------------------------------------------------------------------------+
    N           Min           Max        Median           Avg        Stddev
x   5         0.133         0.137         0.136        0.1354  0.0018165902
+   5         0.139          0.14         0.139        0.1394 0.00054772256
Difference at 95.0% confidence
\t0.004 +/- 0.00195671
\t2.95421% +/- 1.44513%
\t(Student's t, pooled s = 0.00134164)
";
        assert_eq!(render(&[a, b], &ReportOptions::default()).unwrap(), want);
    }

    #[test]
    fn zero_span_and_crashes() {
        let z = ds("z", &[42.0, 42.0, 42.0]);
        assert!(render(&[z], &ReportOptions::default())
            .unwrap()
            .contains("[no plot, span is zero width]\n"));
        let a = ds("a", &[1.0, 2.0, 3.0]);
        let o = ReportOptions {
            width: 1,
            ..ReportOptions::default()
        };
        assert_eq!(render(std::slice::from_ref(&a), &o), Err(Crash));
        let inf = ds("i", &[1.0, 2.0, f64::INFINITY]);
        assert_eq!(
            render(std::slice::from_ref(&inf), &ReportOptions::default()),
            Err(Crash)
        );
        let no_plot = ReportOptions {
            plot: false,
            ..ReportOptions::default()
        };
        assert!(render(&[inf], &no_plot).is_ok());
    }
}
