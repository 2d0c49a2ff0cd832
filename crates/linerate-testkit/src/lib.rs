//! What the integration tests of `linerate` share, so each test file holds tests only:
//!
//! - [`Linerate`] and [`Server`]: the binary under test, and `linerate serve` started on
//!   `127.0.0.1:0` in a temporary root, its address taken from its first stdout line
//!   (`listening on ADDR`), its standard error kept (and printed when a test fails),
//!   stopped with SIGTERM when dropped;
//! - readings of the server's process tree from /proc: descriptors, memory, CPU time
//!   ([`family_fd_count`], [`family_rss_kib`], [`family_cpu_seconds`], …);
//! - one HTTP/1.1 response parser ([`Response`], [`parse_response`], [`parse_all`]),
//!   which checks what every response of the server carries ([`check_common`]), with
//!   `multipart/byteranges` parts and `Content-Range` values;
//! - raw-socket clients: [`Conn`] (responses one at a time), [`req`], [`raw`],
//!   [`raw_bytewise`], [`fetch`], [`expect_refused`] and the exact-answer checks;
//! - document roots and file contents ([`docroot`], [`put`], [`pattern`],
//!   [`assert_bytes_eq`]);
//! - HTTP dates in the three formats a server must accept ([`imf_date`],
//!   [`rfc850_date`], [`asctime_date`]), by the `httpdate` crate;
//! - HTTPS: self-signed certificates ([`tls_files`]), curl against a TLS address
//!   ([`curl_tls`]), and the server's TLS address ([`Server::tls_addr`]);
//! - [`per_strategy!`]: one `#[test]` per transmit strategy.
//!
//! The binary's path is known only where the linerate package's integration tests are
//! compiled (`CARGO_BIN_EXE_linerate`), so each test file names it once:
//!
//! ```text
//! const LINERATE: Linerate = Linerate::new(env!("CARGO_BIN_EXE_linerate"));
//! ```

#![forbid(unsafe_code)]

mod client;
mod dates;
mod files;
mod http;
mod proc;
pub mod quic;
mod server;
mod tls;
mod tools;

pub use client::{
    connect, exchange, expect_answers, expect_range, expect_refused, fetch, raw, raw_bytewise,
    read_until_eof, req, set_rcvbuf, Conn, End,
};
pub use dates::{asctime_date, imf_date, parse_imf_date, rfc850_date, secs_of, unix_now};
pub use files::{
    assert_bytes_eq, docroot, forty_asset_page, log_lines, pattern, put, rust_sources,
    wait_log_lines, workspace,
};
pub use http::{
    answers, check_common, content_range, expect_error_body, expect_parts, find, multipart_parts,
    parse_all, parse_response, Response, ERROR_STATUSES,
};
pub use proc::{
    family, family_cpu_seconds, family_fd_count, family_rss_kib, fd_count_settled, is_root,
    open_fds, set_soft_nofile, settled_fds,
};
pub use server::{Linerate, Server};
pub use tls::{curl_tls, rsa_tls_files, tls_files, tls_files_for, two_sites};
pub use tools::{
    assert_no_netns_left, chromium_loads_forty_asset_page, expect_clean_bench, headless_chromium,
    installed,
};

/// Flags that make small files and file ranges go by the transmit strategy: by default
/// files up to 16 KiB are served from memory and ranges up to 16 KiB are read into the
/// gather with `pread`, whatever `--transmit` says.
pub const BY_STRATEGY: &[&str] = &["--collapse", "0", "--small-file", "0"];
/// The variants a test of file parts runs: the defaults, then [`BY_STRATEGY`].
pub const FILE_PARTS: [&[&str]; 2] = [&[], BY_STRATEGY];
/// One mebibyte.
pub const MIB: usize = 1 << 20;

/// A `per_strategy!` case, `STRATEGY` or `STRATEGY@DRIVER`, split into its strategy and
/// driver (the default, `auto`, when none is named).
pub fn variant(case: &str) -> (&str, &str) {
    case.split_once('@').unwrap_or((case, "auto"))
}

/// The `serve` flags of a `per_strategy!` case: `--transmit STRATEGY --driver DRIVER`.
pub fn variant_args(case: &str) -> [&str; 4] {
    let (transmit, driver) = variant(case);
    ["--transmit", transmit, "--driver", driver]
}

/// For each `name`, a module `name` with one `#[test]` per transmit strategy calling
/// `name(STRATEGY)` under the default driver (io_uring where it can run), and one under
/// the epoll driver with the default strategy, `name("splice@epoll")` (see
/// [`variant_args`]), so a failure names its case (`byte_ranges::splice`,
/// `byte_ranges::epoll`) and the cases run in parallel. A test's `Rules:` line goes above its name in the list.
#[macro_export]
macro_rules! per_strategy {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn copy() {
                super::$name("copy")
            }
            #[test]
            fn sendfile() {
                super::$name("sendfile")
            }
            #[test]
            fn splice() {
                super::$name("splice")
            }
            #[test]
            fn zerocopy() {
                super::$name("zerocopy")
            }
            /// The epoll driver (with the default strategy); the cases above run
            /// under the default driver, io_uring where it can run.
            #[test]
            fn epoll() {
                super::$name("splice@epoll")
            }
        }
    )*};
}
