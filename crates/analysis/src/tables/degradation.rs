//! Degradation per step against the group's first level (thesis 5.2): mean, stddev and
//! 95% CI of the repetitions, busy and idle side by side, and the maximum per run.

use nnb_format::stats::{degradation_ci95, degradation_pct, spread_known, Summary};
use nnb_format::{Metric, Role, StepGroup};

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{by_group, is, measured, planned_levels, AnalysisError, Level, Row};

/// Degradation of the test tenant's primary metric per level, per group.
#[derive(Debug, Clone, PartialEq)]
pub struct Degradation {
    /// The primary metric (runtime, throughput, mean RTT, ...).
    pub metric: Metric,
    /// Its unit (`s`, `ops/s`, `ns`, `bit/s`).
    pub unit: String,
    /// Whether a higher value is better (then degradation is `(p_0 - p_k) / p_0 * 100`).
    pub higher_is_better: bool,
    /// One entry per group (`busy`, `idle`, `sweep`, `load`), in plan order.
    pub groups: Vec<GroupLevels>,
    /// For a fixed-time thread sweep ([`Metric::NsPerOpPerThread`]), which thread's
    /// time per op is compared; `None` for other runs.
    pub thread_basis: Option<ThreadBasis>,
}

/// Which time per op a fixed-time thread sweep compares across levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadBasis {
    /// The slowest thread's, `1e9 / min over threads of its ops/s` (the records'
    /// `result.burn.threads[]`), as a fixed-work runtime is the slowest thread's: the
    /// first thread on a busy core's sibling shows its whole slowdown.
    Slowest,
    /// The mean over the threads, `threads / total ops/s`, for records without
    /// per-thread figures: one slow thread is diluted by the thread count.
    Mean,
}

/// The levels of one group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupLevels {
    /// The group, e.g. `busy`.
    pub group: StepGroup,
    /// Measured levels, lowest first.
    pub levels: Vec<LevelStats>,
    /// The reference: the group's lowest planned level (`neighbors=0`, 1 thread, no
    /// load), whether or not it was measured.
    pub reference: String,
    /// Whether the reference has no successful repetition: then no level of the group
    /// has a degradation (it never moves to the next level).
    pub reference_missing: bool,
    /// The level with the largest degradation and that degradation in percent.
    pub max: Option<(f64, f64)>,
}

/// Statistics of the measured (non-warm-up, ok) repetitions of one level.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelStats {
    /// Numeric level (neighbors, threads, bit/s).
    pub level: f64,
    /// Level label, e.g. `neighbors=2`.
    pub label: String,
    /// Repetitions used.
    pub n: usize,
    /// Mean of the repetitions.
    pub mean: f64,
    /// Sample standard deviation.
    pub stddev: f64,
    /// 95% confidence interval of the mean (Student t).
    pub ci95: (f64, f64),
    /// Degradation of the mean against the group's reference level, percent (positive =
    /// worse); `None` when the reference has no successful repetition.
    pub degradation_pct: Option<f64>,
    /// Welch's 95% interval of the degradation (the difference of the two means over
    /// the reference mean); `None` with fewer than two repetitions on either side.
    pub degradation_ci95: Option<(f64, f64)>,
    /// The repetitions' values, in plan order.
    pub values: Vec<f64>,
    /// What qualifies this level's numbers (its records' loss, clock fallback, steal,
    /// sink gaps, pacer skips..., a CV above [`super::NOISY_CV`], an effective CPU
    /// frequency more than [`super::FREQ_DROP`] below the fastest level's), short.
    pub flags: Vec<String>,
}

impl LevelStats {
    /// The coefficient of variation, `sd / |mean|` (0 for a mean of 0).
    pub fn cv(&self) -> f64 {
        if self.mean != 0.0 {
            self.stddev / self.mean.abs()
        } else {
            0.0
        }
    }
}

/// The degradation of the test tenant per level for staircase, thread-sweep and
/// load-steps runs; `None` for the isolation matrix (see [`super::isolation`]) or a
/// run without measured test records.
pub fn degradation(run: &Run) -> Result<Option<Degradation>, AnalysisError> {
    if is(run, Scenario::IsolationMatrix) {
        return Ok(None);
    }
    let rows = measured(run, Role::Test)?;
    // A pair suite measures different things one after another: no level of it
    // degrades another (its tables are Wang & Ng's).
    if rows
        .iter()
        .any(|r| crate::wang_ng::is_pair_suite_job(r.job))
    {
        return Ok(None);
    }
    let Some(first) = rows.iter().find(|r| r.value.is_some()) else {
        return Ok(None);
    };
    let metric = first.metric.ok_or_else(|| AnalysisError::Data {
        run: run.run_id.clone(),
        message: "a measured test record names no known metric".to_string(),
    })?;
    let (metric, higher_is_better) = match per_thread(run, metric) {
        Some(m) => (m, false),
        None => (metric, first.higher_is_better.unwrap_or(false)),
    };
    let thread_basis = (metric == Metric::NsPerOpPerThread).then(|| {
        let every = rows
            .iter()
            .filter(|r| r.value.is_some())
            .all(|r| r.quality.slowest_thread_ops_per_sec().is_some());
        if every {
            ThreadBasis::Slowest
        } else {
            ThreadBasis::Mean
        }
    });
    let planned = planned_levels(run, Role::Test)?;
    let drops = super::verdict::freq_drops(&rows);
    let mut groups = Vec::new();
    for (group, mut levels) in by_group(&rows) {
        levels.sort_by(|a, b| a.level.total_cmp(&b.level));
        let (reference, reference_label) = planned
            .iter()
            .filter(|(g, _, _)| *g == group)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or_else(
                || (levels[0].level, levels[0].label.clone()),
                |(_, level, label)| (*level, label.clone()),
            );
        let value = |r: &Row| value_of(r, metric, thread_basis);
        let mut levels = group_stats(run, &levels, &value, higher_is_better, reference)?;
        for l in &mut levels {
            l.flags
                .extend(super::verdict::freq_flag(&drops, group, &l.label));
        }
        let reference_missing = levels.first().map_or(true, |l| l.level != reference);
        let max = levels
            .iter()
            .filter_map(|l| Some((l.level, l.degradation_pct?)))
            .fold(None::<(f64, f64)>, |best, l| match best {
                Some(b) if b.1 >= l.1 => Some(b),
                _ => Some(l),
            });
        groups.push(GroupLevels {
            group,
            levels,
            reference: reference_label,
            reference_missing,
            max,
        });
    }
    // A printed value's unit is the one its job declared (every sample of a run's
    // test workload declares the same); every other metric's is the metric's own.
    let unit = match metric.quantity() {
        nnb_format::Quantity::Declared => rows.iter().find_map(|r| r.quality.unit.clone()),
        _ => None,
    }
    .unwrap_or_else(|| metric.unit().to_string());
    Ok(Some(Degradation {
        unit,
        metric,
        higher_is_better,
        groups,
        thread_basis,
    }))
}

/// The metric a thread sweep is analysed on: a fixed-time sweep's total throughput
/// rises with the thread count, so it is compared per thread
/// ([`Metric::NsPerOpPerThread`]); `None` for other runs and metrics.
fn per_thread(run: &Run, metric: Metric) -> Option<Metric> {
    (is(run, Scenario::ThreadSweep) && metric == Metric::OpsPerSec)
        .then_some(Metric::NsPerOpPerThread)
}

/// A record's value of `metric`: its primary value, or the metric's column. The time
/// per op per thread is the slowest thread's with [`ThreadBasis::Slowest`], else the
/// column, or the level (threads) over the total throughput when the record predates
/// that column.
fn value_of(row: &Row, metric: Metric, basis: Option<ThreadBasis>) -> Option<f64> {
    if basis == Some(ThreadBasis::Slowest) {
        let ops = row.quality.slowest_thread_ops_per_sec()?;
        return (ops > 0.0).then(|| 1e9 / ops);
    }
    if row.metric == Some(metric) {
        return row.value;
    }
    match (metric, row.metrics.get(metric)) {
        (_, Some(v)) => Some(v),
        (Metric::NsPerOpPerThread, None) => {
            let ops = row.metrics.get(Metric::OpsPerSec)?;
            (ops > 0.0).then(|| row.level * 1e9 / ops)
        }
        _ => None,
    }
}

/// Statistics of each level of one group (in the order given), each record's value
/// read by `value`, degradation against the level `reference`: none at all when
/// `reference` has no measured repetition.
fn group_stats(
    run: &Run,
    levels: &[Level<'_>],
    value: &dyn Fn(&Row) -> Option<f64>,
    higher_is_better: bool,
    reference: f64,
) -> Result<Vec<LevelStats>, AnalysisError> {
    let measured: Vec<(&Level<'_>, Vec<f64>, Summary)> = levels
        .iter()
        .filter_map(|l| {
            let values: Vec<f64> = l.rows.iter().filter_map(|r| value(r)).collect();
            let s = Summary::of(&values)?;
            Some((l, values, s))
        })
        .collect();
    let base = measured.iter().find(|(l, _, _)| l.level == reference);
    if let Some((l, _, s)) = base {
        if s.mean == 0.0 {
            return Err(AnalysisError::Data {
                run: run.run_id.clone(),
                message: format!("the reference level `{}` has a mean of 0", l.label),
            });
        }
    }
    Ok(measured
        .iter()
        .map(|(l, values, s)| {
            // The reference against itself is 0 by definition: no interval.
            let against = base.map(|(_, _, b)| {
                (
                    degradation_pct(b.mean, s.mean, higher_is_better),
                    (l.level != reference)
                        .then(|| degradation_ci95(b, s, higher_is_better))
                        .flatten(),
                )
            });
            let mut stats = LevelStats {
                level: l.level,
                label: l.label.clone(),
                n: s.n,
                mean: s.mean,
                stddev: s.stddev,
                ci95: (s.ci95_low, s.ci95_high),
                degradation_pct: against.map(|a| a.0),
                degradation_ci95: against.and_then(|a| a.1),
                values: values.clone(),
                flags: Vec::new(),
            };
            if stats.cv() > super::NOISY_CV {
                stats.flags.push(format!("CV {:.1}%", stats.cv() * 100.0));
            }
            stats.flags.extend(super::verdict::level_flags(&l.rows));
            stats
        })
        .collect())
}

/// A figure of a level's spread (its sd, its interval's half-width), `n/a` for a
/// single repetition, whose spread is unknown.
fn spread_cell(l: &LevelStats, value: f64, decimals: usize) -> Cell {
    if spread_known(l.n) {
        Cell::num(value, decimals)
    } else {
        Cell::text("n/a")
    }
}

/// A level's degradation interval, `lo..hi`, marked `n.s.` when it includes 0.
fn degradation_ci_cell(l: &LevelStats) -> Cell {
    match l.degradation_ci95 {
        Some((lo, hi)) => {
            let ns = if lo <= 0.0 && hi >= 0.0 { " n.s." } else { "" };
            Cell::Text(format!("{lo:.2}..{hi:.2}{ns}"))
        }
        None => Cell::Empty,
    }
}

impl Degradation {
    /// Groups side by side: one row per level, per group its n, mean, sample standard
    /// deviation (`sd`), 95% CI half-width (`±ci95`) and degradation in percent against
    /// the group's first level (`degr %`); the unit is in the title.
    pub fn table(&self) -> Table {
        let mut columns = vec!["level".to_string()];
        for g in &self.groups {
            columns.extend([
                format!("{} n", g.group),
                format!("{} mean", g.group),
                format!("{} sd", g.group),
                format!("{} ±ci95", g.group),
                format!("{} degr %", g.group),
                format!("{} degr 95% CI", g.group),
                format!("{} flags", g.group),
            ]);
        }
        // Each label once, and each group's level of a label, by look-up: scans are
        // quadratic in the levels (reliability review NL4).
        let mut labels: Vec<&str> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for g in &self.groups {
            for l in &g.levels {
                if seen.insert(l.label.as_str()) {
                    labels.push(&l.label);
                }
            }
        }
        let by_label: Vec<std::collections::HashMap<&str, _>> = self
            .groups
            .iter()
            .map(|g| {
                g.levels
                    .iter()
                    .rev()
                    .map(|l| (l.label.as_str(), l))
                    .collect()
            })
            .collect();
        let d = self.metric.decimals();
        let rows = labels
            .iter()
            .map(|label| {
                let mut row = vec![Cell::text(*label)];
                for levels in &by_label {
                    match levels.get(label).copied() {
                        Some(l) => row.extend([
                            Cell::Int(l.n as i64),
                            Cell::num(l.mean, d),
                            spread_cell(l, l.stddev, d),
                            spread_cell(l, (l.ci95.1 - l.ci95.0) / 2.0, d),
                            l.degradation_pct.map_or(Cell::Empty, |p| Cell::num(p, 2)),
                            degradation_ci_cell(l),
                            Cell::text(l.flags.join(", ")),
                        ]),
                        None => row.extend(std::iter::repeat(Cell::Empty).take(7)),
                    }
                }
                row
            })
            .collect();
        let direction = if self.higher_is_better {
            "(p_0 - p_k) / p_0 * 100"
        } else {
            "(t_k - t_0) / t_0 * 100"
        };
        let mut notes = vec![format!(
            "{}: degradation = {direction} against each group's lowest level; positive = worse; \
             95% CI of the mean with Student's t; the degradation's 95% CI is Welch's \
             interval of the difference of means over the reference mean, `n.s.` where it \
             includes 0 (not significant); flags: what qualifies the level's numbers (CV \
             above {:.0}%, probe loss, clamped RTTs, clock fallback, steal, sink gaps, GSO \
             fallback, pacer skips, send errors, capped socket buffers); sd and ±ci95 are \
             n/a for a single repetition, whose spread is unknown",
            self.metric,
            super::NOISY_CV * 100.0
        )];
        match self.thread_basis {
            Some(ThreadBasis::Slowest) => notes.push(
                "fixed-time thread sweep: compared on the slowest thread's time per op (1e9 / \
                 the lowest of its threads' ops/s), as a fixed-work runtime is the slowest \
                 thread's; total throughput grows with the thread count"
                    .to_string(),
            ),
            Some(ThreadBasis::Mean) => notes.push(
                "fixed-time thread sweep: compared per thread (threads / total ops/s), since \
                 total throughput grows with the thread count; these records have no \
                 per-thread figures, and a mean dilutes one slow thread by the thread count"
                    .to_string(),
            ),
            None => {}
        }
        for g in self.groups.iter().filter(|g| g.reference_missing) {
            notes.push(format!(
                "{}: the reference level {} has no successful repetition: no degradation \
                 for this group",
                g.group, g.reference
            ));
        }
        for g in &self.groups {
            if let Some((level, pct)) = g.max {
                let label = g
                    .levels
                    .iter()
                    .find(|l| l.level == level)
                    .map_or(String::new(), |l| l.label.clone());
                notes.push(format!(
                    "{}: maximum degradation {pct:.2}% at {label}",
                    g.group
                ));
            }
        }
        Table {
            name: "degradation".to_string(),
            title: format!("Degradation per step: {} ({})", self.metric, self.unit),
            columns,
            rows,
            notes,
        }
    }
}

/// One row per run (instance size): maximum nodes and the maximum degradation per group
/// with the level where it happened, in the shape of thesis Tables 5.3-5.7.
/// "Maximum nodes" is the test node plus the most neighbors (staircase runs only).
pub fn summary_table(runs: &[(&Run, &Degradation)]) -> Table {
    let mut groups: Vec<StepGroup> = Vec::new();
    for (_, d) in runs {
        for g in &d.groups {
            if !groups.contains(&g.group) {
                groups.push(g.group);
            }
        }
    }
    let mut columns = vec![
        "run".to_string(),
        "instance".to_string(),
        "maximum nodes".to_string(),
    ];
    for g in &groups {
        columns.push(format!("{g} max degradation %"));
        columns.push(format!("{g} at"));
    }
    let rows = runs
        .iter()
        .map(|(run, d)| {
            let max_nodes = is(run, Scenario::NeighborStaircase)
                .then(|| {
                    d.groups
                        .iter()
                        .flat_map(|g| g.levels.iter().map(|l| l.level))
                        .fold(f64::NAN, f64::max)
                })
                .filter(|m| m.is_finite())
                .map_or(Cell::Empty, |m| Cell::Int(m as i64 + 1));
            let mut row = vec![Cell::text(&run.run_id), Cell::text(run.label()), max_nodes];
            for g in &groups {
                let found = d.groups.iter().find(|x| x.group == *g);
                match found.and_then(|x| x.max.map(|m| (x, m))) {
                    Some((x, (level, pct))) => {
                        let label = x
                            .levels
                            .iter()
                            .find(|l| l.level == level)
                            .map_or(String::new(), |l| l.label.clone());
                        row.push(Cell::num(pct, 2));
                        row.push(Cell::Text(label));
                    }
                    None => row.extend([Cell::Empty, Cell::Empty]),
                }
            }
            row
        })
        .collect();
    Table {
        name: "degradation_summary".to_string(),
        title: "Maximum degradation per run (thesis Tables 5.3-5.7)".to_string(),
        columns,
        rows,
        notes: vec![
            "maximum over the levels of each group of the mean's degradation against the \
             group's first level"
                .to_string(),
        ],
    }
}
