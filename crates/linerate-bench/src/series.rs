//! Repeated, interleaved benchmark runs and their statistics: the method of
//! docs/design.md, "Measuring" (A B A B …, at least five of each, Student's t at a
//! stated confidence) for every benchmark. Samples are written as ministat-compatible
//! files; comparisons come from `linerate-stat`, so no other code computes means or
//! intervals.

use std::io;
use std::path::{Path, PathBuf};

use linerate_stat::{
    compare, paired, Better, Comparison, Confidence, DataSet, Paired, ReportOptions,
};
use serde::Serialize;

/// The samples of one metric for one variant.
#[derive(Clone, Debug, Serialize)]
pub struct Samples {
    /// The variant's label.
    pub variant: String,
    /// One value per run, in run order.
    pub values: Vec<f64>,
}

/// One variant against the first (the baseline) for one metric.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    /// The metric's name.
    pub metric: String,
    /// The baseline variant.
    pub baseline: String,
    /// The variant compared with it.
    pub variant: String,
    /// Mean of the baseline.
    pub baseline_mean: f64,
    /// Mean of the variant.
    pub variant_mean: f64,
    /// Student's t comparison (difference = variant - baseline).
    pub comparison: Comparison,
    /// The paired reading of the variant against the baseline, round by round (runs are
    /// interleaved, so value i of each comes from round i): `None` when their sample
    /// counts differ or a sample is not positive.
    pub paired: Option<Paired>,
}

/// Runs `run(variant, round)` for `rounds` rounds, each round over every variant,
/// each variant first in turn (A B C, B C A, C A B, …: one that always ran second
/// would pay for what the first leaves behind, about 1% of CPU per request measured
/// on loopback), stopping at the first error or when `stop` says so. Run `i` of each
/// variant comes from round `i`, so the runs pair by round.
pub fn interleave<V, T, E>(
    variants: &[V],
    rounds: usize,
    stop: &crate::StopFlag,
    mut run: impl FnMut(&V, usize) -> Result<T, E>,
) -> Result<Vec<Vec<T>>, E>
where
    E: From<crate::stream::StreamError>,
{
    let mut out: Vec<Vec<T>> = variants
        .iter()
        .map(|_| Vec::with_capacity(rounds))
        .collect();
    let n = variants.len();
    for round in 0..rounds {
        for i in (0..n).map(|k| (k + round) % n) {
            if crate::stopped(stop) {
                return Err(crate::stream::StreamError::Interrupted.into());
            }
            out[i].push(run(&variants[i], round)?);
        }
    }
    Ok(out)
}

/// A file name for `variant`'s samples of `metric`: the label with anything but
/// letters, digits, `-` and `.` made `_`, and no leading `-` (a name that looks like
/// an option would need `./` before it on ministat's command line).
pub fn sample_file_name(variant: &str, metric: &str) -> String {
    let slug: String = variant
        .trim_start_matches('-')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let slug = if slug.is_empty() { "variant" } else { &slug };
    format!("{slug}.{metric}")
}

/// Writes one value per line (ministat's input) to `dir/<variant>.<metric>`.
pub fn write_samples(dir: &Path, metric: &str, s: &Samples) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(sample_file_name(&s.variant, metric));
    let mut text = String::new();
    for v in &s.values {
        text.push_str(&format!("{v}\n"));
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

/// Most data sets one ministat report draws.
const REPORT_SETS: usize = 7;

/// ministat's report of `sets` (named by `names`, the first the baseline) and the
/// verdicts of each later set against the first, with their paired reading (`better`
/// says which direction of the metric wins a round). `None` when a set has fewer than
/// three values.
pub fn judge(
    metric: &str,
    sets: &[Samples],
    names: &[String],
    confidence: Confidence,
    better: Better,
) -> Option<(String, Vec<Verdict>)> {
    let data: Vec<DataSet> = sets
        .iter()
        .zip(names)
        .map(|(s, n)| DataSet::from_values(n, s.values.clone()))
        .collect::<Option<_>>()?;
    let opts = ReportOptions {
        confidence,
        ..ReportOptions::default()
    };
    // ministat draws at most seven sets (one symbol each): past that, one report per
    // group of the baseline and six others. Benchmark values are finite and the width
    // is ordinary: ministat's crash cases cannot occur; fall back to the table alone if
    // they somehow do.
    let mut text = String::new();
    for group in data[1..].chunks(REPORT_SETS - 1) {
        let sets: Vec<DataSet> = std::iter::once(&data[0]).chain(group).cloned().collect();
        let part = linerate_stat::render(&sets, &opts)
            .or_else(|_| {
                linerate_stat::render(
                    &sets,
                    &ReportOptions {
                        plot: false,
                        ..opts
                    },
                )
            })
            .ok()?;
        text.push_str(&part);
    }
    if data.len() == 1 {
        text = linerate_stat::render(&data, &opts).ok()?;
    }
    let verdicts = data
        .iter()
        .zip(sets)
        .skip(1)
        .map(|(d, s)| Verdict {
            metric: metric.to_string(),
            baseline: sets[0].variant.clone(),
            variant: s.variant.clone(),
            baseline_mean: data[0].avg(),
            variant_mean: d.avg(),
            comparison: compare(&data[0], d, confidence),
            paired: paired(&sets[0].values, &s.values, better).ok(),
        })
        .collect();
    Some((text, verdicts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_goes_first_in_turn_and_runs_pair_by_round() {
        let stop = crate::StopFlag::default();
        let mut calls = Vec::new();
        let out = interleave(&['A', 'B', 'C'], 4, &stop, |v, round| {
            calls.push(*v);
            Ok::<_, crate::stream::StreamError>((*v, round))
        })
        .unwrap();
        assert_eq!(calls.iter().collect::<String>(), "ABCBCACABABC");
        for (v, runs) in ['A', 'B', 'C'].iter().zip(&out) {
            assert_eq!(runs, &(0..4).map(|r| (*v, r)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn names_are_file_safe() {
        assert_eq!(
            sample_file_name("sendfile --sizing free-space", "sd"),
            "sendfile_--sizing_free-space.sd"
        );
        // An option set as a label: no name that reads as an option.
        assert_eq!(sample_file_name("--steer off", "sd"), "steer_off.sd");
        assert_eq!(sample_file_name("-s 32K", "sd"), "s_32K.sd");
        assert_eq!(sample_file_name("--", "sd"), "variant.sd");
    }

    #[test]
    fn verdicts_come_from_the_t_test() {
        let a = Samples {
            variant: "a".into(),
            values: vec![10.0, 11.0, 10.5, 10.2, 10.8],
        };
        let b = Samples {
            variant: "b".into(),
            values: vec![20.0, 21.0, 20.5, 20.2, 20.8],
        };
        let c = Samples {
            variant: "c".into(),
            values: vec![10.1, 11.1, 10.4, 10.3, 10.7],
        };
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let (text, v) = judge(
            "x",
            &[a, b, c],
            &names,
            Confidence::default(),
            Better::Higher,
        )
        .unwrap();
        assert!(text.contains("Difference at 95.0% confidence"));
        assert!(text.contains("No difference proven at 95.0% confidence"));
        assert!(v[0].comparison.significant);
        assert!(!v[1].comparison.significant);
        assert_eq!(v[0].baseline, "a");
        // Paired by round: b beat a in all five, c in three (10.1, 11.1, 10.3).
        let p = v[0].paired.unwrap();
        assert_eq!((p.wins, p.rounds), (5, 5));
        assert_eq!(p.sign_test_p, 2.0 / 32.0);
        assert!((p.min_ratio - 21.0 / 11.0).abs() < 1e-12);
        assert_eq!(v[1].paired.unwrap().wins, 3);
    }

    #[test]
    fn more_sets_than_ministat_draws_are_judged_in_groups() {
        // Regression: a comparison of eight servers panicked after all its runs, as
        // ministat's report has symbols for seven sets.
        let sets: Vec<Samples> = (0..9)
            .map(|i| Samples {
                variant: format!("v{i}"),
                values: vec![10.0 + i as f64, 11.0 + i as f64, 10.5 + i as f64],
            })
            .collect();
        let names: Vec<String> = sets.iter().map(|s| s.variant.clone()).collect();
        let (text, v) = judge("x", &sets, &names, Confidence::default(), Better::Lower).unwrap();
        assert_eq!(v.len(), 8);
        assert!(v.iter().all(|x| x.baseline == "v0"));
        // Two reports, each drawing the baseline first: v1-v6, then v7-v8.
        assert_eq!(text.matches("x v0\n").count(), 2, "{text}");
        assert!(text.contains("O v6\n") && text.contains("* v8\n"), "{text}");
    }

    #[test]
    fn unequal_sample_counts_have_no_paired_reading() {
        let a = Samples {
            variant: "a".into(),
            values: vec![1.0, 2.0, 3.0, 4.0],
        };
        let b = Samples {
            variant: "b".into(),
            values: vec![1.0, 2.0, 3.0],
        };
        let names = vec!["a".to_string(), "b".to_string()];
        let (_, v) = judge("x", &[a, b], &names, Confidence::default(), Better::Lower).unwrap();
        assert!(v[0].paired.is_none());
    }
}

/// A figure of a run of type `T` by which series of runs are summarized and compared.
#[derive(Debug)]
pub struct Metric<T> {
    /// Name: the suffix of its sample files (`<variant>.<name>`) and the verdicts' metric.
    pub name: &'static str,
    /// Unit, for headings.
    pub unit: &'static str,
    /// The figure of one run (`None`: not measured in that run, so the metric is left
    /// out of the series).
    pub value: fn(&T) -> Option<f64>,
    /// Which direction is better for the metrics that are judged; `None`: reported only.
    pub better: Option<Better>,
}

impl<T> Clone for Metric<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Metric<T> {}

/// The metrics of a series of runs, judged.
#[derive(Clone, Debug, Serialize)]
pub struct Judged {
    /// Samples by metric.
    pub samples: serde_json::Map<String, serde_json::Value>,
    /// Verdicts of each variant against the first.
    pub verdicts: Vec<Verdict>,
    /// ministat's report per judged metric: (metric, unit, text).
    pub reports: Vec<(&'static str, &'static str, String)>,
}

/// Judges `runs[v]` (variant `labels[v]`'s runs) against the first variant on each of
/// `metrics`: every benchmark's `-i N --compare`. With `out`, each metric's samples are
/// also written there as ministat files (`<variant>.<metric>`), and the reports name
/// those files.
pub fn judge_metrics<T>(
    metrics: &[Metric<T>],
    labels: &[String],
    runs: &[Vec<T>],
    out: Option<&Path>,
    confidence: Confidence,
) -> io::Result<Judged> {
    let mut j = Judged {
        samples: serde_json::Map::new(),
        verdicts: Vec::new(),
        reports: Vec::new(),
    };
    for m in metrics {
        let sets: Option<Vec<Samples>> = labels
            .iter()
            .zip(runs)
            .map(|(l, rs)| {
                Some(Samples {
                    variant: l.clone(),
                    values: rs.iter().map(m.value).collect::<Option<Vec<f64>>>()?,
                })
            })
            .collect();
        let Some(sets) = sets else { continue };
        let mut names = labels.to_vec();
        if let Some(dir) = out {
            names = sets
                .iter()
                .map(|s| write_samples(dir, m.name, s).map(|p| p.display().to_string()))
                .collect::<Result<_, _>>()?;
        }
        if let Some(better) = m.better {
            if let Some((text, v)) = judge(m.name, &sets, &names, confidence, better) {
                j.reports.push((m.name, m.unit, text));
                j.verdicts.extend(v);
            }
        }
        j.samples.insert(
            m.name.to_string(),
            serde_json::to_value(&sets).map_err(io::Error::other)?,
        );
    }
    Ok(j)
}
