//! TODO: `nnb latency` (being written).

/// Arguments of `nnb latency`.
#[derive(Debug, clap::Args)]
pub struct LatencyArgs {}

/// Runs `nnb latency`.
pub fn run(_args: LatencyArgs) -> anyhow::Result<()> {
    anyhow::bail!("nnb latency is not built yet")
}
