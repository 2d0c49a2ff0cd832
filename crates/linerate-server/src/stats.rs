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

/// A worker's counters. Only its worker writes them (plain load and store, no locked
/// instruction); the status page reads them from any worker.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub accepted: AtomicU64,
    /// Connections accepted by a pinned worker on the CPU that processed their
    /// packets (`SO_INCOMING_CPU`), and elsewhere.
    pub on_receive_cpu: AtomicU64,
    pub off_receive_cpu: AtomicU64,
    pub requests: AtomicU64,
    /// Residency probes (`cachestat` calls).
    pub probes: AtomicU64,
    /// Probes that found a page missing: windows handed to the helpers.
    pub misses: AtomicU64,
    /// Windows the helpers finished, and the bytes they read.
    pub helper_reads: AtomicU64,
    pub helper_bytes: AtomicU64,
    /// Small files whose contents were not resident (`RWF_NOWAIT` would have waited).
    pub small_misses: AtomicU64,
    /// Bytes of small-file contents held now (a gauge), and contents given up to stay
    /// within `--small-file-memory`.
    pub small_bytes_held: AtomicU64,
    pub small_evictions: AtomicU64,
    /// File ranges read into the gather (seed 001's collapse), and their bytes.
    pub collapsed: AtomicU64,
    pub collapsed_bytes: AtomicU64,
    /// Gathers linearized into their last segment (seed 001's defrag).
    pub defrags: AtomicU64,
    /// File bodies sent with `TCP_CORK` set (`--cork-min`), and corks cleared after one.
    pub corked: AtomicU64,
    pub uncorked: AtomicU64,
    /// Event-loop waits (`epoll_wait`, or the io_uring driver's wait), and the io_uring
    /// driver's requests submitted, completions read and `io_uring_enter` calls (added
    /// every tick).
    pub loop_waits: AtomicU64,
    pub ring_submitted: AtomicU64,
    pub ring_completed: AtomicU64,
    pub ring_enters: AtomicU64,
    /// TLS handshakes completed.
    pub tls_handshakes: AtomicU64,
    /// TLS connections whose keys went to the kernel after the handshake (kernel TLS);
    /// the others' records are sealed in user space.
    pub tls_kernel: AtomicU64,
    /// TLS connections closed for what their peer sent: not TLS at all, or a
    /// handshake or record rustls refused.
    pub tls_refused: AtomicU64,
    /// Connections to a `--proxy-protocol` listener closed because they did not open
    /// with a PROXY header.
    pub proxy_refused: AtomicU64,
    /// Connections that turned to HTTP/2 (its preface, in clear or after ALPN `h2`),
    /// the streams taken on them, and the responses logged for them (as every
    /// response is, finished or cut).
    pub h2_connections: AtomicU64,
    pub h2_streams: AtomicU64,
    pub h2_responses: AtomicU64,
    /// HTTP/2 connections ended by an error of the client's, by the GOAWAY code sent:
    /// [`H2_ERRORS`] (ENHANCE_YOUR_CALM is a flood or an attack: rapid resets,
    /// CONTINUATION or idle-frame floods, an HPACK bomb).
    pub h2_errors: [AtomicU64; 3],
    /// Access-log lines dropped because the disk refused them (full, or failing).
    pub log_lines_dropped: AtomicU64,
    /// Opens of files refused for lack of descriptors (`EMFILE`/`ENFILE`; each empties
    /// the open-file cache and tries once more).
    pub open_out_of_fds: AtomicU64,
    /// 503s answered because the retry failed too.
    pub unavailable: AtomicU64,
    /// Accepts refused for lack of descriptors (accepting then pauses).
    pub accept_out_of_fds: AtomicU64,
    /// Idle keep-alive connections closed to make room for new ones.
    pub idle_closed_for_room: AtomicU64,
    /// 503s: the process was making as many password checks as it may.
    pub auth_busy: AtomicU64,
    /// 403s: the permission bits refused an open.
    pub forbidden: AtomicU64,
    /// Responses that ended before their last byte (reset, deadline, shutdown,
    /// truncation).
    pub aborted: AtomicU64,
    /// Responses by method (GET, HEAD, other) and status class (1xx to 5xx).
    pub responses: [[AtomicU64; 5]; 3],
    /// Body bytes the sockets took.
    pub body_bytes: AtomicU64,
    /// Time from a request complete to its response's last byte handed to the kernel:
    /// counts at or under each of [`RESPONSE_SECONDS`], then the sum in microseconds.
    pub response_time: [AtomicU64; RESPONSE_SECONDS.len()],
    pub response_time_count: AtomicU64,
    pub response_time_sum_us: AtomicU64,
    /// Connections open, and of them idle (gauges, set every tick).
    pub open: AtomicU64,
    pub idle: AtomicU64,
    /// Connections closed by a deadline: header, idle, send, body.
    pub timeouts: [AtomicU64; 4],
    /// Open-file cache lookups answered from the cache, and those that opened.
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Answers sent from the compression cache, and identity answers sent while the
    /// client's coding was being written there.
    pub compress_hits: AtomicU64,
    pub compress_waits: AtomicU64,
    /// The engine's counters of closed connections (see [`Stats::add_tx`]).
    pub tx_syscalls: AtomicU64,
    pub zc_sends: AtomicU64,
    pub zc_completions: AtomicU64,
    pub zc_copied: AtomicU64,
    pub zc_enobufs: AtomicU64,
    pub degraded: AtomicU64,
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
    /// gauges were its own and are left out. Every field is named, so a new one cannot
    /// be forgotten (the pattern would not compile).
    fn add_to(&self, sum: &Stats) {
        let Stats {
            accepted,
            on_receive_cpu,
            off_receive_cpu,
            requests,
            probes,
            misses,
            helper_reads,
            helper_bytes,
            small_misses,
            small_bytes_held: _,
            small_evictions,
            collapsed,
            collapsed_bytes,
            defrags,
            corked,
            uncorked,
            loop_waits,
            ring_submitted,
            ring_completed,
            ring_enters,
            tls_handshakes,
            tls_kernel,
            tls_refused,
            proxy_refused,
            h2_connections,
            h2_streams,
            h2_responses,
            h2_errors,
            log_lines_dropped,
            open_out_of_fds,
            unavailable,
            accept_out_of_fds,
            idle_closed_for_room,
            auth_busy,
            forbidden,
            aborted,
            responses,
            body_bytes,
            response_time,
            response_time_count,
            response_time_sum_us,
            open: _,
            idle: _,
            timeouts,
            cache_hits,
            cache_misses,
            compress_hits,
            compress_waits,
            tx_syscalls,
            zc_sends,
            zc_completions,
            zc_copied,
            zc_enobufs,
            degraded,
        } = self;
        let pairs = [
            (accepted, &sum.accepted),
            (on_receive_cpu, &sum.on_receive_cpu),
            (off_receive_cpu, &sum.off_receive_cpu),
            (requests, &sum.requests),
            (probes, &sum.probes),
            (misses, &sum.misses),
            (helper_reads, &sum.helper_reads),
            (helper_bytes, &sum.helper_bytes),
            (small_misses, &sum.small_misses),
            (small_evictions, &sum.small_evictions),
            (collapsed, &sum.collapsed),
            (collapsed_bytes, &sum.collapsed_bytes),
            (defrags, &sum.defrags),
            (corked, &sum.corked),
            (uncorked, &sum.uncorked),
            (loop_waits, &sum.loop_waits),
            (ring_submitted, &sum.ring_submitted),
            (ring_completed, &sum.ring_completed),
            (ring_enters, &sum.ring_enters),
            (tls_handshakes, &sum.tls_handshakes),
            (tls_kernel, &sum.tls_kernel),
            (tls_refused, &sum.tls_refused),
            (proxy_refused, &sum.proxy_refused),
            (h2_connections, &sum.h2_connections),
            (h2_streams, &sum.h2_streams),
            (h2_responses, &sum.h2_responses),
            (log_lines_dropped, &sum.log_lines_dropped),
            (open_out_of_fds, &sum.open_out_of_fds),
            (unavailable, &sum.unavailable),
            (accept_out_of_fds, &sum.accept_out_of_fds),
            (idle_closed_for_room, &sum.idle_closed_for_room),
            (auth_busy, &sum.auth_busy),
            (forbidden, &sum.forbidden),
            (aborted, &sum.aborted),
            (body_bytes, &sum.body_bytes),
            (response_time_count, &sum.response_time_count),
            (response_time_sum_us, &sum.response_time_sum_us),
            (cache_hits, &sum.cache_hits),
            (cache_misses, &sum.cache_misses),
            (compress_hits, &sum.compress_hits),
            (compress_waits, &sum.compress_waits),
            (tx_syscalls, &sum.tx_syscalls),
            (zc_sends, &sum.zc_sends),
            (zc_completions, &sum.zc_completions),
            (zc_copied, &sum.zc_copied),
            (zc_enobufs, &sum.zc_enobufs),
            (degraded, &sum.degraded),
        ];
        let arrays = responses
            .iter()
            .flatten()
            .zip(sum.responses.iter().flatten())
            .chain(response_time.iter().zip(&sum.response_time))
            .chain(timeouts.iter().zip(&sum.timeouts))
            .chain(h2_errors.iter().zip(&sum.h2_errors));
        for (mine, into) in pairs.into_iter().chain(arrays) {
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

    /// The status page's JSON for all workers' counters.
    pub fn json(&self) -> serde_json::Value {
        let sum = |f: fn(&Stats) -> &AtomicU64| self.total(f);
        let c = &self.compress;
        serde_json::json!({
            "workers": self.workers.len(),
            "connections_accepted": sum(|s| &s.accepted),
            "connections_on_receive_cpu": sum(|s| &s.on_receive_cpu),
            "connections_off_receive_cpu": sum(|s| &s.off_receive_cpu),
            "requests": sum(|s| &s.requests),
            "disk": {
                "probes": sum(|s| &s.probes),
                "misses": sum(|s| &s.misses),
                "helper_reads": sum(|s| &s.helper_reads),
                "helper_bytes": sum(|s| &s.helper_bytes),
                "small_file_misses": sum(|s| &s.small_misses),
            },
            "small_files": {
                "bytes_held": sum(|s| &s.small_bytes_held),
                "evictions": sum(|s| &s.small_evictions),
            },
            "compress_cache": {
                "hits": sum(|s| &s.compress_hits),
                "waits": sum(|s| &s.compress_waits),
                "written": c.written.load(Ordering::Relaxed),
                "not_smaller": c.not_smaller.load(Ordering::Relaxed),
                "failed": c.failed.load(Ordering::Relaxed),
                "bytes_in": c.bytes_in.load(Ordering::Relaxed),
                "bytes_out": c.bytes_out.load(Ordering::Relaxed),
                "evictions": c.evicted.load(Ordering::Relaxed),
                "bytes_held": c.bytes_held.load(Ordering::Relaxed),
                "queued": c.queued.load(Ordering::Relaxed),
            },
            "acme": self.acme.as_ref().map(|a| serde_json::json!({
                "certificates": a.status(),
                "issued": a.counters.issued.load(Ordering::Relaxed),
                "failed": a.counters.failed.load(Ordering::Relaxed),
            })),
            "queue": {
                "collapsed": sum(|s| &s.collapsed),
                "collapsed_bytes": sum(|s| &s.collapsed_bytes),
                "defrags": sum(|s| &s.defrags),
                "corked": sum(|s| &s.corked),
                "uncorked": sum(|s| &s.uncorked),
            },
            "event_loop": {
                "waits": sum(|s| &s.loop_waits),
                "ring_submissions": sum(|s| &s.ring_submitted),
                "ring_completions": sum(|s| &s.ring_completed),
                "ring_enters": sum(|s| &s.ring_enters),
            },
            "http2": {
                "connections": sum(|s| &s.h2_connections),
                "streams": sum(|s| &s.h2_streams),
                "responses": sum(|s| &s.h2_responses),
                "connection_errors": {
                    "protocol_error": sum(|s| &s.h2_errors[0]),
                    "compression_error": sum(|s| &s.h2_errors[1]),
                    "enhance_your_calm": sum(|s| &s.h2_errors[2]),
                },
            },
            "tls": {
                "handshakes": sum(|s| &s.tls_handshakes),
                "path_user": sum(|s| &s.tls_handshakes).saturating_sub(sum(|s| &s.tls_kernel)),
                "path_kernel": sum(|s| &s.tls_kernel),
                "refused": sum(|s| &s.tls_refused),
            },
            "errors": {
                "open_out_of_descriptors": sum(|s| &s.open_out_of_fds),
                "accept_out_of_descriptors": sum(|s| &s.accept_out_of_fds),
                "idle_closed_for_room": sum(|s| &s.idle_closed_for_room),
                "auth_busy_503": sum(|s| &s.auth_busy),
                "unavailable_503": sum(|s| &s.unavailable),
                "forbidden_403": sum(|s| &s.forbidden),
                "responses_aborted": sum(|s| &s.aborted),
                "log_lines_dropped": sum(|s| &s.log_lines_dropped),
                "proxy_header_refused": sum(|s| &s.proxy_refused),
            }
        })
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
