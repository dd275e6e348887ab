//! `nnb run` of a campaign file (one with a `[campaign]` table), and `nnb run
//! --resume CAMPAIGN_ID`: the rounds run as `nnb_controller::campaign` says, and the
//! end is a summary per lane with the directory to give `nnb analyze`.
//!
//! The cost consent is the whole campaign's: `--yes`, or the spec's `max_cost_usd`
//! at or above the estimate of every round's fleet-hours
//! ([`CampaignEstimate`]); the same `max_cost_usd` then caps the campaign while it
//! runs (the rounds so far and the next one).

use std::io::Write;
use std::path::Path;

use nnb_controller::budget::{usd, Consent};
use nnb_controller::campaign::{
    execute_campaign_default, CampaignBudget, CampaignEstimate, CampaignOutcome, CampaignRun,
    FleetPrice,
};
use nnb_controller::provider::{Preflight, Provider};
use nnb_controller::{Cancel, RunOptions, RunStatus};
use nnb_experiment::plan::Plan;
use nnb_experiment::Experiment;
use serde_json::json;

use super::{admit, invalid, provider_for, upload_dir, RunArgs};
use crate::exit::{usage, FailedSteps, Interrupted};
use crate::out::Out;
use crate::table::{right, table};

/// The estimate of `exp`'s campaign (it has one), one round of which is `plan`,
/// priced as the provider's `preflight` prices one round's fleet.
pub(super) fn estimate(
    exp: &Experiment,
    plan: &Plan,
    provider: &dyn Provider,
    preflight: &Preflight,
) -> Option<CampaignEstimate> {
    let campaign = exp.campaign.as_ref()?;
    let (round, _) = plan.estimate(exp.settle);
    let price = preflight.resources.as_ref().and_then(|r| {
        r.hourly_usd.map(|hourly_usd| FleetPrice {
            hourly_usd,
            instances: r.instances,
        })
    });
    Some(CampaignEstimate::new(
        exp,
        campaign,
        round,
        provider.concurrent_fleets(),
        price,
    ))
}

/// Prints the campaign's table below the one-round plan of a dry run.
pub(super) fn print_estimate(out: &mut Out, e: &CampaignEstimate) -> std::io::Result<()> {
    // Hours past two (a temporal campaign's days read badly in minutes).
    let fmt = |ms: u64| match ms {
        ms if ms >= 2 * 3_600_000 => format!("{:.1} h", ms as f64 / 3_600_000.0),
        ms => nnb_units::format_duration(std::time::Duration::from_millis(ms)),
    };
    writeln!(
        out,
        "campaign: {} rounds ({} per zone x {} zones), each round as planned above",
        e.total_rounds,
        e.rounds_per_zone,
        e.zones.len()
    )?;
    let mut t = table(["campaign", "estimate"]);
    let mut row = |k: &str, v: String| {
        t.add_row(vec![k.to_string().into(), right(v)]);
    };
    row("kind", e.kind.to_string());
    row("zones", e.zones.join(", "));
    row("rounds per zone", e.rounds_per_zone.to_string());
    row("total rounds", e.total_rounds.to_string());
    row("round (plan estimate)", fmt(e.round_ms));
    row("launch per fleet", fmt(e.launch_ms));
    if let Some(i) = e.interval_ms {
        row("interval", fmt(i));
    }
    let lanes = if e.lanes_in_parallel {
        "zones in parallel"
    } else {
        "zones one after another"
    };
    row("wall time", format!("{} ({lanes})", fmt(e.wall_ms)));
    row("fleet-hours", format!("{:.2}", e.fleet_hours));
    if let (Some(n), Some(h)) = (e.instances, e.instance_hours) {
        row("instance-hours", format!("{h:.2} ({n} per fleet)"));
    }
    if let (Some(hourly), Some(total)) = (e.hourly_usd, e.usd) {
        row(
            "estimated cost",
            format!("{} ({} per fleet-hour)", usd(total), usd(hourly)),
        );
    }
    writeln!(out, "{t}")
}

/// Before a campaign starts (or resumes): one round must pass the provider's
/// checks, and the whole campaign's estimated cost must be accepted (`--yes`, or
/// `max_cost_usd` covering it). Returns the running cap, when the file sets one and
/// the provider prices the fleet.
fn admit_campaign(
    provider: &dyn Provider,
    exp: &Experiment,
    plan: &Plan,
    yes: bool,
) -> anyhow::Result<Option<CampaignBudget>> {
    // One round's checks; its cost is consented below, for the whole campaign.
    let preflight = admit(provider, exp, plan, true)?;
    let Some(e) = estimate(exp, plan, provider, &preflight) else {
        return Ok(None);
    };
    let (Some(total), Some(hourly)) = (e.usd, e.hourly_usd) else {
        return Ok(None);
    };
    let max_usd = match &exp.provider {
        nnb_experiment::Provider::Aws(a) => a.max_cost_usd,
        nnb_experiment::Provider::Local | nnb_experiment::Provider::Static { .. } => None,
    };
    let what = format!(
        "the campaign's {} rounds hold fleets for about {:.2} h: an estimated {}",
        e.total_rounds,
        e.fleet_hours,
        usd(total)
    );
    match Consent::of(total, max_usd, yes) {
        Consent::Given => eprintln!("{what}"),
        Consent::OverCap { max_usd } => {
            return Err(usage(format!(
                "{what}, above max_cost_usd = {max_usd:.2}: raise it, or run fewer rounds"
            )))
        }
        Consent::Missing => {
            return Err(usage(format!(
                "{what}: accept it with --yes, or set max_cost_usd in [provider] (it then \
                 also caps the campaign while it runs)"
            )))
        }
    }
    Ok(max_usd.map(|max_usd| CampaignBudget {
        usd_per_hour: hourly,
        max_usd,
    }))
}

/// `nnb run FILE` of a campaign: creates it under `--results` and runs it.
#[allow(clippy::too_many_arguments)]
pub(super) fn start(
    args: &RunArgs,
    out: &mut Out,
    rt: &tokio::runtime::Runtime,
    opts: &RunOptions,
    (name, text): (&str, &str),
    exp: Experiment,
    plan: &Plan,
    host_cpus: usize,
) -> anyhow::Result<()> {
    let provider = provider_for(&exp)?;
    let budget = admit_campaign(provider.as_ref(), &exp, plan, args.yes)?;
    let mut c = CampaignRun::create(&args.results, name, text, exp, host_cpus)?;
    c.budget = budget;
    go(args, out, rt, opts, &mut c, provider.as_ref())
}

/// `nnb run --resume CAMPAIGN_ID`: goes on at the rounds not recorded.
pub(super) fn resume(
    args: &RunArgs,
    out: &mut Out,
    rt: &tokio::runtime::Runtime,
    opts: &RunOptions,
    id: &str,
    host_cpus: usize,
) -> anyhow::Result<()> {
    let mut c = CampaignRun::open(&args.results, id, host_cpus).map_err(|e| match e {
        nnb_controller::ControllerError::Experiment(e) => invalid(e),
        other => anyhow::Error::new(other).context(format!("cannot resume campaign {id}")),
    })?;
    let provider = provider_for(&c.experiment)?;
    let plan = c.plan_of(&c.experiment);
    c.budget = admit_campaign(provider.as_ref(), &c.experiment, &plan, args.yes)?;
    go(args, out, rt, opts, &mut c, provider.as_ref())
}

/// Runs the campaign, prints its summary, uploads its directory (`results_s3`) and
/// says how it ended (the exit code).
fn go(
    args: &RunArgs,
    out: &mut Out,
    rt: &tokio::runtime::Runtime,
    opts: &RunOptions,
    c: &mut CampaignRun,
    provider: &dyn Provider,
) -> anyhow::Result<()> {
    let outcome = rt.block_on(async {
        let cancel = Cancel::on_signals();
        execute_campaign_default(c, opts, &cancel).await
    })?;
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&json!({ "campaign": outcome }))?
        )?;
    } else {
        print_summary(out, &c.experiment, &outcome)?;
    }
    out.flush()?;
    upload_dir(rt, out, provider, &c.experiment, &outcome.dir)?;
    ended(&args.results, &outcome)
}

/// The summary: rounds per lane, the directory and how to tabulate it.
fn print_summary(out: &mut Out, exp: &Experiment, o: &CampaignOutcome) -> std::io::Result<()> {
    writeln!(
        out,
        "campaign {} of {} ({}): {} of {} rounds recorded",
        o.campaign_id,
        exp.name,
        exp.scenario.kind(),
        o.recorded,
        o.total_rounds
    )?;
    let mut t = table([
        "zone",
        "before",
        "completed",
        "partial",
        "failed",
        "of which skipped",
    ]);
    for l in &o.lanes {
        t.add_row(vec![
            l.lane.clone().into(),
            right(l.before),
            right(l.completed),
            right(l.partial),
            right(l.failed),
            right(l.skipped),
        ]);
    }
    writeln!(out, "{t}")?;
    writeln!(out, "results: {}", o.dir.display())?;
    writeln!(
        out,
        "per-round and per-pair tables, CDFs: nnb analyze {}",
        o.dir.display()
    )
}

/// How a campaign session ends, as an exit code: failed or partial rounds exit 3
/// (what was measured is kept), an interrupted one 130, a cost cap 1.
fn ended(results: &Path, o: &CampaignOutcome) -> anyhow::Result<()> {
    let resume = format!(
        "nnb run --results {} --resume {}",
        results.display(),
        o.campaign_id
    );
    match o.status {
        RunStatus::Completed if o.failed_rounds() > 0 => Err(FailedSteps(format!(
            "{} round(s) failed or partial; what was measured is in {}",
            o.failed_rounds(),
            o.dir.display()
        ))
        .into()),
        RunStatus::Completed => Ok(()),
        RunStatus::Interrupted => Err(Interrupted(format!(
            "interrupted; the rounds recorded are in {}. Continue with: {resume}",
            o.dir.display()
        ))
        .into()),
        RunStatus::Aborted => Err(FailedSteps(format!(
            "aborted after a failed round (on_failure = \"abort\"); results in {}. \
             Continue with: {resume}",
            o.dir.display()
        ))
        .into()),
        RunStatus::CostCap => anyhow::bail!(
            "stopped before a round that would pass max_cost_usd; the rounds recorded are in \
             {}. Raise the cap and continue with: {resume}",
            o.dir.display()
        ),
    }
}
