//! What a run asks EC2 for, and what it got back.

use std::net::IpAddr;

use nnb_format::Role;
use serde::Serialize;

use super::Tags;

/// The dedicated host to allocate: a whole family (mixed sizes) or one instance type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKind {
    /// A family host, e.g. "m5": any size of the family, limited by the host's vCPUs.
    Family(String),
    /// A single-type host, e.g. "m5.large": only that size, limited by instances per host.
    Type(String),
}

/// Where one instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On the run's dedicated host (the tenants).
    Host,
    /// On the second dedicated host, [`LaunchPlan::server_host`] (mirrored servers,
    /// as the thesis ran them: the clients on one host, their servers on another).
    ServerHost,
    /// Default tenancy in the same subnet, on no dedicated host and not counted
    /// against one (the endpoint, the sink and reflector that stand for the world
    /// outside the host; or mirrored servers when asked).
    Default,
}

/// One tenant to launch on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantLaunch {
    /// The tenant's name in the experiment (also tag `nnb:tenant`).
    pub name: String,
    /// Test for the measured node, neighbor for the others, endpoint for the off-host
    /// peer of network experiments and for mirrored servers (tag `nnb:role`).
    pub role: Role,
    /// EC2 instance type, e.g. "m5.large".
    pub instance_type: String,
    /// Where it runs.
    pub place: Place,
}

impl TenantLaunch {
    /// Whether this tenant goes on the run's dedicated host.
    pub fn on_host(&self) -> bool {
        self.place == Place::Host
    }
}

/// The security group of the tenants: existing groups, or one nnb creates for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecurityGroupPlan {
    /// Use these group ids as they are.
    Existing(Vec<String>),
    /// Create a group opening only the agent port (TCP) and the probe ports (UDP), only to `cidrs`.
    Create {
        /// The VPC; when `None` it is the VPC of the plan's subnet.
        vpc_id: Option<String>,
        /// TCP port of `nnb agent`.
        agent_port: u16,
        /// UDP ports of the netlat reflector and sink.
        probe_ports: Vec<u16>,
        /// Who may connect: the VPC's CIDR and/or the controller's address (/32).
        cidrs: Vec<String>,
    },
}

/// The placement group nnb creates for a default-tenancy run, launches every
/// instance into and deletes at teardown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementGroupPlan {
    /// EC2's strategy: `cluster`, `spread` or `partition`.
    pub strategy: String,
    /// Partitions of a `partition` group; `None` for the others.
    pub partitions: Option<u32>,
}

/// Everything one run needs from EC2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchPlan {
    /// The dedicated host to allocate; `None` for a default-tenancy run, whose
    /// tenants are all [`Place::Default`].
    pub host: Option<HostKind>,
    /// The second dedicated host, for the tenants placed on [`Place::ServerHost`]
    /// (mirrored servers); `None`: none is allocated.
    pub server_host: Option<HostKind>,
    /// Availability zone of the host, e.g. "us-east-1a".
    pub availability_zone: String,
    /// Test node first, then neighbors: the launch order.
    pub tenants: Vec<TenantLaunch>,
    /// AMI of every tenant.
    pub image_id: String,
    /// Subnet (in `availability_zone`); `None` uses the default VPC's subnet.
    pub subnet_id: Option<String>,
    /// EC2 key pair for SSH, if any.
    pub key_name: Option<String>,
    /// Instance profile name or ARN (needed to fetch nnb from S3).
    pub iam_instance_profile: Option<String>,
    /// Security group to use or create.
    pub security_group: SecurityGroupPlan,
    /// The placement group to create for the run; `None`: none.
    pub placement_group: Option<PlacementGroupPlan>,
    /// Cloud-init user data, already rendered by [`crate::userdata::render`] (sent base64-encoded).
    pub user_data: String,
    /// Tags of every resource.
    pub tags: Tags,
}

/// A dedicated host as DescribeHosts reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostInfo {
    /// The host id, "h-...".
    pub host_id: String,
    /// Physical cores (0 when EC2 did not say, as moto does not).
    pub cores: u32,
    /// Sockets (0 when unknown).
    pub sockets: u32,
    /// vCPUs of the whole host (0 when unknown).
    pub total_vcpus: u32,
    /// The family of a family host.
    pub instance_family: Option<String>,
    /// The type of a single-type host.
    pub instance_type: Option<String>,
    /// AvailableCapacity: how many more instances of each type fit (empty when unknown).
    pub available: Vec<(String, u32)>,
}

/// One launched tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Launched {
    /// Tenant name.
    pub tenant: String,
    /// Its role, from its `nnb:role` tag; none when the tag is missing or names no
    /// role.
    pub role: Option<Role>,
    /// The instance id, "i-...".
    pub instance_id: String,
    /// Private address, once assigned.
    pub private_ip: Option<IpAddr>,
    /// Public address, if any.
    pub public_ip: Option<IpAddr>,
    /// The dedicated host it runs on.
    pub host_id: Option<String>,
    /// The availability zone it runs in, as DescribeInstances says.
    pub availability_zone: Option<String>,
    /// Its subnet, as DescribeInstances says.
    pub subnet_id: Option<String>,
    /// EC2 state name, e.g. "pending", "running".
    pub state: String,
}
