//! Automatic HTTPS (docs/operations.md, "Automatic HTTPS"): certificates for the
//! `[[site]]` blocks with `acme = true`, obtained and renewed from an ACME directory
//! (RFC 8555) by the `instant-acme` crate on one thread of the process, never on a
//! worker.
//!
//! **Shared state.** [`Acme`] lives as long as the process and is shared by every
//! generation of workers: the certificates issued (by site), and the answers to the
//! challenges under way, read by the TLS listeners' certificate resolver (TLS-ALPN-01,
//! RFC 8737: a certificate for the name when the client asks for `acme-tls/1`) and by
//! the plain listeners (HTTP-01: `/.well-known/acme-challenge/TOKEN`, before any rule
//! or redirect). A new certificate is put there and the next handshake takes it: no
//! reload, no handshake failed; the old one serves until then.
//!
//! **Storage.** Under `acme-dir` (made mode 0700 for `--user`): the account's
//! credentials, one file per directory URL (`account-<digest>.json`, mode 0600), and
//! each site's certificate chain and key (`<first name>/fullchain.pem`, `key.pem`,
//! mode 0600), written under temporary names and renamed. A start (or a reload) reads
//! them first: a stored certificate that covers the site's names and has not expired
//! serves at once, and no order is made until it is due.
//!
//! **Renewal.** Where the directory offers ACME Renewal Information (ARI, RFC 9773),
//! a certificate is renewed at a moment drawn in the window it suggests (asked after
//! each issuance and again when its Retry-After says), and the order names the
//! certificate it replaces; elsewhere when two thirds of its lifetime have passed (a
//! third left, as Let's Encrypt advises). A failed attempt is logged once, with the directory's problem
//! document, counted, shown on the status page, and tried again after 30 s, doubling
//! up to 6 hours, with a little jitter; the certificate before serves on meanwhile.
//!
//! **Until the first certificate** of a site arrives, its handshakes get the site's own
//! `tls-cert` if it has one, else the server's, else fail (rustls has no certificate
//! to offer and ends the handshake with an `access_denied` alert); nothing else waits.
//!
//! Wildcard names need the DNS-01 challenge and a DNS provider: refused at start with
//! the reason.

/// ACME's server-wide keys (a site's `acme = true` is in its block): rows of the
/// settings table (`settings!` in settings.rs, which says what a row holds), kept here
/// beside what they drive; `--help` shows them under their own heading.
macro_rules! acme_keys {
    ($($table:tt)*) => {
        settings! {
            @join [
            /// ACME directory of the `[[site]]` blocks with `acme = true`: Let's Encrypt's
            /// production one unless given (its staging one, for trials:
            /// https://acme-staging-v02.api.letsencrypt.org/directory) [default:
            /// https://acme-v02.api.letsencrypt.org/directory].
            #[arg(long, help_heading = "ACME", value_name = "URL")]
            pub acme_directory: Option<crate::acme::AcmeUrl>
                => String = LETS_ENCRYPT.to_string(), |u| u.0,
            /// A PEM file of the root that signs the ACME directory's own HTTPS certificate
            /// (a private CA's, or pebble's in tests) [default: the system's roots].
            #[arg(long, help_heading = "ACME", value_name = "FILE")]
            pub acme_directory_ca: Option<PathBuf>
                => Option<PathBuf> = None, |p| Some(p),
            /// Contact address given to the ACME directory with the account [default: none].
            #[arg(long, help_heading = "ACME", value_name = "EMAIL")]
            pub acme_email: Option<String>
                => Option<String> = None, |e| Some(e),
            /// Where the ACME account key and the certificates are kept (made mode 0700 for
            /// --user) [default: /var/lib/linerate/acme].
            #[arg(long, help_heading = "ACME", value_name = "DIR")]
            pub acme_dir: Option<PathBuf>
                => PathBuf = PathBuf::from("/var/lib/linerate/acme"), |d| d,
            /// How the ACME directory checks the names: tls-alpn-01 (on a tls-listen address,
            /// its port 443 for a public CA), http-01 (on a listen or redirect-listen address,
            /// port 80), or auto (tls-alpn-01 when there is a tls-listen address) [default:
            /// auto].
            #[arg(long, help_heading = "ACME", value_name = "auto|http-01|tls-alpn-01")]
            pub acme_challenge: Option<AcmeChallenge>
                => AcmeChallenge = AcmeChallenge::Auto, |c| c,
            ]
            $($table)*
        }
    };
}

/// The `acme-directory` key's value: an https URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcmeUrl(pub String);

impl std::str::FromStr for AcmeUrl {
    type Err = crate::settings::ValueError;
    fn from_str(s: &str) -> Result<AcmeUrl, crate::settings::ValueError> {
        if s.starts_with("https://")
            && s.len() > "https://".len()
            && !s.contains(char::is_whitespace)
        {
            Ok(AcmeUrl(s.to_string()))
        } else {
            Err(crate::settings::ValueError::is(s, "not an https:// URL"))
        }
    }
}

impl std::fmt::Display for AcmeUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

crate::settings::as_text!(AcmeUrl);

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use crate::config::{AcmeChallenge, AcmeConfig, Config};

/// The ALPN protocol of TLS-ALPN-01.
pub(crate) const ACME_TLS: &[u8] = b"acme-tls/1";

/// The path prefix of HTTP-01.
pub(crate) const CHALLENGE_PATH: &str = "/.well-known/acme-challenge/";

/// First wait after a failed attempt; it doubles up to [`MOST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(30);
const MOST_BACKOFF: Duration = Duration::from_secs(6 * 3600);

/// What the thread is to do: the newest generation's sites with `acme = true`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Plan {
    cfg: AcmeConfig,
    /// TLS-ALPN-01 or HTTP-01 (never `Auto`).
    challenge: AcmeChallenge,
    /// Each site's names, the first naming its files.
    sites: Vec<Vec<String>>,
}

impl Plan {
    /// The plan of `cfg`, or `None` when no site asks for ACME; or why `cfg` cannot.
    pub fn of(cfg: &Config) -> Result<Option<Plan>, String> {
        let sites: Vec<Vec<String>> = cfg
            .sites()
            .iter()
            .filter(|s| s.acme)
            .map(|s| s.names.clone())
            .collect();
        if sites.is_empty() {
            return Ok(None);
        }
        for names in &sites {
            if names.is_empty() {
                return Err(
                    "acme = true: the site needs names, which its certificate is for".into(),
                );
            }
            if let Some(w) = names.iter().find(|n| n.starts_with('*')) {
                return Err(format!(
                    "site {}: acme = true cannot cover {w}: a wildcard name needs the DNS-01 \
                     challenge and a DNS provider, which linerate does not have; give the \
                     site a tls-cert for it",
                    names[0]
                ));
            }
        }
        if cfg.tls_listen.is_empty() {
            return Err("acme = true needs --tls-listen (the certificates are for it)".into());
        }
        let challenge = match cfg.acme_challenge {
            AcmeChallenge::Auto => AcmeChallenge::TlsAlpn01,
            c => c,
        };
        if challenge == AcmeChallenge::Http01
            && cfg.listen.is_empty()
            && cfg.redirect_listen.is_empty()
        {
            return Err(
                "acme-challenge http-01 needs a --listen or --redirect-listen address (port 80 \
                 for a public directory)"
                    .into(),
            );
        }
        Ok(Some(Plan {
            cfg: cfg.acme(),
            challenge,
            sites,
        }))
    }

    /// Whether the TLS listeners answer TLS-ALPN-01 (and so offer `acme-tls/1`).
    pub fn tls_alpn(&self) -> bool {
        self.challenge == AcmeChallenge::TlsAlpn01
    }

    /// Whether the plain listeners answer HTTP-01.
    pub fn http(&self) -> bool {
        self.challenge == AcmeChallenge::Http01
    }
}

/// A site's certificate as the status page and the metrics show it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct SiteStatus {
    pub name: String,
    /// Seconds since the epoch: when the one serving expires; the next attempt.
    pub not_after: Option<u64>,
    pub next_attempt: Option<u64>,
    /// The last attempt's failure, if it failed.
    pub last_error: Option<String>,
}

/// Attempts by result.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub issued: AtomicU64,
    pub failed: AtomicU64,
}

/// A certificate and when it is valid.
#[derive(Clone)]
struct Held {
    key: Arc<CertifiedKey>,
    not_before: SystemTime,
    not_after: SystemTime,
    /// The DNS names it covers, lower case.
    names: Vec<String>,
}

#[derive(Default)]
struct Work {
    plan: Option<Plan>,
    /// Sites whose certificate no longer covers their names (a reload added one): due
    /// now.
    due_now: Vec<String>,
}

/// What the workers, the main thread and the ACME thread share (see the module's text).
#[derive(Default)]
pub(crate) struct Acme {
    /// By site (its first name).
    issued: RwLock<HashMap<String, Held>>,
    /// TLS-ALPN-01 certificates by name, while their orders wait.
    alpn: RwLock<HashMap<String, Arc<CertifiedKey>>>,
    /// HTTP-01 key authorizations by token.
    tokens: RwLock<HashMap<String, String>>,
    work: Mutex<Work>,
    wake: Condvar,
    stop: AtomicBool,
    pub counters: Counters,
    status: Mutex<Vec<SiteStatus>>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Acme {
    /// The certificate issued for the site first named `label`.
    pub fn issued(&self, label: &str) -> Option<Arc<CertifiedKey>> {
        read(&self.issued)
            .get(label)
            // Expired (renewals failing all along): the site's own or the server's
            // certificate, if any, rather than one every client refuses.
            .filter(|h| h.not_after > SystemTime::now())
            .map(|h| Arc::clone(&h.key))
    }

    /// The TLS-ALPN-01 certificate for `name`, while its order waits.
    pub fn alpn_certificate(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        read(&self.alpn)
            .get(&name.to_ascii_lowercase())
            .map(Arc::clone)
    }

    /// The HTTP-01 answer for `token`.
    pub fn key_authorization(&self, token: &str) -> Option<String> {
        read(&self.tokens).get(token).cloned()
    }

    /// The sites' certificates, for the status page and the metrics.
    pub fn status(&self) -> Vec<SiteStatus> {
        lock(&self.status).clone()
    }

    /// Takes `plan` (a start's or a reload's): the stored certificates of its sites
    /// that can serve are read now, so they serve from the first handshake; the thread
    /// orders the others. Errors are the stored files' (one line).
    pub fn install(&self, plan: Option<Plan>) {
        if let Some(p) = &plan {
            let mut status = Vec::new();
            for names in &p.sites {
                let label = &names[0];
                let mut s = SiteStatus {
                    name: label.clone(),
                    ..SiteStatus::default()
                };
                let covers = read(&self.issued)
                    .get(label)
                    .map(|h| names.iter().all(|n| h.names.contains(n)));
                if covers == Some(false) {
                    // It serves its names meanwhile; a new one is ordered at once.
                    tracing::info!("acme: {label}: the site has a name its certificate lacks");
                    lock(&self.work).due_now.push(label.clone());
                }
                if covers.is_none() {
                    match load_stored(&p.cfg.dir, names) {
                        Ok(Some(h)) => {
                            tracing::info!(
                                "acme: {label}: the stored certificate serves (until {})",
                                httpdate::fmt_http_date(h.not_after)
                            );
                            write(&self.issued).insert(label.clone(), h);
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!("acme: {label}: {e}; a new one is ordered"),
                    }
                }
                s.not_after = read(&self.issued).get(label).map(|h| unix(h.not_after));
                status.push(s);
            }
            *lock(&self.status) = status;
        }
        lock(&self.work).plan = plan;
        self.wake.notify_all();
    }

    /// Some site has `acme = true`.
    pub fn planned(&self) -> bool {
        lock(&self.work).plan.is_some()
    }

    /// The process is stopping: the order under way is given up.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake.notify_all();
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn set_status(&self, label: &str, f: impl FnOnce(&mut SiteStatus)) {
        if let Some(s) = lock(&self.status).iter_mut().find(|s| s.name == label) {
            f(s);
        }
    }

    /// The ACME thread: orders what is due until the process stops.
    pub fn run(&self) {
        let mut runtime: Option<tokio::runtime::Runtime> = None;
        let mut account: Option<(String, instant_acme::Account)> = None;
        // By site: when to try next, and failures in a row.
        let mut due: HashMap<String, (SystemTime, u32)> = HashMap::new();
        // By site: when to ask for its renewal information (ARI) again; and whether the
        // directory offers it.
        let mut ari: HashMap<String, SystemTime> = HashMap::new();
        let mut ari_offered: Option<(String, bool)> = None;
        while !self.stopping() {
            let plan = lock(&self.work).plan.clone();
            let now = SystemTime::now();
            if let Some(p) = &plan {
                let asked = ari_offered
                    .as_ref()
                    .filter(|(d, _)| *d == p.cfg.directory)
                    .map(|(_, yes)| *yes);
                if asked != Some(false)
                    && p.sites
                        .iter()
                        .any(|n| read(&self.issued).contains_key(&n[0]))
                {
                    let Some(rt) = started(&mut runtime) else {
                        return;
                    };
                    for names in &p.sites {
                        let label = &names[0];
                        let Some(leaf) =
                            read(&self.issued).get(label).map(|h| h.key.cert[0].clone())
                        else {
                            continue;
                        };
                        // Not while failing (the backoff decides), nor before it is time.
                        if ari.get(label).is_some_and(|t| *t > now)
                            || due.get(label).is_some_and(|d| d.1 > 0)
                        {
                            continue;
                        }
                        let r = rt.block_on(async {
                            tokio::select! {
                                r = self.window(p, &leaf, &mut account) => Some(r),
                                _ = stopped(&self.stop) => None,
                            }
                        });
                        match r {
                            None => return,
                            Some(Ok(Some((at, retry)))) => {
                                ari_offered = Some((p.cfg.directory.clone(), true));
                                tracing::info!(
                                    "acme: {label}: the directory's renewal information says renew at {}",
                                    httpdate::fmt_http_date(at)
                                );
                                self.set_status(label, |s| s.next_attempt = Some(unix(at)));
                                due.insert(label.clone(), (at, 0));
                                let again = retry.clamp(Duration::from_secs(60), MOST_BACKOFF);
                                ari.insert(label.clone(), now + again);
                            }
                            Some(Ok(None)) => {
                                ari_offered = Some((p.cfg.directory.clone(), false));
                                break;
                            }
                            Some(Err(e)) => {
                                tracing::warn!(
                                    "acme: {label}: {e}; renewal at two thirds of the lifetime"
                                );
                                ari.insert(label.clone(), now + Duration::from_secs(3600));
                            }
                        }
                    }
                }
            }
            for label in std::mem::take(&mut lock(&self.work).due_now) {
                ari.remove(&label);
                due.insert(label, (now, 0));
            }
            let next = plan.as_ref().and_then(|p| {
                p.sites
                    .iter()
                    .map(|names| {
                        let label = &names[0];
                        let at = match due.get(label) {
                            Some(d) => d.0,
                            None => match read(&self.issued).get(label) {
                                // Drawn once per certificate (its jitter too).
                                Some(h) => {
                                    let at = renewal_time(h.not_before, h.not_after);
                                    due.insert(label.clone(), (at, 0));
                                    at
                                }
                                None => now,
                            },
                        };
                        (names.clone(), at)
                    })
                    .min_by_key(|(_, at)| *at)
            });
            let Some((names, at)) = next else {
                let g = lock(&self.work);
                let _ = self.wake.wait_timeout(g, Duration::from_secs(1));
                continue;
            };
            if at > now {
                self.set_status(&names[0], |s| s.next_attempt = Some(unix(at)));
                let wait = at.duration_since(now).unwrap_or_default();
                let g = lock(&self.work);
                let _ = self.wake.wait_timeout(g, wait.min(Duration::from_secs(1)));
                continue;
            }
            let Some(plan) = plan else { continue };
            let label = names[0].clone();
            let Some(rt) = started(&mut runtime) else {
                return;
            };
            tracing::info!(
                "acme: {label}: ordering a certificate from {}",
                plan.cfg.directory
            );
            // With renewal information, the order names the certificate it replaces.
            let replaces = ari_offered
                .as_ref()
                .is_some_and(|(d, yes)| *yes && *d == plan.cfg.directory)
                .then(|| {
                    read(&self.issued)
                        .get(&label)
                        .map(|h| h.key.cert[0].clone())
                })
                .flatten();
            let outcome = rt.block_on(async {
                tokio::select! {
                    r = self.order(&plan, &names, replaces.as_ref(), &mut account) => Some(r),
                    _ = stopped(&self.stop) => None,
                }
            });
            // Whatever happened, no challenge stays answered.
            self.clear_challenges(&names);
            let Some(outcome) = outcome else { return };
            match outcome {
                Ok(h) => {
                    self.counters.issued.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(
                        "acme: {label}: certificate issued, valid until {}",
                        httpdate::fmt_http_date(h.not_after)
                    );
                    let at = renewal_time(h.not_before, h.not_after);
                    self.set_status(&label, |s| {
                        s.not_after = Some(unix(h.not_after));
                        s.next_attempt = Some(unix(at));
                        s.last_error = None;
                    });
                    write(&self.issued).insert(label.clone(), h);
                    // The new certificate's renewal information is asked next.
                    ari.remove(&label);
                    due.insert(label, (at, 0));
                }
                Err(e) => {
                    self.counters.failed.fetch_add(1, Ordering::Relaxed);
                    let failures = due.get(&label).map_or(0, |d| d.1) + 1;
                    let wait = backoff(failures);
                    tracing::error!(
                        "acme: {label}: {e}; trying again in {}s{}",
                        wait.as_secs(),
                        if read(&self.issued).contains_key(&label) {
                            " (the certificate before serves on)"
                        } else {
                            ""
                        }
                    );
                    let at = SystemTime::now() + wait;
                    self.set_status(&label, |s| {
                        s.next_attempt = Some(unix(at));
                        s.last_error = Some(e.clone());
                    });
                    due.insert(label, (at, failures));
                }
            }
        }
    }

    /// When the directory's renewal information (ARI, RFC 9773) says to renew `leaf`
    /// (a moment drawn in its window) and when to ask again; `None` when the directory
    /// offers none.
    async fn window(
        &self,
        plan: &Plan,
        leaf: &CertificateDer<'static>,
        account: &mut Option<(String, instant_acme::Account)>,
    ) -> Result<Option<(SystemTime, Duration)>, String> {
        let acct = the_account(&plan.cfg, account).await?;
        let id = instant_acme::CertificateIdentifier::try_from(leaf)
            .map_err(|e| format!("renewal information: the certificate: {e}"))?;
        match acct.renewal_info(&id).await {
            Ok((info, retry)) => {
                let start = SystemTime::from(info.suggested_window.start);
                let end = SystemTime::from(info.suggested_window.end);
                let span = end.duration_since(start).unwrap_or_default();
                Ok(Some((start + span.mul_f64(jitter_unit()), retry)))
            }
            Err(instant_acme::Error::Unsupported(_)) => Ok(None),
            Err(e) => Err(format!("renewal information: {}", why(&e))),
        }
    }

    fn clear_challenges(&self, names: &[String]) {
        let mut alpn = write(&self.alpn);
        for n in names {
            alpn.remove(n);
        }
        drop(alpn);
        // Tokens are the order's: every one goes (one order at a time).
        write(&self.tokens).clear();
    }

    /// One order for `names`: the account (loaded or made), the challenges answered,
    /// the certificate fetched, stored and returned; or the reason, in one line.
    async fn order(
        &self,
        plan: &Plan,
        names: &[String],
        replaces: Option<&CertificateDer<'static>>,
        account: &mut Option<(String, instant_acme::Account)>,
    ) -> Result<Held, String> {
        use instant_acme::{
            AuthorizationStatus, CertificateIdentifier, ChallengeType, Identifier, NewOrder,
            OrderStatus, RetryPolicy,
        };
        let acct = the_account(&plan.cfg, account).await?;
        let ids: Vec<Identifier> = names.iter().map(|n| Identifier::Dns(n.clone())).collect();
        let mut new = NewOrder::new(&ids);
        if let Some(id) = replaces.and_then(|c| CertificateIdentifier::try_from(c).ok()) {
            new = new.replaces(id);
        }
        let mut order = acct
            .new_order(&new)
            .await
            .map_err(|e| format!("new order: {}", why(&e)))?;
        let kind = if plan.tls_alpn() {
            ChallengeType::TlsAlpn01
        } else {
            ChallengeType::Http01
        };
        let mut authorizations = order.authorizations();
        while let Some(a) = authorizations.next().await {
            let mut a = a.map_err(|e| format!("authorization: {}", why(&e)))?;
            if a.status == AuthorizationStatus::Valid {
                continue;
            }
            let name = match a.identifier().identifier {
                Identifier::Dns(n) => n.to_ascii_lowercase(),
                other => return Err(format!("authorization for {other:?}: not a DNS name")),
            };
            let mut ch = a
                .challenge(kind.clone())
                .ok_or_else(|| format!("{name}: the directory offers no {kind:?} challenge"))?;
            let ka = ch.key_authorization();
            if plan.tls_alpn() {
                let cert = alpn_certificate(&name, ka.digest().as_ref())?;
                write(&self.alpn).insert(name.clone(), cert);
            } else {
                write(&self.tokens).insert(ch.token.clone(), ka.as_str().to_string());
            }
            ch.set_ready()
                .await
                .map_err(|e| format!("{name}: challenge ready: {}", why(&e)))?;
        }
        let status = order
            .poll_ready(&RetryPolicy::new().timeout(Duration::from_secs(90)))
            .await
            .map_err(|e| format!("validation: {}", why(&e)))?;
        if status != OrderStatus::Ready {
            return Err(format!("the order is {status:?}, not ready"));
        }
        let key = rcgen::KeyPair::generate().map_err(|e| format!("key: {e}"))?;
        let mut params =
            rcgen::CertificateParams::new(names.to_vec()).map_err(|e| format!("CSR: {e}"))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        let csr = params
            .serialize_request(&key)
            .map_err(|e| format!("CSR: {e}"))?;
        order
            .finalize_csr(csr.der())
            .await
            .map_err(|e| format!("finalize: {}", why(&e)))?;
        let chain = order
            .poll_certificate(&RetryPolicy::new().timeout(Duration::from_secs(90)))
            .await
            .map_err(|e| format!("certificate: {}", why(&e)))?;
        let key_pem = key.serialize_pem();
        let held = held(chain.as_bytes(), key_pem.as_bytes())?;
        // Served all the same if it cannot be stored: ordering it again would spend the
        // directory's limits (5 duplicate certificates a week at Let's Encrypt).
        if let Err(e) = store(&plan.cfg.dir, &names[0], &chain, &key_pem) {
            tracing::error!(
                "acme: {}: storing the certificate in {}: {e}; it serves, but a restart will order another",
                names[0],
                plan.cfg.dir.display()
            );
        }
        Ok(held)
    }
}

/// The runtime the ACME client runs in, started the first time.
fn started(runtime: &mut Option<tokio::runtime::Runtime>) -> Option<&tokio::runtime::Runtime> {
    if runtime.is_none() {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => *runtime = Some(rt),
            Err(e) => {
                tracing::error!(
                    "acme: cannot start its runtime: {e}; no certificate will be ordered"
                );
                return None;
            }
        }
    }
    runtime.as_ref()
}

/// The account of `cfg.directory`, opened once.
async fn the_account<'a>(
    cfg: &AcmeConfig,
    account: &'a mut Option<(String, instant_acme::Account)>,
) -> Result<&'a instant_acme::Account, String> {
    if account.as_ref().is_none_or(|(d, _)| *d != cfg.directory) {
        let a = open_account(cfg).await?;
        *account = Some((cfg.directory.clone(), a));
    }
    Ok(&account.as_ref().expect("opened just now").1)
}

/// Returns once `stop` is set.
async fn stopped(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When two thirds of the lifetime have passed, give or take 1% of it.
fn renewal_time(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    let life = not_after.duration_since(not_before).unwrap_or_default();
    let jitter = life.mul_f64(0.02 * jitter_unit());
    not_before + life * 2 / 3 - life / 100 + jitter
}

fn backoff(failures: u32) -> Duration {
    let d = FIRST_BACKOFF
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(MOST_BACKOFF);
    d + d.mul_f64(0.1 * jitter_unit())
}

/// A number in [0, 1), from the clock: jitter needs no more.
fn jitter_unit() -> f64 {
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(n % 1_000_000) / 1_000_000.0
}

/// An ACME client's error with its causes, so that "client error (Connect)" says why
/// (the directory's certificate refused, the connection refused, …).
fn why(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// The account for `cfg.directory`: its stored credentials, or a new account whose
/// credentials are stored.
async fn open_account(cfg: &AcmeConfig) -> Result<instant_acme::Account, String> {
    let builder = || match &cfg.directory_ca {
        Some(ca) => instant_acme::Account::builder_with_root(ca)
            .map_err(|e| format!("acme-directory-ca {}: {e}", ca.display())),
        None => instant_acme::Account::builder().map_err(|e| format!("the system's roots: {e}")),
    };
    let path = account_path(cfg);
    match std::fs::read(&path) {
        Ok(bytes) => {
            let creds: instant_acme::AccountCredentials =
                serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            builder()?
                .from_credentials(creds)
                .await
                .map_err(|e| format!("account from {}: {}", path.display(), why(&e)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let contact = cfg.email.as_ref().map(|e| format!("mailto:{e}"));
            let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
            let (account, creds) = builder()?
                .create(
                    &instant_acme::NewAccount {
                        contact: &contact,
                        terms_of_service_agreed: true,
                        only_return_existing: false,
                    },
                    cfg.directory.clone(),
                    None,
                )
                .await
                .map_err(|e| format!("new account at {}: {}", cfg.directory, why(&e)))?;
            let json = serde_json::to_vec(&creds).map_err(|e| e.to_string())?;
            write_private(&path, &json).map_err(|e| format!("{}: {e}", path.display()))?;
            tracing::info!("acme: account made at {}", cfg.directory);
            Ok(account)
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The account's file: one per directory URL.
fn account_path(cfg: &AcmeConfig) -> PathBuf {
    let d = ring::digest::digest(&ring::digest::SHA256, cfg.directory.as_bytes());
    let hex: String = d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
    cfg.dir.join(format!("account-{hex}.json"))
}

/// Creates `dir` (mode 0700, owned by `owner` when given) if it is missing; one that
/// exists is left as it is.
pub(crate) fn prepare(dir: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    crate::compress_cache::make(dir, owner)
}

/// Writes `bytes` to `path` (mode 0600) under a temporary name, then renames it.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// A site's directory under `dir`.
fn site_dir(dir: &Path, label: &str) -> PathBuf {
    dir.join(label)
}

fn store(dir: &Path, label: &str, chain: &str, key: &str) -> std::io::Result<()> {
    let d = site_dir(dir, label);
    prepare(&d, None)?;
    // The key first: a chain never stands beside a key it does not belong to for
    // longer than between the two renames, and a start checks they match.
    write_private(&d.join("key.pem"), key.as_bytes())?;
    write_private(&d.join("fullchain.pem"), chain.as_bytes())
}

/// The stored certificate of a site named `names`, if it covers them all and has not
/// expired.
fn load_stored(dir: &Path, names: &[String]) -> Result<Option<Held>, String> {
    let d = site_dir(dir, &names[0]);
    let chain = match std::fs::read(d.join("fullchain.pem")) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", d.join("fullchain.pem").display())),
    };
    let key = std::fs::read(d.join("key.pem"))
        .map_err(|e| format!("{}: {e}", d.join("key.pem").display()))?;
    let h = held(&chain, &key)?;
    if let Some(n) = names.iter().find(|n| !h.names.contains(n)) {
        return Err(format!("the stored certificate does not name {n}"));
    }
    if h.not_after <= SystemTime::now() {
        return Ok(None);
    }
    Ok(Some(h))
}

/// The DNS names of a parsed certificate, lower case.
fn names_of(cert: &x509_parser::certificate::X509Certificate<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                out.push(d.to_ascii_lowercase());
            }
        }
    }
    out
}

/// A chain (PEM, leaf first) and its key (PEM) as a certificate to serve.
fn held(chain: &[u8], key: &[u8]) -> Result<Held, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the chain is not PEM: {e:?}"))?;
    let leaf = certs.first().ok_or("the chain holds no certificate")?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| format!("the certificate does not parse: {e}"))?;
    let v = cert.validity();
    let at = |t: &x509_parser::time::ASN1Time| {
        UNIX_EPOCH + Duration::from_secs(t.timestamp().max(0) as u64)
    };
    let (not_before, not_after) = (at(&v.not_before), at(&v.not_after));
    let names = names_of(&cert);
    let der =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the key is not PEM: {e:?}"))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| format!("the key: {e}"))?;
    let key = CertifiedKey::new(certs, signing);
    key.keys_match()
        .map_err(|e| format!("the key is not the certificate's: {e}"))?;
    Ok(Held {
        key: Arc::new(key),
        not_before,
        not_after,
        names,
    })
}

/// The TLS-ALPN-01 certificate of `name` (RFC 8737): self-signed, for that name alone,
/// with the key authorization's digest in the critical acmeIdentifier extension.
fn alpn_certificate(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut p = rcgen::CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let cert = p.self_signed(&key).map_err(|e| e.to_string())?;
    let der = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| e.to_string())?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&der).map_err(|e| e.to_string())?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signing,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let p =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn a_stored_certificate_serves_only_if_it_names_every_name_of_its_site() {
        let d = tempfile::tempdir().unwrap();
        let (chain, key) = self_signed(&["a.test", "www.a.test"]);
        store(d.path(), "a.test", &chain, &key).unwrap();
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let h = load_stored(d.path(), &names(&["a.test", "www.a.test"]))
            .unwrap()
            .expect("it serves");
        assert!(h.not_after > SystemTime::now());
        let e = load_stored(d.path(), &names(&["a.test", "new.a.test"]))
            .err()
            .unwrap();
        assert!(e.contains("does not name new.a.test"), "{e}");
        assert!(load_stored(d.path(), &names(&["b.test"]))
            .unwrap()
            .is_none());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("a.test/key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A key of another certificate is refused.
        let (_, other) = self_signed(&["a.test"]);
        std::fs::write(d.path().join("a.test/key.pem"), other).unwrap();
        assert!(load_stored(d.path(), &names(&["a.test"])).is_err());
    }

    #[test]
    fn renewal_comes_at_two_thirds_of_the_lifetime_and_failures_back_off() {
        let start = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = renewal_time(start, start + Duration::from_secs(90 * 86400));
        let days = at.duration_since(start).unwrap().as_secs_f64() / 86400.0;
        assert!((58.9..=61.0).contains(&days), "{days}");
        assert!(backoff(1) >= FIRST_BACKOFF && backoff(1) < FIRST_BACKOFF * 2);
        assert!(backoff(2) >= FIRST_BACKOFF * 2);
        assert!(backoff(40) <= MOST_BACKOFF + MOST_BACKOFF / 10 + Duration::from_secs(1));
    }

    #[test]
    fn the_tls_alpn_certificate_names_one_name_and_carries_the_digest() {
        let k = alpn_certificate("a.test", &[7u8; 32]).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(k.cert[0].as_ref()).unwrap();
        assert_eq!(names_of(&cert), ["a.test"]);
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier");
        assert!(ext.critical);
        assert!(ext.value.ends_with(&[7u8; 32]));
    }
}
