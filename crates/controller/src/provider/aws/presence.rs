//! Neighbors that come and go on the dedicated host: between two steps, the tenants a
//! step wants absent are stopped (StopInstances) and the stopped ones it wants present
//! are started again (StartInstances) on the same host.
//!
//! Why stop and start rather than launch per level: every tenant is launched before
//! step 1, so the capacity check, the lease (every instance id known before the first
//! step), the manifest's record of each tenant's environment and a failed install are
//! all settled before anything is measured, and no create call happens mid-run (nothing
//! new to lease, to tag or for `nnb aws sweep` to miss: stopped instances keep their
//! tags, and teardown and the sweep terminate them like running ones). A stopped
//! instance has no VM on the host (its vCPUs and memory are given back; its EBS volume
//! lives off the host), which is what the thesis' absent neighbor is; an idle one runs.
//! Host affinity (set at launch) brings a started instance back on the run's host, and
//! nnb checks that it did. A level change only boots (the agent is installed and its
//! unit enabled: about a minute) instead of launching and installing, and needs no
//! termination wait when the idle pass starts again from the test node alone. The host
//! is billed per hour whatever runs on it, so stopping saves nothing and costs nothing;
//! the changes' time is priced by [`super::LEVEL_CHANGE`] and counted by the cost cap
//! like any step time. Tenants absent at step 1 are launched too, then stopped by the
//! first step.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Instant;

use nnb_aws::ec2::{Ec2, Launched};

use super::{agent_addrs, wait_healthy, wait_state, AwsProvider, State};
use crate::provider::{Fleet, ProviderError, Tenant};

/// A launched fleet's instances, for changing which are present.
#[derive(Debug)]
pub(super) struct Placed {
    /// The client that launched them.
    pub(super) ec2: Ec2,
    /// The run's dedicated host; `None` with default tenancy (a started instance
    /// may land anywhere in the zone).
    pub(super) host_id: Option<String>,
    /// The agents' bearer token (the same after a restart: it is on the volume).
    pub(super) token: String,
    /// (tenant, instance id) of every tenant on the host (not the endpoint).
    pub(super) instances: Vec<(String, String)>,
    /// Tenants started whose agents have not answered yet (a change that failed
    /// half-way): checked, and handed back as started, by the next change.
    pub(super) unconfirmed: BTreeSet<String>,
}

/// What one change does, each as (tenant, instance id).
#[derive(Debug, Default, PartialEq, Eq)]
struct Change {
    /// StopInstances.
    stop: Vec<(String, String)>,
    /// Waited for until stopped (those stopped now, and those already stopping).
    await_stopped: Vec<(String, String)>,
    /// StartInstances, once stopped.
    start: Vec<(String, String)>,
    /// Waited for until running (those started now, and those already pending).
    await_running: Vec<(String, String)>,
}

/// The change that makes exactly `present` run, from the instances' current `states`
/// (as DescribeInstances says: `None` when it lists no such instance). An instance
/// being terminated, or gone, cannot come back: that is an error naming it.
fn plan_change(
    instances: &[(String, String)],
    states: &[Option<String>],
    present: &[String],
) -> Result<Change, ProviderError> {
    let mut c = Change::default();
    for (pair, state) in instances.iter().zip(states) {
        let wanted = present.contains(&pair.0);
        let p = || pair.clone();
        match (wanted, state.as_deref().unwrap_or("gone")) {
            (true, "running") | (false, "stopped") => {}
            (true, "pending") => c.await_running.push(p()),
            (true, "stopped") => {
                c.start.push(p());
                c.await_running.push(p());
            }
            (true, "stopping") => {
                c.await_stopped.push(p());
                c.start.push(p());
                c.await_running.push(p());
            }
            (false, "running" | "pending") => {
                c.stop.push(p());
                c.await_stopped.push(p());
            }
            (false, "stopping") => c.await_stopped.push(p()),
            (_, other) => {
                return Err(ProviderError::AgentStart {
                    tenant: pair.0.clone(),
                    message: format!(
                        "its instance {} is {other}: it cannot be started or stopped",
                        pair.1
                    ),
                })
            }
        }
    }
    Ok(c)
}

/// The instance ids of `pairs`.
fn ids(pairs: &[(String, String)]) -> Vec<String> {
    pairs.iter().map(|(_, id)| id.clone()).collect()
}

/// The tenant names of `pairs`, for people.
fn names(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(t, _)| t.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl AwsProvider {
    /// [`crate::provider::Provider::set_present`] on EC2: describes the fleet's
    /// instances, stops those `present` leaves out (one call) and waits until they are
    /// stopped, starts the stopped ones it names (one call), waits until they run on the
    /// run's host, points their tenants at the new addresses and waits for their agents.
    /// Each wait is bounded by `health_timeout`. Returns the tenants whose agents
    /// started.
    pub(super) async fn change_present(
        &mut self,
        fleet: &mut Fleet,
        present: &[String],
    ) -> Result<Vec<String>, ProviderError> {
        fleet.check_present(present)?;
        let (spec, run_id, agents) = (&self.spec, self.cx.run_id.as_str(), self.agents.clone());
        let Some(placed) = self.placed.as_mut() else {
            return Err(ProviderError::Unsupported(
                "no aws fleet was launched: there is nothing to start or stop".to_string(),
            ));
        };
        let timeout = spec.health_timeout;
        let now = placed.ec2.describe(&ids(&placed.instances)).await?;
        let states: Vec<Option<String>> = placed
            .instances
            .iter()
            .map(|(_, id)| {
                now.iter()
                    .find(|l| l.instance_id == *id)
                    .map(|l| l.state.clone())
            })
            .collect();
        let change = plan_change(&placed.instances, &states, present)?;
        let begun = Instant::now();
        if !change.stop.is_empty() {
            say!(
                "run {run_id}: stopping {} instance(s) ({}): absent from the next step",
                change.stop.len(),
                names(&change.stop)
            );
            placed.ec2.stop(&ids(&change.stop)).await?;
            if let Some(agents) = &agents {
                for (_, id) in &change.stop {
                    agents.stopped(id);
                }
            }
        }
        if !change.await_stopped.is_empty() {
            let deadline = Instant::now() + timeout;
            let ids = ids(&change.await_stopped);
            wait_state(&placed.ec2, &ids, State::Stopped, deadline, timeout).await?;
            for (t, _) in &change.await_stopped {
                placed.unconfirmed.remove(t);
            }
        }
        let deadline = Instant::now() + timeout;
        if !change.start.is_empty() {
            say!(
                "run {run_id}: starting {} instance(s) ({}){}",
                change.start.len(),
                names(&change.start),
                match &placed.host_id {
                    Some(h) => format!(" on host {h}"),
                    None => String::new(),
                }
            );
            placed.ec2.start(&ids(&change.start)).await?;
        }
        if !change.await_running.is_empty() {
            let ids = ids(&change.await_running);
            let up = wait_state(&placed.ec2, &ids, State::Running, deadline, timeout).await?;
            if let Some(host_id) = &placed.host_id {
                on_host(&up, host_id)?;
            }
            let addrs = agent_addrs(spec, agents.as_ref(), &up, &placed.token).await?;
            readdress(fleet, &up, &addrs);
            placed
                .unconfirmed
                .extend(up.iter().map(|l| l.tenant.clone()));
        }
        let check: Vec<Tenant> = fleet
            .tenants
            .iter()
            .filter(|t| placed.unconfirmed.contains(&t.name) && present.contains(&t.name))
            .cloned()
            .collect();
        wait_healthy(&check, deadline, timeout).await?;
        for t in &check {
            placed.unconfirmed.remove(&t.name);
        }
        if !change.stop.is_empty() || !change.start.is_empty() {
            say!(
                "run {run_id}: {} tenant(s) present after {:.0?}",
                present.len(),
                begun.elapsed()
            );
        }
        Ok(check.into_iter().map(|t| t.name).collect())
    }
}

/// Refuses instances that started anywhere but the run's host: a neighbor elsewhere
/// shares nothing with the test node.
fn on_host(up: &[Launched], host_id: &str) -> Result<(), ProviderError> {
    match up.iter().find(|l| l.host_id.as_deref() != Some(host_id)) {
        None => Ok(()),
        Some(l) => Err(ProviderError::AgentStart {
            tenant: l.tenant.clone(),
            message: format!(
                "its instance {} started on host {}, not on the run's host {host_id}",
                l.instance_id,
                l.host_id.as_deref().unwrap_or("(none: default tenancy)")
            ),
        }),
    }
}

/// Points the tenants of `up` at their agents' new addresses (a started instance gets a
/// new public IP) and records their private IPs.
fn readdress(fleet: &mut Fleet, up: &[Launched], addrs: &[SocketAddr]) {
    for (l, addr) in up.iter().zip(addrs) {
        if let Some(t) = fleet.tenants.iter_mut().find(|t| t.name == l.tenant) {
            t.addr = *addr;
            t.ip = l.private_ip;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| (n.to_string(), format!("i-{n}")))
            .collect()
    }

    fn states(s: &[Option<&str>]) -> Vec<Option<String>> {
        s.iter().map(|s| s.map(str::to_string)).collect()
    }

    #[test]
    fn each_state_is_brought_to_what_the_step_wants() {
        let all = pairs(&["test", "a", "b", "c", "d", "e", "f"]);
        let now = states(&[
            Some("running"),
            Some("running"),
            Some("stopped"),
            Some("stopping"),
            Some("pending"),
            Some("stopping"),
            Some("stopped"),
        ]);
        let present: Vec<String> = ["test", "b", "c", "d"].map(String::from).to_vec();
        let c = plan_change(&all, &now, &present).unwrap();
        assert_eq!(c.stop, pairs(&["a"]));
        assert_eq!(c.await_stopped, pairs(&["a", "c", "e"]));
        assert_eq!(c.start, pairs(&["b", "c"]));
        assert_eq!(c.await_running, pairs(&["b", "c", "d"]));
        let same = plan_change(&all[..1], &now[..1], &present).unwrap();
        assert_eq!(same, Change::default());
    }

    #[test]
    fn an_instance_started_off_the_runs_host_is_refused() {
        let on = |host: Option<&str>| Launched {
            tenant: "nb-1".into(),
            role: Some(nnb_format::Role::Neighbor),
            instance_id: "i-1".into(),
            private_ip: None,
            public_ip: None,
            host_id: host.map(str::to_string),
            availability_zone: None,
            subnet_id: None,
            state: "running".into(),
        };
        on_host(&[on(Some("h-run"))], "h-run").unwrap();
        for elsewhere in [Some("h-other"), None] {
            let err = on_host(&[on(Some("h-run")), on(elsewhere)], "h-run")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("nb-1") && err.contains("not on the run's host h-run"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_terminated_or_missing_instance_is_an_error_naming_it() {
        let all = pairs(&["test", "a"]);
        let present = vec!["test".to_string(), "a".to_string()];
        for gone in [Some("terminated"), Some("shutting-down"), None] {
            let err = plan_change(&all, &states(&[Some("running"), gone]), &present)
                .unwrap_err()
                .to_string();
            assert!(err.contains("tenant a") && err.contains("i-a"), "{err}");
        }
    }
}
