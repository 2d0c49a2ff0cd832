//! Which rules apply to a path and who may have it: the path resolved beneath a site's
//! root and its rules, dot-files, the access guard (addresses, passwords, rates), and
//! the rules of where a link really leads.

use std::time::SystemTime;

use linerate_http::request::{Method, Request};
use linerate_http::{path, Status};

use crate::files::{Entry, Found};
use crate::response::Response;
use crate::rules::Effective;
use crate::stats::Stats;

use super::Site;

impl Site {
    /// The request's path resolved beneath site `h`'s root, and what the site's rules
    /// say for it (none without rules: then no request pays for them). Rules match the
    /// decoded, normalized path, and may allow or refuse dot-files there.
    pub(super) fn resolve(
        &self,
        req: &Request,
        h: usize,
    ) -> Result<(path::Resolved, Option<Effective>), Status> {
        let site = &self.resolver.sites[h];
        if site.rules.is_empty() {
            return Ok((path::resolve(&req.path, site.dotfiles)?, None));
        }
        let resolved = path::resolve(&req.path, true)?;
        let fx = self.rules_at(h, &resolved);
        if !self.dotfiles_allowed(h, &resolved, fx.as_ref()) {
            return Err(Status::NotFound);
        }
        Ok((resolved, fx))
    }
    /// What site `h`'s rules say for a resolved path (none without rules).
    pub(super) fn rules_at(&self, h: usize, resolved: &path::Resolved) -> Option<Effective> {
        self.rules_of(h, resolved.relative(), resolved.trailing_slash)
    }
    /// What site `h`'s rules say for the path `rel` beneath the root (a directory's
    /// with `dir`).
    pub(super) fn rules_of(&self, h: usize, rel: &[u8], dir: bool) -> Option<Effective> {
        let site = &self.resolver.sites[h];
        if site.rules.is_empty() {
            return None;
        }
        let mut p = String::with_capacity(rel.len() + 2);
        p.push('/');
        p.push_str(&String::from_utf8_lossy(rel));
        if dir && !rel.is_empty() {
            p.push('/');
        }
        Some(Effective::of(&site.rules, &p))
    }
    /// Whether a resolved path may name dot-files, by its rules or else the site.
    pub(super) fn dotfiles_allowed(
        &self,
        h: usize,
        resolved: &path::Resolved,
        fx: Option<&Effective>,
    ) -> bool {
        self.dotfiles_allowed_at(h, resolved.relative(), fx)
    }
    /// [`Site::dotfiles_allowed`] for the path `rel` beneath the root.
    pub(super) fn dotfiles_allowed_at(&self, h: usize, rel: &[u8], fx: Option<&Effective>) -> bool {
        let dotfiles = fx
            .and_then(|f| f.dotfiles)
            .unwrap_or(self.resolver.sites[h].dotfiles);
        dotfiles
            || !rel
                .split(|&b| b == b'/')
                .any(|seg| seg.first() == Some(&b'.'))
    }
    /// `line` back if the rules `fx` let the client `peer` have the path; else the
    /// answer that refuses it: 403 by `allow`/`deny` (docs/http.md W6), then 401 or 429
    /// by `htpasswd` (W10).
    pub(super) fn guard(
        &mut self,
        req: &Request,
        h: usize,
        fx: Option<&Effective>,
        peer: Option<std::net::IpAddr>,
        line: String,
        now: SystemTime,
    ) -> Result<String, Box<Response>> {
        let (keep, head) = (req.keep_alive, req.method == Method::Head);
        if fx.is_some_and(|f| !f.admits(peer)) {
            Stats::add(&self.stats.forbidden, 1);
            return Err(Box::new(self.not_served(
                Found::Forbidden,
                req,
                h,
                fx,
                line,
                now,
            )));
        }
        let Some(file) = fx.and_then(|f| f.htpasswd.as_deref()) else {
            return Ok(line);
        };
        match self.auth.check_at(
            file,
            req.authorization.as_deref(),
            peer,
            std::time::Instant::now,
        ) {
            crate::auth::Verdict::Pass => Ok(line),
            crate::auth::Verdict::Challenge => {
                let realm = format!(
                    "Basic realm=\"{}\", charset=\"UTF-8\"",
                    self.resolver.sites[h].label().replace(['"', '\\'], "")
                );
                let extra = [("WWW-Authenticate", realm.as_str())];
                let r = self.error_for(Status::Unauthorized, keep, &extra, line, now, head);
                Err(Box::new(r))
            }
            crate::auth::Verdict::Pending(ticket) => Err(Box::new(Response::waiting_for(ticket))),
            crate::auth::Verdict::Busy => {
                Stats::add(&self.stats.auth_busy, 1);
                let extra = [("Retry-After", "1")];
                let r = self.error_for(Status::ServiceUnavailable, keep, &extra, line, now, head);
                Err(Box::new(r))
            }
            crate::auth::Verdict::Throttled(left) => {
                let secs = left.as_secs().max(1).to_string();
                let extra = [("Retry-After", secs.as_str())];
                let r = self.error_for(Status::TooManyRequests, keep, &extra, line, now, head);
                Err(Box::new(r))
            }
        }
    }
    /// `line` back if the rules `fx` set no `limit-requests` or the client `peer` is
    /// within it (what it left, for the answer's fields, kept in `limited`); else the
    /// answer that refuses it (429 with `Retry-After`, through the rules' error page
    /// for 429) or holds it for its turn (`delay`). A request that waited its turn is
    /// not counted again, nor one counted under the same limit already (docs/http.md
    /// L1, L2).
    pub(super) fn limit(
        &mut self,
        req: &Request,
        h: usize,
        fx: Option<&Effective>,
        peer: Option<std::net::IpAddr>,
        line: String,
        now: SystemTime,
    ) -> Result<String, Box<Response>> {
        use crate::limits::{Decision, Key, KeyBy};
        let (Some(l), Some(table)) = (
            fx.and_then(|f| f.limit_requests.clone()),
            self.board.limits.clone(),
        ) else {
            return Ok(line);
        };
        // A limit this request was counted under already (the path asked for, then a
        // `try` candidate under the same rule).
        if self
            .limited
            .as_ref()
            .is_some_and(|(_, t)| t.scope == l.scope)
        {
            return Ok(line);
        }
        // The user the guard let in (it passed these credentials, however spelled).
        let by_user = l.key == KeyBy::User && fx.is_some_and(|f| f.htpasswd.is_some());
        let user = (req.authorization.as_deref())
            .filter(|_| by_user)
            .and_then(crate::auth::user_of);
        let key = match user {
            Some(u) => Key::User(u),
            None => Key::of(peer),
        };
        let clock = std::time::Instant::now();
        if req.admitted {
            self.limited = Some((table.peek(&l, &key, clock), l));
            return Ok(line);
        }
        // A turn longer than the send deadline would end in a cut connection.
        let longest = self.resolver.cfg.send_timeout;
        let d = table.take(&l, &key, clock, longest);
        match d {
            Decision::Pass { .. } => {
                self.limited = Some((d, l));
                Ok(line)
            }
            Decision::Wait { after, .. } => match self.auth.hold(clock + after) {
                Some(ticket) => {
                    table.count(&l, false);
                    Err(Box::new(Response::waiting_for_turn(ticket)))
                }
                None => {
                    self.limited = Some((d, l));
                    Ok(line)
                }
            },
            Decision::Refuse { after } => {
                table.count(&l, true);
                Stats::add(&self.stats.limited_requests, 1);
                let retry = crate::limits::retry_after_secs(after).to_string();
                let left = d.field().unwrap_or_default();
                let extra = [
                    ("Retry-After", retry.as_str()),
                    ("RateLimit-Policy", l.policy.as_str()),
                    ("RateLimit", left.as_str()),
                ];
                let r = self.refusal(Status::TooManyRequests, &extra, req, h, fx, line, now);
                self.limited = None;
                Err(Box::new(r))
            }
        }
    }
    /// `line` back if the file `e` was reached by its own path, or if the rules of the
    /// path it really is at (a symbolic link on the way: docs/http.md W11) let the
    /// client have it too: their allow/deny, htpasswd and dot-files; else their refusal
    /// (a dot-file's is 404). The stricter of the two paths' rules applies.
    pub(super) fn through_link(
        &mut self,
        req: &Request,
        h: usize,
        e: &Entry,
        peer: Option<std::net::IpAddr>,
        line: String,
        now: SystemTime,
    ) -> Result<String, Box<Response>> {
        self.through_real(req, h, e.real.as_deref(), false, peer, line, now)
    }
    /// [`Site::through_link`] for what really is at `real` beneath the root (a
    /// directory's with `dir`), if a link made that another path than the one asked.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn through_real(
        &mut self,
        req: &Request,
        h: usize,
        real: Option<&[u8]>,
        dir: bool,
        peer: Option<std::net::IpAddr>,
        line: String,
        now: SystemTime,
    ) -> Result<String, Box<Response>> {
        let Some(real) = real else {
            return Ok(line);
        };
        let fx = self.rules_of(h, real, dir);
        if !self.dotfiles_allowed_at(h, real, fx.as_ref()) {
            return Err(Box::new(self.not_served(
                Found::Missing,
                req,
                h,
                None,
                line,
                now,
            )));
        }
        self.guard(req, h, fx.as_ref(), peer, line, now)
    }
}
