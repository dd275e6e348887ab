//! The isolation matrix of Volpert et al. (seed 004, Tables 2-4): tenant a's
//! performance alone in each state (`p_a`) against beside tenant b (`p_b`), as
//! `I_plr = |p_a - p_b| / p_a` and `I_ulr = |p_a - p_b| / p_max`.
//!
//! `p_max` is "the maximum possible utilisation a resource can achieve" (eq. 4): the
//! whole resource, not what one tenant gets. The paper's tables work out to 2 CPUs x
//! 100% = 200 for the CPU (Table 2, id 11: |25.00 - 23.48| = 1.52 is I_ulr 0.76%) and
//! 100% of the link for the network (Table 3). nnb measures it in the plan's
//! capacity step (group `capacity`, id 0): tenant a alone with a burner thread pinned
//! on every online CPU of the host, or with a load far above the link's rate, so
//! `p_max` is in the metric's own units (ops/s, bit/s). Runs made before that step
//! existed have no capacity: `p_max` then stands in as a's unrestricted baseline
//! (id 4), or without one the largest baseline, and [`PmaxSource`] and the table's
//! note say which stand-in was used.

use std::collections::BTreeSet;

use nnb_format::stats::Summary;
use nnb_format::{Metric, Role};

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{by_group, is, measured, AnalysisError, Row};

/// Baselines and pairs of an isolation-matrix run.
#[derive(Debug, Clone, PartialEq)]
pub struct Isolation {
    /// The primary metric of tenant a (throughput or rate).
    pub metric: Metric,
    /// The maximum I_ulr divides by: the capacity step's mean, or a stand-in (see
    /// `p_max_source`).
    pub p_max: f64,
    /// Where `p_max` came from.
    pub p_max_source: PmaxSource,
    /// Scenarios 1-4: a alone.
    pub baselines: Vec<IsolationBaseline>,
    /// Scenarios 5-16: a beside b.
    pub pairs: Vec<IsolationPair>,
}

/// Where an isolation matrix's `p_max` came from.
#[derive(Debug, Clone, PartialEq)]
pub enum PmaxSource {
    /// The run's capacity step (id 0): tenant a alone using the whole resource of
    /// the host, the resource maximum of eq. 4.
    Capacity {
        /// Repetitions averaged.
        n: usize,
        /// CPUs the capacity burn kept busy (the distinct CPUs its threads were
        /// pinned on); `None` for a load, or without a recorded placement.
        cpus: Option<usize>,
    },
    /// No capacity step (a run made before it existed): a's unrestricted baseline
    /// (id 4) stands in, which is not the resource maximum.
    UnrestrictedBaseline,
    /// Neither a capacity step nor an unrestricted baseline: a's largest baseline
    /// stands in.
    LargestBaseline {
        /// That baseline's Table 1 id.
        id: u32,
        /// Its state, e.g. `overcommitted`.
        state: String,
    },
}

/// Tenant a alone in one state.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolationBaseline {
    /// Table 1 id (1-4).
    pub id: u32,
    /// a's state, e.g. `saturated`.
    pub state: String,
    /// Mean of the repetitions.
    pub mean: f64,
    /// Repetitions used.
    pub n: usize,
}

/// Tenant a beside tenant b.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolationPair {
    /// Table 1 id (5-16).
    pub id: u32,
    /// Short name as in the paper, e.g. `a_s b_o`.
    pub shortname: String,
    /// a's state.
    pub state_a: String,
    /// b's state.
    pub state_b: String,
    /// a's baseline in `state_a`.
    pub p_a: f64,
    /// a's mean beside b.
    pub p_b: f64,
    /// `|p_a - p_b| / p_a`, a fraction.
    pub i_plr: f64,
    /// `|p_a - p_b| / p_max`, a fraction.
    pub i_ulr: f64,
    /// Repetitions used for `p_b`.
    pub n: usize,
}

/// One letter per state, as in the paper's short names (`a_s b_o`).
fn letter(state: &str) -> &'static str {
    match state {
        "undercommitted" => "u",
        "saturated" => "s",
        "overcommitted" => "o",
        "unrestricted" => "f",
        _ => "?",
    }
}

/// `a=saturated,b=overcommitted` into (`saturated`, Some(`overcommitted`)).
fn states(label: &str) -> (String, Option<String>) {
    let mut a = String::new();
    let mut b = None;
    for part in label.split(',') {
        match part.split_once('=') {
            Some(("a", s)) => a = s.to_string(),
            Some(("b", s)) => b = Some(s.to_string()),
            _ => {}
        }
    }
    (a, b)
}

/// CPUs a capacity burn kept busy: the distinct pinned CPUs of the first recorded
/// placement.
fn busy_cpus(rows: &[&Row]) -> Option<usize> {
    let placement = rows.iter().find_map(|r| r.quality.placement.as_ref())?;
    let cpus: BTreeSet<usize> = placement.slots.iter().filter_map(|s| s.cpu).collect();
    (!cpus.is_empty()).then_some(cpus.len())
}

/// The isolation metrics of an isolation-matrix run (tenant a's records); `None` for
/// other scenarios. `p_max` is the capacity step's mean; without one, a's
/// unrestricted baseline (Table 1 id 4), or else the largest baseline, stands in.
pub fn isolation(run: &Run) -> Result<Option<Isolation>, AnalysisError> {
    if !is(run, Scenario::IsolationMatrix) {
        return Ok(None);
    }
    let rows = measured(run, Role::Test)?;
    let data_err = |message: String| AnalysisError::Data {
        run: run.run_id.clone(),
        message,
    };
    let no_baseline = || data_err("no baseline of tenant a: I_plr needs one".to_string());
    let metric = rows.iter().find_map(|r| r.metric).ok_or_else(no_baseline)?;
    let mut baselines = Vec::new();
    let mut pairs = Vec::new();
    let mut capacity = None;
    for (group, levels) in by_group(&rows) {
        for l in levels {
            let values: Vec<f64> = l.rows.iter().filter_map(|r| r.value).collect();
            let Some(s) = Summary::of(&values) else {
                continue;
            };
            let (a, b) = states(&l.label);
            match (group.as_str(), b) {
                ("capacity", _) => {
                    capacity = Some((
                        s.mean,
                        PmaxSource::Capacity {
                            n: s.n,
                            cpus: busy_cpus(&l.rows),
                        },
                    ))
                }
                ("baseline", _) => baselines.push(IsolationBaseline {
                    id: l.level as u32,
                    state: a,
                    mean: s.mean,
                    n: s.n,
                }),
                ("pair", Some(b)) => pairs.push((l.level as u32, a, b, s.mean, s.n)),
                _ => {
                    return Err(data_err(format!(
                        "unexpected isolation-matrix level `{}` in group `{group}`",
                        l.label
                    )))
                }
            }
        }
    }
    let unrestricted = || {
        baselines
            .iter()
            .find(|b| b.state == "unrestricted")
            .map(|b| (b.mean, PmaxSource::UnrestrictedBaseline))
    };
    let largest = || {
        baselines
            .iter()
            .max_by(|x, y| x.mean.total_cmp(&y.mean))
            .map(|b| {
                let source = PmaxSource::LargestBaseline {
                    id: b.id,
                    state: b.state.clone(),
                };
                (b.mean, source)
            })
    };
    let (p_max, p_max_source) = capacity
        .or_else(unrestricted)
        .or_else(largest)
        .ok_or_else(no_baseline)?;
    let pairs = pairs
        .into_iter()
        .map(|(id, a, b, p_b, n)| {
            let p_a = baselines
                .iter()
                .find(|x| x.state == a)
                .map(|x| x.mean)
                .ok_or_else(|| data_err(format!("no baseline of tenant a {a} for pair {id}")))?;
            Ok(IsolationPair {
                id,
                shortname: format!("a_{} b_{}", letter(&a), letter(&b)),
                state_a: a,
                state_b: b,
                p_a,
                p_b,
                i_plr: (p_a - p_b).abs() / p_a,
                i_ulr: (p_a - p_b).abs() / p_max,
                n,
            })
        })
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    Ok(Some(Isolation {
        metric,
        p_max,
        p_max_source,
        baselines,
        pairs,
    }))
}

impl Isolation {
    /// What the table's note says of `p_max`: its value and where it came from.
    pub fn p_max_note(&self) -> String {
        let value = format!(
            "p_max = {:.*} {}",
            self.metric.decimals(),
            self.p_max,
            self.metric.unit()
        );
        let stand_in = |what: String, missing: &str| {
            format!(
                "{value}: stand-in, {what}; this run has no capacity step{missing}, so I_ulr \
                 is relative to it, not to the resource maximum"
            )
        };
        match &self.p_max_source {
            PmaxSource::Capacity { n, cpus } => {
                let what = match (self.metric, cpus) {
                    (Metric::RateBps, _) => "the link's capacity".to_string(),
                    (_, Some(c)) => format!("the host's capacity, {c} CPUs busy"),
                    (_, None) => "the host's capacity".to_string(),
                };
                format!("{value}: {what}, tenant a alone (capacity step, id 0, n = {n})")
            }
            PmaxSource::UnrestrictedBaseline => {
                stand_in("a's unrestricted baseline (id 4)".to_string(), "")
            }
            PmaxSource::LargestBaseline { id, state } => stand_in(
                format!("a's largest baseline ({state}, id {id})"),
                " and no unrestricted baseline",
            ),
        }
    }

    /// Rows as in seed 004 Table 2: id, shortname, a, a', I_ulr %, I_plr %; the
    /// capacity step first as id 0 `capacity` when the run has one.
    pub fn table(&self) -> Table {
        let d = self.metric.decimals();
        let row = |id: u32, name: String, a: f64| {
            vec![
                Cell::Int(i64::from(id)),
                Cell::text(name),
                Cell::num(a, d),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
            ]
        };
        let mut rows: Vec<Vec<Cell>> = Vec::new();
        if let PmaxSource::Capacity { .. } = self.p_max_source {
            rows.push(row(0, "capacity".to_string(), self.p_max));
        }
        rows.extend(
            self.baselines
                .iter()
                .map(|b| row(b.id, format!("a_{}", letter(&b.state)), b.mean)),
        );
        rows.extend(self.pairs.iter().map(|p| {
            vec![
                Cell::Int(i64::from(p.id)),
                Cell::text(&p.shortname),
                Cell::num(p.p_a, d),
                Cell::num(p.p_b, d),
                Cell::num(p.i_ulr * 100.0, 2),
                Cell::num(p.i_plr * 100.0, 2),
            ]
        }));
        let u = self.metric.unit();
        Table {
            name: "isolation".to_string(),
            title: format!("Isolation matrix ({})", self.metric),
            columns: vec![
                "id".to_string(),
                "shortname".to_string(),
                format!("a ({u})"),
                format!("a' ({u})"),
                "I_ulr %".to_string(),
                "I_plr %".to_string(),
            ],
            rows,
            notes: vec![
                "a: tenant a alone in its state; a': tenant a beside b (Volpert et al., Table 1)"
                    .to_string(),
                "I_plr = |a - a'| / a; I_ulr = |a - a'| / p_max, the resource maximum (eq. 3-4)"
                    .to_string(),
                self.p_max_note(),
                "u = undercommitted, s = saturated, o = overcommitted, f = unrestricted"
                    .to_string(),
            ],
        }
    }
}
