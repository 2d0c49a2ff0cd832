//! One decision per request: from the request and what the server found for it (a
//! file as its rules present it, an error, a page of the site, a page the server made,
//! an answer with no content), the answer's status, its head ([`Head`]) and a plan of
//! its body ([`Body`]: nothing, bytes, one range, or multipart ranges), in one call.
//! Conditions, ranges, multipart framing, HEAD and which fields in which order are
//! decided here; the server finds files and applies rules, and turns the plan into what
//! it sends (a range of memory or of an open file). Each protocol writes the head in
//! its own form.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::SystemTime;

use crate::coding::Coding;
use crate::conditional::{self, Conditions, Precondition, Validators};
use crate::fields::{Fields, Head};
use crate::range::{self, ByteRange, RangeDecision};
use crate::request::{Method, Request};
use crate::response::{content_range, Multipart};
use crate::Status;

/// What the server found for a request.
pub enum Found<'a> {
    /// A file, or a variant of it, as the site's rules present it.
    File(File<'a>),
    /// An error, with a short text body (`404 Not Found`); `fields` after its type.
    Error {
        status: Status,
        fields: &'a [(&'a str, &'a str)],
    },
    /// An error answered with a page of the site: its type and length, no validators
    /// (it is not the resource asked for).
    Page {
        status: Status,
        content_type: &'a str,
        size: u64,
        fields: &'a [(&'a str, &'a str)],
    },
    /// A page the server made (a listing, the status page, the metrics, the health
    /// answer): 200, `fields`, then its length.
    Made {
        fields: &'a [(&'a str, &'a str)],
        body: Vec<u8>,
    },
    /// An answer with no content (to OPTIONS): 204 and `fields`.
    NoContent { fields: &'a [(String, String)] },
}

/// A file as it is answered.
pub struct File<'a> {
    pub size: u64,
    pub validators: &'a Validators,
    /// `Last-Modified`'s value.
    pub last_modified: &'a str,
    /// Its type (a variant is sent as its original's).
    pub content_type: &'a str,
    /// The coding of a variant.
    pub coding: Option<Coding>,
    /// Whether answers of it vary with `Accept-Encoding`.
    pub vary: bool,
    /// The rules' fields, last.
    pub fields: &'a [(String, String)],
    /// The fields of its whole answers, kept with the file.
    pub kept: &'a KeptFields,
}

/// The fields of a file's whole answers, written the first time and kept with the file
/// (by its type and tag, which a rule or a new digest may change): after the first, a
/// whole answer's head copies them.
#[derive(Default)]
pub struct KeptFields(RefCell<Option<Kept>>);

/// Fields kept, with the type and tag they were written with.
type Kept = (Box<str>, Box<str>, Rc<Fields>);

impl KeptFields {
    fn get(&self, content_type: &str, etag: &str, write: impl FnOnce(&mut Fields)) -> Rc<Fields> {
        let mut kept = self.0.borrow_mut();
        match &*kept {
            Some((t, tag, fields)) if **t == *content_type && **tag == *etag => Rc::clone(fields),
            _ => {
                let mut fields = Fields::default();
                write(&mut fields);
                let fields = Rc::new(fields);
                *kept = Some((content_type.into(), etag.into(), Rc::clone(&fields)));
                fields
            }
        }
    }
}

/// What an answer's body is.
#[derive(Debug, PartialEq, Eq)]
pub enum Body {
    None,
    /// These bytes (an error's text, a page the server made).
    Bytes(Vec<u8>),
    /// This range of the file or page found (the whole of it, or one range).
    Range(ByteRange),
    /// Ranges of the file, each after its part's head, then the trailer.
    Multipart {
        parts: Vec<(Vec<u8>, ByteRange)>,
        trailer: Vec<u8>,
    },
}

/// An answer decided.
pub struct Answer {
    pub head: Head,
    pub body: Body,
    /// The body's length as the access log counts it.
    pub logged: u64,
    /// Whether the connection may take another request after it.
    pub keep_alive: bool,
}

/// The answer to `req` given what was `found`, dated `date` (now's HTTP date);
/// `boundary` makes a multipart boundary, asked only for a multipart answer.
pub fn decide(
    req: &Request,
    found: Found<'_>,
    date: &str,
    now: SystemTime,
    boundary: impl FnOnce() -> String,
) -> Answer {
    let keep_alive = req.keep_alive;
    let get = req.method == Method::Get;
    match found {
        Found::File(f) => file(req, f, date, now, boundary),
        Found::Error { status, fields } => {
            error(status, fields, keep_alive, req.method == Method::Head, date)
        }
        Found::Page {
            status,
            content_type,
            size,
            fields,
        } => {
            let mut h = Head::new(status, date);
            h.field("Content-Type", content_type);
            for (n, v) in fields {
                h.field(n, v);
            }
            h.content_length(size);
            let send = get && size > 0;
            Answer {
                head: h,
                body: if send {
                    Body::Range(ByteRange {
                        start: 0,
                        end: size,
                    })
                } else {
                    Body::None
                },
                logged: if send { size } else { 0 },
                keep_alive,
            }
        }
        Found::Made { fields, body } => {
            let mut h = Head::new(Status::Ok, date);
            for (n, v) in fields {
                h.field(n, v);
            }
            h.content_length(body.len() as u64);
            // A HEAD is logged with the length it would have had.
            let logged = body.len() as u64;
            Answer {
                head: h,
                body: if get { Body::Bytes(body) } else { Body::None },
                logged,
                keep_alive,
            }
        }
        Found::NoContent { fields } => {
            let mut h = Head::new(Status::NoContent, date);
            for (n, v) in fields {
                h.field(n, v);
            }
            Answer {
                head: h,
                body: Body::None,
                logged: 0,
                keep_alive,
            }
        }
    }
}

/// An error with a short text body (its head only when `head_only`), `fields` after
/// its type; an answer to a bad request closes the connection.
pub fn error(
    status: Status,
    fields: &[(&str, &str)],
    keep_alive: bool,
    head_only: bool,
    date: &str,
) -> Answer {
    // A client that sends a bad request gets no second chance on this connection.
    let keep_alive = keep_alive && status != Status::BadRequest;
    let body = format!("{} {}\n", status.code(), status.reason()).into_bytes();
    let mut h = Head::new(status, date);
    h.field("Content-Type", "text/plain");
    for (n, v) in fields {
        h.field(n, v);
    }
    h.content_length(body.len() as u64);
    Answer {
        head: h,
        logged: if head_only { 0 } else { body.len() as u64 },
        body: if head_only {
            Body::None
        } else {
            Body::Bytes(body)
        },
        keep_alive,
    }
}

fn file(
    req: &Request,
    f: File<'_>,
    date: &str,
    now: SystemTime,
    boundary: impl FnOnce() -> String,
) -> Answer {
    let keep_alive = req.keep_alive;
    let head_only = req.method == Method::Head;
    let v = f.validators;
    let cond = Conditions {
        if_match: req.if_match.as_deref(),
        if_none_match: req.if_none_match.as_deref(),
        if_modified_since: req.if_modified_since.as_deref(),
        if_unmodified_since: req.if_unmodified_since.as_deref(),
    };
    match conditional::evaluate(&cond, v, true) {
        Precondition::Failed => {
            return error(Status::PreconditionFailed, &[], keep_alive, head_only, date)
        }
        Precondition::NotModified => {
            let mut h = Head::new(Status::NotModified, date);
            if !v.etag.is_empty() {
                h.field("ETag", &v.etag);
            }
            h.field("Last-Modified", f.last_modified);
            if f.vary {
                h.field("Vary", "Accept-Encoding");
            }
            for (n, val) in f.fields {
                h.field(n, val);
            }
            return Answer {
                head: h,
                body: Body::None,
                logged: 0,
                keep_alive,
            };
        }
        Precondition::Proceed => {}
    }
    let len = f.size;
    let decision = match (&req.range, req.method) {
        (Some(r), Method::Get)
            if req.if_range.as_deref().is_none_or(|ir| {
                // A variant's date is its file's (the compression cache's are): only
                // its ETag names its bytes (docs/http.md V3).
                (f.coding.is_none() || ir.trim_start().starts_with('"'))
                    && conditional::if_range_allows(ir, v, now)
            }) =>
        {
            range::evaluate(r, len)
        }
        _ => RangeDecision::Full,
    };
    let send_body = req.method == Method::Get;
    let multipart;
    let (status, body_len, content_type, content_range, body) = match decision {
        RangeDecision::Unsatisfiable => {
            let cr = format!("bytes */{len}");
            return error(
                Status::RangeNotSatisfiable,
                &[("Content-Range", &cr)],
                keep_alive,
                head_only,
                date,
            );
        }
        RangeDecision::Full => {
            let body = if len > 0 {
                Body::Range(ByteRange { start: 0, end: len })
            } else {
                Body::None
            };
            (Status::Ok, len, f.content_type, None, body)
        }
        RangeDecision::Partial(rs) if rs.len() == 1 => (
            Status::PartialContent,
            rs[0].len(),
            f.content_type,
            Some(content_range(rs[0], len)),
            Body::Range(rs[0]),
        ),
        RangeDecision::Partial(rs) => {
            let m = Multipart::new(&rs, len, f.content_type, &boundary());
            multipart = m.content_type();
            let body = Body::Multipart {
                parts: m.part_heads.into_iter().zip(rs).collect(),
                trailer: m.trailer,
            };
            (
                Status::PartialContent,
                m.content_length,
                multipart.as_str(),
                None,
                body,
            )
        }
    };
    let fields = |l: &mut Fields, content_range: Option<&str>| {
        l.field("Content-Type", content_type);
        if let Some(cr) = content_range {
            l.field("Content-Range", cr);
        }
        l.content_length(body_len);
        if !v.etag.is_empty() {
            l.field("ETag", &v.etag);
        }
        l.field("Last-Modified", f.last_modified)
            .field("Accept-Ranges", "bytes");
    };
    let mut h = Head::new(status, date);
    if status == Status::Ok {
        // A whole answer: its fields are the file's own, written once.
        h.fields(&f.kept.get(content_type, &v.etag, |l| fields(l, None)));
    } else {
        let mut l = Fields::default();
        fields(&mut l, content_range.as_deref());
        h.fields(&l);
    }
    if let Some(c) = f.coding {
        h.field("Content-Encoding", c.token());
    }
    if f.vary {
        h.field("Vary", "Accept-Encoding");
    }
    for (n, val) in f.fields {
        h.field(n, val);
    }
    Answer {
        head: h,
        body: if send_body { body } else { Body::None },
        logged: if send_body { body_len } else { 0 },
        keep_alive,
    }
}
