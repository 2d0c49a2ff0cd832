//! The pages the server makes rather than finds: the status page, the health answer,
//! ACME's HTTP-01 answers and directory listings.

use std::time::SystemTime;

use linerate_http::answer::{self};
use linerate_http::request::{Method, Request};
use linerate_http::Status;

use crate::response::Response;
use crate::rules::Effective;

use super::Site;

impl Site {
    /// The status page: every worker's counters, as JSON, never cached by clients.
    pub(super) fn status(&mut self, req: &Request, line: String, now: SystemTime) -> Response {
        let mut status = self.board.json();
        status["tls"]["kernel_tls"] = crate::tls::path_note().into();
        status["driver"] = self.resolver.cfg.driver.name().into();
        status["limits"] =
            crate::limits::status(&self.resolver.sites, self.board.limits.as_deref());
        status["steer"] = match self.resolver.cfg.steer {
            crate::config::Steer::Off => "off".into(),
            _ if self.resolver.cfg.steering => "cpu".into(),
            m => format!("off (--steer {m} with these workers and CPUs)").into(),
        };
        let mut body = status.to_string().into_bytes();
        body.push(b'\n');
        let fields = [
            ("Content-Type", "application/json"),
            ("Cache-Control", "no-store"),
        ];
        self.generated(req, &fields, body, line, now)
    }
    /// The health path's answer: 200 `ok` while serving, 503 once a stop
    /// has begun; never cached, never logged.
    /// An HTTP-01 challenge (docs/operations.md, "Automatic HTTPS"): the key
    /// authorization of a token of an order under way, before any rule or redirect;
    /// 404 for any other.
    pub(super) fn acme_challenge(
        &mut self,
        req: &Request,
        line: String,
        now: SystemTime,
    ) -> Response {
        let token = &req.path[crate::acme::CHALLENGE_PATH.len()..];
        let answer = self
            .board
            .acme
            .as_ref()
            .and_then(|a| a.key_authorization(token));
        match answer {
            Some(ka) if matches!(req.method, Method::Get | Method::Head) => {
                let fields = [
                    ("Content-Type", "text/plain"),
                    ("Cache-Control", "no-store"),
                ];
                self.generated(req, &fields, ka.into_bytes(), line, now)
            }
            _ => self.error_for(
                Status::NotFound,
                req.keep_alive,
                &[],
                line,
                now,
                req.method == Method::Head,
            ),
        }
    }
    pub(super) fn health(&mut self, req: &Request, line: String, now: SystemTime) -> Response {
        let draining = self.draining();
        let fields = [
            ("Content-Type", "text/plain"),
            ("Cache-Control", "no-store"),
        ];
        let mut r = if draining {
            self.error_for(
                Status::ServiceUnavailable,
                req.keep_alive,
                &fields[1..],
                line,
                now,
                req.method == Method::Head,
            )
        } else {
            self.generated(req, &fields, b"ok\n".to_vec(), line, now)
        };
        r.unlogged = true;
        r
    }
    pub(super) fn generated(
        &mut self,
        req: &Request,
        fields: &[(&str, &str)],
        body: Vec<u8>,
        line: String,
        now: SystemTime,
    ) -> Response {
        let found = answer::Found::Made { fields, body };
        let a = answer::decide(req, found, self.date(now), now, String::new);
        self.answered(a, None, line)
    }
    #[allow(clippy::too_many_arguments)]
    pub(super) fn listing(
        &mut self,
        req: &Request,
        h: usize,
        rel: &[u8],
        fx: Option<&Effective>,
        peer: Option<std::net::IpAddr>,
        line: String,
        now: SystemTime,
    ) -> Response {
        let dotfiles = fx
            .and_then(|f| f.dotfiles)
            .unwrap_or(self.resolver.sites[h].dotfiles);
        let (entries, real) = match self.caches[h].list(rel, dotfiles) {
            Ok(listed) => listed,
            Err(why) => return self.not_served(why, req, h, fx, line, now),
        };
        // A directory reached through a link: listed only if its own rules let the
        // client have it too (docs/http.md W11).
        let line = match self.through_real(req, h, real.as_deref(), true, peer, line, now) {
            Ok(line) => line,
            Err(refused) => return *refused,
        };
        let as_json = req
            .query
            .as_deref()
            .is_some_and(|q| q.split('&').any(|p| p == "format=json"));
        let (body, content_type) = if as_json {
            (
                crate::listing::json(&entries),
                "application/json; charset=utf-8",
            )
        } else {
            (
                crate::listing::html(&req.path, &entries),
                "text/html; charset=utf-8",
            )
        };
        let added = fx.map(|f| f.fields(now, req)).unwrap_or_default();
        let mut fields = vec![("Content-Type", content_type)];
        fields.extend(added.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        self.generated(req, &fields, body.into_bytes(), line, now)
    }
}
