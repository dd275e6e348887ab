//! `nnb aws`: the AWS side of the operator's CLI, and the AWS steps of `nnb run`.
//!
//! `nnb aws sweep` finds what nnb left in EC2 (instances, dedicated hosts, security
//! groups tagged `nnb:managed`) for one run (`--run-id`), for runs past their
//! expiry tag (`--expired`) or all of them (`--all`), and removes it; `--dry-run`
//! only lists. `nnb run` calls [`preflight`] before an aws run (capacity check, cost
//! estimate against `--yes` / `max_cost_usd`), [`print_dry_run`] for `--dry-run`,
//! and [`upload_results`] afterwards when the file names `results_s3`.

use std::path::Path;

use anyhow::Context;
use clap::{Args, Subcommand};
use comfy_table::Cell;
use nnb_aws::reap::{sweep, SweepFilter};
use nnb_aws::s3::S3Url;
use nnb_experiment::{AwsHost, AwsSpec, Experiment};
use nnb_experiment::plan::Plan;
use nnb_controller::provider::aws::{
    self as provider, Preflight, Verdict, LAUNCH_OVERHEAD, LEVEL_CHANGE,
};
use serde_json::json;

use crate::exit::usage;
use crate::out::Out;
use crate::table::{right, table};
use std::io::Write;

/// Arguments of `nnb aws`.
#[derive(Debug, Args)]
pub(crate) struct AwsArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: AwsCommand,
}

/// `nnb aws` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum AwsCommand {
    /// Find and remove EC2 resources nnb left behind (instances, dedicated hosts,
    /// security groups tagged nnb:managed=true).
    Sweep(SweepArgs),
}

/// Arguments of `nnb aws sweep`.
#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    /// Only the resources of this run (tag nnb:run-id), e.g. after a run was killed.
    #[arg(long, value_name = "RUN_ID")]
    pub run_id: Option<String>,
    /// Only resources past their nnb:expires-at tag.
    #[arg(long)]
    pub expired: bool,
    /// Every nnb-managed resource, whatever run it belongs to (including running ones).
    #[arg(long, conflicts_with_all = ["run_id", "expired"])]
    pub all: bool,
    /// List what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Region (default: the standard AWS chain's, e.g. AWS_REGION).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `nnb aws`.
pub(crate) fn run(args: AwsArgs, out: &mut Out) -> anyhow::Result<()> {
    match args.command {
        AwsCommand::Sweep(a) => run_sweep(a, out),
    }
}

/// A tokio runtime for one AWS command.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run_sweep(args: SweepArgs, out: &mut Out) -> anyhow::Result<()> {
    if args.run_id.is_none() && !args.expired && !args.all {
        return Err(usage(
            "say what to sweep: --run-id RUN_ID (one run), --expired (past their expiry tag) \
             or --all (every nnb-managed resource)",
        ));
    }
    let filter = SweepFilter {
        run_id: args.run_id.clone(),
        expired_only: args.expired,
        dry_run: args.dry_run,
    };
    let report = runtime()?.block_on(async {
        let ec2 = provider::connect(args.region.as_deref()).await;
        sweep(&ec2, &filter)
            .await
            .context("sweeping nnb's EC2 resources")
    })?;
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    if report.found.is_empty() {
        writeln!(
            out,
            "nothing to sweep: no nnb-managed instance, host or security group matches"
        )?;
        return Ok(());
    }
    let done = |id: &str| match &report.teardown {
        None => "would be removed (dry run)",
        Some(t) if t.terminated.iter().any(|x| x == id) => "terminated",
        Some(t) if t.released.iter().any(|x| x == id) => "released",
        Some(t) if t.deleted_security_groups.iter().any(|x| x == id) => "deleted",
        Some(_) => "NOT removed",
    };
    let mut t = table(["resource", "id", "run", "expires", "action"]);
    for r in &report.found {
        t.add_row(vec![
            Cell::new(format!("{:?}", r.kind).to_lowercase()),
            r.id.clone().into(),
            r.run_id.clone().unwrap_or_else(|| "-".to_string()).into(),
            r.expires_at_unix
                .map_or("-".to_string(), |at| {
                    nnb_controller::results::timestamp(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(at),
                    )
                })
                .into(),
            done(&r.id).into(),
        ]);
    }
    writeln!(out, "{t}")?;
    let verb = if args.dry_run { "found" } else { "swept" };
    writeln!(out, "{verb} {} resource(s)", report.found.len())?;
    Ok(())
}

fn money(usd: f64) -> String {
    format!("${usd:.2}")
}

fn cost_line(p: &Preflight) -> String {
    let c = &p.cost;
    let unknown = if p.steps_without_estimate > 0 {
        format!(
            " (plus {} fixed-work steps of unknown length, not priced: max_cost_usd also stops the run before a step would pass it)",
            p.steps_without_estimate
        )
    } else {
        String::new()
    };
    let changes = if c.level_changes > 0 {
        format!(
            " + {} changes of the tenants present x {} s",
            c.level_changes,
            LEVEL_CHANGE.as_secs()
        )
    } else {
        String::new()
    };
    format!(
        "{} host at {}/h ({}, price as of {}) x {:.2} h (plan{changes} + {} min launch and teardown) = {}{unknown}",
        c.family,
        money(c.usd_per_hour),
        c.price_region,
        c.price_as_of,
        c.hours,
        LAUNCH_OVERHEAD.as_secs() / 60,
        money(c.usd)
    )
}

/// Before a real aws run (or resume): prints the library's verdict
/// ([`provider::preflight`]): a plan that does not fit the host, or a cost not
/// accepted (`--yes`, or `max_cost_usd` at or above the estimate), is refused as a
/// usage error (exit 2); nothing has been created.
pub(crate) fn preflight(
    spec: &AwsSpec,
    exp: &Experiment,
    plan: &Plan,
    yes: bool,
) -> anyhow::Result<()> {
    let p = provider::preflight(spec, exp, plan, yes).context("building the launch plan")?;
    let estimate = p.cost.usd;
    match p.verdict {
        Verdict::Unfit => {
            let why = p.capacity.as_ref().err().map_or("", String::as_str);
            Err(usage(format!("{why}; nothing was created")))
        }
        Verdict::OverCap { max_usd } => Err(usage(format!(
            "this run is estimated at {}, above max_cost_usd = {} in [provider]: {}. Raise \
             max_cost_usd or shorten the plan; nothing was created",
            money(estimate),
            money(max_usd),
            cost_line(&p)
        ))),
        Verdict::Go => {
            eprintln!("estimated cost: {}", cost_line(&p));
            Ok(())
        }
        Verdict::NotAccepted => Err(usage(format!(
            "this run allocates a dedicated host, estimated {}: {}. Run again with --yes to \
             accept, or set max_cost_usd in [provider]; `nnb run --dry-run` shows the plan. \
             Nothing was created",
            money(estimate),
            cost_line(&p)
        ))),
    }
}

/// The aws part of `nnb run --dry-run`: resources, cost, capacity. Returns the JSON
/// for `--json`, and whether the plan fits (a plan that does not exits 2).
pub(crate) fn dry_run_section(
    out: &mut Out,
    spec: &AwsSpec,
    exp: &Experiment,
    plan: &Plan,
    as_json: bool,
) -> anyhow::Result<(serde_json::Value, bool)> {
    // Only the price and the capacity check: a dry run needs no acceptance.
    let p = provider::preflight(spec, exp, plan, false).context("building the launch plan")?;
    let neighbors = exp.neighbors().count();
    let vcpus = spec.tenant_vcpus();
    let endpoint = plan.needs_endpoint();
    let (reflector, sink) = spec.serve_ports();
    let udp = if endpoint {
        format!(", UDP {reflector} and {sink}")
    } else {
        String::new()
    };
    let group = if spec.security_group_ids.is_empty() {
        format!(
            "created for the run: TCP {}{udp} from {}",
            spec.agent_port,
            spec.allowed_cidrs.join(", ")
        )
    } else {
        format!("existing: {}", spec.security_group_ids.join(", "))
    };
    let host_kind = match &spec.host {
        AwsHost::Family(f) => format!("{f} (family host)"),
        AwsHost::Type(t) => format!("{t} (single-type host)"),
    };
    let fits = p.capacity.is_ok();
    let value = json!({
        "region": spec.region,
        "availability_zone": spec.availability_zone,
        "host": host_kind,
        "instances": { "type": spec.instance_type, "count": exp.tenants.len(), "vcpus_each": vcpus },
        "security_group": group,
        "endpoint": endpoint.then(|| json!({ "type": spec.endpoint_instance_type, "tenancy": "default", "priced": false })),
        "image_id": spec.image_id,
        "cost": p.cost,
        "steps_without_estimate": p.steps_without_estimate,
        "capacity": match &p.capacity { Ok(m) | Err(m) => m },
        "fits": fits,
    });
    if !as_json {
        let zone = match &spec.region {
            Some(r) => format!("{r}, {}", spec.availability_zone),
            None => spec.availability_zone.clone(),
        };
        writeln!(
            out,
            "aws resources ({zone}), created by a real run and removed after it:"
        )?;
        let mut t = table(["resource", "what", "count"]);
        t.add_row(vec![
            "dedicated host".into(),
            host_kind.clone().into(),
            right(1),
        ]);
        t.add_row(vec![
            "instance".into(),
            format!(
                "{} ({vcpus} vCPUs), {} on the host: test + {neighbors} neighbors",
                spec.instance_type, spec.image_id
            )
            .into(),
            right(exp.tenants.len()),
        ]);
        if endpoint {
            t.add_row(vec![
                "endpoint".into(),
                format!(
                    "{}, default tenancy off the host (sink and reflector; not priced)",
                    spec.endpoint_instance_type
                )
                .into(),
                right(1),
            ]);
        }
        t.add_row(vec![
            "security group".into(),
            group.into(),
            right(usize::from(spec.security_group_ids.is_empty())),
        ]);
        writeln!(out, "{t}")?;
        match &p.capacity {
            Ok(m) => writeln!(out, "capacity: {m}")?,
            Err(m) => writeln!(out, "capacity: REFUSED: {m}")?,
        }
        writeln!(out, "estimated cost: {}", cost_line(&p))?;
        if let Some(max) = spec.max_cost_usd {
            writeln!(out, "max_cost_usd: {}", money(max))?;
        }
    }
    Ok((value, fits))
}

/// Uploads the run directory `dir` to `dest` (`s3://bucket/prefix`) and says where.
pub(crate) fn upload_results(
    out: &mut Out,
    region: Option<&str>,
    dir: &Path,
    dest: &str,
) -> anyhow::Result<()> {
    let url: S3Url = dest
        .parse()
        .with_context(|| format!("results_s3 = {dest:?}"))?;
    let report = runtime()?.block_on(async {
        provider::connect_s3(region)
            .await
            .upload_run(dir, &url)
            .await
            .with_context(|| format!("uploading {} to {url}", dir.display()))
    })?;
    writeln!(
        out,
        "uploaded {} files ({} bytes, checksums verified) to {}",
        report.files, report.bytes, report.url
    )?;
    Ok(())
}
