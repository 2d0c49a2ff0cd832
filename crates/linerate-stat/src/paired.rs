//! The paired reading of two interleaved sample sets: value `i` of A and value `i` of B
//! come from the same round, so on a machine whose speed drifts between rounds their
//! ratio is steadier than either column. It says how often B beat A, the two-sided sign
//! test p of that count (ties count against B), and the geometric mean and range of B/A.
//! Student's t over the unpaired columns stays the primary verdict; this is the second
//! reading.

use std::str::FromStr;

use serde::Serialize;

/// Which direction of a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Bigger is better (requests/s, throughput).
    Higher,
    /// Smaller is better (CPU per request, latency).
    Lower,
}

impl FromStr for Better {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "higher" => Ok(Better::Higher),
            "lower" => Ok(Better::Lower),
            _ => Err(format!("'{s}': give higher or lower")),
        }
    }
}

/// The paired reading of B against A.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Paired {
    /// Rounds in which B was strictly better than A.
    pub wins: usize,
    /// Rounds (pairs).
    pub rounds: usize,
    /// Two-sided sign test p of `wins` out of `rounds` (capped at 1).
    pub sign_test_p: f64,
    /// Geometric mean of B/A.
    pub geometric_mean: f64,
    /// Smallest B/A.
    pub min_ratio: f64,
    /// Largest B/A.
    pub max_ratio: f64,
}

/// Samples that cannot be paired.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PairedError {
    /// A and B hold different numbers of samples.
    #[error("{a} and {b} samples: the rounds do not pair up")]
    LengthMismatch {
        /// Samples of A.
        a: usize,
        /// Samples of B.
        b: usize,
    },
    /// No samples at all.
    #[error("no samples")]
    Empty,
    /// A sample is zero, negative or not finite.
    #[error("round {round}: samples must be positive")]
    NotPositive {
        /// 1-based round.
        round: usize,
    },
}

/// The paired reading of `b` against `a` (`a[i]` and `b[i]` from round `i`), `better`
/// saying which direction wins.
pub fn paired(a: &[f64], b: &[f64], better: Better) -> Result<Paired, PairedError> {
    if a.len() != b.len() {
        return Err(PairedError::LengthMismatch {
            a: a.len(),
            b: b.len(),
        });
    }
    if a.is_empty() {
        return Err(PairedError::Empty);
    }
    let (mut wins, mut log_sum) = (0, 0.0);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let positive = |v: f64| v > 0.0 && v.is_finite();
        if !positive(x) || !positive(y) {
            return Err(PairedError::NotPositive { round: i + 1 });
        }
        let r = y / x;
        log_sum += r.ln();
        lo = lo.min(r);
        hi = hi.max(r);
        let won = match better {
            Better::Higher => r > 1.0,
            Better::Lower => r < 1.0,
        };
        wins += usize::from(won);
    }
    let n = a.len();
    Ok(Paired {
        wins,
        rounds: n,
        sign_test_p: sign_test_p(wins, n),
        geometric_mean: (log_sum / n as f64).exp(),
        min_ratio: lo,
        max_ratio: hi,
    })
}

/// Two-sided binomial tail of the smaller of `wins` and `rounds - wins` at p = 1/2,
/// summed in f64 as binomial coefficients over 2^n (exact for the tens of rounds a
/// benchmark runs), capped at 1.
fn sign_test_p(wins: usize, rounds: usize) -> f64 {
    let k = wins.min(rounds - wins);
    let n = rounds as f64;
    let (mut c, mut tail) = (1.0_f64, 0.0_f64);
    for i in 0..=k {
        tail += c;
        let i = i as f64;
        c = c * (n - i) / (i + 1.0);
    }
    (2.0 * tail / 2.0_f64.powf(n)).min(1.0)
}

/// The one-line reading, B named `b` and A named `a` (no newline):
/// `paired: B better than A in W of N rounds (sign test p = P); B/A geometric mean G,
/// range LO-HI`.
pub fn format_paired(p: &Paired, a: &str, b: &str) -> String {
    format!(
        "paired: {b} better than {a} in {} of {} rounds (sign test p = {:.3}); \
         {b}/{a} geometric mean {:.3}, range {:.3}-{:.3}",
        p.wins, p.rounds, p.sign_test_p, p.geometric_mean, p.min_ratio, p.max_ratio
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(a: &[f64], b: &[f64], better: Better) -> String {
        format_paired(&paired(a, b, better).unwrap(), "a.rps", "b.rps")
    }

    #[test]
    fn every_round_won_alternating_speeds() {
        let a = [100.0, 200.0, 100.0, 200.0, 100.0, 200.0, 100.0, 200.0];
        let b = a.map(|x| x * 1.1);
        assert_eq!(
            line(&a, &b, Better::Higher),
            "paired: b.rps better than a.rps in 8 of 8 rounds (sign test p = 0.008); \
             b.rps/a.rps geometric mean 1.100, range 1.100-1.100"
        );
        // 2 * 1/256.
        let p = paired(&a, &b, Better::Higher).unwrap();
        assert_eq!(p.sign_test_p, 2.0 / 256.0);
        assert_eq!((p.wins, p.rounds), (8, 8));
    }

    #[test]
    fn lower_is_better_one_of_six() {
        let a = [10.0; 6];
        let b = [5.0, 20.0, 20.0, 20.0, 20.0, 20.0];
        assert_eq!(
            line(&a, &b, Better::Lower),
            "paired: b.rps better than a.rps in 1 of 6 rounds (sign test p = 0.219); \
             b.rps/a.rps geometric mean 1.587, range 0.500-2.000"
        );
        // 2 * P(X <= 1) = 2 * 7/64.
        let p = paired(&a, &b, Better::Lower).unwrap();
        assert_eq!(p.sign_test_p, 14.0 / 64.0);
        assert_eq!((p.min_ratio, p.max_ratio), (0.5, 2.0));
        // The same data read the other way: 5 of 6 higher, the same two-sided p.
        let q = paired(&a, &b, Better::Higher).unwrap();
        assert_eq!((q.wins, q.sign_test_p), (5, 14.0 / 64.0));
    }

    #[test]
    fn ties_count_against_b_and_p_is_capped_at_one() {
        let p = paired(&[1.0, 2.0], &[1.0, 3.0], Better::Higher).unwrap();
        assert_eq!((p.wins, p.rounds, p.sign_test_p), (1, 2, 1.0));
        let p = paired(&[4.0; 3], &[4.0; 3], Better::Lower).unwrap();
        assert_eq!((p.wins, p.sign_test_p, p.geometric_mean), (0, 0.25, 1.0));
    }

    #[test]
    fn p_matches_the_binomial_tail() {
        // 9 of 10: 2 * (1 + 10) / 1024; 4 of 10: 2 * (1 + 10 + 45 + 210 + 210) / 1024,
        // as the benchmark logs of the script it replaced read.
        assert_eq!(format!("{:.3}", sign_test_p(9, 10)), "0.021");
        assert_eq!(format!("{:.3}", sign_test_p(8, 10)), "0.109");
        assert_eq!(format!("{:.3}", sign_test_p(4, 10)), "0.754");
        assert_eq!(format!("{:.3}", sign_test_p(10, 10)), "0.002");
        assert_eq!(format!("{:.3}", sign_test_p(2, 6)), "0.688");
        assert_eq!(sign_test_p(0, 1), 1.0);
    }

    #[test]
    fn unpairable_samples_are_refused() {
        assert_eq!(
            paired(&[1.0, 2.0], &[1.0], Better::Higher),
            Err(PairedError::LengthMismatch { a: 2, b: 1 })
        );
        assert_eq!(paired(&[], &[], Better::Higher), Err(PairedError::Empty));
        assert_eq!(
            paired(&[1.0, 0.0], &[1.0, 1.0], Better::Higher),
            Err(PairedError::NotPositive { round: 2 })
        );
        assert_eq!(
            paired(&[1.0], &[-1.0], Better::Lower),
            Err(PairedError::NotPositive { round: 1 })
        );
        assert_eq!(
            paired(&[f64::NAN], &[1.0], Better::Lower),
            Err(PairedError::NotPositive { round: 1 })
        );
    }

    #[test]
    fn directions_parse() {
        assert_eq!("higher".parse::<Better>(), Ok(Better::Higher));
        assert_eq!("lower".parse::<Better>(), Ok(Better::Lower));
        assert!("bigger".parse::<Better>().is_err());
    }
}
