//! The experiment file as written: TOML tables deserialized with the spans of the
//! values that get checked beyond their type, so a check can point at the line.
//!
//! These types are also what `nnb schema` describes (through schemars), so each field's
//! doc comment is what an editor shows. Validation into the typed
//! [`Experiment`](super::Experiment) lives in the parent module.

use std::borrow::Cow;
use std::ops::Range;

use schemars::gen::SchemaGenerator;
use schemars::schema::Schema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which provider runs the tenants (defined by the results format, which records it).
pub use nnb_format::ProviderKind;

/// A value as written with the byte range it spans in the file, so a check can point
/// at it: a [`toml::Spanned`] that the schema describes as the bare value. It also
/// serializes as the bare value, which is how the schema shows a field's default.
#[derive(Debug, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Spanned<T>(toml::Spanned<T>);

impl<T> Spanned<T> {
    /// The value.
    pub fn get_ref(&self) -> &T {
        self.0.get_ref()
    }

    /// Where the value stands in the file (byte offsets).
    pub fn span(&self) -> Range<usize> {
        self.0.span()
    }
}

/// The schema of the bare value: where a value stands is no part of the file format.
impl<T: JsonSchema> JsonSchema for Spanned<T> {
    fn is_referenceable() -> bool {
        T::is_referenceable()
    }

    fn schema_name() -> String {
        T::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        T::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

/// An nnb experiment: who runs (tenants), where (provider), and what is measured at
/// which steps (scenario). `S` is the scenario table's type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile<S> {
    /// Name of the experiment, used in the results and the summary.
    pub name: Spanned<String>,
    /// Free text describing what the experiment shows.
    #[serde(default)]
    pub description: Option<String>,
    /// Where the tenants run; the local provider (agents on this machine) by default.
    #[serde(default)]
    pub provider: Option<ProviderFile>,
    /// Measured repetitions at each level (thesis: 10). Default 3.
    #[serde(default)]
    pub repetitions: Option<Spanned<u32>>,
    /// Warm-up repetitions run and recorded as such before each level's measured
    /// ones. Default 0.
    #[serde(default)]
    pub warmup: Option<Spanned<u32>>,
    /// Time to let neighbors settle after their jobs change, e.g. "2s". Default "1s".
    #[serde(default)]
    pub settle: Option<Spanned<String>>,
    /// Longest time one step may take before it counts as failed, e.g. "60s".
    /// Default "5m".
    #[serde(default)]
    pub step_timeout: Option<Spanned<String>>,
    /// What to do when a step fails: "retry N" (then skip), "skip" or "abort".
    /// Default "retry 1".
    #[serde(default)]
    pub on_failure: Option<Spanned<String>>,
    /// The tenants' network: none (loopback) or an emulated host NIC.
    #[serde(default)]
    pub network: Option<NetworkFile>,
    /// The tenants: one test tenant and its neighbors.
    pub tenants: Spanned<Vec<TenantFile>>,
    /// What is measured, step by step.
    pub scenario: S,
    /// Run the experiment as a campaign: many rounds, across instances or over time.
    #[serde(default)]
    pub campaign: Option<CampaignFile>,
}

/// The `[campaign]` table: the experiment (its scenario is one round's measurement
/// suite) repeated over rounds, each round a run of its own.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    /// "spatial" (fresh instances each round, released at its end) or "temporal"
    /// (each lane keeps its instances, a round every `interval`).
    pub kind: Spanned<String>,
    /// The lanes: on aws, availability zones of the region (default: the provider's
    /// `availability_zone`); locally, labels (default: one lane, "local"). Rounds in
    /// different zones may run at the same time on aws; a zone's rounds never do.
    #[serde(default)]
    pub zones: Option<Spanned<Vec<String>>>,
    /// Rounds per zone. Temporal campaigns may give `duration` instead.
    #[serde(default)]
    pub rounds: Option<Spanned<u32>>,
    /// Temporal: from one round's start to the next, e.g. "10m".
    #[serde(default)]
    pub interval: Option<Spanned<String>>,
    /// Temporal: how long the campaign lasts, e.g. "150h" (rounds = duration /
    /// interval); instead of `rounds`.
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
}

/// The `[provider]` table.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderFile {
    /// "local" (default), "static" or "aws".
    pub kind: Spanned<ProviderKind>,
    /// static: the hosts file naming the agents that already run.
    #[serde(default)]
    pub hosts: Option<Spanned<String>>,
    /// static: file holding the agents' bearer token.
    #[serde(default)]
    pub token_file: Option<Spanned<String>>,
    /// aws: the region, e.g. "us-east-1". Default: the standard AWS chain
    /// (AWS_REGION, the profile).
    #[serde(default)]
    pub region: Option<Spanned<String>>,
    /// aws: the availability zone of the dedicated host, e.g. "us-east-1a".
    #[serde(default)]
    pub availability_zone: Option<Spanned<String>>,
    /// aws: the dedicated host: a family ("m5", mixed sizes) or an instance type
    /// ("m5.large", that size only).
    #[serde(default)]
    pub host: Option<Spanned<String>>,
    /// aws: every tenant's instance type, e.g. "m5.large". Default: `host` when it
    /// names a type.
    #[serde(default)]
    pub instance_type: Option<Spanned<String>>,
    /// aws: instance type of the endpoint (the sink and reflector that network
    /// scenarios send to), launched off the host with default tenancy. Default:
    /// `instance_type`. Any EC2 type (e.g. "c5n.9xlarge", so the endpoint is not the
    /// bottleneck); it is not priced.
    #[serde(default)]
    pub endpoint_instance_type: Option<Spanned<String>>,
    /// Any kind: who receives the tenants' probes and loads: "shared" (default: one
    /// endpoint agent for every tenant) or "mirrored" (a server of its own for every
    /// tenant that sends or probes, paired by the plan: the thesis' setup). Locally a
    /// server agent per client (with an emulated network, each at its own address
    /// beyond the shaped uplink); on aws an instance per client.
    #[serde(default)]
    pub servers: Option<Spanned<ServersFile>>,
    /// Any kind: UDP sink sockets (one receiving thread each, pinned) of the endpoint
    /// and of every mirrored server, 1 to 256. Default: one per CPU of the machine
    /// it runs on, at most 16; 1 is a single socket.
    #[serde(default)]
    pub sink_threads: Option<Spanned<usize>>,
    /// aws, servers = "mirrored": where the servers run: "dedicated-host" (default:
    /// a second dedicated host of the clients' family, as in the thesis) or
    /// "default" (default tenancy instances, off any dedicated host).
    #[serde(default)]
    pub server_tenancy: Option<Spanned<ServerTenancyFile>>,
    /// aws, servers = "mirrored": the servers' instance type. Default: each server
    /// is its client's type. On the second dedicated host a size of the host's
    /// family; with default tenancy any EC2 type.
    #[serde(default)]
    pub server_instance_type: Option<Spanned<String>>,
    /// aws: the AMI the tenants boot, e.g. "ami-0abcdef1234567890".
    #[serde(default)]
    pub image_id: Option<Spanned<String>>,
    /// aws: the subnet to launch into (in `availability_zone`). Default: the default
    /// VPC's subnet of that zone.
    #[serde(default)]
    pub subnet_id: Option<Spanned<String>>,
    /// aws: existing security groups for the tenants. Default: nnb creates one that
    /// opens only the agent port to `allowed_cidrs` and deletes it afterwards.
    #[serde(default)]
    pub security_group_ids: Option<Spanned<Vec<String>>>,
    /// aws: who may reach the agents when nnb creates the security group: the
    /// controller's address, e.g. ["203.0.113.7/32"], and/or the VPC's CIDR.
    #[serde(default)]
    pub allowed_cidrs: Option<Spanned<Vec<String>>>,
    /// aws: an EC2 key pair for SSH into the tenants (debugging). Default: none.
    #[serde(default)]
    pub key_name: Option<Spanned<String>>,
    /// aws: instance profile for the tenants (e.g. to read nnb from S3).
    #[serde(default)]
    pub iam_instance_profile: Option<Spanned<String>>,
    /// aws: where the tenants download nnb from, per CPU architecture: an https://
    /// URL or an s3:// object, e.g. { x86_64 = "https://.../nnb-x86_64" }.
    #[serde(default)]
    pub install: Option<Spanned<InstallFile>>,
    /// aws: path of an nnb already in the image, e.g. "/usr/local/bin/nnb" (instead
    /// of `install`).
    #[serde(default)]
    pub preinstalled: Option<Spanned<String>>,
    /// aws: the agents' TCP port. Default 7700.
    #[serde(default)]
    pub agent_port: Option<Spanned<u16>>,
    /// aws: how long the tenants may take to boot and answer their health check,
    /// e.g. "10m". Default "10m".
    #[serde(default)]
    pub health_timeout: Option<Spanned<String>>,
    /// aws: expiry tag put on every resource; `nnb aws sweep --expired` removes
    /// what outlived it. Default "6h".
    #[serde(default)]
    pub expires_after: Option<Spanned<String>>,
    /// aws: most the run may cost (host price per hour times the estimated
    /// duration), USD; a run estimated above it is refused. Without it, `nnb run`
    /// needs `--yes`.
    #[serde(default)]
    pub max_cost_usd: Option<Spanned<f64>>,
    /// aws: the tenants' tenancy: "dedicated-host" (default: one dedicated host
    /// runs them all, `host` names it) or "default" (default tenancy instances of
    /// `instance_type`, any catalog type including burstable ones, no host).
    #[serde(default)]
    pub tenancy: Option<Spanned<ServerTenancyFile>>,
    /// aws, tenancy = "default": a placement group nnb creates for the run and
    /// launches every instance into: "cluster", "spread" or "partition".
    #[serde(default)]
    pub placement_group: Option<Spanned<String>>,
    /// aws, placement_group = "partition": its partitions, 1 to 7. Default 2.
    #[serde(default)]
    pub partitions: Option<Spanned<u32>>,
    /// aws: the subnet of each availability zone, e.g. { "us-east-1a" =
    /// "subnet-...", "us-east-1b" = "subnet-..." }, for campaigns across zones: a
    /// round in a zone launches into its subnet.
    #[serde(default)]
    pub subnets: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    /// Any kind: upload the run's results to this S3 location afterwards, e.g.
    /// "s3://bucket/nnb-runs" (the run id is appended; needs the aws feature).
    #[serde(default)]
    pub results_s3: Option<Spanned<String>>,
}

impl ProviderFile {
    /// Where the values of the keys that only `kind = "aws"` reads stand in the
    /// file, for refusing them under another kind. Every field is named here, as an
    /// aws key or not: a new key does not compile until it is sorted, and an aws key
    /// bound here but left out of the list is an unused variable (a lint error).
    pub fn aws_key_spans(&self) -> Vec<Range<usize>> {
        let ProviderFile {
            // Read by every kind, or by another kind.
            kind: _,
            hosts: _,
            token_file: _,
            results_s3: _,
            servers: _,
            sink_threads: _,
            // Read by kind = "aws" only.
            region,
            availability_zone,
            host,
            instance_type,
            endpoint_instance_type,
            server_tenancy,
            server_instance_type,
            image_id,
            subnet_id,
            security_group_ids,
            allowed_cidrs,
            key_name,
            iam_instance_profile,
            install,
            preinstalled,
            agent_port,
            health_timeout,
            expires_after,
            max_cost_usd,
            tenancy,
            placement_group,
            partitions,
            subnets,
        } = self;
        fn at<T>(v: &Option<Spanned<T>>) -> Option<Range<usize>> {
            v.as_ref().map(Spanned::span)
        }
        [
            at(region),
            at(availability_zone),
            at(host),
            at(instance_type),
            at(endpoint_instance_type),
            at(server_tenancy),
            at(server_instance_type),
            at(image_id),
            at(subnet_id),
            at(security_group_ids),
            at(allowed_cidrs),
            at(key_name),
            at(iam_instance_profile),
            at(install),
            at(preinstalled),
            at(agent_port),
            at(health_timeout),
            at(expires_after),
            at(max_cost_usd),
            at(tenancy),
            at(placement_group),
            at(partitions),
            at(subnets),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// `[provider] servers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ServersFile {
    /// One endpoint for every tenant.
    Shared,
    /// A server per tenant that sends or probes.
    Mirrored,
}

/// `[provider] server_tenancy` and `tenancy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ServerTenancyFile {
    /// A second dedicated host of the clients' family.
    DedicatedHost,
    /// Default tenancy.
    Default,
}

/// `install = { x86_64 = "...", aarch64 = "..." }`: where tenants get nnb from.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallFile {
    /// nnb for x86_64 hosts (m5, m6i, m6a, m7i): https:// URL or s3:// object.
    #[serde(default)]
    pub x86_64: Option<Spanned<String>>,
    /// nnb for Graviton hosts (m6g, c7g, m7g): https:// URL or s3:// object.
    #[serde(default)]
    pub aarch64: Option<Spanned<String>>,
}

/// How the tenants' traffic travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Loopback, no shaping.
    None,
    /// One network namespace per tenant on a bridge whose uplink is shaped to
    /// `host_bw` (root needed).
    Emulated,
}

/// The `[network]` table.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkFile {
    /// "none" (default) or "emulated".
    pub mode: Spanned<NetworkMode>,
    /// Bandwidth of the emulated host NIC, e.g. "200M" (bit/s); required when
    /// emulated.
    #[serde(default)]
    pub host_bw: Option<Spanned<String>>,
    /// How the emulated NIC shares host_bw: "fifo" (default: one drop-tail queue,
    /// probes wait behind neighbors' packets) or "fair" (a share per tenant).
    #[serde(default)]
    pub queue: Option<Spanned<NicQueueFile>>,
}

/// `[network] queue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NicQueueFile {
    /// One drop-tail FIFO.
    Fifo,
    /// A share per tenant.
    Fair,
}

/// A tenant's part in the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RoleFile {
    /// The node that is measured.
    Test,
    /// A node that makes noise (or idles) beside it.
    Neighbor,
}

/// One `[[tenants]]` entry: a tenant, or `count` alike tenants.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantFile {
    /// Name; with `count` > 1 the tenants are NAME-1 .. NAME-N. Default: the role.
    #[serde(default)]
    pub name: Option<Spanned<String>>,
    /// How many alike tenants this entry stands for. Default 1.
    #[serde(default)]
    pub count: Option<Spanned<usize>>,
    /// "test" or "neighbor".
    pub role: Spanned<RoleFile>,
    /// Size in vCPUs (logical CPUs). Default 1.
    #[serde(default)]
    pub vcpus: Option<Spanned<usize>>,
    /// What the tenant is granted, enforced on the host (local provider, root): its
    /// own cgroup with a CPU quota, a memory limit and I/O limits, and a token bucket
    /// on its network interface. Default: nothing beyond its vCPUs.
    #[serde(default)]
    pub grant: Option<Spanned<GrantFile>>,
    /// The technology its agent (and everything it starts) runs inside: "process"
    /// (default: a process in a cgroup of nnb's), "runc", "crun", "podman" or
    /// "docker" (a container made by that runtime, the grant given in its own
    /// terms). Local provider only; a runtime that cannot run on the host is refused
    /// before anything starts.
    #[serde(default)]
    pub runtime: Option<Spanned<String>>,
}

/// `grant = { ... }` of a tenant: Volpert et al.'s per-tenant quota. Every limit left
/// out is no limit.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantFile {
    /// CPU quota in CPUs, e.g. 0.5 (cgroup cpu.max / CFS quota over a 100 ms period),
    /// at most the tenant's vCPUs (its cpuset).
    #[serde(default)]
    pub cpu: Option<Spanned<f64>>,
    /// Memory limit, e.g. "256M" (bytes; cgroup memory.max / memory.limit_in_bytes).
    #[serde(default)]
    pub memory: Option<Spanned<String>>,
    /// Read operations per second on the disk of `io_dir`.
    #[serde(default)]
    pub read_iops: Option<Spanned<u64>>,
    /// Write operations per second on the disk of `io_dir`.
    #[serde(default)]
    pub write_iops: Option<Spanned<u64>>,
    /// Read bandwidth, bytes per second, e.g. "50M".
    #[serde(default)]
    pub read_bw: Option<Spanned<String>>,
    /// Write bandwidth, bytes per second, e.g. "50M".
    #[serde(default)]
    pub write_bw: Option<Spanned<String>>,
    /// A directory on the disk the I/O limits apply to. Default: the disk isolation
    /// matrix's `dir`.
    #[serde(default)]
    pub io_dir: Option<Spanned<String>>,
    /// Network send rate, e.g. "100M" (bit/s; a token bucket on the tenant's
    /// interface, so it needs the emulated network).
    #[serde(default)]
    pub rate: Option<Spanned<String>>,
}

/// The test workload: a pinned burner run (`nnb cpu`) on the test tenant, or (in a
/// neighbor staircase) a command of yours (`command` or `preset`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BurnFile {
    /// Workload name as `nnb cpu --workload` takes it. Default "fpadd".
    #[serde(default)]
    pub workload: Option<Spanned<String>>,
    /// Burner threads. Default: the tenant's vCPUs.
    #[serde(default)]
    pub threads: Option<Spanned<usize>>,
    /// Operations per thread, or in all with `pool = "shared"` (fixed work: the
    /// result is a runtime).
    #[serde(default)]
    pub ops: Option<Spanned<u64>>,
    /// Run time, e.g. "2s" (fixed time: the result is a throughput).
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Pinning: "none", "cores", "smt-sibling" or "compact". Default "cores".
    #[serde(default)]
    pub pin: Option<Spanned<String>>,
    /// Where fixed work's ops come from: "per-thread" (default: `ops` each, the
    /// thesis' `cpu_burn`, one process per thread) or "shared" (one pool of `ops`
    /// events the threads draw from, sysbench's `--events`: a slowed thread does
    /// fewer and the runtime is the pool's). A `duration` burn is unaffected.
    #[serde(default)]
    pub pool: Option<Spanned<nnb_format::EventPool>>,
    /// A program of yours as the test workload instead of nnb's burner (neighbor
    /// staircase): its argv, never a shell string, e.g. ["/opt/bench/loop",
    /// "2000"] (the program an absolute path on the agent's machine, or a name on
    /// its PATH). Its agent must be started with `nnb agent --allow-commands` (the
    /// local provider does so itself).
    #[serde(default)]
    pub command: Option<Spanned<Vec<String>>>,
    /// One of the seeds' tools as the program instead of `command`: "stress-ng",
    /// "fio", "sysbench" or "iperf3" (the agent checks it is installed and records
    /// its version); its arguments in `args`.
    #[serde(default)]
    pub preset: Option<Spanned<String>>,
    /// The preset tool's arguments, e.g. ["cpu", "--time=5", "run"].
    #[serde(default)]
    pub args: Option<Spanned<Vec<String>>>,
    /// The command's working directory (absolute). Default: the agent's.
    #[serde(default)]
    pub cwd: Option<Spanned<String>>,
    /// Variables added to the agent's environment for the command, e.g. { LC_ALL =
    /// "C" }.
    #[serde(default)]
    pub env: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    /// A command still running this long after its start is stopped and the attempt
    /// fails, e.g. "30s". Default: only the step timeout bounds it.
    #[serde(default)]
    pub timeout: Option<Spanned<String>>,
    /// Bytes kept of the command's stdout and of its stderr, each, e.g. "64K"; the
    /// rest is counted and dropped. Default 64 KiB.
    #[serde(default)]
    pub output_limit: Option<Spanned<SizeFile>>,
    /// What a command's samples record: "wall" (default: its wall time, a
    /// fixed-work command's runtime), or a value it prints: { json = "/pointer",
    /// unit = "ops/s", higher_is_better = true } or { regex = "events per second:
    /// +([0-9.]+)", unit = "events/s", higher_is_better = true }, with stream =
    /// "stderr" to read its stderr.
    #[serde(default)]
    pub metric: Option<Spanned<crate::command::MetricFile>>,
}

/// A list given either as a range string or as an explicit array.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RangeOrList<T> {
    /// "START:END:STEP" (or "START..END:STEP"), END included.
    Range(String),
    /// Every value spelled out.
    List(Vec<T>),
}

/// Single-variant tags: each scenario struct accepts only its own `kind`, and the
/// schema shows it as a constant.
macro_rules! scenario_tag {
    ($(#[$doc:meta] $tag:ident => $variant:ident),* $(,)?) => {$(
        #[$doc]
        #[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
        #[serde(rename_all = "kebab-case")]
        pub enum $tag {
            #[$doc]
            $variant,
        }
    )*};
}

scenario_tag! {
    /// `kind = "neighbor-staircase"`.
    StaircaseTag => NeighborStaircase,
    /// `kind = "thread-sweep"`.
    SweepTag => ThreadSweep,
    /// `kind = "load-steps"`.
    LoadStepsTag => LoadSteps,
    /// `kind = "isolation-matrix"`.
    MatrixTag => IsolationMatrix,
    /// `kind = "throughput-staircase"`.
    ThroughputTag => ThroughputStaircase,
    /// `kind = "pair-suite"`.
    PairSuiteTag => PairSuite,
}

/// Whether neighbors burn or idle at their levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NeighborStateFile {
    /// Neighbors run the busy workload.
    Busy,
    /// Neighbors run nothing (but are up).
    Idle,
    /// The busy staircase, then the idle one.
    Both,
}

/// What a busy neighbor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BusyKindFile {
    /// A CPU burner on all its vCPUs.
    Burner,
    /// A rate-paced UDP load generator towards the sink.
    Load,
    /// A program (`command` or `preset`), started with each busy step and stopped,
    /// its whole process tree, when the neighbors' jobs change.
    Command,
}

/// `[scenario.busy]`: a busy neighbor's workload.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BusyFile {
    /// "burner", "load" or "command". Default: "command" when the table names one
    /// (`command` or `preset`), else "burner".
    #[serde(default)]
    pub kind: Option<Spanned<BusyKindFile>>,
    /// burner: workload name. Default "fpadd".
    #[serde(default)]
    pub workload: Option<Spanned<String>>,
    /// burner: threads. Default: the neighbor's vCPUs.
    #[serde(default)]
    pub threads: Option<Spanned<usize>>,
    /// load: each neighbor's rate, e.g. "150M" (bit/s).
    #[serde(default)]
    pub rate: Option<Spanned<String>>,
    /// load: parallel streams per neighbor. Default 1.
    #[serde(default)]
    pub streams: Option<Spanned<usize>>,
    /// load: UDP payload bytes. Default 1400.
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// load: Wang & Ng's transport: "udp" (default) or "tcp" (to the endpoint's TCP sink).
    #[serde(default)]
    pub protocol: Option<Spanned<String>>,
    /// Socket send buffer (TCP: the send window), e.g. "256K" or 262144.
    #[serde(default)]
    pub send_buffer: Option<Spanned<SizeFile>>,
    /// TCP: the receive window the sink sets, e.g. "256K"; UDP: recorded only.
    #[serde(default)]
    pub recv_buffer: Option<Spanned<SizeFile>>,
    /// Stop each load after this many payload bytes, e.g. "800MB".
    #[serde(default)]
    pub bytes: Option<Spanned<SizeFile>>,
    /// Pacing granularity: bytes sent back to back before each idle, e.g. "128K".
    #[serde(default)]
    pub pacing_chunk: Option<Spanned<SizeFile>>,
    /// command: the program each busy neighbor runs until its step's neighbors
    /// change, its argv, e.g. ["stress-ng", "--cpu", "1", "--cpu-load", "50"]. Its
    /// agent must be started with `nnb agent --allow-commands`.
    #[serde(default)]
    pub command: Option<Spanned<Vec<String>>>,
    /// command: one of the seeds' tools instead of `command`: "stress-ng", "fio",
    /// "sysbench" or "iperf3"; its arguments in `args`.
    #[serde(default)]
    pub preset: Option<Spanned<String>>,
    /// command: the preset tool's arguments.
    #[serde(default)]
    pub args: Option<Spanned<Vec<String>>>,
    /// command: its working directory (absolute). Default: the agent's.
    #[serde(default)]
    pub cwd: Option<Spanned<String>>,
    /// command: variables added to the agent's environment for it.
    #[serde(default)]
    pub env: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    /// command: bytes kept of its stdout and of its stderr, each, e.g. "64K".
    /// Default 64 KiB.
    #[serde(default)]
    pub output_limit: Option<Spanned<SizeFile>>,
}

impl BurnFile {
    /// This table's command keys ([`crate::command::CommandKeys`]).
    pub fn command_keys(&self) -> crate::command::CommandKeys<'_> {
        crate::command::CommandKeys {
            command: self.command.as_ref(),
            preset: self.preset.as_ref(),
            args: self.args.as_ref(),
            cwd: self.cwd.as_ref(),
            env: self.env.as_ref(),
            output_limit: self.output_limit.as_ref(),
            timeout: self.timeout.as_ref(),
            metric: self.metric.as_ref(),
        }
    }
}

impl BusyFile {
    /// This table's command keys ([`crate::command::CommandKeys`]): a background
    /// command has no `timeout` and no `metric`.
    pub fn command_keys(&self) -> crate::command::CommandKeys<'_> {
        crate::command::CommandKeys {
            command: self.command.as_ref(),
            preset: self.preset.as_ref(),
            args: self.args.as_ref(),
            cwd: self.cwd.as_ref(),
            env: self.env.as_ref(),
            output_limit: self.output_limit.as_ref(),
            timeout: None,
            metric: None,
        }
    }
}

/// A size in bytes in an experiment file: an integer, or a string with a unit as
/// [`nnb_units::parse_size`] reads it ("256K" = 262,144, "800MB" = 800,000,000).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SizeFile {
    /// Bytes.
    Bytes(u64),
    /// A size with its unit.
    Text(String),
}

/// Wang & Ng's settings of a load (seed 003 §III.A: TCP or UDP, socket buffers, a
/// byte bound, a pacing granularity): the same keys wherever an experiment file
/// describes a load (a busy `load` neighbor, load-steps neighbors, throughput-
/// staircase nodes). Read into a job's `LoadOptions` in one place
/// (`Checker::load_options` in the crate root); a scenario with these keys hands
/// them over through `load_settings()`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadSettingsFile<'a> {
    /// `protocol`.
    pub protocol: Option<&'a Spanned<String>>,
    /// `send_buffer`.
    pub send_buffer: Option<&'a Spanned<SizeFile>>,
    /// `recv_buffer`.
    pub recv_buffer: Option<&'a Spanned<SizeFile>>,
    /// `bytes`.
    pub bytes: Option<&'a Spanned<SizeFile>>,
    /// `pacing_chunk`.
    pub pacing_chunk: Option<&'a Spanned<SizeFile>>,
}

impl LoadSettingsFile<'_> {
    /// The span of the first key given, if any.
    pub fn first_span(&self) -> Option<Range<usize>> {
        (self.protocol.map(Spanned::span))
            .or(self.send_buffer.map(Spanned::span))
            .or(self.recv_buffer.map(Spanned::span))
            .or(self.bytes.map(Spanned::span))
            .or(self.pacing_chunk.map(Spanned::span))
    }
}

/// `load_settings()` for each file struct that carries the load keys.
macro_rules! load_settings {
    ($($t:ty),*) => {$(
        impl $t {
            /// This load's Wang & Ng settings.
            pub fn load_settings(&self) -> LoadSettingsFile<'_> {
                LoadSettingsFile {
                    protocol: self.protocol.as_ref(),
                    send_buffer: self.send_buffer.as_ref(),
                    recv_buffer: self.recv_buffer.as_ref(),
                    bytes: self.bytes.as_ref(),
                    pacing_chunk: self.pacing_chunk.as_ref(),
                }
            }
        }
    )*};
}
load_settings!(BusyFile, LoadStepsFile, ThroughputStaircaseFile);

/// `kind = "neighbor-staircase"`: add neighbors up to N, measure the test tenant at
/// each level (thesis 5.2).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StaircaseFile {
    /// The scenario kind.
    pub kind: StaircaseTag,
    /// Most neighbors at the top level. Default: every neighbor tenant.
    #[serde(default)]
    pub max_neighbors: Option<Spanned<usize>>,
    /// Neighbors added per level. Default 1.
    #[serde(default)]
    pub step: Option<Spanned<usize>>,
    /// "busy" (default), "idle" or "both".
    #[serde(default)]
    pub neighbor_state: Option<NeighborStateFile>,
    /// What busy neighbors run. Default: a burner.
    #[serde(default)]
    pub busy: Option<BusyFile>,
    /// Neighbors above a level: "absent" (default: no agent runs, as if the VM did
    /// not exist) or "idle" (their agents run idle; for hosts nnb cannot start or stop).
    #[serde(default)]
    pub unused_neighbors: Option<UnusedNeighborsFile>,
    /// The test tenant's workload.
    pub test: Spanned<BurnFile>,
}

/// What the neighbors a level leaves out are (a staircase's above its level, load
/// steps' at zero load).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum UnusedNeighborsFile {
    /// Not there: their agents (and, on aws, their instances) are stopped.
    Absent,
    /// Running and idle.
    Idle,
}

/// `kind = "thread-sweep"`: the test tenant's burner at each thread count (the
/// metal sweep, thesis 5.5).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// The scenario kind.
    pub kind: SweepTag,
    /// Thread counts: "1:16:1" (or "1..16"), or an array [1, 2, 4, 8].
    pub threads: Spanned<RangeOrList<usize>>,
    /// The workload (its `threads` is set by the sweep).
    pub test: Spanned<BurnFile>,
}

/// `[scenario.probe]`: the latency probe on the test tenant.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeFile {
    /// Measuring time per repetition, e.g. "5s". Default "2s".
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Discarded warm-up before measuring. Default "500ms".
    #[serde(default)]
    pub warmup: Option<Spanned<String>>,
    /// UDP payload bytes. Default 64.
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// Busy-poll the socket. Default false.
    #[serde(default)]
    pub busy_poll: Option<bool>,
}

/// `kind = "load-steps"`: neighbors' aggregate load in steps, a latency probe on the
/// test tenant at each (thesis 6.2).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadStepsFile {
    /// Aggregate neighbor load levels: "0:200M:50M" or ["0", "100M", "200M"].
    pub levels: Spanned<RangeOrList<String>>,
    /// The scenario kind.
    pub kind: LoadStepsTag,
    /// Streams per neighbor. Default 1.
    #[serde(default)]
    pub streams: Option<Spanned<usize>>,
    /// Load datagram payload bytes. Default 1400.
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// Wang & Ng's transport: "udp" (default) or "tcp" (to the endpoint's TCP sink).
    #[serde(default)]
    pub protocol: Option<Spanned<String>>,
    /// Socket send buffer (TCP: the send window), e.g. "256K" or 262144.
    #[serde(default)]
    pub send_buffer: Option<Spanned<SizeFile>>,
    /// TCP: the receive window the sink sets, e.g. "256K"; UDP: recorded only.
    #[serde(default)]
    pub recv_buffer: Option<Spanned<SizeFile>>,
    /// Stop each load after this many payload bytes, e.g. "800MB".
    #[serde(default)]
    pub bytes: Option<Spanned<SizeFile>>,
    /// Pacing granularity: bytes sent back to back before each idle, e.g. "128K".
    #[serde(default)]
    pub pacing_chunk: Option<Spanned<SizeFile>>,
    /// The latency probe.
    #[serde(default)]
    pub probe: Option<ProbeFile>,
    /// The neighbors at a zero-load level: "absent" (default: the test tenant and
    /// its server alone, the thesis' baseline) or "idle" (every tenant up at every
    /// level; for hosts nnb cannot start or stop).
    #[serde(default)]
    pub unused_neighbors: Option<UnusedNeighborsFile>,
}

/// Which resource the isolation matrix stresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ResourceFile {
    /// CPU burners.
    Cpu,
    /// Memory allocated and kept touched.
    Memory,
    /// Paced random reads and writes on a file.
    Disk,
    /// UDP load.
    Network,
}

/// `kind = "isolation-matrix"`: tenant a (test) in each state against tenant b
/// (neighbor) in each state, baselines first (Volpert et al., Table 1).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    /// The scenario kind.
    pub kind: MatrixTag,
    /// "cpu", "memory", "disk" or "network". Each state is a demand against the
    /// tenant's grant for it: undercommitted half of it, saturated all of it,
    /// overcommitted more, unrestricted with the grant lifted.
    pub resource: ResourceFile,
    /// How long tenant a is measured in each scenario, e.g. "5s". Default "3s".
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// cpu: burner workload. Default "fpadd".
    #[serde(default)]
    pub workload: Option<Spanned<String>>,
    /// network: a tenant's saturating rate, e.g. "100M" (bit/s), when the tenants
    /// have no `rate` grant; undercommitted is half of it, overcommitted 1.5 times
    /// over 4 streams, unrestricted 10 times over 8.
    #[serde(default)]
    pub share: Option<Spanned<String>>,
    /// network: UDP payload bytes. Default 1400.
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// disk: the directory the generator's file goes in (on a disk, not tmpfs).
    /// Default "/var/tmp".
    #[serde(default)]
    pub dir: Option<Spanned<String>>,
    /// disk: share of reads among the operations, 0 to 1. Default 0.5.
    #[serde(default)]
    pub read_fraction: Option<Spanned<f64>>,
    /// disk: operations in flight (one thread each). Default 4.
    #[serde(default)]
    pub queue_depth: Option<Spanned<usize>>,
    /// disk: bytes per operation, e.g. "4k". Default "4k".
    #[serde(default)]
    pub block_size: Option<Spanned<String>>,
    /// disk: the file's size, e.g. "64M". Default "64M".
    #[serde(default)]
    pub file_size: Option<Spanned<String>>,
    /// memory: what an unrestricted tenant tries to allocate, e.g. "2G". Default 4
    /// times its memory grant.
    #[serde(default)]
    pub unrestricted: Option<Spanned<String>>,
    /// The technologies the matrix runs in, one after another, e.g. ["process",
    /// "runc"] (local provider): every tenant runs once per technology as
    /// `TENANT@TECHNOLOGY` (`a@runc`), and `nnb analyze` puts the technologies'
    /// tables side by side. Default: each tenant in its own `runtime`.
    #[serde(default)]
    pub technologies: Option<Spanned<Vec<Spanned<String>>>>,
    /// Which of a pair's two measured jobs starts first: "together" (default),
    /// "a-first" or "b-first" (Volpert et al. saw older processes favoured, §6.2).
    #[serde(default)]
    pub start_order: Option<Spanned<String>>,
    /// With "a-first" or "b-first": how long after the first job the other starts,
    /// e.g. "500ms"; below the matrix's `duration`.
    #[serde(default)]
    pub stagger: Option<Spanned<String>>,
    /// How often the host reads each tenant's cgroup and interface counters over a
    /// measured step (local provider), e.g. "100ms": 5ms to 1s, and at least 10
    /// readings per `duration`. Default "20ms". Its own CPU cost is recorded beside
    /// it.
    #[serde(default)]
    pub usage_interval: Option<Spanned<String>>,
}

/// `kind = "throughput-staircase"`: nodes join one at a time and every node present,
/// the test node included, sends UDP at `rate` to the endpoint's sink; each node's
/// throughput is sampled every `sample_interval` and recorded per level as the mean
/// of its latest `window` samples (thesis 6.1).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThroughputStaircaseFile {
    /// The scenario kind.
    pub kind: ThroughputTag,
    /// Most neighbors at the top level. Default: every neighbor tenant.
    #[serde(default)]
    pub max_neighbors: Option<Spanned<usize>>,
    /// Neighbors added per level. Default 1.
    #[serde(default)]
    pub step: Option<Spanned<usize>>,
    /// Each node's UDP payload rate, e.g. "10G": "full rate", above what the link
    /// gives a node. Default: twice an emulated network's `host_bw`, else "10G" (an
    /// m5's burst bandwidth). On AWS one flow outside a cluster placement group is
    /// capped at 5 Gbit/s: above that, use `streams` > 1.
    #[serde(default)]
    pub rate: Option<Spanned<String>>,
    /// Parallel UDP streams (flows) per node, the rate split evenly. Default 1.
    #[serde(default)]
    pub streams: Option<Spanned<usize>>,
    /// UDP payload bytes per datagram. Default 1400.
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// How the nodes' loads run across levels: "continuous" (the default, the
    /// thesis': each node's load starts when it joins and runs to the end, and each
    /// level's figure is the latest `window` samples of the sink's arrival series
    /// after the level settles) or "restart-per-level" (every node present starts
    /// afresh for `duration` at each level).
    #[serde(default)]
    pub loads: Option<Spanned<LoadsFile>>,
    /// With `loads = "restart-per-level"`: how long every node sends at each level,
    /// e.g. "30s". Default "30s".
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Throughput sampling interval, a multiple of 100 ms. Default "1s".
    #[serde(default)]
    pub sample_interval: Option<Spanned<String>>,
    /// Each node's recorded rate is the mean of its latest `window` samples. Default
    /// 20 (the thesis'), or all of a level's samples when it has fewer.
    #[serde(default)]
    pub window: Option<Spanned<usize>>,
    /// The instance's baseline bandwidth to measure the degradation against, e.g.
    /// "5G" for an m5.4xlarge. Default: the test node's rate alone (level 0).
    #[serde(default)]
    pub baseline: Option<Spanned<String>>,
    /// Wang & Ng's transport: "udp" only (the nodes' throughput is sampled from the
    /// UDP sink's arrival series); the key exists so that "tcp" is refused by name.
    #[serde(default)]
    pub protocol: Option<Spanned<String>>,
    /// Socket send buffer (TCP: the send window), e.g. "256K" or 262144.
    #[serde(default)]
    pub send_buffer: Option<Spanned<SizeFile>>,
    /// TCP: the receive window the sink sets, e.g. "256K"; UDP: recorded only.
    #[serde(default)]
    pub recv_buffer: Option<Spanned<SizeFile>>,
    /// Stop each load after this many payload bytes, e.g. "800MB".
    #[serde(default)]
    pub bytes: Option<Spanned<SizeFile>>,
    /// Pacing granularity: bytes sent back to back before each idle, e.g. "128K".
    #[serde(default)]
    pub pacing_chunk: Option<Spanned<SizeFile>>,
}

/// A throughput staircase's `loads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LoadsFile {
    /// Each node's load runs from the level where it joins to the end.
    Continuous,
    /// Every node present starts afresh at each level.
    RestartPerLevel,
}

/// Only the scenario's `kind`, read first to pick the scenario type.
#[derive(Debug, Deserialize)]
pub struct KindProbe {
    /// The `[scenario]` table, if any.
    #[serde(default)]
    pub scenario: Option<Spanned<ScenarioKindProbe>>,
}

/// The `kind` key of `[scenario]`.
#[derive(Debug, Deserialize)]
pub struct ScenarioKindProbe {
    /// The scenario kind as written.
    #[serde(default)]
    pub kind: Option<Spanned<String>>,
}

/// The scenario table in the schema: one of the kinds. Only its schema is used
/// (the file is read kind by kind), so its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, JsonSchema)]
#[serde(untagged)]
pub enum ScenarioSchema {
    /// Neighbor staircase.
    NeighborStaircase(StaircaseFile),
    /// Thread sweep.
    ThreadSweep(SweepFile),
    /// Load steps.
    LoadSteps(LoadStepsFile),
    /// Isolation matrix.
    IsolationMatrix(MatrixFile),
    /// Throughput staircase.
    ThroughputStaircase(ThroughputStaircaseFile),
    /// Pair suite.
    PairSuite(PairSuiteFile),
}

/// `kind = "pair-suite"`: Wang & Ng's measurements of one pair (seed 003, §III.C),
/// one after another so they do not disturb each other: CPUTest on the test tenant,
/// then on the endpoint (the pair's other side), the RTT series, TCP, UDP and
/// Badabing from the test tenant to the endpoint; one sample each, `repetitions`
/// rounds. Every setting defaults to the seed's.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairSuiteFile {
    /// The scenario kind.
    pub kind: PairSuiteTag,
    /// The measurements in the order they run, from "cputest", "rtt", "tcp",
    /// "udp", "badabing". Default: all five, in that order (the seed's).
    #[serde(default)]
    pub measurements: Option<Spanned<Vec<String>>>,
    /// CPUTest (§III.A, §IV).
    #[serde(default)]
    pub cputest: Option<PairCputestFile>,
    /// The RTT series (§III.A, §V.B).
    #[serde(default)]
    pub rtt: Option<PairRttFile>,
    /// TCPTest (§III.A, §V.A).
    #[serde(default)]
    pub tcp: Option<PairTcpFile>,
    /// UDPTest (§III.A, §V.A).
    #[serde(default)]
    pub udp: Option<PairUdpFile>,
    /// Badabing (§III.A, §VI).
    #[serde(default)]
    pub badabing: Option<PairBadabingFile>,
}

/// `[scenario.cputest]` of a pair suite: a `steal` scan with its timestamp trace,
/// on each side of the pair in turn.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairCputestFile {
    /// How long each side is watched, e.g. "3s". Default "3s" (the seed's loop of
    /// 1 million iterations at under 3 µs each, l.164 and l.311).
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// A gap longer than this is a time scheduled off, e.g. "1ms". Default "1ms"
    /// (l.311-313).
    #[serde(default)]
    pub threshold: Option<Spanned<String>>,
    /// Keep the timestamp trace in the result (Fig. 1). Default true.
    #[serde(default)]
    pub trace: Option<bool>,
}

/// `[scenario.rtt]` of a pair suite: the RTT series.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairRttFile {
    /// Probes sent, the dropped first ones included. Default 5000 (l.184).
    #[serde(default)]
    pub probes: Option<Spanned<u64>>,
    /// Probes per second. Default 10 (l.183).
    #[serde(default)]
    pub rate: Option<Spanned<f64>>,
    /// The first probes left out of the summary (kept in the log). Default 50
    /// (l.469-471).
    #[serde(default)]
    pub skip: Option<Spanned<u64>>,
    /// Probe size, bytes. Default 64 (ping's packet).
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// ICMP echo (the seed's ping, whose first packets the seed saw delayed)
    /// instead of UDP ping-pong. Default false: UDP, which the seed found the same
    /// but for those first packets (l.457-460) and which needs no privilege.
    #[serde(default)]
    pub icmp: Option<bool>,
}

/// `[scenario.tcp]` of a pair suite: TCPTest.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairTcpFile {
    /// Stop after this many bytes, e.g. "800MB". Default "800MB" (l.266-267).
    #[serde(default)]
    pub bytes: Option<Spanned<String>>,
    /// Stop at this time if the bytes are not sent by then, e.g. "60s". Default
    /// "60s".
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Send and receive windows (SO_SNDBUF, SO_RCVBUF), e.g. "256K". Default
    /// "256K" (l.207-208).
    #[serde(default)]
    pub window: Option<Spanned<String>>,
    /// Sample the sender's TCP_INFO every this long, e.g. "10ms". Default "10ms".
    #[serde(default)]
    pub tcp_info: Option<Spanned<String>>,
    /// A quiet period: nothing sent or received for longer than this, e.g.
    /// "10ms". Default "10ms" (the seed's are tens of ms, l.397-398).
    #[serde(default)]
    pub quiet: Option<Spanned<String>>,
    /// One throughput per this many bytes received, e.g. "256K". Default "256K"
    /// (l.380-382).
    #[serde(default)]
    pub grain: Option<Spanned<String>>,
    /// The full link rate bursts are judged against, e.g. "1G". Default: an
    /// emulated network's `host_bw`, else "1G" (l.199-200).
    #[serde(default)]
    pub link: Option<Spanned<String>>,
    /// The sender's pacing ceiling, e.g. "10G". Default: ten times `link`, which
    /// a TCP sender does not reach: as fast as TCP goes, as the seed's TCPTest.
    #[serde(default)]
    pub rate: Option<Spanned<String>>,
}

/// `[scenario.udp]` of a pair suite: UDPTest.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairUdpFile {
    /// Stop after this many bytes, e.g. "800MB". Default "800MB" (l.266-267).
    #[serde(default)]
    pub bytes: Option<Spanned<String>>,
    /// Stop at this time if the bytes are not sent by then, e.g. "60s". Default
    /// "60s".
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// The sending rate, e.g. "1G". Default: the link rate (`link`; the seed's
    /// 1 Gbit/s, l.197-200).
    #[serde(default)]
    pub rate: Option<Spanned<String>>,
    /// UDP payload bytes. Default 1472 (1500-byte IP packets, l.201).
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// Bytes sent back to back before each idle interval, e.g. "128K". Default
    /// "128K" (l.197-198).
    #[serde(default)]
    pub pacing_chunk: Option<Spanned<String>>,
    /// Socket buffer of sender and receiver, e.g. "128K". Default "128K" (l.202).
    #[serde(default)]
    pub socket_buffer: Option<Spanned<String>>,
    /// One throughput per this many bytes received, e.g. "256K". Default "256K"
    /// (l.380-382).
    #[serde(default)]
    pub grain: Option<Spanned<String>>,
    /// The full link rate buffer bursts are judged against, e.g. "1G". Default:
    /// an emulated network's `host_bw`, else "1G" (l.426-431).
    #[serde(default)]
    pub link: Option<Spanned<String>>,
}

/// `[scenario.badabing]` of a pair suite: Badabing.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PairBadabingFile {
    /// Probing time, e.g. "60s". Default "60s" (one minute, l.268-269).
    #[serde(default)]
    pub duration: Option<Spanned<String>>,
    /// Slot length, e.g. "5ms". Default "5ms" (l.559, l.582-583).
    #[serde(default)]
    pub slot: Option<Spanned<String>>,
    /// Probability a slot carries a probe, 0 to 1. Default 0.3 (l.583).
    #[serde(default)]
    pub probability: Option<Spanned<f64>>,
    /// Packets per probe. Default 3 (l.584).
    #[serde(default)]
    pub packets: Option<Spanned<u32>>,
    /// Packet size, bytes. Default 600 (Badabing's own; the seed does not say).
    #[serde(default)]
    pub msg_size: Option<Spanned<usize>>,
    /// A slot within this of a loss is lossy, e.g. "50ms". Default "50ms" (l.598).
    #[serde(default)]
    pub tau: Option<Spanned<String>>,
    /// A slot whose one-way delay exceeds max_owd × (1 − alpha) is lossy. Default
    /// 0.005 (l.599).
    #[serde(default)]
    pub alpha: Option<Spanned<f64>>,
}
