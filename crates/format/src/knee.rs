//! Knees of a thread sweep, and the thread count where the SMT knee is expected: one
//! definition for `nnb cpu --sweep` and `nnb analyze`.
//!
//! A knee is a step between consecutive levels that is larger than the levels' noise
//! (Welch's 95% interval of the difference of their means excludes zero) and is the
//! largest such step or at least half as large. A sweep measured once per level cannot
//! tell a step from noise, so it has no knees (and says why).
//!
//! The SMT knee is expected at the first thread that shares a physical core with an
//! earlier thread: taken from the measured tenant's own placement (its CPUs, cores and
//! pin strategy), never from another machine, and absent on a host without SMT.

use serde::Serialize;

use crate::stats::{degradation_ci95, degradation_pct, Summary};

/// The change from one level of a sweep to the next.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KneeStep {
    /// Level (threads) before.
    pub from: f64,
    /// Level after.
    pub to: f64,
    /// Degradation of `to`'s mean against `from`'s, percent (positive = worse).
    pub step_pct: f64,
    /// Welch's 95% interval of the step, percent of `from`'s mean; `None` with fewer
    /// than two repetitions on either side or no variance on both.
    pub ci95_pct: Option<(f64, f64)>,
    /// The step is larger than the levels' noise (its interval excludes zero).
    pub significant: bool,
    /// A knee: a significant positive step, the largest or at least half as large.
    pub is_knee: bool,
}

/// How the steps of a sweep were told from noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KneeNoise {
    /// Every step was compared with the Welch interval of its two levels.
    Intervals,
    /// Some level has a single repetition: its steps cannot be told from noise and
    /// are never knees.
    TooFewRepetitions,
}

impl KneeNoise {
    /// One sentence for a table's notes.
    pub fn note(self) -> &'static str {
        match self {
            KneeNoise::Intervals => {
                "a knee is a step whose 95% Welch interval excludes 0 (larger than the \
                 levels' noise) and that is the largest such step or at least half as large"
            }
            KneeNoise::TooFewRepetitions => {
                "some levels have a single repetition: a step cannot be told from noise \
                 there, so it is never marked as a knee (measure 2 or more repetitions)"
            }
        }
    }
}

/// The steps of a sweep with its knees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepKnees {
    /// One step per pair of consecutive levels.
    pub steps: Vec<KneeStep>,
    /// How noise was judged.
    pub noise: KneeNoise,
}

impl SweepKnees {
    /// The levels (`to`) of the knees, largest step first.
    pub fn knees(&self) -> Vec<f64> {
        let mut k: Vec<&KneeStep> = self.steps.iter().filter(|s| s.is_knee).collect();
        k.sort_by(|a, b| b.step_pct.total_cmp(&a.step_pct));
        k.into_iter().map(|s| s.to).collect()
    }
}

/// The steps and knees of a sweep whose `levels` (level, summary of its repetitions)
/// are in sweep order. `higher_is_better` is the metric's direction.
pub fn find_knees(levels: &[(f64, Summary)], higher_is_better: bool) -> SweepKnees {
    let mut noise = KneeNoise::Intervals;
    let mut steps: Vec<KneeStep> = levels
        .windows(2)
        .map(|w| {
            let ((from, a), (to, b)) = (&w[0], &w[1]);
            let step_pct = degradation_pct(a.mean, b.mean, higher_is_better);
            let ci95_pct = degradation_ci95(a, b, higher_is_better);
            let significant = if a.n < 2 || b.n < 2 {
                noise = KneeNoise::TooFewRepetitions;
                false
            } else {
                match ci95_pct {
                    Some((lo, hi)) => lo > 0.0 || hi < 0.0,
                    // Both levels without variance: any difference is real.
                    None => a.mean != b.mean,
                }
            };
            KneeStep {
                from: *from,
                to: *to,
                step_pct,
                ci95_pct,
                significant,
                is_knee: false,
            }
        })
        .collect();
    let largest = steps
        .iter()
        .filter(|s| s.significant && s.step_pct > 0.0)
        .map(|s| s.step_pct)
        .fold(f64::NAN, f64::max);
    if largest > 0.0 {
        for s in &mut steps {
            s.is_knee = s.significant && s.step_pct >= largest / 2.0;
        }
    }
    SweepKnees { steps, noise }
}

/// The thread count at which the SMT knee is expected, from the placement of the
/// sweep's largest level: `cores[i]` is the physical core (`None`: unknown) of thread
/// `i`'s CPU `cpus[i]`, in thread order (a sweep of `k` threads uses the first `k`
/// slots). It is the first thread whose core already holds an earlier thread on
/// another CPU; `None` when no thread shares a core (no SMT, fewer threads than
/// cores, or cores unknown).
pub fn expected_smt_knee(slots: &[(Option<usize>, Option<usize>)]) -> Option<usize> {
    slots.iter().enumerate().find_map(|(i, &(cpu, core))| {
        let core = core?;
        slots[..i]
            .iter()
            .any(|&(c, k)| k == Some(core) && c != cpu)
            .then_some(i + 1)
    })
}

/// The same expectation from a topology's counts when no placement was recorded:
/// `usable_cores + 1` when threads fill every core before a sibling (`--pin cores`),
/// 2 when they fill a core's siblings first (`smt-sibling`, `compact`); `None` without
/// SMT (`smt_ways < 2`).
pub fn expected_smt_knee_from_counts(
    usable_cores: usize,
    smt_ways: usize,
    cores_first: bool,
) -> Option<usize> {
    if smt_ways < 2 || usable_cores == 0 {
        return None;
    }
    Some(if cores_first { usable_cores + 1 } else { 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(threads: f64, values: &[f64]) -> (f64, Summary) {
        (threads, Summary::of(values).unwrap())
    }

    /// A flat sweep whose steps are within the noise has no knee.
    #[test]
    fn a_flat_noisy_sweep_has_no_knee() {
        let levels = [
            level(1.0, &[100.0, 100.4, 99.6]),
            level(2.0, &[100.1, 100.5, 99.7]),
            level(3.0, &[99.95, 100.35, 99.55]),
            level(4.0, &[100.08, 100.48, 99.68]),
        ];
        let k = find_knees(&levels, false);
        assert_eq!(k.noise, KneeNoise::Intervals);
        assert!(k.knees().is_empty());
        assert!(k.steps.iter().all(|s| !s.significant));
    }

    /// Two jumps of 10% and about 5.4% over a 0.1% noise: both knees (5.4 >= 10 / 2);
    /// the 0.9% step is significant but too small.
    #[test]
    fn marks_significant_comparable_steps() {
        let rep = |m: f64| [m - 0.1, m, m + 0.1];
        let levels = [
            level(1.0, &rep(100.0)),
            level(2.0, &rep(110.0)),
            level(3.0, &rep(111.0)),
            level(4.0, &rep(117.0)),
        ];
        let k = find_knees(&levels, false);
        assert_eq!(k.knees(), vec![2.0, 4.0]);
        assert!(k.steps[1].significant && !k.steps[1].is_knee);
        // (117 - 111) / 111 * 100 = 5.405...
        assert!((k.steps[2].step_pct - 600.0 / 111.0).abs() < 1e-9);
        // Welch: sd 0.1 each, n 3: se = sqrt(2 * 0.01 / 3) = 0.08165, df = 4,
        // t = 2.776: half-width 0.2267 on a difference of 6, over 111 -> percent.
        let (lo, hi) = k.steps[2].ci95_pct.unwrap();
        assert!((lo - (6.0 - 0.22666) / 111.0 * 100.0).abs() < 1e-3, "{lo}");
        assert!((hi - (6.0 + 0.22666) / 111.0 * 100.0).abs() < 1e-3, "{hi}");
    }

    #[test]
    fn single_repetitions_are_never_knees() {
        let levels = [level(1.0, &[100.0]), level(2.0, &[150.0])];
        let k = find_knees(&levels, false);
        assert_eq!(k.noise, KneeNoise::TooFewRepetitions);
        assert!(k.knees().is_empty());
        assert_eq!(k.steps[0].step_pct, 50.0);
    }

    /// Throughput falling from 1000 to 800 ops/s is a 20% degradation and a knee.
    #[test]
    fn higher_is_better_steps_are_degradations() {
        let levels = [level(1.0, &[999.0, 1001.0]), level(2.0, &[799.0, 801.0])];
        let k = find_knees(&levels, true);
        assert!((k.steps[0].step_pct - 20.0).abs() < 1e-9);
        let (lo, hi) = k.steps[0].ci95_pct.unwrap();
        assert!(lo > 0.0 && lo < 20.0 && hi > 20.0);
        assert_eq!(k.knees(), vec![2.0]);
    }

    /// m5.metal order under `--pin cores`: cpus 0..47 on cores 0..47, then cpu 48 on
    /// core 0: the 49th thread is the first to share a core.
    #[test]
    fn expected_knee_from_a_placement() {
        let cores_first: Vec<(Option<usize>, Option<usize>)> =
            (0..96).map(|i| (Some(i), Some(i % 48))).collect();
        assert_eq!(expected_smt_knee(&cores_first), Some(49));
        assert_eq!(expected_smt_knee(&cores_first[..8]), None);
        let siblings = [(Some(0), Some(0)), (Some(48), Some(0)), (Some(1), Some(1))];
        assert_eq!(expected_smt_knee(&siblings), Some(2));
        // No SMT, oversubscribed: two threads on cpu 0 share a CPU, not a core.
        let no_smt = [(Some(0), Some(0)), (Some(1), Some(1)), (Some(0), Some(0))];
        assert_eq!(expected_smt_knee(&no_smt), None);
        assert_eq!(expected_smt_knee(&[(Some(0), None), (Some(1), None)]), None);
    }

    #[test]
    fn expected_knee_from_counts() {
        assert_eq!(expected_smt_knee_from_counts(48, 2, true), Some(49));
        assert_eq!(expected_smt_knee_from_counts(48, 2, false), Some(2));
        assert_eq!(expected_smt_knee_from_counts(64, 1, true), None);
    }
}
