//! The isolation matrix's steps (Volpert et al., Table 1): the resource's capacity,
//! tenant a alone in each state, tenant b alone in each state (b's baselines), then
//! a beside b in each pair of states.
//!
//! A state is a demand against the tenant's grant for the resource (its
//! [`TenantGrant`], or for the CPU its vCPUs when it has no quota): undercommitted
//! asks for half of it, saturated for all of it, overcommitted for more, and
//! unrestricted runs with the grant lifted (the step's `lifted`) asking for far more.
//!
//! | resource | grant `g` | undercommitted | saturated | overcommitted | unrestricted |
//! |---|---|---|---|---|---|
//! | cpu | quota in CPUs (default: vCPUs) | `g/2` CPUs | `g` | `2g` | a thread per host CPU |
//! | memory | limit | `g/2` bytes | `g` less 32 MiB | `2g` | 4`g` (or `unrestricted`) |
//! | disk | IOPS the grant sustains at the read share | `g/2` IOPS | `g` | `2g`, twice the queue | unpaced |
//! | network | `rate` as payload (or `share`) | `g/2`, 1 stream | `g`, 1 stream | 1.5`g`, 4 streams | 10`g`, 8 streams |
//!
//! A network grant is a token bucket counting whole frames; the loads ask for its
//! payload (at 1400-byte datagrams 1400/1442 of it), so a saturated tenant fills
//! its grant and no more.
//!
//! A CPU demand of `d` CPUs is `ceil(d)` burner threads each busy `d / ceil(d)` of
//! the time (a duty cycle, like `stress-ng --cpu-load`).

use super::{load, Assignment, Builder, Level};
use crate::tenant::technology_name;
use crate::{IsolationMatrix, Network, Resource, TenantDef};
use nnb_agent::jobs::{BurnScope, JobSpec};
use nnb_format::{MatrixLevel, Runtime, StepStart, TenantState};
use nnb_units::wire::Framing;

/// Demand of an undercommitted tenant, as a share of its grant.
const UNDERCOMMIT: f64 = 0.5;
/// Demand of an overcommitted tenant (CPU, memory, disk), as a multiple of its grant.
const OVERCOMMIT: f64 = 2.0;
/// An overcommitted network tenant's rate, as a multiple of its share.
const OVERCOMMIT_NET: f64 = 1.5;
/// An overcommitted network tenant's streams: more senders, as the paper's more
/// clients.
const OVERCOMMIT_STREAMS: usize = 4;
/// An unrestricted network tenant's rate, as a multiple of its share, and streams.
const UNRESTRICTED_NET: f64 = 10.0;
const UNRESTRICTED_STREAMS: usize = 8;
/// What a saturated memory tenant's load leaves of its limit. The limit charges
/// everything in the tenant's cgroup, its agent and the load's own pages (code,
/// stacks, page tables) as well as the memory the load keeps touching; those took
/// 10-15 MiB here, and a load of the whole limit had the kernel's OOM killer take its
/// worker over and over (the overcommitted state's behaviour), its resident memory
/// averaging half the limit. Never less than the undercommitted half.
const SATURATED_MEMORY_HEADROOM: u64 = 32 << 20;
/// What an unrestricted memory tenant allocates by default, as a multiple of its
/// grant.
const UNRESTRICTED_MEMORY: u64 = 4;
/// Streams of the network capacity step: several, so that no single sender's pace
/// limits what reaches the sink.
const CAPACITY_STREAMS: usize = 4;
/// A duty cycle this close to 1 is a thread busy all the time.
const FULL_DUTY: f64 = 0.999;
/// The level ids of tenant b alone in each state ([`TenantState::ALL`]'s order):
/// after Table 1's 0-16, so a run with b's baselines numbers a's baselines and the
/// pairs as a run without them does.
const NEIGHBOR_BASELINE_IDS: [u32; 4] = [17, 18, 19, 20];

impl Builder<'_> {
    /// The isolation matrix ([`Builder::matrix_of`]); over `technologies`, once per
    /// technology, in order, with that technology's tenants ([`Builder::technology`]).
    pub(super) fn matrix(&mut self, m: &IsolationMatrix, host_cpus: usize) {
        let a = self.test().clone();
        let Some(b) = self.neighbors().first().map(|t| (*t).clone()) else {
            return;
        };
        if m.technologies.is_empty() {
            return self.matrix_of(m, host_cpus, a, b);
        }
        for &t in &m.technologies {
            let first = self.steps.len();
            let named = |d: &TenantDef| TenantDef {
                name: technology_name(&d.name, t),
                runtime: t,
                ..d.clone()
            };
            self.matrix_of(m, host_cpus, named(&a), named(&b));
            self.technology(first, t);
        }
    }

    /// The steps from `first` on run in technology `t`: only its tenants present,
    /// ids prefixed `t/` (e.g. `runc/pair/a=saturated,b=overcommitted/rep=1`).
    fn technology(&mut self, first: usize, t: Runtime) {
        let present: Vec<String> = self
            .exp
            .launched_tenants()
            .into_iter()
            .filter(|d| d.runtime == t)
            .map(|d| d.name)
            .collect();
        for s in &mut self.steps[first..] {
            s.id = format!("{t}/{}", s.id);
            s.present.clone_from(&present);
            s.technology = Some(t);
        }
    }

    /// The isolation matrix of tenants `a` and `b`: the resource's capacity (id 0,
    /// `p_max`; none for memory, whose maximum is the machine's memory), a alone in
    /// each state (ids 1-4), b alone in each state (ids 17-20: b's baselines, for
    /// b's own degradation and Krebs' fairness; numbered after Table 1's so that a's
    /// and the pairs' ids are the same as in runs without them), then a beside b
    /// (ids 5-16, Volpert et al.'s Table 1), their measured jobs started as
    /// `m.start` says (each pair step's `start`; `None` when together).
    fn matrix_of(&mut self, m: &IsolationMatrix, host_cpus: usize, a: TenantDef, b: TenantDef) {
        use TenantState::*;
        let lifted = |states: &[(TenantState, &TenantDef)]| -> Vec<String> {
            states
                .iter()
                .filter(|(s, _)| matches!(s, Unrestricted))
                .map(|(_, t)| t.name.clone())
                .collect()
        };
        if let Some(job) = capacity(m, &self.exp.network, host_cpus) {
            let level = MatrixLevel::Capacity;
            self.level(Level {
                group: level.group(),
                level: 0.0,
                label: level.to_string(),
                present: None,
                lifted: vec![a.name.clone()],
                background: Vec::new(),
                measure: vec![Assignment {
                    tenant: a.name.clone(),
                    job,
                }],
                estimate: Some(m.duration),
            });
        }
        let mut id = 0;
        for state in TenantState::ALL {
            id += 1;
            let level = MatrixLevel::Alone(state);
            self.level(Level {
                group: level.group(),
                level: f64::from(id),
                label: level.to_string(),
                present: None,
                lifted: lifted(&[(state, &a)]),
                background: Vec::new(),
                measure: vec![state.job(m, &a, host_cpus)],
                estimate: Some(m.duration),
            });
        }
        for (state, id) in TenantState::ALL.into_iter().zip(NEIGHBOR_BASELINE_IDS) {
            let level = MatrixLevel::NeighborAlone(state);
            self.level(Level {
                group: level.group(),
                level: f64::from(id),
                label: level.to_string(),
                present: None,
                lifted: lifted(&[(state, &b)]),
                background: Vec::new(),
                measure: vec![state.job(m, &b, host_cpus)],
                estimate: Some(m.duration),
            });
        }
        let start = (m.start != StepStart::default()).then_some(m.start);
        // A staggered pair lasts its duration and the stagger.
        let paired = m.duration + std::time::Duration::from_millis(m.start.stagger_ms);
        for sa in [Undercommitted, Saturated, Overcommitted] {
            for sb in TenantState::ALL {
                id += 1;
                let level = MatrixLevel::Pair(sa, sb);
                let first = self.steps.len();
                self.level(Level {
                    group: level.group(),
                    level: f64::from(id),
                    label: level.to_string(),
                    present: None,
                    lifted: lifted(&[(sa, &a), (sb, &b)]),
                    background: Vec::new(),
                    measure: vec![sa.job(m, &a, host_cpus), sb.job(m, &b, host_cpus)],
                    estimate: Some(paired),
                });
                for step in &mut self.steps[first..] {
                    step.start = start;
                }
            }
        }
    }
}

/// What a tenant's state in the isolation matrix demands.
trait Demand {
    /// The demand as a multiple of the grant (unrestricted: see each resource).
    fn factor(self) -> f64;
    /// The measured job that puts tenant `t` in this state for `m.duration`.
    fn job(self, m: &IsolationMatrix, t: &TenantDef, host_cpus: usize) -> Assignment;
}

impl Demand for TenantState {
    fn factor(self) -> f64 {
        match self {
            TenantState::Undercommitted => UNDERCOMMIT,
            TenantState::Saturated => 1.0,
            TenantState::Overcommitted | TenantState::Unrestricted => OVERCOMMIT,
        }
    }

    fn job(self, m: &IsolationMatrix, t: &TenantDef, host_cpus: usize) -> Assignment {
        let unrestricted = matches!(self, TenantState::Unrestricted);
        let job = match m.resource {
            Resource::Cpu if unrestricted => {
                // As many threads as the host has CPUs, placed by the scheduler over
                // all of them: no set boundaries.
                burn(m, host_cpus.max(1) as f64, "none", BurnScope::Host)
            }
            Resource::Cpu => {
                let grant = t.grant.cpu.unwrap_or(t.vcpus as f64);
                let demand = grant * self.factor();
                // More threads than vCPUs: unpinned, sharing the tenant's CPUs.
                let pin = if demand.ceil() as usize <= t.vcpus {
                    nnb_burn::placement::PinStrategy::DEFAULT_NAME
                } else {
                    "none"
                };
                burn(m, demand, pin, BurnScope::Tenant)
            }
            Resource::Memory => {
                let grant = t.grant.memory_bytes.unwrap_or(0);
                let bytes = if unrestricted {
                    m.unrestricted_bytes
                        .unwrap_or(grant.saturating_mul(UNRESTRICTED_MEMORY))
                } else if self == TenantState::Saturated {
                    grant
                        .saturating_sub(SATURATED_MEMORY_HEADROOM)
                        .max(grant / 2)
                } else {
                    (grant as f64 * self.factor()) as u64
                };
                JobSpec::Memory {
                    bytes,
                    workers: 1,
                    mode: "keep".to_string(),
                    duration_ms: nnb_units::millis(m.duration),
                }
            }
            Resource::Disk => {
                let Some(d) = &m.disk else {
                    // Validation gives every disk matrix its load.
                    return idle(t);
                };
                let sustained = t.grant.sustained_iops(d.read_fraction).unwrap_or(0.0);
                let (iops, depth) = match self {
                    TenantState::Unrestricted => (None, d.queue_depth),
                    TenantState::Overcommitted => (
                        Some(sustained * self.factor()),
                        (d.queue_depth * 2).min(nnb_agent::jobs::limits::MAX_QUEUE_DEPTH),
                    ),
                    _ => (Some(sustained * self.factor()), d.queue_depth),
                };
                disk(m, iops, depth)
            }
            Resource::Network => {
                let share = network_share(t, m);
                let (factor, streams) = match self {
                    TenantState::Undercommitted | TenantState::Saturated => (self.factor(), 1),
                    TenantState::Overcommitted => (OVERCOMMIT_NET, OVERCOMMIT_STREAMS),
                    TenantState::Unrestricted => (UNRESTRICTED_NET, UNRESTRICTED_STREAMS),
                };
                load(share * factor, streams, m.msg_size, Some(m.duration))
            }
        };
        Assignment {
            tenant: t.name.clone(),
            job,
        }
    }
}

/// The payload rate a network tenant saturates at: its `rate` grant is a token
/// bucket on its interface, which counts each datagram's UDP, IPv4 and Ethernet
/// headers as well, so the load (which asks for payload) asks for the grant's
/// payload share at the message size; without a grant, the scenario's `share` as
/// written.
fn network_share(t: &TenantDef, m: &IsolationMatrix) -> f64 {
    match t.grant.rate_bps {
        Some(grant) => grant * Framing::Shaped.payload_share(m.msg_size, false),
        None => m.share_bps.unwrap_or(0.0),
    }
}

/// A fixed-time burn demanding `cpus` CPUs: `ceil(cpus)` threads, each busy
/// `cpus / ceil(cpus)` of the time.
fn burn(m: &IsolationMatrix, cpus: f64, pin: &str, scope: BurnScope) -> JobSpec {
    let threads = (cpus - 1e-9).ceil().max(1.0);
    let duty = cpus / threads;
    JobSpec::Burn {
        workload: m.workload.clone(),
        threads: threads as usize,
        ops: None,
        duration_ms: Some(nnb_units::millis(m.duration)),
        pin: pin.to_string(),
        cpus: None,
        scope,
        duty: (duty < FULL_DUTY).then_some((duty * 1e3).round() / 1e3),
        pool: nnb_format::EventPool::PerThread,
    }
}

/// The disk matrix's generator at `iops` (`None`: unpaced) with `depth` in flight.
fn disk(m: &IsolationMatrix, iops: Option<f64>, depth: usize) -> JobSpec {
    let d = m.disk.as_ref();
    JobSpec::Disk {
        dir: d.map_or_else(String::new, |d| d.dir.display().to_string()),
        file_size: d.map_or(0, |d| d.file_size),
        block_size: d.map_or(4096, |d| d.block_size),
        iops,
        read_fraction: d.map_or(0.5, |d| d.read_fraction),
        queue_depth: depth,
        direct: true,
        duration_ms: nnb_units::millis(m.duration),
    }
}

/// Nothing measured on `t` (a matrix the checks would have refused).
fn idle(t: &TenantDef) -> Assignment {
    Assignment {
        tenant: t.name.clone(),
        job: JobSpec::Idle,
    }
}

/// The isolation matrix's capacity step: tenant a alone with its grant lifted,
/// using the whole resource of the host, whose mean is `p_max`, "the maximum
/// possible utilisation a resource can achieve" (Volpert et al., eq. 4). cpu: one
/// burner thread pinned on each of the host's `host_cpus` online CPUs; disk: the
/// generator unpaced (the device's IOPS, a calibration); network: several streams
/// asking for far more than the link carries (10x a tenant's share, and at least
/// twice an emulated host NIC). Memory has none: its maximum is the machine's
/// memory, which a memory job's result reports.
fn capacity(m: &IsolationMatrix, network: &Network, host_cpus: usize) -> Option<JobSpec> {
    match m.resource {
        Resource::Cpu => Some(JobSpec::Burn {
            workload: m.workload.clone(),
            threads: host_cpus.max(1),
            ops: None,
            duration_ms: Some(nnb_units::millis(m.duration)),
            pin: "compact".to_string(),
            cpus: None,
            scope: BurnScope::Host,
            duty: None,
            pool: nnb_format::EventPool::PerThread,
        }),
        Resource::Memory => None,
        Resource::Disk => Some(disk(m, None, m.disk.as_ref().map_or(1, |d| d.queue_depth))),
        Resource::Network => {
            let link = match network {
                Network::Emulated { host_bw_bps, .. } => 2.0 * host_bw_bps,
                Network::None => 0.0,
            };
            let rate = (m.share_bps.unwrap_or(0.0) * UNRESTRICTED_NET).max(link);
            Some(load(rate, CAPACITY_STREAMS, m.msg_size, Some(m.duration)))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cpu_matrix() -> IsolationMatrix {
        IsolationMatrix {
            resource: Resource::Cpu,
            duration: Duration::from_secs(2),
            workload: "fpadd".to_string(),
            share_bps: None,
            msg_size: 1400,
            disk: None,
            unrestricted_bytes: None,
            technologies: Vec::new(),
            start: Default::default(),
            usage_interval: crate::DEFAULT_USAGE_INTERVAL,
        }
    }

    fn threads_and_duty(job: &JobSpec) -> (usize, Option<f64>) {
        match job {
            JobSpec::Burn { threads, duty, .. } => (*threads, *duty),
            other => panic!("not a burn: {other:?}"),
        }
    }

    /// T13: a tenant granted 50 Mbit/s (a token bucket counting 1442 bytes per
    /// 1400-byte datagram: 1400 + 8 UDP + 20 IPv4 + 14 Ethernet) saturates its
    /// grant at 50e6 x 1400 / 1442 = 48 543 689 bit/s of payload, and asks half of
    /// that undercommitted; without a grant the scenario's `share` is the rate.
    #[test]
    fn a_network_grant_is_asked_for_as_payload() {
        let m = IsolationMatrix {
            resource: Resource::Network,
            share_bps: Some(80e6),
            ..cpu_matrix()
        };
        let mut t = TenantDef {
            name: "a".to_string(),
            role: crate::Role::Test,
            vcpus: 1,
            grant: crate::TenantGrant {
                rate_bps: Some(50e6),
                ..Default::default()
            },
            runtime: Default::default(),
        };
        let rate = |state: TenantState, t: &TenantDef| match state.job(&m, t, 2).job {
            JobSpec::Load { rate_bps, .. } => rate_bps,
            other => panic!("not a load: {other:?}"),
        };
        let payload = 50e6 * 1400.0 / 1442.0;
        assert!((rate(TenantState::Saturated, &t) - payload).abs() < 1e-6);
        assert!((rate(TenantState::Undercommitted, &t) - payload / 2.0).abs() < 1e-6);
        t.grant.rate_bps = None;
        assert_eq!(rate(TenantState::Saturated, &t), 80e6);
    }

    #[test]
    fn cpu_demands_are_threads_times_a_duty_cycle() {
        let m = cpu_matrix();
        // 0.5 CPU: one thread at 25% / 50%, then one full thread (the quota caps it).
        assert_eq!(
            threads_and_duty(&burn(&m, 0.25, "cores", BurnScope::Tenant)),
            (1, Some(0.25))
        );
        assert_eq!(
            threads_and_duty(&burn(&m, 0.5, "cores", BurnScope::Tenant)),
            (1, Some(0.5))
        );
        assert_eq!(
            threads_and_duty(&burn(&m, 1.0, "cores", BurnScope::Tenant)),
            (1, None)
        );
        // 1.5 CPUs: two threads at 75%; 4 CPUs: four full threads.
        assert_eq!(
            threads_and_duty(&burn(&m, 1.5, "cores", BurnScope::Tenant)),
            (2, Some(0.75))
        );
        assert_eq!(
            threads_and_duty(&burn(&m, 4.0, "none", BurnScope::Tenant)),
            (4, None)
        );
    }
}
