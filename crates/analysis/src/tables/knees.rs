//! Thread-sweep knees (thesis 5.1): the steps where the runtime jumps beyond the
//! noise ([`nnb_format::knee`], the definition `nnb cpu --sweep` uses too), against
//! the thread count where the measured tenant's own placement first shares a core.

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use nnb_format::knee::{expected_smt_knee, expected_smt_knee_from_counts, find_knees};
pub use nnb_format::knee::{KneeNoise, KneeStep};
use nnb_format::stats::Summary;
use nnb_format::Metric;

use super::{degradation, is, measured, AnalysisError, LevelStats};
use nnb_format::Role;

/// The sweep's levels and the steps between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Knees {
    /// The metric compared (runtime, or time per op per thread for fixed time).
    pub metric: Metric,
    /// Statistics per thread count (degradation against the first level).
    pub levels: Vec<LevelStats>,
    /// The thread count where the SMT knee is expected, if the tenant has SMT.
    pub expected_knee: Option<f64>,
    /// Where [`Knees::expected_knee`] comes from, for the notes.
    pub expected_from: String,
    /// The step between each pair of consecutive levels.
    pub steps: Vec<KneeStep>,
    /// How steps were told from noise.
    pub noise: KneeNoise,
}

/// Knees of a thread-sweep run; `None` for other scenarios. A step is a knee when it
/// is larger than the levels' noise and the largest such step or at least half as
/// large ([`find_knees`]).
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
    let summaries: Vec<(f64, Summary)> = levels
        .iter()
        .filter_map(|l| Some((l.level, Summary::of(&l.values)?)))
        .collect();
    let found = find_knees(&summaries, d.higher_is_better);
    let (expected_knee, expected_from) = expected(run)?;
    Ok(Some(Knees {
        metric: d.metric,
        levels,
        expected_knee: expected_knee.map(|k| k as f64),
        expected_from,
        steps: found.steps,
        noise: found.noise,
    }))
}

/// The expected SMT knee of the test tenant and where it comes from: the placement its
/// burner recorded at the largest level, else its agent's topology (SMT ways, cores,
/// the CPUs it was allowed) and the pin strategy. Never the controller's machine.
fn expected(run: &Run) -> Result<(Option<usize>, String), AnalysisError> {
    let rows = measured(run, Role::Test)?;
    let placed = rows
        .iter()
        .filter(|r| !r.quality.slots().is_empty())
        .max_by(|a, b| a.level.total_cmp(&b.level));
    if let Some(r) = placed {
        let slots = r.quality.slots();
        let knee = expected_smt_knee(&slots);
        let why = match knee {
            Some(k) => format!(
                "expected SMT knee at {k} threads: the first thread the test tenant's \
                 placement puts on a core that already has one"
            ),
            None => "no SMT knee expected: no two threads of the test tenant's placement \
                     share a core"
                .to_string(),
        };
        return Ok((knee, why));
    }
    let Some(t) = run.test_topology() else {
        return Ok((
            None,
            "the test tenant's topology is unknown: no expected knee".to_string(),
        ));
    };
    let pin = run
        .manifest
        .experiment
        .scenario
        .test
        .as_ref()
        .and_then(|t| t.pin.as_deref())
        .unwrap_or("cores");
    let whole = t.cpus.is_empty() || Some(t.cpus.len()) == t.online;
    let knee = match (t.cores, t.smt_ways, pin) {
        (_, Some(w), _) if w < 2 => None,
        (Some(cores), Some(w), "cores") if whole => expected_smt_knee_from_counts(cores, w, true),
        (Some(cores), Some(w), "smt-sibling" | "compact") => {
            expected_smt_knee_from_counts(cores, w, false)
        }
        _ => {
            return Ok((
                None,
                format!(
                    "the test tenant ran on {} of its CPUs with pin `{pin}` and recorded no \
                     placement: no expected knee",
                    t.cpus.len()
                ),
            ))
        }
    };
    let why = match knee {
        Some(k) => format!(
            "expected SMT knee at {k} threads: the test tenant's {} cores, {}-way SMT, pin `{pin}`",
            t.cores.unwrap_or(0),
            t.smt_ways.unwrap_or(1)
        ),
        None => "no SMT knee expected: the test tenant's host has no SMT".to_string(),
    };
    Ok((knee, why))
}

impl Knees {
    /// The knee with the largest degradation, if the sweep has a knee.
    pub fn largest(&self) -> Option<&KneeStep> {
        self.steps.iter().filter(|s| s.is_knee).fold(
            None,
            |best: Option<&KneeStep>, s| match best {
                Some(b) if b.step_pct >= s.step_pct => Some(b),
                _ => Some(s),
            },
        )
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
        let d = self.metric.decimals();
        let rows = self
            .steps
            .iter()
            .map(|s| {
                let (from, _) = mean(s.from).unwrap_or((f64::NAN, None));
                let (to, total) = mean(s.to).unwrap_or((f64::NAN, None));
                vec![
                    Cell::Int(s.from as i64),
                    Cell::Int(s.to as i64),
                    Cell::num(from, d),
                    Cell::num(to, d),
                    Cell::num(s.step_pct, 2),
                    s.ci95_pct.map_or(Cell::Empty, |(lo, hi)| {
                        Cell::Text(format!("{lo:.2}..{hi:.2}"))
                    }),
                    total.map_or(Cell::Empty, |t| Cell::num(t, 2)),
                    Cell::text(if s.is_knee { "knee" } else { "" }),
                    Cell::text(if Some(s.to) == self.expected_knee {
                        "SMT"
                    } else {
                        ""
                    }),
                ]
            })
            .collect();
        let mut notes = vec![
            format!(
                "{}: step % = degradation of `to` against `from`, with its 95% Welch interval",
                self.metric
            ),
            self.noise.note().to_string(),
            self.expected_from.clone(),
        ];
        if let Some(big) = self.largest() {
            let verdict = match self.expected_knee {
                Some(k) if k == big.to => " (as expected)".to_string(),
                Some(k) => format!(" (expected at {k})"),
                None => String::new(),
            };
            notes.push(format!(
                "largest knee: {} -> {} threads, {:.2}%{verdict}",
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
                "step 95% CI",
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
