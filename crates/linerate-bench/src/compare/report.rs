//! The HTML report of `bench compare`: one self-contained page (no scripts, no external
//! files) with a table per workload and SVG charts drawn by `plotters`: requests/s and
//! server CPU per request by workload (bars at the mean, whiskers from the lowest to
//! the highest run, log scale), each workload's latency distribution, and requests/s
//! against connections when `--connections` sweeps them.

use std::fmt::Write as _;

use plotters::prelude::*;

use super::CompareResult;
use crate::http::HttpResult;

/// One colour per server, in the order of the comparison (the baseline first).
const COLOURS: [RGBColor; 7] = [
    RGBColor(0xd9, 0x48, 0x1c),
    RGBColor(0x1f, 0x6f, 0xb4),
    RGBColor(0x2a, 0x9d, 0x4a),
    RGBColor(0x8e, 0x4a, 0xb0),
    RGBColor(0x99, 0x77, 0x00),
    RGBColor(0x55, 0x55, 0x55),
    RGBColor(0x00, 0x99, 0x99),
];

fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Values of `metric` for server `s` of workload `w`.
fn values(
    r: &CompareResult,
    w: usize,
    s: usize,
    metric: fn(&HttpResult) -> Option<f64>,
) -> Vec<f64> {
    r.workloads[w].runs[s].iter().filter_map(metric).collect()
}

/// A bar chart of `metric` by workload, one bar per server; log scale.
fn bar_chart(
    r: &CompareResult,
    title: &str,
    unit: &str,
    metric: fn(&HttpResult) -> Option<f64>,
) -> Result<String, String> {
    let nw = r.workloads.len();
    let ns = r.servers.len();
    let mut lo = f64::INFINITY;
    let mut hi: f64 = 0.0;
    for w in 0..nw {
        for s in 0..ns {
            for v in values(r, w, s, metric) {
                if v > 0.0 {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
    }
    if !(lo.is_finite() && hi > 0.0) {
        return Ok(String::new());
    }
    // Room above the bars for the legend.
    let (y0, y1) = (lo / 3.0, hi * 3.0 * 10f64.powf(0.25 * ns as f64));
    let mut svg = String::new();
    {
        let width = (160 * nw as u32).max(480) + 120;
        let root = SVGBackend::with_string(&mut svg, (width, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{title} (log axis; whiskers: lowest to highest run)"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..nw as f64, (y0..y1).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_x_axis()
            .y_desc(unit)
            .y_label_formatter(&|v| format_number(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        let slot = 0.8 / ns as f64;
        for s in 0..ns {
            let c = colour(s);
            let bars: Vec<_> = (0..nw)
                .filter_map(|w| {
                    let v = values(r, w, s, metric);
                    let m = mean(&v);
                    (m > 0.0).then(|| {
                        let x = w as f64 + 0.1 + slot * s as f64;
                        Rectangle::new([(x, y0), (x + slot * 0.9, m)], c.filled())
                    })
                })
                .collect();
            chart
                .draw_series(bars)
                .map_err(|e| e.to_string())?
                .label(r.servers[s].name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
            // Whiskers: lowest to highest run.
            let whiskers: Vec<_> = (0..nw)
                .filter_map(|w| {
                    let v = values(r, w, s, metric);
                    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
                    let max = v.iter().copied().fold(0.0, f64::max);
                    (min > 0.0 && min.is_finite()).then(|| {
                        let x = w as f64 + 0.1 + slot * s as f64 + slot * 0.45;
                        PathElement::new(vec![(x, min), (x, max)], BLACK.stroke_width(1))
                    })
                })
                .collect();
            chart.draw_series(whiskers).map_err(|e| e.to_string())?;
        }
        // Workload names under their groups.
        let style = ("sans-serif", 13).into_font().color(&BLACK);
        chart
            .draw_series((0..nw).map(|w| {
                Text::new(
                    short_name(&r.workloads[w].workload),
                    (w as f64 + 0.1, y0 / 1.6),
                    style.clone(),
                )
            }))
            .map_err(|e| e.to_string())?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Latency by percentile for one workload, one line per server (its median run by
/// requests/s). The x axis counts nines: 0 is the 0th percentile, 1 the 90th, 2 the
/// 99th, 3 the 99.9th.
fn latency_chart(r: &CompareResult, w: usize) -> Result<String, String> {
    let wl = &r.workloads[w];
    let mut lines: Vec<(usize, Vec<(f64, f64)>)> = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    for (s, runs) in wl.runs.iter().enumerate() {
        let mut order: Vec<&HttpResult> = runs.iter().collect();
        order.sort_by(|a, b| a.requests_per_second.total_cmp(&b.requests_per_second));
        let Some(median) = order.get(order.len() / 2) else {
            continue;
        };
        let pts: Vec<(f64, f64)> = median
            .latency_us
            .distribution
            .iter()
            .filter(|(p, _)| *p < 100.0)
            .map(|&(p, us)| (-(1.0 - p / 100.0).log10(), (us.max(1)) as f64 / 1000.0))
            .collect();
        for &(_, ms) in &pts {
            lo = lo.min(ms);
            hi = hi.max(ms);
        }
        if !pts.is_empty() {
            lines.push((s, pts));
        }
    }
    if lines.is_empty() {
        return Ok(String::new());
    }
    let xmax = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(1.0f64, f64::max)
        .ceil()
        .min(6.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 340)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Latency by percentile: {}", short_name(&wl.workload)),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..xmax, (lo / 1.5..hi * 1.5).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("ms")
            .x_labels(xmax as usize + 1)
            .x_label_formatter(&|x| percentile_label(*x))
            .y_label_formatter(&|v| format_number(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        for (s, pts) in lines {
            let c = colour(s);
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(r.servers[s].name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The workloads of a `--connections` sweep, "PATH c=N": each PATH with its
/// (connections, workload index) points in the order run. Empty without a sweep.
fn sweeps(r: &CompareResult) -> Vec<(String, Vec<(usize, usize)>)> {
    let mut out: Vec<(String, Vec<(usize, usize)>)> = Vec::new();
    for (w, wl) in r.workloads.iter().enumerate() {
        let Some((path, n)) = wl.workload.rsplit_once(" c=") else {
            continue;
        };
        let Ok(n) = n.parse::<usize>() else {
            continue;
        };
        match out.iter_mut().find(|(p, _)| p == path) {
            Some((_, pts)) => pts.push((n, w)),
            None => out.push((path.to_string(), vec![(n, w)])),
        }
    }
    out.retain(|(_, pts)| pts.len() > 1);
    out
}

/// Requests/s against connections for one swept path, a line per server through the
/// means, both axes logarithmic.
fn concurrency_chart(
    r: &CompareResult,
    path: &str,
    pts: &[(usize, usize)],
) -> Result<String, String> {
    let rps: fn(&HttpResult) -> Option<f64> = |x| Some(x.requests_per_second);
    let lines: Vec<(usize, Vec<(f64, f64)>)> = (0..r.servers.len())
        .map(|s| {
            let line = pts
                .iter()
                .enumerate()
                .map(|(i, &(_, w))| (i as f64, mean(&values(r, w, s, rps))))
                .filter(|&(_, v)| v > 0.0)
                .collect();
            (s, line)
        })
        .collect();
    let all = lines.iter().flat_map(|(_, l)| l.iter().map(|p| p.1));
    let (lo, hi) = all.fold((f64::INFINITY, 0f64), |(a, b), v| (a.min(v), b.max(v)));
    // The counts in the order run, one step apart, each labelled with its count.
    let counts: Vec<usize> = pts.iter().map(|&(n, _)| n).collect();
    if !(lo.is_finite() && hi > 0.0) {
        return Ok(String::new());
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{} requests/s by connections (log axis)", short_name(path)),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                -0.5..counts.len() as f64 - 0.5,
                (lo / 1.5..hi * 1.5).log_scale(),
            )
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("connections")
            .y_desc("requests/s")
            .x_labels(counts.len() * 2 + 1)
            .x_label_formatter(&|v| {
                let i = v.round();
                match counts.get(i as usize) {
                    Some(n) if (v - i).abs() < 0.01 && i >= 0.0 => n.to_string(),
                    _ => String::new(),
                }
            })
            .y_label_formatter(&|v| format_number(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        for (s, line) in lines {
            let c = colour(s);
            chart
                .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(r.servers[s].name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(2))
                });
            chart
                .draw_series(line.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The percentile at `nines` on the latency chart's axis: 0 → "0%", 1 → "90%",
/// 2 → "99%", 3 → "99.9%", 4 → "99.99%".
fn percentile_label(nines: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-nines));
    let decimals = (nines - 2.0).ceil().max(0.0) as usize;
    format!("{p:.decimals$}%")
}

/// "/1K.bin" → "1K"; other names as they are.
fn short_name(workload: &str) -> String {
    workload
        .strip_prefix('/')
        .and_then(|s| s.strip_suffix(".bin"))
        .map(str::to_string)
        .unwrap_or_else(|| workload.to_string())
}

/// A number with about three significant digits and no exponent.
pub fn format_number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        let digits = (-a.log10()).ceil() as usize + 2;
        format!("{v:.digits$}")
    }
}

/// The verdicts of one workload as a matrix: a row per server against the baseline,
/// a column per metric, each cell the difference with its interval, coloured when
/// proven (green: the baseline better, red: worse).
fn verdict_matrix(wl: &super::WorkloadComparison, base: &str, confidence: f64) -> String {
    let mut metrics: Vec<&str> = Vec::new();
    let mut rows: Vec<&str> = Vec::new();
    for v in &wl.judged.verdicts {
        if !metrics.contains(&v.metric.as_str()) {
            metrics.push(&v.metric);
        }
        if !rows.contains(&v.variant.as_str()) {
            rows.push(&v.variant);
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let base_e = escape(base);
    let mut h = format!("<table class=\"verdicts\"><tr><th>against {base_e}</th>");
    for m in &metrics {
        let _ = write!(h, "<th>{}</th>", escape(m));
    }
    h.push_str("</tr>\n");
    for row in &rows {
        let _ = write!(h, "<tr><td>{}</td>", escape(row));
        for m in &metrics {
            let Some(v) = wl
                .judged
                .verdicts
                .iter()
                .find(|v| v.variant == *row && v.metric == *m)
            else {
                h.push_str("<td>-</td>");
                continue;
            };
            let c = &v.comparison;
            // Higher is better for requests/s, lower for the rest.
            let higher_better = v.metric == "requests_per_second";
            let base_better = c.significant && ((c.percent < 0.0) == higher_better);
            let (class, text) = if c.significant {
                (
                    if base_better { "better" } else { "worse" },
                    format!("{:+.1}% ± {:.1}%", c.percent, c.percent_interval.abs()),
                )
            } else {
                ("", "no difference proven".to_string())
            };
            let _ = write!(h, "<td class=\"{class}\">{text}</td>");
        }
        h.push_str("</tr>\n");
    }
    let _ = writeln!(
        h,
        "</table>\n<p>Each cell: the server's mean against {base_e}'s (Student's t), with its {confidence}% confidence interval; green where {base_e} is proven better, red where worse.</p>"
    );
    h
}

/// The whole page.
pub fn html(r: &CompareResult, command: &str) -> Result<String, String> {
    let mut h = String::new();
    let base = r.servers.first().map_or("", |s| s.name.as_str());
    let title = "linerate bench compare";
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n<style>\n\
body{{font-family:sans-serif;margin:2em;max-width:110em;color:#222}}\n\
table{{border-collapse:collapse;margin:1em 0;font-size:90%}}\n\
th,td{{border:1px solid #bbb;padding:.3em .6em;text-align:right}}\n\
th:first-child,td:first-child{{text-align:left}}\n\
.better{{color:#176b2c;font-weight:bold}} .worse{{color:#a11;font-weight:bold}}\n\
pre{{background:#f4f4f4;padding:.6em;overflow-x:auto;font-size:90%}}\n\
figure{{margin:1em 0}} svg{{max-width:100%;height:auto}}\n\
</style>\n</head>\n<body>\n<h1>{title}</h1>\n"
    );
    let _ = write!(
        h,
        "<p>{}.</p>\n<p>Path: {}. Each run: {} connections, {} thread(s), {}; {} run(s) per server and workload after {} discarded warm-up round(s), servers interleaved, each first in turn; client on CPU(s) {}, servers on CPU {}. Verdicts by Student's t at {}% confidence against {}.</p>\n<pre>{}</pre>\n",
        escape(&r.machine.describe()),
        escape(&r.path),
        if sweeps(r).is_empty() {
            r.connections.to_string()
        } else {
            "N (each workload's c=N)".to_string()
        },
        r.threads,
        r.seconds
            .map(|s| format!("{s} s"))
            .unwrap_or_else(|| "a request count".into()),
        r.iterations,
        r.warmup,
        if r.client_cpus.is_empty() {
            "any".to_string()
        } else {
            r.client_cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
        },
        r.server_cpu.map(|c| c.to_string()).unwrap_or_else(|| "any".into()),
        r.confidence,
        escape(base),
        escape(command)
    );
    h.push_str("<h2>Servers</h2>\n<table><tr><th>server</th><th>version</th></tr>\n");
    for s in &r.servers {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(&s.name),
            escape(&s.version)
        );
    }
    for (name, why) in &r.skipped {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>skipped: {}</td></tr>",
            escape(name),
            escape(why)
        );
    }
    h.push_str("</table>\n");
    h.push_str("<h2>Summary</h2>\n");
    let rps: fn(&HttpResult) -> Option<f64> = |x| Some(x.requests_per_second);
    let cpu: fn(&HttpResult) -> Option<f64> = |x| x.server.as_ref().map(|s| s.us_per_request);
    for (t, u, m) in [
        ("Requests per second", "requests/s", rps),
        ("Server CPU per request", "µs", cpu),
    ] {
        let svg = bar_chart(r, t, u, m)?;
        if !svg.is_empty() {
            let _ = writeln!(h, "<figure>{svg}</figure>");
        }
    }
    for (path, pts) in sweeps(r) {
        let svg = concurrency_chart(r, &path, &pts)?;
        if !svg.is_empty() {
            let _ = writeln!(h, "<figure>{svg}</figure>");
        }
    }
    for (w, wl) in r.workloads.iter().enumerate() {
        let _ = writeln!(h, "<h2>{}</h2>", escape(&wl.workload));
        let base_e = escape(base);
        let _ = writeln!(h, "<table><tr><th>server</th><th>requests/s</th><th>× {base_e}</th><th>MB/s</th><th>p50</th><th>p99</th><th>p99.9</th><th>max</th><th>server CPU µs/request</th><th>× {base_e}</th><th>its CPU's busy µs/request</th><th>server CPU busy</th><th>client CPU busy</th><th>segments/MB</th><th>body bytes/segment</th><th>context switches/MB</th><th>retransmits</th><th>errors</th><th>non-2xx</th></tr>");
        let base_rps = mean(&values(r, w, 0, rps));
        let base_cpu = mean(&values(r, w, 0, cpu));
        for (s, info) in r.servers.iter().enumerate() {
            let m_rps = mean(&values(r, w, s, rps));
            let m_cpu = mean(&values(r, w, s, cpu));
            let latency = |f: fn(&HttpResult) -> u64| {
                let v: Vec<f64> = wl.runs[s].iter().map(|x| f(x) as f64).collect();
                format!("{} µs", format_number(mean(&v)))
            };
            let mbps = mean(&values(r, w, s, |x| Some(x.megabytes_per_second)));
            // Who was the bottleneck: each side's CPU as a share of one CPU, per run.
            let busy = |f: fn(&HttpResult) -> Option<f64>| {
                let v = values(r, w, s, f);
                if v.is_empty() {
                    "-".to_string()
                } else {
                    v.iter()
                        .map(|p| format!("{p:.0}%"))
                        .collect::<Vec<_>>()
                        .join(" ")
                }
            };
            // The kernel's work for the server, means over the runs that have it.
            let kernel = |f: fn(&crate::kernel::KernelWork) -> f64| {
                let v: Vec<f64> = wl.runs[s]
                    .iter()
                    .filter_map(|x| x.server.as_ref()?.kernel.as_ref().map(f))
                    .collect();
                if v.is_empty() {
                    "-".to_string()
                } else {
                    format_number(mean(&v))
                }
            };
            let errors: u64 = wl.runs[s].iter().map(|x| x.errors.total()).sum();
            let non2xx: u64 = wl.runs[s].iter().map(|x| x.non_2xx()).sum();
            let ratio = |a: f64, b: f64| {
                if b > 0.0 {
                    format!("{:.2}", a / b)
                } else {
                    "-".into()
                }
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&info.name),
                format_number(m_rps),
                ratio(m_rps, base_rps),
                format_number(mbps),
                latency(|x| x.latency_us.p50),
                latency(|x| x.latency_us.p99),
                latency(|x| x.latency_us.p999),
                latency(|x| x.latency_us.max),
                format_number(m_cpu),
                ratio(m_cpu, base_cpu),
                {
                    let core = values(r, w, s, |x| {
                        Some(x.server.as_ref()?.core.as_ref()?.us_per_request)
                    });
                    if core.is_empty() {
                        "-".to_string()
                    } else {
                        format_number(mean(&core))
                    }
                },
                busy(|x| x.server.as_ref().map(|c| c.percent_of_one_cpu)),
                busy(|x| {
                    (x.wrk.is_none() && x.elapsed_seconds > 0.0)
                        .then(|| 100.0 * x.client.cpu_seconds / x.elapsed_seconds)
                }),
                kernel(|k| k.segments_per_mb),
                kernel(|k| k.body_bytes_per_segment),
                kernel(|k| k.context_switches_per_mb),
                kernel(|k| k.retransmits as f64),
                errors,
                non2xx
            );
        }
        h.push_str("</table>\n");
        h.push_str(&verdict_matrix(wl, base, r.confidence));
        let svg = latency_chart(r, w)?;
        if !svg.is_empty() {
            let _ = writeln!(h, "<figure>{svg}</figure>");
        }
        for (metric, unit, text) in &wl.judged.reports {
            let _ = writeln!(
                h,
                "<details><summary>{} ({}): ministat</summary><pre>{}</pre></details>",
                escape(metric),
                escape(unit),
                escape(text)
            );
        }
    }
    h.push_str("<h2>Configurations</h2>\n");
    for s in &r.servers {
        let _ = writeln!(
            h,
            "<h3>{}</h3><pre>{}</pre>",
            escape(&s.name),
            escape(&s.config)
        );
    }
    h.push_str("</body>\n</html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(format_number(123456.7), "123457");
        assert_eq!(format_number(12.345), "12.3");
        assert_eq!(format_number(1.2345), "1.23");
        assert_eq!(format_number(0.012345), "0.0123");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(escape("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
        assert_eq!(short_name("/100K.bin"), "100K");
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(4.0), "99.99%");
        assert_eq!(percentile_label(2.5), "99.7%");
        assert_eq!(
            short_name("specweb99 mix, 2 directories"),
            "specweb99 mix, 2 directories"
        );
    }
}
