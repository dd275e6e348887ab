//! `nnb run`: run an experiment file (or resume a run) and summarize it.
//!
//! The file is checked first (errors point at its line and column, exit 2), also
//! against this machine (its CPUs, memory and disks, for local tenants);
//! `--dry-run` prints the plan: the steps in order with what each tenant runs, where
//! the tenants sit, and the estimated duration. A real run writes
//! `<results>/<run-id>/` (manifest, samples journal, HDR logs), shows a progress bar
//! on a terminal, and ends with the test tenant's degradation per level as `nnb
//! analyze` tabulates it, read back from the run directory (an isolation matrix's
//! isolation table); a build without the `analysis` feature says to run `nnb analyze`.
//!
//! The experiment's provider checks the run before anything is created and says
//! what the dry run shows of it (the provider registry,
//! `nnb_controller::provider::for_experiment`, is the one place that knows the
//! kinds): an aws experiment's tenants must fit the dedicated host, and its
//! estimated cost must be accepted with `--yes` or covered by `max_cost_usd` (else
//! exit 2); its dry run also lists the cloud resources and the cost. This module
//! only shows what the provider says. After the run, the results go to
//! `results_s3` when the file names one. A run that ends with failed steps exits
//! with 3 (its data kept), so that scripts do not take it for a success.
//!
//! A file with a `[campaign]` runs as a campaign of rounds ([`campaign`]), and
//! `--resume` takes a campaign id as well as a run id; its dry run adds the
//! campaign's rounds, time and cost to the one-round plan.

mod campaign;

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use nnb_burn::topology::{format_list, Topology};
use nnb_controller::provider::{
    self, HostCpus, Placement, Preflight, Provider, ProviderContext, ProviderError, Verdict,
};
use nnb_controller::{Cancel, Run, RunOptions, RunOutcome, RunStatus};
use nnb_experiment::plan::{self, Assignment, Plan};
use nnb_experiment::{Experiment, ExperimentError};
use serde_json::json;

use crate::exit::{usage, FailedSteps, Interrupted};
use crate::out::Out;
use crate::table::{right, table};

/// Arguments of `nnb run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Experiment file (TOML; see `nnb schema`). Not needed with --resume.
    #[arg(required_unless_present = "resume")]
    pub experiment: Option<PathBuf>,
    /// Print the plan (steps, tenants and their CPUs, estimated duration; for aws
    /// the resources, the capacity check and the estimated cost); run nothing.
    #[arg(long, conflicts_with = "resume")]
    pub dry_run: bool,
    /// Accept the estimated cost of an aws run (else `max_cost_usd` in the file must
    /// cover it).
    #[arg(long)]
    pub yes: bool,
    /// Directory holding the runs' result directories.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results: PathBuf,
    /// Continue run RUN_ID under --results: its completed steps are kept and the rest
    /// measured, with the experiment as stored in the run's manifest. A campaign id
    /// continues the campaign at its rounds not recorded yet.
    #[arg(long, value_name = "RUN_ID", conflicts_with = "experiment")]
    pub resume: Option<String>,
    /// No progress bar or per-step lines (warnings and failed attempts still show).
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the plan or the outcome as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Read the CPU topology under this root instead of `/` (checks and --dry-run
    /// placement; for testing against a sysfs fixture).
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,
}

/// Runs `nnb run`.
pub(crate) fn run(args: RunArgs, out: &mut Out) -> anyhow::Result<()> {
    let root = args
        .sysfs_root
        .clone()
        .unwrap_or_else(|| PathBuf::from("/"));
    let topo = Topology::read(&root)
        .with_context(|| format!("reading the CPU topology under {}", root.display()))?;
    let host_cpus = topo.online().count();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let opts = RunOptions {
        progress: crate::progress::for_run(args.quiet),
        nnb_bin: None,
        command: std::env::args().collect(),
    };
    let (mut run, provider) = match (&args.resume, &args.experiment) {
        (Some(id), _) if nnb_controller::campaign::is_campaign(&args.results, id) => {
            return campaign::resume(&args, out, &rt, &opts, id, host_cpus);
        }
        (Some(id), _) => {
            let run = Run::open(&args.results, id, host_cpus).map_err(|e| match e {
                nnb_controller::ControllerError::Experiment(e) => invalid(e),
                other => anyhow::Error::new(other).context(format!("cannot resume run {id}")),
            })?;
            let provider = provider_for(&run.experiment)?;
            admit(provider.as_ref(), &run.experiment, &run.plan, args.yes)?;
            (run, provider)
        }
        (None, Some(file)) => {
            let text = nnb_experiment::read(file).map_err(invalid)?;
            let name = file.display().to_string();
            let host = nnb_experiment::Host::this_machine(host_cpus);
            let exp = nnb_experiment::parse_on(&name, &text, &host).map_err(invalid)?;
            let plan = plan::expand(&exp, exp.provider.host_vcpus().unwrap_or(host_cpus));
            let provider = provider_for(&exp)?;
            if args.dry_run {
                let allowed = usable_cpus(&topo, args.sysfs_root.is_some());
                let host = HostCpus {
                    topology: &topo,
                    allowed: &allowed,
                };
                return dry_run(out, &exp, &plan, provider.as_ref(), &host, args.json);
            }
            if exp.campaign.is_some() {
                return campaign::start(
                    &args,
                    out,
                    &rt,
                    &opts,
                    (&name, &text),
                    exp,
                    &plan,
                    host_cpus,
                );
            }
            admit(provider.as_ref(), &exp, &plan, args.yes)?;
            let run = Run::create(&args.results, &name, &text, exp, plan)?;
            (run, provider)
        }
        (None, None) => return Err(usage("give an experiment file or --resume RUN_ID")),
    };
    let outcome = rt.block_on(async {
        let cancel = Cancel::on_signals();
        nnb_controller::execute(&mut run, &opts, &cancel).await
    })?;
    let summary = summary(&outcome.dir);
    if args.json {
        let json = json!({ "outcome": outcome, "summary": summary.json });
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        print_summary(out, &run.experiment, &summary, &outcome)?;
    }
    out.flush()?;
    upload_dir(&rt, out, provider.as_ref(), &run.experiment, &outcome.dir)?;
    match outcome.status {
        RunStatus::Completed if outcome.failed > 0 => Err(FailedSteps(format!(
            "{} of {} steps failed; what was measured is in {}",
            outcome.failed,
            outcome.planned - outcome.skipped,
            outcome.dir.display()
        ))
        .into()),
        RunStatus::Completed => Ok(()),
        RunStatus::Interrupted => Err(Interrupted(format!(
            "interrupted; what was measured is in {}. Continue with: nnb run --results {} --resume {}",
            outcome.dir.display(),
            args.results.display(),
            outcome.run_id
        ))
        .into()),
        RunStatus::Aborted => Err(FailedSteps(format!(
            "aborted after a failed step (on_failure = \"abort\"); results in {}",
            outcome.dir.display()
        ))
        .into()),
        RunStatus::CostCap => anyhow::bail!(
            "stopped before passing max_cost_usd (the cloud resources are torn down); what was \
             measured is in {}. A resume is a new session with a budget of its own: \
             nnb run --results {} --resume {}",
            outcome.dir.display(),
            args.results.display(),
            outcome.run_id
        ),
    }
}

/// The provider of `exp`'s kind, for its checks before the run and the upload after
/// it (the run launches its own). A kind this build lacks is the user's to fix.
fn provider_for(exp: &Experiment) -> anyhow::Result<Box<dyn Provider>> {
    provider::for_experiment(exp, ProviderContext::default()).map_err(provider_error)
}

/// A provider's error, as a usage error (exit 2) when this build lacks what the
/// experiment file asks for.
fn provider_error(e: ProviderError) -> anyhow::Error {
    match e {
        e @ ProviderError::NoAwsFeature => usage(e.to_string()),
        e => e.into(),
    }
}

/// Before a real run (or a resume), nothing created yet: the provider's preflight
/// must let it start (a plan that does not fit, or a cost not accepted, is a usage
/// error, exit 2); what it says on the way (the estimated cost, the burst credits
/// the plan may outlast) goes to stderr. Returns the preflight (a campaign prices
/// its rounds with it).
fn admit(
    provider: &dyn Provider,
    exp: &Experiment,
    plan: &Plan,
    yes: bool,
) -> anyhow::Result<Preflight> {
    let preflight = provider
        .preflight(exp, plan, yes)
        .context("building the launch plan")?;
    match &preflight.verdict {
        Verdict::Go { notes } => {
            for note in notes {
                eprintln!("{note}");
            }
            for w in credit_warnings(exp, plan) {
                eprintln!("warning: {w}");
            }
            Ok(preflight)
        }
        Verdict::Unfit { refusal, .. } | Verdict::Refused(refusal) => Err(usage(refusal.clone())),
    }
}

/// The plan's warnings about burst credits (aws, [`nnb_experiment::credits`]): its
/// instances load for the plan's estimate plus the changes of the tenants present,
/// each [`provider::aws::LEVEL_CHANGE`] (the cost estimate's reckoning too).
fn credit_warnings(exp: &Experiment, plan: &Plan) -> Vec<String> {
    let (estimate, _) = plan.estimate(exp.settle);
    let changes = provider::aws::level_changes(plan, &exp.tenant_specs());
    let changes =
        provider::aws::LEVEL_CHANGE.saturating_mul(u32::try_from(changes).unwrap_or(u32::MAX));
    nnb_experiment::credits::credit_warnings(exp, plan, estimate + changes)
}

/// Uploads the run's (or campaign's) directory `dir` to the experiment's
/// `results_s3`, if it names one (also after an interrupted or aborted run: what
/// was measured is kept).
fn upload_dir(
    rt: &tokio::runtime::Runtime,
    out: &mut Out,
    provider: &dyn Provider,
    exp: &Experiment,
    dir: &Path,
) -> anyhow::Result<()> {
    let Some(dest) = &exp.results_s3 else {
        return Ok(());
    };
    let report = rt
        .block_on(provider.upload_results(dir, dest))
        .map_err(|e| match e {
            e @ ProviderError::NoAwsFeature => provider_error(e),
            e => anyhow::Error::new(e).context(format!(
                "the results are safe in {}; upload them later with the AWS CLI",
                dir.display()
            )),
        })?;
    writeln!(
        out,
        "uploaded {} files ({} bytes, checksums verified) to {}",
        report.files, report.bytes, report.url
    )?;
    Ok(())
}

/// An invalid experiment is the user's to fix: the located message goes to stderr
/// as a compiler would print it, and the run exits with 2.
fn invalid(e: ExperimentError) -> anyhow::Error {
    match e {
        ExperimentError::Invalid(d) => {
            eprintln!("{d}");
            usage(format!("invalid experiment file {}", d.file))
        }
        other @ (ExperimentError::Read { .. } | ExperimentError::TooLarge { .. }) => {
            usage(other.to_string())
        }
    }
}

/// "2 x busy fpadd x1" for a list of assignments, grouped by what they run.
fn summarize_jobs(list: &[Assignment], by_tenant: bool) -> String {
    if list.is_empty() {
        return "-".to_string();
    }
    if by_tenant {
        // Neighbors in a row running the same job read as one entry:
        // "neighbor-1..neighbor-5 (5): load 4.80 Gbit/s to @sink for 1500 ms".
        let mut runs: Vec<(&str, &str, usize, String)> = Vec::new();
        for a in list {
            let d = a.job.describe();
            match runs.last_mut() {
                Some((_, last, n, prev)) if *prev == d => {
                    *last = &a.tenant;
                    *n += 1;
                }
                _ => runs.push((&a.tenant, &a.tenant, 1, d)),
            }
        }
        return runs
            .into_iter()
            .map(|(first, last, n, d)| match n {
                1 => format!("{first}: {d}"),
                _ => format!("{first}..{last} ({n}): {d}"),
            })
            .collect::<Vec<_>>()
            .join("; ");
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for a in list {
        *counts.entry(a.job.describe()).or_insert(0) += 1;
    }
    counts
        .into_iter()
        .map(|(d, n)| format!("{n} x {d}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The online CPUs of `topo` that tenants may use: those of this process'
/// affinity, or every one of a `fixture` (a `--sysfs-root` topology).
fn usable_cpus(topo: &Topology, fixture: bool) -> Vec<usize> {
    let online = topo.online().map(|c| c.id);
    if fixture {
        online.collect()
    } else {
        let mine = nnb_burn::placement::allowed_cpus();
        online.filter(|c| mine.contains(c)).collect()
    }
}

/// Prints the plan without running anything: the steps, where the provider would
/// put the tenants, and what a real run would create and cost.
fn dry_run(
    out: &mut Out,
    exp: &Experiment,
    plan: &Plan,
    provider: &dyn Provider,
    host: &HostCpus<'_>,
    as_json: bool,
) -> anyhow::Result<()> {
    let specs = exp.tenant_specs();
    let Placement {
        cpus: sets,
        elsewhere: placed,
        warnings,
    } = provider.placement(&specs, host)?;
    let (estimate, unknown) = plan.estimate(exp.settle);
    let mut warnings = warnings;
    warnings.extend(credit_warnings(exp, plan));
    if as_json {
        let tenants: Vec<_> = specs
            .iter()
            .zip(&sets)
            .map(
                |(s, cpus)| json!({"name": s.name, "role": s.role, "vcpus": s.vcpus, "cpus": cpus}),
            )
            .collect();
        let preflight = dry_preflight(provider, exp, plan)?;
        let campaign = campaign::estimate(exp, plan, provider, &preflight);
        let cloud = preflight
            .resources
            .as_ref()
            .map_or(serde_json::Value::Null, |r| r.json.clone());
        let json = json!({
            "experiment": exp,
            "tenants": tenants,
            "warnings": warnings,
            "steps": plan.steps,
            "servers": plan.serving(exp.servers),
            "estimate_ms": estimate.as_millis() as u64,
            "steps_without_estimate": unknown,
            "cloud": cloud,
            "campaign": campaign,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
        return refuse_unfit(&preflight);
    }
    writeln!(
        out,
        "experiment {} ({}), {} tenants, provider {}",
        exp.name,
        exp.scenario.kind(),
        specs.len(),
        exp.provider.kind()
    )?;
    let mut t = table(["tenant", "role", "vCPUs", "CPUs"]);
    for (s, cpus) in specs.iter().zip(&sets) {
        t.add_row(vec![
            s.name.clone().into(),
            s.role.name().into(),
            right(s.vcpus),
            cpus.as_ref()
                .map_or(placed.clone(), |c| format_list(c))
                .into(),
        ]);
    }
    writeln!(out, "{t}")?;
    for w in &warnings {
        writeln!(out, "warning: {w}")?;
    }
    if let nnb_experiment::plan::Serving::Mirrored(clients) = plan.serving(exp.servers) {
        let pair = |c: &String| format!("{} serves {c}", nnb_experiment::tenant::server_name(c));
        let pairs = match clients.as_slice() {
            [first, .., last] if clients.len() > 3 => {
                format!(
                    "{} .. {} ({} pairs)",
                    pair(first),
                    pair(last),
                    clients.len()
                )
            }
            _ => clients.iter().map(pair).collect::<Vec<_>>().join(", "),
        };
        writeln!(out, "mirrored servers: {pairs}")?;
    }
    let mut t = table(["#", "step", "present", "background", "measured", "estimate"]);
    for (i, s) in plan.steps.iter().enumerate() {
        let present = if s.present.len() == specs.len() {
            "all".to_string()
        } else {
            format!("{} of {}", s.present.len(), specs.len())
        };
        t.add_row(vec![
            right(i + 1),
            s.id.clone().into(),
            right(present),
            summarize_jobs(&s.background, false).into(),
            summarize_jobs(&s.measure, true).into(),
            right(
                s.estimate
                    .map_or("?".to_string(), nnb_units::format_duration),
            ),
        ]);
    }
    writeln!(out, "{t}")?;
    let unknown_note = if unknown > 0 {
        format!(" + {unknown} fixed-work runs of unknown length")
    } else {
        String::new()
    };
    writeln!(
        out,
        "{} steps, {} changes of the tenants present or of their background (settle {}), \
         estimated {}{unknown_note}",
        plan.steps.len(),
        plan.changes(),
        nnb_units::format_duration(exp.settle),
        nnb_units::format_duration(estimate)
    )?;
    let preflight = dry_preflight(provider, exp, plan)?;
    if let Some(r) = &preflight.resources {
        writeln!(out, "{}", r.heading)?;
        let mut t = table(["resource", "what", "count"]);
        for row in &r.rows {
            t.add_row(vec![
                row.resource.clone().into(),
                row.what.clone().into(),
                right(row.count),
            ]);
        }
        writeln!(out, "{t}")?;
        for note in &r.notes {
            writeln!(out, "{note}")?;
        }
    }
    if let Some(e) = campaign::estimate(exp, plan, provider, &preflight) {
        campaign::print_estimate(out, &e)?;
    }
    refuse_unfit(&preflight)
}

/// The provider's preflight for a dry run: the resources and the capacity check
/// (a dry run needs no consent to the cost).
fn dry_preflight(
    provider: &dyn Provider,
    exp: &Experiment,
    plan: &Plan,
) -> anyhow::Result<Preflight> {
    provider
        .preflight(exp, plan, false)
        .context("building the launch plan")
}

/// A dry run of a plan that cannot run where the provider would put it ends with
/// exit 2, after showing why.
fn refuse_unfit(preflight: &Preflight) -> anyhow::Result<()> {
    match &preflight.verdict {
        Verdict::Unfit {
            dry_run_refusal, ..
        } => Err(usage(dry_run_refusal.clone())),
        Verdict::Go { .. } | Verdict::Refused(_) => Ok(()),
    }
}

/// The end-of-run summary: the text printed and the JSON of `--json`'s `summary`.
struct Summary {
    /// For people: a table, or a line saying why there is none.
    text: String,
    /// The table as `nnb analyze --format json` writes one; null without one.
    json: serde_json::Value,
}

/// The summary of the run in `dir`, read back from it as `nnb analyze` reads it: the
/// analysis crate's degradation of the test tenant per level, an isolation
/// matrix's isolation table (over technologies, them side by side), or a pair
/// suite's per-pair table. A run that cannot be analysed keeps its outcome: the
/// summary then says why and points at `nnb analyze`.
#[cfg(feature = "analysis")]
fn summary(dir: &Path) -> Summary {
    use nnb_analysis::tables::{degradation, isolation, technologies};
    use nnb_analysis::wang_ng::wang_ng;
    let table = nnb_analysis::read::read_run(dir)
        .map_err(anyhow::Error::from)
        .and_then(|run| {
            // A matrix over technologies: them side by side, never pooled.
            if let Some(t) = technologies(&run)? {
                return Ok(Some(t.table()));
            }
            Ok(match degradation(&run)? {
                Some(d) => Some(d.table()),
                None => match isolation(&run)? {
                    Some(i) => Some(i.table()),
                    // A pair suite (Wang & Ng): its per-pair table comes first.
                    None => wang_ng(&run)?.and_then(|w| w.tables().into_iter().next()),
                },
            })
        });
    match table {
        Ok(Some(t)) => Summary {
            text: crate::cmd::analyze::terminal(&t),
            json: t.json(),
        },
        Ok(None) => Summary {
            text: "no successful measurement of the test tenant to summarize\n".to_string(),
            json: serde_json::Value::Null,
        },
        Err(e) => Summary {
            text: format!(
                "cannot summarize the run ({e:#}); `nnb analyze {}` says more\n",
                dir.display()
            ),
            json: serde_json::Value::Null,
        },
    }
}

/// Without the analysis feature there is no table: the summary says how to get one.
#[cfg(not(feature = "analysis"))]
fn summary(dir: &Path) -> Summary {
    Summary {
        text: format!(
            "this nnb is built without the analysis feature: tabulate the run with `nnb \
             analyze {}` (in a build with it)\n",
            dir.display()
        ),
        json: serde_json::Value::Null,
    }
}

/// Prints the end of a run: its summary (see [`summary`]), the steps measured, the
/// controller's overhead and where the results are.
fn print_summary(
    out: &mut Out,
    exp: &Experiment,
    summary: &Summary,
    outcome: &RunOutcome,
) -> io::Result<()> {
    writeln!(out, "{} ({})", exp.name, exp.scenario.kind())?;
    // The warnings were said on stderr when the run started.
    write!(out, "{}", summary.text)?;
    let resumed = if outcome.skipped > 0 {
        format!(", {} already done before this resume", outcome.skipped)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{} of {} steps measured, {} failed{resumed}",
        outcome.measured, outcome.planned, outcome.failed
    )?;
    if let Some(o) = outcome.overhead {
        writeln!(

            out,
            "controller overhead per step (wall time outside the measured interval): mean {:.1} ms, median {:.1} ms, max {:.1} ms",
            o.mean_ms, o.median_ms, o.max_ms
        )?;
    }
    writeln!(out, "results: {}", outcome.dir.display())
}
