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
    },
}
