//! Access-log lines: the common, combined, JSON and custom formats, each worker's buffers
//! by site, and the statistics counted with each line.

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::config::{AccessLog, Config, LogFormat};
use crate::conn::{Aborted, Cut};
use crate::listen::Peer;
use crate::logs::{AccessLines, AccessTarget, LogFile};
use crate::response::{Response, Wire};
use crate::stats::Stats;

/// When the responses logged in one turn of a connection ended: the clock read once
/// for them all (an HTTP/2 connection finishes many in a turn), at the first.
#[derive(Default)]
pub(crate) struct Done(Option<Instant>);

impl Done {
    pub(crate) fn at(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// Writes `r`'s access-log line, if there is a log, and counts the response.
pub(crate) fn write_access(
    log: &mut AccessLogs,
    stats: &Stats,
    (peer, tls): (Peer, Option<&'static str>),
    r: &Response,
    aborted: Option<Aborted>,
    done: &mut Done,
) {
    let body = aborted.map_or(r.record.body_bytes, |a| a.body_sent);
    stats.record(
        r.record.method,
        r.record.status.code(),
        body,
        r.record
            .started
            .map(|t| done.at().saturating_duration_since(t)),
    );
    match r.record.wire {
        Wire::One => {}
        Wire::Two => Stats::add(&stats.h2_responses, 1),
        Wire::Three => Stats::add(&stats.h3_responses, 1),
    }
    if let Some((l, style)) = log.of(r.record.site) {
        let line = log_line(style, (peer, tls), r, aborted, SystemTime::now());
        // Whole lines: the buffer flushes between lines, never inside one.
        Stats::add(&stats.log_lines_dropped, l.push(&line));
    }
}

/// The client's address as the log writes it: the one a trusted proxy named, else
/// the connection's peer.
fn remote(peer: Peer, r: &Response) -> String {
    match r.record.client {
        Some(ip) => ip.to_string(),
        None => peer.remote(),
    }
}

/// One access-log line: Common Log Format (`-` for no body bytes, the request line with
/// `"`, `\\`, control and non-ASCII bytes as `\\xHH`, as nginx writes them), or a JSON
/// object. A response cut before its end (`aborted`) has the body bytes that left (that
/// the socket took), 499 for its status if the client went away before any byte of it
/// left (nginx's convention), and a last field saying how it was cut: ` aborted=HOW` in
/// CLF, `"aborted": "HOW"` in JSON.
fn log_line(
    style: &LogStyle,
    (peer, tls): (Peer, Option<&str>),
    r: &Response,
    aborted: Option<Aborted>,
    t: SystemTime,
) -> String {
    use std::fmt::Write as _;
    let (status, body_bytes) = match aborted {
        Some(a) if a.nothing_sent && a.cut == Cut::Client => (499, 0),
        Some(a) => (r.record.status.code(), a.body_sent),
        None => (r.record.status.code(), r.record.body_bytes),
    };
    if let LogFormat::Custom(template) = &style.format {
        let said = Said {
            status,
            body_bytes,
            tls,
        };
        return custom_line(template, peer, r, said, aborted, t);
    }
    if style.format == LogFormat::Json {
        let mut words = r.record.request_line.splitn(3, ' ');
        let (method, path) = (words.next(), words.next());
        let mut v = serde_json::json!({
            "time": humantime::format_rfc3339_micros(t).to_string(),
            "remote": remote(peer, r),
            "host": r.record.host,
            "request": r.record.request_line,
            "method": method,
            "path": path,
            "status": status,
            "bytes": body_bytes,
            "duration_us": r.record.started.map(|s| s.elapsed().as_micros() as u64),
            "user_agent": r.record.user_agent.as_deref().map(json_text),
            "referer": r.record.referer.as_deref().map(json_text),
            "transmit": style.transmit,
        });
        if let Some(a) = aborted {
            v["aborted"] = a.cut.as_str().into();
        }
        let mut line = v.to_string();
        line.push('\n');
        return line;
    }
    let mut line = String::with_capacity(80 + r.record.request_line.len());
    match r.record.client {
        Some(ip) => {
            let _ = write!(line, "{ip}");
        }
        None => line.push_str(&peer.remote()),
    }
    line.push_str(" - - [");
    push_clf_date(&mut line, t);
    line.push_str("] \"");
    clf_escape(&mut line, r.record.request_line.as_bytes());
    let _ = write!(line, "\" {status} ");
    match body_bytes {
        0 => line.push('-'),
        n => {
            let _ = write!(line, "{n}");
        }
    }
    if style.format == LogFormat::Combined {
        for field in [&r.record.referer, &r.record.user_agent] {
            match field {
                Some(v) => {
                    line.push_str(" \"");
                    clf_escape(&mut line, v);
                    line.push('"');
                }
                None => line.push_str(" \"-\""),
            }
        }
    }
    if let Some(a) = aborted {
        let _ = write!(line, " aborted={}", a.cut.as_str());
    }
    line.push('\n');
    line
}

/// What a line says that the response alone does not: the status and body bytes as
/// logged (an aborted answer's), and the connection's TLS version.
struct Said<'a> {
    status: u16,
    body_bytes: u64,
    tls: Option<&'a str>,
}

/// A line of the operator's template: each variable as nginx writes it (`-` for what
/// is not there), client-sent text escaped as in CLF lines, then ` aborted=HOW` for a
/// cut answer, as the other formats say it.
fn custom_line(
    template: &crate::config::LogTemplate,
    peer: Peer,
    r: &Response,
    said: Said<'_>,
    aborted: Option<Aborted>,
    t: SystemTime,
) -> String {
    use crate::config::{LogPiece, LogVar};
    use std::fmt::Write as _;
    let rec = &r.record;
    let mut words = rec.request_line.splitn(3, ' ');
    let (method, uri, protocol) = (words.next(), words.next(), words.next());
    let mut line = String::with_capacity(template.source.len() + 64);
    let text = |line: &mut String, v: Option<&[u8]>| match v {
        Some(v) if !v.is_empty() => clf_escape(line, v),
        _ => line.push('-'),
    };
    for piece in template.pieces.iter() {
        match *piece {
            LogPiece::Text(a, b) => line.push_str(&template.source[a..b]),
            LogPiece::Var(v) => match v {
                LogVar::RemoteAddr => line.push_str(&remote(peer, r)),
                LogVar::Host => text(&mut line, rec.host.as_deref().map(str::as_bytes)),
                LogVar::Request => clf_escape(&mut line, rec.request_line.as_bytes()),
                LogVar::RequestMethod => text(&mut line, method.map(str::as_bytes)),
                LogVar::RequestUri => text(&mut line, uri.map(str::as_bytes)),
                LogVar::Protocol => text(&mut line, protocol.map(str::as_bytes)),
                LogVar::Status => {
                    let _ = write!(line, "{}", said.status);
                }
                LogVar::BodyBytesSent => {
                    let _ = write!(line, "{}", said.body_bytes);
                }
                LogVar::RequestTime => match rec.started {
                    Some(s) => {
                        let _ = write!(line, "{:.3}", s.elapsed().as_secs_f64());
                    }
                    None => line.push('-'),
                },
                LogVar::HttpReferer => text(&mut line, rec.referer.as_deref()),
                LogVar::HttpUserAgent => text(&mut line, rec.user_agent.as_deref()),
                LogVar::SslProtocol => line.push_str(said.tls.unwrap_or("-")),
                LogVar::TimeLocal => push_clf_date(&mut line, t),
                LogVar::TimeIso8601 => {
                    let _ = write!(line, "{}", humantime::format_rfc3339_seconds(t));
                }
                LogVar::Msec => {
                    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
                    let _ = write!(line, "{}.{:03}", d.as_secs(), d.subsec_millis());
                }
            },
        }
    }
    if let Some(a) = aborted {
        let _ = write!(line, " aborted={}", a.cut.as_str());
    }
    line.push('\n');
    line
}

/// `s` into a quoted field of a CLF line: `"`, `\` and bytes outside printable ASCII as
/// `\xHH`, so a line can never be split or faked by what a client sent.
fn clf_escape(line: &mut String, s: &[u8]) {
    use std::fmt::Write as _;
    for &b in s {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(line, "\\x{b:02X}");
        } else {
            line.push(char::from(b));
        }
    }
}

/// A field for a JSON line: its text when it is UTF-8, else every byte outside
/// printable ASCII (and `\`) as `\xHH`, as the CLF line writes them: no byte is
/// hidden or replaced.
fn json_text(v: &[u8]) -> String {
    match std::str::from_utf8(v) {
        Ok(t) => t.to_string(),
        Err(_) => {
            let mut out = String::with_capacity(v.len() + 8);
            clf_escape(&mut out, v);
            out
        }
    }
}

/// A worker's access logs: one buffer per place lines go (standard output, each
/// file), and by site which of them and in which format (a site's own, else the
/// server's; the server's for an answer to no site).
pub(crate) struct AccessLogs {
    lines: Vec<AccessLines>,
    /// By site index, then the server's last: the buffer and the style.
    by_site: Vec<Option<(usize, LogStyle)>>,
}

impl AccessLogs {
    pub(crate) fn new(cfg: &Config, files: &[Arc<LogFile>]) -> io::Result<AccessLogs> {
        let mut lines: Vec<AccessLines> = Vec::new();
        let mut keys: Vec<AccessLog> = Vec::new();
        let mut by_site = Vec::new();
        let server = (cfg.access_log.clone(), cfg.log_format.clone());
        for (target, format) in cfg.site_logs().into_iter().chain([server]) {
            let at = match keys.iter().position(|k| *k == target) {
                Some(i) => Some(i),
                None => {
                    let made = match &target {
                        AccessLog::Off => None,
                        AccessLog::Stdout => {
                            let out = io::stdout().as_fd().try_clone_to_owned()?;
                            Some(AccessLines::new(AccessTarget::Stdout(out.into())))
                        }
                        AccessLog::File(p) => files
                            .iter()
                            .find(|f| f.path() == p.as_path())
                            .map(|f| AccessLines::new(AccessTarget::File(Arc::clone(f)))),
                    };
                    made.map(|l| {
                        lines.push(l);
                        keys.push(target);
                        lines.len() - 1
                    })
                }
            };
            by_site.push(at.map(|i| {
                (
                    i,
                    LogStyle {
                        format,
                        transmit: cfg.transmit.to_string(),
                    },
                )
            }));
        }
        Ok(AccessLogs { lines, by_site })
    }

    /// Where the lines of site `site` go (none: an answer to no site), if anywhere.
    fn of(&mut self, site: Option<u16>) -> Option<(&mut AccessLines, &LogStyle)> {
        let last = self.by_site.len() - 1;
        let i = site.map_or(last, |s| usize::from(s).min(last));
        let (at, style) = self.by_site[i].as_ref()?;
        Some((&mut self.lines[*at], style))
    }

    /// Writes every buffer; the lines dropped.
    pub(crate) fn flush(&mut self) -> u64 {
        self.lines.iter_mut().map(AccessLines::flush).sum()
    }
}

/// How access-log lines are written.
pub(crate) struct LogStyle {
    pub format: LogFormat,
    /// The transmit strategy's name, for JSON lines.
    pub transmit: String,
}

/// `[10/Oct/2000:13:55:36 +0000]`'s inside, from an HTTP date.
fn clf_date(t: SystemTime) -> String {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let d = httpdate::fmt_http_date(t);
    let f: Vec<&str> = d.split_whitespace().collect();
    match f.as_slice() {
        [_, day, mon, year, time, _] => format!("{day}/{mon}/{year}:{time} +0000"),
        _ => d,
    }
}

thread_local! {
    /// The worker's last CLF date and its second: one line a second makes it, the
    /// others copy it (measured: the date and its reformatting were about 2% of the
    /// server's CPU per request at 1 KiB with the log on).
    static CLF_DATE: std::cell::RefCell<(u64, String)> =
        const { std::cell::RefCell::new((u64::MAX, String::new())) };
}

/// Appends [`clf_date`] of `t` to `line`, made once per second per worker.
fn push_clf_date(line: &mut String, t: SystemTime) {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CLF_DATE.with_borrow_mut(|(at, date)| {
        if *at != secs {
            *date = clf_date(t);
            *at = secs;
        }
        line.push_str(date);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_http::Status;
    use std::time::Duration;

    #[test]
    fn the_clf_date_is_made_once_a_second_and_follows_the_clock() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        for t in [
            t0,
            t0 + Duration::from_millis(500),
            t0 + Duration::from_secs(1),
            t0 + Duration::from_secs(86_400 * 40),
            t0,
        ] {
            let mut line = String::from("x ");
            push_clf_date(&mut line, t);
            assert_eq!(line, format!("x {}", clf_date(t)));
        }
        let mut line = String::new();
        push_clf_date(&mut line, t0);
        assert_eq!(line, "10/Oct/2000:13:55:36 +0000");
    }

    fn response(line: &str, host: Option<&str>, status: Status, bytes: u64) -> Response {
        let mut r = Response::new(Default::default(), status, true, line.into(), bytes);
        r.record.host = host.map(str::to_string);
        r
    }

    const CLF: LogStyle = LogStyle {
        format: LogFormat::Clf,
        transmit: String::new(),
    };
    const COMBINED: LogStyle = LogStyle {
        format: LogFormat::Combined,
        transmit: String::new(),
    };
    fn json_style() -> LogStyle {
        LogStyle {
            format: LogFormat::Json,
            transmit: "sendfile".into(),
        }
    }

    #[test]
    fn access_log_lines() {
        let peer = Peer::Ip("198.18.0.2:4000".parse().unwrap());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        let r = response("GET /a.txt HTTP/1.1", Some("h"), Status::Ok, 1234);
        assert_eq!(
            log_line(&CLF, (peer, None), &r, None, t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /a.txt HTTP/1.1\" 200 1234\n"
        );
        let r = response("GET /\"x\\\u{7f}é HTTP/1.1", None, Status::NotFound, 0);
        assert_eq!(
            log_line(&CLF, (peer, None), &r, None, t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /\\x22x\\x5C\\x7F\\xC3\\xA9 HTTP/1.1\" 404 -\n"
        );
        let j: serde_json::Value =
            serde_json::from_str(&log_line(&json_style(), (peer, None), &r, None, t)).unwrap();
        assert_eq!(j["request"], "GET /\"x\\\u{7f}é HTTP/1.1");
        assert_eq!(j["host"], serde_json::Value::Null);
        assert_eq!(j["remote"], "198.18.0.2");
        assert_eq!(
            (j["status"].as_u64(), j["bytes"].as_u64()),
            (Some(404), Some(0))
        );
        assert_eq!(j["time"], "2000-10-10T13:55:36.000000Z");
        assert_eq!(
            (j["method"].as_str(), j["path"].as_str()),
            (Some("GET"), Some("/\"x\\\u{7f}é"))
        );
        assert_eq!(j["transmit"], "sendfile");
        assert_eq!(
            j["duration_us"],
            serde_json::Value::Null,
            "an answer to no request"
        );
        // Combined: CLF, then the Referer and the User-Agent, escaped, "-" when absent.
        let mut r = response("GET / HTTP/1.1", None, Status::Ok, 5);
        r.record.user_agent = Some(b"curl/8 \"x\" \xff".to_vec());
        assert_eq!(
            log_line(&COMBINED, (peer, None), &r, None, t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl/8 \\x22x\\x22 \\xFF\"\n"
        );
        // Regression (issue 28): a byte that is not UTF-8 hid the whole field (`-`,
        // or null in JSON); now it is written escaped, in both.
        let j: serde_json::Value =
            serde_json::from_str(&log_line(&json_style(), (peer, None), &r, None, t)).unwrap();
        assert_eq!(j["user_agent"], "curl/8 \\x22x\\x22 \\xFF");
        let r = response("GET http://a/ HTTP/1.1", Some("a"), Status::Ok, 5);
        let j: serde_json::Value =
            serde_json::from_str(&log_line(&json_style(), (peer, None), &r, None, t)).unwrap();
        assert_eq!(j["host"], "a");
        assert_eq!(j.get("aborted"), None);
    }

    /// A custom format writes exactly its variables, client text escaped, `-` for
    /// what is not there.
    #[test]
    fn a_custom_line_writes_exactly_the_variables_asked() {
        let peer = Peer::Ip("198.18.0.2:4000".parse().unwrap());
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(971_186_136_250);
        let style = |f: &str| LogStyle {
            format: f.parse().unwrap(),
            transmit: String::new(),
        };
        let mut r = response("GET /a?b=1 HTTP/2.0", Some("a.test"), Status::Ok, 42);
        r.record.user_agent = Some(b"ua \"q\"".to_vec());
        let s = style(
            "$remote_addr|$host|$request|$request_method|$request_uri|$protocol|$status|\
             $body_bytes_sent|$http_referer|$http_user_agent|$ssl_protocol|[$time_local]|\
             $time_iso8601|$msec|${status}x|$$",
        );
        assert_eq!(
            log_line(&s, (peer, Some("TLSv1.3")), &r, None, t),
            "198.18.0.2|a.test|GET /a?b=1 HTTP/2.0|GET|/a?b=1|HTTP/2.0|200|42|-|ua \\x22q\\x22|\
             TLSv1.3|[10/Oct/2000:13:55:36 +0000]|2000-10-10T13:55:36Z|971186136.250|200x|$\n"
        );
        // A trusted proxy's client; an aborted answer as the other formats say it.
        r.record.client = Some("203.0.113.9".parse().unwrap());
        let cut = Some(Aborted {
            cut: Cut::Client,
            body_sent: 0,
            nothing_sent: true,
        });
        assert_eq!(
            log_line(
                &style("$remote_addr $status $body_bytes_sent"),
                (peer, None),
                &r,
                cut,
                t
            ),
            "203.0.113.9 499 0 aborted=client\n"
        );
        for bad in ["$nope", "${status", "$status\t$host"] {
            assert!(bad.parse::<LogFormat>().is_err(), "{bad}");
        }
        assert!("clf".parse::<LogFormat>() == Ok(LogFormat::Clf));
    }

    #[test]
    fn aborted_responses_have_the_bytes_that_left_and_how_they_were_cut() {
        let peer = Peer::Ip("198.18.0.2:4000".parse().unwrap());
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        let r = response("GET /big HTTP/1.1", Some("h"), Status::Ok, 1 << 30);
        let cut = |cut, body_sent, nothing_sent| {
            Some(Aborted {
                cut,
                body_sent,
                nothing_sent,
            })
        };
        assert_eq!(
            log_line(&CLF, (peer, None), &r, cut(Cut::SendTimeout, 65536, false), t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /big HTTP/1.1\" 200 65536 aborted=send-timeout\n"
        );
        assert_eq!(
            log_line(&CLF, (peer, None), &r, cut(Cut::Client, 0, true), t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /big HTTP/1.1\" 499 - aborted=client\n"
        );
        assert_eq!(
            log_line(&CLF, (peer, None), &r, cut(Cut::Shutdown, 0, false), t),
            "198.18.0.2 - - [10/Oct/2000:13:55:36 +0000] \"GET /big HTTP/1.1\" 200 - aborted=shutdown\n",
            "the head left, no body byte"
        );
        let line = log_line(
            &json_style(),
            (peer, None),
            &r,
            cut(Cut::Truncated, 100, false),
            t,
        );
        let j: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (j["status"].as_u64(), j["bytes"].as_u64()),
            (Some(200), Some(100))
        );
        assert_eq!(j["aborted"], "truncated");
    }
}
