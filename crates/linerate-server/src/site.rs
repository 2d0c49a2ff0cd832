//! From a parsed request to a response: methods, path resolution, the open-file cache,
//! directories, preconditions, ranges, and the parts to send.

use std::fs::File;
use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use linerate_http::conditional::{self, Conditions, Precondition};
use linerate_http::range::{self, ByteRange, RangeDecision};
use linerate_http::request::{Method, Request};
use linerate_http::response::{content_range, Head, Multipart};
use linerate_http::{path, Status};

use crate::config::Config;
use crate::disk::{Disk, Residency, Stats};
use crate::files::{Entry, FileCache, Found};

/// A piece of a response body or head.
pub(crate) enum Part {
    /// Owned bytes (heads, error bodies, listings).
    Bytes(Vec<u8>),
    /// A range of cached file contents.
    Shared(Arc<[u8]>, usize, usize),
    /// A range of an open file, sent by the configured strategy, and what is known of
    /// its pages' residency.
    File(Arc<File>, u64, u64, Residency),
}

impl Part {
    pub fn len(&self) -> u64 {
        match self {
            Part::Bytes(b) => b.len() as u64,
            Part::Shared(_, s, e) => (e - s) as u64,
            Part::File(_, _, l, _) => *l,
        }
    }
}

/// A response on its way out.
pub(crate) struct Response {
    pub parts: std::collections::VecDeque<Part>,
    /// Close the connection after it.
    pub close: bool,
    /// For the access log.
    pub status: Status,
    pub request_line: String,
    /// The request's authority (absolute-form target, else `Host`), for the log.
    pub host: Option<String>,
    pub body_bytes: u64,
    /// Bytes of the head (the first part), set when the response is queued.
    pub head_bytes: u64,
    /// Bytes of parts sent whole and taken off the front.
    pub sent: u64,
}

pub(crate) struct Site {
    cfg: Arc<Config>,
    cache: FileCache,
    date: String,
    date_at: u64,
    boundary_seed: u64,
    /// An access log is written.
    logging: bool,
    /// This worker's counters.
    pub stats: Arc<Stats>,
    /// Every worker's, for the status page.
    all_stats: Arc<[Arc<Stats>]>,
    /// The residency probe and the helpers (None: off).
    pub disk: Option<Disk>,
    /// How this worker's connections send.
    pub sending: crate::config::Sending,
}

impl Site {
    /// Request bytes arrived (see the open-file cache on why it must know).
    pub fn note_read(&mut self) {
        self.cache.note_read();
    }

    pub fn new(
        cfg: Arc<Config>,
        cache: FileCache,
        stats: Arc<Stats>,
        all_stats: Arc<[Arc<Stats>]>,
        disk: Option<Disk>,
    ) -> Site {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        Site {
            logging: cfg.access_log != crate::config::AccessLog::Off,
            sending: cfg.sending(),
            cfg,
            cache,
            date: String::new(),
            date_at: u64::MAX,
            boundary_seed: seed,
            stats,
            all_stats,
            disk,
        }
    }

    pub fn limits(&self) -> linerate_http::request::Limits {
        self.cfg.limits
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

    fn boundary(&mut self) -> String {
        let mut x = self.boundary_seed;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.boundary_seed = x;
        format!("linerate{x:016x}")
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
        // A client that sends a bad request gets no second chance on this connection.
        let keep_alive = keep_alive && status != Status::BadRequest;
        let body = format!("{} {}\n", status.code(), status.reason()).into_bytes();
        let mut h = Head::new(status, self.date(now));
        h.field("Content-Type", "text/plain");
        for (n, v) in extra {
            h.field(n, v);
        }
        h.content_length(body.len() as u64);
        let head = h.finish(keep_alive);
        let body_bytes = if head_only { 0 } else { body.len() as u64 };
        let mut parts: std::collections::VecDeque<Part> = [Part::Bytes(head)].into();
        if !head_only {
            parts.push_back(Part::Bytes(body));
        }
        Response {
            parts,
            close: !keep_alive,
            status,
            request_line: line,
            host: None,
            body_bytes,
            head_bytes: 0,
            sent: 0,
        }
    }

    /// The response to `req`.
    pub fn respond(&mut self, req: &Request, now: SystemTime) -> Response {
        let mut r = self.answer(req, now);
        if self.logging {
            r.host.clone_from(&req.host);
        }
        r
    }

    fn answer(&mut self, req: &Request, now: SystemTime) -> Response {
        // Only the access log reads this; with the log off no request pays for it.
        let line = if !self.logging {
            String::new()
        } else {
            format!(
                "{} {}{} HTTP/1.{}",
                req.method.as_str(),
                req.path,
                req.query
                    .as_ref()
                    .map(|q| format!("?{q}"))
                    .unwrap_or_default(),
                if req.version == linerate_http::request::Version::Http11 {
                    1
                } else {
                    0
                }
            )
        };
        let keep = req.keep_alive;
        Stats::add(&self.stats.requests, 1);
        if !matches!(req.method, Method::Get | Method::Head) {
            return self.error(
                Status::MethodNotAllowed,
                keep,
                &[("Allow", "GET, HEAD")],
                line,
                now,
            );
        }
        if self.cfg.status_path.as_deref() == Some(req.path.as_str()) {
            return self.status(req, line, now);
        }
        let resolved = match path::resolve(&req.path, self.cfg.dotfiles) {
            Ok(r) => r,
            Err(status) => {
                return self.error_for(status, keep, &[], line, now, req.method == Method::Head)
            }
        };
        let rel = resolved.relative();
        match self.cache.lookup(&rel) {
            // A path that names a directory (`/f.bin/`, `/f.bin/.`) is no file's.
            Found::File(_) if resolved.trailing_slash => {
                self.not_served(Found::Missing, req, line, now)
            }
            Found::File(e) => self.file(req, &e, line, now),
            Found::Dir => {
                if !resolved.trailing_slash {
                    let mut loc = format!("{}/", req.path);
                    if let Some(q) = &req.query {
                        loc.push('?');
                        loc.push_str(q);
                    }
                    return self.error_for(
                        Status::MovedPermanently,
                        keep,
                        &[("Location", &loc)],
                        line,
                        now,
                        req.method == Method::Head,
                    );
                }
                let mut index = rel.clone();
                if !index.is_empty() {
                    index.push(b'/');
                }
                index.extend_from_slice(b"index.html");
                match self.cache.lookup(&index) {
                    Found::File(e) => self.file(req, &e, line, now),
                    Found::Missing | Found::Dir if self.cfg.autoindex => {
                        self.listing(req, &rel, line, now)
                    }
                    Found::Dir => self.not_served(Found::Missing, req, line, now),
                    other => self.not_served(other, req, line, now),
                }
            }
            other => self.not_served(other, req, line, now),
        }
    }

    /// The answer for what the cache could not give: 404 (missing), 403 (the permission
    /// bits refuse the server), 503 with `Retry-After` (out of descriptors: a file that
    /// exists is never a 404 for that).
    fn not_served(&mut self, why: Found, req: &Request, line: String, now: SystemTime) -> Response {
        let (status, extra): (Status, &[(&str, &str)]) = match why {
            Found::Forbidden => (Status::Forbidden, &[]),
            Found::Unavailable => (Status::ServiceUnavailable, &[("Retry-After", "1")]),
            Found::Missing | Found::Dir | Found::File(_) => (Status::NotFound, &[]),
        };
        self.error_for(
            status,
            req.keep_alive,
            extra,
            line,
            now,
            req.method == Method::Head,
        )
    }

    /// Whether `e`'s pages are all in the page cache, for a file of at most one
    /// read-ahead window (larger files are probed a window at a time as they go). See
    /// [`crate::disk`] on the epoch that makes repeated probes unnecessary.
    fn residency(&mut self, e: &Entry) -> Residency {
        let Some(d) = self.disk.as_ref().filter(|d| d.usable.get()) else {
            return Residency::Unknown;
        };
        if e.not_resident() {
            // Its contents could not be read without the disk just now; and that
            // RWF_NOWAIT read started a read a probe would count as present.
            return Residency::Missing;
        }
        if e.meta.size > d.window {
            return Residency::Unknown;
        }
        if e.resident_epoch.get() == d.epoch {
            return Residency::Resident;
        }
        Stats::add(&self.stats.probes, 1);
        match linerate_sys::cache::resident(e.file.as_fd(), 0, e.meta.size) {
            Ok(true) => {
                e.resident_epoch.set(d.epoch);
                Residency::Resident
            }
            // Some page is missing, not necessarily one of the ranges asked for: the
            // connection probes what it sends.
            Ok(false) => Residency::Unknown,
            Err(_) => {
                d.usable.set(false);
                Residency::Unknown
            }
        }
    }

    /// The status page: every worker's counters, as JSON, never cached by clients.
    fn status(&mut self, req: &Request, line: String, now: SystemTime) -> Response {
        let mut body = Stats::json(&self.all_stats).to_string().into_bytes();
        body.push(b'\n');
        let fields = [
            ("Content-Type", "application/json"),
            ("Cache-Control", "no-store"),
        ];
        self.generated(req, &fields, body, line, now)
    }

    /// A 200 with a body made here (its head only, for HEAD).
    fn generated(
        &mut self,
        req: &Request,
        fields: &[(&str, &str)],
        body: Vec<u8>,
        line: String,
        now: SystemTime,
    ) -> Response {
        let mut h = Head::new(Status::Ok, self.date(now));
        for (n, v) in fields {
            h.field(n, v);
        }
        h.content_length(body.len() as u64);
        let head = h.finish(req.keep_alive);
        let len = body.len() as u64;
        let mut parts: std::collections::VecDeque<Part> = [Part::Bytes(head)].into();
        if req.method == Method::Get {
            parts.push_back(Part::Bytes(body));
        }
        Response {
            parts,
            close: !req.keep_alive,
            status: Status::Ok,
            request_line: line,
            host: None,
            body_bytes: len,
            head_bytes: 0,
            sent: 0,
        }
    }

    fn listing(&mut self, req: &Request, rel: &[u8], line: String, now: SystemTime) -> Response {
        let names = match self.cache.list(rel, self.cfg.dotfiles) {
            Ok(names) => names,
            Err(why) => return self.not_served(why, req, line, now),
        };
        let title = html_escape(&req.path);
        let mut body = format!("<!DOCTYPE html>\n<html><head><title>Index of {title}</title></head><body>\n<h1>Index of {title}</h1>\n<ul>\n");
        for (n, dir) in names {
            let slash = if dir { "/" } else { "" };
            body.push_str(&format!(
                "<li><a href=\"{}{slash}\">{}{slash}</a></li>\n",
                percent_encode(&n),
                html_escape(&n)
            ));
        }
        body.push_str("</ul>\n</body></html>\n");
        let fields = [("Content-Type", "text/html")];
        self.generated(req, &fields, body.into_bytes(), line, now)
    }

    fn file(&mut self, req: &Request, e: &Rc<Entry>, line: String, now: SystemTime) -> Response {
        let keep = req.keep_alive;
        let v = &e.validators;
        let cond = Conditions {
            if_match: req.if_match.as_deref(),
            if_none_match: req.if_none_match.as_deref(),
            if_modified_since: req.if_modified_since.as_deref(),
            if_unmodified_since: req.if_unmodified_since.as_deref(),
        };
        let last_modified = &e.last_modified;
        match conditional::evaluate(&cond, v, true) {
            Precondition::Failed => {
                return self.error_for(
                    Status::PreconditionFailed,
                    keep,
                    &[],
                    line,
                    now,
                    req.method == Method::Head,
                )
            }
            Precondition::NotModified => {
                let mut h = Head::new(Status::NotModified, self.date(now));
                h.field("ETag", &v.etag)
                    .field("Last-Modified", last_modified);
                let head = h.finish(keep);
                return Response {
                    parts: [Part::Bytes(head)].into(),
                    close: !keep,
                    status: Status::NotModified,
                    request_line: line,
                    host: None,
                    body_bytes: 0,
                    head_bytes: 0,
                    sent: 0,
                };
            }
            Precondition::Proceed => {}
        }
        let len = e.meta.size;
        let decision = match (&req.range, req.method) {
            (Some(r), Method::Get)
                if req
                    .if_range
                    .as_deref()
                    .is_none_or(|ir| conditional::if_range_allows(ir, v, now)) =>
            {
                range::evaluate(r, len)
            }
            _ => RangeDecision::Full,
        };
        let send_body = req.method == Method::Get;
        let contents = e.contents();
        let residency = if send_body && contents.is_none() {
            self.residency(e)
        } else {
            Residency::Unknown
        };
        let body = |r: ByteRange| -> Part {
            match &contents {
                Some(b) => Part::Shared(Arc::clone(b), r.start as usize, r.end as usize),
                None => Part::File(Arc::clone(&e.file), r.start, r.len(), residency),
            }
        };
        let (status, mut parts, body_len, extra): (Status, Vec<Part>, u64, Vec<(&str, String)>) =
            match decision {
                RangeDecision::Unsatisfiable => {
                    let cr = format!("bytes */{len}");
                    return self.error_for(
                        Status::RangeNotSatisfiable,
                        keep,
                        &[("Content-Range", &cr)],
                        line,
                        now,
                        req.method == Method::Head,
                    );
                }
                RangeDecision::Full => (
                    Status::Ok,
                    if send_body && len > 0 {
                        vec![body(ByteRange { start: 0, end: len })]
                    } else {
                        vec![]
                    },
                    len,
                    vec![("Content-Type", e.content_type.to_string())],
                ),
                RangeDecision::Partial(rs) if rs.len() == 1 => (
                    Status::PartialContent,
                    vec![body(rs[0])],
                    rs[0].len(),
                    vec![
                        ("Content-Type", e.content_type.to_string()),
                        ("Content-Range", content_range(rs[0], len)),
                    ],
                ),
                RangeDecision::Partial(rs) => {
                    let boundary = self.boundary();
                    let m = Multipart::new(&rs, len, e.content_type, &boundary);
                    let mut parts = Vec::new();
                    for (h, r) in m.part_heads.iter().zip(&rs) {
                        parts.push(Part::Bytes(h.clone()));
                        parts.push(body(*r));
                    }
                    parts.push(Part::Bytes(m.trailer.clone()));
                    (
                        Status::PartialContent,
                        parts,
                        m.content_length,
                        vec![("Content-Type", m.content_type())],
                    )
                }
            };
        let mut h = Head::new(status, self.date(now));
        for (n, val) in &extra {
            h.field(n, val);
        }
        h.content_length(body_len)
            .field("ETag", &v.etag)
            .field("Last-Modified", last_modified)
            .field("Accept-Ranges", "bytes");
        let head = h.finish(keep);
        if !send_body {
            parts.clear();
        }
        let mut all: std::collections::VecDeque<Part> =
            std::collections::VecDeque::with_capacity(parts.len() + 1);
        all.push_back(Part::Bytes(head));
        all.extend(parts);
        Response {
            parts: all,
            close: !keep,
            status,
            request_line: line,
            host: None,
            body_bytes: if send_body { body_len } else { 0 },
            head_bytes: 0,
            sent: 0,
        }
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
