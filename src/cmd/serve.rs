//! TODO: `nnb serve` (being written).

/// Arguments of `nnb serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

/// Runs `nnb serve`.
pub fn run(_args: ServeArgs) -> anyhow::Result<()> {
    anyhow::bail!("nnb serve is not built yet")
}
