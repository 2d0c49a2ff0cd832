//! Statistics over repeated `bench http` runs: which metrics are compared, and how.
//! The comparisons themselves come from `linerate-stat` through [`crate::series`].

use std::io;
use std::path::Path;

use linerate_stat::Better;

use super::HttpResult;
use crate::series::{self, Judged, Metric};

/// The metrics of a series: requests/s (higher is better), p99 latency, server CPU per
/// request and, when the server is pinned, its CPU's whole busy time per request (lower
/// is better) are judged; the rest are kept as samples.
pub const METRICS: [Metric<HttpResult>; 6] = [
    Metric {
        name: "requests_per_second",
        unit: "requests/s",
        value: |r| Some(r.requests_per_second),
        better: Some(Better::Higher),
    },
    Metric {
        name: "p99_latency",
        unit: "us",
        value: |r| Some(r.latency_us.p99 as f64),
        better: Some(Better::Lower),
    },
    Metric {
        name: "server_cpu_per_request",
        unit: "server us/request",
        value: |r| r.server.as_ref().map(|s| s.us_per_request),
        better: Some(Better::Lower),
    },
    Metric {
        name: "server_core_per_request",
        unit: "server CPU busy us/request",
        value: |r| r.server.as_ref()?.core.as_ref().map(|c| c.us_per_request),
        better: Some(Better::Lower),
    },
    Metric {
        name: "server_cpu_per_kb",
        unit: "server us/KB",
        value: |r| r.server.as_ref().map(|s| s.us_per_kb),
        better: None,
    },
    Metric {
        name: "client_cpu_per_request",
        unit: "client us/request",
        value: |r| Some(r.client.us_per_request),
        better: None,
    },
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
    let out = out.map(|d| d.join(series::sample_file_name(workload, "d")));
    series::judge_metrics(&METRICS, labels, runs, out.as_deref(), confidence)
}
