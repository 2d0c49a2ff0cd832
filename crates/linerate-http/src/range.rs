//! `Range: bytes=…` (RFC 9110 §14) into the byte ranges to send. Syntax errors and other
//! units are ignored (200); satisfiable ranges are clamped, sorted only if they overlap,
//! and coalesced when there are many, so the work stays O(file) whatever the request.

/// Most ranges served as they are; beyond this they are coalesced.
pub const MAX_RANGES: usize = 16;

/// A byte range `start..end` (end exclusive) of a representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl ByteRange {
    /// Bytes in the range.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Never empty once made by [`evaluate`].
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// What to answer to a `Range` field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RangeDecision {
    /// Ignore it: send the whole representation (200).
    Full,
    /// 206 with these ranges, in request order (one: a single part; more: multipart).
    Partial(Vec<ByteRange>),
    /// 416 with `Content-Range: bytes */LEN`.
    Unsatisfiable,
}

#[derive(Clone, Copy)]
enum Spec {
    FromTo(u64, Option<u64>),
    Suffix(u64),
}

fn parse_specs(value: &str) -> Option<Vec<Spec>> {
    let v = value.trim();
    let (unit, set) = v.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    let mut specs = Vec::new();
    for part in set.split(',') {
        let p = part.trim_matches([' ', '\t']);
        if p.is_empty() {
            // Empty list elements are allowed by the list syntax.
            continue;
        }
        let (a, b) = p.split_once('-')?;
        let num = |s: &str| -> Option<u64> {
            if s.is_empty() || s.len() > 19 || !s.bytes().all(|c| c.is_ascii_digit()) {
                None
            } else {
                s.parse().ok()
            }
        };
        if a.is_empty() {
            specs.push(Spec::Suffix(num(b)?));
        } else {
            let first = num(a)?;
            let last = if b.is_empty() { None } else { Some(num(b)?) };
            if last.is_some_and(|l| l < first) {
                return None;
            }
            specs.push(Spec::FromTo(first, last));
        }
    }
    if specs.is_empty() {
        None
    } else {
        Some(specs)
    }
}

/// Decides the answer to `Range: value` for a representation of `len` bytes.
pub fn evaluate(value: &str, len: u64) -> RangeDecision {
    let Some(specs) = parse_specs(value) else {
        return RangeDecision::Full;
    };
    let mut ranges: Vec<ByteRange> = specs
        .iter()
        .filter_map(|s| match *s {
            Spec::FromTo(first, last) if first < len => Some(ByteRange {
                start: first,
                end: last.map_or(len, |l| l.saturating_add(1).min(len)),
            }),
            Spec::FromTo(..) => None,
            // A suffix of nothing, or of an empty file, selects no byte.
            Spec::Suffix(0) => None,
            Spec::Suffix(_) if len == 0 => None,
            Spec::Suffix(n) => Some(ByteRange {
                start: len.saturating_sub(n),
                end: len,
            }),
        })
        .collect();
    if ranges.is_empty() {
        return RangeDecision::Unsatisfiable;
    }
    if ranges.len() == 1 {
        return RangeDecision::Partial(ranges);
    }
    let total: u128 = ranges.iter().map(|r| u128::from(r.len())).sum();
    let mut sorted = ranges.clone();
    sorted.sort_by_key(|r| r.start);
    let overlapping = sorted.windows(2).any(|w| w[1].start < w[0].end);
    if ranges.len() > MAX_RANGES || overlapping || total > u128::from(len) {
        // Coalesce: sorted, overlapping or adjacent ranges merged. A request that still
        // covers the whole file, or still has too many parts, gets the whole body.
        let mut merged: Vec<ByteRange> = Vec::new();
        for r in sorted {
            match merged.last_mut() {
                Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
                _ => merged.push(r),
            }
        }
        if merged.len() > MAX_RANGES || (merged.len() == 1 && merged[0].len() == len) {
            return RangeDecision::Full;
        }
        ranges = merged;
    }
    RangeDecision::Partial(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the field, what is sent lies inside the file, in at most MAX_RANGES
        /// parts, never totalling more than the file; a single valid range is exact.
        /// Rules: docs/http.md P5, F2.
        #[test]
        fn ranges_stay_inside_the_file(
            specs in prop::collection::vec((proptest::option::of(0u64..2000), proptest::option::of(0u64..2000)), 1..40),
            len in 0u64..1500,
        ) {
            let field = specs
                .iter()
                .map(|(a, b)| format!("{}-{}", a.map(|x| x.to_string()).unwrap_or_default(), b.map(|x| x.to_string()).unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",");
            match evaluate(&format!("bytes={field}"), len) {
                RangeDecision::Partial(rs) => {
                    prop_assert!(!rs.is_empty() && rs.len() <= MAX_RANGES);
                    let total: u64 = rs.iter().map(ByteRange::len).sum();
                    prop_assert!(total <= len);
                    for r in &rs {
                        prop_assert!(r.start < r.end && r.end <= len);
                    }
                    if let [(Some(a), Some(b))] = specs[..] {
                        prop_assert_eq!(&rs, &vec![ByteRange { start: a, end: (b + 1).min(len) }]);
                    }
                }
                RangeDecision::Full | RangeDecision::Unsatisfiable => {}
            }
        }
    }

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    /// Rules: docs/http.md F2.
    #[test]
    fn single_ranges() {
        assert_eq!(
            evaluate("bytes=0-8", 1000),
            RangeDecision::Partial(vec![r(0, 9)])
        );
        assert_eq!(
            evaluate("bytes=-10", 1000),
            RangeDecision::Partial(vec![r(990, 1000)])
        );
        assert_eq!(
            evaluate("bytes=990-", 1000),
            RangeDecision::Partial(vec![r(990, 1000)])
        );
        assert_eq!(
            evaluate("bytes=990-5000", 1000),
            RangeDecision::Partial(vec![r(990, 1000)])
        );
        assert_eq!(
            evaluate("bytes=-5000", 1000),
            RangeDecision::Partial(vec![r(0, 1000)])
        );
        assert_eq!(
            evaluate("BYTES = 1-1", 1000),
            RangeDecision::Partial(vec![r(1, 2)])
        );
    }

    /// Rules: docs/http.md P2.
    #[test]
    fn invalid_syntax_is_ignored() {
        for v in [
            "bytes=7-1",
            "bytes=abc",
            "items=0-1",
            "bytes=",
            "bytes",
            "bytes=1-2-3",
            "bytes=+1-2",
            "bytes= - ",
        ] {
            assert_eq!(evaluate(v, 1000), RangeDecision::Full, "{v}");
        }
    }

    /// Rules: docs/http.md F2.
    #[test]
    fn unsatisfiable() {
        assert_eq!(evaluate("bytes=1000-", 1000), RangeDecision::Unsatisfiable);
        assert_eq!(evaluate("bytes=-0", 1000), RangeDecision::Unsatisfiable);
        assert_eq!(evaluate("bytes=5-9", 0), RangeDecision::Unsatisfiable);
        assert_eq!(
            evaluate("bytes=2000-3000,5000-", 1000),
            RangeDecision::Unsatisfiable
        );
    }

    /// Found by the `range` fuzz target: `bytes=-N` on an empty file gave the empty
    /// range 0..0, whose `Content-Range` end (`end - 1`) underflowed.
    /// Rules: docs/http.md F2.
    #[test]
    fn regression_suffix_range_of_an_empty_file_is_unsatisfiable() {
        assert_eq!(evaluate("bytes=-11111", 0), RangeDecision::Unsatisfiable);
        assert_eq!(evaluate("bytes=-1,0-", 0), RangeDecision::Unsatisfiable);
    }

    /// Rules: docs/http.md F2.
    #[test]
    fn several_ranges_stay_in_request_order() {
        assert_eq!(
            evaluate("bytes=500-599,0-9", 1000),
            RangeDecision::Partial(vec![r(500, 600), r(0, 10)])
        );
        // An unsatisfiable member is dropped, the rest served.
        assert_eq!(
            evaluate("bytes=0-9,5000-6000", 1000),
            RangeDecision::Partial(vec![r(0, 10)])
        );
    }

    /// Rules: docs/http.md P5.
    #[test]
    fn many_or_overlapping_ranges_are_coalesced() {
        assert_eq!(
            evaluate("bytes=0-9,5-19,100-109", 1000),
            RangeDecision::Partial(vec![r(0, 20), r(100, 110)])
        );
        let many: Vec<String> = (0..1000).map(|i| format!("{}-{}", i, i)).collect();
        assert_eq!(
            evaluate(&format!("bytes={}", many.join(",")), 1000),
            RangeDecision::Full
        );
        let spread: Vec<String> = (0..40).map(|i| format!("{}-{}", i * 10, i * 10)).collect();
        assert_eq!(
            evaluate(&format!("bytes={}", spread.join(",")), 1000),
            RangeDecision::Full
        );
        assert_eq!(evaluate("bytes=0-,0-", 1000), RangeDecision::Full);
    }

    /// Rules: docs/http.md F2.
    #[test]
    fn offsets_past_4_gib() {
        let len = 5u64 << 30;
        assert_eq!(
            evaluate("bytes=4294967396-4294967495", len),
            RangeDecision::Partial(vec![r(4_294_967_396, 4_294_967_496)])
        );
    }
}
