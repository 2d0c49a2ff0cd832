//! Summaries and Student's t comparisons, computed operation by operation as ministat
//! computes them so that every printed digit agrees.

use serde::Serialize;

/// The confidence levels of the t table, in percent.
pub const CONFIDENCE_LEVELS: [f64; 6] = [80.0, 90.0, 95.0, 98.0, 99.0, 99.5];

/// Two-sided Student's t critical values: row 0 for more than 100 degrees of freedom,
/// row n for n; columns are [`CONFIDENCE_LEVELS`]. The standard table, three decimals,
/// as ministat carries it.
// 2.718 at df 11 is the table's value, not an approximation of e.
#[allow(clippy::approx_constant)]
pub const T_TABLE: [[f64; 6]; 101] = [
    [1.282, 1.645, 1.960, 2.326, 2.576, 3.090], // df > 100
    [3.078, 6.314, 12.706, 31.821, 63.657, 318.313], // df 1
    [1.886, 2.920, 4.303, 6.965, 9.925, 22.327], // df 2
    [1.638, 2.353, 3.182, 4.541, 5.841, 10.215], // df 3
    [1.533, 2.132, 2.776, 3.747, 4.604, 7.173], // df 4
    [1.476, 2.015, 2.571, 3.365, 4.032, 5.893], // df 5
    [1.440, 1.943, 2.447, 3.143, 3.707, 5.208], // df 6
    [1.415, 1.895, 2.365, 2.998, 3.499, 4.782], // df 7
    [1.397, 1.860, 2.306, 2.896, 3.355, 4.499], // df 8
    [1.383, 1.833, 2.262, 2.821, 3.250, 4.296], // df 9
    [1.372, 1.812, 2.228, 2.764, 3.169, 4.143], // df 10
    [1.363, 1.796, 2.201, 2.718, 3.106, 4.024], // df 11
    [1.356, 1.782, 2.179, 2.681, 3.055, 3.929], // df 12
    [1.350, 1.771, 2.160, 2.650, 3.012, 3.852], // df 13
    [1.345, 1.761, 2.145, 2.624, 2.977, 3.787], // df 14
    [1.341, 1.753, 2.131, 2.602, 2.947, 3.733], // df 15
    [1.337, 1.746, 2.120, 2.583, 2.921, 3.686], // df 16
    [1.333, 1.740, 2.110, 2.567, 2.898, 3.646], // df 17
    [1.330, 1.734, 2.101, 2.552, 2.878, 3.610], // df 18
    [1.328, 1.729, 2.093, 2.539, 2.861, 3.579], // df 19
    [1.325, 1.725, 2.086, 2.528, 2.845, 3.552], // df 20
    [1.323, 1.721, 2.080, 2.518, 2.831, 3.527], // df 21
    [1.321, 1.717, 2.074, 2.508, 2.819, 3.505], // df 22
    [1.319, 1.714, 2.069, 2.500, 2.807, 3.485], // df 23
    [1.318, 1.711, 2.064, 2.492, 2.797, 3.467], // df 24
    [1.316, 1.708, 2.060, 2.485, 2.787, 3.450], // df 25
    [1.315, 1.706, 2.056, 2.479, 2.779, 3.435], // df 26
    [1.314, 1.703, 2.052, 2.473, 2.771, 3.421], // df 27
    [1.313, 1.701, 2.048, 2.467, 2.763, 3.408], // df 28
    [1.311, 1.699, 2.045, 2.462, 2.756, 3.396], // df 29
    [1.310, 1.697, 2.042, 2.457, 2.750, 3.385], // df 30
    [1.309, 1.696, 2.040, 2.453, 2.744, 3.375], // df 31
    [1.309, 1.694, 2.037, 2.449, 2.738, 3.365], // df 32
    [1.308, 1.692, 2.035, 2.445, 2.733, 3.356], // df 33
    [1.307, 1.691, 2.032, 2.441, 2.728, 3.348], // df 34
    [1.306, 1.690, 2.030, 2.438, 2.724, 3.340], // df 35
    [1.306, 1.688, 2.028, 2.434, 2.719, 3.333], // df 36
    [1.305, 1.687, 2.026, 2.431, 2.715, 3.326], // df 37
    [1.304, 1.686, 2.024, 2.429, 2.712, 3.319], // df 38
    [1.304, 1.685, 2.023, 2.426, 2.708, 3.313], // df 39
    [1.303, 1.684, 2.021, 2.423, 2.704, 3.307], // df 40
    [1.303, 1.683, 2.020, 2.421, 2.701, 3.301], // df 41
    [1.302, 1.682, 2.018, 2.418, 2.698, 3.296], // df 42
    [1.302, 1.681, 2.017, 2.416, 2.695, 3.291], // df 43
    [1.301, 1.680, 2.015, 2.414, 2.692, 3.286], // df 44
    [1.301, 1.679, 2.014, 2.412, 2.690, 3.281], // df 45
    [1.300, 1.679, 2.013, 2.410, 2.687, 3.277], // df 46
    [1.300, 1.678, 2.012, 2.408, 2.685, 3.273], // df 47
    [1.299, 1.677, 2.011, 2.407, 2.682, 3.269], // df 48
    [1.299, 1.677, 2.010, 2.405, 2.680, 3.265], // df 49
    [1.299, 1.676, 2.009, 2.403, 2.678, 3.261], // df 50
    [1.298, 1.675, 2.008, 2.402, 2.676, 3.258], // df 51
    [1.298, 1.675, 2.007, 2.400, 2.674, 3.255], // df 52
    [1.298, 1.674, 2.006, 2.399, 2.672, 3.251], // df 53
    [1.297, 1.674, 2.005, 2.397, 2.670, 3.248], // df 54
    [1.297, 1.673, 2.004, 2.396, 2.668, 3.245], // df 55
    [1.297, 1.673, 2.003, 2.395, 2.667, 3.242], // df 56
    [1.297, 1.672, 2.002, 2.394, 2.665, 3.239], // df 57
    [1.296, 1.672, 2.002, 2.392, 2.663, 3.237], // df 58
    [1.296, 1.671, 2.001, 2.391, 2.662, 3.234], // df 59
    [1.296, 1.671, 2.000, 2.390, 2.660, 3.232], // df 60
    [1.296, 1.670, 2.000, 2.389, 2.659, 3.229], // df 61
    [1.295, 1.670, 1.999, 2.388, 2.657, 3.227], // df 62
    [1.295, 1.669, 1.998, 2.387, 2.656, 3.225], // df 63
    [1.295, 1.669, 1.998, 2.386, 2.655, 3.223], // df 64
    [1.295, 1.669, 1.997, 2.385, 2.654, 3.220], // df 65
    [1.295, 1.668, 1.997, 2.384, 2.652, 3.218], // df 66
    [1.294, 1.668, 1.996, 2.383, 2.651, 3.216], // df 67
    [1.294, 1.668, 1.995, 2.382, 2.650, 3.214], // df 68
    [1.294, 1.667, 1.995, 2.382, 2.649, 3.213], // df 69
    [1.294, 1.667, 1.994, 2.381, 2.648, 3.211], // df 70
    [1.294, 1.667, 1.994, 2.380, 2.647, 3.209], // df 71
    [1.293, 1.666, 1.993, 2.379, 2.646, 3.207], // df 72
    [1.293, 1.666, 1.993, 2.379, 2.645, 3.206], // df 73
    [1.293, 1.666, 1.993, 2.378, 2.644, 3.204], // df 74
    [1.293, 1.665, 1.992, 2.377, 2.643, 3.202], // df 75
    [1.293, 1.665, 1.992, 2.376, 2.642, 3.201], // df 76
    [1.293, 1.665, 1.991, 2.376, 2.641, 3.199], // df 77
    [1.292, 1.665, 1.991, 2.375, 2.640, 3.198], // df 78
    [1.292, 1.664, 1.990, 2.374, 2.640, 3.197], // df 79
    [1.292, 1.664, 1.990, 2.374, 2.639, 3.195], // df 80
    [1.292, 1.664, 1.990, 2.373, 2.638, 3.194], // df 81
    [1.292, 1.664, 1.989, 2.373, 2.637, 3.193], // df 82
    [1.292, 1.663, 1.989, 2.372, 2.636, 3.191], // df 83
    [1.292, 1.663, 1.989, 2.372, 2.636, 3.190], // df 84
    [1.292, 1.663, 1.988, 2.371, 2.635, 3.189], // df 85
    [1.291, 1.663, 1.988, 2.370, 2.634, 3.188], // df 86
    [1.291, 1.663, 1.988, 2.370, 2.634, 3.187], // df 87
    [1.291, 1.662, 1.987, 2.369, 2.633, 3.185], // df 88
    [1.291, 1.662, 1.987, 2.369, 2.632, 3.184], // df 89
    [1.291, 1.662, 1.987, 2.368, 2.632, 3.183], // df 90
    [1.291, 1.662, 1.986, 2.368, 2.631, 3.182], // df 91
    [1.291, 1.662, 1.986, 2.368, 2.630, 3.181], // df 92
    [1.291, 1.661, 1.986, 2.367, 2.630, 3.180], // df 93
    [1.291, 1.661, 1.986, 2.367, 2.629, 3.179], // df 94
    [1.291, 1.661, 1.985, 2.366, 2.629, 3.178], // df 95
    [1.290, 1.661, 1.985, 2.366, 2.628, 3.177], // df 96
    [1.290, 1.661, 1.985, 2.365, 2.627, 3.176], // df 97
    [1.290, 1.661, 1.984, 2.365, 2.627, 3.175], // df 98
    [1.290, 1.660, 1.984, 2.365, 2.626, 3.175], // df 99
    [1.290, 1.660, 1.984, 2.364, 2.626, 3.174], // df 100
];

/// One of the confidence levels of the t table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Confidence(usize);

impl Confidence {
    /// The level `percent` (80, 90, 95, 98, 99 or 99.5), if the table has it.
    pub fn from_percent(percent: f64) -> Option<Confidence> {
        CONFIDENCE_LEVELS
            .iter()
            .position(|&c| c == percent)
            .map(Confidence)
    }

    /// The level in percent.
    pub fn percent(self) -> f64 {
        CONFIDENCE_LEVELS[self.0]
    }

    /// The critical t value for `df` degrees of freedom.
    pub fn t(self, df: usize) -> f64 {
        if df > 100 {
            T_TABLE[0][self.0]
        } else {
            T_TABLE[df][self.0]
        }
    }
}

impl Default for Confidence {
    fn default() -> Self {
        Confidence(2)
    }
}

/// A named data set of at least three values, sorted, with ministat's running sums
/// (taken in input order).
#[derive(Clone, Debug, PartialEq)]
pub struct DataSet {
    name: String,
    points: Vec<f64>,
    sy: f64,
    syy: f64,
}

impl DataSet {
    /// A data set of `values` in input order; `None` for fewer than three.
    pub fn from_values(name: &str, values: Vec<f64>) -> Option<DataSet> {
        if values.len() < 3 {
            return None;
        }
        let mut sy = 0.0;
        let mut syy = 0.0;
        for &a in &values {
            sy += a;
            syy += a * a;
        }
        let mut points = values;
        merge_sort(&mut points);
        Some(DataSet {
            name: name.to_string(),
            points,
            sy,
            syy,
        })
    }

    /// The name shown in the legend.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The values, ascending.
    pub fn points(&self) -> &[f64] {
        &self.points
    }

    /// Number of values.
    pub fn n(&self) -> usize {
        self.points.len()
    }

    /// Smallest value.
    pub fn min(&self) -> f64 {
        self.points[0]
    }

    /// Largest value.
    pub fn max(&self) -> f64 {
        self.points[self.n() - 1]
    }

    /// The value at n/2 of the sorted values (the upper middle one for even n).
    pub fn median(&self) -> f64 {
        self.points[self.n() / 2]
    }

    /// Arithmetic mean.
    pub fn avg(&self) -> f64 {
        self.sy / self.n() as f64
    }

    /// Sample variance (n - 1), not clamped at zero.
    pub fn var(&self) -> f64 {
        let n = self.n() as f64;
        let t1 = self.sy * self.sy;
        let t2 = t1 / n;
        let t3 = self.syy - t2;
        t3 / (n - 1.0)
    }

    /// Sample standard deviation.
    pub fn stddev(&self) -> f64 {
        self.var().sqrt()
    }
}

/// glibc's qsort (a top-down merge sort) with ministat's comparator, so that even NaNs
/// end where ministat puts them.
fn merge_sort(v: &mut [f64]) {
    fn cmp(a: f64, b: f64) -> i32 {
        if a < b {
            -1
        } else if a > b {
            1
        } else {
            0
        }
    }
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    merge_sort(&mut v[..n1]);
    merge_sort(&mut v[n1..]);
    let mut out = Vec::with_capacity(n);
    let (mut i, mut j) = (0, n1);
    while i < n1 && j < n {
        if cmp(v[i], v[j]) <= 0 {
            out.push(v[i]);
            i += 1;
        } else {
            out.push(v[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&v[i..n1]);
    out.extend_from_slice(&v[j..n]);
    v.copy_from_slice(&out);
}

/// Set `b` compared with set `a` by Student's t with pooled variance.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Confidence level, percent.
    pub confidence: f64,
    /// avg(b) - avg(a).
    pub difference: f64,
    /// Half-width of the confidence interval of the difference.
    pub interval: f64,
    /// The difference in percent of avg(a).
    pub percent: f64,
    /// The interval in percent of avg(a).
    pub percent_interval: f64,
    /// Pooled standard deviation.
    pub pooled_s: f64,
    /// True when |difference| exceeds the interval: a difference is proven.
    pub significant: bool,
}

/// Compares `b` against `a` (ministat's order: `a` is the first file) at `conf`.
pub fn compare(a: &DataSet, b: &DataSet, conf: Confidence) -> Comparison {
    let df = b.n() + a.n() - 2;
    let t = conf.t(df);
    let mut spool = (b.n() - 1) as f64 * b.var();
    spool += (a.n() - 1) as f64 * a.var();
    spool /= df as f64;
    spool = spool.sqrt();
    let s = spool * (1.0 / b.n() as f64 + 1.0 / a.n() as f64).sqrt();
    let d = b.avg() - a.avg();
    let e = t * s;
    Comparison {
        confidence: conf.percent(),
        difference: d,
        interval: e,
        percent: d * 100.0 / a.avg(),
        percent_interval: e * 100.0 / a.avg(),
        pooled_s: spool,
        significant: d.abs() > e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_004_style_difference() {
        let a = DataSet::from_values("before", vec![0.133, 0.134, 0.136, 0.137, 0.137]).unwrap();
        let b = DataSet::from_values("after", vec![0.139, 0.139, 0.139, 0.140, 0.140]).unwrap();
        let c = compare(&a, &b, Confidence::default());
        assert!(c.significant);
        assert_eq!(crate::format_g(c.difference, 6), "0.004");
        assert_eq!(crate::format_g(c.interval, 6), "0.00195671");
        assert_eq!(crate::format_g(c.percent, 6), "2.95421");
        assert_eq!(crate::format_g(c.pooled_s, 6), "0.00134164");
    }

    #[test]
    fn median_is_the_upper_middle() {
        let d = DataSet::from_values("x", vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(d.median(), 3.0);
        assert!(DataSet::from_values("x", vec![1.0, 2.0]).is_none());
    }

    #[test]
    fn levels() {
        assert!(Confidence::from_percent(77.0).is_none());
        assert_eq!(Confidence::from_percent(99.5).unwrap().t(4), 7.173);
        assert_eq!(Confidence::default().t(1000), 1.960);
    }
}
