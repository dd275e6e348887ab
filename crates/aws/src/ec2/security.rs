//! The run's security group: only the agent port (TCP) and the probe ports (UDP), only
//! from the given CIDRs.

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, ResourceType, SecurityGroup};

use super::{AwsError, Ec2, LaunchPlan};

/// How often deleting a group still referenced by terminating instances is retried.
const RETRY: Duration = Duration::from_secs(5);

/// The ingress rules of a created group.
pub(crate) struct Ingress<'a> {
    /// TCP port of `nnb agent`.
    pub agent_port: u16,
    /// Ports of the netlat probes and loads: UDP, and TCP for the endpoint's TCP
    /// sink, which listens on its UDP sink's port number.
    pub probe_ports: &'a [u16],
    /// Sources allowed to connect.
    pub cidrs: &'a [String],
}

impl Ec2 {
    /// The VPC of `subnet_id` (DescribeSubnets).
    pub(crate) async fn subnet_vpc(&self, subnet_id: &str) -> Result<String, AwsError> {
        let out = self
            .client
            .describe_subnets()
            .subnet_ids(subnet_id)
            .send()
            .await
            .map_err(|e| AwsError::api("DescribeSubnets", e))?;
        out.subnets()
            .first()
            .and_then(|s| s.vpc_id())
            .map(str::to_owned)
            .ok_or_else(|| AwsError::Config(format!("subnet {subnet_id} has no VPC")))
    }

    /// CreateSecurityGroup in `vpc_id`, tagged; returns its id (authorize with [`Ec2::authorize`]).
    pub(crate) async fn create_security_group(
        &self,
        plan: &LaunchPlan,
        vpc_id: &str,
    ) -> Result<String, AwsError> {
        let name = format!("nnb-{}", plan.tags.run_id);
        let out = self
            .client
            .create_security_group()
            .group_name(&name)
            .description(format!(
                "nnb run {}: agent and probe ports only",
                plan.tags.run_id
            ))
            .vpc_id(vpc_id)
            .tag_specifications(plan.tags.spec(ResourceType::SecurityGroup, &name, &[]))
            .send()
            .await
            .map_err(|e| AwsError::api("CreateSecurityGroup", e))?;
        out.group_id()
            .map(str::to_owned)
            .ok_or_else(|| AwsError::Api {
                call: "CreateSecurityGroup",
                code: None,
                message: "no group id in the answer".into(),
            })
    }

    /// AuthorizeSecurityGroupIngress: the agent port over TCP and each probe port over UDP,
    /// each only from `ingress.cidrs`.
    pub(crate) async fn authorize(
        &self,
        group_id: &str,
        ingress: &Ingress<'_>,
    ) -> Result<(), AwsError> {
        let ranges: Vec<IpRange> = ingress
            .cidrs
            .iter()
            .map(|c| IpRange::builder().cidr_ip(c).description("nnb").build())
            .collect();
        let rule = |protocol: &str, port: u16| {
            IpPermission::builder()
                .ip_protocol(protocol)
                .from_port(i32::from(port))
                .to_port(i32::from(port))
                .set_ip_ranges(Some(ranges.clone()))
                .build()
        };
        // The endpoint's TCP sink listens on its UDP sink's port number.
        let rules = std::iter::once(rule("tcp", ingress.agent_port))
            .chain(ingress.probe_ports.iter().map(|p| rule("udp", *p)))
            .chain(ingress.probe_ports.iter().map(|p| rule("tcp", *p)))
            .collect();
        self.client
            .authorize_security_group_ingress()
            .group_id(group_id)
            .set_ip_permissions(Some(rules))
            .send()
            .await
            .map(drop)
            .map_err(|e| AwsError::api("AuthorizeSecurityGroupIngress", e))
    }

    /// DeleteSecurityGroup; "not found" counts as deleted, and DependencyViolation (instances
    /// that are still shutting down reference it) is retried until `timeout`.
    pub(crate) async fn delete_security_group(
        &self,
        group_id: &str,
        timeout: Duration,
    ) -> Result<(), AwsError> {
        let start = Instant::now();
        loop {
            let result = self
                .client
                .delete_security_group()
                .group_id(group_id)
                .send()
                .await
                .map_err(|e| AwsError::api("DeleteSecurityGroup", e));
            match result {
                Ok(_) => return Ok(()),
                Err(e) if e.is_not_found() => return Ok(()),
                Err(AwsError::Api {
                    code: Some(code), ..
                }) if code == "DependencyViolation" && start.elapsed() < timeout => {
                    tokio::time::sleep(RETRY).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// DescribeSecurityGroups of the groups matching `filters`, every page.
    pub(crate) async fn find_security_groups(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        let mut groups = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .describe_security_groups()
                .set_filters(Some(filters.clone()))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeSecurityGroups", e))?;
            groups.extend(out.security_groups().iter().cloned());
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                return Ok(groups);
            }
        }
    }
}
