//! Experiments as code: the TOML experiment file, checked into a typed [`Experiment`].
//!
//! A file names its tenants, provider, repetitions and one scenario (neighbor
//! staircase, thread sweep, load steps, isolation matrix, throughput staircase, pair suite). Every mistake is reported
//! as a [`Diagnostic`] that names the file, line and column (unknown keys, wrong
//! types, bad units, impossible sizes, bad ranges, unknown scenarios), so the user
//! fixes the file before any agent starts.
//!
//! The file is read twice: first only `scenario.kind`, then the whole file as the
//! struct of that scenario kind. Keeping the scenario out of a serde-tagged enum keeps
//! the spans of its values (serde buffers tagged content and loses them).

pub mod aws;
pub mod campaign;
pub mod command;
pub mod credits;
pub mod diagnostic;
pub mod file;
mod isolation;
mod matrix_timing;
pub mod pair;
pub mod plan;
mod servers;
pub mod tenant;
mod values;

use std::path::{Path, PathBuf};
use std::time::Duration;

use nnb_agent::jobs::JobSpec;
use nnb_format::{ProviderKind, Runtime, Scenario as ScenarioKind, StepGroup, StepStart};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::tenant::TenantSpec;
pub use crate::tenant::{Network, NicQueue, Role, Servers, TenantGrant};
pub use aws::{AgentInstall, AwsHost, AwsSpec, PlacementGroup, ServerTenancy};
pub use command::TestWorkload;
pub use diagnostic::Diagnostic;
use file::{
    BurnFile, BusyKindFile, ExperimentFile, KindProbe, LoadStepsFile, LoadsFile, MatrixFile,
    NeighborStateFile, NetworkMode, NicQueueFile, PairSuiteFile, RoleFile, ScenarioSchema, Spanned,
    StaircaseFile, SweepFile, ThroughputStaircaseFile, UnusedNeighborsFile,
};
pub use pair::{BadabingProbe, Cputest, Measurement, PairSuite, RttSeries, TcpTest, UdpTest};

/// Default test and busy workload: the thesis' `cpu_burn` loop.
/// Default UDP payload of load generators, bytes.
const DEFAULT_LOAD_MSG: usize = 1400;
/// A throughput staircase node's default rate without an emulated link: 10 Gbit/s,
/// an m5's burst bandwidth.
const DEFAULT_NODE_RATE_BPS: f64 = 10e9;

/// The largest experiment file nnb reads, bytes (1 MiB). An experiment file is a few
/// KB; a run stores its text in `manifest.json`, which `nnb analyze` reads only up
/// to 16 MiB, so a larger file would be measured and then be unreadable.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// The most tenants an experiment may define, `count`s expanded. Each is an agent
/// (on aws an instance); a dedicated host holds at most a few hundred.
pub const MAX_TENANTS: usize = 1024;
/// The most steps a plan may have: levels times (repetitions + warm-ups). The
/// plan is built whole before the run (and printed whole by `--dry-run`).
pub const MAX_STEPS: u64 = 100_000;
/// The most tenant entries a plan may hold: steps times tenants (each step lists
/// the tenants present and their jobs), which bounds the plan's memory.
pub const MAX_TENANT_STEPS: u64 = 1_000_000;
/// The longest tenant name: it becomes part of file names, cgroup paths and step
/// ids.
pub const MAX_TENANT_NAME: usize = 64;

/// Why an experiment file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The file could not be read.
    #[error("cannot read experiment file {path}: {source}")]
    Read {
        /// The file as named.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error(
        "experiment file {path} is larger than {} KiB, the limit (an experiment file is a \
         few KB: is it the right file?)",
        MAX_FILE_BYTES >> 10
    )]
    TooLarge {
        /// The file as named.
        path: String,
    },
    /// The file is not a valid experiment; the diagnostic says where and why.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
}

impl ExperimentError {
    /// The located error, when the file was read but is invalid.
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            ExperimentError::Invalid(d) => Some(d),
            ExperimentError::Read { .. } | ExperimentError::TooLarge { .. } => None,
        }
    }
}

/// A checked experiment, ready to be expanded into a plan.
#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    /// Name, for results and summaries.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Where the tenants run.
    pub provider: Provider,
    /// Measured repetitions per level.
    pub repetitions: u32,
    /// Warm-up repetitions per level (recorded, flagged `warmup`).
    pub warmup: u32,
    /// Pause after neighbor jobs change, before measuring.
    #[serde(serialize_with = "values::serialize_ms", rename = "settle_ms")]
    pub settle: Duration,
    /// Longest a step may take.
    #[serde(serialize_with = "values::serialize_ms", rename = "step_timeout_ms")]
    pub step_timeout: Duration,
    /// What a failed step leads to.
    pub on_failure: OnFailure,
    /// The tenants' network.
    pub network: Network,
    /// Every tenant, count-expanded, in file order.
    pub tenants: Vec<TenantDef>,
    /// What is measured.
    pub scenario: Scenario,
    /// Where the results are uploaded after the run (`s3://bucket/prefix`; the run
    /// id is appended), from `results_s3` in `[provider]` (any provider kind).
    pub results_s3: Option<String>,
    /// Who receives the tenants' probes and loads (`[provider] servers`).
    pub servers: Servers,
    /// UDP sink sockets of the endpoint and of each server (`[provider]
    /// sink_threads`); `None`: the serve job's default, one per CPU.
    pub sink_threads: Option<usize>,
    /// The rounds this experiment is repeated over (`[campaign]`); `None`: one run.
    pub campaign: Option<campaign::Campaign>,
}

/// Where the tenants run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Provider {
    /// Child agents on this machine.
    Local,
    /// Agents listed in a hosts file, with a shared token.
    Static {
        /// The hosts file.
        hosts: PathBuf,
        /// The token file.
        token_file: PathBuf,
    },
    /// EC2 instances on one dedicated host.
    Aws(Box<AwsSpec>),
}

impl Provider {
    /// The kind as written in the file.
    pub fn kind(&self) -> ProviderKind {
        match self {
            Provider::Local => ProviderKind::Local,
            Provider::Static { .. } => ProviderKind::Static,
            Provider::Aws(_) => ProviderKind::Aws,
        }
    }

    /// Ports of the endpoint's reflector and sink (UDP): fixed on aws, where the
    /// security group opens them; 0 (any free port) elsewhere.
    pub fn serve_ports(&self) -> (u16, u16) {
        match self {
            Provider::Aws(a) => a.serve_ports(),
            Provider::Local | Provider::Static { .. } => (0, 0),
        }
    }

    /// vCPUs of the host the tenants share, when the experiment fixes it (a
    /// dedicated host's, from the catalog); `None` for the machine nnb runs on or
    /// hosts nnb does not know.
    pub fn host_vcpus(&self) -> Option<usize> {
        match self {
            Provider::Aws(a) => Some(a.host_vcpus()),
            Provider::Local | Provider::Static { .. } => None,
        }
    }
}

/// What a failed step leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum OnFailure {
    /// Try the step again up to `times` more times, then record it failed and go on.
    Retry {
        /// Extra attempts.
        times: u32,
    },
    /// Record the step failed and go on.
    Skip,
    /// Record the step failed and stop the run cleanly.
    Abort,
}

/// One tenant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantDef {
    /// Unique name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// Test or neighbor.
    pub role: Role,
    /// Size in vCPUs.
    pub vcpus: usize,
    /// What it is granted beyond its vCPUs (local provider).
    #[serde(skip_serializing_if = "TenantGrant::is_empty")]
    pub grant: TenantGrant,
    /// The technology its agent runs inside (local provider; default a plain
    /// process in a cgroup of nnb's).
    #[serde(skip_serializing_if = "Runtime::is_process")]
    pub runtime: Runtime,
}

/// How much a burner does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BurnAmount {
    /// Fixed work: operations per thread, or in all with a shared pool (the result
    /// is a runtime).
    Ops(u64),
    /// Fixed time (the result is a throughput).
    #[serde(serialize_with = "values::serialize_ms")]
    DurationMs(Duration),
}

/// A burner run on the test tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Burn {
    /// Workload name (checked against nnb-burn's workloads).
    pub workload: String,
    /// Threads.
    pub threads: usize,
    /// Fixed work or fixed time.
    pub amount: BurnAmount,
    /// Pinning strategy name (checked).
    pub pin: String,
    /// Where fixed work's ops come from (per thread or one shared pool).
    pub pool: nnb_format::EventPool,
}

/// What neighbors do at a staircase level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NeighborState {
    /// Run the busy workload.
    Busy,
    /// Run nothing.
    Idle,
}

impl NeighborState {
    /// The group of the staircase's steps in this state (the first part of their ids).
    pub fn group(self) -> StepGroup {
        match self {
            NeighborState::Busy => StepGroup::Busy,
            NeighborState::Idle => StepGroup::Idle,
        }
    }
}

/// What a busy neighbor runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Busy {
    /// A burner until stopped.
    Burner {
        /// Workload name.
        workload: String,
        /// Threads; `None` = the neighbor's vCPUs.
        threads: Option<usize>,
    },
    /// UDP (or TCP) load towards the sink until stopped.
    Load {
        /// Each neighbor's rate, bit/s.
        rate_bps: f64,
        /// Streams per neighbor.
        streams: usize,
        /// Payload bytes.
        msg_size: usize,
        /// Wang & Ng's settings (protocol, buffers, byte bound, pacing chunk).
        #[serde(skip_serializing_if = "nnb_agent::jobs::LoadOptions::is_default")]
        options: nnb_agent::jobs::LoadOptions,
    },
    /// A program until stopped (its whole process tree).
    Command(nnb_agent::jobs::CommandSpec),
}

/// What the neighbors a level leaves out are: a staircase's above its level, load
/// steps' at zero load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnusedNeighbors {
    /// Not there: staircase level k has exactly the test tenant and k neighbors
    /// running, load steps' zero level the test tenant alone (the thesis' method: idle
    /// VMs slow the test node just by being on the host, and its latency baseline,
    /// §6.2.1, had only the test client and its server).
    Absent,
    /// Running idle: every tenant is up at every level (hosts nnb cannot start or
    /// stop, such as the static provider's).
    Idle,
}

impl UnusedNeighbors {
    /// What a file's `unused_neighbors` asks for. A file that says nothing gets
    /// [`UnusedNeighbors::Absent`], in a staircase and in load steps alike: that is
    /// how the thesis measured both (its neighbors were launched after the level
    /// that leaves them out), and a provider that cannot start or stop them refuses
    /// the file with a hint to say "idle", rather than measuring something else.
    fn from_file(f: Option<UnusedNeighborsFile>) -> UnusedNeighbors {
        match f {
            None | Some(UnusedNeighborsFile::Absent) => UnusedNeighbors::Absent,
            Some(UnusedNeighborsFile::Idle) => UnusedNeighbors::Idle,
        }
    }
}

/// The neighbor staircase (thesis 5.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Staircase {
    /// Neighbor counts, ascending, starting at 0.
    pub levels: Vec<usize>,
    /// Busy, idle, or both in that order.
    pub states: Vec<NeighborState>,
    /// What the neighbors above a level are.
    pub unused: UnusedNeighbors,
    /// What busy neighbors run.
    pub busy: Busy,
    /// The test workload: the burner or a command.
    pub test: TestWorkload,
}

/// The thread sweep on the test tenant (thesis 5.5).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadSweep {
    /// Thread counts in order.
    pub threads: Vec<usize>,
    /// The workload (threads replaced by each count).
    pub test: Burn,
}

/// The latency probe of the load-steps scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// Measuring time.
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Discarded warm-up.
    #[serde(serialize_with = "values::serialize_ms", rename = "warmup_ms")]
    pub warmup: Duration,
    /// Payload bytes.
    pub msg_size: usize,
    /// Busy-poll the socket.
    pub busy_poll: bool,
}

/// Neighbors' aggregate load in steps, probe on the test tenant (thesis 6.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadSteps {
    /// Aggregate neighbor load per level, bit/s, in order.
    pub levels_bps: Vec<f64>,
    /// Streams per neighbor.
    pub streams: usize,
    /// Load payload bytes.
    pub msg_size: usize,
    /// Wang & Ng's settings of the neighbors' loads.
    #[serde(skip_serializing_if = "nnb_agent::jobs::LoadOptions::is_default")]
    pub options: nnb_agent::jobs::LoadOptions,
    /// The probe.
    pub probe: Probe,
    /// The neighbors at a zero-load level: absent (the test tenant alone, the
    /// thesis' baseline) or idle. Every tenant is present at the levels above zero.
    pub unused: UnusedNeighbors,
}

impl LoadSteps {
    /// Whether the neighbors are left out at some level (a zero-load level with
    /// them absent), so tenants come and go.
    fn leaves_neighbors_out(&self) -> bool {
        self.unused == UnusedNeighbors::Absent && self.levels_bps.iter().any(|&b| b <= 0.0)
    }
}

/// Which resource the isolation matrix stresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resource {
    /// CPU burners.
    Cpu,
    /// Memory allocated and kept touched (`stress-ng --vm --vm-keep`).
    Memory,
    /// Paced random reads and writes with direct I/O (`fio --rate_iops`).
    Disk,
    /// UDP load.
    Network,
}

/// The disk load of a disk isolation matrix: where and how its generator reads and
/// writes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskLoad {
    /// Directory of the generator's file.
    pub dir: PathBuf,
    /// Share of reads, 0 to 1.
    pub read_fraction: f64,
    /// Operations in flight.
    pub queue_depth: usize,
    /// Bytes per operation.
    pub block_size: usize,
    /// The file's size, bytes.
    pub file_size: u64,
}

/// The isolation matrix (Volpert et al.): tenant a = the test tenant, b = the one
/// neighbor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IsolationMatrix {
    /// The stressed resource.
    pub resource: Resource,
    /// Measuring time per scenario.
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// cpu: burner workload.
    pub workload: String,
    /// network: a tenant's saturating rate, bit/s.
    pub share_bps: Option<f64>,
    /// network: payload bytes.
    pub msg_size: usize,
    /// disk: the generator's settings.
    pub disk: Option<DiskLoad>,
    /// memory: what an unrestricted tenant allocates, bytes; `None` = 4 times its
    /// grant.
    pub unrestricted_bytes: Option<u64>,
    /// The technologies the matrix is run in, one after another (each with its own
    /// `TENANT@TECHNOLOGY` tenants); empty = the tenants' own `runtime` only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub technologies: Vec<Runtime>,
    /// How a pair's two measured jobs start (order and stagger).
    pub start: StepStart,
    /// How often the host-side usage is read over a measured step (`usage_interval`,
    /// default [`DEFAULT_USAGE_INTERVAL`]); its CPU cost is recorded beside it.
    pub usage_interval: Duration,
}

/// How often the host reads each tenant's counters by default (an isolation
/// matrix's `usage_interval`; every other local run's interval): a few cgroup files
/// per tenant every 20 ms.
pub const DEFAULT_USAGE_INTERVAL: Duration = Duration::from_millis(20);

/// Nodes join one at a time, every node present sending at full rate; each node's
/// throughput per level (thesis 6.1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputStaircase {
    /// Neighbor counts, ascending, starting at 0 (level k has k + 1 nodes).
    pub levels: Vec<usize>,
    /// Each node's UDP payload rate, bit/s.
    pub rate_bps: f64,
    /// UDP streams per node.
    pub streams: usize,
    /// Payload bytes.
    pub msg_size: usize,
    /// How the nodes' loads run across levels.
    pub loads: Loads,
    /// How long the nodes send at each level ([`Loads::RestartPerLevel`]).
    #[serde(serialize_with = "values::serialize_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Throughput sampling interval.
    #[serde(serialize_with = "values::serialize_ms", rename = "sample_interval_ms")]
    pub sample_interval: Duration,
    /// Samples each node's recorded rate averages (the latest ones).
    pub window: usize,
    /// The bandwidth the degradation is measured against, bit/s; `None` = level 0's
    /// rate.
    pub baseline_bps: Option<f64>,
    /// Wang & Ng's settings of the nodes' loads (UDP only: sampled).
    #[serde(skip_serializing_if = "nnb_agent::jobs::LoadOptions::is_default")]
    pub options: nnb_agent::jobs::LoadOptions,
}

/// How a throughput staircase's nodes send across levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Loads {
    /// Each node's load starts at the level where it joins and runs, unstopped,
    /// to the end of the staircase; each level's figure per node is the mean of the
    /// latest `window` samples of the sink's arrival series, taken after the level
    /// settled (the thesis ran each client as one `iperf3 -t 3600` "to ensure
    /// steady-state" and averaged the latest 20 one-second points after each
    /// addition, §6.1.1).
    Continuous,
    /// Every node present starts a load afresh at each level, sends for `duration`
    /// and stops; its figure is the mean of the latest `window` samples of that run.
    RestartPerLevel,
}

/// The scenario of an experiment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Scenario {
    /// See [`Staircase`].
    NeighborStaircase(Staircase),
    /// See [`ThreadSweep`].
    ThreadSweep(ThreadSweep),
    /// See [`LoadSteps`].
    LoadSteps(LoadSteps),
    /// See [`IsolationMatrix`].
    IsolationMatrix(IsolationMatrix),
    /// See [`ThroughputStaircase`].
    ThroughputStaircase(ThroughputStaircase),
    /// See [`PairSuite`].
    PairSuite(PairSuite),
}

impl Scenario {
    /// The kind as written in the file (and in the results).
    pub fn kind(&self) -> ScenarioKind {
        match self {
            Scenario::NeighborStaircase(_) => ScenarioKind::NeighborStaircase,
            Scenario::ThreadSweep(_) => ScenarioKind::ThreadSweep,
            Scenario::LoadSteps(_) => ScenarioKind::LoadSteps,
            Scenario::IsolationMatrix(_) => ScenarioKind::IsolationMatrix,
            Scenario::ThroughputStaircase(_) => ScenarioKind::ThroughputStaircase,
            Scenario::PairSuite(_) => ScenarioKind::PairSuite,
        }
    }

    /// The levels (steps of one repetition), counted without building them; `None`
    /// for the isolation matrix and the pair suite, whose levels the plan decides.
    fn levels(&self) -> Option<usize> {
        match self {
            Scenario::NeighborStaircase(s) => Some(s.levels.len() * s.states.len()),
            Scenario::ThreadSweep(s) => Some(s.threads.len()),
            Scenario::LoadSteps(s) => Some(s.levels_bps.len()),
            Scenario::ThroughputStaircase(s) => Some(s.levels.len()),
            Scenario::IsolationMatrix(_) | Scenario::PairSuite(_) => None,
        }
    }

    /// Whether tenants are started and stopped between levels (a provider that
    /// cannot do that refuses the experiment).
    pub fn tenants_come_and_go(&self) -> bool {
        match self {
            Scenario::NeighborStaircase(s) => s.unused == UnusedNeighbors::Absent,
            Scenario::ThroughputStaircase(_) => true,
            Scenario::LoadSteps(s) => s.leaves_neighbors_out(),
            // One technology's tenants at a time.
            Scenario::IsolationMatrix(m) => !m.technologies.is_empty(),
            Scenario::ThreadSweep(_) | Scenario::PairSuite(_) => false,
        }
    }
}

impl Experiment {
    /// The test tenant (validation guarantees there is exactly one).
    pub fn test_tenant(&self) -> Option<&TenantDef> {
        self.tenants.iter().find(|t| t.role == Role::Test)
    }

    /// The neighbor tenants in file order.
    pub fn neighbors(&self) -> impl Iterator<Item = &TenantDef> {
        self.tenants.iter().filter(|t| t.role == Role::Neighbor)
    }

    /// The tenants as they are launched: for an isolation matrix over
    /// `technologies`, every tenant once per technology, named `TENANT@TECHNOLOGY`
    /// ([`tenant::technology_name`]) and run in that technology, technology by
    /// technology in the matrix's order, tenants in file order within each (their
    /// steps are never present together); otherwise the tenants as written.
    pub fn launched_tenants(&self) -> Vec<TenantDef> {
        let technologies = match &self.scenario {
            Scenario::IsolationMatrix(m) => m.technologies.as_slice(),
            _ => &[],
        };
        if technologies.is_empty() {
            return self.tenants.clone();
        }
        technologies
            .iter()
            .flat_map(|&runtime| {
                self.tenants.iter().map(move |t| TenantDef {
                    name: tenant::technology_name(&t.name, runtime),
                    runtime,
                    ..t.clone()
                })
            })
            .collect()
    }

    /// The tenants as a provider brings them up (and as a dry run places them), in
    /// launch order ([`Experiment::launched_tenants`]).
    pub fn tenant_specs(&self) -> Vec<TenantSpec> {
        self.launched_tenants()
            .iter()
            .map(|t| TenantSpec {
                name: t.name.clone(),
                role: t.role,
                vcpus: t.vcpus,
                runtime: t.runtime,
            })
            .collect()
    }

    /// The directory a disk isolation matrix's generators write in.
    pub fn disk_dir(&self) -> Option<&Path> {
        match &self.scenario {
            Scenario::IsolationMatrix(IsolationMatrix { disk: Some(d), .. }) => Some(&d.dir),
            _ => None,
        }
    }

    /// Whether its plan runs command jobs ([`plan::Plan::command_tenants`]): the
    /// local provider then starts its agents with `--allow-commands`.
    pub fn runs_commands(&self) -> bool {
        let once = Experiment {
            repetitions: 1,
            warmup: 0,
            ..self.clone()
        };
        !plan::expand(&once, 1).command_tenants().is_empty()
    }

    /// Whether any tenant is granted something beyond its vCPUs.
    pub fn has_grants(&self) -> bool {
        self.tenants.iter().any(|t| !t.grant.is_empty())
    }
}

/// The JSON Schema of experiment files, for editors (`nnb schema`).
pub fn schema() -> schemars::schema::RootSchema {
    schemars::schema_for!(ExperimentFile<ScenarioSchema>)
}

/// Reads and checks the experiment file at `path`. `host_cpus` is the number of
/// online CPUs of the machine that will run local tenants (`None` skips that check).
pub fn load(path: &Path, host_cpus: Option<usize>) -> Result<Experiment, ExperimentError> {
    let src = read(path)?;
    parse(&path.display().to_string(), &src, host_cpus)
}

/// Reads the experiment file at `path`, refusing one over [`MAX_FILE_BYTES`]
/// without reading more than that.
pub fn read(path: &Path) -> Result<String, ExperimentError> {
    use std::io::Read;
    let named = || path.display().to_string();
    let read_error = |source| ExperimentError::Read {
        path: named(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(ExperimentError::TooLarge { path: named() });
    }
    String::from_utf8(bytes).map_err(|e| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text: {e}"),
        ))
    })
}

/// What the checker knows of the machine that runs local tenants, for the checks
/// that depend on it. Every part is optional: `None` or `false` skips its checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Host {
    /// Its online CPUs: no tenant may have more vCPUs.
    pub cpus: Option<usize>,
    /// Its memory (`MemTotal`), bytes: no memory grant or memory load may ask for
    /// more (the agent refuses such loads).
    pub mem_total: Option<u64>,
    /// Check the directories local tenants' disk I/O uses against its filesystems:
    /// they exist, are directories, and lie on a disk (not tmpfs or `/proc`).
    pub paths: bool,
}

impl Host {
    /// This machine, with `cpus` online CPUs, its MemTotal and its filesystems.
    pub fn this_machine(cpus: usize) -> Host {
        Host {
            cpus: Some(cpus),
            mem_total: nnb_burn::memload::mem_total_bytes().ok(),
            paths: true,
        }
    }
}

/// Checks experiment text `src`; `file` names it in diagnostics. `host_cpus` is as
/// in [`load`]; the other checks against the host ([`Host`]) are skipped.
pub fn parse(
    file: &str,
    src: &str,
    host_cpus: Option<usize>,
) -> Result<Experiment, ExperimentError> {
    parse_on(
        file,
        src,
        &Host {
            cpus: host_cpus,
            ..Host::default()
        },
    )
}

/// Checks experiment text `src` for running on `host` (its checks apply to the
/// local provider's tenants); `file` names it in diagnostics.
pub fn parse_on(file: &str, src: &str, host: &Host) -> Result<Experiment, ExperimentError> {
    if src.len() > MAX_FILE_BYTES {
        return Err(ExperimentError::TooLarge {
            path: file.to_string(),
        });
    }
    let mut cx = Checker {
        file,
        src,
        host: *host,
        scenario_span: 0..0,
    };
    let probe: KindProbe = cx.deserialize()?;
    let Some(scenario) = probe.scenario else {
        return Err(cx.error(0..0, "missing [scenario] table (with a `kind`)"));
    };
    let Some(kind) = &scenario.get_ref().kind else {
        return Err(cx.error(scenario.span(), "[scenario] has no `kind`"));
    };
    cx.scenario_span = kind.span();
    let Some(which) = ScenarioKind::from_name(kind.get_ref()) else {
        return Err(cx.error(
            kind.span(),
            format!(
                "unknown scenario kind `{}`: expected one of {}",
                kind.get_ref(),
                ScenarioKind::NAMES.join(", ")
            ),
        ));
    };
    match which {
        ScenarioKind::NeighborStaircase => cx.build(
            cx.deserialize::<ExperimentFile<StaircaseFile>>()?,
            |cx, t, s| cx.staircase(t, s).map(Scenario::NeighborStaircase),
        ),
        ScenarioKind::ThreadSweep => cx.build(
            cx.deserialize::<ExperimentFile<SweepFile>>()?,
            |cx, t, s| cx.sweep(t, s).map(Scenario::ThreadSweep),
        ),
        ScenarioKind::LoadSteps => cx.build(
            cx.deserialize::<ExperimentFile<LoadStepsFile>>()?,
            |cx, t, s| cx.load_steps(t, s).map(Scenario::LoadSteps),
        ),
        ScenarioKind::IsolationMatrix => {
            let f = cx.deserialize::<ExperimentFile<MatrixFile>>()?;
            cx.technologies_are_local(&f)?;
            cx.build(f, |cx, t, s| cx.matrix(t, s).map(Scenario::IsolationMatrix))
        }
        ScenarioKind::ThroughputStaircase => {
            let f = cx.deserialize::<ExperimentFile<ThroughputStaircaseFile>>()?;
            let network = cx.network(&f)?;
            cx.build(f, |cx, t, s| {
                cx.throughput_staircase(t, s, network)
                    .map(Scenario::ThroughputStaircase)
            })
        }
        ScenarioKind::PairSuite => {
            let f = cx.deserialize::<ExperimentFile<PairSuiteFile>>()?;
            let network = cx.network(&f)?;
            let timeout_at = f.step_timeout.as_ref().map(Spanned::span);
            let exp = cx.build(f, |cx, t, s| {
                cx.pair_suite(t, s, network).map(Scenario::PairSuite)
            })?;
            let one_round = Experiment {
                repetitions: 1,
                warmup: 0,
                ..exp.clone()
            };
            cx.pair_fits_timeout(&plan::expand(&one_round, 1), exp.step_timeout, timeout_at)?;
            Ok(exp)
        }
    }
}

/// The checks, with what they need to locate errors.
struct Checker<'a> {
    file: &'a str,
    src: &'a str,
    host: Host,
    /// Where scenario-wide errors point: the scenario's `kind`.
    scenario_span: std::ops::Range<usize>,
}

/// How the provider sizes tenants.
enum Sizing {
    /// Local: a tenant may not be larger than this machine.
    FitHost,
    /// Static: whatever the hosts are.
    Free,
    /// Cloud: every tenant is one instance type.
    Fixed {
        /// The type's vCPUs.
        vcpus: usize,
        /// The type, for messages.
        instance_type: String,
    },
}

/// The test tenant's vCPUs (1 if, impossibly, there is none).
fn test_vcpus(tenants: &[TenantDef]) -> usize {
    tenants
        .iter()
        .find(|t| t.role == Role::Test)
        .map_or(1, |t| t.vcpus)
}

/// How many neighbor tenants there are.
fn neighbor_count(tenants: &[TenantDef]) -> usize {
    tenants.iter().filter(|t| t.role == Role::Neighbor).count()
}

impl Checker<'_> {
    /// An error about the scenario as a whole, pointing at its `kind`.
    fn scenario_error(&self, msg: impl Into<String>) -> ExperimentError {
        self.error(self.scenario_span.clone(), msg)
    }

    fn error(&self, span: std::ops::Range<usize>, msg: impl Into<String>) -> ExperimentError {
        ExperimentError::Invalid(Box::new(Diagnostic::new(self.file, self.src, span, msg)))
    }

    /// Turns a check's message into an error at `v`'s span.
    fn at<T, V>(&self, v: &Spanned<V>, r: Result<T, String>) -> Result<T, ExperimentError> {
        r.map_err(|msg| self.error(v.span(), msg))
    }

    fn deserialize<T: DeserializeOwned>(&self) -> Result<T, ExperimentError> {
        toml::from_str(self.src)
            .map_err(|e| self.error(e.span().unwrap_or(0..0), e.message().trim_end().to_string()))
    }

    /// At least 1, or an error naming `what`.
    fn positive<N: Copy + PartialOrd + From<u8>>(
        &self,
        v: &Spanned<N>,
        what: &str,
    ) -> Result<N, ExperimentError> {
        let n = *v.get_ref();
        self.at(
            v,
            if n >= N::from(1) {
                Ok(n)
            } else {
                Err(format!("{what} must be at least 1"))
            },
        )
    }

    fn opt_positive<N: Copy + PartialOrd + From<u8>>(
        &self,
        v: &Option<Spanned<N>>,
        what: &str,
        default: N,
    ) -> Result<N, ExperimentError> {
        v.as_ref().map_or(Ok(default), |v| self.positive(v, what))
    }

    fn duration(
        &self,
        v: &Option<Spanned<String>>,
        default: Duration,
    ) -> Result<Duration, ExperimentError> {
        v.as_ref()
            .map_or(Ok(default), |v| self.at(v, values::duration(v.get_ref())))
    }

    fn nonzero_duration(
        &self,
        v: &Option<Spanned<String>>,
        default: Duration,
        what: &str,
    ) -> Result<Duration, ExperimentError> {
        let d = self.duration(v, default)?;
        match v {
            // Jobs and deadlines travel in whole milliseconds: less is 0, which the
            // agent refuses.
            Some(v) if nnb_units::millis(d) == 0 => Err(self.error(
                v.span(),
                format!("{what} must be at least 1ms (jobs are timed in whole milliseconds)"),
            )),
            _ => Ok(d),
        }
    }

    /// Streams per sender: at least 1, at most the agent's limit.
    fn streams(&self, v: &Option<Spanned<usize>>) -> Result<usize, ExperimentError> {
        use nnb_agent::jobs::limits::MAX_STREAMS;
        let n = self.opt_positive(v, "streams", 1)?;
        match v {
            Some(v) if n > MAX_STREAMS => Err(self.error(
                v.span(),
                format!("streams = {n} is above the agent's limit of {MAX_STREAMS}"),
            )),
            _ => Ok(n),
        }
    }

    fn workload(&self, v: &Option<Spanned<String>>) -> Result<String, ExperimentError> {
        v.as_ref().map_or(
            Ok(nnb_burn::workload::Workload::DEFAULT.name().to_string()),
            |v| self.at(v, values::workload(v.get_ref())),
        )
    }

    /// Checks the parts every scenario shares, then the scenario with `scenario`.
    fn build<S>(
        &self,
        f: ExperimentFile<S>,
        scenario: impl FnOnce(&Self, &[TenantDef], S) -> Result<Scenario, ExperimentError>,
    ) -> Result<Experiment, ExperimentError> {
        let name = f.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(self.error(f.name.span(), "the experiment needs a name"));
        }
        let provider = self.provider(&f)?;
        let results_s3 = match f.provider.as_ref().and_then(|p| p.results_s3.as_ref()) {
            Some(v) => Some(self.at(v, aws::s3_location(v.get_ref()))?),
            None => None,
        };
        let repetitions = self.opt_positive(&f.repetitions, "repetitions", 3)?;
        let settle = self.duration(&f.settle, Duration::from_secs(1))?;
        let step_timeout =
            self.nonzero_duration(&f.step_timeout, Duration::from_secs(300), "step_timeout")?;
        let on_failure = match &f.on_failure {
            None => OnFailure::Retry { times: 1 },
            Some(v) => self.at(v, values::on_failure(v.get_ref()))?,
        };
        let network = self.network(&f)?;
        if let (Provider::Aws(_), Network::Emulated { .. }, Some(n)) =
            (&provider, network, &f.network)
        {
            return Err(self.error(
                n.mode.span(),
                "an emulated network is for the local provider: on aws the tenants share the host's real NIC",
            ));
        }
        let sizing = match &provider {
            Provider::Local => Sizing::FitHost,
            Provider::Static { .. } => Sizing::Free,
            Provider::Aws(a) => Sizing::Fixed {
                vcpus: a.tenant_vcpus(),
                instance_type: a.instance_type.clone(),
            },
        };
        // The host's memory and filesystems are those of local tenants only.
        let cx = Checker {
            file: self.file,
            src: self.src,
            host: match provider {
                Provider::Local => self.host,
                Provider::Static { .. } | Provider::Aws(_) => Host {
                    cpus: self.host.cpus,
                    ..Host::default()
                },
            },
            scenario_span: self.scenario_span.clone(),
        };
        let tenants = cx.tenants(&f.tenants, &sizing, network)?;
        // nnb makes a tenant's container only where it launches the tenant.
        if let (false, Some(r)) = (
            matches!(provider, Provider::Local),
            f.tenants.get_ref().iter().find_map(|t| t.runtime.as_ref()),
        ) {
            return Err(cx.error(
                r.span(),
                "a tenant's runtime is for the local provider (nnb starts its agent inside \
                 the container): a static host's or an aws instance's agent runs as it is",
            ));
        }
        let scenario = scenario(&cx, &tenants, f.scenario)?;
        cx.check_io_dirs(&f.tenants, &scenario)?;
        if matches!(provider, Provider::Static { .. }) && scenario.tenants_come_and_go() {
            return Err(cx.scenario_error(
                "this scenario starts and stops neighbors between levels, but the static \
                 provider's agents are yours, not nnb's to start or stop: use the local or aws \
                 provider, or keep them running idle with unused_neighbors = \"idle\"",
            ));
        }
        let servers = cx.servers(f.provider.as_ref(), &provider, &scenario)?;
        let sink_threads = cx.sink_threads(f.provider.as_ref())?;
        let exp = Experiment {
            name,
            description: f.description,
            servers,
            sink_threads,
            provider,
            repetitions,
            warmup: f.warmup.as_ref().map_or(0, |w| *w.get_ref()),
            settle,
            step_timeout,
            on_failure,
            network,
            tenants,
            scenario,
            results_s3,
            campaign: None,
        };
        cx.check_plan((f.repetitions.as_ref(), f.warmup.as_ref()), &exp)?;
        let campaign = match &f.campaign {
            Some(c) => Some(cx.campaign(c, &exp)?),
            None => None,
        };
        Ok(Experiment { campaign, ..exp })
    }

    /// Checks the plan `exp` expands to before it is built: its size (at most
    /// [`MAX_STEPS`] steps and [`MAX_TENANT_STEPS`] tenant entries), and every job
    /// of one repetition of each level against what the agent that runs it
    /// accepts (its limits, and on this machine its memory), so that no step
    /// fails on a value the file could have had right.
    /// `written` are the file's `repetitions` and `warmup`, where a plan too large
    /// is reported.
    fn check_plan(
        &self,
        written: (Option<&Spanned<u32>>, Option<&Spanned<u32>>),
        exp: &Experiment,
    ) -> Result<(), ExperimentError> {
        let cpus = exp.provider.host_vcpus().or(self.host.cpus).unwrap_or(1);
        let once = Experiment {
            repetitions: 1,
            warmup: 0,
            ..exp.clone()
        };
        let levels = match exp.scenario.levels() {
            Some(n) => n as u64,
            // Two tenants and a table of at most 17 levels: the plan's to count.
            None => plan::expand(&once, cpus).steps.len() as u64,
        };
        let (reps, warmup) = (exp.repetitions, exp.warmup);
        let steps = levels.saturating_mul(u64::from(reps) + u64::from(warmup));
        let entries = steps.saturating_mul(exp.tenants.len() as u64);
        if steps > MAX_STEPS || entries > MAX_TENANT_STEPS {
            let at = match written {
                (_, Some(w)) if *w.get_ref() > reps => w.span(),
                (Some(r), _) => r.span(),
                (None, Some(w)) => w.span(),
                (None, None) => self.scenario_span.clone(),
            };
            let counted = format!("{levels} levels x ({reps} repetitions + {warmup} warm-ups)");
            return Err(self.error(
                at,
                if steps > MAX_STEPS {
                    format!(
                        "the plan would have {steps} steps ({counted}), above the limit of \
                         {MAX_STEPS}: use fewer repetitions, warm-ups or levels"
                    )
                } else {
                    format!(
                        "the plan would list {entries} tenant entries ({counted} steps x {} \
                         tenants), above the limit of {MAX_TENANT_STEPS}: use fewer \
                         repetitions, levels or tenants",
                        exp.tenants.len()
                    )
                },
            ));
        }
        for step in plan::expand(&once, cpus).steps {
            for a in step.background.iter().chain(&step.measure) {
                if let Err(why) = self.job_fits(&a.job) {
                    return Err(self.scenario_error(format!(
                        "at {}/{}, tenant `{}`'s {} job would be refused by its agent: {why}",
                        step.group,
                        step.level_label,
                        a.tenant,
                        a.job.kind()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether an agent accepts `job`: its limits, and for a memory job of local
    /// tenants, this machine's memory.
    fn job_fits(&self, job: &JobSpec) -> Result<(), String> {
        job.check_limits()?;
        if let (
            JobSpec::Memory {
                bytes,
                workers,
                mode,
                duration_ms,
            },
            Some(total),
        ) = (job, self.host.mem_total)
        {
            let spec = nnb_burn::memload::MemSpec {
                bytes: *bytes,
                mode: mode
                    .parse()
                    .map_err(|e: nnb_burn::memload::UnknownMemMode| e.to_string())?,
                workers: *workers,
                duration: Duration::from_millis(*duration_ms),
            };
            spec.check(total).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn provider<S>(&self, f: &ExperimentFile<S>) -> Result<Provider, ExperimentError> {
        let Some(p) = &f.provider else {
            return Ok(Provider::Local);
        };
        let kind = *p.kind.get_ref();
        if kind != ProviderKind::Static {
            if let Some(v) = p.hosts.as_ref().or(p.token_file.as_ref()) {
                return Err(self.error(
                    v.span(),
                    format!(
                        "`hosts` and `token_file` apply to kind = \"{}\"",
                        ProviderKind::Static
                    ),
                ));
            }
        }
        if kind != ProviderKind::Aws {
            // The first aws-only key in the table.
            if let Some(span) = p.aws_key_spans().into_iter().min_by_key(|r| r.start) {
                return Err(self.error(
                    span,
                    format!("this key applies to kind = \"{}\"", ProviderKind::Aws),
                ));
            }
        }
        match kind {
            ProviderKind::Local => Ok(Provider::Local),
            ProviderKind::Aws => Ok(Provider::Aws(Box::new(self.aws(p)?))),
            ProviderKind::Static => {
                let (Some(hosts), Some(token)) = (&p.hosts, &p.token_file) else {
                    return Err(self.error(
                        p.kind.span(),
                        "a static provider needs `hosts` (the hosts file) and `token_file`",
                    ));
                };
                Ok(Provider::Static {
                    hosts: PathBuf::from(hosts.get_ref()),
                    token_file: PathBuf::from(token.get_ref()),
                })
            }
        }
    }

    fn network<S>(&self, f: &ExperimentFile<S>) -> Result<Network, ExperimentError> {
        let Some(n) = &f.network else {
            return Ok(Network::None);
        };
        let queue = match n.queue.as_ref().map(|q| (q, *q.get_ref())) {
            None => NicQueue::Fifo,
            Some((_, NicQueueFile::Fifo)) => NicQueue::Fifo,
            Some((q, NicQueueFile::Fair)) if *n.mode.get_ref() == NetworkMode::None => {
                return Err(self.error(q.span(), "`queue` applies to mode = \"emulated\""));
            }
            Some((_, NicQueueFile::Fair)) => NicQueue::Fair,
        };
        match (n.mode.get_ref(), &n.host_bw) {
            (NetworkMode::None, None) => Ok(Network::None),
            (NetworkMode::None, Some(bw)) => {
                Err(self.error(bw.span(), "`host_bw` applies to mode = \"emulated\""))
            }
            (NetworkMode::Emulated, None) => Err(self.error(
                n.mode.span(),
                "an emulated network needs `host_bw`, e.g. host_bw = \"200M\"",
            )),
            (NetworkMode::Emulated, Some(bw)) => {
                let bps = self.at(bw, values::shaped_rate(bw.get_ref()))?;
                Ok(Network::Emulated {
                    host_bw_bps: bps,
                    queue,
                })
            }
        }
    }

    fn tenants(
        &self,
        list: &Spanned<Vec<file::TenantFile>>,
        sizing: &Sizing,
        network: Network,
    ) -> Result<Vec<TenantDef>, ExperimentError> {
        let mut out: Vec<TenantDef> = Vec::new();
        let mut test_seen = false;
        for t in list.get_ref() {
            let role = match t.role.get_ref() {
                RoleFile::Test => Role::Test,
                RoleFile::Neighbor => Role::Neighbor,
            };
            let count = self.opt_positive(&t.count, "count", 1)?;
            if out.len() + count > MAX_TENANTS {
                let at = t.count.as_ref().map_or(t.role.span(), Spanned::span);
                return Err(self.error(
                    at,
                    format!(
                        "this makes more than {MAX_TENANTS} tenants, the most an experiment \
                         may have"
                    ),
                ));
            }
            let default_vcpus = match sizing {
                Sizing::Fixed { vcpus, .. } => *vcpus,
                Sizing::FitHost | Sizing::Free => 1,
            };
            let vcpus = self.opt_positive(&t.vcpus, "vcpus", default_vcpus)?;
            match (&t.vcpus, sizing) {
                (Some(v), Sizing::FitHost) => {
                    if let Some(host) = self.host.cpus.filter(|&host| vcpus > host) {
                        return Err(self.error(
                            v.span(),
                            format!("a tenant of {vcpus} vCPUs does not fit: this host has {host} online CPUs"),
                        ));
                    }
                }
                (
                    Some(v),
                    Sizing::Fixed {
                        vcpus: fixed,
                        instance_type,
                    },
                ) if vcpus != *fixed => {
                    return Err(self.error(
                        v.span(),
                        format!("every tenant is a {instance_type} with {fixed} vCPUs: remove `vcpus` or set it to {fixed}"),
                    ));
                }
                _ => {}
            }
            if role == Role::Test {
                if test_seen || count > 1 {
                    return Err(self.error(t.role.span(), "there can be only one test tenant"));
                }
                test_seen = true;
            }
            let base = t
                .name
                .as_ref()
                .map_or(role.name().to_string(), |n| n.get_ref().clone());
            let grant = match &t.grant {
                Some(g) => self.grant(g, vcpus, sizing, network)?,
                None => TenantGrant::default(),
            };
            let runtime = match &t.runtime {
                Some(r) => self.runtime(r)?,
                None => Runtime::Process,
            };
            let name_span = t.name.as_ref().map_or(t.role.span(), |n| n.span());
            if let Err(msg) = values::tenant_name(&base) {
                return Err(self.error(name_span, msg));
            }
            for i in 1..=count {
                let name = if count == 1 {
                    base.clone()
                } else {
                    format!("{base}-{i}")
                };
                if name.len() > MAX_TENANT_NAME {
                    return Err(self.error(
                        name_span,
                        format!(
                            "tenant name `{name}` is {} characters long, above the limit of \
                             {MAX_TENANT_NAME}",
                            name.len()
                        ),
                    ));
                }
                if out.iter().any(|o| o.name == name) {
                    return Err(self.error(name_span, format!("two tenants are named `{name}`")));
                }
                out.push(TenantDef {
                    name,
                    role,
                    vcpus,
                    grant: grant.clone(),
                    runtime,
                });
            }
        }
        if !test_seen {
            return Err(self.error(
                list.span(),
                format!(
                    "no tenant has role = \"{}\": add the tenant to measure",
                    Role::Test
                ),
            ));
        }
        Ok(out)
    }

    /// A tenant's `runtime`: one of [`Runtime::ALL`]'s names.
    fn runtime(&self, v: &Spanned<String>) -> Result<Runtime, ExperimentError> {
        Runtime::from_name(v.get_ref()).ok_or_else(|| {
            self.error(
                v.span(),
                format!(
                    "unknown runtime `{}`: expected one of {}",
                    v.get_ref(),
                    Runtime::ALL.map(Runtime::name).join(", ")
                ),
            )
        })
    }

    /// The test workload; `threads` defaults to the test tenant's vCPUs.
    fn burn(&self, tenants: &[TenantDef], b: &Spanned<BurnFile>) -> Result<Burn, ExperimentError> {
        let f = b.get_ref();
        self.no_command_keys(
            f.command_keys(),
            "a neighbor staircase's command test workload (`command` or `preset`)",
        )?;
        let default_threads = test_vcpus(tenants);
        let amount = match (&f.ops, &f.duration) {
            (Some(_), Some(d)) => {
                return Err(self.error(d.span(), "give either `ops` or `duration`, not both"))
            }
            (Some(ops), None) => BurnAmount::Ops(self.positive(ops, "ops")?),
            (None, Some(_)) => BurnAmount::DurationMs(self.nonzero_duration(
                &f.duration,
                Duration::ZERO,
                "duration",
            )?),
            (None, None) => {
                return Err(self.error(
                    b.span(),
                    "the test workload needs `ops` (fixed work) or `duration` (fixed time)",
                ))
            }
        };
        let pin = match &f.pin {
            None => nnb_burn::placement::PinStrategy::DEFAULT_NAME.to_string(),
            Some(p) => self.at(p, values::pin(p.get_ref()))?,
        };
        let threads = self.opt_positive(&f.threads, "threads", default_threads)?;
        if let Some(t) = &f.threads {
            self.at(t, values::fits(threads, default_threads, &pin))?;
        }
        Ok(Burn {
            workload: self.workload(&f.workload)?,
            threads,
            amount,
            pin,
            pool: f.pool.as_ref().map(|p| *p.get_ref()).unwrap_or_default(),
        })
    }

    /// A staircase's neighbor counts: 0 to `max_neighbors` (default: every neighbor)
    /// by `step`, the top always included; `what` names the scenario in errors.
    fn neighbor_levels(
        &self,
        tenants: &[TenantDef],
        max_neighbors: &Option<Spanned<usize>>,
        step: &Option<Spanned<usize>>,
        what: &str,
    ) -> Result<Vec<usize>, ExperimentError> {
        let available = neighbor_count(tenants);
        if available == 0 {
            return Err(self.scenario_error(format!(
                "{what} needs tenants with role = \"{}\"",
                Role::Neighbor
            )));
        }
        let max = self.opt_positive(max_neighbors, "max_neighbors", available)?;
        if let Some(v) = max_neighbors {
            if max > available {
                return Err(self.error(
                    v.span(),
                    format!(
                        "max_neighbors = {max}, but only {available} neighbor tenants are defined"
                    ),
                ));
            }
        }
        let step = self.opt_positive(step, "step", 1)?;
        let mut levels: Vec<usize> = (0..=max).step_by(step).collect();
        if levels.last() != Some(&max) {
            levels.push(max);
        }
        Ok(levels)
    }

    fn staircase(
        &self,
        tenants: &[TenantDef],
        s: StaircaseFile,
    ) -> Result<Staircase, ExperimentError> {
        let levels =
            self.neighbor_levels(tenants, &s.max_neighbors, &s.step, "a neighbor staircase")?;
        let states = match s.neighbor_state.unwrap_or(NeighborStateFile::Busy) {
            NeighborStateFile::Busy => vec![NeighborState::Busy],
            NeighborStateFile::Idle => vec![NeighborState::Idle],
            NeighborStateFile::Both => vec![NeighborState::Busy, NeighborState::Idle],
        };
        let busy = match &s.busy {
            None => Busy::Burner {
                workload: nnb_burn::workload::Workload::DEFAULT.name().to_string(),
                threads: None,
            },
            Some(b) => self.busy(b)?,
        };
        Ok(Staircase {
            levels,
            states,
            unused: UnusedNeighbors::from_file(s.unused_neighbors),
            busy,
            test: self.test_workload(tenants, &s.test)?,
        })
    }

    fn busy(&self, b: &file::BusyFile) -> Result<Busy, ExperimentError> {
        let kind = match &b.kind {
            Some(k) => *k.get_ref(),
            None if b.command_keys().is_command() => BusyKindFile::Command,
            None => BusyKindFile::Burner,
        };
        if kind != BusyKindFile::Command {
            self.no_command_keys(b.command_keys(), "kind = \"command\"")?;
        }
        match kind {
            BusyKindFile::Command => self.busy_command(b),
            BusyKindFile::Burner => {
                let load_only = (b.rate.as_ref().map(Spanned::span))
                    .or(b.streams.as_ref().map(Spanned::span))
                    .or(b.msg_size.as_ref().map(Spanned::span))
                    .or(b.load_settings().first_span());
                if let Some(span) = load_only {
                    return Err(self.error(
                        span,
                        "`rate`, `streams`, `msg_size`, `protocol`, `send_buffer`, \
                         `recv_buffer`, `bytes` and `pacing_chunk` apply to kind = \"load\"",
                    ));
                }
                let workload = self.workload(&b.workload)?;
                let threads = b
                    .threads
                    .as_ref()
                    .map(|t| self.positive(t, "threads"))
                    .transpose()?;
                Ok(Busy::Burner { workload, threads })
            }
            BusyKindFile::Load => {
                let burner_only = (b.threads.as_ref().map(Spanned::span))
                    .or(b.workload.as_ref().map(Spanned::span));
                if let Some(span) = burner_only {
                    return Err(
                        self.error(span, "`threads` and `workload` apply to kind = \"burner\"")
                    );
                }
                let Some(rate) = &b.rate else {
                    return Err(self.error(
                        b.kind
                            .as_ref()
                            .map_or(self.scenario_span.clone(), Spanned::span),
                        "a load neighbor needs `rate`, e.g. rate = \"150M\"",
                    ));
                };
                Ok(Busy::Load {
                    rate_bps: self.at(rate, values::positive_rate(rate.get_ref()))?,
                    streams: self.streams(&b.streams)?,
                    msg_size: self.msg_size(&b.msg_size, DEFAULT_LOAD_MSG)?,
                    options: self.load_options(b.load_settings())?,
                })
            }
        }
    }

    /// Wang & Ng's load settings of an experiment file ([`file::LoadSettingsFile`])
    /// as a load job's options, each mistake reported at its value: `protocol` is
    /// "tcp" or "udp"; sizes are bytes (an integer, or a string with a unit) with
    /// the socket buffers between [`nnb_netlat::load::MIN_BUFFER`] and
    /// [`nnb_netlat::load::MAX_BUFFER`], the pacing chunk at most the latter, and
    /// the byte bound above zero.
    pub(crate) fn load_options(
        &self,
        f: file::LoadSettingsFile<'_>,
    ) -> Result<nnb_agent::jobs::LoadOptions, ExperimentError> {
        use nnb_netlat::load::{MAX_BUFFER, MIN_BUFFER};
        let tcp = match f.protocol {
            None => false,
            Some(p) => match p.get_ref().as_str() {
                "tcp" => true,
                "udp" => false,
                other => {
                    return Err(self.error(
                        p.span(),
                        format!("protocol = {other:?}: \"tcp\" or \"udp\""),
                    ))
                }
            },
        };
        let size = |v: Option<&Spanned<file::SizeFile>>, what: &str, least: u64, most: u64| {
            v.map(|v| {
                let n = match v.get_ref() {
                    file::SizeFile::Bytes(n) => Ok(*n),
                    file::SizeFile::Text(t) => nnb_units::parse_size(t).map_err(|e| e.to_string()),
                };
                self.at(
                    v,
                    n.and_then(|n| {
                        if (least..=most).contains(&n) {
                            Ok(n)
                        } else {
                            Err(format!("{what} = {n} bytes: between {least} and {most}"))
                        }
                    }),
                )
            })
            .transpose()
        };
        let (lo, hi) = (MIN_BUFFER as u64, MAX_BUFFER as u64);
        Ok(nnb_agent::jobs::LoadOptions {
            tcp,
            send_buffer: size(f.send_buffer, "send_buffer", lo, hi)?,
            recv_buffer: size(f.recv_buffer, "recv_buffer", lo, hi)?,
            bytes: size(f.bytes, "bytes", 1, u64::MAX)?,
            pacing_chunk: size(f.pacing_chunk, "pacing_chunk", 1, hi)?,
            ..Default::default()
        })
    }

    /// The throughput staircase; `network` sets the default rate (twice an emulated
    /// link, so every node asks for more than it can get).
    fn throughput_staircase(
        &self,
        tenants: &[TenantDef],
        s: ThroughputStaircaseFile,
        network: Network,
    ) -> Result<ThroughputStaircase, ExperimentError> {
        let levels =
            self.neighbor_levels(tenants, &s.max_neighbors, &s.step, "a throughput staircase")?;
        let rate = |v: &Option<Spanned<String>>| {
            v.as_ref()
                .map(|v| self.at(v, values::positive_rate(v.get_ref())))
                .transpose()
        };
        let rate_bps = rate(&s.rate)?.unwrap_or(match network {
            Network::Emulated { host_bw_bps, .. } => 2.0 * host_bw_bps,
            Network::None => DEFAULT_NODE_RATE_BPS,
        });
        let loads = match s.loads.as_ref().map(|l| *l.get_ref()) {
            None | Some(LoadsFile::Continuous) => Loads::Continuous,
            Some(LoadsFile::RestartPerLevel) => Loads::RestartPerLevel,
        };
        if let (Loads::Continuous, Some(d)) = (loads, &s.duration) {
            return Err(self.error(
                d.span(),
                "`duration` is how long restart-per-level loads send at each level: continuous \
                 loads run to the end, a level lasting `settle` and `window` x `sample_interval` \
                 (or set loads = \"restart-per-level\")",
            ));
        }
        if let (Loads::Continuous, Some(b)) = (loads, &s.bytes) {
            return Err(self.error(
                b.span(),
                "a byte bound would end a continuous load before the staircase does: \
                 `bytes` needs loads = \"restart-per-level\"",
            ));
        }
        let duration = self.nonzero_duration(&s.duration, Duration::from_secs(30), "duration")?;
        let sample_interval = self.nonzero_duration(
            &s.sample_interval,
            Duration::from_secs(1),
            "sample_interval",
        )?;
        let interval_span = s
            .sample_interval
            .as_ref()
            .map_or(self.scenario_span.clone(), Spanned::span);
        let window = match &s.window {
            None => nnb_netlat::load::DEFAULT_WINDOW,
            Some(w) => self.positive(w, "window")?,
        };
        let window_at = s
            .window
            .as_ref()
            .map_or(interval_span.clone(), Spanned::span);
        match loads {
            // A level's window is read from the sink's series while the loads run.
            Loads::Continuous => {
                nnb_netlat::window::window_span(sample_interval, window)
                    .map_err(|e| self.error(window_at, e))?;
            }
            Loads::RestartPerLevel => {
                let samples = nnb_netlat::sampling::sample_count(duration, sample_interval)
                    .map_err(|e| self.error(interval_span, e))?;
                if s.window.is_some() && window > samples {
                    return Err(self.error(
                        window_at,
                        format!("window = {window}, but a level of {duration:?} has only {samples} samples of {sample_interval:?}"),
                    ));
                }
            }
        }
        let options = self.load_options(s.load_settings())?;
        if let (true, Some(p)) = (options.tcp, &s.protocol) {
            return Err(self.error(
                p.span(),
                "a throughput staircase samples each node's throughput from the UDP sink's \
                 arrival series: its loads are UDP",
            ));
        }
        Ok(ThroughputStaircase {
            options,
            loads,
            levels,
            rate_bps,
            streams: self.streams(&s.streams)?,
            msg_size: self.msg_size(&s.msg_size, DEFAULT_LOAD_MSG)?,
            duration,
            sample_interval,
            window,
            baseline_bps: rate(&s.baseline)?,
        })
    }

    fn msg_size(
        &self,
        v: &Option<Spanned<usize>>,
        default: usize,
    ) -> Result<usize, ExperimentError> {
        let Some(v) = v else { return Ok(default) };
        self.at(v, values::msg_size(*v.get_ref()))
    }

    fn sweep(&self, tenants: &[TenantDef], s: SweepFile) -> Result<ThreadSweep, ExperimentError> {
        if neighbor_count(tenants) > 0 {
            return Err(self.scenario_error(
                "a thread sweep runs on the test tenant alone: remove the neighbor tenants",
            ));
        }
        let threads = self.at(&s.threads, values::count_list(s.threads.get_ref()))?;
        let test = self.burn(tenants, &s.test)?;
        let most = threads.iter().copied().max().unwrap_or(1);
        self.at(
            &s.threads,
            values::fits(most, test_vcpus(tenants), &test.pin),
        )?;
        Ok(ThreadSweep { threads, test })
    }

    fn load_steps(
        &self,
        tenants: &[TenantDef],
        s: LoadStepsFile,
    ) -> Result<LoadSteps, ExperimentError> {
        if neighbor_count(tenants) == 0 {
            return Err(self.scenario_error(format!(
                "load steps need tenants with role = \"{}\" to send the load",
                Role::Neighbor
            )));
        }
        let levels_bps = self.at(&s.levels, values::rate_list(s.levels.get_ref()))?;
        let options = self.load_options(s.load_settings())?;
        let probe = s.probe.unwrap_or_default();
        Ok(LoadSteps {
            options,
            levels_bps,
            streams: self.streams(&s.streams)?,
            msg_size: self.msg_size(&s.msg_size, DEFAULT_LOAD_MSG)?,
            probe: Probe {
                duration: self.nonzero_duration(
                    &probe.duration,
                    Duration::from_secs(2),
                    "duration",
                )?,
                warmup: self.duration(&probe.warmup, Duration::from_millis(500))?,
                msg_size: self.msg_size(&probe.msg_size, 64)?,
                busy_poll: probe.busy_poll.unwrap_or(false),
            },
            unused: UnusedNeighbors::from_file(s.unused_neighbors),
        })
    }
}
