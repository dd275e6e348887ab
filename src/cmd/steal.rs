//! TODO: `nnb steal` (being written).

/// Arguments of `nnb steal`.
#[derive(Debug, clap::Args)]
pub struct StealArgs {}

/// Runs `nnb steal`.
pub fn run(_args: StealArgs) -> anyhow::Result<()> {
    anyhow::bail!("nnb steal is not built yet")
}
