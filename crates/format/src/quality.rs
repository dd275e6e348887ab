//! What qualifies a measured number, read from a job's raw result: probe loss, late
//! and clamped pongs, a clock fallback, an incomplete sink report, a GSO fallback,
//! pacer skips and send errors, where the threads ran, and what the job ran under
//! (steal, uptime, effective frequency). `nnb run` writes the raw
//! result with every sample; `nnb analyze` reads these fields back so each figure
//! carries its qualifiers, in runs of any format version 1.
//!
//! Every field is optional: a result of another job kind, or from an older nnb,
//! simply lacks it.

use serde::{Deserialize, Serialize};

/// The qualifiers of one sample's result.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Quality {
    /// A latency probe's counters.
    pub counts: Option<ProbeCounts>,
    /// A probe's RTT samples above the histogram's ceiling.
    pub clamped: Option<u64>,
    /// A burn's clock.
    pub clock: Option<ClockUse>,
    /// A burn's placement (thread order).
    pub placement: Option<PlacementUse>,
    /// A load's streams.
    pub streams: Vec<StreamUse>,
    /// A load's sink report over all streams.
    pub sink: Option<SinkUse>,
    /// A load's sender totals (an rtt series' `sent`, a count, is not: none).
    #[serde(deserialize_with = "sender_totals")]
    pub sent: Option<SenderUse>,
    /// The steal on the job's CPUs while it ran (a burn's from version 2, every job's
    /// from version 4).
    pub steal: Option<StealUse>,
    /// An open-loop probe's receive buffer.
    pub recv_buffer: Option<BufferUse>,
    /// Seconds since the kernel of the job's machine booted, when the job started
    /// (version 4).
    pub uptime_s: Option<f64>,
    /// The effective frequency of the job's CPUs while it ran (version 4).
    pub freq: Option<FreqUse>,
    /// A memory job's machine memory (`MemTotal`), bytes (version 5): the resource
    /// maximum a memory isolation matrix's utilisation loss is relative to.
    pub mem_total_bytes: Option<u64>,
    /// A burn's per-thread records (`burn.threads[]`).
    pub burn: Option<BurnUse>,
    /// The measured time of a job whose result says it at the top (a latency
    /// probe's), seconds.
    pub elapsed_s: Option<f64>,
    /// CPU-seconds all the job's machine's CPUs were busy since boot, when the job
    /// started (version 9): what a burstable instance's CPU credits paid for.
    pub cpu_busy_s: Option<f64>,
    /// The ENA's allowance counters before and after the job (version 9); `None`
    /// off EC2, without `ethtool`, and for a malformed one (which must not cost the
    /// other qualifiers).
    #[serde(deserialize_with = "lenient")]
    pub ena: Option<EnaUse>,
    /// A command job's unit as its experiment declared it (version 11): what a
    /// `command_value` column is counted in, which the metric itself cannot say.
    pub unit: Option<String>,
}

/// The five allowance counters of an Elastic Network Adapter (`ethtool -S`),
/// summed over the interfaces read: packets AWS queued or dropped because the
/// instance exceeded an allowance
/// (<https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-network-performance-ena.html>).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct EnaAllowances {
    /// Inbound aggregate bandwidth above the instance's allowance.
    pub bw_in_allowance_exceeded: u64,
    /// Outbound aggregate bandwidth above the instance's allowance.
    pub bw_out_allowance_exceeded: u64,
    /// Bidirectional packets per second above the instance's allowance.
    pub pps_allowance_exceeded: u64,
    /// Connection tracking full (dropped).
    pub conntrack_allowance_exceeded: u64,
    /// Traffic to link-local services (DNS, IMDS, time sync) above its rate
    /// (dropped).
    pub linklocal_allowance_exceeded: u64,
}

impl EnaAllowances {
    /// The counters as (name, value) pairs, in `ethtool -S` order.
    pub fn named(&self) -> [(&'static str, u64); 5] {
        [
            ("bw_in_allowance_exceeded", self.bw_in_allowance_exceeded),
            ("bw_out_allowance_exceeded", self.bw_out_allowance_exceeded),
            ("pps_allowance_exceeded", self.pps_allowance_exceeded),
            (
                "conntrack_allowance_exceeded",
                self.conntrack_allowance_exceeded,
            ),
            (
                "linklocal_allowance_exceeded",
                self.linklocal_allowance_exceeded,
            ),
        ]
    }

    /// The counters from [`EnaAllowances::named`]'s order.
    pub fn from_values([bw_in, bw_out, pps, conntrack, linklocal]: [u64; 5]) -> EnaAllowances {
        EnaAllowances {
            bw_in_allowance_exceeded: bw_in,
            bw_out_allowance_exceeded: bw_out,
            pps_allowance_exceeded: pps,
            conntrack_allowance_exceeded: conntrack,
            linklocal_allowance_exceeded: linklocal,
        }
    }

    /// Each counter's sum with `other`'s (two interfaces).
    pub fn plus(&self, other: &EnaAllowances) -> EnaAllowances {
        self.zip(other, |a, b| a.saturating_add(b))
    }

    /// Each counter's rise since `earlier` (0 where it went down: a reset).
    pub fn since(&self, earlier: &EnaAllowances) -> EnaAllowances {
        self.zip(earlier, |a, b| a.saturating_sub(b))
    }

    /// Whether any counter is above zero.
    pub fn any(&self) -> bool {
        self.named().iter().any(|(_, v)| *v > 0)
    }

    fn zip(&self, other: &EnaAllowances, f: impl Fn(u64, u64) -> u64) -> EnaAllowances {
        let (a, b) = (self.named(), other.named());
        EnaAllowances::from_values(std::array::from_fn(|i| f(a[i].1, b[i].1)))
    }
}

/// The ENA's counters around a job (`ena`, version 9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct EnaUse {
    /// The default-route interfaces read.
    pub interfaces: Vec<String>,
    /// Their counters summed just before the job.
    pub before: EnaAllowances,
    /// The same sum just after it.
    pub after: EnaAllowances,
}

impl EnaUse {
    /// How much each counter rose while the job ran.
    pub fn rose(&self) -> EnaAllowances {
        self.after.since(&self.before)
    }
}

/// A `T`, or `None` when the value is not one (instead of failing the whole
/// qualifiers' reading).
fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(T::deserialize(v).ok())
}

/// A burn's threads (`burn`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct BurnUse {
    /// One record per thread, in thread order.
    pub threads: Vec<ThreadUse>,
}

/// One burner thread (`burn.threads[]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ThreadUse {
    /// Its operations per second over its own measured span.
    pub ops_per_sec: f64,
}

/// Steal up to this many ticks per CPU may be the counter's quantisation, not steal:
/// `/proc/stat` counts whole USER_HZ ticks (10 ms), so one tick can stand for much
/// less real steal.
pub const STEAL_QUANTUM_TICKS_PER_CPU: u64 = 2;
/// Steal below this share of a job's CPU time (its seconds x its CPUs) is too little
/// to qualify its number.
pub const STEAL_MIN_SHARE: f64 = 0.01;

/// The hypervisor's steal during a job (`steal`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct StealUse {
    /// How many CPUs the steal was summed over (the length of the result's `cpus`).
    #[serde(rename = "cpus", deserialize_with = "length_of", skip_serializing)]
    pub cpu_count: Option<usize>,
    /// Steal ticks on the job's CPUs.
    pub ticks: u64,
    /// Ticks per second.
    pub user_hz: u64,
    /// The CPUs' steal counters summed before the job (version 4).
    pub before: Option<u64>,
    /// The same sum after it (version 4).
    pub after: Option<u64>,
}

/// The effective frequency of a job's CPUs (`freq`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct FreqUse {
    /// MHz.
    pub mhz: f64,
    /// `aperf-mperf`, `scaling-cur-freq` or `cpuinfo`.
    pub source: String,
}

/// A load's `sent` object; `None` for anything else, such as an rtt series' count
/// of probes sent, which would otherwise fail the whole qualifiers' reading.
fn sender_totals<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SenderUse>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(SenderUse::deserialize(v).ok())
}

/// The length of a list (`None` for null).
fn length_of<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let list: Option<Vec<serde::de::IgnoredAny>> = Option::deserialize(d)?;
    Ok(list.map(|l| l.len()))
}

impl StealUse {
    /// The stolen time in seconds (0 with an unknown tick rate).
    pub fn seconds(&self) -> f64 {
        if self.user_hz == 0 {
            0.0
        } else {
            self.ticks as f64 / self.user_hz as f64
        }
    }

    /// Whether the steal of a job that ran `seconds` stands above the counter's
    /// quantisation: more than [`STEAL_QUANTUM_TICKS_PER_CPU`] ticks per CPU and at
    /// least [`STEAL_MIN_SHARE`] of the job's CPU time (`seconds` x its CPUs, one
    /// when the result does not list them); the tick rule alone when `seconds` is
    /// unknown (not positive).
    pub fn significant(&self, seconds: f64) -> bool {
        let cpus = self.cpu_count.unwrap_or(1).max(1);
        let ticks = self.ticks > STEAL_QUANTUM_TICKS_PER_CPU * cpus as u64;
        let unknown = seconds.is_nan() || seconds <= 0.0;
        let share = unknown || self.seconds() >= STEAL_MIN_SHARE * seconds * cpus as f64;
        ticks && share
    }
}

/// A probe's ping counters (`counts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ProbeCounts {
    /// Pings sent while measuring.
    pub sent: u64,
    /// Pings answered in time (the RTT samples).
    pub answered: u64,
    /// Pings not answered in time.
    pub lost: u64,
    /// Pongs that came after their timeout.
    pub late: u64,
    /// Open loop: pings of the schedule never sent, the sender having fallen behind.
    pub unsent: u64,
}

/// The clock a burn was timed with (`clock`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct ClockUse {
    /// `tsc`, `cntvct` or a `clock_gettime` fallback.
    pub source: Option<String>,
    /// Why the clock is less trustworthy than an invariant TSC, if it is.
    pub warning: Option<String>,
}

/// A burn's placement (`placement`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct PlacementUse {
    /// The pin strategy's name.
    pub strategy: Option<String>,
    /// One slot per thread.
    pub slots: Vec<SlotUse>,
}

/// Where one burner thread was placed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct SlotUse {
    /// Logical CPU (`None`: unpinned).
    pub cpu: Option<usize>,
    /// Physical core of that CPU.
    pub core: Option<usize>,
}

/// One load stream (`streams[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct StreamUse {
    /// Whether UDP GSO was used (`{"gso": "on" | "off" | "fallback", ...}`).
    pub gso: Option<GsoUse>,
    /// The stream's send buffer, asked for and granted.
    pub send_buffer: Option<BufferUse>,
}

/// A socket buffer, asked for and granted (`{"asked": B, "granted": B}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct BufferUse {
    /// Bytes asked for.
    pub asked: u64,
    /// Bytes the kernel granted, when it could be read back.
    pub granted: Option<u64>,
}

impl BufferUse {
    /// Whether the kernel granted less than was asked for.
    pub fn capped(&self) -> bool {
        self.granted.is_some_and(|g| g < self.asked)
    }
}

/// A stream's GSO use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GsoUse {
    /// `on`, `off` or `fallback`.
    pub gso: String,
    /// The kernel's refusal, on a fallback.
    pub reason: Option<String>,
}

/// A load's sink report (`sink`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct SinkUse {
    /// Streams whose report arrived.
    pub streams_reported: usize,
}

/// A load's sender totals (`sent`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct SenderUse {
    /// Schedule slots the pacer dropped after stalls.
    pub skipped: u64,
    /// Sends that failed.
    pub send_errors: u64,
}

/// A sample's raw result read only for its [`Quality`]: reading never fails (a
/// malformed or foreign result has no qualifiers), so one odd result cannot make a
/// run unreadable.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "serde_json::Value")]
pub struct ResultQuality(pub Quality);

impl From<serde_json::Value> for ResultQuality {
    fn from(v: serde_json::Value) -> Self {
        ResultQuality(Quality::of(&v))
    }
}

/// Whether a sink report covers every stream: `report` is `None` when no report came,
/// `Some(None)` for a report that does not say how many streams it covers (taken as
/// all of them), `Some(Some(n))` for `n` streams reported, against `streams` sent.
pub fn sink_complete(report: Option<Option<usize>>, streams: usize) -> bool {
    match report {
        None => false,
        Some(reported) => reported.map_or(true, |n| n >= streams),
    }
}

impl Quality {
    /// Reads the qualifiers of a raw result; a result that is not an object has none.
    pub fn of(result: &serde_json::Value) -> Quality {
        Quality::deserialize(result).unwrap_or_default()
    }

    /// A probe that heard no answer at all: its RTT figures are not measurements.
    pub fn probe_dead(&self) -> bool {
        self.counts.is_some_and(|c| c.sent > 0 && c.answered == 0)
    }

    /// Whether a load's received rate is complete: a sink report from every stream.
    /// `false` when no report came, or fewer streams reported than were sent.
    pub fn sink_complete(&self) -> bool {
        sink_complete(
            self.sink.map(|s| Some(s.streams_reported)),
            self.streams.len(),
        )
    }

    /// The warning of a clock other than a trusted TSC: the recorded warning, or the
    /// source's name when it is not `tsc`/`cntvct`.
    pub fn clock_warning(&self) -> Option<String> {
        let c = self.clock.as_ref()?;
        c.warning.clone().or_else(|| match c.source.as_deref() {
            None | Some("tsc" | "cntvct") => None,
            Some(other) => Some(format!("timed with {other}")),
        })
    }

    /// Whether any stream fell back from GSO to plain sends.
    pub fn gso_fallback(&self) -> bool {
        self.streams
            .iter()
            .any(|s| s.gso.as_ref().is_some_and(|g| g.gso == "fallback"))
    }

    /// Whether a socket buffer of the job (a load's send buffers, an open-loop probe's
    /// receive buffer) was smaller than asked for: loss there may be the buffer's.
    pub fn buffer_capped(&self) -> bool {
        self.recv_buffer.is_some_and(|b| b.capped())
            || self
                .streams
                .iter()
                .any(|s| s.send_buffer.is_some_and(|b| b.capped()))
    }

    /// A burn's slowest thread's ops/s: the lowest of its threads' own rates, as a
    /// fixed-work runtime is its slowest thread's; `None` without per-thread records
    /// or with a rate that is not a finite number.
    pub fn slowest_thread_ops_per_sec(&self) -> Option<f64> {
        let threads = &self.burn.as_ref()?.threads;
        if threads.is_empty() || threads.iter().any(|t| !t.ops_per_sec.is_finite()) {
            return None;
        }
        Some(
            threads
                .iter()
                .map(|t| t.ops_per_sec)
                .fold(f64::INFINITY, f64::min),
        )
    }

    /// The placement's `(cpu, core)` per thread, for
    /// [`crate::knee::expected_smt_knee`].
    pub fn slots(&self) -> Vec<(Option<usize>, Option<usize>)> {
        self.placement
            .as_ref()
            .map(|p| p.slots.iter().map(|s| (s.cpu, s.core)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_rtt_series_count_of_probes_sent_leaves_the_other_qualifiers_readable() {
        let q = super::Quality::of(&serde_json::json!({"sent": 30, "uptime_s": 12.5}));
        assert_eq!((q.sent, q.uptime_s), (None, Some(12.5)));
    }

    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn reads_a_probe_and_a_dead_one() {
        let q = Quality::of(
            &json!({"counts": {"sent": 1000, "answered": 700, "lost": 300,
            "late": 4, "duplicates": 0}, "clamped": 2, "rtt": {"mean_ns": 1.0}}),
        );
        assert_eq!(q.counts.unwrap().lost, 300);
        assert_eq!(q.clamped, Some(2));
        assert!(!q.probe_dead());
        let dead = Quality::of(&json!({"counts": {"sent": 50, "answered": 0, "lost": 50}}));
        assert!(dead.probe_dead());
    }

    #[test]
    fn a_sink_report_is_complete_only_from_every_stream() {
        let two = json!([{"gso": {"gso": "off"}}, {"gso": {"gso": "fallback", "reason": "EIO"}}]);
        let partial = Quality::of(&json!({"streams": two, "sink": {"streams_reported": 1}}));
        assert!(!partial.sink_complete());
        assert!(partial.gso_fallback());
        let full = Quality::of(&json!({"streams": two, "sink": {"streams_reported": 2}}));
        assert!(full.sink_complete());
        let none = Quality::of(&json!({"streams": two, "sink": null}));
        assert!(!none.sink_complete());
        assert!(!full.buffer_capped());
        let capped = Quality::of(&json!({"streams": [{"send_buffer":
            {"asked": 4194304, "granted": 212992}}]}));
        assert!(capped.buffer_capped());
        let granted = Quality::of(&json!({"recv_buffer": {"asked": 4096, "granted": 4096}}));
        assert!(!granted.buffer_capped());
    }

    #[test]
    fn clock_and_placement() {
        let q = Quality::of(
            &json!({"clock": {"source": "clock_gettime", "warning": null},
            "placement": {"strategy": "cores", "slots": [{"cpu": 0, "core": 0, "thread": 0},
            {"cpu": 48, "core": 0}]}}),
        );
        assert_eq!(
            q.clock_warning().as_deref(),
            Some("timed with clock_gettime")
        );
        assert_eq!(q.slots(), vec![(Some(0), Some(0)), (Some(48), Some(0))]);
        let tsc = Quality::of(&json!({"clock": {"source": "tsc", "warning": null}}));
        assert_eq!(tsc.clock_warning(), None);
        assert_eq!(Quality::of(&json!("not an object")), Quality::default());
        let stolen = Quality::of(&json!({"steal": {"cpus": [0, 1], "ticks": 25, "user_hz": 100}}));
        assert_eq!(stolen.steal.map(|s| s.seconds()), Some(0.25));
        assert_eq!(stolen.steal.and_then(|s| s.before), None);
    }

    /// The slowest of a burn's threads, read from `burn.threads[]`.
    #[test]
    fn the_slowest_thread() {
        let q = Quality::of(&json!({"burn": {"wall_ns": 1e9, "threads": [
            {"thread": 0, "ops_per_sec": 1e8}, {"thread": 1, "ops_per_sec": 6.2e7}]}}));
        assert_eq!(q.slowest_thread_ops_per_sec(), Some(6.2e7));
        assert_eq!(
            Quality::of(&json!({"burn": {"threads": []}})).slowest_thread_ops_per_sec(),
            None
        );
        assert_eq!(Quality::default().slowest_thread_ops_per_sec(), None);
    }

    /// T15: steal counts in 10 ms ticks. One tick on one CPU in 10 s is the
    /// quantum; 37 ticks on one CPU in 10 s are 0.37 of 10 CPU-seconds, 3.7%; 5 ticks
    /// on two CPUs in 10 s are above 2 per CPU but 0.05 of 20 CPU-seconds, 0.25%; 3
    /// ticks on one CPU in 0.2 s are 15%.
    #[test]
    fn steal_above_the_quantum() {
        let steal = |cpus: Value, ticks: u64| {
            Quality::of(&json!({"steal": {"cpus": cpus, "ticks": ticks, "user_hz": 100}}))
                .steal
                .unwrap()
        };
        assert_eq!(steal(json!([0, 1]), 5).cpu_count, Some(2));
        assert!(!steal(json!([0]), 1).significant(10.0));
        assert!(steal(json!([0]), 37).significant(10.0));
        assert!(!steal(json!([0, 1]), 5).significant(10.0));
        assert!(steal(json!([0]), 3).significant(0.2));
        // 2 ticks per CPU are still the quantum, whatever the share
        assert!(!steal(json!([0]), 2).significant(0.1));
        // without the CPUs, one; without a duration, the tick rule alone
        assert!(steal(Value::Null, 3).significant(0.0));
    }

    /// Version 4: every job's result says what it ran under.
    #[test]
    fn conditions_of_a_job() {
        let q = Quality::of(&json!({"steal": {"cpus": [3], "ticks": 7, "user_hz": 100,
            "before": 120, "after": 127}, "uptime_s": 3600.5,
            "freq": {"mhz": 2900.0, "source": "aperf-mperf"}}));
        let s = q.steal.unwrap();
        assert_eq!((s.before, s.after, s.ticks), (Some(120), Some(127), 7));
        assert_eq!(q.uptime_s, Some(3600.5));
        assert_eq!(
            q.freq,
            Some(FreqUse {
                mhz: 2900.0,
                source: "aperf-mperf".into()
            })
        );
        assert_eq!(Quality::of(&json!({"freq": null})).freq, None);
    }
}
