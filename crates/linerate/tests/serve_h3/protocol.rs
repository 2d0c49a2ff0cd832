//! HTTP/3's rules through the binary, in the manner of h3spec: each case a connection
//! of the tests' own QUIC client (`linerate_testkit::quic`, on quinn-proto) that
//! breaks one rule of RFC 9114 or RFC 9204 (or keeps one a lax peer might not), and
//! the answer RFC names: the connection closed with its code, the stream reset with
//! its code, or the status the request earns. Rules: docs/http.md Q3.

use std::time::Duration;

use super::*;
use linerate_testkit::quic::{self, control_stream, frame, get, headers, headers_literal, Quic};
use quinn_proto::{Dir, StreamId};

/// What a case must end in.
enum Expect {
    /// The connection closed with this HTTP/3 or QPACK code.
    Close(u64),
    /// The case's request stream reset with this code, the connection still up.
    Reset(u64),
    /// The case's request stream answered with this status.
    Status(u16),
}

const FRAME_UNEXPECTED: u64 = 0x105;
const STREAM_CREATION_ERROR: u64 = 0x103;
const CLOSED_CRITICAL_STREAM: u64 = 0x104;
const FRAME_ERROR: u64 = 0x106;
const EXCESSIVE_LOAD: u64 = 0x107;
const ID_ERROR: u64 = 0x108;
const SETTINGS_ERROR: u64 = 0x109;
const MISSING_SETTINGS: u64 = 0x10a;
const REQUEST_INCOMPLETE: u64 = 0x10d;
const MESSAGE_ERROR: u64 = 0x10e;
const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;
const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;

/// Runs one case: a server with HTTP/3, a connection, `act` (which returns the
/// request stream to judge, if the case has one), and what `expect` says.
fn run(expect: Expect, act: fn(&mut Quic) -> Option<StreamId>) {
    let root = docroot();
    put(root.path(), "a.txt", b"hello");
    let certs = docroot();
    let (server, cert) = LINERATE.start_tls(root.path(), certs.path(), &["--http3", "on"]);
    let mut q = Quic::connect(server.tls_addr(), &cert);
    let id = act(&mut q);
    let most = Duration::from_secs(5);
    match expect {
        Expect::Close(code) => {
            q.drive_until(most, |q| q.closed.is_some());
            assert_eq!(q.close_code(), Some(code), "closed: {:?}", q.closed);
        }
        Expect::Reset(code) => {
            let id = id.expect("the case's request stream");
            q.drive_until(most, |q| q.stream(id).reset.is_some());
            assert_eq!(q.stream(id).reset, Some(code), "{:?}", q.closed);
            assert!(q.closed.is_none(), "the connection stays: {:?}", q.closed);
        }
        Expect::Status(want) => {
            let id = id.expect("the case's request stream");
            q.drive_until(most, |q| q.stream(id).fin);
            let got = quic::status_of(&q.stream(id).data);
            assert_eq!(got, Some(want), "{:?}", q.closed);
        }
    }
}

/// A request stream with `bytes` and its end.
fn request(q: &mut Quic, bytes: &[u8]) -> Option<StreamId> {
    q.open(Dir::Uni, &control_stream(), false);
    Some(q.open(Dir::Bi, bytes, true))
}

/// A GET of `/a.txt` with `extra` fields after the four pseudo-fields.
fn get_with(extra: &[(&str, &str)]) -> Vec<u8> {
    let mut fields = vec![
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", "/a.txt"),
    ];
    fields.extend_from_slice(extra);
    headers(&fields)
}

macro_rules! cases {
    ($($(#[$m:meta])* $name:ident: $expect:expr, $act:expr;)*) => {
        $(
            $(#[$m])*
            #[test]
            fn $name() {
                run($expect, $act);
            }
        )*
    };
}

cases! {
    /// The control stream opens with a frame other than SETTINGS (RFC 9114 §6.2.1).
    control_stream_without_settings_first: Expect::Close(MISSING_SETTINGS), |q| {
        q.open(Dir::Uni, &[&[0x00][..], &frame(0x07, &[0x00])].concat(), false);
        None
    };
    /// SETTINGS a second time (§7.2.4).
    settings_twice: Expect::Close(FRAME_UNEXPECTED), |q| {
        q.open(Dir::Uni, &[control_stream(), frame(0x04, &[])].concat(), false);
        None
    };
    /// A second control stream (§6.2.1).
    a_second_control_stream: Expect::Close(STREAM_CREATION_ERROR), |q| {
        q.open(Dir::Uni, &control_stream(), false);
        q.open(Dir::Uni, &control_stream(), false);
        None
    };
    /// The control stream closed (§6.2.1).
    the_control_stream_closed: Expect::Close(CLOSED_CRITICAL_STREAM), |q| {
        q.open(Dir::Uni, &control_stream(), true);
        None
    };
    /// DATA on the control stream (§7.2.1).
    data_on_the_control_stream: Expect::Close(FRAME_UNEXPECTED), |q| {
        q.open(Dir::Uni, &[control_stream(), frame(0x00, b"x")].concat(), false);
        None
    };
    /// HEADERS on the control stream (§7.2.2).
    headers_on_the_control_stream: Expect::Close(FRAME_UNEXPECTED), |q| {
        q.open(Dir::Uni, &[control_stream(), get("/")].concat(), false);
        None
    };
    /// An HTTP/2 frame type (WINDOW_UPDATE, 0x08) on the control stream (§7.2.8).
    an_http2_frame_on_the_control_stream: Expect::Close(FRAME_UNEXPECTED), |q| {
        q.open(Dir::Uni, &[control_stream(), frame(0x08, &[0x00])].concat(), false);
        None
    };
    /// An HTTP/2 setting (SETTINGS_ENABLE_PUSH, 0x02) in SETTINGS (§7.2.4.1).
    an_http2_setting: Expect::Close(SETTINGS_ERROR), |q| {
        q.open(Dir::Uni, &[&[0x00][..], &frame(0x04, &[0x02, 0x00])].concat(), false);
        None
    };
    /// One setting twice (§7.2.4).
    a_setting_twice: Expect::Close(SETTINGS_ERROR), |q| {
        let payload = [0x06, 0x10, 0x06, 0x10];
        q.open(Dir::Uni, &[&[0x00][..], &frame(0x04, &payload)].concat(), false);
        None
    };
    /// A push stream from the client (§6.2.2).
    a_push_stream_from_the_client: Expect::Close(STREAM_CREATION_ERROR), |q| {
        q.open(Dir::Uni, &control_stream(), false);
        q.open(Dir::Uni, &[0x01, 0x00], false);
        None
    };
    /// CANCEL_PUSH of a push the server never promised (§7.2.3).
    cancel_push: Expect::Close(ID_ERROR), |q| {
        q.open(Dir::Uni, &[control_stream(), frame(0x03, &[0x00])].concat(), false);
        None
    };
    /// A second QPACK encoder stream (RFC 9204 §4.2).
    a_second_encoder_stream: Expect::Close(STREAM_CREATION_ERROR), |q| {
        q.open(Dir::Uni, &control_stream(), false);
        q.open(Dir::Uni, &[0x02], false);
        q.open(Dir::Uni, &[0x02], false);
        None
    };
    /// A table capacity past the server's (zero) on the encoder stream (RFC 9204
    /// §4.3.1).
    a_table_capacity_past_the_servers: Expect::Close(QPACK_ENCODER_STREAM_ERROR), |q| {
        q.open(Dir::Uni, &control_stream(), false);
        q.open(Dir::Uni, &[0x02, 0x3f, 0x45], false);
        None
    };
    /// A field section that names the dynamic table, which the server allows none of
    /// (RFC 9204 §2.2.3).
    a_dynamic_table_reference: Expect::Close(QPACK_DECOMPRESSION_FAILED), |q| {
        request(q, &frame(0x01, &[0x02, 0x00, 0x80]))
    };
    /// DATA before HEADERS on a request stream (§4.1).
    data_before_headers: Expect::Close(FRAME_UNEXPECTED), |q| {
        request(q, &frame(0x00, b"x"))
    };
    /// An HTTP/2 frame type (PRIORITY, 0x02) on a request stream (§7.2.8).
    an_http2_frame_on_a_request_stream: Expect::Close(FRAME_UNEXPECTED), |q| {
        request(q, &[get("/a.txt"), frame(0x02, &[0x00])].concat())
    };
    /// SETTINGS on a request stream (§7.2.4).
    settings_on_a_request_stream: Expect::Close(FRAME_UNEXPECTED), |q| {
        request(q, &[frame(0x04, &[]), get("/a.txt")].concat())
    };
    /// HEADERS after the trailers (§4.1).
    headers_after_the_trailers: Expect::Close(FRAME_UNEXPECTED), |q| {
        let trailers = headers(&[("x-t", "1")]);
        request(q, &[get("/a.txt"), trailers.clone(), trailers].concat())
    };
    /// A frame its stream ends inside (§7.1).
    a_frame_cut_by_the_streams_end: Expect::Close(FRAME_ERROR), |q| {
        let cut = get("/a.txt");
        request(q, &cut[..cut.len() - 2])
    };
    /// A HEADERS frame longer than the server takes: the frame is refused as excessive
    /// load before it is read.
    a_headers_frame_past_every_limit: Expect::Close(EXCESSIVE_LOAD), |q| {
        let mut big = Vec::new();
        quic::varint(&mut big, 0x01);
        quic::varint(&mut big, 1 << 30);
        big.extend(vec![0u8; 4096]);
        request(q, &big)
    };
    /// A request stream that ends before its head (§4.1).
    a_request_stream_with_no_head: Expect::Reset(REQUEST_INCOMPLETE), |q| {
        request(q, &[])
    };
    /// A request with no `:path` (§4.3.1).
    no_path: Expect::Reset(MESSAGE_ERROR), |q| {
        let fields = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost")];
        request(q, &headers(&fields))
    };
    /// A field name in upper case (§4.2).
    an_upper_case_field_name: Expect::Reset(MESSAGE_ERROR), |q| {
        let fields: [(&[u8], &[u8]); 5] = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b":path", b"/a.txt"),
            (b"X-Up", b"1"),
        ];
        request(q, &headers_literal(&fields))
    };
    /// A pseudo-field after a field (§4.3).
    a_pseudo_field_after_a_field: Expect::Reset(MESSAGE_ERROR), |q| {
        let fields: [(&[u8], &[u8]); 5] = [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"localhost"),
            (b"x-a", b"1"),
            (b":path", b"/a.txt"),
        ];
        request(q, &headers_literal(&fields))
    };
    /// A pseudo-field requests do not have (§4.3).
    an_unknown_pseudo_field: Expect::Reset(MESSAGE_ERROR), |q| {
        request(q, &get_with(&[(":status", "200")]))
    };
    /// A connection-specific field (§4.2).
    a_connection_field: Expect::Reset(MESSAGE_ERROR), |q| {
        request(q, &get_with(&[("connection", "close")]))
    };
    /// `te` other than `trailers` (§4.2).
    te_other_than_trailers: Expect::Reset(MESSAGE_ERROR), |q| {
        request(q, &get_with(&[("te", "gzip")]))
    };
    /// A body shorter than its `content-length` (§4.1.2).
    a_body_shorter_than_its_length: Expect::Reset(MESSAGE_ERROR), |q| {
        let head = headers(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "localhost"),
            (":path", "/a.txt"),
            ("content-length", "10"),
        ]);
        request(q, &[head, frame(0x00, b"abc")].concat())
    };
    /// A method the server does not know: 501, as over HTTP/1.1.
    an_unknown_method: Expect::Status(501), |q| {
        let fields = [
            (":method", "BREW"),
            (":scheme", "https"),
            (":authority", "localhost"),
            (":path", "/a.txt"),
        ];
        request(q, &headers(&fields))
    };
    /// A head past the limits (a field of 24 KiB, past the 16 KiB of fields and 32
    /// bytes a field): 431, as over HTTP/1.1.
    a_head_past_the_limits: Expect::Status(431), |q| {
        let long = "x".repeat(24 << 10);
        request(q, &get_with(&[("x-long", &long)]))
    };
    /// A head past twice the limits (a field of 100 KiB): the connection ends unread,
    /// as HTTP/2's does.
    a_head_past_twice_the_limits: Expect::Close(EXCESSIVE_LOAD), |q| {
        let long = "x".repeat(100 << 10);
        request(q, &get_with(&[("x-long", &long)]))
    };
    /// A frame of a reserved type before HEADERS is skipped (§7.2.8): the request is
    /// answered.
    a_reserved_frame_type_is_skipped: Expect::Status(200), |q| {
        request(q, &[frame(0x21, b"grease"), get("/a.txt")].concat())
    };
    /// A unidirectional stream of a reserved type is ignored (§6.2.3).
    a_reserved_stream_type_is_ignored: Expect::Status(200), |q| {
        q.open(Dir::Uni, &[0x21, 1, 2, 3], true);
        request(q, &get("/a.txt"))
    };
    /// A request with no control stream of the client's yet is answered (SETTINGS may
    /// come later, §6.2.1).
    a_request_before_the_clients_settings: Expect::Status(200), |q| {
        Some(q.open(Dir::Bi, &get("/a.txt"), true))
    };
}
