//! The scenario kinds a run may measure and the roles tenants play, as the format
//! names them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The kind of experiment a run measured (a sample's `scenario`, the experiment's
/// `scenario.kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Test node beside 0..n busy or idle neighbors (thesis 5.2).
    NeighborStaircase,
    /// Test node with 1..n threads (thesis 5.1).
    ThreadSweep,
    /// Latency probe while neighbors push an aggregate load (thesis 6.2).
    LoadSteps,
    /// Volpert et al.'s tenant-state pairs (seed 004, Table 1).
    IsolationMatrix,
    /// Every node sending at full rate as nodes join one at a time; each node's
    /// throughput per level (thesis 6.1).
    ThroughputStaircase,
}

impl Scenario {
    /// Every scenario kind, in the order the documentation lists them.
    pub const ALL: [Scenario; 5] = [
        Scenario::NeighborStaircase,
        Scenario::ThreadSweep,
        Scenario::LoadSteps,
        Scenario::IsolationMatrix,
        Scenario::ThroughputStaircase,
    ];

    /// The names of [`Scenario::ALL`], for messages listing what is accepted.
    pub const NAMES: [&'static str; 5] = [
        Scenario::NeighborStaircase.name(),
        Scenario::ThreadSweep.name(),
        Scenario::LoadSteps.name(),
        Scenario::IsolationMatrix.name(),
        Scenario::ThroughputStaircase.name(),
    ];

    /// The scenario's name in the format, e.g. `neighbor-staircase`.
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::NeighborStaircase => "neighbor-staircase",
            Scenario::ThreadSweep => "thread-sweep",
            Scenario::LoadSteps => "load-steps",
            Scenario::IsolationMatrix => "isolation-matrix",
            Scenario::ThroughputStaircase => "throughput-staircase",
        }
    }

    /// The scenario named `name` in the format, if nnb knows it.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a tenant is for in an experiment (a sample's `role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The measured tenant.
    Test,
    /// A tenant that disturbs the test tenant (busy or idle).
    Neighbor,
}

impl Role {
    /// The role's name in the format: `test` or `neighbor`.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Test => "test",
            Role::Neighbor => "neighbor",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::from_name(s.name()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(Scenario::NAMES[2], "load-steps");
        for r in [Role::Test, Role::Neighbor] {
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{r}\""));
        }
    }
}
