//! C's `%g` conversion as glibc prints it, which ministat's output is made of.

/// `%.{precision}g` of `v`: `precision` significant digits, fixed or exponent notation by
/// C's rule, trailing zeros removed; `inf`, `-inf`, `nan`, `-nan` (by the sign bit).
pub fn format_g(v: f64, precision: usize) -> String {
    let p = precision.max(1);
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's {:e} rounds correctly (ties to even), as glibc does.
    let e = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = e.split_once('e').expect("{:e} always has an exponent");
    let x: i32 = exp.parse().expect("{:e} exponent is an integer");
    if x < -4 || x >= p as i32 {
        let m = trim_fraction(mantissa);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", x.abs())
    } else {
        let decimals = (p as i32 - 1 - x) as usize;
        trim_fraction(&format!("{v:.decimals$}")).to_string()
    }
}

/// `%{width}.{precision}g`: [`format_g`] right-aligned in at least `width` columns.
pub fn format_g_width(v: f64, width: usize, precision: usize) -> String {
    format!("{:>width$}", format_g(v, precision))
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_printf() {
        let cases: &[(f64, usize, &str)] = &[
            (0.004, 6, "0.004"),
            (0.00195671234, 6, "0.00195671"),
            (2.954209748, 6, "2.95421"),
            (0.0018165902, 8, "0.0018165902"),
            (238.047614, 8, "238.04761"),
            (100000.0, 6, "100000"),
            (1000000.0, 6, "1e+06"),
            (0.0001, 6, "0.0001"),
            (0.00001, 6, "1e-05"),
            (-1.2345678901e100, 8, "-1.2345679e+100"),
            (0.5, 6, "0.5"),
            (2.5, 1, "2"),
            (3.5, 1, "4"),
            (123456789.0, 8, "1.2345679e+08"),
            (-0.0, 6, "-0"),
            (f64::INFINITY, 6, "inf"),
            (-f64::NAN, 6, "-nan"),
            (f64::NAN.copysign(1.0), 6, "nan"),
            (1.0, 8, "1"),
            (99999.95, 6, "99999.9"),
            (999999.5, 6, "1e+06"),
        ];
        for &(v, p, want) in cases {
            assert_eq!(format_g(v, p), want, "{v} %.{p}g");
        }
        assert_eq!(format_g_width(5.0, 13, 8), "            5");
    }
}
