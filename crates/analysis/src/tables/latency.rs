//! Latency vs aggregate neighbor load (thesis 6.5, 6.6): mean, p50, p90, p99, p99.9,
//! p90 - mean and p99.9 - mean of the probe's RTT per load level, each two ways:
//!
//! - pooled: of all the level's RTTs together, from the repetitions' HDR logs summed;
//! - mean of runs: the mean over the level's repetitions of each repetition's own
//!   statistic (its record's `rtt_*_ns`), with a 95% confidence interval. This is the
//!   thesis' definition (§6.2.2: 30 sockperf runs per level, their metrics averaged),
//!   the one to compare with its figures.
//!
//! The two differ where the repetitions differ: a tail that one run has and the others
//! lack weighs 1/n in the mean of runs' p99.9 but may fall past the pool's 99.9th
//! percentile.

use hdrhistogram::Histogram;
use nnb_format::stats::{spread_known, Summary};
use nnb_format::{Metric, Role};
use nnb_units::DisplayUnit;

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{by_group, is, measured, AnalysisError, Level, Row};

/// The probe's latency per load level.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyVsLoad {
    /// Levels in plan order.
    pub levels: Vec<LatencyLevel>,
}

/// Latency at one aggregate load.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyLevel {
    /// Target aggregate neighbor load, bit/s (the level).
    pub load_bps: f64,
    /// Achieved aggregate neighbor load: the neighbors' received rates summed per
    /// repetition, mean over the repetitions where every neighbor's sink reported;
    /// `None` when no repetition did (or the level has no load).
    pub achieved_bps: Option<f64>,
    /// Repetitions behind `achieved_bps`.
    pub achieved_n: usize,
    /// Pings sent over the level's repetitions (0 when not recorded).
    pub pings_sent: u64,
    /// Pings not answered in time.
    pub pings_lost: u64,
    /// Pongs that came after their timeout.
    pub pongs_late: u64,
    /// RTT samples above the histogram's ceiling.
    pub clamped: u64,
    /// Level label, e.g. `load=50M`.
    pub label: String,
    /// Repetitions used.
    pub n: usize,
    /// RTT samples behind the pooled numbers (0 without HDR logs).
    pub samples: u64,
    /// Pooled mean RTT, ns: of all the level's RTTs together (its HDR logs summed);
    /// without HDR logs (`samples` 0) this and the other pooled fields are the
    /// means of the records' own values, as in [`LatencyLevel::runs`].
    pub mean_ns: f64,
    /// Median RTT, ns.
    pub p50_ns: f64,
    /// 90th percentile, ns.
    pub p90_ns: f64,
    /// 99th percentile, ns.
    pub p99_ns: f64,
    /// 99.9th percentile, ns.
    pub p999_ns: f64,
    /// p90 - mean, ns: how far the tail sits above the mean (thesis 6.6).
    pub p90_minus_mean_ns: f64,
    /// p99.9 - mean, ns (thesis 6.6).
    pub p999_minus_mean_ns: f64,
    /// (percentile, ns) points for a percentile plot, from the HDR logs; empty without them.
    pub percentiles: Vec<(f64, f64)>,
    /// The thesis' statistics: the mean over the repetitions of each one's own;
    /// `None` when no record has all its RTT percentiles.
    pub runs: Option<RunMeans>,
}

/// The statistics the table shows, in [`LatencyLevel::pooled`] and
/// [`RunMeans::all`] order.
pub const STATISTICS: [&str; 7] = [
    "mean",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "p90 - mean",
    "p99.9 - mean",
];

/// The [`STATISTICS`] of one distribution from its mean, p50, p90, p99 and p99.9.
fn statistics(v: [f64; 5]) -> [f64; 7] {
    [v[0], v[1], v[2], v[3], v[4], v[2] - v[0], v[4] - v[0]]
}

/// The thesis' statistics of a level (§6.2.2, 30 runs per level, their metrics
/// averaged): for each of the [`STATISTICS`], the mean over the level's measured
/// repetitions of that repetition's own value, ns, with its spread and 95% CI
/// (Student's t, [`Summary`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunMeans {
    /// Mean RTT.
    pub mean_ns: Summary,
    /// Median.
    pub p50_ns: Summary,
    /// 90th percentile.
    pub p90_ns: Summary,
    /// 99th percentile.
    pub p99_ns: Summary,
    /// 99.9th percentile.
    pub p999_ns: Summary,
    /// p90 - mean, each repetition's own.
    pub p90_minus_mean_ns: Summary,
    /// p99.9 - mean, each repetition's own.
    pub p999_minus_mean_ns: Summary,
}

impl RunMeans {
    /// The summaries in [`STATISTICS`] order.
    pub fn all(&self) -> [&Summary; 7] {
        [
            &self.mean_ns,
            &self.p50_ns,
            &self.p90_ns,
            &self.p99_ns,
            &self.p999_ns,
            &self.p90_minus_mean_ns,
            &self.p999_minus_mean_ns,
        ]
    }

    /// From the level's records: those with all five RTT percentiles count;
    /// `None` when none has.
    fn of(rows: &[&Row]) -> Option<RunMeans> {
        let per_run: Vec<[f64; 7]> = rows
            .iter()
            .filter_map(|r| {
                let mut v = [0.0; 5];
                for (slot, metric) in v.iter_mut().zip(Metric::RTT) {
                    *slot = r.metrics.get(metric)?;
                }
                Some(statistics(v))
            })
            .collect();
        let of = |i: usize| Summary::of(&per_run.iter().map(|v| v[i]).collect::<Vec<_>>());
        Some(RunMeans {
            mean_ns: of(0)?,
            p50_ns: of(1)?,
            p90_ns: of(2)?,
            p99_ns: of(3)?,
            p999_ns: of(4)?,
            p90_minus_mean_ns: of(5)?,
            p999_minus_mean_ns: of(6)?,
        })
    }
}

impl LatencyLevel {
    /// The pooled statistics in [`STATISTICS`] order.
    pub fn pooled(&self) -> [f64; 7] {
        [
            self.mean_ns,
            self.p50_ns,
            self.p90_ns,
            self.p99_ns,
            self.p999_ns,
            self.p90_minus_mean_ns,
            self.p999_minus_mean_ns,
        ]
    }
}

/// Percentiles listed for percentile plots: 0, then `100 * (1 - 10^(-i/10))` for
/// i = 1..=50 (evenly spaced on a "nines" axis up to 99.999), then 100 (the maximum).
fn plot_percentiles() -> impl Iterator<Item = f64> {
    std::iter::once(0.0)
        .chain((1..=50).map(|i| 100.0 * (1.0 - 10f64.powf(-f64::from(i) / 10.0))))
        .chain(std::iter::once(100.0))
}

/// Latency per load level of a load-steps run (the test tenant's probe); `None` for
/// other scenarios. A level uses its HDR logs when every repetition has one.
pub fn latency_vs_load(run: &Run) -> Result<Option<LatencyVsLoad>, AnalysisError> {
    if !is(run, Scenario::LoadSteps) {
        return Ok(None);
    }
    let rows = measured(run, Role::Test)?;
    let neighbors = measured(run, Role::Neighbor)?;
    let mut levels = Vec::new();
    for (_, group) in by_group(&rows) {
        for l in group {
            if let Some(mut level) = level_latency(run, &l)? {
                (level.achieved_bps, level.achieved_n) = achieved(&l, &neighbors);
                for q in l.rows.iter().map(|r| &r.quality) {
                    if let Some(c) = q.counts {
                        level.pings_sent += c.sent;
                        level.pings_lost += c.lost;
                        level.pongs_late += c.late;
                    }
                    level.clamped += q.clamped.unwrap_or(0);
                }
                levels.push(level);
            }
        }
    }
    Ok((!levels.is_empty()).then_some(LatencyVsLoad { levels }))
}

/// The achieved aggregate load of a level: per repetition (step) of the probe, the
/// sum of the neighbors' received rates in that step, when each neighbor's is known;
/// the mean over those repetitions and their count.
fn achieved(l: &Level<'_>, neighbors: &[Row]) -> (Option<f64>, usize) {
    let per_step: Vec<f64> = l
        .rows
        .iter()
        .filter_map(|probe| {
            let loads: Vec<&Row> = neighbors.iter().filter(|n| n.step == probe.step).collect();
            if loads.is_empty() {
                return None;
            }
            loads
                .iter()
                .map(|n| n.metrics.get(Metric::RateBps))
                .sum::<Option<f64>>()
        })
        .collect();
    let n = per_step.len();
    ((n > 0).then(|| per_step.iter().sum::<f64>() / n as f64), n)
}

/// One level's latency: pooled from the sum of its HDR logs, else the mean of its
/// records' percentiles (then `samples` is 0); its mean of runs from its records;
/// `None` when it has neither HDR logs nor records' percentiles.
fn level_latency(run: &Run, l: &Level<'_>) -> Result<Option<LatencyLevel>, AnalysisError> {
    let runs = RunMeans::of(&l.rows);
    let base = |n: usize, samples: u64, v: [f64; 5], percentiles: Vec<(f64, f64)>| LatencyLevel {
        load_bps: l.level,
        achieved_bps: None,
        achieved_n: 0,
        pings_sent: 0,
        pings_lost: 0,
        pongs_late: 0,
        clamped: 0,
        label: l.label.clone(),
        n,
        samples,
        mean_ns: v[0],
        p50_ns: v[1],
        p90_ns: v[2],
        p99_ns: v[3],
        p999_ns: v[4],
        p90_minus_mean_ns: v[2] - v[0],
        p999_minus_mean_ns: v[4] - v[0],
        percentiles,
        runs: runs.clone(),
    };
    if l.rows.iter().all(|r| r.hdr_log.is_some()) {
        let mut sum: Option<Histogram<u64>> = None;
        for rel in l.rows.iter().filter_map(|r| r.hdr_log.as_deref()) {
            let h = run.hdr(rel)?;
            match sum.as_mut() {
                Some(s) => s.add(&h).map_err(|e| AnalysisError::Data {
                    run: run.run_id.clone(),
                    message: format!("cannot add the histogram of {rel}: {e:?}"),
                })?,
                None => sum = Some(h),
            }
        }
        if let Some(h) = sum.filter(|h| !h.is_empty()) {
            let q = |p: f64| h.value_at_quantile(p / 100.0) as f64;
            let v = [h.mean(), q(50.0), q(90.0), q(99.0), q(99.9)];
            let percentiles = plot_percentiles().map(|p| (p, q(p))).collect();
            return Ok(Some(base(l.rows.len(), h.len(), v, percentiles)));
        }
    }
    let Some(r) = &runs else {
        return Ok(None);
    };
    let v = [&r.mean_ns, &r.p50_ns, &r.p90_ns, &r.p99_ns, &r.p999_ns].map(|s| s.mean);
    Ok(Some(base(l.rows.len(), 0, v, Vec::new())))
}

impl LatencyVsLoad {
    /// One row per level: target and achieved load (Mbit/s), n, loss %, RTT samples,
    /// then for each of the [`STATISTICS`] (µs) its pooled value, its mean of runs
    /// and that mean's 95% CI half-width (`±ci95`; `n/a` for one repetition). The
    /// pooled cells are empty for a level without HDR logs.
    pub fn table(&self) -> Table {
        let mbit = DisplayUnit::BITS_PER_SECOND.table();
        let micros = DisplayUnit::NANOSECONDS.at(-2);
        let us = |ns: f64| Cell::num(micros.value(ns), 2);
        let rows = self
            .levels
            .iter()
            .map(|l| {
                let mut row = vec![
                    Cell::text(&l.label),
                    Cell::num(mbit.value(l.load_bps), 1),
                    l.achieved_bps
                        .map_or(Cell::Empty, |a| Cell::num(mbit.value(a), 1)),
                    Cell::Int(l.n as i64),
                    if l.pings_sent > 0 {
                        Cell::num(l.pings_lost as f64 / l.pings_sent as f64 * 100.0, 2)
                    } else {
                        Cell::Empty
                    },
                    if l.samples > 0 {
                        Cell::Int(i64::try_from(l.samples).unwrap_or(i64::MAX))
                    } else {
                        Cell::Empty
                    },
                ];
                let runs = l.runs.as_ref().map(RunMeans::all);
                for (i, pooled) in l.pooled().into_iter().enumerate() {
                    row.push(if l.samples > 0 {
                        us(pooled)
                    } else {
                        Cell::Empty
                    });
                    match runs.map(|r| r[i]) {
                        Some(s) => row.extend([
                            us(s.mean),
                            if spread_known(s.n) {
                                us((s.ci95_high - s.ci95_low) / 2.0)
                            } else {
                                Cell::text("n/a")
                            },
                        ]),
                        None => row.extend([Cell::Empty, Cell::Empty]),
                    }
                }
                row
            })
            .collect();
        let mut notes = vec![
            "round-trip times of the test node's probe, µs; p90 - mean and p99.9 - mean show \
             how far the tail sits above the mean (thesis 6.6)"
                .to_string(),
            "pooled = of all the level's RTTs together (its repetitions' HDR logs summed); \
             mean of runs = the mean over the repetitions of each one's own value, ±ci95 its \
             95% CI half-width (Student's t): the thesis' definition (30 runs per level, \
             averaged), the one to compare with its figures"
                .to_string(),
        ];
        notes.push(
            "load = the target aggregate; achieved = the neighbors' received rates summed, \
             mean over the repetitions where every neighbor's sink reported"
                .to_string(),
        );
        for l in &self.levels {
            if l.load_bps > 0.0 && l.achieved_n < l.n {
                notes.push(format!(
                    "{}: achieved load known in {} of {} repetitions (sink reports missing)",
                    l.label, l.achieved_n, l.n
                ));
            }
            if l.pongs_late > 0 || l.clamped > 0 {
                notes.push(format!(
                    "{}: {} pongs came after their timeout (counted lost), {} RTTs above \
                     the histogram's ceiling (clamped)",
                    l.label, l.pongs_late, l.clamped
                ));
            }
            let runs = l.runs.as_ref().map_or(0, |r| r.mean_ns.n);
            if runs < l.n {
                notes.push(format!(
                    "{}: mean of runs over {runs} of {} repetitions (the others' records \
                     lack RTT percentiles)",
                    l.label, l.n
                ));
            }
        }
        let gaps: Vec<[f64; 2]> = self
            .levels
            .iter()
            .filter_map(|l| l.runs.as_ref())
            .map(|r| [r.p90_minus_mean_ns.mean, r.p999_minus_mean_ns.mean])
            .collect();
        if !gaps.is_empty() {
            let avg = |i: usize| gaps.iter().map(|g| g[i]).sum::<f64>() / gaps.len() as f64;
            notes.push(format!(
                "averaged over the {} level{}, as the thesis quotes Fig 6.6: mean of runs' \
                 p90 - mean {:.2} µs, p99.9 - mean {:.2} µs",
                gaps.len(),
                if gaps.len() == 1 { "" } else { "s" },
                micros.value(avg(0)),
                micros.value(avg(1))
            ));
        }
        if self.levels.iter().any(|l| l.pings_lost > 0) {
            notes.push(
                "loss % = pings unanswered within the timeout: the RTT columns describe only \
                 the answered ones"
                    .to_string(),
            );
        }
        if self.levels.iter().any(|l| l.samples == 0) {
            notes.push("levels without samples: no HDR logs, no pooled values".to_string());
        }
        Table {
            name: "latency".to_string(),
            title: "Latency vs aggregate neighbor load".to_string(),
            columns: [
                "level".to_string(),
                mbit.title("load"),
                mbit.title("achieved"),
                "n".to_string(),
                "loss %".to_string(),
                "samples".to_string(),
            ]
            .into_iter()
            .chain(STATISTICS.into_iter().flat_map(|q| {
                [
                    micros.title(&format!("pooled: {q}")),
                    micros.title(&format!("mean of runs: {q}")),
                    micros.title(&format!("±ci95: {q}")),
                ]
            }))
            .collect(),
            rows,
            notes,
        }
    }
}
