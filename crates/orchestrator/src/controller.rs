//! Runs a plan on a fleet of agents, step by step, and journals what it measured.
//!
//! Per step: bring the neighbors' background jobs to what the step needs (stops and
//! starts fanned out to all agents at once), let them settle, start the measured
//! jobs together, wait for all of them, and append the step's records (fsynced)
//! before the next step. A failing step (an agent that died, a job that failed or
//! overran the step timeout) is retried, skipped or ends the run, as the experiment's
//! `on_failure` says; failed steps are recorded as such. Ctrl-C or SIGTERM stops
//! cleanly: the step in flight is dropped, the fleet is shut down, and what was
//! measured stays; `--resume` continues from there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::join_all;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

use crate::budget::CostCap;
use crate::client::{AgentClient, AgentError};
use crate::experiment::{self, Experiment, ExperimentError, Network, OnFailure, Provider};
use crate::jobs::{JobRequest, JobSpec, JobState, JobStatus};
use crate::journal::Journal;
use crate::plan::{self, Assignment, Plan, Step, REFLECTOR, SINK};
use crate::progress::{Progress, Silent};
use crate::provider::{self, CloudLease, Fleet, LocalOptions, ProviderError, Role, Tenant};
use crate::results::{
    self, timestamp, Manifest, ResultsError, RunDir, Sample, SampleParts, SampleStatus, Session,
    TenantRecord, FORMAT_VERSION,
};

/// Deadline of background jobs: the controller stops them; this only bounds a job
/// whose controller vanished without its agent noticing.
const BACKGROUND_DEADLINE: Duration = Duration::from_secs(24 * 3600);
/// How long the endpoint's `serve` job may take to publish its addresses.
const SERVE_START: Duration = Duration::from_secs(10);

/// Why a run could not start or went wrong beyond a failed step.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Writing or reading results failed.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The fleet could not be provided.
    #[error("cannot provide the tenants: {0}")]
    Provider(#[from] ProviderError),
    /// The stored experiment of a resumed run is invalid.
    #[error(transparent)]
    Experiment(#[from] ExperimentError),
    /// The fleet does not match the experiment, or the endpoint failed.
    #[error("{0}")]
    Fleet(String),
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Every step is in the journal (some possibly failed).
    Completed,
    /// Stopped by Ctrl-C or SIGTERM; resume to continue.
    Interrupted,
    /// A step failed under `on_failure = "abort"`.
    Aborted,
    /// Stopped before a step that would have taken the session past `max_cost_usd`
    /// (recorded as "aborted" in the manifest; a resume is a session with its own cap).
    CostCap,
}

impl RunStatus {
    fn name(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Aborted | RunStatus::CostCap => "aborted",
        }
    }
}

/// The controller's own cost per step: step wall time minus the settle pause and
/// minus the measured interval the jobs report (so it includes HTTP round trips,
/// job setup in the agents, status polling and the fsynced append).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Overhead {
    /// Steps measured.
    pub steps: usize,
    /// Mean per step, ms.
    pub mean_ms: f64,
    /// Median per step, ms.
    pub median_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
}

/// What a run (or resume) did.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    /// The run id.
    pub run_id: String,
    /// The run directory.
    pub dir: PathBuf,
    /// How it ended.
    pub status: RunStatus,
    /// Steps in the plan.
    pub planned: usize,
    /// Steps already complete when this session started (resume).
    pub skipped: usize,
    /// Steps measured successfully in this session.
    pub measured: usize,
    /// Steps recorded as failed in this session.
    pub failed: usize,
    /// Controller overhead in this session.
    pub overhead: Option<Overhead>,
    /// Provider warnings (e.g. shared CPUs).
    pub warnings: Vec<String>,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Who is told of each step (the binary's bar or plain lines; [`Silent`] by
    /// default).
    pub progress: Arc<dyn Progress>,
    /// `nnb` binary for local agents (`None` = this executable).
    pub nnb_bin: Option<PathBuf>,
    /// The command line, for the manifest.
    pub command: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            progress: Arc::new(Silent),
            nnb_bin: None,
            command: Vec::new(),
        }
    }
}

/// A run: its directory, manifest, experiment and plan.
#[derive(Debug)]
pub struct Run {
    /// Where its files are.
    pub dir: RunDir,
    /// Its manifest (kept in step with the file).
    pub manifest: Manifest,
    /// The experiment.
    pub experiment: Experiment,
    /// The plan.
    pub plan: Plan,
}

impl Run {
    /// Creates a new run of `experiment` (read from `file` with text `text`) under
    /// `results`, writing its manifest.
    pub fn create(
        results: &Path,
        file: &str,
        text: &str,
        experiment: Experiment,
        plan: Plan,
    ) -> Result<Run, ControllerError> {
        let run_id = results::new_run_id();
        let dir = RunDir::create(results, &run_id)?;
        let controller = nnb_burn::topology::Topology::host()
            .ok()
            .map(|t| nnb_burn::env::Environment::capture(&t, env!("CARGO_PKG_VERSION")))
            .and_then(|e| serde_json::to_value(e).ok())
            .unwrap_or(Value::Null);
        let manifest = Manifest {
            format_version: FORMAT_VERSION,
            run_id,
            nnb_version: env!("CARGO_PKG_VERSION").to_string(),
            experiment_file: file.to_string(),
            experiment_text: text.to_string(),
            experiment: serde_json::to_value(&experiment).unwrap_or(Value::Null),
            planned_steps: plan.steps.len(),
            controller,
            sessions: Vec::new(),
        };
        dir.write_manifest(&manifest)?;
        Ok(Run {
            dir,
            manifest,
            experiment,
            plan,
        })
    }

    /// Opens run `run_id` under `results` to resume it: the experiment is re-read
    /// from the text stored in its manifest, so the plan (and its step ids) is the
    /// one the run started with.
    pub fn open(results: &Path, run_id: &str, host_cpus: usize) -> Result<Run, ControllerError> {
        let dir = RunDir::open(results, run_id)?;
        let manifest = dir.read_manifest()?;
        let experiment = experiment::parse(
            &manifest.experiment_file,
            &manifest.experiment_text,
            Some(host_cpus),
        )?;
        let plan = plan::expand(
            &experiment,
            experiment.provider.host_vcpus().unwrap_or(host_cpus),
        );
        if plan.steps.len() != manifest.planned_steps {
            return Err(ControllerError::Fleet(format!(
                "run {run_id} planned {} steps but its experiment now expands to {}: \
                 it was made by another nnb version",
                manifest.planned_steps,
                plan.steps.len()
            )));
        }
        Ok(Run {
            dir,
            manifest,
            experiment,
            plan,
        })
    }
}

/// Set when the user asks the run to stop (Ctrl-C, SIGTERM).
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

impl Cancel {
    /// Listens for Ctrl-C and SIGTERM (needs a tokio runtime).
    pub fn on_signals() -> Cancel {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let term = async {
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = term => {}
            }
            tracing::warn!("stopping: finishing cleanly and keeping what was measured");
            let _ = tx.send(true);
        });
        Cancel(rx)
    }

    fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|v| *v).await;
    }
}

/// Runs (or resumes) `run`: skips steps already in its journal, launches the fleet,
/// measures the rest, shuts the fleet down and updates the manifest.
pub async fn execute(
    run: &mut Run,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<RunOutcome, ControllerError> {
    let (journal, recovery) = Journal::open(&run.dir.samples_path())?;
    if recovery.truncated_bytes > 0 {
        tracing::warn!(
            "cut {} bytes of an unfinished step from {}",
            recovery.truncated_bytes,
            run.dir.samples_path().display()
        );
    }
    let skipped = journal.done_count();
    run.manifest.sessions.push(Session {
        started_at: timestamp(SystemTime::now()),
        finished_at: None,
        status: "running".to_string(),
        command: opts.command.clone(),
        tenants: Vec::new(),
        warnings: Vec::new(),
        agent_pids: Vec::new(),
        steps_run: 0,
        cloud: None,
    });
    run.dir.write_manifest(&run.manifest)?;
    let mut outcome = RunOutcome {
        run_id: run.dir.run_id.clone(),
        dir: run.dir.path.clone(),
        status: RunStatus::Completed,
        planned: run.plan.steps.len(),
        skipped,
        measured: 0,
        failed: 0,
        overhead: None,
        warnings: Vec::new(),
    };
    let result = if skipped == run.plan.steps.len() {
        Ok(RunStatus::Completed)
    } else {
        measure_all(run, journal, opts, cancel, &mut outcome).await
    };
    let status = match &result {
        Ok(s) => s.name(),
        Err(_) => "failed",
    };
    if let Some(s) = run.manifest.sessions.last_mut() {
        s.finished_at = Some(timestamp(SystemTime::now()));
        s.status = status.to_string();
        s.steps_run = outcome.measured + outcome.failed;
    }
    run.dir.write_manifest(&run.manifest)?;
    outcome.status = result?;
    Ok(outcome)
}

/// Launches the fleet, records it in the manifest, drives the steps, and shuts the
/// fleet down whatever happened. Cloud resources are held in a [`CloudLease`] from
/// the first one created, so a launch that fails or is interrupted (Ctrl-C drops it
/// half-way) is torn down too.
async fn measure_all(
    run: &mut Run,
    journal: Journal,
    opts: &RunOptions,
    cancel: &Cancel,
    outcome: &mut RunOutcome,
) -> Result<RunStatus, ControllerError> {
    let mut cloud = CloudLease::default();
    let held_since = Instant::now();
    let launched = tokio::select! {
        f = launch(run, opts, &mut cloud) => Some(f),
        () = cancel.wait() => None,
    };
    let fleet = match launched {
        Some(Ok(fleet)) => fleet,
        failed => {
            // Tear down first: a manifest that cannot be written must not leak a host.
            let record = cloud.record().cloned();
            if let Err(e) = cloud.release().await {
                tracing::warn!("tearing down what the launch created: {e}");
            }
            if let (Some(s), Some(r)) = (run.manifest.sessions.last_mut(), record) {
                s.cloud = Some(r);
                run.dir.write_manifest(&run.manifest)?;
            }
            return match failed {
                Some(Err(e)) => Err(e),
                _ => Ok(RunStatus::Interrupted),
            };
        }
    };
    outcome.warnings = fleet.warnings.clone();
    let recorded = record_fleet(run, &fleet).await;
    // No early return until the fleet is shut down: it may hold a dedicated host.
    let result = match recorded {
        Ok(()) => match Driver::new(run, &fleet, journal).await {
            Ok(mut driver) => {
                driver.cost_cap = CostCap::for_experiment(&run.experiment, held_since);
                let r = driver.drive(opts, cancel, outcome).await;
                driver.stop_background().await;
                r
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    if let Err(e) = fleet.shutdown().await {
        tracing::warn!("shutting the fleet down: {e}");
    }
    result
}

/// Brings up the tenants of `run`'s experiment with its provider; cloud resources
/// go into `cloud` as they are created.
async fn launch(
    run: &Run,
    opts: &RunOptions,
    cloud: &mut CloudLease,
) -> Result<Fleet, ControllerError> {
    let exp = &run.experiment;
    match &exp.provider {
        #[cfg(feature = "aws")]
        Provider::Aws(spec) => Ok(provider::aws::launch_aws(
            spec,
            &exp.tenant_specs(),
            run.plan.needs_endpoint(),
            &run.dir.run_id,
            cloud,
        )
        .await?),
        #[cfg(not(feature = "aws"))]
        Provider::Aws(_) => {
            let _ = cloud;
            Err(ProviderError::NoAwsFeature.into())
        }
        Provider::Local => {
            let specs = exp.tenant_specs();
            let network = match exp.network {
                Network::None => provider::Network::None,
                Network::Emulated { host_bw_bps } => provider::Network::Emulated { host_bw_bps },
            };
            let local = LocalOptions {
                nnb_bin: opts.nnb_bin.clone(),
                network,
                ..LocalOptions::default()
            };
            Ok(provider::launch_local(&specs, &local).await?)
        }
        Provider::Static { hosts, token_file } => {
            let fleet = provider::load_static(hosts, token_file)?;
            for t in &exp.tenants {
                match fleet.tenants.iter().find(|f| f.name == t.name) {
                    Some(f) if f.role == t.role => {}
                    Some(_) => {
                        return Err(ControllerError::Fleet(format!(
                            "tenant {} has another role in {}",
                            t.name,
                            hosts.display()
                        )))
                    }
                    None => {
                        return Err(ControllerError::Fleet(format!(
                            "tenant {} is not in {}",
                            t.name,
                            hosts.display()
                        )))
                    }
                }
            }
            Ok(fleet)
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Test => "test",
        Role::Neighbor => "neighbor",
    }
}

/// Asks every agent for its health (all at once) and writes tenants and warnings
/// into the current session of the manifest.
async fn record_fleet(run: &mut Run, fleet: &Fleet) -> Result<(), ControllerError> {
    let all: Vec<(&Tenant, &'static str)> = fleet
        .tenants
        .iter()
        .map(|t| (t, role_name(t.role)))
        .chain(fleet.endpoint.iter().map(|t| (t, "endpoint")))
        .collect();
    let healths = join_all(
        all.iter()
            .map(|(t, _)| async move { t.client().health().await }),
    )
    .await;
    let tenants = all
        .iter()
        .zip(healths)
        .map(|((t, role), h)| TenantRecord {
            name: t.name.clone(),
            role: role.to_string(),
            addr: t.addr.to_string(),
            cpus: t.cpus.clone(),
            netns: t.netns.clone(),
            ip: t.ip.map(|ip| ip.to_string()),
            health: h
                .map_err(|e| tracing::warn!("health of {}: {e}", t.name))
                .ok(),
        })
        .collect();
    if let Some(s) = run.manifest.sessions.last_mut() {
        s.tenants = tenants;
        s.warnings = fleet.warnings.clone();
        s.agent_pids = fleet.pids();
        s.cloud = fleet.cloud_record().cloned();
    }
    run.dir.write_manifest(&run.manifest)?;
    Ok(())
}

/// A background job running on a tenant.
#[derive(Debug, Clone)]
struct Running {
    spec: JobSpec,
    id: String,
}

/// The endpoint's bound addresses.
#[derive(Debug, Clone)]
struct Endpoint {
    reflector: String,
    sink: String,
}

/// What a failed attempt at a step says.
#[derive(Debug)]
struct StepFailure(String);

impl From<(String, AgentError)> for StepFailure {
    fn from((tenant, e): (String, AgentError)) -> Self {
        let down = if e.agent_is_down() {
            " (agent down?)"
        } else {
            ""
        };
        StepFailure(format!("tenant {tenant}{down}: {e}"))
    }
}

/// One measured job's end.
struct Measured {
    assignment: Assignment,
    status: JobStatus,
}

/// The step loop's state.
struct Driver<'a> {
    run: &'a Run,
    clients: HashMap<String, (AgentClient, Role)>,
    endpoint: Option<Endpoint>,
    running: HashMap<String, Running>,
    journal: Journal,
    overheads: Vec<f64>,
    /// The run's `max_cost_usd`, enforced before each step (cloud runs).
    cost_cap: Option<CostCap>,
}

impl<'a> Driver<'a> {
    async fn new(
        run: &'a Run,
        fleet: &Fleet,
        journal: Journal,
    ) -> Result<Driver<'a>, ControllerError> {
        let clients = fleet
            .tenants
            .iter()
            .map(|t| (t.name.clone(), (t.client(), t.role)))
            .collect();
        let mut d = Driver {
            run,
            clients,
            endpoint: None,
            running: HashMap::new(),
            journal,
            overheads: Vec::new(),
            cost_cap: None,
        };
        if run.plan.needs_endpoint() {
            let Some(ep) = &fleet.endpoint else {
                return Err(ControllerError::Fleet(
                    "this experiment sends probes or load to an endpoint, but the fleet has none \
                     (static provider: add an `endpoint` line to the hosts file)"
                        .to_string(),
                ));
            };
            d.clients
                .insert(ep.name.clone(), (ep.client(), Role::Neighbor));
            d.endpoint = Some(Endpoint::start(ep, run.experiment.provider.serve_ports()).await?);
        }
        Ok(d)
    }
}

impl Endpoint {
    /// Starts `serve` on the endpoint agent with `(reflector, sink)` ports (0 = any)
    /// and waits for its bound addresses. An address bound to all interfaces
    /// (`0.0.0.0:PORT`, an agent on a cloud instance) is published with the
    /// endpoint's own IP, which the tenants can reach.
    async fn start(
        ep: &Tenant,
        (reflector_port, sink_port): (u16, u16),
    ) -> Result<Endpoint, ControllerError> {
        let c = ep.client();
        let fail = |m: String| ControllerError::Fleet(format!("endpoint {}: {m}", c.addr()));
        let reachable = |published: String| match published.parse::<std::net::SocketAddr>() {
            Ok(a) if a.ip().is_unspecified() => {
                std::net::SocketAddr::new(ep.ip.unwrap_or(ep.addr.ip()), a.port()).to_string()
            }
            _ => published,
        };
        let req = JobRequest {
            spec: JobSpec::Serve {
                reflector_port,
                sink_port,
            },
            deadline_ms: millis(BACKGROUND_DEADLINE),
        };
        let id = c.start(&req).await.map_err(|e| fail(e.to_string()))?;
        let end = Instant::now() + SERVE_START;
        loop {
            let st = c.status(&id).await.map_err(|e| fail(e.to_string()))?;
            if st.state.is_final() {
                return Err(fail(format!(
                    "serve job ended: {}",
                    st.error.unwrap_or_default()
                )));
            }
            let addr = |k: &str| {
                st.result
                    .as_ref()
                    .and_then(|r| r.get(k))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            if let (Some(reflector), Some(sink)) = (addr("reflector"), addr("sink")) {
                return Ok(Endpoint {
                    reflector: reachable(reflector),
                    sink: reachable(sink),
                });
            }
            if Instant::now() >= end {
                return Err(fail(format!(
                    "serve published no addresses within {SERVE_START:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `spec` with the target placeholders replaced by the bound addresses.
    fn resolve(this: Option<&Endpoint>, spec: &JobSpec) -> JobSpec {
        let mut spec = spec.clone();
        if let (Some(ep), JobSpec::Latency { target, .. } | JobSpec::Load { target, .. }) =
            (this, &mut spec)
        {
            if target == SINK {
                *target = ep.sink.clone();
            } else if target == REFLECTOR {
                *target = ep.reflector.clone();
            }
        }
        spec
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Seconds of measured interval a job's result reports, if it says.
fn measured_secs(spec: &JobSpec, result: &Value) -> Option<f64> {
    let n = |p: &str| result.pointer(p).and_then(Value::as_f64);
    match spec {
        JobSpec::Burn { .. } => n("/burn/wall_ns").map(|ns| ns / 1e9),
        JobSpec::Latency { warmup_ms, .. } => n("/elapsed_s").map(|s| s + *warmup_ms as f64 / 1e3),
        JobSpec::Load { .. } => n("/sent/elapsed_s"),
        _ => None,
    }
}

impl Driver<'_> {
    fn client(&self, tenant: &str) -> Result<&AgentClient, StepFailure> {
        self.clients
            .get(tenant)
            .map(|(c, _)| c)
            .ok_or_else(|| StepFailure(format!("no agent for tenant {tenant}")))
    }

    /// Measures every step not yet in the journal, in plan order.
    async fn drive(
        &mut self,
        opts: &RunOptions,
        cancel: &Cancel,
        outcome: &mut RunOutcome,
    ) -> Result<RunStatus, ControllerError> {
        let run = self.run;
        let exp = &run.experiment;
        let progress = &*opts.progress;
        progress.start(run.plan.steps.len(), self.journal.done_count());
        for w in &outcome.warnings {
            progress.note(&format!("warning: {w}"));
        }
        let attempts = match exp.on_failure {
            OnFailure::Retry { times } => times + 1,
            OnFailure::Skip | OnFailure::Abort => 1,
        };
        let mut status = RunStatus::Completed;
        'steps: for (index, step) in run.plan.steps.iter().enumerate() {
            if self.journal.is_done(&step.id) {
                continue;
            }
            if cancel.is_set() {
                status = RunStatus::Interrupted;
                break;
            }
            if let Some(Err(why)) = self.cost_cap.as_ref().map(CostCap::allows_next_step) {
                progress.note(&format!("stopping before step {}: {why}", step.id));
                status = RunStatus::CostCap;
                break;
            }
            progress.step(step);
            let step_begun = Instant::now();
            let mut last_error = String::new();
            for attempt in 1..=attempts {
                let begun = Instant::now();
                let tried = tokio::select! {
                    r = self.attempt(step, exp.settle, exp.step_timeout) => r,
                    () = cancel.wait() => {
                        status = RunStatus::Interrupted;
                        break 'steps;
                    }
                };
                if let Some(cap) = &mut self.cost_cap {
                    cap.step_took(begun.elapsed());
                }
                match tried {
                    Ok((measured, started_at, settled)) => {
                        let elapsed = begun.elapsed();
                        let records =
                            self.record_ok(index, step, &measured, attempt, started_at, elapsed)?;
                        let job_secs = measured
                            .iter()
                            .filter_map(|m| {
                                m.status
                                    .result
                                    .as_ref()
                                    .and_then(|r| measured_secs(&m.assignment.job, r))
                            })
                            .fold(None, |acc: Option<f64>, s| {
                                Some(acc.map_or(s, |a| a.max(s)))
                            });
                        if let Some(job_secs) = job_secs {
                            let total = begun.elapsed().saturating_sub(settled).as_secs_f64();
                            self.overheads.push((total - job_secs).max(0.0) * 1e3);
                        }
                        outcome.measured += 1;
                        progress.step_done(step, &records, step_begun.elapsed());
                        continue 'steps;
                    }
                    Err(StepFailure(_)) if cancel.is_set() => {
                        // Agents share the terminal's process group and may have
                        // died of the same Ctrl-C: not a failure of the step.
                        status = RunStatus::Interrupted;
                        break 'steps;
                    }
                    Err(StepFailure(msg)) => {
                        progress.note(&format!(
                            "step {} failed (attempt {attempt} of {attempts}): {msg}",
                            step.id
                        ));
                        last_error = msg;
                        // Start the background afresh on the next attempt.
                        self.stop_background().await;
                    }
                }
            }
            let records = self.record_failed(index, step, attempts, &last_error)?;
            outcome.failed += 1;
            progress.step_done(step, &records, step_begun.elapsed());
            if exp.on_failure == OnFailure::Abort {
                progress.note(&format!("aborting the run: step {} failed", step.id));
                status = RunStatus::Aborted;
                break;
            }
        }
        progress.finish();
        outcome.overhead = overhead(&self.overheads);
        Ok(status)
    }

    /// One attempt at a step: background, settle, measured jobs. Returns the jobs'
    /// ends, when they started, and how long was spent settling.
    async fn attempt(
        &mut self,
        step: &Step,
        settle: Duration,
        timeout: Duration,
    ) -> Result<(Vec<Measured>, SystemTime, Duration), StepFailure> {
        let changed = self.reconfigure(&step.background).await?;
        let settled = if changed && !settle.is_zero() {
            tokio::time::sleep(settle).await;
            settle
        } else {
            Duration::ZERO
        };
        self.check_background().await?;
        let started_at = SystemTime::now();
        let measured = self.measure(&step.measure, timeout).await?;
        Ok((measured, started_at, settled))
    }

    /// Stops background jobs that the step does not want and starts the ones it
    /// wants, on all agents at once. Returns whether anything changed.
    async fn reconfigure(&mut self, wanted: &[Assignment]) -> Result<bool, StepFailure> {
        let ep = self.endpoint.as_ref();
        let wanted: HashMap<&str, JobSpec> = wanted
            .iter()
            .map(|a| (a.tenant.as_str(), Endpoint::resolve(ep, &a.job)))
            .collect();
        let stale: Vec<(String, Running)> = self
            .running
            .iter()
            .filter(|(t, r)| wanted.get(t.as_str()) != Some(&r.spec))
            .map(|(t, r)| (t.clone(), r.clone()))
            .collect();
        let fresh: Vec<(&str, &JobSpec)> = wanted
            .iter()
            .filter(|(t, spec)| self.running.get(**t).map(|r| &r.spec) != Some(*spec))
            .map(|(t, spec)| (*t, spec))
            .collect();
        if stale.is_empty() && fresh.is_empty() {
            return Ok(false);
        }
        let this = &*self;
        let stops = stale.iter().map(|(t, r)| async move {
            let c = this.client(t)?;
            c.stop(&r.id)
                .await
                .map_err(|e| StepFailure::from((t.clone(), e)))
        });
        for r in join_all(stops).await {
            r?;
        }
        for (t, _) in &stale {
            self.running.remove(t);
        }
        let this = &*self;
        let starts = fresh.iter().map(|(t, spec)| async move {
            let c = this.client(t)?;
            let req = JobRequest {
                spec: (*spec).clone(),
                deadline_ms: millis(BACKGROUND_DEADLINE),
            };
            let id = c
                .start(&req)
                .await
                .map_err(|e| StepFailure::from((t.to_string(), e)))?;
            Ok::<_, StepFailure>((
                t.to_string(),
                Running {
                    spec: (*spec).clone(),
                    id,
                },
            ))
        });
        let started = join_all(starts).await;
        let mut first_error = None;
        for r in started {
            match r {
                Ok((t, running)) => {
                    self.running.insert(t, running);
                }
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    /// Fails the attempt if a background job (or its agent) is gone.
    async fn check_background(&self) -> Result<(), StepFailure> {
        let checks = self.running.iter().map(|(t, r)| async move {
            let st = self
                .client(t)?
                .status(&r.id)
                .await
                .map_err(|e| StepFailure::from((t.clone(), e)))?;
            if st.state.is_final() {
                return Err(StepFailure(format!(
                    "tenant {t}: background {} job ended ({:?}): {}",
                    r.spec.kind(),
                    st.state,
                    st.error.unwrap_or_default()
                )));
            }
            Ok(())
        });
        join_all(checks).await.into_iter().collect()
    }

    /// Starts the measured jobs together and waits for all; any failure fails the
    /// attempt (and stops the others).
    async fn measure(
        &self,
        jobs: &[Assignment],
        timeout: Duration,
    ) -> Result<Vec<Measured>, StepFailure> {
        let ep = self.endpoint.as_ref();
        let starts = jobs.iter().map(|a| async move {
            let c = self.client(&a.tenant)?;
            let req = JobRequest {
                spec: Endpoint::resolve(ep, &a.job),
                deadline_ms: millis(timeout),
            };
            c.start(&req)
                .await
                .map_err(|e| StepFailure::from((a.tenant.clone(), e)))
        });
        let ids = join_all(starts).await;
        if ids.iter().any(Result::is_err) {
            self.stop_started(jobs, &ids).await;
            return Err(ids
                .into_iter()
                .find_map(Result::err)
                .unwrap_or_else(|| StepFailure("a job did not start".to_string())));
        }
        let waits = jobs.iter().zip(&ids).map(|(a, id)| async move {
            let id = id
                .as_ref()
                .map_err(|StepFailure(m)| StepFailure(m.clone()))?;
            let c = self.client(&a.tenant)?;
            let status = c
                .wait(id, timeout)
                .await
                .map_err(|e| StepFailure::from((a.tenant.clone(), e)))?;
            if status.state != JobState::Done {
                return Err(StepFailure(format!(
                    "tenant {}: {} job ended {:?}: {}",
                    a.tenant,
                    a.job.kind(),
                    status.state,
                    status.error.clone().unwrap_or_default()
                )));
            }
            Ok(Measured {
                assignment: a.clone(),
                status,
            })
        });
        let ends = join_all(waits).await;
        if ends.iter().any(Result::is_err) {
            self.stop_started(jobs, &ids).await;
        }
        ends.into_iter().collect()
    }

    /// Stops the measured jobs that started, so a retry starts clean; errors here
    /// are moot (the job may have ended or its agent died).
    async fn stop_started(&self, jobs: &[Assignment], ids: &[Result<String, StepFailure>]) {
        let stops = jobs.iter().zip(ids).filter_map(|(a, id)| {
            let id = id.as_ref().ok()?;
            let c = self.client(&a.tenant).ok()?;
            Some(async move { c.stop(id).await })
        });
        join_all(stops).await;
    }

    /// Stops every background job (best effort) and forgets them.
    async fn stop_background(&mut self) {
        let this = &*self;
        let stops = this.running.iter().map(|(t, r)| async move {
            if let Ok(c) = this.client(t) {
                if let Err(e) = c.stop(&r.id).await {
                    tracing::debug!("stopping background job on {t}: {e}");
                }
            }
        });
        join_all(stops).await;
        self.running.clear();
    }

    fn role(&self, tenant: &str) -> String {
        self.clients
            .get(tenant)
            .map_or("neighbor", |(_, r)| role_name(*r))
            .to_string()
    }

    fn record_ok(
        &mut self,
        index: usize,
        step: &Step,
        measured: &[Measured],
        attempts: u32,
        started_at: SystemTime,
        elapsed: Duration,
    ) -> Result<Vec<Sample>, ControllerError> {
        let run = self.run;
        let mut records = Vec::with_capacity(measured.len());
        for (k, m) in measured.iter().enumerate() {
            let a = &m.assignment;
            let mut result = m.status.result.clone();
            let hdr_log = match result.as_mut().and_then(take_hdr_log) {
                Some(log) => Some(run.dir.write_hdr(&step.id, &a.tenant, &log)?),
                None => None,
            };
            let fixed_work = matches!(a.job, JobSpec::Burn { ops: Some(_), .. });
            let metrics = result
                .as_ref()
                .map(|r| results::metrics(a.job.kind(), fixed_work, r))
                .unwrap_or_default();
            records.push(Sample::new(
                &run.dir.run_id,
                run.experiment.scenario.kind(),
                index,
                step,
                k + 1,
                measured.len(),
                SampleParts {
                    tenant: a.tenant.clone(),
                    role: self.role(&a.tenant),
                    job: a.job.kind().to_string(),
                    status: SampleStatus::Ok,
                    error: None,
                    attempts,
                    started_at,
                    elapsed_ms: elapsed.as_secs_f64() * 1e3,
                    metrics,
                    hdr_log,
                    result,
                },
            ));
        }
        self.journal.append_step(&records)?;
        Ok(records)
    }

    fn record_failed(
        &mut self,
        index: usize,
        step: &Step,
        attempts: u32,
        error: &str,
    ) -> Result<Vec<Sample>, ControllerError> {
        let run = self.run;
        let now = SystemTime::now();
        let records: Vec<Sample> = step
            .measure
            .iter()
            .enumerate()
            .map(|(k, a)| {
                Sample::new(
                    &run.dir.run_id,
                    run.experiment.scenario.kind(),
                    index,
                    step,
                    k + 1,
                    step.measure.len(),
                    SampleParts {
                        tenant: a.tenant.clone(),
                        role: self.role(&a.tenant),
                        job: a.job.kind().to_string(),
                        status: SampleStatus::Failed,
                        error: Some(error.to_string()),
                        attempts,
                        started_at: now,
                        elapsed_ms: 0.0,
                        metrics: results::Metrics::default(),
                        hdr_log: None,
                        result: None,
                    },
                )
            })
            .collect();
        self.journal.append_step(&records)?;
        Ok(records)
    }
}

/// Removes a raw HDR log (`hdr_log`, a string) from a job result, to be stored as
/// its own file.
fn take_hdr_log(result: &mut Value) -> Option<String> {
    match result.as_object_mut()?.remove("hdr_log")? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// Mean, median and max of per-step overheads (ms).
fn overhead(ms: &[f64]) -> Option<Overhead> {
    if ms.is_empty() {
        return None;
    }
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    Some(Overhead {
        steps: n,
        mean_ms: sorted.iter().sum::<f64>() / n as f64,
        median_ms: median,
        max_ms: sorted[n - 1],
    })
}
