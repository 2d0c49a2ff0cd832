//! Content codings: which precompressed variant of a file a client gets
//! (`Accept-Encoding`, RFC 9110 §12.5.3), parsed into a fixed set of preferences with no
//! allocation.
//!
//! The choice, for the codings a file has a variant in (in the server's order of
//! preference): each coding's quality is its own entry's `q`, else that of `*`, else 0
//! (not acceptable). Identity's is its own entry's, else that of `*`, else none. The
//! acceptable coding of the highest quality wins, the server's order breaking ties,
//! unless identity was given a higher quality than it. `x-gzip` is `gzip`. A member
//! that does not parse (a bad `q`) is ignored, as the RFC allows. When identity is
//! refused (`identity;q=0`, or `*;q=0` without an identity entry) and no variant is
//! acceptable, the identity body is sent anyway, as nginx and most servers do, rather
//! than 406.

use std::fmt;
use std::str::FromStr;

/// A content coding the server can send a file in: a precompressed variant beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coding {
    /// Brotli (`FILE.br`).
    Br,
    /// Zstandard (`FILE.zst`).
    Zstd,
    /// gzip (`FILE.gz`).
    Gzip,
}

impl Coding {
    /// Every coding, in the default order of preference (smallest output first).
    pub const ALL: [Coding; 3] = [Coding::Br, Coding::Zstd, Coding::Gzip];

    /// Its token in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Br => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The suffix of its variant's file name.
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
        }
    }

    /// Its place in [`Coding::ALL`].
    pub fn index(self) -> usize {
        match self {
            Coding::Br => 0,
            Coding::Zstd => 1,
            Coding::Gzip => 2,
        }
    }
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

impl FromStr for Coding {
    type Err = String;
    fn from_str(s: &str) -> Result<Coding, String> {
        let t = s.trim();
        Coding::ALL
            .into_iter()
            .find(|c| t.eq_ignore_ascii_case(c.token()))
            .ok_or_else(|| format!("'{s}' is not a coding (br, zstd, gzip)"))
    }
}

/// What the `Accept-Encoding` fields of a request said, for the codings the server
/// knows: each quality in thousandths (0 to 1000), or none when not named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcceptEncoding {
    codings: [Option<u16>; 3],
    star: Option<u16>,
    identity: Option<u16>,
}

/// A `qvalue` (`0`, `0.5`, `1.000`) in thousandths.
fn qvalue(s: &str) -> Option<u16> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths = frac.bytes().chain(std::iter::repeat(b'0')).take(3);
    let frac = thousandths.fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
    match whole {
        "0" => Some(frac),
        "1" if frac == 0 => Some(1000),
        _ => None,
    }
}

impl AcceptEncoding {
    /// Parses one `Accept-Encoding` field; [`AcceptEncoding::add`] for more.
    pub fn parse(value: &str) -> AcceptEncoding {
        let mut a = AcceptEncoding::default();
        a.add(value);
        a
    }

    /// Adds one more field's members (a request may send the field several times).
    pub fn add(&mut self, value: &str) {
        for member in value.split(',') {
            let mut words = member.split(';');
            let name = words.next().unwrap_or("").trim_matches([' ', '\t']);
            if name.is_empty() {
                continue;
            }
            let mut q = Some(1000);
            for param in words {
                let param = param.trim_matches([' ', '\t']);
                if let Some((k, v)) = param.split_once('=') {
                    if k.trim_end().eq_ignore_ascii_case("q") {
                        q = qvalue(v.trim_start());
                    }
                }
            }
            let Some(q) = q else {
                continue;
            };
            let slot = if name == "*" {
                &mut self.star
            } else if name.eq_ignore_ascii_case("identity") {
                &mut self.identity
            } else if name.eq_ignore_ascii_case("x-gzip") {
                &mut self.codings[Coding::Gzip.index()]
            } else {
                match name.parse::<Coding>() {
                    Ok(c) => &mut self.codings[c.index()],
                    Err(_) => continue,
                }
            };
            // Named twice: the better quality counts.
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
    }

    /// The quality of `c` in thousandths: its own entry's, else that of `*`, else 0.
    pub fn quality(&self, c: Coding) -> u16 {
        self.codings[c.index()].or(self.star).unwrap_or(0)
    }

    /// The codings of `offered` (in the server's order of preference) the client
    /// takes, best first, the server's order breaking ties, less any that identity
    /// outranks: of any of them a file has, the first in this order is the one to send
    /// ([`AcceptEncoding::choose`] of those it has). Empty: the identity body.
    pub fn rank(&self, offered: &[Coding]) -> Ranked {
        let identity = self.identity.or(self.star).unwrap_or(0);
        let mut r = Ranked::default();
        for &c in offered.iter().take(Coding::ALL.len()) {
            let q = self.quality(c);
            if q == 0 || q < identity {
                continue;
            }
            // After those of at least its quality: a stable insertion.
            let at = r.codings[..r.len]
                .iter()
                .position(|&o| self.quality(o) < q)
                .unwrap_or(r.len);
            r.codings.copy_within(at..r.len, at + 1);
            r.codings[at] = c;
            r.len += 1;
        }
        r
    }

    /// The coding to send among `available` (the file's variants, in the server's
    /// order of preference), or `None` for the identity body.
    pub fn choose(&self, available: impl IntoIterator<Item = Coding>) -> Option<Coding> {
        let mut best: Option<(Coding, u16)> = None;
        for c in available {
            let q = self.quality(c);
            if q > 0 && best.is_none_or(|(_, bq)| q > bq) {
                best = Some((c, q));
            }
        }
        let (c, q) = best?;
        let identity = self.identity.or(self.star).unwrap_or(0);
        (q >= identity).then_some(c)
    }
}

/// Codings a client takes, best first ([`AcceptEncoding::rank`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ranked {
    codings: [Coding; 3],
    len: usize,
}

impl Default for Ranked {
    fn default() -> Ranked {
        Ranked {
            codings: Coding::ALL,
            len: 0,
        }
    }
}

impl std::ops::Deref for Ranked {
    type Target = [Coding];

    fn deref(&self) -> &[Coding] {
        &self.codings[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::{Br, Gzip, Zstd};

    /// Rules: docs/http.md V2.
    #[test]
    fn the_variant_chosen_for_each_accept_encoding() {
        let all = [Br, Zstd, Gzip];
        for (header, available, want) in [
            ("gzip", &all[..], Some(Gzip)),
            ("gzip, deflate, br", &all, Some(Br)),
            ("gzip, deflate, br, zstd", &all, Some(Br)),
            ("br;q=0.5, gzip", &all, Some(Gzip)),
            ("br;q=1.0, gzip;q=1", &all, Some(Br)),
            ("GZIP", &all, Some(Gzip)),
            ("x-gzip", &all, Some(Gzip)),
            ("deflate", &all, None),
            ("", &all, None),
            ("*", &all, Some(Br)),
            ("*;q=0.1, br;q=0", &all, Some(Zstd)),
            ("*;q=0", &all, None),
            ("gzip;q=0", &all, None),
            ("identity", &all, None),
            ("gzip;q=0.5, identity", &all, None),
            ("gzip, identity;q=0.5", &all, Some(Gzip)),
            ("gzip, identity;q=0", &all, Some(Gzip)),
            ("identity;q=0", &all, None),
            ("br, gzip", &[Gzip], Some(Gzip)),
            ("br", &[Gzip], None),
            ("zstd;q=0.9, gzip;q=0.8", &[Gzip, Zstd], Some(Zstd)),
            ("gzip;q=2", &all, None),
            ("gzip;q=0.5555", &all, None),
            ("gzip ; q=0.5 , br;Q=0.4", &all, Some(Gzip)),
            ("gzip;level=9", &all, Some(Gzip)),
            (" , ,gzip", &all, Some(Gzip)),
        ] {
            let got = AcceptEncoding::parse(header).choose(available.iter().copied());
            assert_eq!(got, want, "Accept-Encoding: {header:?} with {available:?}");
        }
    }

    /// The ranking agrees with the choice: for any field, any order the server prefers
    /// and any variants a file has, the first ranked coding the file has is the one
    /// chosen. Rules: docs/http.md V2.
    #[test]
    fn the_first_ranked_coding_a_file_has_is_the_one_chosen() {
        let members = [
            "gzip",
            "br",
            "zstd",
            "x-gzip",
            "*",
            "identity",
            "deflate",
            "gzip;q=0.5",
            "br;q=0.5",
            "zstd;q=0.9",
            "*;q=0.1",
            "*;q=0",
            "identity;q=0",
            "identity;q=0.5",
            "br;q=0",
            "gzip;q=1",
            "zstd;q=0.5",
        ];
        let orders = [
            [Br, Zstd, Gzip],
            [Gzip, Br, Zstd],
            [Zstd, Gzip, Br],
            [Gzip, Zstd, Br],
        ];
        let mut seed = 3u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..5000 {
            let header: Vec<&str> = (0..next(5))
                .map(|_| members[next(members.len() as u64) as usize])
                .collect();
            let ae = AcceptEncoding::parse(&header.join(", "));
            let order = orders[next(4) as usize];
            let offered = &order[..1 + next(3) as usize];
            let ranked = ae.rank(offered);
            for mask in 0..8u8 {
                let has: Vec<Coding> = offered
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, &c)| c)
                    .collect();
                assert_eq!(
                    ranked.iter().copied().find(|c| has.contains(c)),
                    ae.choose(has.iter().copied()),
                    "{header:?}, offered {offered:?}, has {has:?}"
                );
            }
        }
        assert_eq!(
            &*AcceptEncoding::parse("gzip, br;q=0.5, zstd").rank(&[Br, Zstd, Gzip]),
            [Zstd, Gzip, Br]
        );
        assert!(AcceptEncoding::parse("gzip;q=0.5, identity")
            .rank(&Coding::ALL)
            .is_empty());
    }

    #[test]
    fn qvalues_and_repeated_fields() {
        assert_eq!(qvalue("0"), Some(0));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("0.055"), Some(55));
        assert_eq!(qvalue("1"), Some(1000));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("1.001"), None);
        assert_eq!(qvalue(".5"), None);
        assert_eq!(qvalue("0.5x"), None);
        let mut a = AcceptEncoding::parse("gzip;q=0.2");
        a.add("br;q=0.3, gzip;q=0.4");
        assert_eq!(
            (a.quality(Gzip), a.quality(Br), a.quality(Zstd)),
            (400, 300, 0)
        );
        assert_eq!("ZSTD".parse::<Coding>(), Ok(Zstd));
        assert!("deflate".parse::<Coding>().is_err());
    }
}
