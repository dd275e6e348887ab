//! The isolation matrix of Volpert et al. (seed 004, Tables 2-4): tenant a's
//! performance alone in each state (`p_a`) against beside tenant b (`p_b`), as
//! `I_plr = |p_a - p_b| / p_a` and `I_ulr = |p_a - p_b| / p_max`.
//!
//! The figures are utilisation seen from outside the load generator (the paper's
//! black-box principle): each tenant's CPU time, resident memory or block I/O
//! operations as the host saw them in its cgroup (format version 5), and for the
//! network the rate the endpoint's sink received from it: what got through the
//! host's shared NIC, where tenants contend (what its own interface sent is what
//! it offered, before that NIC). Runs without host-side figures (older runs, cloud
//! tenants) fall back to the load generator's own metric (ops/s), and the table
//! says so.
//!
//! `p_max` is "the maximum possible utilisation a resource can achieve" (eq. 4): the
//! whole resource, not what one tenant gets: the CPUs x 100% the capacity step kept
//! busy, the machine's memory (which a memory job reports), the device's IOPS or the
//! link's rate measured by the capacity step. The paper's tables work out to 2 CPUs x
//! 100% = 200 for the CPU (Table 2, id 11: |25.00 - 23.48| = 1.52 is I_ulr 0.76%) and
//! 100% of the link for the network (Table 3). nnb measures it in the plan's
//! capacity step (group `capacity`, id 0): tenant a alone with a burner thread pinned
//! on every online CPU of the host, or with a load far above the link's rate, so
//! `p_max` is in the metric's own units (ops/s, bit/s). It is the largest use of
//! the resource measured: where tenant a's unrestricted baseline (id 4, the same
//! resource alone with the grant lifted) averaged more than the capacity step, that
//! baseline is `p_max` ([`PmaxSource::UnrestrictedAboveCapacity`]), so no share of
//! it is over 100%. Runs made before that step existed have no capacity: `p_max` then stands in as a's unrestricted baseline
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
    /// The capacity step's figures (id 0), when the run has one.
    pub capacity: Option<Summary>,
    /// Scenarios 1-4: a alone.
    pub baselines: Vec<IsolationBaseline>,
    /// Levels 17-20: b alone (version 11; empty in older runs), in b's own metric
    /// (the host-side utilisation when every record of b has it, as for a).
    pub b_baselines: Vec<IsolationBaseline>,
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
    /// The capacity step measured less than a's unrestricted baseline (id 4), the
    /// same resource alone: that baseline, the largest use measured, is `p_max`.
    UnrestrictedAboveCapacity {
        /// The capacity step's mean.
        capacity: f64,
        /// Its repetitions.
        capacity_n: usize,
        /// The unrestricted baseline's repetitions.
        n: usize,
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

/// Tenant a (or b) alone in one state.
#[derive(Debug, Clone, PartialEq)]
pub struct IsolationBaseline {
    /// Table 1 id (1-4; b's baselines 17-20).
    pub id: u32,
    /// The tenant's state, e.g. `saturated`.
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
    /// `|p_a - p_b| / p_a`, a fraction (eq. 3: a gain reads as a loss; see
    /// [`IsolationPair::change`]).
    pub i_plr: f64,
    /// `|p_a - p_b| / p_max`, a fraction.
    pub i_ulr: f64,
    /// Repetitions used for `p_b`.
    pub n: usize,
    /// The standard deviation of a's repetitions beside b.
    pub p_b_sd: f64,
    /// Tenant b's utilisation meanwhile (mean, standard deviation), when recorded.
    pub b: Option<(f64, f64)>,
    /// Tenant b's baseline in `state_b` (b alone, levels 17-20), in the same metric
    /// as `b`; `None` in runs without b's baselines (before version 11).
    pub b_alone: Option<f64>,
}

impl IsolationPair {
    /// `(p_b - p_a) / p_a`, a fraction: I_plr with its sign, positive where tenant
    /// a did better beside b than alone.
    pub fn change(&self) -> f64 {
        (self.p_b - self.p_a) / self.p_a
    }

    /// `(b' - b) / b`, a fraction: tenant b's own change beside a against b alone in
    /// its state, as [`IsolationPair::change`] is a's; `None` without b's baseline or
    /// b's figure beside a.
    pub fn b_change(&self) -> Option<f64> {
        let (beside, _) = self.b?;
        let alone = self.b_alone?;
        (alone != 0.0).then(|| (beside - alone) / alone)
    }
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
    // b's figures in one metric over all of b's records, alone and beside a, so
    // that b's degradation compares like with like (as a's does).
    let b_view = view(&b_rows);
    let b_level = |label: &str| -> Option<Summary> {
        let level = b_levels
            .iter()
            .flat_map(|(_, levels)| levels)
            .find(|l| l.label == label)?;
        let (m, host) = b_view?;
        summary(&level.rows, m, host)
    };
    let b_of = |label: &str| b_level(label).map(|s| (s.mean, s.stddev));
    let b_baselines: Vec<IsolationBaseline> = b_levels
        .iter()
        .flat_map(|(_, levels)| levels)
        .filter_map(|l| match l.label.parse() {
            Ok(MatrixLevel::NeighborAlone(state)) => {
                let s = b_level(&l.label)?;
                Some(IsolationBaseline {
                    id: l.level as u32,
                    state,
                    mean: s.mean,
                    sd: s.stddev,
                    n: s.n,
                })
            }
            _ => None,
        })
        .collect();
    let mut baselines = Vec::new();
    let mut pairs = Vec::new();
    let mut capacity = None;
    let mut capacity_summary = None;
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
                    });
                    capacity_summary = Some(s);
                }
                MatrixLevel::Alone(a) => baselines.push(IsolationBaseline {
                    id: l.level as u32,
                    state: a,
                    mean: s.mean,
                    sd: s.stddev,
                    n: s.n,
                }),
                MatrixLevel::Pair(a, b) => pairs.push((l.level as u32, a, b, s, b_of(&l.label))),
                // b's baselines are b's records, not a's.
                MatrixLevel::NeighborAlone(_) => {}
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
    // The largest use measured: an unrestricted baseline above the capacity step.
    let capacity = capacity.map(|(p_max, source)| {
        let above = baselines
            .iter()
            .find(|b| b.state == TenantState::Unrestricted && b.mean > p_max);
        match (&source, above) {
            (PmaxSource::Capacity { n: capacity_n, .. }, Some(b)) => {
                let source = PmaxSource::UnrestrictedAboveCapacity {
                    capacity: p_max,
                    capacity_n: *capacity_n,
                    n: b.n,
                };
                (b.mean, source)
            }
            _ => (p_max, source),
        }
    });
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
            let b_alone = b_baselines.iter().find(|x| x.state == b).map(|x| x.mean);
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
                b_alone,
            })
        })
        .collect::<Result<Vec<_>, AnalysisError>>()?;
    Ok(Some(Isolation {
        metric,
        host_side,
        p_max,
        p_max_source,
        capacity: capacity_summary,
        baselines,
        b_baselines,
        pairs,
    }))
}

impl Isolation {
    /// How a and a' are printed: in the unit of a table column of the metric's
    /// quantity (bytes as MiB, bits per second as Mbit/s, the rest in the metric's own
    /// unit: [`nnb_units::DisplayUnit::table`]), with the decimals that go with it.
    pub(super) fn shown(&self) -> (Scaled, usize) {
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

    /// What a measured `p_max` is of the resource, `cpus` busy in the capacity step.
    fn resource_maximum(&self, cpus: Option<usize>) -> String {
        match (self.metric, cpus) {
            (Metric::RateBps, _) => "the link's capacity".to_string(),
            (Metric::HostIops, _) => "the device's IOPS".to_string(),
            (_, Some(c)) => format!("the host's capacity, {c} CPUs busy"),
            (_, None) => "the host's capacity".to_string(),
        }
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
                let what = self.resource_maximum(*cpus);
                format!("{value}: {what}, tenant a alone (capacity step, id 0, n = {n})")
            }
            PmaxSource::UnrestrictedAboveCapacity {
                capacity,
                capacity_n,
                n,
            } => format!(
                "{value}: {what}, the largest use measured: tenant a's unrestricted baseline \
                 (id 4, n = {n}), above the capacity step's {:.*} {} (id 0, n = {capacity_n})",
                decimals,
                unit.value(*capacity),
                unit.symbol(),
                what = self.resource_maximum(None),
            ),
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
    /// capacity step first as id 0 `capacity` when the run has one. Then the sign
    /// eq. 3 drops (a' - a as a percentage of a: a gain is positive) and the spread
    /// of the row's measured figure (a alone in ids 0-4, a' in 5-16): its standard
    /// deviation (none for one repetition) and repetitions.
    pub fn table(&self) -> Table {
        let (unit, d) = self.shown();
        let spread = |sd: f64, n: usize| {
            let sd = if n > 1 {
                Cell::num(unit.value(sd), d)
            } else {
                Cell::Empty
            };
            [sd, Cell::Int(n as i64)]
        };
        let row = |id: u32, name: String, a: f64, sd: f64, n: usize| {
            let mut cells = vec![
                Cell::Int(i64::from(id)),
                Cell::text(name),
                Cell::num(unit.value(a), d),
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
                Cell::Empty,
            ];
            cells.extend(spread(sd, n));
            cells
        };
        let mut rows: Vec<Vec<Cell>> = Vec::new();
        if let Some(c) = &self.capacity {
            rows.push(row(
                0,
                MatrixLevel::Capacity.to_string(),
                c.mean,
                c.stddev,
                c.n,
            ));
        }
        rows.extend(
            self.baselines
                .iter()
                .map(|b| row(b.id, format!("a_{}", b.state.letter()), b.mean, b.sd, b.n)),
        );
        rows.extend(self.pairs.iter().map(|p| {
            let mut cells = vec![
                Cell::Int(i64::from(p.id)),
                Cell::text(&p.shortname),
                Cell::num(unit.value(p.p_a), d),
                Cell::num(unit.value(p.p_b), d),
                Cell::num(p.i_ulr * 100.0, 2),
                Cell::num(p.i_plr * 100.0, 2),
                Cell::num(p.change() * 100.0, 2),
            ];
            cells.extend(spread(p.p_b_sd, p.n));
            cells
        }));
        let seen = if self.host_side {
            "utilisation seen from the host (the tenant's cgroup)"
        } else if self.metric == Metric::RateBps {
            "what the endpoint's sink received from the tenant, after the host's shared NIC"
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
                "a'-a %".to_string(),
                unit.title("sd"),
                "n".to_string(),
            ],
            rows,
            notes: vec![
                "a: tenant a alone in its state; a': tenant a beside b (Volpert et al., Table 1)"
                    .to_string(),
                format!("a and a': {} ({seen})", self.metric.label()),
                "I_plr = |a - a'| / a; I_ulr = |a - a'| / p_max, the resource maximum (eq. 3-4); \
                 a'-a % = (a' - a) / a, so a gain beside b is positive where I_plr shows it as \
                 a loss"
                    .to_string(),
                "sd, n: the standard deviation (none for one repetition) and repetitions of \
                 the row's measured figure: a alone in ids 0-4, a' in ids 5-16"
                    .to_string(),
                self.p_max_note(),
                TenantState::ALL
                    .map(|s| format!("{} = {s}", s.letter()))
                    .join(", "),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{json, Value};

    use super::*;
    use crate::read::read_run;

    /// An isolation-matrix run of tenant a alone: the fixture's manifest and, per
    /// `(level label, Table 1 id, records' fields per repetition)`, a record of each
    /// repetition made from the fixture's first one with those fields set.
    fn matrix(levels: &[(&str, u32, Vec<Value>)]) -> (tempfile::TempDir, Run) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/isolation-matrix");
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(from.join("manifest.json"), dir.path().join("manifest.json")).unwrap();
        let text = std::fs::read_to_string(from.join("samples.jsonl")).unwrap();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let mut samples = String::new();
        let mut index = 0;
        for (label, id, reps) in levels {
            let level: MatrixLevel = label.parse().unwrap();
            for (rep, fields) in reps.iter().enumerate() {
                let mut r = first.clone();
                let rep = rep + 1;
                r["step"] = json!(format!("{}/{label}/rep={rep}", level.group()));
                r["step_index"] = json!(index);
                r["group"] = json!(level.group().to_string());
                r["level"] = json!(f64::from(*id));
                r["level_label"] = json!(label);
                r["rep"] = json!(rep);
                for (k, v) in fields.as_object().unwrap() {
                    r[k] = v.clone();
                }
                samples += &format!("{r}\n");
                index += 1;
            }
        }
        std::fs::write(dir.path().join("samples.jsonl"), samples).unwrap();
        let run = read_run(dir.path()).unwrap();
        (dir, run)
    }

    /// A load record: the sink received `sink` bit/s, the tenant's interface sent
    /// `sent` bit/s.
    fn load(sink: f64, sent: f64) -> Value {
        json!({"job": "load", "metric": "rate_bps", "value": sink, "rate_bps": sink,
               "ops_per_sec": null, "host_net_bps": sent})
    }

    /// A disk record of `iops` (the host saw the same).
    fn disk(iops: f64) -> Value {
        json!({"job": "disk", "metric": "iops", "value": iops, "iops": iops,
               "ops_per_sec": null, "host_iops": iops})
    }

    fn close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }

    fn num(cell: &Cell) -> f64 {
        match cell {
            Cell::Num { value, .. } => *value,
            other => panic!("not a number: {other:?}"),
        }
    }

    /// T1, the review's network matrix: the link (200 Mbit/s) carried 193.35
    /// Mbit/s of payload to the sink in the capacity step while the tenant's
    /// interface sent 319.46 (what it offered, upstream of the shared NIC); in
    /// a_s b_f the sink got 41.41 -> 29.68 Mbit/s of a's while a's interface sent
    /// 41.74 -> 42.65. a and a' are the sink's: I_plr = 11.73 / 41.41 = 28.33%, and
    /// p_max is the link's 193.35, not 319.46.
    #[test]
    fn the_network_matrix_counts_what_got_through_the_link() {
        let (_d, run) = matrix(&[
            (
                "capacity",
                0,
                vec![load(193.30e6, 319.4e6), load(193.40e6, 319.52e6)],
            ),
            ("a=saturated", 2, vec![load(41.41e6, 41.74e6)]),
            ("a=unrestricted", 4, vec![load(192.8e6, 443.55e6)]),
            (
                "a=saturated,b=unrestricted",
                12,
                vec![load(29.68e6, 42.65e6)],
            ),
        ]);
        let iso = isolation(&run).unwrap().unwrap();
        assert_eq!((iso.metric, iso.host_side), (Metric::RateBps, false));
        close(iso.p_max, 193.35e6);
        assert_eq!(iso.p_max_source, PmaxSource::Capacity { n: 2, cpus: None });
        let p = &iso.pairs[0];
        assert_eq!(p.shortname, "a_s b_f");
        close(p.p_a, 41.41e6);
        close(p.p_b, 29.68e6);
        close(p.i_plr, (41.41 - 29.68) / 41.41);
        close(p.i_ulr, (41.41 - 29.68) / 193.35);
        assert!(iso
            .p_max_note()
            .starts_with("p_max = 193.35 Mbit/s: the link's capacity"));
        let t = iso.table();
        assert!(
            t.notes
                .iter()
                .any(|n| n.contains("the endpoint's sink received")),
            "{:?}",
            t.notes
        );
    }

    /// T18, the review's disk matrix: the capacity step (one unpaced run) measured
    /// 38240 IOPS, a's unrestricted baseline (the same unpaced job) 42701. p_max is
    /// the largest use measured, 42701, so a_f is 100% of it, no share above.
    #[test]
    fn p_max_is_the_largest_use_measured() {
        let (_d, run) = matrix(&[
            ("capacity", 0, vec![disk(38240.0)]),
            ("a=overcommitted", 3, vec![disk(402.0)]),
            ("a=unrestricted", 4, vec![disk(42701.0)]),
            (
                "a=overcommitted,b=overcommitted",
                15,
                vec![disk(420.0), disk(426.0)],
            ),
        ]);
        let iso = isolation(&run).unwrap().unwrap();
        close(iso.p_max, 42701.0);
        assert_eq!(
            iso.p_max_source,
            PmaxSource::UnrestrictedAboveCapacity {
                capacity: 38240.0,
                capacity_n: 1,
                n: 1
            }
        );
        let shares = iso.shares();
        assert!(shares.iter().all(|s| s.a.0 <= 100.0 + 1e-9), "{shares:?}");
        close(shares.iter().find(|s| s.id == 4).unwrap().a.0, 100.0);
        assert_eq!(
            iso.p_max_note(),
            "p_max = 42701 ops/s: the device's IOPS, the largest use measured: tenant a's \
             unrestricted baseline (id 4, n = 1), above the capacity step's 38240 ops/s \
             (id 0, n = 1)"
        );
        // The capacity row shows what the capacity step measured.
        let t = iso.table();
        assert_eq!(t.rows[0][..2], [Cell::Int(0), Cell::text("capacity")]);
        close(num(&t.rows[0][2]), 38240.0);
    }

    /// T20 and T11: a_o alone 402 ops/s, beside b_o 420 and 426 (mean 423): a gain
    /// of 21 / 402 = +5.22%, which I_plr (eq. 3) shows as 5.22 without a sign. The
    /// signed column says +5.22; a' has sd sqrt(((420-423)^2 + (426-423)^2) / 1) =
    /// 4.243 over n = 2; a_o's one repetition has no sd.
    #[test]
    fn a_gain_is_signed_and_a_prime_has_its_spread() {
        let (_d, run) = matrix(&[
            ("a=overcommitted", 3, vec![disk(402.0)]),
            (
                "a=overcommitted,b=overcommitted",
                15,
                vec![disk(420.0), disk(426.0)],
            ),
        ]);
        let iso = isolation(&run).unwrap().unwrap();
        let p = &iso.pairs[0];
        close(p.i_plr, 21.0 / 402.0);
        close(p.change(), 21.0 / 402.0);
        let t = iso.table();
        assert_eq!(
            t.columns[6..],
            [
                "a'-a %".to_string(),
                "sd (ops/s)".to_string(),
                "n".to_string()
            ]
        );
        let alone = &t.rows[0];
        assert_eq!(alone[1], Cell::text("a_o"));
        assert_eq!(alone[6..], [Cell::Empty, Cell::Empty, Cell::Int(1)]);
        let beside = &t.rows[1];
        assert_eq!(beside[1], Cell::text("a_o b_o"));
        close(num(&beside[5]), 2100.0 / 402.0);
        close(num(&beside[6]), 2100.0 / 402.0);
        close(num(&beside[7]), 18f64.sqrt());
        assert_eq!(beside[8], Cell::Int(2));
        // A loss is negative: a' 380 against 402.
        let (_d, run) = matrix(&[
            ("a=overcommitted", 3, vec![disk(402.0)]),
            ("a=overcommitted,b=overcommitted", 15, vec![disk(380.0)]),
        ]);
        let iso = isolation(&run).unwrap().unwrap();
        close(iso.pairs[0].change(), -22.0 / 402.0);
    }
}
