//! The metrics of the results format: every column a sample's `metric` may name, with
//! its unit, direction and axis label. Code compares [`Metric`]s, never metric names.

use std::fmt;

use nnb_units::DisplayUnit;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Whether a larger or a smaller value of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Runtimes and latencies: smaller is better.
    LowerIsBetter,
    /// Throughputs and rates: larger is better.
    HigherIsBetter,
}

impl Direction {
    /// The format's `higher_is_better` flag for this direction.
    pub fn higher_is_better(self) -> bool {
        self == Direction::HigherIsBetter
    }
}

/// The physical quantity a metric's values are, which picks how they are printed and
/// scaled on an axis; [`Metric::format`] prints a value of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quantity {
    /// Seconds.
    Seconds,
    /// Nanoseconds.
    Nanoseconds,
    /// Operations per second.
    OpsPerSecond,
    /// Bits per second.
    BitsPerSecond,
    /// Percent of one CPU (100 = one CPU busy all the time).
    PercentCpu,
    /// Bytes.
    Bytes,
    /// Percent of events (lost probes, lossy slots): fewer is better.
    PercentOfEvents,
    /// A count of datagrams (version 9): fewer is better.
    Datagrams,
    /// A count of routers on a path (version 10): fewer is nearer.
    Hops,
    /// A value a command printed (version 11), in the unit its experiment file
    /// declared; its direction is the declared one, which a sample's
    /// `higher_is_better` carries (the command job's result records both).
    Declared,
}

impl Quantity {
    /// How values of it are shown in tables and on plot axes (bytes with binary
    /// prefixes, as memory is sized, in both).
    pub fn display_unit(self) -> DisplayUnit {
        match self {
            Quantity::Seconds => DisplayUnit::SECONDS,
            Quantity::Nanoseconds => DisplayUnit::NANOSECONDS,
            Quantity::OpsPerSecond => DisplayUnit::OPS_PER_SECOND,
            Quantity::BitsPerSecond => DisplayUnit::BITS_PER_SECOND,
            Quantity::PercentCpu => DisplayUnit::PERCENT_CPU,
            Quantity::Bytes => DisplayUnit::BYTES,
            Quantity::PercentOfEvents => DisplayUnit::PERCENT,
            Quantity::Datagrams | Quantity::Hops | Quantity::Declared => DisplayUnit::NONE,
        }
    }
}

/// A metric of the results format: a flat numeric column of `samples.jsonl`, and the
/// name a sample's `metric` field gives its primary metric (`value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Fixed-work burn: wall time, last thread end - first thread start, seconds.
    RuntimeS,
    /// Burn: operations of all threads per second.
    OpsPerSec,
    /// Latency probe: mean round-trip time, ns.
    RttMeanNs,
    /// Latency probe: median round-trip time, ns.
    RttP50Ns,
    /// Latency probe: 90th percentile round-trip time, ns.
    RttP90Ns,
    /// Latency probe: 99th percentile round-trip time, ns.
    RttP99Ns,
    /// Latency probe: 99.9th percentile round-trip time, ns.
    RttP999Ns,
    /// Load generator: payload rate received by the sink, bit/s; none unless every
    /// stream's sink report arrived (never the sender's rate).
    RateBps,
    /// Fixed-time burn: threads / ops per second, ns: the time one thread takes per
    /// operation, which a thread sweep compares across levels (total throughput rises
    /// with the thread count and says nothing about interference).
    NsPerOpPerThread,
    /// Disk load generator (version 5): I/O operations completed per second, as the
    /// generator counted them.
    Iops,
    /// Memory load (version 5): the workers' highest resident set size, bytes, as
    /// the load read it from `/proc`.
    RssBytes,
    /// Host side (version 5): the tenant's CPU time per wall time over the measured
    /// jobs, read from its cgroup's accounting, percent of one CPU.
    HostCpuPct,
    /// Host side (version 5): the tenant's mean resident memory over the measured
    /// jobs, read from its cgroup, bytes.
    HostMemBytes,
    /// Host side (version 5): the tenant's block I/O operations per second, read
    /// from its cgroup's I/O accounting.
    HostIops,
    /// Host side (version 5): the bits per second the tenant's network interface
    /// sent, read from its counters outside the tenant.
    HostNetBps,
    /// CPUTest (version 8): the share of wall time the scanning thread ran, outside
    /// gaps above the threshold (Wang & Ng's CPU share), mean over the CPUs, percent
    /// of one CPU.
    CpuSharePct,
    /// RTT series (version 8): smallest RTT (the propagation delay's estimate), ns.
    RttMinNs,
    /// RTT series (version 8): largest RTT, ns.
    RttMaxNs,
    /// RTT series (version 8): standard deviation of the RTTs, ns.
    RttStdNs,
    /// Badabing (version 8): lossy slots per probed slot, percent.
    LossFrequencyPct,
    /// Badabing (version 8): lost probes per probe, percent.
    ProbeLossPct,
    /// Load generator (version 9): datagrams the sink's own receive sockets dropped
    /// while the load's streams used them (the kernel's count, `SO_RXQ_OVFL`, in
    /// which a buffer of datagrams coalesced on receive counts once): loss at the
    /// receiver, not in the network; none from a sink that does not count.
    SinkDrops,
    /// Latency probe and UDP RTT series (version 10): the routers between the
    /// prober and the reflector, inferred from the IP TTL the answers arrived with
    /// (the next usual initial TTL, 64, 128 or 255, minus the largest TTL seen):
    /// Wang & Ng's network-location check of a pair.
    Hops,
    /// Command job (version 11): the command's wall time, from its start to the
    /// exit of its process, by the agent's monotonic clock, seconds.
    CommandWallS,
    /// Command job (version 11): the value the command printed, read from its
    /// output by the JSON pointer or regex its experiment file declared, in the
    /// declared unit; the sample's `higher_is_better` is the declared direction.
    CommandValue,
}

impl Metric {
    /// Every metric, in the order of the format's columns.
    pub const ALL: [Metric; 25] = [
        Metric::RuntimeS,
        Metric::OpsPerSec,
        Metric::RttMeanNs,
        Metric::RttP50Ns,
        Metric::RttP90Ns,
        Metric::RttP99Ns,
        Metric::RttP999Ns,
        Metric::RateBps,
        Metric::NsPerOpPerThread,
        Metric::Iops,
        Metric::RssBytes,
        Metric::HostCpuPct,
        Metric::HostMemBytes,
        Metric::HostIops,
        Metric::HostNetBps,
        Metric::CpuSharePct,
        Metric::RttMinNs,
        Metric::RttMaxNs,
        Metric::RttStdNs,
        Metric::LossFrequencyPct,
        Metric::ProbeLossPct,
        Metric::SinkDrops,
        Metric::Hops,
        Metric::CommandWallS,
        Metric::CommandValue,
    ];

    /// The host-side utilisation metrics (version 5): what the provider read of each
    /// tenant from outside it, independent of what its load generator reports.
    pub const HOST: [Metric; 4] = [
        Metric::HostCpuPct,
        Metric::HostMemBytes,
        Metric::HostIops,
        Metric::HostNetBps,
    ];

    /// The round-trip-time metrics of a latency job: mean, p50, p90, p99, p99.9.
    pub const RTT: [Metric; 5] = [
        Metric::RttMeanNs,
        Metric::RttP50Ns,
        Metric::RttP90Ns,
        Metric::RttP99Ns,
        Metric::RttP999Ns,
    ];

    /// The metric's name in the format (its column and the `metric` field), e.g.
    /// `runtime_s`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::RuntimeS => "runtime_s",
            Metric::OpsPerSec => "ops_per_sec",
            Metric::RttMeanNs => "rtt_mean_ns",
            Metric::RttP50Ns => "rtt_p50_ns",
            Metric::RttP90Ns => "rtt_p90_ns",
            Metric::RttP99Ns => "rtt_p99_ns",
            Metric::RttP999Ns => "rtt_p999_ns",
            Metric::RateBps => "rate_bps",
            Metric::NsPerOpPerThread => "ns_per_op_per_thread",
            Metric::Iops => "iops",
            Metric::RssBytes => "rss_bytes",
            Metric::HostCpuPct => "host_cpu_pct",
            Metric::HostMemBytes => "host_mem_bytes",
            Metric::HostIops => "host_iops",
            Metric::HostNetBps => "host_net_bps",
            Metric::CpuSharePct => "cpu_share_pct",
            Metric::RttMinNs => "rtt_min_ns",
            Metric::RttMaxNs => "rtt_max_ns",
            Metric::RttStdNs => "rtt_std_ns",
            Metric::LossFrequencyPct => "loss_frequency_pct",
            Metric::ProbeLossPct => "probe_loss_pct",
            Metric::SinkDrops => "sink_drops",
            Metric::Hops => "hops",
            Metric::CommandWallS => "command_wall_s",
            Metric::CommandValue => "command_value",
        }
    }

    /// The metric's position in [`Metric::ALL`] (its declaration order).
    fn index(self) -> usize {
        self as usize
    }

    /// The metric named `name` in the format, if there is one.
    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// What its values are.
    pub fn quantity(self) -> Quantity {
        match self {
            Metric::RuntimeS | Metric::CommandWallS => Quantity::Seconds,
            Metric::OpsPerSec => Quantity::OpsPerSecond,
            Metric::RttMeanNs
            | Metric::RttP50Ns
            | Metric::RttP90Ns
            | Metric::RttP99Ns
            | Metric::RttP999Ns
            | Metric::RttMinNs
            | Metric::RttMaxNs
            | Metric::RttStdNs
            | Metric::NsPerOpPerThread => Quantity::Nanoseconds,
            Metric::RateBps | Metric::HostNetBps => Quantity::BitsPerSecond,
            Metric::Iops | Metric::HostIops => Quantity::OpsPerSecond,
            Metric::RssBytes | Metric::HostMemBytes => Quantity::Bytes,
            Metric::HostCpuPct | Metric::CpuSharePct => Quantity::PercentCpu,
            Metric::LossFrequencyPct | Metric::ProbeLossPct => Quantity::PercentOfEvents,
            Metric::SinkDrops => Quantity::Datagrams,
            Metric::Hops => Quantity::Hops,
            Metric::CommandValue => Quantity::Declared,
        }
    }

    /// The unit symbol for column headers: `s`, `ops/s`, `ns`, `bit/s`.
    pub fn unit(self) -> &'static str {
        match self.quantity() {
            Quantity::Seconds => "s",
            Quantity::Nanoseconds => "ns",
            Quantity::OpsPerSecond => "ops/s",
            Quantity::BitsPerSecond => "bit/s",
            Quantity::PercentCpu => "% CPU",
            Quantity::Bytes => "B",
            Quantity::PercentOfEvents => "%",
            Quantity::Datagrams => "datagrams",
            Quantity::Hops => "hops",
            // The declared unit is in the command job's result.
            Quantity::Declared => "",
        }
    }

    /// A value of this metric for people, with its unit and an SI prefix:
    /// `1.235 s`, `41.20 µs`, `2.50 Mops/s`, `1.00 Gbit/s` (one formatter per quantity,
    /// all from `nnb-units`).
    pub fn format(self, v: f64) -> String {
        match self.quantity() {
            Quantity::Seconds => nnb_units::format_secs(v),
            Quantity::Nanoseconds => nnb_units::format_ns(v),
            Quantity::OpsPerSecond => nnb_units::format_per_sec(v, "ops"),
            Quantity::BitsPerSecond => nnb_units::format_bits_per_sec(v),
            Quantity::PercentCpu => format!("{v:.1} % CPU"),
            Quantity::Bytes => nnb_units::format_bytes(v),
            Quantity::PercentOfEvents => format!("{v:.2} %"),
            Quantity::Datagrams => format!("{v:.0} datagrams"),
            Quantity::Hops => format!("{v:.0} hops"),
            Quantity::Declared => format!("{v}"),
        }
    }

    /// Whether a larger or a smaller value is better.
    pub fn direction(self) -> Direction {
        match self.quantity() {
            Quantity::Seconds
            | Quantity::Nanoseconds
            | Quantity::PercentOfEvents
            | Quantity::Datagrams
            | Quantity::Hops => Direction::LowerIsBetter,
            // Utilisation: a tenant's share of the resource, which the isolation
            // matrix compares alone and beside a neighbor: more is more of its grant.
            Quantity::OpsPerSecond
            | Quantity::BitsPerSecond
            | Quantity::PercentCpu
            | Quantity::Bytes => Direction::HigherIsBetter,
            // A printed value's direction is declared per job: a sample says it in
            // `higher_is_better` ([`crate::job::Metrics::higher_is_better`]); this is
            // only the fallback of a reader without the sample.
            Quantity::Declared => Direction::HigherIsBetter,
        }
    }

    /// What the metric is, for axis titles: `runtime`, `throughput`, `mean round-trip
    /// time`, `p99 round-trip time`, `rate`.
    pub fn label(self) -> &'static str {
        match self {
            Metric::RuntimeS => "runtime",
            Metric::OpsPerSec => "throughput",
            Metric::RttMeanNs => "mean round-trip time",
            Metric::RttP50Ns => "median round-trip time",
            Metric::RttP90Ns => "p90 round-trip time",
            Metric::RttP99Ns => "p99 round-trip time",
            Metric::RttP999Ns => "p99.9 round-trip time",
            Metric::RateBps => "rate",
            Metric::NsPerOpPerThread => "time per op per thread",
            Metric::Iops => "I/O operations per second",
            Metric::RssBytes => "resident memory",
            Metric::HostCpuPct => "CPU utilisation (host side)",
            Metric::HostMemBytes => "resident memory (host side)",
            Metric::HostIops => "I/O operations per second (host side)",
            Metric::HostNetBps => "network send rate (host side)",
            Metric::CpuSharePct => "CPU share (outside gaps)",
            Metric::RttMinNs => "minimum round-trip time",
            Metric::RttMaxNs => "maximum round-trip time",
            Metric::RttStdNs => "round-trip time standard deviation",
            Metric::LossFrequencyPct => "loss frequency (lossy slots)",
            Metric::ProbeLossPct => "probe loss rate",
            Metric::SinkDrops => "datagrams the receiver dropped",
            Metric::Hops => "hops between the pair (from the reply TTL)",
            Metric::CommandWallS => "command wall time",
            Metric::CommandValue => "command's value",
        }
    }

    /// Digits shown after the point in tables: 4 for seconds, 3 for the time per op
    /// (about a nanosecond), 2 for a CPU percentage, none for the rest.
    pub fn decimals(self) -> usize {
        match (self, self.quantity()) {
            (_, Quantity::Seconds) => 4,
            (Metric::NsPerOpPerThread, _) => 3,
            (_, Quantity::PercentCpu | Quantity::PercentOfEvents) => 2,
            _ => 0,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One optional value per [`Metric`]: a sample's metric columns. It is written as
/// flat fields named by [`Metric::name`], in [`Metric::ALL`] order, `null` where the
/// job has no value, so a new metric is a new [`Metric`] and nothing here.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MetricValues([Option<f64>; Metric::ALL.len()]);

impl MetricValues {
    /// The value of `metric`, if the job has one.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.0[metric.index()]
    }

    /// Sets (or clears, with `None`) the value of `metric`.
    pub fn set(&mut self, metric: Metric, value: Option<f64>) {
        self.0[metric.index()] = value;
    }

    /// Every metric with its value, in [`Metric::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Metric, Option<f64>)> + '_ {
        Metric::ALL.into_iter().map(|m| (m, self.get(m)))
    }
}

impl Serialize for MetricValues {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(Metric::ALL.len()))?;
        for (metric, value) in self.iter() {
            map.serialize_entry(metric.name(), &value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MetricValues {
    /// Reads the fields named like a metric and skips the others (the rest of a
    /// sample, when flattened into it); a missing metric is `None`.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Columns;
        impl<'de> Visitor<'de> for Columns {
            type Value = MetricValues;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("metric columns")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetricValues, A::Error> {
                let mut values = MetricValues::default();
                while let Some(key) = map.next_key::<String>()? {
                    match Metric::from_name(&key) {
                        Some(metric) => values.set(metric, map.next_value()?),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(values)
            }
        }
        deserializer.deserialize_map(Columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_name() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(m));
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<Metric>(&json).unwrap(), m);
        }
        assert_eq!(Metric::from_name("value"), None);
    }

    #[test]
    fn units_and_directions() {
        assert_eq!(Metric::RuntimeS.unit(), "s");
        assert_eq!(Metric::OpsPerSec.unit(), "ops/s");
        assert_eq!(Metric::RttP999Ns.unit(), "ns");
        assert_eq!(Metric::RateBps.unit(), "bit/s");
        assert!(!Metric::RuntimeS.direction().higher_is_better());
        assert!(!Metric::RttMeanNs.direction().higher_is_better());
        assert!(Metric::OpsPerSec.direction().higher_is_better());
        assert!(Metric::RateBps.direction().higher_is_better());
        assert_eq!(
            (Metric::RuntimeS.decimals(), Metric::RateBps.decimals()),
            (4, 0)
        );
    }

    #[test]
    fn all_lists_every_metric_once_in_declaration_order() {
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(m.index(), i, "{m}");
        }
    }

    #[test]
    fn metric_values_are_flat_named_fields_with_nulls() {
        let mut v = MetricValues::default();
        v.set(Metric::RuntimeS, Some(1.5));
        v.set(Metric::RateBps, Some(8e6));
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"runtime_s":1.5,"ops_per_sec":null,"rtt_mean_ns":null,"rtt_p50_ns":null,"rtt_p90_ns":null,"rtt_p99_ns":null,"rtt_p999_ns":null,"rate_bps":8000000.0,"ns_per_op_per_thread":null,"iops":null,"rss_bytes":null,"host_cpu_pct":null,"host_mem_bytes":null,"host_iops":null,"host_net_bps":null,"cpu_share_pct":null,"rtt_min_ns":null,"rtt_max_ns":null,"rtt_std_ns":null,"loss_frequency_pct":null,"probe_loss_pct":null,"sink_drops":null,"hops":null,"command_wall_s":null,"command_value":null}"#
        );
        // Other fields are skipped, missing metrics are None.
        let read: MetricValues =
            serde_json::from_str(r#"{"step":"a","rtt_p99_ns":41200,"runtime_s":null}"#).unwrap();
        assert_eq!(read.get(Metric::RttP99Ns), Some(41200.0));
        assert_eq!(read.get(Metric::RuntimeS), None);
        assert_eq!(read.get(Metric::RateBps), None);
    }
}
