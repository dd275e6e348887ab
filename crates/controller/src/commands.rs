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

#[cfg(test)]
mod tests {
    use super::*;
    use nnb_agent::jobs::{CommandSpec, JobSpec};
    use nnb_burn::topology::TopologySummary;
    use nnb_experiment::plan::{Assignment, Step};
    use nnb_format::{Role, StepGroup};

    /// A step measuring `job` on `tenant`.
    fn step(tenant: &str, job: JobSpec) -> Step {
        Step {
            id: "busy/neighbors=0/rep=1".into(),
            group: StepGroup::Busy,
            level: 0.0,
            level_label: "neighbors=0".into(),
            rep: 1,
            warmup: false,
            present: vec![tenant.into()],
            lifted: Vec::new(),
            background: Vec::new(),
            continuous: false,
            measure: vec![Assignment {
                tenant: tenant.into(),
                job,
            }],
            estimate: None,
            technology: None,
            start: None,
        }
    }

    /// Tenant `name` at `addr` whose health says `commands` (`None`: no answer).
    fn tenant(name: &str, commands: Option<bool>) -> TenantRecord {
        let topology = TopologySummary {
            logical: 1,
            online: 1,
            cores: 1,
            packages: 1,
            numa_nodes: 1,
            smt_ways: 1,
        };
        TenantRecord {
            name: name.into(),
            role: Role::Test,
            addr: "10.0.0.5:7700".into(),
            cpus: vec![0],
            netns: None,
            ip: None,
            health: commands.map(|commands| Health {
                version: "t".into(),
                topology,
                cpus: vec![0],
                running_jobs: 0,
                environment: None,
                commands,
            }),
            environment: None,
            runtime: None,
        }
    }

    #[test]
    fn command_jobs_need_an_agent_that_opted_in() {
        let command = JobSpec::Command(CommandSpec::new(vec!["/bin/true".into()]));
        let plan = Plan {
            steps: vec![step("vm", command), step("other", JobSpec::Idle)],
        };
        let refused = check_opt_in(&plan, &[tenant("vm", Some(false))]);
        let err = refused.expect_err("an agent without the opt-in");
        assert_eq!(err.tenant, "vm");
        let said = err.to_string();
        assert!(
            said.contains("tenant `vm`") && said.contains("10.0.0.5:7700"),
            "{said}"
        );
        assert!(said.contains("--allow-commands"), "{said}");
        assert_eq!(check_opt_in(&plan, &[tenant("vm", Some(true))]), Ok(()));
        // An agent that did not answer fails its step on its own.
        assert_eq!(check_opt_in(&plan, &[tenant("vm", None)]), Ok(()));
        // Tenants without command jobs need no opt-in.
        let plain = Plan {
            steps: vec![step("vm", JobSpec::Idle)],
        };
        assert_eq!(check_opt_in(&plain, &[tenant("vm", Some(false))]), Ok(()));
    }
}
