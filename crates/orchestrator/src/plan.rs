//! Expands an [`Experiment`] into its ordered steps.
//!
//! A step is one repetition at one level: what every neighbor runs in the background
//! during it, which jobs are measured (concurrently), and how long that should take.
//! Each step has a stable id such as `busy/neighbors=2/rep=3`: ids are how
//! `samples.jsonl` records name their step and how `--resume` knows what is done, so
//! the same experiment always expands to the same ids in the same order.

use std::time::Duration;

use serde::Serialize;

use crate::experiment::{
    Burn, BurnAmount, Busy, Experiment, IsolationMatrix, LoadSteps, NeighborState, Network,
    Resource, Role, Scenario, Staircase, TenantDef, ThreadSweep, ThroughputStaircase,
    UnusedNeighbors,
};
use crate::jobs::{BurnScope, JobSpec, LoadSampling};

/// Target placeholder for the endpoint's UDP sink, resolved by the controller.
pub const SINK: &str = "@sink";
/// Target placeholder for the endpoint's UDP reflector, resolved by the controller.
pub const REFLECTOR: &str = "@reflector";

/// Factors of a tenant's saturating amount (vCPUs as threads, or its network share)
/// that make the isolation-matrix states.
const UNDERCOMMIT: f64 = 0.5;
const OVERCOMMIT_CPU: f64 = 2.0;
const OVERCOMMIT_NET: f64 = 1.5;
const UNRESTRICTED_NET: f64 = 10.0;
/// Streams of the network capacity step: several, so that no single sender's pace
/// limits what reaches the sink.
const CAPACITY_STREAMS: usize = 4;

/// One job on one tenant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assignment {
    /// The tenant's name.
    pub tenant: String,
    /// What it runs.
    pub job: JobSpec,
}

/// One repetition at one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Stable id, unique within the plan, e.g. `busy/neighbors=2/rep=3`.
    pub id: String,
    /// Part of the scenario: `busy`/`idle` (staircase), `sweep`, `load`,
    /// `capacity`/`baseline`/`pair` (isolation matrix), `throughput` (throughput
    /// staircase).
    pub group: String,
    /// Numeric level: neighbors, threads, aggregate load in bit/s, or Table 1 id
    /// (0 for the isolation matrix's capacity step).
    pub level: f64,
    /// The level as people read it, e.g. `neighbors=2`, `load=50M`, `a_s b_o`.
    pub level_label: String,
    /// Repetition number within the level (1-based; warm-ups count separately).
    pub rep: u32,
    /// A warm-up repetition, recorded but left out of summaries.
    pub warmup: bool,
    /// Tenants whose agents run during the step, in file order (the endpoint is not
    /// a tenant): every tenant, except in a staircase whose neighbors above the
    /// level are absent (a throughput staircase's always are). The controller starts and stops agents (and, on aws,
    /// instances) between steps to match.
    pub present: Vec<String>,
    /// Background jobs running during the step (present tenants not listed run
    /// nothing).
    pub background: Vec<Assignment>,
    /// Jobs started together and measured; the step ends when all have ended.
    pub measure: Vec<Assignment>,
    /// Expected measuring time; `None` for fixed-work burns (runtime is the result).
    #[serde(serialize_with = "serialize_opt_ms", rename = "estimate_ms")]
    pub estimate: Option<Duration>,
}

/// Every step of an experiment, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The steps.
    pub steps: Vec<Step>,
}

impl Plan {
    /// Whether any job sends to or probes the endpoint (which then runs `serve`).
    pub fn needs_endpoint(&self) -> bool {
        let uses = |a: &Assignment| match &a.job {
            JobSpec::Latency { target, .. } | JobSpec::Load { target, .. } => {
                target == SINK || target == REFLECTOR
            }
            _ => false,
        };
        self.steps
            .iter()
            .any(|s| s.background.iter().chain(&s.measure).any(uses))
    }

    /// Steps whose tenants or background differ from the step before (the first
    /// included): tenants come or go, neighbors are reconfigured, and the settle
    /// time is spent there.
    pub fn changes(&self) -> usize {
        let mut prev: Option<(&Vec<String>, &Vec<Assignment>)> = None;
        let mut n = 0;
        for s in &self.steps {
            let now = (&s.present, &s.background);
            if prev != Some(now) {
                n += 1;
            }
            prev = Some(now);
        }
        n
    }

    /// Estimated duration: settle times plus known measuring times, and how many
    /// steps have no estimate (fixed-work burns).
    pub fn estimate(&self, settle: Duration) -> (Duration, usize) {
        let known: Duration = self.steps.iter().filter_map(|s| s.estimate).sum();
        let unknown = self.steps.iter().filter(|s| s.estimate.is_none()).count();
        let settles = settle * u32::try_from(self.changes()).unwrap_or(u32::MAX);
        (known + settles, unknown)
    }
}

fn serialize_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

/// Expands `exp` into its plan. `host_cpus` (online CPUs of the host the tenants
/// share) sets the thread count of an unrestricted CPU tenant and of the isolation
/// matrix's capacity step.
pub fn expand(exp: &Experiment, host_cpus: usize) -> Plan {
    let mut b = Builder {
        exp,
        steps: Vec::new(),
    };
    match &exp.scenario {
        Scenario::NeighborStaircase(s) => b.staircase(s),
        Scenario::ThreadSweep(s) => b.sweep(s),
        Scenario::LoadSteps(s) => b.load_steps(s),
        Scenario::IsolationMatrix(m) => b.matrix(m, host_cpus),
        Scenario::ThroughputStaircase(s) => b.throughput_staircase(s),
    }
    Plan { steps: b.steps }
}

/// One level: what it is called, who is there and what runs in it.
struct Level {
    group: String,
    level: f64,
    label: String,
    /// `None`: every tenant.
    present: Option<Vec<String>>,
    background: Vec<Assignment>,
    measure: Vec<Assignment>,
    estimate: Option<Duration>,
}

struct Builder<'a> {
    exp: &'a Experiment,
    steps: Vec<Step>,
}

impl Builder<'_> {
    /// Adds the level's warm-up repetitions, then its measured ones.
    fn level(&mut self, l: Level) {
        let present = l
            .present
            .unwrap_or_else(|| self.exp.tenants.iter().map(|t| t.name.clone()).collect());
        let reps = (1..=self.exp.warmup)
            .map(|r| (r, true))
            .chain((1..=self.exp.repetitions).map(|r| (r, false)));
        for (rep, warmup) in reps {
            let kind = if warmup { "warmup" } else { "rep" };
            self.steps.push(Step {
                id: format!("{}/{}/{kind}={rep}", l.group, l.label),
                group: l.group.clone(),
                level: l.level,
                level_label: l.label.clone(),
                rep,
                warmup,
                present: present.clone(),
                background: l.background.clone(),
                measure: l.measure.clone(),
                estimate: l.estimate,
            });
        }
    }

    fn test(&self) -> &TenantDef {
        // Validation guarantees exactly one test tenant; fall back to the first.
        self.exp
            .tenants
            .iter()
            .find(|t| t.role == Role::Test)
            .unwrap_or(&self.exp.tenants[0])
    }

    fn neighbors(&self) -> Vec<&TenantDef> {
        self.exp.neighbors().collect()
    }

    fn staircase(&mut self, s: &Staircase) {
        let test = self.test().name.clone();
        let neighbors: Vec<TenantDef> = self.neighbors().into_iter().cloned().collect();
        for &state in &s.states {
            for &n in &s.levels {
                let present = match s.unused {
                    UnusedNeighbors::Idle => None,
                    UnusedNeighbors::Absent => Some(
                        self.exp
                            .tenants
                            .iter()
                            .filter(|t| t.name == test || neighbors[..n].contains(t))
                            .map(|t| t.name.clone())
                            .collect(),
                    ),
                };
                let background = neighbors[..n]
                    .iter()
                    .map(|t| Assignment {
                        tenant: t.name.clone(),
                        job: match state {
                            NeighborState::Idle => JobSpec::Idle,
                            NeighborState::Busy => busy_job(&s.busy, t),
                        },
                    })
                    .collect();
                self.level(Level {
                    group: state.name().to_string(),
                    level: n as f64,
                    label: format!("neighbors={n}"),
                    present,
                    background,
                    measure: vec![burn(&test, &s.test, s.test.threads)],
                    estimate: burn_estimate(&s.test),
                });
            }
        }
    }

    fn sweep(&mut self, s: &ThreadSweep) {
        let test = self.test().name.clone();
        for &threads in &s.threads {
            self.level(Level {
                group: "sweep".to_string(),
                level: threads as f64,
                label: format!("threads={threads}"),
                present: None,
                background: Vec::new(),
                measure: vec![burn(&test, &s.test, threads)],
                estimate: burn_estimate(&s.test),
            });
        }
    }

    fn load_steps(&mut self, s: &LoadSteps) {
        let test = self.test().name.clone();
        let neighbors: Vec<String> = self.neighbors().iter().map(|t| t.name.clone()).collect();
        // The load runs through the probe's warm-up and measuring time.
        let span = s.probe.warmup + s.probe.duration;
        for &bps in &s.levels_bps {
            let mut measure = vec![Assignment {
                tenant: test.clone(),
                job: JobSpec::Latency {
                    target: REFLECTOR.to_string(),
                    duration_ms: millis(s.probe.duration),
                    msg_size: s.probe.msg_size,
                    warmup_ms: millis(s.probe.warmup),
                    busy_poll: s.probe.busy_poll,
                },
            }];
            if bps > 0.0 {
                let each = bps / neighbors.len() as f64;
                measure.extend(neighbors.iter().map(|n| Assignment {
                    tenant: n.clone(),
                    job: load(each, s.streams, s.msg_size, Some(span)),
                }));
            }
            self.level(Level {
                group: "load".to_string(),
                level: bps,
                label: format!("load={}", compact_si(bps)),
                present: None,
                background: Vec::new(),
                measure,
                estimate: Some(span),
            });
        }
    }

    /// The throughput staircase: level k has the test tenant and the first k
    /// neighbors present, each sending at the node rate for the level's duration,
    /// sampled; all measured together (one record per node).
    fn throughput_staircase(&mut self, s: &ThroughputStaircase) {
        let test = self.test().name.clone();
        let neighbors: Vec<String> = self.neighbors().iter().map(|t| t.name.clone()).collect();
        let sampling = LoadSampling {
            interval_ms: millis(s.sample_interval),
            window: s.window,
        };
        for &k in &s.levels {
            let nodes: Vec<&String> = std::iter::once(&test).chain(&neighbors[..k]).collect();
            let measure = nodes
                .iter()
                .map(|n| Assignment {
                    tenant: (*n).clone(),
                    job: JobSpec::Load {
                        target: SINK.to_string(),
                        rate_bps: s.rate_bps,
                        streams: s.streams,
                        msg_size: s.msg_size,
                        duration_ms: Some(millis(s.duration)),
                        sampling: Some(sampling),
                    },
                })
                .collect();
            let present = self
                .exp
                .tenants
                .iter()
                .filter(|t| nodes.contains(&&t.name))
                .map(|t| t.name.clone())
                .collect();
            self.level(Level {
                group: "throughput".to_string(),
                level: k as f64,
                label: format!("neighbors={k}"),
                present: Some(present),
                background: Vec::new(),
                measure,
                estimate: Some(s.duration),
            });
        }
    }

    /// The isolation matrix: the resource's capacity (id 0, `p_max`), a alone in
    /// each state (ids 1-4), then a beside b (ids 5-16, Volpert et al.'s Table 1).
    fn matrix(&mut self, m: &IsolationMatrix, host_cpus: usize) {
        use MatrixState::*;
        let a = self.test().clone();
        let Some(b) = self.neighbors().first().map(|t| (*t).clone()) else {
            return;
        };
        self.level(Level {
            group: "capacity".to_string(),
            level: 0.0,
            label: "capacity".to_string(),
            present: None,
            background: Vec::new(),
            measure: vec![capacity(m, &self.exp.network, &a, host_cpus)],
            estimate: Some(m.duration),
        });
        let mut id = 0;
        for state in [Undercommitted, Saturated, Overcommitted, Unrestricted] {
            id += 1;
            self.level(Level {
                group: "baseline".to_string(),
                level: f64::from(id),
                label: format!("a={}", state.name()),
                present: None,
                background: Vec::new(),
                measure: vec![state.job(m, &a, host_cpus)],
                estimate: Some(m.duration),
            });
        }
        for sa in [Undercommitted, Saturated, Overcommitted] {
            for sb in [Undercommitted, Saturated, Overcommitted, Unrestricted] {
                id += 1;
                self.level(Level {
                    group: "pair".to_string(),
                    level: f64::from(id),
                    label: format!("a={},b={}", sa.name(), sb.name()),
                    present: None,
                    background: Vec::new(),
                    measure: vec![sa.job(m, &a, host_cpus), sb.job(m, &b, host_cpus)],
                    estimate: Some(m.duration),
                });
            }
        }
    }
}

/// A tenant's state in the isolation matrix (Volpert et al.).
#[derive(Debug, Clone, Copy)]
enum MatrixState {
    Undercommitted,
    Saturated,
    Overcommitted,
    Unrestricted,
}

impl MatrixState {
    fn name(self) -> &'static str {
        match self {
            MatrixState::Undercommitted => "undercommitted",
            MatrixState::Saturated => "saturated",
            MatrixState::Overcommitted => "overcommitted",
            MatrixState::Unrestricted => "unrestricted",
        }
    }

    /// The measured job that puts tenant `t` in this state for `m.duration`.
    fn job(self, m: &IsolationMatrix, t: &TenantDef, host_cpus: usize) -> Assignment {
        let job = match m.resource {
            Resource::Cpu => {
                let v = t.vcpus as f64;
                let (threads, pin) = match self {
                    MatrixState::Undercommitted => ((v * UNDERCOMMIT).floor().max(1.0), "cores"),
                    MatrixState::Saturated => (v, "cores"),
                    // More threads than vCPUs: unpinned, sharing the tenant's CPUs.
                    MatrixState::Overcommitted => (v * OVERCOMMIT_CPU, "none"),
                    // As many threads as the host has CPUs, placed by the scheduler
                    // over all of them: no set boundaries.
                    MatrixState::Unrestricted => (host_cpus.max(1) as f64, "none"),
                };
                let scope = match self {
                    MatrixState::Unrestricted => BurnScope::Host,
                    _ => BurnScope::Tenant,
                };
                JobSpec::Burn {
                    workload: m.workload.clone(),
                    threads: threads as usize,
                    ops: None,
                    duration_ms: Some(millis(m.duration)),
                    pin: pin.to_string(),
                    cpus: None,
                    scope,
                }
            }
            Resource::Network => {
                let share = m.share_bps.unwrap_or(0.0);
                let factor = match self {
                    MatrixState::Undercommitted => UNDERCOMMIT,
                    MatrixState::Saturated => 1.0,
                    MatrixState::Overcommitted => OVERCOMMIT_NET,
                    MatrixState::Unrestricted => UNRESTRICTED_NET,
                };
                load(share * factor, 1, m.msg_size, Some(m.duration))
            }
        };
        Assignment {
            tenant: t.name.clone(),
            job,
        }
    }
}

/// The isolation matrix's capacity step: tenant `a` alone using the whole resource
/// of the host, whose mean is `p_max`, "the maximum possible utilisation a resource
/// can achieve" (Volpert et al., eq. 4). cpu: one burner thread pinned on each of
/// the host's `host_cpus` online CPUs (host scope: beyond a's own CPUs); its ops/s
/// is the host's throughput in the metric's own units. network: several streams
/// asking for far more than the link carries (10x a tenant's share, and at least
/// twice an emulated host NIC), so that the sink receives the link's capacity.
fn capacity(m: &IsolationMatrix, network: &Network, a: &TenantDef, host_cpus: usize) -> Assignment {
    let job = match m.resource {
        Resource::Cpu => JobSpec::Burn {
            workload: m.workload.clone(),
            threads: host_cpus.max(1),
            ops: None,
            duration_ms: Some(millis(m.duration)),
            pin: "compact".to_string(),
            cpus: None,
            scope: BurnScope::Host,
        },
        Resource::Network => {
            let link = match network {
                Network::Emulated { host_bw_bps, .. } => 2.0 * host_bw_bps,
                Network::None => 0.0,
            };
            let rate = (m.share_bps.unwrap_or(0.0) * UNRESTRICTED_NET).max(link);
            load(rate, CAPACITY_STREAMS, m.msg_size, Some(m.duration))
        }
    };
    Assignment {
        tenant: a.name.clone(),
        job,
    }
}

/// What a busy neighbor runs until stopped.
fn busy_job(busy: &Busy, t: &TenantDef) -> JobSpec {
    match busy {
        Busy::Burner { workload, threads } => JobSpec::Busy {
            workload: workload.clone(),
            threads: threads.unwrap_or(t.vcpus),
        },
        Busy::Load {
            rate_bps,
            streams,
            msg_size,
        } => load(*rate_bps, *streams, *msg_size, None),
    }
}

fn load(rate_bps: f64, streams: usize, msg_size: usize, duration: Option<Duration>) -> JobSpec {
    JobSpec::Load {
        target: SINK.to_string(),
        rate_bps,
        streams,
        msg_size,
        duration_ms: duration.map(millis),
        sampling: None,
    }
}

fn burn(tenant: &str, b: &Burn, threads: usize) -> Assignment {
    let (ops, duration_ms) = match b.amount {
        BurnAmount::Ops(n) => (Some(n), None),
        BurnAmount::DurationMs(d) => (None, Some(millis(d))),
    };
    Assignment {
        tenant: tenant.to_string(),
        job: JobSpec::Burn {
            workload: b.workload.clone(),
            threads,
            ops,
            duration_ms,
            pin: b.pin.clone(),
            cpus: None,
            scope: BurnScope::Tenant,
        },
    }
}

fn burn_estimate(b: &Burn) -> Option<Duration> {
    match b.amount {
        BurnAmount::Ops(_) => None,
        BurnAmount::DurationMs(d) => Some(d),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// "50M", "1.5G", "0": short SI form for step ids.
fn compact_si(v: f64) -> String {
    let (div, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")]
        .into_iter()
        .find(|(d, _)| v.abs() >= *d)
        .unwrap_or((1.0, ""));
    let s = format!("{:.3}", v / div);
    format!("{}{p}", s.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_labels() {
        assert_eq!(compact_si(0.0), "0");
        assert_eq!(compact_si(50e6), "50M");
        assert_eq!(compact_si(1.5e9), "1.5G");
    }
}
