//! Thread sweeps (thesis figures 5.5, 5.7, 5.11): run 1..N threads, report each
//! step's runtime and its degradation against the first step, and mark the knees,
//! the steps larger than the noise ([`nnb_format::knee`], shared with `nnb analyze`).
//! With `--pin cores` on a 2-way SMT host the big knee is expected where the first
//! thread has to share a core ([`nnb_format::knee::expected_smt_knee`]).

use std::str::FromStr;

use nnb_format::knee::{find_knees, KneeNoise};
use nnb_format::stats::Summary;
use serde::Serialize;

/// A sweep of thread counts `start..=end` in steps of `step`, from `1..N[:step]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SweepSpec {
    /// First thread count (>= 1).
    pub start: usize,
    /// Last thread count (inclusive, >= start).
    pub end: usize,
    /// Increment (>= 1).
    pub step: usize,
}

/// A `--sweep` value that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SweepError {
    /// Not a range of whole numbers.
    #[error("sweep '{0}' is not of the form START..END[:STEP], e.g. 1..8 or 1..96:4")]
    Syntax(String),
    /// A thread count of zero.
    #[error("sweep '{0}' starts at 0 threads; thread counts start at 1")]
    Zero(String),
    /// END below START.
    #[error("sweep '{0}' ends before it starts")]
    Reversed(String),
    /// STEP of zero.
    #[error("sweep '{0}' has step 0; the step must be at least 1")]
    ZeroStep(String),
    /// More thread counts than a range may hold.
    #[error("sweep: {0}")]
    TooLong(nnb_units::UnitError),
}

impl FromStr for SweepSpec {
    type Err = SweepError;

    /// Reads the range with [`nnb_units::parse_count_steps`] (`1..8`, `1..96:4`,
    /// `2:8:2`), then refuses a start of 0 threads.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use nnb_units::UnitError;
        let steps = nnb_units::parse_count_steps(s).map_err(|e| match e {
            UnitError::Reversed { .. } => SweepError::Reversed(s.to_string()),
            UnitError::ZeroStep { .. } => SweepError::ZeroStep(s.to_string()),
            UnitError::TooManyLevels { .. } => SweepError::TooLong(e),
            _ => SweepError::Syntax(s.to_string()),
        })?;
        if steps.from == 0 {
            return Err(SweepError::Zero(s.to_string()));
        }
        Ok(SweepSpec {
            start: steps.from,
            end: steps.to,
            step: steps.step,
        })
    }
}

impl SweepSpec {
    /// The thread counts of the sweep; the last is `end` even when the step skips it,
    /// so the full load is always measured.
    pub fn counts(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (self.start..=self.end).step_by(self.step).collect();
        if v.last() != Some(&self.end) {
            v.push(self.end);
        }
        v
    }
}

/// One step of an analysed sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepStep {
    /// Thread count.
    pub threads: usize,
    /// The mean of the step's repetitions: runtime, or time per op per thread in a
    /// fixed-time run; larger is slower.
    pub value: f64,
    /// `(t_k - t_0) / t_0 * 100`, t_0 being the first step.
    pub degradation_pct: f64,
    /// Degradation added by this step over the previous one, in percentage points of t_0
    /// (0 for the first step).
    pub increment_pct: f64,
    /// A knee ([`nnb_format::knee`]): a step larger than the noise, and the largest or
    /// at least half as large.
    pub knee: bool,
}

/// A sweep with degradations and knees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepAnalysis {
    /// The steps in thread order.
    pub steps: Vec<SweepStep>,
    /// Thread counts marked as knees, largest jump first.
    pub knees: Vec<usize>,
    /// How steps were told from noise.
    pub noise: KneeNoise,
}

/// Analyses `(threads, summary of the repetitions)` in sweep order (larger is slower).
/// Knees follow [`nnb_format::knee::find_knees`], the definition `nnb analyze` uses.
pub fn analyze(points: &[(usize, Summary)]) -> SweepAnalysis {
    let t0 = points.first().map_or(0.0, |p| p.1.mean);
    let pct = |v: f64| if t0 > 0.0 { (v - t0) / t0 * 100.0 } else { 0.0 };
    let levels: Vec<(f64, Summary)> = points.iter().map(|(t, s)| (*t as f64, s.clone())).collect();
    let found = find_knees(&levels, false);
    let steps = points
        .iter()
        .enumerate()
        .map(|(i, (threads, s))| SweepStep {
            threads: *threads,
            value: s.mean,
            degradation_pct: pct(s.mean),
            increment_pct: if i == 0 {
                0.0
            } else {
                pct(s.mean) - pct(points[i - 1].1.mean)
            },
            knee: i > 0 && found.steps[i - 1].is_knee,
        })
        .collect();
    SweepAnalysis {
        steps,
        knees: found.knees().into_iter().map(|t| t as usize).collect(),
        noise: found.noise,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_steps() {
        let s: SweepSpec = "1..8".parse().unwrap();
        assert_eq!(s.counts(), (1..=8).collect::<Vec<_>>());
        let s: SweepSpec = "1..96:8".parse().unwrap();
        assert_eq!(s.counts()[..3], [1, 9, 17]);
        assert_eq!(*s.counts().last().unwrap(), 96);
        assert_eq!(
            "2..=4".parse::<SweepSpec>().unwrap().counts(),
            vec![2, 3, 4]
        );
        assert_eq!("3..3".parse::<SweepSpec>().unwrap().counts(), vec![3]);
    }

    #[test]
    fn rejects_bad_sweeps() {
        assert!(matches!(
            "0..4".parse::<SweepSpec>(),
            Err(SweepError::Zero(_))
        ));
        assert!(matches!(
            "5..2".parse::<SweepSpec>(),
            Err(SweepError::Reversed(_))
        ));
        assert!(matches!(
            "1..4:0".parse::<SweepSpec>(),
            Err(SweepError::ZeroStep(_))
        ));
        for bad in ["", "4", "1-4", "a..4", "1..b", "1..4:x", "1..4:-1"] {
            assert!(
                matches!(bad.parse::<SweepSpec>(), Err(SweepError::Syntax(_))),
                "{bad}"
            );
        }
    }

    /// Repetitions 0.1% apart around `mean`.
    fn reps(threads: usize, mean: f64) -> (usize, Summary) {
        let d = mean * 0.001;
        (threads, Summary::of(&[mean - d, mean, mean + d]).unwrap())
    }

    /// An m5.metal-like sweep: flat to 48 threads, +25% at 49 (the SMT knee), then
    /// creeping up. Degradation at 49 is (125 - 100) / 100 * 100 = 25.
    #[test]
    fn finds_the_smt_knee() {
        let mut pts: Vec<(usize, Summary)> = (1..=48)
            .map(|t| reps(t, 100.0 + (t - 1) as f64 * 0.01))
            .collect();
        pts.extend((49..=96).map(|t| reps(t, 125.0 + (t - 49) as f64 * 0.2)));
        let a = analyze(&pts);
        assert_eq!(a.knees, vec![49]);
        let s49 = &a.steps[48];
        assert!(s49.knee);
        assert!((s49.degradation_pct - 25.0).abs() < 1e-9);
        assert!((s49.increment_pct - (25.0 - 0.47)).abs() < 1e-9);
        assert_eq!(a.steps[0].degradation_pct, 0.0);
    }

    /// Two jumps of 10 and 6 points: both are knees (6 >= 10 / 2); a 3-point jump is not.
    #[test]
    fn marks_two_knees_when_comparable() {
        let pts = [(1, 100.0), (2, 110.0), (3, 111.0), (4, 117.0), (5, 120.0)];
        let a = analyze(&pts.map(|(t, m)| reps(t, m)));
        assert_eq!(a.knees, vec![2, 4]);
        let flags: Vec<bool> = a.steps.iter().map(|s| s.knee).collect();
        assert_eq!(flags, vec![false, true, false, true, false]);
        let b = analyze(&[(1, 100.0), (2, 110.0), (3, 113.0)].map(|(t, m)| reps(t, m)));
        assert_eq!(b.knees, vec![2]);
    }

    #[test]
    fn flat_or_improving_sweeps_have_no_knee() {
        let improving = [(1, 10.0), (2, 9.0), (3, 8.0)].map(|(t, m)| reps(t, m));
        assert!(analyze(&improving).knees.is_empty());
        assert!(analyze(&[reps(1, 10.0)]).knees.is_empty());
        assert!(analyze(&[]).steps.is_empty());
    }

    /// The audit's flat sweep (M3): steps of +0.1%, -0.15%, +0.13% with 0.2% noise
    /// between repetitions are no knees; measured once each, nothing can be a knee.
    #[test]
    fn noise_is_not_a_knee() {
        let noisy = |t: usize, m: f64| (t, Summary::of(&[m - 0.2, m, m + 0.2]).unwrap());
        let pts = [(1, 100.0), (2, 100.1), (3, 99.95), (4, 100.08)];
        let a = analyze(&pts.map(|(t, m)| noisy(t, m)));
        assert!(a.knees.is_empty());
        assert_eq!(a.noise, KneeNoise::Intervals);
        let once = pts.map(|(t, m)| (t, Summary::of(&[m]).unwrap()));
        let b = analyze(&once);
        assert!(b.knees.is_empty());
        assert_eq!(b.noise, KneeNoise::TooFewRepetitions);
    }
}
