//! Typed job results: the fields of an agent's `burn`, `latency` and `load` results
//! that the results format reads (the agent's full result is kept verbatim in a
//! sample's `result`), and the flat [`Metrics`] of a sample made from them; likewise
//! the fields of a background job's final result (`busy`, `load`, `serve`) and the
//! flat [`Achieved`] columns of a background record made from them.
//!
//! The agent's result types (`nnb_burn`, `nnb_netlat`) serialize to JSON with at
//! least these fields; reading them through these types rather than JSON pointers
//! makes a renamed field an error naming it ([`ResultError`]) instead of a silently
//! empty column. The controller reads each measured job's result once, where the
//! agent hands it over ([`JobOutcome::read`]), and each background job's final
//! result once ([`BackgroundResult::parse`]); `nnb-agent`'s result-contract test
//! runs every job kind and reads its real result through them.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metric::{Direction, Metric, MetricValues};
use crate::quality::Quality;
use crate::FORMAT_VERSION;

/// A job's result that does not read as the results format's: the job's kind and
/// serde's message, which names the missing or malformed field.
#[derive(Debug, thiserror::Error)]
#[error("the {kind} job's result does not read as nnb's results format: {source}")]
pub struct ResultError {
    /// The job's kind as the format names it (`burn`, `busy`, ...).
    pub kind: &'static str,
    /// What serde found wrong.
    #[source]
    pub source: serde_json::Error,
}

/// Reads `result` as a `T`, the result type of a `kind` job.
fn read<T: DeserializeOwned>(kind: &'static str, result: &Value) -> Result<T, ResultError> {
    T::deserialize(result).map_err(|source| ResultError { kind, source })
}

/// Every kind of job an agent runs, as the job protocol's `kind` tag names it: the
/// measured kinds ([`JobKind`]), the background kinds ([`BackgroundJob`]; `load` is
/// both) and the steal scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentJob {
    /// A pinned CPU burner, fixed work or fixed time.
    Burn,
    /// A steal and hiccup scan.
    Steal,
    /// A UDP latency probe.
    Latency,
    /// A paced UDP load generator, for a time or until stopped.
    Load,
    /// A UDP reflector and sink, until stopped.
    Serve,
    /// A CPU burner, until stopped.
    Busy,
    /// Nothing, until stopped.
    Idle,
    /// A paced random read/write generator on a file.
    Disk,
    /// Memory allocated and kept touched by worker processes.
    Memory,
    /// Wang & Ng's RTT series: probes at a fixed rate, every probe's RTT kept in
    /// order (UDP against a reflector, or ICMP echo).
    Rtt,
    /// Wang & Ng's Badabing: probes in random time slots, the loss frequency of slots
    /// and the one-way delays that explain it.
    Badabing,
    /// A window of the agent's running load, read from the sink's arrival series (a
    /// continuous throughput staircase's node at one level): measured as a `load`.
    LoadWindow,
    /// A program run without a shell (version 11), measured until it exits or in
    /// the background until stopped; only on an agent started with
    /// `--allow-commands`.
    Command,
}

impl AgentJob {
    /// Every kind.
    pub const ALL: [AgentJob; 13] = [
        AgentJob::Burn,
        AgentJob::Steal,
        AgentJob::Latency,
        AgentJob::Load,
        AgentJob::Serve,
        AgentJob::Busy,
        AgentJob::Idle,
        AgentJob::Disk,
        AgentJob::Memory,
        AgentJob::Rtt,
        AgentJob::Badabing,
        AgentJob::LoadWindow,
        AgentJob::Command,
    ];

    /// The kind's name on the wire and in the format, e.g. `burn`.
    pub const fn name(self) -> &'static str {
        match self {
            AgentJob::Burn => "burn",
            AgentJob::Steal => "steal",
            AgentJob::Latency => "latency",
            AgentJob::Load => "load",
            AgentJob::Serve => "serve",
            AgentJob::Busy => "busy",
            AgentJob::Idle => "idle",
            AgentJob::Disk => "disk",
            AgentJob::Memory => "memory",
            AgentJob::Rtt => "rtt",
            AgentJob::Badabing => "badabing",
            AgentJob::LoadWindow => "load-window",
            AgentJob::Command => "command",
        }
    }

    /// The kind as a measured job kind, if a step measures jobs of this kind.
    pub const fn measured(self) -> Option<JobKind> {
        match self {
            AgentJob::Burn => Some(JobKind::Burn),
            AgentJob::Latency => Some(JobKind::Latency),
            // A window's result has a sampled load's shape: its record is the load's.
            AgentJob::Load | AgentJob::LoadWindow => Some(JobKind::Load),
            AgentJob::Disk => Some(JobKind::Disk),
            AgentJob::Memory => Some(JobKind::Memory),
            AgentJob::Steal => Some(JobKind::Steal),
            AgentJob::Rtt => Some(JobKind::Rtt),
            AgentJob::Badabing => Some(JobKind::Badabing),
            AgentJob::Command => Some(JobKind::Command),
            AgentJob::Serve | AgentJob::Busy | AgentJob::Idle => None,
        }
    }

    /// The kind as a background job kind, if jobs of this kind run beside the
    /// measured ones until stopped.
    pub const fn background(self) -> Option<BackgroundJob> {
        match self {
            AgentJob::Busy => Some(BackgroundJob::Busy),
            AgentJob::Load => Some(BackgroundJob::Load),
            AgentJob::Idle => Some(BackgroundJob::Idle),
            AgentJob::Serve => Some(BackgroundJob::Serve),
            AgentJob::Command => Some(BackgroundJob::Command),
            AgentJob::Burn
            | AgentJob::Steal
            | AgentJob::Latency
            | AgentJob::Disk
            | AgentJob::Memory
            | AgentJob::Rtt
            | AgentJob::Badabing
            | AgentJob::LoadWindow => None,
        }
    }
}

display_name!(AgentJob, JobKind, BackgroundJob);

/// The measured job kinds of a step, as a sample's `job` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobKind {
    /// A pinned CPU burner.
    Burn,
    /// A UDP latency probe.
    Latency,
    /// A UDP load generator.
    Load,
    /// A paced random read/write generator on a file (version 5).
    Disk,
    /// Memory allocated and kept touched by worker processes (version 5).
    Memory,
    /// Wang & Ng's CPUTest: a steal scan whose CPU share is the share of wall time
    /// outside gaps longer than the threshold (version 8).
    Steal,
    /// Wang & Ng's RTT series (version 8).
    Rtt,
    /// Wang & Ng's Badabing loss probe (version 8).
    Badabing,
    /// A program run until it exits (version 11): its wall time, or a value it
    /// printed.
    Command,
}

impl JobKind {
    /// Every measured job kind.
    pub const ALL: [JobKind; 9] = [
        JobKind::Burn,
        JobKind::Latency,
        JobKind::Load,
        JobKind::Disk,
        JobKind::Memory,
        JobKind::Steal,
        JobKind::Rtt,
        JobKind::Badabing,
        JobKind::Command,
    ];

    /// The job's name in the format: `burn`, `latency`, `load`, `disk`, `memory`,
    /// `steal`, `rtt`, `badabing`, `command`.
    pub const fn name(self) -> &'static str {
        self.job().name()
    }

    /// The kind as the job protocol names it.
    pub const fn job(self) -> AgentJob {
        match self {
            JobKind::Burn => AgentJob::Burn,
            JobKind::Latency => AgentJob::Latency,
            JobKind::Load => AgentJob::Load,
            JobKind::Disk => AgentJob::Disk,
            JobKind::Memory => AgentJob::Memory,
            JobKind::Steal => AgentJob::Steal,
            JobKind::Rtt => AgentJob::Rtt,
            JobKind::Badabing => AgentJob::Badabing,
            JobKind::Command => AgentJob::Command,
        }
    }

    /// The measured job kind named `name`, if it is one (`steal`, `busy`, ... are not).
    pub fn from_name(name: &str) -> Option<JobKind> {
        JobKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The host-side utilisation metric of the resource this kind of job loads: a
    /// burn's CPU, a disk job's I/O, a memory job's resident memory. None for a
    /// latency probe, nor for a load: what a tenant's interface sent
    /// (`host_net_bps`) is what it offered, before the host's shared NIC where
    /// tenants contend; what it got through is what the endpoint's sink received,
    /// the load's own `rate_bps`. None for a command either: which resource a
    /// program loads is not known.
    pub const fn host_metric(self) -> Option<Metric> {
        match self {
            JobKind::Burn => Some(Metric::HostCpuPct),
            JobKind::Disk => Some(Metric::HostIops),
            JobKind::Memory => Some(Metric::HostMemBytes),
            JobKind::Load
            | JobKind::Latency
            | JobKind::Steal
            | JobKind::Rtt
            | JobKind::Badabing
            | JobKind::Command => None,
        }
    }
}

/// Where the threads of a fixed-work burn take their events (ops) from.
///
/// sysbench's threads draw events from one pool until `--events` are done (the
/// thesis' "aggregated workload", §5.1): a thread slowed by a neighbor takes fewer
/// and the runtime is the whole pool's. The thesis' `cpu_burn` (and nnb before format
/// version 9) gives each thread its own fixed share, so the runtime is the slowest
/// thread's. A fixed-time burn has no pool: every thread runs until the deadline
/// either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum EventPool {
    /// Each thread does `ops` ops of its own (the thesis' `cpu_burn`, one process
    /// per thread); the runtime is the slowest thread's.
    #[default]
    PerThread,
    /// The threads take batches of events from one pool of `ops` events in all
    /// (sysbench's `--events`); the runtime ends with the pool's last event.
    Shared,
}

impl EventPool {
    /// Every pool's name, as [`EventPool::from_str`](std::str::FromStr) takes it.
    pub const NAMES: [&'static str; 2] = ["per-thread", "shared"];

    /// Whether this is the default, [`EventPool::PerThread`] (left out of a job's JSON).
    pub fn is_per_thread(&self) -> bool {
        *self == EventPool::PerThread
    }

    /// The name as typed (`per-thread`, `shared`).
    pub fn name(self) -> &'static str {
        match self {
            EventPool::PerThread => "per-thread",
            EventPool::Shared => "shared",
        }
    }
}

impl std::fmt::Display for EventPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A pool name that is not one of [`EventPool::NAMES`].
#[derive(Debug, thiserror::Error)]
#[error("unknown event pool '{0}': expected per-thread or shared")]
pub struct UnknownEventPool(pub String);

impl std::str::FromStr for EventPool {
    type Err = UnknownEventPool;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "per-thread" => Ok(EventPool::PerThread),
            "shared" => Ok(EventPool::Shared),
            other => Err(UnknownEventPool(other.to_string())),
        }
    }
}

/// The burner's totals in a `burn` job's result (`burn` object).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BurnTotals {
    /// Wall time, last thread end - first thread start, ns.
    pub wall_ns: f64,
    /// Operations of all threads per second.
    pub ops_per_sec: f64,
    /// Where the threads took their events from (version 9; older results, which
    /// lack it, were per-thread).
    #[serde(default)]
    pub pool: EventPool,
    /// One entry per thread.
    #[serde(default)]
    pub threads: Vec<BurnThread>,
}

/// What the format reads of one burner thread (`burn.threads[]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BurnThread {
    /// Ops (events) this thread did: with a shared pool, the events it took.
    #[serde(default)]
    pub ops: u64,
    /// The thread's own CPU time over its measured span, ns (version 9; absent in
    /// older results).
    #[serde(default)]
    pub busy_ns: Option<f64>,
}

/// What the format reads of a `burn` job's result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BurnJobResult {
    /// The burn's totals.
    pub burn: BurnTotals,
}

/// Round-trip times of a latency probe (`rtt` object), ns.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct RttSummary {
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: f64,
    /// 90th percentile.
    pub p90_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
}

/// What the format reads of a `latency` job's result.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct LatencyJobResult {
    /// Measured time after the warm-up, s.
    pub elapsed_s: f64,
    /// Round-trip times.
    pub rtt: RttSummary,
    /// The IP TTL of the answers and the hops it suggests (version 10; none from an
    /// older agent, or when the kernel reported no TTL).
    #[serde(default)]
    pub reply_ttl: Option<ReplyTtl>,
}

/// The IP TTL (IPv6: hop limit) a probe's answers arrived with (`reply_ttl`
/// object of a `latency` or UDP `rtt` job's result, version 10): Wang & Ng's
/// network-location check between the prober and the reflector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ReplyTtl {
    /// The smallest TTL an answer arrived with.
    pub min: u8,
    /// The largest (the shortest path seen).
    pub max: u8,
    /// Routers between the two ends, inferred from `max` (the next usual initial
    /// TTL, 64, 128 or 255, minus it).
    pub hops: u8,
}

/// The sender's totals of a load job (`sent` object).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct SentTotals {
    /// Sending time, s.
    pub elapsed_s: f64,
    /// Payload rate sent, bit/s.
    pub payload_bps: f64,
}

/// What the sink reported of a load job (`sink` object).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct SinkTotals {
    /// Payload rate received, bit/s (of the streams that reported).
    pub rate_bps: f64,
    /// Streams whose report arrived.
    #[serde(default)]
    pub streams_reported: Option<usize>,
    /// Datagrams the sink's own receive sockets dropped while the streams used them
    /// (version 9): loss at the receiver, not in the network; `None` from a sink
    /// that does not count them.
    #[serde(default)]
    pub drops: Option<u64>,
}

/// The window means of a sampled load (`samples` object, a throughput staircase's
/// nodes): the mean of the latest `window` per-interval rates.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct SampledRates {
    /// Sampling interval, s.
    pub interval_s: f64,
    /// Samples the means average (at most).
    pub window: usize,
    /// Payload rate sent, bit/s.
    pub sent_window_bps: Option<f64>,
    /// Payload rate the sink received, bit/s; none unless every stream's arrival
    /// series came back.
    pub received_window_bps: Option<f64>,
}

/// What the format reads of a `load` job's result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LoadJobResult {
    /// The sender's totals.
    pub sent: SentTotals,
    /// The window means, when the load was sampled.
    #[serde(default)]
    pub samples: Option<SampledRates>,
    /// The sink's report, when it answered.
    #[serde(default)]
    pub sink: Option<SinkTotals>,
    /// One entry per stream (only counted here).
    #[serde(default)]
    pub streams: Vec<serde::de::IgnoredAny>,
}

impl LoadJobResult {
    /// Payload rate received by the sink, only when every stream's report arrived:
    /// a partial report undercounts, and the sender's rate is not a received rate
    /// (on a saturated link it can be many times what arrived). A sampled load's is
    /// the mean of its latest `window` received samples.
    pub fn rate_bps(&self) -> Option<f64> {
        if let Some(s) = self.samples {
            return s.received_window_bps;
        }
        let sink = self.sink?;
        crate::quality::sink_complete(Some(sink.streams_reported), self.streams.len())
            .then_some(sink.rate_bps)
    }
}

/// The background job kinds, as a background record's `job` names them: what runs
/// beside the measured jobs until the controller stops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackgroundJob {
    /// A busy neighbor's CPU burner.
    Busy,
    /// A busy neighbor's UDP load towards the sink, until stopped.
    Load,
    /// An idle neighbor (nothing, until stopped).
    Idle,
    /// The endpoint's reflector and sink.
    Serve,
    /// A neighbor's program, until stopped (version 11).
    Command,
}

impl BackgroundJob {
    /// Every background job kind.
    pub const ALL: [BackgroundJob; 5] = [
        BackgroundJob::Busy,
        BackgroundJob::Load,
        BackgroundJob::Idle,
        BackgroundJob::Serve,
        BackgroundJob::Command,
    ];

    /// The job's name in the format: `busy`, `load`, `idle`, `serve`, `command`.
    pub const fn name(self) -> &'static str {
        self.job().name()
    }

    /// The kind as the job protocol names it.
    pub const fn job(self) -> AgentJob {
        match self {
            BackgroundJob::Busy => AgentJob::Busy,
            BackgroundJob::Load => AgentJob::Load,
            BackgroundJob::Idle => AgentJob::Idle,
            BackgroundJob::Serve => AgentJob::Serve,
            BackgroundJob::Command => AgentJob::Command,
        }
    }

    /// The background job kind named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<BackgroundJob> {
        BackgroundJob::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// What the format reads of a `busy` job's result.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct BusyJobResult {
    /// Operations of all threads.
    pub total_ops: f64,
    /// Operations of all threads per second, first start to last end.
    pub ops_per_sec: f64,
}

/// A reflector's counters in a `serve` job's final snapshot (`reflector`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ReflectorTotals {
    /// Pings answered.
    pub reflected: u64,
    /// Pongs the kernel refused to send.
    pub send_failures: u64,
    /// Datagrams dropped as not nnb's pings, by kind.
    pub garbage: BTreeMap<String, u64>,
}

/// A sink's dropped datagrams in a `serve` job's final snapshot (`sink`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ServeSinkTotals {
    /// Datagrams dropped as not nnb's load, by kind.
    pub garbage: BTreeMap<String, u64>,
}

/// What the format reads of a `serve` job's final snapshot.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ServeJobResult {
    /// The reflector's counters, if it ran.
    pub reflector: Option<ReflectorTotals>,
    /// The sink's, if it ran.
    pub sink: Option<ServeSinkTotals>,
}

/// What a background job achieved, read from its final result: the flat columns of a
/// background record. Each is `null` where the job's kind has no such figure, or its
/// result did not say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Achieved {
    /// `busy`: the burn's wall time, total ops / ops per second; `load`: the
    /// sender's time; `command`: the program's wall time; seconds.
    pub runtime_s: Option<f64>,
    /// `busy`: operations of all threads per second.
    pub ops_per_sec: Option<f64>,
    /// `load`: payload rate sent, bit/s.
    pub sent_bps: Option<f64>,
    /// `load`: payload rate received by the sink, only when every stream's report
    /// arrived (as a sample's `rate_bps`).
    pub rate_bps: Option<f64>,
    /// `serve`: pings the reflector answered.
    pub reflected: Option<u64>,
    /// `serve`: pongs the reflector could not send (the probe counts them lost).
    pub send_failures: Option<u64>,
    /// `serve`: datagrams the reflector and the sink dropped as not nnb's.
    pub garbage: Option<u64>,
}

/// A background job's final result, read by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum BackgroundResult {
    /// A busy neighbor's burner's.
    Busy(BusyJobResult),
    /// A background load's.
    Load(LoadJobResult),
    /// An idle neighbor's (it has nothing to say).
    Idle,
    /// The endpoint's final snapshot.
    Serve(ServeJobResult),
    /// A neighbor's program's.
    Command(CommandJobResult),
}

impl BackgroundResult {
    /// Reads the final result of a `job` background job; an error names the job's
    /// kind and the missing or malformed field. An idle job's result is not read.
    pub fn parse(job: BackgroundJob, result: &Value) -> Result<BackgroundResult, ResultError> {
        let kind = job.name();
        Ok(match job {
            BackgroundJob::Busy => BackgroundResult::Busy(read(kind, result)?),
            BackgroundJob::Load => BackgroundResult::Load(read(kind, result)?),
            BackgroundJob::Idle => BackgroundResult::Idle,
            BackgroundJob::Serve => BackgroundResult::Serve(read(kind, result)?),
            BackgroundJob::Command => BackgroundResult::Command(read(kind, result)?),
        })
    }
}

impl Achieved {
    /// The figures of a background job's final result.
    pub fn of(result: &BackgroundResult) -> Achieved {
        match result {
            BackgroundResult::Busy(b) => Achieved {
                runtime_s: (b.ops_per_sec > 0.0).then(|| b.total_ops / b.ops_per_sec),
                ops_per_sec: Some(b.ops_per_sec),
                ..Achieved::default()
            },
            BackgroundResult::Load(l) => Achieved {
                runtime_s: Some(l.sent.elapsed_s),
                sent_bps: Some(l.sent.payload_bps),
                rate_bps: l.rate_bps(),
                ..Achieved::default()
            },
            BackgroundResult::Serve(s) => {
                let sink_garbage = s.sink.iter().flat_map(|k| k.garbage.values());
                Achieved {
                    reflected: s.reflector.as_ref().map(|r| r.reflected),
                    send_failures: s.reflector.as_ref().map(|r| r.send_failures),
                    garbage: (s.reflector.is_some() || s.sink.is_some()).then(|| {
                        s.reflector
                            .iter()
                            .flat_map(|r| r.garbage.values())
                            .chain(sink_garbage)
                            .sum()
                    }),
                    ..Achieved::default()
                }
            }
            BackgroundResult::Command(c) => Achieved {
                runtime_s: Some(c.wall_s),
                ..Achieved::default()
            },
            BackgroundResult::Idle => Achieved::default(),
        }
    }
}

/// A disk job's latency distribution (`latency`, `read_latency`, `write_latency`),
/// ns. Version 5 and before wrote it in µs (`mean_us` ...), which
/// [`JobResult::parse_of_version`] reads as ns.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct DiskLatency {
    /// Exact mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Exact maximum.
    pub max_ns: f64,
}

/// How late a paced disk job's operations started against their schedule
/// (`pacing`), ns; µs in version 5 and before, as [`DiskLatency`].
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct DiskPacing {
    /// Median lateness.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Exact maximum.
    pub max_ns: f64,
    /// Operations that started more than 1 ms after their time.
    pub late_ops: u64,
}

/// What the format reads of a `disk` job's result.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct DiskJobResult {
    /// Generating time, s.
    pub elapsed_s: f64,
    /// Operations completed per second.
    pub iops: f64,
    /// Latency of all operations; none when none completed.
    #[serde(default)]
    pub latency: Option<DiskLatency>,
    /// Latency of the reads.
    #[serde(default)]
    pub read_latency: Option<DiskLatency>,
    /// Latency of the writes.
    #[serde(default)]
    pub write_latency: Option<DiskLatency>,
    /// Lateness against the schedule; none when unpaced.
    #[serde(default)]
    pub pacing: Option<DiskPacing>,
}

/// The first format version whose disk results give their latencies in ns.
const DISK_NS_SINCE: u32 = 6;

/// A version-5 (or older) disk result with its latencies' µs fields (`mean_us`,
/// `p50_us`, `p99_us`, `max_us` of `latency`, `read_latency`, `write_latency` and
/// `pacing`) made the ns fields of today's (`mean_ns` ..., times 1000).
fn disk_micros_to_nanos(result: &Value) -> Value {
    let mut v = result.clone();
    for key in ["latency", "read_latency", "write_latency", "pacing"] {
        let Some(Value::Object(fields)) = v.get_mut(key) else {
            continue;
        };
        let micros: Vec<(String, f64)> = fields
            .iter()
            .filter_map(|(k, x)| Some((k.strip_suffix("_us")?.to_string(), x.as_f64()?)))
            .collect();
        for (name, us) in micros {
            fields.remove(&format!("{name}_us"));
            fields.insert(format!("{name}_ns"), Value::from(us * 1e3));
        }
    }
    v
}

/// What the format reads of a `memory` job's result.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct MemoryJobResult {
    /// Loading time, s.
    pub elapsed_s: f64,
    /// The workers' highest resident set size, bytes.
    pub peak_rss_bytes: f64,
}

/// One CPU of a `steal` job's result (`cpus` entries).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct StealCpuShare {
    /// Share of the span the thread ran, 0 to 1: 1 - (gaps longer than the
    /// threshold) / span, Wang & Ng's CPU share with their 1 ms threshold.
    pub ran_share: f64,
}

/// What the format reads of a `steal` job's result (version 8).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StealJobResult {
    /// Requested duration, ns.
    pub duration_ns: f64,
    /// One entry per measured CPU.
    pub cpus: Vec<StealCpuShare>,
}

impl StealJobResult {
    /// The CPU share, percent of wall time: the mean of the CPUs' `ran_share`; none
    /// without CPUs.
    pub fn cpu_share_pct(&self) -> Option<f64> {
        let n = self.cpus.len() as f64;
        (n > 0.0).then(|| 100.0 * self.cpus.iter().map(|c| c.ran_share).sum::<f64>() / n)
    }
}

/// An RTT series' summary (`summary` object of an `rtt` job's result), over the
/// probes kept (after the dropped first ones), ns.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct RttSeriesSummary {
    /// Smallest RTT: the propagation delay's estimate.
    pub min_ns: f64,
    /// Median.
    pub p50_ns: f64,
    /// Mean.
    pub mean_ns: f64,
    /// Largest.
    pub max_ns: f64,
    /// Standard deviation.
    pub std_ns: f64,
}

/// What the format reads of an `rtt` job's result (version 8).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct RttJobResult {
    /// Probing time, s.
    pub elapsed_s: f64,
    /// The summary of the kept probes' RTTs; none when every probe was lost.
    pub summary: Option<RttSeriesSummary>,
    /// The IP TTL of the answers and the hops it suggests (version 10; none over
    /// ICMP, from an older agent, or when the kernel reported no TTL).
    #[serde(default)]
    pub reply_ttl: Option<ReplyTtl>,
}

/// What the format reads of a `badabing` job's result (version 8).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct BadabingJobResult {
    /// Probing time, s.
    pub elapsed_s: f64,
    /// Lossy slots / probed slots, 0 to 1 (Badabing's loss frequency).
    pub loss_frequency: f64,
    /// Lost probes / probes, 0 to 1 (a probe is lost when any of its packets is).
    pub probe_loss_rate: f64,
}

/// Where a command job's value came from (`source` of its result, version 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum CommandValueSource {
    /// The wall time itself (`value` = `wall_s`, unit `s`, lower is better).
    Wall,
    /// A number at a JSON pointer into the command's output read as JSON.
    Json,
    /// The first capture group of a regex over the command's output.
    Regex,
}

/// The tool a command job's preset named, as the agent found it (`tool` of its
/// result, version 11).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandTool {
    /// The preset's name (`stress-ng`, `fio`, `sysbench`, `iperf3`).
    pub preset: String,
    /// The program the agent ran, as found on its `PATH`.
    pub path: String,
    /// The first line the tool printed for `--version` (bounded), e.g.
    /// `stress-ng, version 0.15.06`; none when it printed nothing.
    pub version: Option<String>,
}

/// What the format reads of a `command` job's result (version 11): how the program
/// ended and what it measured. The agent's result also carries its output's tails.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CommandJobResult {
    /// The program's exit code; none when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did (a stopped background command's
    /// `SIGTERM` or `SIGKILL`).
    #[serde(default)]
    pub signal: Option<i32>,
    /// Wall time from the start to the exit of its process, by the agent's
    /// monotonic clock, s.
    pub wall_s: f64,
    /// Where `value` came from.
    pub source: CommandValueSource,
    /// The measured value: `wall_s`, or the number the command printed; none for a
    /// background command stopped before it printed one.
    pub value: Option<f64>,
    /// The value's unit as declared (`s` for the wall time).
    pub unit: String,
    /// The value's direction as declared (false for the wall time).
    pub higher_is_better: bool,
    /// The tool of the job's preset, with its version; none without a preset.
    #[serde(default)]
    pub tool: Option<CommandTool>,
}

impl CommandJobResult {
    /// The sample's primary metric: [`Metric::CommandWallS`] for a wall time,
    /// [`Metric::CommandValue`] for a printed value.
    pub fn primary_metric(&self) -> Metric {
        match self.source {
            CommandValueSource::Wall => Metric::CommandWallS,
            CommandValueSource::Json | CommandValueSource::Regex => Metric::CommandValue,
        }
    }
}

/// A measured job's result, read by kind.
#[derive(Debug, Clone, PartialEq)]
pub enum JobResult {
    /// A burn's.
    Burn(BurnJobResult),
    /// A latency probe's.
    Latency(LatencyJobResult),
    /// A load generator's.
    Load(LoadJobResult),
    /// A disk generator's.
    Disk(DiskJobResult),
    /// A memory load's.
    Memory(MemoryJobResult),
    /// A CPUTest steal scan's.
    Steal(StealJobResult),
    /// An RTT series'.
    Rtt(RttJobResult),
    /// A Badabing probe's.
    Badabing(BadabingJobResult),
    /// A command's.
    Command(CommandJobResult),
}

impl JobResult {
    /// Reads the result of a `kind` job as this nnb writes it ([`FORMAT_VERSION`]); an
    /// error names the kind and the missing or malformed field.
    pub fn parse(kind: JobKind, result: &Value) -> Result<JobResult, ResultError> {
        JobResult::parse_of_version(kind, FORMAT_VERSION, result)
    }

    /// Reads the result of a `kind` job in a record of format `version` (its
    /// `format_version`): a disk job's latencies of version 5 and before, in µs, are
    /// read in ns as today's.
    pub fn parse_of_version(
        kind: JobKind,
        version: u32,
        result: &Value,
    ) -> Result<JobResult, ResultError> {
        let name = kind.name();
        Ok(match kind {
            JobKind::Burn => JobResult::Burn(read(name, result)?),
            JobKind::Latency => JobResult::Latency(read(name, result)?),
            JobKind::Load => JobResult::Load(read(name, result)?),
            JobKind::Disk if version < DISK_NS_SINCE => {
                JobResult::Disk(read(name, &disk_micros_to_nanos(result))?)
            }
            JobKind::Disk => JobResult::Disk(read(name, result)?),
            JobKind::Memory => JobResult::Memory(read(name, result)?),
            JobKind::Steal => JobResult::Steal(read(name, result)?),
            JobKind::Rtt => JobResult::Rtt(read(name, result)?),
            JobKind::Badabing => JobResult::Badabing(read(name, result)?),
            JobKind::Command => JobResult::Command(read(name, result)?),
        })
    }

    /// The kind of job whose result this is.
    pub const fn kind(&self) -> JobKind {
        match self {
            JobResult::Burn(_) => JobKind::Burn,
            JobResult::Latency(_) => JobKind::Latency,
            JobResult::Load(_) => JobKind::Load,
            JobResult::Disk(_) => JobKind::Disk,
            JobResult::Memory(_) => JobKind::Memory,
            JobResult::Steal(_) => JobKind::Steal,
            JobResult::Rtt(_) => JobKind::Rtt,
            JobResult::Badabing(_) => JobKind::Badabing,
            JobResult::Command(_) => JobKind::Command,
        }
    }

    /// Seconds of measured interval the result reports; a latency probe's warm-up
    /// (`warmup_s`, which its result leaves out) is added to it.
    pub fn measured_secs(&self, warmup_s: f64) -> f64 {
        match self {
            JobResult::Burn(b) => b.burn.wall_ns / 1e9,
            JobResult::Latency(l) => l.elapsed_s + warmup_s,
            JobResult::Load(l) => l.sent.elapsed_s,
            JobResult::Disk(d) => d.elapsed_s,
            JobResult::Memory(m) => m.elapsed_s,
            JobResult::Steal(s) => s.duration_ns / 1e9,
            JobResult::Rtt(r) => r.elapsed_s,
            JobResult::Badabing(b) => b.elapsed_s,
            JobResult::Command(c) => c.wall_s,
        }
    }
}

/// Removes the raw HDR interval log a latency job's result carries in its `hdr_log`
/// field (the controller stores it beside the samples) and returns it.
pub fn take_hdr_log(result: &mut Value) -> Option<String> {
    match result.as_object_mut()?.remove("hdr_log")? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// A measured job's result, read once where the controller receives it from the
/// agent: the typed figures the format reads, the qualifiers, the raw HDR log taken
/// out, and the rest of the raw result, which a sample keeps verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOutcome {
    /// The typed result.
    pub result: JobResult,
    /// What qualifies its numbers, and what the job ran under.
    pub quality: Quality,
    /// The raw HDR interval log a latency job sends ([`take_hdr_log`]).
    pub hdr_log: Option<String>,
    /// The raw result without its HDR log.
    pub raw: Value,
}

impl JobOutcome {
    /// Reads the result a `kind` job's agent returned; an error names the kind and
    /// the missing or malformed field.
    pub fn read(kind: JobKind, mut raw: Value) -> Result<JobOutcome, ResultError> {
        let hdr_log = take_hdr_log(&mut raw);
        Ok(JobOutcome {
            result: JobResult::parse(kind, &raw)?,
            quality: Quality::of(&raw),
            hdr_log,
            raw,
        })
    }
}

/// The `hops` column of a probe's reply TTL.
fn hops(reply_ttl: Option<ReplyTtl>) -> Option<f64> {
    reply_ttl.map(|t| f64::from(t.hops))
}

/// The flat metric columns of one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Primary metric.
    pub metric: Option<Metric>,
    /// Primary metric value.
    pub value: Option<f64>,
    /// Every metric's value ([`Metric::ALL`]).
    pub values: MetricValues,
    /// The primary metric's direction when the job declared its own (a command's
    /// printed value, [`Metric::CommandValue`]); `None`: the metric's own
    /// ([`Metric::direction`]).
    pub direction: Option<Direction>,
}

impl Metrics {
    /// The metrics of a measured job's result. A fixed-work burn's primary metric is
    /// its runtime, a fixed-time burn's its throughput; a probe's the mean RTT; a
    /// load's the received rate (none unless every stream's sink report came back);
    /// a disk job's its IOPS, a memory job's its peak RSS; a steal scan's its CPU
    /// share, an RTT series' its median RTT, a Badabing probe's its loss frequency;
    /// a command's its wall time, or the value it printed in the direction its file
    /// declared.
    pub fn of(result: &JobResult, fixed_work: bool) -> Metrics {
        let primary = match result {
            JobResult::Burn(_) if fixed_work => Metric::RuntimeS,
            JobResult::Burn(_) => Metric::OpsPerSec,
            JobResult::Latency(_) => Metric::RttMeanNs,
            JobResult::Load(_) => Metric::RateBps,
            JobResult::Disk(_) => Metric::Iops,
            JobResult::Memory(_) => Metric::RssBytes,
            JobResult::Steal(_) => Metric::CpuSharePct,
            JobResult::Rtt(_) => Metric::RttP50Ns,
            JobResult::Badabing(_) => Metric::LossFrequencyPct,
            JobResult::Command(c) => c.primary_metric(),
        };
        let mut m = Metrics {
            metric: Some(primary),
            ..Metrics::default()
        };
        match result {
            JobResult::Burn(b) => {
                m.values.set(Metric::RuntimeS, Some(b.burn.wall_ns / 1e9));
                m.values.set(Metric::OpsPerSec, Some(b.burn.ops_per_sec));
                let threads = b.burn.threads.len() as f64;
                let per_thread = threads * 1e9 / b.burn.ops_per_sec;
                m.values.set(
                    Metric::NsPerOpPerThread,
                    (threads > 0.0 && per_thread.is_finite()).then_some(per_thread),
                );
            }
            JobResult::Latency(l) => {
                let r = l.rtt;
                let rtt = [r.mean_ns, r.p50_ns, r.p90_ns, r.p99_ns, r.p999_ns];
                for (metric, ns) in Metric::RTT.into_iter().zip(rtt) {
                    m.values.set(metric, Some(ns));
                }
                m.values.set(Metric::Hops, hops(l.reply_ttl));
            }
            JobResult::Load(l) => {
                m.values.set(Metric::RateBps, l.rate_bps());
                let drops = l.sink.and_then(|s| s.drops);
                m.values.set(Metric::SinkDrops, drops.map(|d| d as f64));
            }
            JobResult::Disk(d) => m.values.set(Metric::Iops, Some(d.iops)),
            JobResult::Memory(r) => m.values.set(Metric::RssBytes, Some(r.peak_rss_bytes)),
            JobResult::Steal(s) => m.values.set(Metric::CpuSharePct, s.cpu_share_pct()),
            JobResult::Rtt(r) => {
                if let Some(s) = r.summary {
                    m.values.set(Metric::RttMinNs, Some(s.min_ns));
                    m.values.set(Metric::RttP50Ns, Some(s.p50_ns));
                    m.values.set(Metric::RttMeanNs, Some(s.mean_ns));
                    m.values.set(Metric::RttMaxNs, Some(s.max_ns));
                    m.values.set(Metric::RttStdNs, Some(s.std_ns));
                }
                m.values.set(Metric::Hops, hops(r.reply_ttl));
            }
            JobResult::Badabing(b) => {
                m.values
                    .set(Metric::LossFrequencyPct, Some(100.0 * b.loss_frequency));
                m.values
                    .set(Metric::ProbeLossPct, Some(100.0 * b.probe_loss_rate));
            }
            JobResult::Command(c) => {
                m.values.set(Metric::CommandWallS, Some(c.wall_s));
                if c.source != CommandValueSource::Wall {
                    m.values.set(Metric::CommandValue, c.value);
                    m.direction = Some(if c.higher_is_better {
                        Direction::HigherIsBetter
                    } else {
                        Direction::LowerIsBetter
                    });
                }
            }
        }
        m.value = m.get(primary);
        m
    }

    /// The value of `metric` in these columns.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.values.get(metric)
    }

    /// Whether a higher primary value is better: the job's declared direction, else
    /// the primary metric's; `None` without a primary metric. A sample's
    /// `higher_is_better`.
    pub fn higher_is_better(&self) -> Option<bool> {
        let direction = self
            .direction
            .or_else(|| self.metric.map(Metric::direction))?;
        Some(direction.higher_is_better())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn job_names_match_serde_and_the_protocols_kinds() {
        for j in AgentJob::ALL {
            assert_eq!(serde_json::to_value(j).unwrap(), json!(j.name()));
            match j.measured() {
                // A window is recorded as the load it reads.
                Some(k) if j == AgentJob::LoadWindow => assert_eq!(k, JobKind::Load),
                Some(k) => assert_eq!((k.job(), k.name()), (j, j.name())),
                None => {}
            }
            if let Some(b) = j.background() {
                assert_eq!((b.job(), b.name()), (j, j.name()));
            }
        }
        for k in JobKind::ALL {
            assert_eq!(k.job().measured(), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), json!(k.name()));
        }
        for b in BackgroundJob::ALL {
            assert_eq!(b.job().background(), Some(b));
            assert_eq!(serde_json::to_value(b).unwrap(), json!(b.name()));
        }
        assert_eq!(AgentJob::Steal.measured(), Some(JobKind::Steal));
        assert_eq!(AgentJob::Steal.background(), None);
        assert_eq!(
            serde_json::from_value::<JobKind>(json!("busy")).ok(),
            None,
            "busy is not measured"
        );
    }

    #[test]
    fn wang_ng_jobs_give_their_metrics_worked_out_by_hand() {
        // Two CPUs ran 50% and 70% of the span: the share is their mean, 60%.
        let steal = json!({"duration_ns": 2e9, "cpus": [{"ran_share": 0.5}, {"ran_share": 0.7}]});
        let m = metrics(JobKind::Steal, false, &steal);
        assert_eq!(m.metric, Some(Metric::CpuSharePct));
        assert!((m.value.unwrap() - 60.0).abs() < 1e-9, "{m:?}");
        let empty = json!({"duration_ns": 2e9, "cpus": []});
        assert_eq!(metrics(JobKind::Steal, false, &empty).value, None);

        let rtt = json!({"elapsed_s": 500.0, "summary": {
            "min_ns": 100.0, "p50_ns": 200.0, "mean_ns": 250.0, "max_ns": 29e6, "std_ns": 40.0}});
        let m = metrics(JobKind::Rtt, false, &rtt);
        assert_eq!((m.metric, m.value), (Some(Metric::RttP50Ns), Some(200.0)));
        assert_eq!(m.get(Metric::RttMinNs), Some(100.0));
        assert_eq!(m.get(Metric::RttMaxNs), Some(29e6));
        assert_eq!(m.get(Metric::RttStdNs), Some(40.0));
        let all_lost = json!({"elapsed_s": 1.0, "summary": null});
        assert_eq!(metrics(JobKind::Rtt, false, &all_lost).value, None);

        let bb = json!({"elapsed_s": 60.0, "loss_frequency": 0.3, "probe_loss_rate": 0.003});
        let m = metrics(JobKind::Badabing, false, &bb);
        assert_eq!(m.metric, Some(Metric::LossFrequencyPct));
        assert!((m.value.unwrap() - 30.0).abs() < 1e-9);
        assert!((m.get(Metric::ProbeLossPct).unwrap() - 0.3).abs() < 1e-9);
        assert!(!Metric::LossFrequencyPct.direction().higher_is_better());
        assert!(Metric::CpuSharePct.direction().higher_is_better());
    }

    /// The metrics of a `kind` job's result, which must read.
    fn metrics(kind: JobKind, fixed_work: bool, result: &Value) -> Metrics {
        let parsed = JobResult::parse(kind, result).unwrap_or_else(|e| panic!("{e}"));
        Metrics::of(&parsed, fixed_work)
    }

    /// What a `job` background job achieved, by its final result, which must read.
    fn achieved(job: BackgroundJob, result: &Value) -> Achieved {
        let parsed = BackgroundResult::parse(job, result).unwrap_or_else(|e| panic!("{e}"));
        Achieved::of(&parsed)
    }

    /// A command's wall time is lower-is-better seconds; a value it printed has the
    /// unit and direction its job declared, which the sample's `higher_is_better`
    /// follows (a lower-is-better printed latency is not read as a throughput).
    #[test]
    fn a_commands_metrics_follow_its_declared_direction() {
        let wall = json!({"exit_code": 0, "wall_s": 1.25, "source": "wall", "value": 1.25,
            "unit": "s", "higher_is_better": false, "stdout_tail": ""});
        let m = metrics(JobKind::Command, false, &wall);
        assert_eq!(
            (m.metric, m.value),
            (Some(Metric::CommandWallS), Some(1.25))
        );
        assert_eq!(
            (m.get(Metric::CommandValue), m.higher_is_better()),
            (None, Some(false))
        );
        for (higher, unit) in [(true, "events/s"), (false, "ms")] {
            let printed = json!({"exit_code": 0, "wall_s": 3.0, "source": "regex",
                "value": 812.5, "unit": unit, "higher_is_better": higher,
                "tool": {"preset": "sysbench", "path": "/usr/bin/sysbench",
                    "version": "sysbench 1.0.20"}});
            let m = metrics(JobKind::Command, false, &printed);
            assert_eq!(
                (m.metric, m.value),
                (Some(Metric::CommandValue), Some(812.5))
            );
            assert_eq!(m.get(Metric::CommandWallS), Some(3.0));
            assert_eq!(m.higher_is_better(), Some(higher), "{unit}");
            let JobResult::Command(c) = JobResult::parse(JobKind::Command, &printed).unwrap()
            else {
                panic!("a command result");
            };
            assert_eq!(
                c.tool.and_then(|t| t.version).as_deref(),
                Some("sysbench 1.0.20")
            );
            assert_eq!(c.unit, unit);
        }
        // A stopped neighbor's program: its wall time is what it achieved.
        let stopped = json!({"exit_code": null, "signal": 15, "wall_s": 2.0, "source": "wall",
            "value": 2.0, "unit": "s", "higher_is_better": false});
        assert_eq!(
            achieved(BackgroundJob::Command, &stopped).runtime_s,
            Some(2.0)
        );
        // Other kinds keep their metric's own direction.
        let r = json!({"burn": {"wall_ns": 2.5e9, "ops_per_sec": 400.0, "threads": [{}]}});
        assert_eq!(
            metrics(JobKind::Burn, false, &r).higher_is_better(),
            Some(true)
        );
        assert_eq!(Metrics::default().higher_is_better(), None);
    }

    #[test]
    fn burn_metrics_follow_the_work_mode() {
        let r = json!({"burn": {"wall_ns": 2.5e9, "ops_per_sec": 400.0, "threads": [{}, {}]}});
        let fixed = metrics(JobKind::Burn, true, &r);
        assert_eq!(
            (fixed.metric, fixed.value),
            (Some(Metric::RuntimeS), Some(2.5))
        );
        let timed = metrics(JobKind::Burn, false, &r);
        assert_eq!(
            (timed.metric, timed.value, timed.get(Metric::RuntimeS)),
            (Some(Metric::OpsPerSec), Some(400.0), Some(2.5))
        );
        // 2 threads at 400 ops/s together: 2 / 400 s = 5 ms per op per thread.
        assert_eq!(timed.get(Metric::NsPerOpPerThread), Some(5e6));
    }

    /// A version 9 burn result says where its events came from and what each thread
    /// did and used; an older one (no `pool`, no `busy_ns`) reads as per-thread.
    #[test]
    fn a_burn_result_reads_its_pool_and_per_thread_events() {
        let v9 = json!({"burn": {"wall_ns": 2e9, "ops_per_sec": 500.0, "pool": "shared",
            "threads": [{"ops": 667, "busy_ns": 2e9}, {"ops": 333, "busy_ns": 1e9}]}});
        let JobResult::Burn(b) = JobResult::parse(JobKind::Burn, &v9).unwrap() else {
            panic!("not a burn");
        };
        assert_eq!(b.burn.pool, EventPool::Shared);
        let ops: Vec<u64> = b.burn.threads.iter().map(|t| t.ops).collect();
        assert_eq!(ops, [667, 333]);
        assert_eq!(b.burn.threads[1].busy_ns, Some(1e9));
        let v8 = json!({"burn": {"wall_ns": 2e9, "ops_per_sec": 500.0,
            "threads": [{"ops": 500}, {"ops": 500}]}});
        let JobResult::Burn(b) = JobResult::parse(JobKind::Burn, &v8).unwrap() else {
            panic!("not a burn");
        };
        assert_eq!(b.burn.pool, EventPool::PerThread);
        assert_eq!(b.burn.threads[0].busy_ns, None);
        assert!("sometimes".parse::<EventPool>().is_err());
        for name in EventPool::NAMES {
            assert_eq!(
                name.parse::<EventPool>().map(EventPool::name).ok(),
                Some(name)
            );
        }
    }

    #[test]
    fn latency_and_load_metrics() {
        let r = json!({"elapsed_s": 2.0, "rtt": {"mean_ns": 1500.5, "p50_ns": 1400,
            "p90_ns": 1800, "p99_ns": 2500, "p999_ns": 9000, "p9999_ns": 12000}});
        let m = metrics(JobKind::Latency, false, &r);
        assert_eq!(m.value, Some(1500.5));
        assert_eq!(m.get(Metric::RttP999Ns), Some(9000.0));
        let parsed = JobResult::parse(JobKind::Latency, &r).unwrap();
        assert_eq!(parsed.measured_secs(0.5), 2.5);

        // No sink report: no received rate, never the sender's 9 Mbit/s.
        let sent = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 9e9}, "sink": null,
            "streams": [{}]});
        let m = metrics(JobKind::Load, false, &sent);
        assert_eq!((m.metric, m.value), (Some(Metric::RateBps), None));
        // One of two streams reported 1 Gbit/s: half a view is not the received rate.
        let half = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 2e9},
            "sink": {"rate_bps": 1e9, "streams_reported": 1}, "streams": [{}, {}]});
        assert_eq!(metrics(JobKind::Load, false, &half).value, None);
        let sunk = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 9e6},
            "sink": {"rate_bps": 8e6, "streams_reported": 1}, "streams": [{}]});
        let m = metrics(JobKind::Load, false, &sunk);
        assert_eq!(
            (m.metric, m.get(Metric::RateBps)),
            (Some(Metric::RateBps), Some(8e6))
        );
        assert_eq!(
            JobResult::parse(JobKind::Load, &sunk)
                .unwrap()
                .measured_secs(0.0),
            3.0
        );
    }

    #[test]
    fn a_probes_reply_ttl_is_the_hops_column_and_absent_from_an_older_probe() {
        let rtt = json!({"mean_ns": 1500.5, "p50_ns": 1400, "p90_ns": 1800, "p99_ns": 2500,
            "p999_ns": 9000});
        let latency = json!({"elapsed_s": 2.0, "rtt": rtt,
            "reply_ttl": {"min": 62, "max": 63, "hops": 1}});
        let m = metrics(JobKind::Latency, false, &latency);
        assert_eq!((m.get(Metric::Hops), m.value), (Some(1.0), Some(1500.5)));
        let JobResult::Latency(l) = JobResult::parse(JobKind::Latency, &latency).unwrap() else {
            panic!("a latency result");
        };
        let want = ReplyTtl {
            min: 62,
            max: 63,
            hops: 1,
        };
        assert_eq!(l.reply_ttl, Some(want));
        let series = json!({"elapsed_s": 5.0, "summary": null,
            "reply_ttl": {"min": 99, "max": 99, "hops": 29}});
        assert_eq!(
            metrics(JobKind::Rtt, false, &series).get(Metric::Hops),
            Some(29.0)
        );
        // Version 9 and before, and ICMP series: no TTL, no column.
        let old = json!({"elapsed_s": 2.0, "rtt": rtt});
        assert_eq!(
            metrics(JobKind::Latency, false, &old).get(Metric::Hops),
            None
        );
        let icmp = json!({"elapsed_s": 5.0, "summary": null, "reply_ttl": null});
        assert_eq!(metrics(JobKind::Rtt, false, &icmp).get(Metric::Hops), None);
    }

    #[test]
    fn a_loads_sink_drops_are_a_column_and_absent_from_an_older_sink() {
        let r = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 9e6},
            "sink": {"rate_bps": 8e6, "streams_reported": 1, "drops": 1234}, "streams": [{}]});
        assert_eq!(
            metrics(JobKind::Load, false, &r).get(Metric::SinkDrops),
            Some(1234.0)
        );
        let old = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 9e6},
            "sink": {"rate_bps": 8e6, "streams_reported": 1}, "streams": [{}]});
        assert_eq!(
            metrics(JobKind::Load, false, &old).get(Metric::SinkDrops),
            None
        );
    }

    #[test]
    fn a_sampled_loads_rate_is_its_received_window_mean() {
        let r = json!({"sent": {"elapsed_s": 10.0, "payload_bps": 9e8},
            "sink": {"rate_bps": 4e8, "streams_reported": 1}, "streams": [{}],
            "samples": {"interval_s": 1.0, "window": 20, "sent_bps": [9e8],
                "received_bps": [3e8], "sent_window_bps": 9e8, "received_window_bps": 3e8}});
        let m = metrics(JobKind::Load, false, &r);
        assert_eq!((m.metric, m.value), (Some(Metric::RateBps), Some(3e8)));
        // A series that did not come back: no received rate, not the whole-run one.
        let mut lost = r.clone();
        lost["samples"]["received_window_bps"] = json!(null);
        assert_eq!(metrics(JobKind::Load, false, &lost).value, None);
    }

    #[test]
    fn background_results_read_by_kind() {
        // 3e9 ops at 1e9 ops/s: a 3 s burn.
        let busy = json!({"placement": {}, "slices": 7, "total_ops": 3e9, "ops_per_sec": 1e9});
        let a = achieved(BackgroundJob::Busy, &busy);
        assert_eq!((a.ops_per_sec, a.runtime_s), (Some(1e9), Some(3.0)));
        assert_eq!((a.sent_bps, a.rate_bps), (None, None));
        let load = json!({"sent": {"elapsed_s": 10.0, "payload_bps": 9e7},
            "sink": {"rate_bps": 2e7, "streams_reported": 1}, "streams": [{}]});
        let a = achieved(BackgroundJob::Load, &load);
        assert_eq!(
            (a.runtime_s, a.sent_bps, a.rate_bps),
            (Some(10.0), Some(9e7), Some(2e7))
        );
        let serve = json!({"taken_ns": 1, "reflector": {"reflected": 500, "send_failures": 2,
            "garbage": {"truncated": 1, "bad_magic": 3}},
            "sink": {"streams": [], "totals": {}, "garbage": {"wrong_kind": 4}}});
        let a = achieved(BackgroundJob::Serve, &serve);
        assert_eq!(
            (a.reflected, a.send_failures, a.garbage),
            (Some(500), Some(2), Some(8))
        );
        let err = BackgroundResult::parse(BackgroundJob::Busy, &json!(null)).unwrap_err();
        assert!(err.to_string().contains("the busy job's result"), "{err}");
        assert_eq!(achieved(BackgroundJob::Idle, &busy), Achieved::default());
        for k in BackgroundJob::ALL {
            assert_eq!(BackgroundJob::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn disk_and_memory_results_give_iops_and_rss() {
        let disk = json!({"elapsed_s": 2.0, "iops": 199.5, "ops": 399, "target_iops": 200.0});
        let m = metrics(JobKind::Disk, false, &disk);
        assert_eq!((m.metric, m.value), (Some(Metric::Iops), Some(199.5)));
        assert_eq!(
            JobResult::parse(JobKind::Disk, &disk)
                .unwrap()
                .measured_secs(0.0),
            2.0
        );
        let mem = json!({"elapsed_s": 3.0, "peak_rss_bytes": 268435456.0, "oom_kills": 0});
        let m = metrics(JobKind::Memory, false, &mem);
        assert_eq!(
            (m.metric, m.value),
            (Some(Metric::RssBytes), Some(268435456.0))
        );
        for k in JobKind::ALL {
            assert_eq!(JobKind::from_name(k.name()), Some(k));
        }
        assert_eq!(JobKind::Disk.host_metric(), Some(Metric::HostIops));
        assert_eq!(JobKind::Latency.host_metric(), None);
        // T1: a load's interface counts what it offered, not what got through.
        assert_eq!(JobKind::Load.host_metric(), None);
    }

    /// A result without a field the format reads is an error naming the job's kind
    /// and the field, never a sample or a background record with an empty column.
    #[test]
    fn a_result_without_a_field_is_an_error_naming_it() {
        let renamed = json!({"burn": {"wall_nanos": 2.5e9, "ops_per_sec": 400.0}});
        let err = JobResult::parse(JobKind::Burn, &renamed).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("the burn job's result") && msg.contains("missing field `wall_ns`"),
            "{msg}"
        );
        assert!(JobResult::parse(JobKind::Latency, &json!(null)).is_err());
        let serve = json!({"reflector": {"reflectd": 5, "send_failures": 0, "garbage": {}}});
        let err = BackgroundResult::parse(BackgroundJob::Serve, &serve).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("the serve job's result") && msg.contains("`reflected`"),
            "{msg}"
        );
        // An idle neighbor's result is not read: it has nothing to say.
        assert_eq!(
            BackgroundResult::parse(BackgroundJob::Idle, &json!("anything")).unwrap(),
            BackgroundResult::Idle
        );
    }

    /// A result is read once into its typed figures and qualifiers, the raw HDR log
    /// taken out and the rest kept verbatim.
    #[test]
    fn an_outcome_reads_a_result_once() {
        let raw = json!({"elapsed_s": 2.0, "rtt": {"mean_ns": 1500.0, "p50_ns": 1400,
            "p90_ns": 1800, "p99_ns": 2500, "p999_ns": 9000}, "hdr_log": "#[log]",
            "counts": {"sent": 10, "answered": 0, "lost": 10}, "uptime_s": 7.5});
        let o = JobOutcome::read(JobKind::Latency, raw).unwrap();
        assert_eq!(o.result.kind(), JobKind::Latency);
        assert_eq!(o.hdr_log.as_deref(), Some("#[log]"));
        assert!(o.raw.get("hdr_log").is_none());
        assert_eq!(o.raw["uptime_s"], 7.5);
        assert!(o.quality.probe_dead());
        assert_eq!(o.quality.uptime_s, Some(7.5));
        let err = JobOutcome::read(JobKind::Memory, json!({"elapsed_s": 1.0})).unwrap_err();
        assert!(err.to_string().contains("`peak_rss_bytes`"), "{err}");
    }

    #[test]
    fn hdr_log_is_taken_out() {
        let mut r = json!({"elapsed_s": 1.0, "hdr_log": "#[log]"});
        assert_eq!(take_hdr_log(&mut r).as_deref(), Some("#[log]"));
        assert_eq!(r, json!({"elapsed_s": 1.0}));
        assert_eq!(take_hdr_log(&mut r), None);
    }
}
