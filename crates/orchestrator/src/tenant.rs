//! What a tenant is, as both the experiment model and the providers see it: its
//! [`Role`], its size ([`TenantSpec`]) and the [`Network`] the tenants share.
//!
//! This sits below `experiment` and `provider`, so the experiment model does not
//! import from the providers that run it.

use serde::{Deserialize, Serialize};

/// What a tenant is for in an experiment (defined by the results format).
pub use nnb_format::Role;

/// The name of the endpoint agent (probe reflector and load sink), reserved: no
/// tenant may be called this.
pub const ENDPOINT: &str = "endpoint";

/// A tenant to provide: its name, role and size.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TenantSpec {
    /// Unique name (appears in logs, namespaces and results).
    pub name: String,
    /// Test or neighbor.
    pub role: Role,
    /// vCPUs (logical CPUs) the tenant gets.
    pub vcpus: usize,
}

/// How the tenants are networked.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Network {
    /// All agents on loopback (no network emulation).
    #[default]
    None,
    /// One network namespace per tenant on a bridge whose uplink to the endpoint is
    /// shaped to `host_bw_bps` bits per second (root needed).
    Emulated {
        /// The emulated host NIC's bandwidth, bit/s.
        host_bw_bps: f64,
        /// How the NIC's queue shares it between tenants.
        #[serde(default)]
        queue: NicQueue,
    },
}

/// How an emulated host NIC shares its bandwidth between the tenants sending
/// through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NicQueue {
    /// One drop-tail FIFO for every tenant (a token bucket): a probe queues behind the
    /// neighbors' packets, which is the queueing delay the latency experiments
    /// measure; a saturated link is not split evenly between senders.
    #[default]
    Fifo,
    /// A share per tenant (HTB, one class per tenant address, each guaranteed
    /// host_bw/tenants and lent what others leave): senders at full rate each get
    /// link/senders, like a hypervisor that shapes each VM (the throughput staircase).
    Fair,
}
