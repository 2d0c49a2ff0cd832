//! From a parsed request to a response: the site and its rules, methods, path
//! resolution, the open-file cache, variants, directories, and the parts that send an
//! answer's body. What the answer says (preconditions, ranges, status, fields) is
//! decided in one call, `linerate_http::answer::decide`.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use linerate_http::answer::{self, Answer, Body};
use linerate_http::range::ByteRange;
use linerate_http::request::{Method, Request};
use linerate_http::{path, Status};

use crate::disk::{Disk, Residency};
use crate::files::{Compressed, Entry, FileCache, Found};
use crate::response::{FileRange, Part, Response};
use crate::rules::Effective;
use crate::stats::{Board, Stats};

mod access;
mod pages;
mod resolver;

pub(crate) use resolver::Resolver;

/// Spare output queues a worker keeps (136 bytes each): as many as connections that
/// answer at once in a busy turn, not as many as are open.
const SPARE_OUTPUTS: usize = 256;

/// A worker's site: the generation's shared [`Resolver`] (what answers, the same in
/// every worker) and what is the worker's own: one open-file cache per site (so a path
/// can only ever be looked up beneath its own root), the guard's checks and failures,
/// spare queues, the head cache, the date, its counters and disk helpers.
pub(crate) struct Site {
    /// The sites, their rules, the router: shared by the generation's workers.
    resolver: Arc<Resolver>,
    /// Each site's open-file cache, in the resolver's order.
    caches: Vec<FileCache>,
    /// The htpasswd files of the rules, the credentials that passed, failures by client.
    auth: crate::auth::Guard,
    /// Output queues idle connections gave back, for the next ones that answer (a
    /// keep-alive connection's queue goes and comes with each request: reused, not
    /// allocated; at most [`SPARE_OUTPUTS`]).
    // Boxes, not the queues themselves: a connection holds its queue boxed, and one
    // moves between a connection and this list without a copy or an allocation.
    #[allow(clippy::vec_box)]
    pub spare_outputs: Vec<Box<crate::output::Output>>,
    /// HTTP/2 field blocks of the heads this worker sent, for the next like them.
    pub h2_heads: linerate_http::h2::hpack::HeadCache,
    /// The resolver's request limits, one copy for every connection of the worker.
    limits: Rc<linerate_http::request::Limits>,
    /// What the request being answered left of its `limit-requests`, for the fields
    /// of its answer.
    limited: Option<(crate::limits::Decision, Arc<crate::limits::RequestLimit>)>,
    date: String,
    date_at: u64,
    pub(crate) boundary_seed: u64,
    /// This worker's counters.
    pub stats: Arc<Stats>,
    /// Every worker's, for the status page.
    board: Board,
    /// The residency probe and the helpers (None: off).
    pub disk: Option<Disk>,
    /// How this worker's connections send.
    pub sending: crate::config::Sending,
}

impl Site {
    /// Site `h`'s inotify descriptor was readable: its cache takes the changes in.
    pub fn changed(&mut self, h: usize) {
        if let Some(cache) = self.caches.get_mut(h) {
            cache.changed();
        }
    }

    /// Site `h`'s changes cannot be watched: its cache checks every lookup.
    pub fn unwatched(&mut self, h: usize) {
        if let Some(cache) = self.caches.get_mut(h) {
            cache.without_notify();
        }
    }

    /// The inotify descriptors that are new since the last call, by site (`None`: the
    /// site has none any more), for the event loop to watch.
    pub fn notify_fds(&mut self) -> Vec<(usize, Option<std::os::fd::BorrowedFd<'_>>)> {
        self.caches
            .iter_mut()
            .enumerate()
            .filter_map(|(i, c)| c.notify_fd().map(|fd| (i, fd)))
            .collect()
    }

    /// Gives back every cached file (see [`FileCache::clear`]).
    pub fn forget_files(&mut self) {
        for c in &mut self.caches {
            c.clear();
        }
    }

    /// The worker's site under `resolver`, with one open-file cache per site.
    pub fn new(
        resolver: Arc<Resolver>,
        caches: Vec<FileCache>,
        stats: Arc<Stats>,
        board: Board,
        disk: Option<Disk>,
    ) -> Site {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        Site {
            auth: crate::auth::Guard::new(&resolver.cfg),
            spare_outputs: Vec::new(),
            h2_heads: Default::default(),
            limits: Rc::new(resolver.limits),
            limited: None,
            sending: resolver.cfg.sending(),
            caches,
            resolver,
            date: String::new(),
            date_at: u64::MAX,
            boundary_seed: seed,
            stats,
            board,
            disk,
        }
    }

    /// The generation's resolver.
    pub fn resolver(&self) -> &Arc<Resolver> {
        &self.resolver
    }

    /// The request limits, and whether heads keep what the access log writes of them:
    /// one copy for all the worker's connections.
    pub fn limits(&self) -> std::rc::Rc<linerate_http::request::Limits> {
        std::rc::Rc::clone(&self.limits)
    }

    fn date(&mut self, now: SystemTime) -> &str {
        let secs = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs != self.date_at {
            self.date = httpdate::fmt_http_date(now);
            self.date_at = secs;
        }
        &self.date
    }

    /// An error response with a short text body (its head only, for HEAD).
    pub fn error(
        &mut self,
        status: Status,
        keep_alive: bool,
        extra: &[(&str, &str)],
        line: String,
        now: SystemTime,
    ) -> Response {
        self.error_for(status, keep_alive, extra, line, now, false)
    }

    fn error_for(
        &mut self,
        status: Status,
        keep_alive: bool,
        extra: &[(&str, &str)],
        line: String,
        now: SystemTime,
        head_only: bool,
    ) -> Response {
        let a = answer::error(status, extra, keep_alive, head_only, self.date(now));
        self.answered(a, None, line)
    }

    /// The response that sends answer `a` (a body of `file`, the file or page found,
    /// if any: its pages probed first when `probe`), for a request whose line the log
    /// writes as `line`.
    fn answered(&mut self, a: Answer, file: Option<(&Entry, bool)>, line: String) -> Response {
        // Room for the head too, which HTTP/1.1 puts in front (HTTP/2: the frames'
        // header): one allocation per answer.
        let mut parts = VecDeque::with_capacity(2);
        match (a.body, file) {
            (Body::None, _) => {}
            (Body::Bytes(b), _) => parts.push_back(Part::Bytes(b)),
            (body, Some((e, probe))) => self.file_parts(e, body, probe, &mut parts),
            // A range of nothing found: not a plan the answers make.
            (_, None) => {}
        }
        Response::answer(a.head, parts, a.keep_alive, line, a.logged)
    }

    /// The parts that send ranges of `e`, added to `out`: from memory when its contents
    /// are held, else ranges of the open file, whose pages are probed first when
    /// `probe`.
    fn file_parts(&mut self, e: &Entry, body: Body, probe: bool, out: &mut VecDeque<Part>) {
        let contents = e.contents();
        let residency = if probe && contents.is_none() {
            self.residency(e)
        } else {
            Residency::Unknown
        };
        // The contents' one reference goes to a single range's part (a multipart
        // answer's parts each take another).
        let range = |contents: Option<Arc<[u8]>>, r: ByteRange| -> Part {
            match contents {
                Some(buf) => Part::Shared {
                    buf,
                    start: r.start as usize,
                    end: r.end as usize,
                },
                None => Part::File(FileRange {
                    file: Arc::clone(&e.file),
                    offset: r.start,
                    len: r.len(),
                    residency: residency.clone(),
                }),
            }
        };
        match body {
            Body::Range(r) => out.push_back(range(contents, r)),
            Body::Multipart { parts, trailer } => {
                out.reserve(2 * parts.len() + 1);
                for (head, r) in parts {
                    out.push_back(Part::Bytes(head));
                    out.push_back(range(contents.clone(), r));
                }
                out.push_back(Part::Bytes(trailer));
            }
            Body::None | Body::Bytes(_) => {}
        }
    }

    /// Password checks go to `checker`'s helpers, which call `wake` (docs/http.md W10).
    pub fn with_checker(
        mut self,
        checker: Arc<crate::auth::Checker>,
        wake: crate::auth::Wake,
    ) -> Site {
        self.auth = std::mem::take(&mut self.auth).with_checker(checker, wake);
        self
    }

    /// The one site of `cfg` (its `root`), in one worker with no disk helpers: for the
    /// unit tests and the model runs.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn alone(cfg: crate::config::Config) -> Site {
        let stats = Arc::new(Stats::default());
        let dir = linerate_sys::fs::open_directory(&cfg.root).expect("the root opens");
        let cache = FileCache::new(
            dir.into(),
            100,
            (cfg.small_file, 1 << 20),
            false,
            Arc::clone(&stats),
        );
        let board = Board::of(vec![Arc::clone(&stats)]);
        let sites = vec![cfg.sites().remove(0)];
        let resolver = Arc::new(Resolver::new(Arc::new(cfg), sites));
        Site::new(resolver, vec![cache], stats, board, None)
    }

    /// Keeps an idle connection's (empty) output queue for the next, up to
    /// [`SPARE_OUTPUTS`]; frees it past that.
    pub fn spare_output(&mut self, o: Box<crate::output::Output>) {
        if self.spare_outputs.len() < SPARE_OUTPUTS {
            self.spare_outputs.push(o);
        }
    }

    /// The response to `req`.
    pub fn respond(
        &mut self,
        req: &Request,
        peer: Option<std::net::IpAddr>,
        now: SystemTime,
    ) -> Response {
        // Routed once: the answer and the log's site are the same one.
        let h = self.resolver.site_of(req);
        self.limited = None;
        let mut r = self.answer(req, h, peer, now);
        if let Some((d, l)) = self.limited.take() {
            // Taken, and now waiting for a password check (a `try` candidate's, a
            // link's): answered again, it is not counted again.
            r.admitted |= r.waiting.is_some();
            // What the client has left of its limit, on the answer it was served.
            if let (Some(head), Some(left)) = (r.plan.head.as_mut(), d.field()) {
                head.field("RateLimit-Policy", &l.policy);
                head.field("RateLimit", &left);
            }
        }
        if r.waiting.is_none() {
            // A request waiting for its password check is counted when it is answered.
            Stats::add(&self.stats.requests, 1);
        }
        self.stamp(&mut r, req, h);
        r
    }

    /// What the counters and the access log take from the request into its response.
    fn stamp(&self, r: &mut Response, req: &Request, h: usize) {
        let r = &mut r.record;
        r.method = Some(req.method);
        r.site = Some(h as u16);
        if self.resolver.logging {
            r.host.clone_from(&req.host);
            r.user_agent.clone_from(&req.user_agent);
            r.referer.clone_from(&req.referer);
        }
    }

    /// The answer of a redirect listener: 301 to the same URL over HTTPS on `port`
    /// (left out when 443), the host the request names, else the default site's first
    /// name; a request that names no usable host is 400.
    pub fn redirect_to_https(&mut self, req: &Request, port: u16, now: SystemTime) -> Response {
        let line = self.request_line(req);
        Stats::add(&self.stats.requests, 1);
        if self.resolver.acme_http
            && req.path.starts_with(crate::acme::CHALLENGE_PATH)
            && self.resolver.sites[self.resolver.site_of(req)].acme
        {
            return self.acme_challenge(req, line, now);
        }
        let head = req.method == Method::Head;
        let default = self.resolver.sites[self.resolver.default_site()]
            .names
            .first()
            .cloned();
        let host = match req.host.as_deref() {
            Some(a) => match a.strip_prefix('[') {
                Some(v6) => v6.split_once(']').map(|(h, _)| format!("[{h}]")),
                None => Some(match a.rsplit_once(':') {
                    Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h.to_string(),
                    _ => a.to_string(),
                }),
            },
            None => default.filter(|d| !d.starts_with('*')),
        };
        // Only what a host name or an address literal is made of goes into Location.
        let usable = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b))
        };
        let mut r = match host.filter(|h| usable(h)) {
            None => self.error_for(Status::BadRequest, false, &[], line, now, head),
            Some(host) => {
                let mut loc = format!("https://{host}");
                if port != 443 {
                    loc.push_str(&format!(":{port}"));
                }
                loc.push_str(if req.path.is_empty() { "/" } else { &req.path });
                if let Some(q) = &req.query {
                    loc.push('?');
                    loc.push_str(q);
                }
                self.error_for(
                    Status::MovedPermanently,
                    req.keep_alive,
                    &[("Location", &loc)],
                    line,
                    now,
                    head,
                )
            }
        };
        let h = self.resolver.site_of(req);
        self.stamp(&mut r, req, h);
        r
    }

    /// The request line for the access log (empty with the log off: no request pays
    /// for it then).
    pub(crate) fn request_line(&self, req: &Request) -> String {
        if !self.resolver.logging {
            String::new()
        } else {
            format!(
                "{} {}{} {}",
                req.method.as_str(),
                req.path,
                req.query
                    .as_ref()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default(),
                req.version.as_str()
            )
        }
    }

    fn answer(
        &mut self,
        req: &Request,
        h: usize,
        peer: Option<std::net::IpAddr>,
        now: SystemTime,
    ) -> Response {
        let line = self.request_line(req);
        let keep = req.keep_alive;
        if self.resolver.acme_http
            && self.resolver.sites[h].acme
            && req.path.starts_with(crate::acme::CHALLENGE_PATH)
        {
            return self.acme_challenge(req, line, now);
        }
        if req.method == Method::Options && !req.path.is_empty() {
            return self.options(req, h, peer, line, now);
        }
        if !matches!(req.method, Method::Get | Method::Head) {
            return self.not_allowed(keep, line, now);
        }
        if self.resolver.cfg.health_path.as_deref() == Some(req.path.as_str()) {
            return self.health(req, line, now);
        }
        if self.resolver.cfg.status_path.as_deref() == Some(req.path.as_str()) {
            return self.status(req, line, now);
        }
        if self.resolver.cfg.metrics_path.as_deref() == Some(req.path.as_str()) {
            let allowed = self.resolver.cfg.metrics_allow.is_empty()
                || self
                    .resolver
                    .cfg
                    .metrics_allow
                    .iter()
                    .any(|c| c.admits(peer));
            if !allowed {
                return self.error_for(
                    Status::Forbidden,
                    keep,
                    &[],
                    line,
                    now,
                    req.method == Method::Head,
                );
            }
            // Prometheus text by default; OpenMetrics when the scrape asks for it
            // (`params: {format: [openmetrics]}`), with no header parsed per request.
            let openmetrics = req.query.as_deref() == Some("format=openmetrics");
            let body = crate::metrics::render(
                &self.board,
                self.resolver.cfg.transmit.to_string(),
                self.resolver.cfg.driver.name(),
                openmetrics,
            );
            let fields = [
                (
                    "Content-Type",
                    if openmetrics {
                        "application/openmetrics-text; version=1.0.0; charset=utf-8"
                    } else {
                        "text/plain; version=0.0.4; charset=utf-8"
                    },
                ),
                ("Cache-Control", "no-store"),
            ];
            return self.generated(req, &fields, body.into_bytes(), line, now);
        }
        let head = req.method == Method::Head;
        let (resolved, fx) = match self.resolve(req, h) {
            Ok(r) => r,
            Err(status) => return self.error_for(status, keep, &[], line, now, head),
        };
        let fx = fx.as_ref();
        // Before a redirect or anything else: a refused client learns nothing of the
        // path.
        let line = match self.guard(req, h, fx, peer, line, now) {
            Ok(line) => line,
            Err(refused) => return *refused,
        };
        let line = match self.limit(req, h, fx, peer, line, now) {
            Ok(line) => line,
            Err(refused) => return *refused,
        };
        if let Some((code, loc)) = fx.and_then(|f| f.location(req.query.as_deref())) {
            let status = Status::redirect(code).unwrap_or(Status::MovedPermanently);
            return self.error_for(status, keep, &[("Location", &loc)], line, now, head);
        }
        if let Some(f) = fx.filter(|f| !f.try_files.is_empty()) {
            // `try`: the first candidate that is a file (docs/http.md W7), answered as
            // if it had been asked for, under its own rules (their allow/deny, htpasswd,
            // dot-files, fields); none, and the path is looked up as without the list.
            for candidate in f.tries(&req.path) {
                let Ok(c) = path::resolve(&candidate, true) else {
                    continue;
                };
                if c.trailing_slash || c.relative().is_empty() {
                    continue;
                }
                let cfx = self.rules_at(h, &c);
                if !self.dotfiles_allowed(h, &c, cfx.as_ref()) {
                    continue;
                }
                if let Found::File(e) = self.caches[h].lookup(c.relative()) {
                    let cfx = cfx.as_ref();
                    let line = match self.guard(req, h, cfx, peer, line, now) {
                        Ok(line) => line,
                        Err(refused) => return *refused,
                    };
                    // The candidate's own limit too, if its rule is another.
                    let line = match self.limit(req, h, cfx, peer, line, now) {
                        Ok(line) => line,
                        Err(refused) => return *refused,
                    };
                    let line = match self.through_link(req, h, &e, peer, line, now) {
                        Ok(line) => line,
                        Err(refused) => return *refused,
                    };
                    return self.representation(req, h, c.relative(), e, cfx, line, now);
                }
            }
        }
        let rel = resolved.relative();
        match self.caches[h].lookup(rel) {
            // A path that names a directory (`/f.bin/`, `/f.bin/.`) is no file's.
            Found::File(_) if resolved.trailing_slash => {
                self.not_served(Found::Missing, req, h, fx, line, now)
            }
            Found::File(e) => match self.through_link(req, h, &e, peer, line, now) {
                Ok(line) => self.representation(req, h, rel, e, fx, line, now),
                Err(refused) => *refused,
            },
            Found::Dir => {
                if !resolved.trailing_slash {
                    // From the normalized path, encoded again: what the client sent
                    // (`//host/dir`, `\`) never reaches the Location as it was.
                    let mut dir = rel.to_vec();
                    dir.push(b'/');
                    let loc = linerate_http::location::build("/", &dir, req.query.as_deref());
                    return self.error_for(
                        Status::MovedPermanently,
                        keep,
                        &[("Location", &loc)],
                        line,
                        now,
                        head,
                    );
                }
                // The first index name that is a file; one the server may not read
                // (or not reach) answers as that file would.
                let resolver = Arc::clone(&self.resolver);
                // A rule's names, else the server's.
                let names = match fx {
                    Some(f) if !f.index.is_empty() => &f.index,
                    _ => &resolver.cfg.index,
                };
                let mut index = rel.to_vec();
                if !index.is_empty() {
                    index.push(b'/');
                }
                let dir = index.len();
                for name in names {
                    index.truncate(dir);
                    index.extend_from_slice(name.as_bytes());
                    match self.caches[h].lookup(&index) {
                        Found::File(e) => {
                            return match self.through_link(req, h, &e, peer, line, now) {
                                Ok(line) => self.representation(req, h, &index, e, fx, line, now),
                                Err(refused) => *refused,
                            }
                        }
                        Found::Missing | Found::Dir => {}
                        other => return self.not_served(other, req, h, fx, line, now),
                    }
                }
                let autoindex = fx
                    .and_then(|f| f.autoindex)
                    .unwrap_or(self.resolver.sites[h].autoindex);
                if autoindex {
                    self.listing(req, h, rel, fx, peer, line, now)
                } else {
                    self.not_served(Found::Missing, req, h, fx, line, now)
                }
            }
            other => self.not_served(other, req, h, fx, line, now),
        }
    }

    /// 405, with the methods the server answers.
    fn not_allowed(&mut self, keep: bool, line: String, now: SystemTime) -> Response {
        self.error(
            Status::MethodNotAllowed,
            keep,
            &[("Allow", "GET, HEAD")],
            line,
            now,
        )
    }

    /// OPTIONS on a path: where a rule gives `cors`, 204 (a preflight's answer, its
    /// allow fields if the origin, method and fields asked for are admitted; a plain
    /// OPTIONS's, `Allow`); elsewhere 405, as for any other method (docs/http.md W9).
    fn options(
        &mut self,
        req: &Request,
        h: usize,
        peer: Option<std::net::IpAddr>,
        line: String,
        now: SystemTime,
    ) -> Response {
        let keep = req.keep_alive;
        let fx = self.resolve(req, h).ok().and_then(|(_, fx)| fx);
        let Some(cors) = fx.as_ref().and_then(|f| f.cors.as_ref()) else {
            return self.not_allowed(keep, line, now);
        };
        if fx.as_ref().is_some_and(|f| !f.admits(peer)) {
            Stats::add(&self.stats.forbidden, 1);
            return self.error(Status::Forbidden, keep, &[], line, now);
        }
        let asked = req.cors.as_deref();
        let fields = match (
            asked.and_then(|c| c.origin.as_deref()),
            asked.and_then(|c| c.request_method.as_deref()),
        ) {
            (Some(origin), Some(method)) => cors.preflight(
                origin,
                method,
                asked.and_then(|c| c.request_headers.as_deref()),
            ),
            _ => vec![("Allow".to_string(), "GET, HEAD, OPTIONS".to_string())],
        };
        let found = answer::Found::NoContent { fields: &fields };
        let a = answer::decide(req, found, self.date(now), now, String::new);
        self.answered(a, None, line)
    }

    /// A page of site `h` at `page` (a path the operator configured), if it is a file.
    fn page_entry(&mut self, h: usize, page: &str) -> Option<(Vec<u8>, Rc<Entry>)> {
        let rel = path::resolve(page, true).ok()?.relative().to_vec();
        match self.caches[h].lookup(&rel) {
            Found::File(e) => Some((rel, e)),
            _ => None,
        }
    }

    /// The answer for what the cache could not give: 404 (missing), 403 (the permission
    /// bits refuse the server), 503 with `Retry-After` (out of descriptors: a file that
    /// exists is never a 404 for that). A missing path gets the rules' fallback if it
    /// exists (with 200); the others the rules' error page for their status if it
    /// exists (with that status).
    fn not_served(
        &mut self,
        why: Found,
        req: &Request,
        h: usize,
        fx: Option<&Effective>,
        line: String,
        now: SystemTime,
    ) -> Response {
        let missing = matches!(why, Found::Missing | Found::Dir | Found::File(_));
        if let Some(fallback) = fx.and_then(|f| f.fallback_page()).filter(|_| missing) {
            if let Some((rel, e)) = self.page_entry(h, fallback) {
                return self.representation(req, h, &rel, e, fx, line, now);
            }
        }
        let (status, extra): (Status, &[(&str, &str)]) = match why {
            Found::Forbidden => (Status::Forbidden, &[]),
            Found::Unavailable => (Status::ServiceUnavailable, &[("Retry-After", "1")]),
            Found::Missing | Found::Dir | Found::File(_) => (Status::NotFound, &[]),
        };
        self.refusal(status, extra, req, h, fx, line, now)
    }

    /// An error `status` with `extra` fields: the rules' error page for it if they
    /// give one that exists (with that status), else the short text body.
    #[allow(clippy::too_many_arguments)]
    fn refusal(
        &mut self,
        status: Status,
        extra: &[(&str, &str)],
        req: &Request,
        h: usize,
        fx: Option<&Effective>,
        line: String,
        now: SystemTime,
    ) -> Response {
        if let Some(page) = fx.and_then(|f| f.error_page(status.code())) {
            if let Some((_, e)) = self.page_entry(h, page) {
                return self.error_page(status, req, &e, extra, line, now);
            }
        }
        self.error_for(
            status,
            req.keep_alive,
            extra,
            line,
            now,
            req.method == Method::Head,
        )
    }

    /// An error answered with a page of the site: `status`, the page's bytes and
    /// type, no validators (it is not the resource asked for).
    fn error_page(
        &mut self,
        status: Status,
        req: &Request,
        e: &Rc<Entry>,
        extra: &[(&str, &str)],
        line: String,
        now: SystemTime,
    ) -> Response {
        let found = answer::Found::Page {
            status,
            content_type: &e.content_type,
            size: e.meta.size,
            fields: extra,
        };
        let a = answer::decide(req, found, self.date(now), now, String::new);
        self.answered(a, Some((e, false)), line)
    }

    /// Whether `e`'s pages are all in the page cache, for a file of at most
    /// [`crate::disk::WHOLE_PROBE`] or one window (larger files are probed a window at
    /// a time as they go). See [`crate::disk`] on the epoch that makes repeated probes
    /// unnecessary.
    fn residency(&mut self, e: &Entry) -> Residency {
        let Some(d) = self.disk.as_ref().filter(|d| d.usable.get()) else {
            return Residency::Unknown;
        };
        if e.not_resident() {
            // Its contents could not be read without the disk just now; and that
            // RWF_NOWAIT read started a read a probe would count as present.
            return Residency::Missing;
        }
        if e.whole.resident(d, &e.file, &self.stats) {
            Residency::Whole(Arc::clone(&e.whole))
        } else {
            // Some page is missing, not necessarily one of the ranges asked for (or the
            // file is too large to probe whole): the connection probes what it sends.
            Residency::Unknown
        }
    }

    /// A stop has begun (SIGTERM, SIGINT, SIGQUIT), its shutdown delay running or
    /// past.
    pub fn draining(&self) -> bool {
        self.board
            .draining
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The file `e` at `rel`, or the precompressed variant of it that the request's
    /// `Accept-Encoding` takes best (see [`linerate_http::coding`]). For a type that
    /// gains by compression every answer says `Vary: Accept-Encoding`, variant or not,
    /// so a cache never hands one client's coding to another.
    #[allow(clippy::too_many_arguments)]
    fn representation(
        &mut self,
        req: &Request,
        h: usize,
        rel: &[u8],
        e: Rc<Entry>,
        fx: Option<&Effective>,
        line: String,
        now: SystemTime,
    ) -> Response {
        // The rules' content type for the name, and their header fields.
        let typed = fx.and_then(|f| {
            f.content_type(&String::from_utf8_lossy(rel))
                .map(str::to_string)
        });
        let fields = fx.map(|f| f.fields(now, req)).unwrap_or_default();
        let content_type = typed.as_deref().unwrap_or(&e.content_type);
        let site = &self.resolver.sites[h];
        let cache = &mut self.caches[h];
        let etag = fx.and_then(|f| f.etag).unwrap_or(site.etag);
        if !e.compressible || site.precompressed.is_empty() {
            let f = answer::File {
                size: e.meta.size,
                validators: cache.validators(&e, etag),
                last_modified: &e.last_modified,
                content_type,
                coding: None,
                vary: false,
                fields: &fields,
                kept: &e.kept,
            };
            return self.file(req, &e, f, line, now);
        }
        let codings = &site.precompressed;
        // The codings the client takes, best first: variants are looked for only then.
        let ranked = req.accept_encoding.map(|ae| ae.rank(codings));
        let chosen = match ranked.filter(|r| !r.is_empty()) {
            Some(ranked) => {
                let variants = cache.variants(rel, &e, codings);
                let beside = ranked
                    .iter()
                    .find_map(|&c| variants.found.iter().find(|(vc, _)| *vc == c).cloned());
                // None beside the file that the client takes: the compression cache's.
                beside.or_else(|| match cache.compressed(&e, &ranked) {
                    Compressed::Variant(c, v) => {
                        Stats::add(&self.stats.compress_hits, 1);
                        Some((c, v))
                    }
                    Compressed::Waiting => {
                        Stats::add(&self.stats.compress_waits, 1);
                        None
                    }
                    Compressed::None => None,
                })
            }
            None => None,
        };
        let (coding, body) = match chosen {
            Some((c, v)) => (Some(c), v),
            None => (None, Rc::clone(&e)),
        };
        let f = answer::File {
            size: body.meta.size,
            validators: self.caches[h].validators(&body, etag),
            last_modified: &body.last_modified,
            content_type,
            coding,
            vary: true,
            fields: &fields,
            kept: &body.kept,
        };
        self.file(req, &body, f, line, now)
    }

    /// The answer of file (or variant) `e` as `f` presents it.
    fn file(
        &mut self,
        req: &Request,
        e: &Entry,
        f: answer::File<'_>,
        line: String,
        now: SystemTime,
    ) -> Response {
        self.date(now);
        let seed = &mut self.boundary_seed;
        let found = answer::Found::File(f);
        let a = answer::decide(req, found, &self.date, now, || boundary(seed));
        // A body sent from the file is probed for residency first.
        let probe = req.method == Method::Get;
        self.answered(a, Some((e, probe)), line)
    }
}

/// The next multipart boundary of `seed`'s sequence.
fn boundary(seed: &mut u64) -> String {
    let mut x = *seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *seed = x;
    format!("linerate{x:016x}")
}

#[cfg(test)]
pub(crate) mod tests;
