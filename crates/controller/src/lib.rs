//! Runs a plan on a fleet of agents, step by step, and journals what it measured.
//!
//! Per step: bring the neighbors' background jobs to what the step needs (stops and
//! starts fanned out to all agents at once), let them settle, start the measured
//! jobs together, wait for all of them, and append the step's records (fsynced)
//! before the next step. A failing step (an agent that died, a job that failed or
//! overran the step timeout) is retried, skipped or ends the run, as the experiment's
//! `on_failure` says; failed steps are recorded as such. Ctrl-C or SIGTERM stops
//! cleanly: the step in flight is dropped (its measured jobs stopped first), the
//! fleet is shut down (local agents get `SIGTERM` and a grace to end their jobs
//! before `SIGKILL`), and what was measured stays; `--resume` continues from there.

//!
//! The parts: [`run`] (a run's directory, manifest and plan), [`cancel`], the
//! endpoint's `serve` job, the step loop (`driver`, written against
//! [`AgentApi`](crate::client::AgentApi)), what a step records (`record`) and what
//! the background jobs' ends record (`background`). The
//! fleet comes from a [`Provider`]; tests drive the whole controller with an
//! in-process fake provider and agents.

mod background;
pub mod budget;
pub mod campaign;
pub mod cancel;
pub mod client;
pub mod commands;
mod driver;
mod endpoint;
pub mod journal;
mod lockfile;
pub mod progress;
pub mod provider;
mod record;
pub mod results;
pub mod run;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use serde::Serialize;
use tokio::time::Instant;

use crate::journal::Journal;
use crate::progress::{Progress, Silent};
use crate::provider::{Fleet, Provider, ProviderContext, ProviderError, Tenant};
use crate::results::{timestamp, ResultsError, Session, TenantRecord};
use driver::Driver;
use nnb_experiment::ExperimentError;
use nnb_format::{Role, SessionStatus};

pub use cancel::{Cancel, Canceller};
pub use run::Run;

/// Deadline of background jobs: the controller stops them; this only bounds a job
/// whose controller vanished without its agent noticing.
const BACKGROUND_DEADLINE: Duration = Duration::from_secs(24 * 3600);

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
    /// The plan asks for what the controller cannot record (a measured job of a kind
    /// whose result the results format does not read): a bug of the plan.
    #[error("{0}")]
    Plan(String),
    /// The plan runs command jobs on an agent that did not opt in to them.
    #[error(transparent)]
    CommandsNotAllowed(#[from] commands::CommandsNotAllowed),
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
    /// The status of the session it ends, in the manifest.
    fn session_status(self) -> SessionStatus {
        match self {
            RunStatus::Completed => SessionStatus::Completed,
            RunStatus::Interrupted => SessionStatus::Interrupted,
            RunStatus::Aborted | RunStatus::CostCap => SessionStatus::Aborted,
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

/// Runs (or resumes) `run` with the provider its experiment names: skips steps
/// already in its journal, launches the fleet, measures the rest, shuts the fleet
/// down and updates the manifest.
pub async fn execute(
    run: &mut Run,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<RunOutcome, ControllerError> {
    let cx = ProviderContext {
        nnb_bin: opts.nnb_bin.clone(),
        run_id: run.dir.run_id.clone(),
        campaign_id: None,
    };
    let mut provider = provider::for_experiment(&run.experiment, cx)?;
    execute_with(run, provider.as_mut(), opts, cancel).await
}

/// [`execute`] with a given provider.
pub async fn execute_with(
    run: &mut Run,
    provider: &mut dyn Provider,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<RunOutcome, ControllerError> {
    let (journal, mut outcome) = open_session(run, opts)?;
    let result = if outcome.skipped == run.plan.steps.len() {
        Ok(RunStatus::Completed)
    } else {
        measure_all(run, provider, journal, opts, cancel, &mut outcome).await
    };
    close_session(run, result, outcome)
}

/// A fleet a caller keeps across runs (a temporal campaign's lane), and since when
/// its resources are held (what a cost cap counts from).
#[derive(Debug)]
pub struct HeldFleet {
    /// The fleet.
    pub fleet: Fleet,
    /// When its launch began.
    pub since: Instant,
}

/// Runs `run` (a new one) on the fleet `held`, launching one into it first when it
/// holds none (then the launch is this run's, its cloud record in this run's
/// manifest), and leaves the fleet up for the caller to run again on or to shut
/// down ([`Provider::shutdown`]). A fleet kept from an earlier run gets all its
/// tenants made present first (the earlier run may have ended with some absent).
/// A launch that fails or is interrupted is torn down ([`Provider::abandon`]) and
/// `held` stays empty.
pub async fn execute_on_fleet(
    run: &mut Run,
    provider: &mut dyn Provider,
    held: &mut Option<HeldFleet>,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<RunOutcome, ControllerError> {
    let (journal, mut outcome) = open_session(run, opts)?;
    let result = on_fleet(run, provider, held, journal, opts, cancel, &mut outcome).await;
    close_session(run, result, outcome)
}

/// The body of [`execute_on_fleet`] inside its session.
async fn on_fleet(
    run: &mut Run,
    provider: &mut dyn Provider,
    held: &mut Option<HeldFleet>,
    journal: Journal,
    opts: &RunOptions,
    cancel: &Cancel,
    outcome: &mut RunOutcome,
) -> Result<RunStatus, ControllerError> {
    let h = match held {
        Some(h) => {
            let all: Vec<String> = h.fleet.tenants.iter().map(|t| t.name.clone()).collect();
            provider.set_present(&mut h.fleet, &all).await?;
            h
        }
        None => {
            let since = Instant::now();
            match launch_fleet(run, provider, cancel).await? {
                Some(fleet) => held.insert(HeldFleet { fleet, since }),
                None => return Ok(RunStatus::Interrupted),
            }
        }
    };
    drive_fleet(
        run,
        provider,
        &mut h.fleet,
        h.since,
        journal,
        opts,
        cancel,
        outcome,
    )
    .await
}

/// Opens a session of `run`: its journal (an unfinished step's records cut), a
/// `running` session in the manifest, and the outcome so far.
fn open_session(
    run: &mut Run,
    opts: &RunOptions,
) -> Result<(Journal, RunOutcome), ControllerError> {
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
        status: SessionStatus::Running,
        command: opts.command.clone(),
        tenants: Vec::new(),
        warnings: Vec::new(),
        agent_pids: Vec::new(),
        steps_run: 0,
        cloud: None,
    });
    run.dir.write_manifest(&run.manifest)?;
    let outcome = RunOutcome {
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
    Ok((journal, outcome))
}

/// Closes the session [`open_session`] opened with how it ended (`result`).
fn close_session(
    run: &mut Run,
    result: Result<RunStatus, ControllerError>,
    mut outcome: RunOutcome,
) -> Result<RunOutcome, ControllerError> {
    let status = match &result {
        Ok(s) => s.session_status(),
        Err(_) => SessionStatus::Failed,
    };
    if let Some(s) = run.manifest.sessions.last_mut() {
        s.finished_at = Some(timestamp(SystemTime::now()));
        s.status = status;
        s.steps_run = outcome.measured + outcome.failed;
    }
    let closed = run.dir.write_manifest(&run.manifest);
    // The run's own failure comes first (reliability review L7: on a full disk the
    // journal's failed append is the cause, the manifest's failure only follows it).
    outcome.status = match (result, closed) {
        (Err(e), Err(m)) => {
            tracing::error!("and the manifest could not be closed either: {m}");
            return Err(e);
        }
        (result, closed) => {
            closed?;
            result?
        }
    };
    Ok(outcome)
}

/// Launches the fleet, drives the steps on it, and shuts it down whatever happened.
async fn measure_all(
    run: &mut Run,
    provider: &mut dyn Provider,
    journal: Journal,
    opts: &RunOptions,
    cancel: &Cancel,
    outcome: &mut RunOutcome,
) -> Result<RunStatus, ControllerError> {
    let held_since = Instant::now();
    let Some(mut fleet) = launch_fleet(run, provider, cancel).await? else {
        return Ok(RunStatus::Interrupted);
    };
    // No early return until the fleet is shut down: it may hold a dedicated host.
    let result = drive_fleet(
        run, provider, &mut fleet, held_since, journal, opts, cancel, outcome,
    )
    .await;
    if let Err(e) = provider.shutdown(fleet).await {
        tracing::warn!("shutting the fleet down: {e}");
    }
    result
}

/// Launches `run`'s fleet; `None` when a cancel interrupted the launch. Cloud
/// resources are held by the provider from the first one created, so a launch that
/// fails or is interrupted (Ctrl-C drops it half-way) is torn down
/// ([`Provider::abandon`]) and what it held goes into the session's record.
async fn launch_fleet(
    run: &mut Run,
    provider: &mut dyn Provider,
    cancel: &Cancel,
) -> Result<Option<Fleet>, ControllerError> {
    let specs = run.experiment.tenant_specs();
    let serving = run.plan.serving(run.experiment.servers);
    let launched = tokio::select! {
        f = provider.launch(&specs, &serving) => Some(f),
        () = cancel.wait() => None,
    };
    match launched {
        Some(Ok(fleet)) => Ok(Some(fleet)),
        failed => {
            // Tear down first: a manifest that cannot be written must not leak a host.
            let (record, released) = provider.abandon().await;
            if let Err(e) = released {
                tracing::warn!("tearing down what the launch created: {e}");
            }
            if let (Some(s), Some(r)) = (run.manifest.sessions.last_mut(), record) {
                s.cloud = Some(r);
                run.dir.write_manifest(&run.manifest)?;
            }
            match failed {
                Some(Err(e)) => Err(e.into()),
                _ => Ok(None),
            }
        }
    }
}

/// Records `fleet` in the session and drives the steps not yet measured on it,
/// under the provider's cost cap counted from `held_since`.
#[allow(clippy::too_many_arguments)]
async fn drive_fleet(
    run: &mut Run,
    provider: &mut dyn Provider,
    fleet: &mut Fleet,
    held_since: Instant,
    journal: Journal,
    opts: &RunOptions,
    cancel: &Cancel,
    outcome: &mut RunOutcome,
) -> Result<RunStatus, ControllerError> {
    outcome.warnings = fleet.warnings.clone();
    record_fleet(run, provider, fleet).await?;
    if let Some(s) = run.manifest.sessions.last() {
        commands::check_opt_in(&run.plan, &s.tenants)?;
    }
    let cost_cap = provider.cost_cap(held_since);
    let mut driver = Driver::new(run, provider, fleet, journal).await?;
    driver.cost_cap = cost_cap;
    let r = driver.drive(opts, cancel, outcome).await;
    driver.finish().await;
    r
}

/// Asks every agent for its health (all at once) and writes tenants (with the
/// environment each agent captured) and warnings into the current session of the
/// manifest.
async fn record_fleet(
    run: &mut Run,
    provider: &dyn Provider,
    fleet: &Fleet,
) -> Result<(), ControllerError> {
    let all: Vec<(&Tenant, Role)> = fleet
        .tenants
        .iter()
        .map(|t| (t, t.role))
        .chain(fleet.endpoint.iter().map(|t| (t, Role::Endpoint)))
        .chain(fleet.servers.iter().map(|t| (t, Role::Endpoint)))
        .collect();
    let healths = join_all(all.iter().map(|(t, _)| {
        let agent = provider.agent(t);
        async move { agent.health().await }
    }))
    .await;
    let tenants = all
        .iter()
        .zip(healths)
        .map(|((t, role), h)| {
            let mut health = h
                .map_err(|e| tracing::warn!("health of {}: {e}", t.name))
                .ok();
            // The environment goes into the tenant record, once.
            let environment = health
                .as_mut()
                .and_then(|h| h.environment.take())
                .and_then(|e| serde_json::to_value(e).ok());
            TenantRecord {
                name: t.name.clone(),
                role: *role,
                addr: t.addr.to_string(),
                cpus: t.cpus.clone(),
                netns: t.netns.clone(),
                ip: t.ip.map(|ip| ip.to_string()),
                health,
                environment,
                runtime: t.runtime.clone(),
            }
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
