//! `nnb aws`: the AWS side of the operator's CLI.
//!
//! `nnb aws sweep` finds what nnb left in EC2 (instances, dedicated hosts, security
//! groups, placement groups tagged `nnb:managed`) for one run (`--run-id`), for one
//! campaign's rounds (`--campaign`), for runs past their expiry tag (`--expired`) or
//! all of them (`--all`), and removes it; `--dry-run` only lists. (What `nnb run` checks and shows of an aws run, and the upload to
//! `results_s3`, are the aws provider's: `nnb_controller::provider::aws`.)

use anyhow::Context;
use clap::{Args, Subcommand};
use comfy_table::Cell;
use nnb_aws::reap::{sweep, SweepFilter};
use nnb_controller::provider::aws as provider;

use crate::exit::usage;
use crate::out::Out;
use crate::table::table;
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
    /// security groups, placement groups tagged nnb:managed=true).
    Sweep(SweepArgs),
}

/// Arguments of `nnb aws sweep`.
#[derive(Debug, Args)]
pub(crate) struct SweepArgs {
    /// Only the resources of this run (tag nnb:run-id), e.g. after a run was killed.
    #[arg(long, value_name = "RUN_ID")]
    pub run_id: Option<String>,
    /// Only the resources of this campaign's rounds (tag nnb:campaign), e.g. after
    /// its controller died.
    #[arg(long, value_name = "ID")]
    pub campaign: Option<String>,
    /// Only resources past their nnb:expires-at tag.
    #[arg(long)]
    pub expired: bool,
    /// Every nnb-managed resource, whatever run it belongs to (including running ones).
    #[arg(long, conflicts_with_all = ["run_id", "campaign", "expired"])]
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
    if args.run_id.is_none() && args.campaign.is_none() && !args.expired && !args.all {
        return Err(usage(
            "say what to sweep: --run-id RUN_ID (one run), --campaign ID (one campaign's \
             rounds), --expired (past their expiry tag) or --all (every nnb-managed resource)",
        ));
    }
    let filter = SweepFilter {
        run_id: args.run_id.clone(),
        campaign_id: args.campaign.clone(),
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
            "nothing to sweep: no nnb-managed instance, host, security group or placement \
             group matches"
        )?;
        return Ok(());
    }
    let done = |id: &str| match &report.teardown {
        None => "would be removed (dry run)",
        Some(t) if t.terminated.iter().any(|x| x == id) => "terminated",
        Some(t) if t.released.iter().any(|x| x == id) => "released",
        Some(t) if t.deleted_security_groups.iter().any(|x| x == id) => "deleted",
        Some(t) if t.deleted_placement_groups.iter().any(|x| x == id) => "deleted",
        Some(_) => "NOT removed",
    };
    let mut t = table(["resource", "id", "run", "campaign", "expires", "action"]);
    for r in &report.found {
        let kind = serde_json::to_value(r.kind)?;
        t.add_row(vec![
            Cell::new(kind.as_str().unwrap_or("-")),
            r.id.clone().into(),
            r.run_id.clone().unwrap_or_else(|| "-".to_string()).into(),
            r.campaign_id
                .clone()
                .unwrap_or_else(|| "-".to_string())
                .into(),
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
