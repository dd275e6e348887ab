//! The names the format gives: the scenario kinds a run may measure, the roles
//! tenants play, the groups of a plan's steps, the states of the isolation matrix's
//! tenants and its level labels, how a session stands and which provider ran it.
//! Each is an enum whose serde name is its name in the files; no reader or writer
//! compares these names as strings.

use std::fmt;
use std::str::FromStr;

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
    /// Wang & Ng's measurements of one pair (seed 003, §III.C), one after another:
    /// CPUTest on both sides, the RTT series, TCP, UDP and Badabing between them.
    PairSuite,
}

impl Scenario {
    /// Every scenario kind, in the order the documentation lists them.
    pub const ALL: [Scenario; 6] = [
        Scenario::NeighborStaircase,
        Scenario::ThreadSweep,
        Scenario::LoadSteps,
        Scenario::IsolationMatrix,
        Scenario::ThroughputStaircase,
        Scenario::PairSuite,
    ];

    /// The names of [`Scenario::ALL`], for messages listing what is accepted.
    pub const NAMES: [&'static str; 6] = [
        Scenario::NeighborStaircase.name(),
        Scenario::ThreadSweep.name(),
        Scenario::LoadSteps.name(),
        Scenario::IsolationMatrix.name(),
        Scenario::ThroughputStaircase.name(),
        Scenario::PairSuite.name(),
    ];

    /// The scenario's name in the format, e.g. `neighbor-staircase`.
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::NeighborStaircase => "neighbor-staircase",
            Scenario::ThreadSweep => "thread-sweep",
            Scenario::LoadSteps => "load-steps",
            Scenario::IsolationMatrix => "isolation-matrix",
            Scenario::ThroughputStaircase => "throughput-staircase",
            Scenario::PairSuite => "pair-suite",
        }
    }

    /// The scenario named `name` in the format, if nnb knows it.
    pub fn from_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What an agent is for in a run (a sample's, a tenant record's and a background
/// record's `role`): an experiment's tenants are the test tenant and its neighbors;
/// the endpoint is the agent the controller adds for the probes and loads to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The measured tenant.
    Test,
    /// A tenant that disturbs the test tenant (busy or idle).
    Neighbor,
    /// The agent standing for the world outside the host: the probes' reflector and
    /// the loads' sink, off the measured host. Never a tenant of an experiment file;
    /// its agent is named after its role (`endpoint`).
    Endpoint,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 3] = [Role::Test, Role::Neighbor, Role::Endpoint];

    /// The role's name in the format: `test`, `neighbor` or `endpoint`.
    pub const fn name(self) -> &'static str {
        match self {
            Role::Test => "test",
            Role::Neighbor => "neighbor",
            Role::Endpoint => "endpoint",
        }
    }

    /// The role named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// The part of a scenario a step belongs to (a sample's `group`, the first part of
/// its step id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepGroup {
    /// Neighbor staircase: the neighbors run their busy job.
    Busy,
    /// Neighbor staircase: the neighbors are up and idle.
    Idle,
    /// Thread sweep.
    Sweep,
    /// Load steps: the test tenant's probe beside an aggregate neighbor load.
    Load,
    /// Isolation matrix: the resource's capacity, tenant a alone using the whole
    /// host (Table 1 id 0).
    Capacity,
    /// Isolation matrix: tenant a alone in one state (ids 1-4).
    Baseline,
    /// Isolation matrix: tenant a beside tenant b (ids 5-16).
    Pair,
    /// Throughput staircase: every present node sending at full rate.
    Throughput,
    /// Pair suite: Wang & Ng's CPUTest (a `steal` job with its trace) on one side
    /// of the pair.
    Cputest,
    /// Pair suite: the RTT series between the pair (an `rtt` job).
    Rtt,
    /// Pair suite: TCPTest, a TCP `load` job between the pair.
    Tcp,
    /// Pair suite: UDPTest, a paced UDP `load` job between the pair.
    Udp,
    /// Pair suite: Badabing between the pair (a `badabing` job).
    Badabing,
}

impl StepGroup {
    /// Every group.
    pub const ALL: [StepGroup; 13] = [
        StepGroup::Busy,
        StepGroup::Idle,
        StepGroup::Sweep,
        StepGroup::Load,
        StepGroup::Capacity,
        StepGroup::Baseline,
        StepGroup::Pair,
        StepGroup::Throughput,
        StepGroup::Cputest,
        StepGroup::Rtt,
        StepGroup::Tcp,
        StepGroup::Udp,
        StepGroup::Badabing,
    ];

    /// The group's name in the format, e.g. `busy`.
    pub const fn name(self) -> &'static str {
        match self {
            StepGroup::Busy => "busy",
            StepGroup::Idle => "idle",
            StepGroup::Sweep => "sweep",
            StepGroup::Load => "load",
            StepGroup::Capacity => "capacity",
            StepGroup::Baseline => "baseline",
            StepGroup::Pair => "pair",
            StepGroup::Throughput => "throughput",
            StepGroup::Cputest => "cputest",
            StepGroup::Rtt => "rtt",
            StepGroup::Tcp => "tcp",
            StepGroup::Udp => "udp",
            StepGroup::Badabing => "badabing",
        }
    }

    /// The group named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<StepGroup> {
        StepGroup::ALL.into_iter().find(|g| g.name() == name)
    }
}

/// A tenant's state in the isolation matrix (Volpert et al.): its demand against its
/// grant for the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TenantState {
    /// Asks for less than its grant.
    Undercommitted,
    /// Asks for its grant.
    Saturated,
    /// Asks for more than its grant.
    Overcommitted,
    /// Runs with its grant lifted, asking for far more.
    Unrestricted,
}

impl TenantState {
    /// Every state, in Table 1's order.
    pub const ALL: [TenantState; 4] = [
        TenantState::Undercommitted,
        TenantState::Saturated,
        TenantState::Overcommitted,
        TenantState::Unrestricted,
    ];

    /// The state's name in the format, e.g. `saturated`.
    pub const fn name(self) -> &'static str {
        match self {
            TenantState::Undercommitted => "undercommitted",
            TenantState::Saturated => "saturated",
            TenantState::Overcommitted => "overcommitted",
            TenantState::Unrestricted => "unrestricted",
        }
    }

    /// Its letter in the paper's short names (`a_s b_o`): `u`, `s`, `o`, or `f`
    /// (free) for unrestricted.
    pub const fn letter(self) -> &'static str {
        match self {
            TenantState::Undercommitted => "u",
            TenantState::Saturated => "s",
            TenantState::Overcommitted => "o",
            TenantState::Unrestricted => "f",
        }
    }

    /// The state named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<TenantState> {
        TenantState::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One level of the isolation matrix, as its steps' `level_label` writes it:
/// `capacity`, `a=STATE` (tenant a alone), `b=STATE` (tenant b alone, version 11:
/// b's baselines, for b's own degradation and Krebs' fairness) or
/// `a=STATE,b=STATE` (a beside b). Runs made before version 11 have no `b=` levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixLevel {
    /// The resource's capacity (group `capacity`).
    Capacity,
    /// Tenant a alone in its state (group `baseline`).
    Alone(TenantState),
    /// Tenant b alone in its state (group `baseline`, version 11).
    NeighborAlone(TenantState),
    /// Tenant a in its state beside tenant b in its (group `pair`).
    Pair(TenantState, TenantState),
}

impl MatrixLevel {
    /// The group of the level's steps.
    pub const fn group(self) -> StepGroup {
        match self {
            MatrixLevel::Capacity => StepGroup::Capacity,
            MatrixLevel::Alone(_) | MatrixLevel::NeighborAlone(_) => StepGroup::Baseline,
            MatrixLevel::Pair(..) => StepGroup::Pair,
        }
    }

    /// Tenant a's state (none in the capacity step and b's baselines).
    pub const fn a(self) -> Option<TenantState> {
        match self {
            MatrixLevel::Capacity | MatrixLevel::NeighborAlone(_) => None,
            MatrixLevel::Alone(a) | MatrixLevel::Pair(a, _) => Some(a),
        }
    }

    /// Tenant b's state (a pair's and b's baselines').
    pub const fn b(self) -> Option<TenantState> {
        match self {
            MatrixLevel::Pair(_, b) | MatrixLevel::NeighborAlone(b) => Some(b),
            MatrixLevel::Capacity | MatrixLevel::Alone(_) => None,
        }
    }
}

impl fmt::Display for MatrixLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatrixLevel::Capacity => f.write_str(StepGroup::Capacity.name()),
            MatrixLevel::Alone(a) => write!(f, "a={a}"),
            MatrixLevel::NeighborAlone(b) => write!(f, "b={b}"),
            MatrixLevel::Pair(a, b) => write!(f, "a={a},b={b}"),
        }
    }
}

/// A level label that is not one of the isolation matrix's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{label}` is not an isolation-matrix level: expected `capacity`, `a=STATE`, \
     `b=STATE` or `a=STATE,b=STATE`, each STATE one of undercommitted, saturated, \
     overcommitted, unrestricted"
)]
pub struct MatrixLevelError {
    /// The label as read.
    pub label: String,
}

impl FromStr for MatrixLevel {
    type Err = MatrixLevelError;

    fn from_str(label: &str) -> Result<MatrixLevel, MatrixLevelError> {
        let err = || MatrixLevelError {
            label: label.to_string(),
        };
        if label == StepGroup::Capacity.name() {
            return Ok(MatrixLevel::Capacity);
        }
        let state = |part: Option<&str>, tenant: &str| {
            part.and_then(|p| p.strip_prefix(tenant)?.strip_prefix('='))
                .and_then(TenantState::from_name)
        };
        let mut parts = label.split(',');
        let first = parts.next();
        if let Some(b) = state(first, "b") {
            return match parts.next() {
                None => Ok(MatrixLevel::NeighborAlone(b)),
                Some(_) => Err(err()),
            };
        }
        let a = state(first, "a").ok_or_else(err)?;
        let level = match parts.next() {
            None => MatrixLevel::Alone(a),
            b => MatrixLevel::Pair(a, state(b, "b").ok_or_else(err)?),
        };
        match parts.next() {
            None => Ok(level),
            Some(_) => Err(err()),
        }
    }
}

/// How a session of a run stands (a manifest session's `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionStatus {
    /// Its controller is measuring (or was, until it died unnoticed).
    Running,
    /// Every step is in the journal (some possibly failed).
    Completed,
    /// Stopped by Ctrl-C or SIGTERM; a resume continues it.
    Interrupted,
    /// A step failed under `on_failure = "abort"`, or the next step would have
    /// gone past the session's cost cap.
    Aborted,
    /// The run went wrong beyond a failed step (the fleet, the results directory).
    Failed,
    /// Found still `running` when the run was resumed: its process ended without
    /// closing it (a `kill -9`, a crash, a power loss).
    Died,
}

impl SessionStatus {
    /// Every status.
    pub const ALL: [SessionStatus; 6] = [
        SessionStatus::Running,
        SessionStatus::Completed,
        SessionStatus::Interrupted,
        SessionStatus::Aborted,
        SessionStatus::Failed,
        SessionStatus::Died,
    ];

    /// The status's name in the format, e.g. `completed`.
    pub const fn name(self) -> &'static str {
        match self {
            SessionStatus::Running => "running",
            SessionStatus::Completed => "completed",
            SessionStatus::Interrupted => "interrupted",
            SessionStatus::Aborted => "aborted",
            SessionStatus::Failed => "failed",
            SessionStatus::Died => "died",
        }
    }
}

/// Which provider runs the tenants (an experiment's `[provider] kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// `nnb agent` child processes on this machine, pinned to CPU sets carved from
    /// its topology.
    Local,
    /// Agents the user already runs, listed in a hosts file.
    Static,
    /// EC2 instances on one dedicated host, launched and torn down by nnb (needs
    /// the `aws` feature).
    Aws,
}

impl ProviderKind {
    /// Every provider kind.
    pub const ALL: [ProviderKind; 3] =
        [ProviderKind::Local, ProviderKind::Static, ProviderKind::Aws];

    /// The kind's name in the format and in experiment files: `local`, `static` or
    /// `aws`.
    pub const fn name(self) -> &'static str {
        match self {
            ProviderKind::Local => "local",
            ProviderKind::Static => "static",
            ProviderKind::Aws => "aws",
        }
    }
}

display_name!(
    Scenario,
    Role,
    StepGroup,
    TenantState,
    SessionStatus,
    ProviderKind
);

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
        assert_eq!(Scenario::from_name("pair-suite"), Some(Scenario::PairSuite));
        assert_eq!(
            ["cputest", "rtt", "tcp", "udp", "badabing"].map(StepGroup::from_name),
            [
                Some(StepGroup::Cputest),
                Some(StepGroup::Rtt),
                Some(StepGroup::Tcp),
                Some(StepGroup::Udp),
                Some(StepGroup::Badabing)
            ]
        );
        for r in Role::ALL {
            assert_eq!(Role::from_name(r.name()), Some(r));
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{r}\""));
        }
        for g in StepGroup::ALL {
            assert_eq!(StepGroup::from_name(g.name()), Some(g));
            assert_eq!(serde_json::to_string(&g).unwrap(), format!("\"{g}\""));
        }
        for s in TenantState::ALL {
            assert_eq!(TenantState::from_name(s.name()), Some(s));
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        for s in SessionStatus::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{s}\""));
        }
        for p in ProviderKind::ALL {
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{p}\""));
        }
        assert_eq!(Role::from_name("tester"), None);
    }

    #[test]
    fn matrix_levels_round_trip_through_their_labels() {
        use TenantState::*;
        let mut levels = vec![MatrixLevel::Capacity];
        levels.extend(TenantState::ALL.map(MatrixLevel::Alone));
        levels.extend(TenantState::ALL.map(MatrixLevel::NeighborAlone));
        for a in TenantState::ALL {
            levels.extend(TenantState::ALL.map(|b| MatrixLevel::Pair(a, b)));
        }
        for level in levels {
            let label = level.to_string();
            assert_eq!(label.parse::<MatrixLevel>(), Ok(level), "{label}");
        }
        assert_eq!(MatrixLevel::Capacity.to_string(), "capacity");
        assert_eq!(MatrixLevel::Alone(Saturated).to_string(), "a=saturated");
        let pair = MatrixLevel::Pair(Saturated, Overcommitted);
        assert_eq!(pair.to_string(), "a=saturated,b=overcommitted");
        assert_eq!(
            (pair.group(), pair.a(), pair.b()),
            (StepGroup::Pair, Some(Saturated), Some(Overcommitted))
        );
        assert_eq!(
            MatrixLevel::Alone(Unrestricted).group(),
            StepGroup::Baseline
        );
        assert_eq!(MatrixLevel::Capacity.a(), None);
        // b's baselines (version 11): b alone, in the baseline group, no a.
        let b = MatrixLevel::NeighborAlone(Overcommitted);
        assert_eq!(b.to_string(), "b=overcommitted");
        assert_eq!(
            (b.group(), b.a(), b.b()),
            (StepGroup::Baseline, None, Some(Overcommitted))
        );
    }

    #[test]
    fn a_bad_matrix_label_is_an_error_naming_it() {
        for bad in [
            "",
            "a=",
            "a=busy",
            "b=",
            "b=busy",
            "b=saturated,",
            "b=saturated,a=saturated",
            "b=saturated,b=saturated",
            "a=saturated,",
            "a=saturated,a=saturated",
            "a=saturated,b=overcommitted,b=saturated",
            "a=saturated;b=saturated",
            " a=saturated",
            "neighbors=2",
            "Capacity",
        ] {
            let err = bad.parse::<MatrixLevel>().unwrap_err();
            assert_eq!(err.label, bad);
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
    }
}
