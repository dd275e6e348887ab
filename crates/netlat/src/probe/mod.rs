//! The latency probe's settings, results and entry point, shared by the closed-loop
//! ping-pong ([`pingpong`]) and the open-loop probe ([`openloop`]).
//!
//! Round trips are timed on the client only, with [`crate::clock::now_ns`]. A ping
//! unanswered after [`ProbeConfig::timeout`] counts as lost and the probe moves on, so
//! a probe always finishes: within `warmup + count * timeout` in count mode and within
//! `warmup + duration + timeout` in duration mode.

pub mod openloop;
pub mod pingpong;
pub mod series;

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use thiserror::Error;

use crate::hist::{HistLog, HistLogError, LatencyHist, LatencySummary};
use crate::sendbatch::SocketBuffer;
use crate::wire::{HEADER_LEN, MAX_UDP_PAYLOAD};

/// When a probe stops measuring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeLength {
    /// After this many measured pings (warm-up not included).
    Count(u64),
    /// After this much measuring time (warm-up not included).
    Duration(Duration),
}

/// Settings of one probe run.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The reflector to ping.
    pub target: SocketAddr,
    /// UDP payload size of each ping, header included (at least [`HEADER_LEN`]).
    pub msg_size: usize,
    /// When to stop.
    pub length: ProbeLength,
    /// Time spent pinging before measuring; those samples are discarded (the first
    /// packets of a flow are slow; sockperf discards 400 ms).
    pub warmup: Duration,
    /// Spin on a non-blocking socket instead of sleeping in `recv`.
    pub busy_poll: bool,
    /// CPU for the probing thread (the sender in open-loop mode).
    pub pin: Option<usize>,
    /// CPU for the open-loop receiver thread.
    pub recv_pin: Option<usize>,
    /// How long to wait for a pong before counting the ping as lost.
    pub timeout: Duration,
    /// Length of the intervals reported to the interval callback; `None` for none.
    pub interval: Option<Duration>,
    /// Open-loop send rate in pings per second; `None` for closed-loop ping-pong.
    pub rate_pps: Option<f64>,
}

impl ProbeConfig {
    /// Settings with nnb's defaults: 64-byte pings, 1000 pings, 400 ms warm-up,
    /// blocking receive, 1 s timeout, no pinning, closed loop.
    pub fn new(target: SocketAddr) -> Self {
        ProbeConfig {
            target,
            msg_size: 64,
            length: ProbeLength::Count(1000),
            warmup: Duration::from_millis(400),
            busy_poll: false,
            pin: None,
            recv_pin: None,
            timeout: Duration::from_secs(1),
            interval: None,
            rate_pps: None,
        }
    }

    /// Checks the settings, explaining what is wrong.
    pub fn validate(&self) -> Result<(), ProbeError> {
        let bad = |m: String| Err(ProbeError::Invalid(m));
        if self.msg_size < HEADER_LEN {
            return bad(format!(
                "message size {} is smaller than the {HEADER_LEN}-byte nnb header",
                self.msg_size
            ));
        }
        if self.msg_size > MAX_UDP_PAYLOAD {
            return bad(format!(
                "message size {} exceeds the largest UDP payload ({MAX_UDP_PAYLOAD})",
                self.msg_size
            ));
        }
        if self.timeout.is_zero() {
            return bad("the per-packet timeout must be above zero".into());
        }
        if self.interval.is_some_and(|i| i.is_zero()) {
            return bad("the reporting interval must be above zero".into());
        }
        if let Some(r) = self.rate_pps {
            if !(r.is_finite() && r > 0.0) {
                return bad(format!("open-loop rate {r} pings/s must be above zero"));
            }
        }
        Ok(())
    }
}

/// What happened to the pings of the measuring phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProbeCounts {
    /// Pings sent.
    pub sent: u64,
    /// Pings answered within the timeout (the RTT samples).
    pub answered: u64,
    /// Pings not answered within the timeout.
    pub lost: u64,
    /// Pongs that came after their timeout (already counted lost; no RTT sample).
    pub late: u64,
    /// Extra copies of pongs already received.
    pub duplicates: u64,
    /// Pongs that arrived after a pong of a later ping.
    pub reordered: u64,
    /// Datagrams that were not valid pongs of this probe.
    pub garbage: u64,
    /// Open loop: measured pings of the schedule never sent because the sender fell
    /// so far behind that the schedule's time was over (it stops there rather than
    /// run past `--duration`). Not counted in `sent` nor `lost`.
    #[serde(default)]
    pub unsent: u64,
}

impl ProbeCounts {
    /// Lost share of sent pings, 0.0 when none was sent.
    pub fn loss_ratio(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost as f64 / self.sent as f64
        }
    }
}

/// Result of a probe run.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// Reflector address.
    pub target: String,
    /// "ping-pong" or "open-loop".
    pub mode: &'static str,
    /// Open-loop rate in pings per second (absent for ping-pong).
    pub rate_pps: Option<f64>,
    /// UDP payload bytes per ping.
    pub msg_size: usize,
    /// Whether the receiver spun on a non-blocking socket.
    pub busy_poll: bool,
    /// Seconds of the measuring phase (warm-up excluded). Ping-pong: from the first
    /// measured ping to the end of the last one (its pong or its timeout). Open
    /// loop: the schedule of the pings sent, one period each (from the first one's
    /// intended send time to the last one's plus a period, or to its actual send
    /// when the sender ran late), or to the last accepted pong when that came
    /// later; the wait for pongs that never came is not included.
    pub elapsed_s: f64,
    /// Pings discarded as warm-up.
    pub warmup_pings: u64,
    /// Ping and pong counters of the measuring phase.
    pub counts: ProbeCounts,
    /// Round-trip times; in open-loop mode measured from the actual send time
    /// (not corrected for coordinated omission).
    pub rtt: LatencySummary,
    /// Open-loop only: round-trip times from the intended send time of each ping
    /// (corrected for coordinated omission).
    pub rtt_intended: Option<LatencySummary>,
    /// RTT/2 (one-way estimate, valid for a symmetric path), from `rtt`.
    pub rtt_half: LatencySummary,
    /// Samples above the histogram's 10 s ceiling (clamped).
    pub clamped: u64,
    /// Open-loop only: the receive buffer the pongs pile up in while the receiver is
    /// descheduled, asked for and granted (a capped one loses pongs in bursts).
    pub recv_buffer: Option<SocketBuffer>,
    /// The TTL the pongs of the RTT samples arrived with and the hops it suggests;
    /// `None` when the kernel reported none.
    pub reply_ttl: Option<ReplyTtl>,
}

/// The initial TTLs (IPv6: hop limits) senders start from: 64 (Linux, macOS), 128
/// (Windows), 255 (network equipment, Solaris); ascending.
pub const INITIAL_TTLS: [u8; 3] = [64, 128, 255];

/// The routers a datagram that arrived with `ttl` crossed, assuming its sender
/// started from the smallest of [`INITIAL_TTLS`] at or above it (each router takes
/// one off): 63 is 1 hop from 64, 99 is 29 hops from 128. A sender that starts
/// elsewhere (a socket's own `IP_TTL`) is not seen as such: the inference holds for
/// the usual defaults only.
pub fn hops_from_ttl(ttl: u8) -> u8 {
    let initial = INITIAL_TTLS
        .into_iter()
        .find(|&i| i >= ttl)
        .unwrap_or(u8::MAX);
    initial - ttl
}

/// Where the two ends of a probe are in the network, as the answers' IP TTL (IPv6:
/// hop limit) tells (Wang & Ng's network-location check, seed 003 §V.B, which
/// counted hops with traceroute): the TTLs the answers arrived with and the hops
/// between the reflector and the prober inferred from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ReplyTtl {
    /// The smallest TTL an answer arrived with.
    pub min: u8,
    /// The largest TTL an answer arrived with (the shortest path seen).
    pub max: u8,
    /// Routers between the reflector and the prober, from `max`
    /// ([`hops_from_ttl`]): 0 on one link or bridge, 1 through one router.
    pub hops: u8,
}

impl std::fmt::Display for ReplyTtl {
    /// `reply TTL 63: 1 hop from 64`, or with a range `reply TTL 61-63: ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "reply TTL ")?;
        if self.min != self.max {
            write!(f, "{}-", self.min)?;
        }
        let plural = if self.hops == 1 { "" } else { "s" };
        let initial = u16::from(self.max) + u16::from(self.hops);
        write!(f, "{}: {} hop{plural} from {initial}", self.max, self.hops)
    }
}

/// Gathers the TTLs answers arrived with into a [`ReplyTtl`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TtlRange(Option<(u8, u8)>);

impl TtlRange {
    /// Counts an answer's TTL (none: the kernel did not report it).
    pub(crate) fn see(&mut self, ttl: Option<u8>) {
        if let Some(t) = ttl {
            self.0 = Some(self.0.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
        }
    }

    /// The range seen and its hops; `None` when no answer had a TTL.
    pub(crate) fn report(self) -> Option<ReplyTtl> {
        self.0.map(|(min, max)| ReplyTtl {
            min,
            max,
            hops: hops_from_ttl(max),
        })
    }
}

/// One reporting interval's figures, passed to the interval callback.
///
/// Every ping sent and every pong accepted is counted in the interval it happened
/// in; after a stall (a ping-pong timeout longer than the interval, a descheduled
/// receiver) the intervals the stall covered come out, empty.
#[derive(Debug)]
pub struct Interval<'a> {
    /// Wall-clock time of the start of the measuring phase (after the warm-up),
    /// from which `start` counts.
    pub origin: SystemTime,
    /// Start of the interval, from the start of the measuring phase.
    pub start: Duration,
    /// Length of the interval (the last one may be short).
    pub length: Duration,
    /// Pings sent in the interval.
    pub sent: u64,
    /// Pongs accepted in the interval (RTT samples).
    pub answered: u64,
    /// RTTs of the interval (from the actual send time in open-loop mode).
    pub rtt: &'a LatencyHist,
    /// Open-loop only: RTTs from the intended send time.
    pub rtt_intended: Option<&'a LatencyHist>,
}

impl Interval<'_> {
    /// Writes this interval's histograms to an HDR interval log, tagged `rtt` (and
    /// `rtt_intended` in open-loop mode); under neighbor load each level's series
    /// apart, `rtt_level{n}` and `rtt_intended_level{n}` (n counted from 0). The
    /// one place these tags are made, for `nnb latency --hdr-log` and the agent.
    ///
    /// The interval's start is written as its offset from the log's `BaseTime`
    /// (`origin + start` minus the base time), so `BaseTime + StartTimestamp` is the
    /// wall-clock time the interval began, whatever warm-up or earlier levels came
    /// before. A log started after the measuring phase (it never is in nnb) puts
    /// intervals before its base time at offset 0.
    pub fn write_to<W: io::Write>(
        &self,
        log: &mut HistLog<W>,
        level: Option<usize>,
    ) -> Result<(), HistLogError> {
        let suffix = level.map_or_else(String::new, |n| format!("_level{n}"));
        let start = self
            .origin
            .duration_since(log.base_time())
            .unwrap_or(Duration::ZERO)
            + self.start;
        log.write(self.rtt, start, self.length, Some(&format!("rtt{suffix}")))?;
        if let Some(intended) = self.rtt_intended {
            let tag = format!("rtt_intended{suffix}");
            log.write(intended, start, self.length, Some(&tag))?;
        }
        Ok(())
    }
}

/// Why a probe could not run.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// The settings are unusable.
    #[error("invalid probe settings: {0}")]
    Invalid(String),
    /// A socket or thread operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: io::Error,
    },
    /// Pings were sent and not one was answered within the timeout: nothing that
    /// answers listens at the target (or the path drops everything), so there is
    /// no latency to report.
    #[error(
        "no answer from {target}: none of the {sent} pings sent was answered within {timeout:?}{}",
        late_note(*late)
    )]
    NoAnswer {
        /// The reflector that did not answer.
        target: SocketAddr,
        /// Pings sent while measuring.
        sent: u64,
        /// Pongs that came, but after their timeout.
        late: u64,
        /// The per-ping timeout.
        timeout: Duration,
    },
}

impl ProbeError {
    /// Whether the error is the user's to fix (invalid settings), not a failure of
    /// the network or the machine.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ProbeError::Invalid(_))
    }
}

/// The end of [`ProbeError::NoAnswer`]'s message: whether pongs came too late.
fn late_note(late: u64) -> String {
    if late == 0 {
        String::new()
    } else {
        format!(" ({late} pongs came after the timeout)")
    }
}

impl ProbeError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> ProbeError {
        let what = what.into();
        move |source| ProbeError::Io { what, source }
    }
}

/// Runs a probe: ping-pong, or open-loop when `cfg.rate_pps` is set. `stop` ends it
/// early (between pings); `on_interval` is called once per `cfg.interval`.
///
/// A probe that sent pings and got not one answer in time fails with
/// [`ProbeError::NoAnswer`] (its report would hold no latency at all); one with
/// some answers reports the rest as `counts.lost`.
pub fn run(
    cfg: &ProbeConfig,
    stop: &AtomicBool,
    on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
) -> Result<ProbeReport, ProbeError> {
    cfg.validate()?;
    let report = match cfg.rate_pps {
        None => pingpong::run(cfg, stop, on_interval),
        Some(rate) => openloop::run(cfg, rate, stop, on_interval),
    }?;
    let c = report.counts;
    if c.sent > 0 && c.answered == 0 {
        return Err(ProbeError::NoAnswer {
            target: cfg.target,
            sent: c.sent,
            late: c.late,
            timeout: cfg.timeout,
        });
    }
    Ok(report)
}

/// A UDP socket bound to an ephemeral port of the target's address family and
/// connected to `target`, so it only receives the target's datagrams.
pub fn connect_udp(target: SocketAddr) -> Result<UdpSocket, ProbeError> {
    connected_socket(target).map_err(|(what, source)| ProbeError::Io { what, source })
}

/// A probe's socket: [`connect_udp`], and each answer's TTL reported
/// ([`nnb_sys::ttl::recv`] reads it). A kernel that refuses to report it leaves the
/// probe without TTLs (`reply_ttl` null), not failed.
pub(crate) fn connect_probe(target: SocketAddr) -> Result<UdpSocket, ProbeError> {
    let sock = connect_udp(target)?;
    if let Err(e) = nnb_sys::ttl::set_recv_ttl(&sock, true) {
        tracing::warn!("the probe to {target} records no reply TTL: {e}");
    }
    Ok(sock)
}

/// [`connect_udp`] for callers with their own error type: a failure is what was
/// being done and the system's error.
pub(crate) fn connected_socket(target: SocketAddr) -> Result<UdpSocket, (String, io::Error)> {
    let local: SocketAddr = match target {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local).map_err(|e| ("binding a UDP socket".to_string(), e))?;
    sock.connect(target)
        .map_err(|e| (format!("connecting to {target}"), e))?;
    Ok(sock)
}

/// Pins the calling thread when asked to.
pub(crate) fn pin(cpu: Option<usize>) -> Result<(), ProbeError> {
    match cpu {
        Some(c) => nnb_sys::affinity::pin_current_thread(c)
            .map_err(std::io::Error::from)
            .map_err(ProbeError::io("pinning")),
        None => Ok(()),
    }
}

/// Tracks reporting intervals: when the current one ends and what it has seen.
///
/// The caller [advances](IntervalClock::advance) it to the time of each event
/// before counting the event, so every event lands in the interval it happened in.
/// An advance across several interval ends emits each of them: the first with what
/// was counted, the others (time the caller spent stalled, seeing nothing) empty.
pub(crate) struct IntervalClock {
    length_ns: Option<u64>,
    origin_ns: u64,
    origin_wall: SystemTime,
    start_ns: u64,
    /// The latest time advanced to.
    now_ns: u64,
    /// Open loop: measured ping `k` is due at `origin + k * period`, and an
    /// interval's sent pings are those of its schedule (the sender may be ahead of
    /// the receiver that emits the intervals). Also says to report `rtt_intended`.
    period_ns: Option<f64>,
    /// Measured pings sent so far, over all intervals (kept by the caller).
    pub sent_total: u64,
    /// `sent_total` at the start of the current interval.
    sent_base: u64,
    /// Pongs accepted in the current interval.
    pub answered: u64,
    /// RTTs of the current interval.
    pub rtt: LatencyHist,
    /// Intended-time RTTs of the current interval (open loop).
    pub rtt_intended: LatencyHist,
}

impl IntervalClock {
    /// Intervals of `length` starting at `origin_ns` (`None`: never due); with
    /// `period_ns`, of an open-loop probe sending a ping every `period_ns`.
    pub(crate) fn new(length: Option<Duration>, origin_ns: u64, period_ns: Option<f64>) -> Self {
        IntervalClock {
            length_ns: length.map(crate::clock::duration_ns),
            origin_ns,
            origin_wall: crate::clock::wall_time_of(origin_ns),
            start_ns: origin_ns,
            now_ns: origin_ns,
            period_ns,
            sent_total: 0,
            sent_base: 0,
            answered: 0,
            rtt: LatencyHist::new(),
            rtt_intended: LatencyHist::new(),
        }
    }

    /// Emits every interval that has ended by `now_ns`: the current one with its
    /// counts, then any further ones the time since covers, empty.
    pub(crate) fn advance(
        &mut self,
        now_ns: u64,
        on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
    ) {
        self.now_ns = self.now_ns.max(now_ns);
        let Some(len) = self.length_ns else {
            return;
        };
        while now_ns >= self.start_ns + len {
            self.emit(self.start_ns + len, on_interval);
        }
    }

    /// Ends the run at `end_ns` (or the latest time advanced to, when later):
    /// emits the intervals ended by then and the last, partial one when it saw
    /// any ping.
    pub(crate) fn finish(
        &mut self,
        end_ns: u64,
        on_interval: &mut (dyn FnMut(&Interval<'_>) + Send),
    ) {
        let end = end_ns.max(self.now_ns);
        self.advance(end, on_interval);
        if self.length_ns.is_some() && (self.sent_by(end) > self.sent_base || self.answered > 0) {
            self.emit(end, on_interval);
        }
    }

    /// Measured pings sent before `end_ns`, as far as known.
    fn sent_by(&self, end_ns: u64) -> u64 {
        match self.period_ns {
            Some(period) => {
                let due = (end_ns.saturating_sub(self.origin_ns) as f64 / period).ceil() as u64;
                self.sent_total.min(due)
            }
            None => self.sent_total,
        }
    }

    /// Emits the current interval as ending at `end_ns` and starts the next there.
    fn emit(&mut self, end_ns: u64, on_interval: &mut (dyn FnMut(&Interval<'_>) + Send)) {
        let sent_end = self.sent_by(end_ns).max(self.sent_base);
        on_interval(&Interval {
            origin: self.origin_wall,
            start: Duration::from_nanos(self.start_ns - self.origin_ns),
            length: Duration::from_nanos(end_ns.saturating_sub(self.start_ns)),
            sent: sent_end - self.sent_base,
            answered: self.answered,
            rtt: &self.rtt,
            rtt_intended: self.period_ns.is_some().then_some(&self.rtt_intended),
        });
        self.start_ns = end_ns;
        self.sent_base = sent_end;
        self.answered = 0;
        self.rtt.reset();
        self.rtt_intended.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hops_count_down_from_the_next_usual_initial_ttl() {
        for (ttl, hops) in [
            (64, 0),
            (63, 1),
            (1, 63),
            (65, 63),
            (128, 0),
            (99, 29),
            (129, 126),
            (200, 55),
            (255, 0),
            (0, 64),
        ] {
            assert_eq!(hops_from_ttl(ttl), hops, "TTL {ttl}");
        }
    }

    #[test]
    fn the_range_keeps_the_extremes_and_counts_hops_from_the_largest() {
        let mut r = TtlRange::default();
        r.see(None);
        assert_eq!(r.report(), None);
        for t in [62, 63, 61] {
            r.see(Some(t));
        }
        r.see(None);
        assert_eq!(
            r.report(),
            Some(ReplyTtl {
                min: 61,
                max: 63,
                hops: 1
            })
        );
        let shown = r.report().map(|t| t.to_string());
        assert_eq!(shown.as_deref(), Some("reply TTL 61-63: 1 hop from 64"));
        let one = ReplyTtl {
            min: 99,
            max: 99,
            hops: 29,
        };
        assert_eq!(one.to_string(), "reply TTL 99: 29 hops from 128");
        let json = serde_json::to_value(r.report()).unwrap();
        assert_eq!(json, serde_json::json!({"min": 61, "max": 63, "hops": 1}));
    }

    /// The tag of each interval line of an HDR interval log (`Tag=NAME,...`).
    fn tags(log: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(log)
            .lines()
            .filter_map(|l| l.strip_prefix("Tag="))
            .map(|l| l.split(',').next().unwrap_or_default().to_string())
            .collect()
    }

    #[test]
    fn interval_tags_name_the_series_and_the_level() {
        let mut rtt = LatencyHist::new();
        rtt.record(41_000);
        let mut intended = LatencyHist::new();
        intended.record(52_000);
        let iv = |open_loop: bool| Interval {
            origin: SystemTime::now(),
            start: Duration::ZERO,
            length: Duration::from_secs(1),
            sent: 1,
            answered: 1,
            rtt: &rtt,
            rtt_intended: open_loop.then_some(&intended),
        };
        let mut log = HistLog::new(Vec::new(), "test").unwrap();
        iv(false).write_to(&mut log, None).unwrap();
        iv(true).write_to(&mut log, None).unwrap();
        iv(true).write_to(&mut log, Some(2)).unwrap();
        assert_eq!(
            tags(&log.finish().unwrap()),
            [
                "rtt",
                "rtt",
                "rtt_intended",
                "rtt_level2",
                "rtt_intended_level2"
            ]
        );
    }
}
