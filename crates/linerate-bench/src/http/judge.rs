//! Statistics over repeated `bench http` runs: which metrics are compared, and how.
//! The comparisons themselves come from `linerate-stat` through [`crate::series`].

use std::io;
use std::path::Path;

use linerate_stat::Better;
use serde::Serialize;

use super::HttpResult;
use crate::series::{self, Samples, Verdict};

/// The judged metrics of a series of runs.
#[derive(Clone, Debug, Serialize)]
pub struct Judged {
    /// Samples by metric.
    pub samples: serde_json::Map<String, serde_json::Value>,
    /// Verdicts of each variant against the first.
    pub verdicts: Vec<Verdict>,
    /// ministat's report per judged metric: (metric, unit, text).
    pub reports: Vec<(&'static str, &'static str, String)>,
}

/// The metrics of a series: requests/s (higher is better), p99 latency and server CPU
/// per request (lower is better) are judged; the rest are kept as samples. (name, unit,
/// value, the better direction if judged).
pub const METRICS: [Metric<HttpResult>; 5] = [
    (
        "requests_per_second",
        "requests/s",
        |r| Some(r.requests_per_second),
        Some(Better::Higher),
    ),
    (
        "p99_latency",
        "us",
        |r| Some(r.latency_us.p99 as f64),
        Some(Better::Lower),
    ),
    (
        "server_cpu_per_request",
        "server us/request",
        |r| r.server.as_ref().map(|s| s.us_per_request),
        Some(Better::Lower),
    ),
    (
        "server_cpu_per_kb",
        "server us/KB",
        |r| r.server.as_ref().map(|s| s.us_per_kb),
        None,
    ),
    (
        "client_cpu_per_request",
        "client us/request",
        |r| Some(r.client.us_per_request),
        None,
    ),
];

/// Judges `runs[v]` (variant `labels[v]`'s runs) against the first variant. With
/// `out`, each metric's samples are also written as ministat files under
/// `out/<workload>.d/`, and the reports name those files.
pub fn judge(
    labels: &[String],
    runs: &[Vec<HttpResult>],
    out: Option<&Path>,
    workload: &str,
    confidence: linerate_stat::Confidence,
) -> io::Result<Judged> {
    judge_metrics(&METRICS, labels, runs, out, workload, confidence)
}

/// A metric of runs of type `T`: (name, unit, value, the better direction if judged).
pub type Metric<T> = (
    &'static str,
    &'static str,
    fn(&T) -> Option<f64>,
    Option<Better>,
);

/// [`judge`] over any kind of run and any table of metrics.
pub fn judge_metrics<T>(
    metrics: &[Metric<T>],
    labels: &[String],
    runs: &[Vec<T>],
    out: Option<&Path>,
    workload: &str,
    confidence: linerate_stat::Confidence,
) -> io::Result<Judged> {
    let mut j = Judged {
        samples: serde_json::Map::new(),
        verdicts: Vec::new(),
        reports: Vec::new(),
    };
    for &(metric, unit, extract, judged) in metrics {
        let sets: Option<Vec<Samples>> = labels
            .iter()
            .zip(runs)
            .map(|(l, rs)| {
                Some(Samples {
                    variant: l.clone(),
                    values: rs.iter().map(extract).collect::<Option<Vec<f64>>>()?,
                })
            })
            .collect();
        let Some(sets) = sets else { continue };
        let mut names = labels.to_vec();
        if let Some(dir) = out {
            let dir = dir.join(series::sample_file_name(workload, "d"));
            names = sets
                .iter()
                .map(|s| series::write_samples(&dir, metric, s).map(|p| p.display().to_string()))
                .collect::<Result<_, _>>()?;
        }
        if let Some(better) = judged {
            if let Some((text, v)) = series::judge(metric, &sets, &names, confidence, better) {
                j.reports.push((metric, unit, text));
                j.verdicts.extend(v);
            }
        }
        j.samples.insert(
            metric.to_string(),
            serde_json::to_value(&sets).map_err(io::Error::other)?,
        );
    }
    Ok(j)
}
