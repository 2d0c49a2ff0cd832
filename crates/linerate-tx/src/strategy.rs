//! The transmit strategies and their names on the command line.

use std::fmt;
use std::str::FromStr;

/// How bytes get from their source onto the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// `pread` into a user buffer, then `send`: the baseline every server starts from.
    Copy,
    /// One `sendfile` per 4 KiB page until `EAGAIN`: the old loop of seed 000.
    Sendfile4k,
    /// Fixed-size `sendfile` calls until `EAGAIN`, the way most servers do it today.
    SendfileChunked {
        /// Bytes per call.
        chunk_bytes: usize,
    },
    /// Seed 000: each writable event sends `min(remaining, free send space)` in as few
    /// calls as the kernel allows, and asks to be woken when about half the buffer has
    /// drained.
    SendfileBatched,
    /// File → pipe → socket with `splice`, sized like [`Strategy::SendfileBatched`].
    Splice,
    /// `MSG_ZEROCOPY` sends of memory or mapped file ranges (seed 002); buffers are held
    /// until the kernel's completion.
    Zerocopy,
}

impl Strategy {
    /// Every strategy with its default parameters, in the order tables list them.
    pub const ALL: [Strategy; 6] = [
        Strategy::Copy,
        Strategy::Sendfile4k,
        Strategy::SendfileChunked {
            chunk_bytes: 64 * 1024,
        },
        Strategy::SendfileBatched,
        Strategy::Splice,
        Strategy::Zerocopy,
    ];

    /// True for strategies that size their calls from the free send space.
    pub fn is_batched(&self) -> bool {
        matches!(
            self,
            Strategy::SendfileBatched | Strategy::Splice | Strategy::Zerocopy
        )
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Copy => f.write_str("copy"),
            Strategy::Sendfile4k => f.write_str("sendfile-4k"),
            Strategy::SendfileChunked { chunk_bytes } => {
                write!(f, "sendfile-chunk-{}", format_size(*chunk_bytes as u64))
            }
            Strategy::SendfileBatched => f.write_str("sendfile"),
            Strategy::Splice => f.write_str("splice"),
            Strategy::Zerocopy => f.write_str("zerocopy"),
        }
    }
}

/// A strategy name that is not one of ours.
#[derive(Debug, thiserror::Error)]
#[error("unknown strategy '{0}' (expected copy, sendfile-4k, sendfile, sendfile-chunk-SIZE, splice or zerocopy)")]
pub struct ParseStrategyError(String);

impl FromStr for Strategy {
    type Err = ParseStrategyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "copy" => Ok(Strategy::Copy),
            "sendfile-4k" => Ok(Strategy::Sendfile4k),
            "sendfile" => Ok(Strategy::SendfileBatched),
            "splice" => Ok(Strategy::Splice),
            "zerocopy" => Ok(Strategy::Zerocopy),
            _ => {
                let size = s
                    .strip_prefix("sendfile-chunk-")
                    .and_then(|n| parse_size(n).ok())
                    .filter(|&n| n > 0 && n <= usize::MAX as u64)
                    .ok_or_else(|| ParseStrategyError(s.to_string()))?;
                Ok(Strategy::SendfileChunked {
                    chunk_bytes: size as usize,
                })
            }
        }
    }
}

/// Parses a byte count with an optional binary suffix: `65536`, `64K`, `1M`, `2G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                _ => return Err(format!("'{s}': unknown size suffix (use K, M or G)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count (like 65536, 64K, 1M)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Formats a byte count the way [`parse_size`] reads it, as short as it stays exact.
pub fn format_size(n: u64) -> String {
    for (suffix, m) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if n >= m && n.is_multiple_of(m) {
            return format!("{}{}", n / m, suffix);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Strategy::ALL {
            assert_eq!(s.to_string().parse::<Strategy>().unwrap(), s);
        }
        assert_eq!(
            "sendfile-chunk-2M".parse::<Strategy>().unwrap(),
            Strategy::SendfileChunked {
                chunk_bytes: 2 << 20
            }
        );
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in [
            "",
            "Sendfile",
            "sendfile-chunk-",
            "sendfile-chunk-0",
            "sendfile-chunk-4Q",
            "mmap",
        ] {
            assert!(bad.parse::<Strategy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("-1").is_err());
        assert!(parse_size("1T").is_err());
        assert!(parse_size("99999999999G").is_err());
        assert_eq!(format_size(65536), "64K");
        assert_eq!(format_size(65537), "65537");
    }
}
