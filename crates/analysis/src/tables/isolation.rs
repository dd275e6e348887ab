//! The isolation matrix of Volpert et al. (seed 004, Tables 2-4): tenant a's
//! performance alone in each state (`p_a`) against beside tenant b (`p_b`), as
//! `I_plr = |p_a - p_b| / p_a` and `I_ulr = |p_a - p_b| / p_max`, where `p_max`, the
//! most the resource gives one tenant, is a's unrestricted baseline (scenario 4).

use nnb_format::stats::Summary;
use nnb_format::{Metric, Role};

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{by_group, is, measured, AnalysisError};

/// Baselines and pairs of an isolation-matrix run.
#[derive(Debug, Clone, PartialEq)]
pub struct Isolation {
    /// The primary metric of tenant a (throughput or rate).
    pub metric: Metric,
    /// The maximum: a's unrestricted baseline mean.
    pub p_max: f64,
    /// Scenarios 1-4: a alone.
    pub baselines: Vec<IsolationBaseline>,
    /// Scenarios 5-16: a beside b.
    pub pairs: Vec<IsolationPair>,
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

/// The isolation metrics of an isolation-matrix run (tenant a's records); `None` for
/// other scenarios. `p_max` is a's unrestricted baseline (Table 1 id 4), or the largest
/// baseline when that one is missing.
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
    for (group, levels) in by_group(&rows) {
        for l in levels {
            let values: Vec<f64> = l.rows.iter().filter_map(|r| r.value).collect();
            let Some(s) = Summary::of(&values) else {
                continue;
            };
            let (a, b) = states(&l.label);
            match (group.as_str(), b) {
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
    let p_max = baselines
        .iter()
        .find(|b| b.state == "unrestricted")
        .map(|b| b.mean)
        .or_else(|| baselines.iter().map(|b| b.mean).reduce(f64::max))
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
        baselines,
        pairs,
    }))
}

impl Isolation {
    /// Rows as in seed 004 Table 2: id, shortname, a, a', I_ulr %, I_plr %.
    pub fn table(&self) -> Table {
        let d = self.metric.decimals();
        let mut rows: Vec<Vec<Cell>> = self
            .baselines
            .iter()
            .map(|b| {
                vec![
                    Cell::Int(i64::from(b.id)),
                    Cell::text(format!("a_{}", letter(&b.state))),
                    Cell::num(b.mean, d),
                    Cell::Empty,
                    Cell::Empty,
                    Cell::Empty,
                ]
            })
            .collect();
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
                format!(
                    "I_plr = |a - a'| / a; I_ulr = |a - a'| / p_max, p_max = {:.*} (a unrestricted, alone)",
                    d, self.p_max
                ),
                "u = undercommitted, s = saturated, o = overcommitted, f = unrestricted".to_string(),
            ],
        }
    }
}
