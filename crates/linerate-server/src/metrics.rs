//! `--metrics-path`: the counters as Prometheus / OpenMetrics text, through the
//! `prometheus-client` crate.
//!
//! Each worker keeps its own counters ([`Stats`], plain loads and stores, no lock);
//! a scrape sums them over every worker of the process's life ([`Board`]: reloads
//! never set a counter back) into one [`Snapshot`], and a collector of
//! `prometheus-client` encodes it.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::stats::{Board, Stats, RESPONSE_SECONDS, TIMEOUT_KINDS};

/// The methods and status classes of [`Stats::responses`], in order.
const METHODS: [&str; 3] = ["GET", "HEAD", "other"];
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Every worker's counters summed, and what the server is.
#[derive(Debug, Default)]
struct Snapshot {
    workers: u64,
    transmit: String,
    driver: &'static str,
    responses: [[u64; 5]; 3],
    body_bytes: u64,
    accepted: u64,
    on_receive_cpu: u64,
    off_receive_cpu: u64,
    open: u64,
    idle: u64,
    timeouts: [u64; 4],
    cache_hits: u64,
    cache_misses: u64,
    compress_hits: u64,
    compress_waits: u64,
    /// The compression cache's: written, not smaller, failed; evictions; bytes held;
    /// jobs queued.
    compress_made: [u64; 3],
    compress_evicted: u64,
    compress_bytes: u64,
    compress_queued: u64,
    /// ACME: each site's certificate, and attempts issued and failed.
    acme: Option<(Vec<crate::acme::SiteStatus>, u64, u64)>,
    probes: u64,
    misses: u64,
    helper_reads: u64,
    helper_bytes: u64,
    collapsed: u64,
    defrags: u64,
    loop_waits: u64,
    ring_submitted: u64,
    ring_completed: u64,
    ring_enters: u64,
    tls_handshakes: u64,
    tls_kernel: u64,
    tls_refused: u64,
    proxy_refused: u64,
    h2_connections: u64,
    h2_responses: u64,
    h2_errors: [u64; 3],
    aborted: u64,
    log_lines_dropped: u64,
    unavailable: u64,
    forbidden: u64,
    open_out_of_fds: u64,
    accept_out_of_fds: u64,
    idle_closed_for_room: u64,
    auth_busy: u64,
    small_bytes_held: u64,
    tx_syscalls: u64,
    zc_sends: u64,
    zc_completions: u64,
    zc_copied: u64,
    zc_enobufs: u64,
    degraded: u64,
    response_time: [u64; RESPONSE_SECONDS.len()],
    response_time_count: u64,
    response_time_sum_us: u64,
}

impl Snapshot {
    fn of(board: &Board, transmit: String, driver: &'static str) -> Snapshot {
        let sum = |f: &dyn Fn(&Stats) -> &AtomicU64| board.total(f);
        let mut s = Snapshot {
            workers: board.workers.len() as u64,
            transmit,
            driver,
            body_bytes: sum(&|s| &s.body_bytes),
            accepted: sum(&|s| &s.accepted),
            on_receive_cpu: sum(&|s| &s.on_receive_cpu),
            off_receive_cpu: sum(&|s| &s.off_receive_cpu),
            open: sum(&|s| &s.open),
            idle: sum(&|s| &s.idle),
            cache_hits: sum(&|s| &s.cache_hits),
            cache_misses: sum(&|s| &s.cache_misses),
            compress_hits: sum(&|s| &s.compress_hits),
            compress_waits: sum(&|s| &s.compress_waits),
            compress_made: [
                board.compress.written.load(Ordering::Relaxed),
                board.compress.not_smaller.load(Ordering::Relaxed),
                board.compress.failed.load(Ordering::Relaxed),
            ],
            compress_evicted: board.compress.evicted.load(Ordering::Relaxed),
            compress_bytes: board.compress.bytes_held.load(Ordering::Relaxed),
            compress_queued: board.compress.queued.load(Ordering::Relaxed),
            acme: board.acme.as_ref().map(|a| {
                (
                    a.status(),
                    a.counters.issued.load(Ordering::Relaxed),
                    a.counters.failed.load(Ordering::Relaxed),
                )
            }),
            probes: sum(&|s| &s.probes),
            misses: sum(&|s| &s.misses),
            helper_reads: sum(&|s| &s.helper_reads),
            helper_bytes: sum(&|s| &s.helper_bytes),
            collapsed: sum(&|s| &s.collapsed),
            defrags: sum(&|s| &s.defrags),
            loop_waits: sum(&|s| &s.loop_waits),
            ring_submitted: sum(&|s| &s.ring_submitted),
            ring_completed: sum(&|s| &s.ring_completed),
            ring_enters: sum(&|s| &s.ring_enters),
            tls_handshakes: sum(&|s| &s.tls_handshakes),
            tls_kernel: sum(&|s| &s.tls_kernel),
            tls_refused: sum(&|s| &s.tls_refused),
            proxy_refused: sum(&|s| &s.proxy_refused),
            h2_connections: sum(&|s| &s.h2_connections),
            h2_responses: sum(&|s| &s.h2_responses),
            aborted: sum(&|s| &s.aborted),
            log_lines_dropped: sum(&|s| &s.log_lines_dropped),
            unavailable: sum(&|s| &s.unavailable),
            forbidden: sum(&|s| &s.forbidden),
            open_out_of_fds: sum(&|s| &s.open_out_of_fds),
            accept_out_of_fds: sum(&|s| &s.accept_out_of_fds),
            idle_closed_for_room: sum(&|s| &s.idle_closed_for_room),
            auth_busy: sum(&|s| &s.auth_busy),
            small_bytes_held: sum(&|s| &s.small_bytes_held),
            tx_syscalls: sum(&|s| &s.tx_syscalls),
            zc_sends: sum(&|s| &s.zc_sends),
            zc_completions: sum(&|s| &s.zc_completions),
            zc_copied: sum(&|s| &s.zc_copied),
            zc_enobufs: sum(&|s| &s.zc_enobufs),
            degraded: sum(&|s| &s.degraded),
            response_time_count: sum(&|s| &s.response_time_count),
            response_time_sum_us: sum(&|s| &s.response_time_sum_us),
            ..Snapshot::default()
        };
        for m in 0..3 {
            for c in 0..5 {
                s.responses[m][c] = sum(&|st| &st.responses[m][c]);
            }
        }
        for k in 0..3 {
            s.h2_errors[k] = sum(&|st| &st.h2_errors[k]);
        }
        for k in 0..TIMEOUT_KINDS.len() {
            s.timeouts[k] = sum(&|st| &st.timeouts[k]);
        }
        for b in 0..RESPONSE_SECONDS.len() {
            s.response_time[b] = sum(&|st| &st.response_time[b]);
        }
        s
    }
}

/// One counter family without labels.
fn counter(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    e.encode_descriptor(name, help, None, MetricType::Counter)?
        .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)
}

/// One gauge family without labels.
fn gauge(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    v: u64,
) -> Result<(), std::fmt::Error> {
    e.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&v)
}

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let info = [
            ("version", env!("CARGO_PKG_VERSION")),
            ("driver", self.driver),
            ("transmit", self.transmit.as_str()),
        ];
        // A gauge of 1 with the facts as labels, the Prometheus convention (the
        // OpenMetrics info type is not read by every Prometheus text parser).
        e.encode_descriptor(
            "linerate_build_info",
            "What is serving",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&info)?
        .encode_gauge(&1u64)?;
        gauge(
            &mut e,
            "linerate_workers",
            "Worker threads serving now",
            self.workers,
        )?;
        {
            let mut m = e.encode_descriptor(
                "linerate_responses",
                "Responses by request method and status class",
                None,
                MetricType::Counter,
            )?;
            for (mi, method) in METHODS.iter().enumerate() {
                for (ci, class) in CLASSES.iter().enumerate() {
                    let labels = [("method", *method), ("class", *class)];
                    m.encode_family(&labels)?
                        .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                            &self.responses[mi][ci],
                            None,
                        )?;
                }
            }
        }
        {
            let labels = [("transmit", self.transmit.as_str())];
            e.encode_descriptor(
                "linerate_response_body_bytes",
                "Response body bytes the sockets took, by transmit strategy",
                None,
                MetricType::Counter,
            )?
            .encode_family(&labels)?
            .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                &self.body_bytes,
                None,
            )?;
        }
        counter(
            &mut e,
            "linerate_connections_accepted",
            "Connections accepted",
            self.accepted,
        )?;
        {
            let mut m = e.encode_descriptor(
                "linerate_connections_receive_cpu",
                "Connections accepted by a pinned worker, by whether the worker runs on the \
                 CPU that processed the connection's packets (same) or not (other)",
                None,
                MetricType::Counter,
            )?;
            for (cpu, v) in [
                ("same", self.on_receive_cpu),
                ("other", self.off_receive_cpu),
            ] {
                m.encode_family(&[("cpu", cpu)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        gauge(
            &mut e,
            "linerate_connections_open",
            "Connections open (at the last tick)",
            self.open,
        )?;
        gauge(
            &mut e,
            "linerate_connections_idle",
            "Keep-alive connections idle (at the last tick)",
            self.idle,
        )?;
        {
            let mut m = e.encode_descriptor(
                "linerate_timeouts",
                "Connections closed by a deadline, by kind",
                None,
                MetricType::Counter,
            )?;
            for (k, kind) in TIMEOUT_KINDS.iter().enumerate() {
                m.encode_family(&[("kind", *kind)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                        &self.timeouts[k],
                        None,
                    )?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "linerate_errors",
                "Answers refused or cut, by reason",
                None,
                MetricType::Counter,
            )?;
            for (reason, v) in [
                ("forbidden_403", self.forbidden),
                ("unavailable_503", self.unavailable),
                ("aborted", self.aborted),
                ("open_out_of_descriptors", self.open_out_of_fds),
                ("accept_out_of_descriptors", self.accept_out_of_fds),
                ("idle_closed_for_room", self.idle_closed_for_room),
                ("auth_busy_503", self.auth_busy),
            ] {
                m.encode_family(&[("reason", reason)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "linerate_responses_by_protocol",
                "Responses logged, by the protocol they were answered in",
                None,
                MetricType::Counter,
            )?;
            let all: u64 = self.responses.iter().flatten().sum();
            for (protocol, v) in [
                ("http/1.1", all.saturating_sub(self.h2_responses)),
                ("h2", self.h2_responses),
            ] {
                m.encode_family(&[("protocol", protocol)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "linerate_http2_connection_errors",
                "HTTP/2 connections ended for what the client sent, by the GOAWAY code \
                 (enhance_your_calm: a flood or an attack)",
                None,
                MetricType::Counter,
            )?;
            for (code, v) in crate::stats::H2_ERRORS.iter().zip(self.h2_errors) {
                m.encode_family(&[("code", *code)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        counter(
            &mut e,
            "linerate_proxy_header_refused",
            "Connections to a --proxy-protocol listener closed for not opening with a PROXY header",
            self.proxy_refused,
        )?;
        counter(
            &mut e,
            "linerate_http2_connections",
            "Connections that spoke HTTP/2 (prior knowledge in clear, or ALPN h2)",
            self.h2_connections,
        )?;
        {
            let mut m = e.encode_descriptor(
                "linerate_tls_connections",
                "HTTPS connections by how their handshake ended (done, or refused for what \
                 the peer sent) and the path their bytes take (user: rustls in the worker; \
                 kernel: kernel TLS after the handshake)",
                None,
                MetricType::Counter,
            )?;
            let user = self.tls_handshakes.saturating_sub(self.tls_kernel);
            for (result, path, v) in [
                ("done", "user", user),
                ("done", "kernel", self.tls_kernel),
                ("refused", "user", self.tls_refused),
            ] {
                m.encode_family(&[("result", result), ("path", path)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "linerate_open_file_cache_lookups",
                "Open-file cache lookups, answered from the cache (hit) or by an open (miss)",
                None,
                MetricType::Counter,
            )?;
            for (result, v) in [("hit", self.cache_hits), ("miss", self.cache_misses)] {
                m.encode_family(&[("result", result)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "linerate_compress_cache_answers",
                "Answers for files with no precompressed variant that the client takes: from the compression cache (hit), or the identity body while the variant is written (wait)",
                None,
                MetricType::Counter,
            )?;
            for (result, v) in [("hit", self.compress_hits), ("wait", self.compress_waits)] {
                m.encode_family(&[("result", result)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "linerate_compress_cache_variants",
                "Variants the compressor made: written to the cache, not written because they saved under 10%, failed",
                None,
                MetricType::Counter,
            )?;
            for (result, v) in ["written", "not_smaller", "failed"]
                .into_iter()
                .zip(self.compress_made)
            {
                m.encode_family(&[("result", result)])?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
            }
        }
        if let Some((sites, issued, failed)) = &self.acme {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let valid = sites
                .iter()
                .filter(|s| s.not_after.is_some_and(|t| t > now))
                .count() as u64;
            {
                let mut m = e.encode_descriptor(
                    "linerate_acme_certificates",
                    "Sites with acme = true, by whether an ACME certificate of theirs serves (valid) or not yet (missing)",
                    None,
                    MetricType::Gauge,
                )?;
                for (state, v) in [("valid", valid), ("missing", sites.len() as u64 - valid)] {
                    m.encode_family(&[("state", state)])?.encode_gauge(&v)?;
                }
            }
            {
                let mut m = e.encode_descriptor(
                    "linerate_acme_certificate_expiry_seconds",
                    "Seconds until the ACME certificate serving a site expires",
                    None,
                    MetricType::Gauge,
                )?;
                for s in sites {
                    if let Some(t) = s.not_after {
                        let left = t as i64 - now as i64;
                        m.encode_family(&[("site", s.name.as_str())])?
                            .encode_gauge(&left)?;
                    }
                }
            }
            {
                let mut m = e.encode_descriptor(
                    "linerate_acme_attempts",
                    "ACME orders, by result: issued or failed",
                    None,
                    MetricType::Counter,
                )?;
                for (result, v) in [("issued", *issued), ("failed", *failed)] {
                    m.encode_family(&[("result", result)])?
                        .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&v, None)?;
                }
            }
        }
        counter(
            &mut e,
            "linerate_compress_cache_evictions",
            "Variants deleted from the compression cache to stay within its size",
            self.compress_evicted,
        )?;
        gauge(
            &mut e,
            "linerate_compress_cache_bytes",
            "Bytes the compression cache's directory holds",
            self.compress_bytes,
        )?;
        gauge(
            &mut e,
            "linerate_compress_cache_queue",
            "Variants asked of the compressor and not made yet",
            self.compress_queued,
        )?;
        counter(
            &mut e,
            "linerate_log_lines_dropped",
            "Access-log lines dropped whole because the disk refused them (full or failing)",
            self.log_lines_dropped,
        )?;
        counter(
            &mut e,
            "linerate_residency_probes",
            "Page-cache residency probes",
            self.probes,
        )?;
        counter(
            &mut e,
            "linerate_residency_misses",
            "Probes that found pages missing (windows handed to the disk helpers)",
            self.misses,
        )?;
        counter(
            &mut e,
            "linerate_disk_helper_reads",
            "Windows the disk helpers read",
            self.helper_reads,
        )?;
        counter(
            &mut e,
            "linerate_disk_helper_read_bytes",
            "Bytes the disk helpers read",
            self.helper_bytes,
        )?;
        gauge(
            &mut e,
            "linerate_disk_helper_queue",
            "Windows handed to the disk helpers and not read yet",
            self.misses.saturating_sub(self.helper_reads),
        )?;
        counter(
            &mut e,
            "linerate_queue_collapses",
            "File ranges read into the gather (seed 001's collapse)",
            self.collapsed,
        )?;
        counter(
            &mut e,
            "linerate_queue_defrags",
            "Gathers linearized (seed 001's defrag)",
            self.defrags,
        )?;
        for (name, help, v) in [
            (
                "linerate_event_loop_waits",
                "Event-loop waits (epoll_wait, or the io_uring driver's)",
                self.loop_waits,
            ),
            (
                "linerate_ring_submissions",
                "Requests the io_uring driver submitted",
                self.ring_submitted,
            ),
            (
                "linerate_ring_completions",
                "Completions the io_uring driver read",
                self.ring_completed,
            ),
            (
                "linerate_ring_enters",
                "io_uring_enter calls of the io_uring driver",
                self.ring_enters,
            ),
        ] {
            counter(&mut e, name, help, v)?;
        }
        for (name, help, v) in [
            (
                "linerate_transmit_syscalls",
                "System calls the transmit engine made (counted when a connection closes)",
                self.tx_syscalls,
            ),
            (
                "linerate_transmit_degraded",
                "Transmits that fell back to a simpler strategy (counted when a connection closes)",
                self.degraded,
            ),
            (
                "linerate_zerocopy_sends",
                "MSG_ZEROCOPY sends that queued bytes (counted when a connection closes)",
                self.zc_sends,
            ),
            (
                "linerate_zerocopy_completions",
                "Zero-copy completions read (counted when a connection closes)",
                self.zc_completions,
            ),
            (
                "linerate_zerocopy_copied",
                "Zero-copy sends the kernel copied after all (counted when a connection closes)",
                self.zc_copied,
            ),
            (
                "linerate_zerocopy_enobufs",
                "Zero-copy sends refused with ENOBUFS (counted when a connection closes)",
                self.zc_enobufs,
            ),
        ] {
            counter(&mut e, name, help, v)?;
        }
        gauge(
            &mut e,
            "linerate_small_file_bytes",
            "Small-file contents held in memory",
            self.small_bytes_held,
        )?;
        {
            // Per-bucket counts (the encoder adds them up), the last one past every bound.
            let within: u64 = self.response_time.iter().sum();
            let buckets: Vec<(f64, u64)> = RESPONSE_SECONDS
                .iter()
                .copied()
                .zip(self.response_time.iter().copied())
                .chain(std::iter::once((
                    f64::INFINITY,
                    self.response_time_count.saturating_sub(within),
                )))
                .collect();
            e.encode_descriptor(
                "linerate_response_seconds",
                "Time from a request complete to its response's last byte handed to the kernel",
                None,
                MetricType::Histogram,
            )?
            .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                self.response_time_sum_us as f64 / 1e6,
                self.response_time_count,
                &buckets,
                None,
            )?;
        }
        Ok(())
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
    registry.register_collector(Box::new(Snapshot::of(board, transmit, driver)));
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
