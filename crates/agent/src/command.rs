//! `command` jobs: a program run without a shell.

use crate::job_table::JobShared;

use serde_json::Value;

use crate::jobs::CommandSpec;

/// A checked command job, ready to run.
#[derive(Debug)]
pub(crate) struct CommandJob {
    spec: CommandSpec,
}

/// Checks `spec` against this agent.
pub(crate) fn prepare(spec: &CommandSpec) -> Result<CommandJob, String> {
    Ok(CommandJob { spec: spec.clone() })
}

impl CommandJob {
    /// Runs the command.
    pub(crate) fn run(self, _shared: &JobShared) -> Result<Value, String> {
        Err(format!(
            "{}: command jobs are not implemented yet",
            self.spec.describe()
        ))
    }
}
