//! `--metrics-path`: the counters as Prometheus / OpenMetrics text, through the
//! `prometheus-client` crate.
//!
//! Each worker keeps its own counters ([`Stats`], plain loads and stores, no lock);
//! a scrape sums them over every worker of the process's life ([`Board`]: reloads
//! never set a counter back). A counter's family, labels and help are declared on its
//! row in the workers' table (`stats!` in `stats.rs`, where it is counted), and a
//! scrape walks the rows ([`Scrape::declared`]); what is not one counter's value (the
//! arrays, families computed from several counters, what is counted outside the
//! workers) is a declaration each in [`Scrape::of`]'s sections (`m.counter(NAME, HELP,
//! value)`, `m.counters(NAME, HELP, LABEL, [(label, value), ...])`). One encoder writes
//! them all (`Collector for Scrape`); `snapshots/metrics.txt` pins the text.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::stats::{Board, Stats, H2_ERRORS, REPORTS, RESPONSE_SECONDS, TIMEOUT_KINDS};

/// The methods and status classes of [`Stats::responses`], in order.
const METHODS: [&str; 3] = ["GET", "HEAD", "other"];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// A sample's labels: (name, value).
type Labels = Vec<(&'static str, String)>;

/// One metric family as a scrape writes it: name, help, counter or gauge, and its
/// samples.
#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    samples: Vec<(Labels, i64)>,
}

/// What one scrape writes: the families in order, then the response-time histogram.
#[derive(Debug, Default)]
struct Scrape {
    families: Vec<Family>,
    /// Per-bucket counts (the encoder adds them up), the last past every bound; the
    /// sum in seconds; the count.
    histogram: (Vec<(f64, u64)>, f64, u64),
}

impl Scrape {
    fn family(&mut self, kind: MetricType, name: &'static str, help: &'static str) -> &mut Family {
        self.families.push(Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        });
        self.families.last_mut().expect("just pushed")
    }

    /// A counter without labels.
    fn counter(&mut self, name: &'static str, help: &'static str, v: u64) {
        self.family(MetricType::Counter, name, help)
            .samples
            .push((Vec::new(), v as i64));
    }

    /// A gauge without labels.
    fn gauge(&mut self, name: &'static str, help: &'static str, v: i64) {
        self.family(MetricType::Gauge, name, help)
            .samples
            .push((Vec::new(), v));
    }

    /// A family with one label: (its value, the sample's value) for each sample.
    fn by<L: Into<String>>(
        &mut self,
        kind: MetricType,
        name: &'static str,
        help: &'static str,
        label: &'static str,
        values: impl IntoIterator<Item = (L, i64)>,
    ) {
        let f = self.family(kind, name, help);
        for (l, v) in values {
            f.samples.push((vec![(label, l.into())], v));
        }
    }

    /// A counter family with one label.
    fn counters<L: Into<String>>(
        &mut self,
        name: &'static str,
        help: &'static str,
        label: &'static str,
        values: impl IntoIterator<Item = (L, u64)>,
    ) {
        let values = values.into_iter().map(|(l, v)| (l, v as i64));
        self.by(MetricType::Counter, name, help, label, values);
    }

    /// Every family, from every worker's counters summed over the process's life.
    fn of(board: &Board, transmit: &str, driver: &'static str) -> Scrape {
        let mut m = Scrape::default();
        // A gauge of 1 with the facts as labels, the Prometheus convention (the
        // OpenMetrics info type is not read by every Prometheus text parser).
        let info = vec![
            ("version", env!("CARGO_PKG_VERSION").to_string()),
            ("driver", driver.to_string()),
            ("transmit", transmit.to_string()),
        ];
        m.family(MetricType::Gauge, "linerate_build_info", "What is serving")
            .samples
            .push((info, 1));
        m.gauge(
            "linerate_workers",
            "Worker threads serving now",
            board.workers.len() as i64,
        );
        m.answers(board, transmit);
        m.declared(board);
        m.derived(board);
        m.outside(board);
        m.histogram(board);
        m
    }

    /// The rows of the counters' table that name a metric, each a sample of its
    /// family (rows of one family share it, in the table's order).
    fn declared(&mut self, board: &Board) {
        for r in REPORTS {
            let Some(name) = r.metric else { continue };
            let kind = if r.gauge {
                MetricType::Gauge
            } else {
                MetricType::Counter
            };
            let labels = r.labels.iter().map(|&(l, v)| (l, v.to_string())).collect();
            let v = board.total(r.get) as i64;
            match self.families.iter_mut().find(|f| f.name == name) {
                Some(f) => f.samples.push((labels, v)),
                None => self.family(kind, name, r.help).samples.push((labels, v)),
            }
        }
    }

    /// Responses by method and class, and their body bytes by transmit strategy.
    fn answers(&mut self, board: &Board, transmit: &str) {
        let m = self;
        let sum = |f: &dyn Fn(&Stats) -> &AtomicU64| board.total(f);
        let responses = m.family(
            MetricType::Counter,
            "linerate_responses",
            "Responses by request method and status class",
        );
        for (mi, method) in METHODS.iter().enumerate() {
            for (ci, class) in CLASSES.iter().enumerate() {
                let v = sum(&|s| &s.responses[mi][ci]);
                let labels = vec![("method", method.to_string()), ("class", class.to_string())];
                responses.samples.push((labels, v as i64));
            }
        }
        m.counters(
            "linerate_response_body_bytes",
            "Response body bytes the sockets took, by transmit strategy",
            "transmit",
            [(transmit, sum(&|s| &s.body_bytes))],
        );
    }

    /// The families computed from counters (or arrays of them) rather than read
    /// from one: timeouts and HTTP/2 errors by kind, responses by protocol, TLS
    /// connections by result and path, the disk helpers' queue.
    fn derived(&mut self, board: &Board) {
        let m = self;
        let sum = |f: &dyn Fn(&Stats) -> &AtomicU64| board.total(f);
        m.counters(
            "linerate_timeouts",
            "Connections closed by a deadline, by kind",
            "kind",
            (0..TIMEOUT_KINDS.len()).map(|k| (TIMEOUT_KINDS[k], sum(&|s| &s.timeouts[k]))),
        );
        let all: u64 = (0..METHODS.len())
            .flat_map(|mi| (0..CLASSES.len()).map(move |ci| (mi, ci)))
            .map(|(mi, ci)| sum(&|s| &s.responses[mi][ci]))
            .sum();
        let (h2, h3) = (sum(&|s| &s.h2_responses), sum(&|s| &s.h3_responses));
        m.counters(
            "linerate_responses_by_protocol",
            "Responses logged, by the protocol they were answered in",
            "protocol",
            [
                ("http/1.1", all.saturating_sub(h2 + h3)),
                ("h2", h2),
                ("h3", h3),
            ],
        );
        m.counters(
            "linerate_http2_connection_errors",
            "HTTP/2 connections ended for what the client sent, by the GOAWAY code \
             (enhance_your_calm: a flood or an attack)",
            "code",
            (0..H2_ERRORS.len()).map(|k| (H2_ERRORS[k], sum(&|s| &s.h2_errors[k]))),
        );
        let (handshakes, kernel) = (sum(&|s| &s.tls_handshakes), sum(&|s| &s.tls_kernel));
        let tls = m.family(
            MetricType::Counter,
            "linerate_tls_connections",
            "HTTPS connections by how their handshake ended (done, or refused for what \
             the peer sent) and the path their bytes take (user: rustls in the worker; \
             kernel: kernel TLS after the handshake)",
        );
        for (result, path, v) in [
            ("done", "user", handshakes.saturating_sub(kernel)),
            ("done", "kernel", kernel),
            ("refused", "user", sum(&|s| &s.tls_refused)),
        ] {
            let labels = vec![("result", result.to_string()), ("path", path.to_string())];
            tls.samples.push((labels, v as i64));
        }
        let (misses, reads) = (sum(&|s| &s.misses), sum(&|s| &s.helper_reads));
        m.gauge(
            "linerate_disk_helper_queue",
            "Windows handed to the disk helpers and not read yet",
            misses.saturating_sub(reads) as i64,
        );
    }

    /// What is counted outside the workers: the compression cache's writer, ACME.
    fn outside(&mut self, board: &Board) {
        if let Some(t) = &board.limits {
            self.limits(&t.counted());
        }
        let m = self;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &board.compress;
        m.counters(
            "linerate_compress_cache_variants",
            "Variants the compressor made: written to the cache, not written because they saved under 10%, failed",
            "result",
            [
                ("written", load(&c.written)),
                ("not_smaller", load(&c.not_smaller)),
                ("failed", load(&c.failed)),
            ],
        );
        m.counter(
            "linerate_compress_cache_evictions",
            "Variants deleted from the compression cache to stay within its size",
            load(&c.evicted),
        );
        let held = "Bytes the compression cache's directory holds";
        m.gauge(
            "linerate_compress_cache_bytes",
            held,
            load(&c.bytes_held) as i64,
        );
        let queue = "Variants asked of the compressor and not made yet";
        m.gauge(
            "linerate_compress_cache_queue",
            queue,
            load(&c.queued) as i64,
        );
        if let Some(a) = &board.acme {
            m.acme(
                &a.status(),
                load(&a.counters.issued),
                load(&a.counters.failed),
            );
        }
    }

    /// The response-time histogram.
    fn histogram(&mut self, board: &Board) {
        let m = self;
        let sum = |f: &dyn Fn(&Stats) -> &AtomicU64| board.total(f);
        let per_bucket: Vec<u64> = (0..RESPONSE_SECONDS.len())
            .map(|b| sum(&|s| &s.response_time[b]))
            .collect();
        let count = sum(&|s| &s.response_time_count);
        let within: u64 = per_bucket.iter().sum();
        m.histogram = (
            RESPONSE_SECONDS
                .iter()
                .copied()
                .zip(per_bucket)
                .chain(std::iter::once((
                    f64::INFINITY,
                    count.saturating_sub(within),
                )))
                .collect(),
            sum(&|s| &s.response_time_sum_us) as f64 / 1e6,
            count,
        );
    }

    /// The request limits' families: what each limit refused and delayed, by its site
    /// (`*` for a rule of every site) and rule.
    fn limits(&mut self, counted: &[crate::limits::Counts]) {
        type Of = fn(&crate::limits::Counts) -> u64;
        let families: [(&'static str, &'static str, Of); 2] = [
            (
                "linerate_limit_requests_refused",
                "Requests refused (429) by a limit-requests, by site and rule",
                |c| c.refused,
            ),
            (
                "linerate_limit_requests_delayed",
                "Requests that waited their turn under a limit-requests with delay, by site and rule",
                |c| c.delayed,
            ),
        ];
        for (name, help, value) in families {
            let f = self.family(MetricType::Counter, name, help);
            for c in counted {
                let labels = vec![("site", c.site.clone()), ("rule", c.path.clone())];
                f.samples.push((labels, value(c) as i64));
            }
        }
    }

    /// ACME's families: each site's certificate, and the orders' results.
    fn acme(&mut self, sites: &[crate::acme::SiteStatus], issued: u64, failed: u64) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let valid = sites
            .iter()
            .filter(|s| s.not_after.is_some_and(|t| t > now))
            .count() as i64;
        self.by(
            MetricType::Gauge,
            "linerate_acme_certificates",
            "Sites with acme = true, by whether an ACME certificate of theirs serves (valid) or not yet (missing)",
            "state",
            [("valid", valid), ("missing", sites.len() as i64 - valid)],
        );
        self.by(
            MetricType::Gauge,
            "linerate_acme_certificate_expiry_seconds",
            "Seconds until the ACME certificate serving a site expires",
            "site",
            sites
                .iter()
                .filter_map(|s| Some((s.name.clone(), s.not_after? as i64 - now as i64))),
        );
        self.counters(
            "linerate_acme_attempts",
            "ACME orders, by result: issued or failed",
            "result",
            [("issued", issued), ("failed", failed)],
        );
    }
}

/// Writes one sample of a family of `kind`.
fn sample(
    m: &mut prometheus_client::encoding::MetricEncoder<'_>,
    kind: MetricType,
    v: i64,
) -> Result<(), std::fmt::Error> {
    match kind {
        MetricType::Counter => {
            m.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&(v as u64), None)
        }
        _ => m.encode_gauge(&v),
    }
}

/// The one text encoder: each family's descriptor and samples, then the histogram.
impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.families {
            let mut m = e.encode_descriptor(f.name, f.help, None, f.kind)?;
            for (labels, v) in &f.samples {
                if labels.is_empty() {
                    sample(&mut m, f.kind, *v)?;
                } else {
                    sample(&mut m.encode_family(labels)?, f.kind, *v)?;
                }
            }
        }
        let (buckets, sum, count) = &self.histogram;
        e.encode_descriptor(
            "linerate_response_seconds",
            "Time from a request complete to its response's last byte handed to the kernel",
            None,
            MetricType::Histogram,
        )?
        .encode_histogram::<prometheus_client::encoding::NoLabelSet>(*sum, *count, buckets, None)
    }
}

/// Every worker's counters as OpenMetrics text, or (`openmetrics` false) as the
/// Prometheus text format 0.0.4 that every Prometheus and `promtool` read.
pub(crate) fn render(
    board: &Board,
    transmit: String,
    driver: &'static str,
    openmetrics: bool,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape::of(board, &transmit, driver)));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
    if openmetrics {
        out
    } else {
        to_prometheus_text(&out)
    }
}

/// The OpenMetrics text `prometheus-client` writes, as Prometheus text: a counter's
/// `HELP` and `TYPE` name its samples' `_total` name, and there is no `# EOF`. Nothing
/// else differs for the families written here (no units, exemplars or info type).
fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        match renamed {
            Some(r) => out.push_str(&r),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Every counter a worker keeps set to a value of its own, and the compression
    /// cache's: a family that reads the wrong counter shows in the text.
    fn distinct() -> Board {
        let s = Stats::default();
        // Every row of the table, then the arrays.
        let mut all: Vec<&AtomicU64> = REPORTS.iter().map(|r| (r.get)(&s)).collect();
        all.extend(s.h2_errors.iter());
        all.extend(s.responses.iter().flatten());
        all.extend(s.response_time.iter());
        all.extend(s.timeouts.iter());
        for (i, c) in all.iter().enumerate() {
            Stats::add(c, 1000 + 7 * i as u64);
        }
        let board = Board::of(vec![Arc::new(s)]);
        let c = &board.compress;
        for (i, c) in [
            &c.written,
            &c.not_smaller,
            &c.failed,
            &c.evicted,
            &c.bytes_held,
            &c.queued,
        ]
        .into_iter()
        .enumerate()
        {
            c.store(500 + i as u64, Ordering::Relaxed);
        }
        // Two limits: one refused twice and delayed once, one of a site refused once.
        let table = crate::limits::Table::new(4096);
        let limit = crate::limits::LimitSettings {
            rate: "10/s".into(),
            ..Default::default()
        }
        .checked()
        .unwrap();
        let every = limit.clone().of_rule("*", "/");
        let site = limit.of_rule("a.example", "/api/");
        for (l, refused) in [
            (&every, true),
            (&every, true),
            (&every, false),
            (&site, true),
        ] {
            table.count(l, refused);
        }
        Board {
            limits: Some(Arc::new(table)),
            ..board
        }
    }

    /// ACME's families: a site whose certificate is valid, one expired, one with none;
    /// the expiry of the two that have one, the orders by result.
    #[test]
    fn acme_certificates_are_counted_by_state_and_expiry() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let site = |name: &str, not_after: Option<u64>| crate::acme::SiteStatus {
            name: name.into(),
            not_after,
            next_attempt: None,
            last_error: None,
        };
        let mut m = Scrape::default();
        m.acme(
            &[
                site("a.example", Some(now + 3600)),
                site("b.example", Some(now - 60)),
                site("c.example", None),
            ],
            4,
            1,
        );
        let samples = |name: &str| -> Vec<(String, i64)> {
            let f = m.families.iter().find(|f| f.name == name).unwrap();
            f.samples
                .iter()
                .map(|(l, v)| (l[0].1.clone(), *v))
                .collect()
        };
        let s = |x: &str, v: i64| (x.to_string(), v);
        assert_eq!(
            samples("linerate_acme_certificates"),
            [s("valid", 1), s("missing", 2)]
        );
        let expiry = samples("linerate_acme_certificate_expiry_seconds");
        assert_eq!(expiry.len(), 2, "{expiry:?}");
        assert!(
            (3590..=3600).contains(&expiry[0].1) && expiry[1].1 <= -60,
            "{expiry:?}"
        );
        assert_eq!(
            samples("linerate_acme_attempts"),
            [s("issued", 4), s("failed", 1)]
        );
    }

    /// The families, their order, names, help, labels and values, pinned in both
    /// formats (`snapshots/metrics.txt`).
    #[test]
    fn the_metrics_text_is_the_snapshot() {
        let board = distinct();
        let text = format!(
            "== OpenMetrics\n{}== Prometheus\n{}",
            render(&board, "splice".into(), "uring", true),
            render(&board, "splice".into(), "uring", false)
        );
        crate::snapshot_test::check("metrics.txt", &text);
    }

    #[test]
    fn counters_of_all_workers_are_summed_into_openmetrics_text() {
        use linerate_http::request::Method;
        let a = Arc::new(Stats::default());
        let b = Arc::new(Stats::default());
        a.record(
            Some(Method::Get),
            200,
            100,
            Some(std::time::Duration::from_micros(300)),
        );
        b.record(
            Some(Method::Get),
            404,
            10,
            Some(std::time::Duration::from_millis(20)),
        );
        b.record(Some(Method::Head), 200, 0, None);
        Stats::add(&b.timeouts[1], 2);
        let text = render(&Board::of(vec![a, b]), "sendfile".into(), "epoll", true);
        for want in [
            "linerate_responses_total{method=\"GET\",class=\"2xx\"} 1",
            "linerate_responses_total{method=\"GET\",class=\"4xx\"} 1",
            "linerate_responses_total{method=\"HEAD\",class=\"2xx\"} 1",
            "linerate_response_body_bytes_total{transmit=\"sendfile\"} 110",
            "linerate_timeouts_total{kind=\"idle\"} 2",
            "linerate_response_seconds_bucket{le=\"0.0005\"} 1",
            "linerate_response_seconds_bucket{le=\"+Inf\"} 2",
            "linerate_response_seconds_count 2",
            "linerate_workers 2",
            "# EOF",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        let prom = to_prometheus_text(&text);
        assert!(
            prom.contains("# TYPE linerate_responses_total counter\n"),
            "{prom}"
        );
        assert!(
            prom.contains("# HELP linerate_timeouts_total Connections"),
            "{prom}"
        );
        assert!(prom.contains("# TYPE linerate_response_seconds histogram\n"));
        assert!(!prom.contains("# EOF"));
    }
}
