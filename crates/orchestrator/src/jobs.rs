//! The typed job protocol between a controller and an agent.
//!
//! Every job an agent can run is a variant of [`JobSpec`]: there is no variant that
//! runs a shell command, so a token holder can burn CPU or send traffic but not
//! execute arbitrary programs. The JSON form is internally tagged by `kind`
//! (kebab-case), e.g. `{"kind": "burn", "workload": "int", ...}`; unknown kinds and
//! unknown fields are rejected.

use nnb_format::JobKind;
use serde::{Deserialize, Serialize};

/// What an agent should run. Measuring jobs (`burn`, `steal`, `latency`) finish on
/// their own and return a result; background jobs (`serve`, `busy`, `idle`, and
/// `load` without a duration) run until stopped or until their deadline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "controller", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum JobSpec {
    /// A pinned burner run (`nnb cpu`): `threads` threads of `workload`, either a
    /// fixed number of operations per thread (`ops`) or a fixed time (`duration_ms`).
    Burn {
        /// Workload name as `nnb cpu --workload` takes it.
        workload: String,
        /// Burner threads.
        threads: usize,
        /// Operations per thread (fixed-work mode).
        ops: Option<u64>,
        /// Run time in milliseconds (fixed-time mode).
        duration_ms: Option<u64>,
        /// Pinning strategy: "none", "cores", "smt-sibling", "compact".
        pin: String,
        /// Explicit CPU list (overrides `pin`); `None` = the CPUs of `scope`.
        cpus: Option<Vec<usize>>,
        /// Which CPUs the threads are placed over (and an explicit `cpus` list is
        /// checked against): `tenant` (the default, left out of the JSON) = the
        /// agent's own CPUs; `host` = every online CPU of the machine, beyond the
        /// agent's affinity, for a tenant without set boundaries (Volpert et al.'s
        /// unrestricted state, the isolation matrix's capacity step).
        #[serde(default, skip_serializing_if = "BurnScope::is_tenant")]
        scope: BurnScope,
    },
    /// Steal/hiccup detection (`nnb steal`) on the given CPUs.
    Steal {
        /// CPUs to watch; `None` = the agent's own CPUs.
        cpus: Option<Vec<usize>>,
        /// How long to watch, in milliseconds.
        duration_ms: u64,
        /// A gap longer than this (ns) counts as a hiccup.
        threshold_ns: u64,
    },
    /// A ping-pong latency probe against a reflector (`nnb latency`).
    Latency {
        /// Reflector address "ip:port".
        target: String,
        /// Measuring time in milliseconds (after the warm-up).
        duration_ms: u64,
        /// UDP payload size in bytes (header included).
        msg_size: usize,
        /// Warm-up discarded before measuring, in milliseconds.
        warmup_ms: u64,
        /// Busy-poll the socket instead of blocking.
        busy_poll: bool,
    },
    /// A rate-paced UDP load generator towards a sink (`nnb load`).
    Load {
        /// Sink address "ip:port".
        target: String,
        /// Aggregate payload rate in bits per second.
        rate_bps: f64,
        /// Parallel streams (sockets).
        streams: usize,
        /// UDP payload size in bytes (header included).
        msg_size: usize,
        /// Run time in milliseconds; `None` = until stopped.
        duration_ms: Option<u64>,
    },
    /// A reflector and a sink (`nnb serve`) on the agent's address, until stopped.
    Serve {
        /// UDP reflector port (0 = ephemeral).
        reflector_port: u16,
        /// UDP sink port (0 = ephemeral).
        sink_port: u16,
    },
    /// A burner of `workload` on `threads` of the agent's CPUs, until stopped: a
    /// busy neighbor.
    Busy {
        /// Workload name as `nnb cpu --workload` takes it.
        workload: String,
        /// Burner threads.
        threads: usize,
    },
    /// Nothing, until stopped: an idle neighbor that is nonetheless "up".
    Idle,
}

/// Which CPUs a `burn` job's threads may use.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "controller", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum BurnScope {
    /// The agent's own CPUs (its affinity mask: a local tenant's carved set).
    #[default]
    Tenant,
    /// Every online CPU of the machine (`/sys/devices/system/cpu/online`): the
    /// agent widens the burner threads' affinity to them before starting them, so
    /// unpinned threads are scheduled over the whole host and pinned ones may take
    /// any online CPU. A CPU outside a cgroup cpuset still cannot be used: pinning
    /// to one fails, and unpinned threads get what the kernel allows (the result's
    /// `cpus` says which).
    Host,
}

impl BurnScope {
    /// Whether this is the default scope, [`BurnScope::Tenant`].
    pub fn is_tenant(&self) -> bool {
        *self == BurnScope::Tenant
    }
}

impl JobSpec {
    /// The job's `kind` tag as it appears on the wire, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            JobSpec::Burn { .. } => JobKind::Burn.name(),
            JobSpec::Steal { .. } => "steal",
            JobSpec::Latency { .. } => JobKind::Latency.name(),
            JobSpec::Load { .. } => JobKind::Load.name(),
            JobSpec::Serve { .. } => "serve",
            JobSpec::Busy { .. } => "busy",
            JobSpec::Idle => "idle",
        }
    }
}

/// A request to start a job: the spec and how long it may run. An agent stops a
/// job that outlives its deadline (cooperative jobs through their stop flag; others
/// are marked [`JobState::TimedOut`] and abandoned).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[cfg_attr(feature = "controller", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// What to run.
    pub spec: JobSpec,
    /// Milliseconds after the start at which the agent stops the job.
    pub deadline_ms: u64,
}

/// Identifier an agent gives a started job (unique within that agent).
pub type JobId = String;

/// The answer to `POST /jobs`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Started {
    /// The new job's id.
    pub id: JobId,
}

/// Where a job is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "controller", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Still running.
    Running,
    /// Finished on its own; `result` holds what it measured.
    Done,
    /// Finished with an error; `error` says why.
    Failed,
    /// Stopped on request; background jobs report their final snapshot as `result`.
    Stopped,
    /// Outlived its deadline and was stopped (or abandoned if it cannot be stopped).
    TimedOut,
}

impl JobState {
    /// Whether the job has ended (any state but `Running`).
    pub fn is_final(self) -> bool {
        self != JobState::Running
    }
}

/// A job's state and, once it ended, its result or error.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct JobStatus {
    /// The job's id.
    pub id: JobId,
    /// The job's `kind` tag.
    pub kind: String,
    /// Where the job is.
    pub state: JobState,
    /// The result as JSON, by kind: `burn` `{placement, clock, burn, steal, scope,
    /// cpus}` (placement, `ClockInfo` and `BurnResult` of nnb_burn, the steal on
    /// the pinned CPUs, the job's [`BurnScope`], and the CPUs its threads were
    /// allowed on, read back from the kernel); `busy` `{placement, slices,
    /// total_ops, ops_per_sec}` of one steady burn (`slices`: stop checks over all
    /// threads); `steal` a `StealReport`; `latency` a netlat
    /// `ProbeReport`; `load` a netlat `LoadReport`; `serve` `{reflector, sink}`
    /// (bound addresses) while running, its final `ServeSnapshot` once stopped;
    /// `idle` `null`.
    pub result: Option<serde_json::Value>,
    /// Why the job failed or was cut short.
    pub error: Option<String>,
}

/// What `GET /health` says about an agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Health {
    /// The agent's nnb version.
    pub version: String,
    /// The agent host's CPU topology.
    pub topology: nnb_burn::topology::TopologySummary,
    /// CPUs the agent may run on (its affinity mask).
    pub cpus: Vec<usize>,
    /// Jobs currently running.
    pub running_jobs: usize,
    /// The agent's machine as it captured it when it started: CPU model, kernel,
    /// clocksource, governor, hypervisor, topology, steal ticks (absent from an older
    /// agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<nnb_burn::env::Environment>,
}

/// The JSON body of every error answer (4xx/5xx) of an agent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
}
