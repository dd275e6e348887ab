//! `nnb fetch s3://bucket/prefix/RUN_ID`: brings a run uploaded by `nnb run`
//! (`results_s3`) back into a local results directory, every file checked against
//! the run's checksum manifest, so `nnb analyze` can read it.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use nnb_aws::s3::S3Url;
use nnb_controller::provider::aws as provider;

use crate::exit::usage;
use crate::out::Out;
use std::io::Write;

/// Arguments of `nnb fetch`.
#[derive(Debug, Args)]
pub(crate) struct FetchArgs {
    /// The run in S3: s3://bucket/prefix/RUN_ID.
    pub url: String,
    /// Results directory to put the run in (as RUN_ID/ under it).
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub into: PathBuf,
    /// Region (default: the standard AWS chain's, e.g. AWS_REGION).
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
}

/// Runs `nnb fetch`.
pub(crate) fn run(args: FetchArgs, out: &mut Out) -> anyhow::Result<()> {
    let url: S3Url = args
        .url
        .parse()
        .context("expected s3://bucket/prefix/RUN_ID")?;
    if url.last_segment().is_none() {
        return Err(usage(format!(
            "{url} names no run: expected s3://bucket/prefix/RUN_ID"
        )));
    }
    let path = crate::cmd::aws::runtime()?.block_on(async {
        provider::connect_s3(args.region.as_deref())
            .await
            .fetch_run(&url, &args.into)
            .await
            .with_context(|| format!("fetching {url}"))
    })?;
    writeln!(
        out,
        "fetched {url} into {} (every file verified against its SHA-256)",
        path.display()
    )?;
    writeln!(out, "analyze it with: nnb analyze {}", path.display())?;
    Ok(())
}
