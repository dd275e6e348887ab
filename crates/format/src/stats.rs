//! Statistics of repeated measurements, in one place for every crate: the summary
//! (mean, median, min, max, sample standard deviation, coefficient of variation, 95%
//! confidence interval of the mean), the median alone, Welch's interval of a
//! difference of two means, the delta method's interval of a ratio of two means, and
//! the degradation of a value against a reference.
//!
//! Benchmarks are repeated a handful of times, so the interval uses Student's t with
//! `n - 1` degrees of freedom (a table up to 30, an expansion beyond), not the normal
//! approximation (which would understate the interval by 2.5x at n = 3, and by 1% even
//! at n = 122).

use serde::Serialize;

/// Two-sided 95% critical values of Student's t (the 0.975 quantile), df = 1..=30.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];
/// The 0.975 quantile of the standard normal distribution: Student's t as df -> inf.
const Z_975: f64 = 1.959_963_984_540_054;

/// Summary of a sample of measurements.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (mean of the two middle values for even n).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Sample standard deviation (n - 1 in the denominator); 0 for a single value,
    /// whose spread is unknown, not 0 ([`spread_known`]).
    pub stddev: f64,
    /// Coefficient of variation: stddev / mean (a fraction, not percent); 0 if mean is 0.
    pub cv: f64,
    /// Lower bound of the 95% confidence interval of the mean (Student t).
    pub ci95_low: f64,
    /// Upper bound of the 95% confidence interval of the mean (Student t).
    pub ci95_high: f64,
}

impl Summary {
    /// Summarises `values`; `None` for an empty sample or one holding a NaN.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let n = values.len();
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let median = median_of_sorted(&sorted);
        let stddev = if n > 1 {
            (sorted.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let half = if n > 1 {
            t_critical_95(n - 1) * stddev / (n as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            n,
            mean,
            median,
            min: sorted[0],
            max: sorted[n - 1],
            stddev,
            cv: if mean != 0.0 {
                stddev / mean.abs()
            } else {
                0.0
            },
            ci95_low: mean - half,
            ci95_high: mean + half,
        })
    }
}

/// Whether `n` repetitions show their spread: a single value has no standard
/// deviation, CV or confidence interval (the 0 a [`Summary`] holds for it is unknown,
/// not "no noise"), so neither its noise nor the significance of a difference to it
/// can be judged.
pub fn spread_known(n: usize) -> bool {
    n >= 2
}

/// Median of `values` (mean of the two middle values for an even count); NaN when
/// empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    median_of_sorted(&sorted)
}

/// Quantile `q` (0 to 1, clamped) of an already sorted slice, linearly interpolated
/// between the closest ranks (Hyndman and Fan's type 7, numpy's and R's default): at
/// position `h = q (n - 1)` from 0, `x[floor h] + (h - floor h) (x[floor h + 1] -
/// x[floor h])`. So `q = 0` is the minimum, 1 the maximum and 0.5 the [`median`];
/// of [1, 2, 3, 4], the 0.25 quantile is 1.75 and the 0.05 quantile 1.15. NaN when
/// empty.
pub fn quantile_of_sorted(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let pos = q.clamp(0.0, 1.0) * last as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    match sorted.get(i + 1) {
        Some(next) if frac > 0.0 => sorted[i] + (next - sorted[i]) * frac,
        _ => sorted[i.min(last)],
    }
}

/// Median of an already sorted slice; NaN when empty.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Degradation of `value` against `reference` in percent, positive = worse:
/// `(v - r) / r * 100` when lower is better (runtimes, latencies: the thesis's
/// definition), `(r - v) / r * 100` when higher is better (throughputs: Volpert's
/// I_plr in percent).
pub fn degradation_pct(reference: f64, value: f64, higher_is_better: bool) -> f64 {
    if higher_is_better {
        (reference - value) / reference * 100.0
    } else {
        (value - reference) / reference * 100.0
    }
}

/// Welch's 95% confidence interval of the difference of means `mean(b) - mean(a)` of two
/// independent samples with possibly different variances, with the Welch-Satterthwaite
/// degrees of freedom (rounded down, so the interval errs wide). `None` when either
/// sample has fewer than two values or holds a NaN, or both have zero variance.
pub fn welch_ci95(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    Summary::of(a)?.welch_ci95(&Summary::of(b)?)
}

impl Summary {
    /// [`welch_ci95`] of `mean(other) - mean(self)` from the two summaries.
    pub fn welch_ci95(&self, other: &Summary) -> Option<(f64, f64)> {
        let (sa, sb) = (self, other);
        if sa.n < 2 || sb.n < 2 {
            return None;
        }
        let (va, vb) = (
            sa.stddev.powi(2) / sa.n as f64,
            sb.stddev.powi(2) / sb.n as f64,
        );
        let se2 = va + vb;
        if se2 == 0.0 {
            return None;
        }
        let df = se2.powi(2) / (va.powi(2) / (sa.n - 1) as f64 + vb.powi(2) / (sb.n - 1) as f64);
        let half = t_critical_95(df.floor() as usize) * se2.sqrt();
        let diff = sb.mean - sa.mean;
        Some((diff - half, diff + half))
    }
}

/// Welch's 95% interval of [`degradation_pct`] of `value` against `reference`: the
/// interval of the difference of means over the reference mean, in percent, in the
/// metric's direction (positive = worse). The reference mean's own uncertainty is not
/// propagated. `None` where [`Summary::welch_ci95`] has none or the reference mean is 0.
pub fn degradation_ci95(
    reference: &Summary,
    value: &Summary,
    higher_is_better: bool,
) -> Option<(f64, f64)> {
    if reference.mean == 0.0 {
        return None;
    }
    let sign = if higher_is_better { -1.0 } else { 1.0 };
    let (lo, hi) = reference.welch_ci95(value)?;
    let (lo, hi) = (
        sign * lo / reference.mean * 100.0,
        sign * hi / reference.mean * 100.0,
    );
    Some((lo.min(hi), lo.max(hi)))
}

/// The 95% interval of the ratio of two independent means, `mean(num) / mean(den)`, by
/// the delta method: the ratio's relative variance is the sum of the two means'
/// relative variances, `se(R)^2 = R^2 (s_n^2 / (n_n m_n^2) + s_d^2 / (n_d m_d^2))`, with
/// the Welch-Satterthwaite degrees of freedom of those two terms (rounded down, so
/// the interval errs wide), `R -+ t * se(R)`. Both means' uncertainty is propagated
/// (unlike [`degradation_ci95`], which divides by a fixed reference). For two runs
/// whose repetitions are not paired (a VM's and a metal host's). `None` when either
/// sample has fewer than two values, a mean is 0 or both variances are 0.
pub fn ratio_ci95(num: &Summary, den: &Summary) -> Option<(f64, f64)> {
    if num.n < 2 || den.n < 2 || num.mean == 0.0 || den.mean == 0.0 {
        return None;
    }
    let rel = |s: &Summary| s.stddev.powi(2) / (s.n as f64 * s.mean.powi(2));
    let (un, ud) = (rel(num), rel(den));
    let sum = un + ud;
    if sum == 0.0 {
        return None;
    }
    let df = sum.powi(2) / (un.powi(2) / (num.n - 1) as f64 + ud.powi(2) / (den.n - 1) as f64);
    let ratio = num.mean / den.mean;
    let half = t_critical_95(df.floor() as usize) * ratio.abs() * sum.sqrt();
    Some((ratio - half, ratio + half))
}

/// Two-sided 95% critical value of Student's t for `df` degrees of freedom (df >= 1;
/// df = 0 is treated as 1): the table for df <= 30, above that the Cornish-Fisher
/// expansion of t in powers of 1/df around the normal quantile (Abramowitz and Stegun
/// 26.7.5, Hill 1970, terms to 1/df^4), whose error there is below 1e-5: t(121) =
/// 1.9798, t(1000) = 1.9623, tending to 1.95996.
pub fn t_critical_95(df: usize) -> f64 {
    if df <= T_975.len() {
        return T_975[df.max(1) - 1];
    }
    let z = Z_975;
    let z2 = z * z;
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    let v = 1.0 / df as f64;
    z + v * (g1 + v * (g2 + v * (g3 + v * g4)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_the_closest_ranks() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let q = |p| quantile_of_sorted(&x, p);
        assert_eq!((q(0.0), q(1.0), q(0.5)), (1.0, 4.0, median(&x)));
        assert!((q(0.25) - 1.75).abs() < 1e-12);
        assert!((q(0.05) - 1.15).abs() < 1e-12);
        assert!((q(0.95) - 3.85).abs() < 1e-12);
        assert_eq!(quantile_of_sorted(&[7.0], 0.3), 7.0);
        assert!(quantile_of_sorted(&[], 0.5).is_nan());
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    /// Values 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample variance 32/7,
    /// stddev 2.138089935, median 4.5; t(7) = 2.365, half width 2.365 * s / sqrt(8).
    #[test]
    fn summary_matches_hand_computation() {
        let s = Summary::of(&[9.0, 2.0, 4.0, 4.0, 5.0, 4.0, 5.0, 7.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0));
        assert!(close(s.median, 4.5));
        assert!(close(s.min, 2.0));
        assert!(close(s.max, 9.0));
        let sd = (32.0f64 / 7.0).sqrt();
        assert!(close(s.stddev, sd));
        assert!(close(s.cv, sd / 5.0));
        let half = 2.365 * sd / 8f64.sqrt();
        assert!(close(s.ci95_low, 5.0 - half));
        assert!(close(s.ci95_high, 5.0 + half));
    }

    /// Three values 10, 11, 12: stddev 1, half width 4.303 / sqrt(3) = 2.48434...
    #[test]
    fn small_sample_uses_student_t() {
        let s = Summary::of(&[10.0, 12.0, 11.0]).unwrap();
        assert!(close(s.median, 11.0));
        assert!(close(s.stddev, 1.0));
        assert!(close(s.ci95_high - s.mean, 4.303 / 3f64.sqrt()));
    }

    #[test]
    fn single_value_and_empty() {
        let s = Summary::of(&[3.5]).unwrap();
        assert_eq!(
            (s.stddev, s.cv, s.ci95_low, s.ci95_high),
            (0.0, 0.0, 3.5, 3.5)
        );
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    /// 10 -> 12.5 is 25% worse for a runtime; 100 -> 90 is 10% worse for a throughput.
    #[test]
    fn degradation_is_positive_when_worse() {
        assert!(close(degradation_pct(10.0, 12.5, false), 25.0));
        assert!(close(degradation_pct(100.0, 90.0, true), 10.0));
        assert!(close(degradation_pct(100.0, 110.0, true), -10.0));
    }

    /// a = 1, 2, 3 (mean 2, s^2 = 1), b = 4, 6, 8 (mean 6, s^2 = 4): se^2 = 1/3 + 4/3 =
    /// 5/3; df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = (25/9) / (17/18) = 2.94 -> 2,
    /// t = 4.303; interval 4 -+ 4.303 * sqrt(5/3).
    #[test]
    fn welch_interval_by_hand() {
        let (lo, hi) = welch_ci95(&[1.0, 2.0, 3.0], &[4.0, 6.0, 8.0]).unwrap();
        let half = 4.303 * (5.0f64 / 3.0).sqrt();
        assert!(close(lo, 4.0 - half), "{lo}");
        assert!(close(hi, 4.0 + half), "{hi}");
        assert!(welch_ci95(&[1.0], &[1.0, 2.0]).is_none());
        assert!(welch_ci95(&[1.0, 1.0], &[2.0, 2.0]).is_none());
    }

    /// num = 7.0, 7.1, 7.2 (mean 7.1, s 0.1), den = 5.1, 5.2, 5.3 (mean 5.2, s 0.1):
    /// relative variances 0.01 / (3 * 50.41) = 6.6125e-5 and 0.01 / (3 * 27.04) =
    /// 1.23274e-4, sum 1.89399e-4; df = sum^2 / (6.6125e-5^2 / 2 + 1.23274e-4^2 / 2) =
    /// 3.67 -> 3, t = 3.182; R = 7.1 / 5.2 = 1.365385, se = R * sqrt(sum) = 0.018791.
    #[test]
    fn ratio_interval_by_the_delta_method_by_hand() {
        let num = Summary::of(&[7.0, 7.1, 7.2]).unwrap();
        let den = Summary::of(&[5.1, 5.2, 5.3]).unwrap();
        let (lo, hi) = ratio_ci95(&num, &den).unwrap();
        let r = 7.1 / 5.2;
        let half = 3.182 * r * (0.01f64 / (3.0 * 50.41) + 0.01 / (3.0 * 27.04)).sqrt();
        assert!(close(lo, r - half), "{lo} vs {}", r - half);
        assert!(close(hi, r + half), "{hi} vs {}", r + half);
        assert!((half - 0.05979).abs() < 1e-4, "{half}");
        let one = Summary::of(&[1.0]).unwrap();
        assert!(ratio_ci95(&one, &den).is_none());
        let flat = Summary::of(&[2.0, 2.0]).unwrap();
        assert!(ratio_ci95(&flat, &flat).is_none());
    }

    /// Two-sided 95% values of Student's t, copied by hand from a standard t table
    /// (rows the table lacks, 31, 45, 121, 200, from the t density integrated
    /// numerically): the table for small df, and above df 30 the expansion agrees to
    /// 1e-3, with no jump to the normal 1.960 above df 120.
    #[test]
    fn t_matches_a_printed_table_for_every_df() {
        let table = [
            (1, 12.706),
            (2, 4.303),
            (9, 2.262),
            (10, 2.228),
            (30, 2.042),
            (31, 2.040),
            (40, 2.021),
            (45, 2.014),
            (60, 2.000),
            (100, 1.984),
            (120, 1.980),
            (121, 1.980),
            (200, 1.972),
            (1000, 1.962),
            (usize::MAX, 1.960),
        ];
        for (df, t) in table {
            let got = t_critical_95(df);
            assert!((got - t).abs() < 1e-3, "df {df}: {got} vs table {t}");
        }
        // t(121) = 1.979764 (numerical integration); the normal 1.960 is 1% too narrow.
        assert!((t_critical_95(121) - 1.979_764).abs() < 1e-4);
        assert!(close(t_critical_95(0), 12.706));
        // Decreasing in df all the way, also across the table's end.
        let ts: Vec<f64> = (1..5000).map(t_critical_95).collect();
        assert!(ts.windows(2).all(|w| w[1] < w[0]));
    }
}
