//! The isolation matrix of Volpert et al. (seed 004, Tables 2-4): tenant a's
//! performance alone in each state (`p_a`) against beside tenant b (`p_b`), as
//! `I_plr = |p_a - p_b| / p_a` and `I_ulr = |p_a - p_b| / p_max`.
//!
//! The figures are utilisation seen from the host (format version 5): each tenant's
//! CPU time, resident memory, block I/O operations or sent bits per second, read by
//! the provider from its cgroup and interface, outside its load generator (the
//! paper's black-box principle). Runs without them (older runs, cloud tenants) fall
//! back to the load generator's own metric (ops/s, bit/s), and the table says so.
//!
//! `p_max` is "the maximum possible utilisation a resource can achieve" (eq. 4): the
//! whole resource, not what one tenant gets: the CPUs x 100% the capacity step kept
//! busy, the machine's memory (which a memory job reports), the device's IOPS or the
//! link's rate measured by the capacity step. The paper's tables work out to 2 CPUs x
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
use nnb_format::{MatrixLevel, Metric, Quantity, Role, TenantState};
use nnb_units::Scaled;

use crate::read::{Run, Scenario};
use crate::table::{Cell, Table};

use super::{by_group, is, measured, AnalysisError, Row};

/// Baselines and pairs of an isolation-matrix run.
#[derive(Debug, Clone, PartialEq)]
pub struct Isolation {
    /// What a and a' are: a host-side utilisation metric, or (runs without one)
    /// tenant a's primary metric (throughput or rate).
    pub metric: Metric,
    /// Whether `metric` is the host-side utilisation.
    pub host_side: bool,
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
    /// CPU utilisation: 100% per CPU the capacity step kept busy (Volpert et al.'s
    /// "CPUs x 100%").
    Cpus {
        /// The CPUs.
        cpus: usize,
    },
    /// Memory: the machine's memory, as tenant a's memory jobs reported it.
    Memory {
        /// Bytes.
        bytes: u64,
    },
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
        state: TenantState,
    },
}

/// Tenant a alone in one state.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolationBaseline {
    /// Table 1 id (1-4).
    pub id: u32,
    /// a's state, e.g. `saturated`.
    pub state: TenantState,
    /// Mean of the repetitions.
    pub mean: f64,
    /// Their standard deviation.
    pub sd: f64,
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
    pub state_a: TenantState,
    /// b's state.
    pub state_b: TenantState,
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
    /// The standard deviation of a's repetitions beside b.
    pub p_b_sd: f64,
    /// Tenant b's utilisation meanwhile (mean, standard deviation), when recorded.
    pub b: Option<(f64, f64)>,
}

/// Tenants a and b in one scenario, as percentages of `p_max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScenarioShare {
    /// Table 1 id (1-4 a alone, 5-16 a beside b).
    pub id: u32,
    /// Tenant a's mean and standard deviation over the repetitions, percent.
    pub a: (f64, f64),
    /// Tenant b's, when it ran (the pairs).
    pub b: Option<(f64, f64)>,
}

/// CPUs a capacity burn kept busy: the distinct pinned CPUs of the first recorded
/// placement.
fn busy_cpus(rows: &[&Row]) -> Option<usize> {
    let placement = rows.iter().find_map(|r| r.quality.placement.as_ref())?;
    let cpus: BTreeSet<usize> = placement.slots.iter().filter_map(|s| s.cpu).collect();
    (!cpus.is_empty()).then_some(cpus.len())
}

/// What a and a' are measured in: the host-side metric of tenant a's job kind when
/// every record of a has it, else a's primary metric.
fn view(rows: &[Row]) -> Option<(Metric, bool)> {
    let host = rows.iter().find_map(|r| r.job?.host_metric());
    match host {
        Some(h) if rows.iter().all(|r| r.metrics.get(h).is_some()) => Some((h, true)),
        _ => rows.iter().find_map(|r| r.metric).map(|m| (m, false)),
    }
}

/// Mean and standard deviation of `metric` in `rows` (its primary value when
/// `metric` is the rows' own primary metric and not host-side).
fn summary(rows: &[&Row], metric: Metric, host_side: bool) -> Option<Summary> {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|r| {
            if host_side {
                r.metrics.get(metric)
            } else {
                r.value
            }
        })
        .collect();
    Summary::of(&values)
}

/// The isolation metrics of an isolation-matrix run (tenant a's records, and b's
/// utilisation beside it); `None` for other scenarios. `p_max` is the resource
/// maximum (see the module); without a capacity, a's unrestricted baseline (Table 1
/// id 4), or else the largest baseline, stands in.
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
    let (metric, host_side) = view(&rows).ok_or_else(no_baseline)?;
    let b_rows = measured(run, Role::Neighbor)?;
    let b_levels = by_group(&b_rows);
    let b_of = |label: &str| -> Option<(f64, f64)> {
        let level = b_levels
            .iter()
            .flat_map(|(_, levels)| levels)
            .find(|l| l.label == label)?;
        let (m, host) = view(&level.rows.iter().map(|r| (*r).clone()).collect::<Vec<_>>())?;
        summary(&level.rows, m, host).map(|s| (s.mean, s.stddev))
    };
    let mut baselines = Vec::new();
    let mut pairs = Vec::new();
    let mut capacity = None;
    for (group, levels) in by_group(&rows) {
        for l in levels {
            let Some(s) = summary(&l.rows, metric, host_side) else {
                continue;
            };
            let level: MatrixLevel = l.label.parse().map_err(|e| data_err(format!("{e}")))?;
            if level.group() != group {
                return Err(data_err(format!(
                    "isolation-matrix level `{}` in group `{group}`: its group is `{}`",
                    l.label,
                    level.group()
                )));
            }
            match level {
                MatrixLevel::Capacity => {
                    let cpus = busy_cpus(&l.rows);
                    capacity = Some(match (metric, cpus) {
                        (Metric::HostCpuPct, Some(cpus)) if host_side => {
                            (cpus as f64 * 100.0, PmaxSource::Cpus { cpus })
                        }
                        _ => (s.mean, PmaxSource::Capacity { n: s.n, cpus }),
                    })
                }
                MatrixLevel::Alone(a) => baselines.push(IsolationBaseline {
                    id: l.level as u32,
                    state: a,
                    mean: s.mean,
                    sd: s.stddev,
                    n: s.n,
                }),
                MatrixLevel::Pair(a, b) => pairs.push((l.level as u32, a, b, s, b_of(&l.label))),
            }
        }
    }
    let memory = || {
        let bytes = rows.iter().find_map(|r| r.quality.mem_total_bytes)?;
        (host_side && metric == Metric::HostMemBytes)
            .then_some((bytes as f64, PmaxSource::Memory { bytes }))
    };
    let unrestricted = || {
        baselines
            .iter()
            .find(|b| b.state == TenantState::Unrestricted)
            .map(|b| (b.mean, PmaxSource::UnrestrictedBaseline))
    };
    let largest = || {
        baselines
            .iter()
            .max_by(|x, y| x.mean.total_cmp(&y.mean))
            .map(|b| {
                let source = PmaxSource::LargestBaseline {
                    id: b.id,
                    state: b.state,
                };
                (b.mean, source)
            })
    };
    let (p_max, p_max_source) = capacity
        .or_else(memory)
        .or_else(unrestricted)
        .or_else(largest)
        .ok_or_else(no_baseline)?;
    let pairs = pairs
        .into_iter()
        .map(|(id, a, b, s, b_use)| {
            let p_a = baselines
                .iter()
                .find(|x| x.state == a)
                .map(|x| x.mean)
                .ok_or_else(|| data_err(format!("no baseline of tenant a {a} for pair {id}")))?;
            let p_b = s.mean;
            Ok(IsolationPair {
                id,
                shortname: format!("a_{} b_{}", a.letter(), b.letter()),
                state_a: a,
                state_b: b,
                p_a,
                p_b,
                i_plr: (p_a - p_b).abs() / p_a,
                i_ulr: (p_a - p_b).abs() / p_max,
                n: s.n,
                p_b_sd: s.stddev,
                b: b_use,
            })
        })
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    Ok(Some(Isolation {
        metric,
        host_side,
        p_max,
        p_max_source,
        baselines,
        pairs,
    }))
}

impl Isolation {
    /// How a and a' are printed: in the unit of a table column of the metric's
    /// quantity (bytes as MiB, bits per second as Mbit/s, the rest in the metric's own
    /// unit: [`nnb_units::DisplayUnit::table`]), with the decimals that go with it.
    fn shown(&self) -> (Scaled, usize) {
        let quantity = self.metric.quantity();
        let decimals = match quantity {
            Quantity::Bytes => 1,
            Quantity::BitsPerSecond => 2,
            _ => self.metric.decimals(),
        };
        (quantity.display_unit().table(), decimals)
    }

    /// The utilisation of tenants a and b per scenario as a share of `p_max`: the
    /// data of Volpert et al.'s Fig. 5.
    pub fn shares(&self) -> Vec<ScenarioShare> {
        let pct = |(mean, sd): (f64, f64)| (mean / self.p_max * 100.0, sd / self.p_max * 100.0);
        let alone = self.baselines.iter().map(|b| ScenarioShare {
            id: b.id,
            a: pct((b.mean, b.sd)),
            b: None,
        });
        let beside = self.pairs.iter().map(|p| ScenarioShare {
            id: p.id,
            a: pct((p.p_b, p.p_b_sd)),
            b: p.b.map(pct),
        });
        alone.chain(beside).collect()
    }

    /// What the table's note says of `p_max`: its value and where it came from.
    pub fn p_max_note(&self) -> String {
        let (unit, decimals) = self.shown();
        let value = format!(
            "p_max = {:.*} {}",
            decimals,
            unit.value(self.p_max),
            unit.symbol()
        );
        let stand_in = |what: String, missing: &str| {
            format!(
                "{value}: stand-in, {what}; this run has no capacity step{missing}, so I_ulr \
                 is relative to it, not to the resource maximum"
            )
        };
        match &self.p_max_source {
            PmaxSource::Cpus { cpus } => {
                format!("{value}: {cpus} CPUs x 100%, the CPUs tenant a's capacity step kept busy")
            }
            PmaxSource::Memory { .. } => {
                format!(
                    "{value}: the machine's memory (MemTotal, as tenant a's memory jobs read it)"
                )
            }
            PmaxSource::Capacity { n, cpus } => {
                let what = match (self.metric, cpus) {
                    (Metric::RateBps | Metric::HostNetBps, _) => "the link's capacity".to_string(),
                    (Metric::HostIops, _) => "the device's IOPS".to_string(),
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
        let (unit, d) = self.shown();
        let row = |id: u32, name: String, a: f64| {
            vec![
                Cell::Int(i64::from(id)),
                Cell::text(name),
                Cell::num(unit.value(a), d),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
            ]
        };
        let mut rows: Vec<Vec<Cell>> = Vec::new();
        if let PmaxSource::Capacity { .. } = self.p_max_source {
            rows.push(row(0, MatrixLevel::Capacity.to_string(), self.p_max));
        }
        rows.extend(
            self.baselines
                .iter()
                .map(|b| row(b.id, format!("a_{}", b.state.letter()), b.mean)),
        );
        rows.extend(self.pairs.iter().map(|p| {
            vec![
                Cell::Int(i64::from(p.id)),
                Cell::text(&p.shortname),
                Cell::num(unit.value(p.p_a), d),
                Cell::num(unit.value(p.p_b), d),
                Cell::num(p.i_ulr * 100.0, 2),
                Cell::num(p.i_plr * 100.0, 2),
            ]
        }));
        let seen = if self.host_side {
            "utilisation seen from the host (the tenant's cgroup and interface)"
        } else {
            "the load generator's own figure: this run recorded no host-side utilisation"
        };
        Table {
            name: "isolation".to_string(),
            title: format!("Isolation matrix ({})", self.metric),
            columns: vec![
                "id".to_string(),
                "shortname".to_string(),
                unit.title("a"),
                unit.title("a'"),
                "I_ulr %".to_string(),
                "I_plr %".to_string(),
            ],
            rows,
            notes: vec![
                "a: tenant a alone in its state; a': tenant a beside b (Volpert et al., Table 1)"
                    .to_string(),
                format!("a and a': {} ({seen})", self.metric.label()),
                "I_plr = |a - a'| / a; I_ulr = |a - a'| / p_max, the resource maximum (eq. 3-4)"
                    .to_string(),
                self.p_max_note(),
                TenantState::ALL
                    .map(|s| format!("{} = {s}", s.letter()))
                    .join(", "),
            ],
        }
    }
}
