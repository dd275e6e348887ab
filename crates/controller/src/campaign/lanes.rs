//! The rounds of a campaign, lane by lane: which round runs when, on which fleet,
//! and what its record says (see the module's doc for the rules).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use tokio::time::Instant;

use super::cost::{held, launch_allowance, next_held};
use super::{
    placed_instances, round_status, CampaignOutcome, CampaignRun, LaneOutcome, ProviderFactory,
};
use crate::progress::Silent;
use crate::provider::{Fleet, Provider, ProviderContext};
use crate::{
    execute_on_fleet, execute_with, Cancel, ControllerError, HeldFleet, Run, RunOptions,
    RunOutcome, RunStatus,
};
use nnb_experiment::campaign::CampaignKind;
use nnb_experiment::{Experiment, OnFailure};
use nnb_format::campaign::{RoundRecord, RoundStatus};
use nnb_format::{parse_timestamp, timestamp, FORMAT_VERSION};

/// How long a kept fleet's agents get to answer after a round before the fleet
/// counts as dead.
const ALIVE_TIMEOUT: Duration = Duration::from_secs(15);

/// A round late by less than this is on time (the scheduler's own slack).
const ON_TIME: Duration = Duration::from_secs(1);

/// What the lanes share: the journal of rounds and how the campaign stands.
struct Book<'c> {
    c: &'c mut CampaignRun,
    /// Rounds running now (their cost is committed).
    in_flight: usize,
    /// Why the campaign stops before its next round, once it does.
    stop: Option<RunStatus>,
    /// A failure of the controller itself (the journal could not be written).
    error: Option<ControllerError>,
    lanes: Vec<LaneOutcome>,
    notes: Vec<String>,
}

/// What every lane reads.
struct Ctx<'a, 'c> {
    book: &'a Mutex<Book<'c>>,
    exp: Experiment,
    kind: CampaignKind,
    lanes: Vec<String>,
    rounds: u32,
    interval: Option<Duration>,
    /// A round's plan estimate plus its launch (spatial, for the cap).
    round_held: Duration,
    providers: &'a ProviderFactory<'a>,
    opts: &'a RunOptions,
    /// The options of each round's run (silent while lanes run at once).
    round_opts: RunOptions,
    cancel: &'a Cancel,
}

/// How one round ended, for the lane that ran it.
enum Ended {
    /// Recorded; the lane goes on unless the campaign stops.
    Recorded,
    /// Not recorded: interrupted, or the campaign stops before it.
    Stopped,
}

/// Runs every round of `c` not recorded yet and says how the session went.
pub(super) async fn run_lanes(
    c: &mut CampaignRun,
    providers: &ProviderFactory<'_>,
    parallel: bool,
    opts: &RunOptions,
    cancel: &Cancel,
) -> Result<CampaignOutcome, ControllerError> {
    let exp = c.experiment.clone();
    let campaign = c.campaign.clone();
    let (estimate, _) = c.plan_of(&exp).estimate(exp.settle);
    let lanes: Vec<LaneOutcome> = campaign
        .zones
        .iter()
        .map(|z| LaneOutcome {
            lane: z.clone(),
            before: c
                .rounds
                .recorded()
                .values()
                .filter(|r| &r.lane == z)
                .count(),
            ..LaneOutcome::default()
        })
        .collect();
    let total_rounds = campaign.total_rounds();
    let (id, dir) = (c.id().to_string(), c.dir.path.clone());
    let book = Mutex::new(Book {
        c,
        in_flight: 0,
        stop: None,
        error: None,
        lanes,
        notes: Vec::new(),
    });
    let concurrent = parallel && campaign.zones.len() > 1;
    let ctx = Ctx {
        book: &book,
        exp: exp.clone(),
        kind: campaign.kind,
        lanes: campaign.zones.clone(),
        rounds: campaign.rounds,
        interval: campaign.interval,
        round_held: estimate + launch_allowance(&exp),
        providers,
        opts,
        round_opts: RunOptions {
            progress: if concurrent {
                Arc::new(Silent)
            } else {
                Arc::clone(&opts.progress)
            },
            ..opts.clone()
        },
        cancel,
    };
    let n = ctx.lanes.len();
    match (campaign.kind, concurrent) {
        (CampaignKind::Spatial, true) => {
            join_all((0..n).map(|l| ctx.spatial(ctx.slots(&[l])))).await;
        }
        (CampaignKind::Spatial, false) => {
            let all: Vec<usize> = (0..n).collect();
            ctx.spatial(ctx.slots(&all)).await;
        }
        (CampaignKind::Temporal, true) => {
            join_all((0..n).map(|l| ctx.temporal(l))).await;
        }
        (CampaignKind::Temporal, false) => {
            for l in 0..n {
                ctx.temporal(l).await;
            }
        }
    }
    drop(ctx);
    let book = book.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = book.error {
        return Err(e);
    }
    let recorded = book.c.rounds.recorded().len();
    let status = match book.stop {
        Some(s) => s,
        None if recorded == total_rounds => RunStatus::Completed,
        None => RunStatus::Interrupted,
    };
    Ok(CampaignOutcome {
        campaign_id: id,
        dir,
        status,
        total_rounds,
        recorded,
        lanes: book.lanes,
        notes: book.notes,
    })
}

impl<'c> Ctx<'_, 'c> {
    fn book(&self) -> MutexGuard<'_, Book<'c>> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `(lane, lane_round)` of the lanes `lanes`, in round index order.
    fn slots(&self, lanes: &[usize]) -> Vec<(usize, u32)> {
        (0..self.rounds)
            .flat_map(|k| lanes.iter().map(move |&l| (l, k)))
            .collect()
    }

    fn index(&self, lane: usize, lane_round: u32) -> u32 {
        lane_round * self.lanes.len() as u32 + lane as u32
    }

    fn is_recorded(&self, round: u32) -> bool {
        self.book().c.rounds.is_recorded(round)
    }

    /// Whether the campaign stops before its next round.
    fn stopping(&self) -> bool {
        self.cancel.is_set() || self.book().stop.is_some() || self.book().error.is_some()
    }

    /// Says `line` to the operator and keeps it for the outcome.
    fn note(&self, line: String) {
        self.opts.progress.note(&line);
        self.book().notes.push(line);
    }

    /// Before a round: whether the campaign's budget allows it (then it counts as
    /// in flight until [`Ctx::record`] or [`Ctx::drop_round`]). A round it does not
    /// allow stops the campaign.
    fn admit(&self, round: u32) -> bool {
        let mut book = self.book();
        if let Some(budget) = book.c.budget {
            let recs: Vec<&RoundRecord> = book.c.rounds.recorded().values().collect();
            let spent = held(self.kind, &recs);
            let next = next_held(&book.c.campaign, self.round_held, &recs);
            if let Err(why) = budget.allows_next(spent, book.in_flight, next) {
                book.stop.get_or_insert(RunStatus::CostCap);
                drop(book);
                self.note(format!("stopping before round {round}: {why}"));
                return false;
            }
        }
        book.in_flight += 1;
        true
    }

    /// A round admitted that ends unrecorded (interrupted).
    fn drop_round(&self) {
        let mut book = self.book();
        book.in_flight -= 1;
        book.stop.get_or_insert(RunStatus::Interrupted);
    }

    /// Appends `record` (of an admitted round when `admitted`) and counts it; a
    /// failed round under `on_failure = "abort"` stops the campaign.
    fn record(&self, record: RoundRecord, admitted: bool) -> Ended {
        let line = format!(
            "round {} ({}, {} of {}): {}{}",
            record.round,
            record.lane,
            record.lane_round + 1,
            self.rounds,
            status_name(record.status),
            record
                .error
                .as_deref()
                .map_or(String::new(), |e| format!(": {e}"))
        );
        let mut book = self.book();
        if admitted {
            book.in_flight -= 1;
        }
        let (lane, status) = (record.lane.clone(), record.status);
        let skipped = record
            .error
            .as_deref()
            .is_some_and(|e| e.starts_with(SKIPPED));
        if let Err(e) = book.c.rounds.append(record) {
            book.error.get_or_insert(e.into());
            return Ended::Stopped;
        }
        if let Some(l) = book.lanes.iter_mut().find(|l| l.lane == lane) {
            match status {
                RoundStatus::Completed => l.completed += 1,
                RoundStatus::Partial => l.partial += 1,
                RoundStatus::Failed => l.failed += 1,
            }
            l.skipped += usize::from(skipped);
        }
        if status != RoundStatus::Completed && self.exp.on_failure == OnFailure::Abort && !skipped {
            book.stop.get_or_insert(RunStatus::Aborted);
        }
        drop(book);
        self.opts.progress.note(&line);
        Ended::Recorded
    }

    /// A new run for round `lane_round` of lane `lane`, in its own directory.
    fn new_run(&self, lane: usize, lane_round: u32) -> Result<Run, ControllerError> {
        let book = self.book();
        let c = &*book.c;
        let exp = self.exp.in_zone(&self.lanes[lane]);
        let plan = c.plan_of(&exp);
        let run_id = c.round_run_id(self.index(lane, lane_round), &self.lanes[lane]);
        Run::create_named(
            &c.dir.path,
            &run_id,
            &c.manifest.experiment_file,
            &c.manifest.experiment_text,
            exp,
            plan,
        )
    }

    /// The provider of one fleet of lane `lane`, for the run `run_id`.
    fn provider(&self, lane: usize, run_id: &str) -> Result<Box<dyn Provider>, ControllerError> {
        let cx = ProviderContext {
            nnb_bin: self.opts.nnb_bin.clone(),
            run_id: run_id.to_string(),
            campaign_id: Some(self.book().c.id().to_string()),
        };
        Ok((self.providers)(&self.exp.in_zone(&self.lanes[lane]), cx)?)
    }

    /// Runs the spatial rounds `slots` one after another, each on a fleet of its own.
    async fn spatial(&self, slots: Vec<(usize, u32)>) {
        for (lane, k) in slots {
            let round = self.index(lane, k);
            if self.is_recorded(round) {
                continue;
            }
            if self.stopping() || !self.admit(round) {
                return;
            }
            let started_at = timestamp(SystemTime::now());
            let ran = match self.new_run(lane, k) {
                Ok(mut run) => {
                    let outcome = match self.provider(lane, &run.dir.run_id) {
                        Ok(mut p) => {
                            execute_with(&mut run, p.as_mut(), &self.round_opts, self.cancel).await
                        }
                        Err(e) => Err(e),
                    };
                    Some((run, outcome))
                }
                Err(e) => {
                    self.fail(e);
                    None
                }
            };
            let Some((run, outcome)) = ran else {
                self.drop_round();
                return;
            };
            let rec = self.round_record(lane, k, k, started_at, &run, outcome, Vec::new());
            match rec {
                Some(rec) => {
                    if let Ended::Stopped = self.record(rec, true) {
                        return;
                    }
                }
                None => {
                    self.drop_round();
                    return;
                }
            }
        }
    }

    /// Runs the temporal rounds of lane `lane` on the fleet it keeps, a round every
    /// interval from its round 0's start, and shuts the fleet down at the end.
    async fn temporal(&self, lane: usize) {
        let every = self.interval.unwrap_or(Duration::from_secs(1));
        let (mut generation, mut anchor, mut notes) = {
            let book = self.book();
            let mine: Vec<&RoundRecord> = book
                .c
                .rounds
                .recorded()
                .values()
                .filter(|r| r.lane == self.lanes[lane])
                .collect();
            let generation = mine.iter().map(|r| r.generation + 1).max().unwrap_or(0);
            // The schedule counts from round 0's start, kept across resumes.
            let anchor = mine
                .iter()
                .find(|r| r.lane_round == 0)
                .and_then(|r| parse_timestamp(&r.started_at))
                .map(|at| {
                    let ago = SystemTime::now().duration_since(at).unwrap_or_default();
                    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
                });
            let notes = if generation > 0 {
                vec![format!(
                    "a new fleet (generation {generation}): the controller that kept the \
                     lane's last one ended"
                )]
            } else {
                Vec::new()
            };
            (generation, anchor, notes)
        };
        let mut fleet: Option<(Box<dyn Provider>, Option<HeldFleet>)> = None;
        let mut k = 0;
        while k < self.rounds {
            if self.is_recorded(self.index(lane, k)) {
                k += 1;
                continue;
            }
            if self.stopping() {
                break;
            }
            let now = Instant::now();
            let anchor = *anchor.get_or_insert(now);
            let due = anchor + every.saturating_mul(k);
            if now < due {
                tokio::select! {
                    () = tokio::time::sleep_until(due) => {}
                    () = self.cancel.wait() => break,
                }
            } else {
                // The latest round whose time has come runs now; the earlier ones
                // whose times passed are skipped (one catch-up).
                let passed = ((now - due).as_nanos() / every.as_nanos().max(1)) as u32;
                let latest = (k + passed).min(self.rounds - 1);
                let mut ended = false;
                while k < latest {
                    let round = self.index(lane, k);
                    let at = timestamp(SystemTime::now());
                    let rec = RoundRecord {
                        format_version: FORMAT_VERSION,
                        round,
                        lane: self.lanes[lane].clone(),
                        lane_round: k,
                        run_id: self.book().c.round_run_id(round, &self.lanes[lane]),
                        status: RoundStatus::Failed,
                        started_at: at.clone(),
                        finished_at: at,
                        generation,
                        instances: Vec::new(),
                        error: Some(format!(
                            "{SKIPPED} its time passed (the controller was down or a round \
                             overran); round {} is measured late instead",
                            self.index(lane, latest)
                        )),
                    };
                    if !self.is_recorded(round) {
                        if let Ended::Stopped = self.record(rec, false) {
                            ended = true;
                            break;
                        }
                    }
                    k += 1;
                }
                if ended {
                    break;
                }
                let late =
                    Instant::now().saturating_duration_since(anchor + every.saturating_mul(k));
                if late >= ON_TIME {
                    notes.push(format!("started {} late", nnb_units::format_duration(late)));
                }
            }
            if self.stopping() || !self.admit(self.index(lane, k)) {
                break;
            }
            let started_at = timestamp(SystemTime::now());
            let mut run = match self.new_run(lane, k) {
                Ok(run) => run,
                Err(e) => {
                    self.fail(e);
                    self.drop_round();
                    break;
                }
            };
            let outcome = match &mut fleet {
                Some((p, held)) => {
                    execute_on_fleet(&mut run, p.as_mut(), held, &self.round_opts, self.cancel)
                        .await
                }
                None => match self.provider(lane, &run.dir.run_id) {
                    Ok(mut p) => {
                        let mut held = None;
                        let o = execute_on_fleet(
                            &mut run,
                            p.as_mut(),
                            &mut held,
                            &self.round_opts,
                            self.cancel,
                        )
                        .await;
                        fleet = Some((p, held));
                        o
                    }
                    Err(e) => Err(e),
                },
            };
            let said = std::mem::take(&mut notes);
            let Some(rec) = self.round_record(lane, k, generation, started_at, &run, outcome, said)
            else {
                self.drop_round();
                break;
            };
            if let Ended::Stopped = self.record(rec, true) {
                break;
            }
            k += 1;
            // A fleet that no longer answers is replaced before the next round.
            if let Some((p, held)) = &mut fleet {
                match held {
                    Some(h) => {
                        if let Err(why) = alive(p.as_ref(), &h.fleet).await {
                            let line = format!(
                                "the fleet of generation {generation} stopped answering ({why}); \
                                 relaunched as generation {}",
                                generation + 1
                            );
                            self.note(format!("lane {}: {line}", self.lanes[lane]));
                            notes.push(line);
                            shut_down(p.as_mut(), held.take()).await;
                            fleet = None;
                            generation += 1;
                        }
                    }
                    // Its launch failed: the next round asks a new provider.
                    None => fleet = None,
                }
            }
        }
        if let Some((mut p, held)) = fleet {
            shut_down(p.as_mut(), held).await;
        }
    }

    /// A controller failure (results not writable): the campaign stops with it.
    fn fail(&self, e: ControllerError) {
        self.book().error.get_or_insert(e);
    }

    /// The record of a round that ran as `run` with `outcome`, with the lane's
    /// `notes` (late, relaunched); `None` when it is not to be recorded (interrupted,
    /// or the controller failed).
    #[allow(clippy::too_many_arguments)]
    fn round_record(
        &self,
        lane: usize,
        lane_round: u32,
        generation: u32,
        started_at: String,
        run: &Run,
        outcome: Result<RunOutcome, ControllerError>,
        mut notes: Vec<String>,
    ) -> Option<RoundRecord> {
        let status = match outcome {
            Ok(o) if o.status == RunStatus::Interrupted => return None,
            Err(_) if self.cancel.is_set() => return None,
            Err(e @ ControllerError::Results(_)) => {
                self.fail(e);
                return None;
            }
            Ok(o) => {
                match o.status {
                    RunStatus::Aborted => {
                        notes.push("aborted after a failed step (on_failure = \"abort\")".into())
                    }
                    RunStatus::CostCap => {
                        notes.push("stopped before passing max_cost_usd".into());
                        self.book().stop.get_or_insert(RunStatus::CostCap);
                    }
                    RunStatus::Completed | RunStatus::Interrupted => {}
                }
                if o.failed > 0 {
                    notes.push(format!("{} of {} steps failed", o.failed, o.planned));
                }
                round_status(&o)
            }
            Err(e) => {
                notes.push(e.to_string());
                RoundStatus::Failed
            }
        };
        Some(RoundRecord {
            format_version: FORMAT_VERSION,
            round: self.index(lane, lane_round),
            lane: self.lanes[lane].clone(),
            lane_round,
            run_id: run.dir.run_id.clone(),
            status,
            started_at,
            finished_at: timestamp(SystemTime::now()),
            generation,
            instances: placed_instances(run.manifest.sessions.last()),
            error: (!notes.is_empty()).then(|| notes.join("; ")),
        })
    }
}

/// How a skipped round's error starts.
pub(super) const SKIPPED: &str = "skipped:";

fn status_name(s: RoundStatus) -> &'static str {
    match s {
        RoundStatus::Completed => "completed",
        RoundStatus::Partial => "partial",
        RoundStatus::Failed => "failed",
    }
}

/// `Ok` when every agent of `fleet` answers its health within [`ALIVE_TIMEOUT`];
/// else the first that did not, and why.
async fn alive(provider: &dyn Provider, fleet: &Fleet) -> Result<(), String> {
    let checks = fleet.all().map(|t| {
        let agent = provider.agent(t);
        let name = t.name.clone();
        async move {
            match tokio::time::timeout(ALIVE_TIMEOUT, agent.health()).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("{name}: {e}")),
                Err(_) => Err(format!("{name}: no answer within {ALIVE_TIMEOUT:?}")),
            }
        }
    });
    join_all(checks).await.into_iter().collect()
}

/// Shuts a kept fleet down (a warning when that fails: its resources are tagged for
/// the sweep).
async fn shut_down(provider: &mut dyn Provider, held: Option<HeldFleet>) {
    if let Some(h) = held {
        if let Err(e) = provider.shutdown(h.fleet).await {
            tracing::warn!("shutting a campaign lane's fleet down: {e}");
        }
    }
}
