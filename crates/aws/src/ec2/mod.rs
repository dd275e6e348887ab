//! EC2 dedicated hosts and the tenants placed on them, always torn down.
//!
//! [`Ec2::provision`] allocates one host, checks the plan fits (before anything is created,
//! and again with what DescribeHosts reports), optionally creates a security group, and
//! launches the tenants in order onto the host. Every id goes into the [`Lease`] the moment
//! it exists, so [`Lease::teardown`] removes exactly what was created, whatever failed.

mod capacity;
mod error;
mod hosts;
mod instances;
mod lease;
mod placement;
mod plan;
mod security;
pub mod tags;

pub use capacity::SPREAD_MAX_INSTANCES;
pub use error::AwsError;
pub use lease::{Lease, TeardownReport};
pub use plan::{
    HostInfo, HostKind, LaunchPlan, Launched, Place, PlacementGroupPlan, SecurityGroupPlan,
    TenantLaunch,
};
pub use tags::Tags;

use aws_config::SdkConfig;
use nnb_catalog::Catalog;
use nnb_format::Role;

/// An EC2 client for one region/endpoint.
#[derive(Debug, Clone)]
pub struct Ec2 {
    client: aws_sdk_ec2::Client,
}

impl Ec2 {
    /// A client from an SDK config (see [`crate::config::load`]).
    pub fn new(sdk: &SdkConfig) -> Ec2 {
        Ec2 {
            client: aws_sdk_ec2::Client::new(sdk),
        }
    }

    /// Checks the plan against the catalog BEFORE anything is created (count per type vs
    /// instances per host, and total vCPUs vs host vCPUs for a family host). moto does not
    /// check this; nnb does.
    pub fn check_capacity(plan: &LaunchPlan, catalog: &Catalog) -> Result<(), AwsError> {
        capacity::check(plan, catalog, None)?;
        capacity::check_servers(plan, catalog, None)
    }

    /// Allocates the host (and the servers' second host when the plan has one; auto-placement off, client token from the run id, tags), reads
    /// DescribeHosts (HostProperties, AvailableCapacity: run-time values win over the
    /// catalog, capacity re-checked), creates the security group if asked, and launches the
    /// tenants in order with Placement{host_id, tenancy: host}, user data and tags.
    /// On error the lease still holds everything created so far (the caller tears down).
    pub async fn provision(
        &self,
        plan: &LaunchPlan,
        lease: &mut Lease,
    ) -> Result<Vec<Launched>, AwsError> {
        if lease.run_id() != plan.tags.run_id {
            return Err(AwsError::Config(format!(
                "the lease is for run {:?} but the plan tags run {:?}",
                lease.run_id(),
                plan.tags.run_id
            )));
        }
        let catalog = Catalog::builtin();
        Ec2::check_capacity(plan, catalog)?;
        check_security_group_plan(plan)?;
        if plan.host.is_none() {
            self.check_offered(plan).await?;
        }
        let host_id = match &plan.host {
            Some(kind) => {
                let host_id = self.allocate_host(plan, kind, "host").await?;
                tracing::info!(host = %host_id, "dedicated host allocated");
                lease.add_host(host_id.clone());
                let host = self.describe_host(&host_id).await?;
                lease.set_host(host.clone());
                capacity::check(plan, catalog, Some(&host))?;
                Some(host_id)
            }
            None => None,
        };
        let server_host_id = match &plan.server_host {
            Some(kind) => {
                let id = self.allocate_host(plan, kind, "server-host").await?;
                tracing::info!(host = %id, "the servers' dedicated host allocated");
                lease.add_host(id.clone());
                let info = self.describe_host(&id).await?;
                capacity::check_servers(plan, catalog, Some(&info))?;
                lease.set_server_host(info);
                Some(id)
            }
            None => None,
        };
        let groups = self.security_groups(plan, lease).await?;
        let placement_group = match &plan.placement_group {
            Some(group) => {
                let name = placement::group_name(&plan.tags.run_id);
                // Leased first: a create whose answer is lost still gets deleted.
                lease.add_placement_group(name.clone());
                self.create_placement_group(plan, &name).await?;
                tracing::info!(group = %name, strategy = %group.strategy, "placement group created");
                Some(name)
            }
            None => None,
        };
        let mut launched = Vec::with_capacity(plan.tenants.len());
        for tenant in &plan.tenants {
            let on = match tenant.place {
                Place::Host => host_id.as_deref(),
                Place::ServerHost => server_host_id.as_deref(),
                Place::Default => None,
            };
            let tenant = self
                .run_tenant(plan, tenant, on, &groups, placement_group.as_deref())
                .await?;
            tracing::info!(tenant = %tenant.tenant, instance = %tenant.instance_id, "launched");
            lease.add_instance(tenant.instance_id.clone());
            launched.push(tenant);
        }
        Ok(launched)
    }

    /// The security group ids for the tenants: the plan's, or one created (and leased) now.
    async fn security_groups(
        &self,
        plan: &LaunchPlan,
        lease: &mut Lease,
    ) -> Result<Vec<String>, AwsError> {
        match &plan.security_group {
            SecurityGroupPlan::Existing(ids) => Ok(ids.clone()),
            SecurityGroupPlan::Create {
                vpc_id,
                agent_port,
                probe_ports,
                cidrs,
            } => {
                let vpc = match (vpc_id, &plan.subnet_id) {
                    (Some(vpc), _) => vpc.clone(),
                    (None, Some(subnet)) => self.subnet_vpc(subnet).await?,
                    (None, None) => no_vpc_error()?,
                };
                let id = self.create_security_group(plan, &vpc).await?;
                tracing::info!(group = %id, vpc = %vpc, "security group created");
                lease.add_security_group(id.clone());
                let ingress = security::Ingress {
                    agent_port: *agent_port,
                    probe_ports,
                    cidrs,
                };
                self.authorize(&id, &ingress).await?;
                Ok(vec![id])
            }
        }
    }

    /// DescribeInstances of `instance_ids`, tenant and role read back from the tags.
    pub async fn describe(&self, instance_ids: &[String]) -> Result<Vec<Launched>, AwsError> {
        if instance_ids.is_empty() {
            return Ok(Vec::new());
        }
        let found = self
            .instances(vec![instances::filter(
                "instance-id",
                instance_ids.to_vec(),
            )])
            .await?;
        Ok(found
            .iter()
            .map(|i| {
                let tag = |key| tags::value(i.tags(), key).unwrap_or_default();
                instances::launched(i, tag(tags::TENANT), Role::from_name(tag(tags::ROLE)))
            })
            .collect())
    }
}

/// Refuses, before anything is created, a security group that could not be created or
/// would let nobody in.
fn check_security_group_plan(plan: &LaunchPlan) -> Result<(), AwsError> {
    if let SecurityGroupPlan::Create { vpc_id, cidrs, .. } = &plan.security_group {
        if vpc_id.is_none() && plan.subnet_id.is_none() {
            return no_vpc_error();
        }
        if cidrs.is_empty() {
            return Err(AwsError::Config(
                "the security group needs at least one CIDR to allow".into(),
            ));
        }
    }
    Ok(())
}

/// The error for a group to create with neither a VPC nor a subnet to find one from.
fn no_vpc_error<T>() -> Result<T, AwsError> {
    Err(AwsError::Config(
        "creating a security group needs a vpc_id or a subnet_id".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_without_vpc_or_cidrs_is_refused_up_front() {
        let mut plan = LaunchPlan {
            host: Some(HostKind::Family("m5".into())),
            server_host: None,
            availability_zone: "us-east-1a".into(),
            tenants: Vec::new(),
            image_id: "ami-1".into(),
            subnet_id: None,
            key_name: None,
            iam_instance_profile: None,
            security_group: SecurityGroupPlan::Create {
                vpc_id: None,
                agent_port: 7070,
                probe_ports: vec![7071],
                cidrs: vec!["10.0.0.0/16".into()],
            },
            placement_group: None,
            user_data: String::new(),
            tags: Tags {
                run_id: "r".into(),
                expires_at_unix: 0,
                campaign_id: None,
            },
        };
        assert!(matches!(
            check_security_group_plan(&plan),
            Err(AwsError::Config(_))
        ));
        plan.subnet_id = Some("subnet-1".into());
        check_security_group_plan(&plan).unwrap();
        if let SecurityGroupPlan::Create { cidrs, .. } = &mut plan.security_group {
            cidrs.clear();
        }
        assert!(matches!(
            check_security_group_plan(&plan),
            Err(AwsError::Config(_))
        ));
        plan.security_group = SecurityGroupPlan::Existing(vec!["sg-1".into()]);
        plan.subnet_id = None;
        check_security_group_plan(&plan).unwrap();
    }
}
