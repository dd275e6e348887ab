//! Two equal CPU-bound jobs placed the ways the blog compared them (seed 002, l.97 and
//! l.186: gzip on one processor, two gzips time-sharing it, on two hyperthreads of
//! one core, on two separate cores, and left to the scheduler), measured in
//! interleaved rounds, and put in one table with each placement's throughput per job
//! relative to one job alone and the *SMT yield*: a job's throughput on SMT siblings
//! over its throughput time-sharing one hyperthread (the blog's 79.9 / 60.5 MB/s =
//! 1.32).
//!
//! Every placement but `unpinned` is an explicit CPU list handed to
//! [`crate::placement::plan`]; time-sharing is that list with one CPU and two threads
//! (oversubscribed). The CPUs come from the [`Topology`] around one base CPU `a`:
//!
//! - `one`: one job on `a`;
//! - `time-shared`: two jobs on `a`;
//! - `siblings`: `a` and the first of its SMT siblings that is online and allowed;
//! - `non-siblings`: `a` and the first usable CPU of another core, in core order
//!   (the blog's 0 and 2 on its hypervisor's numbering; 0 and 1 on an m5.2xlarge,
//!   whose siblings are n and n + 4);
//! - `unpinned`: two jobs anywhere the process may run.
//!
//! Siblings and cores are sysfs's, or the SMT probe's ([`Cores`]) where a hypervisor
//! mislabels them (the blog's showed its four vCPUs as one core). A placement the host
//! cannot offer (no sibling: a host without SMT, or a hypervisor that hides it; a
//! single core) is listed as unavailable with the reason, never stood in for by
//! another. The base CPU is `--cpu`, else the first usable CPU with a usable sibling,
//! else the first usable CPU.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use nnb_format::stats::Summary;

use crate::burner::{burn, BurnError, BurnResult, EventPool, Work};
use crate::clock::Clock;
use crate::placement::{plan, PinStrategy, Placement, PlacementError};
use crate::topology::{format_list, Topology};
use crate::workload::Workload;

/// One of the blog's placements of two jobs (or one, alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PairPlacement {
    /// One job alone on one CPU: the reference.
    One,
    /// Two jobs on one CPU (one hyperthread): the kernel splits it between them.
    TimeShared,
    /// Two jobs on the two SMT threads of one core.
    Siblings,
    /// Two jobs on CPUs of different cores.
    NonSiblings,
    /// Two jobs where the scheduler puts them.
    Unpinned,
}

impl PairPlacement {
    /// Every placement, in the blog's order.
    pub const ALL: [PairPlacement; 5] = [
        PairPlacement::One,
        PairPlacement::TimeShared,
        PairPlacement::Siblings,
        PairPlacement::NonSiblings,
        PairPlacement::Unpinned,
    ];

    /// Its name as typed (`time-shared`).
    pub fn name(self) -> &'static str {
        match self {
            PairPlacement::One => "one",
            PairPlacement::TimeShared => "time-shared",
            PairPlacement::Siblings => "siblings",
            PairPlacement::NonSiblings => "non-siblings",
            PairPlacement::Unpinned => "unpinned",
        }
    }

    /// How many jobs it runs.
    pub fn jobs(self) -> usize {
        match self {
            PairPlacement::One => 1,
            _ => 2,
        }
    }
}

impl fmt::Display for PairPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is none of [`PairPlacement::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown placement {0:?}: expected one, time-shared, siblings, non-siblings or unpinned")]
pub struct UnknownPlacement(pub String);

impl FromStr for PairPlacement {
    type Err = UnknownPlacement;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PairPlacement::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPlacement(s.to_string()))
    }
}

/// Whether the host offers a placement: its threads' slots, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offer {
    /// The plan its jobs run under (one slot per job).
    Available(Placement),
    /// Why this host cannot offer it.
    Unavailable(String),
}

/// A placement and what the host offers for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedPair {
    /// The placement.
    pub kind: PairPlacement,
    /// Its plan, or why there is none.
    pub offer: Offer,
}

impl PlannedPair {
    /// The CPUs its jobs run on as a list (`0,4`; `0` twice is `0`), `any of 0-1` when
    /// unpinned, `-` when unavailable.
    pub fn cpus(&self, allowed: &[usize]) -> String {
        match &self.offer {
            Offer::Unavailable(_) => "-".to_string(),
            Offer::Available(_) if self.kind == PairPlacement::Unpinned => {
                format!("any of {}", format_list(allowed))
            }
            Offer::Available(p) => {
                let cpus: Vec<String> = p
                    .slots
                    .iter()
                    .filter_map(|s| s.cpu.map(|c| c.to_string()))
                    .collect();
                cpus.join(",")
            }
        }
    }
}

/// Which CPUs share a physical core: sysfs's word ([`Cores::sysfs`]) or what the SMT
/// probe measured ([`Cores::probed`], for a hypervisor that mislabels its vCPUs, as
/// the blog's did: all four on one core).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cores {
    /// CPUs grouped by physical core, in core order.
    pub groups: Vec<Vec<usize>>,
    /// Where the groups come from, for the reasons (`sysfs`, `the SMT probe`).
    pub source: &'static str,
}

impl Cores {
    /// The topology's cores ([`Topology::cores`]).
    pub fn sysfs(topo: &Topology) -> Cores {
        Cores {
            groups: topo.cores(),
            source: "sysfs",
        }
    }

    /// The sibling groups of [`crate::smt_probe::ProbeReport::sibling_groups`].
    pub fn probed(groups: Vec<Vec<usize>>) -> Cores {
        Cores {
            groups,
            source: "the SMT probe",
        }
    }

    /// The group holding `cpu`, or nothing.
    fn of(&self, cpu: usize) -> &[usize] {
        self.groups
            .iter()
            .find(|g| g.contains(&cpu))
            .map_or(&[], Vec::as_slice)
    }
}

/// Plans `kinds` around the base CPU (`base`, else the module's default) among the
/// `allowed` CPUs of `topo`, siblings and cores as `cores` groups them. An unusable
/// `base` (absent, offline, not allowed) is an error; a placement the host cannot
/// offer is [`Offer::Unavailable`].
pub fn choose(
    topo: &Topology,
    allowed: &[usize],
    cores: &Cores,
    base: Option<usize>,
    kinds: &[PairPlacement],
) -> Result<Vec<PlannedPair>, PlacementError> {
    let usable = |id: usize| topo.cpu(id).is_some_and(|c| c.online) && allowed.contains(&id);
    let sibling_of = |a: usize| cores.of(a).iter().copied().find(|&s| s != a && usable(s));
    let a = match base {
        Some(a) => a,
        None => {
            let cpus: Vec<usize> = topo
                .online()
                .map(|c| c.id)
                .filter(|&id| usable(id))
                .collect();
            cpus.iter()
                .copied()
                .find(|&id| sibling_of(id).is_some())
                .or(cpus.first().copied())
                .ok_or_else(|| PlacementError::NoUsableCpu {
                    online: format_list(&topo.online().map(|c| c.id).collect::<Vec<_>>()),
                    allowed: format_list(allowed),
                })?
        }
    };
    let list = |cpus: Vec<usize>, threads: usize| {
        plan(topo, &PinStrategy::List(cpus), threads, allowed, true)
    };
    // Checks `a` (present, online, allowed) once, with the error a user's list gets.
    let alone = list(vec![a], 1)?;
    let source = cores.source;
    kinds
        .iter()
        .map(|&kind| {
            let offer = match kind {
                PairPlacement::One => Offer::Available(alone.clone()),
                PairPlacement::TimeShared => Offer::Available(list(vec![a], 2)?),
                PairPlacement::Siblings => match sibling_of(a) {
                    Some(b) => Offer::Available(list(vec![a, b], 2)?),
                    None => Offer::Unavailable(format!(
                        "cpu {a} has no SMT sibling that is online and allowed (its core per \
                         {source}: {}): no SMT on this host, or a hypervisor that hides it \
                         (`nnb topo --probe` measures which CPUs share a core; --probe uses it)",
                        format_list(cores.of(a))
                    )),
                },
                PairPlacement::NonSiblings => {
                    let mine = cores.of(a);
                    let other = cores
                        .groups
                        .iter()
                        .filter(|g| !g.contains(&a))
                        .flatten()
                        .copied()
                        .find(|&id| usable(id) && !mine.contains(&id));
                    match other {
                        Some(c) => Offer::Available(list(vec![a, c], 2)?),
                        None => Offer::Unavailable(format!(
                            "no usable CPU on another core than cpu {a}'s per {source} (usable: \
                             {}); a hypervisor that puts every vCPU on one core hides the \
                             others (--probe measures them)",
                            format_list(allowed)
                        )),
                    }
                }
                PairPlacement::Unpinned => {
                    Offer::Available(plan(topo, &PinStrategy::None, 2, allowed, true)?)
                }
            };
            Ok(PlannedPair { kind, offer })
        })
        .collect()
}

/// One placement's burn in one round.
#[derive(Debug, Clone, Serialize)]
pub struct PairRun {
    /// The round, from 1.
    pub round: usize,
    /// The placement.
    pub kind: PairPlacement,
    /// The burn: one thread record per job.
    pub result: BurnResult,
}

impl PairRun {
    /// Throughput per job: the mean of its jobs' own ops/s.
    pub fn per_job(&self) -> f64 {
        let t = &self.result.threads;
        t.iter().map(|t| t.ops_per_sec).sum::<f64>() / t.len().max(1) as f64
    }
}

/// Runs every available placement of `planned` for `duration` in each of `rounds`
/// interleaved rounds: round r runs them all, starting one later in the list than
/// round r - 1, so no placement always runs first (or always after the same one).
/// `progress` is told each run as it starts (round, placement).
pub fn run(
    clock: &Clock,
    workload: &Workload,
    duration: Duration,
    rounds: usize,
    planned: &[PlannedPair],
    progress: &mut dyn FnMut(usize, PairPlacement),
) -> Result<Vec<PairRun>, BurnError> {
    let available: Vec<(PairPlacement, &Placement)> = planned
        .iter()
        .filter_map(|p| match &p.offer {
            Offer::Available(pl) => Some((p.kind, pl)),
            Offer::Unavailable(_) => None,
        })
        .collect();
    let mut runs = Vec::new();
    for round in 1..=rounds {
        for i in 0..available.len() {
            let (kind, placement) = available[(i + round - 1) % available.len()];
            progress(round, kind);
            let work = Work::Duration(duration);
            let result = burn(
                clock,
                workload,
                work,
                EventPool::PerThread,
                &placement.slots,
            )?;
            runs.push(PairRun {
                round,
                kind,
                result,
            });
        }
    }
    Ok(runs)
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct PairRow {
    /// The placement.
    pub placement: PairPlacement,
    /// Its CPUs ([`PlannedPair::cpus`]).
    pub cpus: String,
    /// Jobs it runs.
    pub jobs: usize,
    /// Why the host cannot offer it; `None` when it ran.
    pub unavailable: Option<String>,
    /// Throughput per job over the rounds (ops/s).
    pub per_job: Option<Summary>,
    /// Per round, the throughput per job over that round's one job alone.
    pub relative: Option<Summary>,
}

/// The table: a row per placement and the SMT yield.
#[derive(Debug, Clone, Serialize)]
pub struct PairsTable {
    /// One row per placement asked for, in the blog's order.
    pub rows: Vec<PairRow>,
    /// Per round, a job's throughput on siblings over its throughput time-shared;
    /// `None` unless both ran.
    pub smt_yield: Option<Summary>,
}

/// The table of `per_job` (each run's round, placement and [`PairRun::per_job`]) of
/// `planned`: per-round values, paired by round (each round's placements ran back to
/// back), summarised with a 95% CI over rounds.
pub fn table(
    planned: &[PlannedPair],
    allowed: &[usize],
    per_job: &[(usize, PairPlacement, f64)],
) -> PairsTable {
    let per_round = |kind: PairPlacement| -> Vec<(usize, f64)> {
        per_job
            .iter()
            .filter(|r| r.1 == kind)
            .map(|r| (r.0, r.2))
            .collect()
    };
    let ratio = |num: &[(usize, f64)], den: &[(usize, f64)]| -> Option<Summary> {
        let values: Vec<f64> = num
            .iter()
            .filter_map(|(round, n)| {
                let d = den.iter().find(|(r, _)| r == round)?.1;
                (d > 0.0).then(|| n / d)
            })
            .collect();
        Summary::of(&values)
    };
    let alone = per_round(PairPlacement::One);
    let rows = planned
        .iter()
        .map(|p| {
            let mine = per_round(p.kind);
            let values: Vec<f64> = mine.iter().map(|(_, v)| *v).collect();
            PairRow {
                placement: p.kind,
                cpus: p.cpus(allowed),
                jobs: p.kind.jobs(),
                unavailable: match &p.offer {
                    Offer::Unavailable(why) => Some(why.clone()),
                    Offer::Available(_) => None,
                },
                per_job: Summary::of(&values),
                relative: ratio(&mine, &alone),
            }
        })
        .collect();
    PairsTable {
        rows,
        smt_yield: ratio(
            &per_round(PairPlacement::Siblings),
            &per_round(PairPlacement::TimeShared),
        ),
    }
}
