//! Dedicated hosts: allocate one for a run, read what it holds, release it, find leftovers.

use aws_sdk_ec2::types::{AutoPlacement, Filter, Host, ResourceType};

use super::{tags, AwsError, Ec2, HostInfo, HostKind, LaunchPlan};

/// Host states that still cost money (everything but released ones).
const LIVE_STATES: [&str; 4] = [
    "available",
    "under-assessment",
    "permanent-failure",
    "pending",
];

impl Ec2 {
    /// AllocateHosts: one host of family or type `kind`, auto-placement off (only
    /// instances that name the host land on it), a client token derived from the run id
    /// and `what` (`host`, `server-host`), tagged.
    pub(crate) async fn allocate_host(
        &self,
        plan: &LaunchPlan,
        kind: &HostKind,
        what: &str,
    ) -> Result<String, AwsError> {
        let name = match what {
            "host" => format!("nnb-{}", plan.tags.run_id),
            _ => format!("nnb-{}-{what}", plan.tags.run_id),
        };
        let request = self
            .client
            .allocate_hosts()
            .availability_zone(&plan.availability_zone)
            .quantity(1)
            .auto_placement(AutoPlacement::Off)
            .client_token(tags::client_token(&plan.tags.run_id, what))
            .tag_specifications(plan.tags.spec(ResourceType::DedicatedHost, &name, &[]));
        let request = match kind {
            HostKind::Family(family) => request.instance_family(family),
            HostKind::Type(instance_type) => request.instance_type(instance_type),
        };
        let out = request
            .send()
            .await
            .map_err(|e| AwsError::api("AllocateHosts", e))?;
        match out.host_ids() {
            [id] => Ok(id.clone()),
            ids => Err(AwsError::Api {
                call: "AllocateHosts",
                code: None,
                message: format!("expected one host id, got {ids:?}"),
            }),
        }
    }

    /// DescribeHosts of one host: its cores, sockets, vCPUs and available capacity.
    pub(crate) async fn describe_host(&self, host_id: &str) -> Result<HostInfo, AwsError> {
        let out = self
            .client
            .describe_hosts()
            .host_ids(host_id)
            .send()
            .await
            .map_err(|e| AwsError::api("DescribeHosts", e))?;
        out.hosts()
            .iter()
            .find(|h| h.host_id() == Some(host_id))
            .map(host_info)
            .ok_or_else(|| AwsError::Api {
                call: "DescribeHosts",
                code: None,
                message: format!("host {host_id} is not listed"),
            })
    }

    /// ReleaseHosts; returns the ids released (or already gone) and one failure per host that was not.
    pub(crate) async fn release_hosts(
        &self,
        host_ids: &[String],
    ) -> Result<(Vec<String>, Vec<String>), AwsError> {
        let out = self
            .client
            .release_hosts()
            .set_host_ids(Some(host_ids.to_vec()))
            .send()
            .await
            .map_err(|e| AwsError::api("ReleaseHosts", e))?;
        let mut released = out.successful().to_vec();
        let mut failures = Vec::new();
        for item in out.unsuccessful() {
            let id = item.resource_id().unwrap_or("?").to_owned();
            let code = item.error().and_then(|e| e.code()).unwrap_or("");
            let message = item.error().and_then(|e| e.message()).unwrap_or("");
            if code.contains("NotFound") {
                released.push(id);
            } else {
                failures.push(format!("ReleaseHosts {id}: {code}: {message}"));
            }
        }
        Ok((released, failures))
    }

    /// DescribeHosts of every live host carrying `filters` (tag filters from the sweep).
    pub(crate) async fn find_hosts(&self, filters: Vec<Filter>) -> Result<Vec<Host>, AwsError> {
        let state = Filter::builder()
            .name("state")
            .set_values(Some(LIVE_STATES.map(String::from).to_vec()))
            .build();
        let mut hosts = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .describe_hosts()
                .set_filter(Some(
                    filters.iter().cloned().chain([state.clone()]).collect(),
                ))
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| AwsError::api("DescribeHosts", e))?;
            hosts.extend(out.hosts().iter().cloned());
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                return Ok(hosts);
            }
        }
    }
}

/// The parts of a DescribeHosts entry nnb uses.
fn host_info(host: &Host) -> HostInfo {
    let props = host.host_properties();
    let count = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    HostInfo {
        host_id: host.host_id().unwrap_or_default().to_owned(),
        cores: count(props.and_then(|p| p.cores())),
        sockets: count(props.and_then(|p| p.sockets())),
        total_vcpus: count(props.and_then(|p| p.total_v_cpus())),
        instance_family: props.and_then(|p| p.instance_family()).map(str::to_owned),
        instance_type: props.and_then(|p| p.instance_type()).map(str::to_owned),
        available: host
            .available_capacity()
            .map(|c| c.available_instance_capacity())
            .unwrap_or_default()
            .iter()
            .filter_map(|c| Some((c.instance_type()?.to_owned(), count(c.available_capacity()))))
            .collect(),
    }
}
