//! Campaigns: an experiment repeated over rounds, each round a run of its own under
//! the campaign's directory ([`nnb_format::campaign`] has the layout), sampled
//! across instances (spatial: each round launches a fresh fleet and releases it) or
//! over time (temporal: each lane keeps its fleet, a round every `interval`).
//!
//! The API (what `nnb run` and the end-to-end tests call):
//!
//! ```text
//! CampaignRun::create(results: &Path, file: &str, text: &str, exp: Experiment,
//!                     host_cpus: usize) -> Result<CampaignRun, ControllerError>
//! CampaignRun::open(results: &Path, id: &str, host_cpus: usize)
//!                     -> Result<CampaignRun, ControllerError>
//! campaign.budget = Some(CampaignBudget { usd_per_hour, max_usd });   // optional cap
//! execute_campaign(c: &mut CampaignRun, providers: &ProviderFactory<'_>,
//!                  opts: &RunOptions, cancel: &Cancel)
//!                     -> Result<CampaignOutcome, ControllerError>
//! execute_campaign_default(c, opts, cancel)      // providers = provider::for_experiment
//! ```
//!
//! `providers` is called once per fleet: for every spatial round, and for every
//! fleet a temporal lane launches, with the round's experiment
//! ([`Experiment::in_zone`] of its lane) and a [`ProviderContext`] whose `run_id` is
//! the round's run id, `<campaign-id>-r<round:05>-<lane>`, and whose `campaign_id`
//! is the campaign's (a test injects `AwsProvider::with_agents` here). It is also
//! called once up front, with the campaign's experiment and the campaign id as
//! `run_id`, to ask [`Provider::concurrent_fleets`] and, on a resume,
//! [`Provider::sweep_campaign`]; nothing is launched with that one.
//!
//! Lanes are the campaign's zones. Lanes run at the same time when the provider
//! says its fleets may ([`Provider::concurrent_fleets`]: aws), else one after
//! another (local); a lane's rounds never overlap. A round is recorded in
//! `rounds.jsonl` once, when it ends: completed, partial (some steps failed) or
//! failed (no fleet: a launch refused, a health check timed out; or the run
//! failed), and the campaign goes on, unless `on_failure = "abort"`. A round that
//! Ctrl-C or SIGTERM interrupts is not recorded; its fleet is shut down.
//!
//! A temporal lane's round `k` is due at the lane's start plus `k x interval` (start
//! to start). A round that is late starts at once and says so in its record's
//! `error`. When several rounds' times have passed (the controller was down, or a
//! round overran), only the latest of them is measured, late (one catch-up); the
//! earlier ones are recorded `failed` with an error that starts with `skipped:`
//! and no run directory. A lane whose fleet died (an agent that stopped answering
//! after a round) launches a new one, `generation + 1`, and says so in the next
//! round's `error`.
//!
//! Resume ([`CampaignRun::open`], then [`execute_campaign`]): sessions still
//! `running` are marked `died`, the provider sweeps what a dead controller left
//! ([`Provider::sweep_campaign`]), and the campaign goes on at the rounds not
//! recorded: a recorded round is never measured again, an unrecorded one is
//! measured in a new run directory (`.2`, `.3`, ... after the id when its first one
//! exists), and temporal lanes launch a new fleet (the next generation) and keep
//! their schedule, counted from their round 0.
//!
//! `max_cost_usd` caps the whole campaign ([`CampaignBudget`]): before each round,
//! the fleet-hours of the rounds recorded, plus the next round's (and those in
//! flight in other lanes) at the fleet's price, must stay within it; else the
//! campaign stops there ([`RunStatus::CostCap`]).

mod cost;
mod dir;
mod lanes;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

pub use cost::{launch_allowance, CampaignBudget, CampaignEstimate, FleetPrice, LOCAL_LAUNCH};
pub use dir::{is_campaign, CampaignDir, CampaignManifest, RoundsJournal};

use crate::provider::{self, Provider, ProviderContext, ProviderError};
use crate::results::{self, timestamp, Session, FORMAT_VERSION};
use crate::{Cancel, ControllerError, RunOptions, RunStatus};
use nnb_experiment::campaign::Campaign;
use nnb_experiment::plan::{self, Plan};
use nnb_experiment::Experiment;
use nnb_format::campaign::{CampaignSession, PlacedInstance, RoundStatus};
use nnb_format::SessionStatus;

/// Makes the provider of one fleet of a campaign (see the module's doc).
pub type ProviderFactory<'a> = dyn Fn(&Experiment, ProviderContext) -> Result<Box<dyn Provider>, ProviderError>
    + Send
    + Sync
    + 'a;

/// A campaign on disk: its directory (locked), manifest, experiment and rounds.
#[derive(Debug)]
pub struct CampaignRun {
    /// Where its files are.
    pub dir: CampaignDir,
    /// Its manifest (kept in step with the file).
    pub manifest: CampaignManifest,
    /// The experiment (every round runs it, in its lane's zone).
    pub experiment: Experiment,
    /// The experiment's campaign.
    pub campaign: Campaign,
    /// The rounds recorded.
    pub rounds: RoundsJournal,
    /// The cap on the whole campaign's cost, when it has one (the binary sets it
    /// from the provider's price and the spec's `max_cost_usd`).
    pub budget: Option<CampaignBudget>,
    /// CPUs of this machine (a local round's plan).
    host_cpus: usize,
}

impl CampaignRun {
    /// Creates a new campaign of `experiment` (read from `file` with text `text`;
    /// it must have a `[campaign]`) under `results`, writing its manifest.
    pub fn create(
        results: &Path,
        file: &str,
        text: &str,
        experiment: Experiment,
        host_cpus: usize,
    ) -> Result<CampaignRun, ControllerError> {
        let campaign = experiment.campaign.clone().ok_or_else(|| {
            ControllerError::Plan(format!("{file} has no [campaign]: run it as one run"))
        })?;
        let id = results::new_run_id();
        let dir = CampaignDir::create(results, &id)?;
        let manifest = CampaignManifest {
            format_version: FORMAT_VERSION,
            campaign_id: id,
            nnb_version: env!("CARGO_PKG_VERSION").to_string(),
            experiment_file: file.to_string(),
            experiment_text: text.to_string(),
            experiment: serde_json::to_value(&experiment).unwrap_or(Value::Null),
            kind: campaign.kind,
            lanes: campaign.zones.clone(),
            rounds_per_lane: campaign.rounds,
            interval_ms: campaign
                .interval
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            sessions: Vec::new(),
        };
        dir.write_manifest(&manifest)?;
        let (rounds, _) = RoundsJournal::open(&dir.rounds_path())?;
        Ok(CampaignRun {
            dir,
            manifest,
            experiment,
            campaign,
            rounds,
            budget: None,
            host_cpus,
        })
    }

    /// Opens campaign `id` under `results` to resume it: the experiment is re-read
    /// from the text in its manifest; sessions still `running` (the directory is
    /// locked, so they have no living writer) are marked `died`; a torn last line of
    /// `rounds.jsonl` is cut.
    pub fn open(
        results: &Path,
        id: &str,
        host_cpus: usize,
    ) -> Result<CampaignRun, ControllerError> {
        let dir = CampaignDir::open(results, id)?;
        let mut manifest = dir.read_manifest()?;
        let experiment = nnb_experiment::parse(
            &manifest.experiment_file,
            &manifest.experiment_text,
            Some(host_cpus),
        )?;
        let campaign = experiment.campaign.clone().ok_or_else(|| {
            ControllerError::Plan(format!("campaign {id}: its experiment has no [campaign]"))
        })?;
        if campaign.zones != manifest.lanes
            || campaign.rounds != manifest.rounds_per_lane
            || campaign.kind != manifest.kind
        {
            return Err(ControllerError::Plan(format!(
                "campaign {id} planned {} rounds in lanes {:?} but its experiment now reads \
                 as {} in {:?}: it was made by another nnb version",
                manifest.rounds_per_lane, manifest.lanes, campaign.rounds, campaign.zones
            )));
        }
        let (rounds, _) = RoundsJournal::open(&dir.rounds_path())?;
        let starts: Vec<String> = manifest
            .sessions
            .iter()
            .map(|s| s.started_at.clone())
            .collect();
        for (i, s) in manifest.sessions.iter_mut().enumerate() {
            if s.status == SessionStatus::Running {
                // It never wrote its count: the rounds that ended while it ran.
                // Timestamps are fixed-width RFC 3339 UTC: their order is the strings'.
                let next = starts.get(i + 1);
                s.rounds_run = rounds
                    .recorded()
                    .values()
                    .filter(|r| {
                        r.finished_at >= s.started_at && next.map_or(true, |n| r.finished_at < *n)
                    })
                    .count();
                tracing::warn!(
                    "campaign {id}: the session started at {} ended without closing (killed?) \
                     after recording {} round(s); marking it `{}`",
                    s.started_at,
                    s.rounds_run,
                    SessionStatus::Died
                );
                s.status = SessionStatus::Died;
            }
        }
        dir.write_manifest(&manifest)?;
        Ok(CampaignRun {
            dir,
            manifest,
            experiment,
            campaign,
            rounds,
            budget: None,
            host_cpus,
        })
    }

    /// The campaign id.
    pub fn id(&self) -> &str {
        &self.dir.id
    }

    /// One round's plan of the experiment `exp` (the campaign's, in a lane).
    pub fn plan_of(&self, exp: &Experiment) -> Plan {
        plan::expand(exp, exp.provider.host_vcpus().unwrap_or(self.host_cpus))
    }

    /// The index of round `lane_round` of lane `lane` (lane-major within a round
    /// number, as [`nnb_format::campaign::RoundRecord::round`] says).
    pub fn round_index(&self, lane: usize, lane_round: u32) -> u32 {
        lane_round * self.campaign.zones.len() as u32 + lane as u32
    }

    /// The run id of a round: `<campaign-id>-r<round:05>-<lane>`, or with `.2`,
    /// `.3`, ... after it when a run directory of that id exists (an unfinished
    /// attempt of a controller that died; it stays, and the round is measured anew).
    pub fn round_run_id(&self, round: u32, lane: &str) -> String {
        let base = format!("{}-r{round:05}-{lane}", self.dir.id);
        std::iter::once(base.clone())
            .chain((2..).map(|n| format!("{base}.{n}")))
            .find(|id| !self.dir.path.join(id).exists())
            .unwrap_or(base)
    }
}

/// How the rounds of one lane ended in a session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LaneOutcome {
    /// The lane.
    pub lane: String,
    /// Rounds recorded before this session.
    pub before: usize,
    /// Rounds recorded completed in this session.
    pub completed: usize,
    /// Rounds recorded partial.
    pub partial: usize,
    /// Rounds recorded failed (skipped ones included).
    pub failed: usize,
    /// Of the failed, rounds skipped (their time passed).
    pub skipped: usize,
}

/// What a campaign session did.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignOutcome {
    /// The campaign id.
    pub campaign_id: String,
    /// The campaign directory.
    pub dir: PathBuf,
    /// How it ended: completed (every round recorded), interrupted, aborted (a
    /// failed round under `on_failure = "abort"`) or stopped by the cost cap.
    pub status: RunStatus,
    /// Rounds in all.
    pub total_rounds: usize,
    /// Rounds recorded now (this session's and earlier ones').
    pub recorded: usize,
    /// Per lane.
    pub lanes: Vec<LaneOutcome>,
    /// What the campaign had to say on the way (late rounds, relaunched fleets, the
    /// cap).
    pub notes: Vec<String>,
}

impl CampaignOutcome {
    /// Rounds recorded failed or partial in this session.
    pub fn failed_rounds(&self) -> usize {
        self.lanes.iter().map(|l| l.failed + l.partial).sum()
    }
}

/// Runs (or resumes) campaign `c` with providers of its experiment's kind.
pub async fn execute_campaign_default(
    c: &mut CampaignRun,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<CampaignOutcome, ControllerError> {
    execute_campaign(c, &provider::for_experiment, opts, cancel).await
}

/// Runs (or resumes) campaign `c`: sweeps what a dead controller of it left, runs
/// the rounds not recorded yet lane by lane, each round's fleet from `providers`,
/// and closes the session in the manifest (see the module's doc).
pub async fn execute_campaign(
    c: &mut CampaignRun,
    providers: &ProviderFactory<'_>,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<CampaignOutcome, ControllerError> {
    let probe_cx = ProviderContext {
        nnb_bin: opts.nnb_bin.clone(),
        run_id: c.id().to_string(),
        campaign_id: Some(c.id().to_string()),
    };
    let probe = providers(&c.experiment, probe_cx)?;
    if !c.manifest.sessions.is_empty() {
        let swept = probe.sweep_campaign(c.id()).await?;
        if swept > 0 {
            opts.progress.note(&format!(
                "tore down {swept} resource(s) of campaign {} that a controller which died left",
                c.id()
            ));
        }
    }
    let parallel = probe.concurrent_fleets();
    drop(probe);
    c.manifest.sessions.push(CampaignSession {
        started_at: timestamp(SystemTime::now()),
        finished_at: None,
        status: SessionStatus::Running,
        command: opts.command.clone(),
        rounds_run: 0,
    });
    c.dir.write_manifest(&c.manifest)?;
    let before = c.rounds.recorded().len();
    let result = lanes::run_lanes(c, providers, parallel, opts, cancel).await;
    let status = match &result {
        Ok(o) => o.status.session_status(),
        Err(_) => SessionStatus::Failed,
    };
    if let Some(s) = c.manifest.sessions.last_mut() {
        s.finished_at = Some(timestamp(SystemTime::now()));
        s.status = status;
        s.rounds_run = c.rounds.recorded().len() - before;
    }
    let closed = c.dir.write_manifest(&c.manifest);
    let outcome = match (result, closed) {
        (Err(e), Err(m)) => {
            tracing::error!("and the campaign manifest could not be closed either: {m}");
            return Err(e);
        }
        (result, closed) => {
            closed?;
            result?
        }
    };
    Ok(outcome)
}

/// Where each instance (or local tenant) of a round's run ran, from the session
/// that measured it: on a cloud, the instances' records ([`CloudRecord::placed`]:
/// id, type, zone, subnet, address, host); every tenant's record otherwise (its
/// address); and for each, the CPU model its agent saw.
///
/// [`CloudRecord::placed`]: crate::provider::CloudRecord::placed
fn placed_instances(session: Option<&Session>) -> Vec<PlacedInstance> {
    let Some(s) = session else {
        return Vec::new();
    };
    let cpu_model = |tenant: &str| {
        s.tenants
            .iter()
            .find(|t| t.name == tenant)
            .and_then(|t| t.environment.as_ref())
            .and_then(|e| e.get("cpu_model"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut placed = s.cloud.as_ref().map(|c| c.placed()).unwrap_or_default();
    for t in &s.tenants {
        if !placed.iter().any(|p| p.tenant == t.name) {
            placed.push(PlacedInstance {
                tenant: t.name.clone(),
                role: Some(t.role),
                private_ip: t.ip.clone(),
                ..PlacedInstance::default()
            });
        }
    }
    for p in &mut placed {
        p.cpu_model = cpu_model(&p.tenant);
    }
    placed
}

/// How a round's run ended, as its record says it: completed, partial (some steps
/// failed, or the run stopped early with some measured) or failed (nothing
/// measured).
fn round_status(o: &crate::RunOutcome) -> RoundStatus {
    let measured = o.measured + o.skipped;
    match o.status {
        RunStatus::Completed if o.failed == 0 => RoundStatus::Completed,
        _ if measured == 0 => RoundStatus::Failed,
        _ => RoundStatus::Partial,
    }
}
