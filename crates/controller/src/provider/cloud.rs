//! What a cloud provider holds for a run, and what the manifest records of it.
//!
//! A cloud provider fills its lease while the launch runs, so resources created by a
//! launch that fails or is interrupted (Ctrl-C drops the launch future) are still
//! known and torn down ([`Provider::abandon`](super::Provider::abandon)). Once the
//! fleet is up, the lease moves into the [`Fleet`](super::Fleet), whose shutdown
//! releases it. Local and static fleets hold an empty lease.
//!
//! [`CloudRecord`] is plain data (no SDK types), so results written by an aws run
//! read the same in every build.

use nnb_format::{ProviderKind, Role};
use serde::{Deserialize, Serialize};

use super::ProviderError;
use crate::client::BoxFuture;

/// Resources in a cloud that cost money until removed (the EC2 lease of a run).
pub trait CloudTeardown: Send + Sync + std::fmt::Debug {
    /// Whether nothing is held any more.
    fn is_empty(&self) -> bool;

    /// Removes everything held; idempotent. What could not be removed stays held
    /// and is named in the error.
    fn teardown(&mut self) -> BoxFuture<'_, Result<(), ProviderError>>;
}

/// Cloud resources a run holds (none for local and static fleets).
#[derive(Debug, Default)]
pub struct CloudLease {
    /// What is held, and how to remove it.
    pub(crate) held: Option<Box<dyn CloudTeardown>>,
    /// What was provisioned, for the manifest.
    pub(crate) record: Option<CloudRecord>,
}

impl CloudLease {
    /// What was provisioned (host, instances), once the launch got that far.
    pub fn record(&self) -> Option<&CloudRecord> {
        self.record.as_ref()
    }

    /// Whether it still holds anything in the cloud.
    pub fn is_empty(&self) -> bool {
        self.held.as_ref().map_or(true, |h| h.is_empty())
    }

    /// Tears down everything held (terminate, wait, release, delete); idempotent.
    /// What could not be removed stays held and is named in the error, with the
    /// `nnb aws sweep` command that removes it later.
    pub async fn release(&mut self) -> Result<(), ProviderError> {
        match self.held.as_mut() {
            Some(held) => held.teardown().await,
            None => Ok(()),
        }
    }
}

/// Where a cloud run's tenants ran (manifest: `sessions[].cloud`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloudRecord {
    /// The provider: `aws`.
    pub provider: ProviderKind,
    /// The region, when the file named one (else the standard AWS chain's).
    pub region: Option<String>,
    /// Availability zone of the host.
    pub availability_zone: String,
    /// The dedicated host.
    pub host: Option<HostRecord>,
    /// The mirrored servers' second dedicated host, when they had one (version 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_host: Option<HostRecord>,
    /// Every tenant's instance, in launch order.
    pub instances: Vec<InstanceRecord>,
    /// Security groups the tenants used.
    pub security_groups: Vec<String>,
}

impl CloudRecord {
    /// Where each instance landed, as a campaign's round records it (launch order;
    /// `cpu_model` is left for the campaign to fill from the agents' environment).
    pub fn placed(&self) -> Vec<nnb_format::campaign::PlacedInstance> {
        self.instances
            .iter()
            .map(|i| nnb_format::campaign::PlacedInstance {
                tenant: i.tenant.clone(),
                role: i.role,
                instance_id: Some(i.instance_id.clone()),
                instance_type: Some(i.instance_type.clone()),
                zone: Some(
                    i.availability_zone
                        .clone()
                        .unwrap_or_else(|| self.availability_zone.clone()),
                ),
                subnet_id: i.subnet_id.clone(),
                private_ip: i.private_ip.clone(),
                host_id: i.host_id.clone(),
                cpu_model: None,
            })
            .collect()
    }
}

/// A dedicated host as the cloud described it (`HostProperties`,
/// `AvailableCapacity`); zeros where the cloud did not say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    /// Host id, e.g. `h-0123...`.
    pub host_id: String,
    /// Instance family of a family host.
    pub instance_family: Option<String>,
    /// Instance type of a single-type host.
    pub instance_type: Option<String>,
    /// Physical cores.
    pub cores: u32,
    /// Sockets.
    pub sockets: u32,
    /// vCPUs of the whole host.
    pub total_vcpus: u32,
    /// Instances of each type that still fitted after allocation.
    pub available: Vec<(String, u32)>,
}

/// One tenant's instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// Tenant name.
    pub tenant: String,
    /// `test`, `neighbor` or `endpoint`; none for an instance whose role tag was
    /// missing.
    pub role: Option<Role>,
    /// Instance id, e.g. `i-0123...`.
    pub instance_id: String,
    /// Instance type.
    pub instance_type: String,
    /// Private IP.
    pub private_ip: Option<String>,
    /// Public IP.
    pub public_ip: Option<String>,
    /// The host it ran on.
    pub host_id: Option<String>,
    /// The availability zone it ran in, as DescribeInstances said (version 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    /// Its subnet, as DescribeInstances said (version 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 9 instance record (no zone, no subnet) still reads; a version 10
    /// one keeps them, and `placed` lists each instance where it landed (the
    /// record's zone where the instance's own is unknown), the CPU model left to
    /// the campaign.
    #[test]
    fn instances_record_where_they_landed() {
        let v9 = r#"{"provider":"aws","region":null,"availability_zone":"us-east-1a",
            "host":null,"instances":[{"tenant":"test","role":"test","instance_id":"i-1",
            "instance_type":"t3.micro","private_ip":"10.0.1.5","public_ip":null,
            "host_id":null}],"security_groups":[]}"#;
        let mut record: CloudRecord = serde_json::from_str(v9).expect("a v9 record");
        assert_eq!(record.instances[0].availability_zone, None);
        let json = serde_json::to_string(&record).expect("json");
        assert!(!json.contains("subnet_id"), "{json}");
        record.instances.push(InstanceRecord {
            tenant: "endpoint".into(),
            role: Some(Role::Endpoint),
            instance_id: "i-2".into(),
            instance_type: "m5.large".into(),
            private_ip: Some("10.0.2.7".into()),
            public_ip: None,
            host_id: None,
            availability_zone: Some("us-east-1b".into()),
            subnet_id: Some("subnet-b".into()),
        });
        let back: CloudRecord =
            serde_json::from_str(&serde_json::to_string(&record).expect("json")).expect("read");
        assert_eq!(back, record);
        let placed = record.placed();
        assert_eq!(placed.len(), 2);
        assert_eq!(placed[0].zone.as_deref(), Some("us-east-1a"));
        assert_eq!(placed[0].instance_type.as_deref(), Some("t3.micro"));
        assert_eq!(placed[0].private_ip.as_deref(), Some("10.0.1.5"));
        assert_eq!(placed[1].zone.as_deref(), Some("us-east-1b"));
        assert_eq!(placed[1].subnet_id.as_deref(), Some("subnet-b"));
        assert_eq!(placed[1].role, Some(Role::Endpoint));
        assert!(placed.iter().all(|p| p.cpu_model.is_none()));
    }
}
