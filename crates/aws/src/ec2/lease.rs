//! What a run holds in the cloud, and tearing it all down.

use std::time::Duration;

use serde::Serialize;

use super::{AwsError, Ec2, HostInfo};
use crate::reap::{self, ResourceKind, SweepFilter};

/// How long teardown waits for instances to terminate (EC2 takes a minute or two).
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// How long teardown retries deleting a group still referenced by dying instances.
const GROUP_TIMEOUT: Duration = Duration::from_secs(3 * 60);

/// What a run holds in the cloud. Filled as resources are created, so a failure at any point
/// can be torn down. teardown: terminate instances, wait until terminated, release hosts,
/// delete the created placement and security groups; idempotent; reports what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    run_id: String,
    instance_ids: Vec<String>,
    host_ids: Vec<String>,
    security_group_ids: Vec<String>,
    /// Placement groups nnb created for the run (by name: EC2 deletes them by name).
    placement_groups: Vec<String>,
    host: Option<HostInfo>,
    /// The servers' second host as DescribeHosts reported it (mirrored servers).
    server_host: Option<HostInfo>,
    /// Whether teardown also looks for resources tagged with the run id: a resource whose
    /// create call was interrupted or whose answer was lost exists without being leased.
    by_run_tag: bool,
}

/// What one teardown did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TeardownReport {
    /// Instances now terminated.
    pub terminated: Vec<String>,
    /// Dedicated hosts released.
    pub released: Vec<String>,
    /// Security groups deleted.
    pub deleted_security_groups: Vec<String>,
    /// Placement groups deleted (by name).
    pub deleted_placement_groups: Vec<String>,
    /// Everything that could not be removed, with the reason; those resources stay in the lease.
    pub failures: Vec<String>,
}

impl Lease {
    /// An empty lease for run `run_id`.
    pub fn new(run_id: impl Into<String>) -> Lease {
        Lease {
            run_id: run_id.into(),
            instance_ids: Vec::new(),
            host_ids: Vec::new(),
            security_group_ids: Vec::new(),
            placement_groups: Vec::new(),
            host: None,
            server_host: None,
            by_run_tag: true,
        }
    }

    /// A lease over resources found by id (the sweep adopts what a dead run left).
    pub(crate) fn adopt(
        label: impl Into<String>,
        instance_ids: Vec<String>,
        host_ids: Vec<String>,
        security_group_ids: Vec<String>,
        placement_groups: Vec<String>,
    ) -> Lease {
        Lease {
            run_id: label.into(),
            instance_ids,
            host_ids,
            security_group_ids,
            placement_groups,
            host: None,
            server_host: None,
            by_run_tag: false,
        }
    }

    /// The run this lease belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Instances launched and not yet confirmed terminated.
    pub fn instance_ids(&self) -> &[String] {
        &self.instance_ids
    }

    /// Dedicated hosts allocated and not yet released.
    pub fn host_ids(&self) -> &[String] {
        &self.host_ids
    }

    /// Security groups nnb created for the run and has not deleted yet.
    pub fn security_group_ids(&self) -> &[String] {
        &self.security_group_ids
    }

    /// Placement groups nnb created for the run and has not deleted yet (names).
    pub fn placement_groups(&self) -> &[String] {
        &self.placement_groups
    }

    /// The host as DescribeHosts reported it at provisioning (cores, sockets, vCPUs).
    pub fn host(&self) -> Option<&HostInfo> {
        self.host.as_ref()
    }

    /// The servers' second host as DescribeHosts reported it, when the run has one.
    pub fn server_host(&self) -> Option<&HostInfo> {
        self.server_host.as_ref()
    }

    /// Whether the lease holds nothing any more.
    pub fn is_empty(&self) -> bool {
        self.instance_ids.is_empty()
            && self.host_ids.is_empty()
            && self.security_group_ids.is_empty()
            && self.placement_groups.is_empty()
    }

    /// Records a launched instance (at once, so teardown finds it whatever fails next).
    pub(crate) fn add_instance(&mut self, id: String) {
        self.instance_ids.push(id);
    }

    /// Records an allocated host.
    pub(crate) fn add_host(&mut self, id: String) {
        self.host_ids.push(id);
    }

    /// Records a created security group.
    pub(crate) fn add_security_group(&mut self, id: String) {
        self.security_group_ids.push(id);
    }

    /// Records a placement group (before the create call: one whose answer is lost
    /// is still deleted).
    pub(crate) fn add_placement_group(&mut self, name: String) {
        self.placement_groups.push(name);
    }

    /// Keeps what DescribeHosts said about the host.
    pub(crate) fn set_host(&mut self, host: HostInfo) {
        self.host = Some(host);
    }

    /// Keeps what DescribeHosts said about the servers' second host.
    pub(crate) fn set_server_host(&mut self, host: HostInfo) {
        self.server_host = Some(host);
    }

    /// Adds the live resources tagged with this run that the lease does not hold yet.
    async fn adopt_run_tagged(&mut self, ec2: &Ec2) -> Result<(), AwsError> {
        let filter = SweepFilter {
            run_id: Some(self.run_id.clone()),
            ..SweepFilter::default()
        };
        for found in reap::find(ec2, &filter).await? {
            let list = match found.kind {
                ResourceKind::Instance => &mut self.instance_ids,
                ResourceKind::Host => &mut self.host_ids,
                ResourceKind::SecurityGroup => &mut self.security_group_ids,
                ResourceKind::PlacementGroup => &mut self.placement_groups,
            };
            if !list.contains(&found.id) {
                tracing::warn!(kind = ?found.kind, id = %found.id, "tagged with the run but not leased: removing it too");
                list.push(found.id);
            }
        }
        Ok(())
    }

    /// Terminates the instances, waits until they are terminated, releases the hosts (EC2
    /// refuses while instances run on them) and deletes the created security groups. Live
    /// resources tagged with the run id are included (a launch interrupted mid-call leaves
    /// an instance nobody got the id of). Tries every step even when an earlier one failed;
    /// what was removed leaves the lease, so a second call only retries what is left.
    /// Errors with [`AwsError::Teardown`] listing the failures (and what did succeed).
    pub async fn teardown(&mut self, ec2: &Ec2) -> Result<TeardownReport, AwsError> {
        let mut report = TeardownReport::default();
        if self.by_run_tag {
            if let Err(e) = self.adopt_run_tagged(ec2).await {
                report
                    .failures
                    .push(format!("finding resources tagged with the run: {e}"));
            }
        }
        if !self.instance_ids.is_empty() {
            report
                .failures
                .extend(ec2.terminate(&self.instance_ids).await);
            match ec2
                .wait_terminated(&self.instance_ids, TERMINATE_TIMEOUT)
                .await
            {
                Ok(()) => report.terminated = std::mem::take(&mut self.instance_ids),
                Err(e) => report.failures.push(e.to_string()),
            }
        }
        if !self.host_ids.is_empty() {
            match ec2.release_hosts(&self.host_ids).await {
                Ok((released, failures)) => {
                    self.host_ids.retain(|id| !released.contains(id));
                    report.released = released;
                    report.failures.extend(failures);
                }
                Err(e) => report.failures.push(e.to_string()),
            }
        }
        // A placement group is deleted once its instances are gone (EC2 refuses
        // before); while some are left, the group stays leased for the next try.
        if self.instance_ids.is_empty() {
            for group in std::mem::take(&mut self.placement_groups) {
                match ec2.delete_placement_group(&group).await {
                    Ok(()) => report.deleted_placement_groups.push(group),
                    Err(e) => {
                        report.failures.push(e.to_string());
                        self.placement_groups.push(group);
                    }
                }
            }
        }
        for group in std::mem::take(&mut self.security_group_ids) {
            match ec2.delete_security_group(&group, GROUP_TIMEOUT).await {
                Ok(()) => report.deleted_security_groups.push(group),
                Err(e) => {
                    report.failures.push(e.to_string());
                    self.security_group_ids.push(group);
                }
            }
        }
        tracing::info!(
            run = %self.run_id,
            terminated = report.terminated.len(),
            released = report.released.len(),
            groups = report.deleted_security_groups.len(),
            placement_groups = report.deleted_placement_groups.len(),
            failures = report.failures.len(),
            "teardown"
        );
        if report.failures.is_empty() {
            Ok(report)
        } else {
            Err(AwsError::Teardown(Box::new(report)))
        }
    }
}
