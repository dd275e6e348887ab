//! The gap between a test node and metal at equal busy threads (thesis §5.2.1
//! l.296-301, Fig 5.6; §5.4 l.406): a neighbor staircase's busy pass beside a thread
//! sweep on the metal host, level by level where the host runs as many busy threads.
//!
//! - **Busy threads** at staircase level k: the test node's threads plus k times a
//!   busy neighbor's ([`busy_threads`]); the metal sweep's level is its thread count.
//!   A staircase level is *matched* where the sweep measured exactly that count.
//! - **Gap** (the thesis' "difference", positive = the VM is slower): how much longer
//!   the same work takes on the VM, `t_vm / t_metal - 1` in percent for a runtime, and
//!   `p_metal / p_vm - 1` for a throughput (the same ratio of times). The thesis' m5
//!   case: 7.06 s against 5.165 s is 36.7%.
//! - **Its 95% CI**: the two runs' repetitions are not paired, so the ratio of the two
//!   means gets the delta method's interval ([`nnb_format::stats::ratio_ci95`]: both
//!   means' uncertainty propagated, Welch-Satterthwaite degrees of freedom).
//! - **Level 0** is the test node alone; **full host** is the staircase's top busy
//!   level (when the sweep has its thread count).
//! - **Converged**: the first matched level from which on the gap's 95% CI includes 0
//!   at that level and at every later matched level (no level after it differs
//!   significantly from metal). A level without an interval (one repetition on either
//!   side) cannot show that, so it ends any run of converged levels. No tolerance is
//!   used: a gap that stays significant, however small, is not convergence.

use nnb_format::stats::{ratio_ci95, Summary};
use nnb_format::{Metric, Role, StepGroup};

use crate::read::Run;
use crate::table::{Cell, Table};

use super::{Degradation, Knees, LevelStats};

/// One staircase level beside metal at the same busy threads.
#[derive(Debug, Clone, PartialEq)]
pub struct GapLevel {
    /// Neighbors at this level.
    pub neighbors: f64,
    /// The level's label (`neighbors=2`).
    pub label: String,
    /// Busy threads on the host at this level.
    pub threads: f64,
    /// The test node's repetitions and mean.
    pub vm_n: usize,
    /// See `vm_n`.
    pub vm_mean: f64,
    /// The metal sweep's repetitions and mean at `threads`.
    pub metal_n: usize,
    /// See `metal_n`.
    pub metal_mean: f64,
    /// The gap in percent, positive = the VM slower (module doc).
    pub gap_pct: f64,
    /// Its 95% interval in percent; `None` with fewer than two repetitions on a side
    /// or no spread on either.
    pub gap_ci95: Option<(f64, f64)>,
}

impl GapLevel {
    /// Whether the gap's interval includes 0 (not significantly different from metal).
    pub fn includes_zero(&self) -> bool {
        self.gap_ci95.is_some_and(|(lo, hi)| lo <= 0.0 && hi >= 0.0)
    }
}

/// A staircase beside a metal sweep: the gap at every matched level.
#[derive(Debug, Clone, PartialEq)]
pub struct MetalGap {
    /// The staircase's name (its label).
    pub stair: String,
    /// The metal sweep's name.
    pub metal: String,
    /// The metric both runs measured.
    pub metric: Option<Metric>,
    /// Matched levels, fewest neighbors first.
    pub levels: Vec<GapLevel>,
    /// The staircase's lowest busy level (the test node alone), when matched.
    pub level0: Option<GapLevel>,
    /// The staircase's top busy level (the full host), when matched.
    pub full_host: Option<GapLevel>,
    /// The neighbors of the first level from which the gap stays not significant
    /// (module doc); `None` when it never does.
    pub converged_from: Option<f64>,
    /// Why levels or the whole table are missing, and the method.
    pub notes: Vec<String>,
}

/// Busy threads on the host per staircase level, `(test, each)`: level k has
/// `test + k * each`. The test node's are its burner's `threads`, else all its vCPUs
/// (what a burner without `threads` runs on); a busy neighbor's are its burner's
/// `threads`, else its vCPUs. `None` when the experiment does not say.
pub(crate) fn busy_threads(run: &Run) -> Option<(f64, f64)> {
    let e = &run.manifest.experiment;
    let test = e
        .scenario
        .test
        .as_ref()
        .and_then(|t| t.threads)
        .or_else(|| e.tenant(Role::Test)?.vcpus)?;
    let busy = e.scenario.busy.as_ref().and_then(|b| b.threads);
    let each = busy.or_else(|| e.tenant(Role::Neighbor)?.vcpus)?;
    Some((test as f64, each as f64))
}

/// The gap of one level: `vm` against `metal`, of a metric where higher is better or
/// not.
fn gap_of(l: &LevelStats, threads: f64, m: &LevelStats, higher_is_better: bool) -> GapLevel {
    let (slow, fast) = if higher_is_better {
        (&m.values, &l.values)
    } else {
        (&l.values, &m.values)
    };
    let ci = Summary::of(slow)
        .zip(Summary::of(fast))
        .and_then(|(s, f)| ratio_ci95(&s, &f))
        .map(|(lo, hi)| ((lo - 1.0) * 100.0, (hi - 1.0) * 100.0));
    let ratio = if higher_is_better {
        m.mean / l.mean
    } else {
        l.mean / m.mean
    };
    GapLevel {
        neighbors: l.level,
        label: l.label.clone(),
        threads,
        vm_n: l.n,
        vm_mean: l.mean,
        metal_n: m.n,
        metal_mean: m.mean,
        gap_pct: (ratio - 1.0) * 100.0,
        gap_ci95: ci,
    }
}

/// The gap table of a staircase run (`stair`: its name, run and degradation) beside a
/// metal thread sweep (`metal`: its name and knees). Levels or the whole table left
/// out say why in the notes (different metrics, unknown threads per tenant, thread
/// counts the sweep did not run).
pub fn metal_gap(stair: (&str, &Run, &Degradation), metal: (&str, &Knees)) -> MetalGap {
    let (stair_name, run, d) = stair;
    let (metal_name, k) = metal;
    let mut gap = MetalGap {
        stair: stair_name.to_string(),
        metal: metal_name.to_string(),
        metric: (d.metric == k.metric).then_some(d.metric),
        levels: Vec::new(),
        level0: None,
        full_host: None,
        converged_from: None,
        notes: Vec::new(),
    };
    if d.metric != k.metric {
        gap.notes.push(format!(
            "{stair_name} measured {} and {metal_name} {}: no gap between different metrics",
            d.metric, k.metric
        ));
        return gap;
    }
    let Some((test, each)) = busy_threads(run) else {
        gap.notes.push(format!(
            "{stair_name}: the experiment does not say how many threads the test node and a \
             busy neighbor run: no level can be matched to a thread count"
        ));
        return gap;
    };
    let Some(busy) = d.groups.iter().find(|g| g.group == StepGroup::Busy) else {
        gap.notes
            .push(format!("{stair_name}: no busy pass: nothing to compare"));
        return gap;
    };
    let mut unmatched = Vec::new();
    for l in &busy.levels {
        let threads = test + l.level * each;
        match k.levels.iter().find(|m| m.level == threads) {
            Some(m) => gap.levels.push(gap_of(l, threads, m, d.higher_is_better)),
            None => unmatched.push(format!("{} ({threads} threads)", l.label)),
        }
    }
    let lowest = busy.levels.first();
    let top = busy.levels.last();
    let find = |l: Option<&LevelStats>| {
        l.and_then(|l| gap.levels.iter().find(|g| g.neighbors == l.level))
            .cloned()
    };
    gap.level0 = find(lowest);
    gap.full_host = find(top);
    gap.converged_from = gap
        .levels
        .iter()
        .rposition(|g| !g.includes_zero())
        .map_or(Some(0), |i| Some(i + 1))
        .and_then(|i| gap.levels.get(i))
        .map(|g| g.neighbors);
    if !unmatched.is_empty() {
        gap.notes.push(format!(
            "{metal_name} has no level at the busy threads of {}: left out",
            unmatched.join(", ")
        ));
    }
    if gap.level0.is_none() {
        if let Some(l) = lowest {
            gap.notes.push(format!(
                "no gap at level 0: {metal_name} did not run {} threads",
                test + l.level * each
            ));
        }
    }
    if gap.full_host.is_none() {
        if let Some(l) = top {
            gap.notes.push(format!(
                "no gap at the full host: {metal_name} did not run {} threads",
                test + l.level * each
            ));
        }
    }
    gap
}

/// `lo..hi` of an interval in percent, `n.s.` where it includes 0.
fn ci_text(g: &GapLevel) -> Cell {
    match g.gap_ci95 {
        Some((lo, hi)) => {
            let ns = if g.includes_zero() { " n.s." } else { "" };
            Cell::Text(format!("{lo:.2}..{hi:.2}{ns}"))
        }
        None => Cell::Empty,
    }
}

/// One summary sentence: the gap at a named level with its interval.
fn headline(what: &str, g: Option<&GapLevel>) -> String {
    match g {
        Some(g) => {
            let ci = g
                .gap_ci95
                .map_or("no interval (one repetition)".to_string(), |(lo, hi)| {
                    format!("95% CI {lo:.2}..{hi:.2}%")
                });
            format!(
                "{what}: {:.2}% ({ci}) at {} ({} busy threads)",
                g.gap_pct, g.label, g.threads
            )
        }
        None => format!("{what}: not matched"),
    }
}

impl MetalGap {
    /// The table, named `name` (the report's file stem): one row per matched level,
    /// level 0, the full host and the converged level marked, the three headline
    /// numbers and the method in the notes.
    pub fn table(&self, name: &str) -> Table {
        let d = self.metric.map_or(3, Metric::decimals);
        let converged_row = self
            .converged_from
            .and_then(|c| self.levels.iter().position(|g| g.neighbors == c));
        let rows = self
            .levels
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let mut at = Vec::new();
                if self.level0.as_ref() == Some(g) {
                    at.push("level 0 (test node alone)");
                }
                if self.full_host.as_ref() == Some(g) {
                    at.push("full host");
                }
                if converged_row == Some(i) {
                    at.push("converged from here");
                }
                vec![
                    Cell::text(&g.label),
                    Cell::num(g.threads, 0),
                    Cell::Int(g.vm_n as i64),
                    Cell::num(g.vm_mean, d),
                    Cell::Int(g.metal_n as i64),
                    Cell::num(g.metal_mean, d),
                    Cell::num(g.gap_pct, 2),
                    ci_text(g),
                    Cell::text(at.join(", ")),
                ]
            })
            .collect();
        let unit = self
            .metric
            .map_or(String::new(), |m| format!(" ({})", m.unit()));
        let mut notes = vec![
            headline("gap at level 0", self.level0.as_ref()),
            headline("gap at the full host", self.full_host.as_ref()),
            match self
                .converged_from
                .and_then(|c| self.levels.iter().find(|g| g.neighbors == c))
            {
                Some(g) => format!(
                    "converged from {} ({} busy threads): from there on every matched level's \
                     95% CI includes 0",
                    g.label, g.threads
                ),
                None => "not converged: the gap at the last matched level is significant (or \
                         has no interval)"
                    .to_string(),
            },
            "gap = how much longer the same work takes on the VM than on metal at the same \
             busy threads, t_vm / t_metal - 1 (p_metal / p_vm - 1 for a throughput), percent, \
             positive = VM slower (the thesis' 36.6% at 2 threads on m5); busy threads = the \
             test node's threads + neighbors x a busy neighbor's; 95% CI of the ratio of the \
             two means by the delta method (both runs' repetitions, Welch-Satterthwaite df), \
             `n.s.` where it includes 0; converged = the first level from which every matched \
             level's CI includes 0 (no tolerance)"
                .to_string(),
        ];
        notes.extend(self.notes.iter().cloned());
        Table {
            name: name.to_string(),
            title: format!(
                "Test node vs metal: {} beside {} at equal busy threads{unit}",
                self.stair, self.metal
            ),
            columns: [
                "level",
                "busy threads",
                "test node n",
                "test node mean",
                "metal n",
                "metal mean",
                "gap %",
                "gap 95% CI",
                "at",
            ]
            .map(String::from)
            .to_vec(),
            rows,
            notes,
        }
    }
}

/// The file stem of one staircase-and-sweep pair's output: `prefix` alone when the
/// runs hold one pair, else `prefix_STAIR_METAL` (the report's chart and table, and
/// the table `nnb analyze` prints, are named alike).
pub fn pair_name(prefix: &str, many: bool, stair: &str, metal: &str) -> String {
    if many {
        format!("{prefix}_{stair}_{metal}")
    } else {
        prefix.to_string()
    }
}

/// The gap table ([`metal_gap`]) of every neighbor staircase among `runs` beside every
/// thread sweep among them, named by run id ([`pair_name`]); empty unless the runs
/// hold both.
pub fn metal_gap_tables(runs: &[Run]) -> Result<Vec<Table>, super::AnalysisError> {
    let mut stairs = Vec::new();
    let mut sweeps = Vec::new();
    for run in runs {
        if super::is(run, crate::read::Scenario::NeighborStaircase) {
            if let Some(d) = super::degradation(run)? {
                stairs.push((run, d));
            }
        } else if let Some(k) = super::knees(run)? {
            sweeps.push((run, k));
        }
    }
    let many = stairs.len() * sweeps.len() > 1;
    let mut tables = Vec::new();
    for (stair, d) in &stairs {
        for (sweep, k) in &sweeps {
            let gap = metal_gap((&stair.label(), stair, d), (&sweep.label(), k));
            tables.push(gap.table(&pair_name("metal_gap", many, &stair.run_id, &sweep.run_id)));
        }
    }
    Ok(tables)
}
