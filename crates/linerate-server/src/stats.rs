//! The workers' counters: each worker writes its own ([`Stats`], plain loads and
//! stores, no locked instruction), and the status page and the metrics sum them over
//! every worker of the process's life ([`Board`]), so a reload never sets a counter
//! back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// The GOAWAY codes [`Stats::h2_errors`] counts, in its order (PROTOCOL_ERROR stands
/// for every other code: flow control, frame size, a closed stream).
pub(crate) const H2_ERRORS: [&str; 3] =
    ["protocol_error", "compression_error", "enhance_your_calm"];

/// Where a counter is reported: its key in the status page's JSON (`"disk.probes"` is
/// `probes` in the `disk` object), and its metric family, labels and help (the help
/// given once, by the family's first row).
#[derive(Debug)]
pub(crate) struct Report {
    pub gauge: bool,
    pub json: Option<&'static str>,
    pub metric: Option<&'static str>,
    pub labels: &'static [(&'static str, &'static str)],
    pub help: &'static str,
    pub get: fn(&Stats) -> &AtomicU64,
}

/// The workers' counters, one row each, where they are counted: the row's doc, its
/// field, `counter` (summed over every worker there was) or `gauge` (set by its worker,
/// summed over the workers there are), then `as "json.key"` for the status page and
/// `=> "metric_name" [label = "value"] "help"` for the metrics. From the rows come the
/// [`Stats`] fields, the sum an ended worker leaves ([`Stats::add_to`]) and [`REPORTS`],
/// which the status page ([`Board::json`]) and the metrics (`metrics::Scrape`) walk. The
/// fields after the rows (arrays, and counters reported by hand because a family
/// derives from them) are written by hand.
macro_rules! stats {
    (
        $(#[$sm:meta])*
        pub struct Stats {
            $(
                $(#[$m:meta])*
                $field:ident: $kind:ident
                    $(as $json:literal)?
                    $(=> $metric:literal $([$($l:ident = $lv:literal),*])? $($help:literal)?)?,
            )*
            ;
            $(
                $(#[$hm:meta])*
                pub $hand:ident: $hty:ty,
            )*
        }
    ) => {
        $(#[$sm])*
        #[derive(Debug, Default)]
        pub(crate) struct Stats {
            $(
                $(#[$m])*
                pub $field: AtomicU64,
            )*
            $(
                $(#[$hm])*
                pub $hand: $hty,
            )*
        }

        /// Every row of the table, in order.
        pub(crate) const REPORTS: &[Report] = &[$(
            Report {
                gauge: stats!(@gauge $kind),
                json: stats!(@some $($json)?),
                metric: stats!(@some $($metric)?),
                labels: &[$($($((stringify!($l), $lv)),*)?)?],
                help: concat!($($($help)?)?),
                get: |s| &s.$field,
            },
        )*];
    };
    (@some) => { None };
    (@some $e:literal) => { Some($e) };
    (@gauge counter) => { false };
    (@gauge gauge) => { true };
}

stats! {
    /// A worker's counters. Only its worker writes them (plain load and store, no locked
    /// instruction); the status page reads them from any worker.
    pub struct Stats {
        accepted: counter as "connections_accepted"
            => "linerate_connections_accepted" "Connections accepted",
        /// Connections accepted by a pinned worker on the CPU that processed their
        /// packets (`SO_INCOMING_CPU`), and elsewhere.
        on_receive_cpu: counter as "connections_on_receive_cpu"
            => "linerate_connections_receive_cpu" [cpu = "same"]
            "Connections accepted by a pinned worker, by whether the worker runs on the \
             CPU that processed the connection's packets (same) or not (other)",
        off_receive_cpu: counter as "connections_off_receive_cpu"
            => "linerate_connections_receive_cpu" [cpu = "other"],
        /// Connections open, and of them idle (set every tick).
        open: gauge => "linerate_connections_open" "Connections open (at the last tick)",
        idle: gauge => "linerate_connections_idle" "Keep-alive connections idle (at the last tick)",
        requests: counter as "requests",
        /// 403s: the permission bits refused an open.
        forbidden: counter as "errors.forbidden_403"
            => "linerate_errors" [reason = "forbidden_403"] "Answers refused or cut, by reason",
        /// 503s answered because the retry of an open failed too.
        unavailable: counter as "errors.unavailable_503"
            => "linerate_errors" [reason = "unavailable_503"],
        /// Responses that ended before their last byte (reset, deadline, shutdown,
        /// truncation).
        aborted: counter as "errors.responses_aborted"
            => "linerate_errors" [reason = "aborted"],
        /// Opens of files refused for lack of descriptors (`EMFILE`/`ENFILE`; each empties
        /// the open-file cache and tries once more).
        open_out_of_fds: counter as "errors.open_out_of_descriptors"
            => "linerate_errors" [reason = "open_out_of_descriptors"],
        /// Accepts refused for lack of descriptors (accepting then pauses).
        accept_out_of_fds: counter as "errors.accept_out_of_descriptors"
            => "linerate_errors" [reason = "accept_out_of_descriptors"],
        /// Idle keep-alive connections closed to make room for new ones.
        idle_closed_for_room: counter as "errors.idle_closed_for_room"
            => "linerate_errors" [reason = "idle_closed_for_room"],
        /// Requests refused (429) by a `limit-requests` (each limit's, with those that
        /// waited their turn, in `limits` and by site and rule in the metrics).
        limited_requests: counter as "errors.limit_requests_429",
        /// 503s: the process was making as many password checks as it may.
        auth_busy: counter as "errors.auth_busy_503"
            => "linerate_errors" [reason = "auth_busy_503"],
        /// Connections to a `--proxy-protocol` listener closed because they did not open
        /// with a PROXY header.
        proxy_refused: counter as "errors.proxy_header_refused"
            => "linerate_proxy_header_refused"
            "Connections to a --proxy-protocol listener closed for not opening with a PROXY header",
        /// Connections that turned to HTTP/2 (its preface, in clear or after ALPN `h2`),
        /// and the streams taken on them.
        h2_connections: counter as "http2.connections"
            => "linerate_http2_connections"
            "Connections that spoke HTTP/2 (prior knowledge in clear, or ALPN h2)",
        h2_streams: counter as "http2.streams",
        /// TLS connections closed for what their peer sent: not TLS at all, or a
        /// handshake or record rustls refused.
        tls_refused: counter as "tls.refused",
        /// Open-file cache lookups answered from the cache, and those that opened.
        cache_hits: counter
            => "linerate_open_file_cache_lookups" [result = "hit"]
            "Open-file cache lookups, answered from the cache (hit) or by an open (miss)",
        cache_misses: counter => "linerate_open_file_cache_lookups" [result = "miss"],
        /// Answers sent from the compression cache, and identity answers sent while the
        /// client's coding was being written there.
        compress_hits: counter as "compress_cache.hits"
            => "linerate_compress_cache_answers" [result = "hit"]
            "Answers for files with no precompressed variant that the client takes: from \
             the compression cache (hit), or the identity body while the variant is written \
             (wait)",
        compress_waits: counter as "compress_cache.waits"
            => "linerate_compress_cache_answers" [result = "wait"],
        /// Access-log lines dropped because the disk refused them (full, or failing).
        log_lines_dropped: counter as "errors.log_lines_dropped"
            => "linerate_log_lines_dropped"
            "Access-log lines dropped whole because the disk refused them (full or failing)",
        /// Residency probes (`cachestat` calls).
        probes: counter as "disk.probes"
            => "linerate_residency_probes" "Page-cache residency probes",
        /// Probes that found a page missing: windows handed to the helpers.
        misses: counter as "disk.misses"
            => "linerate_residency_misses"
            "Probes that found pages missing (windows handed to the disk helpers)",
        /// Windows the helpers finished, and the bytes they read.
        helper_reads: counter as "disk.helper_reads"
            => "linerate_disk_helper_reads" "Windows the disk helpers read",
        helper_bytes: counter as "disk.helper_bytes"
            => "linerate_disk_helper_read_bytes" "Bytes the disk helpers read",
        /// Small files whose contents were not resident (`RWF_NOWAIT` would have waited).
        small_misses: counter as "disk.small_file_misses",
        /// File ranges read into the gather (seed 001's collapse), and their bytes.
        collapsed: counter as "queue.collapsed"
            => "linerate_queue_collapses" "File ranges read into the gather (seed 001's collapse)",
        collapsed_bytes: counter as "queue.collapsed_bytes",
        /// Gathers linearized into their last segment (seed 001's defrag).
        defrags: counter as "queue.defrags"
            => "linerate_queue_defrags" "Gathers linearized (seed 001's defrag)",
        /// File bodies sent with `TCP_CORK` set (`--cork-min`), and corks cleared after one.
        corked: counter as "queue.corked",
        uncorked: counter as "queue.uncorked",
        /// Event-loop waits (`epoll_wait`, or the io_uring driver's wait), and the io_uring
        /// driver's requests submitted, completions read and `io_uring_enter` calls (added
        /// every tick).
        loop_waits: counter as "event_loop.waits"
            => "linerate_event_loop_waits" "Event-loop waits (epoll_wait, or the io_uring driver's)",
        ring_submitted: counter as "event_loop.ring_submissions"
            => "linerate_ring_submissions" "Requests the io_uring driver submitted",
        ring_completed: counter as "event_loop.ring_completions"
            => "linerate_ring_completions" "Completions the io_uring driver read",
        ring_enters: counter as "event_loop.ring_enters"
            => "linerate_ring_enters" "io_uring_enter calls of the io_uring driver",
        /// The engine's counters of closed connections (see [`Stats::add_tx`]).
        tx_syscalls: counter
            => "linerate_transmit_syscalls"
            "System calls the transmit engine made (counted when a connection closes)",
        degraded: counter
            => "linerate_transmit_degraded"
            "Transmits that fell back to a simpler strategy (counted when a connection closes)",
        zc_sends: counter
            => "linerate_zerocopy_sends"
            "MSG_ZEROCOPY sends that queued bytes (counted when a connection closes)",
        zc_completions: counter
            => "linerate_zerocopy_completions"
            "Zero-copy completions read (counted when a connection closes)",
        zc_copied: counter
            => "linerate_zerocopy_copied"
            "Zero-copy sends the kernel copied after all (counted when a connection closes)",
        zc_enobufs: counter
            => "linerate_zerocopy_enobufs"
            "Zero-copy sends refused with ENOBUFS (counted when a connection closes)",
        /// Bytes of small-file contents held now, and contents given up to stay within
        /// `--small-file-memory`.
        small_bytes_held: gauge as "small_files.bytes_held"
            => "linerate_small_file_bytes" "Small-file contents held in memory",
        small_evictions: counter as "small_files.evictions",
        /// TLS handshakes completed, and of them the connections whose keys went to the
        /// kernel after the handshake (kernel TLS; the others' records are sealed in user
        /// space): reported by `metrics` as one family with `tls_refused`.
        tls_handshakes: counter as "tls.handshakes",
        tls_kernel: counter as "tls.path_kernel",
        /// The responses logged for HTTP/2 streams (as every response is, finished or
        /// cut): reported by `metrics` beside the others.
        h2_responses: counter as "http2.responses",
        /// HTTP/3: connections that completed their handshake, the request streams
        /// taken on them, and the responses logged for them.
        h3_connections: counter as "http3.connections"
            => "linerate_http3_connections" "QUIC connections that completed their handshake (HTTP/3)",
        h3_streams: counter as "http3.streams",
        /// Retry packets sent to check a new HTTP/3 client's address (`--http3-retry`).
        h3_retries: counter as "http3.retries"
            => "linerate_http3_retries"
            "Retry packets sent to check a new HTTP/3 client's address (--http3-retry)",
        h3_responses: counter as "http3.responses",
        /// HTTP/3 sessions resumed (a ticket the server could open, or a session it
        /// held: an upper bound, since rustls may still refuse one it opened, as
        /// when its cipher suite is not the one chosen now), and requests that came in 0-RTT (`--http3-early-data`; those not GET
        /// or HEAD answered 425).
        h3_resumed: counter as "http3.resumed"
            => "linerate_http3_resumed"
            "HTTP/3 handshakes that resumed a session",
        /// HTTP/3 connections closed for what the client sent (an HTTP/3 or QPACK
        /// error), and of them those closed as excessive load (a flood: answers
        /// cancelled by the hundred, a head past twice the limits).
        h3_errors: counter as "http3.connection_errors"
            => "linerate_http3_connection_errors"
            "HTTP/3 connections closed for what the client sent (an HTTP/3 or QPACK error)",
        h3_excessive_load: counter as "http3.excessive_load"
            => "linerate_http3_excessive_load"
            "HTTP/3 connections closed as a flood (H3_EXCESSIVE_LOAD: answers cancelled by the hundred, a head past twice the limits)",
        /// HTTP/3's UDP: sends (each one `sendmsg` or ring send: a GSO batch of several
        /// datagrams, or one) and their datagrams; receives (each one `recvmsg` or ring
        /// completion: several datagrams when GRO coalesced them), their datagrams and
        /// bytes. Datagrams per send and bytes per receive are the ratios.
        h3_sends: counter as "http3.udp_sends"
            => "linerate_http3_udp_sends"
            "UDP sends of HTTP/3 (one sendmsg each: a GSO batch, or one datagram)",
        h3_datagrams_sent: counter as "http3.datagrams_sent"
            => "linerate_http3_datagrams_sent" "QUIC datagrams sent",
        h3_receives: counter as "http3.udp_receives"
            => "linerate_http3_udp_receives"
            "UDP receives of HTTP/3 (one recvmsg or ring completion each: several datagrams with GRO)",
        h3_datagrams_received: counter as "http3.datagrams_received"
            => "linerate_http3_datagrams_received" "QUIC datagrams received",
        h3_bytes_received: counter as "http3.bytes_received"
            => "linerate_http3_bytes_received" "Bytes of QUIC datagrams received",
        /// Datagrams a worker read of a connection another worker's endpoint owns,
        /// handed to it (the kernel's program places each by its connection ID; a
        /// reload's two generations share the sockets).
        h3_misrouted: counter as "http3.misrouted_datagrams"
            => "linerate_http3_misrouted_datagrams"
            "QUIC datagrams read by a worker that does not own their connection, handed to the one that does",
        /// Connections a reload handed to the next generation's workers, which go
        /// on there (the rest were told GOAWAY and closed).
        h3_kept: counter as "http3.connections_kept"
            => "linerate_http3_connections_kept"
            "HTTP/3 connections handed to the next generation of workers at a reload, kept open",
        h3_early: counter as "http3.early_requests"
            => "linerate_http3_early_requests"
            "HTTP/3 requests that came in 0-RTT (--http3-early-data)",
        /// Body bytes the sockets took (by `metrics` with the transmit strategy).
        body_bytes: counter,
        /// The response-time histogram's count, and its sum in microseconds.
        response_time_count: counter,
        response_time_sum_us: counter,
        ;
        /// HTTP/2 connections ended by an error of the client's, by the GOAWAY code sent:
        /// [`H2_ERRORS`] (ENHANCE_YOUR_CALM is a flood or an attack: rapid resets,
        /// CONTINUATION or idle-frame floods, an HPACK bomb).
        pub h2_errors: [AtomicU64; 3],
        /// Responses by method (GET, HEAD, other) and status class (1xx to 5xx).
        pub responses: [[AtomicU64; 5]; 3],
        /// Time from a request complete to its response's last byte handed to the kernel:
        /// counts at or under each of [`RESPONSE_SECONDS`] (then `response_time_count`
        /// and `response_time_sum_us`).
        pub response_time: [AtomicU64; RESPONSE_SECONDS.len()],
        /// Connections closed by a deadline: header, idle, send, body.
        pub timeouts: [AtomicU64; 4],
    }
}

/// The upper bounds of the response-time histogram, seconds.
pub const RESPONSE_SECONDS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];

/// The kinds of [`Stats::timeouts`], in order.
pub const TIMEOUT_KINDS: [&str; 4] = ["header", "idle", "send", "body"];

impl Stats {
    /// Adds `n` to a counter of this worker's (single writer).
    pub fn add(c: &AtomicU64, n: u64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Sets a gauge of this worker's (single writer).
    pub fn set(c: &AtomicU64, n: u64) {
        c.store(n, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    /// Adds a closed connection's transmit counters (counted at the close, so a
    /// connection open for long shows late).
    pub fn add_tx(&self, c: &linerate_tx::Counters) {
        Stats::add(&self.tx_syscalls, c.syscalls);
        Stats::add(&self.zc_sends, c.zc_sends);
        Stats::add(&self.zc_completions, c.zc_completions);
        Stats::add(&self.zc_copied, c.zc_copied);
        Stats::add(&self.zc_enobufs, c.zc_enobufs);
        Stats::add(&self.degraded, c.degraded);
    }

    /// Counts a finished (or cut) response: its method and status class, the body
    /// bytes that left, and how long it took.
    pub fn record(
        &self,
        method: Option<linerate_http::request::Method>,
        status: u16,
        body_bytes: u64,
        took: Option<std::time::Duration>,
    ) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        use linerate_http::request::Method;
        let method = match method {
            Some(Method::Get) => 0,
            Some(Method::Head) => 1,
            _ => 2,
        };
        Stats::add(&self.responses[method][class], 1);
        Stats::add(&self.body_bytes, body_bytes);
        if let Some(t) = took {
            let secs = t.as_secs_f64();
            if let Some(i) = RESPONSE_SECONDS.iter().position(|&b| secs <= b) {
                Stats::add(&self.response_time[i], 1);
            }
            Stats::add(&self.response_time_count, 1);
            Stats::add(&self.response_time_sum_us, t.as_micros() as u64);
        }
    }

    /// Adds this worker's counters to `sum` (whose only writer is the caller); its
    /// gauges were its own and are left out.
    fn add_to(&self, sum: &Stats) {
        let rows = REPORTS.iter().filter(|r| !r.gauge).map(|r| (r.get)(self));
        let into = REPORTS.iter().filter(|r| !r.gauge).map(|r| (r.get)(sum));
        let arrays = self
            .responses
            .iter()
            .flatten()
            .zip(sum.responses.iter().flatten())
            .chain(self.response_time.iter().zip(&sum.response_time))
            .chain(self.timeouts.iter().zip(&sum.timeouts))
            .chain(self.h2_errors.iter().zip(&sum.h2_errors));
        for (mine, into) in rows.zip(into).chain(arrays) {
            Stats::add(into, Stats::get(mine));
        }
    }
}

/// The counters a status page or a scrape sums: those of its own generation of workers
/// and [`Earlier`] ones, so that over the process's life a counter never goes back,
/// reloads or not.
#[derive(Clone, Default)]
pub(crate) struct Board {
    /// The workers of this generation.
    pub workers: Arc<[Arc<Stats>]>,
    pub earlier: Arc<Earlier>,
    /// A stop has begun (the health path answers 503), for the whole process.
    pub draining: Arc<std::sync::atomic::AtomicBool>,
    /// The compression cache's counters, for the whole process.
    pub compress: Arc<crate::compress_cache::Counters>,
    /// The ACME certificates and challenges, for the whole process (when a site has
    /// `acme = true`).
    pub acme: Option<Arc<crate::acme::Acme>>,
    /// The request-rate table, for the whole process (when a site or a rule has
    /// `limit-requests`).
    pub limits: Option<Arc<crate::limits::Table>>,
}

/// The counters of generations before the current one: the workers still draining
/// after a reload, and the sum of those that ended. Written by the main thread at a
/// reload and when a generation ends, read by scrapes: the lock is never taken on the
/// request path.
#[derive(Default)]
pub(crate) struct Earlier {
    inner: RwLock<(Vec<Arc<Stats>>, Stats)>,
}

impl Earlier {
    fn lock(&self) -> std::sync::RwLockWriteGuard<'_, (Vec<Arc<Stats>>, Stats)> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// `workers` are no longer the current generation (a reload): counted here while
    /// they drain. Idempotent.
    pub fn retire(&self, workers: &[Arc<Stats>]) {
        let mut g = self.lock();
        for w in workers {
            if !g.0.iter().any(|s| Arc::ptr_eq(s, w)) {
                g.0.push(Arc::clone(w));
            }
        }
    }

    /// `workers` ended: their counters join the sum, in one step under the lock, so no
    /// scrape counts them twice or not at all.
    pub fn ended(&self, workers: &[Arc<Stats>]) {
        let mut g = self.lock();
        let (draining, sum) = &mut *g;
        draining.retain(|s| !workers.iter().any(|w| Arc::ptr_eq(s, w)));
        for w in workers {
            w.add_to(sum);
        }
    }
}

impl Board {
    /// A board of `workers` alone (no reload before them).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn of(workers: Vec<Arc<Stats>>) -> Board {
        Board {
            workers: workers.into(),
            earlier: Arc::default(),
            draining: Arc::default(),
            compress: Arc::default(),
            acme: None,
            limits: None,
        }
    }

    /// One counter summed over every worker there is and was: what the status page and
    /// the metrics both report.
    pub fn total(&self, f: impl Fn(&Stats) -> &AtomicU64) -> u64 {
        let g = self
            .earlier
            .inner
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let (draining, ended) = &*g;
        let mine: u64 = self.workers.iter().map(|s| Stats::get(f(s))).sum();
        // A draining worker may read its own generation's board: not counted twice.
        let theirs: u64 = draining
            .iter()
            .filter(|s| !self.workers.iter().any(|w| Arc::ptr_eq(s, w)))
            .map(|s| Stats::get(f(s)))
            .sum();
        mine + theirs + Stats::get(f(ended))
    }

    /// The status page's JSON for all workers' counters: each row of [`REPORTS`] with a
    /// key, and what is counted outside the workers (the compression cache's, ACME's).
    pub fn json(&self) -> serde_json::Value {
        let mut j = serde_json::json!({ "workers": self.workers.len() });
        for r in REPORTS {
            if let Some(key) = r.json {
                put(&mut j, key, self.total(r.get).into());
            }
        }
        let load = |a: &AtomicU64| serde_json::Value::from(a.load(Ordering::Relaxed));
        let c = &self.compress;
        for (key, a) in [
            ("written", &c.written),
            ("not_smaller", &c.not_smaller),
            ("failed", &c.failed),
            ("bytes_in", &c.bytes_in),
            ("bytes_out", &c.bytes_out),
            ("evictions", &c.evicted),
            ("bytes_held", &c.bytes_held),
            ("queued", &c.queued),
        ] {
            put(&mut j, &format!("compress_cache.{key}"), load(a));
        }
        let handshakes = self.total(|s| &s.tls_handshakes);
        let user = handshakes.saturating_sub(self.total(|s| &s.tls_kernel));
        put(&mut j, "tls.path_user", user.into());
        for (k, code) in H2_ERRORS.iter().enumerate() {
            let v = self.total(|s| &s.h2_errors[k]);
            put(&mut j, &format!("http2.connection_errors.{code}"), v.into());
        }
        let acme = self.acme.as_ref().map(|a| {
            serde_json::json!({
                "certificates": a.status(),
                "issued": load(&a.counters.issued),
                "failed": load(&a.counters.failed),
            })
        });
        put(&mut j, "acme", acme.into());
        j
    }
}

/// Sets `key` of `j` (`"a.b"`: `b` of the object `a`, made if missing) to `v`.
fn put(j: &mut serde_json::Value, key: &str, v: serde_json::Value) {
    let mut at = j;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        let object = at
            .as_object_mut()
            .expect("the status page's keys name objects");
        if parts.peek().is_none() {
            object.insert(part.to_string(), v);
            return;
        }
        at = object.entry(part).or_insert_with(|| serde_json::json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_page_sums_every_workers_counters() {
        let a = Arc::new(Stats::default());
        let b = Arc::new(Stats::default());
        Stats::add(&a.requests, 3);
        Stats::add(&b.requests, 4);
        Stats::add(&b.misses, 2);
        Stats::set(&a.small_bytes_held, 100);
        Stats::set(&a.small_bytes_held, 40);
        Stats::add(&b.forbidden, 1);
        let j = Board::of(vec![a, b]).json();
        assert_eq!(j["workers"], 2);
        assert_eq!(j["requests"], 7);
        assert_eq!(j["disk"]["misses"], 2);
        assert_eq!(
            j["small_files"]["bytes_held"], 40,
            "a gauge is set, not added"
        );
        assert_eq!(j["errors"]["forbidden_403"], 1);
        assert_eq!(j["errors"]["unavailable_503"], 0);
    }

    /// A reload's new generation counts on from the old one's totals, while the old
    /// workers drain and after they end; gauges of ended workers are not carried.
    #[test]
    fn counters_never_go_back_across_generations() {
        let old = Arc::new(Stats::default());
        Stats::add(&old.requests, 5);
        Stats::add(&old.responses[0][1], 5);
        Stats::add(&old.timeouts[2], 1);
        Stats::add(&old.response_time[3], 2);
        Stats::set(&old.open, 3);
        let first = Board::of(vec![Arc::clone(&old)]);
        assert_eq!(first.total(|s| &s.requests), 5);
        first.earlier.retire(&first.workers);
        let new = Arc::new(Stats::default());
        let second = Board {
            workers: vec![Arc::clone(&new)].into(),
            earlier: Arc::clone(&first.earlier),
            draining: Arc::default(),
            compress: Arc::default(),
            acme: None,
            limits: None,
        };
        Stats::add(&new.requests, 1);
        // The old generation (a keep-alive request in flight at the reload) reads its
        // own board: itself, once.
        assert_eq!(first.total(|s| &s.requests), 5);
        assert_eq!(second.total(|s| &s.requests), 6);
        assert_eq!(
            second.total(|s| &s.open),
            3,
            "draining connections are open"
        );
        Stats::add(&old.requests, 1);
        first.earlier.retire(&first.workers);
        assert_eq!(second.total(|s| &s.requests), 7, "retire is idempotent");
        first.earlier.ended(&first.workers);
        drop(first);
        drop(old);
        assert_eq!(second.total(|s| &s.requests), 7);
        assert_eq!(second.total(|s| &s.responses[0][1]), 5);
        assert_eq!(second.total(|s| &s.timeouts[2]), 1);
        assert_eq!(second.total(|s| &s.response_time[3]), 2);
        assert_eq!(
            second.total(|s| &s.open),
            0,
            "an ended worker's gauge is gone"
        );
        assert_eq!(second.json()["workers"], 1);
    }
}
