//! Expands an [`Experiment`] into its ordered steps.
//!
//! A step is one repetition at one level: what every neighbor runs in the background
//! during it, which jobs are measured (concurrently), and how long that should take.
//! Each step has a stable id such as `busy/neighbors=2/rep=3`: ids are how
//! `samples.jsonl` records name their step and how `--resume` knows what is done, so
//! the same experiment always expands to the same ids in the same order.

use std::time::Duration;

use serde::Serialize;

mod isolation;
mod pair;

use crate::tenant::server_name;
use crate::{
    Burn, BurnAmount, Busy, Experiment, LoadSteps, Loads, NeighborState, Role, Scenario, Servers,
    Staircase, TenantDef, TestWorkload, ThreadSweep, ThroughputStaircase, UnusedNeighbors,
};
use nnb_agent::jobs::{BurnScope, JobSpec, LoadOptions, LoadSampling};
use nnb_format::{Runtime, StepGroup, StepRecord, StepStart};

/// Target placeholder for the endpoint's UDP sink, resolved by the controller.
pub const SINK: &str = "@sink";
/// Target placeholder for the endpoint's UDP reflector, resolved by the controller.
pub const REFLECTOR: &str = "@reflector";
/// Target placeholder for the endpoint's TCP sink, resolved by the controller.
pub const TCP_SINK: &str = "@tcp-sink";

/// Whether `target` is one of the placeholders the controller resolves to a server.
fn is_placeholder(target: &str) -> bool {
    [SINK, REFLECTOR, TCP_SINK].contains(&target)
}

/// Where a job sends or probes, for the kinds that have a target.
fn target_of(job: &JobSpec) -> Option<&str> {
    match job {
        JobSpec::Latency { target, .. }
        | JobSpec::Load { target, .. }
        | JobSpec::Rtt { target, .. }
        | JobSpec::Badabing { target, .. } => Some(target),
        _ => None,
    }
}

/// Who runs the `serve` jobs a plan's placeholder targets resolve to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "clients", rename_all = "kebab-case")]
pub enum Serving {
    /// Nobody: no job sends or probes.
    None,
    /// The endpoint agent, for every tenant.
    Shared,
    /// A server agent per client ([`server_name`]), each sent to by its client only:
    /// the clients, in the order of their first job.
    Mirrored(Vec<String>),
}

impl Serving {
    /// The clients that get a server of their own (none unless mirrored).
    pub fn clients(&self) -> &[String] {
        match self {
            Serving::Mirrored(c) => c,
            Serving::None | Serving::Shared => &[],
        }
    }

    /// The agent whose `serve` job `tenant`'s placeholder targets resolve to: the
    /// endpoint when shared, the tenant's own server when mirrored; `None` when
    /// nobody serves it.
    pub fn server_of(&self, tenant: &str) -> Option<String> {
        match self {
            Serving::None => None,
            Serving::Shared => Some(crate::tenant::ENDPOINT.to_string()),
            Serving::Mirrored(c) => c.iter().any(|c| c == tenant).then(|| server_name(tenant)),
        }
    }
}

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
    /// staircase), `cputest`/`rtt`/`tcp`/`udp`/`badabing` (pair suite).
    pub group: StepGroup,
    /// Numeric level: neighbors, threads, aggregate load in bit/s, Table 1 id
    /// (0 for the isolation matrix's capacity step), or a pair suite's position in
    /// its round (1-based).
    pub level: f64,
    /// The level as people read it, e.g. `neighbors=2`, `load=50M`, `a_s b_o`.
    pub level_label: String,
    /// Repetition number within the level (1-based; warm-ups count separately).
    pub rep: u32,
    /// A warm-up repetition, recorded but left out of summaries.
    pub warmup: bool,
    /// Tenants whose agents run during the step, in file order (the endpoint is not
    /// a tenant): every tenant, except in a staircase whose neighbors above the
    /// level are absent (a throughput staircase's always are) and at load steps'
    /// zero level with the neighbors absent (the test tenant alone). The controller starts
    /// and stops agents (and, on aws, instances) between steps to match.
    pub present: Vec<String>,
    /// Tenants whose grants are lifted during the step (an isolation matrix's
    /// unrestricted tenant, and tenant a in its capacity step); every other tenant
    /// runs within its grant.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lifted: Vec<String>,
    /// Background jobs running during the step (present tenants not listed run
    /// nothing).
    pub background: Vec<Assignment>,
    /// Whether background jobs carry over into this step: one it still wants
    /// unchanged (same tenant, same spec) keeps running through the step's changes
    /// of background and present tenants, only the jobs it no longer wants are
    /// stopped and only new ones started (a continuous throughput staircase's
    /// loads). `false`: any change stops every background job and starts the
    /// wanted ones afresh.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub continuous: bool,
    /// Jobs started together and measured; the step ends when all have ended.
    pub measure: Vec<Assignment>,
    /// Expected measuring time; `None` for fixed-work burns (runtime is the result).
    #[serde(serialize_with = "serialize_opt_ms", rename = "estimate_ms")]
    pub estimate: Option<Duration>,
    /// The technology the step's tenants run in (an isolation matrix over
    /// `technologies`); `None` elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub technology: Option<Runtime>,
    /// How the measured jobs start, where not together (an isolation matrix's
    /// pairs): the driver posts the later job a stagger after the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<StepStart>,
}

/// Every step of an experiment, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The steps.
    pub steps: Vec<Step>,
}

impl Plan {
    /// Whether any job sends to or probes the endpoint (which then runs `serve`),
    /// or runs on it (a pair suite's CPUTest on the pair's other side).
    pub fn needs_endpoint(&self) -> bool {
        let uses = |a: &Assignment| {
            a.tenant == crate::tenant::ENDPOINT || target_of(&a.job).is_some_and(is_placeholder)
        };
        self.steps
            .iter()
            .any(|s| s.background.iter().chain(&s.measure).any(uses))
    }

    /// The tenants whose jobs send to or probe a placeholder target, in the order of
    /// their first such job: the clients that mirrored servers pair.
    pub fn clients(&self) -> Vec<String> {
        let mut clients: Vec<String> = Vec::new();
        let jobs = self
            .steps
            .iter()
            .flat_map(|s| s.background.iter().chain(&s.measure));
        for a in jobs {
            if target_of(&a.job).is_some_and(is_placeholder)
                && a.tenant != crate::tenant::ENDPOINT
                && !clients.contains(&a.tenant)
            {
                clients.push(a.tenant.clone());
            }
        }
        clients
    }

    /// Who serves this plan's placeholder targets when the experiment asks for
    /// `servers`.
    pub fn serving(&self, servers: Servers) -> Serving {
        match servers {
            _ if !self.needs_endpoint() => Serving::None,
            Servers::Shared => Serving::Shared,
            Servers::Mirrored => Serving::Mirrored(self.clients()),
        }
    }

    /// The tenants that run command jobs (measured or in the background), in the
    /// order of their first one: their agents must have opted in to commands
    /// (`nnb agent --allow-commands`).
    pub fn command_tenants(&self) -> Vec<String> {
        let mut tenants: Vec<String> = Vec::new();
        let jobs = self
            .steps
            .iter()
            .flat_map(|s| s.background.iter().chain(&s.measure));
        for a in jobs {
            if matches!(a.job, JobSpec::Command(_)) && !tenants.contains(&a.tenant) {
                tenants.push(a.tenant.clone());
            }
        }
        tenants
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
        Some(d) => s.serialize_some(&nnb_units::millis(*d)),
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
        Scenario::PairSuite(s) => b.pair_suite(s),
    }
    Plan { steps: b.steps }
}

/// One level: what it is called, who is there and what runs in it.
struct Level {
    group: StepGroup,
    level: f64,
    label: String,
    /// `None`: every tenant.
    present: Option<Vec<String>>,
    /// Tenants without their grants.
    lifted: Vec<String>,
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
        self.level_with(l, false);
    }

    /// [`Builder::level`], with background jobs that carry over (`continuous`,
    /// see [`Step::continuous`]).
    fn level_with(&mut self, l: Level, continuous: bool) {
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
                group: l.group,
                level: l.level,
                level_label: l.label.clone(),
                rep,
                warmup,
                present: present.clone(),
                lifted: l.lifted.clone(),
                background: l.background.clone(),
                continuous,
                measure: l.measure.clone(),
                estimate: l.estimate,
                technology: None,
                start: None,
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
                    group: state.group(),
                    level: n as f64,
                    label: format!("neighbors={n}"),
                    present,
                    lifted: Vec::new(),
                    background,
                    measure: vec![test_job(&test, &s.test)],
                    estimate: test_estimate(&s.test),
                });
            }
        }
    }

    fn sweep(&mut self, s: &ThreadSweep) {
        let test = self.test().name.clone();
        for &threads in &s.threads {
            self.level(Level {
                group: StepGroup::Sweep,
                level: threads as f64,
                label: format!("threads={threads}"),
                present: None,
                lifted: Vec::new(),
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
                    duration_ms: nnb_units::millis(s.probe.duration),
                    msg_size: s.probe.msg_size,
                    warmup_ms: nnb_units::millis(s.probe.warmup),
                    busy_poll: s.probe.busy_poll,
                },
            }];
            if bps > 0.0 {
                let each = bps / neighbors.len() as f64;
                measure.extend(neighbors.iter().map(|n| Assignment {
                    tenant: n.clone(),
                    job: load_with(each, s.streams, s.msg_size, Some(span), &s.options),
                }));
            }
            // The baseline: the test tenant alone when the neighbors are absent.
            let present =
                (bps <= 0.0 && s.unused == UnusedNeighbors::Absent).then(|| vec![test.clone()]);
            self.level(Level {
                group: StepGroup::Load,
                level: bps,
                label: format!("load={}", nnb_units::format_si_compact(bps)),
                present,
                lifted: Vec::new(),
                background: Vec::new(),
                measure,
                estimate: Some(span),
            });
        }
    }

    /// The throughput staircase: level k has the test tenant and the first k
    /// neighbors present, each sending at the node rate; every node's rate is
    /// measured together (one record per node). With continuous loads each node's
    /// load is a background job from the level where it joins to the end (the same
    /// spec at every level, so it carries over) and each level measures a window of
    /// every node's running load; restarting per level, each node present sends
    /// afresh for the level's duration, sampled.
    fn throughput_staircase(&mut self, s: &ThroughputStaircase) {
        let test = self.test().name.clone();
        let neighbors: Vec<String> = self.neighbors().iter().map(|t| t.name.clone()).collect();
        let interval_ms = nnb_units::millis(s.sample_interval);
        let load = |duration_ms, sampling| JobSpec::Load {
            target: SINK.to_string(),
            rate_bps: s.rate_bps,
            streams: s.streams,
            msg_size: s.msg_size,
            duration_ms,
            sampling,
            options: s.options,
        };
        for &k in &s.levels {
            let nodes: Vec<&String> = std::iter::once(&test).chain(&neighbors[..k]).collect();
            let each = |job: &JobSpec| -> Vec<Assignment> {
                nodes
                    .iter()
                    .map(|n| Assignment {
                        tenant: (*n).clone(),
                        job: job.clone(),
                    })
                    .collect()
            };
            let (background, measure, estimate) = match s.loads {
                Loads::Continuous => (
                    each(&load(None, None)),
                    each(&JobSpec::LoadWindow {
                        interval_ms,
                        window: s.window,
                    }),
                    nnb_agent::jobs::window_span(interval_ms, s.window).ok(),
                ),
                Loads::RestartPerLevel => (
                    Vec::new(),
                    each(&load(
                        Some(nnb_units::millis(s.duration)),
                        Some(LoadSampling {
                            interval_ms,
                            window: s.window,
                        }),
                    )),
                    Some(s.duration),
                ),
            };
            let present = self
                .exp
                .tenants
                .iter()
                .filter(|t| nodes.contains(&&t.name))
                .map(|t| t.name.clone())
                .collect();
            self.level_with(
                Level {
                    group: StepGroup::Throughput,
                    level: k as f64,
                    label: format!("neighbors={k}"),
                    present: Some(present),
                    lifted: Vec::new(),
                    background,
                    measure,
                    estimate,
                },
                s.loads == Loads::Continuous,
            );
        }
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
            options,
        } => load_with(*rate_bps, *streams, *msg_size, None, options),
        Busy::Command(c) => JobSpec::Command(c.clone()),
    }
}

/// A UDP load towards the endpoint's sink with the default settings.
fn load(rate_bps: f64, streams: usize, msg_size: usize, duration: Option<Duration>) -> JobSpec {
    load_with(
        rate_bps,
        streams,
        msg_size,
        duration,
        &LoadOptions::default(),
    )
}

/// A load with Wang & Ng's `options`: a TCP one goes to the endpoint's TCP sink
/// ([`TCP_SINK`]), a UDP one to its UDP sink.
fn load_with(
    rate_bps: f64,
    streams: usize,
    msg_size: usize,
    duration: Option<Duration>,
    options: &LoadOptions,
) -> JobSpec {
    JobSpec::Load {
        target: if options.tcp { TCP_SINK } else { SINK }.to_string(),
        rate_bps,
        streams,
        msg_size,
        duration_ms: duration.map(nnb_units::millis),
        sampling: None,
        options: *options,
    }
}

fn burn(tenant: &str, b: &Burn, threads: usize) -> Assignment {
    let (ops, duration_ms) = match b.amount {
        BurnAmount::Ops(n) => (Some(n), None),
        BurnAmount::DurationMs(d) => (None, Some(nnb_units::millis(d))),
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
            duty: None,
            pool: b.pool,
        },
    }
}

/// A staircase's measured job on the test tenant.
fn test_job(tenant: &str, w: &TestWorkload) -> Assignment {
    match w {
        TestWorkload::Burn(b) => burn(tenant, b, b.threads),
        TestWorkload::Command(c) => Assignment {
            tenant: tenant.to_string(),
            job: JobSpec::Command(c.clone()),
        },
    }
}

/// How long a staircase's test workload measures: a fixed-time one's time; `None`
/// for fixed work (a burn's ops, a command that runs until it exits).
fn test_estimate(w: &TestWorkload) -> Option<Duration> {
    match w {
        TestWorkload::Burn(b) => burn_estimate(b),
        TestWorkload::Command(c) => c.duration_ms.map(Duration::from_millis),
    }
}

fn burn_estimate(b: &Burn) -> Option<Duration> {
    match b.amount {
        BurnAmount::Ops(_) => None,
        BurnAmount::DurationMs(d) => Some(d),
    }
}

/// The record of a step in the results: a plan's step is written as it is.
impl StepRecord for Step {
    fn id(&self) -> &str {
        &self.id
    }
    fn group(&self) -> StepGroup {
        self.group
    }
    fn level(&self) -> f64 {
        self.level
    }
    fn level_label(&self) -> &str {
        &self.level_label
    }
    fn rep(&self) -> u32 {
        self.rep
    }
    fn warmup(&self) -> bool {
        self.warmup
    }
    fn present(&self) -> &[String] {
        &self.present
    }
    fn technology(&self) -> Option<Runtime> {
        self.technology
    }
    fn start(&self) -> Option<StepStart> {
        self.start
    }
}
