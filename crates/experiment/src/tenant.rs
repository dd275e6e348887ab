//! What a tenant is, as both the experiment model and the providers see it: its
//! [`Role`], its size ([`TenantSpec`]) and the [`Network`] the tenants share.
//!
//! This sits below `experiment` and `provider`, so the experiment model does not
//! import from the providers that run it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a tenant is for in an experiment (defined by the results format).
pub use nnb_format::Role;

/// The name of the endpoint agent (probe reflector and load sink), its role's name,
/// reserved: no tenant may be called this.
pub const ENDPOINT: &str = Role::Endpoint.name();

/// Who receives the tenants' probes and loads (the `@sink`, `@reflector` and
/// `@tcp-sink` targets of their jobs): `[provider] servers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Servers {
    /// One endpoint agent runs one `serve` for every tenant (nnb's default).
    #[default]
    Shared,
    /// Every tenant that sends or probes has a server of its own, an agent running
    /// one `serve` that only it sends to: the thesis' setup (§6.1.1, §6.2.1: the
    /// clients on one dedicated host, a paired server per client on another), so no
    /// single receiver takes every tenant's traffic.
    Mirrored,
}

/// The name of the agent serving `client` with mirrored servers, `endpoint@CLIENT`:
/// `@` is not allowed in tenant names, so it is never a tenant's.
pub fn server_name(client: &str) -> String {
    format!("{ENDPOINT}@{client}")
}

/// The name tenant `base` runs under in `technology`, `TENANT@TECHNOLOGY` (e.g.
/// `a@runc`): an isolation matrix over `technologies` runs each tenant once per
/// technology under such names. `@` is not allowed in tenant names, so it is never
/// a tenant's own.
pub fn technology_name(base: &str, technology: nnb_format::Runtime) -> String {
    format!("{base}@{technology}")
}

/// The tenant name a launched tenant's name stands for: `a` for `a@runc`, the name
/// itself where it has no technology.
pub fn base_name(name: &str) -> &str {
    name.split_once('@').map_or(name, |(base, _)| base)
}

/// The slowest rate an emulated link (`host_bw`) or a tenant's `rate` grant may be
/// shaped to, bit/s: `tc` counts rates in whole bytes per second, and 8 kbit/s
/// (1000 bytes/s) already takes over a second per full-size datagram.
pub const MIN_SHAPED_RATE_BPS: f64 = 8e3;
/// The fastest, bit/s: `tc`'s queue limit (20 ms of the rate, in bytes) is a 32-bit
/// number, which 400 Gbit/s (1 GB) leaves room in.
pub const MAX_SHAPED_RATE_BPS: f64 = 400e9;

/// A tenant to provide: its name, role and size.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TenantSpec {
    /// Unique name (appears in logs, namespaces and results).
    pub name: String,
    /// Test or neighbor.
    pub role: Role,
    /// vCPUs (logical CPUs) the tenant gets.
    pub vcpus: usize,
    /// The technology its agent runs inside (local provider).
    #[serde(default)]
    pub runtime: nnb_format::Runtime,
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

/// What a tenant is granted, enforced on the host by the local provider: a cgroup
/// per tenant with a CPU quota (on top of its cpuset of vCPUs), a memory limit and
/// I/O limits on one disk, and a token bucket on its network interface (Volpert et
/// al.'s per-tenant quota). `None` is no limit; the default grants nothing beyond
/// the tenant's vCPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TenantGrant {
    /// CPU quota, CPUs (0.5 = half of one CPU's time, over a 100 ms period).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<f64>,
    /// Memory limit, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Read operations per second on the disk of `io_dir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
    /// Write operations per second on the disk of `io_dir`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_iops: Option<u64>,
    /// Read bytes per second on that disk (bytes: every `_bps` of nnb is bits;
    /// manifests of format 5 and earlier call it `read_bps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_bytes_per_s: Option<u64>,
    /// Write bytes per second on that disk (`write_bps` in format 5 and earlier).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_bytes_per_s: Option<u64>,
    /// A directory on the disk the I/O limits apply to; `None` = the disk isolation
    /// matrix's directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_dir: Option<PathBuf>,
    /// Network send rate, bit/s (the tenant's interface, emulated network only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<f64>,
}

impl TenantGrant {
    /// Whether it limits nothing.
    pub fn is_empty(&self) -> bool {
        *self == TenantGrant::default()
    }

    /// Whether it limits the tenant's disk I/O.
    pub fn limits_io(&self) -> bool {
        self.read_iops.is_some()
            || self.write_iops.is_some()
            || self.read_bytes_per_s.is_some()
            || self.write_bytes_per_s.is_some()
    }

    /// The operations per second a disk load with `read_fraction` reads can sustain
    /// within the grant: reads are `read_fraction` of the total `T`, so `T` is the
    /// largest value with `read_fraction * T <= read_iops` and
    /// `(1 - read_fraction) * T <= write_iops`. `None` when the grant limits neither
    /// direction the load uses.
    pub fn sustained_iops(&self, read_fraction: f64) -> Option<f64> {
        let bound = |limit: Option<u64>, share: f64| match limit {
            Some(l) if share > 0.0 => Some(l as f64 / share),
            _ => None,
        };
        let reads = bound(self.read_iops, read_fraction);
        let writes = bound(self.write_iops, 1.0 - read_fraction);
        match (reads, writes) {
            (Some(r), Some(w)) => Some(r.min(w)),
            (one, other) => one.or(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_technology_name_maps_back_to_its_tenant() {
        let name = technology_name("a", nnb_format::Runtime::Runc);
        assert_eq!(name, "a@runc");
        assert_eq!(base_name(&name), "a");
        assert_eq!(base_name("b"), "b");
    }

    #[test]
    fn sustained_iops_is_the_tighter_direction() {
        let g = TenantGrant {
            read_iops: Some(300),
            write_iops: Some(100),
            ..TenantGrant::default()
        };
        // Half reads: writes bind at 100 / 0.5 = 200 ops/s (reads would allow 600).
        assert_eq!(g.sustained_iops(0.5), Some(200.0));
        // Only writes: 100; only reads: 300.
        assert_eq!(g.sustained_iops(0.0), Some(100.0));
        assert_eq!(g.sustained_iops(1.0), Some(300.0));
        let writes_only = TenantGrant {
            write_iops: Some(200),
            ..TenantGrant::default()
        };
        // Reads are unlimited: a quarter writes gives 200 / 0.75.
        assert!((writes_only.sustained_iops(0.25).unwrap() - 266.666_666).abs() < 1e-3);
        assert_eq!(writes_only.sustained_iops(1.0), None);
        assert!(TenantGrant::default().is_empty());
        assert!(!writes_only.is_empty() && writes_only.limits_io());
    }
}
