//! Typed job results: the fields of an agent's `burn`, `latency` and `load` results
//! that the results format reads (the agent's full result is kept verbatim in a
//! sample's `result`), and the flat [`Metrics`] of a sample made from them; likewise
//! the fields of a background job's final result (`busy`, `load`, `serve`) and the
//! flat [`Achieved`] columns of a background record made from them.
//!
//! The agent's result types (`nnb_burn`, `nnb_netlat`) serialize to JSON with at
//! least these fields; reading them through these types rather than JSON pointers
//! makes a renamed field a failing test instead of a silently empty column.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::metric::{Metric, MetricValues};
use crate::FORMAT_VERSION;

/// The measured job kinds of a step, as a sample's `job` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
}

impl JobKind {
    /// Every measured job kind.
    pub const ALL: [JobKind; 5] = [
        JobKind::Burn,
        JobKind::Latency,
        JobKind::Load,
        JobKind::Disk,
        JobKind::Memory,
    ];

    /// The job's name in the format: `burn`, `latency`, `load`, `disk`, `memory`.
    pub const fn name(self) -> &'static str {
        match self {
            JobKind::Burn => "burn",
            JobKind::Latency => "latency",
            JobKind::Load => "load",
            JobKind::Disk => "disk",
            JobKind::Memory => "memory",
        }
    }

    /// The measured job kind named `name`, if it is one (`steal`, `busy`, ... are not).
    pub fn from_name(name: &str) -> Option<JobKind> {
        JobKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The host-side utilisation metric of the resource this kind of job loads: a
    /// burn's CPU, a load's network, a disk job's I/O, a memory job's resident
    /// memory; none for a latency probe.
    pub const fn host_metric(self) -> Option<Metric> {
        match self {
            JobKind::Burn => Some(Metric::HostCpuPct),
            JobKind::Load => Some(Metric::HostNetBps),
            JobKind::Disk => Some(Metric::HostIops),
            JobKind::Memory => Some(Metric::HostMemBytes),
            JobKind::Latency => None,
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
    /// One entry per thread (only counted here).
    #[serde(default)]
    pub threads: Vec<serde::de::IgnoredAny>,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackgroundJob {
    /// A busy neighbor's CPU burner.
    Busy,
    /// A busy neighbor's UDP load towards the sink, until stopped.
    Load,
    /// An idle neighbor (nothing, until stopped).
    Idle,
    /// The endpoint's reflector and sink.
    Serve,
}

impl BackgroundJob {
    /// The job's name in the format: `busy`, `load`, `idle`, `serve`.
    pub const fn name(self) -> &'static str {
        match self {
            BackgroundJob::Busy => "busy",
            BackgroundJob::Load => JobKind::Load.name(),
            BackgroundJob::Idle => "idle",
            BackgroundJob::Serve => "serve",
        }
    }

    /// The background job kind named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<BackgroundJob> {
        [
            BackgroundJob::Busy,
            BackgroundJob::Load,
            BackgroundJob::Idle,
            BackgroundJob::Serve,
        ]
        .into_iter()
        .find(|k| k.name() == name)
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
#[serde(default)]
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
#[serde(default)]
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
    /// sender's time; seconds.
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

impl Achieved {
    /// The figures of a `job` background job's final result; none for a result
    /// without the expected fields.
    pub fn of(job: BackgroundJob, result: &Value) -> Achieved {
        match job {
            BackgroundJob::Busy => BusyJobResult::deserialize(result)
                .map(|b| Achieved {
                    runtime_s: (b.ops_per_sec > 0.0).then(|| b.total_ops / b.ops_per_sec),
                    ops_per_sec: Some(b.ops_per_sec),
                    ..Achieved::default()
                })
                .unwrap_or_default(),
            BackgroundJob::Load => LoadJobResult::deserialize(result)
                .map(|l| Achieved {
                    runtime_s: Some(l.sent.elapsed_s),
                    sent_bps: Some(l.sent.payload_bps),
                    rate_bps: l.rate_bps(),
                    ..Achieved::default()
                })
                .unwrap_or_default(),
            BackgroundJob::Serve => ServeJobResult::deserialize(result)
                .map(|s| {
                    let reflector = s.reflector.unwrap_or_default();
                    let sink = s.sink.unwrap_or_default();
                    Achieved {
                        reflected: Some(reflector.reflected),
                        send_failures: Some(reflector.send_failures),
                        garbage: Some(
                            reflector
                                .garbage
                                .values()
                                .chain(sink.garbage.values())
                                .sum(),
                        ),
                        ..Achieved::default()
                    }
                })
                .unwrap_or_default(),
            BackgroundJob::Idle => Achieved::default(),
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
}

impl JobResult {
    /// Reads the result of a `kind` job as this nnb writes it ([`FORMAT_VERSION`]); an
    /// error says which field is missing or malformed.
    pub fn parse(kind: JobKind, result: &Value) -> Result<JobResult, serde_json::Error> {
        JobResult::parse_of_version(kind, FORMAT_VERSION, result)
    }

    /// Reads the result of a `kind` job in a record of format `version` (its
    /// `format_version`): a disk job's latencies of version 5 and before, in µs, are
    /// read in ns as today's.
    pub fn parse_of_version(
        kind: JobKind,
        version: u32,
        result: &Value,
    ) -> Result<JobResult, serde_json::Error> {
        Ok(match kind {
            JobKind::Burn => JobResult::Burn(BurnJobResult::deserialize(result)?),
            JobKind::Latency => JobResult::Latency(LatencyJobResult::deserialize(result)?),
            JobKind::Load => JobResult::Load(LoadJobResult::deserialize(result)?),
            JobKind::Disk if version < DISK_NS_SINCE => {
                JobResult::Disk(DiskJobResult::deserialize(disk_micros_to_nanos(result))?)
            }
            JobKind::Disk => JobResult::Disk(DiskJobResult::deserialize(result)?),
            JobKind::Memory => JobResult::Memory(MemoryJobResult::deserialize(result)?),
        })
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

/// The flat metric columns of one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    /// Primary metric.
    pub metric: Option<Metric>,
    /// Primary metric value.
    pub value: Option<f64>,
    /// Every metric's value ([`Metric::ALL`]).
    pub values: MetricValues,
}

impl Metrics {
    /// The metrics of a `kind` job's raw result. A fixed-work burn's primary metric is
    /// its runtime, a fixed-time burn's its throughput; a probe's the mean RTT; a
    /// load's the received rate. A result without the expected fields keeps the
    /// primary metric's name with no values. A disk job's primary metric is its
    /// IOPS, a memory job's its peak RSS.
    pub fn of(kind: JobKind, fixed_work: bool, result: &Value) -> Metrics {
        let primary = match kind {
            JobKind::Burn if fixed_work => Metric::RuntimeS,
            JobKind::Burn => Metric::OpsPerSec,
            JobKind::Latency => Metric::RttMeanNs,
            JobKind::Load => Metric::RateBps,
            JobKind::Disk => Metric::Iops,
            JobKind::Memory => Metric::RssBytes,
        };
        let mut m = Metrics {
            metric: Some(primary),
            ..Metrics::default()
        };
        match JobResult::parse(kind, result) {
            Ok(JobResult::Burn(b)) => {
                m.values.set(Metric::RuntimeS, Some(b.burn.wall_ns / 1e9));
                m.values.set(Metric::OpsPerSec, Some(b.burn.ops_per_sec));
                let threads = b.burn.threads.len() as f64;
                let per_thread = threads * 1e9 / b.burn.ops_per_sec;
                m.values.set(
                    Metric::NsPerOpPerThread,
                    (threads > 0.0 && per_thread.is_finite()).then_some(per_thread),
                );
            }
            Ok(JobResult::Latency(l)) => {
                let r = l.rtt;
                let rtt = [r.mean_ns, r.p50_ns, r.p90_ns, r.p99_ns, r.p999_ns];
                for (metric, ns) in Metric::RTT.into_iter().zip(rtt) {
                    m.values.set(metric, Some(ns));
                }
            }
            Ok(JobResult::Load(l)) => m.values.set(Metric::RateBps, l.rate_bps()),
            Ok(JobResult::Disk(d)) => m.values.set(Metric::Iops, Some(d.iops)),
            Ok(JobResult::Memory(r)) => m.values.set(Metric::RssBytes, Some(r.peak_rss_bytes)),
            Err(_) => {}
        }
        m.value = m.get(primary);
        m
    }

    /// The value of `metric` in these columns.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.values.get(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn burn_metrics_follow_the_work_mode() {
        let r = json!({"burn": {"wall_ns": 2.5e9, "ops_per_sec": 400.0, "threads": [{}, {}]}});
        let fixed = Metrics::of(JobKind::Burn, true, &r);
        assert_eq!(
            (fixed.metric, fixed.value),
            (Some(Metric::RuntimeS), Some(2.5))
        );
        let timed = Metrics::of(JobKind::Burn, false, &r);
        assert_eq!(
            (timed.metric, timed.value, timed.get(Metric::RuntimeS)),
            (Some(Metric::OpsPerSec), Some(400.0), Some(2.5))
        );
        // 2 threads at 400 ops/s together: 2 / 400 s = 5 ms per op per thread.
        assert_eq!(timed.get(Metric::NsPerOpPerThread), Some(5e6));
    }

    #[test]
    fn latency_and_load_metrics() {
        let r = json!({"elapsed_s": 2.0, "rtt": {"mean_ns": 1500.5, "p50_ns": 1400,
            "p90_ns": 1800, "p99_ns": 2500, "p999_ns": 9000, "p9999_ns": 12000}});
        let m = Metrics::of(JobKind::Latency, false, &r);
        assert_eq!(m.value, Some(1500.5));
        assert_eq!(m.get(Metric::RttP999Ns), Some(9000.0));
        let parsed = JobResult::parse(JobKind::Latency, &r).unwrap();
        assert_eq!(parsed.measured_secs(0.5), 2.5);

        // No sink report: no received rate, never the sender's 9 Mbit/s.
        let sent = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 9e9}, "sink": null,
            "streams": [{}]});
        let m = Metrics::of(JobKind::Load, false, &sent);
        assert_eq!((m.metric, m.value), (Some(Metric::RateBps), None));
        // One of two streams reported 1 Gbit/s: half a view is not the received rate.
        let half = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 2e9},
            "sink": {"rate_bps": 1e9, "streams_reported": 1}, "streams": [{}, {}]});
        assert_eq!(Metrics::of(JobKind::Load, false, &half).value, None);
        let sunk = json!({"sent": {"elapsed_s": 3.0, "payload_bps": 9e6},
            "sink": {"rate_bps": 8e6, "streams_reported": 1}, "streams": [{}]});
        let m = Metrics::of(JobKind::Load, false, &sunk);
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
    fn a_sampled_loads_rate_is_its_received_window_mean() {
        let r = json!({"sent": {"elapsed_s": 10.0, "payload_bps": 9e8},
            "sink": {"rate_bps": 4e8, "streams_reported": 1}, "streams": [{}],
            "samples": {"interval_s": 1.0, "window": 20, "sent_bps": [9e8],
                "received_bps": [3e8], "sent_window_bps": 9e8, "received_window_bps": 3e8}});
        let m = Metrics::of(JobKind::Load, false, &r);
        assert_eq!((m.metric, m.value), (Some(Metric::RateBps), Some(3e8)));
        // A series that did not come back: no received rate, not the whole-run one.
        let mut lost = r.clone();
        lost["samples"]["received_window_bps"] = json!(null);
        assert_eq!(Metrics::of(JobKind::Load, false, &lost).value, None);
    }

    #[test]
    fn background_results_read_by_kind() {
        // 3e9 ops at 1e9 ops/s: a 3 s burn.
        let busy = json!({"placement": {}, "slices": 7, "total_ops": 3e9, "ops_per_sec": 1e9});
        let a = Achieved::of(BackgroundJob::Busy, &busy);
        assert_eq!((a.ops_per_sec, a.runtime_s), (Some(1e9), Some(3.0)));
        assert_eq!((a.sent_bps, a.rate_bps), (None, None));
        let load = json!({"sent": {"elapsed_s": 10.0, "payload_bps": 9e7},
            "sink": {"rate_bps": 2e7, "streams_reported": 1}, "streams": [{}]});
        let a = Achieved::of(BackgroundJob::Load, &load);
        assert_eq!(
            (a.runtime_s, a.sent_bps, a.rate_bps),
            (Some(10.0), Some(9e7), Some(2e7))
        );
        let serve = json!({"taken_ns": 1, "reflector": {"reflected": 500, "send_failures": 2,
            "garbage": {"truncated": 1, "bad_magic": 3}},
            "sink": {"streams": [], "totals": {}, "garbage": {"wrong_kind": 4}}});
        let a = Achieved::of(BackgroundJob::Serve, &serve);
        assert_eq!(
            (a.reflected, a.send_failures, a.garbage),
            (Some(500), Some(2), Some(8))
        );
        assert_eq!(
            Achieved::of(BackgroundJob::Busy, &json!(null)),
            Achieved::default()
        );
        assert_eq!(
            Achieved::of(BackgroundJob::Idle, &busy),
            Achieved::default()
        );
        for k in [
            BackgroundJob::Busy,
            BackgroundJob::Load,
            BackgroundJob::Idle,
            BackgroundJob::Serve,
        ] {
            assert_eq!(BackgroundJob::from_name(k.name()), Some(k));
        }
    }

    #[test]
    fn disk_and_memory_results_give_iops_and_rss() {
        let disk = json!({"elapsed_s": 2.0, "iops": 199.5, "ops": 399, "target_iops": 200.0});
        let m = Metrics::of(JobKind::Disk, false, &disk);
        assert_eq!((m.metric, m.value), (Some(Metric::Iops), Some(199.5)));
        assert_eq!(
            JobResult::parse(JobKind::Disk, &disk)
                .unwrap()
                .measured_secs(0.0),
            2.0
        );
        let mem = json!({"elapsed_s": 3.0, "peak_rss_bytes": 268435456.0, "oom_kills": 0});
        let m = Metrics::of(JobKind::Memory, false, &mem);
        assert_eq!(
            (m.metric, m.value),
            (Some(Metric::RssBytes), Some(268435456.0))
        );
        for k in JobKind::ALL {
            assert_eq!(JobKind::from_name(k.name()), Some(k));
        }
        assert_eq!(JobKind::Disk.host_metric(), Some(Metric::HostIops));
        assert_eq!(JobKind::Latency.host_metric(), None);
    }

    #[test]
    fn a_result_without_the_fields_has_no_values() {
        let m = Metrics::of(JobKind::Burn, true, &json!({"burn": {}}));
        assert_eq!((m.metric, m.value), (Some(Metric::RuntimeS), None));
        assert!(JobResult::parse(JobKind::Latency, &json!(null)).is_err());
    }

    #[test]
    fn hdr_log_is_taken_out() {
        let mut r = json!({"elapsed_s": 1.0, "hdr_log": "#[log]"});
        assert_eq!(take_hdr_log(&mut r).as_deref(), Some("#[log]"));
        assert_eq!(r, json!({"elapsed_s": 1.0}));
        assert_eq!(take_hdr_log(&mut r), None);
    }
}
