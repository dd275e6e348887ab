//! Thread-sweep knees (thesis 5.1): the steps where the runtime jumps, against the
//! expected knee at `n/2 + 1` threads on a host with `n` logical CPUs (SMT siblings
//! start sharing a core).

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use nnb_format::stats::degradation_pct;
use nnb_format::Metric;

use super::{degradation, is, AnalysisError, LevelStats};

/// The sweep's levels and the steps between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Knees {
    /// Statistics per thread count (degradation against the first level).
    pub levels: Vec<LevelStats>,
    /// Logical CPUs of the host (manifest topology).
    pub logical_cpus: Option<usize>,
    /// `n/2 + 1` threads.
    pub expected_knee: Option<f64>,
    /// The step between each pair of consecutive levels.
    pub steps: Vec<KneeStep>,
}

/// The change from one thread count to the next.
#[derive(Debug, Clone, PartialEq)]
pub struct KneeStep {
    /// Threads before.
    pub from: f64,
    /// Threads after.
    pub to: f64,
    /// Degradation of `to` against `from`, percent (positive = worse).
    pub step_pct: f64,
    /// A knee: the largest step, or one at least half as large.
    pub is_knee: bool,
}

/// Knees of a thread-sweep run; `None` for other scenarios. A step is a knee when it
/// is the largest degradation step of the sweep or at least half as large (and the
/// largest step is positive).
pub fn knees(run: &Run) -> Result<Option<Knees>, AnalysisError> {
    if !is(run, Scenario::ThreadSweep) {
        return Ok(None);
    }
    let Some(d) = degradation(run)? else {
        return Ok(None);
    };
    let Some(sweep) = d.groups.into_iter().next() else {
        return Ok(None);
    };
    let levels = sweep.levels;
    let mut steps: Vec<KneeStep> = levels
        .windows(2)
        .map(|w| KneeStep {
            from: w[0].level,
            to: w[1].level,
            step_pct: degradation_pct(w[0].mean, w[1].mean, d.higher_is_better),
            is_knee: false,
        })
        .collect();
    let largest = steps.iter().map(|s| s.step_pct).fold(f64::NAN, f64::max);
    if largest > 0.0 {
        for s in &mut steps {
            s.is_knee = s.step_pct >= largest / 2.0;
        }
    }
    let logical_cpus = run.logical_cpus();
    Ok(Some(Knees {
        levels,
        logical_cpus,
        expected_knee: logical_cpus.map(|n| (n / 2 + 1) as f64),
        steps,
    }))
}

impl Knees {
    /// The step with the largest degradation, if any step is positive.
    pub fn largest(&self) -> Option<&KneeStep> {
        self.steps
            .iter()
            .filter(|s| s.step_pct > 0.0)
            .fold(None, |best: Option<&KneeStep>, s| match best {
                Some(b) if b.step_pct >= s.step_pct => Some(b),
                _ => Some(s),
            })
    }

    /// One row per step: threads before and after, both means, the step in percent,
    /// the degradation of `to` against one thread, and marks for knees and `n/2 + 1`.
    pub fn table(&self) -> Table {
        let mean = |level: f64| {
            self.levels
                .iter()
                .find(|l| l.level == level)
                .map(|l| (l.mean, l.degradation_pct))
        };
        // Thread sweeps measure the burner's runtime or throughput; the unit decides
        // only the digits shown.
        let d = if self.levels.iter().all(|l| l.mean.abs() >= 1000.0) {
            Metric::OpsPerSec.decimals()
        } else {
            Metric::RuntimeS.decimals()
        };
        let rows = self
            .steps
            .iter()
            .map(|s| {
                let (from, _) = mean(s.from).unwrap_or((f64::NAN, f64::NAN));
                let (to, total) = mean(s.to).unwrap_or((f64::NAN, f64::NAN));
                vec![
                    Cell::Int(s.from as i64),
                    Cell::Int(s.to as i64),
                    Cell::num(from, d),
                    Cell::num(to, d),
                    Cell::num(s.step_pct, 2),
                    Cell::num(total, 2),
                    Cell::text(if s.is_knee { "knee" } else { "" }),
                    Cell::text(if Some(s.to) == self.expected_knee {
                        "n/2+1"
                    } else {
                        ""
                    }),
                ]
            })
            .collect();
        let mut notes = vec![
            "step % = degradation of `to` against `from`; a knee is the largest step or one \
             at least half as large"
                .to_string(),
        ];
        match (self.logical_cpus, self.expected_knee) {
            (Some(n), Some(k)) => notes.push(format!(
                "{n} logical CPUs: expected knee at n/2 + 1 = {k} threads (SMT siblings share a core)"
            )),
            _ => notes.push("logical CPUs unknown: no expected knee".to_string()),
        }
        if let Some(big) = self.largest() {
            let verdict = match self.expected_knee {
                Some(k) if k == big.to => " (as expected)".to_string(),
                Some(k) => format!(" (expected at {k})"),
                None => String::new(),
            };
            notes.push(format!(
                "largest step: {} -> {} threads, {:.2}%{verdict}",
                big.from, big.to, big.step_pct
            ));
        }
        Table {
            name: "knees".to_string(),
            title: "Thread-sweep knees".to_string(),
            columns: [
                "from threads",
                "to threads",
                "mean from",
                "mean to",
                "step %",
                "vs first %",
                "knee",
                "expected",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            notes,
        }
    }
}
