//! TODO: `nnb topo` (being written).

/// Arguments of `nnb topo`.
#[derive(Debug, clap::Args)]
pub struct TopoArgs {}

/// Runs `nnb topo`.
pub fn run(_args: TopoArgs) -> anyhow::Result<()> {
    anyhow::bail!("nnb topo is not built yet")
}
