//! What the neighbors actually did, per level of a neighbor staircase (format version
//! 3's `background.jsonl`): the busy neighbors' summed ops/s, or the load neighbors'
//! summed target, sent and received rates, so the degradation at `neighbors=2` is
//! read against what the two neighbors achieved. A load-steps run measures its
//! neighbors' loads as samples: the latency table's achieved column shows them.

use nnb_format::{BackgroundJob, Role, SampleStatus, StepGroup};
use nnb_units::DisplayUnit;
use polars::prelude::{col, IntoLazy, SortMultipleOptions};

use crate::read::{Background, Run, Scenario};
use crate::table::{Cell, Table};

use super::{group_named, is, polars_err, AnalysisError};

/// The neighbors' achieved aggregate per level.
#[derive(Debug, Clone, PartialEq)]
pub struct AchievedBackground {
    /// Levels with background jobs, in plan order.
    pub levels: Vec<BackgroundLevel>,
}

/// What one level's neighbors achieved, summed over the neighbors; each neighbor's
/// figure is the mean over its jobs at the level (one, unless a failed attempt
/// restarted them). A sum is over the neighbors that reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct BackgroundLevel {
    /// Scenario part (`busy`).
    pub group: StepGroup,
    /// Level label, e.g. `neighbors=2`.
    pub label: String,
    /// Numeric level.
    pub level: f64,
    /// Neighbors with a background job at the level.
    pub neighbors: usize,
    /// Neighbors whose jobs reported what they achieved (a command neighbor: how
    /// long it ran).
    pub reported: usize,
    /// Background jobs at the level that failed or could not be stopped.
    pub failed: usize,
    /// Busy neighbors: operations per second, summed.
    pub ops_per_sec: Option<f64>,
    /// Load neighbors: target rate, bit/s, summed over the neighbors that reported.
    pub target_bps: Option<f64>,
    /// Load neighbors: payload rate sent, bit/s, summed.
    pub sent_bps: Option<f64>,
    /// Load neighbors: payload rate the sink received, bit/s, summed over the
    /// neighbors whose every stream's sink report arrived.
    pub rate_bps: Option<f64>,
    /// Load neighbors: `rate_bps` in percent of the same neighbors' summed target.
    pub received_pct: Option<f64>,
}

/// The busy neighbors' achieved aggregate per level of a neighbor-staircase run (idle
/// neighbors run nothing); `None` for other scenarios and for runs without background
/// records (before version 3).
pub fn achieved_background(run: &Run) -> Result<Option<AchievedBackground>, AnalysisError> {
    if !is(run, Scenario::NeighborStaircase) {
        return Ok(None);
    }
    let neighbors: Vec<&Background> = run
        .background
        .iter()
        .filter(|b| b.role == Role::Neighbor && b.job != BackgroundJob::Idle)
        .collect();
    if neighbors.is_empty() {
        return Ok(None);
    }
    let mut levels = Vec::new();
    for LevelSteps {
        group,
        label,
        level,
        steps,
    } in step_levels(run)?
    {
        let here: Vec<&Background> = neighbors
            .iter()
            .copied()
            .filter(|b| b.steps.iter().any(|s| steps.contains(s)))
            .collect();
        if here.is_empty() {
            continue;
        }
        let mut tenants: Vec<&str> = here.iter().map(|b| b.tenant.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        let mut l = BackgroundLevel {
            group,
            label,
            level,
            neighbors: tenants.len(),
            reported: 0,
            failed: here
                .iter()
                .filter(|b| b.status == SampleStatus::Failed)
                .count(),
            ops_per_sec: None,
            target_bps: None,
            sent_bps: None,
            rate_bps: None,
            received_pct: None,
        };
        let mut received_of = None;
        for t in tenants {
            let jobs: Vec<&Background> = here.iter().copied().filter(|b| b.tenant == t).collect();
            let ops = mean(&jobs, |b| b.achieved.ops_per_sec);
            let sent = mean(&jobs, |b| b.achieved.sent_bps);
            // A command neighbor reports only how long it ran: it reported.
            let ran = mean(&jobs, |b| b.achieved.runtime_s);
            if ops.is_none() && sent.is_none() && ran.is_none() {
                continue;
            }
            l.reported += 1;
            add(&mut l.ops_per_sec, ops);
            add(&mut l.sent_bps, sent);
            let target = sent.and(mean(&jobs, |b| b.target_bps));
            let rate = mean(&jobs, |b| b.achieved.rate_bps);
            add(&mut l.target_bps, target);
            add(&mut l.rate_bps, rate);
            add(&mut received_of, rate.and(target));
        }
        l.received_pct = l
            .rate_bps
            .zip(received_of)
            .filter(|(_, t)| *t > 0.0)
            .map(|(r, t)| r / t * 100.0);
        levels.push(l);
    }
    Ok((!levels.is_empty()).then_some(AchievedBackground { levels }))
}

/// The mean of `f` over the jobs that have it.
fn mean(jobs: &[&Background], f: impl Fn(&Background) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = jobs.iter().filter_map(|b| f(b)).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Adds `v` to the sum `to` (which stays `None` until something is added).
fn add(to: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *to = Some(to.unwrap_or(0.0) + v);
    }
}

/// One level of a run and the ids of its steps.
struct LevelSteps {
    group: StepGroup,
    label: String,
    level: f64,
    steps: Vec<String>,
}

/// Every level of the run's records in plan order, with the ids of its steps
/// (warm-ups and failed ones included: a background job runs through them too).
fn step_levels(run: &Run) -> Result<Vec<LevelSteps>, AnalysisError> {
    let df = run
        .samples
        .clone()
        .lazy()
        .sort(
            ["step_index"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .select([col("step"), col("group"), col("level"), col("level_label")])
        .collect()
        .map_err(polars_err(run))?;
    let read = || -> Result<Vec<LevelSteps>, polars::error::PolarsError> {
        let step = df.column("step")?.str()?;
        let group = df.column("group")?.str()?;
        let level = df.column("level")?.f64()?;
        let label = df.column("level_label")?.str()?;
        let mut out: Vec<LevelSteps> = Vec::new();
        for i in 0..df.height() {
            let (Some(s), Some(v), Some(l)) = (step.get(i), level.get(i), label.get(i)) else {
                continue;
            };
            let g = group_named(group.get(i))?;
            match out.iter_mut().find(|o| o.group == g && o.label == l) {
                Some(o) if !o.steps.iter().any(|x| x == s) => o.steps.push(s.to_string()),
                Some(_) => {}
                None => out.push(LevelSteps {
                    group: g,
                    label: l.to_string(),
                    level: v,
                    steps: vec![s.to_string()],
                }),
            }
        }
        Ok(out)
    };
    read().map_err(polars_err(run))
}

impl AchievedBackground {
    /// One row per level: neighbors (reported / failed), then ops/s for busy burners
    /// and target, sent, received (Mbit/s) and received % of target for loads, the
    /// columns of a kind the run has none of left out.
    pub fn table(&self) -> Table {
        let busy = self.levels.iter().any(|l| l.ops_per_sec.is_some());
        let load = self.levels.iter().any(|l| l.target_bps.is_some());
        let shown = DisplayUnit::BITS_PER_SECOND.table();
        let mbit = |v: Option<f64>| Cell::opt(v.map(|v| shown.value(v)), 1);
        let rows = self
            .levels
            .iter()
            .map(|l| {
                let mut row = vec![
                    Cell::text(format!("{}/{}", l.group, l.label)),
                    Cell::Int(l.neighbors as i64),
                    Cell::Int(l.reported as i64),
                    Cell::Int(l.failed as i64),
                ];
                if busy {
                    row.push(Cell::opt(l.ops_per_sec, 0));
                }
                if load {
                    row.extend([mbit(l.target_bps), mbit(l.sent_bps), mbit(l.rate_bps)]);
                    row.push(Cell::opt(l.received_pct, 1));
                }
                row
            })
            .collect();
        let mut columns = ["level", "neighbors", "reported", "failed"]
            .map(String::from)
            .to_vec();
        if busy {
            columns.push("ops/s".to_string());
        }
        if load {
            columns.extend(["target", "sent", "received"].map(|c| shown.title(c)));
            columns.push("received %".to_string());
        }
        let mut notes = vec![
            "what the neighbors' background jobs achieved, summed over the neighbors that \
             reported (each neighbor's mean over its jobs at the level); a job runs over \
             one level's repetitions"
                .to_string(),
        ];
        if load {
            notes.push(
                "received = the sink's count, only from neighbors whose every stream's report \
                 arrived; received % = received / those neighbors' target"
                    .to_string(),
            );
        }
        for l in self.levels.iter().filter(|l| l.reported < l.neighbors) {
            notes.push(format!(
                "{}/{}: {} of {} neighbors reported what they achieved",
                l.group, l.label, l.reported, l.neighbors
            ));
        }
        Table {
            name: "background".to_string(),
            title: "Achieved background per level".to_string(),
            columns,
            rows,
            notes,
        }
    }
}
