//! In-process fakes for the controller's unit tests: a [`FakeProvider`] whose
//! tenants are [`FakeAgent`]s sharing one [`World`], which logs what they were asked
//! and fails, slows or cancels measured jobs as a test scripts it.
//!
//! Measured jobs are the kinds that end on their own (`burn`, `latency`, a `load`
//! with a duration, `load-window`: a window of 50 Mbit/s received); the others (`busy`, `idle`, `serve`, a `load` without one) run
//! until stopped. A fake burn reports a wall
//! time of `1 + busy jobs running` seconds, so a sample's value tells how many busy
//! neighbors the step had. A background job's stop answers what the test scripted
//! for it, a final result or an error. A fake agent's health carries a made-up
//! environment whose kernel names its tenant.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nnb_burn::env::Environment;
use nnb_burn::topology::TopologySummary;
use serde_json::json;
use tokio::time::Instant;

use super::Canceller;
use crate::budget::CostCap;
use crate::client::{AgentApi, AgentError, BoxFuture};
use crate::provider::{Fleet, Provider, ProviderError, Serving, Tenant, TenantSpec};
use nnb_agent::jobs::{Health, JobId, JobRequest, JobSpec, JobState, JobStatus};
use nnb_experiment::tenant::{server_name, ENDPOINT};
use nnb_format::{AgentJob, ProviderKind, Role};

/// One measured job start, as the fakes saw it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Start {
    /// The tenant whose agent started it.
    pub tenant: String,
    /// The job kind.
    pub kind: AgentJob,
    /// Busy background jobs running on all agents when it started.
    pub busy: usize,
    /// Tenants whose agents were up when it started.
    pub present: Vec<String>,
    /// When it was posted (tokio time: exact under a paused clock).
    pub at: Instant,
}

/// A fake job.
#[derive(Debug, Clone)]
struct Job {
    tenant: String,
    kind: AgentJob,
    state: JobState,
    /// When a measured job ends (tokio time); `None` for background jobs.
    ends: Option<Instant>,
    result: Option<serde_json::Value>,
    /// What a running job publishes before its result (a `serve`'s addresses), shown
    /// only while it runs, as an agent does.
    interim: Option<serde_json::Value>,
    error: Option<String>,
}

/// What the fakes share: the jobs of every agent, the log, and the script.
#[derive(Debug, Default)]
pub(super) struct World {
    jobs: BTreeMap<u64, Job>,
    next_id: u64,
    /// Every measured start, in order.
    pub starts: Vec<Start>,
    /// `(tenant, target)` of every job started with a target (probes and loads,
    /// measured or background), in order, as the agent was asked.
    pub targets: Vec<(String, String)>,
    /// `(agent, sink_threads)` of every `serve` job started, in order.
    pub serves: Vec<(String, Option<usize>)>,
    /// Measured starts (1-based, counted over the world's life) that fail.
    pub fail: BTreeSet<usize>,
    /// Measured starts (1-based) that end done with this result instead of a burn's.
    pub results: BTreeMap<usize, serde_json::Value>,
    /// The measured start (1-based) at which the run is cancelled.
    pub cancel_at: Option<(usize, Arc<Canceller>)>,
    /// How long a measured job runs (tokio time; zero ends it at once).
    pub job_time: Duration,
    /// Tenants the provider made absent (their agents are gone until made present).
    pub absent: BTreeSet<String>,
    /// Tenants whose agents died (gone for good).
    pub dead: BTreeSet<String>,
    /// The measured start (1-based) at which a tenant's agent dies.
    pub die_at: Option<(usize, String)>,
    /// Calls to the provider's `set_present`.
    pub presence_changes: usize,
    /// The tenants of the fleet last launched, in order.
    pub tenants: Vec<String>,
    /// Background jobs stopped, by tenant.
    pub stopped: BTreeMap<String, usize>,
    /// What the `n`th stop (1-based) of a running background job on a tenant answers,
    /// by `(tenant, n)`: the job's final result, or an error (the job keeps running).
    /// Unscripted stops end the job with the result it had: none, a `serve`'s
    /// published addresses being no final result.
    pub stop_results: BTreeMap<(String, usize), Result<serde_json::Value, String>>,
}

impl World {
    /// A shared world with the default script (nothing fails).
    pub(super) fn shared() -> Arc<Mutex<World>> {
        Arc::new(Mutex::new(World::default()))
    }

    /// Busy jobs running now.
    fn busy(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| j.kind == AgentJob::Busy && j.state == JobState::Running)
            .count()
    }

    fn status(&mut self, id: u64) -> Option<JobStatus> {
        let job = self.jobs.get_mut(&id)?;
        if job.state == JobState::Running && job.ends.is_some_and(|e| Instant::now() >= e) {
            job.state = JobState::Done;
        }
        Some(JobStatus {
            id: id.to_string(),
            kind: job.kind,
            state: job.state,
            result: match (&job.result, job.state) {
                (Some(r), _) => Some(r.clone()),
                (None, JobState::Running) => job.interim.clone(),
                (None, _) => None,
            },
            error: job.error.clone(),
        })
    }
}

/// A fake agent: one tenant's view of the [`World`].
#[derive(Debug)]
pub(super) struct FakeAgent {
    tenant: String,
    addr: SocketAddr,
    world: Arc<Mutex<World>>,
}

impl FakeAgent {
    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The agent is down: what a dead agent's client says.
    fn down(&self, what: &str) -> Result<(), AgentError> {
        let w = self.world();
        if w.absent.contains(&self.tenant) || w.dead.contains(&self.tenant) {
            return Err(AgentError::Timeout {
                addr: self.addr,
                what: what.to_string(),
                timeout: Duration::ZERO,
            });
        }
        Ok(())
    }

    fn unknown(&self, id: &str) -> AgentError {
        AgentError::Rejected {
            addr: self.addr,
            what: format!("job {id}"),
            status: 404,
            message: "no such job".to_string(),
        }
    }

    fn start_now(&self, req: &JobRequest) -> Result<JobId, AgentError> {
        self.down("POST /jobs")?;
        let mut w = self.world();
        let kind = req.spec.kind();
        if let JobSpec::Latency { target, .. }
        | JobSpec::Load { target, .. }
        | JobSpec::Rtt { target, .. }
        | JobSpec::Badabing { target, .. } = &req.spec
        {
            w.targets.push((self.tenant.clone(), target.clone()));
        }
        // A load without a duration is a busy neighbor's, until stopped.
        let measured = matches!(
            req.spec,
            JobSpec::Burn { .. }
                | JobSpec::Latency { .. }
                | JobSpec::LoadWindow { .. }
                | JobSpec::Load {
                    duration_ms: Some(_),
                    ..
                }
        );
        let mut job = Job {
            tenant: self.tenant.clone(),
            kind,
            state: JobState::Running,
            ends: None,
            result: None,
            interim: None,
            error: None,
        };
        if measured {
            let busy = w.busy();
            let present = w
                .tenants
                .iter()
                .filter(|t| !w.absent.contains(*t) && !w.dead.contains(*t))
                .cloned()
                .collect();
            w.starts.push(Start {
                tenant: self.tenant.clone(),
                kind,
                busy,
                present,
                at: Instant::now(),
            });
            let n = w.starts.len();
            if let Some((at, c)) = &w.cancel_at {
                if *at == n {
                    c.cancel();
                }
            }
            if let Some((at, tenant)) = w.die_at.clone() {
                if at == n {
                    w.dead.insert(tenant);
                }
            }
            if w.fail.contains(&n) {
                job.state = JobState::Failed;
                job.error = Some(format!("injected failure of measured start {n}"));
            } else {
                job.ends = Some(Instant::now() + w.job_time);
                job.result = Some(w.results.get(&n).cloned().unwrap_or_else(|| match kind {
                    AgentJob::LoadWindow => json!({
                        "sent": { "elapsed_s": 0.2, "payload_bps": 1e8 },
                        "sink": { "rate_bps": 5e7, "streams_reported": 1 },
                        "streams": [{}],
                        "samples": { "interval_s": 0.1, "window": 2,
                            "sent_window_bps": 1e8, "received_window_bps": 5e7 }
                    }),
                    _ => json!({
                        "burn": { "wall_ns": (1 + busy) as f64 * 1e9, "ops_per_sec": 1e6 }
                    }),
                }));
            }
        } else if let JobSpec::Serve { sink_threads, .. } = req.spec {
            w.serves.push((self.tenant.clone(), sink_threads));
            // Ports of this agent's own: each server's addresses are its own.
            let port = self.addr.port();
            job.interim = Some(json!({
                "reflector": format!("0.0.0.0:{}", u32::from(port) + 10_000),
                "sink": format!("0.0.0.0:{}", u32::from(port) + 20_000),
            }));
        }
        w.next_id += 1;
        let id = w.next_id;
        w.jobs.insert(id, job);
        Ok(id.to_string())
    }

    fn status_now(&self, id: &str) -> Result<JobStatus, AgentError> {
        self.down("GET /jobs/{id}")?;
        let n: u64 = id.parse().map_err(|_| self.unknown(id))?;
        self.world().status(n).ok_or_else(|| self.unknown(id))
    }

    fn stop_now(&self, id: &str) -> Result<JobStatus, AgentError> {
        self.down("POST /jobs/{id}/stop")?;
        let n: u64 = id.parse().map_err(|_| self.unknown(id))?;
        let mut w = self.world();
        let nth = w.stopped.get(&self.tenant).map_or(1, |k| k + 1);
        let scripted = w.stop_results.get(&(self.tenant.clone(), nth)).cloned();
        let job = w.jobs.get_mut(&n).ok_or_else(|| self.unknown(id))?;
        if job.state == JobState::Running {
            match scripted {
                Some(Err(message)) => {
                    return Err(AgentError::Rejected {
                        addr: self.addr,
                        what: format!("POST /jobs/{id}/stop"),
                        status: 500,
                        message,
                    })
                }
                Some(Ok(result)) => job.result = Some(result),
                None => {}
            }
            job.state = JobState::Stopped;
            *w.stopped.entry(self.tenant.clone()).or_default() += 1;
        }
        w.status(n).ok_or_else(|| self.unknown(id))
    }

    fn list_now(&self) -> Result<Vec<JobStatus>, AgentError> {
        self.down("GET /jobs")?;
        let mut w = self.world();
        let mine: Vec<u64> = w
            .jobs
            .iter()
            .filter(|(_, j)| j.tenant == self.tenant)
            .map(|(id, _)| *id)
            .collect();
        Ok(mine.into_iter().filter_map(|id| w.status(id)).collect())
    }
}

impl AgentApi for FakeAgent {
    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn health(&self) -> BoxFuture<'_, Result<Health, AgentError>> {
        Box::pin(async move {
            self.down("GET /health")?;
            let topology = TopologySummary {
                logical: 1,
                online: 1,
                cores: 1,
                packages: 1,
                numa_nodes: 1,
                smt_ways: 1,
            };
            Ok(Health {
                version: "fake".to_string(),
                topology: topology.clone(),
                cpus: vec![0],
                running_jobs: 0,
                environment: Some(Environment {
                    cpu_model: "Fake CPU".to_string(),
                    kernel: fake_kernel(&self.tenant),
                    clocksource: "fake-tsc".to_string(),
                    governor: None,
                    hypervisor: Some("fake-hv".to_string()),
                    nnb_version: "fake".to_string(),
                    command: Vec::new(),
                    topology,
                    steal_ticks: Some(0),
                    steal_ticks_after: None,
                    user_hz: 100,
                }),
                commands: false,
            })
        })
    }

    fn start<'a>(&'a self, req: &'a JobRequest) -> BoxFuture<'a, Result<JobId, AgentError>> {
        Box::pin(async move { self.start_now(req) })
    }

    fn status<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        Box::pin(async move { self.status_now(id) })
    }

    fn stop<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<JobStatus, AgentError>> {
        Box::pin(async move { self.stop_now(id) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<JobStatus>, AgentError>> {
        Box::pin(async move { self.list_now() })
    }
}

/// The kernel a fake agent of `tenant` reports.
pub(super) fn fake_kernel(tenant: &str) -> String {
    format!("fake-kernel-of-{tenant}")
}

/// A fake provider: its tenants are [`FakeAgent`]s of one [`World`]; it may have a
/// price (a cost cap) and can make tenants absent and present again.
#[derive(Debug)]
pub(super) struct FakeProvider {
    world: Arc<Mutex<World>>,
    agents: HashMap<String, Arc<FakeAgent>>,
    /// `(usd_per_hour, max_usd)` of the run's cost cap.
    pub price: Option<(f64, f64)>,
    /// Launches so far.
    pub launches: usize,
    /// Shutdowns so far.
    pub shutdowns: usize,
    /// Whether it says its fleets may run beside others (a cloud's may).
    pub concurrent: bool,
    /// Where it logs `(label, "launch" | "shutdown", when)` of its fleets.
    pub events: Option<(String, Arc<Mutex<Vec<FleetEvent>>>)>,
}

/// A fleet's launch or shutdown, as a [`FakeProvider`] logs it: its label, which,
/// and when (tokio time).
pub(crate) type FleetEvent = (String, &'static str, Instant);

impl FakeProvider {
    /// A provider of fakes living in `world`.
    pub(super) fn new(world: &Arc<Mutex<World>>) -> FakeProvider {
        FakeProvider {
            world: Arc::clone(world),
            agents: HashMap::new(),
            price: None,
            launches: 0,
            shutdowns: 0,
            concurrent: false,
            events: None,
        }
    }

    /// Logs `what` happened to its fleet now, when it has a log.
    fn log(&self, what: &'static str) {
        if let Some((label, log)) = &self.events {
            let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
            log.push((label.clone(), what, Instant::now()));
        }
    }

    fn tenant(&mut self, name: &str, spec: Option<&TenantSpec>) -> Tenant {
        let port = 7700 + self.agents.len() as u16;
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let agent = FakeAgent {
            tenant: name.to_string(),
            addr,
            world: Arc::clone(&self.world),
        };
        self.agents.insert(name.to_string(), Arc::new(agent));
        Tenant {
            name: name.to_string(),
            role: spec.map_or(Role::Endpoint, |s| s.role),
            addr,
            token: String::new(),
            cpus: Vec::new(),
            netns: None,
            ip: None,
            runtime: None,
        }
    }
}

impl Provider for FakeProvider {
    /// The fakes stand in for agents on this machine.
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    fn launch<'a>(
        &'a mut self,
        specs: &'a [TenantSpec],
        serving: &'a Serving,
    ) -> BoxFuture<'a, Result<Fleet, ProviderError>> {
        Box::pin(async move {
            self.launches += 1;
            self.log("launch");
            let tenants: Vec<Tenant> = specs
                .iter()
                .map(|s| self.tenant(&s.name, Some(s)))
                .collect();
            let endpoint = (*serving == Serving::Shared).then(|| self.tenant(ENDPOINT, None));
            let servers: Vec<Tenant> = serving
                .clients()
                .iter()
                .map(|c| self.tenant(&server_name(c), None))
                .collect();
            self.world.lock().unwrap_or_else(|p| p.into_inner()).tenants =
                tenants.iter().map(|t| t.name.clone()).collect();
            let mut fleet = Fleet::of(tenants, endpoint);
            fleet.servers = servers;
            Ok(fleet)
        })
    }

    fn agent(&self, tenant: &Tenant) -> Arc<dyn AgentApi> {
        match self.agents.get(&tenant.name) {
            Some(a) => Arc::clone(a) as Arc<dyn AgentApi>,
            None => Arc::new(FakeAgent {
                tenant: tenant.name.clone(),
                addr: tenant.addr,
                world: Arc::clone(&self.world),
            }),
        }
    }

    fn set_present<'a>(
        &'a mut self,
        fleet: &'a mut Fleet,
        present: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<String>, ProviderError>> {
        Box::pin(async move {
            fleet.check_present(present)?;
            let mut w = self.world.lock().unwrap_or_else(|p| p.into_inner());
            w.presence_changes += 1;
            let mut started = Vec::new();
            for t in &fleet.tenants {
                if present.contains(&t.name) {
                    if w.absent.remove(&t.name) {
                        started.push(t.name.clone());
                    }
                } else {
                    w.absent.insert(t.name.clone());
                }
            }
            Ok(started)
        })
    }

    fn cost_cap(&self, since: Instant) -> Option<CostCap> {
        self.price
            .map(|(usd_per_hour, max_usd)| CostCap::new(usd_per_hour, max_usd, since))
    }

    fn concurrent_fleets(&self) -> bool {
        self.concurrent
    }

    fn shutdown(&mut self, fleet: Fleet) -> BoxFuture<'_, Result<(), ProviderError>> {
        self.shutdowns += 1;
        self.log("shutdown");
        let agents: Vec<Arc<dyn AgentApi>> = fleet.all().map(|t| self.agent(t)).collect();
        Box::pin(async move {
            for a in agents {
                crate::client::stop_all_jobs(a.as_ref()).await;
            }
            drop(fleet);
            Ok(())
        })
    }
}
