//! The opt-in of command jobs, checked before the first step: an agent runs a
//! program only when its operator started it with `nnb agent --allow-commands`, and
//! says so in its health ([`Health::commands`]). A plan that would post a command
//! job to an agent that did not opt in is refused before anything runs, naming the
//! tenant and the flag, instead of failing step after step with the agent's 403.

use nnb_agent::jobs::Health;
use nnb_experiment::plan::Plan;

use crate::results::TenantRecord;

/// A tenant whose agent would be asked to run programs without having opted in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant `{tenant}` runs command jobs (the experiment's `command` or `preset`), but its \
     agent at {addr} was started without `--allow-commands`, so it runs no program: start \
     it as `nnb agent --allow-commands ...` (an agent runs programs only where its operator \
     opts in), or measure nnb's own workloads instead"
)]
pub struct CommandsNotAllowed {
    /// The tenant.
    pub tenant: String,
    /// Its agent's address.
    pub addr: String,
}

/// Checks that every tenant `plan` posts command jobs to has an agent that opted
/// in, as the healths recorded in `tenants` say; the first one that did not is the
/// error. A tenant whose health is unknown (its agent did not answer) is left to
/// its first step, which fails on its own.
pub(crate) fn check_opt_in(
    plan: &Plan,
    tenants: &[TenantRecord],
) -> Result<(), CommandsNotAllowed> {
    for name in plan.command_tenants() {
        let Some(t) = tenants.iter().find(|t| t.name == name) else {
            continue;
        };
        if let Some(Health {
            commands: false, ..
        }) = &t.health
        {
            return Err(CommandsNotAllowed {
                tenant: name,
                addr: t.addr.clone(),
            });
        }
    }
    Ok(())
}
