//! The step loop: per step, bring the background jobs to what the step needs, let
//! them settle, start the measured jobs together, wait for all of them and record
//! the step; a failed attempt is retried, skipped or ends the run as `on_failure`
//! says. Every background job's end is recorded (`super::background`). The agents
//! are reached through [`AgentApi`], so tests drive it with fakes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use nnb_format::JobOutcome;
use serde_json::Value;
use tokio::time::Instant;

use super::background::Running;
use super::endpoint::Endpoints;
use super::record::{measured_secs, overhead};
use super::{Cancel, ControllerError, Run, RunOptions, RunOutcome, RunStatus, BACKGROUND_DEADLINE};
use crate::budget::CostCap;
use crate::client::{AgentApi, AgentError};
use crate::journal::Journal;
use crate::provider::{Fleet, HostUsage, Provider, Role};
use crate::results::{BackgroundRecord, SampleStatus};
use nnb_agent::jobs::{JobRequest, JobSpec, JobState, JobStatus};
use nnb_experiment::plan::{Assignment, Step};
use nnb_experiment::OnFailure;
use nnb_format::{HostSampler, StartOrder, StepStart};

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

/// The failure of an attempt that a cancel ended.
fn interrupted() -> StepFailure {
    StepFailure("interrupted".to_string())
}

/// Reads the result of a measured `spec` job that ended done, once: a job without a
/// result, or with one the results format cannot read, fails the attempt with a
/// message naming the job's kind and the field.
fn read_outcome(spec: &JobSpec, result: Option<Value>) -> Result<JobOutcome, String> {
    let kind = spec.measured().ok_or_else(|| {
        format!(
            "a {} job is not measured: the results format reads no result of it",
            spec.kind()
        )
    })?;
    let raw =
        result.ok_or_else(|| format!("the {} job ended done without a result", spec.kind()))?;
    JobOutcome::read(kind, raw).map_err(|e| e.to_string())
}

/// One measured job's end: its result, read once where the agent handed it over.
pub(super) struct Measured {
    pub(super) assignment: Assignment,
    pub(super) outcome: JobOutcome,
    /// What the host saw its tenant use meanwhile, when the provider can tell.
    pub(super) host: Option<HostUsage>,
    /// The host-side sampler's interval and cost, when the host read the step.
    pub(super) sampler: Option<HostSampler>,
}

/// The step loop's state.
pub(super) struct Driver<'a> {
    pub(super) run: &'a Run,
    /// Starts and stops tenants between steps.
    provider: &'a mut dyn Provider,
    /// The fleet it launched (tenants' addresses change when they start again).
    fleet: &'a mut Fleet,
    /// The tenants whose agents run now, as the last step wanted them; empty when
    /// unknown (a change failed half-way).
    present: Vec<String>,
    /// The tenants whose grants are lifted now; `None` before the first step and
    /// after a change failed (then the next step sets them all).
    lifted: Option<Vec<String>>,
    pub(super) clients: HashMap<String, (Arc<dyn AgentApi>, Role)>,
    endpoints: Endpoints,
    running: HashMap<String, Running>,
    pub(super) journal: Journal,
    overheads: Vec<f64>,
    /// The run's `max_cost_usd`, enforced before each step (cloud runs).
    pub(super) cost_cap: Option<CostCap>,
}

impl<'a> Driver<'a> {
    /// A driver of `run` on `fleet`, whose agents `provider` reaches; starts the
    /// endpoint's `serve` job, or each mirrored server's, when the plan needs them.
    pub(super) async fn new(
        run: &'a Run,
        provider: &'a mut dyn Provider,
        fleet: &'a mut Fleet,
        journal: Journal,
    ) -> Result<Driver<'a>, ControllerError> {
        let clients = fleet
            .tenants
            .iter()
            .map(|t| (t.name.clone(), (provider.agent(t), t.role)))
            .collect();
        let present = fleet.tenants.iter().map(|t| t.name.clone()).collect();
        let serving = run.plan.serving(run.experiment.servers);
        let ports = run.experiment.provider.serve_ports();
        let sink_threads = run.experiment.sink_threads;
        let (endpoints, agents) =
            Endpoints::start(fleet, &serving, |t| provider.agent(t), ports, sink_threads).await?;
        let mut d = Driver {
            run,
            provider,
            fleet,
            present,
            lifted: None,
            clients,
            endpoints,
            running: HashMap::new(),
            journal,
            overheads: Vec::new(),
            cost_cap: None,
        };
        for (name, agent) in agents {
            d.clients.insert(name, (agent, Role::Endpoint));
        }
        Ok(d)
    }
}

impl Driver<'_> {
    fn client(&self, tenant: &str) -> Result<&dyn AgentApi, StepFailure> {
        self.clients
            .get(tenant)
            .map(|(c, _)| c.as_ref())
            .ok_or_else(|| StepFailure(format!("no agent for tenant {tenant}")))
    }

    /// Measures every step not yet in the journal, in plan order.
    pub(super) async fn drive(
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
                let tried = self
                    .attempt(step, exp.settle, exp.step_timeout, cancel)
                    .await;
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
                            .map(|m| measured_secs(&m.assignment.job, &m.outcome.result))
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
                        // Interrupted, or failed because the agents share the
                        // terminal's process group and died of the same Ctrl-C:
                        // not a failure of the step.
                        status = RunStatus::Interrupted;
                        break 'steps;
                    }
                    Err(StepFailure(msg)) => {
                        progress.note(&format!(
                            "step {} failed (attempt {attempt} of {attempts}): {msg}",
                            step.id
                        ));
                        last_error = msg;
                        // Start the background afresh on the next attempt (a failed
                        // stop is recorded; the next attempt's start tells).
                        if let Err(StepFailure(e)) = self.stop_background().await {
                            tracing::debug!("stopping the background after a failed attempt: {e}");
                        }
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
    /// ends, when they started, and how long was spent settling. A `cancel` fails
    /// it: the preparation is dropped where it is, the measured jobs are stopped
    /// first ([`Driver::measure`]).
    async fn attempt(
        &mut self,
        step: &Step,
        settle: Duration,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<(Vec<Measured>, SystemTime, Duration), StepFailure> {
        let settled = tokio::select! {
            r = self.prepare(step, settle) => r?,
            () = cancel.wait() => return Err(interrupted()),
        };
        let started_at = SystemTime::now();
        let measured = self
            .measure(&step.measure, step.start, timeout, cancel)
            .await?;
        Ok((measured, started_at, settled))
    }

    /// Brings the tenants, their grants and the background to what `step` wants,
    /// settles when anything changed and checks the background still runs. Returns
    /// how long it settled.
    async fn prepare(&mut self, step: &Step, settle: Duration) -> Result<Duration, StepFailure> {
        let came_or_went = self.make_present(&step.present, step.continuous).await?;
        let lifted = self.make_lifted(&step.lifted).await?;
        let changed =
            self.reconfigure(&step.background, step.continuous).await? || came_or_went || lifted;
        for r in self.running.values_mut() {
            r.spans(&step.id);
        }
        self.endpoints.spans(&step.id);
        let settled = if changed && !settle.is_zero() {
            tokio::time::sleep(settle).await;
            settle
        } else {
            Duration::ZERO
        };
        self.check_background().await?;
        Ok(settled)
    }

    /// Makes the tenants the step wants present, and only those (the provider
    /// starts and stops their agents or instances). The background jobs are stopped
    /// (and their ends recorded) first: a leaving tenant's job ends with its agent.
    /// With `carry_over` (a continuous step, [`Step::continuous`]) only the leaving
    /// tenants' jobs are: the others run on through the change. Returns whether
    /// anything changed; a failed change fails the attempt.
    async fn make_present(
        &mut self,
        wanted: &[String],
        carry_over: bool,
    ) -> Result<bool, StepFailure> {
        let same =
            self.present.len() == wanted.len() && wanted.iter().all(|t| self.present.contains(t));
        if same {
            return Ok(false);
        }
        if carry_over {
            self.stop_background_where(|r| !wanted.contains(&r.tenant))
                .await?;
        } else {
            self.stop_background().await?;
        }
        self.present.clear();
        let started = self
            .provider
            .set_present(self.fleet, wanted)
            .await
            .map_err(|e| StepFailure(format!("changing which tenants are present: {e}")))?;
        for name in started {
            if let Some(t) = self.fleet.tenants.iter().find(|t| t.name == name) {
                self.clients.insert(name, (self.provider.agent(t), t.role));
            }
        }
        self.present = wanted.to_vec();
        Ok(true)
    }

    /// Lifts the grants of the tenants the step wants unrestricted and enforces the
    /// others' (the provider writes their cgroups). Returns whether anything
    /// changed; a failed change fails the attempt.
    async fn make_lifted(&mut self, wanted: &[String]) -> Result<bool, StepFailure> {
        if self.lifted.as_deref() == Some(wanted) {
            return Ok(false);
        }
        self.lifted = None;
        self.provider
            .set_lifted(self.fleet, wanted)
            .await
            .map_err(|e| StepFailure(format!("lifting or restoring grants: {e}")))?;
        self.lifted = Some(wanted.to_vec());
        Ok(true)
    }

    /// Brings the background jobs to what the step wants, on all agents at once:
    /// when that differs from what runs, every running job is stopped (and its end
    /// recorded, see `super::background`) and every wanted one started afresh. With
    /// `carry_over` (a continuous step, [`Step::continuous`]) a running job the step
    /// still wants unchanged (same tenant, same spec) keeps running: only the others
    /// are stopped and only the wanted ones not running are started. Returns whether
    /// anything changed; a failed stop or start fails the attempt.
    async fn reconfigure(
        &mut self,
        wanted: &[Assignment],
        carry_over: bool,
    ) -> Result<bool, StepFailure> {
        let wanted: HashMap<&str, JobSpec> = wanted
            .iter()
            .map(|a| (a.tenant.as_str(), self.endpoints.resolve(&a.tenant, &a.job)))
            .collect();
        let unchanged = wanted.len() == self.running.len()
            && self
                .running
                .iter()
                .all(|(t, r)| wanted.get(t.as_str()) == Some(&r.spec));
        if unchanged {
            return Ok(false);
        }
        if carry_over {
            self.stop_background_where(|r| wanted.get(r.tenant.as_str()) != Some(&r.spec))
                .await?;
        } else {
            self.stop_background().await?;
        }
        let this = &*self;
        // What still runs now is wanted unchanged (nothing, unless carried over).
        let new = wanted
            .iter()
            .filter(|(t, _)| !this.running.contains_key(**t));
        let starts = new.map(|(t, spec)| async move {
            let c = this.client(t)?;
            let job = spec.background().ok_or_else(|| {
                StepFailure(format!(
                    "tenant {t}: a {} job does not run in the background",
                    spec.kind()
                ))
            })?;
            let req = JobRequest {
                spec: spec.clone(),
                deadline_ms: nnb_units::millis(BACKGROUND_DEADLINE),
            };
            let id = c
                .start(&req)
                .await
                .map_err(|e| StepFailure::from((t.to_string(), e)))?;
            Ok::<_, StepFailure>(Running::new(t, this.role(t), job, spec.clone(), id))
        });
        let started = join_all(starts).await;
        let mut first_error = None;
        for r in started {
            match r {
                Ok(running) => {
                    self.running.insert(running.tenant.clone(), running);
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

    /// Starts the measured jobs together, or as `start` orders them (the later
    /// tenant's jobs posted `stagger_ms` after the first's were accepted), and waits
    /// for all; any failure fails the attempt (and stops the others). A `cancel`
    /// meanwhile stops them all and fails it, so no job outlives the run
    /// (reliability review NM2: a disk job removes its scratch file when stopped,
    /// not when its agent is killed).
    async fn measure(
        &self,
        jobs: &[Assignment],
        start: Option<StepStart>,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<Vec<Measured>, StepFailure> {
        let tenants: Vec<String> = jobs.iter().map(|a| a.tenant.clone()).collect();
        let meter = self.provider.usage_meter(self.fleet, &tenants);
        let (stagger, phases) = self.phases(jobs, start);
        let mut ids: Vec<Result<String, StepFailure>> = jobs
            .iter()
            .map(|_| Err(StepFailure("not started".to_string())))
            .collect();
        for (k, phase) in phases.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            if k > 0 {
                tokio::select! {
                    () = tokio::time::sleep(stagger) => {}
                    () = cancel.wait() => {
                        self.stop_started(jobs, &ids).await;
                        return Err(interrupted());
                    }
                }
            }
            let started = join_all(phase.iter().map(|&i| self.start_job(&jobs[i], timeout))).await;
            let mut failed = None;
            for (&i, id) in phase.iter().zip(started) {
                if let Err(StepFailure(m)) = &id {
                    failed.get_or_insert_with(|| m.clone());
                }
                ids[i] = id;
            }
            if let Some(m) = failed {
                self.stop_started(jobs, &ids).await;
                return Err(StepFailure(m));
            }
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
            let outcome = read_outcome(&a.job, status.result)
                .map_err(|e| StepFailure(format!("tenant {}: {e}", a.tenant)))?;
            // A probe that heard nothing measured nothing: a failed attempt, not RTT 0.
            if outcome.quality.probe_dead() {
                let sent = outcome.quality.counts.map_or(0, |c| c.sent);
                return Err(StepFailure(format!(
                    "tenant {}: the latency probe heard no answer ({sent} pings, none answered)",
                    a.tenant
                )));
            }
            Ok(Measured {
                assignment: a.clone(),
                outcome,
                host: None,
                sampler: None,
            })
        });
        let ends = tokio::select! {
            ends = join_all(waits) => ends,
            () = cancel.wait() => {
                self.stop_started(jobs, &ids).await;
                return Err(interrupted());
            }
        };
        let nominal = jobs.iter().filter_map(|a| a.job.nominal()).max();
        let host = meter.map(|m| m.finish(nominal));
        if ends.iter().any(Result::is_err) {
            self.stop_started(jobs, &ids).await;
        }
        let mut measured: Vec<Measured> = ends.into_iter().collect::<Result<_, _>>()?;
        if let Some(host) = host {
            for m in &mut measured {
                m.host = host.usage.get(&m.assignment.tenant).copied();
                m.sampler = host.sampler;
            }
        }
        Ok(measured)
    }

    /// Posts one measured job to its tenant's agent: its id there.
    async fn start_job(&self, a: &Assignment, timeout: Duration) -> Result<String, StepFailure> {
        let c = self.client(&a.tenant)?;
        let req = JobRequest {
            spec: self.endpoints.resolve(&a.tenant, &a.job),
            deadline_ms: nnb_units::millis(timeout),
        };
        c.start(&req)
            .await
            .map_err(|e| StepFailure::from((a.tenant.clone(), e)))
    }

    /// The indices of `jobs` started first and those started `stagger` later, as
    /// `start` orders them: a-first puts the test tenant's (a's) jobs first, b-first
    /// the others' (b's); together (or no `start`) starts all at once.
    fn phases(&self, jobs: &[Assignment], start: Option<StepStart>) -> (Duration, [Vec<usize>; 2]) {
        let (first_is_a, stagger) = match start {
            Some(StepStart {
                order: StartOrder::AFirst,
                stagger_ms,
            }) => (true, stagger_ms),
            Some(StepStart {
                order: StartOrder::BFirst,
                stagger_ms,
            }) => (false, stagger_ms),
            _ => return (Duration::ZERO, [(0..jobs.len()).collect(), Vec::new()]),
        };
        let (first, later): (Vec<usize>, Vec<usize>) = (0..jobs.len())
            .partition(|&i| (self.role(&jobs[i].tenant) == Role::Test) == first_is_a);
        (Duration::from_millis(stagger), [first, later])
    }

    /// Stops the measured jobs that started, so a retry starts clean and an
    /// interrupted run leaves none running; errors here are moot (the job may have
    /// ended or its agent died). Each stop is bounded: the agent answers once the
    /// job ended or after its stop grace, and the client's request timeout bounds
    /// an agent that does not answer.
    async fn stop_started(&self, jobs: &[Assignment], ids: &[Result<String, StepFailure>]) {
        let stops = jobs.iter().zip(ids).filter_map(|(a, id)| {
            let id = id.as_ref().ok()?;
            let c = self.client(&a.tenant).ok()?;
            Some(async move { c.stop(id).await })
        });
        join_all(stops).await;
    }

    /// Stops every neighbor's background job, records each one's end and forgets
    /// them; the first stop that failed (recorded as such) is the error.
    async fn stop_background(&mut self) -> Result<(), StepFailure> {
        self.stop_background_where(|_| true).await
    }

    /// [`Driver::stop_background`] for the running jobs `which` picks only.
    async fn stop_background_where(
        &mut self,
        which: impl Fn(&Running) -> bool,
    ) -> Result<(), StepFailure> {
        let this = &*self;
        let stops = this
            .running
            .values()
            .filter(|r| which(r))
            .map(|r| async move { (r.tenant.clone(), this.stop_job(r).await) });
        let ends = join_all(stops).await;
        let mut first_error = None;
        for (tenant, stopped) in ends {
            if let Err(e) = &stopped {
                first_error = first_error.or_else(|| Some(StepFailure(e.clone())));
            }
            if let Some(r) = self.running.remove(&tenant) {
                self.record_background(r.end(&self.run.dir.run_id, stopped));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Ends the session's background: stops the neighbors' jobs and the endpoint's
    /// `serve` (or each mirrored server's; best effort), recording each one's end.
    pub(super) async fn finish(&mut self) {
        if let Err(StepFailure(e)) = self.stop_background().await {
            tracing::debug!("stopping the background: {e}");
        }
        for job in self.endpoints.take_jobs() {
            let stopped = self.stop_job(&job).await;
            self.record_background(job.end(&self.run.dir.run_id, stopped));
        }
    }

    /// Stops a background job: its final status, or why stopping it failed.
    async fn stop_job(&self, r: &Running) -> Result<JobStatus, String> {
        let c = self.client(&r.tenant).map_err(|StepFailure(m)| m)?;
        c.stop(&r.id)
            .await
            .map_err(|e| StepFailure::from((r.tenant.clone(), e)).0)
    }

    /// Appends a background job's end to `background.jsonl`; a record that cannot be
    /// written is logged, never a reason to stop measuring.
    fn record_background(&self, record: BackgroundRecord) {
        if record.status == SampleStatus::Failed {
            tracing::warn!(
                "background {} job on {}: {}",
                record.job,
                record.tenant,
                record.error.as_deref().unwrap_or_default()
            );
        }
        if let Err(e) = self.run.dir.append_background(&record) {
            tracing::warn!(
                "the end of the background {} job on {} is not recorded: {e}",
                record.job,
                record.tenant
            );
        }
    }
}
