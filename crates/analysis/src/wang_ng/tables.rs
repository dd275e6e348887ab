//! The Wang & Ng tables: every value from the results exactly (no thinning), in the
//! seed's units (ms, Mbit/s, MB = 10^6 bytes, percent).

use super::results::{Bursts, Probe, StealCpu};
use super::{LoadResult, Measured, Origin, Rtt, Steal, WangNg};
use crate::table::{Cell, Table};
use nnb_format::Role;

/// Nanoseconds per trace bin (the trace counts iterations per 1 ms).
pub(crate) const BIN_NS: u64 = 1_000_000;

/// ns as ms.
fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// A count as a table integer.
fn int(n: u64) -> Cell {
    Cell::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// An optional count.
fn opt_int(n: Option<u64>) -> Cell {
    n.map_or(Cell::Empty, int)
}

/// The tenant a result came from, with its role.
fn who(o: &Origin) -> Cell {
    Cell::text(format!("{} ({})", o.tenant, o.role.name()))
}

/// One CPU's share as the CPUTest table shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CpuShare {
    /// Percent of wall time not inside gaps longer than the threshold.
    pub share_pct: f64,
    /// Whether it was worked out from the trace (every gap kept) rather than read
    /// from the result's `ran_share`.
    pub from_trace: bool,
    /// Gaps longer than the threshold.
    pub gaps: Option<u64>,
    /// The longest, ns.
    pub longest_ns: Option<u64>,
}

/// The CPU share of one CPU as Wang & Ng define it: the share of wall time not
/// inside gaps longer than `threshold_ns` (an iteration of "more than 1 ms", seed
/// l.311-313). From the trace when it kept every gap and
/// the span is known (the result's `span_ns`, else its 1 ms bins), so that the table
/// shows what the figure shows; else the result's `ran_share`.
pub(crate) fn cpu_share(threshold_ns: u64, cpu: &StealCpu) -> CpuShare {
    let from_result = CpuShare {
        share_pct: 100.0 * cpu.ran_share,
        from_trace: false,
        gaps: cpu.gaps,
        longest_ns: cpu.longest_gap_ns,
    };
    let Some(trace) = cpu.trace.as_ref().filter(|t| t.gaps_left_out == 0) else {
        return from_result;
    };
    let span_ns = cpu
        .span_ns
        .unwrap_or((trace.counts_per_ms.len() as u64 * BIN_NS) as f64);
    if !(span_ns.is_finite() && span_ns > 0.0) {
        return from_result;
    }
    let gaps: Vec<u64> = trace
        .gaps
        .iter()
        .map(|g| g.1)
        .filter(|len| *len > threshold_ns)
        .collect();
    let off: f64 = gaps.iter().map(|g| *g as f64).sum();
    CpuShare {
        share_pct: 100.0 * (1.0 - off / span_ns).clamp(0.0, 1.0),
        from_trace: true,
        gaps: Some(gaps.len() as u64),
        longest_ns: Some(gaps.iter().copied().max().unwrap_or(0)),
    }
}

/// The mean CPU share of a CPUTest result over its CPUs, percent.
pub(crate) fn tenant_share(s: &Steal) -> Option<f64> {
    let n = s.cpus.len();
    (n > 0).then(|| {
        s.cpus
            .iter()
            .map(|c| cpu_share(s.threshold_ns, c).share_pct)
            .sum::<f64>()
            / n as f64
    })
}

/// An RTT series' statistics over its kept probes (after the first `skip`), ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RttStats {
    /// Probes in the log.
    pub probes: usize,
    /// Probes kept (after the dropped first ones).
    pub kept: usize,
    /// Kept probes lost.
    pub lost: usize,
    /// Smallest RTT (the propagation delay's estimate).
    pub min: Option<f64>,
    /// Median (the mean of the middle two of an even count).
    pub median: Option<f64>,
    /// Mean.
    pub mean: Option<f64>,
    /// 99th percentile ([`nnb_format::stats::quantile_of_sorted`]).
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Standard deviation (of the population of kept answered probes).
    pub std: Option<f64>,
}

/// The statistics of the probes of `log` after the first `skip`.
pub(crate) fn rtt_stats(log: &[Probe], skip: u64) -> RttStats {
    let skip = usize::try_from(skip).unwrap_or(usize::MAX).min(log.len());
    let kept = &log[skip..];
    let mut rtts: Vec<f64> = kept
        .iter()
        .filter_map(|p| p.rtt_ns)
        .map(|r| r as f64)
        .collect();
    rtts.sort_by(f64::total_cmp);
    let n = rtts.len();
    let mean = (n > 0).then(|| rtts.iter().sum::<f64>() / n as f64);
    let median = (n > 0).then(|| nnb_format::stats::median(&rtts));
    let p99 = (n > 0).then(|| nnb_format::stats::quantile_of_sorted(&rtts, 0.99));
    let std = mean.map(|m| (rtts.iter().map(|r| (r - m).powi(2)).sum::<f64>() / n as f64).sqrt());
    RttStats {
        probes: log.len(),
        kept: kept.len(),
        lost: kept.len() - n,
        min: rtts.first().copied(),
        median,
        mean,
        p99,
        max: rtts.last().copied(),
        std,
    }
}

/// Per tenant and CPU: the CPU share, the gaps longer than the threshold, the
/// longest, the threshold.
pub(crate) fn cputest(w: &WangNg) -> Option<Table> {
    if w.cputest.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    for m in &w.cputest {
        for (i, cpu) in m.result.cpus.iter().enumerate() {
            let s = cpu_share(m.result.threshold_ns, cpu);
            rows.push(vec![
                Cell::Int(i64::from(m.from.rep)),
                who(&m.from),
                cpu.cpu
                    .map_or(Cell::text(format!("#{i}")), |c| Cell::Int(c as i64)),
                Cell::num(s.share_pct, 1),
                opt_int(s.gaps),
                Cell::opt(s.longest_ns.map(|l| ms(l as f64)), 2),
                Cell::num(ms(m.result.threshold_ns as f64), 2),
                Cell::text(if s.from_trace { "trace" } else { "ran_share" }),
            ]);
        }
    }
    Some(Table {
        name: "cputest_share".into(),
        title: "CPUTest: CPU share per tenant (Wang & Ng §IV)".into(),
        columns: [
            "round",
            "tenant",
            "cpu",
            "CPU share (%)",
            "gaps > threshold",
            "longest gap (ms)",
            "threshold (ms)",
            "share from",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "CPU share = share of wall time not inside gaps longer than the threshold \
             (their 1 ms: an iteration normally takes under 3 us)"
                .into(),
            "share from `trace`: worked out from the timestamp trace (every gap kept); \
             `ran_share`: the result's figure (no trace, or gaps left out of it)"
                .into(),
        ],
    })
}

/// Per RTT series: its mode, probes, loss and statistics.
pub(crate) fn rtt(w: &WangNg) -> Option<Table> {
    if w.rtt.is_empty() {
        return None;
    }
    let rows = w
        .rtt
        .iter()
        .map(|m| {
            let r: &Rtt = &m.result;
            let s = rtt_stats(&r.log, r.skip);
            let ms_cell = |v: Option<f64>| Cell::opt(v.map(ms), 3);
            vec![
                Cell::Int(i64::from(m.from.rep)),
                Cell::text(format!("{} → {}", m.from.tenant, r.target)),
                Cell::text(r.mode.label()),
                Cell::num(r.rate_hz, 1),
                int(r.sent),
                int(s.probes as u64),
                Cell::Int(s.probes as i64 - s.kept as i64),
                int(s.kept as u64),
                int(s.lost as u64),
                Cell::num(
                    if s.kept > 0 {
                        100.0 * s.lost as f64 / s.kept as f64
                    } else {
                        f64::NAN
                    },
                    2,
                ),
                ms_cell(s.min),
                ms_cell(s.median),
                ms_cell(s.mean),
                ms_cell(s.max),
                ms_cell(s.std),
            ]
        })
        .collect();
    Some(Table {
        name: "rtt_series".into(),
        title: "RTT series per pair (Wang & Ng §V.B)".into(),
        columns: [
            "round",
            "pair",
            "mode",
            "probes/s",
            "sent",
            "logged",
            "first dropped",
            "kept",
            "lost",
            "loss (%)",
            "min (ms)",
            "median (ms)",
            "mean (ms)",
            "max (ms)",
            "std (ms)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "statistics over the kept probes (the first ones dropped, as the seed's first 50); \
             min = the propagation delay's estimate; std of the population"
                .into(),
            "mode: UDP = nnb's UDP ping; ICMP echo = ping (the seed's first-packets anomaly \
             is ICMP-only)"
                .into(),
        ],
    })
}

/// The loads in plan order, each with its stream index.
fn streams(
    w: &WangNg,
) -> impl Iterator<Item = (&Measured<LoadResult>, usize, &super::results::Stream)> {
    w.loads.iter().flat_map(|m| {
        m.result
            .load
            .streams
            .iter()
            .enumerate()
            .map(move |(i, s)| (m, i, s))
    })
}

/// The columns naming a load's stream.
fn load_cells(m: &Measured<LoadResult>, stream: usize) -> Vec<Cell> {
    vec![
        Cell::Int(i64::from(m.from.rep)),
        who(&m.from),
        Cell::text(m.result.protocol()),
        Cell::Int(stream as i64),
    ]
}

/// Per stream with a fine-grained series: its grain, points and their spread.
pub(crate) fn fine(w: &WangNg) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = streams(w)
        .filter_map(|(m, i, s)| {
            let f = s.fine.as_ref()?;
            let bps: Vec<f64> = f.points.iter().map(|p| p.bps).collect();
            let n = bps.len();
            let mean = (n > 0).then(|| bps.iter().sum::<f64>() / n as f64);
            let mbit = |v: Option<f64>| Cell::opt(v.map(|v| v / 1e6), 1);
            let mut row = load_cells(m, i);
            row.extend([
                Cell::num(f.grain_bytes as f64 / 1024.0, 0),
                int(n as u64),
                int(f.points_left_out),
                mbit(mean),
                mbit(bps.iter().copied().reduce(f64::min)),
                mbit(bps.iter().copied().reduce(f64::max)),
            ]);
            Some(row)
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        name: "fine_throughput".into(),
        title: "Fine-grained throughput per stream (Wang & Ng §V.A, Figs 5/6)".into(),
        columns: [
            "round",
            "sender",
            "protocol",
            "stream",
            "grain (KiB)",
            "points",
            "points left out",
            "mean of points (Mbit/s)",
            "lowest (Mbit/s)",
            "highest (Mbit/s)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "one throughput per grain received, at the receiver: grain x 8 / the grain's \
             arrival span (not 100 ms bins)"
                .into(),
        ],
    })
}

/// The longest buffer burst period, ns.
fn longest_period(b: &Bursts) -> Option<u64> {
    b.periods.iter().map(|p| p.len_ns).max()
}

/// Per stream with buffer bursts: the link rate, the periods, the largest and total
/// burst data.
pub(crate) fn bursts(w: &WangNg) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = streams(w)
        .filter_map(|(m, i, s)| {
            let b = s.buffer_bursts.as_ref()?;
            let mut row = load_cells(m, i);
            row.extend([
                Cell::num(b.link_bps / 1e6, 0),
                int(b.periods.len() as u64),
                Cell::num(b.largest_burst_bytes / 1e6, 3),
                Cell::num(b.total_burst_bytes / 1e6, 3),
                Cell::num(b.periods.iter().map(|p| p.bytes).sum::<f64>() / 1e6, 3),
                Cell::opt(longest_period(b).map(|l| ms(l as f64)), 2),
            ]);
            Some(row)
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        name: "buffer_bursts".into(),
        title: "Buffer bursts against the full link rate (Wang & Ng §V.A)".into(),
        columns: [
            "round",
            "sender",
            "protocol",
            "stream",
            "link rate (Mbit/s)",
            "periods",
            "largest burst data (MB)",
            "total burst data (MB)",
            "received in periods (MB)",
            "longest period (ms)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "buffer burst period: the receiver receives continuously above the full link \
             rate; burst data: what it received in the period beyond what the link rate \
             carries in its length (the seed's largest: 7.7 MB)"
                .into(),
        ],
    })
}

/// Per load: protocol, rates sent and received, socket buffers asked for and granted.
pub(crate) fn tcp_vs_udp(w: &WangNg) -> Option<Table> {
    if w.loads.is_empty() {
        return None;
    }
    let rows = w
        .loads
        .iter()
        .map(|m| {
            let r = &m.result;
            let sock = r.load.socket.unwrap_or_default();
            let kib = |b: Option<u64>| Cell::opt(b.map(|b| b as f64 / 1024.0), 0);
            vec![
                Cell::Int(i64::from(m.from.rep)),
                who(&m.from),
                Cell::text(r.protocol()),
                Cell::num(r.sent_bps / 1e6, 1),
                Cell::opt(r.rate_bps.map(|v| v / 1e6), 1),
                kib(sock.send_buffer_requested),
                kib(sock.send_buffer_granted),
                kib(sock.recv_buffer_requested),
                kib(sock.recv_buffer_granted),
                Cell::opt(r.load.bytes_bound.map(|b| b as f64 / 1e6), 1),
            ]
        })
        .collect();
    Some(Table {
        name: "tcp_vs_udp".into(),
        title: "TCP and UDP on the same path (Wang & Ng §III.A, §V.A)".into(),
        columns: [
            "round",
            "sender",
            "protocol",
            "sent (Mbit/s)",
            "received (Mbit/s)",
            "send buffer asked (KiB)",
            "send buffer granted (KiB)",
            "recv buffer asked (KiB)",
            "recv buffer granted (KiB)",
            "bound (MB)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "received: the sink's payload rate, only when every stream's report came back; \
             granted: what the kernel gave (Linux doubles a request)"
                .into(),
        ],
    })
}

/// Per TCP load: retransmissions (TCP_INFO) and quiet periods.
pub(crate) fn quiet(w: &WangNg) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = w
        .loads
        .iter()
        .filter(|m| m.result.tcp_info().is_some() || m.result.load.quiet.is_some())
        .map(|m| {
            let l = &m.result.load;
            let q = l.quiet.as_ref();
            let sum = |f: fn(&super::results::QuietPeriod) -> u64| {
                q.map(|q| q.periods.iter().map(f).sum::<u64>())
            };
            vec![
                Cell::Int(i64::from(m.from.rep)),
                who(&m.from),
                opt_int(l.tcp_info.as_ref().map(|t| t.samples.len() as u64)),
                opt_int(l.tcp_info.as_ref().map(|t| t.retransmissions)),
                Cell::opt(q.map(|q| ms(q.threshold_ns as f64)), 1),
                opt_int(q.map(|q| q.count)),
                Cell::opt(q.map(|q| ms(q.longest_ns as f64)), 2),
                Cell::opt(q.map(|q| ms(q.total_ns as f64)), 2),
                opt_int(sum(|p| p.retrans_during)),
                opt_int(sum(|p| p.retrans_after)),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        name: "tcp_quiet_periods".into(),
        title: "Why TCP is slower: TCP_INFO and quiet periods (Wang & Ng §V.A)".into(),
        columns: [
            "round",
            "sender",
            "TCP_INFO samples",
            "retransmissions",
            "quiet threshold (ms)",
            "quiet periods",
            "longest (ms)",
            "total (ms)",
            "retrans. during",
            "retrans. after",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "quiet period: nothing sent or received for longer than the threshold; the seed \
             found them tens of ms long, with no retransmission in or after them"
                .into(),
        ],
    })
}

impl LoadResult {
    /// The load's TCP_INFO, when it has one.
    fn tcp_info(&self) -> Option<&super::results::TcpInfo> {
        self.load.tcp_info.as_ref()
    }
}

/// Per Badabing run: its settings, the loss frequency beside the probe loss rate.
pub(crate) fn badabing(w: &WangNg) -> Option<Table> {
    if w.badabing.is_empty() {
        return None;
    }
    let rows = w
        .badabing
        .iter()
        .map(|m| {
            let b = &m.result;
            vec![
                Cell::Int(i64::from(m.from.rep)),
                who(&m.from),
                Cell::num(ms(b.slot_ns as f64), 1),
                Cell::num(b.probability, 2),
                int(b.packets),
                Cell::num(ms(b.tau_ns as f64), 1),
                Cell::num(b.alpha, 4),
                int(b.slots),
                int(b.probed_slots),
                int(b.lossy_slots),
                Cell::num(100.0 * b.loss_frequency, 3),
                int(b.probes),
                int(b.lost_probes),
                Cell::num(100.0 * b.probe_loss_rate, 3),
                Cell::text(format!("{} / {}", b.packets_lost, b.packets_sent)),
            ]
        })
        .collect();
    Some(Table {
        name: "badabing".into(),
        title: "Badabing: loss frequency beside probe loss rate (Wang & Ng §VI)".into(),
        columns: [
            "round",
            "sender",
            "slot (ms)",
            "probability",
            "packets/probe",
            "tau (ms)",
            "alpha",
            "slots",
            "probed slots",
            "lossy slots",
            "loss frequency (%)",
            "probes",
            "lost probes",
            "probe loss rate (%)",
            "packets lost / sent",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "loss frequency as the probe reports it (lossy slots / probed slots); lossy \
             slot: a packet lost within tau of it, or a one-way delay above \
             max_owd x (1 - alpha), max_owd = the delay of the last successful packet \
             when a loss happened; probe loss rate = lost probes / probes"
                .into(),
        ],
    })
}

/// One pair suite round: its records of each kind.
struct Round<'w> {
    rep: u32,
    cputest: Vec<&'w Measured<Steal>>,
    rtt: Option<&'w Measured<Rtt>>,
    tcp: Option<&'w Measured<LoadResult>>,
    udp: Option<&'w Measured<LoadResult>>,
    badabing: Option<&'w Measured<super::Badabing>>,
}

/// The rounds (repetitions) in order of first appearance.
fn rounds(w: &WangNg) -> Vec<Round<'_>> {
    let mut reps: Vec<u32> = Vec::new();
    let all = w
        .cputest
        .iter()
        .map(|m| m.from.rep)
        .chain(w.rtt.iter().map(|m| m.from.rep))
        .chain(w.loads.iter().map(|m| m.from.rep))
        .chain(w.badabing.iter().map(|m| m.from.rep));
    for rep in all {
        if !reps.contains(&rep) {
            reps.push(rep);
        }
    }
    reps.into_iter()
        .map(|rep| Round {
            rep,
            cputest: w.cputest.iter().filter(|m| m.from.rep == rep).collect(),
            rtt: w.rtt.iter().find(|m| m.from.rep == rep),
            tcp: w.loads.iter().find(|m| m.from.rep == rep && m.result.tcp()),
            udp: w
                .loads
                .iter()
                .find(|m| m.from.rep == rep && !m.result.tcp()),
            badabing: w.badabing.iter().find(|m| m.from.rep == rep),
        })
        .collect()
}

/// The largest buffer burst data of a load's streams, bytes.
pub(crate) fn largest_burst(l: &LoadResult) -> Option<f64> {
    l.load
        .streams
        .iter()
        .filter_map(|s| Some(s.buffer_bursts.as_ref()?.largest_burst_bytes))
        .reduce(f64::max)
}

/// The pair of a round: the test side and the other (the CPUTest's other tenant,
/// else the RTT series' target).
fn pair_name(r: &Round) -> String {
    let sender = r
        .rtt
        .map(|m| &m.from)
        .or(r.tcp.map(|m| &m.from))
        .or(r.udp.map(|m| &m.from))
        .or(r.badabing.map(|m| &m.from))
        .map(|o| o.tenant.clone());
    let test = r
        .cputest
        .iter()
        .find(|m| m.from.role == Role::Test)
        .map(|m| m.from.tenant.clone())
        .or(sender);
    let other = r
        .cputest
        .iter()
        .find(|m| m.from.role != Role::Test)
        .map(|m| m.from.tenant.clone())
        .or(r.rtt.map(|m| m.result.target.clone()));
    format!(
        "{} ↔ {}",
        test.as_deref().unwrap_or("?"),
        other.as_deref().unwrap_or("?")
    )
}

/// The seed's numbers of one round of the pair suite (one repetition), in the
/// results' units: what the per-pair table shows and what a campaign's
/// distributions are made of.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PairNumbers {
    /// The repetition.
    pub rep: u32,
    /// The pair, `test ↔ other`.
    pub pair: String,
    /// CPU share of the test side, percent (mean over its CPUs).
    pub share_test: Option<f64>,
    /// CPU share of the other side, percent.
    pub share_other: Option<f64>,
    /// The test side's longest gap above the threshold (scheduled off), ns.
    pub longest_gap_ns: Option<f64>,
    /// The RTT series' mode.
    pub rtt_mode: Option<&'static str>,
    /// The RTT series' statistics.
    pub rtt: Option<RttStats>,
    /// Hops between the pair, from the RTT series' reply TTL.
    pub hops: Option<f64>,
    /// TCP received payload rate, bit/s.
    pub tcp_bps: Option<f64>,
    /// UDP received payload rate, bit/s.
    pub udp_bps: Option<f64>,
    /// Lowest point of the TCP load's fine-grained series, bit/s.
    pub tcp_fine_min_bps: Option<f64>,
    /// Lowest point of the UDP load's fine-grained series, bit/s.
    pub udp_fine_min_bps: Option<f64>,
    /// Largest buffer burst data of the round's loads, bytes.
    pub burst_bytes: Option<f64>,
    /// Badabing's loss frequency, percent.
    pub loss_frequency_pct: Option<f64>,
    /// Badabing's probe loss rate, percent.
    pub probe_loss_pct: Option<f64>,
}

/// The lowest point of a load's fine-grained series over its streams, bit/s.
fn fine_min(l: &LoadResult) -> Option<f64> {
    l.load
        .streams
        .iter()
        .filter_map(|s| s.fine.as_ref())
        .flat_map(|f| f.points.iter().map(|p| p.bps))
        .reduce(f64::min)
}

/// The seed's numbers of every round of the pair suite, in order of first appearance.
pub(crate) fn pair_numbers(w: &WangNg) -> Vec<PairNumbers> {
    rounds(w)
        .iter()
        .map(|r| {
            let side = |test: bool| {
                r.cputest
                    .iter()
                    .find(|m| (m.from.role == Role::Test) == test)
            };
            let rate = |l: Option<&Measured<LoadResult>>| l.and_then(|m| m.result.rate_bps);
            PairNumbers {
                rep: r.rep,
                pair: pair_name(r),
                share_test: side(true).and_then(|m| tenant_share(&m.result)),
                share_other: side(false).and_then(|m| tenant_share(&m.result)),
                longest_gap_ns: side(true).and_then(|m| {
                    m.result
                        .cpus
                        .iter()
                        .filter_map(|c| cpu_share(m.result.threshold_ns, c).longest_ns)
                        .max()
                        .map(|ns| ns as f64)
                }),
                rtt_mode: r.rtt.map(|m| m.result.mode.label()),
                rtt: r.rtt.map(|m| rtt_stats(&m.result.log, m.result.skip)),
                hops: r
                    .rtt
                    .and_then(|m| m.result.reply_ttl)
                    .map(|t| f64::from(t.hops)),
                tcp_bps: rate(r.tcp),
                udp_bps: rate(r.udp),
                tcp_fine_min_bps: r.tcp.and_then(|m| fine_min(&m.result)),
                udp_fine_min_bps: r.udp.and_then(|m| fine_min(&m.result)),
                burst_bytes: r
                    .udp
                    .into_iter()
                    .chain(r.tcp)
                    .filter_map(|m| largest_burst(&m.result))
                    .reduce(f64::max),
                loss_frequency_pct: r.badabing.map(|m| 100.0 * m.result.loss_frequency),
                probe_loss_pct: r.badabing.map(|m| 100.0 * m.result.probe_loss_rate),
            }
        })
        .collect()
}

/// The seed's per-pair table: one row per round of the pair suite.
pub(crate) fn pairs(w: &WangNg) -> Option<Table> {
    let numbers = pair_numbers(w);
    if numbers.is_empty() {
        return None;
    }
    let rows = numbers
        .iter()
        .map(|p| {
            let ms_cell =
                |f: fn(&RttStats) -> Option<f64>| Cell::opt(p.rtt.as_ref().and_then(f).map(ms), 3);
            let mbit = |v: Option<f64>| Cell::opt(v.map(|v| v / 1e6), 1);
            vec![
                Cell::Int(i64::from(p.rep)),
                Cell::text(&p.pair),
                Cell::opt(p.share_test, 1),
                Cell::opt(p.share_other, 1),
                p.rtt_mode.map_or(Cell::Empty, Cell::text),
                ms_cell(|s| s.min),
                ms_cell(|s| s.median),
                ms_cell(|s| s.mean),
                ms_cell(|s| s.max),
                ms_cell(|s| s.std),
                mbit(p.tcp_bps),
                mbit(p.udp_bps),
                Cell::opt(p.burst_bytes.map(|b| b / 1e6), 3),
                Cell::opt(p.loss_frequency_pct, 3),
                Cell::opt(p.probe_loss_pct, 3),
            ]
        })
        .collect();
    Some(Table {
        name: "pair_suite".into(),
        title: "Per pair (Wang & Ng's measurements of one pair, §III.C)".into(),
        columns: [
            "round",
            "pair",
            "CPU share test side (%)",
            "CPU share other side (%)",
            "RTT mode",
            "RTT min (ms)",
            "RTT median (ms)",
            "RTT mean (ms)",
            "RTT max (ms)",
            "RTT std (ms)",
            "TCP (Mbit/s)",
            "UDP (Mbit/s)",
            "largest buffer burst (MB)",
            "loss frequency (%)",
            "probe loss rate (%)",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        notes: vec![
            "one row per round; CPU share = mean over the side's CPUs; RTT over the kept \
             probes; TCP and UDP = the sink's received payload rate; largest buffer burst \
             = data beyond the link rate; loss frequency = Badabing's lossy slots / probed \
             slots, probe loss rate = its lost probes / probes"
                .into(),
        ],
    })
}

/// Every Wang & Ng table the run supports, the per-pair table first; the notes on
/// left-out results under the first.
pub(crate) fn all(w: &WangNg) -> Vec<Table> {
    let mut tables: Vec<Table> = [
        pairs(w),
        cputest(w),
        rtt(w),
        fine(w),
        bursts(w),
        tcp_vs_udp(w),
        quiet(w),
        badabing(w),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Some(first) = tables.first_mut() {
        first.notes.extend(w.notes.iter().cloned());
    }
    tables
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(seq: u64, rtt_ns: Option<u64>) -> Probe {
        Probe { seq, rtt_ns }
    }

    fn cpu(span_ns: Option<f64>, gaps_left_out: u64) -> StealCpu {
        StealCpu {
            cpu: Some(0),
            span_ns,
            ran_share: 0.5,
            gaps: Some(9),
            longest_gap_ns: Some(7),
            trace: Some(super::super::results::Trace {
                gaps: vec![(10 * BIN_NS, 25 * BIN_NS), (50 * BIN_NS, BIN_NS)],
                counts_per_ms: vec![1; 100],
                gaps_left_out,
            }),
        }
    }

    #[test]
    fn the_share_comes_from_a_whole_trace_else_from_the_result() {
        // 25 ms of 100 ms (the span, else the 100 bins) off; the 1 ms gap is not
        // longer than the 1 ms threshold.
        for span in [Some(1e8), None] {
            let s = cpu_share(BIN_NS, &cpu(span, 0));
            assert!((s.share_pct - 75.0).abs() < 1e-9, "{s:?}");
            assert_eq!(
                (s.gaps, s.longest_ns, s.from_trace),
                (Some(1), Some(25 * BIN_NS), true)
            );
        }
        // Gaps left out of the trace: the result's own figures.
        let s = cpu_share(BIN_NS, &cpu(Some(1e8), 3));
        assert_eq!(
            (s.share_pct, s.gaps, s.longest_ns, s.from_trace),
            (50.0, Some(9), Some(7), false)
        );
    }

    #[test]
    fn rtt_stats_drop_the_first_probes_and_count_the_lost() {
        let mut log = vec![probe(0, Some(900_000_000)), probe(1, None)];
        log.extend(
            [100, 300, 200, 400]
                .iter()
                .enumerate()
                .map(|(i, r)| probe(i as u64 + 2, Some(*r))),
        );
        log.push(probe(6, None));
        let s = rtt_stats(&log, 2);
        assert_eq!((s.probes, s.kept, s.lost), (7, 5, 1));
        assert_eq!((s.min, s.max), (Some(100.0), Some(400.0)));
        assert_eq!(s.median, Some(250.0));
        assert_eq!(s.mean, Some(250.0));
        assert!((s.std.unwrap() - 125f64.sqrt() * 10.0).abs() < 1e-9);
        let none = rtt_stats(&[probe(0, None)], 5);
        assert_eq!((none.kept, none.lost, none.min), (0, 0, None));
    }
}
