//! TODO: `nnb load` (being written).

/// Arguments of `nnb load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {}

/// Runs `nnb load`.
pub fn run(_args: LoadArgs) -> anyhow::Result<()> {
    anyhow::bail!("nnb load is not built yet")
}
