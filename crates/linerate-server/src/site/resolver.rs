//! What answers a request the same way in every worker of a generation: the sites'
//! settings and rules, the router that picks a site by name, the request limits their
//! features need, the forwarding trust, whether ACME's challenges and an access log
//! are on. Built once per generation ([`Resolver::new`]) and shared read-only by its
//! workers; a worker's own state (its file caches, spare queues, head cache, date,
//! counters, the guard's failures) is its [`super::Site`]'s.

use std::sync::Arc;

use linerate_http::request::{Limits, Request};

use crate::config::{AccessLog, Config, LogFormat, SiteConfig};
use crate::router::Router;

pub(crate) struct Resolver {
    pub cfg: Arc<Config>,
    /// Every site's settings, in the order of a worker's caches.
    pub sites: Vec<SiteConfig>,
    router: Router,
    /// The request limits, and what heads keep for the features that read them.
    pub limits: Limits,
    /// HTTP-01 challenges are answered (from the board's ACME state).
    pub acme_http: bool,
    /// An access log is written.
    pub logging: bool,
}

impl Resolver {
    /// The resolver of `cfg`, whose sites are `sites`.
    pub fn new(cfg: Arc<Config>, sites: Vec<SiteConfig>) -> Resolver {
        // Lines are made if any site's log (its own, or the server's) is on, and the
        // Referer and User-Agent kept if any such log writes more than CLF.
        let logs = cfg.site_logs();
        let on = |l: &&(AccessLog, LogFormat)| l.0 != AccessLog::Off;
        let logging = logs.iter().any(|l| on(&l));
        let rules = || sites.iter().flat_map(|s| s.rules.iter());
        let limits = Limits {
            client_fields: logs.iter().filter(on).any(|l| l.1 != LogFormat::Clf),
            forwarded: (!cfg.trusted_proxies.is_empty()).then_some(cfg.forwarded_header),
            cors: rules().any(|r| r.cors.is_some()),
            authorization: rules().any(|r| r.htpasswd.is_some()),
            ..cfg.limits()
        };
        let acme_http = crate::acme::Plan::of(&cfg)
            .ok()
            .flatten()
            .is_some_and(|p| p.http());
        Resolver {
            router: Router::new(&sites),
            sites,
            limits,
            acme_http,
            logging,
            cfg,
        }
    }

    /// The site a request goes to (one site: no routing to pay for).
    pub fn site_of(&self, req: &Request) -> usize {
        if self.sites.len() == 1 {
            0
        } else {
            self.router.route(req.host.as_deref())
        }
    }

    /// The site a request that names no known host goes to.
    pub fn default_site(&self) -> usize {
        self.router.route(None)
    }

    /// The client of `req` from `peer` (none: a Unix socket's): the address a trusted
    /// proxy's forwarding header names, else the peer itself.
    pub fn client(
        &self,
        peer: Option<std::net::IpAddr>,
        req: &Request,
    ) -> Option<std::net::IpAddr> {
        let trusted = &self.cfg.trusted_proxies;
        match req.forwarded.as_deref() {
            Some(chain) if trusted.iter().any(|c| c.admits(peer)) => {
                let admitted = |ip| trusted.iter().any(|c| c.admits(Some(ip)));
                linerate_http::forwarded::client(chain, self.cfg.forwarded_header, admitted)
                    .or(peer)
            }
            _ => peer,
        }
    }
}
