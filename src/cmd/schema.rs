//! `nnb schema`: the JSON Schema of experiment files, for editors.
//!
//! Point an editor's TOML language server at it (e.g. taplo's `schema` setting or a
//! `#:schema` comment) to get completion and checks while writing an experiment.

use std::io::Write;

use clap::Args;

use crate::out::Out;

/// Arguments of `nnb schema` (none: the schema goes to stdout).
#[derive(Debug, Args)]
pub(crate) struct SchemaArgs {}

/// Prints the experiment file JSON Schema.
pub(crate) fn run(_args: SchemaArgs, out: &mut Out) -> anyhow::Result<()> {
    let schema = nnb_experiment::schema();
    writeln!(out, "{}", serde_json::to_string_pretty(&schema)?)?;
    Ok(())
}
