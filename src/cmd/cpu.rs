//! TODO: `nnb cpu` (being written).

/// Arguments of `nnb cpu`.
#[derive(Debug, clap::Args)]
pub struct CpuArgs {}

/// Runs `nnb cpu`.
pub fn run(_args: CpuArgs) -> anyhow::Result<()> {
    anyhow::bail!("nnb cpu is not built yet")
}
