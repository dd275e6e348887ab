//! Tenant instances: launch one on the host, describe, stop and start again, terminate,
//! wait until terminated.

use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{
    Filter, IamInstanceProfileSpecification, Instance, InstanceType, Placement, ResourceType,
    Tenancy,
};

use nnb_format::Role;

use super::{tags, AwsError, Ec2, LaunchPlan, Launched, TenantLaunch};

/// States of an instance that still exists (or may still run).
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];
/// How often a wait polls DescribeInstances.
const POLL: Duration = Duration::from_secs(5);

impl Ec2 {
    /// RunInstances of one tenant on `host_id`: Placement{host_id, tenancy: host,
    /// affinity: host} (without a host: the availability zone and the run's
    /// `placement_group` if any, default tenancy), the plan's
    /// image, network, user data (base64) and tags on the instance and its volumes,
    /// MinCount = MaxCount = 1, a client token per tenant.
    pub(crate) async fn run_tenant(
        &self,
        plan: &LaunchPlan,
        tenant: &TenantLaunch,
        host_id: Option<&str>,
        security_groups: &[String],
        placement_group: Option<&str>,
    ) -> Result<Launched, AwsError> {
        let name = format!("nnb-{}-{}", plan.tags.run_id, tenant.name);
        let extra = [
            (tags::TENANT, tenant.name.as_str()),
            (tags::ROLE, tenant.role.name()),
        ];
        let placement = Placement::builder().availability_zone(&plan.availability_zone);
        let placement = match host_id {
            // Affinity "host": a tenant stopped between steps starts again on this host,
            // never on another one (nnb's hosts have auto-placement off anyway).
            Some(host_id) => placement
                .host_id(host_id)
                .tenancy(Tenancy::Host)
                .affinity("host"),
            None => placement.set_group_name(placement_group.map(str::to_owned)),
        }
        .build();
        let profile = plan.iam_instance_profile.as_ref().map(|p| {
            let spec = IamInstanceProfileSpecification::builder();
            if p.starts_with("arn:") {
                spec.arn(p).build()
            } else {
                spec.name(p).build()
            }
        });
        let out = self
            .client
            .run_instances()
            .image_id(&plan.image_id)
            .instance_type(InstanceType::from(tenant.instance_type.as_str()))
            .min_count(1)
            .max_count(1)
            .placement(placement)
            .set_subnet_id(plan.subnet_id.clone())
            .set_security_group_ids((!security_groups.is_empty()).then(|| security_groups.to_vec()))
            .set_key_name(plan.key_name.clone())
            .set_iam_instance_profile(profile)
            .user_data(aws_smithy_types::base64::encode(&plan.user_data))
            .client_token(tags::client_token(&plan.tags.run_id, &tenant.name))
            .tag_specifications(plan.tags.spec(ResourceType::Instance, &name, &extra))
            .tag_specifications(plan.tags.spec(ResourceType::Volume, &name, &extra))
            .send()
            .await
            .map_err(|e| AwsError::api("RunInstances", e))?;
        match out.instances() {
            [instance] => Ok(launched(instance, &tenant.name, Some(tenant.role))),
            other => Err(AwsError::Api {
                call: "RunInstances",
                code: None,
                message: format!("expected one instance, got {}", other.len()),
            }),
        }
    }

    /// DescribeInstances of the instances matching `filters`, every page. Filtering by
    /// `instance-id` (rather than naming ids) makes ids that no longer exist simply absent
    /// instead of failing the call.
    pub(crate) async fn instances(&self, filters: Vec<Filter>) -> Result<Vec<Instance>, AwsError> {
        let mut instances = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .describe_instances()
                .set_filters(Some(filters.clone()))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeInstances", e))?;
            for reservation in out.reservations() {
                instances.extend(reservation.instances().iter().cloned());
            }
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                return Ok(instances);
            }
        }
    }

    /// Instances carrying `filters` that are not terminated yet (what the sweep removes).
    pub(crate) async fn find_live_instances(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<Instance>, AwsError> {
        let state = filter(
            "instance-state-name",
            LIVE_STATES.map(String::from).to_vec(),
        );
        self.instances(filters.into_iter().chain([state]).collect())
            .await
    }

    /// One StopInstances call for all of `ids` (a tenant absent from the next steps): the
    /// instances shut down and leave the host; their EBS volumes, tags and host affinity
    /// stay, so [`Ec2::start`] brings them back on the same host.
    pub async fn stop(&self, ids: &[String]) -> Result<(), AwsError> {
        self.client
            .stop_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
            .map(drop)
            .map_err(|e| AwsError::api("StopInstances", e))
    }

    /// One StartInstances call for all of `ids` (stopped tenants present again): each boots
    /// on its host (affinity) with a new public address; the user data does not run again,
    /// the enabled `nnb-agent` unit starts the agent.
    pub async fn start(&self, ids: &[String]) -> Result<(), AwsError> {
        self.client
            .start_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await
            .map(drop)
            .map_err(|e| AwsError::api("StartInstances", e))
    }

    /// TerminateInstances of `ids`. When the batch fails (one id unknown fails them all) each
    /// id is tried alone and "not found" counts as done. Returns the failures.
    pub(crate) async fn terminate(&self, ids: &[String]) -> Vec<String> {
        let Err(batch) = self.terminate_call(ids.to_vec()).await else {
            return Vec::new();
        };
        tracing::warn!("{batch}; terminating one instance at a time");
        let mut failures = Vec::new();
        for id in ids {
            match self.terminate_call(vec![id.clone()]).await {
                Err(e) if !e.is_not_found() => failures.push(format!("{id}: {e}")),
                _ => {}
            }
        }
        failures
    }

    /// One TerminateInstances call.
    async fn terminate_call(&self, ids: Vec<String>) -> Result<(), AwsError> {
        self.client
            .terminate_instances()
            .set_instance_ids(Some(ids))
            .send()
            .await
            .map(drop)
            .map_err(|e| AwsError::api("TerminateInstances", e))
    }

    /// Polls DescribeInstances until none of `ids` is left in a state other than terminated
    /// (an id EC2 no longer lists counts as terminated), at most `timeout`.
    pub(crate) async fn wait_terminated(
        &self,
        ids: &[String],
        timeout: Duration,
    ) -> Result<(), AwsError> {
        let start = Instant::now();
        loop {
            let left: Vec<String> = self
                .instances(vec![filter("instance-id", ids.to_vec())])
                .await?
                .iter()
                .filter(|i| state_name(i) != "terminated")
                .filter_map(|i| i.instance_id().map(str::to_owned))
                .collect();
            if left.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(AwsError::Timeout {
                    what: format!("instances to terminate: {}", left.join(", ")),
                    waited_s: start.elapsed().as_secs(),
                });
            }
            tracing::debug!(left = left.len(), "waiting for instances to terminate");
            tokio::time::sleep(POLL).await;
        }
    }
}

/// A DescribeInstances filter.
pub(crate) fn filter(name: &str, values: Vec<String>) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values))
        .build()
}

/// The EC2 state name of an instance ("" when absent).
fn state_name(instance: &Instance) -> &str {
    instance
        .state()
        .and_then(|s| s.name())
        .map(|n| n.as_str())
        .unwrap_or("")
}

/// A [`Launched`] from an EC2 instance description.
pub(crate) fn launched(instance: &Instance, tenant: &str, role: Option<Role>) -> Launched {
    Launched {
        tenant: tenant.to_owned(),
        role,
        instance_id: instance.instance_id().unwrap_or_default().to_owned(),
        private_ip: instance.private_ip_address().and_then(|a| a.parse().ok()),
        public_ip: instance.public_ip_address().and_then(|a| a.parse().ok()),
        host_id: instance
            .placement()
            .and_then(|p| p.host_id())
            .filter(|h| !h.is_empty())
            .map(str::to_owned),
        availability_zone: instance
            .placement()
            .and_then(|p| p.availability_zone())
            .filter(|z| !z.is_empty())
            .map(str::to_owned),
        subnet_id: instance
            .subnet_id()
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        state: state_name(instance).to_owned(),
    }
}
