//! What a local tenant runs in and how an isolation matrix's pair starts (version
//! 11): the [`Runtime`] (technology) a tenant's agent ran inside, as a tenant record
//! and a sample name it, and the [`StartOrder`] of a step's two measured jobs.

use serde::{Deserialize, Serialize};

/// The technology a local tenant's agent (and everything it starts) runs inside: a
/// tenant's `runtime`, an isolation matrix's `technologies`, a sample's
/// `technology`. Volpert et al. compare technologies by the isolation they give; nnb
/// gives each its grant in the runtime's own terms, so what is measured is the
/// runtime's enforcement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// A plain process in a cgroup nnb makes (nnb's own sandbox, the default).
    Process,
    /// An OCI container run by `runc` from a bundle nnb prepares.
    Runc,
    /// An OCI container run by `crun` from the same bundle.
    Crun,
    /// A container run by `podman` (rootful) from nnb's root filesystem.
    Podman,
    /// A container run by the `docker` daemon from nnb's root filesystem.
    Docker,
}

impl Runtime {
    /// Every runtime, in the order the documentation lists them.
    pub const ALL: [Runtime; 5] = [
        Runtime::Process,
        Runtime::Runc,
        Runtime::Crun,
        Runtime::Podman,
        Runtime::Docker,
    ];

    /// The runtime's name in files and records, e.g. `runc`.
    pub const fn name(self) -> &'static str {
        match self {
            Runtime::Process => "process",
            Runtime::Runc => "runc",
            Runtime::Crun => "crun",
            Runtime::Podman => "podman",
            Runtime::Docker => "docker",
        }
    }

    /// The runtime named `name`, if nnb knows it.
    pub fn from_name(name: &str) -> Option<Runtime> {
        Runtime::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Whether this is nnb's own process sandbox (no container runtime).
    pub const fn is_process(&self) -> bool {
        matches!(self, Runtime::Process)
    }
}

impl Default for Runtime {
    /// A plain process, as before version 11.
    fn default() -> Self {
        Runtime::Process
    }
}

/// Which runtime and version ran a tenant (a tenant record's `runtime`, version 11):
/// absent for a plain process in older records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeRecord {
    /// The technology.
    pub runtime: Runtime,
    /// What the runtime said its version was (`runc --version`'s first line, ...);
    /// `None` for a plain process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The container's id or name, where the runtime made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The cgroup the host-side accounting read (the container's own, where the
    /// runtime made it), as a path under the cgroup mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

/// Which of an isolation matrix pair's two measured jobs starts first (Volpert et
/// al. saw the order matter, §6.2): together (nnb's default before version 11), or
/// one tenant's job a stagger before the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum StartOrder {
    /// Both jobs posted at once.
    #[default]
    Together,
    /// Tenant a's job first, b's a stagger later.
    AFirst,
    /// Tenant b's job first, a's a stagger later.
    BFirst,
}

impl StartOrder {
    /// Every order.
    pub const ALL: [StartOrder; 3] = [StartOrder::Together, StartOrder::AFirst, StartOrder::BFirst];

    /// The order's name in files and records, e.g. `a-first`.
    pub const fn name(self) -> &'static str {
        match self {
            StartOrder::Together => "together",
            StartOrder::AFirst => "a-first",
            StartOrder::BFirst => "b-first",
        }
    }

    /// The order named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<StartOrder> {
        StartOrder::ALL.into_iter().find(|o| o.name() == name)
    }
}

/// How a step's measured jobs were started (a sample's `start`, version 11): the
/// order and the stagger between the first job's start and the second's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StepStart {
    /// Which job went first.
    pub order: StartOrder,
    /// Milliseconds between the first job's start and the other's (0 = together).
    pub stagger_ms: u64,
}

display_name!(Runtime, StartOrder);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde() {
        for r in Runtime::ALL {
            assert_eq!(Runtime::from_name(r.name()), Some(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{r}\""));
        }
        for o in StartOrder::ALL {
            assert_eq!(StartOrder::from_name(o.name()), Some(o));
            assert_eq!(serde_json::to_string(&o).unwrap(), format!("\"{o}\""));
        }
        assert_eq!(Runtime::from_name("lxc"), None);
    }
}
