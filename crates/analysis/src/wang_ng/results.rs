//! What the Wang & Ng analyses read of the raw results of `steal`, `rtt`, `load` and
//! `badabing` samples (`docs/results-format.md`, version 8). Fields the result must
//! have for its table are required, so a malformed result fails with serde's message
//! naming the field; the ones only some results carry (a trace, TCP_INFO) are
//! optional.

use serde::de::IgnoredAny;
use serde::Deserialize;

/// A `steal` (CPUTest) result.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Steal {
    /// Gap threshold, ns (CPUTest's: 1 ms).
    pub threshold_ns: u64,
    /// One entry per measured CPU.
    pub cpus: Vec<StealCpu>,
}

/// One CPU of a `steal` result.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct StealCpu {
    /// The CPU.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Measured span, ns.
    #[serde(default)]
    pub span_ns: Option<f64>,
    /// Share of wall time not inside gaps longer than the threshold, 0 to 1.
    pub ran_share: f64,
    /// Gaps longer than the threshold.
    #[serde(default)]
    pub gaps: Option<u64>,
    /// Longest gap, ns.
    #[serde(default)]
    pub longest_gap_ns: Option<u64>,
    /// The timestamp trace, when asked for.
    #[serde(default)]
    pub trace: Option<Trace>,
}

/// A CPUTest timestamp trace: every gap longer than the threshold, the rest as
/// iterations per 1 ms bin from the scan's start.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Trace {
    /// `[at_ns, len_ns]` of each gap kept, at = offset from the scan's start.
    pub gaps: Vec<(u64, u64)>,
    /// Loop iterations per 1 ms bin.
    pub counts_per_ms: Vec<u32>,
    /// Gaps not kept (over the trace's bound).
    #[serde(default)]
    pub gaps_left_out: u64,
}

/// How an RTT series probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RttMode {
    /// nnb's UDP ping against its reflector.
    Udp,
    /// ICMP echo (ping).
    Icmp,
}

impl RttMode {
    /// The mode as tables and charts label it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            RttMode::Udp => "UDP",
            RttMode::Icmp => "ICMP echo",
        }
    }
}

/// An `rtt` (RTT series) result.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Rtt {
    /// UDP or ICMP echo.
    pub mode: RttMode,
    /// The probed address.
    pub target: String,
    /// Probes per second.
    pub rate_hz: f64,
    /// First probes left out of the statistics.
    pub skip: u64,
    /// Probes sent.
    pub sent: u64,
    /// Every probe in send order, the dropped first ones included.
    pub log: Vec<Probe>,
    /// The answers' IP TTL and the hops it suggests (version 10; none over ICMP or
    /// from an older agent): Wang & Ng's network-location check.
    #[serde(default)]
    pub reply_ttl: Option<nnb_format::job::ReplyTtl>,
}

/// One probe of an RTT series.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct Probe {
    /// Sequence number.
    pub seq: u64,
    /// Round-trip time, ns; none when lost.
    pub rtt_ns: Option<u64>,
}

/// A `load` result: what the Wang & Ng analyses read beyond the typed result.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Load {
    /// `udp` or `tcp`.
    pub protocol: String,
    /// Socket buffers asked for and granted.
    #[serde(default)]
    pub socket: Option<Socket>,
    /// The byte bound of the load, when it had one.
    #[serde(default)]
    pub bytes_bound: Option<u64>,
    /// The sender's TCP_INFO samples (TCP).
    #[serde(default)]
    pub tcp_info: Option<TcpInfo>,
    /// Quiet periods of the transfer (TCP).
    #[serde(default)]
    pub quiet: Option<Quiet>,
    /// Per stream, the receiver's view.
    #[serde(default)]
    pub streams: Vec<Stream>,
}

/// Socket buffer sizes, bytes.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct Socket {
    /// Send buffer asked for.
    #[serde(default)]
    pub send_buffer_requested: Option<u64>,
    /// Send buffer the kernel granted.
    #[serde(default)]
    pub send_buffer_granted: Option<u64>,
    /// Receive buffer asked for.
    #[serde(default)]
    pub recv_buffer_requested: Option<u64>,
    /// Receive buffer the kernel granted.
    #[serde(default)]
    pub recv_buffer_granted: Option<u64>,
}

/// The sender's TCP_INFO over the transfer.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TcpInfo {
    /// The samples (only counted here).
    pub samples: Vec<IgnoredAny>,
    /// Retransmissions over the transfer.
    pub retransmissions: u64,
}

/// The quiet periods of a TCP transfer: nothing sent or received for longer than the
/// threshold.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Quiet {
    /// The threshold, ns.
    pub threshold_ns: u64,
    /// Each period.
    pub periods: Vec<QuietPeriod>,
    /// Periods in all.
    pub count: u64,
    /// Longest, ns.
    pub longest_ns: u64,
    /// Sum, ns.
    pub total_ns: u64,
}

/// One quiet period.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct QuietPeriod {
    /// Retransmissions during it.
    pub retrans_during: u64,
    /// Retransmissions right after it.
    pub retrans_after: u64,
}

/// The receiver's view of one stream.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Stream {
    /// The fine-grained throughput series.
    #[serde(default)]
    pub fine: Option<Fine>,
    /// Buffer burst periods against the link rate.
    #[serde(default)]
    pub buffer_bursts: Option<Bursts>,
}

/// A throughput for each `grain_bytes` received.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Fine {
    /// Bytes per point.
    pub grain_bytes: u64,
    /// The points.
    pub points: Vec<FinePoint>,
    /// Points not kept (over the series' bound).
    #[serde(default)]
    pub points_left_out: u64,
}

/// One point of a fine-grained series.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct FinePoint {
    /// Arrival of the grain's last byte after the stream's first arrival, ns.
    pub t_ns: u64,
    /// Throughput over the grain, bit/s.
    pub bps: f64,
}

/// Buffer burst periods: maximal runs of grains received above the link rate.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Bursts {
    /// The full link rate, bit/s.
    pub link_bps: f64,
    /// Each period.
    pub periods: Vec<BurstPeriod>,
    /// The largest period's burst data, bytes.
    pub largest_burst_bytes: f64,
    /// All periods' burst data, bytes.
    pub total_burst_bytes: f64,
}

/// One buffer burst period.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct BurstPeriod {
    /// Its length, ns.
    pub len_ns: u64,
    /// Data received in it, bytes.
    pub bytes: f64,
}

/// A `badabing` result.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Badabing {
    /// Slot length, ns.
    pub slot_ns: u64,
    /// Probability of a probe in a slot.
    pub probability: f64,
    /// Packets per probe.
    pub packets: u64,
    /// τ, ns.
    pub tau_ns: u64,
    /// α.
    pub alpha: f64,
    /// Slots in all.
    pub slots: u64,
    /// Slots with a probe.
    pub probed_slots: u64,
    /// Slots marked lossy.
    pub lossy_slots: u64,
    /// Probes sent.
    pub probes: u64,
    /// Probes with a packet lost.
    pub lost_probes: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets lost.
    pub packets_lost: u64,
    /// Badabing's loss frequency (lossy slots / probed slots), 0 to 1.
    pub loss_frequency: f64,
    /// Lost probes / probes, 0 to 1.
    pub probe_loss_rate: f64,
    /// Whether the one-way delays are relative to the smallest seen.
    pub owd_relative: bool,
    /// One entry per probed slot.
    pub series: Vec<Slot>,
}

/// One probed slot of a Badabing series.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct Slot {
    /// Start of the slot after the probing's start, ns.
    pub t_ns: u64,
    /// One-way delay of the probe, ns (relative to the smallest seen); none when
    /// every packet was lost.
    pub owd_ns: Option<u64>,
    /// The max_owd estimate at the slot, ns; none before the first loss.
    pub max_owd_ns: Option<u64>,
    /// Whether the estimator marked the slot lossy.
    pub lossy: bool,
}
