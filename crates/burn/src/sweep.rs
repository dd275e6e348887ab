//! Thread sweeps (thesis figures 5.5, 5.7, 5.11): run 1..N threads, report each
//! step's runtime and its degradation against the first step, and mark the knees,
//! the largest jumps between consecutive steps. On a 2-way SMT host with n logical
//! CPUs and `--pin cores`, the big knee is expected at n/2 + 1 threads, where the
//! first thread has to share a core.

use std::str::FromStr;

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
    /// The step's runtime (or time per op in a fixed-time run): larger is slower.
    pub value: f64,
    /// `(t_k - t_0) / t_0 * 100`, t_0 being the first step.
    pub degradation_pct: f64,
    /// Degradation added by this step over the previous one, in percentage points of t_0
    /// (0 for the first step).
    pub increment_pct: f64,
    /// One of the largest jumps of the sweep.
    pub knee: bool,
}

/// A sweep with degradations and knees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepAnalysis {
    /// The steps in thread order.
    pub steps: Vec<SweepStep>,
    /// Thread counts marked as knees, largest jump first.
    pub knees: Vec<usize>,
}

/// Analyses `(threads, value)` points in sweep order (value: larger is slower).
///
/// Knees: the largest positive increment is a knee; the second largest is one too
/// when it is at least half the largest (a second, smaller plateau change). A sweep
/// with a first value of 0 or fewer than two points has no knees.
pub fn analyze(points: &[(usize, f64)]) -> SweepAnalysis {
    let t0 = points.first().map_or(0.0, |p| p.1);
    let pct = |v: f64| if t0 > 0.0 { (v - t0) / t0 * 100.0 } else { 0.0 };
    let mut steps: Vec<SweepStep> = points
        .iter()
        .enumerate()
        .map(|(i, &(threads, value))| SweepStep {
            threads,
            value,
            degradation_pct: pct(value),
            increment_pct: if i == 0 {
                0.0
            } else {
                pct(value) - pct(points[i - 1].1)
            },
            knee: false,
        })
        .collect();
    let mut order: Vec<usize> = (1..steps.len())
        .filter(|&i| steps[i].increment_pct > 0.0)
        .collect();
    order.sort_by(|&a, &b| steps[b].increment_pct.total_cmp(&steps[a].increment_pct));
    let mut knees = Vec::new();
    if let Some(&top) = order.first() {
        knees.push(top);
        if let Some(&second) = order.get(1) {
            if steps[second].increment_pct >= steps[top].increment_pct / 2.0 {
                knees.push(second);
            }
        }
    }
    for &k in &knees {
        steps[k].knee = true;
    }
    SweepAnalysis {
        knees: knees.iter().map(|&k| steps[k].threads).collect(),
        steps,
    }
}

/// The thread count where the SMT knee is expected: `n/2 + 1` on a 2-way SMT host of
/// `logical` CPUs (the first thread that must share a core under `--pin cores`);
/// `None` without SMT.
pub fn expected_smt_knee(logical: usize, smt_ways: usize) -> Option<usize> {
    (smt_ways == 2 && logical >= 2).then_some(logical / 2 + 1)
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

    /// An m5.metal-like sweep: flat to 48 threads, +25% at 49 (the SMT knee), then
    /// creeping up. Degradation at 49 is (125 - 100) / 100 * 100 = 25.
    #[test]
    fn finds_the_smt_knee() {
        let mut pts: Vec<(usize, f64)> = (1..=48)
            .map(|t| (t, 100.0 + (t - 1) as f64 * 0.01))
            .collect();
        pts.extend((49..=96).map(|t| (t, 125.0 + (t - 49) as f64 * 0.2)));
        let a = analyze(&pts);
        assert_eq!(a.knees, vec![49]);
        let s49 = &a.steps[48];
        assert!(s49.knee);
        assert!((s49.degradation_pct - 25.0).abs() < 1e-9);
        assert!((s49.increment_pct - (25.0 - 0.47)).abs() < 1e-9);
        assert_eq!(a.steps[0].degradation_pct, 0.0);
        assert_eq!(expected_smt_knee(96, 2), Some(49));
        assert_eq!(expected_smt_knee(64, 1), None);
    }

    /// Two jumps of 10 and 6 points: both are knees (6 >= 10 / 2); a 3-point jump is not.
    #[test]
    fn marks_two_knees_when_comparable() {
        let a = analyze(&[(1, 100.0), (2, 110.0), (3, 111.0), (4, 117.0), (5, 120.0)]);
        assert_eq!(a.knees, vec![2, 4]);
        let flags: Vec<bool> = a.steps.iter().map(|s| s.knee).collect();
        assert_eq!(flags, vec![false, true, false, true, false]);
        let b = analyze(&[(1, 100.0), (2, 110.0), (3, 113.0)]);
        assert_eq!(b.knees, vec![2]);
    }

    #[test]
    fn flat_or_improving_sweeps_have_no_knee() {
        assert!(analyze(&[(1, 10.0), (2, 9.0), (3, 8.0)]).knees.is_empty());
        assert!(analyze(&[(1, 10.0)]).knees.is_empty());
        assert!(analyze(&[]).steps.is_empty());
    }
}
